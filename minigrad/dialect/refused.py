"""PyTorch's names minigrad does not have: reading one is an error that says what to write instead."""

from __future__ import annotations

from ..tensor import Tensor
from .arguments import bind

INSTEAD = {
    "add_": "x += v", "sub_": "x -= v", "mul_": "x *= v", "div_": "x /= v", "fill_": "x[...] = v",
    "copy_": "x[...] = src", "clamp_": "x[...] = x.clamp(lo, hi)",
    "masked_fill_": "x = x.masked_fill(mask, v)", "exp_": "x = x.exp()", "tanh_": "x = x.tanh()",
    "new_zeros": "mg.zeros(shape, dtype=x.dtype)", "new_ones": "mg.ones(shape, dtype=x.dtype)",
    "new_tensor": "mg.tensor(data, dtype=x.dtype)", "new_full": "mg.full(shape, v, dtype=x.dtype)",
    "index_select": "x[idx] (dim 0) or x[:, idx] (dim 1), idx an int64 tensor",
    "gather": "x[rows, idx] with rows = mg.arange(len(x)) (an int64 index per row)",
    "cumsum": "a sum of slices, or x.numpy().cumsum(dim) outside the graph",
    "norm": "(x ** 2).sum().sqrt()", "square": "x ** 2", "rsqrt": "x.sqrt() ** -1", "sign": "x / x.abs()",
    "unfold": "x[..., i:i + size] slices and mg.stack",
}


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
        raise AttributeError(f"'Tensor' object has no attribute {self.name!r}: minigrad spells it "
                             f"{INSTEAD[self.name]} (in-place writes under `with mg.no_grad():`, as the README's "
                             f"in-place rules say)")


for _name in INSTEAD:
    if not hasattr(Tensor, _name):  # (copy_ has since been written)
        setattr(Tensor, _name, _Refused(_name))
del _name


def _listed(self) -> list:
    """``dir(x)``, and so tab completion, without the refused names: they are not there to be used."""
    return [name for name in object.__dir__(self) if not isinstance(vars(Tensor).get(name), _Refused)]


bind(None, "__dir__")(_listed)


# --------------------------------------------------------------------------------------
