"""Adam and AdamW: per-coordinate step sizes from running averages of the gradient and its square.

The update, exactly as ``torch.optim.Adam`` / ``AdamW`` write it (t counts this
parameter's steps from 1)::

    m = beta1 * m + (1 - beta1) * g            # first moment: a running mean of g
    v = beta2 * v + (1 - beta2) * g * g        # second moment: a running mean of g**2
    m_hat = m / (1 - beta1**t)                 # both start at 0; dividing removes that bias
    v_hat = v / (1 - beta2**t)
    p = p - lr * m_hat / (sqrt(v_hat) + eps)

Each coordinate moves by about ``lr`` whatever the scale of its gradient, which
is why one learning rate works for embeddings, matrices and norm gains alike.

Weight decay is where the two differ. ``Adam(weight_decay=...)`` adds
``weight_decay * p`` to the gradient (an L2 term in the loss), so the decay is
then divided by ``sqrt(v_hat)`` and parameters with large gradients are
barely decayed. ``AdamW`` decouples it: ``p = p * (1 - lr * weight_decay)``
before the step, the same shrinkage for every parameter (Loshchilov & Hutter,
"Decoupled Weight Decay Regularization"). Transformers are trained with AdamW.
"""

from __future__ import annotations

import numpy as np

from .. import kernels
from ..modes import no_grad
from .optimizer import Optimizer


class Adam(Optimizer):
    """``Adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0)``, as in PyTorch (L2 decay)."""

    decoupled_weight_decay = False

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0):
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay)
        super().__init__(params, defaults)

    def _check_group(self, group: dict) -> None:
        name = type(self).__name__
        group["betas"] = tuple(group["betas"])
        if len(group["betas"]) != 2 or not all(0.0 <= b < 1.0 for b in group["betas"]):
            raise ValueError(f"{name}: betas must be two numbers in [0, 1), got {group['betas']}")
        for key in ("lr", "eps", "weight_decay"):
            if not group[key] >= 0.0:
                raise ValueError(f"{name}: {key} must be >= 0, got {group[key]}")

    @no_grad()
    def step(self, closure=None):
        """One update of every parameter that has a gradient."""
        loss = self._loss_from(closure)
        for group in self.param_groups:
            # Python floats, so a float32 parameter is updated in float32 (a NumPy float64 would upcast).
            lr, eps, weight_decay = float(group["lr"]), float(group["eps"]), float(group["weight_decay"])
            beta1, beta2 = (float(b) for b in group["betas"])
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad.data
                state = self.state.setdefault(p, {})
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = np.zeros_like(p.data)      # m
                    state["exp_avg_sq"] = np.zeros_like(p.data)   # v
                state["step"] += 1
                t, m, v = state["step"], state["exp_avg"], state["exp_avg_sq"]
                param = self._written(p)  # p's array, updated in place (counted on p's version counter)

                if weight_decay != 0 and not self.decoupled_weight_decay:
                    g = g + weight_decay * param
                decay = 1 - lr * weight_decay if self.decoupled_weight_decay else 1.0
                kernels.adam_update(param, g, m, v, lr, beta1, beta2, eps, t, decay)  # the docstring's update, in place
        return loss


class AdamW(Adam):
    """``AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2)``: Adam, decay decoupled."""

    decoupled_weight_decay = True

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
