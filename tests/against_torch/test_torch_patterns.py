"""Small versions of the code learners bring, written for PyTorch, run on minigrad with only the import changed.

* a makemore-style MLP with batch norm (Zero to Hero, part 3), its weights and batches drawn from a
  ``Generator``, updated with ``p.data += -lr * p.grad``;
* the manual backprop of "becoming a backprop ninja" (part 4), checked with its ``cmp`` function;
* a causal self-attention block written as nanoGPT writes one (``split(n_embd, dim=2)``, ``view``,
  ``transpose(1, 2)``, ``masked_fill``, ``contiguous``);
* a small GPT and its loop in the same style: a ``device`` line, ``ModuleDict``, weight tying, parameter
  groups by ``p.dim()``, ``topk`` sampling, ``randint``/``stack``/``from_numpy`` batches, gradient clipping.

Each is our own code in the spellings those sources use, not a copy of them.

Each source is one string, run with ``torch`` bound to minigrad (``import minigrad as torch``) and, where
torch is installed, to torch itself: from the same starting weights, the two agree to float32 rounding.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import minigrad

try:
    import torch as real_torch
except ImportError:  # pragma: no cover
    real_torch = None

needs_torch = pytest.mark.skipif(real_torch is None, reason="torch is not installed")

WORDS = ["emma", "olivia", "ava", "isabella", "sophia", "charlotte", "mia", "amelia", "harper", "evelyn", "abigail",
         "emily", "elizabeth", "mila", "ella", "avery", "sofia", "camila", "aria", "scarlett"]


def dataset(block_size: int = 3):
    """makemore's bigram-context dataset: X (N, block_size) and Y (N,) as int lists."""
    chars = sorted(set("".join(WORDS)))
    stoi = {s: i + 1 for i, s in enumerate(chars)}
    stoi["."] = 0
    X, Y = [], []
    for w in WORDS:
        context = [0] * block_size
        for ch in w + ".":
            X.append(context)
            Y.append(stoi[ch])
            context = context[1:] + [stoi[ch]]
    return X, Y, len(stoi)


# --------------------------------------------------------------------------------------
# makemore part 3: an MLP with batch norm, from a Generator
# --------------------------------------------------------------------------------------

MAKEMORE_INIT = """
g = torch.Generator().manual_seed(2147483647)
C = torch.randn((vocab_size, n_embd), generator=g)
W1 = torch.randn((n_embd * block_size, n_hidden), generator=g) * (5/3)/((n_embd * block_size)**0.5)
b1 = torch.randn(n_hidden, generator=g) * 0.01
W2 = torch.randn((n_hidden, vocab_size), generator=g) * 0.01
b2 = torch.randn(vocab_size, generator=g) * 0
bngain = torch.ones((1, n_hidden))
bnbias = torch.zeros((1, n_hidden))
parameters = [C, W1, b1, W2, b2, bngain, bnbias]
"""

MAKEMORE_TRAIN = """
Xtr, Ytr = torch.tensor(X), torch.tensor(Y)
bnmean_running = torch.zeros((1, n_hidden))
bnstd_running = torch.ones((1, n_hidden))
for p in parameters:
    p.requires_grad = True
lossi = []
for i in range(max_steps):
    ix = torch.randint(0, Xtr.shape[0], (batch_size,), generator=g) if batches is None else torch.tensor(batches[i])
    Xb, Yb = Xtr[ix], Ytr[ix]
    emb = C[Xb]
    embcat = emb.view(emb.shape[0], -1)
    hpreact = embcat @ W1 + b1
    bnmeani = hpreact.mean(0, keepdim=True)
    bnstdi = hpreact.std(0, keepdim=True)
    hpreact = bngain * (hpreact - bnmeani) / bnstdi + bnbias
    with torch.no_grad():
        bnmean_running = 0.999 * bnmean_running + 0.001 * bnmeani
        bnstd_running = 0.999 * bnstd_running + 0.001 * bnstdi
    h = torch.tanh(hpreact)
    logits = h @ W2 + b2
    loss = F.cross_entropy(logits, Yb)
    for p in parameters:
        p.grad = None
    loss.backward()
    lr = 0.1 if i < 100 else 0.01
    for p in parameters:
        p.data += -lr * p.grad
    lossi.append(loss.log10().item())
"""


