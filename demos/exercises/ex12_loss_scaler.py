"""Exercise 12: dynamic loss scaling, as PyTorch's GradScaler does it.

    python -m demos.exercises check 12

float16 gradients underflow to zero below 2**-24; multiplying the loss by a
large scale S lifts them into range, and the gradients are divided by S again
before the update. Too large an S overflows (inf, or NaN from inf - inf): then
the step is skipped and S shrinks; after a run of good steps S grows again.
The check drives your scaler through generated steps (gradients with and
without inf and NaN, several settings) beside its own reference and holds
every unscaled gradient, every skip and every scale against it.
Read the lesson demos/precision_lesson.py, section 3.
"""

import numpy as np  # noqa: F401  (for your code)


class LossScaler:
    """init_scale=2**16, growth_factor=2, backoff_factor=0.5, growth_interval=2000: torch.amp.GradScaler's."""

    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000):
        self.scale = init_scale  # read by the check after every step
        self.growth_factor, self.backoff_factor, self.growth_interval = growth_factor, backoff_factor, growth_interval
        self.good_steps = 0  # steps in a row without inf/NaN since the scale last changed

    def scale_loss(self, loss):
        """The loss times the scale (a Tensor, so backward gives scale x the gradients)."""
        raise NotImplementedError("exercise 12: LossScaler.scale_loss")

    def step(self, optimizer, params) -> bool:
        """One step; True if it was taken.

        1. unscale: divide every p.grad.data by the scale, in place (keep float32: multiply by
           np.float32(1 / self.scale));
        2. found_inf: any gradient entry that is inf or NaN (np.isfinite);
        3. optimizer.step() only if none was found;
        4. update the scale: found_inf -> scale *= backoff_factor and good_steps = 0; otherwise
           good_steps += 1, and when good_steps reaches growth_interval: scale *= growth_factor,
           good_steps = 0.
        """
        raise NotImplementedError("exercise 12: LossScaler.step")
