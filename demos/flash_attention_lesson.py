# %% [markdown]
# # FlashAttention from scratch: attention in tiles, memory linear in the sequence
#
#     python -m demos.flash_attention_lesson [--out DIR]
#     (draws flash_memory.png into DIR, default out/flash_attention_lesson)
#
# Plain attention makes the T x T matrix of scores, softmax(Q K^T) per head,
# and keeps it for backward: the memory lesson (demos/memory_lesson.py) measured
# it as the one activation that grows with the square of the context.
# FlashAttention (Dao et al., 2022) computes the very same output without ever
# holding that matrix, one block x block tile of scores at a time. This lesson
# builds it, each step predicted, then measured:
#
# 1. the online softmax on one row: a running max and a running sum, rescaled
#    when a new block's max is larger, give the softmax (and the logsumexp) of
#    the row in one pass over its blocks;
# 2. the tiled forward over query and key blocks, in minigrad Tensor ops,
#    keeping one number per query (the logsumexp) for backward;
# 3. the backward by recomputation, tile by tile (dV, dP, dS with the
#    rowsum(dO * O) term, dQ, dK), checked against plain attention's gradients
#    and against finite differences, in float64;
# 4. causal masking that skips the tiles above the diagonal (the work is
#    counted: it halves), padding masks, T not a multiple of the block, and
#    every block size from 1 to T;
# 5. memory measured: the bytes the graph holds and the step's peak, plain and
#    tiled, over T = 64 ... 4,096; and the bytes moved between a slow and a
#    fast memory of a stated size, counted, as the paper's argument goes;
# 6. the op: `F.flash_attention`, a fused op whose composite is section 2's
#    code, and `GPTConfig(flash=True)`.
#
# Each `# %%` line starts a cell: open the file in Jupyter (with jupytext) or VS
# Code to run it cell by cell, or run it whole as a script.

# %%
import math
import tracemalloc

import numpy as np

import minigrad as mg
from demos._common import parse_args, pyplot, save_figure
from minigrad.nn import functional as F
from models.gpt import GPT, GPTConfig

args = parse_args(None, "flash_attention_lesson", "FlashAttention from scratch: the online softmax, tiled "
                  "forward and backward, causal skipping, memory and I/O measured.")
np.set_printoptions(precision=4, suppress=True)
rng = np.random.default_rng(0)

# %% [markdown]
# ## 1. The online softmax, on one row
#
# softmax(s) v = sum_j exp(s_j) v_j / sum_j exp(s_j). For stability every
# exponent is taken after subtracting the row's max m. Reading the row block by
# block, the max is not known until the end; so keep the max m *seen so far*,
# the sum l = sum exp(s_j - m) and the weighted sum acc = sum exp(s_j - m) v_j
# over the keys seen so far. When a new block brings a larger max m', the old
# terms were all taken relative to m: multiply l and acc by exp(m - m') and
# they are relative to m' (the factor is 1 when the max does not change). At the
# end, acc / l is the output and m + log l the row's logsumexp. Below, 12
# scores in blocks of 4; each block raises the max here, the third by most, so
# the rescaling shows (the first block's factor is 0: nothing was summed yet).

# %%
row = rng.standard_normal(12)
row[9] = 4.0  # the largest score, in the last block
values = rng.standard_normal((12, 3))  # one value vector per key


def online_softmax(scores: np.ndarray, values: np.ndarray, block: int, say=print):
    """softmax(scores) @ values and logsumexp(scores), reading ``block`` scores at a time."""
    m, l, acc = -np.inf, 0.0, np.zeros(values.shape[1])
    for start in range(0, len(scores), block):
        s, v = scores[start:start + block], values[start:start + block]
        m_new = max(m, s.max())
        alpha = np.exp(m - m_new)  # rescales what was summed relative to the old max
        p = np.exp(s - m_new)
        l, acc = alpha * l + p.sum(), alpha * acc + p @ v
        say(f"  keys {start:2d}-{start + len(s) - 1:2d}: block max {s.max():7.4f}, running max {m_new:7.4f}, "
            f"rescale {alpha:.4f}, running sum {l:.4f}")
        m = m_new
    return acc / l, m + np.log(l)


