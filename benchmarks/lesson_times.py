"""Wall time of the main demo and of every lesson, run as a user runs them, with the machine and its load.

    python -m benchmarks.lesson_times                 # every lesson; the char-LM demos from short runs
    python -m benchmarks.lesson_times --full          # the char-LM demos at their full default length too
    python -m benchmarks.lesson_times --only quickstart,seq2seq

Each command runs in a fresh process (``python -m demos.<name>``), with no
thread setting of ours: what a user sees, thread policy included. The README's
time columns come from this script.

The character-level demos (``demos.train_charlm``: GPT 1600 steps, LSTM 1000,
RNN 3000) take minutes, so by default each runs ``--steps 200`` and its full
time is estimated: the short run's wall time plus its training seconds
(``metrics.json``) scaled to the full step count. The estimate leaves out the
full run's extra evaluations and text samples (about 1-3 seconds in all at the
defaults); ``--full`` runs them at full length instead.

Every row says the load it ran under: the 1-minute load average before and
after, and the cores other processes kept busy in the half second before it
started (``busy_cores``, from ``/proc/stat``: a description of the load, not
something the thread policy uses). Times on a busy machine are upper bounds.
Each command runs with ``MINIGRAD_THREADS_VERBOSE=1``, so the thread counts its
policy measured and kept are in the table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import _util

ROOT = Path(__file__).resolve().parents[1]

# name -> (the command's arguments after ``python -m``, does it take --out)
LESSONS = {
    "quickstart": (["demos.quickstart"], False),
    "rnn_vanishing_gradient": (["demos.rnn_vanishing_gradient"], True),
    "attention_from_scratch": (["demos.attention_from_scratch"], True),
    "transformer_lesson": (["demos.transformer_lesson"], False),
    "draw_graphs": (["demos.draw_graphs"], True),
    "forward_or_reverse": (["demos.forward_or_reverse"], True),
    "memory_lesson": (["demos.memory_lesson"], True),
    "data_parallel_lesson": (["demos.data_parallel_lesson"], True),
    "precision_lesson": (["demos.precision_lesson"], True),
    "flash_attention_lesson": (["demos.flash_attention_lesson"], True),
    "induction_heads": (["demos.induction_heads", "--quiet"], True),
    "seq2seq": (["demos.seq2seq", "--quiet"], True),
}
# name -> (model, its default step count)
CHARLM = {"train_charlm (GPT)": ("gpt", 1600), "train_charlm --model lstm": ("lstm", 1000),
          "train_charlm --model rnn": ("rnn", 3000)}


def clean_env() -> dict[str, str]:
    """Our environment without thread settings, so each command makes its own choice."""
    env = {k: v for k, v in os.environ.items() if k not in _util.THREAD_VARIABLES and k != "MINIGRAD_THREADS"}
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["MPLBACKEND"] = "Agg"
    env["MINIGRAD_THREADS_VERBOSE"] = "1"  # the thread policy says what it measured (stderr)
    return env


def busy_cores(interval: float = 0.5) -> float:
    """Cores other processes kept busy over ``interval`` (all CPUs' busy time from /proc/stat); 0.0 off Linux."""
    def ticks():
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:8]]
        return sum(fields) - fields[3] - fields[4], sum(fields)

    try:
        busy0, total0 = ticks()
    except (OSError, ValueError, IndexError):
        return 0.0
    time.sleep(interval)
    busy1, total1 = ticks()
    return max(0.0, (busy1 - busy0) / max(1, total1 - total0) * (os.cpu_count() or 1))


def timed(command: list[str]) -> dict:
    """Run ``python <command>``; its wall time, the load around it, and its 'threads:' line if it printed one."""
    busy, load_before = busy_cores(0.5), _util.load_average()
    start = time.perf_counter()
    done = subprocess.run([sys.executable, *command], cwd=ROOT, env=clean_env(), capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed (code {done.returncode}):\n{done.stderr[-2000:]}")
    said = [line for line in (done.stdout + done.stderr).splitlines() if line.startswith("threads:")]
    threads = said[-1] if said else ""  # the last: what the policy measured and kept
    return {"wall": wall, "busy": busy, "load": (load_before, _util.load_average()), "threads": threads}


def time_lesson(name: str, scratch: Path) -> dict:
    args, takes_out = LESSONS[name]
    command = ["-m", *args] + (["--out", str(scratch / name)] if takes_out else [])
    return {"name": f"python -m {' '.join(args)}", **timed(command)}


def time_charlm(name: str, scratch: Path, steps: int | None) -> dict:
    """A char-LM run of ``steps`` (None: the default length), with the full run's time estimated if shorter."""
    model, full_steps = CHARLM[name]
    folder = scratch / model
    command = ["-m", "demos.train_charlm", "--model", model, "--quiet", "--out", str(folder)]
    if steps is not None and steps < full_steps:
        command += ["--steps", str(steps)]
    run = timed(command)
    metrics = json.loads((folder / "metrics.json").read_text())
    ran = metrics["step"]
    run["name"] = f"python -m demos.{name}"
    run["ran"] = f"{ran} of {full_steps} steps"
    run["estimated"] = ran < full_steps
    run["estimate"] = run["wall"] + metrics["training_seconds"] * (full_steps / ran - 1)
    run["val_bpc"] = metrics["final_val_bpc"] if ran == full_steps else None
    return run


def report(rows: list[dict]) -> str:
    headers = ["command", "wall time", "measured as", "cores kept busy by others at start",
               "1-min load before / after", "threads chosen"]
    table = []
    for r in rows:
        estimated = r.get("estimated", False)
        time_cell = f"{r['estimate']:.0f} s (estimated)" if estimated else f"{r['wall']:.1f} s"
        how = (f"{r['ran']} in {r['wall']:.0f} s, scaled" if estimated else
               (r["ran"] if r.get("ran") else "one run"))
        threads = r["threads"].replace("threads: ", "").split(";")[0] + ")" if r["threads"] else "(not printed)"
        table.append([r["name"], time_cell, how, f"{r['busy']:.1f}", f"{r['load'][0]:.1f} / {r['load'][1]:.1f}",
                      threads])
    return _util.markdown_table(headers, table)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.lesson_times", description=__doc__.split("\n")[0])
    p.add_argument("--full", action="store_true", help="run the char-LM demos at their full default length")
    p.add_argument("--steps", type=int, default=200, help="steps of each short char-LM run (default: 200)")
    p.add_argument("--only", help="comma-separated names to run (lessons: " + ", ".join(LESSONS)
                   + "; char-LM: gpt, lstm, rnn)")
    p.add_argument("--json", metavar="PATH", help="also write the raw measurements as JSON")
    args = p.parse_args(argv)
    wanted = None if args.only is None else {w.strip() for w in args.only.split(",") if w.strip()}
    models = {model for model, _ in CHARLM.values()}
    if wanted is not None and (unknown := wanted - set(LESSONS) - models):
        p.error(f"--only: unknown name(s) {sorted(unknown)}")
    print("# Wall time of the demos and lessons, each in a fresh process, as a user runs it")
    print(_util.machine_line(os.cpu_count() or 1).rsplit(";", 1)[0])
    rows = []
    with tempfile.TemporaryDirectory(prefix="minigrad-lessons-") as scratch:
        for name, (model, _) in CHARLM.items():
            if wanted is None or model in wanted:
                rows.append(time_charlm(name, Path(scratch), None if args.full else args.steps))
        for name in LESSONS:
            if wanted is None or name in wanted:
                rows.append(time_lesson(name, Path(scratch)))
    print(report(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
