"""Read the graph a Tensor recorded: its tensors, ops, names, modules and gradient sizes.

This half of ``viz`` draws nothing. It walks back from a root tensor through
``_inputs`` (the record ``apply`` in ``tensor.py`` keeps) and returns a plain
``Graph``: one ``Node`` per tensor, in topological order, each knowing

* its kind: the output, a parameter, some other leaf that requires grad, a
  constant (a leaf that does not: data, masks, numbers), or a value an op made;
* its name: from ``params``, from the modules that ran it, or from ``.name``;
* its module scope: the modules whose forward was running when it was made;
* optionally its gradient d(root)/d(tensor).

``dot.py`` turns a ``Graph`` into Graphviz, ``text.py`` into a text outline.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field

import numpy as np

from ..autograd import grad as _grad
from ..autograd import toposort
from ..tensor import Tensor

FREED = ("the graph behind this tensor was freed by backward(), which drops it to save memory. "
         "Draw the graph before calling backward(), or call backward(retain_graph=True).")


@dataclass(eq=False)
class Node:
    """One tensor of the graph and, unless it is a leaf, the op that made it."""

    index: int
    tensor: Tensor
    kind: str  # "output" | "parameter" | "leaf" | "constant" | "value"
    name: str | None = None
    inputs: list[Node] = field(default_factory=list)  # the op's inputs, in order
    consumers: list[Node] = field(default_factory=list)  # nodes whose op reads this tensor
    scope: tuple = ()  # modules whose forward made it, outermost first (leaves: shared by all users)
    grad: np.ndarray | None = None  # d(root)/d(tensor), when gradients were asked for

    @property
    def op(self):
        return self.tensor._op

    @property
    def is_leaf(self) -> bool:
        return self.tensor._op is None

    @property
    def is_number(self) -> bool:
        """An unnamed one-element constant such as the 0.5 in ``x * 0.5``: drawn as its value."""
        return self.kind == "constant" and self.name is None and self.tensor.size == 1

    @property
    def grad_norm(self) -> float | None:
        return None if self.grad is None else l2_norm(self.grad)


@dataclass
class Graph:
    root: Node
    nodes: list[Node]  # every node after its inputs; the root is last
    module_names: dict[int, str]  # id(module) -> dotted name under the outermost module that ran it


def l2_norm(a: np.ndarray) -> float:
    """The L2 norm, without overflow for huge entries; NaN if any entry is NaN, inf if any is inf."""
    a = np.asarray(a, dtype=np.float64)
    if a.size == 0:
        return 0.0
    peak = np.max(np.abs(a))
    if not np.isfinite(peak) or peak == 0:
        return float(peak)
    return float(peak * np.sqrt(np.sum(np.square(a / peak))))


def _walk(root: Tensor) -> list[Tensor]:
    """Every tensor the root was computed from, constants included, each after its inputs."""
    try:
        return toposort([root], constants=True)
    except RuntimeError:  # the graph was freed
        raise RuntimeError(f"viz: {FREED}") from None


def _common_prefix(scopes) -> tuple:
    scopes = list(scopes)
    if not scopes:
        return ()
    prefix = scopes[0]
    for s in scopes[1:]:
        n = 0
        while n < min(len(prefix), len(s)) and prefix[n] is s[n]:
            n += 1
        prefix = prefix[:n]
    return prefix


def _module_names(outermost_modules) -> tuple[dict[int, str], dict[int, str]]:
    """Dotted names of modules and parameters, from each outermost module's named_modules/named_parameters.

    Duck-typed so viz needs nothing from ``minigrad.nn``: any object with those
    methods (yielding ``(name, object)`` pairs) gets its parts named.
    """
    modules, params = {}, {}
    for top in outermost_modules:
        if hasattr(top, "named_modules"):
            for name, m in top.named_modules():
                modules.setdefault(id(m), name)
        if hasattr(top, "named_parameters"):
            for name, p in top.named_parameters():
                params.setdefault(id(p), name)
    return modules, params


def collect(root: Tensor, params: dict | None = None, gradients: bool = False) -> Graph:
    """Read ``root``'s graph; with ``gradients``, also compute d(root)/d(t) for every t on it."""
    if not isinstance(root, Tensor):
        raise TypeError(f"viz: expected a Tensor to draw the graph of, got {type(root).__name__}")
    explicit = {}
    for name, p in (params or {}).items():
        if not isinstance(p, Tensor):
            raise TypeError(f"viz: params[{name!r}] is a {type(p).__name__}, not a Tensor; pass "
                            f"params=dict(model.named_parameters())")
        explicit[id(p)] = name

    tensors = _walk(root)
    outermost = {id(t._scope[0]): t._scope[0] for t in tensors if t._scope}
    module_names, module_params = _module_names(outermost.values())

    nodes: dict[int, Node] = {}
    for i, t in enumerate(tensors):
        name = explicit.get(id(t)) or module_params.get(id(t)) or t.name
        if t is root:
            kind = "output"
        elif t._op is not None:
            kind = "value"
        elif id(t) in explicit or id(t) in module_params:
            kind = "parameter"
        else:
            kind = "leaf" if t.requires_grad else "constant"
        node = Node(i, t, kind, name, scope=t._scope)
        if t._op is not None:
            node.inputs = [nodes[id(x)] for x in t._inputs]
            for x in node.inputs:
                if node not in x.consumers:
                    x.consumers.append(node)
        nodes[id(t)] = node
    ordered = list(nodes.values())
    for node in ordered:
        if node.is_leaf and node.consumers:
            node.scope = _common_prefix(c.scope for c in node.consumers)

    graph = Graph(nodes[id(root)], ordered, module_names)
    if gradients:
        _attach_gradients(graph)
    return graph


