"""PyTorch's own sample inputs, run through minigrad: every op minigrad has, on the inputs PyTorch tests itself with.

``torch.testing._internal.common_methods_invocations.op_db`` lists PyTorch's ops, each with its sample
inputs (shapes, broadcasting, 0-d and empty tensors, negative dims, keyword forms) and, for many, inputs that
must raise. ``MAPPED`` below says how each OpInfo sample is written in minigrad (``dim=`` becomes ``axis=``,
``correction`` becomes ``ddof``, ``split``'s chunk size becomes NumPy's cut points...). Every sample is run in
float64 and compared with PyTorch for the value, dtype and shape, the gradient (a fixed random cotangent) and,
where cheap, the second-order gradient; the same sample in float32 is compared with the float64 reference;
PyTorch's error inputs, and out-of-range dims, must raise in minigrad too.

A sample minigrad cannot express (a tensor bound for clamp, layer norm over two axes, dropout with p > 0...)
is skipped and counted with its reason; the summary test prints the counts. A sample where minigrad differs
on purpose is counted under that difference (``DIFFERENCES``); each is stated by a test below, and listed in
the README. Anything else that disagrees fails the test of its op.

``make test`` runs the first few samples of each op (``MINIGRAD_OPINFO_SAMPLES``, default 6); CI
(``MINIGRAD_HYPOTHESIS_PROFILE=ci``, or ``MINIGRAD_OPINFO_SAMPLES=all``) runs every one.
"""

from __future__ import annotations

import collections
import functools
import math
import os
import warnings
from dataclasses import dataclass

import numpy as np
import pytest

import minigrad as mg
import minigrad.nn.functional as F

torch = pytest.importorskip("torch")
pytest.importorskip("expecttest")  # (common_methods_invocations imports it)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from torch.testing._internal.common_methods_invocations import op_db

_CAP = os.environ.get("MINIGRAD_OPINFO_SAMPLES", "all" if os.environ.get("MINIGRAD_HYPOTHESIS_PROFILE") == "ci"
                      else "6")
SAMPLES_PER_OP = None if _CAP == "all" else int(_CAP)
SECOND_ORDER_MAX_SIZE = 400  # second-order gradients only for samples with at most this many input elements


class Untranslatable(Exception):
    """This sample uses a form minigrad does not have; the message is the reason, counted in the summary."""


# --------------------------------------------------------------------------------------
# How each OpInfo sample is written in minigrad
# --------------------------------------------------------------------------------------


def _get(args, kwargs, i, name, default=None):
    """Argument ``i`` (positional) or ``name`` (keyword) of a sample, else ``default``."""
    if len(args) > i:
        return args[i]
    return kwargs.get(name, default)


def _only(kwargs, allowed, **defaults):
    """Refuse a keyword minigrad has no counterpart for (beyond those at their PyTorch default)."""
    for key, value in kwargs.items():
        if key not in allowed and not (key in defaults and value == defaults[key]):
            raise Untranslatable(f"keyword {key}=")


def _dims(dim):
    """PyTorch's dim (an int, a list or tuple, or None) as NumPy's axis."""
    if dim is None or isinstance(dim, int):
        return dim
    return tuple(dim)


def _number(x):
    if isinstance(x, mg.Tensor):
        if x.requires_grad or x.ndim:
            raise Untranslatable("a tensor where minigrad takes a number")
        return x.item()
    return x


def _reduction(method):
    def call(x, *args, **kwargs):
        _only(kwargs, {"dim", "keepdim"}, dtype=None)
        if len(args) > 2:
            raise Untranslatable("positional dtype")
        axis = _dims(_get(args, kwargs, 0, "dim"))
        keepdims = bool(_get(args, kwargs, 1, "keepdim", False))
        return getattr(x, method)(axis=axis, keepdims=keepdims)
    return call


def _variance(root: bool):
    def call(x, *args, **kwargs):
        _only(kwargs, {"dim", "unbiased", "correction", "keepdim"})
        dim, rest = (args[0], args[1:]) if args and not isinstance(args[0], bool) else (None, args)
        dim = kwargs.get("dim", dim)
        unbiased = rest[0] if rest else kwargs.get("unbiased")
        correction = kwargs.get("correction")
        ddof = correction if correction is not None else (0 if unbiased is False else 1)
        keepdim = rest[1] if len(rest) > 1 else kwargs.get("keepdim", False)
        out = x.var(axis=_dims(dim), ddof=ddof, keepdims=bool(keepdim))
        return out.sqrt() if root else out
    return call


def _along(method):
    """softmax / log_softmax (and softmin): a dim, no dtype."""
    def call(x, *args, **kwargs):
        _only(kwargs, {"dim"}, dtype=None)
        dim = _get(args, kwargs, 0, "dim")
        if dim is None:
            raise Untranslatable("no dim (PyTorch's implicit dim)")
        return method(x, dim)
    return call


def _binary(fn):
    def call(x, other, **kwargs):
        alpha = kwargs.pop("alpha", 1)
        _only(kwargs, set(), rounding_mode=None)
        return fn(x, other if alpha == 1 else other * alpha)
    return call


