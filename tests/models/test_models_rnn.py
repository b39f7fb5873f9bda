"""models.RNNLM: the RNN, LSTM and GRU language models behind GPT's interface."""

import dataclasses

import numpy as np
import pytest
from models_helpers import VOCAB, fit, memorable_batch, tokens

import minigrad as mg
from minigrad import io, nn, optim
from models.rnn import RNNLM, RNNConfig

CELLS = ["rnn", "lstm", "gru"]


def model(cell="lstm", seed=0, **changes) -> RNNLM:
    fields = dict(vocab_size=VOCAB, cell=cell, d_model=8, hidden_size=16)
    fields.update(changes)
    return RNNLM(RNNConfig(**fields), seed=seed)


def test_config_checks_and_round_trips():
    c = RNNConfig(vocab_size=5)
    assert RNNConfig(**dataclasses.asdict(c)) == c
    with pytest.raises(ValueError, match=r"cell='transformer'; expected one of \('rnn', 'lstm', 'gru'\)"):
        RNNConfig(vocab_size=5, cell="transformer")
    with pytest.raises(ValueError, match="tie_weights needs hidden_size == d_model .* got hidden_size=16, d_model=8"):
        RNNConfig(vocab_size=5, d_model=8, hidden_size=16, tie_weights=True)
    with pytest.raises(ValueError, match="n_layer must be a positive integer, got 0"):
        RNNConfig(vocab_size=5, n_layer=0)


@pytest.mark.parametrize("cell", CELLS)
def test_forward_matches_gpt_interface_and_state_continues_a_sequence(cell):
    m = model(cell, n_layer=2)
    x = tokens(3, 7)
    logits, loss = m(x)
    assert logits.shape == (3, 7, VOCAB) and logits.dtype == np.float32 and loss is None
    _, loss = m(x, tokens(3, 7, seed=1))
    assert abs(loss.item() - np.log(VOCAB)) < 0.5
    # Running the first 4 steps, then the rest from the carried state, is running all 7.
    head, state = m.unroll(x[:, :4])
    tail, _ = m.unroll(x[:, 4:], state)
    np.testing.assert_allclose(np.concatenate([head.data, tail.data], 1), logits.data, atol=1e-6)


@pytest.mark.parametrize("cell", CELLS)
def test_overfits_one_batch(cell):
    m = model(cell, hidden_size=32)
    batch = memorable_batch()
    opt = optim.Adam(m.parameters(), lr=2e-2)
    assert fit(m, opt, batch[:, :-1], batch[:, 1:], steps=60) < 0.05  # from about log(11) = 2.4


@pytest.mark.parametrize("cell", CELLS)
def test_gradients_of_the_loss_match_finite_differences(cell):
    m = model(cell, d_model=3, hidden_size=4, n_layer=2, vocab_size=5)
    x, y = tokens(2, 4, high=5), tokens(2, 4, seed=1, high=5)
    assert nn.gradcheck_module(m, forward=lambda mod: mod(x, y)[1])


def test_tied_head_shares_the_embedding():
    m = model("rnn", d_model=3, hidden_size=3, vocab_size=4, tie_weights=True)
    assert m.lm_head.weight is m.tok_emb.weight
    x, y = tokens(2, 3, high=4), tokens(2, 3, seed=1, high=4)
    assert nn.gradcheck_module(m, forward=lambda mod: mod(x, y)[1])


@pytest.mark.parametrize("cell", CELLS)
def test_generation_carries_the_state_one_step_per_token(cell, monkeypatch):
    m = model(cell, n_layer=2)
    prompt = tokens(2, 4)
    cached, cached_logits = m.generate(prompt, 10, temperature=0.0, return_logits=True)
    plain, plain_logits = m.generate(prompt, 10, temperature=0.0, use_cache=False, return_logits=True)
    np.testing.assert_array_equal(cached, plain)
    np.testing.assert_allclose(cached_logits, plain_logits, atol=1e-5, rtol=0)
    np.testing.assert_array_equal(cached[:, :4], prompt)
    a = m.generate(prompt, 8, top_p=0.9, rng=np.random.default_rng(3))
    b = m.generate(prompt, 8, top_p=0.9, rng=np.random.default_rng(3), use_cache=False)
    np.testing.assert_array_equal(a, b)

    lengths, grad_modes = [], []
    unroll = RNNLM.unroll

    def spy(self, idx, state=None):
        lengths.append(np.asarray(idx).shape[1])
        grad_modes.append(mg.is_grad_enabled())
        return unroll(self, idx, state)

    monkeypatch.setattr(RNNLM, "unroll", spy)
    m.generate(prompt, 5, temperature=0.0)
    assert lengths == [4, 1, 1, 1, 1] and not any(grad_modes)


def test_bad_inputs_name_the_argument():
    m = model()
    with pytest.raises(ValueError, match=r"RNNLM.forward: idx holds token id 11, outside \[0, vocab_size=11\)"):
        m(np.array([[3, 11]]))
    with pytest.raises(ValueError, match=r"targets must have shape \(1, 2\) .* got \(2, 1\)"):
        m(np.array([[3, 4]]), np.array([[3], [4]]))
    with pytest.raises(ValueError, match=r"idx must have at least one position, got shape \(2, 0\)"):
        m(np.zeros((2, 0), dtype=np.int64))
    with pytest.raises(ValueError, match="top_k must be a positive integer or None, got 0"):
        m.generate(tokens(1, 2), 3, top_k=0)


def test_checkpoint_round_trip(tmp_path):
    m = model("lstm", n_layer=2)
    io.save(tmp_path / "lstm.safetensors", m, config=m.config)
    fresh = RNNLM(RNNConfig(**io.load(tmp_path / "lstm.safetensors").config), seed=5)
    io.load(tmp_path / "lstm.safetensors", fresh)
    x = tokens(2, 6)
    np.testing.assert_array_equal(fresh(x)[0].data, m(x)[0].data)
