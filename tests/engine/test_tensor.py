"""The Tensor itself: clear errors for bad input, dtype rules, operators, indexing, shape methods."""

import numpy as np
import pytest

import minigrad as mg


def f32(*shape):
    return mg.Tensor(np.arange(np.prod(shape), dtype=np.float32).reshape(shape))


def leaf(data):
    return mg.Tensor(np.asarray(data, dtype=np.float64), requires_grad=True)


# --------------------------------------------------------------------------------------
# Errors: an OpError naming the op, the shapes and the dtypes, never a bare NumPy traceback
# --------------------------------------------------------------------------------------

BAD_INPUTS = {
    "broadcast": (lambda: f32(2, 3) + f32(4), "add", ["(2, 3)", "(4,)", "float32"]),
    "broadcast-mul-float64": (lambda: f32(2, 3).double() * f32(3, 2), "mul", ["(2, 3)", "(3, 2)", "float64"]),
    "matmul-inner-dim": (lambda: f32(2, 3) @ f32(4, 5), "matmul", ["(2, 3)", "(4, 5)", "float32"]),
    "matmul-batch": (lambda: f32(2, 3, 4) @ f32(3, 4, 5), "matmul", ["(2, 3, 4)", "(3, 4, 5)"]),
    "sum-axis": (lambda: f32(3, 4).sum(axis=2), "sum", ["(3, 4)", "float32", "axis"]),
    "max-axis": (lambda: f32(3, 4).max(axis=-3), "max", ["(3, 4)", "float32"]),
    "softmax-axis": (lambda: f32(3, 4).softmax(axis=5), "softmax", ["(3, 4)", "float32"]),
    "transpose-axes": (lambda: f32(3, 4).transpose(0, 5), "transpose", ["(3, 4)", "float32"]),
    "swapaxes-axis": (lambda: f32(3, 4).swapaxes(0, 2), "transpose", ["(3, 4)", "float32", "dim 2"]),
    "squeeze-axis": (lambda: f32(3, 1).squeeze(2), "squeeze", ["(3, 1)", "float32", "dim 2"]),
    "split-axis": (lambda: f32(3, 4).split(2, 2), "split", ["(3, 4)", "float32"]),
    "split-sizes": (lambda: f32(3, 4).split([2, 2], 0), "split", ["(3, 4)", "float32", "3"]),
    "reshape-size": (lambda: f32(3, 4).reshape(5), "reshape", ["(3, 4)", "(5,)", "float32"]),
    "broadcast_to": (lambda: f32(3, 4).broadcast_to(4, 3), "broadcast_to", ["(3, 4)", "(4, 3)"]),
    "concatenate": (lambda: mg.concatenate([f32(2, 3), f32(2, 4)]), "concatenate", ["(2, 3)", "(2, 4)"]),
    "stack": (lambda: mg.stack([f32(2, 3), f32(3, 2)]), "stack", ["(2, 3)", "(3, 2)"]),
    "index": (lambda: f32(3, 4)[5], "getitem", ["(3, 4)", "float32", "5"]),
    "where": (lambda: mg.where(np.ones(3, bool), f32(2, 3), f32(4)), "where", ["(2, 3)", "(4,)"]),
}


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_bad_input_raises_op_error_naming_op_shapes_dtypes(name):
    make, op_name, fragments = BAD_INPUTS[name]
    with pytest.raises(mg.OpError) as info:
        make()
    message = str(info.value)
    assert message.startswith(f"{op_name}:"), message
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} missing from: {message}"


def test_op_error_is_a_value_error():
    assert issubclass(mg.OpError, ValueError)


def test_unsqueeze_rejects_an_out_of_range_axis():
    with pytest.raises(mg.OpError, match=r"unsqueeze.*\(3, 4\)"):
        f32(3, 4).unsqueeze(7)


def test_operand_of_an_unsupported_type():
    with pytest.raises(TypeError, match="str"):
        f32(2) + "a"
    with pytest.raises(TypeError, match="str"):
        mg.Tensor("abc")


