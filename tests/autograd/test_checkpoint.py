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


def scaled_block(x, mask=None, scale=1.0):
    out = block(x) * scale
    return out if mask is None else out * mask


def test_checkpoint_passes_none_and_keyword_arguments_on():
    """checkpoint(layer, hidden, None) is the usual spelling of "no mask": None goes to fn as None, never a tensor."""
    x = mg.tensor(rng.normal(size=(3, 4)), requires_grad=True)
    mask = mg.tensor(rng.normal(size=(3, 4)), requires_grad=True)
    for args, kwargs in [((x, None), {"scale": 3.0}), ((x,), {"mask": mask, "scale": 0.5}), ((x, mask, 2.0), {})]:
        inputs = [x, W1, W2] + [mask] * any(a is mask for a in (*args, *kwargs.values()))
        want = mg.grad((scaled_block(*args, **kwargs) ** 2).sum(), inputs)
        y = checkpoint(scaled_block, *args, use_reentrant=False, **kwargs)
        np.testing.assert_array_equal(y.numpy(), scaled_block(*args, **kwargs).numpy())
        for a, b in zip(want, mg.grad((y ** 2).sum(), inputs)):
            np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-13, atol=1e-14)
    with pytest.raises(ValueError, match="use_reentrant=True fn takes no keyword arguments.*pass use_reentrant=False"):
        checkpoint(scaled_block, x, scale=3.0, use_reentrant=True)


def test_checkpoint_of_a_computed_tensor_also_used_outside_backpropagates_once():
    """A tensor computed before the segment (h = W * 2) is an input of the node: backward() computes through it."""
    x = mg.tensor(rng.normal(size=(3, 4)), requires_grad=True)
    grads = []
    for segment in (lambda f, a: f(a), lambda f, a: checkpoint(f, a)):  # plainly, then checkpointed
        W1.grad = x.grad = None
        h = W1 * 2.0
        y = segment(lambda a, h=h: (a @ h).tanh(), x)
        (y.sum() + (h * h).sum()).backward()
        grads.append((x.grad.numpy().copy(), W1.grad.numpy().copy()))
    W1.grad = x.grad = None
    for a, b in zip(*grads):
        np.testing.assert_allclose(b, a, rtol=1e-13)


def _plain_and_checkpointed_grads(layer, x, g, seed=5):
    """Gradients of layer(x) run plainly and checkpointed, each from the same state of g and the default one."""
    results = []
    for run in (layer, lambda a: checkpoint(layer, a)):
        mg.manual_seed(seed)
        start = np.random.default_rng(seed).bit_generator.state
        g.bit_generator.state = start
        y = run(x)
        results.append(mg.grad((y * y).sum(), [x, *layer.parameters()]))
    return results


def test_checkpoint_replays_a_layers_own_generator_without_rngs():
    """nn.TransformerBlock(..., dropout=0.2, rng=g): the generator the layer owns is found and replayed."""
    g = np.random.default_rng(0)
    layer = nn.TransformerBlock(8, 2, 16, dropout=0.2, rng=g).to(np.float64)
    x = mg.tensor(rng.normal(size=(2, 5, 8)), requires_grad=True)
    plain, kept = _plain_and_checkpointed_grads(layer, x, g)
    for a, b in zip(plain, kept):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-10, atol=1e-12)
    # as a bound method, in a closure, in a partial, and as an argument: found as well
    import functools
    for fn, args in [(layer.forward, (x,)), (lambda a: layer(a), (x,)), (functools.partial(layer), (x,)),
                     (lambda m, a: m(a), (layer, x))]:
        for state in (np.random.default_rng(3).bit_generator.state,):
            g.bit_generator.state = state
            y = checkpoint(fn, *args)
            g.bit_generator.state = state
            want = mg.grad((layer(x) ** 2).sum(), [x])[0]
            got = mg.grad((y ** 2).sum(), [x])[0]
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10, atol=1e-12)


class _ReadsAHiddenGenerator:
    """Draws from a generator its method reads from this file's globals: out of checkpoint's sight."""

    def __call__(self, x):
        return F.dropout(x * 1.0, 0.5, True, _HIDDEN)


_HIDDEN = np.random.default_rng(7)


def test_checkpoint_refuses_a_recomputation_with_another_mask():
    x = mg.tensor(rng.normal(size=(40, 4)), requires_grad=True)
    y = checkpoint(_ReadsAHiddenGenerator(), x)
    with pytest.raises(RuntimeError, match=r"another output when run again in backward.*rngs=\[g\]"):
        mg.grad(y.sum(), [x])
    state = _HIDDEN.bit_generator.state
    y = checkpoint(_ReadsAHiddenGenerator(), x, rngs=[mg.Generator().manual_seed(0), _HIDDEN])
    (g,) = mg.grad(y.sum(), [x])
    _HIDDEN.bit_generator.state = state
    np.testing.assert_array_equal(g.numpy() != 0, _ReadsAHiddenGenerator()(x).numpy() != 0)  # the forward's mask
