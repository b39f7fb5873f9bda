"""The grading machinery the rubrics share: a learner's op in the real table, compared with the engine's.

A rubric (``rubrics.py``, one per exercise) never trusts one number. For each thing it grades it computes the
engine's own answer (the op in ``minigrad/ops.py`` or ``fused/``, ``mg.grad``,
``optim.AdamW``...) on generated inputs of several shapes, in float32 and
float64, and compares; the gradients are also held against finite differences
(``mg.gradcheck``) and, where the learner's VJP must itself be differentiable,
second order (``mg.gradgradcheck``). When something is wrong it raises
``Wrong``, whose message says which op, which input, the worst index, the
expected and the received value, and where to read about it.
"""

from __future__ import annotations

import contextlib
import re
import traceback

import numpy as np

import minigrad as mg
from minigrad.ops import OPS, op, unregister

DOCS = {
    "vjp": "docs/adding_an_op.md (the VJP: one gradient per input, written in Tensor ops)",
    "broadcast": "docs/backward.md, section 4 (broadcasts are summed back)",
    "sort": "docs/backward.md, section 2 (backward sorts the graph)",
    "loop": "docs/backward.md, section 5 (the whole loop)",
    "vjp_rule": "docs/backward.md, section 3 (each node's VJP)",
    "fused": "docs/adding_an_op.md, 'A fused op, with its composite'",
    "rnn": "the lesson demos/rnn_vanishing_gradient.py, sections 2 and 5",
    "adam": "minigrad/optim/adam.py (the update, as PyTorch writes it) and minigrad/optim/clip.py",
    "kv": "minigrad/nn/attention.py (KVCache) and models/gpt.py (generation with the cache)",
    "jvp": "minigrad/autograd/functional.py ('Forward mode here is double backward')",
    "softmax": "minigrad/ops.py, the blocks softmax and log_softmax (stable: shift by the max)",
    "checkpoint": "minigrad/autograd/checkpoint.py and the lesson demos/memory_lesson.py, section 4",
    "allreduce": "the lesson demos/data_parallel_lesson.py, section 2 (the ring, step by step)",
    "scaler": "the lesson demos/precision_lesson.py, section 3 (dynamic loss scaling, and over micro-batches), "
              "and exercise 12's docstring (unscale_ before clipping, the schedule per step)",
    "flash": "the lesson demos/flash_attention_lesson.py, sections 1 (the online softmax; the merge) and 3 (the "
             "backward, tile by tile)",
    "function": "docs/adding_an_op.md, 'Outside the table: autograd.Function', and minigrad/autograd/function.py",
}

DTYPES = (np.float64, np.float32)
TOLERANCE = {np.float64: dict(rtol=1e-7, atol=1e-9), np.float32: dict(rtol=2e-4, atol=2e-5)}


class Wrong(AssertionError):
    """A rubric found a fault; the message says what, where, and where to read about it."""


def hint(key: str) -> str:
    return f"\n  Read: {DOCS[key]}"


def fail(what: str, detail: str, hint_key: str | None = None) -> None:
    raise Wrong(f"{what}: {detail}" + (hint(hint_key) if hint_key else ""))


def compare(what: str, expected, got, hint_key: str | None = None, rtol=None, atol=None, dtype=None) -> None:
    """``got`` equals ``expected`` within the dtype's tolerance, else ``Wrong`` naming the worst entry."""
    e = _array(expected)
    g = learner_array(what, got, f"an array of shape {e.shape}", hint_key)
    if e.shape != g.shape:
        fail(what, f"expected shape {e.shape}, got shape {g.shape}" +
             (" (a gradient has the shape of its input: sum a broadcast gradient back)" if e.size < g.size else ""),
             hint_key)
    dtype = dtype or (e.dtype.type if e.dtype.kind == "f" else np.float64)
    tol = TOLERANCE.get(dtype, TOLERANCE[np.float64])
    rtol = tol["rtol"] if rtol is None else rtol
    atol = tol["atol"] if atol is None else atol
    if e.dtype.kind == "f" and g.dtype.kind == "f" and e.dtype != g.dtype:
        fail(what, f"expected dtype {e.dtype}, got {g.dtype} (keep the input's dtype: a float64 constant "
                   f"upcasts float32)", hint_key)
    bad = ~np.isclose(g, e, rtol=rtol, atol=atol, equal_nan=True)
    if bad.any():
        excess = np.where(bad, np.abs(g.astype(np.float64) - e), -np.inf)
        excess = np.where(np.isnan(excess), np.inf, excess)
        index = np.unravel_index(int(np.argmax(excess)), e.shape) if e.shape else ()
        where = tuple(int(i) for i in index)
        fail(what, f"at index {where}, expected {e[index]:.8g}, got {g[index]:.8g} "
                   f"({int(bad.sum())} of {e.size} entries wrong; shape {e.shape}, {e.dtype})", hint_key)


