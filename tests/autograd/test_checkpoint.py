"""mg.autograd.checkpoint: the gradients of fn itself, to any order, with the segment's insides not kept; the
same dropout masks on the recomputation (as torch.utils.checkpoint restores its generator); and what the graph
holds, counted by mg.autograd.graph_bytes."""

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from minigrad.autograd import checkpoint, graph_bytes
from minigrad.nn import functional as F

rng = np.random.default_rng(0)
W1 = mg.tensor(rng.normal(size=(4, 8)), requires_grad=True)
W2 = mg.tensor(rng.normal(size=(8, 4)), requires_grad=True)


def block(x):
    """Reads W1 and W2 from outside, as a module's forward reads its parameters."""
    return x + (x @ W1).tanh() @ W2


def test_checkpoint_gives_the_gradients_of_fn_and_finds_its_parameters():
    x = mg.tensor(rng.normal(size=(3, 4)), requires_grad=True)
    plain = mg.grad((block(x) ** 2).sum(), [x, W1, W2])
    y = checkpoint(block, x)
    assert y._op.name == "checkpoint" and len(y._inputs) == 3  # x, and the two weights it found
    np.testing.assert_array_equal(y.numpy(), block(x).numpy())
    for a, b in zip(plain, mg.grad((y ** 2).sum(), [x, W1, W2])):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-13, atol=1e-14)


def test_checkpoint_accumulates_into_parameters_on_backward():
    x = mg.tensor(rng.normal(size=(3, 4)), requires_grad=True)
    (block(x) ** 2).sum().backward()
    want = [t.grad.numpy().copy() for t in (x, W1, W2)]
    for t in (x, W1, W2):
        t.grad = None
    (checkpoint(block, x) ** 2).sum().backward()
    for t, w in zip((x, W1, W2), want):
        np.testing.assert_allclose(t.grad.numpy(), w, rtol=1e-13)
        t.grad = None


def test_checkpoint_second_order_gradients_equal_plain_ones():
    x = mg.tensor(rng.normal(size=(3, 4)), requires_grad=True)

    def second(fn):
        gx, gw = mg.grad((fn(x) ** 2).sum(), [x, W1], create_graph=True)
        return mg.grad((gx ** 3).sum() + (gw * gw).sum(), [x, W1, W2])

    for a, b in zip(second(block), second(lambda x: checkpoint(block, x))):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-10, atol=1e-12)
    assert mg.gradgradcheck(lambda x, w: checkpoint(lambda x: (x @ w).tanh() @ w.T, x), [x, W1])


def test_checkpoint_replays_dropout_masks_from_the_default_and_given_generators():
    own = np.random.default_rng(5)
    x = mg.tensor(rng.normal(size=(6, 4)), requires_grad=True)

    def noisy(x):
        return F.dropout(F.dropout(block(x), 0.5, True), 0.3, True, own)

    mg.manual_seed(1)
    own_state = own.bit_generator.state
    y = checkpoint(noisy, x, rngs=[own])
    after = (mg.randn(3).numpy(), own.random())  # the forward moved both generators on
    mg.manual_seed(1)
    own.bit_generator.state = own_state
    plain = noisy(x)
    np.testing.assert_array_equal(y.numpy(), plain.numpy())
    want = mg.grad((plain * plain).sum(), [x, W1])
    mg.manual_seed(1)
    mg.randn(3), own.random()  # the generators elsewhere now; backward must not move them
    before_backward = (mg.random.default_rng().bit_generator.state, own.bit_generator.state)
    got = mg.grad((y * y).sum(), [x, W1])
    for a, b in zip(want, got):  # the same masks on the recomputation: the same gradient
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-13)
    assert (mg.random.default_rng().bit_generator.state, own.bit_generator.state) == before_backward
    assert after[0].shape == (3,)


def test_checkpoint_without_preserving_rng_state_gets_other_masks():
    x = mg.tensor(rng.normal(size=(50, 4)), requires_grad=True)
    mg.manual_seed(2)
    y = checkpoint(lambda x: F.dropout(x * 1.0, 0.5, True), x, preserve_rng_state=False)
    (g,) = mg.grad(y.sum(), [x])
    kept_forward = y.numpy() != 0
    kept_backward = g.numpy() != 0
    assert (kept_forward != kept_backward).any()


def test_checkpoint_keeps_only_inputs_and_output():
    x = mg.tensor(rng.normal(size=(64, 4)), requires_grad=True)

    def chain(fn):
        h = x
        for _ in range(5):
            h = fn(h)
        return (h * h).sum()

    plain, kept = graph_bytes(chain(block)), graph_bytes(chain(lambda h: checkpoint(block, h)))
    assert kept.nodes == 5 + 2  # one node per block, then h * h and the sum
    assert kept.activations == 5 * 64 * 4 * 8 + 64 * 4 * 8 + 8  # each block's output, h * h, the loss
    assert plain.activations > 4 * kept.activations
    assert plain.parameters == kept.parameters == x.data.nbytes + W1.data.nbytes + W2.data.nbytes


def test_checkpoint_under_no_grad_is_a_plain_call():
    x = mg.tensor(rng.normal(size=(3, 4)), requires_grad=True)
    with mg.no_grad():
        y = checkpoint(block, x)
    assert y._op is None and not y.requires_grad


def test_checkpoint_says_what_it_needs():
    with pytest.raises(TypeError, match="checkpoint: fn must be callable"):
        checkpoint(3, W1)
    with pytest.raises(TypeError, match="checkpoint: fn must return one Tensor, got tuple"):
        checkpoint(lambda x: (x, x), W1)
    with pytest.raises(TypeError, match="rngs must hold np.random.Generator"):
        checkpoint(block, W1.T, rngs=[3])


def test_checkpoint_of_a_module_with_a_constant_input():
    layer = nn.Linear(4, 3, rng=np.random.default_rng(0)).to(np.float64)
    data = mg.tensor(rng.normal(size=(2, 4)))  # requires no grad: the weights do
    y = checkpoint(layer, data)
    (gw,) = mg.grad(y.sum(), [layer.weight])
    (want,) = mg.grad(layer(data).sum(), [layer.weight])
    np.testing.assert_allclose(gw.numpy(), want.numpy(), rtol=1e-13)


def test_graph_bytes_counts_a_view_once():
    x = mg.tensor(rng.normal(size=(4, 6)), requires_grad=True)
    y = (x * 2.0).reshape(6, 4).T  # two views of one new array
    counted = graph_bytes(y.sum())
    assert counted.activations == 4 * 6 * 8 + 8 and counted.parameters == x.data.nbytes


def test_checkpoint_of_a_function_reading_a_computed_tensor():
    """fn may read a tensor computed outside it (not a leaf): its gradient reaches that tensor's leaves once."""
    x = mg.tensor(rng.normal(size=(3, 4)), requires_grad=True)
    scaled = W1 * 2.0  # computed before the segment, read inside it, and used again outside

    def fn(h):
        return (h @ scaled).tanh()

    def loss(make):
        return (make(x) ** 2).sum() + scaled.sum()

    want = mg.grad(loss(fn), [x, W1], retain_graph=True)
    got = mg.grad(loss(lambda h: checkpoint(fn, h)), [x, W1], retain_graph=True)
    for a, b in zip(want, got):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-13)
