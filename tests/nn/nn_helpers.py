"""Helpers shared by the tests of minigrad.nn (tests/nn/test_nn_*.py)."""

from __future__ import annotations

import numpy as np

import minigrad as mg


def randn(*shape, seed: int = 0, requires_grad: bool = False) -> mg.Tensor:
    """A float64 tensor of N(0, 1) draws."""
    return mg.Tensor(np.random.default_rng(seed).standard_normal(shape), requires_grad=requires_grad)


def copy_weights(src, dst) -> None:
    """Give ``dst`` the parameters of ``src`` (same architecture)."""
    dst.load_state_dict(src.state_dict())
