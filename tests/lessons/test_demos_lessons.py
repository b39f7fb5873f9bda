"""The lessons (demos/rnn_vanishing_gradient, attention_from_scratch, transformer_lesson): the numbers they
print, and every gradient checks out.

The lessons retell two texts the project grew from (an attention tutorial written
with NumPy, and a lesson on the transformer), with the same seeds and draw order,
so they print the same numbers; the expected numbers below are those texts'.
Each lesson runs once per module, cell by cell as Jupyter would run it
(tests/lessons/demos_helpers.py), and its printout and namespace are checked.
"""

import importlib.util
import re
from types import SimpleNamespace

import numpy as np
import pytest
from demos_helpers import DEMOS, run_cells

HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None


def assert_printed(lines, expected: str):
    for line in expected.strip("\n").splitlines():
        assert line in lines, f"missing line: {line!r}"


# --------------------------------------------------------------------------------------
# RNN: the vanishing gradient
# --------------------------------------------------------------------------------------

# The RNN's table, to the digit; each size is the Frobenius norm of the 16 x 16 Jacobian.
RNN_TABLE = """
After  1 tokens, Frobenius norm of d h_T / d h_0: 2.63e+00
After  5 tokens, Frobenius norm of d h_T / d h_0: 2.29e-01
After 10 tokens, Frobenius norm of d h_T / d h_0: 1.44e-02
After 20 tokens, Frobenius norm of d h_T / d h_0: 2.20e-04
After 40 tokens, Frobenius norm of d h_T / d h_0: 7.85e-08
After 60 tokens, Frobenius norm of d h_T / d h_0: 1.62e-13
"""


@pytest.fixture(scope="module")
def rnn_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("rnn")
    return SimpleNamespace(out=out, **vars(run_cells(DEMOS / "rnn_vanishing_gradient.py", ["--out", out])))


def test_rnn_prints_the_table_with_its_norm(rnn_run):
    assert_printed(rnn_run.lines, RNN_TABLE)


def test_rnn_backprop_jacobian_matches_finite_differences(rnn_run):
    errors = [*rnn_run.ns.errors.values(), rnn_run.ns.lstm_error]
    assert len(errors) == 4 and max(errors) < 1e-8
    assert sum("largest |backprop - central difference|" in line for line in rnn_run.lines) == 4


def test_lstm_forgets_far_more_slowly(rnn_run):
    rnn, lstm = rnn_run.ns.rnn_sizes, rnn_run.ns.lstm_sizes
    assert lstm[60] > 1e4 * rnn[60]
    assert lstm[60] / lstm[1] > 1e4 * (rnn[60] / rnn[1])  # relative to where each starts, too


def test_rnn_hook_curve_agrees_with_the_jacobian(rnn_run):
    rnn_curve, lstm_curve = rnn_run.ns.rnn_curve, rnn_run.ns.lstm_curve
    assert rnn_curve.shape == lstm_curve.shape == (61,)
    assert np.isclose(rnn_curve[0], rnn_run.ns.rnn_sizes[60], rtol=1e-10)
    assert np.isclose(lstm_curve[0], rnn_run.ns.lstm_sizes[60], rtol=1e-10)
    assert rnn_curve[60] == pytest.approx(4.0)  # d h_60 / d h_60 is the 16x16 identity: norm sqrt(16)
    assert "The hooks' norm at h_0 equals the norm mg.jacobian gave for d h_60 / d h_0: True" in rnn_run.lines


def test_rnn_hooks_match_jacobian_at_every_step(rnn_run):
    import minigrad as mg

    ns = rnn_run.ns
    run = ns.run
    cell, tokens = ns.rnn_cell_with(ns.W, ns.U), ns.inputs[:6]
    curve = ns.gradient_through_time(cell, tokens)
    for t in range(len(tokens)):
        # d h_6 / d h_t by mg.jacobian on the rest of the sequence, started from the same h_t.
        h_t = run(cell, mg.zeros(1, 16, dtype=np.float64), tokens[:t])
        start = mg.tensor(h_t.numpy(), requires_grad=True)
        J = mg.jacobian(lambda h, t=t: run(cell, h, tokens[t:]), start)
        assert np.isclose(curve[t], np.linalg.norm(J.numpy()), rtol=1e-10)


def test_rnn_cell_is_the_written_out_recurrence(rnn_run):
    import minigrad as mg

    ns = rnn_run.ns
    W, U, inputs = ns.W, ns.U, ns.inputs
    h = np.zeros(16)
    for x in inputs[:10]:
        h = np.tanh(W @ h + U @ x)  # h_t = tanh(W h_{t-1} + U x_t), in NumPy
    h_minigrad = ns.run(ns.rnn_cell_with(W, U), mg.zeros(1, 16, dtype=np.float64), inputs[:10])
    assert np.allclose(h_minigrad.numpy()[0], h, rtol=0, atol=1e-14)


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason="matplotlib is not installed")
def test_rnn_saves_the_curve(rnn_run):
    path = rnn_run.out / "gradient_through_time.png"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# --------------------------------------------------------------------------------------
