"""Differential tests of the nn surface PyTorch's beginner material uses: the losses, F.pad, Flatten, Unflatten,
Identity, Module.apply, zero_grad(set_to_none=) and nn.init's xavier/kaiming forms.

Each loss runs on hypothesis-drawn float32 and float64 inputs beside torch.nn.functional's and its module
(float64 PyTorch the reference): the value, its dtype and shape, and the gradient of every float input must
agree for every reduction. Calls PyTorch refuses, minigrad refuses too, with an error that names the
argument and says what to write. Random initialisers cannot draw PyTorch's numbers, so they are held to
PyTorch's gain table and to the spread of PyTorch's own draws.
"""

import numpy as np
import pytest
import torch_diff_helpers as H
from hypothesis import given
from hypothesis import strategies as st

import minigrad as mg
from minigrad import nn
from minigrad.nn import functional as F

torch = pytest.importorskip("torch")
H.use_torch(torch)
TF = torch.nn.functional
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

DTYPE = st.sampled_from(H.DTYPES)
SEED = st.integers(0, 2**16)
REDUCTION = st.sampled_from(["mean", "sum", "none"])

# What PyTorch raises when it refuses a call: the type varies by function, the refusal is what is compared.
TORCH_REFUSALS = (RuntimeError, ValueError, TypeError, IndexError, KeyError, NotImplementedError, AssertionError)


def _ours_and_theirs(kwargs: dict, dtype=np.float64) -> tuple[dict, dict]:
    """The same keyword arguments for both libraries: arrays become a minigrad Tensor and a torch tensor."""
    ours = {k: (mg.Tensor(v.astype(dtype)) if isinstance(v, np.ndarray) else v) for k, v in kwargs.items()}
    theirs = {k: (torch.tensor(v.astype(dtype)) if isinstance(v, np.ndarray) else v) for k, v in kwargs.items()}
    return ours, theirs


def _lazy(kwargs: dict, dtype):
    """torch keyword arguments in ``dtype`` (the float64 reference and PyTorch's same-dtype run differ)."""
    return {k: (torch.tensor(v.astype(dtype)) if isinstance(v, np.ndarray) else v) for k, v in kwargs.items()}


def _check_loss(ours_fn, torch_fn, arrays, kwargs, seed, value_scale=0.0):
    """``ours_fn(*inputs, **kwargs)`` against ``torch_fn`` in float64 and the inputs' dtype: value and gradients."""
    dtype = arrays[0].dtype
    ours_kw, _ = _ours_and_theirs(kwargs, dtype)

    def theirs(*xs):
        return torch_fn(*xs, **_lazy(kwargs, np.float64 if xs[0].dtype == torch.float64 else dtype))

    H.check_function(lambda *xs: ours_fn(*xs, **ours_kw), theirs, arrays, seed=seed, value_scale=value_scale)


# --------------------------------------------------------------------------------------
# Regression losses: value, dtype, shape and both gradients (input and target)
# --------------------------------------------------------------------------------------


@given(dtype=DTYPE, seed=SEED, reduction=REDUCTION, shape=st.sampled_from([(), (1,), (4,), (3, 2), (2, 3, 2)]),
       name=st.sampled_from(["mse_loss", "l1_loss"]), weighted=st.booleans())
def test_regression_losses(dtype, seed, reduction, shape, name, weighted):
    rng = np.random.default_rng(seed)
    x, y = (rng.standard_normal(shape).astype(dtype) for _ in range(2))
    if name == "l1_loss":  # |x - y| has no gradient at 0: keep the drawn pairs apart
        y = np.where(np.abs(x - y) < 1e-3, y + 0.5, y).astype(dtype)
    kwargs = {"reduction": reduction}
    if weighted:
        kwargs["weight"] = np.asarray(rng.random(shape))
    _check_loss(getattr(F, name), getattr(TF, name), [x, y], kwargs, seed)


