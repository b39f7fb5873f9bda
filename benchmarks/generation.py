"""Generation speed of ``models.GPT``: tokens/s with and without the KV cache as the context grows.

    python -m benchmarks.generation                 # M-sized model, contexts 16, 64, 192
    python -m benchmarks.generation --quick         # a tiny model (seconds)

Without the cache every new token runs the whole prefix through the model, so
its cost grows with the context; with it, only the new position is computed
(the keys and values of the earlier ones are cached), so the cost per token
should stay nearly flat.

For each prompt length P the model generates 1 and then ``--new`` tokens
greedily (batch 1). The first run is the prefill plus one step; the difference
divided by ``--new - 1`` is the marginal cost of one token at a context of
about P + new/2, quoted as ms/token and tokens/s. Cached and uncached runs take
turns (A, B, A, B, ...); each figure is the fastest of ``--rounds`` runs (a
difference of two medians would carry the noise of both).
"""

from __future__ import annotations

import argparse

from . import _util

SIZES = {  # name: d_model, n_layer, n_head, block_size, prompt lengths
    "M": (128, 4, 4, 256, (16, 64, 192)),
    "XS": (32, 1, 2, 32, (4, 12)),
}


def build(size: str, gelu: str):
    from models.gpt import GPT, GPTConfig

    d, n_layer, n_head, block, _ = SIZES[size]
    config = GPTConfig(vocab_size=65, block_size=block, n_layer=n_layer, n_head=n_head, d_model=d, d_ff=4 * d,
                       dropout=0.0, bias=True, tie_weights=True, gelu_approximate=gelu)
    return GPT(config, seed=0)


def measure(args) -> str:
    import numpy as np

    model = build(args.size, args.gelu)
    model.eval()
    rng = np.random.default_rng(0)
    headers = ["prompt length", "prefill+1 ms (cache)", "ms/token (cache)", "tokens/s (cache)",
               "ms/token (no cache)", "tokens/s (no cache)", "speed-up"]
    rows = []
    for prompt_len in SIZES[args.size][4]:
        prompt = rng.integers(0, 65, size=(1, prompt_len))

        def run(n, use_cache, prompt=prompt):
            return lambda: model.generate(prompt, n, temperature=0.0, use_cache=use_cache)

        same = np.array_equal(np.asarray(run(args.new, True)()), np.asarray(run(args.new, False)()))
        times = _util.interleave({"cache 1": run(1, True), "cache n": run(args.new, True),
                                  "plain 1": run(1, False), "plain n": run(args.new, False)}, args.rounds)
        t = {k: min(v) for k, v in times.items()}  # least disturbed: the per-token cost is a difference of two
        per_token_cache = (t["cache n"] - t["cache 1"]) / (args.new - 1)
        per_token_plain = (t["plain n"] - t["plain 1"]) / (args.new - 1)
        rows.append([f"{prompt_len}" + ("" if same else " (tokens differ!)"), _util.fmt_ms(t["cache 1"]),
                     _util.fmt_ms(per_token_cache), f"{1 / per_token_cache:,.0f}", _util.fmt_ms(per_token_plain),
                     f"{1 / per_token_plain:,.0f}", f"{per_token_plain / per_token_cache:.1f}x"])
    d, n_layer, n_head, block, _ = SIZES[args.size]
    title = (f"### Greedy generation, batch 1, {args.new} new tokens: d {d}, {n_layer} layers, {n_head} heads, "
             f"block_size {block}, vocab 65")
    return title + "\n" + _util.markdown_table(headers, rows)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.generation", description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--new", type=int, default=32, help="tokens generated per run")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--gelu", default="tanh", choices=["tanh", "none"])
    p.add_argument("--quick", action="store_true", help="a tiny model, 4 tokens, 2 rounds")
    args = p.parse_args(argv)
    args.size = "M"
    if args.quick:
        args.size, args.new, args.rounds = "XS", 4, 2
    if args.new < 2:
        p.error("--new must be at least 2 (the per-token cost is a difference of two runs)")
    _util.pin_threads(args.threads)
    print("# Generation with and without the KV cache (minigrad models.GPT)")
    print(_util.machine_line(args.threads) + "\n")
    print(measure(args))


if __name__ == "__main__":
    main()
