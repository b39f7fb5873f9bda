"""Recurrent networks: RNN, LSTM and GRU cells, and layers that unroll them over a sequence.

A cell maps (input at step t, state after step t-1) to the state after step t;
a layer applies its cell at every step, and stacks ``num_layers`` of them.
Backprop through the unrolled loop is ordinary reverse mode over a long graph,
"backpropagation through time", which is where the vanilla RNN's gradient
vanishes (or explodes) as it is multiplied by W_hh^T once per step.

Parameter names, shapes and gate layouts are PyTorch's, so weights load from
``torch.nn.RNNCell`` / ``LSTMCell`` / ``GRUCell`` unchanged: weight_ih
(gates * H, I), weight_hh (gates * H, H), bias_ih and bias_hh (gates * H,),
gates stacked in the order i, f, g, o (LSTM) and r, z, n (GRU); a layer names
layer k's weight_ih_l{k}, ... and loads from ``torch.nn.RNN`` / ``LSTM`` /
``GRU`` unchanged. Every weight starts U(-1/sqrt(H), 1/sqrt(H)), as in PyTorch.
As in PyTorch, a layer takes (T, B, input_size) unless ``batch_first=True``.
"""

from __future__ import annotations

import math

import numpy as np

from .. import stack
from ..tensor import Tensor
from . import functional as F
from . import init
from .checks import check_features, check_input, layer_repr
from .module import Module, Parameter


class _Cell(Module):
    """Shared set-up of the cells: ``gates`` stacked weight blocks of size hidden_size."""

    gates = 1

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, rng: np.random.Generator | None = None):
        super().__init__()
        self.input_size, self.hidden_size = input_size, hidden_size
        bound = 1.0 / math.sqrt(hidden_size)
        rows = self.gates * hidden_size

        def uniform(*shape):
            return init.uniform_(Parameter(np.empty(shape, np.float32)), -bound, bound, rng)

        self.weight_ih = uniform(rows, input_size)
        self.weight_hh = uniform(rows, hidden_size)
        self.bias_ih = uniform(rows) if bias else None
        self.bias_hh = uniform(rows) if bias else None

    def _check(self, x: Tensor, *states) -> None:
        check_input(self, x, dtype=False)
        if x.ndim != 2:
            raise ValueError(f"{layer_repr(self)}: the input must be (B, {self.input_size}), got shape {x.shape}")
        check_features(self, x, self.input_size)
        for h in states:
            if h is not None:
                check_input(self, h, "state")  # (the dtype rule holds for states too: no silent float64)
            if h is not None and h.shape != (x.shape[0], self.hidden_size):
                raise ValueError(f"{layer_repr(self)}: the state must be (B, hidden_size) = "
                                 f"{(x.shape[0], self.hidden_size)}, got {h.shape}")

    def _zeros(self, x: Tensor) -> Tensor:
        return Tensor._wrap(np.zeros((x.shape[0], self.hidden_size), dtype=x.dtype))

    def _input_part(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight_ih, self.bias_ih)  # (B, gates * H)

    def _hidden_part(self, h: Tensor) -> Tensor:
        return F.linear(h, self.weight_hh, self.bias_hh)  # (B, gates * H)

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}, bias={self.bias_ih is not None}"


class RNNCell(_Cell):
    """h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh), the Elman RNN (``nonlinearity='relu'`` for relu)."""

    gates = 1

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, nonlinearity: str = "tanh",
                 rng: np.random.Generator | None = None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNNCell: nonlinearity must be 'tanh' or 'relu', not {nonlinearity!r}")
        super().__init__(input_size, hidden_size, bias, rng)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        """input (B, input_size), hx (B, hidden_size) or None for zeros -> h' (B, hidden_size)."""
        self._check(input, hx)
        h = self._zeros(input) if hx is None else hx
        pre = self._input_part(input) + self._hidden_part(h)  # (B, H)
        return pre.tanh() if self.nonlinearity == "tanh" else pre.relu()

    def extra_repr(self) -> str:
        return super().extra_repr() + (", nonlinearity='relu'" if self.nonlinearity == "relu" else "")