@pytest.mark.parametrize("module, function", [(nn.MSELoss, F.mse_loss), (nn.L1Loss, F.l1_loss)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_regression_loss_modules_are_the_functions(module, function, reduction):
    x, y = mg.randn(3, 4, dtype=mg.float64), mg.randn(3, 4, dtype=mg.float64)
    theirs = getattr(torch.nn, module.__name__)(reduction=reduction)(torch.tensor(x.data), torch.tensor(y.data))
    ours = module(reduction=reduction)(x, y)
    np.testing.assert_array_equal(ours.data, function(x, y, reduction=reduction).data)
    np.testing.assert_allclose(ours.data, theirs.numpy(), rtol=1e-12)


def test_regression_losses_promote_an_integer_target_and_warn_on_broadcasting_as_pytorch():
    x = np.random.default_rng(0).standard_normal((3, 1)).astype(np.float32)
    ours = F.mse_loss(mg.Tensor(x[:, 0]), mg.tensor([1, 2, 3]))
    theirs = TF.mse_loss(torch.tensor(x[:, 0]), torch.tensor([1, 2, 3]))
    assert ours.dtype == np.float32 and theirs.dtype == torch.float32
    np.testing.assert_allclose(ours.item(), theirs.item(), rtol=1e-6)
    with pytest.warns(UserWarning, match=r"target size \(3,\) that is different to the input size \(3, 1\)"):
        ours = F.mse_loss(mg.Tensor(x), mg.Tensor(x[:, 0]))
    with pytest.warns(UserWarning):
        theirs = TF.mse_loss(torch.tensor(x), torch.tensor(x[:, 0]))
    np.testing.assert_allclose(ours.item(), theirs.item(), rtol=1e-6)


# --------------------------------------------------------------------------------------
# Cross-entropy and NLL: classes on dim 1, ignore_index, weight, label_smoothing, probabilities
# --------------------------------------------------------------------------------------

LAYOUTS = [((5, 4), (5,)), ((4,), ()), ((3, 4, 2), (3, 2)), ((2, 3, 2, 2), (2, 2, 2)), ((1, 6), (1,))]


@st.composite
def classification(draw):
    """(logits, integer targets with some ignored, keyword arguments)."""
    dtype = draw(DTYPE)
    seed = draw(SEED)
    input_shape, target_shape = draw(st.sampled_from(LAYOUTS))
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(input_shape) * draw(st.sampled_from([1.0, 30.0]))).astype(dtype)
    n_classes = input_shape[1] if len(input_shape) > 1 else input_shape[0]
    ignore_index = draw(st.sampled_from([-100, 0, 2]))
    targets = rng.integers(0, n_classes, target_shape)
    if targets.ndim and draw(st.booleans()):
        targets.reshape(-1)[0] = ignore_index if ignore_index < 0 else targets.reshape(-1)[0]
    kwargs = {"reduction": draw(REDUCTION), "ignore_index": ignore_index}
    if draw(st.booleans()):
        kwargs["weight"] = rng.random(n_classes) + 0.1
    return x, targets, kwargs, seed


@given(case=classification(), smoothing=st.sampled_from([0.0, 0.0, 0.1, 1.0]))
def test_cross_entropy(case, smoothing):
    x, targets, kwargs, seed = case
    if (targets == kwargs["ignore_index"]).all() and kwargs["reduction"] == "mean":
        return  # PyTorch's 0 / 0 (minigrad's 0 is tested on its own below)
    kwargs = {**kwargs, "label_smoothing": smoothing}
    _check_loss(lambda z, **kw: F.cross_entropy(z, targets, **kw),
                lambda z, **kw: TF.cross_entropy(z, torch.from_numpy(targets), **kw), [x], kwargs, seed,
                value_scale=float(np.abs(x).max(initial=0.0)) + 1.0)


@given(case=classification())
def test_nll_loss(case):
    x, targets, kwargs, seed = case
    if (targets == kwargs["ignore_index"]).all() and kwargs["reduction"] == "mean":
        return
    _check_loss(lambda z, **kw: F.nll_loss(z, targets, **kw),
                lambda z, **kw: TF.nll_loss(z, torch.from_numpy(targets), **kw), [x], kwargs, seed)


@given(dtype=DTYPE, seed=SEED, reduction=REDUCTION, shape=st.sampled_from([(4, 3), (3,), (2, 3, 2)]),
       smoothing=st.sampled_from([0.0, 0.2]), weighted=st.booleans())
def test_cross_entropy_with_class_probabilities(dtype, seed, reduction, shape, smoothing, weighted):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    class_dim = 1 if len(shape) > 1 else 0
    p = rng.random(shape)
    p = (p / p.sum(axis=class_dim, keepdims=True)).astype(dtype)
    kwargs = {"reduction": reduction, "label_smoothing": smoothing}
    if weighted:
        kwargs["weight"] = rng.random(shape[class_dim]) + 0.1
    _check_loss(F.cross_entropy, TF.cross_entropy, [x, p], kwargs, seed, value_scale=4.0)


@pytest.mark.parametrize("module, kwargs", [
    ("CrossEntropyLoss", {}), ("CrossEntropyLoss", {"ignore_index": 1, "reduction": "sum"}),
    ("CrossEntropyLoss", {"weight": [1.0, 2.0, 0.5], "label_smoothing": 0.1}),
    ("NLLLoss", {"weight": [1.0, 2.0, 0.5], "reduction": "none"})])
def test_classification_modules(module, kwargs):
    x = np.random.default_rng(1).standard_normal((4, 3))
    t = np.array([0, 1, 2, 1])
    ours_kw = {k: (mg.tensor(v, dtype=mg.float64) if k == "weight" else v) for k, v in kwargs.items()}
    theirs_kw = {k: (torch.tensor(v, dtype=torch.float64) if k == "weight" else v) for k, v in kwargs.items()}
    ours, theirs = getattr(nn, module)(**ours_kw), getattr(torch.nn, module)(**theirs_kw)
    assert sorted(dict(ours.named_buffers())) == sorted(dict(theirs.named_buffers()))  # weight is a buffer
    np.testing.assert_allclose(ours(mg.Tensor(x), t).data, theirs(torch.tensor(x), torch.tensor(t)).numpy(),
                               rtol=1e-12)


def test_cross_entropy_is_stable_for_huge_logits_as_pytorch():
    x = np.array([[1e4, 0.0, -1e4], [0.0, 3e4, 3e4], [-800.0, -800.0, 800.0]], dtype=np.float32)
    for smoothing in (0.0, 0.3):
        ours = mg.Tensor(x, requires_grad=True)
        theirs = torch.tensor(x, requires_grad=True)
        loss = F.cross_entropy(ours, np.array([1, 2, 0]), label_smoothing=smoothing)
        ref = TF.cross_entropy(theirs, torch.tensor([1, 2, 0]), label_smoothing=smoothing)
        loss.backward()
        ref.backward()
        np.testing.assert_allclose(loss.item(), ref.item(), rtol=1e-6)
        np.testing.assert_allclose(ours.grad.data, theirs.grad.numpy(), atol=1e-6)


def test_a_mean_over_only_ignored_targets_is_zero_where_pytorch_gives_nan():
    x = mg.randn(3, 4, requires_grad=True)
    t = np.full(3, -100)
    assert np.isnan(TF.cross_entropy(torch.tensor(x.data), torch.tensor(t)).item())
    loss = F.cross_entropy(x, t)
    loss.backward()
    assert loss.item() == 0.0 and not x.grad.data.any()  # no NaN: honest zero weight for every row


# --------------------------------------------------------------------------------------
# Binary cross-entropy, on probabilities and on logits
# --------------------------------------------------------------------------------------


@given(dtype=DTYPE, seed=SEED, reduction=REDUCTION, shape=st.sampled_from([(), (4,), (3, 2)]),
       weighted=st.booleans())
def test_binary_cross_entropy(dtype, seed, reduction, shape, weighted):
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.02, 0.98, shape).astype(dtype)
    y = rng.random(shape).astype(dtype)
    kwargs = {"reduction": reduction}
    if weighted:
        kwargs["weight"] = np.asarray(rng.random(shape))
    _check_loss(lambda a, **kw: F.binary_cross_entropy(a, mg.Tensor(y), **kw),
                lambda a, **kw: TF.binary_cross_entropy(a, torch.tensor(y).to(a.dtype), **kw), [p], kwargs, seed)


