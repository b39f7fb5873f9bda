"""One rubric per exercise (``grade_1``, ``grade_2``, ...): each takes the learner's module (or the solutions') and
raises ``Wrong`` on a fault.

A rubric prints a line for each part that passed (``say``), so a learner sees
how far the code got before the first fault. Whatever the learner's code
returns (None from a forgotten ``return``, a wrong shape or dtype) or raises
is reported as ``Wrong`` naming their function, never as a traceback from here.
"""

from __future__ import annotations

import numpy as np

import minigrad as mg
from minigrad.ops import OPS

from .grader import (
    DTYPES,
    TOLERANCE,
    compare,
    fail,
    grade_forward,
    grade_gradcheck,
    grade_vjp,
    learner_array,
    learner_sequence,
    registered,
    run_learner,
    where,
)

# --------------------------------------------------------------------------------------
# 1. Elementwise VJPs, and the sum-back of broadcasting
# --------------------------------------------------------------------------------------

SHAPES = [(3, 4), (5,), (2, 3, 4), ()]
BROADCAST_PAIRS = [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 4), (3, 1)), ((3, 4), ()), ((4, 1), (1, 5))]


def grade_1(m, rng, say) -> None:
    with registered(m.my_exp, m.my_log, m.my_tanh) as (exp_, log_, tanh_):
        for name, mine, ref, domain in (("my_exp", exp_, "exp", None), ("my_log", log_, "log", (0.3, 3.0)),
                                        ("my_tanh", tanh_, "tanh", None)):
            for shape in SHAPES:
                grade_vjp(name, mine.vjp, OPS[ref], [shape], rng, domain=domain, input_names=["x"])
            grade_gradcheck(name, mine, [(3, 4)], rng, domain=domain)
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
            grade_gradcheck("my_mul", mul_, list(shapes), rng)
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


def grade_2(m, rng, say) -> None:
    with registered(m.my_sum) as sum_:
        for params in SUM_CASES:
            shape = (2, 3, 4) if params.get("axis") not in (1,) else (3, 4)
            grade_vjp("my_sum", sum_.vjp, OPS["sum"], [shape], rng, params=params, input_names=["x"])
        grade_gradcheck("my_sum", sum_, [(2, 3, 4)], rng, params=dict(axis=(0, 2)))
        say(f"my_sum: VJP equals the engine's for {len(SUM_CASES)} axis/keepdims cases; first and second order")
        with registered(m.my_matmul) as matmul_:
            for shapes in MATMUL_CASES:
                grade_vjp("my_matmul", matmul_.vjp, OPS["matmul"], list(shapes), rng, input_names=["a", "b"])
            grade_gradcheck("my_matmul", matmul_, [(2, 3, 4), (4, 2)], rng)
            say(f"my_matmul: both gradients equal the engine's for {len(MATMUL_CASES)} shapes (batched, a shared "
                f"weight summed back); first and second order")
            _grade_shapes(m, rng, say)
            _grade_indexing(m, rng, say)
            with registered(m.my_tanh) as tanh_:
                _train_on_learner_ops(matmul_, tanh_, sum_, rng, say)


def _grade_shapes(m, rng, say) -> None:
    with registered(m.my_reshape, m.my_transpose) as (reshape_, transpose_):
        for shape, new in (((3, 4), (2, 6)), ((2, 3, 4), (4, 6)), ((6,), (2, 3))):
            grade_vjp("my_reshape", reshape_.vjp, lambda x, shape: x.reshape(shape), [shape], rng,
                      params=dict(shape=new), input_names=["x"])
        for shape, axes in (((3, 4), (1, 0)), ((2, 3, 4), (1, 2, 0)), ((2, 3, 4), (2, 0, 1))):
            grade_vjp("my_transpose", transpose_.vjp, lambda x, axes: x.transpose(axes), [shape], rng,
                      params=dict(axes=axes), input_names=["x"])
        grade_gradcheck("my_transpose", transpose_, [(2, 3, 4)], rng, params=dict(axes=(1, 2, 0)))
        say("my_reshape, my_transpose: VJPs undo the move (3 shapes each; a 3-axis permutation and its inverse)")


def _grade_indexing(m, rng, say) -> None:
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
                        f"must add up)", expected, got, "vjp")
        with registered(m.my_getitem) as getitem_:
            for index in INDEX_CASES:
                grade_vjp("my_getitem", getitem_.vjp, lambda x, index: x[index], [(4, 5)], rng,
                          params=dict(index=index), input_names=["x"])
            grade_gradcheck("my_getitem", getitem_, [(4, 5)], rng, params=dict(index=np.array([0, 2, 2, 3])))
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

    mine, names = run_learner("training a 2-layer network on your my_matmul, my_tanh and my_sum", train, matmul_,
                              tanh_, sum_)
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


# --------------------------------------------------------------------------------------
# 3. The backward pass: order and accumulation, on random graphs with reused tensors
# --------------------------------------------------------------------------------------


def random_graph(rng, dtype, n_leaves: int = 3, n_ops: int = 8):
    """A random expression over leaves of shape (3, 4), (4,) and (3, 1), reusing tensors; (root, leaves, uses).

    ``uses[id(t)]``: how many ops read t (a tensor read twice must get two shares).
    """
    shapes = [(3, 4), (4,), (3, 1)]
    leaves = [mg.tensor(rng.standard_normal(shapes[i % 3]).astype(dtype), requires_grad=True, name=f"leaf{i}")
              for i in range(n_leaves)]
    pool = list(leaves)
    uses: dict[int, int] = {}

    def pick():
        t = pool[int(rng.integers(len(pool)))]
        uses[id(t)] = uses.get(id(t), 0) + 1
        return t

    for _ in range(n_ops):
        kind = int(rng.integers(6))
        if kind == 0:
            a = pick()
            new = a * a  # the same tensor twice, into one op
            uses[id(a)] += 1
        elif kind == 1:
            new = pick() + pick()
        elif kind == 2:
            new = pick() * pick()
        elif kind == 3:
            new = pick().tanh()
        elif kind == 4:
            new = (pick() - pick()).sigmoid()
        else:
            new = pick().sum(axis=-1, keepdims=True) * 0.5
        pool.append(new)
    root = pool[-1].sum()
    uses[id(pool[-1])] = uses.get(id(pool[-1]), 0) + 1
    for leaf in leaves:  # every leaf used at least once more: the root depends on all of them
        root = root + (leaf * leaf).sum() * 0.1
        uses[id(leaf)] = uses.get(id(leaf), 0) + 2
    return root, leaves, uses


def _reachable(root) -> dict[int, mg.Tensor]:
    found, stack = {}, [root]
    while stack:
        t = stack.pop()
        if id(t) not in found:
            found[id(t)] = t
            stack.extend(t._inputs or ())
    return found


def _label(t) -> str:
    return t.name if t.name else (f"a tensor made by '{t._op.name}'" if t._op else "a leaf")


def grade_3(m, rng, say) -> None:
    for trial in range(6):
        root, leaves, uses = random_graph(rng, np.float64)
        order = learner_sequence("toposort", run_learner("toposort", m.toposort, root, hint_key="sort"),
                                 of="tensors", hint_key="sort")
        reachable = _reachable(root)
        ids = [id(t) for t in order]
        if len(set(ids)) != len(ids):
            twice = next(t for t in order if ids.count(id(t)) > 1)
            fail(f"toposort (random graph {trial})", f"lists {_label(twice)} {ids.count(id(twice))} times; each "
                                                     f"tensor goes in once (keep a set of visited ids)", "sort")
        missing = [t for i, t in reachable.items() if i not in set(ids) and t.requires_grad]
        if missing:
            fail(f"toposort (random graph {trial})", f"leaves out {len(missing)} of the {len(reachable)} tensors the "
                                                     f"root depends on, e.g. {_label(missing[0])}", "sort")
        if ids[-1] != id(root):
            fail(f"toposort (random graph {trial})", "the root must come last", "sort")
        position = {i: k for k, i in enumerate(ids)}
        for t in order:
            for x in t._inputs:
                if id(x) in position and position[id(x)] > position[id(t)]:
                    fail(f"toposort (random graph {trial})",
                         f"{_label(t)} (position {position[id(t)]}) comes before its input {_label(x)} (position "
                         f"{position[id(x)]}); every tensor must come after all of its inputs", "sort")
    say("toposort: each tensor once, after all of its inputs, the root last (6 random graphs)")

    # A tensor used three times, on its own, first: the classic accumulation bug is named as such.
    x = mg.tensor(np.array([0.5, -1.0, 2.0]), requires_grad=True, name="x")
    y = (x * x + x.tanh()).sum()
    (expected,) = mg.grad(y, [x], retain_graph=True)
    (got,) = learner_sequence("grads(root, [x])", run_learner("grads on (x * x + tanh x).sum()", m.grads, y, [x],
                                                               hint_key="loop"), 1, "gradient, one per leaf", "loop")
    compare("grads of (x * x + tanh(x)).sum() with respect to x, which three ops read (x*x reads it twice): "
            "its gradient is the sum of the three shares, 2x + (1 - tanh(x)^2)", expected, got, "loop")
    for dtype in DTYPES:
        for trial in range(5):
            root, leaves, uses = random_graph(rng, dtype, n_ops=6 + 2 * trial)
            expected = mg.grad(root, leaves, retain_graph=True)
            got = run_learner(f"grads (random graph {trial})", m.grads, root, leaves, hint_key="loop")
            learner_sequence(f"grads (random graph {trial})", got, len(leaves), "gradients, one per leaf", "loop")
            for leaf, e, g in zip(leaves, expected, got):
                compare(f"grads (random graph {trial}, {dtype.__name__}), d root / d {leaf.name} (shape {leaf.shape}, "
                        f"read by {uses.get(id(leaf), 0)} ops: its gradient is the sum of their shares)", e, g, "loop")
    say("grads: equals mg.grad for every leaf of 10 random graphs with reused tensors (float32 and float64)")


