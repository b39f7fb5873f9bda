"""Differential tests of minigrad.nn (functional and layers) against torch.nn, and the dtype rule.

Each layer gets PyTorch's weights copied in (or its own copied out), runs on the
same hypothesis-drawn input, and must agree in output and in every parameter's
and input's gradient; float32 runs are held to a float64 PyTorch reference.

The dtype rule, tested at the end: a leaf's gradient has the leaf's dtype and
shape; a layer given an input of another dtype than its parameters raises a
TypeError naming the layer, both dtypes and the fix (PyTorch's behaviour); a
hook's returned gradient must have the tensor's shape and is cast to its dtype.
"""

import numpy as np
import pytest
import torch_diff_helpers as H
from hypothesis import given
from hypothesis import strategies as st

import minigrad as mg
from minigrad import nn
from minigrad.nn import functional as F

torch = pytest.importorskip("torch")
H.use_torch(torch)
TF = torch.nn.functional
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

DTYPE = st.sampled_from(H.DTYPES)
SEED = st.integers(0, 2**16)


def _t(array, dtype=np.float64, grad=True):
    return torch.tensor(np.asarray(array, dtype=dtype), requires_grad=grad)


def _compare_module(ours: nn.Module, theirs_fn, params_map: dict, x: np.ndarray, seed: int, rtol=None, scale=0.0):
    """Run ours(x) and theirs_fn(x, params) in float64 and in x's dtype; compare output and all gradients.

    ``params_map``: our parameter name -> array it holds (the same values go to PyTorch).
    """
    dtype = x.dtype
    ours.to(dtype)
    xt = mg.Tensor(x, requires_grad=True)
    out = ours(xt)
    ref_params = {name: _t(value) for name, value in params_map.items()}
    same_params = {name: _t(value, dtype) for name, value in params_map.items()}
    x64, xs = _t(x), _t(x, dtype)
    ref, same = theirs_fn(x64, ref_params), theirs_fn(xs, same_params)
    H.assert_agrees(out, ref, same, dtype=dtype, rtol=rtol, scale=scale, what="output")
    g = H.upstream_like(out.shape, dtype, seed)
    out.backward(g)
    ref.backward(torch.from_numpy(g.astype(np.float64)))
    same.backward(torch.from_numpy(g))
    H.assert_agrees(xt.grad, x64.grad, xs.grad, dtype=dtype, rtol=rtol, scale=scale, what="input gradient")
    named = dict(ours.named_parameters())
    for name in params_map:
        p = named[name]
        assert p.grad.dtype == p.dtype and p.grad.shape == p.shape
        H.assert_agrees(p.grad, ref_params[name].grad, same_params[name].grad, dtype=dtype, rtol=rtol, scale=scale,
                        what=f"gradient of {name}")


def _params(module: nn.Module) -> dict:
    return {name: p.data.astype(np.float64) for name, p in module.named_parameters()}


# --------------------------------------------------------------------------------------
# Linear, norms, embedding, activations as layers
# --------------------------------------------------------------------------------------


@given(dtype=DTYPE, seed=SEED, batch=st.sampled_from([(), (0,), (3,), (2, 3)]), bias=st.booleans(),
       sizes=st.tuples(st.integers(1, 4), st.integers(1, 4)))
def test_linear(dtype, seed, batch, bias, sizes):
    n_in, n_out = sizes
    layer = nn.Linear(n_in, n_out, bias=bias, rng=np.random.default_rng(seed))
    x = np.random.default_rng(seed + 1).standard_normal(batch + (n_in,)).astype(dtype)
    _compare_module(layer, lambda v, p: TF.linear(v, p["weight"], p.get("bias")), _params(layer), x, seed,
                    scale=8.0)


