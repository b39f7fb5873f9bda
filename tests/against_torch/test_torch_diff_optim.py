"""Differential tests of minigrad.optim and minigrad's autograd API against PyTorch.

Optimizers and schedulers run the same drawn hyperparameters on the same
gradient sequence as torch.optim and must leave the same weights (float64: to
1e-12; float32: to a float64 PyTorch run); clip_grad_norm_ must return the same
norm and leave the same gradients for every norm type, with NaN and inf in any
parameter; grad() (create_graph, allow_unused), hooks, retain_grad and
gradient accumulation must match torch.autograd.
"""

import math

import numpy as np
import pytest
import torch_diff_helpers as H
from hypothesis import given
from hypothesis import strategies as st

import minigrad as mg
from minigrad import optim

torch = pytest.importorskip("torch")
H.use_torch(torch)
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

SEED = st.integers(0, 2**16)
SHAPES = [(3, 2), (4,), ()]


def _run_both(make_ours, make_theirs, dtype, seed, steps=4, schedule=None):
    """The same gradients, ``steps`` times, through our optimizer and PyTorch's; returns both parameter lists."""
    rng = np.random.default_rng(seed)
    start = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    ours = [mg.Tensor(a.copy(), requires_grad=True) for a in start]
    theirs = [torch.tensor(a.astype(np.float64), requires_grad=True) for a in start]
    opt, ref = make_ours(ours), make_theirs(theirs)
    sched = schedule(opt, ref) if schedule else None
    for _ in range(steps):
        for p, t in zip(ours, theirs):
            g = rng.standard_normal(p.shape).astype(dtype)
            p.grad = mg.Tensor(g)
            t.grad = torch.from_numpy(g.astype(np.float64))
        opt.step()
        ref.step()
        if sched:
            sched[0].step()
            sched[1].step()
            np.testing.assert_allclose(sched[0].get_last_lr(), sched[1].get_last_lr(), rtol=1e-12)
    for p, t in zip(ours, theirs):
        assert p.dtype == dtype
        H.assert_agrees(p, t, dtype=dtype, rtol=1e-5 if dtype == np.float32 else 1e-12, scale=1.0)


@given(dtype=st.sampled_from(H.DTYPES), seed=SEED, lr=st.sampled_from([0.1, 1e-3]),
       momentum=st.sampled_from([0.0, 0.9]), dampening=st.sampled_from([0.0, 0.5]),
       weight_decay=st.sampled_from([0.0, 0.01]), nesterov=st.booleans())
def test_sgd(dtype, seed, lr, momentum, dampening, weight_decay, nesterov):
    if nesterov and (momentum == 0 or dampening != 0):
        nesterov = False  # PyTorch and minigrad both refuse this combination (tested in test_optim)
    kwargs = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay, nesterov=nesterov)
    _run_both(lambda ps: optim.SGD(ps, **kwargs), lambda ps: torch.optim.SGD(ps, **kwargs), dtype, seed)


@pytest.mark.parametrize("name", ["Adam", "AdamW"])
@given(dtype=st.sampled_from(H.DTYPES), seed=SEED, lr=st.sampled_from([0.1, 1e-3]),
       betas=st.sampled_from([(0.9, 0.999), (0.5, 0.9), (0.0, 0.99)]), eps=st.sampled_from([1e-8, 1e-3]),
       weight_decay=st.sampled_from([0.0, 0.1]))
def test_adam(name, dtype, seed, lr, betas, eps, weight_decay):
    kwargs = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
    _run_both(lambda ps: getattr(optim, name)(ps, **kwargs), lambda ps: getattr(torch.optim, name)(ps, **kwargs),
              dtype, seed)


@given(dtype=st.sampled_from(H.DTYPES), seed=SEED, lr=st.sampled_from([0.1, 1e-3]),
       alpha=st.sampled_from([0.99, 0.5]), eps=st.sampled_from([1e-8, 1e-2]),
       weight_decay=st.sampled_from([0.0, 0.1]), momentum=st.sampled_from([0.0, 0.9]), centered=st.booleans())
def test_rmsprop(dtype, seed, lr, alpha, eps, weight_decay, momentum, centered):
    kwargs = dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum, centered=centered)
    _run_both(lambda ps: optim.RMSprop(ps, **kwargs), lambda ps: torch.optim.RMSprop(ps, **kwargs), dtype, seed)


