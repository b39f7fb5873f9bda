"""The main demo's run folder: its settings, its model, and new, resumed and extended runs.

``demos.train_charlm`` trains; everything it keeps lives in a run folder
(``runs/charlm-<model>-<time>`` by default; ``runs/`` is ignored by git), and this
module is the one that writes and reads it. ``demos.sample`` and
``demos.continue_in_pytorch`` load runs through it too:

* ``config.json``: the model, training and data settings (and the text's SHA-256);
* ``tokenizer.json``: the character table or the BPE merges, without which the weights mean nothing;
* ``checkpoint.safetensors``: model, optimizer, schedule and random-generator
  state (``minigrad.io``: safetensors, written atomically), saved at every
  evaluation, at the end, and on Ctrl-C;
* ``metrics.json``: every training loss, the validation losses and the final figures;
* ``loss_curve.png``: training and validation loss, in bits per byte;
* ``samples.txt``: the text sampled during training.

A resumed run continues from the checkpoint. Because the checkpoint holds the
random generator's state too, a run that is stopped and resumed logs exactly the
losses of a run that never stopped. Extending a run (``--resume RUN_DIR --steps N``)
moves its end; the learning-rate schedule keeps its length, so the added steps run
at its final rate (``decay_steps`` in config.json records that length).

Reading a folder trusts nothing in it: ``read_run_folder`` checks each file's size,
each setting's type and range, and that the checkpoint is big enough to hold the
model the settings describe, before anything is built; a damaged folder is a
``UsageError`` naming the file.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np

import minigrad as mg
from demos import charlm_data as data
from demos._common import pyplot, save_figure
from minigrad import io, optim
from minigrad.files import atomic_write
from models.tokenizer import BPETokenizer, CharTokenizer, TokenizerError, load_tokenizer

PROG = "python -m demos.train_charlm"  # the command that makes run folders
RUN_FILES = ("config.json", "tokenizer.json", "checkpoint.safetensors", "metrics.json", "loss_curve.png",
             "samples.txt")
CHECKPOINT = "checkpoint.safetensors"
MAX_CONFIG_BYTES = 1 << 20  # a config.json is ~2 KB; anything this large is not one
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


def check_config(cfg: TrainConfig) -> None:
    """UsageError naming the first setting out of its range (as its command-line option)."""
    positive = ["corpus_bytes", "block_size", "n_layer", "n_head", "d_model", "hidden_size", "steps", "batch_size",
                "grad_accum", "eval_every", "eval_batches", "sample_chars"]
    for field in dataclasses.fields(cfg):
        value = getattr(cfg, field.name)
        if isinstance(value, float) and not math.isfinite(value):
            raise UsageError(f"--{field.name.replace('_', '-')} must be a finite number, got {value}")
    for name in positive:
        if getattr(cfg, name) < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(cfg, name)}")
    checks = [("val_fraction", 0 < cfg.val_fraction < 1, "in (0, 1)"), ("dropout", 0 <= cfg.dropout < 1, "in [0, 1)"),
              ("lr", cfg.lr > 0, "> 0"), ("min_lr_ratio", 0 <= cfg.min_lr_ratio <= 1, "in [0, 1]"),
              ("warmup_steps", 0 <= cfg.warmup_steps < cfg.steps, f"at least 0 and less than --steps {cfg.steps}"),
              ("seed", cfg.seed >= 0, ">= 0"), ("weight_decay", cfg.weight_decay >= 0, ">= 0"),
              ("grad_clip", cfg.grad_clip > 0, "> 0"),
              ("sample_every", cfg.sample_every >= 0, ">= 0"), ("temperature", cfg.temperature >= 0, ">= 0"),
              ("tokenizer", cfg.tokenizer in ("char", "bpe"), "char or bpe"),
              ("model", cfg.model in MODEL_DEFAULTS, " or ".join(MODEL_DEFAULTS)),
              ("position", cfg.position in ("rope", "learned", "sinusoidal"), "rope, learned or sinusoidal"),
              ("vocab_size", cfg.vocab_size >= 257, "at least 257 (256 bytes and <|endoftext|>)")]
    for name, ok, rule in checks:
        if not ok:
            raise UsageError(f"--{name.replace('_', '-')} must be {rule}, got {getattr(cfg, name)}")


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
    """A run at step 0, its folder written (config, tokenizer, the step-0 checkpoint) so it can always resume.

    ``folder`` None: a fresh ``runs/charlm-<model>-<time>``. A given folder must not be a file, nor hold any
    file a run writes (``check_new_folder``): a new run overwrites nothing.
    """
    if folder is not None:
        check_new_folder(folder)
    corpus = load_corpus(cfg)
    if folder is None:
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        folder = Path("runs") / f"charlm-{cfg.model}-{stamp}"
        suffix = 1
        while folder.exists():  # two runs started in the same second
            suffix += 1
            folder = Path("runs") / f"charlm-{cfg.model}-{stamp}-{suffix}"
    tokenizer = make_tokenizer(cfg, corpus)
    run = assemble(cfg, folder, corpus, tokenizer)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UsageError(f"--out {folder}: cannot create the folder ({err.strerror})") from None
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
    atomic_write(folder / "samples.txt", "")
    save_checkpoint(run)  # step 0: from now on the folder can always be resumed
    return run


def check_new_folder(folder: Path) -> None:
    """UsageError unless ``folder`` can take a new run: absent, or a folder without any of a run's files."""
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"--out {folder} is a file, not a folder; give a new folder for the run")
    if (folder / CHECKPOINT).exists() or (folder / "config.json").exists():
        raise UsageError(f"--out {folder} already holds a run; continue it with --resume {folder}, "
                         f"or choose another folder")
    taken = [name for name in RUN_FILES if (folder / name).exists()]
    if taken:
        raise UsageError(f"--out {folder} already has {', '.join(taken)}, which a run would overwrite; "
                         f"choose another folder")


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


