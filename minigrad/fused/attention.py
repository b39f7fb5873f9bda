"""Attention's fused ops: its weights (softmax of scaled, masked scores) and FlashAttention in tiles."""

from __future__ import annotations

import numpy as np

from .. import kernels
from ..ops import concatenate, maximum, op, sample
from ..tensor import Tensor


@op()
class softmax_grad:
    """softmax's backward as one primitive: ``scale * out * (g - sum(g * out))`` over ``axis``, out = softmax(x).

    ``scale`` (default 1) multiplies the result in the same pass: attention's
    VJP scales it once there, rather than the two products it is used in.
    """
    samples = [sample((3, 5), (3, 5)), sample((2, 3, 4), (2, 3, 4), axis=1), sample((3, 5), (3, 5), scale=0.3)]

    def forward(out, g, *, axis=-1, scale=1.0):
        return kernels.softmax_grad(out, g, axis, scale)  # = scale * out * (g - (g * out).sum(axis, keepdims=True))

    def vjp(u, grad, out, g, *, axis=-1, scale=1.0):
        # grad is bilinear in (out, g): with s = sum(g * out), grad = scale * (out * g - out * s), so
        # d/dg (u . grad) = softmax_grad(out, u) * scale and
        # d/dout (u . grad) = scale * (u * (g - s) - g * sum(u * out)).
        s = (g * out).sum(axis=axis, keepdims=True)
        grad_out = u * (g - s) - g * (u * out).sum(axis=axis, keepdims=True)
        return grad_out * scale if scale != 1.0 else grad_out, softmax_grad(out, u, axis=axis, scale=scale)

    def composite(out, g, *, axis=-1, scale=1.0):
        grad = out * (g - (g * out).sum(axis=axis, keepdims=True))
        return grad * scale if scale != 1.0 else grad


@op()
class attention_weights:
    """softmax(q @ k^T * scale + bias) over the keys: attention's weights (..., Tq, Tk).

    q (..., Tq, E), k (..., Tk, E), leading axes broadcast as in matmul; the
    optional ``bias`` broadcasts to (..., Tq, Tk), and -inf in it forbids a key
    (a row with every key forbidden gets zero weights, not NaN). Fused because
    the composite makes three (..., Tq, Tk) arrays, the largest activations of a
    transformer, where this makes one.
    """
    samples = [sample((2, 3, 4), (2, 5, 4), scale=0.5),
               sample((2, 1, 3, 4), (3, 5, 4), (3, 5), scale=0.7),
               sample((2, 3, 4), (2, 3, 4), np.where(np.tril(np.ones((3, 3), bool)), 0.0, -np.inf), scale=1.0),
               sample((3, 4), (5, 4), scale=0.5)]

    def forward(q, k, *bias, scale):
        return kernels.attention_weights(q, k, *bias, scale=scale)  # = softmax(q @ k^T * scale + bias, axis=-1)

    def vjp(g, out, q, k, *bias, scale):
        grad_scaled = softmax_grad(out, g, scale=scale)  # (..., Tq, Tk): d/d(q @ k^T), the scale taken once
        grad_q = grad_scaled @ k  # (..., Tq, E)
        grad_k = grad_scaled.swapaxes(-1, -2) @ q  # (..., Tk, E)
        if not (bias and bias[0].requires_grad):  # (a mask is a constant: no gradient to make)
            return (grad_q, grad_k) + ((None,) if bias else ())
        return grad_q, grad_k, softmax_grad(out, g)  # the bias is added unscaled

    def composite(q, k, *bias, scale):
        scores = q @ k.swapaxes(-1, -2) * scale  # (..., Tq, Tk)
        return (scores + bias[0] if bias else scores).softmax(axis=-1)



# --------------------------------------------------------------------------------------
# FlashAttention: attention in tiles, never holding the (Tq, Tk) scores
# --------------------------------------------------------------------------------------


def _blocks(n: int, size: int) -> list[tuple[int, int]]:
    """[(start, stop)] cutting range(n) into blocks of ``size`` (the last one shorter when size does not divide n)."""
    return [(start, min(start + size, n)) for start in range(0, n, size)]


def _causal_tile(rows: tuple[int, int], cols: tuple[int, int], offset: int):
    """Which keys of the tile the queries see, query i seeing keys j <= i + offset: True (all of them), False
    (none: the tile lies above the diagonal and is skipped), or a bool (rows, cols) array for a tile it crosses."""
    (i0, i1), (j0, j1) = rows, cols
    if j1 - 1 <= i0 + offset:
        return True
    if j0 > i1 - 1 + offset:
        return False
    return np.arange(j0, j1)[None, :] <= np.arange(i0, i1)[:, None] + offset


