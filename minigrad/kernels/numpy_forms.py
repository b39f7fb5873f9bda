"""Every kernel's NumPy form, each beside its plain twin: fast NumPy for the few forwards a step spends its time in.

Nothing here knows about Tensors or gradients. Each kernel computes exactly what
a plain NumPy expression computes, only faster, and says so twice: in its
docstring, and as runnable code, the ``plain`` function handed to ``@kernel``
(``kernel.py``). ``ops.py`` and ``fused/`` call the kernel with the plain
expression in a comment beside the call; under ``minigrad.composite_mode()``
every kernel runs its plain form instead, and the tests hold the two equal on
generated inputs (every branch, every threshold, every rank).

What makes them fast, in three tricks (the measurements are in
``benchmarks/README.md``):

* **BLAS for reductions.** NumPy reduces a short last axis one row at a time;
  a matrix-vector product with a vector of ones does all rows in one call.
* **In-place passes.** An elementwise formula in NumPy is one pass over memory
  per operation, each making a new array; writing into one buffer (``out=``)
  saves the allocations, and doing it a cache-sized block at a time
  (``blockwise``) keeps the later passes in cache.
* **Skipping work the answer does not need.** Attention's softmax shifts each
  row by its first score instead of its max (a max is the slowest pass), and
  redoes only the rare rows where that overflows.

The optional [fast] backend gives some kernels a compiled form too
(``numba_forms.py``, ``mkl_blas.py``); ``backend.py`` chooses which runs.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np

from .kernel import kernel

# --------------------------------------------------------------------------------------
# Elementwise
# --------------------------------------------------------------------------------------


def _add_plain(a, b):
    return a + b


@kernel(plain=_add_plain)
def add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a + b``. In NumPy it is its plain form; it is a kernel for its compiled form, which adds two
    same-shaped arrays on every core: the residual stream's additions and backward's sums of the gradients
    a tensor gets from its several uses, a memory-bound pass over a few megabytes each."""
    return a + b


def _power_plain(x, exponent):
    return x ** exponent


@kernel(plain=_power_plain)
def power(x: np.ndarray, exponent) -> np.ndarray:
    """``x ** exponent``: the exponents 3 and -0.5 as products and a square root.

    NumPy's general float power is far slower than a multiply (it already spells
    out 2 and 0.5 itself). ``(-0.0) ** -0.5`` is +inf and
    ``(-inf) ** -0.5`` is 0, as in C's pow, where 1 / sqrt gives -inf and NaN.
    """
    if exponent == 3:
        return x * x * x
    if exponent == -0.5 and x.dtype.kind == "f":
        out = np.sqrt(x, out=np.empty(x.shape, x.dtype))  # (out=: a 0-d x stays an array)
        out += 0.0  # -0.0 becomes +0.0
        np.reciprocal(out, out=out)
        np.copyto(out, 0, where=np.isneginf(x))
        return out
    return x ** exponent


# --------------------------------------------------------------------------------------
# Sums as BLAS products
# --------------------------------------------------------------------------------------


def _blas_summable(x: np.ndarray) -> bool:
    """Float32/64, C-contiguous (NumPy reduces other layouts well enough), and big enough to repay the call."""
    return x.dtype in (np.float32, np.float64) and x.ndim >= 2 and x.flags.c_contiguous and x.size >= 1024


@functools.lru_cache(maxsize=64)
def _ones(n: int, dtype: np.dtype) -> np.ndarray:
    """A read-only vector of n ones, made once: the other operand of the sums done as products."""
    ones = np.ones(n, dtype=dtype)
    ones.flags.writeable = False
    return ones


def _row_sum_plain(x, keepdims=False):
    return x.sum(axis=-1, keepdims=keepdims)


@kernel(plain=_row_sum_plain)
def row_sum(x: np.ndarray, keepdims: bool = False) -> np.ndarray:
    """``x.sum(axis=-1, keepdims=keepdims)``: for rows of 2 to 4096, one matrix-vector product with ones.

    BLAS adds a row in a few interleaved partial sums where NumPy sums pairwise:
    within a few float32 ulps for rows up to 4096. Longer rows, other dtypes and
    layouts take NumPy's own sum.
    """
    n = x.shape[-1] if x.ndim else 0
    if _blas_summable(x) and 1 < n <= 4096:
        total = x.reshape(-1, n) @ _ones(n, x.dtype)  # (rows,)
        return total.reshape(x.shape[:-1] + ((1,) if keepdims else ()))
    return x.sum(axis=-1, keepdims=keepdims)


def _sum_plain(x, axis=None, keepdims=False):
    return x.sum(axis=axis, keepdims=keepdims)


def _axis_tuple(axis, ndim: int) -> tuple | None:
    """``axis`` as a tuple of positive axes when every one is in range, else None (NumPy then decides)."""
    axes = axis if isinstance(axis, tuple) else (axis,)
    if not all(isinstance(a, int | np.integer) and -ndim <= a < ndim for a in axes):
        return None
    return tuple(sorted(int(a) % ndim for a in axes))


