"""The [fast] backend's matrix products: Intel MKL's ``cblas_sgemm``, called through ctypes.

Loaded by ``backend.py`` only where the PyPI ``mkl`` wheel is installed
(x86-64 Linux: ``pip install -e '.[fast]'``). It is the BLAS PyTorch's CPU
build uses, so a product costs here what it costs there.

Two calls do the work:

* ``cblas_sgemm``: one product C = alpha A B + beta C. Either operand may be
  transposed in memory (a ``W.T`` view, a column-major array): MKL reads it
  as it lies, where NumPy would copy it first. A linear layer's bias is a
  second, rank-1 GEMM (ones times the bias, added to C), so that MKL's
  threads add it each to the part of C it wrote (``linear``).
* ``cblas_sgemm_batch``: a stack of products of one shape, such as
  attention's per-head ``q @ k^T`` and ``weights @ v``, in one call that
  spreads the stack over MKL's threads. NumPy's batched matmul makes one
  BLAS call per matrix, each too small to use a second core. Each matrix is
  found by its address (a table of pointers), so head-split views such as
  ``(B, T, H, D) -> (B, H, T, D)`` and broadcast batch axes are read in place.

Only float32 is sent to MKL (what training uses); everything else, and
products too small to repay a ctypes call, go to NumPy's matmul. Of the rest,
each shape goes to whichever of MKL and NumPy's matmul was the quicker when it
was first seen: both are timed then (``_quicker``), since which BLAS wins
depends on the CPU, the shape, the layouts and the threads, not on a rule that
holds everywhere."""

from __future__ import annotations

import ctypes
import math
import time

import numpy as np

from .numpy_forms import _ones  # (a cached vector of ones: the rank-1 GEMM's column)

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
_SMALL = 32 * 32 * 32  # m * n * k below this: NumPy's matmul (the ctypes call would cost more than it saves)
_F32 = np.dtype(np.float32)

_lib = None  # the loaded libmkl_rt


def load(path: str) -> None:
    """Load libmkl_rt from ``path`` and declare sgemm's argument types."""
    global _lib
    lib = ctypes.CDLL(path)
    i, f, p = ctypes.c_int, ctypes.c_float, ctypes.c_void_p
    lib.cblas_sgemm.argtypes = [i, i, i, i, i, i, f, p, i, p, i, f, p, i]
    lib.cblas_sgemm.restype = None
    # (layout, transa[], transb[], m[], n[], k[], alpha[], a*[], lda[], b*[], ldb[], beta[], c*[], ldc[],
    #  group_count, group_size[]): one group, so every array holds one value but the three of pointers
    lib.cblas_sgemm_batch.argtypes = [i, p, p, p, p, p, p, p, p, p, p, p, p, p, i, p]
    lib.cblas_sgemm_batch.restype = None
    lib.MKL_Get_Max_Threads()  # loads MKL's threading layer (and libgomp) now, where thread limits can see it
    _lib = lib


def _layout(m: np.ndarray):
    """(transpose flag, leading dimension) for MKL to read the 2-D view ``m`` in place, or None to copy it."""
    return _stack_layout(m.shape, m.strides)


