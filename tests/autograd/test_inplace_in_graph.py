"""In-place ops in the graph, as PyTorch records them, and the version checks of what each VJP saved.

Every program runs as written on minigrad and on PyTorch (``lib`` is one or the other). Those PyTorch computes
must give PyTorch's gradients here (no false alarm); those PyTorch refuses must be refused here, before any
gradient is written, naming the op and the writer (nothing silently wrong).
"""

import numpy as np
import pytest

import minigrad as mg

_X = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5]], dtype=np.float32)
_W = np.array([[1.0, -2.0], [0.5, 1.5], [-1.0, 0.25]], dtype=np.float32)


def _leaves(lib):
    return lib.tensor(_X, requires_grad=True), lib.tensor(_W, requires_grad=True)


# --------------------------------------------------------------------------------------
# What PyTorch computes: the same gradients here
# --------------------------------------------------------------------------------------


def add_saves_neither_input(lib, x, W):
    y = (x + 1.0).sum() + (W + 2.0).sum() + (x - W.sum()).sum()
    with lib.no_grad():
        x += 1.0
        W *= 3.0
    return y


def a_product_with_a_constant_saves_the_constant_only(lib, x, W):
    y = (x * 2.0).sum() + (lib.tensor(_X) @ W).sum() + (W * lib.tensor(3.0)).sum()
    with lib.no_grad():
        x += 1.0
        W -= 1.0  # x @ W and W * 3 read W only for the constant's gradient: none
    return y


def shape_ops_read_only_the_shape(lib, x, W):
    y = (x.reshape(3, 2).transpose(0, 1) + 2.0).sum() + W.sum() + lib.cat([x, x]).sum() + x.mean()
    with lib.no_grad():
        x -= 1.0
        W += 1.0
    return y


def an_output_saved_by_its_op_is_what_is_read(lib, x, W):
    y = x.exp().sum() + x.relu().sum() + W.tanh().sum() + W.sigmoid().sum()
    with lib.no_grad():
        x += 0.5  # exp, relu, tanh and sigmoid read their outputs, not their inputs
        W *= -1.0
    return y


def out_plus_equals_bias(lib, x, W):
    b = W[0] * 1.0
    out = x @ W
    out += b
    out -= W[1]
    out *= W[2]
    out /= 2.0
    return (out * out).sum()


def rows_written_one_by_one(lib, x, W):
    logits = lib.zeros(2, 2)
    for i in range(2):
        logits[i] = x[i] @ W
    return (logits * logits).sum()


def a_tensor_used_before_and_after_its_in_place_op(lib, x, W):
    h = x @ W
    z = (h + 1.0).sum()  # (add reads neither input: h may be written after)
    h += W[0]
    return z + (h * 3.0).sum()


def masked_fill_clamp_copy_zero_on_computed_tensors(lib, x, W):
    a = x * 2.0
    a.masked_fill_(lib.tensor([[True, False, False], [False, False, True]]), 0.0)
    a.clamp_(-1.0, 2.0)
    b = x * 3.0
    b.copy_(W.transpose(0, 1) * 5.0)
    c = x * 4.0
    c.zero_()
    return (a * a).sum() + (b * x).sum() + (c + x).sum()


def a_slice_of_a_computed_tensor_written_in_place(lib, x, W):
    out = x * 1.0
    out[0] *= 3.0
    out[:, 1] += W[0, 0]
    row = out[1]
    row *= 2.0  # a view: its base sees the write, in the graph too
    return (out * out).sum()


def a_running_total(lib, x, W):
    total = lib.zeros(())
    for i in range(2):
        total += (x[i] @ W).sum()
    return total


def a_computed_tensor_written_under_no_grad(lib, x, W):
    h = x @ W
    y = (h + 1.0).sum()  # add reads nothing: a write to h under no_grad changes no gradient
    with lib.no_grad():
        h += 100.0
    return y


COMPUTED = [add_saves_neither_input, a_product_with_a_constant_saves_the_constant_only,
            shape_ops_read_only_the_shape, an_output_saved_by_its_op_is_what_is_read, out_plus_equals_bias,
            rows_written_one_by_one, a_tensor_used_before_and_after_its_in_place_op,
            masked_fill_clamp_copy_zero_on_computed_tensors, a_slice_of_a_computed_tensor_written_in_place,
            a_running_total, a_computed_tensor_written_under_no_grad]


def _grads(lib, program):
    x, W = _leaves(lib)
    program(lib, x, W).backward()
    return [None if t.grad is None else np.array(t.grad.tolist()) for t in (x, W)]