def test_binary_cross_entropy_clamps_its_logs_at_minus_100_as_pytorch():
    p = np.array([0.0, 1.0, 0.0, 1.0, 1e-45], dtype=np.float32)
    y = np.array([1.0, 0.0, 0.0, 1.0, 1.0], dtype=np.float32)
    ours = F.binary_cross_entropy(mg.Tensor(p), mg.Tensor(y), reduction="none")
    theirs = TF.binary_cross_entropy(torch.tensor(p), torch.tensor(y), reduction="none")
    np.testing.assert_allclose(ours.data, theirs.numpy(), rtol=1e-6)
    assert ours.dtype == np.float32


def test_binary_cross_entropy_gradient_at_0_and_1_is_the_clamped_formulas_deliberately():
    # PyTorch's gradient is (p - y) / max(p (1 - p), 1e-12): 0 or +-1e12 at the endpoints. minigrad's is the
    # derivative of the formula it computes: 0 through a clamped log, 1 / (1 - p) through the other one.
    p, y = np.array([0.0, 0.0, 1.0, 1.0]), np.array([0.0, 1.0, 0.0, 1.0])
    ours, theirs = mg.Tensor(p, requires_grad=True), torch.tensor(p, requires_grad=True)
    F.binary_cross_entropy(ours, y, reduction="sum").backward()
    TF.binary_cross_entropy(theirs, torch.tensor(y), reduction="sum").backward()
    np.testing.assert_array_equal(ours.grad.data, [1.0, 0.0, 0.0, -1.0])
    np.testing.assert_allclose(theirs.grad.numpy(), [0.0, -1e12, 1e12, 0.0], rtol=1e-6)


