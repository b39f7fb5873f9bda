"""Version counters: every in-place write is seen by backward, whoever writes and through whichever view.

A tensor and every view of its array (a slice, reshape, transpose, `.T`, `detach()`) share one counter,
as in PyTorch; the Tensor's operators, `.data` updates, the optimizers, `load_state_dict` and `nn.init`
bump it. A backward through a graph recorded before such a write raises before any gradient is written,
naming the op, the input and the writer; the same loop in the right order trains.
"""

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn, optim


def _pair():
    """A weight ``w`` and an input ``x``, both requiring grad: d/dx of (w * x).sum() is w's value."""
    return mg.tensor([1.0, 2.0], requires_grad=True), mg.tensor([3.0, 4.0], requires_grad=True)


def _refused(loss, *tensors, match):
    """``loss.backward()`` raises naming ``match``, and no tensor got a gradient."""
    grads = [t.grad for t in tensors]
    with pytest.raises(RuntimeError, match=match):
        loss.backward()
    assert [t.grad for t in tensors] == grads  # (the same objects, or None: nothing written)


# --------------------------------------------------------------------------------------
# One counter per storage
# --------------------------------------------------------------------------------------


def test_a_tensor_and_every_view_of_its_array_share_one_version_counter():
    w = mg.tensor(np.arange(6.0, dtype=np.float32).reshape(2, 3))
    views = [w[0], w[:, 1:], w.reshape(3, 2), w.transpose(), w.T, w.detach(), w.view(6), w[0].reshape(3)]
    assert w._version == 0
    for count, view in enumerate(views, start=1):
        view += 1.0
        assert w._version == count and all(v._version == count for v in views)
    copy = w.clone()
    w -= 1.0
    assert copy._version == 0  # a copy is its own storage


def test_each_writer_bumps_the_version_as_in_pytorch():
    w = mg.tensor([1.0, 2.0], requires_grad=True)
    w.grad = mg.tensor([1.0, 1.0])

    def through_data():
        w.data -= 0.5

    writes = [lambda: optim.SGD([w], lr=0.1).step(), lambda: optim.AdamW([w]).step(),
              lambda: nn.init.normal_(w), lambda: nn.init.zeros_(w), through_data]
    for count, write in enumerate(writes, start=1):
        write()
        assert w._version == count
    with mg.no_grad():
        w.copy_(mg.tensor([5.0, 6.0]))
        w[0] = 1.0
        w.zero_()
    assert w._version == 8


# --------------------------------------------------------------------------------------
# Misordered loops: a write between forward and backward is refused, nothing written
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("make", [lambda p: optim.SGD(p, lr=0.5), lambda p: optim.SGD(p, lr=0.5, momentum=0.9),
                                  lambda p: optim.Adam(p, lr=0.5), lambda p: optim.AdamW(p, lr=0.5)],
                         ids=["SGD", "SGD-momentum", "Adam", "AdamW"])
def test_an_optimizer_step_between_forward_and_backward_is_refused(make):
    w, x = _pair()
    opt = make([w])
    w.grad = mg.tensor([1.0, 1.0])
    loss = (w * x).sum()
    opt.step()  # the misordered loop: d/dx would be the updated w, [0.5, 1.5] for SGD, instead of [1, 2]
    name = type(opt).__name__
    _refused(loss, w, x, match=rf"input 0 \(shape \(2,\) float32\) of op 'mul' was changed in place by {name}\.step")


def test_load_state_dict_between_forward_and_backward_is_refused():
    model, other = nn.Linear(2, 1), nn.Linear(2, 1)
    x = mg.tensor([[1.0, 2.0]])
    loss = model(x).sum()
    model.load_state_dict(other.state_dict())
    _refused(loss, *model.parameters(), match=r"of op 'linear' was changed in place by Linear\.load_state_dict")


@pytest.mark.parametrize("init", ["uniform_", "normal_", "zeros_", "ones_"])
def test_every_nn_init_between_forward_and_backward_is_refused(init):
    w, x = _pair()
    loss = (w * x).sum()
    getattr(nn.init, init)(w)
    _refused(loss, w, x, match=rf"of op 'mul' was changed in place by nn\.init\.{init}\(\)")


