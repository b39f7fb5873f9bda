"""The op table: every core primitive minigrad can differentiate, one block each.

A block is a small class used as a namespace (it is never instantiated)::

    @op(method="exp")
    class exp:
        '''e ** x, elementwise.'''
        samples = [sample((3, 4))]

        def forward(x):                 # ndarrays in, one ndarray out
            return np.exp(x)

        def vjp(g, out, x):             # Tensors in: one gradient per input
            return (g * out,)

Everything else is derived from this table (``registry.py`` does the deriving):

* ``Tensor`` methods and Python operators (``method=``, ``operator=``);
* backward: ``autograd/backprop.py`` calls ``vjp`` and nothing else;
* graph labels in ``viz`` (the block's name);
* the tests, which run ``gradcheck`` and ``gradgradcheck`` on every ``samples``
  entry of every op, so an op without samples fails the suite.

This file states the math. A few forwards call a kernel from ``kernels/``
(the same result, faster), with the plain NumPy it equals in a comment beside
the call. The fused primitives a transformer uses (linear, gelu, layer_norm,
attention_weights, cross_entropy...) are in ``fused/``, each with its
composite of the ops here.

Conventions
-----------
* ``forward(*arrays, **params)``: positional arguments are the op's tensor
  inputs; keyword-only arguments are plain Python parameters (axis, shape...).
* ``vjp(g, out, *inputs, **params)`` receives the upstream gradient ``g``, the
  op's output and its inputs, all as Tensors, and returns one gradient per input
  (``None`` for inputs that are not differentiable, like a boolean mask).
  VJPs are written with Tensor operations, so backward can itself be
  differentiated (``create_graph=True``). With ``create_graph`` off they run
  under ``no_grad`` and record nothing. A VJP may use only ops in the table
  (``g * x.cos()``, not ``g * np.cos(x)``): that is what makes it differentiable.
* A VJP may return a gradient in the *broadcast* shape of the output: the engine
  sums it back to the input's shape, once, in one place (``autograd/backprop.py``).
* A forward may return ``(output, saved)``: ``saved`` is what its VJP would
  otherwise recompute (layer norm's xhat and 1/std, GELU's gate). The engine
  keeps it on the output, ``out._saved``, while the op is in a recorded graph,
  and drops it with the graph. The VJP hands it on only to ops that take it as
  a shortcut parameter, also named ``saved=``: those are still recorded as
  functions of their inputs, so ``create_graph`` still works.
"""

from __future__ import annotations

import math

import numpy as np

from . import kernels
from .registry import OPS, Op, Sample, op, sample, unregister  # noqa: F401  (minigrad.ops.op is the usual spelling)
from .tensor import Tensor

# --------------------------------------------------------------------------------------
# Small helpers used by several VJPs
# --------------------------------------------------------------------------------------


def _axes(axis, ndim: int) -> tuple[int, ...]:
    """``axis`` (None, int or tuple) as a sorted tuple of positive axes; out of range is an error, as in NumPy."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int | np.integer) else tuple(axis)
    for a in axes:
        if not -ndim <= a < ndim:
            raise ValueError(f"axis {a} is out of bounds for an array of dimension {ndim}")
    positive = tuple(sorted(int(a) % ndim for a in axes))
    if len(set(positive)) != len(positive):
        raise ValueError(f"axis {axis} names an axis twice")
    return positive


def _kept_shape(in_shape, axis) -> tuple:
    """The shape a reduction over ``axis`` has with ``keepdims=True``: 1 along every reduced axis."""
    if not in_shape:  # a 0-d input: NumPy's sum, max, min and softmax take axis 0 or -1 there, reducing nothing
        return ()
    kept = list(in_shape)
    for a in _axes(axis, len(in_shape)):
        kept[a] = 1
    return tuple(kept)


def _unreduce(g, in_shape, axis, keepdims):
    """Broadcast the gradient of a reduction back to the reduced input's shape."""
    if not keepdims:
        g = g.reshape(_kept_shape(in_shape, axis))
    return g.broadcast_to(in_shape)


