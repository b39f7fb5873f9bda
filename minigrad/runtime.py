"""Process-wide settings: BLAS threads, glibc's malloc thresholds, the default random generator.

Three are here: how many threads BLAS may use (``set_threads``), how glibc's
malloc keeps freed memory (``tune_malloc``), and the seed of the default random
generator (``manual_seed``). ``import minigrad`` changes none of them. The
demos, lessons and benchmarks call the first two at the start of their
``main()``; a plain script gets both at its first ``backward()``
(``first_backward``), since a backward pass means a training loop, which is
what they pay off for. A library that imports minigrad, or a script that only
runs a model forward, keeps its process as it was. ``MINIGRAD_AUTOTUNE=0``
turns that off; ``report()`` (and ``mg.backend()["runtime"]``) says what was
done and why.

Threads
-------
NumPy's BLAS (OpenBLAS) starts one thread per core, and each spins for a
while after a call, waiting for the next. On a machine whose cores are busy
with other work (a browser, an IDE, someone else's tests) those threads fight
the other work and each other for the cores, and the demos ran several times
slower on both cores than on one (``python -m benchmarks.threads`` measures it;
the numbers are in ``benchmarks/README.md``). On cores nobody else uses, all of
them are quicker. Which is the case cannot be read off the machine in a glance
(a tenth of a second of ``/proc/stat`` catches a quiet moment or a busy one), so
``set_threads()`` measures the work itself: the usable cores N are the affinity
mask capped by the cgroup's CPU quota (v2 ``cpu.max``, v1 ``cfs_quota_us``;
``usable_cores``); then 1 and N threads (and N/2 from 4 cores) each run a few
steps, at least 50 ms of them, the first after a change of count not counted (``ThreadTuner``; a step is
one call of the top-level model, so a training step or a sampled token; with no Module, one backward()),
the quicker is kept (the fewer threads unless more are 10% quicker), and the candidates are timed
again when the step time drifts by 30% or after 500 steps. A count that is clearly slower is given up
within its first step (beside a busy process a 2-thread step can take many times a 1-thread one). The
[fast] backend's products keep the path each shape took first, whatever the count, so a change of count
changes no result; until the first choice, a new shape's MKL path is timed on N threads (NumPy's path stays
on one under [fast]), so that the trial of N sees what N threads do. Where there is no
affinity mask or no /proc (macOS, Windows, some containers) N is
``os.cpu_count()`` and the reason says so. What the user said wins over what it
measures: ``MINIGRAD_THREADS=N`` sets N, and an ``OPENBLAS_NUM_THREADS``,
``OMP_NUM_THREADS`` or ``MKL_NUM_THREADS`` already in the environment is left
to do its job. The limit is applied with threadpoolctl, to every BLAS and
OpenMP pool loaded at the time. ``MINIGRAD_THREADS_VERBOSE=1`` prints each
decision to stderr.

Memory
------
``tune_malloc()`` keeps freed arrays in the process's heap instead of handing
them back to the OS. A training step allocates and frees the same few-megabyte
arrays hundreds of times (activations, gradients, temporaries). glibc's malloc
serves blocks that large with mmap and returns them to the kernel when they are
freed, and trims the heap when its top is free, so the next step page-faults the
same memory back in, a few microseconds per 4 KB page. Raising the two thresholds
keeps the memory in the process, as PyTorch's caching allocator does for its
tensors. Peak memory is unchanged: the same blocks are reused rather than
returned and re-requested. What it is worth: ``benchmarks/README.md``
(``python -m benchmarks.train_step --ab-malloc``). Only glibc has these knobs;
elsewhere it does nothing. ``MINIGRAD_MALLOC_TUNE=0`` turns it off.

Random numbers
--------------
``mg.randn``, the layer initialisers and dropout draw from one default
generator when they are given no ``rng=`` (a ``np.random.Generator``, which they
then use instead, leaving this one alone). It starts seeded with 0, so runs are
reproducible out of the box; ``manual_seed(n)`` (``mg.manual_seed``, and
``nn.manual_seed``, PyTorch's spelling) re-seeds it.
"""

from __future__ import annotations

import ctypes
import math
import os
import sys
import time
from typing import NamedTuple

import numpy as np

from . import modes