# --------------------------------------------------------------------------------------
# 4. softmax, log-softmax (stable), cross-entropy
# --------------------------------------------------------------------------------------

SOFTMAX_CASES = [((3, 5), -1), ((2, 3, 4), 1), ((4, 3), 0), ((6,), -1)]


def grade_4(m, rng, say) -> None:
    with registered(m.my_softmax, m.my_log_softmax) as (softmax_, log_softmax_):
        for name, mine, ref in (("my_softmax", softmax_, "softmax"), ("my_log_softmax", log_softmax_, "log_softmax")):
            for shape, axis in SOFTMAX_CASES:
                grade_forward(name, mine.forward, OPS[ref], [shape], rng, params=dict(axis=axis), hint_key="softmax")
            for dtype in DTYPES:  # rows near 1000 and near -1000: exp overflows unless shifted by the max
                big = (rng.standard_normal((3, 5)) + np.array([[1000.0], [-1000.0], [0.0]])).astype(dtype)
                with mg.no_grad():
                    expected = OPS[ref](mg.tensor(big))
                got = run_learner(f"{name}'s forward", mine.forward, big.copy(), hint_key="softmax")
                got = learner_array(f"{name}'s forward", got, f"an array of shape {big.shape}", "softmax")
                if not np.isfinite(got).all():
                    fail(f"{name}'s forward on rows of logits near +1000 and -1000 ({dtype.__name__})",
                         "gives inf or NaN: exp(1000) overflows. Subtract each row's max before exp", "softmax")
                compare(f"{name}'s forward on rows near +-1000 ({dtype.__name__})", expected, got, "softmax")
            for shape, axis in SOFTMAX_CASES:
                grade_vjp(name, mine.vjp, OPS[ref], [shape], rng, params=dict(axis=axis), input_names=["x"],
                          hint_key="softmax")
            grade_gradcheck(name, mine, [(3, 5)], rng, hint_key="softmax")
            grade_gradcheck(name, mine, [(2, 3, 4)], rng, params=dict(axis=1), hint_key="softmax")
            say(f"{name}: forward (stable at +-1000) and VJP equal the engine's {ref} over {len(SOFTMAX_CASES)} "
                f"shapes/axes; first and second order")
        for n, c in ((4, 5), (7, 3), (1, 6)):
            for dtype in DTYPES:
                logits = mg.tensor(rng.standard_normal((n, c)).astype(dtype) * 3, requires_grad=True)
                targets = rng.integers(0, c, n)
                expected = OPS["cross_entropy"](logits, targets)
                got = run_learner("cross_entropy", m.cross_entropy, logits, targets, hint_key="softmax")
                what = f"cross_entropy ({n} rows, {c} classes, {dtype.__name__})"
                compare(f"{what}, its value", expected, got, "softmax")
                if not isinstance(got, mg.Tensor):
                    fail(what, f"returned {type(got).__name__}, expected a Tensor (built from the logits by your "
                               f"ops, so it can be differentiated)", "softmax")
                (e,) = mg.grad(expected, [logits])
                (g,) = run_learner(f"{what}'s gradient", mg.grad, got, [logits], hint_key="softmax")
                compare(f"{what}, d loss / d logits (should be (softmax - onehot) / rows)", e, g, "softmax")
        targets = np.array([0, 3, 4, 1])
        grade_gradcheck("cross_entropy", m.cross_entropy, [(4, 5)], rng, constants=(targets,), hint_key="softmax")
        say("cross_entropy: value and gradient equal the engine's fused cross_entropy; first and second order")


# --------------------------------------------------------------------------------------
# 5. layer norm, GELU, attention's weights: against the fused op and its composite
# --------------------------------------------------------------------------------------


def _composite(name: str):
    """The fused op ``name`` run as its composite of core ops."""
    def run(*inputs, **params):
        with mg.composite_mode():
            return OPS[name](*inputs, **params)
    return run


def grade_5(m, rng, say) -> None:
    layer_norm_cases = [([(3, 5), (5,), (5,)], dict(eps=1e-5)), ([(2, 3, 4), (4,), (4,)], dict(eps=0.1)),
                        ([(6,), (6,), (6,)], dict(eps=1e-5))]
    gelu_cases = [[(3, 4)], [(2, 3, 5)], [()]]
    attention_cases = [([(2, 3, 4), (2, 5, 4)], dict(scale=0.5)), ([(3, 4), (5, 4)], dict(scale=0.5)),
                       ([(2, 1, 3, 4), (3, 5, 4)], dict(scale=0.7))]
    blocks = [("my_layer_norm", m.my_layer_norm, "layer_norm", layer_norm_cases, ["x", "weight", "bias"], {}),
              ("my_gelu", m.my_gelu, "gelu", [(s, {}) for s in gelu_cases], ["x"], dict(approximate="tanh")),
              ("my_attention_weights", m.my_attention_weights, "attention_weights", attention_cases, ["q", "k"], {})]
    for name, block, ref, cases, names, fixed in blocks:
        with registered(block) as mine:
            for against, reference in (("fused op", OPS[ref]), ("composite", _composite(ref))):
                def engine(*xs, reference=reference, fixed=fixed, **params):
                    return reference(*xs, **params, **fixed)

                for shapes, params in cases:
                    grade_forward(f"{name} (against the {against} {ref})", mine.forward, engine, shapes, rng,
                                  params=params, hint_key="fused")
                    grade_vjp(f"{name} (against the {against} {ref})", mine.vjp, engine, shapes, rng, params=params,
                              input_names=names, hint_key="fused")
            shapes, params = cases[0]
            grade_gradcheck(name, mine, shapes, rng, params=params, hint_key="fused")
            say(f"{name}: forward and VJP equal the fused {ref} and its composite ({len(cases)} shapes, float32 "
                f"and float64); first and second order")
    with registered(m.my_layer_norm, m.my_gelu):
        _grade_block_on_learner_ops(rng, say)


def _block(mine: bool):
    """x + down(gelu(up(layer_norm(x)))): a transformer's MLP half, on the learner's ops or the engine's."""
    from minigrad import nn

    class MLPBlock(nn.Module):
        def __init__(self, d: int):
            super().__init__()
            self.norm = nn.LayerNorm(d)
            self.up = nn.Linear(d, 2 * d, rng=np.random.default_rng(3))
            self.down = nn.Linear(2 * d, d, rng=np.random.default_rng(4))
            self.norm.weight.data[:] = np.random.default_rng(5).uniform(0.5, 1.5, d)
            self.norm.bias.data[:] = np.random.default_rng(6).normal(0, 0.1, d)

        def forward(self, x):
            if mine:
                h = OPS["my_layer_norm"](x, self.norm.weight, self.norm.bias, eps=1e-5)
                return x + self.down(OPS["my_gelu"](self.up(h)))
            return x + self.down(OPS["gelu"](self.up(self.norm(x)), approximate="tanh"))

    return MLPBlock(4)


def _grade_block_on_learner_ops(rng, say) -> None:
    from minigrad import nn

    x = rng.standard_normal((2, 3, 4))
    yours, engines = _block(True).double(), _block(False).double()
    def run(block):
        xt = mg.tensor(x, requires_grad=True)
        out = block(xt)
        return out, *mg.grad((out * out).sum(), [xt, *block.parameters()])

    outs = [run_learner("an MLP block on your my_layer_norm and my_gelu", run, yours, hint_key="fused"), run(engines)]
    for k, what in enumerate(["output", "d loss / d x"] + [f"d loss / d {n}" for n, _ in yours.named_parameters()]):
        compare(f"an MLP block (layer norm, linear, GELU, linear, residual) on your ops, against the same block on "
                f"the engine's: {what}", outs[1][k], outs[0][k], "fused")
    try:
        nn.gradcheck_module(yours, x)
    except mg.GradcheckError as err:
        fail("an MLP block on your my_layer_norm and my_gelu, nn.gradcheck_module (its input and every parameter)",
             str(err), "fused")
    except Exception as err:  # the learner's ops crashed on the copies nn.gradcheck_module makes
        fail("an MLP block on your my_layer_norm and my_gelu, nn.gradcheck_module",
             f"raised {type(err).__name__}: {err}{where(err)}", "fused")
    say("an MLP block built on your my_layer_norm and my_gelu: output and every gradient equal the engine's; "
        "nn.gradcheck_module passes for its input and parameters")


