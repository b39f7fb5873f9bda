"""minigrad.utils.data and mg.save / mg.load, without PyTorch.

(Batch by batch against torch.utils.data, and save/load against torch.save/torch.load:
tests/against_torch/test_torch_diff_surface_train.py.)
"""

import io

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn, optim
from minigrad.io import CheckpointError
from minigrad.utils.data import (
    ConcatDataset,
    DataLoader,
    Dataset,
    IterableDataset,
    Subset,
    TensorDataset,
    default_collate,
    random_split,
)


def test_a_training_epoch_over_a_tensor_dataset():
    X, y = mg.randn(10, 3), mg.arange(10)
    loader = DataLoader(TensorDataset(X, y), batch_size=4)
    batches = list(loader)
    assert len(loader) == 3 and [len(b[1]) for b in batches] == [4, 4, 2]
    np.testing.assert_array_equal(np.concatenate([b[0].data for b in batches]), X.data)
    assert isinstance(batches[0], list) and batches[0][1].dtype == np.int64
    assert len(DataLoader(TensorDataset(X, y), batch_size=4, drop_last=True)) == 2


def test_shuffle_gives_every_sample_once_per_pass():
    loader = DataLoader(TensorDataset(mg.arange(9)), batch_size=4, shuffle=True,
                        generator=mg.Generator().manual_seed(0))
    for _ in range(3):
        assert sorted(np.concatenate([b.data for (b,) in loader]).tolist()) == list(range(9))


def test_custom_datasets_collate_and_split():
    class Squares(Dataset):
        def __len__(self):
            return 6

        def __getitem__(self, i):
            return {"x": np.full(2, i, dtype=np.float32), "y": i * i, "name": f"n{i}"}

    batch = next(iter(DataLoader(Squares(), batch_size=3)))
    assert batch["x"].shape == (3, 2) and batch["x"].dtype == np.float32
    np.testing.assert_array_equal(batch["y"].data, [0, 1, 4])
    assert batch["name"] == ["n0", "n1", "n2"]
    parts = random_split(Squares(), [0.5, 0.5], generator=mg.Generator().manual_seed(1))
    assert [len(p) for p in parts] == [3, 3] and isinstance(parts[0], Subset)
    assert sorted(p[i]["y"] for p in parts for i in range(3)) == [0, 1, 4, 9, 16, 25]
    both = Squares() + Squares()
    assert isinstance(both, ConcatDataset) and len(both) == 12 and both[7]["y"] == 1 and both[-1]["y"] == 25


def test_default_collate_types():
    assert default_collate([1.0, 2.0]).dtype == np.float64
    assert default_collate([1, 2]).dtype == np.int64
    assert default_collate([True, False]).dtype == np.bool_
    with pytest.raises(TypeError, match="batch must contain tensors, numpy arrays, numbers, dicts or lists"):
        default_collate([{1, 2}])


def test_iterable_dataset_is_batched_in_its_own_order():
    class Count(IterableDataset):
        def __iter__(self):
            return iter(range(5))

    assert [b.tolist() for b in DataLoader(Count(), batch_size=2)] == [[0, 1], [2, 3], [4]]
    with pytest.raises(ValueError, match="expected unspecified shuffle option"):
        DataLoader(Count(), shuffle=True)


def test_tensor_dataset_refuses_rows_that_do_not_line_up():
    with pytest.raises(ValueError, match=r"Size mismatch between tensors.*\[\(3, 2\), \(4,\)\]"):
        TensorDataset(mg.zeros(3, 2), mg.zeros(4))


def test_save_and_load_round_trip(tmp_path):
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(mg.randn(2, 3)).sum().backward()
    opt.step()
    path = tmp_path / "checkpoint.pt"
    mg.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 4, "note": ("a", 1.5)}, path)
    loaded = mg.load(path)
    assert loaded["epoch"] == 4 and loaded["note"] == ("a", 1.5)
    fresh = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    fresh.load_state_dict(loaded["model"])
    for a, b in zip(model.parameters(), fresh.parameters()):
        np.testing.assert_array_equal(a.data, b.data)
    fresh_opt = optim.SGD(fresh.parameters(), lr=0.5, momentum=0.9)
    fresh_opt.load_state_dict(loaded["optimizer"])
    assert fresh_opt.param_groups[0]["lr"] == 0.1
    assert set(fresh_opt.state) == set(fresh.parameters())


def test_save_refuses_a_module_and_load_refuses_what_is_not_its_file(tmp_path):
    with pytest.raises(TypeError, match=r"whole Linear module; save its weights: mg.save\(model.state_dict\(\), "):
        mg.save(nn.Linear(2, 2), tmp_path / "m.pt")
    assert not list(tmp_path.iterdir())  # nothing written
    (tmp_path / "junk.pt").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00not json")
    with pytest.raises(CheckpointError, match="not a readable safetensors file"):
        mg.load(tmp_path / "junk.pt")
    mg.io.save_safetensors(tmp_path / "plain.safetensors", {"w": np.zeros(2)})
    with pytest.raises(CheckpointError, match=r"not one mg.save wrote; read its tensors with mg.io.load_safetensors"):
        mg.load(tmp_path / "plain.safetensors")


def test_loading_builds_only_data():
    buffer = io.BytesIO()
    mg.save({"w": mg.ones(2), "ids": np.arange(3)}, buffer)
    buffer.seek(0)
    loaded = mg.load(buffer, weights_only=True)
    assert isinstance(loaded["w"], mg.Tensor) and isinstance(loaded["ids"], np.ndarray)
    assert loaded["w"].data.flags.writeable
