"""nn.Module, Parameter and the containers: registration, names, modes, dtype, checkpoints, repr."""

import copy

import numpy as np
import pytest
from nn_helpers import randn

import minigrad as mg
from minigrad import nn
from minigrad.modes import module_scope


class Block(nn.Module):
    def __init__(self, d=4):
        super().__init__()
        self.attn = nn.MultiHeadAttention(d, 2)
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        return self.norm(x + self.attn(x))


class Tiny(nn.Module):
    def __init__(self, vocab=5, d=4, n_blocks=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList([Block(d) for _ in range(n_blocks)])
        self.scale = nn.Parameter(np.ones(d, np.float32))
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.embed.weight  # weight tying: one Parameter under two names

    def forward(self, ids):
        x = self.embed(ids) * self.scale
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def test_parameter_is_a_leaf_tensor_that_requires_grad():
    p = nn.Parameter(np.zeros((2, 3)))
    assert isinstance(p, mg.Tensor) and p.requires_grad and p.is_leaf and p.dtype == np.float64
    assert repr(p).startswith("Parameter(")
    y = (p * 2).sum()
    assert type(y) is mg.Tensor  # ops make plain Tensors, not Parameters
    with pytest.raises(TypeError):
        nn.Parameter(np.arange(3))  # integers cannot require grad


def test_named_parameters_use_dotted_names_in_registration_order():
    names = [name for name, _ in Tiny().named_parameters()]
    per_block = ["attn.q_proj.weight", "attn.q_proj.bias", "attn.k_proj.weight", "attn.k_proj.bias",
                 "attn.v_proj.weight", "attn.v_proj.bias", "attn.out_proj.weight", "attn.out_proj.bias",
                 "norm.weight", "norm.bias"]
    # A module's own parameters come first, then its children's, depth first (as in PyTorch).
    expected = ["scale", "embed.weight"] + [f"blocks.{i}.{n}" for i in range(2) for n in per_block]
    assert names == expected  # head.weight is embed.weight: listed once


def test_tied_weight_is_counted_once_but_saved_under_both_names():
    model = Tiny()
    params = list(model.parameters())
    assert len({id(p) for p in params}) == len(params)
    assert model.num_parameters() == sum(p.size for p in params)
    state = model.state_dict()
    assert "head.weight" in state and "embed.weight" in state
    np.testing.assert_array_equal(state["head.weight"], state["embed.weight"])


def test_modules_children_and_named_modules():
    model = Tiny()
    assert [name for name, _ in model.named_children()] == ["embed", "blocks", "head"]
    assert list(model.children())[1] is model.blocks
    names = [name for name, _ in model.named_modules()]
    assert names[:4] == ["", "embed", "blocks", "blocks.0"]
    assert "blocks.1.attn.out_proj" in names
    assert sum(isinstance(m, nn.Linear) for m in model.modules()) == 2 * 4 + 1


def test_assignment_rules():
    lin = nn.Linear(3, 2)
    lin.bias = None  # removing a parameter
    assert [n for n, _ in lin.named_parameters()] == ["weight"]
    with pytest.raises(TypeError, match="Parameter"):
        lin.weight = mg.Tensor(np.zeros((2, 3), np.float32))  # a plain Tensor would silently stop training
    lin.extra = nn.Linear(2, 2)
    assert "extra.weight" in dict(lin.named_parameters())
    del lin.extra
    assert "extra.weight" not in dict(lin.named_parameters())

    class Forgetful(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(np.zeros(2))  # no super().__init__()

    with pytest.raises(RuntimeError, match=r"super\(\).__init__"):
        Forgetful()


def test_train_eval_reach_every_module_and_switch_dropout():
    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5), nn.Sequential(nn.Dropout(0.5)))
    assert model.eval() is model
    assert not any(m.training for m in model.modules())
    x = mg.Tensor(np.ones((3, 4), np.float32))
    np.testing.assert_array_equal(model[1](x).data, x.data)  # dropout is the identity in eval mode
    model.train()
    assert all(m.training for m in model.modules())
    assert (model[1](x).data == 0).any()


def test_zero_grad_clears_every_gradient():
    model = Tiny()
    model(np.array([[1, 2, 3]])).sum().backward()
    assert all(p.grad is not None for p in model.parameters())
    model.zero_grad()
    assert all(p.grad is None for p in model.parameters())


