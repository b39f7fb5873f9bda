"""Property-based tests (hypothesis): elementwise ops on random broadcastable shapes, reductions on random axes.

The op table's samples cover a few hand-picked shapes; these tests let hypothesis
choose shapes (including 0-d and size-1 axes that broadcast) and axes (negative,
tuples, None, keepdims), and check values against NumPy and gradients against
finite differences.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import minigrad as mg

PROPERTY = settings(max_examples=25, deadline=None)

# name -> (minigrad function, NumPy reference, domain of the inputs)
BINARY = {
    "add": (lambda a, b: a + b, np.add, (-2.0, 2.0)),
    "sub": (lambda a, b: a - b, np.subtract, (-2.0, 2.0)),
    "mul": (lambda a, b: a * b, np.multiply, (-2.0, 2.0)),
    "div": (lambda a, b: a / b, np.divide, (0.5, 2.0)),
    "pow": (lambda a, b: a ** b, np.power, (0.5, 2.0)),
    "maximum": (mg.maximum, np.maximum, (-2.0, 2.0)),
    "minimum": (mg.minimum, np.minimum, (-2.0, 2.0)),
}


def _tensor(rng, shape, domain, dtype=np.float64):
    return mg.Tensor(rng.uniform(*domain, size=shape).astype(dtype), requires_grad=True)


@pytest.mark.parametrize("name", sorted(BINARY))
@PROPERTY
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=3),
       seed=st.integers(0, 2**16))
def test_binary_broadcasting(name, shapes, seed):
    fn, reference, domain = BINARY[name]
    rng = np.random.default_rng(seed)
    a_shape, b_shape = shapes.input_shapes
    a, b = _tensor(rng, a_shape, domain), _tensor(rng, b_shape, domain)

    out = fn(a, b)
    assert out.shape == shapes.result_shape
    np.testing.assert_allclose(out.data, reference(a.data, b.data), rtol=1e-12)

    upstream = rng.standard_normal(out.shape)
    out.backward(upstream)
    assert a.grad.shape == a.shape and b.grad.shape == b.shape
    if name == "add":  # the broadcast gradient summed back: a closed form to compare with
        lead = len(out.shape) - len(a_shape)
        axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(a_shape) if n == 1)
        np.testing.assert_allclose(a.grad.data, upstream.sum(axis=axes, keepdims=True).reshape(a_shape))

    assert mg.gradcheck(fn, (_tensor(rng, a_shape, domain), _tensor(rng, b_shape, domain)))


@pytest.mark.parametrize("name", sorted(BINARY))
@settings(max_examples=10, deadline=None)
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=3),
       seed=st.integers(0, 2**16))
def test_binary_float32_with_python_scalar(name, shapes, seed):
    """float32 meets float32 or a Python number: the result stays float32."""
    fn, reference, domain = BINARY[name]
    rng = np.random.default_rng(seed)
    a = _tensor(rng, shapes.input_shapes[0], domain, np.float32)
    b = _tensor(rng, shapes.input_shapes[1], domain, np.float32)
    assert fn(a, b).dtype == np.float32
    assert fn(a, 1.5).dtype == np.float32
    assert fn(1.5, b).dtype == np.float32


@st.composite
def _reductions(draw):
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4))
    ndim = len(shape)
    axis = draw(st.one_of(
        st.none(),
        st.integers(-ndim, ndim - 1),
        hnp.valid_tuple_axes(ndim, min_size=1),
    ))
    return shape, axis, draw(st.booleans())


def _lse(x, axis, keepdims):
    m = x.max(axis=axis, keepdims=True)
    out = np.log(np.exp(x - m).sum(axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis)


REDUCTIONS = {
    "sum": np.sum,
    "mean": np.mean,
    "amax": np.max,
    "amin": np.min,
    "var": np.var,  # (with correction=0: NumPy's default, the population variance)
    "logsumexp": _lse,
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@PROPERTY
@given(case=_reductions(), seed=st.integers(0, 2**16))
def test_reduction(name, case, seed):
    shape, axis, keepdims = case
    rng = np.random.default_rng(seed)
    x = _tensor(rng, shape, (-2.0, 2.0))

    def fn(t):
        return getattr(t, name)(axis=axis, keepdims=keepdims, **(dict(correction=0) if name == "var" else {}))

    out = fn(x)
    expected = REDUCTIONS[name](x.data, axis=axis, keepdims=keepdims)
    assert out.shape == np.shape(expected)
    np.testing.assert_allclose(out.data, expected, rtol=1e-12, atol=1e-12)

    out.sum().backward()
    assert x.grad.shape == x.shape
    if name == "sum":
        np.testing.assert_array_equal(x.grad.data, np.ones(shape))
    assert mg.gradcheck(fn, _tensor(rng, shape, (-2.0, 2.0)))


@PROPERTY
@given(shape=hnp.array_shapes(min_dims=1, max_dims=3, max_side=4), seed=st.integers(0, 2**16),
       data=st.data())
def test_softmax_rows_sum_to_one_and_gradcheck(shape, seed, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    rng = np.random.default_rng(seed)
    x = _tensor(rng, shape, (-3.0, 3.0))
    p = x.softmax(axis=axis)
    np.testing.assert_allclose(p.data.sum(axis=axis), 1.0, rtol=1e-12)
    np.testing.assert_allclose(x.log_softmax(axis=axis).data, np.log(p.data), rtol=1e-10, atol=1e-12)
    assert mg.gradcheck(lambda t: t.softmax(axis=axis), x)
    assert mg.gradcheck(lambda t: t.log_softmax(axis=axis), x)
