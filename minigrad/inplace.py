"""In-place ops, PyTorch's rules: ``w -= lr * w.grad``, ``out += b``, ``x[i] = v``, ``masked_fill_``, ``zero_()``...

Without ``__isub__``, Python runs ``w -= v`` as ``w = w - v``: the name is bound to
a new tensor and the model's parameter is left as it was, so the manual training
loop every tutorial writes first would silently do nothing. Here each writes the
tensor's array in place, keeping its identity, ``.grad`` and dtype (a value is
cast to it when the cast is of the same kind; a float into an integer tensor is
refused, as in PyTorch), and bumps its storage's version counter (``versions.py``),
so backward refuses a node that read the old values (``autograd/contract.py``).

Where a gradient is at stake (grad mode on, and the tensor or the value requires
grad) the write is an op of the graph, as in PyTorch: ``out = x @ W; out += b``
computes ``add(out, b)`` with the op table's ``add``, writes the result into
``out``'s array, and moves ``out``'s node onto it. The node ``out`` had is kept by
a new tensor (``out._before``), which the ops that used ``out`` earlier still
read (``autograd/freed.inputs_of``). An op whose VJP reads the old values
(``out *= w``: ``mul`` reads both inputs) is given a copy of them, as PyTorch
saves the original. A view ``out[i]`` written in place writes ``out[i] = ...``
on its base, so the base's node sees it too.

Refused where PyTorch refuses, with what to write instead: a leaf that requires
grad (a parameter) outside ``no_grad()``, or a view of one.
"""

from __future__ import annotations

import numpy as np

from .modes import state
from .tensor import OpError, Tensor
from .versions import bump, owner

_UFUNCS = {"+=": np.add, "-=": np.subtract, "*=": np.multiply, "/=": np.true_divide}
_OPS = {"+=": "add", "-=": "sub", "*=": "mul", "/=": "div"}


def update(t: Tensor, what: str, other) -> Tensor:
    """``t += other`` (``what`` names the operator) in place; returns ``t``, as Python's ``+=`` needs."""
    ufunc = _UFUNCS[what]
    return _write(t, what, lambda a, v: ufunc(a, v, out=a, casting="same_kind"), _OPS[what], other)


def setitem(t: Tensor, index, value) -> None:
    """``t[index] = value`` in place: NumPy's indexing, Tensors and lists in the index taken as arrays."""
    index = tuple(map(_index_part, index)) if isinstance(index, tuple) else _index_part(index)

    def put(a, v):
        dtype = np.result_type(a, v)
        if not np.can_cast(dtype, a.dtype, casting="same_kind"):
            raise TypeError(f"cannot cast {dtype} to {a.dtype}")
        a[index] = v

    _write(t, "x[index] = value", put, "setitem", value, index=index)


def zero(t: Tensor) -> Tensor:
    """Every element of ``t`` set to 0 in place."""
    return _write(t, "zero_()", lambda a, v: a.fill(0), "setitem", 0, index=...)


def fill(t: Tensor, value) -> Tensor:
    """Every element of ``t`` set to ``value`` in place."""
    return _write(t, "fill_()", lambda a, v: np.copyto(a, v, casting="same_kind"), "setitem", value, index=...)


def copy(t: Tensor, src) -> Tensor:
    """``t.copy_(src)``: ``src``'s values (broadcast to ``t``'s shape, cast to its dtype) written into ``t``.

    As PyTorch's: the cast is any cast (a float into an integer tensor truncates),
    and it writes through to every tensor sharing ``t``'s storage, so
    ``sd = model.state_dict(); sd[k].copy_(w)`` (under ``no_grad``) loads ``w`` into the model.
    """
    return _write(t, "copy_()", lambda a, v: np.copyto(a, v, casting="unsafe"), "setitem", src, index=...)


def masked_fill(t: Tensor, mask, value) -> Tensor:
    """``t.masked_fill_(mask, value)``: ``value`` written where the boolean ``mask`` (broadcast) is True."""
    mask = np.asarray(mask.data if isinstance(mask, Tensor) else mask, dtype=bool)
    return _write(t, "masked_fill_()", lambda a, v: np.copyto(a, v, casting="same_kind", where=mask),
                  "masked_fill", mask, value=value)


def clamp(t: Tensor, lo=None, hi=None) -> Tensor:
    """``t.clamp_(min, max)``: every element limited to [lo, hi] (either may be None) in place."""
    return _write(t, "clamp_()", lambda a, v: np.clip(a, lo, hi, out=a), "clip", None, lo=lo, hi=hi)


def _index_part(part):
    if isinstance(part, Tensor):
        return part.data
    return np.asarray(part) if isinstance(part, list) else part