def _pow(x, exponent):
    if isinstance(x, mg.Tensor) and isinstance(exponent, mg.Tensor):
        return x ** exponent if exponent.requires_grad or exponent.ndim else x ** exponent.item()
    if not isinstance(x, mg.Tensor):
        raise Untranslatable("a number base")
    return x ** exponent


def _clamp(x, lo=None, hi=None, **kwargs):
    lo, hi = kwargs.get("min", lo), kwargs.get("max", hi)
    if lo is None and hi is None:
        raise Untranslatable("no bounds")
    if isinstance(lo, mg.Tensor) or isinstance(hi, mg.Tensor):  # tensor bounds: minigrad spells it so
        x = x if lo is None else mg.maximum(x, lo)
        return x if hi is None else mg.minimum(x, hi)
    return x.clip(lo, hi)


def _sizes(shape):
    shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], tuple | list | torch.Size) else tuple(shape)
    return tuple(int(n) for n in shape)


def _expand(x, *sizes):
    sizes = _sizes(sizes)
    lead = len(sizes) - x.ndim
    full = tuple(x.shape[i - lead] if n == -1 else n for i, n in enumerate(sizes))
    return x.broadcast_to(full)


def _squeeze(x, *args, **kwargs):
    dim = _get(args, kwargs, 0, "dim")
    if isinstance(dim, tuple | list) and not dim:
        return x  # (squeeze over no dims)
    if dim is None:
        return x.squeeze()
    axes = tuple(dim) if isinstance(dim, tuple | list) else (dim,)
    if x.ndim == 0:
        return x.squeeze(axes)  # (minigrad raises: a 0-d tensor has no axis)
    axes = tuple(a for a in axes if x.shape[a] == 1)  # PyTorch leaves a dim of another size as it is
    return x.squeeze(axes) if axes else x


def _flatten(x, start_dim=0, end_dim=-1):
    if x.ndim == 0:
        return x.reshape(1)
    start, end = start_dim % x.ndim, end_dim % x.ndim
    return x.reshape(x.shape[:start] + (math.prod(x.shape[start:end + 1]),) + x.shape[end + 1:])


def _split(x, split_size_or_sections, dim=0):
    size = x.shape[dim]
    if isinstance(split_size_or_sections, int):  # PyTorch: pieces of this size (NumPy: this many pieces)
        step = split_size_or_sections
        pieces = [step] * (size // step) + ([size % step] if size % step else [])
    else:
        pieces = list(split_size_or_sections)
    return tuple(x.split(pieces, dim))


def _chunk(x, chunks, dim=0):
    size = x.shape[dim]
    step = math.ceil(size / chunks) if size else 1
    pieces = [min(step, size - i) for i in range(0, size, step)] or [0]
    return tuple(x.split(pieces, dim))


def _tri(method):
    def call(x, *args, **kwargs):
        return getattr(x, method)(k=_get(args, kwargs, 0, "diagonal", 0))
    return call


def _max_with_dim(method, arg):
    def call(x, dim, keepdim=False):
        return getattr(x, "a" + method)(axis=dim, keepdims=keepdim), getattr(x, arg)(axis=dim, keepdims=keepdim)
    return call


def _layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    if len(normalized_shape) != 1:
        raise Untranslatable("normalized over more than the last axis")
    if (weight is None) != (bias is None):
        raise Untranslatable("a weight without a bias")
    return F.layer_norm(x, normalized_shape, weight, bias, eps=eps)


def _rms_norm(x, normalized_shape, weight=None, eps=None):
    if len(normalized_shape) != 1:
        raise Untranslatable("normalized over more than the last axis")
    eps = float(np.finfo(x.dtype).eps) if eps is None else eps  # (PyTorch's default: the dtype's epsilon)
    return F.rms_norm(x, normalized_shape, weight, eps=eps)


def _cross_entropy(x, target, weight=None, **kwargs):
    return F.cross_entropy(x, target, weight, **kwargs)  # PyTorch's layout and arguments, probabilities too


def _embedding(weight, ids, **kwargs):
    _only(kwargs, set(), padding_idx=None, max_norm=None, scale_grad_by_freq=False, sparse=False)
    return F.embedding(ids, weight)


def _sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, **kwargs):
    _only(kwargs, {"scale", "enable_gqa"})
    if dropout_p > 0:
        raise Untranslatable("dropout_p > 0 (random)")
    return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, is_causal=is_causal, **kwargs)


def _dropout(x, p=0.5, training=True, inplace=False):
    if p > 0 and training:
        raise Untranslatable("dropout with p > 0 (random)")
    return F.dropout(x, p=p, training=training)


def _getitem(x, index):
    return x[index]


def _where(x, condition, other):
    return mg.where(condition, x, other)


def _masked_fill(x, mask, value):
    return x.masked_fill(mask.data, _number(value))


def _linear(x, weight, bias=None):
    return F.linear(x, weight, bias)


def _einsum(operands, equation):
    if any(len(set(term)) != len(term) for term in equation.split("->")[0].replace(" ", "").split(",")):
        raise Untranslatable("a label repeated within one operand (a diagonal): minigrad's einsum refuses it")
    return mg.einsum(equation, *operands)


