# %% [markdown]
# # The transformer, with minigrad's own modules, every gradient checked
#
#     python -m demos.transformer_lesson        (prints only; writes no files)
#
# A transformer reads a sequence with no recurrence at all: attention lets every
# token gather information from every other token, all positions at once. This
# lesson takes its parts one at a time, each with the module `minigrad.nn`
# provides for it:
#
# 1. attention as a soft lookup, and the causal mask of a language model
#    (`nn.functional.scaled_dot_product_attention`);
# 2. why the scores are divided by the square root of the dimension;
# 3. position information: sinusoidal encodings (`nn.sinusoidal_encoding`) and
#    rotary embeddings, RoPE (`nn.RotaryEmbedding`);
# 4. the transformer block (`nn.TransformerBlock`: pre-norm, GELU MLP) and its
#    parameter count, about 12 d^2;
# 5. what a transformer costs: parameters, FLOPs per token and the KV cache of
#    GPT-2 small and of 7B and 8B decoders (`models.costs`).
#
# Wherever a gradient is involved it goes one step further: the causal mask
# holds for gradients too, and the gradients of the attention, of a RoPE score
# and of the block are compared with finite differences.
#
# Each `# %%` line starts a cell: open the file in Jupyter (with jupytext) or VS
# Code to run it cell by cell, or run it whole as a script.

# %%
import math

import numpy as np

import minigrad as mg
from demos._common import backprop_vs_finite_differences, parse_args
from minigrad import nn
from minigrad.nn import functional as F
from models import costs

parse_args(None, "transformer_lesson", "The transformer's parts with minigrad.nn, every gradient checked.",
           pictures=False)
np.set_printoptions(precision=2, suppress=True)

# %% [markdown]
# ## 1. Attention as soft lookup
#
# Each position makes a query (what it looks for), a key (what it offers) and a
# value (what it passes on), by three learned matrices: Q = X W_q, K = X W_k,
# V = X W_v. The scores Q K^T / sqrt(d_k) become weights by a softmax over each
# row, and each output is the weighted average of the values. A language model
# must not see the tokens it is trying to predict: the causal mask gives future
# positions weight zero, so the weight matrix is lower triangular.
#
# Five tokens with random 16-dimensional embeddings (seed 0), projections to
# d_k = 8.

# %%
TOKENS = ["the", "cat", "sat", "on", "it"]
rng = np.random.default_rng(0)
n, d_model, d_k = len(TOKENS), 16, 8
X = mg.tensor(rng.normal(0, 1, (n, d_model)))  # token embeddings (random for illustration)
Wq, Wk, Wv = (mg.tensor(rng.normal(0, d_model ** -0.5, (d_model, d_k))) for _ in range(3))


def attention(X: mg.Tensor, Wq, Wk, Wv, causal: bool):
    """One head: A = softmax(Q K^T / sqrt(d_k)) with the causal mask, and A V."""
    Q, K, V = X @ Wq, X @ Wk, X @ Wv  # (n, d_k)
    out, A = F.scaled_dot_product_attention(Q, K, V, is_causal=causal, return_weights=True)
    return A, out


A, out = attention(X, Wq, Wk, Wv, causal=True)
print("causal attention weights (rows = query position):")
print(A.numpy())
print("rows sum to", A.sum(axis=1).numpy())
print("output shape:", out.shape)

# %% [markdown]
# The mask's promise: changing a later token cannot change any earlier output.
# Token 4 (the last) is moved: 5 is added to every one of its 16 embedding
# coordinates. Then the same question for gradients: backprop of a loss that
# reads only outputs 0-3 must give token 4 a gradient of exactly zero.

# %%
X2 = X.numpy().copy()
X2[4] += 5  # move only the last token
_, out2 = attention(mg.tensor(X2), Wq, Wk, Wv, causal=True)
change = (out2 - out).abs()
print("Token 4's embedding moved by +5 in each of its 16 coordinates; largest absolute change of each output vector:")
print("max change in outputs 0-3:", change[:4].max().item(), "  output 4:", round(change[4].max().item(), 2))


def causal_gradient(X, Wq, Wk, Wv):
    """d (sum of G * outputs 0-3) / d X by backprop: the row for token 4 is exactly zero."""
    X = mg.tensor(X.numpy(), requires_grad=True)
    G = np.random.default_rng(1).normal(size=(4, 8))
    _, out = attention(X, Wq, Wk, Wv, causal=True)
    (g,) = mg.grad((out[:4] * G).sum(), X)
    return g.numpy()


causal_grad = causal_gradient(X, Wq, Wk, Wv)
print("Backprop, loss = sum(G * outputs 0-3) for a fixed random G: largest |d loss / d token 4|:",
      float(np.abs(causal_grad[4]).max()), f"  (largest |d loss / d tokens 0-3|: {np.abs(causal_grad[:4]).max():.2f})")

