"""Small versions of the code learners bring, written for PyTorch, run on minigrad with only the import changed.

* a makemore-style MLP with batch norm (Zero to Hero, part 3), its weights and batches drawn from a
  ``Generator``, updated with ``p.data += -lr * p.grad``;
* the manual backprop of "becoming a backprop ninja" (part 4), checked with its ``cmp`` function;
* nanoGPT's causal self-attention block (``split(n_embd, dim=2)``, ``view``, ``transpose(1, 2)``);
* the "Let's build GPT" script, whole (hyperparameters made tiny), device line included;
* nanoGPT's model.py (weight tying, ``configure_optimizers``, ``generate`` with ``topk``) and a train.py loop.

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

    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.dropout = config.dropout
        self.register_buffer("bias", torch.tril(torch.ones(config.block_size, config.block_size))
                                    .view(1, 1, config.block_size, config.block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v  = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:,:,:T,:T] == 0, float('-inf'))
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        y = self.resid_dropout(self.c_proj(y))
        return y
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
# "Let's build GPT": the lecture's script, with only its imports changed
# --------------------------------------------------------------------------------------

LETS_BUILD_GPT = """
batch_size = 8; block_size = 16; max_iters = 21; eval_interval = 10; learning_rate = 1e-3
device = 'cuda' if torch.cuda.is_available() else 'cpu'
eval_iters = 2; n_embd = 32; n_head = 4; n_layer = 2; dropout = 0.1
torch.manual_seed(1337)
text = "hello world, this is a tiny text for the bigram model to learn from. " * 20
chars = sorted(list(set(text))); vocab_size = len(chars)
stoi = { ch:i for i,ch in enumerate(chars) }; itos = { i:ch for i,ch in enumerate(chars) }
encode = lambda s: [stoi[c] for c in s]
decode = lambda l: ''.join([itos[i] for i in l])
data = torch.tensor(encode(text), dtype=torch.long)
n = int(0.9*len(data)); train_data = data[:n]; val_data = data[n:]
def get_batch(split):
    data = train_data if split == 'train' else val_data
    ix = torch.randint(len(data) - block_size, (batch_size,))
    x = torch.stack([data[i:i+block_size] for i in ix])
    y = torch.stack([data[i+1:i+block_size+1] for i in ix])
    x, y = x.to(device), y.to(device)
    return x, y
@torch.no_grad()
def estimate_loss():
    out = {}
    model.eval()
    for split in ['train', 'val']:
        losses = torch.zeros(eval_iters)
        for k in range(eval_iters):
            X, Y = get_batch(split)
            logits, loss = model(X, Y)
            losses[k] = loss.item()
        out[split] = losses.mean()
    model.train()
    return out
class Head(nn.Module):
    def __init__(self, head_size):
        super().__init__()
        self.key = nn.Linear(n_embd, head_size, bias=False)
        self.query = nn.Linear(n_embd, head_size, bias=False)
        self.value = nn.Linear(n_embd, head_size, bias=False)
        self.register_buffer('tril', torch.tril(torch.ones(block_size, block_size)))
        self.dropout = nn.Dropout(dropout)
    def forward(self, x):
        B,T,C = x.shape
        k = self.key(x); q = self.query(x)
        wei = q @ k.transpose(-2,-1) * k.shape[-1]**-0.5
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float('-inf'))
        wei = F.softmax(wei, dim=-1)
        wei = self.dropout(wei)
        v = self.value(x)
        return wei @ v
class MultiHeadAttention(nn.Module):
    def __init__(self, num_heads, head_size):
        super().__init__()
        self.heads = nn.ModuleList([Head(head_size) for _ in range(num_heads)])
        self.proj = nn.Linear(head_size * num_heads, n_embd)
        self.dropout = nn.Dropout(dropout)
    def forward(self, x):
        out = torch.cat([h(x) for h in self.heads], dim=-1)
        return self.dropout(self.proj(out))
class FeedFoward(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(n_embd, 4 * n_embd),
            nn.ReLU(),
            nn.Linear(4 * n_embd, n_embd),
            nn.Dropout(dropout),
        )
    def forward(self, x):
        return self.net(x)
