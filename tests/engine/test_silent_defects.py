"""Regression tests for answers that used to be wrong without any error: each is now right, or an error.

One test (or a few) per defect: +inf in logsumexp, rank checks (tril/triu, embedding), the dtype rule for
states and masks, fused and composite mode giving the same dtype, modes that restore what was there when
entered, GELU's gradient at large |x|, layer norm over one feature, io.load checking everything before it
changes anything, and the graph drawn after grad() equal to the one before.
"""

import gc
import json

import numpy as np
import pytest

import minigrad as mg
import minigrad.nn.functional as F
from minigrad import io, nn
from minigrad.io import CheckpointError
from minigrad.modes import state
from minigrad.optim import SGD, LambdaLR
from minigrad.viz.graph import collect

INF = np.inf


# --- +inf in logsumexp ---------------------------------------------------------------------------


def test_logsumexp_of_a_row_holding_inf_is_inf_with_zero_gradients_for_the_finite_entries():
    x = mg.tensor(np.array([[1.0, INF, 2.0], [1.0, 2.0, 3.0], [-INF, -INF, -INF]]), requires_grad=True)
    y = x.logsumexp(axis=1)
    assert y.numpy()[0] == INF and y.numpy()[2] == -INF
    np.testing.assert_allclose(y.numpy()[1], np.log(np.exp([1.0, 2.0, 3.0]).sum()))
    y.sum().backward()
    g = x.grad.numpy()
    assert g[0, 0] == 0.0 and g[0, 2] == 0.0 and np.isnan(g[0, 1])  # as PyTorch: undefined only at the inf
    np.testing.assert_allclose(g[1], np.exp([1.0, 2.0, 3.0]) / np.exp([1.0, 2.0, 3.0]).sum())
    assert g[2].tolist() == [0.0, 0.0, 0.0]
    whole = mg.tensor(np.array([[1.0, INF], [0.0, 0.0]]), requires_grad=True)
    total = whole.logsumexp()
    assert total.item() == INF
    total.backward()
    assert whole.grad.numpy()[1].tolist() == [0.0, 0.0]


# --- rank checks ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["tril", "triu"])
def test_tril_and_triu_need_two_dimensions(name):
    for x in (mg.tensor([1.0, 2.0, 3.0]), mg.tensor(1.0)):
        with pytest.raises(mg.OpError, match=rf"{name}: {name} needs a tensor of at least 2 dimensions"):
            getattr(x, name)()
    assert getattr(mg.ones(2, 3, 3), name)().shape == (2, 3, 3)


def test_embedding_needs_a_two_dimensional_weight():
    ids = np.array([0, 1])
    for weight in (mg.ones(4), mg.ones(4, 2, 3)):
        with pytest.raises(ValueError, match=r"embedding: weight must be a 2-D Tensor \(num_embeddings, dim\)"):
            F.embedding(ids, weight)
    assert F.embedding(ids, mg.ones(4, 2)).shape == (2, 2)


# --- the dtype rule for every input of a layer, fused and composite alike -------------------------


@pytest.mark.parametrize("composite", [False, True])
@pytest.mark.parametrize("cls", [nn.RNN, nn.GRU, nn.LSTM])
def test_a_float64_initial_state_is_refused_by_a_float32_recurrent_layer(cls, composite):
    layer = cls(3, 4)
    x = mg.zeros(2, 5, 3)
    h = mg.tensor(np.zeros((1, 2, 4)))  # float64
    state_arg = (h, h.astype(np.float32)) if cls is nn.LSTM else h
    with mg.composite_mode(composite), pytest.raises(TypeError, match=r"the initial state is float64 but the "
                                                                      r"layer's parameters are float32"):
        layer(x, state_arg)
    if cls is nn.LSTM:  # the cell state is checked too
        with pytest.raises(TypeError, match="initial state is float64"):
            layer(x, (h.astype(np.float32), h))
    ok = h.astype(np.float32)
    out, _ = layer(x, (ok, ok) if cls is nn.LSTM else ok)
    assert out.dtype == np.float32


