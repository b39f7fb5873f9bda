"""The wall of recurrent networks: the gradient through time vanishes, measured by backprop.

    python -m demos.rnn_vanishing_gradient [--out DIR]

Retells step 2 of the NumPy notebook "Attention and the Transformer, from
scratch" (``000_480be21528dd973b.txt`` in the project's seeds): an RNN,
h_t = tanh(W h_{t-1} + U x_t), with d_hidden = 16 and 60 random tokens, the same
seed and the same draws in the same order. The notebook multiplies the per-step
derivatives by hand; here the recurrence is ``minigrad.nn.RNNCell`` holding the
notebook's W and U, and d h_T / d h_0 is what backprop says (``mg.jacobian``,
one backward pass per row). The table is the notebook's, to the digit.

Then one step further:

1. the backprop Jacobian agrees with central finite differences (error printed);
2. an LSTM of the same size (``nn.LSTMCell``), whose cell state is an additive
   path through time, loses the first state's influence far more slowly;
3. the whole curve ||d h_60 / d h_t|| for every t, recorded with tensor hooks
   during backward (one ``register_hook`` per hidden state), drawn to
   ``gradient_through_time.png`` in ``--out``.
"""

from __future__ import annotations

import numpy as np

import minigrad as mg
from demos._common import central_difference_jacobian, parse_args, pyplot, save_figure
from minigrad import nn

D_HIDDEN, N_TOKENS = 16, 60
LENGTHS = (1, 5, 10, 20, 40, 60)


def notebook_rnn(rng: np.random.Generator):
    """The notebook's three draws, in its order: W, U, then the 60 token vectors."""
    W = rng.normal(0, 0.9 / np.sqrt(D_HIDDEN), (D_HIDDEN, D_HIDDEN))  # recurrent weights
    U = rng.normal(0, 1 / np.sqrt(D_HIDDEN), (D_HIDDEN, D_HIDDEN))  # input weights
    inputs = rng.normal(0, 1, (N_TOKENS, D_HIDDEN))  # a sequence of 60 token vectors
    return W, U, inputs


def notebook_cell(W: np.ndarray, U: np.ndarray) -> nn.RNNCell:
    """nn.RNNCell computes h' = tanh(x U^T + h W^T): the notebook's recurrence, given its W and U (float64)."""
    cell = nn.RNNCell(D_HIDDEN, D_HIDDEN, bias=False).double()
    cell.load_state_dict({"weight_hh": W, "weight_ih": U})
    return cell


def lstm_cell(rng: np.random.Generator, forget_bias: float = 1.0) -> nn.LSTMCell:
    """nn.LSTMCell of the same size. Its cell state is an additive path through time:

        c_t = f * c_{t-1} + i * g        so  d c_t / d c_{t-1} = f, with no tanh' factor shrinking it
        h_t = o * tanh(c_t)

    The forget gate's bias is raised by 1, the usual initialisation, so the gate starts mostly open.
    """
    cell = nn.LSTMCell(D_HIDDEN, D_HIDDEN, rng=rng).double()
    cell.bias_ih.data[D_HIDDEN:2 * D_HIDDEN] += forget_bias  # gates are stacked i, f, g, o
    return cell


def run(cell, h0: mg.Tensor, inputs: np.ndarray, on_step=None) -> mg.Tensor:
    """Feed ``inputs`` one token at a time from hidden state h0 (1, 16); return h_T.

    ``on_step(t, h_t)`` is called with each new hidden state (the hooks use it).
    """
    is_lstm = isinstance(cell, nn.LSTMCell)
    state = (h0, mg.zeros_like(h0)) if is_lstm else h0  # an LSTM also carries its cell state c
    for t, x in enumerate(inputs, start=1):
        state = cell(mg.tensor(x[None]), state)  # x_t as a batch of one: (1, 16)
        if on_step is not None:
            on_step(t, state[0] if is_lstm else state)
    return state[0] if is_lstm else state


def influence(cell, inputs: np.ndarray, lengths=LENGTHS) -> dict[int, float]:
    """||d h_T / d h_0|| (Frobenius, as np.linalg.norm) for each T, by reverse mode."""
    sizes = {}
    for T in lengths:
        h0 = mg.zeros(1, D_HIDDEN, dtype=np.float64, requires_grad=True)
        J = mg.jacobian(lambda h, T=T: run(cell, h, inputs[:T]), h0)  # (1, 16, 1, 16): a backward per row
        sizes[T] = float(np.linalg.norm(J.data))
    return sizes


def jacobian_error(cell, inputs: np.ndarray, T: int = 5) -> float:
    """Largest |backprop Jacobian - central differences| of h_T with respect to h_0."""
    h0 = mg.tensor(np.random.default_rng(2).normal(0, 0.5, (1, D_HIDDEN)), requires_grad=True)  # not just 0

    def h_T(h):
        return run(cell, h, inputs[:T])

    backprop = mg.jacobian(h_T, h0).numpy()
    return float(np.abs(backprop - central_difference_jacobian(h_T, h0)).max())


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

    h0 = mg.zeros(1, D_HIDDEN, dtype=np.float64, requires_grad=True)
    h0.register_hook(record(0))
    h_T = run(cell, h0, inputs, on_step=lambda t, h: h.register_hook(record(t)))
    for k in range(D_HIDDEN):
        mg.grad(h_T, h0, grad_outputs=np.eye(D_HIDDEN)[k:k + 1], retain_graph=True)
    return np.sqrt(squared)


def plot(rnn_curve: np.ndarray, lstm_curve: np.ndarray, out_dir) -> None:
    plt = pyplot()
    if plt is None:
        return
    T = len(rnn_curve) - 1
    distance = T - np.arange(T + 1)  # how many steps h_t lies before h_T
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    ax.semilogy(distance, rnn_curve, "o-", ms=3, color="tab:red", label="RNN  (tanh recurrence)")
    ax.semilogy(distance, lstm_curve, "s-", ms=3, color="tab:blue", label="LSTM (same size, forget-gate bias +1)")
    ax.set_xlabel(f"steps back from the last token  ({T} - t)")
    ax.set_ylabel(rf"$\|\partial h_{{{T}}} / \partial h_t\|$  (Frobenius norm)")
    ax.set_title("How much the last state still depends on earlier ones\n(backprop, recorded by a hook on each $h_t$)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend()
    path = save_figure(fig, out_dir / "gradient_through_time.png")
    print(f"Saved the curve to {path}")


def main(argv=None) -> dict:
    args = parse_args(argv, "rnn_vanishing_gradient", __doc__.splitlines()[0])
    rng = np.random.default_rng(0)
    W, U, inputs = notebook_rnn(rng)
    rnn = notebook_cell(W, U)

    print("Step 2: the wall of recurrent networks (d h_T / d h_0 by backprop, mg.jacobian)")
    rnn_sizes = influence(rnn, inputs)
    for T in LENGTHS:
        print(f"After {T:>2} tokens, size of d h_T / d h_0: {rnn_sizes[T]:.2e}")

    errors = {T: jacobian_error(rnn, inputs, T) for T in (1, 3, 5)}
    for T, err in errors.items():
        print(f"Backprop Jacobian vs central finite differences, T = {T}: max |difference| {err:.1e}")

    print("\nThe same measurement for an LSTM with 16 hidden units (its own weights, the same tokens):")
    lstm = lstm_cell(np.random.default_rng(1))
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
