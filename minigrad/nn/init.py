"""Random initialisation: the default generator behind every layer, and a few in-place initialisers.

Every layer that draws random numbers takes an optional ``rng`` (a
``np.random.Generator``). Without one it draws from this module's default
generator (``minigrad/random.py``, shared with ``mg.randn``), which
``minigrad.nn.manual_seed(n)`` or ``minigrad.manual_seed(n)`` re-seeds, so a
script that calls ``manual_seed`` once gets the same weights (and dropout masks)
every run. The default generator starts seeded with 0: runs are reproducible out
of the box.

The initialisers follow ``torch.nn.init`` (``normal_``, ``uniform_``, ``zeros_``,
``ones_``): they overwrite a tensor's values in place, keeping its dtype (and
its views see the new values), and return it. The write is counted on the
tensor's version counter (``minigrad/versions.py``), so a backward through a
graph recorded before it is refused, as in PyTorch.
"""

from __future__ import annotations

import numpy as np

from ..random import Generator, default_rng, manual_seed  # noqa: F401  (nn.manual_seed: PyTorch's home for it)
from ..tensor import Tensor
from ..versions import bump


def resolve_rng(rng: np.random.Generator | None, seed: int | None = None, who: str = "init") -> np.random.Generator:
    """``rng`` itself, a new generator seeded with ``seed``, or the default generator when both are None.

    ``who`` names the caller in the error for passing both (models take ``seed=`` or ``rng=``).
    """
    if seed is not None and rng is not None:
        raise ValueError(f"{who}: pass seed or rng, not both")
    if seed is not None:
        return np.random.default_rng(seed)
    if isinstance(rng, Generator):  # a mg.Generator: the NumPy generator behind it
        return rng.numpy
    return default_rng() if rng is None else rng


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, rng: np.random.Generator | None = None,
             generator=None) -> Tensor:
    """Fill ``tensor`` with draws from U(a, b) (``generator=``, PyTorch's name, is ``rng``)."""
    return _fill(tensor, resolve_rng(rng if generator is None else generator).uniform(a, b, size=tensor.shape),
                 "uniform_")


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, rng: np.random.Generator | None = None,
            generator=None) -> Tensor:
    """Fill ``tensor`` with draws from N(mean, std**2) (``generator=``, PyTorch's name, is ``rng``)."""
    draws = resolve_rng(rng if generator is None else generator).standard_normal(tensor.shape)
    return _fill(tensor, mean + std * draws, "normal_")


def zeros_(tensor: Tensor) -> Tensor:
    """Fill ``tensor`` with zeros."""
    return _fill(tensor, 0, "zeros_")


def ones_(tensor: Tensor) -> Tensor:
    """Fill ``tensor`` with ones."""
    return _fill(tensor, 1, "ones_")


def _fill(tensor: Tensor, values, name: str) -> Tensor:
    """Write ``values`` into ``tensor``'s array in place, in its dtype; counted as a write by ``nn.init.<name>``."""
    np.copyto(tensor.data, values, casting="unsafe")
    bump(tensor, f"nn.init.{name}()")
    return tensor