print("Online softmax over 12 scores, blocks of 4:")
out_online, lse_online = online_softmax(row, values, 4)
weights = np.exp(row - row.max()) / np.exp(row - row.max()).sum()
lse_plain = row.max() + np.log(np.exp(row - row.max()).sum())
print(f"online: output {out_online}, logsumexp {lse_online:.12f}")
print(f"plain:  output {weights @ values}, logsumexp {lse_plain:.12f}")
online_error = max(np.abs(out_online - weights @ values).max(), abs(lse_online - lse_plain))
print(f"largest difference: {online_error:.1e} (float64 rounding)")
assert online_error < 1e-14

# %% [markdown]
# The state (m, l, acc) of two parts of a row merges the same way, in either
# order: m = max(m1, m2), l = l1 exp(m1 - m) + l2 exp(m2 - m), and acc alike.
# That is what lets the key blocks be processed in any order, or split across
# workers and merged at the end (exercise 13 asks you to write the merge).

# %%
def merge(a, b):
    """The online-softmax state (m, l, acc) of the keys of ``a`` and of ``b`` together."""
    (m1, l1, acc1), (m2, l2, acc2) = a, b
    m = max(m1, m2)
    return m, l1 * np.exp(m1 - m) + l2 * np.exp(m2 - m), acc1 * np.exp(m1 - m) + acc2 * np.exp(m2 - m)


def state(scores, values):
    m = scores.max()
    p = np.exp(scores - m)
    return m, p.sum(), p @ values


first, second = state(row[:5], values[:5]), state(row[5:], values[5:])
for name, (m, l, acc) in (("first then second", merge(first, second)), ("second then first", merge(second, first))):
    print(f"merged {name}: output {acc / l}, logsumexp {m + np.log(l):.12f}")

# %% [markdown]
# ## 2. The tiled forward: query blocks against key blocks
#
# Now Q (..., Tq, E), K (..., Tk, E), V (..., Tk, Ev). Cut the queries into
# blocks of `block_size` rows and the keys into blocks of `block_size`
# columns. A tile is one query block against one key block: its scores
# S = Q_i K_j^T * scale are (block_size, block_size), never T x T. Each query
# block carries the online-softmax state of its rows, (m, l, acc), through the
# key blocks, exactly as the single row above. A mask (padding, or any pattern)
# is a bias tile added to S; causal attention forbids keys after the query.
# `tiles` lists the tiles the loops visit; a tile whose keys are all in the
# future of all its queries is left out (section 4 counts them).
#
# The same loop is the composite of the fused op `flash_attention`
# (minigrad/fused/), and the tests hold the two equal. The op's own forward
# is this loop on NumPy arrays; it keeps the logsumexp m + log l of each query
# for backward, and nothing else of the tiles.

# %%
def blocks(n: int, size: int) -> list[tuple[int, int]]:
    """[(start, stop)] cutting range(n) into blocks of ``size`` (the last one shorter when size does not divide n)."""
    return [(start, min(start + size, n)) for start in range(0, n, size)]


def tiles(Tq: int, Tk: int, block_size: int, causal: bool):
    """(query block, key block, visible) for every tile with at least one visible score. Causal, the queries are
    the last Tq of Tk positions: query i sees keys j <= i + Tk - Tq. ``visible`` is True (all), or a bool tile."""
    offset = Tk - Tq
    for i0, i1 in blocks(Tq, block_size):
        for j0, j1 in blocks(Tk, block_size):
            if not causal or j1 - 1 <= i0 + offset:
                yield (i0, i1), (j0, j1), True  # every key of the tile is visible to every query
            elif j0 <= i1 - 1 + offset:  # the tile crosses the diagonal
                yield (i0, i1), (j0, j1), np.arange(j0, j1)[None, :] <= np.arange(i0, i1)[:, None] + offset


