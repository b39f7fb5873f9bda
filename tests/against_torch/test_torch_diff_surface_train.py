"""Differential tests of the training-loop surface against PyTorch: learning-rate schedulers, minigrad.utils.data,
mg.save / mg.load, and PyTorch's quickstart tutorial run with only its import lines changed.

Schedulers step beside torch.optim.lr_scheduler's for many steps (lr and momentum equal to float rounding,
state_dict round trips mid-way); the data tools are held to torch.utils.data's batches, dtypes, shapes,
lengths and refusals; save/load keeps what torch.save/torch.load keep (and refuses, with what to save
instead, what a file cannot hold without pickle).
"""

import io
import textwrap

import numpy as np
import pytest
import torch_diff_helpers as H
from hypothesis import given
from hypothesis import strategies as st

import minigrad as mg
from minigrad import nn, optim
from minigrad.io import CheckpointError
from minigrad.utils import data

torch = pytest.importorskip("torch")
H.use_torch(torch)
tdata = torch.utils.data
L = torch.optim.lr_scheduler
pytestmark = [pytest.mark.filterwarnings("ignore::RuntimeWarning"),
              pytest.mark.filterwarnings(r"ignore:Detected call of `lr_scheduler.step\(\)` before")]

# What PyTorch raises when it refuses a call: the type varies by function, the refusal is what is compared.
TORCH_REFUSALS = (RuntimeError, ValueError, TypeError, IndexError, KeyError, NotImplementedError, AssertionError)


# --------------------------------------------------------------------------------------
# Learning-rate schedulers
# --------------------------------------------------------------------------------------

SCHEDULES = [
    ("StepLR", dict(step_size=7, gamma=0.5)), ("StepLR", dict(step_size=1)),
    ("MultiStepLR", dict(milestones=[5, 9, 30], gamma=0.3)), ("ExponentialLR", dict(gamma=0.95)),
    ("CosineAnnealingLR", dict(T_max=13, eta_min=0.001)), ("CosineAnnealingLR", dict(T_max=50)),
    ("OneCycleLR", dict(max_lr=1.0, total_steps=80)), ("OneCycleLR", dict(max_lr=[1.0, 2.0], total_steps=80)),
    ("OneCycleLR", dict(max_lr=0.5, epochs=8, steps_per_epoch=10, three_phase=True, anneal_strategy="linear")),
    ("OneCycleLR", dict(max_lr=0.5, total_steps=80, pct_start=0.5, cycle_momentum=False, div_factor=10.0)),
]


def _optimizers(name: str):
    """An optimizer of ``name`` over two parameter groups, in both libraries."""
    ours = [mg.Tensor(np.zeros(2), requires_grad=True) for _ in range(2)]
    theirs = [torch.zeros(2, requires_grad=True) for _ in range(2)]
    if name == "SGD":
        return (optim.SGD([{"params": [ours[0]]}, {"params": [ours[1]], "lr": 0.2}], lr=0.1, momentum=0.9),
                torch.optim.SGD([{"params": [theirs[0]]}, {"params": [theirs[1]], "lr": 0.2}], lr=0.1, momentum=0.9))
    return (optim.Adam([{"params": [ours[0]]}, {"params": [ours[1]], "lr": 0.2}], lr=0.1),
            torch.optim.Adam([{"params": [theirs[0]]}, {"params": [theirs[1]], "lr": 0.2}], lr=0.1))


def _momentum(group: dict) -> float:
    return group["betas"][0] if "betas" in group else group["momentum"]


