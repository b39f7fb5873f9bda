"""One GPT training step (forward + backward + AdamW), minigrad against PyTorch eager, side by side.

    python -m benchmarks.train_step                      # configs S, M, L
    python -m benchmarks.train_step --configs M --steps 30 --census
    python -m benchmarks.train_step --profile            # cProfile one minigrad M step
    python -m benchmarks.train_step --quick              # a tiny config, a few steps (seconds)
    python -m benchmarks.train_step --configs M --handwritten   # + a hand-written NumPy step: the floor
    python -m benchmarks.train_step --configs M --plain  # + a user's own loop, calling nothing but the model
    python -m benchmarks.train_step --configs M --plain --plain-user-threads  # ... in a shell exporting OMP_NUM_THREADS

``--plain`` adds a contender that is a learner's own script: the same model and
AdamW, forward/backward/step, no ``set_threads`` / ``tune_malloc`` call and no
``MINIGRAD_AUTOTUNE`` in its environment (the thread count is fixed for every
worker alike). Whatever the demos' start-up buys, it must get by itself (at its
first ``backward()``: ``minigrad/kernels/policy.py``).

``--handwritten`` adds a third contender, ``numpy_gpt.NumpyGPT``: the same model's
forward, backward and AdamW written out in plain NumPy, with no engine at all.

How it measures
---------------
Each framework runs in its own worker process (``--worker``, started by this
script), so each one's peak RSS is its own and neither pays for the other's
imports. The parent tells the workers to take one step each, in turn
(minigrad, torch, minigrad, torch, ...): a burst of load from elsewhere on a
shared machine lands on both alike. Before each step the parent pauses
(``--settle``, 0.25 s): BLAS and OpenMP threads spin for a while after their
last call, and on two cores the previous worker's spinning threads would slow
the next one down (measured: torch's S step 120 ms right after a minigrad step,
40 ms after a pause). Warmup steps are run first and not counted. Every
step is timed in three parts (forward incl. the loss, backward, AdamW step +
zero_grad); the tables quote medians and minima over the steps.

Matmul share. minigrad: the ``forward`` of the matmul, linear and
attention_weights ops (linear is one GEMM plus an in-place bias add; backward's
matmuls go through the matmul op, as VJPs are Tensor ops) is wrapped with a
clock for the whole run (attention_weights' softmax is fused into it, so inside
the clock); the wrapper costs well under a microsecond per call. Hand-written:
every GEMM of the model (the projections, attention's two batched products, the
head, and their gradients) goes through one clocked function. torch:
``torch.profiler`` records a few extra, untimed steps, and the self time of
``aten::mm / bmm / addmm`` is summed. The share is the median over steps of
each step's matmul time divided by that step's time.

Op census (minigrad, ``--census`` for the per-op tables): extra, untimed steps
(``--census-steps``) under ``OpCensus``, which counts and clocks every op by
phase: time inside NumPy, the engine's per-op overhead, Python in VJPs, the
rest. The quickest of these steps is reported (its parts add up to its whole).

Same model: both workers build the same architecture, shapes and init scheme
(the table prints the parameter counts and first-step losses, which should
agree: ~ln(65) = 4.17 at init); the data are the same random token batches.
"""

from __future__ import annotations

import argparse
import functools
import gc
import io
import json
import math
import os
import re
import time
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

    def title(self) -> str:
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


def build_minigrad(cfg: Config, gelu: str):
    """``models.GPT`` in the benchmark's shape: learned positions, LayerNorm, GELU MLP 4x, tied head."""
    from models.gpt import GPT, GPTConfig

    config = GPTConfig(vocab_size=VOCAB_SIZE, block_size=cfg.seq_len, n_layer=cfg.n_layer, n_head=cfg.n_head,
                       d_model=cfg.d_model, d_ff=4 * cfg.d_model, dropout=0.0, bias=True, tie_weights=True,
                       gelu_approximate=gelu)
    return GPT(config, seed=0)


def build_torch(cfg: Config, gelu: str):
    from .torch_gpt import TorchGPT

    return TorchGPT(VOCAB_SIZE, cfg.seq_len, cfg.n_layer, cfg.n_head, cfg.d_model, 4 * cfg.d_model,
                    gelu_approximate=gelu, seed=0)


# --------------------------------------------------------------------------------------
# The workers: one process per framework, driven through stdin/stdout (JSON lines)
# --------------------------------------------------------------------------------------


