# %% [markdown]
# # Attention and the Transformer block, built step by step on minigrad Tensors
#
#     python -m demos.attention_from_scratch [--out DIR]
#     (draws attention_maps.png and positional_encoding.png into DIR, default out/attention_from_scratch)
#
# A recurrent network passes information from token to token, and its influence
# fades with every step (demos/rnn_vanishing_gradient.py measures how fast).
# Attention connects every token with every other token in one step: each token
# asks a question (its query), every token offers an answer (its key), and the
# better they match, the more of that token's information (its value) flows in:
#
#     Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V
#
# This lesson builds it up in six steps, with NumPy-style code written on
# minigrad Tensors: attention on hand-made vectors; why the scores are divided by
# sqrt(d_k); self-attention over a sentence with the causal mask; several heads;
# positional encoding, because attention alone cannot see word order; and a
# complete Transformer block (post-norm, as in "Attention Is All You Need").
#
# Then two steps that need an autodiff engine: every gradient is computed by
# backprop and compared with finite differences, and the reason given for
# sqrt(d_k), "otherwise the gradients become tiny", is measured.
#
# Each `# %%` line starts a cell: open the file in Jupyter (with jupytext) or VS
# Code to run it cell by cell, or run it whole as a script.

# %%
import math
from pathlib import Path

import numpy as np

import minigrad as mg
from demos._common import backprop_vs_finite_differences, parse_args, pyplot, save_figure
from minigrad import nn

args = parse_args(None, "attention_from_scratch",
                  "Attention and the Transformer block on minigrad Tensors, every gradient checked.")
np.set_printoptions(precision=3, suppress=True)

# All the random numbers come from one generator, drawn in the order the steps below use them.
rng = np.random.default_rng(0)

# %% [markdown]
# ## 1. Attention on vectors made by hand: what does "pain" look at?
#
# Six tokens, each described by four features made up for the example: cardiac,
# body location, person, function word. For now the queries, keys and values are
# the token vectors themselves. The query of "pain" is compared with every key
# (a dot product, divided by sqrt(4)); softmax turns the scores into weights
# that sum to 1; the new vector of "pain" is the weighted average of the values.

# %%
TOKENS = ["the", "patient", "has", "chest", "pain", "arm"]
#                              cardiac  location  person  function
X_toy = mg.tensor(2 * np.array([[0.0, 0.0, 0.0, 1.0],  # the
                                [0.1, 0.0, 1.0, 0.0],  # patient
                                [0.0, 0.0, 0.2, 0.8],  # has
                                [0.9, 0.8, 0.0, 0.0],  # chest
                                [1.0, 0.3, 0.0, 0.0],  # pain
                                [0.5, 0.9, 0.0, 0.0]]))  # arm


def attention(Q: mg.Tensor, K: mg.Tensor, V: mg.Tensor, mask: np.ndarray | None = None):
    """softmax(Q K^T / sqrt(d_k)) V; ``mask`` (bool, True = may attend) zeroes forbidden weights."""
    d_k = K.shape[-1]
    scores = Q @ K.T / math.sqrt(d_k)  # (n, n): similarity of every query with every key
    if mask is not None:
        scores = scores.masked_fill(~mask, -np.inf)  # forbidden positions get zero weight
    weights = scores.softmax(axis=-1)  # each row sums to 1
    return weights @ V, weights  # weighted average of the values


q = X_toy[TOKENS.index("pain")]
toy_scores = X_toy @ q / math.sqrt(4)
toy_weights = toy_scores.softmax()
toy_output = toy_weights @ X_toy
print("Score (q . k / sqrt(4)) of the query 'pain' against each token's key, and its softmax weight:")
for tok, s, w in zip(TOKENS, toy_scores.numpy(), toy_weights.numpy()):
    print(f"pain -> {tok:<8} score {s:5.2f}   weight {w:.3f}")
