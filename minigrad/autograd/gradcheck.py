"""Check derivatives against central finite differences, in reverse mode and in forward mode.

``gradcheck`` is how this project earns trust: every op in the table, every
layer and every model is run through it in the tests. It compares, for every
output element and every input element, the derivative backprop computes with

    (f(x + eps) - f(x - eps)) / (2 * eps)

in float64, where that difference is accurate to about eps**2. It builds that
Jacobian twice from the engine: row by row with backward passes (reverse
mode), and column by column with pushes of tangents (forward mode, see
``functional.py``), as HIPS autograd's ``check_grads`` checks both modes.
Forward mode here is derived from the VJPs by double backward, so the second
check is not independent of the first; what it adds is that each VJP is itself
differentiable in its incoming gradient (a VJP that steps outside the graph,
through ``.data``, passes reverse mode and fails forward mode).
"""

from __future__ import annotations

import numpy as np

from ..modes import enable_grad, no_grad
from ..tensor import Tensor
from .backprop import grad
from .functional import push_forward

__all__ = ["GradcheckError", "gradcheck", "gradgradcheck"]


class GradcheckError(AssertionError):
    """Backprop and finite differences disagree; the message says where and by how much."""


def _as_tuple(x) -> tuple:
    return tuple(x) if isinstance(x, list | tuple) else (x,)


def _differentiable(inputs) -> list[int]:
    picked = []
    for i, x in enumerate(inputs):
        if isinstance(x, Tensor) and x.requires_grad:
            if x.dtype != np.float64:
                raise TypeError(f"gradcheck: input {i} is {x.dtype}; finite differences need float64 "
                                f"(use .double() or dtype=np.float64)")
            picked.append(i)
    if not picked:
        raise ValueError("gradcheck: no input has requires_grad=True, so there is nothing to check")
    return picked


def _outputs(fn, inputs) -> tuple:
    return tuple(o for o in _as_tuple(fn(*inputs)) if isinstance(o, Tensor) and o.dtype.kind == "f")


def _analytic(fn, inputs, picked) -> list[list[np.ndarray]]:
    """J[out][in] of shape (out.size, in.size), one backward pass per output element."""
    outputs = _outputs(fn, inputs)
    jac = [[np.zeros((o.size, inputs[i].size)) for i in picked] for o in outputs]
    for k, out in enumerate(outputs):
        if not out.requires_grad:
            continue
        for row in range(out.size):
            seed = np.zeros(out.size)
            seed[row] = 1.0
            grads = grad(out, [inputs[i] for i in picked], seed.reshape(out.shape), retain_graph=True,
                         allow_unused=True)
            for j, g in enumerate(grads):
                if g is not None:
                    jac[k][j][row] = g.data.reshape(-1)
    return jac


# Forward mode costs one push per input element. Up to this many elements it builds the whole
# Jacobian (every op sample in the table is smaller); beyond, as for a model's parameters, it
# checks J t for a few random tangents t against the finite differences' J t, as HIPS autograd's
# check_grads does: a wrong Jacobian is missed only if its error happens to be orthogonal to all of them.
FULL_FORWARD_ELEMENTS = 100
FORWARD_DIRECTIONS = 8


def _check_forward(fn, inputs, picked, numeric, atol, rtol, seed: int = 0) -> None:
    """Forward mode (pushing tangents, see functional.py) against the finite differences ``numeric``.

    It differentiates with respect to the inputs themselves, not copies: ``fn``
    may close over them (a module's parameters are passed in and also used
    through the module).
    """
    with enable_grad():
        outputs = _outputs(fn, inputs)
    xs = [inputs[i] for i in picked]
    push = push_forward(outputs, xs)
    mode = " (forward mode, jvp)"
    if sum(x.size for x in xs) <= FULL_FORWARD_ELEMENTS:
        jac = [[np.zeros((o.size, x.size)) for x in xs] for o in outputs]
        for j, x in enumerate(xs):
            for col in range(x.size):
                tangents = [Tensor(np.zeros(p.shape, dtype=p.dtype)) for p in xs]
                tangents[j].data.reshape(-1)[col] = 1.0
                for k, t in enumerate(push(tangents)):
                    jac[k][j][:, col] = t.data.reshape(-1)
        _compare(jac, numeric, inputs, picked, atol, rtol, mode)
        return
    rng = np.random.default_rng(seed)
    for d in range(FORWARD_DIRECTIONS):
        tangents = [Tensor(rng.standard_normal(x.shape)) for x in xs]  # all inputs moved at once
        for k, t in enumerate(push(tangents)):
            a = t.data.reshape(-1)
            n = sum(J @ v.data.reshape(-1) for J, v in zip(numeric[k], tangents))
            excess = np.abs(a - n) - (atol + rtol * np.abs(n))
            if excess.size and (excess.max() > 0 or not np.isfinite(a).all()):
                row = int(np.argmax(np.where(np.isfinite(excess), excess, np.inf)))
                raise GradcheckError(
                    f"gradcheck{mode}: J t of output {k} (element {row}) for random tangent {d} (all of inputs "
                    f"{picked} moved at once): analytic {a[row]:.8g}, numeric {n[row]:.8g} "
                    f"(|difference| {abs(a[row] - n[row]):.3g} > atol {atol} + rtol {rtol} * |numeric|)")


