"""Exercise 12: dynamic loss scaling (reference solution)."""

import numpy as np


class LossScaler:
    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000):
        self.scale = init_scale
        self.growth_factor, self.backoff_factor, self.growth_interval = growth_factor, backoff_factor, growth_interval
        self.good_steps = 0

    def scale_loss(self, loss):
        return loss * self.scale

    def step(self, optimizer, params) -> bool:
        found_inf = False
        for p in params:
            p.grad.data *= np.float32(1 / self.scale)
            found_inf = found_inf or not np.isfinite(p.grad.data).all()
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