def _layout_of(rows: int, cols: int, s0: int, s1: int):
    """``_layout`` from a float32 matrix's sizes and byte strides (no array needed)."""
    if s0 % 4 or s1 % 4:
        return None
    if s1 == 4 and (s0 >= 4 * max(cols, 1) or rows == 1):
        return _NO_TRANS, max(s0 // 4, cols, 1)
    if s0 == 4 and (s1 >= 4 * max(rows, 1) or cols == 1):
        return _TRANS, max(s1 // 4, rows, 1)
    return None


def _readable(m: np.ndarray) -> tuple[np.ndarray, int, int]:
    """``m`` (2-D float32) as (array, flag, ld) MKL reads without copying, copying it once if it must."""
    lay = _layout(m)
    if lay is None:
        m = np.ascontiguousarray(m)
        lay = _layout(m)
    return m, *lay


def gemm(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None, alpha: float = 1.0,
         beta: float = 0.0) -> np.ndarray:
    """alpha * a @ b (+ beta * out) for 2-D float32 a (M, K), b (K, N); ``out`` (M, N) C-ordered."""
    m, k = a.shape
    n = b.shape[1]
    if out is None:
        out = np.empty((m, n), _F32)
    if m == 0 or n == 0:
        return out
    if k == 0:  # (an empty sum: 0, and beta * out; out as np.empty made it may hold NaN, which 0 * NaN keeps)
        if beta == 0:
            out[...] = 0
        else:
            out *= beta
        return out
    a, ta, lda = _readable(a)
    b, tb, ldb = _readable(b)
    _lib.cblas_sgemm(_ROW_MAJOR, ta, tb, m, n, k, alpha, a.ctypes.data, lda, b.ctypes.data, ldb, beta,
                     out.ctypes.data, max(n, 1))
    return out


def _offsets(shape: tuple, strides: tuple, batch: tuple) -> np.ndarray:
    """The byte offset of each matrix of a stack (``shape``/``strides``: (..., rows, cols)) broadcast to ``batch``,
    in C order over ``batch``. An axis the stack lacks or has of length 1 is broadcast: the same matrix again."""
    offsets = np.zeros(batch, np.int64)
    lead = len(batch) - (len(shape) - 2)
    for axis, size in enumerate(batch):
        own = axis - lead  # this batch axis in the stack's own axes (negative: the stack lacks it)
        if own < 0 or shape[own] == 1:
            continue
        along = np.arange(size, dtype=np.int64).reshape((-1,) + (1,) * (len(batch) - axis - 1))
        offsets = offsets + strides[own] * along  # (this axis's index times its stride, over the later axes)
    return offsets.reshape(-1)


def _c_strides(shape: tuple, itemsize: int) -> tuple:
    """The strides of a C-ordered array of ``shape``."""
    strides, step = [], itemsize
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def _stack_layout(shape: tuple, strides: tuple):
    """``_layout`` of a matrix, or of each matrix of a stack (..., rows, cols): (flag, ld), or None to copy. The
    stride of an axis of length 1 is never stepped along, and NumPy may give it any value (and call the array
    contiguous, so that a copy keeps it): it is read as packed."""
    rows, cols = shape[-2:]
    row_step = cols * 4 if rows == 1 else strides[-2]
    col_step = 4 if cols == 1 else strides[-1]
    return _layout_of(rows, cols, row_step, col_step)


class _StackPlan:
    """What one ``cblas_sgemm_batch`` call needs besides the operands' addresses, made once per operands'
    shapes and strides (a training step repeats the same few): the sizes, each matrix's layout, the byte
    offset of each matrix from its array's start, and the call's integer arguments, kept in one array."""

    __slots__ = ("batch", "out_shape", "copy_a", "copy_b", "a_offsets", "b_offsets", "out_offsets", "ints",
                 "int_at", "key")

    def __init__(self, a_shape, a_strides, b_shape, b_strides):
        self.batch = batch = np.broadcast_shapes(a_shape[:-2], b_shape[:-2])
        m, k = a_shape[-2:]
        n = b_shape[-1]
        self.out_shape = batch + (m, n)
        a_lay, b_lay = _stack_layout(a_shape, a_strides), _stack_layout(b_shape, b_strides)
        self.copy_a, self.copy_b = a_lay is None, b_lay is None  # (copied C-ordered, once per call)
        if self.copy_a:
            a_strides = _c_strides(a_shape, 4)
            a_lay = _stack_layout(a_shape, a_strides)
        if self.copy_b:
            b_strides = _c_strides(b_shape, 4)
            b_lay = _stack_layout(b_shape, b_strides)
        self.a_offsets = _offsets(a_shape, a_strides, batch)
        self.b_offsets = _offsets(b_shape, b_strides, batch)
        self.out_offsets = _offsets(self.out_shape, _c_strides(self.out_shape, 4), batch)
        (ta, lda), (tb, ldb) = a_lay, b_lay
        self.ints = np.array([ta, tb, m, n, k, lda, ldb, max(n, 1), math.prod(batch)], np.intc)
        at, step = self.ints.ctypes.data, self.ints.itemsize
        self.int_at = [at + j * step for j in range(9)]  # the address of each (the array lives as long as the plan)
        # what decides the call's speed, for the MKL-or-NumPy choice (``_quicker``): the stack's length rounded
        # up to a power of two, each product's sizes, and each operand's matrix layout (None: copied first)
        self.key = ("stack", 1 << (math.prod(batch) - 1).bit_length(), m, k, n,
                    None if self.copy_a else a_lay, None if self.copy_b else b_lay)


_plans: dict[tuple, _StackPlan] = {}
_PLANS_KEPT = 256  # plans past this many are dropped and made again (a run whose shapes keep changing)


def _plan(a: np.ndarray, b: np.ndarray) -> _StackPlan:
    """The plan for ``a @ b`` (stacks whose batch axes broadcast), made the first time these shapes and strides
    are seen."""
    key = (a.shape, a.strides, b.shape, b.strides)
    plan = _plans.get(key)
    if plan is None:
        if len(_plans) >= _PLANS_KEPT:
            _plans.clear()
        plan = _plans[key] = _StackPlan(*key)
    return plan


_ALPHA_BETA = np.array([1.0, 0.0], _F32)  # every stack is out = 1 * a @ b + 0 * out
_ALPHA_AT, _BETA_AT = _ALPHA_BETA.ctypes.data, _ALPHA_BETA.ctypes.data + 4


def gemm_batch(a: np.ndarray, b: np.ndarray, plan: _StackPlan | None = None) -> np.ndarray:
    """``a @ b`` for float32 stacks a (..., M, K), b (..., K, N) whose batch axes broadcast, as one
    ``cblas_sgemm_batch`` call over the stack; the result (batch..., M, N) is C-ordered. Each matrix is
    passed by its address: its array's start plus the offset the plan (``_plan(a, b)``) holds for it."""
    if plan is None:
        plan = _plan(a, b)
    out = np.empty(plan.out_shape, _F32)
    count, m, n, k = plan.ints[8], plan.ints[2], plan.ints[3], plan.ints[4]
    if count == 0 or m == 0 or n == 0:
        return out
    if k == 0:
        out[...] = 0
        return out
    if plan.copy_a:
        a = np.ascontiguousarray(a)
    if plan.copy_b:
        b = np.ascontiguousarray(b)
    a_at = plan.a_offsets + a.ctypes.data
    b_at = plan.b_offsets + b.ctypes.data
    out_at = plan.out_offsets + out.ctypes.data
    i = plan.int_at
    _lib.cblas_sgemm_batch(_ROW_MAJOR, i[0], i[1], i[2], i[3], i[4], _ALPHA_AT, a_at.ctypes.data, i[5],
                           b_at.ctypes.data, i[6], _BETA_AT, out_at.ctypes.data, i[7], 1, i[8])
    return out


def _takes_batch(a: np.ndarray, b: np.ndarray) -> bool:
    """float32 stacks (..., M, K) @ (..., K, N), b with batch axes of its own, whose whole work repays a ctypes
    call: attention's products of every head at once."""
    if a.dtype != _F32 or b.dtype != _F32 or a.ndim < 2 or b.ndim < 3 or a.shape[-1] != b.shape[-2]:
        return False
    try:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        return False
    return math.prod(batch) * a.shape[-2] * a.shape[-1] * b.shape[-1] >= _SMALL


def _takes_matmul(a: np.ndarray, b: np.ndarray) -> bool:
    """float32 (..., M, K) @ (K, N), big enough to repay a ctypes call: a's rows stacked make one product.
    (A b with batch axes of its own is a stack of products: ``_takes_batch``.)"""
    if a.dtype != _F32 or b.dtype != _F32 or a.ndim < 2 or b.ndim != 2 or b.shape[0] != a.shape[-1]:
        return False
    return math.prod(a.shape[:-1]) * a.shape[-1] * b.shape[1] >= _SMALL


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` by MKL, for what ``_takes_matmul``: the rows of a stacked into one product."""
    rows = a.reshape(math.prod(a.shape[:-1]), a.shape[-1])  # a view when a's rows are contiguous
    return gemm(rows, b).reshape(a.shape[:-1] + b.shape[1:])


def _takes_linear(x: np.ndarray, weight: np.ndarray, bias) -> bool:
    """float32 x (..., in), weight (out, in), bias (out,) or None, big enough to repay a ctypes call."""
    if x.dtype != _F32 or weight.dtype != _F32 or weight.ndim != 2 or x.ndim < 1 or x.shape[-1] != weight.shape[1]:
        return False
    if bias is not None and (not isinstance(bias, np.ndarray) or bias.dtype != _F32 or bias.shape != weight.shape[:1]):
        return False
    return math.prod(x.shape[:-1]) * x.shape[-1] * weight.shape[0] >= _SMALL


def linear(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    """``x @ weight.T + bias`` by MKL, for what ``_takes_linear``: the product, then the bias added by a second
    GEMM, the rank-1 product ones (rows, 1) @ bias (1, out) with beta = 1.

    Why not the bias written into ``out`` first and the product added to it (beta = 1, one GEMM)? That
    pass runs on one core, and each of MKL's other threads then reads its part of ``out`` from that core's
    cache, which cost more than a second GEMM (``benchmarks/README.md`` has the measurements). The rank-1
    GEMM splits ``out`` among the threads as the product did, so each adds the bias where it wrote."""
    n_in, n_out = x.shape[-1], weight.shape[0]
    rows = math.prod(x.shape[:-1])
    out = gemm(x.reshape(rows, n_in), weight.T, np.empty((rows, n_out), _F32))
    if bias is not None and out.size:
        bias = np.ascontiguousarray(bias)
        _lib.cblas_sgemm(_ROW_MAJOR, _NO_TRANS, _NO_TRANS, rows, n_out, 1, 1.0, _ones(rows, _F32).ctypes.data, 1,
                         bias.ctypes.data, n_out, 1.0, out.ctypes.data, n_out)
    return out.reshape(x.shape[:-1] + (n_out,))


# --------------------------------------------------------------------------------------
# Which path each product takes: measured, once per shape, the first time it is seen
# --------------------------------------------------------------------------------------

TRIES = 3  # timed runs of each path when a shape is first seen, after one untimed each; the lower median wins
chosen: dict[tuple, str] = {}  # shape key -> "mkl" | "numpy", at the thread count in force (``minigrad.backend()``)
_chosen_at: dict[int, dict[tuple, str]] = {}  # thread count -> its choices (``use_threads``)


def _key(name: str, a: np.ndarray, b: np.ndarray, bias) -> tuple:
    """What decides a product's speed: its sizes (the rows rounded up to a power of two, so that a growing
    sequence is measured a few times, not at every length), the operands' layouts, and a bias or not."""
    rows = math.prod(a.shape[:-1])
    a_layout = _layout(a) if a.ndim == 2 else a.flags.c_contiguous
    b_layout = _layout(b if name == "matmul" else b.T)
    n = b.shape[1] if name == "matmul" else b.shape[0]
    return name, 1 << (rows - 1).bit_length(), a.shape[-1], n, a_layout, b_layout, bias is not None


def shape_text(key: tuple) -> str:
    """A shape key in words, for ``minigrad.backend()``: "linear (<=1024, 128) [C] @ weight.T (128, 512) [F] + bias"
    (rows up to 1024; C: rows contiguous, F: columns contiguous, strided: copied first)."""
    if key[0] == "stack":
        _, count, m, k, n, a_layout, b_layout = key
        a_word, b_word = (("C" if lay[0] == _NO_TRANS else "F") if lay else "strided" for lay in (a_layout, b_layout))
        return f"matmul stack (<={count} x ({m}, {k})) [{a_word}] @ ({k}, {n}) [{b_word}]"
    name, rows, k, n, a_layout, b_layout, bias = key
    a_word, b_word = (("C" if lay[0] == _NO_TRANS else "F") if isinstance(lay, tuple) else "C" if lay else "strided"
                      for lay in (a_layout, b_layout))
    b_name = "b" if name == "matmul" else "weight.T"
    return f"{name} (<={rows}, {k}) [{a_word}] @ {b_name} ({k}, {n}) [{b_word}]{' + bias' * bias}"


def _quicker(key: tuple, on_mkl, on_numpy):
    """``on_mkl()`` or ``on_numpy()``, whichever was measured quicker for ``key``.

    The first time a shape is seen, each path runs once untimed (a first call pays for buffers and
    code paths set up once), then ``TRIES`` times each, alternately, timed; the lower median wins,
    and the chosen path's result is returned, so that from its first call on a shape has one
    rounding (a run resumed from a checkpoint then computes what the uninterrupted run did).
    """
    choice = chosen.get(key)
    if choice == "numpy":
        return on_numpy()
    if choice == "mkl":
        return on_mkl()
    times, out = {"mkl": [], "numpy": []}, {}
    on_mkl(), on_numpy()
    for _ in range(TRIES):
        for name, call in (("mkl", on_mkl), ("numpy", on_numpy)):
            start = time.perf_counter()
            out[name] = call()
            times[name].append(time.perf_counter() - start)
    chosen[key] = min(times, key=lambda path: sorted(times[path])[TRIES // 2])
    return out[chosen[key]]


def use_threads(threads: int, trial: bool = False) -> None:
    """The thread count changed (``runtime``): which path is quicker depends on it, so each count keeps choices
    of its own. A count seen before gets its choices back; a new one times each shape again at its next call.

    ``trial``: the thread policy is trying the count for a step or two (``runtime.ThreadTuner``). A count with
    no choices yet then borrows a copy of the ones in force instead of timing every shape: beside busy
    processes each timed call of a 2-thread product can wait a time slice, and the trial would measure
    that, not the step. The copy is dropped; the count the policy keeps times its shapes afterwards."""
    global chosen
    if trial and threads not in _chosen_at:
        chosen = dict(chosen)
        return
    chosen = _chosen_at.setdefault(threads, {})


def install(kernels: dict) -> None:
    """Make MKL's products the ``.compiled`` and ``.active`` forms of the matmul and linear kernels: for each
    shape MKL can take (one product, or a stack), whichever of MKL and NumPy's matmul was measured quicker the
    first time it was seen."""
    numpy_matmul, numpy_linear = kernels["matmul"].fast, kernels["linear"].fast

    def matmul_form(a, b):
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)):
            return numpy_matmul(a, b)
        if _takes_matmul(a, b):
            return _quicker(_key("matmul", a, b, None), lambda: matmul(a, b), lambda: numpy_matmul(a, b))
        if _takes_batch(a, b):
            plan = _plan(a, b)
            return _quicker(plan.key, lambda: gemm_batch(a, b, plan), lambda: numpy_matmul(a, b))
        return numpy_matmul(a, b)

    def linear_form(x, weight, bias=None):
        bias_args = () if bias is None else (bias,)
        if not _takes_linear(x, weight, bias):
            return numpy_linear(x, weight, *bias_args)
        return _quicker(_key("linear", x, weight, bias), lambda: linear(x, weight, bias),
                        lambda: numpy_linear(x, weight, *bias_args))

    for name, form in (("matmul", matmul_form), ("linear", linear_form)):
        form.__name__ = form.__qualname__ = name
        form.__doc__ = (f"{name} by MKL's sgemm or NumPy's matmul, whichever was measured quicker for the shape "
                        f"(see {__name__}); NumPy's for what MKL does not take.")
        form.backend = "mkl"
        kernels[name].compiled = kernels[name].active = form
