"""The PyTorch reference GPT the benchmarks race minigrad against.

The same decoder as ``models.GPT`` (in the benchmark's configuration): token and
learned position embeddings, pre-norm blocks (LayerNorm, causal self-attention,
LayerNorm, GELU MLP of width ``d_ff``), a final LayerNorm and an output layer
tied to the token embedding; nanoGPT's init (normal 0.02, residual projections
0.02 / sqrt(2 * n_layer), zero biases, unit norm gains).

Attention is written out, ``softmax(Q K^T / sqrt(head_dim) + mask) V``, not
``F.scaled_dot_product_attention``: the comparison is between two eager
engines running the same ops, not against a fused kernel minigrad does not have.

Parameter names are those of ``models.GPT`` (separate Q, K and V projections), so
``TorchGPT.load_state_dict`` takes a minigrad GPT's ``state_dict()`` values made
torch tensors; the smoke test does that and checks both give the same logits.

Importing this file imports torch; the benchmarks only do so when it is installed.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model: int, n_head: int, block_size: int, bias: bool):
        super().__init__()
        self.n_head = n_head
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        future = torch.triu(torch.ones(block_size, block_size, dtype=torch.bool), diagonal=1)
        self.register_buffer("future", future, persistent=False)  # True above the diagonal: masked

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        hd = C // self.n_head
        q = q.view(B, T, self.n_head, hd).transpose(1, 2)  # (B, n_head, T, head_dim)
        k = k.view(B, T, self.n_head, hd).transpose(1, 2)
        v = v.view(B, T, self.n_head, hd).transpose(1, 2)
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))  # (B, n_head, T, T)
        scores = scores.masked_fill(self.future[:T, :T], float("-inf"))
        weights = F.softmax(scores, dim=-1)
        y = weights @ v  # (B, n_head, T, head_dim)
        y = y.transpose(1, 2).reshape(B, T, C)
        return self.out_proj(y)


class MLP(nn.Module):
    def __init__(self, d_model: int, d_ff: int, bias: bool, gelu_approximate: str):
        super().__init__()
        self.up_proj = nn.Linear(d_model, d_ff, bias=bias)
        self.gelu = nn.GELU(approximate=gelu_approximate)
        self.down_proj = nn.Linear(d_ff, d_model, bias=bias)

    def forward(self, x):
        return self.down_proj(self.gelu(self.up_proj(x)))


class Block(nn.Module):
    def __init__(self, d_model, n_head, d_ff, block_size, bias, gelu_approximate):
        super().__init__()
        self.attn_norm = nn.LayerNorm(d_model, bias=bias)
        self.attn = CausalSelfAttention(d_model, n_head, block_size, bias)
        self.mlp_norm = nn.LayerNorm(d_model, bias=bias)
        self.mlp = MLP(d_model, d_ff, bias, gelu_approximate)

    def forward(self, x):
        x = x + self.attn(self.attn_norm(x))
        return x + self.mlp(self.mlp_norm(x))


class TorchGPT(nn.Module):
    """``TorchGPT(vocab_size, block_size, n_layer, n_head, d_model, d_ff, ...)``; ``forward(idx, targets)``."""

    def __init__(self, vocab_size: int, block_size: int, n_layer: int, n_head: int, d_model: int, d_ff: int,
                 bias: bool = True, gelu_approximate: str = "tanh", seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        self.block_size = block_size
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(block_size, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_head, d_ff, block_size, bias, gelu_approximate)
                                    for _ in range(n_layer))
        self.norm_f = nn.LayerNorm(d_model, bias=bias)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        self.lm_head.weight = self.tok_emb.weight  # tied: one matrix embeds tokens and scores them

        for name, p in self.named_parameters():
            if name.endswith("out_proj.weight") or name.endswith("down_proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * n_layer))  # residual projections
            elif p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02)
            elif name.endswith("bias"):
                nn.init.zeros_(p)
            else:
                nn.init.ones_(p)  # LayerNorm gains

    def forward(self, idx, targets=None):
        B, T = idx.shape
        pos = torch.arange(T, device=idx.device)
        x = self.tok_emb(idx) + self.pos_emb(pos)  # (B, T, d_model)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.norm_f(x))  # (B, T, vocab_size)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(B * T, -1), targets.view(B * T))
        return logits, loss