def _write(t: Tensor, what: str, write, op: str, other, **params) -> Tensor:
    """Write ``t`` in place: ``write(t's array, value)`` outside the graph, else ``op`` recorded (``_in_graph``)."""
    if state.grad_enabled and (t.requires_grad or (isinstance(other, Tensor) and other.requires_grad)):
        return _in_graph(t, what, op, other, params)
    value = other.data if isinstance(other, Tensor) else other
    try:
        write(t.data, value)
    except (TypeError, ValueError) as err:  # (NumPy's UFuncTypeError is a TypeError)
        kind = value.dtype if isinstance(value, np.ndarray | np.generic) else type(value).__name__
        shape = f" shape {np.shape(value)}" if np.ndim(value) else ""
        raise (TypeError if isinstance(err, TypeError) else OpError)(
            f"{what}: cannot write a {kind}{shape} value into this tensor ({t.shape} {t.dtype}) in place: {err}. "
            f"An in-place update keeps the tensor's shape and dtype (a float value into an integer tensor is "
            f"refused, as in PyTorch); write {_instead(what)} for a new tensor") from None
    bump(t, f"`{what}`")
    return t


def _instead(what: str) -> str:
    op = what[0] if len(what) == 2 else None  # "-" for "-=", for the hints
    return f"x = x {op} v" if op else "x = src.clone() (a new tensor)" if what == "copy_()" else \
        "a new tensor (x.masked_fill(mask, v), mg.where(mask, v, x))"


def _in_graph(t: Tensor, what: str, op_name: str, other, params: dict) -> Tensor:
    """``t``'s new value as the op ``op_name`` of the graph, written into ``t``'s array; ``t`` takes its node."""
    from .registry import OPS, apply, record  # (the op table is built on Tensor, and on this file)

    base = _viewed(t)
    if t._op is None and t.requires_grad or (base is not None and base._op is None and base.requires_grad):
        which = "a tensor" if base is None else f"a view (made by '{t._op.name}') of a tensor"
        raise RuntimeError(f"{what} on {which} that requires grad (shape {t.shape} {t.dtype}), outside "
                           f"no_grad(): a leaf, such as a parameter, whose change could not be differentiated "
                           f"(PyTorch refuses it too). For an update such as an optimizer step, do it under `with "
                           f"mg.no_grad():`; for a new value in the graph write {_instead(what)} instead")
    if base is not None and t._op.name != "getitem":
        raise RuntimeError(f"{what} on a view made by '{t._op.name}' of a tensor in the graph: minigrad records an "
                           f"in-place op on a view only for x[index] views (written into the base as x[index] = "
                           f"...). Write the op on the base, or on a copy: v = v.clone() first")
    op = OPS[op_name]
    old = Tensor._wrap(t._data)  # the tensor t was: its storage, its node (read by the ops that used t so far)
    old.requires_grad, old.name, old._before = t.requires_grad, t.name, t._before
    old._op, old._inputs, old._params, old._saved = t._op, t._inputs, t._params, t._saved
    old._scope, old._vjp_depth, old._made_at = t._scope, t._vjp_depth, t._made_at
    # An op whose VJP reads the old values (out *= w) gets a copy of them, as PyTorch saves the original.
    first = old.clone() if _reads_first(op, (None, old, other)) else old
    new = apply(op, first, *([] if other is None else [old if other is t else other]), **params)
    if new.shape != t.shape or not np.can_cast(new.dtype, t.dtype, casting="same_kind"):
        raise OpError(f"{what}: the result has shape {new.shape} and dtype {new.dtype}, but an in-place op keeps "
                      f"the tensor's shape {t.shape} and dtype {t.dtype}; write {_instead(what)} for a new tensor")
    if base is not None:  # a view x[index] of a tensor in the graph: written on the base, x[index] = new
        setitem(base, t._params["index"], new)
        new = apply(OPS["getitem"], base, index=t._params["index"])  # t is base[index] again, as its node says
    else:
        np.copyto(t._data, new._data, casting="unsafe")
        bump(t, f"`{what}`", graph=True)
    record(t, new._op, new._inputs, new._params, new._saved)  # dated after the write: it reads the new values
    t._before = old
    return t


def _reads_first(op, nodes) -> bool:
    """Whether ``op``'s VJP reads its first input (``op.saves``), given what requires grad among ``nodes``."""
    for s in op.saves:
        s, by = s if type(s) is tuple else (s, ())
        if (s == 1 or type(s) is slice) and (not by or any(getattr(nodes[p], "requires_grad", False) for p in by)):
            return True
    return False


def _viewed(t: Tensor) -> Tensor | None:
    """The tensor ``t`` is a view of (its op's input over the same storage, another array), or None.

    (After an in-place op, ``t``'s input is the tensor it was: the same array, not a view.)
    """
    x = t._inputs[0] if t._op is not None and t._inputs else None
    return x if x is not None and x._data is not t._data and owner(x._data) is owner(t._data) else None
