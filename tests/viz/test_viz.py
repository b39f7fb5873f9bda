"""minigrad.viz: the DOT source it writes (nodes, labels, clusters, colours, folding, truncation),
the gradients it shows, the files it saves, the text outline, and the demo.

Everything but one test reads the DOT source, so Graphviz's `dot` is not needed;
the rendering test runs where `dot` is installed (CI installs it).
"""

import gc
import math
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import minigrad as mg
from minigrad import viz
from minigrad.modes import module_scope
from minigrad.viz.graph import collect

HAS_DOT = shutil.which("dot") is not None

# --------------------------------------------------------------------------------------
# Reading DOT source
# --------------------------------------------------------------------------------------

NODE_LINE = re.compile(r"^\s*(\w+) \[(.*)\]$")
EDGE_LINE = re.compile(r"^\s*(\w+) -> (\w+)")


def dot_nodes(graph) -> dict[str, str]:
    """node id -> its attribute text."""
    found = {}
    for line in graph.source.splitlines():
        m = NODE_LINE.match(line)
        if m and m.group(1) not in ("graph", "node", "edge"):
            found[m.group(1)] = m.group(2)
    return found


def dot_edges(graph) -> list[tuple[str, str]]:
    return [m.groups() for m in map(EDGE_LINE.match, graph.source.splitlines()) if m]


def fill(attrs: str) -> str:
    return re.search(r'fillcolor="([^"]+)"', attrs).group(1)


def find(graph, text: str) -> str:
    """The id of the one node whose attributes contain ``text``."""
    ids = [i for i, a in dot_nodes(graph).items() if text in a]
    assert len(ids) == 1, f"{len(ids)} nodes contain {text!r}"
    return ids[0]


def ops_drawn(graph) -> list[str]:
    return [re.search(r"label=<(\w+)", a).group(1) for a in dot_nodes(graph).values() if "shape=ellipse" in a]


def clusters(graph) -> dict[str, dict]:
    """cluster label -> {"parent": label of the enclosing cluster or None, "nodes": ids drawn directly in it}."""
    found, stack = {}, []
    for line in graph.source.splitlines():
        s = line.strip()
        if s.startswith("subgraph cluster_"):
            stack.append({"label": None, "nodes": [], "parent": stack[-1]["label"] if stack else None})
        elif s == "}" and stack:
            c = stack.pop()
            found[c["label"]] = c
        elif stack and stack[-1]["label"] is None and " label=<" in " " + s and not NODE_LINE.match(s):
            stack[-1]["label"] = re.search(r"label=<<b>(.*?)</b>>", s).group(1)
        elif stack and NODE_LINE.match(s):
            stack[-1]["nodes"].append(NODE_LINE.match(s).group(1))
    return found


def luminance(colour: str) -> float:
    r, g, b = (int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5))
    return 0.299 * r + 0.587 * g + 0.114 * b


# --------------------------------------------------------------------------------------
# A stand-in for minigrad.nn.Module: what viz relies on is module_scope and named_modules()
# --------------------------------------------------------------------------------------


class Module:
    def __call__(self, *args):
        with module_scope(self):
            return self.forward(*args)

    def named_modules(self, prefix=""):
        yield prefix, self
        for name, value in vars(self).items():
            children = value if isinstance(value, list) else [value]
            for i, child in enumerate(children):
                if isinstance(child, Module):
                    sub = f"{name}.{i}" if isinstance(value, list) else name
                    yield from child.named_modules(f"{prefix}.{sub}" if prefix else sub)

    def named_parameters(self):
        for prefix, module in self.named_modules():
            for name, value in vars(module).items():
                if isinstance(value, mg.Tensor) and value.requires_grad:
                    yield (f"{prefix}.{name}" if prefix else name), value


class Linear(Module):
    def __init__(self, n_in, n_out, rng):
        self.weight = mg.tensor(rng.standard_normal((n_in, n_out)), requires_grad=True)
        self.bias = mg.tensor(np.zeros(n_out), requires_grad=True)

    def forward(self, x):
        return x @ self.weight + self.bias


class Attn(Module):
    def __init__(self, d, rng):
        self.proj = Linear(d, d, rng)

    def forward(self, x):
        return self.proj(x).softmax(axis=-1) * x


class Block(Module):
    def __init__(self, d, rng):
        self.attn, self.mlp = Attn(d, rng), Linear(d, d, rng)

    def forward(self, x):
        x = x + self.attn(x)
        return x + self.mlp(x).tanh()


class Net(Module):
    def __init__(self, d=3, n_blocks=2, seed=0):
        rng = np.random.default_rng(seed)
        self.blocks = [Block(d, rng) for _ in range(n_blocks)]

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x.sum()


def net_and_loss(n_blocks=2):
    net = Net(n_blocks=n_blocks)
    x = mg.tensor(np.random.default_rng(1).standard_normal((2, 3)), name="x")
    return net, net(x)


# --------------------------------------------------------------------------------------
# Import isolation
# --------------------------------------------------------------------------------------


