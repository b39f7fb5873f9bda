"""Loss functions and their modules, with ``torch.nn.functional``'s and ``torch.nn``'s names, arguments and meanings.

| function | module | what it measures |
|---|---|---|
| ``mse_loss``  | ``MSELoss``  | (input - target)**2 |
| ``l1_loss``   | ``L1Loss``   | abs(input - target) |
| ``nll_loss``  | ``NLLLoss``  | -input[n, target[n]]: the log-probabilities given to the targets |
| ``cross_entropy`` | ``CrossEntropyLoss`` | nll_loss(log_softmax(input, dim=1), target), of logits |
| ``binary_cross_entropy`` | ``BCELoss`` | -(y log p + (1 - y) log(1 - p)), p a probability |
| ``binary_cross_entropy_with_logits`` | ``BCEWithLogitsLoss`` | the same of p = sigmoid(x), computed from x |

As in PyTorch, the classes are on dim 1: logits (N, C) or (N, C, d1, d2, ...)
with class ids (N,) or (N, d1, d2, ...); a single sample (C,) with a 0-d target.
A language model's (B, T, C) logits are flattened first:
``F.cross_entropy(logits.reshape(-1, C), targets.reshape(-1))``.

``reduction`` is ``'mean'`` (the default), ``'sum'`` or ``'none'`` (one loss per
element); ``ignore_index`` marks targets that count for nothing. The deprecated
``size_average=``/``reduce=`` are read as PyTorch reads them.

Every loss is made of op-table ops, so its gradient comes from the table.
The forms are the stable ones: cross_entropy through log_softmax (log-sum-exp),
``binary_cross_entropy_with_logits`` through log(sigmoid(x)) written so that
exp never overflows, and ``binary_cross_entropy`` clamps its logs at -100, as
PyTorch does, so p = 0 or 1 gives a finite loss.

Plain (N, C) logits with class ids go through the fused ``cross_entropy``
primitive (``minigrad/fused/``), as a language model's flattened logits do.

Two differences, on purpose: a mean over targets that are all ignored is 0,
not PyTorch's NaN (0 / 0); and at p exactly 0 or 1 ``binary_cross_entropy``'s
gradient is the clamped formula's own (0 for a clamped log), where PyTorch
divides (p - y) by max(p (1 - p), 1e-12).
"""

from __future__ import annotations

import warnings

import numpy as np

from .. import fused
from ..tensor import Tensor
from .checks import token_ids
from .module import Module

REDUCTIONS = ("mean", "sum", "none")


def _legacy_reduction(who: str, size_average, reduce, reduction: str) -> str:
    """PyTorch's reading of the deprecated ``size_average``/``reduce`` (either given overrides ``reduction``)."""
    if size_average is not None or reduce is not None:
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        warnings.warn(f"{who}: size_average and reduce are deprecated; write reduction='mean', 'sum' or 'none'",
                      UserWarning, stacklevel=3)
        reduction = "none" if not reduce else "mean" if size_average else "sum"
    if reduction not in REDUCTIONS:
        raise ValueError(f"{who}: {reduction!r} is not a valid value for reduction; use 'mean', 'sum' or 'none'")
    return reduction


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    return loss.mean() if reduction == "mean" else loss.sum() if reduction == "sum" else loss


def _float_input(who: str, input) -> Tensor:
    if not isinstance(input, Tensor) or input.dtype.kind != "f":
        got = f"a {input.dtype} Tensor" if isinstance(input, Tensor) else f"a {type(input).__name__}"
        raise TypeError(f"{who}: input must be a float Tensor, got {got}; write {who}(input.float(), target)")
    return input


def _target_like(who: str, input: Tensor, target, same_shape: bool) -> Tensor | np.ndarray:
    """The elementwise losses' target: a Tensor or array of input's shape (PyTorch warns and broadcasts if not).

    An integer or bool target is cast to input's dtype, as PyTorch's promotion does.
    """
    if not isinstance(target, Tensor):
        target = np.asarray(target)
    if target.dtype.kind not in "fiub":
        raise TypeError(f"{who}: target must hold numbers, got dtype {target.dtype}")
    if target.dtype.kind != "f":
        target = target.astype(input.dtype)
    if tuple(target.shape) != tuple(input.shape):
        if same_shape:
            raise ValueError(f"{who}: Using a target size {tuple(target.shape)} that is different to the input "
                             f"size {tuple(input.shape)} is deprecated. Please ensure they have the same size.")
        try:
            np.broadcast_shapes(tuple(target.shape), tuple(input.shape))
        except ValueError:
            raise ValueError(f"{who}: the target's shape {tuple(target.shape)} does not broadcast with the input's "
                             f"{tuple(input.shape)}; give a target of the input's shape") from None
        warnings.warn(f"{who}: Using a target size {tuple(target.shape)} that is different to the input size "
                      f"{tuple(input.shape)}. This will likely lead to incorrect results due to broadcasting. "
                      f"Please ensure they have the same size.", UserWarning, stacklevel=3)
    return target