@pytest.mark.parametrize("name, kwargs", SCHEDULES)
@pytest.mark.parametrize("optimizer", ["SGD", "Adam"])
def test_scheduler_follows_pytorchs_lr_over_many_steps(name, kwargs, optimizer):
    ours_opt, theirs_opt = _optimizers(optimizer)
    ours = getattr(optim.lr_scheduler, name)(ours_opt, **kwargs)
    theirs = getattr(L, name)(theirs_opt, **kwargs)
    steps = getattr(theirs, "total_steps", 120)
    for step in range(steps):
        np.testing.assert_allclose(ours.get_last_lr(), theirs.get_last_lr(), rtol=1e-12, atol=1e-15,
                                   err_msg=f"{name} lr at step {step}")
        for i, (g, t) in enumerate(zip(ours_opt.param_groups, theirs_opt.param_groups)):
            assert g["lr"] == ours.get_last_lr()[i]
            np.testing.assert_allclose(_momentum(g), _momentum(t), rtol=1e-12, err_msg=f"momentum at step {step}")
        assert ours.last_epoch == theirs.last_epoch
        ours_opt.step()
        theirs_opt.step()
        if step < steps - 1:
            ours.step()
            theirs.step()


@pytest.mark.parametrize("name, kwargs", SCHEDULES)
def test_scheduler_state_dict_resumes_the_schedule(name, kwargs):
    first_opt, _ = _optimizers("SGD")
    first = getattr(optim.lr_scheduler, name)(first_opt, **kwargs)
    for _ in range(17):
        first.step()
    saved = mg.load(_saved({"scheduler": first.state_dict(), "optimizer": first_opt.state_dict()}))
    resumed_opt, _ = _optimizers("SGD")
    resumed = getattr(optim.lr_scheduler, name)(resumed_opt, **kwargs)
    resumed_opt.load_state_dict(saved["optimizer"])
    resumed.load_state_dict(saved["scheduler"])
    for _ in range(20):
        assert resumed.get_last_lr() == first.get_last_lr() and resumed.last_epoch == first.last_epoch
        first.step()
        resumed.step()


def test_lambda_lr_takes_one_function_per_group_as_pytorch():
    ours_opt, theirs_opt = _optimizers("SGD")
    fns = [lambda k: 0.9**k, lambda k: 1 / (k + 1)]
    ours, theirs = optim.lr_scheduler.LambdaLR(ours_opt, fns), L.LambdaLR(theirs_opt, fns)
    for _ in range(30):
        np.testing.assert_allclose(ours.get_last_lr(), theirs.get_last_lr(), rtol=1e-12)
        ours.step()
        theirs.step()


SCHEDULER_REFUSALS = [
    (lambda o: optim.lr_scheduler.OneCycleLR(o, 1.0), lambda o: L.OneCycleLR(o, 1.0),
     ValueError, r"You must define either total_steps OR \(epochs AND steps_per_epoch\)"),
    (lambda o: optim.lr_scheduler.OneCycleLR(o, 1.0, total_steps=0), lambda o: L.OneCycleLR(o, 1.0, total_steps=0),
     ValueError, r"Expected positive integer total_steps, but got 0"),
    (lambda o: optim.lr_scheduler.OneCycleLR(o, 1.0, total_steps=5, pct_start=2),
     lambda o: L.OneCycleLR(o, 1.0, total_steps=5, pct_start=2), ValueError, r"between 0 and 1 pct_start"),
    (lambda o: optim.lr_scheduler.OneCycleLR(o, 1.0, total_steps=5, anneal_strategy="exp"),
     lambda o: L.OneCycleLR(o, 1.0, total_steps=5, anneal_strategy="exp"), ValueError,
     r"anneal_strategy must be one of 'cos' or 'linear'"),
    (lambda o: optim.lr_scheduler.OneCycleLR(o, [1.0], total_steps=5),
     lambda o: L.OneCycleLR(o, [1.0], total_steps=5), ValueError, r"expected 2 values for max_lr, got 1"),
    (lambda o: optim.lr_scheduler.LambdaLR(o, [lambda k: 1.0]), lambda o: L.LambdaLR(o, [lambda k: 1.0]),
     ValueError, r"expected 2 lr_lambdas \(one per parameter group\), got 1"),
    (lambda o: optim.lr_scheduler.StepLR(o, 3, last_epoch=4), lambda o: L.StepLR(o, 3, last_epoch=4),
     ValueError, r"to resume a schedule, build it with the default last_epoch=-1 and load its state"),
]


