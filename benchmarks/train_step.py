"""One GPT training step (forward + backward + AdamW), minigrad against PyTorch eager, side by side.

    python -m benchmarks.train_step                      # configs S, M, L
    python -m benchmarks.train_step --configs M --steps 30 --census
    python -m benchmarks.train_step --profile            # cProfile one minigrad M step
    python -m benchmarks.train_step --quick              # a tiny config, a few steps (seconds)

How it measures
---------------
Each framework runs in its own worker process (``--worker``, started by this
script), so each one's peak RSS is its own and neither pays for the other's
imports. The parent tells the workers to take one step each, in turn
(minigrad, torch, minigrad, torch, ...): a burst of load from elsewhere on a
shared machine lands on both alike. Warmup steps are run first and not
counted. Every step is timed in three parts (forward incl. the loss, backward,
AdamW step + zero_grad); the tables quote medians and minima over the steps.

Matmul share. minigrad: the matmul op's ``forward`` (the one ``np.matmul`` call;
backward's matmuls go through the same op, as VJPs are Tensor ops) is wrapped
with a clock for the whole run; the wrapper costs well under a microsecond per
call. torch: ``torch.profiler`` records a few extra, untimed steps, and the self
time of ``aten::mm / bmm / addmm`` is summed. Both shares divide by the median
(unprofiled) step time.

Op census (minigrad, ``--census`` for the per-op table): one extra, untimed
step with every op's ``forward`` wrapped, counting calls per op and phase and
the time spent inside NumPy; the rest of the step is Python (the engine, the
VJPs' bookkeeping, the model code, the optimizer).

Same model: both workers build the same architecture, shapes and init scheme
(the table prints the parameter counts and first-step losses, which should
agree: ~ln(65) = 4.17 at init); the data are the same random token batches.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass

from . import _util
from ._util import clock

VOCAB_SIZE = 65


@dataclass(frozen=True)
class Config:
    name: str
    d_model: int
    n_layer: int
    n_head: int
    seq_len: int  # T, also the model's block_size
    batch: int  # B

    @property
    def tokens(self) -> int:
        return self.batch * self.seq_len

    def describe(self) -> str:
        return (f"{self.name}: d {self.d_model}, {self.n_layer} layers, {self.n_head} heads, T {self.seq_len}, "
                f"B {self.batch} ({self.tokens:,} tokens/step)")


CONFIGS = {
    "XS": Config("XS", 32, 1, 2, 16, 4),  # --quick only: a smoke test, not a measurement
    "S": Config("S", 64, 2, 4, 32, 16),
    "M": Config("M", 128, 4, 4, 64, 16),
    "L": Config("L", 256, 6, 8, 128, 8),
}


# --------------------------------------------------------------------------------------
# Building each framework's model (called inside the worker, after the threads are pinned)
# --------------------------------------------------------------------------------------


def token_batches(cfg: Config, n: int = 4, seed: int = 1234):
    """``n`` (inputs, targets) pairs of random token ids, int64 (B, T): the same in every worker."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        seq = rng.integers(0, VOCAB_SIZE, size=(cfg.batch, cfg.seq_len + 1), dtype=np.int64)
        out.append((np.ascontiguousarray(seq[:, :-1]), np.ascontiguousarray(seq[:, 1:])))
    return out


def models_gpt_available() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec("models.gpt") is not None
    except ImportError:
        return False


def build_minigrad(cfg: Config, which: str, gelu: str, fused_qkv: bool):
    """(model, label): ``models.gpt.GPT`` when ``which`` is "models" (or "auto" and it exists), else the stand-in."""
    if which == "auto":
        which = "models" if models_gpt_available() else "standin"
    if which == "models":
        from models.gpt import GPT, GPTConfig

        config = GPTConfig(vocab_size=VOCAB_SIZE, block_size=cfg.seq_len, n_layer=cfg.n_layer, n_head=cfg.n_head,
                           d_model=cfg.d_model, d_ff=4 * cfg.d_model, dropout=0.0, bias=True, tie_weights=True,
                           gelu_approximate=gelu)
        return GPT(config, seed=0), "models.GPT"
    from ._standin_gpt import StandInGPT

    model = StandInGPT(VOCAB_SIZE, cfg.seq_len, cfg.n_layer, cfg.n_head, cfg.d_model, 4 * cfg.d_model,
                       gelu_approximate=gelu, fused_qkv=fused_qkv, seed=0)
    return model, "stand-in GPT (benchmarks/_standin_gpt.py)"


