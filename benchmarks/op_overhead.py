"""What one op costs: fixed per-call overhead, matmul shapes, fused primitives; minigrad vs NumPy vs torch.

    python -m benchmarks.op_overhead            # all four tables
    python -m benchmarks.op_overhead --quick    # few repetitions (seconds): checks that it runs

1. **Tiny ops** on (4, 4) float32 arrays, where the arithmetic is nothing and
   every microsecond is overhead: NumPy alone; minigrad on tensors that do not
   require grad (no graph recorded); minigrad recording the graph; torch
   without and with grad.
2. **Backward per node**: ``y = x * 1.0001`` a hundred times, then
   ``y.sum().backward()``: forward microseconds per op, backward per node.
3. **Matmul shapes of the M config's step**, as the engine hands them to NumPy
   (3-D activations @ 2-D weights, batched attention), the same product folded
   into one 2-D matmul, and torch: BLAS time with no engine around it.
4. **Fused primitives at M shapes**, forward + backward of one op (GELU,
   layer norm, masked softmax, cross-entropy): minigrad's op against torch's.

NumPy + minigrad run in one worker process and torch in another (NumPy's and
torch's thread pools spin after each call and would steal each other's cores
in one process); the parent asks them in turn, round after round, and quotes
medians over the rounds.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field

from . import _util

SIDES = ("numpy", "torch")  # worker processes: NumPy + minigrad, and torch


@dataclass
class Case:
    section: str
    label: str
    contenders: dict = field(default_factory=dict)  # name -> zero-argument callable (this side's only)
    calls: int = 1  # calls per timed round (many for sub-microsecond work)
    flops: int = 0


def build_cases(side: str, calls: int) -> list[Case]:
    """Every case, with the contenders of ``side``; both sides list the same cases in the same order."""
    import numpy as np

    if side == "numpy":
        import minigrad as mg
        from minigrad import OPS  # (by name: where each op lives has changed over time)
    else:
        import torch
        import torch.nn.functional as F
    rng = np.random.default_rng(0)

    def r(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    cases = []

    # 1. Tiny ops
    a_np, b_np = r(4, 4), r(4, 4)
    tiny = {  # op -> (NumPy form, form for minigrad and torch tensors)
        "add": (lambda: a_np + b_np, lambda x, y: x + y),
        "mul": (lambda: a_np * b_np, lambda x, y: x * y),
        "matmul": (lambda: a_np @ b_np, lambda x, y: x @ y),
        "exp": (lambda: np.exp(a_np), lambda x, y: x.exp()),
        "sum": (lambda: a_np.sum(), lambda x, y: x.sum()),
        "softmax(axis=-1)": (lambda: _np_softmax(np, a_np), None),
    }
    if side == "numpy":
        a, b = mg.Tensor(a_np), mg.Tensor(b_np)
        ag, bg = mg.Tensor(a_np, requires_grad=True), mg.Tensor(b_np, requires_grad=True)
    else:
        ta, tb = torch.from_numpy(a_np), torch.from_numpy(b_np)
        tag, tbg = ta.clone().requires_grad_(), tb.clone().requires_grad_()
    for name, (numpy_form, tensor_form) in tiny.items():
        case = Case("tiny", name, calls=calls)
        if side == "numpy":
            form = tensor_form or (lambda x, y: x.softmax(axis=-1))
            case.contenders = {"NumPy": numpy_form, "minigrad": lambda f=form: f(a, b),
                               "minigrad, graph": lambda f=form: f(ag, bg)}
        else:
            form = tensor_form or (lambda x, y: torch.softmax(x, -1))
            case.contenders = {"torch": lambda f=form: f(ta, tb), "torch, grad": lambda f=form: f(tag, tbg)}
        cases.append(case)

    # 2. Backward per node: a chain of 100 multiplies
    chain = Case("chain", "y = y * 1.0001, 100 times", calls=max(1, calls // 200))
    if side == "numpy":
        def mg_chain(backward: bool):
            y = x = mg.Tensor(a_np, requires_grad=True)
            for _ in range(100):
                y = y * 1.0001
            if backward:
                y.sum().backward()
            return x

        chain.contenders = {"minigrad forward": lambda: mg_chain(False),
                            "minigrad forward+backward": lambda: mg_chain(True)}
    else:
        def torch_chain(backward: bool):
            y = x = ta.clone().requires_grad_()
            for _ in range(100):
                y = y * 1.0001
            if backward:
                y.sum().backward()
            return x

        chain.contenders = {"torch forward": lambda: torch_chain(False),
                            "torch forward+backward": lambda: torch_chain(True)}
    cases.append(chain)

    # 3. Matmul shapes of the M config: B 16, T 64, d 128, 4 heads (head_dim 32), d_ff 512, vocab 65
    B, T, d, H, d_ff, V = 16, 64, 128, 4, 512, 65
    hd = d // H
    x, h, w_fc, w_proj, wte = r(B, T, d), r(B, T, d_ff), r(d, d_ff), r(d_ff, d), r(V, d)
    q, k, v, att = r(B, H, T, hd), r(B, H, T, hd), r(B, H, T, hd), r(B, H, T, T)
    shapes = [  # label, inner dimension, the engine's form (NumPy), the same as one 2-D matmul, torch's form
        ("x @ W_fc  (16,64,128) @ (128,512)", d, lambda x, w, *_: x @ w, True, (x, w_fc)),
        ("h @ W_proj  (16,64,512) @ (512,128)", d_ff, lambda h, w, *_: h @ w, True, (h, w_proj)),
        ("tied head x @ wte.T  (16,64,128) @ (128,65)", d, lambda x, e, *_: x @ e.T, True, (x, wte)),
        ("weight grad x^T g  (128,1024) @ (1024,512)", B * T,
         lambda x, h, *_: x.reshape(-1, d).T @ h.reshape(-1, d_ff), False, (x, h)),
        ("Q K^T  (16,4,64,32) @ (16,4,32,64)", hd, lambda q, k, *_: q @ k.swapaxes(-1, -2), False, (q, k)),
        ("A V  (16,4,64,64) @ (16,4,64,32)", T, lambda a, v, *_: a @ v, False, (att, v)),
    ]
    for label, inner, form, foldable, arrays in shapes:
        flops = 2 * inner * form(*arrays).size  # one multiply-add per output element per inner index
        case = Case("matmul", label, calls=max(1, calls // 400), flops=flops)
        if side == "numpy":
            case.contenders = {"as the engine calls it": lambda f=form, a=arrays: f(*a)}
            if foldable:  # (B, T, k) @ (k, n) as one (B*T, k) @ (k, n) product
                case.contenders["folded to 2-D"] = lambda f=form, a=arrays: f(a[0].reshape(-1, a[0].shape[-1]),
                                                                              a[1])
        else:  # torch tensors have .T, .reshape and .swapaxes too: the same form runs on them
            tensors = tuple(torch.from_numpy(a) for a in arrays)
            case.contenders = {"torch": lambda f=form, t=tensors: f(*t)}
        cases.append(case)

    # 4. Fused primitives at M shapes, forward + backward of sum(out * out) (or of the loss itself)
    targets = rng.integers(0, V, size=B * T)
    future = np.triu(np.ones((T, T), dtype=bool), k=1)
    gamma, beta = np.ones(d, np.float32), np.zeros(d, np.float32)
    primitives = [("gelu, tanh form  (16,64,512)", (h,)), ("layer_norm  (16,64,128)", (x, gamma, beta)),
                  ("masked_fill + softmax  (16,4,64,64)", (att,)), ("cross_entropy  (1024,65)", (r(B * T, V),))]
    if side == "numpy":
        fns = [lambda t: OPS["gelu"](t, approximate="tanh"), lambda t, w, b: OPS["layer_norm"](t, w, b),
               lambda s: s.masked_fill(future, float("-inf")).softmax(axis=-1),
               lambda z: OPS["cross_entropy"](z, targets)]
        make, name = (lambda a: mg.Tensor(a, requires_grad=True)), "minigrad"
    else:
        tfuture, ttargets = torch.from_numpy(future), torch.from_numpy(targets)
        fns = [lambda t: F.gelu(t, approximate="tanh"), lambda t, w, b: F.layer_norm(t, (t.shape[-1],), w, b),
               lambda s: s.masked_fill(tfuture, float("-inf")).softmax(-1),
               lambda z: F.cross_entropy(z, ttargets)]
        make, name = (lambda a: torch.from_numpy(a).requires_grad_()), "torch"

    def forward_backward(fn, arrays, make=make):
        inputs = [make(a) for a in arrays]
        out = fn(*inputs)
        loss = (out * out).sum() if out.ndim else out
        loss.backward()

    for (label, arrays), fn in zip(primitives, fns):
        cases.append(Case("primitive", label, {name: lambda f=fn, a=arrays: forward_backward(f, a)}))
    return cases


def _np_softmax(np, x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


# --------------------------------------------------------------------------------------
# Worker and parent
# --------------------------------------------------------------------------------------


def run_worker(args) -> None:
    if args.worker == "torch":
        import torch

        _util.torch_threads(torch, args.threads)
    cases = build_cases(args.worker, args.calls)

    def handle(command: str) -> dict:
        case = cases[int(command.split()[1])]
        return {name: _util.time_per_call(fn, case.calls) for name, fn in case.contenders.items()}

    hello = [{"section": c.section, "label": c.label, "flops": c.flops} for c in cases]
    _util.serve({"cases": hello}, handle)


def measure(args, sides: list[str]) -> list[dict]:
    """For every case: its section, label, flops and each contender's median seconds per call."""
    workers = []
    try:
        for side in sides:
            workers.append(_util.Worker("benchmarks.op_overhead", side, ["--calls", str(args.calls)], args.threads))
        results = []
        for i, case in enumerate(workers[0].hello["cases"]):
            times: dict[str, list[float]] = {}
            for round_ in range(args.warmup + args.rounds):
                for w in workers:  # in turn: NumPy + minigrad, torch, NumPy + minigrad, ...
                    time.sleep(args.settle)  # the other worker's threads stop spinning (see train_step)
                    for name, seconds in w.ask(f"case {i}").items():
                        if round_ >= args.warmup:
                            times.setdefault(name, []).append(seconds)
            results.append({**case, "median": {name: _util.median(v) for name, v in times.items()}})
        for w in workers:
            w.close()
    finally:
        for w in workers:
            w.kill()
    return results