def _cat(tensors, dim=0):
    return mg.cat(list(tensors), axis=dim)


def _stack(tensors, dim=0):
    return mg.stack(list(tensors), axis=dim)


def _unbind(x, dim=0):
    lead = (slice(None),) * (dim % x.ndim) if x.ndim else ()
    return tuple(x[lead + (i,)] for i in range(x.shape[dim]))


def _select(x, dim, index):
    return x[(slice(None),) * (dim % x.ndim) + (index,)]


def _index_select(x, dim, index):
    if x.ndim == 0:
        return x.reshape(1)[index].reshape(index.shape[:0] + (()) if index.ndim == 0 else index.shape)
    return x[(slice(None),) * (dim % x.ndim) + (index.data,)]


def _reflected(fn):
    def call(x, other):
        if not isinstance(x, mg.Tensor):
            raise Untranslatable("a number as the tensor (Tensor.__radd__(2, t))")
        return fn(x, other)
    return call


@dataclass
class Entry:
    call: object  # (input, *args, **kwargs) of the OpInfo sample, converted to minigrad -> the result
    gradgrad: bool = True  # compare second-order gradients too (where cheap)


MAPPED: dict[str, Entry] = {
    # elementwise
    "abs": Entry(lambda x: abs(x)), "neg": Entry(lambda x: -x), "exp": Entry(lambda x: x.exp()),
    "log": Entry(lambda x: x.log()), "sqrt": Entry(lambda x: x.sqrt()), "tanh": Entry(lambda x: x.tanh()),
    "sigmoid": Entry(lambda x: x.sigmoid()), "erf": Entry(lambda x: x.erf()), "square": Entry(lambda x: x ** 2),
    "reciprocal": Entry(lambda x: 1.0 / x),
    "nn.functional.relu": Entry(F.relu), "nn.functional.silu": Entry(lambda x, inplace=False: F.silu(x)),
    "nn.functional.gelu": Entry(lambda x, approximate="none": F.gelu(x, approximate=approximate)),
    "clone": Entry(lambda x, memory_format=None: x.clone()), "positive": Entry(lambda x: x),
    "add": Entry(_binary(lambda a, b: a + b)), "sub": Entry(_binary(lambda a, b: a - b)),
    "mul": Entry(_binary(lambda a, b: a * b)), "div.no_rounding_mode": Entry(_binary(lambda a, b: a / b)),
    "true_divide": Entry(_binary(lambda a, b: a / b)), "maximum": Entry(mg.maximum), "minimum": Entry(mg.minimum),
    "pow": Entry(_pow), "clamp": Entry(_clamp), "clamp_min": Entry(lambda x, lo: _clamp(x, lo, None)),
    "clamp_max": Entry(lambda x, hi: _clamp(x, None, hi)), "where": Entry(_where), "masked_fill": Entry(_masked_fill),
    # reductions
    "sum": Entry(_reduction("sum")), "mean": Entry(_reduction("mean")), "amax": Entry(_reduction("amax")),
    "amin": Entry(_reduction("amin")), "var": Entry(_variance(False)), "var.unbiased": Entry(_variance(False)),
    "std": Entry(_variance(True)), "std.unbiased": Entry(_variance(True)),
    "max.reduction_no_dim": Entry(lambda x: x.max()), "min.reduction_no_dim": Entry(lambda x: x.min()),
    "max.reduction_with_dim": Entry(_max_with_dim("max", "argmax")),
    "min.reduction_with_dim": Entry(_max_with_dim("min", "argmin")),
    "logsumexp": Entry(lambda x, dim, keepdim=False: x.logsumexp(axis=_dims(dim), keepdims=keepdim)),
    "softmax": Entry(_along(lambda x, d: x.softmax(axis=d))),
    "log_softmax": Entry(_along(lambda x, d: x.log_softmax(axis=d))),
    "nn.functional.softmin": Entry(_along(lambda x, d: (-x).softmax(axis=d))),
    # linear algebra
    "matmul": Entry(lambda a, b: a @ b), "mm": Entry(lambda a, b: a @ b), "bmm": Entry(lambda a, b: a @ b),
    "mv": Entry(lambda a, b: a @ b), "dot": Entry(lambda a, b: a @ b), "einsum": Entry(_einsum),
    "nn.functional.linear": Entry(_linear),
    # shapes
    "reshape": Entry(lambda x, *shape: x.reshape(_sizes(shape))),
    "view": Entry(lambda x, *shape: x.view(_sizes(shape))),
    "transpose": Entry(lambda x, a, b: x.swapaxes(a, b) if x.ndim else x),
    "permute": Entry(lambda x, *dims: x.transpose(_sizes(dims)) if x.ndim else x),
    "t": Entry(lambda x: x.T), "mT": Entry(lambda x: x.swapaxes(-1, -2)), "expand": Entry(_expand),
    "squeeze": Entry(_squeeze), "squeeze.multiple": Entry(_squeeze), "unsqueeze": Entry(lambda x, d: x.unsqueeze(d)),
    "flatten": Entry(_flatten), "ravel": Entry(lambda x: x.reshape(-1)),
    "cat": Entry(_cat), "stack": Entry(_stack), "split": Entry(_split), "split.list_args": Entry(_split),
    "split_with_sizes": Entry(_split), "chunk": Entry(_chunk), "tril": Entry(_tri("tril")),
    "triu": Entry(_tri("triu")), "__getitem__": Entry(_getitem),
    # nn.functional
    "nn.functional.layer_norm": Entry(_layer_norm), "nn.functional.rms_norm": Entry(_rms_norm),
    "nn.functional.cross_entropy": Entry(_cross_entropy), "nn.functional.embedding": Entry(_embedding),
    "nn.functional.scaled_dot_product_attention": Entry(_sdpa, gradgrad=False),
    "nn.functional.dropout": Entry(_dropout),
    # spelled with the ops above
    "__radd__": Entry(_reflected(lambda x, other: other + x)),
    "__rsub__": Entry(_reflected(lambda x, other: other - x)),
    "__rmul__": Entry(_reflected(lambda x, other: other * x)),
    "__rdiv__": Entry(_reflected(lambda x, other: other / x)),
    "__rpow__": Entry(_reflected(lambda x, other: other ** x)),
    "__rmatmul__": Entry(_reflected(lambda x, other: other @ x)),
    "expand_as": Entry(lambda x, other: x.broadcast_to(other.shape)),
    "reshape_as": Entry(lambda x, other: x.reshape(other.shape)),
    "view_as": Entry(lambda x, other: x.view(other.shape)),
    "unflatten": Entry(lambda x, dim, sizes: x.reshape(x.shape[:dim % x.ndim] + tuple(sizes)
                                                       + x.shape[dim % x.ndim + 1:])),
    "unbind": Entry(_unbind), "select": Entry(_select), "index_select": Entry(_index_select),
    "nn.functional.softsign": Entry(lambda x: x / (1.0 + abs(x))),
    "nn.functional.tanhshrink": Entry(lambda x: x - x.tanh()),
    "nn.functional.mse_loss": Entry(F.mse_loss), "nn.functional.l1_loss": Entry(F.l1_loss),
    "nn.functional.nll_loss": Entry(F.nll_loss), "nn.functional.binary_cross_entropy": Entry(F.binary_cross_entropy),
    "nn.functional.binary_cross_entropy_with_logits": Entry(F.binary_cross_entropy_with_logits),
    "nn.functional.pad.constant": Entry(F.pad), "nn.functional.pad.reflect": Entry(F.pad),
    "nn.functional.pad.replicate": Entry(F.pad), "nn.functional.pad.replicate_negative": Entry(F.pad),
    "nn.functional.pad.circular": Entry(F.pad),
}