def build_torch(cfg: Config, gelu: str, fused_qkv: bool):
    from .torch_gpt import TorchGPT

    return TorchGPT(VOCAB_SIZE, cfg.seq_len, cfg.n_layer, cfg.n_head, cfg.d_model, 4 * cfg.d_model,
                    gelu_approximate=gelu, fused_qkv=fused_qkv, seed=0)


# --------------------------------------------------------------------------------------
# The workers: one process per framework, driven through stdin/stdout (JSON lines)
# --------------------------------------------------------------------------------------


class MinigradWorker:
    """Holds a minigrad model + AdamW; ``step()`` times one training step, ``census()`` counts its ops."""

    def __init__(self, cfg: Config, which: str, gelu: str, fused_qkv: bool):
        import numpy as np

        import minigrad
        from minigrad.optim import AdamW

        self.np, self.mg = np, minigrad
        self.rss_after_import = _util.rss_mb()
        self.model, self.label = build_minigrad(cfg, which, gelu, fused_qkv)
        self.params = list(self.model.parameters())
        self.optimizer = AdamW(self.params, lr=3e-4, weight_decay=0.01)
        self.batches = token_batches(cfg)
        self.i = 0
        # The matmul clock: total seconds inside the matmul op's NumPy call, and the call count.
        self.matmul_s, self.matmul_calls = 0.0, 0
        matmul = minigrad.OPS["matmul"]
        plain_forward = matmul.forward

        def timed_forward(a, b):
            start = clock()
            out = plain_forward(a, b)
            self.matmul_s += clock() - start
            self.matmul_calls += 1
            return out

        matmul.forward = timed_forward

    def info(self) -> dict:
        return {"label": self.label, "params": int(sum(p.size for p in self.params)),
                "rss_after_import_mb": self.rss_after_import}

    def _train_step(self, phase_marks: list):
        x, y = self.batches[self.i % len(self.batches)]
        self.i += 1
        phase_marks.append(clock())
        logits, loss = self.model(x, y)
        phase_marks.append(clock())
        loss.backward()
        phase_marks.append(clock())
        self.optimizer.step()
        self.optimizer.zero_grad()
        phase_marks.append(clock())
        return float(loss.item()), str(logits.dtype), str(loss.dtype)

    def step(self) -> dict:
        self.matmul_s, self.matmul_calls = 0.0, 0
        marks: list[float] = []
        loss, logits_dtype, loss_dtype = self._train_step(marks)
        t0, t1, t2, t3 = marks
        return {"step": t3 - t0, "forward": t1 - t0, "backward": t2 - t1, "optimizer": t3 - t2,
                "matmul": self.matmul_s, "matmul_calls": self.matmul_calls, "loss": loss,
                "dtypes": [logits_dtype, loss_dtype]}

    def census(self) -> dict:
        """One step with every op's forward wrapped: calls and NumPy seconds per (op, phase), float64 outputs."""
        ops = self.mg.OPS
        phase = ["forward"]
        counts: dict[str, int] = {}
        seconds: dict[str, float] = {}
        float64: dict[str, int] = {}
        originals = {name: op.forward for name, op in ops.items()}

        def wrap(name, fn):
            def forward(*args, **kwargs):
                start = clock()
                out = fn(*args, **kwargs)
                elapsed = clock() - start
                key = f"{name}|{phase[0]}"
                counts[key] = counts.get(key, 0) + 1
                seconds[key] = seconds.get(key, 0.0) + elapsed
                if getattr(out, "dtype", None) == self.np.float64:
                    float64[key] = float64.get(key, 0) + 1
                return out
            return forward

        for name, op in ops.items():
            op.forward = wrap(name, originals[name])
        # Label the phases from inside the step: the model's forward, then backward, then AdamW.
        class PhaseMarks(list):
            def append(self, t):
                super().append(t)
                phase[0] = ("forward", "backward", "optimizer", "done")[min(len(self) - 1, 3)]

        marks = PhaseMarks()
        try:
            self._train_step(marks)
        finally:
            for name, op in ops.items():
                op.forward = originals[name]
        t0, t1, t2, t3 = marks
        return {"counts": counts, "seconds": seconds, "float64": float64,
                "wall": {"forward": t1 - t0, "backward": t2 - t1, "optimizer": t3 - t2}}


