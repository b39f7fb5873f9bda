"""minigrad: a small reverse-mode autodiff engine on NumPy, and transformers built on it.

The core is three files, meant to be read in one sitting:

* ``ops.py``: the op table; every primitive's forward, VJP and test samples;
* ``tensor.py``: the Tensor, and ``apply``, which runs an op and records it;
* ``autograd.py``: backward, ``grad``, and anomaly detection.

``gradcheck.py`` checks gradients against finite differences. Layers live in
``minigrad.nn``, optimizers in ``minigrad.optim``, graph drawing in
``minigrad.viz`` (which imports graphviz only when used).
"""

from . import ops
from ._memory import tune_malloc
from .autograd import AnomalyError, backward, detect_anomaly, grad
from .functional import hessian, hvp, jacobian, jvp, linearize, vjp
from .gradcheck import GradcheckError, gradcheck, gradgradcheck
from .ops import OPS
from .tensor import (
    OpError,
    Tensor,
    arange,
    cat,
    concatenate,
    einsum,
    enable_grad,
    is_grad_enabled,
    maximum,
    minimum,
    no_grad,
    ones,
    ones_like,
    randn,
    set_grad_enabled,
    split,
    stack,
    tensor,
    where,
    zeros,
    zeros_like,
)

__all__ = [
    "OPS", "AnomalyError", "GradcheckError", "OpError", "Tensor", "arange", "backward", "cat", "concatenate",
    "detect_anomaly", "einsum", "enable_grad", "grad", "gradcheck", "gradgradcheck", "is_grad_enabled", "jacobian",
    "maximum", "minimum", "no_grad", "ones", "ones_like", "ops", "randn", "set_grad_enabled", "split", "stack",
    "tensor", "where", "zeros", "zeros_like",
    "hessian", "hvp", "jvp", "linearize", "vjp",  # functional.py: forward and reverse mode as functions
]
__version__ = "0.1.0"

tune_malloc()  # see _memory.py: keeps big freed arrays in the process (set MINIGRAD_MALLOC_TUNE=0 to skip)