# The ops whose forward is one GEMM: the matmul clock times them. attention_weights is
# q @ k^T with the mask and softmax fused in, so its time includes that softmax;
# linear_weight_grad is a linear layer's weight gradient, g's rows.T @ x's rows.
GEMM_OPS = ("matmul", "linear", "attention_weights", "linear_weight_grad")


class MinigradWorker:
    """Holds a minigrad model + AdamW; ``step()`` times one training step, ``census()`` counts its ops."""

    def __init__(self, cfg: Config, gelu: str, plain: bool = False):
        if not plain:  # what the demos do first; a plain script (a user's own loop) calls nothing
            _util.tune_malloc()
        import minigrad
        from minigrad.optim import AdamW

        if not plain:
            _util.set_threads()

        self.mg = minigrad
        self.rss_after_import = _util.rss_mb()
        self.model = build_minigrad(cfg, gelu)
        self.label = "models.GPT" + (", plain script" if plain else "")
        self.params = list(self.model.parameters())
        self.optimizer = AdamW(self.params, lr=3e-4, weight_decay=0.01)
        self.batches = token_batches(cfg)
        self.i = 0
        # The matmul clock: total seconds inside the GEMM ops' NumPy calls, and the call count.
        self.matmul_s, self.matmul_calls = 0.0, 0
        for name in GEMM_OPS:
            self._clock_gemm(minigrad.OPS[name])

    def _clock_gemm(self, op) -> None:
        plain_forward = op.forward

        @functools.wraps(plain_forward)
        def timed_forward(*arrays, **params):
            start = clock()
            out = plain_forward(*arrays, **params)
            self.matmul_s += clock() - start
            self.matmul_calls += 1
            return out

        op.forward = timed_forward

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
        """One untimed step under ``OpCensus``: every op counted and clocked (see ``OpCensus``)."""
        with OpCensus(self.mg) as census:
            self._train_step(census.marks)
        return census.result()


