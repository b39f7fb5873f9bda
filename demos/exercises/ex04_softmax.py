"""Exercise 4: softmax and log-softmax (forward and VJP, numerically stable), and cross-entropy.

    python -m demos.exercises check 4

This time the forwards are yours too. A softmax of logits near 1000 must
not overflow: exp(1000) is inf in float64, but softmax is unchanged by
subtracting any constant from a row, so subtract the row's max first and
every exponent is at most 0. The check feeds your ops such rows.
"""

import numpy as np  # noqa: F401  (for your code)

import minigrad as mg  # noqa: F401


class my_softmax:
    """exp(x) / sum(exp(x)) over ``axis``."""

    def forward(x, *, axis=-1):
        # On ndarrays: e = exp(x - max(x)) over `axis` (keepdims=True), then e / sum(e) over `axis`.
        raise NotImplementedError("exercise 4: my_softmax.forward")

    def vjp(g, out, x, *, axis=-1):
        # With s = softmax(x), ds_i/dx_j = s_i (delta_ij - s_j), so the gradient for x is
        #   s * (g - sum(g * s))     (the sum over `axis`, keepdims=True), with s = out.
        raise NotImplementedError("exercise 4: my_softmax.vjp")


class my_log_softmax:
    """x - log(sum(exp(x))) over ``axis``."""

    def forward(x, *, axis=-1):
        # Stable: with m = max(x) over `axis`, log sum exp(x) = m + log sum exp(x - m).
        raise NotImplementedError("exercise 4: my_log_softmax.forward")

    def vjp(g, out, x, *, axis=-1):
        # d out_i / d x_j = delta_ij - softmax(x)_j, and softmax(x) = exp(out). So the gradient is
        #   g - exp(out) * sum(g)    (the sum over `axis`, keepdims=True).
        raise NotImplementedError("exercise 4: my_log_softmax.vjp")


def cross_entropy(logits: mg.Tensor, targets: np.ndarray) -> mg.Tensor:
    """The mean over rows of -log softmax(logits)[row, target]: logits (N, C), targets (N,) integers.

    Build it from your op in the table, ``mg.OPS["my_log_softmax"](logits, axis=-1)``, then
    pick each row's target entry (index with ``[np.arange(N), targets]``), negate and average.
    Its gradient then comes from your VJPs: (softmax(logits) - onehot(targets)) / N.
    """
    raise NotImplementedError("exercise 4: cross_entropy")
