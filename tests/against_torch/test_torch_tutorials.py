"""Well-known PyTorch beginner material, in our own words, run with only its import lines changed.

Each program below is one source string in the style of a tutorial or notebook learners bring: "Learning
PyTorch with Examples" (a cubic fit of sin by hand, with autograd, with ``nn``, with an optimizer, with a
``Module`` of one's own, with dynamic control flow, with an ``autograd.Function``), the "Tensors",
"Automatic differentiation" and "Datasets & DataLoaders" tutorials, "Build the neural network" with
"Optimization loop", "What is torch.nn really?", a character-RNN name classifier, the NLP tutorials (a
bag-of-words classifier, n-gram embeddings, an LSTM tagger), a beginner course's notebooks (tensor
fundamentals, a workflow with save/load, classification), and Karpathy's micrograd (its check against
PyTorch, an MLP with a max-margin loss), makemore parts 1 to 5 and "Let's build GPT". Each is our own code
in the spellings those sources use, not a copy of them.

The harness runs each source twice: as written (``import torch``...) and with every import line pointed at
minigrad (``import minigrad as torch``, ``import minigrad.nn as nn``...), nothing else changed. Data and
starting weights come from NumPy (``start``, ``data``...): the two libraries' random streams differ by
design, so a program draws with ``torch.randn``/``torch.randint``/``torch.multinomial`` where the tutorial
does and then, where the values must agree, takes the harness's draws. The programs leave what they computed
in ``result``; the two runs must agree on every number to float32 rounding, on every shape, dtype, flag
and name there (of a draw, ``result`` holds what does not depend on the stream: its shape, dtype, sum).
"""

from __future__ import annotations

import re
import textwrap

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

PROGRAMS: dict[str, str] = {}


def program(name: str, source: str) -> None:
    PROGRAMS[name] = textwrap.dedent(source)


def to_minigrad(source: str) -> str:
    """``source`` with its import lines pointed at minigrad, and nothing else changed."""
    def port(line: str) -> str:
        if not re.match(r"\s*(import|from)\s+torch\b", line):
            return line
        if re.fullmatch(r"\s*import torch\s*", line):
            return line.replace("import torch", "import minigrad as torch")
        return re.sub(r"\btorch\b", "minigrad", line, count=1)
    return "\n".join(port(line) for line in source.split("\n"))


# --------------------------------------------------------------------------------------
# Learning PyTorch with Examples: y = a + b x + c x^2 + d x^3 fitted to sin(x), six ways
# --------------------------------------------------------------------------------------

program("cubic_fit_with_tensors_and_a_hand_written_backward", """
    import math
    import torch

    dtype = torch.float
    device = torch.device("cpu")

    x = torch.linspace(-math.pi, math.pi, 2000, device=device, dtype=dtype)
    y = torch.sin(x)

    a = torch.randn((), device=device, dtype=dtype)
    b = torch.randn((), device=device, dtype=dtype)
    a, b, c, d = (torch.tensor(v, device=device, dtype=dtype) for v in start)  # the harness's draws

    learning_rate = 1e-6
    losses = []
    for t in range(2000):
        y_pred = a + b * x + c * x ** 2 + d * x ** 3
        loss = (y_pred - y).pow(2).sum().item()
        if t % 100 == 99:
            losses.append(loss)
            print(t, loss)

        grad_y_pred = 2.0 * (y_pred - y)
        grad_a = grad_y_pred.sum()
        grad_b = (grad_y_pred * x).sum()
        grad_c = (grad_y_pred * x ** 2).sum()
        grad_d = (grad_y_pred * x ** 3).sum()

        a -= learning_rate * grad_a
        b -= learning_rate * grad_b
        c -= learning_rate * grad_c
        d -= learning_rate * grad_d

    print(f'Result: y = {a.item():.4f} + {b.item():.4f} x + {c.item():.4f} x^2 + {d.item():.4f} x^3')
    result = dict(losses=losses, coefficients=[a.item(), b.item(), c.item(), d.item()], dtype=str(a.dtype),
                  shape=tuple(y_pred.shape))
""")

program("cubic_fit_with_autograd", """
    import math
    import torch

    dtype = torch.float
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.set_default_device(device)

    x = torch.linspace(-math.pi, math.pi, 2000, dtype=dtype)
    y = torch.sin(x)

    a, b, c, d = (torch.tensor(v, dtype=dtype, requires_grad=True) for v in start)

    learning_rate = 1e-6
    losses = []
    for t in range(2000):
        y_pred = a + b * x + c * x ** 2 + d * x ** 3
        loss = (y_pred - y).pow(2).sum()
        if t % 100 == 99:
            losses.append(loss.item())
        loss.backward()
        with torch.no_grad():
            a -= learning_rate * a.grad
            b -= learning_rate * b.grad
            c -= learning_rate * c.grad
            d -= learning_rate * d.grad

            a.grad = None
            b.grad = None
            c.grad = None
            d.grad = None

    print(f'Result: y = {a.item():.4f} + {b.item():.4f} x + {c.item():.4f} x^2 + {d.item():.4f} x^3')
    result = dict(losses=losses, coefficients=[a.item(), b.item(), c.item(), d.item()],
                  leaf=[a.is_leaf, a.requires_grad, loss.requires_grad, a.grad is None])
""")

program("cubic_fit_with_an_autograd_function", """
    import math
    import torch


    class LegendrePolynomial3(torch.autograd.Function):
        @staticmethod
        def forward(ctx, input):
            ctx.save_for_backward(input)
            return 0.5 * (5 * input ** 3 - 3 * input)

        @staticmethod
        def backward(ctx, grad_output):
            input, = ctx.saved_tensors
            return grad_output * 1.5 * (5 * input ** 2 - 1)


    dtype = torch.float
    device = torch.device("cpu")
    x = torch.linspace(-math.pi, math.pi, 2000, device=device, dtype=dtype)
    y = torch.sin(x)

    a = torch.full((), 0.0, device=device, dtype=dtype, requires_grad=True)
    b = torch.full((), -1.0, device=device, dtype=dtype, requires_grad=True)
    c = torch.full((), 0.0, device=device, dtype=dtype, requires_grad=True)
    d = torch.full((), 0.3, device=device, dtype=dtype, requires_grad=True)

    learning_rate = 5e-6
    losses = []
    for t in range(2000):
        P3 = LegendrePolynomial3.apply
        y_pred = a + b * P3(c + d * x)
        loss = (y_pred - y).pow(2).sum()
        if t % 100 == 99:
            losses.append(loss.item())
        loss.backward()
        with torch.no_grad():
            a -= learning_rate * a.grad
            b -= learning_rate * b.grad
            c -= learning_rate * c.grad
            d -= learning_rate * d.grad
            a.grad = None
            b.grad = None
            c.grad = None
            d.grad = None

    print(f'Result: y = {a.item():.4f} + {b.item():.4f} * P3({c.item():.4f} + {d.item():.4f} x)')
    result = dict(losses=losses, coefficients=[a.item(), b.item(), c.item(), d.item()])
""")

program("cubic_fit_with_nn_sequential_and_manual_updates", """
    import math
    import torch

    x = torch.linspace(-math.pi, math.pi, 2000)
    y = torch.sin(x)

    p = torch.tensor([1, 2, 3])
    xx = x.unsqueeze(-1).pow(p)  # (2000, 3), float32 as x is

    model = torch.nn.Sequential(
        torch.nn.Linear(3, 1),
        torch.nn.Flatten(0, 1)
    )
    model.load_state_dict({"0.weight": torch.tensor(weight), "0.bias": torch.tensor(bias)})
    loss_fn = torch.nn.MSELoss(reduction='sum')

    learning_rate = 1e-6
    losses = []
    for t in range(2000):
        y_pred = model(xx)
        loss = loss_fn(y_pred, y)
        if t % 100 == 99:
            losses.append(loss.item())
        model.zero_grad()
        loss.backward()
        with torch.no_grad():
            for param in model.parameters():
                param -= learning_rate * param.grad

    linear_layer = model[0]
    print(f'Result: y = {linear_layer.bias.item():.4f} + {linear_layer.weight[:, 0].item():.4f} x + '
          f'{linear_layer.weight[:, 1].item():.4f} x^2 + {linear_layer.weight[:, 2].item():.4f} x^3')
    result = dict(losses=losses, xx=(tuple(xx.shape), str(xx.dtype)), weight=linear_layer.weight.detach().numpy(),
                  bias=linear_layer.bias.item())
""")

program("cubic_fit_with_an_optimizer", """
    import math
    import torch

    x = torch.linspace(-math.pi, math.pi, 2000)
    y = torch.sin(x)
    p = torch.tensor([1, 2, 3])
    xx = x.unsqueeze(-1).pow(p)

    model = torch.nn.Sequential(torch.nn.Linear(3, 1), torch.nn.Flatten(0, 1))
    model.load_state_dict({"0.weight": torch.tensor(weight), "0.bias": torch.tensor(bias)})
    loss_fn = torch.nn.MSELoss(reduction='sum')

    learning_rate = 1e-3
    optimizer = torch.optim.RMSprop(model.parameters(), lr=learning_rate)
    losses = []
    for t in range(1000):
        y_pred = model(xx)
        loss = loss_fn(y_pred, y)
        if t % 100 == 99:
            losses.append(loss.item())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    linear_layer = model[0]
    result = dict(losses=losses, weight=linear_layer.weight.detach().numpy(), bias=linear_layer.bias.item())
""")

program("cubic_fit_with_a_module_of_ones_own", """
    import math
    import torch


    class Polynomial3(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Parameter(torch.randn(()))
            self.b = torch.nn.Parameter(torch.randn(()))
            self.c = torch.nn.Parameter(torch.randn(()))
            self.d = torch.nn.Parameter(torch.randn(()))

        def forward(self, x):
            return self.a + self.b * x + self.c * x ** 2 + self.d * x ** 3

        def string(self):
            return (f'y = {self.a.item():.4f} + {self.b.item():.4f} x + {self.c.item():.4f} x^2 + '
                    f'{self.d.item():.4f} x^3')


    x = torch.linspace(-math.pi, math.pi, 2000)
    y = torch.sin(x)

    model = Polynomial3()
    with torch.no_grad():
        for param, value in zip(model.parameters(), start):
            param.copy_(torch.tensor(value))  # the harness's draws

    criterion = torch.nn.MSELoss(reduction='sum')
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-6)
    losses = []
    for t in range(2000):
        y_pred = model(x)
        loss = criterion(y_pred, y)
        if t % 100 == 99:
            losses.append(loss.item())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    print(f'Result: {model.string()}')
    result = dict(losses=losses, names=[n for n, _ in model.named_parameters()],
                  coefficients=[p.item() for p in model.parameters()])
""")

program("cubic_fit_with_dynamic_control_flow", """
    import random
    import math
    import torch


    class DynamicNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Parameter(torch.tensor(start[0]))
            self.b = torch.nn.Parameter(torch.tensor(start[1]))
            self.c = torch.nn.Parameter(torch.tensor(start[2]))
            self.d = torch.nn.Parameter(torch.tensor(start[3]))
            self.e = torch.nn.Parameter(torch.tensor(0.0))

        def forward(self, x):
            y = self.a + self.b * x + self.c * x ** 2 + self.d * x ** 3
            for exp in range(4, random.randint(4, 6)):
                y = y + self.e * x ** exp
            return y


    random.seed(0)
    x = torch.linspace(-math.pi, math.pi, 2000)
    y = torch.sin(x)
    model = DynamicNet()
    criterion = torch.nn.MSELoss(reduction='sum')
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-8, momentum=0.9)
    losses = []
    for t in range(1000):
        y_pred = model(x)
        loss = criterion(y_pred, y)
        if t % 100 == 99:
            losses.append(loss.item())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    result = dict(losses=losses, coefficients=[p.item() for p in model.parameters()])
""")


# --------------------------------------------------------------------------------------
# The Tensors and autograd tutorials
# --------------------------------------------------------------------------------------

