"""Every speed kernel against the plain NumPy it states it equals, on generated inputs.

``minigrad/kernels/`` registers each kernel with its plain form (``KERNELS``;
``k.fast`` and ``k.plain``, and ``k.compiled`` from the optional [fast] backend:
every test runs on the NumPy forms and again on the compiled ones, skipped
without the extra). Hypothesis draws the inputs: ranks 0-4 (attention
unbatched too), sizes on both sides of every threshold (BLAS sums from 1024
elements and for rows of 2-4096, ``blockwise``'s block of 65536), float32 and
float64, C-ordered arrays and strided or transposed views, magnitudes from 1e-30
to 1e4, -inf, +inf and NaN, zero-size axes, out-of-range axes, and attention
masks of every kind. A kernel added without a strategy here fails the first test.

The last section runs the ops themselves on arrays large enough to take the
fast paths, against plain NumPy formulas.

Float32 results are compared with the plain form computed in float64, to a
tolerance scaled by the size of the numbers involved. Set
MINIGRAD_HYPOTHESIS_PROFILE=ci for ten times the examples.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import minigrad as mg
from minigrad.kernels import BLOCK, KERNELS
from minigrad.nn import functional as F
from minigrad.ops import OPS

EXAMPLES = 250 if os.environ.get("MINIGRAD_HYPOTHESIS_PROFILE") == "ci" else 25
# Derandomized: the same examples on every run, so a failure here is never a fluke of the draw.
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
FLOATS = st.sampled_from([np.float32, np.float64])
EPS = {np.dtype(np.float32): 2e-7, np.dtype(np.float64): 3e-16}

# Sizes around each threshold: rows of 1 / 2 (BLAS from 2), 4096 / 4097 (and back to NumPy), totals under
# and over 1024 elements, and one past blockwise's block.
SIDES = [0, 1, 2, 3, 5, 8, 17, 64]
BIG_SHAPES = [(16, 64), (4, 4096), (1, 4097), (33, 40), (2, 3, 200), (31, 33), (2, 2, 16, 17), (BLOCK + 3,),
              (2, BLOCK // 2 + 7)]


@st.composite
def shapes(draw, min_dims=0, max_dims=4):
    if draw(st.booleans()):
        big = [s for s in BIG_SHAPES if min_dims <= len(s) <= max_dims]
        if big:
            return draw(st.sampled_from(big))
    ndim = draw(st.integers(min_dims, max_dims))
    return tuple(draw(st.sampled_from(SIDES)) for _ in range(ndim))


@st.composite
def arrays(draw, shape=None, dtype=None, specials=True, positive=False, min_dims=0, max_dims=4):
    """A random array: its shape, dtype, magnitude (1e-30 to 1e4), special values and memory layout drawn."""
    shape = draw(shapes(min_dims, max_dims)) if shape is None else shape
    dtype = draw(FLOATS) if dtype is None else dtype
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    scale = 10.0 ** draw(st.sampled_from([-30, -3, 0, 0, 0, 1, 2, 4]))
    x = rng.standard_normal(shape) * scale
    if positive:
        x = np.abs(x) + scale * 1e-3
    if specials and x.size and draw(st.booleans()):
        flat = x.reshape(-1)
        for value in draw(st.lists(st.sampled_from([np.inf, -np.inf, np.nan, 0.0, -0.0]), min_size=1, max_size=3)):
            flat[rng.integers(flat.size)] = value
    x = np.asarray(x, dtype=dtype)  # (a 0-d array, as ops receive, not a NumPy scalar)
    layout = draw(st.sampled_from(["C", "C", "strided", "transposed"]))
    if layout == "strided" and x.ndim:  # every other element of a twice-as-long array
        wide = np.empty(x.shape[:-1] + (2 * x.shape[-1],), dtype)
        wide[..., ::2] = x
        x = wide[..., ::2]
    elif layout == "transposed" and x.ndim >= 2:  # the same values, laid out column-major
        x = np.ascontiguousarray(x.swapaxes(-1, -2)).swapaxes(-1, -2)
    return x


def reference(plain, *args, **kwargs):
    """The plain form in float64 (float arrays upcast): the truth float32 results are held to."""
    return plain(*(a.astype(np.float64) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else a for a in args),
                 **kwargs)


def assert_close(got, expected, dtype, scale=1.0, ulps=64, like=None):
    """Equal non-finite positions and values; finite values within ``ulps`` of dtype's epsilon times ``scale``.

    ``like``: the plain form's result in ``dtype`` itself, when it can overflow where the float64
    reference does not (exp in float32): then NaN and inf must sit where it has them.
    """
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape
    assert got.dtype == np.dtype(dtype), (got.dtype, dtype)
    if like is not None:
        like = np.asarray(like)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(like))
        np.testing.assert_array_equal(np.isinf(got), np.isinf(like))
        both = np.isfinite(like) & np.isfinite(expected)
        got, expected, scale = got[both], expected[both], np.broadcast_to(scale, both.shape)[both]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    finite = np.isfinite(expected)
    np.testing.assert_array_equal(got[~finite & ~np.isnan(expected)], expected[~finite & ~np.isnan(expected)])
    assert np.isfinite(got[finite]).all()
    tol = ulps * EPS[np.dtype(dtype)]
    allowed = tol * np.abs(expected) + tol * np.broadcast_to(scale, expected.shape) + 1e-300  # elementwise
    error = np.zeros(expected.shape)
    error[finite] = np.abs(got[finite].astype(np.float64) - expected[finite])  # (inf - inf elsewhere: NaN, warned)
    bad = finite & ~(error <= allowed)
    assert not bad.any(), (f"{bad.sum()} of {bad.size} values off: got {got[bad][:3]}, expected {expected[bad][:3]}, "
                           f"allowed {allowed[bad][:3]}")


def same_error(fast, plain, *args, **kwargs):
    """Both forms raise the same kind of error, or neither does: then return both results."""
    results = []
    for fn in (fast, plain):
        try:
            with np.errstate(all="ignore"):
                results.append(fn(*args, **kwargs))
        except Exception as err:  # noqa: BLE001  (compared below)
            results.append(err)
    a, b = results
    if isinstance(a, Exception) or isinstance(b, Exception):
        lookup_errors = ValueError | IndexError  # (NumPy's AxisError is both)
        assert type(a) is type(b) or (isinstance(a, lookup_errors) and isinstance(b, lookup_errors)), (a, b)
        return None
    return a, b


def fast_plain_reference(name, *args):
    """Kernel ``name`` run fast and plain (both must fail alike, then None), and its plain form in float64."""
    pair = same_error(KERNELS[name].fast, KERNELS[name].plain, *args)
    if pair is None:
        return None
    with np.errstate(all="ignore"):
        return (*pair, reference(KERNELS[name].plain, *args))


TESTED = set()


def covers(*names):
    """Mark a test as the differential test of these kernels (checked against KERNELS at the end)."""
    TESTED.update(names)

    def mark(fn):
        fn.covers = names
        return fn

    return mark


@pytest.fixture(params=["numpy", "compiled"], autouse=True)
def form(request, monkeypatch):
    """Each kernel test runs twice: on the NumPy forms, and on the [fast] backend's compiled forms.

    The compiled run puts each covered kernel's compiled form where the test
    reads ``.fast``; it is skipped when none of them has one (no [fast] extra,
    MINIGRAD_BACKEND=numpy, or a kernel the backend leaves to NumPy).
    """
    if request.param == "compiled":
        names = getattr(request.function, "covers", ())
        if not names:
            pytest.skip("an op-level test runs once, on whichever forms the backend chose (mg.backend())")
        compiled = [name for name in names if KERNELS[name].compiled is not None]
        if not compiled:
            why = mg.backend()["why"] if mg.backend()["backend"] == "numpy" else "no compiled form"
            pytest.skip(f"compiled forms of {', '.join(names) or 'no kernel'}: {why}")
        for name in compiled:
            monkeypatch.setattr(KERNELS[name], "fast", KERNELS[name].compiled)
        from minigrad.kernels import numba_forms  # (loaded: a compiled form exists)

        # Every drawn input through the compiled loops, small ones too, and every product MKL takes through MKL
        # (not the path measured quicker): the threshold and the measurement have tests of their own.
        monkeypatch.setattr(numba_forms, "NUMPY_BELOW", 0)
        monkeypatch.setattr(numba_forms, "NUMPY_BELOW_FOR", {})
        if KERNELS["matmul"].compiled is not None:
            from minigrad.kernels import mkl_blas

            monkeypatch.setattr(mkl_blas, "chosen", _AlwaysMKL())
    return request.param


class _AlwaysMKL(dict):
    def get(self, key, default=None):
        return "mkl"


# --------------------------------------------------------------------------------------
# Elementwise and reductions
# --------------------------------------------------------------------------------------


@covers("power")
@SETTINGS
@given(x=arrays(), exponent=st.sampled_from([2, 3, 0.5, -0.5, 1.5, -1, 0, 1]))
def test_power(x, exponent):
    with np.errstate(all="ignore"):
        got = KERNELS["power"].fast(x, exponent)
        expected = reference(KERNELS["power"].plain, x, exponent)
    assert_close(got, expected.astype(x.dtype) if x.dtype == np.float32 else expected, x.dtype,
                 scale=np.abs(np.where(np.isfinite(expected), expected, 0)), ulps=8)


@covers("add")
@SETTINGS
@given(data=st.data(), a=arrays())
def test_add(data, a):
    """Same-shaped arrays (the compiled loop's case) and broadcasts, scalars, other dtypes (NumPy's): each sum
    is exactly the plain one, its dtype and shape too (one rounding of a + b either way)."""
    kind = data.draw(st.sampled_from(["same", "same", "broadcast", "scalar", "other dtype"]))
    if kind == "same":
        b = data.draw(arrays(shape=a.shape, dtype=a.dtype))
    elif kind == "broadcast":
        b = data.draw(arrays(shape=a.shape[-1:] if a.ndim else (3,), dtype=a.dtype))
    elif kind == "scalar":
        b = np.asarray(data.draw(st.floats(-4, 4)), a.dtype)
    else:
        b = data.draw(arrays(shape=a.shape, dtype=np.float64 if a.dtype == np.float32 else np.float32))
    with np.errstate(all="ignore"):
        got, expected = KERNELS["add"].fast(a, b), KERNELS["add"].plain(a, b)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


def _axis(draw, ndim):
    """An axis argument: None, one axis (negative too), a tuple of axes, or (sometimes) one out of range."""
    choice = draw(st.sampled_from(["none", "one", "one", "tuple", "bad"]))
    if choice == "none" or ndim == 0:
        return None if choice != "bad" else 0
    if choice == "one":
        return draw(st.integers(-ndim, ndim - 1))
    if choice == "tuple":
        return tuple(sorted(set(draw(st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim)))))
    return draw(st.sampled_from([ndim, -ndim - 1, ndim + 2]))


@covers("row_sum", "sum", "mean")
@pytest.mark.filterwarnings("ignore:Mean of empty slice")  # (a mean over an empty axis: NumPy's NaN, as intended)
@SETTINGS
@given(data=st.data(), x=arrays(), keepdims=st.booleans(), name=st.sampled_from(["sum", "mean", "row_sum"]))
def test_sums(data, x, keepdims, name):
    k = KERNELS[name]
    if name == "row_sum":
        args = (x, keepdims)
        axis = -1
    else:
        axis = _axis(data.draw, x.ndim)
        args = (x, axis, keepdims)
    pair = same_error(k.fast, k.plain, *args)
    if pair is None:
        return
    got, _ = pair
    with np.errstate(all="ignore"):
        expected = reference(k.plain, *args)
        scale = np.abs(x.astype(np.float64)).sum(axis=axis, keepdims=keepdims) if x.ndim else np.abs(x)
        if name == "mean" and x.size:
            scale = scale / max(1, x.size // max(1, np.asarray(expected).size))
    if x.dtype == np.float32:
        expected = np.asarray(expected).astype(np.float32)
        # float32 sums of huge values overflow where float64's do not: compare only what float32 can hold
    assert_close(got, expected, x.dtype, scale=np.where(np.isfinite(scale), scale, 0), ulps=16)


def test_out_of_range_axes_raise_as_numpy_does():
    x = mg.tensor(np.ones((3, 4), np.float32))
    for method in ("sum", "mean", "max", "var", "softmax", "logsumexp"):
        with pytest.raises((mg.OpError, IndexError), match="out of (bounds|range)"):
            getattr(x, method)(axis=3)
    for axis in (2, -3, (0, 2)):
        with pytest.raises(mg.OpError, match=r"sum: axis (2|-3) is out of bounds"):
            x.sum(axis=axis)
    np.testing.assert_array_equal(x.sum(axis=-2).data, np.full(4, 3.0))  # negative axes still work



@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("value", [0.5, -3.0, np.inf, -np.inf, np.nan])
def test_logsumexp_of_a_zero_d_tensor_takes_the_axes_sum_takes(value, dtype):
    # A 0-d tensor has one value: its logsumexp over dim 0 (or -1, or (0,)) is that value, as PyTorch gives
    # (axis= is PyTorch's alias of dim=); dim 1 is out of range, as in PyTorch.
    for axis in (None, 0, -1, (0,), 1, (-1,)):
        for keepdims in (False, True):
            x = mg.tensor(np.array(value, dtype=dtype), requires_grad=True)
            if axis == 1:
                with pytest.raises(mg.OpError, match="logsumexp: dim 1 is out of range for 0 dims"):
                    x.logsumexp(axis=axis, keepdims=keepdims)
                continue
            out = x.logsumexp(axis=axis, keepdims=keepdims)
            assert out.shape == () and out.dtype == dtype
            np.testing.assert_array_equal(out.data, np.array(value, dtype))
            with np.errstate(invalid="ignore"):  # (d/dx at +inf is exp(inf - inf): NaN, as in PyTorch)
                out.backward()
            expected_grad = {np.inf: np.nan, -np.inf: 0.0}.get(value, np.nan if np.isnan(value) else 1.0)
            np.testing.assert_array_equal(x.grad.data, np.array(expected_grad, dtype))

@covers("row_dot")
@SETTINGS
@given(data=st.data(), shape=shapes(min_dims=1))
def test_row_dot(data, shape):
    a = data.draw(arrays(shape=shape))
    b = data.draw(arrays(shape=shape, dtype=a.dtype))
    with np.errstate(all="ignore"):
        got = KERNELS["row_dot"].fast(a, b)
        expected = reference(KERNELS["row_dot"].plain, a, b).astype(a.dtype)
        scale = (np.abs(a.astype(np.float64)) * np.abs(b.astype(np.float64))).sum(-1, keepdims=True)
    assert_close(got, expected, a.dtype, scale=np.where(np.isfinite(scale), scale, 0), ulps=16)


# --------------------------------------------------------------------------------------
# Matrix products
# --------------------------------------------------------------------------------------


@st.composite
def matmul_operands(draw):
    lead = draw(st.sampled_from([(), (2,), (0,), (3, 2), (2, 1, 3), (1,)]))
    m, k, n = (draw(st.sampled_from([0, 1, 3, 17])) for _ in range(3))
    a_shape = lead + (m, k) if draw(st.booleans()) or not lead else (k,)
    b_shape = draw(st.sampled_from([(k, n), (k,), lead + (k, n)]))
    dtype = draw(FLOATS)
    return draw(arrays(shape=a_shape, dtype=dtype)), draw(arrays(shape=b_shape, dtype=dtype))


def _product_scale(a, b):
    """The size of a product's terms, from the finite entries (a product meeting inf or NaN is not finite)."""
    with np.errstate(all="ignore"):
        a64, b64 = (np.abs(np.nan_to_num(m.astype(np.float64), nan=0, posinf=0, neginf=0)) for m in (a, b))
        scale = (a64.max(initial=0) * b64.max(initial=0)) * (a.shape[-1] if a.ndim else 1)
    return min(scale, np.finfo(np.float64).max)  # a finite tolerance, however large


