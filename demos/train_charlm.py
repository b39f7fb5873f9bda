"""Train a language model on real text: a GPT (or an LSTM, or a plain RNN) on minigrad, on characters or BPE.

    python -m demos.train_charlm                       # a small GPT on the standard library's docstrings
    python -m demos.train_charlm --tokenizer bpe       # the same GPT on byte-level BPE tokens (2048)
    python -m demos.train_charlm --model lstm          # the same data, an LSTM
    python -m demos.train_charlm --text my_book.txt    # any UTF-8 text file instead
    python -m demos.train_charlm --grad-accum 4        # 4 micro-batches a step: a 4x batch in 1x memory
    python -m demos.train_charlm --resume runs/charlm-gpt-20250101-120000 [--steps 3000]
    python -m demos.sample runs/charlm-gpt-20250101-120000 --prompt "Return the"

With ``--tokenizer char`` (the default) every character of the text is a
token; with ``--tokenizer bpe`` the tokens are byte-level BPE merges
(``models/tokenizer.py``) learned from the training text, ~3 bytes each. The
model reads ``block_size`` tokens and predicts, at every position, the next
one; the loss is the cross-entropy of those predictions. Losses per token are
not comparable across tokenizers (a BPE token carries more text), so every
loss is also reported in bits per byte of text: loss / ln 2 x tokens per byte
(of the split it is measured on). The number to beat is the *unigram
baseline*: what a model that knows only how often each token occurs achieves.

The training loop is the standard one (nanoGPT's, written out), and it comes
first in this file: random windows of the training text from a seeded NumPy
Generator, AdamW (weight decay on the matrices only), a linear warmup then a
cosine decay of the learning rate, and the gradient clipped to a global norm
of 1. Unless ``--warmup-steps`` is given, the warmup is the model's default
(GPT 60 steps) or a tenth of ``--steps``, whichever is shorter, so ``--steps
60`` alone works. The default GPT (``models.GPT``: d_model 128, 4 heads,
rotary positions, 64 characters of context) and why it was chosen: the
README's main-demo section.

``--grad-accum N`` splits each step's batch (N x ``--batch-size`` windows, drawn
at once) into N micro-batches whose gradients add up in ``.grad``; each
micro-batch's loss is scaled by 1/N first, so the clip and the update see the
whole batch's mean gradient, exactly as without accumulation. The validation
batches are drawn the same way (N x ``--batch-size`` windows, evaluated N
micro-batches at a time), so the validation loss too is the one of the run
with an N times larger ``--batch-size``.

Everything a run keeps (config, tokenizer, checkpoint, metrics, plot,
samples) goes to its folder, written and read by ``demos/charlm_run.py``.
``--resume RUN_DIR`` continues from the checkpoint, exactly: a run stopped
(``--stop-after N`` or Ctrl-C) and resumed logs the losses of a run that
never stopped. ``--resume RUN_DIR --steps N`` moves the end of a run.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import shlex
import signal
import sys
import time
from pathlib import Path

import numpy as np

import minigrad as mg
from demos import charlm_data as data
from demos._common import python_command, set_threads
from demos.charlm_run import (
    CHECKPOINT,
    EXTENDABLE,
    HYPERPARAMETERS,
    LN2,
    MODEL_DEFAULTS,
    PROG,
    Run,
    TrainConfig,
    UsageError,
    append_sample,
    check_config,
    example_prompt,
    new_run,
    plot_losses,
    resume_run,
    save_checkpoint,
    write_metrics,
)
from minigrad import optim
from models.tokenizer import TokenizerError

# --------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------


def accumulate_gradients(model, x: np.ndarray, y: np.ndarray, micro_batches: int) -> float:
    """Fill each parameter's ``.grad`` with the gradient of the mean loss over the whole batch (x, y) (B, T),
    computed ``micro_batches`` windows-slices at a time; returns that mean loss (nats per token).

    Each micro-batch's mean loss is scaled by its share of the batch (1 / micro_batches for equal
    slices) before its backward pass, so the gradients the passes add up in ``.grad`` are the
    full batch's gradient, not ``micro_batches`` times it. That matters for the clip that follows:
    it compares this gradient's norm with ``--grad-clip``. A returned loss that is not finite means
    the gradients are not to be used (some micro-batches may not have run).
    """
    model.zero_grad()
    total = 0.0
    for xs, ys in zip(np.array_split(x, micro_batches), np.array_split(y, micro_batches)):  # (B / N, T) each
        _, loss = model(xs, ys)
        share = len(xs) / len(x)
        total += loss.item() * share
        if not math.isfinite(total):
            return total
        (loss * share).backward()  # adds this micro-batch's part of the batch gradient into .grad
    return total


def train_step(run: Run, x: np.ndarray, y: np.ndarray) -> float:
    """One optimizer step on the batch (x, y), in ``grad_accum`` micro-batches; returns its loss (nats/token).

    A loss that is not finite is returned before any update, leaving the weights as they were.
    """
    loss = accumulate_gradients(run.model, x, y, run.cfg.grad_accum)
    if not math.isfinite(loss):
        return loss
    optim.clip_grad_norm_(run.model.parameters(), run.cfg.grad_clip)  # the norm of the whole batch's gradient
    run.updating = True  # from here until the end of the step the weights are half-updated
    run.optimizer.step()
    run.scheduler.step()
    run.updating = False
    return loss


@mg.no_grad()
def evaluate(model, batches, micro_batches: int = 1) -> float:
    """Mean loss over fixed validation batches, each run ``micro_batches`` equal slices at a time (the memory
    of one micro-batch), in eval mode (no dropout). Equal slices: the mean of their means is the batch's mean."""
    model.eval()
    try:
        return float(np.mean([model(xs, ys)[1].item() for x, y in batches
                              for xs, ys in zip(np.split(x, micro_batches), np.split(y, micro_batches))]))
    finally:
        model.train()