@pytest.mark.parametrize("ours, theirs, error, words", SCHEDULER_REFUSALS)
def test_scheduler_refusals(ours, theirs, error, words):
    ours_opt, theirs_opt = _optimizers("SGD")
    with pytest.raises(TORCH_REFUSALS):  # (PyTorch's type varies; ours is checked below)
        theirs(theirs_opt)
    with pytest.raises(error, match=words):
        ours(ours_opt)


def test_one_cycle_refuses_to_step_past_its_total_as_pytorch():
    ours_opt, theirs_opt = _optimizers("SGD")
    ours = optim.lr_scheduler.OneCycleLR(ours_opt, 1.0, total_steps=3)
    theirs = L.OneCycleLR(theirs_opt, 1.0, total_steps=3)
    for _ in range(3):
        ours.step()
        theirs.step()
    with pytest.raises(ValueError, match="Tried to step 4 times. The specified number of total steps is 3"):
        ours.step()
    with pytest.raises(ValueError, match="Tried to step 4 times"):
        theirs.step()


# --------------------------------------------------------------------------------------
# minigrad.utils.data
# --------------------------------------------------------------------------------------


def _same(ours, theirs, where="batch"):
    """The same structure, types, shapes, dtypes and values (a Tensor for a torch tensor)."""
    if isinstance(theirs, torch.Tensor):
        assert isinstance(ours, mg.Tensor), f"{where}: {type(ours).__name__} where PyTorch has a tensor"
        assert ours.shape == tuple(theirs.shape) and str(ours.dtype) == str(theirs.dtype).removeprefix("torch."), \
            f"{where}: {ours.shape} {ours.dtype}, PyTorch {tuple(theirs.shape)} {theirs.dtype}"
        np.testing.assert_array_equal(ours.data, theirs.numpy(), err_msg=where)
    elif isinstance(theirs, dict):
        assert type(ours) is type(theirs) and list(ours) == list(theirs), where
        for k in theirs:
            _same(ours[k], theirs[k], f"{where}[{k!r}]")
    elif isinstance(theirs, list | tuple):
        assert type(ours) is type(theirs) and len(ours) == len(theirs), f"{where}: {ours!r} vs {theirs!r}"
        for i, (a, b) in enumerate(zip(ours, theirs)):
            _same(a, b, f"{where}[{i}]")
    else:
        assert ours == theirs and type(ours) is type(theirs), f"{where}: {ours!r} vs {theirs!r}"


def _samples(lib):
    """Samples of each kind default_collate handles, built with ``lib``'s tensors."""
    as_tensor = mg.tensor if lib is mg else torch.tensor
    return {
        "tensors": [as_tensor(np.arange(6.0, dtype=np.float32).reshape(2, 3) + i) for i in range(3)],
        "pairs": [(as_tensor(np.full(2, i, dtype=np.float32)), i) for i in range(3)],
        "floats": [0.5, 1.5, 2.5], "ints": [1, 2, 3], "bools": [True, False, True],
        "arrays": [np.arange(4, dtype=np.int32) * i for i in range(3)],
        "numpy scalars": [np.float32(1.5), np.float32(2.5)],
        "strings": ["a", "b"],
        "dicts": [{"x": as_tensor(np.ones(2, np.float32) * i), "label": i, "name": f"s{i}"} for i in range(3)],
        "lists": [[i, float(i), [i, i + 1]] for i in range(3)],
    }


@pytest.mark.parametrize("kind", list(_samples(mg)))
def test_default_collate_as_pytorchs(kind):
    _same(data.default_collate(_samples(mg)[kind]), tdata.default_collate(_samples(torch)[kind]), kind)


