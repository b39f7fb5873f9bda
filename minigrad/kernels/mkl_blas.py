"""The [fast] backend's matrix products: Intel MKL's ``cblas_sgemm`` and ``cblas_sgemm_batch``.

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

Both are called from numba-compiled code (``_sgemm``, ``_sgemm_batch``): the
products of a small model's step take tens of microseconds each, and a
ctypes call whose arguments Python gathers costs a third of that
(``benchmarks/README.md``). What each call needs besides the operands'
addresses (sizes, layouts, leading dimensions) is worked out once per
operands' shapes and strides: a plan (``_ProductPlan``, ``_StackPlan``).

Only float32 is sent to MKL (what training uses); everything else, and
products too small to repay the call, go to NumPy's matmul. Of the rest,
each shape goes to whichever of MKL and NumPy's matmul was the quicker when it
was first seen: both are timed then (``_quicker``), since which BLAS wins
depends on the CPU, the shape, the layouts and the threads, not on a rule that
holds everywhere."""

from __future__ import annotations

import ctypes
import math
import time

import llvmlite.binding as llvm
import numba
import numpy as np
from numba.core import types

from .numpy_forms import _ones  # (a cached vector of ones: the rank-1 GEMM's column)

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
_SMALL = 32 * 32 * 32  # m * n * k below this: NumPy's matmul (the call would cost more than it saves)
_F32 = np.dtype(np.float32)

_lib = None  # the loaded libmkl_rt (held here: the compiled callers call into it)

# MKL's two functions as compiled code calls them: by names of our own, which ``load`` gives their addresses in
# LLVM's symbol table. (Named, not embedded as addresses, so numba can cache the compiled callers on disk.)
_i, _f, _p = types.intc, types.float32, types.uintp
_SGEMM = types.ExternalFunction("minigrad_mkl_cblas_sgemm",
                                types.void(_i, _i, _i, _i, _i, _i, _f, _p, _i, _p, _i, _f, _p, _i))
_SGEMM_BATCH = types.ExternalFunction("minigrad_mkl_cblas_sgemm_batch",
                                      types.void(_i, _p, _p, _p, _p, _p, _p, _p, _p, _p, _p, _p, _p, _p, _i, _p))


@numba.njit(cache=True, nogil=True)
def _sgemm(a, b, out, ints, alpha, beta):
    """out = alpha a @ b + beta out, by ``cblas_sgemm``; ``ints``: (transa, transb, m, n, k, lda, ldb, ldc)."""
    _SGEMM(_ROW_MAJOR, ints[0], ints[1], ints[2], ints[3], ints[4], alpha, a.ctypes.data, ints[5], b.ctypes.data,
           ints[6], beta, out.ctypes.data, ints[7])


@numba.njit(cache=True, nogil=True)
def _sgemm_batch(a_base, b_base, out_base, a_offsets, b_offsets, out_offsets, ints, alpha_beta, pointers):
    """A stack of products by one ``cblas_sgemm_batch`` call: matrix j of each operand starts ``offsets[j]``
    bytes after its base address; ``ints``: (transa, transb, m, n, k, lda, ldb, ldc, count), each passed by
    its address, as the call takes one array of each per group (here one group); ``pointers``: (3, count),
    scratch for the three tables of matrix addresses."""
    count = a_offsets.shape[0]
    for j in range(count):
        pointers[0, j] = a_base + a_offsets[j]
        pointers[1, j] = b_base + b_offsets[j]
        pointers[2, j] = out_base + out_offsets[j]
    at, step = ints.ctypes.data, ints.itemsize
    _SGEMM_BATCH(_ROW_MAJOR, at, at + step, at + 2 * step, at + 3 * step, at + 4 * step, alpha_beta.ctypes.data,
                 pointers[0].ctypes.data, at + 5 * step, pointers[1].ctypes.data, at + 6 * step,
                 alpha_beta.ctypes.data + alpha_beta.itemsize, pointers[2].ctypes.data, at + 7 * step, 1,
                 at + 8 * step)


