"""The habits a PyTorch or NumPy user brings, by subject: what each spelling means here, and the plain-word
errors where minigrad does not take it.

* PyTorch's spellings mean what they mean in PyTorch (positional arguments too): transpose(0, 1), split(64, 2),
  var(0, keepdim=True), max(-1) as (values, indices), integer lists as int64, dtype and device names,
  p.data += ..., ``import minigrad as torch``; NumPy's keywords (axis=, keepdims=, ddof=) keep NumPy's meaning
  (tests/against_torch/test_torch_dialect.py runs the whole table of calls against both);
* random numbers: a Generator, generator=, manual_seed seeding every draw;
* NumPy functions on a Tensor name the method to use; NumPy operators work;
* plain-word errors for layers given lists, optimizers given the model, matmul shapes, out-of-range axes.
"""

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn, optim
from minigrad.nn import functional as F

# --------------------------------------------------------------------------------------
# PyTorch's spellings, with PyTorch's meaning
# --------------------------------------------------------------------------------------

def test_transpose_of_two_dims_swaps_them_as_in_pytorch():
    w = mg.tensor(np.arange(6.0).reshape(2, 3))
    assert w.transpose(0, 1).tolist() == w.numpy().T.tolist()  # (a 2-D tensor used to come back unchanged)
    assert w.transpose(-2, -1).shape == (3, 2) and w.transpose(1, 0).shape == (3, 2)
    k = mg.randn(2, 3, 4, 5)
    assert k.transpose(-2, -1).shape == (2, 3, 5, 4) and k.transpose(1, 2).shape == (2, 4, 3, 5)
    assert k.transpose(0, 2, 1, 3).shape == (2, 4, 3, 5)  # NumPy's permutation, which PyTorch does not have
    assert k.mT.shape == (2, 3, 5, 4) and k.permute(3, 2, 1, 0).shape == (5, 4, 3, 2)


def test_split_with_a_size_cuts_pieces_of_that_size():
    x = mg.randn(2, 3, 192)
    q, k, v = x.split(64, 2)  # nanoGPT's split(n_embd, dim=2), positionally (used to give 64 pieces of width 3)
    assert q.shape == k.shape == v.shape == (2, 3, 64)
    assert [p.shape[-1] for p in x.split(100, dim=-1)] == [100, 92]
    assert [p.shape[-1] for p in x.split([10, 182], -1)] == [10, 182]
    with pytest.raises(TypeError, match=r"write x.split\(n, dim=-1\) for pieces of size n, or x.chunk\(n, -1\)"):
        x.split(3, axis=-1)  # NumPy's np.split (3 parts) or PyTorch's pieces of size 3: reads two ways, refused
    assert [p.shape[-1] for p in x.chunk(3, -1)] == [64, 64, 64]
    assert [p.shape[0] for p in mg.split(mg.arange(7), 3)] == [3, 3, 1]
    assert [p.shape[0] for p in mg.arange(7).chunk(3)] == [3, 3, 1]


def test_var_and_std_spelled_as_pytorch_are_unbiased_over_the_given_dim():
    a = np.random.default_rng(0).standard_normal((5, 3))
    x = mg.tensor(a)
    np.testing.assert_allclose(x.var(0, keepdim=True).data, a.var(0, ddof=1, keepdims=True))  # (used to be refused)
    np.testing.assert_allclose(x.std(0, keepdim=True).data, a.std(0, ddof=1, keepdims=True))
    np.testing.assert_allclose(x.var(0, correction=0).data, a.var(0))
    np.testing.assert_allclose(x.var(1, unbiased=False).data, a.var(1))
    np.testing.assert_allclose(x.var().item(), a.var(ddof=1))
    # PyTorch's aliases axis= and keepdims= keep PyTorch's meaning (they used to mean NumPy's ddof=0)
    np.testing.assert_allclose(x.var(axis=0, keepdims=True).data, a.var(0, ddof=1, keepdims=True))
    np.testing.assert_allclose(x.var(axis=0, keepdim=True).data, x.var(0, keepdims=True).data)
    np.testing.assert_allclose(x.std(axis=1, ddof=0).data, a.std(1))  # NumPy's ddof=: its plain meaning


