"""The models' input checks, each rule written once: their configs' fields, and the (B, T) batches they take.

* configs: ``GPTConfig``, ``RNNConfig``, ``EncoderConfig`` and ``Seq2SeqConfig``
  call ``positive_ints``, ``probabilities``, ``heads``... from ``__post_init__``
  (``models.costs`` on the configs it counts, and each model on the config it is
  given: ``config_type``), passing the config and the names of its fields; every
  message names the config and the field, and says what was expected;
* batches: ``token_batch`` (a (B, T) batch of token ids), ``target_batch`` (its
  targets; -100, ``IGNORE_INDEX``, means no target) and ``target_loss`` (the
  cross-entropy against the targets, which checks them once, in the loss).

The rules shared with the layers (a probability, heads that divide d_model,
GELU's forms, the range of ids) are the layers' own, in ``minigrad/nn/checks.py``,
so a config and the layers it builds agree, and so do a model and its embedding.
"""

from __future__ import annotations

import math

import numpy as np

from minigrad import Tensor, nn
from minigrad.nn.checks import IGNORE_INDEX, check_heads, check_probability, check_rope_head_dim, token_ids


def _who(config, who: str | None) -> str:
    return who or type(config).__name__


def _is_int(value) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def config_type(config, cls: type, who: str) -> None:
    """A model is built from its config class; the error says how to make one from a dict."""
    if not isinstance(config, cls):
        raise TypeError(f"{who}: config must be an instance of {cls.__name__}, got {type(config).__name__} "
                        f"(from a dict: {who}({cls.__name__}(**d)))")


def positive_ints(config, *names: str, who: str | None = None) -> None:
    """Each field must be a positive integer (not a bool, not a float)."""
    for name in names:
        value = getattr(config, name)
        if not _is_int(value) or value < 1:
            raise ValueError(f"{_who(config, who)}: {name} must be a positive integer, got {value!r}")


def positive_numbers(config, *names: str, who: str | None = None) -> None:
    """Each field must be a finite number > 0 (an epsilon)."""
    for name in names:
        value = getattr(config, name)
        number = isinstance(value, int | float | np.number) and not isinstance(value, bool)
        if not (number and math.isfinite(value) and value > 0):
            raise ValueError(f"{_who(config, who)}: {name} must be a positive number, got {value!r}")


def probabilities(config, *names: str, who: str | None = None) -> None:
    """Each field must be a probability in [0, 1]: the rule of ``nn.Dropout``, which the model builds from it."""
    for name in names:
        check_probability(getattr(config, name), _who(config, who), name)


def bools(config, *names: str, who: str | None = None) -> None:
    """Each field must be True or False (not 0, 1 or a string)."""
    for name in names:
        if not isinstance(getattr(config, name), bool):
            raise TypeError(f"{_who(config, who)}: {name} must be True or False, got {getattr(config, name)!r}")


def choices(config, who: str | None = None, **allowed: tuple) -> None:
    """Each field named by a keyword must be one of the values given for it (GELU's: ``nn.checks.GELU_FORMS``)."""
    for name, options in allowed.items():
        value = getattr(config, name)
        if value not in options:
            raise ValueError(f"{_who(config, who)}: {name}={value!r}; expected one of {options}")


def heads(config, n_kv_head: int | None = None, who: str | None = None) -> None:
    """d_model must split into n_head heads (and n_head into groups of query heads, one per n_kv_head)."""
    check_heads(_who(config, who), config.d_model, config.n_head, n_kv_head,
                       names=("d_model", "n_head", "n_kv_head"))


def rope_head_dim(config, who: str | None = None) -> None:
    """With RoPE, head_dim = d_model / n_head must be even."""
    check_rope_head_dim(_who(config, who), config.d_model // config.n_head,
                               f" = d_model / n_head = {config.d_model} / {config.n_head}")


def token_id_fields(config, vocab: str, *names: str, what: str = "a token id", who: str | None = None) -> None:
    """Each field that is not None must be an id in [0, vocab_size); ``vocab`` names the vocabulary's field."""
    size = getattr(config, vocab)
    for name in names:
        value = getattr(config, name)
        if value is not None and not (_is_int(value) and 0 <= value < size):
            raise ValueError(f"{_who(config, who)}: {name}={value!r} is not {what} in [0, {vocab}={size})")



# --------------------------------------------------------------------------------------
# (B, T) batches of token ids, and their targets
# --------------------------------------------------------------------------------------


def token_batch(idx, vocab_size: int, who: str, name: str = "idx") -> np.ndarray:
    """``idx`` (a Tensor, ndarray or nested list of token ids) as an int64 (B, T) array, checked."""
    ids = token_ids(idx, vocab_size, who, name, size_name="vocab_size", error=ValueError)
    if ids.ndim != 2:
        raise ValueError(f"{who}: {name} must be a (batch, time) array of token ids, got shape {ids.shape}")
    return ids.astype(np.int64, copy=False)


def target_batch(targets, shape: tuple, vocab_size: int, who: str, name: str = "targets") -> np.ndarray:
    """Targets as an int64 array of ``shape``: ids in [0, vocab_size), or -100 where no loss is wanted."""
    ids = token_ids(targets, vocab_size, who, name, size_name="vocab_size", error=ValueError, shape=shape,
                    why="one target per input position", ignore_index=IGNORE_INDEX)
    return ids.astype(np.int64, copy=False)


def target_loss(logits: Tensor, targets, who: str, name: str = "targets") -> Tensor:
    """``F.cross_entropy`` of (B, T, V) logits, flattened to (B*T, V) rows (the classes on dim 1, as PyTorch),
    against (B, T) targets: the mean over the positions that have a target (not -100).

    The targets are checked once per step, by the loss. When it refuses them,
    the error is the model's own: ``target_batch``'s, naming ``who`` and
    ``name`` (``GPT.forward: targets holds token id 70, outside [0, vocab_size=65)``).
    """
    ids = targets.data if isinstance(targets, Tensor) else np.asarray(targets)
    if ids.shape != logits.shape[:-1]:
        target_batch(targets, logits.shape[:-1], logits.shape[-1], who, name)  # raises, naming the shape needed
    try:
        return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids.reshape(-1))
    except (TypeError, ValueError, IndexError):  # the loss's own words: cross_entropy, target, classes
        target_batch(targets, logits.shape[:-1], logits.shape[-1], who, name)  # raises when the targets are at fault
        raise
