"""Exercise 14: a Function's backward: PyTorch's way of adding a differentiable function from outside the op table.

    python -m demos.exercises check 14

Code written for PyTorch adds its own differentiable functions as subclasses of
``torch.autograd.Function``; ``mg.autograd.Function`` is the same class (read
docs/adding_an_op.md, 'Outside the table: autograd.Function'). Each forward
below is written; you write its backward:

* it gets ``ctx`` and one gradient per output of forward, and returns one
  gradient per argument of forward, in order: a Tensor of that argument's
  shape, or None for an argument that is not a Tensor (a number, a flag);
* it reads what forward kept: ``ctx.saved_tensors``, and attributes of ctx;
* it uses Tensor ops only (``g * x.sigmoid()``, never ``x.numpy()`` or NumPy),
  so that it is recorded under ``create_graph`` and can itself be differentiated:
  the check runs ``gradgradcheck`` on it. A tensor forward computed (under
  no_grad) is a constant to that second derivative; recompute it from the saved
  inputs and outputs instead.
"""

import minigrad as mg


class Softplus(mg.autograd.Function):
    """log(1 + e^x), elementwise, written so that e^x never overflows."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.relu() + ((-x.abs()).exp() + 1.0).log()

    @staticmethod
    def backward(ctx, g):
        """d/dx log(1 + e^x) = e^x / (1 + e^x) = sigmoid(x): the gradient is g times that."""
        raise NotImplementedError("exercise 14: Softplus.backward")


class Normalize(mg.autograd.Function):
    """y = x / |x| along the last axis: a unit vector. Its Jacobian is not diagonal: each y_i depends on every x_j."""

    @staticmethod
    def forward(ctx, x):
        y = x / (x * x).sum(axis=-1, keepdims=True).sqrt()
        ctx.save_for_backward(x, y)
        return y

    @staticmethod
    def backward(ctx, g):
        """dy/dx = (I - y y^T) / |x|, so the gradient is (g - y <g, y>) / |x|, with <g, y> summed over the last axis.

        Recompute |x| from the saved x (a Tensor op, so second order sees it).
        """
        raise NotImplementedError("exercise 14: Normalize.backward")


class ScaledMatmul(mg.autograd.Function):
    """(x @ W) * scale, with ``scale`` a Python number: it has no gradient, so backward returns None for it."""

    @staticmethod
    def forward(ctx, x, W, scale):
        ctx.save_for_backward(x, W)
        ctx.scale = scale
        return (x @ W) * scale

    @staticmethod
    def backward(ctx, g):
        """Three gradients, for x, W and scale: g @ W^T * scale, x^T @ g * scale, None.

        ``ctx.needs_input_grad`` (one bool per argument) says which are wanted: compute
        only those, None for the others (W is often a constant here).
        """
        raise NotImplementedError("exercise 14: ScaledMatmul.backward")
