"""``Function``: a differentiable function written as a forward and a backward, as ``torch.autograd.Function``.

The op table (``ops.py``) is where the engine's own primitives live: a forward
on ndarrays, a VJP in Tensor ops. ``Function`` is PyTorch's way of writing the
same thing from the outside, on Tensors::

    class Exp(mg.autograd.Function):
        @staticmethod
        def forward(ctx, x):                 # Tensors in (and any other arguments), run under no_grad
            out = x.exp()
            ctx.save_for_backward(out)       # what backward will need
            return out

        @staticmethod
        def backward(ctx, g):                # one gradient per output in, one per forward argument out
            (out,) = ctx.saved_tensors
            return g * out

    y = Exp.apply(x)

How it fits the engine: each subclass is an op (``Op``, named after the class,
so the graph pictures draw it by that name), and ``apply`` records it through
``registry.apply`` like any op of the table: the node's inputs are the Tensor
arguments, and what the forward left on ``ctx`` is the node's ``_saved``. The
op's VJP calls the class's ``backward``. So backward needs no special case, and
a backward written in Tensor ops is recorded under ``create_graph`` like any VJP:
second derivatives, ``gradcheck`` and ``gradgradcheck`` work.

A forward that returns several Tensors records one node holding them all, packed
into one flat array, and one small ``<Class>.unpack`` node per output that reads its part
back out: the engine's node has one output, and the outputs' gradients must reach
the one backward call together. ``backward`` gets zeros for an output that
received no gradient (PyTorch's default), and for outputs that do not require grad.

``ctx.save_for_backward`` remembers each tensor's version (``versions.py``):
a saved tensor written in place before backward reads it is an error naming the
class, never a gradient computed from the new values.
"""

from __future__ import annotations

import inspect
import threading

import numpy as np

from ..modes import is_grad_enabled, no_grad, set_grad_enabled
from ..registry import OPS, Op
from ..registry import apply as _record
from ..tensor import Tensor
from ..versions import owner, version, writes


class FunctionCtx:
    """What ``forward`` hands to ``backward``: the saved tensors, which inputs need a gradient, any attribute.

    ``ctx.k = 3`` keeps a number for backward, as in PyTorch; tensors go through
    ``save_for_backward`` so that their versions are checked.
    """

    def __init__(self, function: type, args: tuple):
        self._function = function
        self._tensor_args = tuple(isinstance(a, Tensor) for a in args)  # which arguments of forward are inputs
        self._saved = None  # [(tensor, its counter, its count)] in save_for_backward's order (an output: its position)
        self._non_differentiable: set[int] = set()  # ids of outputs marked non-differentiable
        self._node = None  # the recorded node, while backward runs (a saved output is read from it)
        # One bool per argument of forward: does it need a gradient (as PyTorch, read from requires_grad alone)
        self.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)

    def save_for_backward(self, *tensors) -> None:
        """Keep ``tensors`` (inputs, outputs or intermediates; None allowed) for ``backward``: ``ctx.saved_tensors``."""
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(f"{self._function.__name__}.forward: save_for_backward saves Tensors (or None), but "
                                f"argument {i} is a {type(t).__name__}: keep other values as attributes of ctx "
                                f"(ctx.name = value)")
        self._saved = [(t, None, None) if t is None else (t, owner(t._data), writes.count) for t in tensors]

    @property
    def saved_tensors(self) -> tuple:
        """The tensors given to ``save_for_backward``, each checked to be unchanged since it was saved."""
        out = []
        for i, (t, storage, clock) in enumerate(self._saved or ()):
            if isinstance(t, int):  # an output of forward (its position): read from the recorded node
                t = self._output(t)  # (with several outputs a fresh unpack: the caller's output has the storage)
                replaced = self._single and owner(t._data) is not storage
            else:
                replaced = t is not None and owner(t._data) is not storage  # t.data = ...: a new storage
            counter = None if t is None else version(storage)
            if replaced or (counter is not None and counter.stamp > clock):
                name = self._function.__name__
                by = getattr(version(t._data), "by", "an assignment to .data") if replaced else counter.by
                raise RuntimeError(
                    f"backward: {name}.backward reads saved tensor {i} (ctx.save_for_backward's argument {i}, shape "
                    f"{t.shape} {t.dtype}), which was changed in place by {by} after "
                    f"{name}.forward saved it, so its gradient would be computed from the new values. Call "
                    f"backward() before changing the tensor (or any view of it), or save a copy in forward: "
                    f"ctx.save_for_backward(x.clone())")
            out.append(t)
        return tuple(out)

    def _output(self, i: int) -> Tensor:
        """Output ``i`` of forward as the graph has it: the node, or (several outputs) a fresh unpack of it."""
        if self._node is None:
            raise RuntimeError(f"{self._function.__name__}: an output saved by forward can be read only in backward")
        return self._node if self._single else _unpack(self._function, self._node, self._layout[i])

    def mark_non_differentiable(self, *outputs) -> None:
        """Say that these outputs of forward have no gradient: they do not require grad; backward gets zeros."""
        for t in outputs:
            if not isinstance(t, Tensor):
                raise TypeError(f"{self._function.__name__}.forward: mark_non_differentiable takes output Tensors, "
                                f"got a {type(t).__name__}")
            self._non_differentiable.add(id(t))

    def mark_dirty(self, *tensors) -> None:
        """PyTorch's mark for a forward that writes its input in place: refused here, saying what to write instead."""
        raise NotImplementedError(f"{self._function.__name__}.forward: mark_dirty (a Function that writes its input "
                                  f"in place) is not supported; compute a new tensor and return it instead")

    def set_materialize_grads(self, value: bool) -> None:
        """True is what minigrad always does (zeros for an output with no gradient); False is refused."""
        if not value:
            raise NotImplementedError(f"{self._function.__name__}.forward: set_materialize_grads(False) is not "
                                      f"supported: backward always gets zeros for an output with no gradient; "
                                      f"remove the call and treat zeros as no gradient")


