"""The spelling, checked as test_torch_opinfo.py checks the values: PyTorch's calls run on both engines.

Each row of ``TORCH_ROWS`` is one line of PyTorch code over the surface learners bring (reductions with
every dim / keepdim / correction form, positional and keyword, negative dims, 0-d and empty inputs; the
shape methods; split and chunk; the (values, indices) returns; the module functions; constructors, dtype
names and random draws). ``T`` is ``torch`` on one side and ``minigrad`` on the other, ``F`` their
``nn.functional``, ``x`` a float64 input that requires grad. Both engines run the line and must agree on
value, shape, dtype and the gradient of a weighted sum of every float output; where PyTorch raises,
minigrad must raise too. A row where both run and disagree is a silent difference: there are none.

Each row of ``NUMPY_ROWS`` is NumPy's keyword form of a call, compared with NumPy itself. Each row of
``UNSUPPORTED`` is a spelling minigrad refuses: its message names the code to write, and that code runs.

torch is optional: without it the PyTorch rows skip and the NumPy rows still run. ``make test`` runs every
second row of the generated reduction and NumPy tables (the hand-written rows all); the CI profile
(``MINIGRAD_HYPOTHESIS_PROFILE=ci``) runs every row.
"""

from __future__ import annotations

import itertools
import os
import warnings

import numpy as np
import pytest

import minigrad as mg
from minigrad.nn import functional as mg_F

try:
    import torch
    import torch.nn.functional as torch_F
except ImportError:  # pragma: no cover
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")

# --------------------------------------------------------------------------------------
# The table of PyTorch calls: (code, input shape or None)
# --------------------------------------------------------------------------------------

SHAPES = [(3, 4), (2, 3, 4), (), (0, 3)]


def _dims(shape):
    """The dims worth naming for ``shape``: each positive and negative one, and a pair."""
    n = len(shape)
    dims = sorted({d for i in range(builtins_max(n, 1)) for d in (i, i - builtins_max(n, 1))})
    return dims + ([(0, -1)] if n >= 2 else [])


builtins_max = max


def _reduction_rows() -> list:
    rows = []
    for shape in SHAPES:
        for name in ("sum", "mean", "amax", "amin", "logsumexp", "prod"):
            if name != "logsumexp":
                rows.append((f"x.{name}()", shape))
            for dim in _dims(shape):
                if name == "prod" and isinstance(dim, tuple):
                    continue  # (torch.prod takes one dim)
                rows += [(f"x.{name}({dim!r})", shape), (f"x.{name}(dim={dim!r})", shape),
                         (f"x.{name}({dim!r}, True)", shape), (f"x.{name}({dim!r}, keepdim=True)", shape),
                         (f"x.{name}(dim={dim!r}, keepdim=False)", shape), (f"T.{name}(x, {dim!r})", shape)]
        for name in ("var", "std"):
            rows += [(f"x.{name}()", shape), (f"T.{name}(x)", shape), (f"x.{name}(unbiased=False)", shape),
                     (f"x.{name}(False)", shape), (f"x.{name}(correction=0)", shape)]
            for dim in _dims(shape):
                rows += [(f"x.{name}({dim!r})", shape), (f"x.{name}(dim={dim!r})", shape),
                         (f"x.{name}({dim!r}, keepdim=True)", shape), (f"x.{name}({dim!r}, True, True)", shape),
                         (f"x.{name}({dim!r}, False)", shape), (f"x.{name}({dim!r}, unbiased=False)", shape)]
                rows += [(f"x.{name}({dim!r}, keepdim={k}, correction={c})", shape)
                         for k, c in itertools.product((True, False), (0, 1, 2) if shape else (0, 1))]
        for name in ("max", "min"):
            rows.append((f"x.{name}()", shape))
            rows.append((f"T.{name}(x)", shape))
            for dim in _dims(shape):
                if isinstance(dim, tuple):
                    continue
                rows += [(f"x.{name}({dim})", shape), (f"x.{name}(dim={dim})", shape),
                         (f"x.{name}({dim}, keepdim=True)", shape), (f"x.{name}({dim}, True).values", shape),
                         (f"x.{name}({dim}).indices", shape), (f"T.{name}(x, {dim})[0]", shape),
                         (f"T.{name}(x, dim={dim}, keepdim=True).indices", shape)]
        for name in ("argmax", "argmin"):
            rows.append((f"x.{name}()", shape))
            for dim in _dims(shape):
                if not isinstance(dim, tuple):
                    rows += [(f"x.{name}({dim})", shape), (f"x.{name}(dim={dim}, keepdim=True)", shape),
                             (f"T.{name}(x, {dim})", shape)]
        for name in ("all", "any"):
            rows += [(f"(x > 0).{name}()", shape)]
            rows += [(f"(x > 0).{name}({dim})", shape) for dim in _dims(shape) if not isinstance(dim, tuple)]
            rows += [(f"(x > 0).{name}(dim={dim}, keepdim=True)", shape) for dim in _dims(shape)
                     if not isinstance(dim, tuple)]
    return rows


def _sort_rows() -> list:
    rows = []
    for shape in ((5,), (3, 4), (2, 3, 4), ()):
        for dim in _dims(shape):
            if isinstance(dim, tuple):
                continue
            rows += [(f"x.sort({dim})", shape), (f"x.sort(dim={dim}, descending=True)", shape),
                     (f"x.sort({dim}, True).values", shape), (f"T.sort(x, {dim}).indices", shape),
                     (f"x.argsort({dim})", shape), (f"x.topk(1, {dim})", shape), (f"x.sort(axis={dim})", shape),
                     (f"x.topk(1, dim={dim}, largest=False)", shape)]
        if shape:
            rows += [(f"x.topk({min(shape[-1], 2)})", shape), (f"T.topk(x, {min(shape[-1], 3)}).indices", shape)]
    return rows


