"""Exercise 9: forward mode from the VJPs (double backward).

    python -m demos.exercises check 9

Reverse mode gives u^T J (one backward pass per cotangent u); forward mode
gives J t (a tangent t pushed through). minigrad has no forward rules: it
gets J t from the VJPs. The backward pass g(u) = J^T u is *linear* in u, so
the VJP of g with respect to u, against t, is (J^T)^T t = J t. So: record a
backward pass as a function of a dummy cotangent u (create_graph=True), then
differentiate it with respect to u. Read minigrad/autograd/functional.py.
"""

import minigrad as mg  # noqa: F401  (for your code)


def jvp(fn, x: mg.Tensor, t: mg.Tensor) -> tuple[mg.Tensor, mg.Tensor]:
    """(fn(x), J t): the output, and its derivative along the tangent t (x's shape), with J = d fn / d x.

        x = x.detach().requires_grad_()            # a differentiable copy of the point
        y = fn(x)
        u = zeros like y, requiring grad           # a dummy cotangent: its value never matters
        g = d<y, u>/dx = J^T u                     # mg.grad(y, [x], u, create_graph=True): recorded
        J t = d<g, t>/du                           # mg.grad(g, [u], t)
    """
    raise NotImplementedError("exercise 9: jvp")