@kernel(plain=_sum_plain)
def sum(x: np.ndarray, axis=None, keepdims: bool = False) -> np.ndarray:
    """``x.sum(axis=axis, keepdims=keepdims)``: over the last axis by ``row_sum``; over leading axes as ones @ rows.

    The leading-axes case is a bias's gradient summed over batch and time: one
    (B*T,) @ (B*T, d) product instead of NumPy's reduction.
    """
    axes = None if axis is None or x.ndim < 2 else _axis_tuple(axis, x.ndim)
    if axes == (x.ndim - 1,):
        return row_sum(x, keepdims)
    if axes and len(axes) < x.ndim and axes == tuple(range(len(axes))) and _blas_summable(x):
        rows = x.reshape(-1, math.prod(x.shape[len(axes):]))  # (B*T, rest)
        total = _ones(rows.shape[0], x.dtype) @ rows
        return total.reshape((1,) * len(axes) * keepdims + x.shape[len(axes):])
    return x.sum(axis=axis, keepdims=keepdims)


def _mean_plain(x, axis=None, keepdims=False):
    return x.mean(axis=axis, keepdims=keepdims)


@kernel(plain=_mean_plain)
def mean(x: np.ndarray, axis=None, keepdims: bool = False) -> np.ndarray:
    """``x.mean(axis=axis, keepdims=keepdims)``: over the last axis, ``row_sum`` times 1/n."""
    if x.ndim >= 2 and _blas_summable(x) and _axis_tuple(axis, x.ndim) == (x.ndim - 1,):
        total = row_sum(x, keepdims)
        total *= np.asarray(1.0 / x.shape[-1], dtype=x.dtype)
        return total
    return x.mean(axis=axis, keepdims=keepdims)


def _row_dot_plain(a, b):
    return (a * b).sum(axis=-1, keepdims=True)


@kernel(plain=_row_dot_plain)
def row_dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``(a * b).sum(axis=-1, keepdims=True)``: one multiply-and-add pass, no (..., n) temporary."""
    return np.einsum("...i,...i->...", a, b)[..., None]


# --------------------------------------------------------------------------------------
# Matrix products
# --------------------------------------------------------------------------------------


def _matmul_plain(a, b):
    return a @ b


@kernel(plain=_matmul_plain)
def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b``: a stack of rows times one matrix, (B, T, K) @ (K, N), as one (B*T, K) @ (K, N) call.

    NumPy's batched matmul makes B calls, and hands BLAS no strided operand;
    the reshape makes one call (copying a strided ``a`` once).
    """
    if a.ndim > 2 and b.ndim == 2:
        rows = a.reshape(math.prod(a.shape[:-1]), a.shape[-1])  # (B*T, K); no -1, so zero sizes work too
        return (rows @ b).reshape(a.shape[:-1] + b.shape[-1:])
    return a @ b


def _linear_plain(x, weight, bias=None):
    out = x @ weight.T
    return out if bias is None else out + bias


def _add_promoting(out: np.ndarray, other: np.ndarray) -> np.ndarray:
    """``out + other``, in place in ``out`` unless NumPy would promote (float32 + float64: a float64 result)."""
    if other.dtype != out.dtype and np.result_type(out, other) != out.dtype:  # (the usual case: one dtype)
        return out + other
    out += other
    return out


