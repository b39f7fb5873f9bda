# %% [markdown]
# # Where a training step's memory goes, predicted from shapes, then measured; and recomputation
#
#     python -m demos.memory_lesson [--out DIR]
#     (draws activation_memory.png into DIR, default out/memory_lesson)
#
# Training a GPT needs far more memory than its weights. This lesson counts
# every byte of one training step of a small GPT, first on paper, from the
# shapes alone, then on the engine, and puts the two side by side. What you
# will see:
#
# 1. the parameters, their gradients and AdamW's two moments: 4 copies of the
#    weights, predicted by formula and measured to the byte;
# 2. the activations: the arrays each layer keeps for backward, per layer by
#    formula, and the same number read from the recorded graph
#    (`mg.autograd.graph_bytes`), to the byte;
# 3. a table and a plot over context length and batch size: the activations
#    grow with both (and with the square of the context, through attention),
#    and soon outweigh everything else; the peak of the whole step is measured
#    with Python's `tracemalloc` beside them;
# 4. recomputation: `mg.autograd.checkpoint(fn, *inputs)` keeps only a block's
#    input and runs the block again during backward. `GPT(..., checkpoint=True)`
#    does it for every block: the same gradients (float64, to rounding), the
#    measured peak about halved here, for one more forward pass of time;
# 5. a model of the checkpointed peak (what stays outside the blocks, one
#    boundary per segment, one segment recomputing), held against the measured
#    peak at 4, 8 and 16 layers and segments of 1, 2 and sqrt(n) blocks: why one
#    block per segment wins for a transformer;
# 6. selective recomputation: recompute only attention's core, the part whose
#    memory grows as T^2, and keep the rest.
#
# Each `# %%` line starts a cell: open the file in Jupyter (with jupytext) or VS
# Code to run it cell by cell, or run it whole as a script.

# %%
import time
import tracemalloc

import numpy as np

import minigrad as mg
from demos._common import parse_args, pyplot, save_figure
from minigrad import optim
from models.gpt import GPT, GPTConfig

args = parse_args(None, "memory_lesson", "Where a training step's memory goes, predicted then measured; "
                  "and activation checkpointing.")

# The demo's GPT, small enough that every measurement takes a fraction of a second; float32, no dropout.
V, T_MAX, L, H, D = 65, 128, 4, 4, 64  # vocabulary, longest context, layers, heads, width
D_FF = 4 * D
FLOAT = 4  # bytes per float32


def make_model(checkpoint: bool = False, dtype=np.float32) -> GPT:
    config = GPTConfig(vocab_size=V, block_size=T_MAX, n_layer=L, n_head=H, d_model=D)
    return GPT(config, seed=0, checkpoint=checkpoint).to(dtype)


def batch(B: int, T: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, V, (B, T)), rng.integers(0, V, (B, T))


# %% [markdown]
# ## 1. Parameters, gradients and AdamW's state
#
# A block holds four d x d attention matrices (q, k, v and the output) and the
# MLP's d x 4d and 4d x d: 12 d^2 weights, plus 13 d biases and norm gains. The
# embeddings add V d (tokens, shared with the output layer) and T_max d
# (positions), and the final norm 2 d. Each parameter has a gradient of its
# size, and AdamW keeps two more arrays of its size (the running mean of the
# gradient and of its square): four copies of the weights in all.

# %%
def predicted_parameters(layers: int = L) -> int:
    per_block = 12 * D * D + 13 * D  # 4 d^2 attention + 8 d^2 MLP; biases 9 d, two norms 4 d
    return layers * per_block + V * D + T_MAX * D + 2 * D


model = make_model()
n_params = sum(p.data.size for p in model.parameters())
x, y = batch(4, 64)
_, loss = model(x, y)
loss.backward()
opt = optim.AdamW(model.parameters(), lr=1e-3)
opt.step()
measured = {
    "parameters": sum(p.data.nbytes for p in model.parameters()),
    "gradients": sum(p.grad.data.nbytes for p in model.parameters()),
    "AdamW state": sum(s["exp_avg"].nbytes + s["exp_avg_sq"].nbytes for s in opt.state.values()),
}
predicted = {"parameters": FLOAT * predicted_parameters(), "gradients": FLOAT * predicted_parameters(),
             "AdamW state": 2 * FLOAT * predicted_parameters()}