@pytest.mark.parametrize("program", COMPUTED, ids=lambda p: p.__name__)
def test_what_pytorch_computes_gives_its_gradients(program):
    torch = pytest.importorskip("torch")
    for mine, theirs in zip(_grads(mg, program), _grads(torch, program)):
        assert (mine is None) == (theirs is None)
        if mine is not None:
            np.testing.assert_allclose(mine, theirs, rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------------------
# What PyTorch refuses: refused here, naming the op and the writer
# --------------------------------------------------------------------------------------


def mul_saves_both_inputs(lib, x, W):
    y = (x * x[::-1]).sum() if lib is mg else (x * x.flip(0)).sum()
    with lib.no_grad():
        x += 1.0
    return y


def exp_saves_its_output(lib, x, W):
    y = x.exp()
    y += 1.0
    return y.sum()


def tanh_output_written_at_an_index(lib, x, W):
    y = x.tanh()
    y[0] = 0.0
    return y.sum()


def matmul_input_written_through_a_row(lib, x, W):
    out = x @ W
    with lib.no_grad():
        W[0] *= 2.0
    return out.sum()


REFUSED = {
    mul_saves_both_inputs: r"input 0 \(shape \(2, 3\) float32\) of op 'mul' was changed in place by `\+=`",
    exp_saves_its_output: r"its output \(shape \(2, 3\) float32\) of op 'exp' was changed in place by `\+=`",
    tanh_output_written_at_an_index: r"its output .* of op 'tanh' was changed in place by `x\[index\] = value`",
    matmul_input_written_through_a_row: r"input 1 \(shape \(3, 2\) float32\) of op 'matmul' .* by `x\[index\] = value`",
}


@pytest.mark.parametrize("program", list(REFUSED), ids=lambda p: p.__name__)
def test_what_pytorch_refuses_is_refused_before_any_gradient_is_written(program):
    x, W = _leaves(mg)
    loss = program(mg, x, W)
    with pytest.raises(RuntimeError, match=REFUSED[program]):
        loss.backward()
    assert x.grad is None and W.grad is None


@pytest.mark.parametrize("program", list(REFUSED), ids=lambda p: p.__name__)
def test_pytorch_refuses_them_too(program):
    torch = pytest.importorskip("torch")
    x, W = _leaves(torch)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        program(torch, x, W).backward()


@pytest.mark.parametrize("update", ["w -= 1.0", "w *= 2.0", "w[0] = 5.0", "w.zero_()", "w.clamp_(0.0, 1.0)",
                                    "w[0] += 1.0", "w[1:].masked_fill_(w[1:] > 0, 0.0)"])
def test_a_leaf_that_requires_grad_or_a_view_of_it_refuses_outside_no_grad_as_in_pytorch(update):
    torch = pytest.importorskip("torch")
    w = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        exec(update)
    w = mg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"(a tensor|view \(made by 'getitem'\) of a tensor) that requires "
                                           r"grad .* outside no_grad\(\): a leaf.*`with mg.no_grad\(\):`"):
        exec(update)
    assert w.tolist() == [1.0, 2.0, 3.0]


def test_a_view_made_before_its_base_was_written_in_the_graph_and_used_after_is_refused_not_wrong():
    # PyTorch rebuilds such a view's graph (x.grad = 3 on row 0); minigrad refuses rather than miss the factor 3
    x = mg.ones(2, 2, requires_grad=True)
    out = x * 1.0
    view = out[0]
    out *= 3.0
    loss = view.sum()
    with pytest.raises(RuntimeError, match=r"input 0 of op 'sum' is a view \(made by 'getitem'\) of a tensor "
                                           r"written in place by `\*=` .* take the view after the write"):
        loss.backward()
    view = out[0]  # taken after the write: PyTorch's gradient
    view.sum().backward()
    assert x.grad.tolist() == [[3.0, 3.0], [0.0, 0.0]]


def test_an_in_place_op_in_the_graph_keeps_the_tensor_its_array_and_its_views():
    x = mg.tensor(_X, requires_grad=True)
    out = x * 2.0
    array, view = out.data, out.detach()[0]
    out += 1.0
    assert out.data is array and not out.is_leaf and out._op.name == "add" and out._version == 1
    np.testing.assert_allclose(view.numpy(), _X[0] * 2.0 + 1.0)  # a view sees the write
    with pytest.raises(mg.OpError, match=r"\+=: the result has shape \(2, 2, 3\) .* keeps the tensor's shape"):
        out += mg.ones(2, 1, 1)
    ids = mg.zeros(2, 3, dtype=mg.long)
    with pytest.raises(mg.OpError, match=r"\+=: the result has .* dtype float(32|64), but .* dtype int64"):
        ids += out  # PyTorch refuses a float result in an integer tensor too
    assert ids.tolist() == [[0, 0, 0], [0, 0, 0]] and not ids.requires_grad
