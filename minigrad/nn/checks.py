"""The input checks of the layers and the functions: each rule written once, here.

A mistake should stop at the call that made it, with a message naming the
caller, the argument, its shape and dtype, and what was expected, not surface
as a NumPy traceback from a matmul three layers down. A layer names itself as
``layer_repr(layer)`` (``Linear(in_features=4, out_features=8, bias=True)``), a
function by a string (``"cross_entropy"``). The models' checks (their configs, their
(B, T) batches) are in ``models/checks.py``, built on these.

* layers: ``check_input`` (a Tensor, of the dtype of the layer's parameters)
  and ``check_features`` (the size of the last axis);
* token ids and class ids: ``token_ids`` (the one range check; -100,
  ``IGNORE_INDEX``, marks a target without a loss);
* attention masks: ``check_mask_broadcasts`` and ``check_padding_mask``;
* arguments: ``check_probability`` (dropout's p, in [0, 1] as in PyTorch),
  ``check_approximate`` (GELU's form), ``check_heads`` (d_model split into
  heads, query heads into key/value groups) and ``check_rope_head_dim``.
"""

from __future__ import annotations

import numpy as np

from ..tensor import Tensor
from .module import Module

IGNORE_INDEX = -100  # a target equal to this adds nothing to the loss (PyTorch's convention)
GELU_FORMS = ("none", "tanh")  # GELU's ``approximate``: the exact erf form, or GPT-2's tanh formula


def _array(x) -> np.ndarray:
    return x.data if isinstance(x, Tensor) else np.asarray(x)


# --------------------------------------------------------------------------------------
# Layer inputs
# --------------------------------------------------------------------------------------


def layer_repr(layer: Module) -> str:
    """A layer as its class and arguments, ``Linear(in_features=4, ...)``, for error messages."""
    return f"{type(layer).__name__}({layer.extra_repr()})"


def check_input(layer: Module, x, name: str = "input", dtype: bool = True) -> None:
    """Raise a TypeError naming ``layer`` unless ``x`` is a Tensor (of the dtype of the layer's parameters).

    The dtype rule (PyTorch's): a layer never converts its input. A float64 batch
    reaching float32 weights would otherwise turn the whole model's activations
    (and, through the matmul's promotion, its computation) into float64, silently
    and at twice the cost; so it is an error that says which conversion to make.
    """
    _check_tensor(layer, x, name)
    if dtype:
        _check_dtype(layer, x, name)


def check_features(layer: Module, x: Tensor, expected: int, name: str = "input") -> None:
    """Raise a ValueError naming ``layer`` unless ``x``'s last axis has ``expected`` features (and ``check_input``)."""
    _check_tensor(layer, x, name)
    if x.ndim == 0 or x.shape[-1] != expected:
        raise ValueError(f"{layer_repr(layer)}: the {name} has shape {x.shape}, but its last axis should have "
                         f"{expected} features")
    _check_dtype(layer, x, name)


def _check_tensor(layer: Module, x, name: str) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{layer_repr(layer)}: the {name} must be a minigrad Tensor, got {type(x).__name__}; "
                        f"make one with mg.tensor(...) (Python numbers become float32)")


def _check_dtype(layer: Module, x: Tensor, name: str) -> None:
    param = next(layer.parameters(), None)
    if param is None or x.dtype == param.dtype:
        return
    if x.dtype.kind != "f":
        raise TypeError(f"{layer_repr(layer)}: the {name} has dtype {x.dtype}, but the layer computes in floating "
                        f"point ({param.dtype}); convert it with x.astype(np.{param.dtype})")
    raise TypeError(f"{layer_repr(layer)}: the {name} is {x.dtype} but the layer's parameters are {param.dtype}; "
                    f"layers do not convert their input (as in PyTorch). Convert the input with "
                    f"x.astype(np.{param.dtype}), or the model with model.to(np.{x.dtype})")


# --------------------------------------------------------------------------------------
# Token ids and targets
# --------------------------------------------------------------------------------------


