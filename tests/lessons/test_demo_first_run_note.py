"""The training demos say once, on the first run with the [fast] backend, that numba is compiling its kernels
(the first steps are slow for that reason only), and say nothing once the kernels are in numba's cache."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import numpy as np
import minigrad as mg
from demos._common import set_threads
set_threads(prog="demo")
mg.nn.functional.gelu(mg.tensor(np.ones(5000, np.float32)))  # one compiled kernel, compiled (or loaded) here
"""


@pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="the [fast] extra (numba) is not installed")
def test_the_first_run_says_that_numba_compiles_and_the_next_does_not(tmp_path):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba"), "PYTHONPATH": str(ROOT),
           "MINIGRAD_BACKEND": "auto", "MINIGRAD_THREADS": "1"}
    note = "backend: numba compiles the [fast] backend's kernels on this first run"
    outs = [subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=300) for _ in range(2)]
    assert [o.returncode for o in outs] == [0, 0], outs[0].stderr + outs[1].stderr
    assert note in outs[0].stdout and note not in outs[1].stdout
    env.update(MINIGRAD_BACKEND="numpy", NUMBA_CACHE_DIR=str(tmp_path / "empty"))  # no compiled kernels: no note
    plain = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=300)
    assert plain.returncode == 0 and note not in plain.stdout
