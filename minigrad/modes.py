"""Global switches the engine reads on every op: grad mode, composite mode, and the module scope.

* **Grad mode** (``no_grad``, ``enable_grad``, ``set_grad_enabled``): whether ops
  record the graph that backward walks. Off for inference and optimizer updates.
* **Composite mode** (``composite_mode``): whether the fused primitives of
  ``fused/`` run as their composites (built from the core ops of ``ops.py``),
  and the speed kernels of ``kernels/`` as the plain NumPy they equal. For
  reading and drawing graphs op by op, and for checking a new fused op.
* **Module scope**: which ``nn.Module`` calls are running, so that ``viz`` can
  draw the ops each call made as one cluster (one per call: an RNN cell called
  at every time step is drawn once per step).
* **VJP depth**: 0 while the forward pass runs; n while backward pass n records
  its VJPs (``create_graph=True``), so ``viz`` can tell the two apart.

Each is per thread. This file imports nothing from the rest of minigrad.
"""

from __future__ import annotations

import functools
import itertools
import threading
from typing import NamedTuple


class _State(threading.local):
    grad_enabled = True
    composite = False
    anomaly = False
    scope: tuple = ()  # the ModuleCalls whose forward is running, outermost first (for viz)
    vjp_depth = 0  # recorded on every op's result: which backward pass (if any) made it (for viz)

    def __init__(self):
        self.switched: dict[str, int] = {}  # field -> how often a _Switch has set it, in this thread


state = _State()


class _Switch:
    """A mode that is set on entering a ``with`` block (or a decorated function) and restored on leaving it.

    Leaving restores what was there when the block was *entered*, so one object
    may be entered again, nested or later. ``set_grad_enabled(mode)`` and
    ``composite_mode(mode)`` also take effect when called, as in PyTorch, so a
    plain call works as a switch; a ``with`` straight after the call (nothing
    switched the mode in between) then restores what was there before the call.
    """

    _field: str  # the attribute of ``state`` this switch sets
    _immediate = False  # True: calling the class sets the mode (set_grad_enabled, composite_mode)

    def __init__(self, mode: bool):
        self.mode = bool(mode)
        self._prev: list[bool] = []  # a stack, so one object can be entered again while active
        self._before = None  # the mode before the call switched it, until a with block (or decorating) takes it
        self._switched_at = None  # state.switched[field] just after the call switched it
        if self._immediate:
            self._before = getattr(state, self._field)
            self._set(self.mode)
            self._switched_at = state.switched[self._field]

    def _set(self, mode: bool) -> None:
        setattr(state, self._field, mode)
        state.switched[self._field] = state.switched.get(self._field, 0) + 1

    def _take_before(self):
        """The mode before the call, if nothing has switched the mode since the call; else None."""
        before, self._before = self._before, None
        return before if state.switched.get(self._field) == self._switched_at else None

    def __enter__(self):
        before = self._take_before()  # entered straight after the call that switched it: restore the old mode
        self._prev.append(getattr(state, self._field) if before is None else before)
        self._set(self.mode)

    def __exit__(self, *exc):
        self._set(self._prev.pop())

    def __call__(self, fn):
        before = self._take_before()
        if before is not None:  # as a decorator it holds only while fn runs: undo the call's switch
            self._set(before)

        # A fresh context per call: one shared object would mix up the saved modes of
        # a decorated function that recurses or runs in two threads at once.
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self._fresh():
                return fn(*args, **kwargs)

        return wrapper

    def _fresh(self) -> _Switch:
        return type(self)(self.mode)


class set_grad_enabled(_Switch):
    """Turn graph recording on or off: called (``mg.set_grad_enabled(False)``), in a ``with`` block, or decorating.

    As in PyTorch, the call itself switches the mode; a ``with`` block or a
    decorated function restores what was there before.
    """

    _field = "grad_enabled"
    _immediate = True

    def _fresh(self) -> _Switch:
        return set_grad_enabled(self.mode)  # (no_grad() and enable_grad() take no mode)


class no_grad(set_grad_enabled):
    """Record no graph (inference, optimizer updates): ``with no_grad():`` or ``@no_grad()``."""

    _immediate = False  # (no_grad() on its own changes nothing, as in PyTorch)

    def __init__(self):
        super().__init__(False)


class inference_mode(set_grad_enabled):
    """PyTorch's ``inference_mode`` (``with torch.inference_mode():``, ``@torch.inference_mode()``): here
    ``no_grad``'s meaning, as its results are the same; ``inference_mode(False)`` records the graph, as
    PyTorch's does (inside ``no_grad`` too)."""

    _immediate = False

    def __init__(self, mode: bool = True):
        super().__init__(not mode)

    def _fresh(self) -> inference_mode:
        return type(self)(not self.mode)


class enable_grad(set_grad_enabled):
    """Record the graph again inside a ``no_grad`` region."""

    _immediate = False

    def __init__(self):
        super().__init__(True)


def is_grad_enabled() -> bool:
    return state.grad_enabled


class composite_mode(_Switch):
    """Run every fused primitive as its composite of core ops, and every kernel as its plain NumPy form.

    As a context manager or decorator it holds for the block::

        with mg.composite_mode():
            loss = model(x, targets)   # layer_norm is mean, sub, var, sqrt, div... in the graph

    Called on its own, ``mg.composite_mode(True)`` switches it on until
    ``mg.composite_mode(False)`` (like ``torch.set_grad_enabled``). Results agree
    with the fused run to rounding (the tests hold them to it); it is slower.
    """

    _field = "composite"
    _immediate = True

    def __init__(self, mode: bool = True):
        super().__init__(mode)


def is_composite_mode() -> bool:
    return state.composite


class ModuleCall(NamedTuple):
    """One call of a module: what an op's ``_scope`` lists, so two calls of one module stay apart."""

    module: object
    number: int  # counts all module calls of the process: unique, and later calls have larger numbers


_call_numbers = itertools.count()


class module_scope:
    """Mark ops run inside ``module``'s forward (nn.Module does this); viz draws each call as a cluster.

    A class rather than a generator-based context manager: every module call enters one.
    """

    def __init__(self, module):
        self.module = module

    def __enter__(self):
        self.prev = state.scope
        state.scope = self.prev + (ModuleCall(self.module, next(_call_numbers)),)

    def __exit__(self, *exc):
        state.scope = self.prev