class TorchWorker:
    """Holds the PyTorch reference GPT + AdamW; same interface as ``MinigradWorker``."""

    MATMUL_KERNELS = ("aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm", "aten::addbmm")

    def __init__(self, cfg: Config, threads: int, gelu: str, fused_qkv: bool):
        import torch

        _util.torch_threads(torch, threads)
        self.torch = torch
        self.rss_after_import = _util.rss_mb()
        self.model = build_torch(cfg, gelu, fused_qkv)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=3e-4, weight_decay=0.01)
        self.batches = [(torch.from_numpy(x), torch.from_numpy(y)) for x, y in token_batches(cfg)]
        self.i = 0

    def info(self) -> dict:
        return {"label": f"torch {self.torch.__version__} eager",
                "params": int(sum(p.numel() for p in self.model.parameters())),
                "rss_after_import_mb": self.rss_after_import}

    def step(self) -> dict:
        x, y = self.batches[self.i % len(self.batches)]
        self.i += 1
        t0 = clock()
        logits, loss = self.model(x, y)
        t1 = clock()
        loss.backward()
        t2 = clock()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        t3 = clock()
        return {"step": t3 - t0, "forward": t1 - t0, "backward": t2 - t1, "optimizer": t3 - t2,
                "loss": float(loss.item()), "dtypes": [str(logits.dtype), str(loss.dtype)]}

    def census(self) -> dict:
        """One profiled step: seconds and calls of the matmul kernels (self time)."""
        from torch.profiler import ProfilerActivity, profile

        with _util.quiet_stderr(), profile(activities=[ProfilerActivity.CPU]) as prof:
            self.step()
        matmul_us, calls, ops = 0.0, 0, 0
        for event in prof.key_averages():
            ops += event.count
            if event.key in self.MATMUL_KERNELS:
                matmul_us += event.self_cpu_time_total
                calls += event.count
        return {"matmul": matmul_us * 1e-6, "matmul_calls": calls, "profiled_events": ops}


def run_worker(args) -> None:
    """The worker process: build, warm up, then answer "step" and "census" until "quit"."""
    cfg = CONFIGS[args.config]
    if args.worker == "minigrad":
        worker = MinigradWorker(cfg, args.model, args.gelu, args.fused_qkv)
    else:
        worker = TorchWorker(cfg, args.threads, args.gelu, args.fused_qkv)
    first_loss = worker.step()["loss"]
    for _ in range(args.warmup - 1):
        worker.step()
    commands = {"step": worker.step, "census": worker.census}
    _util.serve({**worker.info(), "first_loss": first_loss}, lambda command: commands[command]())


# --------------------------------------------------------------------------------------
# The parent: drive the workers in turn, then print the tables
# --------------------------------------------------------------------------------------


def measure(cfg: Config, frameworks: list[str], args) -> dict:
    options = ["--config", cfg.name, "--warmup", str(max(args.warmup, 1)), "--gelu", args.gelu,
               "--model", args.model] + (["--fused-qkv"] if args.fused_qkv else [])
    workers = []
    try:
        for framework in frameworks:
            workers.append(_util.Worker("benchmarks.train_step", framework, options, args.threads, args.malloc_tune))
        steps = {w.name: [] for w in workers}
        for _ in range(args.steps):
            for w in workers:  # in turn: A, B, A, B, ...
                steps[w.name].append(w.ask("step"))
        census = {w.name: [w.ask("census") for _ in range(args.census_steps)] for w in workers}
        final = {w.name: w.close() for w in workers}
    finally:
        for w in workers:
            w.kill()
    return {"config": asdict(cfg), "info": {w.name: w.hello for w in workers}, "steps": steps,
            "census": census, "final": final}


def _column(steps: list[dict], key: str) -> list[float]:
    return [s[key] for s in steps]


