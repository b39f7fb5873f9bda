"""Fused primitives: functions that could be composites of core ops, made single ops for speed.

A transformer spends its step in a handful of functions: its projections,
GELU, layer norm, attention's weights and the loss. Written as composites of
the core ops in ``ops.py`` each of them is many graph nodes and many passes
over memory, and each is called on every layer. Here each is one op with a
forward (a kernel from ``kernels/``) and a hand-written VJP.

Every block also carries its ``composite``: the same function written with core
ops, as runnable code. It is the definition the fused op has to meet, and

* ``minigrad.composite_mode()`` runs it instead of the op, so a graph can be
  read (and drawn) op by op, and checked against the fused run;
* the tests hold op and composite equal on every sample, in value, gradient
  and second derivative.

The backward primitives the VJPs use (``softmax_grad``, ``gelu_grad``,
``layer_norm_grad``) are fused ops too, with composites of their own: that
keeps each VJP itself differentiable (``create_graph=True``); so is
``flash_attention_lse``, the logsumexp ``flash_attention`` keeps for its VJP.
Adding a fused op is like adding a core op, plus a ``composite``.
"""

from __future__ import annotations

import math
import string

import numpy as np

from . import kernels
from .kernels import GELU_CUBIC, GELU_SATURATED, INV_SQRT_2PI, SQRT_2_OVER_PI
from .modes import is_grad_enabled
from .ops import _const, concatenate, maximum, op, sample
from .tensor import Tensor


@op()
class linear:
    """x @ weight.T + bias with weight stored (out, in), as PyTorch's F.linear; the bias is optional.

    Fused so that every projection of a transformer is one node whose weight
    gradient comes out directly in the weight's own (out, in) layout.
    """
    samples = [sample((3, 4), (5, 4), (5,)), sample((2, 3, 4), (5, 4), (5,)), sample((2, 3, 4), (5, 4)),
               sample((4,), (5, 4), (5,))]

    def forward(x, weight, *bias):
        return kernels.linear(x, weight, *bias)  # = x @ weight.T + bias

    def vjp(g, out, x, weight, *bias):
        grad_x = g @ weight  # (..., in)
        grad_weight = linear_weight_grad(g, x)  # (out, in): g's rows times x's, summed
        if not bias:
            return grad_x, grad_weight
        return grad_x, grad_weight, g.sum(axis=tuple(range(g.ndim - 1)))  # (out,): over every leading axis

    def composite(x, weight, *bias):
        out = x @ weight.T
        return out + bias[0] if bias else out


@op()
class linear_weight_grad:
    """linear's weight gradient: ``g_rows.T @ x_rows``, (out, in), the sum over every position of g's row
    times x's row (an outer product), with g (..., out) and x (..., in).

    A primitive so that each projection's backward is three nodes (this, ``g @ weight`` and
    the bias's sum), not the six its composite makes (two reshapes, a transpose, a matmul).
    """
    samples = [sample((3, 5), (3, 4)), sample((2, 3, 5), (2, 3, 4)), sample((5,), (4,))]

    def forward(g, x):
        n = math.prod(x.shape[:-1])  # (spelled out: reshape cannot infer -1 when a size is 0)
        return kernels.matmul(g.reshape(n, g.shape[-1]).T, x.reshape(n, x.shape[-1]))  # = g_rows.T @ x_rows

    def vjp(u, out, g, x):
        # out = G^T X with G, X the rows of g and x: d/dG = X u^T and d/dX = G u, row by row
        return x @ u.T, g @ u  # (..., out), (..., in)

    def composite(g, x):
        n = math.prod(x.shape[:-1])
        return g.reshape(n, g.shape[-1]).T @ x.reshape(n, x.shape[-1])


def _gelu_gate_composite(x, approximate):
    """GELU's gate, the factor multiplying x: Phi(x) = (1 + erf(x / sqrt 2)) / 2, or GPT-2's tanh form."""
    if approximate == "tanh":  # (x clipped where the gate is flat, so that x**3 cannot overflow: kernels/)
        x = x.clip(-GELU_SATURATED, GELU_SATURATED)
        return 0.5 * (1.0 + (SQRT_2_OVER_PI * (x + GELU_CUBIC * x * x * x)).tanh())
    return 0.5 * (1.0 + (x * (1 / math.sqrt(2.0))).erf())


@op()
class gelu:
    """GELU: x * Phi(x), exact with erf (``approximate="none"``) or GPT-2's tanh form (``"tanh"``).

    The forward keeps the gate (Phi(x), or its tanh form) that multiplies x: the
    derivative is a few multiplications from it, with no tanh or erf again.
    ``approximate`` is checked where users pass it (``minigrad/nn/checks.py``).
    """
    samples = [sample((3, 4)), sample((3, 4), approximate="tanh")]

    def forward(x, *, approximate="none"):
        out, gate = kernels.gelu(x, approximate)  # = x * gate, gate = 0.5 * (1 + erf(x / sqrt(2))) or tanh form
        return out, gate  # (output, saved)

    def vjp(g, out, x, *, approximate="none"):
        return (gelu_grad(x, g, approximate=approximate, saved=out._saved),)

    def composite(x, *, approximate="none"):
        return x * _gelu_gate_composite(x, approximate)


