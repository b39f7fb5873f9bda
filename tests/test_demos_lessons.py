"""The demos that retell the two seed texts: they print the texts' numbers, and every gradient checks out.

Expected lines are copied from the texts' printed outputs (the notebook
``000_480be21528dd973b.txt`` and the lesson ``004_78febfc9bfabf30a.txt``).
Each demo runs once per module (a few seconds) and its printout is checked.
"""

import contextlib
import importlib.util
import io
from types import SimpleNamespace

import numpy as np
import pytest

HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None


def run_demo(module, argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = module.main(argv)
    return SimpleNamespace(result=result, text=out.getvalue(), lines=out.getvalue().splitlines())


def assert_printed(lines, expected: str):
    for line in expected.strip("\n").splitlines():
        assert line in lines, f"missing line: {line!r}"


# --------------------------------------------------------------------------------------
# RNN: the vanishing gradient
# --------------------------------------------------------------------------------------

NOTEBOOK_RNN = """
After  1 tokens, size of d h_T / d h_0: 2.63e+00
After  5 tokens, size of d h_T / d h_0: 2.29e-01
After 10 tokens, size of d h_T / d h_0: 1.44e-02
After 20 tokens, size of d h_T / d h_0: 2.20e-04
After 40 tokens, size of d h_T / d h_0: 7.85e-08
After 60 tokens, size of d h_T / d h_0: 1.62e-13
"""


@pytest.fixture(scope="module")
def rnn_run(tmp_path_factory):
    from demos import rnn_vanishing_gradient

    out = tmp_path_factory.mktemp("rnn")
    return SimpleNamespace(out=out, **vars(run_demo(rnn_vanishing_gradient, ["--out", str(out)])))


def test_rnn_prints_the_notebooks_table(rnn_run):
    assert_printed(rnn_run.lines, NOTEBOOK_RNN)


def test_rnn_backprop_jacobian_matches_finite_differences(rnn_run):
    errors = [*rnn_run.result["errors"].values(), rnn_run.result["lstm_error"]]
    assert len(errors) == 4 and max(errors) < 1e-8
    assert sum("central finite differences" in line for line in rnn_run.lines) == 4


def test_lstm_forgets_far_more_slowly(rnn_run):
    rnn, lstm = rnn_run.result["rnn"], rnn_run.result["lstm"]
    assert lstm[60] > 1e4 * rnn[60]
    assert lstm[60] / lstm[1] > 1e4 * (rnn[60] / rnn[1])  # relative to where each starts, too


def test_rnn_hook_curve_agrees_with_the_jacobian(rnn_run):
    rnn_curve, lstm_curve = rnn_run.result["rnn_curve"], rnn_run.result["lstm_curve"]
    assert rnn_curve.shape == lstm_curve.shape == (61,)
    assert np.isclose(rnn_curve[0], rnn_run.result["rnn"][60], rtol=1e-10)
    assert np.isclose(lstm_curve[0], rnn_run.result["lstm"][60], rtol=1e-10)
    assert rnn_curve[60] == pytest.approx(4.0)  # d h_60 / d h_60 is the 16x16 identity: norm sqrt(16)
    assert "The hooks' value at h_0 equals the Jacobian above: True" in rnn_run.lines


def test_rnn_hooks_match_jacobian_at_every_step():
    import minigrad as mg
    from demos.rnn_vanishing_gradient import gradient_through_time, notebook_cell, notebook_rnn, run

    W, U, inputs = notebook_rnn(np.random.default_rng(0))
    cell, tokens = notebook_cell(W, U), inputs[:6]
    curve = gradient_through_time(cell, tokens)
    for t in range(len(tokens)):
        # d h_6 / d h_t by mg.jacobian on the rest of the sequence, started from the same h_t.
        h_t = run(cell, mg.zeros(1, 16, dtype=np.float64), tokens[:t])
        start = mg.tensor(h_t.numpy(), requires_grad=True)
        J = mg.jacobian(lambda h, t=t: run(cell, h, tokens[t:]), start)
        assert np.isclose(curve[t], np.linalg.norm(J.numpy()), rtol=1e-10)


def test_rnn_cell_is_the_notebooks_recurrence():
    import minigrad as mg
    from demos.rnn_vanishing_gradient import notebook_cell, notebook_rnn, run

    W, U, inputs = notebook_rnn(np.random.default_rng(0))
    h = np.zeros(16)
    for x in inputs[:10]:
        h = np.tanh(W @ h + U @ x)  # the notebook's line
    h_minigrad = run(notebook_cell(W, U), mg.zeros(1, 16, dtype=np.float64), inputs[:10])
    assert np.allclose(h_minigrad.numpy()[0], h, rtol=0, atol=1e-14)


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason="matplotlib is not installed")
def test_rnn_saves_the_curve(rnn_run):
    path = rnn_run.out / "gradient_through_time.png"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# --------------------------------------------------------------------------------------
