"""The [fast] backend's compiled forms of the elementwise kernels: numba loops, most parallel over rows.

Loaded by ``backend.py`` only when numba is installed (``pip install -e '.[fast]'``)
and ``MINIGRAD_BACKEND`` is not ``numpy``. Each function here is a third form
of a kernel of ``numpy_forms.py`` or ``numpy_layer_forms.py``, computing what its plain form computes;
``tests/engine/test_kernels.py`` holds it to the plain form on the same generated
inputs as the NumPy form. Each handles float32 arrays whose rows are
contiguous (what a training step hands it) and passes anything else to the
kernel's NumPy form, as the parallel ones do with arrays under ``NUMPY_BELOW``
elements.

Why it is faster: NumPy makes one pass over memory per operation of a
formula, each writing a fresh array; a compiled loop does the whole formula
per element, in registers, on every core (``prange``).

numba's own ``exp`` and ``tanh`` call the C library one element at a time
(PyPI's numba has no vector math library), slower than NumPy's SIMD loops.
``_exp32`` below is written so LLVM vectorises it: exp(x) = 2^n * exp(r) with
n = round(x / ln 2) and |r| <= ln(2) / 2, exp(r) by its Taylor polynomial to
r^7 (error under 1e-9, so under 2 ulps after rounding), and 2^n made by
writing n into a float's exponent bits. Results below the smallest normal
float32 (x < -87.34) are flushed to 0: arithmetic on subnormal numbers is many
times slower, and a masked attention score (-inf) is half of a causal matrix.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import prange
from numba.core import types
from numba.extending import intrinsic

from .numpy_layer_forms import ERFC_FIT, GELU_CUBIC, GELU_SATURATED, INV_SQRT_2PI, SQRT_2_OVER_PI

_F32 = np.float32
_LOG2E = _F32(1.4426950408889634)
_LN2_HI = _F32(0.693145751953125)  # ln 2 split in two, so n * _LN2_HI is exact for |n| < 2^12
_LN2_LO = _F32(1.428606765330187e-06)
# GELU's constants (numpy_layer_forms.py) as float32, so the loops stay in float32
_SQRT_2_OVER_PI = _F32(SQRT_2_OVER_PI)
_GELU_CUBIC = _F32(GELU_CUBIC)
_GELU_SATURATED = _F32(GELU_SATURATED)  # x clipped to +-this in the gradient: x**2 stays finite
_INV_SQRT_2PI = _F32(INV_SQRT_2PI)
# The exact gate's fit of erfc (numpy_layer_forms.ERFC_FIT) in float32; its constant term with Phi's factor 1/2
# folded in (as ln 1/2, inside the exp).
_E1, _E2, _E3, _E4, _E5, _E6, _E7, _E8, _E9 = (_F32(c) for c in ERFC_FIT[1:])
_ERFC_C0_HALF = _F32(ERFC_FIT[0] - math.log(2.0))
_HALF_OVER_SQRT2 = _F32(0.5 / math.sqrt(2.0))

# Below this many elements (in its first argument) a parallel form hands the call to the NumPy form. On idle
# cores a parallel loop is the quicker down to 16 elements, but it waits for every thread of the pool, and on a
# busy machine a thread can wait a scheduler's time slice (milliseconds) where NumPy's form of a small array
# takes microseconds; above this the work repays the risk. (The measurements: benchmarks/README.md.)
NUMPY_BELOW = 4096
# A form whose loop does one addition per element waits on memory, not arithmetic: its parallel loop gains only
# where the arrays outgrow one core's cache (``python -m benchmarks.kernel_forms``; benchmarks/README.md).
NUMPY_BELOW_FOR = {"add": 1 << 16}
SERIAL = {"adam_update"}  # forms without a parallel loop: they never wait for a pool, so no threshold

jit = numba.njit(cache=True, fastmath=False, error_model="numpy")
pjit = numba.njit(cache=True, fastmath=False, error_model="numpy", parallel=True)


@intrinsic
def _bits_to_float32(typingctx, bits):
    """The float32 whose bit pattern is the int32 ``bits`` (an LLVM bitcast: free, and vectorisable)."""
    sig = types.float32(types.int32)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.float32))

    return sig, codegen


@numba.njit(inline="always", cache=True, error_model="numpy")
def _exp32(x):
    """exp(x) in float32, within 2 ulps, for results that are normal floats; exp(inf) = inf, NaN stays NaN.

    Results below float32's smallest normal number (x < -87.34) are 0: arithmetic on
    subnormal numbers is many times slower (a masked attention score is -inf, half of
    each causal matrix), and a weight or a gate of 1e-38 counts for nothing anyway.
    """
    c = min(max(x, _F32(-87.33654)), _F32(88.72283))  # beyond these, 0 and inf (NaN: handled below)
    n = np.float32(np.rint(c * _LOG2E))
    r = (c - n * _LN2_HI) - n * _LN2_LO
    p = _F32(1.0 / 5040)
    p = p * r + _F32(1.0 / 720)
    p = p * r + _F32(1.0 / 120)
    p = p * r + _F32(1.0 / 24)
    p = p * r + _F32(1.0 / 6)
    p = p * r + _F32(0.5)
    p = p * r + _F32(1.0)
    p = p * r + _F32(1.0)
    k = np.int32(n)
    half = k // 2  # 2^n as 2^half * 2^(n - half): n runs from -126 to 128, each factor stays a normal float
    out = p * _bits_to_float32((half + 127) << 23) * _bits_to_float32((k - half + 127) << 23)
    if x > _F32(88.72283):
        out = _F32(np.inf)
    if x < _F32(-87.33654):
        out = _F32(0.0)
    if x != x:
        out = x
    return out


# --------------------------------------------------------------------------------------
# Sums over a row, in any order: ``reassoc`` lets LLVM vectorise them. (A function of its
# own, so that only these additions may be reordered: never exp's range reduction.)
# --------------------------------------------------------------------------------------

_sum_jit = numba.njit(cache=True, error_model="numpy", fastmath={"reassoc"})


@_sum_jit
def _row_total(a, r):
    """sum of a[r, :] in float64."""
    total = np.float64(0.0)
    for j in range(a.shape[1]):
        total += np.float64(a[r, j])
    return total


@_sum_jit
def _row_dot(a, b, r):
    """sum of a[r, :] * b[r, :] in float64."""
    total = np.float64(0.0)
    for j in range(a.shape[1]):
        total += np.float64(a[r, j]) * np.float64(b[r, j])
    return total


@_sum_jit
def _row_dot_weighted(g, w, xhat, r):
    """(sum of g[r] * w, sum of g[r] * w * xhat[r]) in float64."""
    sum_v = np.float64(0.0)
    sum_vx = np.float64(0.0)
    for j in range(g.shape[1]):
        v = np.float64(g[r, j] * w[j])
        sum_v += v
        sum_vx += v * np.float64(xhat[r, j])
    return sum_v, sum_vx


# --------------------------------------------------------------------------------------
# GELU: one flat loop per formula (a flat prange is what LLVM vectorises)
# --------------------------------------------------------------------------------------


@pjit
def _gelu_tanh(x, out, gate):
    for i in prange(x.size):
        v = x[i]
        u = _SQRT_2_OVER_PI * (v + _GELU_CUBIC * v * v * v)
        s = _F32(1.0) / (_F32(1.0) + _exp32(_F32(-2.0) * u))  # (1 + tanh u) / 2, as a logistic: no cancellation
        gate[i] = s
        out[i] = v * s


@pjit
def _gelu_erf(x, out, gate):
    for i in prange(x.size):
        v = x[i]
        t = _F32(1.0) / (_F32(1.0) + _HALF_OVER_SQRT2 * abs(v))  # 1 / (1 + z/2), z = |v| / sqrt(2)
        p = ((((((((_E9 * t + _E8) * t + _E7) * t + _E6) * t + _E5) * t + _E4) * t + _E3) * t + _E2) * t + _E1) * t
        lower = t * _exp32(p + _ERFC_C0_HALF - _F32(0.5) * v * v)  # Phi(-|v|) = erfc(z) / 2
        s = _F32(1.0) - lower if v > _F32(0.0) else lower
        gate[i] = s
        out[i] = v * s


@pjit
def _gelu_tanh_grad(x, g, gate, out):
    for i in prange(x.size):
        v, s = min(max(x[i], -_GELU_SATURATED), _GELU_SATURATED), gate[i]  # (the gate's slope is 0 beyond)
        du = _SQRT_2_OVER_PI * (_F32(1.0) + _F32(3.0) * _GELU_CUBIC * v * v)
        out[i] = g[i] * s * (_F32(1.0) + _F32(2.0) * v * du * (_F32(1.0) - s))


@pjit
def _gelu_erf_grad(x, g, gate, out):
    for i in prange(x.size):
        v = x[i]
        out[i] = g[i] * (gate[i] + v * _exp32(_F32(-0.5) * v * v) * _INV_SQRT_2PI)


@pjit
def _add_flat(a, b, out):
    for i in prange(a.size):
        out[i] = a[i] + b[i]


# --------------------------------------------------------------------------------------
# Softmax over rows
# --------------------------------------------------------------------------------------


_LANES = 8  # running maxima side by side in a row's max (_softmax_rows_biased): one AVX register of float32


@pjit
def _softmax_rows_biased(x, bias, out, scale):
    """out[r] = softmax(x[r] * scale + bias[r % len(bias)]), with the plain form's shift: the row max, 0 for an
    all -inf or NaN max.

    The row max is kept in ``_LANES`` running maxima side by side, merged at the row's end: one running max
    is a chain of compares, each waiting for the last, which LLVM does not vectorise (NaN's rules forbid
    reordering it). The biased scores are written to ``out`` on the way, for the exp pass to read."""
    rows, n = x.shape
    bias_rows = bias.shape[0]
    whole = n - n % _LANES
    for r in prange(rows):
        b = r % bias_rows
        lane = np.full(_LANES, -np.inf, _F32)
        nans = 0
        for j0 in range(0, whole, _LANES):
            for k in range(_LANES):
                v = x[r, j0 + k] * scale + bias[b, j0 + k]
                out[r, j0 + k] = v
                nans += v != v
                lane[k] = v if v > lane[k] else lane[k]
        m = _F32(-np.inf)
        for k in range(_LANES):
            m = lane[k] if lane[k] > m else m
        for j in range(whole, n):  # (the row's last n % _LANES scores)
            v = x[r, j] * scale + bias[b, j]
            out[r, j] = v
            nans += v != v
            m = v if v > m else m
        if nans or m == -np.inf:
            m = _F32(0.0)
        for j in range(n):
            out[r, j] = _exp32(out[r, j] - m)
        total = np.float32(_row_total(out, r))
        if total == 0:
            total = _F32(1.0)
        for j in range(n):
            out[r, j] = out[r, j] / total


def _softmax_rows(x, out, scale):
    """out[r] = softmax(x[r] * scale): the biased loop with a bias of one row of zeros."""
    _softmax_rows_biased(x, np.zeros((1, x.shape[1]), x.dtype), out, scale)


@pjit
def _softmax_grad_rows(out, g, grad, scale):
    rows, n = out.shape
    for r in prange(rows):
        d = np.float32(_row_dot(g, out, r))
        for j in range(n):
            grad[r, j] = scale * out[r, j] * (g[r, j] - d)


# --------------------------------------------------------------------------------------
# Layer norm
# --------------------------------------------------------------------------------------


@numba.njit(inline="always", cache=True, error_model="numpy")
def _centre_row(x, r, eps, xhat, rstd):
    """xhat[r] = x[r] minus its mean, rstd[r] = 1 / sqrt(mean(xhat[r]**2) + eps); returns rstd[r] (xhat[r] is
    left unscaled: the callers scale it in their own pass)."""
    n = x.shape[1]
    mean = np.float32(_row_total(x, r) / n)
    for j in range(n):
        xhat[r, j] = x[r, j] - mean
    s = np.float32(1.0) / np.sqrt(np.float32(_row_dot(xhat, xhat, r) / n) + eps)
    rstd[r, 0] = s
    return s


@pjit
def _standardise_rows(x, eps, xhat, rstd):
    for r in prange(x.shape[0]):
        s = _centre_row(x, r, eps, xhat, rstd)
        for j in range(x.shape[1]):
            xhat[r, j] = xhat[r, j] * s


@pjit
def _standardise_affine_rows(x, eps, weight, bias, xhat, rstd, out):
    """``_standardise_rows``, and out = xhat * weight + bias written in the same pass over each row."""
    for r in prange(x.shape[0]):
        s = _centre_row(x, r, eps, xhat, rstd)
        for j in range(x.shape[1]):
            v = xhat[r, j] * s
            xhat[r, j] = v
            out[r, j] = v * weight[j] + bias[j]


@pjit
def _layer_norm_grad_rows(g, xhat, rstd, weight, out):
    rows, n = g.shape
    for r in prange(rows):
        sum_v, sum_vx = _row_dot_weighted(g, weight, xhat, r)
        mean_v = np.float32(sum_v / n)
        mean_vx = np.float32(sum_vx / n)
        s = rstd[r, 0]
        for j in range(n):
            out[r, j] = s * (g[r, j] * weight[j] - mean_v - xhat[r, j] * mean_vx)


# --------------------------------------------------------------------------------------
# Cross-entropy and the Adam update
# --------------------------------------------------------------------------------------


@pjit
def _cross_entropy_rows(x, targets, scratch, losses):
    """losses[r] = log(sum(exp(x[r] - m))) + m - x[r, targets[r]], m the row max (as the plain form); the
    exps go through ``scratch`` so that their sum is ``_row_total``'s vectorised one."""
    rows, n = x.shape
    for r in prange(rows):
        m = x[r, 0]
        for j in range(1, n):
            v = x[r, j]
            m = v if v > m or v != v else m  # (NaN wins, as NumPy's max)
        for j in range(n):
            scratch[r, j] = _exp32(x[r, j] - m)
        losses[r] = np.float32(np.log(_row_total(scratch, r))) + m - x[r, targets[r]]


