"""The ``mg.`` functions: ``mg.cat``, ``mg.stack``, ``mg.where``, ``mg.einsum``..., and the Tensor methods
with the tensor as the first argument (``mg.sum(x, 1)`` is ``x.sum(1)``).
"""

from __future__ import annotations

import numpy as np

from ..registry import OPS, apply
from ..tensor import OpError, Tensor
from . import creation, linalg
from .arguments import as_tensor, dim_of


def cat(tensors, dim=None, *, axis=None) -> Tensor:
    """Join tensors along an existing dim: ``mg.cat([a, b], dim=1)`` (``axis=`` too, as ``np.concatenate``)."""
    tensors = list(tensors)
    if not tensors:
        raise OpError("cat: needs at least one tensor")
    dim = dim_of("cat", dim, axis)
    return apply(OPS["concatenate"], *tensors, axis=0 if dim is None else dim)




def stack(tensors, dim=None, *, axis=None) -> Tensor:
    """Join same-shaped tensors along a new dim: ``mg.stack([a, b], dim=0)`` (``axis=`` too)."""
    tensors = list(tensors)
    if not tensors:
        raise OpError("stack: needs at least one tensor")
    dim = dim_of("stack", dim, axis)
    return apply(OPS["stack"], *tensors, axis=0 if dim is None else dim)


def vstack(tensors) -> Tensor:
    """Rows on top of each other: ``mg.cat`` along dim 0, a 1-D tensor taken as one row (PyTorch's ``vstack``)."""
    tensors = [as_tensor(t, "vstack") for t in tensors]
    return cat([t.reshape(1, -1) if t.ndim < 2 else t for t in tensors], 0)


def hstack(tensors) -> Tensor:
    """Side by side: ``mg.cat`` along dim 1, or along dim 0 for 1-D tensors (PyTorch's ``hstack``)."""
    tensors = [as_tensor(t, "hstack") for t in tensors]
    tensors = [t.reshape(1) if t.ndim == 0 else t for t in tensors]
    return cat(tensors, 0 if tensors and tensors[0].ndim == 1 else 1)


def where(condition, input, other) -> Tensor:
    """``input`` where ``condition`` is True, else ``other`` (the condition is not differentiated)."""
    cond = condition.data if isinstance(condition, Tensor) else condition
    return apply(OPS["where"], np.asarray(cond, dtype=bool), input, other)


def einsum(equation: str, *operands) -> Tensor:
    """Einstein summation, ``mg.einsum("ij,jk->ik", a, b)``: the fused op ``einsum`` (``fused/``)."""
    if len(operands) == 1 and isinstance(operands[0], list | tuple):
        operands = tuple(operands[0])
    return apply(OPS["einsum"], *operands, subscripts=equation)


def allclose(input, other, rtol: float = 1e-5, atol: float = 1e-8,
             equal_nan: bool = False) -> bool:
    """Whether every element of ``input`` is within ``atol + rtol * |other|`` of ``other`` (a Python bool)."""
    return bool(np.allclose(as_tensor(input, "allclose").data, as_tensor(other, "allclose").data, rtol, atol,
                                     equal_nan))


def isclose(input, other, rtol: float = 1e-5, atol: float = 1e-8,
            equal_nan: bool = False) -> Tensor:
    """Elementwise ``|input - other| <= atol + rtol * |other|`` (a bool tensor)."""
    return Tensor._wrap(np.isclose(as_tensor(input, "isclose").data, as_tensor(other, "isclose").data, rtol, atol,
                                   equal_nan))


def equal(input, other) -> bool:
    """Whether the two have the same shape and elements (a Python bool)."""
    return bool(np.array_equal(as_tensor(input, "equal").data, as_tensor(other, "equal").data))


def numel(input) -> int:
    """The number of elements."""
    return as_tensor(input, "numel").size


def _function(name: str):
    """``mg.<name>(x, ...)``: ``x.<name>(...)``, the Tensor method's call form with the tensor first."""
    method = getattr(Tensor, name)

    def function(input, *args, **kwargs):
        return method(as_tensor(input, name), *args, **kwargs)

    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"``mg.{name}(x, ...)`` is ``x.{name}(...)``.\n\n{method.__doc__ or ''}"
    return function


FUNCTIONS = ("abs", "exp", "log", "log10", "log2", "sqrt", "tanh", "sigmoid", "relu", "erf", "neg", "pow",
             "sin", "cos", "log1p", "expm1", "floor", "ceil", "trunc", "round", "sign", "reciprocal", "rsqrt",
             "square", "sum", "mean", "prod", "var", "std", "logsumexp", "cumsum", "cumprod", "norm", "max", "min",
             "amax", "amin", "argmax", "argmin", "all", "any", "sort", "argsort", "topk", "softmax", "log_softmax",
             "clip", "clamp", "tril", "triu", "reshape", "transpose", "permute", "swapaxes", "squeeze", "unsqueeze",
             "flatten", "split", "chunk", "unbind", "masked_fill", "repeat_interleave", "broadcast_to", "gather",
             "take_along_dim", "index_select", "scatter", "scatter_add")
functions = {name: _function(name) for name in FUNCTIONS}
functions.update(maximum=OPS["maximum"], minimum=OPS["minimum"])  # the ops: numbers too
functions.update(linalg.FUNCTIONS)
functions.update(cat=cat, concatenate=cat, concat=cat, stack=stack, vstack=vstack, hstack=hstack, where=where,
                 einsum=einsum, allclose=allclose,
                 isclose=isclose, equal=equal, numel=numel, get_default_dtype=creation.get_default_dtype,
                 set_default_dtype=creation.set_default_dtype, set_default_device=creation.set_default_device)