def _weight(weight):
    """A ``weight=``/``pos_weight=`` as given: a Tensor (which may require grad), else an array."""
    return weight if weight is None or isinstance(weight, Tensor) else np.asarray(weight)


# --------------------------------------------------------------------------------------
# Regression losses
# --------------------------------------------------------------------------------------


def mse_loss(input: Tensor, target, size_average=None, reduce=None, reduction: str = "mean", weight=None) -> Tensor:
    """(input - target)**2, averaged (``'mean'``), summed or per element; ``weight`` as ``_elementwise_weight``."""
    reduction = _legacy_reduction("mse_loss", size_average, reduce, reduction)
    input = _float_input("mse_loss", input)
    diff = input - _target_like("mse_loss", input, target, same_shape=False)
    return _elementwise_weight("mse_loss", input, diff * diff, weight, reduction)


def l1_loss(input: Tensor, target, size_average=None, reduce=None, reduction: str = "mean", weight=None) -> Tensor:
    """abs(input - target), averaged (``'mean'``), summed or per element; ``weight`` as ``_elementwise_weight``."""
    reduction = _legacy_reduction("l1_loss", size_average, reduce, reduction)
    input = _float_input("l1_loss", input)
    loss = (input - _target_like("l1_loss", input, target, same_shape=False)).abs()
    return _elementwise_weight("l1_loss", input, loss, weight, reduction)


def _elementwise_weight(who: str, input: Tensor, loss: Tensor, weight, reduction: str) -> Tensor:
    """PyTorch's weighted regression loss: ``weight`` (input's shape) scales each element; ``'mean'`` is the
    weighted mean, sum(weight * loss) / sum(weight)."""
    if weight is None:
        return _reduce(loss, reduction)
    weight = _weight(weight)
    if tuple(weight.shape) != tuple(input.shape):
        raise ValueError(f"{who}: Weights and input must have the same size: weight {tuple(weight.shape)}, input "
                         f"{tuple(input.shape)}")
    weighted = loss * weight
    return weighted.sum() / weight.sum() if reduction == "mean" else _reduce(weighted, reduction)


# --------------------------------------------------------------------------------------
# Classification: class ids against log-probabilities or logits
# --------------------------------------------------------------------------------------


def _classes_last(who: str, input: Tensor, target) -> tuple[Tensor, np.ndarray, tuple]:
    """input (N, C, d1...) / (C,) and integer targets (N, d1...) / () as rows (M, C) and ids (M,), checked.

    Returns (rows, ids, the targets' shape, which a ``'none'`` reduction gives back).
    """
    if input.ndim == 0:
        raise ValueError(f"{who}: input must have the classes on dim 1, (N, C) or (N, C, d1, ...), or be one "
                         f"sample (C,); got a 0-d tensor")
    ids = target.data if isinstance(target, Tensor) else np.asarray(target)
    if ids.dtype.kind not in "iu":
        hint = (" (class probabilities need a target of the input's shape)" if ids.dtype.kind == "f" else "")
        raise TypeError(f"{who}: target must hold integer class ids, got dtype {ids.dtype} (shape {ids.shape}){hint}; "
                        f"write target.long()")
    n_classes = input.shape[1] if input.ndim >= 2 else input.shape[0]
    expected = (input.shape[0],) + input.shape[2:] if input.ndim >= 2 else ()
    if ids.shape != expected:
        last_axis = input.ndim >= 3 and ids.shape == input.shape[:-1]
        hint = (f"; the classes go on dim 1, as in PyTorch: for (B, T, C) logits write "
                f"{who}(input.reshape(-1, {input.shape[-1]}), target.reshape(-1))" if last_axis else "")
        raise ValueError(f"{who}: expected target of shape {expected} for input {input.shape} (classes on dim "
                         f"{1 if input.ndim >= 2 else 0}), got {ids.shape}{hint}")
    if input.ndim == 1:
        rows = input.reshape(1, n_classes)
    elif input.ndim == 2:
        rows = input
    else:  # (N, C, d1, ...) -> (N, d1, ..., C) -> (M, C)
        rows = input.permute(0, *range(2, input.ndim), 1).reshape(-1, n_classes)
    return rows, ids.reshape(-1), ids.shape