program("tensors_tutorial", """
    import torch
    import numpy as np

    data = [[1, 2], [3, 4]]
    x_data = torch.tensor(data)
    np_array = np.array(data)
    x_np = torch.from_numpy(np_array)

    x_ones = torch.ones_like(x_data)
    x_rand = torch.rand_like(x_data, dtype=torch.float)
    print(f"Ones Tensor: \\n {x_ones} \\n")

    shape = (2, 3,)
    rand_tensor = torch.rand(shape)
    ones_tensor = torch.ones(shape)
    zeros_tensor = torch.zeros(shape)

    tensor = torch.rand(3, 4)
    print(f"Shape of tensor: {tensor.shape}")
    print(f"Datatype of tensor: {tensor.dtype}")
    print(f"Device tensor is stored on: {tensor.device}")
    if torch.cuda.is_available():
        tensor = tensor.to("cuda")

    tensor = torch.ones(4, 4)
    first_row, first_col, last_col = tensor[0], tensor[:, 0], tensor[..., -1]
    tensor[:, 1] = 0
    t1 = torch.cat([tensor, tensor, tensor], dim=1)

    tensor = torch.tensor(m)
    y1 = tensor @ tensor.T
    y2 = tensor.matmul(tensor.T)
    y3 = torch.rand_like(y1)
    torch.matmul(tensor, tensor.T, out=y3)
    z1 = tensor * tensor
    z2 = tensor.mul(tensor)
    z3 = torch.rand_like(tensor)
    torch.mul(tensor, tensor, out=z3)

    agg = tensor.sum()
    agg_item = agg.item()
    print(agg_item, type(agg_item))
    tensor.add_(5)

    t = torch.ones(5)
    n = t.numpy()
    t.add_(1)
    shared_from_tensor = n.tolist()
    n = np.ones(5)
    t = torch.from_numpy(n)
    np.add(n, 1, out=n)
    shared_from_numpy = t.tolist()

    result = dict(
        x_data=(x_data.tolist(), str(x_data.dtype)), x_np=(x_np.tolist(), str(x_np.dtype)),
        x_ones=(x_ones.tolist(), str(x_ones.dtype)), x_rand=(tuple(x_rand.shape), str(x_rand.dtype)),
        rand=(tuple(rand_tensor.shape), str(rand_tensor.dtype)), ones=ones_tensor.tolist(), zeros=zeros_tensor.tolist(),
        info=(tuple(tensor.shape), str(tensor.dtype), str(tensor.device)),
        slices=(first_row.tolist(), first_col.tolist(), last_col.tolist()), t1=t1.tolist(), y=[y1.numpy(), y2.numpy(),
        y3.numpy()], z=[z1.numpy(), z2.numpy(), z3.numpy()], agg=(agg_item, type(agg_item).__name__),
        added=tensor.numpy(), shared=(shared_from_tensor, shared_from_numpy, str(t.dtype)))
""")

program("tensor_fundamentals_of_a_course", """
    import torch
    import numpy as np

    scalar = torch.tensor(7)
    vector = torch.tensor([7, 7])
    MATRIX = torch.tensor([[7, 8], [9, 10]])
    TENSOR = torch.tensor([[[1, 2, 3], [3, 6, 9], [2, 4, 5]]])
    basics = [(scalar.ndim, scalar.item()), (vector.ndim, tuple(vector.shape)), (MATRIX.ndim, MATRIX[1].tolist()),
              (TENSOR.ndim, tuple(TENSOR.shape))]

    random_tensor = torch.rand(size=(3, 4))
    random_image_size_tensor = torch.rand(size=(224, 224, 3))
    zeros = torch.zeros(size=(3, 4))
    ones = torch.ones(size=(3, 4))
    zero_to_ten = torch.arange(start=0, end=10, step=1)
    ten_zeros = torch.zeros_like(input=zero_to_ten)
    made = [(tuple(random_tensor.shape), str(random_tensor.dtype)), tuple(random_image_size_tensor.shape),
            zeros.tolist(), (ones.dtype == torch.float32), zero_to_ten.tolist(), ten_zeros.tolist()]

    float_32_tensor = torch.tensor([3.0, 6.0, 9.0], dtype=None, device=None, requires_grad=False)
    float_16_tensor = float_32_tensor.type(torch.float16)
    int_8_tensor = torch.tensor([3, 6, 9], dtype=torch.int8)
    types = [str(float_32_tensor.dtype), str(float_16_tensor.dtype), (float_16_tensor * float_32_tensor).tolist(),
             str((int_8_tensor * float_32_tensor).dtype), str(float_32_tensor.device)]

    tensor = torch.tensor([1, 2, 3])
    ops = [(tensor + 10).tolist(), (tensor * 10).tolist(), torch.multiply(tensor, 10).tolist(), (tensor - 10).tolist(),
           (tensor * tensor).tolist(), torch.matmul(tensor, tensor).item(), (tensor @ tensor).item()]
    tensor_A = torch.tensor(matrix_a, dtype=torch.float32)
    tensor_B = torch.tensor(matrix_b, dtype=torch.float32)
    products = [torch.matmul(tensor_A, tensor_B.T).numpy(), torch.mm(tensor_A, tensor_B.T).numpy(),
                tuple(tensor_B.T.shape)]

    torch.manual_seed(42)
    linear = torch.nn.Linear(in_features=2, out_features=6)
    layer_out = (tuple(linear(tensor_A).shape), str(linear(tensor_A).dtype))

    x = torch.arange(0, 100, 10)
    aggregates = [x.min().item(), x.max().item(), x.type(torch.float32).mean().item(), x.sum().item(),
                  torch.max(x).item(), torch.min(x).item(), torch.mean(x.type(torch.float32)).item(),
                  x.argmax().item(), x.argmin().item(), str(x.type(torch.float16).dtype), str(x.type(torch.int8).dtype)]

    x = torch.arange(1., 8.)
    x_reshaped = x.reshape(1, 7)
    z = x.view(1, 7)
    z[:, 0] = 5
    x_stacked = torch.stack([x, x, x, x], dim=0)
    x_squeezed = x_reshaped.squeeze()
    x_unsqueezed = x_squeezed.unsqueeze(dim=0)
    x_original = torch.rand(size=(224, 224, 3))
    x_permuted = x_original.permute(2, 0, 1)
    x_original[0, 0, 0] = 728218
    shapes = [x.tolist(), tuple(x_stacked.shape), tuple(x_squeezed.shape), tuple(x_unsqueezed.shape),
              tuple(x_permuted.shape), x_permuted[0, 0, 0].item(), torch.vstack([x, x]).shape[0],
              tuple(torch.hstack([x, x]).shape)]

    x = torch.arange(1, 10).reshape(1, 3, 3)
    indexed = [x[0].tolist(), x[0][0].tolist(), x[0][0][0].item(), x[:, 0].tolist(), x[:, :, 1].tolist(),
               x[:, 1, 1].tolist(), x[0, 0, :].tolist()]

    array = np.arange(1.0, 8.0)
    tensor = torch.from_numpy(array)
    array = array + 1
    from_np = (tensor.tolist(), str(tensor.dtype))
    tensor = torch.ones(7)
    numpy_tensor = tensor.numpy()
    tensor = tensor + 1
    to_np = (numpy_tensor.tolist(), str(numpy_tensor.dtype), tensor.tolist())

    RANDOM_SEED = 42
    torch.manual_seed(seed=RANDOM_SEED)
    random_tensor_C = torch.rand(3, 4)
    torch.random.manual_seed(seed=RANDOM_SEED)
    random_tensor_D = torch.rand(3, 4)
    reproducible = (random_tensor_C == random_tensor_D).all().item()

    device = "cuda" if torch.cuda.is_available() else "cpu"
    tensor_on_gpu = torch.tensor([1, 2, 3]).to(device)
    back = (tensor_on_gpu.cpu().numpy().tolist(), torch.cuda.device_count(), device)

    result = dict(basics=basics, made=made, types=types, ops=ops, products=products, layer_out=layer_out,
                  aggregates=aggregates, shapes=shapes, indexed=indexed, from_np=from_np, to_np=to_np,
                  reproducible=reproducible, back=back)
""")

program("autograd_tutorial", """
    import torch

    x = torch.ones(5)
    y = torch.zeros(3)
    w = torch.tensor(w0, requires_grad=True)
    b = torch.tensor(b0, requires_grad=True)
    z = torch.matmul(x, w) + b
    loss = torch.nn.functional.binary_cross_entropy_with_logits(z, y)
    has_grad_fns = [z.grad_fn is not None, loss.grad_fn is not None, w.grad_fn is None]

    loss.backward()
    grads = [w.grad.numpy(), b.grad.numpy()]

    z = torch.matmul(x, w) + b
    tracked = z.requires_grad
    with torch.no_grad():
        z = torch.matmul(x, w) + b
    untracked = z.requires_grad
    z = torch.matmul(x, w) + b
    z_det = z.detach()
    detached = z_det.requires_grad

    inp = torch.eye(4, 5, requires_grad=True)
    out = (inp + 1).pow(2).t()
    out.backward(torch.ones_like(out), retain_graph=True)
    first_call = inp.grad.clone()
    out.backward(torch.ones_like(out), retain_graph=True)
    second_call = inp.grad.clone()
    inp.grad.zero_()
    out.backward(torch.ones_like(out), retain_graph=True)
    after_zeroing = inp.grad.clone()

    a = torch.tensor([2., 3.], requires_grad=True)
    b = torch.tensor([6., 4.], requires_grad=True)
    Q = 3*a**3 - b**2
    external_grad = torch.tensor([1., 1.])
    Q.backward(gradient=external_grad)
    checks = [(9*a**2 == a.grad).tolist(), (-2*b == b.grad).tolist()]

    model = torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.ReLU(), torch.nn.Linear(4, 3))
    for param in model.parameters():
        param.requires_grad = False
    model[2] = torch.nn.Linear(4, 2)
    trainable = [name for name, p in model.named_parameters() if p.requires_grad]
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)

    result = dict(has_grad_fns=has_grad_fns, grads=grads, flags=[tracked, untracked, detached],
                  calls=[first_call.numpy(), second_call.numpy(), after_zeroing.numpy()], checks=checks,
                  trainable=trainable)
""")


# --------------------------------------------------------------------------------------
# micrograd: a scalar expression checked against PyTorch, then a small MLP with a max-margin loss
# --------------------------------------------------------------------------------------

program("micrograd_checked_against_pytorch", """
    import torch

    x = torch.Tensor([-3.0]).double()
    x.requires_grad = True
    y = torch.Tensor([1.5]).double()
    y.requires_grad = True
    a = 3 * x + y * x - 1
    b = a.relu() + (a * y).relu() + x ** 2
    c = b / (y + 2) - 2 ** y + (-x).tanh()
    d = c * c + 5.0 / (b + 1) - c.exp()
    e = (d - a).relu() + d * 0.5
    e.backward()
    xpt, ypt, ept = x, y, e

    result = dict(e=ept.data.item(), xgrad=xpt.grad.item(), ygrad=ypt.grad.item(), dtype=str(xpt.dtype),
                  flags=[xpt.is_leaf, ept.is_leaf, ept.requires_grad])
""")

program("micrograd_mlp_with_a_max_margin_loss", """
    import torch
    import torch.nn as nn

    X, y = torch.tensor(points), torch.tensor(labels)  # y in {-1, 1}
    model = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1))
    model.load_state_dict({k: torch.tensor(v) for k, v in start.items()})
    print(model)
    print("number of parameters", sum(p.numel() for p in model.parameters()))


    def loss(batch_size=None):
        scores = model(X).squeeze(1)
        losses = (1 + -y * scores).relu()
        data_loss = losses.mean()
        alpha = 1e-4
        reg_loss = alpha * sum((p * p).sum() for p in model.parameters())
        total_loss = data_loss + reg_loss
        accuracy = ((y > 0) == (scores > 0)).float().mean()
        return total_loss, accuracy


    history = []
    for k in range(40):
        total_loss, acc = loss()
        model.zero_grad()
        total_loss.backward()
        learning_rate = 1.0 - 0.9*k/100
        for p in model.parameters():
            p.data -= learning_rate * p.grad
        history.append((total_loss.item(), acc.item()))
        if k % 10 == 0:
            print(f"step {k} loss {total_loss.item()}, accuracy {acc.item()*100}%")

    xx, yy = np.meshgrid(np.arange(-2.0, 2.0, 0.5), np.arange(-2.0, 2.0, 0.5))
    Xmesh = np.c_[xx.ravel(), yy.ravel()].astype(np.float32)
    with torch.no_grad():
        Z = (model(torch.tensor(Xmesh)).squeeze(1) > 0).numpy()

    result = dict(history=history, Z=Z, last=model[4].weight.detach().numpy())
""")


