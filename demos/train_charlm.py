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
A model that uses context goes well below it; the samples show what it has
learned.

The training loop is the standard one (nanoGPT's, written out): random windows
of the training text from a seeded NumPy Generator, AdamW (weight decay on the
matrices only), a linear warmup then a cosine decay of the learning rate, and
the gradient clipped to a global norm of 1. Unless ``--warmup-steps`` is given,
the warmup is the model's default (GPT 60 steps) or a tenth of ``--steps``,
whichever is shorter, so ``--steps 60`` alone works.

Every loss printed or plotted is in bits per byte (and bits per token);
``metrics.json`` keeps the raw cross-entropy in nats per token, with the
tokens-per-byte ratios that convert it.

``--grad-accum N`` splits each step's batch (N x ``--batch-size`` windows, drawn
at once) into N micro-batches whose gradients add up in ``.grad``; each
micro-batch's loss is scaled by 1/N first, so the clip and the update see the
whole batch's mean gradient, exactly as without accumulation.

The default GPT (``models.GPT``: d_model 128, 4 heads, 64 characters of
context) was chosen by measuring what learns most in a fixed budget of
training time (the README gives the measured time of each default run). Two
things mattered:

* rotary positions (``--position rope``): with learned position embeddings the
  model first sits ~100 steps on a plateau near 3.9 bits/char, unable to tell
  the previous character from any other until it has learned what positions
  are; RoPE builds relative position into attention from the first step;
* depth for time: at equal compute, 2 layers x 1600 steps reached 2.31
  bits/char on the validation text, 3 layers x 1070 steps 2.42, and 4 layers x
  800 steps 2.52. With this little training, more steps beat more layers
  (``--n-layer 4`` is there for longer runs).

Everything a run produces goes to its folder (``runs/charlm-<model>-<time>``
by default; ``runs/`` is ignored by git):

* ``config.json``: the model, training and data settings (and the text's SHA-256);
* ``tokenizer.json``: the character table or the BPE merges, without which the weights mean nothing;
* ``checkpoint.safetensors``: model, optimizer, schedule and random-generator
  state (``minigrad.io``: safetensors, written atomically), saved at every
  evaluation, at the end, and on Ctrl-C;
* ``metrics.json``: every training loss, the validation losses and the final figures;
* ``loss_curve.png``: training and validation loss, in bits per byte;
* ``samples.txt``: the text sampled during training.

``--resume RUN_DIR`` continues from the checkpoint. Because the checkpoint
holds the random generator's state too, a run that is stopped (``--stop-after
N`` or Ctrl-C) and resumed logs exactly the losses of a run that never stopped.
``--resume RUN_DIR --steps N`` moves the end of a run (a finished one too): the
learning-rate schedule keeps its length, so the added steps run at its final
rate (``decay_steps`` in config.json records that length).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import shlex
import shutil
import signal
import sys
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np

import minigrad as mg
from demos import charlm_data as data
from demos._common import pyplot, save_figure, set_threads
from minigrad import io, optim, runtime
from minigrad.files import atomic_write
from models.tokenizer import BPETokenizer, CharTokenizer, TokenizerError, load_tokenizer

PROG = "python -m demos.train_charlm"
RUN_FILES = ("config.json", "tokenizer.json", "checkpoint.safetensors", "metrics.json", "loss_curve.png",
             "samples.txt")
CHECKPOINT = "checkpoint.safetensors"
LN2 = math.log(2.0)


@dataclass
class TrainConfig:
    """Everything that decides what a run computes. Saved as config.json; ``--resume`` reads it back."""

    model: str = "gpt"  # gpt | lstm | rnn
    # data
    text: str | None = None  # a UTF-8 file, or None for the standard library's docstrings
    corpus_bytes: int = data.DEFAULT_MAX_BYTES
    val_fraction: float = 0.1
    tokenizer: str = "char"  # char | bpe
    vocab_size: int = 2048  # BPE only: 256 bytes + merges + <|endoftext|>
    # model
    block_size: int = 64  # tokens of context
    n_layer: int = 2
    n_head: int = 4
    d_model: int = 128  # GPT width; for the recurrent models, the width of the character embedding
    hidden_size: int = 256  # the recurrent models' state (the GPT has none)
    position: str = "rope"  # GPT: rope | learned | sinusoidal
    dropout: float = 0.0
    # optimisation
    steps: int = 1600
    batch_size: int = 16  # windows per micro-batch
    grad_accum: int = 1  # micro-batches per step: each step sees batch_size * grad_accum windows
    lr: float = 3e-3
    min_lr_ratio: float = 0.1  # the cosine decays to lr * min_lr_ratio
    warmup_steps: int = 60
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    seed: int = 0
    decay_steps: int | None = None  # the schedule's length; None: steps (set when --resume extends a run)
    # evaluation and samples
    eval_every: int = 200
    eval_batches: int = 8
    sample_every: int = 400
    sample_chars: int = 240
    temperature: float = 0.8