@given(dtype=DTYPE, seed=SEED, reduction=REDUCTION, shape=st.sampled_from([(), (5,), (3, 2)]),
       scale=st.sampled_from([1.0, 10.0, 100.0]), weighted=st.booleans(), pos_weighted=st.booleans(),
       hard=st.booleans())
def test_binary_cross_entropy_with_logits(dtype, seed, reduction, shape, scale, weighted, pos_weighted, hard):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * scale).astype(dtype)
    y = (rng.integers(0, 2, shape) if hard else rng.random(shape)).astype(dtype)
    kwargs = {"reduction": reduction}
    if weighted:
        kwargs["weight"] = np.asarray(rng.random(shape))
    if pos_weighted:
        kwargs["pos_weight"] = np.asarray(rng.random(shape[-1:]) * 3)
    # The value's terms are of the size of x, which a soft target cancels (1 - y) * x against.
    _check_loss(F.binary_cross_entropy_with_logits, TF.binary_cross_entropy_with_logits, [x, y], kwargs, seed,
                value_scale=0.0 if hard else scale * 4)


def test_binary_cross_entropy_with_logits_keeps_the_small_loss_of_a_confident_right_answer():
    x = np.array([-800.0, -30.0, -20.0, 20.0, 30.0, 800.0])
    y = np.array([0.0, 0.0, 0.0, 1.0, 1.0, 1.0])
    for dtype in (np.float32, np.float64):
        ours = F.binary_cross_entropy_with_logits(mg.Tensor(x.astype(dtype)), mg.Tensor(y.astype(dtype)),
                                                  reduction="none")
        theirs = TF.binary_cross_entropy_with_logits(torch.tensor(x.astype(dtype)), torch.tensor(y.astype(dtype)),
                                                     reduction="none")
        assert ours.dtype == dtype
        np.testing.assert_allclose(ours.data, theirs.numpy(), rtol=1e-6 if dtype == np.float32 else 1e-13)
        assert (ours.data[3:5] > 0).all()  # y = 1: e**-20 is not rounded away (y = 0 cancels -x against x, in both)


