"""Exercise 8: a KV cache for a GPT, and greedy generation with it.

    python -m demos.exercises check 8

Generating token by token, a transformer without a cache reruns the whole
sequence at every step. But the keys and values of the earlier positions do
not change when a token is appended (attention is causal): keep them, and
each new token needs only its own. Your cache plugs into ``models.GPT``
(each attention layer calls ``cache.update(k, v)`` and reads ``cache.length``
for the position of the new tokens); the check generates with it and holds
tokens and logits against generation without any cache.
Read minigrad/nn/attention.py (KVCache) and models/gpt.py (generate).
"""

import numpy as np  # noqa: F401  (for your code)

import minigrad as mg
from minigrad import nn


class MyKVCache(nn.KVCache):
    """The keys and values one attention layer has computed so far: k, v (B, heads, T, head_dim).

    Starts empty: ``self.k = self.v = None`` (set by nn.KVCache's __init__).
    """

    @property
    def length(self) -> int:
        # How many positions the cache holds: 0 while empty, else the size of k's time axis (-2).
        raise NotImplementedError("exercise 8: MyKVCache.length")

    def update(self, k: mg.Tensor, v: mg.Tensor):
        # Append the new positions' keys and values, (B, heads, T_new, head_dim), after the cached
        # ones, along the time axis (-2): mg.concatenate([self.k, k], axis=-2). Return (all keys, all values).
        raise NotImplementedError("exercise 8: MyKVCache.update")


def generate_greedy(model, prompt: np.ndarray, steps: int) -> np.ndarray:
    """``prompt`` (B, T0) continued by ``steps`` tokens, each the argmax of the logits; returns (B, T0 + steps).

    One MyKVCache per block (``model.blocks``). First feed the whole prompt,
    ``model(prompt, kv_caches=caches)``, which returns (logits (B, T, vocab), loss); the
    last position's logits give the next token. From then on feed only the
    newest token, (B, 1): the caches hold the rest. Run under ``mg.no_grad()``.
    """
    raise NotImplementedError("exercise 8: generate_greedy")
