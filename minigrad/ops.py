"""The op table: every primitive minigrad can differentiate, one block each.

A block is a small class used as a namespace (it is never instantiated)::

    @op(method="exp")
    class exp:
        '''e ** x, elementwise.'''
        samples = [sample((3, 4))]

        def forward(x):                 # ndarrays in, one ndarray out
            return np.exp(x)

        def vjp(g, out, x):             # Tensors in: one gradient per input
            return (g * out,)

Everything else is derived from this table:

* ``Tensor`` methods and Python operators (``method=``, ``operator=``), bound in
  ``tensor.py``;
* backward: ``autograd.py`` calls ``vjp`` and nothing else;
* graph labels in ``viz`` (the block's name);
* the tests, which run ``gradcheck`` and ``gradgradcheck`` on every ``samples``
  entry of every op, so an op without samples fails the suite.

Conventions
-----------
* ``forward(*arrays, **params)``: positional arguments are the op's tensor
  inputs; keyword-only arguments are plain Python parameters (axis, shape...).
* ``vjp(g, out, *inputs, **params)`` receives the upstream gradient ``g``, the
  op's output and its inputs, all as Tensors, and returns one gradient per input
  (``None`` for inputs that are not differentiable, like a boolean mask).
  VJPs are written with Tensor operations, so backward can itself be
  differentiated (``create_graph=True``). With ``create_graph`` off they run
  under ``no_grad`` and record nothing.
* A VJP may return a gradient in the *broadcast* shape of the output: the engine
  sums it back to the input's shape, once, in one place (``autograd.py``).
* A forward may return ``(output, saved)``: ``saved`` is what its VJP would
  otherwise recompute (layer norm's xhat and 1/std, GELU's gate). The engine
  keeps it on the output, ``out._saved``, while the op is in a recorded graph,
  and drops it with the graph. It is a cache of functions of the inputs, so the
  VJP hands it only to ops that take it as a shortcut (``stats=`` of
  ``layer_norm``, ``gate=`` of ``gelu_grad``): those are still recorded as
  functions of their inputs, and ``create_graph`` still works.
"""

from __future__ import annotations

import functools
import math
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# --------------------------------------------------------------------------------------
# The registry
# --------------------------------------------------------------------------------------


@dataclass
class Sample:
    """Inputs for the finite-difference tests of one op.

    Each entry of ``inputs`` is a shape (drawn at random, float64) or a ready
    ndarray (used as is; boolean and integer arrays are not differentiated).
    ``domain=(lo, hi)`` draws uniformly from that interval instead of N(0, 1),
    for ops defined only there (log on positives, say).
    """

    inputs: tuple
    params: dict = field(default_factory=dict)
    domain: tuple | None = None

    def arrays(self, rng: np.random.Generator) -> list[np.ndarray]:
        out = []
        for spec in self.inputs:
            if isinstance(spec, np.ndarray):
                out.append(spec.copy())
            elif self.domain is not None:
                out.append(rng.uniform(*self.domain, size=spec))
            else:
                out.append(rng.standard_normal(spec))
        return out


def sample(*inputs, domain=None, **params) -> Sample:
    """Shorthand: ``sample((3, 4), (4,), axis=0)``."""
    return Sample(inputs, params, domain)


@dataclass
class Op:
    """One primitive: its forward on ndarrays, its VJP on Tensors, its test samples."""

    name: str
    forward: Callable[..., np.ndarray]
    vjp: Callable[..., tuple]
    samples: list[Sample]
    doc: str = ""
    method: str | None = None  # bind as Tensor.<method>
    operator: str | None = None  # bind as Tensor.__<op>__ and __r<op>__
    gradgrad: bool = True  # False only where a second derivative is meaningless

    def __call__(self, *inputs, **params):
        return _apply(self, *inputs, **params)

    def __repr__(self) -> str:
        return f"<op {self.name}>"


OPS: dict[str, Op] = {}
_on_register: list[Callable[[Op], None]] = []  # tensor.py binds each new op's method and operators
_apply: Callable = None  # set by tensor.py: runs an op and records it in the graph


def op(method: str | None = None, operator: str | None = None, gradgrad: bool = True):
    """Class decorator that turns one block into an ``Op`` and registers it."""

    def register(block) -> Op:
        name = block.__name__
        if name in OPS:
            raise ValueError(f"op {name!r} is registered twice")
        samples = list(getattr(block, "samples", []))
        new = Op(name, block.forward, block.vjp, samples, (block.__doc__ or "").strip(),
                 method, operator, gradgrad)
        OPS[name] = new
        for bind in _on_register:
            bind(new)
        return new

    return register


# --------------------------------------------------------------------------------------
# Small helpers used by several VJPs
# --------------------------------------------------------------------------------------


def _axes(axis, ndim: int) -> tuple[int, ...]:
    """Normalise ``axis`` (None, int or tuple) to a sorted tuple of positive axes."""
    if axis is None:
        return tuple(range(ndim))
    axis = (axis,) if isinstance(axis, int | np.integer) else tuple(axis)
    for a in axis:  # checked, as NumPy does: a % ndim alone would wrap a bad axis round to a valid one
        if not -ndim <= a < ndim:
            raise ValueError(f"axis {a} is out of range for {ndim} axes")
    axes = tuple(sorted(a % ndim for a in axis))
    if len(set(axes)) != len(axes):
        raise ValueError(f"axis {axis} names an axis twice")
    return axes


def _unreduce(g, in_shape, axis, keepdims):
    """Broadcast the gradient of a reduction back to the reduced input's shape."""
    if not keepdims:
        kept = list(in_shape)
        for a in _axes(axis, len(in_shape)):
            kept[a] = 1
        g = g.reshape(tuple(kept))
    return g.broadcast_to(in_shape)


def _keep(arr: np.ndarray, in_shape, axis, keepdims) -> np.ndarray:
    """An output array reshaped as if the reduction had kept its dimensions."""
    if keepdims:
        return arr
    kept = list(in_shape)
    for a in _axes(axis, len(in_shape)):
        kept[a] = 1
    return arr.reshape(kept)


def _count(in_shape, axis) -> int:
    return int(np.prod([in_shape[a] for a in _axes(axis, len(in_shape))], dtype=np.int64))


def _blas_summable(x: np.ndarray) -> bool:
    """Whether a sum over x's last or leading axes is better done by BLAS, as a product with ones.

    Float32/64, C-contiguous (NumPy reduces other layouts well enough), and big
    enough that the saving outweighs the call.
    """
    return x.dtype in (np.float32, np.float64) and x.ndim >= 2 and x.flags.c_contiguous and x.size >= 1024


@functools.lru_cache(maxsize=64)
def _ones(n: int, dtype: np.dtype) -> np.ndarray:
    """A read-only vector of n ones, made once: the other operand of the sums done as products."""
    ones = np.ones(n, dtype=dtype)
    ones.flags.writeable = False
    return ones


def _row_sum(x: np.ndarray, keepdims: bool = False) -> np.ndarray:
    """Sum over the last axis, as ``x.sum(axis=-1)`` but several times faster on many short rows.

    NumPy reduces a short last axis one row at a time (a (4096, 64) sum spends
    most of its time starting rows), so attention and layer-norm rows go to BLAS
    as one matrix-vector product with a vector of ones instead. BLAS adds a row
    in a few interleaved partial sums (NumPy sums pairwise); for rows of up to
    4096 that is within a few float32 ulps of NumPy's result, and longer rows
    and other dtypes take NumPy's own sum.
    """
    n = x.shape[-1] if x.ndim else 0
    if _blas_summable(x) and 1 < n <= 4096:
        total = x.reshape(-1, n) @ _ones(n, x.dtype)  # (rows,)
        return total.reshape(x.shape[:-1] + ((1,) if keepdims else ()))
    return x.sum(axis=-1, keepdims=keepdims)


def _row_dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """sum(a * b) over the last axis, kept as (..., 1): one multiply-and-add pass, no (..., n) temporary."""
    return np.einsum("...i,...i->...", a, b)[..., None]