@pytest.mark.parametrize("module, kwargs", [("BCELoss", {}), ("BCELoss", {"weight": [1.0, 0.5], "reduction": "sum"}),
                                            ("BCEWithLogitsLoss", {"pos_weight": [2.0, 0.5]}),
                                            ("BCEWithLogitsLoss", {"weight": [1.0, 3.0], "reduction": "none"})])
def test_binary_modules(module, kwargs):
    rng = np.random.default_rng(2)
    x = rng.uniform(0.1, 0.9, (3, 2)) if module == "BCELoss" else rng.standard_normal((3, 2))
    y = rng.random((3, 2))
    ours = getattr(nn, module)(**{k: mg.tensor(v, dtype=mg.float64) for k, v in kwargs.items() if k != "reduction"},
                               **{k: v for k, v in kwargs.items() if k == "reduction"})
    theirs = getattr(torch.nn, module)(**{k: torch.tensor(v, dtype=torch.float64) if k != "reduction" else v
                                          for k, v in kwargs.items()})
    np.testing.assert_allclose(ours(mg.Tensor(x), mg.Tensor(y)).data, theirs(torch.tensor(x), torch.tensor(y)).numpy(),
                               rtol=1e-12)


# --------------------------------------------------------------------------------------
# Refusals: what PyTorch refuses, minigrad refuses, saying what to write
# --------------------------------------------------------------------------------------