def test_a_hint_keeps_the_dim_it_was_given():
    x = mg.randn(3, 4)
    with pytest.raises(TypeError, match=r"x\.var\(dim=0, keepdim=True, correction=1\)"):
        x.var(0, keepdim=True, ddof=1, correction=1)
    with pytest.raises(TypeError, match=r"x\.sum\(1, dtype=mg\.float64\)"):
        x.sum(1, np.float64)  # NumPy's positional dtype


def test_pytorch_and_numpy_argument_names_both_work_on_methods_and_functions():
    a = np.random.default_rng(1).standard_normal((2, 3))
    x = mg.tensor(a)
    for got, expected in ((x.sum(dim=1, keepdim=True), a.sum(1, keepdims=True)), (x.mean(dim=0), a.mean(0)),
                          (x.sum(axis=1, keepdims=True), a.sum(1, keepdims=True)),
                          (x.softmax(dim=-1), np.exp(a) / np.exp(a).sum(-1, keepdims=True)),
                          (x.log_softmax(axis=1), a - np.log(np.exp(a).sum(1, keepdims=True))),
                          (F.softmax(x, axis=-1), np.exp(a) / np.exp(a).sum(-1, keepdims=True)),
                          (F.softmax(x, dim=-1), np.exp(a) / np.exp(a).sum(-1, keepdims=True)),
                          (mg.stack([x, x], dim=1), np.stack([a, a], 1)), (mg.cat([x, x], axis=1), np.hstack([a, a])),
                          (x.amax(dim=1, keepdim=True), a.max(1, keepdims=True))):
        np.testing.assert_allclose(got.data, expected)
    with pytest.raises(TypeError, match=r"dim= and axis= name the same thing"):
        x.sum(dim=0, axis=0)


def test_max_over_a_dim_is_values_and_indices():
    x = mg.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]], requires_grad=True)
    v, i = x.max(-1)  # (used to unpack the two row maxima)
    assert v.tolist() == [5.0, 7.0] and i.tolist() == [1, 0] and i.dtype == np.int64
    out = x.min(dim=1, keepdim=True)
    assert out.values.shape == (2, 1) and out.indices.tolist() == [[0], [1]]
    assert x.max().item() == 7.0 and x.max(axis=-1).indices.tolist() == [1, 0]  # axis= is PyTorch's alias too
    assert x.amax(-1).tolist() == [5.0, 7.0]
    x.max(1).values.sum().backward()
    assert x.grad.tolist() == [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]
    assert x.sort(descending=True).indices.tolist() == [[1, 2, 0], [0, 2, 1]]
    assert x.topk(2).values.tolist() == [[5.0, 2.0], [7.0, 3.0]]


def test_integer_lists_make_int64_tensors_that_index():
    ids = mg.tensor([[0, 5, 3]])  # (used to be float32, and the indexing line after it failed)
    assert ids.dtype == mg.int64 == mg.long
    assert mg.tensor([True, False]).dtype == mg.bool and mg.tensor([1.5, 2]).dtype == mg.float32
    assert mg.Tensor([1, 2]).dtype == mg.float32  # the class, as torch.Tensor
    table = mg.randn(6, 2)
    assert table[ids].shape == (1, 3, 2)
    assert ids.float().dtype == mg.float32 and ids.double().dtype == mg.float64 and ids.to(mg.float32).long() \
        .dtype == np.int64


