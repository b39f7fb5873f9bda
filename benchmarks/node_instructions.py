"""Instructions per graph node, forward + backward, counted by valgrind's cachegrind (deterministic, unlike a clock).

    python -m benchmarks.node_instructions            # chains of 100 multiplies: (60 chains - 10 chains) / 5000
    python -m benchmarks.node_instructions --parts    # also: forward alone, and backward without its records

Each chain is ``y = y * 1.0001`` 100 times on a 4-element tensor, then
``y.sum().backward()``. Running 10 chains and N chains and dividing the
difference by the nodes between them leaves out start-up and imports. BLAS
threads are set to 1 (a spinning pool thread adds instructions that depend on
timing), hashing is seeded and address randomisation is off, so a count repeats
to the last digit. Needs ``valgrind`` (``apt-get install valgrind``); the NumPy
backend is used.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHAIN = """
import sys
import numpy as np
import minigrad as mg
PART = {part!r}
if PART == "no records":
    from minigrad.autograd import backprop
    backprop.remember_inputs = lambda t: None
x = mg.Tensor(np.ones(4, dtype=np.float32), requires_grad=True)
for _ in range(int(sys.argv[1])):
    y = x
    for _ in range(100):
        y = y * 1.0001
    if PART == "forward":
        y.sum()
    else:
        y.sum().backward()
"""


def instructions(part: str, chains: int, scratch: Path) -> int:
    """Instructions valgrind counts for ``chains`` chains (the whole process)."""
    script = scratch / "chain.py"
    script.write_text(CHAIN.format(part=part))
    env = dict(os.environ, PYTHONPATH=str(ROOT), OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
               MKL_NUM_THREADS="1", PYTHONHASHSEED="0", MINIGRAD_BACKEND="numpy")
    command = ["valgrind", "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={scratch / 'out'}",
               sys.executable, str(script), str(chains)]
    if shutil.which("setarch"):
        command = ["setarch", "-R", *command]
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if done.returncode != 0 or not found:
        raise RuntimeError(f"valgrind failed:\n{done.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def per_node(part: str, chains: int) -> float:
    with tempfile.TemporaryDirectory(prefix="minigrad-cg-") as scratch:
        few = instructions(part, 10, Path(scratch))
        many = instructions(part, chains, Path(scratch))
    return (many - few) / ((chains - 10) * 100)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.node_instructions", description=__doc__.split("\n")[0])
    p.add_argument("--chains", type=int, default=60, help="chains in the long run (the short one has 10)")
    p.add_argument("--parts", action="store_true", help="also forward alone and backward without its records")
    args = p.parse_args(argv)
    if shutil.which("valgrind") is None:
        sys.exit("error: valgrind is not installed (apt-get install valgrind)")
    parts = ["forward + backward"] + (["forward", "no records"] if args.parts else [])
    print("| chain of 100 multiplies | instructions per node |\n|---|---:|")
    for part in parts:
        print(f"| {part} | {per_node(part, args.chains) / 1000:.1f}k |")


if __name__ == "__main__":
    main()