# %% [markdown]
# And the gradients of the attention itself, with respect to X and the three
# projection matrices, against central finite differences (eps = 1e-6, one entry
# at a time). Printed: the largest absolute difference over all entries.

# %%
def attention_gradient_errors(X, Wq, Wk, Wv) -> list[float]:
    """max |backprop - finite differences| of sum(G * out) with respect to X, W_q, W_k, W_v."""
    G = np.random.default_rng(2).normal(size=(len(TOKENS), 8))
    leaves = [mg.tensor(t.numpy(), requires_grad=True) for t in (X, Wq, Wk, Wv)]
    return backprop_vs_finite_differences(lambda *w: (attention(*w, causal=True)[1] * G).sum(), leaves)


attention_errors = attention_gradient_errors(X, Wq, Wk, Wv)
print("loss = sum(G * outputs); largest |backprop - central difference| for d/dX, d/dW_q, d/dW_k, d/dW_v:",
      " ".join(f"{e:.1e}" for e in attention_errors))

# %% [markdown]
# ## 2. Why scale by the square root of d
#
# If queries and keys have independent entries of mean 0 and variance 1, their
# dot product over d_k dimensions has variance d_k: its standard deviation grows
# as sqrt(d_k). Large scores push the softmax into saturation, where one position
# takes almost all the weight and the gradients become tiny. Measured: 200 random
# queries against 64 random keys; "max weight" is the largest of the 64 softmax
# weights of a query, averaged over the 200 queries.

# %%
def scaling_table(rng: np.random.Generator, n: int = 64) -> list[tuple]:
    """(d_k, std of raw scores, mean largest weight raw, mean largest weight scaled) for 200 queries."""
    rows = []
    for d in (16, 64, 256, 1024):
        q = mg.tensor(rng.normal(0, 1, (200, d)))
        k = mg.tensor(rng.normal(0, 1, (n, d)))
        raw = q @ k.T  # (200, n)
        a_raw = raw.softmax(-1).amax(1).mean()
        a_scaled = (raw / math.sqrt(d)).softmax(-1).amax(1).mean()
        rows.append((d, raw.var(correction=0).sqrt().item(), a_raw.item(), a_scaled.item()))
    return rows


scaling = scaling_table(np.random.default_rng(0))
print("200 queries x 64 keys, entries standard normal; max weight = largest softmax weight, mean over queries")
print(" d_k   score std (raw)  max weight raw   max weight scaled")
for d, std, a_raw, a_scaled in scaling:
    print(f"{d:5d}   {std:10.1f}      {a_raw:10.3f}       {a_scaled:10.3f}")

# %% [markdown]
# Without scaling the largest weight climbs from 0.57 to 0.95: attention
# collapses onto one position. With it, it stays near 0.1 (one key in ten) at
# every dimension.
#
# ## 3. Position information
#
# Attention treats its input as a set: permute the tokens and the outputs are
# permuted the same way. Transformers therefore add position information. The
# original transformer added fixed sinusoidal encodings, one frequency per pair of
# dimensions (`nn.sinusoidal_encoding`): the dot product of two encodings depends
# only on how far apart they are. Most current models instead rotate each pair of
# query and key dimensions by an angle proportional to the position (RoPE): the
# attention score then depends only on the offset between query and key, and a
# rotation keeps the vector's length.

# %%
D = 16


def sinusoidal(pos: int) -> mg.Tensor:
    """PE(pos), the (16,) row of the encoding table at position ``pos``."""
    return nn.sinusoidal_encoding(1, D, offset=pos, dtype=np.float64)[0]


# RoPE rotates the interleaved pairs (x0, x1), (x2, x3), ... in the original write-up; nn.RotaryEmbedding
# pairs feature j with j + 8 (the LLaMA / GPT-NeoX layout). Listing the features as x0, x2, ..., x14, x1,
# x3, ..., x15 turns one layout into the other, and a dot product does not care in which order features
# are listed.
TO_HALF_SPLIT = np.r_[0:D:2, 1:D:2]
rope = nn.RotaryEmbedding(D)


def rotate(x: mg.Tensor, pos: int) -> mg.Tensor:
    """x (16,) rotated as a token at position ``pos`` (pairs in nn's half-split layout)."""
    return rope(x[TO_HALF_SPLIT].reshape(1, D), offset=pos)[0]  # a sequence of one token, starting at pos


def rope_score(q: mg.Tensor, k: mg.Tensor, m: int, n: int) -> mg.Tensor:
    """The attention score (dot product) of a query at position m and a key at position n."""
    return (rotate(q, m) * rotate(k, n)).sum()


