"""Derivatives as functions: vjp, jvp, linearize, jacobian, hessian and hvp (the names of JAX and torch.func).

Each takes a function ``fn`` of Tensors and the point to differentiate at, and
returns numbers, not ``.grad`` attributes. Each makes its own differentiable
copies of the inputs, so the caller's tensors need no ``requires_grad`` and
their ``.grad`` is never touched.

Reverse mode and forward mode
-----------------------------
For ``y = f(x)`` with x in R^n and y in R^m, the Jacobian J is m x n. There are
two ways to get at it without building it:

* **reverse mode** (``vjp``): one forward pass, then one backward pass per
  cotangent u gives a row combination ``u^T J``. The whole Jacobian takes m
  backward passes: cheap when there are few outputs (a loss: m = 1).
* **forward mode** (``jvp``): a tangent t pushed forward gives a column
  combination ``J t``. The whole Jacobian takes n pushes: cheap when there are
  few inputs (a curve x(s), a single direction).

Forward mode here is *double backward*, not a second set of rules
---------------------------------------------------------------------
minigrad could give every op in the table a ``jvp`` rule next to its ``vjp``.
It does not: forward mode is derived from the VJPs the table already has.
The backward pass ``g(u) = J^T u`` is *linear* in the cotangent u, so its own
VJP with respect to u is ``(J^T)^T t = J t``, the JVP. In code::

    y = f(x)                                    # recorded
    u = zeros_like(y, requires_grad=True)       # a dummy cotangent: its value never matters
    g = grad(y, x, u, create_graph=True)        # g = J^T u, recorded as a function of u
    J_t = grad(g, u, t)                         # d<g, t>/du = J t

Why: every op's VJP is already written in Tensor ops and gradgradchecked, so
every op supports forward mode the day it is added, with no rule to write,
check or keep in step with its VJP (a second rule per op would be a second
place for each op's calculus to be wrong).

The price is speed. One JVP costs a forward pass, a recorded backward pass and
a backward pass through that (pruned to the part that depends on u), where
dedicated JVP rules would cost about one extra product per op. ``linearize``
pays the forward and the recorded backward once, after which each further
tangent is only the backward of the backward. ``jacobian(mode="forward")`` uses
it, so its n columns cost roughly what n rows of reverse mode do. The lesson
``demos/forward_or_reverse.py`` times both directions; the measured costs are in
``benchmarks/README.md``.

Second derivatives
------------------
``hvp`` is reverse over reverse: the gradient is recorded (``create_graph``) and
differentiated once more against v. That gives ``v^T H``, which is ``H v``
because a Hessian is symmetric: about the cost of two gradients, no Hessian
built. (Forward over reverse, a ``jvp`` of the gradient, works too, but here
it would be a backward of a backward of a backward.)
``hessian`` is the Jacobian of the gradient: one recorded gradient, then n
backward passes through it.

Nesting
-------
When an input already requires grad in a recording region (``jacobian`` calling
a function that calls ``vjp``, say), the copy stays connected to the caller's
graph and the results are recorded, so the functions compose:
``hessian(fn, x)`` is literally ``jacobian`` of a function built from ``vjp``.
"""

from __future__ import annotations

import numpy as np

from ..modes import enable_grad, is_grad_enabled
from ..ops import OPS
from ..tensor import Tensor
from .backprop import grad

# --------------------------------------------------------------------------------------
# Checking and copying inputs, tangents and outputs
# --------------------------------------------------------------------------------------


def _as_tensor(caller: str, what: str, x) -> Tensor:
    """A floating-point Tensor from ``x`` (a Tensor, an ndarray, a number), or a TypeError naming it."""
    if not isinstance(x, Tensor):
        if isinstance(x, np.ndarray | np.generic | float | int | list):
            x = Tensor(x)
        else:
            raise TypeError(f"{caller}: {what} is a {type(x).__name__}; expected a Tensor or an ndarray")
    if x.dtype.kind != "f":
        raise TypeError(f"{caller}: {what} is {x.dtype} (shape {x.shape}); only floating-point tensors can be "
                        f"differentiated (close over masks and indices inside fn instead)")
    return x


def _inputs(caller: str, inputs) -> tuple[tuple[Tensor, ...], bool]:
    """The inputs as a tuple of float Tensors, and whether a single one (not a tuple) was given."""
    single = not isinstance(inputs, tuple | list)
    xs = (inputs,) if single else tuple(inputs)
    if not xs:
        raise ValueError(f"{caller}: no inputs to differentiate with respect to")
    return tuple(_as_tensor(caller, f"input {i}", x) for i, x in enumerate(xs)), single