@op()
class gelu_grad:
    """g * d gelu(x) / dx: gelu's backward as one primitive, one fused pass.

    ``gelu_grad(x, g)``: g is the gradient arriving at gelu's output (ones for
    the derivative itself). ``saved``: the gate gelu's forward kept for this
    same x, so neither tanh nor erf is computed again; the result is still a
    function of x and g alone.
    """
    samples = [sample((3, 4), (3, 4)), sample((3, 4), (3, 4), approximate="tanh"), sample((3, 4), (4,))]

    def forward(x, g, *, approximate="none", saved=None):
        gate = kernels.gelu_gate(x, approximate) if saved is None else saved
        if gate.shape != x.shape:
            raise ValueError(f"the gate saved by gelu(x) must have x's shape {x.shape}, got {gate.shape}")
        return kernels.gelu_grad(x, g, gate, approximate)  # = g * (gate + x * phi(x)), or the tanh form

    def vjp(u, out, x, g, *, approximate="none", saved=None):
        # d/dg is gelu' again (this op with u for g); d/dx needs the second derivative, written
        # out here (only for create_graph, so plain Tensor ops are fast enough).
        xc = x.clip(-GELU_SATURATED, GELU_SATURATED)  # (0 beyond, where x**4 could overflow)
        if approximate == "tanh":
            t = (SQRT_2_OVER_PI * (xc + GELU_CUBIC * xc * xc * xc)).tanh()
            du = SQRT_2_OVER_PI * (1.0 + 3 * GELU_CUBIC * xc * xc)
            d2u = 6 * SQRT_2_OVER_PI * GELU_CUBIC * xc
            second = (1.0 - t * t) * (du + 0.5 * xc * (d2u - 2.0 * t * du * du))
        else:
            second = (-0.5 * xc * xc).exp() * INV_SQRT_2PI * (2.0 - xc * xc)
        return u * g * second, gelu_grad(x, u, approximate=approximate, saved=saved)

    def composite(x, g, *, approximate="none", saved=None):
        gate = _gelu_gate_composite(x, approximate)
        if approximate == "tanh":
            x = x.clip(-GELU_SATURATED, GELU_SATURATED)  # (the gate's slope is 0 beyond)
            du = SQRT_2_OVER_PI * (1.0 + 3 * GELU_CUBIC * x * x)  # d/dx of tanh's argument
            return g * gate * (1.0 + 2.0 * x * du * (1.0 - gate))  # gate' = 2 gate (1 - gate) du
        return g * (gate + x * (-0.5 * x * x).exp() * INV_SQRT_2PI)  # Phi(x) + x phi(x)


@op()
class softmax_grad:
    """softmax's backward as one primitive: ``scale * out * (g - sum(g * out))`` over ``axis``, out = softmax(x).

    ``scale`` (default 1) multiplies the result in the same pass: attention's
    VJP scales it once there, rather than the two products it is used in.
    """
    samples = [sample((3, 5), (3, 5)), sample((2, 3, 4), (2, 3, 4), axis=1), sample((3, 5), (3, 5), scale=0.3)]

    def forward(out, g, *, axis=-1, scale=1.0):
        return kernels.softmax_grad(out, g, axis, scale)  # = scale * out * (g - (g * out).sum(axis, keepdims=True))

    def vjp(u, grad, out, g, *, axis=-1, scale=1.0):
        # grad is bilinear in (out, g): with s = sum(g * out), grad = scale * (out * g - out * s), so
        # d/dg (u . grad) = softmax_grad(out, u) * scale and
        # d/dout (u . grad) = scale * (u * (g - s) - g * sum(u * out)).
        s = (g * out).sum(axis=axis, keepdims=True)
        grad_out = u * (g - s) - g * (u * out).sum(axis=axis, keepdims=True)
        return grad_out * scale if scale != 1.0 else grad_out, softmax_grad(out, u, axis=axis, scale=scale)

    def composite(out, g, *, axis=-1, scale=1.0):
        grad = out * (g - (g * out).sum(axis=axis, keepdims=True))
        return grad * scale if scale != 1.0 else grad


@op()
class attention_weights:
    """softmax(q @ k^T * scale + bias) over the keys: attention's weights (..., Tq, Tk).

    q (..., Tq, E), k (..., Tk, E), leading axes broadcast as in matmul; the
    optional ``bias`` broadcasts to (..., Tq, Tk), and -inf in it forbids a key
    (a row with every key forbidden gets zero weights, not NaN). Fused because
    the composite makes three (..., Tq, Tk) arrays, the largest activations of a
    transformer, where this makes one.
    """
    samples = [sample((2, 3, 4), (2, 5, 4), scale=0.5),
               sample((2, 1, 3, 4), (3, 5, 4), (3, 5), scale=0.7),
               sample((2, 3, 4), (2, 3, 4), np.where(np.tril(np.ones((3, 3), bool)), 0.0, -np.inf), scale=1.0),
               sample((3, 4), (5, 4), scale=0.5)]

    def forward(q, k, *bias, scale):
        return kernels.attention_weights(q, k, *bias, scale=scale)  # = softmax(q @ k^T * scale + bias, axis=-1)

    def vjp(g, out, q, k, *bias, scale):
        grad_scaled = softmax_grad(out, g, scale=scale)  # (..., Tq, Tk): d/d(q @ k^T), the scale taken once
        grad_q = grad_scaled @ k  # (..., Tq, E)
        grad_k = grad_scaled.swapaxes(-1, -2) @ q  # (..., Tk, E)
        if not (bias and bias[0].requires_grad):  # (a mask is a constant: no gradient to make)
            return (grad_q, grad_k) + ((None,) if bias else ())
        return grad_q, grad_k, softmax_grad(out, g)  # the bias is added unscaled

    def composite(q, k, *bias, scale):
        scores = q @ k.swapaxes(-1, -2) * scale  # (..., Tq, Tk)
        return (scores + bias[0] if bias else scores).softmax(axis=-1)


