"""Helpers shared by the tests of minigrad.nn (tests/test_nn_*.py)."""

from __future__ import annotations

import numpy as np

import minigrad as mg


def randn(*shape, seed: int = 0, requires_grad: bool = False) -> mg.Tensor:
    """A float64 tensor of N(0, 1) draws."""
    return mg.Tensor(np.random.default_rng(seed).standard_normal(shape), requires_grad=requires_grad)


def gradcheck_module(module, *inputs, forward=None, **tolerances) -> bool:
    """Gradcheck ``module`` in float64 with respect to every float input and every parameter.

    ``forward(module, *inputs)`` computes the outputs (default: ``module(*inputs)``);
    it may return a Tensor or a tuple of Tensors.
    """
    module.double()
    xs = [mg.Tensor(np.asarray(x.data if isinstance(x, mg.Tensor) else x, dtype=np.float64), requires_grad=True)
          if np.asarray(x.data if isinstance(x, mg.Tensor) else x).dtype.kind == "f" else x for x in inputs]
    params = list(module.parameters())
    assert params or xs, "nothing to check"
    call = forward or (lambda m, *args: m(*args))
    n = len(xs)
    return mg.gradcheck(lambda *args: call(module, *args[:n]), (*xs, *params), **tolerances)


def copy_weights(src, dst) -> None:
    """Give ``dst`` the parameters of ``src`` (same architecture)."""
    dst.load_state_dict(src.state_dict())