@kernel(plain=_linear_plain)
def linear(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """``x @ weight.T + bias``: the batch folded into one BLAS call, the bias added in place."""
    rows = x.reshape(math.prod(x.shape[:-1]), x.shape[-1])  # (N, in); no -1, so zero sizes work too
    out = rows @ weight.T  # (N, out)
    if bias is not None:
        out = _add_promoting(out, bias)
    return out.reshape(x.shape[:-1] + weight.shape[:1])  # (..., out)


# --------------------------------------------------------------------------------------
# Softmax
# --------------------------------------------------------------------------------------


def stable_max(x: np.ndarray, axis) -> np.ndarray:
    """x's max over ``axis`` (kept) to shift exp by; 0 for a row that is all -inf (or holds NaN), so x - max
    stays finite. +inf stays: that row's finite entries then get exactly 0 weight (see ``_softmax_plain``)."""
    m = x.max(axis=axis, keepdims=True)
    return np.where(np.isneginf(m) | np.isnan(m), 0, m).astype(x.dtype, copy=False)


def _softmax_plain(x, axis=-1):
    m = x.max(axis=axis, keepdims=True)
    # A row of all -inf: shift by 0, not by -inf (NaN). A row holding +inf keeps it as its shift, so its
    # finite entries get exactly 0 (and the +inf one NaN, as in PyTorch), rather than overflowing exp.
    m = np.where(np.isneginf(m) | np.isnan(m), 0, m)
    e = np.exp(x - m)
    total = e.sum(axis=axis, keepdims=True)
    return e / np.where(total == 0, 1, total)  # an all -inf row: 0 / 1 = 0 weights


def _softmax_in_place(shifted: np.ndarray, axis) -> np.ndarray:
    """exp(shifted) / sum(exp(shifted)) over ``axis``, overwriting ``shifted`` (x minus its stable max)."""
    e = np.exp(shifted, out=shifted)
    last = e.ndim >= 2 and _axis_tuple(axis, e.ndim) == (e.ndim - 1,)
    total = row_sum(e, keepdims=True) if last else e.sum(axis=axis, keepdims=True)
    total[total == 0] = 1  # an all -inf row: 0 / 1 = 0 weights
    e /= total
    return e


@kernel(plain=_softmax_plain)
def softmax(x: np.ndarray, axis=-1) -> np.ndarray:
    """``exp(x - m) / sum(exp(x - m))`` over ``axis``, m the row max (0 for an all -inf row, which gives 0s)."""
    if x.ndim == 0 or x.dtype.kind != "f":
        return _softmax_plain(x, axis)  # (a 0-d x minus its max is a NumPy scalar, which cannot be written in)
    return _softmax_in_place(x - stable_max(x, axis), axis)


def _attention_weights_plain(q, k, bias=None, scale=1.0):
    scores = q @ k.swapaxes(-1, -2) * scale
    return _softmax_plain(scores if bias is None else scores + bias, axis=-1)


def _attention_scores(q: np.ndarray, k: np.ndarray, bias, scale) -> np.ndarray:
    """q @ k^T * scale + bias, (..., Tq, Tk), in one fresh array."""
    scores = q @ k.swapaxes(-1, -2)
    scores *= scale
    if bias is not None:
        if np.broadcast_shapes(scores.shape, bias.shape) == scores.shape:
            scores = _add_promoting(scores, bias)
        else:  # the bias has batch axes the scores lack
            scores = scores + bias
    return scores


def _softmax_rows_again(weights: np.ndarray, redo: np.ndarray, q, k, bias, scale) -> None:
    """Overwrite the rows of ``weights`` marked in ``redo`` (..., Tq, 1) by a softmax shifted by each row's max.

    Only the heads (the (Tq, Tk) matrices) holding such rows are computed again.
    """
    if weights.ndim == 2:  # unbatched: one head, given a leading axis so it can be picked like the others
        weights, redo, q, k = weights[None], redo[None], q[None], k[None]
        bias = None if bias is None else bias[None]
    lead = weights.shape[:-2]
    heads = np.nonzero(redo.any(axis=(-2, -1)))  # the leading indices of the heads concerned
    q_heads = np.broadcast_to(q, lead + q.shape[-2:])[heads]  # (n, Tq, E)
    k_heads = np.broadcast_to(k, lead + k.shape[-2:])[heads]  # (n, Tk, E)
    bias_heads = None if bias is None else np.broadcast_to(bias, weights.shape)[heads]  # (n, Tq, Tk)
    scores = _attention_scores(q_heads, k_heads, bias_heads, scale)
    scores -= stable_max(scores, -1)
    exact = _softmax_in_place(scores, -1)
    weights[heads] = np.where(redo[heads], exact, weights[heads])


@kernel(plain=_attention_weights_plain)
def attention_weights(q: np.ndarray, k: np.ndarray, bias: np.ndarray | None = None, scale=1.0) -> np.ndarray:
    """``softmax(q @ k.swapaxes(-1, -2) * scale + bias, axis=-1)``, shifting each row by its first score.

    Any entry of a row keeps the row's largest term >= 1, so nothing that
    matters underflows, and taking it is free where a row max is the slowest
    pass. exp overflows only if a row's scores span more than ~88 (float32);
    such rows, and rows whose first key is forbidden (-inf), sum to inf or NaN
    and are redone with their max. Each row depends on its own scores alone.
    """
    scores = _attention_scores(q, k, bias, scale)  # (..., Tq, Tk)
    with np.errstate(over="ignore", invalid="ignore"):
        scores -= scores[..., :1].copy()  # (..., Tq, Tk) minus (..., Tq, 1)
        weights = np.exp(scores, out=scores)
    total = row_sum(weights, keepdims=True)  # (..., Tq, 1)
    redo = ~np.isfinite(total)
    total[redo] = 1
    weights /= total
    if redo.any():
        _softmax_rows_again(weights, redo, q, k, bias, scale)
    return weights


def _softmax_grad_plain(out, g, axis=-1, scale=1.0):
    return scale * out * (g - (g * out).sum(axis=axis, keepdims=True))


@kernel(plain=_softmax_grad_plain)
def softmax_grad(out: np.ndarray, g: np.ndarray, axis=-1, scale=1.0) -> np.ndarray:
    """``scale * out * (g - (g * out).sum(axis=axis, keepdims=True))``: row dots in one pass, the rest in place."""
    if out.ndim >= 2 and _axis_tuple(axis, out.ndim) == (out.ndim - 1,) and out.shape == g.shape:
        dot = row_dot(g, out)  # (..., 1)
    else:
        dot = (g * out).sum(axis=axis, keepdims=True)
    grad = np.subtract(g, dot, dtype=np.result_type(g, out))
    grad *= out
    if scale != 1.0:
        grad *= scale  # in cache: grad was just written
    return grad


# --------------------------------------------------------------------------------------
# Gather's backward: adding rows into a table
# --------------------------------------------------------------------------------------


def _scatter_add_plain(g, index, shape):
    out = np.zeros(shape, dtype=g.dtype)
    np.add.at(out, index, g)
    return out


def _add_rows(out: np.ndarray, index: np.ndarray, g: np.ndarray) -> None:
    """out[index] += g with repeated indices accumulating, for an integer array indexing axis 0.

    Sorting the ids and summing each run of equal ones with ``np.add.reduceat``
    adds whole rows, where ``np.add.at`` goes one element at a time.
    """
    ids = index.ravel()
    if ids.size == 0:
        return
    ids = np.where(ids < 0, ids + out.shape[0], ids)  # NumPy's negative indices
    rows = g.reshape(ids.size, -1)  # (N, rest): g has the shape index.shape + out.shape[1:]
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    starts = np.flatnonzero(np.concatenate(([True], sorted_ids[1:] != sorted_ids[:-1])))  # each run's first
    out.reshape(out.shape[0], -1)[sorted_ids[starts]] += np.add.reduceat(rows[order], starts, axis=0)


def _has_array(index) -> bool:
    """True when an index uses advanced (array) indexing, where elements can repeat."""
    parts = index if isinstance(index, tuple) else (index,)
    return any(isinstance(p, np.ndarray) for p in parts)


@kernel(plain=_scatter_add_plain)
def scatter_add(g: np.ndarray, index, shape) -> np.ndarray:
    """``np.add.at(np.zeros(shape), index, g)``: by rows for an embedding's token ids, by assignment for slices."""
    out = np.zeros(shape, dtype=g.dtype)
    if isinstance(index, np.ndarray) and index.dtype.kind in "iu" and out.ndim >= 1:
        if index.size and ((index >= out.shape[0]) | (index < -out.shape[0])).any():
            raise IndexError(f"index {index[(index >= out.shape[0]) | (index < -out.shape[0])][0]} is out of "
                             f"bounds for axis 0 with size {out.shape[0]}")
        _add_rows(out, index, np.broadcast_to(g, index.shape + out.shape[1:]))
    elif _has_array(index):
        np.add.at(out, index, g)
    else:
        out[index] = g  # basic indexing selects each element at most once
    return out


# --------------------------------------------------------------------------------------
# erf and GELU
# --------------------------------------------------------------------------------------

# Elements per block for ``blockwise``: a block of GELU's input, its output and two
# temporaries (4 x 256 KiB in float32) stay in a core's L2 cache between passes.
BLOCK = 1 << 16


def blockwise(fn: Callable, x: np.ndarray, *more: np.ndarray, outputs: int = 1):
    """``fn(*outs, x, *more)`` over blocks of big arrays, so its many in-place passes run in cache.

    ``fn`` writes its ``outputs`` arrays (x's shape) from ``x`` and any ``more``
    arrays of x's shape; they are returned (one, or a tuple).
    """
    dtype = np.result_type(x, *more) if x.dtype.kind == "f" else np.float64
    flat = [np.ascontiguousarray(a, dtype=dtype).reshape(-1) for a in (x, *more)]
    outs = [np.empty(x.shape, dtype=dtype) for _ in range(outputs)]
    flat_outs = [out.reshape(-1) for out in outs]
    for start in range(0, x.size, BLOCK):
        block = slice(start, start + BLOCK)
        fn(*(out[block] for out in flat_outs), *(a[block] for a in flat))
    return outs[0] if outputs == 1 else tuple(outs)


def _float_dtype(x: np.ndarray) -> np.dtype:
    """float32 for float16/32, float64 otherwise (integers too, as NumPy's ufuncs promote them)."""
    return np.dtype(np.float32) if x.dtype in (np.float16, np.float32) else np.dtype(np.float64)


def _erf_plain(x):
    work = _float_dtype(x)
    values = np.asarray(np.frompyfunc(math.erf, 1, 1)(x.astype(np.float64)), dtype=np.float64)
    return values.astype(x.dtype if x.dtype.kind == "f" else work)


@functools.cache
def _erf_fits(dtype: np.dtype) -> tuple:
    """Chebyshev coefficients for erf in ``dtype``, fitted once to Python's math.erf and math.erfc.

    * |x| <= 1: erf(x) = x * P(x**2), P interpolating erf(sqrt t) / sqrt t on
      [0, 1]: smooth in t, and x * P keeps erf's relative accuracy near 0.
    * 1 < |x| < cutoff: erf(x) = 1 - exp(-x**2) * Q(|x|), Q interpolating
      erfc(z) * exp(z**2), which only falls from 0.43 to 0.09 there.
    * |x| >= cutoff: erfc(cutoff) is below the dtype's resolution at 1, so erf is 1.
    The degrees (10 and 24 for float64 with cutoff 6; 6 and 12 for float32 with
    cutoff 4) bring the error under about one unit in the last place.
    """
    from numpy.polynomial import Chebyshev

    def fit(f, degree, domain):
        return Chebyshev.interpolate(lambda ts: np.array([f(float(t)) for t in ts]), degree, domain=domain).coef

    near_degree, tail_degree, cutoff = (10, 24, 6.0) if dtype == np.float64 else (6, 12, 4.0)
    near = fit(lambda t: math.erf(math.sqrt(t)) / math.sqrt(t) if t > 0 else 2 / math.sqrt(math.pi),
               near_degree, [0, 1])
    tail = fit(lambda z: math.erfc(z) * math.exp(z * z), tail_degree, [1, cutoff])
    return near.astype(dtype), tail.astype(dtype), cutoff


def _chebyshev(coef: np.ndarray, s: np.ndarray) -> np.ndarray:
    """sum_k coef[k] T_k(s) for s in [-1, 1], by Clenshaw's recurrence with in-place passes."""
    later, latest, scratch = np.zeros_like(s), np.zeros_like(s), np.empty_like(s)  # b[k+2], b[k+1]
    two_s = s + s
    for c in coef[:0:-1]:
        np.multiply(two_s, latest, out=scratch)  # b[k] = c[k] + 2 s b[k+1] - b[k+2]
        scratch -= later
        scratch += c
        later, latest, scratch = latest, scratch, later
    latest *= s
    latest -= later
    latest += coef[0]
    return latest


def _erf_block(out: np.ndarray, x: np.ndarray) -> None:
    """out = erf(x) in x's dtype (float32 or float64), from ``_erf_fits``; NaN stays NaN, erf(+-inf) = +-1.

    Both pieces are evaluated on the whole block (clamped to their intervals) and
    the right one picked per element: cheaper than gathering each piece's elements.
    """
    near_coef, tail_coef, cutoff = _erf_fits(x.dtype)
    z = np.abs(x)
    zn = np.minimum(z, 1)
    t = zn * zn
    t += t
    t -= 1  # x**2 on [0, 1], mapped onto [-1, 1]
    near = _chebyshev(near_coef, t)
    near *= zn
    zt = np.clip(z, 1, cutoff)  # at the cutoff, 1 - erfc rounds to 1: |x| beyond it gets 1
    s = zt + zt
    s -= 1 + cutoff
    s /= cutoff - 1  # [1, cutoff] mapped onto [-1, 1]
    tail = _chebyshev(tail_coef, s)
    np.multiply(zt, zt, out=zt)
    np.negative(zt, out=zt)
    tail *= np.exp(zt, out=zt)
    np.subtract(1, tail, out=tail)
    np.copyto(out, tail)
    np.copyto(out, near, where=z <= 1)  # (NaN compares False: it keeps the tail's NaN)
    np.copysign(out, x, out=out)


def erf_chebyshev(x: np.ndarray) -> np.ndarray:
    """erf from two Chebyshev fits, block by block: within a few ulps of ``math.erf``, with no SciPy."""
    work = _float_dtype(x)
    out = blockwise(_erf_block, x.astype(work, copy=False))
    return out.astype(x.dtype if x.dtype.kind == "f" else work, copy=False)


@functools.cache
def scipy_erf():
    """SciPy's erf ufunc when SciPy is installed, else None. Looked up once: Python does not remember a
    failed import, and trying it again on every call cost more than erf itself on a small array."""
    try:
        from scipy.special import erf as found
    except ImportError:
        return None
    return found


@kernel(plain=_erf_plain)
def erf(x: np.ndarray) -> np.ndarray:
    """``math.erf`` of every element (NumPy has none): SciPy's erf when installed, else ``erf_chebyshev``."""
    if scipy_erf() is None:
        return erf_chebyshev(x)
    return np.asarray(scipy_erf()(x)).astype(x.dtype if x.dtype.kind == "f" else _float_dtype(x), copy=False)


# GELU's constants, here once: the fused ops' composites and numba_forms.py's loops use these.
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)  # tanh form: gate = (1 + tanh(SQRT_2_OVER_PI * (x + GELU_CUBIC x**3))) / 2
INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)  # phi(x) = INV_SQRT_2PI * exp(-x**2 / 2), the exact gate's slope
GELU_CUBIC = 0.044715
# Beyond |x| = 100 the tanh gate is exactly 0 or 1 (its argument is over 35,000) and its slope exactly 0, so the
# derivative's polynomial in x is evaluated at x clipped to this: x**3 there is finite where x itself would
# overflow (x = 1e20 in float32), and finite * 0 is 0 where inf * 0 would be NaN.
GELU_SATURATED = 100.0
# The exact gate in float32 (here and in the compiled loop) from Numerical Recipes' fit of erfc (Chebyshev-based):
# for z >= 0, erfc(z) = t exp(-z**2 + P(t)), t = 1 / (1 + z/2), P the polynomial with these coefficients
# (constant term first); fractional error under 1.2e-7 everywhere.
ERFC_FIT = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807, -1.13520398, 1.48851587,
            -0.82215223, 0.17087277)


