"""GPT(..., checkpoint=True): every block recomputed in backward gives the gradients of the plain model, in
float64 to rounding, over all 96 config combinations of the block-equality test; with dropout, the same masks;
and the graph after the forward pass holds a fraction of the plain one's bytes."""

import numpy as np
import pytest
from test_models_gpt_block_equality import CONFIGS, batch, config, name

import minigrad as mg
from models.gpt import GPT


def loss_and_grads(model, idx, targets):
    _, loss = model(idx, targets)
    loss.backward()
    return loss.item(), {k: p.grad.numpy() for k, p in model.named_parameters()}


@pytest.mark.parametrize("changes", CONFIGS, ids=name)
def test_checkpointed_gpt_has_the_plain_gradients(changes):
    c = config(**changes)
    idx, targets = batch(c)
    plain_loss, plain = loss_and_grads(GPT(c, seed=0).to(np.float64), idx, targets)
    model = GPT(c, seed=0, checkpoint=True).to(np.float64)
    ck_loss, checkpointed = loss_and_grads(model, idx, targets)
    assert ck_loss == plain_loss
    assert list(checkpointed) == list(plain)
    for key in plain:
        np.testing.assert_allclose(checkpointed[key], plain[key], rtol=1e-12, atol=1e-15, err_msg=key)


@pytest.mark.parametrize("changes", [{}, dict(position="rope", mlp="swiglu", n_kv_head=2)], ids=name)
def test_checkpointed_gpt_replays_its_dropout_masks(changes):
    c = config(dropout=0.3, **changes)
    idx, targets = batch(c)
    reference = GPT(c, seed=0).to(np.float64)  # the same seed: the same weights and the same dropout masks
    plain_loss, plain = loss_and_grads(reference, idx, targets)
    model = GPT(c, seed=0, checkpoint=True).to(np.float64)
    ck_loss, checkpointed = loss_and_grads(model, idx, targets)
    assert ck_loss == plain_loss
    for key in plain:
        np.testing.assert_allclose(checkpointed[key], plain[key], rtol=1e-12, atol=1e-15, err_msg=key)
    # the recomputation put the model's generator back: the next step draws what the plain model's draws
    assert model.drop.rng.bit_generator.state == reference.drop.rng.bit_generator.state


def test_checkpointed_gpt_keeps_a_fraction_of_the_activations():
    c = config(n_layer=4, d_model=32, block_size=16)
    idx, targets = batch(c, B=4, T=16)
    held = {}
    for flag in (False, True):
        _, loss = GPT(c, seed=0, checkpoint=flag)(idx, targets)
        held[flag] = mg.autograd.graph_bytes(loss)
    assert held[True].parameters == held[False].parameters
    assert held[True].activations < 0.2 * held[False].activations
    assert held[True].nodes < 20 < held[False].nodes


def test_checkpoint_is_off_for_generation_and_under_no_grad():
    c = config()
    model = GPT(c, seed=0, checkpoint=True)
    out = model.generate(np.zeros((1, 1), dtype=np.int64), 4, temperature=0)
    assert out.shape == (1, 5)
    assert np.array_equal(out, GPT(c, seed=0).generate(np.zeros((1, 1), dtype=np.int64), 4, temperature=0))
