"""minigrad.nn.functional: values, gradients (finite differences), masks and error messages."""

import math

import numpy as np
import pytest
from nn_helpers import randn

import minigrad as mg
from minigrad import nn
from minigrad.nn import functional as F


def erf(x):
    return np.vectorize(math.erf)(x)


# --------------------------------------------------------------------------------------
# Activations
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("fn", [F.relu, F.silu, F.sigmoid, F.tanh, F.gelu, lambda x: F.gelu(x, approximate="tanh"),
                                lambda x: F.softmax(x, dim=0), lambda x: F.log_softmax(x, dim=-1)])
def test_activation_gradients(fn):
    assert mg.gradcheck(fn, randn(3, 4, requires_grad=True))


def test_activation_values():
    x = np.linspace(-4, 4, 17)
    t = mg.Tensor(x)
    np.testing.assert_allclose(F.gelu(t).data, 0.5 * x * (1 + erf(x / np.sqrt(2))), rtol=1e-12, atol=1e-15)
    tanh_form = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    np.testing.assert_allclose(F.gelu(t, approximate="tanh").data, tanh_form, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(F.silu(t).data, x / (1 + np.exp(-x)), rtol=1e-12)
    np.testing.assert_array_equal(F.relu(t).data, np.maximum(x, 0))
    with pytest.raises(ValueError, match="approximate"):
        F.gelu(t, approximate="fast")


def _gelu_composite(x, approximate):
    if approximate == "tanh":
        return 0.5 * x * (1.0 + (math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)).tanh())
    return 0.5 * x * (1.0 + (x * (1.0 / math.sqrt(2.0))).erf())


def _layer_norm_composite(x, weight, bias, eps):
    centred = x - x.mean(axis=-1, keepdims=True)
    return centred / (centred.var(-1, keepdim=True, correction=0) + eps).sqrt() * weight + bias


def _rms_norm_composite(x, weight, eps):
    return x / ((x * x).mean(axis=-1, keepdims=True) + eps).sqrt() * weight


def _cross_entropy_composite(logits, target, ignore_index, reduction):
    counted = target != ignore_index  # (N,)
    picked = logits.log_softmax(axis=-1)[np.arange(len(target)), np.where(counted, target, 0)]  # (N,)
    losses = -picked.masked_fill(~counted, 0.0)
    if reduction == "none":
        return losses
    return losses.sum() if reduction == "sum" else losses.sum() / max(int(counted.sum()), 1)


def test_fused_primitives_agree_with_the_composites():
    x, w, b = randn(2, 3, 5), randn(5, seed=1), randn(5, seed=2)
    for approximate in ("none", "tanh"):
        np.testing.assert_allclose(F.gelu(x, approximate).data, _gelu_composite(x, approximate).data, atol=1e-12)
    np.testing.assert_allclose(F.layer_norm(x, (5,), w, b).data,
                               _layer_norm_composite(x, w, b, 1e-5).data, atol=1e-12)
    np.testing.assert_allclose(F.rms_norm(x, (5,), w).data, _rms_norm_composite(x, w, 1e-6).data, atol=1e-12)
    logits, targets = randn(4, 5), np.array([0, 4, -100, 2])
    for reduction in ("mean", "sum", "none"):
        np.testing.assert_allclose(F.cross_entropy(logits, targets, reduction=reduction).data,
                                   _cross_entropy_composite(logits, targets, -100, reduction).data, atol=1e-12)


# --------------------------------------------------------------------------------------
# Cross-entropy
# --------------------------------------------------------------------------------------


def test_cross_entropy_matches_the_formula():
    logits, targets = randn(4, 5), np.array([0, 3, 4, 1])
    log_probs = logits.data - np.log(np.exp(logits.data).sum(-1, keepdims=True))
    per_row = -log_probs[np.arange(4), targets]
    np.testing.assert_allclose(F.cross_entropy(logits, targets).item(), per_row.mean(), rtol=1e-12)
    np.testing.assert_allclose(F.cross_entropy(logits, targets, reduction="sum").item(), per_row.sum(), rtol=1e-12)
    np.testing.assert_allclose(F.cross_entropy(logits, targets, reduction="none").data, per_row, rtol=1e-12)


