"""Multi-head attention, in the forms transformers use, and the KV cache for decoding.

``MultiHeadAttention`` projects the input to queries, keys and values, splits
them into heads, runs ``F.scaled_dot_product_attention`` on every head at once
and projects the concatenated heads back:

    q = x W_q,  k = m W_k,  v = m W_v      (m = x for self-attention, the encoder output for cross)
    head_h = softmax(q_h k_h^T / sqrt(head_dim) + mask) v_h
    out = concat(head_1 .. head_H) W_o

Variants, all in the one class:

* causal (decoder) attention, padding masks and any extra ``attn_mask``;
* grouped-query attention: ``n_kv_heads < n_heads`` key/value heads, each
  shared by ``n_heads // n_kv_heads`` consecutive query heads (MHA when equal,
  multi-query attention when 1); fewer K/V heads mean a smaller KV cache;
* rotary position embedding on q and k (self-attention only);
* a ``KVCache`` for incremental decoding.

Decoding with a KV cache
------------------------
Generating token t+1 with a causal model only needs the new token's query; the
keys and values of tokens 1..t are the same as in the previous step. A
``KVCache`` keeps them, so each step projects only the new positions::

    cache = KVCache()                            # one per attention layer
    y = attn(prompt, is_causal=True, cache=cache)      # prefill: (B, T0, d) -> cache holds T0 positions
    y = attn(next_token, is_causal=True, cache=cache)  # (B, 1, d): attends to T0 + 1 positions

The cache stores keys and values after RoPE, with ``n_kv_heads`` heads:
``cache.k``, ``cache.v`` are (B, n_kv_heads, T, head_dim). Rotary positions
and the causal mask continue from ``cache.length``. For cross-attention the
cache holds the projected encoder output: it is computed on the first call and
reused afterwards (pass the same ``memory`` every step).
"""

from __future__ import annotations

import numpy as np

from .. import cat
from ..tensor import Tensor
from . import functional as F
from .checks import check_features, check_heads, check_input, check_mask_broadcasts, check_padding_mask, layer_repr
from .layers import Linear
from .module import Module
from .positional import RotaryEmbedding


