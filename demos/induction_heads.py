"""Watch an induction head form: a 2-layer attention-only transformer learns to copy a repeated sequence.

    python -m demos.induction_heads [--steps N] [--out DIR]

Each training sequence is L random tokens followed by the same L tokens again::

    positions   0  1  2 ... L-1 | L  L+1 ... 2L-1
    tokens      a  b  c ...  z  | a   b  ...  z

The first half is pure noise: no model can predict a random token, so its loss
stays at ln(vocab_size). The second half is predictable, but only by a circuit
that looks back: at position L+i the current token (the i-th of the copy) last
occurred at position i, and the next token is whatever came after that
occurrence, at position i+1. Olsson et al. ("In-context Learning and
Induction Heads", 2022) call the attention head that does this an *induction
head*. It takes two layers:

1. a *previous-token head* in layer 1 writes, at every position, which token
   came just before it;
2. the induction head in layer 2 uses that as its key: the query "my token is
   b" matches the position whose previous token was b, i.e. the one right
   after the earlier b, and copies the token found there.

If every sequence had the same length there would be a shortcut: "copy the
token L - 1 positions back" needs no induction, only a head that attends by
position. So the length L of the random half is drawn afresh for each training
batch (between L/2 and 3L/2 of ``--half``); only looking up the content works
for all of them. The evaluation uses L = ``--half`` itself.

So the demo trains a transformer with attention only (no MLPs: nothing else
could do the work) and, at every evaluation, measures each layer-2 head's
*induction score*: the average attention from position t of the second half to
position t - L + 1, the token after the previous occurrence of the current
one. The loss on the second half collapses at about the same time as the score
jumps, a sudden "phase change" rather than a gradual improvement.

The picture (``induction_heads.png``) shows the loss of each half over
training with the best induction score, the attention pattern of the
induction head on one sequence (a bright diagonal offset by L - 1), and that of
the previous-token head in layer 1 (a diagonal just below the main one).
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np

import minigrad as mg
from demos._common import check_model_sizes, pyplot, save_figure, set_threads
from minigrad import nn, optim
from minigrad.nn import functional as F


class AttentionOnlyTransformer(nn.Module):
    """Token + learned position embeddings, n_layer pre-norm attention blocks (no MLP), a final norm and a head."""

    def __init__(self, vocab_size: int, block_size: int, d_model: int, n_head: int, n_layer: int,
                 rng: np.random.Generator):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab_size, d_model, rng=rng)
        self.pos_emb = nn.LearnedPositionalEmbedding(block_size, d_model, rng=rng)
        self.norms = nn.ModuleList(nn.LayerNorm(d_model) for _ in range(n_layer))
        self.attns = nn.ModuleList(nn.MultiHeadAttention(d_model, n_head, rng=rng) for _ in range(n_layer))
        self.norm_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, rng=rng)
        for weight in (self.tok_emb.weight, self.pos_emb.weight):  # small embeddings, as GPT-2 starts them
            nn.init.normal_(weight, 0.0, 0.1, rng)

    def forward(self, idx: np.ndarray):
        """Logits (B, T, vocab_size), and each layer's attention weights (B, n_head, T, T)."""
        x = self.pos_emb(self.tok_emb(idx))  # (B, T, d_model)
        patterns = []
        for norm, attn in zip(self.norms, self.attns):
            out, weights = attn(norm(x), is_causal=True, need_weights=True)
            x = x + out  # the residual stream: each head reads from it and adds to it
            patterns.append(weights)
        return self.head(self.norm_f(x)), patterns


def repeated_sequences(batch_size: int, half: int, vocab_size: int, rng: np.random.Generator) -> np.ndarray:
    """(B, 2 * half) token ids: ``half`` random tokens, then the same ones again."""
    first = rng.integers(0, vocab_size, size=(batch_size, half))
    return np.concatenate([first, first], axis=1)


def loss_by_half(logits: mg.Tensor, seq: np.ndarray) -> tuple[mg.Tensor, float, float]:
    """The training loss and the mean loss on each half.

    Position t predicts token t + 1. "First half": the targets at positions
    1 .. L-1 (random, unpredictable). "Repeated half": the targets at
    L+1 .. 2L-1, whose current token occurred before, so an induction head
    can find them. (Target L, the start of the copy, is predictable from its
    position alone and belongs to neither.)
    """
    B, T = seq.shape
    half = T // 2
    per_position = F.cross_entropy(logits[:, :-1].reshape(B * (T - 1), -1), seq[:, 1:].reshape(-1),
                                   reduction="none").reshape(B, T - 1)  # [:, t]: the loss of predicting token t+1
    first = per_position.data[:, :half - 1].mean()
    repeated = per_position.data[:, half:].mean()
    return per_position.mean(), float(first), float(repeated)