def _count(in_shape, axis) -> int:
    return int(np.prod([in_shape[a] for a in _axes(axis, len(in_shape))], dtype=np.int64))


def _const(mask: np.ndarray, like: Tensor) -> Tensor:
    """Wrap a constant array (a 0/1 mask, say) so it multiplies in ``like``'s dtype."""
    return Tensor._wrap(mask.astype(like.dtype, copy=False))


# --------------------------------------------------------------------------------------
# Elementwise arithmetic
# --------------------------------------------------------------------------------------

_BROADCAST = [sample((3, 4), (3, 4)), sample((3, 4), (4,)), sample((2, 1, 4), (3, 1)), sample((3, 4), ())]


@op(method="add", operator="add")
class add:
    """a + b, with broadcasting."""
    promotes = True
    samples = _BROADCAST

    def forward(a, b):
        return kernels.add(a, b)  # a + b

    def vjp(g, out, a, b):
        return g, g


@op(method="sub", operator="sub")
class sub:
    """a - b, with broadcasting."""
    promotes = True
    samples = _BROADCAST

    def forward(a, b):
        if a.dtype == np.bool_ or b.dtype == np.bool_:
            raise TypeError("subtraction with a bool tensor is not defined (as in PyTorch): to invert a mask write "
                            "~mask; for numbers, cast first: mask.long() - 1")
        return a - b

    def vjp(g, out, a, b):
        return g, -g


@op(method="mul", operator="mul")
class mul:
    """a * b, with broadcasting."""
    promotes = True
    samples = _BROADCAST
    saves = {"a": ("b",), "b": ("a",)}  # a is read for b's gradient only (x * 2 saves no x), as in PyTorch

    def forward(a, b):
        return a * b

    def vjp(g, out, a, b):
        return g * b, g * a


@op(method="div", operator="truediv")
class div:
    """a / b, with broadcasting."""
    promotes = True
    samples = [sample((3, 4), (3, 4), domain=(0.5, 2.0)), sample((3, 4), (4,), domain=(0.5, 2.0))]

    def forward(a, b):
        out = a / b
        if out.dtype.kind == "f" and a.dtype.kind != "f" and b.dtype.kind != "f":
            return out.astype(np.float32)  # int / int: PyTorch's true division gives the default float dtype
        return out

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
        return kernels.power(x, exponent)  # = x ** exponent

    def vjp(g, out, x, *, exponent):
        if exponent == 0:  # x ** 0 is constant; x ** -1 would make 0 * inf = NaN at x = 0
            return (g * 0.0,)
        if exponent == 0.5:  # the square root's: 1 / (2 sqrt x), from the output (-inf at -0.0, as sqrt's VJP)
            return (g * 0.5 / out,)
        return (g * exponent * x ** (exponent - 1),)


@op()
class pow_tensor:
    """a ** b where the exponent is a tensor too (the base must be positive)."""
    promotes = True
    samples = [sample((3, 4), (3, 4), domain=(0.5, 2.0)), sample((3, 4), (4,), domain=(0.5, 2.0))]

    def forward(a, b):
        return a ** b

    def vjp(g, out, a, b):
        # As PyTorch: where b == 0 the base's gradient is 0 (not 0 * a**-1, NaN at a = 0), and
        # where a == 0 and b >= 0 the exponent's gradient is 0 (not 0 * log 0 = NaN).
        grad_a = (g * (b * a ** (b - 1))).masked_fill(np.broadcast_to(b.data == 0, out.shape), 0.0)
        if not b.requires_grad:  # (a constant exponent, x ** mg.tensor([1, 2, 3]): no log of a negative base)
            return grad_a, None
        zero_base = (a.data == 0) & (b.data >= 0)
        grad_b = (g * out * a.log()).masked_fill(np.broadcast_to(zero_base, out.shape), 0.0)
        return grad_a, grad_b