def _bias_tile(bias, rows: tuple[int, int], cols: tuple[int, int]):
    """bias[..., i0:i1, j0:j1], keeping an axis of size 1 (broadcast over queries or keys) whole."""
    r = slice(*rows) if bias.shape[-2] != 1 else slice(None)
    c = slice(*cols) if bias.shape[-1] != 1 else slice(None)
    return bias[..., r, c]


def _flash_tiles(Tq: int, Tk: int, block_size: int, causal: bool):
    """Every (query block, key block, visible) the tiled loops visit; tiles above the causal diagonal are left out.

    Causal, the queries are the last Tq of Tk positions (``scaled_dot_product_attention``'s convention):
    query i sees keys up to i + Tk - Tq.
    """
    for rows in _blocks(Tq, block_size):
        for cols in _blocks(Tk, block_size):
            visible = _causal_tile(rows, cols, Tk - Tq) if causal else True
            if visible is not False:
                yield rows, cols, visible


def _flash_lead(q, k, v, bias) -> tuple:
    """The broadcast batch/head axes of the output (those of q, k, v and the bias)."""
    return np.broadcast_shapes(q.shape[:-2], k.shape[:-2], *(x.shape[:-2] for x in (v, *bias) if x is not None))


def _flash_forward(q, k, v, bias, scale, causal, block_size):
    """The tiled forward on ndarrays: (out (..., Tq, Ev) or None when v is None, logsumexp (..., Tq)).

    Per query block, the online softmax over key blocks: a running max m, a running sum l of exp(s - m) and
    a running acc = sum of exp(s - m) v; when a block raises the max, l and acc are rescaled by exp(m - m_new).
    """
    Tq, Tk = q.shape[-2], k.shape[-2]
    lead = _flash_lead(q, k, v, bias)
    out = None if v is None else np.zeros(lead + (Tq, v.shape[-1]), dtype=q.dtype)
    lse = np.full(lead + (Tq,), -np.inf, dtype=q.dtype)
    stats = {}  # query block -> (m, l, acc)
    for rows, cols, visible in _flash_tiles(Tq, Tk, block_size, causal):
        s = q[..., slice(*rows), :] @ k[..., slice(*cols), :].swapaxes(-1, -2) * q.dtype.type(scale)  # (.., n, m)
        if bias:
            s = s + _bias_tile(bias[0], rows, cols)
        if visible is not True:
            s = np.where(visible, s, -np.inf)
        m, l, acc = stats.get(rows, (None, None, None))
        m_new = s.max(axis=-1, keepdims=True) if m is None else np.maximum(m, s.max(axis=-1, keepdims=True))
        m_safe = np.where(m_new == -np.inf, 0, m_new)  # a row that has seen only forbidden keys so far
        p = np.exp(s - m_safe)
        if m is None:
            l, acc = p.sum(axis=-1, keepdims=True), None if v is None else p @ v[..., slice(*cols), :]
        else:
            alpha = np.exp(m - m_safe)  # the rescaling, 1 unless this block raised the max
            l = alpha * l + p.sum(axis=-1, keepdims=True)
            acc = None if v is None else alpha * acc + p @ v[..., slice(*cols), :]
        stats[rows] = m_new, l, acc
    for rows, (m, l, acc) in stats.items():
        seen = l > 0  # False for a query that may attend to nothing: output 0, logsumexp -inf
        with np.errstate(divide="ignore"):
            lse[..., slice(*rows)] = np.where(seen, np.where(m == -np.inf, 0, m) + np.log(l), -np.inf)[..., 0]
        if v is not None:
            out[..., slice(*rows), :] = np.where(seen, acc / np.where(seen, l, 1), 0)
    return out, lse


