"""Learning-rate schedules: each group's lr is its base lr times a factor that depends on the step.

Used as in PyTorch, with one ``scheduler.step()`` after each ``optimizer.step()``::

    scheduler = WarmupCosineLR(optimizer, warmup_steps=100, total_steps=5000)
    for step in range(5000):
        ...; optimizer.step(); scheduler.step()

Building the scheduler sets the lr for step 0; after ``k`` calls to
``scheduler.step()`` the optimizer runs with ``base_lr * lr_factor(k)``.
Transformers are usually trained with a short linear warmup (Adam's second
moment estimates are poor for the first few hundred steps, and large early
steps can blow up) followed by a cosine decay to a small floor.

A constant lr needs no scheduler at all; ``LambdaLR(optimizer, lambda step: 1.0)``
is one for code that always expects a scheduler.
"""

from __future__ import annotations

import math

from .optimizer import Optimizer


def warmup_cosine(step: int, warmup_steps: int, total_steps: int, min_lr_ratio: float = 0.0) -> float:
    """Factor that rises linearly from 0 to 1 over ``warmup_steps``, then follows a cosine to ``min_lr_ratio``.

    1 at ``step == warmup_steps``, ``(1 + min_lr_ratio) / 2`` halfway through the
    decay, ``min_lr_ratio`` at ``step == total_steps`` and after.
    """
    if step < warmup_steps:
        return step / warmup_steps
    if step >= total_steps:
        return min_lr_ratio
    progress = (step - warmup_steps) / (total_steps - warmup_steps)  # 0 -> 1 over the decay
    return min_lr_ratio + (1.0 - min_lr_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


class LRScheduler:
    """Base class: sets ``group["lr"] = base_lr * self.lr_factor(step)``; subclasses define ``lr_factor``."""

    def __init__(self, optimizer: Optimizer):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(self).__name__}: expected an Optimizer, got {type(optimizer).__name__}")
        self.optimizer = optimizer
        self.base_lrs = [float(group["lr"]) for group in optimizer.param_groups]
        self.last_step = 0
        self._apply()

    def lr_factor(self, step: int) -> float:
        raise NotImplementedError

    def get_lr(self, step: int | None = None) -> list[float]:
        """Each group's lr at ``step`` (default: the current step), without changing anything."""
        step = self.last_step if step is None else step
        factor = float(self.lr_factor(step))
        return [base * factor for base in self.base_lrs]

    def get_last_lr(self) -> list[float]:
        """The lrs the optimizer is using now."""
        return [group["lr"] for group in self.optimizer.param_groups]

    def step(self) -> None:
        """Advance one step and set the optimizer's learning rates for it."""
        self.last_step += 1
        self._apply()

    def _apply(self) -> None:
        for group, lr in zip(self.optimizer.param_groups, self.get_lr()):
            group["lr"] = lr

    def state_dict(self) -> dict:
        """The step and the schedule's numbers (not the optimizer, not functions), for checkpoints."""
        return {k: v for k, v in vars(self).items() if k != "optimizer" and not callable(v)}

    def check_state_dict(self, state_dict: dict) -> list[str]:
        """Every reason ``state_dict`` cannot be loaded into this scheduler (empty if it can)."""
        expected = set(self.state_dict())
        if not isinstance(state_dict, dict) or set(state_dict) != expected:
            got = sorted(state_dict) if isinstance(state_dict, dict) else type(state_dict).__name__
            return [f"expected keys {sorted(expected)}, got {got}"]
        saved = state_dict["base_lrs"]
        if not isinstance(saved, list | tuple) or len(saved) != len(self.optimizer.param_groups):
            count = len(saved) if isinstance(saved, list | tuple) else type(saved).__name__
            return [f"saved for {count} parameter groups, this optimizer has {len(self.optimizer.param_groups)}"]
        problems = [f"{key}: expected {_kind(value)} (as this scheduler's {value!r}), got {state_dict[key]!r}"
                    for key, value in self.state_dict().items() if not _same_kind(value, state_dict[key])]
        step = state_dict["last_step"]
        if not (isinstance(step, int) and not isinstance(step, bool) and step >= 0):
            problems.append(f"last_step: expected a whole number >= 0, got {step!r}")
        return problems or self._schedule_problems(state_dict)

    def _schedule_problems(self, state_dict: dict) -> list[str]:
        """The rules a schedule's numbers keep (a subclass adds its constructor's): the base lrs are >= 0."""
        if any(lr < 0 for lr in state_dict["base_lrs"]):
            return [f"base_lrs: expected learning rates >= 0, got {state_dict['base_lrs']!r}"]
        return []

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore ``state_dict()`` and set the optimizer's lrs to match (checked first: a mismatch changes nothing)."""
        problems = self.check_state_dict(state_dict)
        if problems:
            raise ValueError(f"{type(self).__name__}.load_state_dict: " + "; ".join(problems))
        self.__dict__.update({k: (list(v) if isinstance(v, list) else v) for k, v in state_dict.items()})
        self._apply()


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _kind(value) -> str:
    if value is None or isinstance(value, bool):
        return "None" if value is None else "true or false"
    if _is_number(value):
        return "a finite number"
    if isinstance(value, list | tuple):
        return f"a list of {len(value)}" + (f" ({_kind(value[0])[2:]}s)" if value else "")
    return f"a {type(value).__name__}"