@covers("matmul")
@SETTINGS
@given(operands=matmul_operands())
def test_matmul(operands):
    a, b = operands
    results = fast_plain_reference("matmul", a, b)
    if results is None:
        return
    got, plain, expected = results
    expected = expected.astype(a.dtype)
    # Both sides run BLAS (or NumPy's loops) on the same numbers: an inf meeting a 0 is NaN in each.
    np.testing.assert_array_equal(np.isnan(got), np.isnan(plain))
    finite = np.isfinite(got) & np.isfinite(expected)
    np.testing.assert_allclose(got[finite], expected[finite], rtol=0,
                               atol=64 * EPS[a.dtype] * _product_scale(a, b) + 1e-300)


@covers("linear")
@SETTINGS
@given(data=st.data(), lead=st.sampled_from([(), (3,), (0,), (2, 5), (2, 0, 3)]),
       n_in=st.sampled_from([0, 1, 4, 33]), n_out=st.sampled_from([0, 1, 5]), with_bias=st.booleans())
def test_linear(data, lead, n_in, n_out, with_bias):
    dtype = data.draw(FLOATS)
    x = data.draw(arrays(shape=lead + (n_in,), dtype=dtype, specials=False))
    weight = data.draw(arrays(shape=(n_out, n_in), dtype=dtype, specials=False))
    bias = (data.draw(arrays(shape=(n_out,), dtype=dtype, specials=False)),) if with_bias else ()
    got = KERNELS["linear"].fast(x, weight, *bias)
    with np.errstate(all="ignore"):
        expected = reference(KERNELS["linear"].plain, x, weight, *bias).astype(dtype)
    scale = _product_scale(x, weight) + (np.abs(bias[0].astype(np.float64)).max(initial=0) if bias else 0)
    assert got.shape == expected.shape == lead + (n_out,) and got.dtype == dtype
    np.testing.assert_allclose(got, expected, rtol=0, atol=64 * EPS[np.dtype(dtype)] * scale + 1e-300)



@pytest.mark.skipif(KERNELS["matmul"].compiled is None, reason="no MKL (the [fast] extra, on x86-64 Linux)")
@SETTINGS
@given(data=st.data(), lead=st.sampled_from([(1,), (37,), (4, 300), (2, 3, 129)]), n_in=st.sampled_from([1, 64, 65]),
       n_out=st.sampled_from([128, 257]), bias_layout=st.sampled_from(["none", "C", "every other"]))