def _shape_rows() -> list:
    rows = []
    for shape in ((3, 4), (2, 3, 4), (2, 3, 4, 5)):
        n = len(shape)
        for a, b in itertools.combinations(range(-n, n), 2):
            rows.append((f"x.transpose({a}, {b})", shape))
        rows += [(f"T.transpose(x, 0, {n - 1})", shape), ("x.transpose(-2, -1)", shape), ("x.mT", shape),
                 ("x.swapaxes(0, 1)", shape), ("x.permute(" + ", ".join(map(str, reversed(range(n)))) + ")", shape),
                 ("x.permute(" + str(tuple(reversed(range(n)))) + ")", shape), ("x.flatten()", shape),
                 ("x.flatten(1)", shape), ("x.flatten(0, 1)", shape), ("x.flatten(start_dim=-2)", shape),
                 ("x.view(-1)", shape), (f"x.view({shape[0]}, -1)", shape), (f"x.reshape(({shape[0]}, -1))", shape),
                 ("x.unsqueeze(0)", shape), ("x.unsqueeze(-1)", shape), (f"x.unsqueeze({n})", shape),
                 ("x.unsqueeze(1).squeeze(1)", shape), ("x.squeeze(0)", shape), ("x.unsqueeze(0).squeeze()", shape),
                 ("x.contiguous()", shape), ("x.repeat(" + ", ".join(["2"] + ["1"] * (n - 1)) + ")", shape),
                 ("x.repeat(" + ", ".join(["1"] * n + ["2"]) + ")".replace("2)", "2)"), shape),
                 ("x.unsqueeze(0).expand(2, " + ", ".join(["-1"] * n) + ")", shape),
                 ("x[..., :1].expand(" + ", ".join(map(str, shape)) + ")", shape),
                 (f"x.size({-1})", shape), ("x.size()", shape), ("x.dim()", shape), ("x.nelement()", shape),
                 ("x.numel()", shape), ("x.T" if n == 2 else "x.mT", shape), ("x.t()" if n == 2 else "x.mT", shape)]
        for dim in range(-n, n):
            size = shape[dim]
            rows += [(f"x.split(1, {dim})", shape), (f"x.split(2, dim={dim})", shape),
                     (f"x.split({size})", shape) if dim == 0 else (f"x.split({size}, {dim})", shape),
                     (f"x.split([1, {size - 1}], {dim})", shape), (f"T.split(x, 2, {dim})", shape),
                     (f"x.chunk(2, {dim})", shape), (f"x.chunk(3, dim={dim})", shape), (f"T.chunk(x, 2, {dim})", shape),
                     (f"x.unbind({dim})", shape), (f"T.cat([x, x * 2], {dim})", shape),
                     (f"T.cat((x, x), dim={dim})", shape), (f"T.stack([x, x], {dim})", shape),
                     (f"T.stack([x, -x], dim={dim})", shape)]
    rows += [("x.split(64, 2)", (2, 3, 192)), ("x.split(3, dim=2)", (2, 3, 7)), ("x.split([2, 5], 2)", (2, 3, 7)),
             ("x.chunk(4, -1)", (2, 6)), ("x.chunk(3)", (7,))]
    return rows


def _function_rows() -> list:
    rows = []
    for name in ("tanh", "exp", "sigmoid", "relu", "abs", "neg"):
        rows += [(f"T.{name}(x)", (3, 4)), (f"x.{name}()", (3, 4)), (f"T.{name}(x)", ())]
    for name in ("sqrt", "log", "log10", "log2"):
        rows += [(f"T.{name}(x.abs() + 0.5)", (3, 4)), (f"(x.abs() + 0.5).{name}()", (3, 4))]
    rows += [("T.tril(x)", (4, 4)), ("T.tril(x, 1)", (4, 4)), ("T.triu(x, diagonal=-1)", (2, 4, 4)),
             ("x.tril(-1)", (3, 5)), ("x.triu()", (3, 5)),
             ("T.where(x > 0, x, 0.0)", (3, 4)), ("T.where(x > 0, x, x * 2)", (3, 4)),
             ("T.allclose(x, x + 1e-9)", (3, 4)), ("T.allclose(x, x + 1)", (3, 4)),
             ("T.isclose(x, x + 1e-9)", (3, 4)), ("T.isclose(x, x * 2, rtol=0.1, atol=0.0)", (3, 4)),
             ("x.clamp(min=-0.5)", (3, 4)), ("x.clamp(-0.5, 0.5)", (3, 4)), ("x.clamp(max=0.1)", (3, 4)),
             ("T.clamp(x, -1.0, 1.0)", (3, 4)), ("x.clip(-0.5, 0.5)", (3, 4)),
             ("x.softmax(-1)", (3, 4)), ("x.softmax(dim=0)", (3, 4)), ("T.softmax(x, 1)", (2, 3, 4)),
             ("x.log_softmax(-1)", (3, 4)), ("T.log_softmax(x, dim=0)", (3, 4)),
             ("F.softmax(x, dim=-1)", (2, 3, 4)), ("F.softmax(x, -1)", (3, 4)), ("F.softmax(x, dim=1)", (3, 4)),
             ("F.log_softmax(x, dim=-1)", (2, 3, 4)), ("F.log_softmax(x, 1)", (3, 4)),
             ("F.one_hot(T.tensor([0, 2, 1]), 4)", None), ("F.one_hot(T.tensor([[0, 2], [1, 1]]))", None),
             ("F.cross_entropy(x, T.tensor([0, 3, 1]))", (3, 4)),
             ("F.tanh(x)", (3, 4)), ("F.relu(x)", (3, 4)), ("F.gelu(x)", (3, 4)),
             ("x.pow(2)", (3, 4)), ("x ** 2", (3, 4)), ("(x.abs() + 0.5).pow(0.5)", (3, 4)),
             ("x.max(x * 0.5)", (3, 4)), ("T.max(x, -x)", (3, 4)), ("x.min(-x)", (3, 4)),
             ("T.maximum(x, -x)", (3, 4)), ("T.minimum(x, x * 2)", (3, 4)),
             ("x.masked_fill(x > 0, 0.0)", (3, 4)), ("x.masked_fill(T.tril(T.ones(4, 4)) == 0, float('-inf'))", (4, 4)),
             ("x @ x.transpose(0, 1)", (3, 4)), ("T.matmul(x, x.T)", (3, 4)), ("x.matmul(x.mT)", (2, 3, 4)),
             ("x.sum(0).item()", (3,)), ("x.mean().item()", (3, 4)), ("x.max().item()", (3, 4)),
             ("x.float()", (3, 4)), ("x.double()", (3, 4)), ("x.long()", (3, 4)), ("x.int()", (3, 4)),
             ("x.bool()", (3, 4)), ("x.to(T.float32)", (3, 4)), ("x.to(T.float64)", (3, 4)),
             ("x.to(dtype=T.long)", (3, 4)), ("x.to('cpu')", (3, 4)), ("x.to('cpu', T.float32)", (3, 4)),
             ("x.to(device='cpu', dtype=T.float32)", (3, 4)), ("x.cpu()", (3, 4)), ("x.type(T.float32)", (3, 4)),
             ("x.to(T.tensor([1]))", (3, 4)), ("x.half().float()", (3, 4)),
             ("x.clone()", (3, 4)), ("x.detach()", (3, 4)), ("x.exp().log()", ()), ("abs(x)", (3,)),
             ("x.repeat_interleave(2)", (2, 3)), ("x.repeat_interleave(2, dim=1)", (2, 3)),
             ("x.view_as(x.T)", (3, 4)), ("x.expand_as(T.zeros(2, 3, 4, dtype=T.float64))", (3, 4)),
             ("x.reshape_as(x.T)", (3, 4)), ("T.zeros_like(x)", (3, 4)),
             ("T.ones_like(x)", (3, 4)), ("T.full_like(x, 7.0)", (3, 4)), ("T.zeros_like(x, dtype=T.long)", (3, 4))]
    return rows