def report(result: dict, show_census: bool) -> str:
    cfg = Config(**result["config"])
    lines = [f"### {cfg.describe()}"]
    headers = ["framework", "params", "loss@init", "step ms (median)", "step ms (min)", "forward ms", "backward ms",
               "AdamW ms", "backward/forward", "tokens/s", "matmul ms (share)", "matmuls/step", "peak RSS MiB"]
    rows, medians = [], {}
    for framework, steps in result["steps"].items():
        info, census = result["info"][framework], result["census"][framework]
        step = _util.summary(_column(steps, "step"))
        medians[framework] = step["median"]
        fwd, bwd = _util.median(_column(steps, "forward")), _util.median(_column(steps, "backward"))
        if framework == "minigrad":
            matmul_s = _util.median(_column(steps, "matmul"))
            matmul_calls = steps[0]["matmul_calls"]
        else:
            matmul_s = _util.median(_column(census, "matmul"))
            matmul_calls = census[0]["matmul_calls"]
        dtypes = set(d for s in steps for d in s["dtypes"])
        label = info["label"] + ("" if dtypes == {"float32"} and framework == "minigrad" else
                                 "" if framework == "torch" else f" [dtypes {sorted(dtypes)}]")
        rows.append([label, f"{info['params']:,}", f"{info['first_loss']:.3f}", _util.fmt_ms(step["median"]),
                     _util.fmt_ms(step["min"]), _util.fmt_ms(fwd), _util.fmt_ms(bwd),
                     _util.fmt_ms(_util.median(_column(steps, "optimizer"))), f"{bwd / fwd:.2f}",
                     f"{cfg.tokens / step['median']:,.0f}",
                     f"{_util.fmt_ms(matmul_s)} ({matmul_s / step['median']:.0%})", str(matmul_calls),
                     f"{result['final'][framework]['peak_rss_mb']:.0f} "
                     f"({info['rss_after_import_mb']:.0f} after import)"])
    lines.append(_util.markdown_table(headers, rows))
    if "minigrad" in medians and "torch" in medians:
        mg, th = result["steps"]["minigrad"], result["steps"]["torch"]
        paired = _util.median([a["step"] / b["step"] for a, b in zip(mg, th)])
        lines.append(f"minigrad / torch: {medians['minigrad'] / medians['torch']:.2f}x by median step, "
                     f"{min(_column(mg, 'step')) / min(_column(th, 'step')):.2f}x by fastest step, "
                     f"{paired:.2f}x median of paired (same-round) ratios")
    if "minigrad" in result["census"]:
        lines.append(census_summary(result["census"]["minigrad"], show_census))
    return "\n".join(lines)


def _median_census(censuses: list[dict]) -> dict:
    """The census steps record the same ops; their times are noisy, so take each entry's median."""
    last = censuses[-1]
    return {"counts": last["counts"], "float64": last["float64"],
            "seconds": {k: _util.median([c["seconds"].get(k, 0.0) for c in censuses]) for k in last["seconds"]},
            "wall": {k: _util.median([c["wall"][k] for c in censuses]) for k in last["wall"]}}


def census_summary(censuses: list[dict], show_table: bool) -> str:
    """One paragraph (and optionally a table) on where a minigrad step's ops and time go."""
    c = _median_census(censuses)
    ops = {}
    for key, n in c["counts"].items():
        name, phase = key.split("|")
        entry = ops.setdefault(name, {"forward": 0, "backward": 0, "optimizer": 0, "seconds": 0.0})
        entry[phase] = entry.get(phase, 0) + n
        entry["seconds"] += c["seconds"][key]
    per_phase = {p: sum(n for k, n in c["counts"].items() if k.endswith("|" + p)) for p in ("forward", "backward")}
    numpy_s = {p: sum(s for k, s in c["seconds"].items() if k.endswith("|" + p)) for p in ("forward", "backward")}
    wall = c["wall"]
    text = [f"minigrad op census (instrumented steps, medians): {per_phase['forward']} ops in forward, "
            f"{per_phase['backward']} in backward. Inside NumPy: forward {_util.fmt_ms(numpy_s['forward'])} of "
            f"{_util.fmt_ms(wall['forward'])} ms, backward {_util.fmt_ms(numpy_s['backward'])} of "
            f"{_util.fmt_ms(wall['backward'])} ms; the rest is Python (engine, VJP bookkeeping, model code)."]
    if c["float64"]:
        text.append("float64 op outputs: " + ", ".join(f"{k} x{n}" for k, n in sorted(c["float64"].items())))
    else:
        text.append("float64 op outputs: none.")
    if show_table:
        rows = [[name, e["forward"], e["backward"], e.get("optimizer", 0), _util.fmt_ms(e["seconds"]),
                 _util.fmt_us(e["seconds"] / max(e["forward"] + e["backward"] + e.get("optimizer", 0), 1))]
                for name, e in sorted(ops.items(), key=lambda kv: -kv[1]["seconds"])]
        text.append(_util.markdown_table(["op", "calls in forward", "calls in backward", "in optimizer",
                                          "NumPy ms", "NumPy us/call"], rows))
    return "\n".join(text)


# --------------------------------------------------------------------------------------
# Profile mode
# --------------------------------------------------------------------------------------