def _attach_gradients(graph: Graph) -> None:
    """d(root)/d(t) for every t on the graph that requires grad, by one backward pass of minigrad.grad.

    ``.grad`` is left alone (grad() returns gradients instead of accumulating
    them), the graph is retained, and hooks are switched off for the pass, so
    drawing has no side effects: it shows what backward() would deliver (less
    any hooks), before or after the user calls it. A non-scalar root is treated
    like ``root.sum()``.
    """
    root = graph.root.tensor
    if not root.requires_grad:
        raise ValueError("viz: show='grad' needs a root that requires grad (a loss computed from tensors with "
                         "requires_grad=True, outside no_grad()); this one has no gradient to show")
    targets = [n for n in graph.nodes if n.tensor.requires_grad]
    seed = np.ones(root.shape, dtype=root.dtype)
    hooks = {id(n.tensor): n.tensor._hooks for n in targets}
    try:
        for n in targets:
            n.tensor._hooks = None
        grads = _grad(root, [n.tensor for n in targets], grad_outputs=seed, retain_graph=True, allow_unused=True)
    finally:
        for n in targets:
            n.tensor._hooks = hooks[id(n.tensor)]
    for n, g in zip(targets, grads):
        n.grad = np.zeros(n.tensor.shape, n.tensor.dtype) if g is None else g.data


def module_label(graph: Graph, path: tuple) -> str:
    """``blocks.0.attn (MultiHeadAttention)`` for the last module of a scope path; the outermost is its class."""
    module = path[-1]
    name = graph.module_names.get(id(module)) if len(path) > 1 else None
    cls = type(module).__name__
    return f"{name} ({cls})" if name else cls


# --- formatting shared by the drawing and the text outline --------------------------------


def fmt_shape(t: Tensor) -> str:
    return "scalar" if t.ndim == 0 else "(" + ", ".join(str(n) for n in t.shape) + ("," if t.ndim == 1 else "") + ")"


def fmt_number(x: float) -> str:
    """micrograd's ``%.4f`` where that is readable, scientific notation where it is not."""
    x = float(x)
    if x == 0 or not np.isfinite(x) or 1e-3 <= abs(x) < 1e5:
        return f"{x:.4f}"
    return f"{x:.3e}"


def fmt_constant(t: Tensor) -> str:
    """A number that met a tensor in an op, as it was written: ``0.5``, ``-inf``, ``2``."""
    return f"{t.data.item():.6g}"


def fmt_value(v, limit: int = 28) -> str:
    """An op parameter, shortly: slices as ``1:3``, arrays by their shape."""
    if isinstance(v, np.ndarray):
        return f"array{v.shape}" if v.size > 4 else np.array2string(v, separator=",")
    if isinstance(v, slice):
        parts = ["" if p is None else str(p) for p in (v.start, v.stop, v.step)]
        return ":".join(parts[:2] if v.step is None else parts)
    if v is Ellipsis:
        return "..."
    if isinstance(v, tuple):
        return "(" + ", ".join(fmt_value(x, limit) for x in v) + ("," if len(v) == 1 else "") + ")"
    if isinstance(v, float):
        return f"{v:g}"
    text = repr(v)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def op_params(node: Node) -> str:
    """The op's parameters that differ from their defaults, e.g. ``axis=-1``."""
    params = node.tensor._params or {}
    try:
        defaults = {p.name: p.default for p in inspect.signature(node.op.forward).parameters.values()
                    if p.kind == inspect.Parameter.KEYWORD_ONLY}
    except (TypeError, ValueError):
        defaults = {}
    shown = []
    for key, value in params.items():
        default = defaults.get(key, inspect.Parameter.empty)
        if default is not inspect.Parameter.empty and _same(value, default):
            continue
        shown.append(f"{key}={fmt_value(value)}")
    return ", ".join(shown)


def _same(a, b) -> bool:
    try:
        return bool(a == b) and type(a) is type(b)
    except (ValueError, TypeError):
        return False
