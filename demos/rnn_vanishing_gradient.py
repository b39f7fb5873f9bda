# %% [markdown]
# # Why recurrent networks forget: the gradient through time, measured by backprop
#
#     python -m demos.rnn_vanishing_gradient [--out DIR]     (draws gradient_through_time.png into DIR)
#
# A recurrent network (RNN) reads a text one token at a time and carries a hidden
# state from each token to the next: h_t = tanh(W h_{t-1} + U x_t). Whatever the
# first token said has to survive every later step. How much does the last state
# still depend on the first one? That is the Jacobian d h_T / d h_0, a product of
# one 16 x 16 factor per step, diag(1 - h_t^2) W. A product of many factors that
# shrink vectors shrinks exponentially: the vanishing gradient, along the
# sequence instead of along the layers.
#
# Written out by hand, that product is a loop of matrix multiplications. Here
# nothing is written by hand: the recurrence is `minigrad.nn.RNNCell`, and
# `mg.jacobian` gets d h_T / d h_0 by backprop, one backward pass per row of the
# Jacobian. Then the lesson goes one step further: it checks those Jacobians
# against finite differences, measures an LSTM of the same size, and records the
# gradient at every step of the sequence with tensor hooks.
#
# Each `# %%` line starts a cell: open the file in Jupyter (with jupytext) or VS
# Code to run it cell by cell, or run it whole as a script.

# %%
import numpy as np

import minigrad as mg
from demos._common import central_difference_jacobian, parse_args, pyplot, save_figure
from minigrad import nn

args = parse_args(None, "rnn_vanishing_gradient",
                  "Why recurrent networks forget: d h_T / d h_0 by backprop, RNN against LSTM.")

# %% [markdown]
# ## 1. An RNN with 16 hidden units, and 60 random tokens
#
# The weights are random, as before any training. W, the recurrent matrix, has
# entries of standard deviation 0.9 / sqrt(16), so on its own it shrinks a vector
# slightly; U, the input matrix, 1 / sqrt(16). The 60 token vectors are standard
# normal. Drawn from `np.random.default_rng(0)` in this order: W, U, the tokens.
#
# `nn.RNNCell` computes h' = tanh(x U^T + h W^T), the same recurrence (its weights
# are named `weight_hh` for W and `weight_ih` for U); it gets no bias here.

# %%
D_HIDDEN, N_TOKENS = 16, 60
rng = np.random.default_rng(0)
W = rng.normal(0, 0.9 / np.sqrt(D_HIDDEN), (D_HIDDEN, D_HIDDEN))  # recurrent weights
U = rng.normal(0, 1 / np.sqrt(D_HIDDEN), (D_HIDDEN, D_HIDDEN))  # input weights
inputs = rng.normal(0, 1, (N_TOKENS, D_HIDDEN))  # a sequence of 60 token vectors


def rnn_cell_with(W: np.ndarray, U: np.ndarray) -> nn.RNNCell:
    """nn.RNNCell holding W and U, in float64 (for checking against finite differences)."""
    cell = nn.RNNCell(D_HIDDEN, D_HIDDEN, bias=False).double()
    cell.load_state_dict({"weight_hh": W, "weight_ih": U})
    return cell


def run(cell, h0: mg.Tensor, inputs: np.ndarray, on_step=None) -> mg.Tensor:
    """Feed ``inputs`` one token at a time from hidden state h0 (1, 16); return h_T.

    ``on_step(t, h_t)`` is called with each new hidden state (the hooks of section 5 use it).
    """
    is_lstm = isinstance(cell, nn.LSTMCell)
    state = (h0, mg.zeros_like(h0)) if is_lstm else h0  # an LSTM also carries its cell state c
    for t, x in enumerate(inputs, start=1):
        state = cell(mg.tensor(x[None]), state)  # x_t as a batch of one: (1, 16)
        if on_step is not None:
            on_step(t, state[0] if is_lstm else state)
    return state[0] if is_lstm else state


rnn = rnn_cell_with(W, U)

# %% [markdown]
# ## 2. How much h_T still depends on h_0
#
# For each length T, backprop gives the whole Jacobian d h_T / d h_0 (16 x 16).
# Its size is printed as the Frobenius norm: the square root of the sum of its
# 256 squared entries (what `np.linalg.norm` computes for a matrix). The identity
# matrix of size 16, "h_T is h_0", would have norm 4.

# %%
LENGTHS = (1, 5, 10, 20, 40, 60)


def influence(cell, inputs: np.ndarray, lengths=LENGTHS) -> dict[int, float]:
    """||d h_T / d h_0|| (Frobenius) for each T, by reverse mode."""
    sizes = {}
    for T in lengths:
        h0 = mg.zeros(1, D_HIDDEN, dtype=np.float64, requires_grad=True)
        J = mg.jacobian(lambda h, T=T: run(cell, h, inputs[:T]), h0)  # (1, 16, 1, 16): a backward per row
        sizes[T] = float(np.linalg.norm(J.data))
    return sizes


print("RNN, h_0 = 0: Frobenius norm of the 16 x 16 Jacobian d h_T / d h_0, by backprop (mg.jacobian)")
rnn_sizes = influence(rnn, inputs)
for T in LENGTHS:
    print(f"After {T:>2} tokens, Frobenius norm of d h_T / d h_0: {rnn_sizes[T]:.2e}")

