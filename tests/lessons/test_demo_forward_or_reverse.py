"""The "forward or reverse" lesson: its numbers (never its timings) are right.

The lesson is a cell script that works at the top level, so it is run once per
module with ``runpy`` (as ``python -m`` would) and its variables are read back.
"""

import contextlib
import importlib.util
import io
import runpy
import sys

import numpy as np
import pytest

HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None


@pytest.fixture(scope="module")
def lesson(tmp_path_factory):
    out = tmp_path_factory.mktemp("forward_or_reverse")
    argv, sys.argv = sys.argv, ["forward_or_reverse", "--out", str(out), "--repeats", "1"]
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            names = runpy.run_module("demos.forward_or_reverse", run_name="__main__")
    finally:
        sys.argv = argv
    names["printed_lines"] = printed.getvalue().splitlines()
    names["out_dir"] = out
    return names


def line_starting(lines, prefix):
    found = [line for line in lines if line.startswith(prefix)]
    assert len(found) == 1, f"expected one line starting {prefix!r}, got {found}"
    return found[0]


def test_one_jacobian_two_ways_agrees_and_matches_finite_differences(lesson):
    assert lesson["by_columns"].shape == lesson["by_rows"].shape == (3, 5)
    assert lesson["both_ways_difference"] < 1e-14
    assert lesson["small_fd_error"] < 1e-8
    line = line_starting(lesson["printed_lines"], "J of f: R^5 -> R^3 built from 5 jvps (columns) and from 3 vjps")
    assert "largest |difference| between the two" in line


def test_the_small_jacobian_is_the_chain_rule(lesson):
    """Independently of minigrad: J = diag(1 - y^2) A diag(1 - z^2) B at x, with z = tanh(Bx), y = tanh(Az)."""
    A, B, x = lesson["A"], lesson["B"], lesson["x_small"]
    z = np.tanh(B @ x)
    y = np.tanh(A @ z)
    expected = np.diag(1 - y ** 2) @ A @ np.diag(1 - z ** 2) @ B
    np.testing.assert_allclose(lesson["by_columns"], expected, rtol=1e-12, atol=1e-15)


def test_crossing_is_interpolated_on_log_axes(lesson):
    crossing = lesson["crossing"]
    assert crossing([1, 2, 4], [1.0, 1.0, 1.0], [0.5, 1.0, 2.0]) == 2.0  # equal at a measured size
    assert crossing([4, 16], [1.0, 1.0], [0.5, 2.0]) == pytest.approx(8.0)  # halfway on log axes
    assert crossing([4, 16], [1.0, 1.0], [0.5, 0.7]) is None  # reverse cheaper throughout
    # The timings themselves are not asserted; that a verdict is printed for both sweeps is.
    for name in ("m", "n"):
        assert any(line.startswith(f"With {'n' if name == 'm' else 'm'} = 32, the two modes")
                   for line in lesson["printed_lines"])


def test_work_is_counted_in_flops_and_timed_on_one_thread(lesson):
    """The work counts are the same on every run, busy machine or not: those are asserted, never the seconds."""
    n, work = lesson["N"], lesson["work"]
    assert work["forward"] == 2 * (2 * n ** 3)  # two (256, 256) @ (256, 256) products
    assert work["vjp"] >= 2 * work["forward"]  # the forward again, then at least one product per forward product
    assert work["jvp"] > work["vjp"]  # a jvp is a vjp plus the backward of the backward
    assert work["push"] < work["jvp"]  # linearize's push skips the forward and the recorded backward
    assert all(t > 0 for t in lesson["seconds"].values())
    for name in ("vjp", "jvp", "push"):
        line = line_starting(lesson["printed_lines"], lesson["costs"][name][0])
        assert f"{work[name] / work['forward']:.1f}x its work" in line
    threads = lesson["policy"].report()["threads"]
    assert threads == "1 (asked for by the script)" or "environment" in threads or "MINIGRAD_THREADS=" in threads


def test_hvp_matches_finite_differences_of_gradients_and_forward_over_reverse(lesson):
    assert lesson["n_params"] == 8 * 2 + 8 + 8 + 1
    assert lesson["hvp_fd_error"] < 1e-7
    assert lesson["forward_over_reverse_difference"] < 1e-12
    assert "relative 2-norm error" in line_starting(lesson["printed_lines"], "H v against finite differences")


def test_hvp_is_the_full_hessian_times_v(lesson):
    import minigrad as mg

    H = mg.hessian(lesson["network_loss"], lesson["params"])  # 4 x 4 blocks
    sizes = [p.size for p in lesson["params"]]
    full = np.block([[H[i][j].data.reshape(sizes[i], sizes[j]) for j in range(4)] for i in range(4)])
    v = np.concatenate([t.data.ravel() for t in lesson["v"]])
    np.testing.assert_allclose(full @ v, lesson["Hv_flat"], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(full, full.T, atol=1e-12)


def test_rnn_jacobians_agree_both_ways_and_with_the_closed_form(lesson):
    cell, h0, sequence = lesson["cell"], lesson["h0"], lesson["sequence"]
    W_ih, W_hh = cell.weight_ih.data, cell.weight_hh.data
    norms = lesson["rnn_norms"]
    assert sorted(norms) == [1, 5, 10, 20]
    for T, (forward, reverse, difference) in norms.items():
        # d h_T / d h_0 = prod_t diag(1 - h_t^2) W_hh, latest step on the left (row vectors: h W_hh^T).
        J, h = np.eye(16), h0[0]
        for x_t in sequence[:T]:
            h = np.tanh(x_t[0] @ W_ih.T + h @ W_hh.T)
            J = np.diag(1 - h ** 2) @ W_hh @ J
        assert forward == pytest.approx(np.linalg.norm(J), rel=1e-10)
        assert reverse == pytest.approx(forward, rel=1e-12) and difference < 1e-14
    assert norms[1][0] > norms[5][0] > norms[10][0] > norms[20][0]  # vanishing through time
    assert lesson["rnn_fd_error"] < 1e-8


def test_every_number_printed_has_its_sentence(lesson):
    for line in lesson["printed_lines"]:
        assert len(line.split()) >= 5, f"a bare number? {line!r}"


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason="matplotlib not installed")
def test_the_timing_plot_is_written(lesson):
    path = lesson["out_dir"] / "forward_or_reverse.png"
    assert lesson["plot_path"] == path and path.stat().st_size > 10_000


def test_opens_as_cells_that_run_in_a_notebook_kernel(monkeypatch, tmp_path):
    """Each '# %%' chunk compiles on its own, and the set-up cell ignores a kernel's own arguments."""
    import re
    from pathlib import Path

    source = (Path(__file__).parents[2] / "demos" / "forward_or_reverse.py").read_text()
    cells = re.split(r"^# %%.*$", source, flags=re.M)[1:]
    assert len(cells) >= 8
    for k, cell in enumerate(cells):
        compile(cell, f"<cell {k}>", "exec")
    monkeypatch.setattr(sys, "argv", ["ipykernel_launcher.py", "-f", "/tmp/kernel.json", "--out", str(tmp_path)])
    namespace = {"__name__": "__main__"}  # as in a notebook: no module docstring, no __file__
    exec(compile(cells[1], "<cell 1>", "exec"), namespace)  # (cell 0 is the prose)
    assert namespace["args"].out == tmp_path and namespace["args"].repeats == 5