def bias_tile(bias, rows, cols):
    """bias[..., i0:i1, j0:j1], keeping an axis of size 1 (broadcast over queries or keys) whole."""
    r = slice(*rows) if bias.shape[-2] != 1 else slice(None)
    c = slice(*cols) if bias.shape[-1] != 1 else slice(None)
    return bias[..., r, c]


def tiled_attention(q, k, v, *bias, scale, causal=False, block_size=64):
    """softmax(q k^T * scale + bias) v in tiles, with the online softmax: (out (..., Tq, Ev), lse (..., Tq))."""
    Tq = q.shape[-2]
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2], *(b.shape[:-2] for b in bias))
    stats = {}  # query block -> (running max m, running sum l, running acc): (..., n, 1), (..., n, 1), (..., n, Ev)
    for rows, cols, visible in tiles(Tq, k.shape[-2], block_size, causal):
        s = q[..., slice(*rows), :] @ k[..., slice(*cols), :].swapaxes(-1, -2) * scale  # (..., n, m): one tile
        if bias:
            s = s + bias_tile(bias[0], rows, cols)
        if visible is not True:
            s = s.masked_fill(~visible, -np.inf)
        m, l, acc = stats.get(rows, (None, None, None))
        m_new = s.amax(-1, keepdim=True) if m is None else mg.maximum(m, s.amax(-1, keepdim=True))
        m_safe = m_new.masked_fill(np.isneginf(m_new.data), 0.0)  # a row that has seen only forbidden keys
        p = (s - m_safe).exp()
        pv = p @ v[..., slice(*cols), :]
        if m is None:
            l, acc = p.sum(axis=-1, keepdims=True), pv
        else:
            alpha = (m - m_safe).exp()  # the rescaling, 1 unless this block raised the max
            l, acc = alpha * l + p.sum(axis=-1, keepdims=True), alpha * acc + pv
        stats[rows] = m_new, l, acc
    outs, lses = [], []
    for rows in blocks(Tq, block_size):
        n = rows[1] - rows[0]
        if rows not in stats:  # causal with Tq > Tk: these queries see no key at all
            outs.append(mg.zeros(lead + (n, v.shape[-1]), dtype=q.dtype))
            lses.append(mg.full(lead + (n, 1), -np.inf, dtype=q.dtype))
            continue
        m, l, acc = stats[rows]
        empty = l.data == 0  # a query that may attend to nothing: output 0, logsumexp -inf
        outs.append((acc / l.masked_fill(empty, 1.0)).masked_fill(empty, 0.0).broadcast_to(lead + (n, v.shape[-1])))
        lses.append((m.masked_fill(empty, 0.0) + l.masked_fill(empty, 1.0).log()).masked_fill(empty, -np.inf))
    return mg.cat(outs, axis=-2), mg.cat(lses, axis=-2)[..., 0]


def plain_attention(q, k, v, mask=None, causal=False):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)


def randn(*shape, dtype=np.float64, grad=True):
    return mg.tensor(rng.standard_normal(shape).astype(dtype), requires_grad=grad)


B, H, T, E = 2, 3, 50, 8  # T is not a multiple of the block
q, k, v = randn(B, H, T, E), randn(B, H, T, E), randn(B, H, T, E)
scale = 1 / math.sqrt(E)
out_tiled, lse_tiled = tiled_attention(q, k, v, scale=scale, block_size=16)
out_plain = plain_attention(q, k, v)
scores = (q @ k.swapaxes(-1, -2) * scale).data
forward_error = float(np.abs(out_tiled.data - out_plain.data).max())
lse_error = float(np.abs(lse_tiled.data - np.log(np.exp(scores).sum(-1))).max())
print(f"B = {B}, H = {H}, T = {T}, E = {E}, tiles of 16 (the last block 2 rows): largest |tiled - plain| "
      f"output {forward_error:.1e}, logsumexp {lse_error:.1e}")
largest_tile = 16 * 16
print(f"largest score array made: one tile per (batch, head), 16 x 16 = {largest_tile} scores, "
      f"where plain attention makes T x T = {T * T}")
