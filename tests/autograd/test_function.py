"""mg.autograd.Function against torch.autograd.Function on the same programs: the classes below are written once,
for a module passed in as ``torch`` (PyTorch itself, or minigrad), and run on both. Values, gradients, second
derivatives, what ctx says (needs_input_grad, the gradients backward gets), the refusals of a saved tensor written
in place; then gradcheck/gradgradcheck, the graph pictures, and the errors for misuse."""

import io
import math

import numpy as np
import pytest

import minigrad as mg
from minigrad import viz

torch = pytest.importorskip("torch")


def functions(torch, seen):
    """PyTorch's own examples and a few more, written against ``torch`` (either library); ``seen`` logs what ctx says.

    Returns ``{name: (function of the inputs, number of inputs, the class)}``.
    """

    class LegendrePolynomial3(torch.autograd.Function):  # PyTorch's tutorial "Learning PyTorch with examples"
        @staticmethod
        def forward(ctx, input):
            ctx.save_for_backward(input)
            return 0.5 * (5 * input ** 3 - 3 * input)

        @staticmethod
        def backward(ctx, grad_output):
            input, = ctx.saved_tensors
            return grad_output * 1.5 * (5 * input ** 2 - 1)

    class Exp(torch.autograd.Function):  # PyTorch's docs (torch.autograd.Function): saves its output
        @staticmethod
        def forward(ctx, i):
            result = i.exp()
            ctx.save_for_backward(result)
            return result

        @staticmethod
        def backward(ctx, grad_output):
            result, = ctx.saved_tensors
            return grad_output * result

    class MulConstant(torch.autograd.Function):  # PyTorch's "Extending PyTorch": a number argument, a None gradient
        @staticmethod
        def forward(ctx, tensor, constant):
            seen.append(("MulConstant", ctx.needs_input_grad))
            ctx.constant = constant
            return tensor * constant

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output * ctx.constant, None

    class MulAdd(torch.autograd.Function):  # two tensor inputs, one not requiring grad; needs_input_grad read
        @staticmethod
        def forward(ctx, x, w, flag):
            seen.append(("MulAdd", ctx.needs_input_grad))
            ctx.save_for_backward(x, w)
            return x * w + x

        @staticmethod
        def backward(ctx, g):
            x, w = ctx.saved_tensors
            gx = g * (w + 1) if ctx.needs_input_grad[0] else None
            gw = g * x if ctx.needs_input_grad[1] else None
            return gx, gw, None

    class SinCos(torch.autograd.Function):  # two outputs; the test uses both, or only the first
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.tanh(), x * x

        @staticmethod
        def backward(ctx, g_tanh, g_square):
            x, = ctx.saved_tensors
            seen.append(("SinCos", round(float(g_square.detach().abs().sum()), 10)))
            return g_tanh * (1 - x.tanh() ** 2) + g_square * 2 * x

    class MaxWithIndex(torch.autograd.Function):  # an integer output, marked non-differentiable, saved
        @staticmethod
        def forward(ctx, x):
            index = x.argmax(-1)
            values = x.amax(-1)
            ctx.mark_non_differentiable(index)
            ctx.save_for_backward(index, x)
            return values, index

        @staticmethod
        def backward(ctx, g, g_index):
            index, x = ctx.saved_tensors
            seen.append(("MaxWithIndex", tuple(g_index.shape), round(float(g_index.detach().abs().sum()), 10)))
            hot = (torch.arange(x.shape[-1]) == index.unsqueeze(-1)).to(x.dtype)
            return g.unsqueeze(-1) * hot

    class Cube(torch.autograd.Function):  # PyTorch 2's form: forward without ctx, then setup_context
        @staticmethod
        def forward(x):
            return x ** 3

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, = inputs
            ctx.save_for_backward(x)

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return 3 * g * x ** 2

    return {
        "LegendrePolynomial3": (LegendrePolynomial3.apply, 1, LegendrePolynomial3),
        "Exp": (Exp.apply, 1, Exp),
        "MulConstant": (lambda x: MulConstant.apply(x, 2.5), 1, MulConstant),
        "MulAdd": (lambda x, w: MulAdd.apply(x, w, True), 2, MulAdd),
        "SinCos, both outputs": (lambda x: _product(*SinCos.apply(x)), 1, SinCos),
        "SinCos, first output only": (lambda x: SinCos.apply(x)[0], 1, SinCos),
        "MaxWithIndex": (lambda x: MaxWithIndex.apply(x)[0], 1, MaxWithIndex),
        "Cube": (Cube.apply, 1, Cube),
    }


def _product(a, b):
    return a * b


NAMES = list(functions(mg, []))


