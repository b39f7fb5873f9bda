"""The call forms: how a Tensor method or an ``mg.`` function, spelled as PyTorch or NumPy spells it, reaches its op.

The op table (``ops.py``) states each primitive once, with NumPy's parameters
(``axis``, ``keepdims``, ``ddof``, ``axes``). This file is the one place that
reads a call and says which block it means, with which parameters:

* every Tensor method and ``mg.`` function PyTorch also has takes PyTorch's
  spellings, positional arguments included, with PyTorch's meaning:
  ``x.transpose(0, 1)`` swaps two dims, ``x.split(64, 2)`` cuts pieces of
  size 64 along dim 2, ``x.var(0, keepdim=True)`` is unbiased, ``x.max(-1)``
  is (values, indices);
* NumPy's keywords (``axis=``, ``keepdims=``, ``ddof=``) keep NumPy's meaning:
  ``x.var(axis=0)`` is the biased variance, ``x.split(3, axis=2)`` three equal
  parts, ``x.max(axis=-1)`` the maxima alone;
* where a call reads both ways and the spelling cannot tell (``x.var(0)``,
  ``x.split(2)``, ``x.transpose(0, 1)`` on a matrix), PyTorch's meaning wins,
  and the README's "where minigrad differs" table lists the call;
* a spelling minigrad does not take is an error that names the one to write.

``bind`` (``registry.bind_call_form``) puts each form on ``Tensor``, named for
its op: ``help(Tensor.var)`` shows this form and then the op's block, and
``inspect.getsource`` leads to the block. The ``mg.`` functions (``mg.split``,
``mg.cat``, ``mg.tanh``...) call the same forms.
"""

from __future__ import annotations

import math
from collections import namedtuple

import numpy as np

from . import fused, ops  # noqa: F401  (the op table: its blocks are what the forms apply)
from . import random as _random
from .creation import CPU, check_device
from .dtypes import as_dtype
from .registry import OPS, apply, bind_call_form
from .tensor import OpError, Tensor

ValuesIndices = namedtuple("ValuesIndices", ["values", "indices"])
ValuesIndices.__doc__ = "What ``x.max(dim)``, ``x.min(dim)``, ``x.sort()`` and ``x.topk(k)`` return, as in PyTorch."

_FLOAT = np.dtype(np.float32)


def bind(op_name: str | None, *names: str):
    """Decorator: put the function on ``Tensor`` under ``names``, as a call form of op ``op_name``."""
    def decorate(function):
        for name in names:
            bind_call_form(function, name, op_name)
        return function

    return decorate


# --------------------------------------------------------------------------------------
# Reading the arguments
# --------------------------------------------------------------------------------------


def _dim(who: str, dim, axis):
    """One of PyTorch's ``dim`` and NumPy's ``axis`` (a list becomes a tuple); both given is an error."""
    if axis is not None:
        if dim is not None:
            raise TypeError(f"{who}: dim= and axis= name the same thing; give one ({who}(..., dim={dim!r}))")
        dim = axis
    return tuple(dim) if type(dim) is list else dim


def _scalar_dim(who: str, x: Tensor, dim):
    """A 0-d tensor takes dim 0 or -1 (PyTorch), reducing nothing: None for the op; out of range is an OpError."""
    for d in dim if isinstance(dim, tuple) else (dim,):
        _axis_in(who, x, d)
    return None


def _keep(who: str, keepdim, keepdims, dim=None) -> bool:
    """One of PyTorch's ``keepdim`` and NumPy's ``keepdims``, as a bool."""
    if keepdims is not None:
        if keepdim:
            raise TypeError(f"{who}: keepdim= and keepdims= name the same thing; give one (x.{who}(..., keepdim=True))")
        keepdim = keepdims
    if keepdim is not True and keepdim is not False and not isinstance(keepdim, np.bool_):
        raise TypeError(f"{who}: keepdim must be True or False, got {keepdim!r}; NumPy's second positional argument, "
                        f"dtype, is a keyword here: x.{who}({dim!r}, dtype={_dtype_name(keepdim)})")
    return bool(keepdim)


class _NotGiven:
    """The default of ``axis=`` where ``x.var(axis=None)`` (NumPy's, ddof=0) differs from ``x.var()`` (PyTorch's)."""

    def __repr__(self) -> str:
        return "None"


NOT_GIVEN = _NotGiven()


def _dtype_name(dtype) -> str:
    try:
        return f"mg.{np.dtype(dtype).name}"
    except TypeError:
        return repr(dtype)


def _axis_in(who: str, x: Tensor, dim: int) -> int:
    """``dim`` as a positive index; a 0-d tensor takes 0 and -1 (as PyTorch); out of range is an OpError."""
    ndim = max(x.ndim, 1)
    if not isinstance(dim, int | np.integer) or isinstance(dim, bool):
        raise TypeError(f"{who}: dim must be an int, got {dim!r}")
    if not -ndim <= dim < ndim:
        raise OpError(f"{who}: dim {dim} is out of range for {x.ndim} dims (input {x.shape} {x.dtype})")
    return int(dim) % ndim


def _tensor(x, who: str) -> Tensor:
    if isinstance(x, Tensor):
        return x
    if isinstance(x, np.ndarray | np.generic):
        return Tensor._wrap(np.asarray(x))
    if isinstance(x, int | float):  # a Python number: int64, or float32 as minigrad's floats
        return Tensor._wrap(np.asarray(x, dtype=np.float32 if isinstance(x, float) else None))
    raise TypeError(f"{who}: expected a Tensor, got {type(x).__name__}; make one with mg.tensor(...)")


# --------------------------------------------------------------------------------------
# Reductions: sum, mean, prod, var, std, logsumexp, all, any
# --------------------------------------------------------------------------------------