print(f"{predicted_parameters():,} parameters predicted, {n_params:,} counted")
print("                 predicted (bytes)   measured (bytes)")
for key in measured:
    print(f"{key:<14} {predicted[key]:>16,}   {measured[key]:>16,}")
weights_and_state = sum(measured.values())
print(f"weights, gradients and AdamW state together: {weights_and_state / 2**20:.2f} MiB")

# %% [markdown]
# ## 2. Activations: what each layer keeps for backward
#
# Backward needs, at each op, arrays from the forward pass: a matrix product's
# gradient needs its inputs, GELU's needs its input's gate, layer norm's its
# normalised x and 1/std. The graph keeps them until backward has used them.
# With N = B T positions, each block keeps (counted in floats, each array once:
# a reshape or a transpose is a view, no new bytes):
#
#     attention norm: output N d, normalised x N d, 1/std N       2 N d + N
#     q, k, v projections                                           3 N d
#     attention weights, one T x T matrix per head                  B H T^2
#     weights times values; the heads side by side (a copy)         2 N d
#     output projection; the residual sum                           2 N d
#     MLP norm                                                      2 N d + N
#     up projection, GELU's output and its saved gate               3 N d_ff
#     down projection; the residual sum                             2 N d
#
# per block: N (13 d + 3 d_ff + 2) + B H T^2. Outside the blocks: the token
# embeddings and their sum with the positions' (2 N d; the T positions' rows
# are a view of their weight), the final norm (2 N d + N),
# the logits (N V) and the loss (1). The measurement walks the graph behind the
# loss and adds the bytes of every array its nodes hold.

# %%
def predicted_activations(B: int, T: int, checkpoint: bool = False) -> dict[str, int]:
    """Bytes the graph of one forward pass keeps, by part (float32)."""
    N = B * T
    outside = 2 * N * D + 2 * N * D + N + N * V + 1
    if checkpoint:  # each block keeps only its output, the next block's input
        return {"outside the blocks": FLOAT * outside, "per block": FLOAT * N * D}
    return {"outside the blocks": FLOAT * outside, "per block": FLOAT * (N * (13 * D + 3 * D_FF + 2) + B * H * T * T)}


def total(parts: dict[str, int]) -> int:
    return parts["outside the blocks"] + L * parts["per block"]


def measured_activations(B: int, T: int, checkpoint: bool = False) -> int:
    x, y = batch(B, T)
    _, loss = make_model(checkpoint)(x, y)
    return mg.autograd.graph_bytes(loss).activations


B, T = 4, 64
parts = predicted_activations(B, T)
one_layer = GPT(GPTConfig(vocab_size=V, block_size=T_MAX, n_layer=1, n_head=H, d_model=D), seed=0)
_, loss_1 = one_layer(*batch(B, T))
per_block_measured = (measured_activations(B, T) - mg.autograd.graph_bytes(loss_1).activations) // (L - 1)
print(f"Activations kept for backward, B = {B} sequences of T = {T} tokens (bytes):")
print(f"  per block, predicted {parts['per block']:>9,}   measured {per_block_measured:>9,} "
      f"(the {L}-layer graph minus the 1-layer one, over {L - 1})")
print(f"  whole model, predicted {total(parts):>9,}   measured {measured_activations(B, T):>9,}")
print(f"  that is {total(parts) / weights_and_state:.1f} times the weights, gradients and AdamW state together")

# %% [markdown]
# The same count as one formula, bytes per layer (float32, N = B T, d_ff = 4 d):
#
#     4 B T (13 d + 3 d_ff + 2) + 4 B H T^2  =  4 B T (25 d + 2) + 4 B H T^2
#
# linear in the batch, linear in T but for the attention weights, which grow as
# T^2 and with the number of heads. Checked against the graph on models of
# other widths, head counts and lengths (each the 2-layer graph minus the
# 1-layer one). One exception the last row finds: with a single head, putting
# the heads side by side moves nothing, the reshape is a view, and the layer
# keeps 4 B T d bytes less.

