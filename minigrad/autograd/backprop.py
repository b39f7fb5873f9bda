"""Reverse-mode autodiff: walk the recorded graph backwards, calling each op's VJP.

The whole algorithm, as in micrograd, is "sort the graph topologically, then
visit it in reverse, passing each node's gradient on to its inputs". What is
added here:

* the sort is iterative, so a chain of 100,000 ops needs no recursion limit;
* each node's gradient is summed back to its input's shape once, here, so VJPs
  may return gradients in the broadcast shape;
* gradients for leaves accumulate into ``.grad`` (as in PyTorch); ``grad()``
  returns them instead and leaves ``.grad`` alone;
* with ``create_graph=False`` the VJPs run under ``no_grad``: nothing is recorded
  and the graph's saved tensors are dropped as soon as they have been used;
  with ``create_graph=True`` they are recorded, so gradients can be
  differentiated again, and every op a VJP records is tagged with the pass
  that made it (``_vjp_depth``), so ``viz`` can draw the backward pass apart;
* before any gradient is written, every node is checked for an input changed in
  place since the forward pass (a version counter moved, ``contract.py``): that is
  an error naming the op and the writer, never a gradient of the new values;
* a freed node keeps a small record of its structure (``FreedNode``), without
  its arrays, so ``viz`` can still draw the graph after ``backward()``;
* what each VJP returns is checked where it is used: one gradient per input,
  each a Tensor (or None) of the input's shape or one it broadcasts to (the
  shape only for inputs that require grad: a constant's gradient is dropped); a VJP
  that breaks this, or calls NumPy on Tensors, is a ``VJPError`` naming the op;
* under ``detect_anomaly()`` (``anomaly.py``) every gradient is checked for
  NaN/Inf, and the op and the user's line that made it are named.

The loop itself is ``_backpropagate``, in eight numbered steps; the helpers above
it keep the rarer cases (hooks, broadcast gradients, anomaly mode) out of its
way. It runs once per node of every backward, so its common path is written
inline, and reads a tensor's array as ``_data`` (``.data`` is a property, so that
assigning to it counts as a write: ``versions.py``). ``backward`` and ``grad``, at
the end, are its two public faces.
"""

from __future__ import annotations

import contextlib

import numpy as np

from ..kernels import policy
from ..modes import set_grad_enabled, state
from ..tensor import OpError, Tensor
from .anomaly import check_backward
from .contract import (
    check_grad,
    check_roots,
    check_unchanged,
    one_per_input,
    one_per_output,
    tensors_given,
    vjp_failure,
)
from .freed import remember_inputs

_FREED = ("backward: this graph was already freed by an earlier backward(). Call backward(retain_graph=True) "
          "the first time if you need to backward through it again.")


def toposort(roots, constants: bool = False, inputs_of=None) -> list[Tensor]:
    """The graph's tensors, each after all of its inputs (iterative depth-first search).

    Backward needs only the tensors that require grad; ``constants=True`` also
    lists inputs that do not (data, masks). ``inputs_of(node)``, when given,
    says what to visit before a node instead (``viz`` walks freed nodes' records so).
    """
    order, visited = [], set()
    mark = visited.add
    for root in roots:
        stack = [(root, False)]
        pop, push = stack.pop, stack.append
        while stack:
            t, expanded = pop()
            if expanded:
                order.append(t)
                continue
            if id(t) in visited:
                continue
            mark(id(t))
            push((t, True))
            if inputs_of is not None:
                inputs = inputs_of(t)
            elif t._op is None:
                continue
            else:
                inputs = t._inputs
                if inputs is None:
                    raise RuntimeError(_FREED)
            for x in reversed(inputs):  # reversed, so the first input is visited (and listed) first
                if (constants or inputs_of is not None or x.requires_grad) and id(x) not in visited:
                    push((x, False))
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


def _owner(array: np.ndarray) -> np.ndarray:
    """The array that owns ``array``'s memory (NumPy points a view's .base at its owner)."""
    return array if array.base is None else array.base


def _as_grad(gradient, t: Tensor) -> Tensor:
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
        if t._op is not None and any(id(x) in wanted for x in t._inputs):
            wanted.add(id(t))
    return wanted


