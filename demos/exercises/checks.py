"""One check per exercise: each takes the learner's module (or the solutions') and raises ``Wrong`` on a fault.

A check prints a line for each part that passed (``say``), so a learner sees
how far the code got before the first fault.
"""

from __future__ import annotations

import math

import numpy as np

import minigrad as mg
from minigrad.ops import OPS

from .grader import (
    DTYPES,
    Wrong,
    compare,
    fail,
    grade_forward,
    grade_op_checks,
    grade_vjp,
    make_inputs,
    registered,
    run_learner,
)

# --------------------------------------------------------------------------------------
# 1. Elementwise VJPs, and the sum-back of broadcasting
# --------------------------------------------------------------------------------------

SHAPES = [(3, 4), (5,), (2, 3, 4), ()]
BROADCAST_PAIRS = [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 4), (3, 1)), ((3, 4), ()), ((4, 1), (1, 5))]


def check_1(m, rng, say) -> None:
    with registered(m.my_exp, m.my_log, m.my_tanh) as (exp_, log_, tanh_):
        for name, mine, ref, domain in (("my_exp", exp_, "exp", None), ("my_log", log_, "log", (0.3, 3.0)),
                                        ("my_tanh", tanh_, "tanh", None)):
            for shape in SHAPES:
                grade_vjp(name, mine.vjp, OPS[ref], [shape], rng, domain=domain, input_names=["x"])
            grade_op_checks(name, mine, [(3, 4)], rng, domain=domain)
            say(f"{name}: VJP equals the engine's {ref} (float32 and float64, shapes {SHAPES}); first and second "
                f"order agree with finite differences")
    for big, small in [((2, 3, 4), (3, 1)), ((3, 4), (4,)), ((3, 4), ()), ((3, 4), (3, 4)), ((2, 5, 1), (5, 1))]:
        for dtype in DTYPES:
            g = mg.tensor(rng.standard_normal(big).astype(dtype))
            got = run_learner(f"unbroadcast(g of shape {big}, {small})", m.unbroadcast, g, small, hint_key="broadcast")
            x = mg.zeros(small, dtype=dtype, requires_grad=True)
            (expected,) = mg.grad((x + mg.zeros(big, dtype=dtype)), [x], g)
            compare(f"unbroadcast(g of shape {big}, shape={small}) ({dtype.__name__})", expected, got, "broadcast")
    say("unbroadcast: sums a broadcast gradient back to the input's shape")
    with registered(m.my_mul) as mul_:
        for a_shape, b_shape in BROADCAST_PAIRS:
            grade_vjp("my_mul", mul_.vjp, OPS["mul"], [a_shape, b_shape], rng, input_names=["a", "b"])
        for shapes in BROADCAST_PAIRS[1:3]:
            grade_op_checks("my_mul", mul_, list(shapes), rng)
        say(f"my_mul: both gradients equal the engine's, in the inputs' own shapes, for {len(BROADCAST_PAIRS)} "
            f"broadcasts; first and second order")


# --------------------------------------------------------------------------------------
# 2. sum, matmul, reshape, transpose, indexing; then a model trained on the learner's ops
# --------------------------------------------------------------------------------------

SUM_CASES = [dict(), dict(axis=1), dict(axis=-1), dict(axis=(0, 2), keepdims=True), dict(axis=0, keepdims=True),
             dict(axis=(0, 2))]
MATMUL_CASES = [((3, 4), (4, 5)), ((2, 3, 4), (2, 4, 5)), ((2, 3, 4), (4, 5)), ((4, 5), (2, 5, 3)),
                ((2, 1, 3, 4), (3, 4, 2))]
INDEX_CASES = [np.array([0, 2, 2, 3]), np.array([1, 1, 1]), (slice(1, 3), slice(None, None, 2)),
               (Ellipsis, np.array([[1, 1], [4, 0]])), np.array([True, False, True, True])]


def check_2(m, rng, say) -> None:
    with registered(m.my_sum) as sum_:
        for params in SUM_CASES:
            shape = (2, 3, 4) if params.get("axis") not in (1,) else (3, 4)
            grade_vjp("my_sum", sum_.vjp, OPS["sum"], [shape], rng, params=params, input_names=["x"])
        grade_op_checks("my_sum", sum_, [(2, 3, 4)], rng, params=dict(axis=(0, 2)))
        say(f"my_sum: VJP equals the engine's for {len(SUM_CASES)} axis/keepdims cases; first and second order")
        with registered(m.my_matmul) as matmul_:
            for shapes in MATMUL_CASES:
                grade_vjp("my_matmul", matmul_.vjp, OPS["matmul"], list(shapes), rng, input_names=["a", "b"])
            grade_op_checks("my_matmul", matmul_, [(2, 3, 4), (4, 2)], rng)
            say(f"my_matmul: both gradients equal the engine's for {len(MATMUL_CASES)} shapes (batched, a shared "
                f"weight summed back); first and second order")
            _check_shapes(m, rng, say)
            _check_indexing(m, rng, say)
            with registered(m.my_tanh) as tanh_:
                _train_on_learner_ops(matmul_, tanh_, sum_, rng, say)