# %%
def layer_bytes_formula(B: int, T: int, d: int, H: int, d_ff: int) -> int:
    heads_copy = 0 if H > 1 else -4 * B * T * d  # one head: (B, 1, T, d) to (B, T, d) is a view, no copy
    return 4 * B * T * (13 * d + 3 * d_ff + 2) + 4 * B * H * T * T + heads_copy


def layer_bytes_measured(B: int, T: int, d: int, H: int) -> int:
    def graph(layers: int) -> int:
        config = GPTConfig(vocab_size=V, block_size=T_MAX, n_layer=layers, n_head=H, d_model=d)
        _, loss = GPT(config, seed=0)(*batch(B, T))
        return mg.autograd.graph_bytes(loss).activations
    return graph(2) - graph(1)


LAYER_CONFIGS = [(4, 64, 64, 4), (2, 32, 32, 2), (1, 128, 128, 8), (3, 16, 96, 1)]  # B, T, d, H
layer_rows = [(B_, T_, d_, H_, layer_bytes_formula(B_, T_, d_, H_, 4 * d_), layer_bytes_measured(B_, T_, d_, H_))
              for B_, T_, d_, H_ in LAYER_CONFIGS]
print("   B    T    d   H   bytes per layer, formula   measured (graph)")
for B_, T_, d_, H_, formula, measured_layer in layer_rows:
    print(f"{B_:4d} {T_:4d} {d_:4d} {H_:3d} {formula:26,} {measured_layer:18,}")

# %% [markdown]
# ## 3. Over context length and batch size
#
# The activations grow linearly with the batch and faster than linearly with
# the context (the attention weights are T x T per head). The peak of the whole
# step (forward and backward, measured by `tracemalloc`, which sees every
# NumPy allocation) is the activations plus the gradients being written, plus
# the working arrays of whatever op is running: close to the graph's bytes,
# and above them.

# %%
def step_peak(B: int, T: int, checkpoint: bool = False) -> int:
    """Peak bytes allocated during forward + backward above what was live before (tracemalloc)."""
    model = make_model(checkpoint)
    x, y = batch(B, T)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    _, loss = model(x, y)
    loss.backward()
    peak = tracemalloc.get_traced_memory()[1] - before
    tracemalloc.stop()
    return peak


SIZES = [(4, 16), (4, 32), (4, 64), (4, 128), (1, 64), (2, 64), (8, 64), (16, 64)]
rows = []
for B, T in SIZES:
    rows.append(dict(B=B, T=T, predicted=total(predicted_activations(B, T)), measured=measured_activations(B, T),
                     peak=step_peak(B, T), checkpointed=measured_activations(B, T, checkpoint=True),
                     peak_checkpointed=step_peak(B, T, checkpoint=True)))
print("   B    T   activations predicted   measured (graph)   step peak (tracemalloc)   (KiB)")
for r in rows:
    print(f"{r['B']:4d} {r['T']:4d} {r['predicted'] / 1024:21.1f} {r['measured'] / 1024:18.1f} "
          f"{r['peak'] / 1024:24.0f}")
print("Prediction equals the graph's bytes at every size:", all(r["predicted"] == r["measured"] for r in rows))

# %% [markdown]
# ## 4. Recomputation: keep a block's input, run it again in backward
#
# `mg.autograd.checkpoint(fn, *inputs)` (PyTorch's `torch.utils.checkpoint`)
# runs `fn` and records one node that keeps the inputs and the output; in
# backward that node runs `fn` again, recording this time, and backpropagates
# through the copy. So a block's insides live only while its own gradient is
# computed. `GPT(config, checkpoint=True)` wraps every block. First the
# promise: the same gradients, here in float64 for every parameter. Then the
# cost: the graph keeps one N x d array per block, the peak drops, and each
# step runs every block's forward twice.

# %%
def gradients(checkpoint: bool) -> list[np.ndarray]:
    model = make_model(checkpoint, dtype=np.float64)
    _, loss = model(*batch(4, 64))
    loss.backward()
    return [p.grad.numpy() for p in model.parameters()]


