"""Reverse-mode autodiff: walk the recorded graph backwards, calling each op's VJP.

As in micrograd: sort the graph topologically, then visit it in reverse, passing
each node's gradient on to its inputs. Added here: the sort is iterative (a chain
of 100,000 ops needs no recursion limit); gradients are summed back to their
input's shape in one place (``_sum_to``); leaves accumulate into ``.grad`` while
``grad()`` returns the gradients instead; without ``create_graph`` the VJPs run
under ``no_grad`` and each node's arrays are dropped once its VJP has run
(``freed.py`` keeps its structure, for ``viz``), with it they are recorded, so
gradients can be differentiated again. What can go wrong is checked in
``contract.py``. The loop is ``_backpropagate``, in seven numbered steps;
``backward`` and ``grad`` are its two public faces.
"""

from __future__ import annotations

import contextlib

import numpy as np

from ..kernels import policy
from ..modes import set_grad_enabled, state
from ..tensor import OpError, Tensor
from ..versions import owner
from .contract import call_vjp, check_grad, check_roots, check_unchanged, one_per_output, tensors_given
from .freed import free, remember_inputs
from .freed import inputs_of as _inputs_of


def toposort(roots, constants: bool = False, inputs_of=None) -> list[Tensor]:
    """The graph's tensors, each after all of its inputs (iterative depth-first search).

    Only those that require grad, unless ``constants``; ``inputs_of(node)``, when given,
    says what to visit before a node (``viz`` walks freed nodes' records so).
    """
    order, visited, every = [], set(), constants or inputs_of is not None
    walk = inputs_of or _inputs_of  # (the nodes' inputs as they were when each op ran: freed.py)
    for root in roots:
        stack = [(root, False)]
        while stack:
            t, expanded = stack.pop()
            if expanded:
                order.append(t)
            elif id(t) not in visited:
                visited.add(id(t))
                stack.append((t, True))
                if inputs_of is not None or t._op is not None:
                    for x in reversed(walk(t)):  # reversed: the first input is visited (and listed) first
                        if (every or x.requires_grad) and id(x) not in visited:
                            stack.append((x, False))
    return order


def _sum_to(g: Tensor, shape: tuple) -> Tensor:
    """Sum a broadcast gradient back to ``shape`` (the one place un-broadcasting happens)."""
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape) if n == 1 and g.shape[lead + i] != 1)
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    return g.reshape(shape)


def _fit(t: Tensor, i: int, x: Tensor, gx) -> Tensor:
    """The gradient ``gx`` that ``t``'s VJP sent to its input ``x`` (number ``i``), made to fit ``x``: summed
    back from a broadcast shape, cast to ``x``'s dtype (PyTorch's rule), or a ``VJPError`` (``check_grad``)."""
    if type(gx) is not Tensor or gx._data.shape != x._data.shape:  # (broadcast, or a broken VJP)
        check_grad(t, i, x, gx)
        gx = _sum_to(gx, x._data.shape)
    return gx if gx._data.dtype == x._data.dtype else gx.astype(x.dtype)


def _as_grad(gradient, t: Tensor) -> Tensor:
    """The gradient backward starts from at output ``t``: ones for a scalar, else the one given."""
    if gradient is None:
        if t.data.size != 1:
            raise RuntimeError(f"backward: a gradient is needed for a non-scalar output (shape {t.shape}); "
                               f"pass gradient=... of that shape, or reduce the output to a scalar first")
        return Tensor._wrap(np.ones(t.shape, dtype=t.dtype))
    g = gradient if isinstance(gradient, Tensor) else Tensor._wrap(np.asarray(gradient, dtype=t.dtype))
    if g.dtype != t.dtype and t.dtype.kind == "f":
        g = g.astype(t.dtype)  # a float64 gradient would otherwise make float32 leaves' grads float64
    if g.shape != t.shape:
        raise OpError(f"backward: gradient has shape {g.shape} but the output has shape {t.shape}")
    return g


def _needed_for(targets, order) -> set[int]:
    """The ids of the tensors on some path to a target: only their VJPs need to run for ``grad()``."""
    wanted = {id(t) for t in targets}
    for t in order:  # inputs come before the tensors made from them
        if t._op is not None and any(id(x) in wanted for x in _inputs_of(t)):
            wanted.add(id(t))
    return wanted