def test_cross_entropy_takes_classes_on_dim_1_and_ignores_targets():
    logits, targets = randn(2, 5, 3), np.array([[1, 2, -100], [4, -100, 0]])  # (N, C, d1), (N, d1): PyTorch's layout
    rows = logits.data.transpose(0, 2, 1).reshape(6, 5)
    flat = F.cross_entropy(mg.Tensor(rows), targets.reshape(6))
    np.testing.assert_allclose(F.cross_entropy(logits, targets).item(), flat.item(), rtol=1e-12)
    per = F.cross_entropy(logits, targets, reduction="none")
    assert per.shape == (2, 3) and per.data[0, 2] == 0 and per.data[1, 1] == 0
    np.testing.assert_allclose(flat.item(), per.data.sum() / 4, rtol=1e-12)  # mean over the 4 counted targets
    all_ignored = F.cross_entropy(logits, np.full((2, 3), -100))
    assert all_ignored.item() == 0.0  # not NaN


def test_cross_entropy_refuses_classes_on_the_last_axis_and_says_how_to_flatten():
    logits = randn(2, 3, 5)  # (B, T, C): PyTorch would read C as a position and 3 as the classes
    with pytest.raises(ValueError, match=r"expected target of shape \(2, 5\).*got \(2, 3\); the classes go on dim 1.*"
                                         r"cross_entropy\(input.reshape\(-1, 5\), target.reshape\(-1\)\)"):
        F.cross_entropy(logits, np.zeros((2, 3), dtype=np.int64))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_gradient(reduction):
    targets = np.array([[1, 2, -1], [4, 0, 0]])
    assert mg.gradcheck(lambda z: F.cross_entropy(z, targets, ignore_index=-1, reduction=reduction),
                        randn(2, 5, 3, requires_grad=True))


def test_cross_entropy_is_stable_for_huge_logits():
    logits = mg.Tensor(np.array([[1e4, 0.0, -1e4], [0.0, 3e4, 3e4]]), requires_grad=True)
    loss = F.cross_entropy(logits, np.array([1, 2]))
    loss.backward()
    np.testing.assert_allclose(loss.item(), (1e4 + np.log(2)) / 2, rtol=1e-12)
    assert np.isfinite(logits.grad.data).all()


def test_cross_entropy_errors():
    logits = randn(2, 5, 3)
    with pytest.raises(IndexError, match=r"cross_entropy: target holds class id 5, outside \[0, classes=5\) "
                                         r"\(1 such id\(s\); target shape \(2, 3\).*use -100 for positions without"):
        F.cross_entropy(logits, np.array([[0, 1, 5], [0, 0, 0]]))
    with pytest.raises(IndexError, match="class id -2"):
        F.cross_entropy(logits, np.array([[0, 1, -2], [0, 0, 0]]))
    with pytest.raises(ValueError, match=r"expected target of shape \(2, 3\) for input \(2, 5, 3\) \(classes on "
                                         r"dim 1\), got \(6,\)"):
        F.cross_entropy(logits, np.zeros(6, dtype=int))
    with pytest.raises(TypeError, match="cross_entropy: target must hold integer class ids"):
        F.cross_entropy(logits, np.zeros((2, 3)))
    with pytest.raises(ValueError, match="'avg' is not a valid value for reduction"):
        F.cross_entropy(logits, np.zeros((2, 3), dtype=int), reduction="avg")


# --------------------------------------------------------------------------------------
# Normalisation, dropout, embedding, linear
# --------------------------------------------------------------------------------------


