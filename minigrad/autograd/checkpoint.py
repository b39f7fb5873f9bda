"""Activation checkpointing: ``checkpoint(fn, *inputs)`` keeps only the inputs, and runs ``fn`` again in backward.

A recorded graph keeps every intermediate array until backward has used it:
for a transformer that is most of the memory a training step needs. A
checkpointed segment records one node instead of the segment's graph. Its
forward runs ``fn`` and keeps the output and the inputs (and the tensors
``fn`` read from outside, its parameters: they are held anyway); its VJP runs
``fn`` again, this time recording, and backpropagates through that fresh copy
of the segment. So the memory of the segment's insides is needed only while
its own gradient is being computed, at the price of a second forward pass.
That is ``torch.utils.checkpoint.checkpoint(fn, *inputs)``:

    y = checkpoint(block, x)           # same value as block(x), same gradients

The gradients are those of ``fn`` itself, to rounding (the same ops on the
same arrays), to any order: with ``create_graph`` the VJP records the
recomputed segment, so the gradient it returns can be differentiated again.

Randomness (dropout) must draw the same numbers on the second run, or the
gradient would belong to another mask. As PyTorch saves and restores its
global generator's state (``preserve_rng_state=True``), this saves the state
of minigrad's default generator and of the generators given in ``rngs``
(a layer's own ``rng``), sets them back for the recomputation, and then
returns them to where they were.

How the parameters are found: the first run of ``fn`` records its graph, and
every tensor requiring grad that the graph reaches without passing through an
input (the leaves ``fn`` read from its closure or its module) becomes an
input of the node. That graph is then dropped; only the output's array is
kept. ``fn`` must return one Tensor and compute the same function on each run.
With ``create_graph``, the recomputation uses the very input tensors, so
an input computed from another input, or from a parameter ``fn`` also uses,
would be counted twice: give ``checkpoint`` independent inputs then.
"""

from __future__ import annotations

import contextlib

import numpy as np

from ..modes import enable_grad, is_grad_enabled, state
from ..random import default_rng
from ..registry import Op
from ..tensor import Tensor
from ..versions import writes
from .backprop import grad, toposort


def checkpoint(fn, *inputs, preserve_rng_state: bool = True, rngs=()) -> Tensor:
    """``fn(*inputs)``, recording one node that keeps the inputs and recomputes ``fn`` in backward.

    ``rngs``: NumPy generators ``fn`` draws from besides minigrad's default one
    (a dropout layer's ``rng``); with ``preserve_rng_state`` each is put back to
    its state before the forward for the recomputation, so the same masks come out.
    """
    if not callable(fn):
        raise TypeError(f"checkpoint: fn must be callable (a function or a module), got {type(fn).__name__}")
    if not is_grad_enabled():
        return fn(*inputs)  # nothing will be differentiated: an ordinary call
    generators = _generators(rngs) if preserve_rng_state else []
    states = tuple(_state(g) for g in generators)
    stand_ins = [Tensor._wrap(x.data, x.requires_grad) if isinstance(x, Tensor) else x for x in inputs]
    out = fn(*stand_ins)  # recorded once, to find the parameters; the graph is dropped on return
    if not isinstance(out, Tensor):
        raise TypeError(f"checkpoint: fn must return one Tensor, got {type(out).__name__}")
    tensors = [x for x in inputs if isinstance(x, Tensor)]
    if not out.requires_grad:
        return out  # nothing it read requires grad
    params = _leaves_reached(out, stand_ins)
    node = Tensor._wrap(out.data, True)
    node._op = CHECKPOINT
    node._inputs = (*tensors, *params)
    node._params = dict(fn=fn, inputs=tuple(None if isinstance(x, Tensor) else x for x in inputs),
                        generators=tuple(generators), states=states)
    node._scope = state.scope
    node._vjp_depth = state.vjp_depth
    node._made_at = writes.count  # backward refuses the node if one of its inputs is written after this
    return node


def _generators(rngs) -> list[np.random.Generator | None]:
    """The generators to replay: None for minigrad's default one (whichever it is when replayed), then the given."""
    if isinstance(rngs, np.random.Generator):
        rngs = (rngs,)
    found = {}
    for g in rngs:
        if not isinstance(g, np.random.Generator):
            raise TypeError(f"checkpoint: rngs must hold np.random.Generator objects, got {type(g).__name__}")
        if g is not default_rng():
            found[id(g)] = g
    return [None, *found.values()]


def _state(g):
    return (default_rng() if g is None else g).bit_generator.state


def _leaves_reached(out: Tensor, stand_ins) -> list[Tensor]:
    """The tensors requiring grad that ``out``'s graph reads besides the stand-ins of the inputs, in first-use order."""
    own = {id(x) for x in stand_ins if isinstance(x, Tensor)}
    return [t for t in toposort([out]) if t._op is None and t.requires_grad and id(t) not in own]


@contextlib.contextmanager
def _states_restored(generators, states):
    """Each generator set to its saved state for the block, then back to where it was."""
    generators = [default_rng() if g is None else g for g in generators]  # (manual_seed makes a new default)
    now = [g.bit_generator.state for g in generators]
    for g, s in zip(generators, states):
        g.bit_generator.state = s
    try:
        yield
    finally:
        for g, s in zip(generators, now):
            g.bit_generator.state = s


def _recompute_vjp(g, out, *tensors, fn, inputs, generators, states):
    """Run ``fn`` again, recording, and backpropagate ``g`` through that copy of the segment.

    Without create_graph the recomputation starts from fresh leaves holding the
    inputs' arrays, and its gradients are plain values. With create_graph it
    starts from the input tensors themselves and records the gradient as a
    function of them, so it can be differentiated again.
    """
    create_graph = is_grad_enabled()  # backward records the VJPs only for create_graph
    n = sum(x is None for x in inputs)  # the inputs that are tensors come first among the node's inputs
    given, params = tensors[:n], tensors[n:]
    if create_graph:
        starts = list(given)
    else:
        starts = [Tensor._wrap(x.data, x.requires_grad) for x in given]
    arguments, it = [], iter(starts)
    for x in inputs:
        arguments.append(next(it) if x is None else x)
    with _states_restored(generators, states), enable_grad():
        again = fn(*arguments)
    wanted = [x for x in (*starts, *params) if x.requires_grad]
    found = iter(grad(again, wanted, g, retain_graph=True, create_graph=create_graph, allow_unused=True))
    return tuple(next(found) if x.requires_grad else None for x in (*starts, *params))


def _no_forward(*arrays, **params):
    raise RuntimeError("checkpoint: its node is made by checkpoint(fn, *inputs), not called as an op")


CHECKPOINT = Op(name="checkpoint", forward=_no_forward, vjp=_recompute_vjp, samples=[],
                doc="fn(*inputs), recomputed in backward (minigrad.autograd.checkpoint).")

__all__ = ["checkpoint"]
