"""Gradient clipping by global norm: one bad batch cannot throw the weights across the loss landscape.

All gradients are treated as one long vector. If its norm exceeds
``max_norm``, every gradient is scaled by the same factor
``max_norm / (norm + 1e-6)``, so the direction of the step is kept and only its
length is capped (the formula is PyTorch's ``clip_grad_norm_``).
"""

from __future__ import annotations

import math

import numpy as np

from ..modes import no_grad
from ..tensor import Tensor


def _norm(g: np.ndarray, norm_type: float) -> float:
    """The norm of one gradient, in its dtype; again in float64 if that underflowed to 0 or overflowed to inf.

    (float32 squares of values below 1e-19 underflow, and above 1e19 overflow, though the norm itself fits.)
    """
    if not g.size:
        return 0.0
    norm = float(np.linalg.norm(g.ravel(), ord=norm_type))
    if (norm == 0.0 or math.isinf(norm)) and g.dtype != np.float64 and np.isfinite(g).all() and g.any():
        norm = float(np.linalg.norm(g.ravel().astype(np.float64), ord=norm_type))
    return norm


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False) -> float:
    """Scale the gradients so their global ``norm_type``-norm is at most ``max_norm``; return the norm before.

    Parameters without a gradient are skipped. The scaled gradients are new
    Tensors (``p.grad`` is reassigned, never written into), in their own dtype.
    """
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    params = [p for p in parameters if p.grad is not None]
    max_norm, norm_type = float(max_norm), float(norm_type)
    if not params:
        return 0.0
    grads = [p.grad.data for p in params]
    # Per-tensor norms first (in the gradients' dtype), then the norm of those norms, in Python floats.
    if norm_type == math.inf:
        # np.max, not Python's max: a NaN anywhere must make the norm NaN (Python's max keeps
        # the first NaN it meets but skips later ones, since NaN > x and x > NaN are both False).
        total = float(np.max([np.max(np.abs(g), initial=0.0) for g in grads]))
    else:
        per_tensor = [_norm(g, norm_type) for g in grads]
        if any(math.isnan(n) for n in per_tensor):
            total = math.nan  # (fsum raises on a NaN next to an inf)
        elif any(math.isinf(n) for n in per_tensor):
            total = math.inf
        else:
            try:
                total = math.fsum(n**norm_type for n in per_tensor) ** (1.0 / norm_type)
            except OverflowError:  # the norms are finite but their powers' sum is not: so is the total, as PyTorch's
                total = math.inf
    if error_if_nonfinite and not math.isfinite(total):
        raise RuntimeError(f"clip_grad_norm_: the total {norm_type}-norm of the gradients is {total}; "
                           f"pass error_if_nonfinite=False to clip anyway")
    # As PyTorch: the factor is min(1, max_norm / (total + 1e-6)), so a NaN norm makes every gradient NaN
    # and an infinite one makes them 0 (NaN where they were infinite): the step is visibly spoiled, not
    # taken with one huge gradient left unclipped.
    clip_coef = max_norm / (total + 1e-6)
    if not clip_coef >= 1.0:
        with no_grad():
            for p in params:
                p.grad = p.grad * clip_coef  # a new Tensor; a Python float keeps the gradient's dtype
    return total