@op(method="maximum")
class maximum:
    """Elementwise max(a, b). Where a == b the gradient is split evenly between them."""
    promotes = True
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
    promotes = True
    samples = _BROADCAST

    def forward(a, b):
        return np.minimum(a, b)

    def vjp(g, out, a, b):
        tie = 0.5 * (a.data == b.data)  # (see maximum)
        return g * _const(1.0 - (a.data > b.data) - tie, g), g * _const(1.0 - (a.data < b.data) - tie, g)


@op()
class where:
    """``cond ? x : y`` elementwise; the boolean condition is not differentiated."""
    promotes = True
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


@op()
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
        return np.where(x >= 0, 1.0, e) / (1.0 + e)  # NaN in, NaN out (both branches are NaN there)

    def vjp(g, out, x):
        return (g * out * (1.0 - out),)


@op(method="relu")
class relu:
    """max(x, 0); the gradient at exactly 0 is taken as 0."""
    samples = [sample((3, 4))]

    def forward(x):
        return np.maximum(x, 0)

    def vjp(g, out, x):
        # Masked, not multiplied: an inf gradient where x <= 0 gives 0, not NaN. (out <= 0 rather than
        # not out > 0: a NaN passes its gradient on, as in PyTorch; out, not x, is what PyTorch saves.)
        return (g.masked_fill(out.data <= 0, 0.0),)


@op(method="abs")
class abs:
    """|x|; the gradient at exactly 0 is taken as 0."""
    samples = [sample((3, 4))]

    def forward(x):
        return np.abs(x)

    def vjp(g, out, x):
        return (g * _const(np.sign(np.where(np.isnan(x.data), 0, x.data)), g),)  # NaN: gradient 0, as PyTorch


@op(method="erf")
class erf:
    """The error function, 2/sqrt(pi) * integral of exp(-t**2) from 0 to x (for exact GELU)."""
    samples = [sample((3, 4))]

    def forward(x):
        return kernels.erf(x)  # = math.erf of each element

    def vjp(g, out, x):
        return (g * (2.0 / math.sqrt(math.pi)) * (-(x * x)).exp(),)


@op(method="sin")
class sin:
    """Sine."""
    samples = [sample((3, 4))]

    def forward(x):
        return np.sin(x)

    def vjp(g, out, x):
        return (g * x.cos(),)


@op(method="cos")
class cos:
    """Cosine."""
    samples = [sample((3, 4))]

    def forward(x):
        return np.cos(x)

    def vjp(g, out, x):
        return (-g * x.sin(),)


@op(method="log1p")
class log1p:
    """log(1 + x), accurate where x is tiny (log(1 + 1e-10) would round 1 + x to 1)."""
    samples = [sample((3, 4), domain=(-0.5, 2.0))]

    def forward(x):
        return np.log1p(x)

    def vjp(g, out, x):
        return (g / (1.0 + x),)


@op(method="expm1")
class expm1:
    """exp(x) - 1, accurate where x is tiny."""
    samples = [sample((3, 4))]

    def forward(x):
        return np.expm1(x)

    def vjp(g, out, x):
        return (g * (out + 1.0),)


class _Step:
    """A piecewise-constant function: its gradient is 0 wherever it is defined (PyTorch's too)."""
    samples = [sample((3, 4))]

    def vjp(g, out, x):
        return (g * 0.0,)


@op(method="floor")
class floor(_Step):
    """The largest integer <= x (in x's dtype); gradient 0."""

    def forward(x):
        return np.floor(x)


@op(method="ceil")
class ceil(_Step):
    """The smallest integer >= x (in x's dtype); gradient 0."""

    def forward(x):
        return np.ceil(x)


@op(method="trunc")
class trunc(_Step):
    """x rounded towards 0 (in x's dtype); gradient 0."""

    def forward(x):
        return np.trunc(x)


@op()
class round:
    """x rounded to ``decimals`` places, halves to even (NumPy's and PyTorch's rule); gradient 0."""
    samples = [sample((3, 4), decimals=0), sample((3, 4), decimals=2)]

    def forward(x, *, decimals=0):
        return np.round(x, decimals)

    def vjp(g, out, x, *, decimals=0):
        return (g * 0.0,)


