"""MultiHeadAttention: the formula, masks, GQA, RoPE, cross-attention, the KV cache, gradients, errors."""

import numpy as np
import pytest
from nn_helpers import copy_weights, randn

import minigrad as mg
from minigrad import nn


def make(d_model=8, n_heads=2, seed=0, **options):
    return nn.MultiHeadAttention(d_model, n_heads, rng=np.random.default_rng(seed), **options).double()


def project(layer, x):
    return x @ layer.weight.data.T + layer.bias.data


def softmax(s):
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_one_head_equals_the_plain_formula():
    attn = make(d_model=4, n_heads=1)
    x = randn(2, 5, 4).data
    Q, K, V = project(attn.q_proj, x), project(attn.k_proj, x), project(attn.v_proj, x)  # (B, T, 4)
    expected = project(attn.out_proj, softmax(Q @ K.transpose(0, 2, 1) / np.sqrt(4)) @ V)
    np.testing.assert_allclose(attn(mg.Tensor(x)).data, expected, rtol=1e-12)


def test_heads_are_independent_attentions_side_by_side():
    attn = make(d_model=6, n_heads=3)
    x = randn(2, 4, 6).data
    Q, K, V = project(attn.q_proj, x), project(attn.k_proj, x), project(attn.v_proj, x)
    heads = [softmax(Q[..., s] @ K[..., s].transpose(0, 2, 1) / np.sqrt(2)) @ V[..., s]
             for s in (slice(0, 2), slice(2, 4), slice(4, 6))]
    expected = project(attn.out_proj, np.concatenate(heads, axis=-1))
    out, weights = attn(mg.Tensor(x), need_weights=True)
    np.testing.assert_allclose(out.data, expected, rtol=1e-12)
    assert weights.shape == (2, 3, 4, 4)
    np.testing.assert_allclose(weights.data[:, 1], softmax(Q[..., 2:4] @ K[..., 2:4].transpose(0, 2, 1) / np.sqrt(2)),
                               rtol=1e-12)


def test_gqa_with_as_many_kv_heads_as_heads_is_mha():
    mha, gqa = make(n_heads=4), make(n_heads=4, n_kv_heads=4, seed=1)
    copy_weights(mha, gqa)
    x = randn(2, 5, 8)
    np.testing.assert_array_equal(gqa(x, is_causal=True).data, mha(x, is_causal=True).data)