@pytest.mark.parametrize("name", ["tril", "triu"])
def test_tril_and_triu_need_two_dimensions(name):
    for x in (mg.tensor([1.0, 2.0, 3.0]), mg.tensor(1.0)):
        with pytest.raises(mg.OpError, match=rf"{name}: {name} needs a tensor of at least 2 dimensions"):
            getattr(x, name)()
    assert getattr(mg.ones(2, 3, 3), name)().shape == (2, 3, 3)


# --------------------------------------------------------------------------------------
# Dtypes
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("data, dtype", [
    (3, np.float32), (2.5, np.float32), ([1, 2, 3], np.float32), ([[1.5, 2.0]], np.float32),
    (np.arange(3.0), np.float64), (np.arange(3, dtype=np.float32), np.float32), (np.arange(3), np.int64),
    (True, np.bool_), ([True, False], np.bool_), (np.array([True]), np.bool_), (np.float64(2.0), np.float64),
])
def test_construction_dtypes(data, dtype):
    assert mg.Tensor(data).dtype == dtype


def test_construction_copies_arrays_and_honours_dtype():
    array = np.zeros(3)
    t = mg.Tensor(array)
    array[0] = 1.0
    assert t.data[0] == 0.0
    assert mg.Tensor([1, 2], dtype=np.int32).dtype == np.int32
    assert mg.tensor([1.0], dtype=np.float64).dtype == np.float64


@pytest.mark.parametrize("expr", [
    lambda x: x * 0.5, lambda x: 0.5 * x, lambda x: x / 3, lambda x: 3 / x, lambda x: x - 1, lambda x: 1 - x,
    lambda x: x ** 2, lambda x: x ** 0.5, lambda x: 2 ** x, lambda x: -x, lambda x: mg.maximum(x, 0.0),
    lambda x: x * np.float64(0.5), lambda x: x / np.sqrt(np.float64(4.0)), lambda x: x.masked_fill(x > 1, 0.0),
    lambda x: mg.where(x > 1, x, 0.0), lambda x: x.clip(0.5, 1.5),
], ids=["mul", "rmul", "div", "rdiv", "sub", "rsub", "pow2", "pow-half", "rpow", "neg", "maximum",
        "numpy-float64-scalar", "div-numpy-sqrt", "masked_fill", "where", "clip"])
def test_float32_meets_numbers_and_stays_float32(expr):
    assert expr(mg.Tensor([1.0, 2.0])).dtype == np.float32


def test_float64_meets_python_float_with_full_precision():
    x = mg.Tensor(np.array([1.0, 3.0]))
    y = x * 0.1 + 1 / 3
    assert y.dtype == np.float64
    np.testing.assert_array_equal(y.data, np.array([1.0, 3.0]) * 0.1 + 1 / 3)  # exact: no float32 detour


def test_integer_tensors_stay_integer_with_python_ints():
    positions = mg.arange(4)
    assert (positions + 1).dtype == np.int64
    np.testing.assert_array_equal((positions * 2).data, [0, 2, 4, 6])


def test_casts():
    x = mg.Tensor([1.5, 2.5])
    assert x.double().dtype == np.float64 and x.double().float().dtype == np.float32
    y = leaf([1.0, 2.0])
    (y.float() * 2.0).sum().backward()
    assert y.grad.dtype == np.float64  # the gradient is cast back to the input's dtype


# --------------------------------------------------------------------------------------
# Operators
# --------------------------------------------------------------------------------------


def test_ndarray_on_the_left_uses_reflected_operators():
    x = leaf([1.0, 2.0])
    a = np.array([10.0, 20.0])
    for result, expected in [(a + x, a + x.data), (a - x, a - x.data), (a * x, a * x.data),
                             (a / x, a / x.data), (np.eye(2) @ x, np.eye(2) @ x.data)]:
        assert isinstance(result, mg.Tensor) and result.requires_grad
        np.testing.assert_allclose(result.data, expected)
    (a - x).sum().backward()
    np.testing.assert_array_equal(x.grad.data, [-1.0, -1.0])