# Per-model defaults, where they differ from TrainConfig's (which are the GPT's).
MODEL_DEFAULTS = {
    "gpt": {},
    "lstm": {"n_layer": 1, "d_model": 64, "lr": 4e-3, "steps": 1000, "warmup_steps": 40, "sample_every": 500},
    "rnn": {"n_layer": 1, "d_model": 64, "lr": 2e-3, "steps": 3000, "warmup_steps": 50, "eval_every": 300,
            "sample_every": 1000},
}

# Options that change what a run computes: fixed once the run exists, so --resume refuses them (all but --steps,
# which may extend a run).
HYPERPARAMETERS = [f.name for f in dataclasses.fields(TrainConfig)]
EXTENDABLE = ["steps"]


class UsageError(Exception):
    """A problem with the command line, the input text or the run folder: one line, exit code 2."""


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


def check_config(cfg: TrainConfig) -> None:
    positive = ["corpus_bytes", "block_size", "n_layer", "n_head", "d_model", "hidden_size", "steps", "batch_size",
                "grad_accum", "eval_every", "eval_batches", "sample_chars"]
    for name in positive:
        if getattr(cfg, name) < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(cfg, name)}")
    checks = [("val_fraction", 0 < cfg.val_fraction < 1, "in (0, 1)"), ("dropout", 0 <= cfg.dropout < 1, "in [0, 1)"),
              ("lr", cfg.lr > 0, "> 0"), ("min_lr_ratio", 0 <= cfg.min_lr_ratio <= 1, "in [0, 1]"),
              ("warmup_steps", 0 <= cfg.warmup_steps < cfg.steps, f"at least 0 and less than --steps {cfg.steps}"),
              ("weight_decay", cfg.weight_decay >= 0, ">= 0"), ("grad_clip", cfg.grad_clip > 0, "> 0"),
              ("sample_every", cfg.sample_every >= 0, ">= 0"), ("temperature", cfg.temperature >= 0, ">= 0"),
              ("tokenizer", cfg.tokenizer in ("char", "bpe"), "char or bpe"),
              ("vocab_size", cfg.vocab_size >= 257, "at least 257 (256 bytes and <|endoftext|>)")]
    for name, ok, rule in checks:
        if not ok:
            raise UsageError(f"--{name.replace('_', '-')} must be {rule}, got {getattr(cfg, name)}")


# --------------------------------------------------------------------------------------
# Models and optimizer
# --------------------------------------------------------------------------------------


def build_model(cfg: TrainConfig, vocab_size: int, rng: np.random.Generator):
    """The network ``cfg.model`` names, and its config as a dict (for config.json).

    The weights are drawn from ``rng``, and the model keeps ``rng`` for dropout:
    the same generator then also draws the batches, so one saved generator
    state restores everything random in training.
    """
    if cfg.model == "gpt":
        from models.gpt import GPT, GPTConfig

        try:
            model_config = GPTConfig(vocab_size=vocab_size, block_size=cfg.block_size, n_layer=cfg.n_layer,
                                     n_head=cfg.n_head, d_model=cfg.d_model, position=cfg.position,
                                     dropout=cfg.dropout)
        except (ValueError, TypeError) as err:
            raise UsageError(str(err)) from None
        return GPT(model_config, rng=rng), dataclasses.asdict(model_config)
    from models.rnn import RNNLM, RNNConfig

    try:
        model_config = RNNConfig(vocab_size=vocab_size, cell=cfg.model, d_model=cfg.d_model,
                                 hidden_size=cfg.hidden_size, n_layer=cfg.n_layer, dropout=cfg.dropout)
    except (ValueError, TypeError) as err:
        raise UsageError(str(err)) from None
    return RNNLM(model_config, rng=rng), dataclasses.asdict(model_config)


