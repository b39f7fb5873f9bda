"""Measurement helpers shared by the benchmarks: threads, clocks, medians, memory, tables.

Two rules shape this file:

* The BLAS thread count must be fixed *before* NumPy (or torch) is imported:
  OpenBLAS, MKL and OpenMP read their environment variables once, when the
  library loads. So this module imports neither, and the benchmark scripts
  import them inside functions, after ``pin_threads``.
* A shared machine is noisy. Every comparison runs its contenders in turn
  (A, B, A, B, ...) so a burst of load from elsewhere hits both alike, and
  quotes the median (typical) and the minimum (least disturbed) of the runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import time

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS",
                    "NUMEXPR_NUM_THREADS")

clock = time.perf_counter


# --------------------------------------------------------------------------------------
# Threads and processes
# --------------------------------------------------------------------------------------


def thread_env(threads: int) -> dict[str, str]:
    """The environment variables that cap every BLAS / OpenMP pool at ``threads`` threads."""
    return {name: str(threads) for name in THREAD_VARIABLES}


def pin_threads(threads: int) -> None:
    """Cap BLAS threads for this process. Must run before NumPy is imported, or it is too late."""
    if "numpy" in sys.modules and os.environ.get("OPENBLAS_NUM_THREADS") != str(threads):
        raise RuntimeError("pin_threads: NumPy is already imported, so its BLAS thread pool is already sized; "
                           "call pin_threads before importing numpy, torch or minigrad")
    os.environ.update(thread_env(threads))


def torch_threads(torch, threads: int) -> None:
    """Give torch the same thread count as NumPy's BLAS (intra-op; one inter-op thread)."""
    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # only allowed before torch has started any parallel work
        pass


def torch_available() -> bool:
    """True when torch can be imported (checked without importing it)."""
    import importlib.util

    return importlib.util.find_spec("torch") is not None


def tune_malloc() -> None:
    """What a training script's first backward() does (``minigrad.kernels.policy``), unless MINIGRAD_AUTOTUNE=0."""
    from minigrad.kernels.policy import tune_malloc as tune

    tune()


def set_threads() -> None:
    """What a demo does (``minigrad.kernels.policy.set_threads``): the thread count measured on its own steps."""
    from minigrad.kernels.policy import set_threads as choose

    choose()


def worker_env(threads: int, malloc_tune: bool = True, root: str | None = None) -> dict[str, str]:
    """The environment for a measuring subprocess: ours, plus the thread caps.

    A minigrad worker raises glibc's malloc thresholds (``tune_malloc``, above);
    ``malloc_tune=False`` opts out (``MINIGRAD_AUTOTUNE=0``), for A/B runs. ``root`` is the checkout whose
    minigrad, models and benchmarks the worker imports (default: this one).
    """
    env = dict(os.environ)
    env.update(thread_env(threads))
    env["MINIGRAD_THREADS"] = str(threads)  # what minigrad's policy.set_threads applies (the [fast] pools too)
    env["MINIGRAD_AUTOTUNE"] = "1" if malloc_tune else "0"
    # So `python -m benchmarks...` finds that checkout whatever the working directory.
    root = root or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


@contextlib.contextmanager
def quiet_stderr():
    """Silence file descriptor 2 (C++ libraries such as torch's profiler print there directly)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


# --------------------------------------------------------------------------------------
# Worker processes: one per framework, driven one command at a time
#
# NumPy's OpenBLAS threads and torch's OpenMP threads both spin for a while after
# each call, waiting for more work. In one process on two cores they steal each
# other's cores and both look several times slower than they are; so every
# framework runs in a process of its own, and the parent takes turns asking them.
# --------------------------------------------------------------------------------------


class Worker:
    """The parent's handle on ``python -m <module> --worker <kind> <args>``: ``ask(command) -> dict``."""

    def __init__(self, module: str, kind: str, args: list[str], threads: int, malloc_tune: bool = True,
                 name: str | None = None, root: str | None = None, env: dict | None = None):
        command = [sys.executable, "-m", module, "--worker", kind, "--threads", str(threads), *args]
        self.name = name or kind  # how the parent tells workers apart (two of one kind may differ in malloc)
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                        env={**worker_env(threads, malloc_tune, root), **(env or {})}, cwd=root)
        self.hello = self._read()  # the worker's first line: what it built

    def _read(self) -> dict:
        line = self.process.stdout.readline()
        if not line:
            code = self.process.wait()
            raise RuntimeError(f"the {self.name} worker exited (code {code}) without answering; "
                               f"its error is printed above")
        return json.loads(line)

    def ask(self, command: str) -> dict:
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        answer = self._read()
        if "error" in answer:
            raise RuntimeError(f"the {self.name} worker: {answer['error']}")
        return answer

    def close(self) -> dict:
        """Stop the worker; returns its last words (its peak RSS)."""
        final = self.ask("quit")
        self.process.wait()
        return final

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def serve(hello: dict, handle) -> None:
    """The worker side: send ``hello``, then answer each command line with ``handle(command) -> dict``.

    "quit" ends the loop with ``{"peak_rss_mb": ...}``. Anything the measured
    code prints goes to stderr, so it cannot corrupt the answers on stdout.
    """
    protocol = sys.stdout
    sys.stdout = sys.stderr

    def reply(obj: dict) -> None:
        protocol.write(json.dumps(obj) + "\n")
        protocol.flush()

    reply(hello)
    for line in sys.stdin:
        command = line.strip()
        if command == "quit":
            reply({"peak_rss_mb": peak_rss_mb()})
            return
        try:
            reply(handle(command))
        except Exception as err:  # report it to the parent, which raises it
            reply({"error": f"{command!r} failed: {type(err).__name__}: {err}"})


