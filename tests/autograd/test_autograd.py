"""Autograd: accumulation, grad modes, hooks, long graphs, higher-order gradients, anomaly detection.

Expected values are closed forms worked out by hand (d/dx x**3 = 3x**2, the
Hessian of a quadratic...), or finite differences via gradcheck.
"""

import gc
import sys
import weakref

import numpy as np
import pytest

import minigrad as mg
from minigrad.modes import state


def leaf(data, dtype=np.float64):
    return mg.Tensor(np.asarray(data, dtype=dtype), requires_grad=True)


# --------------------------------------------------------------------------------------
# Accumulation, leaves, non-leaves
# --------------------------------------------------------------------------------------


def test_leaf_grads_accumulate_across_backward_calls():
    x = leaf([1.0, -2.0, 3.0])
    (x * x).sum().backward()
    np.testing.assert_allclose(x.grad.data, 2 * x.data)
    (x * x).sum().backward()
    np.testing.assert_allclose(x.grad.data, 4 * x.data)
    x.zero_grad()
    assert x.grad is None


def test_gradient_has_the_leaf_dtype_and_shape():
    x = mg.Tensor(np.ones((2, 3), np.float32), requires_grad=True)
    (x * 0.5).sum().backward()
    assert x.grad.dtype == np.float32 and x.grad.shape == (2, 3)
    np.testing.assert_array_equal(x.grad.data, np.full((2, 3), 0.5, np.float32))


def test_a_float64_upstream_gradient_does_not_upcast_float32_grads():
    x = mg.Tensor(np.ones(3, np.float32), requires_grad=True)
    (x * 2.0).backward(mg.Tensor(np.ones(3)))
    assert x.grad.dtype == np.float32
    (g,) = mg.grad(x * 2.0, x, grad_outputs=mg.Tensor(np.ones(3)))
    assert g.dtype == np.float32


def test_shared_leaf_used_twice_sums_both_paths():
    x = leaf([0.5, 1.5])
    y = x.exp() + x * x  # d/dx = e**x + 2x
    y.sum().backward()
    np.testing.assert_allclose(x.grad.data, np.exp(x.data) + 2 * x.data)


def test_broadcast_gradients_are_summed_back_to_input_shapes(rng):
    a = leaf(rng.standard_normal((2, 1, 4)))
    b = leaf(rng.standard_normal((3, 1)))
    c = leaf(rng.standard_normal(()))
    (a * b + c).sum().backward()
    assert a.grad.shape == (2, 1, 4) and b.grad.shape == (3, 1) and c.grad.shape == ()
    np.testing.assert_allclose(a.grad.data, np.broadcast_to(b.data.sum(), (2, 1, 4)))
    np.testing.assert_allclose(b.grad.data, np.full((3, 1), a.data.sum()))
    np.testing.assert_allclose(c.grad.data, 2 * 3 * 4)


def _gradients(mode, loss, leaves):
    if mode == "grad":
        return mg.grad(loss, leaves)
    loss.backward(create_graph=mode == "create_graph")
    return [x.grad for x in leaves]


@pytest.mark.parametrize("mode", ["backward", "create_graph", "grad"])
def test_leaf_grads_are_separate_writable_arrays(mode):
    # add's VJP hands the same gradient to both inputs, reshape's gives views of it,
    # and sum's is a read-only broadcast view: each leaf must still get its own array,
    # since optimizers update gradients in place.
    a, b = leaf(np.zeros((2, 3))), leaf(np.zeros((2, 3)))
    ga, gb = _gradients(mode, (a + b).sum(), [a, b])
    assert ga is not gb and ga.data is not gb.data
    c, d = leaf(np.zeros((2, 3))), leaf(np.zeros((2, 3)))
    gc, gd = _gradients(mode, (c.reshape(6) + d.reshape(6)).sum(), [c, d])
    assert not np.shares_memory(gc.data, gd.data)
    for g in (ga, gb, gc, gd):
        assert g.data.flags.writeable
        g.data *= 2.0  # would raise on a read-only view, or double the other leaf's
    np.testing.assert_array_equal(ga.data, np.full((2, 3), 2.0))
    np.testing.assert_array_equal(gd.data, np.full((2, 3), 2.0))


def test_leaf_grad_does_not_alias_the_callers_gradient():
    x = leaf(np.zeros(3))
    upstream = np.array([1.0, 2.0, 3.0])
    x.backward(upstream)
    x.grad.data *= 10.0
    np.testing.assert_array_equal(upstream, [1.0, 2.0, 3.0])