def test_dtype_and_device_names():
    x = mg.zeros(2, 3, dtype=mg.float64, device="cpu")
    assert x.dtype == mg.float64 and x.device == "cpu" and x.device.type == "cpu" and x.to("cpu") is x
    assert x.to("cpu", mg.float32).dtype == np.float32 and x.dim() == 2 and x.nelement() == 6 and x.size(-1) == 3
    with pytest.raises(RuntimeError, match=r"CPU only.*device='cpu'.*continue the same model in PyTorch"):
        x.to("cuda")
    with pytest.raises(RuntimeError, match=r"device='cpu'"):
        mg.randn(2, device="cuda")
    device = "cuda" if mg.cuda.is_available() else "cpu"  # nanoGPT's line
    assert device == "cpu" and mg.zeros(1, device=mg.device(device)).device == "cpu"
    model = nn.Linear(2, 2)
    assert model.to("cpu") is model and model.to(mg.float64).weight.dtype == np.float64


def test_p_data_update_writes_into_the_parameter():
    p = mg.tensor([1.0, 2.0], requires_grad=True)
    (p * p).sum().backward()
    p.data += -0.1 * p.grad  # every makemore notebook's update line (used to raise and suggest t.add)
    assert p.tolist() == pytest.approx([0.8, 1.6]) and p.requires_grad and p.is_leaf
    q = mg.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"p\.data \+= value: the value requires grad"):
        p.data += q * 2


def test_import_minigrad_as_torch_reaches_its_modules():
    import minigrad as torch

    assert torch.nn.Linear is nn.Linear and torch.nn.functional.softmax is F.softmax
    assert torch.optim.AdamW is optim.AdamW and torch.nn.utils.clip_grad_norm_ is optim.clip_grad_norm_
    assert torch.no_grad is mg.no_grad
    for name in ("tanh", "sqrt", "exp", "log", "log10", "tril", "triu", "where", "allclose", "isclose",
                 "from_numpy", "randint", "randperm", "multinomial", "manual_seed", "Generator"):
        assert callable(getattr(torch, name)), name
    a = np.arange(3.0)
    shared = torch.from_numpy(a)
    a[0] = 7.0
    assert shared[0].item() == 7.0  # shares the array's memory, as torch.from_numpy
    assert torch.allclose(torch.tanh(mg.tensor([0.5])), mg.tensor([np.tanh(0.5)]))


def test_help_on_a_call_form_leads_to_its_op():
    import inspect

    assert "read by ``minigrad.dialect.reductions.var``, a form of the op ``var`` (minigrad.ops.var)" \
        in mg.Tensor.var.__doc__
    assert inspect.getsource(mg.Tensor.transpose).startswith("@op()\nclass transpose:")
    assert "split_size_or_sections" in str(inspect.signature(mg.Tensor.split))


def test_clone_is_a_recorded_copy():
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    c = x.clone()
    assert c is not x and c.data is not x.data and c.dtype == x.dtype and c._op is not None
    with mg.no_grad():
        c2 = x.clone()
    c2 += 1.0  # a copy outside the graph: x is unchanged
    assert x.tolist() == [1.0, 2.0]
    (c * c).sum().backward()
    assert x.grad.tolist() == [2.0, 4.0]


def test_numel_size_and_view():
    t = mg.zeros(3, 4)
    assert t.numel() == 12 and t.size == 12 and isinstance(t.size, int)  # NumPy's t.size: an int
    assert t.size() == (3, 4) and t.size(0) == 3 and t.size(-1) == 4  # PyTorch's t.size(): the shape
    with pytest.raises(IndexError, match=r"size\(2\): dimension out of range for a tensor of shape \(3, 4\)"):
        t.size(2)
    x = mg.tensor(np.arange(6.0), requires_grad=True)
    v = x.view(2, 3)
    assert v.shape == (2, 3) and v._op.name == "reshape"
    v.sum().backward()
    assert x.grad.tolist() == [1.0] * 6


