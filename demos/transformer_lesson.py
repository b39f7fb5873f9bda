"""The transformer lesson, retold with minigrad's own modules, every gradient checked.

    python -m demos.transformer_lesson

Retells the lesson "Attention and the transformer" (``004_78febfc9bfabf30a.txt``
in the project's seeds) section by section, with the lesson's seeds and draw
order, so the printed numbers are the lesson's:

1. Attention as soft lookup: the causal attention weights of 5 tokens
   (``nn.functional.scaled_dot_product_attention``), and the check that changing
   the last token leaves outputs 0-3 exactly unchanged (0.0) and moves output 4
   (6.83).
2. Why scale by sqrt(d): the average largest weight over 64 keys, d_k = 16..1024.
3. Position information: sinusoidal encodings three positions apart have the
   same dot product (5.5431, ``nn.sinusoidal_encoding``); RoPE scores depend
   only on the offset (2.7754 at offset 3 wherever the pair sits, 2.5418 at
   offset 1) and rotation keeps lengths (3.674), with ``nn.RotaryEmbedding``.
4. The transformer block (pre-norm, GELU MLP): ``nn.TransformerBlock``, its
   parameters against the lesson's 12 d^2.
5. Costs: the lesson's table of parameters, FLOPs and KV cache, from
   ``models.costs``, and the exact counts beside it.

Beyond the lesson, wherever a gradient is involved: the causal mask holds for
gradients too (backprop gives exactly 0 for d outputs[0:4] / d token 4), and the
gradients of the attention, of a RoPE score and of the block are compared with
central finite differences.
"""

from __future__ import annotations

import math

import numpy as np

import minigrad as mg
from demos._common import backprop_vs_finite_differences, parse_args
from minigrad import nn
from minigrad.nn import functional as F
from models import costs

TOKENS = ["the", "cat", "sat", "on", "it"]


# --------------------------------------------------------------------------------------
# 1. Attention as soft lookup
# --------------------------------------------------------------------------------------


def lesson_attention_weights(rng: np.random.Generator | None = None):
    """The lesson's X (5 tokens, d_model 16) and its W_q, W_k, W_v (16 x 8), as Tensors."""
    rng = np.random.default_rng(0) if rng is None else rng
    n, d_model, d_k = len(TOKENS), 16, 8
    X = rng.normal(0, 1, (n, d_model))  # token embeddings (random for illustration)
    Wq, Wk, Wv = (mg.tensor(rng.normal(0, d_model ** -0.5, (d_model, d_k))) for _ in range(3))
    return mg.tensor(X), Wq, Wk, Wv


def attention(X: mg.Tensor, Wq, Wk, Wv, causal: bool):
    """One head: A = softmax(Q K^T / sqrt(d_k)) with the causal mask, and A V."""
    Q, K, V = X @ Wq, X @ Wk, X @ Wv  # (n, d_k)
    out, A = F.scaled_dot_product_attention(Q, K, V, is_causal=causal, return_weights=True)
    return A, out


def causal_gradient(X, Wq, Wk, Wv):
    """d (sum of G * outputs 0-3) / d X by backprop: the row for token 4 is exactly zero."""
    X = mg.tensor(X.numpy(), requires_grad=True)
    G = np.random.default_rng(1).normal(size=(4, 8))
    _, out = attention(X, Wq, Wk, Wv, causal=True)
    (g,) = mg.grad((out[:4] * G).sum(), X)
    return g.numpy()


def attention_gradient_errors(X, Wq, Wk, Wv) -> list[float]:
    """max |backprop - finite differences| of sum(G * out) with respect to X, W_q, W_k, W_v."""
    G = np.random.default_rng(2).normal(size=(len(TOKENS), 8))
    leaves = [mg.tensor(t.numpy(), requires_grad=True) for t in (X, Wq, Wk, Wv)]
    return backprop_vs_finite_differences(lambda *w: (attention(*w, causal=True)[1] * G).sum(), leaves)


# --------------------------------------------------------------------------------------
# 2. Why scale by the square root of d
# --------------------------------------------------------------------------------------


