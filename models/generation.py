"""Generating text one token at a time: the sampling rules and the loop every model shares.

A language model gives, for each sequence in a batch, logits over the
vocabulary for the *next* token. Generation repeats: turn the logits into one
token, append it, ask the model again. How the logits become a token is the
same for every model here (GPT, the RNN/LSTM models, the encoder-decoder), so
it lives in this one file:

* ``temperature``: divide the logits by it before the softmax. Below 1 the
  distribution sharpens towards the likeliest tokens, above 1 it flattens;
  ``temperature=0`` means greedy decoding, always the argmax;
* ``top_k``: keep only the k likeliest tokens;
* ``top_p`` (nucleus sampling, Holtzman et al. 2019): keep the smallest set of
  likeliest tokens whose probabilities add up to at least p.

How a model *computes* the next logits is its own business: ``autoregressive``
takes a function ``next_logits(tokens)`` that sees every token so far and
returns the logits for the next one. A GPT with a KV cache feeds only the new
token through its layers; an RNN feeds it to its recurrent state; without a
cache a model reruns the whole sequence. The loop does not care.

The models check their token ids and targets before they get here, with the
checks in ``minigrad/nn/checks.py``; this file only samples.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable

import numpy as np

from minigrad import Tensor, no_grad
from minigrad.nn import init

# --------------------------------------------------------------------------------------
# From logits to the next token
# --------------------------------------------------------------------------------------


def check_sampling(temperature: float, top_k: int | None, top_p: float | None, who: str = "generate") -> None:
    """Raise a clear error for a temperature, top_k or top_p that means nothing."""
    number = isinstance(temperature, int | float | np.number) and not isinstance(temperature, bool)
    if not (number and math.isfinite(temperature) and temperature >= 0):
        raise ValueError(f"{who}: temperature must be a finite number >= 0 (0 = greedy), got {temperature!r}")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int | np.integer) or top_k < 1):
        raise ValueError(f"{who}: top_k must be a positive integer or None, got {top_k!r}")
    if top_p is not None and not (isinstance(top_p, int | float | np.number) and 0 < top_p <= 1):
        raise ValueError(f"{who}: top_p must be in (0, 1] or None, got {top_p!r}")


def filter_logits(logits: np.ndarray, top_k: int | None = None, top_p: float | None = None) -> np.ndarray:
    """Set to -inf every logit outside the top k and outside the nucleus of mass top_p; (B, V) -> (B, V)."""
    logits = np.array(logits, dtype=np.float64)  # a copy: the caller's logits stay as they were
    if top_k is not None and top_k < logits.shape[-1]:
        kth = np.sort(logits, axis=-1)[:, -top_k][:, None]  # (B, 1): the k-th largest logit
        logits[logits < kth] = -np.inf
    if top_p is not None and top_p < 1.0:
        order = np.argsort(-logits, axis=-1, kind="stable")  # (B, V): likeliest first
        probs = _softmax(np.take_along_axis(logits, order, axis=-1))
        mass_before = np.cumsum(probs, axis=-1) - probs  # probability of the tokens ranked above each one
        drop_sorted = mass_before >= top_p  # the likeliest token has mass_before 0, so it always stays
        drop = np.empty_like(drop_sorted)
        np.put_along_axis(drop, order, drop_sorted, axis=-1)
        logits[drop] = -np.inf
    return logits


def sample_next(logits, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
                rng: np.random.Generator | int | None = None) -> np.ndarray:
    """One token id per row of ``logits`` (B, V): argmax when temperature is 0, else a draw. Returns (B,) int64.

    ``rng``: a NumPy Generator or seed; None draws from ``minigrad.nn``'s default generator. The logits
    are shifted so that each row's largest is 0 *before* dividing by the temperature, in float64: however
    small the temperature (1e-38 in float32), the division cannot overflow into NaN, and the draw tends to
    the argmax (split evenly among tied maxima), as it should. A row holding NaN or +inf, or only -inf,
    names no distribution: it is a ValueError naming the row, never a quiet token 0.
    """
    check_sampling(temperature, top_k, top_p, "sample_next")
    logits = np.asarray(logits.data if isinstance(logits, Tensor) else logits)
    if logits.ndim != 2:
        raise ValueError(f"sample_next: logits must be (batch, vocab_size), got shape {logits.shape}")
    top = logits.max(axis=-1, keepdims=True) if logits.shape[-1] else np.full((len(logits), 1), np.nan)  # (B, 1)
    broken = ~np.isfinite(top[:, 0])
    if broken.any():
        row = int(np.argmax(broken))
        what = "hold NaN" if np.isnan(logits[row]).any() else "hold +inf" if np.isposinf(top[row, 0]) else \
            "are all -inf" if logits.shape[-1] else "are empty (vocab_size 0)"
        raise ValueError(f"sample_next: the logits of row {row} {what}, so they give no distribution to sample "
                         f"from (a model that diverged, or a mask that hides every token)")
    if temperature == 0:
        return logits.argmax(axis=-1).astype(np.int64)
    rng = init.default_rng() if rng is None else np.random.default_rng(rng)
    with np.errstate(over="ignore"):  # a tiny temperature sends the non-maximal logits to -inf: probability 0
        scaled = (logits.astype(np.float64) - top) / float(temperature)  # (B, V), each row's largest 0
    probs = _softmax(filter_logits(scaled, top_k, top_p))  # (B, V), float64
    # Inverse-CDF sampling: the first token whose cumulative probability passes a uniform draw.
    u = rng.random((probs.shape[0], 1))  # (B, 1)
    cdf = np.cumsum(probs, axis=-1)
    picked = (cdf < u * cdf[:, -1:]).sum(axis=-1)  # scaling by the total guards against rounding
    return np.minimum(picked, probs.shape[-1] - 1).astype(np.int64)


def _softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))  # -inf logits become exactly 0
    return shifted / shifted.sum(axis=-1, keepdims=True)


# --------------------------------------------------------------------------------------
# The loop
# --------------------------------------------------------------------------------------


@contextlib.contextmanager
def eval_mode(model):
    """Run a block with ``model`` in eval mode (no dropout), then restore the mode each submodule had.

    Each one's own: a submodule kept in eval mode while the rest trains stays so.
    """
    modes = [(module, module.training) for module in model.modules()]
    model.eval()
    try:
        yield
    finally:
        for module, training in modes:
            module.training = training


def autoregressive(next_logits: Callable[[np.ndarray], object], idx: np.ndarray, max_new_tokens: int,
                   temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
                   rng: np.random.Generator | int | None = None, stop_id: int | None = None,
                   return_logits: bool = False, who: str = "generate"):
    """Extend ``idx`` (B, T) by up to ``max_new_tokens`` tokens; returns the (B, T + new) int64 array.

    ``next_logits(tokens)`` gets all tokens so far (B, T + i) and returns the
    next token's logits (B, V). Runs under ``no_grad``. ``rng`` (a NumPy
    Generator or a seed) makes sampling reproducible; without one the default
    generator of ``minigrad.nn.init`` is used (``nn.manual_seed`` seeds it).
    With ``stop_id``, a row that has produced it keeps producing it, and the
    loop ends early once every row has. With ``return_logits`` also returns
    the logits each new token was chosen from, (B, new, V) float (before
    temperature and filtering).
    """
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int | np.integer) or max_new_tokens < 0:
        raise ValueError(f"{who}: max_new_tokens must be an integer >= 0, got {max_new_tokens!r}")
    check_sampling(temperature, top_k, top_p, who)
    rng = init.default_rng() if rng is None else np.random.default_rng(rng)
    tokens, steps = idx, []
    done = np.zeros(idx.shape[0], dtype=bool)
    with no_grad():
        for _ in range(max_new_tokens):
            logits = next_logits(tokens)
            logits = np.asarray(logits.data if isinstance(logits, Tensor) else logits)  # (B, V)
            new = sample_next(logits, temperature, top_k, top_p, rng)  # (B,)
            if stop_id is not None:
                new = np.where(done, stop_id, new)
                done |= new == stop_id
            tokens = np.concatenate([tokens, new[:, None]], axis=1)  # (B, T + i + 1)
            steps.append(logits)
            if stop_id is not None and done.all():
                break
    if return_logits:
        vocab = steps[0].shape[-1] if steps else 0
        logits = np.stack(steps, axis=1) if steps else np.zeros((idx.shape[0], 0, vocab), np.float32)
        return tokens, logits
    return tokens
