"""Version counters: how backward tells that an array it needs was changed in place after the forward pass.

As in PyTorch, one counter belongs to each storage: the NumPy array that owns the
memory (a view's ``.base``). So every Tensor over it shares it without being told:
the tensor that holds the array, the views ops make of it (a slice, ``reshape``,
``.T``), ``detach()``, and the arrays the engine reads from a tensor (an index
``w[idx]`` reads ``idx``'s array, a ``where`` its mask's, ``cross_entropy`` its
targets'). Every in-place write bumps it, whoever writes: the Tensor's own
operators (``-=``, ``x[i] = v``, ``zero_()``, ``copy_()``: ``inplace.py``), an
assignment through ``.data`` (``p.data -= lr * g``), the optimizers,
``load_state_dict`` and ``nn.init``. Library code that writes an array in place calls ``bump``.

A counter remembers how often its storage was written (``count``, PyTorch's
``t._version``), and when and by what it was written last: ``stamp`` is the
value of a process-wide clock of writes (``writes``), ``by`` names the writer.
A recorded op stamps its output with the clock (``Tensor._made_at``); backward
refuses a node one of whose saved arrays was written after it was made
(``autograd/contract.py``), since its VJP would read the new values. While
nothing is written, no node has anything to check: one comparison with the clock.

This file imports nothing from the rest of minigrad.
"""

from __future__ import annotations

import weakref

import numpy as np


class _Writes:
    """The process-wide clock: how many in-place writes the process has made (read by every recorded op).

    ``graph``: whether an in-place op has been recorded in a graph yet (``out += b``).
    """

    __slots__ = ("count", "graph")

    def __init__(self):
        self.count = 0
        self.graph = False


writes = _Writes()


class Version:
    """One storage's counter: how often it was written in place, and when (``writes``) and by what last.

    ``graph``: the last write was an op of the graph (``out += b``), not a plain write.
    """

    __slots__ = ("count", "stamp", "by", "graph")

    def __init__(self):
        self.count = 0
        self.stamp = 0
        self.by = ""
        self.graph = False


_counters: dict[int, Version] = {}  # id(owning array) -> its counter, while the array lives


def owner(array: np.ndarray) -> np.ndarray:
    """The array that owns ``array``'s memory: a view's ``.base``, followed to the end."""
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


def version(array: np.ndarray) -> Version | None:
    """The counter of ``array``'s storage, None if it was never written."""
    return _counters.get(id(owner(array)))


def bump(t, by: str, graph: bool = False) -> None:
    """Record that ``t``'s storage (and so every view of it) was written in place by ``by``."""
    base = owner(t._data)
    counter = _counters.get(id(base))
    if counter is None:
        counter = _counters[id(base)] = Version()
        weakref.finalize(base, _counters.pop, id(base), None)  # forgotten with the array
    writes.count += 1
    counter.count += 1
    counter.stamp = writes.count
    counter.by = by
    counter.graph = graph
    writes.graph = writes.graph or graph


def replace_storage(t, array, by: str) -> None:
    """``t.data = array``: a new storage, stamped as written.

    A node that saved ``t`` would read the new array in backward, as if ``t``
    had been written in place; the stamp makes backward refuse it.
    """
    t._data = array
    bump(t, by)
