"""Products and arithmetic as PyTorch names them: mm, bmm, mv, outer, dot, and ``mg.add(input, other, alpha=)``.

Each checks the ranks PyTorch's does (``bmm`` takes two 3-D tensors) and applies the op table's
``matmul``, ``mul``, ``add``...; ``mg.matmul(input=a, other=b)`` takes PyTorch's keyword names.
"""

from __future__ import annotations

from ..modes import no_grad
from ..registry import OPS, apply
from ..tensor import OpError, Tensor
from .arguments import as_tensor, bind


def _ranks(who: str, a: Tensor, b: Tensor, want: tuple, then: str) -> None:
    if (a.ndim, b.ndim) != want:
        raise OpError(f"{who}: takes a {want[0]}-D and a {want[1]}-D tensor, got {a.shape} {a.dtype} and "
                      f"{b.shape} {b.dtype}; {then}")


def _product(name: str, want: tuple, then: str, doc: str):
    def product(self, other) -> Tensor:
        other = as_tensor(other, name)
        _ranks(name, self, other, want, then)
        return apply(OPS["matmul"], self, other)

    product.__name__, product.__doc__ = name, doc
    return bind("matmul", name)(product)


mm = _product("mm", (2, 2), "for batches write a @ b or mg.bmm", "The matrix product of two 2-D tensors.")
bmm = _product("bmm", (3, 3), "for other ranks write a @ b", "Batched matrix products: (B, n, m) @ (B, m, p).")
mv = _product("mv", (2, 1), "for other ranks write a @ b", "A matrix times a vector: (n, m) @ (m,) is (n,).")
dot = _product("dot", (1, 1), "for other ranks write a @ b", "The dot product of two 1-D tensors (0-d).")


@bind("mul", "outer")
def outer(self, vec2) -> Tensor:
    """The outer product of two 1-D tensors: ``out[i, j] = x[i] * y[j]``."""
    vec2 = as_tensor(vec2, "outer")
    _ranks("outer", self, vec2, (1, 1), "flatten them first")
    return apply(OPS["mul"], apply(OPS["reshape"], self, shape=(-1, 1)), vec2)


def _into(who: str, result: Tensor, out) -> Tensor:
    """PyTorch's ``out=``: the result written into ``out`` (same shape; cast to its dtype), and ``out`` returned.

    As in PyTorch, refused where the result would need a gradient: a write into ``out`` is not differentiable.
    """
    if out is None:
        return result
    if not isinstance(out, Tensor):
        raise TypeError(f"{who}: out= must be a Tensor, got {type(out).__name__}")
    if result.requires_grad:
        raise OpError(f"{who}(): functions with out=... arguments don't support automatic differentiation, but "
                      f"one of the arguments requires grad; write out = {who}(...) instead, or call it under "
                      f"mg.no_grad()")
    src, dst = result.dtype, out.dtype
    if (src != dst if who == "matmul" else (src.kind == "f" and dst.kind in "iub") or (dst.kind == "b" != src.kind)):
        raise OpError(f"{who}: out= is {dst}, the result {src}, which PyTorch does not write into it; write "
                      f"out = {who}(...) instead, or give out= dtype {src}")
    if out.shape != result.shape:
        raise OpError(f"{who}: out= has shape {out.shape}, the result {result.shape}; PyTorch would resize out "
                      f"(with a warning): write out = {who}(...) instead")
    with no_grad():
        out.copy_(result)
    return out


def matmul(input, other, *, out=None) -> Tensor:
    """``mg.matmul(a, b)`` (or ``input=``, ``other=``): ``a @ b``; ``out=t`` writes it into ``t``."""
    return _into("matmul", apply(OPS["matmul"], input, other), out)


def add(input, other, *, alpha=1, out=None) -> Tensor:
    """``input + alpha * other``."""
    return _into("add", apply(OPS["add"], input, other if alpha == 1 else apply(OPS["mul"], other, alpha)), out)


def sub(input, other, *, alpha=1, out=None) -> Tensor:
    """``input - alpha * other``."""
    return _into("sub", apply(OPS["sub"], input, other if alpha == 1 else apply(OPS["mul"], other, alpha)), out)


def mul(input, other, *, out=None) -> Tensor:
    """``input * other``."""
    return _into("mul", apply(OPS["mul"], input, other), out)


def div(input, other, *, rounding_mode=None, out=None) -> Tensor:
    """``input / other``; ``rounding_mode='floor'`` or ``'trunc'`` rounds the quotient (not differentiated then)."""
    if out is not None:
        return _into("div", div(input, other, rounding_mode=rounding_mode), out)
    quotient = apply(OPS["div"], input, other)
    if rounding_mode is None:
        return quotient
    if rounding_mode not in ("floor", "trunc"):
        raise ValueError(f"div: rounding_mode must be None, 'floor' or 'trunc', got {rounding_mode!r}")
    rounded = apply(OPS[rounding_mode], quotient)
    a = as_tensor(input, "div")
    return rounded.to(a.dtype) if a.dtype.kind in "iu" and as_tensor(other, "div").dtype.kind in "iu" else rounded


def _comparison(name: str, compare):
    def comparison(input, other, *, out=None) -> Tensor:
        return _into(name, compare(as_tensor(input, name), other), out)

    comparison.__name__ = comparison.__qualname__ = name
    comparison.__doc__ = f"``mg.{name}(input, other)``, ``x.{name}(other)``: compared elementwise (a bool tensor)."
    return bind(None, name)(comparison)


COMPARISONS = {name: _comparison(name, compare) for name, compare in (
    ("eq", lambda a, b: a == b), ("ne", lambda a, b: a != b), ("lt", lambda a, b: a < b),
    ("le", lambda a, b: a <= b), ("gt", lambda a, b: a > b), ("ge", lambda a, b: a >= b))}

bind("div", "divide")(div)
bind("mul", "multiply")(mul)
bind("sub", "subtract")(sub)

FUNCTIONS = {"mm": mm, "bmm": bmm, "mv": mv, "dot": dot, "outer": outer, "matmul": matmul, "add": add, "sub": sub,
             "subtract": sub, "mul": mul, "multiply": mul, "div": div, "divide": div, "true_divide": div,
             **COMPARISONS}
