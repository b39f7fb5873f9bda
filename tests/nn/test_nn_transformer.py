"""Feed-forward networks and the transformer block in each of its variants."""

import numpy as np
import pytest
from nn_helpers import randn

import minigrad as mg
from minigrad import nn
from minigrad.nn import functional as F


def block(**options):
    options.setdefault("rng", np.random.default_rng(0))
    return nn.TransformerBlock(4, 2, 8, **options).double()


# --------------------------------------------------------------------------------------
# Feed-forward
# --------------------------------------------------------------------------------------


def test_mlp_formula_width_and_gradients():
    mlp = nn.MLP(4, expansion=3, activation="relu").double()
    assert mlp.up_proj.weight.shape == (12, 4) and mlp.down_proj.weight.shape == (4, 12)
    x = randn(2, 3, 4)
    hidden = np.maximum(x.data @ mlp.up_proj.weight.data.T + mlp.up_proj.bias.data, 0)
    np.testing.assert_allclose(mlp(x).data, hidden @ mlp.down_proj.weight.data.T + mlp.down_proj.bias.data,
                               rtol=1e-12)
    assert nn.MLP(4, d_ff=6).d_ff == 6 and nn.MLP(4).d_ff == 16
    for activation in ("gelu", "gelu_tanh", "relu", "silu"):
        assert nn.gradcheck_module(nn.MLP(3, 5, activation=activation), randn(2, 3))
    assert nn.gradcheck_module(nn.MLP(3, 5, bias=False), randn(2, 3))
    with pytest.raises(ValueError, match="MLP: activation must be one of"):
        nn.MLP(4, activation="tanh")


def test_swiglu_formula_width_and_gradients():
    ff = nn.SwiGLU(6).double()
    assert ff.d_ff == 16 and ff.num_parameters() == 3 * 6 * 16  # 8/3 * d_model, three matrices, no bias
    x = randn(2, 6)
    gate, up = x.data @ ff.gate_proj.weight.data.T, x.data @ ff.up_proj.weight.data.T
    expected = (gate / (1 + np.exp(-gate)) * up) @ ff.down_proj.weight.data.T
    np.testing.assert_allclose(ff(x).data, expected, rtol=1e-12)
    assert nn.gradcheck_module(nn.SwiGLU(3, 4), randn(2, 3))
    assert nn.gradcheck_module(nn.SwiGLU(3, 4, bias=True), randn(2, 3))


# --------------------------------------------------------------------------------------
# The block
# --------------------------------------------------------------------------------------


def test_pre_norm_block_is_x_plus_sublayer_of_norm():
    b = block(causal=True)
    x = randn(2, 3, 4)
    h = x + b.attn(b.attn_norm(x), is_causal=True)
    expected = h + b.mlp(b.mlp_norm(h))
    np.testing.assert_allclose(b(x).data, expected.data, rtol=1e-12)


def test_post_norm_block_is_norm_of_x_plus_sublayer():
    b = block(norm_first=False, cross_attention=True, causal=True)
    x, memory = randn(2, 3, 4), randn(2, 5, 4, seed=1)
    h = b.attn_norm(x + b.attn(x, is_causal=True))  # LayerNorm(x + Sublayer(x)), as in the original paper
    h = b.cross_norm(h + b.cross_attn(h, memory))
    expected = b.mlp_norm(h + b.mlp(h))
    np.testing.assert_allclose(b(x, memory).data, expected.data, rtol=1e-12)


@pytest.mark.parametrize("options", [
    {},                                                                 # encoder, pre-norm, GELU
    {"causal": True},                                                   # decoder
    {"causal": True, "norm_first": False, "mlp": "relu"},               # the original paper's decoder layer
    {"norm": "rmsnorm", "mlp": "swiglu", "n_kv_heads": 1, "rope": True, "causal": True, "bias": False},  # LLaMA
    {"mlp": "gelu_tanh", "norm_first": False},                          # post-norm encoder
], ids=["encoder", "decoder", "post-norm decoder", "llama-style", "post-norm encoder"])
def test_block_gradients(options):
    padding = np.array([[False, False, True], [False, False, False]])
    assert nn.gradcheck_module(block(**options), randn(2, 3, 4), forward=lambda m, x: m(x, key_padding_mask=padding))