def test_layer_norm_and_rms_norm_values_and_gradients():
    x, w, b = randn(2, 3, 6, requires_grad=True), randn(6, seed=1, requires_grad=True), randn(6, seed=2,
                                                                                            requires_grad=True)
    plain = F.layer_norm(x, 6).data
    np.testing.assert_allclose(plain.mean(-1), 0, atol=1e-12)
    np.testing.assert_allclose(plain.var(-1), 1, rtol=1e-4)  # eps keeps it a little under 1
    expected = (x.data - x.data.mean(-1, keepdims=True)) / np.sqrt(x.data.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(F.layer_norm(x, (6,), w, b).data, expected * w.data + b.data, rtol=1e-12)
    rms = x.data / np.sqrt((x.data ** 2).mean(-1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(F.rms_norm(x, 6, w).data, rms * w.data, rtol=1e-12)
    assert mg.gradcheck(lambda x, w, b: F.layer_norm(x, (6,), w, b), (x, w, b))
    assert mg.gradcheck(lambda x: F.layer_norm(x, (6,)), x)
    assert mg.gradcheck(lambda x, w: F.rms_norm(x, (6,), w), (x, w))
    with pytest.raises(ValueError, match=r"layer_norm: normalized_shape \(5,\).*\(2, 3, 6\)"):
        F.layer_norm(x, 5)


def test_dropout():
    x = mg.Tensor(np.ones((200, 100)))
    assert F.dropout(x, 0.3, training=False) is x
    assert F.dropout(x, 0.0) is x
    y = F.dropout(x, 0.3, rng=np.random.default_rng(0)).data
    assert set(np.unique(y)) == {0.0, 1 / 0.7}  # inverted dropout: survivors are scaled up
    assert abs((y == 0).mean() - 0.3) < 0.01 and abs(y.mean() - 1.0) < 0.02
    again = F.dropout(x, 0.3, rng=np.random.default_rng(0)).data
    np.testing.assert_array_equal(y, again)  # the generator decides the mask
    np.testing.assert_array_equal(F.dropout(x, 1.0).data, 0)
    assert F.dropout(mg.Tensor(np.ones(3, np.float32)), 0.5).dtype == np.float32
    with pytest.raises(ValueError, match="probability"):
        F.dropout(x, 1.5)
    # with a fixed mask, dropout is linear: gradcheck it
    assert mg.gradcheck(lambda t: F.dropout(t, 0.4, rng=np.random.default_rng(1)), randn(3, 4, requires_grad=True))


def test_dropout_default_generator_follows_manual_seed():
    x = mg.Tensor(np.ones(50))
    nn.manual_seed(7)
    first = F.dropout(x, 0.5).data
    nn.manual_seed(7)
    np.testing.assert_array_equal(F.dropout(x, 0.5).data, first)


def test_embedding_and_linear():
    weight = randn(5, 3, requires_grad=True)
    ids = np.array([[0, 4], [4, 4]])
    np.testing.assert_array_equal(F.embedding(ids, weight).data, weight.data[ids])
    assert mg.gradcheck(lambda w: F.embedding(ids, w), weight)  # repeated ids accumulate gradient
    with pytest.raises(IndexError, match=r"embedding: ids holds token id 5, outside \[0, num_embeddings=5\) "
                                         r"\(1 such id\(s\); ids shape \(2,\)"):
        F.embedding(np.array([1, 5]), weight)
    with pytest.raises(IndexError, match="token id -1"):
        F.embedding(np.array([-1, 0]), weight)  # NumPy would silently wrap around
    with pytest.raises(TypeError, match="integer token ids"):
        F.embedding(np.array([0.0, 1.0]), weight)
    x, w, b = randn(2, 3, requires_grad=True), randn(4, 3, seed=1, requires_grad=True), randn(4, seed=2,
                                                                                            requires_grad=True)
    np.testing.assert_allclose(F.linear(x, w, b).data, x.data @ w.data.T + b.data, rtol=1e-12)
    assert mg.gradcheck(F.linear, (x, w, b))


# --------------------------------------------------------------------------------------
# scaled_dot_product_attention
# --------------------------------------------------------------------------------------


def reference_attention(q, k, v, keep=None, scale=None):
    """softmax(q k^T * scale) v written out in NumPy; keep: bool mask (True = may attend)."""
    scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ np.swapaxes(k, -1, -2) * scale
    if keep is not None:
        scores = np.where(keep, scores, -np.inf)
    e = np.exp(scores - scores.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ v


def qkv(B=2, H=2, Tq=3, Tk=4, E=4, Hkv=None):
    return (randn(B, H, Tq, E, seed=1, requires_grad=True), randn(B, Hkv or H, Tk, E, seed=2, requires_grad=True),
            randn(B, Hkv or H, Tk, E, seed=3, requires_grad=True))


def test_attention_matches_the_formula():
    q, k, v = qkv()
    out, weights = F.scaled_dot_product_attention(q, k, v, return_weights=True)
    np.testing.assert_allclose(out.data, reference_attention(q.data, k.data, v.data), rtol=1e-12)
    np.testing.assert_allclose(weights.data.sum(-1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(F.scaled_dot_product_attention(q, k, v, scale=0.3).data,
                               reference_attention(q.data, k.data, v.data, scale=0.3), rtol=1e-12)


def test_causal_mask_aligns_queries_with_the_last_keys():
    q, k, v = qkv(Tq=4, Tk=4)
    full = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    np.testing.assert_allclose(full.data, reference_attention(q.data, k.data, v.data, np.tril(np.ones((4, 4), bool))),
                               rtol=1e-12)
    # The last two queries against all four keys: the rows of the square causal result for positions 2, 3.
    last = F.scaled_dot_product_attention(q[:, :, 2:], k, v, is_causal=True)
    np.testing.assert_allclose(last.data, full.data[:, :, 2:], rtol=1e-12)


def test_bool_and_additive_masks_agree():
    q, k, v = qkv()
    keep = np.random.default_rng(0).random((2, 1, 3, 4)) < 0.7
    keep[..., 0] = True
    with_bool = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    with_float = F.scaled_dot_product_attention(q, k, v, attn_mask=np.where(keep, 0.0, -np.inf))
    np.testing.assert_allclose(with_bool.data, reference_attention(q.data, k.data, v.data, keep), rtol=1e-12)
    np.testing.assert_allclose(with_float.data, with_bool.data, rtol=1e-12)


def test_fully_masked_rows_give_zero_output_and_gradient_never_nan():
    q, k, v = qkv()
    keep = np.ones((3, 4), bool)
    keep[1] = False  # query 1 may attend to nothing
    for mask in (keep, np.where(keep, 0.0, -np.inf)):
        out, weights = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, return_weights=True)
        assert np.isfinite(out.data).all()
        np.testing.assert_array_equal(out.data[:, :, 1], 0.0)
        np.testing.assert_array_equal(weights.data[:, :, 1], 0.0)
        gq, gk, gv = mg.grad(out.sum(), [q, k, v])
        assert all(np.isfinite(g.data).all() for g in (gq, gk, gv))
        np.testing.assert_array_equal(gq.data[:, :, 1], 0.0)
    # and so backward through the masked row agrees with finite differences
    assert mg.gradcheck(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=keep), (q, k, v))


@pytest.mark.parametrize("kind", ["none", "causal", "bool", "float", "float tensor", "causal and bool"])
def test_attention_gradients_with_each_mask(kind):
    q, k, v = qkv(B=1, Tq=3, Tk=3, E=3)
    keep = np.array([[True, False, True], [True, True, False], [False, True, True]])
    bias = mg.Tensor(np.random.default_rng(4).standard_normal((3, 3)), requires_grad=True)
    options = {"none": {}, "causal": {"is_causal": True}, "bool": {"attn_mask": keep},
               "float": {"attn_mask": np.where(keep, 0.5, -np.inf)}, "float tensor": {},
               "causal and bool": {"is_causal": True, "attn_mask": keep}}[kind]
    if kind == "float tensor":  # a learned additive bias (ALiBi/T5 style) gets a gradient too
        assert mg.gradcheck(lambda q, k, v, b: F.scaled_dot_product_attention(q, k, v, attn_mask=b), (q, k, v, bias))
    else:
        assert mg.gradcheck(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, **options), (q, k, v))


def test_grouped_query_attention_shares_each_kv_head_with_its_group():
    q, k, v = qkv(H=4, Hkv=2)
    keep = np.random.default_rng(0).random((1, 4, 3, 4)) < 0.8  # a different mask per query head
    out, weights = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, enable_gqa=True, return_weights=True)
    k_rep, v_rep = np.repeat(k.data, 2, axis=1), np.repeat(v.data, 2, axis=1)  # heads 0, 1 use kv head 0, ...
    assert out.shape == (2, 4, 3, 4) and weights.shape == (2, 4, 3, 4)
    np.testing.assert_allclose(out.data, reference_attention(q.data, k_rep, v_rep, keep), rtol=1e-12)
    assert mg.gradcheck(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True),
                        (q, k, v))


def test_attention_dropout_is_reproducible_and_off_at_zero():
    q, k, v = qkv()
    a = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5, rng=np.random.default_rng(3))
    b = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5, rng=np.random.default_rng(3))
    plain = F.scaled_dot_product_attention(q, k, v)
    np.testing.assert_array_equal(a.data, b.data)
    assert not np.allclose(a.data, plain.data)


