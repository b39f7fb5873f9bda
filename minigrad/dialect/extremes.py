"""max, min, argmax, argmin, sort, topk: PyTorch's (values, indices) over a dim.

``x.max(-1)`` is a ``ValuesIndices`` namedtuple whose values are picked by
``getitem``, so the gradient goes to the picked element, as in PyTorch.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from ..registry import OPS, apply
from ..tensor import OpError, Tensor
from .arguments import axis_in, bind, dim_of, keep_of, reduction_dims

ValuesIndices = namedtuple("ValuesIndices", ["values", "indices"])
ValuesIndices.__doc__ = "What ``x.max(dim)``, ``x.min(dim)``, ``x.sort()`` and ``x.topk(k)`` return, as in PyTorch."


def along(shape: tuple, d: int, index: np.ndarray) -> tuple:
    """The advanced index that picks ``index`` (shape = ``shape`` with dim ``d`` of any size) along dim ``d``.

    ``x[along(x.shape, d, i)]`` is ``np.take_along_axis(x, i, d)``, as a getitem, so the
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
    d = axis_in(who, x, dim)
    if x.ndim == 0:
        return ValuesIndices(apply(OPS["getitem"], x, index=()), Tensor._wrap(np.zeros((), np.int64)))
    if x.shape[d] == 0:
        raise OpError(f"{who}: dim {dim} has size 0, so there is no {who} along it (input {x.shape} {x.dtype})")
    kept = pick(x.data, axis=d, keepdims=True)  # (shape with 1 at d)
    values = apply(OPS["getitem"], x, index=along(x.shape, d, kept))  # (kept shape)
    indices = kept if keepdim else kept.squeeze(d)
    if not keepdim:
        values = apply(OPS["reshape"], values, shape=indices.shape)
    return ValuesIndices(values, Tensor._wrap(indices.astype(np.int64, copy=False)))


class _Every:
    """The default dim of ``x.max()``: every element. (``x.max(dim=None)`` is refused, as in PyTorch.)"""

    def __repr__(self) -> str:
        return "None"


_EVERY = _Every()


def _extreme(name: str, pick, elementwise: str):
    def extreme(self, dim=_EVERY, keepdim=False, *, axis=_EVERY, keepdims=None):
        if axis is not _EVERY:
            if dim is not _EVERY:
                raise TypeError(f"{name}: dim= and axis= name the same thing; give one (x.{name}(dim={dim!r}))")
            dim = axis
        keepdim = keep_of(name, keepdim, keepdims, dim)
        if dim is _EVERY and not keepdim:
            return apply(OPS[name], self)
        if dim is _EVERY or dim is None or isinstance(dim, tuple | list):
            raise TypeError(f"{name}: x.{name}(dim) takes one dim, as in PyTorch, and gives (values, indices); for "
                            f"the {name}ima over several dims or every dim write "
                            f"x.a{name}(dim={None if dim is _EVERY else dim!r}, keepdim={keepdim})")
        if isinstance(dim, Tensor | np.ndarray):  # PyTorch's x.max(other): elementwise
            return apply(OPS[elementwise], self, dim)
        return _values_indices(name, self, dim, keepdim, pick)

    extreme.__name__ = name
    word = "largest" if name == "max" else "smallest"
    extreme.__doc__ = (
        f"The {word} element: ``x.{name}()`` over every element; ``x.{name}(dim)`` is PyTorch's (values, indices) "
        f"namedtuple, ``v, i = x.{name}(-1)`` (``axis=`` and ``keepdims=`` are PyTorch's aliases), the gradient "
        f"going to the picked element; ``x.a{name}(d)`` is the values alone, tied {name}ima sharing the "
        f"gradient; ``x.{name}(other)`` is "
        f"``mg.{elementwise}(x, other)``.")
    return extreme


bind("max", "max")(_extreme("max", np.argmax, "maximum"))
bind("min", "min")(_extreme("min", np.argmin, "minimum"))


@bind("max", "amax")
def amax(self, dim=None, keepdim=False, *, axis=None, keepdims=None) -> Tensor:
    """The maxima over ``dim`` (an int or a tuple; None: every dim), tied maxima sharing the gradient."""
    dims, keepdims = reduction_dims("amax", self, dim, keepdim, axis, keepdims)
    return apply(OPS["max"], self, axis=dims, keepdims=keepdims)


@bind("min", "amin")
def amin(self, dim=None, keepdim=False, *, axis=None, keepdims=None) -> Tensor:
    """The minima over ``dim`` (an int or a tuple; None: every dim), tied minima sharing the gradient."""
    dims, keepdims = reduction_dims("amin", self, dim, keepdim, axis, keepdims)
    return apply(OPS["min"], self, axis=dims, keepdims=keepdims)


def _arg(name: str):
    def arg(self, dim=None, keepdim=False, *, axis=None, keepdims=None) -> Tensor:
        dim, keepdim = dim_of(name, dim, axis), keep_of(name, keepdim, keepdims)
        if dim is not None:
            axis_in(name, self, dim)
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
    d = axis_in("sort", self, dim)
    if self.ndim == 0:
        return ValuesIndices(apply(OPS["getitem"], self, index=()), Tensor._wrap(np.zeros((), np.int64)))
    order = _order(self, d, descending)
    return ValuesIndices(apply(OPS["getitem"], self, index=along(self.shape, d, order)), Tensor._wrap(order))


@bind("getitem", "argsort")
def argsort(self, dim=-1, descending=False, stable=False, *, axis=None) -> Tensor:
    """The indices that sort ``dim`` (``x.sort(dim).indices``)."""
    return Tensor.sort(self, dim_of("argsort", dim, axis), descending).indices


@bind("getitem", "topk")
def topk(self, k: int, dim=-1, largest=True, sorted=True) -> ValuesIndices:
    """(values, indices) of the ``k`` largest (``largest=False``: smallest) along ``dim``, largest first."""
    d = axis_in("topk", self, dim)
    n = self.shape[d] if self.ndim else 1
    if not 0 <= k <= n:
        raise OpError(f"topk: k={k} is out of range for dim {dim} of size {n} (input {self.shape} {self.dtype})")
    if self.ndim == 0:
        return sort(self)
    order = np.take(_order(self, d, largest), np.arange(k), axis=d)
    return ValuesIndices(apply(OPS["getitem"], self, index=along(self.shape, d, order)), Tensor._wrap(order))


# --------------------------------------------------------------------------------------
# Softmax, clamp, triangles