def test_intermediate_tensors_keep_no_grad_unless_retained():
    x = leaf([1.0, 2.0])
    y = x * 3.0
    z = y * y
    y.retain_grad()
    z.sum().backward()
    np.testing.assert_allclose(y.grad.data, 2 * y.data)  # dz/dy = 2y
    assert z.grad is None
    np.testing.assert_allclose(x.grad.data, 18 * x.data)  # z = 9x**2


def test_detach_shares_data_but_stops_gradients():
    x = leaf([1.0, 2.0, 3.0])
    d = x.detach()
    assert not d.requires_grad and d.is_leaf
    assert np.shares_memory(d.data, x.data)
    (x * x.detach()).sum().backward()  # only one factor is differentiated
    np.testing.assert_allclose(x.grad.data, x.data)


def test_integer_tensors_cannot_require_grad():
    with pytest.raises(TypeError, match=r"requires_grad.*int64.*\(3,\)"):
        mg.Tensor(np.arange(3), requires_grad=True)
    with pytest.raises(TypeError, match="bool"):
        mg.Tensor(np.array([True, False])).requires_grad_()


def test_casting_to_an_integer_dtype_leaves_the_graph():
    x = leaf([1.7, -0.2])
    rounded = x.astype(np.int64)
    assert rounded.dtype == np.int64 and not rounded.requires_grad


def test_only_leaves_can_change_requires_grad():
    y = leaf([1.0]) * 2.0
    with pytest.raises(RuntimeError, match="leaf"):
        y.requires_grad_(False)


# --------------------------------------------------------------------------------------
# Grad modes
# --------------------------------------------------------------------------------------


def test_no_grad_context_records_nothing():
    x = leaf([1.0, 2.0])
    with mg.no_grad():
        assert not mg.is_grad_enabled()
        y = x * 2.0
    assert mg.is_grad_enabled()
    assert not y.requires_grad and y.is_leaf and y._inputs == ()
    np.testing.assert_array_equal(y.data, [2.0, 4.0])


def test_no_grad_decorator_records_nothing_and_restores_the_mode():
    x = leaf([1.0, 2.0])

    @mg.no_grad()
    def double(t, depth=0):
        assert not mg.is_grad_enabled()
        return double(t, depth + 1) if depth < 3 else t * 2.0  # re-entering the decorated function

    assert not double(x).requires_grad
    assert mg.is_grad_enabled()


def test_a_kept_set_grad_enabled_object_entered_later_restores_the_mode_at_entry():
    off = mg.set_grad_enabled(False)
    mg.set_grad_enabled(False)  # switched again after the kept call: the call's "before" no longer holds
    try:
        with off:
            assert not mg.is_grad_enabled()
        assert not mg.is_grad_enabled()
        with mg.set_grad_enabled(True):  # entered straight after its call: restores what was there before it
            assert mg.is_grad_enabled()
        assert not mg.is_grad_enabled()
    finally:
        mg.set_grad_enabled(True)


def test_no_grad_restores_the_mode_after_an_exception():
    with pytest.raises(ZeroDivisionError), mg.no_grad():
        raise ZeroDivisionError
    assert mg.is_grad_enabled()


def test_enable_grad_inside_no_grad():
    x = leaf([1.0])
    with mg.no_grad():
        with mg.enable_grad():
            y = x * 2.0
        z = x * 2.0
    assert y.requires_grad and not z.requires_grad


def test_set_grad_enabled_works_as_a_function_and_as_a_context_manager():
    try:
        mg.set_grad_enabled(False)
        assert not mg.is_grad_enabled()
        assert not (mg.tensor([1.0], requires_grad=True) * 2.0).requires_grad
        mg.set_grad_enabled(True)
        assert mg.is_grad_enabled()
        with mg.set_grad_enabled(False):
            assert not mg.is_grad_enabled()
        assert mg.is_grad_enabled()
    finally:
        state.grad_enabled = True


def test_one_mode_object_entered_again_restores_what_was_there_each_time():
    try:
        composite = mg.composite_mode()  # switches on, as a call
        assert mg.is_composite_mode()
        with composite:
            with composite:  # nested
                assert mg.is_composite_mode()
            assert mg.is_composite_mode()  # still on: the inner block restores what it found
        assert not mg.is_composite_mode()
        with composite:  # reused later
            assert mg.is_composite_mode()
        assert not mg.is_composite_mode()
        off = mg.no_grad()
        with off:
            with mg.enable_grad():
                with off:
                    assert not mg.is_grad_enabled()
                assert mg.is_grad_enabled()
            assert not mg.is_grad_enabled()
        assert mg.is_grad_enabled()
        mg.no_grad()  # no_grad() on its own changes nothing, as in PyTorch
        assert mg.is_grad_enabled()

        @mg.composite_mode()
        def inside():
            return mg.is_composite_mode()

        assert not mg.is_composite_mode() and inside() and not mg.is_composite_mode()
    finally:
        state.composite, state.grad_enabled = False, True