def test_linear_with_zero_in_features_gives_the_bias():
    # Regression: linear reshaped with -1, which NumPy cannot infer when in_features is 0.
    layer = nn.Linear(0, 3)
    out = layer(mg.zeros(2, 0))
    np.testing.assert_array_equal(out.data, np.broadcast_to(layer.bias.data, (2, 3)))
    out.sum().backward()
    assert layer.weight.grad.shape == (3, 0)
    np.testing.assert_array_equal(layer.bias.grad.data, [2, 2, 2])


@given(dtype=DTYPE, seed=SEED, offset=st.sampled_from([0.0, 1e3, -50.0]), constant=st.booleans(),
       affine=st.booleans())
def test_layer_norm(dtype, seed, offset, constant, affine):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((3, 5)) + offset
    if constant:
        x[1] = offset  # a constant row: variance 0, only eps keeps it finite
    layer = nn.LayerNorm(5, elementwise_affine=affine)
    if affine:
        layer.weight.data = rng.standard_normal(5).astype(np.float32)
        layer.bias.data = rng.standard_normal(5).astype(np.float32)
    params = _params(layer)
    _compare_module(layer, lambda v, p: TF.layer_norm(v, (5,), p.get("weight"), p.get("bias"), 1e-5),
                    params, x.astype(dtype), seed, rtol=1e-4 if dtype == np.float32 else 1e-9, scale=10.0)


@given(dtype=DTYPE, seed=SEED, scale=st.sampled_from([1.0, 1e-3, 1e3]))
def test_rms_norm(dtype, seed, scale):
    rng = np.random.default_rng(seed)
    layer = nn.RMSNorm(4)
    layer.weight.data = rng.standard_normal(4).astype(np.float32)
    x = (rng.standard_normal((2, 3, 4)) * scale).astype(dtype)
    _compare_module(layer, lambda v, p: TF.rms_norm(v, (4,), p["weight"], 1e-6), _params(layer), x, seed,
                    rtol=1e-4 if dtype == np.float32 else 1e-9, scale=10.0)


@given(dtype=DTYPE, seed=SEED)
def test_embedding(dtype, seed):
    layer = nn.Embedding(5, 3, rng=np.random.default_rng(seed)).to(dtype)
    ids = np.random.default_rng(seed).integers(0, 5, size=(2, 4))
    weight = _t(layer.weight.data)
    out = layer(ids)
    ref = TF.embedding(torch.from_numpy(ids), weight)
    H.assert_agrees(out, ref, dtype=dtype)
    g = H.upstream_like(out.shape, dtype, seed)
    out.backward(g)
    ref.backward(torch.from_numpy(g.astype(np.float64)))
    H.assert_agrees(layer.weight.grad, weight.grad, dtype=dtype, scale=8.0)  # repeated ids accumulate (sums cancel)
    with pytest.raises(IndexError, match="outside \\[0, num_embeddings"):
        layer(np.array([5]))


ACTIVATIONS = {"ReLU": torch.nn.ReLU, "Tanh": torch.nn.Tanh, "Sigmoid": torch.nn.Sigmoid, "SiLU": torch.nn.SiLU,
               "GELU": torch.nn.GELU, "Identity": torch.nn.Identity}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
@given(x=H.arrays(special=False, lo=-6.0, hi=6.0), seed=SEED)
def test_activation_layers(name, x, seed):
    H.check_function(getattr(nn, name)(), ACTIVATIONS[name](), [x], seed=seed, grad_scale=lambda *a: 1.0)


def test_dropout_edges_match_pytorch():
    x = mg.tensor(np.arange(6.0, dtype=np.float32).reshape(2, 3), requires_grad=True)
    t = torch.tensor(x.data)
    for p in (0.0, 1.0):
        np.testing.assert_array_equal(F.dropout(x, p).data, TF.dropout(t, p).numpy())
    layer = nn.Dropout(0.5).eval()
    np.testing.assert_array_equal(layer(x).data, torch.nn.Dropout(0.5).eval()(t).numpy())
    # In training, kept elements are scaled by 1/(1-p), as in PyTorch, so the mean is kept.
    big = F.dropout(mg.ones(200_000), 0.3, rng=np.random.default_rng(0)).data
    assert set(np.unique(big)) <= {0.0, np.float32(1 / 0.7)}
    assert abs(big.mean() - 1.0) < 0.01