def build_optimizer(model, cfg: TrainConfig):
    """AdamW with weight decay on the matrices only (not on biases and norm gains), warmup + cosine schedule."""
    params = list(model.parameters())
    groups = [{"params": [p for p in params if p.ndim >= 2], "weight_decay": cfg.weight_decay},
              {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0}]
    optimizer = optim.AdamW([g for g in groups if g["params"]], lr=cfg.lr, betas=(0.9, 0.99))
    scheduler = optim.WarmupCosineLR(optimizer, cfg.warmup_steps, cfg.decay_steps or cfg.steps, cfg.min_lr_ratio)
    return optimizer, scheduler


# --------------------------------------------------------------------------------------
# The run: its folder, its data, its state
# --------------------------------------------------------------------------------------


@dataclass
class Run:
    cfg: TrainConfig
    folder: Path
    corpus: data.Corpus
    tokenizer: CharTokenizer | BPETokenizer
    train_ids: np.ndarray
    val_ids: np.ndarray
    train_tokens_per_byte: float  # tokens / UTF-8 bytes of each split: turns bits per token into bits per byte
    val_tokens_per_byte: float
    model: object
    model_config: dict
    optimizer: optim.Optimizer
    scheduler: optim.LRScheduler
    rng: np.random.Generator
    step: int = 0  # optimizer steps completed
    train_losses: list = dataclasses.field(default_factory=list)  # one per step, in nats (metrics.json too)
    val_losses: list = dataclasses.field(default_factory=list)  # [step, loss in nats]
    seconds: float = 0.0  # training time so far, over every session of the run
    updating: bool = False  # True while the optimizer writes the weights

    @property
    def unigram_bits_per_token(self) -> float:
        return data.unigram_bits_per_char(self.train_ids, self.val_ids, self.tokenizer.vocab_size)

    @property
    def unigram_bpb(self) -> float:
        return self.unigram_bits_per_token * self.val_tokens_per_byte

    def val_bpb(self, loss: float) -> float:
        """A validation loss (nats per token) in bits per byte of text: the axis every tokenizer shares."""
        return loss / LN2 * self.val_tokens_per_byte

    def train_bpb(self, loss: float) -> float:
        return loss / LN2 * self.train_tokens_per_byte


def load_corpus(cfg: TrainConfig) -> data.Corpus:
    if cfg.text is not None:
        return data.text_file_corpus(cfg.text, data.min_chars_needed(cfg.block_size, cfg.val_fraction))
    corpus = data.stdlib_corpus(cfg.corpus_bytes)
    needed = data.min_chars_needed(cfg.block_size, cfg.val_fraction)
    if len(corpus.text) < needed:
        raise UsageError(f"the docstring corpus has {len(corpus.text):,} characters; --block-size "
                         f"{cfg.block_size} with --val-fraction {cfg.val_fraction} needs at least {needed:,}")
    return corpus


def new_run(cfg: TrainConfig, folder: Path | None, argv: list[str]) -> Run:
    corpus = load_corpus(cfg)
    if folder is None:
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        folder = Path("runs") / f"charlm-{cfg.model}-{stamp}"
        suffix = 1
        while folder.exists():  # two runs started in the same second
            suffix += 1
            folder = Path("runs") / f"charlm-{cfg.model}-{stamp}-{suffix}"
    elif (folder / CHECKPOINT).exists() or (folder / "config.json").exists():
        raise UsageError(f"--out {folder} already holds a run; continue it with --resume {folder}, "
                         f"or choose another folder")
    tokenizer = make_tokenizer(cfg, corpus)
    run = assemble(cfg, folder, corpus, tokenizer)
    folder.mkdir(parents=True, exist_ok=True)
    settings = {"train": dataclasses.asdict(cfg), "model": run.model_config,
                "data": {"source": corpus.source, "sha256": corpus.sha256, "characters": len(corpus.text),
                         "tokenizer": cfg.tokenizer, "vocab_size": tokenizer.vocab_size,
                         "train_tokens": len(run.train_ids), "val_tokens": len(run.val_ids),
                         "train_tokens_per_byte": run.train_tokens_per_byte,
                         "val_tokens_per_byte": run.val_tokens_per_byte},
                "minigrad_version": mg.__version__, "created": datetime.now().isoformat(timespec="seconds"),
                "command": " ".join([PROG, *argv])}
    write_json(folder / "config.json", settings)
    tokenizer.save(folder / "tokenizer.json")
    (folder / "samples.txt").write_text("")
    save_checkpoint(run)  # step 0: from now on the folder can always be resumed
    return run