class Function:
    """A differentiable function: subclass it, write ``forward`` and ``backward`` as static methods, call ``.apply``.

    ``forward(ctx, *args)`` runs under ``no_grad`` on the arguments as given
    (Tensors and anything else) and returns a Tensor or a tuple of them.
    ``backward(ctx, *grads)`` gets one gradient per output and returns one per
    argument of forward: a Tensor the shape of that argument (or one that
    broadcasts to it), or None (for a number, a flag, or an input that needs none).
    Written in Tensor ops, it is itself differentiable.
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        origin = f"{cls.__module__}.{cls.__qualname__}"
        cls._op = Op(name=cls.__name__, forward=_handed_over, vjp=_call_backward, samples=[],
                     doc=inspect.cleandoc(cls.__doc__ or ""), origin=origin, block=cls,
                     saves=())  # (what backward reads is checked by ctx.saved_tensors, as PyTorch does)
        cls._unpack_op = Op(name=f"{cls.__name__}.unpack", forward=_unpack_forward, vjp=_unpack_vjp, samples=[],
                            doc=f"One output of {cls.__name__}: its part of the node's packed array.", origin=origin)

    def __call__(self, *args, **kwargs):
        name = type(self).__name__
        raise TypeError(f"{name}: a Function is not called on an instance; write {name}.apply(...), with forward and "
                        f"backward as @staticmethod (forward(ctx, ...), backward(ctx, ...))")

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError(f"{ctx._function.__name__} needs a forward: @staticmethod def forward(ctx, ...)")

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError  # overridden only by classes whose forward takes no ctx (PyTorch 2's form)

    @staticmethod
    def backward(ctx, *grad_outputs):
        name = ctx._function.__name__
        raise NotImplementedError(f"{name} needs a backward to be differentiated: @staticmethod def backward(ctx, "
                                  f"*grads) returning one gradient per argument of {name}.forward")

    @classmethod
    def apply(cls, *args, **kwargs):
        """Run ``forward`` and, when a gradient may be wanted, record it in the graph; returns forward's outputs."""
        if cls is Function:
            raise TypeError("Function.apply: subclass Function, write forward and backward, and call "
                            "YourFunction.apply(...)")
        ctx = FunctionCtx(cls, args)
        with no_grad():
            if cls.setup_context is Function.setup_context:
                result = _call_forward(cls, ctx, args, kwargs)
            else:  # forward(*args) without ctx, then setup_context(ctx, inputs, output)
                result = _call_forward(cls, None, args, kwargs)
                cls.setup_context(ctx, args, result)
        return _recorded(cls, ctx, args, result)