def _check_ids(who: str, ids: np.ndarray, n_classes: int, ignore_index: int, shape: tuple) -> None:
    try:
        token_ids(ids, n_classes, who, "target", "classes", kind="class id", ignore_index=ignore_index,
                  error=IndexError)
    except IndexError as err:
        raise IndexError(str(err).replace(f"shape {ids.shape}", f"shape {shape}")) from None


def _class_weight(who: str, weight, n_classes: int, like: Tensor):
    """``weight`` (C,) as a constant array of ``like``'s dtype, or None."""
    if weight is None:
        return None
    w = weight.data if isinstance(weight, Tensor) else np.asarray(weight)
    if w.shape != (n_classes,):
        raise ValueError(f"{who}: weight must have one entry per class, shape ({n_classes},), got {w.shape}")
    return w.astype(like.dtype)


def _row_weights(ids: np.ndarray, weight, ignore_index: int, dtype) -> tuple[np.ndarray, np.ndarray]:
    """(each row's weight: weight[id], 1 without weights, 0 where ignored; the ids with ignored ones set to 0)."""
    kept = ids != ignore_index
    safe = np.where(kept, ids, 0)
    w = kept if weight is None else np.where(kept, weight[safe], 0)
    return w.astype(dtype), safe


def _picked_losses(logp: Tensor, safe: np.ndarray, row_w: np.ndarray, reduction: str, shape: tuple) -> Tensor:
    """-logp[m, ids[m]] * row_w[m] per row of (M, C), reduced; the mean divides by the total weight."""
    losses = -logp[np.arange(len(safe)), safe] * row_w  # (M,)
    if reduction == "none":
        return losses.reshape(shape)
    return losses.sum() if reduction == "sum" else losses.sum() / _total(row_w)


def _total(w: np.ndarray) -> float:
    """What a ``'mean'`` divides by: the targets' total weight; 1 when that is 0 (all ignored: the mean is 0)."""
    total = float(w.sum())
    return total if total != 0 else 1.0


def nll_loss(input: Tensor, target, weight=None, size_average=None, ignore_index: int = -100, reduce=None,
             reduction: str = "mean") -> Tensor:
    """-input[n, target[n]] (input holds log-probabilities, classes on dim 1), averaged over the targets.

    With ``weight`` (C,), each loss is scaled by its class's weight and the mean
    divides by the sum of those weights, as PyTorch's.
    """
    reduction = _legacy_reduction("nll_loss", size_average, reduce, reduction)
    input = _float_input("nll_loss", input)
    rows, ids, shape = _classes_last("nll_loss", input, target)
    _check_ids("nll_loss", ids, rows.shape[1], ignore_index, shape)
    row_w, safe = _row_weights(ids, _class_weight("nll_loss", weight, rows.shape[1], rows), ignore_index, rows.dtype)
    return _picked_losses(rows, safe, row_w, reduction, shape)