@pjit
def _cross_entropy_grad_rows(x, targets, row_weight, grad):
    """grad[r] = (softmax(x[r]) - onehot(targets[r])) * row_weight[r], softmax as the softmax kernel's."""
    rows, n = x.shape
    for r in prange(rows):
        m = _F32(-np.inf)
        nan = False
        for j in range(n):
            v = x[r, j]
            nan |= v != v
            m = v if v > m else m
        if nan or m == -np.inf:
            m = _F32(0.0)
        for j in range(n):
            grad[r, j] = _exp32(x[r, j] - m)
        total = np.float32(_row_total(grad, r))
        if total == 0:
            total = _F32(1.0)
        w = row_weight[r]
        for j in range(n):
            grad[r, j] = (grad[r, j] / total) * w
        grad[r, targets[r]] -= w


@jit
def _adam_update_flat(p, g, m, v, decay, one_minus_beta1, beta2, one_minus_beta2, inv_correction2, eps, step_size):
    """The whole update in one pass over p, g, m and v (NumPy's form makes a dozen). On one thread: it is
    called once per parameter, and a parallel loop's start (waking the pool, waiting for each thread)
    costs more than the pass itself unless every core is idle."""
    for i in range(p.size):
        gi = g[i]
        mi = m[i] + one_minus_beta1 * (gi - m[i])
        vi = beta2 * v[i] + one_minus_beta2 * (gi * gi)
        m[i] = mi
        v[i] = vi
        p[i] = p[i] * decay - step_size * (mi / (np.sqrt(vi) * inv_correction2 + eps))