print(f"\nNew vector for 'pain' (weighted average of the values): {toy_output.numpy()}")
print("(its four features: cardiac, body location, person, function word)")

# %% [markdown]
# "Pain" attends mostly to "chest", to itself and to "arm", the tokens with
# cardiac or body-location features; its new vector now carries where it hurts.
#
# ## 2. Why divide by sqrt(d_k)
#
# With random queries and keys whose entries have variance 1, a dot product over
# d_k dimensions has variance d_k: the scores spread as sqrt(d_k). One random
# query against 10 random keys, for growing d_k: the spread of the raw scores,
# and the largest softmax weight with and without dividing by sqrt(d_k). One
# draw could say anything, so each row is 1000 draws (their own generator,
# seed 1): the mean and the standard deviation of the largest weight, and how
# often one key takes more than 0.99 of the weight.

# %%
def scaling_spread(draws: int = 1000, n_keys: int = 10, seed: int = 1) -> list[dict]:
    """Per d_k, over ``draws`` random queries with 10 random keys each: the scores' spread and the largest weight."""
    rng = np.random.default_rng(seed)
    rows = []
    for d_k in [4, 64, 512]:
        q, K = rng.normal(size=(draws, d_k)), rng.normal(size=(draws, n_keys, d_k))
        raw = mg.tensor(np.einsum("nkd,nd->nk", K, q))  # (draws, 10): q . k for each key
        w_raw = raw.softmax(-1).amax(-1).numpy()  # the largest of the 10 weights, per draw
        w_scaled = (raw / math.sqrt(d_k)).softmax(-1).amax(-1).numpy()
        rows.append(dict(d_k=d_k, std=raw.numpy().std(axis=-1).mean(), raw_mean=w_raw.mean(), raw_std=w_raw.std(),
                         raw_one_key=(w_raw > 0.99).mean(), scaled_mean=w_scaled.mean(), scaled_std=w_scaled.std()))
    return rows


scaling = scaling_spread()
print("One query, 10 keys, entries standard normal, 1000 draws; the largest of the 10 softmax weights, "
      "mean +- standard deviation:")
for r in scaling:
    print(f"d_k = {r['d_k']:>3}: spread (std) of the scores {r['std']:6.2f} | largest weight without scaling "
          f"{r['raw_mean']:.2f} +- {r['raw_std']:.2f} (above 0.99 in {r['raw_one_key']:4.0%} of draws), "
          f"with scaling {r['scaled_mean']:.2f} +- {r['scaled_std']:.2f}")

# %% [markdown]
# Without scaling the largest weight grows with d_k: at d_k = 512 it is 0.95 on
# average, and in 7 draws out of 10 one key takes more than 0.99 of the weight.
# The softmax has saturated, and the other keys get almost no gradient (section
# 8 measures that). Divided by sqrt(d_k), the scores keep the same spread at
# every d_k, and so does the largest weight, about 0.3 each time.
#
# ## 3. Self-attention over a sentence, and the causal mask
#
# In a real Transformer the queries, keys and values are learned projections of
# the token vectors: Q = X W_Q, K = X W_K, V = X W_V (random here, as before
# training). A language model writes left to right, so a token may not look at
# the tokens after it: the causal mask gives every future position weight zero.

# %%
SENTENCE = ["the", "patient", "has", "chest", "pain", "radiating", "to", "the", "arm"]
n, d_model, d_k = len(SENTENCE), 8, 8
X = mg.tensor(rng.normal(size=(n, d_model)))  # token embeddings (untrained)
W_Q, W_K, W_V = (mg.tensor(rng.normal(0, 1 / np.sqrt(d_model), (d_model, d_k))) for _ in range(3))
out_full, w_full = attention(X @ W_Q, X @ W_K, X @ W_V)
causal = np.tril(np.ones((n, n), dtype=bool))  # token i may only see tokens 0..i
out_causal, w_causal = attention(X @ W_Q, X @ W_K, X @ W_V, mask=causal)
print(f"Output shape: {out_full.shape} (one new vector per token)")
print(f"Each row of weights sums to 1: {np.allclose(w_full.numpy().sum(axis=1), 1)}")
print(f"With the mask, total weight given to future tokens (the upper triangle): "
      f"{w_causal.numpy()[~causal].sum():.1f}")

