"""The basic layers: shapes, PyTorch's initialisation, values, gradients, dtype and error messages."""

import numpy as np
import pytest
from nn_helpers import randn

import minigrad as mg
from minigrad import nn
from minigrad.nn import functional as F


def test_linear_shapes_and_pytorch_default_init():
    layer = nn.Linear(64, 32, rng=np.random.default_rng(0))
    assert layer.weight.shape == (32, 64) and layer.bias.shape == (32,)
    assert layer.weight.dtype == np.float32
    bound = 1 / np.sqrt(64)  # kaiming_uniform(a=sqrt(5)) = U(-1/sqrt(fan_in), 1/sqrt(fan_in))
    for p in (layer.weight, layer.bias):
        assert np.abs(p.data).max() <= bound
    assert np.abs(layer.weight.data).max() > 0.95 * bound  # drawn over the whole interval, not a narrow one
    assert abs(layer.weight.data.std() - bound / np.sqrt(3)) < 0.1 * bound  # the std of U(-b, b)
    x = randn(5, 7, 64).astype(np.float32)
    y = layer(x)
    assert y.shape == (5, 7, 32) and y.dtype == np.float32
    np.testing.assert_allclose(y.data, x.data @ layer.weight.data.T + layer.bias.data, rtol=1e-5, atol=1e-6)
    assert nn.Linear(3, 2, bias=False).bias is None


@pytest.mark.parametrize("bias", [True, False])
def test_linear_gradients(bias):
    assert nn.gradcheck_module(nn.Linear(3, 2, bias=bias), randn(2, 4, 3))


def test_linear_rejects_the_wrong_number_of_features():
    with pytest.raises(ValueError, match=r"Linear\(in_features=4, out_features=8, bias=True\).*\(2, 5\).*4 features"):
        nn.Linear(4, 8)(mg.Tensor(np.zeros((2, 5), np.float32)))


def test_embedding():
    table = nn.Embedding(10, 4, rng=np.random.default_rng(0))
    assert table.weight.shape == (10, 4) and abs(table.weight.data.std() - 1) < 0.35  # N(0, 1), like PyTorch
    ids = np.array([[1, 2, 2], [9, 0, 1]])
    out = table(ids)
    assert out.shape == (2, 3, 4)
    np.testing.assert_array_equal(out.data, table.weight.data[ids])
    np.testing.assert_array_equal(table(mg.Tensor(ids)).data, out.data)  # ids may be a Tensor too
    assert nn.gradcheck_module(table, ids)
    with pytest.raises(IndexError, match=r"Embedding\(10, 4\): ids holds token id 10, outside "
                                         r"\[0, num_embeddings=10\).*\(2, 3\)"):
        table(np.array([[1, 2, 3], [4, 5, 10]]))
    with pytest.raises(IndexError, match="token id -3"):
        table(np.array([-3]))


def test_embedding_gradient_accumulates_over_repeated_ids():
    table = nn.Embedding(4, 2)
    table(np.array([1, 1, 3])).sum().backward()
    np.testing.assert_array_equal(table.weight.grad.data, [[0, 0], [2, 2], [0, 0], [1, 1]])


def test_layer_norm():
    norm = nn.LayerNorm(6)
    x = randn(2, 3, 6) * 5 + 3
    y = norm.double()(x).data
    np.testing.assert_allclose(y.mean(-1), 0, atol=1e-12)
    np.testing.assert_allclose(y.std(-1), 1, rtol=1e-5)
    assert nn.gradcheck_module(nn.LayerNorm(4), randn(2, 3, 4))
    no_bias = nn.LayerNorm(4, bias=False)
    assert [n for n, _ in no_bias.named_parameters()] == ["weight"]
    assert nn.gradcheck_module(no_bias, randn(2, 4))
    assert nn.LayerNorm(4, elementwise_affine=False).num_parameters() == 0
    with pytest.raises(ValueError, match=r"LayerNorm\(\(6,\).*\(2, 5\).*6 features"):
        nn.LayerNorm(6)(randn(2, 5))


def test_rms_norm():
    norm = nn.RMSNorm(5)
    x = randn(3, 5) * 4
    y = norm.double()(x).data
    np.testing.assert_allclose(np.sqrt((y ** 2).mean(-1)), 1, rtol=1e-5)
    assert nn.gradcheck_module(nn.RMSNorm(4), randn(2, 3, 4))
    with pytest.raises(ValueError, match=r"RMSNorm\(\(5,\)"):
        norm(randn(3, 4))


def test_dropout_module():
    drop = nn.Dropout(0.5, rng=np.random.default_rng(0))
    x = mg.Tensor(np.ones((4, 8), np.float32))
    assert set(np.unique(drop(x).data)) == {0.0, 2.0}
    assert drop.eval()(x) is x
    with pytest.raises(ValueError, match="Dropout"):
        nn.Dropout(-0.1)


def test_activation_modules_wrap_the_functions():
    x = randn(3, 4)
    pairs = [(nn.ReLU(), F.relu(x)), (nn.GELU(), F.gelu(x)), (nn.GELU("tanh"), F.gelu(x, "tanh")),
             (nn.SiLU(), F.silu(x)), (nn.Tanh(), x.tanh()), (nn.Sigmoid(), x.sigmoid()), (nn.Identity(), x)]
    for module, expected in pairs:
        np.testing.assert_array_equal(module(x).data, expected.data)
    with pytest.raises(ValueError, match="GELU"):
        nn.GELU("fast")


def test_layers_keep_float32():
    x = mg.Tensor(np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32))
    for layer in (nn.Linear(4, 4), nn.LayerNorm(4), nn.RMSNorm(4), nn.GELU(), nn.SiLU(), nn.Dropout(0.3)):
        assert layer(x).dtype == np.float32, layer
    assert nn.Embedding(3, 4)(np.array([0, 2])).dtype == np.float32
