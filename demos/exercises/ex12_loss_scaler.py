"""Exercise 12: dynamic loss scaling with gradient clipping, as PyTorch's GradScaler does it.

    python -m demos.exercises check 12

The lesson demos/precision_lesson.py (section 4) builds the scaler: scale the
loss, divide the gradients by the scale, skip the step if any is inf or NaN,
back off, grow. Here it meets what a real training loop adds, and the lesson
leaves out: gradient clipping. Clipping must see the true gradients, so the
loop unscales them first, clips, then steps, as in nanoGPT with GradScaler:

    scaler.scale_loss(loss).backward()
    scaler.unscale_(params)                 # optional: only before clipping
    clip_grad_norm_(params, 1.0)
    taken = scaler.step(optimizer, params)  # must not divide a second time

So the scaler remembers, between ``unscale_`` and ``step``, that this step's
gradients are already unscaled and whether they held inf or NaN (what clipping
does to an inf gradient is NaN everywhere; the decision was made at unscale_).
Calling ``unscale_`` twice in one step would divide twice: it is an error, as
in PyTorch. The check drives your scaler through generated steps, with and
without ``unscale_`` before ``step``, beside its own reference.
"""

import numpy as np  # noqa: F401  (for your code)


class LossScaler:
    """init_scale=2**16, growth_factor=2, backoff_factor=0.5, growth_interval=2000: torch.amp.GradScaler's."""

    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000):
        self.scale = init_scale  # read by the check after every step
        self.growth_factor, self.backoff_factor, self.growth_interval = growth_factor, backoff_factor, growth_interval
        self.good_steps = 0  # steps in a row without inf/NaN since the scale last changed
        # Add what the scaler must remember between unscale_ and step.

    def scale_loss(self, loss):
        """The loss times the scale (a Tensor, so backward gives scale x the gradients)."""
        raise NotImplementedError("exercise 12: LossScaler.scale_loss")

    def unscale_(self, params) -> None:
        """Divide every p.grad.data by the scale, in place, float32 (multiply by np.float32(1 / self.scale)), and
        remember whether any entry is inf or NaN. A second call before step(): RuntimeError (say to call it once
        per step)."""
        raise NotImplementedError("exercise 12: LossScaler.unscale_")

    def step(self, optimizer, params) -> bool:
        """One step; True if it was taken.

        Unscale, unless unscale_ already did this step; optimizer.step() only if no gradient held inf or NaN
        (as found when they were unscaled); then update the scale (inf/NaN: scale *= backoff_factor, good_steps
        = 0; else good_steps += 1, and at growth_interval: scale *= growth_factor, good_steps = 0). The next
        step starts afresh: its gradients are new.
        """
        raise NotImplementedError("exercise 12: LossScaler.step")