@pytest.mark.parametrize("norm_first", [True, False])
def test_cross_attention_block_gradients(norm_first):
    b = block(causal=True, cross_attention=True, norm_first=norm_first)
    memory_padding = np.array([[False, False, False, True], [False] * 4])
    assert nn.gradcheck_module(b, randn(2, 2, 4), randn(2, 4, 4, seed=1),
                            forward=lambda m, x, mem: m(x, mem, memory_key_padding_mask=memory_padding))


def test_decoder_block_is_causal_and_encoder_block_is_not():
    x = randn(1, 4, 4)
    changed = mg.Tensor(x.data.copy())
    changed.data[0, -1] += [3.0, -2.0, 0.5, 1.0]  # not a constant shift, which LayerNorm would remove
    for options in ({"causal": True}, {"causal": True, "norm_first": False},
                    {"causal": True, "cross_attention": True}):
        b = block(**options)
        memory = randn(1, 3, 4, seed=2) if options.get("cross_attention") else None
        np.testing.assert_array_equal(b(x, memory).data[:, :-1], b(changed, memory).data[:, :-1])
    encoder = block()
    assert not np.allclose(encoder(x).data[:, 0], encoder(changed).data[:, 0])


@pytest.mark.parametrize("options", [{"rope": True, "n_kv_heads": 1, "norm": "rmsnorm", "mlp": "swiglu"},
                                     {"cross_attention": True}])
def test_kv_cached_block_decoding_equals_the_full_forward(options):
    b = block(causal=True, **options)
    x = randn(2, 5, 4)
    memory = randn(2, 3, 4, seed=1) if options.get("cross_attention") else None
    full = b(x, memory).data
    cache, cross_cache = nn.KVCache(), nn.KVCache()
    steps = [b(x[:, t:t + 1], memory, cache=cache, cross_cache=cross_cache).data for t in range(5)]
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, rtol=0, atol=1e-10)


def test_block_returns_attention_weights_by_sublayer():
    b = block(causal=True, cross_attention=True)
    out, weights = b(randn(2, 3, 4), randn(2, 5, 4, seed=1), need_weights=True)
    assert out.shape == (2, 3, 4)
    assert weights["attn"].shape == (2, 2, 3, 3) and weights["cross_attn"].shape == (2, 2, 3, 5)
    np.testing.assert_array_equal(np.triu(weights["attn"].data, 1), 0.0)


def test_dropout_is_applied_to_sublayer_outputs_only_in_training():
    b = block(dropout=0.5)
    x = randn(2, 3, 4)
    b.eval()
    deterministic = b(x).data
    np.testing.assert_array_equal(b(x).data, deterministic)
    b.train()
    assert not np.allclose(b(x).data, deterministic)


def test_block_options_and_errors():
    llama = nn.TransformerBlock(8, 4, n_kv_heads=2, norm="rmsnorm", mlp="swiglu", rope=True, bias=False)
    assert isinstance(llama.attn_norm, nn.RMSNorm) and isinstance(llama.mlp, nn.SwiGLU)
    assert llama.attn.rope is not None and llama.attn.n_kv_heads == 2
    assert all(".bias" not in name for name, _ in llama.named_parameters())
    assert "post-norm" in repr(nn.TransformerBlock(8, 2, norm_first=False))
    with pytest.raises(ValueError, match="norm must be"):
        nn.TransformerBlock(8, 2, norm="batchnorm")
    with pytest.raises(ValueError, match="mlp must be"):
        nn.TransformerBlock(8, 2, mlp="tanh")
    with pytest.raises(ValueError, match="d_model=8 must be divisible by n_heads=3"):
        nn.TransformerBlock(8, 3)
    with pytest.raises(ValueError, match="needs memory"):
        block(cross_attention=True)(randn(1, 2, 4))
    with pytest.raises(ValueError, match="cross_attention=False"):
        block()(randn(1, 2, 4), randn(1, 2, 4))
    with pytest.raises(ValueError, match=r"TransformerBlock\(d_model=4, n_heads=2, encoder.*\(1, 2, 5\)"):
        block()(randn(1, 2, 5))


def test_block_trains_in_float32():
    b = nn.TransformerBlock(8, 2, causal=True, rope=True, n_kv_heads=1)
    x = mg.Tensor(np.random.default_rng(0).standard_normal((2, 4, 8)).astype(np.float32))
    out = b(x)
    assert out.dtype == np.float32
    F.cross_entropy(out.reshape(-1, 8), np.zeros(8, dtype=np.int64)).backward()
    assert all(p.grad is not None and p.grad.dtype == np.float32 for p in b.parameters())
