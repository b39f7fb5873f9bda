"""Draw a ``Graph`` (see ``graph.py``) with Graphviz, and save drawings to files.

Drawing happens in three steps, each a function below:

1. ``_layout``: decide what is drawn. Each tensor is a box and each op an
   ellipse, inside nested clusters for the module calls that ran them; with
   ``collapse=depth`` a module nested deeper than ``depth`` becomes one node
   (only the tensors that leave it stay visible).
2. ``_truncate``: if that is still more than ``max_nodes``, keep the nodes
   nearest the output and say, in a note node, how many were left out.
3. ``_emit``: styles and labels, by ``show`` ("shape", "data" or "grad"), and
   by pass: the ops a backward pass recorded (``create_graph=True``) get their
   own colours and a legend.

graphviz (the Python package) is imported inside functions only, so
``import minigrad`` never needs it; ``dot`` (the program) is needed only to
render SVG/PNG/PDF, and ``save`` falls back to writing the DOT source (as the
notebook display does, see ``picture.py``).
"""

from __future__ import annotations

import html
import itertools
import os
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from ..files import atomic_write
from ..tensor import Tensor
from .graph import Graph, Node, collect, fmt_constant, fmt_number, fmt_shape, module_label, op_params

SHOWS = ("shape", "data", "grad")
RANKDIRS = ("auto", "LR", "TB", "RL", "BT")
LONG_GRAPH = 40  # rankdir="auto" draws a graph of more nodes than this top to bottom, to fit a page's width
MAX_NODES = 200  # about what still reads as a picture rather than a map
FONT = "Helvetica,Arial,sans-serif"
PNG_DPI = 144
DATA_MAX_SIZE = 12  # show="data" prints tensors up to this many elements in full

# Fill and border colours of tensor boxes, by kind (the gradient colours replace fills under show="grad").
KIND_STYLE = {
    "value": dict(fillcolor="#ffffff", color="#6c757d"),
    "output": dict(fillcolor="#ffd8a8", color="#d9480f", penwidth="2.2"),
    "parameter": dict(fillcolor="#d0ebff", color="#1971c2", penwidth="1.4"),
    "leaf": dict(fillcolor="#d3f9d8", color="#2b8a3e", penwidth="1.4"),
    "constant": dict(fillcolor="#f1f3f5", color="#868e96", style="rounded,filled,dashed"),
    "buffer": dict(fillcolor="#f3f0ff", color="#7048e8", style="rounded,filled,dashed"),  # a module's, no grad
}
# Ops and the tensors they make, by the pass that made them: the forward pass, or the VJPs that
# backward pass n recorded (create_graph=True). Deeper passes than listed take the last colours.
PASS_STYLE = (
    dict(op=dict(fillcolor="#f1f3f5", color="#adb5bd"), value=dict(fillcolor="#ffffff", color="#6c757d")),
    dict(op=dict(fillcolor="#fcc2d7", color="#c2255c"), value=dict(fillcolor="#fff0f6", color="#c2255c")),
    dict(op=dict(fillcolor="#d0bfff", color="#6741d9"), value=dict(fillcolor="#f3f0ff", color="#6741d9")),
)
OP_STYLE = dict(shape="ellipse", style="filled", fillcolor="#f1f3f5", color="#adb5bd", fontsize="10",
                margin="0.04,0.02", height="0.28")
FOLD_STYLE = dict(shape="box3d", style="filled", fillcolor="#edf2ff", color="#4c6ef5")
NOTE_STYLE = dict(shape="note", style="filled", fillcolor="#fff9db", color="#f08c00", fontsize="10")
CLUSTER_FILLS = ("#f5f7fb", "#e9eef7", "#dde5f2", "#d2dcee")
GRAD_PALETTE = ("#fffbd5", "#d5efb3", "#97d6b9", "#52bcc2", "#2293c0", "#245eaa", "#152c7c")  # small -> large
NONFINITE = "#e03131"
ZERO = "#dee2e6"