def test_state_dict_shares_memory_with_the_weights_and_round_trips():
    nn.manual_seed(1)
    a = Tiny()
    nn.manual_seed(2)
    b = Tiny()
    ids = np.array([[0, 4, 2]])
    assert not np.allclose(a(ids).data, b(ids).data)
    state = a.state_dict()
    assert all(not t.requires_grad and t.is_leaf for t in state.values())  # detached, as PyTorch's
    with mg.no_grad():
        state["scale"][:] = 7.0  # the same memory as the buffer: the model sees it
    assert np.all(a.scale.data == 7.0) and a.scale._version == 1
    state = a.state_dict()
    result = b.load_state_dict(state)
    assert result.missing_keys == [] and result.unexpected_keys == []
    np.testing.assert_array_equal(a(ids).data, b(ids).data)
    assert b.head.weight is b.embed.weight  # loading keeps the tie


def test_the_nanogpt_loading_pattern_loads_through_state_dict_and_copy_():
    model = Tiny()
    rng = np.random.default_rng(3)
    weights = {name: rng.standard_normal(t.shape).astype(np.float32) for name, t in Tiny().state_dict().items()}
    weights["head.weight"] = weights["embed.weight"]  # (tied in the model: one weight under two names)
    sd = model.state_dict()
    for k in sd:  # nanoGPT's from_pretrained: copy each weight into the tensor state_dict() handed out
        assert sd[k].shape == weights[k].shape
        with mg.no_grad():
            sd[k].copy_(weights[k])
    for name, t in model.state_dict().items():
        np.testing.assert_array_equal(t.numpy(), weights[name])
    with pytest.raises(RuntimeError, match=r"copy_\(\) on a tensor that requires grad .* outside no_grad"):
        model.embed.weight.copy_(weights["embed.weight"])


def test_copy_broadcasts_and_casts_as_pytorch():
    t = mg.zeros(2, 3)
    t.copy_(mg.tensor([1.0, 2.0, 3.0]))
    assert t.tolist() == [[1.0, 2.0, 3.0]] * 2
    i = mg.tensor(np.zeros(2, np.int64))
    i.copy_(np.array([1.7, -2.7]))  # any cast, as torch's copy_: truncated
    assert i.tolist() == [1, -2] and i.dtype == np.int64
    with pytest.raises(mg.OpError, match=r"copy_\(\): cannot write .* shape \(4,\)"):
        t.copy_(np.ones(4))


def test_load_state_dict_lists_every_problem_and_loads_nothing():
    model = Tiny()
    before = {name: t.numpy().copy() for name, t in model.state_dict().items()}
    state = model.state_dict()
    for name in state:
        state[name] = state[name] + 1.0  # would change every weight if anything were loaded
    del state["scale"]
    state["blocks.0.norm.weight"] = np.ones(5, np.float32)  # wrong shape
    state["blocks.1.norm.bias"] = state["blocks.1.norm.bias"].astype(np.float64)  # wrong dtype
    state["lm_head.weight"] = np.zeros((2, 2), np.float32)  # unexpected
    with pytest.raises(nn.StateDictError) as err:
        model.load_state_dict(state)
    message = str(err.value)
    for fragment in ["4 problem", "missing: scale", "unexpected: lm_head.weight", "blocks.0.norm.weight",
                     "(5,)", "blocks.1.norm.bias", "float64", "nothing was loaded"]:
        assert fragment in message
    after = model.state_dict()
    assert all(np.array_equal(before[n], after[n]) for n in before)


def test_load_state_dict_non_strict_reports_keys_but_still_rejects_bad_shapes():
    model = nn.Linear(3, 2)
    weight = np.full((2, 3), 0.5, np.float32)
    result = model.load_state_dict({"weight": weight, "other": np.zeros(1)}, strict=False)
    assert result == nn.IncompatibleKeys(["bias"], ["other"])
    np.testing.assert_array_equal(model.weight.data, weight)
    with pytest.raises(nn.StateDictError, match="weight"):
        model.load_state_dict({"weight": np.zeros((3, 2), np.float32)}, strict=False)


def test_load_state_dict_accepts_tensors():
    src, dst = nn.Linear(2, 2), nn.Linear(2, 2)
    dst.load_state_dict({name: mg.Tensor(p.data) for name, p in src.named_parameters()})
    np.testing.assert_array_equal(dst.weight.data, src.weight.data)


def test_double_and_float_convert_in_place():
    model = Tiny()
    weight = model.embed.weight
    model(np.array([[1, 2]])).sum().backward()
    assert model.double() is model
    assert model.embed.weight is weight  # an optimizer holding the Parameter still sees it
    assert all(p.dtype == np.float64 and p.grad.dtype == np.float64 for p in model.parameters())
    assert model(np.array([[1, 2]])).dtype == np.float64
    model.float()
    assert all(p.dtype == np.float32 for p in model.parameters())
    with pytest.raises(TypeError):
        model.to(np.int64)


