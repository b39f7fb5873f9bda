"""Functions over tensors with NumPy's (and PyTorch's) names: ``mg.where``, ``mg.stack``, ``mg.einsum``...

Each is a table op called with NumPy's signature (``concatenate(tensors, axis)``
where the op takes ``concatenate(*tensors, axis=)``); the ops are in ``ops.py``
and ``fused.py``.
"""

from __future__ import annotations

import numpy as np

from . import fused, ops
from .tensor import Tensor


def where(cond, x, y) -> Tensor:
    """``x`` where ``cond`` is True, else ``y`` (the condition is not differentiated)."""
    cond = cond.data if isinstance(cond, Tensor) else cond
    return ops.where(np.asarray(cond, dtype=bool), x, y)


def concatenate(tensors, axis: int = 0) -> Tensor:
    """Join tensors along an existing axis, as ``np.concatenate``."""
    return ops.concatenate(*tensors, axis=axis)


cat = concatenate


def stack(tensors, axis: int = 0) -> Tensor:
    """Join same-shaped tensors along a new axis, as ``np.stack``."""
    return ops.stack(*tensors, axis=axis)


def split(x: Tensor, sections, axis: int = 0) -> list[Tensor]:
    """``np.split`` for tensors: ``sections`` equal parts, or cut at the given indices."""
    return x.split(sections, axis)


def einsum(subscripts: str, *operands) -> Tensor:
    """Einstein summation, as ``np.einsum`` / ``torch.einsum``: ``einsum("ij,jk->ik", a, b)``."""
    return fused.einsum(*operands, subscripts=subscripts)


def maximum(a, b) -> Tensor:
    """Elementwise max(a, b), as ``np.maximum``."""
    return ops.maximum(a, b)


def minimum(a, b) -> Tensor:
    """Elementwise min(a, b), as ``np.minimum``."""
    return ops.minimum(a, b)
