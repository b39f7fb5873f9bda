"""The course in demos/exercises: every check passes on the reference solutions, fails on a wrong one naming
the fault, says "not started" on the untouched stubs and passes once the learner has solved them (the suite stays
green before and after the course); a learner's op runs in the real table."""

import types

import numpy as np
import pytest

import minigrad as mg
from demos.exercises import EXERCISES, check, status
from demos.exercises.__main__ import main
from demos.exercises.course import exercise, load
from demos.exercises.grader import Wrong, registered
from demos.exercises.stubs import count_stubs
from minigrad.ops import OPS


def solutions(n):
    return load(n, solutions=True)


def altered(n, **replacements):
    """The reference solution of exercise ``n`` with some names replaced: a deliberately wrong answer."""
    namespace = types.SimpleNamespace(**vars(solutions(n)))
    for name, value in replacements.items():
        setattr(namespace, name, value)
    return namespace


def assert_caught(n, replacements, named):
    """Exercise ``n`` with ``replacements`` fails as ``Wrong``, its message holding each of ``named`` and where to read;
    a failed check takes the learner's ops (``my_*``) out of the table too."""
    with pytest.raises(Wrong) as caught:  # (not a TypeError from inside the rubric)
        check(n, module=altered(n, **replacements), say=lambda line: None)
    message = str(caught.value)
    for words in named:
        assert words in message, f"{words!r} not in: {message}"
    assert "Read:" in message
    assert not [name for name in OPS if name.startswith("my_")], "a failed check takes the learner's ops out too"


def block(base, name=None, **parts):
    """A copy of an op block with some of its functions replaced (the class name is the op's name)."""
    return type(name or base.__name__, (), {**{k: v for k, v in vars(base).items() if not k.startswith("__")},
                                            "__doc__": base.__doc__, **parts})


@pytest.mark.parametrize("n", [e.number for e in EXERCISES])
def test_every_check_passes_on_the_reference_solutions(n):
    said = []
    check(n, solutions=True, say=said.append)
    assert said, "a check says what passed"
    assert not [name for name in OPS if name.startswith("my_")], "the learner's ops are taken out again"


def progress(n, solutions=False) -> str:
    """"untouched", "solved" or "partly solved": how many of exercise ``n``'s stubs the file still holds."""
    left, total = count_stubs(exercise(n).module, solutions)
    return "untouched" if left == total else "solved" if left == 0 else "partly solved"


def assert_stub_or_solved(n, solutions=False):
    """An untouched stub is "not started"; a solved exercise (every stub filled in) passes its check. So the suite
    stays green before the course and after it; an exercise the learner is still writing is theirs to check."""
    state = progress(n, solutions)
    if state == "partly solved":
        pytest.skip(f"exercise {n} is in progress: grade it with python -m demos.exercises check {n}")
    if state == "untouched":
        with pytest.raises(NotImplementedError, match=f"exercise {n}:"):
            check(n, solutions, say=lambda line: None)
        assert status(n, solutions)[0] == "not started"
    else:
        check(n, solutions, say=lambda line: None)
        assert status(n, solutions) == ("done", "")


@pytest.mark.parametrize("n", [e.number for e in EXERCISES])
def test_the_untouched_stubs_are_not_started_and_a_solved_one_passes(n):
    assert_stub_or_solved(n)


@pytest.mark.parametrize("n", [1, 12])
def test_a_solved_exercise_is_graded_rather_than_expected_to_be_a_stub(n):
    """The same test on files with every stub filled in (the references): graded, and done."""
    assert progress(n, solutions=True) == "solved"
    assert_stub_or_solved(n, solutions=True)


