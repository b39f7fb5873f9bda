"""minigrad: a small reverse-mode autodiff engine on NumPy, and transformers built on it.

Read the engine in this order (the README gives the line counts):

* ``tensor.py``: the Tensor, an ndarray plus its place in the graph;
* ``registry.py``: what an op is, and ``apply``, which runs one and records it;
* ``ops.py``: the op table; every core primitive's forward, VJP and test samples;
* ``autograd/backprop.py``: backward and ``grad``;
* ``autograd/gradcheck.py``: gradients checked against finite differences;
* ``autograd/functional.py``: ``vjp``, ``jvp``, ``jacobian``, ``hessian``, ``hvp``.

``modes.py`` holds the switches (``no_grad``, ``composite_mode``). The speed
appendix: ``fused/`` (fused primitives, each with its composite) and
``kernels/`` (fast NumPy, each with its plain form; ``mg.backend()`` says
which run the optional [fast] backend's compiled forms). Layers live in
``minigrad.nn``, optimizers in ``minigrad.optim``, graph drawing in
``minigrad.viz`` (which imports graphviz only when used), checkpoints in
``minigrad.io``, in-place updates (``w -= v`` under ``no_grad``) in ``inplace.py``
and the version counters that let backward see them in ``versions.py``,
the package ``dialect/`` reads PyTorch's spellings of each method and
``mg.`` function and applies the op it means (``x.transpose(0, 1)``, ``x.max(-1)``,
``mg.split(...)``), one file a concern (reductions, shapes, creation, random,
dtypes...). Importing minigrad changes nothing in the process; the first ``backward()``
sets BLAS threads and glibc's malloc thresholds for a training loop
(``kernels/policy.py``; ``MINIGRAD_AUTOTUNE=0`` leaves them alone).
"""

from . import dialect, fused, kernels, ops
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
from .dialect import ValuesIndices, dtypes
from .dialect.creation import (
    accelerator,
    arange,
    backends,
    cuda,
    device,
    empty,
    eye,
    from_numpy,
    full,
    full_like,
    linspace,
    ones,
    ones_like,
    tensor,
    zeros,
    zeros_like,
)
from .dialect.random import (
    Generator,
    default_generator,
    manual_seed,
    multinomial,
    rand,
    rand_like,
    randint,
    randn,
    randn_like,
    randperm,
)
from .kernels.backend import backend
from .modes import (
    composite_mode,
    enable_grad,
    inference_mode,
    is_composite_mode,
    is_grad_enabled,
    no_grad,
    set_grad_enabled,
)
from .ops import OPS
from .tensor import OpError, Tensor

# The mg. functions PyTorch has (mg.split, mg.cat, mg.tanh, mg.max...): dialect/functions.py, tensor first.
globals().update(dialect.functions)
# PyTorch's dtype names (mg.float32, mg.long, mg.bool...), from dtypes.py: set here, after the code above, as
# mg.float / mg.int / mg.bool would hide Python's builtins in this module.
globals().update({name: getattr(dtypes, name) for name in dtypes.DTYPE_NAMES})


def __getattr__(name: str):
    """``import minigrad as torch`` reaches ``torch.nn``, ``torch.optim``, ``torch.utils.data`` without a second
    import, ``torch.save``/``torch.load`` (``minigrad.io``'s ``save_object``/``load_object``) and ``torch.random``."""
    if name in ("nn", "optim", "viz", "io", "utils"):
        import importlib

        return importlib.import_module(f".{name}", __name__)
    if name in ("save", "load"):
        from . import io

        return io.save_object if name == "save" else io.load_object
    if name == "random":  # torch.random.manual_seed(42)
        return dialect.random
    raise AttributeError(f"module 'minigrad' has no attribute {name!r}")


__all__ = [
    "OPS", "AnomalyError", "Generator", "GradcheckError", "OpError", "Tensor", "VJPError", "ValuesIndices", "arange",
    "accelerator", "backend", "backends", "backward", "composite_mode", "cuda", "default_generator", "detect_anomaly",
    "device", "dialect", "dtypes", "empty", "enable_grad", "eye", "from_numpy", "full", "full_like", "fused", "grad",
    "gradcheck", "gradgradcheck", "hessian", "hvp", "inference_mode", "is_composite_mode", "is_grad_enabled",
    "jacobian", "jvp",
    "kernels", "linearize", "linspace", "manual_seed", "multinomial", "no_grad", "ones", "ones_like", "ops", "rand",
    "rand_like", "randint", "randn", "randn_like", "randperm", "set_grad_enabled", "tensor", "vjp", "zeros",
    "zeros_like",
    *dialect.functions, *dtypes.DTYPE_NAMES,
]
__version__ = "0.1.0"