# --------------------------------------------------------------------------------------
# 1. Layout: which boxes, in which clusters, joined how
# --------------------------------------------------------------------------------------


@dataclass(eq=False)
class _Item:
    """One drawn node: a tensor, an op, a number, or a folded module."""

    id: str
    kind: str  # "tensor" | "op" | "number" | "fold" | "note"
    node: Node | None = None
    cluster: tuple = ()  # path of modules (outermost first) it is drawn inside
    members: list[Node] = field(default_factory=list)  # a fold's hidden nodes
    path: tuple = ()  # a fold's module path
    text: str = ""  # a note's text


@dataclass
class _Layout:
    items: list[_Item]
    edges: list[tuple[str, str, dict]]
    root: str
    notes: list[str] = field(default_factory=list)


def _key(path: tuple) -> tuple:
    return tuple(id(m) for m in path)


def _layout(graph: Graph, collapse: int | None) -> _Layout:
    cut = None if collapse is None else collapse + 1  # scope entries kept as clusters

    def fold_of(node: Node) -> tuple | None:
        """The module path an op is folded into (None: drawn itself)."""
        if cut is None or node.is_leaf or len(node.scope) <= cut:
            return None
        return node.scope[: cut + 1]

    def only_user(node: Node) -> tuple | None:
        """The fold that every op reading ``node`` is in, if there is one such fold."""
        folds = [fold_of(c) for c in node.consumers]
        if not folds or any(f is None for f in folds) or len({_key(f) for f in folds}) != 1:
            return None
        return folds[0]

    def leaf_fold(node: Node) -> tuple | None:
        """A leaf goes into a fold when only that fold uses it and it is a parameter or has no name
        (a named input such as ``x`` stays in view, so the picture still shows what goes in)."""
        if node.kind == "output" or (node.kind != "parameter" and node.name is not None):
            return None
        return only_user(node)

    items, folds, where = [], {}, {}  # where: id(node) -> its tensor's item id (a fold's, if hidden)

    def fold_item(path: tuple) -> _Item:
        k = _key(path)
        if k not in folds:
            folds[k] = _Item(f"m{len(folds)}", "fold", cluster=path[:-1], path=path)
            items.append(folds[k])
        return folds[k]

    op_at = {}
    for node in graph.nodes:
        if node.is_leaf:
            f = leaf_fold(node)
            if f is not None:
                fold = fold_item(f)
                fold.members.append(node)
                where[id(node)] = fold.id
            else:
                kind = "number" if node.is_number else "tensor"
                scope = node.scope if cut is None else node.scope[:cut]
                items.append(_Item(f"t{node.index}", kind, node, scope))
                where[id(node)] = f"t{node.index}"
            continue
        f = fold_of(node)
        if f is not None:
            fold = fold_item(f)
            fold.members.append(node)
            op_at[id(node)] = fold.id
            used_only_inside = only_user(node)
            if node.kind != "output" and used_only_inside is not None and _key(used_only_inside) == _key(f):
                where[id(node)] = fold.id
                continue
            items.append(_Item(f"t{node.index}", "tensor", node, f[:-1]))
        else:
            scope = node.scope if cut is None else node.scope[:cut]
            items.append(_Item(f"op{node.index}", "op", node, scope))
            items.append(_Item(f"t{node.index}", "tensor", node, scope))
            op_at[id(node)] = f"op{node.index}"
        where[id(node)] = f"t{node.index}"

    edges, seen = [], set()
    for node in graph.nodes:
        if node.is_leaf:
            continue
        target = op_at[id(node)]
        for x in node.inputs:
            source = where[id(x)]
            if source == target:
                continue
            involves_fold = source.startswith("m") or target.startswith("m")
            if involves_fold and (source, target) in seen:
                continue  # a folded module that reads a tensor several times: one edge is enough
            seen.add((source, target))
            edges.append((source, target, {}))
        if where[id(node)] != target:
            edges.append((target, where[id(node)], {}))
    return _Layout(items, edges, where[id(graph.root)])


