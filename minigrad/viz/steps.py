"""Step through a backward pass: the order the engine visits the tensors, and the gradients as they arrive.

    steps = viz.backward_steps(loss)     # before backward(): records one pass of mg.grad, leaves .grad alone
    steps                                # in Jupyter: the graph, one frame per visited tensor, with a slider
    print(steps.text())                  # in a terminal: the same frames as text
    steps.save_html("backward.html")     # one self-contained file: open it and press "next"

Nothing here runs backward itself. ``backward_steps`` hooks every tensor that
requires grad (``register_hook``) and runs ``minigrad.grad`` once with the
graph retained: the engine calls each hook as it visits that tensor, with its
gradient, now complete. Those calls give the frames, in the engine's order.
What each visit hands on to the inputs, the shares that arrive (and add up
where a tensor is used twice), is that op's VJP applied to the gradient the
hook saw, computed again here for display; the shares a tensor received sum
to the gradient the engine later hands its hook (the tests hold them equal).
"""

from __future__ import annotations

import html
import json
import shutil
from dataclasses import dataclass, field

import numpy as np

from ..autograd.backprop import grad as _grad
from ..files import atomic_write
from ..modes import no_grad
from ..tensor import Tensor
from .dot import INSTALL_HINT
from .graph import Graph, Node, collect, fmt_shape

NO_DOT_NOTE = (f"Graphviz's `dot` program was not found, so each frame's picture is shown as its DOT source. To see "
               f"the pictures, {INSTALL_HINT}, then make this page again; the text under each picture says the "
               f"same in words.")


@dataclass
class Share:
    """What one visit hands one input: ``share`` (summed to the input's shape) and the input's total so far."""

    to: Node
    share: np.ndarray
    total: np.ndarray
    count: int  # this is the input's count-th share
    expected: int  # of this many (the ops that read it)


@dataclass
class Frame:
    """One step of the pass: the tensor visited, its complete gradient, and the shares it sends its inputs."""

    step: int
    node: Node | None  # None: the first frame, before the pass starts
    grad: np.ndarray | None
    shares: list[Share] = field(default_factory=list)
    totals: dict[int, np.ndarray] = field(default_factory=dict)  # node index -> gradient so far, after this step
    done: set = field(default_factory=set)  # indices of the nodes visited so far (this one included)

    @property
    def title(self) -> str:
        if self.node is None:
            return "before backward: the forward pass recorded the graph; no gradient has arrived yet"
        what = f"visit {_name(self.node)}"
        return f"step {self.step}: {what}, its gradient complete"


def _name(node: Node) -> str:
    label = node.name or (f"%{node.index}" if node.op is None else f"%{node.index} = {node.op.name}(...)")
    return label if node.op is None or node.name is None else f"{label} = {node.op.name}(...)"


def _fmt(a: np.ndarray, limit: int = 6) -> str:
    a = np.asarray(a)
    if a.size == 1:
        return f"{a.item():.4g}"
    flat = ", ".join(f"{v:.4g}" for v in a.reshape(-1)[:limit])
    return f"[{flat}{', ...' if a.size > limit else ''}] {fmt_shape(a.shape)}"


def _sum_to(a: np.ndarray, shape: tuple) -> np.ndarray:
    """A broadcast share summed to its input's shape (for display: the engine does this in backward)."""
    lead = a.ndim - len(shape)
    a = a.sum(axis=tuple(range(lead))) if lead else a
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and a.shape[i] != 1)
    return (a.sum(axis=axes, keepdims=True) if axes else a).reshape(shape)


