"""Positional information: attention by itself cannot tell token order, so we add it.

Self-attention treats its input as a set: permute the tokens and the outputs are
permuted the same way. Three standard fixes:

* ``sinusoidal_encoding`` / ``SinusoidalPositionalEncoding`` ("Attention Is All
  You Need"): add fixed sines and cosines of geometrically spaced frequencies;
* ``LearnedPositionalEmbedding`` (GPT-2): add a learned vector per position;
* ``RotaryEmbedding`` (RoPE, LLaMA): rotate each query and key by an angle
  proportional to its position, so q·k depends on positions only through their
  difference.

The two additive encodings take ``x`` (B, T, d_model) and return ``x`` plus the
encoding of positions ``offset .. offset + T - 1``; ``offset`` is the number of
tokens already in a KV cache when decoding.
"""

from __future__ import annotations

import numpy as np

from .. import cat
from ..tensor import Tensor
from . import init
from .checks import check_features, check_rope_head_dim, layer_repr
from .module import Module, Parameter


def sinusoidal_encoding(T: int, d: int, base: float = 10000.0, offset: int = 0, dtype=np.float32) -> Tensor:
    """The (T, d) table PE[pos, 2i] = sin(pos / base**(2i/d)), PE[pos, 2i+1] = cos(pos / base**(2i/d))."""
    positions = np.arange(offset, offset + T, dtype=np.float64)[:, None]  # (T, 1)
    even = np.arange(0, d, 2, dtype=np.float64)  # the even feature indices 2i
    angles = positions / base ** (even / d)  # (T, ceil(d/2))
    table = np.empty((T, d), dtype=np.float64)
    table[:, 0::2] = np.sin(angles)
    table[:, 1::2] = np.cos(angles[:, : d // 2])  # an odd d has one sine more than cosines
    return Tensor(table.astype(dtype))


class SinusoidalPositionalEncoding(Module):
    """x + the fixed sinusoidal encoding of positions offset .. offset+T-1 (no parameters)."""

    def __init__(self, d_model: int, base: float = 10000.0):
        super().__init__()
        self.d_model, self.base = d_model, base

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        check_features(self, x, self.d_model)
        return x + sinusoidal_encoding(x.shape[-2], self.d_model, self.base, offset, x.dtype)  # (B, T, d_model)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, base={self.base:g}"


class LearnedPositionalEmbedding(Module):
    """x + a learned vector per position (weight (max_len, d_model), N(0, 1) init like Embedding)."""

    def __init__(self, max_len: int, d_model: int, rng: np.random.Generator | None = None):
        super().__init__()
        self.max_len, self.d_model = max_len, d_model
        self.weight = init.normal_(Parameter(np.empty((max_len, d_model), np.float32)), rng=rng)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        check_features(self, x, self.d_model)
        T = x.shape[-2]
        if offset < 0 or offset + T > self.max_len:
            raise IndexError(f"{layer_repr(self)}: positions {offset}..{offset + T - 1} (input shape {x.shape}, "
                             f"offset {offset}) do not fit in max_len={self.max_len}")
        return x + self.weight[offset:offset + T]  # (B, T, d_model)

    def extra_repr(self) -> str:
        return f"max_len={self.max_len}, d_model={self.d_model}"


class RotaryEmbedding(Module):
    """RoPE: rotate pairs of features by position-dependent angles (half-split pairs, as in GPT-NeoX/LLaMA).

    Feature j in the first half is paired with feature j + head_dim/2 (the
    "rotate_half" layout of the Hugging Face LLaMA and GPT-NeoX code, not the
    interleaved (2j, 2j+1) pairs of the RoPE paper; the two differ only by a
    fixed permutation of the features). Pair j at position m is rotated by the
    angle m * base**(-2j/head_dim). A rotation preserves lengths, and
    rot(m)q · rot(n)k = q · rot(n - m)k, so the attention score between a
    query and a key depends on their positions only through n - m.
    """

    def __init__(self, head_dim: int, base: float = 10000.0):
        super().__init__()
        check_rope_head_dim("RotaryEmbedding", head_dim)
        self.head_dim, self.base = head_dim, base

    def angles(self, T: int, offset: int = 0) -> np.ndarray:
        """The rotation angle of every (position, feature) in half-split layout: (T, head_dim), float64."""
        inv_freq = self.base ** (-np.arange(0, self.head_dim, 2, dtype=np.float64) / self.head_dim)  # (head_dim/2,)
        theta = np.arange(offset, offset + T, dtype=np.float64)[:, None] * inv_freq  # (T, head_dim/2)
        return np.concatenate([theta, theta], axis=-1)  # (T, head_dim): pair j and j + head_dim/2 share an angle

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """Rotate x (..., T, head_dim) as if its positions were offset .. offset + T - 1."""
        check_features(self, x, self.head_dim)
        theta = self.angles(x.shape[-2], offset)
        cos, sin = np.cos(theta).astype(x.dtype), np.sin(theta).astype(x.dtype)  # (T, head_dim)
        half = self.head_dim // 2
        # (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin), for the pairs (x1, x2) = (x[j], x[j + half]).
        rotated_half = cat([-x[..., half:], x[..., :half]], axis=-1)  # (..., T, head_dim)
        return x * cos + rotated_half * sin

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, base={self.base:g}"