_M_TRIM_THRESHOLD = -1  # mallopt parameter numbers, from glibc's <malloc.h>
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD = 32 * 1024 * 1024  # glibc's largest allowed value on 64-bit: blocks above it still use mmap
_TRIM_THRESHOLD = 512 * 1024 * 1024


_malloc_done: str | None = None  # what tune_malloc did, for report()


def tune_malloc(why: str = "asked for by the script") -> bool:
    """Raise glibc's mmap and trim thresholds; True if it was done. ``why`` is kept for ``report()``."""
    global _malloc_done
    if os.environ.get("MINIGRAD_MALLOC_TUNE", "1") == "0":
        _malloc_done = "left as it was: MINIGRAD_MALLOC_TUNE=0"
        return False
    if not sys.platform.startswith("linux"):
        _malloc_done = f"left as it was: not glibc ({sys.platform})"
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.gnu_get_libc_version  # noqa: B018 -- only glibc has it (musl, for one, does not)
    except (OSError, AttributeError):
        _malloc_done = "left as it was: not glibc"
        return False
    done = bool(libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)) and bool(
        libc.mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD))
    _malloc_done = (f"glibc keeps freed blocks up to {_MMAP_THRESHOLD >> 20} MB ({why}; MINIGRAD_MALLOC_TUNE=0 "
                    f"to leave it)") if done else "left as it was: mallopt refused"
    return done


# --------------------------------------------------------------------------------------
# What a plain script gets: tuning at its first backward()
# --------------------------------------------------------------------------------------

_first_backward_seen = False


def first_backward() -> None:
    """Called by ``backward()`` the first time it runs in this process: tune what the demos tune, unless told not to.

    A plain training loop (a model, an optimizer, forward/backward/step, no
    ``runtime`` call) then runs as fast as the demos: the allocator keeps its
    freed blocks (``tune_malloc``), and the thread count is measured on the
    loop's own steps (``set_threads("auto")``). Not at import: a library that
    imports minigrad, or a script that only runs forward passes, keeps its
    process as it was. ``MINIGRAD_AUTOTUNE=0`` turns both off (the thread
    variables and ``MINIGRAD_MALLOC_TUNE=0`` still work one by one); what was
    done is in ``report()`` and ``mg.backend()``.
    """
    global _first_backward_seen
    _first_backward_seen = True
    if os.environ.get("MINIGRAD_AUTOTUNE", "1") == "0":
        return
    if _malloc_done is None:
        tune_malloc("at the first backward(); MINIGRAD_AUTOTUNE=0 to skip")
    if _choice is None:
        set_threads("auto")


def report() -> dict:
    """What this process's runtime settings are and why: ``{"malloc": ..., "threads": ..., "autotune": ...}``."""
    auto = os.environ.get("MINIGRAD_AUTOTUNE", "1") != "0"
    return {"malloc": _malloc_done or "left as it was (nothing asked for it yet)",
            "threads": "left as the BLAS library started (nothing asked for it yet)" if _choice is None
            else f"{_choice.threads if _choice.threads is not None else 'as the environment set'} ({_choice.reason})",
            "autotune": ("on: the first backward() tunes what is not yet chosen" if auto else
                         "off: MINIGRAD_AUTOTUNE=0") + ("" if not _first_backward_seen else "; backward() has run"),
            "openblas": _openblas_done or "left as it was (MKL does not take the products)"}


# --------------------------------------------------------------------------------------
# Threads
# --------------------------------------------------------------------------------------

USER_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")

PROC = "/proc"  # where cpu_quota() reads; tests point these at a fake tree
CGROUP = "/sys/fs/cgroup"


class ThreadChoice(NamedTuple):
    """What ``set_threads`` chose: the thread count (None: left as the environment set it) and why."""

    threads: int | None
    reason: str


_choice: ThreadChoice | None = None  # the last choice applied, for ``backend()``
_limits: list = []  # threadpoolctl's handles on the limits, kept so they stay in force
_controller = None  # threadpoolctl's view of the pools, made once per set_threads (it scans the loaded libraries)
_tuner = None  # the ThreadTuner measuring steps, while "auto" measures


def cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def cpu_quota() -> tuple[float | None, str]:
    """The CPUs this process's cgroup may use (``quota / period``), or None, and where that was read.

    cgroup v2: ``cpu.max`` ("max 100000" or "200000 100000") in the process's
    group, found from ``/proc/self/cgroup`` ("0::/path"), and in each group above
    it (the smallest limit wins). v1: ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``
    in the ``cpu`` controller's group (-1: no limit).
    """
    groups = _read(os.path.join(PROC, "self", "cgroup"))
    if groups is None:
        return None, "no /proc/self/cgroup"
    limits, source = [], "cgroup: no CPU quota"
    for line in groups.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        path = path.strip().lstrip("/")
        if controllers == "":  # v2: walk from the group up to the root
            while True:
                text = _read(os.path.join(CGROUP, path, "cpu.max"))
                fields = text.split() if text else []
                if len(fields) == 2 and fields[0] != "max":
                    try:
                        limits.append((int(fields[0]) / int(fields[1]), f"cgroup v2 cpu.max {fields[0]} {fields[1]}"))
                    except (ValueError, ZeroDivisionError):
                        pass
                if not path:
                    break
                path = os.path.dirname(path)
        elif "cpu" in controllers.split(","):  # v1
            for folder in (os.path.join(CGROUP, controllers, path), os.path.join(CGROUP, "cpu", path),
                           os.path.join(CGROUP, "cpu,cpuacct", path)):
                quota, period = _read(os.path.join(folder, "cpu.cfs_quota_us")), \
                    _read(os.path.join(folder, "cpu.cfs_period_us"))
                if quota is None or period is None:
                    continue
                try:
                    q, per = int(quota), int(period)
                except ValueError:
                    break
                if q > 0 and per > 0:
                    limits.append((q / per, f"cgroup v1 cfs_quota_us {q} / cfs_period_us {per}"))
                break
    if not limits:
        return None, source
    return min(limits)


def usable_cores() -> tuple[int, str]:
    """How many threads can run at once here: the affinity mask, capped by a cgroup CPU quota; and how it was found.

    Where the OS has no affinity mask or no /proc (macOS, Windows, some containers)
    the plain rule is ``os.cpu_count()``, and the reason says so.
    """
    try:
        n, how = len(os.sched_getaffinity(0)), "CPU affinity"
    except AttributeError:
        n, how = os.cpu_count() or 1, "os.cpu_count() (no affinity mask on this OS)"
    quota, source = cpu_quota()
    if quota is not None and math.ceil(quota) < n:
        return max(1, math.ceil(quota)), f"{n} cores by {how}, {quota:g} CPUs by the {source}"
    return n, f"{n} cores by {how}; {source}"


def choose_threads(policy: str | int = "auto") -> ThreadChoice:
    """The thread count ``set_threads(policy)`` starts with, and why (for "auto", the first count it measures)."""
    requested = os.environ.get("MINIGRAD_THREADS", "").strip()
    if requested and requested != "auto":
        if not requested.isdigit() or int(requested) < 1:
            raise ValueError(f"MINIGRAD_THREADS must be a positive whole number or 'auto', got {requested!r}")
        return ThreadChoice(int(requested), f"MINIGRAD_THREADS={requested}")
    if not requested:
        user = {name: os.environ[name].strip() for name in USER_THREAD_VARIABLES if os.environ.get(name, "").strip()}
        if user:
            said = ", ".join(f"{name}={value}" for name, value in user.items())
            counts = [int(value) for value in user.values() if value.isdigit() and int(value) >= 1]
            if len(counts) < len(user):  # a value we cannot read as a count: the pools are left as they are
                return ThreadChoice(None, f"{said} from the environment")
            # The count, put in force in every pool alike: with the [fast] backend, OpenBLAS left at the
            # user's N beside MKL's and numba's N threads would spin against them.
            return ThreadChoice(min(counts), f"{said} from the environment")
        if policy != "auto":
            if isinstance(policy, bool) or not isinstance(policy, int) or policy < 1:
                raise ValueError(f"set_threads: policy must be 'auto' or a positive int, got {policy!r}")
            return ThreadChoice(policy, "asked for by the script")
    n, how = usable_cores()
    if n == 1:
        return ThreadChoice(1, f"auto: one core to run on ({how})")
    return ThreadChoice(1, f"auto: measuring 1 and {n} threads on the first steps ({how})")


