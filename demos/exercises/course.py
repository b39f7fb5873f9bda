"""The course: the exercises in order, and ``check``/``status``, which grade a module of answers.

``check(n)`` grades your file; ``check(n, solutions=True)`` the reference
solutions; ``check(n, module=m)`` any module (or namespace) with the same
names, which is how the tests hand it deliberately wrong answers.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass

import numpy as np

from . import rubrics
from .grader import Wrong, where


@dataclass(frozen=True)
class Exercise:
    number: int
    module: str  # the file's name in demos/exercises/ (and in solutions/)
    title: str


EXERCISES = [
    Exercise(1, "ex01_elementwise", "VJPs of elementwise ops, and of a broadcast binary op (sum-back)"),
    Exercise(2, "ex02_reductions_and_shapes", "VJPs of sum, matmul, reshape/transpose, indexing; train on them"),
    Exercise(3, "ex03_backward", "the backward pass: topological order and accumulation"),
    Exercise(4, "ex04_softmax", "softmax and log-softmax (stable), cross-entropy"),
    Exercise(5, "ex05_layers", "layer norm, GELU and attention: forward and VJP, against fused op and composite"),
    Exercise(6, "ex06_rnn", "an RNN unrolled by hand, and its gradient through time"),
    Exercise(7, "ex07_adamw", "an AdamW step with gradient clipping, against optim.AdamW"),
    Exercise(8, "ex08_kv_cache", "a KV cache for a GPT, against generation without one"),
    Exercise(9, "ex09_forward_mode", "forward mode from the VJPs (double backward), against mg.jvp"),
    Exercise(10, "ex10_checkpoint", "activation checkpointing: recompute in backward, second order, memory measured"),
    Exercise(11, "ex11_ring_all_reduce", "the ring all-reduce of data parallelism: the sum everywhere, bytes counted"),
    Exercise(12, "ex12_loss_scaler",
             "loss scaling: unscale_ before clipping, over micro-batches, a schedule per step"),
    Exercise(13, "ex13_flash_attention", "FlashAttention: merge two online-softmax states; one tile's backward"),
    Exercise(14, "ex14_autograd_function", "autograd.Function: write backward for PyTorch's form of a custom op"),
]
PACKAGE = __name__.rsplit(".", 1)[0]  # demos.exercises


def exercise(n: int) -> Exercise:
    for e in EXERCISES:
        if e.number == n:
            return e
    raise ValueError(f"there is no exercise {n}: they are numbered 1 to {len(EXERCISES)}")


def load(n: int, solutions: bool = False):
    """The module of exercise ``n``, freshly imported (with the earlier ones it builds on), so edits count."""
    package = f"{PACKAGE}.solutions" if solutions else PACKAGE
    module = None
    for e in EXERCISES[:n]:
        name = f"{package}.{e.module}"
        module = importlib.reload(sys.modules[name]) if name in sys.modules else importlib.import_module(name)
    return module


def check(n: int, solutions: bool = False, module=None, say=print, seed: int = 0) -> None:
    """Grade exercise ``n``: returns when every part passes; raises ``Wrong`` (or the stub's NotImplementedError).

    The rubrics name the learner's function at each call; anything that still
    escapes them (an answer no rubric foresaw) is ``Wrong`` too, naming the
    exercise and, when the error came from the learner's file, the function and line.
    """
    exercise(n)  # (an unknown number is a clear error)
    module = load(n, solutions) if module is None else module
    try:
        getattr(rubrics, f"grade_{n}")(module, np.random.default_rng(seed), say)
    except (Wrong, NotImplementedError):
        raise
    except Exception as err:
        raise Wrong(f"exercise {n}: grading stopped at {type(err).__name__}: {err}{where(err)}\n"
                    f"  Read: the comments above each function in demos/exercises/{exercise(n).module}.py") from err


def status(n: int, solutions: bool = False) -> tuple[str, str]:
    """("done" | "not started" | "in progress" | "failing", the first line of what stopped it)."""
    try:
        check(n, solutions, say=lambda line: None)
    except NotImplementedError as err:
        started = _any_part_written(n, solutions)
        return ("in progress" if started else "not started"), str(err)
    except Wrong as err:
        return "failing", str(err).splitlines()[0]
    except Exception as err:  # the module does not even import: a syntax error, say
        return "failing", f"{type(err).__name__}: {err}"
    return "done", ""


def _any_part_written(n: int, solutions: bool) -> bool:
    """True when the learner has replaced at least one of the exercise's stubs."""
    from .stubs import count_stubs

    left, total = count_stubs(exercise(n).module, solutions)
    return left < total
