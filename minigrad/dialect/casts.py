"""dtypes and the device: ``x.to(...)``, ``x.float()``, ``x.double()``, ``x.long()``, ``x.cpu()``, ``x.device``."""

from __future__ import annotations

import numpy as np

from ..registry import OPS, apply, bind_call_form
from ..tensor import Tensor
from .arguments import bind
from .creation import CPU, check_device
from .dtypes import as_dtype, legacy


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
    return f"minigrad.{self.dtype}" if dtype is None else to(self, legacy(dtype))


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
# PyTorch's in-place arithmetic methods: x.add_(v) is x += v (inplace.py's rules)
# --------------------------------------------------------------------------------------


@bind(None, "add_")
def add_(self, other, *, alpha=1) -> Tensor:
    """``x += alpha * other`` in place; returns x."""
    self += other if alpha == 1 else other * alpha
    return self


@bind(None, "sub_")
def sub_(self, other, *, alpha=1) -> Tensor:
    """``x -= alpha * other`` in place; returns x."""
    self -= other if alpha == 1 else other * alpha
    return self


@bind(None, "mul_")
def mul_(self, other) -> Tensor:
    """``x *= other`` in place; returns x."""
    self *= other
    return self


@bind(None, "div_")
def div_(self, other) -> Tensor:
    """``x /= other`` in place; returns x."""
    self /= other
    return self

