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
  differentiated again;
* ``detect_anomaly()`` checks every value and gradient for NaN/Inf and names the
  op and the user's line that made it.
"""

from __future__ import annotations

import contextlib

import numpy as np

from .tensor import OpError, Tensor, _state, set_grad_enabled

_FREED = ("backward: this graph was already freed by an earlier backward(). Call backward(retain_graph=True) "
          "the first time if you need to backward through it again.")


def toposort(roots, constants: bool = False) -> list[Tensor]:
    """The graph's tensors, each after all of its inputs (iterative depth-first search).

    Backward needs only the tensors that require grad; ``constants=True`` also
    lists inputs that do not (data, masks), as ``viz`` draws them.
    """
    order, visited = [], set()
    for root in roots:
        stack = [(root, False)]
        while stack:
            t, expanded = stack.pop()
            if expanded:
                order.append(t)
                continue
            if id(t) in visited:
                continue
            visited.add(id(t))
            stack.append((t, True))
            if t._op is not None:
                if t._inputs is None:
                    raise RuntimeError(_FREED)
                # reversed, so the first input is visited (and listed) first
                stack.extend((x, False) for x in reversed(t._inputs)
                             if (constants or x.requires_grad) and id(x) not in visited)
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
        if t.size != 1:
            raise RuntimeError(f"backward: a gradient is needed for a non-scalar output (shape {t.shape}); "
                               f"pass gradient=... of that shape, or reduce the output to a scalar first")
        return Tensor._wrap(np.ones(t.shape, dtype=t.dtype))
    g = gradient if isinstance(gradient, Tensor) else Tensor._wrap(np.asarray(gradient, dtype=t.dtype))
    if g.dtype != t.dtype and t.dtype.kind == "f":
        g = g.astype(t.dtype)  # a float64 gradient would otherwise make float32 leaves' grads float64
    if g.shape != t.shape:
        raise OpError(f"backward: gradient has shape {g.shape} but the output has shape {t.shape}")
    return g


def _run(roots, root_grads, retain_graph: bool, create_graph: bool, targets=None):
    """The backward pass shared by ``backward`` and ``grad``.

    With ``targets`` (a list of tensors) it returns their gradients and touches no
    ``.grad``; without, it accumulates into leaves and retain_grad() tensors.
    """
    for r in roots:
        if not r.requires_grad:
            raise RuntimeError(f"backward: the output (shape {r.shape}) does not require grad: no input it was "
                               f"computed from has requires_grad=True, or it was computed under no_grad()")
    order = toposort(roots)
    grads: dict[int, Tensor] = {}
    for r, g in zip(roots, root_grads):
        grads[id(r)] = grads[id(r)] + g if id(r) in grads else g

    wanted = None
    found: dict[int, Tensor] = {}
    if targets is not None:
        # Only nodes on a path to a target need their VJP run.
        target_ids = {id(t) for t in targets}
        wanted = set()
        for t in order:  # inputs come before the tensors made from them
            if id(t) in target_ids or (t._op is not None and any(id(x) in wanted for x in t._inputs)):
                wanted.add(id(t))

    # Every gradient handed out (.grad, or grad()'s results) must own its memory: optimizers
    # update gradients in place. A VJP can hand back a read-only broadcast view (sum's), a
    # view of an array another leaf also gets (add's g, reshaped), or the caller's own
    # gradient. Keyed by the id of the array that owns the memory (a view's .base).
    taken_memory: set[int] = {id(_owner(g.data)) for g in root_grads}

    def owned(g: Tensor) -> Tensor:
        if id(_owner(g.data)) in taken_memory or not g.data.flags.writeable:
            # Under create_graph the copy must be recorded: astype to the same dtype copies.
            g = g.astype(g.dtype) if create_graph else Tensor._wrap(g.data.copy())
        taken_memory.add(id(_owner(g.data)))
        return g

    with set_grad_enabled(create_graph):
        for t in reversed(order):
            g = grads.pop(id(t), None)
            if g is None:
                continue
            if t._hooks:
                for hook in list(t._hooks):
                    replaced = hook(g)
                    if replaced is not None:
                        g = _hook_result(replaced, t, hook)
            if targets is not None:
                if id(t) in target_ids:
                    found[id(t)] = owned(g)
            elif t._op is None or t._retains_grad:
                if t.grad is None:
                    t.grad = g = owned(g)
                elif create_graph:
                    t.grad = t.grad + g
                else:
                    t.grad = Tensor._wrap(t.grad.data + g.data)
            if t._op is None or (wanted is not None and id(t) not in wanted):
                continue
            inputs = t._inputs
            if inputs is None:
                raise RuntimeError(_FREED)
            if _state.anomaly:
                # The VJP is checked as a whole and blamed on this op. Left on, anomaly mode
                # would check each op inside the VJP as a forward, and report (say) a 'div'
                # at the user's backward() line instead of sqrt's gradient at sqrt's line.
                _state.anomaly = False
                try:
                    input_grads = t._op.vjp(g, t, *inputs, **t._params)
                finally:
                    _state.anomaly = True
                check_backward(t, input_grads)
            else:
                input_grads = t._op.vjp(g, t, *inputs, **t._params)
            for x, gx in zip(inputs, input_grads):
                if gx is None or not x.requires_grad:
                    continue
                if gx.data.shape != x.data.shape:
                    gx = _sum_to(gx, x.data.shape)
                if gx.data.dtype != x.data.dtype:
                    # A gradient has its tensor's dtype (PyTorch's rule): a float32 weight met by float64
                    # data gets a float32 gradient, not a float64 one that would upcast it at the update.
                    gx = gx.astype(x.data.dtype)
                prev = grads.get(id(x))
                grads[id(x)] = gx if prev is None else prev + gx
            if not retain_graph:
                t._inputs = None  # free the saved tensors: their arrays can go now
                t._params = None
                t._saved = None
    return found


def _hook_result(replaced, t: Tensor, hook) -> Tensor:
    """A hook's returned gradient, checked: it must have t's shape; it is cast to t's dtype."""
    g = replaced if isinstance(replaced, Tensor) else Tensor._wrap(np.asarray(replaced))
    if g.shape != t.shape:
        who = f"tensor {t.name!r}" if t.name else "a tensor"
        made = "a leaf" if t._op is None else f"made by op '{t._op.name}'"
        raise RuntimeError(f"backward: the hook {getattr(hook, '__qualname__', hook)!r} on {who} ({made}, shape "
                           f"{t.shape} {t.dtype}) returned a gradient of shape {g.shape}; a hook must return None "
                           f"or a gradient of the tensor's own shape")
    if g.dtype != t.dtype:
        g = g.astype(t.dtype)
    return g