class Block(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        head_size = n_embd // n_head
        self.sa = MultiHeadAttention(n_head, head_size)
        self.ffwd = FeedFoward(n_embd)
        self.ln1 = nn.LayerNorm(n_embd); self.ln2 = nn.LayerNorm(n_embd)
    def forward(self, x):
        x = x + self.sa(self.ln1(x))
        x = x + self.ffwd(self.ln2(x))
        return x
class GPTLanguageModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.token_embedding_table = nn.Embedding(vocab_size, n_embd)
        self.position_embedding_table = nn.Embedding(block_size, n_embd)
        self.blocks = nn.Sequential(*[Block(n_embd, n_head=n_head) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size)
        self.apply(self._init_weights)
    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
    def forward(self, idx, targets=None):
        B, T = idx.shape
        tok_emb = self.token_embedding_table(idx)
        pos_emb = self.position_embedding_table(torch.arange(T, device=device))
        x = tok_emb + pos_emb
        x = self.blocks(x)
        x = self.ln_f(x)
        logits = self.lm_head(x)
        if targets is None:
            loss = None
        else:
            B, T, C = logits.shape
            logits = logits.view(B*T, C)
            targets = targets.view(B*T)
            loss = F.cross_entropy(logits, targets)
        return logits, loss
    def generate(self, idx, max_new_tokens):
        for _ in range(max_new_tokens):
            idx_cond = idx[:, -block_size:]
            logits, loss = self(idx_cond)
            logits = logits[:, -1, :]
            probs = F.softmax(logits, dim=-1)
            idx_next = torch.multinomial(probs, num_samples=1)
            idx = torch.cat((idx, idx_next), dim=1)
        return idx
model = GPTLanguageModel()
m = model.to(device)
print(sum(p.numel() for p in m.parameters())/1e6, 'M parameters')
history = []
optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
for iter in range(max_iters):
    if iter % eval_interval == 0 or iter == max_iters - 1:
        losses = estimate_loss()
        print(f"step {iter}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
        history.append(float(losses['train']))
    xb, yb = get_batch('train')
    logits, loss = model(xb, yb)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
context = torch.zeros((1, 1), dtype=torch.long, device=device)
sample = decode(m.generate(context, max_new_tokens=20)[0].tolist())
"""


def test_the_lets_build_gpt_script_runs_as_written(capsys):
    import minigrad.nn as nn
    from minigrad.nn import functional as F

    names = {"torch": minigrad, "nn": nn, "F": F, "__name__": "__main__"}
    exec(LETS_BUILD_GPT, names)  # noqa: S102
    history = names["history"]
    assert names["device"] == "cpu" and len(history) == 3 and history[-1] < history[0] - 0.2
    assert len(names["sample"]) == 21 and "step 20: train loss" in capsys.readouterr().out


# --------------------------------------------------------------------------------------
# nanoGPT's model.py, and train.py's loop made tiny
# --------------------------------------------------------------------------------------

NANOGPT_MODEL = r'''
import math
import inspect
from dataclasses import dataclass

class LayerNorm(nn.Module):
    """ LayerNorm but with an optional bias. PyTorch doesn't support simply bias=False """

    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, input):
        return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)

class CausalSelfAttention(nn.Module):

    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.dropout = config.dropout
        self.flash = hasattr(torch.nn.functional, 'scaled_dot_product_attention')

    def forward(self, x):
        B, T, C = x.size()
        q, k, v  = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=None,
                                                             dropout_p=self.dropout if self.training else 0,
                                                             is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        y = self.resid_dropout(self.c_proj(y))
        return y

class MLP(nn.Module):

    def __init__(self, config):
        super().__init__()
        self.c_fc    = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu    = nn.GELU()
        self.c_proj  = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        x = self.c_fc(x)
        x = self.gelu(x)
        x = self.c_proj(x)
        x = self.dropout(x)
        return x

class Block(nn.Module):

    def __init__(self, config):
        super().__init__()
        self.ln_1 = LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x

@dataclass
class GPTConfig:
    block_size: int = 1024
    vocab_size: int = 50304
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    dropout: float = 0.0
    bias: bool = True

class GPT(nn.Module):

    def __init__(self, config):
        super().__init__()
        assert config.vocab_size is not None
        assert config.block_size is not None
        self.config = config

        self.transformer = nn.ModuleDict(dict(
            wte = nn.Embedding(config.vocab_size, config.n_embd),
            wpe = nn.Embedding(config.block_size, config.n_embd),
            drop = nn.Dropout(config.dropout),
            h = nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
            ln_f = LayerNorm(config.n_embd, bias=config.bias),
        ))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight

        self.apply(self._init_weights)
        for pn, p in self.named_parameters():
            if pn.endswith('c_proj.weight'):
                torch.nn.init.normal_(p, mean=0.0, std=0.02/math.sqrt(2 * config.n_layer))

    def get_num_params(self, non_embedding=True):
        n_params = sum(p.numel() for p in self.parameters())
        if non_embedding:
            n_params -= self.transformer.wpe.weight.numel()
        return n_params

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None):
        device = idx.device
        b, t = idx.size()
        assert t <= self.config.block_size, \
            f"Cannot forward sequence of length {t}, block size is only {self.config.block_size}"
        pos = torch.arange(0, t, dtype=torch.long, device=device)

        tok_emb = self.transformer.wte(idx)
        pos_emb = self.transformer.wpe(pos)
        x = self.transformer.drop(tok_emb + pos_emb)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)

        if targets is not None:
            logits = self.lm_head(x)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        else:
            logits = self.lm_head(x[:, [-1], :])
            loss = None

        return logits, loss

    def configure_optimizers(self, weight_decay, learning_rate, betas, device_type):
        param_dict = {pn: p for pn, p in self.named_parameters()}
        param_dict = {pn: p for pn, p in param_dict.items() if p.requires_grad}
        decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
        nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
        optim_groups = [
            {'params': decay_params, 'weight_decay': weight_decay},
            {'params': nodecay_params, 'weight_decay': 0.0}
        ]
        num_decay_params = sum(p.numel() for p in decay_params)
        num_nodecay_params = sum(p.numel() for p in nodecay_params)
        fused_available = 'fused' in inspect.signature(torch.optim.AdamW).parameters
        use_fused = fused_available and device_type == 'cuda'
        extra_args = dict(fused=True) if use_fused else dict()
        optimizer = torch.optim.AdamW(optim_groups, lr=learning_rate, betas=betas, **extra_args)
        return optimizer

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None):
        for _ in range(max_new_tokens):
            idx_cond = idx if idx.size(1) <= self.config.block_size else idx[:, -self.config.block_size:]
            logits, _ = self(idx_cond)
            logits = logits[:, -1, :] / temperature
            if top_k is not None:
                v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                logits[logits < v[:, [-1]]] = -float('Inf')
            probs = F.softmax(logits, dim=-1)
            idx_next = torch.multinomial(probs, num_samples=1)
            idx = torch.cat((idx, idx_next), dim=1)
        return idx