def test_attention_errors_name_the_shapes():
    q, k, v = qkv()
    with pytest.raises(ValueError, match=r"attn_mask of shape \(3, 5\) does not broadcast.*\(2, 2, 3, 4\)"):
        F.scaled_dot_product_attention(q, k, v, attn_mask=np.ones((3, 5), bool))
    with pytest.raises(ValueError, match=r"query \(2, 2, 3, 4\), key \(2, 2, 4, 3\)"):
        F.scaled_dot_product_attention(q, randn(2, 2, 4, 3), v)
    with pytest.raises(ValueError, match="multiple of the key/value heads"):
        F.scaled_dot_product_attention(randn(2, 3, 3, 4), k, v, enable_gqa=True)
    with pytest.raises(TypeError, match="attn_mask must be bool"):
        F.scaled_dot_product_attention(q, k, v, attn_mask=np.ones((3, 4), int))


def test_attention_keeps_float32():
    q, k, v = (t.astype(np.float32) for t in qkv())
    assert F.scaled_dot_product_attention(q, k, v, is_causal=True).dtype == np.float32
    assert F.scaled_dot_product_attention(q, k, v, attn_mask=np.zeros((3, 4))).dtype == np.float32


# --------------------------------------------------------------------------------------
# Against PyTorch, when it is installed
# --------------------------------------------------------------------------------------