@op()
class layer_norm:
    """(x - mean) / sqrt(var + eps) over the last axis, then ``* weight + bias`` when given (both or neither).

    ``saved``: the (xhat, 1/std) a forward on this same x computed, to reuse
    (the VJP passes them; they are not a way to normalise with other statistics).
    """
    samples = [sample((3, 5), (5,), (5,), eps=1e-5), sample((2, 3, 4), (4,), (4,), eps=0.1),
               sample((2, 3, 4), eps=0.1)]

    def forward(x, *affine, eps=1e-5, saved=None):
        if len(affine) not in (0, 2):
            raise TypeError(f"weight and bias go together: give both or neither, got {len(affine)} of them")
        if affine and saved is None:
            out, xhat, rstd = kernels.layer_norm_affine(x, *affine, eps)  # = xhat * weight + bias, xhat, rstd
            return out, (xhat, rstd)
        xhat, rstd = kernels.standardise(x, eps) if saved is None else saved  # = (x - mean) / sqrt(var + eps)
        if not affine:
            return xhat, (xhat, rstd)
        weight, bias = affine
        out = xhat * weight  # a new array: xhat is kept for the backward
        out += bias
        return out, (xhat, rstd)

    def vjp(g, out, x, *affine, eps=1e-5, saved=None):
        # (xhat, rstd) from this node's forward, so backward need not standardise x twice more.
        saved = out._saved
        if not affine:
            return (layer_norm_grad(g, x, eps=eps, saved=saved),)
        weight, _ = affine
        xhat = layer_norm(x, eps=eps, saved=saved)  # the forward's xhat (the output is xhat * weight + bias)
        grad_weight = einsum(g, xhat, subscripts="...i,...i->i")  # sum(g * xhat) over the batch, in one pass
        grad_bias = g.sum(axis=tuple(range(g.ndim - 1)))
        return layer_norm_grad(g, x, weight, eps=eps, saved=saved), grad_weight, grad_bias

    def composite(x, *affine, eps=1e-5, saved=None):
        xhat = (x - x.mean(-1, keepdim=True)) / (x.var(-1, keepdim=True, correction=0) + eps).sqrt()
        if not affine:
            return xhat
        weight, bias = affine
        return xhat * weight + bias


@op()
class layer_norm_grad:
    """The gradient of ``layer_norm`` with respect to x: its backward, made a primitive.

    With xhat = layer_norm(x) (no affine), rstd = 1/sqrt(var + eps) and v = g * weight
    (v = g without one), the gradient is, over the last axis,
    ``rstd * (v - mean(v) - xhat * mean(v * xhat))``: v projected off the
    directions a shift and a rescale of x do not change. This is J v with J
    the (symmetric) Jacobian of xhat. ``saved``: (xhat, rstd) of this x, when
    the caller has them (layer_norm's VJP does).
    """
    samples = [sample((3, 5), (3, 5), (5,), eps=1e-5), sample((2, 3, 4), (2, 3, 4), (4,), eps=0.1),
               sample((2, 3, 4), (2, 3, 4), eps=0.1)]

    def forward(g, x, *weight, eps=1e-5, saved=None):
        xhat, rstd = kernels.standardise(x, eps) if saved is None else saved  # read only: shared with the forward
        return kernels.layer_norm_grad(g, xhat, rstd, *weight)  # = rstd * (v - mean(v) - xhat * mean(v * xhat))

    def vjp(u, out, g, x, *weight, eps=1e-5, saved=None):
        # Only needed for create_graph (second derivatives of layer norm). With
        # S = sum(u * out) per row, and J symmetric: dS/dv = J u, so dS/dg = J u * weight and
        # dS/dweight = g * J u; dS/dx comes from rstd, mean(v * xhat) and xhat each depending on x.
        n = x.shape[-1]
        xc = x - x.mean(axis=-1, keepdims=True)
        rstd = ((xc * xc).mean(axis=-1, keepdims=True) + eps) ** -0.5  # (..., 1)
        xhat = xc * rstd
        v = g * weight[0] if weight else g
        ju = layer_norm_grad(u, x, eps=eps)  # J u
        mean_v = v.mean(axis=-1, keepdims=True)
        mean_v_xhat = (v * xhat).mean(axis=-1, keepdims=True)
        u_sum = u.sum(axis=-1, keepdims=True)
        u_v = (u * v).sum(axis=-1, keepdims=True)
        u_xhat = (u * xhat).sum(axis=-1, keepdims=True)
        grad_x = (-(rstd * rstd / n) * (u_v - mean_v * u_sum - mean_v_xhat * u_xhat) * xhat
                  - (rstd * u_xhat / n) * out - rstd * mean_v_xhat * ju)
        if not weight:
            return ju, grad_x
        return ju * weight[0], grad_x, g * ju

    def composite(g, x, *weight, eps=1e-5, saved=None):
        rstd = (x.var(-1, keepdim=True, correction=0) + eps) ** -0.5
        xhat = (x - x.mean(-1, keepdim=True)) * rstd
        v = g * weight[0] if weight else g
        return rstd * (v - v.mean(axis=-1, keepdims=True) - xhat * (v * xhat).mean(axis=-1, keepdims=True))