class _OwnedGrads:
    """Makes every gradient handed out (``.grad``, or ``grad()``'s results) own its memory.

    A ``.grad`` is the caller's to change in place (``p.grad.zero_()``, ``p.grad.data *= 0.5``)
    without reaching any other tensor's gradient. A VJP can hand back a read-only
    broadcast view (sum's), a view of an array another leaf also gets (add's g,
    reshaped), or the caller's own gradient: those are copied. Keyed by the id
    of the array that owns the memory (a view's ``.base``).
    """

    def __init__(self, root_grads, create_graph: bool):
        self.taken = {id(_owner(g.data)) for g in root_grads}
        self.create_graph = create_graph

    def __call__(self, g: Tensor) -> Tensor:
        if id(_owner(g.data)) in self.taken or not g.data.flags.writeable:
            # Under create_graph the copy must be recorded: astype to the same dtype copies.
            g = g.astype(g.dtype) if self.create_graph else Tensor._wrap(g.data.copy())
        self.taken.add(id(_owner(g.data)))
        return g


def _run_hooks(t: Tensor, g: Tensor) -> Tensor:
    """Pass ``g`` through ``t``'s hooks in order; a hook that returns something replaces it.

    A replacement must have ``t``'s shape (else an error naming the hook and the tensor), and
    is cast to ``t``'s dtype: a gradient always has its tensor's dtype and shape.
    """
    for hook in list(t._hooks):
        replaced = hook(g)
        if replaced is None:
            continue
        g = replaced if isinstance(replaced, Tensor) else Tensor._wrap(np.asarray(replaced))
        if g.shape != t.shape:
            who = f"tensor {t.name!r}" if t.name else "a tensor"
            made = "a leaf" if t._op is None else f"made by op '{t._op.name}'"
            raise RuntimeError(f"backward: the hook {getattr(hook, '__qualname__', hook)!r} on {who} ({made}, "
                               f"shape {t.shape} {t.dtype}) returned a gradient of shape {g.shape}; a hook must "
                               f"return None or a gradient of the tensor's own shape")
        if g.dtype != t.dtype:
            g = g.astype(t.dtype)
    return g


def _accumulate(t: Tensor, g: Tensor, owned: _OwnedGrads, create_graph: bool) -> None:
    """Add ``g`` into ``t.grad`` (a leaf's, or a retain_grad() tensor's), as PyTorch does."""
    if t.grad is None:
        t.grad = owned(g)
    elif create_graph:
        t.grad = t.grad + g
    else:
        t.grad = Tensor._wrap(t.grad.data + g.data)


def _call_vjp_under_anomaly(t: Tensor, g: Tensor) -> tuple:
    """``t``'s op's VJP under detect_anomaly: its results checked as a whole and blamed on the op.

    Left on, anomaly mode would check each op inside the VJP as a forward, and
    report (say) a 'div' at the user's backward() line instead of sqrt's
    gradient at sqrt's line. (The loop calls the VJP itself otherwise.)
    """
    state.anomaly = False
    try:
        input_grads = t._op.vjp(g, t, *t._inputs, **t._params)
    except Exception as err:
        failure = vjp_failure(t, err)
        if failure is err:
            raise
        raise failure from None
    finally:
        state.anomaly = True
    if type(input_grads) is not tuple or len(input_grads) != len(t._inputs):
        input_grads = one_per_input(t, input_grads)
    check_backward(t, input_grads)
    return input_grads


def _fit(t: Tensor, i: int, x: Tensor, gx) -> Tensor:
    """The gradient ``gx`` that ``t``'s VJP sent to its input ``x`` (number ``i``), made to fit ``x``.

    Summed back from a broadcast shape, and cast to the input's dtype (a gradient has
    its tensor's dtype, PyTorch's rule: a float32 weight met by float64 data gets a
    float32 gradient, not one that would upcast it at the update). A VJP result that
    cannot fit is a ``VJPError`` naming the op.
    """
    if type(gx) is not Tensor or gx.data.shape != x.data.shape:  # (broadcast, or a broken VJP)
        check_grad(t, i, x, gx)
        gx = _sum_to(gx, x.data.shape)
    if gx.data.dtype != x.data.dtype:
        gx = gx.astype(x.dtype)
    return gx


