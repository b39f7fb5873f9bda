"""A graph as text, one line per tensor, for terminals and logs: ``print_graph(loss)``.

The listing is in the order the graph was computed, like a program: leaves
first, then ``%7 = matmul(%3, %5)`` lines, the output last. Numbers that met
a tensor in an op (the ``0.5`` in ``x * 0.5``) are written inline.

    graph of a scalar float32 output: 3 ops, 3 leaves
    %0  x       constant        (4, 3) float32
    %1  fc.weight  parameter    (3, 2) float32
    %2          matmul(%0, %1)  (4, 2) float32  fc (Linear)
    ...
    %5          mean(%4)        scalar float32  output

Columns: the tensor's number, its name, how it was made (or what kind of
leaf it is), shape and dtype, with ``show="data"``/``"grad"`` its value and
gradient, and the module that ran the op. In the graph of a gradient taken
with ``create_graph=True``, a last column says which ops the backward pass
recorded (``backward``; ``backward 2`` for the VJPs of VJPs).
"""

from __future__ import annotations

import sys

from ..tensor import Tensor
from .graph import Graph, Node, collect, fmt_constant, fmt_number, fmt_shape, module_label, op_params


def _row(graph: Graph, node: Node, show: str, number: dict[int, int]) -> list[str]:
    if node.is_leaf:
        what = node.kind
    else:
        args = [fmt_constant(x) if x.is_number else f"%{number[id(x)]}" for x in node.inputs]
        params = op_params(node)
        what = f"{node.op.name}({', '.join(args + ([params] if params else []))})"
    row = [f"%{number[id(node)]}", node.name or "", what, f"{fmt_shape(node.shape)} {node.dtype}"]
    if show == "data":
        row.append(f"data {fmt_number(node.value)}" if node.size == 1 else "")
        row.append(f"grad {fmt_number(node.grad.item())}" if node.grad is not None and node.size == 1 else "")
    if show == "grad":
        row.append("" if node.grad is None else f"‖grad‖ {node.grad_norm:.2e}")
    where = module_label(graph, node.scope) if node.scope and not node.is_leaf else ""
    row.append("output" if node.kind == "output" else where)
    if graph.has_backward_ops:  # a gradient's graph: say which ops are the VJPs
        row.append("" if node.is_leaf or node.vjp_depth == 0 else
                   "backward" if node.vjp_depth == 1 else f"backward {node.vjp_depth}")
    return row


def print_graph(root: Tensor, params: dict | None = None, show: str = "shape", max_nodes: int | None = None,
                file=None) -> None:
    """Print ``root``'s graph as a listing, one tensor a line (see ``draw_graph`` for ``params`` and ``show``).

    ``max_nodes`` keeps the last lines (those nearest the output) and says how
    many were left out. ``file`` defaults to standard output.
    """
    if show not in ("shape", "data", "grad"):
        raise ValueError(f"print_graph: show must be 'shape', 'data' or 'grad', got {show!r}")
    wants_grads = show == "grad" or (show == "data" and isinstance(root, Tensor) and root.requires_grad)
    graph = collect(root, params, gradients=wants_grads)
    nodes = [n for n in graph.nodes if not n.is_number]
    n_ops = sum(not n.is_leaf for n in nodes)
    out = graph.root
    header = (f"graph of a {fmt_shape(out.shape)} {out.dtype} output: {n_ops} op{'s' * (n_ops != 1)}, "
              f"{len(nodes) - n_ops} lea{'ves' if len(nodes) - n_ops != 1 else 'f'}")
    lines = [header]
    number = {id(n): i for i, n in enumerate(nodes)}  # numbers are written inline, so they get no %line
    if max_nodes is not None and len(nodes) > max_nodes:
        lines.append(f"... {len(nodes) - max_nodes} earlier tensors not shown (max_nodes={max_nodes})")
        nodes = nodes[-max_nodes:]
    rows = [_row(graph, n, show, number) for n in nodes]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip())
    print("\n".join(lines), file=file if file is not None else sys.stdout)