def _like(caller: str, kind: str, values, like: tuple[Tensor, ...], like_kind: str, single: bool) -> tuple:
    """``values`` (tangents or cotangents) checked against ``like``: same structure, shapes and dtypes."""
    if single and isinstance(values, tuple | list):
        raise TypeError(f"{caller}: the {like_kind} is a single Tensor, so the {kind} must be one too, "
                        f"not a {type(values).__name__}")
    if not single and not isinstance(values, tuple | list):
        raise TypeError(f"{caller}: the {like_kind}s are a tuple of {len(like)}, so the {kind}s must be a tuple "
                        f"of {len(like)} too, not a {type(values).__name__}")
    vs = (values,) if single else tuple(values)
    if len(vs) != len(like):
        raise ValueError(f"{caller}: {len(vs)} {kind}s for {len(like)} {like_kind}s")
    out = []
    for i, (v, x) in enumerate(zip(vs, like)):
        v = _as_tensor(caller, f"{kind} {i}", v)
        if v.shape != x.shape:
            raise ValueError(f"{caller}: {kind} {i} has shape {v.shape} but {like_kind} {i} has shape {x.shape}")
        if v.dtype != x.dtype:
            raise TypeError(f"{caller}: {kind} {i} is {v.dtype} but {like_kind} {i} is {x.dtype}; "
                            f"give each {kind} its {like_kind}'s dtype")
        out.append(v)
    return tuple(out)


def _outputs(caller: str, out) -> tuple[tuple[Tensor, ...], bool]:
    single = isinstance(out, Tensor)
    outs = (out,) if single else out
    if not isinstance(outs, tuple | list) or not outs:
        raise TypeError(f"{caller}: fn must return a Tensor or a tuple of Tensors, got {type(out).__name__}")
    for k, o in enumerate(outs):
        if not isinstance(o, Tensor):
            raise TypeError(f"{caller}: fn's output {k} is a {type(o).__name__}; fn must return Tensors")
        if o.dtype.kind != "f":
            raise TypeError(f"{caller}: fn's output {k} is {o.dtype} (shape {o.shape}); only floating-point "
                            f"outputs have derivatives")
    return tuple(outs), single


def _nested(*groups) -> bool:
    """Are we inside an outer differentiation (an input or tangent that is already being recorded)?"""
    return is_grad_enabled() and any(t.requires_grad for group in groups for t in group)


def _copy(x: Tensor) -> Tensor:
    """A tensor to differentiate with respect to, standing for ``x``.

    Usually a new leaf sharing x's data. When x is itself being recorded (an
    outer differentiation), a recorded identity (``astype`` to its own dtype),
    so the results stay functions of the caller's x and can be differentiated again.
    """
    return x.astype(x.dtype) if x.requires_grad and is_grad_enabled() else x.detach().requires_grad_()


def _result(t: Tensor, keep_graph: bool) -> Tensor:
    return t if keep_graph else t.detach()


def _zeros(x: Tensor) -> Tensor:
    return Tensor(np.zeros(x.shape, dtype=x.dtype))


def _unpack(values: tuple, single: bool):
    return values[0] if single else values


# --------------------------------------------------------------------------------------
# Reverse mode: vjp
# --------------------------------------------------------------------------------------


def vjp(fn, *inputs):
    """``(outputs, pullback)``: ``fn(*inputs)``, and the function taking cotangents u to ``u^T J``.

    Like ``torch.func.vjp``: ``pullback`` takes one cotangent per output (a single
    Tensor when ``fn`` returns one) of the output's shape and dtype, and returns a
    tuple with one gradient per input (zeros for an input the outputs do not
    use). It may be called many times; each call is one backward pass.
    """
    xs, _ = _inputs("vjp", inputs)
    nested = _nested(xs)
    with enable_grad():
        copies = tuple(_copy(x) for x in xs)
        outputs, single = _outputs("vjp", fn(*copies))

    def pullback(cotangents):
        us = _like("vjp pullback", "cotangent", cotangents, outputs, "output", single)
        keep_graph = nested or _nested(us)
        live = [(o, u) for o, u in zip(outputs, us) if o.requires_grad]  # the others are constants
        grads = [None] * len(copies)
        if live:
            with enable_grad():
                grads = grad([o for o, _ in live], list(copies), [u for _, u in live], retain_graph=True,
                             create_graph=keep_graph, allow_unused=True)
        return tuple(_zeros(x) if g is None else _result(g, keep_graph) for x, g in zip(xs, grads))

    return _unpack(tuple(_result(o, nested) for o in outputs), single), pullback


# --------------------------------------------------------------------------------------
# Forward mode, by double backward: linearize and jvp
# --------------------------------------------------------------------------------------