# %% [markdown]
# After one token the first state still matters (a norm of order 1); after 20
# tokens its influence is down to about 2 in 10,000, and after 60 it is 1e-13,
# zero in practice. Training cannot learn that a word at the end depends on one
# at the start when the gradient connecting them is this small.
#
# ## 3. Is backprop right? Central finite differences
#
# Each entry of the Jacobian again, from (h_T(h_0 + eps e_j) - h_T(h_0 - eps e_j)) / 2 eps
# with eps = 1e-6, one input entry j at a time. The starting state is random here
# (not 0), so that tanh is tested away from its centre too.

# %%
def jacobian_error(cell, inputs: np.ndarray, T: int = 5) -> float:
    """Largest |backprop Jacobian - central differences| of h_T with respect to h_0."""
    h0 = mg.tensor(np.random.default_rng(2).normal(0, 0.5, (1, D_HIDDEN)), requires_grad=True)  # not just 0

    def h_T(h):
        return run(cell, h, inputs[:T])

    backprop = mg.jacobian(h_T, h0).numpy()
    return float(np.abs(backprop - central_difference_jacobian(h_T, h0)).max())


errors = {T: jacobian_error(rnn, inputs, T) for T in (1, 3, 5)}
for T, err in errors.items():
    print(f"RNN, T = {T}: largest |backprop - central difference| over the 256 entries of d h_T / d h_0: "
          f"{err:.1e}")

# %% [markdown]
# ## 4. An LSTM of the same size
#
# An LSTM keeps, beside h, a cell state c that is updated by addition:
#
#     c_t = f * c_{t-1} + i * g        so  d c_t / d c_{t-1} = f, with no tanh' factor shrinking it
#     h_t = o * tanh(c_t)
#
# The forget gate f decides how much of c to keep. Its bias is raised by 1, the
# usual initialisation, so the gate starts mostly open. Same size (16), its own
# random weights (seed 1), the same 60 tokens, the same measurement.

# %%
def lstm_cell(rng: np.random.Generator, forget_bias: float = 1.0) -> nn.LSTMCell:
    """nn.LSTMCell with 16 hidden units, float64, its forget gate's bias raised by ``forget_bias``."""
    cell = nn.LSTMCell(D_HIDDEN, D_HIDDEN, rng=rng).double()
    with mg.no_grad():  # an in-place change of a weight, as an optimizer makes (counted on its version)
        cell.bias_ih[D_HIDDEN:2 * D_HIDDEN] += forget_bias  # gates are stacked i, f, g, o
    return cell


lstm = lstm_cell(np.random.default_rng(1))
lstm_sizes = influence(lstm, inputs)
print("Frobenius norm of d h_T / d h_0, h_0 = 0 (and c_0 = 0 for the LSTM):")
for T in LENGTHS:
    print(f"After {T:>2} tokens, Frobenius norm of d h_T / d h_0: RNN {rnn_sizes[T]:.2e}   LSTM {lstm_sizes[T]:.2e}")
lstm_error = jacobian_error(lstm, inputs, 5)
print(f"LSTM, T = 5: largest |backprop - central difference| over the 256 entries of d h_T / d h_0: "
      f"{lstm_error:.1e}")

# %% [markdown]
# After 60 tokens the LSTM's first state still counts several million times more
# than the RNN's: it forgets too, but far more slowly.
#
# ## 5. The gradient at every step, recorded by hooks
#
# `mg.jacobian` answered one T at a time. One backward pass from h_60 passes
# through every earlier h_t, and a hook registered on h_t (`register_hook`) sees
# the gradient arriving there. Backward from each of the 16 components of h_60
# in turn: the hook on h_t sees one row of d h_60 / d h_t each time and adds up
# its squared entries, so after 16 passes it holds the squared Frobenius norm of
# the whole Jacobian d h_60 / d h_t.

# %%
def gradient_through_time(cell, inputs: np.ndarray) -> np.ndarray:
    """||d h_T / d h_t|| (Frobenius) for t = 0..T, read off by hooks on every hidden state during backward."""
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


rnn_curve, lstm_curve = gradient_through_time(rnn, inputs), gradient_through_time(lstm, inputs)
print("Frobenius norm of d h_60 / d h_t, read by a hook on each h_t during backward from h_60:")
for t in (60, 50, 40, 20, 0):
    print(f"  ||d h_60 / d h_{t:<2}||: RNN {rnn_curve[t]:.2e}   LSTM {lstm_curve[t]:.2e}")
print("(at t = 60 the Jacobian is the 16 x 16 identity, whose Frobenius norm is 4)")
print(f"The hooks' norm at h_0 equals the norm mg.jacobian gave for d h_60 / d h_0: "
      f"{np.isclose(rnn_curve[0], rnn_sizes[60])}")

# %% [markdown]
# ## 6. The whole curve
#
# Every step back in time, on a log scale: the RNN's line falls straight (an
# exponential decay), the LSTM's far more gently. Saved as
# `gradient_through_time.png` in `--out` (default `out/rnn_vanishing_gradient`).

# %%
def plot(rnn_curve: np.ndarray, lstm_curve: np.ndarray, out_dir):
    plt = pyplot()
    if plt is None:
        return None
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
    return path


picture = plot(rnn_curve, lstm_curve, args.out)
