"""The [fast] backend's matrix products: Intel MKL's ``cblas_sgemm``, called through ctypes.

Loaded by ``backend.py`` only where the PyPI ``mkl`` wheel is installed
(x86-64 Linux: ``pip install -e '.[fast]'``). It is the BLAS PyTorch's CPU
build uses, so a product costs here what it costs there.

One call does the work:

* ``cblas_sgemm``: one product C = alpha A B + beta C. Either operand may be
  transposed in memory (a ``W.T`` view, a column-major array): MKL reads it
  as it lies, where NumPy would copy it first. A linear layer writes its
  bias into C first and asks for beta = 1, so the bias is added inside the
  GEMM instead of by a pass of its own.

Attention's stacks of small per-head products stay with NumPy's batched
matmul (what each path costs is in ``benchmarks/README.md``). Only float32 is
sent to MKL (what training uses); everything else, and products too small to
repay a ctypes call, go to NumPy's matmul."""

from __future__ import annotations

import ctypes
import math

import numpy as np

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
    lib.MKL_Get_Max_Threads()  # loads MKL's threading layer (and libgomp) now, where thread limits can see it
    _lib = lib


def _layout(m: np.ndarray):
    """(transpose flag, leading dimension) for MKL to read the 2-D view ``m`` in place, or None to copy it."""
    rows, cols = m.shape
    s0, s1 = m.strides
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
    if k == 0:
        out *= beta
        return out
    a, ta, lda = _readable(a)
    b, tb, ldb = _readable(b)
    _lib.cblas_sgemm(_ROW_MAJOR, ta, tb, m, n, k, alpha, a.ctypes.data, lda, b.ctypes.data, ldb, beta,
                     out.ctypes.data, max(n, 1))
    return out


def matmul(a: np.ndarray, b: np.ndarray):
    """``a @ b`` by MKL for float32 products big enough to repay it; None: not taken (NumPy does it)."""
    if a.dtype != _F32 or b.dtype != _F32 or a.ndim < 2 or b.ndim < 2:
        return None
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    if b.shape[-2] != k or m * n * k < _SMALL:
        return None
    if b.ndim == 2:  # (..., M, K) @ (K, N): the rows stacked into one product
        rows = a.reshape(math.prod(a.shape[:-1]), k)  # a view when a's rows are contiguous
        return gemm(rows, b).reshape(a.shape[:-1] + (n,))
    return None  # stacks of small products (attention's heads): NumPy's batched matmul


def linear(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None):
    """``x @ weight.T + bias`` with the bias inside the GEMM (beta = 1); None: not taken."""
    if x.dtype != _F32 or weight.dtype != _F32 or (bias is not None and bias.dtype != _F32) or weight.ndim != 2:
        return None
    n_in, n_out = x.shape[-1], weight.shape[0]
    rows = math.prod(x.shape[:-1])
    if rows * n_in * n_out < _SMALL or bias is not None and bias.shape != (n_out,):
        return None
    out = np.empty((rows, n_out), _F32)
    if bias is not None:
        out[...] = bias
    gemm(x.reshape(rows, n_in), weight.T, out, beta=0.0 if bias is None else 1.0)
    return out.reshape(x.shape[:-1] + (n_out,))


def install(kernels: dict) -> None:
    """Make MKL's products the ``.compiled`` and ``.active`` forms of the matmul and linear kernels."""
    numpy_matmul, numpy_linear = kernels["matmul"].fast, kernels["linear"].fast

    def matmul_form(a, b):
        out = matmul(a, b) if isinstance(a, np.ndarray) and isinstance(b, np.ndarray) else None
        return numpy_matmul(a, b) if out is None else out

    def linear_form(x, weight, bias=None):
        out = linear(x, weight, bias)
        return numpy_linear(x, weight, *(() if bias is None else (bias,))) if out is None else out

    for name, form in (("matmul", matmul_form), ("linear", linear_form)):
        form.__name__ = form.__qualname__ = name
        form.__doc__ = f"{name} by MKL's sgemm for float32 products big enough (see {__name__}); else NumPy's."
        form.backend = "mkl"
        kernels[name].compiled = kernels[name].active = form