def sample_text(run: Run, n_chars: int, temperature: float, seed) -> str:
    """A continuation of a newline (or of the text's first character when it has no newlines)."""
    tok = run.tokenizer
    prompt = "\n" if tok.can_encode("\n") else run.corpus.text[0]
    prompt_ids = tok.encode(prompt)
    out = run.model.generate(prompt_ids[None], n_chars, temperature=temperature, rng=np.random.default_rng(seed))
    return tok.decode(out[0, len(prompt_ids):])


def train(run: Run, stop_after: int | None, quiet: bool) -> str:
    """Run the loop until the last step, ``stop_after`` more steps, or Ctrl-C. Returns why it stopped."""
    cfg = run.cfg
    end = cfg.steps if stop_after is None else min(cfg.steps, run.step + stop_after)
    eval_rng = np.random.default_rng([cfg.seed, 1])  # the same validation batches at every evaluation
    # Drawn as the training batches are (batch_size x grad_accum windows): --grad-accum changes the memory an
    # evaluation needs, not the windows it sees.
    val_batches = [data.get_batch(run.val_ids, cfg.batch_size * cfg.grad_accum, cfg.block_size, eval_rng)
                   for _ in range(cfg.eval_batches)]
    bar = progress_bar(cfg.steps, run.step, quiet)

    def log(line: str) -> None:
        (bar.write if bar is not None else print)(line)

    tokens_per_step = cfg.batch_size * cfg.grad_accum * cfg.block_size
    window_start, window_steps = time.perf_counter(), 0
    since_eval: list[float] = []
    stopped = "finished"
    with DeferredInterrupt() as interrupt:
        while run.step < end:
            if interrupt.requested:
                stopped = "interrupted"
                break
            rng_state = run.rng.bit_generator.state  # to undo this step's draws if it is interrupted
            started = time.perf_counter()
            try:
                x, y = data.get_batch(run.train_ids, cfg.batch_size * cfg.grad_accum, cfg.block_size, run.rng)
                loss = train_step(run, x, y)
            except KeyboardInterrupt:
                # Interrupted mid-step (no signal handler, or a second Ctrl-C). Before the update the step
                # can be undone (the weights are untouched); during it, what is in memory is not worth saving.
                stopped = "aborted" if run.updating else "interrupted"
                run.rng.bit_generator.state = rng_state
                break
            if not math.isfinite(loss):
                log(f"step {run.step + 1}: the loss is {loss}; stopping before the update (try a lower --lr)")
                run.rng.bit_generator.state = rng_state
                stopped = "diverged"
                break
            run.seconds += time.perf_counter() - started
            run.step += 1
            run.train_losses.append(loss)
            since_eval.append(loss)
            window_steps += 1
            if bar is not None:
                elapsed = time.perf_counter() - window_start
                bar.set_postfix_str(f"loss {run.train_bpb(loss):.2f} bits/byte, "
                                    f"{window_steps * tokens_per_step / elapsed:,.0f} tok/s")
                bar.update(1)
                if elapsed > 10:  # tokens/s over the last ten seconds or so
                    window_start, window_steps = time.perf_counter(), 0

            last = run.step == cfg.steps
            if run.step % cfg.eval_every == 0 or last:
                val = evaluate(run.model, val_batches, cfg.grad_accum)
                run.val_losses.append([run.step, val])
                log(f"step {run.step:>5}/{cfg.steps} | train loss {run.train_bpb(np.mean(since_eval)):.2f} bits/byte "
                    f"(mean since the last evaluation) | val loss {run.val_bpb(val):.2f} bits/byte, "
                    f"{val / LN2:.2f} bits/token | "
                    f"lr {run.scheduler.get_last_lr()[0]:.2e} | "
                    f"{tokens_per_step * run.step / max(run.seconds, 1e-9):,.0f} tok/s")
                since_eval = []
                save_checkpoint(run)
            if cfg.sample_every and (run.step % cfg.sample_every == 0 or last):
                text = sample_text(run, cfg.sample_chars, cfg.temperature, seed=[cfg.seed, run.step])
                append_sample(run, text)
                if not quiet:
                    log(f"--- sample at step {run.step} (temperature {cfg.temperature}) ---\n{text}\n---")
        else:
            stopped = "finished" if run.step == cfg.steps else "paused"
    if bar is not None:
        bar.close()
    if stopped == "aborted" or (stopped == "finished" and run.val_losses and run.val_losses[-1][0] == run.step):
        return stopped  # aborted: nothing worth saving; finished: the last evaluation saved the checkpoint
    save_checkpoint(run)
    return stopped



