"""models.GPT: config checks, init, causality, overfitting, gradients, KV-cache generation, checkpoints."""

import dataclasses

import numpy as np
import pytest
from models_helpers import VOCAB, fit, memorable_batch, tokens

import minigrad as mg
from minigrad import io, nn, optim
from models.gpt import GPT, GPTConfig

# The variants the config offers, each as the changes from GPT-2's choices.
VARIANTS = {
    "gpt2": {},
    "llama": dict(norm="rmsnorm", position="rope", mlp="swiglu", n_kv_head=2, bias=False, tie_weights=False),
    "sinusoidal-erf": dict(position="sinusoidal", gelu_approximate="none"),
}


def config(**changes) -> GPTConfig:
    fields = dict(vocab_size=VOCAB, block_size=8, n_layer=2, n_head=4, d_model=16)
    fields.update(changes)
    return GPTConfig(**fields)


# --------------------------------------------------------------------------------------
# Config
# --------------------------------------------------------------------------------------


def test_config_fills_defaults_and_round_trips_as_a_dict():
    c = config()
    assert (c.n_kv_head, c.d_ff, c.head_dim) == (4, 64, 4)
    assert config(mlp="swiglu").d_ff == round(8 * 16 / 3)
    assert GPTConfig(**dataclasses.asdict(c)) == c