# %% [markdown]
# The two weight matrices as pictures: row i says how much token i attends to
# each token j. With random weights the pattern means nothing yet; the structure
# does: every token reaches every other in one step, and the mask keeps only the
# lower triangle.

# %%
def draw_attention_maps(plt, w_full: np.ndarray, w_causal: np.ndarray, tokens, path: Path) -> Path:
    n = len(tokens)
    future = ~np.tril(np.ones((n, n), dtype=bool))
    cmap = plt.get_cmap("Blues").with_extremes(bad="0.85")  # masked (future) positions in grey
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.6), layout="constrained")
    for ax, w, title in [(axes[0], w_full, "Self-attention (every token sees every token)"),
                         (axes[1], np.ma.masked_where(future, w_causal), "Causal self-attention (no looking ahead)")]:
        image = ax.imshow(w, cmap=cmap, vmin=0, vmax=1)
        for i in range(n):  # the weight in each cell, so the map can be read as a table too
            for j in range(n):
                if w[i, j] is not np.ma.masked:
                    ax.text(j, i, f"{w[i, j]:.2f}", ha="center", va="center", fontsize=7,
                            color="white" if w[i, j] > 0.55 else "black")
        ax.set_xticks(range(n), tokens, rotation=45, ha="right")
        ax.set_yticks(range(n), tokens)
        ax.set_xlabel("attends to (keys)")
        ax.set_title(title)
    axes[0].set_ylabel("token (queries)")
    fig.colorbar(image, ax=axes, shrink=0.8, label="attention weight (each row sums to 1; grey: masked)")
    return save_figure(fig, path)


pictures = []
plt = pyplot()
if plt is not None:
    pictures.append(draw_attention_maps(plt, w_full.numpy(), w_causal.numpy(), SENTENCE,
                                        args.out / "attention_maps.png"))
    print(f"Saved {pictures[-1]}")

# %% [markdown]
# ## 4. Multi-head attention
#
# One attention computes one notion of relevance. Multi-head attention runs h of
# them side by side, each with its own smaller projections (d_k = d_model / h),
# concatenates their outputs and mixes them with a final matrix W_O.

# %%
def init_multihead(d_model: int, n_heads: int, rng: np.random.Generator):
    """Per head (W_Q, W_K, W_V), each (d_model, d_k), then W_O (d_model, d_model), as Tensors."""
    d_k = d_model // n_heads
    heads = [tuple(mg.tensor(rng.normal(0, 1 / np.sqrt(d_model), (d_model, d_k))) for _ in range(3))
             for _ in range(n_heads)]
    W_O = mg.tensor(rng.normal(0, 1 / np.sqrt(d_model), (d_model, d_model)))
    return heads, W_O


def multihead(X: mg.Tensor, heads, W_O: mg.Tensor, mask=None) -> mg.Tensor:
    outputs = [attention(X @ Wq, X @ Wk, X @ Wv, mask)[0] for Wq, Wk, Wv in heads]  # each (n, d_k)
    return mg.concatenate(outputs, axis=1) @ W_O  # (n, d_model)


heads, W_O = init_multihead(d_model=8, n_heads=2, rng=rng)
mh = multihead(X, heads, W_O, mask=causal)
n_params = sum(w.size for h in heads for w in h) + W_O.size
print(f"2 heads of dimension {heads[0][0].shape[1]}; output shape {mh.shape}; parameters {n_params} "
      f"(3 matrices of 8 x 4 per head, and W_O of 8 x 8)")