def induction_scores(weights: np.ndarray) -> np.ndarray:
    """Per head: mean attention from each second-half position t to t - L + 1. weights (B, H, T, T) -> (H,)."""
    T = weights.shape[-1]
    half = T // 2
    t = np.arange(half, T)
    return weights[:, :, t, t - half + 1].mean(axis=(0, 2))


def previous_token_scores(weights: np.ndarray) -> np.ndarray:
    """Per head: mean attention from each position t >= 1 to t - 1. weights (B, H, T, T) -> (H,)."""
    t = np.arange(1, weights.shape[-1])
    return weights[:, :, t, t - 1].mean(axis=(0, 2))


def parse_args(argv) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m demos.induction_heads",
                                     description="Train a 2-layer attention-only transformer on repeated random "
                                                 "sequences and watch an induction head form.")
    add = parser.add_argument
    add("--steps", type=int, default=1000, help="training steps (%(default)s)")
    add("--batch-size", type=int, default=32, help="sequences per step (%(default)s)")
    add("--half", type=int, default=16, help="length L of the random half; sequences are 2L long (%(default)s)")
    add("--vocab-size", type=int, default=48, help="random tokens are drawn from this many (%(default)s)")
    add("--d-model", type=int, default=64, help="width of the residual stream (%(default)s)")
    add("--n-head", type=int, default=4, help="attention heads per layer (%(default)s)")
    add("--lr", type=float, default=3e-3, help="peak learning rate (%(default)s)")
    add("--eval-every", type=int, default=25, help="measure losses and head scores every N steps (%(default)s)")
    add("--seed", type=int, default=0, help="seed of the weights and the data (%(default)s)")
    add("--out", type=Path, default=Path("out") / "induction_heads", help="folder for the picture (%(default)s)")
    add("--quiet", action="store_true", help="print only the summary")
    args = parser.parse_args(argv)
    check_model_sizes(parser, args, ("steps", "batch_size", "half", "vocab_size", "d_model", "n_head", "eval_every"),
                      minimum={"half": 3})
    return args


