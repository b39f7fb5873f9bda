"""Shapes as PyTorch spells them: indexing, reshape/view, transpose/permute, squeeze/unsqueeze, flatten,
expand, repeat, split, chunk, unbind.

``x.transpose(0, 1)`` swaps two dims and ``x.split(64, 2)`` cuts pieces of size
64 along dim 2, as in PyTorch; each form applies the op table's ``reshape``,
``transpose``, ``broadcast_to`` or ``getitem``.
"""

from __future__ import annotations

import math

import numpy as np

from ..registry import OPS, apply, bind_call_form
from ..tensor import OpError, Tensor
from .arguments import axis_in, bind, dim_of, dtype_name
from .extremes import along


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
                        f"x.to({dtype_name(shape[0])}); for a shape, x.view(2, 3)")
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
            a, b = axis_in("transpose", self, a), axis_in("transpose", self, b)
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
    dim = dim_of("unsqueeze", dim, axis)
    if not isinstance(dim, int | np.integer) or not -self.ndim - 1 <= dim <= self.ndim:
        raise OpError(f"unsqueeze: dim {dim!r} is out of range for {self.ndim + 1} dims (input {self.shape} "
                      f"{self.dtype})")
    d = int(dim) % (self.ndim + 1)
    return apply(OPS["reshape"], self, shape=self.shape[:d] + (1,) + self.shape[d:])


@bind("reshape", "squeeze")
def squeeze(self, dim=None, *, axis=None) -> Tensor:
    """Drop dims of size 1: all of them, or ``dim`` (an int or a tuple; a dim of another size is left as it is)."""
    dim = dim_of("squeeze", dim, axis)
    if dim is None:
        return apply(OPS["reshape"], self, shape=tuple(n for n in self.shape if n != 1))
    dims = {axis_in("squeeze", self, d) for d in (dim if isinstance(dim, tuple) else (dim,))}
    if self.ndim == 0:
        return self
    return apply(OPS["reshape"], self, shape=tuple(n for i, n in enumerate(self.shape) if i not in dims or n != 1))


@bind("reshape", "flatten")
def flatten(self, start_dim=0, end_dim=-1) -> Tensor:
    """Merge dims ``start_dim`` .. ``end_dim`` (default: all, giving 1-D) into one."""
    if self.ndim == 0:
        return apply(OPS["reshape"], self, shape=(1,))
    a, b = axis_in("flatten", self, start_dim), axis_in("flatten", self, end_dim)
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
    """``x.repeat(2, 3)``: the whole tensor tiled 2 x 3 times (``np.tile``), as in PyTorch.

    NumPy's ``a.repeat(r, axis=d)`` (each element ``r`` times) is PyTorch's ``x.repeat_interleave(r, d)``:
    the NumPy spelling is an error saying so, as PyTorch's ``repeat`` means something else.
    """
    if axis is not None:
        raise TypeError(f"repeat: x.repeat(r, axis={axis!r}) is NumPy's element repeat; PyTorch's repeat tiles the "
                        f"whole tensor. Write x.repeat_interleave(r, dim={axis!r}) for each element r times")
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
    return _interleave(x, int(repeats), 0 if dim is None else axis_in("repeat_interleave", self, dim))


@bind("reshape", "contiguous")
def contiguous(self) -> Tensor:
    """The tensor itself: minigrad's views need no copy before ``view`` (NumPy copies when it must)."""
    return self


def _pieces(x: Tensor, d: int, cuts: list) -> tuple:
    lead = (slice(None),) * d
    return tuple(apply(OPS["getitem"], x, index=lead + (slice(lo, hi),)) for lo, hi in zip(cuts[:-1], cuts[1:]))


@bind("getitem", "split")
def split(self, split_size_or_sections, dim=0, *, axis=None):
    """``x.split(64, 2)``: pieces of size 64 along dim 2 (the last may be smaller), or of the listed sizes.

    NumPy's ``np.split(a, 3, axis=2)``, three equal parts, is ``x.chunk(3, 2)``: ``x.split(3, axis=2)``
    reads two ways, so it is an error saying which to write.
    """
    if axis is not None:
        raise TypeError(f"split: x.split(n, axis={axis!r}) reads two ways (NumPy: n equal parts; PyTorch: pieces of "
                        f"size n); write x.split(n, dim={axis!r}) for pieces of size n, or x.chunk(n, {axis!r}) for "
                        f"n equal parts")
    d = axis_in("split", self, dim)
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
                          f"{self.dtype}), as x.split({[n // 2, n - n // 2]}, {dim}); to cut at indices, as np.split, "
                          f"give the sizes between the cuts")
        cuts = list(np.cumsum([0, *sizes]))
    return _pieces(self, d, cuts)