def _const(mask: np.ndarray, like) -> Any:
    """Wrap a constant array (a 0/1 mask, say) so it multiplies in ``like``'s dtype."""
    from .tensor import Tensor

    return Tensor._wrap(mask.astype(like.dtype, copy=False))


# --------------------------------------------------------------------------------------
# Elementwise arithmetic
# --------------------------------------------------------------------------------------

_BROADCAST = [sample((3, 4), (3, 4)), sample((3, 4), (4,)), sample((2, 1, 4), (3, 1)), sample((3, 4), ())]


@op(method="add", operator="add")
class add:
    """a + b, with broadcasting."""
    samples = _BROADCAST

    def forward(a, b):
        return a + b

    def vjp(g, out, a, b):
        return g, g


@op(method="sub", operator="sub")
class sub:
    """a - b, with broadcasting."""
    samples = _BROADCAST

    def forward(a, b):
        return a - b

    def vjp(g, out, a, b):
        return g, -g


@op(method="mul", operator="mul")
class mul:
    """a * b, with broadcasting."""
    samples = _BROADCAST

    def forward(a, b):
        return a * b

    def vjp(g, out, a, b):
        return g * b, g * a


@op(method="div", operator="truediv")
class div:
    """a / b, with broadcasting."""
    samples = [sample((3, 4), (3, 4), domain=(0.5, 2.0)), sample((3, 4), (4,), domain=(0.5, 2.0))]

    def forward(a, b):
        return a / b

    def vjp(g, out, a, b):
        gb = g / b
        return gb, -gb * out


@op(method="neg")
class neg:
    """-x."""
    samples = [sample((3, 4))]

    def forward(x):
        return -x

    def vjp(g, out, x):
        return (-g,)


@op()
class pow:
    """x ** exponent for a Python-number exponent (``x ** 2``, ``x ** 0.5``)."""
    samples = [sample((3, 4), exponent=3), sample((3, 4), domain=(0.5, 2.0), exponent=-1.5)]

    def forward(x, *, exponent):
        # NumPy's float32 power is ~100x slower than a multiply; spell out the common exponents.
        if exponent == 2:
            return x * x
        if exponent == 3:
            return x * x * x
        if exponent == 0.5:
            return np.sqrt(x)
        if exponent == -0.5:
            return 1 / np.sqrt(x)
        return x ** exponent

    def vjp(g, out, x, *, exponent):
        if exponent == 0:  # x ** 0 is constant; x ** -1 would make 0 * inf = NaN at x = 0
            return (g * 0.0,)
        return (g * exponent * x ** (exponent - 1),)


@op()
class pow_tensor:
    """a ** b where the exponent is a tensor too (the base must be positive)."""
    samples = [sample((3, 4), (3, 4), domain=(0.5, 2.0)), sample((3, 4), (4,), domain=(0.5, 2.0))]

    def forward(a, b):
        return a ** b

    def vjp(g, out, a, b):
        # As PyTorch: where b == 0 the base's gradient is 0 (not 0 * a**-1, NaN at a = 0), and
        # where a == 0 and b >= 0 the exponent's gradient is 0 (not 0 * log 0 = NaN).
        grad_a = (g * (b * a ** (b - 1))).masked_fill(np.broadcast_to(b.data == 0, out.shape), 0.0)
        zero_base = (a.data == 0) & (b.data >= 0)
        grad_b = (g * out * a.log()).masked_fill(np.broadcast_to(zero_base, out.shape), 0.0)
        return grad_a, grad_b


@op(method="maximum")
class maximum:
    """Elementwise max(a, b). Where a == b the gradient is split evenly between them."""
    samples = _BROADCAST

    def forward(a, b):
        return np.maximum(a, b)

    def vjp(g, out, a, b):
        # a's share is 0 where b wins, 1/2 at a tie, else 1 (and the same for b), so a NaN,
        # which compares False both ways, passes the gradient to both inputs, as in PyTorch.
        tie = 0.5 * (a.data == b.data)
        return g * _const(1.0 - (a.data < b.data) - tie, g), g * _const(1.0 - (a.data > b.data) - tie, g)


@op(method="minimum")
class minimum:
    """Elementwise min(a, b). Where a == b the gradient is split evenly between them."""
    samples = _BROADCAST

    def forward(a, b):
        return np.minimum(a, b)

    def vjp(g, out, a, b):
        tie = 0.5 * (a.data == b.data)  # (see maximum)
        return g * _const(1.0 - (a.data > b.data) - tie, g), g * _const(1.0 - (a.data < b.data) - tie, g)


@op()
class where:
    """``cond ? x : y`` elementwise; the boolean condition is not differentiated."""
    samples = [sample(np.array([[True, False, True, False]] * 3), (3, 4), (3, 4)),
               sample(np.array([True, False, False, True]), (3, 4), (3, 1))]

    def forward(cond, x, y):
        return np.where(cond, x, y)

    def vjp(g, out, cond, x, y):
        return None, g.masked_fill(~cond.data, 0.0), g.masked_fill(cond.data, 0.0)


@op(method="masked_fill")
class masked_fill:
    """x with ``value`` written wherever the boolean mask is True (mask broadcasts)."""
    samples = [sample((3, 4), np.array([True, False, False, True]), value=-1e9),
               sample((2, 3, 3), np.triu(np.ones((3, 3), bool), 1), value=0.0)]

    def forward(x, mask, *, value):
        return np.where(mask, np.asarray(value, dtype=x.dtype), x)

    def vjp(g, out, x, mask, *, value):
        return g.masked_fill(mask.data, 0.0), None


@op(method="clip")
class clip:
    """x limited to [lo, hi] (either may be None: no bound); the gradient is 1 inside (bounds included), 0 outside."""
    samples = [sample((4, 5), lo=-0.5, hi=0.7), sample((4, 5), lo=0.0, hi=None), sample((4, 5), lo=None, hi=0.2)]

    def forward(x, *, lo=None, hi=None):
        if lo is None and hi is None:
            raise ValueError("clip needs at least one of lo and hi")
        return np.clip(x, lo, hi)

    def vjp(g, out, x, *, lo=None, hi=None):
        inside = np.ones(x.shape, dtype=bool)  # (a NaN is not inside: its gradient is 0, as in PyTorch)
        if lo is not None:
            inside &= x.data >= lo
        if hi is not None:
            inside &= x.data <= hi
        return (g.masked_fill(~inside, 0.0),)  # masked, not multiplied: an inf gradient outside gives 0, not NaN


# --------------------------------------------------------------------------------------
# Elementwise functions
# --------------------------------------------------------------------------------------


@op(method="exp")
class exp:
    """e ** x."""
    samples = [sample((3, 4))]

    def forward(x):
        return np.exp(x)

    def vjp(g, out, x):
        return (g * out,)


@op(method="log")
class log:
    """Natural logarithm (defined on positives)."""
    samples = [sample((3, 4), domain=(0.2, 3.0))]

    def forward(x):
        return np.log(x)

    def vjp(g, out, x):
        return (g / x,)


@op(method="sqrt")
class sqrt:
    """Square root (defined on non-negatives; differentiable on positives)."""
    samples = [sample((3, 4), domain=(0.2, 3.0))]

    def forward(x):
        return np.sqrt(x)

    def vjp(g, out, x):
        return (g * 0.5 / out,)


@op(method="tanh")
class tanh:
    """Hyperbolic tangent."""
    samples = [sample((3, 4))]

    def forward(x):
        return np.tanh(x)

    def vjp(g, out, x):
        return (g * (1.0 - out * out),)


@op(method="sigmoid")
class sigmoid:
    """1 / (1 + e**-x), from e = exp(-|x|): 1 / (1 + e) for x >= 0, e / (1 + e) below.

    exp(-|x|) never overflows, and neither tail cancels: sigmoid(-20) keeps its
    full relative precision (2.06e-9), so -log(sigmoid(-20)) is 20 in float32.
    (The tanh form, 0.5 + 0.5 * tanh(x / 2), rounds to 0 below about -17.)
    """
    samples = [sample((3, 4)), sample((3, 4), domain=(-30.0, 30.0))]

    def forward(x):
        e = np.exp(-np.abs(x))
        denom = 1.0 + e
        return np.where(x >= 0, 1.0, e) / denom  # NaN in, NaN out (both branches are NaN there)

    def vjp(g, out, x):
        return (g * out * (1.0 - out),)