@pytest.mark.parametrize("changes, message", [
    (dict(d_model=30), "d_model=30 must be divisible by n_head=4"),
    (dict(n_kv_head=3), "n_head=4 must be divisible by n_kv_head=3"),
    (dict(norm="batchnorm"), "norm='batchnorm'; expected one of"),
    (dict(position="alibi"), "position='alibi'; expected one of"),
    (dict(mlp="relu"), "mlp='relu'; expected one of"),
    (dict(gelu_approximate="sigmoid"), "gelu_approximate='sigmoid'"),
    (dict(position="rope", d_model=12), "head_dim = d_model / n_head = 12 / 4 = 3 must be even"),
    (dict(n_layer=0), "n_layer must be a positive integer, got 0"),
    (dict(vocab_size=2.5), "vocab_size must be a positive integer, got 2.5"),
    (dict(dropout=1.5), "dropout must be a probability in [0, 1], got 1.5"),
    (dict(dropout=-0.1), "dropout must be a probability in [0, 1], got -0.1"),
])
def test_config_rejects_bad_values_naming_them(changes, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        config(**changes)


def test_model_needs_a_config_object():
    with pytest.raises(TypeError, match=r"GPT: config must be an instance of GPTConfig, got dict "
                                        r"\(from a dict: GPT\(GPTConfig\(\*\*d\)\)\)"):
        GPT(dataclasses.asdict(config()))


# --------------------------------------------------------------------------------------
# Init and forward
# --------------------------------------------------------------------------------------


def test_init_is_reproducible_small_and_scaled_like_gpt2():
    c = config(n_layer=4, d_model=64, vocab_size=200)
    a, b, other = GPT(c, seed=3), GPT(c, seed=3), GPT(c, seed=4)
    for (name, p), q, r in zip(a.named_parameters(), b.parameters(), other.parameters()):
        assert p.dtype == np.float32, name
        np.testing.assert_array_equal(p.data, q.data)
        if p.ndim == 2:
            assert not np.array_equal(p.data, r.data), name
    assert a.lm_head.weight is a.tok_emb.weight  # tied
    assert abs(a.tok_emb.weight.data.std() - 0.02) < 0.002
    assert abs(a.blocks[0].attn.q_proj.weight.data.std() - 0.02) < 0.002
    residual = np.concatenate([blk.mlp.down_proj.weight.data.ravel() for blk in a.blocks])
    assert abs(residual.std() - 0.02 / np.sqrt(2 * 4)) < 0.001
    assert not a.blocks[0].attn.q_proj.bias.data.any() and (a.blocks[0].attn_norm.weight.data == 1).all()
    # Small weights give near-uniform predictions: the loss starts at about log(vocab_size).
    _, loss = a(tokens(2, 8, high=200), tokens(2, 8, seed=1, high=200))
    assert abs(loss.item() - np.log(200)) < 0.05


def test_untied_head_is_a_separate_weight():
    m = GPT(config(tie_weights=False), seed=0)
    assert m.lm_head.weight is not m.tok_emb.weight
    assert m.num_parameters() == GPT(config(), seed=0).num_parameters() + VOCAB * 16


def test_forward_returns_logits_and_loss_like_nanogpt():
    m = GPT(config(), seed=0)
    x = tokens(3, 5)
    logits, loss = m(x)
    assert logits.shape == (3, 5, VOCAB) and logits.dtype == np.float32 and loss is None
    _, loss = m(mg.Tensor(x), x)  # a Tensor of ids works too
    log_probs = logits.data - np.log(np.exp(logits.data).sum(-1, keepdims=True))
    expected = -np.take_along_axis(log_probs, x[..., None], -1).mean()
    np.testing.assert_allclose(loss.item(), expected, rtol=1e-5)
    ignored = x.copy()
    ignored[:, :2] = -100  # no loss at those positions
    _, partial = m(x, ignored)
    np.testing.assert_allclose(partial.item(), -np.take_along_axis(log_probs, x[..., None], -1)[:, 2:].mean(),
                               rtol=1e-5)


@pytest.mark.parametrize("variant", VARIANTS)
def test_logits_at_a_position_do_not_depend_on_later_tokens(variant):
    m = GPT(config(**VARIANTS[variant]), seed=0)
    x = tokens(2, 8)
    changed = x.copy()
    changed[:, 5:] = (changed[:, 5:] + 1) % VOCAB
    a, b = m(x)[0].data, m(changed)[0].data
    np.testing.assert_allclose(a[:, :5], b[:, :5], atol=1e-6)
    assert np.abs(a[:, 5:] - b[:, 5:]).max() > 1e-3


def test_dropout_is_active_in_training_only():
    m = GPT(config(dropout=0.5), seed=0)
    x = tokens(2, 8)
    assert not np.allclose(m(x)[0].data, m(x)[0].data)
    m.eval()
    np.testing.assert_array_equal(m(x)[0].data, m(x)[0].data)


# --------------------------------------------------------------------------------------
# Learning and gradients
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
def test_overfits_one_batch(variant):
    m = GPT(config(**VARIANTS[variant]), seed=0)
    batch = memorable_batch()
    x, y = batch[:, :-1], batch[:, 1:]
    opt = optim.AdamW(m.parameters(), lr=1e-2, weight_decay=0.0)
    assert fit(m, opt, x, y, steps=80) < 0.05  # from log(11) = 2.4: the batch is memorised


@pytest.mark.parametrize("variant", VARIANTS)
def test_gradients_of_the_loss_match_finite_differences(variant):
    # Tiny on purpose: gradcheck runs two forward passes per parameter element.
    changes = {**VARIANTS[variant], **({"n_kv_head": 1} if variant == "llama" else {})}  # 2 query heads, 1 K/V
    m = GPT(config(d_model=4, n_head=2, d_ff=6, vocab_size=5, block_size=4, **changes), seed=0)
    x, y = tokens(2, 4, high=5), tokens(2, 4, seed=1, high=5)
    assert nn.gradcheck_module(m, forward=lambda model: model(x, y)[1])


# --------------------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------------------


def test_bad_inputs_get_errors_naming_the_argument_and_values():
    m = GPT(config(), seed=0)
    with pytest.raises(ValueError, match=r"GPT.forward: idx holds token id 11, outside \[0, vocab_size=11\)"):
        m(np.array([[1, 11, 2]]))
    with pytest.raises(ValueError, match=r"idx holds token id -1"):
        m(np.array([[-1, 2]]))
    with pytest.raises(TypeError, match="idx must hold integer token ids, got dtype float64"):
        m(np.zeros((1, 3)))
    with pytest.raises(ValueError, match=r"idx must be a \(batch, time\) array of token ids, got shape \(3,\)"):
        m(np.array([1, 2, 3]))
    with pytest.raises(ValueError, match=r"idx has shape \(1, 9\): 9 positions, but the model takes 1 to "
                                         r"block_size=8"):
        m(tokens(1, 9))
    with pytest.raises(ValueError, match=r"targets must have shape \(2, 4\) .* got \(2, 3\)"):
        m(tokens(2, 4), tokens(2, 3))
    with pytest.raises(ValueError, match=r"targets holds token id 12, outside \[0, vocab_size=11\)"):
        m(tokens(1, 2), np.array([[0, 12]]))
    with pytest.raises(ValueError, match="GPT.generate: idx must hold a prompt of at least one token"):
        m.generate(np.zeros((1, 0), dtype=int), 3)
    with pytest.raises(ValueError, match="max_new_tokens must be an integer >= 0, got -1"):
        m.generate(tokens(1, 2), -1)
    with pytest.raises(ValueError, match="temperature must be a finite number >= 0"):
        m.generate(tokens(1, 2), 2, temperature=-1.0)


# --------------------------------------------------------------------------------------
# Generation
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
def test_cached_and_uncached_generation_agree(variant):
    m = GPT(config(**VARIANTS[variant]), seed=0)
    prompt = tokens(2, 3)
    # 3 + 12 tokens > block_size=8: the window slides in both modes.
    cached, cached_logits = m.generate(prompt, 12, temperature=0.0, return_logits=True)
    plain, plain_logits = m.generate(prompt, 12, temperature=0.0, use_cache=False, return_logits=True)
    np.testing.assert_array_equal(cached, plain)
    assert cached.shape == (2, 15) and cached.dtype == np.int64
    np.testing.assert_array_equal(cached[:, :3], prompt)
    assert cached_logits.dtype == np.float32 and cached_logits.shape == (2, 12, VOCAB)
    np.testing.assert_allclose(cached_logits, plain_logits, atol=1e-5, rtol=0)
    # The first logits are the model's prediction after the prompt; later ones see the window.
    np.testing.assert_allclose(plain_logits[:, 0], m(prompt)[0].data[:, -1], atol=1e-6)
    np.testing.assert_allclose(plain_logits[:, -1], m(cached[:, -9:-1])[0].data[:, -1], atol=1e-5)
    # Sampled generation agrees too, given the same random stream.
    a = m.generate(prompt, 6, temperature=0.8, top_k=5, rng=np.random.default_rng(7))
    b = m.generate(prompt, 6, temperature=0.8, top_k=5, rng=np.random.default_rng(7), use_cache=False)
    np.testing.assert_array_equal(a, b)


def test_with_the_cache_each_new_token_runs_one_position(monkeypatch):
    m = GPT(config(block_size=16), seed=0)
    lengths, grad_modes = [], []
    forward = GPT.forward

    def spy(self, idx, *args, **kwargs):
        lengths.append(np.asarray(idx).shape[1])
        grad_modes.append(mg.is_grad_enabled())
        return forward(self, idx, *args, **kwargs)

    monkeypatch.setattr(GPT, "forward", spy)
    m.generate(tokens(1, 5), 6, temperature=0.0)
    assert lengths == [5, 1, 1, 1, 1, 1]  # the prompt once, then one position per new token
    lengths.clear()
    m.generate(tokens(1, 5), 6, temperature=0.0, use_cache=False)
    assert lengths == [5, 6, 7, 8, 9, 10]  # without the cache, the whole prefix every time
    assert not any(grad_modes)  # generation records no graph


def test_sampling_is_reproducible_and_respects_top_k():
    m = GPT(config(), seed=0)
    prompt = tokens(3, 2)
    a = m.generate(prompt, 10, rng=np.random.default_rng(1))
    b = m.generate(prompt, 10, rng=np.random.default_rng(1))
    c = m.generate(prompt, 10, rng=np.random.default_rng(2))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    greedy = m.generate(prompt, 10, temperature=0.0)
    np.testing.assert_array_equal(m.generate(prompt, 10, top_k=1, rng=np.random.default_rng(3)), greedy)
    np.testing.assert_array_equal(m.generate(prompt, 10, top_p=1e-9, rng=np.random.default_rng(3)), greedy)


def test_generate_uses_eval_mode_and_restores_the_mode():
    m = GPT(config(dropout=0.5), seed=0)
    prompt = tokens(1, 3)
    a = m.generate(prompt, 5, temperature=0.0)
    assert m.training  # restored
    np.testing.assert_array_equal(a, m.generate(prompt, 5, temperature=0.0))  # no dropout noise
    m.eval()
    m.generate(prompt, 2)
    assert not m.training


def test_generate_restores_each_submodules_own_mode():
    m = GPT(config(dropout=0.5), seed=0)
    m.blocks[0].eval()  # a part kept in eval mode while the rest trains
    m.generate(tokens(1, 3), 2)
    assert m.training and not m.blocks[0].training and all(not s.training for s in m.blocks[0].modules())
    assert all(s.training for s in m.blocks[1].modules())


# --------------------------------------------------------------------------------------
# Checkpoints
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["gpt2", "llama"])
def test_checkpoint_round_trip_rebuilds_the_model_from_its_config(tmp_path, variant):
    m = GPT(config(**VARIANTS[variant]), seed=0)
    for p in m.parameters():  # weights no fresh model could have by chance
        p.data += np.float32(0.01)
    path = tmp_path / "gpt.safetensors"
    io.save(path, m, config=m.config, step=5)
    saved = io.load(path)
    fresh = GPT(GPTConfig(**saved.config), seed=1)
    io.load(path, fresh)
    x = tokens(2, 8)
    np.testing.assert_array_equal(fresh(x)[0].data, m(x)[0].data)
    assert (fresh.lm_head.weight is fresh.tok_emb.weight) == m.config.tie_weights
    assert saved.step == 5


def test_seed_and_rng_are_one_or_the_other():
    with pytest.raises(ValueError, match="GPT: pass seed or rng, not both"):
        GPT(config(), seed=0, rng=np.random.default_rng(0))
    a, b = GPT(config(), seed=3), GPT(config(), rng=np.random.default_rng(3))
    for (name, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
        np.testing.assert_array_equal(p.data, q.data, err_msg=name)  # seed=3 is rng=default_rng(3)