@bind("getitem", "chunk")
def chunk(self, chunks: int, dim=0) -> tuple:
    """``chunks`` pieces along ``dim``, each of size ceil(n / chunks) (the last smaller; fewer if n is small)."""
    if chunks <= 0:
        raise OpError(f"chunk: chunks must be positive, got {chunks}")
    n = self.shape[axis_in("chunk", self, dim)]
    return split(self, max(-(-n // chunks), 1), dim)


@bind("getitem", "unbind")
def unbind(self, dim=0) -> tuple:
    """The slices along ``dim``, each without that dim."""
    d = axis_in("unbind", self, dim)
    lead = (slice(None),) * d
    return tuple(apply(OPS["getitem"], self, index=lead + (i,)) for i in range(self.shape[d]))


# --------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------
# Picking and placing along a dim: gather, take_along_dim, index_select, scatter, scatter_add
# --------------------------------------------------------------------------------------


def _index(who: str, index) -> np.ndarray:
    """An integer index tensor's array (a list is taken too); anything else is an error naming ``who``."""
    array = np.asarray(index.data if isinstance(index, Tensor) else index)
    if array.dtype.kind not in "iu":
        raise TypeError(f"{who}: the index must be an integer tensor, got {array.dtype} (write index.long())")
    return array


@bind("getitem", "gather")
def gather(self, dim, index, *, sparse_grad=False) -> Tensor:
    """``out[i][j] = x[index[i][j]][j]`` (dim 0): values picked along ``dim``, shaped like ``index``."""
    d, idx = axis_in("gather", self, dim), _index("gather", index)
    if idx.ndim != self.ndim:
        raise OpError(f"gather: index has {idx.ndim} dims, input {self.ndim}: they must match, as in PyTorch "
                      f"(input {self.shape}, index {idx.shape})")
    return apply(OPS["getitem"], self, index=along(idx.shape, d, idx))


@bind("getitem", "take_along_dim")
def take_along_dim(self, indices, dim=None) -> Tensor:
    """``np.take_along_axis``: ``indices`` broadcast against x but along ``dim`` (None: of the flattened x)."""
    idx = _index("take_along_dim", indices)
    if dim is None:
        return apply(OPS["getitem"], apply(OPS["reshape"], self, shape=(-1,)), index=idx.reshape(-1))
    d = axis_in("take_along_dim", self, dim)
    shape = np.broadcast_shapes(self.shape[:d] + (1,) + self.shape[d + 1:], idx.shape[:d] + (1,) + idx.shape[d + 1:])
    x = broadcast_to(self, shape[:d] + (self.shape[d],) + shape[d + 1:])
    idx = np.broadcast_to(idx, shape[:d] + (idx.shape[d],) + shape[d + 1:])
    return apply(OPS["getitem"], x, index=along(idx.shape, d, idx))


@bind("getitem", "index_select")
def index_select(self, dim, index) -> Tensor:
    """The slices at ``index`` (1-D) along ``dim``: ``x.index_select(0, idx)`` is ``x[idx]``."""
    d, idx = axis_in("index_select", self, dim), _index("index_select", index)
    if idx.ndim > 1:
        raise OpError(f"index_select: index must be 1-D (or 0-d), got shape {idx.shape}")
    return apply(OPS["getitem"], self, index=(slice(None),) * d + (idx.reshape(-1),))


def _placed(who: str, x: Tensor, dim, index, src) -> tuple:
    """(d, the advanced index of the places ``index`` names along ``dim``, src cut to ``index``'s shape)."""
    d, idx = axis_in(who, x, dim), _index(who, index)
    if idx.ndim == 0 and x.ndim == 1:  # as PyTorch, a 0-d index of a 1-D input names one place
        idx = idx.reshape(1)
        if isinstance(src, Tensor) and src.ndim == 0:
            src = apply(OPS["reshape"], src, shape=(1,))
    if idx.ndim != x.ndim:
        raise OpError(f"{who}: index has {idx.ndim} dims, input {x.ndim}: they must match (input {x.shape}, "
                      f"index {idx.shape})")
    places = along(idx.shape, d, idx)
    if isinstance(src, Tensor):
        src = apply(OPS["getitem"], src, index=tuple(slice(0, n) for n in idx.shape))
    return places, src


@bind("scatter_add", "scatter_add")
def scatter_add(self, dim, index, src) -> Tensor:
    """x with ``src`` added at the places ``index`` names along ``dim`` (repeats accumulate): ``gather``'s reverse."""
    places, src = _placed("scatter_add", self, dim, index, src)
    return apply(OPS["add"], self, apply(OPS["scatter_add"], src, index=places, shape=self.shape))


@bind("masked_fill", "scatter")
def scatter(self, dim, index, src=None, *, value=None, reduce=None) -> Tensor:
    """x with ``src`` (or the number ``value``) written at the places ``index`` names along ``dim``.

    As in PyTorch, where ``index`` names one place twice, which write wins is not defined.
    """
    if reduce is not None:
        raise TypeError(f"scatter: reduce={reduce!r} is not supported; write x.scatter_add(dim, index, src) to add")
    src = value if src is None else src
    places, src = _placed("scatter", self, dim, index, src)
    hit = np.zeros(self.shape, dtype=bool)
    hit[places] = True
    if not isinstance(src, Tensor):  # a number
        return apply(OPS["masked_fill"], self, hit, value=src)
    written = apply(OPS["scatter_add"], src, index=places, shape=self.shape)
    return apply(OPS["add"], apply(OPS["masked_fill"], self, hit, value=0.0), written)


@bind(None, "scatter_")
def scatter_(self, dim, index, src=None, *, value=None, reduce=None) -> Tensor:
    """``x.scatter(...)`` written into x in place, by the rules of ``x[...] = v``; returns x: the one-hot of
    ``mg.zeros(10).scatter_(0, mg.tensor(y), value=1)``."""
    self[...] = scatter(self, dim, index, src, value=value, reduce=reduce)
    return self


@bind(None, "scatter_add_")
def scatter_add_(self, dim, index, src) -> Tensor:
    """``x.scatter_add(...)`` written into x in place, by the rules of ``x[...] = v``; returns x."""
    self[...] = scatter_add(self, dim, index, src)
    return self