# --------------------------------------------------------------------------------------
# Datasets & DataLoaders: a Dataset of one's own, transforms, shuffled batches, a random split
# --------------------------------------------------------------------------------------

program("datasets_and_dataloaders", """
    import torch
    from torch.utils.data import Dataset, DataLoader, TensorDataset, random_split


    class CustomImageDataset(Dataset):
        def __init__(self, images, labels, transform=None, target_transform=None):
            self.img_labels = labels
            self.images = images
            self.transform = transform
            self.target_transform = target_transform

        def __len__(self):
            return len(self.img_labels)

        def __getitem__(self, idx):
            image = torch.from_numpy(self.images[idx])
            label = int(self.img_labels[idx])
            if self.transform:
                image = self.transform(image)
            if self.target_transform:
                label = self.target_transform(label)
            return image, label


    to_float = lambda img: img.float() / 255
    one_hot = lambda y: torch.zeros(10, dtype=torch.float).scatter_(0, torch.tensor(y), value=1)
    training_data = CustomImageDataset(images, labels, transform=to_float, target_transform=one_hot)
    first_image, first_label = training_data[0]

    train_dataloader = DataLoader(training_data, batch_size=8, shuffle=True)
    train_features, train_labels = next(iter(train_dataloader))
    print(f"Feature batch shape: {tuple(train_features.size())}")
    print(f"Labels batch shape: {tuple(train_labels.size())}")
    shuffled = (tuple(train_features.shape), str(train_features.dtype), tuple(train_labels.shape),
                len(train_dataloader))

    in_order = DataLoader(training_data, batch_size=8, drop_last=True)
    sums = [(features.sum().item(), targets.argmax(1).tolist()) for features, targets in in_order]

    generator = torch.Generator().manual_seed(42)
    train_set, val_set = random_split(training_data, [0.75, 0.25], generator=generator)
    counted = DataLoader(TensorDataset(torch.tensor(labels)), batch_size=5)
    counts = [len(batch) for (batch,) in counted]

    result = dict(first=(first_image.numpy(), str(first_image.dtype), first_label.tolist()), sums=sums,
                  lengths=(len(training_data), len(in_order), len(train_set), len(val_set)), counts=counts,
                  shuffled=shuffled)
""")


# --------------------------------------------------------------------------------------
# Build the neural network, then the optimization loop
# --------------------------------------------------------------------------------------

program("build_the_network_and_the_optimization_loop", """
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    device = torch.accelerator.current_accelerator().type if torch.accelerator.is_available() else "cpu"
    print(f"Using {device} device")
    device = ("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")
    torch.manual_seed(0)
    torch.cuda.manual_seed_all(0)


    class NeuralNetwork(nn.Module):
        def __init__(self):
            super().__init__()
            self.flatten = nn.Flatten()
            self.linear_relu_stack = nn.Sequential(
                nn.Linear(6*6, 24),
                nn.ReLU(),
                nn.Linear(24, 24),
                nn.ReLU(),
                nn.Linear(24, 5),
            )

        def forward(self, x):
            x = self.flatten(x)
            logits = self.linear_relu_stack(x)
            return logits


    model = NeuralNetwork().to(device)
    print(model)
    model.load_state_dict({k: torch.tensor(v) for k, v in start.items()})

    X = torch.rand(1, 6, 6, device=device)
    logits = model(X)
    pred_probab = nn.Softmax(dim=1)(logits)
    y_pred = pred_probab.argmax(1)
    drawn = (tuple(pred_probab.shape), str(y_pred.dtype), round(pred_probab.sum().item(), 5))

    input_image = torch.tensor(images[:3])
    flat_image = nn.Flatten()(input_image)
    layer1 = nn.Linear(in_features=6*6, out_features=20)
    hidden1 = layer1(flat_image)
    hidden1 = nn.ReLU()(hidden1)
    seq_modules = nn.Sequential(nn.Flatten(), layer1, nn.ReLU(), nn.Linear(20, 5))
    layer_shapes = [tuple(flat_image.shape), tuple(hidden1.shape), tuple(seq_modules(input_image).shape)]
    sizes = [(name, tuple(param.size())) for name, param in model.named_parameters()]

    learning_rate = 1e-1
    batch_size = 8
    epochs = 3
    train_dataloader = DataLoader(TensorDataset(torch.tensor(images), torch.tensor(labels)), batch_size=batch_size)
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=learning_rate)
    losses, tests = [], []


    def train_loop(dataloader, model, loss_fn, optimizer):
        size = len(dataloader.dataset)
        model.train()
        for batch, (X, y) in enumerate(dataloader):
            pred = model(X)
            loss = loss_fn(pred, y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            losses.append(loss.item())
            if batch % 4 == 0:
                loss, current = loss.item(), batch * batch_size + len(X)
                print(f"loss: {loss:>7f}  [{current:>5d}/{size:>5d}]")


    def test_loop(dataloader, model, loss_fn):
        model.eval()
        size = len(dataloader.dataset)
        num_batches = len(dataloader)
        test_loss, correct = 0, 0
        with torch.no_grad():
            for X, y in dataloader:
                pred = model(X)
                test_loss += loss_fn(pred, y).item()
                correct += (pred.argmax(1) == y).type(torch.float).sum().item()
        test_loss /= num_batches
        correct /= size
        tests.append((correct, test_loss))
        print(f"Test Error: Accuracy: {(100*correct):>0.1f}%, Avg loss: {test_loss:>8f}")


    for t in range(epochs):
        print(f"Epoch {t+1}")
        train_loop(train_dataloader, model, loss_fn, optimizer)
        test_loop(train_dataloader, model, loss_fn)

    result = dict(device=device, drawn=drawn, layer_shapes=layer_shapes, sizes=sizes, losses=losses, tests=tests,
                  final=model.linear_relu_stack[4].weight.detach().numpy())
""")


# --------------------------------------------------------------------------------------
# A course's workflow notebooks: a straight line with nn.Parameter and inference_mode, saved and loaded by path;
# then binary and multi-class classification with logits
# --------------------------------------------------------------------------------------

program("workflow_linear_regression_saved_and_loaded", """
    import torch
    from torch import nn
    from pathlib import Path

    weight = 0.7
    bias = 0.3
    start, end, step = 0, 1, 0.02
    X = torch.arange(start, end, step).unsqueeze(dim=1)
    y = weight * X + bias
    train_split = int(0.8 * len(X))
    X_train, y_train = X[:train_split], y[:train_split]
    X_test, y_test = X[train_split:], y[train_split:]


    class LinearRegressionModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.weights = nn.Parameter(torch.randn(1, dtype=torch.float), requires_grad=True)
            self.bias = nn.Parameter(torch.randn(1, dtype=torch.float), requires_grad=True)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.weights * x + self.bias


    torch.manual_seed(42)
    model_0 = LinearRegressionModel()
    with torch.no_grad():
        model_0.weights.copy_(torch.tensor(start_weights))  # the harness's draws
        model_0.bias.copy_(torch.tensor(start_bias))
    first_state = {k: v.tolist() for k, v in model_0.state_dict().items()}

    with torch.inference_mode():
        y_preds = model_0(X_test)

    loss_fn = nn.L1Loss()
    optimizer = torch.optim.SGD(params=model_0.parameters(), lr=0.01)
    epochs = 200
    epoch_count, train_loss_values, test_loss_values = [], [], []
    for epoch in range(epochs):
        model_0.train()
        y_pred = model_0(X_train)
        loss = loss_fn(y_pred, y_train)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

        model_0.eval()
        with torch.inference_mode():
            test_pred = model_0(X_test)
            test_loss = loss_fn(test_pred, y_test.type(torch.float))
            if epoch % 10 == 0:
                epoch_count.append(epoch)
                train_loss_values.append(loss.detach().numpy())
                test_loss_values.append(test_loss.detach().numpy())
                print(f"Epoch: {epoch} | MAE Train Loss: {loss} | MAE Test Loss: {test_loss} ")

    MODEL_PATH = Path(tmp) / "models"
    MODEL_PATH.mkdir(parents=True, exist_ok=True)
    MODEL_SAVE_PATH = MODEL_PATH / "01_workflow_model_0.pth"
    torch.save(obj=model_0.state_dict(), f=MODEL_SAVE_PATH)

    loaded_model_0 = LinearRegressionModel()
    loaded_model_0.load_state_dict(torch.load(f=MODEL_SAVE_PATH))
    loaded_model_0.eval()
    with torch.inference_mode():
        loaded_model_preds = loaded_model_0(X_test)
        y_preds = model_0(X_test)

    result = dict(first_state=first_state, train=train_loss_values, test=test_loss_values, epochs=epoch_count,
                  same=(y_preds == loaded_model_preds).all().item(), preds=loaded_model_preds.numpy(),
                  no_graph=[y_preds.requires_grad, loaded_model_preds.requires_grad],
                  state={k: v.numpy() for k, v in loaded_model_0.state_dict().items()})
""")

program("workflow_binary_and_multiclass_classification", """
    import torch
    from torch import nn

    device = "cuda" if torch.cuda.is_available() else "cpu"

    X = torch.from_numpy(circles_x).type(torch.float)
    y = torch.from_numpy(circles_y).type(torch.float)
    X_train, X_test, y_train, y_test = X[:80], X[80:], y[:80], y[80:]


    def accuracy_fn(y_true, y_pred):
        correct = torch.eq(y_true, y_pred).sum().item()
        acc = (correct / len(y_pred)) * 100
        return acc


    class CircleModelV2(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer_1 = nn.Linear(in_features=2, out_features=10)
            self.layer_2 = nn.Linear(in_features=10, out_features=10)
            self.layer_3 = nn.Linear(in_features=10, out_features=1)
            self.relu = nn.ReLU()

        def forward(self, x):
            return self.layer_3(self.relu(self.layer_2(self.relu(self.layer_1(x)))))


    torch.manual_seed(42)
    model_3 = CircleModelV2().to(device)
    model_3.load_state_dict({k: torch.tensor(v) for k, v in circle_start.items()})
    loss_fn = nn.BCEWithLogitsLoss()
    optimizer = torch.optim.SGD(model_3.parameters(), lr=0.1)

    X_train, y_train = X_train.to(device), y_train.to(device)
    X_test, y_test = X_test.to(device), y_test.to(device)
    binary = []
    for epoch in range(100):
        model_3.train()
        y_logits = model_3(X_train).squeeze()
        y_pred = torch.round(torch.sigmoid(y_logits))
        loss = loss_fn(y_logits, y_train)
        acc = accuracy_fn(y_true=y_train, y_pred=y_pred)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        model_3.eval()
        with torch.inference_mode():
            test_logits = model_3(X_test).squeeze()
            test_pred = torch.round(torch.sigmoid(test_logits))
            test_loss = loss_fn(test_logits, y_test)
            test_acc = accuracy_fn(y_true=y_test, y_pred=test_pred)
        if epoch % 10 == 0:
            binary.append((loss.item(), acc, test_loss.item(), test_acc))
            print(f"Epoch: {epoch} | Loss: {loss:.5f}, Accuracy: {acc:.2f}% | Test Loss: {test_loss:.5f}, "
                  f"Test Accuracy: {test_acc:.2f}%")

    NUM_CLASSES = 4
    NUM_FEATURES = 2
    X_blob = torch.from_numpy(blob_x).type(torch.float)
    y_blob = torch.from_numpy(blob_y).type(torch.LongTensor)


    class BlobModel(nn.Module):
        def __init__(self, input_features, output_features, hidden_units=8):
            super().__init__()
            self.linear_layer_stack = nn.Sequential(
                nn.Linear(in_features=input_features, out_features=hidden_units),
                nn.Linear(in_features=hidden_units, out_features=hidden_units),
                nn.Linear(in_features=hidden_units, out_features=output_features),
            )

        def forward(self, x):
            return self.linear_layer_stack(x)


    model_4 = BlobModel(input_features=NUM_FEATURES, output_features=NUM_CLASSES, hidden_units=8).to(device)
    model_4.load_state_dict({k: torch.tensor(v) for k, v in blob_start.items()})
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model_4.parameters(), lr=0.1)
    multi = []
    for epoch in range(50):
        model_4.train()
        y_logits = model_4(X_blob)
        y_pred = torch.softmax(y_logits, dim=1).argmax(dim=1)
        loss = loss_fn(y_logits, y_blob)
        acc = accuracy_fn(y_true=y_blob, y_pred=y_pred)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if epoch % 10 == 0:
            multi.append((loss.item(), acc))

    model_4.eval()
    with torch.inference_mode():
        y_logits = model_4(X_blob)
    y_pred_probs = torch.softmax(y_logits, dim=1)
    y_preds = y_pred_probs.argmax(dim=1)

    result = dict(binary=binary, multi=multi, probs=y_pred_probs[:5].numpy(), preds=y_preds.tolist(),
                  dtypes=[str(X.dtype), str(y_blob.dtype), str(y_preds.dtype)])
""")