def test_mkls_linear_adds_the_bias_after_the_product(data, lead, n_in, n_out, bias_layout):
    """``mkl_blas.linear`` itself, at sizes MKL takes: the product (beta = 0), then ones @ bias added by a rank-1
    GEMM; a strided bias is copied first. (``test_linear``'s shapes are too small to reach it.)"""
    from minigrad.kernels import mkl_blas

    x = data.draw(arrays(shape=lead + (n_in,), dtype=np.float32, specials=False))
    weight = data.draw(arrays(shape=(n_out, n_in), dtype=np.float32, specials=False))
    bias = None
    if bias_layout != "none":
        bias = data.draw(arrays(shape=(2 * n_out,), dtype=np.float32, specials=False))
        bias = bias[::2] if bias_layout == "every other" else np.ascontiguousarray(bias[:n_out])
    got = mkl_blas.linear(x, weight, bias)
    expected = x.astype(np.float64) @ weight.T.astype(np.float64) + (0 if bias is None else bias.astype(np.float64))
    expected = expected.astype(np.float32)  # (what float32 can hold: products of 1e-30s are 0 there)
    scale = _product_scale(x, weight) + (0 if bias is None else np.abs(bias.astype(np.float64)).max())
    assert got.shape == lead + (n_out,) and got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=0, atol=64 * EPS[np.dtype(np.float32)] * scale + 1e-300)


@pytest.mark.skipif(KERNELS["matmul"].compiled is None, reason="no MKL (the [fast] extra, on x86-64 Linux)")
@SETTINGS
@given(data=st.data(), lead=st.sampled_from([(), (1,), (3,), (2, 5)]), m=st.sampled_from([1, 40, 257]),
       k=st.sampled_from([1, 33, 128]), n=st.sampled_from([1, 64, 300]))
def test_mkls_matmul_reads_every_layout_at_its_sizes(data, lead, m, k, n):
    """``mkl_blas.matmul`` itself (a's rows stacked into one GEMM) at sizes MKL takes, every operand layout the
    arrays strategy draws (C, column-major, every other element), length-1 axes too. (``test_matmul``'s
    shapes are too small to reach it.)"""
    from minigrad.kernels import mkl_blas

    a = data.draw(arrays(shape=lead + (m, k), dtype=np.float32, specials=False))
    b = data.draw(arrays(shape=(k, n), dtype=np.float32, specials=False))
    got = mkl_blas.matmul(a, b)
    expected = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    assert got.shape == lead + (m, n) and got.dtype == np.float32
    atol = 64 * EPS[np.dtype(np.float32)] * _product_scale(a, b) + 1e-300
    np.testing.assert_allclose(got, expected, rtol=0, atol=atol)


@pytest.mark.skipif(KERNELS["matmul"].compiled is None, reason="no MKL (the [fast] extra, on x86-64 Linux)")
def test_mkl_reads_a_matrix_with_an_axis_of_length_one_whatever_its_stride():
    # NumPy calls a (1, 1) view with strides (8, 8) contiguous, so a copy kept the strides MKL refused: gemm
    # raised a TypeError from inside its layout check. An axis of length 1 is now read as packed.
    from minigrad.kernels import mkl_blas

    a = np.arange(2, dtype=np.float32).reshape(1, 2)[:, ::2]  # (1, 1), strides (8, 8)
    b = np.arange(6, dtype=np.float32).reshape(3, 2)[:, ::2].T  # (1, 3), strides (8, 16)
    np.testing.assert_array_equal(mkl_blas.gemm(a, b), a @ b)
    np.testing.assert_array_equal(mkl_blas.gemm(b.T, a), b.T @ a)


@pytest.mark.skipif(KERNELS["matmul"].compiled is None, reason="no MKL (the [fast] extra, on x86-64 Linux)")
def test_mkls_gemm_with_nothing_to_sum_is_zeros_times_beta():
    from minigrad.kernels import mkl_blas

    a, b = np.ones((3, 0), np.float32), np.ones((0, 4), np.float32)
    out = np.full((3, 4), np.nan, np.float32)  # (np.empty may hold NaN: 0 * NaN is NaN, so 0 is written)
    np.testing.assert_array_equal(mkl_blas.gemm(a, b, out), np.zeros((3, 4)))
    out = np.full((3, 4), 2.0, np.float32)
    np.testing.assert_array_equal(mkl_blas.gemm(a, b, out, beta=0.5), np.ones((3, 4)))


@pytest.mark.skipif(KERNELS["matmul"].compiled is None, reason="no MKL (the [fast] extra, on x86-64 Linux)")
def test_each_product_shape_takes_the_path_measured_quicker_the_first_time_it_is_seen(monkeypatch):
    from minigrad.kernels import mkl_blas

    # A fake clock: one tick per reading, plus what each MKL GEMM "costs" for its number of columns.
    clock, mkl_cost, gemms = [0.0], {128: 10.0, 512: -0.5}, []
    monkeypatch.setattr(mkl_blas.time, "perf_counter", lambda: clock.__setitem__(0, clock[0] + 1) or clock[0])

    def timed_gemm(a, b, *args, gemm=mkl_blas._call_sgemm, **kwargs):
        gemms.append(b.shape)
        clock[0] += mkl_cost[b.shape[1]]
        return gemm(a, b, *args, **kwargs)

    monkeypatch.setattr(mkl_blas, "_call_sgemm", timed_gemm)
    monkeypatch.setattr(mkl_blas, "chosen", {})
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1000, 64)).astype(np.float32)
    for n, quicker in ((128, "numpy"), (512, "mkl")):
        b = rng.standard_normal((64, n)).astype(np.float32)
        for form in ("matmul", "linear"):
            operands = (a, b) if form == "matmul" else (a, np.ascontiguousarray(b.T))
            gemms.clear()
            first = KERNELS[form].compiled(*operands)  # measured: each path run once untimed, then TRIES times
            assert len(gemms) == mkl_blas.TRIES + 1
            again = KERNELS[form].compiled(*operands)
            fewer_rows = KERNELS[form].compiled(operands[0][:700], operands[1])  # (<= 1024 rows: the same key)
            assert len(gemms) == mkl_blas.TRIES + 1 + 2 * (quicker == "mkl")
            np.testing.assert_array_equal(first, again)  # the chosen path's numbers from the first call on
            np.testing.assert_allclose(first, a @ b, rtol=1e-4, atol=1e-4)
            np.testing.assert_allclose(fewer_rows, a[:700] @ b, rtol=1e-4, atol=1e-4)
    assert sorted(mkl_blas.chosen.values()) == ["mkl", "mkl", "numpy", "numpy"]
    assert sorted(mg.backend()["gemm_by_shape"].items()) == [
        ("linear (<=1024, 64) [C] @ weight.T (64, 128) [F]", "numpy"),
        ("linear (<=1024, 64) [C] @ weight.T (64, 512) [F]", "mkl"),
        ("matmul (<=1024, 64) [C] @ b (64, 128) [C]", "numpy"),
        ("matmul (<=1024, 64) [C] @ b (64, 512) [C]", "mkl")]


