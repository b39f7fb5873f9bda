"""The losses, F.pad, Flatten/Unflatten and the fan-scaled initialisers, without PyTorch.

Each loss is gradchecked in float64 against finite differences for every
reduction, held to its formula written out in NumPy, and its stable forms are
checked where the naive formula overflows or rounds away. (The comparison with
PyTorch itself is tests/against_torch/test_torch_diff_surface_nn.py.)
"""

import math

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from minigrad.nn import functional as F

REDUCTIONS = ["mean", "sum", "none"]


def leaf(*shape, seed=0, scale=1.0):
    return mg.Tensor(np.random.default_rng(seed).standard_normal(shape) * scale, requires_grad=True)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_every_loss_gradchecks(reduction):
    rng = np.random.default_rng(1)
    y, p = rng.standard_normal((3, 4)), rng.uniform(0.1, 0.9, (3, 4))
    ids, w = np.array([[0, 2], [3, -100], [1, 1]]), rng.random(4) + 0.5
    cases = [
        lambda x: F.mse_loss(x, y, reduction=reduction),
        lambda x: F.mse_loss(x, y, reduction=reduction, weight=mg.Tensor(p)),
        lambda x: F.l1_loss(x, y + 3.0, reduction=reduction),
        lambda x: F.cross_entropy(x.reshape(3, 4, 1).expand(3, 4, 2), ids, reduction=reduction),
        lambda x: F.cross_entropy(x, ids[:, 0], weight=w, label_smoothing=0.2, reduction=reduction),
        lambda x: F.cross_entropy(x, mg.Tensor(p / p.sum(1, keepdims=True)), reduction=reduction),
        lambda x: F.nll_loss(x.log_softmax(1), ids[:, 0], weight=w, reduction=reduction),
        lambda x: F.binary_cross_entropy(x.sigmoid(), p, reduction=reduction),
        lambda x: F.binary_cross_entropy_with_logits(x * 10, p, pos_weight=w, reduction=reduction),
    ]
    for i, fn in enumerate(cases):
        assert mg.gradcheck(fn, leaf(3, 4, seed=i)), f"case {i}"


def test_losses_equal_their_formulas():
    rng = np.random.default_rng(2)
    x, y, p = rng.standard_normal((5, 3)), rng.standard_normal((5, 3)), rng.uniform(0.05, 0.95, (5, 3))
    ids, w = np.array([0, 2, 1, -100, 2]), np.array([0.5, 1.0, 2.0])
    np.testing.assert_allclose(F.mse_loss(mg.Tensor(x), y).item(), ((x - y) ** 2).mean(), rtol=1e-13)
    np.testing.assert_allclose(F.l1_loss(mg.Tensor(x), y, reduction="sum").item(), np.abs(x - y).sum(), rtol=1e-13)
    logp = x - np.log(np.exp(x).sum(1, keepdims=True))
    kept = ids != -100
    picked = -logp[np.arange(5), np.where(kept, ids, 0)] * w[np.where(kept, ids, 0)] * kept
    np.testing.assert_allclose(F.cross_entropy(mg.Tensor(x), ids, weight=w).item(),
                               picked.sum() / (w[ids[kept]]).sum(), rtol=1e-13)  # the weighted mean
    smooth = (0.9 * picked.sum() + 0.1 / 3 * (-(logp * w).sum(1) * kept).sum()) / w[ids[kept]].sum()
    np.testing.assert_allclose(F.cross_entropy(mg.Tensor(x), ids, weight=w, label_smoothing=0.1).item(), smooth,
                               rtol=1e-13)
    bce = -(y.clip(0, 1) * np.log(p) + (1 - y.clip(0, 1)) * np.log(1 - p))
    np.testing.assert_allclose(F.binary_cross_entropy(mg.Tensor(p), y.clip(0, 1), reduction="none").data, bce,
                               rtol=1e-13)
    logits = np.log(p / (1 - p))
    np.testing.assert_allclose(F.binary_cross_entropy_with_logits(mg.Tensor(logits), y.clip(0, 1)).item(),
                               bce.mean(), rtol=1e-12)


def test_binary_cross_entropy_with_logits_is_stable_at_the_extremes():
    # exp(1e4) would overflow; log(1 + e**-40) would round to 0 where log1p keeps it.
    x = mg.Tensor(np.array([-1e4, 40.0, 1e4]), requires_grad=True)
    y = np.array([1.0, 1.0, 0.0])
    loss = F.binary_cross_entropy_with_logits(x, y, reduction="none")
    np.testing.assert_allclose(loss.data, [1e4, math.exp(-40.0), 1e4], rtol=1e-12)
    loss.sum().backward()
    np.testing.assert_allclose(x.grad.data, [-1.0, -math.exp(-40.0), 1.0], rtol=1e-12)


