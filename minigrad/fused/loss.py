"""cross_entropy: log-softmax and the negative log-likelihood of the targets as one op."""

from __future__ import annotations

import numpy as np

from .. import kernels
from ..modes import is_grad_enabled
from ..ops import _const, op, sample
from ..tensor import Tensor


def _check_targets(logits: np.ndarray, targets: np.ndarray, ignore_index: int) -> None:
    """The targets' one check (forward and composite): (N,) integer class ids in [0, C), or ``ignore_index``."""
    if logits.ndim != 2:
        raise ValueError(f"logits must be (N, C), got shape {logits.shape}")
    if targets.shape != logits.shape[:1]:
        raise ValueError(f"targets must have shape ({logits.shape[0]},) to match logits {logits.shape}, "
                         f"got {targets.shape}")
    if targets.dtype.kind not in "iu":
        raise TypeError(f"targets must be integer class indices, got {targets.dtype}")
    if targets.size and targets.min() >= 0 and targets.max() < logits.shape[1]:
        return
    bad = (targets != ignore_index) & ((targets < 0) | (targets >= logits.shape[1]))
    if bad.any():
        raise ValueError(f"target {targets[bad][0]} is out of range for {logits.shape[1]} classes")


def _target_rows(targets: np.ndarray, ignore_index: int):
    """(kept: bool (N,), safe_targets: int (N,) with the ignored ones set to 0), for targets already checked."""
    kept = targets != ignore_index
    return kept, np.where(kept, targets, 0)


def _check_reduction(reduction: str) -> None:
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


@op()
class cross_entropy:
    """Mean (or sum, or per-row) of -log softmax(logits)[target], fused and stable.

    ``logits`` (N, C), ``targets`` (N,) integer; rows whose target is
    ``ignore_index`` count for nothing (the mean is over the other rows).
    """
    samples = [sample((4, 5), np.array([0, 3, 4, 1])),
               sample((4, 5), np.array([2, -100, 4, 2]), reduction="sum"),
               sample((3, 4), np.array([1, 0, -1]), ignore_index=-1, reduction="none")]

    def forward(logits, targets, *, ignore_index=-100, reduction="mean"):
        _check_reduction(reduction)
        _check_targets(logits, targets, ignore_index)
        kept, safe = _target_rows(targets, ignore_index)
        rows = kernels.cross_entropy(logits, safe)  # = logsumexp(logits, axis=-1) - logits[r, safe[r]]
        losses = np.where(kept, rows, 0).astype(logits.dtype)
        if reduction == "none":
            return losses
        if reduction == "sum":
            return losses.sum()
        return losses.sum() / np.asarray(np.maximum(kept.sum(), 1), dtype=logits.dtype)

    def vjp(g, out, logits, targets, *, ignore_index=-100, reduction="mean"):
        kept, safe = _target_rows(targets.data, ignore_index)  # (checked by the forward)
        weight = kept.astype(logits.dtype)
        if reduction == "mean":
            weight /= np.maximum(kept.sum(), 1)
        if not is_grad_enabled():  # a first-order backward: no graph to record, so one kernel does it all
            row_weight = np.broadcast_to(g.data, weight.shape) * weight  # (N,)
            return Tensor._wrap(kernels.cross_entropy_grad(logits.data, safe, row_weight)), None  # = below
        onehot = np.zeros(logits.shape, dtype=logits.dtype)
        onehot[np.arange(len(safe)), safe] = 1
        row_grad = g.reshape(-1, 1) * _const(weight.reshape(-1, 1), g)  # (N, 1), or (1, 1) scaled
        return (logits.softmax(axis=-1) - _const(onehot, g)) * row_grad, None

    def composite(logits, targets, *, ignore_index=-100, reduction="mean"):
        _check_reduction(reduction)
        _check_targets(logits.data, targets.data, ignore_index)
        kept, safe = _target_rows(targets.data, ignore_index)
        picked = logits.log_softmax(axis=-1)[np.arange(len(safe)), safe]  # (N,): log p(target) per row
        losses = (-picked).masked_fill(~kept, 0.0)
        if reduction == "none":
            return losses
        return losses.sum() / max(int(kept.sum()), 1) if reduction == "mean" else losses.sum()