# --------------------------------------------------------------------------------------
# What is torch.nn really? From hand-written weights to Module, optim and DataLoader
# --------------------------------------------------------------------------------------

program("what_is_torch_nn_really", """
    import math
    import torch
    import torch.nn.functional as F
    from torch import nn
    from torch import optim
    from torch.utils.data import TensorDataset, DataLoader

    x_train, y_train, x_valid, y_valid = map(torch.tensor, (train_x, train_y, valid_x, valid_y))
    n, c = x_train.shape

    weights = torch.tensor(w0) / math.sqrt(64)
    weights.requires_grad_()
    bias = torch.zeros(10, requires_grad=True)


    def log_softmax(x):
        return x - x.exp().sum(-1).log().unsqueeze(-1)


    def model(xb):
        return log_softmax(xb @ weights + bias)


    def nll(input, target):
        return -input[range(target.shape[0]), target].mean()


    def accuracy(out, yb):
        preds = torch.argmax(out, dim=1)
        return (preds == yb).float().mean()


    loss_func = nll
    bs = 16
    lr = 0.5
    epochs = 2
    by_hand = []
    for epoch in range(epochs):
        for i in range((n - 1) // bs + 1):
            start_i = i * bs
            end_i = start_i + bs
            xb = x_train[start_i:end_i]
            yb = y_train[start_i:end_i]
            pred = model(xb)
            loss = loss_func(pred, yb)
            loss.backward()
            with torch.no_grad():
                weights -= weights.grad * lr
                bias -= bias.grad * lr
                weights.grad.zero_()
                bias.grad.zero_()
        by_hand.append((loss_func(model(xb), yb).item(), accuracy(model(xb), yb).item()))

    loss_func = F.cross_entropy
    same_loss = (loss_func(xb @ weights + bias, yb).item(), nll(model(xb), yb).item())


    class Mnist_Logistic(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(64, 10)

        def forward(self, xb):
            return self.lin(xb)


    def get_model():
        model = Mnist_Logistic()
        model.load_state_dict({"lin.weight": torch.tensor(w0.T) / math.sqrt(64), "lin.bias": torch.zeros(10)})
        return model, optim.SGD(model.parameters(), lr=lr, momentum=0.9)


    def get_data(train_ds, valid_ds, bs):
        return DataLoader(train_ds, batch_size=bs), DataLoader(valid_ds, batch_size=bs * 2)


    def loss_batch(model, loss_func, xb, yb, opt=None):
        loss = loss_func(model(xb), yb)
        if opt is not None:
            loss.backward()
            opt.step()
            opt.zero_grad()
        return loss.item(), len(xb)


    history = []


    def fit(epochs, model, loss_func, opt, train_dl, valid_dl):
        for epoch in range(epochs):
            model.train()
            for xb, yb in train_dl:
                loss_batch(model, loss_func, xb, yb, opt)
            model.eval()
            with torch.no_grad():
                losses, nums = zip(*[loss_batch(model, loss_func, xb, yb) for xb, yb in valid_dl])
            val_loss = np.sum(np.multiply(losses, nums)) / np.sum(nums)
            history.append(float(val_loss))
            print(epoch, val_loss)


    train_ds = TensorDataset(x_train, y_train)
    valid_ds = TensorDataset(x_valid, y_valid)
    train_dl, valid_dl = get_data(train_ds, valid_ds, bs)
    model, opt = get_model()
    fit(epochs, model, loss_func, opt, train_dl, valid_dl)

    result = dict(by_hand=by_hand, same_loss=same_loss, history=history, weights=weights.detach().numpy(),
                  lin=model.lin.weight.detach().numpy())
""")


# --------------------------------------------------------------------------------------
# A character-level RNN that classifies names
# --------------------------------------------------------------------------------------

program("char_rnn_name_classification", """
    import string
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    all_letters = string.ascii_letters + " .,;'"
    n_letters = len(all_letters)
    all_categories = sorted(names)
    n_categories = len(all_categories)


    def letterToIndex(letter):
        return all_letters.find(letter)


    def lineToTensor(line):
        tensor = torch.zeros(len(line), 1, n_letters)
        for li, letter in enumerate(line):
            tensor[li][0][letterToIndex(letter)] = 1
        return tensor


    class RNN(nn.Module):
        def __init__(self, input_size, hidden_size, output_size):
            super(RNN, self).__init__()
            self.hidden_size = hidden_size
            self.i2h = nn.Linear(input_size + hidden_size, hidden_size)
            self.h2o = nn.Linear(hidden_size, output_size)
            self.softmax = nn.LogSoftmax(dim=1)

        def forward(self, input, hidden):
            combined = torch.cat((input, hidden), 1)
            hidden = F.tanh(self.i2h(combined))
            output = self.softmax(self.h2o(hidden))
            return output, hidden

        def initHidden(self):
            return torch.zeros(1, self.hidden_size)


    n_hidden = 16
    rnn = RNN(n_letters, n_hidden, n_categories)
    rnn.load_state_dict({k: torch.tensor(v) for k, v in start.items()})
    criterion = nn.NLLLoss()
    learning_rate = 0.05


    def categoryFromOutput(output):
        top_n, top_i = output.topk(1)
        category_i = top_i[0].item()
        return all_categories[category_i], category_i


    def train(category_tensor, line_tensor):
        hidden = rnn.initHidden()
        rnn.zero_grad()
        for i in range(line_tensor.size()[0]):
            output, hidden = rnn(line_tensor[i], hidden)
        loss = criterion(output, category_tensor)
        loss.backward()
        for p in rnn.parameters():
            p.data += -learning_rate * p.grad.data  # the tutorial: p.data.add_(p.grad.data, alpha=-learning_rate)
        return output, loss.item()


    losses, guesses = [], []
    for category, line in examples:
        category_tensor = torch.tensor([all_categories.index(category)], dtype=torch.long)
        output, loss = train(category_tensor, lineToTensor(line))
        losses.append(loss)
        guesses.append(categoryFromOutput(output))


    class CharRNN(nn.Module):
        def __init__(self, input_size, hidden_size, output_size):
            super(CharRNN, self).__init__()
            self.rnn = nn.RNN(input_size, hidden_size)
            self.h2o = nn.Linear(hidden_size, output_size)
            self.softmax = nn.LogSoftmax(dim=1)

        def forward(self, line_tensor):
            rnn_out, hidden = self.rnn(line_tensor)
            output = self.h2o(hidden[0])
            output = self.softmax(output)
            return output


    layer = CharRNN(n_letters, n_hidden, n_categories)
    layer.load_state_dict({k: torch.tensor(v) for k, v in layer_start.items()})
    optimizer = torch.optim.SGD(layer.parameters(), lr=learning_rate)
    layer_losses = []
    for category, line in examples:
        label = torch.tensor([all_categories.index(category)])
        output = layer(lineToTensor(line))
        loss = criterion(output, label)
        loss.backward()
        nn.utils.clip_grad_norm_(layer.parameters(), 3)
        optimizer.step()
        optimizer.zero_grad()
        layer_losses.append(loss.item())

    result = dict(losses=losses, guesses=guesses, i2h=rnn.i2h.weight.detach().numpy(), layer_losses=layer_losses,
                  h2o=layer.h2o.weight.detach().numpy(), names=[n for n, _ in layer.named_parameters()])
""")


# --------------------------------------------------------------------------------------
# Deep learning for NLP: a bag-of-words classifier, n-gram word embeddings, an LSTM part-of-speech tagger
# --------------------------------------------------------------------------------------

program("nlp_bag_of_words_and_ngram_embeddings", """
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import torch.optim as optim

    word_to_ix = {}
    for sent, _ in data + test_data:
        for word in sent:
            if word not in word_to_ix:
                word_to_ix[word] = len(word_to_ix)
    VOCAB_SIZE = len(word_to_ix)
    NUM_LABELS = 2


    class BoWClassifier(nn.Module):
        def __init__(self, num_labels, vocab_size):
            super(BoWClassifier, self).__init__()
            self.linear = nn.Linear(vocab_size, num_labels)

        def forward(self, bow_vec):
            return F.log_softmax(self.linear(bow_vec), dim=1)


    def make_bow_vector(sentence, word_to_ix):
        vec = torch.zeros(len(word_to_ix))
        for word in sentence:
            vec[word_to_ix[word]] += 1
        return vec.view(1, -1)


    def make_target(label, label_to_ix):
        return torch.LongTensor([label_to_ix[label]])


    model = BoWClassifier(NUM_LABELS, VOCAB_SIZE)
    model.load_state_dict({k: torch.tensor(v) for k, v in bow_start.items()})
    label_to_ix = {"SPANISH": 0, "ENGLISH": 1}
    with torch.no_grad():
        before = [model(make_bow_vector(instance, word_to_ix)).numpy() for instance, _ in test_data]
        creo_before = next(model.parameters())[:, word_to_ix["creo"]].tolist()
    loss_function = nn.NLLLoss()
    optimizer = optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(100):
        for instance, label in data:
            model.zero_grad()
            bow_vec = make_bow_vector(instance, word_to_ix)
            target = make_target(label, label_to_ix)
            log_probs = model(bow_vec)
            loss = loss_function(log_probs, target)
            loss.backward()
            optimizer.step()
    with torch.no_grad():
        after = [model(make_bow_vector(instance, word_to_ix)).numpy() for instance, _ in test_data]
        creo_after = next(model.parameters())[:, word_to_ix["creo"]].tolist()

    CONTEXT_SIZE = 2
    EMBEDDING_DIM = 10
    ngrams = [([test_sentence[i - j - 1] for j in range(CONTEXT_SIZE)], test_sentence[i])
              for i in range(CONTEXT_SIZE, len(test_sentence))]
    vocab = sorted(set(test_sentence))
    ngram_ix = {word: i for i, word in enumerate(vocab)}


    class NGramLanguageModeler(nn.Module):
        def __init__(self, vocab_size, embedding_dim, context_size):
            super(NGramLanguageModeler, self).__init__()
            self.embeddings = nn.Embedding(vocab_size, embedding_dim)
            self.linear1 = nn.Linear(context_size * embedding_dim, 32)
            self.linear2 = nn.Linear(32, vocab_size)

        def forward(self, inputs):
            embeds = self.embeddings(inputs).view((1, -1))
            out = F.relu(self.linear1(embeds))
            out = self.linear2(out)
            log_probs = F.log_softmax(out, dim=1)
            return log_probs


    losses = []
    loss_function = nn.NLLLoss()
    ngram_model = NGramLanguageModeler(len(vocab), EMBEDDING_DIM, CONTEXT_SIZE)
    ngram_model.load_state_dict({k: torch.tensor(v) for k, v in ngram_start.items()})
    optimizer = optim.SGD(ngram_model.parameters(), lr=0.001)
    for epoch in range(5):
        total_loss = 0
        for context, target in ngrams:
            context_idxs = torch.tensor([ngram_ix[w] for w in context], dtype=torch.long)
            ngram_model.zero_grad()
            log_probs = ngram_model(context_idxs)
            loss = loss_function(log_probs, torch.tensor([ngram_ix[target]], dtype=torch.long))
            loss.backward()
            optimizer.step()
            total_loss += loss.item()
        losses.append(total_loss)
    print(losses)

    result = dict(before=before, after=after, creo=(creo_before, creo_after), losses=losses,
                  beauty=ngram_model.embeddings.weight[ngram_ix["beauty"]].detach().numpy())
""")

