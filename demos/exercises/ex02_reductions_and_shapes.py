"""Exercise 2: the VJPs of sum, matmul, reshape, transpose and indexing.

    python -m demos.exercises check 2

As in exercise 1: the forwards are given, the VJPs are yours, in Tensor ops.
The check also trains a small network whose matmuls, tanh and sums are your
ops (``my_matmul``, ``my_tanh`` from exercise 1, ``my_sum``) and holds its
losses against the same network on the engine's ops: your VJPs, running a
real training loop.
"""

import numpy as np  # noqa: F401  (for your code)

import minigrad as mg  # noqa: F401

from .ex01_elementwise import my_tanh, unbroadcast  # noqa: F401  (yours, from exercise 1)


class my_sum:
    """Sum over ``axis`` (None: all axes)."""

    def forward(x, *, axis=None, keepdims=False):
        return x.sum(axis=axis, keepdims=keepdims)

    def vjp(g, out, x, *, axis=None, keepdims=False):
        # Every input element summed into an output element gets that element's gradient, unchanged:
        # d(sum)/dx_i = 1. So spread g back over the summed axes: first give g the shape the sum has
        # with keepdims=True (a 1 in every summed axis; skip this step when keepdims was True), then
        # g.broadcast_to(x.shape). axis may be None (all axes), an int or a tuple, and negative.
        raise NotImplementedError("exercise 2: my_sum.vjp")


class my_matmul:
    """a @ b for operands of at least two axes; leading (batch) axes broadcast."""

    def forward(a, b):
        return a @ b

    def vjp(g, out, a, b):
        # out = a @ b, (..., M, K) @ (..., K, N) -> (..., M, N). Then
        #   d/da = g @ b^T    (..., M, N) @ (..., N, K) -> (..., M, K)
        #   d/db = a^T @ g    (..., K, M) @ (..., M, N) -> (..., K, N)
        # with ^T swapping the last two axes (x.swapaxes(-1, -2)). A weight (K, N) shared by a
        # batch (B, M, K) gets a (B, K, N) gradient: sum it back (unbroadcast) to the weight's shape.
        raise NotImplementedError("exercise 2: my_matmul.vjp")


class my_reshape:
    """The same numbers in a new shape."""

    def forward(x, *, shape):
        return x.reshape(shape)

    def vjp(g, out, x, *, shape):
        # Reshaping moves no number: the gradient is g, in x's shape.
        raise NotImplementedError("exercise 2: my_reshape.vjp")


class my_transpose:
    """Permute the axes: output axis i is input axis axes[i]."""

    def forward(x, *, axes):
        return x.transpose(axes)

    def vjp(g, out, x, *, axes):
        # Undo the permutation: permute g by the inverse permutation (np.argsort(axes) gives it), with
        # g.permute(order) or NumPy's g.transpose(order), order a tuple (g.transpose(0, 1), two dims, swaps them).
        raise NotImplementedError("exercise 2: my_transpose.vjp")


class my_scatter_add:
    """A zero array of ``shape`` with g added at ``index``; repeated indices accumulate."""

    def forward(g, *, index, shape):
        # A forward, on ndarrays: start from zeros of `shape` (g's dtype) and *add* g at `index`.
        # With index = [0, 2, 2], row 2 must receive two rows of g. `out[index] += g` keeps only
        # one of them (NumPy buffers the writes); np.add.at(out, index, g) adds every one.
        raise NotImplementedError("exercise 2: my_scatter_add.forward")

    def vjp(gg, out, g, *, index, shape):
        # scatter_add is linear in g; its VJP reads back the entries it wrote to: gg[index].
        raise NotImplementedError("exercise 2: my_scatter_add.vjp")


class my_getitem:
    """x[index]."""

    def forward(x, *, index):
        return x[index]

    def vjp(g, out, x, *, index):
        # x[index] picks entries of x; each picked entry gets its gradient back at the place it came
        # from, added up where an index repeats: a scatter-add of g into zeros of x's shape. Use your
        # op from the table, so this VJP stays differentiable:
        #     mg.OPS["my_scatter_add"](g, index=index, shape=x.shape)
        raise NotImplementedError("exercise 2: my_getitem.vjp")