def test_a_slice_changed_in_place_under_no_grad_is_seen_through_its_base():
    w, x = _pair()
    loss = (w * x).sum()
    with mg.no_grad():
        head = w[0:1]
        head -= 1.0  # writes w's array
    _refused(loss, w, x, match=r"input 0 .* of op 'mul' was changed in place by `-=`")


def test_a_data_tensor_changed_after_a_slice_of_it_was_used_is_seen():
    w = mg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    data = mg.tensor([1.0, 2.0, 3.0, 4.0])
    loss = (w * w * data[0:3]).sum()  # d/dw = 2 w data: [2, 8, 18]
    data *= 0.0  # a tensor outside any graph may change anywhere; the slice backward saved is its view
    _refused(loss, w, match=r"input 1 \(shape \(3,\) float32\) of op 'mul' was changed in place by `\*=`")


def test_zeroing_rows_in_a_loop_is_seen_through_the_matrix():
    W = mg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    x = mg.tensor([[1.0], [1.0]], requires_grad=True)
    loss = (W @ x).sum()
    with mg.no_grad():
        for row in W:
            row *= 0
    assert W.tolist() == [[0.0, 0.0], [0.0, 0.0]]
    _refused(loss, W, x, match=r"of op 'matmul' was changed in place by `\*=`")


def test_an_update_or_assignment_through_data_is_seen():
    w, x = _pair()
    loss = (w * x).sum()
    w.data -= 1.0  # the makemore update line's form, at the NumPy level
    _refused(loss, w, x, match=r"was changed in place by an update through \.data")
    w, x = _pair()
    loss = (w * x).sum()
    w.data = np.array([5.0, 6.0], dtype=np.float32)  # a new array: backward would read it
    _refused(loss, w, x, match=r"was changed in place by an assignment to \.data")


def test_grad_refuses_too_and_the_error_names_the_input_by_name():
    w = mg.tensor([1.0, 2.0], requires_grad=True, name="w")
    x = mg.tensor([3.0, 4.0], requires_grad=True)
    loss = (w * x).sum()
    with mg.no_grad():
        w += 1.0
    with pytest.raises(RuntimeError, match=r"input 'w' .* of op 'mul' .* Call backward\(\) before changing"):
        mg.grad(loss, [x])


def test_pytorch_refuses_the_same_misordered_loops():
    torch = pytest.importorskip("torch")
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    x = torch.tensor([3.0, 4.0], requires_grad=True)
    opt = torch.optim.SGD([w], lr=0.5)
    w.grad = torch.ones(2)
    loss = (w * x).sum()
    opt.step()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
    x.grad = None
    loss = (w * x).sum()
    with torch.no_grad():
        for row in w.view(2, 1):
            row *= 0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


# --------------------------------------------------------------------------------------
# The same loops in the right order
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("make", [lambda p: optim.SGD(p, lr=0.1, momentum=0.9), lambda p: optim.AdamW(p, lr=0.05)],
                         ids=["SGD", "AdamW"])
def test_the_correctly_ordered_loop_trains(make):
    nn.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
    rng = np.random.default_rng(0)
    x = mg.tensor(rng.standard_normal((32, 3)).astype(np.float32))
    y = mg.tensor(np.sin(x.numpy().sum(axis=1, keepdims=True)))
    opt = make(model.parameters())
    losses = []
    for step in range(40):
        if step == 20:
            model.load_state_dict(model.state_dict())  # loading, and initialising, before a forward pass is fine
            nn.init.zeros_(model[2].bias)
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.3 * losses[0]


def test_a_view_changed_before_the_forward_pass_is_fine():
    W = mg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    with mg.no_grad():
        for row in W:
            row *= 2
        W[0:1] -= 1.0
    (W * W).sum().backward()
    assert W.grad.tolist() == [[2.0, 6.0], [12.0, 16.0]]


def test_an_output_a_vjp_reads_changed_through_a_view_is_seen():
    x = mg.tensor([0.0, 1.0], requires_grad=True)
    y = x.exp()  # exp's VJP reads its output y
    with mg.no_grad():
        head = y[0:1]  # a view of y, made under no_grad (not in the graph): writing it writes y's array
        head -= 1.0
    with pytest.raises(RuntimeError, match=r"its output \(shape \(2,\) float32\) of op 'exp' was changed in place"):
        y.backward(mg.ones(2))
    assert x.grad is None


