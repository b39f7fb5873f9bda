"""Reading a call's arguments as PyTorch spells them: ``dim``/``axis``, ``keepdim``/``keepdims``, and ``bind``.

Every form in this package reads its arguments with these helpers, so one
spelling means one thing everywhere, and a spelling that cannot be read is an
error naming the argument and what to write.
"""

from __future__ import annotations

import numpy as np

from ..registry import bind_call_form
from ..tensor import OpError, Tensor


def bind(op_name: str | None, *names: str):
    """Decorator: put the function on ``Tensor`` under ``names``, as a call form of op ``op_name``."""
    def decorate(function):
        for name in names:
            bind_call_form(function, name, op_name)
        return function

    return decorate

def dim_of(who: str, dim, axis):
    """One of PyTorch's ``dim`` and NumPy's ``axis`` (a list becomes a tuple); both given is an error."""
    if axis is not None:
        if dim is not None:
            raise TypeError(f"{who}: dim= and axis= name the same thing; give one ({who}(..., dim={dim!r}))")
        dim = axis
    return tuple(dim) if type(dim) is list else dim


def scalar_dim(who: str, x: Tensor, dim):
    """A 0-d tensor takes dim 0 or -1 (PyTorch), reducing nothing: None for the op; out of range is an OpError."""
    for d in dim if isinstance(dim, tuple) else (dim,):
        axis_in(who, x, d)
    return None


def reduction_dims(who: str, x: Tensor, dim, keepdim, axis, keepdims) -> tuple:
    """``(axis, keepdims)`` for a reduction op, read from ``dim=``/``axis=`` and ``keepdim=``/``keepdims=``.

    A 0-d tensor takes dim 0 or -1, as in PyTorch, and reduces nothing."""
    if axis is not None or keepdims is not None or type(dim) is list or keepdim is not False:  # (x.sum(): skipped)
        dim = dim_of(who, dim, axis)
        keepdim = keep_of(who, keepdim, keepdims, dim)
    if x.ndim == 0 and dim is not None:
        dim = scalar_dim(who, x, dim)
    return dim, keepdim


def keep_of(who: str, keepdim, keepdims, dim=None) -> bool:
    """One of PyTorch's ``keepdim`` and NumPy's ``keepdims``, as a bool."""
    if keepdims is not None:
        if keepdim:
            raise TypeError(f"{who}: keepdim= and keepdims= name the same thing; give one (x.{who}(..., keepdim=True))")
        keepdim = keepdims
    if keepdim is not True and keepdim is not False and not isinstance(keepdim, np.bool_):
        raise TypeError(f"{who}: keepdim must be True or False, got {keepdim!r}; NumPy's second positional argument, "
                        f"dtype, is a keyword here: x.{who}({dim!r}, dtype={dtype_name(keepdim)})")
    return bool(keepdim)


def dtype_name(dtype) -> str:
    try:
        return f"mg.{np.dtype(dtype).name}"
    except TypeError:
        return repr(dtype)


def axis_in(who: str, x: Tensor, dim: int) -> int:
    """``dim`` as a positive index; a 0-d tensor takes 0 and -1 (as PyTorch); out of range is an OpError."""
    ndim = max(x.ndim, 1)
    if not isinstance(dim, int | np.integer) or isinstance(dim, bool):
        raise TypeError(f"{who}: dim must be an int, got {dim!r}")
    if not -ndim <= dim < ndim:
        raise OpError(f"{who}: dim {dim} is out of range for {x.ndim} dims (input {x.shape} {x.dtype})")
    return int(dim) % ndim


def as_tensor(x, who: str) -> Tensor:
    if isinstance(x, Tensor):
        return x
    if isinstance(x, np.ndarray | np.generic):
        return Tensor._wrap(np.asarray(x))
    if isinstance(x, int | float):  # a Python number: int64, or float32 as minigrad's floats
        return Tensor._wrap(np.asarray(x, dtype=np.float32 if isinstance(x, float) else None))
    raise TypeError(f"{who}: expected a Tensor, got {type(x).__name__}; make one with mg.tensor(...)")


# --------------------------------------------------------------------------------------
# Reductions: sum, mean, prod, var, std, logsumexp, all, any
