"""models.seq2seq: the encoder-decoder transformer, teacher forcing, decoding, cross-attention weights."""

import dataclasses

import numpy as np
import pytest
from models_helpers import fit

import minigrad as mg
from minigrad import io, nn, optim
from models.seq2seq import Seq2Seq, Seq2SeqConfig

PAD, BOS, EOS = 0, 1, 2  # digits are the tokens 3..12
VOCAB = 13


def model(seed=0, **changes) -> Seq2Seq:
    fields = dict(src_vocab_size=VOCAB, tgt_vocab_size=VOCAB, block_size=8, n_layer=2, n_head=4, d_model=16,
                  pad_id=PAD, bos_id=BOS, eos_id=EOS)
    fields.update(changes)
    return Seq2Seq(Seq2SeqConfig(**fields), seed=seed)


def reversal_batch(rows=4, length=5, seed=0):
    """src: digits; tgt_in: BOS + reversed digits; tgt_out: reversed digits + EOS."""
    src = np.random.default_rng(seed).integers(3, VOCAB, size=(rows, length))
    target = src[:, ::-1]
    tgt_in = np.concatenate([np.full((rows, 1), BOS), target], axis=1)
    tgt_out = np.concatenate([target, np.full((rows, 1), EOS)], axis=1)
    return src, tgt_in, tgt_out