def _call_forward(cls, ctx, args, kwargs):
    """``cls.forward`` (with ``ctx`` first unless None); arguments that do not fit its signature are named."""
    forward = inspect.getattr_static(cls, "forward")
    given = args if ctx is None else (ctx, *args)
    try:
        inspect.signature(cls.forward).bind(*given, **kwargs)
    except TypeError as err:
        static = isinstance(forward, staticmethod | classmethod)
        hint = "" if static else " (it is not a @staticmethod: forward is called on the class, with ctx first)"
        spelled = "forward(ctx, ...)" if ctx is not None else "forward(...)"
        raise TypeError(f"{cls.__name__}.apply: {cls.__name__}.forward{inspect.signature(cls.forward)} cannot "
                        f"take the arguments given ({err}){hint}; write @staticmethod def {spelled} with one "
                        f"parameter per argument of apply") from None
    return cls.forward(*given, **kwargs)


# --------------------------------------------------------------------------------------
# Recording: the Function as a node of the graph
# --------------------------------------------------------------------------------------

_handoff = threading.local()  # forward's result, handed to registry.apply by _handed_over


def _handed_over(*arrays):
    """The op's forward, on arrays: the class's forward has already run (on Tensors); this hands over its result.

    Returns ``(output array, saved)``, as a table op's forward may: ``registry.apply``
    wraps the array as the node and keeps ``saved`` (the ctx) on it for the VJP.
    """
    result, _handoff.result = _handoff.result, None
    return result


def _record_node(op: Op, tensors, array: np.ndarray, saved, differentiable: bool) -> Tensor:
    """``registry.apply`` for an op whose output is already computed: the node, recorded if a gradient may flow."""
    _handoff.result = (array, saved)
    with set_grad_enabled(is_grad_enabled() and differentiable):
        return _record(op, *tensors)


def _recorded(cls, ctx: FunctionCtx, args: tuple, result):
    """``result`` of ``cls.forward`` as outputs recorded in the graph (one node, or one packed node and its parts)."""
    ctx._single = single = not isinstance(result, tuple | list)
    outputs = (result,) if single else tuple(result)
    for i, out in enumerate(outputs):
        if isinstance(out, np.ndarray):
            raise TypeError(f"{cls.__name__}.forward returned a NumPy array{'' if single else f' as output {i}'}; "
                            f"return a Tensor (mg.tensor(array)), computed with Tensor ops where it can be")
    tensors = [a for a in args if isinstance(a, Tensor)]
    differentiable = [isinstance(o, Tensor) and o.dtype.kind == "f" and id(o) not in ctx._non_differentiable
                      for o in outputs]
    ctx._zeros = [(o.shape, o.dtype) if isinstance(o, Tensor) else None for o in outputs]  # for outputs with no grad
    ctx._layout = layout = [None] * len(outputs)  # each differentiable output's place in the packed array
    kept = tuple(t for t, _, _ in ctx._saved or () if t is not None and all(t is not o for o in outputs))
    if single and isinstance(result, Tensor):
        made = [_record_node(cls._op, tensors, result._data, (ctx, *kept), differentiable[0])]
    else:
        parts = [o for o, d in zip(outputs, differentiable) if d]
        if not parts or not is_grad_enabled() or not any(t.requires_grad for t in tensors):
            return result  # nothing to record: forward's outputs as they are
        dtype = np.result_type(*[p.dtype for p in parts])
        start = 0
        for i, (o, d) in enumerate(zip(outputs, differentiable)):
            if d:
                layout[i] = (start, start + o._data.size, o._data.shape, o._data.dtype)
                start += o._data.size
        packed = np.concatenate([p._data.ravel().astype(dtype, copy=False) for p in parts])  # (a new array)
        node = _record_node(cls._op, tensors, packed, (ctx, *kept), True)
        made = [_unpack(cls, node, part) if part is not None else Tensor._wrap(o._data) if isinstance(o, Tensor) else o
                for o, part in zip(outputs, layout)]
    _saved_outputs(ctx, outputs, made, differentiable)
    return made[0] if single else tuple(made)


def _saved_outputs(ctx: FunctionCtx, outputs, made, differentiable) -> None:
    """A saved output becomes the output as recorded: so a second derivative flows through it, and writes are seen.

    A differentiable output is kept by its position (the ctx is held by the node,
    and holding the node's outputs too would be a cycle) and read from the node in
    backward; the version checked is that of the output the caller got.
    """
    for k, (t, _, _) in enumerate(ctx._saved or ()):
        for i, o in enumerate(outputs):
            if t is not None and t is o:
                ctx._saved[k] = (i if differentiable[i] and made[i].requires_grad else made[i], owner(made[i]._data),
                                 writes.count)
                break


def _unpack_forward(packed, *, start, stop, shape, dtype=None):
    out = packed[start:stop].reshape(shape)
    return out.astype(dtype) if dtype is not None else out.copy()  # a copy: each output has its own storage