# --------------------------------------------------------------------------------------
# The forms the kernels run: each takes the kernel's arguments, and hands what it
# does not handle (float64, strided views, other axes, empty arrays) to the NumPy form
# --------------------------------------------------------------------------------------


def _ok(*arrays) -> bool:
    """float32, C-ordered, not empty, at least 1-D: what the loops above are written for."""
    for a in arrays:
        if not (isinstance(a, np.ndarray) and a.dtype == _F32 and a.ndim >= 1 and a.size and a.flags.c_contiguous):
            return False
    return True


def _stacks_ok(*arrays) -> bool:
    """float32 matrices or stacks of them, not empty, in any layout: what a product takes (attention's q and k)."""
    return all(isinstance(a, np.ndarray) and a.dtype == _F32 and a.ndim >= 2 and a.size for a in arrays)


def _last_axis(axis, ndim: int) -> bool:
    return isinstance(axis, int | np.integer) and not isinstance(axis, bool) and axis in (-1, ndim - 1)


def _packed(a):
    """A float32 array C-ordered (copied once if it is a strided view, as the NumPy forms copy it); else as is."""
    return np.ascontiguousarray(a) if isinstance(a, np.ndarray) and a.dtype == _F32 and a.ndim else a


def _ids_ok(ids, rows: int) -> bool:
    """One int64 class id per row, C-ordered: what the cross-entropy loops index with."""
    return isinstance(ids, np.ndarray) and ids.dtype == np.int64 and ids.shape == (rows,) and ids.flags.c_contiguous


