"""Extending the engine: a broken VJP is named where backward uses it, op blocks can be run again, and
table-bound methods have real signatures.

Every op defined here is removed from the table again (``unregister``), because the registry tests
(``test_ops_table.py``) walk ``OPS``.
"""

from __future__ import annotations

import inspect
import os
import re
import sys

import numpy as np
import pytest

import minigrad as mg
from minigrad import VJPError
from minigrad.ops import OPS, op, sample, unregister


@pytest.fixture
def scratch_ops():
    """Names of ops the test registers; each is unregistered afterwards, whatever happened."""
    names: list[str] = []
    yield names
    for name in names:
        if name in OPS:
            unregister(name)


def make_op(vjp, name="scratch_twice", method=None):
    """An op computing 2 * x (its inputs after the first are carried along) with the given VJP."""
    def forward(*xs):
        return 2 * xs[0]

    block = type(name, (), {"__doc__": "2 * x.", "samples": [sample((3, 4))], "forward": staticmethod(forward),
                            "vjp": staticmethod(vjp), "__module__": __name__, "__qualname__": name})
    return op(method=method)(block)


def leaves(*shapes):
    return [mg.tensor(np.ones(s), requires_grad=True) for s in shapes]


# --------------------------------------------------------------------------------------
# VJP results are checked where backward uses them
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("vjp, shapes, expected", [
    (lambda g, out, x: g * 2.0, [(3, 4)],
     r"op 'scratch_twice' returned a Tensor of shape \(3, 4\), not a tuple of 1 gradient.*\(g \* x,\)"),
    (lambda g, out, x: g.data * 2.0, [(3, 4)],
     r"op 'scratch_twice' returned a NumPy array of shape \(3, 4\), not a tuple.*Tensor ops"),
    (lambda g, out, x: (g.data * 2.0,), [(3, 4)],
     r"returned a NumPy array of shape \(3, 4\) for its input 0 \(shape \(3, 4\)\), not a Tensor or None"),
    (lambda g, out, x: (2.0,), [(3, 4)], r"returned a float for its input 0 \(shape \(3, 4\)\)"),
    (lambda g, out, x, y: (g,), [(3, 4), (4,)],
     r"op 'scratch_twice' returned 1 gradient\(s\) for its 2 input\(s\) \(shapes \(3, 4\), \(4,\)\)"),
    (lambda g, out, x: (g.sum(axis=0),), [(3, 4)],
     r"op 'scratch_twice' returned a gradient of shape \(4,\) for its input 0, which has shape \(3, 4\)"),
    (lambda g, out, x, y: (g, g[:, :2]), [(3, 4), (4,)],
     r"returned a gradient of shape \(3, 2\) for its input 1, which has shape \(4,\)"),
], ids=["no tuple comma", "bare ndarray", "ndarray entry", "number entry", "too few", "wrong shape",
        "wrong broadcast"])
def test_a_broken_vjp_is_named_with_the_input_and_both_shapes(scratch_ops, vjp, shapes, expected):
    scratch_ops.append("scratch_twice")
    twice = make_op(vjp)
    xs = leaves(*shapes)
    with pytest.raises(VJPError, match=expected):
        twice(*xs).sum().backward()


def test_a_broadcast_gradient_and_a_list_of_gradients_are_accepted(scratch_ops):
    scratch_ops.append("scratch_twice")
    # The gradient for y comes back in the output's (3, 4) shape and is summed to (4,); a list is a fine tuple.
    twice = make_op(lambda g, out, x, y: [g * 2.0, g])
    x, y = leaves((3, 4), (4,))
    twice(x, y).sum().backward()
    np.testing.assert_array_equal(x.grad.data, np.full((3, 4), 2.0))
    np.testing.assert_array_equal(y.grad.data, np.full(4, 3.0))


def test_the_check_holds_for_inputs_that_need_no_gradient(scratch_ops):
    # The same VJP fails the same way whichever of the inputs require grad.
    scratch_ops.append("scratch_twice")
    twice = make_op(lambda g, out, x, y: (g, g.data))
    x = leaves((3, 4))[0]
    with pytest.raises(VJPError, match="input 1"):
        twice(x, mg.tensor(np.ones((3, 4)))).sum().backward()