@op()
class rms_norm:
    """x / sqrt(mean(x**2) + eps) * weight over the last axis (no centring, no bias)."""
    samples = [sample((3, 5), (5,), eps=1e-6), sample((2, 3, 4), (4,), eps=0.1)]

    def forward(x, weight, *, eps=1e-6):
        return kernels.rms_norm(x, weight, eps)  # = x / sqrt(mean(x * x) + eps) * weight

    def vjp(g, out, x, weight, *, eps=1e-6):
        rstd = ((x * x).mean(axis=-1, keepdims=True) + eps) ** -0.5
        xhat = x * rstd
        gxhat = g * weight
        gx = rstd * (gxhat - xhat * (gxhat * xhat).mean(axis=-1, keepdims=True))
        return gx, g * xhat

    def composite(x, weight, *, eps=1e-6):
        return x * ((x * x).mean(axis=-1, keepdims=True) + eps) ** -0.5 * weight


def _check_targets(logits: np.ndarray, targets: np.ndarray, ignore_index: int) -> None:
    """The targets' one check (forward and composite): (N,) integer class ids in [0, C), or ``ignore_index``."""
    if logits.ndim != 2:
        raise ValueError(f"logits must be (N, C), got shape {logits.shape}")
    if targets.shape != logits.shape[:1]:
        raise ValueError(f"targets must have shape ({logits.shape[0]},) to match logits {logits.shape}, "
                         f"got {targets.shape}")
    if targets.dtype.kind not in "iu":
        raise TypeError(f"targets must be integer class indices, got {targets.dtype}")
    if targets.size and targets.min() >= 0 and targets.max() < logits.shape[1]:
        return
    bad = (targets != ignore_index) & ((targets < 0) | (targets >= logits.shape[1]))
    if bad.any():
        raise ValueError(f"target {targets[bad][0]} is out of range for {logits.shape[1]} classes")


def _target_rows(targets: np.ndarray, ignore_index: int):
    """(kept: bool (N,), safe_targets: int (N,) with the ignored ones set to 0), for targets already checked."""
    kept = targets != ignore_index
    return kept, np.where(kept, targets, 0)


def _check_reduction(reduction: str) -> None:
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


@op()
class cross_entropy:
    """Mean (or sum, or per-row) of -log softmax(logits)[target], fused and stable.

    ``logits`` (N, C), ``targets`` (N,) integer; rows whose target is
    ``ignore_index`` count for nothing (the mean is over the other rows).
    """
    samples = [sample((4, 5), np.array([0, 3, 4, 1])),
               sample((4, 5), np.array([2, -100, 4, 2]), reduction="sum"),
               sample((3, 4), np.array([1, 0, -1]), ignore_index=-1, reduction="none")]

    def forward(logits, targets, *, ignore_index=-100, reduction="mean"):
        _check_reduction(reduction)
        _check_targets(logits, targets, ignore_index)
        kept, safe = _target_rows(targets, ignore_index)
        rows = kernels.cross_entropy(logits, safe)  # = logsumexp(logits, axis=-1) - logits[r, safe[r]]
        losses = np.where(kept, rows, 0).astype(logits.dtype)
        if reduction == "none":
            return losses
        if reduction == "sum":
            return losses.sum()
        return losses.sum() / np.asarray(np.maximum(kept.sum(), 1), dtype=logits.dtype)

    def vjp(g, out, logits, targets, *, ignore_index=-100, reduction="mean"):
        kept, safe = _target_rows(targets.data, ignore_index)  # (checked by the forward)
        weight = kept.astype(logits.dtype)
        if reduction == "mean":
            weight /= np.maximum(kept.sum(), 1)
        if not is_grad_enabled():  # a first-order backward: no graph to record, so one kernel does it all
            row_weight = np.broadcast_to(g.data, weight.shape) * weight  # (N,)
            return Tensor._wrap(kernels.cross_entropy_grad(logits.data, safe, row_weight)), None  # = below
        onehot = np.zeros(logits.shape, dtype=logits.dtype)
        onehot[np.arange(len(safe)), safe] = 1
        row_grad = g.reshape(-1, 1) * _const(weight.reshape(-1, 1), g)  # (N, 1), or (1, 1) scaled
        return (logits.softmax(axis=-1) - _const(onehot, g)) * row_grad, None

    def composite(logits, targets, *, ignore_index=-100, reduction="mean"):
        _check_reduction(reduction)
        _check_targets(logits.data, targets.data, ignore_index)
        kept, safe = _target_rows(targets.data, ignore_index)
        picked = logits.log_softmax(axis=-1)[np.arange(len(safe)), safe]  # (N,): log p(target) per row
        losses = (-picked).masked_fill(~kept, 0.0)
        if reduction == "none":
            return losses
        return losses.sum() / max(int(kept.sum()), 1) if reduction == "mean" else losses.sum()