class OpCensus:
    """Counts and clocks every op of one minigrad step, by phase, while installed (``with OpCensus(mg):``).

    Three clocks, each a thin wrapper put around the engine's functions and
    removed on exit:

    * ``numpy``: each op's ``forward`` (ndarrays in, ndarray out): pure NumPy time;
    * ``apply``: ``registry.apply``, which wraps every op call: NumPy time plus the
      engine's per-op overhead (wrapping inputs, recording the graph);
    * ``vjp``: each op's VJP, including the ops it runs.

    Phases: ``forward`` (the model's forward and loss), ``vjp`` (ops run inside a
    VJP), ``engine`` (ops backward runs outside VJPs: un-broadcasting sums,
    gradient accumulation), ``optimizer``. The wrappers cost about a microsecond
    per call, so the instrumented step is a little slower than a timed one.
    """

    PHASES = ("forward", "backward", "optimizer", "done")

    def __init__(self, minigrad):
        self.mg = minigrad
        self.phase = "forward"
        self.vjp_stack: list[str] = []  # the VJPs running now (innermost last)
        self.vjp_ops: dict[str, int] = {}  # op -> how many ops its VJPs ran
        self.records: dict[tuple, list] = {}  # (clock, op, phase) -> [calls, seconds]
        self.float64: dict[str, int] = {}  # op|phase -> outputs that were float64
        self.matmuls: dict[str, list] = {}  # "shape @ shape (layouts)" -> [calls, seconds, flops]
        self.gc = {"collections": [0, 0, 0], "seconds": 0.0}  # Python's cycle collector, per generation
        census = self

        class PhaseMarks(list):
            """The step appends a clock reading at each phase boundary; that is when the phase changes."""

            def append(self, t):
                super().append(t)
                census.phase = census.PHASES[min(len(self) - 1, 3)]

        self.marks = PhaseMarks()

    def _phase(self) -> str:
        if self.phase == "backward":
            return "vjp" if self.vjp_stack else "engine"
        return self.phase

    def _add(self, clock_name: str, op_name: str, seconds: float) -> None:
        entry = self.records.setdefault((clock_name, op_name, self._phase()), [0, 0.0])
        entry[0] += 1
        entry[1] += seconds

    def __enter__(self):
        import importlib

        import numpy as np

        # Every op call goes through ``registry.apply``; the call forms (minigrad/dialect/: x.sum(dim),
        # x.transpose(0, 1)...) hold their own name for it. (By module path: ``minigrad.<name>`` may be a function.)
        dialect = ("reductions", "extremes", "elementwise", "shapes", "casts", "functions")
        applies = [(m, "apply", m.apply) for m in (importlib.import_module("minigrad.registry"),
                                                   *(importlib.import_module(f"minigrad.dialect.{name}")
                                                     for name in dialect))]
        self.saved = [(op, "forward", op.forward) for op in self.mg.OPS.values()]
        self.saved += [(op, "vjp", op.vjp) for op in self.mg.OPS.values()]
        self.saved += applies

        def numpy_clock(op, fn):
            def forward(*arrays, **params):
                start = clock()
                out = fn(*arrays, **params)
                elapsed = clock() - start
                self._add("numpy", op.name, elapsed)
                if getattr(out, "dtype", None) == np.float64:
                    key = f"{op.name}|{self._phase()}"
                    self.float64[key] = self.float64.get(key, 0) + 1
                if op.name in GEMM_OPS:
                    self._add_matmul(op.name, arrays, out, elapsed)
                return out
            return forward

        def vjp_clock(op, fn):
            def vjp(*args, **params):
                self.vjp_stack.append(op.name)
                start = clock()
                try:
                    return fn(*args, **params)
                finally:
                    self.vjp_stack.pop()
                    self._add("vjp", op.name, clock() - start)
            return vjp

        plain_apply = applies[0][2]  # (both names hold the same function)

        def apply_clock(op, *inputs, **params):
            start = clock()
            out = plain_apply(op, *inputs, **params)
            self._add("apply", op.name, clock() - start)
            if self.vjp_stack:
                self.vjp_ops[self.vjp_stack[-1]] = self.vjp_ops.get(self.vjp_stack[-1], 0) + 1
            return out

        for op in self.mg.OPS.values():
            op.forward = numpy_clock(op, op.forward)
            op.vjp = vjp_clock(op, op.vjp)
        for owner, name, _ in applies:
            setattr(owner, name, apply_clock)
        gc.callbacks.append(self._gc_clock)
        return self

    def __exit__(self, *exc):
        gc.callbacks.remove(self._gc_clock)
        for owner, name, original in self.saved:
            setattr(owner, name, original)

    def _gc_clock(self, event: str, info: dict) -> None:
        if event == "start":
            self._gc_start = clock()
        else:
            self.gc["collections"][info["generation"]] += 1
            self.gc["seconds"] += clock() - self._gc_start

    def _add_matmul(self, name: str, arrays, out, seconds: float) -> None:
        def layout(a):
            return "C" if a.flags.c_contiguous else "F" if a.flags.f_contiguous else "strided"

        a, b = arrays[:2]
        if name == "linear":  # x @ W.T (+ bias)
            key = f"linear {a.shape} @ {b.shape}.T [{layout(a)}, {layout(b)}]"
        elif name == "attention_weights":  # softmax(q @ k^T * scale + bias)
            key = f"attention_weights {a.shape} @ {b.shape}.T, + softmax [{layout(a)}, {layout(b)}]"
        elif name == "linear_weight_grad":  # g's rows.T @ x's rows
            key = f"linear_weight_grad {a.shape}.T @ {b.shape}, rows summed [{layout(a)}, {layout(b)}]"
        else:
            key = f"{a.shape} @ {b.shape} [{layout(a)}, {layout(b)}]"
        entry = self.matmuls.setdefault(key, [0, 0.0, 0])
        entry[0] += 1
        entry[1] += seconds
        summed = math.prod(a.shape[:-1]) if name == "linear_weight_grad" else a.shape[-1]  # the contracted length
        entry[2] += 2 * out.size * summed

    def result(self) -> dict:
        t0, t1, t2, t3 = self.marks
        return {"records": [[*key, *value] for key, value in self.records.items()], "float64": self.float64,
                "matmuls": self.matmuls, "vjp_ops": self.vjp_ops, "gc": self.gc,
                "wall": {"forward": t1 - t0, "backward": t2 - t1, "optimizer": t3 - t2}}