def cross_entropy(input: Tensor, target, weight=None, size_average=None, ignore_index: int = -100, reduce=None,
                  reduction: str = "mean", label_smoothing: float = 0.0) -> Tensor:
    """Softmax cross-entropy of logits (classes on dim 1) against class ids, or class probabilities.

    * class ids: ``target`` (N,) or (N, d1, ...) integers, ``ignore_index`` where
      no loss is wanted; ``'mean'`` averages over the other targets (weighted by
      ``weight[target]`` when given);
    * probabilities: a float ``target`` of the input's shape; ``'mean'`` divides by N (times d1...);
    * ``label_smoothing`` eps: the target becomes (1 - eps) * target + eps / C.

    Plain (N, C) logits with class ids go through the fused ``cross_entropy`` primitive.
    """
    who = "cross_entropy"
    reduction = _legacy_reduction(who, size_average, reduce, reduction)
    input = _float_input(who, input)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"{who}: label_smoothing must be between 0.0 and 1.0, got {label_smoothing}")
    ids = target.data if isinstance(target, Tensor) else np.asarray(target)
    if ids.dtype.kind == "f" and input.ndim >= 1 and ids.shape == input.shape:
        return _soft_cross_entropy(input, target, weight, reduction, label_smoothing)
    rows, ids, shape = _classes_last(who, input, target)
    n_classes = rows.shape[1]
    w = _class_weight(who, weight, n_classes, rows)
    if w is None and label_smoothing == 0.0:
        try:
            loss = fused.cross_entropy(rows, ids, ignore_index=ignore_index, reduction=reduction)
        except ValueError:  # the op checks the ids' range, the one check per step; say which id, in this call's terms
            _check_ids(who, ids, n_classes, ignore_index, shape)
            raise
        return loss.reshape(shape) if reduction == "none" else loss
    _check_ids(who, ids, n_classes, ignore_index, shape)
    logp = rows.log_softmax(axis=-1)  # (M, C)
    row_w, safe = _row_weights(ids, w, ignore_index, rows.dtype)
    nll = _picked_losses(logp, safe, row_w, reduction, shape)
    if label_smoothing == 0.0:
        return nll
    # PyTorch's smoothing term: -sum_c w_c log p_c per row (0 where ignored), reduced as the nll is.
    kept = (ids != ignore_index).astype(logp.dtype)
    smooth = -(logp if w is None else logp * w).sum(axis=-1) * kept  # (M,)
    if reduction == "none":
        smooth = smooth.reshape(shape)
    else:
        smooth = smooth.sum() if reduction == "sum" else smooth.sum() / _total(row_w)
    return nll * (1.0 - label_smoothing) + smooth * (label_smoothing / n_classes)


def _soft_cross_entropy(input: Tensor, target, weight, reduction: str, label_smoothing: float) -> Tensor:
    """-sum_c weight_c * target_c * log_softmax(input)_c per sample, target holding class probabilities."""
    class_dim = 1 if input.ndim >= 2 else 0
    n_classes = input.shape[class_dim]
    logp = input.log_softmax(axis=class_dim)
    if label_smoothing:
        target = target * (1.0 - label_smoothing) + label_smoothing / n_classes
    w = _class_weight("cross_entropy", weight, n_classes, input)
    terms = logp * target
    if w is not None:
        terms = terms * w.reshape((n_classes,) + (1,) * (input.ndim - class_dim - 1))
    return _reduce(-terms.sum(axis=class_dim), reduction)  # (N, d1, ...) or (), then reduced: 'mean' over N * d1...


# --------------------------------------------------------------------------------------
# Binary classification
# --------------------------------------------------------------------------------------


def binary_cross_entropy(input: Tensor, target, weight=None, size_average=None, reduce=None,
                         reduction: str = "mean") -> Tensor:
    """-(y log p + (1 - y) log(1 - p)) of probabilities ``input`` in [0, 1]; each log clamped at -100 (PyTorch's)."""
    who = "binary_cross_entropy"
    reduction = _legacy_reduction(who, size_average, reduce, reduction)
    input = _float_input(who, input)
    y = _target_like(who, input, target, same_shape=True)
    p = input.data
    if p.size and not ((p >= 0) & (p <= 1)).all():
        raise ValueError(f"{who}: all elements of input should be between 0 and 1 (probabilities; got min "
                         f"{np.nanmin(p) if not np.isnan(p).all() else p.min()}, max "
                         f"{np.nanmax(p) if not np.isnan(p).all() else p.max()}); for logits use "
                         f"binary_cross_entropy_with_logits")
    loss = -(y * _clamped_log(input) + (1.0 - y) * _clamped_log(1.0 - input))
    return _reduce(loss if weight is None else loss * _weight(weight), reduction)


def _clamped_log(p: Tensor) -> Tensor:
    """max(log p, -100); at p = 0 the value is -100 and the gradient 0 (log's input is swapped for 1 there)."""
    positive = p.data > 0
    return p.masked_fill(~positive, 1.0).log().masked_fill(~positive, -100.0).clip(-100.0)