program("sequence_models_lstm_tagger", """
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import torch.optim as optim

    torch.manual_seed(1)
    lstm = nn.LSTM(3, 3)
    lstm.load_state_dict({k: torch.tensor(v) for k, v in lstm_start.items()})
    inputs = [torch.tensor(v) for v in sequence]  # five (1, 3) steps
    hidden = (torch.tensor(h0), torch.tensor(c0))  # each (num_layers, batch, hidden) = (1, 1, 3)
    for i in inputs:
        out, hidden = lstm(i.view(1, 1, -1), hidden)
    step_by_step = (out.detach().numpy(), hidden[0].detach().numpy(), hidden[1].detach().numpy())

    inputs = torch.cat(inputs).view(len(inputs), 1, -1)  # (T, B, input_size), as nn.LSTM reads it
    hidden = (torch.tensor(h0), torch.tensor(c0))
    out, hidden = lstm(inputs, hidden)
    all_at_once = (out.detach().numpy(), hidden[0].detach().numpy(), hidden[1].detach().numpy())


    def prepare_sequence(seq, to_ix):
        idxs = [to_ix[w] for w in seq]
        return torch.tensor(idxs, dtype=torch.long)


    word_to_ix = {}
    for sent, tags in training_data:
        for word in sent:
            if word not in word_to_ix:
                word_to_ix[word] = len(word_to_ix)
    tag_to_ix = {"DET": 0, "NN": 1, "V": 2}
    EMBEDDING_DIM = 6
    HIDDEN_DIM = 6


    class LSTMTagger(nn.Module):
        def __init__(self, embedding_dim, hidden_dim, vocab_size, tagset_size):
            super(LSTMTagger, self).__init__()
            self.hidden_dim = hidden_dim
            self.word_embeddings = nn.Embedding(vocab_size, embedding_dim)
            self.lstm = nn.LSTM(embedding_dim, hidden_dim)
            self.hidden2tag = nn.Linear(hidden_dim, tagset_size)

        def forward(self, sentence):
            embeds = self.word_embeddings(sentence)
            lstm_out, _ = self.lstm(embeds.view(len(sentence), 1, -1))
            tag_space = self.hidden2tag(lstm_out.view(len(sentence), -1))
            tag_scores = F.log_softmax(tag_space, dim=1)
            return tag_scores


    model = LSTMTagger(EMBEDDING_DIM, HIDDEN_DIM, len(word_to_ix), len(tag_to_ix))
    model.load_state_dict({k: torch.tensor(v) for k, v in tagger_start.items()})
    loss_function = nn.NLLLoss()
    optimizer = optim.SGD(model.parameters(), lr=0.1)
    with torch.no_grad():
        inputs = prepare_sequence(training_data[0][0], word_to_ix)
        before = model(inputs).numpy()
    losses = []
    for epoch in range(30):
        for sentence, tags in training_data:
            model.zero_grad()
            sentence_in = prepare_sequence(sentence, word_to_ix)
            targets = prepare_sequence(tags, tag_to_ix)
            tag_scores = model(sentence_in)
            loss = loss_function(tag_scores, targets)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    with torch.no_grad():
        after = model(prepare_sequence(training_data[0][0], word_to_ix))

    result = dict(step_by_step=step_by_step, all_at_once=all_at_once, before=before, losses=losses,
                  after=after.numpy(), tags=after.argmax(1).tolist(), names=sorted(model.state_dict()))
""")


# --------------------------------------------------------------------------------------
# makemore, parts 1 to 4
# --------------------------------------------------------------------------------------

program("makemore_bigram_counts", """
    import torch

    N = torch.zeros((27, 27), dtype=torch.int32)
    chars = sorted(list(set(''.join(words))))
    stoi = {s: i+1 for i, s in enumerate(chars)}
    stoi['.'] = 0
    itos = {i: s for s, i in stoi.items()}
    for w in words:
        chs = ['.'] + list(w) + ['.']
        for ch1, ch2 in zip(chs, chs[1:]):
            ix1 = stoi[ch1]
            ix2 = stoi[ch2]
            N[ix1, ix2] += 1

    p = N[0].float()
    p = p / p.sum()
    g = torch.Generator().manual_seed(2147483647)
    ix = torch.multinomial(p, num_samples=1, replacement=True, generator=g).item()
    first = itos[ix]

    P = (N+1).float()
    P /= P.sum(1, keepdims=True)
    out_names = []
    for i in range(5):
        out = []
        ix = 0
        while True:
            p = P[ix]
            ix = torch.multinomial(p, num_samples=1, replacement=True, generator=g).item()
            out.append(itos[ix])
            if ix == 0:
                break
        out_names.append(''.join(out))

    log_likelihood = 0.0
    n = 0
    for w in words:
        chs = ['.'] + list(w) + ['.']
        for ch1, ch2 in zip(chs, chs[1:]):
            logprob = torch.log(P[stoi[ch1], stoi[ch2]])
            log_likelihood += logprob
            n += 1
    nll = -log_likelihood
    print(f'{nll=}')
    print(f'{nll/n}')

    result = dict(N=(N.numpy(), str(N.dtype)), row_sums=P.sum(1).numpy(), nll=(nll / n).item(), P=P.numpy(),
                  drawn=(type(first).__name__, len(out_names), all(s.endswith('.') for s in out_names)))
""")

program("makemore_neural_bigram", """
    import torch
    import torch.nn.functional as F

    chars = sorted(list(set(''.join(words))))
    stoi = {s: i+1 for i, s in enumerate(chars)}
    stoi['.'] = 0
    xs, ys = [], []
    for w in words:
        chs = ['.'] + list(w) + ['.']
        for ch1, ch2 in zip(chs, chs[1:]):
            xs.append(stoi[ch1])
            ys.append(stoi[ch2])
    xs = torch.tensor(xs)
    ys = torch.tensor(ys)
    num = xs.nelement()

    g = torch.Generator().manual_seed(2147483647)
    W = torch.randn((27, 27), generator=g, requires_grad=True)
    with torch.no_grad():
        W.copy_(torch.tensor(W0))  # the harness's draws

    losses = []
    for k in range(50):
        xenc = F.one_hot(xs, num_classes=27).float()
        logits = xenc @ W
        counts = logits.exp()
        probs = counts / counts.sum(1, keepdims=True)
        loss = -probs[torch.arange(num), ys].log().mean() + 0.01*(W**2).mean()
        losses.append(loss.item())

        W.grad = None
        loss.backward()
        W.data += -50 * W.grad

    out = []
    ix = 0
    while True:
        xenc = F.one_hot(torch.tensor([ix]), num_classes=27).float()
        p = F.softmax(xenc @ W, dim=1)
        ix = torch.multinomial(p, num_samples=1, replacement=True, generator=g).item()
        out.append(ix)
        if ix == 0:
            break

    result = dict(xenc=(tuple(xenc.shape), str(xenc.dtype)), losses=losses, W=W.detach().numpy(),
                  sample=(out[-1], type(out[0]).__name__))
""")

program("makemore_mlp", """
    import random
    import torch
    import torch.nn.functional as F

    chars = sorted(list(set(''.join(words))))
    stoi = {s: i+1 for i, s in enumerate(chars)}
    stoi['.'] = 0
    itos = {i: s for s, i in stoi.items()}
    block_size = 3


    def build_dataset(words):
        X, Y = [], []
        for w in words:
            context = [0] * block_size
            for ch in w + '.':
                ix = stoi[ch]
                X.append(context)
                Y.append(ix)
                context = context[1:] + [ix]
        X = torch.tensor(X)
        Y = torch.tensor(Y)
        return X, Y


    random.seed(42)
    random.shuffle(words)
    n1 = int(0.8*len(words))
    Xtr, Ytr = build_dataset(words[:n1])
    Xdev, Ydev = build_dataset(words[n1:])

    g = torch.Generator().manual_seed(2147483647)
    C = torch.randn((27, 10), generator=g)
    W1 = torch.randn((30, 64), generator=g)
    b1 = torch.randn(64, generator=g)
    W2 = torch.randn((64, 27), generator=g)
    b2 = torch.randn(27, generator=g)
    C, W1, b1, W2, b2 = (torch.tensor(start[k]) for k in ("C", "W1", "b1", "W2", "b2"))  # the harness's draws
    parameters = [C, W1, b1, W2, b2]
    n_params = sum(p.nelement() for p in parameters)
    for p in parameters:
        p.requires_grad = True

    lre = torch.linspace(-3, 0, 1000)
    lrs = 10**lre
    lri, lossi, stepi = [], [], []
    for i in range(200):
        ix = torch.randint(0, Xtr.shape[0], (32,))
        ix = torch.tensor(batches[i])  # the harness's draws

        emb = C[Xtr[ix]]  # (32, 3, 10)
        h = torch.tanh(emb.view(-1, 30) @ W1 + b1)  # (32, 64)
        logits = h @ W2 + b2  # (32, 27)
        loss = F.cross_entropy(logits, Ytr[ix])

        for p in parameters:
            p.grad = None
        loss.backward()
        lr = 0.1 if i < 100 else 0.01
        for p in parameters:
            p.data += -lr * p.grad

        stepi.append(i)
        lossi.append(loss.log10().item())

    emb = C[Xdev]
    h = torch.tanh(emb.view(-1, 30) @ W1 + b1)
    logits = h @ W2 + b2
    dev_loss = F.cross_entropy(logits, Ydev)

    g = torch.Generator().manual_seed(2147483647 + 10)
    samples = []
    for _ in range(5):
        out = []
        context = [0] * block_size
        while True:
            emb = C[torch.tensor([context])]  # (1, block_size, d)
            h = torch.tanh(emb.view(1, -1) @ W1 + b1)
            logits = h @ W2 + b2
            probs = F.softmax(logits, dim=1)
            ix = torch.multinomial(probs, num_samples=1, generator=g).item()
            context = context[1:] + [ix]
            out.append(ix)
            if ix == 0:
                break
        samples.append(''.join(itos[i] for i in out))

    result = dict(shapes=[tuple(Xtr.shape), tuple(Xdev.shape), str(Xtr.dtype)], n_params=n_params,
                  lrs=lrs[::100].numpy(), lossi=lossi, dev=dev_loss.item(), W1=W1.detach().numpy(),
                  samples=(len(samples), all(s.endswith('.') for s in samples)))
""")