# --------------------------------------------------------------------------------------
# 6. An RNN by hand, and its Jacobian through time: the lesson's vanishing-gradient numbers
# --------------------------------------------------------------------------------------

D_HIDDEN, N_TOKENS, LENGTHS = 16, 60, (1, 5, 10, 20, 40, 60)
LESSON_NORMS = {1: 2.63e+00, 60: 1.62e-13}  # what demos/rnn_vanishing_gradient.py prints, to 3 digits


def lesson_rnn():
    """The lesson's W, U and tokens: np.random.default_rng(0), drawn in that order."""
    rng = np.random.default_rng(0)
    W = rng.normal(0, 0.9 / np.sqrt(D_HIDDEN), (D_HIDDEN, D_HIDDEN))
    U = rng.normal(0, 1 / np.sqrt(D_HIDDEN), (D_HIDDEN, D_HIDDEN))
    return W, U, rng.normal(0, 1, (N_TOKENS, D_HIDDEN))


def grade_6(m, rng, say) -> None:
    from minigrad import nn

    W, U, tokens = lesson_rnn()
    for dtype in DTYPES:
        cell = nn.RNNCell(D_HIDDEN, D_HIDDEN, bias=False)
        cell = cell.double() if dtype == np.float64 else cell
        cell.load_state_dict({"weight_hh": W.astype(dtype), "weight_ih": U.astype(dtype)})
        h0 = mg.tensor(rng.normal(0, 0.5, (1, D_HIDDEN)).astype(dtype))
        states = run_learner("rnn_states", m.rnn_states, mg.tensor(W.astype(dtype)), mg.tensor(U.astype(dtype)),
                             tokens[:12], h0, hint_key="rnn")
        learner_sequence("rnn_states (12 tokens)", states, 13, "states [h_0, ..., h_12]", "rnn")
        h = h0
        for t, x in enumerate(tokens[:12], start=1):
            h = cell(mg.tensor(x[None].astype(dtype)), h)
            compare(f"rnn_states, h_{t} ({dtype.__name__}), against nn.RNNCell(bias=False)", h, states[t], "rnn")
    say("rnn_states: every hidden state equals nn.RNNCell's (12 steps, float32 and float64)")

    cell = nn.RNNCell(D_HIDDEN, D_HIDDEN, bias=False).double()
    cell.load_state_dict({"weight_hh": W, "weight_ih": U})
    W_, U_ = mg.tensor(W), mg.tensor(U)
    norms = {}
    for T in LENGTHS:
        h0 = mg.zeros(1, D_HIDDEN, dtype=np.float64, requires_grad=True)

        def h_T(h, T=T):
            for x in tokens[:T]:
                h = cell(mg.tensor(x[None]), h)
            return h

        expected = mg.jacobian(h_T, h0).data.reshape(D_HIDDEN, D_HIDDEN)  # the lesson's way: backprop, row by row
        with mg.no_grad():
            states = run_learner("rnn_states", m.rnn_states, W_, U_, tokens[:T], h0.detach(), hint_key="rnn")
        states = [learner_array(f"rnn_states ({T} tokens), h_{t}", s, "a (1, 16) Tensor", "rnn")
                  for t, s in enumerate(learner_sequence(f"rnn_states ({T} tokens)", states, T + 1, "states", "rnn"))]
        got = run_learner("jacobian_through_time", m.jacobian_through_time, W, states, hint_key="rnn")
        compare(f"jacobian_through_time: d h_{T} / d h_0 (h_0 = 0, the lesson's weights and tokens), against "
                f"mg.jacobian", expected, got, "rnn", rtol=1e-6, atol=1e-18)
        norms[T] = float(np.linalg.norm(got))
    for T, printed in LESSON_NORMS.items():
        if f"{norms[T]:.2e}" != f"{printed:.2e}":
            fail(f"||d h_{T} / d h_0||", f"the lesson prints {printed:.2e}, yours is {norms[T]:.2e}", "rnn")
    say("jacobian_through_time: the product of diag(1 - h_t^2) W equals backprop's d h_T / d h_0; the lesson's "
        "numbers: " + ", ".join(f"T={T}: {n:.2e}" for T, n in norms.items()))


# --------------------------------------------------------------------------------------
# 7. AdamW with clipping, against optim.AdamW and optim.clip_grad_norm_ over many steps
# --------------------------------------------------------------------------------------

ADAM_STEPS, MAX_NORM = 40, 0.1


def grade_7(m, rng, say) -> None:
    from minigrad import nn, optim

    settings = dict(lr=0.05, betas=(0.8, 0.95), eps=1e-8, weight_decay=0.1)
    for dtype in DTYPES:
        X = mg.tensor(rng.standard_normal((16, 4)).astype(dtype))
        Y = mg.tensor(3 * rng.standard_normal((16, 2)).astype(dtype))
        model = nn.Sequential(nn.Linear(4, 8, rng=np.random.default_rng(1)), nn.Tanh(),
                              nn.Linear(8, 2, rng=np.random.default_rng(2)))
        model = model.double() if dtype == np.float64 else model
        names = [name for name, _ in model.named_parameters()]
        engine = list(model.parameters())
        mine = [p.data.copy() for p in engine]
        opt = optim.AdamW(engine, **settings)
        state, clipped = {}, 0

        def loss_of(params, X=X, Y=Y):
            h = (X @ params[0].T + params[1]).tanh()
            out = h @ params[2].T + params[3]
            return ((out - Y) ** 2).mean()

        for step in range(1, ADAM_STEPS + 1):
            opt.zero_grad()
            loss_of(engine).backward()
            total = optim.clip_grad_norm_(engine, MAX_NORM)
            clipped += total > MAX_NORM
            opt.step()
            leaves = [mg.tensor(p, requires_grad=True) for p in mine]
            grads = [g.data for g in mg.grad(loss_of(leaves), leaves)]
            scaled, my_total = learner_sequence(
                "clip_by_global_norm", run_learner("clip_by_global_norm", m.clip_by_global_norm, grads, MAX_NORM,
                                                   hint_key="adam"), 2, "values, (the gradients, their norm)", "adam")
            learner_sequence("clip_by_global_norm, its gradients", scaled, len(grads), "arrays, one per parameter",
                             "adam")
            compare(f"clip_by_global_norm at step {step} ({dtype.__name__}): the norm before clipping", total,
                    my_total, "adam", rtol=1e-5 if dtype == np.float32 else 1e-10)
            run_learner("adamw_step", m.adamw_step, mine, list(scaled), state, **settings, hint_key="adam")
            for name, p, q in zip(names, engine, mine):
                compare(f"adamw_step: parameter '{name}' after step {step} of {ADAM_STEPS} ({dtype.__name__}, "
                        f"clipped to norm {MAX_NORM} when above; {settings})", p.data, q, "adam",
                        rtol=1e-4 if dtype == np.float32 else 1e-10, atol=1e-6 if dtype == np.float32 else 1e-12)
        if not clipped:
            raise AssertionError("the check's clipping never engaged: choose a smaller MAX_NORM")
    say(f"clip_by_global_norm and adamw_step: every parameter equals optim.AdamW's after each of {ADAM_STEPS} steps "
        f"(clipping engaged on some), float32 and float64")


# --------------------------------------------------------------------------------------
# 8. A KV cache, against generation without one
# --------------------------------------------------------------------------------------


def grade_8(m, rng, say) -> None:
    from models import GPT, GPTConfig

    cache = run_learner("MyKVCache()", m.MyKVCache, hint_key="kv")
    if run_learner("MyKVCache().length", lambda: cache.length, hint_key="kv") != 0:
        fail("MyKVCache", "an empty cache has length 0", "kv")
    parts = [mg.tensor(rng.standard_normal((2, 3, n, 4)).astype(np.float32)) for n in (5, 1, 2)]
    for i, k in enumerate(parts):
        got_k, got_v = learner_sequence(
            "MyKVCache.update", run_learner("MyKVCache.update (appending along the time axis, -2)", cache.update, k,
                                            k * 2.0, hint_key="kv"), 2, "Tensors, (keys, values)", "kv")
        want = np.concatenate([p.data for p in parts[:i + 1]], axis=-2)
        sizes = [p.shape[-2] for p in parts[:i + 1]]
        compare(f"MyKVCache.update: the keys after appending (2, 3, T, 4) blocks of {sizes} positions (along the "
                f"time axis, -2)", want, got_k, "kv")
        compare("MyKVCache.update: the values", want * 2, got_v, "kv")
        length = run_learner("MyKVCache.length", lambda: cache.length, hint_key="kv")
        if length != want.shape[-2]:
            fail("MyKVCache.length", f"after {want.shape[-2]} positions, got {length!r}", "kv")
    say("MyKVCache: appends along the time axis and counts its positions")

    for dtype in DTYPES:
        config = GPTConfig(vocab_size=13, block_size=24, n_layer=2, n_head=2, d_model=16)
        model = GPT(config, seed=0)
        model = model.double() if dtype == np.float64 else model
        model.eval()
        prompt = rng.integers(0, 13, (2, 5))
        caches = [m.MyKVCache() for _ in model.blocks]
        with mg.no_grad():
            tokens = prompt
            new = prompt
            for step in range(6):
                cached = run_learner(f"the model with your MyKVCache in each layer (step {step})", model, new,
                                     kv_caches=caches, hint_key="kv")[0][:, -1]
                uncached = model(tokens)[0][:, -1]
                compare(f"logits of step {step} with your caches ({dtype.__name__}), against the model run on the "
                        f"whole sequence without a cache", uncached, cached, "kv", rtol=1e-4, atol=1e-5)
                new = uncached.data.argmax(axis=-1)[:, None]
                tokens = np.concatenate([tokens, new], axis=1)
        widths = []
        forward = model.forward

        def watched(idx, *args, widths=widths, forward=forward, **kwargs):
            widths.append(np.shape(idx)[1])
            return forward(idx, *args, **kwargs)

        model.forward = watched
        try:
            got = run_learner("generate_greedy", m.generate_greedy, model, prompt, 10, hint_key="kv")
        finally:
            del model.forward
        expected = model.generate(prompt, 10, temperature=0, use_cache=False)
        compare(f"generate_greedy's tokens ({dtype.__name__}), against model.generate(temperature=0, "
                f"use_cache=False)", expected, got, "kv")
        if widths[1:] and max(widths[1:]) != 1:
            fail("generate_greedy", f"fed the model {widths} positions per step: after the prompt, feed only the "
                                    f"newest token (the caches hold the rest)", "kv")
    say("generate_greedy: the same tokens and logits as generation without a cache, one position per step "
        "(float32 and float64)")