def _wrong_cases():
    s1, s2, s3, s4, s5 = (solutions(n) for n in range(1, 6))
    s6, s7, s8, s9 = (solutions(n) for n in range(6, 10))

    def mul_without_sum_back(g, out, a, b):
        return g * b, g * a

    def exp_through_numpy(g, out, x):  # right values, but steps outside the graph: second order fails
        return (g * mg.tensor(np.exp(x.data)),)

    def scatter_by_assignment(g, *, index, shape):
        out = np.zeros(shape, dtype=g.dtype)
        out[index] += g  # buffered: a repeated index keeps one of its rows
        return out

    def grads_that_overwrite(root, leaves):
        gradient = {id(root): mg.ones_like(root)}
        with mg.no_grad():
            for t in reversed(s3.toposort(root)):
                g = gradient.get(id(t))
                if g is None or t._op is None:
                    continue
                for x, gx in zip(t._inputs, t._op.vjp(g, t, *t._inputs, **t._params)):
                    if gx is not None and x.requires_grad:
                        gradient[id(x)] = s1.unbroadcast(gx, x.shape)  # = instead of +=
        return [gradient.get(id(x), mg.zeros_like(x)) for x in leaves]

    def toposort_twice(root):
        order = []

        def visit(t):
            for x in t._inputs:
                visit(x)
            order.append(t)

        visit(root)
        return order

    def unstable_softmax(x, *, axis=-1):
        e = np.exp(x)
        return e / e.sum(axis=axis, keepdims=True)

    def layer_norm_vjp_missing_a_term(g, out, x, weight, bias, *, eps=1e-5):
        xc = x - x.mean(axis=-1, keepdims=True)
        rstd = ((xc * xc).mean(axis=-1, keepdims=True) + eps) ** -0.5
        v = g * weight
        return rstd * (v - v.mean(axis=-1, keepdims=True)), s1.unbroadcast(g * xc * rstd, weight.shape), \
            s1.unbroadcast(g, bias.shape)

    def jacobian_in_the_wrong_order(W, states):
        J = np.eye(W.shape[0])
        for h in states[1:]:
            J = J @ ((1.0 - h.reshape(-1) ** 2)[:, None] * W)
        return J

    def adamw_without_bias_correction(params, grads, state, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                                      weight_decay=1e-2):
        beta1, beta2 = betas
        if not state:
            state.update(m=[np.zeros_like(p) for p in params], v=[np.zeros_like(p) for p in params])
        for p, g, m, v in zip(params, grads, state["m"], state["v"]):
            p *= 1 - lr * weight_decay
            m[...] = beta1 * m + (1 - beta1) * g
            v[...] = beta2 * v + (1 - beta2) * g * g
            p -= lr * m / (np.sqrt(v) + eps)

    def clip_each_gradient_alone(grads, max_norm):
        total = float(np.sqrt(sum((g.astype(np.float64) ** 2).sum() for g in grads)))
        return [g * min(1.0, max_norm / (np.linalg.norm(g) + 1e-6)) for g in grads], total

    class CacheOnTheWrongAxis(s8.MyKVCache):
        def update(self, k, v):
            if self.k is None:
                self.k, self.v = k, v
            else:
                self.k, self.v = mg.concatenate([self.k, k], axis=-1), mg.concatenate([self.v, v], axis=-1)
            return self.k, self.v

    def generate_without_the_cache(model, prompt, steps):
        tokens = prompt
        with mg.no_grad():
            for _ in range(steps):
                new = model(tokens)[0][:, -1].data.argmax(axis=-1)[:, None]
                tokens = np.concatenate([tokens, new], axis=1)
        return tokens

    def jvp_that_is_a_vjp(fn, x, t):
        x = x.detach().requires_grad_()
        y = fn(x)
        return y.detach(), mg.grad(y, [x], mg.ones_like(y))[0]

    return [
        (1, dict(my_exp=block(s1.my_exp, vjp=lambda g, out, x: (g * x,))), ["my_exp's VJP", "index", "expected"]),
        (1, dict(my_exp=block(s1.my_exp, vjp=exp_through_numpy)), ["my_exp", "second-order"]),
        (1, dict(my_mul=block(s1.my_mul, vjp=mul_without_sum_back)), ["my_mul's VJP", "shape", "broadcast"]),
        (1, dict(unbroadcast=lambda g, shape: g.sum(axis=tuple(range(g.ndim - len(shape))))),
         ["unbroadcast", "shape"]),
        (2, dict(my_scatter_add=block(s2.my_scatter_add, forward=scatter_by_assignment)),
         ["my_scatter_add's forward", "repeated indices must add up", "index"]),
        (2, dict(my_transpose=block(s2.my_transpose, vjp=lambda g, out, x, *, axes: (g.transpose(axes),))),
         ["my_transpose's VJP"]),
        (3, dict(grads=grads_that_overwrite), ["grads of (x * x + tanh(x)).sum()", "sum of the three shares"]),
        (3, dict(toposort=toposort_twice), ["toposort", "times; each tensor goes in once"]),
        (4, dict(my_softmax=block(s4.my_softmax, forward=unstable_softmax)), ["my_softmax's forward", "overflows"]),
        (4, dict(cross_entropy=lambda logits, targets: -mg.OPS["my_log_softmax"](logits)[
            np.arange(len(targets)), targets].sum()), ["cross_entropy", "value"]),
        (5, dict(my_layer_norm=block(s5.my_layer_norm, vjp=layer_norm_vjp_missing_a_term)),
         ["my_layer_norm", "VJP, gradient for x", "fused op layer_norm"]),
        (6, dict(jacobian_through_time=jacobian_in_the_wrong_order), ["jacobian_through_time", "mg.jacobian"]),
        (7, dict(adamw_step=adamw_without_bias_correction), ["adamw_step", "after step 1 of"]),
        (7, dict(clip_by_global_norm=clip_each_gradient_alone), ["adamw_step", "parameter"]),
        (8, dict(MyKVCache=CacheOnTheWrongAxis), ["MyKVCache.update", "time axis"]),
        (8, dict(generate_greedy=generate_without_the_cache), ["generate_greedy", "feed only the newest token"]),
        (9, dict(jvp=jvp_that_is_a_vjp), ["jvp of", "J t, against mg.jvp"]),
    ]