class BackwardSteps:
    """The frames of one recorded backward pass; shows itself in Jupyter, prints, writes a self-contained HTML file."""

    def __init__(self, graph: Graph, frames: list[Frame]):
        self.graph, self.frames = graph, frames

    def __len__(self) -> int:
        return len(self.frames)

    @property
    def order(self) -> list[Node]:
        """The tensors in the order the engine visited them."""
        return [f.node for f in self.frames if f.node is not None]

    # --- text ---------------------------------------------------------------------------

    def frame_text(self, i: int) -> str:
        f = self.frames[i]
        lines = [f.title]
        if f.node is not None:
            lines.append(f"  gradient of {_name(f.node)}: {_fmt(f.grad)}")
            if f.node.op is None:
                lines.append("  a leaf: this is its final gradient")
            for s in f.shares:
                of = f" (share {s.count} of {s.expected}; total so far {_fmt(s.total)})" if s.expected > 1 else ""
                lines.append(f"  -> {_name(s.to)} receives {_fmt(s.share)}{of}")
        return "\n".join(lines)

    def text(self) -> str:
        return "\n\n".join(self.frame_text(i) for i in range(len(self.frames)))

    def __repr__(self) -> str:
        return f"<BackwardSteps: {len(self.order)} tensors visited; print(steps.text()) or steps.save_html(path)>"

    # --- DOT ------------------------------------------------------------------------------

    def to_dot(self, i: int, rankdir: str = "LR") -> str:
        """Frame ``i`` as Graphviz source: the visited tensor orange, the finished ones blue, waiting ones yellow."""
        f = self.frames[i]
        arriving = {s.to.index for s in f.shares}
        lines = [f"digraph step{i} {{", f"  rankdir={rankdir}", '  node [fontname="Helvetica,Arial,sans-serif" '
                 'fontsize=10 shape=box style="rounded,filled"]', '  edge [color="#adb5bd"]']
        for n in self.graph.nodes:
            if n.is_number:
                continue
            head = html.escape(n.name or (n.op.name if n.op else "leaf"))
            rows = [f"<b>{head}</b>", fmt_shape(n.shape)]
            if n.index in f.totals:
                rows.append("grad " + html.escape(_fmt(f.totals[n.index], 3)))
            if f.node is n:
                style = 'fillcolor="#ffd8a8" color="#d9480f" penwidth=2.5'
            elif n.index in f.done:
                style = 'fillcolor="#d0ebff" color="#1971c2"'
            elif n.index in f.totals:
                style = 'fillcolor="#fff3bf" color="#f08c00"' + (" penwidth=2" if n.index in arriving else "")
            elif n.requires_grad:
                style = 'fillcolor="#ffffff" color="#868e96"'
            else:
                style = 'fillcolor="#f1f3f5" color="#ced4da" fontcolor="#868e96"'
            lines.append(f"  n{n.index} [label=<{'<br/>'.join(rows)}> {style}]")
        for n in self.graph.nodes:
            for x in n.inputs:
                if x.is_number:
                    continue
                hot = f.node is n and x.requires_grad
                attrs = f' [color="#d9480f" penwidth=2 label="{html.escape(n.op.name)}" fontsize=9]' if hot else ""
                lines.append(f"  n{x.index} -> n{n.index}{attrs}")
        lines.append("}")
        return "\n".join(lines)

    # --- HTML -----------------------------------------------------------------------------

    @staticmethod
    def can_draw() -> bool:
        """True when Graphviz's ``dot`` program is installed, to draw each frame's picture."""
        return shutil.which("dot") is not None

    def _pictures(self) -> list[str]:
        """Each frame as inline SVG when Graphviz's ``dot`` is installed, else as its DOT source in a <pre>."""
        if not self.can_draw():
            return [f'<pre class="dot">{html.escape(self.to_dot(i))}</pre>' for i in range(len(self.frames))]
        import graphviz

        out = []
        for i in range(len(self.frames)):
            svg = graphviz.Source(self.to_dot(i)).pipe(format="svg").decode("utf-8")
            out.append(svg[svg.find("<svg"):])
        return out

    def to_html(self, element_id: str = "minigrad-steps") -> str:
        """A self-contained widget: the frames' pictures and text, with previous/next buttons and a slider.

        ``#step=N`` in the page's address opens frame N (the tests drive it so); the
        keys left and right step too.
        """
        frames = [dict(picture=p, text=self.frame_text(i)) for i, p in enumerate(self._pictures())]
        data = json.dumps(frames).replace("</", "<\\/")
        last = len(frames) - 1
        note = "" if self.can_draw() else f'<p class="note" style="color:#d9480f">{html.escape(NO_DOT_NOTE)}</p>\n'
        return f"""<div id="{element_id}" class="minigrad-steps" style="font-family:Helvetica,Arial,sans-serif">
{note}<div><button class="prev">&#9664; previous</button> <button class="next">next &#9654;</button>
<input class="slider" type="range" min="0" max="{last}" value="0" style="width:50%">
<span class="counter">frame 0 of {last}</span></div>
<div class="picture" style="max-width:100%;overflow-x:auto"></div>
<pre class="text" style="white-space:pre-wrap"></pre>
<script>
(function() {{
  var root = document.getElementById({json.dumps(element_id)});
  var frames = {data};
  var at = 0;
  function show(i) {{
    at = Math.max(0, Math.min(frames.length - 1, i));
    root.querySelector(".picture").innerHTML = frames[at].picture;
    root.querySelector(".text").textContent = frames[at].text;
    root.querySelector(".slider").value = at;
    root.querySelector(".counter").textContent = "frame " + at + " of " + (frames.length - 1);
    root.setAttribute("data-frame", at);
  }}
  root.querySelector(".prev").onclick = function() {{ show(at - 1); }};
  root.querySelector(".next").onclick = function() {{ show(at + 1); }};
  root.querySelector(".slider").oninput = function() {{ show(parseInt(this.value, 10)); }};
  document.addEventListener("keydown", function(e) {{
    if (e.key === "ArrowRight") show(at + 1); else if (e.key === "ArrowLeft") show(at - 1);
  }});
  var m = /step=(\\d+)/.exec(window.location.hash || "");
  show(0);
  if (m) {{ for (var k = 0; k < parseInt(m[1], 10); k++) root.querySelector(".next").click(); }}
}})();
</script>
</div>"""

    def _repr_html_(self) -> str:
        return self.to_html(f"minigrad-steps-{id(self):x}")

    def save_html(self, path) -> str:
        """Write the stepper as one self-contained HTML page (atomically); returns the path."""
        page = ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>backward, step by step</title></head>"
                f"<body>\n<h3>The backward pass, step by step</h3>\n{self.to_html()}\n</body></html>\n")
        return atomic_write(path, page, make_dirs=True)


