"""Exercise 3: the backward pass itself, topological order and accumulation (reference solution)."""

import minigrad as mg

from .ex01_elementwise import unbroadcast


def toposort(root: mg.Tensor) -> list[mg.Tensor]:
    order, seen = [], set()

    def visit(t):
        if id(t) in seen:
            return
        seen.add(id(t))
        for x in t._inputs:
            visit(x)
        order.append(t)

    visit(root)
    return order


def grads(root: mg.Tensor, leaves: list[mg.Tensor]) -> list[mg.Tensor]:
    gradient = {id(root): mg.ones_like(root)}
    with mg.no_grad():
        for t in reversed(toposort(root)):
            g = gradient.get(id(t))
            if g is None or t._op is None:
                continue
            for x, gx in zip(t._inputs, t._op.vjp(g, t, *t._inputs, **t._params)):
                if gx is None or not x.requires_grad:
                    continue
                gx = unbroadcast(gx, x.shape)
                gradient[id(x)] = gradient[id(x)] + gx if id(x) in gradient else gx
    return [gradient.get(id(x), mg.zeros_like(x)) for x in leaves]
