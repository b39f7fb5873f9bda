"""Exercise 12: dynamic loss scaling as a real loop needs it: clipping, accumulation, a schedule.

    python -m demos.exercises check 12

The lesson demos/precision_lesson.py (section 3) builds the scaler: scale the
loss, divide the gradients by the scale, skip the step if any is inf or NaN,
back off, grow; and it runs it over micro-batches. What it leaves out is what
a training loop adds around it, in nanoGPT's order with PyTorch's GradScaler:

    for micro_loss in micro_losses:                  # gradient accumulation
        scaler.scale_loss(micro_loss() / n).backward()
    scaler.unscale_(params)                          # once, after the last micro-batch
    clip_grad_norm_(params, max_norm)                # clipping sees the true gradients
    if scaler.step(optimizer, params):               # must not divide a second time
        scheduler.step()                             # a skipped step is no step of the schedule

So the scaler remembers, between ``unscale_`` and ``step``, that this step's
gradients are already unscaled and whether they held inf or NaN (clipping turns
an inf gradient into NaN everywhere: the verdict is made at unscale_). Calling
``unscale_`` twice in one step would divide twice: it is an error, as in
PyTorch. A parameter that got no gradient (``p.grad is None``) is skipped, as
GradScaler skips it. The scale moves once per optimizer step, however many
micro-batches it took and whichever of them overflowed: the growth interval
counts steps, not micro-batches.

The check drives your scaler through generated steps, with and without
``unscale_`` before ``step``, then your ``accumulated_step`` through steps of
several micro-batches, some of which overflow, beside its own reference.
"""

import numpy as np  # noqa: F401  (for your code)

from minigrad import optim  # noqa: F401  (optim.clip_grad_norm_)


class LossScaler:
    """init_scale=2**16, growth_factor=2, backoff_factor=0.5, growth_interval=2000: torch.amp.GradScaler's."""

    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000):
        self.scale = init_scale  # read by the check after every step
        self.growth_factor, self.backoff_factor, self.growth_interval = growth_factor, backoff_factor, growth_interval
        self.good_steps = 0  # steps in a row without inf/NaN since the scale last changed
        # Add what the scaler must remember between unscale_ and step.

    def scale_loss(self, loss):
        """The loss times the scale: a Tensor (loss * self.scale), so backward gives scale x the gradients."""
        raise NotImplementedError("exercise 12: LossScaler.scale_loss")

    def unscale_(self, params) -> None:
        """Divide every p.grad.data by the scale, in place, float32 (multiply by np.float32(1 / self.scale)),
        skipping parameters whose grad is None, and remember whether any entry is inf or NaN. A second call
        before step(): RuntimeError (say to call it once per step)."""
        raise NotImplementedError("exercise 12: LossScaler.unscale_")

    def step(self, optimizer, params) -> bool:
        """One step; True if it was taken.

        Unscale, unless unscale_ already did this step; optimizer.step() only if no gradient held inf or NaN
        (as found when they were unscaled); then update the scale (inf/NaN: scale *= backoff_factor, good_steps
        = 0; else good_steps += 1, and at growth_interval: scale *= growth_factor, good_steps = 0). The next
        step starts afresh: its gradients are new.
        """
        raise NotImplementedError("exercise 12: LossScaler.step")


def accumulated_step(micro_losses, scaler, optimizer, scheduler, params, max_norm: float) -> bool:
    """One optimizer step over the micro-batches; True if it was taken.

    ``micro_losses``: functions, each computing one micro-batch's loss (a mean over that micro-batch) when
    called. The step's loss is their mean: weigh each by 1 / len(micro_losses), scale it, backward (the
    gradients add up in .grad). After the last one: unscale_ once, clip to max_norm
    (optim.clip_grad_norm_(params, max_norm)), scaler.step; scheduler.step() only if the step was taken.
    """
    raise NotImplementedError("exercise 12: accumulated_step")