def test_format_and_abs():
    loss = mg.tensor(0.123456)
    assert f"{loss:.4f}" == "0.1235" and f"{loss:>8.2f}" == "    0.12"
    assert f"{mg.tensor([1.0, 2.0])}" == str(mg.tensor([1.0, 2.0]))  # no spec: str(t)
    with pytest.raises(TypeError, match=r"only a one-element tensor converts.*shape \(2,\)"):
        f"{mg.tensor([1.0, 2.0]):.3f}"
    x = mg.tensor([-1.0, 2.0], requires_grad=True)
    y = abs(x)
    assert y.tolist() == [1.0, 2.0] and y._op.name == "abs"


def test_backward_of_several_outputs_sums_their_gradients():
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    mg.backward([(x * x).sum(), (3.0 * x).sum()])
    assert x.grad.tolist() == [5.0, 7.0]
    x.grad = None
    y1, y2 = x * x, x * 3.0
    mg.backward([y1, y2], [mg.tensor([1.0, 0.0]), mg.tensor([0.0, 1.0])])
    assert x.grad.tolist() == [2.0, 3.0]
    with pytest.raises(ValueError, match=r"backward: gradient has 1 entries but there are 2 outputs"):
        mg.backward([x * x, x * 3.0], [mg.tensor([1.0, 0.0])])
    with pytest.raises(TypeError, match=r"backward: tensors\[1\] is a float, not a Tensor"):
        mg.backward([x.sum(), 2.0])


def test_grad_checks_the_count_and_types_of_its_arguments():
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    y1, y2 = x * x, x * 3.0
    g1 = mg.tensor([1.0, 1.0])
    with pytest.raises(ValueError, match=r"grad: grad_outputs has 1 entries but there are 2 outputs"):
        mg.grad([y1, y2], [x], grad_outputs=[g1])  # used to drop y2 silently
    with pytest.raises(TypeError, match=r"grad: grad_outputs must be a list with one entry per output \(2\)"):
        mg.grad([y1, y2], [x], grad_outputs=g1)
    with pytest.raises(TypeError, match=r"grad: inputs\[0\] is a ndarray, not a Tensor"):
        mg.grad(y1.sum(), [x.numpy()])
    with pytest.raises(TypeError, match=r"grad: outputs must be a Tensor or a non-empty list of Tensors, got an "
                                        r"empty list"):
        mg.grad([], [x])
    (gx,) = mg.grad([y1, y2], [x], grad_outputs=[g1, g1])
    assert gx.tolist() == [5.0, 7.0]


# --------------------------------------------------------------------------------------
# Random numbers
# --------------------------------------------------------------------------------------

def test_a_generator_makes_every_draw_repeat():
    def draws(g):
        return (mg.randn(3, generator=g).tolist(), mg.rand(2, generator=g).tolist(),
                mg.randint(0, 10, (4,), generator=g).tolist(), mg.randperm(5, generator=g).tolist(),
                mg.multinomial(mg.tensor([0.2, 0.5, 0.3]), 4, replacement=True, generator=g).tolist(),
                mg.zeros(3).normal_(0.0, 1.0, generator=g).tolist())

    assert draws(mg.Generator().manual_seed(42)) == draws(mg.Generator().manual_seed(42))
    assert draws(mg.Generator().manual_seed(42)) != draws(mg.Generator().manual_seed(43))
    assert mg.randint(0, 10, (4,)).dtype == mg.int64 and mg.randint(5, (2, 2)).shape == (2, 2)


def test_manual_seed_seeds_every_draw_minigrad_makes():
    def run():
        mg.manual_seed(7)
        layer = nn.Linear(2, 2)
        return (mg.randn(2).tolist(), mg.randint(0, 9, (3,)).tolist(), mg.multinomial(mg.ones(4), 2).tolist(),
                layer.weight.tolist(), F.dropout(mg.ones(8), 0.5).tolist())

    assert run() == run()
    assert isinstance(mg.manual_seed(0), mg.Generator)
    g = mg.Generator().manual_seed(3)
    assert nn.Linear(2, 2, rng=g).weight.tolist() == nn.Linear(2, 2, rng=mg.Generator().manual_seed(3)).weight.tolist()


