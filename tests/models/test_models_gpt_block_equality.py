"""models.GPT's own attention and blocks equal the GPT built from nn.TransformerBlock, which they replaced.

``TransformerBlockGPT`` below is the model as it was before ``models/gpt.py``
held its own ``CausalSelfAttention`` and ``Block``: the same GPT around
``nn.TransformerBlock`` (which stays, for the encoder and seq2seq models). The
two must have the same parameter names, draw the same initial weights from a
seed, and compute the same logits, loss, gradients and cached generation, in
float64 to 1e-10, across the config's axes.
"""

import itertools

import numpy as np
import pytest

from minigrad import io, nn
from minigrad.nn import init
from models.gpt import GPT, GPTConfig


class TransformerBlockGPT(GPT):
    """The GPT built from nn.TransformerBlock (and so nn.MultiHeadAttention), as models/gpt.py built it before."""

    def __init__(self, config: GPTConfig, *, seed=None, rng=None):
        nn.Module.__init__(self)
        rng = init.resolve_rng(rng, seed, who="GPT")
        self.config = c = config
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model, rng=rng)
        rope = None
        if c.position == "learned":
            self.pos_emb = nn.LearnedPositionalEmbedding(c.block_size, c.d_model, rng=rng)
        elif c.position == "sinusoidal":
            self.pos_emb = nn.SinusoidalPositionalEncoding(c.d_model)
        else:
            self.pos_emb = None
            rope = nn.RotaryEmbedding(c.head_dim)
        self.drop = nn.Dropout(c.dropout, rng=rng)
        mlp = "swiglu" if c.mlp == "swiglu" else ("gelu_tanh" if c.gelu_approximate == "tanh" else "gelu")
        self.blocks = nn.ModuleList(
            nn.TransformerBlock(c.d_model, c.n_head, c.d_ff, norm_first=True, causal=True, n_kv_heads=c.n_kv_head,
                                rope=rope, norm=c.norm, mlp=mlp, dropout=c.dropout, bias=c.bias, eps=c.norm_eps,
                                rng=rng)
            for _ in range(c.n_layer))
        if c.norm == "layernorm":
            self.norm_f = nn.LayerNorm(c.d_model, eps=c.norm_eps, bias=c.bias)
        else:
            self.norm_f = nn.RMSNorm(c.d_model, eps=c.norm_eps)
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False, rng=rng)
        if c.tie_weights:
            self.lm_head.weight = self.tok_emb.weight
        self._init_weights(rng)


AXES = dict(norm=("layernorm", "rmsnorm"), position=("learned", "sinusoidal", "rope"), mlp=("gelu", "swiglu"),
            n_kv_head=(4, 2), bias=(True, False), tie_weights=(True, False))
CONFIGS = [dict(zip(AXES, values)) for values in itertools.product(*AXES.values())]  # all 96 combinations
EXACT_GELU = [dict(gelu_approximate="none"), dict(gelu_approximate="none", position="rope", n_kv_head=1)]


def config(**changes) -> GPTConfig:
    fields = dict(vocab_size=13, block_size=6, n_layer=2, n_head=4, d_model=16, gelu_approximate="tanh")
    fields.update(changes)
    return GPTConfig(**fields)


def name(changes: dict) -> str:
    return "-".join(f"{k}={v}" for k, v in changes.items())


def pair(c: GPTConfig, seed: int = 0, dtype=np.float64):
    """The GPT and the TransformerBlockGPT holding the very same weights, in ``dtype``."""
    ours = GPT(c, seed=seed).to(dtype)
    theirs = TransformerBlockGPT(c, seed=seed + 1).to(dtype)
    theirs.load_state_dict(ours.state_dict())
    return ours, theirs


def batch(c: GPTConfig, B: int = 3, T: int = 6, seed: int = 1):
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, c.vocab_size, size=(B, T))
    targets = rng.integers(0, c.vocab_size, size=(B, T))
    targets[0, :2] = -100  # some positions without a target
    return idx, targets


# --------------------------------------------------------------------------------------
# Names, initial weights, checkpoints
# --------------------------------------------------------------------------------------

# The state_dict keys of GPT(GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=4, d_model=16, mlp='swiglu',
# position='rope', n_kv_head=2)), printed from models/gpt.py before it held its own attention.
OLD_NAMES = [
    "tok_emb.weight", "blocks.0.attn_norm.weight", "blocks.0.attn_norm.bias", "blocks.0.attn.q_proj.weight",
    "blocks.0.attn.q_proj.bias", "blocks.0.attn.k_proj.weight", "blocks.0.attn.k_proj.bias",
    "blocks.0.attn.v_proj.weight", "blocks.0.attn.v_proj.bias", "blocks.0.attn.out_proj.weight",
    "blocks.0.attn.out_proj.bias", "blocks.0.mlp_norm.weight", "blocks.0.mlp_norm.bias",
    "blocks.0.mlp.gate_proj.weight", "blocks.0.mlp.gate_proj.bias", "blocks.0.mlp.up_proj.weight",
    "blocks.0.mlp.up_proj.bias", "blocks.0.mlp.down_proj.weight", "blocks.0.mlp.down_proj.bias", "norm_f.weight",
    "norm_f.bias", "lm_head.weight",
]


