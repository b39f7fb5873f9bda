"""Exercise 10: activation checkpointing, as an op: keep the inputs, run the function again in backward.

    python -m demos.exercises check 10

A recorded graph keeps every intermediate array until backward uses it
(demos/memory_lesson.py measures how much). Checkpointing trades that memory
for time: the forward pass runs ``fn`` without recording anything and keeps
only its inputs; the VJP runs ``fn`` again, recording this time, and
backpropagates the incoming gradient through that fresh copy.

Here it is an op block, like those of exercise 1: ``fn`` is a parameter, and
every tensor ``fn`` reads is an input (the weights too), called as
``OPS["my_checkpoint"](x, W1, W2, fn=block)`` for ``block(x, W1, W2)``. The
check compares the gradients with those of ``fn`` itself, to the first and the
second order, and measures the memory a chain of checkpointed blocks keeps
alive after the forward pass, which must be a fraction of the plain chain's.
Read minigrad/autograd/checkpoint.py (the engine's own, which also finds the
weights by itself and restores dropout's random numbers).
"""

import minigrad as mg  # noqa: F401  (for your code)


class my_checkpoint:
    """fn(*inputs), keeping only the inputs: fn runs again in backward."""

    def forward(*arrays, fn):
        """Run fn on Tensors made from the arrays, recording nothing (mg.no_grad()); return its output's array."""
        raise NotImplementedError("exercise 10: my_checkpoint.forward")

    def vjp(g, out, *inputs, fn):
        """One gradient per input: run fn again, recording (mg.enable_grad()), then mg.grad(its output, ..., g).

        Backward runs a VJP under no_grad unless it was asked for create_graph=True (a gradient to be
        differentiated again): mg.is_grad_enabled() says which. Without it, start fn from detached copies
        of the inputs (x.detach().requires_grad_()); with it, from the inputs themselves, and pass
        create_graph=True on, so the gradient you return is itself a recorded function of the inputs.
        """
        raise NotImplementedError("exercise 10: my_checkpoint.vjp")