# --------------------------------------------------------------------------------------
# Hooks
# --------------------------------------------------------------------------------------


def test_hook_sees_and_replaces_the_gradient():
    x = leaf([1.0, 2.0])
    y = x * 3.0
    seen = []
    y.register_hook(lambda g: seen.append(g.data.copy()))
    handle = y.register_hook(lambda g: g * 10.0)
    (y * y).sum().backward()
    np.testing.assert_allclose(seen[0], 2 * y.data)  # the hook saw dL/dy
    np.testing.assert_allclose(x.grad.data, 10 * 3 * 2 * y.data)  # the replacement flowed on

    handle.remove()
    x.zero_grad()
    (x * 3.0).sum().backward()
    np.testing.assert_allclose(x.grad.data, [3.0, 3.0])


def test_hook_on_a_leaf_changes_what_is_stored():
    x = leaf([1.0, 2.0])
    x.register_hook(lambda g: -g)
    x.sum().backward()
    np.testing.assert_array_equal(x.grad.data, [-1.0, -1.0])


def test_removed_hook_is_not_called():
    x = leaf([1.0])
    calls = []
    x.register_hook(lambda g: calls.append(1)).remove()
    (x * 2.0).sum().backward()
    assert calls == []


# --------------------------------------------------------------------------------------
# Long graphs and memory
# --------------------------------------------------------------------------------------


def test_100k_op_chain_backprops_at_the_default_recursion_limit():
    assert sys.getrecursionlimit() < 100_000  # so a recursive sort would have overflowed
    x = leaf(0.5)
    h = x
    for _ in range(100_000):
        h = h * 0.99999
    h.backward()
    np.testing.assert_allclose(x.grad.data, 0.99999 ** 100_000, rtol=1e-9)


def test_graph_is_released_after_backward():
    x = leaf(np.ones(1000))
    middle = x.exp()
    out = (middle * 2.0).sum()
    ref = weakref.ref(middle)
    del middle
    out.backward()
    gc.collect()
    assert ref() is None, "backward kept the intermediate tensor alive while its output is still held"
    assert out._inputs is None  # and a second backward says so (next test)


def test_second_backward_through_a_freed_graph_is_a_clear_error():
    x = leaf([1.0, 2.0])
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        y.backward()


def test_retain_graph_allows_a_second_backward():
    x = leaf([1.0, 2.0])
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.data, 4 * x.data)


def test_what_a_forward_saves_lives_as_long_as_its_graph():
    # layer_norm keeps (xhat, rstd) for its VJP: only when recorded, reused by a retained second
    # backward unchanged, and dropped once a backward has used it.
    x, w, b = leaf(np.random.default_rng(0).standard_normal((4, 6))), leaf(np.ones(6)), leaf(np.zeros(6))
    with mg.no_grad():
        assert mg.fused.layer_norm(x, w, b)._saved is None
    out = mg.fused.layer_norm(x, w, b)
    xhat, rstd = out._saved
    loss = (out * out).sum()
    loss.backward(retain_graph=True)
    first = x.grad.data.copy()
    assert out._saved[0] is xhat and np.array_equal(xhat, out.data)  # weight 1, bias 0: the output is xhat
    x.grad = None
    loss.backward()
    np.testing.assert_array_equal(x.grad.data, first)
    assert out._saved is None and out._inputs is None


def test_backward_on_a_non_scalar_needs_a_gradient():
    y = leaf(np.ones((2, 3))) * 2.0
    with pytest.raises(RuntimeError, match=r"non-scalar.*\(2, 3\)"):
        y.backward()
    with pytest.raises(mg.OpError, match=r"\(3,\).*\(2, 3\)"):
        y.backward(np.ones(3))


def test_backward_on_a_tensor_that_does_not_require_grad():
    with pytest.raises(RuntimeError, match="does not require grad"):
        mg.Tensor([1.0, 2.0]).sum().backward()


# --------------------------------------------------------------------------------------
# Higher order, grad()
# --------------------------------------------------------------------------------------


def test_gradient_of_the_gradient_of_cube_is_6x():
    x = leaf([-1.5, 0.5, 2.0])
    (dy,) = mg.grad((x ** 3).sum(), x, create_graph=True)
    np.testing.assert_allclose(dy.data, 3 * x.data ** 2)
    assert dy.requires_grad
    dy.sum().backward()
    np.testing.assert_allclose(x.grad.data, 6 * x.data)


