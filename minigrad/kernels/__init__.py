"""The speed appendix: fast forms of the few functions a training step spends its time in.

Read in this order:

* ``kernel.py``: what a kernel is (``KERNELS``, ``@kernel``): a fast function
  registered beside the plain NumPy it equals;
* ``numpy_forms.py`` and ``numpy_layer_forms.py``: every kernel's NumPy form and its plain twin
  (elementwise, sums, products, softmax; then erf, GELU, the norms, cross-entropy, Adam);
* ``numba_forms.py``, ``mkl_blas.py``: the optional [fast] backend's compiled
  forms (numba loops, MKL's GEMM);
* ``backend.py``: which form each kernel runs, chosen once, at the first kernel call;
* ``policy.py``: what minigrad changes in the process to train faster (BLAS threads,
  glibc's malloc thresholds), when, and how to switch it off (``MINIGRAD_AUTOTUNE=0``).

``ops.py``, ``fused/`` and ``optim/adam.py`` call the kernels below by name;
``backward()`` calls ``policy.on_backward()``, the policy's one hook.
"""

from . import backend
from .kernel import KERNELS, kernel
from .numpy_forms import (
    add,
    attention_weights,
    linear,
    matmul,
    mean,
    power,
    row_dot,
    row_sum,
    scatter_add,
    softmax,
    softmax_grad,
    stable_max,
    sum,
)
from .numpy_layer_forms import (
    BLOCK,
    GELU_CUBIC,
    GELU_SATURATED,
    INV_SQRT_2PI,
    SQRT_2_OVER_PI,
    adam_update,
    cross_entropy,
    cross_entropy_grad,
    erf,
    gelu,
    gelu_gate,
    gelu_grad,
    layer_norm_affine,
    layer_norm_grad,
    rms_norm,
    standardise,
)

__all__ = ["BLOCK", "GELU_CUBIC", "GELU_SATURATED", "INV_SQRT_2PI", "KERNELS", "SQRT_2_OVER_PI", "adam_update",
           "add", "attention_weights", "cross_entropy", "cross_entropy_grad", "erf", "gelu", "gelu_gate", "gelu_grad",
           "kernel", "layer_norm_affine", "layer_norm_grad", "linear", "matmul", "mean", "power", "rms_norm", "row_dot",
           "row_sum", "scatter_add", "softmax", "softmax_grad", "stable_max", "standardise", "sum"]

backend.check_request()  # a bad MINIGRAD_BACKEND is an error at import; the backend loads at first use