LOGITS = np.random.default_rng(3).standard_normal((3, 4))
REFUSALS = [
    # (ours, theirs, our error type, words in our message)
    (lambda: F.cross_entropy(mg.Tensor(LOGITS), np.array([0, 1, 4])),
     lambda: TF.cross_entropy(torch.tensor(LOGITS), torch.tensor([0, 1, 4])),
     IndexError, r"target holds class id 4, outside \[0, classes=4\)"),
    (lambda: F.cross_entropy(mg.Tensor(LOGITS), np.array([0.0, 1.0, 3.0])),
     lambda: TF.cross_entropy(torch.tensor(LOGITS), torch.tensor([0.0, 1.0, 3.0])),
     TypeError, r"target must hold integer class ids, got dtype float64.*write target.long\(\)"),
    (lambda: F.cross_entropy(mg.randn(3, 4, 5), np.zeros((3, 4), dtype=np.int64)),
     lambda: TF.cross_entropy(torch.randn(3, 4, 5), torch.zeros(3, 4, dtype=torch.long)),
     ValueError, r"expected target of shape \(3, 5\).*classes go on dim 1.*reshape\(-1, 5\)"),
    (lambda: F.nll_loss(mg.Tensor(LOGITS), np.array([0, 1])),
     lambda: TF.nll_loss(torch.tensor(LOGITS), torch.tensor([0, 1])),
     ValueError, r"nll_loss: expected target of shape \(3,\)"),
    (lambda: F.cross_entropy(mg.Tensor(LOGITS), np.array([0, 1, 2]), weight=mg.ones(3)),
     lambda: TF.cross_entropy(torch.tensor(LOGITS), torch.tensor([0, 1, 2]), weight=torch.ones(3)),
     ValueError, r"weight must have one entry per class, shape \(4,\)"),
    (lambda: F.cross_entropy(mg.Tensor(LOGITS), np.array([0, 1, 2]), label_smoothing=1.5),
     lambda: TF.cross_entropy(torch.tensor(LOGITS), torch.tensor([0, 1, 2]), label_smoothing=1.5),
     ValueError, r"label_smoothing must be between 0.0 and 1.0"),
    (lambda: F.mse_loss(mg.randn(3), mg.randn(3), reduction="avg"),
     lambda: TF.mse_loss(torch.randn(3), torch.randn(3), reduction="avg"),
     ValueError, r"'avg' is not a valid value for reduction; use 'mean', 'sum' or 'none'"),
    (lambda: F.mse_loss(mg.randn(3), mg.randn(4)), lambda: TF.mse_loss(torch.randn(3), torch.randn(4)),
     ValueError, r"target's shape \(4,\) does not broadcast with the input's \(3,\)"),
    (lambda: F.binary_cross_entropy(mg.tensor([1.5]), mg.tensor([1.0])),
     lambda: TF.binary_cross_entropy(torch.tensor([1.5]), torch.tensor([1.0])),
     ValueError, r"all elements of input should be between 0 and 1.*for logits use binary_cross_entropy_with_logits"),
    (lambda: F.binary_cross_entropy(mg.rand(3), mg.rand(2, 3)),
     lambda: TF.binary_cross_entropy(torch.rand(3), torch.rand(2, 3)),
     ValueError, r"target size \(2, 3\) that is different to the input size \(3,\)"),
    (lambda: F.binary_cross_entropy_with_logits(mg.randn(3), mg.rand(2, 3)),
     lambda: TF.binary_cross_entropy_with_logits(torch.randn(3), torch.rand(2, 3)),
     ValueError, r"Please ensure they have the same size"),
    (lambda: F.mse_loss(mg.tensor([1, 2]), mg.tensor([1, 2])),
     lambda: TF.mse_loss(torch.tensor([1, 2]), torch.tensor([1, 2])),
     TypeError, r"mse_loss: input must be a float Tensor, got a int64 Tensor; write mse_loss\(input.float\(\)"),
    (lambda: F.pad(mg.randn(2, 3), (1, 2, 3)), lambda: TF.pad(torch.randn(2, 3), (1, 2, 3)),
     ValueError, r"padding length must be divisible by 2"),
    (lambda: F.pad(mg.randn(2, 3), (1, 1, 1, 1, 1, 1)), lambda: TF.pad(torch.randn(2, 3), (1, 1, 1, 1, 1, 1)),
     ValueError, r"padding length 6 too large for a 2-D input"),
    (lambda: F.pad(mg.randn(1, 2, 3), (3, 0), mode="reflect"),
     lambda: TF.pad(torch.randn(1, 2, 3), (3, 0), mode="reflect"),
     ValueError, r"should be less than the size 3 of dim 2 for reflect padding"),
    (lambda: F.pad(mg.randn(3), (1, 1), mode="replicate"), lambda: TF.pad(torch.randn(3), (1, 1), mode="replicate"),
     NotImplementedError, r"pads 1 to 3 dims of an input with 1 or 2 more"),
    (lambda: nn.Unflatten(1, (2, 4))(mg.randn(3, 6)), lambda: torch.nn.Unflatten(1, (2, 4))(torch.randn(3, 6)),
     ValueError, r"unflattened_size \(2, 4\) does not multiply to the size 6 of dim 1"),
    (lambda: nn.init.xavier_uniform_(mg.zeros(5)), lambda: torch.nn.init.xavier_uniform_(torch.zeros(5)),
     ValueError, r"fewer than 2 dimensions.*use uniform_ or normal_ for a bias"),
    (lambda: nn.init.kaiming_normal_(mg.zeros(3, 4), mode="fan_avg"),
     lambda: torch.nn.init.kaiming_normal_(torch.zeros(3, 4), mode="fan_avg"),
     ValueError, r"Mode fan_avg not supported, please use one of fan_in, fan_out"),
    (lambda: nn.init.calculate_gain("gelu"), lambda: torch.nn.init.calculate_gain("gelu"),
     ValueError, r"unsupported nonlinearity 'gelu'; use one of"),
    (lambda: nn.init.calculate_gain("leaky_relu", True), lambda: torch.nn.init.calculate_gain("leaky_relu", True),
     ValueError, r"negative_slope True not a valid number"),
]


@pytest.mark.parametrize("ours, theirs, error, words", REFUSALS)
def test_refused_as_pytorch_refuses(ours, theirs, error, words):
    with pytest.raises(TORCH_REFUSALS):  # (PyTorch's type varies; ours is checked below)
        theirs()
    with pytest.raises(error, match=words):
        ours()


