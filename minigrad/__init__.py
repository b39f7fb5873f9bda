"""minigrad: a small reverse-mode autodiff engine on NumPy, and transformers built on it.

Read the engine in this order (the README gives the line counts):

* ``tensor.py``: the Tensor, and ``apply``, which runs an op and records it;
* ``ops.py``: the op table; every core primitive's forward, VJP and test samples;
* ``autograd.py``: backward and ``grad``;
* ``gradcheck.py``: gradients checked against finite differences;
* ``functional.py``: ``vjp``, ``jvp``, ``jacobian``, ``hessian``, ``hvp``: forward and reverse mode as functions.

``modes.py`` holds the switches (``no_grad``, ``composite_mode``),
``anomaly.py`` ``detect_anomaly``. The speed appendix: ``fused.py`` (fused
primitives, each with its composite) and ``kernels.py`` (fast NumPy, each with
its plain form). Layers live in ``minigrad.nn``, optimizers in
``minigrad.optim``, graph drawing in ``minigrad.viz`` (which imports graphviz
only when used).
"""

from . import fused, kernels, ops
from ._memory import tune_malloc
from .anomaly import AnomalyError, detect_anomaly
from .autograd import backward, grad
from .functional import hessian, hvp, jacobian, jvp, linearize, vjp
from .functions import cat, concatenate, einsum, maximum, minimum, split, stack, where
from .gradcheck import GradcheckError, gradcheck, gradgradcheck
from .modes import composite_mode, enable_grad, is_composite_mode, is_grad_enabled, no_grad, set_grad_enabled
from .ops import OPS
from .tensor import OpError, Tensor, arange, ones, ones_like, randn, tensor, zeros, zeros_like
from .vjp_checks import VJPError

__all__ = [
    "OPS", "AnomalyError", "GradcheckError", "OpError", "Tensor", "VJPError", "arange", "backward", "cat",
    "composite_mode",
    "concatenate", "detect_anomaly", "einsum", "enable_grad", "fused", "grad", "gradcheck", "gradgradcheck",
    "is_composite_mode", "is_grad_enabled", "jacobian", "kernels", "maximum", "minimum", "no_grad", "ones",
    "ones_like", "ops", "randn", "set_grad_enabled", "split", "stack", "tensor", "where", "zeros", "zeros_like",
    "hessian", "hvp", "jvp", "linearize", "vjp",  # functional.py: forward and reverse mode as functions
]
__version__ = "0.1.0"

tune_malloc()  # see _memory.py: keeps big freed arrays in the process (set MINIGRAD_MALLOC_TUNE=0 to skip)