# --------------------------------------------------------------------------------------
# Where minigrad differs on purpose (each also stated by a test below, and in the README)
# --------------------------------------------------------------------------------------


def _ints(sample) -> list:
    found = []
    for v in list(sample.args) + list(sample.kwargs.values()):
        if isinstance(v, int) and not isinstance(v, bool):
            found.append(v)
        elif isinstance(v, tuple | list) and all(isinstance(a, int) for a in v):
            found.extend(v)
    return found


def _zero_d_with_dim(name, sample) -> bool:
    x = sample.input
    return isinstance(x, torch.Tensor) and x.ndim == 0 and bool(_ints(sample)) and name not in ("pow", "clamp")


def _empty_dims(name, sample) -> bool:
    return any(isinstance(v, tuple | list) and len(v) == 0 and name != "permute"
               for v in list(sample.args) + list(sample.kwargs.values()))


def _cat_skips_empty(name, sample) -> bool:
    return name == "cat" and any(t.shape == (0,) for t in sample.input) and any(t.ndim > 1 for t in sample.input)


def _causal_top_left(name, sample) -> bool:
    if name != "nn.functional.scaled_dot_product_attention" or not sample.kwargs.get("is_causal"):
        return False
    return sample.input.shape[-2] != sample.args[0].shape[-2]


def _numbers_as_tensors(name, sample) -> bool:
    values = [sample.input, *sample.args]
    return name in ("maximum", "minimum", "clamp_min", "clamp_max") and not all(
        isinstance(v, torch.Tensor) for v in values)


def _transpose_of_many_axes(name, sample) -> bool:
    return name == "t" and isinstance(sample.input, torch.Tensor) and sample.input.ndim > 2


def _clamp_ties(name, sample) -> bool:
    """clamp with tensor bounds, spelled maximum/minimum: where x equals a bound, or either is NaN, the
    gradient follows torch.maximum's rule (ties split it) rather than clamp's."""
    if name not in ("clamp", "clamp_min", "clamp_max") or not isinstance(sample.input, torch.Tensor):
        return False
    x = sample.input.detach()
    bounds = [b.detach() for b in sample.args if isinstance(b, torch.Tensor)]
    return any(bool((x == b).any() or torch.isnan(b).any()) for b in bounds) and bool(bounds) \
        or (bool(bounds) and bool(torch.isnan(x).any()))


def _silu_at_inf(name, sample) -> bool:
    x = sample.input
    return name == "nn.functional.silu" and isinstance(x, torch.Tensor) and bool(torch.isinf(x.detach()).any())


