"""Read the graph a Tensor recorded: its tensors, ops, names, modules and gradient sizes.

This half of ``viz`` draws nothing. It walks back from a root tensor through
``_inputs`` (the record ``apply`` in ``registry.py`` keeps) and returns a plain
``Graph``: one ``Node`` per tensor, in topological order, each knowing

* its kind: the output, a parameter, a module buffer, some other leaf that
  requires grad, a constant (a leaf that does not: data, masks, numbers), or a
  value an op made;
* its name: from ``params``, from the modules that ran it, or from ``.name``;
* its module scope: the module calls whose forward was running when it was made
  (a module called twice is two scopes, drawn as two clusters);
* which pass made it: the forward pass (0) or the VJPs of backward pass n, when
  a gradient was computed with ``create_graph=True``;
* optionally its gradient d(root)/d(tensor).

After ``backward()`` the graph is freed: nodes no longer hold their inputs.
Each freed node left a ``FreedNode`` record (see ``autograd/backprop.py``) with the same
structure but no arrays, and a weak reference to its tensor; the walk follows
those records, so the graph reads the same, and the data is shown only where
the tensor still lives (leaves, parameters, tensors the user kept).

``dot.py`` turns a ``Graph`` into Graphviz, ``text.py`` into a text outline.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field

import numpy as np

from ..autograd.backprop import grad as _grad
from ..autograd.backprop import toposort
from ..autograd.freed import ArrayStub, FreedNode
from ..tensor import Tensor

FREED = ("the graph behind this tensor was freed by backward() and left no record to draw it from. "
         "Draw the graph before calling backward(), or call backward(retain_graph=True).")


@dataclass(eq=False)
class Node:
    """One tensor of the graph and, unless it is a leaf, the op that made it."""

    index: int
    kind: str  # "output" | "parameter" | "buffer" | "leaf" | "constant" | "value"
    name: str | None
    op: object | None  # the op-table entry (registry.Op) that made it; None for a leaf
    params: dict  # the op's parameters (big arrays as ArrayStubs once backward freed the node)
    shape: tuple
    dtype: np.dtype
    requires_grad: bool
    data: np.ndarray | None  # None once backward freed the tensor
    value: float | None = None  # a one-element tensor's value, kept even when it was freed
    vjp_depth: int = 0  # 0: the forward pass; n: made by the VJPs of backward pass n (create_graph=True)
    tensor: Tensor | None = None  # the tensor, while it lives
    inputs: list[Node] = field(default_factory=list)  # the op's inputs, in order
    consumers: list[Node] = field(default_factory=list)  # nodes whose op reads this tensor
    scope: tuple = ()  # module calls whose forward made it, outermost first (leaves: shared by all users)
    grad: np.ndarray | None = None  # d(root)/d(tensor), when gradients were asked for

    @property
    def is_leaf(self) -> bool:
        return self.op is None

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def is_number(self) -> bool:
        """An unnamed one-element constant such as the 0.5 in ``x * 0.5``: drawn as its value."""
        return self.kind == "constant" and self.name is None and self.size == 1

    @property
    def grad_norm(self) -> float | None:
        return None if self.grad is None else l2_norm(self.grad)


@dataclass
class Graph:
    root: Node
    nodes: list[Node]  # every node after its inputs; the root is last
    module_names: dict[int, str]  # id(module) -> dotted name under the outermost module that ran it
    calls: dict[int, tuple[int, int]] = field(default_factory=dict)  # id(ModuleCall) -> (k, n): call k of n
    freed: bool = False  # backward() freed it: intermediate values are gone
    grads_from: str = "grad"  # where node.grad came from: "grad" (computed here) or ".grad" (left by backward)

    @property
    def vjp_depths(self) -> list[int]:
        """The passes present: [0] for a forward graph, [0, 1] for a gradient's graph (create_graph=True)."""
        return sorted({n.vjp_depth for n in self.nodes if not n.is_leaf})

    @property
    def has_backward_ops(self) -> bool:
        """Whether some op was recorded by a backward pass: the graph of a gradient (create_graph=True)."""
        return any(depth > 0 for depth in self.vjp_depths)


