"""Process-wide settings an entry script may choose; importing minigrad changes none of them.

Three are here: how many threads BLAS may use (``set_threads``), how glibc's
malloc keeps freed memory (``tune_malloc``), and the seed of the default random
generator (``manual_seed``). The demos, lessons and benchmarks call the first
two at the start of their ``main()``; a library that imports minigrad should
not have its process changed behind its back, so ``import minigrad`` does
neither.

Threads
-------
NumPy's BLAS (OpenBLAS) starts one thread per core, and each spins for a
while after a call, waiting for the next. On a machine whose cores are busy
with other work (a browser, an IDE, someone else's tests) those threads fight
the other work and each other for the cores, and the demos ran several times
slower on both cores than on one (``python -m benchmarks.threads`` measures it;
the numbers are in ``benchmarks/README.md``). On cores nobody else uses, all of
them are quicker.

So ``set_threads()`` looks before it chooses: it counts how many cores other
processes keep busy right now (``busy_cores``, from ``/proc/stat`` over a tenth
of a second, less this process's own time) and gives BLAS the cores left
free, rounded to the nearest (at least 1). What the user said wins over what
it measures: ``MINIGRAD_THREADS=N`` sets N, and an ``OPENBLAS_NUM_THREADS``,
``OMP_NUM_THREADS`` or ``MKL_NUM_THREADS`` already in the environment is left
to do its job. The limit is applied with threadpoolctl, to every BLAS and
OpenMP pool loaded at the time.

Memory
------
``tune_malloc()`` keeps freed arrays in the process's heap instead of handing
them back to the OS. A training step allocates and frees the same few-megabyte
arrays hundreds of times (activations, gradients, temporaries). glibc's malloc
serves blocks that large with mmap and returns them to the kernel when they are
freed, and trims the heap when its top is free, so the next step page-faults the
same memory back in, a few microseconds per 4 KB page. Raising the two thresholds
keeps the memory in the process, as PyTorch's caching allocator does for its
tensors. Peak memory is unchanged: the same blocks are reused rather than
returned and re-requested. What it is worth: ``benchmarks/README.md``
(``python -m benchmarks.train_step --ab-malloc``).

The training demos and the benchmark workers call it; a library that imports
minigrad should not have its process's allocator changed behind its back, so
``import minigrad`` does not. Only glibc has these knobs; elsewhere it does
nothing. The environment variable ``MINIGRAD_MALLOC_TUNE=0`` turns it off.

Random numbers
--------------
``mg.randn``, the layer initialisers and dropout draw from one default
generator when they are given no ``rng=`` (a ``np.random.Generator``, which they
then use instead, leaving this one alone). It starts seeded with 0, so runs are
reproducible out of the box; ``manual_seed(n)`` (``mg.manual_seed``, and
``nn.manual_seed``, PyTorch's spelling) re-seeds it.
"""

from __future__ import annotations

import ctypes
import math
import os
import sys
import time
from typing import NamedTuple

import numpy as np

_M_TRIM_THRESHOLD = -1  # mallopt parameter numbers, from glibc's <malloc.h>
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD = 32 * 1024 * 1024  # glibc's largest allowed value on 64-bit: blocks above it still use mmap
_TRIM_THRESHOLD = 512 * 1024 * 1024


def tune_malloc() -> bool:
    """Raise glibc's mmap and trim thresholds; True if it was done."""
    if os.environ.get("MINIGRAD_MALLOC_TUNE", "1") == "0" or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.gnu_get_libc_version  # noqa: B018 -- only glibc has it (musl, for one, does not)
    except (OSError, AttributeError):
        return False
    return bool(libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)) and bool(
        libc.mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD))


# --------------------------------------------------------------------------------------
# Threads
# --------------------------------------------------------------------------------------

USER_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


class ThreadChoice(NamedTuple):
    """What ``set_threads`` chose: the thread count (None: left as the environment set it) and why."""

    threads: int | None
    reason: str


_choice: ThreadChoice | None = None  # the last choice applied, for ``backend()``
_limits: list = []  # threadpoolctl's handles on the limits, kept so they stay in force


def cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def _cpu_ticks() -> tuple[int, int] | None:
    """(busy, total) clock ticks of all CPUs since boot, from /proc/stat's first line; None off Linux."""
    try:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields[:8]) - idle, sum(fields[:8])


def busy_cores(interval: float = 0.1) -> float:
    """How many cores other processes keep busy now: all CPUs' busy time over ``interval``, less our own.

    Where /proc/stat is missing (macOS, Windows), the 1-minute load average
    stands in for it (it counts this process too, so it errs towards fewer threads).
    """
    before, own_before, start = _cpu_ticks(), time.process_time(), time.perf_counter()
    if before is None:
        try:
            return float(os.getloadavg()[0])
        except (AttributeError, OSError):
            return 0.0
    time.sleep(interval)
    after, own, wall = _cpu_ticks(), time.process_time() - own_before, time.perf_counter() - start
    busy, total = after[0] - before[0], after[1] - before[1]
    if total <= 0:
        return 0.0
    n_cpus = os.cpu_count() or 1
    return max(0.0, busy / total * n_cpus - own / wall)


