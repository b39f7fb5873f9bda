"""The basic layers: Linear, Embedding, LayerNorm, RMSNorm, Dropout and the activations (Softmax too) as modules.

Each is a thin Module around a function in ``functional.py``: it owns the
weights, checks its input's shape (so a mistake names the layer, not a matmul
deep inside it) and passes ``self.training`` to dropout. Initialisation follows
PyTorch's defaults; every random draw comes from ``rng`` or the default
generator that ``minigrad.nn.manual_seed`` seeds.
"""

from __future__ import annotations

import math

import numpy as np

from ..tensor import Tensor
from . import functional as F
from . import init
from .checks import check_approximate, check_features, check_input, check_probability, layer_repr, token_ids
from .module import Module, Parameter


class Linear(Module):
    """y = x @ weight.T + bias, with weight (out_features, in_features) as in PyTorch."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 rng: np.random.Generator | None = None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        # PyTorch's default: kaiming_uniform(a=sqrt(5)), which works out to U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
        bound = 1.0 / math.sqrt(in_features) if in_features > 0 else 0.0
        self.weight = init.uniform_(Parameter(np.empty((out_features, in_features), np.float32)), -bound, bound, rng)
        self.bias = init.uniform_(Parameter(np.empty(out_features, np.float32)), -bound, bound, rng) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        check_features(self, x, self.in_features)
        return F.linear(x, self.weight, self.bias)  # (..., in) -> (..., out)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Embedding(Module):
    """A lookup table: integer ids (...) -> rows of weight (num_embeddings, embedding_dim), N(0, 1) init."""

    def __init__(self, num_embeddings: int, embedding_dim: int, rng: np.random.Generator | None = None):
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.weight = init.normal_(Parameter(np.empty((num_embeddings, embedding_dim), np.float32)), rng=rng)

    def forward(self, ids) -> Tensor:
        ids = token_ids(ids, self.num_embeddings, who=layer_repr(self))
        return self.weight[ids]  # (..., embedding_dim)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}"


def _feature_count(normalized_shape) -> int:
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if len(shape) != 1:
        raise ValueError(f"normalized_shape must be one size (the last axis), got {shape}")
    return int(shape[0])


class LayerNorm(Module):
    """Normalise the last axis to zero mean and unit variance, then scale (weight) and shift (bias)."""

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True, bias: bool = True):
        super().__init__()
        self.normalized_shape = (_feature_count(normalized_shape),)
        self.eps = eps
        n = self.normalized_shape[0]
        self.weight = Parameter(np.ones(n, np.float32)) if elementwise_affine else None
        self.bias = Parameter(np.zeros(n, np.float32)) if elementwise_affine and bias else None

    def forward(self, x: Tensor) -> Tensor:
        check_features(self, x, self.normalized_shape[0])
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, bias={self.bias is not None}"


class RMSNorm(Module):
    """Divide the last axis by its root mean square, then scale (weight); no centring, no bias (LLaMA)."""

    def __init__(self, normalized_shape, eps: float = 1e-6, elementwise_affine: bool = True):
        super().__init__()
        self.normalized_shape = (_feature_count(normalized_shape),)
        self.eps = eps
        self.weight = Parameter(np.ones(self.normalized_shape[0], np.float32)) if elementwise_affine else None

    def forward(self, x: Tensor) -> Tensor:
        check_features(self, x, self.normalized_shape[0])
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}"


class Dropout(Module):
    """Zero elements with probability p while training (scaling the rest by 1/(1-p)); identity in eval."""

    def __init__(self, p: float = 0.5, rng: np.random.Generator | None = None):
        super().__init__()
        self.p, self.rng = check_probability(p, "Dropout"), rng

    def forward(self, x: Tensor) -> Tensor:
        check_input(self, x)
        return F.dropout(x, self.p, self.training, self.rng)

    def extra_repr(self) -> str:
        return f"p={self.p}"


class Identity(Module):
    """Returns its input (a placeholder where a layer is optional); any arguments are ignored, as PyTorch's."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, x):
        return x


class ReLU(Module):
    """max(x, 0)."""

    def forward(self, x: Tensor) -> Tensor:
        check_input(self, x)
        return F.relu(x)


class GELU(Module):
    """x * Phi(x); ``approximate='tanh'`` for GPT-2's tanh formula."""

    def __init__(self, approximate: str = "none"):
        super().__init__()
        self.approximate = check_approximate(approximate, "GELU")

    def forward(self, x: Tensor) -> Tensor:
        check_input(self, x)
        return F.gelu(x, self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class SiLU(Module):
    """x * sigmoid(x)."""

    def forward(self, x: Tensor) -> Tensor:
        check_input(self, x)
        return F.silu(x)


class Tanh(Module):
    """Hyperbolic tangent."""

    def forward(self, x: Tensor) -> Tensor:
        check_input(self, x)
        return F.tanh(x)


class Sigmoid(Module):
    """1 / (1 + exp(-x))."""

    def forward(self, x: Tensor) -> Tensor:
        check_input(self, x)
        return F.sigmoid(x)


class Softmax(Module):
    """``F.softmax(x, dim)``: each slice along ``dim`` becomes probabilities (``nn.Softmax(dim=1)``)."""

    def __init__(self, dim: int | None = None):
        super().__init__()
        self.dim = dim

    def forward(self, x: Tensor) -> Tensor:
        check_input(self, x)
        return F.softmax(x, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    """``F.log_softmax(x, dim)``, the log of Softmax computed stably (``nn.LogSoftmax(dim=1)`` before NLLLoss)."""

    def forward(self, x: Tensor) -> Tensor:
        check_input(self, x)
        return F.log_softmax(x, self.dim)


class Flatten(Module):
    """Flatten dims ``start_dim`` .. ``end_dim`` into one: (N, C, H, W) -> (N, C*H*W) by default, as PyTorch's."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x: Tensor) -> Tensor:
        check_input(self, x, dtype=False)
        return x.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Split dim ``dim`` into ``unflattened_size``: ``Unflatten(1, (C, H, W))`` undoes ``Flatten()``."""

    def __init__(self, dim: int, unflattened_size):
        super().__init__()
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, x: Tensor) -> Tensor:
        check_input(self, x, dtype=False)
        if not -x.ndim <= self.dim < x.ndim:
            raise IndexError(f"{layer_repr(self)}: dim {self.dim} is out of range for a {x.ndim}-D input "
                             f"of shape {x.shape}")
        dim = self.dim % x.ndim
        known = math.prod(s for s in self.unflattened_size if s != -1)
        if self.unflattened_size.count(-1) > 1 or (
                x.shape[dim] % known if -1 in self.unflattened_size else known != x.shape[dim]):
            raise ValueError(f"{layer_repr(self)}: unflattened_size {self.unflattened_size} does not multiply to "
                             f"the size {x.shape[dim]} of dim {self.dim} (input shape {x.shape})")
        return x.reshape(x.shape[:dim] + self.unflattened_size + x.shape[dim + 1:])

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
