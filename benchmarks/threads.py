"""The thread policy under load: the default against fixed 1 and N threads, for training and for sampling.

    python -m benchmarks.threads                  # 0, 1 and 2 busy processes; 3 rounds; all three workloads
    python -m benchmarks.threads --work sample --busy 2 --rounds 5
    python -m benchmarks.threads --quick          # 0 busy, 1 round, a few steps: checks that it runs

Each run is a README command in a fresh process, as a user starts it, with one
of three thread settings:

* **default**: nothing set, so the command's ``set_threads()`` chooses
  (``minigrad/kernels/policy.py``: 1, N/2 and N threads timed on the first training
  steps, the quickest kept, timed again every 500 steps; sampling keeps 1);
* **1 thread** and **all cores**: ``MINIGRAD_THREADS=1`` / ``=<cores>``.

The workloads (``--work``), each measured as the work it does per second:

* ``train``: ``python -m demos.train_charlm --steps N --quiet``: training
  tokens/s, the demo's own count (``metrics.json``: training tokens over training
  seconds; evaluation, start-up and saving not included);
* ``induction``: ``python -m demos.induction_heads --steps N --quiet``: steps per
  second of wall time, start-up included;
* ``sample``: ``python -m demos.sample RUN --max-new-tokens N`` on a run the
  script trains first: the tokens/s the command prints.

The competing load is one or two processes that spin on a core each. They
are started half a second before each run and stop by themselves a fixed time
later (``--load-seconds``), so an interrupted benchmark leaves nothing behind;
the script also stops them as soon as its run ends. The settings take turns
within each round, their order turned by one from round to round (default, 1, all; 1, all,
default; ...), so a burst of outside load lands on all three alike. The table gives the default's
rate over the better fixed count's both as a ratio of medians and as the median of the rounds'
own ratios (paired: a slow stretch of the machine falls on one round's runs together). It also
says what the default chose (its ``threads:`` lines, from ``MINIGRAD_THREADS_VERBOSE=1``) and the
1-minute load average around each group: the machine may be busy with other work besides the load
made here.
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
    env = {k: v for k, v in os.environ.items()
           if k not in _util.THREAD_VARIABLES and k not in ("MINIGRAD_THREADS", "MINIGRAD_AUTOTUNE")}
    if threads is not None:
        env["MINIGRAD_THREADS"] = str(threads)
    env["MINIGRAD_THREADS_VERBOSE"] = "1"  # the default says what it measured and kept (stderr)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _run(command: list[str], threads: int | None) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", *command], env=demo_env(threads), cwd=ROOT, capture_output=True,
                          text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed (code {done.returncode}):\n{done.stderr[-2000:]}")
    return done


def _chosen(done: subprocess.CompletedProcess) -> str:
    """The last thing the thread policy said it chose (its measured choice, once it has measured)."""
    said = [line for line in (done.stdout + done.stderr).splitlines() if line.startswith("threads:")]
    return said[-1] if said else ""


def train_charlm(steps: int, threads: int | None, folder: Path) -> dict:
    """One training run; its training tokens/s."""
    done = _run(["demos.train_charlm", "--steps", str(steps), "--quiet", "--out", str(folder), "--eval-every",
                 str(steps), "--sample-every", "0"], threads)
    metrics = json.loads((folder / "metrics.json").read_text())
    config = json.loads((folder / "config.json").read_text())
    train = config.get("train", config)
    tokens = metrics["step"] * train["batch_size"] * train["block_size"]
    return {"rate": tokens / metrics["training_seconds"], "threads": _chosen(done)}


def induction_heads(steps: int, threads: int | None, folder: Path) -> dict:
    """One run of the induction-heads lesson; its steps per second of wall time."""
    start = time.perf_counter()
    done = _run(["demos.induction_heads", "--steps", str(steps), "--eval-every", str(steps), "--quiet", "--out",
                 str(folder)], threads)
    return {"rate": steps / (time.perf_counter() - start), "threads": _chosen(done)}


def sample(tokens: int, threads: int | None, run_folder: Path) -> dict:
    """One ``demos.sample`` run; the tokens/s it prints."""
    done = _run(["demos.sample", str(run_folder), "--max-new-tokens", str(tokens)], threads)
    found = re.search(r"\(([\d,]+) tokens in ([\d.]+) s, ([\d,]+) per second\)", done.stderr)
    if not found:
        raise RuntimeError(f"demos.sample printed no rate:\n{done.stderr[-1000:]}")
    return {"rate": float(found.group(3).replace(",", "")), "threads": _chosen(done)}


WORK = {"train": ("demos.train_charlm: training tokens/s", train_charlm),
        "induction": ("demos.induction_heads: steps/s (wall)", induction_heads),
        "sample": ("demos.sample: tokens/s", sample)}


def measure(work: str, busy: int, rounds: int, size: int, load_seconds: float, scratch: Path,
            sample_run: Path | None = None) -> dict:
    """Every setting ``rounds`` times, in turn, each run beside ``busy`` spinning processes."""
    n = _util_cores()
    settings = {"default": None, "1 thread": 1, f"all {n} cores": n}
    results = {name: [] for name in settings}
    chosen = []
    load_before = _util.load_average()
    for r in range(rounds):
        for name in round_order(list(settings), r):
            threads = settings[name]
            load = start_load(busy, load_seconds)
            try:
                time.sleep(0.5 if busy else 0.0)  # the load is running before the command starts
                where = sample_run if work == "sample" else scratch / f"{work}-{busy}-{r}-{threads}"
                run = WORK[work][1](size, threads, where)
            finally:
                stop_load(load)
            results[name].append(run["rate"])
            if threads is None:
                chosen.append(run["threads"])
            time.sleep(0.5)  # the spinning BLAS threads of the run before stop
    return {"work": work, "busy": busy, "results": results, "chosen": chosen,
            "load": [load_before, _util.load_average()]}


def round_order(names: list[str], r: int) -> list[str]:
    """The settings' order in round ``r``: turned by one each round, so that none always runs first."""
    return names[r % len(names):] + names[:r % len(names)]


