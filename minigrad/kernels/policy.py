"""What minigrad changes in the process to train faster, when, and how to stop it.

* **glibc's malloc thresholds** (``tune_malloc``): a training step allocates and frees the same
  few-megabyte arrays hundreds of times; raised thresholds keep them in the process, as PyTorch's
  caching allocator does, where glibc would give them back and page-fault them in again each step.
* **The BLAS, OpenMP and numba thread pools** (``set_threads``): N threads are quicker on idle cores,
  and can be several times slower than one beside busy processes. So "auto" times the run's own steps
  (one ``backward()`` to the next) on 1, N/2 and N threads (``ThreadTuner``), keeps the quickest (the
  fewest within 10%), and measures again every 500 steps. A run with no backward (sampling) keeps 1.

A script's first ``backward()`` does both (``on_backward``, the one hook the engine calls); the demos
call ``set_threads()`` first, to print the choice. Importing and forward passes change nothing, but
beside the [fast] backend's MKL, NumPy's OpenBLAS keeps one thread (its idle threads spin against MKL's).

The user's word wins: ``MINIGRAD_THREADS=N``, else ``OPENBLAS_/OMP_/MKL_NUM_THREADS`` (the least), and
**``MINIGRAD_AUTOTUNE=0`` switches all of this off** unless a count is asked for. ``mg.backend()["process"]``
lists what was changed and why; ``MINIGRAD_THREADS_VERBOSE=1`` prints each thread decision.
"""

from __future__ import annotations

import ctypes
import os
import sys
import time
from statistics import median
from typing import NamedTuple

USER_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


class ThreadChoice(NamedTuple):
    threads: int | None  # what set_threads chose (None: the pools as they started)
    reason: str  # and why


_malloc = _openblas = None  # what tune_malloc did; what _apply did to OpenBLAS beside MKL
_choice: ThreadChoice | None = None  # the last choice (the tuner's, once it has measured)
tuner = None  # the ThreadTuner of set_threads("auto"), which measures the steps
_in_force: int | None = None  # the count last put in force
_limits: list = []  # threadpoolctl's handles on the limits, kept so that they stay in force
_mkl_products = False  # the [fast] backend's MKL does the float32 products


def autotune() -> bool:
    """False when ``MINIGRAD_AUTOTUNE=0``: change nothing in the process unless a count is asked for."""
    return os.environ.get("MINIGRAD_AUTOTUNE", "1").strip() != "0"


def on_backward() -> None:
    """Called at the end of every ``backward()``. The first tunes what the demos tune (unless
    ``MINIGRAD_AUTOTUNE=0``); while the thread count is measured, each one ends a step."""
    if _malloc is None and autotune():
        tune_malloc("at the first backward()")
    if _choice is None and autotune():
        set_threads("auto")
    if tuner is not None:
        tuner.tick()


def tune_malloc(why: str = "asked for by the script") -> bool:
    """Raise glibc's mmap and trim thresholds (blocks up to 32 MB stay in the process); True if done."""
    global _malloc
    if not autotune():
        _malloc = "left as it was: MINIGRAD_AUTOTUNE=0"
        return False
    try:  # mallopt's parameters (<malloc.h>): M_MMAP_THRESHOLD -3, M_TRIM_THRESHOLD -1
        done = all(ctypes.CDLL(None).mallopt(param, size) for param, size in ((-3, 32 << 20), (-1, 512 << 20)))
        _malloc = f"glibc keeps freed blocks up to 32 MB ({why})" if done else "left as it was: mallopt refused"
    except (OSError, AttributeError, TypeError):  # no mallopt: not glibc (macOS, Windows)
        done, _malloc = False, "left as it was: not glibc"
    return done


def report() -> dict:
    """What minigrad changed in this process and why (``mg.backend()["process"]``)."""
    return {"malloc": _malloc or "left as it was (nothing asked for it yet)",
            "threads": "left as the BLAS libraries started (nothing asked for it yet)" if _choice is None else
            f"{'unchanged' if _choice.threads is None else _choice.threads} ({_choice.reason})",
            "openblas": _openblas or "left as it was (MKL does not do the products)",
            "autotune": "on: the first backward() tunes what is not yet chosen" if autotune()
            else "off: MINIGRAD_AUTOTUNE=0"}


def _count(text: str) -> int | None:
    return int(text) if text.isascii() and text.isdigit() and int(text) >= 1 else None