def l2_norm(a: np.ndarray) -> float:
    """The L2 norm, without overflow for huge entries; NaN if any entry is NaN, inf if any is inf."""
    a = np.asarray(a, dtype=np.float64)
    if a.size == 0:
        return 0.0
    peak = np.max(np.abs(a))
    if not np.isfinite(peak) or peak == 0:
        return float(peak)
    return float(peak * np.sqrt(np.sum(np.square(a / peak))))


# --- walking live tensors and freed records alike -------------------------------------------
# A "handle" is a Tensor while it lives, and its FreedNode once only the record is left.


def _handle(x):
    """The live tensor behind ``x`` (a Tensor or a FreedNode), or the record when the tensor is gone."""
    if isinstance(x, FreedNode):
        t = x.tensor()
        return x if t is None else t
    return x


def _is_freed(h) -> bool:
    return isinstance(h, FreedNode) or (h._op is not None and h._inputs is None)


def _inputs_of(h) -> tuple:
    if isinstance(h, FreedNode):
        # None: a node backward never reached (no gradient flowed through it) whose tensor is gone.
        return () if h.op is None or h.inputs is None else h.inputs
    if h._op is None:
        return ()
    if h._inputs is not None:
        return h._inputs
    if h._record is None or h._record.inputs is None:
        raise RuntimeError(f"viz: {FREED}")
    return h._record.inputs


def _walk(root: Tensor) -> list:
    """Every tensor (or record) the root was computed from, constants included, each after its inputs.

    ``autograd.toposort``'s order, so a graph drawn after backward lists its nodes as the live graph did.
    """
    return toposort([root], inputs_of=lambda h: [_handle(x) for x in _inputs_of(h)])


def _node(i: int, h, kind: str, name: str | None) -> Node:
    if isinstance(h, FreedNode):
        return Node(i, kind, name, h.op, h.params or {}, h.shape, h.dtype, h.requires_grad, None, h.value,
                    h.vjp_depth, scope=h.scope)
    params = h._params if h._params is not None else (h._record.params if h._record is not None else None)
    value = h.data.item() if h.data.size == 1 else None
    return Node(i, kind, name, h._op, params or {}, h.shape, h.dtype, h.requires_grad, h.data, value,
                h._vjp_depth, h, scope=h._scope)


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


def _module_names(outermost_modules) -> tuple[dict[int, str], dict[int, str], dict[int, str]]:
    """Dotted names of modules, parameters and buffers, from each outermost module's ``named_*`` methods.

    Duck-typed so viz needs nothing from ``minigrad.nn``: any object with those
    methods (yielding ``(name, object)`` pairs) gets its parts named.
    """
    modules, params, buffers = {}, {}, {}
    for top in outermost_modules:
        for method, names in [("named_modules", modules), ("named_parameters", params),
                              ("named_buffers", buffers)]:
            named = getattr(top, method, None)
            if named is not None:
                for name, obj in named():
                    names.setdefault(id(obj), name)
    return modules, params, buffers


def _number_calls(nodes) -> dict[int, tuple[int, int]]:
    """For modules called more than once in this graph: id(call) -> (k, n), "call k of n", in call order."""
    calls_of: dict[int, dict[int, object]] = {}  # id(module) -> {id(call): call}
    for node in nodes:
        for call in node.scope:
            calls_of.setdefault(id(call.module), {})[id(call)] = call
    numbered = {}
    for calls in calls_of.values():
        if len(calls) > 1:
            ordered = sorted(calls.values(), key=lambda c: c.number)
            numbered.update({id(c): (k, len(ordered)) for k, c in enumerate(ordered, 1)})
    return numbered