@op(method="sign")
class sign(_Step):
    """-1, 0 or 1 as x is negative, zero or positive (NaN stays NaN); gradient 0."""

    def forward(x):
        return np.sign(x)


@op(method="astype")
class astype:
    """Cast to another dtype; the gradient is cast back to the input's dtype."""
    samples = [sample((3, 4), dtype="float64")]  # gradcheck runs in float64; casts are tested apart

    def forward(x, *, dtype):
        return x.astype(dtype)

    def vjp(g, out, x, *, dtype):
        return (g.astype(x.dtype),)


@op(method="round_to")
class round_to:
    """Each element rounded to the nearest value of a narrower float format, kept in x's dtype (emulation).

    ``x.round_to("bfloat16")``: bfloat16 is float32's sign and 8 exponent bits with the top 7 of its 23
    fraction bits, so the rounding adds to float32's bit pattern and clears the low 16 bits (round to
    nearest, ties to even; float32's range, 8 significant bits). ``"float16"``: IEEE half precision, 11
    significant bits, largest 65504, subnormals down to 2**-24, then 0 (NumPy's own cast). ``"float32"``
    and ``"float64"``: those formats (no change where x holds no more). float64 input is rounded to
    float32 first for bfloat16 and float16, as PyTorch's ``x.to(torch.bfloat16)`` / ``x.to(torch.float16)``
    do (two roundings, which differ from one next to a tie: 1 + 2**-11 + 2**-40 gives 1.0). The gradient
    is rounded the same way: a value held in a format has its gradient held in it too (PyTorch's gradient
    of a bfloat16 tensor is bfloat16), which is how float16 gradients underflow. demos/precision_lesson.py
    shows what it does.
    """
    samples = [sample((3, 4), fmt="float64")]  # gradcheck runs in float64; the roundings are tested apart

    def forward(x, *, fmt):
        if fmt == "bfloat16":
            bits = x.astype(np.float32).view(np.uint32)
            bits = (bits + (0x7FFF + ((bits >> 16) & 1))) & 0xFFFF0000  # nearest, ties to the even last bit
            out = np.where(np.isnan(x), x, bits.view(np.float32))  # (a NaN's bits could round into inf)
        elif fmt in ("float16", "float32", "float64"):
            with np.errstate(over="ignore"):  # beyond the format's largest value is inf, as in a real cast
                out = (x.astype(np.float32) if fmt == "float16" else x).astype(fmt)
        else:
            raise ValueError(f"fmt must be 'bfloat16', 'float16', 'float32' or 'float64', got {fmt!r}")
        return out.astype(x.dtype, copy=False)

    def vjp(g, out, x, *, fmt):
        return (g.round_to(fmt),)


# --------------------------------------------------------------------------------------
# Reductions (NumPy's axis= / keepdims= / ddof= here; dialect/ reads PyTorch's dim= / keepdim= / correction=)
# --------------------------------------------------------------------------------------

_REDUCE = [sample((3, 4)), sample((3, 4), axis=1), sample((2, 3, 4), axis=(0, 2), keepdims=True),
           sample((2, 3, 4), axis=-1)]


@op()
class sum:
    """Sum over ``axis`` (None: all axes)."""
    samples = _REDUCE

    def forward(x, *, axis=None, keepdims=False):
        return kernels.sum(x, axis, keepdims)  # = x.sum(axis=axis, keepdims=keepdims)

    def vjp(g, out, x, *, axis=None, keepdims=False):
        return (_unreduce(g, x.shape, axis, keepdims),)


@op()
class mean:
    """Mean over ``axis`` (None: all axes)."""
    samples = _REDUCE

    def forward(x, *, axis=None, keepdims=False):
        return kernels.mean(x, axis, keepdims)  # = x.mean(axis=axis, keepdims=keepdims)

    def vjp(g, out, x, *, axis=None, keepdims=False):
        count = _count(x.shape, axis)  # 0 only when x is empty, and then so is its gradient
        return (_unreduce(g, x.shape, axis, keepdims) * (1.0 / count if count else 0.0),)