def linearize(fn, *inputs):
    """``(outputs, push)``: ``fn(*inputs)``, and the function taking tangents t to ``J t``.

    Like ``torch.func.linearize``. The forward pass and the recorded backward pass
    (``g = J^T u``, see the module docstring) are done once, here; each call of
    ``push`` is then one backward pass through g. ``push`` takes one tangent per
    input (a single Tensor for a single input) and returns one tangent per output
    (a single Tensor when ``fn`` returns one).
    """
    xs, _ = _inputs("linearize", inputs)
    outputs, single, push = _linearize("linearize", fn, xs)

    def push_tangents(*tangents):
        return _unpack(push(_like("linearize", "tangent", tangents, xs, "input", single=False)), single)

    return outputs, push_tangents


def _linearize(caller: str, fn, xs: tuple[Tensor, ...]):
    nested = _nested(xs)
    with enable_grad():
        copies = tuple(_copy(x) for x in xs)
        outputs, single = _outputs(caller, fn(*copies))
    push = push_forward(outputs, copies, nested)
    return _unpack(tuple(_result(o, nested) for o in outputs), single), single, push


def push_forward(outputs: tuple[Tensor, ...], wrt: list[Tensor], keep_graph: bool = False):
    """The map ``tangents -> J t`` for outputs already computed from ``wrt`` (tensors that require grad).

    The double backward of the module docstring, for callers that hold the very
    tensors to differentiate with respect to (``gradcheck`` does: a function may
    close over its inputs, as a module closes over its parameters).
    """
    with enable_grad():
        live = [o for o in outputs if o.requires_grad]
        # One dummy cotangent per output: the backward pass is linear in it, so its value never matters.
        dummies = [Tensor(np.zeros(o.shape, dtype=o.dtype), requires_grad=True) for o in live]
        vjps = grad(live, list(wrt), dummies, create_graph=True, allow_unused=True) if live else [None] * len(wrt)

    def push(tangents: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        keep = keep_graph or _nested(tangents)
        # An input's VJP that does not depend on the dummies is a zero or a constant: J t gets nothing from it.
        pairs = [(g, t) for g, t in zip(vjps, tangents) if g is not None and g.requires_grad]
        out = [None] * len(dummies)
        if pairs:
            with enable_grad():
                out = grad([g for g, _ in pairs], dummies, [t for _, t in pairs], retain_graph=True,
                           create_graph=keep, allow_unused=True)
        by_output = {id(o): t for o, t in zip(live, out)}
        return tuple(_zeros(o) if by_output.get(id(o)) is None else _result(by_output[id(o)], keep)
                     for o in outputs)

    return push


def jvp(fn, inputs, tangents):
    """``(outputs, output_tangents)``: ``fn(*inputs)`` and ``J t``, the derivative along the tangents.

    Like ``torch.func.jvp(fn, primals, tangents)``: ``inputs`` and ``tangents``
    are tuples of the same length (or, here, a single Tensor each), each tangent
    of its input's shape and dtype. Forward mode by double backward (see the
    module docstring, and its cost there).
    """
    xs, single_input = _inputs("jvp", inputs)
    ts = _like("jvp", "tangent", tangents, xs, "input", single_input)
    outputs, single, push = _linearize("jvp", fn, xs)
    return outputs, _unpack(push(ts), single)


# --------------------------------------------------------------------------------------
# Whole Jacobians and second derivatives
# --------------------------------------------------------------------------------------


def _unit(x: Tensor, index: int) -> Tensor:
    e = np.zeros(x.size, dtype=x.dtype)
    e[index] = 1
    return Tensor(e.reshape(x.shape))


def jacobian(fn, inputs, mode: str = "reverse"):
    """The Jacobian of ``fn(*inputs)``: one block of shape ``output.shape + input.shape`` per pair.

    ``mode="reverse"``: one backward pass per output element (rows);
    ``mode="forward"``: one push per input element (columns), see ``linearize``.
    Pick the mode whose count is smaller. The structure follows
    ``torch.autograd.functional.jacobian``: a Tensor for one input and one
    output, a tuple over inputs (or outputs) when one side is a tuple, and
    ``J[output][input]`` when both are.
    """
    if mode not in ("reverse", "forward"):
        raise ValueError(f"jacobian: mode must be 'reverse' or 'forward', got {mode!r}")
    xs, single_input = _inputs("jacobian", inputs)
    if mode == "reverse":
        outputs, pullback = vjp(fn, *xs)
        single_output = isinstance(outputs, Tensor)
        outputs = (outputs,) if single_output else outputs
        blocks = [[[] for _ in xs] for _ in outputs]  # blocks[k][i]: the rows of d output_k / d input_i
        for k, o in enumerate(outputs):
            for row in range(o.size):
                seeds = tuple(_unit(p, row) if j == k else _zeros(p) for j, p in enumerate(outputs))
                for i, g in enumerate(pullback(_unpack(seeds, single_output))):
                    blocks[k][i].append(g)
        jac = [[_stack(rows, o.shape + x.shape, x.dtype) for rows, x in zip(blocks[k], xs)]
               for k, o in enumerate(outputs)]
    else:
        outputs, single_output, push = _linearize("jacobian", fn, xs)
        outputs = (outputs,) if single_output else outputs
        columns = [[[] for _ in xs] for _ in outputs]  # columns[k][i]: the columns of d output_k / d input_i
        for i, x in enumerate(xs):
            for col in range(x.size):
                tangents = tuple(_unit(x, col) if j == i else _zeros(p) for j, p in enumerate(xs))
                for k, t in enumerate(push(tangents)):
                    columns[k][i].append(t)
        jac = [[_stack(cols, o.shape + x.shape, o.dtype, axis=-1) for cols, x in zip(columns[k], xs)]
               for k, o in enumerate(outputs)]
    per_output = [_unpack(tuple(row), single_input) for row in jac]
    return _unpack(tuple(per_output), single_output)


def _stack(pieces: list[Tensor], shape: tuple, dtype, axis: int = 0) -> Tensor:
    """Rows (or columns) of one Jacobian block, flattened and stacked, reshaped to ``shape``.

    When nothing is recorded (the usual case) this is plain NumPy; nested, the
    pieces are Tensors in a graph and are stacked with Tensor ops. A block with
    no rows (an empty output or input) has the ``dtype`` its rows would have had:
    the input's in reverse mode (gradients), the output's in forward mode (tangents).
    """
    if not pieces:
        return Tensor(np.zeros(shape, dtype=dtype))
    if any(p.requires_grad for p in pieces):
        return OPS["stack"](*[p.reshape(-1) for p in pieces], axis=axis).reshape(shape)
    flat = np.stack([p.data.reshape(-1) for p in pieces], axis=axis)
    return Tensor(flat.reshape(shape))


def _scalar(caller: str, out) -> Tensor:
    if not isinstance(out, Tensor) or out.size != 1:
        what = f"shape {out.shape}" if isinstance(out, Tensor) else type(out).__name__
        raise ValueError(f"{caller}: fn must return a single-element Tensor (a loss), got {what}")
    return out


def hessian(fn, inputs):
    """The Hessian of a scalar ``fn(*inputs)``: the Jacobian of its gradient.

    Shape ``x.shape + x.shape`` for one input; ``H[i][j]`` blocks for a tuple.
    Reverse over reverse: one recorded gradient, then one backward pass through
    it per input element.
    """
    xs, single = _inputs("hessian", inputs)

    def gradient(*copies):
        out, pullback = vjp(fn, *copies)  # nested inside jacobian: recorded, so it can be differentiated
        _scalar("hessian", out)
        return _unpack(pullback(Tensor(np.ones(out.shape, dtype=out.dtype))), single)

    return jacobian(gradient, _unpack(xs, single))


def hvp(fn, inputs, v):
    """``(output, H v)``: a scalar ``fn(*inputs)`` and its Hessian times ``v``, without building H.

    Like ``torch.autograd.functional.hvp``: ``v`` has the structure, shapes and
    dtypes of ``inputs``. Reverse over reverse: the gradient g is recorded, and
    one more backward pass gives ``d(g . v)/dx = H^T v = H v`` (a Hessian is
    symmetric): a forward pass and two backward passes, one of them recorded.
    """
    xs, single = _inputs("hvp", inputs)
    vs = _like("hvp", "v", v, xs, "input", single)
    nested = _nested(xs, vs)
    with enable_grad():
        copies = tuple(_copy(x) for x in xs)
        out = _scalar("hvp", fn(*copies))
        if not out.requires_grad:  # a constant: no curvature
            return _result(out, nested), _unpack(tuple(_zeros(x) for x in xs), single)
        grads = grad(out, list(copies), create_graph=True, allow_unused=True)
        pairs = [(g, u) for g, u in zip(grads, vs) if g is not None and g.requires_grad]
        hv = [None] * len(xs)
        if pairs:
            hv = grad([g for g, _ in pairs], list(copies), [u for _, u in pairs], create_graph=nested,
                      allow_unused=True)
    return _result(out, nested), _unpack(tuple(_zeros(x) if h is None else _result(h, nested)
                                               for x, h in zip(xs, hv)), single)