class LSTMCell(_Cell):
    """Long short-term memory: gates i, f, g, o decide what the cell state c forgets, stores and shows."""

    gates = 4

    def forward(self, input: Tensor, hx: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
        """input (B, input_size), hx = (h, c) each (B, hidden_size) or None -> (h', c')."""
        h, c = (None, None) if hx is None else hx
        self._check(input, h, c)
        h = self._zeros(input) if h is None else h
        c = self._zeros(input) if c is None else c
        gates = self._input_part(input) + self._hidden_part(h)  # (B, 4H)
        i, f, g, o = gates.chunk(4, -1)  # each (B, H)
        i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
        c = f * c + i * g  # forget part of the old memory, write the gated candidate
        h = o * c.tanh()  # expose part of it
        return h, c


class GRUCell(_Cell):
    """Gated recurrent unit: reset gate r, update gate z, candidate n; h' = (1 - z) * n + z * h."""

    gates = 3

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        """input (B, input_size), hx (B, hidden_size) or None for zeros -> h' (B, hidden_size)."""
        self._check(input, hx)
        h = self._zeros(input) if hx is None else hx
        x_r, x_z, x_n = self._input_part(input).chunk(3, -1)  # each (B, H)
        h_r, h_z, h_n = self._hidden_part(h).chunk(3, -1)
        r = (x_r + h_r).sigmoid()
        z = (x_z + h_z).sigmoid()
        n = (x_n + r * h_n).tanh()  # the reset gate scales the hidden part only, as in PyTorch (and cuDNN)
        return (1.0 - z) * n + z * h


# --------------------------------------------------------------------------------------
# Layers: unroll a cell over time, stack num_layers of them
# --------------------------------------------------------------------------------------

_WEIGHTS = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")


class _Recurrent(Module):
    """Unroll ``num_layers`` stacked cells over a sequence: input (T, B, input_size), or (B, T, input_size) with
    ``batch_first=True``.

    The cells compute; the layer holds their weights under PyTorch's names (``weight_ih_l0``, ``bias_hh_l1``...),
    and each call hands them to the cells, so a weight assigned to the layer is the one used.
    """

    cell_class: type = RNNCell

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, rng: np.random.Generator | None = None,
                 **cell_options):
        super().__init__()
        if num_layers < 1:
            raise ValueError(f"{type(self).__name__}: num_layers must be at least 1, got {num_layers}")
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.batch_first, self.dropout, self.rng = batch_first, dropout, rng
        self.cells = [  # a plain list, not submodules: the weights are the layer's, as in PyTorch
            self.cell_class(input_size if layer == 0 else hidden_size, hidden_size, bias, rng=rng, **cell_options)
            for layer in range(num_layers)]
        for layer, cell in enumerate(self.cells):
            for name in _WEIGHTS:
                if getattr(cell, name) is not None:
                    setattr(self, f"{name}_l{layer}", getattr(cell, name))

    def forward(self, input: Tensor, hx=None):
        """Run over the sequence; returns (outputs, (T, B, hidden_size) or with batch_first (B, T, hidden_size),
        final state (num_layers, B, hidden_size))."""
        check_input(self, input, dtype=False)
        x = input if self.batch_first else input.transpose(0, 1)  # (B, T, input_size)
        if x.ndim != 3 or x.shape[1] == 0:
            layout = "(B, T, input_size)" if self.batch_first else "(T, B, input_size)"
            raise ValueError(f"{layer_repr(self)}: the input must be {layout} with T >= 1, got shape {input.shape}")
        check_features(self, x, self.input_size)
        states = self._per_layer(hx, x.shape[0])
        finals = []
        for layer, cell in enumerate(self.cells):
            for name in _WEIGHTS:
                if getattr(cell, name) is not None:
                    setattr(cell, name, getattr(self, f"{name}_l{layer}"))
            state, outputs = states[layer], []
            for t in range(x.shape[1]):
                state = cell(x[:, t], state)
                outputs.append(self._hidden(state))  # (B, H)
            x = stack(outputs, axis=1)  # (B, T, H): the next layer's input
            if layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, self.training, self.rng)
            finals.append(state)
        output = x if self.batch_first else x.transpose(0, 1)
        return output, self._stacked(finals)

    # RNN and GRU carry one state tensor; LSTM overrides these three for its (h, c) pair.
    def _hidden(self, state):
        return state

    def _stacked(self, finals):
        return stack(finals, axis=0)  # (num_layers, B, H)

    def _per_layer(self, hx, batch: int) -> list:
        if hx is None:
            return [None] * self.num_layers
        self._check_state(hx, batch)
        return [hx[layer] for layer in range(self.num_layers)]

    def _check_state(self, h: Tensor, batch: int) -> None:
        expected = (self.num_layers, batch, self.hidden_size)
        check_input(self, h, "initial state")
        if h.shape != expected:
            raise ValueError(f"{layer_repr(self)}: the initial state must be (num_layers, B, hidden_size) = "
                             f"{expected}, got {h.shape}")

    def extra_repr(self) -> str:
        extra = f", num_layers={self.num_layers}" if self.num_layers > 1 else ""
        return f"{self.input_size}, {self.hidden_size}{extra}, batch_first={self.batch_first}"


class RNN(_Recurrent):
    """Elman RNN layer(s): ``RNN(input_size, hidden_size, num_layers=1, nonlinearity='tanh', batch_first=False)``."""

    cell_class = RNNCell

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, nonlinearity: str = "tanh",
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 rng: np.random.Generator | None = None):
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout, rng,
                         nonlinearity=nonlinearity)


class GRU(_Recurrent):
    """GRU layer(s); returns (outputs (B, T, H), h_n (num_layers, B, H))."""

    cell_class = GRUCell


class LSTM(_Recurrent):
    """LSTM layer(s); hx = (h_0, c_0), each (num_layers, B, H); returns (outputs, (h_n, c_n))."""

    cell_class = LSTMCell

    def _hidden(self, state):
        return state[0]

    def _stacked(self, finals):
        return stack([h for h, _ in finals], axis=0), stack([c for _, c in finals], axis=0)

    def _per_layer(self, hx, batch: int) -> list:
        if hx is None:
            return [None] * self.num_layers
        h, c = hx
        self._check_state(h, batch)
        self._check_state(c, batch)
        return [(h[layer], c[layer]) for layer in range(self.num_layers)]