def _gelu_gate_plain(x, approximate="none"):
    if approximate == "tanh":
        return 0.5 * (1.0 + np.tanh(SQRT_2_OVER_PI * (x + GELU_CUBIC * x ** 3)))
    return 0.5 * (1.0 + erf(x * (1 / math.sqrt(2.0))))  # (a Python float keeps float32 float32)


def _gelu_tanh_gate_block(gate: np.ndarray, x: np.ndarray) -> None:
    """gate = 0.5 * (1 + tanh(u)), u = SQRT_2_OVER_PI * (x + GELU_CUBIC x**3), written as 1 / (1 + exp(-2u)).

    The two are one function (0.5 (1 + tanh u) is the logistic of 2u), and NumPy's float32 exp
    is about twice as quick as its tanh. In place over ``gate``: -2u, exp, + 1, reciprocal. Where
    x is far below 0, exp(-2u) overflows to inf and the gate is exactly 0, as tanh's -1 gives;
    there the logistic is the more accurate of the two (1 + tanh u loses the digits of a tiny gate).
    """
    np.square(x, out=gate)  # (np.square is one read of x; np.multiply(x, x) reads it twice)
    gate *= -2 * SQRT_2_OVER_PI * GELU_CUBIC
    gate += -2 * SQRT_2_OVER_PI
    gate *= x  # -2u
    with np.errstate(over="ignore"):  # exp(-2u) = inf: the gate is 0
        np.exp(gate, out=gate)
    gate += 1.0
    np.divide(1.0, gate, out=gate)


