"""The benchmarks run end to end (tiny configs, a few steps) and print the rows they promise.

Times are never asserted, only that each table has its rows and its numbers are
numbers; torch is optional, so the torch columns are checked only when it is installed.
"""

from __future__ import annotations

import importlib.util
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import _util

ROOT = Path(__file__).resolve().parents[1]
HAS_TORCH = importlib.util.find_spec("torch") is not None


def run(module: str, *args: str) -> str:
    env = {**os.environ, **_util.thread_env(1), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", module, "--threads", "1", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{module} {args} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def find_row(output: str, first_cell: str) -> list[str] | None:
    """The cells of the Markdown table row whose first cell starts with ``first_cell``, or None."""
    for line in output.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0].startswith(first_cell):
            return cells
    return None


def table_row(output: str, first_cell: str) -> list[str]:
    row = find_row(output, first_cell)
    assert row is not None, f"no table row starting with {first_cell!r} in:\n{output}"
    return row


def op_row(output: str, op: str) -> list[str]:
    """The per-op census row of ``op`` itself ("linear", not "linear_weight_grad", whichever comes first)."""
    rows = [r for r in (find_row(line, op) for line in output.splitlines()) if r is not None and r[0] == op]
    assert rows, f"no census row for the op {op!r} in:\n{output}"
    return rows[0]


def number(cell: str) -> float:
    match = re.match(r"-?[\d,]+(\.\d+)?", cell)
    assert match, f"not a number: {cell!r}"
    return float(match.group(0).replace(",", ""))


def test_train_step_minigrad_only():
    out = run("benchmarks.train_step", "--quick", "--no-torch", "--census")
    assert "### XS:" in out
    row = table_row(out, "models.GPT")
    params, loss, step_median, step_min = (number(c) for c in row[1:5])
    assert params > 0 and step_min <= step_median
    assert abs(loss - 4.17) < 0.3  # ~ln(65) for a freshly initialised model
    assert find_row(out, "torch") is None
    assert "float64 op outputs" in out
    forward, backward = table_row(out, "forward + loss"), table_row(out, "backward")
    assert number(forward[2]) > 0 and number(backward[2]) > number(forward[2])  # ops run in each phase
    matmul, linear = op_row(out, "matmul"), op_row(out, "linear")  # the per-op census table
    weights, weight_grad = op_row(out, "attention_weights"), op_row(out, "linear_weight_grad")
    # backward: 2 GEMMs per forward GEMM (the gradients of both operands): per matmul and per
    # attention_weights two matmuls; per linear a matmul (its input's) and a linear_weight_grad
    assert number(matmul[1]) > 0 and number(linear[1]) > 0 and number(weights[1]) > 0
    assert number(weight_grad[2]) == number(linear[1])
    assert number(matmul[2]) == 2 * (number(matmul[1]) + number(weights[1])) + number(linear[1])
    assert number(matmul[6]) == number(matmul[1]) and number(linear[6]) == number(linear[1])  # one VJP each


def test_train_step_against_a_baseline_checkout(tmp_path):
    # This checkout as its own baseline: a third worker, run from that directory, in turn with ours.
    out = run("benchmarks.train_step", "--quick", "--no-torch", "--baseline", str(ROOT))
    ours, baseline = table_row(out, "models.GPT"), table_row(out, "models.GPT (--baseline)")
    assert ours[0] == "models.GPT" and number(baseline[1]) == number(ours[1])  # the same model, params counted
    assert re.search(r"minigrad / minigrad\+baseline: [\d.]+x by median step", out)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "benchmarks.train_step", "--quick", "--baseline", str(tmp_path)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "is not a minigrad checkout" in done.stderr


def test_train_step_plain_script_worker_is_compared_with_the_demos_step():
    out = run("benchmarks.train_step", "--quick", "--no-torch", "--plain")
    table_row(out, "models.GPT, plain script")
    assert re.search(r"minigrad\+plain / minigrad: [\d.]+x by median step, .* [\d.]+x median of paired", out)