def test_importing_minigrad_or_viz_does_not_import_graphviz():
    code = ("import sys, minigrad; assert 'graphviz' not in sys.modules; "
            "import minigrad.viz; assert 'graphviz' not in sys.modules, 'viz imported graphviz eagerly'")
    subprocess.run([sys.executable, "-c", code], check=True)


# --------------------------------------------------------------------------------------
# Nodes, labels, styles
# --------------------------------------------------------------------------------------


def mlp_loss():
    rng = np.random.default_rng(0)
    x = mg.tensor(rng.standard_normal((4, 3)).astype(np.float32), name="x")
    w = mg.tensor(rng.standard_normal((3, 2)).astype(np.float32), requires_grad=True)
    b = mg.tensor(np.zeros(2, np.float32), requires_grad=True)
    return x, w, b, (x @ w + b).tanh().mean()


def test_every_op_is_a_node_labelled_with_its_table_name_and_every_tensor_shows_shape_and_dtype():
    x, w, b, loss = mlp_loss()
    g = viz.draw_graph(loss)
    assert sorted(ops_drawn(g)) == ["add", "matmul", "mean", "tanh"]
    nodes = dot_nodes(g)
    assert len(nodes) == 4 + 4 + 3  # 4 ops, their 4 outputs, 3 leaves
    for shape in ["(4, 3) float32", "(3, 2) float32", "(2,) float32", "(4, 2) float32", "scalar float32"]:
        assert any(shape in a for a in nodes.values()), shape
    # Each op reads its inputs and writes its output: matmul <- x, w; add <- matmul's output, b.
    edges = dot_edges(g)
    matmul = next(i for i, a in nodes.items() if "label=<matmul" in a)
    assert {s for s, d in edges if d == matmul} == {find(g, "<b>x</b>"), find(g, "(3, 2) float32")}
    assert len(edges) == 4 + 6  # one per op output, one per op input (2 + 2 + 1 + 1)


def test_params_dict_and_name_attribute_name_tensors_and_kinds_are_styled_apart():
    x, w, b, loss = mlp_loss()
    g = viz.draw_graph(loss, params={"fc.weight": w})
    param, leaf, const, out = (find(g, s) for s in ["<b>fc.weight</b>", "(2,) float32", "<b>x</b>", "<b>output</b>"])
    value = next(i for i, a in dot_nodes(g).items() if a.startswith("label=<(4, 2) float32"))  # made by an op
    fills = {k: fill(dot_nodes(g)[i]) for k, i in
             dict(param=param, leaf=leaf, const=const, out=out, value=value).items()}
    assert len(set(fills.values())) == 5, fills
    assert "dashed" in dot_nodes(g)[const]  # constants (no gradient) are dashed
    assert "penwidth=2" in dot_nodes(g)[out]


def test_a_tensor_used_twice_by_one_op_has_two_edges_and_numbers_are_drawn_as_values():
    x = mg.tensor([1.0, 2.0], requires_grad=True, name="x")
    g = viz.draw_graph((x * x * 0.5).sum())
    mul = [i for i, a in dot_nodes(g).items() if "label=<mul" in a]
    assert dot_edges(g).count((find(g, "<b>x</b>"), mul[0])) == 2
    number = find(g, "label=0.5 ")
    assert (number, mul[1]) in dot_edges(g)


def test_op_parameters_that_differ_from_defaults_are_shown():
    x = mg.tensor(np.ones((2, 3)), requires_grad=True)
    g = viz.draw_graph(x.sum(axis=-1, keepdims=False).reshape(1, 2).sum())
    labels = [a for a in dot_nodes(g).values() if "shape=ellipse" in a]
    assert any("axis=-1" in a and "keepdims" not in a for a in labels)  # keepdims=False is the default
    assert any("shape=(1, 2)" in a for a in labels)


def test_rankdir_and_argument_errors():
    _, _, _, loss = mlp_loss()
    assert "rankdir=TB" in viz.draw_graph(loss, rankdir="TB").source
    for bad in [dict(show="values"), dict(rankdir="XY"), dict(collapse=-1), dict(max_nodes=0)]:
        with pytest.raises(ValueError, match=next(iter(bad))):
            viz.draw_graph(loss, **bad)
    with pytest.raises(TypeError, match="params"):
        viz.draw_graph(loss, params={"w": np.ones(3)})
    with pytest.raises(TypeError, match="Tensor"):
        viz.draw_graph(np.ones(3))


# --------------------------------------------------------------------------------------
# show="data" and show="grad": values and gradients
# --------------------------------------------------------------------------------------


def test_data_mode_shows_micrograd_records_with_the_gradients_backprop_gives():
    a, b, c, f = (mg.tensor(v, requires_grad=True, name=n) for v, n in [(2.0, "a"), (-3.0, "b"), (10.0, "c"),
                                                                           (-2.0, "f")])
    loss = (a * b + c) * f
    g = viz.draw_graph(loss, show="data")
    loss.backward(retain_graph=True)
    for t in (a, b, c, f):
        record = dot_nodes(g)[find(g, f"<b>{t.name}</b>")]
        assert f"data {t.item():.4f}" in record
        assert f"grad {t.grad.item():.4f}" in record
    assert "grad 1.0000" in dot_nodes(g)[find(g, "data -8.0000")]  # d loss / d loss


