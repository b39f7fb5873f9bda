"""Activation checkpointing: ``checkpoint(fn, *args, **kwargs)`` keeps the inputs and runs ``fn`` again in backward.

A recorded graph keeps every intermediate array until backward has used it:
for a transformer that is most of the memory a training step needs. A
checkpointed segment records one node instead of the segment's graph. Its
forward runs ``fn`` and keeps the output and the inputs (and the tensors
``fn`` read from outside, its parameters: they are held anyway); its VJP runs
``fn`` again, this time recording, and backpropagates through that fresh copy
of the segment. So the memory of the segment's insides is needed only while
its own gradient is being computed, at the price of a second forward pass.
That is ``torch.utils.checkpoint.checkpoint(fn, *args, use_reentrant=False, **kwargs)``:

    y = checkpoint(block, x)           # same value as block(x), same gradients
    y = checkpoint(layer, h, None, scale=0.5)   # None and keyword arguments are passed on as given

The gradients are those of ``fn`` itself, to rounding (the same ops on the
same arrays), to any order: with ``create_graph`` the VJP records the
recomputed segment, so the gradient it returns can be differentiated again.

Randomness (dropout) must draw the same numbers on the second run, or the
gradient would belong to another mask. As PyTorch saves and restores its
global generator's state (``preserve_rng_state=True``), this saves the state
of minigrad's default generator and of every generator ``fn`` can reach (a
layer's own ``rng``, in any module ``fn`` is, is bound to, closes over or is
given; the ones in ``rngs``), sets them back for the recomputation, and then
returns them to where they were. A generator it cannot see (a module read
through a global of another file) would give another mask: the node keeps
the forward's output, and backward refuses a recomputation that differs from it.

How the inputs of the node are found: the first run of ``fn`` records its
graph, marked as run inside this segment. Every tensor requiring grad that
the graph reaches without passing through an argument, and that was not made
inside the segment, becomes an input of the node: the leaves ``fn`` reads
from its closure or its module (parameters), and a tensor computed before the
call (``h = W * 2`` read inside ``fn``), whose gradient then flows on through
its own graph. That graph is then dropped; only the output's array is kept.
``fn`` must return one Tensor and compute the same function on each run.
With ``create_graph``, the recomputation uses the very input tensors, so
an input computed from another input, or from a parameter ``fn`` also uses,
would be counted twice: give ``checkpoint`` independent inputs then.
"""

from __future__ import annotations

import contextlib
import functools
import types

import numpy as np

from ..dialect.random import default_rng
from ..modes import enable_grad, is_grad_enabled, module_scope, state
from ..registry import Op, record
from ..tensor import Tensor
from .backprop import grad


class _Slot:
    """Where a tensor argument goes in the recorded call (the tensors themselves are the node's inputs)."""

    def __repr__(self):
        return "<tensor>"


TENSOR = _Slot()