def _surface_rows() -> list:
    """The namespace PyTorch's beginner material uses: elementwise math, running sums, norms, gather/scatter,
    the products, PyTorch's keyword names, the new_* constructors, in-place arithmetic and the defaults."""
    rows = []
    for name in ("sin", "cos", "expm1", "floor", "ceil", "trunc", "round", "sign", "square", "erf"):
        rows += [(f"T.{name}(x)", (3, 4)), (f"x.{name}()", (2, 3)), (f"T.{name}(x)", ())]
    for name in ("log1p", "reciprocal", "rsqrt"):
        rows += [(f"T.{name}(x.abs() + 0.5)", (3, 4)), (f"(x.abs() + 0.5).{name}()", (3, 4))]
    rows += [("x.round(decimals=2)", (3, 4)), ("T.round(x * 10, decimals=1)", (3, 4))]
    for dim in (0, 1, -1):
        rows += [(f"x.cumsum({dim})", (3, 4)), (f"T.cumsum(x, dim={dim})", (3, 4)), (f"x.cumprod({dim})", (3, 4)),
                 (f"T.cumprod(x, {dim})", (2, 3)), (f"x.norm(dim={dim})", (3, 4)),
                 (f"x.norm(2, {dim}, keepdim=True)", (3, 4)), (f"T.norm(x, p=1, dim={dim})", (3, 4))]
    rows += [("x.cumsum(0)", (5,)), ("x.cumprod(0)", (5,)), ("x.cumsum(dim=0, dtype=T.float32)", (3,)),
             ("x.norm()", (3, 4)), ("T.norm(x)", (2, 3, 4)), ("x.norm(p='fro')", (3, 4)), ("x.norm(1)", (3, 4)),
             ("x.norm(float('inf'))", (3, 4)), ("x.norm(3)", (3, 4)), ("(x * 0).norm()", (3, 4)),
             ("(x * 0).norm(dim=1)", (3, 4)),
             ("T.gather(x, 1, T.tensor([[0, 0], [1, 3], [2, 1]]))", (3, 4)),
             ("x.gather(0, T.tensor([[2, 1, 0, 0]]))", (3, 4)),
             ("T.take_along_dim(x, T.tensor([[0], [3], [1]]), dim=1)", (3, 4)),
             ("T.take_along_dim(x, T.tensor([5, 0]))", (3, 4)),
             ("x.take_along_dim(x.argmax(1, keepdim=True), 1)", (3, 4)),
             ("x.index_select(0, T.tensor([2, 0, 2]))", (3, 4)), ("T.index_select(x, 1, T.tensor([3, 1]))", (3, 4)),
             ("x.scatter_add(1, T.tensor([[0, 0], [1, 3], [2, 1]]), x[:, :2] * 2)", (3, 4)),
             ("T.scatter_add(x, 0, T.tensor([[2, 1, 0, 0]]), x[:1] + 1)", (3, 4)),
             ("x.scatter(1, T.tensor([[0, 1], [1, 3], [2, 0]]), x[:, 2:] * 3)", (3, 4)),
             ("x.scatter(0, T.tensor([[1, 0, 2, 1]]), 0.5)", (3, 4)),
             ("x.scatter(1, T.tensor([[0], [1], [2]]), value=-1.0)", (3, 4)),
             ("T.mm(x, x.T)", (3, 4)), ("x.mm(x.T)", (3, 4)), ("T.bmm(x, x.transpose(1, 2))", (2, 3, 4)),
             ("x.bmm(x.mT)", (2, 3, 4)), ("T.mv(x, x[0])", (3, 3)), ("x.mv(x[:, 0])", (3, 3)),
             ("T.outer(x, x * 2)", (4,)), ("x.outer(x)", (3,)), ("T.dot(x, x + 1)", (4,)), ("x.dot(x)", (4,)),
             ("T.mm(x, x)", (2, 3, 4)), ("T.bmm(x, x.T)", (3, 4)), ("T.dot(x, x)", (3, 4)),
             ("T.matmul(input=x, other=x.T)", (3, 4)), ("T.add(x, x, alpha=2)", (3, 4)),
             ("T.add(input=x, other=1.5)", (3, 4)), ("T.sub(x, x * 3, alpha=0.5)", (3, 4)),
             ("T.mul(x, other=x)", (3, 4)), ("T.div(x, 2.0)", (3, 4)), ("T.divide(x, x.abs() + 1)", (3, 4)),
             ("T.div(x, 0.3, rounding_mode='floor')", (3, 4)), ("T.div(x * 10, 3, rounding_mode='trunc')", (3, 4)),
             ("T.true_divide(x, 4)", (3, 4)), ("T.subtract(x, 1.0)", (3, 4)), ("T.multiply(x, 3)", (3, 4)),
             ("x.divide(2.0)", (3, 4)), ("x.multiply(x)", (3, 4)), ("x.subtract(x * 2)", (3, 4)),
             ("T.tensor([7, -7]) // 2", None), ("7 % T.tensor([3, -4, 5])", None), ("T.tensor([7, -7]) % 3", None),
             ("T.tensor([1, 2]) / T.tensor([2, 4])", None), ("T.tensor([1, 2]) / 2", None),
             ("x.new_zeros(2, 3)", (3,)), ("x.new_zeros((2,))", (3,)), ("x.new_ones(2)", (3,)),
             ("x.new_full((2, 2), 7.0)", (3,)), ("x.new_tensor([1.0, 2.0])", (3,)), ("x.new_empty(2).shape", (3,)),
             ("x.long().new_zeros(2)", (3,)), ("x.new_zeros(2, dtype=T.int64)", (3,)),
             ("x.detach().clone().add_(1.0)", (3,)), ("x.detach().clone().sub_(x.detach(), alpha=2)", (3,)),
             ("x.detach().clone().mul_(3)", (3,)), ("x.detach().clone().div_(2)", (3,)),
             ("x.detach().clone().fill_(0.5)", (3,)), ("T.zeros(3).fill_(2)", None),
             ("T.get_default_dtype()", None), ("T.set_default_dtype(T.float32)", None),
             ("T.cuda.is_available()", None),
             ("T.cuda.manual_seed_all(0)", None), ("T.cuda.manual_seed(1)", None),
             ("T.accelerator.is_available()", None), ("T.accelerator.current_accelerator()", None),
             ("T.backends.mps.is_available()", None), ("T.backends.mps.is_built()", None),
             ("T.backends.cudnn.is_available()", None), ("T.backends.cuda.matmul.allow_tf32", None),
             ("x.float().unsqueeze(-1).pow(T.tensor([1, 2, 3]))", (4,)), ("x.float() * T.tensor([1, 2, 3])", (3,)),
             ("T.arange(3) * 0.5", None), ("T.arange(3) / 2", None), ("T.arange(3) * T.tensor(1.5)", None),
             ("T.tensor([True, False]) + T.tensor([1, 2])", None), ("T.tensor([True, False]) - 1", None),
             ("T.matmul(x.detach(), x.detach().T, out=T.zeros(3, 3))", (3, 4)),
             ("T.matmul(x.detach(), x.detach().T, out=T.zeros(3, 3, dtype=T.float64))", (3, 4)),
             ("T.mul(x.detach(), 2, out=T.zeros(3, 4))", (3, 4)),
             ("T.mul(x.detach(), 2, out=T.zeros(3, 4).long())", (3, 4)),
             ("T.mul(x.detach(), 2, out=T.zeros(3, 4, dtype=T.float64))", (3, 4)),
             ("T.add(T.ones(2), T.ones(2), alpha=3, out=T.zeros(2))", None),
             ("T.div(T.tensor([7.0, -7.0]), 2, rounding_mode='floor', out=T.zeros(2))", None),
             ("T.mul(x, x, out=T.zeros(3, 4, dtype=T.float64))", (3, 4)),
             ("T.rand_like(x).shape", (3, 4)), ("T.rand_like(x).dtype", (3, 4)),
             ("T.rand_like(T.ones(2, dtype=T.int64), dtype=T.float).dtype", None),
             ("T.rand_like(T.ones(2, dtype=T.int64))", None), ("T.randn_like(x.float()).dtype", (2, 3)),
             ("T.nn.Softmax(dim=1)(x)", (3, 4)), ("T.nn.Softmax(-1)(x)", (2, 3, 4)),
             ("T.nn.LogSoftmax(dim=1)(x)", (3, 4)), ("T.nn.LogSoftmax(dim=0)(x)", (2, 3)),
             ("x.grad_fn is None", (3,)), ("(x * 2).grad_fn is None", (3,)),
             ("x.detach().exp().grad_fn is None", (3,)),
             ("T.zeros(10, dtype=T.float).scatter_(0, T.tensor(3), value=1)", None),
             ("x.detach().clone().scatter_(1, T.tensor([[0], [2], [1]]), value=-1.0)", (3, 4)),
             ("x.detach().clone().scatter_(1, T.tensor([[0, 1], [1, 3], [2, 0]]), x.detach()[:, 2:] * 3)", (3, 4)),
             ("(x * 1).scatter_(0, T.tensor([[1, 0, 2, 1]]), x[:1] * 2)", (3, 4)),
             ("x.detach().clone().scatter_add_(0, T.tensor([[2, 1, 0, 0]]), x.detach()[:1])", (3, 4)),
             ("(x + 0).scatter_add_(1, T.tensor([[0, 0], [1, 3], [2, 1]]), x[:, :2] * 2)", (3, 4)),
             ("x.scatter(0, T.tensor(1), 5.0)", (4,)), ("x.scatter(0, T.tensor(2), x[0])", (4,)),
             ("x.detach().scatter_(0, T.tensor([1]), 0.5)", (3,)),
             ("T.eq(x, x[0])", (3, 4)), ("x.ne(0.5)", (3, 4)), ("T.lt(x, 0)", (3,)), ("x.le(x.T)", (3, 3)),
             ("T.gt(input=x, other=-0.1)", (3, 4)), ("x.ge(x)", (2, 3)), ("T.eq(T.tensor([1, 2]), 2)", None),
             ("T.eq(x, 0, out=T.zeros(3, dtype=T.bool))", (3,)),
             ("T.eq(T.tensor([1.0, 2.0]), T.tensor([1, 2])).sum().item()", None),
             ("x.type(T.LongTensor)", (3,)), ("(x * 4).type(T.IntTensor)", (3,)), ("x.type(T.FloatTensor)", (2, 3)),
             ("x.type(T.DoubleTensor)", (3,)), ("x.type('torch.LongTensor')", (3,)),
             ("(x > 0).type(T.BoolTensor)", (3,)), ("T.zeros(2, dtype=T.LongTensor)", None),
             ("x.type(T.ByteTensor)", (3,)),
             ("x.to(T.LongTensor)", (3,)), ("T.LongTensor([1, 2])", None), ("T.FloatTensor([[1, 2]])", None),
             ("T.FloatTensor(2, 3).shape", None), ("T.DoubleTensor((1.5,))", None), ("T.BoolTensor([True])", None),
             ("T.LongTensor(3).dtype", None),
             ("T.nn.Parameter(x.detach()).requires_grad", (3,)),
             ("T.nn.Parameter(x.detach(), False).requires_grad", (3,)),
             ("T.nn.Parameter(x.detach(), requires_grad=False) * 2", (3,)),
             ("T.inference_mode()(lambda: x * 2)()", (3,)),
             ("isinstance(T.random.manual_seed(3), T.Generator)", None),
             ("T.random.manual_seed(3) and T.rand(4).tolist() == (T.manual_seed(3) and T.rand(4).tolist())", None),
             ("T.zeros(size=(2, 3))", None), ("T.ones(size=(2,), dtype=T.int64)", None), ("T.empty(size=(0, 2))", None),
             ("T.rand(size=(3, 4)).shape", None), ("T.randn(size=(2,), dtype=T.float64).dtype", None),
             ("T.zeros(2, size=(2,))", None), ("T.arange(start=0, end=10, step=1)", None),
             ("T.arange(start=1.5, end=4)", None), ("T.arange(end=5)", None), ("T.arange(0, end=5)", None),
             ("T.arange(1, 7, end=5)", None), ("T.arange(start=2)", None),
             ("T.vstack([x, x * 2])", (3, 4)), ("T.vstack([x, x])", (4,)), ("T.vstack((x, x[:1]))", (2, 3)),
             ("T.hstack([x, x * 2])", (4,)), ("T.hstack([x, x[:, :1]])", (3, 4)), ("T.hstack([x, x])", (2, 3, 4)),
             ("T.inference_mode(False)(lambda: x * 2)()", (3,)),
             ("T.no_grad()(lambda: T.inference_mode(False)(lambda: x * 2)())()", (3,))]
    return rows


