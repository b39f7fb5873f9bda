"""Attention and the Transformer block, built step by step on minigrad Tensors, every gradient checked.

    python -m demos.attention_from_scratch

Retells steps 3 to 8 of the NumPy notebook "Attention and the Transformer, from
scratch" (``000_480be21528dd973b.txt`` in the project's seeds), with the same
seed and the same draws in the same order, so every printed number is the
notebook's:

3. scaled dot-product attention on hand-made vectors ("pain" looks at "chest");
4. why divide by sqrt(d_k): the softmax saturates without it;
5. self-attention over a sentence, and the causal mask;
6. multi-head attention (2 heads, 256 parameters);
7. attention is blind to order; sinusoidal positional encoding, a rotation per offset;
8. a complete (post-norm) Transformer block: mean 0, variance 1 per token, 808 parameters.

The notebook's ``attention``, ``multihead`` and ``transformer_block`` are written
here with Tensor ops, line for line. Then the step the notebook cannot take:
gradients. A scalar loss on the attention output is differentiated by backprop
with respect to X, W_Q, W_K and W_V, and the whole block with respect to its
input and weights, each compared with central finite differences; and the
notebook's argument for sqrt(d_k), "the gradients become tiny", is measured:
the gradient through the softmax as d_k grows, with and without the scaling.

The heat maps and the encoding image are drawn by ``python -m demos.attention_maps``.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

import minigrad as mg
from demos._common import backprop_vs_finite_differences, parse_args
from demos.rnn_vanishing_gradient import notebook_rnn
from minigrad import nn

TOKENS = ["the", "patient", "has", "chest", "pain", "arm"]
SENTENCE = ["the", "patient", "has", "chest", "pain", "radiating", "to", "the", "arm"]


# --------------------------------------------------------------------------------------
# The notebook's functions, on Tensors
# --------------------------------------------------------------------------------------


def attention(Q: mg.Tensor, K: mg.Tensor, V: mg.Tensor, mask: np.ndarray | None = None):
    """softmax(Q K^T / sqrt(d_k)) V; ``mask`` (bool, True = may attend) zeroes forbidden weights."""
    d_k = K.shape[-1]
    scores = Q @ K.T / math.sqrt(d_k)  # (n, n): similarity of every query with every key
    if mask is not None:
        scores = scores.masked_fill(~mask, -np.inf)  # forbidden positions get zero weight
    weights = scores.softmax(axis=-1)  # each row sums to 1
    return weights @ V, weights  # weighted average of the values


def init_multihead(d_model: int, n_heads: int, rng: np.random.Generator):
    """Per head (W_Q, W_K, W_V), each (d_model, d_k), then W_O: the notebook's draws, as Tensors."""
    d_k = d_model // n_heads
    heads = [tuple(mg.tensor(rng.normal(0, 1 / np.sqrt(d_model), (d_model, d_k))) for _ in range(3))
             for _ in range(n_heads)]
    W_O = mg.tensor(rng.normal(0, 1 / np.sqrt(d_model), (d_model, d_model)))
    return heads, W_O


def multihead(X: mg.Tensor, heads, W_O: mg.Tensor, mask=None) -> mg.Tensor:
    outputs = [attention(X @ Wq, X @ Wk, X @ Wv, mask)[0] for Wq, Wk, Wv in heads]  # each (n, d_k)
    return mg.concatenate(outputs, axis=1) @ W_O  # (n, d_model)


def positional_encoding(n_positions: int, d_model: int):
    """PE[pos, 2i] = sin(pos * omega_i), PE[pos, 2i+1] = cos(pos * omega_i), omega_i = 1 / 10000^(2i/d)."""
    pos = np.arange(n_positions)[:, None]
    omega = 1 / 10000 ** (np.arange(0, d_model, 2) / d_model)  # one frequency per pair of dimensions
    pe = np.zeros((n_positions, d_model))
    pe[:, 0::2] = np.sin(pos * omega)
    pe[:, 1::2] = np.cos(pos * omega)
    return pe, omega


def layer_norm(x: mg.Tensor, eps: float = 1e-5) -> mg.Tensor:
    return (x - x.mean(axis=-1, keepdims=True)) / (x.var(axis=-1, keepdims=True) + eps).sqrt()


def transformer_block(x, heads, W_O, W1, b1, W2, b2, mask=None) -> mg.Tensor:
    x = layer_norm(x + multihead(x, heads, W_O, mask))  # attention + Add & Norm
    ffn = (x @ W1 + b1).relu() @ W2 + b2  # feed-forward, token by token
    return layer_norm(x + ffn)  # FFN + Add & Norm