class TorchWorker:
    """Holds the PyTorch reference GPT + AdamW; same interface as ``MinigradWorker``."""

    MATMUL_KERNELS = ("aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm", "aten::addbmm")

    def __init__(self, cfg: Config, threads: int, gelu: str):
        import torch

        _util.torch_threads(torch, threads)
        self.torch = torch
        self.rss_after_import = _util.rss_mb()
        self.model = build_torch(cfg, gelu)
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
                "loss": float(loss.item()), "dtypes": [str(logits.dtype).removeprefix("torch."),
                                                       str(loss.dtype).removeprefix("torch.")]}

    def census(self) -> dict:
        """One profiled step: seconds and calls of the matmul kernels (self time)."""
        from torch.profiler import ProfilerActivity, profile

        with _util.quiet_stderr(), profile(activities=[ProfilerActivity.CPU]) as prof:
            step = self.step()["step"]
        matmul_us, calls, ops = 0.0, 0, 0
        for event in prof.key_averages():
            ops += event.count
            if event.key in self.MATMUL_KERNELS:
                matmul_us += event.self_cpu_time_total
                calls += event.count
        return {"matmul": matmul_us * 1e-6, "matmul_calls": calls, "profiled_events": ops, "step": step}


class NumpyWorker:
    """The hand-written NumPy GPT (``numpy_gpt.NumpyGPT``, no autograd) + its AdamW; same interface as the others.

    The floor: what the same model's step costs in NumPy with no engine at all. Its
    weights are copied from the ``build_minigrad`` model (same init, same names);
    minigrad is imported for that only and never runs in the step. The matmul
    clock wraps the function every GEMM of the model goes through.
    """

    def __init__(self, cfg: Config, gelu: str):
        import numpy as np

        from .numpy_gpt import NumpyGPT

        _util.tune_malloc()  # as in minigrad's own worker
        model = build_minigrad(cfg, gelu)
        self.rss_after_import = _util.rss_mb()  # NumPy and minigrad loaded (the minigrad model is small)
        self.np = np
        self.model = NumpyGPT(model.state_dict(), cfg.n_head, gelu=gelu, lr=3e-4, weight_decay=0.01,
                              matmul=self._timed_matmul)
        del model
        self.batches = token_batches(cfg)
        self.i = 0
        self.matmul_s, self.matmul_calls = 0.0, 0

    def _timed_matmul(self, a, b, out=None):
        start = clock()
        result = self.np.matmul(a, b, out=out)
        self.matmul_s += clock() - start
        self.matmul_calls += 1
        return result

    def info(self) -> dict:
        return {"label": "hand-written NumPy", "params": int(sum(p.size for p in self.model.params.values())),
                "rss_after_import_mb": self.rss_after_import}

    def step(self) -> dict:
        x, y = self.batches[self.i % len(self.batches)]
        self.i += 1
        self.matmul_s, self.matmul_calls = 0.0, 0
        t0 = clock()
        logits, loss = self.model.forward(x, y)
        t1 = clock()
        self.model.backward()
        t2 = clock()
        self.model.step()
        t3 = clock()
        return {"step": t3 - t0, "forward": t1 - t0, "backward": t2 - t1, "optimizer": t3 - t2,
                "matmul": self.matmul_s, "matmul_calls": self.matmul_calls, "loss": float(loss),
                "dtypes": [str(logits.dtype), str(loss.dtype)]}

    def census(self) -> dict:
        """No ops to count, and the matmul clock runs on every timed step: just one more step."""
        return self.step()


def run_worker(args) -> None:
    """The worker process: build, warm up, then answer "step" and "census" until "quit"."""
    cfg = CONFIGS[args.config]
    if args.worker == "minigrad":
        worker = MinigradWorker(cfg, args.gelu, plain=args.plain_script)
    elif args.worker == "handwritten":
        worker = NumpyWorker(cfg, args.gelu)
    else:
        worker = TorchWorker(cfg, args.threads, args.gelu)
    first_loss = worker.step()["loss"]
    for _ in range(args.warmup - 1):
        worker.step()
    commands = {"step": worker.step, "census": worker.census}
    _util.serve({**worker.info(), "first_loss": first_loss}, lambda command: commands[command]())


# --------------------------------------------------------------------------------------
# The parent: drive the workers in turn, then print the tables
# --------------------------------------------------------------------------------------