@op(method="relu")
class relu:
    """max(x, 0); the gradient at exactly 0 is taken as 0."""
    samples = [sample((3, 4))]

    def forward(x):
        return np.maximum(x, 0)

    def vjp(g, out, x):
        # Masked, not multiplied: an inf gradient where x <= 0 gives 0, not NaN. (x <= 0 rather than
        # not x > 0: a NaN passes its gradient on, as in PyTorch.)
        return (g.masked_fill(x.data <= 0, 0.0),)


@op(method="abs")
class abs:
    """|x|; the gradient at exactly 0 is taken as 0."""
    samples = [sample((3, 4))]

    def forward(x):
        return np.abs(x)

    def vjp(g, out, x):
        return (g * _const(np.sign(np.where(np.isnan(x.data), 0, x.data)), g),)  # NaN: gradient 0, as PyTorch


def _erf_array(x: np.ndarray) -> np.ndarray:
    """erf on an ndarray. NumPy has no erf: SciPy's when installed, else ``_erf_kernel`` (as accurate)."""
    try:
        from scipy.special import erf as scipy_erf
    except ImportError:
        work = np.float32 if x.dtype in (np.float16, np.float32) else np.float64  # ints: float64, as NumPy
        out = _blockwise(_erf_kernel, x.astype(work, copy=False))
        return out.astype(x.dtype if x.dtype.kind == "f" else work, copy=False)
    return scipy_erf(x).astype(x.dtype, copy=False)


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


def _erf_kernel(out: np.ndarray, x: np.ndarray) -> None:
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


@op(method="erf")
class erf:
    """The error function, 2/sqrt(pi) * integral of exp(-t**2) from 0 to x (for exact GELU)."""
    samples = [sample((3, 4))]

    def forward(x):
        return np.asarray(_erf_array(x))

    def vjp(g, out, x):
        return (g * (2.0 / math.sqrt(math.pi)) * (-(x * x)).exp(),)


@op(method="astype")
class astype:
    """Cast to another dtype; the gradient is cast back to the input's dtype."""
    samples = [sample((3, 4), dtype="float64")]  # gradcheck runs in float64; casts are tested apart

    def forward(x, *, dtype):
        return x.astype(dtype)

    def vjp(g, out, x, *, dtype):
        return (g.astype(x.dtype),)


# --------------------------------------------------------------------------------------
# Reductions (NumPy's axis= / keepdims= names)
# --------------------------------------------------------------------------------------

_REDUCE = [sample((3, 4)), sample((3, 4), axis=1), sample((2, 3, 4), axis=(0, 2), keepdims=True),
           sample((2, 3, 4), axis=-1)]


@op(method="sum")
class sum:
    """Sum over ``axis`` (None: all axes)."""
    samples = _REDUCE

    def forward(x, *, axis=None, keepdims=False):
        axes = _axes(axis, x.ndim)
        if x.ndim >= 2 and axes == (x.ndim - 1,):
            return _row_sum(x, keepdims)
        if 0 < len(axes) < x.ndim and axes == tuple(range(len(axes))) and _blas_summable(x):
            # Over the leading axes (a bias's gradient summed over batch and time): ones @ rows,
            # a third of the time of NumPy's sum on (B*T, d) activations.
            rows = x.reshape(-1, int(np.prod(x.shape[len(axes):])))  # (B*T, rest)
            total = _ones(rows.shape[0], x.dtype) @ rows
            return total.reshape((1,) * len(axes) * keepdims + x.shape[len(axes):])
        return x.sum(axis=axis, keepdims=keepdims)

    def vjp(g, out, x, *, axis=None, keepdims=False):
        return (_unreduce(g, x.shape, axis, keepdims),)


@op(method="mean")
class mean:
    """Mean over ``axis`` (None: all axes)."""
    samples = _REDUCE

    def forward(x, *, axis=None, keepdims=False):
        if _blas_summable(x) and _axes(axis, x.ndim) == (x.ndim - 1,):
            total = _row_sum(x, keepdims)
            total *= np.asarray(1.0 / x.shape[-1], dtype=x.dtype)
            return total
        return x.mean(axis=axis, keepdims=keepdims)

    def vjp(g, out, x, *, axis=None, keepdims=False):
        count = _count(x.shape, axis)  # 0 only when x is empty, and then so is its gradient
        return (_unreduce(g, x.shape, axis, keepdims) * (1.0 / count if count else 0.0),)


@op(method="var")
class var:
    """Variance over ``axis`` with ``ddof`` (0: population variance, as NumPy's default)."""
    samples = _REDUCE + [sample((3, 5), axis=1, ddof=1)]

    def forward(x, *, axis=None, ddof=0, keepdims=False):
        if x.dtype == np.float32:  # summed in float64: float32's mean of two values near its max would overflow
            return x.var(axis=axis, ddof=ddof, keepdims=keepdims, dtype=np.float64).astype(np.float32)
        return x.var(axis=axis, ddof=ddof, keepdims=keepdims)

    def vjp(g, out, x, *, axis=None, ddof=0, keepdims=False):
        centred = x - x.mean(axis=axis, keepdims=True)
        # ddof >= n: the forward (NumPy's, as PyTorch's) divides by max(n - ddof, 0), giving inf or NaN; the
        # gradient is PyTorch's, 2 / (n - ddof): inf (NaN where centred is 0) at ddof == n, negative beyond.
        dof = _count(x.shape, axis) - ddof
        return (_unreduce(g, x.shape, axis, keepdims) * centred * (2.0 / dof if dof != 0 else math.inf),)


def _extreme_vjp(g, out, x, axis, keepdims):
    # Every element equal to the extreme gets an equal share of the gradient
    # (ties split it evenly, so the total is preserved).
    hit = x.data == _keep(out.data, x.shape, axis, keepdims)
    share = hit / hit.sum(axis=axis, keepdims=True)
    return (_unreduce(g, x.shape, axis, keepdims) * _const(share, g),)


@op(method="max")
class max:
    """Maximum over ``axis``. Tied maxima share the gradient equally."""
    samples = _REDUCE

    def forward(x, *, axis=None, keepdims=False):
        return x.max(axis=axis, keepdims=keepdims)

    def vjp(g, out, x, *, axis=None, keepdims=False):
        return _extreme_vjp(g, out, x, axis, keepdims)


@op(method="min")
class min:
    """Minimum over ``axis``. Tied minima share the gradient equally."""
    samples = _REDUCE

    def forward(x, *, axis=None, keepdims=False):
        return x.min(axis=axis, keepdims=keepdims)

    def vjp(g, out, x, *, axis=None, keepdims=False):
        return _extreme_vjp(g, out, x, axis, keepdims)


def _stable_max(x: np.ndarray, axis) -> np.ndarray:
    """max over axis (kept), with rows that are all -inf given 0 so x - max stays finite.

    ``fmax`` skips NaN where ``max`` stops to propagate it, and runs a fifth faster
    on short rows; a shift is all this is, and a NaN in a row still makes its
    softmax NaN through the sum.
    """
    m = np.fmax.reduce(x, axis=axis, keepdims=True)
    return np.where(np.isfinite(m), m, 0).astype(x.dtype, copy=False)


@op(method="logsumexp")
class logsumexp:
    """log(sum(exp(x))) over ``axis``, shifted by the max so large inputs cannot overflow."""
    samples = _REDUCE + [sample((3, 4), axis=1, keepdims=True)]

    def forward(x, *, axis=None, keepdims=False):
        if x.size == 0:  # no max to shift by; the log of an empty sum is -inf (as PyTorch)
            kept = np.sum(x, axis=axis, keepdims=True).shape  # (which also checks the axis)
            lse = np.full(kept, -np.inf, dtype=x.dtype if x.dtype.kind == "f" else np.float64)
            return lse if keepdims else lse.reshape(np.delete(x.shape, _axes(axis, x.ndim)))
        m = _stable_max(x, axis)
        with np.errstate(divide="ignore"):  # log(0) = -inf for a row that is all -inf
            lse = np.log(np.exp(x - m).sum(axis=axis, keepdims=True)) + m
        return lse if keepdims else lse.reshape(np.delete(x.shape, _axes(axis, x.ndim)))

    def vjp(g, out, x, *, axis=None, keepdims=False):
        if x.ndim == 0:  # no axis to take a softmax over: d/dx = exp(x - out), 1 (NaN at inf), 0 at -inf
            return (g * (x - out).exp().masked_fill(np.isneginf(x.data), 0.0),)
        return (_unreduce(g, x.shape, axis, keepdims) * x.softmax(axis=_axes(axis, x.ndim)),)


