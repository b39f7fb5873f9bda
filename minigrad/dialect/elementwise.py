"""Elementwise forms PyTorch spells its own way: softmax, clamp, tril/triu, log10/log2, pow, neg, round, rsqrt..."""

from __future__ import annotations

import math

import numpy as np

from ..registry import OPS, apply
from ..tensor import Tensor
from .arguments import bind, dim_of


def _normalise(name: str):
    def normalise(self, dim=None, dtype=None, *, axis=None) -> Tensor:
        dim = dim_of(name, dim, axis)
        x = self if dtype is None else self.to(dtype)
        return apply(OPS[name], x, axis=-1 if dim is None else dim)

    normalise.__name__ = name
    normalise.__doc__ = (f"{'exp(x) / sum(exp(x))' if name == 'softmax' else 'x - logsumexp(x)'} along ``dim`` "
                         f"(default: the last), stable for large inputs.")
    return normalise


bind("softmax", "softmax")(_normalise("softmax"))
bind("log_softmax", "log_softmax")(_normalise("log_softmax"))


@bind("clip", "clip", "clamp")
def clip(self, min=None, max=None, *, lo=None, hi=None) -> Tensor:
    """x limited to [min, max] (either may be None); tensor bounds are ``mg.minimum(mg.maximum(x, min), max)``."""
    lo, hi = (min if lo is None else lo), (max if hi is None else hi)
    if isinstance(lo, Tensor | np.ndarray) or isinstance(hi, Tensor | np.ndarray):
        out = self if lo is None else apply(OPS["maximum"], self, lo)
        return out if hi is None else apply(OPS["minimum"], out, hi)
    return apply(OPS["clip"], self, lo=lo, hi=hi)


def _triangle(name: str):
    def triangle(self, diagonal=0, *, k=None) -> Tensor:
        return apply(OPS[name], self, k=diagonal if k is None else k)

    triangle.__name__ = name
    side = "lower" if name == "tril" else "upper"
    triangle.__doc__ = f"The {side} triangle of the last two dims (``diagonal`` = NumPy's ``k``); the rest 0."
    return triangle


bind("tril", "tril")(_triangle("tril"))
bind("triu", "triu")(_triangle("triu"))


@bind("log", "log10")
def log10(self) -> Tensor:
    """Base-10 logarithm: log(x) / log(10)."""
    return apply(OPS["mul"], apply(OPS["log"], self), 1.0 / math.log(10.0))


@bind("log", "log2")
def log2(self) -> Tensor:
    """Base-2 logarithm: log(x) / log(2)."""
    return apply(OPS["mul"], apply(OPS["log"], self), 1.0 / math.log(2.0))


@bind("pow", "pow")
def pow_(self, exponent) -> Tensor:
    """``x ** exponent`` (a number, or a tensor with x positive)."""
    if isinstance(exponent, Tensor | np.ndarray):
        return apply(OPS["pow_tensor"], self, exponent)
    return apply(OPS["pow"], self, exponent=exponent)


bind("pow", "__pow__")(pow_)


@bind("pow_tensor", "__rpow__")
def rpow(self, base) -> Tensor:
    """``base ** x``."""
    return apply(OPS["pow_tensor"], base, self)


@bind("neg", "__neg__")
def neg(self) -> Tensor:
    """``-x``."""
    return apply(OPS["neg"], self)


# --------------------------------------------------------------------------------------
# Shapes: reshape/view, transpose/permute, squeeze/unsqueeze, flatten, expand, repeat, split, chunk


@bind("round", "round")
def round_(self, decimals: int = 0) -> Tensor:
    """x rounded to ``decimals`` places, halves to even (``x.round()``, ``x.round(decimals=2)``); gradient 0."""
    return apply(OPS["round"], self, decimals=decimals)


@bind("pow", "reciprocal")
def reciprocal(self) -> Tensor:
    """1 / x."""
    return apply(OPS["pow"], self, exponent=-1)


@bind("pow", "rsqrt")
def rsqrt(self) -> Tensor:
    """1 / sqrt(x)."""
    return apply(OPS["pow"], self, exponent=-0.5)


@bind("mul", "square")
def square(self) -> Tensor:
    """x * x."""
    return apply(OPS["mul"], self, self)


@bind(None, "__rmod__")
def rmod(self, other) -> Tensor:
    """``2 % x``: Python's remainder (the sign of the divisor), as ``x % 2``; not differentiated."""
    return Tensor._wrap(np.asarray(np.remainder(other, self.data)))