def test_the_losses_keep_float32():
    x = mg.Tensor(np.zeros((2, 3), np.float32), requires_grad=True)
    for loss in (F.mse_loss(x, mg.zeros(2, 3)), F.cross_entropy(x, [0, 1], label_smoothing=0.1),
                 F.binary_cross_entropy_with_logits(x, mg.ones(2, 3)), F.l1_loss(x, np.ones((2, 3), np.int64))):
        assert loss.dtype == np.float32
        loss.backward()
        assert x.grad.dtype == np.float32


def test_loss_modules_hold_their_arguments_and_weights():
    loss_fn = nn.CrossEntropyLoss(weight=mg.tensor([1.0, 2.0]), ignore_index=1, label_smoothing=0.1)
    assert "weight" in dict(loss_fn.named_buffers()) and not list(loss_fn.parameters())
    assert repr(nn.MSELoss(reduction="sum")) == "MSELoss(reduction='sum')"
    with pytest.warns(UserWarning, match="size_average and reduce are deprecated; write reduction="):
        assert nn.L1Loss(size_average=False).reduction == "sum"


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad_gradchecks(mode):
    pads = (1, 2) if mode != "constant" else (2, -1, 1, 0)
    assert mg.gradcheck(lambda x: F.pad(x, pads, mode) * 1.5, leaf(2, 3, 4))


def test_pad_values():
    x = mg.tensor([[1.0, 2.0, 3.0]])
    np.testing.assert_array_equal(F.pad(x, (2, 1), value=9.0).data, [[9, 9, 1, 2, 3, 9]])
    np.testing.assert_array_equal(F.pad(x, (2, 2), "reflect").data, [[3, 2, 1, 2, 3, 2, 1]])
    np.testing.assert_array_equal(F.pad(x, (2, 1), "replicate").data, [[1, 1, 1, 2, 3, 3]])
    np.testing.assert_array_equal(F.pad(x, (2, 1), "circular").data, [[2, 3, 1, 2, 3, 1]])
    np.testing.assert_array_equal(F.pad(x, (-1, 0)).data, [[2, 3]])


def test_flatten_and_unflatten_undo_each_other():
    x = leaf(2, 3, 4, 5)
    flat = nn.Flatten()(x)
    assert flat.shape == (2, 60)
    assert nn.Unflatten(1, (3, 4, 5))(flat).shape == (2, 3, 4, 5)
    assert nn.Unflatten(-1, (-1, 5))(flat).shape == (2, 12, 5)
    with pytest.raises(IndexError, match="dim 3 is out of range for a 2-D input"):
        nn.Unflatten(3, (2, 2))(flat)


@pytest.mark.parametrize("init, spread", [
    (nn.init.xavier_uniform_, math.sqrt(6 / (300 + 200)) / math.sqrt(3)),
    (nn.init.xavier_normal_, math.sqrt(2 / (300 + 200))),
    (nn.init.kaiming_uniform_, math.sqrt(2 / (1 + 0.0)) / math.sqrt(200)),
    (nn.init.kaiming_normal_, math.sqrt(2) / math.sqrt(200))])
def test_fan_scaled_initialisers_have_their_spread(init, spread):
    w = init(nn.Parameter(np.zeros((300, 200), np.float32)), generator=mg.Generator().manual_seed(0))
    assert w.dtype == np.float32
    np.testing.assert_allclose(w.data.std(), spread, rtol=0.02)


def test_calculate_gain_table():
    assert nn.init.calculate_gain("relu") == math.sqrt(2)
    assert nn.init.calculate_gain("tanh") == 5 / 3
    assert nn.init.calculate_gain("leaky_relu", 0.2) == math.sqrt(2 / 1.04)
    with pytest.raises(ValueError, match="unsupported nonlinearity 'swish'"):
        nn.init.calculate_gain("swish")


def test_module_zero_grad_keeps_zeros_when_asked():
    model = nn.Linear(3, 2)
    model(leaf(4, 3).float()).sum().backward()
    model.zero_grad(set_to_none=False)
    assert all(p.grad is not None and not p.grad.data.any() for p in model.parameters())
    model.zero_grad()
    assert all(p.grad is None for p in model.parameters())


@pytest.mark.parametrize("where, name, offered", [(nn, "Conv2d", "CrossEntropyLoss"), (F, "conv2d", "pad"),
                                                  (mg.optim, "Adagrad", "AdamW")])
def test_a_missing_pytorch_name_says_what_there_is(where, name, offered):
    with pytest.raises(AttributeError, match=rf"has no attribute '{name}': torch\..*{name} is not in minigrad; "
                                             rf".*{offered}"):
        getattr(where, name)
    assert not hasattr(where, "__wrapped__")  # (dunder lookups stay plain AttributeErrors)
