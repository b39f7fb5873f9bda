"""What a VJP must return, checked where backward uses it, with errors that name the op.

Writing an op, the usual mistakes are a VJP that forgets the tuple comma,
returns the wrong number of gradients or the wrong shape, or calls NumPy on
Tensors (``np.cos(x)``, where the table's ``x.cos()`` is meant). Without these
checks each would surface later, inside whatever op trips over the result,
with no word of the VJP at fault. ``autograd`` calls them only when its cheap
test on the result fails, so a correct VJP pays almost nothing.
"""

from __future__ import annotations

import linecache

import numpy as np

from ..tensor import NumpyOnTensorError, Tensor


class VJPError(RuntimeError):
    """An op's VJP broke its contract; the message names the op, the input and the shapes."""


def vjp_failure(t: Tensor, err: Exception) -> Exception:
    """The error to raise for ``err``, raised by the VJP of ``t``'s op.

    NumPy called on a Tensor becomes a VJPError saying to use table ops; any
    other error is returned as it is, with a note naming the op (Python 3.11+).
    """
    if isinstance(err, NumpyOnTensorError):
        return VJPError(f"backward: the VJP of op '{t._op.name}' called a NumPy function on a Tensor"
                        f"{_vjp_line(t, err)}. A VJP may use only Tensor ops (the ops in the table), so that "
                        f"backward is itself differentiable: for example x.cos(), after adding a 'cos' op if "
                        f"the table has none (docs/adding_an_op.md shows how), not np.cos(x)")
    if hasattr(err, "add_note"):
        err.add_note(f"(raised by the VJP of op '{t._op.name}', in backward)")
    return err


def _vjp_line(t: Tensor, err: BaseException) -> str:
    """' (at file:line: source)' for the line of the VJP where ``err`` was raised, if it can be found."""
    code = getattr(t._op.vjp, "__code__", None)
    tb, line = err.__traceback__, None
    while tb is not None:
        if tb.tb_frame.f_code is code:
            line = tb.tb_lineno
        tb = tb.tb_next
    if line is None:
        return ""
    source = linecache.getline(code.co_filename, line).strip()
    return f" (at {code.co_filename}:{line}: {source})" if source else f" (at {code.co_filename}:{line})"


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
    (a broadcast gradient, so on every node that broadcasts: kept cheap until it fails).
    """
    if not isinstance(gx, Tensor):
        raise VJPError(f"backward: the VJP of op '{t._op.name}' returned {_kind(gx)} for its input {i} "
                       f"(shape {x.shape}), not a Tensor or None{_TENSOR_OPS}")
    shape, given = x.data.shape, gx.data.shape
    lead = len(given) - len(shape)
    if lead < 0:
        _wrong_shape(t, i, x, gx)
    for n, m in zip(shape, given[lead:]):
        if n != m and n != 1:
            _wrong_shape(t, i, x, gx)


def _wrong_shape(t: Tensor, i: int, x: Tensor, gx: Tensor) -> None:
    raise VJPError(f"backward: the VJP of op '{t._op.name}' returned a gradient of shape {gx.shape} for its input "
                   f"{i}, which has shape {x.shape}; a gradient must have its input's shape, or a shape that input "
                   f"broadcasts to (backward sums it back)")