@pytest.mark.skipif(KERNELS["matmul"].compiled is None, reason="no MKL (the [fast] extra, on x86-64 Linux)")
def test_a_product_is_judged_by_its_quickest_run(monkeypatch):
    """MKL's first calls at a new shape are slow (its buffers, its threads), and a step repeats each product
    warm: the choice goes by each path's quickest timed run, not its median, which read those first calls."""
    from minigrad.kernels import mkl_blas

    clock, mkl_costs = [0.0], iter([60.0, 60.0, 60.0, 60.0, 20.0, 20.0])  # the untimed call, then TRIES
    monkeypatch.setattr(mkl_blas.time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(mkl_blas, "chosen", {})
    monkeypatch.setattr(mkl_blas, "TRIES", 5)

    def on_mkl():
        clock[0] += next(mkl_costs)
        return "mkl"

    def on_numpy():
        clock[0] += 40.0
        return "numpy"

    assert mkl_blas._quicker(("a shape",), on_mkl, on_numpy) == "mkl"
    assert mkl_blas.chosen == {("a shape",): "mkl"}


@pytest.mark.skipif(KERNELS["matmul"].compiled is None, reason="no MKL (the [fast] extra, on x86-64 Linux)")
def test_a_product_plan_made_once_serves_every_later_array_of_its_shapes_and_strides():
    """A matmul's or linear layer's call (sizes, layouts, leading dimensions) is worked out once per operands'
    dtypes, shapes and strides; the addresses are each call's own."""
    from minigrad.kernels import mkl_blas

    rng = np.random.default_rng(0)
    weight, bias = rng.standard_normal((96, 64)).astype(np.float32), rng.standard_normal(96).astype(np.float32)
    plans = set()
    for _ in range(3):
        x = rng.standard_normal((4, 50, 128)).astype(np.float32)[..., ::2]  # rows read in place, every other column
        plan = mkl_blas._form_plan("linear", x, weight, bias)
        plans.add(id(plan))
        np.testing.assert_allclose(mkl_blas.linear(x, weight, bias, plan),
                                   x.astype(np.float64) @ weight.T.astype(np.float64) + bias, rtol=1e-5, atol=1e-4)
        plan = mkl_blas._form_plan("matmul", x, weight.T)
        plans.add(id(plan))
        np.testing.assert_allclose(mkl_blas.matmul(x, weight.T, plan), x.astype(np.float64) @ weight.T.astype(
            np.float64), rtol=1e-5, atol=1e-4)
    assert len(plans) == 2
    assert mkl_blas._form_plan("matmul", x.astype(np.float64), weight.T) is None  # float64: NumPy's matmul
    assert mkl_blas._form_plan("linear", x[:1, :1, :2], weight[:, :2], bias) is None  # too small to repay the call


@pytest.mark.skipif(KERNELS["matmul"].compiled is None, reason="no MKL (the [fast] extra, on x86-64 Linux)")
def test_mkl_reads_read_only_and_misaligned_operands():
    """The compiled call takes read-only arrays (the vector of ones a bias is added with, a weight loaded
    read-only); a float32 view at an odd byte offset, which it cannot take, is copied first."""
    from minigrad.kernels import mkl_blas

    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((70, 40)).astype(np.float32), rng.standard_normal((40, 50)).astype(np.float32)
    read_only = a.copy()
    read_only.flags.writeable = False
    raw = np.zeros(a.nbytes + 1, np.uint8)
    misaligned = raw[1:].view(np.float32).reshape(a.shape)  # (starts one byte past an aligned address)
    misaligned[...] = a
    assert not misaligned.flags.aligned
    expected = a.astype(np.float64) @ b.astype(np.float64)
    for operand in (read_only, misaligned, misaligned.T.copy().T):
        for got in (mkl_blas.gemm(operand, b), mkl_blas.matmul(operand, b),
                    mkl_blas.linear(operand, np.ascontiguousarray(b.T), None)):
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(mkl_blas.gemm(b.T, operand.T), expected.T, rtol=1e-5, atol=1e-4)


@pytest.mark.skipif(KERNELS["matmul"].compiled is None, reason="no MKL (the [fast] extra, on x86-64 Linux)")
def test_a_change_of_thread_count_keeps_each_shapes_product_path(monkeypatch):
    # MKL's products round alike on 1 and 2 threads, but not like NumPy's: a shape that switched path with the
    # count would change the numbers, and a resumed run (its thread trial on other steps) would not compute
    # what the uninterrupted run did.
    from threadpoolctl import threadpool_limits

    from minigrad.kernels import mkl_blas

    monkeypatch.setattr(mkl_blas, "chosen", {})
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((64, 96), np.float32), rng.standard_normal((96, 48), np.float32)
    products, paths = [], []
    for threads in (1, 2, 1):
        with threadpool_limits(threads):
            products.append(KERNELS["matmul"].compiled(a, b))
            paths.append(dict(mkl_blas.chosen))
    assert len(paths[0]) == 1 and paths[0] == paths[1] == paths[2]  # timed once, on the first count
    np.testing.assert_array_equal(products[0], products[1])
    mkl_products = []
    for threads in (1, 2):
        with threadpool_limits(threads):
            mkl_products.append(mkl_blas.matmul(a, b))
    np.testing.assert_array_equal(mkl_products[0], mkl_products[1])  # what makes one path per shape enough


@st.composite
def product_stacks(draw, dtypes=FLOATS):
    """Stacks of products as attention makes them, big enough for MKL's batched GEMM: head-split views
    ((B, T, H, D) read as (B, H, T, D)), transposed matrices (k^T, weights^T), broadcast batch axes (one head's
    keys for every head), matrices BLAS cannot read in place (every other column), empty stacks and K = 0."""
    b, h = draw(st.sampled_from([(2, 3), (4, 4), (1, 5), (0, 2)]))  # batch, heads
    m, k, n = (draw(st.sampled_from([1, 7, 32, 33])) for _ in range(3))
    k = draw(st.sampled_from([k, k, 0]))
    dtype = draw(dtypes)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))

    def stack(rows, cols, layout, heads):
        if layout == "head-split":  # (B, rows, H, cols) seen as (B, H, rows, cols)
            return rng.standard_normal((b, rows, heads, cols)).astype(dtype).transpose(0, 2, 1, 3)
        if layout == "transposed":  # each matrix column-major
            return rng.standard_normal((b, heads, cols, rows)).astype(dtype).swapaxes(-1, -2)
        if layout == "every other column":
            return rng.standard_normal((b, heads, rows, 2 * cols)).astype(dtype)[..., ::2]
        return rng.standard_normal((b, heads, rows, cols)).astype(dtype)

    layouts = ["C", "head-split", "transposed", "every other column"]
    a_heads, b_heads = draw(st.sampled_from([(h, h), (h, 1), (1, h)]))
    a = stack(m, k, draw(st.sampled_from(layouts)), a_heads)
    b_ = stack(k, n, draw(st.sampled_from(layouts)), b_heads)
    return a, b_


@covers("matmul")
@SETTINGS
@given(operands=product_stacks())
def test_stacks_of_products(operands):
    a, b = operands
    got = KERNELS["matmul"].fast(a, b)
    expected = reference(KERNELS["matmul"].plain, a, b)
    assert got.shape == expected.shape and got.dtype == a.dtype
    np.testing.assert_allclose(got, expected, rtol=0, atol=64 * EPS[a.dtype] * _product_scale(a, b) + 1e-300)


@pytest.mark.skipif(KERNELS["matmul"].compiled is None, reason="no MKL (the [fast] extra, on x86-64 Linux)")
@SETTINGS
@given(operands=product_stacks(dtypes=st.just(np.float32)))
def test_mkls_batched_gemm_reads_every_stack_layout(operands):
    """The batched GEMM itself, whichever path the shape was measured quicker on."""
    from minigrad.kernels import mkl_blas

    a, b = operands
    got = mkl_blas.gemm_batch(a, b)
    expected = a.astype(np.float64) @ b.astype(np.float64)
    assert got.shape == expected.shape and got.flags.c_contiguous
    np.testing.assert_allclose(got, expected, rtol=0, atol=64 * EPS[a.dtype] * _product_scale(a, b) + 1e-300)


@pytest.mark.skipif(KERNELS["matmul"].compiled is None, reason="no MKL (the [fast] extra, on x86-64 Linux)")
def test_a_stack_plan_made_once_serves_every_later_array_of_its_shapes_and_strides():
    """The batched GEMM's plan (sizes, layouts, matrix offsets) is kept per shapes and strides; the addresses
    are each call's own: arrays of the same layout elsewhere in memory, and a copied operand, give their own
    products."""
    from minigrad.kernels import mkl_blas

    rng = np.random.default_rng(0)
    plans = set()
    for _ in range(3):
        qkv = rng.standard_normal((2, 40, 3, 4, 16)).astype(np.float32)
        q, k = qkv[:, :, 0].transpose(0, 2, 1, 3), qkv[:, :, 1].transpose(0, 2, 3, 1)  # head-split views
        every_other = rng.standard_normal((2, 4, 16, 80)).astype(np.float32)[..., ::2]  # copied first
        for a, b in ((q, k), (q, every_other), (q[:, :1], k)):
            plan = mkl_blas._form_plan("matmul", a, b)
            assert isinstance(plan, mkl_blas._StackPlan)
            plans.add(id(plan))
            got = mkl_blas.gemm_batch(a, b, plan)
            np.testing.assert_allclose(got, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-5, atol=1e-4)
    assert len(plans) == 3  # one per layout, kept across the arrays
    assert mkl_blas._form_plan("matmul", qkv[:, :, 2].transpose(0, 2, 1, 3), k) is mkl_blas._form_plan("matmul", q, k)


# --------------------------------------------------------------------------------------
# Softmax and attention
# --------------------------------------------------------------------------------------


@covers("softmax")
@SETTINGS
@given(data=st.data(), x=arrays())
def test_softmax(data, x):
    axis = data.draw(st.sampled_from([-1, 0, x.ndim - 1, x.ndim, -x.ndim - 1] if x.ndim else [-1, 0]))
    results = fast_plain_reference("softmax", x, axis)
    if results is None:
        return
    got, plain, expected = results
    expected = expected.astype(x.dtype)
    assert_close(got, expected, x.dtype, scale=1.0, ulps=64, like=plain)  # weights in [0, 1]: absolute tolerance


def causal_bias(tq, tk, dtype):
    """0 where query i may see key j (the queries are the last tq positions), -inf above that diagonal."""
    allowed = np.tril(np.ones((tq, tk), bool), k=tk - tq)
    return np.where(allowed, 0.0, -np.inf).astype(dtype)