@op()
class prod:
    """Product over ``axis`` (None: all axes)."""
    samples = _REDUCE

    def forward(x, *, axis=None, keepdims=False):
        return np.prod(x, axis=axis, keepdims=keepdims)

    def vjp(g, out, x, *, axis=None, keepdims=False):
        # d out / d x_i is the product of the others: out / x_i where x_i != 0. With a zero in the
        # product, the others' product is formed directly (a constant: second order is not taken there).
        kept = out.reshape(_kept_shape(x.shape, axis))
        if (x.data != 0).all():
            return (_unreduce(g, x.shape, axis, keepdims) * kept / x,)
        return (_unreduce(g, x.shape, axis, keepdims) * _const(_others_product(x.data, axis), g),)


def _others_product(x: np.ndarray, axis) -> np.ndarray:
    """For each element, the product of the other elements of its reduction (exact with zeros)."""
    axes = _axes(axis, x.ndim)
    moved = np.moveaxis(x, axes, tuple(range(x.ndim - len(axes), x.ndim)))
    flat = moved.reshape(moved.shape[:x.ndim - len(axes)] + (-1,))
    before = np.cumprod(np.concatenate([np.ones_like(flat[..., :1]), flat[..., :-1]], axis=-1), axis=-1)
    after = np.flip(np.cumprod(np.concatenate([np.ones_like(flat[..., :1]), np.flip(flat, -1)[..., :-1]], -1), -1), -1)
    return np.moveaxis((before * after).reshape(moved.shape), tuple(range(x.ndim - len(axes), x.ndim)), axes)


@op()
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
        # (the factor first, as PyTorch: g * centred alone can overflow float32 where the gradient does not)
        return (_unreduce(g, x.shape, axis, keepdims) * (centred * (2.0 / dof if dof != 0 else math.inf)),)


@op()
class std:
    """Standard deviation over ``axis`` with ``ddof``: sqrt(var); where it is 0 the gradient is 0 (as PyTorch)."""
    samples = _REDUCE + [sample((3, 5), axis=1, ddof=1)]

    def forward(x, *, axis=None, ddof=0, keepdims=False):
        return np.sqrt(var.forward(x, axis=axis, ddof=ddof, keepdims=keepdims))

    def vjp(g, out, x, *, axis=None, ddof=0, keepdims=False):
        # d std = d var / (2 std): var's VJP given g / (2 std).
        flat = out.data == 0  # a constant row: 0 / 0 in the formula; its gradient is 0
        safe = out.masked_fill(flat, 1.0) if flat.any() else out
        (grad_var,) = var.vjp(g / safe * 0.5, None, x, axis=axis, ddof=ddof, keepdims=keepdims)
        if flat.any():
            grad_var = grad_var.masked_fill(np.broadcast_to(flat.reshape(_kept_shape(x.shape, axis)), x.shape), 0.0)
        return (grad_var,)


def _extreme_vjp(g, out, x, axis, keepdims):
    # Every element equal to the extreme gets an equal share of the gradient
    # (ties split it evenly, so the total is preserved).
    hit = x.data == out.data.reshape(_kept_shape(x.shape, axis))
    share = hit / hit.sum(axis=axis, keepdims=True)
    return (_unreduce(g, x.shape, axis, keepdims) * _const(share, g),)


@op()
class max:
    """Maximum over ``axis``. Tied maxima share the gradient equally (as ``torch.amax``).

    ``x.amax(dim)`` and NumPy's ``x.max(axis=d)``; PyTorch's ``x.max(dim)`` is (values,
    indices), the values picked by ``getitem`` (``dialect/extremes.py``).
    """
    samples = _REDUCE

    def forward(x, *, axis=None, keepdims=False):
        return x.max(axis=axis, keepdims=keepdims)

    def vjp(g, out, x, *, axis=None, keepdims=False):
        return _extreme_vjp(g, out, x, axis, keepdims)