def load(path: str) -> None:
    """Load libmkl_rt from ``path``, name its two functions for the compiled callers, and compile those (or load
    them from numba's cache) for every operand layout, so that no call compiles anything."""
    global _lib
    lib = ctypes.CDLL(path)
    for name in ("cblas_sgemm", "cblas_sgemm_batch"):
        llvm.add_symbol("minigrad_mkl_" + name, ctypes.cast(getattr(lib, name), ctypes.c_void_p).value)
    ints = types.Array(types.intc, 1, "A")
    operand = types.Array(types.float32, 2, "A", readonly=True)  # (read-only arrays, such as the cached vector of
    # ones, and writable ones alike: numba passes a writable array where a read-only one is declared)
    _sgemm.compile((operand, operand, types.Array(types.float32, 2, "A"), ints, types.float32, types.float32))
    offsets = types.Array(types.int64, 1, "A")
    _sgemm_batch.compile((types.uintp, types.uintp, types.uintp, offsets, offsets, offsets, ints,
                          types.Array(types.float32, 1, "A"), types.Array(types.uintp, 2, "A")))
    for caller in (_sgemm, _sgemm_batch):
        caller.disable_compile()  # (another layout is converted to "A", not compiled again)
    lib.MKL_Get_Max_Threads.restype = ctypes.c_int
    lib.MKL_Get_Max_Threads()  # loads MKL's threading layer (and libgomp) now, where thread limits can see it
    _lib = lib


def _call_sgemm(a: np.ndarray, b: np.ndarray, out: np.ndarray, ints: np.ndarray, alpha: float = 1.0,
                beta: float = 0.0) -> None:
    """``_sgemm`` on 2-D float32 operands MKL reads as they lie (``ints`` holds their layouts). Its compiled
    forms take aligned arrays; a misaligned operand (a view at an odd byte offset) is copied."""
    try:
        _sgemm(a, b, out, ints, alpha, beta)
    except TypeError:  # (numba: no compiled form for these argument types)
        if a.flags.aligned and b.flags.aligned:
            raise
        a, ta, lda = _readable(np.array(a))
        b, tb, ldb = _readable(np.array(b))
        ints = ints.copy()
        ints[[0, 5]], ints[[1, 6]] = (ta, lda), (tb, ldb)
        _sgemm(a, b, out, ints, alpha, beta)


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
    """alpha * a @ b (+ beta * out) for 2-D float32 a (M, K), b (K, N); ``out`` (M, N) C-ordered. (Layouts
    found at each call: for any operands. The kernels' products go through a plan: ``matmul``, ``linear``.)"""
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
    _call_sgemm(a, b, out, np.array([ta, tb, m, n, k, lda, ldb, max(n, 1)], np.intc), alpha, beta)
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

    __slots__ = ("batch", "out_shape", "copy_a", "copy_b", "a_offsets", "b_offsets", "out_offsets", "ints", "key")

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
        # what decides the call's speed, for the MKL-or-NumPy choice (``_quicker``): the stack's length rounded
        # up to a power of two, each product's sizes, and each operand's matrix layout (None: copied first)
        self.key = ("stack", 1 << (math.prod(batch) - 1).bit_length(), m, k, n,
                    None if self.copy_a else a_lay, None if self.copy_b else b_lay)


_ALPHA_BETA = np.array([1.0, 0.0], _F32)  # every stack is out = 1 * a @ b + 0 * out


def gemm_batch(a: np.ndarray, b: np.ndarray, plan: _StackPlan | None = None) -> np.ndarray:
    """``a @ b`` for float32 stacks a (..., M, K), b (..., K, N) whose batch axes broadcast, as one
    ``cblas_sgemm_batch`` call over the stack; the result (batch..., M, N) is C-ordered. Each matrix is
    passed by its address: its array's start plus the offset the plan holds for it (the kernel form's plans
    are kept: ``_form_plan``)."""
    if plan is None:
        plan = _StackPlan(a.shape, a.strides, b.shape, b.strides)
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
    _sgemm_batch(a.ctypes.data, b.ctypes.data, out.ctypes.data, plan.a_offsets, plan.b_offsets, plan.out_offsets,
                 plan.ints, _ALPHA_BETA, np.empty((3, count), np.uintp))
    return out


def _takes_batch(a: np.ndarray, b: np.ndarray) -> bool:
    """float32 stacks (..., M, K) @ (..., K, N), b with batch axes of its own, whose whole work repays the
    call: attention's products of every head at once."""
    if a.dtype != _F32 or b.dtype != _F32 or a.ndim < 2 or b.ndim < 3 or a.shape[-1] != b.shape[-2]:
        return False
    try:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        return False
    return math.prod(batch) * a.shape[-2] * a.shape[-1] * b.shape[-1] >= _SMALL


def _takes_matmul(a: np.ndarray, b: np.ndarray) -> bool:
    """float32 (..., M, K) @ (K, N), big enough to repay the call: a's rows stacked make one product.
    (A b with batch axes of its own is a stack of products: ``_takes_batch``.)"""
    if a.dtype != _F32 or b.dtype != _F32 or a.ndim < 2 or b.ndim != 2 or b.shape[0] != a.shape[-1]:
        return False
    return math.prod(a.shape[:-1]) * a.shape[-1] * b.shape[1] >= _SMALL