assert forward_error < 1e-12 and lse_error < 1e-12

# %% [markdown]
# ## 3. The backward, by recomputation, tile by tile
#
# With O = P V, P = softmax(S), S = Q K^T * scale and dO the gradient arriving
# at O, the gradients of plain attention are
#
#     dV = P^T dO          dP = dO V^T          dS = P * (dP - rowsum(dP * P))
#     dQ = dS K * scale    dK = dS^T Q * scale
#
# and rowsum(dP * P) = rowsum(dO * (P V)) = rowsum(dO * O): a number per query
# from the output alone, no T x T matrix needed. P itself is not kept, but any
# tile of it comes back from the tile's scores and the logsumexp saved by the
# forward: P_ij = exp(S_ij - lse_i), exact, with no other tile. So backward
# walks the same tiles, recomputes S and P for each, and adds that tile's share
# into dQ_i, dK_j and dV_j. Here it is in Tensor ops, held against the plain
# attention's gradients from `mg.grad`, then against finite differences.

# %%
def tiled_backward(q, k, v, out, lse, dout, *, scale, causal=False, block_size=64):
    """dQ, dK, dV of attention from the saved output and logsumexp, one tile at a time (no bias, for clarity)."""
    delta = (dout * out).sum(axis=-1, keepdims=True)  # rowsum(dO * O), (..., Tq, 1)
    lse = lse.masked_fill(np.isneginf(lse.data), 0.0).unsqueeze(-1)  # (..., Tq, 1); a row that sees nothing: P = 0
    dq, dk, dv = mg.zeros_like(q), mg.zeros_like(k), mg.zeros_like(v)
    for rows, cols, visible in tiles(q.shape[-2], k.shape[-2], block_size, causal):
        r, c = slice(*rows), slice(*cols)
        s = q[..., r, :] @ k[..., c, :].swapaxes(-1, -2) * scale  # the tile's scores, recomputed
        if visible is not True:
            s = s.masked_fill(~visible, -np.inf)
        p = (s - lse[..., r, :]).exp()  # the tile of P, from the saved logsumexp
        dv[..., c, :] += p.swapaxes(-1, -2) @ dout[..., r, :]  # dV_j += P_ij^T dO_i
        dp = dout[..., r, :] @ v[..., c, :].swapaxes(-1, -2)  # dP_ij = dO_i V_j^T
        ds = p * (dp - delta[..., r, :])  # dS_ij = P_ij * (dP_ij - rowsum(dO_i * O_i))
        dq[..., r, :] += ds @ k[..., c, :] * scale
        dk[..., c, :] += ds.swapaxes(-1, -2) @ q[..., r, :] * scale
    return dq, dk, dv


dout = randn(B, H, T, E, grad=False)
with mg.no_grad():
    tiled_grads = tiled_backward(q, k, v, out_tiled, lse_tiled, dout, scale=scale, block_size=16)
plain_grads = mg.grad(out_plain, [q, k, v], dout)
backward_error = max(float(np.abs(a.data - b.data).max()) for a, b in zip(tiled_grads, plain_grads))
print(f"float64: largest |tiled - plain| over dQ, dK, dV: {backward_error:.1e}")
assert backward_error < 1e-12


def finite_differences(x, entries, h=1e-6):
    """d sum(O * dO) / dx at a few entries of x, by central differences of plain numbers."""
    found = []
    for index in entries:
        saved = x.data[index]
        loss = []
        for step in (h, -h):
            x.data[index] = saved + step
            with mg.no_grad():
                loss.append(float((tiled_attention(q, k, v, scale=scale, block_size=16)[0] * dout).sum().item()))
        x.data[index] = saved
        found.append((loss[0] - loss[1]) / (2 * h))
    return np.array(found)


entries = [tuple(int(rng.integers(n)) for n in q.shape) for _ in range(4)]
fd_error = max(float(np.abs(finite_differences(x, entries) - np.array([g.data[e] for e in entries])).max())
               for x, g in zip((q, k, v), tiled_grads))
