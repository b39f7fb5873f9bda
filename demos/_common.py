"""Helpers shared by the demos: the command line, threads, finite differences, and saving pictures.

Kept apart so each demo reads as the text it retells, without this plumbing.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import shlex
import shutil
import sys
from pathlib import Path

import numpy as np

import minigrad as mg
from minigrad.files import atomic_write
from minigrad.kernels import policy


def parse_args(argv, demo: str, description: str, pictures: bool = True) -> argparse.Namespace:
    """The demo's command line: ``--help``, and ``--out DIR`` (default ``out/<demo>``, git-ignored) for pictures.

    ``argv=None`` reads ``sys.argv``, except inside a Jupyter kernel (a lesson opened
    as a notebook), whose ``sys.argv`` holds the kernel's own options: there the
    defaults are used.
    """
    parser = argparse.ArgumentParser(prog=f"python -m demos.{demo}", description=description,
                                     epilog=None if pictures else "This lesson only prints; it writes no files.")
    if pictures:
        parser.add_argument("--out", type=Path, default=out_folder(demo),
                            help="folder for the pictures (default: %(default)s)")
    if argv is None and in_notebook():
        argv = []
    args = parser.parse_args(argv)
    set_threads(say=False, prog=parser.prog)
    return args


def set_threads(say: bool = True, prog: str | None = None) -> policy.ThreadChoice:
    """Choose BLAS threads for this run (``minigrad/kernels/policy.py``: measured on the run's own steps).

    ``say``: print one line with the choice and how to override it, and another
    once the first steps have been timed and whenever a later measurement changes
    the count (the training demos do; one that keeps it prints nothing). A
    ``MINIGRAD_THREADS`` that is not a thread count is the one-line ``<prog>: error: ...`` and exit code 2.
    """
    try:
        choice = policy.set_threads()
    except ValueError as err:
        script = Path(sys.argv[0]) if sys.argv and sys.argv[0].endswith(".py") else None
        prog = prog or (f"python -m demos.{script.stem}" if script else "minigrad")  # the command that ran
        print(f"{prog}: error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    if say:
        count = "as the environment set" if choice.threads is None else f"{choice.threads}"
        print(f"threads: {count} ({choice.reason}; MINIGRAD_THREADS=N to choose)")
        if compiles_this_run():
            print("backend: numba compiles the [fast] backend's kernels on this first run (some seconds, in the "
                  "first steps); they are cached for later runs")
        tuner = policy.tuner
        if tuner is not None and not os.environ.get("MINIGRAD_THREADS_VERBOSE"):
            tuner.say = say_when_the_count_changes(tuner)
    return choice


def compiles_this_run() -> bool:
    """Whether the [fast] backend is on and numba's cache holds none of its kernels yet (the first run)."""
    if mg.backend()["backend"] != "numba":
        return False
    from numba.core.dispatcher import Dispatcher

    from minigrad.kernels import numba_forms

    try:  # each kernel's cache index lies in one folder: beside the source, or NUMBA_CACHE_DIR's, or the user's
        folder = next(f for f in vars(numba_forms).values() if isinstance(f, Dispatcher))._cache.cache_path
    except (StopIteration, AttributeError):  # (another numba's layout: say nothing rather than guess)
        return False
    return not any(Path(folder).glob("numba_forms.*.nbi"))


def say_when_the_count_changes(tuner: policy.ThreadTuner):
    """The tuner's ``say``: print its line after the first measurement, and after a later one only if that
    changed the count (a noisy machine is measured again every few hundred steps; most keep the count)."""
    shown = []

    def say(line: str) -> None:
        if not shown or shown[-1] != tuner.chosen:
            shown.append(tuner.chosen)
            print(f"threads: {line}")

    return say


def python_command() -> str:
    """This interpreter, as a command that works typed in the current folder.

    ``python`` when that is the one on PATH (an activated venv); otherwise its path, relative
    when it is under the current folder (``.venv/bin/python``): a plain ``python`` would be the
    system's, without the project's packages.
    """
    exe = sys.executable
    if not exe:
        return "python"
    on_path = shutil.which("python")
    if on_path and os.path.abspath(on_path) == os.path.abspath(exe):
        return "python"
    relative = os.path.relpath(exe)
    if relative.startswith(".."):
        return shlex.quote(exe)
    return shlex.quote(relative if os.sep in relative else os.path.join(".", relative))


ROOT = Path(__file__).resolve().parent.parent  # the repository


def out_folder(demo: str) -> Path:
    """``out/<demo>``: under the current folder for a script; under the repository's root in a notebook,
    whose kernel starts in ``demos/`` (so the pictures land in the ``out/`` the README names, not ``demos/out/``)."""
    return (ROOT / "out" / demo) if in_notebook() else Path("out") / demo


def show(picture) -> None:
    """Display ``picture`` (a graph, a figure, a stepper) inline when running in a notebook; a script does nothing."""
    if not in_notebook():
        return
    from IPython.display import Image, display

    if type(picture).__name__ == "Figure":  # a matplotlib figure, whatever the backend: shown as its PNG
        import io

        png = io.BytesIO()
        picture.savefig(png, format="png", dpi=80, bbox_inches="tight")
        picture = Image(png.getvalue())
    display(picture)


def in_notebook() -> bool:
    """True inside a Jupyter (or VS Code interactive) kernel, where cells run one by one.

    ipykernel merely imported (by a test, a tool) is not a kernel: a kernel's shell is running.
    """
    if "ipykernel" not in sys.modules:
        return False
    from IPython import get_ipython

    return getattr(get_ipython(), "kernel", None) is not None


def check_model_sizes(parser: argparse.ArgumentParser, args: argparse.Namespace, names, minimum=None) -> None:
    """``parser.error`` unless each ``args.<name>`` is at least 1 (or ``minimum[name]``) and n_head divides d_model."""
    for name in names:
        least = (minimum or {}).get(name, 1)
        if getattr(args, name) < least:
            parser.error(f"--{name.replace('_', '-')} must be at least {least}")
    if args.d_model % args.n_head:
        parser.error(f"--d-model {args.d_model} must be divisible by --n-head {args.n_head}")


@contextlib.contextmanager
def counting_matmul_flops():
    """Count the floating-point work of the matrix products run inside: ``with ... as count: ...; count[0]``.

    A product of (..., m, k) and (k, n) arrays is 2 m k n flops (a multiply and
    an add for each term), summed over the batch. Work counted this way is the
    same on every run, however busy the machine is; seconds are not. Every
    ``@`` of minigrad goes through the table's ``matmul`` op, whose forward is
    wrapped here for the duration.
    """
    op = mg.OPS["matmul"]
    plain_forward, count = op.forward, [0]

    def counted(a, b, **params):
        batch = math.prod(np.broadcast_shapes(a.shape[:-2], b.shape[:-2])) if a.ndim > 2 or b.ndim > 2 else 1
        m = a.shape[-2] if a.ndim > 1 else 1
        n = b.shape[-1] if b.ndim > 1 else 1
        count[0] += 2 * batch * m * a.shape[-1] * n
        return plain_forward(a, b, **params)

    op.forward = counted
    try:
        yield count
    finally:
        op.forward = plain_forward


# --------------------------------------------------------------------------------------
# Finite differences: the independent check on every gradient the demos compute
# --------------------------------------------------------------------------------------


def central_difference_grads(fn, inputs, eps: float = 1e-6) -> list[np.ndarray]:
    """d fn / d input for a scalar ``fn(*inputs)``, element by element: (f(x+eps) - f(x-eps)) / 2 eps."""
    grads = []
    with mg.no_grad():
        for x in inputs:
            x.data = np.ascontiguousarray(x.data)
            flat = x.data.reshape(-1)  # a view: writing to it perturbs the input
            g = np.zeros(flat.size)
            for i in range(flat.size):
                orig = flat[i]
                flat[i] = orig + eps
                plus = fn(*inputs).item()
                flat[i] = orig - eps
                minus = fn(*inputs).item()
                flat[i] = orig
                g[i] = (plus - minus) / (2 * eps)
            grads.append(g.reshape(x.shape))
    return grads


def backprop_vs_finite_differences(fn, inputs, eps: float = 1e-6) -> list[float]:
    """For each input, the largest |backprop gradient - central difference| (float64 inputs)."""
    for i, x in enumerate(inputs):
        if x.dtype != np.float64 or not x.requires_grad:
            raise ValueError(f"backprop_vs_finite_differences: input {i} must be float64 with requires_grad "
                             f"(got {x.dtype}, requires_grad={x.requires_grad})")
    backprop = mg.grad(fn(*inputs), list(inputs))
    numeric = central_difference_grads(fn, inputs, eps)
    return [float(np.abs(b.data - n).max()) for b, n in zip(backprop, numeric)]


def central_difference_jacobian(fn, x, eps: float = 1e-6) -> np.ndarray:
    """d fn(x) / d x of shape ``fn(x).shape + x.shape``, one input element at a time."""
    with mg.no_grad():
        out_shape = fn(x).shape
        x.data = np.ascontiguousarray(x.data)
        flat = x.data.reshape(-1)  # a view: writing to it perturbs the input
        columns = []
        for i in range(flat.size):
            orig = flat[i]
            flat[i] = orig + eps
            plus = fn(x).data.copy()
            flat[i] = orig - eps
            minus = fn(x).data.copy()
            flat[i] = orig
            columns.append(((plus - minus) / (2 * eps)).reshape(-1))
    return np.stack(columns, axis=-1).reshape(out_shape + x.shape)


# --------------------------------------------------------------------------------------
# Pictures (matplotlib is optional: demos print their numbers without it)
# --------------------------------------------------------------------------------------


def pyplot():
    """matplotlib.pyplot, or None (and one line said) when not installed.

    A script gets the file-only Agg backend; a notebook keeps its own, so the pictures show inline too.
    """
    try:
        import matplotlib

        if not in_notebook():
            matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: plots skipped (pip install matplotlib to draw them)")
        return None
    return plt


def save_figure(fig, path: Path) -> Path:
    """Write ``fig`` to ``path`` atomically (a temporary file, then a rename), and close it."""
    import matplotlib.pyplot as plt

    path = Path(path)
    if in_notebook():  # show it inline as well: the file alone would be out of sight
        from IPython.display import display

        display(fig)
    try:
        atomic_write(path, lambda f: fig.savefig(f, format=path.suffix.lstrip(".") or "png", dpi=110,
                                                 bbox_inches="tight"), make_dirs=True)
    finally:
        plt.close(fig)
    return path