def read_run_folder(folder: Path) -> tuple[dict, TrainConfig, CharTokenizer | BPETokenizer]:
    """(config.json's settings, its TrainConfig, the tokenizer) of the run in ``folder``, every value checked.

    The one reader of a run folder: a missing file, a file too large to be one of a run's, JSON that is not
    the settings this module writes (a key it does not know, a value of the wrong type or range), a damaged
    tokenizer, or a checkpoint too small to hold the model the settings describe: each is a UsageError
    naming the file, raised before any model is built.
    """
    folder = Path(folder)
    for name in ("config.json", "tokenizer.json", CHECKPOINT):
        if not (folder / name).is_file():
            raise UsageError(f"{folder}: no {name} there; is it a run folder made by {PROG}?")
    where = folder / "config.json"
    if where.stat().st_size > MAX_CONFIG_BYTES:
        raise UsageError(f"{where}: {where.stat().st_size:,} bytes, not a run's config.json (those are ~2 KB)")
    try:
        settings = json.loads(where.read_text(encoding="utf-8"))
    except (ValueError, RecursionError) as err:  # not UTF-8, not JSON, or nested past the parser's depth
        raise UsageError(f"{where}: not a run's settings ({type(err).__name__}: {err})") from None
    cfg = config_from_settings(settings, where)
    try:
        tokenizer = load_tokenizer(folder / "tokenizer.json")
    except TokenizerError as err:
        raise UsageError(str(err)) from None
    check_checkpoint_holds_model(cfg, tokenizer.vocab_size, folder / CHECKPOINT)
    return settings, cfg, tokenizer


def config_from_settings(settings, where) -> TrainConfig:
    """The TrainConfig of a parsed config.json, each field's type and range checked (UsageError otherwise)."""
    if not (isinstance(settings, dict) and isinstance(settings.get("train"), dict)
            and isinstance(settings.get("data"), dict) and isinstance(settings["data"].get("sha256"), str)):
        raise UsageError(f"{where}: not a run's settings (it needs the objects 'train' and 'data', with the "
                         f"text's 'sha256')")
    train = settings["train"]
    defaults = TrainConfig()
    unknown = sorted(set(train) - set(HYPERPARAMETERS))
    if unknown:
        raise UsageError(f"{where}: unknown settings {unknown}; this demo's settings are {HYPERPARAMETERS}")
    for name, value in train.items():
        expected = {"text": (str, type(None)), "decay_steps": (int, type(None))}.get(
            name, (int, float) if isinstance(getattr(defaults, name), float) else type(getattr(defaults, name)))
        if isinstance(value, bool) or not isinstance(value, expected) or \
                (isinstance(value, float) and not math.isfinite(value)):
            kinds = " or ".join("null" if t is type(None) else t.__name__ for t in expected) \
                if isinstance(expected, tuple) else expected.__name__
            raise UsageError(f"{where}: setting {name!r} is {value!r}; it must be a finite {kinds}")
    cfg = TrainConfig(**train)
    try:
        check_config(cfg)
        if cfg.decay_steps is not None and cfg.decay_steps < 1:
            raise UsageError(f"decay_steps must be at least 1, got {cfg.decay_steps}")
    except UsageError as err:
        raise UsageError(f"{where}: {err}") from None
    return cfg