# --------------------------------------------------------------------------------------
# 9. Forward mode from the VJPs, against mg.jvp
# --------------------------------------------------------------------------------------


def grade_9(m, rng, say) -> None:
    W = rng.standard_normal((4, 6))
    functions = [
        ("tanh(x @ W)", (3, 4), lambda x: (x @ mg.tensor(W.astype(x.dtype))).tanh()),
        ("softmax(x) over the last axis", (2, 5), lambda x: x.softmax(axis=-1)),
        ("layer_norm(x) (fused)", (3, 6), lambda x: OPS["layer_norm"](x, eps=1e-5)),
        ("(x * x).sum() (a scalar output)", (5,), lambda x: (x * x).sum()),
        ("x[[0, 2, 2]] * exp(x[1])", (3, 4), lambda x: x[np.array([0, 2, 2])] * x[1].exp()),
    ]
    for name, shape, fn in functions:
        for dtype in DTYPES:
            x = mg.tensor(rng.standard_normal(shape).astype(dtype))
            t = mg.tensor(rng.standard_normal(shape).astype(dtype))
            y, expected = mg.jvp(fn, x, t)
            got = run_learner(f"jvp of {name}", m.jvp, fn, x, t, hint_key="jvp")
            learner_sequence(f"jvp of {name}", got, 2, "values, (fn(x), J t)", "jvp")
            compare(f"jvp of {name} ({dtype.__name__}, x {shape}): the output fn(x)", y, got[0], "jvp")
            compare(f"jvp of {name} ({dtype.__name__}, x {shape}): J t, against mg.jvp", expected, got[1], "jvp")
        x = mg.tensor(rng.standard_normal(shape))
        columns = []
        for i in range(x.size):  # J e_i for each unit tangent e_i
            got = run_learner(f"jvp of {name}", m.jvp, fn, x, mg.tensor(np.eye(x.size)[i].reshape(shape)),
                              hint_key="jvp")
            _, column = learner_sequence(f"jvp of {name}", got, 2, "values, (fn(x), J t)", "jvp")
            columns.append(learner_array(f"jvp of {name}, J t", column, f"an array of shape {shape}", "jvp").ravel())
        compare(f"the Jacobian of {name} built column by column from your jvp, against mg.jacobian",
                mg.jacobian(fn, x).data.reshape(-1, x.size), np.stack(columns, axis=-1), "jvp")
    say(f"jvp: output and J t equal mg.jvp for {len(functions)} functions (float32 and float64); the whole "
        f"Jacobian, column by column, equals mg.jacobian's")


# --------------------------------------------------------------------------------------
# 10. Activation checkpointing as an op, against the function itself; and the memory it saves
# --------------------------------------------------------------------------------------

def _residual_mlp(x, W1, W2):
    return x + (x @ W1).tanh() @ W2


def _attention_like(x, Wq, Wk):
    scores = (x @ Wq) @ (x @ Wk).T
    return scores.softmax(axis=-1) @ x


def _normed(x, W):
    return OPS["layer_norm"](x @ W, eps=1e-5).sigmoid()


CHECKPOINTED = [("x + tanh(x @ W1) @ W2", _residual_mlp, [(5, 4), (4, 8), (8, 4)]),
                ("softmax((x Wq)(x Wk)^T) @ x", _attention_like, [(5, 4), (4, 3), (4, 3)]),
                ("sigmoid(layer_norm(x @ W))", _normed, [(3, 4), (4, 6)])]


def _alive_after_forward(forward, inputs) -> tuple[int, object]:
    """Bytes allocated by ``forward(*inputs)`` and still alive while its output (and graph) is kept."""
    import gc
    import tracemalloc

    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        out = forward(*inputs)
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before, out
    finally:
        tracemalloc.stop()


def _dropout_block(rng):
    """x, W -> tanh(x @ W) with dropout (p = 1/2) whose mask is drawn from ``rng``: a block with randomness."""
    def fn(x, W):
        h = (x @ W).tanh()
        return h * mg.tensor((rng.random(h.shape) > 0.5) * 2.0)
    return fn


def _grade_generator_replay(m, rng, say) -> None:
    """checkpoint_with_rng on two dropout blocks in a row sharing one generator: each recomputation draws its own
    forward's mask, and after backward the generator is where the forward left it."""
    for seed in range(3):
        x = mg.tensor(rng.standard_normal((6, 5)), requires_grad=True)
        W1 = mg.tensor(rng.standard_normal((5, 5)), requires_grad=True)
        W2 = mg.tensor(rng.standard_normal((5, 7)), requires_grad=True)
        G = mg.tensor(rng.standard_normal((6, 7)))
        theirs, ours = np.random.default_rng(seed), np.random.default_rng(seed)
        plain = _dropout_block(ours)
        want_y = plain(plain(x, W1), W2)
        want = mg.grad((want_y * G).sum(), [x, W1, W2])
        what = f"two dropout blocks in a row, each checkpoint_with_rng(block, h, W, rng=one generator seeded {seed})"
        block = _dropout_block(theirs)
        def two_blocks(block=block, x=x, W1=W1, W2=W2, g=theirs):
            return m.checkpoint_with_rng(block, m.checkpoint_with_rng(block, x, W1, rng=g), W2, rng=g)

        y = run_learner(what, two_blocks, hint_key="checkpoint")
        compare(f"{what}: the output, against the blocks' own (the same generator, the same masks)", want_y, y,
                "checkpoint")
        grads = run_learner(f"backward through {what}", mg.grad, (y * G).sum(), [x, W1, W2], hint_key="checkpoint")
        for i, (e, g) in enumerate(zip(want, grads)):
            e_arr, g_arr = e.data, learner_array(f"{what}: gradient {i}", g, f"an array of shape {e.shape}")
            if e_arr.shape == g_arr.shape and not np.allclose(e_arr, g_arr, rtol=1e-7, atol=1e-9):
                fail(f"{what}: gradient {i}",
                     "differs from the blocks' own: a recomputation in backward drew another dropout mask. Save "
                     "rng.bit_generator.state before the forward and set the generator back to it before fn runs "
                     "again", "checkpoint")
            compare(f"{what}: gradient {i}", e, g, "checkpoint")
        if theirs.random() != ours.random():
            fail(f"{what}, the generator after backward",
                 "its next number is not the one it would give without checkpointing: the recomputations left it "
                 "at the first block's state, so the next draw repeats a mask. After running fn again, put the "
                 "generator back to the state it had before the recomputation", "checkpoint")
    say("checkpoint_with_rng: each recomputation draws its forward's dropout mask (the same gradients through two "
        "blocks sharing a generator), and the generator is left where the forward left it")