def _run(library, name, arrays, create_graph):
    """The function's value, the gradients of sum(out * weights) and (create_graph) of the gradients' weighted sum."""
    seen = []
    fn, n, _ = functions(library, seen)[name]
    inputs = [library.tensor(a, requires_grad=True) for a in arrays[:n]]
    out = fn(*inputs)
    weights = library.tensor(np.linspace(0.5, 1.5, out.numel()).reshape(tuple(out.shape)))
    grads = library.autograd.grad((out * weights).sum(), inputs, create_graph=create_graph)
    as_numpy = (lambda t: t.detach().numpy()) if library is torch else (lambda t: t.numpy())
    second = []
    total = sum((g * g).sum() for g in grads)
    if create_graph and total.requires_grad:  # (MulConstant's gradient is a constant: no second derivative)
        second = [None if s is None else as_numpy(s)
                  for s in library.autograd.grad(total, inputs, allow_unused=True)]
    return as_numpy(out), [as_numpy(g) for g in grads], second, seen


def _arrays(seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((3, 4)), rng.standard_normal((3, 4))]


@pytest.mark.parametrize("name", NAMES)
def test_the_same_function_classes_agree_with_pytorch(name):
    arrays = _arrays()
    got = _run(mg, name, arrays, create_graph=True)
    want = _run(torch, name, arrays, create_graph=True)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
    for g, w in zip(got[1], want[1]):  # first derivatives
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)
    assert len(got[2]) == len(want[2])
    for g, w in zip(got[2], want[2]):  # second: backward's own ops, differentiated
        assert (g is None) == (w is None)
        if g is not None:
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)
    assert got[3] == want[3]  # what ctx said: needs_input_grad, the zeros an unused output got


@pytest.mark.parametrize("name", NAMES)
def test_gradcheck_and_gradgradcheck_accept_a_function(name):
    fn, n, _ = functions(mg, [])[name]
    inputs = [mg.tensor(a, requires_grad=True) for a in _arrays(1)[:n]]
    assert mg.autograd.gradcheck(fn, inputs)
    assert mg.autograd.gradgradcheck(fn, inputs)


def test_float32_stays_float32_and_backward_accumulates_into_grad():
    fn, _, _ = functions(mg, [])["LegendrePolynomial3"]
    x = mg.tensor(_arrays()[0].astype(np.float32), requires_grad=True)
    y = fn(x)
    y.sum().backward()
    assert y.dtype == np.float32 and x.grad.dtype == np.float32
    np.testing.assert_allclose(x.grad.numpy(), 1.5 * (5 * x.numpy() ** 2 - 1), rtol=1e-6)


def test_the_tutorial_training_loop_follows_pytorchs():
    """The LegendrePolynomial3 example of PyTorch's tutorial, its loop as written (300 steps), on both libraries."""

    def train(torch):
        LegendrePolynomial3 = functions(torch, [])["LegendrePolynomial3"][2]
        dtype = torch.float
        x = torch.linspace(-math.pi, math.pi, 2000, dtype=dtype)
        y = torch.tensor(np.sin(np.linspace(-math.pi, math.pi, 2000)).astype(np.float32))
        a = torch.full((), 0.0, dtype=dtype, requires_grad=True)
        b = torch.full((), -1.0, dtype=dtype, requires_grad=True)
        c = torch.full((), 0.0, dtype=dtype, requires_grad=True)
        d = torch.full((), 0.3, dtype=dtype, requires_grad=True)
        losses = []
        for _ in range(300):
            P3 = LegendrePolynomial3.apply
            y_pred = a + b * P3(c + d * x)
            loss = (y_pred - y).pow(2).sum()
            losses.append(loss.item())
            loss.backward()
            with torch.no_grad():
                for p in (a, b, c, d):
                    p -= 5e-6 * p.grad
                    p.grad = None
        return losses, [p.item() for p in (a, b, c, d)]

    got, want = train(mg), train(torch)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-4, atol=1e-6)


# --------------------------------------------------------------------------------------
# ctx.needs_input_grad, non-tensor arguments and outputs, no_grad
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("grad_mode", [True, False])
def test_needs_input_grad_is_pytorchs(grad_mode):
    def run(library):
        seen = []
        fn, _, _ = functions(library, seen)["MulAdd"]
        x = library.tensor(_arrays()[0], requires_grad=True)
        w = library.tensor(_arrays()[1])  # a constant
        with library.set_grad_enabled(grad_mode):
            out = fn(x, w)
            functions(library, seen)["MulAdd"][0](w, x)
        return seen, out.requires_grad

    assert run(mg) == run(torch)
    assert run(mg)[0] == [("MulAdd", (True, False, False)), ("MulAdd", (False, True, False))]  # (no_grad too)


