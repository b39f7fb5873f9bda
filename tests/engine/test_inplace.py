"""In-place updates, PyTorch's rules: `-=`, `+=`, `*=`, `/=`, `x[i] = v` and `zero_()`.

They change a tensor's data in place, keeping its identity, `.grad` and dtype; where a gradient is at stake
they are ops of the graph (tests/autograd/test_inplace_in_graph.py), refused on a leaf that requires grad
outside no_grad(), as in PyTorch. The manual SGD loop every tutorial writes first must train.
"""

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn


def test_the_manual_sgd_loop_trains_a_model():
    nn.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
    rng = np.random.default_rng(0)
    x = mg.tensor(rng.standard_normal((32, 3)).astype(np.float32))
    y = mg.tensor(np.sin(x.numpy().sum(axis=1, keepdims=True)))
    params = list(model.parameters())
    ids = [id(p) for p in params]
    losses = []
    for _ in range(60):
        for p in params:
            p.grad = None
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        with mg.no_grad():
            for p in model.parameters():
                p -= 0.2 * p.grad
        losses.append(loss.item())
    assert [id(p) for p in model.parameters()] == ids
    assert all(p.requires_grad and p.dtype == np.float32 and p.is_leaf for p in model.parameters())
    assert losses[-1] < 0.5 * losses[0]
    assert all(b <= a + 1e-6 for a, b in zip(losses, losses[1:]))  # a small step: the loss falls every step


def test_the_manual_loop_on_one_tensor_with_zero_grad():
    w = mg.tensor([3.0, -2.0], requires_grad=True)
    for _ in range(30):
        loss = (w * w).sum()
        loss.backward()
        with mg.no_grad():
            w -= 0.1 * w.grad
        grad = w.grad
        w.grad.zero_()
        assert w.grad is grad and w.grad.tolist() == [0.0, 0.0]  # zeroed in place
    np.testing.assert_allclose(w.numpy(), np.array([3.0, -2.0]) * 0.8**30, rtol=1e-5)


@pytest.mark.parametrize("symbol, fn", [("+=", lambda a, b: a + b), ("-=", lambda a, b: a - b),
                                        ("*=", lambda a, b: a * b), ("/=", lambda a, b: a / b)])
def test_each_operator_updates_in_place_under_no_grad(symbol, fn):
    w = mg.tensor([1.0, 2.0, 4.0], requires_grad=True)
    (w.sum()).backward()
    data, grad, before = w.data, w.grad, w.numpy().copy()
    v = mg.tensor(np.array([2.0, 4.0, 8.0]))  # float64 meets float32: cast to the tensor's dtype
    with mg.no_grad():
        alias = w
        exec(f"w {symbol} v")
    assert alias is w and w.data is data and w.grad is grad and w.dtype == np.float32 and w.requires_grad
    np.testing.assert_allclose(w.numpy(), fn(before, v.numpy()).astype(np.float32))


def test_a_tensor_outside_any_graph_updates_in_place_without_no_grad():
    t = mg.zeros(4)
    t += 1
    t *= mg.tensor([1.0, 2.0, 3.0, 4.0])
    t[0] = 10.0
    t[mg.tensor([False, True, False, True])] = -1.0
    assert t.tolist() == [10.0, -1.0, 3.0, -1.0]
    assert t.dtype == np.float32 and not t.requires_grad


def test_in_place_keeps_the_dtype_and_refuses_what_pytorch_refuses():
    i = mg.tensor(np.array([1, 2, 3]))
    i += 2
    assert i.tolist() == [3, 4, 5] and i.dtype == np.int64
    with pytest.raises(TypeError, match=r"\+=: cannot write a float value into this tensor \(\(3,\) int64\)"):
        i += 0.5
    with pytest.raises(TypeError, match=r"/=: .*int64"):  # true division makes floats
        i /= 2
    with pytest.raises(TypeError, match=r"x\[index\] = value: .*int64"):
        i[0] = 1.5
    with pytest.raises(mg.OpError, match=r"\+=: .*shape \(2, 3\) value into this tensor \(\(3,\) int64\)"):
        i += np.ones((2, 3), dtype=np.int64)  # in place keeps the shape
    assert i.tolist() == [3, 4, 5]  # nothing changed by the refused updates


def test_a_tensor_that_requires_grad_refuses_in_place_outside_no_grad():
    w = mg.tensor([1.0, 2.0], requires_grad=True)
    for update in ("w -= 1.0", "w += 1.0", "w *= 2.0", "w /= 2.0", "w[0] = 5.0", "w.zero_()"):
        with pytest.raises(RuntimeError, match=r"requires grad .* outside no_grad\(\).*mg.no_grad\(\)"):
            exec(update)
    with pytest.raises(RuntimeError, match=r"masked_fill\(mask, v\), mg.where\(mask, v, x\)"):
        w[0] = 5.0
    assert w.tolist() == [1.0, 2.0]


def test_a_tensor_made_by_a_recorded_op_may_change_under_no_grad_as_in_pytorch():
    w = mg.tensor([1.0, 2.0], requires_grad=True)
    h = w * 3.0
    with mg.no_grad():
        h -= 1.0  # mul read w and 3.0, not its output: backward is unchanged
        h[0] = 0.0
    assert h.tolist() == [0.0, 5.0]
    h.sum().backward()
    assert w.grad.tolist() == [3.0, 3.0]
    y = w.exp()
    with mg.no_grad():
        y[0] = 0.0  # exp reads its output: refused at backward, as in PyTorch
    with pytest.raises(RuntimeError, match=r"its output .* of op 'exp' was changed in place by `x\[index\] = value`"):
        y.sum().backward()


def test_a_right_hand_side_that_requires_grad_is_recorded_as_in_pytorch():
    w = mg.tensor([1.0, 2.0], requires_grad=True)
    total = mg.tensor(0.0)
    total += (w ** 2).sum()  # total becomes a node of the graph: add(total as it was, the loss)
    assert total.item() == 5.0 and total.requires_grad and not total.is_leaf
    total.backward()
    assert w.grad.tolist() == [2.0, 4.0]
    running = mg.tensor(0.0)
    with mg.no_grad():
        running += (w ** 2).sum()  # a plain number under no_grad: a running total
    assert running.item() == 5.0 and not running.requires_grad


def test_backward_refuses_a_graph_whose_input_changed_in_place_afterwards():
    w = mg.tensor([1.0, 2.0], requires_grad=True)
    loss = (w * w).sum()
    with mg.no_grad():
        w -= 1.0
    with pytest.raises(RuntimeError, match=r"input 0 \(shape \(2,\) float32\) of op 'mul' was changed in place"):
        loss.backward()
    # through a view made by an op too: reshape reads only w's shape, pow reads the view's values (as PyTorch)
    w = mg.tensor([1.0, 2.0], requires_grad=True)
    loss = (w.reshape(2, 1) ** 2).sum()
    with mg.no_grad():
        w *= 2.0
    with pytest.raises(RuntimeError, match=r"input 0 \(shape \(2, 1\) float32\) of op 'pow' was changed in place"):
        loss.backward()
    # a change made before the forward pass is fine
    w = mg.tensor([1.0, 2.0], requires_grad=True)
    with mg.no_grad():
        w += 1.0
    (w * w).sum().backward()
    assert w.grad.tolist() == [4.0, 6.0]


def test_a_read_only_array_is_a_plain_error():
    t = mg.Tensor._wrap(np.broadcast_to(np.zeros(3, np.float32), (2, 3)))
    with pytest.raises(mg.OpError, match=r"-=: cannot write .* read-only"):
        t -= 1.0
