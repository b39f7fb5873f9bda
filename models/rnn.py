"""Recurrent language models (vanilla RNN, LSTM, GRU) with the same interface as ``models.GPT``.

    idx (B, T) token ids
      -> token embedding (B, T, d_model) -> dropout
      -> n_layer recurrent layers, step by step through time: (B, T, hidden_size)
      -> dropout -> linear head -> logits (B, T, vocab_size), and the cross-entropy against targets

``forward(idx, targets=None) -> (logits, loss)`` and ``generate(...)`` take the
same arguments as GPT's, so a demo can train a GPT and an LSTM on the same
batches and compare them. What differs is how they remember: GPT attends to
every earlier token within ``block_size``; a recurrent model squeezes the whole
past into a fixed-size state (h, plus the cell c for the LSTM), so it has no
context limit, but what it keeps must fit in ``hidden_size`` numbers, and the
gradient that teaches it what to keep shrinks as it flows back through time.

Generating carries that state along: each new token is one recurrent step
(``use_cache=True``, the analogue of GPT's KV cache). ``use_cache=False``
reruns the whole sequence from the start at each step; both give the same tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from minigrad import nn
from minigrad.nn import init

from . import checks, generation

_LAYERS = {"rnn": nn.RNN, "lstm": nn.LSTM, "gru": nn.GRU}


@dataclass
class RNNConfig:
    """The shape of a recurrent LM; ``cell`` is 'rnn' (tanh Elman RNN), 'lstm' or 'gru'."""

    vocab_size: int
    cell: str = "lstm"
    d_model: int = 64  # embedding width: the recurrent layers' input
    hidden_size: int = 128
    n_layer: int = 1
    dropout: float = 0.0  # on the embeddings, between recurrent layers and before the head
    tie_weights: bool = False  # the head reuses the embedding matrix (needs hidden_size == d_model)

    def __post_init__(self):  # each rule is written once, in models/checks.py
        checks.positive_ints(self, "vocab_size", "d_model", "hidden_size", "n_layer")
        checks.choices(self, cell=tuple(_LAYERS))
        checks.probabilities(self, "dropout")
        checks.bools(self, "tie_weights")
        if self.tie_weights and self.hidden_size != self.d_model:
            raise ValueError(f"RNNConfig: tie_weights needs hidden_size == d_model (the head reuses the "
                             f"embedding matrix), got hidden_size={self.hidden_size}, d_model={self.d_model}")


class RNNLM(nn.Module):
    """A recurrent LM: ``forward(idx, targets=None) -> (logits, loss)``, ``unroll`` with state, ``generate``.

    Weights start as PyTorch's defaults (recurrent and head weights uniform in
    +-1/sqrt(fan), the embedding N(0, 1)); ``seed`` or ``rng`` makes them reproducible.
    """

    def __init__(self, config: RNNConfig, *, seed: int | None = None, rng: np.random.Generator | None = None):
        super().__init__()
        checks.config_type(config, RNNConfig, "RNNLM")
        rng = init.resolve_rng(rng, seed, who="RNNLM")
        self.config = c = config
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model, rng=rng)
        self.drop = nn.Dropout(c.dropout, rng=rng)
        self.rnn = _LAYERS[c.cell](c.d_model, c.hidden_size, num_layers=c.n_layer, dropout=c.dropout, batch_first=True,
                                   rng=rng)
        self.lm_head = nn.Linear(c.hidden_size, c.vocab_size, rng=rng)
        if c.tie_weights:
            self.lm_head.weight = self.tok_emb.weight

    def unroll(self, idx, state=None):
        """Run over ``idx`` (B, T) from ``state`` (None: zeros); returns logits (B, T, vocab_size) and the final state.

        The state is what ``nn.RNN`` / ``nn.GRU`` return, h (n_layer, B, hidden_size),
        or for the LSTM the pair (h, c). Pass it back in to continue the sequence
        (truncated backprop through time, or generation).
        """
        idx = checks.token_batch(idx, self.config.vocab_size, "RNNLM.forward")
        if idx.shape[1] == 0:
            raise ValueError(f"RNNLM.forward: idx must have at least one position, got shape {idx.shape}")
        x = self.drop(self.tok_emb(idx))  # (B, T, d_model)
        x, state = self.rnn(x, state)  # (B, T, hidden_size): the top layer's h at every step
        return self.lm_head(self.drop(x)), state  # (B, T, vocab_size)

    def forward(self, idx, targets=None, *, state=None):
        """Logits (B, T, vocab_size) for ``idx`` (B, T), and the mean cross-entropy against ``targets`` (or None)."""
        logits, _ = self.unroll(idx, state)
        loss = None
        if targets is not None:
            loss = checks.target_loss(logits, targets, "RNNLM.forward")
        return logits, loss

    def generate(self, idx, max_new_tokens: int, temperature: float = 1.0, top_k: int | None = None,
                 top_p: float | None = None, rng: np.random.Generator | None = None, use_cache: bool = True,
                 return_logits: bool = False):
        """Continue each prompt in ``idx`` (B, T) by ``max_new_tokens`` tokens, as ``GPT.generate`` does.

        With ``use_cache`` the recurrent state is carried from step to step
        (one step per new token); without, every step reruns the whole sequence.
        """
        idx = checks.token_batch(idx, self.config.vocab_size, "RNNLM.generate")
        if idx.shape[1] == 0:
            raise ValueError(f"RNNLM.generate: idx must hold a prompt of at least one token per row, got shape "
                             f"{idx.shape}")
        carried = {"state": None, "seen": 0}  # the state after the first `seen` tokens

        def next_logits(tokens):  # tokens (B, L): the prompt and everything generated so far
            if not use_cache:
                return self.unroll(tokens)[0][:, -1]
            logits, carried["state"] = self.unroll(tokens[:, carried["seen"]:], carried["state"])
            carried["seen"] = tokens.shape[1]
            return logits[:, -1]  # (B, vocab_size)

        with generation.eval_mode(self):
            return generation.autoregressive(next_logits, idx, max_new_tokens, temperature, top_k, top_p, rng,
                                             return_logits=return_logits, who="RNNLM.generate")
