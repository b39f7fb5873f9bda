"""Backward's contract, checked where backward relies on it, with errors that name the culprit.

Three things a wrong gradient could otherwise come from, silently:

* **the arguments** of ``backward`` and ``grad``, checked as PyTorch checks them:
  Tensors (one, or a list), outputs that require grad, one ``gradient=`` per output;
* **an array a VJP reads, written in place** after its op ran (a version counter
  moved: ``versions.py``): refused before any gradient is written, naming the op,
  the tensor and the writer;
* **what a VJP returns**: one gradient per input (the tuple comma), of the input's
  shape or one it broadcasts to, made with Tensor ops (not ``np.cos(x)``). Checked
  only when backward's cheap test on the result fails, so a correct VJP pays nothing.
"""

from __future__ import annotations

import linecache
import traceback

import numpy as np

from ..modes import state
from ..tensor import NumpyOnTensorError, Tensor
from ..versions import version, writes
from .anomaly import AnomalyError
from .freed import inputs_of


def tensors_given(who: str, what: str, given) -> list[Tensor]:
    """``given`` (one Tensor, or a list or tuple of them) as a list; anything else is a TypeError naming it."""
    items = [given] if isinstance(given, Tensor) else list(given) if isinstance(given, list | tuple) else None
    if items is None or not items:
        raise TypeError(f"{who}: {what} must be a Tensor or a non-empty list of Tensors, got "
                        f"{type(given).__name__ if items is None else 'an empty ' + type(given).__name__}")
    for i, t in enumerate(items):
        if not isinstance(t, Tensor):
            raise TypeError(f"{who}: {what}[{i}] is a {type(t).__name__}, not a Tensor")
    return items


def one_per_output(who: str, what: str, outputs: list, given, single: bool) -> list:
    """The weights ``given`` for ``outputs``, one each (None: all None); a count that differs is an error."""
    if given is None:
        return [None] * len(outputs)
    if isinstance(given, Tensor | np.ndarray) or not isinstance(given, list | tuple):
        if single or len(outputs) == 1:
            return [given]
        raise TypeError(f"{who}: {what} must be a list with one entry per output ({len(outputs)}), "
                        f"got one {type(given).__name__}")
    if len(given) != len(outputs):
        raise ValueError(f"{who}: {what} has {len(given)} entries but there are {len(outputs)} outputs; give one "
                         f"per output (None for a scalar output)")
    return list(given)


def check_roots(roots) -> None:
    """Each output backward starts from must require grad: else no graph was recorded to walk."""
    for r in roots:
        if not r.requires_grad:
            raise RuntimeError(f"backward: the output (shape {r.shape}) does not require grad: no input it was "
                               f"computed from has requires_grad=True, or it was computed under no_grad()")


def check_unchanged(order, needed: set | None = None) -> None:
    """Refuse the graph, before backward writes any gradient, if an array a VJP reads was written after its op ran.

    ``order`` is the graph's tensors; ``needed``, for ``grad()``, the ids of the nodes
    it will run (None: all). A node made at the current clock of writes has nothing
    to check, which is every node unless something was written since the forward pass.
    What a VJP reads: the tensors its code reads the values of (``op.saves``, found by
    ``registry._reads``: ``mul`` reads both inputs, ``add`` neither, ``exp`` its output),
    and the arrays among its parameters (an index, a mask). Once an in-place op has been
    recorded (``inplace.py``), an input that is a view made before its base was written
    so, and read after, is refused too: its node no longer says how its values were made.
    """
    now = writes.count
    for t in order:
        if t._op is None or (needed is not None and id(t) not in needed) or (t._made_at == now and not writes.graph):
            continue
        nodes = (t, *inputs_of(t))
        for i, x in enumerate(nodes[1:]):  # a view of a tensor an op in the graph wrote after the view was made
            counter = version(x._data) if x._made_at < t._made_at and x._op and x._data is not t._data else None
            if counter is not None and counter.graph and x._made_at < counter.stamp <= t._made_at:
                raise RuntimeError(f"backward: input {i} of op '{t._op.name}' is a view (made by '{x._op.name}') of a "
                                   f"tensor written in place by {counter.by} in the graph after the view was made; "
                                   f"minigrad does not rebuild a view's graph: take the view after the write")
        read = [*_saved(t._op.saves, nodes), *_arrays("its parameter", t._params)] if t._made_at < now else ()
        for role, array in read:  # what t's VJP reads, if anything was written since t was made
            counter = version(array)
            if counter is not None and counter.stamp > t._made_at:
                raise RuntimeError(
                    f"backward: {role} (shape {array.shape} {array.dtype}) of op '{t._op.name}' was changed in "
                    f"place by {counter.by} after the op used it, so its gradient would be computed from the new "
                    f"values; no gradient was written. Call backward() before changing the tensor (or any view of "
                    f"it): forward, backward, then optimizer.step(); or recompute the forward pass after the change")


def _saved(saves, nodes):
    """(role, array) for each tensor of ``nodes`` = (out, *inputs) at the positions ``saves`` names."""
    for s in saves:
        s, needed_by = s if type(s) is tuple else (s, None)  # (mul's a: read only for b's gradient)
        if needed_by and not any(nodes[p].requires_grad for p in needed_by):
            continue
        for i, x in (enumerate(nodes[s], s.start) if type(s) is slice else ((s, nodes[s]),)):
            yield ("its output" if i == 0 else f"input {x.name!r}" if x.name else f"input {i - 1}"), x._data


