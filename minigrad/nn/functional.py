"""Stateless functions behind the layers, with ``torch.nn.functional``'s names and signatures.

Everything here is made of op-table ops, so its gradient comes from the table.
linear, gelu, layer_norm, rms_norm, cross_entropy and attention's weights call the
fused primitives of ``minigrad/fused/`` (one forward and one VJP instead of a
dozen small ops on the hot path), and so does ``flash_attention``, attention
in tiles. Each carries its composite of core ops as
runnable code; ``minigrad.composite_mode()`` runs that instead, and the tests
hold the two equal.

Conventions that differ from PyTorch, on purpose:

* normalisation (``layer_norm``, ``rms_norm``) is over the last axis only;
* ``scaled_dot_product_attention(is_causal=True)`` with fewer queries than keys
  treats the queries as the *last* positions (what decoding with a KV cache
  needs); PyTorch aligns them with the first.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .. import fused
from ..ops import OPS
from ..registry import apply
from ..tensor import Tensor
from .checks import check_approximate, check_mask_broadcasts, check_probability, token_ids
from .init import resolve_rng
from .losses import (  # noqa: F401  (F.cross_entropy, F.mse_loss...: PyTorch's home for them)
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cross_entropy,
    l1_loss,
    mse_loss,
    nll_loss,
)


def _array(x) -> np.ndarray:
    return x.data if isinstance(x, Tensor) else np.asarray(x)


# --------------------------------------------------------------------------------------
# Activations
# --------------------------------------------------------------------------------------


def relu(input: Tensor) -> Tensor:
    """max(x, 0)."""
    return input.relu()


def sigmoid(input: Tensor) -> Tensor:
    """1 / (1 + exp(-x))."""
    return input.sigmoid()


def tanh(input: Tensor) -> Tensor:
    """Hyperbolic tangent."""
    return input.tanh()


def silu(input: Tensor) -> Tensor:
    """x * sigmoid(x) (also called swish): the gate of SwiGLU.

    The sigmoid's input is clipped to [-800, 40], where sigmoid is already exactly
    0 and 1 in float32 and float64, so the value is unchanged; but beyond those
    bounds the clip stops the gradient that flows through the sigmoid, which for
    huge |x| is x * g (overflowing to inf) times sigmoid' (0): NaN otherwise.
    """
    return input * input.clip(-800.0, 40.0).sigmoid()


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """x * Phi(x), Phi the standard normal CDF; ``approximate='tanh'`` is GPT-2's tanh formula."""
    return fused.gelu(input, approximate=check_approximate(approximate))


def _softmax_dim(who: str, input: Tensor, dim, axis):
    """The dim to normalise: ``dim=`` or ``axis=`` (both spellings); neither: the last, where PyTorch agrees."""
    if dim is not None and axis is not None:
        raise TypeError(f"{who}: dim= and axis= name the same thing; give one")
    dim = dim if axis is None else axis
    if dim is None:
        if input.ndim > 2:  # PyTorch's implicit dim (deprecated) is 0 for 3-D input and 1 for 4-D: not the last
            raise TypeError(f"{who}: pass the dim for a {input.ndim}-D input, e.g. F.{who}(x, dim=-1) "
                            f"(PyTorch's implicit choice there is not the last dim)")
        dim = -1
    return dim


def softmax(input: Tensor, dim: int | None = None, dtype=None, *, axis: int | None = None) -> Tensor:
    """exp(x) / sum(exp(x)) along ``dim`` (or NumPy's ``axis``); stable, an all -inf row gives zeros."""
    return input.softmax(_softmax_dim("softmax", input, dim, axis), dtype)


def log_softmax(input: Tensor, dim: int | None = None, dtype=None, *, axis: int | None = None) -> Tensor:
    """x - logsumexp(x) along ``dim`` (or NumPy's ``axis``); stable for large inputs."""
    return input.log_softmax(_softmax_dim("log_softmax", input, dim, axis), dtype)