# %% [markdown]
# ## 5. Attention cannot see word order; positional encoding
#
# Shuffle the tokens and the outputs are shuffled the same way, but otherwise
# unchanged: "the patient treated the doctor" and "the doctor treated the
# patient" would look alike. The Transformer adds to each token a positional
# encoding of sines and cosines at different frequencies:
#
#     PE[pos, 2i] = sin(pos * omega_i),  PE[pos, 2i+1] = cos(pos * omega_i),  omega_i = 1 / 10000^(2i / d)
#
# Moving k positions ahead is then the same rotation R_k of each (sin, cos) pair,
# wherever one starts; the cell below checks that over a 100 x 16 table.

# %%
def positional_encoding(n_positions: int, d_model: int):
    """The (n_positions, d_model) table of sines and cosines, and its frequencies omega."""
    pos = np.arange(n_positions)[:, None]
    omega = 1 / 10000 ** (np.arange(0, d_model, 2) / d_model)  # one frequency per pair of dimensions
    pe = np.zeros((n_positions, d_model))
    pe[:, 0::2] = np.sin(pos * omega)
    pe[:, 1::2] = np.cos(pos * omega)
    return pe, omega


def rotation_error(PE: np.ndarray, omega: np.ndarray, k: int = 3) -> float:
    """max |PE(pos + k) - R_k PE(pos)| over all positions, R_k block-diagonal 2x2 rotations."""
    d = PE.shape[1]
    R = np.zeros((d, d))
    for i, w in enumerate(omega):
        R[2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[np.cos(k * w), np.sin(k * w)], [-np.sin(k * w), np.cos(k * w)]]
    PE = mg.tensor(PE)
    return (PE[k:] - PE[:-k] @ mg.tensor(R).T).abs().max().item()


perm = rng.permutation(n)
out = multihead(X, heads, W_O)  # without mask, so that order is not imposed by the mask
out_shuffled = multihead(X[perm], heads, W_O)
print(f"Shuffling the tokens only shuffles the outputs: {np.allclose(out.numpy()[perm], out_shuffled.numpy())}")
PE, omega = positional_encoding(100, 16)
print(f"Largest difference between PE(pos + 3) and R_3 PE(pos), over all positions: {rotation_error(PE, omega):.1e}")
print("(absolute, over every entry of the 100 x 16 table: zero up to rounding)")
PE8 = mg.tensor(positional_encoding(n, 8)[0])  # the encoding for our 8-dimensional tokens
out_pe = multihead(X + PE8, heads, W_O)
out_pe_shuffled = multihead(X[perm] + PE8, heads, W_O)
pe_shuffle_only_permutes = np.allclose(out_pe.numpy()[perm], out_pe_shuffled.numpy())
print(f"With positional encoding, shuffling only shuffles the outputs: {pe_shuffle_only_permutes}")
nn_pe_difference = np.abs(nn.sinusoidal_encoding(100, 16, dtype=np.float64).numpy() - PE).max()
print(f"(minigrad.nn.sinusoidal_encoding gives the same table: largest absolute difference {nn_pe_difference:.1e})")

# %% [markdown]
# The table as a picture: fast frequencies in the first dimensions, slow ones in
# the last.

# %%
def draw_positional_encoding(plt, PE: np.ndarray, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(10, 4), layout="constrained")
    image = ax.imshow(PE.T, aspect="auto", cmap="RdBu", vmin=-1, vmax=1)
    ax.set_xlabel("position in the sequence")
    ax.set_ylabel("dimension")
    ax.set_title("Sinusoidal positional encoding: fast frequencies at the top, slow ones at the bottom")
    fig.colorbar(image, ax=ax)
    return save_figure(fig, path)


if plt is not None:
    pictures.append(draw_positional_encoding(plt, PE, args.out / "positional_encoding.png"))
    print(f"Saved {pictures[-1]}")

