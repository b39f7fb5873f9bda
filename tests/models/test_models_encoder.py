"""models.encoder: the bidirectional masked-LM encoder and BERT's masking."""

import dataclasses

import numpy as np
import pytest
from models_helpers import fit

from minigrad import io, nn, optim
from models.encoder import EncoderConfig, MaskedLM, mask_tokens

VOCAB, MASK, PAD = 12, 11, 0


def tokens(*shape, seed=0, low=1, high=MASK):
    return np.random.default_rng(seed).integers(low, high, size=shape)


def encoder(seed=0, **changes) -> MaskedLM:
    fields = dict(vocab_size=VOCAB, block_size=8, n_layer=2, n_head=4, d_model=16, pad_id=PAD)
    fields.update(changes)
    return MaskedLM(EncoderConfig(**fields), seed=seed)


# --------------------------------------------------------------------------------------
# Masking
# --------------------------------------------------------------------------------------


def test_masking_follows_bert_proportions():
    ids = tokens(400, 50)
    ids[:, -5:] = PAD
    inputs, targets = mask_tokens(ids, mask_id=MASK, vocab_size=VOCAB, rng=np.random.default_rng(0),
                                  special_ids=[PAD])
    assert inputs.shape == targets.shape == ids.shape and inputs.dtype == targets.dtype == np.int64
    chosen = targets != -100
    np.testing.assert_array_equal(targets[chosen], ids[chosen])  # targets: the original tokens
    assert not chosen[:, -5:].any()  # special tokens are never chosen
    np.testing.assert_array_equal(inputs[~chosen], ids[~chosen])  # the rest is untouched
    n = chosen.sum()
    assert abs(n / (400 * 45) - 0.15) < 0.01
    masked = (inputs == MASK) & chosen
    kept = (inputs == ids) & chosen
    replaced = chosen & ~masked & ~kept
    assert abs(masked.sum() / n - 0.8) < 0.02
    # A random replacement may draw the original token (1 in 12): those count as kept here.
    assert abs(kept.sum() / n - (0.1 + 0.1 / VOCAB)) < 0.02
    assert abs(replaced.sum() / n - 0.1 * (1 - 1 / VOCAB)) < 0.02
    again = mask_tokens(ids, mask_id=MASK, vocab_size=VOCAB, rng=np.random.default_rng(0), special_ids=[PAD])
    np.testing.assert_array_equal(again[0], inputs)  # reproducible from the rng


def test_masking_rejects_bad_arguments():
    with pytest.raises(ValueError, match=r"mask_id=12 is not a token id in \[0, vocab_size=12\)"):
        mask_tokens(tokens(2, 3), mask_id=12, vocab_size=VOCAB, rng=np.random.default_rng(0))
    with pytest.raises(TypeError, match="rng must be a numpy.random.Generator, got int"):
        mask_tokens(tokens(2, 3), mask_id=MASK, vocab_size=VOCAB, rng=0)
    with pytest.raises(ValueError, match=r"mask_tokens: idx holds token id 12"):
        mask_tokens(np.array([[12]]), mask_id=MASK, vocab_size=VOCAB, rng=np.random.default_rng(0))


# --------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------


def test_config_checks_and_round_trips():
    c = EncoderConfig(vocab_size=VOCAB, block_size=8)
    assert c.d_ff == 4 * c.d_model and EncoderConfig(**dataclasses.asdict(c)) == c
    with pytest.raises(ValueError, match="d_model=10 must be divisible by n_head=4"):
        EncoderConfig(vocab_size=VOCAB, block_size=8, d_model=10)
    with pytest.raises(ValueError, match=r"position='rope'; expected one of \('learned', 'sinusoidal'\)"):
        EncoderConfig(vocab_size=VOCAB, block_size=8, position="rope")
    with pytest.raises(ValueError, match=r"pad_id=12 is not a token id in \[0, vocab_size=12\)"):
        EncoderConfig(vocab_size=VOCAB, block_size=8, pad_id=12)


def test_every_position_sees_both_sides_but_not_padding():
    m = encoder()
    x = tokens(2, 6)
    changed = x.copy()
    changed[:, 5] = (changed[:, 5] % 10) + 1
    logits = m(x)[0].data
    assert logits.shape == (2, 6, VOCAB)
    assert (np.abs(m(changed)[0].data[:, 0] - logits[:, 0]).max(axis=-1) > 1e-3).all()  # the first sees the last
    padded = np.concatenate([x, np.full((2, 2), PAD)], axis=1)
    np.testing.assert_allclose(m(padded)[0].data[:, :6], logits, atol=1e-5)  # padding is invisible


@pytest.mark.parametrize("changes", [{}, dict(position="sinusoidal", norm="rmsnorm", tie_weights=False)])
def test_learns_to_fill_in_masked_tokens(changes):
    m = encoder(**changes)
    ids = tokens(4, 8, seed=1)
    inputs, targets = mask_tokens(ids, mask_id=MASK, vocab_size=VOCAB, rng=np.random.default_rng(2), mask_prob=0.3)
    assert (targets != -100).sum() >= 5
    opt = optim.AdamW(m.parameters(), lr=1e-2, weight_decay=0.0)
    assert fit(m, opt, inputs, targets, steps=60) < 0.05  # from about log(12) = 2.5


@pytest.mark.parametrize("changes", [{}, dict(position="sinusoidal", norm="rmsnorm", gelu_approximate="none")])
def test_gradients_of_the_loss_match_finite_differences(changes):
    m = encoder(d_model=4, n_head=2, d_ff=6, block_size=4, vocab_size=6, pad_id=None, **changes)
    x = tokens(2, 4, high=6)
    targets = np.array([[-100, 2, -100, 5], [1, -100, -100, 0]])
    assert nn.gradcheck_module(m, forward=lambda mod: mod(x, targets)[1])


def test_bad_inputs_name_the_argument():
    m = encoder()
    with pytest.raises(ValueError, match=r"MaskedLM.forward: idx holds token id 12, outside \[0, vocab_size=12\)"):
        m(np.array([[1, 12]]))
    with pytest.raises(ValueError, match=r"idx has shape \(1, 9\): 9 positions, but the model takes 1 to "
                                         r"block_size=8"):
        m(tokens(1, 9))
    with pytest.raises(ValueError, match=r"targets must have shape \(2, 3\) .* got \(3,\)"):
        m(tokens(2, 3), np.array([1, 2, 3]))


def test_checkpoint_round_trip(tmp_path):
    m = encoder()
    io.save(tmp_path / "mlm.safetensors", m, config=m.config)
    fresh = MaskedLM(EncoderConfig(**io.load(tmp_path / "mlm.safetensors").config), seed=9)
    io.load(tmp_path / "mlm.safetensors", fresh)
    x = tokens(2, 8)
    np.testing.assert_array_equal(fresh(x)[0].data, m(x)[0].data)
