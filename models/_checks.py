"""Checks the model configs share: each config's fields are checked in one place, here."""

from __future__ import annotations

import numpy as np


def check_positive_int(config: str, name: str, value) -> None:
    """``value`` must be a positive integer (not a bool, not a float); the error names the config and field."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"{config}: {name} must be a positive integer, got {value!r}")