# --------------------------------------------------------------------------------------
# Losses
# --------------------------------------------------------------------------------------


@given(dtype=DTYPE, seed=SEED, reduction=st.sampled_from(["mean", "sum", "none"]), lead=st.sampled_from([(4,), (2, 3)]),
       ignore=st.booleans(), scale=st.sampled_from([1.0, 30.0, 1e4]))
def test_cross_entropy_classes_on_dim_1(dtype, seed, reduction, lead, ignore, scale):
    # PyTorch's layout: logits (N, C) or (N, C, d1), targets (N,) or (N, d1).
    rng = np.random.default_rng(seed)
    logits = (rng.standard_normal(lead[:1] + (5,) + lead[1:]) * scale).astype(dtype)
    targets = rng.integers(0, 5, size=lead)
    if ignore:
        targets.flat[0] = -100
    x = mg.Tensor(logits, requires_grad=True)
    out = F.cross_entropy(x, targets, reduction=reduction)
    ref_x, same_x = _t(logits), _t(logits, dtype)

    def theirs(v):
        return TF.cross_entropy(v, torch.from_numpy(targets), reduction=reduction)

    ref, same = theirs(ref_x), theirs(same_x)
    H.assert_agrees(out, ref, same, dtype=dtype, rtol=1e-4 if dtype == np.float32 else None, scale=scale)
    g = H.upstream_like(out.shape, dtype, seed)
    out.backward(g)
    ref.backward(torch.from_numpy(g.astype(np.float64)))
    same.backward(torch.from_numpy(g))
    H.assert_agrees(x.grad, ref_x.grad, same_x.grad, dtype=dtype, rtol=1e-4 if dtype == np.float32 else None, scale=1.0)


def test_cross_entropy_all_ignored_is_zero_deliberately():
    # PyTorch's mean over zero counted targets is NaN (0 / 0); minigrad's is 0, so a batch of padding cannot poison
    # a running loss. The gradient is 0 on both sides.
    logits = mg.tensor(np.zeros((2, 3)), requires_grad=True)
    loss = F.cross_entropy(logits, np.array([-100, -100]))
    assert torch.isnan(TF.cross_entropy(torch.zeros(2, 3), torch.tensor([-100, -100])))
    assert loss.item() == 0.0
    loss.backward()
    np.testing.assert_array_equal(logits.grad.data, 0.0)


# --------------------------------------------------------------------------------------
# Attention
# --------------------------------------------------------------------------------------


@given(dtype=DTYPE, seed=SEED, mask=st.sampled_from(["none", "bool", "float", "causal"]),
       heads=st.sampled_from([(2, 2), (4, 2), (2, 1)]), tq=st.integers(1, 4))
def test_scaled_dot_product_attention(dtype, seed, mask, heads, tq):
    rng = np.random.default_rng(seed)
    hq, hkv = heads
    tk = tq if mask == "causal" else tq + 1
    q = rng.standard_normal((2, hq, tq, 3)).astype(dtype)
    k = rng.standard_normal((2, hkv, tk, 3)).astype(dtype)
    v = rng.standard_normal((2, hkv, tk, 3)).astype(dtype)
    keep = rng.random((tq, tk)) > 0.3
    keep[:, 0] = True  # every query sees a key (fully masked rows: the deliberate difference below)
    kwargs = {"enable_gqa": hq != hkv}
    if mask == "bool":
        kwargs["attn_mask"] = keep
    elif mask == "float":
        kwargs["attn_mask"] = np.where(keep, rng.standard_normal((tq, tk)), -np.inf).astype(dtype)
    elif mask == "causal":
        kwargs["is_causal"] = True

    def ours(a, b, c):
        return F.scaled_dot_product_attention(a, b, c, **kwargs)

    def theirs(a, b, c):
        extra = dict(kwargs)
        if "attn_mask" in extra:
            extra["attn_mask"] = torch.from_numpy(np.asarray(extra["attn_mask"]))
            if extra["attn_mask"].dtype != torch.bool:
                extra["attn_mask"] = extra["attn_mask"].to(a.dtype)
        return TF.scaled_dot_product_attention(a, b, c, **extra)

    H.check_function(ours, theirs, [q, k, v], seed=seed, rtol=1e-4 if dtype == np.float32 else None,
                     value_scale=4.0, grad_scale=lambda *a: 8.0)


