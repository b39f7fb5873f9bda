"""The lessons on the machine: memory (demos/memory_lesson), data parallelism (demos/data_parallel_lesson) and
precision (demos/precision_lesson). Each runs once per module, cell by cell as Jupyter would run it; the numbers
it prints are pinned, and so is every claim its prose makes about them."""

import importlib.util
from types import SimpleNamespace

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
