"""The registry behind the op table: how a block of ``ops.py`` becomes an ``Op``, a Tensor method and tests.

``@op(method=..., operator=...)`` reads a block (a class used as a namespace:
``forward``, ``vjp``, ``samples``, optionally ``composite``), makes an ``Op``,
stores it in ``OPS`` and binds ``Tensor.<method>`` and the operators. Running a
block again (an edited notebook cell) replaces its op; a different block that
takes a name already in use is an error. ``ops.py`` and ``fused.py`` hold the
blocks; the tests walk ``OPS``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .tensor import Tensor
from .tensor import apply as _apply  # (a module global, so benchmarks can wrap it)


@dataclass
class Sample:
    """Inputs for the finite-difference tests of one op.

    Each entry of ``inputs`` is a shape (drawn at random, float64) or a ready
    ndarray (used as is; boolean and integer arrays are not differentiated).
    ``domain=(lo, hi)`` draws uniformly from that interval instead of N(0, 1),
    for ops defined only there (log on positives, say).
    """

    inputs: tuple
    params: dict = field(default_factory=dict)
    domain: tuple | None = None

    def arrays(self, rng: np.random.Generator) -> list[np.ndarray]:
        out = []
        for spec in self.inputs:
            if isinstance(spec, np.ndarray):
                out.append(spec.copy())
            elif self.domain is not None:
                out.append(rng.uniform(*self.domain, size=spec))
            else:
                out.append(rng.standard_normal(spec))
        return out


def sample(*inputs, domain=None, **params) -> Sample:
    """Shorthand: ``sample((3, 4), (4,), axis=0)``."""
    return Sample(inputs, params, domain)


@dataclass
class Op:
    """One primitive: its forward on ndarrays, its VJP on Tensors, its test samples.

    ``composite`` (fused ops only): the same function written with core ops, on
    Tensors; ``minigrad.composite_mode()`` runs it instead of the op.
    """

    name: str
    forward: Callable
    vjp: Callable
    samples: list[Sample]
    doc: str = ""
    method: str | None = None  # bind as Tensor.<method>
    operator: str | None = None  # bind as Tensor.__<op>__ and __r<op>__
    gradgrad: bool = True  # False only where a second derivative is meaningless
    composite: Callable | None = None
    origin: str = ""  # module and name of the block that defined it: running that block again replaces it

    def __call__(self, *inputs, **params):
        return _apply(self, *inputs, **params)

    def __repr__(self) -> str:
        return f"<op {self.name}>"


OPS: dict[str, Op] = {}


def op(method: str | None = None, operator: str | None = None, gradgrad: bool = True):
    """Class decorator that turns one block into an ``Op``, registers it and binds its Tensor method.

    Running the same block again (a notebook cell, edited) replaces the op and
    rebinds its method: a block is known by its origin, module and qualified
    name (``__main__.softplus`` in a notebook). A different block that takes an
    op name, a Tensor method or an operator already in use is an error naming
    both blocks.
    """

    def register(block) -> Op:
        name = block.__name__
        origin = f"{block.__module__}.{block.__qualname__}"
        for part in ("forward", "vjp"):
            if not callable(getattr(block, part, None)):
                raise TypeError(f"op {name!r}: the block needs a {part}() function")
        previous = OPS.get(name)
        if previous is not None and previous.origin != origin:
            raise ValueError(f"op {name!r} is already registered by {previous.origin}, so {origin} cannot take "
                             f"its name: rename the class (the op takes the class's name), or call "
                             f"minigrad.ops.unregister({name!r}) first if you mean to replace it")
        for attribute in _attributes(method, operator):
            holder = _bound_by(attribute)
            if holder is not None and (holder is _TENSOR_OWN or holder.origin != origin):
                owner = "one of Tensor's own methods" if holder is _TENSOR_OWN else \
                    f"bound by op {holder.name!r} ({holder.origin}); unregister({holder.name!r}) frees it"
                raise ValueError(f"op {name!r} ({origin}): Tensor.{attribute} is already {owner}. "
                                 f"Pick another method= / operator= for this op")
        new = Op(name, block.forward, block.vjp, list(getattr(block, "samples", [])),
                 inspect.cleandoc(block.__doc__ or ""), method, operator, gradgrad,
                 getattr(block, "composite", None), origin)
        if previous is not None:
            _unbind(previous)  # the edited block may bind a different method, or none
        OPS[name] = new
        _bind(new)
        return new

    return register


def unregister(name: str) -> Op:
    """Remove op ``name`` from the table and its method and operators from ``Tensor``; returns the op.

    For notebooks and tests that define ops of their own and want them gone again.
    """
    if name not in OPS:
        raise KeyError(f"unregister: there is no op {name!r} in the table")
    removed = OPS.pop(name)
    _unbind(removed)
    return removed


def _attributes(method: str | None, operator: str | None) -> list[str]:
    """The Tensor attributes an op binds: its method, and ``__<op>__``/``__r<op>__`` for an operator."""
    return ([method] if method else []) + ([f"__{operator}__", f"__r{operator}__"] if operator else [])


_TENSOR_OWN = object()  # what _bound_by returns for a Tensor method no op bound (float, reshape...)


def _bound_by(attribute: str):
    """The op that bound ``Tensor.<attribute>``, ``_TENSOR_OWN`` if Tensor has it otherwise, None if free."""
    if attribute not in vars(Tensor):
        return None
    return getattr(vars(Tensor)[attribute], "_bound_by_op", _TENSOR_OWN)


def _bind(op: Op) -> None:
    """Give ``Tensor`` the op's method (``x.sum(axis=0)``) and operators (``a + b``, ``2 + a``)."""
    bound = {}
    if op.method:
        bound[op.method] = _method(op)
    if op.operator:
        bound[f"__{op.operator}__"] = lambda self, other: _apply(op, self, other)
        bound[f"__r{op.operator}__"] = lambda self, other: _apply(op, other, self)
    for attribute, function in bound.items():
        function._bound_by_op = op  # so a re-run of the block may rebind it, and another block may not
        setattr(Tensor, attribute, function)


