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
    assert by[1, 64] < ns.weights_and_state < by[2, 64]  # "for all but the smallest batches" (the closing text)
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


def test_the_per_layer_formula_equals_the_graph_for_other_widths_heads_and_lengths(memory_run):
    rows = memory_run.ns.layer_rows
    assert len({(b, t, d, h) for b, t, d, h, _, _ in rows}) == 4
    for B, T, d, H, formula, measured in rows:
        copy = 4 * B * T * d if H > 1 else 0  # the heads side by side: a copy, a view for one head
        assert formula == measured == 4 * B * T * (24 * d + 2) + copy + 4 * B * H * T * T


def test_the_checkpointed_peak_model_and_one_block_per_segment(memory_run):
    ns = memory_run.ns
    assert ns.segmented_matches  # the segmented forward computes the GPT's loss
    assert ns.block_a / ns.boundary_b == pytest.approx(25 + (4 * 64 + 2) / 64)
    rows = ns.peak_rows
    assert {(r["n"], r["k"]) for r in rows} == {(4, 1), (4, 2), (8, 1), (8, 2), (8, 3), (16, 1), (16, 2), (16, 4)}
    for r in rows:
        assert r["kept"] == r["outside"] + r["boundaries"]  # the graph after the forward, to the byte
        assert r["recomputing"] == r["k"] * ns.block_a and r["boundaries"] == -(-r["n"] // r["k"]) * ns.boundary_b
        assert 0 < r["peak"] - r["model"] < ns.block_a, r  # above the model by less than one block's activations
    for n in (4, 8, 16):
        by_k = {r["k"]: r["peak"] for r in rows if r["n"] == n}
        assert min(by_k, key=by_k.get) == 1 and ns.best[n] == 1  # one block per segment has the lowest peak
        assert sorted(by_k, key=by_k.get) == sorted(by_k)  # and the peak grows with the segment


def test_selective_recomputation_drops_exactly_the_attention_weights(memory_run):
    ns = memory_run.ns
    assert ns.selective_difference < 1e-12
    for r in ns.selective_rows:
        assert r["full"] - r["selective"] == r["saved_predicted"] == 4 * 4 * r["B"] * 4 * r["T"] ** 2
        assert r["recompute_share"] == r["T"] / (6 * 64 + r["T"]) < 0.3


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
gradients ready in the reverse of model.parameters() order: True
  64   432,128 ( 432,128)   113,096 ( 113,096)    59,924 (  59,924)     6,752 (   6,752)
a 7.5 B model on 64 workers (formula): 120.0 GB, ZeRO-1 31.4 GB, ZeRO-2 16.6 GB, ZeRO-3 1.88 GB; ZeRO-1 saves 3.82 times
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


def test_ddp_averages_means_which_is_wrong_on_unequal_shards(parallel_run):
    errors = parallel_run.ns.ddp_error
    assert errors[2, 2, 2, 2] < 1e-12  # equal shards: the mean of means is the batch's mean
    assert errors[5, 1, 1, 1] > 0.1  # unequal: a sequence on a small shard counts more


def test_buckets_fill_in_reverse_order_and_overlap_with_backward(parallel_run):
    ns = parallel_run.ns
    n = len(ns.params)
    assert ns.ready_order == list(range(n))[::-1]  # measured by hooks: the last parameter's gradient first
    assert [i for b in ns.buckets for i in b] == ns.ready_order  # the buckets cut that order, in order
    assert all(sum(ns.sizes_bytes[i] for i in b) >= ns.BUCKET_BYTES for b in ns.buckets[:-1])
    assert ns.bucketed_vs_whole < 1e-12
    overlap, whole, tiny = ns.overlap, ns.no_overlap, ns.tiny
    assert whole["hidden"] == 0.0 and whole["overlapped"] == whole["sequential"]
    assert overlap["hidden"] > 0.5 and overlap["overlapped"] < min(whole["overlapped"], tiny["overlapped"])
    assert tiny["communication"] > overlap["communication"] > whole["communication"]  # latency per message
    assert overlap["after_backward"] < 0.5 * whole["after_backward"]


def test_no_sync_sends_once_per_step_for_the_same_gradient(parallel_run):
    ns = parallel_run.ns
    assert ns.no_sync_difference < 1e-12
    assert ns.unsynced_bytes == 2 * (4 - 1) / 4 * ns.n_params * 8 and ns.synced_bytes == 4 * ns.unsynced_bytes


def test_the_ring_sends_2_n_minus_1_messages(parallel_run):
    ns = parallel_run.ns
    assert ns.messages == {n: 2 * (n - 1) for n in ns.RING_NS}


def test_zero_clips_by_the_global_norm_and_zero2_keeps_a_slice(parallel_run):
    ns = parallel_run.ns
    assert min(ns.clip_norms) > ns.MAX_NORM  # every step clips: the comparison means something
    assert ns.clip_global_vs_plain < 1e-12 and ns.clip_local_vs_plain > 1e-4
    assert ns.zero2_vs_zero1 == 0.0
    assert all(kept == [ns.n_params * 8 // 4] * 4 for kept in ns.zero2_kept)  # a quarter of the gradient each
    assert all(kept == [ns.n_params * 8] * 4 for kept in ns.zero1_kept)


def test_the_mixed_precision_budget_and_zero1_saving_nearly_4x(parallel_run):
    ns = parallel_run.ns
    assert [n for n, _, _ in ns.budget_rows] == [4, 64]
    for _, measured, formula in ns.budget_rows:
        assert measured == formula  # the arrays a worker holds, byte for byte
    assert [round(x, 2) for x in ns.paper] == [120.0, 31.41, 16.64, 1.88]
    assert 3.8 < ns.paper[0] / ns.paper[1] < 4


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason="matplotlib is not installed")
def test_parallel_plot_is_drawn_into_out(parallel_run):
    [path] = parallel_run.ns.pictures
    assert path == parallel_run.out / "data_parallel.png" and path.read_bytes()[:4] == b"\x89PNG"


# --------------------------------------------------------------------------------------
# Precision
# --------------------------------------------------------------------------------------

# The formats' constants and the lost update are exact; so is the scaler's schedule on its seeded run.
PRECISION_PRINTED = """
float32     24  1.192e-07   0.3333333433   3.4028e+38   1.1755e-38      1.401e-45
bfloat16     8  7.812e-03   0.3339843750   3.3895e+38   1.1755e-38      9.184e-41
float16     11  9.766e-04   0.3332519531   6.5504e+04   6.1035e-05      5.960e-08
float16 of 70000: inf   float16 of 1e-8: 0.0   bfloat16 of 1e-8: 1.0012e-08
1000 updates of -0.001 to a weight of 1.0 (the exact result: 0.0):
  the weight kept in bfloat16:          1.000000
"""


@pytest.fixture(scope="module")
def precision_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("precision")
    return SimpleNamespace(out=out, **vars(run_cells(DEMOS / "precision_lesson.py", ["--out", out])))


def test_precision_lesson_prints_the_formats(precision_run):
    assert_printed(precision_run.lines, PRECISION_PRINTED)


def test_an_update_below_half_an_ulp_vanishes_and_master_weights_keep_it(precision_run):
    ns = precision_run.ns
    assert float(ns.bf16_weight) == 1.0  # not one of the 1000 updates registered
    assert abs(float(ns.master) - 0.0) < 1e-4  # float32 follows them to (nearly) 0
    assert ns.seen_by_forward[-1] == ns.rounded(float(ns.master), "bfloat16") != 1.0


def test_float16_gradients_underflow_and_loss_scaling_recovers_them(precision_run):
    ns = precision_run.ns
    nonzero = ns.fp32_grads != 0
    lost = (nonzero & (ns.fp16_grads == 0)).mean()
    lost_scaled = (nonzero & (ns.scaled_grads == 0)).mean()
    assert lost > 0.05 and lost_scaled == 0.0
    error = np.median(np.abs(ns.fp16_grads - ns.fp32_grads)[nonzero] / np.abs(ns.fp32_grads[nonzero]))
    error_scaled = np.median(np.abs(ns.scaled_grads - ns.fp32_grads)[nonzero] / np.abs(ns.fp32_grads[nonzero]))
    assert error_scaled < 1e-3 < 1e-2 < error  # the survivors are coarse too, unless scaled


def test_the_scaler_skips_overflowing_steps_then_trains(precision_run):
    log = precision_run.ns.scaler_log
    scales = [scale for _, scale, _ in log]
    taken = [t for _, _, t in log]
    assert not taken[0] and scales[1] == scales[0] / 2  # 2^24 overflows: skipped, halved
    first = taken.index(True)
    assert all(not t for t in taken[:first]) and scales[first] == scales[0] / 2 ** first
    assert any(b > a for a, b in zip(scales, scales[1:]))  # and it grows again after good steps
    losses = [loss for loss, _, _ in log]
    assert np.mean(losses[-5:]) < np.mean(losses[:5]) - 0.3  # it trains


def test_the_lessons_scaler_follows_torch_grad_scaler():
    """The rules of the lesson's scaler (and of exercise 12's reference, which adds unscale_) give GradScaler's
    scales."""
    torch = pytest.importorskip("torch")
    import minigrad as mg
    from demos.exercises.solutions.ex12_loss_scaler import LossScaler

    ours = LossScaler(init_scale=2.0 ** 10, growth_interval=3)
    theirs = torch.amp.GradScaler("cpu", init_scale=2.0 ** 10, growth_interval=3)
    rng = np.random.default_rng(0)
    for step in range(40):
        grad = rng.standard_normal(4).astype(np.float32)
        if rng.random() < 0.25:
            grad[0] = np.inf if rng.random() < 0.5 else np.nan
        w = torch.zeros(4, requires_grad=True)
        opt = torch.optim.SGD([w], lr=0.1)
        theirs.scale((w * torch.from_numpy(grad)).sum()).backward()  # w.grad: grad x the scale
        theirs.step(opt)
        theirs.update()
        p = mg.tensor(np.zeros(4, np.float32), requires_grad=True)
        p.grad = mg.tensor(grad * np.float32(ours.scale))
        ours.step(SimpleNamespace(step=lambda: None), [p])
        assert ours.scale == theirs.get_scale(), step


def test_pure_bfloat16_falls_behind_and_master_weights_do_not(precision_run):
    ns = precision_run.ns
    fp32, master, pure = (ns.curves[k][-20:].mean() for k in ("float32", "bfloat16 + master weights",
                                                                "pure bfloat16"))
    assert abs(master - fp32) < 0.02  # "follows the float32 curve closely"
    assert pure > fp32 + 0.04  # "falls behind"
    assert ns.unmoved["pure bfloat16"] > 0.1 and ns.unmoved["float32"] < 0.01
    assert ns.gain_moves["pure bfloat16"] == 0.0 < ns.gain_moves["float32"]  # the norm gains never move


def test_float16_without_scaling_stalls_and_with_scaling_trains_beside_float32(precision_run):
    ns = precision_run.ns
    assert ns.MICRO_SHARE == 2.0 ** -17
    runs = ns.small_share.items()
    first = {mode: np.mean(log["loss"][:10]) for mode, log in runs}
    last = {mode: np.mean(log["loss"][-20:]) for mode, log in runs}
    zero = {mode: np.mean(log["zero"]) for mode, log in runs}
    assert last["float32"] < first["float32"] - 0.8  # float32 trains
    assert last["float16"] > last["float32"] + 0.5 and last["float16"] > first["float16"] - 0.5  # float16 stalls
    assert zero["float16"] > 0.5 and zero["float32"] < 1e-4 and zero["float16 + loss scaling"] < 0.01
    assert abs(last["float16 + loss scaling"] - last["float32"]) < 0.1  # and with the scaler it trains
    assert any(line.startswith("float16 + loss scaling") for line in precision_run.lines)


def test_the_scaler_over_micro_batches_unscales_once_per_step_and_the_schedule_skips_with_it(precision_run):
    ns = precision_run.ns
    log = ns.small_share["float16 + loss scaling"]
    taken = log["taken"]
    assert log["unscaled"] == ns.RUN_STEPS == len(taken)  # once per step, after the last micro-batch
    assert 0 < taken.count(False) < 10 and ns.skipped_steps == [i for i, t in enumerate(taken) if not t]
    assert all(taken[i - 10:i] == [True] * 10 for i in ns.skipped_steps)  # a skip follows 10 good steps: a growth
    assert log["scheduler_steps"] == sum(taken) < ns.RUN_STEPS  # the schedule counts the steps taken
    assert ns.small_share["float32"]["scheduler_steps"] == ns.RUN_STEPS


def test_the_scalers_skip_a_parameter_that_got_no_gradient(precision_run):
    """GradScaler skips a parameter whose grad is None; the lesson's scaler and exercise 12's reference too."""
    import minigrad as mg
    from demos.exercises.solutions.ex12_loss_scaler import LossScaler

    for scaler in (precision_run.ns.LossScaler(init_scale=4.0), LossScaler(init_scale=4.0)):
        used = mg.tensor(np.ones(3, np.float32), requires_grad=True)
        unused = mg.tensor(np.ones(2, np.float32), requires_grad=True)
        (scaler.scale_loss((used * 2).sum())).backward()
        assert unused.grad is None
        steps = []
        assert scaler.step(SimpleNamespace(step=lambda steps=steps: steps.append(1)), [used, unused]) is True
        assert steps == [1] and np.array_equal(used.grad.numpy(), np.full(3, 2.0, np.float32))


def test_what_autocast_keeps_in_float32_is_measured(precision_run):
    ns = precision_run.ns
    assert ns.sum_of_ones == 2048.0  # a running sum in float16 stops
    assert ns.exp_12 == np.inf and ns.mean_square == np.inf and ns.score == np.inf  # past 65504
    assert ns.probability == 0.0  # below 2^-24
    assert ns.score_scaled == 12800.0
    source = (DEMOS / "precision_lesson.py").read_text(encoding="utf-8")
    for op in ("`softmax`", "`log_softmax`", "`layer_norm`", "`cross_entropy`", "`matmul`", "`linear`", "Q K^T",
               "P V"):
        assert op in source


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason="matplotlib is not installed")
def test_precision_plot_is_drawn_into_out(precision_run):
    [path] = precision_run.ns.pictures
    assert path == precision_run.out / "precision_curves.png" and path.read_bytes()[:4] == b"\x89PNG"
