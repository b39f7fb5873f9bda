"""Random initialisation: the default generator behind every layer, and a few in-place initialisers.

Every layer that draws random numbers takes an optional ``rng`` (a
``np.random.Generator``). Without one it draws from this module's default
generator (``minigrad/dialect/random.py``, shared with ``mg.randn``), which
``minigrad.nn.manual_seed(n)`` or ``minigrad.manual_seed(n)`` re-seeds, so a
script that calls ``manual_seed`` once gets the same weights (and dropout masks)
every run. The default generator starts seeded with 0: runs are reproducible out
of the box.

The initialisers follow ``torch.nn.init`` (``normal_``, ``uniform_``, ``constant_``,
``zeros_``, ``ones_``, ``xavier_uniform_``, ``xavier_normal_``, ``kaiming_uniform_``,
``kaiming_normal_``, with ``calculate_gain``): they overwrite a tensor's values in place, keeping its dtype (and
its views see the new values), and return it. The write is counted on the
tensor's version counter (``minigrad/versions.py``), so a backward through a
graph recorded before it is refused, as in PyTorch.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from ..dialect.random import Generator, default_rng, manual_seed, normal_check, uniform_check  # noqa: F401
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
    _floating(tensor, "uniform_")
    uniform_check(a, b, "nn.init.uniform_")
    return _fill(tensor, resolve_rng(rng if generator is None else generator).uniform(a, b, size=tensor.shape),
                 "uniform_")


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, rng: np.random.Generator | None = None,
            generator=None) -> Tensor:
    """Fill ``tensor`` with draws from N(mean, std**2) (``generator=``, PyTorch's name, is ``rng``)."""
    _floating(tensor, "normal_")
    normal_check(mean, std, "nn.init.normal_")
    draws = resolve_rng(rng if generator is None else generator).standard_normal(tensor.shape)
    return _fill(tensor, mean + std * draws, "normal_")


def zeros_(tensor: Tensor) -> Tensor:
    """Fill ``tensor`` with zeros."""
    return _fill(tensor, 0, "zeros_")


def ones_(tensor: Tensor) -> Tensor:
    """Fill ``tensor`` with ones."""
    return _fill(tensor, 1, "ones_")


def _floating(tensor: Tensor, name: str) -> None:
    """Refuse random reals into an integer or bool tensor: the cast would truncate them (PyTorch refuses)."""
    if np.dtype(tensor.dtype).kind != "f":
        raise TypeError(f"nn.init.{name}: draws real numbers, which a {tensor.dtype} tensor cannot hold (PyTorch "
                        f"refuses too); initialise a floating tensor (mg.float32, mg.float64)")


def _fill(tensor: Tensor, values, name: str) -> Tensor:
    """Write ``values`` into ``tensor``'s array in place, in its dtype; counted as a write by ``nn.init.<name>``."""
    np.copyto(tensor.data, values, casting="unsafe")
    bump(tensor, f"nn.init.{name}()")
    return tensor


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fill ``tensor`` with ``val``."""
    return _fill(tensor, val, "constant_")


# --------------------------------------------------------------------------------------
# Scaled by the layer's fan: Glorot (xavier) and He (kaiming)
# --------------------------------------------------------------------------------------

_UNIT_GAIN = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
              "sigmoid")


def calculate_gain(nonlinearity: str, param=None) -> float:
    """The gain that keeps activations' variance through ``nonlinearity``, PyTorch's table.

    linear, conv and sigmoid 1; tanh 5/3; relu sqrt(2); leaky_relu sqrt(2 / (1 + slope**2)),
    the slope being ``param`` (default 0.01); selu 3/4.
    """
    if nonlinearity in _UNIT_GAIN:
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, int | float):
            slope = param
        else:
            raise ValueError(f"calculate_gain: negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}; use one of {list(_UNIT_GAIN)}, "
                     f"'tanh', 'relu', 'leaky_relu' or 'selu'")


def _fans(tensor: Tensor, who: str) -> tuple[int, int]:
    """(fan_in, fan_out) of a weight (out, in, *kernel): in * kernel size and out * kernel size."""
    if tensor.ndim < 2:
        raise ValueError(f"{who}: Fan in and fan out can not be computed for tensor with fewer than 2 dimensions "
                         f"(got shape {tensor.shape}); use uniform_ or normal_ for a bias")
    receptive = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """U(-a, a), a = gain * sqrt(6 / (fan_in + fan_out)) (Glorot & Bengio)."""
    fan_in, fan_out = _fans(tensor, "xavier_uniform_")
    bound = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return _fill(tensor, resolve_rng(generator).uniform(-bound, bound, size=tensor.shape), "xavier_uniform_")


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """N(0, std**2), std = gain * sqrt(2 / (fan_in + fan_out)) (Glorot & Bengio)."""
    fan_in, fan_out = _fans(tensor, "xavier_normal_")
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return _fill(tensor, std * resolve_rng(generator).standard_normal(tensor.shape), "xavier_normal_")


def _kaiming_std(tensor: Tensor, a: float, mode: str, nonlinearity: str, who: str) -> float | None:
    """gain / sqrt(fan), fan by ``mode``; None (and PyTorch's warning) for a tensor with a zero-size dim."""
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"{who}: Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _fans(tensor, who)
    if 0 in tensor.shape:
        warnings.warn(f"{who}: Initializing zero-element tensors is a no-op", UserWarning, stacklevel=3)
        return None
    return calculate_gain(nonlinearity, a) / math.sqrt(fan_in if mode == "fan_in" else fan_out)


def kaiming_uniform_(tensor: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                     generator=None) -> Tensor:
    """U(-b, b), b = sqrt(3) * gain / sqrt(fan) (He et al.); ``a`` is leaky_relu's negative slope."""
    std = _kaiming_std(tensor, a, mode, nonlinearity, "kaiming_uniform_")
    if std is None:
        return tensor
    bound = math.sqrt(3.0) * std
    return _fill(tensor, resolve_rng(generator).uniform(-bound, bound, size=tensor.shape), "kaiming_uniform_")


def kaiming_normal_(tensor: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                    generator=None) -> Tensor:
    """N(0, std**2), std = gain / sqrt(fan) (He et al.); ``a`` is leaky_relu's negative slope."""
    std = _kaiming_std(tensor, a, mode, nonlinearity, "kaiming_normal_")
    if std is None:
        return tensor
    return _fill(tensor, std * resolve_rng(generator).standard_normal(tensor.shape), "kaiming_normal_")