def test_gqa_equals_mha_whose_kv_heads_are_repeated_over_each_group():
    gqa = make(n_heads=4, n_kv_heads=2)
    assert gqa.k_proj.weight.shape == (4, 8)  # 2 kv heads of head_dim 2
    mha = make(n_heads=4, seed=1)
    state = {name: t.numpy() for name, t in gqa.state_dict().items()}
    for name in ("k_proj", "v_proj"):  # query heads 0, 1 share kv head 0; heads 2, 3 share kv head 1
        w, b = state[f"{name}.weight"].reshape(2, 2, 8), state[f"{name}.bias"].reshape(2, 2)
        state[f"{name}.weight"] = np.repeat(w, 2, axis=0).reshape(8, 8)
        state[f"{name}.bias"] = np.repeat(b, 2, axis=0).reshape(8)
    mha.load_state_dict(state)
    x = randn(2, 5, 8)
    out_gqa, w_gqa = gqa(x, is_causal=True, need_weights=True)
    out_mha, w_mha = mha(x, is_causal=True, need_weights=True)
    np.testing.assert_allclose(out_gqa.data, out_mha.data, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(w_gqa.data, w_mha.data, rtol=1e-12, atol=1e-14)


def test_causal_mask_makes_earlier_outputs_independent_of_later_tokens():
    attn = make()
    x = randn(2, 5, 8)
    changed = mg.Tensor(x.data.copy())
    changed.data[:, -1] += 10.0
    before, after = attn(x, is_causal=True), attn(changed, is_causal=True)
    np.testing.assert_array_equal(before.data[:, :-1], after.data[:, :-1])  # exactly, not approximately
    assert not np.allclose(before.data[:, -1], after.data[:, -1])
    weights = attn(x, is_causal=True, need_weights=True)[1].data
    np.testing.assert_array_equal(np.triu(weights, k=1), 0.0)


def test_key_padding_mask_hides_padded_keys():
    attn = make()
    x = randn(2, 5, 8)
    padding = np.array([[False, False, False, True, True], [False] * 5])  # sequence 0 has length 3
    changed = mg.Tensor(x.data.copy())
    changed.data[0, 3:] = 99.0  # new values at the padded positions only
    a, weights = attn(x, key_padding_mask=padding, need_weights=True)
    b = attn(changed, key_padding_mask=padding)
    np.testing.assert_allclose(a.data[0, :3], b.data[0, :3], rtol=1e-12)  # real tokens never see the padding
    np.testing.assert_array_equal(weights.data[0, :, :, 3:], 0.0)
    np.testing.assert_allclose(a.data[1], attn(x[1:2]).data[0], rtol=1e-12)  # no padding: as if unmasked


def test_fully_padded_sequence_gives_no_nan():
    attn = make()
    x = randn(2, 3, 8, requires_grad=True)
    padding = np.array([[True, True, True], [False, False, True]])
    out = attn(x, key_padding_mask=padding)
    np.testing.assert_allclose(out.data[0], np.broadcast_to(attn.out_proj.bias.data, (3, 8)))  # attention gave 0
    out.sum().backward()
    assert all(np.isfinite(p.grad.data).all() for p in attn.parameters()) and np.isfinite(x.grad.data).all()


def test_masks_combine():
    attn = make()
    x = randn(1, 4, 8)
    keep = np.array([[True, True, False, True]] * 4)
    padding = np.array([[False, False, False, True]])
    combined = attn(x, attn_mask=keep, key_padding_mask=padding, is_causal=True, need_weights=True)[1].data
    expected_zero = ~(keep & ~padding[0] & np.tril(np.ones((4, 4), bool)))
    assert (combined[0][:, expected_zero] == 0).all() and (combined[0][:, ~expected_zero] > 0).all()
    additive = attn(x, attn_mask=np.where(keep, 0.0, -np.inf), key_padding_mask=padding, is_causal=True,
                    need_weights=True)[1].data
    np.testing.assert_allclose(additive, combined, rtol=1e-12)


@pytest.mark.parametrize("options", [
    {"rope": True},
    {"n_kv_heads": 1},
    {"n_kv_heads": 2, "rope": True},
])
def test_kv_cached_decoding_equals_the_full_causal_forward(options):
    attn = make(n_heads=4, **options)
    x = randn(2, 6, 8)
    full = attn(x, is_causal=True).data
    cache = nn.KVCache()
    steps = [attn(x[:, :2], is_causal=True, cache=cache)]  # prefill two tokens, then one at a time
    for t in range(2, 6):
        steps.append(attn(x[:, t:t + 1], is_causal=True, cache=cache))
    np.testing.assert_allclose(np.concatenate([s.data for s in steps], axis=1), full, rtol=0, atol=1e-10)
    assert cache.length == 6 and cache.k.shape == (2, attn.n_kv_heads, 6, 2)  # GQA: only n_kv_heads are cached
    cache.crop(3)
    assert cache.length == 3
    np.testing.assert_allclose(attn(x[:, 3:4], is_causal=True, cache=cache).data, full[:, 3:4], atol=1e-10)
    cache.reset()
    assert cache.length == 0 and cache.k is None


def test_cross_attention():
    attn = make()
    x, memory = randn(2, 3, 8), randn(2, 5, 8, seed=1)
    out, weights = attn(x, memory, need_weights=True)
    assert out.shape == (2, 3, 8) and weights.shape == (2, 2, 3, 5)
    Q, K, V = project(attn.q_proj, x.data), project(attn.k_proj, memory.data), project(attn.v_proj, memory.data)
    per_head = [softmax(Q[..., s] @ K[..., s].transpose(0, 2, 1) / 2.0) for s in (slice(0, 4), slice(4, 8))]
    np.testing.assert_allclose(weights.data, np.stack(per_head, axis=1), rtol=1e-12)
    heads = np.concatenate([w @ V[..., s] for w, s in zip(per_head, (slice(0, 4), slice(4, 8)))], axis=-1)
    np.testing.assert_allclose(out.data, project(attn.out_proj, heads), rtol=1e-12)
    padding = np.array([[False] * 4 + [True], [False] * 5])
    masked = attn(x, memory, key_padding_mask=padding, need_weights=True)[1].data
    np.testing.assert_array_equal(masked[0, :, :, 4], 0.0)


def test_cross_attention_cache_projects_the_memory_once():
    attn = make()
    x, memory = randn(2, 3, 8), randn(2, 5, 8, seed=1)
    full = attn(x, memory).data
    cache = nn.KVCache()
    steps = [attn(x[:, t:t + 1], memory, cache=cache).data for t in range(3)]
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, atol=1e-12)
    assert cache.length == 5  # the memory's positions, stored once