# train.py's loop, tiny
torch.manual_seed(1337)
model = GPT(GPTConfig(block_size=16, vocab_size=40, n_layer=2, n_head=2, n_embd=32, dropout=0.0, bias=False))
optimizer = model.configure_optimizers(0.1, 1e-3, (0.9, 0.95), 'cpu')
data = torch.randint(0, 40, (2000,)).numpy() % 7
def get_batch():
    ix = torch.randint(len(data) - 16, (8,))
    x = torch.stack([torch.from_numpy((data[i:i+16]).astype(np.int64)) for i in ix])
    y = torch.stack([torch.from_numpy((data[i+1:i+1+16]).astype(np.int64)) for i in ix])
    return x, y
losses = []
for it in range(40):
    X, Y = get_batch()
    logits, loss = model(X, Y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    losses.append(loss.item())
out = model.generate(torch.zeros((1, 1), dtype=torch.long), 10, temperature=0.8, top_k=5)
'''


def test_nanogpts_model_file_and_training_loop_run_as_written():
    import minigrad.nn as nn
    from minigrad.nn import functional as F

    names = {"torch": minigrad, "nn": nn, "F": F, "np": np, "__name__": __name__}  # (dataclass looks it up)
    exec(NANOGPT_MODEL, names)  # noqa: S102
    losses, model = names["losses"], names["model"]
    assert losses[-1] < losses[0] - 0.5  # it trains
    assert model.transformer.wte.weight is model.lm_head.weight  # tied
    assert names["out"].shape == (1, 11) and names["out"].dtype == minigrad.int64
    assert model.get_num_params() == 26016