def _softmax_in_place(shifted: np.ndarray, axis) -> np.ndarray:
    """exp(shifted) / sum(exp(shifted)) over ``axis``, overwriting ``shifted`` (x minus its stable max)."""
    e = np.exp(shifted, out=shifted)
    last = e.ndim >= 2 and _axes(axis, e.ndim) == (e.ndim - 1,)
    total = _row_sum(e, keepdims=True) if last else e.sum(axis=axis, keepdims=True)
    total[total == 0] = 1  # an all -inf row: 0 / 1 = 0 weights
    e /= total
    return e


@op(method="softmax")
class softmax:
    """exp(x) / sum(exp(x)) over ``axis``, stable for large inputs.

    -inf entries get exactly 0 weight; a row that is entirely -inf (every key
    masked) gives all zeros, not NaN, and so a zero gradient.
    """
    samples = [sample((3, 5)), sample((2, 3, 4), axis=1),
               sample(np.array([[0.3, -np.inf, 1.2], [-np.inf, -np.inf, -np.inf]]))]

    def forward(x, *, axis=-1):
        if x.size == 0:  # nothing to normalise (and no max to shift by)
            np.sum(x, axis=axis)  # checks the axis
            return x.astype(np.result_type(x, np.float32))
        return _softmax_in_place(x - _stable_max(x, axis), axis)

    def vjp(g, out, x, *, axis=-1):
        return (out.softmax_grad(g, axis=axis),)


@op(method="softmax_grad")
class softmax_grad:
    """softmax's backward as one primitive: ``scale * out * (g - sum(g * out))`` over ``axis``, out = softmax(x).

    Fused: the row sums are one multiply-and-add pass with no temporary, and the
    rest is done in place, where the composite makes four ops and three arrays
    the size of the attention weights. ``scale`` (default 1) multiplies the
    result in the same place: attention's VJP scales it once there, rather than
    the two products it is used in.
    """
    samples = [sample((3, 5), (3, 5)), sample((2, 3, 4), (2, 3, 4), axis=1), sample((3, 5), (3, 5), scale=0.3)]

    def forward(out, g, *, axis=-1, scale=1.0):
        if out.ndim >= 2 and _axes(axis, out.ndim) == (out.ndim - 1,) and out.shape == g.shape:
            dot = _row_dot(g, out)  # (..., 1)
        else:
            dot = (g * out).sum(axis=axis, keepdims=True)
        grad = np.subtract(g, dot, dtype=np.result_type(g, out))
        grad *= out
        if scale != 1.0:
            grad *= scale  # in cache: grad was just written
        return grad

    def vjp(u, grad, out, g, *, axis=-1, scale=1.0):
        # grad is bilinear in (out, g): with s = sum(g * out), grad = scale * (out * g - out * s), so
        # d/dg (u . grad) = softmax_grad(out, u) * scale and
        # d/dout (u . grad) = scale * (u * (g - s) - g * sum(u * out)).
        s = (g * out).sum(axis=axis, keepdims=True)
        grad_out = u * (g - s) - g * (u * out).sum(axis=axis, keepdims=True)
        return grad_out * scale if scale != 1.0 else grad_out, out.softmax_grad(u, axis=axis, scale=scale)


@op(method="log_softmax")
class log_softmax:
    """x - logsumexp(x) over ``axis``, stable for large inputs (-inf in, -inf out)."""
    samples = [sample((3, 5)), sample((2, 3, 4), axis=1), sample((3, 4), axis=0)]

    def forward(x, *, axis=-1):
        if x.size == 0:  # nothing to normalise (and no max to shift by)
            np.sum(x, axis=axis)  # checks the axis
            return x.astype(np.result_type(x, np.float32))
        shifted = x - _stable_max(x, axis)
        total = np.exp(shifted).sum(axis=axis, keepdims=True)
        # A row that is all -inf stays -inf (log 1 = 0 is subtracted), instead of -inf - -inf = NaN.
        return shifted - np.log(np.where(total == 0, 1, total))

    def vjp(g, out, x, *, axis=-1):
        return (g - out.exp() * g.sum(axis=axis, keepdims=True),)


# --------------------------------------------------------------------------------------
# Linear algebra
# --------------------------------------------------------------------------------------


@op(method="matmul", operator="matmul")
class matmul:
    """a @ b with NumPy's rules: batched and broadcast over leading axes, 1-D cases included."""
    samples = [sample((3, 4), (4, 5)), sample((2, 3, 4), (4, 5)), sample((2, 1, 3, 4), (3, 4, 2)),
               sample((4,), (4, 5)), sample((3, 4), (4,)), sample((4,), (4,)), sample((2, 3, 4), (4,))]

    def forward(a, b):
        if a.ndim == 0 or b.ndim == 0:
            raise ValueError("both operands need at least one axis (use * to multiply by a scalar)")
        inner = b.shape[-2] if b.ndim >= 2 else b.shape[0]
        if a.shape[-1] != inner:
            raise ValueError(f"the inner sizes differ: a's last axis has {a.shape[-1]}, b's "
                             f"{'second-to-last' if b.ndim >= 2 else 'only'} axis has {inner}")
        if a.ndim > 2 and b.ndim > 2:
            try:
                np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
            except ValueError:
                raise ValueError(f"the batch axes {a.shape[:-2]} and {b.shape[:-2]} do not broadcast") from None
        if a.ndim > 2 and b.ndim == 2:
            # (B, T, K) @ (K, N) as one (B*T, K) @ (K, N) product: one BLAS call, not B of them.
            # (reshape copies a strided `a`, which NumPy's batched matmul would not hand to BLAS.)
            # The row count is spelled out: reshape cannot infer -1 when K is 0.
            rows = a.reshape(math.prod(a.shape[:-1]), a.shape[-1])
            return (rows @ b).reshape(a.shape[:-1] + b.shape[-1:])
        return a @ b

    def vjp(g, out, a, b):
        # Promote 1-D operands to matrices, as NumPy does, and undo it at the end.
        a2 = a.reshape(1, -1) if a.ndim == 1 else a
        b2 = b.reshape(-1, 1) if b.ndim == 1 else b
        g2 = g
        if a.ndim == 1:  # put back the row axis NumPy dropped (g may be 0-d for vector @ vector)
            g2 = g2.reshape(g2.shape[:-1] + (1,) + g2.shape[-1:] if g2.ndim else (1,))
        if b.ndim == 1:
            g2 = g2.reshape(g2.shape + (1,))
        ga = g2 @ b2.swapaxes(-1, -2)
        if b2.ndim == 2:
            # A weight matrix shared across the batch: fold the batch into the rows
            # so its gradient is one matmul, not a stack of them summed afterwards.
            # (N spelled out: reshape cannot infer -1 for a zero-size K or M)
            a_rows = a2.reshape(math.prod(a2.shape[:-1]), a2.shape[-1]) if a2.ndim > 2 else a2  # (N, K)
            g_rows = g2.reshape(math.prod(g2.shape[:-1]), g2.shape[-1]) if g2.ndim > 2 else g2  # (N, M)
            if b.data.flags.f_contiguous and not b.data.flags.c_contiguous:
                # b is a transposed weight (nn.Linear's x @ W.T): produce its gradient in the
                # same memory order, so W's gradient comes back C-ordered like W itself and the
                # optimizer's elementwise passes over (W, grad) stay contiguous.
                gb = (g_rows.T @ a_rows).T
            else:
                gb = a_rows.T @ g_rows
        else:
            gb = a2.swapaxes(-1, -2) @ g2
        if a.ndim == 1:
            ga = ga.squeeze(-2)
        if b.ndim == 1:
            gb = gb.squeeze(-1)
        return ga, gb