@pytest.mark.parametrize("cls", [nn.RNNCell, nn.GRUCell, nn.LSTMCell])
def test_a_float64_state_is_refused_by_a_float32_cell(cls):
    cell = cls(3, 4)
    x, h = mg.zeros(2, 3), mg.tensor(np.zeros((2, 4)))
    with pytest.raises(TypeError, match=r"the state is float64 but the layer's parameters are float32"):
        cell(x, (h, h) if cls is nn.LSTMCell else h)


@pytest.mark.parametrize("composite", [False, True])
def test_a_float64_attention_mask_is_refused_by_a_float32_layer(composite):
    attn = nn.MultiHeadAttention(4, 2)
    x = mg.zeros(1, 3, 4)
    with mg.composite_mode(composite), pytest.raises(TypeError, match=r"the attn_mask is float64 but the layer's "
                                                                      r"parameters are float32"):
        attn(x, attn_mask=mg.tensor(np.zeros((3, 3))))
    assert attn(x, attn_mask=mg.zeros(3, 3)).dtype == np.float32
    assert attn(x, attn_mask=mg.tensor(np.ones((3, 3), bool))).dtype == np.float32


def _dtypes(fn):
    out = []
    for composite in (False, True):
        with mg.composite_mode(composite):
            y = fn()
            y.sum().backward()
            out.append(y.dtype)
    return out


def test_fused_ops_promote_as_their_composites_do():
    rng = np.random.default_rng(0)

    def f32(*shape):
        return mg.tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=True)

    def f64(*shape):
        return mg.tensor(rng.standard_normal(shape), requires_grad=True)

    cases = {
        "linear, float64 bias": lambda: F.linear(f32(2, 3), f32(4, 3), f64(4)),
        "rms_norm, float64 weight": lambda: F.rms_norm(f32(2, 3), (3,), f64(3)),
        "layer_norm, float64 weight": lambda: F.layer_norm(f32(2, 3), (3,), f64(3), f64(3)),
        "attention, float64 mask": lambda: F.scaled_dot_product_attention(f32(1, 2, 3), f32(1, 2, 3), f32(1, 2, 3),
                                                                          attn_mask=mg.tensor(np.zeros((2, 2)))),
    }
    for name, fn in cases.items():
        assert _dtypes(fn) == [np.float64, np.float64], name  # NumPy's promotion, fused and composite alike
    assert _dtypes(lambda: F.linear(f32(2, 3), f32(4, 3), f32(4))) == [np.float32, np.float32]


# --- modes restore what was there when they were entered ------------------------------------------


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
            assert mg.is_composite_mode()  # was: switched off by the inner block
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


# --- numerics at the edges --------------------------------------------------------------------------


