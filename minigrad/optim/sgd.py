"""Stochastic gradient descent, with momentum, Nesterov momentum and L2 weight decay.

The update, exactly as ``torch.optim.SGD`` writes it (g is the gradient,
mu the momentum, tau the dampening, lambda the weight decay)::

    g   = g + lambda * p                      # weight decay, as an L2 term in the loss
    buf = g                                   # first step
    buf = mu * buf + (1 - tau) * g            # later steps
    g   = g + mu * buf   if nesterov   else   buf
    p   = p - lr * g

Note the momentum form: ``buf`` accumulates raw gradients and ``lr`` multiplies
it afterwards (some texts fold lr into the buffer instead; the two differ when
lr changes during training).
"""

from __future__ import annotations

import numpy as np

from ..modes import no_grad
from .optimizer import Optimizer


class SGD(Optimizer):
    """``SGD(params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False)``, as in PyTorch."""

    def __init__(self, params, lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False):
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov)
        super().__init__(params, defaults)

    def _check_group(self, group: dict) -> None:
        for key in ("lr", "momentum", "dampening", "weight_decay"):
            if not group[key] >= 0.0:
                raise ValueError(f"SGD: {key} must be >= 0, got {group[key]}")
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise ValueError(f"SGD: nesterov needs momentum > 0 and dampening = 0, got momentum="
                             f"{group['momentum']}, dampening={group['dampening']}")

    @no_grad()
    def step(self, closure=None):
        """One update of every parameter that has a gradient."""
        loss = self._loss_from(closure)
        for group in self.param_groups:
            # Python floats, so a float32 parameter is updated in float32 (a NumPy float64 would upcast).
            lr, momentum = float(group["lr"]), float(group["momentum"])
            dampening, weight_decay = float(group["dampening"]), float(group["weight_decay"])
            for p in group["params"]:
                if p.grad is None:
                    continue
                d_p = p.grad.data
                if weight_decay != 0:
                    d_p = d_p + weight_decay * p.data
                if momentum != 0:
                    state = self.state.setdefault(p, {})
                    buf = state.get("momentum_buffer")
                    if buf is None:
                        buf = state["momentum_buffer"] = np.array(d_p, dtype=p.dtype)  # a copy we own
                    else:
                        buf *= momentum
                        buf += (1 - dampening) * d_p
                    d_p = d_p + momentum * buf if group["nesterov"] else buf
                param = self._written(p)  # (counted on p's version counter)
                param -= lr * d_p
        return loss