def _constructor_rows() -> list:
    return [(code, None) for code in (
        "T.tensor([[0, 5, 3]])", "T.tensor([1, 2, 3])", "T.tensor(3)", "T.tensor(2.5)", "T.tensor([1.0, 2.0])",
        "T.tensor([1, 2.5])", "T.tensor([True, False])", "T.tensor(True)", "T.tensor([])",
        "T.tensor([[1, 2]], dtype=T.float32)",
        "T.tensor([1.5], dtype=T.float64)", "T.tensor([1, 2], dtype=T.long)", "T.tensor([0.7], dtype=T.int64)",
        "T.tensor([1, 2], device='cpu')", "T.tensor([1.0], requires_grad=True)",
        "T.zeros(2, 3)", "T.zeros((2, 3))", "T.zeros(2, 3, dtype=T.long)", "T.zeros([2])", "T.zeros(0)",
        "T.ones(3)", "T.ones(2, 2, dtype=T.bool)", "T.ones(2, device='cpu')", "T.empty(2, 3).shape",
        "T.full((2, 3), 1.5)", "T.full((2,), 7)", "T.eye(3)", "T.eye(2, 3)",
        "T.arange(5)", "T.arange(1, 7, 2)", "T.arange(0.0, 1.0, 0.25)", "T.arange(3, dtype=T.float32)",
        "T.arange(5).float()", "T.linspace(0, 1, 5)",
        "T.float32", "T.float64", "T.int64", "T.long", "T.bool", "T.float", "T.double",
        "T.tensor([1, 2]).dtype == T.int64", "T.tensor([1.0]).dtype == T.float32", "T.zeros(2).dtype == T.float",
        "T.tensor([1, 2]).long().dtype", "T.tensor([1, 2]).float().dtype", "T.tensor([1, 2]).double().dtype",
        "T.tensor([1.7, -1.7]).long()", "T.tensor([0.0, 2.0]).bool()",
        "str(T.zeros(1).device)", "T.zeros(1).device.type", "T.zeros(1).is_cuda",
        "T.from_numpy(np.arange(3.0))", "T.from_numpy(np.array([1, 2], dtype=np.int64))",
        "T.randn(2, 3).shape", "T.randn((2, 3)).dtype", "T.rand(4).shape", "T.randint(0, 10, (3,)).dtype",
        "T.randint(5, (2, 2)).shape", "T.randperm(6).sort().values", "T.randperm(4).dtype",
        "T.multinomial(T.tensor([0.0, 1.0, 0.0]), 1)", "T.multinomial(T.tensor([[0.0, 2.0], [3.0, 0.0]]), 1)",
        "T.multinomial(T.tensor([1.0, 1.0, 1.0]), 3).sort().values",
        "T.multinomial(T.tensor([0.5, 0.5]), 4, replacement=True).shape",
        "T.randn(3, generator=T.Generator().manual_seed(0)).shape",
        "T.randint(0, 3, (5,), generator=T.Generator().manual_seed(1)).dtype",
        "T.zeros(3).normal_(0.0, 0.02).shape", "T.zeros(3).uniform_(0.0, 1.0).shape",
        "T.cat([T.tensor([1, 2]), T.tensor([3])])", "T.stack([T.tensor([1.0]), T.tensor([2.0])], dim=1)",
        "T.tensor([[1, 2], [3, 4]]).sum(1)", "T.tensor([[1, 2], [3, 4]]).max(0).indices",
        "T.tensor([[1, 2], [3, 4]])[T.tensor([1, 0])]", "T.tensor([0, 5, 3])[T.tensor([0, 5, 3]) > 2]",
        "T.tensor([1, 2, 3]).float().mean()", "T.tensor([[1.0, 2.0]]).T.shape", "T.tensor([3.0, 1.0]).argmax().item()",
        "T.tensor([1, 2]) * 2", "T.tensor([1, 2]) // 2", "T.tensor([1, 2]).float() / 2",
    )]