# --------------------------------------------------------------------------------------
# F.pad, Flatten, Unflatten, Identity
# --------------------------------------------------------------------------------------

PADS = [((1, 2), "constant", 2), ((1, -1, 0, 2), "constant", 3), ((-1, -1), "constant", 1), ((2, 1), "reflect", 3),
        ((1, 2, 2, 0), "reflect", 4), ((3, 0, 1, 2), "replicate", 4), ((1, 1, 1, 1, 1, 1), "replicate", 5),
        ((2, 3), "circular", 3), ((1, 2, 3, 1), "circular", 4), ((1, 1, 2, 2, 0, 1, 1, 0), "constant", 4),
        ((-1, 2), "circular", 3), ((2, -1, -1, 1), "replicate", 4), ((-4, 6), "replicate", 3), ((1, -2), "reflect", 3)]


@given(dtype=DTYPE, seed=SEED, case=st.sampled_from(PADS), value=st.sampled_from([None, 0.0, -2.5]))
def test_pad(dtype, seed, case, value):
    pad, mode, ndim = case
    shape = (2, 3, 4, 5, 4)[:ndim]
    x = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    value = value if mode == "constant" else None
    H.check_function(lambda t: F.pad(t, pad, mode, value), lambda t: TF.pad(t, pad, mode, value), [x], seed=seed)


@given(dtype=DTYPE, seed=SEED, dims=st.sampled_from([(1, -1), (0, -1), (1, 2), (2, 3), (-2, -1), (0, 0)]))
def test_flatten_and_unflatten(dtype, seed, dims):
    x = np.random.default_rng(seed).standard_normal((2, 3, 4, 2)).astype(dtype)
    H.check_function(lambda t: nn.Flatten(*dims)(t), lambda t: torch.nn.Flatten(*dims)(t), [x], seed=seed)
    H.check_function(lambda t: nn.Unflatten(2, (2, -1))(t), lambda t: torch.nn.Unflatten(2, (2, -1))(t), [x],
                     seed=seed)
    H.check_function(lambda t: nn.Identity(54, unused=0.1)(t), lambda t: torch.nn.Identity(54, unused=0.1)(t), [x],
                     seed=seed)


def test_flatten_reprs_as_pytorch():
    assert repr(nn.Flatten()) == repr(torch.nn.Flatten())
    assert repr(nn.Unflatten(1, (2, 3))) == repr(torch.nn.Unflatten(1, (2, 3)))


# --------------------------------------------------------------------------------------
# Module.apply and zero_grad(set_to_none=)
# --------------------------------------------------------------------------------------


def _tree(lib):
    return lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.ReLU(),
                             lib.nn.Sequential(lib.nn.Linear(4, 2), lib.nn.Flatten()), lib.nn.Identity())


def test_apply_visits_the_modules_in_pytorchs_order():
    seen = {"ours": [], "theirs": []}
    model = _tree(mg)
    assert model.apply(lambda m: seen["ours"].append(type(m).__name__)) is model
    _tree(torch).apply(lambda m: seen["theirs"].append(type(m).__name__))
    assert seen["ours"] == seen["theirs"]


def test_apply_initialises_every_linear_layer_as_the_tutorials_do():
    model = _tree(mg)

    def init_weights(m):
        if isinstance(m, nn.Linear):
            nn.init.xavier_uniform_(m.weight)
            m.bias.data.fill(0.01)

    assert model.apply(init_weights) is model
    assert all((m.bias.data == np.float32(0.01)).all() for m in model.modules() if isinstance(m, nn.Linear))