def test_backward_create_graph_then_backward_again():
    x = leaf([0.3, -0.7])
    (x ** 3).sum().backward(create_graph=True)
    first = x.grad
    x.zero_grad()
    first.sum().backward()
    np.testing.assert_allclose(x.grad.data, 6 * x.data)


def test_hessian_vector_product(rng):
    # f(x) = 1/2 x.A x + sum(x**3): Hessian = (A + A^T)/2 + diag(6x).
    A = rng.standard_normal((4, 4))
    x = leaf(rng.standard_normal(4))
    v = rng.standard_normal(4)
    f = 0.5 * (x @ (mg.Tensor(A) @ x)) + (x ** 3).sum()
    (g,) = mg.grad(f, x, create_graph=True)
    (hv,) = mg.grad(g, x, grad_outputs=v)
    hessian = (A + A.T) / 2 + np.diag(6 * x.data)
    np.testing.assert_allclose(hv.data, hessian @ v, rtol=1e-10)


def _gradient_penalty(x, w):
    """A WGAN-GP-style penalty: (|d critic / d x| - 1)**2, with critic(x) = sum(tanh(x @ w))."""
    with mg.enable_grad():  # gradcheck evaluates this under no_grad; the inner grad needs a graph
        critic = (x @ w).tanh().sum()
        (dx,) = mg.grad(critic, x, create_graph=True)
    return ((dx * dx).sum().sqrt() - 1.0) ** 2


def test_gradient_penalty_trains_through_the_gradient(rng):
    x = leaf(rng.standard_normal((3, 4)))
    w = leaf(rng.standard_normal((4, 2)))
    _gradient_penalty(x, w).backward()
    assert w.grad is not None and w.grad.shape == (4, 2)
    assert mg.gradcheck(lambda w_: _gradient_penalty(x, w_), w)


def test_grad_returns_gradients_and_leaves_dot_grad_alone():
    x, y = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    gx, gy = mg.grad((x * y).sum(), [x, y])
    np.testing.assert_array_equal(gx.data, y.data)
    np.testing.assert_array_equal(gy.data, x.data)
    assert x.grad is None and y.grad is None


def test_grad_with_an_unused_input():
    x, unused = leaf([1.0]), leaf([2.0])
    with pytest.raises(RuntimeError, match="allow_unused"):
        mg.grad((x * 2.0).sum(), [x, unused])
    gx, gu = mg.grad((x * 2.0).sum(), [x, unused], allow_unused=True)
    np.testing.assert_array_equal(gx.data, [2.0])
    assert gu is None


def test_grad_with_respect_to_an_intermediate():
    x = leaf([1.0, 2.0])
    h = x * 3.0
    (gh,) = mg.grad((h * h).sum(), h)
    np.testing.assert_allclose(gh.data, 2 * h.data)


def test_grad_of_several_outputs_with_weights():
    x = leaf([1.0, 2.0])
    (g,) = mg.grad([x * 2.0, x * x], x, grad_outputs=[np.array([1.0, 1.0]), np.array([0.5, 0.5])])
    np.testing.assert_allclose(g.data, 2.0 + x.data)


# --------------------------------------------------------------------------------------
# Anomaly detection and stable softmax
# --------------------------------------------------------------------------------------


def test_anomaly_names_the_op_and_line_of_a_forward_nan():
    x = leaf([1.0, -1.0])
    with mg.detect_anomaly(), np.errstate(invalid="ignore"):
        with pytest.raises(mg.AnomalyError) as info:
            x.log()  # the line the error must point at
    message = str(info.value)
    assert "'log'" in message and "NaN" in message and "(2,)" in message
    assert __file__ in message and "x.log()" in message


def test_anomaly_names_the_op_and_line_of_a_backward_inf():
    x = leaf([0.0, 4.0])
    with mg.detect_anomaly():
        y = x.sqrt()  # finite forward; d sqrt(x)/dx = 1/(2 sqrt x) is infinite at 0
        with pytest.raises(mg.AnomalyError) as info, np.errstate(divide="ignore"):
            y.sum().backward()
    message = str(info.value)
    assert "'sqrt'" in message and "gradient" in message and "Inf" in message
    assert __file__ in message and "y = x.sqrt()" in message


def test_anomaly_reports_a_backward_nan():
    x = leaf([0.0, 1.0])
    with mg.detect_anomaly(), np.errstate(divide="ignore", invalid="ignore"):
        y = x.sqrt() * 0.0  # the upstream gradient is 0, times sqrt's infinite local slope: NaN
        with pytest.raises(mg.AnomalyError, match="'sqrt'.*NaN"):
            y.sum().backward()