def test_data_mode_prints_small_arrays_and_summarises_large_ones():
    small = mg.tensor([1.5, -2.25], requires_grad=True, name="small")
    big = mg.tensor(np.arange(100.0), requires_grad=True, name="big")
    g = viz.draw_graph((small * 2).sum() + big.sum(), show="data")
    assert "[ 1.5 , -2.25]" in dot_nodes(g)[find(g, "<b>small</b>")]
    assert "grad [2., 2.]" in dot_nodes(g)[find(g, "<b>small</b>")]
    assert "mean 49.5000" in dot_nodes(g)[find(g, "<b>big</b>")]


def chain_of_scales(scales):
    leaves = [mg.tensor(np.ones(4), requires_grad=True, name=f"p{i}") for i in range(len(scales))]
    loss = sum((p * s).sum() for p, s in zip(leaves, scales))
    return leaves, loss


def test_grad_mode_colours_each_tensor_by_its_gradient_norm_on_a_log_scale_with_a_legend():
    leaves, loss = chain_of_scales([1e-3, 1e-1, 1e1, 1e3])
    g = viz.draw_graph(loss, show="grad")
    grads = mg.grad(loss, leaves, retain_graph=True)
    fills = []
    for p, gp in zip(leaves, grads):
        attrs = dot_nodes(g)[find(g, f"<b>{p.name}</b>")]
        assert f"‖grad‖ {np.linalg.norm(gp.data):.2e}" in attrs
        fills.append(fill(attrs))
    assert [luminance(c) for c in fills] == sorted((luminance(c) for c in fills), reverse=True)  # bigger: darker
    assert len(set(fills)) == 4
    legend = dot_nodes(g)["legend"]
    # The legend spans the decades of the smallest and largest norms: 2e-3 .. 2e3.
    assert all(f">1e{d}<" in legend for d in range(-3, 5)) and "NaN/Inf" in legend


def test_a_narrow_gradient_range_gets_finer_legend_steps():
    leaves, loss = chain_of_scales([1.0, 4.0])  # norms 2 and 8: within one decade
    legend = dot_nodes(viz.draw_graph(loss, show="grad"))["legend"]
    assert re.findall(r">([0-9.]+e-?\d+)<", legend) == ["1e0", "1.8e0", "3.2e0", "5.6e0", "1e1"]


def test_grad_mode_marks_nan_and_inf_gradients_in_red():
    x = mg.tensor([0.0, 4.0], requires_grad=True, name="x")  # d sqrt(x)/dx is inf at 0
    y = mg.tensor([-1.0, 4.0], requires_grad=True, name="y")  # log(-1) is NaN...
    w = mg.tensor(2.0, requires_grad=True, name="w")  # ...and d (w * log y) / dw is log y
    with np.errstate(divide="ignore", invalid="ignore"):
        g = viz.draw_graph(x.sqrt().sum() + (w * y.log()).sum(), show="grad")
    red = viz.dot.NONFINITE
    assert f'<td bgcolor="{red}"><font color="#ffffff">NaN/Inf' in dot_nodes(g)["legend"]
    assert fill(dot_nodes(g)[find(g, "<b>x</b>")]) == red
    assert fill(dot_nodes(g)[find(g, "<b>w</b>")]) == red
    assert fill(dot_nodes(g)[find(g, "<b>y</b>")]) != red  # its gradient, w / y, is finite
    assert luminance(red) < 0.5 and int(red[1:3], 16) > 2 * int(red[3:5], 16)  # a red, not a shade of the scale
    # A NaN value (log(-1) and all that is computed from it) is flagged in the label too.
    flagged = [a for a in dot_nodes(g).values() if "NaN in value" in a]
    assert len(flagged) == 4  # log's output, times w, their sum, the final add


def test_grad_mode_has_no_side_effects_and_is_the_same_before_and_after_backward():
    leaves, loss = chain_of_scales([0.5, 2.0])
    seen = []
    leaves[0].register_hook(lambda grad: seen.append(grad))
    before = viz.draw_graph(loss, show="grad").source
    assert all(p.grad is None for p in leaves) and seen == []  # no .grad written, no hook called
    loss.backward(retain_graph=True)
    grads = [p.grad.numpy().copy() for p in leaves]
    after = viz.draw_graph(loss, show="grad").source
    assert after == before
    assert all(np.array_equal(p.grad.numpy(), g) for p, g in zip(leaves, grads)) and len(seen) == 1


def test_the_graph_drawn_after_grad_keeps_the_branches_grad_did_not_need():
    def build():
        x = mg.tensor(np.ones(3), requires_grad=True, name="x")
        w = mg.tensor(np.full(3, 2.0), requires_grad=True, name="w")
        a = (x * 2.0).tanh()
        b = (w * 3.0).exp()  # a branch that grad(loss, [x]) does not need
        return x, (a * b).sum()

    def drawn(root):
        return [(n.op.name if n.op else n.name, n.shape) for n in collect(root).nodes]

    x, loss = build()
    before = drawn(loss)
    mg.grad(loss, [x])
    gc.collect()
    assert drawn(loss) == before
    assert sum(1 for name, _ in before if name == "mul") == 3


