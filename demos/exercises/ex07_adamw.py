"""Exercise 7: an AdamW step, with gradient clipping by global norm.

    python -m demos.exercises check 7

Both work on plain ndarrays, in place, as an optimizer does after backward.
The check trains a small network for many steps twice from one
initialisation: with ``optim.clip_grad_norm_`` and ``optim.AdamW``, and with
yours, and holds every parameter against the engine's after every step, in
float32 and float64 (so a wrong bias correction, which only shows over steps,
is caught at the step it first matters). Read minigrad/optim/adam.py.
"""

import math  # noqa: F401  (for your code)

import numpy as np  # noqa: F401


def clip_by_global_norm(grads: list[np.ndarray], max_norm: float) -> tuple[list[np.ndarray], float]:
    """(the gradients scaled so their global 2-norm is at most max_norm, the norm before scaling).

    Treat all gradients as one long vector: total = sqrt(sum of every g**2, over all of them).
    If coef = max_norm / (total + 1e-6) is below 1, multiply every gradient by coef (keep each
    gradient's dtype: multiply by g.dtype.type(coef)); otherwise leave them as they are.
    """
    raise NotImplementedError("exercise 7: clip_by_global_norm")


def adamw_step(params, grads, state: dict, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2) -> None:
    """One AdamW update of every array in ``params``, in place; ``state`` (a dict, empty at first) is yours to keep.

    With t counting steps from 1, for each parameter p and its gradient g:
        p = p * (1 - lr * weight_decay)              decoupled weight decay, before the step
        m = beta1 * m + (1 - beta1) * g              running mean of g        (m, v start at 0)
        v = beta2 * v + (1 - beta2) * g * g          running mean of g**2
        m_hat = m / (1 - beta1**t),  v_hat = v / (1 - beta2**t)        (bias corrections)
        p = p - lr * m_hat / (sqrt(v_hat) + eps)
    Update p in place (p *= ..., p -= ...), so the caller's arrays change.
    """
    raise NotImplementedError("exercise 7: adamw_step")