# Attention from scratch: the notebook's steps 3 to 8
# --------------------------------------------------------------------------------------

NOTEBOOK_ATTENTION = """
pain -> the      score  0.00   weight 0.038
pain -> patient  score  0.20   weight 0.046
pain -> has      score  0.00   weight 0.038
pain -> chest    score  2.28   weight 0.369
pain -> pain     score  2.18   weight 0.334
pain -> arm      score  1.54   weight 0.176
New vector for 'pain' (weighted average of the values): [1.516 1.107 0.107 0.136]
d_k =   4: spread (std) of the scores   0.64 | largest weight without scaling 0.228, with scaling 0.160
d_k =  64: spread (std) of the scores   6.13 | largest weight without scaling 0.831, with scaling 0.222
d_k = 512: spread (std) of the scores  32.88 | largest weight without scaling 1.000, with scaling 0.326
Output shape: (9, 8) (one new vector per token)
Each row of weights sums to 1: True
With the mask, weight given to future tokens: 0.0
2 heads of dimension 4; output shape (9, 8); parameters 256
Shuffling the tokens only shuffles the outputs: True
Largest difference between PE(pos + 3) and R_3 PE(pos), over all positions: 2.4e-15
With positional encoding, shuffling only shuffles the outputs: False
Input (9, 8) -> output (9, 8)
Variance of each output token: [1. 1. 1. 1. 1. 1. 1. 1. 1.]
Parameters of this small block: 808
"""
# The notebook's mean line; each mean is ~1e-17, so the sign NumPy shows on the rounded zero is
# rounding noise that differs between machines (the notebook's own code prints other signs here).
NOTEBOOK_MEAN = "Mean of each output token: [-0.  0. -0. -0.  0. -0.  0.  0. -0.]"


@pytest.fixture(scope="module")
def attention_run():
    from demos import attention_from_scratch

    return run_demo(attention_from_scratch, [])


def test_attention_prints_the_notebooks_numbers(attention_run):
    assert_printed(attention_run.lines, NOTEBOOK_ATTENTION)
    [mean_line] = [line for line in attention_run.lines if line.startswith("Mean of each output token")]
    assert mean_line.replace("-0.", " 0.") == NOTEBOOK_MEAN.replace("-0.", " 0.")
    assert np.abs(attention_run.result.y.numpy().mean(axis=1)).max() < 1e-12


def test_attention_runs_on_tensors(attention_run):
    import minigrad as mg

    nb = attention_run.result
    for value in (nb.sa.out_causal, nb.sa.w_causal, nb.mh, nb.y, nb.W_O, *nb.heads[0]):
        assert isinstance(value, mg.Tensor)


def test_attention_gradients_match_finite_differences(attention_run):
    nb = attention_run.result
    assert set(nb.attention_errors) == {"X", "W_Q", "W_K", "W_V"}
    assert set(nb.block_errors) == {"input", "W_O", "W1", "W2"}
    assert max(nb.attention_errors.values()) < 1e-7
    assert max(nb.block_errors.values()) < 1e-7


def test_attention_gradients_pass_gradcheck():
    """The same gradients through the engine's own checker (every Jacobian entry, not one loss)."""
    import minigrad as mg
    from demos.attention_from_scratch import attention, transformer_block

    rng = np.random.default_rng(5)
    X, Wq, Wk, Wv = (mg.tensor(rng.normal(size=s), requires_grad=True) for s in [(4, 6), (6, 3), (6, 3), (6, 3)])
    mask = np.tril(np.ones((4, 4), dtype=bool))
    assert mg.gradcheck(lambda *a: attention(a[0] @ a[1], a[0] @ a[2], a[0] @ a[3], mask)[0], (X, Wq, Wk, Wv))
    heads = [tuple(mg.tensor(rng.normal(size=(6, 3))) for _ in range(3)) for _ in range(2)]
    W_O, W1, W2 = (mg.tensor(rng.normal(size=s), requires_grad=True) for s in [(6, 6), (6, 8), (8, 6)])
    b1, b2 = mg.zeros(8, dtype=np.float64), mg.zeros(6, dtype=np.float64)
    assert mg.gradcheck(lambda x, o, w1, w2: transformer_block(x, heads, o, w1, b1, w2, b2, mask), (X, W_O, W1, W2))