def _truncate(layout: _Layout, max_nodes: int) -> _Layout:
    """Keep the ``max_nodes`` nodes nearest the output (breadth-first, backwards); a note stands for the rest."""
    preds: dict[str, list[str]] = {}
    for s, d, _ in layout.edges:
        preds.setdefault(d, []).append(s)
    keep, queue = {layout.root}, deque([layout.root])
    while queue and len(keep) < max_nodes:
        for s in preds.get(queue.popleft(), []):
            if s not in keep and len(keep) < max_nodes:
                keep.add(s)
                queue.append(s)
    dropped = len(layout.items) - len(keep)
    items = [it for it in layout.items if it.id in keep]
    edges = [e for e in layout.edges if e[0] in keep and e[1] in keep]
    cut_off = [it.id for it in items if any(s not in keep for s in preds.get(it.id, []))]
    note = _Item("note_truncated", "note", text=(
        f"{dropped} earlier nodes not drawn (the graph has {len(layout.items)}; max_nodes={max_nodes}).\n"
        f"Pass collapse=<depth> to fold modules, or a larger max_nodes."))
    edges += [(note.id, target, dict(style="dashed", color="#f08c00")) for target in cut_off]
    return _Layout([*items, note], edges, layout.root, layout.notes)


# --------------------------------------------------------------------------------------
# 2. Labels and colours
# --------------------------------------------------------------------------------------


def _hex_to_rgb(c: str) -> np.ndarray:
    return np.array([int(c[i:i + 2], 16) for i in (1, 3, 5)], dtype=float)


def _palette(fraction: float) -> str:
    """The colour ``fraction`` (0..1) of the way along GRAD_PALETTE."""
    x = float(np.clip(fraction, 0, 1)) * (len(GRAD_PALETTE) - 1)
    i = min(int(x), len(GRAD_PALETTE) - 2)
    rgb = _hex_to_rgb(GRAD_PALETTE[i]) * (i + 1 - x) + _hex_to_rgb(GRAD_PALETTE[i + 1]) * (x - i)
    return "#" + "".join(f"{int(round(v)):02x}" for v in rgb)


def _ink_for(fill: str) -> str:
    """Black text on light fills, white on dark ones."""
    r, g, b = _hex_to_rgb(fill) / 255
    return "#000000" if 0.299 * r + 0.587 * g + 0.114 * b > 0.55 else "#ffffff"


@dataclass
class _GradScale:
    """Maps a gradient norm to a colour: log10 of the norm, from decade ``lo`` to decade ``hi``."""

    lo: int
    hi: int

    @classmethod
    def of(cls, norms) -> _GradScale:
        logs = [np.log10(n) for n in norms if n is not None and np.isfinite(n) and n > 0]
        if not logs:
            return cls(0, 1)
        lo, hi = int(np.floor(min(logs))), int(np.ceil(max(logs)))
        return cls(lo, hi if hi > lo else lo + 1)

    def colour(self, norm: float) -> str:
        if not np.isfinite(norm):
            return NONFINITE
        if norm == 0:
            return ZERO
        return _palette((np.log10(norm) - self.lo) / (self.hi - self.lo))

    def legend(self, title: str) -> str:
        span = self.hi - self.lo
        # About 5 to 10 swatches: every decade (or every other one) over a wide range,
        # and steps of a half or a quarter decade over a narrow one.
        step = 0.25 if span == 1 else 0.5 if span < 4 else float(np.ceil(span / 10))
        cells = []
        for exponent in np.arange(self.lo, self.hi + 1e-9, step):
            fill = self.colour(10.0 ** exponent)
            whole = int(np.floor(exponent))
            mantissa = f"{10 ** (exponent - whole):.2g}"
            cells.append(f'<td bgcolor="{fill}"><font color="{_ink_for(fill)}">{mantissa}e{whole}</font></td>')
        cells.append(f'<td bgcolor="{ZERO}">0</td>')
        cells.append(f'<td bgcolor="{NONFINITE}"><font color="#ffffff">NaN/Inf</font></td>')
        return (f'<<table border="0" cellborder="1" cellspacing="0" cellpadding="4" color="#adb5bd">'
                f'<tr><td colspan="{len(cells)}" border="0">{title}</td></tr><tr>{"".join(cells)}</tr></table>>')