def _gelu_erf_gate_block(gate: np.ndarray, x: np.ndarray) -> None:
    """gate = Phi(x) = erfc(-x / sqrt(2)) / 2 for float32 x, from ``ERFC_FIT``, in place over ``gate``.

    Phi(-|x|) = t exp(P(t) - x**2 / 2) / 2 with z = |x| / sqrt(2); where x > 0, 1 minus that. About
    thirty passes and one exp, where erf's two Chebyshev fits take some sixty: for float32's resolution
    the one fit is enough. Within 3e-7 of the gate, and within 2e-6 of itself where it is above 1e-6
    (x > -4.75); a smaller gate within about 1e-5 of itself, as x**2 / 2 rounds inside the exp.
    NaN stays NaN; x = -inf gives 0 and +inf gives 1.
    """
    t = np.abs(x)
    t *= 0.5 / math.sqrt(2.0)  # z / 2
    t += 1.0
    np.divide(1.0, t, out=t)
    np.multiply(t, ERFC_FIT[-1], out=gate)  # P(t) by Horner's rule
    for c in ERFC_FIT[-2:0:-1]:
        gate += c
        gate *= t
    gate += ERFC_FIT[0] - math.log(2.0)  # (Phi's factor 1/2, inside the exp)
    with np.errstate(over="ignore"):  # x**2 = inf: exp(-inf) = 0, the gate's limit
        half_square = np.square(x)
    half_square *= 0.5
    gate -= half_square
    np.exp(gate, out=gate)
    gate *= t  # Phi(-|x|)
    np.subtract(1.0, gate, out=gate, where=x > 0)  # Phi(x) = 1 - Phi(-x)