program("makemore_torchified_layers_with_batch_norm", """
    import torch
    import torch.nn.functional as F


    class Linear:
        def __init__(self, fan_in, fan_out, bias=True):
            self.weight = torch.randn((fan_in, fan_out), generator=g) / fan_in**0.5
            self.bias = torch.zeros(fan_out) if bias else None

        def __call__(self, x):
            self.out = x @ self.weight
            if self.bias is not None:
                self.out += self.bias
            return self.out

        def parameters(self):
            return [self.weight] + ([] if self.bias is None else [self.bias])


    class BatchNorm1d:
        def __init__(self, dim, eps=1e-5, momentum=0.1):
            self.eps = eps
            self.momentum = momentum
            self.training = True
            self.gamma = torch.ones(dim)
            self.beta = torch.zeros(dim)
            self.running_mean = torch.zeros(dim)
            self.running_var = torch.ones(dim)

        def __call__(self, x):
            if self.training:
                xmean = x.mean(0, keepdim=True)
                xvar = x.var(0, keepdim=True)
            else:
                xmean = self.running_mean
                xvar = self.running_var
            xhat = (x - xmean) / torch.sqrt(xvar + self.eps)
            self.out = self.gamma * xhat + self.beta
            if self.training:
                with torch.no_grad():
                    self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * xmean
                    self.running_var = (1 - self.momentum) * self.running_var + self.momentum * xvar
            return self.out

        def parameters(self):
            return [self.gamma, self.beta]


    class Tanh:
        def __call__(self, x):
            self.out = torch.tanh(x)
            return self.out

        def parameters(self):
            return []


    n_embd, n_hidden, vocab_size, block_size = 10, 32, 27, 3
    g = torch.Generator().manual_seed(2147483647)
    C = torch.randn((vocab_size, n_embd), generator=g)
    layers = [
        Linear(n_embd * block_size, n_hidden, bias=False), BatchNorm1d(n_hidden), Tanh(),
        Linear(n_hidden, n_hidden, bias=False), BatchNorm1d(n_hidden), Tanh(),
        Linear(n_hidden, vocab_size, bias=False), BatchNorm1d(vocab_size),
    ]
    C = torch.tensor(start["C"])  # the harness's draws
    for layer, name in zip([layers[0], layers[3], layers[6]], ["W1", "W2", "W3"]):
        layer.weight = torch.tensor(start[name])
    with torch.no_grad():
        layers[-1].gamma *= 0.1
        for layer in layers[:-1]:
            if isinstance(layer, Linear):
                layer.weight *= 5/3

    parameters = [C] + [p for layer in layers for p in layer.parameters()]
    n_params = sum(p.nelement() for p in parameters)
    for p in parameters:
        p.requires_grad = True

    Xtr, Ytr = torch.tensor(X), torch.tensor(Y)
    lossi, ud = [], []
    for i in range(60):
        ix = torch.randint(0, Xtr.shape[0], (32,), generator=g)
        ix = torch.tensor(batches[i])  # the harness's draws
        Xb, Yb = Xtr[ix], Ytr[ix]

        emb = C[Xb]
        x = emb.view(emb.shape[0], -1)
        for layer in layers:
            x = layer(x)
        loss = F.cross_entropy(x, Yb)

        for layer in layers:
            layer.out.retain_grad()
        for p in parameters:
            p.grad = None
        loss.backward()

        lr = 0.1 if i < 40 else 0.01
        for p in parameters:
            p.data += -lr * p.grad
        lossi.append(loss.log10().item())
        with torch.no_grad():
            ud.append([((lr*p.grad).std() / p.detach().std()).log10().item() for p in parameters])

    saturated = [(layer.out.abs() > 0.97).float().mean().item() for layer in layers if isinstance(layer, Tanh)]
    grad_stds = [layer.out.grad.std().item() for layer in layers if isinstance(layer, Tanh)]

    for layer in layers:
        layer.training = False
    with torch.no_grad():
        x = C[Xtr].view(Xtr.shape[0], -1)
        for layer in layers:
            x = layer(x)
        eval_loss = F.cross_entropy(x, Ytr).item()

    result = dict(n_params=n_params, lossi=lossi, ud=ud, saturated=saturated, grad_stds=grad_stds,
                  running_var=layers[1].running_var.numpy(), running_mean=layers[4].running_mean.numpy(),
                  eval_loss=eval_loss)
""")

program("makemore_wavenet_hierarchy", """
    import torch
    import torch.nn.functional as F


    class Linear:
        def __init__(self, fan_in, fan_out, bias=True):
            self.weight = torch.randn((fan_in, fan_out)) / fan_in**0.5
            self.bias = torch.zeros(fan_out) if bias else None

        def __call__(self, x):
            self.out = x @ self.weight
            if self.bias is not None:
                self.out += self.bias
            return self.out

        def parameters(self):
            return [self.weight] + ([] if self.bias is None else [self.bias])


    class BatchNorm1d:
        def __init__(self, dim, eps=1e-5, momentum=0.1):
            self.eps = eps
            self.momentum = momentum
            self.training = True
            self.gamma = torch.ones(dim)
            self.beta = torch.zeros(dim)
            self.running_mean = torch.zeros(dim)
            self.running_var = torch.ones(dim)

        def __call__(self, x):
            if self.training:
                if x.ndim == 2:
                    dim = 0
                elif x.ndim == 3:
                    dim = (0, 1)
                xmean = x.mean(dim, keepdim=True)
                xvar = x.var(dim, keepdim=True)
            else:
                xmean = self.running_mean
                xvar = self.running_var
            xhat = (x - xmean) / torch.sqrt(xvar + self.eps)
            self.out = self.gamma * xhat + self.beta
            if self.training:
                with torch.no_grad():
                    self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * xmean
                    self.running_var = (1 - self.momentum) * self.running_var + self.momentum * xvar
            return self.out

        def parameters(self):
            return [self.gamma, self.beta]


    class Tanh:
        def __call__(self, x):
            self.out = torch.tanh(x)
            return self.out

        def parameters(self):
            return []


    class Embedding:
        def __init__(self, num_embeddings, embedding_dim):
            self.weight = torch.randn((num_embeddings, embedding_dim))

        def __call__(self, IX):
            self.out = self.weight[IX]
            return self.out

        def parameters(self):
            return [self.weight]


    class FlattenConsecutive:
        def __init__(self, n):
            self.n = n

        def __call__(self, x):
            B, T, C = x.shape
            x = x.view(B, T//self.n, C*self.n)
            if x.shape[1] == 1:
                x = x.squeeze(1)
            self.out = x
            return self.out

        def parameters(self):
            return []


    class Sequential:
        def __init__(self, layers):
            self.layers = layers

        def __call__(self, x):
            for layer in self.layers:
                x = layer(x)
            self.out = x
            return self.out

        def parameters(self):
            return [p for layer in self.layers for p in layer.parameters()]


    torch.manual_seed(42)
    n_embd, n_hidden, vocab_size = 8, 24, 27
    model = Sequential([
        Embedding(vocab_size, n_embd),
        FlattenConsecutive(2), Linear(n_embd * 2, n_hidden, bias=False), BatchNorm1d(n_hidden), Tanh(),
        FlattenConsecutive(2), Linear(n_hidden * 2, n_hidden, bias=False), BatchNorm1d(n_hidden), Tanh(),
        FlattenConsecutive(2), Linear(n_hidden * 2, n_hidden, bias=False), BatchNorm1d(n_hidden), Tanh(),
        Linear(n_hidden, vocab_size),
    ])
    for layer, name in zip([model.layers[i] for i in (0, 2, 6, 10, 13)], ["C", "W1", "W2", "W3", "W4"]):
        layer.weight = torch.tensor(start[name])  # the harness's draws
    with torch.no_grad():
        model.layers[-1].weight *= 0.1

    parameters = model.parameters()
    print(sum(p.nelement() for p in parameters))
    for p in parameters:
        p.requires_grad = True

    Xtr, Ytr = torch.tensor(X), torch.tensor(Y)
    max_steps = 60
    batch_size = 32
    lossi = []
    for i in range(max_steps):
        ix = torch.randint(0, Xtr.shape[0], (batch_size,))
        ix = torch.tensor(batches[i])  # the harness's draws
        Xb, Yb = Xtr[ix], Ytr[ix]
        logits = model(Xb)
        loss = F.cross_entropy(logits, Yb)
        for p in parameters:
            p.grad = None
        loss.backward()
        lr = 0.1 if i < 40 else 0.01
        for p in parameters:
            p.data += -lr * p.grad
        lossi.append(loss.log10().item())

    shapes = []
    for layer in model.layers:
        shapes.append((layer.__class__.__name__, tuple(layer.out.shape)))

    for layer in model.layers:
        layer.training = False


    @torch.no_grad()
    def split_loss(split):
        x, y = {'train': (Xtr, Ytr)}[split]
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        return loss.item()


    curve = torch.tensor(lossi).view(-1, 20).mean(1)
    g = torch.Generator().manual_seed(2147483647 + 10)
    context = [0] * 8
    logits = model(torch.tensor([context]))
    probs = F.softmax(logits, dim=1)
    ix = torch.multinomial(probs, num_samples=1, generator=g).item()

    result = dict(lossi=lossi, shapes=shapes, train=split_loss('train'), curve=curve.numpy(),
                  running_var=model.layers[7].running_var.numpy(), probs=probs.detach().numpy(),
                  drawn=type(ix).__name__)
""")

program("makemore_manual_backprop", """
    import torch
    import torch.nn.functional as F


    def cmp(s, dt, t):
        ex = torch.all(dt == t.grad).item()
        app = torch.allclose(dt, t.grad)
        maxdiff = (dt - t.grad).abs().max().item()
        print(f'{s:15s} | exact: {str(ex):5s} | approximate: {str(app):5s} | maxdiff: {maxdiff}')
        return app


    n = 32
    Xb, Yb = torch.tensor(X)[:n], torch.tensor(Y)[:n]
    C, W1, b1, W2, b2, bngain, bnbias = (torch.tensor(start[k])
                                           for k in ("C", "W1", "b1", "W2", "b2", "bngain", "bnbias"))
    parameters = [C, W1, b1, W2, b2, bngain, bnbias]
    for p in parameters:
        p.requires_grad = True

    emb = C[Xb]
    embcat = emb.view(emb.shape[0], -1)
    hprebn = embcat @ W1 + b1
    bnmean = hprebn.mean(0, keepdim=True)
    bnvar = hprebn.var(0, keepdim=True, unbiased=True)
    bnvar_inv = (bnvar + 1e-5)**-0.5
    bnraw = (hprebn - bnmean) * bnvar_inv
    hpreact = bngain * bnraw + bnbias
    h = torch.tanh(hpreact)
    logits = h @ W2 + b2
    loss = F.cross_entropy(logits, Yb)
    for t in [logits, h, hpreact, bnraw, hprebn, embcat, emb]:
        t.retain_grad()
    for p in parameters:
        p.grad = None
    loss.backward()

    dlogits = F.softmax(logits, 1)
    dlogits[range(n), Yb] -= 1
    dlogits /= n
    dh = dlogits @ W2.T
    dW2 = h.T @ dlogits
    db2 = dlogits.sum(0)
    dhpreact = (1.0 - h**2) * dh
    dbngain = (bnraw * dhpreact).sum(0, keepdim=True)
    dbnbias = dhpreact.sum(0, keepdim=True)
    dhprebn = bngain*bnvar_inv/n * (n*dhpreact - dhpreact.sum(0) - n/(n-1)*bnraw*(dhpreact*bnraw).sum(0))
    dembcat = dhprebn @ W1.T
    dW1 = embcat.T @ dhprebn
    db1 = dhprebn.sum(0)
    demb = dembcat.view(emb.shape)
    dC = torch.zeros_like(C)
    for k in range(Xb.shape[0]):
        for j in range(Xb.shape[1]):
            ix = Xb[k, j]
            dC[ix] += demb[k, j]

    dlogprobs = torch.zeros((n, 27))
    dlogprobs[range(n), Yb] = -1.0/n
    one_hot = F.one_hot(Yb, num_classes=27)

    agree = [cmp('logits', dlogits, logits), cmp('h', dh, h), cmp('W2', dW2, W2), cmp('b2', db2, b2),
             cmp('hpreact', dhpreact, hpreact), cmp('bngain', dbngain, bngain), cmp('bnbias', dbnbias, bnbias),
             cmp('hprebn', dhprebn, hprebn), cmp('embcat', dembcat, embcat), cmp('W1', dW1, W1),
             cmp('emb', demb, emb), cmp('C', dC, C)]  # (b1: rounding noise, as batch norm removes the mean)
    with torch.no_grad():
        for p, grad in zip(parameters, [dC, dW1, db1, dW2, db2, dbngain, dbnbias]):
            p.data += -0.1 * grad

    result = dict(loss=loss.item(), agree=agree, dC=dC.detach().numpy(), dW1=dW1.detach().numpy(),
                  W1=W1.detach().numpy(), dlogprobs=dlogprobs.numpy(), by_hand=(-(dlogprobs * one_hot).sum()).item())
""")


