"""Module buffers (constant tensors a layer needs) and the public module gradcheck, nn.gradcheck_module."""

from __future__ import annotations

import numpy as np
import pytest
from nn_helpers import randn

import minigrad as mg
from minigrad import io, nn, optim


class Slopes(nn.Module):
    """A layer with a constant per-channel scale (like ALiBi's slopes) and a non-persistent cache."""

    def __init__(self, d: int = 3):
        super().__init__()
        self.proj = nn.Linear(d, d, rng=np.random.default_rng(0))
        self.register_buffer("slopes", mg.tensor(2.0 ** -np.arange(1, d + 1), dtype=np.float32))
        self.register_buffer("positions", np.arange(d))                                   # int64, an ndarray
        self.register_buffer("cache", mg.tensor(np.ones(d, np.float32)), persistent=False)

    def forward(self, x):
        return self.proj(x) * self.slopes


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([Slopes(), Slopes()])
        self.layers[1].slopes = self.layers[0].slopes  # a shared buffer

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def test_buffers_are_listed_by_name_and_are_not_parameters():
    m = Slopes()
    assert [name for name, _ in m.named_buffers()] == ["slopes", "positions", "cache"]
    assert list(m.buffers())[0] is m.slopes
    params = list(m.parameters())
    assert all(b is not p for b in m.buffers() for p in params)
    assert [name for name, _ in m.named_parameters()] == ["proj.weight", "proj.bias"]
    assert not m.slopes.requires_grad
    assert m.positions.dtype == np.int64  # an ndarray is wrapped with its dtype


def test_nested_and_shared_buffers_get_dotted_names_once():
    m = Stack()
    names = [name for name, _ in m.named_buffers()]
    assert names == ["layers.0.slopes", "layers.0.positions", "layers.0.cache", "layers.1.positions",
                     "layers.1.cache"]
    assert len(list(m.named_buffers(remove_duplicate=False))) == 6
    assert [name for name, _ in m.layers[0].named_buffers(prefix="first")][0] == "first.slopes"
    assert list(m.named_buffers(recurse=False)) == []


def test_double_and_float_convert_floating_buffers_and_leave_integer_ones():
    m = Slopes()
    assert m.slopes.dtype == np.float32
    m.double()
    assert m.slopes.dtype == np.float64 and m.cache.dtype == np.float64 and m.positions.dtype == np.int64
    m.float()
    assert m.slopes.dtype == np.float32 and m.cache.dtype == np.float32


def test_state_dict_saves_persistent_buffers_and_load_restores_them():
    m = Slopes()
    state = m.state_dict()
    assert list(state) == ["proj.weight", "proj.bias", "slopes", "positions"]  # not the non-persistent cache
    other = Slopes()
    other.slopes.data = np.zeros(3, np.float32)
    other.load_state_dict(state)
    np.testing.assert_array_equal(other.slopes.data, m.slopes.data)
    assert other.state_dict()["slopes"].data is other.slopes.data  # the buffer's memory, detached


def test_loading_checks_buffers_all_or_nothing():
    m = Slopes()
    state = m.state_dict()
    bad = dict(state, slopes=np.zeros(4, np.float32))
    del bad["positions"]
    before = m.proj.weight.data.copy()
    changed = {k: (v + 1 if v.dtype.kind == "f" else v) for k, v in bad.items()}
    with pytest.raises(nn.StateDictError) as caught:
        m.load_state_dict(changed)
    message = str(caught.value)
    assert "missing: positions" in message and "mismatch: slopes: checkpoint has (4,) float32" in message
    np.testing.assert_array_equal(m.proj.weight.data, before)  # nothing was loaded
    result = m.load_state_dict({k: v for k, v in state.items() if k != "positions"}, strict=False)
    assert result.missing_keys == ["positions"]


def test_a_shared_buffer_is_saved_under_each_name():
    state = Stack().state_dict()
    assert "layers.0.slopes" in state and "layers.1.slopes" in state


