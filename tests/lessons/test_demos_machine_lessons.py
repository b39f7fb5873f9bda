"""The lessons on the machine: memory (demos/memory_lesson), data parallelism (demos/data_parallel_lesson) and
precision (demos/precision_lesson). Each runs once per module, cell by cell as Jupyter would run it; the numbers
it prints are pinned, and so is every claim its prose makes about them."""

import importlib.util
from types import SimpleNamespace

import numpy as np
import pytest
from demos_helpers import DEMOS, run_cells

HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None


def assert_printed(lines, expected: str):
    for line in expected.strip("\n").splitlines():
        assert line in lines, f"missing line: {line!r}"


# --------------------------------------------------------------------------------------
# Memory
# --------------------------------------------------------------------------------------

# Every number here is a count of bytes from shapes, predicted and read from the graph: exact on any machine.
MEMORY_PRINTED = """
212,416 parameters predicted, 212,416 counted
parameters              849,664            849,664
gradients               849,664            849,664
AdamW state           1,699,328          1,699,328
  per block, predicted 1,902,592   measured 1,902,592 (the 4-layer graph minus the 1-layer one, over 3)
  whole model, predicted 7,940,100   measured 7,940,100
Prediction equals the graph's bytes at every size: True
Graph after the forward pass, B = 4, T = 64: predicted 591,876 bytes, measured 591,876 (plain: 7,940,100)
"""


@pytest.fixture(scope="module")
def memory_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("memory")
    return SimpleNamespace(out=out, **vars(run_cells(DEMOS / "memory_lesson.py", ["--out", out])))


def test_memory_lesson_prints_its_counts(memory_run):
    assert_printed(memory_run.lines, MEMORY_PRINTED)


def test_memory_predictions_equal_the_graph_at_every_size(memory_run):
    rows = memory_run.ns.rows
    assert len(rows) == 8 and all(r["predicted"] == r["measured"] for r in rows)


def test_memory_activations_outweigh_the_weights_and_grow_with_batch_and_context(memory_run):
    ns = memory_run.ns
    by = {(r["B"], r["T"]): r["measured"] for r in ns.rows}
    assert by[4, 64] > 2 * ns.weights_and_state  # "soon outweigh everything else"
    assert by[16, 64] - by[8, 64] == 2 * (by[8, 64] - by[4, 64])  # linear in the batch
    assert by[4, 128] > 2.1 * by[4, 64] and by[4, 64] > 2.1 * by[4, 32]  # faster than linear in the context


def test_memory_step_peak_sits_above_the_activations(memory_run):
    for r in memory_run.ns.rows:  # tracemalloc: the graph's arrays, plus gradients and working arrays
        assert r["measured"] < r["peak"] < 2 * r["measured"] + 4 * 2**20, r


def test_checkpointing_gives_the_same_gradients_and_a_lower_peak(memory_run):
    ns = memory_run.ns
    assert ns.gradient_difference < 1e-12
    assert any(line.startswith("float64, 68 parameter tensors: largest |plain gradient - checkpointed gradient|")
               for line in memory_run.lines)
    ratios = [r["peak_checkpointed"] / r["peak"] for r in ns.rows]
    assert max(ratios) < 0.8 and min(ratios) < 0.5  # lower everywhere; about half and less for the larger sizes
    assert all(r["checkpointed"] < 0.1 * r["measured"] for r in ns.rows if r["T"] >= 32)
    assert ns.time_ratio > 0  # measured and printed; never asserted (tests do not hold wall-clock times)


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason="matplotlib is not installed")
def test_memory_plot_is_drawn_into_out(memory_run):
    [path] = memory_run.ns.pictures
    assert path == memory_run.out / "activation_memory.png" and path.read_bytes()[:4] == b"\x89PNG"


# --------------------------------------------------------------------------------------
# Data parallelism
# --------------------------------------------------------------------------------------