def run_makemore(torch, init=None, batches=None, max_steps=30):
    X, Y, vocab_size = dataset()
    names = dict(torch=torch, F=torch.nn.functional, X=X, Y=Y, vocab_size=vocab_size, n_embd=10, n_hidden=64,
                 block_size=3, batch_size=16, max_steps=max_steps, batches=batches)
    if init is None:
        exec(MAKEMORE_INIT, names)  # noqa: S102
    else:
        names.update({k: torch.tensor(v) for k, v in init.items()}, g=None)
        names["parameters"] = [names[k] for k in ("C", "W1", "b1", "W2", "b2", "bngain", "bnbias")]
    exec(MAKEMORE_TRAIN, names)  # noqa: S102
    return names


def test_a_makemore_mlp_with_batch_norm_trains_from_a_generator_and_repeats_exactly():
    first = run_makemore(minigrad)
    again = run_makemore(minigrad)
    assert first["lossi"] == again["lossi"]  # the Generator's draws repeat, so the run does
    assert first["lossi"][-1] < first["lossi"][0] - 0.1  # it trains (log10 of the loss)
    assert first["C"].dtype == minigrad.float32 and first["Xtr"].dtype == minigrad.int64
    assert first["bnstd_running"].requires_grad is False  # updated under no_grad


@needs_torch
def test_the_makemore_mlp_computes_what_pytorch_computes():
    rng = np.random.default_rng(0)
    X, _, vocab_size = dataset()
    init = {"C": rng.standard_normal((vocab_size, 10)), "W1": rng.standard_normal((30, 64)) * 0.3,
            "b1": rng.standard_normal(64) * 0.01, "W2": rng.standard_normal((64, vocab_size)) * 0.01,
            "b2": np.zeros(vocab_size), "bngain": np.ones((1, 64)), "bnbias": np.zeros((1, 64))}
    init = {k: v.astype(np.float32) for k, v in init.items()}
    batches = [rng.integers(0, len(X), 16).tolist() for _ in range(30)]
    ours, theirs = run_makemore(minigrad, init, batches), run_makemore(real_torch, init, batches)
    np.testing.assert_allclose(ours["lossi"], theirs["lossi"], rtol=1e-4)
    np.testing.assert_allclose(ours["W1"].numpy(), theirs["W1"].detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ours["bnstd_running"].numpy(), theirs["bnstd_running"].numpy(), rtol=1e-4)


# --------------------------------------------------------------------------------------
# makemore part 4: manual backprop, checked with cmp
# --------------------------------------------------------------------------------------

NINJA = """
def cmp(s, dt, t):
    ex = torch.all(dt == t.grad).item()
    app = torch.allclose(dt, t.grad)
    maxdiff = (dt - t.grad).abs().max().item()
    results[s] = (ex, app, maxdiff)

emb = C[Xb]
embcat = emb.view(emb.shape[0], -1)
hprebn = embcat @ W1 + b1
bnmeani = 1/n*hprebn.sum(0, keepdim=True)
bndiff = hprebn - bnmeani
bndiff2 = bndiff**2
bnvar = 1/(n-1)*(bndiff2).sum(0, keepdim=True)
bnvar_inv = (bnvar + 1e-5)**-0.5
bnraw = bndiff * bnvar_inv
hpreact = bngain * bnraw + bnbias
h = torch.tanh(hpreact)
logits = h @ W2 + b2
logit_maxes = logits.max(1, keepdim=True).values
norm_logits = logits - logit_maxes
counts = norm_logits.exp()
counts_sum = counts.sum(1, keepdims=True)
counts_sum_inv = counts_sum**-1
probs = counts * counts_sum_inv
logprobs = probs.log()
loss = -logprobs[range(n), Yb].mean()
for t in [logprobs, probs, counts, counts_sum, counts_sum_inv, norm_logits, logit_maxes, logits, h, hpreact, bnraw,
          bnvar_inv, bnvar, bndiff2, bndiff, hprebn, bnmeani, embcat, emb]:
    t.retain_grad()
loss.backward()
"""