# Attention from scratch
# --------------------------------------------------------------------------------------

# The sqrt(d_k) table: 1000 draws per row from the section's own generator (seed 1), so it says the same
# thing every time; the other numbers (the hand-made vectors, the mask, the 808 parameters) are exact.
ATTENTION_PRINTED = """
pain -> the      score  0.00   weight 0.038
pain -> patient  score  0.20   weight 0.046
pain -> has      score  0.00   weight 0.038
pain -> chest    score  2.28   weight 0.369
pain -> pain     score  2.18   weight 0.334
pain -> arm      score  1.54   weight 0.176
New vector for 'pain' (weighted average of the values): [1.516 1.107 0.107 0.136]
d_k =   4: spread (std) of the scores   1.72 | largest weight without scaling 0.50 +- 0.21 (above 0.99 in   0% of draws), with scaling 0.30 +- 0.13
d_k =  64: spread (std) of the scores   7.33 | largest weight without scaling 0.86 +- 0.17 (above 0.99 in  34% of draws), with scaling 0.32 +- 0.11
d_k = 512: spread (std) of the scores  20.88 | largest weight without scaling 0.95 +- 0.11 (above 0.99 in  72% of draws), with scaling 0.32 +- 0.11
Output shape: (9, 8) (one new vector per token)
Each row of weights sums to 1: True
With the mask, total weight given to future tokens (the upper triangle): 0.0
2 heads of dimension 4; output shape (9, 8); parameters 256 (3 matrices of 8 x 4 per head, and W_O of 8 x 8)
Shuffling the tokens only shuffles the outputs: True
Largest difference between PE(pos + 3) and R_3 PE(pos), over all positions: 2.4e-15
With positional encoding, shuffling only shuffles the outputs: False
Input (9, 8) -> output (9, 8)
Variance of each output token: [1. 1. 1. 1. 1. 1. 1. 1. 1.]
Parameters of this small block: 808
"""  # noqa: E501
# The mean line; each mean is ~1e-17, so the sign NumPy shows on the rounded zero is rounding noise
# that differs between machines.
ATTENTION_MEAN = "Mean of each output token: [-0.  0. -0. -0.  0. -0.  0.  0. -0.]"


@pytest.fixture(scope="module")
def attention_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("attention")
    return SimpleNamespace(out=out, **vars(run_cells(DEMOS / "attention_from_scratch.py", ["--out", out])))


def test_attention_prints_the_original_numbers(attention_run):
    assert_printed(attention_run.lines, ATTENTION_PRINTED)
    [mean_line] = [line for line in attention_run.lines if line.startswith("Mean of each output token")]
    assert mean_line.replace("-0.", " 0.") == ATTENTION_MEAN.replace("-0.", " 0.")
    assert np.abs(attention_run.ns.y.numpy().mean(axis=1)).max() < 1e-12
    assert attention_run.ns.nn_block_difference < 1e-12 and attention_run.ns.nn_pe_difference < 1e-12


def test_attention_scaling_table_says_what_its_prose_says(attention_run):
    """The claims of section 2's text, held against its table (and not only its digits)."""
    rows = {r["d_k"]: r for r in attention_run.ns.scaling}
    raw = [rows[d]["raw_mean"] for d in (4, 64, 512)]
    assert raw[0] < raw[1] < raw[2]  # "the largest weight grows with d_k"
    assert round(rows[512]["raw_mean"], 2) == 0.95  # "at d_k = 512 it is 0.95 on average"
    assert round(10 * rows[512]["raw_one_key"]) == 7  # "in 7 draws out of 10 one key takes more than 0.99"
    scaled = [rows[d]["scaled_mean"] for d in (4, 64, 512)]
    assert all(round(m, 1) == 0.3 for m in scaled)  # "about 0.3 each time"
    assert max(scaled) / min(scaled) < 1.1
    spread = rows[512]["std"] / rows[4]["std"]  # "the scores spread as sqrt(d_k)"
    assert abs(spread / np.sqrt(512 / 4) - 1) < 0.1
    text = (DEMOS / "attention_from_scratch.py").read_text(encoding="utf-8")
    for claim in ("at d_k = 512 it is 0.95 on", "in 7 draws out of 10 one key takes more than 0.99", "about 0.3 each"):
        assert claim in " ".join(line.lstrip("# ") for line in text.splitlines()), claim


def test_attention_runs_on_tensors(attention_run):
    import minigrad as mg

    nb = attention_run.ns
    for value in (nb.out_causal, nb.w_causal, nb.mh, nb.y, nb.W_O, *nb.heads[0]):
        assert isinstance(value, mg.Tensor)


