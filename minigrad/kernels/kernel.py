"""What a kernel is: a fast function registered beside the plain NumPy it equals.

A kernel has up to three forms of one function:

* ``.plain``: the plain NumPy expression it equals, as runnable code (what
  ``minigrad.composite_mode()`` runs, and what the tests hold the others to);
* ``.fast``: its NumPy form (``numpy_forms.py``);
* ``.compiled``: the optional [fast] backend's form (``numba_forms.py``,
  ``mkl_blas.py``), None without one.

``.active`` is the form a call runs outside composite mode: ``.fast``, or
``.compiled`` once ``backend.py`` has given one. The backend is chosen at the
first kernel call (or ``mg.backend()``), not at
import: ``import minigrad`` loads no optional library. ``KERNELS`` lists them
all by name; the tests walk it, so a kernel added without a test fails them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from ..modes import state
from . import policy

KERNELS: dict[str, Callable] = {}  # name -> kernel; each has .fast, .plain, .compiled, .active (the tests walk this)


def kernel(plain: Callable):
    """Register a fast function as the kernel for ``plain``; composite mode runs ``plain`` instead.

    The kernel runs ``.active``: its NumPy form ``.fast``, or the compiled form
    ``.compiled`` the [fast] backend gave it (``backend.py``; None without one).
    """

    def register(fast: Callable) -> Callable:
        @functools.wraps(fast)
        def run(*args, **kwargs):
            if state.composite:
                return plain(*args, **kwargs)
            if policy.tuner is not None and policy.tuner.deadline is not None:  # a thread count on trial: too slow?
                policy.tuner.past_deadline()
            return run.active(*args, **kwargs)

        def first_call(*args, **kwargs):  # the backend is chosen now, once, for every kernel; then run
            from .backend import select

            select()
            return run.active(*args, **kwargs)

        run.fast, run.plain, run.compiled, run.active = fast, plain, None, first_call
        KERNELS[fast.__name__] = run
        return run

    return register