# --------------------------------------------------------------------------------------
# Let's build GPT: a bigram model, then heads of self-attention
# --------------------------------------------------------------------------------------

program("gpt_from_scratch", """
    import torch
    import torch.nn as nn
    from torch.nn import functional as F

    batch_size = 4
    block_size = 8
    max_iters = 40
    eval_interval = 20
    learning_rate = 1e-2
    device = 'cuda' if torch.cuda.is_available() else 'cpu'
    eval_iters = 4
    n_embd = 16
    n_head = 2
    dropout = 0.0
    torch.manual_seed(1337)

    chars = sorted(list(set(text)))
    vocab_size = len(chars)
    stoi = {ch: i for i, ch in enumerate(chars)}
    itos = {i: ch for i, ch in enumerate(chars)}
    encode = lambda s: [stoi[c] for c in s]
    decode = lambda l: ''.join([itos[i] for i in l])

    data = torch.tensor(encode(text), dtype=torch.long)
    n = int(0.9*len(data))
    train_data = data[:n]
    val_data = data[n:]


    def get_batch(split):
        data = train_data if split == 'train' else val_data
        ix = torch.randint(len(data) - block_size, (batch_size,))
        ix = torch.tensor(next(draws)) % (len(data) - block_size)  # the harness's draws
        x = torch.stack([data[i:i+block_size] for i in ix])
        y = torch.stack([data[i+1:i+block_size+1] for i in ix])
        x, y = x.to(device), y.to(device)
        return x, y


    @torch.no_grad()
    def estimate_loss():
        out = {}
        model.eval()
        for split in ['train', 'val']:
            losses = torch.zeros(eval_iters)
            for k in range(eval_iters):
                X, Y = get_batch(split)
                logits, loss = model(X, Y)
                losses[k] = loss.item()
            out[split] = losses.mean()
        model.train()
        return out


    class Head(nn.Module):
        def __init__(self, head_size):
            super().__init__()
            self.key = nn.Linear(n_embd, head_size, bias=False)
            self.query = nn.Linear(n_embd, head_size, bias=False)
            self.value = nn.Linear(n_embd, head_size, bias=False)
            self.register_buffer('tril', torch.tril(torch.ones(block_size, block_size)))
            self.dropout = nn.Dropout(dropout)

        def forward(self, x):
            B, T, C = x.shape
            k = self.key(x)
            q = self.query(x)
            wei = q @ k.transpose(-2, -1) * k.shape[-1]**-0.5
            wei = wei.masked_fill(self.tril[:T, :T] == 0, float('-inf'))
            wei = F.softmax(wei, dim=-1)
            wei = self.dropout(wei)
            v = self.value(x)
            out = wei @ v
            return out


    class MultiHeadAttention(nn.Module):
        def __init__(self, num_heads, head_size):
            super().__init__()
            self.heads = nn.ModuleList([Head(head_size) for _ in range(num_heads)])
            self.proj = nn.Linear(head_size * num_heads, n_embd)
            self.dropout = nn.Dropout(dropout)

        def forward(self, x):
            out = torch.cat([h(x) for h in self.heads], dim=-1)
            out = self.dropout(self.proj(out))
            return out


    class FeedFoward(nn.Module):
        def __init__(self, n_embd):
            super().__init__()
            self.net = nn.Sequential(
                nn.Linear(n_embd, 4 * n_embd),
                nn.ReLU(),
                nn.Linear(4 * n_embd, n_embd),
                nn.Dropout(dropout),
            )

        def forward(self, x):
            return self.net(x)


    class Block(nn.Module):
        def __init__(self, n_embd, n_head):
            super().__init__()
            head_size = n_embd // n_head
            self.sa = MultiHeadAttention(n_head, head_size)
            self.ffwd = FeedFoward(n_embd)
            self.ln1 = nn.LayerNorm(n_embd)
            self.ln2 = nn.LayerNorm(n_embd)

        def forward(self, x):
            x = x + self.sa(self.ln1(x))
            x = x + self.ffwd(self.ln2(x))
            return x


    class GPTLanguageModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.token_embedding_table = nn.Embedding(vocab_size, n_embd)
            self.position_embedding_table = nn.Embedding(block_size, n_embd)
            self.blocks = nn.Sequential(*[Block(n_embd, n_head=n_head) for _ in range(2)])
            self.ln_f = nn.LayerNorm(n_embd)
            self.lm_head = nn.Linear(n_embd, vocab_size)

        def forward(self, idx, targets=None):
            B, T = idx.shape
            tok_emb = self.token_embedding_table(idx)
            pos_emb = self.position_embedding_table(torch.arange(T, device=device))
            x = tok_emb + pos_emb
            x = self.blocks(x)
            x = self.ln_f(x)
            logits = self.lm_head(x)
            if targets is None:
                loss = None
            else:
                B, T, C = logits.shape
                logits = logits.view(B*T, C)
                targets = targets.view(B*T)
                loss = F.cross_entropy(logits, targets)
            return logits, loss

        def generate(self, idx, max_new_tokens):
            for _ in range(max_new_tokens):
                idx_cond = idx[:, -block_size:]
                logits, loss = self(idx_cond)
                logits = logits[:, -1, :]
                probs = F.softmax(logits, dim=-1)
                idx_next = torch.multinomial(probs, num_samples=1)
                idx = torch.cat((idx, idx_next), dim=1)
            return idx


    model = GPTLanguageModel()
    m = model.to(device)
    model.load_state_dict({k: torch.tensor(v) for k, v in start.items()})
    n_params = sum(p.numel() for p in m.parameters())
    print(n_params, 'parameters')

    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
    losses, evals = [], []
    for iter in range(max_iters):
        if iter % eval_interval == 0 or iter == max_iters - 1:
            est = estimate_loss()
            evals.append((est['train'].item(), est['val'].item()))
            print(f"step {iter}: train loss {est['train']:.4f}, val loss {est['val']:.4f}")
        xb, yb = get_batch('train')
        logits, loss = model(xb, yb)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())

    context = torch.zeros((1, 1), dtype=torch.long, device=device)
    generated = m.generate(context, max_new_tokens=20)
    sample = decode(generated[0].tolist())
    names = sorted(model.state_dict())

    result = dict(n_params=n_params, losses=losses, evals=evals, names=names,
                  head=model.lm_head.weight.detach().numpy(),
                  drawn=(tuple(generated.shape), str(generated.dtype), len(sample)))
""")


# --------------------------------------------------------------------------------------
# The harness: the inputs each program reads, run on both libraries, compare
# --------------------------------------------------------------------------------------

WORDS = ["emma", "olivia", "ava", "isabella", "sophia", "charlotte", "mia", "amelia", "harper", "evelyn", "abigail",
         "emily", "elizabeth", "mila", "ella", "avery", "sofia", "camila", "aria", "scarlett", "victoria", "madison",
         "luna", "grace", "chloe", "penelope", "layla", "riley", "zoey", "nora", "lily", "eleanor", "hannah", "quinn",
         "jackson", "wyatt",
         "xavier"]

TEXT = ("First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n\nFirst Citizen:\n"
        "You are all resolved rather to die than to famish?\n\nAll:\nResolved. resolved.\n") * 3


