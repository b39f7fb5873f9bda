"""Exercise 12: dynamic loss scaling with clipping and accumulation (reference solution)."""

import numpy as np

from minigrad import optim


class LossScaler:
    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000):
        self.scale = init_scale
        self.growth_factor, self.backoff_factor, self.growth_interval = growth_factor, backoff_factor, growth_interval
        self.good_steps = 0
        self.found_inf = None  # this step's verdict once its gradients are unscaled; None before that

    def scale_loss(self, loss):
        return loss * self.scale

    def unscale_(self, params) -> None:
        if self.found_inf is not None:
            raise RuntimeError("unscale_() was already called this step: call it once, before step()")
        found_inf = False
        for p in params:
            if p.grad is None:  # no gradient reached it: nothing to unscale (GradScaler skips it too)
                continue
            p.grad.data *= np.float32(1 / self.scale)
            found_inf = found_inf or not np.isfinite(p.grad.data).all()
        self.found_inf = found_inf

    def step(self, optimizer, params) -> bool:
        if self.found_inf is None:
            self.unscale_(params)
        found_inf, self.found_inf = self.found_inf, None  # the next step's gradients are new
        if not found_inf:
            optimizer.step()
        if found_inf:
            self.scale *= self.backoff_factor
            self.good_steps = 0
        else:
            self.good_steps += 1
            if self.good_steps == self.growth_interval:
                self.scale *= self.growth_factor
                self.good_steps = 0
        return not found_inf


def accumulated_step(micro_losses, scaler, optimizer, scheduler, params, max_norm: float) -> bool:
    for micro_loss in micro_losses:
        scaler.scale_loss(micro_loss() / len(micro_losses)).backward()
    scaler.unscale_(params)
    optim.clip_grad_norm_(params, max_norm)
    taken = scaler.step(optimizer, params)
    if taken:
        scheduler.step()
    return taken