def _einsum_terms(subscripts: str, shapes: list[tuple]) -> tuple[list[str], str]:
    """(["ij", "jk"], "ik") from "ij,jk->ik" and the operands' shapes, checked, with every label explicit.

    ``...`` becomes unused letters, one per axis it covers, right-aligned
    across operands as broadcasting aligns them, so that the VJP can sum over
    them like any label (NumPy's einsum will not sum over an ellipsis). Without
    "->" the output is NumPy's implicit one: "..." if any operand has it, then
    the labels used exactly once, in alphabetical order.
    """
    if not isinstance(subscripts, str):
        raise TypeError(f"subscripts must be a string like 'ij,jk->ik', got {type(subscripts).__name__}")
    compact = subscripts.replace(" ", "").replace("...", ".")
    lhs, arrow, rhs = compact.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ValueError(f"subscripts {subscripts!r} name {len(terms)} operand(s), but {len(shapes)} were given")
    if not arrow:
        once = sorted(label for label in set(lhs) if lhs.count(label) == 1 and label.isalpha())
        rhs = ("." if "." in lhs else "") + "".join(once)
    for term, shape in zip(terms, shapes):
        if not all(label.isascii() and (label.isalpha() or label == ".") for label in term) or term.count(".") > 1:
            raise ValueError(f"subscripts {subscripts!r}: labels are letters, and '...' comes at most once per "
                             f"operand")
        if len(set(term)) != len(term):
            raise ValueError(f"subscripts {subscripts!r}: a label repeated within one operand (a diagonal or "
                             f"trace) is not supported")
        if len(shape) < len(term) - ("." in term) or ("." not in term and len(shape) != len(term)):
            raise ValueError(f"subscripts {subscripts!r}: term {term.replace('.', '...')!r} does not fit an "
                             f"operand of shape {shape}")
    rank = 0  # the axes "..." covers, most over the operands (the builtin max is shadowed here by the op)
    for term, shape in zip(terms, shapes):
        if "." in term:
            rank = rank if rank > len(shape) - len(term) + 1 else len(shape) - len(term) + 1
    free = [letter for letter in string.ascii_uppercase + string.ascii_lowercase if letter not in compact]
    if rank > len(free):
        raise ValueError(f"subscripts {subscripts!r}: '...' covers {rank} axes, more than the unused letters")
    ellipsis = "".join(free[:rank])
    inputs = [term.replace(".", ellipsis[rank - (len(shape) - len(term) + 1):]) for term, shape in zip(terms, shapes)]
    return inputs, rhs.replace(".", ellipsis)


@op()
class einsum:
    """Einstein summation, as ``np.einsum``: ``mg.einsum("bhqd,bhkd->bhqk", q, k)``.

    Every operand's labels (letters) are its axes; labels missing from
    the output are summed over; ``...`` stands for leading axes that broadcast.
    Each label may appear once per operand (no diagonals or traces). The VJP is
    einsum again: an operand's gradient contracts the output's gradient with
    the other operands, and is the same all along the labels only it has.
    """
    samples = [sample((3, 4), (4, 5), subscripts="ij,jk->ik"), sample((2, 3, 4), (2, 3, 4), subscripts="bti,bti->i"),
               sample((2, 3, 4), (4,), subscripts="...i,i->..."), sample((3, 4), subscripts="ij->j"),
               sample((3,), (4,), subscripts="i,j"), sample((2, 1, 4), (3, 4), (4,), subscripts="...i,...i,i->i")]

    def forward(*operands, subscripts):
        inputs, output = _einsum_terms(subscripts, [x.shape for x in operands])
        return np.asarray(np.einsum(",".join(inputs) + "->" + output, *operands))

    def vjp(g, out, *operands, subscripts):
        inputs, output = _einsum_terms(subscripts, [x.shape for x in operands])
        grads = []
        for i, x in enumerate(operands):
            if not x.requires_grad:  # a constant operand (layer norm's xhat, say): no contraction to run
                grads.append(None)
                continue
            others = inputs[:i] + inputs[i + 1:]
            known = set(output).union(*others)
            kept = "".join(label for label in inputs[i] if label in known)
            grad = einsum(g, *operands[:i], *operands[i + 1:], subscripts=",".join([output, *others]) + "->" + kept)
            if kept != inputs[i]:  # summed over labels only x has: put them back as size-1 axes
                sizes = iter(grad.shape)
                grad = grad.reshape(tuple(next(sizes) if label in kept else 1 for label in inputs[i]))
            if grad.shape != x.shape:
                # Size 1 along an axis where x is bigger: the gradient is the same all along it. (Where
                # x's axis is the size-1 one, broadcast, the engine sums the gradient back to it.)
                grad = grad.broadcast_to(np.broadcast_shapes(grad.shape, x.shape))
            grads.append(grad)
        return tuple(grads)


@op()
class linear:
    """x @ weight.T + bias with weight stored (out, in), as PyTorch's F.linear; the bias is optional.

    Composite: ``x @ weight.T + bias``. A primitive because every projection in a
    transformer is one: fused, the bias is added in place, the batch is folded
    into one BLAS call, and the weight's gradient comes out directly in the
    weight's own (out, in) layout, with no transposes recorded either way.
    """
    samples = [sample((3, 4), (5, 4), (5,)), sample((2, 3, 4), (5, 4), (5,)), sample((2, 3, 4), (5, 4)),
               sample((4,), (5, 4), (5,))]

    def forward(x, weight, *bias):
        rows = x.reshape(-1, x.shape[-1])  # (N, in)
        out = rows @ weight.T  # (N, out)
        if bias:
            out += bias[0]
        return out.reshape(x.shape[:-1] + weight.shape[:1])  # (..., out)

    def vjp(g, out, x, weight, *bias):
        g_rows = g.reshape(-1, g.shape[-1])  # (N, out)
        grad_x = g @ weight  # (..., in): matmul folds the batch into one BLAS call
        grad_weight = g_rows.T @ x.reshape(-1, x.shape[-1])  # (out, in)
        if not bias:
            return grad_x, grad_weight
        return grad_x, grad_weight, g_rows.sum(axis=0)  # (out,): summed here, not reshaped back by the engine


# --------------------------------------------------------------------------------------
# Shape and movement
# --------------------------------------------------------------------------------------


@op()
class reshape:
    """The same data in a new shape (one dimension may be -1)."""
    samples = [sample((3, 4), shape=(2, 6)), sample((2, 3, 4), shape=(-1, 4))]

    def forward(x, *, shape):
        return x.reshape(shape)

    def vjp(g, out, x, *, shape):
        return (g.reshape(x.shape),)


@op()
class transpose:
    """Permute the axes (``axes=None`` reverses them, as NumPy does)."""
    samples = [sample((3, 4)), sample((2, 3, 4), axes=(1, 2, 0))]

    def forward(x, *, axes=None):
        return x.transpose(axes)

    def vjp(g, out, x, *, axes=None):
        inverse = None if axes is None else tuple(sorted(range(len(axes)), key=lambda i: axes[i] % len(axes)))
        return (g.transpose(inverse),)


@op()
class broadcast_to:
    """Broadcast to a larger shape without copying; the engine sums the gradient back."""
    samples = [sample((3, 1), shape=(2, 3, 4)), sample((4,), shape=(3, 4))]

    def forward(x, *, shape):
        return np.broadcast_to(x, shape)

    def vjp(g, out, x, *, shape):
        return (g,)


def _has_array(index) -> bool:
    """True when an index uses advanced (array) indexing, where elements can repeat."""
    parts = index if isinstance(index, tuple) else (index,)
    return any(isinstance(p, np.ndarray) for p in parts)


@op()
class getitem:
    """x[index]: basic slices, integer arrays and boolean masks."""
    samples = [sample((4, 5), index=(slice(1, 3), slice(None, None, 2))),
               sample((4, 5), index=np.array([0, 2, 2, 3])),  # repeats accumulate
               sample((4, 5), index=(Ellipsis, np.array([[1, 1], [4, 0]]))),
               sample((4, 5), index=np.array([True, False, True, True])),
               sample((4, 5), index=(None, 2))]

    def forward(x, *, index):
        return x[index]

    def vjp(g, out, x, *, index):
        return (g.scatter_add(index=index, shape=x.shape),)


