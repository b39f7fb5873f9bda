"""Shared pytest set-up: hypothesis profiles, and the fixtures every folder uses.

``fast`` (the default) keeps ``make test`` quick; ``MINIGRAD_HYPOTHESIS_PROFILE=ci``
runs many more examples of every property test (the differential tests against
PyTorch included). Tests that set their own ``max_examples`` keep it. Both are
derandomized: the same examples on every run, so a green run stays green and a
failure is reproduced by running again.
"""

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("fast", max_examples=8, deadline=None, print_blob=True, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", max_examples=300, deadline=None, print_blob=True, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("MINIGRAD_HYPOTHESIS_PROFILE", "fast"))
os.environ.setdefault("MINIGRAD_AUTOTUNE", "0")  # no thread counts chosen by timing in the tests (kernels/policy.py)

# The [fast] backend, when installed, is chosen at the first kernel call; choose it now, so the tests that
# hold the compiled forms to their plain ones see them when they are collected (``KERNELS[...].compiled``).
__import__("minigrad").kernels.backend.select()


@pytest.fixture
def rng() -> np.random.Generator:
    """A generator seeded the same in every test, so each test draws the same numbers every run."""
    return np.random.default_rng(0)