@pytest.mark.parametrize("n, replacements, named", _wrong_cases(),
                         ids=lambda v: "-".join(v) if isinstance(v, dict) else None)
def test_a_wrong_solution_fails_and_the_message_names_the_fault(n, replacements, named):
    assert_caught(n, replacements, named)


def test_a_filled_op_exercise_trains_a_tiny_model_on_the_learners_ops():
    s1, s2 = solutions(1), solutions(2)
    rng = np.random.default_rng(0)
    points = rng.standard_normal((64, 2))
    X = np.concatenate([points, np.ones((64, 1))], axis=1)  # a constant column: the hidden layer's bias
    with registered(s2.my_matmul, s1.my_tanh, s2.my_sum) as (matmul, tanh, total):
        w1 = mg.tensor(rng.standard_normal((3, 16)), requires_grad=True)
        w2 = mg.tensor(rng.standard_normal((16, 2)) * 0.5, requires_grad=True)
        from minigrad import optim
        opt = optim.Adam([w1, w2], lr=0.05)
        targets = (points[:, 0] * points[:, 1] > 0).astype(np.int64)  # XOR of the signs: needs the hidden layer
        losses = []
        for _ in range(300):
            logits = matmul(tanh(matmul(mg.tensor(X), w1)), w2)
            loss = mg.OPS["cross_entropy"](logits, targets)
            assert {t._op.name for t in (logits, logits._inputs[0])} == {"my_matmul", "my_tanh"}
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        accuracy = (matmul(tanh(matmul(mg.tensor(X), w1)), w2).data.argmax(-1) == targets).mean()
        assert total(mg.tensor(np.ones(3))).item() == 3.0
    assert losses[-1] < 0.3 * losses[0] and accuracy > 0.9, (losses[0], losses[-1], accuracy)


def test_the_command_line_lists_progress_and_grades(capsys):
    assert main(["list"]) == 0
    listing = capsys.readouterr().out
    untouched = [e.number for e in EXERCISES if progress(e.number) == "untouched"]
    assert listing.count(" not started ") == len(untouched)
    for e in EXERCISES:
        if progress(e.number) == "solved":
            assert f"{e.number}. done " in listing
    if 1 in untouched:
        assert "1. not started  VJPs of elementwise ops" in listing
    assert main(["check", "1", "--solutions"]) == 0
    out = capsys.readouterr().out
    assert "ok  my_exp: VJP equals the engine's exp" in out and "exercise 1 passes" in out
    if progress(3) == "untouched":  # (a learner's solved file passes instead)
        assert main(["check", "3"]) == 1
        assert "not started: exercise 3: toposort is still a stub" in capsys.readouterr().out
    elif progress(3) == "solved":
        assert main(["check", "3"]) == 0
        capsys.readouterr()
    assert main(["list", "--solutions"]) == 0
    assert capsys.readouterr().out.count(". done ") == len(EXERCISES)


