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