@op()
class min:
    """Minimum over ``axis``. Tied minima share the gradient equally (as ``torch.amin``).

    ``x.amin(dim)`` and NumPy's ``x.min(axis=d)``; PyTorch's ``x.min(dim)`` is (values, indices).
    """
    samples = _REDUCE

    def forward(x, *, axis=None, keepdims=False):
        return x.min(axis=axis, keepdims=keepdims)

    def vjp(g, out, x, *, axis=None, keepdims=False):
        return _extreme_vjp(g, out, x, axis, keepdims)


def _flip(t: Tensor, axis: int) -> Tensor:
    """``t`` reversed along ``axis`` (a getitem, so differentiable)."""
    return t[(slice(None),) * (axis % t.ndim) + (slice(None, None, -1),)]


@op()
class cumsum:
    """Running sum along ``axis``: out[j] = x[0] + ... + x[j]."""
    samples = [sample((3, 4), axis=1), sample((3, 4), axis=0), sample((5,), axis=-1)]

    def forward(x, *, axis):
        return np.cumsum(x, axis=axis)

    def vjp(g, out, x, *, axis):
        # d out[j] / d x[k] = 1 for k <= j: x[k]'s gradient is the sum of g[j] over j >= k, a reversed running sum
        return (_flip(cumsum(_flip(g, axis), axis=axis), axis),)


@op()
class cumprod:
    """Running product along ``axis``: out[j] = x[0] * ... * x[j]."""
    samples = [sample((3, 4), axis=1), sample((4,), axis=0),
               sample(np.array([[0.5, 0.0, 2.0], [1.5, -1.0, 0.0]]), axis=1)]  # (zeros: no division in the VJP)

    def forward(x, *, axis):
        return np.cumprod(x, axis=axis)

    def vjp(g, out, x, *, axis):
        # d out[j] / d x[k] = the product of x[i] over i <= j, i != k (k <= j). Each k gets a copy of the row with
        # x[k] replaced by 1, whose running product holds those; no division, so zeros in x are fine. O(n^2).
        d = axis % x.ndim
        order = [i for i in range(x.ndim) if i != d] + [d]
        xs, gs = x.permute(*order), g.permute(*order)  # (..., n): the axis last
        n = xs.shape[-1]
        rows = xs.unsqueeze(-2).expand(*xs.shape[:-1], n, n).masked_fill(np.eye(n, dtype=bool), 1.0)  # (..., k, i)
        partial = cumprod(rows, axis=-1).masked_fill(np.tri(n, n, -1, dtype=bool), 0.0)  # (..., k, j); 0 for j < k
        grad = (partial * gs.unsqueeze(-2)).sum(-1)  # (..., k)
        return (grad.permute(*np.argsort(order)),)


@op()
class norm:
    """The Euclidean norm, sqrt(sum(x ** 2)) over ``axis``; its gradient x / norm is taken as 0 where the norm is 0.

    (As PyTorch's: sqrt's own gradient at 0 is infinite, and 0 * inf would make the gradient NaN.)
    """
    samples = [sample((3, 4)), sample((3, 4), axis=1, keepdims=True)]

    def forward(x, *, axis=None, keepdims=False):
        return np.sqrt(np.sum(x * x, axis=axis, keepdims=keepdims))

    def vjp(g, out, x, *, axis=None, keepdims=False):
        zero = out.data == 0
        scale = (g / out.masked_fill(zero, 1.0)).masked_fill(zero, 0.0)
        return (_unreduce(scale, x.shape, axis, keepdims) * x,)