def measure(cfg: Config, contenders: list[str], args) -> dict:
    """Run every contender's worker in turn; ``contenders``: "minigrad", "torch", "handwritten", "minigrad+untuned"."""
    options = ["--config", cfg.name, "--warmup", str(max(args.warmup, 1)), "--gelu", args.gelu]
    workers = []
    try:
        for name in contenders:
            kind, tuned = name.split("+")[0], not name.endswith("+untuned")
            root = args.baseline if name == "minigrad+baseline" else None
            env = {"MINIGRAD_BACKEND": "numpy"} if name == "minigrad+numpy" else None
            plain = ["--plain-script"] if name == "minigrad+plain" else []
            if plain:
                env = {"MINIGRAD_AUTOTUNE": ""}  # nothing set: what a user's shell has
                if args.plain_user_threads:
                    env["MINIGRAD_THREADS"] = ""  # (the BLAS / OpenMP variables stay: the count is the user's)
            workers.append(_util.Worker("benchmarks.train_step", kind, options + plain, args.threads, tuned,
                                        name=name, root=root, env=env))
        steps = {w.name: [] for w in workers}
        for _ in range(args.steps):
            for w in workers:  # in turn: A, B, A, B, ...
                time.sleep(args.settle)  # let the other worker's BLAS / OpenMP threads stop spinning
                for _ in range(args.burst):  # back to back, as a training loop runs them
                    steps[w.name].append(w.ask("step"))
        census = {w.name: [] for w in workers}
        for _ in range(args.census_steps):
            for w in workers:
                time.sleep(args.settle)
                census[w.name].append(w.ask("census"))
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
    lines = [f"### {cfg.title()}"]
    headers = ["framework", "params", "loss@init", "step ms (median)", "step ms (min)", "forward ms", "backward ms",
               "AdamW ms", "backward/forward", "tokens/s", "matmul ms (share)", "matmuls/step", "peak RSS MiB"]
    rows, medians = [], {}
    for name, steps in result["steps"].items():
        info, census = result["info"][name], result["census"][name]
        step = _util.summary(_column(steps, "step"))
        medians[name] = step["median"]
        fwd, bwd = _util.median(_column(steps, "forward")), _util.median(_column(steps, "backward"))
        # Matmul time and share, each step's matmul time over that same step's time (medians):
        # minigrad and the hand-written model clock every timed step; torch's profiler runs on the census steps only.
        measured = census if name == "torch" else steps
        matmul_s = _util.median(_column(measured, "matmul"))
        matmul_share = _util.median([s["matmul"] / s["step"] for s in measured])
        matmul_calls = measured[0]["matmul_calls"]
        dtypes = set(d for s in steps for d in s["dtypes"])
        label = info["label"] + {"minigrad+untuned": " (MINIGRAD_AUTOTUNE=0)", "minigrad+plain": "",
                                 "minigrad+numpy": " (MINIGRAD_BACKEND=numpy)",
                                 "minigrad+baseline": " (--baseline)"}.get(name, "")
        if dtypes != {"float32"}:
            label += f" [dtypes {sorted(dtypes)}!]"  # logits or loss not float32: an upcast somewhere
        rows.append([label, f"{info['params']:,}", f"{info['first_loss']:.3f}", _util.fmt_ms(step["median"]),
                     _util.fmt_ms(step["min"]), _util.fmt_ms(fwd), _util.fmt_ms(bwd),
                     _util.fmt_ms(_util.median(_column(steps, "optimizer"))), f"{bwd / fwd:.2f}",
                     f"{cfg.tokens / step['median']:,.0f}",
                     f"{_util.fmt_ms(matmul_s)} ({matmul_share:.0%})", str(matmul_calls),
                     f"{result['final'][name]['peak_rss_mb']:.0f} "
                     f"({info['rss_after_import_mb']:.0f} after import)"])
    lines.append(_util.markdown_table(headers, rows))
    lines.append(_util.load_note(*result["load_average"]))
    for a, b in (("minigrad", "torch"), ("minigrad+plain", "minigrad"), ("minigrad+plain", "torch"),
                 ("minigrad+numpy", "torch"), ("minigrad", "minigrad+numpy"),
                 ("minigrad+untuned", "torch"), ("minigrad", "minigrad+untuned"),
                 ("minigrad+baseline", "torch"), ("minigrad", "minigrad+baseline"),
                 ("minigrad+plain", "minigrad+baseline"), ("minigrad", "handwritten"),
                 ("handwritten", "torch")):
        if a in medians and b in medians:
            sa, sb = result["steps"][a], result["steps"][b]
            paired = _util.median([x["step"] / y["step"] for x, y in zip(sa, sb)])
            lines.append(f"{a} / {b}: {medians[a] / medians[b]:.2f}x by median step, "
                         f"{min(_column(sa, 'step')) / min(_column(sb, 'step')):.2f}x by fastest step, "
                         f"{paired:.2f}x median of paired (same-round) ratios")
    if "minigrad" in result["census"]:
        lines.append(census_summary(result["census"]["minigrad"], show_census))
    return "\n".join(lines)


