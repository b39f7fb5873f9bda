"""The functional API (vjp, jvp, linearize, jacobian, hessian, hvp): against finite differences and torch.func.

Every function is checked on its own against central finite differences in
float64; where PyTorch is installed, against ``torch.func`` /
``torch.autograd.functional`` on the same function too. The inputs here never
require grad: each function makes its own differentiable copies.
"""

import numpy as np
import pytest

import minigrad as mg
from minigrad.ops import Op

EPS = 1e-6


def t64(a):
    return mg.Tensor(np.asarray(a, dtype=np.float64))


# Two functions used throughout, R^(3x4) x R^4 -> R^3 x R^(3,4), and a scalar loss.
def two_in_two_out(a, b):
    """(tanh(a @ b), a * exp(b)): a tuple in, a tuple out, with broadcasting."""
    return (a @ b).tanh(), a * b.exp()


def loss(w, x):
    """A scalar with a non-trivial Hessian in both arguments."""
    return ((x @ w).tanh() ** 2).sum() + (w ** 3).sum() * 0.1


def numeric_jacobian(fn, xs, i, eps=EPS):
    """d fn(*xs) / d xs[i] by central differences: one array per output, of shape out.shape + x.shape."""
    xs = [x.data.copy() for x in xs]
    flat = xs[i].reshape(-1)
    columns = []
    for col in range(flat.size):
        orig = flat[col]
        flat[col] = orig + eps
        plus = [o.data.copy() for o in mg_tuple(fn(*map(t64, xs)))]
        flat[col] = orig - eps
        minus = [o.data.copy() for o in mg_tuple(fn(*map(t64, xs)))]
        flat[col] = orig
        columns.append([(p - m) / (2 * eps) for p, m in zip(plus, minus)])
    return [np.stack([c[k] for c in columns], axis=-1).reshape(columns[0][k].shape + xs[i].shape)
            for k in range(len(columns[0]))]


def mg_tuple(out):
    return (out,) if isinstance(out, mg.Tensor) else tuple(out)


def inputs(rng):
    return t64(rng.standard_normal((3, 4))), t64(rng.standard_normal(4))


# --------------------------------------------------------------------------------------
# Against finite differences
# --------------------------------------------------------------------------------------


def test_vjp_of_tuple_inputs_and_outputs_matches_finite_differences(rng):
    a, b = inputs(rng)
    outputs, pullback = mg.vjp(two_in_two_out, a, b)
    np.testing.assert_allclose(outputs[0].data, np.tanh(a.data @ b.data))
    u = (t64(rng.standard_normal(3)), t64(rng.standard_normal((3, 4))))
    grads = pullback(u)
    assert isinstance(grads, tuple) and len(grads) == 2
    for i, g in enumerate(grads):
        J = numeric_jacobian(two_in_two_out, (a, b), i)  # u^T J, summed over both outputs
        expected = sum(np.tensordot(uk.data, Jk, axes=uk.ndim) for uk, Jk in zip(u, J))
        np.testing.assert_allclose(g.data, expected, rtol=1e-6, atol=1e-8)
    # The pullback can be called again, with other cotangents.
    again = pullback((u[0] * 2.0, u[1] * 2.0))
    np.testing.assert_allclose(again[0].data, 2 * grads[0].data, rtol=1e-12)