def _takes_linear(x: np.ndarray, weight: np.ndarray, bias) -> bool:
    """float32 x (..., in), weight (out, in), bias (out,) or None, big enough to repay the call."""
    if x.dtype != _F32 or weight.dtype != _F32 or weight.ndim != 2 or x.ndim < 1 or x.shape[-1] != weight.shape[1]:
        return False
    if bias is not None and (not isinstance(bias, np.ndarray) or bias.dtype != _F32 or bias.shape != weight.shape[:1]):
        return False
    return math.prod(x.shape[:-1]) * x.shape[-1] * weight.shape[0] >= _SMALL


class _ProductPlan:
    """What one ``cblas_sgemm`` product (``matmul``: a @ b, or ``linear``: x @ weight.T + bias) needs besides the
    operands' addresses, made once per operands' shapes and strides: a's rows stacked into one (rows, K)
    matrix, each operand's layout (or that it is copied first), the call's integer arguments, and, for a
    bias, those of the rank-1 GEMM that adds it. ``key``: what the MKL-or-NumPy choice is kept under."""

    __slots__ = ("rows", "out_shape", "copy_a", "copy_b", "ints", "bias_ints", "empty", "key")

    def __init__(self, name: str, a: np.ndarray, b: np.ndarray, bias):
        k = a.shape[-1]
        rows = math.prod(a.shape[:-1])
        b_matrix = b if name == "matmul" else b.T  # (K, N)
        n = b_matrix.shape[1]
        self.rows, self.out_shape = (rows, k), a.shape[:-1] + (n,)
        self.empty = rows == 0 or n == 0 or k == 0  # (``gemm`` writes what an empty product is)
        a_layout, b_layout = _layout(a.reshape(self.rows)), _layout(b_matrix)
        self.copy_a, self.copy_b = a_layout is None, b_layout is None
        if self.copy_a:  # (copied C-ordered at each call)
            a_layout = _layout_of(rows, k, 4 * max(k, 1), 4)
        if self.copy_b:
            b_layout = _layout_of(k, n, 4 * max(n, 1), 4)
        (ta, lda), (tb, ldb) = a_layout, b_layout
        self.ints = np.array([ta, tb, rows, n, k, lda, ldb, max(n, 1)], np.intc)
        # the bias: out += ones (rows, 1) @ bias (1, n)
        self.bias_ints = None if bias is None else np.array([_NO_TRANS, _NO_TRANS, rows, n, 1, 1, max(n, 1),
                                                             max(n, 1)], np.intc)
        self.key = _key(name, a, b, bias)


_product_plans: dict[tuple, _ProductPlan | _StackPlan | None] = {}  # signature -> plan, None: NumPy's matmul
_PLANS_KEPT = 256  # plans past this many are dropped and made again (a run whose shapes keep changing)


def _form_plan(name: str, a: np.ndarray, b: np.ndarray, bias=None):
    """The plan for the kernel form ``name`` (matmul, linear) on these operands, or None where MKL does not take
    them, found by the operands' dtypes, shapes and strides (worked out the first time they are seen)."""
    signature = (name, a.dtype, a.shape, a.strides, b.dtype, b.shape, b.strides,
                 None if bias is None else (bias.dtype, bias.shape, bias.strides))
    try:
        return _product_plans[signature]
    except KeyError:
        pass
    if len(_product_plans) >= _PLANS_KEPT:
        _product_plans.clear()
    if name == "linear":
        plan = _ProductPlan(name, a, b, bias) if _takes_linear(a, b, bias) else None
    elif _takes_matmul(a, b):
        plan = _ProductPlan(name, a, b, None)
    else:
        plan = _StackPlan(a.shape, a.strides, b.shape, b.strides) if _takes_batch(a, b) else None
    _product_plans[signature] = plan
    return plan


def matmul(a: np.ndarray, b: np.ndarray, plan: _ProductPlan | None = None) -> np.ndarray:
    """``a @ b`` by MKL, for what ``_takes_matmul``: the rows of a stacked into one product."""
    if plan is None:
        plan = _ProductPlan("matmul", a, b, None)
    rows = a.reshape(plan.rows)  # a view when a's rows are contiguous
    if plan.empty:
        return gemm(rows, b).reshape(plan.out_shape)
    if plan.copy_a:
        rows = np.ascontiguousarray(rows)
    if plan.copy_b:
        b = np.ascontiguousarray(b)
    out = np.empty((plan.rows[0], plan.ints[3]), _F32)
    _call_sgemm(rows, b, out, plan.ints)
    return out.reshape(plan.out_shape)