def _flash_backward(q, k, v, bias, lse, g, scale, causal, block_size, out=None):
    """Gradients by recomputation, tile by tile, in Tensor ops (so that they can be differentiated again).

    With the logsumexp of each row, a tile's weights are P = exp(S - lse) without any other tile. For
    attention (v given; g = dO, out = O): dV += P^T dO, dP = dO V^T, dS = P (dP - rowsum(dO O)),
    dQ += dS K scale, dK += dS^T Q scale. For the logsumexp alone (v None; g = d lse): dS = P g.
    Returns (dq, dk, dv or None, dbias or None); dbias only when the bias requires grad.
    """
    Tq, Tk = q.shape[-2], k.shape[-2]
    lead = _flash_lead(q, k, v, bias)
    lse = lse.masked_fill(np.isneginf(lse.data), 0.0).unsqueeze(-1)  # (..., Tq, 1); rows that see no key: P = 0
    g = g if v is not None else g.unsqueeze(-1)  # dO (..., Tq, Ev), or d lse as (..., Tq, 1)
    delta = (g * out).sum(axis=-1, keepdims=True) if v is not None else None  # rowsum(dO * O), (..., Tq, 1)
    want_bias = bool(bias) and bias[0].requires_grad
    dq, dk, dv, dbias = {}, {}, {}, {}
    for rows, cols, visible in _flash_tiles(Tq, Tk, block_size, causal):
        r, c = slice(*rows), slice(*cols)
        qi, kj = q[..., r, :], k[..., c, :]
        s = qi @ kj.swapaxes(-1, -2) * scale  # (..., n, m), recomputed
        if bias:
            s = s + _bias_tile(bias[0], rows, cols)
        if visible is not True:
            s = s.masked_fill(~visible, -np.inf)
        p = (s - lse[..., r, :]).exp()  # the tile's attention weights
        if v is None:
            ds = p * g[..., r, :]
        else:
            gi, vj = g[..., r, :], v[..., c, :]
            dv[cols] = _accumulate(dv.get(cols), p.swapaxes(-1, -2) @ gi)
            ds = p * (gi @ vj.swapaxes(-1, -2) - delta[..., r, :])
        dq[rows] = _accumulate(dq.get(rows), ds @ kj * scale)
        dk[cols] = _accumulate(dk.get(cols), ds.swapaxes(-1, -2) @ qi * scale)
        if want_bias:
            dbias[rows, cols] = ds
    zeros = _flash_zeros(q.dtype, lead)
    grad_q = _join(dq, _blocks(Tq, block_size), lambda n: zeros(n, q.shape[-1]))
    grad_k = _join(dk, _blocks(Tk, block_size), lambda n: zeros(n, k.shape[-1]))
    grad_v = None if v is None else _join(dv, _blocks(Tk, block_size), lambda n: zeros(n, v.shape[-1]))
    grad_bias = None
    if want_bias:  # (..., Tq, Tk): the bias is as large itself, or the engine sums this down to its shape
        key_blocks = _blocks(Tk, block_size)
        rows_of = {rows: _join({c: dbias[rows, c] for c in key_blocks if (rows, c) in dbias}, key_blocks,
                               lambda m, n=rows[1] - rows[0]: zeros(n, m), axis=-1) for rows in _blocks(Tq, block_size)}
        grad_bias = _join(rows_of, _blocks(Tq, block_size), lambda n: zeros(n, Tk))
    return grad_q, grad_k, grad_v, grad_bias


def _accumulate(total, term):
    return term if total is None else total + term


def _flash_zeros(dtype, lead):
    return lambda n, m: Tensor._wrap(np.zeros(lead + (n, m), dtype=dtype))


def _join(parts: dict, blocks, zeros, axis=-2):
    """The blocks' tensors joined along ``axis`` in order; a block no tile reached is zeros (no blocks: size 0)."""
    if not blocks:
        return zeros(0)
    return concatenate(*(parts[b] if b in parts else zeros(b[1] - b[0]) for b in blocks), axis=axis)


def _flash_samples():
    causal_cut = np.where(np.tril(np.ones((5, 7), bool), k=2), 0.0, -np.inf)
    return [sample((2, 5, 3), (2, 7, 3), (2, 7, 4), scale=0.6, block_size=2),
            sample((2, 5, 3), (2, 7, 3), (2, 7, 4), scale=0.6, causal=True, block_size=3),
            sample((2, 1, 5, 3), (3, 5, 3), (3, 5, 2), (1, 5), scale=0.5, block_size=2),
            sample((5, 3), (7, 3), (7, 2), causal_cut, scale=0.7, block_size=4),
            sample((6, 2), (4, 2), (4, 3), scale=0.7, causal=True, block_size=2)]


