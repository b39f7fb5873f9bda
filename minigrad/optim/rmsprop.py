"""RMSprop: each parameter's step divided by a running root-mean-square of its gradients.

The update, exactly as ``torch.optim.RMSprop`` writes it (g is the gradient, alpha the smoothing constant,
lambda the weight decay, mu the momentum; v, g_avg and buf start at zero)::

    g     = g + lambda * p                             # weight decay, as an L2 term in the loss
    v     = alpha * v + (1 - alpha) * g**2             # running mean of squared gradients
    g_avg = alpha * g_avg + (1 - alpha) * g            # centered only: running mean of gradients
    avg   = sqrt(v - g_avg**2) + eps  if centered  else  sqrt(v) + eps
    buf   = mu * buf + g / avg;  p = p - lr * buf      # with momentum
    p     = p - lr * g / avg                           # without

Note eps is added outside the square root, as PyTorch does (Keras adds it inside).
"""

from __future__ import annotations

import numpy as np

from ..modes import no_grad
from .optimizer import Optimizer


class RMSprop(Optimizer):
    """``RMSprop(params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False)``, as in
    PyTorch."""

    def __init__(self, params, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8, weight_decay: float = 0.0,
                 momentum: float = 0.0, centered: bool = False):
        defaults = dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum,
                        centered=centered)
        super().__init__(params, defaults)

    def _check_group(self, group: dict) -> None:
        for key in ("lr", "alpha", "eps", "weight_decay", "momentum"):
            if not group[key] >= 0.0:
                raise ValueError(f"RMSprop: {key} must be >= 0, got {group[key]}")

    @no_grad()
    def step(self, closure=None):
        """One update of every parameter that has a gradient."""
        loss = self._loss_from(closure)
        for group in self.param_groups:
            # Python floats, so a float32 parameter is updated in float32.
            lr, alpha, eps = float(group["lr"]), float(group["alpha"]), float(group["eps"])
            weight_decay, momentum = float(group["weight_decay"]), float(group["momentum"])
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad.data
                if weight_decay != 0:
                    g = g + weight_decay * p.data
                state = self.state.setdefault(p, {})
                if not state:
                    state["step"] = 0
                    state["square_avg"] = np.zeros_like(p.data)
                    if momentum > 0:
                        state["momentum_buffer"] = np.zeros_like(p.data)
                    if group["centered"]:
                        state["grad_avg"] = np.zeros_like(p.data)
                state["step"] += 1
                v = state["square_avg"]
                v *= alpha
                v += (1 - alpha) * g * g
                if group["centered"]:
                    g_avg = state["grad_avg"]
                    g_avg *= alpha
                    g_avg += (1 - alpha) * g
                    avg = np.sqrt(v - g_avg * g_avg) + eps
                else:
                    avg = np.sqrt(v) + eps
                param = self._written(p)  # p's array, updated in place (counted on p's version counter)
                if momentum > 0:
                    buf = state["momentum_buffer"]
                    buf *= momentum
                    buf += g / avg
                    param -= lr * buf
                else:
                    param -= lr * (g / avg)
        return loss