def _esc(text) -> str:
    return html.escape(str(text), quote=True)


def _small(text: str, colour: str = "#495057") -> str:
    return f'<font point-size="9" color="{colour}">{text}</font>'


def _array_text(a: np.ndarray) -> str:
    text = np.array2string(np.asarray(a), precision=3, separator=", ", suppress_small=True)
    return "<br/>".join(_esc(line) for line in text.splitlines())


def _has_nan(node: Node) -> bool:
    if node.dtype.kind != "f":
        return False
    if node.data is None:  # freed by backward: only a one-element tensor's value was kept
        return node.value is not None and np.isnan(node.value)
    return bool(np.isnan(node.data).any())


def _tensor_label(node: Node, show: str, ink: str) -> str:
    name = node.name or ("output" if node.kind == "output" else None)
    shape = f"{fmt_shape(node.shape)} {node.dtype}"
    muted = "#495057" if ink == "#000000" else "#e9ecef"
    # NaN in a value is always a bug; an infinity may be a mask (-inf before softmax), so it is not flagged.
    warning = f'<br/><font color="{NONFINITE}" point-size="9"><b>NaN in value</b></font>' if _has_nan(node) else ""

    if show == "data" and node.size == 1:  # micrograd's record: name | data | grad
        cells = [f"<b>{_esc(name)}</b>"] if name else []
        cells.append(f"data {fmt_number(node.value)}")
        if node.grad is not None:
            cells.append(f"grad {fmt_number(np.asarray(node.grad).item())}")
        row = "<vr/>".join(f"<td>{c}</td>" for c in cells)
        return f'<<table border="0" cellborder="0" cellspacing="0" cellpadding="2"><tr>{row}</tr></table>{warning}>'

    lines = [f"<b>{_esc(name)}</b>", _small(shape, muted)] if name else [shape]
    grad_norm = None if node.grad is None else _small(f"‖grad‖ {node.grad_norm:.2e}", ink)
    if show == "data" and node.data is None:
        lines.append(_small("values freed by backward()", muted))
    elif show == "data" and node.size <= DATA_MAX_SIZE:  # small enough to print in full
        lines.append(_small(_array_text(node.data), ink))
        if node.grad is not None:
            lines.append(_small("grad " + _array_text(node.grad), muted))
    elif show == "data":
        lines.append(_small(f"mean {fmt_number(node.data.mean())}  std {fmt_number(node.data.std())}", muted))
        lines += [grad_norm] if grad_norm else []
    elif show == "grad":
        lines += [grad_norm] if grad_norm else []
    return "<" + "<br/>".join(lines) + warning + ">"


def _fold_label(graph: Graph, item: _Item) -> str:
    n_ops = sum(not n.is_leaf for n in item.members)
    params = [n for n in item.members if n.kind in ("parameter", "leaf")]
    summary = f"{n_ops} op{'s' * (n_ops != 1)}"
    if params:
        summary += f" · {len(params)} param{'s' * (len(params) != 1)} ({sum(p.size for p in params):,} values)"
    return f"<<b>{_esc(module_label(graph, item.path))}</b><br/>{_small(summary)}>"


def _pass_style(node: Node) -> dict:
    return PASS_STYLE[min(node.vjp_depth, len(PASS_STYLE) - 1)]


def _pass_name(depth: int) -> str:
    if depth == 0:
        return "forward pass"
    return "backward pass (VJPs)" if depth == 1 else f"backward pass {depth} (VJPs of VJPs)"


