"""Exercise 9: forward mode from the VJPs, by double backward (reference solution)."""

import minigrad as mg


def jvp(fn, x: mg.Tensor, t: mg.Tensor) -> tuple[mg.Tensor, mg.Tensor]:
    x = x.detach().requires_grad_()
    y = fn(x)
    u = mg.zeros_like(y, requires_grad=True)
    (g,) = mg.grad(y, [x], u, create_graph=True)
    (j_t,) = mg.grad(g, [u], t)
    return y.detach(), j_t
