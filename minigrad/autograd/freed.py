"""A node's inputs as backward sees them, and what backward leaves of a node it frees.

``inputs_of(t)``: the tensors ``t``'s op read. An input changed by an in-place op
in the graph since (``out += b``: ``inplace.py``) holds a new node now; the one
``t`` read is kept in its ``_before``, and the clock of writes (``_made_at``) says which.

``free(t)``: backward frees a node by dropping its inputs, parameters and saved
arrays, so that intermediate results can be collected as soon as the pass is done
with them. Before it does, it writes a ``FreedNode`` (``remember_inputs``): a small
record that ``viz`` reads to draw a graph after ``backward()``, as micrograd's users do.
"""

from __future__ import annotations

import weakref

import numpy as np

from ..tensor import Tensor

FREED = ("backward: this graph was already freed by an earlier backward(). Call backward(retain_graph=True) "
         "the first time if you need to backward through it again.")


def inputs_of(t: Tensor) -> tuple:
    """``t``'s inputs as they were when its op ran (an input rebased by a later in-place op: its ``_before``)."""
    inputs = t._inputs
    if inputs is None:
        raise RuntimeError(FREED)
    for x in inputs:
        if x._made_at > t._made_at:  # (an input is made before its use, unless an in-place op rebased it since)
            return tuple(_as_of(x, t._made_at) for x in inputs)
    return inputs


def _as_of(x: Tensor, when: int) -> Tensor:
    while x._made_at > when:
        x = x._before
    return x


def free(t: Tensor, inputs: tuple) -> None:
    """Drop ``t``'s inputs, parameters and saved arrays, keeping its structure in its record."""
    remember_inputs(t, inputs)
    t._inputs = t._params = t._saved = None


class ArrayStub:
    """An array parameter of a freed node (a mask, an index), remembered by its shape and dtype only."""

    __slots__ = ("shape", "dtype")

    def __init__(self, array: np.ndarray):
        self.shape, self.dtype = array.shape, array.dtype

    def __repr__(self) -> str:
        return f"array{self.shape}"


def _without_arrays(value):
    """``value`` (a dict of params, a tuple, an array...) with arrays of more than a few numbers made stubs."""
    if isinstance(value, np.ndarray):
        return ArrayStub(value) if value.size > 4 else value
    if type(value) is tuple:
        return tuple(_without_arrays(v) for v in value)
    if type(value) is dict and value:
        return {k: _without_arrays(v) for k, v in value.items()}
    return value


class FreedNode:
    """What is left of a tensor's node once backward has freed it: the structure, not the arrays.

    The op, its parameters (big arrays replaced by their shape), shape, dtype, name,
    module scope and the records of the inputs; a one-element tensor's value. The
    tensor is held by a weak reference, so the record keeps no array alive; ``viz``
    draws the structure from it, and the data wherever the tensor still lives. A
    constant of up to four numbers (the 2 in ``x * 2``) is kept among ``inputs`` as
    itself. Made once per tensor (its ``_record`` slot); a node backward did not run
    gets the records of its inputs too, so its branch can be drawn once it is gone.
    """

    __slots__ = ("tensor", "op", "params", "inputs", "shape", "dtype", "name", "scope", "requires_grad",
                 "vjp_depth", "_one")

    def __init__(self, t: Tensor):
        data = t._data  # (the array itself: .data is a property, versions.py)
        self.tensor, self.op, self.params, self.inputs = weakref.ref(t), t._op, _without_arrays(t._params), None
        self.shape, self.dtype, self.name, self.scope = data.shape, data.dtype, t.name, t._scope
        self.requires_grad, self.vjp_depth = t.requires_grad, t._vjp_depth
        # A one-element array (owning its memory: a view would keep its base alive), read when drawn.
        self._one = None if data.size != 1 else data if data.base is None else data.copy()

    def __getstate__(self):
        """Pickled without the weak reference (a model pickled after backward carries its parameters' records)."""
        return {name: getattr(self, name) for name in FreedNode.__slots__ if name != "tensor"}

    def __setstate__(self, state):
        for name, value in state.items():
            setattr(self, name, value)
        self.tensor = _gone

    @property
    def value(self):
        """The tensor's value as a Python number, for a one-element tensor; else None."""
        return None if self._one is None else self._one.item()


def _gone():
    """An unpickled record's ``tensor()``: the tensor it described is not in this process."""
    return None


def record_of(t: Tensor) -> FreedNode:
    """``t``'s record, made on first use and kept in its ``_record`` slot."""
    record = t._record
    if record is None or record.tensor() is not t:  # (a deepcopied tensor arrives with its original's record)
        record = t._record = FreedNode(t)
    return record


def remember_inputs(t: Tensor, inputs: tuple | None = None) -> None:
    """Write the records of ``t``'s inputs into ``t``'s record, so its branch can be drawn once ``t`` is gone.

    A constant of a few numbers (``x * 0.5``'s 0.5) is kept as itself: it holds no array worth freeing.
    """
    records = []
    for x in inputs_of(t) if inputs is None else inputs:
        records.append(x if not x.requires_grad and x._data.size <= 4 else record_of(x))
    record_of(t).inputs = tuple(records)