@given(n=st.integers(1, 23), batch_size=st.integers(1, 8), drop_last=st.booleans(), seed=st.integers(0, 99))
def test_data_loader_batches_as_pytorchs(n, batch_size, drop_last, seed):
    rng = np.random.default_rng(seed)
    x, y = rng.standard_normal((n, 1, 2, 2)).astype(np.float32), rng.integers(0, 10, n)
    ours = data.DataLoader(data.TensorDataset(mg.tensor(x), mg.tensor(y)), batch_size=batch_size, drop_last=drop_last)
    theirs = tdata.DataLoader(tdata.TensorDataset(torch.tensor(x), torch.tensor(y)), batch_size=batch_size,
                              drop_last=drop_last)
    assert len(ours) == len(theirs)
    got, expected = list(ours), list(theirs)
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        _same(a, b)


def test_shuffled_batches_are_a_new_permutation_each_pass_reproducible_from_the_generator():
    dataset = data.TensorDataset(mg.arange(20))

    def passes(generator):
        loader = data.DataLoader(dataset, batch_size=6, shuffle=True, generator=generator)
        return [np.concatenate([b.data for (b,) in loader]) for _ in range(2)]

    first, second = passes(mg.Generator().manual_seed(5))
    assert sorted(first) == list(range(20)) and sorted(second) == list(range(20))
    assert not np.array_equal(first, second) and not np.array_equal(first, np.arange(20))
    again = passes(mg.Generator().manual_seed(5))
    np.testing.assert_array_equal(again[0], first)
    np.testing.assert_array_equal(again[1], second)
    mg.manual_seed(1)
    default = passes(None)
    mg.manual_seed(1)
    np.testing.assert_array_equal(passes(None)[0], default[0])  # the default generator, seeded by mg.manual_seed


def test_unbatched_samplers_and_iterable_datasets_as_pytorchs():
    x = np.arange(10, dtype=np.float32).reshape(5, 2)

    class Stream(data.IterableDataset):
        def __iter__(self):
            return iter(x)

    class TorchStream(tdata.IterableDataset):
        def __iter__(self):
            return iter(x)

    cases = [(dict(batch_size=None), dict(batch_size=None)),
             (dict(batch_size=2, sampler=[4, 0, 2]), dict(batch_size=2, sampler=[4, 0, 2])),
             (dict(batch_sampler=[[1, 2], [0]]), dict(batch_sampler=[[1, 2], [0]])),
             (dict(batch_size=3, collate_fn=lambda b: len(b)), dict(batch_size=3, collate_fn=lambda b: len(b)))]
    for ours_kw, theirs_kw in cases:
        ours = list(data.DataLoader(data.TensorDataset(mg.tensor(x)), **ours_kw))
        theirs = list(tdata.DataLoader(tdata.TensorDataset(torch.tensor(x)), **theirs_kw))
        _same(ours, theirs, str(ours_kw))
    for batch_size, drop_last in ((2, False), (2, True), (None, False)):
        _same(list(data.DataLoader(Stream(), batch_size=batch_size, drop_last=drop_last)),
              list(tdata.DataLoader(TorchStream(), batch_size=batch_size, drop_last=drop_last)), "stream")


@pytest.mark.parametrize("lengths", [[0.3, 0.3, 0.4], [0.5, 0.5], [0.34, 0.33, 0.33], [3, 7], [10, 0], [0.1] * 10,
                                     [0.05, 0.95]])
def test_random_split_lengths_as_pytorchs(lengths):
    ours = data.random_split(range(10), lengths, generator=mg.Generator().manual_seed(0))
    theirs = tdata.random_split(range(10), lengths, generator=torch.Generator().manual_seed(0))
    assert [len(s) for s in ours] == [len(s) for s in theirs]
    assert sorted(i for s in ours for i in s) == list(range(10))  # a partition of the dataset


def test_random_split_is_reproducible_from_the_generator():
    split = [list(s) for s in data.random_split(range(30), [0.5, 0.5], generator=mg.Generator().manual_seed(4))]
    again = [list(s) for s in data.random_split(range(30), [0.5, 0.5], generator=mg.Generator().manual_seed(4))]
    assert split == again and split[0] != list(range(15))


