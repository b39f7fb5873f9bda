"""Keep training a minigrad run on PyTorch, data-parallel: when a model is worth more compute than NumPy gives.

    python -m demos.train_charlm --position learned --out runs/small        # a GPT-2-shaped GPT
    python -m demos.continue_in_pytorch export runs/small                   # -> runs/small/gpt2/ (no torch needed)
    python -m torch.distributed.run --standalone --nproc_per_node 2 -m demos.continue_in_pytorch \
        train runs/small/gpt2 --steps 500                                   # torchrun, by the same interpreter

``export`` writes the run's model in GPT-2's format (``model.save_gpt2``:
``model.safetensors`` + ``config.json``, what ``transformers`` reads), its
tokenizer (``tokenizer.json``) and ``minigrad_run.json``: where the run
stopped, its settings, and the state of the random generator that draws its
batches. Only GPT-2-shaped models can go: LayerNorm, learned positions, a GELU
MLP, biases, one key/value head per head (the main demo's default uses rotary
positions: train with ``--position learned``); ``save_gpt2`` names any option
that does not fit. ``--out`` must be a new or empty folder: export never
overwrites a file, least of all a run's own.

``train`` runs under ``torchrun``: each process loads the weights into
``transformers.GPT2LMHeadModel``, wraps it in
``torch.nn.parallel.DistributedDataParallel`` (gloo on CPU, NCCL on GPUs, one
GPU per process) and trains on the same text, encoded by the same tokenizer.
The batches continue the run's own stream: every process draws the global
batch (``batch_size x grad_accum`` windows, as one minigrad step) from the
generator saved in the checkpoint and takes its share. So PyTorch's first
batch is the batch minigrad's next step would have drawn (with dropout 0,
whose masks would also draw from it), and its first loss equals the loss
minigrad reports for that step (``--resume RUN --steps N+1``), to float32
precision: tests/lessons/test_continue_in_pytorch.py checks exactly that with 2 CPU
processes. DDP averages the gradients over the processes during the backward
pass, so each update (and the clip, on the averaged gradient) is the one a
single process would make on the whole global batch.

AdamW starts afresh (its moments are not carried over) with the run's
settings and, unless ``--lr`` is given, the learning rate the run ended on,
held constant. torch and transformers are imported only here, inside ``train``.
The result is saved with ``save_pretrained`` (plus the tokenizer), which
``models.GPT.from_gpt2`` loads back into minigrad.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import shlex
import shutil
import sys
import time
from pathlib import Path

import numpy as np

from demos import charlm_data as data
from demos import charlm_run
from demos._common import python_command
from minigrad.files import atomic_write
from models.tokenizer import TokenizerError, load_tokenizer

PROG = "python -m demos.continue_in_pytorch"
HANDOFF = "minigrad_run.json"


UsageError = charlm_run.UsageError  # a bad run folder, export folder or option: one line, exit code 2
MAX_HANDOFF_BYTES = 1 << 22  # a handoff is a few KB (the generator's state is the largest part)


# --------------------------------------------------------------------------------------
# export: minigrad only
# --------------------------------------------------------------------------------------


def export(run_dir: Path, out: Path | None = None) -> Path:
    """Write the run's GPT in GPT-2's format, its tokenizer and its data stream's state to ``out``; returns it.

    ``out`` (default ``RUN_DIR/gpt2``) must be a new or empty folder, checked before anything is read or written.
    """
    run_dir = Path(run_dir)
    out = Path(out) if out is not None else run_dir / "gpt2"
    check_new_or_empty_folder(out)
    run = charlm_run.resume_run(run_dir)  # the model, optimizer, schedule and generator, as saved
    if run.cfg.model != "gpt":
        raise UsageError(f"{run_dir}: the run trained an {run.cfg.model.upper()}; only a GPT has GPT-2's format")
    settings = json.loads((run_dir / "config.json").read_text())  # read_run_folder has checked it
    try:
        run.model.save_gpt2(out)
    except ValueError as err:
        raise UsageError(str(err)) from None
    run.tokenizer.save(out / "tokenizer.json")
    handoff = {"run": str(run_dir), "step": run.step, "train": dataclasses.asdict(run.cfg), "data": settings["data"],
               "last_lr": run.optimizer.param_groups[0]["lr"], "rng_state": run.rng.bit_generator.state,
               "last_val_loss": run.val_losses[-1] if run.val_losses else None}
    atomic_write(out / HANDOFF, json.dumps(handoff, indent=2) + "\n")
    return out


def check_new_or_empty_folder(out: Path) -> None:
    """UsageError unless ``out`` is absent or an empty folder: export and train overwrite nothing (a run's
    config.json, an earlier result)."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file; give a new or empty folder")
    if out.is_dir() and any(out.iterdir()):
        holds = "a run of " + charlm_run.PROG if (out / "config.json").exists() and \
            (out / charlm_run.CHECKPOINT).exists() else "files"
        raise UsageError(f"--out {out} already holds {holds}; {PROG} writes only into a new or empty folder "
                         f"(give another --out, or remove that folder first)")