def checkpoint(fn, *args, preserve_rng_state: bool = True, rngs=(), use_reentrant: bool | None = None,
               **kwargs) -> Tensor:
    """``fn(*args, **kwargs)``, recording one node that keeps the inputs and recomputes ``fn`` in backward.

    ``rngs``: generators ``fn`` draws from that checkpoint cannot find by itself
    (those of the modules ``fn`` is, is bound to, closes over or is given are
    found); with ``preserve_rng_state`` each is put back to its state before the
    forward for the recomputation, so the same masks come out. ``use_reentrant``
    is PyTorch's switch between its two implementations; this one computes as
    ``use_reentrant=False`` does, and, as PyTorch, takes no keyword arguments for
    ``fn`` with ``use_reentrant=True``.
    """
    if not callable(fn):
        raise TypeError(f"checkpoint: fn must be callable (a function or a module), got {type(fn).__name__}")
    if use_reentrant and kwargs:
        raise ValueError(f"checkpoint: with use_reentrant=True fn takes no keyword arguments (PyTorch's rule), got "
                         f"{', '.join(kwargs)}; pass use_reentrant=False, or pass them positionally")
    if not is_grad_enabled():
        return fn(*args, **kwargs)  # nothing will be differentiated: an ordinary call
    generators = _generators(fn, args, kwargs, rngs) if preserve_rng_state else []
    states = tuple(_numpy(g).bit_generator.state for g in generators)
    stand_ins = {k: Tensor._wrap(x.data, x.requires_grad) if isinstance(x, Tensor) else x
                 for k, x in (*enumerate(args), *kwargs.items())}
    with module_scope(fn):  # every op of this run is marked with the call, to tell it from what fn reads
        segment = state.scope[-1]
        out = fn(*(stand_ins[i] for i in range(len(args))), **{k: stand_ins[k] for k in kwargs})
    if not isinstance(out, Tensor):
        raise TypeError(f"checkpoint: fn must return one Tensor, got {type(out).__name__}")
    if not out.requires_grad:
        return out  # nothing it read requires grad
    tensors = [x for x in (*args, *kwargs.values()) if isinstance(x, Tensor)]
    read = _read_from_outside(out, stand_ins.values(), segment)
    return record(Tensor._wrap(out.data), CHECKPOINT, (*tensors, *read),
                  dict(fn=fn, args=tuple(TENSOR if isinstance(x, Tensor) else x for x in args),
                       kwargs={k: TENSOR if isinstance(x, Tensor) else x for k, x in kwargs.items()},
                       generators=tuple(generators), states=states))


def _generator_types():
    from .. import Generator  # (minigrad's own, which wraps a NumPy one; imported when first needed)

    return np.random.Generator, Generator


def _numpy(g) -> np.random.Generator:
    """The NumPy generator behind g now: minigrad's default one for None, a mg.Generator's current one."""
    if g is None:
        return default_rng()
    return g if isinstance(g, np.random.Generator) else g.numpy


def _generators(fn, args, kwargs, rngs) -> list:
    """The generators to replay: None for minigrad's default one (whichever it is when replayed), then every
    generator found in ``rngs``, ``fn`` and the arguments, each once."""
    kinds = _generator_types()
    if isinstance(rngs, kinds):
        rngs = (rngs,)
    for g in rngs:
        if not isinstance(g, kinds):
            raise TypeError(f"checkpoint: rngs must hold np.random.Generator or mg.Generator objects, got "
                            f"{type(g).__name__}")
    found = {id(default_rng()): None}
    for g in (*rngs, *_reachable_generators((fn, args, kwargs), kinds)):
        found.setdefault(id(_numpy(g)), g)
    return list(found.values())


_HOLD_NO_GENERATOR = (Tensor, np.ndarray, type, types.ModuleType, str, bytes, int, float, complex, type(None), bool)


def _reachable_generators(root, kinds, limit: int = 10_000) -> list:
    """The generators held by what ``root`` reaches: a module's attributes and submodules (a layer's ``rng``),
    a bound method's object, a function's closure and the globals it names, a partial's arguments, containers."""
    found, seen, stack = [], set(), [root]
    while stack and len(seen) < limit:
        obj = stack.pop()
        if id(obj) in seen or type(obj) in _HOLD_NO_GENERATOR or isinstance(obj, _HOLD_NO_GENERATOR):
            continue
        seen.add(id(obj))
        if type(obj) is dict:
            stack += obj.values()
        elif isinstance(obj, kinds):
            found.append(obj)
        elif isinstance(obj, list | tuple | set | frozenset):
            stack += obj
        elif isinstance(obj, types.MethodType):
            stack += [obj.__self__, obj.__func__]
        elif isinstance(obj, types.FunctionType):
            for cell in obj.__closure__ or ():
                with contextlib.suppress(ValueError):  # (a cell not yet filled)
                    stack.append(cell.cell_contents)
            stack += [obj.__globals__[n] for n in obj.__code__.co_names if n in obj.__globals__]
        elif isinstance(obj, functools.partial):
            stack += [obj.func, obj.args, obj.keywords]
        elif isinstance(obj, dict):
            stack += obj.values()
        else:
            with contextlib.suppress(TypeError):  # (an object without a __dict__ holds nothing to look at)
                stack += vars(obj).values()  # an object's attributes (a module's submodules sit in _modules)
    return found