def _quietest_census(censuses: list[dict]) -> dict:
    """The census step least disturbed by other load (the shortest), so its parts add up to its whole."""
    c = min(censuses, key=lambda c: sum(c["wall"].values()))
    return {"records": {tuple(r[:3]): (r[3], r[4]) for r in c["records"]}, "matmuls": c["matmuls"],
            "wall": c["wall"], "float64": c["float64"], "vjp_ops": c["vjp_ops"], "gc": c["gc"]}


def census_summary(censuses: list[dict], show_tables: bool) -> str:
    """Where a minigrad step's time goes: NumPy inside ops, the engine's per-op overhead, the rest."""
    c = _quietest_census(censuses)
    records, wall = c["records"], c["wall"]

    def total(clock_name, phases, what=1):  # what: 0 = calls, 1 = seconds
        return sum(v[what] for (k, _, p), v in records.items() if k == clock_name and p in phases)

    ms = _util.fmt_ms
    fwd_numpy, fwd_apply = total("numpy", ["forward"]), total("apply", ["forward"])
    bwd_numpy, bwd_apply = total("numpy", ["vjp", "engine"]), total("apply", ["vjp", "engine"])
    vjp_all, vjp_apply, engine_apply = total("vjp", ["engine"]), total("apply", ["vjp"]), total("apply", ["engine"])
    headers = ["minigrad phase", "wall ms", "ops run", "inside NumPy (op forwards)", "per-op engine overhead",
               "Python in VJPs", "the rest"]
    rows = [
        ["forward + loss", ms(wall["forward"]), total("apply", ["forward"], 0), ms(fwd_numpy),
         ms(fwd_apply - fwd_numpy), "-", f"{ms(wall['forward'] - fwd_apply)} (model / nn code)"],
        ["backward", ms(wall["backward"]), total("apply", ["vjp", "engine"], 0), ms(bwd_numpy),
         ms(bwd_apply - bwd_numpy), ms(vjp_all - vjp_apply),
         f"{ms(wall['backward'] - vjp_all - engine_apply)} (autograd loop)"],
        ["AdamW + zero_grad", ms(wall["optimizer"]), total("apply", ["optimizer"], 0), "-", "-", "-",
         f"{ms(wall['optimizer'])} (NumPy called directly)"],
    ]
    text = [f"minigrad step anatomy (the quickest of {len(censuses)} instrumented, untimed steps):",
            _util.markdown_table(headers, rows)]
    apply_calls = total("apply", ["forward", "vjp", "engine", "optimizer"], 0)
    numpy_calls = total("numpy", ["forward", "vjp", "engine", "optimizer"], 0)
    if apply_calls != numpy_calls:
        text.append(f"(note: {numpy_calls} op forwards ran but apply() was seen {apply_calls} times: the engine "
                    f"calls ops some other way now, so the overhead column is incomplete)")
    collections = c["gc"]["collections"]
    text.append(f"Python's garbage collector ran {sum(collections)} times during the step (generations 0/1/2: "
                f"{'/'.join(map(str, collections))}), {ms(c['gc']['seconds'])} ms in all.")
    if c["float64"]:
        text.append("float64 op outputs: " + ", ".join(f"{k} x{n}" for k, n in sorted(c["float64"].items())))
    else:
        text.append("float64 op outputs: none.")
    if show_tables:
        text += ["", _op_table(records, c["vjp_ops"]), "", _matmul_table(c["matmuls"])]
    return "\n".join(text)