def test_dropout_on_attention_weights_only_while_training():
    attn = make(dropout=0.5)
    x = randn(2, 4, 8)
    attn.rng = np.random.default_rng(0)
    a = attn(x).data
    attn.rng = np.random.default_rng(0)
    np.testing.assert_array_equal(attn(x).data, a)  # reproducible given the generator
    attn.eval()
    evaluated = attn(x).data
    assert not np.allclose(a, evaluated)
    np.testing.assert_array_equal(attn(x).data, evaluated)


# --------------------------------------------------------------------------------------
# Gradients: inputs and every parameter, with each mask and variant
# --------------------------------------------------------------------------------------

_KEEP = np.array([[True, False, True], [True, True, False], [False, True, True]])


@pytest.mark.parametrize("variant", ["plain", "causal", "padding", "bool mask", "float mask", "gqa", "rope",
                                     "gqa+rope+causal", "fully masked row"])
def test_self_attention_gradients(variant):
    options = {"gqa": {"n_kv_heads": 1}, "rope": {"rope": True},
               "gqa+rope+causal": {"n_kv_heads": 1, "rope": True}}.get(variant, {})
    call = {"causal": {"is_causal": True}, "gqa+rope+causal": {"is_causal": True},
            "padding": {"key_padding_mask": np.array([[False, False, True], [False, True, True]])},
            "bool mask": {"attn_mask": _KEEP}, "float mask": {"attn_mask": np.where(_KEEP, 0.3, -np.inf)},
            "fully masked row": {"attn_mask": np.array([[True] * 3, [False] * 3, [True, True, False]])}
            }.get(variant, {})
    attn = make(d_model=4, n_heads=2, **options)
    assert nn.gradcheck_module(attn, randn(2, 3, 4), forward=lambda m, x: m(x, **call))


def test_cross_attention_gradients_reach_the_memory():
    attn = make(d_model=4, n_heads=2, n_kv_heads=1)
    padding = np.array([[False, False, False, True], [False] * 4])
    assert nn.gradcheck_module(attn, randn(2, 2, 4), randn(2, 4, 4, seed=1),
                            forward=lambda m, x, mem: m(x, mem, key_padding_mask=padding))


def test_gradients_flow_through_the_kv_cache():
    attn = make(d_model=4, n_heads=2, rope=True)

    def decode(m, x):
        cache = nn.KVCache()
        return tuple(m(x[:, t:t + 1], is_causal=True, cache=cache) for t in range(x.shape[1]))

    assert nn.gradcheck_module(attn, randn(1, 3, 4), forward=decode)


def test_returned_weights_are_differentiable():
    attn = make(d_model=4, n_heads=2)
    assert nn.gradcheck_module(attn, randn(1, 3, 4), forward=lambda m, x: m(x, is_causal=True, need_weights=True)[1])


# --------------------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------------------