def _einsum_terms(subscripts: str, shapes: list[tuple]) -> tuple[list[str], str]:
    """(["ij", "jk"], "ik") from "ij,jk->ik" and the operands' shapes, checked, with every label explicit.

    ``...`` becomes unused letters, one per axis it covers, right-aligned
    across operands as broadcasting aligns them, so that the VJP can sum over
    them like any label (NumPy's einsum will not sum over an ellipsis). Without
    "->" the output is NumPy's implicit one: "..." if any operand has it, then
    the labels used exactly once, in alphabetical order.
    """
    if not isinstance(subscripts, str):
        raise TypeError(f"subscripts must be a string like 'ij,jk->ik', got {type(subscripts).__name__}")
    compact = subscripts.replace(" ", "").replace("...", ".")
    lhs, arrow, rhs = compact.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ValueError(f"subscripts {subscripts!r} name {len(terms)} operand(s), but {len(shapes)} were given")
    if not arrow:
        once = sorted(label for label in set(lhs) if lhs.count(label) == 1 and label.isalpha())
        rhs = ("." if "." in lhs else "") + "".join(once)
    for term, shape in zip(terms, shapes):
        if not all(label.isascii() and (label.isalpha() or label == ".") for label in term) or term.count(".") > 1:
            raise ValueError(f"subscripts {subscripts!r}: labels are letters, and '...' comes at most once per "
                             f"operand")
        if len(set(term)) != len(term):
            raise ValueError(f"subscripts {subscripts!r}: a label repeated within one operand (a diagonal or "
                             f"trace) is not supported")
        if len(shape) < len(term) - ("." in term) or ("." not in term and len(shape) != len(term)):
            raise ValueError(f"subscripts {subscripts!r}: term {term.replace('.', '...')!r} does not fit an "
                             f"operand of shape {shape}")
    rank = 0  # the axes "..." covers, most over the operands
    for term, shape in zip(terms, shapes):
        if "." in term:
            rank = rank if rank > len(shape) - len(term) + 1 else len(shape) - len(term) + 1
    free = [letter for letter in string.ascii_uppercase + string.ascii_lowercase if letter not in compact]
    if rank > len(free):
        raise ValueError(f"subscripts {subscripts!r}: '...' covers {rank} axes, more than the unused letters")
    ellipsis = "".join(free[:rank])
    inputs = [term.replace(".", ellipsis[rank - (len(shape) - len(term) + 1):]) for term, shape in zip(terms, shapes)]
    return inputs, rhs.replace(".", ellipsis)


@op()
class einsum:
    """Einstein summation, as ``np.einsum``: ``mg.einsum("bhqd,bhkd->bhqk", q, k)``.

    Every operand's labels (letters) are its axes; labels missing from
    the output are summed over; ``...`` stands for leading axes that broadcast.
    Each label may appear once per operand (no diagonals or traces). The VJP is
    einsum again: an operand's gradient contracts the output's gradient with
    the other operands, and is the same all along the labels only it has.
    Fused: the composite multiplies every operand out to all the labels' axes
    before summing, where NumPy's einsum contracts pairwise.
    """
    samples = [sample((3, 4), (4, 5), subscripts="ij,jk->ik"), sample((2, 3, 4), (2, 3, 4), subscripts="bti,bti->i"),
               sample((2, 3, 4), (4,), subscripts="...i,i->..."), sample((3, 4), subscripts="ij->j"),
               sample((3,), (4,), subscripts="i,j"), sample((2, 1, 4), (3, 4), (4,), subscripts="...i,...i,i->i")]

    def forward(*operands, subscripts):
        inputs, output = _einsum_terms(subscripts, [x.shape for x in operands])
        return np.asarray(np.einsum(",".join(inputs) + "->" + output, *operands))

    def vjp(g, out, *operands, subscripts):
        inputs, output = _einsum_terms(subscripts, [x.shape for x in operands])
        grads = []
        for i, x in enumerate(operands):
            if not x.requires_grad:  # a constant operand (layer norm's xhat, say): no contraction to run
                grads.append(None)
                continue
            others = inputs[:i] + inputs[i + 1:]
            known = set(output).union(*others)
            kept = "".join(label for label in inputs[i] if label in known)
            grad = einsum(g, *operands[:i], *operands[i + 1:], subscripts=",".join([output, *others]) + "->" + kept)
            if kept != inputs[i]:  # summed over labels only x has: put them back as size-1 axes
                sizes = iter(grad.shape)
                grad = grad.reshape(tuple(next(sizes) if label in kept else 1 for label in inputs[i]))
            if grad.shape != x.shape:
                # Size 1 along an axis where x is bigger: the gradient is the same all along it. (Where
                # x's axis is the size-1 one, broadcast, the engine sums the gradient back to it.)
                grad = grad.broadcast_to(np.broadcast_shapes(grad.shape, x.shape))
            grads.append(grad)
        return tuple(grads)

    def composite(*operands, subscripts):
        inputs, output = _einsum_terms(subscripts, [x.shape for x in operands])
        labels = sorted(set("".join(inputs)))  # one axis per label, in this order
        product = None
        for term, x in zip(inputs, operands):
            order = sorted(range(len(term)), key=lambda i: labels.index(term[i]))
            aligned = x.transpose(order) if order != sorted(order) else x
            aligned = aligned.reshape(tuple(x.shape[term.index(label)] if label in term else 1 for label in labels))
            product = aligned if product is None else product * aligned  # broadcasts to every label's size
        summed = tuple(i for i, label in enumerate(labels) if label not in output)
        result = product.sum(axis=summed) if summed else product
        remaining = [label for label in labels if label in output]
        order = [remaining.index(label) for label in output]
        result = result.transpose(order) if order != sorted(order) else result
        return result.broadcast_to(tuple(_label_size(label, inputs, operands) for label in output))


