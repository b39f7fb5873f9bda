"""Positional information: sinusoidal and learned encodings, RoPE, and why attention needs them."""

import numpy as np
import pytest
from nn_helpers import randn

import minigrad as mg
from minigrad import nn


def test_sinusoidal_encoding_is_the_papers_formula():
    T, d = 7, 6
    pe = nn.sinusoidal_encoding(T, d, dtype=np.float64).data
    assert pe.shape == (T, d)
    for pos in range(T):
        for i in range(d // 2):
            angle = pos / 10000 ** (2 * i / d)
            assert pe[pos, 2 * i] == pytest.approx(np.sin(angle), abs=1e-15)
            assert pe[pos, 2 * i + 1] == pytest.approx(np.cos(angle), abs=1e-15)
    odd = nn.sinusoidal_encoding(T, 5, dtype=np.float64).data  # an odd width ends with a sine column
    positions = np.arange(T)
    for i in range(3):
        np.testing.assert_allclose(odd[:, 2 * i], np.sin(positions / 10000 ** (2 * i / 5)), atol=1e-15)
    for i in range(2):
        np.testing.assert_allclose(odd[:, 2 * i + 1], np.cos(positions / 10000 ** (2 * i / 5)), atol=1e-15)
    shifted = nn.sinusoidal_encoding(3, d, offset=4, dtype=np.float64).data
    np.testing.assert_array_equal(shifted, pe[4:7])
    assert nn.sinusoidal_encoding(3, 4).dtype == np.float32


def test_sinusoidal_module_adds_the_encoding():
    enc = nn.SinusoidalPositionalEncoding(4)
    x = randn(2, 3, 4)
    np.testing.assert_allclose(enc(x, offset=2).data, x.data + nn.sinusoidal_encoding(5, 4, dtype=np.float64).data[2:])
    assert enc.num_parameters() == 0
    assert enc(x.astype(np.float32)).dtype == np.float32
    assert mg.gradcheck(lambda t: enc(t), randn(2, 3, 4, requires_grad=True))
    with pytest.raises(ValueError, match=r"SinusoidalPositionalEncoding\(d_model=4.*\(2, 3, 5\)"):
        enc(randn(2, 3, 5))


def test_learned_positional_embedding():
    pos = nn.LearnedPositionalEmbedding(6, 4)
    x = randn(2, 3, 4)
    out = pos.double()(x, offset=2)
    np.testing.assert_array_equal(out.data, x.data + pos.weight.data[2:5])
    assert nn.gradcheck_module(pos, randn(2, 3, 4), forward=lambda m, t: m(t, offset=1))
    with pytest.raises(IndexError, match=r"LearnedPositionalEmbedding\(max_len=6, d_model=4\): positions 4..6"):
        pos(x, offset=4)


def test_rope_rotates_each_half_split_pair_by_position_times_frequency():
    head_dim, base = 6, 10000.0
    rope = nn.RotaryEmbedding(head_dim, base)
    x = randn(2, 5, head_dim)
    out = rope(x, offset=3).data
    half = head_dim // 2
    for pos in range(5):
        for j in range(half):  # pair (j, j + half) turns by angle (3 + pos) * base^(-2j/head_dim)
            angle = (3 + pos) * base ** (-2 * j / head_dim)
            a, b = x.data[:, pos, j], x.data[:, pos, j + half]
            np.testing.assert_allclose(out[:, pos, j], a * np.cos(angle) - b * np.sin(angle), atol=1e-14)
            np.testing.assert_allclose(out[:, pos, j + half], b * np.cos(angle) + a * np.sin(angle), atol=1e-14)
    np.testing.assert_allclose(np.linalg.norm(out, axis=-1), np.linalg.norm(x.data, axis=-1), rtol=1e-12)
    assert mg.gradcheck(lambda t: rope(t, offset=2), randn(1, 2, 3, head_dim, requires_grad=True))
    assert rope(x.astype(np.float32)).dtype == np.float32


def test_rope_scores_depend_only_on_the_offset_between_query_and_key():
    rope = nn.RotaryEmbedding(8)
    q, k = randn(1, 8, seed=1), randn(1, 8, seed=2)

    def score(m, n):
        return (rope(q, offset=m).data @ rope(k, offset=n).data.T).item()

    for m, n in [(0, 0), (3, 1), (1, 5), (7, 7)]:
        for shift in (1, 10, 123):
            assert score(m + shift, n + shift) == pytest.approx(score(m, n), rel=1e-10, abs=1e-12)
    assert abs(score(0, 3) - score(0, 0)) > 1e-3  # but they do depend on the offset


def test_rope_head_dim_must_be_even():
    with pytest.raises(ValueError, match="RotaryEmbedding: RoPE rotates features in pairs, so head_dim = 5 must be "
                                         "even"):
        nn.RotaryEmbedding(5)


def test_attention_without_positions_is_permutation_equivariant_and_with_them_it_is_not():
    rng = np.random.default_rng(0)
    perm = np.array([3, 0, 4, 1, 2])
    x = randn(2, 5, 8)
    plain = nn.MultiHeadAttention(8, 2, rng=rng).double()
    out = plain(x).data
    np.testing.assert_allclose(plain(x[:, perm]).data, out[:, perm], rtol=1e-12)  # just permuted

    rotary = nn.MultiHeadAttention(8, 2, rope=True, rng=np.random.default_rng(0)).double()
    assert not np.allclose(rotary(x[:, perm]).data, rotary(x).data[:, perm], atol=1e-6)

    encode = nn.SinusoidalPositionalEncoding(8)
    out = plain(encode(x)).data
    assert not np.allclose(plain(encode(x[:, perm])).data, out[:, perm], atol=1e-6)
