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
second order, also when an input does not require grad (the data, a frozen
weight: its gradient is None), and measures the memory a chain of checkpointed
blocks keeps alive after the forward pass, which must be a fraction of the
plain chain's.

A block with dropout draws random numbers: run twice, it draws two masks, and
the recomputed gradient belongs to the wrong one. ``checkpoint_with_rng``
replays the generator. Read minigrad/autograd/checkpoint.py (the engine's
own, which also finds the weights by itself).
"""

import minigrad as mg  # noqa: F401  (for your code)
from minigrad.ops import OPS  # noqa: F401  (OPS["my_checkpoint"], once the check has registered your op)


class my_checkpoint:
    """fn(*inputs), keeping only the inputs: fn runs again in backward."""

    def forward(*arrays, fn):
        """Run fn on Tensors made from the arrays, recording nothing (mg.no_grad()); return its output's array."""
        raise NotImplementedError("exercise 10: my_checkpoint.forward")

    def vjp(g, out, *inputs, fn):
        """One gradient per input: run fn again, recording (mg.enable_grad()), then mg.grad(its output, ..., g).

        Backward runs a VJP under no_grad unless it was asked for create_graph=True (a gradient to be
        differentiated again): mg.is_grad_enabled() says which. Without it, start fn from detached copies
        of the inputs (x.detach().requires_grad_(x.requires_grad)); with it, from the inputs themselves, and
        pass create_graph=True on, so the gradient you return is itself a recorded function of the inputs.
        Ask mg.grad only for the inputs that require grad; return None for the others.
        """
        raise NotImplementedError("exercise 10: my_checkpoint.vjp")


def checkpoint_with_rng(fn, *inputs, rng):
    """OPS["my_checkpoint"](*inputs, fn=...) for an fn that draws from the NumPy generator ``rng`` (dropout).

    Save rng.bit_generator.state before the forward. Give my_checkpoint a function that sets the generator to
    that saved state and runs fn: the recomputation in backward then draws the forward's mask again. After a
    recomputation, put the generator back to where it was before it (so the numbers drawn after backward are
    those that would follow without checkpointing); after the first run, leave it where fn left it.
    """
    raise NotImplementedError("exercise 10: checkpoint_with_rng")