def test_anomaly_reports_overflow_to_inf_in_forward():
    x = leaf([1000.0])
    with mg.detect_anomaly(), np.errstate(over="ignore"):
        with pytest.raises(mg.AnomalyError, match="'exp'.*Inf"):
            x.exp()


@pytest.mark.parametrize("fill", [-np.inf, np.float32(-np.inf)], ids=["python-float", "numpy-float32"])
def test_minus_inf_attention_masks_are_not_anomalies(fill):
    scores = leaf(np.random.default_rng(0).standard_normal((3, 3)))
    future = np.triu(np.ones((3, 3), bool), 1)
    with mg.detect_anomaly():
        weights = scores.masked_fill(future, fill).softmax(axis=-1)
        (weights * mg.Tensor(np.arange(9.0).reshape(3, 3))).sum().backward()
    assert np.all(weights.data[future] == 0.0)
    assert np.isfinite(scores.grad.data).all()
    assert np.all(scores.grad.data[future] == 0.0)


def test_softmax_is_stable_for_huge_logits():
    x = leaf([[1000.0, 1000.0, -1000.0], [1e4, 0.0, -1e4]])
    p = x.softmax(axis=-1)
    np.testing.assert_allclose(p.data, [[0.5, 0.5, 0.0], [1.0, 0.0, 0.0]])
    np.testing.assert_allclose(x.log_softmax(axis=-1).data[0, :2], np.log(0.5))
    (p[:, 0]).sum().backward()
    assert np.isfinite(x.grad.data).all()


def test_softmax_gives_exactly_zero_weight_to_minus_inf_and_zero_rows_when_all_masked():
    x = leaf([[0.3, -np.inf, 1.2], [-np.inf, -np.inf, -np.inf]])
    p = x.softmax(axis=-1)
    assert p.data[0, 1] == 0.0
    np.testing.assert_allclose(p.data[0].sum(), 1.0)
    np.testing.assert_array_equal(p.data[1], [0.0, 0.0, 0.0])
    (p * mg.Tensor(np.arange(6.0).reshape(2, 3))).sum().backward()
    assert np.isfinite(x.grad.data).all()
    np.testing.assert_array_equal(x.grad.data[1], [0.0, 0.0, 0.0])
    assert x.grad.data[0, 1] == 0.0


def test_logsumexp_of_a_fully_masked_row_is_minus_inf_not_nan():
    x = leaf([[-np.inf, -np.inf], [0.0, 0.0]])
    out = x.logsumexp(axis=-1)
    assert out.data[0] == -np.inf
    np.testing.assert_allclose(out.data[1], np.log(2.0))


def test_log_softmax_of_a_fully_masked_row_is_minus_inf_not_nan():
    with np.errstate(invalid="ignore"):
        out = mg.Tensor([[-np.inf, -np.inf], [0.0, 0.0]]).log_softmax(axis=-1)
    np.testing.assert_array_equal(out.data[0], [-np.inf, -np.inf])  # log of softmax's all-zero row
    np.testing.assert_allclose(out.data[1], np.log(0.5))


def test_logsumexp_of_a_row_holding_inf_is_inf_with_zero_gradients_for_the_finite_entries():
    x = mg.tensor(np.array([[1.0, np.inf, 2.0], [1.0, 2.0, 3.0], [-np.inf, -np.inf, -np.inf]]), requires_grad=True)
    y = x.logsumexp(axis=1)
    with np.errstate(invalid="ignore"):  # the softmax of the +inf row is inf - inf = NaN at the inf: the answer
        y.sum().backward()
    assert y.numpy()[0] == np.inf and y.numpy()[2] == -np.inf
    np.testing.assert_allclose(y.numpy()[1], np.log(np.exp([1.0, 2.0, 3.0]).sum()))
    g = x.grad.numpy()
    assert g[0, 0] == 0.0 and g[0, 2] == 0.0 and np.isnan(g[0, 1])  # as PyTorch: undefined only at the inf
    np.testing.assert_allclose(g[1], np.exp([1.0, 2.0, 3.0]) / np.exp([1.0, 2.0, 3.0]).sum())
    assert g[2].tolist() == [0.0, 0.0, 0.0]
    whole = mg.tensor(np.array([[1.0, np.inf], [0.0, 0.0]]), requires_grad=True)
    total = whole.logsumexp()
    assert total.item() == np.inf
    with np.errstate(invalid="ignore"):
        total.backward()
    assert whole.grad.numpy()[1].tolist() == [0.0, 0.0]
