"""An encoder-decoder transformer learns to reverse (or sort) a string of digits; plot where it looks.

    python -m demos.seq2seq [--task reverse|sort] [--steps N] [--out DIR]

The model is ``models.seq2seq.Seq2Seq``, the original transformer of
"Attention Is All You Need" at toy size: the encoder reads the digits, the
decoder writes the answer one digit at a time, and at every step its
*cross-attention* looks back at the encoder's output to decide which input
digit to copy next. ::

    source   3 1 4 1 5 9             (3 to 10 digits)
    target   9 5 1 4 1 3 <eos>       (reverse)   or   1 1 3 4 5 9 <eos>   (sort)

Training uses teacher forcing: the decoder reads the true answer shifted right
(``<bos> 9 5 1 4 1 3``) and learns to predict every next token at once.
Testing uses greedy decoding, where the decoder only has its own output to go
on; a string counts as right only if every digit and the end marker are right
(*exact match*), on strings held out from training.

For reversal the cross-attention map is an anti-diagonal: output digit i looks
at input digit n - 1 - i. That map, for one held-out string, is drawn to
``seq2seq_cross_attention.png`` with the training curve.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

import minigrad as mg
from demos._common import check_model_sizes, pyplot, save_figure, set_threads
from minigrad import optim
from models.seq2seq import Seq2Seq, Seq2SeqConfig

PAD, BOS, EOS = 0, 1, 2  # special tokens; digit d is token d + 3
VOCAB_SIZE = 13


def digits_to_tokens(digits) -> list[int]:
    return [d + 3 for d in digits]


def tokens_to_text(tokens) -> str:
    names = {PAD: "", BOS: "<bos>", EOS: "<eos>"}
    return " ".join(names.get(int(t), str(int(t) - 3)) for t in tokens if int(t) != PAD)


def solve(digits: tuple, task: str) -> tuple:
    return tuple(reversed(digits)) if task == "reverse" else tuple(sorted(digits))


def random_strings(n: int, min_len: int, max_len: int, rng: np.random.Generator, exclude=frozenset()) -> list:
    """``n`` random digit strings (tuples) of random lengths, none of them in ``exclude``."""
    strings = []
    while len(strings) < n:
        s = tuple(int(d) for d in rng.integers(0, 10, size=int(rng.integers(min_len, max_len + 1))))
        if s not in exclude:
            strings.append(s)
    return strings


def make_batch(strings: list, task: str, max_len: int):
    """Padded arrays: src (B, max_len), tgt_in (B, max_len + 1) = <bos> answer, tgt_out = answer <eos>."""
    B = len(strings)
    src = np.full((B, max_len), PAD, dtype=np.int64)
    tgt_in = np.full((B, max_len + 1), PAD, dtype=np.int64)
    tgt_out = np.full((B, max_len + 1), PAD, dtype=np.int64)
    for i, s in enumerate(strings):
        answer = digits_to_tokens(solve(s, task))
        src[i, :len(s)] = digits_to_tokens(s)
        tgt_in[i, :len(s) + 1] = [BOS, *answer]
        tgt_out[i, :len(s) + 1] = [*answer, EOS]
    return src, tgt_in, tgt_out


def exact_match(model: Seq2Seq, strings: list, task: str, max_len: int) -> tuple[float, np.ndarray, np.ndarray]:
    """Share of strings whose greedy decoding is exactly the answer and <eos>; also the decodings and hits."""
    src, _, tgt_out = make_batch(strings, task, max_len)
    decoded = model.greedy_decode(src, max_new_tokens=max_len + 1)  # PAD after <eos>; shorter once all have ended
    decoded = np.pad(decoded, ((0, 0), (0, max_len + 1 - decoded.shape[1])), constant_values=PAD)
    hits = (decoded == tgt_out).all(axis=1)
    return float(hits.mean()), decoded, hits


def parse_args(argv) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m demos.seq2seq",
                                     description="Train an encoder-decoder transformer to reverse or sort digits.")
    add = parser.add_argument
    add("--task", choices=["reverse", "sort"], default="reverse", help="what to learn (%(default)s)")
    add("--steps", type=int, default=600, help="training steps (%(default)s)")
    add("--batch-size", type=int, default=64, help="strings per step (%(default)s)")
    add("--min-len", type=int, default=3, help="shortest string (%(default)s)")
    add("--max-len", type=int, default=10, help="longest string (%(default)s)")
    add("--d-model", type=int, default=64, help="model width (%(default)s)")
    add("--n-layer", type=int, default=2, help="encoder layers, and as many decoder layers (%(default)s)")
    add("--n-head", type=int, default=4, help="attention heads (%(default)s)")
    add("--lr", type=float, default=2e-3, help="peak learning rate (%(default)s)")
    add("--test-size", type=int, default=500, help="held-out strings for the exact-match test (%(default)s)")
    add("--eval-every", type=int, default=100, help="test every N steps (%(default)s)")
    add("--seed", type=int, default=0, help="seed of the weights and the data (%(default)s)")
    add("--out", type=Path, default=Path("out") / "seq2seq", help="folder for the picture (%(default)s)")
    add("--quiet", action="store_true", help="print only the summary")
    args = parser.parse_args(argv)
    check_model_sizes(parser, args, ("steps", "batch_size", "min_len", "d_model", "n_layer", "n_head", "test_size",
                                     "eval_every"))
    if args.max_len < args.min_len:
        parser.error(f"--max-len {args.max_len} is shorter than --min-len {args.min_len}")
    return args


def main(argv=None) -> dict:
    args = parse_args(argv)
    set_threads()  # BLAS threads: timed on the first steps, the quickest kept (demos/_common.py)
    rng = np.random.default_rng(args.seed)
    config = Seq2SeqConfig(src_vocab_size=VOCAB_SIZE, tgt_vocab_size=VOCAB_SIZE, block_size=args.max_len + 1,
                           n_layer=args.n_layer, n_head=args.n_head, d_model=args.d_model, pad_id=PAD, bos_id=BOS,
                           eos_id=EOS)
    model = Seq2Seq(config, rng=rng)
    optimizer = optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0, betas=(0.9, 0.98))
    # Post-norm transformers need a warmup (the paper's schedule has one); then a cosine decay.
    scheduler = optim.WarmupCosineLR(optimizer, warmup_steps=min(100, args.steps // 5), total_steps=args.steps,
                                     min_lr_ratio=0.05)
    test = random_strings(args.test_size, args.min_len, args.max_len, np.random.default_rng([args.seed, 1]))
    held_out = frozenset(test)
    say = (lambda *a, **k: None) if args.quiet else print
    say(f"task: {args.task} strings of {args.min_len}-{args.max_len} digits; encoder-decoder transformer "
        f"({args.n_layer}+{args.n_layer} layers, d_model {args.d_model}), {model.num_parameters():,} parameters")
    say(f"{args.test_size} held-out strings, never seen in training\n")
    say("train loss: cross-entropy in nats per output token (teacher forcing), mean since the last test; "
        "exact match: share of held-out strings decoded exactly right")
    say(f"{'step':>6} {'train loss':>11} {'exact match':>12}")

    history = {"step": [], "loss": [], "accuracy": []}
    losses = []
    started = time.perf_counter()
    for step in range(1, args.steps + 1):
        strings = random_strings(args.batch_size, args.min_len, args.max_len, rng, exclude=held_out)
        src, tgt_in, tgt_out = make_batch(strings, args.task, args.max_len)
        _, loss = model(src, tgt_in, tgt_out)
        optimizer.zero_grad()
        loss.backward()
        optim.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
        if step % args.eval_every == 0 or step == args.steps:
            accuracy = exact_match(model, test, args.task, args.max_len)[0]
            history["step"].append(step)
            history["loss"].append(float(np.mean(losses[-args.eval_every:])))
            history["accuracy"].append(accuracy)
            say(f"{step:>6} {history['loss'][-1]:>11.4f} {accuracy:>11.1%}")
    seconds = time.perf_counter() - started

    accuracy, decoded, hits = exact_match(model, test, args.task, args.max_len)
    lengths = np.array([len(s) for s in test])
    by_length = {int(n): float(hits[lengths == n].mean()) for n in np.unique(lengths)}
    print(f"after {args.steps} steps ({seconds:.0f} s): exact match on {len(test)} held-out strings: {accuracy:.1%}")
    print("  by length: " + ", ".join(f"{n}: {a:.0%}" for n, a in by_length.items()))
    example = max(range(len(test)), key=lambda i: (len(test[i]), hits[i]))  # a long one, right if possible
    print(f"  e.g. {tokens_to_text(digits_to_tokens(test[example]))}  ->  {tokens_to_text(decoded[example])}")
    picture = plot(model, test[example], decoded[example], history, args)
    if picture:
        print(f"picture: {picture}")
    return {"accuracy": accuracy, "by_length": by_length, "history": history, "losses": losses,
            "picture": picture, "seconds": seconds}


def plot(model: Seq2Seq, digits: tuple, decoded: np.ndarray, history: dict, args) -> Path | None:
    plt = pyplot()
    if plt is None:
        return None
    src = np.array([digits_to_tokens(digits)])
    out = [int(t) for t in decoded if int(t) != PAD]  # the decoded answer, up to and with <eos>
    tgt_in = np.array([[BOS, *out[:-1]]])  # what the decoder read at each step
    with mg.no_grad():
        model.eval()
        _, _, cross = model(src, tgt_in, return_attention=True)
        model.train()
    weights = cross[-1].data[0].mean(axis=0)  # (T, S): the last decoder layer, averaged over its heads

    fig, (curve, attn) = plt.subplots(1, 2, figsize=(11.5, 4.6), gridspec_kw={"width_ratios": [1.2, 1]})
    curve.plot(history["step"], history["loss"], color="tab:blue", linewidth=2, marker="o", markersize=3)
    curve.set_yscale("log")
    curve.set_xlabel("training step")
    curve.set_ylabel("training loss (teacher forcing)", color="tab:blue")
    curve.tick_params(axis="y", colors="tab:blue")
    acc = curve.twinx()
    acc.plot(history["step"], np.array(history["accuracy"]) * 100, color="tab:green", linewidth=2, marker="o",
             markersize=3)
    acc.set_ylim(0, 101)
    acc.set_ylabel("exact match on held-out strings (%)", color="tab:green")
    acc.tick_params(axis="y", colors="tab:green")
    curve.set_title(f"learning to {args.task} digit strings")
    curve.grid(alpha=0.3)

    image = attn.imshow(weights, cmap="viridis", vmin=0, vmax=1)
    attn.set_xticks(range(len(digits)), [str(d) for d in digits])
    attn.set_yticks(range(len(out)), [tokens_to_text([t]) for t in out])
    attn.set_xlabel("source digit (encoder)")
    attn.set_ylabel("output token (decoder)")
    attn.set_title("cross-attention, last decoder layer (mean of heads)", fontsize=10)
    fig.colorbar(image, ax=attn, fraction=0.046, pad=0.04)
    fig.tight_layout()
    return save_figure(fig, args.out / "seq2seq_cross_attention.png")


if __name__ == "__main__":
    main()