@op()
class logsumexp:
    """log(sum(exp(x))) over ``axis``, shifted by the max so large inputs cannot overflow."""
    samples = _REDUCE + [sample((3, 4), axis=1, keepdims=True)]

    def forward(x, *, axis=None, keepdims=False):
        if x.ndim == 0:  # as NumPy's sum: axis None, 0 or -1, reducing nothing; log(exp(x)) is x, +-inf and NaN too
            np.sum(x, axis=axis)  # checks the axis
            return np.array(x, dtype=x.dtype if x.dtype.kind == "f" else np.float64)
        if x.size == 0:  # no max to shift by; the log of an empty sum is -inf (as PyTorch)
            kept = np.sum(x, axis=axis, keepdims=True).shape  # (which also checks the axis)
            lse = np.full(kept, -np.inf, dtype=x.dtype if x.dtype.kind == "f" else np.float64)
            return lse if keepdims else lse.reshape(np.delete(x.shape, _axes(axis, x.ndim)))
        m = kernels.stable_max(x, axis)
        with np.errstate(divide="ignore", invalid="ignore"):  # log(0) = -inf for a row that is all -inf
            lse = np.log(np.exp(x - m).sum(axis=axis, keepdims=True)) + m
        if np.isposinf(m).any():  # a row holding +inf: its sum is +inf (x - m would be inf - inf = NaN)
            lse[np.isposinf(m)] = np.inf
        return lse if keepdims else lse.reshape(np.delete(x.shape, _axes(axis, x.ndim)))

    def vjp(g, out, x, *, axis=None, keepdims=False):
        if x.ndim == 0:  # no axis to take a softmax over: d/dx = exp(x - out), 1 (NaN at inf), 0 at -inf
            return (g * (x - out).exp().masked_fill(np.isneginf(x.data), 0.0),)
        weights = x.softmax(axis=_axes(axis, x.ndim))
        infinite = np.isposinf(out.data.reshape(_kept_shape(x.shape, axis)))
        if infinite.any():  # rows whose sum is +inf: d/dx is 0 at finite entries, undefined (NaN) at +inf, as PyTorch
            at_inf = np.isposinf(x.data)
            weights = weights.masked_fill(infinite & ~at_inf, 0.0).masked_fill(infinite & at_inf, np.nan)
        return (_unreduce(g, x.shape, axis, keepdims) * weights,)


@op()
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
        return kernels.softmax(x, axis)  # = exp(x - m) / sum(exp(x - m)), m = x.max(axis) (0 for all -inf)

    def vjp(g, out, x, *, axis=-1):
        # The Jacobian of softmax is diag(out) - out out^T, so J^T g = out * (g - sum(g * out)).
        return (out * (g - (g * out).sum(axis=axis, keepdims=True)),)


@op()
class log_softmax:
    """x - logsumexp(x) over ``axis``, stable for large inputs (-inf in, -inf out)."""
    samples = [sample((3, 5)), sample((2, 3, 4), axis=1), sample((3, 4), axis=0)]

    def forward(x, *, axis=-1):
        if x.size == 0:  # nothing to normalise (and no max to shift by)
            np.sum(x, axis=axis)  # checks the axis
            return x.astype(np.result_type(x, np.float32))
        shifted = x - kernels.stable_max(x, axis)
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
    saves = {"a": ("b",), "b": ("a",)}  # a is read for b's gradient only, as in PyTorch

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
        return kernels.matmul(a, b)  # = a @ b

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
        if b2.ndim == 2 and a2.ndim > 2:
            # A weight matrix shared across the batch: fold the batch into the rows, so its
            # gradient is one (K, N) product rather than a (B, K, N) stack summed afterwards.
            n = math.prod(a2.shape[:-1])  # (spelled out: reshape cannot infer -1 for a zero-size K or M)
            gb = a2.reshape(n, a2.shape[-1]).T @ g2.reshape(n, g2.shape[-1])
        else:
            gb = a2.swapaxes(-1, -2) @ g2
        if a.ndim == 1:
            ga = ga.squeeze(-2)
        if b.ndim == 1:
            gb = gb.squeeze(-1)
        return ga, gb


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
        n = x.ndim  # (read once: x's values are not needed, so backward does not check them)
        inverse = None if axes is None else tuple(sorted(range(n), key=lambda i: axes[i] % n))
        return (g.permute(inverse) if inverse is not None else g.transpose(),)