def _array(x) -> np.ndarray:
    if isinstance(x, mg.Tensor):
        return x.data
    return np.asarray(x)


def learner_array(what: str, got, expected: str = "an array", hint_key: str | None = None) -> np.ndarray:
    """What the learner returned as a numeric ndarray, or ``Wrong`` saying what came back (None, a string...)."""
    if got is None:
        fail(what, f"returned None, expected {expected} (is a `return` missing?)", hint_key)
    try:
        g = _array(got)
    except Exception:  # a ragged list, say
        g = None
    if g is None or g.dtype.kind not in "biuf":
        fail(what, f"returned {_kind(got)}, expected {expected} (a Tensor or ndarray of numbers)", hint_key)
    return g


def learner_sequence(what: str, got, length: int | None = None, of: str = "items", hint_key: str | None = None):
    """What the learner returned as a list or tuple (of ``length`` items), or ``Wrong`` saying what came back."""
    count = f"{length} {of}" if length is not None else of
    if got is None:
        fail(what, f"returned None, expected a list or tuple of {count} (is a `return` missing?)", hint_key)
    if not isinstance(got, list | tuple):
        fail(what, f"returned {_kind(got)}, expected a list or tuple of {count}", hint_key)
    if length is not None and len(got) != length:
        fail(what, f"returned {len(got)} {of}, expected {length}", hint_key)
    return got


def _kind(x) -> str:
    """What a value is, for a message: ``a Tensor of shape (3, 4) float32``, ``a list of 2``, ``None``."""
    if x is None:
        return "None"
    if isinstance(x, mg.Tensor | np.ndarray):
        return f"a {type(x).__name__} of shape {x.shape} {x.dtype}"
    if isinstance(x, list | tuple):
        return f"a {type(x).__name__} of {len(x)}"
    return f"a {type(x).__name__} ({x!r:.40})"


LEARNER_FILE = re.compile(r"exercises[/\\](solutions[/\\])?ex\d\d_\w+\.py$")


def learner_frame(err: BaseException) -> traceback.FrameSummary | None:
    """The innermost line of the learner's own file (``exNN_*.py``) in ``err``'s traceback, if any."""
    frames = [f for f in traceback.extract_tb(err.__traceback__) if LEARNER_FILE.search(f.filename)]
    return frames[-1] if frames else None


def where(err: BaseException) -> str:
    """`` (in toposort, at exercises/ex03_backward.py:12: order.append(t))``, or "" outside the learner's files."""
    frame = learner_frame(err)
    if frame is None:
        return ""
    return f" (in {frame.name}, at {frame.filename.replace(chr(92), '/').split('demos/')[-1]}:{frame.lineno}: " \
           f"{frame.line})"


def shapes_text(shapes) -> str:
    return ", ".join(str(tuple(s)) for s in shapes)


@contextlib.contextmanager
def registered(*blocks):
    """The learner's op blocks in the real op table (``@op()``), under their own names, for the check's duration.

    Every block is taken out again on leaving (``unregister``), so a learner's
    edited module and the reference solutions can be checked one after the other.
    """
    ops = []
    try:
        for block in blocks:
            if block.__name__ in OPS:  # an earlier check left it (a notebook, say): replace it
                unregister(block.__name__)
            ops.append(op()(block))
        yield ops if len(ops) != 1 else ops[0]
    finally:
        for o in ops:
            if OPS.get(o.name) is o:
                unregister(o.name)


def run_learner(what: str, fn, *args, hint_key: str | None = None, **kwargs):
    """Call the learner's code; an exception (other than a stub) becomes ``Wrong`` naming where it happened."""
    try:
        with np.errstate(all="ignore"):  # an overflow is graded by its result (inf or NaN), not warned about
            return fn(*args, **kwargs)
    except NotImplementedError:
        raise
    except Wrong:
        raise
    except Exception as err:  # the learner's code crashed: say where, in their file
        fail(what, f"raised {type(err).__name__}: {err}{where(err)}", hint_key)


def make_inputs(shapes, dtype, rng, domain=None) -> list[mg.Tensor]:
    out = []
    for shape in shapes:
        a = rng.uniform(*domain, size=shape) if domain else rng.standard_normal(shape)
        out.append(mg.tensor(np.asarray(a, dtype=dtype), requires_grad=True))
    return out