# The ring on (1..8) * 10^i, and every count of bytes: exact.
PARALLEL_PRINTED = """
4 workers, 2 sequences each; gradient vector: 27,008 float64 numbers (216,064 bytes)
start               1    2    3    4    5    6    7    8 |   10   20   30   40   50   60   70   80 |  100  200  300  400  500  600  700  800 | 1000 2000 3000 4000 5000 6000 7000 8000
reduce-scatter 1    1    2    3    4    5    6 7007 8008 |   11   22   30   40   50   60   70   80 |  100  200  330  440  500  600  700  800 | 1000 2000 3000 4000 5500 6600 7000 8000
reduce-scatter 3    1    2 3333 4444 5505 6606 7007 8008 |   11   22   30   40 5555 6666 7077 8088 |  111  222  330  440  500  600 7777 8888 | 1111 2222 3330 4440 5500 6600 7000 8000
all-gather 3     1111 2222 3333 4444 5555 6666 7777 8888 | 1111 2222 3333 4444 5555 6666 7777 8888 | 1111 2222 3333 4444 5555 6666 7777 8888 | 1111 2222 3333 4444 5555 6666 7777 8888
every worker holds the sum (1..8) * 1111: True
bytes sent by each worker: [324096, 324096, 324096, 324096]
formula 2 (N - 1) / N x size: 324,096 bytes per worker; all workers together 1,296,384 = 2 (N - 1) x size = 1,296,384
every worker ends with the same vector, bit for bit: True
largest |parameter, ZeRO-1 - replicated AdamW on the same all-reduced gradients| over 20 steps: 0.0e+00
the 4 workers hold the same parameters after every step: True
replicated                         432,128         432,128            864,256   864,256
ZeRO-1, worker 0                   432,128         108,032            540,160   540,160
ZeRO-1, worker 3                   432,128         108,032            540,160   540,160
"""  # noqa: E501


@pytest.fixture(scope="module")
def parallel_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("parallel")
    return SimpleNamespace(out=out, **vars(run_cells(DEMOS / "data_parallel_lesson.py", ["--out", out])))


def test_parallel_lesson_prints_its_ring_and_its_counts(parallel_run):
    assert_printed(parallel_run.lines, PARALLEL_PRINTED)


def test_all_reduce_equals_gradient_accumulation_and_grad_accum(parallel_run):
    ns = parallel_run.ns
    assert ns.all_reduce_vs_accumulation < 1e-12
    assert ns.all_reduce_vs_project < 1e-12  # demos.train_charlm.accumulate_gradients: what --grad-accum runs
    assert ns.all_reduce_vs_whole_batch < 1e-12


def test_ring_traffic_is_the_formula_for_every_worker_count(parallel_run):
    ns = parallel_run.ns
    size = ns.n_params * 8
    for n, sent in zip(ns.NS, ns.traffic):
        assert sent == 2 * (n - 1) * size / n


def test_zero1_follows_adamw_over_20_steps_with_a_quarter_of_the_state(parallel_run):
    ns = parallel_run.ns
    assert len(ns.zero_trajectory) == 20 and ns.zero_vs_replicated == 0.0 and ns.zero_vs_plain < 1e-12
    assert ns.replicas_agree
    assert all(state == ns.replicated_state / 4 for state in ns.zero_state)
    moved = np.abs(ns.plain_trajectory[-1] - ns.plain_trajectory[0]).max()
    assert moved > 1e-3  # the trajectory goes somewhere: equality over 20 steps means something


def test_parallel_lesson_ends_pointing_at_pytorch_ddp(parallel_run):
    source = (DEMOS / "data_parallel_lesson.py").read_text(encoding="utf-8")
    assert source.rstrip().splitlines()[-1].startswith("#")
    assert "demos/continue_in_pytorch.py" in source[-800:] and "DistributedDataParallel" in source[-800:]


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason="matplotlib is not installed")
def test_parallel_plot_is_drawn_into_out(parallel_run):
    [path] = parallel_run.ns.pictures
    assert path == parallel_run.out / "data_parallel.png" and path.read_bytes()[:4] == b"\x89PNG"
