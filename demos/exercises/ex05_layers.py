"""Exercise 5: a transformer's layers by hand: layer norm, GELU and attention's weights, forward and VJP.

    python -m demos.exercises check 5

The engine has each of these as a *fused* op (``minigrad/fused/``): one
forward, one hand-written VJP, and beside it the *composite*, the same
function written with core ops, that it is tested against. The check holds
your forward and VJP against both: the fused op, and its composite run under
``mg.composite_mode()``. Forwards on ndarrays, VJPs in Tensor ops (the check
goes to second order). Read docs/adding_an_op.md, "A fused op, with its composite".
"""

import math

import numpy as np  # noqa: F401  (for your code)

import minigrad as mg  # noqa: F401

from .ex01_elementwise import unbroadcast  # noqa: F401  (yours, from exercise 1)

C = math.sqrt(2.0 / math.pi)


class my_layer_norm:
    """(x - mean) / sqrt(var + eps) * weight + bias, over the last axis; x (..., D), weight and bias (D,)."""

    def forward(x, weight, bias, *, eps=1e-5):
        # xhat = (x - mean(x)) / sqrt(var(x) + eps), mean and (population) variance over the last axis
        # (np.var(x, axis=-1, keepdims=True) on the ndarray, ddof=0); the output is xhat * weight + bias.
        raise NotImplementedError("exercise 5: my_layer_norm.forward")

    def vjp(g, out, x, weight, bias, *, eps=1e-5):
        # Recompute, in Tensor ops: xc = x - mean(x), rstd = (mean(xc * xc) + eps) ** -0.5, xhat = xc * rstd.
        # With v = g * weight, every mean over the last axis (keepdims=True):
        #   d/dx      = rstd * (v - mean(v) - xhat * mean(v * xhat))   (v, projected off what a shift
        #                                                               and a rescale of x leave unchanged)
        #   d/dweight = g * xhat, summed over every leading axis: unbroadcast(g * xhat, weight.shape)
        #   d/dbias   = g, summed the same way
        raise NotImplementedError("exercise 5: my_layer_norm.vjp")


class my_gelu:
    """GELU, GPT-2's tanh form: 0.5 x (1 + tanh(c (x + 0.044715 x^3))), c = sqrt(2 / pi)."""

    def forward(x):
        raise NotImplementedError("exercise 5: my_gelu.forward")

    def vjp(g, out, x):
        # With u = c (x + 0.044715 x^3) and t = tanh(u): gelu = 0.5 x (1 + t), so by the product rule
        #   d gelu / dx = 0.5 (1 + t) + 0.5 x (1 - t^2) du/dx,    du/dx = c (1 + 3 * 0.044715 x^2).
        raise NotImplementedError("exercise 5: my_gelu.vjp")


class my_attention_weights:
    """softmax(q @ k^T * scale) over the keys: q (..., Tq, E), k (..., Tk, E) -> (..., Tq, Tk)."""

    def forward(q, k, *, scale):
        # scores = q @ k^T * scale (k.swapaxes(-1, -2)), then a stable softmax over the last axis.
        raise NotImplementedError("exercise 5: my_attention_weights.forward")

    def vjp(g, out, q, k, *, scale):
        # Through the softmax (exercise 4): d/dscores = out * (g - sum(g * out)) (last axis, keepdims).
        # Then scores = q @ k^T * scale, so, with gs = that times scale:
        #   d/dq = gs @ k,    d/dk = gs^T @ q    (^T: swap the last two axes; unbroadcast to q's and k's shapes)
        raise NotImplementedError("exercise 5: my_attention_weights.vjp")
