"""gradcheck (both modes), gradgradcheck and jacobian: they pass on right gradients, and fail (usefully) on wrong ones.

Every other gradient test in the project trusts these, so they are tested
against deliberately broken gradients, not only correct ones.
"""

import re

import numpy as np
import pytest

import minigrad as mg
from minigrad.ops import Op


def leaf(data):
    return mg.Tensor(np.asarray(data, dtype=np.float64), requires_grad=True)


def test_true_on_correct_gradients(rng):
    a, b = leaf(rng.standard_normal((3, 4))), leaf(rng.standard_normal((4, 2)))
    assert mg.gradcheck(lambda x, y: (x @ y).tanh() * 2.0, (a, b)) is True
    assert mg.gradcheck(lambda x: (x.exp().sum(axis=0), x.max()), a) is True  # several outputs


def test_wrong_gradient_from_a_hook_names_input_index_and_both_values():
    def tripled_gradient(x):
        y = x * 2.0
        if y.requires_grad:  # gradcheck also evaluates fn under no_grad, for the finite differences
            y.register_hook(lambda g: g * 3.0)
        return y.sum()

    x = leaf([[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(mg.GradcheckError) as info:
        mg.gradcheck(tripled_gradient, x)
    message = str(info.value)
    assert "input 0" in message and "shape (2, 2)" in message
    assert re.search(r"index \(\d, \d\)", message)
    assert "analytic 6" in message and "numeric 2" in message


def test_wrong_gradient_from_detach_points_at_the_worst_element_of_the_right_input():
    x = leaf([0.5, 0.5])
    y = leaf([1.0, -3.0, 2.0])  # d(y * y.detach())/dy = y, not 2y: the error is largest at |y| = 3
    with pytest.raises(mg.GradcheckError) as info:
        mg.gradcheck(lambda a, b: a.sum() + (b * b.detach()).sum(), (x, y))
    message = str(info.value)
    assert "input 1" in message and "index (1,)" in message
    assert "analytic -3" in message and "numeric -6" in message


def test_gradcheck_does_not_change_its_inputs(rng):
    scalar, matrix = leaf(1.5), leaf(rng.standard_normal((3, 2)).T)  # 0-d, and a non-contiguous view
    before = matrix.data.copy()
    mg.gradcheck(lambda s, m: s * m, (scalar, matrix))
    assert scalar.shape == () and scalar.item() == 1.5
    assert matrix.shape == (2, 3)
    np.testing.assert_array_equal(matrix.data, before)


def test_rejects_float32_inputs_clearly():
    x = mg.Tensor(np.ones(3, np.float32), requires_grad=True)
    with pytest.raises(TypeError, match=r"input 0 is float32.*float64"):
        mg.gradcheck(lambda t: t * 2.0, x)


def test_rejects_inputs_none_of_which_require_grad():
    with pytest.raises(ValueError, match="requires_grad"):
        mg.gradcheck(lambda t: t * 2.0, mg.Tensor(np.ones(3)))


def test_non_differentiable_arguments_are_passed_through(rng):
    mask = np.array([True, False, True])
    x = leaf(rng.standard_normal(3))
    assert mg.gradcheck(lambda t, m: t.masked_fill(m, 0.0), (x, mask))


# --------------------------------------------------------------------------------------
# gradgradcheck
# --------------------------------------------------------------------------------------

# sin with a VJP that is right to first order but built from a constant cos(x):
# backward of the backward then misses the -sin(x) term entirely.
bad_sin = Op("bad_sin", np.sin, lambda g, out, x: (g * mg.Tensor(np.cos(x.data)),), samples=[])


def _sin(x):
    return Op("sin", np.sin, lambda g, out, x_: (g * _cos(x_),), samples=[])(x)


def _cos(x):
    return Op("cos", np.cos, lambda g, out, x_: (-g * _sin(x_),), samples=[])(x)


def test_gradgradcheck_passes_on_right_second_derivatives(rng):
    x, w = leaf(rng.standard_normal((2, 3))), leaf(rng.standard_normal((3, 2)))
    assert mg.gradgradcheck(lambda a, b: (a @ b).tanh().sum(axis=1), (x, w)) is True
    assert mg.gradgradcheck(_sin, leaf(rng.standard_normal(4))) is True


def test_gradgradcheck_catches_a_vjp_that_is_wrong_only_to_second_order(rng):
    x = leaf(rng.standard_normal(4))
    assert mg.gradcheck(bad_sin, x)  # first order is right...
    with pytest.raises(mg.GradcheckError, match="input 0"):
        mg.gradgradcheck(bad_sin, x)  # ...second order is not


def test_gradgradcheck_with_given_output_weights(rng):
    x = leaf(rng.standard_normal(3))
    v = leaf(rng.standard_normal(3))
    assert mg.gradgradcheck(lambda t: t ** 3, x, grad_outputs=v)


# --------------------------------------------------------------------------------------
# jacobian
# --------------------------------------------------------------------------------------


def test_jacobian_of_a_linear_map_is_its_matrix(rng):
    A = rng.standard_normal((3, 4))
    x = leaf(rng.standard_normal(4))
    J = mg.jacobian(lambda t: mg.Tensor(A) @ t, x)
    assert J.shape == (3, 4)
    np.testing.assert_allclose(J.data, A, rtol=0, atol=1e-15)


def test_jacobian_of_a_matrix_function_has_output_then_input_axes(rng):
    B = rng.standard_normal((4, 2))
    X = leaf(rng.standard_normal((3, 4)))
    J = mg.jacobian(lambda t: t @ mg.Tensor(B), X)  # d (XB)_ij / d X_kl = [i == k] B_lj
    assert J.shape == (3, 2, 3, 4)
    np.testing.assert_allclose(J.data, np.einsum("ik,lj->ijkl", np.eye(3), B), atol=1e-15)


def test_jacobian_of_an_rnn_tanh_chain(rng):
    W = rng.standard_normal((5, 5)) * 0.6
    b = rng.standard_normal(5) * 0.1
    h0 = leaf(rng.standard_normal(5))
    steps = 6

    def run(h):
        for _ in range(steps):
            h = (mg.Tensor(W) @ h + mg.Tensor(b)).tanh()
        return h

    J = mg.jacobian(run, h0).data
    # Closed form: dh_T/dh_0 = prod_t diag(1 - h_t**2) W, latest step on the left.
    expected, h = np.eye(5), h0.data
    for _ in range(steps):
        h = np.tanh(W @ h + b)
        expected = np.diag(1 - h ** 2) @ W @ expected
    np.testing.assert_allclose(J, expected, rtol=1e-10, atol=1e-14)
    # And central finite differences, column by column.
    eps = 1e-6
    numeric = np.stack([(run(mg.Tensor(h0.data + eps * e)).data - run(mg.Tensor(h0.data - eps * e)).data)
                        / (2 * eps) for e in np.eye(5)], axis=1)
    np.testing.assert_allclose(J, numeric, rtol=1e-5, atol=1e-8)


def test_jacobian_of_a_constant_function_is_zero():
    x = leaf([1.0, 2.0])
    J = mg.jacobian(lambda t: mg.Tensor(np.ones(3)), x)
    np.testing.assert_array_equal(J.data, np.zeros((3, 2)))


# --------------------------------------------------------------------------------------
# Forward mode
# --------------------------------------------------------------------------------------

# cos(x) * g is the right gradient, but computed on raw arrays: the result is a new
# leaf, cut off from g. Reverse mode only needs its value and passes; forward mode
# differentiates the backward pass with respect to g and finds nothing there.
off_graph_sin = Op("off_graph_sin", np.sin, lambda g, out, x: (mg.Tensor(g.data * np.cos(x.data)),), samples=[])


def test_forward_mode_catches_a_vjp_that_leaves_the_graph(rng):
    x = leaf(rng.standard_normal(4))
    assert mg.gradcheck(off_graph_sin, x, check_forward=False)  # reverse mode alone is satisfied
    with pytest.raises(mg.GradcheckError, match=r"forward mode.*input 0.*analytic 0, numeric"):
        mg.gradcheck(off_graph_sin, x)


def test_forward_mode_with_many_elements_checks_random_tangents(rng):
    """Beyond FULL_FORWARD_ELEMENTS input elements, forward mode checks J t for random t (model-sized inputs)."""
    from minigrad.autograd.gradcheck import FULL_FORWARD_ELEMENTS

    big = leaf(rng.standard_normal((11, 10)))
    assert big.size > FULL_FORWARD_ELEMENTS
    w = leaf(rng.standard_normal(10))
    assert mg.gradcheck(lambda a, b: ((a @ b).tanh() ** 2).sum(), (big, w))
    with pytest.raises(mg.GradcheckError, match=r"forward mode.*random tangent 0.*inputs \[0\]"):
        mg.gradcheck(lambda a: off_graph_sin(a).sum(), big)


def test_forward_mode_sees_inputs_the_function_closes_over(rng):
    """A module's parameters are passed to gradcheck and also used through the module, not through fn's arguments."""
    weight = leaf(rng.standard_normal((2, 3)))
    x = leaf(rng.standard_normal(3))
    assert mg.gradcheck(lambda x_, _w: (weight @ x_).tanh(), (x, weight))