NINJA_MANUAL = """
dlogprobs = torch.zeros_like(logprobs)
dlogprobs[range(n), Yb] = -1.0/n
dprobs = (1.0/probs) * dlogprobs
dcounts_sum_inv = (counts * dprobs).sum(1, keepdim=True)
dcounts = counts_sum_inv * dprobs
dcounts_sum = (-counts_sum**-2) * dcounts_sum_inv
dcounts += torch.ones_like(counts) * dcounts_sum
dnorm_logits = counts * dcounts
dlogits = dnorm_logits.clone()
dlogit_maxes = (-dnorm_logits).sum(1, keepdim=True)
dlogits += F.one_hot(logits.max(1).indices, num_classes=logits.shape[1]) * dlogit_maxes
dh = dlogits @ W2.T
dW2 = h.T @ dlogits
db2 = dlogits.sum(0)
dhpreact = (1.0 - h**2) * dh
dbngain = (bnraw * dhpreact).sum(0, keepdim=True)
dbnraw = bngain * dhpreact
dbnbias = dhpreact.sum(0, keepdim=True)
dbndiff = bnvar_inv * dbnraw
dbnvar_inv = (bndiff * dbnraw).sum(0, keepdim=True)
dbnvar = (-0.5*(bnvar + 1e-5)**-1.5) * dbnvar_inv
dbndiff2 = (1.0/(n-1))*torch.ones_like(bndiff2) * dbnvar
dbndiff += (2*bndiff) * dbndiff2
dhprebn = dbndiff.clone()
dbnmeani = (-dbndiff).sum(0)
dhprebn += 1.0/n * (torch.ones_like(hprebn) * dbnmeani)
dembcat = dhprebn @ W1.T
dW1 = embcat.T @ dhprebn
db1 = dhprebn.sum(0)
demb = dembcat.view(emb.shape)
dC = torch.zeros_like(C)
for k in range(Xb.shape[0]):
    for j in range(Xb.shape[1]):
        ix = Xb[k, j]
        dC[ix] += demb[k, j]

for name in ["logprobs", "probs", "counts_sum_inv", "counts_sum", "counts", "norm_logits", "logit_maxes", "logits",
             "h", "W2", "b2", "hpreact", "bngain", "bnbias", "bnraw", "bnvar_inv", "bnvar", "bndiff2", "bndiff",
             "bnmeani", "hprebn", "embcat", "W1", "b1", "emb", "C"]:
    cmp(name, globals()["d" + name], globals()[name])

# backprop through cross_entropy in one go
dlogits = F.softmax(logits, 1)
dlogits[range(n), Yb] -= 1
dlogits /= n
cmp("logits (fast)", dlogits, logits)
"""


def run_ninja(torch):
    X, Y, vocab_size = dataset()
    rng = np.random.default_rng(1)
    n = 32
    names = dict(torch=torch, F=torch.nn.functional, n=n, results={})
    for k, shape, scale in (("C", (vocab_size, 10), 1.0), ("W1", (30, 64), 0.3), ("b1", (64,), 0.1),
                            ("W2", (64, vocab_size), 0.1), ("b2", (vocab_size,), 0.1), ("bngain", (1, 64), 0.1),
                            ("bnbias", (1, 64), 0.1)):
        value = rng.standard_normal(shape).astype(np.float32) * scale + (1.0 if k == "bngain" else 0.0)
        names[k] = torch.tensor(value, requires_grad=True)
    ix = rng.integers(0, len(X), n)
    names["Xb"], names["Yb"] = torch.tensor(np.array(X)[ix]), torch.tensor(np.array(Y)[ix])
    exec(NINJA, names)  # noqa: S102
    # The notebook runs the manual part with the graph still recorded, and its in-place lines (dcounts += ...,
    # dlogits[range(n), Yb] -= 1) write into tensors made from recorded ones, which minigrad's in-place rules
    # refuse while recording, saying what to write; so here the manual part runs under no_grad, line for line.
    with torch.no_grad():
        exec(NINJA_MANUAL, names)  # noqa: S102
    return names["results"]