# --------------------------------------------------------------------------------------
# Index, target and mask tensors an op reads are checked like any other input
# --------------------------------------------------------------------------------------
# Each program runs as written on minigrad and on PyTorch (`lib` is one or the other); it
# writes, between forward and backward, an integer or bool tensor the forward read.


def _index(lib, W):
    idx = lib.tensor([0, 2, 2])
    loss = (W[idx] * lib.tensor([1.0, 2.0, 3.0]).reshape(3, 1)).sum()
    idx[0] = 1
    return loss


def _embedding(lib, W):
    ids = lib.tensor([[0, 1], [2, 0]])
    loss = (lib.nn.functional.embedding(ids, W) ** 2).sum()
    ids += 1
    return loss


def _target(lib, W):
    target = lib.tensor([0, 1, 0])
    loss = lib.nn.functional.cross_entropy(W, target)
    target[0] = 2
    return loss


def _where(lib, W):
    mask = lib.tensor([True, False, True])
    loss = (lib.where(mask, W[:, 0], W[:, 1] * 2.0) ** 2).sum()
    mask[1] = True
    return loss


def _masked_fill(lib, W):
    mask = lib.tensor([[True, False], [False, False], [False, True]])
    loss = (W.masked_fill(mask, 0.0) ** 2).sum()
    mask.zero_()
    return loss


def _micro_batches(lib, W):
    """Two micro-batches written into reused buffers, the losses summed, one backward."""
    xb, yb = lib.zeros(2, dtype=lib.long), lib.zeros(2, dtype=lib.long)
    losses = []
    for x, y in (([0, 1], [1, 0]), ([2, 2], [0, 0])):
        xb.copy_(lib.tensor(x))
        yb.copy_(lib.tensor(y))
        losses.append(lib.nn.functional.cross_entropy(lib.nn.functional.embedding(xb, W), yb))
    return losses[0] + losses[1]


_READS = {  # program: the op and the role minigrad's refusal names
    _index: "its parameter 'index' .* of op 'getitem' was changed in place by `x\\[index\\] = value`",
    _embedding: "its parameter 'index' .* of op 'getitem' was changed in place by `\\+=`",
    _target: "input 1 \\(shape \\(3,\\) int64\\) of op 'cross_entropy' was changed in place by `x\\[index\\] = value`",
    _where: "input 0 \\(shape \\(3,\\) bool\\) of op 'where' was changed in place by `x\\[index\\] = value`",
    _masked_fill: "input 1 \\(shape \\(3, 2\\) bool\\) of op 'masked_fill' was changed in place by `zero_\\(\\)`",
    _micro_batches: "its parameter 'index' .* of op 'getitem' was changed in place by `copy_\\(\\)`",
}
_W = np.array([[0.5, -1.0], [2.0, 0.25], [-0.75, 1.5]], dtype=np.float32)


@pytest.mark.parametrize("program", list(_READS), ids=lambda p: p.__name__.strip("_"))
def test_an_index_target_or_mask_written_before_backward_is_refused(program):
    W = mg.tensor(_W, requires_grad=True)
    _refused(program(mg, W), W, match=_READS[program])


@pytest.mark.parametrize("program", list(_READS), ids=lambda p: p.__name__.strip("_"))
def test_pytorch_refuses_the_same_programs(program):
    torch = pytest.importorskip("torch")
    W = torch.tensor(_W, requires_grad=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        program(torch, W).backward()


def test_micro_batches_in_fresh_buffers_or_backward_per_batch_give_pytorchs_gradients():
    torch = pytest.importorskip("torch")
    grads = []
    for lib in (mg, torch):
        W = lib.tensor(_W, requires_grad=True)
        for x, y in (([0, 1], [1, 0]), ([2, 2], [0, 0])):
            xb, yb = lib.tensor(x), lib.tensor(y)  # written once each: nothing to refuse
            lib.nn.functional.cross_entropy(lib.nn.functional.embedding(xb, W), yb).backward()
        grads.append(np.array(W.grad.tolist()))
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-6)
    assert (grads[0][2] != 0).all()  # the rows the second batch used got their gradient