@op()
class broadcast_to:
    """Broadcast to a larger shape without copying; the engine sums the gradient back."""
    samples = [sample((3, 1), shape=(2, 3, 4)), sample((4,), shape=(3, 4))]

    def forward(x, *, shape):
        return np.broadcast_to(x, shape)

    def vjp(g, out, x, *, shape):
        return (g,)


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
        return (scatter_add(g, index=index, shape=x.shape),)


@op()
class setitem:
    """x with ``value`` (broadcast) written at ``index``: ``x[index] = value``, ``copy_``, ``zero_`` in the graph.

    The gradient of x is g with the written places zeroed (their old values are
    gone); value's is g at those places. ``inplace.py`` writes the result into x.
    """
    samples = [sample((4, 5), (2, 5), index=(slice(1, 3),)), sample((4, 5), (), index=np.array([0, 3])),
               sample((3, 4), (4,), index=...)]

    def forward(x, value, *, index):
        out = x.copy()
        out[index] = value
        return out

    def vjp(g, out, x, value, *, index):
        written = np.zeros(g.shape, dtype=bool)
        written[index] = True
        return g.masked_fill(written, 0.0), g[index]


@op()
class scatter_add:
    """A zero array of ``shape`` with g added at ``index`` (repeats accumulate): getitem's VJP."""
    samples = [sample((2, 5), index=(slice(1, 3),), shape=(4, 5)),
               sample((4, 5), index=np.array([0, 2, 2, 3]), shape=(4, 5))]

    def forward(g, *, index, shape):
        return kernels.scatter_add(g, index, shape)  # = np.add.at(np.zeros(shape), index, g)

    def vjp(gg, out, g, *, index, shape):
        return (gg[index],)


@op()
class concatenate:
    """Join tensors along an existing axis."""
    promotes = True
    samples = [sample((2, 3), (4, 3)), sample((2, 3), (2, 1), (2, 2), axis=1)]
    saves = ()  # (the VJP reads the inputs' shapes only)

    def forward(*xs, axis=0):
        return np.concatenate(xs, axis=axis)

    def vjp(g, out, *xs, axis=0):
        bounds = np.cumsum([0] + [x.shape[axis] for x in xs])
        lead = (slice(None),) * (axis % out.ndim)
        return tuple(g[lead + (slice(int(lo), int(hi)),)] for lo, hi in zip(bounds[:-1], bounds[1:]))


@op()
class stack:
    """Join same-shaped tensors along a new axis."""
    promotes = True
    samples = [sample((2, 3), (2, 3)), sample((2, 3), (2, 3), (2, 3), axis=-1)]
    saves = ()  # (the VJP reads how many inputs there are only)

    def forward(*xs, axis=0):
        return np.stack(xs, axis=axis)

    def vjp(g, out, *xs, axis=0):
        lead = (slice(None),) * (axis % out.ndim)
        return tuple(g[lead + (i,)] for i in range(len(xs)))


@op()
class tril:
    """Keep the lower triangle of the last two axes (entries above diagonal ``k`` become 0)."""
    samples = [sample((4, 4)), sample((2, 3, 4), k=1)]

    def forward(x, *, k=0):
        if x.ndim < 2:  # (np.tril would make a 1-D x into an (n, n) matrix; PyTorch raises)
            raise ValueError(f"tril needs a tensor of at least 2 dimensions, got {x.ndim}")
        return np.tril(x, k)

    def vjp(g, out, x, *, k=0):
        return (g.tril(k=k),)


@op()
class triu:
    """Keep the upper triangle of the last two axes (entries below diagonal ``k`` become 0)."""
    samples = [sample((4, 4)), sample((2, 3, 4), k=-1)]

    def forward(x, *, k=0):
        if x.ndim < 2:  # (np.triu would make a 1-D x into an (n, n) matrix; PyTorch raises)
            raise ValueError(f"triu needs a tensor of at least 2 dimensions, got {x.ndim}")
        return np.triu(x, k)

    def vjp(g, out, x, *, k=0):
        return (g.triu(k=k),)