DIFFERENCES = {
    "clamp with tensor bounds is maximum/minimum here: at ties and NaN the gradient is torch.maximum's":
        _clamp_ties,
    "silu's gradient at +-inf is its limit (1 and 0; PyTorch: NaN)": _silu_at_inf,
    "a 0-d tensor has no axis 0 (NumPy)": _zero_d_with_dim,
    "axis=() reduces nothing (NumPy); PyTorch's dim=() reduces every axis": _empty_dims,
    "causal attention with fewer queries than keys treats the queries as the last positions": _causal_top_left,
    "concatenate needs tensors of one rank (NumPy); PyTorch's cat skips 1-D empty tensors": _cat_skips_empty,
    "maximum, minimum and clip take Python numbers (NumPy); PyTorch's want tensors": _numbers_as_tensors,
    "x.T reverses every axis (NumPy); PyTorch's t() takes at most 2 dims": _transpose_of_many_axes,
}


def _difference(name, sample) -> str | None:
    for reason, applies in DIFFERENCES.items():
        if applies(name, sample):
            return reason
    return None


# --------------------------------------------------------------------------------------
# Running one sample
# --------------------------------------------------------------------------------------


def _fresh(x):
    """A sample argument with every tensor a fresh leaf (PyTorch's samples may be views of other tensors)."""
    if isinstance(x, torch.Tensor):
        return x.detach().clone().requires_grad_(x.requires_grad)
    if isinstance(x, list | tuple) and not isinstance(x, torch.Size):
        return type(x)(_fresh(v) for v in x)
    if isinstance(x, dict):
        return {k: _fresh(v) for k, v in x.items()}
    return x


def _to_mg(x, leaves, dtype):
    """A torch sample argument as minigrad's: float tensors become ``dtype`` leaves (requiring grad if theirs did)."""
    if isinstance(x, torch.Tensor):
        array = x.detach().numpy().copy()
        grad = x.requires_grad and x.is_floating_point()
        if x.is_floating_point():
            array = array.astype(dtype)
        t = mg.tensor(array, requires_grad=grad and dtype == np.float64)
        if t.requires_grad:
            leaves.append((x, t))
        return t
    if isinstance(x, torch.Size):
        return tuple(x)
    if isinstance(x, list | tuple):
        return type(x)(_to_mg(v, leaves, dtype) for v in x)
    return x


def _flat(x) -> list:
    return [v for part in x for v in _flat(part)] if isinstance(x, list | tuple) else [x]


def _outputs(result) -> list:
    return list(result) if isinstance(result, tuple | list) else [result]


def _close(ours, theirs, rtol, atol, what):
    theirs = np.asarray(theirs)
    ours = np.asarray(ours)
    if ours.shape != theirs.shape:
        return f"{what}: shape {ours.shape}, PyTorch {theirs.shape}"
    if ours.dtype.kind == "f" or theirs.dtype.kind == "f":
        scale = atol * max(1.0, float(np.nanmax(np.abs(theirs[np.isfinite(theirs)]), initial=0.0)))
        if not np.allclose(ours, theirs, rtol=rtol, atol=scale, equal_nan=True):
            worst = np.nanmax(np.abs(ours.astype(np.float64) - theirs.astype(np.float64)), initial=0.0)
            return f"{what}: values differ (max |diff| {worst:.3g})"
    elif not np.array_equal(ours, theirs):
        return f"{what}: values differ"
    return None


def _torch_numpy(t):
    return t.detach().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)


