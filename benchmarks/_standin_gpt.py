"""STAND-IN: a GPT written straight on minigrad Tensors, for benchmarking before ``models.GPT`` exists.

The benchmarks use ``models.gpt.GPT`` whenever it can be imported; this file is
only the fallback (``--model standin`` forces it). It has no ``nn.Module`` layers:
parameters are plain Tensors in a dict and the forward pass is a flat function,
so it also shows what the engine costs without any layer machinery on top.

The architecture and init are those of ``benchmarks/torch_gpt.py``: learned
positions, pre-norm blocks, GELU MLP, final LayerNorm, head tied to the token
embedding, nanoGPT's init. Weights are stored (in, out), so a layer is ``x @ W + b``.
"""

from __future__ import annotations

import math

import numpy as np

import minigrad as mg
from minigrad import ops


class StandInGPT:
    """``StandInGPT(vocab_size, block_size, n_layer, n_head, d_model, d_ff, ...)``; call as ``model(idx, targets)``."""

    def __init__(self, vocab_size: int, block_size: int, n_layer: int, n_head: int, d_model: int, d_ff: int,
                 gelu_approximate: str = "tanh", fused_qkv: bool = False, seed: int = 0):
        rng = np.random.default_rng(seed)
        self.n_head, self.n_layer, self.fused_qkv = n_head, n_layer, fused_qkv
        self.gelu_approximate = gelu_approximate
        residual_std = 0.02 / math.sqrt(2 * n_layer)

        def weight(n_in, n_out, std=0.02):
            return mg.Tensor(rng.normal(0.0, std, (n_in, n_out)).astype(np.float32), requires_grad=True)

        def const(n, value):
            return mg.Tensor(np.full(n, value, dtype=np.float32), requires_grad=True)

        d = d_model
        self.params: dict[str, mg.Tensor] = {
            "wte": weight(vocab_size, d), "wpe": weight(block_size, d),
            "ln_f.w": const(d, 1.0), "ln_f.b": const(d, 0.0),
        }
        for i in range(n_layer):
            p = f"h{i}."
            self.params.update({p + "ln_1.w": const(d, 1.0), p + "ln_1.b": const(d, 0.0),
                                p + "ln_2.w": const(d, 1.0), p + "ln_2.b": const(d, 0.0),
                                p + "out.W": weight(d, d, residual_std), p + "out.b": const(d, 0.0),
                                p + "fc.W": weight(d, d_ff), p + "fc.b": const(d_ff, 0.0),
                                p + "proj.W": weight(d_ff, d, residual_std), p + "proj.b": const(d, 0.0)})
            if fused_qkv:
                self.params.update({p + "qkv.W": weight(d, 3 * d), p + "qkv.b": const(3 * d, 0.0)})
            else:
                for name in "qkv":
                    self.params.update({p + f"{name}.W": weight(d, d), p + f"{name}.b": const(d, 0.0)})
        self.future = np.triu(np.ones((block_size, block_size), dtype=bool), k=1)  # True: masked

    def parameters(self) -> list[mg.Tensor]:
        return list(self.params.values())

    def num_parameters(self) -> int:
        return sum(p.size for p in self.params.values())

    def _attention(self, x, p: str):
        P = self.params
        B, T, C = x.shape
        if self.fused_qkv:
            q, k, v = mg.split(x @ P[p + "qkv.W"] + P[p + "qkv.b"], 3, axis=-1)
        else:
            q, k, v = (x @ P[p + f"{n}.W"] + P[p + f"{n}.b"] for n in "qkv")
        hd = C // self.n_head
        q, k, v = (t.reshape(B, T, self.n_head, hd).transpose(0, 2, 1, 3) for t in (q, k, v))  # (B, H, T, hd)
        scores = (q @ k.swapaxes(-1, -2)) * (1.0 / math.sqrt(hd))  # (B, H, T, T)
        weights = scores.masked_fill(self.future[:T, :T], float("-inf")).softmax(axis=-1)
        y = (weights @ v).transpose(0, 2, 1, 3).reshape(B, T, C)
        return y @ P[p + "out.W"] + P[p + "out.b"]

    def __call__(self, idx: np.ndarray, targets: np.ndarray | None = None):
        P = self.params
        B, T = idx.shape
        x = P["wte"][idx] + P["wpe"][:T]  # (B, T, d_model)
        for i in range(self.n_layer):
            p = f"h{i}."
            x = x + self._attention(ops.layer_norm(x, P[p + "ln_1.w"], P[p + "ln_1.b"]), p)
            h = ops.layer_norm(x, P[p + "ln_2.w"], P[p + "ln_2.b"])
            h = ops.gelu(h @ P[p + "fc.W"] + P[p + "fc.b"], approximate=self.gelu_approximate)
            x = x + h @ P[p + "proj.W"] + P[p + "proj.b"]
        x = ops.layer_norm(x, P["ln_f.w"], P["ln_f.b"])
        logits = x @ P["wte"].T  # (B, T, vocab_size), tied head
        loss = None
        if targets is not None:
            loss = ops.cross_entropy(logits.reshape(B * T, -1), targets.reshape(-1))
        return logits, loss