DATA_REFUSALS = [
    (lambda d: data.TensorDataset(mg.zeros(3), mg.zeros(4)), lambda d: tdata.TensorDataset(torch.zeros(3),
                                                                                           torch.zeros(4)),
     ValueError, r"Size mismatch between tensors: every tensor needs the same first dim.*\[\(3,\), \(4,\)\]"),
    (lambda d: data.random_split(d, [3, 4]), lambda d: tdata.random_split(d, [3, 4]),
     ValueError, r"Sum of input lengths \(7\) does not equal the length of the input dataset \(10\)"),
    (lambda d: data.random_split(d, [1.2, -0.2]), lambda d: tdata.random_split(d, [1.2, -0.2]),
     ValueError, r"Fraction at index 0 is not between 0 and 1"),
    (lambda d: data.DataLoader(d, sampler=[0, 1], shuffle=True), lambda d: tdata.DataLoader(d, sampler=[0, 1],
                                                                                            shuffle=True),
     ValueError, r"sampler option is mutually exclusive with shuffle"),
    (lambda d: data.DataLoader(d, batch_sampler=[[0]], batch_size=2),
     lambda d: tdata.DataLoader(d, batch_sampler=[[0]], batch_size=2),
     ValueError, r"batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last"),
    (lambda d: data.DataLoader(d, batch_size=0), lambda d: tdata.DataLoader(d, batch_size=0),
     ValueError, r"batch_size should be a positive integer value"),
    (lambda d: data.DataLoader(d, num_workers=-1), lambda d: tdata.DataLoader(d, num_workers=-1),
     ValueError, r"num_workers option should be non-negative"),
    (lambda d: data.DataLoader(d, batch_size=None, drop_last=True),
     lambda d: tdata.DataLoader(d, batch_size=None, drop_last=True),
     ValueError, r"batch_size=None option disables auto-batching and is mutually exclusive with drop_last"),
    (lambda d: data.default_collate([object()]), lambda d: tdata.default_collate([object()]),
     TypeError, r"batch must contain tensors, numpy arrays, numbers, dicts or lists; found <class 'object'>"),
    (lambda d: data.default_collate([[1, 2], [1]]), lambda d: tdata.default_collate([[1, 2], [1]]),
     RuntimeError, r"each element in list of batch should be of equal size"),
    (lambda d: data.Dataset()[0], lambda d: tdata.Dataset()[0],
     NotImplementedError, r"subclasses of Dataset should implement __getitem__"),
]


@pytest.mark.parametrize("ours, theirs, error, words", DATA_REFUSALS)
def test_data_refusals(ours, theirs, error, words):
    with pytest.raises(TORCH_REFUSALS):  # (PyTorch's type varies; ours is checked below)
        theirs(list(range(10)))
    with pytest.raises(error, match=words):
        ours(list(range(10)))


def test_torch_utils_data_is_reached_from_the_top_module():
    import minigrad as torch_like

    assert torch_like.utils.data.DataLoader is data.DataLoader
    assert torch_like.utils.data.TensorDataset is data.TensorDataset


# --------------------------------------------------------------------------------------
# mg.save / mg.load
# --------------------------------------------------------------------------------------


def _saved(obj) -> io.BytesIO:
    buffer = io.BytesIO()
    mg.save(obj, buffer)
    buffer.seek(0)
    return buffer


def test_save_and_load_a_state_dict_as_pytorch(tmp_path):
    ours = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.LayerNorm(4), nn.Linear(4, 2))
    path = tmp_path / "model.pth"
    mg.save(ours.state_dict(), path)
    fresh = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.LayerNorm(4), nn.Linear(4, 2))
    result = fresh.load_state_dict(mg.load(path, weights_only=True, map_location="cpu"))
    assert list(result.missing_keys) == [] and list(result.unexpected_keys) == []
    for (name, a), b in zip(ours.state_dict().items(), fresh.state_dict().values()):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a.data, b.data, err_msg=name)
    theirs = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.LayerNorm(4), torch.nn.Linear(4, 2))
    torch.save(theirs.state_dict(), tmp_path / "theirs.pth")
    loaded = torch.load(tmp_path / "theirs.pth", weights_only=True)
    assert list(mg.load(path)) == list(loaded)  # the same names, in the same order
    assert not list(tmp_path.glob(".*.tmp"))  # written atomically: no temporary file left