def _passes_legend(depths: list[int]) -> str:
    """Which colour is which pass, for a graph that holds ops a backward pass recorded (create_graph=True)."""
    cells = []
    for depth in depths:
        style = PASS_STYLE[min(depth, len(PASS_STYLE) - 1)]["op"]
        cells.append(f'<td bgcolor="{style["fillcolor"]}" color="{style["color"]}">{_pass_name(depth)}</td>')
    return (f'<<table border="0" cellborder="1" cellspacing="0" cellpadding="4">'
            f'<tr><td colspan="{len(cells)}" border="0"><b>which pass recorded each op</b></td></tr>'
            f'<tr>{"".join(cells)}</tr></table>>')


# --------------------------------------------------------------------------------------
# 3. Emit DOT
# --------------------------------------------------------------------------------------


def _emit(graph: Graph, layout: _Layout, show: str, rankdir: str):
    from .picture import Picture  # imports graphviz: only now, when something is drawn

    dot = Picture(
        "minigrad",
        graph_attr=dict(rankdir=rankdir, fontname=FONT, bgcolor="white", nodesep="0.18", ranksep="0.3",
                        pad="0.2"),
        node_attr=dict(fontname=FONT, fontsize="10", shape="box", style="rounded,filled", margin="0.08,0.03",
                       height="0.3"),
        edge_attr=dict(color="#868e96", arrowsize="0.6", penwidth="0.9"),
    )
    drawn = [it.node for it in layout.items if it.kind == "tensor"]  # folded-away tensors do not set the scale
    scale = _GradScale.of(n.grad_norm for n in drawn) if show == "grad" else None

    def attrs(item: _Item) -> dict:
        node = item.node
        if item.kind == "op":
            params = op_params(node)
            label = f"<{_esc(node.op.name)}" + (f"<br/>{_small(_esc(params))}" if params else "") + ">"
            return dict(OP_STYLE, **_pass_style(node)["op"], label=label,
                        tooltip=(node.op.doc or node.op.name).splitlines()[0])
        if item.kind == "number":
            return dict(shape="plaintext", style="", label=fmt_constant(node), fontsize="10")
        if item.kind == "fold":
            return dict(FOLD_STYLE, label=_fold_label(graph, item))
        if item.kind == "note":
            return dict(NOTE_STYLE, label=item.text.replace("\n", "\\l") + "\\l")
        style = dict(_pass_style(node)["value"] if node.kind == "value" else KIND_STYLE[node.kind])
        ink = "#000000"
        if scale is not None and node.grad is not None:
            style["fillcolor"] = scale.colour(node.grad_norm)
            ink = _ink_for(style["fillcolor"])
            style["fontcolor"] = ink
        return dict(style, label=_tensor_label(node, show, ink))

    # Clusters, nested as the modules were: each path's items go in it, then its child paths.
    by_path: dict[tuple, list[_Item]] = {}
    paths: dict[tuple, tuple] = {(): ()}
    for item in layout.items:
        by_path.setdefault(_key(item.cluster), []).append(item)
        for n in range(1, len(item.cluster) + 1):
            paths.setdefault(_key(item.cluster[:n]), item.cluster[:n])
    children: dict[tuple, list[tuple]] = {}
    for k in paths:
        if k:
            children.setdefault(k[:-1], []).append(k)

    numbers = itertools.count()  # Graphviz draws a subgraph as a box only if its name starts with "cluster"

    def fill(container, k: tuple) -> None:
        for item in by_path.get(k, []):
            container.node(item.id, **attrs(item))
        for child in children.get(k, []):
            depth = len(child) - 1
            with container.subgraph(name=f"cluster_{next(numbers)}") as sub:
                sub.attr(label=f"<<b>{_esc(module_label(graph, paths[child]))}</b>>", labeljust="l",
                         style="rounded,filled", fillcolor=CLUSTER_FILLS[depth % len(CLUSTER_FILLS)],
                         color="#8796b0", fontsize="11", fontcolor="#364152", margin="10")
                fill(sub, child)

    fill(dot, ())
    for i, text in enumerate(layout.notes):
        dot.node(f"note{i}", **dict(NOTE_STYLE, label=text.replace("\n", "\\l") + "\\l"))
    if scale is not None:
        what = "output" if graph.root.size == 1 else "sum(output)"
        title = f"<b>‖∂ {what} / ∂ tensor‖</b>  (L2 norm, log scale)"
        if graph.grads_from == ".grad":
            title = "<b>‖.grad‖</b> that backward() left  (L2 norm, log scale)"
        dot.node("legend", label=scale.legend(title), shape="plain", style="")
    if graph.has_backward_ops:
        dot.node("passes", label=_passes_legend(graph.vjp_depths), shape="plain", style="")
    # Edges along the computation pull harder than edges from leaves, so that a weight
    # used at every step of a loop does not drag all its uses to the top of the picture.
    internal = {it.id for it in layout.items if it.kind in ("op", "fold") or
                (it.kind == "tensor" and not it.node.is_leaf)}
    for source, target, extra in layout.edges:
        dot.edge(source, target, **(dict(weight="3") if source in internal else {}), **extra)
    return dot


