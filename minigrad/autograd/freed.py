"""What backward leaves of a node it frees: the graph's structure without its arrays, so it can still be drawn.

Backward frees a node by dropping its inputs, parameters and saved arrays, so
that intermediate results can be collected as soon as the pass is done with
them. Before it does, it writes a ``FreedNode`` (``remember_inputs``): a small record
that ``viz`` reads to draw a graph after ``backward()``, as micrograd's users do.
"""

from __future__ import annotations

import weakref

import numpy as np

from ..tensor import Tensor


class ArrayStub:
    """An array parameter of a freed node (a mask, an index), remembered by its shape and dtype only."""

    __slots__ = ("shape", "dtype")

    def __init__(self, array: np.ndarray):
        self.shape, self.dtype = array.shape, array.dtype

    def __repr__(self) -> str:
        return f"array{self.shape}"


def _holds_arrays(params: dict) -> bool:
    for v in params.values():
        if isinstance(v, np.ndarray | tuple):
            return True
    return False


def _without_arrays(value):
    """``value`` (a dict of params, a tuple, an array...) with arrays of more than a few numbers made stubs."""
    if isinstance(value, np.ndarray):
        return ArrayStub(value) if value.size > 4 else value
    if type(value) is tuple:
        return tuple(_without_arrays(v) for v in value)
    if type(value) is dict:
        return {k: _without_arrays(v) for k, v in value.items()}
    return value


class FreedNode:
    """What is left of a tensor's node once backward has freed it: the structure, not the arrays.

    Backward frees a node by dropping its inputs, parameters and saved arrays, so
    that intermediate results can be collected as soon as the pass is done with
    them. Before it does, it writes this record: the op, its parameters (big
    arrays replaced by their shape), shape, dtype, name and module scope, and the
    records of the inputs. The tensor itself is held only by a weak reference,
    so the record keeps no array alive; ``viz`` draws the structure from it and
    the data wherever the tensor still lives (leaves, parameters, tensors the
    user kept). A one-element tensor's value is kept (its one-element array,
    read as a Python number only when ``value`` is asked for).

    A constant of up to four numbers (the 2 in ``x * 2``) is no record: it is
    kept among ``inputs`` as itself, the Tensor (it holds no array worth freeing),
    and viz reads it as it reads any live tensor.

    A tensor's record is made once and kept in its ``_record`` slot, so a tensor
    used by two ops is one record. Nodes backward did not run (no gradient
    reached them, or ``grad()`` did not need them) are not freed, but their
    records get their inputs all the same (``remember_inputs``): while such a
    tensor lives viz reads it directly, and once the freed nodes that held it
    have let it go, the record still draws its branch.
    """

    __slots__ = ("tensor", "op", "params", "inputs", "shape", "dtype", "name", "scope", "requires_grad",
                 "vjp_depth", "_one")

    def __init__(self, t: Tensor):
        _fill(self, t)

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


def _fill(record: FreedNode, t: Tensor) -> FreedNode:
    """Write ``t``'s structure into ``record``. Backward makes one record per node, so no copies, no properties."""
    data, params = t._data, t._params  # (the array itself: .data is a property, versions.py)
    record.tensor = _ref(t)
    record.op = t._op
    record.params = params if not params or not _holds_arrays(params) else _without_arrays(params)
    record.inputs = None  # records of the inputs, once backward frees this node
    record.shape = data.shape
    record.dtype = data.dtype
    record.name = t.name
    record.scope = t._scope
    record.requires_grad = t.requires_grad
    record.vjp_depth = t._vjp_depth
    # A one-element array (owning its memory: a view would keep its base alive), read when drawn.
    record._one = None if data.size != 1 else data if data.base is None else data.copy()
    return record


def record_of(t: Tensor) -> FreedNode:
    """``t``'s record, made on first use and kept in its ``_record`` slot."""
    record = t._record
    if record is None or record.tensor() is not t:  # (a deepcopied tensor arrives with its original's record)
        record = t._record = _fill(_new(FreedNode), t)
    return record


def remember_inputs(t: Tensor) -> None:
    """Write the records of ``t``'s inputs into ``t``'s record, so its branch can be drawn once ``t`` is gone.

    A constant of a few numbers (``x * 0.5``'s 0.5) is kept as itself: it holds no array worth freeing.
    (Backward calls this once per node: ``record_of`` is written out inline.)
    """
    record = t._record
    if record is None or record.tensor() is not t:
        record = t._record = _fill(_new(FreedNode), t)
    records = []
    for x in t._inputs:
        if not x.requires_grad and x._data.size <= 4:
            records.append(x)  # a constant of a few numbers
            continue
        r = x._record
        if r is None or r.tensor() is not x:
            r = x._record = _fill(_new(FreedNode), x)
        records.append(r)
    record.inputs = tuple(records)


_new = object.__new__
_ref = weakref.ref
