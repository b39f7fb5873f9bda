"""Each compiled kernel form against its NumPy form, at sizes on both sides of the thresholds.

    python -m benchmarks.kernel_forms                 # 16 to 262,144 elements, 2 threads
    python -m benchmarks.kernel_forms --threads 1
    python -m benchmarks.kernel_forms --quick         # few rounds (seconds): checks that it runs

Needs the [fast] extra (``pip install -e '.[fast]'``). For each kernel with a
compiled form and each size, the two forms are called in turn, round after
round (``_util.interleave``), on float32 arrays of ``size`` elements shaped as a
training step hands them ((rows, 64) activations, (rows, 65) logits, flat
parameters); the table gives the median microseconds per call and the ratio
compiled / NumPy. ``numba_forms.NUMPY_BELOW`` (the size below which a parallel
form hands the call to the NumPy form) and ``NUMPY_BELOW_FOR`` (``add``'s own)
are set to 0 here, so every size times the compiled loop: this is the
measurement the thresholds come from. (Each form runs 20 times in a row on the
same arrays, so they are in cache: a memory-bound loop such as ``add`` gains
more in a training step, where its operands are not.) Run it at
2 threads on an idle machine and on a busy one: the difference is the point.
"""

from __future__ import annotations

import argparse

from . import _util

SIZES = (16, 256, 1024, 4096, 16384, 65536, 262144)


def cases(size: int):
    """(kernel name, arguments) for float32 inputs of ``size`` elements."""
    import numpy as np

    rng = np.random.default_rng(0)
    cols = min(size, 64)
    x = rng.standard_normal((max(size // cols, 1), cols)).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)
    flat = [rng.standard_normal(size).astype(np.float32) for _ in range(3)]
    logits = rng.standard_normal((max(size // 65, 1), 65)).astype(np.float32)
    targets = rng.integers(0, 65, logits.shape[0])
    row_weight = np.full(logits.shape[0], 1 / logits.shape[0], np.float32)
    return [("add", (x, g)), ("gelu", (x, "tanh")), ("gelu_grad", (x, g, x, "tanh")), ("standardise", (x, 1e-5)),
            ("layer_norm_affine", (x, flat[0][:cols].copy(), flat[1][:cols].copy(), 1e-5)),
            ("softmax", (x,)), ("softmax_grad", (x, g)), ("cross_entropy", (logits, targets)),
            ("cross_entropy_grad", (logits, targets, row_weight)),
            ("adam_update", (flat[0], flat[1], flat[2], np.abs(flat[2]), 1e-3, 0.9, 0.999, 1e-8, 10, 0.999))]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=30, help="timed rounds per size (each: 20 calls of each form)")
    p.add_argument("--quick", action="store_true", help="3 rounds, two sizes")
    args = p.parse_args()
    _util.pin_threads(args.threads)
    import minigrad as mg
    from minigrad.kernels import KERNELS, policy

    policy.set_threads(args.threads)
    if mg.backend()["backend"] != "numba":
        raise SystemExit(f"no compiled forms to measure: {mg.backend()['why']}")
    from minigrad.kernels import numba_forms

    numba_forms.NUMPY_BELOW = 0  # (read at each call: every size times the compiled loop)
    numba_forms.NUMPY_BELOW_FOR = {}
    rounds, sizes = (3, SIZES[:2]) if args.quick else (args.rounds, SIZES)
    before = _util.load_average()
    rows = []
    for size in sizes:
        for name, arguments in cases(size):
            k = KERNELS[name]
            forms = {"numpy": k.fast, "compiled": k.compiled}
            times = _util.interleave({form: (lambda fn=fn, a=arguments: [fn(*a) for _ in range(20)])
                                      for form, fn in forms.items()}, rounds=rounds, warmup=2)
            numpy_us, compiled_us = (_util.median(times[form]) / 20 for form in forms)
            rows.append([name, f"{size:,}", _util.fmt_us(numpy_us), _util.fmt_us(compiled_us),
                         f"{compiled_us / numpy_us:.2f}"])
    print(_util.machine_line(args.threads))
    print(_util.markdown_table(["kernel", "elements", "NumPy us", "compiled us", "compiled / NumPy"], rows))
    print(_util.load_note(before, _util.load_average()))


if __name__ == "__main__":
    main()