def choose_threads(policy: str | int = "auto") -> ThreadChoice:
    """The count ``set_threads(policy)`` starts with, and why (for "auto", the first it measures)."""
    requested = os.environ.get("MINIGRAD_THREADS", "").strip()
    if requested not in ("", "auto") and _count(requested) is None:
        raise ValueError(f"MINIGRAD_THREADS must be a positive whole number or 'auto', got {requested!r}: "
                         f"write e.g. MINIGRAD_THREADS=2")
    user = {"MINIGRAD_THREADS": requested} if requested else \
        {name: os.environ[name].strip() for name in USER_THREAD_VARIABLES if os.environ.get(name, "").strip()}
    if user and requested != "auto":  # a value that is not a count: the pools are left as the libraries read it
        counts = [_count(value) for value in user.values()]
        said = ", ".join(f"{name}={value}" for name, value in user.items())
        return ThreadChoice(None if None in counts else min(counts), f"{said} from the environment")
    if policy != "auto" and not requested:
        if isinstance(policy, bool) or not isinstance(policy, int) or policy < 1:
            raise ValueError(f"set_threads: policy must be 'auto' or a positive int, got {policy!r}")
        return ThreadChoice(policy, "asked for by the script")
    if not autotune():
        return ThreadChoice(None, "MINIGRAD_AUTOTUNE=0: left as the BLAS libraries started")
    n, how = usable_cores()
    if n == 1:
        return ThreadChoice(1, f"auto: one core to run on ({how})")
    *first, last = candidates(n)
    return ThreadChoice(1, f"auto: 1 thread until {', '.join(map(str, first))} and {last} are timed on the first "
                           f"training steps ({how})")


def usable_cores() -> tuple[int, str]:
    """How many threads can run at once, and how that was found: the CPU affinity mask, else ``os.cpu_count()``.
    A container's CPU quota (``--cpus``) is not read, as PyTorch does not: there, set ``MINIGRAD_THREADS``."""
    try:
        n = len(os.sched_getaffinity(0))
        return n, f"{n} cores by CPU affinity"
    except AttributeError:  # macOS, Windows
        n = os.cpu_count() or 1
        return n, f"{n} cores by os.cpu_count() (no affinity mask on this OS)"


