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
    """Drop dims of size 1: all of them, or ``dim`` (PyTorch: a dim of another size is left as it is).

    ``x.squeeze(axis=d)`` is NumPy's: a dim of another size is an error.
    """
    numpy = axis is not None
    dim = dim_of("squeeze", dim, axis)
    if dim is None:
        return apply(OPS["reshape"], self, shape=tuple(n for n in self.shape if n != 1))
    dims = {axis_in("squeeze", self, d) for d in (dim if isinstance(dim, tuple) else (dim,))}
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
    """PyTorch's ``x.repeat(2, 3)``: the whole tensor tiled 2 x 3 times (``np.tile``).

    NumPy's ``x.repeat(r, axis=d)`` repeats each element ``r`` times along ``d`` (``repeat_interleave``).
    """
    if axis is not None:
        if len(sizes) != 1 or not isinstance(sizes[0], int | np.integer):
            raise TypeError(f"repeat: NumPy's form takes one count, x.repeat(2, axis={axis!r}); got {sizes!r}")
        return _interleave(self, int(sizes[0]), axis_in("repeat", self, axis))
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
    """PyTorch's ``x.split(64, 2)``: pieces of size 64 along dim 2 (the last may be smaller), or of the listed sizes.

    NumPy's ``x.split(3, axis=2)`` is ``np.split``: 3 equal parts, or cut at the listed indices (a list).
    """
    if axis is not None:
        if dim != 0:
            raise TypeError("split: dim= and axis= name the same thing; give one")
        return list(_numpy_split(self, split_size_or_sections, axis))
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
                          f"{self.dtype}); np.split's cut indices are x.split({sizes}, axis={dim})")
        cuts = list(np.cumsum([0, *sizes]))
    return _pieces(self, d, cuts)


def _numpy_split(x: Tensor, sections, axis) -> tuple:
    """``np.split(x, sections, axis)``: ``sections`` equal parts (an int) or cut at the given indices."""
    d = axis_in("split", x, axis)
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
    n = self.shape[axis_in("chunk", self, dim)]
    return split(self, max(-(-n // chunks), 1), dim)


@bind("getitem", "unbind")
def unbind(self, dim=0) -> tuple:
    """The slices along ``dim``, each without that dim."""
    d = axis_in("unbind", self, dim)
    lead = (slice(None),) * d
    return tuple(apply(OPS["getitem"], self, index=lead + (i,)) for i in range(self.shape[d]))


# --------------------------------------------------------------------------------------
