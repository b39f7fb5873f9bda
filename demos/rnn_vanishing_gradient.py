"""The wall of recurrent networks: the gradient through time vanishes, measured by backprop.

    python -m demos.rnn_vanishing_gradient [--out DIR]

Retells step 2 of the NumPy notebook "Attention and the Transformer, from
scratch" (``000_480be21528dd973b.txt`` in the project's seeds): an RNN,
h_t = tanh(W h_{t-1} + U x_t), with d_hidden = 16 and 60 random tokens, the same
seed and the same draws in the same order. The notebook multiplies the per-step
derivatives by hand; here the RNN runs on minigrad Tensors and d h_T / d h_0 is
what backprop says (``mg.jacobian``). The table is the notebook's, to the digit.

Then one step further:

1. the backprop Jacobian agrees with central finite differences (error printed);
2. an LSTM of the same size, whose cell state is an additive path through time,
   loses the first token's influence far more slowly;
3. the whole curve ||d h_60 / d h_t|| for every t, recorded with tensor hooks
   during backward (one ``register_hook`` per hidden state), drawn to
   ``gradient_through_time.png`` in ``--out``.
"""

from __future__ import annotations

import numpy as np

import minigrad as mg
from demos._common import central_difference_jacobian, parse_args, pyplot, save_figure

D_HIDDEN, N_TOKENS = 16, 60
LENGTHS = (1, 5, 10, 20, 40, 60)


def notebook_rnn(rng: np.random.Generator):
    """The notebook's three draws, in its order: W, U, then the 60 token vectors."""
    W = rng.normal(0, 0.9 / np.sqrt(D_HIDDEN), (D_HIDDEN, D_HIDDEN))  # recurrent weights
    U = rng.normal(0, 1 / np.sqrt(D_HIDDEN), (D_HIDDEN, D_HIDDEN))  # input weights
    inputs = rng.normal(0, 1, (N_TOKENS, D_HIDDEN))  # a sequence of 60 token vectors
    return W, U, inputs


class RNN:
    """h_t = tanh(W h_{t-1} + U x_t): the notebook's recurrence on Tensors (float64, like its arrays)."""

    def __init__(self, W: np.ndarray, U: np.ndarray):
        self.W, self.U = mg.tensor(W), mg.tensor(U)

    def step(self, h: mg.Tensor, x: mg.Tensor) -> mg.Tensor:
        return (self.W @ h + self.U @ x).tanh()

    def initial_state(self, h0: mg.Tensor):
        return h0

    @staticmethod
    def hidden(state) -> mg.Tensor:
        return state


class LSTM:
    """An LSTM cell of the same size: gates decide what the cell state c keeps, forgets and shows.

        i, f, o = sigmoid(...), g = tanh(...)      (from W_h h_{t-1} + W_x x_t + b)
        c_t = f * c_{t-1} + i * g                  the additive path: d c_t / d c_{t-1} = f, no tanh' factor
        h_t = o * tanh(c_t)

    The forget gate's bias starts at 1, the usual initialisation: f starts mostly open (sigmoid(1) = 0.73).
    """

    def __init__(self, rng: np.random.Generator, d: int = D_HIDDEN, forget_bias: float = 1.0):
        self.d = d
        self.W_h = mg.tensor(rng.normal(0, 1 / np.sqrt(d), (4 * d, d)))  # (4d, d): rows i, f, g, o
        self.W_x = mg.tensor(rng.normal(0, 1 / np.sqrt(d), (4 * d, d)))
        b = np.zeros(4 * d)
        b[d:2 * d] = forget_bias
        self.b = mg.tensor(b)

    def initial_state(self, h0: mg.Tensor):
        return h0, mg.zeros(self.d, dtype=h0.dtype)

    def step(self, state, x: mg.Tensor):
        h, c = state
        z = self.W_h @ h + self.W_x @ x + self.b  # (4d,)
        d = self.d
        i, f, g, o = z[:d].sigmoid(), z[d:2 * d].sigmoid(), z[2 * d:3 * d].tanh(), z[3 * d:].sigmoid()
        c = f * c + i * g
        return o * c.tanh(), c

    @staticmethod
    def hidden(state) -> mg.Tensor:
        return state[0]


def final_hidden(cell, h0: mg.Tensor, inputs: np.ndarray) -> mg.Tensor:
    """Run ``cell`` over ``inputs`` from hidden state ``h0``; return h_T."""
    state = cell.initial_state(h0)
    for x in inputs:
        state = cell.step(state, mg.tensor(x))
    return cell.hidden(state)


def influence(cell, inputs: np.ndarray, lengths=LENGTHS) -> dict[int, float]:
    """||d h_T / d h_0|| (Frobenius, as np.linalg.norm) for each T, by reverse mode."""
    sizes = {}
    for T in lengths:
        h0 = mg.zeros(D_HIDDEN, dtype=np.float64, requires_grad=True)
        J = mg.jacobian(lambda h, T=T: final_hidden(cell, h, inputs[:T]), h0)  # (16, 16): one backward per row
        sizes[T] = float(np.linalg.norm(J.data))
    return sizes