# --------------------------------------------------------------------------------------
# train: under torchrun, one process per CPU share or GPU
# --------------------------------------------------------------------------------------


def load_handoff(folder: Path) -> tuple[dict, object, np.ndarray, np.random.Generator, float]:
    """(handoff, tokenizer, training ids, the run's batch generator, tokens per byte) from an export folder.

    Every value is checked before it is used (sizes, types, the generator's state): a damaged folder is a
    UsageError naming the file.
    """
    folder = Path(folder)
    for name in (HANDOFF, "tokenizer.json", "model.safetensors", "config.json"):
        if not (folder / name).is_file():
            raise UsageError(f"{folder}: no {name} there; make the folder with {PROG} export RUN_DIR")
    where = folder / HANDOFF
    if where.stat().st_size > MAX_HANDOFF_BYTES:
        raise UsageError(f"{where}: {where.stat().st_size:,} bytes, not a handoff written by {PROG} export")
    try:
        handoff = json.loads(where.read_text(encoding="utf-8"))
    except (ValueError, RecursionError) as err:
        raise UsageError(f"{where}: not a handoff written by {PROG} export ({type(err).__name__}: {err})") from None
    cfg = charlm_run.config_from_settings(handoff, where)
    rng = np.random.default_rng()
    try:
        if isinstance(handoff.get("step"), bool) or not isinstance(handoff.get("step"), int) or \
                isinstance(handoff.get("last_lr"), bool) or not isinstance(handoff.get("last_lr"), int | float):
            raise TypeError("'step' must be an int and 'last_lr' a number")
        rng.bit_generator.state = handoff.get("rng_state")  # the stream minigrad's next step would draw from
    except (TypeError, ValueError, KeyError) as err:
        raise UsageError(f"{where}: damaged handoff ({err})") from None
    try:
        tokenizer = load_tokenizer(folder / "tokenizer.json")
        corpus = charlm_run.load_corpus(cfg)
    except data.DataError as err:
        raise UsageError(str(err)) from None
    if corpus.sha256 != handoff["data"]["sha256"]:
        raise UsageError(f"{folder}: the training text has changed since the run ({corpus.source}: sha256 "
                         f"{corpus.sha256[:12]}, the run used {handoff['data']['sha256'][:12]})")
    train_text, _ = data.split_text(corpus.text, cfg.val_fraction)
    train_ids = tokenizer.encode(train_text)
    return handoff, tokenizer, train_ids, rng, len(train_ids) / len(train_text.encode("utf-8"))


def torchrun_command(folder: Path) -> str:
    """The command that runs ``train`` on 2 processes, as it works typed here (torchrun by this interpreter)."""
    return (f"{python_command()} -m torch.distributed.run --standalone --nproc_per_node 2 -m "
            f"demos.continue_in_pytorch train {shlex.quote(str(folder))}")


