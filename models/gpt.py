"""GPT: a decoder-only transformer language model, in one file, top to bottom (after nanoGPT's model.py).

    idx (B, T) token ids
      -> token embedding, plus learned or sinusoidal positions  (RoPE instead rotates q and k in attention)
      -> n_layer pre-norm blocks:  x = x + attn(norm(x));  x = x + mlp(norm(x))   (causal self-attention)
      -> final norm -> linear head (sharing the token embedding's matrix when tie_weights)
      -> logits (B, T, vocab_size), and the cross-entropy against targets (B, T) when given

The file reads in that order: ``GPTConfig``, ``CausalSelfAttention`` (the
q/k/v projections, RoPE, the KV cache, grouped-query heads and one call to
``F.scaled_dot_product_attention``), ``MLP``, ``Block`` and ``GPT``. Below it
lie only the library's layers (``nn.Linear``, ``nn.LayerNorm``, ...) and the
attention formula, ``softmax(q k^T / sqrt(head_dim)) v``, in ``minigrad.nn.functional``.

``GPTConfig`` chooses along the axes the transformer lesson compares: LayerNorm
or RMSNorm, learned / sinusoidal / rotary positions, a GELU MLP or SwiGLU,
multi-head or grouped-query attention (``n_kv_head < n_head``), biases on or
off, a tied or separate output layer. The defaults are GPT-2's choices.

Generation (``generate``) samples one token at a time, with the rules in
``models/generation.py``. With the KV cache each new token runs through the
layers alone, attending to the keys and values cached for the earlier ones.

Past ``block_size`` the context *slides*: the model always sees the last
``block_size`` tokens, as nanoGPT does. With learned positions a window cannot
be continued from the cache (every position in it moves), so once the window
slides the cache is rebuilt from the window on every step: still exact (the
same logits as without a cache), but no longer cheaper.

Weights of a Hugging Face GPT-2 load with ``GPT.from_gpt2`` and save back with
``save_gpt2`` (the conversion is in ``models/gpt2.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from minigrad import nn
from minigrad.autograd import checkpoint
from minigrad.nn import KVCache, init
from minigrad.nn import functional as F
from minigrad.nn.checks import GELU_FORMS

from . import checks, generation


@dataclass
class GPTConfig:
    """The shape of a GPT. ``n_kv_head`` and ``d_ff`` may be left None: they are filled in (see below)."""

    vocab_size: int
    block_size: int  # the longest context, in tokens
    n_layer: int = 4
    n_head: int = 4
    n_kv_head: int | None = None  # key/value heads; None: n_head (multi-head), fewer: grouped-query attention
    d_model: int = 128
    d_ff: int | None = None  # MLP width; None: 4 * d_model for gelu, round(8/3 * d_model) for swiglu
    norm: str = "layernorm"  # or "rmsnorm"
    position: str = "learned"  # or "sinusoidal", "rope"
    mlp: str = "gelu"  # or "swiglu"
    gelu_approximate: str = "tanh"  # GPT-2's tanh formula; "none": the exact erf form
    dropout: float = 0.0
    bias: bool = True  # biases in every Linear and LayerNorm
    tie_weights: bool = True  # the output layer reuses the token embedding matrix
    norm_eps: float = 1e-5
    flash: bool = False  # attention by F.flash_attention (tiled: memory linear in T), no attention dropout

    def __post_init__(self):  # each rule is written once, in models/checks.py
        checks.positive_ints(self, "vocab_size", "block_size", "n_layer", "n_head", "d_model")
        if self.n_kv_head is None:
            self.n_kv_head = self.n_head
        if self.d_ff is None:
            self.d_ff = 4 * self.d_model if self.mlp == "gelu" else max(1, round(8 * self.d_model / 3))
        checks.positive_ints(self, "n_kv_head", "d_ff")
        checks.choices(self, norm=("layernorm", "rmsnorm"), position=("learned", "sinusoidal", "rope"),
                      mlp=("gelu", "swiglu"), gelu_approximate=GELU_FORMS)
        checks.heads(self, n_kv_head=self.n_kv_head)
        if self.position == "rope":
            checks.rope_head_dim(self)
        checks.probabilities(self, "dropout")
        checks.positive_numbers(self, "norm_eps")
        checks.bools(self, "bias", "tie_weights", "flash")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_head


class CausalSelfAttention(nn.Module):
    """Each position attends to itself and the positions before it, in ``n_head`` heads at once.

    A head has head_dim = d_model / n_head features. Keys and values have
    ``n_kv_head`` heads, each shared by n_head / n_kv_head consecutive query
    heads (grouped-query attention; n_kv_head == n_head is plain multi-head
    attention): fewer key/value heads, a smaller KV cache.
    """

    def __init__(self, config: GPTConfig, rng: np.random.Generator):
        super().__init__()
        c = config
        self.n_head, self.n_kv_head, self.head_dim = c.n_head, c.n_kv_head, c.head_dim
        self.q_proj = nn.Linear(c.d_model, c.n_head * c.head_dim, c.bias, rng)
        self.k_proj = nn.Linear(c.d_model, c.n_kv_head * c.head_dim, c.bias, rng)
        self.v_proj = nn.Linear(c.d_model, c.n_kv_head * c.head_dim, c.bias, rng)
        self.out_proj = nn.Linear(c.d_model, c.d_model, c.bias, rng)
        self.rope = nn.RotaryEmbedding(c.head_dim) if c.position == "rope" else None  # no weights
        self.attn_dropout, self.rng = c.dropout, rng  # dropout on the attention weights, while training
        self.flash = c.flash

    def forward(self, x, cache: KVCache | None = None):
        """x (B, T, d_model) -> (B, T, d_model). With a ``cache``, x holds the positions after the cached ones."""
        B, T, d_model = x.shape
        start = cache.length if cache is not None else 0  # how many earlier positions the cache holds
        q = self.q_proj(x).reshape(B, T, self.n_head, self.head_dim)  # (B, T, n_head, head_dim)
        k = self.k_proj(x).reshape(B, T, self.n_kv_head, self.head_dim)  # (B, T, n_kv_head, head_dim)
        v = self.v_proj(x).reshape(B, T, self.n_kv_head, self.head_dim)  # (B, T, n_kv_head, head_dim)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (B, heads, T, head_dim): one matrix per head
        if self.rope is not None:
            q, k = self.rope(q, start), self.rope(k, start)  # rotated as positions start .. start + T - 1
        if cache is not None:
            k, v = cache.update(k, v)  # (B, n_kv_head, start + T, head_dim): the cached positions, then these
        # softmax(q k^T / sqrt(head_dim)) v, each query seeing the keys up to its own position; the queries are
        # the last T of the start + T positions. enable_gqa shares each key/value head with its group of queries.
        if self.flash:  # the same, in tiles that never hold the (T, T) weights
            if self.training and self.attn_dropout > 0:
                raise ValueError(f"GPT: flash=True attention has no dropout on its weights, but dropout="
                                 f"{self.attn_dropout}: set GPTConfig(dropout=0.0), or flash=False, or call "
                                 f"model.eval()")
            y = F.flash_attention(q, k, v, is_causal=True, enable_gqa=self.n_kv_head < self.n_head)
        else:
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.attn_dropout if self.training else 0.0,
                                               is_causal=True, enable_gqa=self.n_kv_head < self.n_head,
                                               rng=self.rng)  # (B, n_head, T, head_dim)
        y = y.transpose(1, 2).reshape(B, T, d_model)  # (B, T, d_model): the heads side by side
        return self.out_proj(y)  # (B, T, d_model)


class MLP(nn.Module):
    """Each position on its own, through a wider hidden layer: down(gelu(up(x))), or SwiGLU's gated form.

    SwiGLU (LLaMA): down(silu(gate(x)) * up(x)), three matrices; its default
    d_ff = 8/3 * d_model keeps the parameter count of GELU's 4 * d_model.
    """

    def __init__(self, config: GPTConfig, rng: np.random.Generator):
        super().__init__()
        c = config
        self.gate_proj = nn.Linear(c.d_model, c.d_ff, c.bias, rng) if c.mlp == "swiglu" else None
        self.up_proj = nn.Linear(c.d_model, c.d_ff, c.bias, rng)
        self.down_proj = nn.Linear(c.d_ff, c.d_model, c.bias, rng)
        self.approximate = c.gelu_approximate

    def forward(self, x):
        if self.gate_proj is not None:
            h = F.silu(self.gate_proj(x)) * self.up_proj(x)  # (B, T, d_ff): the gate scales each hidden unit
        else:
            h = F.gelu(self.up_proj(x), approximate=self.approximate)  # (B, T, d_ff)
        return self.down_proj(h)  # (B, T, d_model)


def make_norm(config: GPTConfig) -> nn.Module:
    """LayerNorm (GPT-2) or RMSNorm (LLaMA) over the d_model features of each position."""
    if config.norm == "layernorm":
        return nn.LayerNorm(config.d_model, eps=config.norm_eps, bias=config.bias)
    return nn.RMSNorm(config.d_model, eps=config.norm_eps)


class Block(nn.Module):
    """One pre-norm layer: the positions exchange information (attention), then each is transformed (MLP)."""

    def __init__(self, config: GPTConfig, rng: np.random.Generator):
        super().__init__()
        self.attn_norm = make_norm(config)
        self.attn = CausalSelfAttention(config, rng)
        self.mlp_norm = make_norm(config)
        self.mlp = MLP(config, rng)
        self.dropout = nn.Dropout(config.dropout, rng=rng)  # on each sublayer's output, before the residual sum

    def forward(self, x, cache: KVCache | None = None):
        x = x + self.dropout(self.attn(self.attn_norm(x), cache))  # (B, T, d_model)
        x = x + self.dropout(self.mlp(self.mlp_norm(x)))  # (B, T, d_model)
        return x


def normal_init(model: nn.Module, rng: np.random.Generator, std: float = 0.02) -> None:
    """GPT-2's (and BERT's) initialisation: every linear map and embedding N(0, std**2), biases 0."""
    def init_one(module):
        if isinstance(module, nn.Linear):
            init.normal_(module.weight, 0.0, std, rng)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding | nn.LearnedPositionalEmbedding):
            init.normal_(module.weight, 0.0, std, rng)

    model.apply(init_one)


class GPT(nn.Module):
    """A decoder-only transformer LM: ``forward(idx, targets=None) -> (logits, loss)`` and ``generate``.

    Weights start as in nanoGPT / GPT-2: every matrix N(0, 0.02), biases 0,
    norm gains 1, and the two projections that write into the residual stream
    (attention output, MLP down) N(0, 0.02 / sqrt(2 * n_layer)), so the
    residual's variance does not grow with depth. ``seed`` (an int) or ``rng``
    (a NumPy Generator) makes them reproducible; without either, the default
    generator of ``minigrad.nn`` (``nn.manual_seed``) draws them. float32.

    ``checkpoint=True`` (or setting ``model.checkpoint`` later) checkpoints each
    block while training: its activations are recomputed in backward instead of
    kept (``minigrad.autograd.checkpoint``), the same gradients for less memory
    and one more forward pass. ``GPTConfig(flash=True)`` computes attention with
    ``F.flash_attention``: the same outputs and gradients, without the (T, T)
    weights, so what a step keeps grows linearly with the context.
    """

    checkpoint = False  # (the class's default, for subclasses that build their own blocks)

    def __init__(self, config: GPTConfig, *, seed: int | None = None, rng: np.random.Generator | None = None,
                 checkpoint: bool = False):
        super().__init__()
        self.checkpoint = bool(checkpoint)
        checks.config_type(config, GPTConfig, "GPT")
        rng = init.resolve_rng(rng, seed, who="GPT")
        self.config = c = config

        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model, rng=rng)
        if c.position == "learned":
            self.pos_emb = nn.LearnedPositionalEmbedding(c.block_size, c.d_model, rng=rng)
        elif c.position == "sinusoidal":
            self.pos_emb = nn.SinusoidalPositionalEncoding(c.d_model)
        else:
            self.pos_emb = None  # RoPE: the attention rotates q and k instead
        self.drop = nn.Dropout(c.dropout, rng=rng)
        self.blocks = nn.ModuleList(Block(c, rng) for _ in range(c.n_layer))
        self.norm_f = make_norm(c)
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False, rng=rng)
        if c.tie_weights:
            # One matrix, two jobs: embedding row i is also the output direction that scores token i.
            self.lm_head.weight = self.tok_emb.weight
        self._init_weights(rng)

    def _init_weights(self, rng: np.random.Generator) -> None:
        normal_init(self, rng)
        for block in self.blocks:  # the projections that add into the residual stream
            init.normal_(block.attn.out_proj.weight, 0.0, 0.02 / math.sqrt(2 * self.config.n_layer), rng)
            init.normal_(block.mlp.down_proj.weight, 0.0, 0.02 / math.sqrt(2 * self.config.n_layer), rng)

    # --- the forward pass -------------------------------------------------------------------

    def forward(self, idx, targets=None, *, kv_caches: list[KVCache] | None = None):
        """Logits (B, T, vocab_size) for token ids ``idx`` (B, T), and the mean cross-entropy (or None).

        ``targets`` (B, T): the token that should follow each position (-100:
        no loss there). ``kv_caches``: one ``KVCache`` per block, for decoding;
        ``idx`` then holds only the tokens after those already cached.
        """
        c = self.config
        idx = checks.token_batch(idx, c.vocab_size, "GPT.forward")
        B, T = idx.shape
        start = self._check_caches(kv_caches)  # how many earlier positions the caches hold
        if T == 0 or start + T > c.block_size:
            cached = f" after {start} cached positions" if start else ""
            raise ValueError(f"GPT.forward: idx has shape {idx.shape}: {T} positions{cached}, but the model takes "
                             f"1 to block_size={c.block_size} in all")

        x = self.tok_emb(idx)  # (B, T, d_model)
        if self.pos_emb is not None:
            x = self.pos_emb(x, offset=start)  # + the encoding of positions start .. start + T - 1
        x = self.drop(x)
        for i, block in enumerate(self.blocks):
            if self.checkpoint and not kv_caches:  # keep only x; rerun the block (same dropout masks) in backward
                x = checkpoint(block, x, rngs=(block.attn.rng, block.dropout.rng))
            else:
                x = block(x, cache=kv_caches[i] if kv_caches else None)  # (B, T, d_model)
        x = self.norm_f(x)
        logits = self.lm_head(x)  # (B, T, vocab_size)

        loss = None
        if targets is not None:
            loss = checks.target_loss(logits, targets, "GPT.forward")  # F.cross_entropy, its errors named for GPT
        return logits, loss

    def _check_caches(self, kv_caches) -> int:
        if kv_caches is None:
            return 0
        if len(kv_caches) != len(self.blocks) or not all(isinstance(k, KVCache) for k in kv_caches):
            raise ValueError(f"GPT.forward: kv_caches must be a list of {len(self.blocks)} KVCache (one per block), "
                             f"got {len(kv_caches)} item(s)")
        return kv_caches[0].length

    # --- generation ---------------------------------------------------------------------

    def generate(self, idx, max_new_tokens: int, temperature: float = 1.0, top_k: int | None = None,
                 top_p: float | None = None, rng: np.random.Generator | None = None, use_cache: bool = True,
                 return_logits: bool = False):
        """Continue each prompt in ``idx`` (B, T) by ``max_new_tokens`` tokens; returns (B, T + new) int64.

        ``temperature=0`` is greedy; ``top_k`` / ``top_p`` keep only the likeliest
        tokens (``models.generation``); ``rng`` (a Generator or seed) makes sampling
        reproducible. ``use_cache`` keeps each layer's keys and values, so a new
        token costs one position; without it the window is recomputed at each step
        (same tokens, same logits). Runs in eval mode under ``no_grad``, then
        restores the mode. ``return_logits``: also the logits of every step (B, new, vocab_size).
        """
        c = self.config
        idx = checks.token_batch(idx, c.vocab_size, "GPT.generate")
        if idx.shape[1] == 0:
            raise ValueError(f"GPT.generate: idx must hold a prompt of at least one token per row, got shape "
                             f"{idx.shape}")
        caches = [KVCache() for _ in self.blocks] if use_cache else None

        def next_logits(tokens):  # tokens (B, L): the prompt and everything generated so far
            window = tokens[:, -c.block_size:]  # the context slides once it is longer than block_size
            if caches is None:
                return self(window)[0][:, -1]  # (B, vocab_size): the whole window, every step
            if tokens.shape[1] > c.block_size:  # every position in the window moved: start the caches afresh
                for cache in caches:
                    cache.reset()
                new = window
            else:
                new = tokens[:, caches[0].length:]  # the tokens the caches have not seen: usually just one
            return self(new, kv_caches=caches)[0][:, -1]

        with generation.eval_mode(self):
            return generation.autoregressive(next_logits, idx, max_new_tokens, temperature, top_k, top_p, rng,
                                             return_logits=return_logits, who="GPT.generate")

    # --- GPT-2 weights ------------------------------------------------------------------

    @classmethod
    def from_gpt2(cls, path, n_head: int | None = None) -> GPT:
        """A GPT holding the weights of a Hugging Face GPT-2 safetensors file (see ``models.gpt2.load_gpt2``)."""
        from .gpt2 import load_gpt2

        return load_gpt2(path, n_head=n_head)

    def save_gpt2(self, path) -> None:
        """Write this model as a GPT-2 safetensors file + config.json (see ``models.gpt2.save_gpt2``)."""
        from .gpt2 import save_gpt2

        save_gpt2(self, path)