def _add_rows(out: np.ndarray, index: np.ndarray, g: np.ndarray) -> None:
    """out[index] += g with repeated indices accumulating, for an integer array indexing axis 0.

    ``np.add.at`` does this one element at a time (1.8 ms for a (16, 64) batch of
    token ids into a (65, 128) table); sorting the ids and summing each run of
    equal ones with ``np.add.reduceat`` does it in whole rows (0.36 ms).
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


@op()
class scatter_add:
    """A zero array of ``shape`` with g added at ``index`` (repeats accumulate): getitem's VJP."""
    samples = [sample((2, 5), index=(slice(1, 3),), shape=(4, 5)),
               sample((4, 5), index=np.array([0, 2, 2, 3]), shape=(4, 5))]

    def forward(g, *, index, shape):
        out = np.zeros(shape, dtype=g.dtype)
        if isinstance(index, np.ndarray) and index.dtype.kind in "iu" and out.ndim >= 1:
            _add_rows(out, index, g)  # an embedding's backward: the common case, made fast
        elif _has_array(index):
            np.add.at(out, index, g)
        else:
            out[index] = g
        return out

    def vjp(gg, out, g, *, index, shape):
        return (gg[index],)


@op()
class concatenate:
    """Join tensors along an existing axis."""
    samples = [sample((2, 3), (4, 3)), sample((2, 3), (2, 1), (2, 2), axis=1)]

    def forward(*xs, axis=0):
        return np.concatenate(xs, axis=axis)

    def vjp(g, out, *xs, axis=0):
        bounds = np.cumsum([0] + [x.shape[axis] for x in xs])
        lead = (slice(None),) * (axis % out.ndim)
        return tuple(g[lead + (slice(int(lo), int(hi)),)] for lo, hi in zip(bounds[:-1], bounds[1:]))


@op()
class stack:
    """Join same-shaped tensors along a new axis."""
    samples = [sample((2, 3), (2, 3)), sample((2, 3), (2, 3), (2, 3), axis=-1)]

    def forward(*xs, axis=0):
        return np.stack(xs, axis=axis)

    def vjp(g, out, *xs, axis=0):
        lead = (slice(None),) * (axis % out.ndim)
        return tuple(g[lead + (i,)] for i in range(len(xs)))


@op(method="tril")
class tril:
    """Keep the lower triangle of the last two axes (entries above diagonal ``k`` become 0)."""
    samples = [sample((4, 4)), sample((2, 3, 4), k=1)]

    def forward(x, *, k=0):
        return np.tril(x, k)

    def vjp(g, out, x, *, k=0):
        return (g.tril(k=k),)


@op(method="triu")
class triu:
    """Keep the upper triangle of the last two axes (entries below diagonal ``k`` become 0)."""
    samples = [sample((4, 4)), sample((2, 3, 4), k=-1)]

    def forward(x, *, k=0):
        return np.triu(x, k)

    def vjp(g, out, x, *, k=0):
        return (g.triu(k=k),)


# --------------------------------------------------------------------------------------
# Fused primitives
#
# Each of these could be written as a composite of the ops above (and is, in the
# comments). They are primitives because the composite makes many passes over
# memory and many graph nodes per call, and the layers of a transformer call them
# on every token of every layer. Their VJPs are still Tensor ops, so they are
# differentiable twice, and the tests gradcheck them like any other op.
# --------------------------------------------------------------------------------------

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_GELU_CUBIC = 0.044715


# Elements per block for _blockwise: a block of GELU's input, its output and two
# temporaries (4 x 256 KiB in float32) stay in a core's L2 cache between passes.
_BLOCK = 1 << 16


def _blockwise(kernel: Callable, x: np.ndarray, *more: np.ndarray, outputs: int = 1):
    """``kernel(*outs, x, *more)`` over blocks of big arrays, so its many passes run in cache.

    An elementwise formula in NumPy is one pass over memory per operation; over
    the (B, T, 4 d) activations of an MLP those passes go out to main memory.
    Done a block at a time, every pass after the first finds its data in cache.
    ``kernel`` writes its ``outputs`` arrays (x's shape) in place from ``x`` and
    any ``more`` arrays of x's shape; they are returned (one, or a tuple).
    """
    dtype = np.result_type(x, *more) if x.dtype.kind == "f" else np.float64
    flat = [np.ascontiguousarray(a, dtype=dtype).reshape(-1) for a in (x, *more)]
    outs = [np.empty(x.shape, dtype=dtype) for _ in range(outputs)]
    flat_outs = [out.reshape(-1) for out in outs]
    for start in range(0, x.size, _BLOCK):
        block = slice(start, start + _BLOCK)
        kernel(*(out[block] for out in flat_outs), *(a[block] for a in flat))
    return outs[0] if outputs == 1 else tuple(outs)


def _gelu_tanh_inner(out: np.ndarray, x: np.ndarray) -> np.ndarray:
    """out = tanh(sqrt(2/pi) * (x + 0.044715 x**3)), written as in-place passes over ``out``."""
    np.square(x, out=out)  # (np.square is one read of x; np.multiply(x, x) reads it twice)
    out *= _SQRT_2_OVER_PI * _GELU_CUBIC
    out += _SQRT_2_OVER_PI
    out *= x
    return np.tanh(out, out=out)


def _gelu_tanh_gate_kernel(gate: np.ndarray, x: np.ndarray) -> None:
    """gate = 0.5 * (1 + tanh(...)), in place."""
    _gelu_tanh_inner(gate, x)
    gate += 1.0
    gate *= 0.5


def _gelu_tanh_kernel(out: np.ndarray, gate: np.ndarray, x: np.ndarray) -> None:
    """gate = 0.5 * (1 + tanh(...)) and out = x * gate, in place."""
    _gelu_tanh_gate_kernel(gate, x)
    np.multiply(x, gate, out=out)


def _gelu_tanh_grad_kernel(out: np.ndarray, x: np.ndarray, gate: np.ndarray, g: np.ndarray) -> None:
    """out = g * gelu'(x) from the gate r = 0.5 (1 + t): gelu' = r (1 + 2 x du (1 - r)), with no tanh.

    (gelu = x r, and r' = (1 - t**2) du / 2 = 2 r (1 - r) du, as 1 - t**2 = 4 r (1 - r).)
    """
    np.square(x, out=out)
    out *= 6 * _SQRT_2_OVER_PI * _GELU_CUBIC
    out += 2 * _SQRT_2_OVER_PI
    out *= x  # 2 x du, du = d(u)/dx = sqrt(2/pi) (1 + 3 * 0.044715 x**2)
    out *= np.subtract(1.0, gate)
    out += 1.0
    out *= gate
    out *= g


def _gelu_erf_grad_kernel(out: np.ndarray, x: np.ndarray, gate: np.ndarray, g: np.ndarray) -> None:
    """out = g * gelu'(x) from the gate Phi(x): gelu' = Phi(x) + x phi(x), phi the normal density."""
    np.square(x, out=out)
    out *= -0.5
    np.exp(out, out=out)
    out *= x
    out *= _INV_SQRT_2PI
    out += gate
    out *= g


def _gelu_erf_gate(x: np.ndarray) -> np.ndarray:
    """Phi(x) = 0.5 * (1 + erf(x / sqrt 2)), the normal CDF: exact GELU's gate."""
    gate = _erf_array(x * (1 / math.sqrt(2.0)))  # a Python float keeps float32 float32 (NumPy 2), ints -> float64
    gate += 1.0
    gate *= 0.5
    return gate