def test_construction_errors():
    with pytest.raises(ValueError, match="d_model=10 must be divisible by n_heads=3"):
        nn.MultiHeadAttention(10, 3)
    with pytest.raises(ValueError, match="n_heads=4 must be divisible by n_kv_heads=3"):
        nn.MultiHeadAttention(8, 4, n_kv_heads=3)
    with pytest.raises(ValueError, match="RotaryEmbedding has head_dim=6"):
        nn.MultiHeadAttention(8, 2, rope=nn.RotaryEmbedding(6))


def test_forward_errors_name_the_layer_and_shapes():
    attn = make()
    x = randn(2, 3, 8)
    with pytest.raises(ValueError, match=r"MultiHeadAttention\(d_model=8, n_heads=2\).*\(2, 3, 6\).*8 features"):
        attn(randn(2, 3, 6))
    with pytest.raises(ValueError, match=r"MultiHeadAttention.*\(B, T, 8\).*\(3, 8\)"):
        attn(randn(3, 8))
    with pytest.raises(ValueError, match=r"MultiHeadAttention.*attn_mask of shape \(3, 4\).*\(2, 2, 3, 3\)"):
        attn(x, attn_mask=np.ones((3, 4), bool))
    with pytest.raises(ValueError, match=r"key_padding_mask must be bool \(B, Tk\) = \(2, 3\).*\(2, 4\)"):
        attn(x, key_padding_mask=np.zeros((2, 4), bool))
    with pytest.raises(ValueError, match="is_causal applies to self-attention"):
        attn(x, randn(2, 5, 8), is_causal=True)
    with pytest.raises(ValueError, match=r"memory must be \(B, Tk, 8\).*\(3, 5, 8\)"):
        attn(x, randn(3, 5, 8))
    cache = nn.KVCache()
    attn(x, is_causal=True, cache=cache)
    with pytest.raises(ValueError, match=r"KVCache: new keys \(1, 2, 1, 4\)"):
        attn(x[:1, :1], is_causal=True, cache=cache)  # a different batch size


# --------------------------------------------------------------------------------------
# Against PyTorch, when it is installed
# --------------------------------------------------------------------------------------


def test_matches_torch_multihead_attention():
    torch = pytest.importorskip("torch")
    attn = make(d_model=8, n_heads=2)
    ref = torch.nn.MultiheadAttention(8, 2, batch_first=True, dtype=torch.float64)
    s = {name: t.numpy() for name, t in attn.state_dict().items()}
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.from_numpy(np.concatenate([s[f"{n}_proj.weight"] for n in "qkv"])))
        ref.in_proj_bias.copy_(torch.from_numpy(np.concatenate([s[f"{n}_proj.bias"] for n in "qkv"])))
        ref.out_proj.weight.copy_(torch.from_numpy(s["out_proj.weight"]))
        ref.out_proj.bias.copy_(torch.from_numpy(s["out_proj.bias"]))
    x = randn(2, 4, 8)
    padding = np.array([[False, False, False, True], [False] * 4])
    causal_blocked = np.triu(np.ones((4, 4), bool), 1)  # torch's MHA mask: True = may NOT attend
    tx, tpad = torch.from_numpy(x.data), torch.from_numpy(padding)
    expected, expected_w = ref(tx, tx, tx, key_padding_mask=tpad, attn_mask=torch.from_numpy(causal_blocked),
                               need_weights=True, average_attn_weights=False)
    out, weights = attn(x, is_causal=True, key_padding_mask=padding, need_weights=True)
    np.testing.assert_allclose(out.data, expected.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(weights.data, expected_w.detach().numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("composite", [False, True])
def test_a_float64_attention_mask_is_refused_by_a_float32_layer(composite):
    attn = nn.MultiHeadAttention(4, 2)
    x = mg.zeros(1, 3, 4)
    with mg.composite_mode(composite), pytest.raises(TypeError, match=r"the attn_mask is float64 but the layer's "
                                                                      r"parameters are float32"):
        attn(x, attn_mask=mg.tensor(np.zeros((3, 3))))
    assert attn(x, attn_mask=mg.zeros(3, 3)).dtype == np.float32
    assert attn(x, attn_mask=mg.tensor(np.ones((3, 3), bool))).dtype == np.float32