def grade_10(m, rng, say) -> None:
    from .grader import make_inputs

    with registered(m.my_checkpoint) as ckpt:
        for name, fn, shapes in CHECKPOINTED:
            for dtype in DTYPES:
                xs = make_inputs(shapes, dtype, rng)
                expected = fn(*xs)
                got = run_learner(f"my_checkpoint(fn={name})", lambda *a, f=fn: ckpt(*a, fn=f), *xs,
                                  hint_key="checkpoint")
                compare(f"my_checkpoint's output, fn = {name} ({dtype.__name__})", expected, got, "checkpoint")
                G = mg.tensor(rng.standard_normal(expected.shape).astype(dtype))
                want = mg.grad((expected * G).sum(), xs)
                grads = run_learner(f"backward through my_checkpoint(fn={name})", mg.grad, (got * G).sum(), xs,
                                    hint_key="checkpoint")
                for i, (e, gx) in enumerate(zip(want, grads)):
                    compare(f"my_checkpoint's gradient for input {i}, fn = {name} ({dtype.__name__}), against fn's "
                            f"own", e, gx, "checkpoint")
        say(f"my_checkpoint: the output and every input's gradient equal those of fn itself, for {len(CHECKPOINTED)} "
            f"functions (float32 and float64)")
        for name, fn, shapes in CHECKPOINTED:
            for frozen in range(len(shapes)):  # one input that does not require grad (data, a frozen weight)
                xs = make_inputs(shapes, np.float64, rng)
                xs[frozen].requires_grad_(False)
                learning = [x for x in xs if x.requires_grad]
                G = mg.tensor(rng.standard_normal(fn(*xs).shape))
                want = mg.grad((fn(*xs) * G).sum(), learning)
                what = (f"backward through my_checkpoint(fn={name}) with input {frozen} not requiring grad (the "
                        f"VJP gives None for it, and asks mg.grad only for the inputs that require grad)")
                grads = run_learner(what, lambda xs=xs, fn=fn, G=G, learning=learning: mg.grad(
                    (ckpt(*xs, fn=fn) * G).sum(), learning), hint_key="checkpoint")
                for i, (e, gx) in enumerate(zip(want, grads)):
                    compare(f"{what}: gradient {i}", e, gx, "checkpoint")
        say("my_checkpoint: the same gradients when an input does not require grad")
        for name, fn, shapes in CHECKPOINTED:
            xs = make_inputs(shapes, np.float64, rng)
            G = mg.tensor(rng.standard_normal(fn(*xs).shape))
            R = [mg.tensor(rng.standard_normal(s)) for s in shapes]

            def second(use_checkpoint, xs=xs, fn=fn, G=G, R=R, name=name):
                y = ckpt(*xs, fn=fn) if use_checkpoint else fn(*xs)
                first = mg.grad((y * G).sum(), xs, create_graph=True)
                if not all(g.requires_grad for g in first):
                    fail(f"my_checkpoint, second order, fn = {name}",
                         "under create_graph=True your VJP returned gradients with no graph behind them, so they "
                         "cannot be differentiated again: recompute from the inputs themselves (not detached "
                         "copies) and pass create_graph=True on to mg.grad", "checkpoint")
                second_grads = mg.grad(sum((g * r).sum() for g, r in zip(first, R)), xs, allow_unused=True)
                if use_checkpoint and any(g is None for g in second_grads):
                    fail(f"my_checkpoint, second order, fn = {name}",
                         "under create_graph=True the gradients your VJP returned are not functions of the inputs "
                         "(differentiating them again never reaches input "
                         f"{[i for i, g in enumerate(second_grads) if g is None]}): the recomputation started from "
                         "detached copies. With create_graph (mg.is_grad_enabled() in the VJP), run fn on the "
                         "inputs themselves", "checkpoint")
                return second_grads

            got = run_learner(f"a second-order gradient through my_checkpoint(fn={name}) (create_graph=True)",
                              second, True, hint_key="checkpoint")
            for i, (e, gx) in enumerate(zip(second(False), got)):
                compare(f"my_checkpoint, second order (a gradient of the gradient) for input {i}, fn = {name}: "
                        f"with create_graph your VJP must record its recomputation from the inputs themselves",
                        e, gx, "checkpoint")
            grade_gradcheck("my_checkpoint", ckpt, shapes, rng, params=dict(fn=fn), hint_key="checkpoint")
        say("my_checkpoint: second-order gradients equal fn's, and gradcheck / gradgradcheck pass")
        _grade_generator_replay(m, rng, say)

        blocks, width = 6, 256
        x = mg.tensor(rng.standard_normal((256, 64)), requires_grad=True)
        weights = [(mg.tensor(rng.standard_normal((64, width)) / 8, requires_grad=True),
                    mg.tensor(rng.standard_normal((width, 64)) / 16, requires_grad=True)) for _ in range(blocks)]

        def chain(use_checkpoint):
            def run(h):
                for W1, W2 in weights:
                    h = ckpt(h, W1, W2, fn=_residual_mlp) if use_checkpoint else _residual_mlp(h, W1, W2)
                return (h * h).mean()
            return run

        plain_bytes, plain_loss = _alive_after_forward(chain(False), [x])
        mine_bytes, mine_loss = _alive_after_forward(chain(True), [x])
        leaves = [x, *[w for pair in weights for w in pair]]
        for i, (e, gx) in enumerate(zip(mg.grad(plain_loss, leaves), mg.grad(mine_loss, leaves))):
            compare(f"gradients of a chain of {blocks} checkpointed blocks, leaf {i}", e, gx, "checkpoint")
        if mine_bytes > 0.35 * plain_bytes:
            fail("my_checkpoint, memory kept after the forward pass",
                 f"a chain of {blocks} checkpointed blocks keeps {mine_bytes:,} bytes alive until backward, the plain "
                 f"chain {plain_bytes:,}: checkpointing should keep only each block's input and output. Run fn under "
                 f"mg.no_grad() in the forward, and keep nothing else (no saved graph)", "checkpoint")
        say(f"my_checkpoint: a chain of {blocks} blocks keeps {mine_bytes / plain_bytes:.0%} of the plain chain's "
            f"memory alive after the forward pass, with the same gradients")


# --------------------------------------------------------------------------------------
# 11. The ring all-reduce: the sum on every worker, and the traffic of a ring
# --------------------------------------------------------------------------------------

class _Ring:
    """The network of the check: copies between ring neighbours, bytes counted per sender."""

    def __init__(self, n: int):
        self.n, self.sent, self.wrong_hop = n, [0] * n, None

    def send(self, src, dst, array):
        if not (isinstance(src, int | np.integer) and isinstance(dst, int | np.integer) and 0 <= src < self.n
                and dst == (src + 1) % self.n):
            self.wrong_hop = self.wrong_hop or (src, dst)
        array = np.asarray(array)
        if 0 <= int(src) < self.n:
            self.sent[int(src)] += array.nbytes
        return array.copy()


def _name_the_wrong_chunks(what, i, n, expected, got, rtol) -> None:
    """``Wrong`` naming the chunks of worker i's buffer that are not the sum, and the chunk indices of the ring."""
    got = learner_array(f"{what}: worker {i}'s buffer", got, "an array", "allreduce")
    if got.shape != expected.shape:
        return  # compare says it
    atol = TOLERANCE[expected.dtype.type]["atol"]
    bounds = np.cumsum([0] + [len(c) for c in np.array_split(expected, n)])
    wrong = [k for k in range(n) if bounds[k] < bounds[k + 1] and not np.allclose(
        got[bounds[k]:bounds[k + 1]], expected[bounds[k]:bounds[k + 1]], rtol=rtol, atol=atol, equal_nan=True)]
    if wrong:
        listed = ", ".join(f"{k} (entries {bounds[k]} to {bounds[k + 1] - 1})" for k in wrong)
        fail(what, f"worker {i}'s buffer after the all-reduce: chunk(s) {listed} of {n} are not the sum of all "
                   f"workers' chunks. Check the chunk "
                   f"indices: in reduce-scatter step s worker i sends chunk (i - s) mod N, and after it holds the "
                   f"finished chunk (i + 1) mod N; in all-gather step s it sends chunk (i + 1 - s) mod N. An index "
                   f"off by one passes around a chunk that is not finished, or never delivers one", "allreduce")


