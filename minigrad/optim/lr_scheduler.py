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

PyTorch's schedules, with its names, arguments and values: ``LambdaLR``,
``StepLR``, ``MultiStepLR``, ``ExponentialLR``, ``CosineAnnealingLR`` and
``OneCycleLR``. Each is written in closed form (the lr at step k from the base
lr), where PyTorch updates the previous lr step by step; the two agree to float
rounding while nothing else changes the lr.
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

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(self).__name__}: expected an Optimizer, got {type(optimizer).__name__}")
        if last_epoch != -1:
            raise ValueError(f"{type(self).__name__}: last_epoch={last_epoch}: to resume a schedule, build it with "
                             f"the default last_epoch=-1 and load its state: scheduler.load_state_dict(saved)")
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

    @property
    def last_epoch(self) -> int:
        """PyTorch's name for the number of ``step()`` calls so far."""
        return self.last_step

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
    """``lr = base_lr * lr_lambda(step)``, as ``torch.optim.lr_scheduler.LambdaLR`` (one function, or one per group)."""

    def __init__(self, optimizer: Optimizer, lr_lambda, last_epoch: int = -1):
        groups = len(optimizer.param_groups) if isinstance(optimizer, Optimizer) else 0
        if isinstance(lr_lambda, list | tuple) and len(lr_lambda) != groups:
            raise ValueError(f"LambdaLR: expected {groups} lr_lambdas (one per parameter group), got {len(lr_lambda)}")
        self.lr_lambda = lr_lambda
        super().__init__(optimizer, last_epoch)

    def state_dict(self) -> dict:
        return {k: v for k, v in super().state_dict().items() if k != "lr_lambda"}

    def lr_factor(self, step: int) -> float:
        return self.lr_lambda(step)

    def get_lr(self, step: int | None = None) -> list[float]:
        if not isinstance(self.lr_lambda, list | tuple):
            return super().get_lr(step)
        step = self.last_step if step is None else step
        return [base * float(fn(step)) for base, fn in zip(self.base_lrs, self.lr_lambda)]


class StepLR(LRScheduler):
    """``lr = base_lr * gamma ** (step // step_size)``: decay by ``gamma`` every ``step_size`` steps (PyTorch's)."""

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1):
        if isinstance(step_size, bool) or not isinstance(step_size, int) or step_size < 1:
            raise ValueError(f"StepLR: step_size must be a whole number >= 1, got {step_size!r}")
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def lr_factor(self, step: int) -> float:
        return self.gamma ** (step // self.step_size)


class MultiStepLR(LRScheduler):
    """``lr = base_lr * gamma ** (number of milestones <= step)`` (PyTorch's)."""

    def __init__(self, optimizer: Optimizer, milestones, gamma: float = 0.1, last_epoch: int = -1):
        self.milestones, self.gamma = sorted(int(m) for m in milestones), gamma
        super().__init__(optimizer, last_epoch)

    def lr_factor(self, step: int) -> float:
        return self.gamma ** sum(m <= step for m in self.milestones)


class ExponentialLR(LRScheduler):
    """``lr = base_lr * gamma ** step`` (PyTorch's)."""

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def lr_factor(self, step: int) -> float:
        return self.gamma**step


class CosineAnnealingLR(LRScheduler):
    """``lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * step / T_max)) / 2`` (PyTorch's; past T_max it rises)."""

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1):
        if isinstance(T_max, bool) or not isinstance(T_max, int) or T_max < 1:
            raise ValueError(f"CosineAnnealingLR: T_max must be a whole number >= 1, got {T_max!r}")
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self, step: int | None = None) -> list[float]:
        step = self.last_step if step is None else step
        cosine = (1 + math.cos(math.pi * step / self.T_max)) / 2
        return [self.eta_min + (base - self.eta_min) * cosine for base in self.base_lrs]