def collect(root: Tensor, params: dict | None = None, gradients: bool = False) -> Graph:
    """Read ``root``'s graph; with ``gradients``, also give every node its gradient d(root)/d(t).

    Before backward the gradients are computed here; once backward has freed
    the graph, they are the ``.grad`` it left on leaves (and retain_grad() tensors).
    """
    if not isinstance(root, Tensor):
        raise TypeError(f"viz: expected a Tensor to draw the graph of, got {type(root).__name__}")
    explicit = {}
    for name, p in (params or {}).items():
        if not isinstance(p, Tensor):
            raise TypeError(f"viz: params[{name!r}] is a {type(p).__name__}, not a Tensor; pass "
                            f"params=dict(model.named_parameters())")
        explicit[id(p)] = name

    handles = _walk(root)
    scopes = [h.scope if isinstance(h, FreedNode) else h._scope for h in handles]
    outermost = {id(s[0].module): s[0].module for s in scopes if s}
    module_names, module_params, module_buffers = _module_names(outermost.values())

    nodes: dict[int, Node] = {}
    for i, h in enumerate(handles):
        live = isinstance(h, Tensor)
        name = (explicit.get(id(h)) or module_params.get(id(h)) or module_buffers.get(id(h))) if live else None
        name = name or h.name
        op = h.op if not live else h._op
        if h is root:
            kind = "output"
        elif op is not None:
            kind = "value"
        elif live and (id(h) in explicit or id(h) in module_params):
            kind = "parameter"
        elif live and id(h) in module_buffers:
            kind = "buffer"
        else:
            kind = "leaf" if h.requires_grad else "constant"
        node = _node(i, h, kind, name)
        node.inputs = [nodes[id(_handle(x))] for x in _inputs_of(h)]
        for x in node.inputs:
            if node not in x.consumers:
                x.consumers.append(node)
        nodes[id(h)] = node
    ordered = list(nodes.values())
    for node in ordered:
        if node.is_leaf and node.consumers:
            node.scope = _common_prefix(c.scope for c in node.consumers)

    freed = any(_is_freed(h) for h in handles)
    graph = Graph(nodes[id(root)], ordered, module_names, _number_calls(ordered), freed)
    if gradients:
        if freed:
            _attach_kept_gradients(graph)
        else:
            _attach_gradients(graph)
    return graph


def _attach_kept_gradients(graph: Graph) -> None:
    """After backward freed the graph, nothing is left to differentiate: show the ``.grad`` it left behind."""
    graph.grads_from = ".grad"
    for n in graph.nodes:
        if n.tensor is not None and n.tensor.grad is not None:
            n.grad = n.tensor.grad.data


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
    call = path[-1]
    name = graph.module_names.get(id(call.module)) if len(path) > 1 else None
    cls = type(call.module).__name__
    label = f"{name} ({cls})" if name else cls
    if id(call) in graph.calls:  # a module that ran several times: each call is drawn apart
        label += " · call {} of {}".format(*graph.calls[id(call)])
    return label


# --- formatting shared by the drawing and the text outline --------------------------------


def fmt_shape(shape: tuple) -> str:
    return "scalar" if not shape else "(" + ", ".join(str(n) for n in shape) + ("," if len(shape) == 1 else "") + ")"


def fmt_number(x: float) -> str:
    """micrograd's ``%.4f`` where that is readable, scientific notation where it is not."""
    x = float(x)
    if x == 0 or not np.isfinite(x) or 1e-3 <= abs(x) < 1e5:
        return f"{x:.4f}"
    return f"{x:.3e}"


def fmt_constant(node: Node) -> str:
    """A number that met a tensor in an op, as it was written: ``0.5``, ``-inf``, ``2``."""
    return f"{node.value:.6g}"


def fmt_value(v, limit: int = 28) -> str:
    """An op parameter, shortly: slices as ``1:3``, arrays by their shape."""
    if isinstance(v, np.ndarray):
        return f"array{v.shape}" if v.size > 4 else np.array2string(v, separator=",")
    if isinstance(v, ArrayStub):  # what a freed node's record keeps of an array: its shape
        return f"array{v.shape}"
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
    params = node.params
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