def _not_run(t: Tensor, retain_graph: bool) -> None:
    """A node whose VJP backward does not run (no gradient reached it, or ``grad()`` needs nothing behind it).

    Unless the graph is retained, its record keeps its inputs, so a graph drawn after
    backward still shows the branch once the tensors themselves are gone.
    """
    if t._op is not None and not retain_graph:
        remember_inputs(t)


def _backpropagate(roots, root_grads, retain_graph: bool, create_graph: bool, targets=None) -> dict[int, Tensor]:
    """The backward pass shared by ``backward`` and ``grad``: the chain rule, node by node, outputs first.

    With ``targets`` (a list of tensors) it returns their gradients, by id, and
    touches no ``.grad``; without, it accumulates into leaves and retain_grad() tensors.
    """
    check_roots(roots)
    order = toposort(roots)  # 1. every tensor after the tensors it was computed from
    pending: dict[int, Tensor] = {}  # 2. id(tensor) -> the gradient summed into it so far
    for r, g in zip(roots, root_grads):
        pending[id(r)] = pending[id(r)] + g if id(r) in pending else g
    needed = None if targets is None else _needed_for(targets, order)  # grad(): only paths to the targets
    check_unchanged(order, needed)  # an input written in place since the forward pass: refused, nothing written
    target_ids = set() if targets is None else {id(t) for t in targets}
    found: dict[int, Tensor] = {}
    owned = _OwnedGrads(root_grads, create_graph)

    anomaly = state.anomaly  # (read once: a thread-local's attribute is slow to read per node)
    pop = pending.pop
    with set_grad_enabled(create_graph), _restoring_vjp_depth():  # 3. record the VJPs only for create_graph
        for t in reversed(order):  # 4. outputs first: when t comes up, every use of t has sent its gradient
            g = pop(id(t), None)
            op = t._op
            if g is None:
                if op is not None and not retain_graph:
                    remember_inputs(t)  # no gradient reached t: its record still draws its branch
                continue
            if create_graph:
                state.vjp_depth = t._vjp_depth + 1  # the ops recorded now are t's VJP: one pass deeper
            if t._hooks:
                g = _run_hooks(t, g)  # 5. hooks see t's whole gradient, and may replace it
            if id(t) in target_ids:  # 6. hand the gradient out: grad()'s result, or into .grad
                found[id(t)] = owned(g)
            elif targets is None and (op is None or t._retains_grad):
                _accumulate(t, g, owned, create_graph)
            if op is None or (needed is not None and id(t) not in needed):
                _not_run(t, retain_graph)
                continue  # a leaf, or nothing grad() wants lies behind t
            inputs = t._inputs
            if inputs is None:
                raise RuntimeError(_FREED)
            if anomaly:
                input_grads = _call_vjp_under_anomaly(t, g)
            else:  # what comes back is checked where it is used (contract.py), so a wrong VJP is named here
                try:
                    input_grads = op.vjp(g, t, *inputs, **t._params)
                except Exception as err:
                    failure = vjp_failure(t, err)
                    if failure is err:
                        raise
                    raise failure from None
                if type(input_grads) is not tuple or len(input_grads) != len(inputs):
                    input_grads = one_per_input(t, input_grads)
            for i, x in enumerate(inputs):  # 7. the chain rule: t's VJP sends g on to t's inputs
                gx = input_grads[i]
                if gx is None:
                    continue
                if not x.requires_grad:
                    if type(gx) is not Tensor or (x._data.shape and gx._data.shape != x._data.shape):
                        check_grad(t, i, x, gx)  # a broken VJP is broken whatever needs a gradient
                    continue  # a constant's gradient is dropped (a 0-d constant's fits any shape)
                if type(gx) is not Tensor or gx._data.shape != x._data.shape or gx._data.dtype is not x._data.dtype:
                    gx = _fit(t, i, x, gx)  # broadcast, another dtype, or a broken VJP
                if id(x) in pending:
                    pending[id(x)] = pending[id(x)] + gx
                else:
                    pending[id(x)] = gx
            if not retain_graph:
                remember_inputs(t)  # 8. t's arrays are no longer needed: keep its structure, drop the rest
                t._inputs = t._params = t._saved = None
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