@bind("sum", "sum")
def sum_(self, dim=None, keepdim=False, *, dtype=None, axis=None, keepdims=None) -> Tensor:
    """Sum over ``dim`` (an int or a tuple; None: every dim): ``x.sum(1, keepdim=True)``, ``x.sum(axis=1)``."""
    if axis is not None or keepdims is not None or type(dim) is list or keepdim is not False:
        dim = _dim("sum", dim, axis)
        keepdim = _keep("sum", keepdim, keepdims, dim)
    if self.ndim == 0 and dim is not None and axis is None:
        dim = _scalar_dim("sum", self, dim)
    x = self if dtype is None else self.to(dtype)
    return apply(OPS["sum"], x, axis=dim, keepdims=keepdim)


@bind("mean", "mean")
def mean(self, dim=None, keepdim=False, *, dtype=None, axis=None, keepdims=None) -> Tensor:
    """Mean over ``dim`` (an int or a tuple; None: every dim)."""
    if axis is not None or keepdims is not None or type(dim) is list or keepdim is not False:
        dim = _dim("mean", dim, axis)
        keepdim = _keep("mean", keepdim, keepdims, dim)
    if self.ndim == 0 and dim is not None and axis is None:
        dim = _scalar_dim("mean", self, dim)
    x = self if dtype is None else self.to(dtype)
    return apply(OPS["mean"], x, axis=dim, keepdims=keepdim)


@bind("prod", "prod")
def prod(self, dim=None, keepdim=False, *, dtype=None, axis=None, keepdims=None) -> Tensor:
    """Product over ``dim`` (None: every dim)."""
    dim = _dim("prod", dim, axis)
    keepdim = _keep("prod", keepdim, keepdims, dim)
    if self.ndim == 0 and dim is not None and axis is None:
        dim = _scalar_dim("prod", self, dim)
    x = self if dtype is None else self.to(dtype)
    return apply(OPS["prod"], x, axis=dim, keepdims=keepdim)


def _correction(who: str, x: Tensor, dim, unbiased, keepdim, correction, axis, ddof, keepdims) -> tuple:
    """(axis, ddof, keepdims) for var/std, PyTorch's default correction=1 unless NumPy's keywords are used.

    ``x.var(0, keepdim=True)``: PyTorch, unbiased. ``x.var(axis=0, keepdims=True)`` or ``ddof=``: NumPy,
    ddof=0 unless given. ``x.var(0)`` and ``x.var()`` read both ways: PyTorch's meaning (correction=1).
    """
    if isinstance(dim, bool):  # x.var(False): PyTorch's var(unbiased)
        dim, unbiased = None, dim if unbiased is None else unbiased
    numpy_words = [name for name, v in (("keepdims", keepdims), ("ddof", ddof)) if v is not None]
    if axis is not NOT_GIVEN:  # (x.var(axis=None) is NumPy's, ddof=0)
        numpy_words.insert(0, "axis")
    axis = None if axis is NOT_GIVEN else axis
    torch_words = [name for name, v in (("unbiased", unbiased), ("correction", correction)) if v is not None]
    if keepdim is not False:
        torch_words.append("keepdim")
    given = [v for v in (unbiased, correction, ddof) if v is not None]
    dims, keep = _dim(who, dim, axis), (keepdims if keepdims is not None else keepdim)
    if len(given) > 1:
        raise TypeError(f"{who}: give one of correction=, unbiased= and ddof=, as "
                        f"x.{who}(dim={dims!r}, keepdim={keep!r}, correction=1)")
    if given:
        amount = given[0] if unbiased is None else (1 if unbiased else 0)
    elif numpy_words and torch_words:
        raise TypeError(f"{who}: NumPy's {'= and '.join(numpy_words)}= (default ddof=0) mixed with PyTorch's "
                        f"{'= and '.join(torch_words)}= (default correction=1): write "
                        f"x.{who}(dim={dims!r}, keepdim={keep!r}, correction=1) or "
                        f"x.{who}(axis={dims!r}, keepdims={keep!r}, ddof=0)")
    else:
        amount = 0 if numpy_words else 1
    if axis is None and dims is not None and x.ndim == 0:
        dims = _scalar_dim(who, x, dims)
    return dims, amount, _keep(who, keepdim, keepdims)


@bind("var", "var")
def var(self, dim=None, unbiased=None, keepdim=False, *, correction=None, axis=NOT_GIVEN, ddof=None,
        keepdims=None) -> Tensor:
    """Variance over ``dim``: PyTorch's ``correction=1`` (unbiased) unless NumPy's ``axis=``/``keepdims=``/``ddof=``.

    ``x.var(0, keepdim=True)`` divides by n - 1, ``x.var(axis=0, keepdims=True)`` by n,
    ``x.var(0, correction=0)`` / ``x.var(0, unbiased=False)`` / ``x.var(axis=0, ddof=1)`` say which.
    """
    axis, ddof, keepdims = _correction("var", self, dim, unbiased, keepdim, correction, axis, ddof, keepdims)
    return apply(OPS["var"], self, axis=axis, ddof=ddof, keepdims=keepdims)


@bind("std", "std")
def std(self, dim=None, unbiased=None, keepdim=False, *, correction=None, axis=NOT_GIVEN, ddof=None,
        keepdims=None) -> Tensor:
    """Standard deviation, sqrt of ``var`` with the same arguments (PyTorch's correction=1 unless NumPy's words)."""
    axis, ddof, keepdims = _correction("std", self, dim, unbiased, keepdim, correction, axis, ddof, keepdims)
    return apply(OPS["std"], self, axis=axis, ddof=ddof, keepdims=keepdims)


@bind("logsumexp", "logsumexp")
def logsumexp(self, dim=None, keepdim=False, *, axis=None, keepdims=None) -> Tensor:
    """log(sum(exp(x))) over ``dim``, stable for large inputs."""
    dims = _dim("logsumexp", dim, axis)
    if self.ndim == 0 and dims is not None and axis is None:
        dims = _scalar_dim("logsumexp", self, dims)
    return apply(OPS["logsumexp"], self, axis=dims, keepdims=_keep("logsumexp", keepdim, keepdims))