# --------------------------------------------------------------------------------------
# NumPy's keyword spellings: PyTorch's aliases (axis=, keepdims=) mean what they mean in PyTorch; ddof= and the
# NumPy forms PyTorch lacks (x.transpose(), x.transpose(1, 0, 2)) keep their plain NumPy meaning
# --------------------------------------------------------------------------------------


def _alias_rows() -> list:
    """``x.var(axis=0, keepdims=True)`` and friends, run on PyTorch too: one meaning for every spelling."""
    rows = []
    for shape in ((3, 4), (2, 3, 4), (5,)):
        axes = [None] + list(range(-len(shape), len(shape))) + ([(0, -1)] if len(shape) > 1 else [])
        for axis, keep in itertools.product(axes, (None, True, False)):
            words = f"axis={axis!r}" + ("" if keep is None else f", keepdims={keep}")
            for name in ("sum", "mean", "max", "min", "amax", "amin", "var", "std", "argmax"):
                rows.append((f"x.{name}({words})", shape))
            if axis is not None:  # (PyTorch's logsumexp needs a dim)
                rows.append((f"x.logsumexp({words})", shape))
            if axis is not None and not isinstance(axis, tuple):
                rows += [(f"x.prod({words})", shape), (f"(x > 0).all({words})", shape),
                         (f"(x > 0).any({words})", shape),
                         (f"x.squeeze(axis={axis})", shape), (f"T.cat([x, x], axis={axis})", shape)]
    return rows