def profile(args) -> None:
    """cProfile ``--profile-steps`` minigrad training steps (after warmup) and print the top functions."""
    import cProfile
    import pstats

    _util.pin_threads(args.threads)
    cfg = CONFIGS[args.configs[0]]
    worker = MinigradWorker(cfg, args.model, args.gelu, args.fused_qkv)
    for _ in range(max(args.warmup, 1)):
        worker.step()
    wall = _util.median([worker.step()["step"] for _ in range(3)])
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(args.profile_steps):
        worker.step()
    profiler.disable()
    print(f"cProfile of {args.profile_steps} minigrad training step(s), {cfg.describe()}; model: {worker.label}")
    print(f"unprofiled step: {_util.fmt_ms(wall)} ms (cProfile's own overhead inflates Python-heavy functions)")
    stats = pstats.Stats(profiler, stream=sys.stdout)
    stats.sort_stats(args.profile_sort).print_stats(args.profile_top)


# --------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.train_step", description=__doc__.split("\n")[0])
    p.add_argument("--configs", default="S,M,L", help="comma-separated: S, M, L (XS: tiny, for smoke tests)")
    p.add_argument("--steps", type=int, default=20, help="timed steps per framework (after warmup)")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    p.add_argument("--threads", type=int, default=2, help="BLAS / torch threads in each worker")
    p.add_argument("--gelu", default="tanh", choices=["tanh", "none"],
                   help="GELU form in both models (none = exact erf; slow in NumPy without SciPy)")
    p.add_argument("--model", default="auto", choices=["auto", "models", "standin"],
                   help="minigrad model: models.gpt.GPT, the benchmark's stand-in, or auto (GPT if present)")
    p.add_argument("--fused-qkv", action="store_true", help="stand-in and torch: one (d, 3d) Q/K/V matmul")
    p.add_argument("--no-torch", action="store_true", help="minigrad only, even if torch is installed")
    p.add_argument("--malloc-tune", action="store_true",
                   help="raise glibc's mmap/trim thresholds in the workers (GLIBC_TUNABLES; issue 8 finding 1)")
    p.add_argument("--census", action="store_true", help="print the per-op table of a minigrad step")
    p.add_argument("--census-steps", type=int, default=5, help="untimed instrumented/profiled steps")
    p.add_argument("--json", metavar="PATH", help="also write the raw measurements as JSON")
    p.add_argument("--quick", action="store_true", help="config XS, 3 steps: checks that everything runs")
    p.add_argument("--profile", action="store_true", help="cProfile a minigrad step (first config, default M)")
    p.add_argument("--profile-steps", type=int, default=1)
    p.add_argument("--profile-top", type=int, default=25)
    p.add_argument("--profile-sort", default="tottime", choices=["tottime", "cumulative", "ncalls"])
    p.add_argument("--worker", choices=["minigrad", "torch"], help=argparse.SUPPRESS)
    p.add_argument("--config", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick:
        args.configs, args.steps, args.warmup, args.census_steps = "XS", 3, 1, 1
    elif args.profile and args.configs == "S,M,L":
        args.configs = "M"
    args.configs = [c.strip().upper() for c in args.configs.split(",") if c.strip()]
    unknown = [c for c in args.configs if c not in CONFIGS]
    if unknown:
        p.error(f"--configs: unknown config(s) {unknown}; choose from {list(CONFIGS)}")
    if args.steps < 1 or args.census_steps < 1:
        p.error("--steps and --census-steps must be at least 1")
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.worker:
        run_worker(args)
        return
    if args.profile:
        profile(args)
        return
    frameworks = ["minigrad"]
    if args.no_torch:
        note = "torch: skipped (--no-torch)"
    elif _util.torch_available():
        frameworks.append("torch")
        note = "torch: installed"
    else:
        note = "torch: not installed, minigrad columns only (pip install torch==2.13.0 for the comparison)"
    print(f"# GPT training step: forward + backward + AdamW, float32, GELU {args.gelu}, vocab {VOCAB_SIZE}")
    print(_util.machine_line(args.threads) + f"; {note}" + ("; malloc tuned" if args.malloc_tune else ""))
    print(f"{args.steps} timed steps per framework after {args.warmup} warmup, run in turn "
          f"({' / '.join(frameworks)} / ...); medians unless marked min.\n")
    results = []
    for name in args.configs:
        result = measure(CONFIGS[name], frameworks, args)
        results.append(result)
        print(report(result, args.census), end="\n\n", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