def _truth(name: str):
    def truth(self, dim=None, keepdim=False, *, axis=None, keepdims=None) -> Tensor:
        dim, keepdim = _dim(name, dim, axis), _keep(name, keepdim, keepdims)
        return Tensor._wrap(np.asarray(getattr(self.data.astype(bool), name)(axis=dim, keepdims=keepdim)))

    truth.__doc__ = f"Whether {'every' if name == 'all' else 'any'} element over ``dim`` is non-zero (a bool tensor)."
    truth.__name__ = name
    return truth


bind(None, "all")(_truth("all"))
bind(None, "any")(_truth("any"))


# --------------------------------------------------------------------------------------
# max, min, argmax, argmin, sort, topk: (values, indices) over a dim, as PyTorch
# --------------------------------------------------------------------------------------


def _along(shape: tuple, d: int, index: np.ndarray) -> tuple:
    """The advanced index that picks ``index`` (shape = ``shape`` with dim ``d`` of any size) along dim ``d``.

    ``x[_along(x.shape, d, i)]`` is ``np.take_along_axis(x, i, d)``, as a getitem, so the
    gradient flows to the picked elements only (as PyTorch's max(dim), sort and topk).
    """
    parts = []
    for a, n in enumerate(shape):
        if a == d:
            parts.append(index)
        else:
            parts.append(np.arange(n).reshape([n if b == a else 1 for b in range(len(shape))]))
    return tuple(parts)


def _values_indices(who: str, x: Tensor, dim, keepdim: bool, pick) -> ValuesIndices:
    """``x``'s extreme along ``dim``: values (a getitem: the gradient goes to the picked element), int64 indices."""
    d = _axis_in(who, x, dim)
    if x.ndim == 0:
        return ValuesIndices(apply(OPS["getitem"], x, index=()), Tensor._wrap(np.zeros((), np.int64)))
    if x.shape[d] == 0:
        raise OpError(f"{who}: dim {dim} has size 0, so there is no {who} along it (input {x.shape} {x.dtype})")
    kept = pick(x.data, axis=d, keepdims=True)  # (shape with 1 at d)
    values = apply(OPS["getitem"], x, index=_along(x.shape, d, kept))  # (kept shape)
    indices = kept if keepdim else kept.squeeze(d)
    if not keepdim:
        values = apply(OPS["reshape"], values, shape=indices.shape)
    return ValuesIndices(values, Tensor._wrap(indices.astype(np.int64, copy=False)))


def _extreme(name: str, pick, elementwise: str):
    def extreme(self, dim=None, keepdim=False, *, axis=None, keepdims=None):
        if axis is not None or keepdims is not None:  # NumPy's words: the extremes alone (amax), ties sharing
            return apply(OPS[name], self, axis=_dim(name, dim, axis), keepdims=_keep(name, keepdim, keepdims))
        if dim is None:
            if keepdim:
                raise TypeError(f"{name}: keepdim=True needs a dim: x.{name}(dim, keepdim=True), or "
                                f"x.a{name}(dim=None, keepdim=True) for the {name} of every element")
            return apply(OPS[name], self)
        if isinstance(dim, Tensor | np.ndarray):  # PyTorch's x.max(other): elementwise
            return apply(OPS[elementwise], self, dim)
        if isinstance(dim, tuple | list):  # (PyTorch takes one dim here; NumPy's amax over several)
            return apply(OPS[name], self, axis=tuple(dim), keepdims=_keep(name, keepdim, None))
        return _values_indices(name, self, dim, _keep(name, keepdim, None), pick)

    extreme.__name__ = name
    word = "largest" if name == "max" else "smallest"
    extreme.__doc__ = (
        f"The {word} element: ``x.{name}()`` over every element; ``x.{name}(dim)`` is PyTorch's (values, indices) "
        f"namedtuple, ``v, i = x.{name}(-1)``, the gradient going to the picked element; ``x.{name}(axis=d)`` "
        f"is NumPy's, the values alone, tied {name}ima sharing the gradient; ``x.{name}(other)`` is "
        f"``mg.{elementwise}(x, other)``.")
    return extreme


bind("max", "max")(_extreme("max", np.argmax, "maximum"))
bind("min", "min")(_extreme("min", np.argmin, "minimum"))


@bind("max", "amax")
def amax(self, dim=None, keepdim=False, *, axis=None, keepdims=None) -> Tensor:
    """The maxima over ``dim`` (an int or a tuple; None: every dim), tied maxima sharing the gradient."""
    dims = _dim("amax", dim, axis)
    if self.ndim == 0 and dims is not None and axis is None:
        dims = _scalar_dim("amax", self, dims)
    return apply(OPS["max"], self, axis=dims, keepdims=_keep("amax", keepdim, keepdims))


@bind("min", "amin")
def amin(self, dim=None, keepdim=False, *, axis=None, keepdims=None) -> Tensor:
    """The minima over ``dim`` (an int or a tuple; None: every dim), tied minima sharing the gradient."""
    dims = _dim("amin", dim, axis)
    if self.ndim == 0 and dims is not None and axis is None:
        dims = _scalar_dim("amin", self, dims)
    return apply(OPS["min"], self, axis=dims, keepdims=_keep("amin", keepdim, keepdims))


def _arg(name: str):
    def arg(self, dim=None, keepdim=False, *, axis=None, keepdims=None) -> Tensor:
        dim, keepdim = _dim(name, dim, axis), _keep(name, keepdim, keepdims)
        if dim is not None:
            _axis_in(name, self, dim)
        if self.size == 0 and (dim is None or self.shape[dim] == 0):
            raise OpError(f"{name}: the input is empty along {'every dim' if dim is None else f'dim {dim}'}, so there "
                          f"is no {name[3:]} to point at (input {self.shape} {self.dtype})")
        data = self.data if self.ndim or dim is None else self.data.reshape(1)
        found = getattr(data, name)(axis=dim, keepdims=keepdim)
        return Tensor._wrap(np.asarray(found, dtype=np.int64).reshape(() if self.ndim == 0 else np.shape(found)))

    arg.__name__ = name
    arg.__doc__ = f"The index of the {name[3:]}imum over ``dim`` (None: of the flattened tensor), int64."
    return arg