def check_checkpoint_holds_model(cfg: TrainConfig, vocab_size: int, checkpoint: Path) -> None:
    """UsageError unless ``checkpoint`` is at least as large as the model's float32 weights.

    So a damaged config.json (a d_model of a million) cannot make the loader allocate more memory than
    the file it would load: the weights are counted from the settings, before anything is built.
    """
    d, h, layers = cfg.d_model, cfg.hidden_size, cfg.n_layer
    if cfg.model == "gpt":  # the embedding, and 12 d^2 of matrices per block (4 d^2 attention, 8 d^2 MLP)
        weights = vocab_size * d + layers * 12 * d * d
    else:  # the embedding, the output layer, and at least one hidden x hidden matrix per layer
        weights = vocab_size * d + h * vocab_size + layers * h * h
    size = checkpoint.stat().st_size
    if 4 * weights > size:
        raise UsageError(f"{checkpoint}: {size:,} bytes cannot hold the {cfg.model.upper()} the settings describe "
                         f"(at least {weights:,} float32 weights): the folder's files do not belong together")


def load_trained(folder: Path):
    """(model in eval mode, tokenizer, TrainConfig, step) of the run in ``folder``, for sampling from it."""
    _, cfg, tokenizer = read_run_folder(folder)
    model, _ = build_model(cfg, tokenizer.vocab_size, np.random.default_rng(0))
    try:
        checkpoint = io.load(Path(folder) / CHECKPOINT, model)
    except io.CheckpointError as err:
        raise UsageError(str(err).replace("\n", " ")) from None
    model.eval()
    return model, tokenizer, cfg, checkpoint.step


def resume_run(folder: Path, steps: int | None = None) -> Run:
    """The run saved in ``folder``, at its last checkpoint, with the same data verified by its hash.

    ``steps`` (when it differs from the run's) moves the run's end to that step (more steps for a finished
    run); the learning-rate schedule keeps the length it had, so past it training continues at its final rate.
    """
    settings, cfg, tokenizer = read_run_folder(folder)
    corpus = load_corpus(cfg)
    if corpus.sha256 != settings["data"]["sha256"]:
        raise UsageError(f"{folder}: the training text has changed since the run started "
                         f"({corpus.source}: sha256 {corpus.sha256[:12]}, the run used "
                         f"{settings['data']['sha256'][:12]})")
    run = assemble(cfg, folder, corpus, tokenizer)
    try:
        checkpoint = io.load(folder / CHECKPOINT, run.model, run.optimizer, rng=run.rng, scheduler=run.scheduler)
    except io.CheckpointError as err:
        raise UsageError(str(err).replace("\n", " ")) from None
    extra = checkpoint.extra
    number = (int, float)
    if not (isinstance(checkpoint.step, int) and isinstance(extra, dict)
            and isinstance(extra.get("train_losses"), list) and isinstance(extra.get("val_losses"), list)
            and isinstance(extra.get("seconds"), number)
            and all(isinstance(v, number) for v in extra["train_losses"])
            and all(isinstance(v, list) and len(v) == 2 and isinstance(v[0], int) and isinstance(v[1], number)
                    for v in extra["val_losses"])):
        raise UsageError(f"{folder / CHECKPOINT}: not a checkpoint of {PROG} (its step, losses and seconds are "
                         f"missing or not numbers)")
    run.step = checkpoint.step
    run.train_losses = extra["train_losses"]
    run.val_losses = extra["val_losses"]
    run.seconds = extra["seconds"]
    if steps is not None and steps != cfg.steps:
        extend(run, settings, steps)
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



def append_sample(run: Run, text: str) -> None:
    with open(run.folder / "samples.txt", "a", encoding="utf-8") as f:
        f.write(f"=== step {run.step} (temperature {run.cfg.temperature}) ===\n{text}\n\n")



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


