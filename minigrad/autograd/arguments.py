"""The arguments of ``backward`` and ``grad`` checked, as PyTorch checks them, before anything runs.

Outputs and inputs are Tensors (one, or a list); the weights of the outputs
(``gradient=`` / ``grad_outputs=``) come one per output. A count that differs is
an error: silently pairing the first few would drop the others' gradients.
"""

from __future__ import annotations

import numpy as np

from ..tensor import Tensor


def tensors_given(who: str, what: str, given) -> list[Tensor]:
    """``given`` (one Tensor, or a list or tuple of them) as a list; anything else is a TypeError naming it."""
    items = [given] if isinstance(given, Tensor) else list(given) if isinstance(given, list | tuple) else None
    if items is None or not items:
        raise TypeError(f"{who}: {what} must be a Tensor or a non-empty list of Tensors, got "
                        f"{type(given).__name__ if items is None else 'an empty ' + type(given).__name__}")
    for i, t in enumerate(items):
        if not isinstance(t, Tensor):
            raise TypeError(f"{who}: {what}[{i}] is a {type(t).__name__}, not a Tensor")
    return items


def one_per_output(who: str, what: str, outputs: list, given, single: bool) -> list:
    """The weights ``given`` for ``outputs``, one each (None: all None); a count that differs is an error."""
    if given is None:
        return [None] * len(outputs)
    if isinstance(given, Tensor | np.ndarray) or not isinstance(given, list | tuple):
        if single or len(outputs) == 1:
            return [given]
        raise TypeError(f"{who}: {what} must be a list with one entry per output ({len(outputs)}), "
                        f"got one {type(given).__name__}")
    if len(given) != len(outputs):
        raise ValueError(f"{who}: {what} has {len(given)} entries but there are {len(outputs)} outputs; give one "
                         f"per output (None for a scalar output)")
    return list(given)