def one_hot(tensor, num_classes: int = -1) -> Tensor:
    """Integer class ids (any shape) as one-hot rows: shape + (num_classes,), int64 (as PyTorch's)."""
    ids = _array(tensor)
    if ids.dtype.kind not in "iu":
        raise TypeError(f"one_hot: the class ids must be integers, got {ids.dtype}; write F.one_hot(x.long())")
    n = int(ids.max()) + 1 if num_classes == -1 and ids.size else max(num_classes, 0)
    if ids.size and (ids.min() < 0 or ids.max() >= n):
        raise ValueError(f"one_hot: class ids must be in [0, {n}), got min {ids.min()}, max {ids.max()}")
    return Tensor._wrap((ids[..., None] == np.arange(n)).astype(np.int64))


# --------------------------------------------------------------------------------------
# Normalisation, dropout, lookup, linear maps
# --------------------------------------------------------------------------------------


def _check_last_axis(who: str, input: Tensor, normalized_shape) -> None:
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if len(shape) != 1 or input.shape[-1:] != shape:
        raise ValueError(f"{who}: normalized_shape {shape} must be the input's last axis (input shape "
                         f"{input.shape}); only normalisation over the last axis is supported")


def layer_norm(input: Tensor, normalized_shape, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:
    """(x - mean) / sqrt(var + eps) over the last axis, then ``* weight + bias``."""
    _check_last_axis("layer_norm", input, normalized_shape)
    if weight is None and bias is None:
        return fused.layer_norm(input, eps=eps)
    n = input.shape[-1]
    weight = weight if weight is not None else np.ones(n, dtype=input.dtype)  # constants: no gradient
    bias = bias if bias is not None else np.zeros(n, dtype=input.dtype)
    return fused.layer_norm(input, weight, bias, eps=eps)


def rms_norm(input: Tensor, normalized_shape, weight: Tensor | None = None, eps: float = 1e-6) -> Tensor:
    """x / sqrt(mean(x**2) + eps) over the last axis, then ``* weight`` (no centring, no bias)."""
    _check_last_axis("rms_norm", input, normalized_shape)
    weight = weight if weight is not None else np.ones(input.shape[-1], dtype=input.dtype)
    return fused.rms_norm(input, weight, eps=eps)


def dropout(input: Tensor, p: float = 0.5, training: bool = True, rng: np.random.Generator | None = None) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by 1/(1-p); identity when not training."""
    check_probability(p)
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * 0.0
    keep = resolve_rng(rng).random(input.shape) >= p
    # Inverted dropout: scaling now keeps the expected value, so eval needs no rescaling.
    return input * (keep / (1.0 - p)).astype(input.dtype)


def embedding(input, weight: Tensor) -> Tensor:
    """Rows of ``weight`` (num_embeddings, dim) picked by integer ids: (...) -> (..., dim)."""
    if not isinstance(weight, Tensor) or weight.ndim != 2:
        got = f"shape {weight.shape} {weight.dtype}" if isinstance(weight, Tensor) else type(weight).__name__
        raise ValueError(f"embedding: weight must be a 2-D Tensor (num_embeddings, dim), got {got}")
    return weight[token_ids(input, weight.shape[0])]


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """x @ weight.T + bias, weight stored (out_features, in_features) as in PyTorch (a fused primitive)."""
    return fused.linear(input, weight) if bias is None else fused.linear(input, weight, bias)


# --------------------------------------------------------------------------------------
# Attention
# --------------------------------------------------------------------------------------


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask=None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: float | None = None, enable_gqa: bool = False, *,
                                 rng: np.random.Generator | None = None, return_weights: bool = False):
    """softmax(q @ k^T * scale + mask) @ v, over query (..., Tq, E), key (..., Tk, E), value (..., Tk, Ev).

    * ``attn_mask``: bool, True where a query may attend to a key, or a float
      mask added to the scores (-inf forbids); it must broadcast to the scores'
      shape (..., Tq, Tk). A query that may attend to nothing gets a zero output
      and zero gradients, never NaN.
    * ``is_causal``: query i sees keys up to Tk - Tq + i (the queries are the
      last Tq positions, as when decoding with a KV cache).
    * ``scale``: defaults to 1/sqrt(E).
    * ``dropout_p``: dropout on the attention weights (pass 0 in eval mode),
      drawing from ``rng``.
    * ``enable_gqa``: query (..., Hq, Tq, E) with key/value (..., Hkv, Tk, E),
      Hq a multiple of Hkv; query heads h share key/value head h // (Hq // Hkv).
    * ``return_weights``: also return the attention weights (..., Tq, Tk),
      before dropout. Returns ``out`` (..., Tq, Ev) or ``(out, weights)``.
    """
    q, k, v = query, key, value
    who = "scaled_dot_product_attention"
    scores_shape = _attention_scores_shape(who, q, k, v, enable_gqa)
    n_queries, n_keys = q.shape[-2], k.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale

    keep, bias = None, None  # keep: bool ndarray (True = may attend); bias: float mask added to the scores
    if attn_mask is not None:
        check_mask_broadcasts(who, "attn_mask", attn_mask, scores_shape)
        if _array(attn_mask).dtype == np.bool_:
            keep = _array(attn_mask)
        else:
            bias = attn_mask if isinstance(attn_mask, Tensor) else np.asarray(attn_mask, dtype=q.dtype)
    if is_causal:
        causal = _causal_mask(n_queries, n_keys)  # (Tq, Tk), made once per shape
        keep = causal if keep is None else keep & causal

    grouped = enable_gqa and min(q.ndim, k.ndim) >= 3 and k.shape[-3] != q.shape[-3]
    if grouped:
        # Split the query heads into (Hkv, group) and give k, v a size-1 group axis: broadcasting in
        # matmul then shares each key/value head with its group without copying it.
        n_heads, n_kv = q.shape[-3], k.shape[-3]
        q = q.reshape(q.shape[:-3] + (n_kv, n_heads // n_kv) + q.shape[-2:])  # (..., Hkv, G, Tq, E)
        k, v = k.unsqueeze(-3), v.unsqueeze(-3)  # (..., Hkv, 1, Tk, E)
        keep = _group_heads(keep, len(scores_shape), n_kv, n_heads)
        bias = _group_heads(bias, len(scores_shape), n_kv, n_heads)

    out, weights = _attention(q, k, v, keep, bias, scale, dropout_p, rng)
    if grouped:
        out = out.reshape(out.shape[:-4] + (n_heads,) + out.shape[-2:])  # (..., Hq, Tq, Ev)
        if weights is not None:
            weights = weights.reshape(weights.shape[:-4] + (n_heads,) + weights.shape[-2:])  # (..., Hq, Tq, Tk)
    return (out, weights) if return_weights else out


@functools.lru_cache(maxsize=32)
def _causal_mask(n_queries: int, n_keys: int) -> np.ndarray:
    """bool (Tq, Tk), read-only: row i may see keys 0 .. i + (Tk - Tq), the queries being the last Tq positions."""
    mask = np.tril(np.ones((n_queries, n_keys), dtype=bool), k=n_keys - n_queries)
    mask.flags.writeable = False
    return mask


def _attention(q, k, v, keep, bias, scale, dropout_p, rng):
    """The attention formula; returns the output and the weights (before dropout).

    weights = softmax(q @ k^T * scale + bias) is one fused primitive,
    ``attention_weights`` (its docstring has the composite); then weights @ v.
    """
    if keep is not None:
        # The boolean mask joins the float one as 0 / -inf: softmax gives -inf exactly 0 weight.
        forbid = np.where(keep, 0.0, -np.inf).astype(q.dtype)  # (..., Tq, Tk) broadcastable
        bias = forbid if bias is None else bias + forbid
    extra = () if bias is None else (bias,)
    weights = fused.attention_weights(q, k, *extra, scale=scale)  # (..., Tq, Tk); all -inf row -> zeros
    attended = dropout(weights, dropout_p, True, rng) if dropout_p > 0 else weights
    return attended @ v, weights  # (..., Tq, Ev)


def _attention_scores_shape(who: str, q: Tensor, k: Tensor, v: Tensor, enable_gqa: bool) -> tuple:
    """The shape of q @ k^T, after checking that q, k and v fit together."""
    shapes = f"query {q.shape}, key {k.shape}, value {v.shape}"
    if min(q.ndim, k.ndim, v.ndim) < 2 or any(t.dtype.kind != "f" for t in (q, k, v)):
        raise ValueError(f"{who}: query, key and value must be float tensors with at least 2 axes; got {shapes}")
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError(f"{who}: query and key need the same last axis, key and value the same number of "
                         f"positions; got {shapes}")
    if enable_gqa and min(q.ndim, k.ndim, v.ndim) >= 3:
        n_heads, n_kv = q.shape[-3], k.shape[-3]
        if v.shape[-3] != n_kv or n_heads % n_kv:
            raise ValueError(f"{who}: with enable_gqa the query heads (axis -3) must be a multiple of the "
                             f"key/value heads, and key and value must have the same heads; got {shapes}")
        lead, heads = (q.shape[:-3], k.shape[:-3], v.shape[:-3]), (n_heads,)
    else:
        lead, heads = (q.shape[:-2], k.shape[:-2], v.shape[:-2]), ()
    try:
        batch = np.broadcast_shapes(*lead)
    except ValueError:
        raise ValueError(f"{who}: the leading (batch, head) axes of query, key and value do not broadcast; "
                         f"got {shapes}") from None
    return batch + heads + (q.shape[-2], k.shape[-2])


def _group_heads(mask, ndim: int, n_kv: int, n_heads: int):
    """Reshape a mask broadcastable to (..., Hq, Tq, Tk) to (..., Hkv, G or 1, Tq, Tk) for grouped heads."""
    if mask is None:
        return None
    shape = (1,) * (ndim - mask.ndim) + tuple(mask.shape)
    if shape[-3] == 1:
        grouped = shape[:-3] + (1, 1) + shape[-2:]
    else:
        grouped = shape[:-3] + (n_kv, n_heads // n_kv) + shape[-2:]
    return mask.reshape(grouped)


def flash_attention(query: Tensor, key: Tensor, value: Tensor, is_causal: bool = False, attn_mask=None,
                    block_size: int = 64, *, scale: float | None = None, enable_gqa: bool = False) -> Tensor:
    """``scaled_dot_product_attention`` (without dropout), computed in tiles: FlashAttention.

    The same result and gradients as ``scaled_dot_product_attention(query, key, value, attn_mask,
    is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)``, with the same masks and conventions, but
    the (..., Tq, Tk) attention weights are never made: the fused op ``flash_attention``
    (``minigrad/fused/``) runs the online softmax over ``block_size`` x ``block_size`` tiles of the scores,
    keeps one logsumexp per query for backward, and recomputes each tile there. What the graph holds grows
    linearly with the sequence, not with its square; causal, the tiles above the diagonal are skipped.
    demos/flash_attention_lesson.py builds it step by step.
    """
    q, k, v = query, key, value
    who = "flash_attention"
    scores_shape = _attention_scores_shape(who, q, k, v, enable_gqa)
    if isinstance(block_size, bool) or not isinstance(block_size, int | np.integer) or block_size < 1:
        raise ValueError(f"{who}: block_size must be a positive int (the tile's side, in positions), "
                         f"got {block_size!r}")
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    bias = None  # the mask as a float added to the scores: 0 where a key may be seen, -inf where not
    if attn_mask is not None:
        check_mask_broadcasts(who, "attn_mask", attn_mask, scores_shape)
        if _array(attn_mask).dtype == np.bool_:
            bias = np.where(_array(attn_mask), 0.0, -np.inf).astype(q.dtype)
        else:
            bias = attn_mask if isinstance(attn_mask, Tensor) else np.asarray(attn_mask, dtype=q.dtype)
        if bias.ndim < 2:  # (Tk,): one row for every query
            bias = bias.reshape((1,) * (2 - bias.ndim) + tuple(bias.shape))
    grouped = enable_gqa and min(q.ndim, k.ndim) >= 3 and k.shape[-3] != q.shape[-3]
    if grouped:  # as in scaled_dot_product_attention: each key/value head broadcast over its group of queries
        n_heads, n_kv = q.shape[-3], k.shape[-3]
        q = q.reshape(q.shape[:-3] + (n_kv, n_heads // n_kv) + q.shape[-2:])  # (..., Hkv, G, Tq, E)
        k, v = k.unsqueeze(-3), v.unsqueeze(-3)  # (..., Hkv, 1, Tk, E)
        bias = _group_heads(bias, len(scores_shape), n_kv, n_heads)
    extra = () if bias is None else (bias,)
    out = fused.flash_attention(q, k, v, *extra, scale=scale, causal=bool(is_causal), block_size=int(block_size))
    if grouped:
        out = out.reshape(out.shape[:-4] + (n_heads,) + out.shape[-2:])  # (..., Hq, Tq, Ev)
    return out


# --------------------------------------------------------------------------------------
# Padding
# --------------------------------------------------------------------------------------


def pad(input: Tensor, pad, mode: str = "constant", value: float | None = None) -> Tensor:
    """Pad (or, with negative sizes, crop) the last dims, PyTorch's ``F.pad``.

    ``pad`` lists (before, after) pairs starting from the *last* dim:
    ``(left, right)`` pads the last dim, ``(left, right, top, bottom)`` the last
    two. ``mode``: ``'constant'`` (fill with ``value``, default 0), ``'reflect'``
    (mirror without repeating the edge), ``'replicate'`` (repeat the edge) or
    ``'circular'`` (wrap around); the last three pad 1 to 3 dims of an input
    with one or two leading (batch, channel) dims more, as PyTorch's.
    """
    sizes = [int(p) for p in pad]
    if len(sizes) % 2:
        raise ValueError(f"pad: the padding length must be divisible by 2 (before, after pairs), got {tuple(pad)}")
    n_dims = len(sizes) // 2
    if n_dims > input.ndim:
        raise ValueError(f"pad: padding length {len(sizes)} too large for a {input.ndim}-D input (at most "
                         f"{2 * input.ndim})")
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise NotImplementedError(f"pad: mode {mode!r}; use 'constant', 'reflect', 'replicate' or 'circular'")
    if mode != "constant":
        if value is not None and value != 0:
            raise ValueError(f"pad: padding mode {mode!r} doesn't take in value argument")
        if n_dims > 3 or input.ndim not in (n_dims + 1, n_dims + 2):
            raise NotImplementedError(f"pad: mode {mode!r} pads 1 to 3 dims of an input with 1 or 2 more "
                                      f"(batch, channels): pad {tuple(pad)} on a {input.ndim}-D input")
    out = input
    for k in range(n_dims):
        dim, before, after = input.ndim - 1 - k, sizes[2 * k], sizes[2 * k + 1]
        out = _pad_dim(out, dim, before, after, mode, 0.0 if value is None else value)
    return out


def _pad_dim(x: Tensor, dim: int, before: int, after: int, mode: str, value: float) -> Tensor:
    """``x`` padded by ``before``/``after`` along ``dim``; negative sizes crop, as in PyTorch: ``'constant'`` and
    ``'circular'`` crop first (and wrap the cropped tensor), ``'replicate'`` and ``'reflect'`` read each output
    position from the whole input."""
    lead = (slice(None),) * dim
    if mode in ("constant", "circular") and (before < 0 or after < 0):
        x = x[lead + (slice(max(-before, 0), x.shape[dim] - max(-after, 0)),)]
        before, after = max(before, 0), max(after, 0)
    if before == 0 and after == 0:
        return x
    n = x.shape[dim]
    if mode == "constant":
        parts = [np.full(x.shape[:dim] + (size,) + x.shape[dim + 1:], value, dtype=x.dtype)  # constants: no gradient
                 for size in (before, after)]
        return apply(OPS["concatenate"], parts[0], x, parts[1], axis=dim)
    if mode == "reflect" and (before >= n or after >= n):
        raise ValueError(f"pad: argument (before {before}, after {after}) should be less than the size "
                         f"{n} of dim {dim} for reflect padding")
    if mode == "circular" and (before > n or after > n):
        raise ValueError(f"pad: padding (before {before}, after {after}) must be at most the size {n} of dim "
                         f"{dim} for circular padding")
    index = np.arange(-before, n + after)  # the source position of each output position
    if mode == "replicate":
        index = index.clip(0, n - 1)
    elif mode == "reflect":
        period = 2 * (n - 1) if n > 1 else 1
        index = np.abs(index) % period
        index = np.where(index >= n, period - index, index)
    else:
        index = index % n
    return x[lead + (index,)]


def __getattr__(name: str):
    """A PyTorch function minigrad's ``F`` lacks (``F.conv2d``) is an error that lists what it has."""
    if name.startswith("__"):
        raise AttributeError(f"module 'minigrad.nn.functional' has no attribute {name!r}")
    have = sorted(n for n, v in globals().items() if callable(v) and not n.startswith("_")
                  and getattr(v, "__module__", "") in (__name__, "minigrad.nn.losses"))
    raise AttributeError(f"module 'minigrad.nn.functional' has no attribute {name!r}: torch.nn.functional.{name} "
                         f"is not in minigrad; it has {', '.join(have)}")