def train(folder: Path, steps: int, lr: float | None, out: Path | None, sample_tokens: int) -> dict:
    """This process's part of ``steps`` DDP steps; rank 0 prints the losses and saves the result."""
    if "RANK" not in os.environ:
        raise UsageError(f"train runs under torchrun: {torchrun_command(folder)}")
    out = Path(out) if out is not None else Path(folder).parent / "pytorch"
    check_new_or_empty_folder(out)  # every process, before any of them starts: none writes over a file
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel
    from transformers import GPT2LMHeadModel

    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world, local_rank = dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", 0))
    device = torch.device(f"cuda:{local_rank}" if cuda else "cpu")
    if cuda:
        torch.cuda.set_device(device)
    else:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(os.environ.get("LOCAL_WORLD_SIZE", world))))
    handoff, tokenizer, train_ids, rng, tokens_per_byte = load_handoff(folder)
    cfg = charlm_run.TrainConfig(**handoff["train"])
    batch = cfg.batch_size * cfg.grad_accum  # windows per step, as in the minigrad run
    if batch % world:
        raise UsageError(f"the run's steps hold {batch} windows, which {world} processes cannot share equally; "
                         f"use a --nproc_per_node that divides {batch}")
    torch.manual_seed(cfg.seed + rank)  # dropout masks (if the run has dropout)
    model = GPT2LMHeadModel.from_pretrained(folder).to(device)
    model.train()
    ddp = DistributedDataParallel(model, device_ids=[local_rank] if cuda else None)
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}],
                                  lr=lr if lr is not None else handoff["last_lr"], betas=(0.9, 0.99))

    def share(x: np.ndarray) -> torch.Tensor:  # this process's slice of a global batch (B, T)
        return torch.from_numpy(np.array_split(x, world)[rank]).to(device)

    def global_mean(value: torch.Tensor) -> float:  # the mean over processes = the mean over the global batch
        value = value.detach().clone()
        dist.all_reduce(value)
        return value.item() / world

    def batch_loss(net, x, y) -> torch.Tensor:
        logits = net(input_ids=share(x)).logits  # (B / world, T, vocab)
        return F.cross_entropy(logits.flatten(0, 1), share(y).flatten())  # y is already x shifted by one

    first = data.get_batch(train_ids, batch, cfg.block_size, _twin(rng))  # step 1's batch, for the end
    losses = []
    for step in range(steps):
        x, y = data.get_batch(train_ids, batch, cfg.block_size, rng)
        loss = batch_loss(ddp, x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()  # DDP averages the gradients over the processes here
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)  # the global batch's gradient
        optimizer.step()
        losses.append(global_mean(loss))
        if not math.isfinite(losses[-1]):
            raise UsageError(f"the loss is {losses[-1]} at step {step + 1}; try a lower --lr")
        if rank == 0:
            print(f"step {handoff['step'] + step + 1} (PyTorch {step + 1}/{steps}, {world} processes): loss "
                  f"{losses[-1]:.4f} nats/token, {losses[-1] / math.log(2) * tokens_per_byte:.3f} bits/byte",
                  flush=True)
    with torch.no_grad():
        model.eval()
        first_after = global_mean(batch_loss(model, *first))
    result = {"world_size": world, "backend": dist.get_backend(), "losses": losses,
              "first_batch_loss_before": losses[0] if losses else None, "first_batch_loss_after": first_after,
              "start_step": handoff["step"]}
    if rank == 0:
        model.save_pretrained(out)
        shutil.copyfile(folder / "tokenizer.json", out / "tokenizer.json")
        atomic_write(out / "losses.json", json.dumps(result, indent=2) + "\n")
        print(f"the batch of step {handoff['step'] + 1}: loss {losses[0]:.4f} before, {first_after:.4f} after "
              f"{steps} steps; saved to {out} (models.GPT.from_gpt2 loads it back)")
        if sample_tokens:
            print(sample(model, tokenizer, sample_tokens, device))
    dist.barrier()
    # On success only: after an error in one process, with another inside a collective, destroying the group
    # would wait for that process for ever; torchrun stops them all when one fails.
    dist.destroy_process_group()
    return result