def _f32(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _context_dataset(block_size=3):
    chars = sorted(set("".join(WORDS)))
    stoi = {s: i + 1 for i, s in enumerate(chars)}
    stoi["."] = 0
    X, Y = [], []
    for w in WORDS:
        context = [0] * block_size
        for ch in w + ".":
            X.append(context)
            Y.append(stoi[ch])
            context = context[1:] + [stoi[ch]]
    return X, Y


def _state(rng, shapes: dict) -> dict:
    return {k: (rng.uniform(-1, 1, s) / np.sqrt(s[-1] if len(s) > 1 else s[0])).astype(np.float32)
            for k, s in shapes.items()}


def inputs(name: str, tmp: str = "") -> dict:
    """The names program ``name`` reads, drawn with NumPy so both runs see the same values."""
    rng = np.random.default_rng(sum(map(ord, name)))
    cubic = [float(v) for v in _f32(rng, 4, scale=0.5)]
    if name.startswith("cubic_fit_with_nn") or name == "cubic_fit_with_an_optimizer":
        return dict(weight=_f32(rng, 1, 3, scale=0.3), bias=_f32(rng, 1, scale=0.3))
    if name.startswith("cubic_fit"):
        return dict(start=cubic)
    if name == "micrograd_checked_against_pytorch":
        return {}
    if name == "micrograd_mlp_with_a_max_margin_loss":
        labels = rng.integers(0, 2, 60)
        points = (np.where(labels[:, None] == 1, [1.0, -0.4], [-0.6, 0.5]) + 0.6 * rng.standard_normal((60, 2)))
        start = _state(rng, {"0.weight": (16, 2), "0.bias": (16,), "2.weight": (16, 16), "2.bias": (16,),
                             "4.weight": (1, 16), "4.bias": (1,)})
        return dict(points=points.astype(np.float32), labels=(2.0 * labels - 1).astype(np.float32), start=start)
    if name == "datasets_and_dataloaders":
        return dict(images=rng.integers(0, 256, (30, 1, 4, 4)).astype(np.uint8), labels=rng.integers(0, 10, 30))
    if name == "workflow_linear_regression_saved_and_loaded":
        return dict(start_weights=_f32(rng, 1), start_bias=_f32(rng, 1), tmp=tmp)
    if name == "workflow_binary_and_multiclass_classification":
        angle, ring = rng.uniform(0, 2 * np.pi, 100), rng.integers(0, 2, 100)
        radius = np.where(ring == 1, 0.5, 1.0) + 0.05 * rng.standard_normal(100)
        circles_x = np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=1)
        blob_y = rng.integers(0, 4, 60)
        blob_x = rng.uniform(-8, 8, (4, 2))[blob_y] + rng.standard_normal((60, 2))
        circle_start = _state(rng, {"layer_1.weight": (10, 2), "layer_1.bias": (10,), "layer_2.weight": (10, 10),
                                    "layer_2.bias": (10,), "layer_3.weight": (1, 10), "layer_3.bias": (1,)})
        blob_start = _state(rng, {f"linear_layer_stack.{i}.{p}": s for i, (o, n) in enumerate([(8, 2), (8, 8), (4, 8)])
                                  for p, s in (("weight", (o, n)), ("bias", (o,)))})
        return dict(circles_x=circles_x, circles_y=ring.astype(np.float64), blob_x=blob_x, blob_y=blob_y,
                    circle_start=circle_start, blob_start=blob_start)
    if name == "tensor_fundamentals_of_a_course":
        return dict(matrix_a=[[1, 2], [3, 4], [5, 6]], matrix_b=[[7, 10], [8, 11], [9, 12]])
    if name == "nlp_bag_of_words_and_ngram_embeddings":
        data = [("me gusta comer en la cafeteria".split(), "SPANISH"), ("Give it to me".split(), "ENGLISH"),
                ("No creo que sea una buena idea".split(), "SPANISH"),
                ("No it is not a good idea to get lost at sea".split(), "ENGLISH")]
        test_data = [("Yo creo que si".split(), "SPANISH"), ("it is lost on me".split(), "ENGLISH")]
        vocab = len({w for s, _ in data + test_data for w in s})
        sentence = ("the quick beauty of a small field is the field where the quick wind meets the small "
                    "beauty of a morning").split()
        n_words = len(set(sentence))
        return dict(data=data, test_data=test_data, test_sentence=sentence,
                    bow_start=_state(rng, {"linear.weight": (2, vocab), "linear.bias": (2,)}),
                    ngram_start=dict(_state(rng, {"linear1.weight": (32, 20), "linear1.bias": (32,),
                                                  "linear2.weight": (n_words, 32), "linear2.bias": (n_words,)}),
                                     **{"embeddings.weight": _f32(rng, n_words, 10)}))
    if name == "sequence_models_lstm_tagger":
        training_data = [("The dog ate the apple".split(), ["DET", "NN", "V", "DET", "NN"]),
                         ("Everybody read that book".split(), ["NN", "V", "DET", "NN"])]
        lstm = {f"{w}_l0": s for w, s in (("weight_ih", (12, 3)), ("weight_hh", (12, 3)), ("bias_ih", (12,)),
                                          ("bias_hh", (12,)))}
        tagger = {f"lstm.{w}_l0": s for w, s in (("weight_ih", (24, 6)), ("weight_hh", (24, 6)), ("bias_ih", (24,)),
                                                 ("bias_hh", (24,)))}
        tagger.update({"word_embeddings.weight": (9, 6), "hidden2tag.weight": (3, 6), "hidden2tag.bias": (3,)})
        return dict(lstm_start=_state(rng, lstm), sequence=[_f32(rng, 1, 3) for _ in range(5)], h0=_f32(rng, 1, 1, 3),
                    c0=_f32(rng, 1, 1, 3), training_data=training_data, tagger_start=_state(rng, tagger))
    if name == "tensors_tutorial":
        return dict(m=_f32(rng, 4, 4))
    if name == "autograd_tutorial":
        return dict(w0=_f32(rng, 5, 3), b0=_f32(rng, 3))
    if name == "build_the_network_and_the_optimization_loop":
        centres = rng.standard_normal((5, 6, 6))
        labels = rng.integers(0, 5, 40)
        images = (centres[labels] + 0.8 * rng.standard_normal((40, 6, 6))).astype(np.float32)
        start = _state(rng, {"linear_relu_stack.0.weight": (24, 36), "linear_relu_stack.0.bias": (24,),
                             "linear_relu_stack.2.weight": (24, 24), "linear_relu_stack.2.bias": (24,),
                             "linear_relu_stack.4.weight": (5, 24), "linear_relu_stack.4.bias": (5,)})
        return dict(images=images, labels=labels, start=start)
    if name == "what_is_torch_nn_really":
        centres = rng.standard_normal((10, 64))
        train_y, valid_y = rng.integers(0, 10, 96), rng.integers(0, 10, 40)
        train_x = (centres[train_y] + rng.standard_normal((96, 64))).astype(np.float32)
        valid_x = (centres[valid_y] + rng.standard_normal((40, 64))).astype(np.float32)
        return dict(train_x=train_x, train_y=train_y, valid_x=valid_x, valid_y=valid_y, w0=_f32(rng, 64, 10))
    if name == "char_rnn_name_classification":
        names = {"Italian": ["Rossi", "Bianchi", "Romano"], "Scottish": ["Smith", "Brown", "Wilson"],
                 "Japanese": ["Sato", "Suzuki", "Takahashi"]}
        examples = [(c, names[c][i % 3]) for i, c in enumerate(sorted(names) * 4)]
        n_letters, n_hidden = 57, 16
        start = _state(rng, {"i2h.weight": (n_hidden, n_letters + n_hidden), "i2h.bias": (n_hidden,),
                             "h2o.weight": (3, n_hidden), "h2o.bias": (3,)})
        layer_start = _state(rng, {"rnn.weight_ih_l0": (n_hidden, n_letters), "rnn.weight_hh_l0": (n_hidden, n_hidden),
                                   "rnn.bias_ih_l0": (n_hidden,), "rnn.bias_hh_l0": (n_hidden,),
                                   "h2o.weight": (3, n_hidden), "h2o.bias": (3,)})
        return dict(names=names, examples=examples, start=start, layer_start=layer_start)
    if name in ("makemore_bigram_counts",):
        return dict(words=list(WORDS))
    if name == "makemore_neural_bigram":
        return dict(words=list(WORDS), W0=_f32(rng, 27, 27))
    if name == "makemore_mlp":
        start = dict(C=_f32(rng, 27, 10), W1=_f32(rng, 30, 64, scale=0.2), b1=_f32(rng, 64, scale=0.01),
                     W2=_f32(rng, 64, 27, scale=0.1), b2=np.zeros(27, np.float32))
        n_train = sum(len(w) + 1 for w in WORDS)  # an upper bound on the train split's rows
        batches = [rng.integers(0, n_train * 7 // 10, 32) for _ in range(200)]
        return dict(words=list(WORDS), start=start, batches=batches)
    if name == "makemore_torchified_layers_with_batch_norm":
        X, Y = _context_dataset()
        start = dict(C=_f32(rng, 27, 10), W1=_f32(rng, 30, 32, scale=30 ** -0.5),
                     W2=_f32(rng, 32, 32, scale=32 ** -0.5), W3=_f32(rng, 32, 27, scale=32 ** -0.5))
        return dict(X=X, Y=Y, start=start,
                    batches=[rng.integers(0, len(X), 32) for _ in range(60)])
    if name == "makemore_wavenet_hierarchy":
        X, Y = _context_dataset(8)
        start = dict(C=_f32(rng, 27, 8), W1=_f32(rng, 16, 24, scale=16 ** -0.5), W2=_f32(rng, 48, 24, scale=48 ** -0.5),
                     W3=_f32(rng, 48, 24, scale=48 ** -0.5), W4=_f32(rng, 24, 27, scale=24 ** -0.5))
        return dict(X=X, Y=Y, start=start, batches=[rng.integers(0, len(X), 32) for _ in range(60)])
    if name == "makemore_manual_backprop":
        X, Y = _context_dataset()
        order = rng.permutation(len(X))[:32]
        start = dict(C=_f32(rng, 27, 10), W1=_f32(rng, 30, 64, scale=0.3), b1=_f32(rng, 64, scale=0.1),
                     W2=_f32(rng, 64, 27, scale=0.1), b2=_f32(rng, 27, scale=0.1),
                     bngain=(1 + _f32(rng, 1, 64, scale=0.1)), bnbias=_f32(rng, 1, 64, scale=0.1))
        return dict(X=[X[i] for i in order], Y=[Y[i] for i in order], start=start)
    if name == "gpt_from_scratch":
        vocab, n_embd, block = len(set(TEXT)), 16, 8
        shapes = {"token_embedding_table.weight": (vocab, n_embd), "position_embedding_table.weight": (block, n_embd),
                  "ln_f.weight": (n_embd,), "ln_f.bias": (n_embd,), "lm_head.weight": (vocab, n_embd),
                  "lm_head.bias": (vocab,)}
        for b in range(2):
            p = f"blocks.{b}."
            for h in range(2):
                for part in ("key", "query", "value"):
                    shapes[f"{p}sa.heads.{h}.{part}.weight"] = (8, n_embd)
            shapes.update({f"{p}sa.proj.weight": (n_embd, n_embd), f"{p}sa.proj.bias": (n_embd,),
                           f"{p}ffwd.net.0.weight": (4 * n_embd, n_embd), f"{p}ffwd.net.0.bias": (4 * n_embd,),
                           f"{p}ffwd.net.2.weight": (n_embd, 4 * n_embd), f"{p}ffwd.net.2.bias": (n_embd,),
                           f"{p}ln1.weight": (n_embd,), f"{p}ln1.bias": (n_embd,), f"{p}ln2.weight": (n_embd,),
                           f"{p}ln2.bias": (n_embd,)})
        start = _state(rng, shapes)
        for k in start:
            if k.endswith(("ln1.weight", "ln2.weight", "ln_f.weight")):
                start[k] = np.ones_like(start[k])
        start.update({f"blocks.{b}.sa.heads.{h}.tril": np.tril(np.ones((block, block), np.float32))
                      for b in range(2) for h in range(2)})
        draws = iter(rng.integers(0, 10**6, (200, 4)).tolist())
        return dict(text=TEXT, start=start, draws=draws)
    raise KeyError(name)


def run(name: str, library: str, tmp: str) -> dict:
    source = PROGRAMS[name] if library == "torch" else to_minigrad(PROGRAMS[name])
    scope = {"np": np, **inputs(name, f"{tmp}/{library}")}
    try:
        exec(compile(source, f"<{name}, {library}>", "exec"), scope)  # noqa: S102
    finally:  # a program's process-wide settings stop with it: PyTorch's default device is a global function
        torch.set_default_device(None)  # mode, under which F.l1_loss(..., weight=) drops the weight
    return scope


def assert_agree(ours, theirs, where: str, rtol: float, atol: float) -> None:
    """Numbers to float32 rounding (relative ``rtol``); everything else (shapes, dtypes, strings, flags) equal."""
    if isinstance(theirs, dict):
        assert sorted(ours) == sorted(theirs), where
        for k in theirs:
            assert_agree(ours[k], theirs[k], f"{where}.{k}", rtol, atol)
    elif isinstance(theirs, list | tuple) and not all(isinstance(v, int | float) and not isinstance(v, bool)
                                                      for v in theirs):
        assert len(ours) == len(theirs), where
        for i, (o, t) in enumerate(zip(ours, theirs)):
            assert_agree(o, t, f"{where}[{i}]", rtol, atol)
    elif isinstance(theirs, np.ndarray | list | tuple | float) and not isinstance(theirs, bool):
        o, t = np.asarray(ours), np.asarray(theirs)
        assert o.shape == t.shape, (where, o.shape, t.shape)
        if isinstance(theirs, np.ndarray):
            assert o.dtype == t.dtype, (where, o.dtype, t.dtype)
        np.testing.assert_allclose(o, t, rtol=rtol, atol=atol, err_msg=where)
    elif isinstance(theirs, str):  # str(dtype) is 'float32' here, 'torch.float32' in PyTorch
        assert ours == theirs.replace("torch.", ""), (where, ours, theirs)
    else:
        assert type(ours) is type(theirs) and ours == theirs, (where, ours, theirs)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_a_tutorial_runs_with_only_its_imports_changed_and_agrees_with_pytorch(name, capsys, tmp_path):
    theirs = run(name, "torch", str(tmp_path))
    printed_by_torch = capsys.readouterr().out
    ours = run(name, "minigrad", str(tmp_path))
    printed_by_us = capsys.readouterr().out
    assert sorted(ours["result"]) == sorted(theirs["result"])
    for key, value in theirs["result"].items():
        assert_agree(ours["result"][key], value, f"{name}: {key}", rtol=2e-4, atol=ATOL.get(name, 2e-6))
    if name not in PRINTS_REPRS:
        assert printed_by_us.count("\n") == printed_by_torch.count("\n")


# RMSprop's steps are lr-sized (1e-3) whatever the gradient, so a coefficient that settles at 0 jitters by a
# step, and float32 rounding picks which way: it agrees to well below a step.
ATOL = {"cubic_fit_with_an_optimizer": 1e-4}
PRINTS_REPRS = {"build_the_network_and_the_optimization_loop", "tensors_tutorial",  # (a module's or tensor's
                "micrograd_mlp_with_a_max_margin_loss", "workflow_linear_regression_saved_and_loaded"}  # repr)


def test_the_minigrad_source_differs_only_in_its_import_lines():
    for name, source in PROGRAMS.items():
        ported = to_minigrad(source).split("\n")
        changed = [new for old, new in zip(source.split("\n"), ported) if old != new]
        assert changed and all(re.match(r"\s*(import|from) minigrad", line) for line in changed), name
        assert "minigrad" not in source


# --------------------------------------------------------------------------------------
# What the tutorials still meet that differs from PyTorch (the programs above avoid them; each test flips
# to passing when it is fixed, and then fails as xfail(strict) to say so)
# --------------------------------------------------------------------------------------

import minigrad  # noqa: E402


@pytest.mark.xfail(strict=True, reason="t.data is the NumPy array here: p.data.std() is NumPy's (biased) std, "
                                       "p.data.add_ does not exist")
def test_p_data_is_a_tensor_with_pytorchs_methods():
    p = minigrad.tensor([1.0, 2.0, 4.0], requires_grad=True)
    assert p.data.std().item() == pytest.approx(torch.tensor([1.0, 2.0, 4.0]).std().item())
    p.data.add_(minigrad.ones(3), alpha=-0.5)


@pytest.mark.xfail(strict=True, reason="str(dtype) and str(shape) print NumPy's 'float32' and '(3, 4)'")
def test_dtypes_and_shapes_print_as_pytorchs():
    assert (str(minigrad.float32), str(minigrad.ones(3, 4).shape)) == (str(torch.float32), str(torch.ones(3, 4).shape))