@pytest.mark.parametrize("composite", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("approximate", ["tanh", "none"])
def test_gelu_gradients_stay_finite_for_huge_inputs(approximate, dtype, composite):
    x = mg.tensor(np.array([1e20, -1e20, 1e5, -1e5, 3e3, -3e3, -150.0], dtype), requires_grad=True)
    with mg.composite_mode(composite), np.errstate(all="ignore"):
        (g,) = mg.grad(F.gelu(x, approximate=approximate).sum(), x, create_graph=True)
        (h,) = mg.grad(g.sum(), x)
    assert g.tolist() == [1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0]  # the gate is exactly 1 or 0 there
    assert h.tolist() == [0.0] * 7 and g.dtype == dtype


@pytest.mark.parametrize("composite", [False, True])
def test_layer_norm_over_one_feature_has_exactly_zero_gradients(composite):
    x = mg.tensor((np.array([[1e4], [3e7], [-123456.7], [1e-3]]) * np.ones((1, 1))).astype(np.float32),
                  requires_grad=True)
    weight, bias = mg.ones(1, requires_grad=True), mg.zeros(1, requires_grad=True)
    with mg.composite_mode(composite):
        y = F.layer_norm(x, (1,), weight, bias)
        gx, gw, gb = mg.grad((y * mg.tensor([[1.0], [2.0], [3.0], [4.0]])).sum(), [x, weight, bias])
    assert y.tolist() == [[0.0]] * 4 and gw.tolist() == [0.0] and gx.tolist() == [[0.0]] * 4
    assert gb.tolist() == [10.0]


# --- io.load changes nothing unless everything fits ----------------------------------------------


def test_io_load_checks_the_scheduler_before_loading_the_model(tmp_path):
    model = nn.Linear(2, 2, rng=np.random.default_rng(0))
    opt = SGD(model.parameters(), lr=0.1)
    io.save(tmp_path / "c.safetensors", model, opt, scheduler=LambdaLR(opt, lambda step: 1.0))

    other = nn.Linear(2, 2, rng=np.random.default_rng(1))
    before = {k: v.numpy().copy() for k, v in other.state_dict().items()}
    two_groups = SGD([{"params": [other.weight]}, {"params": [other.bias]}], lr=0.5)
    with pytest.raises(CheckpointError, match=r"nothing was loaded:\n  scheduler: saved for 1 parameter groups, "
                                              r"this optimizer has 2"):
        io.load(tmp_path / "c.safetensors", other, scheduler=LambdaLR(two_groups, lambda step: 1.0))
    for name, array in other.state_dict().items():
        np.testing.assert_array_equal(array, before[name], err_msg=name)  # not half-loaded
    with pytest.raises(ValueError, match=r"LambdaLR.load_state_dict: saved for 1 parameter groups"):
        LambdaLR(two_groups, lambda step: 1.0).load_state_dict({**LambdaLR(opt, lambda s: 1.0).state_dict()})


def test_io_load_checks_a_damaged_rng_state_before_loading(tmp_path):
    model = nn.Linear(2, 2, rng=np.random.default_rng(0))
    rng = np.random.default_rng(3)
    path = tmp_path / "c.safetensors"
    io.save(path, model, rng=rng)
    tensors, meta = io.load_safetensors(path, return_metadata=True)
    saved = json.loads(meta["rng"])
    saved["state"] = {"state": "not a number", "inc": 1}
    meta = {**meta, "rng": json.dumps(saved)}
    stored = {k: v for k, v in meta.items() if k != "sha256"}
    meta["sha256"] = io._checksum(tensors, stored)
    io.save_safetensors(path, tensors, meta)
    other = nn.Linear(2, 2, rng=np.random.default_rng(1))
    before = other.weight.numpy().copy()
    with pytest.raises(CheckpointError, match=r"rng: the saved PCG64 state cannot be restored"):
        io.load(path, other, rng=np.random.default_rng(0))
    np.testing.assert_array_equal(other.weight.numpy(), before)


# --- the drawn graph after grad() is the one before -----------------------------------------------


def test_the_graph_drawn_after_grad_keeps_the_branches_grad_did_not_need():
    def build():
        x = mg.tensor(np.ones(3), requires_grad=True, name="x")
        w = mg.tensor(np.full(3, 2.0), requires_grad=True, name="w")
        a = (x * 2.0).tanh()
        b = (w * 3.0).exp()  # a branch that grad(loss, [x]) does not need
        return x, (a * b).sum()

    def drawn(root):
        return [(n.op.name if n.op else n.name, n.shape) for n in collect(root).nodes]

    x, loss = build()
    before = drawn(loss)
    mg.grad(loss, [x])
    gc.collect()
    assert drawn(loss) == before
    assert sum(1 for name, _ in before if name == "mul") == 3


@pytest.mark.parametrize("reduce", ["sum", "max", "min", "softmax", "log_softmax"])
def test_a_reduction_of_a_zero_d_tensor_over_axis_zero_has_a_gradient(reduce):
    # NumPy's sum, max, min take axis 0 or -1 of a 0-d array; their backward used to fail on it
    x = mg.tensor(np.float64(2.0), requires_grad=True)
    y = getattr(x, reduce)(axis=-1)
    y.backward()
    assert y.shape == () and x.grad.shape == ()
    assert (y.item(), x.grad.item()) == {"softmax": (1.0, 0.0), "log_softmax": (0.0, 0.0)}.get(reduce, (2.0, 1.0))