@kernel(plain=_gelu_gate_plain)
def gelu_gate(x: np.ndarray, approximate: str = "none") -> np.ndarray:
    """GELU's gate, the factor multiplying x: ``0.5 * (1 + erf(x / sqrt(2)))`` (Phi(x)) or its tanh form.

    The tanh form goes block by block in place, and so does the exact one in float32 (one erfc fit);
    in other dtypes the exact one is erf plus two in-place passes.
    """
    if approximate == "tanh":
        return blockwise(_gelu_tanh_gate_block, x)
    if x.dtype == np.float32:
        return blockwise(_gelu_erf_gate_block, x)
    gate = erf(x * (1 / math.sqrt(2.0)))
    gate += 1.0
    gate *= 0.5
    return gate


def _gelu_plain(x, approximate="none"):
    gate = _gelu_gate_plain(x, approximate)
    return x * gate, gate


def _gelu_tanh_block(out: np.ndarray, gate: np.ndarray, x: np.ndarray) -> None:
    _gelu_tanh_gate_block(gate, x)
    np.multiply(x, gate, out=out)


def _gelu_erf_block(out: np.ndarray, gate: np.ndarray, x: np.ndarray) -> None:
    _gelu_erf_gate_block(gate, x)
    np.multiply(x, gate, out=out)


@kernel(plain=_gelu_plain)
def gelu(x: np.ndarray, approximate: str = "none") -> tuple[np.ndarray, np.ndarray]:
    """``(x * gate, gate)``, gate = ``gelu_gate(x, approximate)``: GELU and the gate its backward reuses."""
    if approximate == "tanh":
        return blockwise(_gelu_tanh_block, x, outputs=2)
    if x.dtype == np.float32:
        return blockwise(_gelu_erf_block, x, outputs=2)
    gate = gelu_gate(x)
    return x * gate, gate