@op()
class gelu:
    """GELU: x * Phi(x), exact with erf (``approximate="none"``) or GPT-2's tanh form (``"tanh"``).

    Composite: ``0.5 * x * (1 + erf(x / sqrt(2)))`` or
    ``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x**3)))``. The forward keeps
    the gate (Phi(x), or its tanh form) that multiplies x: the derivative is a
    few multiplications from it, with no tanh or erf again.
    """
    samples = [sample((3, 4)), sample((3, 4), approximate="tanh")]

    def forward(x, *, approximate="none"):
        if approximate == "tanh":
            out, gate = _blockwise(_gelu_tanh_kernel, x, outputs=2)
        elif approximate == "none":
            gate = _gelu_erf_gate(x)
            out = x * gate
        else:
            raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
        return out, gate

    def vjp(g, out, x, *, approximate="none"):
        return (x.gelu_grad(g, approximate=approximate, gate=out._saved),)


@op(method="gelu_grad")
class gelu_grad:
    """g * d gelu(x) / dx: gelu's backward as one primitive, so it is one fused pass.

    ``x.gelu_grad(g)``: g is the gradient arriving at gelu's output (pass ones
    for the derivative itself). ``gate``: the gate gelu's forward kept for this
    same x (Phi(x) or its tanh form; gelu's VJP passes it), so that neither tanh
    nor erf is computed again; the result is still a function of x and g alone.
    """
    samples = [sample((3, 4), (3, 4)), sample((3, 4), (3, 4), approximate="tanh"), sample((3, 4), (4,))]

    def forward(x, g, *, approximate="none", gate=None):
        if approximate not in ("none", "tanh"):
            raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
        if gate is None:
            gate = _blockwise(_gelu_tanh_gate_kernel, x) if approximate == "tanh" else _gelu_erf_gate(x)
        elif gate.shape != x.shape:
            raise ValueError(f"the gate of gelu(x) must have x's shape {x.shape}, got {gate.shape}")
        g = np.broadcast_to(g, x.shape)  # a view; _blockwise copies it only if it is not x-shaped already
        kernel = _gelu_tanh_grad_kernel if approximate == "tanh" else _gelu_erf_grad_kernel
        return _blockwise(kernel, x, gate, g)

    def vjp(u, out, x, g, *, approximate="none", gate=None):
        # d/dg is gelu' again (this op with u for g); d/dx needs the second derivative, written
        # out here (only for create_graph, so plain Tensor ops are fast enough).
        if approximate == "tanh":
            t = (_SQRT_2_OVER_PI * (x + _GELU_CUBIC * x * x * x)).tanh()
            du = _SQRT_2_OVER_PI * (1.0 + 3 * _GELU_CUBIC * x * x)
            d2u = 6 * _SQRT_2_OVER_PI * _GELU_CUBIC * x
            second = (1.0 - t * t) * (du + 0.5 * x * (d2u - 2.0 * t * du * du))
        else:
            second = (-0.5 * x * x).exp() * _INV_SQRT_2PI * (2.0 - x * x)
        return u * g * second, x.gelu_grad(u, approximate=approximate, gate=gate)


def _attention_scores(q: np.ndarray, k: np.ndarray, bias: tuple, scale) -> np.ndarray:
    """q @ k^T * scale + bias, (..., Tq, Tk), in one fresh array."""
    scores = q @ k.swapaxes(-1, -2)
    scores *= scale
    if bias:
        if np.broadcast_shapes(scores.shape, bias[0].shape) == scores.shape:
            scores += bias[0]
        else:  # the bias has batch axes the scores lack
            scores = scores + bias[0]
    return scores


def _softmax_rows_again(weights: np.ndarray, redo: np.ndarray, q, k, bias: tuple, scale) -> None:
    """Overwrite the rows of ``weights`` marked in ``redo`` (..., Tq, 1) by a softmax shifted by each row's max.

    Only the heads holding such rows have their scores computed again.
    """
    lead = weights.shape[:-2]
    heads = np.nonzero(redo.any(axis=(-2, -1)))  # leading indices of the heads concerned
    q_heads = np.broadcast_to(q, lead + q.shape[-2:])[heads]  # (n, Tq, E)
    k_heads = np.broadcast_to(k, lead + k.shape[-2:])[heads]  # (n, Tk, E)
    bias_heads = tuple(np.broadcast_to(b, weights.shape)[heads] for b in bias)  # (n, Tq, Tk)
    scores = _attention_scores(q_heads, k_heads, bias_heads, scale)
    scores -= _stable_max(scores, -1)
    exact = _softmax_in_place(scores, -1)
    weights[heads] = np.where(redo[heads], exact, weights[heads])


@op()
class attention_weights:
    """softmax(q @ k^T * scale + bias) over the keys: attention's weights (..., Tq, Tk).

    q (..., Tq, E), k (..., Tk, E), leading axes broadcast as in matmul; the
    optional ``bias`` broadcasts to (..., Tq, Tk), and -inf in it forbids a key
    (a row with every key forbidden gets zero weights, not NaN).
    Composite: ``(q @ k.swapaxes(-1, -2) * scale + bias).softmax(axis=-1)``. A
    primitive because that makes three (..., Tq, Tk) arrays, the largest of a
    transformer's activations, where one worked on in place does, and four
    graph nodes per layer where one does.
    """
    samples = [sample((2, 3, 4), (2, 5, 4), scale=0.5),
               sample((2, 1, 3, 4), (3, 5, 4), (3, 5), scale=0.7),
               sample((2, 3, 4), (2, 3, 4), np.where(np.tril(np.ones((3, 3), bool)), 0.0, -np.inf), scale=1.0)]

    def forward(q, k, *bias, scale):
        scores = _attention_scores(q, k, bias, scale)  # (..., Tq, Tk)
        # exp is shifted by each row's first score, not its max: any entry of the row keeps the
        # largest term >= 1, so nothing that matters underflows, and taking it is free, where a
        # row max is NumPy's slowest pass here (it reduces one short row at a time). exp can
        # overflow only if a row's scores span more than ~88 (float32); such rows, and rows
        # whose first key is forbidden (-inf), sum to inf or NaN, and are redone with their max.
        # Each row still depends on its own scores alone, so a causal mask stays exact.
        with np.errstate(over="ignore", invalid="ignore"):
            scores -= scores[..., :1].copy()  # (..., Tq, Tk) minus (..., Tq, 1)
            weights = np.exp(scores, out=scores)
        total = _row_sum(weights, keepdims=True)  # (..., Tq, 1)
        redo = ~np.isfinite(total)
        total[redo] = 1
        weights /= total
        if redo.any():
            _softmax_rows_again(weights, redo, q, k, bias, scale)
        return weights

    def vjp(g, out, q, k, *bias, scale):
        grad_scaled = out.softmax_grad(g, scale=scale)  # (..., Tq, Tk): d/d(q @ k^T), the scale taken once
        grad_q = grad_scaled @ k  # (..., Tq, E)
        grad_k = grad_scaled.swapaxes(-1, -2) @ q  # (..., Tk, E)
        if not (bias and bias[0].requires_grad):  # (a mask is a constant: no gradient to make)
            return (grad_q, grad_k) + ((None,) if bias else ())
        return grad_q, grad_k, out.softmax_grad(g)  # the bias is added unscaled


def _standardise(x: np.ndarray, eps: float):
    """(xhat, rstd): x centred and scaled to unit variance over the last axis, and 1/sqrt(var + eps) (..., 1)."""
    n = x.shape[-1]
    xhat = x - _row_sum(x, keepdims=True) * np.asarray(1.0 / n, dtype=x.dtype)  # (..., n), a fresh array
    var = _row_dot(xhat, xhat) * np.asarray(1.0 / n, dtype=x.dtype)  # (..., 1)
    rstd = 1.0 / np.sqrt(var + np.asarray(eps, dtype=x.dtype))
    xhat *= rstd
    return xhat, rstd