def set_threads(policy: str | int = "auto") -> ThreadChoice:
    """Limit the BLAS and OpenMP thread pools; returns the choice (``thread_choice()`` follows it later).

    ``policy``: a thread count, or "auto": the count this process's own steps run
    fastest with (``ThreadTuner``: each of 1 and N threads, N the usable cores,
    is timed over a few steps, the quicker kept, and measured again when the
    step time drifts). A step is the time from one call of a top-level model
    (a Module called outside any other) to the next; in a loop with no Module,
    from one ``backward()`` to the next. ``MINIGRAD_THREADS=N``
    overrides both; an ``OPENBLAS_NUM_THREADS`` (or OMP_, MKL_) the user set is
    the count (the least, if several are set), applied to every pool as a
    ``MINIGRAD_THREADS`` would be, so that the [fast] backend's OpenBLAS stays at
    one thread beside MKL's. Needs threadpoolctl (a dependency of
    minigrad); pools loaded after the call (a later ``import torch``) are not limited.
    """
    global _choice, _controller, _tuner
    from .kernels.backend import select

    select()  # the [fast] backend's pools (numba's, MKL's) are loaded before they are sized
    choice = choose_threads(policy)
    _tuner = None
    modes.step_clock = None
    _time_products_at(None)
    if choice.threads is not None:
        from threadpoolctl import ThreadpoolController

        _set_numba_threads(choice.threads)  # first: starting numba's pool resets OpenMP's thread count
        _controller = ThreadpoolController()
        _apply(choice.threads)
        n = usable_cores()[0]
        if choice.reason.startswith("auto: measuring"):
            _tuner = ThreadTuner(sorted({1, n // 2, n} - {0}), choice.reason.split("(", 1)[1].rstrip(")"))
            modes.step_clock = _tuner.tick
            _time_products_at(n)  # until its first choice, a product's path is timed for the most threads
    _choice = choice
    if os.environ.get("MINIGRAD_THREADS_VERBOSE"):
        _say(f"{choice.threads if choice.threads is not None else 'as the environment set'} ({choice.reason})")
    return choice


def _time_products_at(threads: int | None) -> None:
    """With [fast]'s MKL, time each new product shape's MKL path on ``threads`` (None: the count in force)."""
    if _fast_gemm:
        from .kernels import mkl_blas

        mkl_blas.timing_threads = threads
        mkl_blas.given_up.clear()


def _apply(threads: int) -> None:
    """Put ``threads`` in force in every pool the last ``set_threads`` found (and numba's).

    (The [fast] backend's product choices, MKL or NumPy per shape, stay as they are whatever the
    count: ``mkl_blas.chosen``.)
    """
    global _limits
    _set_numba_threads(threads)
    for limit in reversed(_limits):
        limit.restore_original_limits()
    _limits = [_controller.limit(limits=threads)]
    if _fast_gemm:  # MKL does the big products: OpenBLAS keeps one thread, so its pool does not spin
        _limits.append(_controller.select(internal_api="openblas").limit(limits=1))


class ThreadTuner:
    """Chooses the thread count from the time the process's own steps take: measured, not guessed.

    ``tick()`` is called at the start of every step.

    * **A measurement.** The first two steps (warm-up) are not counted, nor the
      first step after a change of count (the pools' threads wake, MKL's products
      warm up). Each candidate count then runs ``trial`` steps and at least
      ``trial_seconds`` of them: a sampled token takes a few milliseconds, and
      beside busy processes the scheduler's slices are as long, so a few steps are
      noise. A count tried after another is given up within its step, at the first
      kernel call past 1.5x the best median so far (``modes.step_deadline``): the
      rest of that step runs on the quickest count so far, and the count is done
      (beside a busy process a 2-thread step can take many times a 1-thread one).
    * **The choice.** The fewest threads whose median step is within ``tie`` of the
      lowest are kept. More threads must earn their cores; and a tie often means the
      steps are too small for the BLAS to use a second thread at all (a sample's
      first tokens), so both counts ran the same code.
    * **Watching.** The median of the last 5 steps (more, to make ``trial_seconds``)
      is compared with that of the first steady steps. When it moves by more than
      ``drift`` in a direction that could favour another count (quicker on the
      fewest threads: a load went away; slower on more), after at least ``hold``
      steady steps, or every ``recheck`` steps, the candidates are measured again.
      After a tie they are measured again once ``hold`` has passed, drift or not: a
      tie is no answer (a sample's first tokens, later longer; a noisy trial). On
      the fewest threads, steps shorter than 50 ms count as their part of one, so
      that a sample's tokens do not pay for a slow trial step every few dozen; on
      more threads each counts whole, to leave a count beside busy cores soon.
      ``hold`` starts at 10 and doubles each time a new measurement keeps the same
      count (a noisy machine's step times wander with nothing changed), and starts
      over when the count changes.

    ``clock`` and ``apply(count)`` are for tests.
    """

    def __init__(self, candidates: list[int], cores_reason: str, trial: int = 3, trial_seconds: float = 0.05,
                 drift: float = 0.3, recheck: int = 500, tie: float = 0.1, clock=time.perf_counter, apply=None,
                 say=None):
        self.candidates, self.cores_reason = candidates, cores_reason
        self.trial, self.trial_seconds, self.drift, self.recheck = trial, trial_seconds, drift, recheck
        self.tie = tie
        self.tied = False  # the last measurement could not tell the kept count from another
        self.clock, self.apply = clock, apply or _apply
        self.say = say if say is not None else (_say if os.environ.get("MINIGRAD_THREADS_VERBOSE") else None)
        self.window = 5  # the steady steps (and at least trial_seconds of them) whose median is watched
        self.min_hold = self.hold = 10  # steady steps before a drift may start a new measurement
        self.last = None
        self.seen_model = False
        self.chosen: int | None = None
        self.history: list[str] = []
        self.deadline: float | None = None  # while a count is tried after another: when to give it up (the clock's)
        self.given_up = False  # the count on trial passed its deadline within this step
        self.current = None
        self._start_trial(settle=2)  # the first two steps: warm-up (allocations, caches)

    def _start_trial(self, settle: int) -> None:
        self.times = {n: [] for n in self.candidates}
        self.index = 0
        self.settle = max(settle, int(self.current != self.candidates[0]))  # (a change of count: one step to settle)
        self.apply(self.candidates[0])
        self.current = self.candidates[0]

    def tick(self, source: str = "model") -> None:
        """A step starts. ``source``: "model" (a top-level model call) or "backward" (a backward() ended).

        Steps are timed from model calls when there are any, else from one backward() to the next.
        """
        if source != "model":
            if self.seen_model:
                return
        elif not self.seen_model:
            self.seen_model = True
            if self.last is not None:  # backward() was the clock so far: time model calls afresh
                self.last = None
                self._start_trial(settle=1)
        now = self.clock()
        last, self.last = self.last, now
        self._arm_deadline(None)
        if last is None:
            return
        step = now - last
        if self.chosen is None or self.index < len(self.candidates):
            self._trial_step(step)
            if self.index < len(self.candidates):
                timed = [_median(v) for n, v in self.times.items() if v and n != self.current]
                if timed:  # a count tried after another: given up within this step once it is clearly slower
                    self._arm_deadline(now + 1.5 * min(timed))
        else:
            self._steady_step(step)

    def _arm_deadline(self, deadline: float | None) -> None:
        """From now on, each kernel call checks whether the step has passed ``deadline`` (None: no check).

        Beside busy processes a step on 2 threads can take many times one on 1 thread (every parallel
        loop waits for a core the other process holds): the trial gives the count up there, mid-step,
        rather than pay a whole step. The step, timed at its end, then counts as clearly slower."""
        self.deadline = deadline
        if _tuner is self:  # (the process's tuner; a test's own drives _past_deadline itself)
            modes.step_deadline = None if deadline is None else self._past_deadline

    def _past_deadline(self) -> None:
        if self.clock() > self.deadline:
            timed = {n: _median(v) for n, v in self.times.items() if v and n != self.current}
            self.apply(min(timed, key=timed.get))  # the quickest so far, for the rest of the step
            self._arm_deadline(None)
            self.given_up = True

    def _trial_step(self, step: float) -> None:
        # Beside busy cores 2 threads can be 5x slower: a step that slow decides the count, settling or not.
        timed = [_median(v) for n, v in self.times.items() if v and n != self.current]
        clearly_slower = self.given_up or bool(timed and step > 1.5 * min(timed))
        self.given_up = False
        if self.settle and not clearly_slower:
            self.settle -= 1
            return
        self.settle = 0
        mine = self.times[self.current]
        mine.append(step)
        enough = len(mine) >= self.trial and sum(mine) >= self.trial_seconds or len(mine) >= _TRIAL_MOST
        if not (enough or clearly_slower):
            return
        self.index += 1
        if self.index < len(self.candidates):
            self.current = self.candidates[self.index]
            self.apply(self.current)  # from the next step on: no step is split between two counts
            self.settle = 1  # (its first step: threads waking, products warming up)
            return
        medians = {n: _median(v) for n, v in self.times.items()}
        quickest = min(medians.values())
        best = min(n for n, t in medians.items() if t <= (1 + self.tie) * quickest)  # the fewest as quick
        self.tied = any(t <= (1 + self.tie) * medians[best] for n, t in medians.items() if n != best)
        self.apply(best)  # kept
        # On a noisy machine the step time wanders: a check that keeps the same count waits twice as long
        # before the next one; a check that changes it starts the waiting over.
        self.hold = self.min_hold if best != self.chosen else min(2 * self.hold, self.recheck)
        # The drift is measured from the first steady steps, not from the trial's: the first steps of a
        # run are slower (memory still being mapped, caches cold), and would make every later step look quick.
        self.chosen, self.current, self.baseline, self.recent, self.steps = best, best, None, [], 0
        timed = ", ".join(f"{n}: {1000 * t:.3g} ms" for n, t in medians.items())
        said = f"kept, the fewest measured within {self.tie:.0%} of the quickest" if self.tied else "measured quickest"
        line = f"auto: {best} {said} (median step {timed}; {self.cores_reason})"
        self.history.append(line)
        global _choice
        if _tuner is self:
            _choice = ThreadChoice(best, line)
            # Product shapes first seen from now on are timed on the count in force: the warm-up and the first
            # count's steps have shown the model's shapes (a training step's are all there), and MKL runs on more
            # threads than a kept 1 leave OpenMP's other thread spinning beside each sampled token.
            _time_products_at(None)
        if self.say:
            self.say(line)

    def _steady_step(self, step: float) -> None:
        # On the fewest threads a new measurement tries more, which beside busy cores costs a slow step: there a
        # step shorter than 50 ms counts as its part of one (10 steps of hold are then half a second of sampled
        # tokens, not ten tokens). On more threads, slower steps may be busy cores: each counts whole, to leave
        # them soon.
        fewest = self.chosen == self.candidates[0]
        self.steps += min(1.0, step / _FULL_STEP) if fewest else 1
        recent = self.recent
        recent.append(step)
        # The last `window` steps, and more while they sum to less than trial_seconds: the median of five
        # 3 ms tokens beside a busy process is one scheduler slice's luck, not a change of load.
        while len(recent) > _TRIAL_MOST or len(recent) > self.window and sum(recent[1:]) >= self.trial_seconds:
            del recent[0]
        full = len(recent) >= self.window and sum(recent) >= self.trial_seconds or len(recent) == _TRIAL_MOST
        if self.baseline is None:
            if full:
                self.baseline = _median(recent)
            return
        if self.steps >= self.recheck or (self.steps >= self.hold and full and (
                self.tied or self._drifted(_median(recent) / self.baseline))):
            self._start_trial(settle=0)

    def _drifted(self, ratio: float) -> bool:
        """Whether a step time ``ratio`` times the chosen count's could mean another count is now quicker.

        Slower steps on the fewest threads (more load) and quicker steps on the most (less load)
        say nothing new: the choice stands. The periodic ``recheck`` covers the rest.
        """
        fewest, most = self.chosen == self.candidates[0], self.chosen == self.candidates[-1]
        return (ratio < 1 - self.drift and not most) or (ratio > 1 + self.drift and not fewest)


_TRIAL_MOST = 50  # steps of one count in a trial, however short its steps
_FULL_STEP = 0.05  # seconds: a steady step this long or longer counts whole towards `hold` and `recheck`


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if len(ordered) % 2 else (ordered[len(ordered) // 2 - 1] +
                                                                ordered[len(ordered) // 2]) / 2


def _say(line: str) -> None:
    print(f"threads: {line}", file=sys.stderr)


def _set_numba_threads(threads: int) -> None:
    """numba's pool (the [fast] backend's) is not seen by threadpoolctl; set it too when numba is loaded."""
    numba = sys.modules.get("numba")
    if numba is not None:
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))


def thread_pools() -> list[dict]:
    """The thread pools loaded in this process: threadpoolctl's list (BLAS, OpenMP), plus numba's if loaded."""
    from threadpoolctl import threadpool_info

    pools = [{k: p.get(k) for k in ("internal_api", "user_api", "num_threads", "version", "filepath")}
             for p in threadpool_info()]
    numba = sys.modules.get("numba")
    if numba is not None:
        pools.append({"internal_api": "numba", "user_api": "numba", "num_threads": numba.get_num_threads(),
                      "version": numba.__version__, "threading_layer": numba.config.THREADING_LAYER})
    return pools


# --------------------------------------------------------------------------------------
# The [fast] backend's thread pools (minigrad/kernels/backend.py)
# --------------------------------------------------------------------------------------

_fast_gemm = False  # True once MKL does the float32 products


def find_mkl() -> str | None:
    """The path of MKL's single dynamic library (libmkl_rt) from the PyPI ``mkl`` wheel, or None.

    Only x86-64 Linux: elsewhere the wheel is not there, and NumPy's matmul stays.
    """
    import glob
    import platform

    if not sys.platform.startswith("linux") or platform.machine() not in ("x86_64", "AMD64"):
        return None
    for folder in dict.fromkeys([os.path.join(sys.prefix, "lib"), os.path.join(sys.base_prefix, "lib")]):
        found = sorted(glob.glob(os.path.join(folder, "libmkl_rt.so*")))
        if found:
            return found[-1]
    return None


def prepare_fast_backend() -> str | None:
    """Set up numba's and MKL's pools to share GNU OpenMP, before either loads; returns MKL's path (or None).

    numba's ``omp`` threading layer runs on libgomp; ``MKL_THREADING_LAYER=GNU``
    makes MKL use the same runtime instead of loading Intel's own (a user's
    own setting is kept). With two runtimes, each spins its threads on the
    same cores, and both slow down.
    """
    global _fast_gemm
    import ctypes.util

    import numba

    if "NUMBA_THREADING_LAYER" not in os.environ and ctypes.util.find_library("gomp"):
        numba.config.THREADING_LAYER = "omp"
    path = find_mkl()
    if path is not None:
        os.environ.setdefault("MKL_THREADING_LAYER", "GNU")
        _fast_gemm = True
    return path


_openblas_done: str | None = None  # what quiet_openblas did, for report()
_openblas_limit = None  # threadpoolctl's handle on OpenBLAS's one-thread limit, kept so it stays in force


def quiet_openblas() -> None:
    """NumPy's OpenBLAS at one thread, from the moment MKL takes the float32 products ([fast], ``backend.select``).

    OpenBLAS starts a thread per core, and after each call its threads spin for a
    while, waiting for the next. Beside MKL's threads they take the cores MKL's
    need: while they spin, each MKL product waits for a scheduler's time slice, many
    times its own work. Done when the backend is chosen, not at the first
    backward(), so that a plain script's first steps, where each product shape's
    library is measured (``mkl_blas._quicker``), run as the later ones will.
    """
    global _openblas_done, _openblas_limit
    if _openblas_limit is not None:
        return
    from threadpoolctl import ThreadpoolController

    openblas = ThreadpoolController().select(internal_api="openblas")
    _openblas_limit = openblas.limit(limits=1)
    _openblas_done = ("1 thread beside MKL (the [fast] backend: MKL does the float32 products)"
                      if openblas.lib_controllers else "none loaded (NumPy's BLAS is another library)")


def thread_tuner() -> ThreadTuner | None:
    """The tuner measuring steps for ``set_threads("auto")``, or None (a fixed count, or one core)."""
    return _tuner


def thread_choice() -> ThreadChoice | None:
    """The choice ``set_threads`` last applied (None if it was never called)."""
    return _choice


# --------------------------------------------------------------------------------------
# The default random generator
# --------------------------------------------------------------------------------------

_default = np.random.default_rng(0)


def manual_seed(seed: int) -> None:
    """Re-seed the default generator (``mg.randn``, layer initialisation and dropout given no ``rng``)."""
    global _default
    _default = np.random.default_rng(seed)


def default_rng() -> np.random.Generator:
    """The generator used when none is passed."""
    return _default