def test_numpy_on_tensors_in_a_vjp_says_to_use_table_ops(scratch_ops):
    scratch_ops.append("scratch_twice")
    twice = make_op(lambda g, out, x: (g * np.cos(x),))
    (x,) = leaves((3, 4))
    with pytest.raises(VJPError) as caught:
        twice(x).sum().backward()
    message = str(caught.value)
    assert "op 'scratch_twice' called a NumPy function on a Tensor" in message
    assert "may use only Tensor ops" in message and "x.cos()" in message
    assert "np.cos(x)" in message and __file__ in message  # the line of the VJP that did it


@pytest.mark.skipif(sys.version_info < (3, 11), reason="exception notes are new in Python 3.11")
def test_an_error_raised_inside_a_vjp_carries_the_op_name(scratch_ops):
    scratch_ops.append("scratch_twice")
    twice = make_op(lambda g, out, x: (g.reshape(5, 3),))
    (x,) = leaves((3, 4))
    with pytest.raises(mg.OpError, match="reshape") as caught:
        twice(x).sum().backward()
    assert "(raised by the VJP of op 'scratch_twice', in backward)" in caught.value.__notes__


def test_the_checks_run_under_create_graph_and_detect_anomaly(scratch_ops):
    scratch_ops.append("scratch_twice")
    twice = make_op(lambda g, out, x: g * 2.0)
    (x,) = leaves((3, 4))
    with pytest.raises(VJPError, match="not a tuple"):
        mg.grad(twice(x).sum(), x, create_graph=True)
    with mg.detect_anomaly(), pytest.raises(VJPError, match="not a tuple"):
        twice(x).sum().backward()


# --------------------------------------------------------------------------------------
# Running a block again replaces it; another block cannot take its name
# --------------------------------------------------------------------------------------


def test_running_a_block_again_replaces_the_op_and_rebinds_its_method(scratch_ops):
    scratch_ops.append("scratch_twice")
    first = make_op(lambda g, out, x: (g * 2.0,), method="scratch_twice")
    assert mg.Tensor.scratch_twice._bound_by_op is first
    second = make_op(lambda g, out, x: (g * 3.0,), method="scratch_twice")  # the same block, edited: a wrong VJP
    assert OPS["scratch_twice"] is second and second is not first
    (x,) = leaves((3, 4))
    y = x.scratch_twice()
    assert y._op is second
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.data, np.full((3, 4), 3.0))  # the new VJP ran


def test_an_edited_block_that_renames_its_method_drops_the_old_one(scratch_ops):
    scratch_ops.append("scratch_twice")
    make_op(lambda g, out, x: (g * 2.0,), method="scratch_twice_old")
    make_op(lambda g, out, x: (g * 2.0,), method="scratch_twice_new")
    assert not hasattr(mg.Tensor, "scratch_twice_old")
    assert mg.Tensor.scratch_twice_new._bound_by_op is OPS["scratch_twice"]


def test_a_different_block_with_a_taken_name_is_an_error_naming_both_and_the_fix():
    with pytest.raises(ValueError) as caught:
        @op(method="my_exp")
        class exp:
            """e ** x, again."""
            samples = [sample((3,))]

            def forward(x):
                return np.exp(x)

            def vjp(g, out, x):
                return (g * out,)

    message = str(caught.value)
    assert "op 'exp' is already registered by minigrad.ops.exp" in message
    assert f"{__name__}.test_a_different_block_with_a_taken_name_is_an_error_naming_both_and_the_fix" in message
    assert "rename the class" in message and "unregister('exp')" in message
    assert OPS["exp"].origin == "minigrad.ops.exp" and not hasattr(mg.Tensor, "my_exp")


@pytest.mark.parametrize("method, holder", [("exp", "bound by op 'exp' (minigrad.ops.exp)"),
                                             ("sum", "a call form of op 'sum' (minigrad.dialect.reductions)"),
                                             ("numel", "one of Tensor's own methods")])
def test_a_method_name_already_taken_is_an_error(scratch_ops, method, holder):
    scratch_ops.append("scratch_twice")
    with pytest.raises(ValueError, match=rf"Tensor\.{method} is already {re.escape(holder)}"):
        make_op(lambda g, out, x: (g * 2.0,), method=method)
    assert "scratch_twice" not in OPS
    assert mg.Tensor.sum._bound_by_op is OPS["sum"]