plain, checkpointed = gradients(False), gradients(True)
gradient_difference = max(float(np.abs(a - b).max()) for a, b in zip(plain, checkpointed))
print(f"float64, {len(plain)} parameter tensors: largest |plain gradient - checkpointed gradient| = "
      f"{gradient_difference:.1e}")

B, T = 4, 64
ck_parts = predicted_activations(B, T, checkpoint=True)
print(f"Graph after the forward pass, B = {B}, T = {T}: predicted {total(ck_parts):,} bytes, "
      f"measured {measured_activations(B, T, checkpoint=True):,} (plain: {measured_activations(B, T):,})")


def step_seconds(repeats: int = 7) -> dict[bool, float]:
    """Median seconds of forward + backward, plain and checkpointed, taken in turns (B = 8, T = 64)."""
    models, (x, y) = {flag: make_model(flag) for flag in (False, True)}, batch(8, 64)
    times = {False: [], True: []}
    for i in range(repeats + 1):
        for flag, model in models.items():
            start = time.perf_counter()
            _, loss = model(x, y)
            loss.backward()
            if i:  # the first round warms up
                times[flag].append(time.perf_counter() - start)
    return {flag: float(np.median(t)) for flag, t in times.items()}


step_times = step_seconds()
time_ratio = step_times[True] / step_times[False]
peaks = [(r["peak"], r["peak_checkpointed"]) for r in rows]
print(f"Step peak with checkpointing, over the {len(rows)} sizes: {min(c / p for p, c in peaks):.2f} to "
      f"{max(c / p for p, c in peaks):.2f} times the plain peak")
print(f"Time of forward + backward (B = 8, T = 64, median of 7, taken in turns): {time_ratio:.2f} times the plain step "
      f"(one more forward pass: about 4/3 if backward costs twice the forward)")

# %% [markdown]
# ## 5. A model of the checkpointed peak, and why one block per segment wins
#
# Checkpointing need not wrap one block at a time: a *segment* of k blocks can
# be one checkpoint. With n blocks in n/k segments, the peak of the step is:
#
#     what stays outside the blocks (embeddings, final norm, logits)
#   + one boundary per segment (its input, N x d, kept until backward)
#   + one segment recomputing (k blocks' activations, during its backward)
#   + the weights' gradients (written during backward)
#
# plus the gradients in flight inside the block being differentiated. With
# a the bytes of one block's activations and b = 4 N d those of a boundary,
# the part that depends on k is (n / k) b + k a, least at k = sqrt(n b / a).
# For a chain of layers that keep no more than their input (a = b) that is the
# classic sqrt(n) segments of sqrt(n) layers. A transformer block keeps
# a / b = 25 + (H T + 2) / d times its input (29 here), more than n for any
# depth below that, so the best k is below 1: one block per segment. Measured with
# `tracemalloc`, the model against the peak at 4, 8 and 16 layers, segments of
# 1, 2 and round(sqrt(n)) blocks (B = 2, T = 64):

# %%
def segmented_loss(model: GPT, x, y, k: int):
    """The GPT's loss with its blocks checkpointed in segments of k blocks (the last may be shorter)."""
    h = model.drop(model.pos_emb(model.tok_emb(x)))  # (B, T, d)
    blocks = list(model.blocks)
    for start in range(0, len(blocks), k):
        def segment(h, chosen=blocks[start:start + k]):
            for block in chosen:
                h = block(h)
            return h
        h = mg.autograd.checkpoint(segment, h)  # keeps h, the segment's boundary; reruns it in backward
    logits = model.lm_head(model.norm_f(h))  # (B, T, V)
    return mg.nn.functional.cross_entropy(logits.reshape(-1, V), mg.tensor(y.reshape(-1)))


def make_layers(n: int) -> GPT:
    return GPT(GPTConfig(vocab_size=V, block_size=T_MAX, n_layer=n, n_head=H, d_model=D), seed=0)