def _arrays(role: str, value):
    """(role, array) for each array in an op's parameters (an index ``(Ellipsis, idx)`` holds one in a tuple)."""
    if isinstance(value, np.ndarray):
        yield role, value
    elif isinstance(value, dict | tuple):
        for key, v in (value.items() if isinstance(value, dict) else enumerate(value)):
            yield from _arrays(f"{role} {key!r}" if isinstance(value, dict) else role, v)


class VJPError(RuntimeError):
    """An op's VJP broke its contract; the message names the op, the input and the shapes."""


def call_vjp(t: Tensor, g: Tensor, inputs: tuple, anomaly: bool) -> tuple:
    """``t``'s op's VJP on ``g``: one gradient per input, or an error naming the op.

    Under ``detect_anomaly()`` the VJP runs with anomaly mode off (else each op inside
    it would be checked as a forward, and blamed on the user's backward() line) and
    its results are checked as a whole, blamed on the op and the line that made it.
    """
    if anomaly:
        state.anomaly = False
    try:
        grads = t._op.vjp(g, t, *inputs, **t._params)
    except NumpyOnTensorError as err:
        raise VJPError(f"backward: the VJP of op '{t._op.name}' called a NumPy function on a Tensor"
                       f"{_vjp_line(t, err)}. A VJP may use only Tensor ops (the ops in the table), so that "
                       f"backward is itself differentiable: for example x.cos(), after adding a 'cos' op if "
                       f"the table has none (docs/adding_an_op.md shows how), not np.cos(x)") from None
    except Exception as err:
        if hasattr(err, "add_note"):  # (Python 3.11+)
            err.add_note(f"(raised by the VJP of op '{t._op.name}', in backward)")
        raise
    finally:
        if anomaly:
            state.anomaly = True
    if type(grads) is not tuple or len(grads) != len(inputs):
        grads = one_per_input(t, grads)
    if anomaly:
        check_backward(t, grads)
    return grads


def _vjp_line(t: Tensor, err: BaseException) -> str:
    """' (at file:line: source)' for the line of the VJP where ``err`` was raised, if it can be found."""
    code = getattr(t._op.vjp, "__code__", None)
    lines = [line for frame, line in traceback.walk_tb(err.__traceback__) if frame.f_code is code]
    if not lines:
        return ""
    source = linecache.getline(code.co_filename, lines[-1]).strip()
    return f" (at {code.co_filename}:{lines[-1]}" + (f": {source})" if source else ")")


def _shapes(tensors) -> str:
    return ", ".join(str(x.shape) for x in tensors)


def one_per_input(t: Tensor, result) -> tuple:
    """``result`` as a tuple of one gradient per input, or a VJPError saying what the VJP returned instead."""
    n, name = len(t._inputs), t._op.name
    if isinstance(result, list) and len(result) == n:
        return tuple(result)
    if isinstance(result, tuple | list):
        raise VJPError(f"backward: the VJP of op '{name}' returned {len(result)} gradient(s) for its {n} input(s) "
                       f"(shapes {_shapes(t._inputs)}); it must return one per input, None for an input "
                       f"that has none")
    hint = (" (a one-input op returns a 1-tuple: `return (g * x,)`, with the comma)"
            if isinstance(result, Tensor) and n == 1 else _TENSOR_OPS if isinstance(result, np.ndarray) else "")
    raise VJPError(f"backward: the VJP of op '{name}' returned {_kind(result)}, not a tuple of {n} gradient(s), "
                   f"one per input (shapes {_shapes(t._inputs)}){hint}")


_TENSOR_OPS = (". Gradients are computed with Tensor ops (g * x.cos(), not g * np.cos(x.data)), so that "
               "backward can itself be differentiated")


def _kind(value) -> str:
    if isinstance(value, np.ndarray):
        return f"a NumPy array of shape {value.shape}"
    return f"a {type(value).__name__}" + (f" of shape {value.shape}" if isinstance(value, Tensor) else "")


def check_grad(t: Tensor, i: int, x: Tensor, gx) -> None:
    """Raise VJPError unless ``gx`` is a Tensor whose shape ``x``'s shape broadcasts to (so _sum_to can reduce it).

    Called only when autograd's cheap test fails: not a Tensor, or not x's shape
    (a broadcast gradient, so on every node that broadcasts: no message is built until it fails).
    """
    if not isinstance(gx, Tensor):
        raise VJPError(f"backward: the VJP of op '{t._op.name}' returned {_kind(gx)} for its input {i} "
                       f"(shape {x.shape}), not a Tensor or None{_TENSOR_OPS}")
    shape, given = x.data.shape, gx.data.shape
    lead = len(given) - len(shape)
    if lead < 0 or any(n != m and n != 1 for n, m in zip(shape, given[lead:])):
        raise VJPError(f"backward: the VJP of op '{t._op.name}' returned a gradient of shape {gx.shape} for its "
                       f"input {i}, which has shape {x.shape}; a gradient must have its input's shape, or a shape "
                       f"that input broadcasts to (backward sums it back)")


def check_backward(node, input_grads) -> None:
    """Under ``detect_anomaly()``: a NaN or Inf in a gradient is an ``AnomalyError`` naming the op and its line."""
    for i, g in enumerate(input_grads):
        if g is not None and g.dtype.kind == "f" and not np.isfinite(g.data).all():
            kind = "NaN" if np.isnan(g.data).any() else "Inf"
            where = node._trace or "<not recorded: created outside detect_anomaly(), or by a backward pass>"
            raise AnomalyError(f"detect_anomaly: the gradient of op '{node._op.name}' for its input {i} has {kind} "
                               f"(inputs {_shapes(node._inputs)}); the op was created at {where}")