def test_functional_matches_pytorch():
    torch = pytest.importorskip("torch")
    tF = torch.nn.functional
    x, w, b = randn(2, 3, 5), randn(5, seed=1), randn(5, seed=2)
    T = torch.from_numpy
    np.testing.assert_allclose(F.gelu(x).data, tF.gelu(T(x.data)).numpy(), rtol=1e-10)
    np.testing.assert_allclose(F.gelu(x, "tanh").data, tF.gelu(T(x.data), approximate="tanh").numpy(), rtol=1e-10)
    np.testing.assert_allclose(F.layer_norm(x, (5,), w, b).data,
                               tF.layer_norm(T(x.data), (5,), T(w.data), T(b.data)).numpy(), rtol=1e-10)
    targets = np.array([1, 4, -100, 0, 2, 3])
    np.testing.assert_allclose(F.cross_entropy(x.reshape(6, 5), targets).item(),
                               tF.cross_entropy(T(x.data.reshape(6, 5)), T(targets)).item(), rtol=1e-10)
    q, k, v = qkv()
    keep = np.random.default_rng(0).random((3, 4)) < 0.7
    keep[:, 0] = True
    expected = tF.scaled_dot_product_attention(T(q.data), T(k.data), T(v.data), attn_mask=T(keep)).numpy()
    np.testing.assert_allclose(F.scaled_dot_product_attention(q, k, v, attn_mask=keep).data, expected, rtol=1e-10)
    q4, k2, v2 = qkv(H=4, Hkv=2, Tq=4, Tk=4)  # square: PyTorch aligns causal masks top-left when Tq != Tk
    expected = tF.scaled_dot_product_attention(T(q4.data), T(k2.data), T(v2.data), is_causal=True,
                                               enable_gqa=True).numpy()
    got = F.scaled_dot_product_attention(q4, k2, v2, is_causal=True, enable_gqa=True)
    np.testing.assert_allclose(got.data, expected, rtol=1e-10)


def test_embedding_needs_a_two_dimensional_weight():
    ids = np.array([0, 1])
    for weight in (mg.ones(4), mg.ones(4, 2, 3)):
        with pytest.raises(ValueError, match=r"embedding: weight must be a 2-D Tensor \(num_embeddings, dim\)"):
            F.embedding(ids, weight)
    assert F.embedding(ids, mg.ones(4, 2)).shape == (2, 2)