def test_comparisons_give_bool_tensors_outside_the_graph():
    x = leaf([1.0, 2.0, 3.0])
    for mask, expected in [(x > 2, [0, 0, 1]), (x >= 2, [0, 1, 1]), (x < 2, [1, 0, 0]), (x <= 2, [1, 1, 0]),
                           (x == 2, [0, 1, 0]), (x != 2, [1, 0, 1])]:
        assert mask.dtype == np.bool_ and not mask.requires_grad
        np.testing.assert_array_equal(mask.data, np.array(expected, bool))
    np.testing.assert_array_equal((~(x > 2)).data, [True, True, False])
    assert x.argmax().item() == 2 and x.argmin().item() == 0


def test_truth_value_and_iteration_follow_numpy():
    assert not mg.Tensor([0.0])
    assert mg.Tensor(1.0)
    with pytest.raises(ValueError, match="ambiguous"):
        bool(mg.Tensor([1.0, 2.0]))
    rows = list(f32(3, 2))
    assert len(rows) == 3 and all(r.shape == (2,) for r in rows)
    np.testing.assert_array_equal(rows[2].data, [4.0, 5.0])
    a, b = mg.Tensor([1.0, 2.0])
    assert (a.item(), b.item()) == (1.0, 2.0)
    with pytest.raises(TypeError, match="0-d"):
        iter(mg.Tensor(1.0))


def test_iteration_is_differentiable():
    x = leaf([1.0, 2.0, 3.0])
    total = sum(row * row for row in x)
    total.backward()
    np.testing.assert_allclose(x.grad.data, 2 * x.data)


# --------------------------------------------------------------------------------------
# Indexing
# --------------------------------------------------------------------------------------

INDICES = {
    "int": 1,
    "negative-int": -1,
    "slice": (slice(1, 3), slice(None, None, 2)),
    "int-array": np.array([0, 2]),
    "int-list": [2, 0],
    "bool-mask": np.array([True, False, True]),
    "ellipsis-int-array": (Ellipsis, np.array([[1, 1], [3, 0]])),
    "newaxis": (None, 1),
    "row-and-col-arrays": (np.array([0, 2, 2]), np.array([1, 3, 3])),
    "int-tensor": mg.Tensor(np.array([2, 2, 1])),
    "bool-tensor": mg.Tensor(np.array([False, True, True])),
}


@pytest.mark.parametrize("name", sorted(INDICES))
def test_indexing_matches_numpy_and_backward_scatter_adds(name):
    index = INDICES[name]
    x = leaf(np.arange(12.0).reshape(3, 4))
    numpy_index = index.data if isinstance(index, mg.Tensor) else index
    numpy_index = np.asarray(numpy_index) if isinstance(numpy_index, list) else numpy_index
    np.testing.assert_array_equal(x[index].data, x.data[numpy_index])
    x[index].sum().backward()
    expected = np.zeros((3, 4))
    np.add.at(expected, numpy_index, 1.0)  # how many times each element was picked
    np.testing.assert_array_equal(x.grad.data, expected)
    assert mg.gradcheck(lambda t: t[index], leaf(np.random.default_rng(0).standard_normal((3, 4))))


def test_repeated_indices_accumulate_gradients():
    table = leaf(np.zeros((4, 2)))
    tokens = np.array([1, 3, 1, 1])
    table[tokens].sum().backward()
    np.testing.assert_array_equal(table.grad.data, [[0, 0], [3, 3], [0, 0], [1, 1]])


def test_mask_from_a_comparison_selects_and_routes_gradients():
    x = leaf([-1.0, 2.0, -3.0, 4.0])
    x[x > 0].sum().backward()
    np.testing.assert_array_equal(x.grad.data, [0.0, 1.0, 0.0, 1.0])


# --------------------------------------------------------------------------------------
# Shape methods
# --------------------------------------------------------------------------------------