print(f"float64: largest |tiled backward - finite differences| at 4 entries each of Q, K, V: {fd_error:.1e}")
assert fd_error < 1e-7

# %% [markdown]
# ## 4. Causal tiles, padding masks, any T, any block size
#
# Causal attention forbids the keys after each query: in the T x T scores, the
# triangle above the diagonal. A tile entirely above the diagonal contributes
# nothing, so the loops skip it, in forward and backward; a tile the diagonal
# crosses is masked inside. With n = T / block_size blocks there are n^2 tiles
# and n (n + 1) / 2 on or below the diagonal: about half the work once n is
# large. Counted below in tiles, and in the multiply-adds of the two matrix
# products of the forward (S = Q K^T and P V). Then the tiled attention is
# held against plain attention with a padding mask, causal, for every block
# size from 1 to T and beyond.

# %%
print("  T  block  tiles  causal tiles  share   multiply-adds (forward)  causal  share")
work = []
for T_count, block in ((256, 64), (1024, 64), (4096, 64), (4096, 16)):
    full = list(tiles(T_count, T_count, block, False))
    causal = list(tiles(T_count, T_count, block, True))
    n = T_count // block
    assert len(full) == n * n and len(causal) == n * (n + 1) // 2  # predicted, then counted
    flops = [sum(2 * (r[1] - r[0]) * (c[1] - c[0]) * E for r, c, _ in t) for t in (full, causal)]
    work.append(dict(T=T_count, block=block, tiles=len(full), causal=len(causal), share=len(causal) / len(full)))
    print(f"{T_count:5d} {block:5d} {len(full):6d} {len(causal):12d}  {len(causal) / len(full):.3f} "
          f"{flops[0]:24,} {flops[1]:12,}  {flops[1] / flops[0]:.3f}")
print("the share tends to 1/2 as the blocks get more: (n + 1) / 2n for n blocks a side")

Tp = 13
qp, kp, vp = randn(2, 2, Tp, 4), randn(2, 2, Tp, 4), randn(2, 2, Tp, 3)
keep = rng.random((2, 1, 1, Tp)) < 0.7  # padding: True where a key is a real token
keep[..., 0] = True
padding_bias = np.where(keep, 0.0, -np.inf)
expected = plain_attention(qp, kp, vp, keep, causal=True)
expected_grads = mg.grad(expected.sum(), [qp, kp, vp])
block_errors = {}
for block in range(1, Tp + 2):
    got = tiled_attention(qp, kp, vp, mg.tensor(padding_bias), scale=0.5, causal=True, block_size=block)[0]
    got_grads = mg.grad(got.sum(), [qp, kp, vp])
    block_errors[block] = max([float(np.abs(got.data - expected.data).max())]
                              + [float(np.abs(a.data - b.data).max()) for a, b in zip(got_grads, expected_grads)])
print(f"T = {Tp}, causal with a padding mask: largest |tiled - plain| (output and gradients) over block sizes 1 to "
      f"{Tp + 1}: {max(block_errors.values()):.1e}")
assert max(block_errors.values()) < 1e-12

# %% [markdown]
# ## 5. Memory: what the graph holds, the step's peak, and the bytes moved
#
# Plain attention's graph keeps the weights P, (B, H, T, T), besides its
# output; the tiled attention keeps its output and one logsumexp per query,
# (B, H, T): predicted in bytes from the shapes, read from the graph by
# `mg.autograd.graph_bytes`. The peak of forward plus backward, measured by
# `tracemalloc`, adds what the backward makes while it runs: for plain
# attention several T x T arrays at once (and its T x T causal mask, made once
# per length), for the tiled one a few tiles and the gradients. One head of 32
# features, float32, causal, T from 64 to 4,096.

# %%
Hm, Em, FLOAT = 1, 32, 4


def attention_inputs(T_len):
    r = np.random.default_rng(T_len)
    return [mg.tensor(r.standard_normal((1, Hm, T_len, Em)).astype(np.float32), requires_grad=True)
            for _ in range(3)]