def nn_block_with(heads, W_O, W1, b1, W2, b2) -> nn.TransformerBlock:
    """The project's ``nn.TransformerBlock`` set up as the notebook's block and holding its weights.

    Post-norm (``norm_first=False``), a ReLU MLP, causal. nn's Linear stores
    weight as (out, in) and computes x @ weight.T, hence the transposes; the
    heads' W_Q side by side make q_proj, because nn splits q into heads by
    consecutive columns. Its attention biases are 0 and its norms' gain 1 and
    shift 0, which the notebook's block does not have at all.
    """
    block = nn.TransformerBlock(8, len(heads), 32, norm_first=False, mlp="relu", causal=True).double()
    state = {name: np.zeros_like(value) for name, value in block.state_dict().items()}
    state["attn_norm.weight"] = state["mlp_norm.weight"] = np.ones(8)
    for i, name in enumerate(["q_proj", "k_proj", "v_proj"]):
        state[f"attn.{name}.weight"] = np.concatenate([head[i].numpy() for head in heads], axis=1).T
    state["attn.out_proj.weight"] = W_O.numpy().T
    state["mlp.up_proj.weight"], state["mlp.up_proj.bias"] = W1.numpy().T, b1.numpy()
    state["mlp.down_proj.weight"], state["mlp.down_proj.bias"] = W2.numpy().T, b2.numpy()
    block.load_state_dict(state)
    return block


# --------------------------------------------------------------------------------------
# The notebook's steps, in its order (each draws from the same rng, as the notebook does)
# --------------------------------------------------------------------------------------


def toy_attention():
    """Step 3: what "pain" attends to, with the token vectors as queries, keys and values."""
    #                              cardiac  location  person  function
    X_toy = mg.tensor(2 * np.array([[0.0, 0.0, 0.0, 1.0],  # the
                                    [0.1, 0.0, 1.0, 0.0],  # patient
                                    [0.0, 0.0, 0.2, 0.8],  # has
                                    [0.9, 0.8, 0.0, 0.0],  # chest
                                    [1.0, 0.3, 0.0, 0.0],  # pain
                                    [0.5, 0.9, 0.0, 0.0]]))  # arm
    q = X_toy[TOKENS.index("pain")]
    scores = X_toy @ q / math.sqrt(4)
    weights = scores.softmax()
    output = weights @ X_toy
    return scores.numpy(), weights.numpy(), output.numpy()


def scaling_spread(rng: np.random.Generator) -> list[tuple]:
    """Step 4: one query over 10 keys: (d_k, score std, largest weight raw, largest weight scaled)."""
    rows = []
    for d_k in [4, 64, 512]:
        q, K = mg.tensor(rng.normal(size=d_k)), mg.tensor(rng.normal(size=(10, d_k)))
        raw = K @ q
        w_raw, w_scaled = raw.softmax(), (raw / math.sqrt(d_k)).softmax()
        rows.append((d_k, raw.numpy().std(), w_raw.max().item(), w_scaled.max().item()))
    return rows


def self_attention(rng: np.random.Generator) -> SimpleNamespace:
    """Step 5: random projections of a 9-token sentence; full and causal attention."""
    n, d_model, d_k = len(SENTENCE), 8, 8
    X = mg.tensor(rng.normal(size=(n, d_model)))  # token embeddings (untrained)
    W_Q, W_K, W_V = (mg.tensor(rng.normal(0, 1 / np.sqrt(d_model), (d_model, d_k))) for _ in range(3))
    out_full, w_full = attention(X @ W_Q, X @ W_K, X @ W_V)
    causal = np.tril(np.ones((n, n), dtype=bool))  # token i may only see tokens 0..i
    out_causal, w_causal = attention(X @ W_Q, X @ W_K, X @ W_V, mask=causal)
    return SimpleNamespace(n=n, d_model=d_model, X=X, W_Q=W_Q, W_K=W_K, W_V=W_V, causal=causal,
                           out_full=out_full, w_full=w_full, out_causal=out_causal, w_causal=w_causal)


def rotation_error(PE: np.ndarray, omega: np.ndarray, k: int = 3) -> float:
    """Step 7: max |PE(pos + k) - R_k PE(pos)| over all positions, R_k block-diagonal 2x2 rotations."""
    d = PE.shape[1]
    R = np.zeros((d, d))
    for i, w in enumerate(omega):
        R[2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[np.cos(k * w), np.sin(k * w)], [-np.sin(k * w), np.cos(k * w)]]
    PE = mg.tensor(PE)
    return (PE[k:] - PE[:-k] @ mg.tensor(R).T).abs().max().item()