def _numpy_rows() -> list:
    rows = []
    for shape in ((3, 4), (2, 3, 4), (5,)):
        axes = [None] + list(range(-len(shape), len(shape))) + ([(0, -1)] if len(shape) > 1 else [])
        for axis, keep in itertools.product(axes, (None, True, False)):
            words = f"axis={axis!r}" + ("" if keep is None else f", keepdims={keep}")
            for ddof in (0, 1, 2):
                rows.append((f"x.var({words}, ddof={ddof})", f"a.var({words}, ddof={ddof})", shape))
                rows.append((f"x.std({words}, ddof={ddof})", f"a.std({words}, ddof={ddof})", shape))
        rows += [("x.var(ddof=1)", "a.var(ddof=1)", shape), ("x.var(ddof=0)", "a.var(ddof=0)", shape),
                 ("x.transpose()", "a.transpose()", shape)]
        if len(shape) == 3:
            rows += [("x.transpose(1, 0, 2)", "a.transpose(1, 0, 2)", shape),
                     ("x.transpose((2, 0, 1))", "a.transpose((2, 0, 1))", shape)]
    return rows


STRIDE = 1 if os.environ.get("MINIGRAD_HYPOTHESIS_PROFILE") == "ci" else 2  # (see the module's docstring)
ALL_TORCH_ROWS = list(dict.fromkeys(_reduction_rows() + _sort_rows() + _shape_rows() + _function_rows()
                                     + _constructor_rows() + _alias_rows() + _surface_rows()))
TORCH_ROWS = list(dict.fromkeys(_reduction_rows()[::STRIDE] + _sort_rows() + _shape_rows() + _function_rows()
                                 + _constructor_rows() + _alias_rows()[::STRIDE] + _surface_rows()))
NUMPY_ROWS = _numpy_rows()[::STRIDE]


# --------------------------------------------------------------------------------------
# Running a row on both engines
# --------------------------------------------------------------------------------------


def _input(shape, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape) * 0.9


def _leaves(out) -> list:
    """The tensors and Python values of a result (a tensor, a (values, indices) pair, a tuple of pieces)."""
    if isinstance(out, tuple | list):
        return [leaf for part in out for leaf in _leaves(part)]
    return [out]


def _as_numpy(leaf):
    if torch is not None and isinstance(leaf, torch.Tensor):
        return leaf.detach().numpy(), str(leaf.dtype).replace("torch.", "")
    if isinstance(leaf, mg.Tensor):
        return leaf.data, str(leaf.dtype)
    if torch is not None and isinstance(leaf, torch.dtype):
        return None, str(leaf).replace("torch.", "")
    if isinstance(leaf, np.dtype):
        return None, str(leaf)
    if isinstance(leaf, torch.Size if torch is not None else tuple):
        return np.array(tuple(leaf)), "shape"
    return leaf, type(leaf).__name__


def _run(engine: str, code: str, array):
    T, F = (torch, torch_F) if engine == "torch" else (mg, mg_F)
    x = None
    if array is not None:
        x = torch.tensor(array, requires_grad=True) if engine == "torch" else mg.tensor(array, requires_grad=True)
    if engine == "torch":
        torch.manual_seed(0)
    else:
        mg.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return eval(code, {"T": T, "F": F, "x": x, "np": np, "float": float, "abs": abs}), x  # noqa: S307


