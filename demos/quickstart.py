"""The smallest tour of minigrad: build an expression, backprop, check the gradient.

    python -m demos.quickstart

Prints a value, its gradients by backprop, the same gradients by central finite
differences, and a second derivative obtained with create_graph=True.
"""

import numpy as np

import minigrad as mg


def f(x, w):
    # A tiny "neuron with a softmax": every op here is in the op table.
    return ((x @ w).tanh().softmax(axis=-1) * mg.arange(3.0).astype(np.float64)).sum()


def main() -> None:
    rng = np.random.default_rng(0)
    x = mg.tensor(rng.standard_normal((2, 4)), requires_grad=True)
    w = mg.tensor(rng.standard_normal((4, 3)), requires_grad=True)
    y = f(x, w)
    y.backward()
    print(f"f(x, w) = {y.item():.6f}")
    print("df/dw by backprop:\n", np.round(w.grad.numpy(), 6))
    print("gradcheck against finite differences:", mg.gradcheck(f, (x, w)))

    t = mg.tensor(np.array([0.5, -1.0, 2.0]), requires_grad=True)
    (dy,) = mg.grad((t ** 3).sum(), t, create_graph=True)   # 3 t^2, itself differentiable
    (d2y,) = mg.grad(dy.sum(), t)                          # 6 t
    print("d/dt t^3 =", dy.numpy(), "  d2/dt2 t^3 =", d2y.numpy())


if __name__ == "__main__":
    main()