def notebook(rng: np.random.Generator | None = None) -> SimpleNamespace:
    """Steps 2 to 8 in the notebook's order; returns everything the printout and the pictures need."""
    rng = np.random.default_rng(0) if rng is None else rng
    notebook_rnn(rng)  # step 2 draws first (demos/rnn_vanishing_gradient.py uses them)
    nb = SimpleNamespace()
    nb.toy_scores, nb.toy_weights, nb.toy_output = toy_attention()  # step 3 draws nothing
    nb.scaling = scaling_spread(rng)  # step 4
    nb.sa = self_attention(rng)  # step 5
    X, causal = nb.sa.X, nb.sa.causal

    # Step 6
    nb.heads, nb.W_O = init_multihead(d_model=8, n_heads=2, rng=rng)
    nb.mh = multihead(X, nb.heads, nb.W_O, mask=causal)
    nb.n_params = sum(w.size for h in nb.heads for w in h) + nb.W_O.size

    # Step 7
    nb.perm = perm = rng.permutation(nb.sa.n)
    out = multihead(X, nb.heads, nb.W_O)  # without mask, so that order is not imposed by the mask
    out_shuffled = multihead(X[perm], nb.heads, nb.W_O)
    nb.shuffle_only_permutes = np.allclose(out.numpy()[perm], out_shuffled.numpy())
    nb.PE, nb.omega = positional_encoding(100, 16)
    nb.rotation_error = rotation_error(nb.PE, nb.omega, k=3)
    nb.PE8 = mg.tensor(positional_encoding(nb.sa.n, 8)[0])  # the encoding for our 8-dimensional tokens
    out_pe = multihead(X + nb.PE8, nb.heads, nb.W_O)
    out_pe_shuffled = multihead(X[perm] + nb.PE8, nb.heads, nb.W_O)
    nb.pe_shuffle_only_permutes = np.allclose(out_pe.numpy()[perm], out_pe_shuffled.numpy())

    # Step 8
    d_model, d_ff = 8, 32
    nb.W1, nb.b1 = mg.tensor(rng.normal(0, 1 / np.sqrt(d_model), (d_model, d_ff))), mg.zeros(d_ff, dtype=np.float64)
    nb.W2, nb.b2 = mg.tensor(rng.normal(0, 1 / np.sqrt(d_ff), (d_ff, d_model))), mg.zeros(d_model, dtype=np.float64)
    nb.x_in = X + nb.PE8
    nb.y = transformer_block(nb.x_in, nb.heads, nb.W_O, nb.W1, nb.b1, nb.W2, nb.b2, mask=causal)
    nb.n_block = nb.n_params + nb.W1.size + nb.b1.size + nb.W2.size + nb.b2.size

    # The library's block, given the same weights, computes the same function.
    block = nn_block_with(nb.heads, nb.W_O, nb.W1, nb.b1, nb.W2, nb.b2)
    nb.nn_block_difference = (block(nb.x_in.unsqueeze(0))[0] - nb.y).abs().max().item()
    # ...and the library's sinusoidal table is the notebook's.
    nb.nn_pe_difference = np.abs(nn.sinusoidal_encoding(100, 16, dtype=np.float64).numpy() - nb.PE).max()
    return nb


# --------------------------------------------------------------------------------------
# Beyond the notebook: gradients, by backprop, checked by finite differences
# --------------------------------------------------------------------------------------


def attention_gradient_errors(nb: SimpleNamespace) -> dict[str, float]:
    """max |backprop - finite differences| of a scalar loss on the causal attention output."""
    G = np.random.default_rng(1).normal(size=nb.sa.out_causal.shape)  # fixed weights: loss = sum(G * out)
    leaves = [mg.tensor(t.numpy(), requires_grad=True) for t in (nb.sa.X, nb.sa.W_Q, nb.sa.W_K, nb.sa.W_V)]

    def loss(X, W_Q, W_K, W_V):
        out, _ = attention(X @ W_Q, X @ W_K, X @ W_V, mask=nb.sa.causal)
        return (out * G).sum()

    return dict(zip(["X", "W_Q", "W_K", "W_V"], backprop_vs_finite_differences(loss, leaves)))


def block_gradient_errors(nb: SimpleNamespace) -> dict[str, float]:
    """The same for the whole Transformer block: with respect to its input, W_O, W1 and W2."""
    G = np.random.default_rng(2).normal(size=nb.y.shape)
    leaves = [mg.tensor(t.numpy(), requires_grad=True) for t in (nb.x_in, nb.W_O, nb.W1, nb.W2)]

    def loss(x, W_O, W1, W2):
        y = transformer_block(x, nb.heads, W_O, W1, nb.b1, W2, nb.b2, mask=nb.sa.causal)
        return (y * G).sum()

    return dict(zip(["input", "W_O", "W1", "W2"], backprop_vs_finite_differences(loss, leaves)))