def test_config_checks_and_round_trips():
    c = Seq2SeqConfig(src_vocab_size=5, tgt_vocab_size=6, block_size=4, eos_id=5)
    assert c.d_ff == 4 * c.d_model and Seq2SeqConfig(**dataclasses.asdict(c)) == c
    with pytest.raises(ValueError, match="d_model=18 must be divisible by n_head=4"):
        Seq2SeqConfig(src_vocab_size=5, tgt_vocab_size=6, block_size=4, d_model=18)
    with pytest.raises(ValueError, match=r"eos_id=6 is not a target token id in \[0, tgt_vocab_size=6\)"):
        Seq2SeqConfig(src_vocab_size=5, tgt_vocab_size=6, block_size=4, eos_id=6)
    with pytest.raises(ValueError, match=r"pad_id=5 must be a token id in both vocabularies"):
        Seq2SeqConfig(src_vocab_size=5, tgt_vocab_size=6, block_size=4, pad_id=5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_learns_to_reverse_a_batch_and_decodes_it_greedily(norm_first):
    m = model(norm_first=norm_first)
    src, tgt_in, tgt_out = reversal_batch()
    opt = optim.AdamW(m.parameters(), lr=3e-3, weight_decay=0.0)
    assert fit(m, opt, src, tgt_in, tgt_out, steps=100) < 0.05  # from about log(13) = 2.6
    decoded = m.greedy_decode(src, 8)
    np.testing.assert_array_equal(decoded, tgt_out)  # all rows ended with EOS, so decoding stopped there
    np.testing.assert_array_equal(m.greedy_decode(src, 8, use_cache=False), decoded)


def test_cached_and_uncached_decoding_agree_and_pad_after_eos():
    m = model(tgt_vocab_size=5)  # an untrained model: EOS (2) comes at random places
    src = np.array([[3, 4, 5, 6, 0, 0], [7, 8, 9, 10, 11, 12]])
    cached, cached_logits = m.generate(src, 8, temperature=0.0, return_logits=True)
    plain, plain_logits = m.generate(src, 8, temperature=0.0, use_cache=False, return_logits=True)
    np.testing.assert_array_equal(cached, plain)
    np.testing.assert_allclose(cached_logits, plain_logits, atol=1e-5, rtol=0)
    assert cached.dtype == np.int64 and cached.shape[0] == 2 and cached.shape[1] <= 8
    # The first step's logits are the teacher-forced prediction after BOS.
    np.testing.assert_allclose(cached_logits[:, 0], m(src, np.full((2, 1), BOS))[0].data[:, 0], atol=1e-5)
    sampled = [m.generate(src, 6, rng=np.random.default_rng(2), use_cache=c, return_logits=True) for c in (True, False)]
    np.testing.assert_array_equal(sampled[0][0], sampled[1][0])
    np.testing.assert_allclose(sampled[0][1], sampled[1][1], atol=1e-5, rtol=0)
    tokens = sampled[0][0]
    ended = [np.flatnonzero(row == EOS) for row in tokens]
    assert any(len(e) and e[0] < tokens.shape[1] - 1 for e in ended)  # this draw ends a row early...
    for row, ends in zip(tokens, ended):
        if len(ends):
            assert (row[ends[0] + 1:] == PAD).all()  # ...and after a row's EOS comes only padding


def test_decoding_feeds_one_token_per_step_to_the_decoder(monkeypatch):
    m = model(eos_id=None)
    src = reversal_batch()[0]
    lengths, grad_modes = [], []
    decode = Seq2Seq.decode

    def spy(self, tgt_in, *args, **kwargs):
        lengths.append(np.asarray(tgt_in).shape[1])
        grad_modes.append(mg.is_grad_enabled())
        return decode(self, tgt_in, *args, **kwargs)

    monkeypatch.setattr(Seq2Seq, "decode", spy)
    out = m.greedy_decode(src, 5)
    assert out.shape == (4, 5) and lengths == [1] * 5 and not any(grad_modes)
    lengths.clear()
    m.greedy_decode(src, 5, use_cache=False)
    assert lengths == [1, 2, 3, 4, 5]


def test_cross_attention_weights_are_distributions_that_skip_source_padding():
    m = model()
    src = np.array([[3, 4, 5, 0, 0], [6, 7, 8, 9, 10]])
    tgt_in = np.array([[BOS, 5, 4, 3], [BOS, 10, 9, 8]])
    logits, loss, cross = m(src, tgt_in, return_attention=True)
    assert loss is None and len(cross) == 2
    for weights in cross:
        assert weights.shape == (2, 4, 4, 5)  # (B, n_head, T, S)
        np.testing.assert_allclose(weights.data.sum(-1), 1.0, atol=1e-6)
        assert (weights.data[0, ..., 3:] == 0).all()  # no attention to padding
    np.testing.assert_array_equal(logits.data, m(src, tgt_in)[0].data)
    # Padding changes nothing: the same source without its padding gives the same logits.
    np.testing.assert_allclose(m(src[:1, :3], tgt_in[:1])[0].data, logits.data[:1], atol=1e-5)


def test_decoder_is_causal():
    m = model()
    src, tgt_in, _ = reversal_batch()
    changed = tgt_in.copy()
    changed[:, 4:] = 3
    a, b = m(src, tgt_in)[0].data, m(src, changed)[0].data
    np.testing.assert_allclose(a[:, :4], b[:, :4], atol=1e-6)
    assert np.abs(a[:, 4:] - b[:, 4:]).max() > 1e-3


@pytest.mark.parametrize("changes", [{}, dict(norm_first=True, position="learned", mlp="gelu", tie_weights=False)])
def test_gradients_of_the_loss_match_finite_differences(changes):
    m = model(n_layer=1, n_head=2, d_model=4, d_ff=6, src_vocab_size=5, tgt_vocab_size=5, block_size=4, **changes)
    src = np.array([[3, 4, 0], [4, 3, 3]])  # with padding
    tgt_in, tgt_out = np.array([[BOS, 4, 3], [BOS, 3, 3]]), np.array([[4, 3, EOS], [3, 3, 0]])
    assert nn.gradcheck_module(m, forward=lambda mod: mod(src, tgt_in, tgt_out)[1])


def test_bad_inputs_name_the_argument():
    m = model()
    src, tgt_in, tgt_out = reversal_batch()
    with pytest.raises(ValueError, match=r"Seq2Seq.forward: src holds token id 13, outside \[0, vocab_size=13\)"):
        m(np.array([[3, 13]]), tgt_in[:1])
    with pytest.raises(ValueError, match=r"tgt_in has shape \(4, 9\): 9 positions, but the model takes 1 to "
                                         r"block_size=8"):
        m(src, np.ones((4, 9), dtype=int))
    with pytest.raises(ValueError, match=r"tgt_out must have shape \(4, 6\) .* got \(4, 5\)"):
        m(src, tgt_in, tgt_out[:, :5])
    with pytest.raises(ValueError, match="must have the same batch size"):
        m(src[:2], tgt_in)
    with pytest.raises(ValueError, match="max_new_tokens=9 needs 9 decoder positions, more than block_size=8"):
        m.greedy_decode(src, 9)


def test_checkpoint_round_trip(tmp_path):
    m = model()
    io.save(tmp_path / "s2s.safetensors", m, config=m.config)
    fresh = Seq2Seq(Seq2SeqConfig(**io.load(tmp_path / "s2s.safetensors").config), seed=3)
    io.load(tmp_path / "s2s.safetensors", fresh)
    src, tgt_in, _ = reversal_batch()
    np.testing.assert_array_equal(fresh(src, tgt_in)[0].data, m(src, tgt_in)[0].data)