def scaling_table(rng: np.random.Generator | None = None, n: int = 64) -> list[tuple]:
    """(d_k, std of raw scores, mean largest weight raw, mean largest weight scaled) for 200 queries."""
    rng = np.random.default_rng(0) if rng is None else rng
    rows = []
    for d in (16, 64, 256, 1024):
        q = mg.tensor(rng.normal(0, 1, (200, d)))
        k = mg.tensor(rng.normal(0, 1, (n, d)))
        raw = q @ k.T  # (200, n)
        a_raw = raw.softmax(axis=-1).max(axis=1).mean()
        a_scaled = (raw / math.sqrt(d)).softmax(axis=-1).max(axis=1).mean()
        rows.append((d, raw.var().sqrt().item(), a_raw.item(), a_scaled.item()))
    return rows


# --------------------------------------------------------------------------------------
# 3. Position information
# --------------------------------------------------------------------------------------

D = 16


def sinusoidal(pos: int) -> mg.Tensor:
    """PE(pos), the (16,) row of the encoding table at position ``pos``."""
    return nn.sinusoidal_encoding(1, D, offset=pos, dtype=np.float64)[0]


def sinusoidal_dots(positions=(0, 10, 50), offset: int = 3) -> list[float]:
    return [(sinusoidal(p) * sinusoidal(p + offset)).sum().item() for p in positions]


# The lesson rotates the interleaved pairs (x0, x1), (x2, x3), ...; nn.RotaryEmbedding pairs feature j
# with j + 8 (the LLaMA / GPT-NeoX layout). Listing the features as x0, x2, ..., x14, x1, x3, ..., x15
# turns one layout into the other, and a dot product does not care in which order features are listed.
TO_HALF_SPLIT = np.r_[0:D:2, 1:D:2]
rope = nn.RotaryEmbedding(D)


def rotate(x: mg.Tensor, pos: int) -> mg.Tensor:
    """x (16,) rotated as a token at position ``pos`` (pairs in nn's half-split layout)."""
    return rope(x[TO_HALF_SPLIT].reshape(1, D), offset=pos)[0]  # a sequence of one token, starting at pos


def rope_score(q: mg.Tensor, k: mg.Tensor, m: int, n: int) -> mg.Tensor:
    """The attention score of a query at position m and a key at position n."""
    return (rotate(q, m) * rotate(k, n)).sum()


def rope_vectors(rng: np.random.Generator | None = None):
    rng = np.random.default_rng(0) if rng is None else rng
    q, k = rng.normal(size=D), rng.normal(size=D)
    return mg.tensor(q), mg.tensor(k)


# --------------------------------------------------------------------------------------
# 4. The transformer block
# --------------------------------------------------------------------------------------


def lesson_block(d_model: int = 16, n_heads: int = 2, seed: int = 3) -> nn.TransformerBlock:
    """A pre-norm decoder block with a 4x GELU MLP, as the lesson describes, in float64."""
    return nn.TransformerBlock(d_model, n_heads, causal=True, rng=np.random.default_rng(seed)).double()


def block_gradient_errors(block: nn.TransformerBlock, x: mg.Tensor) -> list[float]:
    """max |backprop - finite differences| for the block's input and its query projection's weight."""
    G = np.random.default_rng(4).normal(size=x.shape)
    x = mg.tensor(x.numpy(), requires_grad=True)
    W_q = block.attn.q_proj.weight  # a Parameter: a leaf the check can perturb in place
    return backprop_vs_finite_differences(lambda x, W_q: (block(x) * G).sum(), [x, W_q])


# --------------------------------------------------------------------------------------
# The printout
# --------------------------------------------------------------------------------------