@pytest.mark.skipif(not HAS_TORCH, reason="torch not installed (pip install torch==2.13.0)")
def test_train_step_against_torch():
    out = run("benchmarks.train_step", "--quick", "--ab-malloc")
    untuned = "(MINIGRAD_AUTOTUNE=0)"
    table_row(out, f"models.GPT {untuned}")
    minigrad = table_row(out, "models.GPT")
    torch_row = table_row(out, "torch")
    assert number(minigrad[1]) == number(torch_row[1])  # the same model: the same parameter count
    assert abs(number(minigrad[2]) - number(torch_row[2])) < 0.1  # and about the same loss at init
    assert "minigrad / torch:" in out and "minigrad / minigrad+untuned:" in out


def test_torch_reference_is_the_same_model():
    """Given the same weights, TorchGPT and models.GPT compute the same logits, loss and gradients."""
    torch = pytest.importorskip("torch", reason="torch not installed (pip install torch==2.13.0)")
    import numpy as np

    from benchmarks.torch_gpt import TorchGPT
    from models import gpt

    config = gpt.GPTConfig(vocab_size=65, block_size=8, n_layer=2, n_head=2, d_model=16, d_ff=64,
                           gelu_approximate="tanh")
    ours = gpt.GPT(config, seed=0)
    theirs = TorchGPT(65, 8, 2, 2, 16, 64, gelu_approximate="tanh")
    theirs.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in ours.state_dict().items()})
    rng = np.random.default_rng(0)
    idx, targets = rng.integers(0, 65, size=(3, 8)), rng.integers(0, 65, size=(3, 8))
    logits, loss = ours(idx, targets)
    loss.backward()
    t_logits, t_loss = theirs(torch.from_numpy(idx), torch.from_numpy(targets))
    t_loss.backward()
    np.testing.assert_allclose(logits.data, t_logits.detach().numpy(), rtol=1e-4, atol=1e-5)
    assert abs(loss.item() - t_loss.item()) < 1e-5
    t_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad.data, t_params[name].grad.numpy(), rtol=1e-3, atol=1e-6, err_msg=name)


def test_train_step_profile():
    out = run("benchmarks.train_step", "--profile", "--quick", "--profile-top", "5")
    assert "cProfile of 1 minigrad training step" in out
    assert "tottime" in out and "function calls" in out


def test_op_overhead():
    out = run("benchmarks.op_overhead", "--quick")
    for first in ("add", "matmul", "softmax(axis=-1)", "forward, per op", "backward, per node", "x @ W_fc",
                  "Q K^T", "gelu, tanh form", "cross_entropy"):
        row = table_row(out, first)
        # Every cell a number (a time, or a difference of two: on a busy machine that can dip below 0).
        assert all(math.isfinite(number(c)) for c in row[1:] if c not in ("", "-"))
    assert ("torch us (no grad)" in out) == HAS_TORCH


def test_generation():
    out = run("benchmarks.generation", "--quick")
    for prompt_len in ("4", "12"):
        row = table_row(out, prompt_len)
        assert "differ" not in row[0]  # cached and uncached greedy decoding agree
        assert number(row[1]) > 0  # prefill time (the per-token figures are differences: noise can flip them)
        for cell in row[2:6]:
            number(cell)


def test_markdown_table_and_interleave():
    table = _util.markdown_table(["a", "bb"], [[1, "x"], [22, "yyy"]])
    lines = table.splitlines()
    assert len(lines) == 4 and len({len(line) for line in lines}) == 1  # header, rule, two rows, aligned
    order = []
    times = _util.interleave({"A": lambda: order.append("A"), "B": lambda: order.append("B")}, rounds=3, warmup=1)
    assert order == ["A", "B"] * 4  # in turn, warmup included
    assert len(times["A"]) == len(times["B"]) == 3


