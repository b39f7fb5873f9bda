"""F.flash_attention: scaled_dot_product_attention in tiles, equal to it in value, gradient and second order.

Generated shapes (hypothesis), every mask kind, block sizes from 1 to past T, T not a multiple of the block,
float64 to 1e-10 and float32 to rounding; against torch when it is installed; the graph it holds grows
linearly with T where plain attention's grows with T^2; GPT(flash=True) trains as the plain GPT does.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minigrad as mg
from minigrad import OPS, optim
from minigrad.nn import functional as F
from models import GPT, GPTConfig


def tensors(rng, *shapes, dtype=np.float64):
    return [mg.tensor(rng.standard_normal(s).astype(dtype), requires_grad=True) for s in shapes]


def mask_of(kind, rng, B, H, Tq, Tk, dtype):
    """One of the masks scaled_dot_product_attention takes, broadcastable to (B, H, Tq, Tk)."""
    if kind == "padding":  # bool (B, 1, 1, Tk), True where a key may be seen; the first key never padded
        keep = rng.random((B, 1, 1, Tk)) < 0.7
        keep[..., 0] = True
        return keep
    if kind == "bool":  # a full (Tq, Tk) pattern, some rows with no key at all
        return rng.random((Tq, Tk)) < 0.5
    if kind == "float":  # added to the scores, per head, some -inf
        bias = rng.standard_normal((H, Tq, Tk))
        bias[rng.random((H, Tq, Tk)) < 0.2] = -np.inf
        return mg.tensor(bias.astype(dtype))
    if kind == "float-grad":  # a float mask that itself gets a gradient
        return mg.tensor(rng.standard_normal((1, Tq, Tk)).astype(dtype), requires_grad=True)
    return None


def both(q, k, v, mask, causal, block_size):
    plain = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
    flash = F.flash_attention(q, k, v, is_causal=causal, attn_mask=mask, block_size=block_size)
    return plain, flash


def first_and_second(out, wrt, seed):
    """Gradients of (out * seed).sum(), and the gradient of the sum of their squares: 1st and 2nd order."""
    grads = mg.grad((out * seed).sum(), wrt, create_graph=True, allow_unused=True)
    second = mg.grad(mg.stack([(g * g).sum() for g in grads if g is not None]).sum(), wrt, allow_unused=True)
    return grads, second


CASES = st.fixed_dictionaries(dict(
    B=st.integers(1, 2), H=st.integers(1, 3), Tq=st.integers(1, 9), Tk=st.integers(1, 9), E=st.integers(1, 4),
    Ev=st.integers(1, 4), block=st.integers(1, 10), causal=st.booleans(),
    mask=st.sampled_from([None, "padding", "bool", "float", "float-grad"]), seed=st.integers(0, 2**16)))


@settings(max_examples=60, deadline=None)
@given(CASES)
def test_flash_equals_plain_attention_in_value_gradient_and_second_order_float64(case):
    c = case
    rng = np.random.default_rng(c["seed"])
    q, k, v = tensors(rng, (c["B"], c["H"], c["Tq"], c["E"]), (c["B"], c["H"], c["Tk"], c["E"]),
                      (c["B"], c["H"], c["Tk"], c["Ev"]))
    mask = mask_of(c["mask"], rng, c["B"], c["H"], c["Tq"], c["Tk"], np.float64)
    plain, flash = both(q, k, v, mask, c["causal"], c["block"])
    np.testing.assert_allclose(flash.data, plain.data, rtol=1e-10, atol=1e-10)
    assert np.isfinite(flash.data).all()
    wrt = [q, k, v] + ([mask] if c["mask"] == "float-grad" else [])
    seed = mg.tensor(rng.standard_normal(plain.shape))
    for (g_plain, s_plain), (g_flash, s_flash) in [(first_and_second(plain, wrt, seed),
                                                     first_and_second(flash, wrt, seed))]:
        for a, b in zip(g_plain, g_flash):
            np.testing.assert_allclose(b.data, a.data, rtol=1e-10, atol=1e-10)
        for a, b in zip(s_plain, s_flash):
            if a is None or b is None:
                assert (a is None or not a.data.any()) and (b is None or not b.data.any())
                continue
            np.testing.assert_allclose(b.data, a.data, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("block_size", [1, 3, 16, 17, 40])
@pytest.mark.parametrize("causal", [False, True])
def test_flash_float32_matches_to_rounding_for_every_block_size(block_size, causal):
    rng = np.random.default_rng(block_size)
    q, k, v = tensors(rng, (2, 2, 17, 8), (2, 2, 17, 8), (2, 2, 17, 8), dtype=np.float32)
    plain, flash = both(q, k, v, mask_of("padding", rng, 2, 2, 17, 17, np.float32), causal, block_size)
    assert flash.dtype == np.float32
    np.testing.assert_allclose(flash.data, plain.data, rtol=1e-5, atol=1e-6)
    g = mg.tensor(rng.standard_normal(plain.shape).astype(np.float32))
    for a, b in zip(mg.grad(plain, [q, k, v], g), mg.grad(flash, [q, k, v], g)):
        assert b.dtype == np.float32
        np.testing.assert_allclose(b.data, a.data, rtol=1e-4, atol=1e-5)


def test_flash_gradients_against_finite_differences_float64():
    rng = np.random.default_rng(1)
    q, k, v = tensors(rng, (1, 2, 5, 3), (1, 2, 7, 3), (1, 2, 7, 2))
    for causal in (False, True):
        assert mg.gradcheck(lambda a, b, c, causal=causal: F.flash_attention(a, b, c, causal, block_size=2),
                            [q, k, v])
        assert mg.gradgradcheck(lambda a, b, c, causal=causal: F.flash_attention(a, b, c, causal, block_size=3),
                                [q, k, v])


def test_grouped_query_heads_and_a_cache_shaped_causal_call_match_plain_attention():
    rng = np.random.default_rng(2)
    q, k, v = tensors(rng, (2, 4, 3, 4), (2, 2, 8, 4), (2, 2, 8, 4))  # 3 new queries after 5 cached keys
    plain = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    flash = F.flash_attention(q, k, v, is_causal=True, enable_gqa=True, block_size=2)
    np.testing.assert_allclose(flash.data, plain.data, rtol=1e-12)
    for a, b in zip(mg.grad(plain.sum(), [q, k, v]), mg.grad(flash.sum(), [q, k, v])):
        np.testing.assert_allclose(b.data, a.data, rtol=1e-10, atol=1e-12)


def test_a_query_that_may_attend_to_nothing_gets_zeros_not_nan():
    rng = np.random.default_rng(3)
    q, k, v = tensors(rng, (6, 2), (4, 2), (4, 3))
    keep = np.ones((6, 4), bool)
    keep[2] = False
    for out in (F.flash_attention(q, k, v, attn_mask=keep, block_size=3),
                F.flash_attention(q, k, v, is_causal=True, block_size=2)):  # 6 queries, 4 keys: the first 2 see none
        gq, gk, gv = mg.grad(out.sum(), [q, k, v])
        assert np.isfinite(out.data).all() and all(np.isfinite(g.data).all() for g in (gq, gk, gv))
    assert not out.data[:2].any() and not gq.data[:2].any()


def test_causal_tiles_above_the_diagonal_are_skipped():
    from minigrad.fused.attention import _flash_tiles

    full, causal = len(list(_flash_tiles(64, 64, 8, False))), len(list(_flash_tiles(64, 64, 8, True)))
    assert (full, causal) == (64, 36)  # 8 x 8 tiles; causal: the 8 * 9 / 2 on and below the diagonal


def test_flash_against_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    q, k, v = tensors(rng, (2, 3, 10, 4), (2, 3, 10, 4), (2, 3, 10, 5))
    keep = rng.random((2, 1, 1, 10)) < 0.8
    keep[..., 0] = True
    for causal, mask in ((True, None), (False, keep)):
        out = F.flash_attention(q, k, v, is_causal=causal, attn_mask=mask, block_size=4)
        tq, tk, tv = (torch.tensor(t.data, requires_grad=True) for t in (q, k, v))
        expected = torch.nn.functional.scaled_dot_product_attention(
            tq, tk, tv, attn_mask=None if mask is None else torch.tensor(mask), is_causal=causal)
        np.testing.assert_allclose(out.data, expected.detach().numpy(), rtol=1e-10, atol=1e-12)
        g = rng.standard_normal(out.shape)
        expected.backward(torch.tensor(g))
        for mine, theirs in zip(mg.grad(out, [q, k, v], mg.tensor(g)), (tq, tk, tv)):
            np.testing.assert_allclose(mine.data, theirs.grad.numpy(), rtol=1e-9, atol=1e-11)


def graph_activations(attention, T, **options):
    rng = np.random.default_rng(T)
    q, k, v = tensors(rng, (1, 2, T, 16), (1, 2, T, 16), (1, 2, T, 16), dtype=np.float32)
    return mg.autograd.graph_bytes(attention(q, k, v, is_causal=True, **options)).activations


def test_the_graph_flash_attention_holds_grows_linearly_in_t():
    lengths = [64, 128, 256, 512]
    flash = [graph_activations(F.flash_attention, T) for T in lengths]
    plain = [graph_activations(F.scaled_dot_product_attention, T) for T in lengths]
    # flash: the output (1, 2, T, 16) and one logsumexp per query (1, 2, T), float32: 4 * 2 * 17 * T bytes
    assert flash == [4 * 2 * 17 * T for T in lengths]
    assert all(b == 2 * a for a, b in zip(flash, flash[1:]))  # doubling T doubles it
    # plain: the (T, T) weights of each head, besides the output
    assert plain == [4 * 2 * (T * T + 16 * T) for T in lengths]


def test_bad_arguments_are_named():
    rng = np.random.default_rng(5)
    q, k, v = tensors(rng, (2, 5, 4), (2, 5, 4), (2, 5, 4))
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match="flash_attention: block_size must be a positive int"):
            F.flash_attention(q, k, v, block_size=bad)
    with pytest.raises(ValueError, match="flash_attention: query and key need the same last axis"):
        F.flash_attention(q, k[..., :3], v)
    with pytest.raises(ValueError, match="flash_attention"):
        F.flash_attention(q, k, v, attn_mask=np.ones((3, 5), bool))


def test_the_op_is_in_the_table_with_its_composite():
    assert OPS["flash_attention"].composite is not None and OPS["flash_attention_lse"].composite is not None


# --------------------------------------------------------------------------------------
# GPT(flash=True)
# --------------------------------------------------------------------------------------


def train(config, steps, B, seed=0):
    """Losses of ``steps`` AdamW steps on one fixed batch of random tokens (which it learns by heart)."""
    model = GPT(config, seed=0)
    opt = optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1)
    x = np.random.default_rng(seed).integers(0, config.vocab_size, (B, config.block_size))
    losses = []
    for _ in range(steps):
        _, loss = model(x, np.roll(x, -1, axis=1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_gpt_flash_trains_the_main_demos_config_to_the_same_losses():
    # demos/train_charlm.py's GPT: 2 layers, 4 heads, d_model 128, RoPE, 64 tokens of context, batches of 16
    options = dict(vocab_size=65, block_size=64, n_layer=2, n_head=4, d_model=128, position="rope")
    plain = train(GPTConfig(**options), steps=4, B=16)
    flash = train(GPTConfig(**options, flash=True), steps=4, B=16)
    np.testing.assert_allclose(flash, plain, rtol=2e-6)
    assert flash[-1] < flash[0]


def test_gpt_flash_with_many_tiles_and_grouped_heads_trains_as_plain():
    options = dict(vocab_size=30, block_size=200, n_layer=1, n_head=4, n_kv_head=2, d_model=16)
    np.testing.assert_allclose(train(GPTConfig(**options, flash=True), 3, B=2),
                               train(GPTConfig(**options), 3, B=2), rtol=2e-6)


def test_gpt_flash_generates_with_the_cache_as_plain():
    options = dict(vocab_size=30, block_size=32, n_layer=2, n_head=2, d_model=16)
    prompt = np.random.default_rng(0).integers(0, 30, (2, 5))
    plain = GPT(GPTConfig(**options), seed=1).generate(prompt, 10, temperature=0)
    flash = GPT(GPTConfig(**options, flash=True), seed=1).generate(prompt, 10, temperature=0)
    np.testing.assert_array_equal(flash, plain)


def test_gpt_flash_refuses_attention_dropout_while_training():
    model = GPT(GPTConfig(vocab_size=10, block_size=8, n_layer=1, n_head=2, d_model=8, dropout=0.1, flash=True),
                seed=0)
    with pytest.raises(ValueError, match=r"flash=True attention has no dropout .* set GPTConfig\(dropout=0.0\)"):
        model(np.zeros((1, 8), np.int64))
    model.eval()
    model(np.zeros((1, 8), np.int64))
    with pytest.raises(TypeError, match="flash must be True or False"):
        GPTConfig(vocab_size=10, block_size=8, flash=1)


@pytest.mark.parametrize("Tq, Tk", [(0, 5), (3, 0)])
def test_empty_queries_or_keys_give_what_plain_attention_gives(Tq, Tk):
    rng = np.random.default_rng(6)
    q, k, v = tensors(rng, (2, Tq, 4), (2, Tk, 4), (2, Tk, 3))
    bias = mg.tensor(np.zeros((Tq, Tk)), requires_grad=True)
    plain = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    flash = F.flash_attention(q, k, v, attn_mask=bias)
    np.testing.assert_array_equal(flash.data, plain.data)
    for a, b in zip(mg.grad(plain.sum(), [q, k, v, bias]), mg.grad(flash.sum(), [q, k, v, bias])):
        assert a.shape == b.shape
        np.testing.assert_array_equal(b.data, a.data)


@pytest.mark.parametrize("q_shape, k_shape, v_shape, mask_shape", [
    ((5, 3), (7, 3), (7, 2), None),  # no batch axes
    ((2, 1, 5, 3), (3, 7, 3), (3, 7, 2), (1, 7)),  # batch axes that broadcast, a mask over keys
    ((2, 3, 5, 3), (2, 3, 7, 3), (2, 3, 7, 2), (3, 1, 7)),  # a per-head mask broadcast over queries
    ((4, 5, 3), (4, 7, 3), (4, 7, 2), (7,)),  # a 1-D mask
])
def test_broadcast_batch_axes_and_masks_that_broadcast_match_plain_attention(q_shape, k_shape, v_shape, mask_shape):
    rng = np.random.default_rng(7)
    q, k, v = tensors(rng, q_shape, k_shape, v_shape)
    mask = None if mask_shape is None else mg.tensor(rng.standard_normal(mask_shape), requires_grad=True)
    wrt = [q, k, v] + ([mask] if mask is not None else [])
    plain, flash = both(q, k, v, mask, True, 3)
    np.testing.assert_allclose(flash.data, plain.data, rtol=1e-12, atol=1e-13)
    seed = mg.tensor(rng.standard_normal(plain.shape))
    for a, b in zip(mg.grad((plain * seed).sum(), wrt), mg.grad((flash * seed).sum(), wrt)):
        assert a.shape == b.shape
        np.testing.assert_allclose(b.data, a.data, rtol=1e-10, atol=1e-12)
