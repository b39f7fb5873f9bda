"""Which form each kernel runs: its NumPy form, or the optional [fast] backend's compiled one.

``pip install -e '.[fast]'`` adds numba (and, on x86-64 Linux, Intel MKL).
When they are installed, the first kernel call (or ``mg.backend()``) gives
some kernels a third form beside their NumPy and plain ones; ``import minigrad`` itself loads neither:

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
which thread pools, and what ``policy.py`` changed in the process. Without the
extra nothing here imports numba or MKL.

Threads: numba's pool and MKL's both run on the one OpenMP runtime
(GNU's libgomp; ``MKL_THREADING_LAYER=GNU``): two OpenMP runtimes spinning on
the same cores slow each other down badly. ``policy.py`` sizes the pools, and
keeps NumPy's OpenBLAS, which then does only small products, at one thread.
"""

from __future__ import annotations

import importlib.util
import os
import sys

from . import policy
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
    mkl_path = _one_openmp()  # one OpenMP runtime for numba and MKL, set before either loads
    from . import numba_forms

    numba_forms.install(KERNELS)
    _chosen.update(kernels="numba", why=f"the [fast] extra is installed (MINIGRAD_BACKEND={requested})")
    if mkl_path is not None:
        from . import mkl_blas

        mkl_blas.load(mkl_path)
        mkl_blas.install(KERNELS)
        _chosen.update(blas=f"mkl ({mkl_path})")
    policy.fast_backend_loaded(mkl=mkl_path is not None)  # the new pools sized before the first product


def find_mkl() -> str | None:
    """The path of MKL's single dynamic library (libmkl_rt) from the PyPI ``mkl`` wheel, or None.
    Only x86-64 Linux: elsewhere the wheel is not there, and NumPy's matmul stays."""
    import glob
    import platform

    if not sys.platform.startswith("linux") or platform.machine() not in ("x86_64", "AMD64"):
        return None
    for folder in dict.fromkeys([os.path.join(sys.prefix, "lib"), os.path.join(sys.base_prefix, "lib")]):
        found = sorted(glob.glob(os.path.join(folder, "libmkl_rt.so*")))
        if found:
            return found[-1]
    return None


def _one_openmp() -> str | None:
    """numba's ``omp`` threading layer runs on libgomp; ``MKL_THREADING_LAYER=GNU`` makes MKL use it too
    instead of loading Intel's own (a user's own settings are kept). Returns MKL's path, or None."""
    import ctypes.util

    import numba

    if "NUMBA_THREADING_LAYER" not in os.environ and ctypes.util.find_library("gomp"):
        numba.config.THREADING_LAYER = "omp"
    path = find_mkl()
    if path is not None:
        os.environ.setdefault("MKL_THREADING_LAYER", "GNU")
    return path


def backend() -> dict:
    """What the kernels run on, and what minigrad changed in the process.

    ``{"kernels": {name: "numba" | "mkl" | "numpy"}, "backend": "numpy" | "numba", "gemm": "numpy" | "mkl
    (...)", "why": ..., "gemm_by_shape": {product: "mkl" | "numpy"}, the path measured quicker for each
    product shape seen so far, "process": the malloc and thread settings changed and why
    (``policy.report()``), "thread_pools": threadpoolctl's view of the loaded pools, plus numba's}``
    """
    select()
    forms = {name: getattr(k.active, "backend", "numpy") for name, k in KERNELS.items()}
    by_shape = {}
    if _chosen["blas"] != "numpy":
        from . import mkl_blas

        by_shape = {mkl_blas.shape_text(key): choice for key, choice in mkl_blas.chosen.items()}
    return {"backend": _chosen["kernels"], "gemm": _chosen["blas"], "why": _chosen["why"], "kernels": forms,
            "gemm_by_shape": by_shape, "process": policy.report(), "thread_pools": thread_pools()}


def thread_pools() -> list[dict]:
    """The thread pools loaded in this process: threadpoolctl's list (BLAS, OpenMP), plus numba's if loaded."""
    from threadpoolctl import threadpool_info

    pools = [{k: p.get(k) for k in ("internal_api", "user_api", "num_threads", "version", "filepath")}
             for p in threadpool_info()]
    numba = sys.modules.get("numba")
    if numba is not None:
        pools.append({"internal_api": "numba", "user_api": "numba", "num_threads": numba.get_num_threads(),
                      "version": numba.__version__, "threading_layer": numba.config.THREADING_LAYER})
    return pools