def _rows(a: np.ndarray) -> np.ndarray:
    return a.reshape(-1, a.shape[-1])


def make_forms(numpy_forms: dict, matmul=np.matmul) -> dict:
    """The compiled form of each kernel that has one, falling back to ``numpy_forms[name]``; attention's scores
    are ``matmul(q, k^T)`` (the matmul kernel's active form, MKL's where it is installed)."""
    fallback = numpy_forms.__getitem__

    def add(a, b):
        if not (_ok(a, b) and a.shape == b.shape):  # (a broadcast, a scalar, float64: NumPy's own)
            return fallback("add")(a, b)
        out = np.empty_like(a)
        _add_flat(a.reshape(-1), b.reshape(-1), out.reshape(-1))
        return out

    def gelu(x, approximate="none"):
        x = _packed(x)
        if not _ok(x):
            return fallback("gelu")(x, approximate)
        out, gate = np.empty_like(x), np.empty_like(x)
        loop = _gelu_tanh if approximate == "tanh" else _gelu_erf
        loop(x.reshape(-1), out.reshape(-1), gate.reshape(-1))
        return out, gate

    def gelu_gate(x, approximate="none"):
        x = _packed(x)
        if not _ok(x):
            return fallback("gelu_gate")(x, approximate)
        return gelu(x, approximate)[1]  # (the loop computes both: the gate alone costs the same)

    def gelu_grad(x, g, gate, approximate="none"):
        x, g, gate = _packed(x), _packed(g), _packed(gate)
        if not (_ok(x, g, gate) and g.shape == x.shape == gate.shape):
            return fallback("gelu_grad")(x, g, gate, approximate)
        out = np.empty_like(x)
        loop = _gelu_tanh_grad if approximate == "tanh" else _gelu_erf_grad
        loop(x.reshape(-1), g.reshape(-1), gate.reshape(-1), out.reshape(-1))
        return out

    def softmax(x, axis=-1):
        if not (_ok(x) and _last_axis(axis, x.ndim)):
            return fallback("softmax")(x, axis)
        out = np.empty_like(x)
        _softmax_rows(_rows(x), _rows(out), _F32(1.0))
        return out

    def softmax_grad(out, g, axis=-1, scale=1.0):
        if not (_ok(out, g) and out.shape == g.shape and _last_axis(axis, out.ndim)):
            return fallback("softmax_grad")(out, g, axis, scale)
        grad = np.empty_like(out)
        _softmax_grad_rows(_rows(out), _rows(g), _rows(grad), _F32(scale))
        return grad

    def attention_weights(q, k, bias=None, scale=1.0):
        if not _stacks_ok(q, k) or (bias is not None and not (isinstance(bias, np.ndarray) and bias.dtype == _F32)):
            return fallback("attention_weights")(q, k, bias, scale)
        scores = matmul(q, k.swapaxes(-1, -2))  # (..., Tq, Tk); q and k may be head-split views
        if not _ok(scores):
            return fallback("attention_weights")(q, k, bias, scale)
        # (not in place: there LLVM cannot prove the rows apart, and does not vectorise)
        weights = np.empty_like(scores)
        if bias is None:
            _softmax_rows(_rows(scores), _rows(weights), _F32(scale))
        elif bias.shape == scores.shape[-bias.ndim:] and bias.flags.c_contiguous and bias.size:
            # a mask of the trailing axes, (Tq, Tk) or (H, Tq, Tk): repeats every bias.size elements
            _softmax_rows_biased(_rows(scores), bias.reshape(-1, scores.shape[-1]), _rows(weights), _F32(scale))
        else:
            biased = scores * _F32(scale) + bias
            if not _ok(biased):
                return fallback("attention_weights")(q, k, bias, scale)
            weights = np.empty_like(biased)
            _softmax_rows(_rows(biased), _rows(weights), _F32(1.0))
        return weights

    def standardise(x, eps):
        if not _ok(x):
            return fallback("standardise")(x, eps)
        xhat, rstd = np.empty_like(x), np.empty(x.shape[:-1] + (1,), _F32)
        _standardise_rows(_rows(x), _F32(eps), _rows(xhat), _rows(rstd))
        return xhat, rstd

    def layer_norm_affine(x, weight, bias, eps):
        if not (_ok(x, weight, bias) and weight.shape == bias.shape == x.shape[-1:]):
            return fallback("layer_norm_affine")(x, weight, bias, eps)
        out, xhat, rstd = np.empty_like(x), np.empty_like(x), np.empty(x.shape[:-1] + (1,), _F32)
        _standardise_affine_rows(_rows(x), _F32(eps), weight, bias, _rows(xhat), _rows(rstd), _rows(out))
        return out, xhat, rstd

    def layer_norm_grad(g, xhat, rstd, weight=None):
        n = xhat.shape[-1] if xhat.ndim else 0
        w = np.ones(n, _F32) if weight is None else weight
        if not (_ok(g, xhat, rstd, w) and g.shape == xhat.shape and rstd.shape == xhat.shape[:-1] + (1,)
                and w.shape == (n,)):
            return fallback("layer_norm_grad")(g, xhat, rstd, *(() if weight is None else (weight,)))
        out = np.empty_like(xhat)
        _layer_norm_grad_rows(_rows(g), _rows(xhat), _rows(rstd), w, _rows(out))
        return out

    def cross_entropy(logits, targets):
        logits = _packed(logits)
        if not (_ok(logits) and logits.ndim == 2 and _ids_ok(targets, logits.shape[0])):
            return fallback("cross_entropy")(logits, targets)
        losses = np.empty(logits.shape[0], _F32)
        _cross_entropy_rows(logits, targets, np.empty_like(logits), losses)
        return losses

    def cross_entropy_grad(logits, targets, row_weight):
        logits = _packed(logits)
        if not (_ok(logits, row_weight) and logits.ndim == 2 and row_weight.shape == logits.shape[:1]
                and _ids_ok(targets, logits.shape[0])):
            return fallback("cross_entropy_grad")(logits, targets, row_weight)
        grad = np.empty_like(logits)
        _cross_entropy_grad_rows(logits, targets, row_weight, grad)
        return grad

    def adam_update(p, g, m, v, lr, beta1, beta2, eps, step, decay=1.0):
        if not (_ok(p, g, m, v) and p.shape == g.shape == m.shape == v.shape):
            return fallback("adam_update")(p, g, m, v, lr, beta1, beta2, eps, step, decay)
        _adam_update_flat(p.reshape(-1), g.reshape(-1), m.reshape(-1), v.reshape(-1), _F32(decay), _F32(1 - beta1),
                          _F32(beta2), _F32(1 - beta2), _F32(1 / math.sqrt(1 - beta2 ** step)), _F32(eps),
                          _F32(lr / (1 - beta1 ** step)))
        return None

    return {"add": add, "gelu": gelu, "gelu_gate": gelu_gate, "gelu_grad": gelu_grad, "softmax": softmax,
            "softmax_grad": softmax_grad, "attention_weights": attention_weights, "standardise": standardise,
            "layer_norm_affine": layer_norm_affine, "layer_norm_grad": layer_norm_grad, "cross_entropy": cross_entropy,
            "cross_entropy_grad": cross_entropy_grad, "adam_update": adam_update}


def _numpy_when_small(name, form, numpy_form):
    """``form``, except that arrays under ``NUMPY_BELOW`` elements (``NUMPY_BELOW_FOR[name]`` where it has one)
    go to ``numpy_form``."""

    def run(*args, **kwargs):
        if isinstance(args[0], np.ndarray) and args[0].size < NUMPY_BELOW_FOR.get(name, NUMPY_BELOW):
            return numpy_form(*args, **kwargs)
        return form(*args, **kwargs)

    return run


def install(kernels: dict) -> None:
    """Make each compiled form its kernel's ``.compiled`` and ``.active`` form."""
    numpy_forms = {name: k.fast for name, k in kernels.items()}
    matmul = kernels["matmul"]

    def product(a, b):  # the matmul kernel's form at call time: MKL's, once mkl_blas.install has run
        return matmul.active(a, b)

    for name, form in make_forms(numpy_forms, product).items():
        if name not in SERIAL:
            form = _numpy_when_small(name, form, numpy_forms[name])
        form.__name__ = form.__qualname__ = name
        form.__doc__ = f"{name}, compiled by numba where it can be (see {__name__}); else its NumPy form."
        form.backend = "numba"
        kernels[name].compiled = kernels[name].active = form
