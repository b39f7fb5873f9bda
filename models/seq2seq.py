"""The encoder-decoder transformer of "Attention Is All You Need" (Vaswani et al. 2017), for sequence-to-sequence tasks.

    src (B, S) -> embedding * sqrt(d_model) + sinusoidal positions
               -> n_layer encoder blocks (self-attention over the whole source)        -> memory (B, S, d_model)
    tgt_in (B, T) = [BOS] + the target so far
               -> embedding * sqrt(d_model) + positions
               -> n_layer decoder blocks: causal self-attention, then cross-attention to memory, then the MLP
               -> linear head (tied to the target embedding) -> logits (B, T, tgt_vocab_size)

The decoder is trained with *teacher forcing*: it reads the true target shifted
right by one (``tgt_in``) and predicts every next token (``tgt_out``) at once,
so one forward pass scores the whole target. At inference it has only its own
output: ``generate`` / ``greedy_decode`` feed each new token back in, with a
KV cache for the decoder's self-attention and the encoder's keys and values
projected once per cross-attention layer.

As in the paper by default: post-norm blocks (``x = Norm(x + Sublayer(x))``),
sinusoidal positions, a ReLU MLP, embeddings scaled by sqrt(d_model).
``norm_first=True`` gives the pre-norm placement most later models use (with a
final norm after each stack). Cross-attention weights (which source tokens each
output token looked at) come back from ``forward(..., return_attention=True)``.

Padding: with ``pad_id`` set, padded source tokens are masked out of every
attention, and padded target tokens count for nothing in the loss. Padding in
``tgt_in`` needs no mask: it comes after the end of the target, and a causal
decoder never lets earlier positions see later ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from minigrad import Tensor, nn, no_grad
from minigrad.nn import KVCache, init
from minigrad.nn.checks import IGNORE_INDEX

from . import checks, generation


@dataclass
class Seq2SeqConfig:
    """The shape of an encoder-decoder; ``bos_id`` starts every decoded sequence, ``eos_id`` ends it."""

    src_vocab_size: int
    tgt_vocab_size: int
    block_size: int  # the longest source, and the longest decoder input
    n_layer: int = 2  # encoder blocks, and as many decoder blocks (6 in the paper)
    n_head: int = 4
    d_model: int = 64
    d_ff: int | None = None  # None: 4 * d_model
    norm_first: bool = False  # False: post-norm, as in the paper
    position: str = "sinusoidal"  # or "learned"
    mlp: str = "relu"  # or "gelu"
    dropout: float = 0.0
    bias: bool = True
    tie_weights: bool = True  # the output layer reuses the target embedding matrix
    norm_eps: float = 1e-5
    pad_id: int | None = None
    bos_id: int = 0
    eos_id: int | None = None

    def __post_init__(self):  # each rule is written once, in models/checks.py
        checks.positive_ints(self, "src_vocab_size", "tgt_vocab_size", "block_size", "n_layer", "n_head", "d_model")
        if self.d_ff is None:
            self.d_ff = 4 * self.d_model
        checks.positive_ints(self, "d_ff")
        checks.choices(self, position=("sinusoidal", "learned"), mlp=("relu", "gelu"))
        checks.heads(self)
        checks.probabilities(self, "dropout")
        checks.positive_numbers(self, "norm_eps")
        checks.bools(self, "norm_first", "bias", "tie_weights")
        checks.token_id_fields(self, "tgt_vocab_size", "bos_id", "eos_id", what="a target token id")
        if self.pad_id is not None and not 0 <= self.pad_id < min(self.src_vocab_size, self.tgt_vocab_size):
            raise ValueError(f"Seq2SeqConfig: pad_id={self.pad_id} must be a token id in both vocabularies "
                             f"(src_vocab_size={self.src_vocab_size}, tgt_vocab_size={self.tgt_vocab_size})")



class Seq2Seq(nn.Module):
    """Encoder-decoder transformer: ``forward(src, tgt_in, tgt_out=None) -> (logits, loss)``; ``greedy_decode``."""

    def __init__(self, config: Seq2SeqConfig, *, seed: int | None = None, rng: np.random.Generator | None = None):
        super().__init__()
        checks.config_type(config, Seq2SeqConfig, "Seq2Seq")
        rng = init.resolve_rng(rng, seed, who="Seq2Seq")
        self.config = c = config

        def block(decoder: bool):
            return nn.TransformerBlock(c.d_model, c.n_head, c.d_ff, norm_first=c.norm_first, causal=decoder,
                                       cross_attention=decoder, mlp=c.mlp, dropout=c.dropout, bias=c.bias,
                                       eps=c.norm_eps, rng=rng)

        def final_norm():  # only pre-norm stacks end un-normalised
            return nn.LayerNorm(c.d_model, eps=c.norm_eps, bias=c.bias) if c.norm_first else nn.Identity()

        self.src_emb = nn.Embedding(c.src_vocab_size, c.d_model, rng=rng)
        self.tgt_emb = nn.Embedding(c.tgt_vocab_size, c.d_model, rng=rng)
        for emb in (self.src_emb, self.tgt_emb):  # N(0, 1/d_model): times sqrt(d_model) gives unit scale
            init.normal_(emb.weight, 0.0, c.d_model ** -0.5, rng)
        if c.position == "learned":
            self.src_pos = nn.LearnedPositionalEmbedding(c.block_size, c.d_model, rng=rng)
            self.tgt_pos = nn.LearnedPositionalEmbedding(c.block_size, c.d_model, rng=rng)
        else:
            self.src_pos = self.tgt_pos = nn.SinusoidalPositionalEncoding(c.d_model)
        self.drop = nn.Dropout(c.dropout, rng=rng)
        self.encoder = nn.ModuleList(block(decoder=False) for _ in range(c.n_layer))
        self.encoder_norm = final_norm()
        self.decoder = nn.ModuleList(block(decoder=True) for _ in range(c.n_layer))
        self.decoder_norm = final_norm()
        self.lm_head = nn.Linear(c.d_model, c.tgt_vocab_size, bias=False, rng=rng)
        if c.tie_weights:
            self.lm_head.weight = self.tgt_emb.weight

    # --- the two halves -----------------------------------------------------------------

    def _embed(self, ids: np.ndarray, emb: nn.Embedding, pos: nn.Module, offset: int = 0):
        x = emb(ids) * math.sqrt(self.config.d_model)  # (B, T, d_model)
        return self.drop(pos(x, offset=offset))

    def source_padding(self, src: np.ndarray):
        """bool (B, S), True at padding (None when the config has no pad_id): the keys attention skips."""
        return None if self.config.pad_id is None else src == self.config.pad_id

    def encode(self, src):
        """The encoder's output ``memory`` (B, S, d_model) for source ids ``src`` (B, S)."""
        src = self._ids(src, self.config.src_vocab_size, "src")
        padding = self.source_padding(src)
        x = self._embed(src, self.src_emb, self.src_pos)  # (B, S, d_model)
        for block in self.encoder:
            x = block(x, key_padding_mask=padding)  # (B, S, d_model): every source token sees all the others
        return self.encoder_norm(x)

    def decode(self, tgt_in, memory, src_padding=None, *, kv_caches=None, need_weights: bool = False):
        """Logits (B, T, tgt_vocab_size) for decoder inputs ``tgt_in`` (B, T) attending to ``memory`` (B, S, d_model).

        ``src_padding``: bool (B, S), True at padded source tokens. ``kv_caches``:
        a list of (self-attention cache, cross-attention cache) per decoder block,
        for decoding one token at a time. With ``need_weights`` returns
        ``(logits, cross)``, ``cross`` a list with each block's cross-attention
        weights (B, n_head, T, S).
        """
        c = self.config
        tgt_in = self._ids(tgt_in, c.tgt_vocab_size, "tgt_in")
        start = kv_caches[0][0].length if kv_caches else 0
        if start + tgt_in.shape[1] > c.block_size:
            raise ValueError(f"Seq2Seq.forward: tgt_in has shape {tgt_in.shape}"
                             f"{f' after {start} cached positions' if start else ''}; the decoder takes at most "
                             f"block_size={c.block_size} positions")
        x = self._embed(tgt_in, self.tgt_emb, self.tgt_pos, offset=start)  # (B, T, d_model)
        cross = []
        for i, block in enumerate(self.decoder):
            cache, cross_cache = kv_caches[i] if kv_caches else (None, None)
            x = block(x, memory, memory_key_padding_mask=src_padding, cache=cache, cross_cache=cross_cache,
                      need_weights=need_weights)
            if need_weights:
                x, weights = x
                cross.append(weights["cross_attn"])  # (B, n_head, T, S)
        logits = self.lm_head(self.decoder_norm(x))  # (B, T, tgt_vocab_size)
        return (logits, cross) if need_weights else logits

    def forward(self, src, tgt_in, tgt_out=None, *, return_attention: bool = False):
        """Teacher-forced logits (B, T, tgt_vocab_size), and the cross-entropy against ``tgt_out`` (B, T) or None.

        With ``return_attention`` also returns each decoder block's cross-attention
        weights, a list of (B, n_head, T, S) tensors: ``(logits, loss, cross)``.
        """
        src = self._ids(src, self.config.src_vocab_size, "src")
        tgt_in = self._ids(tgt_in, self.config.tgt_vocab_size, "tgt_in")
        if len(src) != len(tgt_in):
            raise ValueError(f"Seq2Seq.forward: src {src.shape} and tgt_in {tgt_in.shape} must have the same "
                             f"batch size")
        memory = self.encode(src)  # (B, S, d_model)
        out = self.decode(tgt_in, memory, self.source_padding(src), need_weights=return_attention)
        logits, cross = out if return_attention else (out, None)
        loss = None
        if tgt_out is not None:
            targets = tgt_out
            if self.config.pad_id is not None:  # padding after the end of a target is not something to predict
                ids = tgt_out.data if isinstance(tgt_out, Tensor) else np.asarray(tgt_out)
                targets = np.where(ids == self.config.pad_id, IGNORE_INDEX, ids)
            loss = checks.target_loss(logits, targets, "Seq2Seq.forward", "tgt_out")
        return (logits, loss, cross) if return_attention else (logits, loss)

    def _ids(self, ids, vocab_size: int, name: str, who: str = "Seq2Seq.forward") -> np.ndarray:
        ids = checks.token_batch(ids, vocab_size, who, name)
        if ids.shape[1] == 0 or ids.shape[1] > self.config.block_size:
            raise ValueError(f"{who}: {name} has shape {ids.shape}: {ids.shape[1]} positions, but the model "
                             f"takes 1 to block_size={self.config.block_size}")
        return ids

    # --- decoding -----------------------------------------------------------------------

    def generate(self, src, max_new_tokens: int, temperature: float = 1.0, top_k: int | None = None,
                 top_p: float | None = None, rng: np.random.Generator | None = None, use_cache: bool = True,
                 return_logits: bool = False):
        """Decode up to ``max_new_tokens`` target tokens for each source; returns (B, n) int64, without BOS.

        Decoding starts from ``config.bos_id`` and, when the config has an
        ``eos_id``, stops once every row has produced it; a row's positions after
        its EOS hold ``pad_id`` (or EOS again when there is no pad_id). Sampling
        follows ``models.generation`` (``temperature=0``: greedy). ``use_cache``:
        each step runs only the new token through the decoder (the same tokens as
        without it).
        """
        c = self.config
        src = self._ids(src, c.src_vocab_size, "src", "Seq2Seq.generate")
        if isinstance(max_new_tokens, int | np.integer) and max_new_tokens > c.block_size:
            raise ValueError(f"Seq2Seq.generate: max_new_tokens={max_new_tokens} needs {max_new_tokens} decoder "
                             f"positions, more than block_size={c.block_size}")
        with generation.eval_mode(self):
            with no_grad():
                memory, src_padding = self.encode(src), self.source_padding(src)  # the source is encoded once
            caches = [(KVCache(), KVCache()) for _ in self.decoder] if use_cache else None

            def next_logits(tokens):  # tokens (B, L): BOS and everything decoded so far
                if caches is None:
                    return self.decode(tokens, memory, src_padding)[:, -1]
                new = tokens[:, caches[0][0].length:]  # the one token the caches have not seen
                return self.decode(new, memory, src_padding, kv_caches=caches)[:, -1]  # (B, tgt_vocab_size)

            bos = np.full((len(src), 1), c.bos_id, dtype=np.int64)
            result = generation.autoregressive(next_logits, bos, max_new_tokens, temperature, top_k, top_p, rng,
                                               stop_id=c.eos_id, return_logits=return_logits,
                                               who="Seq2Seq.generate")
        tokens, logits = result if return_logits else (result, None)
        tokens = tokens[:, 1:]  # drop BOS
        if c.eos_id is not None and c.pad_id is not None:
            after_eos = np.cumsum(tokens == c.eos_id, axis=1) - (tokens == c.eos_id) > 0
            tokens = np.where(after_eos, c.pad_id, tokens)
        return (tokens, logits) if return_logits else tokens

    def greedy_decode(self, src, max_new_tokens: int, use_cache: bool = True):
        """The likeliest token at every step (``generate`` with temperature 0); (B, n) int64, without BOS."""
        return self.generate(src, max_new_tokens, temperature=0.0, use_cache=use_cache)