# --------------------------------------------------------------------------------------
# Drawing after backward(): micrograd's order
# --------------------------------------------------------------------------------------


def masked_net_loss():
    """A small net with modules, a mask, a number, and an index array of more than four entries."""
    net = Net()
    x = mg.tensor(np.random.default_rng(1).standard_normal((5, 3)), name="x")
    keep = mg.tensor(np.random.default_rng(2).random((5, 3)) > 0.3)  # made here, held by nobody but the graph
    h = net.blocks[0](x).masked_fill(~keep, 0.0)
    return net, h[np.array([0, 1, 2, 3, 4, 0])].sum() * 0.5


def test_a_graph_drawn_after_backward_is_the_graph_drawn_before_it():
    _, loss = masked_net_loss()
    before, listing = viz.draw_graph(loss).source, _printed(loss)
    loss.backward()  # no retain_graph: the graph is freed
    assert viz.draw_graph(loss).source == before  # same nodes, labels, params, clusters, edges
    assert _printed(loss) == listing
    assert "index=array(6,)" in before  # an index array is drawn by its shape, before and after
    with pytest.raises(RuntimeError, match="retain_graph=True"):  # the graph can't be walked twice
        loss.backward()


def _printed(root, **kw) -> str:
    import io

    out = io.StringIO()
    viz.print_graph(root, file=out, **kw)
    return out.getvalue()


def test_backward_still_frees_intermediate_arrays_and_the_record_keeps_none():
    import gc
    import weakref

    x = mg.tensor(np.ones((64, 64)), requires_grad=True, name="x")
    mask = mg.tensor(np.eye(64, dtype=bool))
    h = (x * 2.0).tanh().masked_fill(mask, 0.0)
    alive = {"h": weakref.ref(h), "h.data": weakref.ref(h.data), "mask.data": weakref.ref(mask.data)}
    loss = h.sum()
    del h, mask
    loss.backward()
    assert {k: r() is None for k, r in alive.items()} == dict.fromkeys(alive, True)  # gone without gc
    gc.collect()
    # What the records hold, all the way back: no array bigger than a few numbers.
    records, seen = [loss._record], []
    while records:
        r = records.pop()
        if isinstance(r, mg.Tensor):  # a constant of a few numbers (2.0) is kept as itself
            assert r.size <= 4 and not r.requires_grad
            continue
        seen.append(r)
        records += list(r.inputs or ())
        for v in (r.params or {}).values():
            assert not (isinstance(v, np.ndarray) and v.size > 4)
    assert sorted(r.op.name for r in seen if r.op) == ["masked_fill", "mul", "sum", "tanh"]
    g = viz.draw_graph(loss, show="data")
    assert "values freed by backward()" in dot_nodes(g)[find_value(g, "tanh")]


def find_value(g, op_name: str) -> str:
    """The id of the tensor the one ``op_name`` op writes."""
    (op,) = [i for i, a in dot_nodes(g).items() if f"label=<{op_name}" in a]
    (out,) = [d for s, d in dot_edges(g) if s == op]
    return out


def test_a_deepcopied_model_draws_its_own_parameters_after_backward():
    import copy

    net, loss = net_and_loss()
    loss.backward()  # every parameter now carries a record of itself
    clone = copy.deepcopy(net)
    for p in (p for _, p in clone.named_parameters()):
        p.data = p.data * 0 + 7.0
    clone_loss = clone(mg.tensor(np.ones((2, 3)), name="x"))
    clone_loss.backward()
    g = viz.draw_graph(clone_loss, show="data")
    assert "[7., 7., 7.]" in dot_nodes(g)[find(g, "<b>blocks.0.mlp.bias</b>")]  # the clone's, not the original's


def test_after_backward_data_shows_what_is_still_held_and_the_leaves_grad():
    a, b, c, f = (mg.tensor(v, requires_grad=True, name=n) for v, n in [(2.0, "a"), (-3.0, "b"), (10.0, "c"),
                                                                           (-2.0, "f")])
    e = a * b
    e.name = "e"
    loss = (e + c) * f
    loss.backward()  # micrograd's order: backward, then draw
    g = viz.draw_graph(loss, show="data")
    for t in (a, b, c, f):
        record = dot_nodes(g)[find(g, f"<b>{t.name}</b>")]
        assert f"data {t.item():.4f}" in record and f"grad {t.grad.item():.4f}" in record
    assert "data -6.0000" in dot_nodes(g)[find(g, "<b>e</b>")]  # e is still held, so still drawn with its data
    assert "data 4.0000" in dot_nodes(g)[find_value(g, "add")]  # freed, but one number is kept
    assert "freed this graph" in dot_nodes(g)["note0"]
    listing = _printed(loss, show="data")
    assert re.search(r"a\s+leaf\s+scalar float32\s+data 2.0000\s+grad 6.0000", listing)


