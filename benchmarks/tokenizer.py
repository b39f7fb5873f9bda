"""BPE training and encoding speed of ``models.tokenizer.BPETokenizer`` on the main demo's corpus.

    python -m benchmarks.tokenizer                   # 1 MB of stdlib docstrings, vocabularies 1024, 2048, 4096
    python -m benchmarks.tokenizer --quick           # 50 kB, vocabulary 512 (seconds)
    python -m benchmarks.tokenizer --step-cost       # + what a vocabulary costs the main demo's training step

For each vocabulary size: the time to learn the merges (pre-tokenizing the
text, counting its chunks, then the merge loop with incremental pair counts),
the time to encode the whole text afterwards (a fresh tokenizer, so the chunk
cache starts empty), and the compression (UTF-8 bytes per token). With Hugging
Face ``tokenizers`` installed, its byte-level BPE trainer (Rust, GPT-2's split
pattern) runs in turn on the same text and vocabulary size, for scale; its
training uses every core it is given. Runs are interleaved (ours, theirs,
ours, ...); the table gives the median and the range of ``--rounds`` runs.
The one-off cost of building the split pattern's Unicode classes (once per
process) is shown separately.

``--step-cost`` times one training step of the main demo's default GPT
(``demos.train_charlm``: 2 layers, d_model 128, 16 windows of 64 tokens) with
the character vocabulary (96) and with BPE vocabularies, in turn: a bigger
vocabulary makes the embedding and the output layer bigger. The ratio to the
char step is what the README uses to give a BPE run the char run's time budget.
"""

from __future__ import annotations

import argparse
import importlib.util

from . import _util


def measure(args) -> str:
    from demos import charlm_data
    from models import tokenizer as tk

    text = charlm_data.build_stdlib_corpus(args.bytes)
    start = _util.clock()
    tk.split_pattern()
    pattern_s = _util.clock() - start
    has_hf = importlib.util.find_spec("tokenizers") is not None and not args.no_hf

    rows = []
    for vocab_size in args.vocab_sizes:
        state = {}

        def ours(vocab_size=vocab_size, state=state):
            state["tok"] = tk.BPETokenizer.train(text, vocab_size)

        def encode(state=state):
            fresh = tk.BPETokenizer(state["tok"].merges)  # an empty chunk cache
            state["n"] = len(fresh.encode(text))

        contenders = {"ours": ours, "encode": encode}
        if has_hf:
            contenders["hf"] = lambda vocab_size=vocab_size: hf_train(text, vocab_size)
        times = _util.interleave(contenders, args.rounds, warmup=0)
        n_bytes = len(text.encode("utf-8"))
        row = [f"{vocab_size:,}", f"{len(state['tok'].merges):,}", spread(times["ours"]), spread(times["encode"]),
               f"{n_bytes / _util.median(times['encode']) / 1e6:.1f}", f"{n_bytes / state['n']:.2f}"]
        row.append(spread(times["hf"]) if has_hf else "-")
        rows.append(row)
    headers = ["vocab size", "merges", "train s (ours)", "encode s", "encode MB/s", "bytes/token",
               "train s (HF tokenizers)"]
    title = (f"### Byte-level BPE on {len(text):,} characters of stdlib docstrings: median [min-max] of "
             f"{args.rounds} runs")
    return "\n".join([title, _util.markdown_table(headers, rows),
                      f"\nBuilding the split pattern's Unicode classes (once per process): {pattern_s:.2f} s."])


def step_cost(args) -> str:
    import types

    import numpy as np

    from demos import charlm_run, train_charlm

    cfg = charlm_run.TrainConfig()
    vocabularies = {"char (96)": 96, **{f"BPE {v:,}": v for v in args.vocab_sizes}}
    contenders, sizes = {}, {}
    for name, vocab in vocabularies.items():
        rng = np.random.default_rng(0)
        model, _ = charlm_run.build_model(cfg, vocab, rng)
        optimizer, scheduler = charlm_run.build_optimizer(model, cfg)
        run = types.SimpleNamespace(model=model, cfg=cfg, optimizer=optimizer, scheduler=scheduler, updating=False)
        x, y = rng.integers(0, vocab, size=(2, cfg.batch_size, cfg.block_size))
        contenders[name] = lambda run=run, x=x, y=y: train_charlm.train_step(run, x, y)
        sizes[name] = model.num_parameters()
    times = _util.interleave(contenders, args.step_rounds, warmup=2)
    char = _util.median(times["char (96)"])
    rows = [[name, f"{sizes[name]:,}", _util.fmt_ms(_util.median(times[name])), _util.fmt_ms(min(times[name])),
             f"{_util.median(times[name]) / char:.2f}"] for name in vocabularies]
    title = (f"### One training step of the main demo's GPT ({cfg.n_layer} layers, d_model {cfg.d_model}, "
             f"{cfg.batch_size} x {cfg.block_size} tokens), by vocabulary: {args.step_rounds} interleaved rounds")
    headers = ["tokenizer", "parameters", "step ms (median)", "step ms (min)", "x char (median)"]
    return title + "\n" + _util.markdown_table(headers, rows)


def hf_train(text: str, vocab_size: int):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.train_from_iterator([text], trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>"],
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                        show_progress=False))
    return tok


def spread(times: list[float]) -> str:
    return f"{_util.median(times):.2f} [{min(times):.2f}-{max(times):.2f}]"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.tokenizer", description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=2, help="BLAS threads (the tokenizer itself is pure Python)")
    p.add_argument("--bytes", type=int, default=1_000_000, help="size of the docstring corpus (1000000)")
    p.add_argument("--vocab-sizes", type=int, nargs="+", default=[1024, 2048, 4096])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--no-hf", action="store_true", help="skip Hugging Face tokenizers even if installed")
    p.add_argument("--step-cost", action="store_true", help="also time the demo's training step per vocabulary")
    p.add_argument("--step-rounds", type=int, default=15, help="interleaved rounds of --step-cost (15)")
    p.add_argument("--quick", action="store_true", help="50 kB, vocabulary 512, 1 round")
    args = p.parse_args(argv)
    if args.quick:
        args.bytes, args.vocab_sizes, args.rounds = 50_000, [512], 1
    _util.pin_threads(args.threads)
    print("# Byte-level BPE (models/tokenizer.py)")
    print(_util.machine_line(args.threads) + "\n")
    before = _util.load_average()
    table = measure(args)
    print(table)
    if args.step_cost:
        print("\n" + step_cost(args))
    print("\n" + _util.load_note(before, _util.load_average()))


if __name__ == "__main__":
    main()