def _check_shapes(m, rng, say) -> None:
    with registered(m.my_reshape, m.my_transpose) as (reshape_, transpose_):
        for shape, new in (((3, 4), (2, 6)), ((2, 3, 4), (4, 6)), ((6,), (2, 3))):
            grade_vjp("my_reshape", reshape_.vjp, lambda x, shape: x.reshape(shape), [shape], rng,
                      params=dict(shape=new), input_names=["x"])
        for shape, axes in (((3, 4), (1, 0)), ((2, 3, 4), (1, 2, 0)), ((2, 3, 4), (2, 0, 1))):
            grade_vjp("my_transpose", transpose_.vjp, lambda x, axes: x.transpose(axes), [shape], rng,
                      params=dict(axes=axes), input_names=["x"])
        grade_op_checks("my_transpose", transpose_, [(2, 3, 4)], rng, params=dict(axes=(1, 2, 0)))
        say("my_reshape, my_transpose: VJPs undo the move (3 shapes each; a 3-axis permutation and its inverse)")


def _check_indexing(m, rng, say) -> None:
    with registered(m.my_scatter_add) as scatter_:
        for index in INDEX_CASES:
            x = np.zeros((4, 5))
            picked_shape = x[index].shape
            for dtype in DTYPES:
                g = rng.standard_normal(picked_shape).astype(dtype)
                expected = np.zeros((4, 5), dtype=dtype)
                np.add.at(expected, index, g)
                got = run_learner("my_scatter_add's forward", scatter_.forward, g, index=index, shape=(4, 5))
                compare(f"my_scatter_add's forward (index {_show(index)}, {dtype.__name__}; repeated indices "
                        f"must add up)", expected, np.asarray(got), "vjp")
        with registered(m.my_getitem) as getitem_:
            for index in INDEX_CASES:
                grade_vjp("my_getitem", getitem_.vjp, lambda x, index: x[index], [(4, 5)], rng,
                          params=dict(index=index), input_names=["x"])
            grade_op_checks("my_getitem", getitem_, [(4, 5)], rng, params=dict(index=np.array([0, 2, 2, 3])))
    say(f"my_scatter_add, my_getitem: repeated indices accumulate ({len(INDEX_CASES)} indexes: arrays with "
        f"repeats, slices, a mask); first and second order")


def _show(index) -> str:
    return repr(index).replace("\n", "").replace("       ", "")


STEPS, LR = 200, 0.5


def _train_on_learner_ops(matmul_, tanh_, sum_, rng, say) -> None:
    """A 2-layer network trained by SGD twice from one init: on the learner's ops, and on the engine's."""
    X = rng.standard_normal((32, 3))
    Y = np.sin(X @ np.array([[1.0], [-2.0], [0.5]]))
    init = [rng.standard_normal((3, 16)) * 0.5, rng.standard_normal((16, 1)) * 0.25]

    def train(matmul, tanh, total):
        w1, w2 = (mg.tensor(w.copy(), requires_grad=True) for w in init)
        losses, names = [], set()
        for _ in range(STEPS):
            err = matmul(tanh(matmul(mg.tensor(X), w1)), w2) - mg.tensor(Y)
            loss = total(err * err) * (1.0 / len(X))
            names = names or {t._op.name for t in _graph(loss)}
            g1, g2 = mg.grad(loss, [w1, w2])
            with mg.no_grad():
                w1.data -= LR * g1.data
                w2.data -= LR * g2.data
            losses.append(loss.item())
        return losses, names

    mine, names = train(matmul_, tanh_, sum_)
    engine, _ = train(OPS["matmul"], OPS["tanh"], OPS["sum"])
    if not {"my_matmul", "my_tanh", "my_sum"} <= names:
        fail("training on your ops", f"the loss's graph holds the ops {sorted(names)}, not yours")
    compare(f"training a 2-layer network on your ops: the loss at each of {STEPS} SGD steps, against the same network "
            "on the engine's ops", np.array(engine), np.array(mine), "vjp", rtol=1e-6, atol=1e-9)
    if not mine[-1] < 0.5 * mine[0]:
        fail("training on your ops", f"the loss went from {mine[0]:.4f} to {mine[-1]:.4f}; it should fall")
    say(f"trained a 3-16-1 tanh network on your my_matmul, my_tanh and my_sum: loss {mine[0]:.4f} -> "
        f"{mine[-1]:.4f} in {STEPS} SGD steps, step for step the engine's")


def _graph(root) -> list:
    seen, stack, out = set(), [root], []
    while stack:
        t = stack.pop()
        if id(t) in seen or t._op is None:
            continue
        seen.add(id(t))
        out.append(t)
        stack.extend(t._inputs or ())
    return out