def _check_sample(opinfo, entry, sample, rng) -> str | None:
    """None if minigrad agrees with PyTorch on this sample; else what differs. Raises Untranslatable to skip."""
    sample = type(sample)(_fresh(sample.input), args=_fresh(sample.args), kwargs=_fresh(sample.kwargs))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            expected = _outputs(opinfo(sample.input, *sample.args, **sample.kwargs))
        except Exception as err:  # (some samples are for other devices or modes)
            raise Untranslatable(f"PyTorch raises on it ({type(err).__name__})") from None
    if not any(isinstance(t, torch.Tensor) for t in _flat([sample.input, *sample.args])):
        raise Untranslatable("numbers only, no tensor")
    leaves = []
    args = _to_mg([sample.input, *sample.args], leaves, np.float64)
    kwargs = {k: _to_mg(v, leaves, np.float64) for k, v in sample.kwargs.items()}
    try:
        got = _outputs(entry.call(*args, **kwargs))
    except Untranslatable:
        raise
    except Exception as err:
        return f"minigrad raised {type(err).__name__}: {str(err)[:200]}"
    if len(got) != len(expected):
        return f"{len(got)} outputs, PyTorch {len(expected)}"
    for i, (ours, theirs) in enumerate(zip(got, expected)):
        problem = _close(ours.numpy(), _torch_numpy(theirs), 1e-7, 1e-9, f"output {i}")
        if problem:
            return problem
        if isinstance(theirs, torch.Tensor) and ours.dtype != _torch_numpy(theirs).dtype:
            return f"output {i}: dtype {ours.dtype}, PyTorch {theirs.dtype}"

    # the gradient, for a fixed random cotangent on every float output
    differentiable = [i for i, t in enumerate(expected) if isinstance(t, torch.Tensor) and t.requires_grad]
    if leaves and differentiable:
        cotangents = [rng.standard_normal(expected[i].shape) for i in differentiable]
        torch_leaves = [t for t, _ in leaves]
        try:
            theirs = torch.autograd.grad([expected[i] for i in differentiable], torch_leaves,
                                         [torch.from_numpy(c) for c in cotangents], allow_unused=True,
                                         create_graph=True)
        except RuntimeError as err:
            raise Untranslatable(f"PyTorch's own backward raises ({type(err).__name__})") from None
        ours_out = [got[i] for i in differentiable]
        if not all(o.requires_grad for o in ours_out):
            return "the output does not require grad"
        ours = mg.grad(ours_out, [m for _, m in leaves], [mg.tensor(c) for c in cotangents], allow_unused=True,
                       create_graph=True)
        for k, (g_ours, g_theirs) in enumerate(zip(ours, theirs)):
            a = np.zeros(leaves[k][1].shape) if g_ours is None else g_ours.numpy()
            b = np.zeros(leaves[k][1].shape) if g_theirs is None else _torch_numpy(g_theirs)
            rtol = 1e-7 if leaves[k][0].dtype == torch.float64 else 2e-3  # (a float16 leaf's gradient is rounded)
            problem = _close(a, b, rtol, rtol * 1e-2, f"gradient of input {k}")
            if problem:
                return problem
        size = sum(m.size for _, m in leaves)
        pairs = [(o, t) for o, t in zip(ours, theirs) if o is not None and t is not None and t.requires_grad]
        if entry.gradgrad and size <= SECOND_ORDER_MAX_SIZE and pairs and all(o.requires_grad for o, _ in pairs):
            weights = [rng.standard_normal(o.shape) for o, _ in pairs]
            theirs2 = torch.autograd.grad([t for _, t in pairs], torch_leaves, [torch.from_numpy(w) for w in weights],
                                          allow_unused=True)
            ours2 = mg.grad([o for o, _ in pairs], [m for _, m in leaves], [mg.tensor(w) for w in weights],
                            allow_unused=True)
            for k, (g_ours, g_theirs) in enumerate(zip(ours2, theirs2)):
                a = np.zeros(leaves[k][1].shape) if g_ours is None else g_ours.numpy()
                b = np.zeros(leaves[k][1].shape) if g_theirs is None else _torch_numpy(g_theirs)
                problem = _close(a, b, 1e-6, 1e-8, f"second-order gradient of input {k}")
                if problem:
                    return problem

    # float32: the same sample, against the float64 reference
    leaves32 = []
    args32 = _to_mg([sample.input, *sample.args], leaves32, np.float32)
    kwargs32 = {k: _to_mg(v, leaves32, np.float32) for k, v in sample.kwargs.items()}
    got32 = _outputs(entry.call(*args32, **kwargs32))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            torch32 = _outputs(opinfo(*_fresh32([sample.input, *sample.args]), **_fresh32(sample.kwargs)))
        except Exception:  # (PyTorch's float32 run may refuse what its float64 one took: then the reference alone)
            torch32 = expected
    for i, (ours, theirs, theirs32) in enumerate(zip(got32, expected, torch32)):
        reference = _torch_numpy(theirs)
        if reference.dtype == np.float64:
            reference = reference.astype(np.float32)  # (what float32 can hold of it: beyond its range, inf)
        # Each element within float32's tolerance of the float64 reference, or of PyTorch's own float32 result
        # (the float32 inputs themselves are rounded: (-3) ** 2.0000001 is NaN, (-3) ** float32(it) is 9).
        mine = ours.numpy().astype(reference.dtype)
        close = np.isclose(mine, reference, rtol=2e-4, atol=2e-5 * _scale(reference), equal_nan=True)
        torch_own = _torch_numpy(theirs32).astype(reference.dtype)
        close |= np.isclose(mine, torch_own, rtol=2e-4, atol=2e-5 * _scale(torch_own), equal_nan=True)
        if mine.shape != reference.shape or not close.all():
            return f"float32 output {i}: values differ from the reference and from PyTorch's float32"
        if reference.dtype == np.float32 and ours.dtype != np.float32:
            return f"float32 output {i}: dtype {ours.dtype}"
    return None


def _scale(a: np.ndarray) -> float:
    finite = np.abs(a[np.isfinite(a)]) if a.dtype.kind == "f" else np.abs(a)
    return max(1.0, float(finite.max(initial=0.0)))


def _fresh32(x):
    """PyTorch's float32 copy of a sample argument (float64 tensors cast, nothing requiring grad)."""
    if isinstance(x, torch.Tensor):
        return x.detach().to(torch.float32) if x.dtype == torch.float64 else x.detach()
    if isinstance(x, list | tuple) and not isinstance(x, torch.Size):
        return type(x)(_fresh32(v) for v in x)
    if isinstance(x, dict):
        return {k: _fresh32(v) for k, v in x.items()}
    return x


# --------------------------------------------------------------------------------------
# The runs, counted
# --------------------------------------------------------------------------------------

OPINFOS = {op.name + (f".{op.variant_test_name}" if op.variant_test_name else ""): op for op in op_db}