def test_unscaled_softmax_gradient_collapses(attention_run):
    rows = attention_run.result.softmax_grad_norms
    unscaled = [r[1] for r in rows]
    scaled = [r[2] for r in rows]
    assert all(a > b for a, b in zip(unscaled, unscaled[1:]))  # falls at every step of d_k
    assert unscaled[-1] < 0.2 * unscaled[0]
    assert max(scaled) < 1.25 * min(scaled)  # with 1/sqrt(d_k) it hardly moves
    assert scaled[-1] > 5 * unscaled[-1]


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason="matplotlib is not installed")
def test_attention_maps_are_drawn(tmp_path):
    from demos import attention_maps

    run = run_demo(attention_maps, ["--out", str(tmp_path)])
    names = sorted(p.name for p in run.result)
    assert names == ["attention_maps.png", "positional_encoding.png"]
    for path in run.result:
        assert path.parent == tmp_path and path.read_bytes()[:4] == b"\x89PNG"
    assert not list(tmp_path.glob(".*"))  # no temporary files left behind


def test_plots_are_skipped_without_matplotlib(tmp_path, monkeypatch):
    import builtins

    from demos import attention_maps

    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError("no matplotlib here")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    run = run_demo(attention_maps, ["--out", str(tmp_path)])
    assert run.result == [] and "plots skipped" in run.text
    assert not list(tmp_path.iterdir())


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
    from demos import transformer_lesson

    return run_demo(transformer_lesson, [])


def test_lesson_prints_the_lessons_numbers(lesson_run):
    assert_printed(lesson_run.lines, LESSON_PRINTED)
    # The weight matrix is printed as one block, in order.
    assert "\n".join(LESSON_PRINTED.strip("\n").splitlines()[:6]) in lesson_run.text


def test_lesson_causal_mask_holds_for_gradients(lesson_run):
    r = lesson_run.result
    assert r["change"][:4].max() == 0.0  # exactly, not approximately
    assert np.all(r["causal_grad"][4] == 0.0)
    assert np.abs(r["causal_grad"][:4]).max() > 0.1
    assert "Backprop: gradient of outputs 0-3 with respect to token 4: 0.0" in lesson_run.text


def test_lesson_gradients_match_finite_differences(lesson_run):
    r = lesson_run.result
    for errors in (r["attention_errors"], r["rope_errors"], r["block_errors"]):
        assert len(errors) >= 2 and max(errors) < 1e-7


def test_lesson_block_parameters_agree_with_costs(lesson_run):
    r = lesson_run.result
    assert r["block_matrices"] == 12 * 16 * 16 == r["costs_lesson"]
    assert r["block_params"] == r["costs_exact"]


def test_rope_module_is_the_lessons_rotation():
    """nn.RotaryEmbedding, features reordered to its half-split layout, rotates exactly as the lesson's rope."""
    import minigrad as mg
    from demos.transformer_lesson import TO_HALF_SPLIT, D, rotate

    freqs = 1.0 / 10000 ** (np.arange(0, D, 2) / D)

    def lesson_rope(x, pos):  # the lesson's function
        x1, x2 = x[0::2], x[1::2]
        c, s = np.cos(pos * freqs), np.sin(pos * freqs)
        out = np.empty_like(x)
        out[0::2] = x1 * c - x2 * s
        out[1::2] = x1 * s + x2 * c
        return out

    x = np.random.default_rng(7).normal(size=D)
    for pos in (0, 3, 77, 1005):
        assert np.allclose(rotate(mg.tensor(x), pos).numpy(), lesson_rope(x, pos)[TO_HALF_SPLIT], atol=1e-12)


def test_lesson_scores_depend_only_on_the_offset():
    from demos.transformer_lesson import rope_score, rope_vectors

    q, k = rope_vectors()
    offset_3 = [rope_score(q, k, m, m - 3).item() for m in (3, 40, 500, 7777)]
    assert np.allclose(offset_3, offset_3[0], rtol=0, atol=1e-10)
    assert not np.isclose(rope_score(q, k, 5, 4).item(), offset_3[0])