@op()
class layer_norm:
    """(x - mean) / sqrt(var + eps) over the last axis, then ``* weight + bias`` when given (both or neither).

    Composite: ``xc = x - x.mean(-1, keepdims=True)``;
    ``xc / (xc.var(-1, keepdims=True) + eps).sqrt() * weight + bias``.
    ``stats``: the (xhat, 1/std) a forward on this same x computed, to reuse
    (the VJP passes them; they are not a way to normalise with other statistics).
    """
    samples = [sample((3, 5), (5,), (5,), eps=1e-5), sample((2, 3, 4), (4,), (4,), eps=0.1),
               sample((2, 3, 4), eps=0.1)]

    def forward(x, *affine, eps=1e-5, stats=None):
        if len(affine) not in (0, 2):
            raise TypeError(f"weight and bias go together: give both or neither, got {len(affine)} of them")
        xhat, rstd = _standardise(x, eps) if stats is None else stats
        if not affine:
            return xhat, (xhat, rstd)
        weight, bias = affine
        out = xhat * weight  # a new array: xhat is kept for the backward
        out += bias
        return out, (xhat, rstd)

    def vjp(g, out, x, *affine, eps=1e-5, stats=None):
        # (xhat, rstd) from this node's forward, so backward need not standardise x twice more. A
        # stats= param (this node itself a recorded shortcut, under create_graph) holds the same arrays.
        stats = out._saved
        if not affine:
            return (layer_norm_grad(g, x, eps=eps, stats=stats),)
        weight, _ = affine
        xhat = layer_norm(x, eps=eps, stats=stats)  # the forward's xhat (the output is xhat * weight + bias)
        grad_weight = einsum(g, xhat, subscripts="...i,...i->i")  # sum(g * xhat) over the batch, in one pass
        grad_bias = g.sum(axis=tuple(range(g.ndim - 1)))
        return layer_norm_grad(g, x, weight, eps=eps, stats=stats), grad_weight, grad_bias


@op()
class layer_norm_grad:
    """The gradient of ``layer_norm`` with respect to x, in fused passes (its backward, made a primitive).

    With xhat = layer_norm(x) (no affine), rstd = 1/sqrt(var + eps) and v = g * weight
    (v = g without one), the gradient is, over the last axis,
    ``rstd * (v - mean(v) - xhat * mean(v * xhat))``: v projected off the
    directions a shift and a rescale of x do not change. This is J v with J
    the (symmetric) Jacobian of xhat; written as one primitive because as
    composite it is 16 ops and as many passes, on every layer norm of a model.
    ``stats``: (xhat, rstd) of this x when the caller has them (layer_norm's VJP does).
    """
    samples = [sample((3, 5), (3, 5), (5,), eps=1e-5), sample((2, 3, 4), (2, 3, 4), (4,), eps=0.1),
               sample((2, 3, 4), (2, 3, 4), eps=0.1)]

    def forward(g, x, *weight, eps=1e-5, stats=None):
        n = x.shape[-1]
        xhat, rstd = _standardise(x, eps) if stats is None else stats  # read only: stats are shared
        v = g * weight[0] if weight else g.copy()  # (..., n), overwritten below
        mean_v = _row_sum(v, keepdims=True)  # (..., 1), scaled by 1/n below
        mean_v_xhat = _row_dot(v, xhat)  # (..., 1), scaled by 1/n below
        inv_n = np.asarray(1.0 / n, dtype=x.dtype)
        v -= mean_v * inv_n
        v -= xhat * (mean_v_xhat * inv_n)
        v *= rstd
        return v

    def vjp(u, out, g, x, *weight, eps=1e-5, stats=None):
        # Only needed for create_graph (second derivatives of layer norm). With
        # S = sum(u * out) per row, and J symmetric: dS/dv = J u, so dS/dg = J u * weight and
        # dS/dweight = g * J u; dS/dx comes from rstd, mean(v * xhat) and xhat each depending on x.
        n = x.shape[-1]
        xc = x - x.mean(axis=-1, keepdims=True)
        rstd = ((xc * xc).mean(axis=-1, keepdims=True) + eps) ** -0.5  # (..., 1)
        xhat = xc * rstd
        v = g * weight[0] if weight else g
        ju = layer_norm_grad(u, x, eps=eps)  # J u
        mean_v = v.mean(axis=-1, keepdims=True)
        mean_v_xhat = (v * xhat).mean(axis=-1, keepdims=True)
        u_sum = u.sum(axis=-1, keepdims=True)
        u_v = (u * v).sum(axis=-1, keepdims=True)
        u_xhat = (u * xhat).sum(axis=-1, keepdims=True)
        grad_x = (-(rstd * rstd / n) * (u_v - mean_v * u_sum - mean_v_xhat * u_xhat) * xhat
                  - (rstd * u_xhat / n) * out - rstd * mean_v_xhat * ju)
        if not weight:
            return ju, grad_x
        return ju * weight[0], grad_x, g * ju


@op()
class rms_norm:
    """x / sqrt(mean(x**2) + eps) * weight over the last axis (no centring, no bias).

    Composite: ``x * ((x * x).mean(-1, keepdims=True) + eps) ** -0.5 * weight``.
    """
    samples = [sample((3, 5), (5,), eps=1e-6), sample((2, 3, 4), (4,), eps=0.1)]

    def forward(x, weight, *, eps=1e-6):
        mean_square = _row_dot(x, x) * np.asarray(1.0 / x.shape[-1], dtype=x.dtype)  # (..., 1)
        out = x * (1.0 / np.sqrt(mean_square + np.asarray(eps, dtype=x.dtype)))  # (..., n)
        out *= weight
        return out

    def vjp(g, out, x, weight, *, eps=1e-6):
        rstd = ((x * x).mean(axis=-1, keepdims=True) + eps) ** -0.5
        xhat = x * rstd
        gxhat = g * weight
        gx = rstd * (gxhat - xhat * (gxhat * xhat).mean(axis=-1, keepdims=True))
        return gx, g * xhat


def _target_rows(logits: np.ndarray, targets: np.ndarray, ignore_index: int):
    """Validate targets; return (kept: bool (N,), safe_targets: int (N,) with ignored ones set to 0)."""
    if logits.ndim != 2:
        raise ValueError(f"logits must be (N, C), got shape {logits.shape}")
    if targets.shape != logits.shape[:1]:
        raise ValueError(f"targets must have shape ({logits.shape[0]},) to match logits {logits.shape}, "
                         f"got {targets.shape}")
    if targets.dtype.kind not in "iu":
        raise TypeError(f"targets must be integer class indices, got {targets.dtype}")
    kept = targets != ignore_index
    bad = kept & ((targets < 0) | (targets >= logits.shape[1]))
    if bad.any():
        raise ValueError(f"target {targets[bad][0]} is out of range for {logits.shape[1]} classes")
    return kept, np.where(kept, targets, 0)


@op()
class cross_entropy:
    """Mean (or sum, or per-row) of -log softmax(logits)[target], fused and stable.

    ``logits`` (N, C), ``targets`` (N,) integer; rows whose target is
    ``ignore_index`` count for nothing (the mean is over the other rows).
    Composite: ``-logits.log_softmax(-1)[arange(N), targets].mean()``.
    """
    samples = [sample((4, 5), np.array([0, 3, 4, 1])),
               sample((4, 5), np.array([2, -100, 4, 2]), reduction="sum"),
               sample((3, 4), np.array([1, 0, -1]), ignore_index=-1, reduction="none")]

    def forward(logits, targets, *, ignore_index=-100, reduction="mean"):
        kept, safe = _target_rows(logits, targets, ignore_index)
        shift = logits.max(axis=-1, keepdims=True)
        lse = np.log(np.exp(logits - shift).sum(axis=-1)) + shift[:, 0]
        losses = np.where(kept, lse - logits[np.arange(len(safe)), safe], 0).astype(logits.dtype)
        if reduction == "none":
            return losses
        if reduction == "sum":
            return losses.sum()
        if reduction == "mean":
            return losses.sum() / np.asarray(np.maximum(kept.sum(), 1), dtype=logits.dtype)
        raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")

    def vjp(g, out, logits, targets, *, ignore_index=-100, reduction="mean"):
        kept, safe = _target_rows(logits.data, targets.data, ignore_index)
        onehot = np.zeros(logits.shape, dtype=logits.dtype)
        onehot[np.arange(len(safe)), safe] = 1
        weight = kept.astype(logits.dtype)
        if reduction == "mean":
            weight /= np.maximum(kept.sum(), 1)
        row_grad = g.reshape(-1, 1) * _const(weight.reshape(-1, 1), g)  # (N, 1), or (1, 1) scaled
        return (logits.softmax(axis=-1) - _const(onehot, g)) * row_grad, None