def linear(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None,
           plan: _ProductPlan | None = None) -> np.ndarray:
    """``x @ weight.T + bias`` by MKL, for what ``_takes_linear``: the product, then the bias added by a second
    GEMM, the rank-1 product ones (rows, 1) @ bias (1, out) with beta = 1.

    Why not the bias written into ``out`` first and the product added to it (beta = 1, one GEMM)? That
    pass runs on one core, and each of MKL's other threads then reads its part of ``out`` from that core's
    cache, which cost more than a second GEMM (``benchmarks/README.md`` has the measurements). The rank-1
    GEMM splits ``out`` among the threads as the product did, so each adds the bias where it wrote."""
    if plan is None:
        plan = _ProductPlan("linear", x, weight, bias)
    rows, n_out = plan.rows[0], plan.ints[3]
    x_rows, weight_t = x.reshape(plan.rows), weight.T
    if plan.empty:
        out = gemm(x_rows, weight_t)
        if bias is not None:
            out += bias
        return out.reshape(plan.out_shape)
    if plan.copy_a:
        x_rows = np.ascontiguousarray(x_rows)
    if plan.copy_b:
        weight_t = np.ascontiguousarray(weight_t)
    out = np.empty((rows, n_out), _F32)
    _call_sgemm(x_rows, weight_t, out, plan.ints)
    if bias is not None:
        _call_sgemm(_ones(rows, _F32).reshape(rows, 1), np.ascontiguousarray(bias).reshape(1, n_out), out,
                    plan.bias_ints, 1.0, 1.0)
    return out.reshape(plan.out_shape)


# --------------------------------------------------------------------------------------
# Which path each product takes: measured, once per shape, the first time it is seen
# --------------------------------------------------------------------------------------

TRIES = 5  # timed runs of each path when a shape is first seen, after one untimed each; the quickest run wins
# shape key -> "mkl" | "numpy" (``minigrad.backend()`` lists them). One table, whatever the thread count: MKL's
# products round unlike NumPy's, so a shape that changed path with the count would change the numbers, and a
# run resumed from a checkpoint would no longer compute what the uninterrupted run did.
chosen: dict[tuple, str] = {}


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
    code paths set up once), then ``TRIES`` times each, alternately, timed, on the thread count in
    force; the path with the quickest run wins for good, and its result is returned, so that from
    its first call on a shape has one rounding. The quickest run, not the median: MKL's first calls
    at a new shape are slow before it settles, a step repeats its products warm, and a run disturbed
    by other work only ever reads slower.
    """
    choice = chosen.get(key)
    if choice == "numpy":
        return on_numpy()
    if choice == "mkl":
        return on_mkl()
    times, out = {"mkl": [], "numpy": []}, {}
    on_mkl(), on_numpy()
    for _ in range(TRIES):
        for name, call in (("numpy", on_numpy), ("mkl", on_mkl)):
            start = time.perf_counter()
            out[name] = call()
            times[name].append(time.perf_counter() - start)
    chosen[key] = min(times, key=lambda path: min(times[path]))
    return out[chosen[key]]


def install(kernels: dict) -> None:
    """Make MKL's products the ``.compiled`` and ``.active`` forms of the matmul and linear kernels: for each
    shape MKL can take (one product, or a stack), whichever of MKL and NumPy's matmul was measured quicker the
    first time it was seen."""
    numpy_matmul, numpy_linear = kernels["matmul"].fast, kernels["linear"].fast

    def matmul_form(a, b):
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)):
            return numpy_matmul(a, b)
        plan = _form_plan("matmul", a, b)
        if plan is None:
            return numpy_matmul(a, b)
        on_mkl = (lambda: gemm_batch(a, b, plan)) if type(plan) is _StackPlan else (lambda: matmul(a, b, plan))
        return _quicker(plan.key, on_mkl, lambda: numpy_matmul(a, b))

    def linear_form(x, weight, bias=None):
        bias_args = () if bias is None else (bias,)
        if not (isinstance(x, np.ndarray) and isinstance(weight, np.ndarray)) or not (
                bias is None or isinstance(bias, np.ndarray)):
            return numpy_linear(x, weight, *bias_args)
        plan = _form_plan("linear", x, weight, bias)
        if plan is None:
            return numpy_linear(x, weight, *bias_args)
        return _quicker(plan.key, lambda: linear(x, weight, bias, plan), lambda: numpy_linear(x, weight, *bias_args))

    for name, form in (("matmul", matmul_form), ("linear", linear_form)):
        form.__name__ = form.__qualname__ = name
        form.__doc__ = (f"{name} by MKL's sgemm or NumPy's matmul, whichever was measured quicker for the shape "
                        f"(see {__name__}); NumPy's for what MKL does not take.")
        form.backend = "mkl"
        kernels[name].compiled = kernels[name].active = form
