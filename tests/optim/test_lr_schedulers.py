"""PyTorch's learning-rate schedules, held to their closed forms without PyTorch.

(Step by step against torch.optim.lr_scheduler itself: tests/against_torch/test_torch_diff_surface_train.py.)
"""

import math

import numpy as np
import pytest

import minigrad as mg
from minigrad import optim
from minigrad.optim import lr_scheduler


def sgd(lr=0.1, momentum=0.0):
    return optim.SGD([mg.Tensor(np.zeros(2), requires_grad=True)], lr=lr, momentum=momentum)


def lrs(scheduler, steps):
    out = []
    for _ in range(steps):
        out.append(scheduler.get_last_lr()[0])
        scheduler.step()
    return out


def test_step_multistep_and_exponential():
    np.testing.assert_allclose(lrs(lr_scheduler.StepLR(sgd(), 3, 0.5), 7), [0.1] * 3 + [0.05] * 3 + [0.025])
    np.testing.assert_allclose(lrs(lr_scheduler.MultiStepLR(sgd(), [2, 4], 0.1), 5), [0.1, 0.1, 0.01, 0.01, 0.001])
    np.testing.assert_allclose(lrs(lr_scheduler.ExponentialLR(sgd(), 0.5), 4), [0.1, 0.05, 0.025, 0.0125])


def test_cosine_annealing_reaches_eta_min_at_t_max_and_rises_after():
    got = lrs(lr_scheduler.CosineAnnealingLR(sgd(1.0), T_max=4, eta_min=0.2), 9)
    expected = [0.2 + 0.8 * (1 + math.cos(math.pi * k / 4)) / 2 for k in range(9)]
    np.testing.assert_allclose(got, expected, rtol=1e-15)
    assert got[4] == pytest.approx(0.2) and got[8] == pytest.approx(1.0)


def test_one_cycle_rises_to_max_lr_then_falls_and_cycles_momentum_the_other_way():
    opt = sgd(momentum=0.9)
    sched = lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=10, pct_start=0.3)
    got, momentum = [], []
    for _ in range(10):
        got.append(sched.get_last_lr()[0])
        momentum.append(opt.param_groups[0]["momentum"])
        if len(got) < 10:
            sched.step()
    assert got[0] == pytest.approx(1.0 / 25) and got[2] == pytest.approx(1.0)  # the peak at pct_start * 10 - 1
    assert got[-1] == pytest.approx(1.0 / 25 / 1e4)
    assert momentum[0] == pytest.approx(0.95) and momentum[2] == pytest.approx(0.85) and momentum[-1] == 0.95
    assert got[2:] == sorted(got[2:], reverse=True)  # falling after the peak
    with pytest.raises(ValueError, match="Tried to step 11 times"):
        sched.step()
        sched.step()


def test_one_cycle_needs_an_optimizer_with_momentum_when_cycling_it():
    class Plain(optim.Optimizer):
        def __init__(self, params):
            super().__init__(params, dict(lr=0.1))

    with pytest.raises(ValueError, match="optimizer must support momentum or beta1"):
        lr_scheduler.OneCycleLR(Plain([mg.zeros(2, requires_grad=True)]), 1.0, total_steps=5)
    lr_scheduler.OneCycleLR(Plain([mg.zeros(2, requires_grad=True)]), 1.0, total_steps=5, cycle_momentum=False)


def test_state_dict_round_trip_resumes():
    first = lr_scheduler.StepLR(sgd(), 2, 0.5)
    for _ in range(5):
        first.step()
    again = lr_scheduler.StepLR(sgd(), 2, 0.5)
    again.load_state_dict(first.state_dict())
    assert again.get_last_lr() == first.get_last_lr() and again.last_epoch == 5