class DeferredInterrupt:
    """Within this block the first Ctrl-C only sets ``requested``; the loop finishes its step, saves and stops.

    A second Ctrl-C interrupts at once. (Outside the main thread, where signal
    handlers cannot be installed, Ctrl-C raises KeyboardInterrupt as usual.)
    """

    def __init__(self):
        self.requested = False
        self._previous = None

    def _handler(self, signum, frame):
        self.requested = True
        signal.signal(signal.SIGINT, self._previous)  # a second Ctrl-C: the usual KeyboardInterrupt

    def __enter__(self):
        try:
            self._previous = signal.signal(signal.SIGINT, self._handler)
        except ValueError:  # not the main thread
            self._previous = None
        return self

    def __exit__(self, *exc):
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
        return False



def progress_bar(total: int, initial: int, quiet: bool):
    if quiet:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        print("(tqdm is not installed: no progress bar; pip install tqdm)")
        return None
    # disable=None: no bar when stderr is not a terminal (a log file gets the evaluation lines, not 1,000 redraws).
    return tqdm(total=total, initial=initial, desc="training", unit="step", dynamic_ncols=True, disable=None)



# --------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Train a character-level language model (GPT, LSTM or RNN) on minigrad.",
        epilog="Defaults: a 2-layer GPT (d_model 128, 4 heads, rotary positions, 64 characters of context), "
               "1600 steps of 16 windows on the standard library's docstrings, one token per character. Losses "
               "are shown in bits per byte of text (comparable across tokenizers) and in bits per token.")
    add = parser.add_argument
    add("--model", choices=sorted(MODEL_DEFAULTS), help="the network (default: gpt)")
    add("--out", type=Path, metavar="DIR", help="run folder (default: runs/charlm-<model>-<date>-<time>)")
    add("--resume", type=Path, metavar="RUN_DIR", help="continue the run saved in RUN_DIR")
    add("--stop-after", type=int, metavar="N", help="stop (and save) after N more steps; continue with --resume")
    add("--quiet", action="store_true", help="no progress bar and no samples while training: evaluation lines only")

    group = parser.add_argument_group("data")
    group.add_argument("--text", type=Path, metavar="FILE",
                       help="train on this UTF-8 text file (default: the standard library's docstrings)")
    group.add_argument("--corpus-bytes", type=int, metavar="N", help="size cap of the docstring corpus (1000000)")
    group.add_argument("--val-fraction", type=float, metavar="F", help="share of the text held out (0.1)")
    group.add_argument("--tokenizer", choices=["char", "bpe"],
                       help="char: one token per character; bpe: byte-level BPE trained on the training split "
                            "(default: char)")
    group.add_argument("--vocab-size", type=int, metavar="N",
                       help="BPE vocabulary: 256 bytes + merges + <|endoftext|> (2048)")

    group = parser.add_argument_group("model")
    group.add_argument("--block-size", type=int, metavar="T", help="tokens of context (64)")
    group.add_argument("--n-layer", type=int, metavar="N", help="layers (GPT 2, LSTM/RNN 1)")
    group.add_argument("--n-head", type=int, metavar="N", help="attention heads of the GPT (4)")
    group.add_argument("--d-model", type=int, metavar="D", help="GPT width (128); LSTM/RNN embedding width (64)")
    group.add_argument("--hidden-size", type=int, metavar="H", help="LSTM/RNN state size (256)")
    group.add_argument("--position", choices=["learned", "sinusoidal", "rope"],
                       help="GPT position information (rope)")
    group.add_argument("--dropout", type=float, metavar="P", help="dropout probability (0)")

    group = parser.add_argument_group("optimisation")
    group.add_argument("--steps", type=int, metavar="N",
                       help="optimizer steps in all (GPT 1600, LSTM 1000, RNN 3000); with --resume: extend the run")
    group.add_argument("--batch-size", type=int, metavar="B", help="windows per micro-batch (16)")
    group.add_argument("--grad-accum", type=int, metavar="N",
                       help="micro-batches per step, gradients summed: N x B windows per step in B's memory (1)")
    group.add_argument("--lr", type=float, help="peak learning rate (GPT 3e-3, LSTM 4e-3, RNN 2e-3)")
    group.add_argument("--min-lr-ratio", type=float, metavar="R", help="final lr as a fraction of the peak (0.1)")
    group.add_argument("--warmup-steps", type=int, metavar="N",
                       help="linear warmup steps (GPT 60, LSTM 40, RNN 50, or a tenth of --steps if that is fewer)")
    group.add_argument("--weight-decay", type=float, metavar="W", help="AdamW weight decay on matrices (0.1)")
    group.add_argument("--grad-clip", type=float, metavar="NORM", help="clip the gradient's global norm (1.0)")
    group.add_argument("--seed", type=int, help="seed of the weights, the batches and dropout (0)")

    group = parser.add_argument_group("evaluation and samples")
    group.add_argument("--eval-every", type=int, metavar="N", help="evaluate every N steps (200; RNN 300)")
    group.add_argument("--eval-batches", type=int, metavar="N", help="validation batches per evaluation (8)")
    group.add_argument("--sample-every", type=int, metavar="N",
                       help="print a sample every N steps (GPT 400, LSTM 500, RNN 1000; 0: never)")
    group.add_argument("--sample-chars", type=int, metavar="N", help="characters per sample (240)")
    group.add_argument("--temperature", type=float, help="sampling temperature of the samples (0.8)")
    return parser


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """A new run's TrainConfig: the model's defaults, overridden by whatever was given on the command line."""
    model = args.model or "gpt"
    values = {**dataclasses.asdict(TrainConfig()), **MODEL_DEFAULTS[model], "model": model}
    values.update({k: getattr(args, k) for k in HYPERPARAMETERS if getattr(args, k, None) is not None})
    if args.warmup_steps is None:  # the default warmup shrinks with a short run, so --steps alone always works
        values["warmup_steps"] = min(values["warmup_steps"], values["steps"] // 10)
    if args.vocab_size is not None and values["tokenizer"] != "bpe":
        raise UsageError("--vocab-size sets the size of a BPE vocabulary; give it with --tokenizer bpe")
    if values["text"] is not None:
        values["text"] = str(values["text"])
    cfg = TrainConfig(**values)
    check_config(cfg)
    return cfg



# --------------------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> dict:
    """Train (or resume) a run; returns its metrics. Bad input: a one-line error and SystemExit(2)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    set_threads(prog=PROG)  # BLAS threads: measured on the first steps (demos/_common.py, minigrad/kernels/policy.py)
    try:
        if args.stop_after is not None and args.stop_after < 1:
            raise UsageError(f"--stop-after must be at least 1, got {args.stop_after}")
        if args.resume is not None:
            given = [f"--{k.replace('_', '-')}" for k in [*HYPERPARAMETERS, "out"]
                     if k not in EXTENDABLE and getattr(args, k, None) is not None]
            if given:
                raise UsageError(f"--resume continues a run with its saved settings; drop {', '.join(given)} "
                                 f"(only --steps, --stop-after and --quiet may be given with --resume)")
            if args.steps is not None and args.steps < 1:
                raise UsageError(f"--steps must be at least 1, got {args.steps}")
            run = resume_run(args.resume, args.steps)
        else:
            run = new_run(config_from_args(args), args.out, argv)
    except (UsageError, data.DataError, TokenizerError) as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    except MemoryError as err:  # settings too large for this machine (a --batch-size of a billion windows)
        print(f"{PROG}: error: not enough memory for these settings ({err}); give a smaller --batch-size, "
              f"--d-model, --n-layer, --vocab-size or --block-size", file=sys.stderr)
        raise SystemExit(2) from None
    cfg = run.cfg
    python = python_command()
    folder = shlex.quote(str(run.folder))
    print(f"data:  {run.corpus.description}")
    if cfg.tokenizer == "char":
        print(f"       {run.tokenizer.vocab_size} distinct characters, one token each; {len(run.train_ids):,} to "
              f"train on, {len(run.val_ids):,} to validate on")
    else:
        print(f"       byte-level BPE, {run.tokenizer.vocab_size:,} tokens, {1 / run.val_tokens_per_byte:.2f} "
              f"bytes per token; {len(run.train_ids):,} tokens to train on, {len(run.val_ids):,} to validate on")
    print(f"model: {cfg.model.upper()} with {run.model.num_parameters():,} parameters, "
          + (f"{cfg.block_size} tokens of context" if cfg.model == "gpt" else
             f"backpropagation through {cfg.block_size} tokens"))
    windows = f"{cfg.batch_size} windows" if cfg.grad_accum == 1 else \
        f"{cfg.grad_accum} micro-batches of {cfg.batch_size} windows"
    decay = cfg.decay_steps or cfg.steps
    print(f"train: {cfg.steps} steps of {windows}, AdamW lr {cfg.lr:g} (warmup {cfg.warmup_steps}, cosine to "
          f"{cfg.lr * cfg.min_lr_ratio:g}" + (f" by step {decay}, then constant" if decay != cfg.steps else "")
          + f"), clip {cfg.grad_clip:g}")
    if run.step:
        print(f"resuming {run.folder} at step {run.step}")
    print(f"unigram baseline: {run.unigram_bpb:.2f} bits/byte, {run.unigram_bits_per_token:.2f} bits/token "
          f"(a model that knows only token frequencies)")

    try:
        stopped = train(run, args.stop_after, args.quiet)
    except MemoryError as err:
        print(f"{PROG}: error: ran out of memory at step {run.step + 1} ({err}); the checkpoint in {run.folder} "
              f"holds the last evaluation. Give a smaller --eval-batches, --batch-size or --sample-chars, or "
              f"--grad-accum N to take each step in N parts", file=sys.stderr)
        raise SystemExit(2) from None
    if stopped == "aborted":
        print(f"interrupted during a weight update: nothing saved; the checkpoint in {run.folder} holds the "
              f"last evaluation. Continue with: {python} -m demos.train_charlm --resume {folder}")
        return {"stopped": stopped, "step": run.step}
    metrics = write_metrics(run, stopped)
    picture = plot_losses(run, run.folder / "loss_curve.png")

    if metrics["final_val_bpb"] is not None:
        print(f"validation: {metrics['final_val_bpb']:.2f} bits/byte ({metrics['final_val_bits_per_token']:.2f} "
              f"bits/token) at step {metrics['final_val_step']} (unigram baseline {run.unigram_bpb:.2f} bits/byte); "
              f"{run.seconds:.0f} s of training")
    if stopped == "finished":
        print(f"finished {run.step} steps; train on with: {python} -m demos.train_charlm --resume {folder} "
              f"--steps {2 * run.step}")
    else:
        if stopped == "diverged":
            print(f"the loss diverged at step {run.step + 1}; start again with a lower --lr")
        else:
            why = "interrupted" if stopped == "interrupted" else "stopped as asked"
            print(f"{why} at step {run.step}/{cfg.steps}; continue with: {python} -m demos.train_charlm "
                  f"--resume {folder}")
    print(f"run folder: {run.folder}")
    print(f"  checkpoint  {run.folder / CHECKPOINT}  (step {run.step})")
    print(f"  config      {run.folder / 'config.json'}, tokenizer {run.folder / 'tokenizer.json'}")
    print(f"  losses      {run.folder / 'metrics.json'}" + (f", plot {picture}" if picture else ""))
    print(f"  samples     {run.folder / 'samples.txt'}")
    print(f"sample more:  {python} -m demos.sample {folder} --prompt {shlex.quote(example_prompt(run))}")
    return metrics


def cli() -> int:
    metrics = main()
    codes = {"interrupted": 130, "aborted": 130, "diverged": 1}  # 130: the shell's code for Ctrl-C
    return codes.get(metrics["stopped"], 0)


if __name__ == "__main__":
    raise SystemExit(cli())