def test_a_half_done_exercise_is_in_progress(tmp_path, monkeypatch):
    from demos.exercises import stubs

    names = ["my_exp.vjp", "my_log.vjp", "my_tanh.vjp", "unbroadcast", "my_mul.vjp"]
    stub = "".join(f'    raise NotImplementedError("exercise 1: {name}")\n' for name in names)  # (the learner's
    monkeypatch.setattr(stubs, "HERE", tmp_path)  # own file may be solved already: a stand-in with its 5 stubs)
    (tmp_path / "ex01_elementwise.py").write_text(stub)
    assert stubs.count_stubs("ex01_elementwise") == (5, 5)
    filled = stub.replace('raise NotImplementedError("exercise 1: my_exp.vjp")', "return (g * out,)")
    (tmp_path / "ex01_elementwise.py").write_text(filled)
    assert stubs.count_stubs("ex01_elementwise") == (4, 5)


def _learner_mistakes():
    """Answers with the mistakes a learner makes: a forgotten ``return``, a wrong shape or dtype, a crash."""
    s4, s6, s8 = solutions(4), solutions(6), solutions(8)

    def none(*args, **kwargs):
        return None

    def crashes(root):
        return root.parents  # no such attribute

    class CacheThatReturnsNothing(s8.MyKVCache):
        def update(self, k, v):
            super().update(k, v)

    def one_state_short(W, U, xs, h0):
        return s6.rnn_states(W, U, xs, h0)[:-1]

    def half_a_jacobian(W, states):
        return s6.jacobian_through_time(W, states)[:, :8]

    def softmax_in_float64(x, *, axis=-1):
        return s4.my_softmax.forward(x.astype(np.float64), axis=axis)

    return [
        (3, dict(toposort=none), ["toposort", "returned None", "`return` missing"]),
        (3, dict(grads=none), ["grads", "returned None", "`return` missing"]),
        (3, dict(toposort=crashes), ["toposort", "raised AttributeError", "parents"]),
        (4, dict(my_softmax=block(s4.my_softmax, forward=none)), ["my_softmax's forward", "returned None"]),
        (4, dict(my_softmax=block(s4.my_softmax, forward=softmax_in_float64)),
         ["my_softmax's forward", "expected dtype float32, got float64"]),
        (4, dict(cross_entropy=none), ["cross_entropy", "returned None"]),
        (6, dict(rnn_states=none), ["rnn_states", "returned None", "`return` missing"]),
        (6, dict(rnn_states=one_state_short), ["rnn_states", "returned 12 states", "expected 13"]),
        (6, dict(jacobian_through_time=none), ["jacobian_through_time", "returned None"]),
        (6, dict(jacobian_through_time=half_a_jacobian), ["jacobian_through_time", "expected shape (16, 16)"]),
        (7, dict(clip_by_global_norm=none), ["clip_by_global_norm", "returned None", "`return` missing"]),
        (7, dict(clip_by_global_norm=lambda grads, max_norm: grads), ["clip_by_global_norm", "returned 4"]),
        (8, dict(MyKVCache=CacheThatReturnsNothing), ["MyKVCache.update", "returned None"]),
        (8, dict(generate_greedy=none), ["generate_greedy", "returned None"]),
        (9, dict(jvp=none), ["jvp of", "returned None"]),
    ]


@pytest.mark.parametrize("n, replacements, named", _learner_mistakes(),
                         ids=lambda v: "-".join(f"{k}={getattr(f, '__name__', f)}" for k, f in v.items())
                         if isinstance(v, dict) else None)
