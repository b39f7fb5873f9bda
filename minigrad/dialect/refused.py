"""PyTorch's names minigrad does not have: reading one is an error that says what to write instead."""

from __future__ import annotations

from ..tensor import Tensor
from .arguments import bind

INSTEAD = {
    "exp_": "x[...] = x.exp()", "tanh_": "x[...] = x.tanh()", "sigmoid_": "x[...] = x.sigmoid()",
    "unfold": "x[..., i:i + size] slices and mg.stack",
    "index_add": "x.scatter_add(dim, idx, src) with idx = index broadcast to src's shape",
    "nonzero": "mg.tensor(np.nonzero(x.numpy())) (an index, outside the graph)",
}


def table() -> str:
    """The names still refused, as a Markdown table: the README's list of what PyTorch has that minigrad lacks."""
    rows = [f"| `x.{name}` | `{INSTEAD[name]}` |" for name in sorted(INSTEAD)
            if isinstance(vars(Tensor).get(name), _Refused)]
    return "\n".join(["| PyTorch | minigrad |", "| --- | --- |", *rows])


class _Refused:
    """``x.add_(v)`` and the other PyTorch names minigrad lacks: reading one raises an AttributeError saying what
    to write instead.

    One descriptor per name, on ``Tensor``, rather than a ``Tensor.__getattr__``: a class with ``__getattr__``
    has every attribute read of every tensor go the slow way (Python cannot specialise them), and the engine
    reads tensors' attributes on every op and every backward node. A name no one knows gets Python's own
    AttributeError. The names stay free for ops: an op of one's own may bind ``norm`` (``registry._bound_by``).
    """

    _bound_by_op = None  # (registry: not taken)

    def __init__(self, name: str):
        self.name = name

    def __get__(self, tensor, owner=None):
        in_place = " (an in-place write, recorded in the graph as PyTorch's)" if self.name.endswith("_") else ""
        raise AttributeError(f"'Tensor' object has no attribute {self.name!r}: minigrad spells it "
                             f"{INSTEAD[self.name]}{in_place}")


for _name in INSTEAD:
    if not hasattr(Tensor, _name):  # (an op of one's own may have taken the name first)
        setattr(Tensor, _name, _Refused(_name))
del _name


def _listed(self) -> list:
    """``dir(x)``, and so tab completion, without the refused names: they are not there to be used."""
    return [name for name in object.__dir__(self) if not isinstance(vars(Tensor).get(name), _Refused)]


bind(None, "__dir__")(_listed)


# --------------------------------------------------------------------------------------
