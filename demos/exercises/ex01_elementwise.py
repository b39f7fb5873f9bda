"""Exercise 1: the VJPs of elementwise ops, and of a broadcast binary op.

    python -m demos.exercises check 1

Each class below is an op block, the same shape as the blocks of
``minigrad/ops.py``: ``forward`` works on ndarrays (given), ``vjp`` on Tensors
(yours to write). The checker registers your blocks in the real op table under
their own names (``my_exp``...), so the engine runs your code: it compares your
VJPs with the engine's own ops on inputs of several shapes in float32 and
float64, then checks them against finite differences and, because a VJP
written in Tensor ops can itself be differentiated, to second order.

``vjp(g, out, *inputs)`` receives ``g``, the gradient of the loss with respect
to the op's output, the output itself and the inputs, all as Tensors, and
returns a tuple with one gradient per input: g times the derivative, by the
chain rule. Use Tensor operations only (``g * out``, ``x.exp()``), never NumPy on
``.data``, or the second-order check fails. Read docs/adding_an_op.md first.

The spelling these exercises expect is NumPy's, as the op table's blocks use it:
the forwards are NumPy on ndarrays, the parameters are ``axis``/``keepdims``, and
in the VJPs write ``g.sum(axis=0, keepdims=True)``. Tensor methods take PyTorch's
spellings too (``g.sum(0, keepdim=True)`` is the same sum) with PyTorch's
meaning: ``x.var(-1)`` and ``x.var(axis=-1)`` are both the unbiased variance,
and the population variance is ``x.var(-1, correction=0)``.
"""

import numpy as np

import minigrad as mg


class my_exp:
    """e ** x."""

    def forward(x):
        return np.exp(x)

    def vjp(g, out, x):
        # d/dx e^x = e^x, which the forward already computed: it is `out`.
        # So the gradient for x is g * e^x.   Return a tuple: (gradient_for_x,)
        raise NotImplementedError("exercise 1: my_exp.vjp")


class my_log:
    """log x (on positives)."""

    def forward(x):
        return np.log(x)

    def vjp(g, out, x):
        # d/dx log x = 1 / x.
        raise NotImplementedError("exercise 1: my_log.vjp")


class my_tanh:
    """tanh x."""

    def forward(x):
        return np.tanh(x)

    def vjp(g, out, x):
        # d/dx tanh x = 1 - tanh(x)^2 = 1 - out^2 (from the output: no tanh computed again).
        raise NotImplementedError("exercise 1: my_tanh.vjp")


def unbroadcast(g: mg.Tensor, shape: tuple) -> mg.Tensor:
    """Sum ``g`` (a broadcast shape) back to ``shape``.

    Broadcasting copies an input along the axes it lacks (leading axes) or has
    with size 1. Each copy receives its own gradient, and a copy's gradients
    add up: so sum g over the leading axes g has and ``shape`` lacks, then over
    every axis where ``shape`` has 1 and g does not (keepdims=True).
    Example: shape (3, 1) broadcast to (2, 3, 4): sum g over axis 0, then over axis 2, keeping it.
    (The engine does this once for every op, in ``autograd/backprop.py``; here you do it yourself.)
    """
    raise NotImplementedError("exercise 1: unbroadcast")


class my_mul:
    """a * b, with broadcasting."""

    def forward(a, b):
        return a * b

    def vjp(g, out, a, b):
        # d(a*b)/da = b and d(a*b)/db = a, elementwise, in the broadcast shape of the output.
        # Each gradient must come back in its own input's shape: use unbroadcast(..., a.shape).
        raise NotImplementedError("exercise 1: my_mul.vjp")