def _gelu_grad_plain(x, g, gate, approximate="none"):
    if approximate == "tanh":
        x = np.clip(x, -GELU_SATURATED, GELU_SATURATED)  # (the gate's slope is 0 beyond)
        du = SQRT_2_OVER_PI * (1.0 + 3 * GELU_CUBIC * x * x)  # d/dx of tanh's argument u
        return g * gate * (1.0 + 2.0 * x * du * (1.0 - gate))  # gate' = 2 gate (1 - gate) du
    return g * (gate + x * np.exp(-0.5 * x * x) * INV_SQRT_2PI)  # Phi(x) + x phi(x)


def _gelu_tanh_grad_block(out: np.ndarray, x: np.ndarray, gate: np.ndarray, g: np.ndarray) -> None:
    x = np.clip(x, -GELU_SATURATED, GELU_SATURATED)  # (a block-sized copy; the gate's slope is 0 beyond)
    np.square(x, out=out)
    out *= 6 * SQRT_2_OVER_PI * GELU_CUBIC
    out += 2 * SQRT_2_OVER_PI
    out *= x  # 2 x du
    out *= np.subtract(1.0, gate)
    out += 1.0
    out *= gate
    out *= g


def _gelu_erf_grad_block(out: np.ndarray, x: np.ndarray, gate: np.ndarray, g: np.ndarray) -> None:
    np.square(x, out=out)
    out *= -0.5
    np.exp(out, out=out)
    out *= x
    out *= INV_SQRT_2PI
    out += gate
    out *= g


@kernel(plain=_gelu_grad_plain)
def gelu_grad(x: np.ndarray, g: np.ndarray, gate: np.ndarray, approximate: str = "none") -> np.ndarray:
    """g * gelu'(x) from the gate: ``g * (gate + x * phi(x))`` exact, ``g * gate * (1 + 2 x u' (1 - gate))`` tanh.

    With the gate at hand neither tanh nor erf is computed again; block by block, in place.
    """
    g = np.broadcast_to(g, x.shape)  # a view; blockwise copies it only if it is not x-shaped already
    block = _gelu_tanh_grad_block if approximate == "tanh" else _gelu_erf_grad_block
    return blockwise(block, x, gate, g)


# --------------------------------------------------------------------------------------
# Layer norm
# --------------------------------------------------------------------------------------


def _standardise_plain(x, eps):
    xc = x - x.mean(axis=-1, keepdims=True)
    rstd = 1.0 / np.sqrt((xc * xc).mean(axis=-1, keepdims=True) + eps)
    return xc * rstd, rstd


