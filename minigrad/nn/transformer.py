"""The transformer block: attention, optional cross-attention and a feed-forward net, each with a residual.

Two ways to place the normalisation around each sublayer:

* pre-norm (``norm_first=True``, the default; GPT-2, LLaMA):
  ``x = x + Sublayer(Norm(x))``. The residual path is a clean sum from input to
  output, which keeps deep stacks trainable without warm-up tricks (a final
  norm after the last block is then the model's job);
* post-norm (``norm_first=False``, "Attention Is All You Need"):
  ``x = Norm(x + Sublayer(x))``.

The same class is an encoder block (``causal=False``), a decoder-only block
(``causal=True``) and an encoder-decoder's decoder block (``causal=True,
cross_attention=True``: self-attention, then attention over the encoder's
output ``memory``, then the MLP). Dropout is applied to each sublayer's output
before it is added to the residual.
"""

from __future__ import annotations

import numpy as np

from ..tensor import Tensor
from .attention import KVCache, MultiHeadAttention
from .checks import layer_repr
from .feedforward import MLP, SwiGLU
from .layers import Dropout, LayerNorm, RMSNorm
from .module import Module
from .positional import RotaryEmbedding


class TransformerBlock(Module):
    """One transformer layer: (causal) self-attention, optional cross-attention, feed-forward, with residuals.

    ``norm`` is 'layernorm' or 'rmsnorm'; ``mlp`` is 'gelu', 'gelu_tanh', 'relu'
    (an ``MLP`` of width ``d_ff``, default 4 * d_model) or 'swiglu' (default
    width 8/3 * d_model). ``bias`` applies to every Linear and LayerNorm.
    ``n_kv_heads`` and ``rope`` are passed to the self-attention.
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int | None = None, *, norm_first: bool = True,
                 causal: bool = False, cross_attention: bool = False, n_kv_heads: int | None = None,
                 rope: RotaryEmbedding | bool | None = None, norm: str = "layernorm", mlp: str = "gelu",
                 dropout: float = 0.0, bias: bool = True, eps: float = 1e-5, rng: np.random.Generator | None = None):
        super().__init__()
        if norm not in ("layernorm", "rmsnorm"):
            raise ValueError(f"TransformerBlock: norm must be 'layernorm' or 'rmsnorm', not {norm!r}")
        if mlp not in ("gelu", "gelu_tanh", "relu", "swiglu"):
            raise ValueError(f"TransformerBlock: mlp must be 'gelu', 'gelu_tanh', 'relu' or 'swiglu', not {mlp!r}")
        self.d_model, self.n_heads = d_model, n_heads
        self.norm_first, self.causal, self.has_cross_attention = norm_first, causal, cross_attention

        def make_norm():
            return LayerNorm(d_model, eps=eps, bias=bias) if norm == "layernorm" else RMSNorm(d_model, eps=eps)

        self.attn_norm = make_norm()
        self.attn = MultiHeadAttention(d_model, n_heads, n_kv_heads, bias=bias, dropout=dropout, rope=rope, rng=rng)
        if cross_attention:
            self.cross_norm = make_norm()
            self.cross_attn = MultiHeadAttention(d_model, n_heads, n_kv_heads, bias=bias, dropout=dropout, rng=rng)
        self.mlp_norm = make_norm()
        if mlp == "swiglu":
            self.mlp = SwiGLU(d_model, d_ff, bias=bias, rng=rng)
        else:
            self.mlp = MLP(d_model, d_ff, activation=mlp, bias=bias, rng=rng)
        self.dropout = Dropout(dropout, rng=rng)

    def forward(self, x: Tensor, memory: Tensor | None = None, *, attn_mask=None, key_padding_mask=None,
                memory_key_padding_mask=None, cache: KVCache | None = None, cross_cache: KVCache | None = None,
                need_weights: bool = False):
        """x (B, T, d_model) -> (B, T, d_model); ``memory`` (B, S, d_model) is the encoder output to cross-attend.

        ``attn_mask`` / ``key_padding_mask`` go to the self-attention,
        ``memory_key_padding_mask`` (B, S) to the cross-attention (True = padding).
        ``cache`` / ``cross_cache`` are the ``KVCache`` of each attention for
        decoding. With ``need_weights`` returns ``(x, weights)``, weights a dict
        {'attn': (B, H, T, T_keys), 'cross_attn': (B, H, T, S)}.
        """
        if x.ndim != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"{layer_repr(self)}: x must be (B, T, d_model={self.d_model}), got shape {x.shape}")
        if self.has_cross_attention and memory is None:
            raise ValueError("TransformerBlock: this block has cross-attention, so it needs memory (B, S, d_model)")
        if not self.has_cross_attention and memory is not None:
            raise ValueError("TransformerBlock: memory was given, but the block was built with cross_attention=False")
        weights = {}

        def self_attention(h):
            out = self.attn(h, is_causal=self.causal, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                            cache=cache, need_weights=need_weights)
            if need_weights:
                out, weights["attn"] = out
            return out

        def cross_attention(h):
            out = self.cross_attn(h, memory, key_padding_mask=memory_key_padding_mask, cache=cross_cache,
                                  need_weights=need_weights)
            if need_weights:
                out, weights["cross_attn"] = out
            return out

        x = self._residual(x, self_attention, self.attn_norm)
        if self.has_cross_attention:
            x = self._residual(x, cross_attention, self.cross_norm)
        x = self._residual(x, self.mlp, self.mlp_norm)
        return (x, weights) if need_weights else x

    def _residual(self, x: Tensor, sublayer, norm: Module) -> Tensor:
        if self.norm_first:
            return x + self.dropout(sublayer(norm(x)))  # pre-norm: x + Sublayer(Norm(x))
        return norm(x + self.dropout(sublayer(x)))  # post-norm: Norm(x + Sublayer(x))

    def extra_repr(self) -> str:
        kind = "decoder" if self.causal else "encoder"
        if self.has_cross_attention:
            kind += " with cross-attention"
        placement = "pre-norm" if self.norm_first else "post-norm"
        return f"d_model={self.d_model}, n_heads={self.n_heads}, {kind}, {placement}"