def _unbind(op: Op) -> None:
    """Take the op's method and operators off ``Tensor`` (those it bound itself, nothing else)."""
    for attribute in _attributes(op.method, op.operator):
        if getattr(vars(Tensor).get(attribute), "_bound_by_op", None) is op:
            delattr(Tensor, attribute)


def _method(op: Op):
    """A Tensor method for ``op``: the tensor is the first input; the op's parameters may come positionally.

    Its signature is the forward's, with the parameters made positional-or-keyword,
    so ``help(Tensor.sum)`` shows ``(self, axis=None, keepdims=False)``.
    """
    signature = inspect.signature(op.forward)
    params = list(signature.parameters.values())
    takes_many = any(p.kind == p.VAR_POSITIONAL for p in params)  # (*inputs: every argument is a tensor)
    n_tensors = len([p for p in params if p.kind == p.POSITIONAL_OR_KEYWORD])  # (the builtin sum is an op here)
    names = [p.name for p in params if p.kind == p.KEYWORD_ONLY]

    def method(self, *args, **kwargs):
        if takes_many:
            return _apply(op, self, *args, **kwargs)
        tensors, extra = args[: n_tensors - 1], args[n_tensors - 1:]
        if len(extra) > len(names):
            raise TypeError(f"{op.method}() takes at most {len(names)} parameter(s) after its tensor inputs "
                            f"({', '.join(names) or 'none'}), got {len(extra)}")
        kwargs.update(zip(names, extra))
        return _apply(op, self, *tensors, **kwargs)

    shown = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    for p in params[1:]:
        shown.append(p if takes_many or p.kind != p.KEYWORD_ONLY else p.replace(kind=p.POSITIONAL_OR_KEYWORD))
    method.__signature__ = signature.replace(parameters=shown, return_annotation="Tensor")
    method.__name__ = method.__qualname__ = op.method
    method.__doc__ = op.doc
    return method