def test_attention_deliberate_differences():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 2, 3)), rng.standard_normal((1, 4, 3)), rng.standard_normal((1, 4, 3)))
    # 1. A query that may attend to no key gets 0 (and zero gradients). Recent PyTorch's SDPA gives 0 too;
    #    older versions, and its plain softmax over such a row, give NaN.
    keep = np.ones((2, 4), bool)
    keep[0] = False
    out = F.scaled_dot_product_attention(mg.tensor(q), mg.tensor(k), mg.tensor(v), attn_mask=keep)
    theirs = TF.scaled_dot_product_attention(*(torch.tensor(a) for a in (q, k, v)), attn_mask=torch.tensor(keep))
    assert torch.isnan(theirs[0, 0]).all() or (theirs[0, 0] == 0).all()
    np.testing.assert_array_equal(out.data[0, 0], 0.0)
    np.testing.assert_allclose(out.data[0, 1], theirs[0, 1].numpy(), rtol=1e-12)
    # 2. is_causal with fewer queries than keys: the queries are the *last* positions (decoding with a cache);
    #    PyTorch aligns them with the first. Ours equals PyTorch given the bottom-right aligned mask.
    ours = F.scaled_dot_product_attention(mg.tensor(q), mg.tensor(k), mg.tensor(v), is_causal=True)
    bottom_right = torch.ones(2, 4, dtype=torch.bool).tril(diagonal=4 - 2)
    theirs = TF.scaled_dot_product_attention(*(torch.tensor(a) for a in (q, k, v)), attn_mask=bottom_right)
    np.testing.assert_allclose(ours.data, theirs.numpy(), rtol=1e-12)
    top_left = TF.scaled_dot_product_attention(*(torch.tensor(a) for a in (q, k, v)), is_causal=True)
    assert not np.allclose(ours.data, top_left.numpy())


@given(seed=SEED, dtype=DTYPE, padding=st.booleans(), causal=st.booleans())
def test_multi_head_attention_matches_torch(seed, dtype, padding, causal):
    ours = nn.MultiHeadAttention(4, 2, rng=np.random.default_rng(seed))
    theirs = torch.nn.MultiheadAttention(4, 2, batch_first=True, dtype=torch.float64)
    with torch.no_grad():  # PyTorch keeps q, k, v stacked in one in_proj
        theirs.in_proj_weight.copy_(torch.from_numpy(np.concatenate(
            [getattr(ours, f"{n}_proj").weight.data for n in "qkv"]).astype(np.float64)))
        theirs.in_proj_bias.copy_(torch.from_numpy(np.concatenate(
            [getattr(ours, f"{n}_proj").bias.data for n in "qkv"]).astype(np.float64)))
        theirs.out_proj.weight.copy_(torch.from_numpy(ours.out_proj.weight.data.astype(np.float64)))
        theirs.out_proj.bias.copy_(torch.from_numpy(ours.out_proj.bias.data.astype(np.float64)))
    ours.to(dtype)
    x = np.random.default_rng(seed + 1).standard_normal((2, 3, 4)).astype(dtype)
    pad = np.zeros((2, 3), bool)
    if padding:
        pad[1, 2] = True
    xt = mg.Tensor(x, requires_grad=True)
    out = ours(xt, is_causal=causal, key_padding_mask=pad if padding else None)
    ref_x = _t(x)
    causal_mask = torch.ones(3, 3, dtype=torch.bool).triu(1) if causal else None  # PyTorch: True = masked
    ref, _ = theirs(ref_x, ref_x, ref_x, key_padding_mask=torch.from_numpy(pad) if padding else None,
                    attn_mask=causal_mask, need_weights=False)
    H.assert_agrees(out, ref, dtype=dtype, rtol=1e-4 if dtype == np.float32 else None, scale=1.0)
    g = H.upstream_like(out.shape, dtype, seed)
    out.backward(g)
    ref.backward(torch.from_numpy(g.astype(np.float64)))
    H.assert_agrees(xt.grad, ref_x.grad, dtype=dtype, rtol=1e-4 if dtype == np.float32 else None, scale=1.0)
    assert ours.q_proj.weight.grad.dtype == dtype