def test_manual_seed_seeds_randn_and_the_layers():
    mg.manual_seed(5)
    a, layer_a = mg.randn(3), nn.Linear(2, 2)
    mg.manual_seed(5)
    b, layer_b = mg.randn(3), nn.Linear(2, 2)
    assert a.tolist() == b.tolist()
    assert layer_a.weight.tolist() == layer_b.weight.tolist()
    nn.manual_seed(5)  # PyTorch's other home for it: the same generator
    assert mg.randn(3).tolist() == a.tolist()
    assert mg.randn(2, rng=np.random.default_rng(1)).tolist() == mg.randn(2, rng=np.random.default_rng(1)).tolist()


# --------------------------------------------------------------------------------------
# NumPy's functions and operators meeting a Tensor
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["sum", "mean", "max", "min", "var", "reshape", "transpose", "clip"])
def test_numpy_functions_with_a_tensor_method_point_to_it(name):
    t = mg.tensor([[1.0, 2.0], [3.0, 4.0]])
    args = {"reshape": ((4,),), "transpose": (), "clip": (0.0, 1.0)}.get(name, ())
    with pytest.raises(TypeError, match=rf"np\.{name}\(\) was given a minigrad Tensor; use t\.{name}\(\.\.\.\) "
                                        r"instead, which records the gradient \(or np\." + name + r"\(t\.numpy\(\)\)"):
        getattr(np, name)(t, *args)


@pytest.mark.parametrize("ufunc, method", [(np.exp, "exp"), (np.log, "log"), (np.tanh, "tanh"), (np.sqrt, "sqrt"),
                                           (np.abs, "abs"), (np.maximum, "mg.maximum")])
def test_numpy_ufuncs_point_to_the_method(ufunc, method):
    t = mg.tensor([1.0, 2.0])
    args = (t, t) if ufunc is np.maximum else (t,)
    with pytest.raises(TypeError, match=rf"np\.{ufunc.__name__}\(\) was given a minigrad Tensor; use "
                                        rf"{'t.' + method + '(...)' if '.' not in method else method}"):
        ufunc(*args)


def test_numpy_operators_and_plain_functions_still_work():
    t = mg.tensor([1.0, 2.0], requires_grad=True)
    a = np.array([3.0, 1.0], dtype=np.float32)
    for out, expected in ((a + t, [4, 3]), (a - t, [2, -1]), (a * t, [3, 2]), (a / t, [3, 0.5]), (a ** t, [3, 1])):
        assert isinstance(out, mg.Tensor) and out.requires_grad
        np.testing.assert_allclose(out.data, expected)
    assert isinstance(a @ t, mg.Tensor) and (a @ t).item() == 5.0
    np.testing.assert_array_equal((a < t).data, [False, True])
    np.testing.assert_array_equal((a == t).data, [False, False])
    (a * t).sum().backward()
    np.testing.assert_array_equal(t.grad.data, a)
    plain = mg.tensor([1.0, np.inf])
    assert np.allclose(mg.tensor([1.0, 2.0]), [1.0, 2.0])  # functions with no Tensor method see the array
    np.testing.assert_array_equal(np.isfinite(plain), [True, False])
    with pytest.raises(TypeError, match=r"requires grad; NumPy cannot record its gradient.*t.detach\(\).numpy\(\)"):
        np.isfinite(t)


# --------------------------------------------------------------------------------------
# Plain-word errors
# --------------------------------------------------------------------------------------