def main(argv=None) -> dict:
    parse_args(argv, "transformer_lesson", __doc__.splitlines()[0], pictures=False)
    results = {}

    print("1. Attention as soft lookup")
    X, Wq, Wk, Wv = lesson_attention_weights()
    A, out = attention(X, Wq, Wk, Wv, causal=True)
    with np.printoptions(precision=2, suppress=True):  # the lesson's print options
        print("causal attention weights (rows = query position):")
        print(A.numpy())
        print("rows sum to", A.sum(axis=1).numpy())
    print("output shape:", out.shape)
    # changing a later token cannot affect earlier outputs under the causal mask
    X2 = X.numpy().copy()
    X2[4] += 5
    _, out2 = attention(mg.tensor(X2), Wq, Wk, Wv, causal=True)
    change = (out2 - out).abs()
    print("max change in outputs 0-3:", change[:4].max().item(), "  output 4:", round(change[4].max().item(), 2))
    grad = causal_gradient(X, Wq, Wk, Wv)
    print("Backprop: gradient of outputs 0-3 with respect to token 4:", float(np.abs(grad[4]).max()),
          f"  (largest with respect to tokens 0-3: {np.abs(grad[:4]).max():.2f})")
    errors = attention_gradient_errors(X, Wq, Wk, Wv)
    print("Backprop vs central finite differences, d/dX, d/dW_q, d/dW_k, d/dW_v: max |difference|",
          " ".join(f"{e:.1e}" for e in errors))
    results.update(A=A.numpy(), change=change.numpy(), causal_grad=grad, attention_errors=errors)

    print("\n2. Why scale by the square root of d")
    print(" d_k   score std (raw)  max weight raw   max weight scaled")
    table = scaling_table()
    for d, std, a_raw, a_scaled in table:
        print(f"{d:5d}   {std:10.1f}      {a_raw:10.3f}       {a_scaled:10.3f}")
    results["scaling"] = table

    print("\n3. Position information")
    dots = [round(v, 4) for v in sinusoidal_dots()]
    print("sinusoidal: PE(p) . PE(p + 3) for p = 0, 10, 50:", dots)
    q, k = rope_vectors()
    scores = {}
    for m, n in ((5, 2), (105, 102), (1005, 1002), (5, 4)):
        scores[m, n] = rope_score(q, k, m, n).item()
        print(f"RoPE: query at {m:4d}, key at {n:4d} (offset {m - n}): score = {scores[m, n]:.4f}")
    rotated = rotate(q, 77)
    norms = ((rotated * rotated).sum().sqrt().item(), (q * q).sum().sqrt().item())
    print("norm preserved:", round(norms[0], 4), "=", round(norms[1], 4))
    q_leaf, k_leaf = mg.tensor(q.numpy(), requires_grad=True), mg.tensor(k.numpy(), requires_grad=True)
    rope_errors = backprop_vs_finite_differences(lambda a, b: rope_score(a, b, 105, 102), [q_leaf, k_leaf])
    print(f"Backprop vs finite differences for the RoPE score, d/dq and d/dk: max |difference| "
          f"{max(rope_errors):.1e}")
    results.update(sinusoidal=dots, rope=scores, norms=norms, rope_errors=rope_errors)

    print("\n4. The transformer block (pre-norm, GELU MLP with 4x expansion)")
    block = lesson_block()
    x = X.reshape(1, len(TOKENS), 16)
    y = block(x)
    d = 16
    matrices = sum(p.size for p in block.parameters() if p.ndim == 2)
    n_block = block.num_parameters()
    config = dict(vocab_size=1, n_layer=1, n_head=2, d_model=d, d_ff=4 * d, position="rope")
    print(f"input {x.shape} -> output {y.shape}; parameters {n_block} = {matrices} in weight matrices "
          f"(the lesson's 12 d^2 = {12 * d * d}) + {n_block - matrices} biases and norm weights")
    print(f"models.costs, exact count of one such layer: {costs.count(config).params_layers}; "
          f"lesson's count: {costs.count(config, mode='lesson').params_layers}")
    block_errors = block_gradient_errors(block, x)
    print("Backprop vs finite differences for the block, d/dinput and d/dW_q: max |difference|",
          " ".join(f"{e:.1e}" for e in block_errors))
    results.update(block_params=n_block, block_matrices=matrices, costs_exact=costs.count(config).params_layers,
                   costs_lesson=costs.count(config, mode="lesson").params_layers, block_errors=block_errors)

    print("\n5. Costs: parameters, computation and memory (models.costs, the lesson's count)")
    table = costs.lesson_table("lesson")
    print(table)
    print("\nExact counts (biases, norms and learned positions too), as models.GPT would hold them:")
    for name, config, _ in costs.LESSON_MODELS:
        print(f"{name}: {costs.count(config).params:,} parameters")
    results["cost_table"] = table
    return results


if __name__ == "__main__":
    main()
