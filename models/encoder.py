"""A bidirectional transformer encoder with a masked-language-model head (BERT's pre-training task).

    idx (B, T) token ids, some replaced by [MASK]
      -> token embedding + learned or sinusoidal positions
      -> n_layer pre-norm blocks with *unmasked* self-attention: every token sees every other, left and right
      -> final norm
      -> MLM head: Linear + GELU + LayerNorm, then scores over the vocabulary (tied to the token embedding)
      -> logits (B, T, vocab_size); cross-entropy only where ``targets`` is not -100

A decoder predicts the next token, so it may only look left. An encoder is
trained to fill in blanks (Devlin et al. 2018): ``mask_tokens`` hides about 15%
of the tokens, and the loss asks the model to recover them from the context on
*both* sides. The hidden states it learns (``encode``) are what a BERT-style
model hands to downstream tasks.

Two simplifications against BERT, on purpose: the blocks are pre-norm (as in
GPT here; ``models.seq2seq`` shows the original post-norm placement) and there
is no next-sentence task or segment embedding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from minigrad import nn
from minigrad.nn import init
from minigrad.nn.checks import GELU_FORMS, IGNORE_INDEX

from . import checks
from .gpt import normal_init


@dataclass
class EncoderConfig:
    """The shape of a masked-LM encoder. ``pad_id``, when set, marks padding that attention ignores."""

    vocab_size: int
    block_size: int  # the longest sequence
    n_layer: int = 2
    n_head: int = 4
    d_model: int = 64
    d_ff: int | None = None  # None: 4 * d_model
    norm: str = "layernorm"  # or "rmsnorm"
    position: str = "learned"  # or "sinusoidal"
    gelu_approximate: str = "tanh"  # BERT used exact GELU ("none"); the tanh formula is close and faster here
    dropout: float = 0.0
    bias: bool = True
    tie_weights: bool = True  # the MLM head scores tokens with the embedding matrix, as BERT does
    norm_eps: float = 1e-5
    pad_id: int | None = None

    def __post_init__(self):  # each rule is written once, in models/checks.py
        checks.positive_ints(self, "vocab_size", "block_size", "n_layer", "n_head", "d_model")
        if self.d_ff is None:
            self.d_ff = 4 * self.d_model
        checks.positive_ints(self, "d_ff")
        checks.choices(self, norm=("layernorm", "rmsnorm"), position=("learned", "sinusoidal"),
                      gelu_approximate=GELU_FORMS)
        checks.heads(self)
        checks.probabilities(self, "dropout")
        checks.positive_numbers(self, "norm_eps")
        checks.bools(self, "bias", "tie_weights")
        checks.token_id_fields(self, "vocab_size", "pad_id")


class MaskedLM(nn.Module):
    """Bidirectional encoder + MLM head: ``forward(idx, targets=None) -> (logits, loss)``; ``encode(idx)``.

    Weights start as in BERT: matrices N(0, 0.02), biases 0, norm gains 1.
    """

    def __init__(self, config: EncoderConfig, *, seed: int | None = None, rng: np.random.Generator | None = None):
        super().__init__()
        checks.config_type(config, EncoderConfig, "MaskedLM")
        rng = init.resolve_rng(rng, seed, who="MaskedLM")
        self.config = c = config

        def make_norm():
            return nn.LayerNorm(c.d_model, eps=c.norm_eps, bias=c.bias) if c.norm == "layernorm" else \
                nn.RMSNorm(c.d_model, eps=c.norm_eps)

        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model, rng=rng)
        if c.position == "learned":
            self.pos_emb = nn.LearnedPositionalEmbedding(c.block_size, c.d_model, rng=rng)
        else:
            self.pos_emb = nn.SinusoidalPositionalEncoding(c.d_model)
        self.drop = nn.Dropout(c.dropout, rng=rng)
        mlp = "gelu_tanh" if c.gelu_approximate == "tanh" else "gelu"
        self.blocks = nn.ModuleList(
            nn.TransformerBlock(c.d_model, c.n_head, c.d_ff, norm_first=True, causal=False, norm=c.norm, mlp=mlp,
                                dropout=c.dropout, bias=c.bias, eps=c.norm_eps, rng=rng)
            for _ in range(c.n_layer))
        self.norm_f = make_norm()
        # BERT's MLM head: one more transform of each hidden state, then a score per vocabulary entry.
        self.head_proj = nn.Linear(c.d_model, c.d_model, bias=c.bias, rng=rng)
        self.head_act = nn.GELU(c.gelu_approximate)
        self.head_norm = make_norm()
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=True, rng=rng)  # a bias per token, as in BERT
        if c.tie_weights:
            self.lm_head.weight = self.tok_emb.weight

        normal_init(self, rng)  # BERT's initialisation is GPT-2's

    def encode(self, idx, key_padding_mask=None):
        """Contextual hidden states (B, T, d_model) for ``idx`` (B, T).

        ``key_padding_mask``: bool (B, T), True at padding, which no token attends
        to; by default ``idx == config.pad_id`` when the config has a pad_id.
        """
        c = self.config
        idx = checks.token_batch(idx, c.vocab_size, "MaskedLM.forward")
        B, T = idx.shape
        if T == 0 or T > c.block_size:
            raise ValueError(f"MaskedLM.forward: idx has shape {idx.shape}: {T} positions, but the model takes "
                             f"1 to block_size={c.block_size}")
        if key_padding_mask is None and c.pad_id is not None:
            key_padding_mask = idx == c.pad_id
        x = self.drop(self.pos_emb(self.tok_emb(idx)))  # (B, T, d_model)
        for block in self.blocks:
            x = block(x, key_padding_mask=key_padding_mask)  # (B, T, d_model): attention in both directions
        return self.norm_f(x)

    def forward(self, idx, targets=None, *, key_padding_mask=None):
        """Logits (B, T, vocab_size) at every position; the loss counts only targets that are not -100."""
        h = self.encode(idx, key_padding_mask)  # (B, T, d_model)
        logits = self.lm_head(self.head_norm(self.head_act(self.head_proj(h))))  # (B, T, vocab_size)
        loss = None
        if targets is not None:
            loss = checks.target_loss(logits, targets, "MaskedLM.forward")  # mean over the masked positions only
        return logits, loss


def mask_tokens(idx, *, mask_id: int, vocab_size: int, rng: np.random.Generator, mask_prob: float = 0.15,
                special_ids=()) -> tuple[np.ndarray, np.ndarray]:
    """BERT's corruption: returns ``(inputs, targets)``, both int64 like ``idx`` (B, T).

    Each token not in ``special_ids`` (padding, [CLS], ...) is chosen with
    probability ``mask_prob``. A chosen token becomes ``mask_id`` 80% of the
    time, a uniformly random token 10%, and stays as it is 10% (so the model
    cannot assume that an unmasked token is correct). ``targets`` holds the
    original token at chosen positions and -100 (no loss) everywhere else.
    """
    ids = checks.token_batch(idx, vocab_size, "mask_tokens")
    if not 0 <= mask_id < vocab_size:
        raise ValueError(f"mask_tokens: mask_id={mask_id} is not a token id in [0, vocab_size={vocab_size})")
    if not 0 <= mask_prob <= 1 or not math.isfinite(mask_prob):
        raise ValueError(f"mask_tokens: mask_prob must be a probability in [0, 1], got {mask_prob!r}")
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"mask_tokens: rng must be a numpy.random.Generator, got {type(rng).__name__}")
    chosen = (rng.random(ids.shape) < mask_prob) & ~np.isin(ids, list(special_ids))  # (B, T)
    targets = np.where(chosen, ids, IGNORE_INDEX)
    action = rng.random(ids.shape)  # one draw per position decides what a chosen token becomes
    inputs = ids.copy()
    inputs[chosen & (action < 0.8)] = mask_id
    randomised = chosen & (action >= 0.8) & (action < 0.9)
    inputs[randomised] = rng.integers(0, vocab_size, size=int(randomised.sum()))
    return inputs, targets
