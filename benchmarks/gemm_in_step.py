"""Each matrix product of a GPT step, timed inside the step and again alone, beside PyTorch's product alone.

    python -m benchmarks.gemm_in_step                  # config M, 2 threads
    python -m benchmarks.gemm_in_step --configs S,M --threads 1
    python -m benchmarks.gemm_in_step --quick          # config XS, a few steps: checks that it runs

What a product costs depends on where it runs: the same call can take longer
inside a training step (its operands just written by the op before, the
BLAS threads woken after the Python between two products) than in a loop of
its own. For minigrad's product kernels (``matmul``, ``linear``,
``attention_weights`` and the ``linear_weight_grad`` op's product) this script
trains ``models.GPT`` for a few steps with a clock around each kernel call,
then calls each distinct product again alone, with the same arrays, in a loop;
and, when torch is installed, the same product on torch tensors of the same
layout, alone. The table gives per shape the calls per step and the median
milliseconds in the step, alone, and PyTorch's alone; and the totals per step.
The backend is whichever ``mg.backend()`` chose (``MINIGRAD_BACKEND=numpy`` for
the default install's).
"""

from __future__ import annotations

import argparse
import functools
import os
import time

from . import _util
from .train_step import CONFIGS, build_minigrad, token_batches

KERNELS = ("matmul", "linear", "attention_weights")


def _shape_key(name: str, args: tuple) -> tuple:
    import numpy as np

    def describe(a):
        if not isinstance(a, np.ndarray):
            return None
        return a.shape, "C" if a.flags.c_contiguous else "F" if a.flags.f_contiguous else "strided"

    return (name, *(describe(a) for a in args[:2]))


def measure(config: str, steps: int, repeats: int) -> dict:
    """Per product shape: calls per step, median ms in the step and alone (and torch's alone, or None)."""
    import numpy as np

    import minigrad as mg
    from minigrad import kernels
    from minigrad.optim import AdamW

    cfg = CONFIGS[config]
    model = build_minigrad(cfg, "tanh")
    optimizer = AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
    batches = token_batches(cfg)

    def step(i):
        x, y = batches[i % len(batches)]
        _, loss = model(x, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()

    for i in range(3):  # warm-up: allocations, the compiled forms, each shape's BLAS choice
        step(i)
    in_step, calls = {}, {}
    forms = {name: kernels.KERNELS[name].active for name in KERNELS}

    depth = [0]  # attention_weights' compiled form runs its q @ k^T through matmul: counted once, in it

    def clocked(name, form):
        def run(*args, **kwargs):
            if depth[0]:
                return form(*args, **kwargs)
            depth[0] += 1
            start = time.perf_counter()
            try:
                out = form(*args, **kwargs)
            finally:
                depth[0] -= 1
            key = _shape_key(name, args)
            in_step.setdefault(key, []).append(time.perf_counter() - start)
            calls.setdefault(key, (form, args, kwargs))
            return out
        return run

    for name, form in forms.items():
        kernels.KERNELS[name].active = clocked(name, form)
    try:
        for i in range(steps):
            step(i)
    finally:
        for name, form in forms.items():
            kernels.KERNELS[name].active = form
    torch = _torch()
    rows = []
    for key, seconds in in_step.items():
        form, args, kwargs = calls[key]
        alone = _median_seconds(functools.partial(form, *args, **kwargs), repeats)
        theirs = _torch_seconds(torch, key[0], args, kwargs, repeats) if torch is not None else None
        rows.append({"product": _describe(key, kwargs), "per_step": len(seconds) / steps,
                     "in_step_ms": 1e3 * float(np.median(seconds)), "alone_ms": 1e3 * alone,
                     "torch_ms": None if theirs is None else 1e3 * theirs})
    rows.sort(key=lambda r: -r["per_step"] * r["in_step_ms"])
    return {"config": config, "rows": rows, "backend": mg.backend()["gemm"]}


def _torch():
    if not _util.torch_available():
        return None
    import torch

    return torch


def _median_seconds(fn, repeats: int) -> float:
    import numpy as np

    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def _torch_seconds(torch, name: str, args: tuple, kwargs: dict, repeats: int) -> float:
    """The same product in PyTorch, on tensors laid out as minigrad's arrays (views of the same memory)."""
    a, b = (torch.from_numpy(x) for x in args[:2])
    if name == "matmul":
        return _median_seconds(lambda: a @ b, repeats)
    if name == "linear":
        bias = torch.from_numpy(args[2]) if len(args) > 2 and args[2] is not None else None
        return _median_seconds(lambda: torch.nn.functional.linear(a, b, bias), repeats)
    scale = args[3] if len(args) > 3 else kwargs.get("scale", 1.0)  # attention_weights: q, k, bias, scale
    mask = torch.from_numpy(args[2]) if len(args) > 2 and args[2] is not None else 0.0
    return _median_seconds(lambda: torch.softmax(a @ b.transpose(-1, -2) * scale + mask, dim=-1), repeats)


def _describe(key: tuple, kwargs: dict) -> str:
    name, (a_shape, a_layout), (b_shape, b_layout) = key
    if name == "linear":
        return f"linear {a_shape} @ {b_shape}.T [{a_layout}, {b_layout}]"
    if name == "attention_weights":
        return f"attention_weights {a_shape} @ {b_shape}.T + softmax [{a_layout}, {b_layout}]"
    return f"{a_shape} @ {b_shape} [{a_layout}, {b_layout}]"


def print_table(result: dict) -> None:
    rows = result["rows"]
    print(f"\n### {result['config']}: each product in the step and alone (products on: {result['backend']})")
    print("| product [layouts] | calls/step | in the step, ms | alone, ms | in step / alone | PyTorch alone, ms |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        theirs = "-" if r["torch_ms"] is None else f"{r['torch_ms']:.3f}"
        print(f"| {r['product']} | {r['per_step']:g} | {r['in_step_ms']:.3f} | {r['alone_ms']:.3f} | "
              f"{r['in_step_ms'] / r['alone_ms']:.2f}x | {theirs} |")
    total_in = sum(r["per_step"] * r["in_step_ms"] for r in rows)
    total_alone = sum(r["per_step"] * r["alone_ms"] for r in rows)
    theirs = [r["per_step"] * r["torch_ms"] for r in rows if r["torch_ms"] is not None]
    line = f"per step: {total_in:.1f} ms in the step, {total_alone:.1f} ms alone"
    if len(theirs) == len(rows):
        line += f", PyTorch's {sum(theirs):.1f} ms alone"
    print(line)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--configs", default="M", help="comma-separated: S, M, L (XS: tiny)")
    p.add_argument("--steps", type=int, default=10, help="clocked training steps")
    p.add_argument("--repeats", type=int, default=50, help="calls of each product alone")
    p.add_argument("--threads", type=int, default=2, help="BLAS / OpenMP / torch threads")
    p.add_argument("--quick", action="store_true", help="config XS, 2 steps, 5 repeats: checks that it runs")
    args = p.parse_args(argv)
    if args.quick:
        args.configs, args.steps, args.repeats = "XS", 2, 5
    _util.pin_threads(args.threads)
    os.environ["MINIGRAD_THREADS"] = str(args.threads)
    if _util.torch_available():
        import torch

        _util.torch_threads(torch, args.threads)
    print(f"# Products in a GPT step and alone, {args.threads} thread(s), {args.steps} steps")
    for config in args.configs.split(","):
        print_table(measure(config.strip(), args.steps, args.repeats))


if __name__ == "__main__":
    main()