def test_a_learner_mistake_is_the_graders_message_naming_their_function(n, replacements, named):
    assert_caught(n, replacements, named)


def test_an_error_no_rubric_foresaw_is_still_wrong_naming_the_exercise(monkeypatch):
    from demos.exercises import rubrics

    monkeypatch.setattr(rubrics, "grade_1", lambda m, rng, say: m.unbroadcast + 1)
    with pytest.raises(Wrong, match=r"exercise 1: grading stopped at TypeError: .*\n  Read: .*ex01_elementwise.py"):
        check(1, module=solutions(1), say=lambda line: None)


def test_the_command_line_reports_a_forgotten_return_without_a_traceback(capsys, monkeypatch):
    from demos.exercises import course

    monkeypatch.setattr(course, "load", lambda n, solutions=False: altered(3, toposort=lambda root: None))
    assert main(["check", "3"]) == 1
    out = capsys.readouterr().out
    assert "WRONG  toposort: returned None, expected a list or tuple of tensors (is a `return` missing?)" in out
    assert "Traceback" not in out


def _function_mistakes():
    """Exercise 14's wrong backwards, each a subclass of the reference Function under the same name."""
    s14 = solutions(14)

    def with_backward(base, backward, forward=None):
        parts = {"backward": staticmethod(backward), **({"forward": staticmethod(forward)} if forward else {})}
        return type(base.__name__, (base,), parts)

    def sigmoid_through_numpy(ctx, g):  # right values, outside the graph: second order fails
        (x,) = ctx.saved_tensors
        return g * mg.tensor(1 / (1 + np.exp(-x.numpy())))

    def sigmoid_of_minus_x(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (-x).sigmoid()

    def without_the_projection(ctx, g):
        x, y = ctx.saved_tensors
        return g / (x * x).sum(axis=-1, keepdims=True).sqrt()

    def saving_the_norm(ctx, x):  # an intermediate of forward, made under no_grad: a constant to second order
        norm = (x * x).sum(axis=-1, keepdims=True).sqrt()
        y = x / norm
        ctx.save_for_backward(y, norm)
        return y

    def reading_the_saved_norm(ctx, g):
        y, norm = ctx.saved_tensors
        return (g - y * (g * y).sum(axis=-1, keepdims=True)) / norm

    def no_none_for_scale(ctx, g):
        x, W = ctx.saved_tensors
        return g @ W.T * ctx.scale, x.T @ g * ctx.scale

    def every_gradient(ctx, g):
        x, W = ctx.saved_tensors
        return g @ W.T * ctx.scale, x.T @ g * ctx.scale, None

    return [
        (dict(Softplus=with_backward(s14.Softplus, sigmoid_of_minus_x)),
         ["Softplus.backward, the gradient of input 0", "against the same function in table ops"]),
        (dict(Softplus=with_backward(s14.Softplus, sigmoid_through_numpy)),
         ["Softplus.backward, second-order derivatives", "steps outside the graph"]),
        (dict(Normalize=with_backward(s14.Normalize, without_the_projection)),
         ["Normalize.backward, the gradient of input 0"]),
        (dict(Normalize=with_backward(s14.Normalize, reading_the_saved_norm, saving_the_norm)),
         ["Normalize.backward, second-order derivatives"]),
        (dict(ScaledMatmul=with_backward(s14.ScaledMatmul, no_none_for_scale)),
         ["ScaledMatmul.backward returned 2 gradient(s)", "return grad_x, grad_W, None"]),
        (dict(ScaledMatmul=with_backward(s14.ScaledMatmul, every_gradient)),
         ["ScaledMatmul.backward", "returned a Tensor for W while ctx.needs_input_grad is (True, False, False)"]),
    ]


@pytest.mark.parametrize("replacements, named", _function_mistakes(),
                         ids=["softplus-wrong-sign", "softplus-through-numpy", "normalize-no-projection",
                              "normalize-saved-intermediate", "scaled-matmul-no-none", "scaled-matmul-unwanted-grad"])
def test_exercise_14_names_the_function_whose_backward_is_wrong(replacements, named):
    assert_caught(14, replacements, named)