def tables(results: list[dict], use_torch: bool) -> str:
    def section(name):
        return [r for r in results if r["section"] == name]

    out = []
    headers = ["op on (4, 4) float32", "NumPy us", "minigrad us (no grad)", "minigrad us (records graph)"]
    headers += ["torch us (no grad)", "torch us (grad)"] if use_torch else []
    names = ["NumPy", "minigrad", "minigrad, graph"] + (["torch", "torch, grad"] if use_torch else [])
    rows = [[r["label"]] + [_util.fmt_us(r["median"][n]) for n in names] for r in section("tiny")]
    out.append("### Per-call overhead (microseconds per call)\n" + _util.markdown_table(headers, rows))

    headers = ["chain of 100 multiplies", "minigrad us"] + (["torch us"] if use_torch else [])
    rows = [["forward, per op"], ["backward, per node"]]
    chain = section("chain")[0]["median"]
    for framework in ["minigrad"] + (["torch"] if use_torch else []):
        forward = chain[f"{framework} forward"] / 100
        rows[0].append(_util.fmt_us(forward))
        rows[1].append(_util.fmt_us(chain[f"{framework} forward+backward"] / 100 - forward))
    out.append("### The engine's cost per graph node\n" + _util.markdown_table(headers, rows))

    headers = ["matmul of an M step", "NumPy ms (as the engine calls it)", "GFLOP/s", "NumPy ms (folded to 2-D)"]
    headers += ["torch ms", "torch GFLOP/s"] if use_torch else []
    rows = []
    for r in section("matmul"):
        m, engine = r["median"], r["median"]["as the engine calls it"]
        row = [r["label"], _util.fmt_ms(engine), f"{r['flops'] / engine / 1e9:.0f}",
               _util.fmt_ms(m["folded to 2-D"]) if "folded to 2-D" in m else "-"]
        if use_torch:
            row += [_util.fmt_ms(m["torch"]), f"{r['flops'] / m['torch'] / 1e9:.0f}"]
        rows.append(row)
    out.append("### Matmul shapes of the M config (BLAS alone, no engine)\n" + _util.markdown_table(headers, rows))

    headers = ["forward + backward at M shapes", "minigrad ms"] + (["torch ms", "minigrad / torch"] if use_torch
                                                                  else [])
    rows = []
    for r in section("primitive"):
        m = r["median"]
        row = [r["label"], _util.fmt_ms(m["minigrad"])]
        if use_torch:
            row += [_util.fmt_ms(m["torch"]), f"{m['minigrad'] / m['torch']:.1f}x"]
        rows.append(row)
    out.append("### Fused primitives (one op; backward of sum(out * out), or of the loss)\n"
               + _util.markdown_table(headers, rows))
    return "\n\n".join(out)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.op_overhead", description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=10, help="timed rounds per case (medians over them)")
    p.add_argument("--warmup", type=int, default=2, help="untimed rounds first")
    p.add_argument("--calls", type=int, default=2000, help="calls per round of a tiny op (fewer for big ones)")
    p.add_argument("--no-torch", action="store_true", help="NumPy and minigrad only")
    p.add_argument("--settle", type=float, default=0.1, help="seconds of pause before each worker's turn")
    p.add_argument("--quick", action="store_true", help="2 rounds, 200 calls: checks that everything runs")
    p.add_argument("--worker", choices=SIDES, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick:
        args.rounds, args.warmup, args.calls, args.settle = 2, 1, 200, 0.0
    if args.worker:
        run_worker(args)
        return
    use_torch = not args.no_torch and _util.torch_available()
    print("# Op overhead: minigrad vs NumPy" + (" vs torch" if use_torch else " (torch not installed or --no-torch)"))
    print(_util.machine_line(args.threads) + f"; medians of {args.rounds} interleaved rounds\n")
    results = measure(args, ["numpy", "torch"] if use_torch else ["numpy"])
    print(tables(results, use_torch))


if __name__ == "__main__":
    main()
