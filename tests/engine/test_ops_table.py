"""Registry-driven tests: every op in ``minigrad.OPS``, on every one of its samples.

Adding an op to the table adds it to these tests automatically: its gradient is
checked against finite differences (first and second order, in float64, in
reverse mode and in forward mode, which is derived from the VJP), its
forward and backward must keep float32 in float32, and its Tensor method and
operator must exist and agree with the op. An op without samples fails.
"""

import operator
import zlib

import numpy as np
import pytest

import minigrad as mg
from minigrad import OPS


def _cases(ops):
    return [pytest.param(op, s, id=f"{op.name}-{k}") for op in ops for k, s in enumerate(op.samples)]


ALL_CASES = _cases(sorted(OPS.values(), key=lambda op: op.name))


def _tensors(op, sample, dtype=np.float64):
    """The sample's inputs as Tensors; only floating-point ones require grad (masks, targets do not)."""
    rng = np.random.default_rng(zlib.crc32(op.name.encode()))  # reproducible, different per op
    out = []
    for array in sample.arrays(rng):
        if array.dtype.kind == "f":
            out.append(mg.Tensor(array.astype(dtype), requires_grad=True))
        else:
            out.append(mg.Tensor(array))
    return out


def _fn(op, sample):
    return lambda *xs: op(*xs, **sample.params)


def test_every_op_has_samples():
    missing = sorted(name for name, op in OPS.items() if not op.samples)
    assert not missing, f"ops without test samples: {missing}"


def test_every_op_is_documented_and_named_after_its_key():
    for name, op in OPS.items():
        assert op.name == name
        assert op.doc, f"op {name} has no docstring"


def test_every_sample_has_a_differentiable_input():
    for name, op in OPS.items():
        for k, s in enumerate(op.samples):
            assert any(t.requires_grad for t in _tensors(op, s)), f"{name} sample {k} differentiates nothing"


@pytest.mark.parametrize("op, sample", ALL_CASES)
def test_gradcheck(op, sample):
    assert mg.gradcheck(_fn(op, sample), _tensors(op, sample), check_forward=True)


@pytest.mark.parametrize("op, sample", ALL_CASES)
def test_gradgradcheck(op, sample):
    assert mg.gradgradcheck(_fn(op, sample), _tensors(op, sample), check_forward=True)


def _expected_dtype(sample):
    # astype is the one op whose output dtype is a parameter.
    return np.dtype(sample.params.get("dtype", np.float32))


@pytest.mark.parametrize("op, sample", ALL_CASES)
def test_float32_stays_float32(op, sample):
    """No silent float64 upcast, forward or backward, for float32 inputs."""
    inputs = _tensors(op, sample, dtype=np.float32)
    out = op(*inputs, **sample.params)
    assert out.dtype == _expected_dtype(sample), f"{op.name} forward gave {out.dtype} for float32 inputs"
    weights = np.random.default_rng(0).standard_normal(out.shape).astype(out.dtype)
    (out * weights).sum().backward()
    for i, x in enumerate(inputs):
        if x.requires_grad:
            assert x.grad is not None, f"{op.name}: input {i} got no gradient"
            assert x.grad.dtype == np.float32, f"{op.name}: gradient of input {i} is {x.grad.dtype}"
            assert x.grad.shape == x.shape


METHOD_OPS = sorted((op for op in OPS.values() if op.method), key=lambda op: op.name)
OPERATOR_OPS = sorted((op for op in OPS.values() if op.operator), key=lambda op: op.name)


@pytest.mark.parametrize("op", METHOD_OPS, ids=lambda op: op.name)
def test_method_matches_op(op):
    sample = op.samples[0]
    first, *rest = _tensors(op, sample)
    method = getattr(mg.Tensor, op.method, None)
    assert callable(method), f"Tensor.{op.method} is missing"
    np.testing.assert_array_equal(method(first, *rest, **sample.params).data,
                                  op(first, *rest, **sample.params).data)


@pytest.mark.parametrize("op", OPERATOR_OPS, ids=lambda op: op.name)
def test_operator_and_reflected_operator_match_op(op):
    sample = op.samples[0]
    a, b = _tensors(op, sample)
    python_op = getattr(operator, op.operator)  # operator.add, operator.truediv, operator.matmul...
    expected = op(a, b).data
    np.testing.assert_array_equal(python_op(a, b).data, expected)
    # An ndarray on the left defers to the Tensor's reflected operator (a Tensor comes back, not an ndarray).
    reflected = python_op(a.data, b)
    assert isinstance(reflected, mg.Tensor)
    np.testing.assert_array_equal(reflected.data, expected)
    assert reflected.requires_grad