def make_tokenizer(cfg: TrainConfig, corpus: data.Corpus) -> CharTokenizer | BPETokenizer:
    """Every character of the text (char), or BPE merges learned from the training split alone (bpe)."""
    if cfg.tokenizer == "char":
        return CharTokenizer.from_text(corpus.text)
    train_text, _ = data.split_text(corpus.text, cfg.val_fraction)
    started = time.perf_counter()
    tokenizer = BPETokenizer.train(train_text, cfg.vocab_size)
    print(f"bpe:   {len(tokenizer.merges):,} merges learned from the training split in "
          f"{time.perf_counter() - started:.1f} s")
    return tokenizer


def resume_run(folder: Path, args: argparse.Namespace) -> Run:
    """The run saved in ``folder``, at its last checkpoint, with the same data verified by its hash.

    ``--steps N`` moves the run's end to step N (more steps for a finished run); the learning-rate
    schedule keeps the length it had, so past it training continues at its final rate.
    """
    given = [f"--{k.replace('_', '-')}" for k in [*HYPERPARAMETERS, "out"]
             if k not in EXTENDABLE and getattr(args, k, None) is not None]
    if given:
        raise UsageError(f"--resume continues a run with its saved settings; drop {', '.join(given)} "
                         f"(only --steps, --stop-after and --quiet may be given with --resume)")
    for name in ("config.json", "tokenizer.json", CHECKPOINT):
        if not (folder / name).is_file():
            raise UsageError(f"--resume {folder}: no {name} there; is it a folder made by {PROG}?")
    try:
        settings = json.loads((folder / "config.json").read_text())
        cfg = TrainConfig(**settings["train"])
        tokenizer = load_tokenizer(folder / "tokenizer.json")
    except (ValueError, KeyError, TypeError) as err:
        raise UsageError(f"--resume {folder}: unreadable config.json or tokenizer.json ({err})") from None
    corpus = load_corpus(cfg)
    if corpus.sha256 != settings["data"]["sha256"]:
        raise UsageError(f"--resume {folder}: the training text has changed since the run started "
                         f"({corpus.source}: sha256 {corpus.sha256[:12]}, the run used "
                         f"{settings['data']['sha256'][:12]})")
    run = assemble(cfg, folder, corpus, tokenizer)
    try:
        checkpoint = io.load(folder / CHECKPOINT, run.model, run.optimizer, rng=run.rng, scheduler=run.scheduler)
    except io.CheckpointError as err:
        raise UsageError(str(err).replace("\n", " ")) from None
    run.step = checkpoint.step
    run.train_losses = checkpoint.extra["train_losses"]
    run.val_losses = checkpoint.extra["val_losses"]
    run.seconds = checkpoint.extra["seconds"]
    if args.steps is not None and args.steps != cfg.steps:
        extend(run, settings, args.steps)
    return run


def extend(run: Run, settings: dict, steps: int) -> None:
    """Move the end of a resumed run to ``steps``; the schedule keeps its length (``decay_steps``)."""
    cfg = run.cfg
    if steps <= run.step:
        raise UsageError(f"--steps {steps}: the run in {run.folder} has done {run.step} steps already; give more")
    cfg.decay_steps = cfg.decay_steps or cfg.steps
    cfg.steps = steps
    settings["train"] = dataclasses.asdict(cfg)
    write_json(run.folder / "config.json", settings)