@pytest.mark.parametrize("set_to_none", [True, False])
@pytest.mark.parametrize("who", ["module", "optimizer"])
def test_zero_grad_set_to_none(set_to_none, who):
    ours, theirs = _tree(mg), _tree(torch)
    ours(mg.randn(2, 3)).sum().backward()
    theirs(torch.randn(2, 3)).sum().backward()
    if who == "module":
        ours.zero_grad(set_to_none=set_to_none)
        theirs.zero_grad(set_to_none=set_to_none)
    else:
        mg.optim.SGD(ours.parameters(), lr=0.1).zero_grad(set_to_none=set_to_none)
        torch.optim.SGD(theirs.parameters(), lr=0.1).zero_grad(set_to_none=set_to_none)
    for p, t in zip(ours.parameters(), theirs.parameters()):
        if t.grad is None:
            assert p.grad is None
        else:
            assert p.grad is not None and p.grad.shape == tuple(t.grad.shape) and p.grad.dtype == np.float32
            assert not p.grad.data.any() and not t.grad.any()


# --------------------------------------------------------------------------------------
# nn.init: PyTorch's gains, fans and spreads
# --------------------------------------------------------------------------------------

GAINS = [("linear", None), ("conv2d", None), ("sigmoid", None), ("tanh", None), ("relu", None),
         ("leaky_relu", None), ("leaky_relu", 0.2), ("leaky_relu", 5**0.5), ("selu", None), ("conv_transpose3d", None)]


@pytest.mark.parametrize("nonlinearity, param", GAINS)
def test_calculate_gain(nonlinearity, param):
    assert nn.init.calculate_gain(nonlinearity, param) == torch.nn.init.calculate_gain(nonlinearity, param)


INITS = [("xavier_uniform_", {}), ("xavier_uniform_", {"gain": 2.0}), ("xavier_normal_", {"gain": 0.5}),
         ("kaiming_uniform_", {}), ("kaiming_uniform_", {"a": 5**0.5}), ("kaiming_uniform_", {"mode": "fan_out"}),
         ("kaiming_normal_", {"nonlinearity": "relu"}), ("kaiming_normal_", {"mode": "fan_out", "a": 0.1})]


@pytest.mark.parametrize("name, kwargs", INITS)
@pytest.mark.parametrize("shape", [(96, 64), (40, 16, 3, 3)])
def test_initialisers_spread_as_pytorchs(name, kwargs, shape):
    ours = getattr(nn.init, name)(nn.Parameter(np.zeros(shape, np.float32)), generator=mg.Generator().manual_seed(0),
                                  **kwargs)
    theirs = getattr(torch.nn.init, name)(torch.zeros(shape), generator=torch.Generator().manual_seed(0), **kwargs)
    assert isinstance(ours, nn.Parameter) and ours.dtype == np.float32 and ours.shape == shape
    a, b = ours.data.astype(np.float64), theirs.numpy().astype(np.float64)
    if "uniform" in name:  # the same bound: both samples' extremes come within 1% of it
        np.testing.assert_allclose(np.abs(a).max(), np.abs(b).max(), rtol=0.01)
    np.testing.assert_allclose(a.std(), b.std(), rtol=0.06)
    assert abs(a.mean()) < 4 * b.std() / np.sqrt(a.size)
    again = getattr(nn.init, name)(nn.Parameter(np.zeros(shape, np.float32)), generator=mg.Generator().manual_seed(0),
                                   **kwargs)
    np.testing.assert_array_equal(ours.data, again.data)  # generator= gives the same draws


def test_initialisers_draw_from_the_default_generator():
    mg.manual_seed(3)
    a = nn.init.kaiming_normal_(mg.zeros(8, 4)).data.copy()
    mg.manual_seed(3)
    np.testing.assert_array_equal(nn.init.kaiming_normal_(mg.zeros(8, 4)).data, a)


def test_kaiming_on_a_zero_size_tensor_warns_and_returns_it_as_pytorch():
    with pytest.warns(UserWarning, match="Initializing zero-element tensors is a no-op"):
        t = nn.init.kaiming_uniform_(mg.zeros(0, 3))
    with pytest.warns(UserWarning, match="Initializing zero-element tensors is a no-op"):
        torch.nn.init.kaiming_uniform_(torch.zeros(0, 3))
    assert t.shape == (0, 3)