@dataclass
class Result:
    agreed: int = 0
    differed_on_purpose: collections.Counter = None
    skipped: collections.Counter = None
    failures: list = None
    errors_checked: int = 0
    error_failures: list = None


def _samples(opinfo, skipped):
    """PyTorch's reference inputs for the op (its samples and more), float64, requiring grad."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        samples = iter(opinfo.reference_inputs("cpu", torch.float64, requires_grad=True))
        i = 0
        while True:
            try:
                sample = next(samples)
            except StopIteration:
                return
            except Exception as err:  # (a few generators make integer tensors that require grad, and raise)
                skipped[f"PyTorch's sample generator raised {type(err).__name__}; the rest not run"] += 1
                return
            yield i, sample
            i += 1


@functools.cache
def run_op(name: str) -> Result:
    opinfo, entry = OPINFOS[name], MAPPED[name]
    result = Result(0, collections.Counter(), collections.Counter(), [], 0, [])
    rng = np.random.default_rng(0)
    for i, sample in _samples(opinfo, result.skipped):
        if SAMPLES_PER_OP is not None and i >= SAMPLES_PER_OP:
            result.skipped["beyond this run's samples per op (CI runs all)"] += 1
            continue
        try:
            problem = _check_sample(opinfo, entry, sample, rng)
        except Untranslatable as why:
            result.skipped[str(why)] += 1
            continue
        if problem is None:
            result.agreed += 1
        elif _difference(name, sample):
            result.differed_on_purpose[_difference(name, sample)] += 1
        else:
            result.failures.append(f"sample {i} ({_describe(sample)}): {problem}")
    if opinfo.error_inputs_func is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            error_inputs = list(opinfo.error_inputs("cpu"))
        for error in error_inputs:
            sample = error.sample_input
            try:
                args = _to_mg([sample.input, *sample.args], [], np.float64)
                kwargs = {k: _to_mg(v, [], np.float64) for k, v in sample.kwargs.items()}
                entry.call(*args, **kwargs)
            except Untranslatable as why:
                result.skipped[f"error input: {why}"] += 1
                continue
            except Exception:
                result.errors_checked += 1
                continue
            if _difference(name, sample):
                result.differed_on_purpose[_difference(name, sample)] += 1
            else:
                result.error_failures.append(f"{_describe(sample)}: PyTorch raises {error.error_type.__name__} "
                                             f"({error.error_regex!r}); minigrad returned a result")
    return result


def _describe(sample) -> str:
    def show(x):
        if isinstance(x, torch.Tensor):
            return f"{tuple(x.shape)} {str(x.dtype).removeprefix('torch.')}"
        if isinstance(x, list | tuple):
            return "[" + ", ".join(show(v) for v in x) + "]"
        return repr(x)
    kwargs = ", ".join(f"{k}={show(v)}" for k, v in sample.kwargs.items())
    return ", ".join(filter(None, [show(sample.input), *map(show, sample.args), kwargs]))


def test_every_mapped_name_is_an_opinfo():
    assert not set(MAPPED) - set(OPINFOS), set(MAPPED) - set(OPINFOS)


@pytest.mark.parametrize("name", sorted(MAPPED))
def test_minigrad_agrees_with_pytorch_on_its_samples(name):
    result = run_op(name)
    assert not result.failures, f"{name}: {len(result.failures)} sample(s) disagree:\n" + "\n".join(result.failures)
    assert not result.error_failures, f"{name}: " + "\n".join(result.error_failures)
    assert result.agreed or sum(result.differed_on_purpose.values()), f"{name}: no sample was run: {result.skipped}"


def test_summary_counts_every_sample():
    results = {name: run_op(name) for name in MAPPED}
    agreed = sum(r.agreed for r in results.values())
    on_purpose = sum((r.differed_on_purpose for r in results.values()), collections.Counter())
    skipped = sum((r.skipped for r in results.values()), collections.Counter())
    errors = sum(r.errors_checked for r in results.values())
    lines = [f"op_db: {len(MAPPED)} ops mapped; {agreed} samples agree with PyTorch (value, dtype, shape, "
             f"gradient, second order where cheap, float32 against float64); {errors} error inputs raise in both"]
    lines += [f"  differs on purpose, {n}: {reason}" for reason, n in on_purpose.most_common()]
    lines += [f"  skipped, {n}: {reason}" for reason, n in skipped.most_common()]
    print("\n".join(lines))
    assert len(MAPPED) >= 80
    assert agreed >= (2000 if SAMPLES_PER_OP is None else 4 * len(MAPPED))
    assert errors >= 10
    assert set(on_purpose) <= set(DIFFERENCES)
    if SAMPLES_PER_OP is None:
        assert set(on_purpose) == set(DIFFERENCES), "every stated difference shows up on PyTorch's samples"


# --------------------------------------------------------------------------------------
# Out-of-range dims raise, as in PyTorch (minigrad never wraps a bad axis round)
# --------------------------------------------------------------------------------------

DIM_OPS = {
    "sum": (lambda t, d: t.sum(d), lambda x, d: x.sum(axis=d)),
    "mean": (lambda t, d: t.mean(d), lambda x, d: x.mean(axis=d)),
    "var": (lambda t, d: t.var(d), lambda x, d: x.var(axis=d)),
    "amax": (lambda t, d: t.amax(d), lambda x, d: x.amax(axis=d)),
    "logsumexp": (lambda t, d: t.logsumexp(d), lambda x, d: x.logsumexp(axis=d)),
    "softmax": (lambda t, d: t.softmax(d), lambda x, d: x.softmax(axis=d)),
    "log_softmax": (lambda t, d: t.log_softmax(d), lambda x, d: x.log_softmax(axis=d)),
    "unsqueeze": (lambda t, d: t.unsqueeze(d + (1 if d >= 0 else -1)),
                  lambda x, d: x.unsqueeze(d + (1 if d >= 0 else -1))),
    "transpose": (lambda t, d: t.transpose(0, d), lambda x, d: x.swapaxes(0, d)),
    "squeeze": (lambda t, d: t.squeeze(d), lambda x, d: x.squeeze(d)),
    "cat": (lambda t, d: torch.cat([t, t], d), lambda x, d: mg.cat([x, x], axis=d)),
    "stack": (lambda t, d: torch.stack([t, t], d + (1 if d >= 0 else -1)),
              lambda x, d: mg.stack([x, x], axis=d + (1 if d >= 0 else -1))),
}


@pytest.mark.parametrize("name", sorted(DIM_OPS))
@pytest.mark.parametrize("dim", [3, -4, 7])
def test_out_of_range_dims_raise_as_in_pytorch(name, dim):
    on_torch, on_mg = DIM_OPS[name]
    array = np.ones((2, 1, 3))
    with pytest.raises((IndexError, RuntimeError)):
        on_torch(torch.from_numpy(array), dim)
    with pytest.raises(mg.OpError, match=r"out of range|axis"):
        on_mg(mg.tensor(array), dim)


# --------------------------------------------------------------------------------------
# The differences on purpose, each stated
# --------------------------------------------------------------------------------------


def test_a_zero_d_tensor_takes_dim_zero_under_either_spelling_as_in_pytorch():
    # PyTorch treats a 0-d tensor as having one dim; axis= is its alias for dim=, with the same meaning
    for code in ("x.mean(axis=0)", "x.sum(dim=0)", "x.var(axis=-1, correction=0)", "x.logsumexp(axis=(0,))",
                 "x.amax(axis=0)", "x.max(axis=0).values", "x.prod(axis=0)"):
        want = eval(code, {"x": torch.tensor(2.0)})  # noqa: S307
        got = eval(code, {"x": mg.tensor(2.0)})  # noqa: S307
        assert got.shape == tuple(want.shape) and got.item() == want.item(), code


def test_difference_an_empty_axis_tuple_reduces_nothing():
    t = torch.ones(2, 3)
    assert t.sum(dim=()).shape == ()  # PyTorch: every axis
    assert mg.ones(2, 3).sum(axis=()).shape == (2, 3)  # NumPy: none


def test_difference_maximum_takes_a_python_number():
    x = np.array([1.5, -2.0], np.float32)
    assert (mg.tensor(x) * mg.tensor(np.array([2, 3]))).dtype == np.float32  # (PyTorch's promotion: no difference)
    with pytest.raises(TypeError):
        torch.maximum(torch.tensor(x), 0.0)
    assert mg.maximum(mg.tensor(x), 0.0).tolist() == [1.5, 0.0]  # NumPy's np.maximum(x, 0.0)


def test_difference_transpose_and_concatenate_follow_numpy():
    with pytest.raises(RuntimeError):
        torch.ones(2, 3, 4).t()
    assert mg.ones(2, 3, 4).T.shape == (4, 3, 2)
    assert torch.cat([torch.ones(0), torch.ones(2, 2)], 1).shape == (2, 2)
    with pytest.raises(mg.OpError, match="concatenate: axis 1 is out of bounds"):
        mg.cat([mg.ones(0), mg.ones(2, 2)], axis=1)


def test_difference_clamp_with_tensor_bounds_splits_ties():
    x = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    torch.clamp(x, min=torch.tensor([1.0, 0.0], dtype=torch.float64)).sum().backward()
    assert x.grad.tolist() == [1.0, 1.0]  # torch.clamp: all to x at the tie
    ours = mg.tensor([1.0, 2.0], requires_grad=True)
    mg.maximum(ours, mg.tensor([1.0, 0.0])).sum().backward()
    assert ours.grad.tolist() == [0.5, 1.0]  # as torch.maximum: the tie is split


def test_difference_causal_attention_aligns_the_queries_with_the_last_keys():
    q, k = torch.zeros(1, 1, 2), torch.zeros(1, 3, 2)
    v = torch.arange(3.0).reshape(1, 3, 1)
    theirs = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    ours = F.scaled_dot_product_attention(mg.tensor(q.numpy()), mg.tensor(k.numpy()), mg.tensor(v.numpy()),
                                          is_causal=True)
    assert theirs.item() == 0.0  # PyTorch: the one query sees key 0 only (top-left aligned)
    assert ours.item() == pytest.approx(1.0)  # minigrad: the query is the last position, and sees all three