def test_save_and_load_keep_what_torch_keeps():
    shared = mg.tensor([1.0, 2.0], dtype=mg.float64)
    obj = {"epoch": 3, "lr": 0.1, "best": float("inf"), "name": "run", "ok": True, "none": None,
           "history": [1.5, 2.5], "pair": (1, "a"), 7: "int key", "nested": {"w": shared, "again": shared},
           "ids": mg.tensor([1, 2, 3]), "mask": mg.tensor([True, False]), "half": mg.ones(2, dtype=mg.float16),
           "weight": nn.Parameter(np.ones(2, np.float32)), "grad": mg.randn(2, requires_grad=True)}
    theirs_obj = {"epoch": 3, "lr": 0.1, "best": float("inf"), "name": "run", "ok": True, "none": None,
                  "history": [1.5, 2.5], "pair": (1, "a"), 7: "int key",
                  "nested": {"w": torch.tensor([1.0, 2.0], dtype=torch.float64)},
                  "ids": torch.tensor([1, 2, 3]), "mask": torch.tensor([True, False]),
                  "half": torch.ones(2, dtype=torch.float16), "weight": torch.nn.Parameter(torch.ones(2)),
                  "grad": torch.randn(2, requires_grad=True)}
    theirs_obj["nested"]["again"] = theirs_obj["nested"]["w"]
    buffer = io.BytesIO()
    torch.save(theirs_obj, buffer)
    buffer.seek(0)
    theirs = torch.load(buffer)
    ours = mg.load(_saved(obj))
    assert list(ours) == list(theirs)
    for key in ("epoch", "lr", "best", "name", "ok", "none", "history", "pair", 7):
        assert ours[key] == theirs[key] and type(ours[key]) is type(theirs[key]), key
    for key in ("ids", "mask", "half"):
        _same(ours[key], theirs[key], key)
    assert isinstance(ours["weight"], nn.Parameter) and isinstance(theirs["weight"], torch.nn.Parameter)
    assert ours["grad"].requires_grad == theirs["grad"].requires_grad and ours["grad"].is_leaf
    assert ours["nested"]["w"] is ours["nested"]["again"]  # a tensor saved twice comes back as one, as torch's
    assert theirs["nested"]["w"] is theirs["nested"]["again"]


def test_save_and_load_an_optimizer_state_dict_resumes_training():
    def run(model, opt, steps):
        for step in range(steps):
            x = mg.tensor(np.random.default_rng(step).standard_normal((4, 3)).astype(np.float32))
            opt.zero_grad()
            model(x).pow(2).mean().backward()
            opt.step()

    mg.manual_seed(0)
    model = nn.Linear(3, 2)
    opt = optim.Adam(model.parameters(), lr=0.01)
    run(model, opt, 3)
    checkpoint = mg.load(_saved({"model": model.state_dict(), "optimizer": opt.state_dict()}))
    resumed = nn.Linear(3, 2)
    resumed.load_state_dict(checkpoint["model"])
    resumed_opt = optim.Adam(resumed.parameters(), lr=0.5)
    resumed_opt.load_state_dict(checkpoint["optimizer"])
    assert resumed_opt.param_groups[0]["lr"] == 0.01 and resumed_opt.param_groups[0]["betas"] == (0.9, 0.999)
    run(model, opt, 2)
    run(resumed, resumed_opt, 2)
    for a, b in zip(model.parameters(), resumed.parameters()):
        np.testing.assert_array_equal(a.data, b.data)