bind(None, "argmax")(_arg("argmax"))
bind(None, "argmin")(_arg("argmin"))


def _order(x: Tensor, d: int, descending: bool) -> np.ndarray:
    data = x.data.astype(np.int64) if x.dtype.kind in "bu" else x.data
    return np.argsort(-data if descending else data, axis=d, kind="stable")


@bind("getitem", "sort")
def sort(self, dim=-1, descending=False, stable=False, *, axis=None) -> ValuesIndices:
    """(values, indices) sorted along ``dim``, ascending unless ``descending=True`` (ties keep their order).

    ``axis=`` names the dim too, as PyTorch takes it (NumPy's ``a.sort(axis)`` sorts in place and returns None).
    """
    if axis is not None:
        dim = axis
    if not isinstance(descending, bool | np.bool_):
        raise TypeError(f"sort: descending must be True or False, got {descending!r} (NumPy's kind= is not taken: "
                        f"the sort is always stable)")
    d = _axis_in("sort", self, dim)
    if self.ndim == 0:
        return ValuesIndices(apply(OPS["getitem"], self, index=()), Tensor._wrap(np.zeros((), np.int64)))
    order = _order(self, d, descending)
    return ValuesIndices(apply(OPS["getitem"], self, index=_along(self.shape, d, order)), Tensor._wrap(order))


@bind("getitem", "argsort")
def argsort(self, dim=-1, descending=False, stable=False, *, axis=None) -> Tensor:
    """The indices that sort ``dim`` (``x.sort(dim).indices``)."""
    return Tensor.sort(self, _dim("argsort", dim, axis), descending).indices


@bind("getitem", "topk")
def topk(self, k: int, dim=-1, largest=True, sorted=True) -> ValuesIndices:
    """(values, indices) of the ``k`` largest (``largest=False``: smallest) along ``dim``, largest first."""
    d = _axis_in("topk", self, dim)
    n = self.shape[d] if self.ndim else 1
    if not 0 <= k <= n:
        raise OpError(f"topk: k={k} is out of range for dim {dim} of size {n} (input {self.shape} {self.dtype})")
    if self.ndim == 0:
        return sort(self)
    order = np.take(_order(self, d, largest), np.arange(k), axis=d)
    return ValuesIndices(apply(OPS["getitem"], self, index=_along(self.shape, d, order)), Tensor._wrap(order))


# --------------------------------------------------------------------------------------
# Softmax, clamp, triangles
# --------------------------------------------------------------------------------------


def _normalise(name: str):
    def normalise(self, dim=None, dtype=None, *, axis=None) -> Tensor:
        dim = _dim(name, dim, axis)
        x = self if dtype is None else self.to(dtype)
        return apply(OPS[name], x, axis=-1 if dim is None else dim)

    normalise.__name__ = name
    normalise.__doc__ = (f"{'exp(x) / sum(exp(x))' if name == 'softmax' else 'x - logsumexp(x)'} along ``dim`` "
                         f"(default: the last), stable for large inputs.")
    return normalise


bind("softmax", "softmax")(_normalise("softmax"))
bind("log_softmax", "log_softmax")(_normalise("log_softmax"))


@bind("clip", "clip", "clamp")
def clip(self, min=None, max=None, *, lo=None, hi=None) -> Tensor:
    """x limited to [min, max] (either may be None); tensor bounds are ``mg.minimum(mg.maximum(x, min), max)``."""
    lo, hi = (min if lo is None else lo), (max if hi is None else hi)
    if isinstance(lo, Tensor | np.ndarray) or isinstance(hi, Tensor | np.ndarray):
        out = self if lo is None else apply(OPS["maximum"], self, lo)
        return out if hi is None else apply(OPS["minimum"], out, hi)
    return apply(OPS["clip"], self, lo=lo, hi=hi)


def _triangle(name: str):
    def triangle(self, diagonal=0, *, k=None) -> Tensor:
        return apply(OPS[name], self, k=diagonal if k is None else k)

    triangle.__name__ = name
    side = "lower" if name == "tril" else "upper"
    triangle.__doc__ = f"The {side} triangle of the last two dims (``diagonal`` = NumPy's ``k``); the rest 0."
    return triangle


bind("tril", "tril")(_triangle("tril"))
bind("triu", "triu")(_triangle("triu"))


@bind("log", "log10")
def log10(self) -> Tensor:
    """Base-10 logarithm: log(x) / log(10)."""
    return apply(OPS["mul"], apply(OPS["log"], self), 1.0 / math.log(10.0))


@bind("log", "log2")
def log2(self) -> Tensor:
    """Base-2 logarithm: log(x) / log(2)."""
    return apply(OPS["mul"], apply(OPS["log"], self), 1.0 / math.log(2.0))


@bind("pow", "pow")
def pow_(self, exponent) -> Tensor:
    """``x ** exponent`` (a number, or a tensor with x positive)."""
    if isinstance(exponent, Tensor | np.ndarray):
        return apply(OPS["pow_tensor"], self, exponent)
    return apply(OPS["pow"], self, exponent=exponent)


bind("pow", "__pow__")(pow_)


@bind("pow_tensor", "__rpow__")
def rpow(self, base) -> Tensor:
    """``base ** x``."""
    return apply(OPS["pow_tensor"], base, self)


@bind("neg", "__neg__")
def neg(self) -> Tensor:
    """``-x``."""
    return apply(OPS["neg"], self)