def test_manual_backprop_agrees_with_backward_as_cmp_checks_it():
    results = run_ninja(minigrad)
    assert len(results) == 27
    for name, (exact, approximate, maxdiff) in results.items():
        assert approximate and maxdiff < 1e-6, (name, maxdiff)
        assert isinstance(exact, bool) and isinstance(approximate, bool) and isinstance(maxdiff, float)


@needs_torch
def test_manual_backprop_cmp_reports_what_pytorch_reports():
    ours, theirs = run_ninja(minigrad), run_ninja(real_torch)
    assert ours.keys() == theirs.keys()
    for name in ours:
        assert ours[name][1] == theirs[name][1], name
        assert ours[name][2] < 1e-6 and theirs[name][2] < 1e-6, name


# --------------------------------------------------------------------------------------
# nanoGPT's causal self-attention
# --------------------------------------------------------------------------------------

NANOGPT = """
class CausalSelfAttention(nn.Module):
    # One projection makes queries, keys and values; the heads are split off the channels.
    def __init__(self, config):
        super().__init__()
        self.n_head, self.n_embd = config.n_head, config.n_embd
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.drop = nn.Dropout(config.dropout)
        mask = torch.tril(torch.ones(config.block_size, config.block_size))
        self.register_buffer("mask", mask.view(1, 1, config.block_size, config.block_size))

    def heads(self, t, B, T, C):  # (B, T, C) -> (B, n_head, T, head size)
        return t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q, k, v = self.heads(q, B, T, C), self.heads(k, B, T, C), self.heads(v, B, T, C)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        scores = scores.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
        weights = self.drop(F.softmax(scores, dim=-1))
        y = (weights @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)
"""


class Config:
    n_embd, n_head, block_size, bias, dropout = 16, 4, 8, True, 0.0


def attention_block(torch):
    names = dict(torch=torch, nn=torch.nn, F=torch.nn.functional, math=math)
    exec(NANOGPT, names)  # noqa: S102
    return names["CausalSelfAttention"](Config())


def test_the_nanogpt_attention_block_runs_and_is_causal():
    block = attention_block(minigrad)
    x = minigrad.randn(2, 6, 16, requires_grad=True)
    y = block(x)
    assert y.shape == (2, 6, 16)
    y[:, 2].sum().backward()
    assert np.abs(x.grad.numpy()[:, 3:]).max() == 0.0 and np.abs(x.grad.numpy()[:, :3]).max() > 0  # no future


@needs_torch
def test_the_nanogpt_attention_block_computes_what_pytorch_computes():
    ours, theirs = attention_block(minigrad), attention_block(real_torch)
    with real_torch.no_grad():
        for name, p in theirs.named_parameters():
            dict(ours.named_parameters())[name].data[...] = p.numpy()
    x = np.random.default_rng(2).standard_normal((2, 8, 16)).astype(np.float32)
    xm, xt = minigrad.tensor(x, requires_grad=True), real_torch.tensor(x, requires_grad=True)
    ym, yt = ours(xm), theirs(xt)
    np.testing.assert_allclose(ym.numpy(), yt.detach().numpy(), rtol=1e-4, atol=1e-5)
    (ym ** 2).sum().backward()
    (yt ** 2).sum().backward()
    np.testing.assert_allclose(xm.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-5)
    wm, wt = ours.c_attn.weight.grad.numpy(), theirs.c_attn.weight.grad.numpy()
    np.testing.assert_allclose(wm, wt, rtol=1e-4, atol=1e-5)


