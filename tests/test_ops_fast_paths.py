"""The ops' speed paths give NumPy's answers on arrays big enough to take them.

The op-table tests gradcheck every op on small samples, which take the plain
NumPy paths; these check, on arrays large enough for the fast ones (sums by
BLAS, GELU block by block), values against plain NumPy formulas in float32
and float64, with infinities and NaN where the op promises something for them.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import minigrad as mg
from minigrad.kernels import BLOCK as _BLOCK
from minigrad.nn import functional as F
from minigrad.ops import OPS

RNG = np.random.default_rng(0)
FLOATS = [np.float32, np.float64]


def tol(dtype):
    return {"rtol": 2e-5, "atol": 2e-5} if dtype == np.float32 else {"rtol": 1e-12, "atol": 1e-12}


@pytest.mark.parametrize("dtype", FLOATS)
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


@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax_rows_on_attention_sized_scores(dtype):
    scores = (3 * RNG.standard_normal((8, 4, 64, 64))).astype(dtype)
    scores[..., np.triu_indices(64, 1)[0], np.triu_indices(64, 1)[1]] = -np.inf  # causal
    scores[0, 0, 5] = -np.inf  # a row that may attend to nothing
    weights = OPS["softmax"].forward(scores, axis=-1)
    np.testing.assert_allclose(weights, _exact_softmax(scores), **tol(dtype))
    assert not np.isnan(weights).any() and (weights[0, 0, 5] == 0).all()


@pytest.mark.parametrize("dtype", FLOATS)
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


@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax_grad_matches_its_formula(dtype):
    out = OPS["softmax"].forward(RNG.standard_normal((8, 4, 64, 64)).astype(dtype), axis=-1)
    g = RNG.standard_normal(out.shape).astype(dtype)
    got = OPS["softmax_grad"].forward(out, g, axis=-1)
    expected = out * (g - (g * out).sum(-1, keepdims=True))
    assert got.dtype == dtype
    np.testing.assert_allclose(got, expected, **tol(dtype))


@pytest.mark.parametrize("dtype", FLOATS)
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


@pytest.mark.parametrize("dtype", FLOATS)
def test_gelu_tanh_block_by_block_matches_the_formula(dtype):
    # More than two blocks, and a last block that is not full
    x = (3 * RNG.standard_normal(2 * _BLOCK + 1234)).astype(dtype).reshape(-1, 2)
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


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("approximate", ["tanh", "none"])
def test_gelu_grad_from_the_kept_gate_matches_the_recomputed_one(approximate, dtype):
    # gelu's forward keeps its gate (Phi(x) or the tanh form), and its VJP hands it to gelu_grad.
    x = (3 * RNG.standard_normal(2 * _BLOCK + 1234)).astype(dtype)
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


def test_erf_without_scipy_matches_math_erf_to_the_last_digits():
    # NumPy has no erf; without SciPy minigrad evaluates two Chebyshev fits (kernels._erf_fits).
    from minigrad.kernels import _erf_block as _erf_kernel
    from minigrad.kernels import blockwise as _blockwise

    x = np.concatenate([np.linspace(-7, 7, _BLOCK + 4321), [0.0, -0.0, 1e-300, 5e-324, 1.0, -1.0, 4.0, 6.0, 1e308]])
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