def _label_size(label: str, inputs: list[str], operands) -> int:
    """The size of ``label``'s axis: the largest among the operands that have it (others broadcast from 1)."""
    return max((x.shape[term.index(label)] for term, x in zip(inputs, operands) if label in term), default=1)


# --------------------------------------------------------------------------------------
# FlashAttention: attention in tiles, never holding the (Tq, Tk) scores
# --------------------------------------------------------------------------------------


def _blocks(n: int, size: int) -> list[tuple[int, int]]:
    """[(start, stop)] cutting range(n) into blocks of ``size`` (the last one shorter when size does not divide n)."""
    return [(start, min(start + size, n)) for start in range(0, n, size)]


def _causal_tile(rows: tuple[int, int], cols: tuple[int, int], offset: int):
    """Which keys of the tile the queries see, query i seeing keys j <= i + offset: True (all of them), False
    (none: the tile lies above the diagonal and is skipped), or a bool (rows, cols) array for a tile it crosses."""
    (i0, i1), (j0, j1) = rows, cols
    if j1 - 1 <= i0 + offset:
        return True
    if j0 > i1 - 1 + offset:
        return False
    return np.arange(j0, j1)[None, :] <= np.arange(i0, i1)[:, None] + offset


def _bias_tile(bias, rows: tuple[int, int], cols: tuple[int, int]):
    """bias[..., i0:i1, j0:j1], keeping an axis of size 1 (broadcast over queries or keys) whole."""
    r = slice(*rows) if bias.shape[-2] != 1 else slice(None)
    c = slice(*cols) if bias.shape[-1] != 1 else slice(None)
    return bias[..., r, c]


def _flash_tiles(Tq: int, Tk: int, block_size: int, causal: bool):
    """Every (query block, key block, visible) the tiled loops visit; tiles above the causal diagonal are left out.

    Causal, the queries are the last Tq of Tk positions (``scaled_dot_product_attention``'s convention):
    query i sees keys up to i + Tk - Tq.
    """
    for rows in _blocks(Tq, block_size):
        for cols in _blocks(Tk, block_size):
            visible = _causal_tile(rows, cols, Tk - Tq) if causal else True
            if visible is not False:
                yield rows, cols, visible


def _flash_lead(q, k, v, bias) -> tuple:
    """The broadcast batch/head axes of the output (those of q, k, v and the bias)."""
    return np.broadcast_shapes(q.shape[:-2], k.shape[:-2], *(x.shape[:-2] for x in (v, *bias) if x is not None))


def _flash_forward(q, k, v, bias, scale, causal, block_size):
    """The tiled forward on ndarrays: (out (..., Tq, Ev) or None when v is None, logsumexp (..., Tq)).

    Per query block, the online softmax over key blocks: a running max m, a running sum l of exp(s - m) and
    a running acc = sum of exp(s - m) v; when a block raises the max, l and acc are rescaled by exp(m - m_new).
    """
    Tq, Tk = q.shape[-2], k.shape[-2]
    lead = _flash_lead(q, k, v, bias)
    out = None if v is None else np.zeros(lead + (Tq, v.shape[-1]), dtype=q.dtype)
    lse = np.full(lead + (Tq,), -np.inf, dtype=q.dtype)
    stats = {}  # query block -> (m, l, acc)
    for rows, cols, visible in _flash_tiles(Tq, Tk, block_size, causal):
        s = q[..., slice(*rows), :] @ k[..., slice(*cols), :].swapaxes(-1, -2) * q.dtype.type(scale)  # (.., n, m)
        if bias:
            s = s + _bias_tile(bias[0], rows, cols)
        if visible is not True:
            s = np.where(visible, s, -np.inf)
        m, l, acc = stats.get(rows, (None, None, None))
        m_new = s.max(axis=-1, keepdims=True) if m is None else np.maximum(m, s.max(axis=-1, keepdims=True))
        m_safe = np.where(m_new == -np.inf, 0, m_new)  # a row that has seen only forbidden keys so far
        p = np.exp(s - m_safe)
        if m is None:
            l, acc = p.sum(axis=-1, keepdims=True), None if v is None else p @ v[..., slice(*cols), :]
        else:
            alpha = np.exp(m - m_safe)  # the rescaling, 1 unless this block raised the max
            l = alpha * l + p.sum(axis=-1, keepdims=True)
            acc = None if v is None else alpha * acc + p @ v[..., slice(*cols), :]
        stats[rows] = m_new, l, acc
    for rows, (m, l, acc) in stats.items():
        seen = l > 0  # False for a query that may attend to nothing: output 0, logsumexp -inf
        with np.errstate(divide="ignore"):
            lse[..., slice(*rows)] = np.where(seen, np.where(m == -np.inf, 0, m) + np.log(l), -np.inf)[..., 0]
        if v is not None:
            out[..., slice(*rows), :] = np.where(seen, acc / np.where(seen, l, 1), 0)
    return out, lse