def test_shape_methods_match_numpy():
    x = f32(2, 3, 4)
    d = x.data
    np.testing.assert_array_equal(x.reshape(6, 4).data, d.reshape(6, 4))
    np.testing.assert_array_equal(x.reshape((4, -1)).data, d.reshape(4, -1))
    np.testing.assert_array_equal(x.transpose(2, 0, 1).data, d.transpose(2, 0, 1))
    np.testing.assert_array_equal(x.permute((1, 2, 0)).data, d.transpose(1, 2, 0))
    np.testing.assert_array_equal(x.swapaxes(0, -1).data, d.swapaxes(0, -1))
    np.testing.assert_array_equal(x.T.data, d.T)
    np.testing.assert_array_equal(x.flatten().data, d.reshape(-1))
    assert x.unsqueeze(1).shape == (2, 1, 3, 4) and x.unsqueeze(-1).shape == (2, 3, 4, 1)
    assert x[:, :1].squeeze(1).shape == (2, 4) and x[:1, :, :1].squeeze().shape == (3,)
    assert x[:, :1].expand(2, 5, 4).shape == (2, 5, 4)
    parts = x.split(2, -1)
    assert [p.shape for p in parts] == [(2, 3, 2), (2, 3, 2)]
    assert [p.shape for p in mg.split(x, [1, 2], 1)] == [(2, 1, 4), (2, 2, 4)]
    assert x.squeeze(axis=0).shape == (2, 3, 4)  # axis= is PyTorch's alias: a dim of another size stays


def test_split_concatenate_stack_gradients():
    x = leaf(np.arange(6.0).reshape(2, 3))
    a, b, c = x.split(1, 1)
    (mg.concatenate([c, a], axis=1) * 2.0 + mg.stack([b, b], axis=0).sum(axis=0)).sum().backward()
    # a and c: times 2. b: stacked twice and summed (2b), then broadcast over 2 columns: 4.
    np.testing.assert_array_equal(x.grad.data, [[2.0, 4.0, 2.0], [2.0, 4.0, 2.0]])


def test_constructors():
    assert mg.zeros(2, 3).shape == (2, 3) and mg.zeros(2, 3).dtype == np.float32
    assert mg.ones((2,), dtype=np.float64).dtype == np.float64
    assert mg.zeros_like(mg.arange(3)).dtype == np.int64
    np.testing.assert_array_equal(mg.ones_like(f32(2)).data, [1.0, 1.0])
    a = mg.randn(3, rng=np.random.default_rng(1))
    b = mg.randn(3, rng=np.random.default_rng(1))
    np.testing.assert_array_equal(a.data, b.data)
    assert a.dtype == np.float32 and mg.randn(2, 2, requires_grad=True).requires_grad


def test_repr_names_the_op():
    x = leaf([1.0])
    assert "requires_grad=True" in repr(x)
    assert "op=mul" in repr(x * 2.0)


def test_a_user_op_with_a_variable_number_of_inputs_gets_a_method():
    from minigrad.ops import OPS, op, sample

    try:
        @op(method="weighted_total")
        class weighted_total:
            """sum of the inputs, times ``scale``."""
            samples = [sample((3,), (3,), (3,), scale=2.0)]

            def forward(*xs, scale=1.0):
                return scale * sum(xs[1:], xs[0])

            def vjp(g, out, *xs, scale=1.0):
                return tuple(g * scale for _ in xs)

        a, b, c = (mg.tensor(np.arange(3.0) + i, requires_grad=True) for i in range(3))
        total = a.weighted_total(b, c, scale=2.0)  # every positional argument is a tensor
        np.testing.assert_array_equal(total.data, 2.0 * (a.data + b.data + c.data))
        total.sum().backward()
        assert all((t.grad.data == 2.0).all() for t in (a, b, c))
        assert mg.gradcheck(lambda *xs: weighted_total(*xs, scale=2.0), (a, b, c))
    finally:
        OPS.pop("weighted_total", None)
        if hasattr(mg.Tensor, "weighted_total"):
            delattr(mg.Tensor, "weighted_total")


@pytest.mark.parametrize("reduce", ["sum", "amax", "amin", "softmax", "log_softmax"])
def test_a_reduction_of_a_zero_d_tensor_over_axis_zero_has_a_gradient(reduce):
    # NumPy's sum, max, min take axis 0 or -1 of a 0-d array (PyTorch too): the backward takes it as well
    x = mg.tensor(np.float64(2.0), requires_grad=True)
    y = getattr(x, reduce)(axis=-1)
    y.backward()
    assert y.shape == () and x.grad.shape == ()
    assert (y.item(), x.grad.item()) == {"softmax": (1.0, 0.0), "log_softmax": (0.0, 0.0)}.get(reduce, (2.0, 1.0))
