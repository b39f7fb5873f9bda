"""Exercise 13: the merge of online-softmax states, and the backward of one tile (reference solution)."""

import numpy as np


def merge(a, b):
    (m1, l1, acc1), (m2, l2, acc2) = a, b
    m = np.maximum(m1, m2)
    safe = np.where(np.isneginf(m), 0.0, m)  # a row neither part saw: every factor exp(-inf) = 0
    alpha1, alpha2 = np.exp(m1 - safe), np.exp(m2 - safe)
    return m, alpha1 * l1 + alpha2 * l2, alpha1 * acc1 + alpha2 * acc2


def tile_backward(q_i, k_j, v_j, do_i, lse_i, delta_i, scale):
    p = (q_i @ k_j.swapaxes(-1, -2) * scale - lse_i).exp()  # (..., n, m): the tile of the attention weights
    dv_j = p.swapaxes(-1, -2) @ do_i
    ds = p * (do_i @ v_j.swapaxes(-1, -2) - delta_i)
    return ds @ k_j * scale, ds.swapaxes(-1, -2) @ q_i * scale, dv_j