sinusoidal_dots = [round((sinusoidal(p) * sinusoidal(p + 3)).sum().item(), 4) for p in (0, 10, 50)]
print("sinusoidal: PE(p) . PE(p + 3) for p = 0, 10, 50:", sinusoidal_dots)
print("(the dot product of two 16-dimensional encodings three positions apart)")
rope_rng = np.random.default_rng(0)
q, k = mg.tensor(rope_rng.normal(size=D)), mg.tensor(rope_rng.normal(size=D))
print("RoPE score: the dot product of the rotated query and key (q, k random 16-dimensional vectors):")
rope_scores = {}
for m, n_ in ((5, 2), (105, 102), (1005, 1002), (5, 4)):
    rope_scores[m, n_] = rope_score(q, k, m, n_).item()
    print(f"RoPE: query at {m:4d}, key at {n_:4d} (offset {m - n_}): score = {rope_scores[m, n_]:.4f}")
rotated = rotate(q, 77)
norms = ((rotated * rotated).sum().sqrt().item(), (q * q).sum().sqrt().item())
print("Euclidean length of q rotated to position 77, and of q itself:")
print("norm preserved:", round(norms[0], 4), "=", round(norms[1], 4))

# %% [markdown]
# The RoPE score is differentiable in q and k like any other op chain:

# %%
q_leaf, k_leaf = mg.tensor(q.numpy(), requires_grad=True), mg.tensor(k.numpy(), requires_grad=True)
rope_errors = backprop_vs_finite_differences(lambda a, b: rope_score(a, b, 105, 102), [q_leaf, k_leaf])
print(f"RoPE score at positions 105 and 102: largest |backprop - central difference| over d/dq and d/dk: "
      f"{max(rope_errors):.1e}")

# %% [markdown]
# ## 4. The transformer block
#
# A transformer is a stack of identical blocks, each with two sublayers wrapped in
# a residual connection: multi-head self-attention, which moves information
# between positions, and an MLP applied to each position on its own (4x wider,
# GELU). Most current models normalize before each sublayer (pre-norm), as
# `nn.TransformerBlock` does by default. Weight matrices: 4 d^2 in attention (Q, K,
# V, output) and 8 d^2 in the MLP, so about 12 d^2 per layer, plus biases and
# norm weights. Here d = 16, two heads, the five tokens of section 1 as input.

# %%
block = nn.TransformerBlock(d_model, 2, causal=True, rng=np.random.default_rng(3)).double()
x = X.reshape(1, len(TOKENS), d_model)
y = block(x)
block_matrices = sum(p.size for p in block.parameters() if p.ndim == 2)
block_params = block.num_parameters()
config = dict(vocab_size=1, n_layer=1, n_head=2, d_model=d_model, d_ff=4 * d_model, position="rope")
costs_exact, costs_lesson = costs.count(config).params_layers, costs.count(config, mode="lesson").params_layers
print(f"input {x.shape} -> output {y.shape}; parameters {block_params} = {block_matrices} in weight matrices "
      f"(12 d^2 = {12 * d_model * d_model}) + {block_params - block_matrices} biases and norm weights")
print(f"models.costs, parameters of one such layer: exact {costs_exact}; counting weight matrices only "
      f"(12 d^2): {costs_lesson}")


def block_gradient_errors(block: nn.TransformerBlock, x: mg.Tensor) -> list[float]:
    """max |backprop - finite differences| for the block's input and its query projection's weight."""
    G = np.random.default_rng(4).normal(size=x.shape)
    x = mg.tensor(x.numpy(), requires_grad=True)
    W_q = block.attn.q_proj.weight  # a Parameter: a leaf the check can perturb in place
    return backprop_vs_finite_differences(lambda x, W_q: (block(x) * G).sum(), [x, W_q])


block_errors = block_gradient_errors(block, x)
print("Block, loss = sum(G * output): largest |backprop - central difference| for d/dinput and d/dW_q:",
      " ".join(f"{e:.1e}" for e in block_errors))

# %% [markdown]
# ## 5. Costs: parameters, computation and memory
#
# A forward pass costs about 2 floating-point operations per weight per token
# (a multiply and an add). Generating text one token at a time, a model keeps the
# keys and values of all earlier tokens, the KV cache, which grows with the
# context; grouped-query attention shares each key-value head among several query
# heads and shrinks it. `models.costs` counts all three for three well-known
# architectures, first as the back-of-the-envelope rule counts them (weight
# matrices only, embeddings once if tied; 16-bit cache entries; B = 10^9,
# GFLOP = 10^9 operations, KiB = 1024 bytes, GiB = 2^30 bytes):

# %%
cost_table = costs.lesson_table("lesson")
print(cost_table)
print("\nExact counts (biases, norms and learned positions too), as models.GPT would hold them:")
for name, model_config, _ in costs.LESSON_MODELS:
    print(f"{name}: {costs.count(model_config).params:,} parameters")
