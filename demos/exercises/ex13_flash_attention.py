"""Exercise 13: FlashAttention's two pieces: the merge of online-softmax states, and the backward of one tile.

    python -m demos.exercises check 13

The lesson demos/flash_attention_lesson.py builds attention in tiles. Its
forward carries, for each query row, the state of the online softmax over the
keys seen so far: m (the largest score), l = sum exp(s - m) and
acc = sum exp(s - m) v. Its backward visits the tiles again and recomputes
each tile's weights from the logsumexp the forward saved. Here you write the
two pieces that make it work:

1. ``merge``: the state of two disjoint sets of keys, from the state of each.
   The check merges states of generated blocks, in both orders and folded over
   many blocks, and holds the result (and acc / l, the attention output)
   against the softmax of all the keys at once; some rows have seen no key in
   a block (m = -inf, l = 0, acc = 0), some in both.
2. ``tile_backward``: one (query block i, key block j) tile's shares of dQ_i,
   dK_j and dV_j. The check holds each share against the formulas, then sums
   your shares over every tile pair (blocks that do not divide T too) and
   holds the sum against the gradient of plain attention, and finally runs
   your tiles as the VJP of a registered op through ``gradcheck`` and
   ``gradgradcheck``: write it in Tensor ops, so it can be differentiated again.
Read the lesson demos/flash_attention_lesson.py, sections 1 and 3.
"""

import numpy as np  # noqa: F401  (for your code)

import minigrad as mg  # noqa: F401  (for your code)


def merge(a, b):
    """The online-softmax state (m, l, acc) of the keys of ``a`` and ``b`` together; each a tuple of ndarrays
    m (n, 1), l (n, 1), acc (n, Ev), one row per query.

    m = the larger of the two maxima; each sum was taken relative to its own max, so rescale it by
    exp(m_own - m) (<= 1) before adding: l = l1 * exp(m1 - m) + l2 * exp(m2 - m), and acc the same way.
    A row that neither part saw (m1 = m2 = -inf) stays m = -inf, l = 0, acc = 0: exp(-inf - (-inf)) is NaN,
    so take the exponent against a safe max (0 where m is -inf).
    """
    raise NotImplementedError("exercise 13: merge")


def tile_backward(q_i, k_j, v_j, do_i, lse_i, delta_i, scale):
    """One tile's shares of the gradients: (dq_i, dk_j, dv_j), Tensors, written in Tensor ops.

    q_i (..., n, E), k_j (..., m, E), v_j (..., m, Ev); do_i (..., n, Ev) the gradient at the output rows;
    lse_i (..., n, 1) the logsumexp of each query's scores over all keys (saved by the forward);
    delta_i (..., n, 1) = rowsum(dO_i * O_i). Recompute the tile's weights
        S = q_i k_j^T * scale,   P = exp(S - lse_i)     (the true softmax weights of this tile: no renormalising)
    then  dV_j = P^T dO_i,   dP = dO_i V_j^T,   dS = P * (dP - delta_i),
          dQ_i = dS K_j * scale,   dK_j = dS^T Q_i * scale.
    (x.swapaxes(-1, -2) transposes the last two axes.)
    """
    raise NotImplementedError("exercise 13: tile_backward")
