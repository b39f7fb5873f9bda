"""The optional [fast] backend (minigrad/kernels/backend.py): chosen at the first kernel call (never by
``import minigrad``), switched off by MINIGRAD_BACKEND=numpy, never loaded without the extra, one OpenMP runtime
when on, same numbers as NumPy.

Each check runs in a fresh interpreter, since the choice is made once per process.
"""

import json
import os
import subprocess
import sys

import pytest

HAS_NUMBA = __import__("importlib.util").util.find_spec("numba") is not None
THREAD_VARIABLES = ("MINIGRAD_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                    "MKL_THREADING_LAYER", "NUMBA_THREADING_LAYER")

# Makes `import numba` fail, as on an install without the [fast] extra.
WITHOUT_NUMBA = """
import importlib.abc, sys
class _NoNumba(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "numba" or name.startswith("numba."):
            raise ModuleNotFoundError(f"No module named {name!r}")
        return None
sys.meta_path.insert(0, _NoNumba())
import importlib.util
_find_spec = importlib.util.find_spec
importlib.util.find_spec = lambda name, *a: None if name.split(".")[0] == "numba" else _find_spec(name, *a)
"""

REPORT = """
import json, sys
import minigrad as mg
modules = sorted(m for m in ("numba", "llvmlite", "threadpoolctl") if m in sys.modules)
b = mg.backend()
mapped = open("/proc/self/maps").read() if sys.platform.startswith("linux") else ""
print(json.dumps({"backend": b["backend"], "gemm": b["gemm"], "why": b["why"], "kernels": b["kernels"],
                  "modules": modules,
                  "mkl_loaded": "libmkl" in mapped}))
"""


def run(code: str, **env) -> dict:
    clean = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES and k != "MINIGRAD_BACKEND"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**clean, **env})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_without_the_extra_import_minigrad_loads_neither_numba_nor_mkl():
    result = run(WITHOUT_NUMBA + REPORT)
    assert result["modules"] == [] and not result["mkl_loaded"]
    assert result["backend"] == "numpy" and result["gemm"] == "numpy"
    assert "not installed" in result["why"] and "pip install -e '.[fast]'" in result["why"]
    assert set(result["kernels"].values()) == {"numpy"}


IMPORT_ONLY = """
import json, sys
import numpy as np
import minigrad as mg
before = sorted(m for m in ("numba", "llvmlite") if m in sys.modules)
mg.tensor(np.ones((2, 3), np.float32)).softmax(-1)  # a kernel's first call
after = sorted(m for m in ("numba", "llvmlite") if m in sys.modules)
print(json.dumps({"before": before, "after": after, "backend": mg.backend()["backend"]}))
"""


@pytest.mark.skipif(not HAS_NUMBA, reason="the [fast] extra (numba) is not installed")
def test_import_minigrad_loads_no_optional_library_until_a_kernel_runs():
    result = run(IMPORT_ONLY)
    assert result["before"] == []  # import minigrad: numba not loaded, though installed
    assert result["after"] == ["llvmlite", "numba"] and result["backend"] == "numba"


def test_minigrad_backend_numpy_switches_it_off():
    result = run(REPORT, MINIGRAD_BACKEND="numpy")
    assert result["modules"] == [] and not result["mkl_loaded"]
    assert result["backend"] == "numpy" and result["why"] == "MINIGRAD_BACKEND=numpy"
    assert set(result["kernels"].values()) == {"numpy"}


def test_a_bad_backend_name_is_a_clear_error():
    clean = {k: v for k, v in os.environ.items() if k != "MINIGRAD_BACKEND"}
    done = subprocess.run([sys.executable, "-c", "import minigrad"], capture_output=True, text=True,
                          env={**clean, "MINIGRAD_BACKEND": "cuda"})
    assert done.returncode != 0 and "MINIGRAD_BACKEND must be one of auto, numpy, fast, got 'cuda'" in done.stderr


def test_asking_for_fast_without_the_extra_is_an_error():
    clean = {k: v for k, v in os.environ.items() if k != "MINIGRAD_BACKEND"}
    done = subprocess.run([sys.executable, "-c", WITHOUT_NUMBA + "import minigrad"], capture_output=True,
                          text=True, env={**clean, "MINIGRAD_BACKEND": "fast"})
    assert done.returncode != 0 and "numba is not installed: pip install -e '.[fast]'" in done.stderr


# A few steps of a small GPT, so every compiled form (and MKL's GEMMs) runs; then what is loaded.
STEP = """
import json, sys
import numpy as np
import minigrad as mg
from minigrad.kernels import policy
from minigrad.optim import AdamW
from models.gpt import GPT, GPTConfig
choice = policy.set_threads(2)
model = GPT(GPTConfig(vocab_size=65, block_size=32, n_layer=2, n_head=4, d_model=64, d_ff=256, dropout=0.0,
                      bias=True, tie_weights=True, gelu_approximate="tanh"), seed=0)
opt = AdamW(list(model.parameters()), lr=1e-3)
rng = np.random.default_rng(0)
losses = []
for _ in range(3):
    seq = rng.integers(0, 65, size=(8, 33))
    _, loss = model(seq[:, :-1], seq[:, 1:])
    loss.backward()
    opt.step()
    opt.zero_grad()
    losses.append(float(loss.item()))
pools = mg.backend()["thread_pools"]
print(json.dumps({"backend": mg.backend()["backend"], "gemm": mg.backend()["gemm"], "losses": losses,
                  "pools": [{k: p.get(k) for k in ("internal_api", "user_api", "num_threads", "filepath",
                                                   "threading_layer")} for p in pools]}))
"""


@pytest.mark.skipif(not HAS_NUMBA, reason="the [fast] extra (numba) is not installed")
def test_with_the_extra_one_openmp_runtime_runs_numba_and_mkl():
    result = run(STEP)
    assert result["backend"] == "numba"
    openmp = [p for p in result["pools"] if p["user_api"] == "openmp"]
    assert len({p["filepath"] for p in openmp}) == 1, openmp  # one OpenMP runtime, shared
    assert "gomp" in openmp[0]["filepath"] or "omp" in openmp[0]["internal_api"]
    numba_pool = [p for p in result["pools"] if p["internal_api"] == "numba"]
    assert numba_pool and numba_pool[0]["threading_layer"] in ("omp", "default")
    if result["gemm"].startswith("mkl"):
        openblas = [p for p in result["pools"] if p["internal_api"] == "openblas"]
        assert all(p["num_threads"] == 1 for p in openblas)  # MKL does the big products; OpenBLAS does not spin


@pytest.mark.skipif(not HAS_NUMBA, reason="the [fast] extra (numba) is not installed")
def test_the_fast_backend_trains_as_numpy_does():
    fast = run(STEP)
    plain = run(STEP, MINIGRAD_BACKEND="numpy")
    assert plain["backend"] == "numpy" and fast["backend"] == "numba"
    assert fast["losses"] == pytest.approx(plain["losses"], rel=2e-4)
