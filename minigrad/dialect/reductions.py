"""Reductions as PyTorch spells them: sum, mean, prod, var, std, logsumexp, all, any.

``x.sum(1, keepdim=True)`` and ``x.sum(axis=1, keepdims=True)`` are one call;
``x.var(0)`` is PyTorch's unbiased variance (``correction=1``), whatever the
spelling of its dim and keepdim, and ``correction=0`` (or ``unbiased=False``,
or NumPy's ``ddof=0``) asks for the biased one.
"""

from __future__ import annotations

import numpy as np

from ..registry import OPS, apply
from ..tensor import Tensor
from .arguments import bind, dim_of, keep_of, reduction_dims, scalar_dim


def _reduce(name: str, x: Tensor, dim, keepdim, dtype, axis, keepdims) -> Tensor:
    """The op ``name`` over ``dim`` as PyTorch reads it (``reduction_dims``), the input cast to ``dtype`` first."""
    dim, keepdim = reduction_dims(name, x, dim, keepdim, axis, keepdims)
    return apply(OPS[name], x if dtype is None else x.to(dtype), axis=dim, keepdims=keepdim)


@bind("sum", "sum")
def sum_(self, dim=None, keepdim=False, *, dtype=None, axis=None, keepdims=None) -> Tensor:
    """Sum over ``dim`` (an int or a tuple; None: every dim): ``x.sum(1, keepdim=True)``, ``x.sum(axis=1)``."""
    return _reduce("sum", self, dim, keepdim, dtype, axis, keepdims)


@bind("mean", "mean")
def mean(self, dim=None, keepdim=False, *, dtype=None, axis=None, keepdims=None) -> Tensor:
    """Mean over ``dim`` (an int or a tuple; None: every dim)."""
    return _reduce("mean", self, dim, keepdim, dtype, axis, keepdims)


@bind("prod", "prod")
def prod(self, dim=None, keepdim=False, *, dtype=None, axis=None, keepdims=None) -> Tensor:
    """Product over ``dim`` (None: every dim)."""
    return _reduce("prod", self, dim, keepdim, dtype, axis, keepdims)


def _correction(who: str, x: Tensor, dim, unbiased, keepdim, correction, axis, ddof, keepdims) -> tuple:
    """(axis, ddof, keepdims) for var/std: PyTorch's meaning, ``correction=1`` (unbiased) unless one is given.

    ``dim=``/``axis=`` and ``keepdim=``/``keepdims=`` are one argument each, as in PyTorch; the divisor
    is n - correction, where ``unbiased=False`` and NumPy's ``ddof=0`` are other spellings of
    ``correction=0``. (NumPy's ``a.var(axis=0)`` divides by n: here write ``x.var(0, correction=0)``.)
    """
    if isinstance(dim, bool):  # x.var(False): PyTorch's var(unbiased)
        dim, unbiased = None, dim if unbiased is None else unbiased
    dims, keep = dim_of(who, dim, axis), keep_of(who, keepdim, keepdims)
    given = [v for v in (unbiased, correction, ddof) if v is not None]
    if len(given) > 1:
        raise TypeError(f"{who}: correction=, unbiased= and ddof= say the same thing; give one, as "
                        f"x.{who}(dim={dims!r}, keepdim={keep!r}, correction=1)")
    amount = 1 if not given else (given[0] if unbiased is None else int(bool(unbiased)))
    if dims is not None and x.ndim == 0:
        dims = scalar_dim(who, x, dims)
    return dims, amount, keep


@bind("var", "var")
def var(self, dim=None, unbiased=None, keepdim=False, *, correction=None, axis=None, ddof=None,
        keepdims=None) -> Tensor:
    """Variance over ``dim``, dividing by n - ``correction`` (default 1, unbiased, as PyTorch).

    ``x.var(0, keepdim=True)`` and ``x.var(axis=0, keepdims=True)`` are the same call, dividing by
    n - 1; the population variance (NumPy's default) is ``x.var(0, correction=0)``.
    """
    axis, ddof, keepdims = _correction("var", self, dim, unbiased, keepdim, correction, axis, ddof, keepdims)
    return apply(OPS["var"], self, axis=axis, ddof=ddof, keepdims=keepdims)


@bind("std", "std")
def std(self, dim=None, unbiased=None, keepdim=False, *, correction=None, axis=None, ddof=None,
        keepdims=None) -> Tensor:
    """Standard deviation, sqrt of ``var`` with the same arguments (``correction=1`` unless one is given)."""
    axis, ddof, keepdims = _correction("std", self, dim, unbiased, keepdim, correction, axis, ddof, keepdims)
    return apply(OPS["std"], self, axis=axis, ddof=ddof, keepdims=keepdims)


@bind("logsumexp", "logsumexp")
def logsumexp(self, dim=None, keepdim=False, *, axis=None, keepdims=None) -> Tensor:
    """log(sum(exp(x))) over ``dim``, stable for large inputs."""
    return _reduce("logsumexp", self, dim, keepdim, None, axis, keepdims)


def _truth(name: str):
    def truth(self, dim=None, keepdim=False, *, axis=None, keepdims=None) -> Tensor:
        dim, keepdim = dim_of(name, dim, axis), keep_of(name, keepdim, keepdims)
        return Tensor._wrap(np.asarray(getattr(self.data.astype(bool), name)(axis=dim, keepdims=keepdim)))

    truth.__doc__ = f"Whether {'every' if name == 'all' else 'any'} element over ``dim`` is non-zero (a bool tensor)."
    truth.__name__ = name
    return truth


bind(None, "all")(_truth("all"))
bind(None, "any")(_truth("any"))


def _running(name: str):
    def running(self, dim=None, *, dtype=None, axis=None) -> Tensor:
        dim = dim_of(name, dim, axis)
        if dim is None:
            raise TypeError(f"{name}: needs a dim, as in PyTorch: x.{name}(0) (x.flatten().{name}(0) for every "
                            f"element)")
        x = self if dtype is None else self.to(dtype)
        if self.ndim == 0:
            scalar_dim(name, self, dim)
            return apply(OPS["reshape"], x, shape=())
        return apply(OPS[name], x, axis=dim)

    running.__name__ = name
    running.__doc__ = f"The running {'sum' if name == 'cumsum' else 'product'} along ``dim``: out[j] over x[0..j]."
    return running


bind("cumsum", "cumsum")(_running("cumsum"))
bind("cumprod", "cumprod")(_running("cumprod"))


@bind("norm", "norm")
def norm(self, p="fro", dim=None, keepdim=False, dtype=None, *, axis=None, keepdims=None) -> Tensor:
    """The ``p``-norm over ``dim`` (None: every element): 2 (``'fro'``, the default), 1, ``inf``, or any p > 0."""
    dim, keepdim = dim_of("norm", dim, axis), keep_of("norm", keepdim, keepdims, dim)
    x = self if dtype is None else self.to(dtype)
    if p in ("fro", 2, 2.0):
        return apply(OPS["norm"], x, axis=dim, keepdims=keepdim)
    if p in (float("inf"), "inf"):
        return apply(OPS["max"], apply(OPS["abs"], x), axis=dim, keepdims=keepdim)
    if isinstance(p, int | float) and p > 0:
        powered = apply(OPS["pow"], apply(OPS["abs"], x), exponent=p)
        return apply(OPS["pow"], apply(OPS["sum"], powered, axis=dim, keepdims=keepdim), exponent=1.0 / p)
    raise ValueError(f"norm: p={p!r} is not a norm minigrad computes; write p=2 ('fro'), 1, float('inf') or a "
                     f"number p > 0 (input {self.shape} {self.dtype})")