def test_attention_gradients_match_finite_differences(attention_run):
    nb = attention_run.ns
    assert set(nb.attention_errors) == {"X", "W_Q", "W_K", "W_V"}
    assert set(nb.block_errors) == {"input", "W_O", "W1", "W2"}
    assert max(nb.attention_errors.values()) < 1e-7
    assert max(nb.block_errors.values()) < 1e-7


def test_attention_gradients_pass_gradcheck(attention_run):
    """The same gradients through the engine's own checker (every Jacobian entry, not one loss)."""
    import minigrad as mg

    attention, transformer_block = attention_run.ns.attention, attention_run.ns.transformer_block

    rng = np.random.default_rng(5)
    X, Wq, Wk, Wv = (mg.tensor(rng.normal(size=s), requires_grad=True) for s in [(4, 6), (6, 3), (6, 3), (6, 3)])
    mask = np.tril(np.ones((4, 4), dtype=bool))
    assert mg.gradcheck(lambda *a: attention(a[0] @ a[1], a[0] @ a[2], a[0] @ a[3], mask)[0], (X, Wq, Wk, Wv))
    heads = [tuple(mg.tensor(rng.normal(size=(6, 3))) for _ in range(3)) for _ in range(2)]
    W_O, W1, W2 = (mg.tensor(rng.normal(size=s), requires_grad=True) for s in [(6, 6), (6, 8), (8, 6)])
    b1, b2 = mg.zeros(8, dtype=np.float64), mg.zeros(6, dtype=np.float64)
    assert mg.gradcheck(lambda x, o, w1, w2: transformer_block(x, heads, o, w1, b1, w2, b2, mask), (X, W_O, W1, W2))


def test_unscaled_softmax_gradient_collapses(attention_run):
    rows = attention_run.ns.softmax_grad_norms
    unscaled = [r[1] for r in rows]
    scaled = [r[2] for r in rows]
    assert all(a > b for a, b in zip(unscaled, unscaled[1:]))  # falls at every step of d_k
    assert unscaled[-1] < 0.2 * unscaled[0]
    assert max(scaled) < 1.25 * min(scaled)  # with 1/sqrt(d_k) it hardly moves
    assert scaled[-1] > 5 * unscaled[-1]


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason="matplotlib is not installed")
def test_attention_pictures_are_drawn_into_out(attention_run):
    names = sorted(p.name for p in attention_run.ns.pictures)
    assert names == ["attention_maps.png", "positional_encoding.png"]
    for path in attention_run.ns.pictures:
        assert path.parent == attention_run.out and path.read_bytes()[:4] == b"\x89PNG"
    assert not list(attention_run.out.glob(".*"))  # no temporary files left behind


def test_plots_are_skipped_without_matplotlib(tmp_path, monkeypatch):
    import builtins

    from demos._common import pyplot

    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError("no matplotlib here")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    assert pyplot() is None


# --------------------------------------------------------------------------------------
# The transformer lesson
# --------------------------------------------------------------------------------------

LESSON_PRINTED = """
causal attention weights (rows = query position):
[[1.   0.   0.   0.   0.  ]
 [0.19 0.81 0.   0.   0.  ]
 [0.22 0.04 0.74 0.   0.  ]
 [0.2  0.49 0.13 0.19 0.  ]
 [0.08 0.02 0.65 0.23 0.01]]
rows sum to [1. 1. 1. 1. 1.]
output shape: (5, 8)
Token 4's embedding moved by +5 in each of its 16 coordinates; largest absolute change of each output vector:
max change in outputs 0-3: 0.0   output 4: 6.83
 d_k   score std (raw)  max weight raw   max weight scaled
   16          3.9           0.571            0.103
   64          8.0           0.776            0.105
  256         16.1           0.877            0.106
 1024         32.2           0.949            0.109
sinusoidal: PE(p) . PE(p + 3) for p = 0, 10, 50: [5.5431, 5.5431, 5.5431]
RoPE: query at    5, key at    2 (offset 3): score = 2.7754
RoPE: query at  105, key at  102 (offset 3): score = 2.7754
RoPE: query at 1005, key at 1002 (offset 3): score = 2.7754
RoPE: query at    5, key at    4 (offset 1): score = 2.5418
norm preserved: 3.674 = 3.674
GPT-2 small: 0.12 B parameters (0.08 B in layers, 0.04 B embeddings)
   forward FLOPs per token ~ 0.2 GFLOP; KV cache 36 KiB per token, 0.04 GiB for 1024 tokens
7B decoder (multi-head): 6.74 B parameters (6.48 B in layers, 0.26 B embeddings)
   forward FLOPs per token ~ 13.0 GFLOP; KV cache 512 KiB per token, 2.00 GiB for 4096 tokens
8B decoder (grouped-query, 8 KV heads): 8.03 B parameters (6.98 B in layers, 1.05 B embeddings)
   forward FLOPs per token ~ 14.0 GFLOP; KV cache 128 KiB per token, 1.00 GiB for 8192 tokens
"""