def test_param_groups_match_pytorch():
    def groups(ps):
        return [{"params": ps[:1], "weight_decay": 0.1}, {"params": ps[1:], "lr": 0.01}]

    _run_both(lambda ps: optim.AdamW(groups(ps), lr=0.1), lambda ps: torch.optim.AdamW(groups(ps), lr=0.1),
              np.float64, 0)


@given(seed=SEED, factor=st.sampled_from([0.5, 0.9]))
def test_lambda_lr(seed, factor):
    def lr_lambda(step):
        return factor ** step

    _run_both(lambda ps: optim.SGD(ps, lr=0.1), lambda ps: torch.optim.SGD(ps, lr=0.1), np.float64, seed, steps=5,
              schedule=lambda o, r: (optim.LambdaLR(o, lr_lambda), torch.optim.lr_scheduler.LambdaLR(r, lr_lambda)))


@given(warmup=st.integers(0, 4), decay=st.integers(1, 8), min_ratio=st.sampled_from([0.0, 0.1]))
def test_warmup_cosine_matches_linear_then_cosine_annealing(warmup, decay, min_ratio):
    # PyTorch has no one class for it: LinearLR warmup from 0 (start_factor must be > 0, so the first step is
    # checked on its own), then CosineAnnealingLR's closed form, eta_min = min_lr_ratio * base_lr.
    base = 0.5
    opt = optim.SGD([mg.Tensor(np.zeros(1), requires_grad=True)], lr=base)
    sched = optim.WarmupCosineLR(opt, warmup_steps=warmup, total_steps=warmup + decay, min_lr_ratio=min_ratio)
    ref_opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=base)
    cosine = torch.optim.lr_scheduler.CosineAnnealingLR(ref_opt, T_max=decay, eta_min=min_ratio * base)
    for step in range(warmup + decay + 3):
        lr = sched.get_last_lr()[0]
        if step < warmup:
            assert lr == pytest.approx(base * step / warmup, rel=1e-12)
        else:
            t = min(step - warmup, decay)
            expected = min_ratio * base + (base - min_ratio * base) * (1 + math.cos(math.pi * t / decay)) / 2
            assert lr == pytest.approx(expected, rel=1e-12, abs=1e-15)
            if step - warmup <= decay:
                assert lr == pytest.approx(cosine.get_last_lr()[0], rel=1e-9, abs=1e-15)
                ref_opt.step()
                cosine.step()
        sched.step()


# --------------------------------------------------------------------------------------
# clip_grad_norm_
# --------------------------------------------------------------------------------------


@given(data=st.data(), norm_type=st.sampled_from([1.0, 2.0, 3.0, 0.5, math.inf]),
       max_norm=st.sampled_from([0.1, 1.0, 1e6]), dtype=st.sampled_from(H.DTYPES))
def test_clip_grad_norm(data, norm_type, max_norm, dtype):
    grads = [data.draw(H.arrays(dtype, s, special=data.draw(st.booleans()))) for s in [(3,), (2, 2), (0,), ()]]
    ours = [mg.Tensor(np.zeros(g.shape, dtype), requires_grad=True) for g in grads]
    theirs = [torch.zeros(g.shape, dtype=torch.float64, requires_grad=True) for g in grads]
    for p, t, g in zip(ours, theirs, grads):
        p.grad = mg.Tensor(g.copy())
        t.grad = torch.from_numpy(g.astype(np.float64))
    total = optim.clip_grad_norm_(ours, max_norm, norm_type=norm_type)
    # PyTorch refuses an empty gradient for the inf-norm (no identity for max); minigrad counts it as 0.
    counted = [t for t in theirs if t.numel() or norm_type != math.inf]
    expected = torch.nn.utils.clip_grad_norm_(counted, max_norm, norm_type=norm_type)
    H.assert_agrees(np.asarray(total), expected.reshape(()), dtype=np.float64, rtol=1e-5 if dtype == np.float32 else
                    1e-10, what="total norm")
    for p, t in zip(ours, theirs):
        H.assert_agrees(p.grad, t.grad, dtype=dtype, rtol=1e-5 if dtype == np.float32 else 1e-10, scale=0.0,
                        what="clipped gradient")
    if not math.isfinite(total):
        for p, g in zip(ours, grads):
            p.grad = mg.Tensor(g.copy())
        with pytest.raises(RuntimeError, match="error_if_nonfinite"):
            optim.clip_grad_norm_(ours, max_norm, norm_type=norm_type, error_if_nonfinite=True)