# --------------------------------------------------------------------------------------
# Shapes: reshape/view, transpose/permute, squeeze/unsqueeze, flatten, expand, repeat, split, chunk
# --------------------------------------------------------------------------------------


def _shape_arg(shape: tuple) -> tuple:
    return tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], tuple | list) else shape


def _index_part(part):
    if isinstance(part, Tensor):
        return part.data
    return np.asarray(part) if isinstance(part, list) else part


@bind("getitem", "__getitem__")
def getitem(self, index) -> Tensor:
    """``x[index]``, with NumPy's (and PyTorch's) indexing; Tensors and lists in the index are taken as arrays."""
    index = tuple(map(_index_part, index)) if type(index) is tuple else _index_part(index)
    return apply(OPS["getitem"], self, index=index)


@bind("reshape", "reshape")
def reshape(self, *shape) -> Tensor:
    """The same data in a new shape: ``x.reshape(2, -1)`` or ``x.reshape((2, -1))``."""
    return apply(OPS["reshape"], self, shape=_shape_arg(shape))


@bind("reshape", "view")
def view(self, *shape) -> Tensor:
    """PyTorch's name for ``reshape``: ``x.view(B, T, C)`` (a NumPy view where the layout allows)."""
    if len(shape) == 1 and not isinstance(shape[0], int | np.integer | tuple | list):
        raise TypeError(f"view: x.view(dtype) reinterprets bytes, which minigrad does not do; for a cast write "
                        f"x.to({_dtype_name(shape[0])}); for a shape, x.view(2, 3)")
    return apply(OPS["reshape"], self, shape=_shape_arg(shape))


@bind("reshape", "view_as", "reshape_as")
def view_as(self, other: Tensor) -> Tensor:
    """``x`` in ``other``'s shape."""
    return apply(OPS["reshape"], self, shape=other.shape)


@bind("transpose", "permute")
def permute(self, *dims) -> Tensor:
    """Reorder the dims: ``x.permute(0, 2, 1, 3)`` (or a tuple)."""
    dims = _shape_arg(dims)
    if len(dims) != self.ndim:
        raise OpError(f"permute: {len(dims)} dims given for a tensor of {self.ndim} (input {self.shape} "
                      f"{self.dtype}); name every dim once, as x.permute({', '.join(map(str, range(self.ndim)))})")
    return apply(OPS["transpose"], self, axes=tuple(dims))


@bind("transpose", "transpose")
def transpose(self, *dims) -> Tensor:
    """PyTorch's ``x.transpose(dim0, dim1)`` swaps two dims (``k.transpose(-2, -1)``).

    NumPy's forms that PyTorch does not have keep NumPy's meaning: ``x.transpose()`` reverses every
    dim (= ``x.T``) and a tuple or three or more dims permute (= ``x.permute(...)``).
    """
    if len(dims) == 2 and not isinstance(dims[0], tuple | list):
        a, b = dims
        n = self.data.ndim
        if type(a) is int and type(b) is int and -n <= a < n and -n <= b < n:  # (the hot path: attention's heads)
            a, b = a % n, b % n
        else:
            a, b = _axis_in("transpose", self, a), _axis_in("transpose", self, b)
        if a == b:
            return self
        order = list(range(self.ndim))
        order[a], order[b] = b, a
        return apply(OPS["transpose"], self, axes=tuple(order))
    if not dims or (len(dims) == 1 and dims[0] is None):
        return apply(OPS["transpose"], self)
    return permute(self, *dims)


bind("transpose", "swapaxes", "swapdims")(transpose)


@bind("transpose", "t")
def t(self) -> Tensor:
    """A matrix's transpose (a 0-d or 1-D tensor is returned as is), as PyTorch's ``t()``."""
    if self.ndim > 2:
        raise OpError(f"t: takes a tensor of at most 2 dims, got {self.shape}; write x.transpose(-2, -1) or x.mT")
    return self if self.ndim < 2 else apply(OPS["transpose"], self)


def _matrix_transpose(self) -> Tensor:
    """The last two dims swapped (a batch of matrices, each transposed)."""
    if self.ndim < 2:
        raise OpError(f"mT: needs at least 2 dims, got {self.shape}")
    return transpose(self, -2, -1)


bind_call_form(property(_matrix_transpose, doc=_matrix_transpose.__doc__), "mT", "transpose")


@bind("reshape", "unsqueeze")
def unsqueeze(self, dim=None, *, axis=None) -> Tensor:
    """A new dim of size 1 at ``dim`` (``dim`` counts the output's dims: -1 appends)."""
    dim = _dim("unsqueeze", dim, axis)
    if not isinstance(dim, int | np.integer) or not -self.ndim - 1 <= dim <= self.ndim:
        raise OpError(f"unsqueeze: dim {dim!r} is out of range for {self.ndim + 1} dims (input {self.shape} "
                      f"{self.dtype})")
    d = int(dim) % (self.ndim + 1)
    return apply(OPS["reshape"], self, shape=self.shape[:d] + (1,) + self.shape[d:])


@bind("reshape", "squeeze")
def squeeze(self, dim=None, *, axis=None) -> Tensor:
    """Drop dims of size 1: all of them, or ``dim`` (PyTorch: a dim of another size is left as it is).

    ``x.squeeze(axis=d)`` is NumPy's: a dim of another size is an error.
    """
    numpy = axis is not None
    dim = _dim("squeeze", dim, axis)
    if dim is None:
        return apply(OPS["reshape"], self, shape=tuple(n for n in self.shape if n != 1))
    dims = {_axis_in("squeeze", self, d) for d in (dim if isinstance(dim, tuple) else (dim,))}
    if self.ndim == 0:
        return self
    bad = [d for d in sorted(dims) if self.shape[d] != 1]
    if bad and numpy:
        raise OpError(f"squeeze: axis {bad[0]} has size {self.shape[bad[0]]}, not 1 (input {self.shape} {self.dtype})")
    drop = dims.difference(bad)
    return apply(OPS["reshape"], self, shape=tuple(n for i, n in enumerate(self.shape) if i not in drop))