@st.composite
def attention_inputs(draw):
    """q, k, bias for attention: every mask kind, unbatched and batched, grouped-query heads, Tq != Tk."""
    dtype = draw(FLOATS)
    tq, tk, e = draw(st.sampled_from([1, 2, 5, 9])), draw(st.sampled_from([1, 3, 5, 9])), draw(st.sampled_from([1, 4]))
    layout = draw(st.sampled_from(["unbatched", "batched", "heads", "grouped"]))
    q_lead, k_lead = {"unbatched": ((), ()), "batched": ((2,), (2,)), "heads": ((2, 3), (2, 3)),
                      "grouped": ((2, 4), (2, 1))}[layout]
    big = draw(st.sampled_from([1.0, 1.0, 30.0, 300.0]))  # large scores: rows spanning more than exp's range
    q = draw(arrays(shape=q_lead + (tq, e), dtype=dtype, specials=False)) * dtype(big)
    k = draw(arrays(shape=k_lead + (tk, e), dtype=dtype, specials=False))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kind = draw(st.sampled_from(["none", "causal", "first_key_masked", "fully_masked_rows", "additive", "padding"]))
    bias = None
    if kind == "causal":
        bias = causal_bias(tq, tk, dtype)
    elif kind == "first_key_masked":
        bias = np.zeros((tq, tk), dtype)
        bias[:, 0] = -np.inf
    elif kind == "fully_masked_rows":
        bias = np.where(rng.random((tq, tk)) < 0.5, -np.inf, 0.0).astype(dtype)
        bias[rng.integers(tq)] = -np.inf
    elif kind == "additive":
        bias = (rng.standard_normal(q_lead[:1] + (1,) * (len(q_lead) > 1) + (tq, tk)) * 3).astype(dtype)
    elif kind == "padding":  # left padding: some batch rows cannot see their first keys
        pad = np.zeros(q_lead[:1] + (1,) * (len(q_lead) > 1) + (1, tk), dtype)
        if pad.ndim > 2:
            pad[0, ..., : tk // 2 + 1] = -np.inf
        bias = pad
    scale = draw(st.sampled_from([1.0, 0.5, 1 / math.sqrt(e)]))
    return q, k, bias, scale


@covers("attention_weights")
@SETTINGS
@given(inputs=attention_inputs())
def test_attention_weights(inputs):
    q, k, bias, scale = inputs
    with np.errstate(all="ignore"):
        got = KERNELS["attention_weights"].fast(q, k, bias, scale)
        expected = reference(KERNELS["attention_weights"].plain, q, k, bias, scale).astype(q.dtype)
    assert np.isfinite(got).all(), "masked rows must give zeros, never NaN"
    assert_close(got, expected, q.dtype, scale=1.0, ulps=256)
    rows = got.sum(-1)
    assert np.all((np.abs(rows - 1) < 1e-4) | (rows == 0))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unbatched_attention_with_rows_to_redo_does_not_crash(dtype):
    # Regression: 2-D (unbatched) attention crashed ("Calling nonzero on 0d arrays") when a row
    # had to be redone with its max: its first key masked, or its scores spanning more than exp's range.
    rng = np.random.default_rng(0)
    q = mg.tensor(rng.standard_normal((4, 8)).astype(dtype) * 60, requires_grad=True)
    k = mg.tensor(rng.standard_normal((4, 8)).astype(dtype), requires_grad=True)
    first_masked = np.zeros((4, 4), dtype)
    first_masked[:, 0] = -np.inf
    for bias in (causal_bias(4, 4, dtype), first_masked):
        weights = mg.fused.attention_weights(q, k, mg.tensor(bias), scale=1.0)
        expected = KERNELS["attention_weights"].plain(q.data.astype(np.float64), k.data.astype(np.float64),
                                                      bias.astype(np.float64), 1.0)
        np.testing.assert_allclose(weights.data, expected, atol=1e-6)
        weights.sum().backward()
        assert np.isfinite(q.grad.data).all()
        q.grad = k.grad = None


@covers("softmax_grad")
@SETTINGS
@given(data=st.data(), shape=shapes(min_dims=1), scale=st.sampled_from([1.0, 0.3]))
def test_softmax_grad(data, shape, scale):
    dtype = data.draw(FLOATS)
    e = np.exp(np.random.default_rng(data.draw(st.integers(0, 99))).standard_normal(shape))
    out = (e / e.sum(axis=-1, keepdims=True)).astype(dtype)  # softmax weights (empty rows stay empty)
    g = data.draw(arrays(shape=data.draw(st.sampled_from([shape, shape[-1:]])), dtype=dtype, specials=False))
    axis = data.draw(st.sampled_from([-1, 0]))
    if g.shape != out.shape and axis != -1:
        g = np.broadcast_to(g, out.shape)
    got = KERNELS["softmax_grad"].fast(out, g, axis, scale)
    expected = reference(KERNELS["softmax_grad"].plain, out, g, axis, scale).astype(dtype)
    assert_close(got, expected, dtype, scale=np.abs(g.astype(np.float64)).max(initial=0), ulps=32)



# --------------------------------------------------------------------------------------
# Cross-entropy
# --------------------------------------------------------------------------------------


@st.composite
def cross_entropy_inputs(draw):
    """(logits (N, C), targets (N,) in range, row_weight (N,)): every dtype, layout and special value."""
    rows, classes = draw(st.sampled_from([0, 1, 2, 5, 64, 1100])), draw(st.sampled_from([1, 2, 65, 300]))
    logits = draw(arrays(shape=(rows, classes)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    targets = rng.integers(0, classes, rows).astype(draw(st.sampled_from([np.int64, np.int64, np.int32])))
    row_weight = draw(arrays(shape=(rows,), dtype=draw(st.sampled_from([logits.dtype, logits.dtype, np.float64])),
                             specials=False))  # (float64 weights on float32 logits: a float64 gradient, as plain)
    return logits, targets, row_weight


@covers("cross_entropy", "cross_entropy_grad")
@SETTINGS
@given(inputs=cross_entropy_inputs())
def test_cross_entropy_kernels(inputs):
    logits, targets, row_weight = inputs
    dtype = logits.dtype
    with np.errstate(all="ignore"):
        got = KERNELS["cross_entropy"].fast(logits, targets)
        like = KERNELS["cross_entropy"].plain(logits, targets)  # (where exp overflows in float32)
        expected = reference(KERNELS["cross_entropy"].plain, logits, targets)
        scale = np.abs(logits.astype(np.float64)).max(axis=-1, initial=0) + math.log(logits.shape[1]) + 1
    assert_close(got, expected.astype(dtype), dtype, scale=np.where(np.isfinite(scale), scale, 0), like=like)

    with np.errstate(all="ignore"):
        got = KERNELS["cross_entropy_grad"].fast(logits, targets, row_weight)
        like = KERNELS["cross_entropy_grad"].plain(logits, targets, row_weight)
        expected = reference(KERNELS["cross_entropy_grad"].plain, logits, targets, row_weight)
    scale = np.abs(row_weight.astype(np.float64))[:, None]
    assert got.dtype == like.dtype == np.result_type(logits, row_weight)
    # (compared at the logits' precision: a float64 weight does not make a float32 softmax more exact)
    assert_close(got.astype(dtype), expected.astype(dtype), dtype, scale=scale, like=like.astype(dtype))


# --------------------------------------------------------------------------------------
# The Adam update (in place in the parameter and its two moments)
# --------------------------------------------------------------------------------------


@covers("adam_update")
@SETTINGS
@given(data=st.data(), shape=st.one_of(shapes(), st.sampled_from([(1023,), (1024,), (33, 40), (4, 4096)])),
       lr=st.sampled_from([1e-3, 0.1]), betas=st.sampled_from([(0.9, 0.999), (0.5, 0.9), (0.0, 0.0)]),
       eps=st.sampled_from([1e-8, 1e-3]), step=st.sampled_from([1, 2, 1000]), decay=st.sampled_from([1.0, 0.999]))
def test_adam_update(data, shape, lr, betas, eps, step, decay):
    dtype = data.draw(FLOATS)
    p, g, m = (data.draw(arrays(shape=shape, dtype=dtype, specials=False)) for _ in range(3))
    v = data.draw(arrays(shape=shape, dtype=dtype, specials=False, positive=True))
    p64, g64, m64, v64 = (a.astype(np.float64) for a in (p, g, m, v))
    before = np.abs(p64) + np.abs(m64) + np.abs(g64)  # (for the tolerance)
    with np.errstate(all="ignore"):
        assert KERNELS["adam_update"].fast(p, g, m, v, lr, *betas, eps, step, decay) is None
        KERNELS["adam_update"].plain(p64, g64, m64, v64, lr, *betas, eps, step, decay)
        denom = np.sqrt(v64 / (1 - betas[1] ** step)) + eps
        step_scale = lr / (1 - betas[0] ** step) * before / denom  # how far rounding in m and v can move p
    for got, expected, scale in ((m, m64, before), (v, v64, v64 + g64 * g64), (p, p64, before + step_scale)):
        assert got.dtype == dtype
        assert_close(got, expected.astype(dtype), dtype, scale=scale, ulps=64)


@pytest.mark.skipif(KERNELS["gelu"].compiled is None, reason="no compiled forms (the [fast] extra)")
def test_parallel_compiled_forms_leave_arrays_below_the_threshold_to_the_numpy_form(monkeypatch):
    from minigrad.kernels import numba_forms

    loops = []
    monkeypatch.setattr(numba_forms, "_gelu_tanh",
                        lambda x, *outs, loop=numba_forms._gelu_tanh: loops.append(x.size) or loop(x, *outs))
    threshold = numba_forms.NUMPY_BELOW
    for size in (threshold - 1, threshold, threshold + 1):
        x = np.random.default_rng(size).standard_normal(size).astype(np.float32)
        out, gate = KERNELS["gelu"].compiled(x, "tanh")
        if size < threshold:  # the NumPy form's own numbers
            for got, expected in zip((out, gate), KERNELS["gelu"].fast(x, "tanh")):
                np.testing.assert_array_equal(got, expected)
        else:
            expected_out, expected_gate = reference(KERNELS["gelu"].plain, x, "tanh")
            assert_close(gate, expected_gate.astype(np.float32), np.float32, ulps=64)  # (as test_gelu_kernels)
            assert_close(out, expected_out.astype(np.float32), np.float32, scale=np.abs(x), ulps=64)
    assert loops == [threshold, threshold + 1]
    assert numba_forms.SERIAL == {"adam_update"}  # (the one form with no parallel loop, and no threshold)
    monkeypatch.setattr(numba_forms, "_add_flat", lambda a, b, out, loop=numba_forms._add_flat: loops.append(
        ("add", a.size)) or loop(a, b, out))
    add_threshold = numba_forms.NUMPY_BELOW_FOR["add"]  # (an addition waits on memory: a threshold of its own)
    for size in (add_threshold - 1, add_threshold):
        a, b = (np.random.default_rng(size + i).standard_normal(size).astype(np.float32) for i in range(2))
        np.testing.assert_array_equal(KERNELS["add"].compiled(a, b), a + b)
    assert loops[-1] == ("add", add_threshold) and ("add", add_threshold - 1) not in loops
    p = np.ones(16, np.float32)
    monkeypatch.setattr(numba_forms, "_adam_update_flat", lambda p, *rest: loops.append(p.size))
    KERNELS["adam_update"].compiled(p, p.copy(), p.copy(), p.copy(), 1e-3, 0.9, 0.999, 1e-8, 1)
    assert loops[-1] == 16

# --------------------------------------------------------------------------------------
# scatter_add (gather's backward)
# --------------------------------------------------------------------------------------


@st.composite
def scatter_inputs(draw):
    rows, cols = draw(st.sampled_from([0, 1, 4, 65])), draw(st.sampled_from([0, 1, 3, 8]))
    shape = (rows, cols) if draw(st.booleans()) else (rows,)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kind = draw(st.sampled_from(["ids", "ids", "ids2d", "slice", "mask", "mixed", "bad"]))
    if kind in ("ids", "ids2d", "bad") and rows:
        ids = rng.integers(-rows, rows, size=(7,) if kind != "ids2d" else (3, 5))
        if kind == "bad":
            ids[0] = draw(st.sampled_from([rows, -rows - 1, rows + 10]))
        index = ids
    elif kind == "mask":
        index = rng.random(rows) < 0.5
    elif kind == "mixed" and len(shape) == 2 and rows and cols:
        index = (rng.integers(0, rows, 4), slice(None, None, 2))
    else:
        index = (slice(1, None), ...) if len(shape) == 2 else slice(None, None, -2)
    g_shape = np.zeros(shape)[index].shape if kind != "bad" else (7,) + shape[1:]
    g = draw(arrays(shape=g_shape, dtype=draw(FLOATS), specials=False))
    return g, index, shape


@covers("scatter_add")
@SETTINGS
@given(inputs=scatter_inputs())
def test_scatter_add(inputs):
    g, index, shape = inputs
    results = fast_plain_reference("scatter_add", g, index, shape)
    if results is None:
        return
    got, _, expected = results
    expected = expected.astype(g.dtype)
    assert_close(got, expected, g.dtype, scale=np.abs(g.astype(np.float64)).sum(), ulps=16)


# --------------------------------------------------------------------------------------
# erf and GELU
# --------------------------------------------------------------------------------------


@covers("erf")
@SETTINGS
@given(x=arrays())
def test_erf(x):
    got = KERNELS["erf"].fast(x)
    expected = reference(KERNELS["erf"].plain, x).astype(x.dtype)
    assert_close(got, expected, x.dtype, scale=0, ulps=16)


def test_erf_takes_the_chebyshev_fits_when_scipy_is_missing(monkeypatch):
    # The branch without SciPy (this suite's usual one, as SciPy is no dependency) and, where SciPy is
    # installed, the one with it: both against math.erf, on both sides of each fit's interval.
    from minigrad.kernels import numpy_layer_forms

    x = np.concatenate([np.linspace(-7, 7, 2001), [0.0, -0.0, 1e-300, 5e-324, 1.0, -1.0, 4.0, 6.0, np.inf, np.nan]])
    expected = KERNELS["erf"].plain(x)
    monkeypatch.setattr(numpy_layer_forms, "scipy_erf", lambda: None)  # as if `from scipy.special import erf` failed
    assert_close(KERNELS["erf"].fast(x), expected, np.float64, scale=0, ulps=16)
    assert_close(KERNELS["erf"].fast(x.astype(np.float32)), expected.astype(np.float32), np.float32, scale=0, ulps=4)
    monkeypatch.undo()
    pytest.importorskip("scipy.special")
    assert_close(KERNELS["erf"].fast(x), expected, np.float64, scale=0, ulps=4)


def test_erf_looks_for_scipy_once_not_on_every_call(monkeypatch):
    # Python does not remember a failed import: trying `from scipy.special import erf` on each call cost more
    # than erf itself on a small array.
    import builtins
    import sys

    from minigrad.kernels import numpy_layer_forms

    tries = []
    real_import = builtins.__import__

    def counting_import(name, *args, **kwargs):
        tries.extend([name] if name == "scipy.special" else [])
        return real_import(name, *args, **kwargs)

    monkeypatch.setitem(sys.modules, "scipy.special", None)  # the import fails, as without SciPy
    monkeypatch.setattr(builtins, "__import__", counting_import)
    numpy_layer_forms.scipy_erf.cache_clear()
    try:
        for _ in range(3):
            numpy_layer_forms.erf(np.linspace(-3, 3, 7))
    finally:
        numpy_layer_forms.scipy_erf.cache_clear()  # the next call looks again, with SciPy as it really is
    assert tries == ["scipy.special"]


@covers("gelu_gate", "gelu", "gelu_grad")
@SETTINGS
@given(data=st.data(), x=arrays(), approximate=st.sampled_from(["none", "tanh"]))
def test_gelu_kernels(data, x, approximate):
    with np.errstate(all="ignore"):
        gate = KERNELS["gelu_gate"].fast(x, approximate)
        assert_close(gate, reference(KERNELS["gelu_gate"].plain, x, approximate).astype(x.dtype), x.dtype, ulps=64)
        out, kept = KERNELS["gelu"].fast(x, approximate)
        expected_out, _ = reference(KERNELS["gelu"].plain, x, approximate)
        np.testing.assert_array_equal(kept, gate)
        assert_close(out, expected_out.astype(x.dtype), x.dtype, scale=np.abs(np.nan_to_num(x, posinf=0, neginf=0)),
                     ulps=64)
        g = data.draw(arrays(shape=data.draw(st.sampled_from([x.shape, x.shape[-1:]])), dtype=x.dtype))
        got = KERNELS["gelu_grad"].fast(x, g, gate, approximate)
        expected = reference(KERNELS["gelu_grad"].plain, x, g, reference(KERNELS["gelu_gate"].plain, x, approximate),
                             approximate).astype(x.dtype)
        scale = np.abs(np.nan_to_num(np.broadcast_to(g, x.shape), posinf=0, neginf=0)) * 1.2
        # An infinite g times a slope below x's dtype's smallest normal (x far below 0) is inf times nearly 0:
        # where a form's slope rounds to 0 it is NaN, elsewhere the inf of the slope's sign, and the forms
        # round apart. The fast tanh gate is a logistic, which keeps a gate of 1e-31 that the plain form's
        # 1 + tanh(u) rounds to 0 even in float64. There either is right, but never a finite number.
        slope = reference(KERNELS["gelu_grad"].plain, x, np.ones_like(x),
                          reference(KERNELS["gelu_gate"].plain, x, approximate), approximate)
        g_full = np.broadcast_to(g, x.shape)
        inf_times_0 = ~np.isfinite(g_full) & (np.abs(slope) < np.finfo(x.dtype).tiny)
        assert not np.isfinite(got[inf_times_0]).any()
        infinite = inf_times_0 & np.isinf(got)
        np.testing.assert_array_equal(np.sign(got[infinite]), -np.sign(g_full[infinite]))  # (the slope is < 0)
        got, expected = np.where(inf_times_0, np.nan, got), np.where(inf_times_0, np.nan, expected)
    assert_close(got, expected, x.dtype, scale=scale, ulps=128)


@covers("gelu_gate", "gelu", "gelu_grad")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_kernels_past_the_saturation_threshold(approximate, dtype):
    """Beyond GELU_SATURATED the gradient's x is clipped: x**2 (and x**3) would overflow, and inf * 0 is NaN."""
    from minigrad.kernels import GELU_SATURATED

    x = np.array([GELU_SATURATED * 0.99, GELU_SATURATED * 1.01, 1e5, 1e20, 3e38, -1e5, -1e20, -3e38], dtype)
    g = np.ones_like(x)
    with np.errstate(all="ignore"):
        gate = KERNELS["gelu_gate"].fast(x, approximate)
        got = KERNELS["gelu_grad"].fast(x, g, gate, approximate)
        expected = KERNELS["gelu_grad"].plain(x, g, KERNELS["gelu_gate"].plain(x, approximate), approximate)
    assert np.isfinite(got).all() and np.isfinite(expected).all()
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(got[2:], [1, 1, 1, 0, 0, 0])


# --------------------------------------------------------------------------------------
# Layer norm and RMS norm
# --------------------------------------------------------------------------------------


@covers("standardise", "layer_norm_affine", "layer_norm_grad", "rms_norm")
@pytest.mark.filterwarnings("ignore:Mean of empty slice")  # (an empty last axis: NumPy's NaN, as intended)
@SETTINGS
@given(data=st.data(), x=arrays(min_dims=1, specials=False), eps=st.sampled_from([1e-5, 0.1]),
       with_weight=st.booleans())
def test_norm_kernels(data, x, eps, with_weight):
    # Rows whose spread is far below sqrt(eps) are all eps: relative to the row, rounding in the mean
    # shows up in xhat. The tolerance is set by the row's size over its standard deviation.
    with np.errstate(all="ignore"):
        xhat, rstd = KERNELS["standardise"].fast(x, eps)
        xhat64, rstd64 = reference(KERNELS["standardise"].plain, x, eps)
        condition = np.abs(x.astype(np.float64)).max(axis=-1, keepdims=True, initial=0) * rstd64 + 1
    assert_close(rstd, rstd64.astype(x.dtype), x.dtype, scale=np.abs(rstd64), ulps=64)
    assert_close(xhat, xhat64.astype(x.dtype), x.dtype, scale=condition * x.shape[-1], ulps=64)

    weight = (data.draw(arrays(shape=x.shape[-1:], dtype=x.dtype, specials=False)),) if with_weight else ()
    g = data.draw(arrays(shape=x.shape, dtype=x.dtype, specials=False))
    with np.errstate(all="ignore"):
        got = KERNELS["layer_norm_grad"].fast(g, xhat64.astype(x.dtype), rstd64.astype(x.dtype), *weight)
        expected = reference(KERNELS["layer_norm_grad"].plain, g, xhat64, rstd64, *weight)
        v = np.abs(g.astype(np.float64)) * (np.abs(weight[0].astype(np.float64)) if weight else 1)
        scale = rstd64 * v.sum(axis=-1, keepdims=True) * condition
    assert_close(got, expected.astype(x.dtype), x.dtype, scale=np.where(np.isfinite(scale), scale, 0), ulps=64)

    # layer_norm_affine: standardise's (xhat, rstd), and xhat * weight + bias beside them (in one pass, compiled)
    w = weight[0] if weight else np.ones(x.shape[-1:], x.dtype)
    b = data.draw(arrays(shape=x.shape[-1:], dtype=x.dtype, specials=False))
    with np.errstate(all="ignore"):
        out, xhat_a, rstd_a = KERNELS["layer_norm_affine"].fast(x, w, b, eps)
        out64, _, _ = reference(KERNELS["layer_norm_affine"].plain, x, w, b, eps)
        scale = condition * x.shape[-1] * np.abs(w.astype(np.float64)) + np.abs(b.astype(np.float64))
    assert out.shape == xhat_a.shape == x.shape and rstd_a.shape == x.shape[:-1] + (1,)
    assert out.dtype == xhat_a.dtype == rstd_a.dtype == x.dtype
    assert_close(rstd_a, rstd64.astype(x.dtype), x.dtype, scale=np.abs(rstd64), ulps=64)
    assert_close(xhat_a, xhat64.astype(x.dtype), x.dtype, scale=condition * x.shape[-1], ulps=64)
    assert_close(out, out64.astype(x.dtype), x.dtype, scale=np.where(np.isfinite(scale), scale, 0), ulps=64)

    with np.errstate(all="ignore"):
        got = KERNELS["rms_norm"].fast(x, w, eps)
        expected = reference(KERNELS["rms_norm"].plain, x, w, eps)
        scale = np.abs(expected) + np.abs(w.astype(np.float64))
    assert_close(got, expected.astype(x.dtype), x.dtype, scale=np.where(np.isfinite(scale), scale, 0), ulps=64)


def test_the_kernel_list_is_what_the_tests_cover():
    assert set(KERNELS) == TESTED, f"kernels without a differential test: {sorted(set(KERNELS) - TESTED)}"


# --------------------------------------------------------------------------------------
# Through the ops, at model size
#
# The op-table tests gradcheck every op on small samples, which take the plain
# NumPy paths; these check, on arrays large enough for the fast ones (sums by
# BLAS, GELU block by block), the ops' values against plain NumPy formulas in
# float32 and float64, with infinities and NaN where the op promises something
# for them. (They name no kernel, so the compiled run of the `form` fixture skips them.)
# --------------------------------------------------------------------------------------

RNG = np.random.default_rng(0)
DTYPES = [np.float32, np.float64]


def tol(dtype):
    return {"rtol": 2e-5, "atol": 2e-5} if dtype == np.float32 else {"rtol": 1e-12, "atol": 1e-12}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, axis", [((64, 4, 33, 17), -1), ((512, 64), 1), ((16, 64, 128), (0, 1)),
                                         ((16, 64, 128), 0), ((8, 4, 64), (0, 1, 2))])
@pytest.mark.parametrize("keepdims", [False, True])
def test_sum_and_mean_match_numpy(shape, axis, keepdims, dtype):
    x = RNG.standard_normal(shape).astype(dtype)
    for name in ("sum", "mean"):
        got = OPS[name].forward(x, axis=axis, keepdims=keepdims)
        expected = getattr(x.astype(np.float64), name)(axis=axis, keepdims=keepdims)
        assert got.dtype == dtype and got.shape == expected.shape, name
        np.testing.assert_allclose(got, expected, **tol(dtype), err_msg=name)


def test_blas_sums_keep_infinities_and_nan():
    x = RNG.standard_normal((64, 40)).astype(np.float32)
    x[3, 5], x[7, 1], x[7, 2], x[9, 9] = np.inf, np.inf, -np.inf, np.nan
    with np.errstate(invalid="ignore"):  # inf - inf in the row with both
        rows, cols = OPS["sum"].forward(x, axis=-1), OPS["sum"].forward(x, axis=0)
        expected_rows, expected_cols = x.sum(axis=-1), x.sum(axis=0)
    np.testing.assert_array_equal(np.isposinf(rows), np.isposinf(expected_rows))
    np.testing.assert_array_equal(np.isnan(rows), np.isnan(expected_rows))
    np.testing.assert_array_equal(np.isnan(cols), np.isnan(expected_cols))
    assert np.isposinf(rows[3]) and np.isnan(rows[7]) and np.isnan(rows[9])


def _exact_softmax(scores):
    """softmax over the last axis in float64, shifted by each row's max (rows all -inf give zeros)."""
    scores = scores.astype(np.float64)
    row_max = scores.max(-1, keepdims=True)
    shifted = np.exp(scores - np.where(np.isfinite(row_max), row_max, 0))
    total = shifted.sum(-1, keepdims=True)
    return shifted / np.where(total == 0, 1, total)


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_rows_on_attention_sized_scores(dtype):
    scores = (3 * RNG.standard_normal((8, 4, 64, 64))).astype(dtype)
    scores[..., np.triu_indices(64, 1)[0], np.triu_indices(64, 1)[1]] = -np.inf  # causal
    scores[0, 0, 5] = -np.inf  # a row that may attend to nothing
    weights = OPS["softmax"].forward(scores, axis=-1)
    np.testing.assert_allclose(weights, _exact_softmax(scores), **tol(dtype))
    assert not np.isnan(weights).any() and (weights[0, 0, 5] == 0).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_attention_weights_redo_the_rows_a_first_score_shift_cannot_take(dtype):
    # attention_weights shifts each row by its first score; rows where that overflows exp, or
    # whose first key is forbidden, are redone with their max. All must match the exact softmax.
    rng = np.random.default_rng(7)
    q, k = (rng.standard_normal((4, 3, 16, 8)).astype(dtype) for _ in range(2))
    # Query 5 of head (1, 2) points away from key 0: its visible scores span far past exp's range.
    q[1, 2, 5] = -k[1, 2, 0] * (1e4 if dtype == np.float64 else 1e3) / (k[1, 2, 0] @ k[1, 2, 0])
    visible = (q[1, 2, 5] @ k[1, 2, :6].T) * 0.5
    assert visible.max() - visible[0] > np.log(np.finfo(dtype).max)
    bias = np.where(np.tril(np.ones((16, 16), bool)), 0.0, -np.inf).astype(dtype)  # causal
    bias = np.broadcast_to(bias, (4, 1, 16, 16)).copy()
    bias[2, :, :, :3] = -np.inf  # sequence 2 is left-padded: its first three keys are forbidden
    with np.errstate(over="raise", invalid="raise", divide="raise"):  # no such warning may escape
        weights = OPS["attention_weights"].forward(q, k, bias, scale=0.5)
    q64, k64 = q.astype(np.float64), k.astype(np.float64)
    expected = _exact_softmax(q64 @ np.swapaxes(k64, -1, -2) * 0.5 + bias)
    assert weights.dtype == dtype and not np.isnan(weights).any()
    np.testing.assert_allclose(weights, expected, **tol(dtype))
    assert (weights[2, :, :3] == 0).all()  # rows 0-2 of sequence 2 may attend to nothing
    np.testing.assert_allclose(weights.sum(-1)[2, :, 3:], 1, **tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_grad_matches_its_formula(dtype):
    out = OPS["softmax"].forward(RNG.standard_normal((8, 4, 64, 64)).astype(dtype), axis=-1)
    g = RNG.standard_normal(out.shape).astype(dtype)
    got = OPS["softmax_grad"].forward(out, g, axis=-1)
    expected = out * (g - (g * out).sum(-1, keepdims=True))
    assert got.dtype == dtype
    np.testing.assert_allclose(got, expected, **tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_norm_and_its_gradient_at_model_size(dtype):
    x = (5 + 2 * RNG.standard_normal((16, 64, 128))).astype(dtype)  # a mean far from 0
    w, b, g = (RNG.standard_normal(s).astype(dtype) for s in ((128,), (128,), x.shape))
    x64 = x.astype(np.float64)
    xc = x64 - x64.mean(-1, keepdims=True)
    rstd = 1 / np.sqrt((xc * xc).mean(-1, keepdims=True) + 1e-5)
    xhat = xc * rstd
    np.testing.assert_allclose(OPS["layer_norm"].forward(x, w, b, eps=1e-5)[0], xhat * w + b, **tol(dtype))
    v = g * w
    expected = rstd * (v - v.mean(-1, keepdims=True) - xhat * (v * xhat).mean(-1, keepdims=True))
    got = OPS["layer_norm_grad"].forward(g, x, w, eps=1e-5)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, expected, rtol=1e-4 if dtype == np.float32 else 1e-10,
                               atol=1e-4 if dtype == np.float32 else 1e-10)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gelu_tanh_block_by_block_matches_the_formula(dtype):
    # More than two blocks, and a last block that is not full
    x = (3 * RNG.standard_normal(2 * BLOCK + 1234)).astype(dtype).reshape(-1, 2)
    x[0, 0], x[0, 1] = -1e4, 1e4  # tanh saturates: 0 and x exactly
    x64 = x.astype(np.float64)
    inner = np.tanh(math.sqrt(2 / math.pi) * (x64 + 0.044715 * x64 ** 3))
    derivative = 0.5 * (1 + inner) + 0.5 * x64 * (1 - inner ** 2) * math.sqrt(2 / math.pi) * (
        1 + 3 * 0.044715 * x64 ** 2)
    out, gate = OPS["gelu"].forward(x, approximate="tanh")
    grad = OPS["gelu_grad"].forward(x, np.ones_like(x), approximate="tanh")
    upstream = RNG.standard_normal(x.shape).astype(dtype)
    np.testing.assert_allclose(OPS["gelu_grad"].forward(x, upstream, approximate="tanh"), upstream * derivative,
                               **tol(dtype))
    assert out.dtype == grad.dtype == dtype and out.shape == x.shape
    np.testing.assert_allclose(out, 0.5 * x64 * (1 + inner), **tol(dtype))
    np.testing.assert_allclose(gate, 0.5 * (1 + inner), **tol(dtype))
    np.testing.assert_allclose(grad, derivative, **tol(dtype))
    assert out[0, 0] == 0 and out[0, 1] == 1e4


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("approximate", ["tanh", "none"])
def test_gelu_grad_from_the_kept_gate_matches_the_recomputed_one(approximate, dtype):
    # gelu's forward keeps its gate (Phi(x) or the tanh form), and its VJP hands it to gelu_grad.
    x = (3 * RNG.standard_normal(2 * BLOCK + 1234)).astype(dtype)
    tiny = np.finfo(dtype).smallest_subnormal
    x[:8] = [0.0, -0.0, tiny, -tiny, 1e-30, -1e-21, 1e4, -1e4]
    g = RNG.standard_normal(x.shape).astype(dtype)
    y, gate = OPS["gelu"].forward(x, approximate=approximate)
    from_gate = OPS["gelu_grad"].forward(x, g, approximate=approximate, saved=gate)
    recomputed = OPS["gelu_grad"].forward(x, g, approximate=approximate)
    assert from_gate.dtype == gate.dtype == dtype and np.isfinite(from_gate).all()
    np.testing.assert_array_equal(from_gate, recomputed)  # the same gate, the same arithmetic
    np.testing.assert_array_equal(y, x * gate)
    np.testing.assert_array_equal(from_gate[:6], 0.5 * g[:6])  # the derivative at 0 is 1/2
    assert from_gate[6] == g[6] and from_gate[7] == 0


def test_gelu_passes_its_kept_gate_to_backward_and_checks_a_given_one():
    x = mg.tensor(RNG.standard_normal((3, 4)), requires_grad=True)
    y = F.gelu(x, approximate="tanh")
    np.testing.assert_array_equal(y._saved, OPS["gelu"].forward(x.data, approximate="tanh")[1])
    y.sum().backward()
    assert y._saved is None  # dropped with the graph
    with pytest.raises(mg.OpError, match="gelu_grad: the gate saved by gelu\\(x\\) must have x's shape"):
        mg.fused.gelu_grad(mg.tensor(np.ones((3, 4))), mg.tensor(np.ones((3, 4))), saved=np.ones(4))


def test_the_gelu_tanh_gate_keeps_a_small_gates_digits():
    # (1 + tanh u) / 2 cancels for u far below 0 (a gate of 1e-10 came out 0 or 6e-8 in float32); the
    # kernels compute it as the logistic 1 / (1 + exp(-2u)), which keeps them.
    from minigrad.kernels import GELU_CUBIC, SQRT_2_OVER_PI, numpy_layer_forms

    x = np.linspace(-9, -3, 6001).astype(np.float32)
    u = SQRT_2_OVER_PI * (x.astype(np.float64) + GELU_CUBIC * x.astype(np.float64) ** 3)
    truth = np.exp(2 * u) / (1 + np.exp(2 * u))  # e^u / (e^u + e^-u), from 1e-29 to 4e-3 (in float64 the plain
    # form cancels too, below 1e-16)
    forms = {"numpy": numpy_layer_forms.gelu_gate(x, "tanh")}
    if KERNELS["gelu"].compiled is not None:
        forms["compiled"] = KERNELS["gelu"].compiled(x, "tanh")[1]
    for name, gate in forms.items():
        assert (np.abs(gate - truth) / truth).max() <= 1e-4, name


def test_exact_gelu_gate_in_float32_is_one_erfc_fit_within_its_stated_error():
    # Phi(x) from one fit of erfc (numpy_layer_forms._gelu_erf_gate_block, and the compiled loop _gelu_erf), where
    # float64 keeps erf's two fits.
    from minigrad.kernels import numpy_layer_forms

    x = np.concatenate([np.linspace(-13, 13, 260001), -np.logspace(-30, 1.1, 2001), np.logspace(-30, 1.1, 2001),
                        [0.0, -0.0]]).astype(np.float32)
    truth = np.array([0.5 * math.erfc(-float(v) / math.sqrt(2)) for v in x])
    specials = np.array([np.nan, np.inf, -np.inf, 1e20, -1e20, 3e38, -3e38], np.float32)
    forms = {"numpy": (numpy_layer_forms.gelu, numpy_layer_forms.gelu_gate)}
    if KERNELS["gelu"].compiled is not None:
        forms["compiled"] = (KERNELS["gelu"].compiled, KERNELS["gelu_gate"].compiled)
    for name, (gelu, gelu_gate) in forms.items():
        gate = gelu_gate(x)
        out, kept = gelu(x)
        assert gate.dtype == np.float32 and np.array_equal(kept, gate) and np.array_equal(out, x * gate), name
        assert np.abs(gate - truth).max() <= 3e-7, name
        relative = np.abs(gate - truth) / truth
        assert relative[truth > 1e-6].max() <= 2e-6 and relative[truth > 1e-37].max() <= 2e-5, name
        np.testing.assert_array_equal(gelu_gate(specials), [np.nan, 1, 0, 1, 0, 1, 0], err_msg=name)


def test_erf_without_scipy_matches_math_erf_to_the_last_digits():
    # NumPy has no erf; without SciPy minigrad evaluates two Chebyshev fits (numpy_layer_forms._erf_fits).
    from minigrad.kernels.numpy_layer_forms import _erf_block as _erf_kernel
    from minigrad.kernels.numpy_layer_forms import blockwise as _blockwise

    x = np.concatenate([np.linspace(-7, 7, BLOCK + 4321), [0.0, -0.0, 1e-300, 5e-324, 1.0, -1.0, 4.0, 6.0, 1e308]])
    expected = np.array([math.erf(v) for v in x])
    got = _blockwise(_erf_kernel, x)
    np.testing.assert_allclose(got, expected, rtol=4e-15, atol=0)
    assert np.signbit(got[x.size - 8])  # erf(-0) = -0
    x32 = x[np.abs(x) < 1e38].astype(np.float32)
    got32 = _blockwise(_erf_kernel, x32)
    ulps = np.abs(got32 - np.array([math.erf(float(v)) for v in x32])) / np.spacing(np.abs(got32))
    assert got32.dtype == np.float32 and ulps.max() <= 2
    special = _blockwise(_erf_kernel, np.array([np.inf, -np.inf, np.nan]))
    assert special[0] == 1 and special[1] == -1 and np.isnan(special[2])


def test_gelu_of_a_strided_view_is_its_copy():
    x = RNG.standard_normal((300, 600)).astype(np.float32)
    view = x[:, ::3]  # not contiguous
    np.testing.assert_array_equal(OPS["gelu"].forward(view, approximate="tanh")[0],
                                  OPS["gelu"].forward(view.copy(), approximate="tanh")[0])


def test_big_layer_norm_backward_agrees_with_the_composite():
    x = mg.tensor(RNG.standard_normal((8, 32, 64)), requires_grad=True)
    w = mg.tensor(RNG.standard_normal(64), requires_grad=True)
    b = mg.tensor(RNG.standard_normal(64), requires_grad=True)
    g = RNG.standard_normal((8, 32, 64))
    OPS["layer_norm"](x, w, b, eps=1e-5).backward(mg.tensor(g))
    fused = [t.grad.data.copy() for t in (x, w, b)]
    for t in (x, w, b):
        t.grad = None
    xc = x - x.mean(axis=-1, keepdims=True)
    composite = xc * ((xc * xc).mean(axis=-1, keepdims=True) + 1e-5) ** -0.5 * w + b
    composite.backward(mg.tensor(g))
    for got, t in zip(fused, (x, w, b)):
        np.testing.assert_allclose(got, t.grad.data, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("shape, index_shape", [((65, 128), (16, 64)), ((10,), (50,)), ((7, 3, 2), (4, 5)),
                                                ((5, 4), (0,))])
def test_scatter_add_of_integer_rows_matches_add_at(shape, index_shape):
    index = RNG.integers(-shape[0], shape[0], size=index_shape)  # repeats and negative ids
    g = RNG.standard_normal(index_shape + shape[1:]).astype(np.float32)
    expected = np.zeros(shape)  # float64: the two float32 sums add in different orders
    np.add.at(expected, index, g.astype(np.float64))
    got = OPS["scatter_add"].forward(g, index=index, shape=shape)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_embedding_gradient_accumulates_repeated_tokens():
    table = mg.tensor(RNG.standard_normal((6, 3)), requires_grad=True)
    ids = np.array([[1, 1, 4], [5, 1, 0]])
    (table[ids] * mg.tensor(np.arange(18.0).reshape(2, 3, 3))).sum().backward()
    expected = np.zeros((6, 3))
    np.add.at(expected, ids, np.arange(18.0).reshape(2, 3, 3))
    np.testing.assert_array_equal(table.grad.data, expected)
