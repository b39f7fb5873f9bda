# %% [markdown]
# # The smallest tour of minigrad: build an expression, backprop, check the gradient
#
#     python -m demos.quickstart        (prints only; writes no files)
#
# Five cells: a small expression on Tensors and its gradients by backprop; the
# same gradients by finite differences (`mg.gradcheck`); a second derivative,
# from differentiating a gradient (`create_graph=True`); and the manual training
# loop every tutorial writes first.
#
# Each `# %%` line starts a cell: open the file in Jupyter (with jupytext) or VS
# Code to run it cell by cell, or run it whole as a script.

# %%
import numpy as np

import minigrad as mg
from demos._common import parse_args

args = parse_args(None, "quickstart", "The smallest tour of minigrad: an expression, backprop, a gradcheck.",
                  pictures=False)  # (assigned: a bare call would show its Namespace() in a notebook)

# %% [markdown]
# ## A tiny "neuron with a softmax"
#
# x (2 x 4) times w (4 x 3), tanh, a softmax over the 3 outputs, weighted by
# 0, 1, 2 and summed to one number. Every op here is in minigrad's op table.
# `backward()` fills in `x.grad` and `w.grad`.

# %%
def f(x, w):
    return ((x @ w).tanh().softmax(axis=-1) * mg.arange(3.0).astype(np.float64)).sum()


rng = np.random.default_rng(0)
x = mg.tensor(rng.standard_normal((2, 4)), requires_grad=True)  # float64: precise enough to check
w = mg.tensor(rng.standard_normal((4, 3)), requires_grad=True)
y = f(x, w)
y.backward()
print(f"f(x, w) = {y.item():.6f}")
print("df/dw by backprop (4 x 3, one entry per weight):\n", np.round(w.grad.numpy(), 6))

# %% [markdown]
# ## The same gradients by finite differences
#
# `mg.gradcheck` nudges every entry of x and w by a small step both ways and
# compares (f(+) - f(-)) / 2 step with backprop's answer; True means they agree
# within its tolerances.

# %%
print("gradcheck of df/dx and df/dw against finite differences:", mg.gradcheck(f, (x, w)))

# %% [markdown]
# ## A second derivative
#
# With `create_graph=True` the gradient 3 t^2 is itself a Tensor with a graph, so
# it can be differentiated again: 6 t.

# %%
t = mg.tensor(np.array([0.5, -1.0, 2.0]), requires_grad=True)
(dy,) = mg.grad((t ** 3).sum(), t, create_graph=True)  # 3 t^2, itself differentiable
(d2y,) = mg.grad(dy.sum(), t)  # 6 t
print("at t =", t.numpy(), " d/dt t^3 = 3 t^2 =", dy.numpy(), "  d2/dt2 t^3 = 6 t =", d2y.numpy())

# %% [markdown]
# ## Training by hand: the loop every tutorial writes first
#
# Fit w so that x @ w matches targets: forward, backward, then step each weight
# against its gradient *in place* (`w -= lr * w.grad`, under `mg.no_grad()` so
# the update is not recorded), and clear the gradient for the next step
# (`w.grad.zero_()`, or `w.grad = None`). `minigrad.optim.SGD` does the same.

# %%
targets = mg.tensor(rng.standard_normal((2, 3)))
w.grad = None  # (the first cell's gradient is still there)
losses = []
for _ in range(20):
    loss = ((x.detach() @ w - targets) ** 2).mean()
    loss.backward()
    with mg.no_grad():
        w -= 0.5 * w.grad  # in place: w keeps its identity and its .grad
    w.grad.zero_()
    losses.append(loss.item())
print(f"manual SGD: loss {losses[0]:.4f} at step 0, {losses[-1]:.4f} at step {len(losses) - 1}")