def test_an_integer_output_does_not_require_grad_and_passes_through():
    MaxWithIndex = functions(mg, [])["MaxWithIndex"][2]
    x = mg.tensor(_arrays()[0], requires_grad=True)
    values, index = MaxWithIndex.apply(x)
    assert values.requires_grad and not index.requires_grad
    assert index.dtype == np.int64
    np.testing.assert_array_equal(index.numpy(), x.numpy().argmax(-1))


def test_a_function_nothing_requires_grad_of_records_nothing():
    fn, _, _ = functions(mg, [])["Exp"]
    y = fn(mg.tensor(_arrays()[0]))
    assert not y.requires_grad and y._op is None
    with mg.no_grad():
        y = fn(mg.tensor(_arrays()[0], requires_grad=True))
    assert not y.requires_grad and y._op is None


# --------------------------------------------------------------------------------------
# Saved tensors are version-checked
# --------------------------------------------------------------------------------------


def _written_after_forward(library, which):
    """A Function's saved tensor (an input, its output, or a tensor it read from outside) written in place before
    backward; returns the error's message, or None when backward ran."""
    seen = []
    outside = library.tensor(np.ones(4), requires_grad=True) * 1.0  # a non-leaf, so it may be written

    class Scale(library.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(outside)
            return x * outside

        @staticmethod
        def backward(ctx, g):
            (w,) = ctx.saved_tensors
            return g * w

    x = library.tensor(np.arange(4.0), requires_grad=True)
    h = x * 1.0
    if which == "input":
        w = library.tensor(np.ones(4))  # a constant input, saved
        y = functions(library, seen)["MulAdd"][0](h, w)
        written = w
    elif which == "output":
        y = functions(library, seen)["Exp"][0](h)
        written = y
    elif which == "second output":
        a, b = _square_saved(library).apply(h)
        y, written = a + b, b  # (add saves neither: only SinCos read b)
    else:
        y = Scale.apply(h)
        written = outside
    if library is torch:  # (torch's .data writes are not counted: PyTorch's in-place op under no_grad is)
        with torch.no_grad():
            written.mul_(2.0)
    else:
        written.data *= 2.0  # a write, counted (minigrad/versions.py)
    try:
        y.sum().backward()
    except RuntimeError as err:
        return str(err)
    return None


def _square_saved(library):
    class SinCos(library.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            a, b = x.tanh(), x * x
            ctx.save_for_backward(b)
            return a, b

        @staticmethod
        def backward(ctx, ga, gb):
            (b,) = ctx.saved_tensors
            return ga + gb * b  # (not the derivative: what matters here is that it reads b)

    return SinCos


@pytest.mark.parametrize("which", ["input", "output", "second output", "tensor read from outside"])
def test_a_saved_tensor_written_in_place_is_refused_naming_the_class(which):
    assert _written_after_forward(torch, which) is not None, "PyTorch refuses it too"
    message = _written_after_forward(mg, which)
    assert message is not None
    name = {"input": "MulAdd", "output": "Exp", "second output": "SinCos"}.get(which, "Scale")
    assert name in message and "changed in place" in message


def test_a_tensor_nothing_saved_may_be_written_as_in_pytorch():
    x = mg.tensor(np.arange(4.0), requires_grad=True)
    h = x * 1.0
    y = functions(mg, [])["MulConstant"][0](h)  # saves nothing
    h.data *= 2.0
    y.data *= 2.0
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full(4, 2.5))


# --------------------------------------------------------------------------------------
# The graph: drawn by the class's name, freed by backward
# --------------------------------------------------------------------------------------


def test_the_graph_pictures_name_the_function_by_its_class():
    pytest.importorskip("graphviz")
    x = mg.tensor(_arrays()[0], requires_grad=True)
    y = functions(mg, [])["LegendrePolynomial3"][0](x)
    assert y._op.name == "LegendrePolynomial3"
    listing = io.StringIO()
    viz.print_graph(y.sum(), file=listing)
    assert "LegendrePolynomial3(%0)" in listing.getvalue()
    assert "label=<LegendrePolynomial3>" in viz.draw_graph(y.sum()).source
    a, b = functions(mg, [])["SinCos, both outputs"][2].apply(x)  # several outputs: the node, then its parts
    listing = io.StringIO()
    viz.print_graph(a + b, file=listing)
    assert "SinCos(%0)" in listing.getvalue() and "SinCos.unpack(%1, start=12, stop=24" in listing.getvalue()


def test_backward_frees_the_graph_and_retain_graph_keeps_it():
    fn, _, _ = functions(mg, [])["Exp"]
    x = mg.tensor(_arrays()[0], requires_grad=True)
    y = fn(x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp(x.numpy()))
    with pytest.raises(RuntimeError, match="already freed"):
        y.backward()


# --------------------------------------------------------------------------------------
# Misuse: errors that name the class and say what to write
# --------------------------------------------------------------------------------------


class Twice(mg.autograd.Function):
    @staticmethod
    def forward(ctx, x, k):
        return x * 2 * k

    @staticmethod
    def backward(ctx, g):
        return g * 2  # one gradient, for two arguments


def test_backward_returning_too_few_gradients_names_the_class_and_what_to_return():
    x = mg.tensor(np.ones(3), requires_grad=True)
    with pytest.raises(RuntimeError) as caught:
        Twice.apply(x, 1.0).sum().backward()
    message = str(caught.value)
    assert "Twice.backward returned 1 gradient(s)" in message and "took 2 argument(s) after ctx (x, k)" in message
    assert "return grad_x, None" in message


@pytest.mark.parametrize("returned, words", [
    (lambda g: (g, g), "returned a gradient for argument 1 of forward (k), which is not a Tensor; return None"),
    (lambda g: (g.numpy(), None), "returned a ndarray as the gradient of argument 0"),
    (lambda g: (g[:1, :1].reshape(1), None), "returned a gradient of shape (1,) for argument 0"),
])
def test_a_wrong_gradient_from_backward_names_the_class(returned, words):
    class Wrong(mg.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            return x * k

        @staticmethod
        def backward(ctx, g):
            return returned(g)

    x = mg.tensor(np.ones((2, 3)), requires_grad=True)
    with pytest.raises(RuntimeError) as caught:
        Wrong.apply(x, 1.0).sum().backward()
    assert "Wrong.backward" in str(caught.value) and words in str(caught.value)


def test_extra_trailing_nones_are_accepted_as_in_pytorch():
    class Extra(mg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 3

        @staticmethod
        def backward(ctx, g):
            return g * 3, None, None

    x = mg.tensor(np.ones(3), requires_grad=True)
    Extra.apply(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full(3, 3.0))


def test_a_forward_that_is_not_static_and_takes_self_says_to_make_it_static():
    class NotStatic(mg.autograd.Function):
        def forward(self, ctx, x):
            return x * 2

    with pytest.raises(TypeError) as caught:
        NotStatic.apply(mg.tensor(np.ones(3)))
    message = str(caught.value)
    assert "NotStatic.forward" in message and "not a @staticmethod" in message
    assert "write @staticmethod def forward(ctx, ...)" in message


def test_forward_and_backward_without_staticmethod_work_through_apply_as_in_pytorch():
    def run(library):
        class Double(library.autograd.Function):
            def forward(ctx, x):  # (no @staticmethod: apply calls it on the class, ctx first, as PyTorch does)
                return x * 2

            def backward(ctx, g):
                return g * 2

        x = library.tensor(np.arange(3.0), requires_grad=True)
        Double.apply(x).sum().backward()
        return x.grad.numpy()

    np.testing.assert_array_equal(run(mg), run(torch))


def test_calling_an_instance_says_to_call_apply():
    with pytest.raises(TypeError, match=r"Twice\.apply\(\.\.\.\), with forward and backward as @staticmethod"):
        Twice()(mg.tensor(np.ones(3)), 1.0)


def test_save_for_backward_takes_tensors_and_forward_returns_tensors():
    class SavesANumber(mg.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            ctx.save_for_backward(x, k)
            return x * k

    with pytest.raises(TypeError, match=r"save_for_backward saves Tensors \(or None\), but argument 1 is a float: "
                                        r"keep other values as attributes of ctx"):
        SavesANumber.apply(mg.tensor(np.ones(3)), 2.0)

    class ReturnsNumPy(mg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return np.exp(x.numpy())

    with pytest.raises(TypeError, match=r"ReturnsNumPy.forward returned a NumPy array; return a Tensor"):
        ReturnsNumPy.apply(mg.tensor(np.ones(3)))


def test_a_function_without_backward_says_to_write_one():
    class NoBackward(mg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

    x = mg.tensor(np.ones(3), requires_grad=True)
    with pytest.raises(NotImplementedError, match=r"NoBackward needs a backward .*@staticmethod def backward"):
        NoBackward.apply(x).sum().backward()


def test_a_saved_output_given_a_new_array_through_data_is_refused():
    """``y.data = array`` gives y a new storage (counted as a write, versions.py); Exp's backward would read it."""
    Exp = functions(mg, [])["Exp"][2]
    x = mg.tensor(np.arange(3.0), requires_grad=True)
    y = Exp.apply(x)
    y.data = np.zeros(3)
    with pytest.raises(RuntimeError, match=r"Exp.*changed in place"):
        y.sum().backward()