def assemble(cfg: TrainConfig, folder: Path, corpus: data.Corpus, tokenizer) -> Run:
    """The model, optimizer and generator of a run at step 0 (a resumed run then loads its checkpoint).

    The text is split into training and validation text first, and each is encoded on its own, so a char
    and a BPE run validate on exactly the same bytes.
    """
    train_text, val_text = data.split_text(corpus.text, cfg.val_fraction)
    train_ids, val_ids = tokenizer.encode(train_text), tokenizer.encode(val_text)
    per_byte = [len(ids) / max(1, len(text.encode("utf-8"))) for ids, text in ((train_ids, train_text),
                                                                                (val_ids, val_text))]
    for name, ids in (("training", train_ids), ("validation", val_ids)):
        if len(ids) < cfg.block_size + 2:
            raise UsageError(f"the {name} text is only {len(ids):,} tokens long; --block-size {cfg.block_size} "
                             f"needs at least {cfg.block_size + 2} (give a longer text or a smaller --block-size)")
    rng = np.random.default_rng(cfg.seed)
    model, model_config = build_model(cfg, tokenizer.vocab_size, rng)
    optimizer, scheduler = build_optimizer(model, cfg)
    return Run(cfg, folder, corpus, tokenizer, train_ids, val_ids, *per_byte, model, model_config, optimizer,
               scheduler, rng)


def save_checkpoint(run: Run) -> None:
    extra = {"train_losses": run.train_losses, "val_losses": run.val_losses, "seconds": run.seconds}
    io.save(run.folder / CHECKPOINT, run.model, run.optimizer, step=run.step, config=run.model_config,
            extra=extra, rng=run.rng, scheduler=run.scheduler)


def write_json(path: Path, value) -> None:
    atomic_write(path, json.dumps(value, indent=2) + "\n")


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
def evaluate(model, batches) -> float:
    """Mean loss over fixed validation batches, in eval mode (no dropout)."""
    model.eval()
    try:
        return float(np.mean([model(x, y)[1].item() for x, y in batches]))
    finally:
        model.train()


def sample_text(run: Run, n_chars: int, temperature: float, seed) -> str:
    """A continuation of a newline (or of the text's first character when it has no newlines)."""
    tok = run.tokenizer
    prompt = "\n" if tok.can_encode("\n") else run.corpus.text[0]
    prompt_ids = tok.encode(prompt)
    out = run.model.generate(prompt_ids[None], n_chars, temperature=temperature, rng=np.random.default_rng(seed))
    return tok.decode(out[0, len(prompt_ids):])


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


