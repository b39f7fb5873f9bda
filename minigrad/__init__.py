"""minigrad: a small reverse-mode autodiff engine on NumPy, and transformers built on it.

Read the engine in this order (the README gives the line counts):

* ``tensor.py``: the Tensor, an ndarray plus its place in the graph;
* ``registry.py``: what an op is, and ``apply``, which runs one and records it;
* ``ops.py``: the op table; every core primitive's forward, VJP and test samples;
* ``autograd/backprop.py``: backward and ``grad``;
* ``autograd/gradcheck.py``: gradients checked against finite differences;
* ``autograd/functional.py``: ``vjp``, ``jvp``, ``jacobian``, ``hessian``, ``hvp``.

``modes.py`` holds the switches (``no_grad``, ``composite_mode``). The speed
appendix: ``fused.py`` (fused primitives, each with its composite) and
``kernels/`` (fast NumPy, each with its plain form; ``mg.backend()`` says
which run the optional [fast] backend's compiled forms). Layers live in
``minigrad.nn``, optimizers in ``minigrad.optim``, graph drawing in
``minigrad.viz`` (which imports graphviz only when used), checkpoints in
``minigrad.io``, in-place updates (``w -= v`` under ``no_grad``) in ``inplace.py``,
and ``runtime.py`` has the process-wide settings an entry script may choose
(the default random generator, BLAS threads, malloc), which importing minigrad
leaves alone.
"""

import numpy as np

from . import fused, kernels, ops
from .autograd import (
    AnomalyError,
    GradcheckError,
    VJPError,
    backward,
    detect_anomaly,
    grad,
    gradcheck,
    gradgradcheck,
    hessian,
    hvp,
    jacobian,
    jvp,
    linearize,
    vjp,
)
from .kernels.backend import backend
from .modes import composite_mode, enable_grad, is_composite_mode, is_grad_enabled, no_grad, set_grad_enabled
from .ops import OPS
from .runtime import manual_seed
from .tensor import OpError, Tensor, arange, ones, ones_like, randn, tensor, zeros, zeros_like

# --------------------------------------------------------------------------------------
# The table's ops as functions with NumPy's signatures: mg.stack([a, b], axis=0), mg.einsum(...)
# --------------------------------------------------------------------------------------

maximum, minimum = OPS["maximum"], OPS["minimum"]  # elementwise, as np.maximum / np.minimum: the ops themselves


def where(cond, x, y) -> Tensor:
    """``x`` where ``cond`` is True, else ``y``, as ``np.where`` (the condition is not differentiated)."""
    cond = cond.data if isinstance(cond, Tensor) else cond
    return OPS["where"](np.asarray(cond, dtype=bool), x, y)


def _numpy_names(who: str, pytorch: dict) -> None:
    """PyTorch's ``dim=`` given to a function that takes NumPy's ``axis=``: say so, not "unexpected keyword"."""
    if "dim" in pytorch:
        raise TypeError(f"mg.{who} takes NumPy's axis= (not PyTorch's dim=): mg.{who}(..., axis={pytorch['dim']!r})")
    if pytorch:
        raise TypeError(f"mg.{who}() got an unexpected keyword argument {next(iter(pytorch))!r}")


def concatenate(tensors, axis: int = 0, **pytorch) -> Tensor:
    """Join tensors along an existing axis, as ``np.concatenate([a, b], axis)``."""
    _numpy_names("concatenate", pytorch)
    return OPS["concatenate"](*tensors, axis=axis)


cat = concatenate


def stack(tensors, axis: int = 0, **pytorch) -> Tensor:
    """Join same-shaped tensors along a new axis, as ``np.stack([a, b], axis)``."""
    _numpy_names("stack", pytorch)
    return OPS["stack"](*tensors, axis=axis)


def split(x: Tensor, sections, axis: int = 0, **pytorch) -> list[Tensor]:
    """``np.split`` for tensors: ``sections`` equal parts, or cut at the given indices (``x.split``).

    (NumPy's meaning, not PyTorch's: ``sections=2`` is two parts, not parts of size 2.)
    """
    _numpy_names("split", pytorch)
    return x.split(sections, axis)


def einsum(subscripts: str, *operands) -> Tensor:
    """Einstein summation, as ``np.einsum("ij,jk->ik", a, b)``: the fused op ``einsum`` (``fused.py``)."""
    return OPS["einsum"](*operands, subscripts=subscripts)


__all__ = [
    "OPS", "AnomalyError", "GradcheckError", "OpError", "Tensor", "VJPError", "arange", "backend", "backward", "cat",
    "composite_mode", "concatenate", "detect_anomaly", "einsum", "enable_grad", "fused", "grad", "gradcheck",
    "gradgradcheck", "hessian", "hvp", "is_composite_mode", "is_grad_enabled", "jacobian", "jvp", "kernels",
    "linearize", "manual_seed", "maximum", "minimum", "no_grad", "ones", "ones_like", "ops", "randn",
    "set_grad_enabled", "split", "stack", "tensor", "vjp", "where", "zeros", "zeros_like",
]
__version__ = "0.1.0"