def binary_cross_entropy_with_logits(input: Tensor, target, weight=None, size_average=None, reduce=None,
                                     reduction: str = "mean", pos_weight=None) -> Tensor:
    """binary_cross_entropy(sigmoid(input), target), computed stably from the logits.

    PyTorch's formula: (1 - y) * x - (1 + (pos_weight - 1) * y) * log_sigmoid(x),
    with log_sigmoid(x) = min(x, 0) - log1p(exp(-|x|)): exp never overflows, and
    a confident right answer gives its small loss rather than 0.
    """
    who = "binary_cross_entropy_with_logits"
    reduction = _legacy_reduction(who, size_average, reduce, reduction)
    input = _float_input(who, input)
    y = _target_like(who, input, target, same_shape=True)
    log_sig = _log_sigmoid(input)
    if pos_weight is not None:
        log_sig = log_sig * ((_weight(pos_weight) - 1.0) * y + 1.0)
    loss = (1.0 - y) * input - log_sig
    return _reduce(loss if weight is None else loss * _weight(weight), reduction)


def _log_sigmoid(x: Tensor) -> Tensor:
    """log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)), stable for every x."""
    return x.clip(None, 0.0) - x.abs().neg().exp().log1p()


# --------------------------------------------------------------------------------------
# The modules
# --------------------------------------------------------------------------------------


class _Loss(Module):
    def __init__(self, size_average=None, reduce=None, reduction: str = "mean"):
        super().__init__()
        self.reduction = _legacy_reduction(type(self).__name__, size_average, reduce, reduction)

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}" if self.reduction != "mean" else ""


class _WeightedLoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction: str = "mean"):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight if weight is None or isinstance(weight, Tensor) else Tensor(weight))


class MSELoss(_Loss):
    """``nn.MSELoss(reduction='mean')``: ``loss_fn(input, target)`` is ``F.mse_loss``."""

    def forward(self, input: Tensor, target) -> Tensor:
        return mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """``nn.L1Loss(reduction='mean')``: ``loss_fn(input, target)`` is ``F.l1_loss``."""

    def forward(self, input: Tensor, target) -> Tensor:
        return l1_loss(input, target, reduction=self.reduction)


class NLLLoss(_WeightedLoss):
    """``nn.NLLLoss(weight=None, ignore_index=-100, reduction='mean')``: ``F.nll_loss`` of log-probabilities."""

    def __init__(self, weight=None, size_average=None, ignore_index: int = -100, reduce=None,
                 reduction: str = "mean"):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index

    def forward(self, input: Tensor, target) -> Tensor:
        return nll_loss(input, target, self.weight, ignore_index=self.ignore_index, reduction=self.reduction)


class CrossEntropyLoss(_WeightedLoss):
    """``nn.CrossEntropyLoss(weight=None, ignore_index=-100, reduction='mean', label_smoothing=0.0)``.

    ``loss_fn(logits, target)`` is ``F.cross_entropy``: classes on dim 1, integer ids or probabilities.
    """

    def __init__(self, weight=None, size_average=None, ignore_index: int = -100, reduce=None,
                 reduction: str = "mean", label_smoothing: float = 0.0):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index, self.label_smoothing = ignore_index, label_smoothing

    def forward(self, input: Tensor, target) -> Tensor:
        return cross_entropy(input, target, self.weight, ignore_index=self.ignore_index, reduction=self.reduction,
                             label_smoothing=self.label_smoothing)


class BCELoss(_WeightedLoss):
    """``nn.BCELoss(weight=None, reduction='mean')``: ``F.binary_cross_entropy`` of probabilities."""

    def forward(self, input: Tensor, target) -> Tensor:
        return binary_cross_entropy(input, target, self.weight, reduction=self.reduction)


class BCEWithLogitsLoss(_WeightedLoss):
    """``nn.BCEWithLogitsLoss(weight=None, reduction='mean', pos_weight=None)``: sigmoid and BCE in one, stable."""

    def __init__(self, weight=None, size_average=None, reduce=None, reduction: str = "mean", pos_weight=None):
        super().__init__(weight, size_average, reduce, reduction)
        self.register_buffer("pos_weight", pos_weight if pos_weight is None or isinstance(pos_weight, Tensor)
                             else Tensor(pos_weight))

    def forward(self, input: Tensor, target) -> Tensor:
        return binary_cross_entropy_with_logits(input, target, self.weight, reduction=self.reduction,
                                                pos_weight=self.pos_weight)