@op()
class flash_attention:
    """softmax(q @ k^T * scale + bias) @ v, computed in (block_size x block_size) tiles: FlashAttention.

    q (..., Tq, E), k (..., Tk, E), v (..., Tk, Ev), the optional ``bias`` broadcast to (..., Tq, Tk) (-inf
    forbids a key); ``causal``: query i sees keys up to i + Tk - Tq. The forward runs the online softmax
    over key blocks and never holds more than one tile of scores; it keeps only the logsumexp of each row
    (..., Tq) for backward, which recomputes each tile's weights from it (``_flash_backward``). Memory:
    linear in T. The composite is the same tiled algorithm in Tensor ops (demos/flash_attention_lesson.py
    derives it); a query that may attend to nothing gets zeros, as ``attention_weights`` gives.
    """
    samples = _flash_samples()

    def forward(q, k, v, *bias, scale, causal=False, block_size=64):
        return _flash_forward(q, k, v, bias, scale, causal, block_size)  # (out, saved: the rows' logsumexp)

    def vjp(g, out, q, k, v, *bias, scale, causal=False, block_size=64):
        params = dict(scale=scale, causal=causal, block_size=block_size)
        lse = flash_attention_lse(q, k, *bias, **params, saved=out._saved)  # (..., Tq), a function of q, k, bias
        grad_q, grad_k, grad_v, grad_bias = _flash_backward(q, k, v, bias, lse, g, scale, causal, block_size, out)
        return (grad_q, grad_k, grad_v) + ((grad_bias,) if bias else ())

    def composite(q, k, v, *bias, scale, causal=False, block_size=64):
        Tq, Tk = q.shape[-2], k.shape[-2]
        lead = _flash_lead(q, k, v, bias)
        stats = {}  # query block -> (running max m, running sum l, running acc), each (..., n, 1) or (..., n, Ev)
        for rows, cols, visible in _flash_tiles(Tq, Tk, block_size, causal):
            s = q[..., slice(*rows), :] @ k[..., slice(*cols), :].swapaxes(-1, -2) * scale  # (..., n, m)
            if bias:
                s = s + _bias_tile(bias[0], rows, cols)
            if visible is not True:
                s = s.masked_fill(~visible, -np.inf)
            m, l, acc = stats.get(rows, (None, None, None))
            m_new = s.amax(-1, keepdim=True) if m is None else maximum(m, s.amax(-1, keepdim=True))
            m_safe = m_new.masked_fill(np.isneginf(m_new.data), 0.0)  # a row that has seen only forbidden keys
            p = (s - m_safe).exp()
            pv = p @ v[..., slice(*cols), :]
            if m is None:
                l, acc = p.sum(axis=-1, keepdims=True), pv
            else:
                alpha = (m - m_safe).exp()  # the rescaling, 1 unless this block raised the max
                l, acc = alpha * l + p.sum(axis=-1, keepdims=True), alpha * acc + pv
            stats[rows] = m_new, l, acc
        outs = {}
        for rows, (_, l, acc) in stats.items():
            empty = l.data == 0  # a query that may attend to nothing: output 0
            outs[rows] = (acc / l.masked_fill(empty, 1.0)).masked_fill(empty, 0.0).broadcast_to(
                lead + (rows[1] - rows[0], v.shape[-1]))
        return _join(outs, _blocks(Tq, block_size), lambda n: _flash_zeros(q.dtype, lead)(n, v.shape[-1]))


@op()
class flash_attention_lse:
    """logsumexp over the keys of q @ k^T * scale + bias, per query (..., Tq), in tiles as ``flash_attention``.

    FlashAttention's forward keeps it; its VJP asks for it through this op (passing the kept array as
    ``saved``), so that a second derivative sees it as the function of q, k and the bias it is.
    """
    samples = [sample((2, 5, 3), (2, 7, 3), scale=0.6, block_size=2),
               sample((2, 5, 3), (2, 7, 3), (5, 7), scale=0.6, causal=True, block_size=3)]

    def forward(q, k, *bias, scale, causal=False, block_size=64, saved=None):
        return _flash_forward(q, k, None, bias, scale, causal, block_size)[1] if saved is None else saved

    def vjp(u, out, q, k, *bias, scale, causal=False, block_size=64, saved=None):
        grad_q, grad_k, _, grad_bias = _flash_backward(q, k, None, bias, out, u, scale, causal, block_size)
        return (grad_q, grad_k) + ((grad_bias,) if bias else ())

    def composite(q, k, *bias, scale, causal=False, block_size=64, saved=None):
        s = q @ k.swapaxes(-1, -2) * scale  # (..., Tq, Tk): the plain form the tiles equal
        if bias:
            s = s + bias[0]
        if causal:
            Tq, Tk = q.shape[-2], k.shape[-2]
            s = s.masked_fill(np.arange(Tk)[None, :] > np.arange(Tq)[:, None] + Tk - Tq, -np.inf)
        return s.logsumexp(axis=-1)
