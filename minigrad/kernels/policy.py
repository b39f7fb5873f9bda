"""What minigrad changes in the process to train faster, when, and how to stop it.

Two process-wide settings pay off in a training loop, and nowhere else:

* **glibc's malloc thresholds** (``tune_malloc``). A training step allocates and
  frees the same few-megabyte arrays hundreds of times; glibc returns blocks that
  large to the kernel when freed, so each step page-faults its memory in again.
  Raised thresholds keep freed blocks for the next step, as PyTorch's caching
  allocator does; peak memory is unchanged.
* **The BLAS, OpenMP and numba thread pools** (``set_threads``). On idle cores N
  threads are quicker; beside busy processes each parallel call waits for a time
  slice, and N threads can be several times slower than one. "auto" times the
  run's own steps (``ThreadTuner``): a few on 1 thread, a few on N (the affinity
  mask capped by a cgroup CPU quota), keeps the quicker (the fewer unless more are
  10% quicker), and measures again every 500 steps. A step is one ``backward()``
  to the next; with no backward (sampling) the count stays at 1.

When: a script's first ``backward()`` does both, since a backward pass means a
training loop (``on_backward``: the one hook the engine calls, at the end of every
backward); the demos call ``set_threads()`` at their start, to print the choice.
``import minigrad`` and forward passes change nothing, but for one thing: once the
[fast] backend's MKL does the float32 products, NumPy's OpenBLAS keeps one thread,
as its idle threads would spin against MKL's (``fast_backend_loaded``).

The user's word wins: ``MINIGRAD_THREADS=N`` is the count; so is an
``OPENBLAS_NUM_THREADS``, ``OMP_NUM_THREADS`` or ``MKL_NUM_THREADS`` already set
(the least, in every pool); and **``MINIGRAD_AUTOTUNE=0`` switches all of this
off**: the process keeps its malloc settings and pools unless a count is asked
for. ``mg.backend()["process"]`` lists what was changed and why;
``MINIGRAD_THREADS_VERBOSE=1`` prints each thread decision.
"""

from __future__ import annotations

import ctypes
import math
import os
import sys
import time
from typing import NamedTuple

USER_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
PROC, CGROUP = "/proc", "/sys/fs/cgroup"  # where usable_cores reads; tests point these at a fake tree


class ThreadChoice(NamedTuple):
    """What ``set_threads`` chose: the thread count (None: the pools as they started) and why."""

    threads: int | None
    reason: str


_malloc: str | None = None  # what tune_malloc did
_openblas: str | None = None  # what _apply did to OpenBLAS beside MKL
_choice: ThreadChoice | None = None  # the last set_threads choice (the tuner's, once it has measured)
_tuner = None  # the ThreadTuner while "auto" measures
_in_force: int | None = None  # the count last put in force
_limits: list = []  # threadpoolctl's handles on the limits, kept so that they stay in force
_mkl_products = False  # the [fast] backend's MKL does the float32 products: OpenBLAS keeps one thread
_backward_seen = False
deadline: float | None = None  # while the tuner tries a count after a quicker one: when to give it up


def autotune() -> bool:
    """False when ``MINIGRAD_AUTOTUNE=0``: change nothing in the process unless a count is asked for."""
    return os.environ.get("MINIGRAD_AUTOTUNE", "1").strip() != "0"


def on_backward() -> None:
    """Called at the end of every ``backward()``. The first tunes what the demos tune (unless
    ``MINIGRAD_AUTOTUNE=0``); while the thread count is measured, each one ends a step."""
    global _backward_seen
    if not _backward_seen and autotune():
        if _malloc is None:
            tune_malloc("at the first backward()")
        if _choice is None:
            set_threads("auto")
    _backward_seen = True
    if _tuner is not None:
        _tuner.tick()


def past_deadline() -> None:
    """Called by each kernel call while ``deadline`` is set (``kernel.py``): past it, the count on trial
    is given up for the rest of the step. Beside busy processes a step on 2 threads can take 7 on one."""
    if _tuner is not None and _tuner.clock() > deadline:
        _tuner.give_up()