class KVCache:
    """The keys and values one attention layer has computed so far: k, v (B, n_kv_heads, T, head_dim)."""

    def __init__(self):
        self.k: Tensor | None = None
        self.v: Tensor | None = None

    @property
    def length(self) -> int:
        """How many positions the cache holds (the position of the next token)."""
        return 0 if self.k is None else self.k.shape[-2]

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Append the keys and values of new positions (B, H, T_new, head_dim); return all of them."""
        if self.k is None:
            self.k, self.v = k, v
        else:
            old_k, old_v = self.k.shape, self.v.shape
            if k.shape[:-2] != old_k[:-2] or k.shape[-1] != old_k[-1] or v.shape[:-2] != old_v[:-2]:
                raise ValueError(f"KVCache: new keys {k.shape} / values {v.shape} do not match the cached "
                                 f"{self.k.shape} / {self.v.shape} (batch, heads and head_dim must agree)")
            self.k = cat([self.k, k], axis=-2)  # (B, H, T + T_new, head_dim)
            self.v = cat([self.v, v], axis=-2)
        return self.k, self.v

    def crop(self, length: int) -> None:
        """Keep only the first ``length`` positions (to rewind generation)."""
        if self.k is not None:
            self.k, self.v = self.k[..., :length, :], self.v[..., :length, :]

    def reset(self) -> None:
        """Empty the cache (start a new sequence)."""
        self.k = self.v = None

    def __repr__(self) -> str:
        shape = None if self.k is None else self.k.shape
        return f"KVCache(length={self.length}, k shape={shape})"


class MultiHeadAttention(Module):
    """Multi-head attention: self or cross, causal/padding masks, GQA, RoPE, KV cache, per-head weights.

    Parameters: q_proj (d_model -> d_model), k_proj and v_proj (d_model ->
    n_kv_heads * head_dim), out_proj (d_model -> d_model). ``rope`` is None, True
    (a ``RotaryEmbedding(head_dim)``) or a ``RotaryEmbedding`` to share.
    ``dropout`` applies to the attention weights while training.
    """

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int | None = None, bias: bool = True,
                 dropout: float = 0.0, rope: RotaryEmbedding | bool | None = None,
                 rng: np.random.Generator | None = None):
        super().__init__()
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        check_heads("MultiHeadAttention", d_model, n_heads, n_kv_heads)
        self.d_model, self.n_heads, self.n_kv_heads = d_model, n_heads, n_kv_heads
        self.head_dim = d_model // n_heads
        self.dropout, self.rng = dropout, rng
        kv_dim = n_kv_heads * self.head_dim
        self.q_proj = Linear(d_model, d_model, bias, rng)
        self.k_proj = Linear(d_model, kv_dim, bias, rng)
        self.v_proj = Linear(d_model, kv_dim, bias, rng)
        self.out_proj = Linear(d_model, d_model, bias, rng)
        if rope is True:
            rope = RotaryEmbedding(self.head_dim)
        if isinstance(rope, RotaryEmbedding) and rope.head_dim != self.head_dim:
            raise ValueError(f"MultiHeadAttention: the RotaryEmbedding has head_dim={rope.head_dim}, but "
                             f"d_model={d_model} / n_heads={n_heads} gives head_dim={self.head_dim}")
        self.rope = rope or None

    def forward(self, x: Tensor, memory: Tensor | None = None, *, is_causal: bool = False, attn_mask=None,
                key_padding_mask=None, cache: KVCache | None = None, need_weights: bool = False):
        """Attend from x (B, Tq, d_model) to itself, or to ``memory`` (B, Tk, d_model) for cross-attention.

        * ``is_causal``: position i sees only positions <= i (self-attention;
          with a cache, positions count on from ``cache.length``).
        * ``key_padding_mask``: bool (B, Tk), True at padding keys to ignore
          (PyTorch's convention). Tk includes the cached positions.
        * ``attn_mask``: bool (True = may attend) or float (added to the
          scores), broadcastable to (B, n_heads, Tq, Tk).
        * ``cache``: a ``KVCache`` to read and extend (see the module docstring).
        * ``need_weights``: also return the attention weights (B, n_heads, Tq, Tk).

        Returns the output (B, Tq, d_model), or ``(output, weights)``.
        """
        self._check_inputs(x, memory)
        B, Tq, _ = x.shape
        q = self._split_heads(self.q_proj(x), self.n_heads)  # (B, n_heads, Tq, head_dim)
        if memory is None:
            start = cache.length if cache is not None else 0
            k = self._split_heads(self.k_proj(x), self.n_kv_heads)  # (B, n_kv_heads, Tq, head_dim)
            v = self._split_heads(self.v_proj(x), self.n_kv_heads)
            if self.rope is not None:
                q, k = self.rope(q, start), self.rope(k, start)
            if cache is not None:
                k, v = cache.update(k, v)  # (B, n_kv_heads, start + Tq, head_dim)
        else:
            if is_causal:
                raise ValueError(f"{layer_repr(self)}: is_causal applies to self-attention, not to cross-attention "
                                 f"over a memory of shape {memory.shape}")
            if cache is not None and cache.length:
                k, v = cache.k, cache.v  # the memory was projected on the first decoding step
            else:
                k = self._split_heads(self.k_proj(memory), self.n_kv_heads)  # (B, n_kv_heads, Tk, head_dim)
                v = self._split_heads(self.v_proj(memory), self.n_kv_heads)
                if cache is not None:
                    cache.update(k, v)
        mask = self._combine_masks(attn_mask, key_padding_mask, B, Tq, k.shape[-2], x.dtype)
        result = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=self.dropout if self.training else 0.0, is_causal=is_causal,
            enable_gqa=True, rng=self.rng, return_weights=need_weights)
        out, weights = result if need_weights else (result, None)  # out: (B, n_heads, Tq, head_dim)
        out = self.out_proj(out.transpose(1, 2).reshape(B, Tq, self.d_model))  # heads side by side
        return (out, weights) if need_weights else out

    def _split_heads(self, t: Tensor, n: int) -> Tensor:
        """(B, T, n * head_dim) -> (B, n, T, head_dim)."""
        B, T, _ = t.shape
        return t.reshape(B, T, n, self.head_dim).transpose(1, 2)

    def _check_inputs(self, x: Tensor, memory: Tensor | None) -> None:
        check_input(self, x, "x", dtype=False)
        if memory is not None:
            check_input(self, memory, "memory", dtype=False)
        if x.ndim != 3:
            raise ValueError(f"{layer_repr(self)}: x must be (B, T, {self.d_model}), got shape {x.shape}")
        check_features(self, x, self.d_model, "x")
        if memory is not None:
            if memory.ndim != 3 or memory.shape[0] != x.shape[0]:
                raise ValueError(f"{layer_repr(self)}: memory must be (B, Tk, {self.d_model}) with the batch size "
                                 f"of x {x.shape}, got shape {memory.shape}")
            check_features(self, memory, self.d_model, "memory")

    def _combine_masks(self, attn_mask, key_padding_mask, B: int, Tq: int, Tk: int, dtype):
        """One mask for F.scaled_dot_product_attention: bool (True = may attend) or float (added)."""
        scores_shape = (B, self.n_heads, Tq, Tk)
        if attn_mask is not None:
            check_mask_broadcasts(layer_repr(self), "attn_mask", attn_mask, scores_shape)
            if isinstance(attn_mask, Tensor) and attn_mask.dtype.kind == "f":
                check_input(self, attn_mask, "attn_mask")  # the dtype rule: a float64 mask is not converted either
        if key_padding_mask is None:
            return attn_mask
        padding = check_padding_mask(layer_repr(self), key_padding_mask, (B, Tk))
        keep = ~padding[:, None, None, :]  # (B, 1, 1, Tk)
        if attn_mask is None:
            return keep
        if isinstance(attn_mask, Tensor) and attn_mask.dtype != np.bool_:
            return attn_mask + np.where(keep, 0.0, -np.inf).astype(attn_mask.dtype)
        given = attn_mask.data if isinstance(attn_mask, Tensor) else np.asarray(attn_mask)
        if given.dtype == np.bool_:
            return given & keep
        return given.astype(dtype) + np.where(keep, 0.0, -np.inf).astype(dtype)

    def extra_repr(self) -> str:
        parts = [f"d_model={self.d_model}", f"n_heads={self.n_heads}"]
        if self.n_kv_heads != self.n_heads:
            parts.append(f"n_kv_heads={self.n_kv_heads}")
        if self.dropout:
            parts.append(f"dropout={self.dropout}")
        return ", ".join(parts)