def test_parameter_names_are_todays():
    c = GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=4, d_model=16, mlp="swiglu", position="rope",
                  n_kv_head=2)
    assert list(GPT(c, seed=0).state_dict()) == OLD_NAMES
    assert list(TransformerBlockGPT(c, seed=0).state_dict()) == OLD_NAMES


@pytest.mark.parametrize("changes", CONFIGS[::7], ids=name)
def test_a_seed_draws_the_same_weights_under_the_same_names(changes):
    c = config(**changes)
    ours, theirs = GPT(c, seed=5).state_dict(), TransformerBlockGPT(c, seed=5).state_dict()
    assert list(ours) == list(theirs)
    for key in ours:
        np.testing.assert_array_equal(ours[key], theirs[key], err_msg=key)


@pytest.mark.parametrize("changes", [{}, CONFIGS[-1]], ids=name)
def test_a_checkpoint_of_the_transformer_block_gpt_loads_into_the_gpt(tmp_path, changes):
    c = config(**changes)
    old = TransformerBlockGPT(c, seed=2)
    io.save(tmp_path / "old.ckpt", old, config=c)
    new = GPT(c, seed=9)
    io.load(tmp_path / "old.ckpt", new)  # strict: every name and shape must match
    idx, _ = batch(c)
    np.testing.assert_array_equal(new(idx)[0].data, old(idx)[0].data)


# --------------------------------------------------------------------------------------
# The same function: logits, loss, gradients, generation
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("changes", CONFIGS + EXACT_GELU, ids=name)
def test_logits_loss_and_every_gradient_are_equal_in_float64(changes):
    c = config(**changes)
    ours, theirs = pair(c)
    idx, targets = batch(c)
    (logits_a, loss_a), (logits_b, loss_b) = ours(idx, targets), theirs(idx, targets)
    assert logits_a.dtype == np.float64
    np.testing.assert_allclose(logits_a.data, logits_b.data, rtol=0, atol=1e-10)
    np.testing.assert_allclose(loss_a.item(), loss_b.item(), rtol=0, atol=1e-10)
    loss_a.backward()
    loss_b.backward()
    grads_b = dict(theirs.named_parameters())
    for key, param in ours.named_parameters():
        assert param.grad is not None and np.abs(param.grad.data).max() > 0, key
        np.testing.assert_allclose(param.grad.data, grads_b[key].grad.data, rtol=0, atol=1e-10, err_msg=key)


@pytest.mark.parametrize("changes", CONFIGS[::3], ids=name)
def test_cached_generation_is_equal_and_slides_past_block_size(changes):
    c = config(**changes)
    ours, theirs = pair(c)
    prompt = np.array([[1, 2, 3], [4, 5, 6]])
    new = 2 * c.block_size  # well past block_size: the window slides
    tokens_a, logits_a = ours.generate(prompt, new, temperature=0, return_logits=True)
    tokens_b, logits_b = theirs.generate(prompt, new, temperature=0, return_logits=True)
    uncached, logits_u = ours.generate(prompt, new, temperature=0, use_cache=False, return_logits=True)
    np.testing.assert_array_equal(tokens_a, tokens_b)
    np.testing.assert_array_equal(tokens_a, uncached)
    np.testing.assert_allclose(logits_a, logits_b, rtol=0, atol=1e-10)
    np.testing.assert_allclose(logits_a, logits_u, rtol=0, atol=1e-10)
    sampled_a = ours.generate(prompt, new, temperature=1.0, top_k=5, rng=3)
    np.testing.assert_array_equal(sampled_a, theirs.generate(prompt, new, temperature=1.0, top_k=5, rng=3))


@pytest.mark.parametrize("changes", [{}, dict(position="rope", n_kv_head=2, mlp="swiglu")], ids=name)
def test_dropout_draws_the_same_masks_in_the_same_order(changes):
    """Beyond dropout 0: built from one seed, the two draw the same dropout masks while training."""
    c = config(dropout=0.2, **changes)
    ours, theirs = GPT(c, seed=4).double(), TransformerBlockGPT(c, seed=4).double()
    idx, targets = batch(c)
    for _ in range(2):
        (logits_a, loss_a), (logits_b, loss_b) = ours(idx, targets), theirs(idx, targets)
        np.testing.assert_allclose(logits_a.data, logits_b.data, rtol=0, atol=1e-10)
        np.testing.assert_allclose(loss_a.item(), loss_b.item(), rtol=0, atol=1e-10)
    assert not np.allclose(logits_a.data, ours.eval()(idx)[0].data)  # dropout did act
