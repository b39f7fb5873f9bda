"""The fused layers: linear, GELU, layer norm and RMS norm, with the backward primitives their VJPs use."""

from __future__ import annotations

import math

from .. import kernels
from ..kernels import GELU_CUBIC, GELU_SATURATED, INV_SQRT_2PI, SQRT_2_OVER_PI
from ..ops import op, sample
from .einsum import einsum


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