# --------------------------------------------------------------------------------------
# Feed-forward and recurrent layers
# --------------------------------------------------------------------------------------


@given(seed=SEED, dtype=DTYPE, kind=st.sampled_from(["MLP-gelu", "MLP-relu", "SwiGLU"]))
def test_feedforward(seed, dtype, kind):
    rng = np.random.default_rng(seed)
    if kind == "SwiGLU":
        layer = nn.SwiGLU(4, 6, rng=rng)

        def theirs(v, p):
            hidden = TF.silu(TF.linear(v, p["gate_proj.weight"])) * TF.linear(v, p["up_proj.weight"])
            return TF.linear(hidden, p["down_proj.weight"])
    else:
        activation = kind.split("-")[1]
        layer = nn.MLP(4, 6, activation=activation, rng=rng)
        act = TF.gelu if activation == "gelu" else TF.relu

        def theirs(v, p):
            hidden = act(TF.linear(v, p["up_proj.weight"], p["up_proj.bias"]))
            return TF.linear(hidden, p["down_proj.weight"], p["down_proj.bias"])
    x = rng.standard_normal((2, 3, 4)).astype(dtype)
    _compare_module(layer, theirs, _params(layer), x, seed, rtol=1e-4 if dtype == np.float32 else None, scale=4.0)


@pytest.mark.parametrize("name", ["RNNCell", "LSTMCell", "GRUCell"])
@given(seed=SEED, dtype=DTYPE)
def test_recurrent_cells(name, seed, dtype):
    ours = getattr(nn, name)(3, 4, rng=np.random.default_rng(seed))
    theirs = getattr(torch.nn, name)(3, 4, dtype=torch.float64)
    with torch.no_grad():  # the same names, shapes and gate order as PyTorch
        for weight in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            getattr(theirs, weight).copy_(torch.from_numpy(getattr(ours, weight).data.astype(np.float64)))
    ours.to(dtype)
    x = np.random.default_rng(seed + 1).standard_normal((2, 3)).astype(dtype)
    xt, ref_x = mg.Tensor(x, requires_grad=True), _t(x)
    out, ref = ours(xt), theirs(ref_x)
    if name == "LSTMCell":
        out, ref = out[0] + out[1] * 2.0, ref[0] + ref[1] * 2.0
    H.assert_agrees(out, ref, dtype=dtype, rtol=1e-4 if dtype == np.float32 else None, scale=1.0)
    out.backward(np.ones(out.shape, dtype))
    ref.backward(torch.ones_like(ref))
    H.assert_agrees(xt.grad, ref_x.grad, dtype=dtype, rtol=1e-4 if dtype == np.float32 else None, scale=1.0)
    H.assert_agrees(ours.weight_hh.grad, theirs.weight_hh.grad, dtype=dtype,
                    rtol=1e-4 if dtype == np.float32 else None, scale=1.0)