def test_inf_norm_sees_nan_in_any_parameter():
    ps = [mg.Tensor(np.zeros(2), requires_grad=True) for _ in range(3)]
    for p, g in zip(ps, ([1.0, 2.0], [0.5, 0.5], [np.nan, 1.0])):
        p.grad = mg.Tensor(np.array(g))
    assert math.isnan(optim.clip_grad_norm_(ps, 1.0, norm_type=math.inf))
    with pytest.raises(RuntimeError, match="nan"):
        optim.clip_grad_norm_(ps, 1.0, norm_type=math.inf, error_if_nonfinite=True)


# --------------------------------------------------------------------------------------
# Autograd: grad, hooks, retain_grad, accumulation
# --------------------------------------------------------------------------------------


@given(seed=SEED, dtype=st.sampled_from(H.DTYPES))
def test_grad_and_second_derivatives(seed, dtype):
    x0 = np.random.default_rng(seed).standard_normal((3,)).astype(dtype)
    x, t = mg.Tensor(x0, requires_grad=True), torch.tensor(x0.astype(np.float64), requires_grad=True)
    unused, t_unused = mg.Tensor(np.ones(2, dtype), requires_grad=True), torch.ones(2, dtype=torch.float64,
                                                                                   requires_grad=True)

    def f(v, lib):
        return (lib.tanh(v) * v.exp()).sum() + (v * v).sigmoid().sum() if lib is torch else \
            (v.tanh() * v.exp()).sum() + (v * v).sigmoid().sum()

    y, ty = f(x, None), f(t, torch)
    g, g_unused = mg.grad(y, [x, unused], create_graph=True, allow_unused=True)
    tg, tg_unused = torch.autograd.grad(ty, [t, t_unused], create_graph=True, allow_unused=True)
    assert g_unused is None and tg_unused is None
    H.assert_agrees(g, tg, dtype=dtype, scale=10.0)
    (h,) = mg.grad(g.sum(), x)
    (th,) = torch.autograd.grad(tg.sum(), t)
    H.assert_agrees(h, th, dtype=dtype, scale=10.0)
    assert x.grad is None  # grad() leaves .grad alone, as torch.autograd.grad does
    with pytest.raises(RuntimeError, match="allow_unused"):
        mg.grad(f(x, None), [x, unused])


def test_hooks_retain_grad_and_accumulation_match_pytorch():
    x0 = np.array([0.5, -1.0, 2.0])
    x, t = mg.Tensor(x0, requires_grad=True), torch.tensor(x0, requires_grad=True)
    seen, t_seen = [], []
    mid, t_mid = x * 3.0, t * 3.0
    mid.retain_grad()
    t_mid.retain_grad()
    handle = mid.register_hook(lambda g: seen.append(g.data.copy()) or g * 2.0)
    t_handle = t_mid.register_hook(lambda g: t_seen.append(g.numpy().copy()) or g * 2.0)
    x.register_hook(lambda g: g + 1.0)
    t.register_hook(lambda g: g + 1.0)
    for _ in range(2):  # two backward passes accumulate into .grad
        (mid.tanh().sum()).backward(retain_graph=True)
        (t_mid.tanh().sum()).backward(retain_graph=True)
    np.testing.assert_allclose(x.grad.data, t.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(mid.grad.data, t_mid.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(np.array(seen), np.array(t_seen), rtol=1e-12)
    handle.remove()
    t_handle.remove()
    x.grad, t.grad = None, None
    mid.sum().backward()
    t_mid.sum().backward()
    np.testing.assert_allclose(x.grad.data, t.grad.numpy(), rtol=1e-12)


def test_backward_with_a_gradient_of_another_dtype():
    # A float64 gradient for a float32 output is cast (PyTorch refuses it; the leaf's dtype is what matters).
    x = mg.Tensor(np.ones(3, np.float32), requires_grad=True)
    (x * 2.0).backward(np.ones(3))
    assert x.grad.dtype == np.float32
    with pytest.raises(mg.OpError, match="gradient has shape"):
        (x * 2.0).backward(np.ones(4))