class _OwnedGrads:
    """Makes every gradient handed out (``.grad``, or ``grad()``'s results) own its memory, so the caller may
    change it in place: a read-only broadcast view (sum's VJP), an array another leaf also gets (add's ``g``)
    or the caller's own gradient is copied. Keyed by the id of the array that owns the memory."""

    def __init__(self, root_grads, create_graph: bool):
        self.taken = {id(owner(g._data)) for g in root_grads}
        self.create_graph = create_graph

    def __call__(self, g: Tensor) -> Tensor:
        if id(owner(g._data)) in self.taken or not g._data.flags.writeable:
            # Under create_graph the copy must be recorded: astype to the same dtype copies.
            g = g.astype(g.dtype) if self.create_graph else Tensor._wrap(g._data.copy())
        self.taken.add(id(owner(g._data)))
        return g


def _hand_out(t: Tensor, g: Tensor, found: dict, targets, owned: _OwnedGrads, create_graph: bool) -> Tensor:
    """``t``'s whole gradient ``g``: through its hooks, then to ``grad()``'s results or into ``t.grad``."""
    for hook in list(t._hooks or ()):  # a hook that returns something replaces g (with t's shape and dtype)
        replaced = hook(g)
        if replaced is not None:
            g = replaced if isinstance(replaced, Tensor) else Tensor._wrap(np.asarray(replaced))
            if g.shape != t.shape:
                who = f"tensor {t.name!r}" if t.name else "a tensor"
                made = "a leaf" if t._op is None else f"made by op '{t._op.name}'"
                raise RuntimeError(f"backward: the hook {getattr(hook, '__qualname__', hook)!r} on {who} ({made}, "
                                   f"shape {t.shape} {t.dtype}) returned a gradient of shape {g.shape}; a hook must "
                                   f"return None or a gradient of the tensor's own shape")
            g = g if g.dtype == t.dtype else g.astype(t.dtype)
    if targets is not None:
        if id(t) in targets:
            found[id(t)] = owned(g)
    elif t._op is None or t._retains_grad:  # a leaf, or a retain_grad() tensor: add into .grad, as PyTorch does
        if t.grad is None:
            t.grad = owned(g)
        else:
            t.grad = t.grad + g if create_graph else Tensor._wrap(t.grad._data + g._data)
    return g


def _backpropagate(roots, root_grads, retain_graph: bool, create_graph: bool, targets=None) -> dict[int, Tensor]:
    """The backward pass shared by ``backward`` and ``grad``: the chain rule, node by node, outputs first.

    With ``targets`` (a list of tensors) it returns their gradients, by id, and
    touches no ``.grad``; without, it accumulates into leaves and retain_grad() tensors.
    """
    check_roots(roots)
    order = toposort(roots)  # 1. every tensor after the tensors it was computed from
    needed = None if targets is None else _needed_for(targets, order)  # grad(): only paths to the targets
    check_unchanged(order, needed)  # 2. an array a VJP reads, written in place since: refused, nothing written
    pending: dict[int, Tensor] = {}  # 3. id(tensor) -> the gradient summed into it so far
    for r, g in zip(roots, root_grads):
        pending[id(r)] = pending[id(r)] + g if id(r) in pending else g
    targets = None if targets is None else {id(t) for t in targets}
    found: dict[int, Tensor] = {}
    owned, anomaly = _OwnedGrads(root_grads, create_graph), state.anomaly
    with set_grad_enabled(create_graph), _restoring_vjp_depth():  # 4. record the VJPs only for create_graph
        for t in reversed(order):  # 5. outputs first: when t comes up, every use of t has sent its gradient
            g = pending.pop(id(t), None)
            if g is not None and (t._hooks or t._op is None or t._retains_grad or targets is not None):
                g = _hand_out(t, g, found, targets, owned, create_graph)  # hooks, then .grad or grad()'s result
            if g is None or t._op is None or (needed is not None and id(t) not in needed):
                if t._op is not None and not retain_graph:
                    remember_inputs(t)  # no VJP to run here: t's record still draws its branch
                continue
            if create_graph:
                state.vjp_depth = t._vjp_depth + 1  # the ops recorded now are t's VJP: one pass deeper
            inputs = _inputs_of(t)
            input_grads = call_vjp(t, g, inputs, anomaly)  # 6. t's VJP: one gradient per input
            for i, x in enumerate(inputs):  # 7. the chain rule: t's VJP sends g on to t's inputs
                gx = input_grads[i]
                if gx is None or not x.requires_grad:  # a constant's gradient is dropped (a 0-d one's fits any shape)
                    if gx is not None and (type(gx) is not Tensor or x._data.shape and gx.shape != x._data.shape):
                        check_grad(t, i, x, gx)  # a broken VJP is broken whatever needs a gradient
                    continue
                if type(gx) is not Tensor or gx._data.shape != x._data.shape or gx._data.dtype is not x._data.dtype:
                    gx = _fit(t, i, x, gx)  # broadcast, another dtype, or a broken VJP
                pending[id(x)] = pending[id(x)] + gx if id(x) in pending else gx
            if not retain_graph:
                free(t, inputs)  # t's arrays are no longer needed: keep its structure, drop the rest
    return found