@pytest.fixture(scope="module")
def lesson_run():
    return run_cells(DEMOS / "transformer_lesson.py")


def test_lesson_prints_the_original_numbers(lesson_run):
    assert_printed(lesson_run.lines, LESSON_PRINTED)
    # The weight matrix is printed as one block, in order.
    assert "\n".join(LESSON_PRINTED.strip("\n").splitlines()[:6]) in lesson_run.text


def test_lesson_causal_mask_holds_for_gradients(lesson_run):
    r = lesson_run.ns
    assert r.change.numpy()[:4].max() == 0.0  # exactly, not approximately
    assert np.all(r.causal_grad[4] == 0.0)
    assert np.abs(r.causal_grad[:4]).max() > 0.1
    assert ("Backprop, loss = sum(G * outputs 0-3) for a fixed random G: largest |d loss / d token 4|: 0.0"
            in lesson_run.text)


def test_lesson_gradients_match_finite_differences(lesson_run):
    r = lesson_run.ns
    for errors in (r.attention_errors, r.rope_errors, r.block_errors):
        assert len(errors) >= 2 and max(errors) < 1e-7


def test_lesson_block_parameters_agree_with_costs(lesson_run):
    r = lesson_run.ns
    assert r.block_matrices == 12 * 16 * 16 == r.costs_lesson
    assert r.block_params == r.costs_exact


def test_rope_module_is_the_written_out_rotation(lesson_run):
    """nn.RotaryEmbedding, features reordered to its half-split layout, rotates as RoPE written in NumPy."""
    import minigrad as mg

    TO_HALF_SPLIT, D, rotate = lesson_run.ns.TO_HALF_SPLIT, lesson_run.ns.D, lesson_run.ns.rotate

    freqs = 1.0 / 10000 ** (np.arange(0, D, 2) / D)

    def lesson_rope(x, pos):  # RoPE on interleaved pairs, written in NumPy
        x1, x2 = x[0::2], x[1::2]
        c, s = np.cos(pos * freqs), np.sin(pos * freqs)
        out = np.empty_like(x)
        out[0::2] = x1 * c - x2 * s
        out[1::2] = x1 * s + x2 * c
        return out

    x = np.random.default_rng(7).normal(size=D)
    for pos in (0, 3, 77, 1005):
        assert np.allclose(rotate(mg.tensor(x), pos).numpy(), lesson_rope(x, pos)[TO_HALF_SPLIT], atol=1e-12)


def test_lesson_scores_depend_only_on_the_offset(lesson_run):
    rope_score, q, k = lesson_run.ns.rope_score, lesson_run.ns.q, lesson_run.ns.k
    offset_3 = [rope_score(q, k, m, m - 3).item() for m in (3, 40, 500, 7777)]
    assert np.allclose(offset_3, offset_3[0], rtol=0, atol=1e-10)
    assert not np.isclose(rope_score(q, k, 5, 4).item(), offset_3[0])


# --------------------------------------------------------------------------------------
# Every printed number says what it is
# --------------------------------------------------------------------------------------

NUMBER = re.compile(r"\d\.\d+e[+-]\d\d")


def test_rnn_numbers_name_their_norm(rnn_run):
    for line in rnn_run.lines:
        if NUMBER.search(line) and "||" not in line:  # ||d h_60 / d h_t||: under a header naming the norm
            assert "Frobenius norm" in line or "largest |backprop - central difference|" in line, line
    header = rnn_run.lines.index("Frobenius norm of d h_60 / d h_t, read by a hook on each h_t during backward "
                                 "from h_60:")
    assert rnn_run.lines[header + 1].startswith("  ||d h_60 / d h_60||")


def test_attention_differences_say_what_was_compared(attention_run):
    for line in attention_run.lines:
        if NUMBER.search(line) and "difference" in line.lower():
            assert "largest" in line.lower(), line
    assert any("Euclidean norm of dL/d scores" in line for line in attention_run.lines)


def test_lesson_says_what_was_perturbed_and_by_how_much(lesson_run):
    i = lesson_run.lines.index("max change in outputs 0-3: 0.0   output 4: 6.83")
    assert "Token 4's embedding moved by +5 in each of its 16 coordinates" in lesson_run.lines[i - 1]
    for line in lesson_run.lines:
        if "backprop - central difference" in line:
            assert "largest |" in line, line


def test_lessons_print_no_step_numbers_of_another_text(rnn_run, attention_run, lesson_run):
    for run in (rnn_run, attention_run, lesson_run):
        assert not [line for line in run.lines if re.match(r"\s*Step \d", line)]
