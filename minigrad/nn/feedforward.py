"""The position-wise feed-forward networks of a transformer block.

Attention mixes information *between* positions; the feed-forward network then
transforms each position on its own, through a wider hidden layer:

* ``MLP``: down(act(up(x))), hidden width d_ff = expansion * d_model (4x in
  "Attention Is All You Need" with ReLU, GPT-2 with GELU);
* ``SwiGLU`` (Shazeer 2020, LLaMA): down(silu(gate(x)) * up(x)), a gated unit
  with three matrices; its default d_ff = 8/3 * d_model keeps the parameter
  count of a 4x MLP.
"""

from __future__ import annotations

import numpy as np

from ..tensor import Tensor
from . import functional as F
from .layers import Linear
from .module import Module

_ACTIVATIONS = {
    "relu": F.relu,
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),  # GPT-2's "gelu_new"
    "silu": F.silu,
}


class MLP(Module):
    """down_proj(act(up_proj(x))): d_model -> d_ff -> d_model, d_ff = expansion * d_model unless given."""

    def __init__(self, d_model: int, d_ff: int | None = None, expansion: int = 4, activation: str = "gelu",
                 bias: bool = True, rng: np.random.Generator | None = None):
        super().__init__()
        if activation not in _ACTIVATIONS:
            raise ValueError(f"MLP: activation must be one of {sorted(_ACTIVATIONS)}, not {activation!r}")
        self.d_model, self.d_ff = d_model, d_ff if d_ff is not None else expansion * d_model
        self.activation = activation
        self.up_proj = Linear(d_model, self.d_ff, bias, rng)
        self.down_proj = Linear(self.d_ff, d_model, bias, rng)

    def forward(self, x: Tensor) -> Tensor:
        hidden = _ACTIVATIONS[self.activation](self.up_proj(x))  # (..., d_ff)
        return self.down_proj(hidden)  # (..., d_model)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, d_ff={self.d_ff}, activation={self.activation!r}"


class SwiGLU(Module):
    """down_proj(silu(gate_proj(x)) * up_proj(x)); d_ff defaults to 8/3 * d_model (no bias by default, as LLaMA)."""

    def __init__(self, d_model: int, d_ff: int | None = None, bias: bool = False,
                 rng: np.random.Generator | None = None):
        super().__init__()
        self.d_model, self.d_ff = d_model, d_ff if d_ff is not None else max(1, round(8 * d_model / 3))
        self.gate_proj = Linear(d_model, self.d_ff, bias, rng)
        self.up_proj = Linear(d_model, self.d_ff, bias, rng)
        self.down_proj = Linear(self.d_ff, d_model, bias, rng)

    def forward(self, x: Tensor) -> Tensor:
        hidden = F.silu(self.gate_proj(x)) * self.up_proj(x)  # (..., d_ff): the gate scales each hidden unit
        return self.down_proj(hidden)  # (..., d_model)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, d_ff={self.d_ff}"