# --------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------


def draw_graph(root: Tensor, params: dict | None = None, show: str = "shape", max_nodes: int | None = MAX_NODES,
               rankdir: str = "auto", collapse: int | None = None):
    """Draw the graph that computed ``root`` and return it as a ``graphviz.Digraph``.

    Tensors are boxes showing shape and dtype (and name, where known); each op
    is an ellipse labelled with its name in the op table and the parameters
    it was called with. Styles: the output is orange, parameters blue, other
    leaves that require grad green, constants (data, masks) grey and dashed,
    module buffers violet and dashed. Each module call is a box (a module
    called three times is three boxes, "call k of 3"). In the graph of a
    gradient taken with ``create_graph=True`` the ops are coloured by the pass
    that recorded them, forward or VJP, with a legend.

    params:   ``{name: Tensor}`` such as ``dict(model.named_parameters())``. Not needed
              for modules that ran the graph: their parameters are named from the
              outermost one's ``named_parameters()``; tensors with ``.name`` keep it.
    show:     "shape"; "data" prints values (micrograd-style ``name | data | grad``
              for scalars, arrays up to 12 elements) and gradients; "grad" colours each
              tensor by the L2 norm of d(root)/d(tensor), on a log scale with a legend,
              NaN/Inf in red. Before backward() (or after backward(retain_graph=True)) the
              gradients are computed here, with ``minigrad.grad``: ``.grad`` is left alone and
              hooks are not called. After a plain backward(), which frees the graph's arrays,
              the structure is drawn from the records it left, values only where tensors still
              live, and the gradients are the ``.grad`` backward left on the leaves (a note says
              so). A non-scalar root is treated as ``root.sum()``.
    max_nodes: a graph with more nodes is folded module by module (when ``collapse``
              is not given) and then cut down to the nodes nearest the output, with a
              note saying so. None draws everything.
    rankdir:  "LR" (left to right) or "TB" (top to bottom); "RL" and "BT" work too. The default,
              "auto", is LR up to ``LONG_GRAPH`` drawn nodes and TB beyond, where a chain of ops drawn
              left to right runs off the page (a 1-layer GPT's: 4,961 pt wide LR, 1,768 pt TB; with
              ``collapse=1``, which folds each block's submodules, 466 pt).
    collapse: modules nested deeper than this are drawn as one node each. The
              outermost module is depth 0, so ``collapse=0`` draws a model as a box
              of its direct submodules (each block one node), ``collapse=1`` opens those.

    Display it in Jupyter as it is (without Graphviz's ``dot`` it shows its DOT
    source and how to render it), or write it with ``save(graph, "graph.svg")``.
    """
    if show not in SHOWS:
        raise ValueError(f"draw_graph: show must be one of {SHOWS}, got {show!r}")
    if rankdir not in RANKDIRS:
        raise ValueError(f"draw_graph: rankdir must be one of {RANKDIRS}, got {rankdir!r}")
    if collapse is not None and (not isinstance(collapse, int) or isinstance(collapse, bool) or collapse < 0):
        raise ValueError(f"draw_graph: collapse must be None or a depth >= 0, got {collapse!r}")
    if max_nodes is not None and (not isinstance(max_nodes, int) or max_nodes < 1):
        raise ValueError(f"draw_graph: max_nodes must be None or a positive int, got {max_nodes!r}")
    wants_grads = show == "grad" or (show == "data" and isinstance(root, Tensor) and root.requires_grad)
    graph = collect(root, params, gradients=wants_grads)

    layout = _layout(graph, collapse)
    folded_at = None
    if max_nodes is not None and len(layout.items) > max_nodes and collapse is None:
        depth = max(len(n.scope) for n in graph.nodes) - 2  # the deepest level that folds something
        while depth >= 0 and len(layout.items) > max_nodes:
            layout, folded_at = _layout(graph, depth), depth
            depth -= 1
        if folded_at is not None:
            layout.notes.append(f"Modules nested deeper than depth {folded_at} are folded into one node each "
                                f"to fit max_nodes={max_nodes}.\nPass collapse=<depth> or a larger max_nodes "
                                f"to choose.")
    long = len(layout.items) > LONG_GRAPH
    if max_nodes is not None and len(layout.items) > max_nodes:
        layout = _truncate(layout, max_nodes)
    if graph.freed and show != "shape":
        layout.notes.append("backward() freed this graph: the values of intermediate tensors are gone\n"
                            "(leaves and tensors still held keep theirs), and the gradients shown are the\n"
                            ".grad it left. Draw before backward(), or pass retain_graph=True, to see all.")
    if rankdir == "auto":
        rankdir = "TB" if long else "LR"
    return _emit(graph, layout, show, rankdir)