def _op_table(records: dict, vjp_ops: dict) -> str:
    ops: dict[str, dict] = {}
    for (clock_name, op, phase), (calls, seconds) in records.items():
        entry = ops.setdefault(op, {"fwd": 0, "bwd": 0, "opt": 0, "numpy": 0.0, "apply": 0.0, "vjp_calls": 0,
                                    "vjp": 0.0})
        if clock_name == "apply":
            entry["apply"] += seconds
            entry[{"forward": "fwd", "optimizer": "opt"}.get(phase, "bwd")] += calls
        elif clock_name == "numpy":
            entry["numpy"] += seconds
        else:
            entry["vjp_calls"] += calls
            entry["vjp"] += seconds
    rows = []
    for name, e in sorted(ops.items(), key=lambda kv: -kv[1]["apply"]):
        calls = e["fwd"] + e["bwd"] + e["opt"]
        overhead = e["apply"] - e["numpy"]
        rows.append([name, e["fwd"], e["bwd"], _util.fmt_ms(e["numpy"]), _util.fmt_ms(overhead),
                     _util.fmt_us(overhead / max(calls, 1)), e["vjp_calls"] or "-",
                     vjp_ops.get(name, 0) if e["vjp_calls"] else "-",
                     _util.fmt_ms(e["vjp"]) if e["vjp_calls"] else "-"])
    headers = ["op", "calls in forward", "calls in backward", "NumPy ms", "overhead ms", "overhead us/call",
               "its VJP: calls", "ops its VJPs ran", "VJP ms (with its ops)"]
    return "Per op (one step):\n" + _util.markdown_table(headers, rows)


def _matmul_table(matmuls: dict) -> str:
    rows = [[key, calls, _util.fmt_ms(seconds), f"{flops / seconds / 1e9:.0f}" if seconds else "-"]
            for key, (calls, seconds, flops) in sorted(matmuls.items(), key=lambda kv: -kv[1][1])]
    return "Matmuls by shape (one step; layouts: C / F contiguous or strided):\n" + \
        _util.markdown_table(["a @ b [layouts]", "calls", "ms", "GFLOP/s"], rows)


# --------------------------------------------------------------------------------------
# Profile mode
# --------------------------------------------------------------------------------------


def profile(args) -> None:
    """cProfile ``--profile-steps`` minigrad training steps (after warmup) and print the top functions."""
    import cProfile
    import pstats

    _util.pin_threads(args.threads)
    cfg = CONFIGS[args.configs[0]]
    worker = MinigradWorker(cfg, args.gelu)
    for _ in range(max(args.warmup, 1)):
        worker.step()
    wall = _util.median([worker.step()["step"] for _ in range(3)])
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(args.profile_steps):
        worker.step()
    profiler.disable()
    print(f"cProfile of {args.profile_steps} minigrad training step(s), {cfg.title()}; model: {worker.label}")
    print(f"unprofiled step: {_util.fmt_ms(wall)} ms (cProfile's own overhead inflates Python-heavy functions)")
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats(args.profile_sort).print_stats(args.profile_top)
    print(name_op_functions(text.getvalue()))


def name_op_functions(text: str) -> str:
    """Every op's functions are called ``forward`` / ``vjp``: write ``ops.py:593(matmul.forward)`` instead."""
    import inspect

    import minigrad

    names = {}
    for op in minigrad.OPS.values():
        for kind in ("forward", "vjp"):
            code = inspect.unwrap(getattr(op, kind)).__code__
            names[(code.co_filename, code.co_firstlineno)] = f"{op.name}.{kind}"

    def rename(match):
        name = names.get((match.group(1), int(match.group(2))))
        return f"{match.group(1)}:{match.group(2)}({name or match.group(3)})"

    text = re.sub(r"(\S+):(\d+)\((forward|vjp)\)", rename, text)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    return text.replace(root, "").replace(os.path.dirname(os.__file__) + os.sep, "")