def train(run: Run, stop_after: int | None, quiet: bool) -> str:
    """Run the loop until the last step, ``stop_after`` more steps, or Ctrl-C. Returns why it stopped."""
    cfg = run.cfg
    end = cfg.steps if stop_after is None else min(cfg.steps, run.step + stop_after)
    eval_rng = np.random.default_rng([cfg.seed, 1])  # the same validation batches at every evaluation
    val_batches = [data.get_batch(run.val_ids, cfg.batch_size, cfg.block_size, eval_rng)
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
                val = evaluate(run.model, val_batches)
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


def append_sample(run: Run, text: str) -> None:
    with open(run.folder / "samples.txt", "a", encoding="utf-8") as f:
        f.write(f"=== step {run.step} (temperature {run.cfg.temperature}) ===\n{text}\n\n")


# --------------------------------------------------------------------------------------
# Reporting
# --------------------------------------------------------------------------------------


def plot_losses(run: Run, path: Path) -> Path | None:
    """Training loss (each step, and smoothed) and validation loss, in bits per byte, with the baseline."""
    plt = pyplot()
    if plt is None or not run.train_losses:
        return None
    train_bpb = np.asarray([run.train_bpb(loss) for loss in run.train_losses])
    steps = np.arange(1, len(train_bpb) + 1)
    last_step = max(run.cfg.steps, len(train_bpb))
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    ax.plot(steps, train_bpb, color="tab:blue", alpha=0.25, linewidth=0.8)
    ax.plot(steps, moving_average(train_bpb, window=max(5, len(train_bpb) // 40)), color="tab:blue",
            linewidth=1.8, label="training batches (moving average)")
    if run.val_losses:
        val_steps, val = np.asarray(run.val_losses).T
        val_bpb = np.asarray([run.val_bpb(loss) for loss in val])
        ax.plot(val_steps, val_bpb, "o-", color="tab:orange", linewidth=1.8, markersize=5, label="validation text")
        ax.annotate(f"{val_bpb[-1]:.2f}", (val_steps[-1], val_bpb[-1]), textcoords="offset points",
                    xytext=(-2, 8), ha="right", color="tab:orange", fontsize=9)
    ax.axhline(run.unigram_bpb, color="gray", linestyle="--", linewidth=1.2)
    ax.text(last_step, run.unigram_bpb + 0.06, f"unigram baseline {run.unigram_bpb:.2f}", ha="right",
            va="bottom", color="dimgray", fontsize=9)
    ax.set_xlabel("step")
    ax.set_ylabel("bits per byte")
    ax.set_xlim(0, last_step)
    ax.set_ylim(0, max(float(train_bpb.max()), run.unigram_bpb) + 0.3)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower left")
    unit = "char-level" if run.cfg.tokenizer == "char" else f"BPE-{run.tokenizer.vocab_size}"
    ax.set_title(f"{unit} {run.cfg.model.upper()} on {short_source(run)}, {run.model.num_parameters():,} parameters")
    return save_figure(fig, path)


def moving_average(values: np.ndarray, window: int) -> np.ndarray:
    """Mean of each value's centred window (shrunk at the ends): smooths without lagging behind the curve."""
    sums = np.concatenate([[0.0], np.cumsum(values)])
    half = window // 2
    lo = np.clip(np.arange(len(values)) - half, 0, len(values))
    hi = np.clip(np.arange(len(values)) + half + 1, 0, len(values))
    return (sums[hi] - sums[lo]) / (hi - lo)


def short_source(run: Run) -> str:
    return Path(run.cfg.text).name if run.cfg.text else "stdlib docstrings"


def example_prompt(run: Run) -> str:
    """A prompt for the closing hint: "Return the" (the docstring corpus), or the first words of the text."""
    if run.tokenizer.can_encode("Return the") and "Return the" in run.corpus.text:
        return "Return the"
    return " ".join(run.corpus.text.split()[:2])[:20]


def write_metrics(run: Run, stopped: str) -> dict:
    final_step, final_val = run.val_losses[-1] if run.val_losses else (None, None)
    metrics = {"step": run.step, "steps": run.cfg.steps, "stopped": stopped, "training_seconds": run.seconds,
               "tokenizer": run.cfg.tokenizer, "vocab_size": run.tokenizer.vocab_size,
               "train_tokens_per_byte": run.train_tokens_per_byte, "val_tokens_per_byte": run.val_tokens_per_byte,
               "unigram_bpb": run.unigram_bpb, "unigram_bits_per_token": run.unigram_bits_per_token,
               "final_val_step": final_step, "final_val_loss": final_val,
               "final_val_bpb": None if final_val is None else run.val_bpb(final_val),
               "final_val_bits_per_token": None if final_val is None else final_val / LN2,
               "parameters": run.model.num_parameters(), "train_losses": run.train_losses,
               "val_losses": run.val_losses}
    write_json(run.folder / "metrics.json", metrics)
    return metrics


# --------------------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> dict:
    """Train (or resume) a run; returns its metrics. Bad input: a one-line error and SystemExit(2)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    runtime.tune_malloc()  # a training loop: keep its freed arrays in the process (minigrad/runtime.py)
    set_threads()  # BLAS threads: the cores other work leaves free (demos/_common.py)
    try:
        if args.stop_after is not None and args.stop_after < 1:
            raise UsageError(f"--stop-after must be at least 1, got {args.stop_after}")
        if args.resume is not None:
            run = resume_run(args.resume, args)
        else:
            run = new_run(config_from_args(args), args.out, argv)
    except (UsageError, data.DataError, TokenizerError) as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
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

    stopped = train(run, args.stop_after, args.quiet)
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
    if stopped != "finished":
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


def python_command() -> str:
    """This interpreter, as a command that works typed in the current folder.

    ``python`` when that is the one on PATH (an activated venv); otherwise its path, relative
    when it is under the current folder (``.venv/bin/python``): a plain ``python`` would be the
    system's, without the project's packages.
    """
    exe = sys.executable
    if not exe:
        return "python"
    on_path = shutil.which("python")
    if on_path and os.path.abspath(on_path) == os.path.abspath(exe):
        return "python"
    relative = os.path.relpath(exe)
    if relative.startswith(".."):
        return shlex.quote(exe)
    return shlex.quote(relative if os.sep in relative else os.path.join(".", relative))


def cli() -> int:
    metrics = main()
    codes = {"interrupted": 130, "aborted": 130, "diverged": 1}  # 130: the shell's code for Ctrl-C
    return codes.get(metrics["stopped"], 0)


if __name__ == "__main__":
    raise SystemExit(cli())