def test_after_backward_grad_mode_colours_the_leaves_by_the_grad_backward_left():
    leaves, loss = chain_of_scales([1e-2, 1e2])
    loss.backward()
    g = viz.draw_graph(loss, show="grad")
    for p in leaves:
        assert f"‖grad‖ {np.linalg.norm(p.grad.data):.2e}" in dot_nodes(g)[find(g, f"<b>{p.name}</b>")]
    assert "‖.grad‖" in dot_nodes(g)["legend"]
    assert fill(dot_nodes(g)[find(g, "<b>p0</b>")]) != fill(dot_nodes(g)[find(g, "<b>p1</b>")])


def test_retain_graph_still_allows_a_second_backward_and_draws_live_data():
    x = mg.tensor([1.0, 2.0], requires_grad=True, name="x")
    loss = (x * x).sum()
    loss.backward(retain_graph=True)
    loss.backward()
    assert x.grad.tolist() == [4.0, 8.0]
    g = viz.draw_graph(loss, show="data")  # freed by the second call; the structure is still there
    assert sorted(ops_drawn(g)) == ["mul", "sum"]


def test_grad_mode_needs_a_root_with_a_gradient_and_treats_a_non_scalar_root_as_its_sum():
    with pytest.raises(ValueError, match="requires grad"):
        viz.draw_graph(mg.tensor([1.0, 2.0]).exp(), show="grad")
    x = mg.tensor([1.0, 2.0], requires_grad=True, name="x")
    g = viz.draw_graph(x * 3, show="grad")
    assert "sum(output)" in dot_nodes(g)["legend"]
    assert f"‖grad‖ {math.sqrt(18):.2e}" in dot_nodes(g)[find(g, "<b>x</b>")]


# --------------------------------------------------------------------------------------
# Module clusters, collapse, max_nodes
# --------------------------------------------------------------------------------------


def test_modules_become_nested_clusters_named_like_their_parameters():
    net, loss = net_and_loss()
    g = viz.draw_graph(loss)
    found = clusters(g)
    assert found["Net"]["parent"] is None
    assert found["blocks.0 (Block)"]["parent"] == "Net"
    assert found["blocks.0.attn (Attn)"]["parent"] == "blocks.0 (Block)"
    assert found["blocks.0.attn.proj (Linear)"]["parent"] == "blocks.0.attn (Attn)"
    assert found["blocks.1.mlp (Linear)"]["parent"] == "blocks.1 (Block)"
    # Parameters are named from Net.named_parameters() and drawn in the module that uses them.
    weight = find(g, "<b>blocks.0.attn.proj.weight</b>")
    assert weight in found["blocks.0.attn.proj (Linear)"]["nodes"]
    # Ops that Attn runs itself sit in Attn's cluster; the final sum, run by Net, in Net's.
    def ops_in(label):
        return sorted(re.search(r"label=<(\w+)", dot_nodes(g)[i]).group(1) for i in found[label]["nodes"]
                      if "shape=ellipse" in dot_nodes(g)[i])

    assert ops_in("blocks.0.attn (Attn)") == ["mul", "softmax"]
    assert ops_in("blocks.0.attn.proj (Linear)") == ["add", "matmul"]
    assert ops_in("Net") == ["sum"]
    for name, _ in net.named_parameters():
        find(g, f"<b>{name}</b>")


def test_collapse_folds_deeper_modules_into_one_node_each():
    _, loss = net_and_loss()
    full = viz.draw_graph(loss)
    g0, g1 = viz.draw_graph(loss, collapse=0), viz.draw_graph(loss, collapse=1)
    assert len(dot_nodes(g0)) < len(dot_nodes(g1)) < len(dot_nodes(full))
    # collapse=0: Net stays a box, each block is one node; no op of a block is drawn.
    assert list(clusters(g0)) == ["Net"]
    fold = find(g0, "<b>blocks.0 (Block)</b>")
    # A block runs 9 ops: attn's proj (matmul, add), softmax, mul, the residual add, mlp (matmul, add),
    # tanh and the second residual add; its 4 parameters are 2 (3, 3) weights and 2 (3,) biases.
    assert "box3d" in dot_nodes(g0)[fold] and "9 ops · 4 params (24 values)" in dot_nodes(g0)[fold]
    assert sorted(ops_drawn(g0)) == ["sum"]
    # The tensor passed from block 0 to block 1 stays visible between the two folds.
    fold1 = find(g0, "<b>blocks.1 (Block)</b>")
    (between,) = [d for s, d in dot_edges(g0) if s == fold]
    assert (between, fold1) in dot_edges(g0)
    assert (find(g0, "<b>x</b>"), fold) in dot_edges(g0)
    # collapse=1: blocks are open, their attn and mlp are folded.
    assert set(clusters(g1)) == {"Net", "blocks.0 (Block)", "blocks.1 (Block)"}
    assert find(g1, "<b>blocks.1.attn (Attn)</b>")


class Tiny(Module):
    def __init__(self):
        self.p = mg.tensor(np.ones(4), requires_grad=True)

    def forward(self, x):
        return x * self.p * 1e-6