def choose_threads(policy: str | int = "auto") -> ThreadChoice:
    """The thread count ``set_threads(policy)`` applies, and why; measures the load only for "auto"."""
    requested = os.environ.get("MINIGRAD_THREADS", "").strip()
    if requested and requested != "auto":
        if not requested.isdigit() or int(requested) < 1:
            raise ValueError(f"MINIGRAD_THREADS must be a positive whole number or 'auto', got {requested!r}")
        return ThreadChoice(int(requested), f"MINIGRAD_THREADS={requested}")
    if not requested:
        for name in USER_THREAD_VARIABLES:
            if os.environ.get(name):
                return ThreadChoice(None, f"{name}={os.environ[name]} from the environment")
        if policy != "auto":
            if isinstance(policy, bool) or not isinstance(policy, int) or policy < 1:
                raise ValueError(f"set_threads: policy must be 'auto' or a positive int, got {policy!r}")
            return ThreadChoice(policy, "asked for by the script")
    n = cores()
    if n == 1:
        return ThreadChoice(1, "one core")
    busy = busy_cores()
    free = n - busy
    threads = max(1, min(n, math.floor(free + 0.5)))
    return ThreadChoice(threads, f"auto: {n} cores, {busy:.1f} kept busy by other processes")


def set_threads(policy: str | int = "auto") -> ThreadChoice:
    """Limit the BLAS and OpenMP thread pools to ``choose_threads(policy)`` threads; returns the choice.

    ``policy``: "auto" (the cores other processes leave free), or a thread count.
    ``MINIGRAD_THREADS=N`` overrides both; an ``OPENBLAS_NUM_THREADS`` (or OMP_,
    MKL_) the user set is respected and nothing is changed. Needs threadpoolctl
    (a dependency of minigrad); pools loaded after the call (a later ``import
    torch``) are not limited.
    """
    global _choice, _limits
    choice = choose_threads(policy)
    if choice.threads is not None:
        from threadpoolctl import ThreadpoolController

        _set_numba_threads(choice.threads)  # first: starting numba's pool resets OpenMP's thread count
        for limit in reversed(_limits):
            limit.restore_original_limits()
        controller = ThreadpoolController()
        _limits = [controller.limit(limits=choice.threads)]
        if _fast_gemm:  # MKL does the big products: OpenBLAS keeps one thread, so its pool does not spin
            _limits.append(controller.select(internal_api="openblas").limit(limits=1))
    _choice = choice
    return choice


def _set_numba_threads(threads: int) -> None:
    """numba's pool (the [fast] backend's) is not seen by threadpoolctl; set it too when numba is loaded."""
    numba = sys.modules.get("numba")
    if numba is not None:
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))


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


# --------------------------------------------------------------------------------------
# The [fast] backend's thread pools (minigrad/kernels/backend.py)
# --------------------------------------------------------------------------------------

_fast_gemm = False  # True once MKL does the float32 products


def find_mkl() -> str | None:
    """The path of MKL's single dynamic library (libmkl_rt) from the PyPI ``mkl`` wheel, or None.

    Only x86-64 Linux: elsewhere the wheel is not there, and NumPy's matmul stays.
    """
    import glob
    import platform

    if not sys.platform.startswith("linux") or platform.machine() not in ("x86_64", "AMD64"):
        return None
    for folder in dict.fromkeys([os.path.join(sys.prefix, "lib"), os.path.join(sys.base_prefix, "lib")]):
        found = sorted(glob.glob(os.path.join(folder, "libmkl_rt.so*")))
        if found:
            return found[-1]
    return None


def prepare_fast_backend() -> str | None:
    """Set up numba's and MKL's pools to share GNU OpenMP, before either loads; returns MKL's path (or None).

    numba's ``omp`` threading layer runs on libgomp; ``MKL_THREADING_LAYER=GNU``
    makes MKL use the same runtime instead of loading Intel's own (a user's
    own setting is kept). With two runtimes, each spins its threads on the
    same cores, and both slow down.
    """
    global _fast_gemm
    import ctypes.util

    import numba

    if "NUMBA_THREADING_LAYER" not in os.environ and ctypes.util.find_library("gomp"):
        numba.config.THREADING_LAYER = "omp"
    path = find_mkl()
    if path is not None:
        os.environ.setdefault("MKL_THREADING_LAYER", "GNU")
        _fast_gemm = True
    return path


def thread_choice() -> ThreadChoice | None:
    """The choice ``set_threads`` last applied (None if it was never called)."""
    return _choice


# --------------------------------------------------------------------------------------
# The default random generator
# --------------------------------------------------------------------------------------

_default = np.random.default_rng(0)


def manual_seed(seed: int) -> None:
    """Re-seed the default generator (``mg.randn``, layer initialisation and dropout given no ``rng``)."""
    global _default
    _default = np.random.default_rng(seed)


def default_rng() -> np.random.Generator:
    """The generator used when none is passed."""
    return _default
