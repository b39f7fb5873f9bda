"""Token batches and a fitting loop shared by the model tests."""

import numpy as np

VOCAB = 11  # the tiny vocabulary of every test model


def tokens(*shape, seed=0, high=VOCAB):
    """Random token ids in [0, high)."""
    return np.random.default_rng(seed).integers(0, high, size=shape)


def memorable_batch(rows=4, length=9, seed=1, vocab=VOCAB):
    """Random tokens whose every next token is set by its prefix: the rows start with different tokens.

    (And no row starts with a repeat: with RoPE alone, no absolute positions, the
    prefixes [5] and [5, 5] look the same, since attention averages identical values.)
    """
    rng = np.random.default_rng(seed)
    batch = rng.integers(0, vocab, (rows, length))
    batch[:, 0] = rng.permutation(vocab)[:rows]
    batch[:, 1] = (batch[:, 0] + rng.integers(1, vocab, rows)) % vocab
    return batch


def fit(model, optimizer, *batch, steps: int) -> float:
    """``steps`` optimizer steps on one batch (``model(*batch)`` returns ``(output, loss)``); the last loss."""
    for _ in range(steps):
        _, loss = model(*batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()