class HasTiny(Module):
    def __init__(self):
        self.tiny = Tiny()

    def forward(self, x):
        return self.tiny(x).sum()


def test_the_gradient_legend_spans_the_drawn_tensors_only():
    loss = HasTiny()(mg.tensor(np.full(4, 1.0), name="x"))
    g = viz.draw_graph(loss, show="grad")
    assert "‖grad‖ 2.00e-06" in dot_nodes(g)[find(g, "<b>tiny.p</b>")]
    assert ">1e-6<" in dot_nodes(g)["legend"]
    folded = viz.draw_graph(loss, show="grad", collapse=0)  # tiny.p is inside the fold now
    assert ">1e-6<" not in dot_nodes(folded)["legend"] and ">1e0<" in dot_nodes(folded)["legend"]


def test_a_graph_over_max_nodes_is_folded_first_with_a_note():
    _, loss = net_and_loss(n_blocks=6)
    g = viz.draw_graph(loss, max_nodes=40)
    graph_nodes = [i for i in dot_nodes(g) if not i.startswith("note")]
    assert len(graph_nodes) <= 40
    assert any("folded into one node each" in a for a in dot_nodes(g).values())
    assert find(g, "<b>blocks.5 (Block)</b>")


def test_a_graph_over_max_nodes_without_modules_is_cut_with_a_visible_note():
    x = mg.tensor(np.ones(3), requires_grad=True, name="x")
    y = x
    for _ in range(100):
        y = y.tanh()
    g = viz.draw_graph(y.sum(), max_nodes=30)
    nodes = dot_nodes(g)
    assert len(nodes) == 31
    note = nodes["note_truncated"]
    assert "173 earlier nodes not drawn" in note and "max_nodes=30" in note  # 100 tanh + sum: 203 nodes
    assert find(g, "<b>output</b>")
    assert ("note_truncated", next(d for s, d in dot_edges(g) if s == "note_truncated")) in dot_edges(g)
    assert len(dot_nodes(viz.draw_graph(y.sum(), max_nodes=None))) == 203


class Cell(Module):
    def __init__(self, d, rng):
        self.W = mg.tensor(rng.standard_normal((d, d)) * 0.5, requires_grad=True)

    def forward(self, x, h):
        return (x + h @ self.W).tanh()


class Unrolled(Module):
    """An RNN: one cell called once per time step."""

    def __init__(self, d=2, seed=0):
        self.cell = Cell(d, np.random.default_rng(seed))

    def forward(self, xs):
        h = mg.zeros(xs.shape[1])
        for x in xs:
            h = self.cell(x, h)
        return h.sum()


def test_a_module_called_several_times_is_drawn_once_per_call():
    loss = Unrolled()(mg.tensor(np.ones((3, 2)), name="xs"))
    found = clusters(viz.draw_graph(loss))
    calls = [f"cell (Cell) · call {k} of 3" for k in (1, 2, 3)]
    assert sorted(found) == sorted(["Unrolled", *calls])
    g = viz.draw_graph(loss)
    for label in calls:
        assert found[label]["parent"] == "Unrolled"
        ops = [re.search(r"label=<(\w+)", dot_nodes(g)[i]).group(1) for i in found[label]["nodes"]
               if "shape=ellipse" in dot_nodes(g)[i]]
        assert sorted(ops) == ["add", "matmul", "tanh"]  # each call's own ops, in its own box
    # The weight all calls share sits outside them, in the module that made the calls.
    assert find(g, "<b>cell.W</b>") in found["Unrolled"]["nodes"]
    # Folded, each call is one node, chained through the hidden state.
    folded = viz.draw_graph(loss, collapse=0)
    f1, f2, f3 = (find(folded, f"<b>{label}</b>") for label in calls)
    (h1,) = [d for s_, d in dot_edges(folded) if s_ == f1]
    assert (h1, f2) in dot_edges(folded) and "call 1 of 3" not in dot_nodes(folded)[f3]
    # A module called once keeps its plain name.
    assert "call" not in " ".join(clusters(viz.draw_graph(net_and_loss()[1])))
    assert "cell (Cell) · call 3 of 3" in _printed(loss)


