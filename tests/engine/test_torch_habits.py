"""PyTorch's spellings that minigrad supports, and the plain-word errors for those it does not.

Each is a habit a PyTorch user brings: zero_, clone, numel, size(), view, f"{loss:.4f}", abs(t),
mg.manual_seed, mg.backward([y1, y2]), mg.stack(dim=...); and x.max(-1), which keeps NumPy's meaning.
"""

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn


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


def test_numpy_names_for_stack_cat_and_split():
    a = mg.ones(2)
    for call, name in ((lambda: mg.stack([a, a], dim=0), "stack"), (lambda: mg.cat([a, a], dim=0), "concatenate"),
                       (lambda: mg.split(a, 2, dim=0), "split")):
        with pytest.raises(TypeError, match=rf"mg.{name} takes NumPy's axis= \(not PyTorch's dim=\): "
                                            rf"mg.{name}\(\.\.\., axis=0\)"):
            call()


def test_max_over_an_axis_keeps_numpys_meaning():
    x = mg.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]])
    v, i = x.max(-1)  # NumPy: the two row maxima (PyTorch: values and indices)
    assert (v.item(), i.item()) == (5.0, 7.0)
    assert x.argmax(-1).tolist() == [1, 0]
    assert "not PyTorch's (values," in mg.Tensor.max.__doc__