def _same_kind(ours, saved) -> bool:
    """Whether a saved value can stand where the scheduler holds ``ours``: a number a finite number, a list
    one as long (each entry the same kind), a flag a flag, a string a string."""
    if ours is None or isinstance(ours, bool):
        return saved is None if ours is None else isinstance(saved, bool)
    if _is_number(ours):
        return _is_number(saved)
    if isinstance(ours, list | tuple):
        return (isinstance(saved, list | tuple) and len(saved) == len(ours)
                and all(_same_kind(a, b) for a, b in zip(ours, saved)))
    return isinstance(saved, type(ours))


class LambdaLR(LRScheduler):
    """``lr = base_lr * lr_lambda(step)``, as ``torch.optim.lr_scheduler.LambdaLR``."""

    def __init__(self, optimizer: Optimizer, lr_lambda):
        self.lr_lambda = lr_lambda
        super().__init__(optimizer)

    def lr_factor(self, step: int) -> float:
        return self.lr_lambda(step)


class WarmupCosineLR(LRScheduler):
    """Linear warmup from 0 over ``warmup_steps``, then a cosine to ``min_lr_ratio * base_lr`` by ``total_steps``."""

    def __init__(self, optimizer: Optimizer, warmup_steps: int, total_steps: int, min_lr_ratio: float = 0.0):
        if not 0 <= warmup_steps < total_steps:
            raise ValueError(f"WarmupCosineLR: need 0 <= warmup_steps < total_steps, got warmup_steps="
                             f"{warmup_steps}, total_steps={total_steps}")
        if not 0.0 <= min_lr_ratio <= 1.0:
            raise ValueError(f"WarmupCosineLR: min_lr_ratio must be in [0, 1], got {min_lr_ratio}")
        self.warmup_steps, self.total_steps, self.min_lr_ratio = warmup_steps, total_steps, min_lr_ratio
        super().__init__(optimizer)

    def _schedule_problems(self, state_dict: dict) -> list[str]:
        problems = super()._schedule_problems(state_dict)
        warmup, total, ratio = state_dict["warmup_steps"], state_dict["total_steps"], state_dict["min_lr_ratio"]
        if not (isinstance(warmup, int) and isinstance(total, int) and 0 <= warmup < total):
            problems.append(f"warmup_steps, total_steps: expected whole numbers with 0 <= warmup_steps < total_steps, "
                            f"got {warmup!r} and {total!r}")
        if not 0.0 <= ratio <= 1.0:
            problems.append(f"min_lr_ratio: expected a number in [0, 1], got {ratio!r}")
        return problems

    def lr_factor(self, step: int) -> float:
        return warmup_cosine(step, self.warmup_steps, self.total_steps, self.min_lr_ratio)