def test_unregister_removes_the_op_and_its_method(scratch_ops):
    scratch_ops.append("scratch_twice")
    make_op(lambda g, out, x: (g * 2.0,), method="scratch_twice")
    removed = unregister("scratch_twice")
    assert removed.name == "scratch_twice"
    assert "scratch_twice" not in OPS and not hasattr(mg.Tensor, "scratch_twice")
    with pytest.raises(KeyError, match="no op 'scratch_twice'"):
        unregister("scratch_twice")


def test_a_pytorch_name_minigrad_refuses_is_free_for_an_op_and_refused_again_once_it_is_gone(scratch_ops):
    scratch_ops.append("scratch_twice")
    make_op(lambda g, out, x: (g * 2.0,), method="unfold")  # x.unfold is refused with a hint (dialect.refused)
    np.testing.assert_array_equal(mg.tensor([1.0, 2.0]).unfold().data, [2.0, 4.0])
    unregister("scratch_twice")
    with pytest.raises(AttributeError, match=r"minigrad spells it x\[\.\.\., i:i \+ size\] slices and mg\.stack"):
        mg.tensor([1.0]).unfold()


# --------------------------------------------------------------------------------------
# Table-bound methods have real signatures (help() and IDEs show the parameters)
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("method, expected", [
    ("sum", "(self, dim=None, keepdim=False, *, dtype=None, axis=None, keepdims=None) -> 'Tensor'"),
    ("softmax", "(self, dim=None, dtype=None, *, axis=None) -> 'Tensor'"),
    ("exp", "(self) -> 'Tensor'"),
    ("clip", "(self, min=None, max=None, *, lo=None, hi=None) -> 'Tensor'"),
    ("masked_fill", "(self, mask, value) -> 'Tensor'"),
    ("var", "(self, dim=None, unbiased=None, keepdim=False, *, correction=None, axis=None, ddof=None, "
            "keepdims=None) -> 'Tensor'"),
])
def test_table_bound_methods_have_the_forwards_signature(method, expected):
    function = getattr(mg.Tensor, method)
    assert str(inspect.signature(function)) == expected
    assert function.__name__ == method and function.__qualname__ == f"Tensor.{method}"
    assert function.__doc__.endswith(OPS[method].doc) and f"``{method}``" in function.__doc__


@pytest.mark.parametrize("attribute, op_name, symbol", [
    ("__mul__", "mul", "self * other"), ("__rmul__", "mul", "other * self"), ("__add__", "add", "self + other"),
    ("__truediv__", "div", "self / other"), ("__matmul__", "matmul", "self @ other"),
])
def test_operators_lead_to_their_op_block(attribute, op_name, symbol):
    """``help(Tensor.__mul__)`` names ``mul`` and shows its docstring; its source is the block in ops.py."""
    function = getattr(mg.Tensor, attribute)
    assert function.__qualname__ == f"Tensor.{attribute}" and function.__name__ == attribute
    assert symbol in function.__doc__ and f"``{op_name}``" in function.__doc__
    assert function.__doc__.endswith(OPS[op_name].doc)
    assert str(inspect.signature(function)) == "(self, other) -> 'Tensor'"
    assert inspect.getsourcefile(inspect.unwrap(function)).endswith(os.path.join("minigrad", "ops.py"))
    source = inspect.getsource(function)
    assert source.lstrip().startswith("@op(") and f"class {op_name}:" in source


def test_backward_is_a_method_of_tensor_defined_in_tensor_py():
    assert "backward" in vars(mg.Tensor)
    assert inspect.getsourcefile(mg.Tensor.backward).endswith(os.path.join("minigrad", "tensor.py"))


def test_op_without_parentheses_is_a_plain_word_error():
    with pytest.raises(TypeError, match=r"@op needs parentheses: write @op\(\)"):
        @op
        class forgotten:
            def forward(x):
                return x

            def vjp(g, out, x):
                return (g,)
    assert "forgotten" not in OPS


def test_the_signature_is_the_one_the_method_accepts():
    x = mg.tensor(np.arange(12.0).reshape(3, 4))
    np.testing.assert_array_equal(x.sum(1, True).data, x.sum(axis=1, keepdims=True).data)
    np.testing.assert_array_equal(x.clip(2.0, 5.0).data, np.clip(x.data, 2.0, 5.0))
    mask = np.array([True, False, False, True])
    np.testing.assert_array_equal(x.masked_fill(mask, 0.0).data, np.where(mask, 0.0, x.data))
    inspect.signature(mg.Tensor.clip).bind(x, 2.0, hi=5.0)  # what the signature allows, the method takes