def test_repr_is_a_tree_with_parameter_counts():
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2, bias=False))
    text = repr(model)
    assert text.splitlines() == [
        "Sequential(  # 56 parameters",
        "  (0): Linear(in_features=4, out_features=8, bias=True)  # 40 parameters",
        "  (1): ReLU()",
        "  (2): Linear(in_features=8, out_features=2, bias=False)  # 16 parameters",
        ")",
    ]
    assert model.num_parameters() == 4 * 8 + 8 + 8 * 2
    nested = repr(Tiny())
    assert "    (attn): MultiHeadAttention(" in nested  # children are indented under their parent


def test_call_runs_forward_inside_module_scope():
    inner = nn.Linear(2, 2).double()  # the float64 input needs float64 weights (layers never convert)
    outer = nn.Sequential(inner)
    y = outer(randn(1, 2, requires_grad=True))
    assert [call.module for call in y._scope] == [outer, inner]  # outermost first, for viz clusters
    with module_scope("other"):
        assert [call.module for call in inner(randn(1, 2, requires_grad=True))._scope] == ["other", inner]


def test_containers():
    a, b, c = nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)
    seq = nn.Sequential(a, b, c)
    assert len(seq) == 3 and seq[0] is a and seq[-1] is c and list(seq) == [a, b, c]
    assert isinstance(seq[:2], nn.Sequential) and list(seq[:2]) == [a, b]
    x = randn(5, 2)
    np.testing.assert_array_equal(seq.double()(x).data, c(b(a(x))).data)
    named = nn.Sequential({"first": a, "act": b})
    assert [n for n, _ in named.named_children()] == ["first", "act"]

    layers = nn.ModuleList([a]).extend([c])
    assert len(layers) == 2 and layers[1] is c
    layers[0] = nn.Linear(2, 3)
    assert layers[0] is not a and [n for n, _ in layers.named_parameters()][0] == "0.weight"
    with pytest.raises(TypeError):
        layers.append("not a module")

    d = nn.ModuleDict({"enc": a})
    d["dec"] = c
    assert "dec" in d and list(d) == ["enc", "dec"] and d["enc"] is a and len(d) == 2
    assert [n for n, _ in d.named_parameters()] == ["enc.weight", "enc.bias", "dec.weight", "dec.bias"]
    with pytest.raises(KeyError):
        d["train"] = b  # would hide the method


@pytest.mark.parametrize("name", ["training", "_modules", "_parameters", "_buffers", "keys", "forward", "eval"])
def test_a_name_every_module_keeps_or_a_method_name_is_refused_as_a_submodule_name(name):
    with pytest.raises(KeyError, match=rf"'{name}' cannot be a key: it is (an attribute every Module keeps|a method)"):
        nn.ModuleDict({name: nn.Linear(2, 2)})
    if name == "keys":
        return  # (a method of ModuleDict only)
    with pytest.raises(KeyError, match=rf"cannot register a Linear as '{name}'"):
        nn.Sequential({name: nn.Linear(2, 2)})
    with pytest.raises(KeyError, match=rf"cannot register a Parameter as '{name}'"):
        setattr(nn.Linear(2, 2), name, nn.Parameter(np.zeros(2, np.float32)))


def test_eval_keeps_every_submodule_of_a_module_dict():
    d = nn.ModuleDict({"train_head": nn.Linear(2, 2), "eval_head": nn.Dropout(0.5)})
    d.eval()
    assert list(d) == ["train_head", "eval_head"] and not d["eval_head"].training
    d.train()
    assert len(d) == 2 and d["eval_head"].training


def test_apply_visits_every_module_children_first():
    model = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.Linear(2, 2)))
    seen = []
    model.apply(lambda m: seen.append(type(m).__name__))
    assert seen == ["Linear", "Linear", "Sequential", "Sequential"]


def test_manual_seed_makes_initialisation_reproducible():
    nn.manual_seed(123)
    first = Tiny().state_dict()
    nn.manual_seed(123)
    second = Tiny().state_dict()
    assert all(np.array_equal(first[n], second[n]) for n in first)
    rng_a, rng_b = np.random.default_rng(5), np.random.default_rng(5)
    np.testing.assert_array_equal(nn.Linear(3, 3, rng=rng_a).weight.data, nn.Linear(3, 3, rng=rng_b).weight.data)


def test_deepcopy_makes_independent_parameters_and_keeps_ties():
    model = Tiny()
    clone = copy.deepcopy(model)
    assert clone.head.weight is clone.embed.weight and clone.embed.weight is not model.embed.weight
    assert isinstance(clone.embed.weight, nn.Parameter) and clone.embed.weight.requires_grad
    clone.embed.weight.data += 1.0
    assert not np.allclose(clone.embed.weight.data, model.embed.weight.data)