def tune_malloc(why: str = "asked for by the script") -> bool:
    """Raise glibc's mmap and trim thresholds (blocks up to 32 MB stay in the process); True if done."""
    global _malloc
    if not autotune():
        _malloc = "left as it was: MINIGRAD_AUTOTUNE=0"
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.gnu_get_libc_version  # noqa: B018 -- only glibc has it
    except (OSError, AttributeError):
        _malloc = "left as it was: not glibc"
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3  # mallopt's parameter numbers (<malloc.h>)
    done = bool(libc.mallopt(m_mmap_threshold, 32 << 20)) and bool(libc.mallopt(m_trim_threshold, 512 << 20))
    _malloc = f"glibc keeps freed blocks up to 32 MB ({why})" if done else "left as it was: mallopt refused"
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
    if requested and requested != "auto":
        if _count(requested) is None:
            raise ValueError(f"MINIGRAD_THREADS must be a positive whole number or 'auto', got {requested!r}: "
                             f"write e.g. MINIGRAD_THREADS=2")
        return ThreadChoice(int(requested), f"MINIGRAD_THREADS={requested}")
    if not requested:
        user = {name: os.environ[name].strip() for name in USER_THREAD_VARIABLES if os.environ.get(name, "").strip()}
        said = ", ".join(f"{name}={value}" for name, value in user.items())
        counts = [_count(value) for value in user.values()]
        if user:  # a value that is not a count: the pools are left as the libraries read it
            return ThreadChoice(None if None in counts else min(counts), f"{said} from the environment")
        if policy != "auto":
            if isinstance(policy, bool) or not isinstance(policy, int) or policy < 1:
                raise ValueError(f"set_threads: policy must be 'auto' or a positive int, got {policy!r}")
            return ThreadChoice(policy, "asked for by the script")
    if not autotune():
        return ThreadChoice(None, "MINIGRAD_AUTOTUNE=0: left as the BLAS libraries started")
    n, how = usable_cores()
    if n == 1:
        return ThreadChoice(1, f"auto: one core to run on ({how})")
    return ThreadChoice(1, f"auto: 1 thread until 1 and {n} are timed on the first training steps ({how})")


def usable_cores() -> tuple[int, str]:
    """How many threads can run at once, and how that was found: the affinity mask (else ``os.cpu_count()``),
    capped by the CPU quota (quota / period) of the cgroup (v2) in ``/proc/self/cgroup`` or any group above."""
    try:
        n, how = len(os.sched_getaffinity(0)), "CPU affinity"
    except AttributeError:  # macOS, Windows
        n, how = os.cpu_count() or 1, "os.cpu_count() (no affinity mask on this OS)"
    try:
        with open(os.path.join(PROC, "self", "cgroup")) as f:
            groups, quotas = f.read().splitlines(), []
    except OSError:
        return n, f"{n} cores by {how}; no /proc/self/cgroup"
    for parts in (line[3:].strip("/ ").split("/") for line in groups if line.startswith("0::")):
        for folder in ("/".join(parts[:i]) for i in range(len(parts), -1, -1)):  # the group, then those above
            try:
                with open(os.path.join(CGROUP, folder, "cpu.max")) as f:
                    fields = f.read().split()  # "200000 100000", or "max 100000": no quota
            except OSError:
                continue
            if len(fields) == 2 and _count(fields[0]) and _count(fields[1]):
                quotas.append((int(fields[0]) / int(fields[1]), f"cgroup v2 cpu.max {fields[0]} {fields[1]}"))
    quota, source = min(quotas) if quotas else (None, "cgroup: no CPU quota")
    if quota is not None and math.ceil(quota) < n:
        return max(1, math.ceil(quota)), f"{n} cores by {how}, {quota:g} CPUs by the {source}"
    return n, f"{n} cores by {how}; {source}"


