"""What a recorded graph holds for backward, in bytes: ``graph_bytes(loss)``.

Every node of a graph keeps its output array and what its op saved for the VJP
(``_saved``: layer norm's statistics, GELU's gate), and its inputs, which are
other nodes' outputs or leaves. Those arrays stay alive until backward has
used them, so their sum is the activation memory a training step pays for.
Arrays are counted once each, by the buffer they live in (a reshape or a
transpose is a view of its input: no new bytes). The arrays the graph reads
that no op made are counted apart: constants (the data, dropout's masks, the
causal mask) and the parameters, which live whether or not a graph does.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..tensor import Tensor
from .backprop import toposort


class GraphBytes(NamedTuple):
    activations: int  # arrays made by the recorded ops (outputs and saved arrays): freed with the graph
    constants: int  # arrays it reads that need no gradient (data, masks)
    parameters: int  # leaves that require grad: they outlive the graph
    nodes: int  # recorded ops


def _buffer(array: np.ndarray) -> np.ndarray:
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


def _arrays(value):
    if isinstance(value, np.ndarray):
        yield value
    elif isinstance(value, tuple | list):
        for v in value:
            yield from _arrays(v)
    elif isinstance(value, Tensor):
        yield value.data


def graph_bytes(*roots: Tensor) -> GraphBytes:
    """The bytes the graph behind ``roots`` holds, by kind (see above), and its number of recorded ops."""
    seen: set[int] = set()
    activations = constants = parameters = nodes = 0
    for t in toposort(roots, constants=True):
        held = [t.data] if t._op is None else [t.data, *_arrays(t._saved)]
        for array in held:
            buffer = _buffer(array)
            if id(buffer) in seen:
                continue
            seen.add(id(buffer))
            if t._op is not None:
                activations += buffer.nbytes
            elif t.requires_grad:
                parameters += buffer.nbytes
            else:
                constants += buffer.nbytes
        nodes += t._op is not None
    return GraphBytes(activations, constants, parameters, nodes)
