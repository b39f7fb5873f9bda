"""Anomaly detection: find the op, and the line of the user's code, where a NaN or Inf first appeared.

Inside ``with detect_anomaly():`` every op's output is checked as it is made
(``check_forward``, called by ``registry.apply``) and every gradient as backward
makes it (``contract.check_backward``). Each op remembers the
user's line that created it, so a bad gradient found during backward is still
blamed on the forward line it belongs to.
"""

from __future__ import annotations

import contextlib
import os
import traceback

import numpy as np

from ..modes import state

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # minigrad/


@contextlib.contextmanager
def detect_anomaly():
    """Check every op's output and every gradient for NaN/Inf; name the op and the line that made it.

    Infinities in a forward output are only an anomaly when no input had one
    (a -inf attention mask passing through softmax is fine; exp overflowing is not).
    """
    prev = state.anomaly
    state.anomaly = True
    try:
        yield
    finally:
        state.anomaly = prev


class AnomalyError(FloatingPointError):
    """A NaN or Inf appeared where none should (raised only inside ``detect_anomaly()``)."""


def user_frame() -> str:
    """The innermost stack frame outside minigrad itself: the user's line that made this op."""
    for frame in reversed(traceback.extract_stack()[:-2]):
        if not os.path.abspath(frame.filename).startswith(_PACKAGE):
            return f'{frame.filename}:{frame.lineno}: {(frame.line or "").strip()}'
    return "<unknown>"


def _shapes(tensors) -> str:
    return ", ".join(f"{tuple(x.shape)} {x.dtype}" for x in tensors)


def check_forward(op, inputs, params, out) -> None:
    data = out.data
    if data.dtype.kind != "f" or np.isfinite(data).all():
        return
    inputs_finite = all(x.dtype.kind != "f" or np.isfinite(x.data).all() for x in inputs)
    # np.generic too: a mask value of np.float32(-np.inf) is no more an anomaly than -math.inf.
    params_finite = all(np.isfinite(v).all() for v in (params or {}).values()
                        if isinstance(v, float | np.generic | np.ndarray) and np.asarray(v).dtype.kind == "f")
    if np.isnan(data).any() or (inputs_finite and params_finite):
        kind = "NaN" if np.isnan(data).any() else "Inf"
        raise AnomalyError(f"detect_anomaly: op '{op.name}' produced {kind} in its output "
                           f"(inputs {_shapes(inputs)}), at {out._trace}")