def set_threads(policy: str | int = "auto") -> ThreadChoice:
    """Limit the BLAS, OpenMP and numba pools; returns the choice. ``policy``: a count, or "auto": the count
    the run's own steps are quickest with (``ThreadTuner``). Pools the [fast] backend loads later are
    limited when they load; others loaded later (a later ``import torch``) are not."""
    global _choice, _tuner
    choice = choose_threads(policy)
    _tuner = None
    if choice.reason.startswith("auto: 1 thread until"):  # (the tuner puts its first count in force)
        n = usable_cores()[0]
        _tuner = ThreadTuner(sorted({1, n // 2, n} - {0}), choice.reason.split("(", 1)[1].rstrip(")"))
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

    The first two steps are warm-up, and the first step after a change of count (its threads waking):
    neither is counted. Each candidate count then runs ``trial`` steps and at least ``trial_seconds``
    of them (or 50 steps); one tried after another is given up within the step in which it passes
    1.5x that one's median (``past_deadline``). The fewest threads within ``tie`` of the quickest
    median are kept. The candidates are measured again every ``recheck`` steps (the load may have
    changed), and as soon as the median of the last 3 steps on more than the fewest threads is 1.5x
    their trial median (a noisy trial, or other work started). ``clock``, ``apply(count)``: for tests.
    """

    def __init__(self, candidates: list[int], cores_reason: str, trial: int = 3, trial_seconds: float = 0.05,
                 recheck: int = 500, tie: float = 0.1, clock=time.perf_counter, apply=None, say=None):
        self.candidates, self.cores_reason, self.trial, self.trial_seconds = candidates, cores_reason, trial, \
            trial_seconds
        self.recheck, self.tie, self.clock, self.apply, self.say = recheck, tie, clock, apply or _apply, say or _say
        self.chosen, self.history, self.last, self.current, self.given_up = None, [], None, None, False
        self._start(settle=2)

    def _start(self, settle: int) -> None:
        self.times, self.index, self.settle = {n: [] for n in self.candidates}, 0, settle
        self.steps, self.recent = 0, []
        self._use(self.candidates[0])

    def _use(self, n: int) -> None:
        self.settle = max(self.settle, int(n != self.current))
        self.current = n
        self.apply(n)  # from the next step on: no step is split between two counts

    def tick(self) -> None:
        now = self.clock()
        last, self.last = self.last, now
        self._arm(None)
        if last is None:
            return
        step = now - last
        if self.index == len(self.candidates):  # the choice is made: measure again after `recheck` steps, or
            self.steps, self.recent = self.steps + 1, (self.recent + [step])[-3:]  # when more threads turn slow
            slower = self.chosen != self.candidates[0] and len(self.recent) == 3 and \
                _median(self.recent) > 1.5 * self.medians[self.chosen]
            if self.steps >= self.recheck or slower:
                self._start(settle=0)
            return
        others = [_median(v) for n, v in self.times.items() if v and n != self.current]
        slower = self.given_up or bool(others) and step > 1.5 * min(others)  # settling or not, that decides
        self.given_up = False
        if self.settle and not slower:
            self.settle -= 1
        else:
            self.settle, mine = 0, self.times[self.current]
            mine.append(step)
            if slower or len(mine) >= 50 or len(mine) >= self.trial and sum(mine) >= self.trial_seconds:
                self.index += 1
                if self.index == len(self.candidates):
                    return self._choose()
                self._use(self.candidates[self.index])
        others = [_median(v) for n, v in self.times.items() if v and n != self.current]
        self._arm(now + 1.5 * min(others) if others else None)  # a count tried after another: its deadline

    def _choose(self) -> None:
        global _choice
        self.medians = medians = {n: _median(v) for n, v in self.times.items() if v}
        best = min(n for n, t in medians.items() if t <= (1 + self.tie) * min(medians.values()))
        self._use(best)
        self.chosen = best
        timed = ", ".join(f"{n}: {1000 * t:.3g} ms" for n, t in medians.items())
        said = "measured quickest" if medians[best] == min(medians.values()) else \
            f"kept, the fewest within {self.tie:.0%} of the quickest"
        self.history.append(f"auto: {best} {said} (median step {timed}; {self.cores_reason})")
        if _tuner is self:
            _choice = ThreadChoice(best, self.history[-1])
        self.say(self.history[-1])

    def _arm(self, at: float | None) -> None:
        global deadline
        self.deadline = at
        if _tuner is self:
            deadline = at

    def give_up(self) -> None:
        """The rest of this step on the quickest count so far; the step then counts as clearly slower."""
        timed = {n: _median(v) for n, v in self.times.items() if v and n != self.current}
        self.apply(min(timed, key=timed.get))
        self.given_up = True
        self._arm(None)


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return (ordered[(len(ordered) - 1) // 2] + ordered[len(ordered) // 2]) / 2


def _say(line: str) -> None:
    if os.environ.get("MINIGRAD_THREADS_VERBOSE"):
        print(f"threads: {line}", file=sys.stderr)


def thread_tuner() -> ThreadTuner | None:
    """The tuner measuring steps for ``set_threads("auto")``, or None."""
    return _tuner