class OneCycleLR(LRScheduler):
    """The 1cycle policy (Smith & Topin), PyTorch's ``OneCycleLR``: warm up to ``max_lr``, then anneal far below.

    The lr starts at ``max_lr / div_factor``, rises to ``max_lr`` over the first
    ``pct_start`` of ``total_steps`` (or ``epochs * steps_per_epoch``), then falls
    to ``initial_lr / final_div_factor`` (``three_phase``: back to the initial lr
    first), by cosine or linear annealing. With ``cycle_momentum`` the momentum
    (SGD's ``momentum``, Adam's beta1) moves the opposite way, between
    ``max_momentum`` and ``base_momentum``. Stepping past ``total_steps`` is an error.
    """

    def __init__(self, optimizer: Optimizer, max_lr, total_steps: int | None = None, epochs: int | None = None,
                 steps_per_epoch: int | None = None, pct_start: float = 0.3, anneal_strategy: str = "cos",
                 cycle_momentum: bool = True, base_momentum=0.85, max_momentum=0.95, div_factor: float = 25.0,
                 final_div_factor: float = 1e4, three_phase: bool = False, last_epoch: int = -1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"OneCycleLR: expected an Optimizer, got {type(optimizer).__name__}")
        if total_steps is None:
            if epochs is None or steps_per_epoch is None:
                raise ValueError("OneCycleLR: You must define either total_steps OR (epochs AND steps_per_epoch)")
            if epochs <= 0 or steps_per_epoch <= 0:
                raise ValueError(f"OneCycleLR: expected positive integers epochs and steps_per_epoch, got "
                                 f"{epochs} and {steps_per_epoch}")
            total_steps = epochs * steps_per_epoch
        if isinstance(total_steps, bool) or not isinstance(total_steps, int) or total_steps <= 0:
            raise ValueError(f"OneCycleLR: Expected positive integer total_steps, but got {total_steps!r}")
        if not 0 <= pct_start <= 1:
            raise ValueError(f"OneCycleLR: Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"OneCycleLR: anneal_strategy must be one of 'cos' or 'linear', instead got "
                             f"{anneal_strategy!r}")
        self.total_steps, self.anneal_strategy = total_steps, anneal_strategy
        end_up = float(pct_start * total_steps) - 1
        if three_phase:
            self.phases = [[end_up, "initial_lr", "max_lr", "max_momentum", "base_momentum"],
                           [float(2 * pct_start * total_steps) - 2, "max_lr", "initial_lr", "base_momentum",
                            "max_momentum"],
                           [total_steps - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum"]]
        else:
            self.phases = [[end_up, "initial_lr", "max_lr", "max_momentum", "base_momentum"],
                           [total_steps - 1, "max_lr", "min_lr", "base_momentum", "max_momentum"]]
        groups = optimizer.param_groups
        for group, top in zip(groups, _per_group("max_lr", max_lr, len(groups))):
            group["initial_lr"] = top / div_factor
            group["max_lr"], group["min_lr"] = top, group["initial_lr"] / final_div_factor
            group["lr"] = group["initial_lr"]
        self.cycle_momentum = cycle_momentum
        self.use_beta1 = "betas" in optimizer.defaults
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and not self.use_beta1:
                raise ValueError("OneCycleLR: optimizer must support momentum or beta1 with `cycle_momentum` "
                                 "option enabled")
            for group, low, high in zip(groups, _per_group("base_momentum", base_momentum, len(groups)),
                                        _per_group("max_momentum", max_momentum, len(groups))):
                group["base_momentum"], group["max_momentum"] = low, high
        super().__init__(optimizer, last_epoch)

    def _anneal(self, start: float, end: float, pct: float) -> float:
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def _at(self, group: dict, step: int, names: slice) -> float:
        """The annealed value of the phase holding ``step``: lr (names 1:3) or momentum (names 3:5)."""
        start_step = 0.0
        for i, phase in enumerate(self.phases):
            end_step = phase[0]
            if step <= end_step or i == len(self.phases) - 1:
                start, end = (group[name] for name in phase[names])
                return self._anneal(start, end, (step - start_step) / (end_step - start_step))
            start_step = end_step
        raise AssertionError("unreachable: the last phase takes every step")

    def get_lr(self, step: int | None = None) -> list[float]:
        step = self.last_step if step is None else step
        if step > self.total_steps:
            raise ValueError(f"OneCycleLR: Tried to step {step} times. The specified number of total steps is "
                             f"{self.total_steps}")
        return [self._at(group, step, slice(1, 3)) for group in self.optimizer.param_groups]

    def _apply(self) -> None:
        super()._apply()
        if not self.cycle_momentum:
            return
        for group in self.optimizer.param_groups:
            momentum = self._at(group, self.last_step, slice(3, 5))
            if self.use_beta1:
                group["betas"] = (momentum, *group["betas"][1:])
            else:
                group["momentum"] = momentum


def _per_group(name: str, value, n_groups: int) -> list[float]:
    if isinstance(value, list | tuple):
        if len(value) != n_groups:
            raise ValueError(f"OneCycleLR: expected {n_groups} values for {name}, got {len(value)}")
        return [float(v) for v in value]
    return [float(value)] * n_groups


class WarmupCosineLR(LRScheduler):
    """Linear warmup from 0 over ``warmup_steps``, then a cosine to ``min_lr_ratio * base_lr`` by ``total_steps``."""

    def __init__(self, optimizer: Optimizer, warmup_steps: int, total_steps: int, min_lr_ratio: float = 0.0,
                 last_epoch: int = -1):
        if not 0 <= warmup_steps < total_steps:
            raise ValueError(f"WarmupCosineLR: need 0 <= warmup_steps < total_steps, got warmup_steps="
                             f"{warmup_steps}, total_steps={total_steps}")
        if not 0.0 <= min_lr_ratio <= 1.0:
            raise ValueError(f"WarmupCosineLR: min_lr_ratio must be in [0, 1], got {min_lr_ratio}")
        self.warmup_steps, self.total_steps, self.min_lr_ratio = warmup_steps, total_steps, min_lr_ratio
        super().__init__(optimizer, last_epoch)

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