# --------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.train_step", description=__doc__.split("\n")[0])
    p.add_argument("--configs", default="S,M,L", help="comma-separated: S, M, L (XS: tiny, for smoke tests)")
    p.add_argument("--steps", type=int, default=20, help="timed steps per framework (after warmup)")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    p.add_argument("--threads", type=int, default=2, help="BLAS / torch threads in each worker")
    p.add_argument("--settle", type=float, default=0.25,
                   help="seconds of pause before each step, so the other worker's threads have stopped spinning")
    p.add_argument("--burst", type=int, default=1,
                   help="steps each worker runs back to back in its turn, each timed (1: every step follows a "
                        "pause, its threads asleep; a training loop runs its steps back to back, warm)")
    p.add_argument("--gelu", default="tanh", choices=["tanh", "none"],
                   help="GELU form in both models (none = exact erf; about 10x slower than tanh in NumPy)")
    p.add_argument("--no-torch", action="store_true", help="minigrad only, even if torch is installed")
    p.add_argument("--ab-backend", action="store_true",
                   help="also run minigrad with MINIGRAD_BACKEND=numpy (the [fast] backend against the default)")
    p.add_argument("--ab-malloc", action="store_true",
                   help="add a third worker: minigrad without its malloc tuning (MINIGRAD_AUTOTUNE=0)")
    p.add_argument("--plain", action="store_true",
                   help="add a worker running a user's own loop: models.GPT, AdamW, forward/backward/step, and no "
                        "set_threads or tune_malloc call (what it gets, it gets from the first backward())")
    p.add_argument("--plain-user-threads", action="store_true",
                   help="the --plain worker without MINIGRAD_THREADS: only OPENBLAS_/OMP_/MKL_NUM_THREADS=N, as a "
                        "user's shell that exports them has")
    p.add_argument("--plain-script", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--baseline", metavar="DIR",
                   help="add a worker running the minigrad of another checkout (before/after a change), e.g. "
                        "`git worktree add /tmp/before HEAD~1` then --baseline /tmp/before")
    p.add_argument("--handwritten", action="store_true",
                   help="add a worker running a hand-written NumPy GPT step (benchmarks/numpy_gpt.py, no autograd): "
                        "the floor minigrad is measured against")
    p.add_argument("--census", action="store_true", help="print the per-op table of a minigrad step")
    p.add_argument("--census-steps", type=int, default=5, help="untimed instrumented/profiled steps")
    p.add_argument("--json", metavar="PATH", help="also write the raw measurements as JSON")
    p.add_argument("--quick", action="store_true", help="config XS, 3 steps: checks that everything runs")
    p.add_argument("--profile", action="store_true", help="cProfile a minigrad step (first config, default M)")
    p.add_argument("--profile-steps", type=int, default=1)
    p.add_argument("--profile-top", type=int, default=25)
    p.add_argument("--profile-sort", default="tottime", choices=["tottime", "cumulative", "ncalls"])
    p.add_argument("--worker", choices=["minigrad", "torch", "handwritten"], help=argparse.SUPPRESS)
    p.add_argument("--config", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick:
        args.configs, args.steps, args.warmup, args.census_steps, args.settle = "XS", 3, 1, 1, 0.0
    elif args.profile and args.configs == "S,M,L":
        args.configs = "M"
    args.configs = [c.strip().upper() for c in args.configs.split(",") if c.strip()]
    unknown = [c for c in args.configs if c not in CONFIGS]
    if unknown:
        p.error(f"--configs: unknown config(s) {unknown}; choose from {list(CONFIGS)}")
    if args.baseline:
        args.baseline = os.path.abspath(args.baseline)
        if not os.path.isfile(os.path.join(args.baseline, "benchmarks", "train_step.py")):
            p.error(f"--baseline: {args.baseline} is not a minigrad checkout (no benchmarks/train_step.py)")
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
    contenders = (["minigrad"] + (["minigrad+plain"] if args.plain else [])
                  + (["minigrad+numpy"] if args.ab_backend else [])
                  + (["minigrad+untuned"] if args.ab_malloc else [])
                  + (["minigrad+baseline"] if args.baseline else []) + (["handwritten"] if args.handwritten else []))
    if args.no_torch:
        note = "torch: skipped (--no-torch)"
    elif _util.torch_available():
        contenders.append("torch")
        note = "torch: installed"
    else:
        note = "torch: not installed, minigrad columns only (pip install torch==2.13.0 for the comparison)"
    print(f"# GPT training step: forward + backward + AdamW, float32, GELU {args.gelu}, vocab {VOCAB_SIZE}")
    print(_util.machine_line(args.threads) + f"; {note}")
    burst = f", {args.burst} back to back per turn" if args.burst > 1 else ""
    print(f"{args.steps * args.burst} timed steps per framework after {args.warmup} warmup, run in turn{burst} "
          f"({' / '.join(contenders)} / ...); medians unless marked min.\n")
    results = []
    for name in args.configs:
        load_before = _util.load_average()
        result = measure(CONFIGS[name], contenders, args)
        result["load_average"] = [load_before, _util.load_average()]
        results.append(result)
        print(report(result, args.census), end="\n\n", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