def candidates(cores: int) -> list[int]:
    """The thread counts "auto" times on ``cores`` usable cores: 1, half of them and all."""
    return sorted({1, cores // 2, cores})


def set_threads(policy: str | int = "auto") -> ThreadChoice:
    """Limit the BLAS, OpenMP and numba pools; returns the choice. ``policy``: a count, or "auto": the count
    the run's own steps are quickest with (``ThreadTuner``). Pools the [fast] backend loads later are
    limited when they load; others loaded later (a later ``import torch``) are not."""
    global _choice, tuner
    choice, tuner = choose_threads(policy), None  # (a tuner before this one measures no more)
    if choice.reason.startswith("auto: 1 thread until"):  # (the tuner puts its first count in force)
        n, how = usable_cores()
        tuner = ThreadTuner(candidates(n), how)
    elif choice.threads is not None:
        _apply(choice.threads)
    _choice = choice
    _say(f"{'unchanged' if choice.threads is None else choice.threads} ({choice.reason})")
    return choice


def fast_backend_loaded(mkl: bool) -> None:
    """Called by ``backend.py`` once numba (and MKL, if ``mkl``) are loaded: their pools get the count in
    force; with MKL doing the products, OpenBLAS keeps one thread (unless ``MINIGRAD_AUTOTUNE=0``)."""
    global _mkl_products
    _mkl_products = mkl
    if _in_force is not None or (mkl and autotune()):
        _apply(_in_force)


def _apply(threads: int | None) -> None:
    """Put ``threads`` in force in every pool loaded now (None: leave them), and OpenBLAS at one thread beside
    MKL. numba's first: starting its pool resets OpenMP's count."""
    global _limits, _in_force, _openblas
    from threadpoolctl import ThreadpoolController

    numba = sys.modules.get("numba")
    if numba is not None and threads:
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    for limit in reversed(_limits):
        limit.restore_original_limits()
    pools = ThreadpoolController()
    _limits, _in_force = ([pools.limit(limits=threads)] if threads else []), threads
    if _mkl_products:
        _limits.append(pools.select(internal_api="openblas").limit(limits=1))
        _openblas = "1 thread beside MKL (the [fast] backend: MKL does the float32 products)"


class ThreadTuner:
    """Chooses the thread count from the time the run's own steps take; ``tick()`` ends a step.

    ``_rounds`` is the procedure. The first two steps are warm-up, and so is the first after a change of
    count (its threads waking). Each candidate then runs ``trial`` steps and ``trial_seconds`` (at most 50
    steps); one tried after another is given up within the step in which it passes 1.5x that one's median
    (``past_deadline``). The fewest threads within ``tie`` of the quickest median are kept, and measured
    again after ``recheck`` steps, or at once if the last 3 steps on more than the fewest threads have a
    median 1.5x their trial's (a noisy trial, or other work started). ``clock``, ``apply``: for tests.
    """

    def __init__(self, candidates: list[int], cores_reason: str, trial: int = 3, trial_seconds: float = 0.05,
                 recheck: int = 500, tie: float = 0.1, clock=time.perf_counter, apply=None):
        self.candidates, self.cores_reason, self.clock, self.apply = candidates, cores_reason, clock, apply or _apply
        self.trial, self.trial_seconds, self.recheck, self.tie = trial, trial_seconds, recheck, tie
        self.say = _say  # how each choice is told (the demos set their own: demos/_common.py)
        self.chosen = self.current = self.last = self.step = self.deadline = None  # deadline: see past_deadline
        self.history, self.times, self.medians, self.given_up = [], {}, {}, False
        self._steps = self._rounds()
        next(self._steps)  # the first count is in force

    def tick(self) -> None:
        now = self.clock()
        self.step, self.last = None if self.last is None else now - self.last, now
        self.deadline = None
        if self.step is not None:
            next(self._steps, None)  # (once an error or a Ctrl-C has ended the generator, it measures no more)

    def _rounds(self):
        """Yields at the end of each step, with ``self.step`` its seconds, until the end of the run."""
        settle = 2
        while True:
            self.times = {n: [] for n in self.candidates}
            for n in self.candidates:
                mine, others = self.times[n], [median(v) for v in self.times.values() if v]
                settle, self.current = max(settle, int(n != self.current)), n
                self.apply(n)  # from the next step on: no step is split between two counts
                while len(mine) < 50 and (len(mine) < self.trial or sum(mine) < self.trial_seconds):
                    self.deadline = self.last + 1.5 * min(others) if others else None
                    yield
                    slower = self.given_up or bool(others) and self.step > 1.5 * min(others)
                    self.given_up = False  # settling or not, a clearly slower step decides
                    if settle and not slower:
                        settle -= 1
                        continue
                    settle = 0
                    mine.append(self.step)
                    if slower:
                        break
            self._choose()
            recent = []
            for _ in range(self.recheck):
                yield
                recent = [*recent[-2:], self.step]
                if self.chosen != self.candidates[0] and len(recent) == 3 and \
                        median(recent) > 1.5 * self.medians[self.chosen]:
                    break  # more threads turned slow: measure again now

    def _choose(self) -> None:
        global _choice
        self.medians = medians = {n: median(v) for n, v in self.times.items() if v}
        best = min(n for n, t in medians.items() if t <= (1 + self.tie) * min(medians.values()))
        self.chosen = self.current = best
        self.apply(best)
        timed = ", ".join(f"{n}: {1000 * t:.3g} ms" for n, t in medians.items())
        said = "measured quickest" if medians[best] == min(medians.values()) else \
            f"kept, the fewest within {self.tie:.0%} of the quickest"
        self.history.append(f"auto: {best} {said} (median step {timed}; {self.cores_reason})")
        if tuner is self:
            _choice = ThreadChoice(best, self.history[-1])
        self.say(self.history[-1])

    def past_deadline(self) -> None:
        """Called by each kernel call while ``deadline`` is set (``kernel.py``): past it, the rest of this step runs
        on the quickest count so far, and the step counts as clearly slower. (A step on 2 threads beside busy
        processes can take 7 on one.)"""
        if self.clock() > self.deadline:
            timed = {n: median(v) for n, v in self.times.items() if v and n != self.current}
            self.apply(min(timed, key=timed.get))
            self.given_up, self.deadline = True, None


def _say(line: str) -> None:
    if os.environ.get("MINIGRAD_THREADS_VERBOSE"):
        print(f"threads: {line}", file=sys.stderr)