def graph_and_peak(attention, T_len):
    q_, k_, v_ = attention_inputs(T_len)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    out_ = attention(q_, k_, v_)
    held = mg.autograd.graph_bytes(out_).activations
    out_.backward(mg.ones_like(out_))
    peak = tracemalloc.get_traced_memory()[1] - before
    tracemalloc.stop()
    return held, peak


def flash(q_, k_, v_):
    return F.flash_attention(q_, k_, v_, is_causal=True)


def plain(q_, k_, v_):
    return F.scaled_dot_product_attention(q_, k_, v_, is_causal=True)


LENGTHS = [64, 128, 256, 512, 1024, 2048, 4096]
for attention in (plain, flash):  # the very first call sets up what every later one reuses: not measured
    graph_and_peak(attention, 32)
memory = []
for T_len in LENGTHS:
    plain_held, plain_peak = graph_and_peak(plain, T_len)
    flash_held, flash_peak = graph_and_peak(flash, T_len)
    memory.append(dict(T=T_len, plain=plain_held, plain_predicted=FLOAT * Hm * (T_len * T_len + T_len * Em),
                       flash=flash_held, flash_predicted=FLOAT * Hm * T_len * (Em + 1),
                       plain_peak=plain_peak, flash_peak=flash_peak))
print("    T   graph, plain (KiB)  predicted   graph, tiled (KiB)  predicted   peak, plain (KiB)  peak, tiled (KiB)")
for r in memory:
    print(f"{r['T']:5d} {r['plain'] / 1024:18.1f} {r['plain_predicted'] / 1024:10.1f} {r['flash'] / 1024:20.1f} "
          f"{r['flash_predicted'] / 1024:10.1f} {r['plain_peak'] / 1024:19.0f} {r['flash_peak'] / 1024:18.0f}")
print("Predicted equals the graph's bytes at every length:",
      all(r["plain"] == r["plain_predicted"] and r["flash"] == r["flash_predicted"] for r in memory))
last, previous = memory[-1], memory[-2]
print(f"From T = {previous['T']} to {last['T']}: plain's peak grows {last['plain_peak'] / previous['plain_peak']:.2f} "
      f"times, the tiled one's {last['flash_peak'] / previous['flash_peak']:.2f} times; at T = {last['T']} the "
      f"tiled peak is {last['plain_peak'] / last['flash_peak']:.0f} times smaller")

# %% [markdown]
# The bytes held are not the whole story on a GPU: what limits attention there
# is traffic between the large, slow memory (HBM) and the small, fast one
# (SRAM on each core). The paper counts it. Plain attention writes S to slow
# memory and reads it back for the softmax, writes P and reads it back for
# P V: besides reading Q, K, V and writing O, at least 4 T^2 numbers move.
# The tiled forward keeps a tile's scores in fast memory and moves only
# Q_i, K_j, V_j in and O_i, lse_i out: it reads Q once and writes O once, and
# reads K and V once per query block. Fast memory of M numbers must hold Q_i,
# K_j, V_j and the running acc (4 b d numbers for blocks of b rows), the
# tile's scores (b^2) and the running max and sum (2b); the largest b that
# fits sets how many query blocks there are. Below, a simulated two-level
# memory runs the tiled forward and counts every number that crosses, and
# checks at each step that what is resident fits in M; the count is held
# against that formula.

# %%
class TwoLevelMemory:
    """A slow memory holding the arrays, a fast one of ``size`` numbers, and a count of the numbers moved."""

    def __init__(self, size: int):
        self.size, self.resident, self.moved, self.most = size, 0, 0, 0

    def load(self, array):  # slow -> fast
        self.moved += array.size
        return self.hold(array.copy())

    def store(self, array):  # fast -> slow
        self.moved += array.size
        return array

    def hold(self, array):  # made (or loaded) in fast memory: it must fit
        self.resident += array.size
        self.most = max(self.most, self.resident)
        assert self.resident <= self.size, f"{self.resident} numbers resident, more than the {self.size} that fit"
        return array

    def free(self, *arrays):
        self.resident -= sum(a.size for a in arrays)