# %% [markdown]
# ## 6. A complete Transformer block
#
# Multi-head attention mixes information between tokens; a feed-forward network,
# FFN(x) = ReLU(x W1 + b1) W2 + b2, transforms each token on its own. Around each,
# a residual connection and a layer normalization, LayerNorm(x + Sublayer(x)),
# which gives each token vector mean 0 and variance 1 over its features.
# `minigrad.nn.TransformerBlock` given the same weights must compute the same block.

# %%
def layer_norm(x: mg.Tensor, eps: float = 1e-5) -> mg.Tensor:
    return (x - x.mean(-1, keepdim=True)) / (x.var(-1, keepdim=True, correction=0) + eps).sqrt()


def transformer_block(x, heads, W_O, W1, b1, W2, b2, mask=None) -> mg.Tensor:
    x = layer_norm(x + multihead(x, heads, W_O, mask))  # attention + Add & Norm
    ffn = (x @ W1 + b1).relu() @ W2 + b2  # feed-forward, token by token
    return layer_norm(x + ffn)  # FFN + Add & Norm


def nn_block_with(heads, W_O, W1, b1, W2, b2) -> nn.TransformerBlock:
    """The project's ``nn.TransformerBlock`` set up as the block above and holding its weights.

    Post-norm (``norm_first=False``), a ReLU MLP, causal. nn's Linear stores
    weight as (out, in) and computes x @ weight.T, hence the transposes; the
    heads' W_Q side by side make q_proj, because nn splits q into heads by
    consecutive columns. Its attention biases are 0 and its norms' gain 1 and
    shift 0, which the block above does not have at all.
    """
    block = nn.TransformerBlock(8, len(heads), 32, norm_first=False, mlp="relu", causal=True).double()
    state = {name: np.zeros_like(value.numpy()) for name, value in block.state_dict().items()}
    state["attn_norm.weight"] = state["mlp_norm.weight"] = np.ones(8)
    for i, name in enumerate(["q_proj", "k_proj", "v_proj"]):
        state[f"attn.{name}.weight"] = np.concatenate([head[i].numpy() for head in heads], axis=1).T
    state["attn.out_proj.weight"] = W_O.numpy().T
    state["mlp.up_proj.weight"], state["mlp.up_proj.bias"] = W1.numpy().T, b1.numpy()
    state["mlp.down_proj.weight"], state["mlp.down_proj.bias"] = W2.numpy().T, b2.numpy()
    block.load_state_dict(state)
    return block


d_ff = 32
W1, b1 = mg.tensor(rng.normal(0, 1 / np.sqrt(d_model), (d_model, d_ff))), mg.zeros(d_ff, dtype=np.float64)
W2, b2 = mg.tensor(rng.normal(0, 1 / np.sqrt(d_ff), (d_ff, d_model))), mg.zeros(d_model, dtype=np.float64)
x_in = X + PE8
y = transformer_block(x_in, heads, W_O, W1, b1, W2, b2, mask=causal)
n_block = n_params + W1.size + b1.size + W2.size + b2.size
print(f"Input {x_in.shape} -> output {y.shape}")
print(f"Mean of each output token: {y.numpy().mean(axis=1).round(3)}")
print(f"Variance of each output token: {y.numpy().var(axis=1).round(3)}")
print("(mean and variance of each token's 8 features, rounded to 3 decimals)")
print(f"Parameters of this small block: {n_block}")
print(f"(attention {n_params}, then W1 {W1.size} + b1 {b1.size} + W2 {W2.size} + b2 {b2.size} in the feed-forward)")
nn_block_difference = (nn_block_with(heads, W_O, W1, b1, W2, b2)(x_in.unsqueeze(0))[0] - y).abs().max().item()
print(f"minigrad.nn.TransformerBlock(norm_first=False, mlp='relu'), holding these weights, computes the same "
      f"block: largest absolute difference {nn_block_difference:.1e}")