def _twin(rng: np.random.Generator) -> np.random.Generator:
    """An independent generator in the same state (to draw the first batch again without moving ``rng``)."""
    twin = np.random.default_rng()
    twin.bit_generator.state = rng.bit_generator.state
    return twin


def sample(model, tokenizer, n_tokens: int, device) -> str:
    """A short sample from the PyTorch model, decoded with the run's own tokenizer."""
    import torch

    prompt = "\n" if tokenizer.can_encode("\n") else tokenizer.decode([0])
    idx = torch.tensor(tokenizer.encode(prompt)[None], device=device)
    generator = torch.Generator(device=device).manual_seed(0)
    block = model.config.n_positions
    with torch.no_grad():
        for _ in range(n_tokens):
            logits = model(input_ids=idx[:, -block:]).logits[:, -1] / 0.8  # temperature 0.8
            idx = torch.cat([idx, torch.multinomial(logits.softmax(-1), 1, generator=generator)], dim=1)
    return "--- a PyTorch sample ---\n" + tokenizer.decode(idx[0, 1:].cpu().numpy())


# --------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="Continue a minigrad run on PyTorch (DDP).")
    commands = parser.add_subparsers(dest="command", required=True)
    exp = commands.add_parser("export", help="write RUN_DIR's GPT as GPT-2 files + tokenizer (no torch needed)")
    exp.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a run folder of python -m demos.train_charlm")
    exp.add_argument("--out", type=Path, metavar="DIR", help="a new or empty folder to write (default: RUN_DIR/gpt2)")
    tr = commands.add_parser("train", help="train the exported model with DDP (run it with torchrun)")
    tr.add_argument("folder", type=Path, metavar="DIR", help="a folder written by export")
    tr.add_argument("--steps", type=int, default=100, help="optimizer steps (100)")
    tr.add_argument("--lr", type=float, help="AdamW's learning rate (default: the rate the run ended on)")
    tr.add_argument("--out", type=Path, metavar="DIR",
                    help="a new or empty folder for the result (default: DIR/../pytorch)")
    tr.add_argument("--sample-tokens", type=int, default=200, metavar="N",
                    help="tokens of text to sample at the end (200; 0: none)")
    return parser


def main(argv: list[str] | None = None):
    args = build_parser().parse_args(argv)
    try:
        if args.command == "export":
            out = export(args.run_dir, args.out)
            print(f"exported to {out}: model.safetensors, config.json (GPT-2), tokenizer.json, {HANDOFF}\n"
                  f"continue with: {torchrun_command(out)}")
            return out
        if args.steps < 1:
            raise UsageError(f"--steps must be at least 1, got {args.steps}")
        if args.lr is not None and not (math.isfinite(args.lr) and args.lr > 0):
            raise UsageError(f"--lr must be a finite number > 0, got {args.lr}")
        if args.sample_tokens < 0:
            raise UsageError(f"--sample-tokens must be 0 (no sample) or more, got {args.sample_tokens}")
        return train(args.folder, args.steps, args.lr, args.out, args.sample_tokens)
    except (UsageError, TokenizerError) as err:
        message = f"{PROG}: error: {err}"
        if os.environ.get("LOCAL_RANK", "0") == "0":  # (every process finds the same error: one says it)
            print(message, file=sys.stderr)
        tell_torchrun(message)
        raise SystemExit(2) from None


def tell_torchrun(message: str) -> None:
    """Under torchrun, put ``message`` in its failure summary ("Root Cause ... traceback :"), which is printed
    last, below torchrun's own traceback, where it would otherwise say only how to enable tracebacks."""
    error_file = os.environ.get("TORCHELASTIC_ERROR_FILE")  # set by torchrun for each process it starts
    if error_file:
        try:  # torchrun's own layout (torch.distributed.elastic's ErrorHandler.record_exception), the message
            # where it shows a traceback
            Path(error_file).write_text(json.dumps({"message": {"message": message, "extraInfo": {
                "py_callstack": message, "timestamp": str(int(time.time()))}}}))
        except OSError:
            pass  # the message is printed above in any case


if __name__ == "__main__":
    main()