def test_composite_mode_draws_attention_and_layer_norm_op_by_op():
    from minigrad import nn

    rng = np.random.default_rng(0)
    block = nn.TransformerBlock(d_model=8, n_heads=2, causal=True, rng=rng)
    x = mg.tensor(rng.standard_normal((1, 3, 8)).astype(np.float32), requires_grad=True, name="x")
    fused = viz.draw_graph(block(x).sum())
    assert {"layer_norm", "linear", "attention_weights", "gelu"} <= set(ops_drawn(fused))
    with mg.composite_mode():
        g = viz.draw_graph(block(x).sum())
    ops = ops_drawn(g)
    assert not {"layer_norm", "linear", "attention_weights", "gelu"} & set(ops)
    found = clusters(g)

    def ops_in(label):
        return [re.search(r"label=<(\w+)", dot_nodes(g)[i]).group(1) for i in found[label]["nodes"]
                if "shape=ellipse" in dot_nodes(g)[i]]

    # Layer norm, op by op, in its own box: (x - mean) / sqrt(var + eps) * weight + bias.
    assert sorted(ops_in("attn_norm (LayerNorm)")) == ["add", "add", "div", "mean", "mul", "sqrt", "sub", "var"]
    norm_labels = [dot_nodes(g)[i] for i in found["attn_norm (LayerNorm)"]["nodes"]]
    assert any("label=<mean<br/>" in a and "axis=-1, keepdims=True" in a for a in norm_labels)
    # Attention: scores = q k^T * scale + mask, softmax, weights @ v, in the attention's box.
    assert sorted(set(ops_in("attn (MultiHeadAttention)"))) == ["add", "matmul", "mul", "reshape", "softmax",
                                                                "transpose"]
    assert sorted(ops_in("attn.q_proj (Linear)")) == ["add", "matmul", "transpose"]
    assert "erf" in ops_in("mlp (MLP)")  # exact GELU: x * 0.5 * (1 + erf(x / sqrt 2))


def test_the_picture_shows_itself_in_jupyter_and_falls_back_to_its_source_without_dot(tmp_path, monkeypatch):
    import graphviz

    _, _, _, loss = mlp_loss()
    g = viz.draw_graph(loss)
    assert isinstance(g, graphviz.Digraph)
    if HAS_DOT:
        assert g._repr_mimebundle_()["image/svg+xml"].lstrip().startswith("<?xml")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no `dot` to be found
    shown = g._repr_mimebundle_()
    assert set(shown) == {"text/plain", "text/html"}
    assert "apt-get install graphviz" in shown["text/plain"] and g.source in shown["text/plain"]
    assert "<pre>digraph minigrad {" in shown["text/html"]


