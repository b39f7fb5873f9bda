"""minigrad.optim: each update against the formula written out by hand, groups, state dicts, schedules, clipping."""

import math

import numpy as np
import pytest

import minigrad as mg
from minigrad.optim import SGD, Adam, AdamW, LambdaLR, WarmupCosineLR, clip_grad_norm_, warmup_cosine


def make_param(rng, shape=(3, 4), dtype=np.float64):
    return mg.Tensor(rng.standard_normal(shape).astype(dtype), requires_grad=True)


def set_grad(p, g):
    p.grad = mg.Tensor(np.asarray(g, dtype=p.dtype))


# --------------------------------------------------------------------------------------
# SGD
# --------------------------------------------------------------------------------------


def test_sgd_plain_step(rng):
    p = make_param(rng)
    p0, g = p.data.copy(), rng.standard_normal(p.shape)
    set_grad(p, g)
    SGD([p], lr=0.1).step()
    np.testing.assert_array_equal(p.data, p0 - 0.1 * g)


@pytest.mark.parametrize("nesterov", [False, True])
def test_sgd_momentum_weight_decay_three_steps(rng, nesterov):
    lr, mu, wd = 0.05, 0.9, 0.01
    dampening = 0.0 if nesterov else 0.3
    p = make_param(rng)
    opt = SGD([p], lr=lr, momentum=mu, dampening=dampening, weight_decay=wd, nesterov=nesterov)
    expected, buf = p.data.copy(), None
    for _ in range(3):
        g = rng.standard_normal(p.shape)
        set_grad(p, g)
        opt.step()
        d = g + wd * expected
        buf = d.copy() if buf is None else mu * buf + (1 - dampening) * d
        direction = d + mu * buf if nesterov else buf
        expected = expected - lr * direction
        np.testing.assert_allclose(p.data, expected, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(opt.state[p]["momentum_buffer"], buf, rtol=1e-13, atol=1e-15)


def test_sgd_first_momentum_step_does_not_alias_the_gradient(rng):
    p = make_param(rng)
    g = rng.standard_normal(p.shape)
    set_grad(p, g)
    grad_array = p.grad.data
    opt = SGD([p], lr=0.1, momentum=0.9)
    opt.step()
    opt.step()  # scales the buffer in place: the gradient array must not be that buffer
    np.testing.assert_array_equal(grad_array, g)


def test_sgd_bad_options():
    p = mg.Tensor(np.zeros(2), requires_grad=True)
    with pytest.raises(ValueError, match="nesterov needs momentum"):
        SGD([p], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="lr must be >= 0"):
        SGD([p], lr=-1.0)


# --------------------------------------------------------------------------------------
# Adam, AdamW
# --------------------------------------------------------------------------------------


def adam_by_hand(p, grads, lr, betas, eps, weight_decay, decoupled):
    """The update from the paper (with PyTorch's placement of eps), one step per gradient."""
    b1, b2 = betas
    m, v = np.zeros_like(p), np.zeros_like(p)
    for t, g in enumerate(grads, start=1):
        if decoupled:
            p = p * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g**2
        m_hat, v_hat = m / (1 - b1**t), v / (1 - b2**t)
        p = p - lr * m_hat / (np.sqrt(v_hat) + eps)
    return p, m, v


@pytest.mark.parametrize("cls, weight_decay", [(Adam, 0.0), (Adam, 0.1), (AdamW, 0.1), (AdamW, 0.0)])
def test_adam_matches_the_formula(rng, cls, weight_decay):
    lr, betas, eps = 0.01, (0.8, 0.95), 1e-6
    p = make_param(rng)
    grads = [rng.standard_normal(p.shape) for _ in range(4)]
    expected, m, v = adam_by_hand(p.data.copy(), grads, lr, betas, eps, weight_decay, cls is AdamW)
    opt = cls([p], lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
    for g in grads:
        set_grad(p, g)
        opt.step()
    np.testing.assert_allclose(p.data, expected, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(opt.state[p]["exp_avg"], m, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(opt.state[p]["exp_avg_sq"], v, rtol=1e-12, atol=1e-14)
    assert opt.state[p]["step"] == 4


def test_adam_and_adamw_decay_differently(rng):
    """L2 decay in Adam is normalised away by sqrt(v); AdamW shrinks by exactly lr * wd."""
    p_adam = make_param(rng)
    p_adamw = mg.Tensor(p_adam.data.copy(), requires_grad=True)
    set_grad(p_adam, np.zeros(p_adam.shape))
    set_grad(p_adamw, np.zeros(p_adam.shape))
    AdamW([p_adamw], lr=0.1, weight_decay=0.5).step()
    np.testing.assert_allclose(p_adamw.data, p_adam.data * (1 - 0.1 * 0.5))  # zero gradient: decay only
    before = p_adam.data.copy()
    Adam([p_adam], lr=0.1, weight_decay=0.5).step()
    # With a zero gradient the L2 term is the whole gradient, so Adam's first step is about lr * sign(p).
    np.testing.assert_allclose(p_adam.data, before - 0.1 * np.sign(before), atol=1e-6)


def test_adam_first_step_moves_each_coordinate_by_lr(rng):
    """m_hat / sqrt(v_hat) = g / |g| on step 1: the step size does not depend on the gradient's scale."""
    p = make_param(rng)
    before = p.data.copy()
    set_grad(p, 1e-3 * rng.standard_normal(p.shape))
    g = p.grad.data
    Adam([p], lr=0.01, eps=1e-12).step()
    np.testing.assert_allclose(before - p.data, 0.01 * np.sign(g), rtol=1e-6)


def test_adam_bad_betas():
    p = mg.Tensor(np.zeros(2), requires_grad=True)
    with pytest.raises(ValueError, match="betas"):
        Adam([p], betas=(0.9, 1.0))


def test_adamw_default_weight_decay_is_pytorchs():
    p = mg.Tensor(np.zeros(2), requires_grad=True)
    assert AdamW([p]).param_groups[0]["weight_decay"] == 1e-2
    assert Adam([p]).param_groups[0]["weight_decay"] == 0.0


# --------------------------------------------------------------------------------------
# Behaviour shared by all optimizers
# --------------------------------------------------------------------------------------

ALL = [
    lambda ps: SGD(ps, lr=0.1),
    lambda ps: SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
    lambda ps: Adam(ps, lr=0.01, weight_decay=0.01),
    lambda ps: AdamW(ps, lr=0.01),
]
IDS = ["sgd", "sgd-nesterov", "adam", "adamw"]


@pytest.mark.parametrize("make", ALL, ids=IDS)
def test_float32_stays_float32(rng, make):
    p = make_param(rng, dtype=np.float32)
    opt = make([p])
    opt.param_groups[0]["lr"] = np.float64(0.01)  # as a schedule computed with NumPy might set it
    data_array = p.data
    for _ in range(2):
        set_grad(p, rng.standard_normal(p.shape))
        opt.step()
    assert p.data is data_array and p.dtype == np.float32  # updated in place, in float32
    for value in opt.state.get(p, {}).values():
        if isinstance(value, np.ndarray):
            assert value.dtype == np.float32


@pytest.mark.parametrize("make", ALL, ids=IDS)
def test_parameters_without_grad_are_left_alone(rng, make):
    used, unused = make_param(rng), make_param(rng)
    before = unused.data.copy()
    opt = make([used, unused])
    set_grad(used, rng.standard_normal(used.shape))
    opt.step()
    np.testing.assert_array_equal(unused.data, before)
    assert unused not in opt.state


@pytest.mark.parametrize("make", ALL, ids=IDS)
def test_state_dict_round_trip_resumes_bit_identically(rng, make):
    params = [make_param(rng, (3, 4), np.float32), make_param(rng, (4,), np.float32)]
    grads = [[rng.standard_normal(p.shape) for p in params] for _ in range(6)]

    def train(opt, ps, steps):
        for gs in steps:
            for p, g in zip(ps, gs):
                set_grad(p, g)
            opt.step()

    opt = make(params)
    train(opt, params, grads[:3])
    saved_state = opt.state_dict()
    saved_params = [p.data.copy() for p in params]
    train(opt, params, grads[3:])

    resumed_params = [mg.Tensor(a, requires_grad=True) for a in saved_params]
    resumed = make(resumed_params)
    resumed.load_state_dict(saved_state)
    train(resumed, resumed_params, grads[3:])
    for p, q in zip(params, resumed_params):
        np.testing.assert_array_equal(p.data, q.data)


def test_state_dict_is_a_snapshot_keyed_by_index(rng):
    a, b = make_param(rng), make_param(rng, (2,))
    opt = Adam([{"params": [a]}, {"params": [b], "lr": 0.5}])
    set_grad(a, np.ones(a.shape))
    set_grad(b, np.ones(b.shape))
    opt.step()
    sd = opt.state_dict()
    assert [g["params"] for g in sd["param_groups"]] == [[0], [1]]
    assert sd["param_groups"][1]["lr"] == 0.5
    assert sorted(sd["state"]) == [0, 1] and sd["state"][1]["exp_avg"].shape == (2,)
    kept = sd["state"][0]["exp_avg"].copy()
    opt.step()
    np.testing.assert_array_equal(sd["state"][0]["exp_avg"], kept)


def test_load_state_dict_mismatch_lists_every_problem_and_changes_nothing(rng):
    a, b = make_param(rng, (3, 4)), make_param(rng, (2,))
    source = Adam([a, b])
    set_grad(a, np.ones(a.shape))
    set_grad(b, np.ones(b.shape))
    source.step()
    sd = source.state_dict()

    wrong_shapes = Adam([make_param(rng, (4, 3)), make_param(rng, (5,))], lr=0.123)
    with pytest.raises(ValueError) as err:
        wrong_shapes.load_state_dict(sd)
    assert "state[0]['exp_avg']" in str(err.value) and "state[1]['exp_avg']" in str(err.value)
    assert wrong_shapes.state == {} and wrong_shapes.param_groups[0]["lr"] == 0.123

    with pytest.raises(ValueError, match=r"groups of sizes \[2\], this optimizer has \[1\]"):
        Adam([make_param(rng)]).load_state_dict(sd)


def test_load_state_dict_restores_tuple_options_saved_as_lists(rng):
    p = make_param(rng)
    sd = Adam([p], betas=(0.5, 0.6)).state_dict()
    sd["param_groups"][0]["betas"] = [0.5, 0.6]  # what a JSON round trip gives back
    opt = Adam([p])
    opt.load_state_dict(sd)
    assert opt.param_groups[0]["betas"] == (0.5, 0.6)


def test_zero_grad(rng):
    p = make_param(rng)
    set_grad(p, np.ones(p.shape))
    old = p.grad.data
    opt = SGD([p], lr=0.1)
    opt.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(p.grad.data, np.zeros(p.shape))
    np.testing.assert_array_equal(old, np.ones(p.shape))  # a new array: the old gradient was not written into
    opt.zero_grad()
    assert p.grad is None


def test_step_with_closure_returns_the_loss(rng):
    p = make_param(rng, (3,))
    opt = SGD([p], lr=0.1)

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    loss = opt.step(closure)
    assert loss.item() == pytest.approx(float(((p.data / 0.8) ** 2).sum()))  # p <- p - 0.1 * 2p = 0.8 p


def test_training_with_backward_minimises_a_quadratic(rng):
    target = rng.standard_normal(5)
    p = mg.Tensor(np.zeros(5), requires_grad=True)
    opt = Adam([p], lr=0.1)
    for _ in range(300):
        opt.zero_grad()
        ((p - target) ** 2).sum().backward()
        opt.step()
    np.testing.assert_allclose(p.data, target, atol=1e-3)


# --------------------------------------------------------------------------------------
# Parameter groups
# --------------------------------------------------------------------------------------


def test_param_groups_have_their_own_options(rng):
    weight, bias = make_param(rng), make_param(rng, (4,))
    w0, b0 = weight.data.copy(), bias.data.copy()
    opt = AdamW([{"params": [weight]}, {"params": [bias], "weight_decay": 0.0, "lr": 0.5}], lr=0.1,
                weight_decay=0.2)
    assert opt.param_groups[0]["weight_decay"] == 0.2 and opt.param_groups[0]["lr"] == 0.1  # defaults filled in
    set_grad(weight, np.zeros(weight.shape))
    set_grad(bias, np.zeros(bias.shape))
    opt.step()
    np.testing.assert_allclose(weight.data, w0 * (1 - 0.1 * 0.2))  # decayed with its group's lr and wd
    np.testing.assert_array_equal(bias.data, b0)  # no decay, zero gradient: untouched


def test_no_decay_group_for_biases_and_norms_of_a_real_module(rng):
    from minigrad import nn

    model = nn.Sequential(nn.Linear(3, 4, rng=rng), nn.LayerNorm(4), nn.Linear(4, 2, rng=rng))
    decay = [p for _, p in model.named_parameters() if p.ndim >= 2]  # weight matrices
    no_decay = [p for _, p in model.named_parameters() if p.ndim < 2]  # biases, norm gains
    before = {id(p): p.data.copy() for p in model.parameters()}
    opt = AdamW([{"params": decay, "weight_decay": 0.5}, {"params": no_decay, "weight_decay": 0.0}], lr=0.1)
    for p in model.parameters():
        set_grad(p, np.zeros(p.shape))
    opt.step()
    for p in decay:
        np.testing.assert_allclose(p.data, before[id(p)] * (1 - 0.1 * 0.5))
    for p in no_decay:
        np.testing.assert_array_equal(p.data, before[id(p)])


def test_param_group_errors(rng):
    p, q = make_param(rng), make_param(rng)
    with pytest.raises(ValueError, match="more than one group"):
        SGD([{"params": [p]}, {"params": [p, q]}], lr=0.1)
    with pytest.raises(ValueError, match=r"unknown option\(s\) \['weight_decy'\]"):
        SGD([{"params": [p], "weight_decy": 0.1}], lr=0.1)
    with pytest.raises(TypeError, match="single Tensor"):
        SGD(p, lr=0.1)
    with pytest.raises(ValueError, match="empty parameter list"):
        SGD([], lr=0.1)
    with pytest.raises(ValueError, match="not a leaf"):
        SGD([p * 2], lr=0.1)
    with pytest.raises(TypeError, match="is a ndarray, not a Tensor"):
        SGD([np.zeros(3)], lr=0.1)


# --------------------------------------------------------------------------------------
# Learning-rate schedules
# --------------------------------------------------------------------------------------


def test_warmup_cosine_values():
    f = lambda step: warmup_cosine(step, warmup_steps=10, total_steps=110, min_lr_ratio=0.1)  # noqa: E731
    assert f(0) == 0.0
    assert f(5) == 0.5  # halfway through warmup
    assert f(10) == 1.0  # warmup end: the peak
    assert f(60) == pytest.approx(0.55)  # halfway through the decay: (1 + min) / 2
    assert f(110) == pytest.approx(0.1) and f(500) == 0.1  # the end, and after it
    assert all(f(s) >= f(s + 1) for s in range(10, 120))  # decays monotonically


def test_warmup_cosine_scheduler_drives_every_group(rng):
    opt = SGD([{"params": [make_param(rng)], "lr": 1.0}, {"params": [make_param(rng)], "lr": 0.2}], lr=1.0)
    sched = WarmupCosineLR(opt, warmup_steps=4, total_steps=12)
    seen = []
    for _ in range(13):
        seen.append([g["lr"] for g in opt.param_groups])
        sched.step()
    assert seen[0] == [0.0, 0.0]  # set as soon as the scheduler is built
    assert seen[2] == [0.5, 0.1]
    assert seen[4] == [1.0, 0.2]
    assert seen[8] == pytest.approx([0.5, 0.1])
    assert seen[12] == [0.0, 0.0]
    assert sched.get_last_lr() == seen[12] and sched.get_lr(4) == [1.0, 0.2]


def test_scheduler_state_dict_round_trip(rng):
    opt = SGD([make_param(rng)], lr=0.3)
    sched = WarmupCosineLR(opt, warmup_steps=3, total_steps=20, min_lr_ratio=0.05)
    for _ in range(7):
        sched.step()
    sd = sched.state_dict()
    assert sd == {"base_lrs": [0.3], "last_step": 7, "warmup_steps": 3, "total_steps": 20, "min_lr_ratio": 0.05}

    fresh_opt = SGD([make_param(rng)], lr=0.3)
    fresh = WarmupCosineLR(fresh_opt, warmup_steps=3, total_steps=20, min_lr_ratio=0.05)
    fresh.load_state_dict(sd)
    assert fresh_opt.param_groups[0]["lr"] == opt.param_groups[0]["lr"]
    sched.step()
    fresh.step()
    assert fresh_opt.param_groups[0]["lr"] == opt.param_groups[0]["lr"]


def test_lambda_lr_and_constant(rng):
    opt = SGD([make_param(rng)], lr=0.5)
    sched = LambdaLR(opt, lambda step: 0.5**step)
    sched.step()
    sched.step()
    assert opt.param_groups[0]["lr"] == 0.125
    assert "lr_lambda" not in sched.state_dict()  # functions are not state
    const = LambdaLR(SGD([make_param(rng)], lr=0.5), lambda step: 1.0)
    const.step()
    assert const.get_last_lr() == [0.5]


def test_scheduler_bad_arguments(rng):
    opt = SGD([make_param(rng)], lr=0.5)
    with pytest.raises(ValueError, match="warmup_steps < total_steps"):
        WarmupCosineLR(opt, warmup_steps=10, total_steps=10)
    with pytest.raises(TypeError, match="expected an Optimizer"):
        LambdaLR([], lambda s: 1.0)


# --------------------------------------------------------------------------------------
# Gradient clipping
# --------------------------------------------------------------------------------------


def test_clip_grad_norm_scales_to_max_norm(rng):
    params = [make_param(rng, (3, 4), np.float32), make_param(rng, (5,), np.float32), make_param(rng)]
    for p in params[:2]:
        set_grad(p, 10 * rng.standard_normal(p.shape))
    originals = [p.grad.data.copy() for p in params[:2]]
    old_arrays = [p.grad.data for p in params[:2]]
    total = clip_grad_norm_(params, max_norm=1.0)

    expected_total = math.sqrt(sum(float((g.astype(np.float64) ** 2).sum()) for g in originals))
    assert total == pytest.approx(expected_total, rel=1e-6)
    new_total = math.sqrt(sum(float((p.grad.data.astype(np.float64) ** 2).sum()) for p in params[:2]))
    assert new_total == pytest.approx(1.0, rel=1e-5)
    for p, g, old in zip(params, originals, old_arrays):
        assert p.grad.dtype == np.float32
        np.testing.assert_allclose(p.grad.data, g / expected_total, rtol=1e-5)  # same direction
        np.testing.assert_array_equal(old, g)  # the old gradient arrays were not written into
    assert params[2].grad is None


def test_clip_grad_norm_leaves_small_gradients(rng):
    p = make_param(rng)
    set_grad(p, 0.01 * rng.standard_normal(p.shape))
    before = p.grad
    total = clip_grad_norm_([p], max_norm=1.0)
    assert p.grad is before
    assert total == pytest.approx(float(np.linalg.norm(before.data)))


def test_clip_grad_norm_inf_norm_and_nonfinite(rng):
    p = make_param(rng, (4,))
    set_grad(p, [1.0, -8.0, 2.0, 0.0])
    assert clip_grad_norm_([p], max_norm=2.0, norm_type=math.inf) == 8.0
    np.testing.assert_allclose(p.grad.data, np.array([1.0, -8.0, 2.0, 0.0]) * 2.0 / (8.0 + 1e-6))
    set_grad(p, [1.0, np.nan, 0.0, 0.0])
    with pytest.raises(RuntimeError, match="nan"):
        clip_grad_norm_([p], max_norm=1.0, error_if_nonfinite=True)


# --------------------------------------------------------------------------------------
# Against PyTorch, when it is installed
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name, kwargs", [
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
    ("Adam", dict(lr=0.01, betas=(0.8, 0.9), eps=1e-6, weight_decay=0.1)),
    ("AdamW", dict(lr=0.01, betas=(0.8, 0.9), eps=1e-6, weight_decay=0.1)),
])
def test_matches_torch(rng, name, kwargs):
    torch = pytest.importorskip("torch")
    ours = make_param(rng, (3, 4))
    theirs = torch.tensor(ours.data.copy(), requires_grad=True)
    opt = {"SGD": SGD, "Adam": Adam, "AdamW": AdamW}[name]([ours], **kwargs)
    # foreach=False: the plain per-parameter loop, the reference implementation.
    topt = getattr(torch.optim, name)([theirs], foreach=False, **kwargs)
    for _ in range(5):
        g = rng.standard_normal(ours.shape)
        set_grad(ours, g)
        theirs.grad = torch.tensor(g)
        opt.step()
        topt.step()
    np.testing.assert_allclose(ours.data, theirs.detach().numpy(), rtol=1e-12, atol=1e-14)


def test_clip_matches_torch(rng):
    torch = pytest.importorskip("torch")
    grads = [rng.standard_normal((3, 4)) * 5, rng.standard_normal(6)]
    ours = [make_param(rng, g.shape) for g in grads]
    theirs = [torch.zeros(g.shape, dtype=torch.float64, requires_grad=True) for g in grads]
    for p, t, g in zip(ours, theirs, grads):
        set_grad(p, g)
        t.grad = torch.tensor(g)
    for norm_type in (2.0, 1.0, math.inf):
        total = clip_grad_norm_(ours, max_norm=1.5, norm_type=norm_type)
        t_total = torch.nn.utils.clip_grad_norm_(theirs, max_norm=1.5, norm_type=norm_type)
        assert total == pytest.approx(float(t_total), rel=1e-12)
        for p, t in zip(ours, theirs):
            np.testing.assert_allclose(p.grad.data, t.grad.numpy(), rtol=1e-12)
