"""Exercise 10: activation checkpointing as an op (reference solution)."""

import minigrad as mg


class my_checkpoint:
    """fn(*inputs), keeping only the inputs: fn runs again in backward."""

    def forward(*arrays, fn):
        with mg.no_grad():
            return fn(*[mg.tensor(a) for a in arrays]).data

    def vjp(g, out, *inputs, fn):
        create_graph = mg.is_grad_enabled()
        starts = inputs if create_graph else [x.detach().requires_grad_(x.requires_grad) for x in inputs]
        with mg.enable_grad():
            again = fn(*starts)
        wanted = [x for x in starts if x.requires_grad]
        grads = iter(mg.grad(again, wanted, g, create_graph=create_graph, retain_graph=True, allow_unused=True))
        return tuple(next(grads) if x.requires_grad else None for x in starts)