def counted_forward(Q, K, V, memory, b):
    """One head's tiled forward (no mask) through ``memory``, blocks of b rows; returns O."""
    T_len, d = Q.shape
    O = np.empty_like(Q)
    for i0 in range(0, T_len, b):
        Qi = memory.load(Q[i0:i0 + b])
        n = len(Qi)
        m, l, acc = (memory.hold(np.full((n, 1), -np.inf)), memory.hold(np.zeros((n, 1))),
                     memory.hold(np.zeros((n, d))))
        for j0 in range(0, T_len, b):
            Kj, Vj = memory.load(K[j0:j0 + b]), memory.load(V[j0:j0 + b])
            S = memory.hold(Qi @ Kj.T / math.sqrt(d))
            m_new = np.maximum(m, S.max(axis=1, keepdims=True))
            P = np.exp(S - m_new)  # in place of S
            alpha = np.exp(m - m_new)
            l[...], acc[...], m[...] = alpha * l + P.sum(axis=1, keepdims=True), alpha * acc + P @ Vj, m_new
            memory.free(Kj, Vj, S)
        O[i0:i0 + n] = memory.store(acc / l)
        memory.store(m + np.log(l))  # the logsumexp, for backward
        memory.free(Qi, m, l, acc)
    return O


def largest_block(M, d):
    return max(b for b in range(1, M) if 4 * b * d + b * b + 2 * b <= M)


