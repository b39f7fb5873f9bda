"""Generate text from a run saved by ``demos.train_charlm``, one token at a time, with the KV cache.

    python -m demos.sample runs/charlm-gpt-20250101-120000 --prompt "Return the" --temperature 0.8
    python -m demos.sample RUN_DIR --top-k 10 --max-new-tokens 500 --num-samples 3 --seed 1

The run folder holds everything needed: ``config.json`` says which model to
build, ``tokenizer.json`` maps text to ids (characters, or byte-level BPE), and
``checkpoint.safetensors`` holds the weights. The model continues the prompt
by sampling (``models.generation``):

* ``--temperature``: below 1 sharpens the distribution (safer, more
  repetitive text), above 1 flattens it; 0 is greedy decoding;
* ``--top-k K``: draw only among the K likeliest tokens;
* ``--top-p P``: draw only among the likeliest tokens that together hold
  probability P (nucleus sampling).

A GPT keeps each layer's keys and values (the KV cache), so every new
token costs one position rather than the whole prefix; ``--no-cache``
recomputes everything for comparison (the same text for the same seed).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

from demos import charlm_data as data
from demos._common import set_threads
from demos.charlm_run import UsageError, load_trained
from models.tokenizer import TokenizerError

PROG = "python -m demos.sample"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="Generate text from a run of demos.train_charlm.")
    add = parser.add_argument
    add("run_dir", type=Path, metavar="RUN_DIR", help="a run folder made by python -m demos.train_charlm")
    add("--prompt", default="\n", help="text to continue (default: a newline)")
    add("--max-new-tokens", type=int, default=300, metavar="N", help="tokens to generate (300)")
    add("--temperature", type=float, default=0.8, help="sampling temperature; 0 = greedy (0.8)")
    add("--top-k", type=int, metavar="K", help="sample among the K likeliest tokens only")
    add("--top-p", type=float, metavar="P", help="sample among the likeliest tokens holding probability P")
    add("--num-samples", type=int, default=1, metavar="N", help="independent samples to print (1)")
    add("--seed", type=int, default=0, help="seed of the sampling (0)")
    add("--no-cache", action="store_true", help="recompute the whole context at each step (slower, same text)")
    return parser


def main(argv: list[str] | None = None) -> list[str]:
    """Print and return the samples. Bad input: a one-line error and SystemExit(2)."""
    args = build_parser().parse_args(argv)
    try:
        if args.max_new_tokens < 0 or args.num_samples < 1 or args.seed < 0:
            raise UsageError("--max-new-tokens and --seed must be >= 0, and --num-samples >= 1")
        if not (math.isfinite(args.temperature) and args.temperature >= 0) or \
                (args.top_k is not None and args.top_k < 1) or (args.top_p is not None and not 0 < args.top_p <= 1):
            raise UsageError(f"need a finite --temperature >= 0, --top-k >= 1 and --top-p in (0, 1]; got "
                             f"--temperature {args.temperature}, --top-k {args.top_k}, --top-p {args.top_p}")
        model, tokenizer, cfg, step = load_trained(args.run_dir)
        if not args.prompt:
            raise UsageError("--prompt is empty; give at least one character")
        prompt_ids = tokenizer.encode(args.prompt)
    except (UsageError, data.DataError, TokenizerError) as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        raise SystemExit(2) from None

    print(f"{cfg.model.upper()} from {args.run_dir} (step {step}), temperature {args.temperature}"
          + (f", top-k {args.top_k}" if args.top_k else "") + (f", top-p {args.top_p}" if args.top_p else "")
          + ("" if args.no_cache else ", KV cache"))
    set_threads(say=False, prog=PROG)  # BLAS threads: 1, as no backward() times a step (MINIGRAD_THREADS=N)
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    try:
        prompts = np.repeat(prompt_ids[None], args.num_samples, axis=0)  # (num_samples, prompt length)
        out = model.generate(prompts, args.max_new_tokens, temperature=args.temperature, top_k=args.top_k,
                             top_p=args.top_p, rng=rng, use_cache=not args.no_cache)
    except MemoryError as err:
        print(f"{PROG}: error: not enough memory for {args.num_samples:,} samples of {args.max_new_tokens:,} "
              f"tokens ({err}); ask for fewer", file=sys.stderr)
        raise SystemExit(2) from None
    seconds = time.perf_counter() - started
    samples = [args.prompt + tokenizer.decode(row[len(prompt_ids):]) for row in out]
    for i, text in enumerate(samples):
        if args.num_samples > 1:
            print(f"--- sample {i + 1} ---")
        print(text)
    print(f"({args.num_samples * args.max_new_tokens} tokens in {seconds:.1f} s, "
          f"{args.num_samples * args.max_new_tokens / max(seconds, 1e-9):,.0f} per second)", file=sys.stderr)
    return samples


if __name__ == "__main__":
    main()