def grade_vjp(name: str, learner_vjp, reference, shapes, rng, params=None, domain=None, input_names=None,
              out_of=None, hint_key: str = "vjp", grad_only=False) -> None:
    """The learner's VJP called directly, against the engine's gradient of ``reference``, in float32 and float64.

    ``reference(*inputs, **params)`` is the engine's function (an op of the
    table); ``out_of(*inputs, **params)`` the output passed to the learner's VJP
    (default: the reference's). Each input's gradient must have the input's own
    shape and dtype: the VJP is called directly, so no engine sums it back.
    """
    params = params or {}
    input_names = input_names or [f"input {i}" for i in range(len(shapes))]
    for dtype in DTYPES:
        xs = make_inputs(shapes, dtype, rng, domain)
        out = reference(*xs, **params)
        g = mg.tensor(rng.standard_normal(out.shape).astype(dtype))
        expected = mg.grad(out, xs, g, allow_unused=True)
        with mg.no_grad():
            shown_out = out.detach() if out_of is None else out_of(*[x.detach() for x in xs], **params)
            got = run_learner(f"{name}'s VJP ({dtype.__name__}, inputs {shapes_text(shapes)})", learner_vjp,
                              g, shown_out, *[x.detach() for x in xs], hint_key=hint_key, **params)
        learner_sequence(f"{name}'s VJP", got, len(xs), "gradient(s), one per input", hint_key)
        for i, (e, gx) in enumerate(zip(expected, got)):
            if not isinstance(gx, mg.Tensor):
                fail(f"{name}'s VJP, {input_names[i]}", f"returned {type(gx).__name__}, expected a Tensor "
                                                        f"(write the VJP in Tensor ops, so it can be differentiated)",
                     hint_key)
            compare(f"{name}'s VJP, gradient for {input_names[i]} ({dtype.__name__}, inputs {shapes_text(shapes)}"
                    f"{', ' + str(params) if params else ''})", e, gx, hint_key if gx.shape == e.shape else
                    "broadcast")


def grade_forward(name: str, learner_forward, reference, shapes, rng, params=None, domain=None,
                  hint_key: str = "vjp") -> None:
    """The learner's forward on ndarrays against the engine's, in float32 and float64."""
    params = params or {}
    for dtype in DTYPES:
        xs = make_inputs(shapes, dtype, rng, domain)
        with mg.no_grad():
            expected = reference(*xs, **params)
        got = run_learner(f"{name}'s forward", learner_forward, *[x.data.copy() for x in xs], **params,
                          hint_key=hint_key)
        if isinstance(got, tuple):
            got = got[0]
        shown = f"{dtype.__name__}, inputs {shapes_text(shapes)}{', ' + str(params) if params else ''}"
        compare(f"{name}'s forward ({shown})", expected, got, hint_key)


def grade_gradcheck(name: str, the_op, shapes, rng, params=None, domain=None, second_order=True,
                    hint_key: str = "vjp", constants=()) -> None:
    """The registered op through the whole engine: ``gradcheck`` and, if asked, ``gradgradcheck``, in float64.

    ``constants``: extra non-differentiated inputs (index arrays, targets) appended after the tensors.
    """
    params = params or {}
    xs = make_inputs(shapes, np.float64, rng, domain)

    def fn(*args):
        return the_op(*args, *constants, **params)

    for check, order in ((mg.gradcheck, "first"), (mg.gradgradcheck, "second")):
        if order == "second" and not second_order:
            continue
        try:
            check(fn, xs)
        except mg.GradcheckError as err:
            why = "" if order == "first" else (
                f"\n  Second order differentiates your VJP itself (inputs 0..{len(shapes) - 1} are the op's inputs, "
                f"the rest the incoming gradient g). Values right but this wrong: the VJP steps outside the graph "
                f"(.data, NumPy on a Tensor, a constant made from an input), so its own derivative is lost")
            fail(f"{name}, {order}-order derivatives against finite differences (inputs {shapes_text(shapes)})",
                 f"{err}{why}", hint_key)
        except NotImplementedError:
            raise
        except Exception as err:
            advice = "" if order == "first" else (" (the second-order check differentiates your VJP: write it in "
                                                  "Tensor ops, never through .data or NumPy)")
            fail(f"{name}, {order}-order check (inputs {shapes_text(shapes)})",
                 f"{type(err).__name__}: {err}{where(err)}{advice}", hint_key)
