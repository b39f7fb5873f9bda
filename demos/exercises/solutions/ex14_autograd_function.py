"""Exercise 14: a Function's backward (reference solution)."""

import minigrad as mg


class Softplus(mg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.relu() + ((-x.abs()).exp() + 1.0).log()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x.sigmoid()


class Normalize(mg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x / (x * x).sum(axis=-1, keepdims=True).sqrt()
        ctx.save_for_backward(x, y)
        return y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        norm = (x * x).sum(axis=-1, keepdims=True).sqrt()
        return (g - y * (g * y).sum(axis=-1, keepdims=True)) / norm


class ScaledMatmul(mg.autograd.Function):
    @staticmethod
    def forward(ctx, x, W, scale):
        ctx.save_for_backward(x, W)
        ctx.scale = scale
        return (x @ W) * scale

    @staticmethod
    def backward(ctx, g):
        x, W = ctx.saved_tensors
        grad_x = g @ W.T * ctx.scale if ctx.needs_input_grad[0] else None
        grad_W = x.T @ g * ctx.scale if ctx.needs_input_grad[1] else None
        return grad_x, grad_W, None
