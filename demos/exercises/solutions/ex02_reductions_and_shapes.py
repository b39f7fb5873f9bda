"""Exercise 2: the VJPs of sum, matmul, reshape, transpose and indexing (reference solution)."""

import numpy as np

import minigrad as mg

from .ex01_elementwise import my_tanh, unbroadcast  # noqa: F401  (my_tanh: the check trains on it)


class my_sum:
    """Sum over ``axis`` (None: all axes)."""

    def forward(x, *, axis=None, keepdims=False):
        return x.sum(axis=axis, keepdims=keepdims)

    def vjp(g, out, x, *, axis=None, keepdims=False):
        if not keepdims:
            axes = range(x.ndim) if axis is None else [axis] if isinstance(axis, int) else axis
            kept = list(x.shape)
            for a in axes:
                kept[a % x.ndim] = 1
            g = g.reshape(tuple(kept))
        return (g.broadcast_to(x.shape),)


class my_matmul:
    """a @ b for operands of at least two axes; leading (batch) axes broadcast."""

    def forward(a, b):
        return a @ b

    def vjp(g, out, a, b):
        ga = g @ b.swapaxes(-1, -2)
        gb = a.swapaxes(-1, -2) @ g
        return unbroadcast(ga, a.shape), unbroadcast(gb, b.shape)


class my_reshape:
    """The same numbers in a new shape."""

    def forward(x, *, shape):
        return x.reshape(shape)

    def vjp(g, out, x, *, shape):
        return (g.reshape(x.shape),)


class my_transpose:
    """Permute the axes: output axis i is input axis axes[i]."""

    def forward(x, *, axes):
        return x.transpose(axes)

    def vjp(g, out, x, *, axes):
        return (g.transpose(tuple(int(i) for i in np.argsort(axes))),)


class my_scatter_add:
    """A zero array of ``shape`` with g added at ``index``; repeated indices accumulate."""

    def forward(g, *, index, shape):
        out = np.zeros(shape, dtype=g.dtype)
        np.add.at(out, index, g)
        return out

    def vjp(gg, out, g, *, index, shape):
        return (gg[index],)


class my_getitem:
    """x[index]."""

    def forward(x, *, index):
        return x[index]

    def vjp(g, out, x, *, index):
        return (mg.OPS["my_scatter_add"](g, index=index, shape=x.shape),)