def _read_from_outside(out: Tensor, stand_ins, segment) -> list[Tensor]:
    """The tensors requiring grad that ``out``'s graph reads and that the segment did not make, besides the
    stand-ins of the arguments, in first-use order; the walk stops at each."""
    own = {id(x) for x in stand_ins if isinstance(x, Tensor)}
    found, seen, stack = [], set(), [out]
    while stack:
        t = stack.pop()
        if id(t) in seen or id(t) in own or not t.requires_grad:
            continue
        seen.add(id(t))
        if t._op is None or not any(call is segment for call in t._scope):
            found.append(t)  # a parameter, or a tensor computed before the call
        else:
            stack += reversed(t._inputs)
    return found


@contextlib.contextmanager
def _states_restored(generators, states):
    """Each generator set to its saved state for the block, then back to where it was."""
    generators = [_numpy(g) for g in generators]  # (manual_seed makes a new default)
    now = [g.bit_generator.state for g in generators]
    for g, s in zip(generators, states):
        g.bit_generator.state = s
    try:
        yield
    finally:
        for g, s in zip(generators, now):
            g.bit_generator.state = s


def _recompute_vjp(g, out, *tensors, fn, args, kwargs, generators, states):
    """Run ``fn`` again, recording, and backpropagate ``g`` through that copy of the segment.

    Without create_graph the recomputation starts from fresh leaves holding the
    inputs' arrays, and its gradients are plain values. With create_graph it
    starts from the input tensors themselves and records the gradient as a
    function of them, so it can be differentiated again.
    """
    create_graph = is_grad_enabled()  # backward records the VJPs only for create_graph
    n = sum(x is TENSOR for x in (*args, *kwargs.values()))  # the arguments' tensors come first among the inputs
    given, read = tensors[:n], tensors[n:]
    starts = list(given) if create_graph else [Tensor._wrap(x.data, x.requires_grad) for x in given]
    it = iter(starts)
    positional = [next(it) if x is TENSOR else x for x in args]
    keywords = {k: next(it) if x is TENSOR else x for k, x in kwargs.items()}
    with _states_restored(generators, states), enable_grad():
        again = fn(*positional, **keywords)
    if generators:
        _check_same(again, out)
    wanted = [x for x in (*starts, *read) if x.requires_grad]
    found = iter(grad(again, wanted, g, retain_graph=True, create_graph=create_graph, allow_unused=True))
    return tuple(next(found) if x.requires_grad else None for x in (*starts, *read))


def _check_same(again, out) -> None:
    """Refuse a recomputation that is not the forward's output (to the rounding of a different thread count)."""
    if not isinstance(again, Tensor) or again.shape != out.shape:
        raise RuntimeError(f"checkpoint: fn returned {type(again).__name__} of shape "
                           f"{getattr(again, 'shape', None)} when run again in backward, shape {out.shape} in the "
                           f"forward; fn must compute the same function of its inputs on each run")
    a, b = again.data, out.data
    scale = float(np.max(np.abs(b[np.isfinite(b)]), initial=0.0))
    with np.errstate(invalid="ignore"):
        if not np.allclose(a, b, rtol=1e-3, atol=1e-3 * scale, equal_nan=True):
            worst = float(np.nanmax(np.abs(a.astype(np.float64) - b)))
            raise RuntimeError(
                f"checkpoint: fn computed another output when run again in backward (largest difference {worst:.3g}) "
                f"than in the forward, so its gradient would be another function's. Most likely it draws from a "
                f"generator checkpoint cannot find (one a method reads from its own module's globals): pass it as "
                f"checkpoint(fn, ..., rngs=[g]); or fn is not a pure function of its inputs and parameters")


def _no_forward(*arrays, **params):
    raise RuntimeError("checkpoint: its node is made by checkpoint(fn, *inputs), not called as an op")


CHECKPOINT = Op(name="checkpoint", forward=_no_forward, vjp=_recompute_vjp, samples=[],
                doc="fn(*args, **kwargs), recomputed in backward (minigrad.autograd.checkpoint).")

__all__ = ["checkpoint"]