def jacobian_error(cell, inputs: np.ndarray, T: int = 5) -> float:
    """Largest |backprop Jacobian - central differences| of h_T with respect to h_0."""
    h0 = mg.tensor(np.random.default_rng(2).normal(0, 0.5, D_HIDDEN), requires_grad=True)  # not just 0
    run = lambda h: final_hidden(cell, h, inputs[:T])  # noqa: E731
    backprop = mg.jacobian(run, h0).data
    return float(np.abs(backprop - central_difference_jacobian(run, h0)).max())


def gradient_through_time(cell, inputs: np.ndarray) -> np.ndarray:
    """||d h_T / d h_t|| for t = 0..T, read off by hooks on every hidden state during backward.

    Backward from each of the 16 components of h_T in turn; the hook on h_t sees
    one row of d h_T / d h_t each time and adds up its squared norm, so after 16
    passes it holds the squared Frobenius norm of the whole Jacobian.
    """
    squared = np.zeros(len(inputs) + 1)

    def record(t):
        def hook(grad):
            squared[t] += float((grad.data ** 2).sum())  # returns None: the gradient is left as it is
        return hook

    h0 = mg.zeros(D_HIDDEN, dtype=np.float64, requires_grad=True)
    h0.register_hook(record(0))
    state = cell.initial_state(h0)
    for t, x in enumerate(inputs, start=1):
        state = cell.step(state, mg.tensor(x))
        cell.hidden(state).register_hook(record(t))
    h_T = cell.hidden(state)
    for k in range(D_HIDDEN):
        mg.grad(h_T, h0, grad_outputs=np.eye(D_HIDDEN)[k], retain_graph=True)
    return np.sqrt(squared)


def plot(rnn_curve: np.ndarray, lstm_curve: np.ndarray, out_dir) -> None:
    plt = pyplot()
    if plt is None:
        return
    T = len(rnn_curve) - 1
    distance = T - np.arange(T + 1)  # how many steps h_t lies before h_T
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    ax.semilogy(distance, rnn_curve, "o-", ms=3, color="tab:red", label="RNN  (tanh recurrence)")
    ax.semilogy(distance, lstm_curve, "s-", ms=3, color="tab:blue", label="LSTM (same size, forget bias 1)")
    ax.set_xlabel(f"steps back from the last token  ({T} - t)")
    ax.set_ylabel(rf"$\|\partial h_{{{T}}} / \partial h_t\|$  (Frobenius norm)")
    ax.set_title("How much the last state still depends on earlier ones\n(backprop, recorded by hooks on each h_t)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend()
    path = save_figure(fig, out_dir / "gradient_through_time.png")
    print(f"Saved the curve to {path}")


def main(argv=None) -> dict:
    args = parse_args(argv, "rnn_vanishing_gradient", __doc__.splitlines()[0])
    np.set_printoptions(precision=3, suppress=True)
    rng = np.random.default_rng(0)
    W, U, inputs = notebook_rnn(rng)
    rnn = RNN(W, U)

    print("Step 2: the wall of recurrent networks (d h_T / d h_0 by backprop, mg.jacobian)")
    rnn_sizes = influence(rnn, inputs)
    for T in LENGTHS:
        print(f"After {T:>2} tokens, size of d h_T / d h_0: {rnn_sizes[T]:.2e}")

    errors = {T: jacobian_error(rnn, inputs, T) for T in (1, 3, 5)}
    for T, err in errors.items():
        print(f"Backprop Jacobian vs central finite differences, T = {T}: max |difference| {err:.1e}")

    print("\nThe same measurement for an LSTM with 16 hidden units (its own weights, the same tokens):")
    lstm = LSTM(np.random.default_rng(1))
    lstm_sizes = influence(lstm, inputs)
    for T in LENGTHS:
        print(f"After {T:>2} tokens, size of d h_T / d h_0: RNN {rnn_sizes[T]:.2e}   LSTM {lstm_sizes[T]:.2e}")
    lstm_error = jacobian_error(lstm, inputs, 5)
    print(f"LSTM backprop Jacobian vs central finite differences, T = 5: max |difference| {lstm_error:.1e}")

    print("\nGradient norm at every step, recorded by a hook on each h_t during backward from h_60:")
    rnn_curve, lstm_curve = gradient_through_time(rnn, inputs), gradient_through_time(lstm, inputs)
    for t in (60, 50, 40, 20, 0):
        print(f"  ||d h_60 / d h_{t:<2}||: RNN {rnn_curve[t]:.2e}   LSTM {lstm_curve[t]:.2e}")
    print(f"The hooks' value at h_0 equals the Jacobian above: {np.isclose(rnn_curve[0], rnn_sizes[60])}")
    plot(rnn_curve, lstm_curve, args.out)
    return {"rnn": rnn_sizes, "lstm": lstm_sizes, "errors": errors, "lstm_error": lstm_error,
            "rnn_curve": rnn_curve, "lstm_curve": lstm_curve}


if __name__ == "__main__":
    main()
