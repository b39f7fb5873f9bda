"""The thread policy under load: the main demo's tokens/s by default, on 1 thread and on all cores.

    python -m benchmarks.threads                  # 0, 1 and 2 busy processes; 3 rounds; 80 steps a run
    python -m benchmarks.threads --quick          # 0 busy, 1 round, 10 steps: checks that it runs

Each run is ``python -m demos.train_charlm --steps N --quiet`` in a fresh process,
as a user starts it, with one of three thread settings:

* **default**: nothing set, so the demo's ``runtime.set_threads()`` chooses
  (``minigrad/runtime.py``: the cores other processes leave free);
* **1 thread** and **all cores**: ``MINIGRAD_THREADS=1`` / ``=<cores>``.

The competing load is one or two processes that spin on a core each. They
are started half a second before each run (so the default's look at the
machine sees them) and stop by themselves a fixed time later (``--load-seconds``),
so an interrupted benchmark leaves nothing behind; the script also stops them
as soon as its run ends. The settings take turns round by round (default, 1,
all, default, ...), so a burst of outside load lands on all three alike.
tokens/s is the demo's own count: training tokens over training seconds
(``metrics.json``; evaluation, start-up and saving not included).

The machine may be busy with other work besides the load made here: the table
says the 1-minute load average around each group of runs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import _util

# A busy process that stops by itself: spins until its deadline, argv[1] seconds from its start.
SPIN = "import sys, time\nend = time.perf_counter() + float(sys.argv[1])\nwhile time.perf_counter() < end:\n    pass\n"

ROOT = Path(__file__).resolve().parents[1]


def start_load(processes: int, seconds: float) -> list[subprocess.Popen]:
    """``processes`` spinning processes, each stopping by itself after ``seconds``."""
    return [subprocess.Popen([sys.executable, "-c", SPIN, str(seconds)]) for _ in range(processes)]


def stop_load(load: list[subprocess.Popen]) -> None:
    for p in load:
        if p.poll() is None:
            p.terminate()
        p.wait()


def demo_env(threads: int | None) -> dict[str, str]:
    """Our environment without any thread setting, plus ``MINIGRAD_THREADS`` when ``threads`` is given."""
    env = {k: v for k, v in os.environ.items() if k not in _util.THREAD_VARIABLES and k != "MINIGRAD_THREADS"}
    if threads is not None:
        env["MINIGRAD_THREADS"] = str(threads)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def run_demo(steps: int, threads: int | None, folder: Path) -> dict:
    """One demo run; returns its tokens/s and the thread choice it printed."""
    command = [sys.executable, "-m", "demos.train_charlm", "--steps", str(steps), "--quiet", "--out", str(folder),
               "--eval-every", str(steps), "--sample-every", "0"]
    done = subprocess.run(command, env=demo_env(threads), cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"the demo failed (code {done.returncode}):\n{done.stderr[-2000:]}")
    metrics = json.loads((folder / "metrics.json").read_text())
    config = json.loads((folder / "config.json").read_text())
    train = config.get("train", config)
    tokens = metrics["step"] * train["batch_size"] * train["block_size"]
    threads_line = next((line for line in done.stdout.splitlines() if line.startswith("threads:")), "")
    return {"tokens_per_s": tokens / metrics["training_seconds"], "threads": threads_line}


def measure(busy: int, rounds: int, steps: int, load_seconds: float, scratch: Path) -> dict:
    """Every setting ``rounds`` times, in turn, each run beside ``busy`` spinning processes."""
    n = _util_cores()
    settings = {"default": None, "1 thread": 1, f"all {n} cores": n}
    results = {name: [] for name in settings}
    chosen = []
    load_before = _util.load_average()
    for r in range(rounds):
        for name, threads in settings.items():
            load = start_load(busy, load_seconds)
            try:
                time.sleep(0.5 if busy else 0.0)  # the load is running before the demo looks
                run = run_demo(steps, threads, scratch / f"{busy}-{r}-{threads}")
            finally:
                stop_load(load)
            results[name].append(run["tokens_per_s"])
            if threads is None:
                chosen.append(run["threads"])
            time.sleep(0.5)  # the spinning BLAS threads of the run before stop
    return {"busy": busy, "results": results, "chosen": chosen, "load": [load_before, _util.load_average()]}


def _util_cores() -> int:
    from minigrad.runtime import cores

    return cores()


def report(groups: list[dict]) -> str:
    names = list(groups[0]["results"])
    headers = ["competing busy processes"] + [f"{name} tok/s (median, min-max)" for name in names] + [
        "default / best (median)", "what the default chose", "1-min load before / after"]
    rows = []
    for g in groups:
        medians = {name: _util.median(v) for name, v in g["results"].items()}
        cells = [f"{medians[name]:,.0f} ({min(v):,.0f}-{max(v):,.0f})" for name, v in g["results"].items()]
        best = max(medians[name] for name in names[1:])
        picked = sorted(set(re.sub(r"auto: \d+ cores, ", "", c.split(";")[0].replace("threads: ", "")) + ")"
                            for c in g["chosen"]))
        rows.append([str(g["busy"]), *cells, f"{medians['default'] / best:.2f}", "; ".join(picked),
                     f"{g['load'][0]:.1f} / {g['load'][1]:.1f}"])
    return _util.markdown_table(headers, rows)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.threads", description=__doc__.split("\n")[0])
    p.add_argument("--busy", default="0,1,2", help="competing busy processes per group (comma-separated)")
    p.add_argument("--rounds", type=int, default=3, help="runs of each setting per group")
    p.add_argument("--steps", type=int, default=80, help="training steps per demo run")
    p.add_argument("--load-seconds", type=float, default=60.0, help="each busy process stops after this long")
    p.add_argument("--quick", action="store_true", help="0 busy, 1 round, 10 steps: checks that it runs")
    args = p.parse_args(argv)
    if args.quick:
        args.busy, args.rounds, args.steps = "0", 1, 10
    busy = [int(b) for b in args.busy.split(",") if b.strip()]
    print("# The main demo's training tokens/s: default thread policy, 1 thread, all cores")
    print(_util.machine_line(_util_cores()).replace(f"; {_util_cores()} BLAS thread(s)", ""))
    print(f"{args.rounds} runs of {args.steps} steps per setting and group, in turn; medians (min-max)\n")
    with tempfile.TemporaryDirectory(prefix="minigrad-threads-") as scratch:
        groups = [measure(b, args.rounds, args.steps, args.load_seconds, Path(scratch)) for b in busy]
    print(report(groups))


if __name__ == "__main__":
    main()
