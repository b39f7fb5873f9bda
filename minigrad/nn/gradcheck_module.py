"""Gradient checks for a whole layer: its parameters and its inputs, in float64, in one call.

``minigrad.gradcheck(fn, inputs)`` checks a function of tensors. A layer's
gradients also flow into its parameters, which the function does not take as
arguments, and a layer is usually built in float32, where finite differences
are too coarse to be compared. ``gradcheck_module(module, *inputs)`` here handles
both: it checks a float64 *copy* of the module (``copy.deepcopy`` then
``.double()``, so the module passed in is left as it was) with respect to every
floating-point input and every parameter::

    layer = MyLayer(4, 3)
    nn.gradcheck_module(layer, mg.randn(2, 4))                  # True, or a GradcheckError
    nn.gradcheck_module(attn, x, forward=lambda m, x: m(x, is_causal=True))

A module that draws random numbers in its forward (dropout in training mode)
cannot be checked against finite differences: call ``.eval()`` first, or build
it with ``p=0``.
"""

from __future__ import annotations

import copy
import re

import numpy as np

from ..autograd.gradcheck import GradcheckError
from ..autograd.gradcheck import gradcheck as _gradcheck
from ..tensor import Tensor
from .module import Module


def _as_float64_input(x):
    """A floating-point input as a float64 leaf that requires grad; anything else (ids, masks) unchanged."""
    array = x.data if isinstance(x, Tensor) else x
    if isinstance(array, np.ndarray | np.generic | float | list) and np.asarray(array).dtype.kind == "f":
        return Tensor(np.asarray(array, dtype=np.float64), requires_grad=True)
    return x


def gradcheck_module(module: Module, *inputs, forward=None, eps: float = 1e-6, atol: float = 1e-5,
              rtol: float = 1e-3) -> bool:
    """True when backprop's gradients of ``module`` match finite differences, for its inputs and parameters.

    ``inputs``: floating-point ones (Tensors, ndarrays, lists) are checked, as
    float64 copies; integer and boolean ones (token ids, masks) are passed as
    they are. ``forward(module, *inputs)`` computes the outputs (default:
    ``module(*inputs)``); it may return a Tensor or a tuple of Tensors, and any
    tensor it uses besides ``inputs`` must be float64 itself. On a mismatch it
    raises ``GradcheckError`` naming the input or parameter and both values.
    """
    if not isinstance(module, Module):
        raise TypeError(f"nn.gradcheck_module: the first argument must be a Module, not {type(module).__name__} "
                        f"(for a plain function use minigrad.gradcheck(fn, inputs))")
    checked = copy.deepcopy(module).double()  # the caller's module keeps its dtype and values
    xs = [_as_float64_input(x) for x in inputs]
    named = list(checked.named_parameters())
    names, params = [name for name, _ in named], [param for _, param in named]
    call = forward or (lambda m, *args: m(*args))
    n = len(xs)
    try:
        return _gradcheck(lambda *args: call(checked, *args[:n]), (*xs, *params), eps=eps, atol=atol, rtol=rtol)
    except GradcheckError as err:
        raise GradcheckError(_named(str(err), type(module).__name__, n, names)) from None


def _named(message: str, module_name: str, n_inputs: int, names) -> str:
    """The gradcheck message with its 'input k' said as the module's input or parameter it is."""
    found = re.search(r"with respect to input (\d+)", message)
    if found is None:
        return f"nn.gradcheck_module({module_name}): {message}"
    k = int(found.group(1))
    what = f"input {k} of the module" if k < n_inputs else f"parameter '{names[k - n_inputs]}'"
    return f"nn.gradcheck_module({module_name}), {what}: {message}"