def _flash_backward(q, k, v, bias, lse, g, scale, causal, block_size, out=None):
    """Gradients by recomputation, tile by tile, in Tensor ops (so that they can be differentiated again).

    With the logsumexp of each row, a tile's weights are P = exp(S - lse) without any other tile. For
    attention (v given; g = dO, out = O): dV += P^T dO, dP = dO V^T, dS = P (dP - rowsum(dO O)),
    dQ += dS K scale, dK += dS^T Q scale. For the logsumexp alone (v None; g = d lse): dS = P g.
    Returns (dq, dk, dv or None, dbias or None); dbias only when the bias requires grad.
    """
    Tq, Tk = q.shape[-2], k.shape[-2]
    lead = _flash_lead(q, k, v, bias)
    lse = lse.masked_fill(np.isneginf(lse.data), 0.0).unsqueeze(-1)  # (..., Tq, 1); rows that see no key: P = 0
    g = g if v is not None else g.unsqueeze(-1)  # dO (..., Tq, Ev), or d lse as (..., Tq, 1)
    delta = (g * out).sum(axis=-1, keepdims=True) if v is not None else None  # rowsum(dO * O), (..., Tq, 1)
    want_bias = bool(bias) and bias[0].requires_grad
    dq, dk, dv, dbias = {}, {}, {}, {}
    for rows, cols, visible in _flash_tiles(Tq, Tk, block_size, causal):
        r, c = slice(*rows), slice(*cols)
        qi, kj = q[..., r, :], k[..., c, :]
        s = qi @ kj.swapaxes(-1, -2) * scale  # (..., n, m), recomputed
        if bias:
            s = s + _bias_tile(bias[0], rows, cols)
        if visible is not True:
            s = s.masked_fill(~visible, -np.inf)
        p = (s - lse[..., r, :]).exp()  # the tile's attention weights
        if v is None:
            ds = p * g[..., r, :]
        else:
            gi, vj = g[..., r, :], v[..., c, :]
            dv[cols] = _accumulate(dv.get(cols), p.swapaxes(-1, -2) @ gi)
            ds = p * (gi @ vj.swapaxes(-1, -2) - delta[..., r, :])
        dq[rows] = _accumulate(dq.get(rows), ds @ kj * scale)
        dk[cols] = _accumulate(dk.get(cols), ds.swapaxes(-1, -2) @ qi * scale)
        if want_bias:
            dbias[rows, cols] = ds
    zeros = _flash_zeros(q.dtype, lead)
    grad_q = _join(dq, _blocks(Tq, block_size), lambda n: zeros(n, q.shape[-1]))
    grad_k = _join(dk, _blocks(Tk, block_size), lambda n: zeros(n, k.shape[-1]))
    grad_v = None if v is None else _join(dv, _blocks(Tk, block_size), lambda n: zeros(n, v.shape[-1]))
    grad_bias = None
    if want_bias:  # (..., Tq, Tk): the bias is as large itself, or the engine sums this down to its shape
        key_blocks = _blocks(Tk, block_size)
        rows_of = {rows: _join({c: dbias[rows, c] for c in key_blocks if (rows, c) in dbias}, key_blocks,
                               lambda m, n=rows[1] - rows[0]: zeros(n, m), axis=-1) for rows in _blocks(Tq, block_size)}
        grad_bias = _join(rows_of, _blocks(Tq, block_size), lambda n: zeros(n, Tk))
    return grad_q, grad_k, grad_v, grad_bias


def _accumulate(total, term):
    return term if total is None else total + term


def _flash_zeros(dtype, lead):
    return lambda n, m: Tensor._wrap(np.zeros(lead + (n, m), dtype=dtype))


def _join(parts: dict, blocks, zeros, axis=-2):
    """The blocks' tensors joined along ``axis`` in order; a block no tile reached is zeros (no blocks: size 0)."""
    if not blocks:
        return zeros(0)
    return concatenate(*(parts[b] if b in parts else zeros(b[1] - b[0]) for b in blocks), axis=axis)


def _flash_samples():
    causal_cut = np.where(np.tril(np.ones((5, 7), bool), k=2), 0.0, -np.inf)
    return [sample((2, 5, 3), (2, 7, 3), (2, 7, 4), scale=0.6, block_size=2),
            sample((2, 5, 3), (2, 7, 3), (2, 7, 4), scale=0.6, causal=True, block_size=3),
            sample((2, 1, 5, 3), (3, 5, 3), (3, 5, 2), (1, 5), scale=0.5, block_size=2),
            sample((5, 3), (7, 3), (7, 2), causal_cut, scale=0.7, block_size=4),
            sample((6, 2), (4, 2), (4, 3), scale=0.7, causal=True, block_size=2)]


