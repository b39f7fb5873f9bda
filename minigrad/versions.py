"""Version counters: how backward tells that an array it needs was changed in place after the forward pass.

As in PyTorch, one counter belongs to each storage and is shared by every Tensor
over it: the tensor that holds the array, the views ops make of it (a slice,
``reshape``, ``transpose``, ``.T``, under ``no_grad`` or not: ``registry.apply``
shares the counter when an op returns a NumPy view of its input) and ``detach()``.
Every in-place write bumps it, whoever writes: the Tensor's own operators
(``-=``, ``x[i] = v``, ``zero_()``, ``copy_()``: ``inplace.py``), an assignment
through ``.data`` (``p.data -= lr * g``), the optimizers, ``load_state_dict``
and ``nn.init``. Library code that writes an array in place calls ``bump``.

A counter remembers how often its storage was written (``count``, PyTorch's
``t._version``), and when and by what it was written last: ``stamp`` is the
value of a process-wide clock of writes (``writes``), ``by`` names the writer.
A recorded op stamps its output with the clock (``Tensor._made_at``); backward
refuses a node any of whose tensors was written after it was made
(``autograd/contract.py``), since its VJP would read the new values. While
nothing is written, no node has anything to check: one comparison with the clock.

This file imports nothing from the rest of minigrad.
"""

from __future__ import annotations


class _Writes:
    """The process-wide clock: how many in-place writes the process has made (read by every recorded op)."""

    __slots__ = ("count",)

    def __init__(self):
        self.count = 0


writes = _Writes()


class Version:
    """One storage's counter: how often it was written in place, and when (``writes``) and by what last."""

    __slots__ = ("count", "stamp", "by")

    def __init__(self):
        self.count = 0
        self.stamp = 0
        self.by = ""


def version_of(t) -> Version:
    """``t``'s counter, made when first needed (most tensors are never written or viewed)."""
    version = t._counter
    if version is None:
        version = t._counter = Version()
    return version


def bump(t, by: str) -> None:
    """Record that ``t``'s storage (and so every view of it) was written in place by ``by``."""
    version = version_of(t)
    writes.count += 1
    version.count += 1
    version.stamp = writes.count
    version.by = by


def share(view, base) -> None:
    """``view`` is a view of ``base``'s array: they share one storage, so one counter (made now if need be)."""
    version = base._counter
    if version is None:
        version = base._counter = Version()
    view._counter = version


def replace_storage(t, array, by: str) -> None:
    """``t.data = array``: a new storage, so a new counter, stamped as written.

    A node that saved ``t`` would read the new array in backward, as if ``t``
    had been written in place; the stamp makes backward refuse it.
    """
    t._data = array
    t._counter = None
    bump(t, by)
