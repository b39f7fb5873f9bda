"""The layers' kernels in NumPy, each beside its plain twin: erf and GELU, layer norm, cross-entropy, Adam.

As in ``numpy_forms.py`` (read it first: what a kernel is, and the three tricks
that make these fast), each kernel computes exactly what its ``plain`` function
computes, only faster; here most of the speed comes from ``blockwise``: many
in-place passes over one cache-sized block at a time.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np

from .kernel import kernel
from .numpy_forms import _softmax_plain, row_dot, row_sum, softmax

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
