"""Plain-word errors for the habits a PyTorch or NumPy user brings (one regression test each).

minigrad's choices, checked here:
* NumPy's argument names on Tensor methods (axis=, keepdims=); PyTorch's dim=/keepdim= get a hint, not a
  bare "unexpected keyword argument";
* NumPy *functions* on a Tensor (np.sum(t), np.exp(t)) would drop the gradient: they name the Tensor method to
  use; NumPy *operators* (ndarray + t, ndarray < t) work and give Tensors;
* float(t) and int(t) work on one-element tensors, as in PyTorch;
* layers take Tensors (a Python list is an error naming the layer), and optimizers take parameters.
"""

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn, optim


def test_layers_given_a_python_list_say_to_make_a_tensor():
    for layer in (nn.Linear(2, 2), nn.LayerNorm(2), nn.ReLU(), nn.GELU(), nn.RNNCell(2, 2),
                  nn.MultiHeadAttention(2, 1)):
        with pytest.raises(TypeError, match=rf"{type(layer).__name__}\(.*must be a minigrad Tensor, got list; "
                                            r"make one with mg.tensor"):
            layer([[1.0, 2.0]])
    with pytest.raises(TypeError, match="got ndarray"):
        nn.Linear(2, 2)(np.ones((1, 2), np.float32))


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


def test_float_and_int_of_one_element_tensors():
    assert float(mg.tensor([2.5])) == 2.5 and isinstance(float(mg.tensor(2.5)), float)
    assert int(mg.tensor([[3.0]])) == 3 and int(mg.tensor(np.array(7))) == 7
    assert f"{float(mg.tensor(0.25)):.2f}" == "0.25"
    with pytest.raises(TypeError, match=r"float\(\): only a one-element tensor converts to a Python number; this one "
                                        r"has shape \(2,\)"):
        float(mg.tensor([1.0, 2.0]))
    with pytest.raises(TypeError, match=r"int\(\).*shape \(0,\)"):
        int(mg.zeros(0))


@pytest.mark.parametrize("call, hint", [
    (lambda x: x.sum(dim=1, keepdim=True), r"x\.sum\(axis=1, keepdims=True\)"),
    (lambda x: x.softmax(dim=-1), r"x\.softmax\(axis=-1\)"),
    (lambda x: x.mean(dim=0), r"x\.mean\(axis=0\)"),
    (lambda x: x.max(keepdim=True), r"x\.max\(keepdims=True\)"),
    (lambda x: x.log_softmax(dim=1), r"x\.log_softmax\(axis=1\)"),
])
def test_pytorch_argument_names_get_a_hint(call, hint):
    x = mg.tensor([[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(mg.OpError, match=r"minigrad takes NumPy's argument names, axis= and keepdims= \(not "
                                         r"PyTorch's dim= and keepdim=\): " + hint):
        call(x)


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
