"""Every fused op against its composite, and composite mode end to end.

A fused op (``minigrad/fused/``) carries its definition as runnable code, its
``composite`` of core ops. Registry-driven, like ``test_ops_table.py``: every
fused op, on every sample, must equal its composite in value, gradient and
second derivative. Then ``composite_mode()`` runs whole models both ways.
"""

from __future__ import annotations

import threading
import zlib

import numpy as np
import pytest

import minigrad as mg
from minigrad import OPS, fused, nn
from minigrad.nn import functional as F
from models import GPT, RNNLM, GPTConfig, MaskedLM, RNNConfig, Seq2Seq, Seq2SeqConfig
from models.encoder import EncoderConfig

FUSED = sorted((op for op in OPS.values() if op.origin.startswith("minigrad.fused.")), key=lambda op: op.name)
CASES = [pytest.param(op, s, id=f"{op.name}-{k}") for op in FUSED for k, s in enumerate(op.samples)]


def test_every_fused_op_has_a_composite_and_every_composite_op_is_fused():
    assert {op.name for op in FUSED} >= {"linear", "gelu", "gelu_grad", "softmax_grad", "layer_norm",
                                         "layer_norm_grad", "rms_norm", "cross_entropy", "attention_weights"}
    assert [op.name for op in FUSED if op.composite is None] == []
    assert [op.name for op in OPS.values() if op.composite is not None and op not in FUSED] == []


def _inputs(op, sample):
    rng = np.random.default_rng(zlib.crc32(op.name.encode()))
    return [mg.Tensor(a, requires_grad=a.dtype.kind == "f") for a in sample.arrays(rng)]


def _grads(out, inputs, create_graph=False):
    wrt = [x for x in inputs if x.requires_grad]
    seed = mg.tensor(np.random.default_rng(7).standard_normal(out.shape))
    return mg.grad((out * seed).sum(), wrt, create_graph=create_graph, allow_unused=True)