def segmented_peak(n: int, k: int, B: int = 2, T: int = 64) -> tuple[int, int]:
    """(step peak by tracemalloc, graph bytes after the forward) for n layers in segments of k blocks."""
    model = make_layers(n)
    x, y = batch(B, T)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    loss = segmented_loss(model, x, y, k)
    kept = mg.autograd.graph_bytes(loss).activations
    loss.backward()
    peak = tracemalloc.get_traced_memory()[1] - before
    tracemalloc.stop()
    return peak, kept


def predicted_peak(n: int, k: int, B: int = 2, T: int = 64) -> dict[str, int]:
    """The model of the peak, bytes by term, for n layers in segments of k blocks."""
    parts = predicted_activations(B, T)  # "outside the blocks" and "per block", bytes
    segments = -(-n // k)
    return {"outside": parts["outside the blocks"], "boundaries": segments * FLOAT * B * T * D,
            "recomputing": min(k, n) * parts["per block"], "gradients": FLOAT * predicted_parameters(n)}


segmented_peak(1, 1)  # a first run, so one-time allocations do not count in the first measurement
x2, y2 = batch(2, 64)
segmented_matches = all(segmented_loss(make_layers(4), x2, y2, k).item() == make_layers(4)(x2, y2)[1].item()
                        for k in (1, 2, 4))
print(f"the segmented loss equals the GPT's own for segments of 1, 2 and 4 blocks: {segmented_matches}")
block_a, boundary_b = predicted_activations(2, 64)["per block"], FLOAT * 2 * 64 * D
print(f"one block keeps a = {block_a:,} bytes, its boundary b = {boundary_b:,}: a / b = {block_a / boundary_b:.1f}")
peak_rows = []
for n in (4, 8, 16):
    for k in sorted({1, 2, round(np.sqrt(n))}):
        peak, kept = segmented_peak(n, k)
        model_parts = predicted_peak(n, k)
        peak_rows.append(dict(n=n, k=k, peak=peak, kept=kept, model=sum(model_parts.values()), **model_parts))
print(" layers  segment   graph after forward      model of the peak   measured peak   measured / model")
print("         (blocks)  predicted   measured")
for r in peak_rows:
    predicted_kept = r["outside"] + r["boundaries"]
    print(f"{r['n']:7d} {r['k']:8d} {predicted_kept:11,} {r['kept']:10,} {r['model']:18,} {r['peak']:15,} "
          f"{r['peak'] / r['model']:14.2f}")
best = {n: min((r for r in peak_rows if r["n"] == n), key=lambda r: r["peak"])["k"] for n in (4, 8, 16)}
print(f"lowest measured peak, by depth: {best} (segment size in blocks)")

# %% [markdown]
# The graph after the forward pass is the model's first two terms to the byte;
# the measured peak sits a little above the whole model (by the gradients in
# flight inside one block, less than one block's activations), and it is
# lowest with one block per segment at every depth. The boundaries cost b per
# segment, but a recomputing segment costs a per block, 29 times more.
#
# ## 6. Selective recomputation: only attention's core
#
# Recomputing a whole block costs a whole forward pass. Most of what a block
# keeps grows as N d and is cheap to keep; the attention weights grow as
# B H T^2, and recomputing them needs only the two products of the attention
# core, not the projections or the MLP. *Selective recomputation* (Korthikanti
# et al., Megatron-LM) checkpoints just softmax(q k^T / sqrt(d_h)) v: the block
# keeps q, k, v and the output, drops the T x T weights, and rebuilds them in
# backward. Per layer the graph loses exactly the 4 B H T^2 term:

# %%
def attention_core_checkpointed(model: GPT) -> GPT:
    """Each block's attention computes softmax(q k^T / sqrt(d_h)) v inside a checkpoint; the rest is recorded."""
    for block in model.blocks:
        attn = block.attn

        def forward(x, cache=None, attn=attn):
            B, T, d_model = x.shape
            q, k, v = (proj(x).reshape(B, T, attn.n_head, attn.head_dim).transpose(1, 2)  # (B, H, T, d_h)
                       for proj in (attn.q_proj, attn.k_proj, attn.v_proj))
            y = mg.autograd.checkpoint(lambda q, k, v: mg.nn.functional.scaled_dot_product_attention(
                q, k, v, is_causal=True), q, k, v)  # (B, H, T, d_h); the T x T weights are not kept
            return attn.out_proj(y.transpose(1, 2).reshape(B, T, d_model))
        attn.forward = forward
    return model


def selective_graph(B: int, T: int) -> int:
    _, loss = attention_core_checkpointed(make_model())(*batch(B, T))
    return mg.autograd.graph_bytes(loss).activations


def selective_gradients() -> list[np.ndarray]:
    model = attention_core_checkpointed(make_model(dtype=np.float64))
    _, loss = model(*batch(4, 64))
    loss.backward()
    return [p.grad.numpy() for p in model.parameters()]


selective_difference = max(float(np.abs(a - b).max()) for a, b in zip(plain, selective_gradients()))
selective_rows = []
for B, T in ((4, 32), (4, 64), (4, 128)):
    full = measured_activations(B, T)
    selective = selective_graph(B, T)
    saved_predicted = L * FLOAT * B * H * T * T
    selective_rows.append(dict(B=B, T=T, full=full, selective=selective, saved_predicted=saved_predicted,
                               recompute_share=T / (6 * D + T)))
print(f"float64: largest |plain gradient - selectively recomputed gradient| = {selective_difference:.1e}")
print("   B    T   graph, plain   selective   saved: predicted 4 L B H T^2   measured   "
      "recomputed: share of a block's forward FLOPs")
for r in selective_rows:
    print(f"{r['B']:4d} {r['T']:4d} {r['full']:14,} {r['selective']:11,} {r['saved_predicted']:31,} "
          f"{r['full'] - r['selective']:10,} {r['recompute_share']:26.0%}")

# %% [markdown]
# The attention core is 4 B T^2 d of a block's 24 B T d^2 + 4 B T^2 d
# floating-point operations (two per multiply-add), a share of T / (6 d + T): recomputing it costs a fraction of
# a block's forward, and it frees the one part of the activations that grows
# with T^2. At long contexts that part dominates; FlashAttention (whose
# backward recomputes the weights tile by tile) makes the same trade inside
# one kernel.

# %% [markdown]
# The plot: activations over context length (B = 4) and over batch size
# (T = 64), as predicted, as measured in the graph, the step's peak, and the
# peak with checkpointing.

# %%
def draw_memory(plt, rows, path):
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, key, fixed in ((axes[0], "T", "B"), (axes[1], "B", "T")):
        chosen = [r for r in rows if r[fixed] == (4 if fixed == "B" else 64)]
        chosen.sort(key=lambda r: r[key])
        xs = [r[key] for r in chosen]
        ax.plot(xs, [r["predicted"] / 2**20 for r in chosen], "o-", label="activations, predicted")
        ax.plot(xs, [r["measured"] / 2**20 for r in chosen], "x", ms=10, label="activations, measured (graph)")
        ax.plot(xs, [r["peak"] / 2**20 for r in chosen], "s--", label="step peak (tracemalloc)")
        ax.plot(xs, [r["peak_checkpointed"] / 2**20 for r in chosen], "^--", label="step peak, checkpointed")
        ax.set_xlabel({"T": "context length T (B = 4)", "B": "batch size B (T = 64)"}[key])
        ax.set_ylabel("MiB")
        ax.grid(alpha=0.3)
    axes[0].legend()
    fig.suptitle(f"One training step of a {L}-layer GPT (d = {D}): memory beyond the weights")
    return save_figure(fig, path)


pictures = []
plt = pyplot()
if plt is not None:
    pictures.append(draw_memory(plt, rows, args.out / "activation_memory.png"))
    print(f"Saved {pictures[-1]}")

# %% [markdown]
# What this shows: for all but the smallest batches, the memory of a training
# step is the activations, and they are predictable from the shapes alone.
# Checkpointing trades them for time. Its design, and where PyTorch's differs,
# are in docs/checkpoint_and_precision.md. Exercise 10
# (demos/exercises/ex10_checkpoint.py, graded by `python -m demos.exercises check 10`)
# asks you to write `checkpoint` yourself, with the generator replay a block
# with dropout needs.
