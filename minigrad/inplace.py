"""In-place updates, PyTorch's rules: ``w -= lr * w.grad``, ``x[i] = v``, ``w.grad.zero_()``, ``w.copy_(src)``.

Without ``__isub__``, Python runs ``w -= v`` as ``w = w - v``: the name is bound to
a new tensor and the model's parameter is left as it was, so the manual training
loop every tutorial writes first would silently do nothing. Here these change the
tensor's data in place, keeping its identity, ``.grad`` and dtype, wherever no
gradient is at stake:

* under ``no_grad()`` (an optimizer-style update), or on a tensor outside any
  graph (data, a running total);
* the value is cast to the tensor's dtype when that is a cast of the same kind
  (float64 into float32); a float into an integer tensor is refused, as in PyTorch.

Elsewhere they are an error saying what to write instead:

* on a tensor that requires grad while the graph is recorded: the change could
  not be recorded (``x = x - v`` makes a new tensor in the graph);
* on a tensor an op made in a recorded graph, even under ``no_grad()``: the
  backward of the ops that used it may need its value;
* with a right-hand side that requires grad, while recording.

Each update bumps the version counter of the tensor's storage (``versions.py``),
which its views share, so backward can refuse a graph that saved the tensor, or
a view of it, before the update (``autograd/contract.py``).
"""

from __future__ import annotations

import numpy as np

from .modes import state
from .tensor import OpError, Tensor
from .versions import bump

_UFUNCS = {"+=": np.add, "-=": np.subtract, "*=": np.multiply, "/=": np.true_divide}


def update(t: Tensor, what: str, other) -> Tensor:
    """``t += other`` (``what`` names the operator) in place; returns ``t``, as Python's ``+=`` needs."""
    ufunc = _UFUNCS[what]
    return _write(t, what, lambda a, v: ufunc(a, v, out=a, casting="same_kind"), other)


def setitem(t: Tensor, index, value) -> None:
    """``t[index] = value`` in place: NumPy's indexing, Tensors and lists in the index taken as arrays."""
    index = tuple(map(_index_part, index)) if isinstance(index, tuple) else _index_part(index)

    def put(a, v):
        dtype = np.result_type(a, v)
        if not np.can_cast(dtype, a.dtype, casting="same_kind"):
            raise TypeError(f"cannot cast {dtype} to {a.dtype}")
        a[index] = v

    _write(t, "x[index] = value", put, value)


def zero(t: Tensor) -> Tensor:
    """Every element of ``t`` set to 0 in place."""
    return _write(t, "zero_()", lambda a, v: a.fill(0), None)


def copy(t: Tensor, src) -> Tensor:
    """``t.copy_(src)``: ``src``'s values (broadcast to ``t``'s shape, cast to its dtype) written into ``t``.

    As PyTorch's: the cast is any cast (a float into an integer tensor truncates),
    and under ``no_grad`` it writes through to every tensor sharing ``t``'s storage,
    so ``sd = model.state_dict(); sd[k].copy_(w)`` loads ``w`` into the model.
    """
    return _write(t, "copy_()", lambda a, v: np.copyto(a, v, casting="unsafe"), src)


def _index_part(part):
    if isinstance(part, Tensor):
        return part.data
    return np.asarray(part) if isinstance(part, list) else part


def _write(t: Tensor, what: str, write, other) -> Tensor:
    """Check that ``what`` may change ``t`` in place, then ``write(t.data, value)`` and bump ``t``'s version."""
    op = what[0] if len(what) == 2 else None  # "-" for "-=", for the hints
    instead = f"x = x {op} v" if op else "x = src.clone() (a new tensor)" if what == "copy_()" else \
        "a new tensor (x.masked_fill(mask, v), mg.where(mask, v, x))"
    if t._op is not None:
        raise RuntimeError(f"{what}: this tensor (shape {t.shape} {t.dtype}) was made by op '{t._op.name}' in a "
                           f"recorded graph, whose backward may need its value, so minigrad does not change it in "
                           f"place. Write {instead} instead")
    if state.grad_enabled and t.requires_grad:
        raise RuntimeError(f"{what} on a tensor that requires grad (shape {t.shape} {t.dtype}), outside no_grad(): "
                           f"an in-place change to it cannot be recorded. For an update such as an optimizer step, "
                           f"do it under `with mg.no_grad():`; for a new value in the graph write {instead}")
    if state.grad_enabled and isinstance(other, Tensor) and other.requires_grad:
        raise RuntimeError(f"{what}: the right-hand side requires grad, and an in-place update cannot record it. "
                           f"Write {instead} (a new tensor in the graph), or compute it under no_grad()")
    value = other.data if isinstance(other, Tensor) else other
    try:
        write(t.data, value)
    except (TypeError, ValueError) as err:  # (NumPy's UFuncTypeError is a TypeError)
        kind = value.dtype if isinstance(value, np.ndarray | np.generic) else type(value).__name__
        shape = f" shape {np.shape(value)}" if np.ndim(value) else ""
        raise (TypeError if isinstance(err, TypeError) else OpError)(
            f"{what}: cannot write a {kind}{shape} value into this tensor ({t.shape} {t.dtype}) in place: {err}. "
            f"An in-place update keeps the tensor's shape and dtype (a float value into an integer tensor is "
            f"refused, as in PyTorch); write {instead} for a new tensor") from None
    bump(t, f"`{what}`")
    return t