@bind("reshape", "flatten")
def flatten(self, start_dim=0, end_dim=-1) -> Tensor:
    """Merge dims ``start_dim`` .. ``end_dim`` (default: all, giving 1-D) into one."""
    if self.ndim == 0:
        return apply(OPS["reshape"], self, shape=(1,))
    a, b = _axis_in("flatten", self, start_dim), _axis_in("flatten", self, end_dim)
    if a > b:
        raise OpError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim} (input {self.shape})")
    merged = math.prod(self.shape[a:b + 1])
    return apply(OPS["reshape"], self, shape=self.shape[:a] + (merged,) + self.shape[b + 1:])


bind("reshape", "ravel")(lambda self: apply(OPS["reshape"], self, shape=(-1,)))


@bind("broadcast_to", "expand")
def expand(self, *sizes) -> Tensor:
    """Broadcast to ``sizes`` without copying (-1 keeps a dim's size); the gradient is summed back."""
    sizes = _shape_arg(sizes)
    lead = len(sizes) - self.ndim
    if lead < 0:
        raise OpError(f"expand: {len(sizes)} sizes for a tensor of {self.ndim} dims (input {self.shape})")
    shape = tuple(self.shape[i - lead] if n == -1 and i >= lead else n for i, n in enumerate(sizes))
    return self if shape == self.shape else apply(OPS["broadcast_to"], self, shape=shape)


@bind("broadcast_to", "broadcast_to")
def broadcast_to(self, *shape) -> Tensor:
    """Broadcast to ``shape`` (a view); the gradient is summed back to this tensor's shape."""
    shape = _shape_arg(shape)
    return self if shape == self.shape else apply(OPS["broadcast_to"], self, shape=tuple(shape))


@bind("broadcast_to", "expand_as")
def expand_as(self, other: Tensor) -> Tensor:
    """Broadcast to ``other``'s shape."""
    return broadcast_to(self, other.shape)


def _interleave(x: Tensor, repeats: int, d: int) -> Tensor:
    """Each element ``repeats`` times along dim ``d``: ``np.repeat(x, repeats, d)``, as unsqueeze, expand, reshape."""
    wide = apply(OPS["reshape"], x, shape=x.shape[:d + 1] + (1,) + x.shape[d + 1:])
    wide = apply(OPS["broadcast_to"], wide, shape=x.shape[:d + 1] + (repeats,) + x.shape[d + 1:])
    return apply(OPS["reshape"], wide, shape=x.shape[:d] + (x.shape[d] * repeats,) + x.shape[d + 1:])


@bind("broadcast_to", "repeat")
def repeat(self, *sizes, axis=None) -> Tensor:
    """PyTorch's ``x.repeat(2, 3)``: the whole tensor tiled 2 x 3 times (``np.tile``).

    NumPy's ``x.repeat(r, axis=d)`` repeats each element ``r`` times along ``d`` (``repeat_interleave``).
    """
    if axis is not None:
        if len(sizes) != 1 or not isinstance(sizes[0], int | np.integer):
            raise TypeError(f"repeat: NumPy's form takes one count, x.repeat(2, axis={axis!r}); got {sizes!r}")
        return _interleave(self, int(sizes[0]), _axis_in("repeat", self, axis))
    sizes = _shape_arg(sizes)
    if len(sizes) < self.ndim:
        raise OpError(f"repeat: {len(sizes)} counts for a tensor of {self.ndim} dims: give one per dim, as "
                      f"x.repeat({', '.join(['1'] * self.ndim)}); NumPy's element repeat is "
                      f"x.repeat_interleave(r, dim) or x.repeat(r, axis=d)")
    shape = (1,) * (len(sizes) - self.ndim) + self.shape
    spread = tuple(v for n in shape for v in (1, n))  # (1, s0, 1, s1, ...)
    tiled = tuple(v for r, n in zip(sizes, shape) for v in (r, n))  # (r0, s0, r1, s1, ...)
    out = apply(OPS["reshape"], self, shape=spread)
    out = apply(OPS["broadcast_to"], out, shape=tiled)
    return apply(OPS["reshape"], out, shape=tuple(r * n for r, n in zip(sizes, shape)))


@bind("broadcast_to", "repeat_interleave")
def repeat_interleave(self, repeats: int, dim=None) -> Tensor:
    """Each element ``repeats`` times along ``dim`` (None: of the flattened tensor)."""
    if not isinstance(repeats, int | np.integer):
        raise TypeError("repeat_interleave: takes one count (an int) here; per-element counts are not supported")
    x = flatten(self) if dim is None else self
    return _interleave(x, int(repeats), 0 if dim is None else _axis_in("repeat_interleave", self, dim))


@bind("reshape", "contiguous")
def contiguous(self) -> Tensor:
    """The tensor itself: minigrad's views need no copy before ``view`` (NumPy copies when it must)."""
    return self


def _pieces(x: Tensor, d: int, cuts: list) -> tuple:
    lead = (slice(None),) * d
    return tuple(apply(OPS["getitem"], x, index=lead + (slice(lo, hi),)) for lo, hi in zip(cuts[:-1], cuts[1:]))