def backward(tensor: Tensor, gradient=None, retain_graph: bool | None = None, create_graph: bool = False):
    """Accumulate the gradient of ``tensor`` into ``.grad`` of every leaf it depends on.

    ``gradient`` is d(loss)/d(tensor), needed when ``tensor`` is not a scalar.
    ``retain_graph`` keeps the graph for another backward (default: ``create_graph``).
    ``create_graph`` records the backward pass itself, for higher-order gradients.
    """
    retain = create_graph if retain_graph is None else retain_graph
    _run([tensor], [_as_grad(gradient, tensor)], retain, create_graph)


def grad(outputs, inputs, grad_outputs=None, retain_graph: bool | None = None, create_graph: bool = False,
         allow_unused: bool = False) -> tuple:
    """Gradients of ``outputs`` with respect to ``inputs``, returned as a tuple (``.grad`` is untouched).

    Like ``torch.autograd.grad``: ``grad_outputs`` weights each output (needed for
    non-scalars); an input the outputs do not depend on is an error unless
    ``allow_unused=True``, in which case its gradient is None.
    """
    outputs = [outputs] if isinstance(outputs, Tensor) else list(outputs)
    single = isinstance(inputs, Tensor)
    inputs = [inputs] if single else list(inputs)
    if grad_outputs is None:
        grad_outputs = [None] * len(outputs)
    elif isinstance(grad_outputs, Tensor | np.ndarray):
        grad_outputs = [grad_outputs]
    for i, x in enumerate(inputs):
        if not x.requires_grad:
            raise RuntimeError(f"grad: input {i} (shape {x.shape}) does not require grad")
    retain = create_graph if retain_graph is None else retain_graph
    found = _run(outputs, [_as_grad(g, o) for o, g in zip(outputs, grad_outputs)], retain, create_graph, inputs)
    result = []
    for i, x in enumerate(inputs):
        g = found.get(id(x))
        if g is None and not allow_unused:
            raise RuntimeError(f"grad: input {i} (shape {x.shape}) was not used to compute the outputs; "
                               f"pass allow_unused=True to get None for it")
        result.append(g)
    return tuple(result)


# --------------------------------------------------------------------------------------
# Anomaly detection
# --------------------------------------------------------------------------------------


@contextlib.contextmanager
def detect_anomaly():
    """Check every op's output and every gradient for NaN/Inf; name the op and the line that made it.

    Infinities in a forward output are only an anomaly when no input had one
    (a -inf attention mask passing through softmax is fine; exp overflowing is not).
    """
    prev = _state.anomaly
    _state.anomaly = True
    try:
        yield
    finally:
        _state.anomaly = prev


class AnomalyError(FloatingPointError):
    """A NaN or Inf appeared where none should (raised only inside ``detect_anomaly()``)."""


def _shapes(tensors) -> str:
    return ", ".join(f"{tuple(x.shape)} {x.dtype}" for x in tensors)


def check_forward(op, inputs, params, out: Tensor) -> None:
    data = out.data
    if data.dtype.kind != "f" or np.isfinite(data).all():
        return
    inputs_finite = all(x.dtype.kind != "f" or np.isfinite(x.data).all() for x in inputs)
    # np.generic too: a mask value of np.float32(-np.inf) is no more an anomaly than -math.inf.
    params_finite = all(np.isfinite(v).all() for v in (params or {}).values()
                        if isinstance(v, float | np.generic | np.ndarray) and np.asarray(v).dtype.kind == "f")
    if np.isnan(data).any() or (inputs_finite and params_finite):
        kind = "NaN" if np.isnan(data).any() else "Inf"
        raise AnomalyError(f"detect_anomaly: op '{op.name}' produced {kind} in its output "
                           f"(inputs {_shapes(inputs)}), at {out._trace}")


def check_backward(node: Tensor, input_grads) -> None:
    for i, g in enumerate(input_grads):
        if g is not None and g.dtype.kind == "f" and not np.isfinite(g.data).all():
            kind = "NaN" if np.isnan(g.data).any() else "Inf"
            where = node._trace or "<not recorded: created outside detect_anomaly(), or by a backward pass>"
            raise AnomalyError(f"detect_anomaly: the gradient of op '{node._op.name}' for its input {i} has {kind} "
                               f"(inputs {_shapes(node._inputs)}); the op was created at {where}")