T_io, d_io, M = 2048, 64, 2**16  # fast memory: 65,536 numbers (256 KiB of float32)
Q_io, K_io, V_io = (np.random.default_rng(1).standard_normal((T_io, d_io)) for _ in range(3))
b = largest_block(M, d_io)
fast = TwoLevelMemory(M)
O_io = counted_forward(Q_io, K_io, V_io, fast, b)
weights_io = np.exp(Q_io @ K_io.T / math.sqrt(d_io) - (Q_io @ K_io.T / math.sqrt(d_io)).max(1, keepdims=True))
assert np.allclose(O_io, weights_io / weights_io.sum(1, keepdims=True) @ V_io)
n_blocks = -(-T_io // b)
predicted_moved = T_io * d_io + 2 * n_blocks * T_io * d_io + T_io * d_io + T_io  # Q once, K and V per block, O, lse
plain_moved = 4 * T_io * d_io + 4 * T_io * T_io  # Q, K, V in, O out; S out and in, P out and in
print(f"T = {T_io}, d = {d_io}, fast memory M = {M:,} numbers: blocks of b = {b} rows ({n_blocks} query blocks)")
print(f"at most {fast.most:,} numbers resident in fast memory")
print(f"numbers moved, tiled: counted {fast.moved:,}, predicted {predicted_moved:,}")
print(f"numbers moved, plain: at least {plain_moved:,}, {plain_moved / fast.moved:.1f} times more")
assert fast.moved == predicted_moved and fast.most <= M

# %% [markdown]
# The paper's bound: the tiled forward moves Theta(T^2 d^2 / M) numbers, the
# standard one Theta(T d + T^2). With more fast memory the blocks grow and K, V
# are read fewer times; the plot shows memory on the machine over T, plain and
# tiled, on log-log axes (a slope of 2 against a slope of 1).

# %%
def draw_memory(plt, rows, path):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    Ts = [r["T"] for r in rows]
    for key, style, label in (("plain", "o-C0", "graph, plain"), ("flash", "o-C1", "graph, tiled"),
                              ("plain_peak", "s--C0", "step peak, plain"), ("flash_peak", "s--C1", "step peak, tiled")):
        ax.loglog(Ts, [r[key] / 2**20 for r in rows], style, label=label, base=2)
    ax.set_xlabel("sequence length T (one head, d = 32, float32, causal)")
    ax.set_ylabel("MiB")
    ax.grid(alpha=0.3, which="both")
    ax.legend()
    ax.set_title("Attention's memory: plain grows as T^2, tiled as T")
    return save_figure(fig, path)


pictures = []
plt = pyplot()
if plt is not None:
    pictures.append(draw_memory(plt, memory, args.out / "flash_memory.png"))
    print(f"Saved {pictures[-1]}")

# %% [markdown]
# ## 6. The op, and a GPT that uses it
#
# `F.flash_attention(q, k, v, is_causal=False, attn_mask=None, block_size=64)`
# is `F.scaled_dot_product_attention` (without dropout) computed as above: a
# fused op of the table, `flash_attention`, whose forward is the tiled loop on
# NumPy arrays and whose composite is `tiled_attention`'s code. Its VJP is
# section 3's backward, with the bias's gradient, in Tensor ops; the logsumexp
# it reads is an op of its own, so that even the backward's own gradient
# (second order) is right. Here the op against section 2's code, and
# `gradcheck` / `gradgradcheck` on it; then a GPT with `GPTConfig(flash=True)`:
# the same loss as the plain model, and a graph that grows linearly with the
# context where the plain one's grows faster.

# %%
out_op = F.flash_attention(q, k, v, block_size=16)
op_error = float(np.abs(out_op.data - out_tiled.data).max())
op_grads = mg.grad(out_op, [q, k, v], dout)
op_grad_error = max(float(np.abs(a.data - b.data).max()) for a, b in zip(op_grads, tiled_grads))
print(f"F.flash_attention against tiled_attention and tiled_backward: {op_error:.1e} (output), "
      f"{op_grad_error:.1e} (gradients)")
small = [randn(1, 2, 5, 3), randn(1, 2, 5, 3), randn(1, 2, 5, 2)]
checks = (mg.gradcheck(lambda a, b_, c: F.flash_attention(a, b_, c, is_causal=True, block_size=2), small),
          mg.gradgradcheck(lambda a, b_, c: F.flash_attention(a, b_, c, is_causal=True, block_size=2), small))
print(f"gradcheck and gradgradcheck of F.flash_attention (causal, blocks of 2) against finite differences: {checks}")
assert op_error < 1e-12 and op_grad_error < 1e-12 and all(checks)


def gpt_graph(flash_on: bool, T_len: int):
    config = GPTConfig(vocab_size=65, block_size=1024, n_layer=2, n_head=4, d_model=32, flash=flash_on)
    model = GPT(config, seed=0)
    x = np.random.default_rng(0).integers(0, 65, (1, T_len))
    _, loss = model(x, np.roll(x, -1, axis=1))
    return loss.item(), mg.autograd.graph_bytes(loss).activations


GPT_LENGTHS = [128, 256, 512, 1024]
gpt_rows = [(T_len, gpt_graph(False, T_len), gpt_graph(True, T_len)) for T_len in GPT_LENGTHS]
print("    T   loss, plain   loss, flash   graph, plain (KiB)   graph, flash (KiB)")
for T_len, (loss_p, held_p), (loss_f, held_f) in gpt_rows:
    print(f"{T_len:5d} {loss_p:13.6f} {loss_f:13.6f} {held_p / 1024:20.1f} {held_f / 1024:20.1f}")
flash_held = [f[1] for _, _, f in gpt_rows]
linear = all(c - b_ == 2 * (b_ - a) for a, b_, c in zip(flash_held, flash_held[1:], flash_held[2:]))
print(f"GPT(flash=True)'s graph grows by equal steps per token (linear in T): {linear}")
assert linear and all(abs(p[0] - f[0]) < 1e-5 for _, p, f in gpt_rows)

# %% [markdown]
# What this shows: attention's output needs only one tile of scores at a time
# and one number per query to come back to them; the backward recomputes each
# tile from that number. The memory that grew with T^2 now grows with T, the
# causal half is skipped rather than masked, and the traffic to slow memory
# falls with the size of the fast one. The price is recomputing S in backward
# (one more Q K^T per tile), which on a GPU costs less than the traffic it
# saves; this lesson measures memory and traffic, not time. Exercise 13 (demos/exercises/ex13_flash_attention.py,
# graded by `python -m demos.exercises check 13`) asks you to write the merge of
# two online-softmax states and the backward of one tile.