# %% [markdown]
# ## 7. Gradients by backprop, checked by finite differences
#
# Everything above ran on Tensors, so backprop can differentiate it. A scalar
# loss, loss = sum(G * output) with G a fixed random matrix the shape of the
# output, is differentiated with respect to each input and weight. Each gradient
# is then computed again by central differences, one entry at a time:
# (loss(w + eps) - loss(w - eps)) / 2 eps with eps = 1e-6. Printed: the largest
# absolute difference between the two over all entries.

# %%
def attention_gradient_errors() -> dict[str, float]:
    """max |backprop - finite differences| of a scalar loss on the causal attention output."""
    G = np.random.default_rng(1).normal(size=out_causal.shape)  # fixed weights: loss = sum(G * out)
    leaves = [mg.tensor(t.numpy(), requires_grad=True) for t in (X, W_Q, W_K, W_V)]

    def loss(X, W_Q, W_K, W_V):
        out, _ = attention(X @ W_Q, X @ W_K, X @ W_V, mask=causal)
        return (out * G).sum()

    return dict(zip(["X", "W_Q", "W_K", "W_V"], backprop_vs_finite_differences(loss, leaves)))


def block_gradient_errors() -> dict[str, float]:
    """The same for the whole Transformer block: with respect to its input, W_O, W1 and W2."""
    G = np.random.default_rng(2).normal(size=y.shape)
    leaves = [mg.tensor(t.numpy(), requires_grad=True) for t in (x_in, W_O, W1, W2)]

    def loss(x, W_O, W1, W2):
        return (transformer_block(x, heads, W_O, W1, b1, W2, b2, mask=causal) * G).sum()

    return dict(zip(["input", "W_O", "W1", "W2"], backprop_vs_finite_differences(loss, leaves)))


print("Largest |backprop gradient - central difference| over all entries (eps = 1e-6):")
attention_errors = attention_gradient_errors()
print("Causal attention, loss = sum(G * output): "
      + ", ".join(f"d/d{name} {err:.1e}" for name, err in attention_errors.items()))
block_errors = block_gradient_errors()
print("Transformer block, loss = sum(G * y):     "
      + ", ".join(f"d/d{name} {err:.1e}" for name, err in block_errors.items()))

# %% [markdown]
# ## 8. Why sqrt(d_k), measured on the gradient
#
# Section 2 showed the softmax saturating without the scaling; the claim is that
# its gradient then vanishes. The softmax's Jacobian, diag(w) - w w^T, goes to
# zero as the weights w become one-hot. Measured: scores q . k for 200 random
# queries against 10 random keys (entries standard normal), loss
# L = sum(G * softmax(scores)) with a random G, and the Euclidean norm of
# dL / d scores for each query (a vector of 10), averaged over the 200 queries.

# %%
def softmax_gradient_norms(dims=(4, 16, 64, 256, 1024), n_queries=200, n_keys=10, seed=3) -> list[tuple]:
    """(d_k, mean ||dL/d scores|| without scaling, with scaling): the gradient through the softmax."""
    rng = np.random.default_rng(seed)
    rows = []
    for d_k in dims:
        q, K = rng.normal(size=(n_queries, d_k)), rng.normal(size=(n_keys, d_k))
        G = rng.normal(size=(n_queries, n_keys))
        norms = []
        for scale in (1.0, 1 / math.sqrt(d_k)):
            scores = mg.tensor(q @ K.T * scale, requires_grad=True)  # (n_queries, n_keys)
            (g,) = mg.grad((scores.softmax(axis=-1) * G).sum(), scores)
            norms.append(float(np.linalg.norm(g.numpy(), axis=1).mean()))
        rows.append((d_k, *norms))
    return rows


softmax_grad_norms = softmax_gradient_norms()
print("Mean over 200 queries of the Euclidean norm of dL/d scores (10 scores per query):")
print("  d_k   without scaling   with scaling")
for d_k, unscaled, scaled in softmax_grad_norms:
    print(f"{d_k:5d}   {unscaled:13.2e}   {scaled:12.2e}")
print("Without scaling the softmax saturates and the gradient collapses; with it, it stays put.")