# --------------------------------------------------------------------------------------
# The dtype rule
# --------------------------------------------------------------------------------------


def test_float64_input_to_float32_layer_is_an_error_naming_the_fix():
    layer = nn.Linear(3, 2)
    with pytest.raises(TypeError, match=r"Linear\(in_features=3.*float64.*float32.*x\.astype\(np\.float32\).*"
                                        r"model\.to\(np\.float64\)"):
        layer(mg.Tensor(np.ones((4, 3))))
    for module, x in ((nn.LayerNorm(3), np.ones((2, 3))), (nn.RMSNorm(3), np.ones((2, 3))),
                      (nn.GRUCell(3, 2), np.ones((2, 3))), (nn.MultiHeadAttention(4, 2), np.ones((1, 2, 4))),
                      (nn.Sequential(nn.Linear(3, 3), nn.ReLU()), np.ones((2, 3)))):
        with pytest.raises(TypeError, match="float64 but the layer's parameters are float32"):
            module(mg.Tensor(x))
    with pytest.raises(TypeError, match=r"dtype int64.*floating point"):
        layer(mg.Tensor(np.ones((4, 3), dtype=np.int64)))
    # PyTorch's behaviour is the same error:
    with pytest.raises(RuntimeError):
        torch.nn.Linear(3, 2)(torch.ones(4, 3, dtype=torch.float64))
    # Converting either side, as the message says, works.
    assert layer(mg.Tensor(np.ones((4, 3))).astype(np.float32)).dtype == np.float32
    assert layer.to(np.float64)(mg.Tensor(np.ones((4, 3)))).dtype == np.float64


@given(x_dtype=DTYPE, w_dtype=DTYPE, seed=SEED)
def test_a_leafs_gradient_has_the_leafs_dtype_and_shape(x_dtype, w_dtype, seed):
    # Functions and ops promote as NumPy does (float32 with float64 computes in float64), but the gradient that
    # reaches each tensor is cast to that tensor's dtype, as PyTorch guarantees.
    rng = np.random.default_rng(seed)
    x = mg.Tensor(rng.standard_normal((2, 3)).astype(x_dtype), requires_grad=True)
    w = mg.Tensor(rng.standard_normal((4, 3)).astype(w_dtype), requires_grad=True)
    b = mg.Tensor(rng.standard_normal((1,)).astype(w_dtype), requires_grad=True)  # broadcast: summed back
    out = (F.linear(x, w) * 2.0 + b).tanh().sum()
    out.backward()
    for leaf in (x, w, b):
        assert leaf.grad.dtype == leaf.dtype and leaf.grad.shape == leaf.shape
    (g,) = mg.grad((x * w[:2, :].astype(np.float64)).sum(), x)
    assert g.dtype == x.dtype


def test_hook_results_are_checked():
    x = mg.Tensor(np.ones(3, dtype=np.float32), requires_grad=True, name="x")
    x.register_hook(lambda g: np.full(3, 2.0))  # a float64 ndarray: cast to the tensor's float32
    (x * 3.0).sum().backward()
    assert x.grad.dtype == np.float32
    np.testing.assert_array_equal(x.grad.data, 2.0)

    y = mg.Tensor(np.ones(3, dtype=np.float32), requires_grad=True, name="weights")
    y.register_hook(lambda g: mg.ones(5))
    with pytest.raises(RuntimeError, match=r"hook .* on tensor 'weights' \(a leaf, shape \(3,\) float32\) returned a "
                                           r"gradient of shape \(5,\)"):
        (y * 2.0).sum().backward()
    z = mg.Tensor(np.ones(2), requires_grad=True)
    mid = z * 2.0
    mid.register_hook(lambda g: g.reshape(2, 1))
    with pytest.raises(RuntimeError, match="made by op 'mul', shape \\(2,\\)"):
        mid.sum().backward()