# --------------------------------------------------------------------------------------
# The hand-written NumPy GPT (benchmarks/numpy_gpt.py): the floor minigrad is measured against
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("gelu", ["tanh", "none"])
def test_handwritten_numpy_gpt_is_the_same_model(gelu):
    """Given minigrad's weights, the hand-written step gives minigrad's loss, every gradient and AdamW's update.

    In float64, so the two agree to rounding; two steps, so the bias corrections
    of step 2 are checked and every gradient buffer is seen to be overwritten.
    """
    import numpy as np

    from benchmarks.numpy_gpt import NumpyGPT
    from benchmarks.train_step import CONFIGS, build_minigrad, token_batches
    from minigrad.optim import AdamW

    cfg = CONFIGS["XS"]
    model = build_minigrad(cfg, gelu)
    params = dict(model.named_parameters())
    for p in params.values():
        p.data = p.data.astype(np.float64)
    ours = NumpyGPT(model.state_dict(), cfg.n_head, gelu=gelu, dtype=np.float64)
    assert sorted(ours.params) == sorted(params)  # the same names (lm_head.weight is tok_emb.weight, tied)
    optimizer = AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
    for x, y in token_batches(cfg, n=2):
        logits, loss = model(x, y)
        loss.backward()
        our_logits, our_loss = ours.forward(x, y)
        ours.backward()
        np.testing.assert_allclose(our_logits, logits.data, rtol=1e-10, atol=1e-12)
        assert abs(float(our_loss) - loss.item()) < 1e-12
        for name, p in params.items():
            # atol: k_proj.bias's gradient is exactly 0 in exact arithmetic (softmax ignores a shift
            # shared by a whole row of scores), so both are rounding noise, ~1e-17.
            np.testing.assert_allclose(ours.grads[name], p.grad.data, rtol=1e-9, atol=1e-13, err_msg=name)
        optimizer.step()
        optimizer.zero_grad()
        ours.step()
        for name, p in params.items():
            np.testing.assert_allclose(ours.params[name], p.data, rtol=1e-12, atol=1e-14, err_msg=name)


def test_handwritten_numpy_gpt_stays_float32():
    """float32 in, float32 everywhere: no Python-float or NumPy-float64 scalar upcasts an array."""
    import numpy as np

    from benchmarks.numpy_gpt import NumpyGPT
    from benchmarks.train_step import CONFIGS, build_minigrad, token_batches

    cfg = CONFIGS["XS"]
    model = build_minigrad(cfg, "tanh")
    ours = NumpyGPT(model.state_dict(), cfg.n_head)
    (x, y), = token_batches(cfg, n=1)
    logits, loss = model(x, y)
    loss.backward()
    our_logits, our_loss = ours.forward(x, y)
    assert our_logits.dtype == np.float32 and our_loss.dtype == np.float32
    assert abs(float(our_loss) - loss.item()) < 1e-5
    ours.backward()
    ours.step()
    for kind, flat in ours.flat.items():
        assert flat.dtype == np.float32, kind
    for name, p in model.named_parameters():
        np.testing.assert_allclose(ours.grads[name], p.grad.data, rtol=1e-3, atol=1e-6, err_msg=name)


def test_train_step_handwritten():
    out = run("benchmarks.train_step", "--quick", "--no-torch", "--handwritten")
    minigrad, ours = table_row(out, "models.GPT"), table_row(out, "hand-written NumPy")
    assert number(ours[1]) == number(minigrad[1])  # the same parameters
    assert abs(number(ours[2]) - number(minigrad[2])) < 0.002  # the same weights and batch: the same loss at init
    assert "dtypes" not in ours[0]  # logits and loss float32
    assert number(ours[11]) > 0  # matmuls/step: the clock saw the GEMMs
    step_median, step_min = number(ours[3]), number(ours[4])
    assert step_min <= step_median
    assert re.search(r"minigrad / handwritten: [\d.]+x by median step", out)
    assert find_row(out, "torch") is None
    assert out.count("step anatomy") == 1  # the op census is minigrad's alone