@kernel(plain=_standardise_plain)
def standardise(x: np.ndarray, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """``(xc * rstd, rstd)``, xc = x minus its row mean, rstd = 1 / sqrt(mean(xc**2) + eps), over the last axis.

    Row sums by ``row_sum`` and ``row_dot``; xhat is built in one array, in place.
    """
    if x.shape[-1] == 0:
        return _standardise_plain(x, eps)  # no features: NumPy's empty means, NaN and all
    inv_n = np.asarray(1.0 / x.shape[-1], dtype=x.dtype)
    xhat = x - row_sum(x, keepdims=True) * inv_n  # (..., n), a fresh array
    var = row_dot(xhat, xhat) * inv_n  # (..., 1)
    rstd = 1.0 / np.sqrt(var + np.asarray(eps, dtype=x.dtype))
    xhat *= rstd
    return xhat, rstd


def _layer_norm_affine_plain(x, weight, bias, eps):
    xhat, rstd = _standardise_plain(x, eps)
    return xhat * weight + bias, xhat, rstd


@kernel(plain=_layer_norm_affine_plain)
def layer_norm_affine(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float):
    """``(xhat * weight + bias, xhat, rstd)``, (xhat, rstd) = ``standardise(x, eps)``: a layer norm's output and
    what its backward keeps, in one call. (Here three passes; the compiled form writes both in one.)"""
    xhat, rstd = standardise(x, eps)
    out = xhat * weight  # a new array: xhat is kept for the backward
    out += bias
    return out, xhat, rstd


def _layer_norm_grad_plain(g, xhat, rstd, weight=None):
    v = g if weight is None else g * weight
    return rstd * (v - v.mean(axis=-1, keepdims=True) - xhat * (v * xhat).mean(axis=-1, keepdims=True))


@kernel(plain=_layer_norm_grad_plain)
def layer_norm_grad(g: np.ndarray, xhat: np.ndarray, rstd: np.ndarray, weight: np.ndarray | None = None):
    """``rstd * (v - mean(v) - xhat * mean(v * xhat))`` over the last axis, v = g * weight: in place on v."""
    if xhat.shape[-1] == 0:
        return _layer_norm_grad_plain(g, xhat, rstd, weight)
    inv_n = np.asarray(1.0 / xhat.shape[-1], dtype=xhat.dtype)
    v = g * weight if weight is not None else np.array(g, dtype=np.result_type(g, xhat))  # (..., n), ours
    mean_v = row_sum(v, keepdims=True)  # (..., 1), scaled by 1/n below
    mean_v_xhat = row_dot(v, xhat)  # (..., 1), scaled by 1/n below
    v -= mean_v * inv_n
    v -= xhat * (mean_v_xhat * inv_n)
    v *= rstd
    return v


def _rms_norm_plain(x, weight, eps):
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * weight


@kernel(plain=_rms_norm_plain)
def rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """``x / sqrt(mean(x**2) + eps) * weight`` over the last axis: the mean square by ``row_dot``."""
    if x.shape[-1] == 0:
        return _rms_norm_plain(x, weight, eps)
    mean_square = row_dot(x, x) * np.asarray(1.0 / x.shape[-1], dtype=x.dtype)  # (..., 1)
    out = x * (1.0 / np.sqrt(mean_square + np.asarray(eps, dtype=x.dtype)))  # (..., n)
    if weight.dtype != out.dtype and np.result_type(out, weight) != out.dtype:  # (float64 weight, float32 x)
        return out * weight
    out *= weight
    return out


# --------------------------------------------------------------------------------------
# Cross-entropy
# --------------------------------------------------------------------------------------


def _cross_entropy_plain(logits, targets):
    shift = logits.max(axis=-1, keepdims=True)
    lse = np.log(np.exp(logits - shift).sum(axis=-1)) + shift[:, 0]
    return lse - logits[np.arange(len(targets)), targets]


@kernel(plain=_cross_entropy_plain)
def cross_entropy(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """``logsumexp(logits[r]) - logits[r, targets[r]]`` for each row r of (N, C) logits: (N,) losses.

    The row max shifts exp (as in the plain form); exp is taken in place and the rows summed by ``row_sum``.
    """
    shift = logits.max(axis=-1, keepdims=True)  # (N, 1)
    shifted = logits - shift  # (N, C), ours
    total = row_sum(np.exp(shifted, out=shifted))  # (N,)
    lse = np.log(total, out=total)
    lse += shift[:, 0]
    lse -= logits[np.arange(len(targets)), targets]
    return lse


def _cross_entropy_grad_plain(logits, targets, row_weight):
    p = _softmax_plain(logits, axis=-1)
    p[np.arange(len(targets)), targets] -= 1
    return p * row_weight[:, None]


@kernel(plain=_cross_entropy_grad_plain)
def cross_entropy_grad(logits: np.ndarray, targets: np.ndarray, row_weight: np.ndarray) -> np.ndarray:
    """``(softmax(logits) - onehot(targets)) * row_weight[:, None]``: cross-entropy's gradient for (N, C) logits.

    ``row_weight`` (N,) is each row's share of the loss (1/kept rows for a mean, 0 for an ignored row,
    times the gradient arriving at the loss). The softmax kernel's output is corrected at the targets in place.
    """
    p = softmax(logits, -1)  # (N, C), a fresh array
    p[np.arange(len(targets)), targets] -= 1
    if np.result_type(p, row_weight) != p.dtype:
        return p * row_weight[:, None]
    p *= row_weight[:, None]
    return p


# --------------------------------------------------------------------------------------
# The Adam update
# --------------------------------------------------------------------------------------


def _adam_update_plain(p, g, m, v, lr, beta1, beta2, eps, step, decay=1.0):
    p *= decay
    m[...] = beta1 * m + (1 - beta1) * g
    v[...] = beta2 * v + (1 - beta2) * g * g
    m_hat = m / (1 - beta1 ** step)
    v_hat = v / (1 - beta2 ** step)
    p -= lr * m_hat / (np.sqrt(v_hat) + eps)


@kernel(plain=_adam_update_plain)
def adam_update(p: np.ndarray, g: np.ndarray, m: np.ndarray, v: np.ndarray, lr: float, beta1: float, beta2: float,
                eps: float, step: int, decay: float = 1.0) -> None:
    """One Adam step of the parameter ``p``, in place in p and its moments m and v (all of p's shape):

    ``p *= decay`` (AdamW's decoupled decay; 1 for none), ``m = beta1 m + (1 - beta1) g``,
    ``v = beta2 v + (1 - beta2) g**2``, ``p -= lr * m_hat / (sqrt(v_hat) + eps)`` with the bias-corrected
    ``m_hat = m / (1 - beta1**step)``, ``v_hat = v / (1 - beta2**step)``. Python floats for the numbers keep
    a float32 parameter in float32.

    In place, through one scratch array: the update is a dozen passes over every parameter, and fresh
    temporaries would make each one a trip to memory. The bias corrections are folded into a scalar step
    size and the denominator; m's update is written as PyTorch's lerp, ``m + (1 - beta1) (g - m)``.
    """
    if decay != 1.0:
        p *= decay
    scratch = np.subtract(g, m, out=np.empty_like(m))  # (out=: a 0-d parameter's would be a scalar)
    scratch *= 1 - beta1
    m += scratch
    v *= beta2
    np.multiply(g, g, out=scratch)
    scratch *= 1 - beta2
    v += scratch
    denom = np.sqrt(v, out=scratch)
    denom *= 1 / math.sqrt(1 - beta2 ** step)
    denom += eps
    update = np.divide(m, denom, out=scratch)
    update *= lr / (1 - beta1 ** step)
    p -= update