def _is_pair(out) -> bool:
    return isinstance(out, tuple) and hasattr(out, "values") and hasattr(out, "indices")


def _float_outputs(leaves, engine):
    kind = torch.Tensor if engine == "torch" else mg.Tensor
    return [leaf for leaf in leaves if isinstance(leaf, kind) and leaf.requires_grad]


# A mean of nothing, or a variance with correction >= the count, is NaN on both engines; NumPy says so with a
# RuntimeWarning, which these rows expect.
@needs_torch
@pytest.mark.filterwarnings("ignore:Mean of empty slice:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:Degrees of freedom:RuntimeWarning")
@pytest.mark.parametrize("code, shape", TORCH_ROWS, ids=[f"{c} {s}" for c, s in TORCH_ROWS])
def test_pytorch_calls_mean_on_minigrad_what_they_mean_on_pytorch(code, shape):
    array = None if shape is None else _input(shape, len(code))
    try:
        expected, tx = _run("torch", code, array)
    except Exception:  # PyTorch refuses it: minigrad must refuse it too
        with pytest.raises((mg.OpError, TypeError), match=r"write |zero-size|has size 0|is empty along|must be an int"):
            _run("minigrad", code, array)
        return
    got, mx = _run("minigrad", code, array)
    pair = _is_pair(expected)
    assert _is_pair(got) == pair, "a (values, indices) return on one side only"
    if pair:
        assert got.indices is got[1] and got.values is got[0]
    want, have = _leaves(expected), _leaves(got)
    assert len(have) == len(want), f"{len(have)} outputs, PyTorch gives {len(want)}"
    for w, h in zip(want, have):
        wv, wd = _as_numpy(w)
        hv, hd = _as_numpy(h)
        assert hd == wd, f"dtype {hd}, PyTorch's {wd}"
        if wv is None:
            continue
        if isinstance(wv, str):
            assert hv == wv
            continue
        if "random" in code or "rand" in code or "normal_" in code or "multinomial(T.tensor([0.5" in code:
            assert np.shape(hv) == np.shape(wv)
            continue
        assert np.shape(hv) == np.shape(wv), f"shape {np.shape(hv)}, PyTorch's {np.shape(wv)}"
        np.testing.assert_allclose(np.asarray(hv, dtype=float), np.asarray(wv, dtype=float), rtol=1e-6, atol=1e-9,
                                   equal_nan=True)
    # the gradient of a weighted sum of the float outputs, through both engines
    t_outs, m_outs = _float_outputs(want, "torch"), _float_outputs(have, "minigrad")
    assert len(m_outs) == len(t_outs), "which outputs carry a gradient differs"
    if tx is None or not t_outs:
        return
    weights = [np.random.default_rng(i).standard_normal(o.shape) for i, o in enumerate(t_outs)]
    sum((o * torch.tensor(w)).sum() for o, w in zip(t_outs, weights)).backward()
    sum((o * mg.tensor(w)).sum() for o, w in zip(m_outs, weights)).backward()
    expected_grad = tx.grad.numpy() if tx.grad is not None else np.zeros(tx.shape)
    got_grad = mx.grad.data if mx.grad is not None else np.zeros(mx.shape)
    np.testing.assert_allclose(got_grad, expected_grad, rtol=1e-6, atol=1e-9, equal_nan=True)


def test_the_table_holds_every_form_the_module_docstring_promises():
    rows = set(ALL_TORCH_ROWS)
    for shape in SHAPES:  # 2-d, 3-d, 0-d and empty inputs
        for name in ("sum", "mean", "amax", "amin", "prod", "var", "std"):  # positional, keyword, keepdim, negative
            for form in ("x.{}(-1)", "x.{}(dim=-1)", "x.{}(-1, keepdim=True)", "x.{}(0)"):
                assert (form.format(name), shape) in rows, (form.format(name), shape)
        for name in ("var", "std"):
            assert (f"x.{name}(-1, keepdim=True, correction=0)", shape) in rows
            assert (f"x.{name}(-1, unbiased=False)", shape) in rows
        for name in ("max", "min"):  # the (values, indices) returns
            assert (f"x.{name}(-1).indices", shape) in rows and (f"x.{name}(-1, True).values", shape) in rows
    for row in [("x.transpose(0, 1)", (3, 4)), ("x.split(64, 2)", (2, 3, 192)), ("x.chunk(3)", (7,)),
                ("x.unsqueeze(0).expand(2, -1, -1)", (3, 4)), ("x.sort(-1)", (3, 4)), ("x.topk(1, -1)", (3, 4)),
                ("F.softmax(x, dim=-1)", (2, 3, 4)), ("T.tensor([[0, 5, 3]])", None), ("T.long", None),
                ("T.randint(0, 10, (3,)).dtype", None), ("T.multinomial(T.tensor([0.0, 1.0, 0.0]), 1)", None)]:
        assert row in rows, row
    # make test runs every second generated reduction row and every hand-written one
    assert set(_sort_rows() + _shape_rows() + _function_rows() + _constructor_rows()) <= set(TORCH_ROWS) <= rows




@pytest.mark.parametrize("code, numpy_code, shape", NUMPY_ROWS, ids=[c + f" {s}" for c, _, s in NUMPY_ROWS])
def test_numpy_forms_pytorch_lacks_mean_what_they_mean_in_numpy(code, numpy_code, shape):
    a = _input(shape, len(code))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = eval(code, {"x": mg.tensor(a), "T": mg})  # noqa: S307
        expected = eval(numpy_code, {"a": a, "np": np})  # noqa: S307
    got, expected = _leaves(got), _leaves(expected)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == np.shape(e) and g.dtype == np.asarray(e).dtype
        np.testing.assert_allclose(g.data, e, rtol=1e-12, atol=1e-12, equal_nan=True)