@contextlib.contextmanager
def _restoring_vjp_depth():
    """Put ``state.vjp_depth`` back on leaving, even on an error: the next forward op is made at depth 0."""
    outer = state.vjp_depth
    try:
        yield
    finally:
        state.vjp_depth = outer


def backward(tensors, gradient=None, retain_graph: bool | None = None, create_graph: bool = False):
    """Accumulate the gradient of ``tensors`` into ``.grad`` of every leaf they depend on.

    ``tensors`` is one Tensor or a list of them (as ``torch.autograd.backward``: the
    leaves get the sum of their gradients); ``gradient`` is d(loss)/d(tensor), one
    per tensor (a list for a list), needed for those that are not scalars.
    ``retain_graph`` keeps the graph for another backward (default: ``create_graph``).
    ``create_graph`` records the backward pass itself, for higher-order gradients.
    """
    if isinstance(tensors, Tensor):  # (the usual call, loss.backward(): nothing to pair up)
        roots, grads = [tensors], [gradient]
    else:
        roots = tensors_given("backward", "tensors", tensors)
        grads = one_per_output("backward", "gradient", roots, gradient, False)
    retain = create_graph if retain_graph is None else retain_graph
    _backpropagate(roots, [_as_grad(g, r) for r, g in zip(roots, grads)], retain, create_graph)
    policy.on_backward()  # the speed policy: the first tunes threads and malloc, later ones time steps (policy.py)


def grad(outputs, inputs, grad_outputs=None, retain_graph: bool | None = None, create_graph: bool = False,
         allow_unused: bool = False) -> tuple:
    """Gradients of ``outputs`` with respect to ``inputs``, returned as a tuple (``.grad`` is untouched).

    Like ``torch.autograd.grad``: ``grad_outputs`` weights each output (needed for
    non-scalars); an input the outputs do not depend on is an error unless
    ``allow_unused=True``, in which case its gradient is None.
    """
    single_output = isinstance(outputs, Tensor)
    outputs = tensors_given("grad", "outputs", outputs)
    inputs = tensors_given("grad", "inputs", inputs)
    grad_outputs = one_per_output("grad", "grad_outputs", outputs, grad_outputs, single_output)
    for i, x in enumerate(inputs):
        if not x.requires_grad:
            raise RuntimeError(f"grad: input {i} (shape {x.shape}) does not require grad")
    retain = create_graph if retain_graph is None else retain_graph
    found = _backpropagate(outputs, [_as_grad(g, o) for o, g in zip(outputs, grad_outputs)], retain, create_graph,
                           inputs)
    result = []
    for i, x in enumerate(inputs):
        g = found.get(id(x))
        if g is None and not allow_unused:
            raise RuntimeError(f"grad: input {i} (shape {x.shape}) was not used to compute the outputs; "
                               f"pass allow_unused=True to get None for it")
        result.append(g)
    return tuple(result)