# PyTorch pickles the first three; minigrad stores no code, so it refuses them and says what to save instead.
SAVE_REFUSALS = [
    (lambda: mg.save(nn.Linear(2, 2), io.BytesIO()), TypeError,
     r"obj is a whole Linear module; save its weights: mg.save\(model.state_dict\(\), path\), and later "
     r"model.load_state_dict\(mg.load\(path\)\)"),
    (lambda: mg.save({"opt": optim.SGD(nn.Linear(2, 2).parameters(), lr=0.1)}, io.BytesIO()),
     TypeError, r"obj\['opt'\] is a whole SGD; save optimizer.state_dict\(\)"),
    (lambda: mg.save({"fn": len}, io.BytesIO()), TypeError,
     r"obj\['fn'\] is a builtin_function_or_method, which a file cannot hold without pickle"),
    (lambda: mg.save("model.pth", nn.Linear(2, 2)), TypeError,
     r"takes the object first and the file second, as torch.save.*mg.save\(model.state_dict\(\), path\)"),
    (lambda: mg.load(_saved({}), map_location="cuda:0"), RuntimeError, r"CPU only"),
    (lambda: mg.load(_saved({}), map_location=lambda storage, loc: storage), TypeError,
     r"map_location as a function is not supported.*map_location='cpu'"),
]


@pytest.mark.parametrize("ours, error, words", SAVE_REFUSALS)
def test_save_refusals(ours, error, words):
    with pytest.raises(error, match=words):
        ours()


def test_pytorch_refuses_the_wrong_argument_order_too():
    with pytest.raises(AttributeError, match="expected 'f' to be string, path, or a file-like object"):
        torch.save("model.pth", torch.nn.Linear(2, 2))


def test_load_refuses_a_pickle_and_says_how_to_convert_it(tmp_path):
    torch.save({"w": torch.zeros(2)}, tmp_path / "theirs.pt")
    with pytest.raises(CheckpointError, match=r"is a pickle \(as torch.save writes\), which minigrad never loads: "
                                              r"unpickling runs code.*safetensors.torch.save_file"):
        mg.load(tmp_path / "theirs.pt")
    mg.io.save(tmp_path / "checkpoint.safetensors", nn.Linear(2, 2))
    with pytest.raises(CheckpointError, match=r"training checkpoint written by mg.io.save; read it with mg.io.load"):
        mg.load(tmp_path / "checkpoint.safetensors")


# --------------------------------------------------------------------------------------
# PyTorch's quickstart tutorial, with only its import lines changed
# --------------------------------------------------------------------------------------

# pytorch.org/tutorials/beginner/basics/quickstart_tutorial, on synthetic FashionMNIST-shaped data (8x8 images),
# with a StepLR schedule and a save / load of the weights. The harness gives ``start`` (the first weights) and the
# data as arrays, and reads back the losses, accuracy and final weights.
QUICKSTART = textwrap.dedent('''
    device = "cuda" if torch.cuda.is_available() else "cpu"

    training_data = TensorDataset(torch.tensor(train_x), torch.tensor(train_y))
    test_data = TensorDataset(torch.tensor(test_x), torch.tensor(test_y))
    batch_size = 16
    train_dataloader = DataLoader(training_data, batch_size=batch_size)
    test_dataloader = DataLoader(test_data, batch_size=batch_size)

    class NeuralNetwork(nn.Module):
        def __init__(self):
            super().__init__()
            self.flatten = nn.Flatten()
            self.linear_relu_stack = nn.Sequential(
                nn.Linear(8*8, 32),
                nn.ReLU(),
                nn.Linear(32, 32),
                nn.ReLU(),
                nn.Linear(32, 10)
            )

        def forward(self, x):
            x = self.flatten(x)
            logits = self.linear_relu_stack(x)
            return logits

    model = NeuralNetwork().to(device)
    model.load_state_dict({k: torch.tensor(v) for k, v in start.items()})

    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    losses, accuracies = [], []

    def train(dataloader, model, loss_fn, optimizer):
        size = len(dataloader.dataset)
        model.train()
        for batch, (X, y) in enumerate(dataloader):
            X, y = X.to(device), y.to(device)
            pred = model(X)
            loss = loss_fn(pred, y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            losses.append(loss.item())
            if batch % 100 == 0:
                loss, current = loss.item(), (batch + 1) * len(X)
                print(f"loss: {loss:>7f}  [{current:>5d}/{size:>5d}]")

    def test(dataloader, model, loss_fn):
        size = len(dataloader.dataset)
        num_batches = len(dataloader)
        model.eval()
        test_loss, correct = 0, 0
        with torch.no_grad():
            for X, y in dataloader:
                X, y = X.to(device), y.to(device)
                pred = model(X)
                test_loss += loss_fn(pred, y).item()
                correct += (pred.argmax(1) == y).type(torch.float).sum().item()
        test_loss /= num_batches
        correct /= size
        accuracies.append((correct, test_loss))
        print(f"Test Error: Accuracy: {(100*correct):>0.1f}%, Avg loss: {test_loss:>8f}")

    epochs = 4
    for t in range(epochs):
        print(f"Epoch {t+1}")
        train(train_dataloader, model, loss_fn, optimizer)
        test(test_dataloader, model, loss_fn)
        scheduler.step()

    torch.save(model.state_dict(), path)
    model = NeuralNetwork().to(device)
    model.load_state_dict(torch.load(path, weights_only=True))
    final = {k: v.detach().numpy() if hasattr(v, "detach") else v.numpy() for k, v in model.state_dict().items()}
''')