def _util_cores() -> int:
    from minigrad.kernels.policy import usable_cores

    return usable_cores()[0]


def _picked(line: str) -> str:
    """'auto: 2 measured quickest', or the count it ran with before it had measured ('1, still measuring')."""
    line = re.sub(r"\s*\(.*", "", line.replace("threads: ", ""))
    return line if "measured" in line or not line else f"{line}, still measuring"


def paired_ratios(default: list[float], best: list[float]) -> list[float]:
    """Round by round, the default's rate over the better fixed count's (the one with the better median).

    The settings of a round run one after the other, so a stretch when the machine is slower (other work,
    a neighbour on the host) lands on the runs of one round alike: the ratio within a round leaves it out,
    where a ratio of the two medians can take one setting's slow rounds against the other's quick ones.
    """
    return [d / b for d, b in zip(default, best)]


def _fmt(rate: float) -> str:
    return f"{rate:,.0f}" if rate >= 100 else f"{rate:.3g}"


def report(groups: list[dict]) -> str:
    names = list(groups[0]["results"])
    headers = ["workload", "competing busy processes"] + [f"{name} (median, min-max)" for name in names] + [
        "default / best (medians)", "default / best, paired (median, min-max)", "what the default chose",
        "1-min load before / after"]
    rows = []
    for g in groups:
        medians = {name: _util.median(v) for name, v in g["results"].items()}
        cells = [f"{_fmt(medians[name])} ({_fmt(min(v))}-{_fmt(max(v))})" for name, v in g["results"].items()]
        best = max(names[1:], key=medians.get)
        paired = paired_ratios(g["results"]["default"], g["results"][best])
        picked = sorted({_picked(c) for c in g["chosen"]})
        rows.append([WORK[g["work"]][0], str(g["busy"]), *cells, f"{medians['default'] / medians[best]:.2f}",
                     f"{_util.median(paired):.2f} ({min(paired):.2f}-{max(paired):.2f})",
                     "; ".join(picked), f"{g['load'][0]:.1f} / {g['load'][1]:.1f}"])
    return _util.markdown_table(headers, rows)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.threads", description=__doc__.split("\n")[0])
    p.add_argument("--work", default="train,induction,sample", help="workloads (comma-separated): " + ", ".join(WORK))
    p.add_argument("--busy", default="0,1,2", help="competing busy processes per group (comma-separated)")
    p.add_argument("--rounds", type=int, default=3, help="runs of each setting per group")
    p.add_argument("--steps", type=int, default=60, help="training steps per train_charlm run")
    p.add_argument("--induction-steps", type=int, default=150, help="training steps per induction_heads run")
    p.add_argument("--tokens", type=int, default=300, help="tokens per demos.sample run")
    p.add_argument("--load-seconds", type=float, default=120.0, help="each busy process stops after this long")
    p.add_argument("--quick", action="store_true", help="0 busy, 1 round, a few steps: checks that it runs")
    args = p.parse_args(argv)
    if args.quick:
        args.busy, args.rounds, args.steps, args.induction_steps, args.tokens = "0", 1, 10, 10, 20
    busy = [int(b) for b in args.busy.split(",") if b.strip()]
    works = [w.strip() for w in args.work.split(",") if w.strip()]
    unknown = [w for w in works if w not in WORK]
    if unknown:
        p.error(f"--work: unknown {unknown}; choose from {list(WORK)}")
    sizes = {"train": args.steps, "induction": args.induction_steps, "sample": args.tokens}
    print("# The thread policy: the default against 1 thread and all cores, beside competing busy processes")
    print(_util.machine_line(_util_cores()).replace(f"; {_util_cores()} BLAS thread(s)", ""))
    print(f"{args.rounds} runs per setting and group, in turn; medians (min-max); higher is better\n")
    groups = []
    with tempfile.TemporaryDirectory(prefix="minigrad-threads-") as scratch:
        scratch = Path(scratch)
        sample_run = None
        if "sample" in works:  # a small trained run to sample from (its quality does not matter here)
            sample_run = scratch / "sample-run"
            _run(["demos.train_charlm", "--steps", "20", "--quiet", "--out", str(sample_run), "--eval-every", "20",
                  "--sample-every", "0"], 1)
        for work in works:
            for b in busy:
                groups.append(measure(work, b, args.rounds, sizes[work], args.load_seconds, scratch, sample_run))
                print(report(groups[-1:]), flush=True)
    print("\nAll groups:\n")
    print(report(groups))


if __name__ == "__main__":
    main()