def main(argv=None) -> dict:
    args = parse_args(argv)
    set_threads()  # BLAS threads: timed on the first steps, the quickest kept (demos/_common.py)
    rng = np.random.default_rng(args.seed)
    lengths = np.arange(args.half // 2, 3 * args.half // 2 + 1)  # training halves vary: see the module docstring
    model = AttentionOnlyTransformer(args.vocab_size, 2 * lengths[-1], args.d_model, args.n_head, n_layer=2, rng=rng)
    optimizer = optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    scheduler = optim.WarmupCosineLR(optimizer, warmup_steps=min(50, args.steps // 10), total_steps=args.steps,
                                     min_lr_ratio=0.1)
    eval_seq = repeated_sequences(256, args.half, args.vocab_size, np.random.default_rng([args.seed, 1]))
    say = (lambda *a, **k: None) if args.quiet else print
    say(f"2-layer attention-only transformer, {model.num_parameters():,} parameters; sequences of {args.half} "
        f"random tokens (of {args.vocab_size}) repeated once")
    say(f"chance level: ln({args.vocab_size}) = {math.log(args.vocab_size):.2f} nats per token\n")
    say("loss on each half in nats per token (cross-entropy); induction score: the best layer-2 head's mean "
        "attention to the token after the previous occurrence (0 to 1)")
    say(f"{'step':>6} {'first half':>11} {'repeated half':>14} {'induction score':>16}")

    history = {"step": [], "first": [], "repeated": [], "induction": []}
    started = time.perf_counter()
    for step in range(args.steps + 1):
        if step % args.eval_every == 0 or step == args.steps:
            with mg.no_grad():
                logits, patterns = model(eval_seq)
                _, first, repeated = loss_by_half(logits, eval_seq)
            score = float(induction_scores(patterns[1].data).max())
            for key, value in zip(history, (step, first, repeated, score)):
                history[key].append(value)
            if step % (args.eval_every * 4) == 0 or step == args.steps:
                say(f"{step:>6} {first:>11.3f} {repeated:>14.3f} {score:>16.2f}")
        if step == args.steps:
            break
        seq = repeated_sequences(args.batch_size, int(rng.choice(lengths)), args.vocab_size, rng)
        logits, _ = model(seq)
        loss, _, _ = loss_by_half(logits, seq)
        optimizer.zero_grad()
        loss.backward()
        optim.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
    seconds = time.perf_counter() - started

    with mg.no_grad():
        _, patterns = model(eval_seq)
    layer1, layer2 = patterns[0].data, patterns[1].data
    ind, prev = induction_scores(layer2), previous_token_scores(layer1)
    ind_head, prev_head = int(ind.argmax()), int(prev.argmax())
    onset = next((s for s, r in zip(history["step"], history["repeated"]) if r < 0.5 * history["first"][0]), None)
    print(f"after {args.steps} steps ({seconds:.0f} s): loss {history['first'][-1]:.2f} nats per token on the random "
          f"half, {history['repeated'][-1]:.2f} on the repeated half (chance: {math.log(args.vocab_size):.2f})")
    print(f"induction head: layer 2, head {ind_head} (induction score {ind[ind_head]:.2f}; all layer-2 heads: "
          f"{', '.join(f'{s:.2f}' for s in ind)})")
    print(f"previous-token head: layer 1, head {prev_head} (score {prev[prev_head]:.2f}; all layer-1 heads: "
          f"{', '.join(f'{s:.2f}' for s in prev)})")
    if onset is not None:
        print(f"the repeated half's loss fell below half the chance level at step {onset}")
    picture = plot(history, eval_seq[0], layer2[0, ind_head], layer1[0, prev_head], ind_head, prev_head, args)
    if picture:
        print(f"picture: {picture}")
    return {"history": history, "induction_scores": ind, "previous_token_scores": prev, "induction_head": ind_head,
            "previous_token_head": prev_head, "onset": onset, "picture": picture, "seconds": seconds}


def plot(history: dict, seq: np.ndarray, induction: np.ndarray, previous: np.ndarray, ind_head: int,
         prev_head: int, args) -> Path | None:
    plt = pyplot()
    if plt is None:
        return None
    fig = plt.figure(figsize=(15, 4.8))
    grid = fig.add_gridspec(1, 3, width_ratios=[1.25, 1, 1], wspace=0.3)

    ax = fig.add_subplot(grid[0])
    ax.plot(history["step"], history["first"], color="tab:gray", linewidth=2, label="random first half")
    ax.plot(history["step"], history["repeated"], color="tab:blue", linewidth=2, label="repeated second half")
    ax.axhline(math.log(args.vocab_size), color="tab:gray", linestyle=":", linewidth=1,
               label=f"chance, ln {args.vocab_size}")
    ax.set_xlabel("training step")
    ax.set_ylabel("loss (nats per token)")
    ax.set_ylim(bottom=0)
    score_ax = ax.twinx()
    score_ax.plot(history["step"], history["induction"], color="tab:red", linewidth=1.5, linestyle="--",
                  label="induction score (best layer-2 head)")
    score_ax.set_ylabel("induction score", color="tab:red")
    score_ax.set_ylim(0, 1.02)
    score_ax.tick_params(axis="y", colors="tab:red")
    lines = ax.get_legend_handles_labels()
    more = score_ax.get_legend_handles_labels()
    ax.legend(lines[0] + more[0], lines[1] + more[1], loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2,
              fontsize=8.5, frameon=False)
    ax.set_title("loss on each half, and the induction score")

    T, half = len(seq), len(seq) // 2
    for position, weights, title in ((grid[1], induction, f"layer 2, head {ind_head}: induction head"),
                                     (grid[2], previous, f"layer 1, head {prev_head}: previous-token head")):
        ax = fig.add_subplot(position)
        ax.imshow(weights, cmap="viridis", vmin=0, vmax=1)
        ticks, labels = np.arange(T), [str(t) for t in seq]
        ax.set_xticks(ticks, labels, fontsize=5.5, rotation=90)
        ax.set_yticks(ticks, labels, fontsize=5.5)
        ax.axhline(half - 0.5, color="white", linewidth=0.8, alpha=0.7)
        ax.axvline(half - 0.5, color="white", linewidth=0.8, alpha=0.7)
        ax.set_xlabel("key: the token attended to")
        ax.set_ylabel("query: the current token")
        ax.set_title(title, fontsize=10)
    fig.suptitle(f"An induction head forms: {args.half} random tokens, then the same tokens again "
                 f"(2-layer attention-only transformer)", fontsize=12)
    return save_figure(fig, args.out / "induction_heads.png")


if __name__ == "__main__":
    main()
