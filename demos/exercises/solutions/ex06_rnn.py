"""Exercise 6: an RNN unrolled by hand, and its gradient through time (reference solution)."""

import numpy as np

import minigrad as mg


def rnn_states(W: mg.Tensor, U: mg.Tensor, xs: np.ndarray, h0: mg.Tensor) -> list[mg.Tensor]:
    states = [h0]
    for x in xs:
        states.append((states[-1] @ W.T + mg.tensor(x[None]).astype(W.dtype) @ U.T).tanh())
    return states


def jacobian_through_time(W: np.ndarray, states: list[np.ndarray]) -> np.ndarray:
    J = np.eye(W.shape[0])
    for h in states[1:]:
        J = ((1.0 - h.reshape(-1) ** 2)[:, None] * W) @ J
    return J