@bind("getitem", "split")
def split(self, split_size_or_sections, dim=0, *, axis=None):
    """PyTorch's ``x.split(64, 2)``: pieces of size 64 along dim 2 (the last may be smaller), or of the listed sizes.

    NumPy's ``x.split(3, axis=2)`` is ``np.split``: 3 equal parts, or cut at the listed indices (a list).
    """
    if axis is not None:
        if dim != 0:
            raise TypeError("split: dim= and axis= name the same thing; give one")
        return list(_numpy_split(self, split_size_or_sections, axis))
    d = _axis_in("split", self, dim)
    n = self.shape[d]
    if isinstance(split_size_or_sections, int | np.integer):
        size = int(split_size_or_sections)
        if size <= 0 and not (size == 0 and n == 0):
            raise OpError(f"split: the piece size must be positive, got {size} (input {self.shape} {self.dtype})")
        cuts = [*range(0, n, size), n] if n else [0, 0]
    else:
        sizes = [int(s) for s in split_size_or_sections]
        if sum(sizes) != n or any(s < 0 for s in sizes):
            raise OpError(f"split: the sizes {sizes} must add up to dim {dim}'s size {n} (input {self.shape} "
                          f"{self.dtype}); np.split's cut indices are x.split({sizes}, axis={dim})")
        cuts = list(np.cumsum([0, *sizes]))
    return _pieces(self, d, cuts)


