"""The FlashAttention lesson (demos/flash_attention_lesson), run once, cell by cell as Jupyter would run it: its
counts are pinned, every claim its prose makes about its measurements is checked, and its code is the fused op's:
``tiled_attention`` equals the composite of ``flash_attention`` (minigrad/fused/), ``tiles`` the op's tiles and
``tiled_backward`` the op's VJP, in value and gradient."""

import importlib.util
from types import SimpleNamespace

import numpy as np
import pytest
from demos_helpers import DEMOS, run_cells

import minigrad as mg
from minigrad import OPS
from minigrad.fused.attention import _flash_tiles

HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None

# Counts from shapes (bytes, tiles, numbers moved): exact on any machine.
PRINTED = """
  T  block  tiles  causal tiles  share   multiply-adds (forward)  causal  share
  256    64     16           10  0.625                1,048,576      655,360  0.625
 1024    64    256          136  0.531               16,777,216    8,912,896  0.531
 4096    64   4096         2080  0.508              268,435,456  136,314,880  0.508
 4096    16  65536        32896  0.502              268,435,456  134,742,016  0.502
Predicted equals the graph's bytes at every length: True
T = 2048, d = 64, fast memory M = 65,536 numbers: blocks of b = 157 rows (14 query blocks)
at most 65,155 numbers resident in fast memory
numbers moved, tiled: counted 3,934,208, predicted 3,934,208
numbers moved, plain: at least 17,301,504, 4.4 times more
gradcheck and gradgradcheck of F.flash_attention (causal, blocks of 2) against finite differences: (True, True)
GPT(flash=True)'s graph grows by equal steps per token (linear in T): True
"""


@pytest.fixture(scope="module")
def lesson(tmp_path_factory):
    out = tmp_path_factory.mktemp("flash")
    return SimpleNamespace(out=out, **vars(run_cells(DEMOS / "flash_attention_lesson.py", ["--out", out])))


def test_the_lesson_prints_its_counts(lesson):
    for line in PRINTED.strip("\n").splitlines():
        assert line in lesson.lines, f"missing line: {line!r}"


def test_online_softmax_tiled_forward_and_backward_equal_plain_attention(lesson):
    ns = lesson.ns
    assert ns.online_error < 1e-14 and ns.forward_error < 1e-12 and ns.lse_error < 1e-12
    assert ns.backward_error < 1e-12 and ns.fd_error < 1e-7
    assert max(ns.block_errors.values()) < 1e-12 and sorted(ns.block_errors) == list(range(1, 15))
    assert ns.op_error < 1e-12 and ns.op_grad_error < 1e-12 and ns.checks == (True, True)
    rescales = [line for line in lesson.lines if line.startswith("  keys ")]
    assert len(rescales) == 3 and all("rescale 1.0000" not in line for line in rescales[1:])  # "the max rises"


def test_causal_work_about_halves(lesson):
    for row in lesson.ns.work:
        n = row["T"] // row["block"]
        assert row["share"] == (n + 1) / (2 * n)
    assert lesson.ns.work[-1]["share"] < 0.51


def test_memory_plain_grows_as_t_squared_and_tiled_as_t(lesson):
    rows = lesson.ns.memory
    assert [r["T"] for r in rows] == [64, 128, 256, 512, 1024, 2048, 4096]
    for r in rows:
        assert r["plain"] == r["plain_predicted"] and r["flash"] == r["flash_predicted"]
    for a, b in zip(rows, rows[1:]):
        assert b["flash"] == 2 * a["flash"]  # linear
        assert b["plain"] > (3.8 if a["T"] >= 512 else 3) * a["plain"]  # quadratic, beside the output's linear part
    for a, b in zip(rows[3:], rows[4:]):  # the peaks, once T x T dominates
        assert 3.5 < b["plain_peak"] / a["plain_peak"] < 4.5 and 1.6 < b["flash_peak"] / a["flash_peak"] < 2.4
    assert rows[-1]["plain_peak"] > 30 * rows[-1]["flash_peak"]


def test_the_io_count_is_the_formula_and_fits_the_fast_memory(lesson):
    ns = lesson.ns
    assert ns.fast.moved == ns.predicted_moved and ns.fast.most <= ns.M
    assert ns.plain_moved > 4 * ns.fast.moved


def test_gpt_flash_has_the_plain_loss_and_a_linear_graph(lesson):
    rows = lesson.ns.gpt_rows
    assert lesson.ns.linear
    for _, (loss_plain, held_plain), (loss_flash, held_flash) in rows:
        assert abs(loss_plain - loss_flash) < 1e-5 and held_flash < held_plain
    plain = [p[1] for _, p, _ in rows]
    assert plain[3] - plain[2] > 2.5 * (plain[2] - plain[1])  # faster than linear


CASES = [((2, 3, 9, 4), (2, 3, 7, 4), (2, 3, 7, 5), None, False, 3),
         ((2, 3, 9, 4), (2, 3, 7, 4), (2, 3, 7, 5), None, True, 2),
         ((1, 2, 6, 3), (1, 2, 11, 3), (1, 2, 11, 2), (1, 1, 1, 11), True, 4),
         ((5, 3), (5, 3), (5, 3), (5, 5), False, 1),
         ((2, 4, 3), (2, 4, 3), (2, 4, 3), None, True, 8)]


@pytest.mark.parametrize("q_shape, k_shape, v_shape, bias_shape, causal, block", CASES)
def test_the_lessons_code_is_the_fused_ops_composite_and_vjp(lesson, q_shape, k_shape, v_shape, bias_shape, causal,
                                                             block):
    ns = lesson.ns
    rng = np.random.default_rng(len(q_shape) + block)
    q, k, v = (mg.tensor(rng.standard_normal(s), requires_grad=True) for s in (q_shape, k_shape, v_shape))
    bias = () if bias_shape is None else (mg.tensor(np.where(rng.random(bias_shape) < 0.8, 0.0, -np.inf)),)
    params = dict(scale=0.6, causal=causal, block_size=block)
    mine, lse = ns.tiled_attention(q, k, v, *bias, **params)
    composite = OPS["flash_attention"].composite(q, k, v, *bias, **params)
    fused = OPS["flash_attention"](q, k, v, *bias, **params)
    np.testing.assert_allclose(mine.data, composite.data, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(fused.data, composite.data, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(lse.data, fused._saved, rtol=1e-14, atol=1e-15)
    lessons, ops = (list(tiles(q_shape[-2], k_shape[-2], block, causal)) for tiles in (ns.tiles, _flash_tiles))
    assert [(r, c) for r, c, _ in lessons] == [(r, c) for r, c, _ in ops]
    assert all(np.array_equal(a, b) for (_, _, a), (_, _, b) in zip(lessons, ops))
    g = mg.tensor(rng.standard_normal(fused.shape))
    expected = mg.grad(composite, [q, k, v], g)
    for a, b in zip(mg.grad(mine, [q, k, v], g), expected):
        np.testing.assert_allclose(a.data, b.data, rtol=1e-12, atol=1e-13)
    if not bias:  # the lesson's backward (written without a bias, for clarity) is the op's VJP
        with mg.no_grad():
            by_hand = ns.tiled_backward(q, k, v, fused, lse, g, **params)
        for a, b in zip(by_hand, mg.grad(fused, [q, k, v], g)):
            np.testing.assert_allclose(a.data, b.data, rtol=1e-12, atol=1e-13)


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason="matplotlib is not installed")
def test_the_memory_plot_is_drawn_into_out(lesson):
    [path] = lesson.ns.pictures
    assert path == lesson.out / "flash_memory.png" and path.read_bytes()[:4] == b"\x89PNG"