IMPORTS = {
    "torch": "import torch\nfrom torch import nn\nfrom torch.utils.data import DataLoader, TensorDataset\n",
    "minigrad": "import minigrad as torch\nfrom minigrad import nn\nfrom minigrad.utils.data import DataLoader, "
                "TensorDataset\n",
}


def test_pytorch_quickstart_runs_with_only_its_imports_changed_and_agrees(tmp_path, capsys):
    rng = np.random.default_rng(0)
    centres = rng.standard_normal((10, 1, 8, 8)).astype(np.float32)
    train_y, test_y = rng.integers(0, 10, 192), rng.integers(0, 10, 40)
    train_x = (centres[train_y] + 0.8 * rng.standard_normal((192, 1, 8, 8))).astype(np.float32)
    test_x = (centres[test_y] + 0.8 * rng.standard_normal((40, 1, 8, 8))).astype(np.float32)
    shapes = {"linear_relu_stack.0.weight": (32, 64), "linear_relu_stack.0.bias": (32,),
              "linear_relu_stack.2.weight": (32, 32), "linear_relu_stack.2.bias": (32,),
              "linear_relu_stack.4.weight": (10, 32), "linear_relu_stack.4.bias": (10,)}
    start = {k: (rng.uniform(-1, 1, s) / np.sqrt(s[-1] if len(s) > 1 else 32)).astype(np.float32)
             for k, s in shapes.items()}
    runs = {}
    for name, imports in IMPORTS.items():
        scope = dict(train_x=train_x, train_y=train_y, test_x=test_x, test_y=test_y, start=start,
                     path=str(tmp_path / f"{name}.pth"))
        exec(compile(imports + QUICKSTART, f"<quickstart, {name}>", "exec"), scope)  # noqa: S102
        runs[name] = scope
    printed = capsys.readouterr().out
    assert printed.count("Test Error: Accuracy") == 8 and "Epoch 4" in printed
    ours, theirs = runs["minigrad"], runs["torch"]
    assert len(ours["losses"]) == len(theirs["losses"]) == 4 * 12
    np.testing.assert_allclose(ours["losses"], theirs["losses"], rtol=2e-4, atol=1e-5)
    np.testing.assert_allclose(ours["accuracies"], theirs["accuracies"], rtol=2e-4, atol=1e-5)
    assert ours["accuracies"][-1][0] > 0.5, ours["accuracies"]  # it learned
    assert list(ours["final"]) == list(theirs["final"])
    for k in theirs["final"]:
        assert ours["final"][k].dtype == np.float32
        np.testing.assert_allclose(ours["final"][k], theirs["final"][k], rtol=1e-3, atol=1e-5, err_msg=k)
    assert ours["scheduler"].get_last_lr() == pytest.approx(theirs["scheduler"].get_last_lr(), rel=1e-12)