def test_assigning_to_a_buffer_name_replaces_the_buffer():
    m = Slopes()
    m.slopes = mg.tensor(np.ones(3))
    assert m._buffers["slopes"] is m.slopes and "slopes" in m.state_dict()
    m.cache = mg.tensor(np.zeros(3))
    assert "cache" not in m.state_dict()  # still not persistent
    with pytest.raises(TypeError, match="buffer 'slopes' can only be given a Tensor"):
        m.slopes = [1.0, 2.0, 3.0]
    m.slopes = nn.Parameter(np.ones(3, np.float32))  # becomes a learned weight instead
    assert "slopes" in dict(m.named_parameters()) and "slopes" not in dict(m.named_buffers())
    del m.cache
    assert "cache" not in dict(m.named_buffers())


def test_register_buffer_refuses_bad_names_and_values():
    m = Slopes()
    with pytest.raises(KeyError, match="already a parameter"):
        m.proj.register_buffer("weight", mg.tensor([1.0]))
    with pytest.raises(KeyError, match="already a submodule"):
        m.register_buffer("proj", mg.tensor([1.0]))
    with pytest.raises(KeyError, match="without dots"):
        m.register_buffer("a.b", mg.tensor([1.0]))
    with pytest.raises(KeyError, match="already an attribute"):
        m.register_buffer("forward", mg.tensor([1.0]))
    with pytest.raises(TypeError, match="must be a Tensor, an ndarray or None, not list"):
        m.register_buffer("extra", [1.0])
    with pytest.raises(TypeError, match="is a Parameter"):
        m.register_buffer("extra", nn.Parameter([1.0]))

    class Early(nn.Module):
        def __init__(self):
            self.register_buffer("x", mg.tensor([1.0]))

    with pytest.raises(RuntimeError, match=r"super\(\)\.__init__\(\) first"):
        Early()


def test_an_optimizer_never_sees_buffers():
    m = Slopes()
    slopes = m.slopes.data.copy()
    opt = optim.SGD(m.parameters(), lr=0.1)
    m(mg.tensor(np.ones((2, 3), np.float32))).sum().backward()
    opt.step()
    np.testing.assert_array_equal(m.slopes.data, slopes)


def test_checkpoints_round_trip_buffers(tmp_path):
    m = Slopes()
    m.slopes.data = np.array([0.5, 0.25, 0.125], np.float32)
    path = tmp_path / "ckpt.safetensors"
    io.save(path, m)
    other = Slopes()
    other.slopes.data = np.zeros(3, np.float32)
    io.load(path, other)
    np.testing.assert_array_equal(other.slopes.data, m.slopes.data)
    np.testing.assert_array_equal(other.positions.data, np.arange(3))

    other.double()  # the buffer's dtype is checked like a parameter's, and nothing is half-loaded
    with pytest.raises(io.CheckpointError, match="slopes: checkpoint has \\(3,\\) float32, the model has \\(3,\\) "
                                                 "float64"):
        io.load(path, other)


# --------------------------------------------------------------------------------------
# nn.gradcheck_module: a module's parameters and inputs, in float64, in one call
# --------------------------------------------------------------------------------------


def test_gradcheck_checks_a_float64_copy_and_leaves_the_module_alone():
    m = Slopes()
    weight = m.proj.weight
    assert nn.gradcheck_module(m, np.ones((2, 3), np.float32))  # float32 inputs and module: checked in float64
    assert m.proj.weight is weight and weight.dtype == np.float32 and m.slopes.dtype == np.float32
    assert weight.grad is None


def test_gradcheck_names_the_parameter_whose_gradient_is_wrong():
    class DropsTheBias(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(np.ones(3))
            self.bias = nn.Parameter(np.ones(3))

        def forward(self, x):
            return x * self.weight + self.bias.detach() * x  # the bias's gradient is lost on purpose

    with pytest.raises(mg.GradcheckError, match=r"nn.gradcheck_module\(DropsTheBias\), parameter 'bias': .*input 2"):
        nn.gradcheck_module(DropsTheBias(), randn(3))


def test_gradcheck_passes_integer_inputs_through_and_takes_a_forward():
    emb = nn.Embedding(5, 3, rng=np.random.default_rng(0))
    ids = np.array([[0, 4, 4]])
    assert nn.gradcheck_module(emb, ids)
    assert nn.gradcheck_module(nn.Linear(3, 2), randn(2, 3), forward=lambda m, x: (m(x) ** 2).sum())


def test_gradcheck_wants_a_module():
    with pytest.raises(TypeError, match="minigrad.gradcheck"):
        nn.gradcheck_module(lambda x: x, randn(3))