# --------------------------------------------------------------------------------------
# A small GPT and its training loop, written as the lectures and nanoGPT write them
# --------------------------------------------------------------------------------------

SMALL_GPT = """
import inspect
from dataclasses import dataclass

device = 'cuda' if torch.cuda.is_available() else 'cpu'

@dataclass
class Settings:
    vocab_size: int = 12
    block_size: int = 16
    n_embd: int = 32
    n_head: int = 2
    n_layer: int = 2
    bias: bool = True
    dropout: float = 0.0

class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(cfg.n_embd), nn.LayerNorm(cfg.n_embd)
        self.attn = CausalSelfAttention(cfg)
        d = cfg.n_embd
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))

class TinyGPT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.parts = nn.ModuleDict(dict(
            tokens=nn.Embedding(cfg.vocab_size, cfg.n_embd),
            places=nn.Embedding(cfg.block_size, cfg.n_embd),
            blocks=nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)]),
            norm=nn.LayerNorm(cfg.n_embd),
        ))
        self.head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.head.weight = self.parts.tokens.weight  # tied
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None):
        B, T = idx.size()
        pos = torch.arange(0, T, dtype=torch.long, device=device)
        x = self.parts.tokens(idx) + self.parts.places(pos)
        for block in self.parts.blocks:
            x = block(x)
        logits = self.head(self.parts.norm(x))
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)

    def optimizer(self, lr):
        params = [p for p in self.parameters() if p.requires_grad]
        groups = [{'params': [p for p in params if p.dim() >= 2], 'weight_decay': 0.1},
                  {'params': [p for p in params if p.dim() < 2], 'weight_decay': 0.0}]
        fused = 'fused' in inspect.signature(torch.optim.AdamW).parameters
        return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), **({'fused': False} if fused else {}))

    @torch.no_grad()
    def generate(self, idx, steps, temperature=1.0, top_k=None):
        for _ in range(steps):
            logits, _ = self(idx[:, -self.cfg.block_size:])
            logits = logits[:, -1, :] / temperature
            if top_k is not None:
                v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                logits[logits < v[:, [-1]]] = -float('Inf')
            nxt = torch.multinomial(F.softmax(logits, dim=-1), num_samples=1)
            idx = torch.cat((idx, nxt), dim=1)
        return idx

torch.manual_seed(1337)
cfg = Settings()
model = TinyGPT(cfg).to(device)
opt = model.optimizer(3e-3)
data = (torch.arange(600) % 7).numpy()

def get_batch():
    ix = torch.randint(len(data) - cfg.block_size, (8,))
    x = torch.stack([torch.from_numpy(data[i:i + cfg.block_size].astype(np.int64)) for i in ix])
    y = torch.stack([torch.from_numpy(data[i + 1:i + 1 + cfg.block_size].astype(np.int64)) for i in ix])
    return x.to(device), y.to(device)

losses = []
for step in range(40):
    X, Y = get_batch()
    _, loss = model(X, Y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    losses.append(loss.item())
out = model.generate(torch.zeros((1, 1), dtype=torch.long, device=device), 10, temperature=0.8, top_k=5)
n_params = sum(p.numel() for p in model.parameters())
"""


def test_a_small_gpt_and_its_loop_written_as_nanogpt_writes_them_run_and_train():
    import minigrad.nn as nn
    from minigrad.nn import functional as F

    names = {"torch": minigrad, "nn": nn, "F": F, "np": np, "math": math, "__name__": __name__}
    exec(NANOGPT, names)  # noqa: S102  (the attention block above)
    exec(SMALL_GPT, names)  # noqa: S102
    losses, model = names["losses"], names["model"]
    assert names["device"] == "cpu" and losses[-1] < losses[0] - 0.5  # it trains
    assert model.head.weight is model.parts.tokens.weight  # tied: one tensor, counted once
    assert names["out"].shape == (1, 11) and names["out"].dtype == minigrad.int64
    assert names["n_params"] == sum(p.numel() for p in model.parameters())
