"""Which form each kernel runs: its NumPy form, or the optional [fast] backend's compiled one.

``pip install -e '.[fast]'`` adds numba (and, on x86-64 Linux, Intel MKL).
When they are installed, the first kernel call (or ``mg.backend()``, or
``runtime.set_threads``, which sizes the pools) gives some kernels a third form
beside their NumPy and plain ones; ``import minigrad`` itself loads neither:

* ``numba_forms.py``: compiled loops for the elementwise passes, multi-core
  (GELU and its gradient, layer norm and its gradient, softmax and its
  gradient, attention's softmax, cross-entropy and its gradient) but for the
  Adam update, one pass per parameter on one thread;
* ``mkl_blas.py``: MKL's GEMMs for float32 matrix products, stacks of them
  (attention's heads, in one batched call) and linear layers, each product
  shape timed against NumPy's matmul the first time it is seen and given to
  the quicker.

Each compiled form computes what the kernel's plain form computes (the
tests hold it to that on the same generated inputs as the NumPy form) and
hands anything it does not handle (float64, strided views, other axes) to the
NumPy form. ``MINIGRAD_BACKEND=numpy`` switches the backend off;
``MINIGRAD_BACKEND=fast`` makes a missing extra an error instead of a silent
fallback. ``minigrad.backend()`` says what was chosen, with which BLAS and
which thread pools. Without the extra nothing here imports numba or MKL.

Threads: numba's pool and MKL's both run on the one OpenMP runtime
(GNU's libgomp; ``MKL_THREADING_LAYER=GNU``): two OpenMP runtimes spinning on
the same cores slow each other down badly. ``minigrad.runtime.set_threads``
sizes them and pins NumPy's OpenBLAS, which then does only small products,
to one thread.
"""

from __future__ import annotations

import importlib.util
import os

from .kernel import KERNELS

CHOICES = ("auto", "numpy", "fast")
_chosen = {"kernels": "numpy", "blas": "numpy", "why": "not selected yet"}


def _requested() -> str:
    value = os.environ.get("MINIGRAD_BACKEND", "auto").strip().lower() or "auto"
    if value not in CHOICES:
        raise ValueError(f"MINIGRAD_BACKEND must be one of {', '.join(CHOICES)}, got {value!r}")
    return value


def check_request() -> str:
    """``MINIGRAD_BACKEND``, checked when minigrad is imported (loading nothing): a bad value is an error then."""
    requested = _requested()
    if requested == "fast" and importlib.util.find_spec("numba") is None:
        raise ImportError("MINIGRAD_BACKEND=fast, but numba is not installed: pip install -e '.[fast]'")
    return requested


def select() -> None:
    """Give the kernels their compiled forms if the [fast] extra is installed and not switched off (once)."""
    if _chosen["why"] != "not selected yet":
        return
    for k in KERNELS.values():
        k.active = k.fast  # (replaces each kernel's first-call hook)
    requested = check_request()
    if requested == "numpy":
        _chosen.update(why="MINIGRAD_BACKEND=numpy")
        return
    if importlib.util.find_spec("numba") is None:
        _chosen.update(why="the [fast] extra is not installed (pip install -e '.[fast]')")
        return
    from .. import runtime

    mkl_path = runtime.prepare_fast_backend()  # one OpenMP runtime for numba and MKL, before either loads
    from . import numba_forms

    numba_forms.install(KERNELS)
    _chosen.update(kernels="numba", why=f"the [fast] extra is installed (MINIGRAD_BACKEND={requested})")
    if mkl_path is not None:
        from . import mkl_blas

        mkl_blas.load(mkl_path)
        runtime.quiet_openblas()  # before the first product: its spinning threads would slow MKL's (runtime.py)
        mkl_blas.install(KERNELS)
        _chosen.update(blas=f"mkl ({mkl_path})")


def backend() -> dict:
    """What the kernels run on: which kernels have a compiled form, which BLAS, which thread pools.

    ``{"kernels": {name: "numba" | "mkl" | "numpy"}, "backend": "numpy" | "numba",
    "gemm": "numpy" | "mkl (...)", "why": ..., "gemm_by_shape": {product: "mkl" | "numpy"}, the path
    measured quicker for each product shape seen so far, "threads": the last ``set_threads``
    choice, "thread_pools": threadpoolctl's view of the loaded pools, plus numba's}``
    """
    from .. import runtime

    select()
    forms = {name: getattr(k.active, "backend", "numpy") for name, k in KERNELS.items()}
    by_shape = {}
    if _chosen["blas"] != "numpy":
        from . import mkl_blas

        for key, choice in mkl_blas.chosen.items():
            by_shape[mkl_blas.shape_text(key)] = choice
    return {"backend": _chosen["kernels"], "gemm": _chosen["blas"], "why": _chosen["why"], "kernels": forms,
            "gemm_by_shape": by_shape, "threads": runtime.thread_choice(), "thread_pools": runtime.thread_pools(),
            "runtime": runtime.report()}
