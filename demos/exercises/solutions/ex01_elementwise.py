"""Exercise 1: the VJPs of elementwise ops, and of a broadcast binary op (reference solution)."""

import numpy as np

import minigrad as mg


class my_exp:
    """e ** x."""

    def forward(x):
        return np.exp(x)

    def vjp(g, out, x):
        return (g * out,)


class my_log:
    """log x (on positives)."""

    def forward(x):
        return np.log(x)

    def vjp(g, out, x):
        return (g / x,)


class my_tanh:
    """tanh x."""

    def forward(x):
        return np.tanh(x)

    def vjp(g, out, x):
        return (g * (1.0 - out * out),)


def unbroadcast(g: mg.Tensor, shape: tuple) -> mg.Tensor:
    """Sum ``g`` (a broadcast shape) back to ``shape``."""
    lead = g.ndim - len(shape)
    if lead:
        g = g.sum(axis=tuple(range(lead)))
    stretched = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    if stretched:
        g = g.sum(axis=stretched, keepdims=True)
    return g


class my_mul:
    """a * b, with broadcasting."""

    def forward(a, b):
        return a * b

    def vjp(g, out, a, b):
        return unbroadcast(g * b, a.shape), unbroadcast(g * a, b.shape)