def test_jvp_matches_a_directional_finite_difference(rng):
    a, b = inputs(rng)
    ta, tb = t64(rng.standard_normal((3, 4))), t64(rng.standard_normal(4))
    outputs, tangents = mg.jvp(two_in_two_out, (a, b), (ta, tb))
    plus = two_in_two_out(a + ta * EPS, b + tb * EPS)
    minus = two_in_two_out(a - ta * EPS, b - tb * EPS)
    assert len(tangents) == 2
    for t, p, m in zip(tangents, plus, minus):
        np.testing.assert_allclose(t.data, (p.data - m.data) / (2 * EPS), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(outputs[1].data, a.data * np.exp(b.data))


def test_jvp_with_a_single_input_and_output(rng):
    x, t = t64(rng.standard_normal(5)), t64(rng.standard_normal(5))
    y, y_t = mg.jvp(lambda v: v.tanh() * v, x, t)
    th = np.tanh(x.data)
    np.testing.assert_allclose(y_t.data, ((1 - th ** 2) * x.data + th) * t.data, rtol=1e-12)


def test_linearize_pushes_many_tangents_through_one_recorded_backward(rng):
    a, b = inputs(rng)
    outputs, push = mg.linearize(two_in_two_out, a, b)
    J_a = numeric_jacobian(two_in_two_out, (a, b), 0)
    for _ in range(3):
        ta = t64(rng.standard_normal((3, 4)))
        out_tangents = push(ta, mg.zeros(4, dtype=np.float64))
        np.testing.assert_allclose(out_tangents[0].data, np.tensordot(J_a[0], ta.data, axes=2), rtol=1e-6,
                                   atol=1e-8)


@pytest.mark.parametrize("mode", ["reverse", "forward"])
def test_jacobian_both_modes_match_finite_differences(rng, mode):
    a, b = inputs(rng)
    J = mg.jacobian(two_in_two_out, (a, b), mode=mode)  # J[output][input]
    for i in range(2):
        for k, expected in enumerate(numeric_jacobian(two_in_two_out, (a, b), i)):
            assert J[k][i].shape == expected.shape
            np.testing.assert_allclose(J[k][i].data, expected, rtol=1e-6, atol=1e-8)
    single = mg.jacobian(lambda v: (v * v).exp(), b, mode=mode)  # one input, one output: a Tensor
    assert isinstance(single, mg.Tensor)
    np.testing.assert_allclose(single.data, np.diag(2 * b.data * np.exp(b.data ** 2)), rtol=1e-12)


def test_jacobian_of_an_input_without_requires_grad_is_not_zero(rng):
    """The old jacobian returned zeros here: it differentiated the caller's tensor, which required no grad."""
    A = rng.standard_normal((3, 4))
    x = t64(rng.standard_normal(4))
    assert not x.requires_grad
    for mode in ("reverse", "forward"):
        np.testing.assert_allclose(mg.jacobian(lambda t: t64(A) @ t, x, mode=mode).data, A, atol=1e-15)
    assert not x.requires_grad and x.grad is None  # the caller's tensor is left as it was


def test_jacobian_of_an_unused_input_and_a_constant_output_is_zero(rng):
    a, b = inputs(rng)
    J = mg.jacobian(lambda x, y: (x.sum(), t64(np.ones(2))), (a, b))
    np.testing.assert_array_equal(J[0][1].data, np.zeros(4))
    np.testing.assert_array_equal(J[1][0].data, np.zeros((2, 3, 4)))
    np.testing.assert_array_equal(J[0][0].data, np.ones((3, 4)))


def test_hessian_matches_finite_differences_of_the_gradient(rng):
    w, x = t64(rng.standard_normal(3)), t64(rng.standard_normal((5, 3)))
    H = mg.hessian(lambda v: loss(v, x), w)
    assert H.shape == (3, 3)

    def gradient(v):
        return mg.vjp(lambda p: loss(p, x), v)[1](t64(1.0))[0]

    np.testing.assert_allclose(H.data, numeric_jacobian(gradient, (w,), 0)[0], rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(H.data, H.data.T, atol=1e-12)  # symmetric, as a Hessian must be


def test_hessian_of_tuple_inputs_gives_blocks(rng):
    w, x = t64(rng.standard_normal(3)), t64(rng.standard_normal((2, 3)))
    H = mg.hessian(loss, (w, x))
    assert [[h.shape for h in row] for row in H] == [[(3, 3), (3, 2, 3)], [(2, 3, 3), (2, 3, 2, 3)]]
    # The blocks off the diagonal are each other's transposes.
    np.testing.assert_allclose(H[0][1].data, np.moveaxis(H[1][0].data, -1, 0), atol=1e-12)


def test_hvp_matches_finite_differences_of_gradients(rng):
    w, x = t64(rng.standard_normal(3)), t64(rng.standard_normal((5, 3)))
    v = t64(rng.standard_normal(3))
    value, Hv = mg.hvp(lambda p: loss(p, x), w, v)
    assert value.item() == pytest.approx(loss(w, x).item())

    def gradient_at(p):
        return mg.vjp(lambda q: loss(q, x), t64(p))[1](t64(1.0))[0].data

    expected = (gradient_at(w.data + EPS * v.data) - gradient_at(w.data - EPS * v.data)) / (2 * EPS)
    np.testing.assert_allclose(Hv.data, expected, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(Hv.data, mg.hessian(lambda p: loss(p, x), w).data @ v.data, rtol=1e-10)


def test_hvp_with_tuple_inputs(rng):
    w, x = t64(rng.standard_normal(3)), t64(rng.standard_normal((2, 3)))
    vw, vx = t64(rng.standard_normal(3)), t64(rng.standard_normal((2, 3)))
    _, (hw, hx) = mg.hvp(loss, (w, x), (vw, vx))
    H = mg.hessian(loss, (w, x))
    np.testing.assert_allclose(hw.data, H[0][0].data @ vw.data + np.tensordot(H[0][1].data, vx.data, 2),
                               rtol=1e-10)
    np.testing.assert_allclose(hx.data, H[1][0].data @ vw.data + np.tensordot(H[1][1].data, vx.data, 2),
                               rtol=1e-10)


# --------------------------------------------------------------------------------------
# Inputs, dtypes, nesting
# --------------------------------------------------------------------------------------


def test_inputs_are_left_alone_whether_or_not_they_require_grad(rng):
    a = mg.Tensor(rng.standard_normal((3, 4)), dtype=np.float64, requires_grad=True)
    b = t64(rng.standard_normal(4))
    mg.jvp(two_in_two_out, (a, b), (mg.ones_like(a), mg.ones_like(b)))
    mg.vjp(two_in_two_out, a, b)[1]((mg.ones(3, dtype=np.float64), mg.ones(3, 4, dtype=np.float64)))
    mg.hessian(loss, (b, a))
    assert a.grad is None and b.grad is None and a.requires_grad and not b.requires_grad


def test_works_under_no_grad(rng):
    x = t64(rng.standard_normal(4))
    with mg.no_grad():
        J = mg.jacobian(lambda t: t.exp(), x, mode="forward")
        _, Hv = mg.hvp(lambda t: (t ** 3).sum(), x, mg.ones_like(x))
    np.testing.assert_allclose(J.data, np.diag(np.exp(x.data)), rtol=1e-12)
    np.testing.assert_allclose(Hv.data, 6 * x.data, rtol=1e-12)
    assert not J.requires_grad and not Hv.requires_grad


def test_results_are_plain_tensors_outside_any_differentiation(rng):
    a, b = inputs(rng)
    outputs, tangents = mg.jvp(two_in_two_out, (a, b), (mg.ones_like(a), mg.ones_like(b)))
    assert not any(t.requires_grad for t in (*outputs, *tangents))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float32_and_float64_stay_in_their_dtype(rng, dtype):
    a64, b64 = inputs(rng)
    a, b = a64.astype(dtype), b64.astype(dtype)
    outputs, tangents = mg.jvp(two_in_two_out, (a, b), (mg.ones_like(a), mg.ones_like(b)))
    _, grads = mg.vjp(two_in_two_out, a, b)[0], mg.vjp(two_in_two_out, a, b)[1](
        tuple(mg.ones_like(o) for o in outputs))
    J = mg.jacobian(two_in_two_out, (a, b), mode="forward")
    H = mg.hessian(loss, (b, a))
    _, Hv = mg.hvp(loss, (b, a), (mg.ones_like(b), mg.ones_like(a)))
    results = [*outputs, *tangents, *grads, *(j for row in J for j in row), *(h for row in H for h in row), *Hv]
    assert all(r.dtype == dtype for r in results), [r.dtype for r in results]
    if dtype == np.float32:  # against the float64 reference
        _, ref = mg.jvp(two_in_two_out, (a64, b64), (mg.ones_like(a64), mg.ones_like(b64)))
        for t, r in zip(tangents, ref):
            np.testing.assert_allclose(t.data, r.data, rtol=1e-5, atol=1e-5)


def test_nested_calls_compose(rng):
    """Inside an outer differentiation the results are recorded: a jvp can be differentiated by grad."""
    x = mg.Tensor(rng.standard_normal(4), dtype=np.float64, requires_grad=True)
    t = t64(rng.standard_normal(4))
    _, x_t = mg.jvp(lambda v: v.tanh(), x, t)  # (1 - tanh(x)^2) * t, as a function of x
    assert x_t.requires_grad
    (g,) = mg.grad(x_t.sum(), x)
    th = np.tanh(x.data)
    np.testing.assert_allclose(g.data, -2 * th * (1 - th ** 2) * t.data, rtol=1e-12)
    # And the Jacobian of a function that itself calls vjp is a Hessian.
    H = mg.jacobian(lambda v: mg.vjp(lambda p: (p ** 3).sum(), v)[1](t64(1.0))[0], x.detach())
    np.testing.assert_allclose(H.data, np.diag(6 * x.data), rtol=1e-12)


def test_numpy_arrays_are_accepted_as_inputs_and_tangents(rng):
    x = rng.standard_normal(3)
    _, x_t = mg.jvp(lambda v: v * v, (x,), (np.ones(3),))
    np.testing.assert_allclose(x_t.data, 2 * x, rtol=1e-12)


# --------------------------------------------------------------------------------------
# Errors name the argument
# --------------------------------------------------------------------------------------


def test_tangent_of_the_wrong_shape_is_named(rng):
    a, b = inputs(rng)
    with pytest.raises(ValueError, match=r"jvp: tangent 1 has shape \(3,\) but input 1 has shape \(4,\)"):
        mg.jvp(two_in_two_out, (a, b), (mg.ones_like(a), mg.ones(3, dtype=np.float64)))


def test_tangent_of_the_wrong_dtype_is_named(rng):
    a, b = inputs(rng)
    with pytest.raises(TypeError, match=r"jvp: tangent 0 is float32 but input 0 is float64"):
        mg.jvp(two_in_two_out, (a, b), (mg.ones(3, 4), mg.ones_like(b)))


def test_tangents_must_have_the_inputs_structure(rng):
    a, b = inputs(rng)
    with pytest.raises(ValueError, match="1 tangents for 2 inputs"):
        mg.jvp(two_in_two_out, (a, b), (mg.ones_like(a),))
    with pytest.raises(TypeError, match="tangents must be a tuple of 2"):
        mg.jvp(two_in_two_out, (a, b), mg.ones_like(a))
    with pytest.raises(TypeError, match="must be one too"):
        mg.jvp(lambda x: x * 2.0, b, (mg.ones_like(b),))


def test_cotangent_of_the_wrong_shape_is_named(rng):
    a, b = inputs(rng)
    _, pullback = mg.vjp(two_in_two_out, a, b)
    with pytest.raises(ValueError, match=r"vjp pullback: cotangent 1 has shape \(4,\) but output 1 has shape"):
        pullback((mg.ones(3, dtype=np.float64), mg.ones(4, dtype=np.float64)))


def test_other_bad_arguments(rng):
    x = t64(rng.standard_normal(3))
    with pytest.raises(TypeError, match="input 1 is bool"):
        mg.vjp(lambda t, m: t.masked_fill(m, 0.0), x, mg.Tensor(np.array([True, False, True])))
    with pytest.raises(TypeError, match="fn must return a Tensor or a tuple of Tensors, got int"):
        mg.vjp(lambda t: 3, x)
    with pytest.raises(ValueError, match=r"hessian: fn must return a single-element Tensor.*shape \(3,\)"):
        mg.hessian(lambda t: t * t, x)
    with pytest.raises(ValueError, match=r"hvp: fn must return a single-element Tensor"):
        mg.hvp(lambda t: t * t, x, x)
    with pytest.raises(ValueError, match="mode must be 'reverse' or 'forward'"):
        mg.jacobian(lambda t: t, x, mode="sideways")


def test_forward_mode_needs_no_rules_beyond_the_vjps():
    """A brand-new op with only a VJP gets forward mode at once (double backward)."""
    cube = Op("cube_fn_test", lambda x: x ** 3, lambda g, out, x: (g * 3.0 * x * x,), samples=[])
    x = t64([1.0, -2.0, 0.5])
    _, x_t = mg.jvp(cube, x, t64([1.0, 1.0, 2.0]))
    np.testing.assert_allclose(x_t.data, 3 * x.data ** 2 * np.array([1.0, 1.0, 2.0]))


# --------------------------------------------------------------------------------------
# Against torch.func
# --------------------------------------------------------------------------------------


def torch_two_in_two_out(a, b):
    return (a @ b).tanh(), a * b.exp()


def torch_loss(w, x):
    return ((x @ w).tanh() ** 2).sum() + (w ** 3).sum() * 0.1


def test_against_torch_func(rng):
    torch = pytest.importorskip("torch")
    from torch.autograd.functional import hessian, hvp, jacobian
    from torch.func import jvp, vjp

    a, b = inputs(rng)
    ta, tb = t64(rng.standard_normal((3, 4))), t64(rng.standard_normal(4))
    A, B, TA, TB = (torch.from_numpy(t.data) for t in (a, b, ta, tb))

    _, ours = mg.jvp(two_in_two_out, (a, b), (ta, tb))
    _, theirs = jvp(torch_two_in_two_out, (A, B), (TA, TB))
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o.data, t.numpy(), rtol=1e-12, atol=1e-14)

    u = (t64(rng.standard_normal(3)), t64(rng.standard_normal((3, 4))))
    ours = mg.vjp(two_in_two_out, a, b)[1](u)
    theirs = vjp(torch_two_in_two_out, A, B)[1](tuple(torch.from_numpy(x.data) for x in u))
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o.data, t.numpy(), rtol=1e-12, atol=1e-14)

    # Whole Jacobians, Hessians and HVPs against torch.autograd.functional: torch.func's jacrev,
    # jacfwd and hessian agree with it but spend seconds setting up vmap on first use.
    theirs = jacobian(torch_two_in_two_out, (A, B))
    for mode in ("reverse", "forward"):
        ours = mg.jacobian(two_in_two_out, (a, b), mode=mode)
        for k in range(2):
            for i in range(2):
                np.testing.assert_allclose(ours[k][i].data, theirs[k][i].numpy(), rtol=1e-12, atol=1e-14)

    w, x = t64(rng.standard_normal(3)), t64(rng.standard_normal((2, 3)))
    W, X = torch.from_numpy(w.data), torch.from_numpy(x.data)
    ours = mg.hessian(loss, (w, x))
    theirs = hessian(torch_loss, (W, X))
    for i in range(2):
        for j in range(2):
            np.testing.assert_allclose(ours[i][j].data, theirs[i][j].numpy(), rtol=1e-12, atol=1e-14)

    v = (t64(rng.standard_normal(3)), t64(rng.standard_normal((2, 3))))
    value, ours = mg.hvp(loss, (w, x), v)
    their_value, theirs = hvp(torch_loss, (W, X), tuple(torch.from_numpy(t.data) for t in v))
    assert value.item() == pytest.approx(their_value.item(), rel=1e-12)
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o.data, t.numpy(), rtol=1e-12, atol=1e-14)