def test_the_graph_of_a_gradient_marks_the_forward_pass_and_the_vjps():
    w = mg.tensor(0.5, requires_grad=True, name="w")
    x = mg.tensor(2.0, name="x")
    y = (w * x).tanh()
    (dw,) = mg.grad(y, [w], create_graph=True)  # (1 - y^2) x, recorded as ops
    g = viz.draw_graph(dw)
    forward, vjp = (viz.dot.PASS_STYLE[d]["op"]["fillcolor"] for d in (0, 1))
    by_fill = {}
    for a in dot_nodes(g).values():
        if "shape=ellipse" in a:
            by_fill.setdefault(fill(a), []).append(re.search(r"label=<(\w+)", a).group(1))
    assert sorted(by_fill[forward]) == ["mul", "tanh"]  # w * x and tanh: the forward pass
    assert sorted(by_fill[vjp]) == ["mul", "mul", "mul", "sub"]  # tanh's VJP g (1 - y*y), then mul's: times x
    legend = dot_nodes(g)["passes"]
    assert "forward pass" in legend and "backward pass (VJPs)" in legend and vjp in legend
    assert "passes" not in dot_nodes(viz.draw_graph(y)) and "passes" not in dot_nodes(viz.draw_graph(w))
    # Differentiated again, the VJPs of the VJPs are a third colour.
    (d2w,) = mg.grad(dw, [w], create_graph=True)
    fills = {fill(a) for a in dot_nodes(viz.draw_graph(d2w)).values() if "shape=ellipse" in a}
    assert viz.dot.PASS_STYLE[2]["op"]["fillcolor"] in fills and "backward 2" in _printed(d2w)
    # The engine is back in the forward pass afterwards, even when a backward pass fails half-way.
    assert (w * 2)._vjp_depth == 0
    z = (w * x).tanh()
    z.register_hook(lambda grad: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        mg.grad(z * 3, [w], create_graph=True)
    assert (w * 2)._vjp_depth == 0


class WithBuffer(Module):
    """A module with a buffer: a constant tensor it owns (ALiBi slopes, a running mean...)."""

    def __init__(self):
        self.weight = mg.tensor(np.ones(3), requires_grad=True)
        self.slopes = mg.tensor(np.array([0.5, 0.25, 0.125]))

    def named_buffers(self):
        yield "slopes", self.slopes

    def forward(self, x):
        return (x * self.weight * self.slopes).sum()


def test_a_module_buffer_is_drawn_under_its_name():
    loss = WithBuffer()(mg.tensor(np.ones(3), name="x"))
    g = viz.draw_graph(loss)
    buffer = dot_nodes(g)[find(g, "<b>slopes</b>")]
    assert fill(buffer) == viz.dot.KIND_STYLE["buffer"]["fillcolor"] and "dashed" in buffer  # no gradient
    assert re.search(r"%\d+\s+slopes\s+buffer", _printed(loss))


# --------------------------------------------------------------------------------------
# save
# --------------------------------------------------------------------------------------


def test_save_writes_dot_source_for_gv_and_dot(tmp_path):
    _, _, _, loss = mlp_loss()
    g = viz.draw_graph(loss)
    for name in ["graph.gv", "graph.dot"]:
        assert viz.save(g, tmp_path / name) == str(tmp_path / name)
        assert (tmp_path / name).read_text() == g.source
    assert sorted(p.name for p in tmp_path.iterdir()) == ["graph.dot", "graph.gv"]  # no temporary files left
    with pytest.raises(ValueError, match=r"\.svg"):
        viz.save(g, tmp_path / "graph.jpeg")


def test_save_without_graphviz_writes_the_source_and_says_how_to_install_it(tmp_path, monkeypatch, capsys):
    _, _, _, loss = mlp_loss()
    g = viz.draw_graph(loss)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no `dot` to be found
    written = viz.save(g, tmp_path / "graph.svg")
    assert written == str(tmp_path / "graph.gv")
    assert (tmp_path / "graph.gv").read_text() == g.source and not (tmp_path / "graph.svg").exists()
    printed = capsys.readouterr().out.strip().splitlines()
    assert len(printed) == 1 and "apt-get install graphviz" in printed[0] and "brew install graphviz" in printed[0]


@pytest.mark.skipif(not HAS_DOT, reason="Graphviz's `dot` is not installed")
def test_save_renders_svg_png_and_pdf(tmp_path):
    _, loss = net_and_loss()
    g = viz.draw_graph(loss, show="grad")
    svg, png, pdf = (viz.save(g, tmp_path / f"graph.{ext}") for ext in ["svg", "png", "pdf"])
    text = open(svg, encoding="utf-8").read()
    assert "<svg" in text and "blocks.0.attn (Attn)" in text and "‖grad‖" in text
    assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    assert open(pdf, "rb").read(5) == b"%PDF-"


# --------------------------------------------------------------------------------------
# print_graph
# --------------------------------------------------------------------------------------


def test_print_graph_lists_one_tensor_per_line_like_a_program(capsys):
    x, w, b, loss = mlp_loss()
    viz.print_graph((x @ w + b).tanh().mean() * 0.5, params={"w": w})
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "graph of a scalar float32 output: 5 ops, 3 leaves"
    body = [re.sub(r"\s+", " ", line) for line in lines[1:]]
    assert body[0] == "%0 x constant (4, 3) float32"
    assert body[1] == "%1 w parameter (3, 2) float32"
    assert body[2] == "%2 matmul(%0, %1) (4, 2) float32"
    assert body[-2] == "%6 mean(%5) scalar float32"
    assert body[-1] == "%7 mul(%6, 0.5) scalar float32 output"  # the 0.5 is written inline, not given a line


def test_print_graph_shows_modules_gradients_and_respects_max_nodes(capsys):
    _, loss = net_and_loss()
    viz.print_graph(loss, show="grad", max_nodes=5)
    lines = capsys.readouterr().out.splitlines()
    assert re.match(r"\.\.\. \d+ earlier tensors not shown \(max_nodes=5\)", lines[1])
    assert len(lines) == 2 + 5
    assert "blocks.1 (Block)" in lines[-2] and "‖grad‖" in lines[-2]
    previous = lines[-2].split()[0]
    assert lines[-1].split()[1:3] == [f"sum({previous})", "scalar"] and lines[-1].endswith("output")


# --------------------------------------------------------------------------------------
# The demo
# --------------------------------------------------------------------------------------


def test_demo_draws_its_five_graphs(tmp_path, capsys):
    from demos import draw_graphs

    written = draw_graphs.main(["--out", str(tmp_path)])
    names = ["scalar_expression", "attention_head", "transformer_block", "rnn_unrolled", "gradient_graph"]
    assert list(written) == names + ["backward_steps"]
    assert "<script>" in (tmp_path / "backward_steps.html").read_text()  # the stepper, one self-contained page
    for name in names:
        assert (tmp_path / f"{name}.gv").stat().st_size > 0
        assert (tmp_path / f"{name}.svg").exists() == HAS_DOT
    block = (tmp_path / "transformer_block.gv").read_text()
    assert "attn.q_proj (Linear)" in block and "mlp.up_proj.weight" in block
    assert "attn (MultiHeadAttention)" in block
    rnn = (tmp_path / "rnn_unrolled.gv").read_text()
    norms = [float(re.search(rf"<b>h{t}</b>.*?‖grad‖ ([0-9.e+-]+)", rnn).group(1)) for t in range(7)]
    assert all(a < b / 2 for a, b in zip(norms, norms[1:]))  # the gradient vanishes going back in time
    printed = capsys.readouterr().out
    assert "tanh(%8)" in printed
    # The gradient's graph: forward ops and VJP ops in two colours, with the legend; its value checked by hand.
    gradient = (tmp_path / "gradient_graph.gv").read_text()
    assert "forward pass" in gradient and "backward pass (VJPs)" in gradient
    assert gradient.count(viz.dot.PASS_STYLE[1]["op"]["fillcolor"]) >= 4  # tanh's VJP and the dot's: 4+ ops
    by_demo, by_hand = re.search(r"dy/dw = \[(.*?)\]; \(1 - y\^2\) x by hand = \[(.*?)\]", printed).groups()
    assert by_demo.split() == by_hand.split()