def _numpy_split(x: Tensor, sections, axis) -> tuple:
    """``np.split(x, sections, axis)``: ``sections`` equal parts (an int) or cut at the given indices."""
    d = _axis_in("split", x, axis)
    n = x.shape[d]
    if isinstance(sections, int | np.integer):
        if sections <= 0 or n % sections:
            raise OpError(f"split: axis {axis} of size {n} does not divide into {sections} equal parts "
                          f"(input {x.shape} {x.dtype}); PyTorch's pieces of size {sections} are "
                          f"x.split({sections}, dim={axis})")
        return _pieces(x, d, list(range(0, n + 1, n // sections)))
    return _pieces(x, d, [0, *(min(int(c), n) for c in sections), n])


@bind("getitem", "chunk")
def chunk(self, chunks: int, dim=0) -> tuple:
    """``chunks`` pieces along ``dim``, each of size ceil(n / chunks) (the last smaller; fewer if n is small)."""
    if chunks <= 0:
        raise OpError(f"chunk: chunks must be positive, got {chunks}")
    n = self.shape[_axis_in("chunk", self, dim)]
    return split(self, max(-(-n // chunks), 1), dim)


@bind("getitem", "unbind")
def unbind(self, dim=0) -> tuple:
    """The slices along ``dim``, each without that dim."""
    d = _axis_in("unbind", self, dim)
    lead = (slice(None),) * d
    return tuple(apply(OPS["getitem"], self, index=lead + (i,)) for i in range(self.shape[d]))


# --------------------------------------------------------------------------------------
# dtypes and the device: to, float, double, long, int, bool, half, cpu, cuda, device
# --------------------------------------------------------------------------------------


@bind("astype", "to")
def to(self, *args, dtype=None, device=None, copy=False, non_blocking=False) -> Tensor:
    """``x.to(mg.float64)``, ``x.to('cpu')``, ``x.to(device, dtype)``, ``x.to(other)``: a recorded cast (or x)."""
    for a in args:
        if isinstance(a, Tensor):
            dtype = a.dtype
        elif isinstance(a, str) and a.split(":")[0] in ("cpu", "cuda", "mps", "xla", "meta"):
            device = a
        elif a is not None:
            dtype = a
    check_device(device, "to")
    dtype = as_dtype(dtype, "to")
    if dtype is None or dtype == self.dtype:
        return apply(OPS["astype"], self, dtype=self.dtype) if copy else self
    return apply(OPS["astype"], self, dtype=dtype)


def _cast(name: str, dtype):
    def cast(self) -> Tensor:
        return self if self.dtype == dtype else apply(OPS["astype"], self, dtype=dtype)

    cast.__name__ = name
    cast.__doc__ = f"This tensor as {np.dtype(dtype)} (itself if it is already)."
    return bind("astype", name)(cast)


for _name, _dtype in (("float", np.float32), ("double", np.float64), ("half", np.float16), ("long", np.int64),
                      ("int", np.int32), ("bool", np.bool_)):
    _cast(_name, np.dtype(_dtype))


@bind("astype", "type")
def type_(self, dtype=None):
    """``x.type(mg.float64)`` casts; ``x.type()`` names the dtype."""
    return f"minigrad.{self.dtype}" if dtype is None else to(self, dtype)


@bind(None, "cpu")
def cpu(self) -> Tensor:
    """The tensor itself: it is on the CPU already."""
    return self


@bind(None, "cuda")
def cuda(self, device=None) -> Tensor:
    """An error: minigrad has no GPU (the message says where to go for one)."""
    check_device("cuda" if device is None else device, "cuda")


bind_call_form(property(lambda self: CPU, doc="``'cpu'``: minigrad's only device."), "device", None)
bind_call_form(property(lambda self: False, doc="False: no GPU here."), "is_cuda", None)


# --------------------------------------------------------------------------------------
# Random draws into a tensor (random.py)
# --------------------------------------------------------------------------------------

bind(None, "normal_")(_random.normal_)
bind(None, "uniform_")(_random.uniform_)
bind(None, "multinomial")(_random.multinomial)


# --------------------------------------------------------------------------------------
# PyTorch's names minigrad does not have: what to write instead
# --------------------------------------------------------------------------------------

INSTEAD = {
    "add_": "x += v", "sub_": "x -= v", "mul_": "x *= v", "div_": "x /= v", "fill_": "x[...] = v",
    "copy_": "x[...] = src", "clamp_": "x[...] = x.clamp(lo, hi)",
    "masked_fill_": "x = x.masked_fill(mask, v)", "exp_": "x = x.exp()", "tanh_": "x = x.tanh()",
    "new_zeros": "mg.zeros(shape, dtype=x.dtype)", "new_ones": "mg.ones(shape, dtype=x.dtype)",
    "new_tensor": "mg.tensor(data, dtype=x.dtype)", "new_full": "mg.full(shape, v, dtype=x.dtype)",
    "index_select": "x[idx] (dim 0) or x[:, idx] (dim 1), idx an int64 tensor",
    "gather": "x[rows, idx] with rows = mg.arange(len(x)) (an int64 index per row)",
    "cumsum": "a sum of slices, or x.numpy().cumsum(dim) outside the graph",
    "norm": "(x ** 2).sum().sqrt()", "square": "x ** 2", "rsqrt": "x.sqrt() ** -1", "sign": "x / x.abs()",
    "unfold": "x[..., i:i + size] slices and mg.stack",
}


class _Refused:
    """``x.add_(v)`` and the other PyTorch names minigrad lacks: reading one raises an AttributeError saying what
    to write instead.

    One descriptor per name, on ``Tensor``, rather than a ``Tensor.__getattr__``: a class with ``__getattr__``
    has every attribute read of every tensor go the slow way (Python cannot specialise them), and the engine
    reads tensors' attributes on every op and every backward node. A name no one knows gets Python's own
    AttributeError. The names stay free for ops: an op of one's own may bind ``norm`` (``registry._bound_by``).
    """

    _bound_by_op = None  # (registry: not taken)

    def __init__(self, name: str):
        self.name = name

    def __get__(self, tensor, owner=None):
        raise AttributeError(f"'Tensor' object has no attribute {self.name!r}: minigrad spells it "
                             f"{INSTEAD[self.name]} (in-place writes under `with mg.no_grad():`, as the README's "
                             f"in-place rules say)")


for _name in INSTEAD:
    if not hasattr(Tensor, _name):  # (copy_ has since been written)
        setattr(Tensor, _name, _Refused(_name))
del _name


def _listed(self) -> list:
    """``dir(x)``, and so tab completion, without the refused names: they are not there to be used."""
    return [name for name in object.__dir__(self) if not isinstance(vars(Tensor).get(name), _Refused)]


bind(None, "__dir__")(_listed)


# --------------------------------------------------------------------------------------
# mg. functions: the same forms with the tensor as the first argument
# --------------------------------------------------------------------------------------


def cat(tensors, dim=None, *, axis=None) -> Tensor:
    """Join tensors along an existing dim: ``mg.cat([a, b], dim=1)`` (``axis=`` too, as ``np.concatenate``)."""
    tensors = list(tensors)
    if not tensors:
        raise OpError("cat: needs at least one tensor")
    dim = _dim("cat", dim, axis)
    return apply(OPS["concatenate"], *tensors, axis=0 if dim is None else dim)




def stack(tensors, dim=None, *, axis=None) -> Tensor:
    """Join same-shaped tensors along a new dim: ``mg.stack([a, b], dim=0)`` (``axis=`` too)."""
    tensors = list(tensors)
    if not tensors:
        raise OpError("stack: needs at least one tensor")
    dim = _dim("stack", dim, axis)
    return apply(OPS["stack"], *tensors, axis=0 if dim is None else dim)


def where(condition, input, other) -> Tensor:
    """``input`` where ``condition`` is True, else ``other`` (the condition is not differentiated)."""
    cond = condition.data if isinstance(condition, Tensor) else condition
    return apply(OPS["where"], np.asarray(cond, dtype=bool), input, other)


def einsum(equation: str, *operands) -> Tensor:
    """Einstein summation, ``mg.einsum("ij,jk->ik", a, b)``: the fused op ``einsum`` (``fused.py``)."""
    if len(operands) == 1 and isinstance(operands[0], list | tuple):
        operands = tuple(operands[0])
    return apply(OPS["einsum"], *operands, subscripts=equation)


def allclose(input, other, rtol: float = 1e-5, atol: float = 1e-8,
             equal_nan: bool = False) -> bool:
    """Whether every element of ``input`` is within ``atol + rtol * |other|`` of ``other`` (a Python bool)."""
    return bool(np.allclose(_tensor(input, "allclose").data, _tensor(other, "allclose").data, rtol, atol,
                                     equal_nan))


def isclose(input, other, rtol: float = 1e-5, atol: float = 1e-8,
            equal_nan: bool = False) -> Tensor:
    """Elementwise ``|input - other| <= atol + rtol * |other|`` (a bool tensor)."""
    return Tensor._wrap(np.isclose(_tensor(input, "isclose").data, _tensor(other, "isclose").data, rtol, atol,
                                   equal_nan))


def equal(input, other) -> bool:
    """Whether the two have the same shape and elements (a Python bool)."""
    return bool(np.array_equal(_tensor(input, "equal").data, _tensor(other, "equal").data))


def numel(input) -> int:
    """The number of elements."""
    return _tensor(input, "numel").size


def _function(name: str):
    """``mg.<name>(x, ...)``: ``x.<name>(...)``, the Tensor method's call form with the tensor first."""
    method = getattr(Tensor, name)

    def function(input, *args, **kwargs):
        return method(_tensor(input, name), *args, **kwargs)

    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"``mg.{name}(x, ...)`` is ``x.{name}(...)``.\n\n{method.__doc__ or ''}"
    return function


FUNCTIONS = ("abs", "exp", "log", "log10", "log2", "sqrt", "tanh", "sigmoid", "relu", "erf", "neg", "pow",
             "sum", "mean", "prod", "var", "std", "logsumexp", "max", "min", "amax", "amin", "argmax", "argmin",
             "all", "any", "sort", "argsort", "topk", "softmax", "log_softmax", "clip", "clamp", "tril", "triu",
             "reshape", "transpose", "permute", "swapaxes", "squeeze", "unsqueeze", "flatten", "split", "chunk",
             "unbind", "masked_fill", "repeat_interleave", "broadcast_to")
functions = {name: _function(name) for name in FUNCTIONS}
functions.update(maximum=OPS["maximum"], minimum=OPS["minimum"], matmul=OPS["matmul"])  # the ops: numbers too
functions.update(cat=cat, concatenate=cat, concat=cat, stack=stack, where=where, einsum=einsum, allclose=allclose,
                 isclose=isclose, equal=equal, numel=numel)