def test_float32_against_torch_func(rng):
    torch = pytest.importorskip("torch")
    from torch.func import jvp

    a, b = (t.astype(np.float32) for t in inputs(rng))
    ta, tb = mg.ones_like(a), mg.ones_like(b)
    _, ours = mg.jvp(two_in_two_out, (a, b), (ta, tb))
    # The float64 reference, as everywhere in the project's float32 tests.
    _, theirs = jvp(torch_two_in_two_out, tuple(torch.from_numpy(t.data.astype(np.float64)) for t in (a, b)),
                    tuple(torch.ones(s, dtype=torch.float64) for s in ((3, 4), (4,))))
    for o, t in zip(ours, theirs):
        assert o.dtype == np.float32
        np.testing.assert_allclose(o.data, t.numpy(), rtol=1e-5, atol=1e-5)


def test_identity_and_linear_edge_cases(rng):
    x, t = t64(rng.standard_normal(3)), t64(rng.standard_normal(3))
    y, y_t = mg.jvp(lambda v: v, x, t)  # the output is the very tensor differentiated
    np.testing.assert_array_equal(y_t.data, t.data)
    np.testing.assert_array_equal(mg.jacobian(lambda v: v, x, mode="forward").data, np.eye(3))
    np.testing.assert_array_equal(mg.vjp(lambda v: v, x)[1](t)[0].data, t.data)
    np.testing.assert_array_equal(mg.hessian(lambda v: (v * 2.0).sum(), x).data, np.zeros((3, 3)))  # linear
    assert mg.hvp(lambda v: t64(5.0), x, t)[1].data.tolist() == [0.0, 0.0, 0.0]  # constant


@pytest.mark.parametrize("mode", ["reverse", "forward"])
def test_an_empty_jacobian_or_hessian_block_keeps_the_float32_dtype(mode):
    empty = mg.tensor(np.zeros(0, np.float32), requires_grad=True)
    x = mg.tensor(np.ones(2, np.float32), requires_grad=True)
    blocks = mg.jacobian(lambda a, b: a.sum() + b * 2.0, (empty, x), mode=mode)
    assert [(j.shape, j.dtype) for j in blocks] == [((2, 0), np.float32), ((2, 2), np.float32)]
    alone = mg.jacobian(lambda a: a * 2.0, empty, mode=mode)
    assert alone.shape == (0, 0) and alone.dtype == np.float32
    H = mg.hessian(lambda a, b: (a * a).sum() + (b * b).sum(), (empty, x))
    assert [[h.dtype for h in row] for row in H] == [[np.float32] * 2] * 2
    assert mg.hessian(lambda a: (a * a).sum(), empty).dtype == np.float32