def token_ids(input, num_embeddings: int, who: str = "embedding", name: str = "ids", size_name: str = "num_embeddings",
              error: type[Exception] = IndexError, *, kind: str = "token id", shape: tuple | None = None,
              why: str = "", ignore_index: int | None = None) -> np.ndarray:
    """``input`` as an integer ndarray, checked to lie in [0, num_embeddings): the one check of ids and targets.

    ``who`` names the caller and ``name`` the argument (``GPT.forward``, ``idx``), so the
    message says which argument of which call was wrong. Out-of-range ids raise
    ``error``: IndexError for a table lookup (as PyTorch), the models pass ValueError.
    Targets are the exception: the fused cross_entropy checks their range itself,
    so its callers run this only when the op refuses them, to say which id, in their terms.
    For targets: ``shape`` is the shape they must have (``why`` says why), and
    ``ignore_index`` marks a position without a target, which is not range-checked.
    """
    ids = _array(input)
    if ids.dtype.kind not in "iu":
        raise TypeError(f"{who}: {name} must hold integer {kind}s, got dtype {ids.dtype} (shape {ids.shape})")
    if shape is not None and ids.shape != tuple(shape):
        raise ValueError(f"{who}: {name} must have shape {tuple(shape)} ({why}), got {ids.shape}")
    if not ids.size or (ids.min() >= 0 and ids.max() < num_embeddings):
        return ids
    outside = (ids < 0) | (ids >= num_embeddings)
    if ignore_index is not None:
        outside &= ids != ignore_index
    if outside.any():
        bad = ids[outside]
        hint = f"; use {ignore_index} for positions without a target" if ignore_index is not None else ""
        raise error(f"{who}: {name} holds {kind} {bad[0]}, outside [0, {size_name}={num_embeddings}) "
                    f"({len(bad)} such id(s); {name} shape {ids.shape}, min {ids.min()}, max {ids.max()}{hint})")
    return ids


# --------------------------------------------------------------------------------------
# Attention masks
# --------------------------------------------------------------------------------------


def check_mask_broadcasts(who: str, name: str, mask, shape: tuple) -> None:
    """Raise a clear error unless ``mask`` (bool or float) broadcasts to ``shape`` without growing it."""
    arr = _array(mask)
    if arr.dtype != np.bool_ and arr.dtype.kind != "f":
        raise TypeError(f"{who}: {name} must be bool (True = may attend) or float (added to the scores), "
                        f"got {arr.dtype}")
    try:
        fits = np.broadcast_shapes(arr.shape, shape) == tuple(shape)
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"{who}: {name} of shape {arr.shape} does not broadcast to the attention scores' "
                         f"shape {tuple(shape)} (batch..., heads, Tq, Tk)")


def check_padding_mask(who: str, mask, shape: tuple, name: str = "key_padding_mask") -> np.ndarray:
    """A padding mask as a bool ndarray of ``shape`` (B, Tk), True at the padding keys, checked."""
    padding = _array(mask)
    if padding.dtype != np.bool_ or padding.shape != tuple(shape):
        raise ValueError(f"{who}: {name} must be bool (B, Tk) = {tuple(shape)} with True at padding, got "
                         f"{padding.shape} {padding.dtype}")
    return padding


# --------------------------------------------------------------------------------------
# Arguments
# --------------------------------------------------------------------------------------


def check_probability(p, who: str = "dropout", name: str = "p") -> float:
    """A probability such as dropout's ``p``, checked: a number in [0, 1] (PyTorch's rule; p = 1 drops all)."""
    if isinstance(p, bool) or not isinstance(p, int | float | np.floating | np.integer) or not 0.0 <= p <= 1.0:
        raise ValueError(f"{who}: {name} must be a probability in [0, 1], got {p!r}")
    return float(p)


def check_approximate(approximate: str, who: str = "gelu", name: str = "approximate") -> str:
    """GELU's ``approximate``: 'none' (the exact erf form) or 'tanh' (GPT-2's formula)."""
    if approximate not in GELU_FORMS:
        raise ValueError(f"{who}: {name}={approximate!r}; expected one of {GELU_FORMS} ('none': the exact erf "
                         f"form, 'tanh': GPT-2's formula)")
    return approximate


def check_heads(who: str, d_model: int, n_heads: int, n_kv_heads: int | None = None,
                names: tuple[str, str, str] = ("d_model", "n_heads", "n_kv_heads")) -> None:
    """d_model must split into ``n_heads`` equal heads, and those into groups of one per key/value head."""
    d, h, kv = names
    if isinstance(n_heads, bool) or not isinstance(n_heads, int | np.integer) or n_heads < 1 or d_model % n_heads:
        raise ValueError(f"{who}: {d}={d_model} must be divisible by {h}={n_heads} "
                         f"(each head gets {d} // {h} features)")
    if n_kv_heads is not None and (isinstance(n_kv_heads, bool) or not isinstance(n_kv_heads, int | np.integer)
                                   or n_kv_heads < 1 or n_heads % n_kv_heads):
        raise ValueError(f"{who}: {h}={n_heads} must be divisible by {kv}={n_kv_heads} "
                         f"(each key/value head serves the same number of query heads)")


def check_rope_head_dim(who: str, head_dim: int, derived: str = "") -> None:
    """RoPE rotates a head's features in pairs, so head_dim must be even; ``derived`` says where it came from."""
    if head_dim % 2:
        raise ValueError(f"{who}: RoPE rotates features in pairs, so head_dim{derived} = {head_dim} must be even")
