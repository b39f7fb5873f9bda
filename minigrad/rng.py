"""The default random generator: what ``mg.randn``, layer initialisers and dropout draw from when given no ``rng``.

``minigrad.manual_seed(n)`` (also ``minigrad.nn.manual_seed``, PyTorch's
spelling) re-seeds it, so a script that calls it once draws the same numbers
every run. It starts seeded with 0: runs are reproducible out of the box.
Anything that takes an ``rng=`` (a ``np.random.Generator``) draws from that
instead and leaves this one alone.
"""

from __future__ import annotations

import numpy as np

_default = np.random.default_rng(0)


def manual_seed(seed: int) -> None:
    """Re-seed the default generator (``mg.randn``, layer initialisation and dropout given no ``rng``)."""
    global _default
    _default = np.random.default_rng(seed)


def default_rng() -> np.random.Generator:
    """The generator used when none is passed."""
    return _default