def backward_steps(root: Tensor, params: dict | None = None) -> BackwardSteps:
    """Record the backward pass from ``root`` frame by frame (call it before ``backward()``; ``.grad`` is untouched).

    One frame before the pass, then one per tensor the engine visits, in its
    order: that tensor's gradient, complete, and the share it hands each input
    (with the input's total so far, where several ops read it). A non-scalar
    root is treated as ``root.sum()``. ``params`` names tensors, as in ``draw_graph``.
    """
    graph = collect(root, params)
    if graph.freed:
        raise ValueError("backward_steps: this graph was freed by backward(); record the steps before calling "
                         "backward(), or call backward(retain_graph=True)")
    if not root.requires_grad:
        raise ValueError("backward_steps: the root does not require grad, so there is no backward pass to record")
    hooked = [n for n in graph.nodes if n.tensor is not None and n.tensor.requires_grad]
    visits: list[tuple[Node, np.ndarray]] = []
    handles = []
    try:
        for n in hooked:
            handles.append(n.tensor.register_hook(lambda g, n=n: visits.append((n, g.data.copy()))))
        leaves = [n.tensor for n in hooked if n.is_leaf]
        _grad(root, leaves or [root], grad_outputs=np.ones(root.shape, root.dtype), retain_graph=True,
              allow_unused=True)
    finally:
        for h in handles:
            h.remove()
    readers = {n.index: sum(1 for c in n.consumers for x in c.inputs if x is n) for n in graph.nodes}
    frames = [Frame(0, None, None)]
    totals: dict[int, np.ndarray] = {}
    counts: dict[int, int] = {}
    done: set = set()
    for step, (n, g) in enumerate(visits, start=1):
        totals[n.index] = g
        done.add(n.index)
        shares = []
        if n.op is not None:
            with no_grad():
                t = n.tensor
                given = n.op.vjp(Tensor._wrap(g), t, *t._inputs, **t._params)
            for x_node, gx in zip(n.inputs, given if isinstance(given, tuple | list) else (given,)):
                if gx is None or not x_node.requires_grad:
                    continue
                share = _sum_to(np.asarray(gx.data), x_node.shape)
                totals[x_node.index] = totals[x_node.index] + share if x_node.index in totals else share
                counts[x_node.index] = counts.get(x_node.index, 0) + 1
                shares.append(Share(x_node, share, totals[x_node.index], counts[x_node.index],
                                    readers[x_node.index]))
        frames.append(Frame(step, n, g, shares, dict(totals), set(done)))
    return BackwardSteps(graph, frames)


__all__ = ["BackwardSteps", "Frame", "Share", "backward_steps"]