@pytest.mark.parametrize("op, sample", CASES)
def test_fused_op_equals_its_composite_in_value_gradient_and_second_order(op, sample):
    inputs = _inputs(op, sample)
    fused_out = op(*inputs, **sample.params)
    composite_out = op.composite(*inputs, **sample.params)
    np.testing.assert_allclose(fused_out.data, composite_out.data, rtol=1e-12, atol=1e-12)

    fused_grads = _grads(fused_out, inputs, create_graph=True)
    composite_grads = _grads(composite_out, inputs, create_graph=True)
    for f, c in zip(fused_grads, composite_grads):
        np.testing.assert_allclose(f.data, c.data, rtol=1e-10, atol=1e-12)

    # Second order: the gradient of (a fixed weighting of) the gradients, both ways.
    live = [(f, c) for f, c in zip(fused_grads, composite_grads) if f is not None and f.requires_grad]
    if not live:
        return
    wrt = [x for x in inputs if x.requires_grad]
    second_f = mg.grad(mg.stack([(f * f).sum() for f, _ in live]).sum(), wrt, allow_unused=True)
    second_c = mg.grad(mg.stack([(c * c).sum() for _, c in live]).sum(), wrt, allow_unused=True)
    for f, c in zip(second_f, second_c):
        if f is None or c is None:
            assert f is None or not np.any(f.data), "the fused op has a second derivative its composite lacks"
            continue
        np.testing.assert_allclose(f.data, c.data, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("op, sample", CASES)
def test_composite_mode_runs_the_composite(op, sample):
    inputs = _inputs(op, sample)
    with mg.composite_mode():
        out = op(*inputs, **sample.params)
    assert out._op is not op, "in composite mode the fused op itself must not be recorded"
    np.testing.assert_allclose(out.data, op(*inputs, **sample.params).data, rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------------------
# The switch itself
# --------------------------------------------------------------------------------------


def test_composite_mode_as_context_manager_function_and_decorator():
    assert not mg.is_composite_mode()
    with mg.composite_mode():
        assert mg.is_composite_mode()
        with mg.composite_mode(False):
            assert not mg.is_composite_mode()
        assert mg.is_composite_mode()
    assert not mg.is_composite_mode()

    mg.composite_mode(True)  # a plain call switches it until switched back
    try:
        assert mg.is_composite_mode()
    finally:
        mg.composite_mode(False)
    assert not mg.is_composite_mode()

    @mg.composite_mode()
    def inside():
        return mg.is_composite_mode()

    assert not mg.is_composite_mode(), "decorating must not switch the mode on"
    assert inside() and not mg.is_composite_mode()


def test_a_kept_composite_mode_object_entered_later_restores_the_mode_at_entry():
    off = mg.composite_mode(False)  # kept, and switched on again before it is entered
    mg.composite_mode(True)
    try:
        with off:
            assert not mg.is_composite_mode()
        assert mg.is_composite_mode(), "leaving must restore what was there on entering"
        on = mg.composite_mode(True)
        mg.composite_mode(False)
        with on:
            assert mg.is_composite_mode()
        assert not mg.is_composite_mode()
    finally:
        mg.composite_mode(False)


def test_composite_mode_is_per_thread():
    seen = []
    with mg.composite_mode():
        worker = threading.Thread(target=lambda: seen.append(mg.is_composite_mode()))
        worker.start()
        worker.join()
    assert seen == [False]


def test_composite_mode_runs_kernels_as_their_plain_numpy(monkeypatch):
    # row_sum's fast path asks _blas_summable whether to go to BLAS; its plain form is x.sum(axis=-1).
    calls = []
    monkeypatch.setattr(mg.kernels.numpy_forms, "_blas_summable", lambda a: calls.append(a.shape) or True)
    x = np.random.default_rng(0).standard_normal((64, 32))
    with mg.composite_mode():
        np.testing.assert_array_equal(mg.kernels.row_sum(x), x.sum(axis=-1))
    assert calls == []
    mg.kernels.row_sum(x)
    assert calls == [(64, 32)]


# --------------------------------------------------------------------------------------
# Whole models, fused and composite
# --------------------------------------------------------------------------------------

VOCAB = 13
TOL = {np.float64: dict(rtol=1e-10, atol=1e-12), np.float32: dict(rtol=2e-4, atol=2e-5)}


def _cast(model, dtype):
    return model.double() if dtype == np.float64 else model


def _gpt(dtype):
    return _cast(GPT(GPTConfig(vocab_size=VOCAB, block_size=8, n_layer=2, n_head=2, d_model=16, position="rope",
                               gelu_approximate="none"), seed=0), dtype)


def _gpt_learned(dtype):
    return _cast(GPT(GPTConfig(vocab_size=VOCAB, block_size=8, n_layer=1, n_head=4, n_kv_head=2, d_model=16,
                               norm="rmsnorm"), seed=1), dtype)


def _encoder(dtype):
    return _cast(MaskedLM(EncoderConfig(vocab_size=VOCAB, block_size=8, n_layer=1, n_head=2, d_model=16), seed=0),
                 dtype)


def _seq2seq(dtype):
    return _cast(Seq2Seq(Seq2SeqConfig(src_vocab_size=VOCAB, tgt_vocab_size=VOCAB, block_size=8, n_layer=1, n_head=2,
                                       d_model=16), seed=0), dtype)


def _rnn(cell):
    def make(dtype):
        return _cast(RNNLM(RNNConfig(vocab_size=VOCAB, d_model=8, hidden_size=12, cell=cell), seed=0), dtype)

    return make


def _batch(model):
    rng = np.random.default_rng(3)
    idx, targets = rng.integers(0, VOCAB, (2, 8)), rng.integers(0, VOCAB, (2, 8))
    if isinstance(model, Seq2Seq):
        return (rng.integers(0, VOCAB, (2, 7)), idx, targets)
    return (idx, targets)


def _loss_and_grads(model, batch):
    for p in model.parameters():
        p.grad = None
    _, loss = model(*batch)
    loss.backward()
    return loss.item(), {name: p.grad.data.copy() for name, p in model.named_parameters()}


MODELS = [pytest.param(_gpt, id="gpt-rope-gelu"), pytest.param(_gpt_learned, id="gpt-gqa-rmsnorm"),
          pytest.param(_encoder, id="encoder"), pytest.param(_seq2seq, id="seq2seq"),
          pytest.param(_rnn("rnn"), id="rnn"), pytest.param(_rnn("lstm"), id="lstm")]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("make", MODELS)
def test_a_training_step_gives_the_same_loss_and_gradients_fused_and_composite(make, dtype):
    model = make(dtype)
    batch = _batch(model)
    loss, grads = _loss_and_grads(model, batch)
    with mg.composite_mode():
        composite_loss, composite_grads = _loss_and_grads(model, batch)
    np.testing.assert_allclose(composite_loss, loss, **TOL[dtype])
    assert grads.keys() == composite_grads.keys()
    for name, g in grads.items():
        assert composite_grads[name].dtype == g.dtype == dtype, name
        scale = max(np.abs(g).max(), 1e-3)  # float32: relative to the tensor's largest entry
        np.testing.assert_allclose(composite_grads[name], g, rtol=TOL[dtype]["rtol"],
                                   atol=TOL[dtype]["atol"] * scale * 100 if dtype == np.float32 else 1e-12,
                                   err_msg=name)


def _op_names(loss):
    from minigrad.autograd.backprop import toposort

    return {t._op.name for t in toposort([loss]) if t._op is not None}


def test_a_transformer_block_records_core_ops_only_in_composite_mode():
    block = nn.TransformerBlock(16, 2, mlp="gelu").double()
    x = mg.tensor(np.random.default_rng(0).standard_normal((2, 5, 16)), requires_grad=True)
    fused_ops = _op_names(block(x).sum())
    assert {"attention_weights", "layer_norm", "gelu", "linear"} <= fused_ops
    with mg.composite_mode():
        composite_ops = _op_names(block(x).sum())
    assert not composite_ops & {op.name for op in FUSED}
    assert {"matmul", "softmax", "mean", "var", "sqrt", "erf", "transpose"} <= composite_ops


def test_the_fused_ops_live_in_fused_py():
    for name in ("linear", "gelu", "layer_norm", "attention_weights", "cross_entropy", "einsum"):
        assert getattr(fused, name) is OPS[name]


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