# --------------------------------------------------------------------------------------
# Memory
# --------------------------------------------------------------------------------------


def peak_rss_mb() -> float:
    """The largest resident set this process has had so far, in MiB (its high-water mark)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10  # bytes on macOS, KiB on Linux


def rss_mb() -> float:
    """The resident set right now, in MiB (Linux /proc; falls back to the peak elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            resident_pages = int(f.read().split()[1])
        return resident_pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return peak_rss_mb()


# --------------------------------------------------------------------------------------
# Timing and summaries
# --------------------------------------------------------------------------------------


def interleave(contenders: dict, rounds: int, warmup: int = 1) -> dict[str, list[float]]:
    """Call each contender once per round, in turn (A, B, A, B, ...); return each one's times in seconds.

    ``contenders`` maps a name to a zero-argument callable. The first ``warmup``
    rounds are run but not recorded (first calls allocate, fill caches, compile).
    """
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for i in range(warmup + rounds):
        for name, fn in contenders.items():
            start = clock()
            fn()
            elapsed = clock() - start
            if i >= warmup:
                times[name].append(elapsed)
    return times


def time_per_call(fn, calls: int) -> float:
    """Seconds per call of ``fn``, from one timed loop of ``calls`` calls (for sub-microsecond ops)."""
    start = clock()
    for _ in range(calls):
        fn()
    return (clock() - start) / calls


def median(values) -> float:
    return statistics.median(values) if values else float("nan")


def summary(values) -> dict[str, float]:
    """Median, min and count of a list of measurements."""
    return {"median": median(values), "min": min(values) if values else float("nan"), "n": len(values)}


# --------------------------------------------------------------------------------------
# Printing
# --------------------------------------------------------------------------------------


def markdown_table(headers: list[str], rows: list[list]) -> str:
    """A Markdown table (pastes into a README as is); numbers are printed as given."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    line = "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths)) + " |"
    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    body = ["| " + " | ".join(c.rjust(w) for c, w in zip(row, widths)) + " |" for row in cells]
    return "\n".join([line, rule, *body])


def fmt_ms(seconds: float) -> str:
    ms = seconds * 1e3
    return f"{ms:.0f}" if ms >= 100 else f"{ms:.1f}" if ms >= 1 else f"{ms:.3f}"


def fmt_us(seconds: float) -> str:
    us = seconds * 1e6
    return f"{us:.1f}" if us < 100 else f"{us:.0f}"


def load_average() -> float:
    """The 1-minute load average (runnable processes, whoever they belong to); NaN where unknown."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def load_note(before: float, after: float) -> str:
    """A line saying how busy the machine was; loud when other work competed for the cores."""
    cpus = os.cpu_count() or 1
    note = f"1-min load average {before:.1f} before, {after:.1f} after, on {cpus} CPUs"
    if before > cpus / 2 or after > cpus / 2 + 1:  # the benchmark itself keeps about one CPU busy
        note += (": OTHER WORK WAS RUNNING; 2-thread BLAS/OpenMP (torch especially) slows down badly when the "
                 "cores are shared, so these times are inflated; rerun on a quiet machine")
    return note + "."


def machine_line(threads: int) -> str:
    """One line saying where a measurement was taken: CPU model, core count, versions."""
    import platform

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return (f"machine: {cpu}, {os.cpu_count()} logical CPUs; Python {platform.python_version()}; "
            f"{threads} BLAS thread(s)")