def _unpack_vjp(g, out, packed, *, start, stop, shape, dtype=None):
    g = g.reshape(-1) if dtype is None else g.reshape(-1).astype(packed.dtype)
    return (_record(OPS["scatter_add"], g, index=slice(start, stop), shape=packed.shape),)


def _unpack(cls, node: Tensor, part) -> Tensor:
    """Output ``part`` of a node of ``cls`` with several outputs, recorded as the class's ``unpack`` op."""
    start, stop, shape, dtype = part
    return _record(cls._unpack_op, node, start=start, stop=stop, shape=shape,
                   **({} if dtype == node._data.dtype else {"dtype": dtype}))


# --------------------------------------------------------------------------------------
# Backward: the op's VJP calls the class's backward
# --------------------------------------------------------------------------------------


def _call_backward(g, out, *inputs):
    """The Function's VJP: split ``g`` into one gradient per output, call ``backward``, check what it returns."""
    ctx = out._saved[0]
    cls = ctx._function
    if ctx._single:
        grads = [g]
    else:
        grads = []
        for part, zeros in zip(ctx._layout, ctx._zeros):
            if part is None:  # an output with no gradient: zeros (PyTorch's default), None for a non-Tensor
                grads.append(None if zeros is None else Tensor._wrap(np.zeros(*zeros)))
                continue
            start, stop, shape, dtype = part
            piece = g[start:stop].reshape(shape)
            grads.append(piece if piece.dtype == dtype else piece.astype(dtype))
    ctx._node = out
    try:
        returned = cls.backward(ctx, *grads)
    finally:
        ctx._node = None
    return _per_input(cls, ctx, returned, inputs)


def _per_input(cls, ctx: FunctionCtx, returned, inputs) -> tuple:
    """``backward``'s result as one gradient per Tensor input of the node; a mismatch names the class."""
    name = cls.__name__
    n = len(ctx.needs_input_grad)
    returned = returned if isinstance(returned, tuple | list) else (returned,)
    if len(returned) < n or any(r is not None for r in returned[n:]):
        arguments = _argument_names(cls, n)
        spelled = _spelled(arguments, ctx)
        raise RuntimeError(f"backward: {name}.backward returned {len(returned)} gradient(s), but {name}.forward "
                           f"took {n} argument(s) after ctx ({arguments}); return one per argument, in order, None "
                           f"for an argument that has no gradient (a number, a flag): return {spelled}")
    grads, k = [], 0
    for i, r in enumerate(returned[:n]):
        x = inputs[k] if k < len(inputs) else None
        if not ctx._tensor_args[i]:
            if r is not None:
                raise RuntimeError(f"backward: {name}.backward returned a gradient for argument {i} of forward "
                                   f"({_argument_names(cls, n).split(', ')[i]}), which is not a Tensor; return None "
                                   f"in its place")
            continue
        k += 1
        if r is None:
            grads.append(None)
            continue
        if not isinstance(r, Tensor):
            raise RuntimeError(f"backward: {name}.backward returned a {type(r).__name__} as the gradient of "
                               f"argument {i} (shape {x.shape}); return a Tensor computed with Tensor ops (g * "
                               f"x.cos(), not np.cos(x.data)), so that backward can itself be differentiated, or None")
        shape, given = x.shape, r.shape
        lead = len(given) - len(shape)
        if lead < 0 or any(a != b and a != 1 for a, b in zip(shape, given[lead:])):
            raise RuntimeError(f"backward: {name}.backward returned a gradient of shape {r.shape} for argument "
                               f"{i} of forward, which has shape {x.shape}; a gradient has its input's shape (or "
                               f"a shape the input broadcasts to)")
        grads.append(r)
    return tuple(grads)


def _argument_names(cls, n: int) -> str:
    """The names of forward's arguments after ctx, as written (``x, constant``), for messages."""
    try:
        params = list(inspect.signature(cls.forward).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if cls.setup_context is Function.setup_context:
        names = names[1:]  # (ctx)
    names = (names + [f"argument {i}" for i in range(len(names), n)])[:n]
    return ", ".join(names)


def _spelled(arguments: str, ctx: FunctionCtx) -> str:
    """What backward should return, spelled: ``grad_x, None`` (None for an argument that is not a Tensor)."""
    names = arguments.split(", ")
    spelled = [f"grad_{a}" if tensor and " " not in a else "None" for a, tensor in zip(names, ctx._tensor_args)]
    return ", ".join(spelled) + ("," if len(names) == 1 else "")


__all__ = ["Function", "FunctionCtx"]