# --------------------------------------------------------------------------------------
# Spellings minigrad refuses: the message names the code to write, and that code runs
# --------------------------------------------------------------------------------------

UNSUPPORTED = [  # (code, the code its message must name, which then runs)
    ("x.var(0, ddof=1, correction=1)", "x.var(dim=0, keepdim=False, correction=1)"),
    ("x.sum(0, np.float64)", "x.sum(0, dtype=mg.float64)"),
    ("x.mean(1, np.float32)", "x.mean(1, dtype=mg.float32)"),
    ("x.max(keepdim=True)", "x.amax(dim=None, keepdim=True)"),
    ("x.view(mg.float64)", "x.to(mg.float64)"),
    ("x.t() if x.ndim > 2 else x.unsqueeze(0).t()", "x.transpose(-2, -1)"),
    ("x.permute(1, 0)", "x.permute(0, 1, 2)"),
    ("x.repeat(2)", "x.repeat(1, 1, 1)"),
    ("x.split([1, 2], 0)", "x.split([1, 1], 0)"),
    ("x.split(2, axis=1)", "x.split(n, dim=1)"),
    ("x.max(axis=None)", "x.amax(dim=None, keepdim=False)"),
    ("x.min((0, 1))", "x.amin(dim=(0, 1), keepdim=False)"),
    ("mg.nn.functional.softmax(x)", "F.softmax(x, dim=-1)"),
    ("mg.nn.functional.one_hot(x)", "F.one_hot(x.long())"),
    ("x.to('cuda')", "device='cpu'"),
    ("x.cuda()", "device='cpu'"),
    ("mg.zeros(2, device='cuda')", "device='cpu'"),
    ("mg.tensor([1.0], device='cuda:0')", "device='cpu'"),
    ("mg.Generator(device='cuda')", "device='cpu'"),
    ("mg.randn(2, generator=1234)", "g = mg.Generator().manual_seed(0)"),
    ("mg.randint(10)", "mg.randint(low, high, size)"),
    ("mg.multinomial(mg.tensor([1.0, 2.0]), 3)", "replacement=True"),
    ("mg.cat([x, x], dim=0, axis=0)", "cat(..., dim=0)"),
    ("x.unfold(0, 2, 1)", "x[..., i:i + size] slices and mg.stack"),
    ("x.nonzero()", "mg.tensor(np.nonzero(x.numpy()))"),
    ("x.exp_()", "x[...] = x.exp()"),
]
RUNNABLE = {  # what the named code is run as, where it is a fragment of a line
    "device='cpu'": "mg.zeros(2, device='cpu')",
    "g = mg.Generator().manual_seed(0)": "mg.randn(2, generator=mg.Generator().manual_seed(0))",
    "mg.randint(low, high, size)": "mg.randint(0, 10, (3,))",
    "replacement=True": "mg.multinomial(mg.tensor([1.0, 2.0]), 3, replacement=True)",
    "cat(..., dim=0)": "mg.cat([x, x], dim=0)",
    "F.one_hot(x.long())": "F.one_hot(x.abs().long())",
    "x.split(n, dim=1)": "x.split(2, dim=1)",
    "x[..., i:i + size] slices and mg.stack": "mg.stack([x[..., i:i + 2] for i in range(3)])",
    "x[...] = x.exp()": "x[...] = x.exp()",
}


@pytest.mark.parametrize("code, suggestion", UNSUPPORTED, ids=[c for c, _ in UNSUPPORTED])
def test_a_refused_spelling_names_the_code_to_write_and_that_code_runs(code, suggestion):
    x = mg.tensor(_input((2, 3, 4), 0))
    names = {"x": x, "mg": mg, "np": np, "F": mg_F, "dtype": np.dtype}
    with pytest.raises((TypeError, ValueError, RuntimeError, AttributeError)) as refused:
        eval(code, names)  # noqa: S307
    assert suggestion in str(refused.value), str(refused.value)
    exec(RUNNABLE.get(suggestion, suggestion), names)  # noqa: S102  (runs: no exception)


def test_an_unknown_name_is_pythons_own_error_and_tensor_has_no_getattr():
    # The refused names are descriptors, not a Tensor.__getattr__: with one, Python (3.11) reads every attribute
    # of every tensor the slow way, and the engine reads them on every op (benchmarks/README.md, bookkeeping).
    assert "__getattr__" not in vars(mg.Tensor)
    x = mg.tensor([1.0])
    with pytest.raises(AttributeError, match=r"^'Tensor' object has no attribute 'no_such_name'$"):
        x.no_such_name  # noqa: B018
    assert not hasattr(x, "unfold") and not hasattr(mg.Tensor, "unfold")
    assert "unfold" not in dir(x) and "sum" in dir(x) and "add_" in dir(x)  # tab completion offers what works


def test_only_an_in_place_name_is_refused_with_a_word_about_in_place_writes():
    x = mg.tensor([1.0, -2.0])
    with pytest.raises(AttributeError, match=r"x\[\.\.\.\] = x\.exp\(\) \(an in-place write"):
        x.exp_  # noqa: B018
    with pytest.raises(AttributeError) as refused:
        x.unfold  # noqa: B018
    assert "in-place" not in str(refused.value) and "mg.stack" in str(refused.value)


@needs_torch
def test_set_default_device_cpu_runs_and_a_gpu_is_refused_saying_what_to_write():
    # (Not a row of the table: on PyTorch it installs a global function mode, which would follow the later tests.)
    try:
        torch.set_default_device("cpu")
    finally:
        torch.set_default_device(None)
    assert mg.set_default_device("cpu") is None
    with pytest.raises((RuntimeError, ValueError, TypeError), match="device='cpu'"):
        mg.set_default_device("cuda")
