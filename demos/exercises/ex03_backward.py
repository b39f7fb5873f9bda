"""Exercise 3: the backward pass itself: topological order, and accumulation where a tensor is used twice.

    python -m demos.exercises check 3

The engine records, on every tensor an op made, the op (``t._op``, an entry of
the op table), its inputs (``t._inputs``, a tuple of Tensors) and its
parameters (``t._params``, a dict). A leaf has ``t._op is None`` and no inputs.
That record is the graph; ``mg.grad`` walks it. Here you walk it yourself, and
the check holds your gradients against ``mg.grad`` on random graphs in which
tensors are reused (``x * x``, a hidden state read twice): the case
micrograd's issues keep rediscovering. Read docs/backward.md, sections 2 to 5.

To watch the engine do it, one tensor at a time, with the shares adding up
where a tensor is used twice: ``from minigrad import viz``, then
``print(viz.backward_steps(loss).text())`` (in Jupyter, ``viz.backward_steps(loss)``
alone shows a slider over the frames).
"""

import minigrad as mg  # noqa: F401  (for your code)

from .ex01_elementwise import unbroadcast  # noqa: F401  (yours, from exercise 1)


def toposort(root: mg.Tensor) -> list[mg.Tensor]:
    """Every tensor ``root`` depends on, each once, each after all of its inputs; ``root`` last.

    Depth-first: visit a tensor's inputs (``t._inputs``) before appending the
    tensor itself, and keep a set of the tensors already visited (by ``id``:
    ``==`` on Tensors is elementwise), so a tensor used twice is listed once.
    """
    raise NotImplementedError("exercise 3: toposort")


def grads(root: mg.Tensor, leaves: list[mg.Tensor]) -> list[mg.Tensor]:
    """d root / d leaf for each of ``leaves`` (``root`` is a scalar), as Tensors of the leaves' shapes.

    Start from d root / d root = 1 (``mg.ones_like(root)``). Visit toposort(root)
    in reverse, so each tensor comes after every tensor made from it: by then
    its gradient is complete. At a tensor t made by an op, hand its gradient g
    to the op's VJP,

        t._op.vjp(g, t, *t._inputs, **t._params)     # one gradient per input (None: not differentiable)

    and ADD each input's share into that input's gradient: a tensor used twice
    receives two shares, and their sum is its gradient (assigning instead
    keeps only the last share). The engine's VJPs may hand back a gradient in
    the broadcast shape of the output: unbroadcast it to the input's shape.
    Skip inputs that do not require grad. Run the loop under ``mg.no_grad()``.
    A leaf the root does not depend on gets zeros.
    """
    raise NotImplementedError("exercise 3: grads")