FORMATS = {".svg": "svg", ".png": "png", ".pdf": "pdf", ".gv": None, ".dot": None}
INSTALL_HINT = "install Graphviz (apt-get install graphviz, or brew install graphviz)"


def save(graph, path) -> str:
    """Write a drawing to ``path``; the extension picks the format (.svg .png .pdf, or .gv/.dot source).

    Rendering needs Graphviz's ``dot`` program. Without it, the DOT source is
    written next to ``path`` as ``.gv`` and one line says how to get ``dot``.
    Returns the path actually written.
    """
    import graphviz

    path = os.fspath(path)
    ext = os.path.splitext(path)[1].lower()
    if ext not in FORMATS:
        raise ValueError(f"save: cannot tell the format of {path!r} from its extension; "
                         f"use one of {', '.join(FORMATS)}")
    if not hasattr(graph, "source"):
        raise TypeError(f"save: expected a graphviz graph (from draw_graph), got {type(graph).__name__}")
    source = graph.source.encode("utf-8")
    if FORMATS[ext] is None:
        atomic_write(path, source, make_dirs=True)
        return path
    if ext == ".png" and "dpi" not in graph.graph_attr:
        graph = graph.copy()
        graph.graph_attr["dpi"] = str(PNG_DPI)  # 96 dpi text is blurry on today's screens
    try:
        rendered = graph.pipe(format=FORMATS[ext])
    except graphviz.ExecutableNotFound:
        reason = f"Graphviz's `dot` was not found, so {path} was not rendered"
    except graphviz.CalledProcessError as err:
        first = (err.stderr or b"").decode(errors="replace").strip().splitlines()
        reason = f"`dot` failed ({first[0] if first else 'exit ' + str(err.returncode)}), so {path} was not rendered"
    else:
        atomic_write(path, rendered, make_dirs=True)
        return path
    fallback = os.path.splitext(path)[0] + ".gv"
    atomic_write(fallback, source, make_dirs=True)
    print(f"viz: {reason}; wrote the source to {fallback} instead. To render it, {INSTALL_HINT}.")
    return fallback
