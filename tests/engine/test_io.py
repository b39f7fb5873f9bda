"""minigrad.io: safetensors checkpoints that resume bit-identically, write atomically and never half-load."""

import dataclasses
import json
import os

import numpy as np
import pytest

import minigrad as mg
from minigrad import io, nn
from minigrad.io import CheckpointError
from minigrad.optim import SGD, AdamW, LambdaLR, WarmupCosineLR, clip_grad_norm_


class TinyMLP(nn.Module):
    """A two-layer perceptron with dropout: the dropout masks come from the same Generator as the minibatches."""

    def __init__(self, init_rng, rng, hidden=16):
        super().__init__()
        self.fc1 = nn.Linear(4, hidden, rng=init_rng)
        self.drop = nn.Dropout(0.2, rng=rng)
        self.fc2 = nn.Linear(hidden, 3, rng=init_rng)

    def forward(self, x):
        return self.fc2(self.drop(self.fc1(x).tanh()))


@dataclasses.dataclass
class Config:
    hidden: int = 16
    lr: float = 3e-3
    sizes: tuple = (4, 16, 3)


DATA_RNG = np.random.default_rng(123)
X = DATA_RNG.standard_normal((64, 4)).astype(np.float32)
Y = DATA_RNG.standard_normal((64, 3)).astype(np.float32)


def build(seed):
    """A fresh run: model, AdamW with no decay on biases, warmup-cosine schedule, one Generator for everything."""
    rng = np.random.default_rng(seed)
    model = TinyMLP(np.random.default_rng(seed + 1000), rng)
    named = list(model.named_parameters())
    groups = [{"params": [p for n, p in named if n.endswith("weight")]},
              {"params": [p for n, p in named if n.endswith("bias")], "weight_decay": 0.0}]
    opt = AdamW(groups, lr=3e-3, weight_decay=0.1)
    sched = WarmupCosineLR(opt, warmup_steps=3, total_steps=12, min_lr_ratio=0.1)
    return model, opt, sched, rng


