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
from .arguments import NOT_GIVEN, bind, dim_of, keep_of, scalar_dim


@bind("sum", "sum")
def sum_(self, dim=None, keepdim=False, *, dtype=None, axis=None, keepdims=None) -> Tensor:
    """Sum over ``dim`` (an int or a tuple; None: every dim): ``x.sum(1, keepdim=True)``, ``x.sum(axis=1)``."""
    if axis is not None or keepdims is not None or type(dim) is list or keepdim is not False:
        dim = dim_of("sum", dim, axis)
        keepdim = keep_of("sum", keepdim, keepdims, dim)
    if self.ndim == 0 and dim is not None and axis is None:
        dim = scalar_dim("sum", self, dim)
    x = self if dtype is None else self.to(dtype)
    return apply(OPS["sum"], x, axis=dim, keepdims=keepdim)


@bind("mean", "mean")
def mean(self, dim=None, keepdim=False, *, dtype=None, axis=None, keepdims=None) -> Tensor:
    """Mean over ``dim`` (an int or a tuple; None: every dim)."""
    if axis is not None or keepdims is not None or type(dim) is list or keepdim is not False:
        dim = dim_of("mean", dim, axis)
        keepdim = keep_of("mean", keepdim, keepdims, dim)
    if self.ndim == 0 and dim is not None and axis is None:
        dim = scalar_dim("mean", self, dim)
    x = self if dtype is None else self.to(dtype)
    return apply(OPS["mean"], x, axis=dim, keepdims=keepdim)


@bind("prod", "prod")
def prod(self, dim=None, keepdim=False, *, dtype=None, axis=None, keepdims=None) -> Tensor:
    """Product over ``dim`` (None: every dim)."""
    dim = dim_of("prod", dim, axis)
    keepdim = keep_of("prod", keepdim, keepdims, dim)
    if self.ndim == 0 and dim is not None and axis is None:
        dim = scalar_dim("prod", self, dim)
    x = self if dtype is None else self.to(dtype)
    return apply(OPS["prod"], x, axis=dim, keepdims=keepdim)


def _correction(who: str, x: Tensor, dim, unbiased, keepdim, correction, axis, ddof, keepdims) -> tuple:
    """(axis, ddof, keepdims) for var/std, PyTorch's default correction=1 unless NumPy's keywords are used.

    ``x.var(0, keepdim=True)``: PyTorch, unbiased. ``x.var(axis=0, keepdims=True)`` or ``ddof=``: NumPy,
    ddof=0 unless given. ``x.var(0)`` and ``x.var()`` read both ways: PyTorch's meaning (correction=1).
    """
    if isinstance(dim, bool):  # x.var(False): PyTorch's var(unbiased)
        dim, unbiased = None, dim if unbiased is None else unbiased
    numpy_words = [name for name, v in (("keepdims", keepdims), ("ddof", ddof)) if v is not None]
    if axis is not NOT_GIVEN:  # (x.var(axis=None) is NumPy's, ddof=0)
        numpy_words.insert(0, "axis")
    axis = None if axis is NOT_GIVEN else axis
    torch_words = [name for name, v in (("unbiased", unbiased), ("correction", correction)) if v is not None]
    if keepdim is not False:
        torch_words.append("keepdim")
    given = [v for v in (unbiased, correction, ddof) if v is not None]
    dims, keep = dim_of(who, dim, axis), (keepdims if keepdims is not None else keepdim)
    if len(given) > 1:
        raise TypeError(f"{who}: give one of correction=, unbiased= and ddof=, as "
                        f"x.{who}(dim={dims!r}, keepdim={keep!r}, correction=1)")
    if given:
        amount = given[0] if unbiased is None else (1 if unbiased else 0)
    elif numpy_words and torch_words:
        raise TypeError(f"{who}: NumPy's {'= and '.join(numpy_words)}= (default ddof=0) mixed with PyTorch's "
                        f"{'= and '.join(torch_words)}= (default correction=1): write "
                        f"x.{who}(dim={dims!r}, keepdim={keep!r}, correction=1) or "
                        f"x.{who}(axis={dims!r}, keepdims={keep!r}, ddof=0)")
    else:
        amount = 0 if numpy_words else 1
    if axis is None and dims is not None and x.ndim == 0:
        dims = scalar_dim(who, x, dims)
    return dims, amount, keep_of(who, keepdim, keepdims)


@bind("var", "var")
def var(self, dim=None, unbiased=None, keepdim=False, *, correction=None, axis=NOT_GIVEN, ddof=None,
        keepdims=None) -> Tensor:
    """Variance over ``dim``: PyTorch's ``correction=1`` (unbiased) unless NumPy's ``axis=``/``keepdims=``/``ddof=``.

    ``x.var(0, keepdim=True)`` divides by n - 1, ``x.var(axis=0, keepdims=True)`` by n,
    ``x.var(0, correction=0)`` / ``x.var(0, unbiased=False)`` / ``x.var(axis=0, ddof=1)`` say which.
    """
    axis, ddof, keepdims = _correction("var", self, dim, unbiased, keepdim, correction, axis, ddof, keepdims)
    return apply(OPS["var"], self, axis=axis, ddof=ddof, keepdims=keepdims)


@bind("std", "std")
def std(self, dim=None, unbiased=None, keepdim=False, *, correction=None, axis=NOT_GIVEN, ddof=None,
        keepdims=None) -> Tensor:
    """Standard deviation, sqrt of ``var`` with the same arguments (PyTorch's correction=1 unless NumPy's words)."""
    axis, ddof, keepdims = _correction("std", self, dim, unbiased, keepdim, correction, axis, ddof, keepdims)
    return apply(OPS["std"], self, axis=axis, ddof=ddof, keepdims=keepdims)


@bind("logsumexp", "logsumexp")
def logsumexp(self, dim=None, keepdim=False, *, axis=None, keepdims=None) -> Tensor:
    """log(sum(exp(x))) over ``dim``, stable for large inputs."""
    dims = dim_of("logsumexp", dim, axis)
    if self.ndim == 0 and dims is not None and axis is None:
        dims = scalar_dim("logsumexp", self, dims)
    return apply(OPS["logsumexp"], self, axis=dims, keepdims=keep_of("logsumexp", keepdim, keepdims))


def _truth(name: str):
    def truth(self, dim=None, keepdim=False, *, axis=None, keepdims=None) -> Tensor:
        dim, keepdim = dim_of(name, dim, axis), keep_of(name, keepdim, keepdims)
        return Tensor._wrap(np.asarray(getattr(self.data.astype(bool), name)(axis=dim, keepdims=keepdim)))

    truth.__doc__ = f"Whether {'every' if name == 'all' else 'any'} element over ``dim`` is non-zero (a bool tensor)."
    truth.__name__ = name
    return truth


bind(None, "all")(_truth("all"))
bind(None, "any")(_truth("any"))