@op()
class flash_attention:
    """softmax(q @ k^T * scale + bias) @ v, computed in (block_size x block_size) tiles: FlashAttention.

    q (..., Tq, E), k (..., Tk, E), v (..., Tk, Ev), the optional ``bias`` broadcast to (..., Tq, Tk) (-inf
    forbids a key); ``causal``: query i sees keys up to i + Tk - Tq. The forward runs the online softmax
    over key blocks and never holds more than one tile of scores; it keeps only the logsumexp of each row
    (..., Tq) for backward, which recomputes each tile's weights from it (``_flash_backward``). Memory:
    linear in T. The composite is the same tiled algorithm in Tensor ops (demos/flash_attention_lesson.py
    derives it); a query that may attend to nothing gets zeros, as ``attention_weights`` gives.
    """
    samples = _flash_samples()

    def forward(q, k, v, *bias, scale, causal=False, block_size=64):
        return _flash_forward(q, k, v, bias, scale, causal, block_size)  # (out, saved: the rows' logsumexp)

    def vjp(g, out, q, k, v, *bias, scale, causal=False, block_size=64):
        params = dict(scale=scale, causal=causal, block_size=block_size)
        lse = flash_attention_lse(q, k, *bias, **params, saved=out._saved)  # (..., Tq), a function of q, k, bias
        grad_q, grad_k, grad_v, grad_bias = _flash_backward(q, k, v, bias, lse, g, scale, causal, block_size, out)
        return (grad_q, grad_k, grad_v) + ((grad_bias,) if bias else ())

    def composite(q, k, v, *bias, scale, causal=False, block_size=64):
        Tq, Tk = q.shape[-2], k.shape[-2]
        lead = _flash_lead(q, k, v, bias)
        stats = {}  # query block -> (running max m, running sum l, running acc), each (..., n, 1) or (..., n, Ev)
        for rows, cols, visible in _flash_tiles(Tq, Tk, block_size, causal):
            s = q[..., slice(*rows), :] @ k[..., slice(*cols), :].swapaxes(-1, -2) * scale  # (..., n, m)
            if bias:
                s = s + _bias_tile(bias[0], rows, cols)
            if visible is not True:
                s = s.masked_fill(~visible, -np.inf)
            m, l, acc = stats.get(rows, (None, None, None))
            m_new = s.amax(-1, keepdim=True) if m is None else maximum(m, s.amax(-1, keepdim=True))
            m_safe = m_new.masked_fill(np.isneginf(m_new.data), 0.0)  # a row that has seen only forbidden keys
            p = (s - m_safe).exp()
            pv = p @ v[..., slice(*cols), :]
            if m is None:
                l, acc = p.sum(axis=-1, keepdims=True), pv
            else:
                alpha = (m - m_safe).exp()  # the rescaling, 1 unless this block raised the max
                l, acc = alpha * l + p.sum(axis=-1, keepdims=True), alpha * acc + pv
            stats[rows] = m_new, l, acc
        outs = {}
        for rows, (_, l, acc) in stats.items():
            empty = l.data == 0  # a query that may attend to nothing: output 0
            outs[rows] = (acc / l.masked_fill(empty, 1.0)).masked_fill(empty, 0.0).broadcast_to(
                lead + (rows[1] - rows[0], v.shape[-1]))
        return _join(outs, _blocks(Tq, block_size), lambda n: _flash_zeros(q.dtype, lead)(n, v.shape[-1]))


@op()
class flash_attention_lse:
    """logsumexp over the keys of q @ k^T * scale + bias, per query (..., Tq), in tiles as ``flash_attention``.

    FlashAttention's forward keeps it; its VJP asks for it through this op (passing the kept array as
    ``saved``), so that a second derivative sees it as the function of q, k and the bias it is.
    """
    samples = [sample((2, 5, 3), (2, 7, 3), scale=0.6, block_size=2),
               sample((2, 5, 3), (2, 7, 3), (5, 7), scale=0.6, causal=True, block_size=3)]

    def forward(q, k, *bias, scale, causal=False, block_size=64, saved=None):
        return _flash_forward(q, k, None, bias, scale, causal, block_size)[1] if saved is None else saved

    def vjp(u, out, q, k, *bias, scale, causal=False, block_size=64, saved=None):
        grad_q, grad_k, _, grad_bias = _flash_backward(q, k, None, bias, out, u, scale, causal, block_size)
        return (grad_q, grad_k) + ((grad_bias,) if bias else ())

    def composite(q, k, *bias, scale, causal=False, block_size=64, saved=None):
        s = q @ k.swapaxes(-1, -2) * scale  # (..., Tq, Tk): the plain form the tiles equal
        if bias:
            s = s + bias[0]
        if causal:
            Tq, Tk = q.shape[-2], k.shape[-2]
            s = s.masked_fill(np.arange(Tk)[None, :] > np.arange(Tq)[:, None] + Tk - Tq, -np.inf)
        return s.logsumexp(axis=-1)
