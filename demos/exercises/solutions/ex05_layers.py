"""Exercise 5: layer norm, GELU and attention's weights, forward and VJP (reference solution)."""

import math

import numpy as np

from .ex01_elementwise import unbroadcast

C = math.sqrt(2.0 / math.pi)


class my_layer_norm:
    """(x - mean) / sqrt(var + eps) * weight + bias, over the last axis."""

    def forward(x, weight, bias, *, eps=1e-5):
        xhat = (x - x.mean(axis=-1, keepdims=True)) / np.sqrt(x.var(axis=-1, keepdims=True) + eps)
        return xhat * weight + bias

    def vjp(g, out, x, weight, bias, *, eps=1e-5):
        xc = x - x.mean(axis=-1, keepdims=True)
        rstd = ((xc * xc).mean(axis=-1, keepdims=True) + eps) ** -0.5
        xhat = xc * rstd
        v = g * weight
        gx = rstd * (v - v.mean(axis=-1, keepdims=True) - xhat * (v * xhat).mean(axis=-1, keepdims=True))
        return gx, unbroadcast(g * xhat, weight.shape), unbroadcast(g, bias.shape)


class my_gelu:
    """GELU, GPT-2's tanh form: 0.5 x (1 + tanh(c (x + 0.044715 x^3))), c = sqrt(2 / pi)."""

    def forward(x):
        return 0.5 * x * (1.0 + np.tanh(C * (x + 0.044715 * x**3)))

    def vjp(g, out, x):
        t = (C * (x + 0.044715 * x * x * x)).tanh()
        du = C * (1.0 + 3 * 0.044715 * x * x)
        return (g * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du),)


class my_attention_weights:
    """softmax(q @ k^T * scale) over the keys: (..., Tq, E), (..., Tk, E) -> (..., Tq, Tk)."""

    def forward(q, k, *, scale):
        s = q @ k.swapaxes(-1, -2) * scale
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    def vjp(g, out, q, k, *, scale):
        gs = out * (g - (g * out).sum(axis=-1, keepdims=True)) * scale
        return unbroadcast(gs @ k, q.shape), unbroadcast(gs.swapaxes(-1, -2) @ q, k.shape)