@pytest.mark.skipif(not HAS_TORCH, reason="torch not installed (pip install torch==2.13.0)")
def test_train_step_handwritten_against_torch():
    out = run("benchmarks.train_step", "--quick", "--handwritten")
    table_row(out, "hand-written NumPy")
    table_row(out, "torch")
    assert re.search(r"handwritten / torch: [\d.]+x by median step", out)
    assert "minigrad / handwritten:" in out and "minigrad / torch:" in out


def run_plain(module: str, *args: str) -> str:
    """``python -m module args`` with no thread setting: these scripts measure the thread policy itself."""
    env = {k: v for k, v in os.environ.items() if k not in _util.THREAD_VARIABLES and k != "MINIGRAD_THREADS"}
    done = subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, env={**env, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{module} {args} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_threads_benchmark_runs_beside_a_load_that_stops_by_itself():
    from benchmarks import threads

    load = threads.start_load(1, 0.2)
    assert all(p.wait(timeout=30) == 0 for p in load)  # the busy process ended on its own
    out = run_plain("benchmarks.threads", "--busy", "1", "--rounds", "1", "--steps", "3", "--induction-steps", "3",
                    "--tokens", "5", "--load-seconds", "30")
    for work in ("demos.train_charlm", "demos.induction_heads", "demos.sample"):
        row = table_row(out, work)
        assert len(row) == 9 and row[1] == "1", out
        for cell in row[2:5]:  # default, 1 thread, all cores: "rate (min-max)"
            assert float(cell.split()[0].replace(",", "")) > 0
        assert float(row[5]) > 0 and float(row[6].split()[0]) > 0, row  # ratio of medians; paired ratio
        assert "measured" in row[7] or "still measuring" in row[7], row


def test_threads_benchmark_pairs_each_rounds_runs_and_rotates_their_order():
    from benchmarks import threads

    assert threads.paired_ratios([90.0, 50.0, 80.0], [100.0, 50.0, 40.0]) == [0.9, 1.0, 2.0]
    orders = [threads.round_order(["default", "1 thread", "all 2 cores"], r) for r in range(3)]
    assert orders[0] == ["default", "1 thread", "all 2 cores"]
    assert [o[0] for o in orders] == ["default", "1 thread", "all 2 cores"]  # each setting goes first once
    assert all(sorted(o) == sorted(orders[0]) for o in orders)


def test_lesson_times_reports_wall_time_machine_and_load():
    out = run_plain("benchmarks.lesson_times", "--only", "quickstart,gpt", "--steps", "3")
    assert "machine:" in out
    lesson = find_row(out, "python -m demos.quickstart")
    assert lesson is not None and lesson[1].endswith(" s") and float(lesson[1].split()[0]) > 0
    charlm = find_row(out, "python -m demos.train_charlm (GPT)")
    assert charlm is not None and "(estimated)" in charlm[1] and "3 of 1600 steps" in charlm[2]
    assert float(charlm[3]) >= 0 and "/" in charlm[4] and charlm[5] != "(not printed)"


@pytest.mark.skipif(importlib.util.find_spec("numba") is None or os.environ.get("MINIGRAD_BACKEND") == "numpy",
                    reason="needs the [fast] extra's compiled forms")
def test_kernel_forms_times_every_compiled_form_against_its_numpy_form():
    out = run("benchmarks.kernel_forms", "--quick")
    for name in ("gelu", "standardise", "softmax", "cross_entropy", "cross_entropy_grad", "adam_update"):
        row = table_row(out, name)
        numpy_us, compiled_us, ratio = (number(c) for c in row[2:5])
        assert numpy_us > 0 and compiled_us > 0 and ratio > 0


def test_gemm_in_step_times_each_product_in_the_step_and_alone():
    out = run("benchmarks.gemm_in_step", "--quick")
    assert "### XS: each product in the step and alone" in out
    weights = table_row(out, "attention_weights")
    calls, in_step, alone = (number(c) for c in weights[1:4])
    assert calls >= 1 and in_step > 0 and alone > 0
    totals = re.search(r"per step: ([\d.]+) ms in the step, ([\d.]+) ms alone", out)
    assert totals and float(totals.group(1)) > 0