def _compare(analytic, numeric, inputs, picked, atol, rtol, mode: str) -> None:
    # The finite differences run under no_grad. A function that returns different
    # outputs there would otherwise be compared on nothing and pass vacuously.
    a_shapes = [[a.shape for a in row] for row in analytic]
    n_shapes = [[n.shape for n in row] for row in numeric]
    if a_shapes != n_shapes:
        raise GradcheckError(f"gradcheck: fn returned different outputs with grad on and under no_grad "
                             f"(Jacobian shapes {a_shapes} vs {n_shapes})")
    for k, (a_row, n_row) in enumerate(zip(analytic, numeric)):
        for j, (a, n) in enumerate(zip(a_row, n_row)):
            excess = np.abs(a - n) - (atol + rtol * np.abs(n))
            if excess.size and (excess.max() > 0 or not np.isfinite(a).all()):
                bad = np.where(np.isfinite(excess), excess, np.inf)
                row, col = np.unravel_index(np.argmax(bad), a.shape)
                x = inputs[picked[j]]
                where = np.unravel_index(col, x.shape) if x.shape else ()
                raise GradcheckError(
                    f"gradcheck{mode}: gradient of output {k} (element {row}) with respect to input {picked[j]} "
                    f"(shape {x.shape}) at index {tuple(int(w) for w in where)}: analytic {a[row, col]:.8g}, "
                    f"numeric {n[row, col]:.8g} (|difference| {abs(a[row, col] - n[row, col]):.3g} > "
                    f"atol {atol} + rtol {rtol} * |numeric|)")


def _numeric(fn, inputs, picked, eps) -> list[list[np.ndarray]]:
    with no_grad():
        outputs = _outputs(fn, inputs)
        jac = [[np.zeros((o.size, inputs[i].size)) for i in picked] for o in outputs]
        for j, i in enumerate(picked):
            if not (inputs[i].data.flags.c_contiguous and inputs[i].data.flags.writeable):
                # (Not np.ascontiguousarray: it turns a 0-d input into shape (1,).)
                inputs[i].data = inputs[i].data.copy()
            flat = inputs[i].data.reshape(-1)  # a view: writing to it perturbs the input
            for col in range(flat.size):
                orig = flat[col]
                # Copies, since an output may be a view of the very input being perturbed.
                flat[col] = orig + eps
                plus = [o.data.copy() for o in _outputs(fn, inputs)]
                flat[col] = orig - eps
                minus = [o.data.copy() for o in _outputs(fn, inputs)]
                flat[col] = orig
                for k in range(len(outputs)):
                    jac[k][j][:, col] = ((plus[k] - minus[k]) / (2 * eps)).reshape(-1)
    return jac


def gradcheck(fn, inputs, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
              check_forward: bool = True) -> bool:
    """True when the engine's derivatives of ``fn(*inputs)`` match central finite differences.

    Every float64 input with ``requires_grad=True`` is checked against every
    float output: in reverse mode (a backward pass per output element) and,
    with ``check_forward``, in forward mode too (a tangent pushed forward per
    input element, by double backward; for more than ``FULL_FORWARD_ELEMENTS``
    input elements, ``FORWARD_DIRECTIONS`` random tangents). On a mismatch it raises
    ``GradcheckError`` naming the mode, the input, the worst element's index
    and both values.

    The finite differences evaluate ``fn`` under ``no_grad`` (they need no graph),
    so a ``fn`` that takes gradients itself (a gradient penalty) must do that
    inside ``with enable_grad():``.
    """
    inputs = _as_tuple(inputs)
    picked = _differentiable(inputs)
    analytic = _analytic(fn, inputs, picked)
    numeric = _numeric(fn, inputs, picked, eps)
    _compare(analytic, numeric, inputs, picked, atol, rtol, mode="")
    if check_forward:
        _check_forward(fn, inputs, picked, numeric, atol, rtol)
    return True


def gradgradcheck(fn, inputs, grad_outputs=None, eps: float = 1e-6, atol: float = 1e-5,
                  rtol: float = 1e-3, seed: int = 0, check_forward: bool = True) -> bool:
    """Second-order check: gradcheck of the (create_graph) backward of ``fn``.

    The function checked is ``(inputs, v) -> v^T J(inputs)``, differentiated with
    respect to both the inputs and the weighting ``v`` (random unless given).
    """
    inputs = _as_tuple(inputs)
    picked = _differentiable(inputs)
    with no_grad():
        outs = _outputs(fn, inputs)
    if grad_outputs is None:
        rng = np.random.default_rng(seed)
        grad_outputs = [Tensor(rng.standard_normal(o.shape), dtype=np.float64, requires_grad=True) for o in outs]
    grad_outputs = list(_as_tuple(grad_outputs))
    n_in = len(inputs)

    def first_order(*args):
        xs, vs = args[:n_in], args[n_in:]
        # enable_grad: gradcheck runs its finite differences under no_grad, but this
        # function *is* a backward pass and needs the graph of fn to exist.
        with enable_grad():
            pairs = [(o, v) for o, v in zip(_outputs(fn, xs), vs) if o.requires_grad]
            grads = grad([o for o, _ in pairs], [xs[i] for i in picked], [v for _, v in pairs],
                         create_graph=True, allow_unused=True)
        return tuple(g for g in grads if g is not None)

    return gradcheck(first_order, (*inputs, *grad_outputs), eps=eps, atol=atol, rtol=rtol,
                     check_forward=check_forward)