def grade_11(m, rng, say) -> None:
    cases = [(n, size) for n in range(1, 8) for size in (1, n, 10, 3 * n + 1, 1000)]
    for n, size in cases:
        for dtype in DTYPES:
            buffers = [rng.standard_normal(size).astype(dtype) for _ in range(n)]
            expected = np.sum(np.stack(buffers).astype(np.float64), axis=0).astype(dtype)
            given = list(buffers)
            ring = _Ring(n)
            what = f"ring_all_reduce with {n} worker(s), vectors of {size} ({dtype.__name__})"
            run_learner(what, m.ring_all_reduce, given, ring.send, hint_key="allreduce")
            if ring.wrong_hop is not None:
                fail(what, f"worker {ring.wrong_hop[0]} sent to worker {ring.wrong_hop[1]}: a ring sends only to "
                           f"the next worker, (i + 1) % N", "allreduce")
            if any(g is not b for g, b in zip(given, buffers)):
                fail(what, "replaced a buffer in the list: change the arrays themselves, in place", "allreduce")
            for i, b in enumerate(buffers):
                _name_the_wrong_chunks(what, i, n, expected, b, rtol=1e-5 if dtype == np.float32 else 1e-12)
                compare(f"{what}: worker {i}'s buffer after the all-reduce, against the sum of all", expected, b,
                        "allreduce", rtol=1e-5 if dtype == np.float32 else 1e-12)
            if not all(np.array_equal(b, buffers[0]) for b in buffers):
                fail(what, "the workers end with vectors that differ in their last bits: in the all-gather, copy "
                           "the finished chunks (chunk[...] = received) rather than adding into them", "allreduce")
            itemsize = np.dtype(dtype).itemsize
            total, most = 2 * (n - 1) * size * itemsize, 2 * (n - 1) * -(-size // n) * itemsize
            if sum(ring.sent) != total or max(ring.sent) > most:
                fail(what, f"the workers sent {ring.sent} bytes (in all {sum(ring.sent):,}); a ring all-reduce sends "
                           f"2 (N - 1) chunks of about size / N per worker: {total:,} bytes in all, at most {most:,} "
                           f"per worker. Send chunks, not whole vectors, and only through send()", "allreduce")
    say(f"ring_all_reduce: every worker holds the sum, bit-identical across workers, for N = 1 to 7 and "
        f"{len(cases)} (N, size) cases (float32 and float64)")
    say("ring_all_reduce: every worker's traffic is the ring's: 2 (N - 1) chunks of about size / N, "
        "2 (N - 1) x size bytes in all, sent only to the next worker")


# --------------------------------------------------------------------------------------
# 12. Dynamic loss scaling, step by step against the reference's rules
# --------------------------------------------------------------------------------------

class _CountingOptimizer:
    def __init__(self):
        self.steps = 0

    def step(self):
        self.steps += 1


def _check_second_unscale(what: str, scaler, params, expected) -> None:
    """A second unscale_ in one step must raise RuntimeError and leave the gradients as they were."""
    try:
        with np.errstate(all="ignore"):
            scaler.unscale_(params)
    except RuntimeError:
        pass
    except NotImplementedError:
        raise
    except Exception as err:
        fail(what, f"a second unscale_() raised {type(err).__name__}: {err}; it should be a RuntimeError "
                   f"(as GradScaler's)", "scaler")
    else:
        fail(what, "a second unscale_() before step() was taken: it divides the gradients by the scale again. "
                   "Remember that this step's gradients are unscaled, and raise RuntimeError", "scaler")
    for i, (e, p) in enumerate(zip(expected, params)):
        compare(f"{what}: gradient {i} after the refused second unscale_() (unchanged)", e, p.grad, "scaler",
                rtol=1e-6, atol=0)


def _check_unscale_skips_no_gradient(m) -> None:
    """unscale_ on a parameter that got no gradient (p.grad is None) skips it, as GradScaler does."""
    scaler = run_learner("LossScaler()", m.LossScaler, hint_key="scaler")
    with_grad = mg.tensor(np.ones(3, np.float32), requires_grad=True)
    with_grad.grad = mg.tensor(np.full(3, 2.0 ** 17, np.float32))
    without = mg.tensor(np.ones(2, np.float32), requires_grad=True)
    try:
        scaler.unscale_([with_grad, without])
    except NotImplementedError:
        raise
    except Exception as err:
        fail("LossScaler.unscale_ on a parameter whose grad is None",
             f"raised {type(err).__name__}: {err}{where(err)}. A parameter no gradient reached (a frozen layer, an "
             f"unused branch) has p.grad None: skip it, as GradScaler does", "scaler")
    compare("LossScaler.unscale_: the gradient beside a parameter with none", np.full(3, 2.0, np.float32),
            with_grad.grad, "scaler")


def grade_12(m, rng, say) -> None:
    _check_unscale_skips_no_gradient(m)
    settings = [dict(), dict(init_scale=2.0 ** 10, growth_interval=3), dict(init_scale=1024.0, growth_factor=4.0,
                backoff_factor=0.25, growth_interval=2), dict(init_scale=2.0 ** 24, growth_interval=5)]
    clipped_steps = 0
    for setting in settings:
        scaler = run_learner(f"LossScaler({setting})", m.LossScaler, **setting, hint_key="scaler")
        scale = setting.get("init_scale", 2.0 ** 16)
        growth, backoff = setting.get("growth_factor", 2.0), setting.get("backoff_factor", 0.5)
        interval, good = setting.get("growth_interval", 2000), 0
        loss = mg.tensor(np.float32(rng.uniform(1, 3)), requires_grad=True)
        scaled = run_learner("LossScaler.scale_loss", scaler.scale_loss, loss, hint_key="scaler")
        if not isinstance(scaled, mg.Tensor):
            fail(f"LossScaler({setting}).scale_loss(loss)",
                 f"returned {type(scaled).__name__} {scaled!r:.40}, not a Tensor: a float (loss.item() x the scale) "
                 f"has no graph, so backward cannot reach the parameters. Return loss * self.scale", "scaler")
        compare(f"LossScaler({setting}).scale_loss(loss): the loss times the scale", loss.data * np.float32(scale),
                scaled, "scaler")
        (g,) = mg.grad(scaled, [loss])
        compare("the gradient through scale_loss (it must be a Tensor op on the loss)", np.float32(scale), g, "scaler")
        for step in range(30):
            params = [mg.tensor(rng.standard_normal(shape).astype(np.float32) * scale * 1e-4, requires_grad=True)
                      for shape in ((3, 4), (5,))]
            bad = rng.random()
            if bad < 0.15:
                params[int(rng.integers(2))].data.flat[0] = np.inf
            elif bad < 0.3:
                params[int(rng.integers(2))].data.flat[-1] = np.nan
            for p in params:
                p.grad = mg.tensor(p.data.copy())
            expected = [p.grad.data * np.float32(1 / scale) for p in params]
            params.append(mg.tensor(np.ones(2, np.float32), requires_grad=True))  # no gradient reached it: skipped
            found_inf = not all(np.isfinite(e).all() for e in expected)
            optimizer = _CountingOptimizer()
            kind = "inf" if bad < 0.15 else "NaN" if bad < 0.3 else "finite"
            clip = rng.random() < 0.5  # this step unscales first, to clip, then steps
            what = f"LossScaler({setting}), step {step} ({kind} gradients{', unscale_ then clip' * clip})"
            if clip:
                clipped_steps += 1
                run_learner(f"{what}: unscale_()", scaler.unscale_, params, hint_key="scaler")
                for i, (e, p) in enumerate(zip(expected, params)):
                    compare(f"{what}: gradient {i} after unscale_(), divided by the scale {scale:g}", e, p.grad,
                            "scaler", rtol=1e-6, atol=0)
                _check_second_unscale(what, scaler, params, expected)
                for e, p in zip(expected, params):  # what clipping to a smaller norm does: scale them down
                    p.grad.data *= np.float32(0.5)
                    e *= np.float32(0.5)
            taken = run_learner(f"{what}: step()", scaler.step, optimizer, params, hint_key="scaler")
            for i, (e, p) in enumerate(zip(expected, params)):
                once = " (unscale_ had divided them already: step() must not divide again)" if clip else ""
                compare(f"{what}: gradient {i} after step(), unscaled once (divided by the scale {scale:g}){once}", e,
                        p.grad, "scaler", rtol=1e-6, atol=0)
            if optimizer.steps != (0 if found_inf else 1):
                fail(what, f"called optimizer.step() {optimizer.steps} time(s); a step whose gradients hold inf or NaN "
                           f"is skipped, any other is taken once", "scaler")
            if not isinstance(taken, bool | np.bool_) or bool(taken) != (not found_inf):
                fail(what, f"step() returned {taken!r}; it says whether the step was taken ({not found_inf})",
                     "scaler")
            if found_inf:
                scale, good = scale * backoff, 0
            else:
                good += 1
                if good == interval:
                    scale, good = scale * growth, 0
            if scaler.scale != scale:
                fail(what, f"the scale after step() is {scaler.scale!r}, expected {scale!r} (back off on inf/NaN and "
                           f"start counting again; grow after growth_interval good steps in a row)", "scaler")
    say(f"LossScaler: scale_loss, unscaled gradients (with unscale_ before step() in {clipped_steps} steps, and a "
        f"second unscale_ refused), skipped steps and the scale equal the reference over {len(settings)} settings "
        f"x 30 generated steps (inf and NaN among them)")
    _grade_accumulated_step(m, rng, say)


class _CountingScheduler:
    def __init__(self):
        self.steps = 0

    def step(self):
        self.steps += 1


def _grade_accumulated_step(m, rng, say) -> None:
    """Steps of 2 to 4 micro-batches, some overflowing under the scale, with clipping and a parameter left unused."""
    interval, scale, good, taken_steps, skipped = 2, 2.0 ** 16, 0, 0, 0
    scaler = run_learner("LossScaler(growth_interval=2)", m.LossScaler, growth_interval=interval, hint_key="scaler")
    unscales = []
    original_unscale = scaler.unscale_

    def counted_unscale(params):
        unscales.append(len(backwards))
        return original_unscale(params)

    scaler.unscale_ = counted_unscale
    backwards = []
    for step in range(16):
        n = int(rng.integers(2, 5))
        w = mg.tensor(rng.standard_normal((3, 4)).astype(np.float32), requires_grad=True)
        b = mg.tensor(rng.standard_normal(4).astype(np.float32), requires_grad=True)
        unused = mg.tensor(np.ones(2, np.float32), requires_grad=True)
        params = [w, b, unused]
        targets = [rng.standard_normal((5, 4)).astype(np.float32) for _ in range(n)]
        inputs = [rng.standard_normal((5, 3)).astype(np.float32) for _ in range(n)]
        overflow = step % 5 == 2  # one micro-batch of this step has a loss so large that scaled it overflows
        bad = int(rng.integers(n)) if overflow else -1

        def micro(i, w=w, b=b, x=inputs, t=targets, bad=bad):
            def loss():
                backwards.append(i)
                xi = mg.tensor(x[i] * np.float32(1e36 if i == bad else 1.0))
                return ((xi @ w + b - mg.tensor(t[i])) ** 2).mean()
            return loss

        w64, b64 = w.data.astype(np.float64), b.data.astype(np.float64)
        gw, gb = np.zeros((3, 4)), np.zeros(4)
        for x, t in zip(inputs, targets):  # the mean of the micro-batches' gradients, float64
            r = 2 * (x @ w64 + b64 - t) / t.size / n
            gw, gb = gw + x.T.astype(np.float64) @ r, gb + r.sum(0)
        norm = np.sqrt((gw ** 2).sum() + (gb ** 2).sum())
        max_norm = float(norm * (0.5 if step % 2 else 1.5))  # every other step is clipped
        factor = min(1.0, max_norm / (norm + 1e-6))
        optimizer, scheduler = _CountingOptimizer(), _CountingScheduler()
        backwards.clear()
        unscales.clear()
        what = f"accumulated_step, step {step} ({n} micro-batches{f', micro-batch {bad} overflows' * overflow})"
        taken = run_learner(what, m.accumulated_step, [micro(i) for i in range(n)], scaler, optimizer, scheduler,
                            params, max_norm, hint_key="scaler")
        if sorted(backwards) != list(range(n)):
            fail(what, f"computed the micro-batches' losses {backwards}: each one once", "scaler")
        if unscales != [n]:
            fail(what, f"called unscale_ {len(unscales)} time(s) (after micro-batch(es) {unscales}): call it once, "
                       f"after the last micro-batch's backward, so the gradients it divides and checks are the "
                       f"whole step's", "scaler")
        if not overflow:
            compare(f"{what}: the gradient of w after the step: the mean of the micro-batches' gradients (each "
                    f"loss weighed 1 / {n}), unscaled, clipped to norm {max_norm:.4g}",
                    (gw * factor).astype(np.float32), w.grad, "scaler", rtol=1e-4, atol=1e-7, dtype=np.float32)
        if optimizer.steps != (0 if overflow else 1) or bool(taken) != (not overflow):
            fail(what, f"called optimizer.step() {optimizer.steps} time(s) and returned {taken!r}: the step is "
                       f"skipped if any micro-batch's gradients overflowed, else taken once", "scaler")
        if scheduler.steps != (0 if overflow else 1):
            fail(what, f"called scheduler.step() {scheduler.steps} time(s) on a {'skipped' if overflow else 'taken'} "
                       f"step: step the schedule only when the optimizer stepped (a skipped step is no step)",
                 "scaler")
        if overflow:
            scale, good, skipped = scale * 0.5, 0, skipped + 1
        else:
            good, taken_steps = good + 1, taken_steps + 1
            if good == interval:
                scale, good = scale * 2, 0
        if scaler.scale != scale:
            fail(what, f"the scale after the step is {scaler.scale!r}, expected {scale!r}: the scale backs off once "
                       f"per skipped step and grows after growth_interval taken *steps*, not micro-batches",
                 "scaler")
    say(f"accumulated_step: 16 steps of 2 to 4 micro-batches ({skipped} overflowing, skipped): unscale_ once after "
        f"the last micro-batch, clipped mean gradients, the scheduler stepped only on the {taken_steps} taken "
        f"steps, and the scale backed off and grew per step, as the reference's")


# --------------------------------------------------------------------------------------
# 13. FlashAttention: the merge of online-softmax states, and one tile's backward
# --------------------------------------------------------------------------------------

def _softmax_state(scores: np.ndarray, values: np.ndarray):
    """(m, l, acc) of the rows of ``scores`` (n, m) over values (m, Ev); a row of only -inf: (-inf, 0, 0)."""
    m = scores.max(axis=-1, keepdims=True) if scores.shape[-1] else np.full(scores.shape[:-1] + (1,), -np.inf)
    p = np.exp(scores - np.where(np.isneginf(m), 0.0, m))
    return m, p.sum(axis=-1, keepdims=True), p @ values


def _merge_variant(a, b, variant: str):
    """Two states merged with a named mistake ("no rescale", "inverted"), to recognise it in a learner's merge."""
    (m1, l1, acc1), (m2, l2, acc2) = a, b
    m = np.maximum(m1, m2)
    with np.errstate(invalid="ignore", over="ignore"):
        if variant == "no rescale":
            f1 = f2 = np.ones_like(m)
        else:
            sign = -1 if variant == "inverted" else 1
            f1, f2 = (np.where(np.isneginf(mi), 0.0, np.exp(sign * (mi - m))) for mi in (m1, m2))
    return m, f1 * l1 + f2 * l2, f1 * acc1 + f2 * acc2


MERGE_MISTAKES = {"no rescale": "l and acc are the plain sums of the two parts, but each was taken relative to its own "
                                "max: rescale each by exp(m_own - m) before adding",
                  "inverted": "the rescaling is inverted: the factor is exp(m_own - m) <= 1, not exp(m - m_own)"}


def _grade_merge(m, rng, say) -> None:
    cases = 0
    for n, Ev, sizes in ((4, 3, (3, 5)), (6, 2, (1, 1)), (5, 4, (2, 3, 4, 1)), (3, 1, (7, 2, 2))):
        for dtype in DTYPES:
            scores = (rng.standard_normal((n, sum(sizes))) * 3).astype(dtype)
            values = rng.standard_normal((sum(sizes), Ev)).astype(dtype)
            cuts = np.cumsum((0,) + sizes)
            scores[0, cuts[1]:] = -np.inf  # row 0 sees keys in the first block only
            scores[1, :cuts[1]] = -np.inf  # row 1 none in the first block
            if len(sizes) == 2:
                scores[2] = -np.inf  # row 2 sees no key at all
            parts = [_softmax_state(scores[:, a:b], values[a:b]) for a, b in zip(cuts[:-1], cuts[1:])]
            expected = _softmax_state(scores, values)
            what = f"merge of {len(sizes)} blocks of {list(sizes)} keys, {n} rows ({dtype.__name__})"
            for order, states in (("in order", parts), ("in reverse order", parts[::-1])):
                merged = states[0]
                for state in states[1:]:
                    merged = run_learner(f"{what}, {order}", m.merge, merged, state, hint_key="flash")
                    learner_sequence(f"{what}, {order}", merged, 3, "arrays (m, l, acc)", "flash")
                got = [learner_array(f"{what}, {order}", x, hint_key="flash") for x in merged]
                unseen = np.isneginf(expected[0][:, 0])  # rows no block saw
                if any(np.isnan(x).any() for x in got) and all(np.isnan(x[unseen]).any() for x in got[1:]):
                    fail(f"{what}, {order}", "NaN in the merged state, in the rows that neither part had seen "
                         "(m = -inf in both): exp(-inf - (-inf)) is NaN; take the exponents against a safe max, "
                         "0 where m is -inf", "flash")
                if len(states) == 2:
                    for variant, words in MERGE_MISTAKES.items():
                        wrong = _merge_variant(*states, variant)
                        if all(np.allclose(g, w, equal_nan=True) for g, w in zip(got, wrong)) and not all(
                                np.allclose(e, w, equal_nan=True) for e, w in zip(expected, wrong)):
                            fail(f"{what}, {order}", words, "flash")
                for name, e, g in zip(("m", "l", "acc"), expected, got):
                    compare(f"{what}, {order}: {name}", e, g, "flash")
                seen = got[1] > 0
                compare(f"{what}, {order}: acc / l, the attention output",
                        expected[2] / np.where(expected[1] > 0, expected[1], 1),
                        np.where(seen, got[2] / np.where(seen, got[1], 1), 0), "flash")
                cases += 1
    say(f"merge: m, l, acc and acc / l equal the softmax of all the keys at once, in {cases} merges (both orders, "
        f"folded over up to 4 blocks, rows that saw no key; float32 and float64)")


def _tile_expected(q, k, v, do, lse, delta, scale, variant=""):
    """The shares of one tile by the formulas (NumPy); ``variant`` makes a named mistake, to recognise it."""
    s = q @ k.swapaxes(-1, -2) * scale
    p = np.exp(s - s.max(-1, keepdims=True)) if variant == "softmax" else np.exp(s - lse)
    if variant == "softmax":
        p = p / p.sum(-1, keepdims=True)
    ds = p * (do @ v.swapaxes(-1, -2) - (0 if variant == "no delta" else delta))
    factor = 1.0 if variant == "no scale" else scale
    return ds @ k * factor, ds.swapaxes(-1, -2) @ q * factor, p.swapaxes(-1, -2) @ do


TILE_MISTAKES = {"no delta": "dS = P * dP leaves out the rowsum(dO * O) term: dS = P * (dP - delta_i)",
                 "no scale": "the scale is missing: S = Q K^T * scale, so dQ and dK are each times scale",
                 "softmax": "P is the tile renormalised on its own; the weights are exp(S - lse_i), with the "
                            "logsumexp of the whole row"}


def _assembled(tile_backward, q, k, v, do, out, lse, scale, block, what):
    """dQ, dK, dV summed from the learner's tiles over every (query block, key block) pair."""
    delta = (do * out).sum(axis=-1, keepdims=True)
    lse = lse.unsqueeze(-1)
    Tq, Tk = q.shape[-2], k.shape[-2]
    grads = {"q": {}, "k": {}, "v": {}}
    for i0 in range(0, Tq, block):
        for j0 in range(0, Tk, block):
            r, c = slice(i0, i0 + block), slice(j0, j0 + block)
            shares = run_learner(what, tile_backward, q[..., r, :], k[..., c, :], v[..., c, :], do[..., r, :],
                                 lse[..., r, :], delta[..., r, :], scale, hint_key="flash")
            learner_sequence(what, shares, 3, "gradients (dq_i, dk_j, dv_j)", "flash")
            for name, key, share in (("q", i0, shares[0]), ("k", j0, shares[1]), ("v", j0, shares[2])):
                if not isinstance(share, mg.Tensor):
                    fail(what, f"d{name} share is {type(share).__name__}, expected a Tensor (write the tile's "
                               f"backward in Tensor ops, so it can be differentiated)", "flash")
                grads[name][key] = share if key not in grads[name] else grads[name][key] + share
    return [mg.cat([parts[key] for key in sorted(parts)], axis=-2) for parts in grads.values()]


def _flash_op(tile_backward):
    """An op block: the engine's tiled forward, and a VJP made of the learner's tiles (blocks of 3)."""
    from minigrad.fused.attention import _flash_forward

    class my_flash_attention:
        def forward(q, k, v, *, scale):
            return _flash_forward(q, k, v, (), scale, False, 3)  # (out, the rows' logsumexp)

        def vjp(g, out, q, k, v, *, scale):
            lse = OPS["flash_attention_lse"](q, k, scale=scale, block_size=3, saved=out._saved)
            return tuple(_assembled(tile_backward, q, k, v, g, out, lse, scale, 3, "tile_backward, inside the VJP"))

    return my_flash_attention


def _grade_tile_backward(m, rng, say) -> None:
    from minigrad.fused.attention import _flash_forward

    for lead, Tq, Tk, E, Ev in (((), 6, 7, 3, 2), ((2,), 5, 5, 4, 3), ((2, 3), 8, 6, 2, 4)):
        for dtype in DTYPES:
            q, k, v, do = (rng.standard_normal(lead + shape).astype(dtype)
                           for shape in ((Tq, E), (Tk, E), (Tk, Ev), (Tq, Ev)))
            scale = dtype(1 / np.sqrt(E))
            out, lse = _flash_forward(q, k, v, (), scale, False, 64)
            delta = (do * out).sum(-1, keepdims=True)
            r, c = slice(1, 4), slice(2, 6)  # one tile: queries 1-3, keys 2-5
            args = (q[..., r, :], k[..., c, :], v[..., c, :], do[..., r, :], lse[..., r, None], delta[..., r, :])
            what = f"tile_backward, queries 1-3 against keys 2-5 (inputs {lead + (Tq, E)}, {dtype.__name__})"
            with mg.no_grad():
                got = run_learner(what, m.tile_backward, *(mg.tensor(a) for a in args), scale, hint_key="flash")
            learner_sequence(what, got, 3, "gradients (dq_i, dk_j, dv_j)", "flash")
            expected = _tile_expected(*args, scale)
            for variant, words in TILE_MISTAKES.items():
                mistaken = _tile_expected(*args, scale, variant)
                if all(isinstance(g, mg.Tensor) and g.shape == e.shape and np.allclose(g.data, e, rtol=1e-4)
                       for g, e in zip(got, mistaken)) and not all(np.allclose(e, x, rtol=1e-4)
                                                                   for e, x in zip(expected, mistaken)):
                    fail(what, words, "flash")
            for name, e, g in zip(("dq_i", "dk_j", "dv_j"), expected, got):
                compare(f"{what}: {name}", e, g, "flash")
    say("tile_backward: dq_i, dk_j and dv_j of one tile equal the formulas (3 shapes, float32 and float64)")

    for lead, T, E, block in (((2,), 7, 3, 3), ((2, 2), 9, 4, 4), ((), 5, 2, 1)):
        for dtype in DTYPES:
            q, k, v = (mg.tensor(rng.standard_normal(lead + (T, E)).astype(dtype), requires_grad=True)
                       for _ in range(3))
            plain = mg.nn.functional.scaled_dot_product_attention(q, k, v)
            do = mg.tensor(rng.standard_normal(plain.shape).astype(dtype))
            expected = mg.grad(plain, [q, k, v], do)
            out, lse = _flash_forward(q.data, k.data, v.data, (), 1 / np.sqrt(E), False, block)
            what = f"tile_backward summed over every tile pair (blocks of {block}, T = {T}, {dtype.__name__})"
            with mg.no_grad():
                got = _assembled(m.tile_backward, q.detach(), k.detach(), v.detach(), do, mg.tensor(out),
                                 mg.tensor(lse), dtype(1 / np.sqrt(E)), block, what)
            for name, e, g in zip(("dQ", "dK", "dV"), expected, got):
                compare(f"{what}: {name} against plain attention's gradient", e, g, "flash")
    say("tile_backward: summed over every tile pair, dQ, dK, dV equal plain attention's gradients (blocks of 1, 3 "
        "and 4, T not a multiple; float32 and float64)")

    with registered(_flash_op(m.tile_backward)) as mine:
        grade_gradcheck("my_flash_attention (the engine's tiled forward, your tiles as its VJP)", mine,
                        [(2, 5, 3), (2, 5, 3), (2, 5, 2)], rng, params=dict(scale=0.6), hint_key="flash")
    say("tile_backward: as the VJP of a registered op, first and second order against finite differences")


def grade_13(m, rng, say) -> None:
    _grade_merge(m, rng, say)
    _grade_tile_backward(m, rng, say)


# --------------------------------------------------------------------------------------
# 14. autograd.Function: the learner's backward, against the same function written in table ops
# --------------------------------------------------------------------------------------


def _softplus(x):
    return x.relu() + ((-x.abs()).exp() + 1.0).log()


def _normalize(x):
    return x / (x * x).sum(axis=-1, keepdims=True).sqrt()


def _function_cases(m):
    """(name, the learner's Function applied, the same in table ops, input shapes, which inputs are constants)."""
    return [
        ("Softplus", m.Softplus.apply, _softplus, [(3, 4)], ()),
        ("Softplus", m.Softplus.apply, _softplus, [(5,)], ()),
        ("Normalize", m.Normalize.apply, _normalize, [(3, 4)], ()),
        ("Normalize", m.Normalize.apply, _normalize, [(2, 3, 5)], ()),
        ("ScaledMatmul", lambda x, W: m.ScaledMatmul.apply(x, W, 0.5), lambda x, W: (x @ W) * 0.5,
         [(3, 4), (4, 5)], ()),
        ("ScaledMatmul", lambda x, W: m.ScaledMatmul.apply(x, W, 0.5), lambda x, W: (x @ W) * 0.5,
         [(3, 4), (4, 5)], (1,)),  # W a constant: only x's gradient is wanted
    ]


def grade_14(m, rng, say) -> None:
    from .grader import make_inputs

    cases = _function_cases(m)
    for name, fn, reference, shapes, constant in cases:
        for dtype in DTYPES:
            xs = make_inputs(shapes, dtype, rng)
            xs = [mg.tensor(x.data) if i in constant else x for i, x in enumerate(xs)]
            wanted = [x for x in xs if x.requires_grad]
            shown = f"{name}.apply ({dtype.__name__}, inputs {', '.join(str(s) for s in shapes)}" + (
                ", W a constant)" if constant else ")")
            out = run_learner(shown, fn, *xs, hint_key="function")
            expected = reference(*xs)
            compare(f"{shown}: the output (forward is given)", expected, out, "function")
            G = mg.tensor(rng.standard_normal(expected.shape).astype(dtype))
            ctx = out._saved[0] if out._saved is not None else None  # (what forward kept: backward frees it)
            want = mg.grad((expected * G).sum(), wanted)
            got = run_learner(f"{name}.backward, called by backward through {shown}", mg.grad, (out * G).sum(),
                              wanted, hint_key="function")
            for i, (e, gx) in enumerate(zip(want, got)):
                compare(f"{name}.backward, the gradient of input {i} ({shown}), against the same function in table "
                        f"ops", e, gx, "function")
            if constant and ctx is not None:  # what backward returned itself: None where no gradient is wanted
                with mg.no_grad():
                    returned = run_learner(f"{name}.backward", m.ScaledMatmul.backward, ctx, G, hint_key="function")
                if isinstance(returned, tuple | list) and len(returned) == 3 and returned[1] is not None:
                    fail(f"{name}.backward ({shown})", f"returned a Tensor for W while ctx.needs_input_grad is "
                         f"{ctx.needs_input_grad}: return None for an input whose gradient is not wanted "
                         f"(computing it is wasted work)", "function")
    say(f"Softplus, Normalize, ScaledMatmul: backward's gradients equal those of the same functions in table ops "
        f"(float32 and float64, {len(cases)} cases, W constant in one)")
    for name, fn, _, shapes, constant in cases:
        if not constant:
            grade_gradcheck(f"{name}.backward", fn, shapes, rng, hint_key="function")
    say("gradcheck and gradgradcheck pass on all three: each backward is Tensor ops, so it is itself differentiable")