def softmax_gradient_norms(dims=(4, 16, 64, 256, 1024), n_queries=200, n_keys=10, seed=3) -> list[tuple]:
    """(d_k, mean ||dL/d scores|| without scaling, with scaling): the gradient through the softmax.

    Scores are q.k for random unit-variance q, k; L = sum(G * softmax(scores)) for a
    random G. The softmax's Jacobian, diag(w) - w w^T, vanishes as w becomes one-hot,
    so once the unscaled scores spread as sqrt(d_k) the gradient reaching them collapses.
    """
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


def main(argv=None) -> SimpleNamespace:
    parse_args(argv, "attention_from_scratch", __doc__.splitlines()[0], pictures=False)
    with np.printoptions(precision=3, suppress=True):  # the notebook's print options
        return report(notebook())


def report(nb: SimpleNamespace) -> SimpleNamespace:
    """Print the notebook's lines, then the gradient checks; return everything computed."""
    print("Step 3: scaled dot-product attention")
    for tok, s, w in zip(TOKENS, nb.toy_scores, nb.toy_weights):
        print(f"pain -> {tok:<8} score {s:5.2f}   weight {w:.3f}")
    print(f"\nNew vector for 'pain' (weighted average of the values): {nb.toy_output}")

    print("\nStep 4: why divide by sqrt(d_k)")
    for d_k, std, w_raw, w_scaled in nb.scaling:
        print(f"d_k = {d_k:>3}: spread (std) of the scores {std:6.2f} | largest weight without scaling {w_raw:.3f}, "
              f"with scaling {w_scaled:.3f}")

    print("\nStep 5: self-attention over a sentence, and the causal mask")
    sa = nb.sa
    print(f"Output shape: {sa.out_full.shape} (one new vector per token)")
    print(f"Each row of weights sums to 1: {np.allclose(sa.w_full.numpy().sum(axis=1), 1)}")
    print(f"With the mask, weight given to future tokens: {sa.w_causal.numpy()[~sa.causal].sum():.1f}")

    print("\nStep 6: multi-head attention")
    print(f"2 heads of dimension {nb.heads[0][0].shape[1]}; output shape {nb.mh.shape}; parameters {nb.n_params}")

    print("\nStep 7: positional encoding")
    print(f"Shuffling the tokens only shuffles the outputs: {nb.shuffle_only_permutes}")
    print(f"Largest difference between PE(pos + 3) and R_3 PE(pos), over all positions: {nb.rotation_error:.1e}")
    print(f"With positional encoding, shuffling only shuffles the outputs: {nb.pe_shuffle_only_permutes}")
    print(f"(minigrad.nn.sinusoidal_encoding gives the same table: max difference {nb.nn_pe_difference:.1e})")

    print("\nStep 8: a complete Transformer block")
    print(f"Input {nb.x_in.shape} -> output {nb.y.shape}")
    print(f"Mean of each output token: {nb.y.numpy().mean(axis=1).round(3)}")
    print(f"Variance of each output token: {nb.y.numpy().var(axis=1).round(3)}")
    print(f"Parameters of this small block: {nb.n_block}")
    print(f"(minigrad.nn.TransformerBlock(norm_first=False, mlp='relu'), holding these weights, computes the same "
          f"block: max difference {nb.nn_block_difference:.1e})")

    print("\nBeyond the notebook: gradients by backprop vs central finite differences (max |difference|)")
    attn_errors = attention_gradient_errors(nb)
    print("Causal attention, loss = sum(G * output): "
          + ", ".join(f"d/d{name} {err:.1e}" for name, err in attn_errors.items()))
    block_errors = block_gradient_errors(nb)
    print("Transformer block, loss = sum(G * y):     "
          + ", ".join(f"d/d{name} {err:.1e}" for name, err in block_errors.items()))

    print("\nWhy sqrt(d_k), measured: mean norm of the gradient reaching the scores through the softmax")
    print("  d_k   without scaling   with scaling")
    grad_norms = softmax_gradient_norms()
    for d_k, unscaled, scaled in grad_norms:
        print(f"{d_k:5d}   {unscaled:13.2e}   {scaled:12.2e}")
    print("Without scaling the softmax saturates and the gradient collapses; with it, it stays put.")
    nb.attention_errors, nb.block_errors, nb.softmax_grad_norms = attn_errors, block_errors, grad_norms
    return nb


if __name__ == "__main__":
    main()