def train(model, opt, sched, rng, steps):
    losses = []
    for _ in range(steps):
        idx = rng.choice(len(X), size=8, replace=False)
        loss = ((model(mg.Tensor(X[idx])) - Y[idx]) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        clip_grad_norm_(model.parameters(), max_norm=0.5)
        opt.step()
        sched.step()
        losses.append(loss.item())
    return losses


def test_resume_is_bit_identical_to_never_stopping(tmp_path):
    straight_model, straight_opt, sched, rng = build(seed=0)
    straight = train(straight_model, straight_opt, sched, rng, 10)

    model, opt, sched, rng = build(seed=0)
    first_half = train(model, opt, sched, rng, 5)
    io.save(tmp_path / "ckpt.safetensors", model, opt, step=5, config=Config(), extra={"losses": first_half},
            rng=rng, scheduler=sched)

    # A new process, in effect: different initial weights and RNG seed, all overwritten by the load.
    model2, opt2, sched2, rng2 = build(seed=99)
    ckpt = io.load(tmp_path / "ckpt.safetensors", model2, opt2, rng=rng2, scheduler=sched2)
    second_half = train(model2, opt2, sched2, rng2, 5)

    assert first_half + second_half == straight  # exact float equality, step by step
    for (name, p), (_, q) in zip(straight_model.named_parameters(), model2.named_parameters()):
        np.testing.assert_array_equal(p.data, q.data, err_msg=name)
        assert q.dtype == np.float32
    for p, q in zip(straight_model.parameters(), model2.parameters()):
        for key in ("exp_avg", "exp_avg_sq"):
            np.testing.assert_array_equal(straight_opt.state[p][key], opt2.state[q][key])
    assert ckpt.step == 5 and ckpt.extra == {"losses": first_half}
    assert ckpt.config == {"hidden": 16, "lr": 3e-3, "sizes": [4, 16, 3]}  # JSON: a tuple comes back a list
    assert ckpt.metadata["format"] == "minigrad.checkpoint"


def test_round_trip_of_every_part(tmp_path):
    model, opt, sched, rng = build(seed=1)
    train(model, opt, sched, rng, 4)
    path = tmp_path / "c.safetensors"
    io.save(path, model, opt, step=4, rng=rng, scheduler=sched)

    ckpt = io.load(path)  # nothing to load into: everything comes back as data
    assert ckpt.model_state.keys() == model.state_dict().keys()
    for name, array in model.state_dict().items():
        np.testing.assert_array_equal(ckpt.model_state[name], array)
    as_json = [{**g, "betas": list(g["betas"])} for g in opt.state_dict()["param_groups"]]
    assert ckpt.optimizer_state["param_groups"] == as_json
    assert ckpt.optimizer_state["state"][0]["step"] == 4
    assert ckpt.scheduler_state == sched.state_dict()
    assert ckpt.rng_state == rng.bit_generator.state

    tensors = io.load_safetensors(path)  # the raw file: names as documented
    assert "model.fc1.weight" in tensors and "optim.0.exp_avg" in tensors and "optim.0.step" not in tensors


def test_rng_state_of_other_bit_generators_round_trips(tmp_path):
    model, *_ = build(seed=0)
    rng = np.random.Generator(np.random.MT19937(5))  # its state holds an array, stored as a JSON list
    rng.random(3)
    io.save(tmp_path / "c.safetensors", model, rng=rng)
    expected = rng.random(4)
    restored = np.random.Generator(np.random.MT19937(0))
    io.load(tmp_path / "c.safetensors", rng=restored)
    np.testing.assert_array_equal(restored.random(4), expected)


def test_tied_weights_stay_tied_after_loading(tmp_path):
    class Tied(nn.Module):
        def __init__(self, seed):
            super().__init__()
            rng = np.random.default_rng(seed)
            self.emb = nn.Embedding(5, 3, rng=rng)
            self.head = nn.Linear(3, 5, bias=False, rng=rng)
            self.head.weight = self.emb.weight

    io.save(tmp_path / "c.safetensors", Tied(0))
    model = Tied(1)
    io.load(tmp_path / "c.safetensors", model)
    assert model.head.weight is model.emb.weight
    np.testing.assert_array_equal(model.emb.weight.data, Tied(0).emb.weight.data)


def test_saving_into_a_missing_directory_names_it(tmp_path):
    model, *_ = build(seed=0)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        io.save(tmp_path / "nope" / "c.safetensors", model)


# --------------------------------------------------------------------------------------
# Raw safetensors files
# --------------------------------------------------------------------------------------


def test_safetensors_round_trip_keeps_dtypes_shapes_and_metadata(tmp_path):
    tensors = {"f32": np.arange(6, dtype=np.float32).reshape(2, 3), "f64": np.array(2.5),
               "i64": np.arange(4), "mask": np.array([True, False]), "empty": np.zeros((0, 3), np.float32),
               "big_endian": np.arange(3, dtype=">f4"), "strided": np.arange(10.0)[::2]}
    io.save_safetensors(tmp_path / "t.safetensors", tensors, {"note": "hi"})
    loaded, meta = io.load_safetensors(tmp_path / "t.safetensors", return_metadata=True)
    assert meta == {"note": "hi"} and loaded.keys() == tensors.keys()
    for name, array in tensors.items():
        assert loaded[name].shape == array.shape
        assert loaded[name].dtype == array.dtype.newbyteorder("=")
        np.testing.assert_array_equal(loaded[name], array)
        assert loaded[name].flags.writeable


def test_save_safetensors_rejects_non_string_metadata(tmp_path):
    with pytest.raises(TypeError, match="metadata must map str to str"):
        io.save_safetensors(tmp_path / "t.safetensors", {"a": np.zeros(2)}, {"step": 3})
    assert not (tmp_path / "t.safetensors").exists()


# --------------------------------------------------------------------------------------
# Atomic writes
# --------------------------------------------------------------------------------------


class CrashingFile:
    """Wraps a real file: writes half of what it is given, then fails, like a full disk or a killed process."""

    def __init__(self, f, error):
        self.f, self.error = f, error

    def write(self, data):
        self.f.write(data[: len(data) // 2])
        raise self.error

    def __getattr__(self, name):
        return getattr(self.f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()


@pytest.mark.parametrize("error", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_a_crash_mid_save_leaves_the_old_checkpoint_intact(tmp_path, monkeypatch, error):
    model, opt, sched, rng = build(seed=0)
    path = tmp_path / "ckpt.safetensors"
    io.save(path, model, opt, step=1)
    good = path.read_bytes()

    train(model, opt, sched, rng, 2)
    real_fdopen = os.fdopen
    monkeypatch.setattr(os, "fdopen", lambda *a, **k: CrashingFile(real_fdopen(*a, **k), error))
    with pytest.raises(type(error)):
        io.save(path, model, opt, step=3)
    monkeypatch.undo()

    assert path.read_bytes() == good
    assert os.listdir(tmp_path) == ["ckpt.safetensors"]  # no temporary file left behind
    assert io.load(path).step == 1


def test_a_crash_before_the_rename_leaves_the_old_checkpoint_intact(tmp_path, monkeypatch):
    model, *_ = build(seed=0)
    path = tmp_path / "ckpt.safetensors"
    io.save(path, model, step=1)

    def failing_fsync(fd):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="Input/output error"):
        io.save(path, model, step=2)
    monkeypatch.undo()
    assert io.load(path).step == 1 and os.listdir(tmp_path) == ["ckpt.safetensors"]


def test_saving_non_json_config_fails_before_writing(tmp_path):
    model, *_ = build(seed=0)
    with pytest.raises(CheckpointError, match="config cannot be stored as JSON"):
        io.save(tmp_path / "c.safetensors", model, config={"activation": np.tanh})
    assert os.listdir(tmp_path) == []


# --------------------------------------------------------------------------------------
# Loading checks everything first, then assigns
# --------------------------------------------------------------------------------------


def rng_state(rng):
    return json.dumps(rng.bit_generator.state, default=np.ndarray.tolist)


def snapshot(model, opt, rng):
    return ([p.data.copy() for p in model.parameters()],
            {id(p): {k: np.array(v) for k, v in s.items()} for p, s in opt.state.items()},
            rng_state(rng))


def assert_unchanged(before, model, opt, rng):
    params, state, saved_rng_state = before
    for p, old in zip(model.parameters(), params):
        np.testing.assert_array_equal(p.data, old)
    assert {id(p) for p in opt.state} == set(state)
    for p, s in opt.state.items():
        for k, v in s.items():
            np.testing.assert_array_equal(v, state[id(p)][k])
    assert rng_state(rng) == saved_rng_state


def test_mismatches_are_listed_together_and_nothing_is_loaded(tmp_path):
    model, opt, sched, rng = build(seed=0)
    train(model, opt, sched, rng, 2)
    io.save(tmp_path / "c.safetensors", model, opt, rng=rng, scheduler=sched)

    class Wider(TinyMLP):
        def __init__(self, init_rng, rng):
            super().__init__(init_rng, rng, hidden=8)
            self.extra = nn.Linear(3, 3, rng=init_rng)

    other = Wider(np.random.default_rng(5), np.random.default_rng(6))
    other_opt = AdamW(other.parameters(), lr=1e-3)
    train(other, other_opt, WarmupCosineLR(other_opt, 1, 5), other.drop.rng, 1)
    other_rng = np.random.Generator(np.random.MT19937(0))
    before = snapshot(other, other_opt, other_rng)

    with pytest.raises(CheckpointError) as err:
        io.load(tmp_path / "c.safetensors", other, other_opt, rng=other_rng)
    message = str(err.value)
    for expected in ["model: fc1.weight: checkpoint has (16, 4) float32, the model has (8, 4) float32",
                     "model: fc1.bias", "model: fc2.weight", "model: missing extra.weight", "model: missing extra.bias",
                     "optimizer: parameter groups differ", "rng: the checkpoint holds PCG64 state",
                     "nothing was loaded"]:
        assert expected in message
    assert "fc2.bias" not in message  # (3,) float32 on both sides: not a problem
    assert_unchanged(before, other, other_opt, other_rng)


def test_dtype_mismatch_is_reported(tmp_path):
    model, *_ = build(seed=0)
    io.save(tmp_path / "c.safetensors", model)
    other, *_ = build(seed=1)
    other.fc2.bias.data = other.fc2.bias.data.astype(np.float64)
    with pytest.raises(CheckpointError, match=r"fc2.bias: checkpoint has \(3,\) float32, the model has \(3,\) float64"):
        io.load(tmp_path / "c.safetensors", other)


def test_strict_false_allows_missing_and_unexpected_names(tmp_path):
    model, *_ = build(seed=0)
    io.save(tmp_path / "c.safetensors", model)

    class Bigger(TinyMLP):
        def __init__(self):
            super().__init__(np.random.default_rng(3), None)
            self.head = nn.Linear(3, 2)

    bigger = Bigger()
    head_before = bigger.head.weight.data.copy()
    with pytest.raises(CheckpointError, match="missing head.weight"):
        io.load(tmp_path / "c.safetensors", bigger)
    io.load(tmp_path / "c.safetensors", bigger, strict=False)
    np.testing.assert_array_equal(bigger.fc1.weight.data, model.fc1.weight.data)
    np.testing.assert_array_equal(bigger.head.weight.data, head_before)


def test_optimizer_kind_and_missing_parts_are_reported(tmp_path):
    model, opt, sched, rng = build(seed=0)
    io.save(tmp_path / "model_only.safetensors", model)
    io.save(tmp_path / "adamw.safetensors", model, opt)

    with pytest.raises(CheckpointError, match="the checkpoint holds AdamW state, the optimizer is SGD"):
        io.load(tmp_path / "adamw.safetensors", model, SGD(model.parameters(), lr=0.1))
    with pytest.raises(CheckpointError) as err:
        io.load(tmp_path / "model_only.safetensors", model, opt, rng=rng, scheduler=sched)
    for part in ["no optimizer state", "no scheduler state", "no RNG state"]:
        assert part in str(err.value)


# --------------------------------------------------------------------------------------
# Damaged files and files that are not checkpoints
# --------------------------------------------------------------------------------------


@pytest.fixture
def saved(tmp_path):
    model, opt, sched, rng = build(seed=0)
    train(model, opt, sched, rng, 1)
    path = tmp_path / "c.safetensors"
    io.save(path, model, opt, step=1, rng=rng)
    fresh, fresh_opt, _, fresh_rng = build(seed=7)
    return path, path.read_bytes(), (fresh, fresh_opt, fresh_rng)


@pytest.mark.parametrize("cut", [0, 5, 100, -1])
def test_truncated_file(saved, cut):
    path, data, (model, opt, rng) = saved
    before = snapshot(model, opt, rng)
    path.write_bytes(data[:cut])
    with pytest.raises(CheckpointError, match="not a readable safetensors file.*truncated"):
        io.load(path, model, opt, rng=rng)
    assert_unchanged(before, model, opt, rng)


def test_flipped_byte_in_the_tensor_data_fails_the_checksum(saved):
    path, data, (model, opt, rng) = saved
    before = snapshot(model, opt, rng)
    damaged = bytearray(data)
    damaged[-3] ^= 0x40  # inside the last tensor's bytes: still a well-formed safetensors file
    path.write_bytes(bytes(damaged))
    assert io.load_safetensors(path)  # the format itself cannot tell
    with pytest.raises(CheckpointError, match="checksum mismatch"):
        io.load(path, model, opt, rng=rng)
    assert_unchanged(before, model, opt, rng)


def test_edited_metadata_fails_the_checksum(saved):
    path, data, _ = saved
    path.write_bytes(data.replace(b'"step":"1"', b'"step":"7"'))
    with pytest.raises(CheckpointError, match="checksum mismatch"):
        io.load(path)


def rewrite_metadata(path, **changes):
    """The checkpoint at ``path`` with metadata entries replaced (raw JSON strings), its checksum made to match:
    a file damaged so that only the loader's own checks can tell."""
    tensors, meta = io.load_safetensors(path, return_metadata=True)
    meta.update(changes)
    meta["sha256"] = io._checksum(tensors, {k: v for k, v in meta.items() if k != "sha256"})
    io.save_safetensors(path, tensors, meta)


@pytest.mark.parametrize("changes, message", [
    ({"step": "[" * 100_000 + "]" * 100_000}, "damaged metadata \\(RecursionError"),
    ({"step": '"seven"'}, "step is 'seven', not an int"),
    ({"optimizer": "[1, 2]"}, "the optimizer entry is not"),
    ({"optimizer": '{"class": "AdamW", "param_groups": [7], "state": {}}'}, "the optimizer entry is not"),
    ({"optimizer": '{"class": "AdamW", "param_groups": [], "state": {"x": {}}}'}, "the optimizer entry is not"),
    ({"scheduler": '"cosine"'}, "the scheduler entry is not"),
    ({"rng": "[1, 2, 3]"}, "the rng entry is a list"),
    ({"rng": '{"bit_generator": "PCG64", "state": {"state": "x", "inc": 1}, "has_uint32": 0, "uinteger": 0}'},
     "rng: the saved PCG64 state cannot be restored"),
])
def test_damaged_metadata_with_a_matching_checksum_is_a_checkpoint_error(saved, changes, message):
    """Every damaged file is the loader's own error, before anything is loaded: never a raw TypeError,
    AttributeError or RecursionError from deep inside it."""
    path, _, (model, opt, rng) = saved
    before = snapshot(model, opt, rng)
    rewrite_metadata(path, **changes)
    with pytest.raises(CheckpointError, match=message):
        io.load(path, model, opt, rng=rng)
    assert_unchanged(before, model, opt, rng)


def test_files_that_are_not_checkpoints(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("these are not the weights you are looking for\n" * 10)
    with pytest.raises(CheckpointError, match="not a readable safetensors file"):
        io.load(text)
    weights = tmp_path / "weights.safetensors"
    io.save_safetensors(weights, {"wte": np.zeros((4, 2), np.float32)})
    with pytest.raises(CheckpointError, match="not a minigrad checkpoint.*load_safetensors"):
        io.load(weights)
    with pytest.raises(FileNotFoundError):
        io.load(tmp_path / "missing.safetensors")


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


@pytest.mark.parametrize("state, message", [
    ({"last_step": "7"}, "last_step: expected a finite number (as this scheduler's 3), got '7'"),
    ({"last_step": -2}, "last_step: expected a whole number >= 0, got -2"),
    ({"last_step": 2.5}, "last_step: expected a whole number >= 0, got 2.5"),
    ({"base_lrs": ["0.1"]}, "base_lrs: expected a list of 1 (finite numbers)"),
    ({"min_lr_ratio": None}, "min_lr_ratio: expected a finite number"),
    ({"total_steps": True}, "total_steps: expected a finite number"),
    # the right kinds, but numbers the schedule cannot run with (warmup == total divides by zero at that step)
    ({"warmup_steps": 10}, "expected whole numbers with 0 <= warmup_steps < total_steps, got 10 and 10"),
    ({"warmup_steps": 2.5}, "got 2.5 and 10"),
    ({"min_lr_ratio": 2.0}, "min_lr_ratio: expected a number in [0, 1], got 2.0"),
    ({"base_lrs": [-0.1]}, "base_lrs: expected learning rates >= 0, got [-0.1]"),
])
def test_a_scheduler_state_with_values_of_the_wrong_kind_is_a_checkpoint_error(tmp_path, state, message):
    """Right keys, wrong values: refused by name before anything is loaded, not a TypeError steps later."""
    model = nn.Linear(2, 2, rng=np.random.default_rng(0))
    opt = SGD(model.parameters(), lr=0.1)
    sched = WarmupCosineLR(opt, warmup_steps=2, total_steps=10)
    for _ in range(3):
        opt.step()
        sched.step()
    path = tmp_path / "c.safetensors"
    io.save(path, model, opt, scheduler=sched)
    saved = json.loads(io.load_safetensors(path, return_metadata=True)[1]["scheduler"])
    rewrite_metadata(path, scheduler=json.dumps({**saved, "state": {**saved["state"], **state}}))
    before = sched.state_dict()
    with pytest.raises(CheckpointError, match="nothing was loaded") as caught:
        io.load(path, model, opt, scheduler=sched)
    assert message in str(caught.value) and sched.state_dict() == before