def test_float_and_int_of_one_element_tensors():
    assert float(mg.tensor([2.5])) == 2.5 and isinstance(float(mg.tensor(2.5)), float)
    assert int(mg.tensor([[3.0]])) == 3 and int(mg.tensor(np.array(7))) == 7
    assert f"{float(mg.tensor(0.25)):.2f}" == "0.25"
    with pytest.raises(TypeError, match=r"float\(\): only a one-element tensor converts to a Python number; this one "
                                        r"has shape \(2,\)"):
        float(mg.tensor([1.0, 2.0]))
    with pytest.raises(TypeError, match=r"int\(\).*shape \(0,\)"):
        int(mg.zeros(0))


def test_layers_given_a_python_list_say_to_make_a_tensor():
    for layer in (nn.Linear(2, 2), nn.LayerNorm(2), nn.ReLU(), nn.GELU(), nn.RNNCell(2, 2),
                  nn.MultiHeadAttention(2, 1)):
        with pytest.raises(TypeError, match=rf"{type(layer).__name__}\(.*must be a minigrad Tensor, got list; "
                                            r"make one with mg.tensor"):
            layer([[1.0, 2.0]])
    with pytest.raises(TypeError, match="got ndarray"):
        nn.Linear(2, 2)(np.ones((1, 2), np.float32))


def test_optimizer_given_the_model_says_pass_parameters():
    model = nn.Sequential(nn.Linear(2, 2))
    for make in (optim.Adam, optim.AdamW, optim.SGD):
        with pytest.raises(TypeError, match=rf"{make.__name__}: got the module Sequential itself; pass its "
                                            rf"parameters: {make.__name__}\(model\.parameters\(\), \.\.\.\)"):
            make(model)
    optim.Adam(model.parameters())  # the right call works


def test_matmul_message_is_plain():
    with pytest.raises(mg.OpError) as err:
        mg.ones(2, 3) @ mg.ones(2, 3)
    message = str(err.value)
    assert message.startswith("matmul: the inner sizes differ: a's last axis has 3, b's second-to-last axis has 2")
    assert "matmul: matmul" not in message and "gufunc" not in message
    with pytest.raises(mg.OpError, match="b's only axis has 4"):
        mg.ones(3) @ mg.ones(4)
    with pytest.raises(mg.OpError, match=r"batch axes \(2,\) and \(3,\) do not broadcast"):
        mg.ones(2, 2, 3) @ mg.ones(3, 3, 4)
    with pytest.raises(mg.OpError, match="at least one axis"):
        mg.tensor(2.0) @ mg.ones(3)


def test_out_of_range_axes_never_wrap_around():
    # _axes used to take axis % ndim, so x.sum(axis=-3) on a 2-D tensor silently summed the last axis.
    x = mg.ones(2, 3)
    for axis in (-3, 2, (0, 2), (0, -2)):
        with pytest.raises(mg.OpError, match="sum: (axis|duplicate value in .axis)"):
            x.sum(axis=axis)
    with pytest.raises(mg.OpError, match="mean: axis -3 is out of (range|bounds)"):
        x.mean(axis=-3)


@pytest.mark.parametrize("name", ["sum", "mean", "amax", "amin", "logsumexp", "prod"])
def test_a_reduction_of_a_zero_d_tensor_over_dim_0_or_the_tuple_of_it_is_its_value(name):
    # PyTorch takes dim=0, dim=-1 and dim=(0,) on a 0-d tensor (one value: the reduction is that value),
    # under its alias axis= too; dim 1 is out of range.
    x = mg.tensor(np.float32(1.5), requires_grad=True)
    for dim in (0, -1, (0,), (-1,)):
        for keepdim in (False, True):
            out = getattr(x, name)(dim, keepdim=keepdim)
            assert out.shape == () and out.dtype == np.float32 and out.item() == 1.5, (dim, keepdim)
    (g,) = mg.grad(getattr(x, name)(dim=(0,)), [x])
    assert g.item() == 1.0
    assert getattr(x, name)(axis=(0,)).item() == 1.5
    with pytest.raises(mg.OpError, match=f"{name}: dim 1 is out of range for 0 dims"):
        getattr(x, name)(axis=1)
