"""Exercise 6: an RNN unrolled by hand, and its gradient through time.

    python -m demos.exercises check 6

The lesson ``demos/rnn_vanishing_gradient.py`` measures how much an RNN's last
hidden state still depends on its first, ||d h_T / d h_0||, by backprop
through ``nn.RNNCell``. Here you build both halves by hand: the unrolled
recurrence, from Tensor ops, and the Jacobian through time, as the product of
one factor per step, in NumPy. The check feeds them the lesson's weights and
tokens (the same seed and draw order) and holds your numbers against the
lesson's: 2.63e+00 after one token, 1.62e-13 after sixty.
"""

import numpy as np  # noqa: F401  (for your code)

import minigrad as mg  # noqa: F401


def rnn_states(W: mg.Tensor, U: mg.Tensor, xs: np.ndarray, h0: mg.Tensor) -> list[mg.Tensor]:
    """[h_0, h_1, ..., h_T] for h_t = tanh(h_{t-1} W^T + x_t U^T): h (1, D) rows, W and U (D, D), xs (T, D).

    This is ``nn.RNNCell(D, D, bias=False)`` with weight_hh = W and weight_ih = U.
    Make each x_t a (1, D) Tensor of W's dtype: ``mg.tensor(x[None]).astype(W.dtype)``.
    """
    raise NotImplementedError("exercise 6: rnn_states")


def jacobian_through_time(W: np.ndarray, states: list[np.ndarray]) -> np.ndarray:
    """d h_T / d h_0 (D, D), by hand, from W and the states [h_0, ..., h_T] (each (1, D)) of a forward pass.

    In column form h_t = tanh(W h_{t-1} + U x_t), so by the chain rule one step's
    Jacobian is d h_t / d h_{t-1} = diag(1 - h_t^2) W, and
        d h_T / d h_0 = diag(1 - h_T^2) W ... diag(1 - h_1^2) W        (the latest step leftmost)
    Start from the identity and multiply each step's factor on the left.
    (diag(d) @ W is d[:, None] * W: no need to build the diagonal matrix.)
    """
    raise NotImplementedError("exercise 6: jacobian_through_time")
