# %% [markdown]
# # Five computation graphs drawn with minigrad.viz: the graphs backprop walks, made visible
#
#     python -m demos.draw_graphs [--out DIR]        (writes five graphs into DIR, default out/draw_graphs)
#
# 1. `scalar_expression`: a single neuron, tanh(x1*w1 + x2*w2 + b), one number
#    per node, with its value and gradient (`show="data"`);
# 2. `attention_head`: one causal self-attention head built from Tensor ops,
#    with its weights, shapes and named intermediates;
# 3. `transformer_block`: `minigrad.nn.TransformerBlock`; the ops of every
#    module it calls are boxed in a cluster named like its parameters
#    (`attn.q_proj (Linear)`...);
# 4. `rnn_unrolled`: an RNN unrolled over 6 steps, each tensor coloured by the
#    size of its gradient (`show="grad"`): it shrinks about fourfold with
#    every step back in time, the vanishing gradient, plain to see;
# 5. `gradient_graph`: the gradient of tanh(w·x), taken with
#    `create_graph=True`, is itself a graph of ops: the backward pass. Its
#    ops are coloured by the pass that recorded them, forward or VJP;
# 6. `backward_steps.html`: the neuron's backward pass frame by frame
#    (`viz.backward_steps`), the order the engine visits the tensors and the
#    gradient arriving at each, with buttons to step through it.
#
# Each graph is written as DOT source (`.gv`) and, when Graphviz's `dot` is
# installed, rendered to `.svg`. `viz.print_graph` prints the first one as text.
#
# Each `# %%` line starts a cell: the cells define the five graphs, and the last
# one draws them (open the file in Jupyter with jupytext or in VS Code to run it
# cell by cell, or run it whole as a script).

# %%
import math
import shutil
from pathlib import Path

import numpy as np

import minigrad as mg
from demos._common import parse_args, show
from minigrad import nn, viz

# %% [markdown]
# ## 1. A scalar expression
#
# Every node holds one number; after `backward()` each also has its gradient,
# d out / d node.

# %%
def scalar_expression():
    """tanh(x1*w1 + x2*w2 + b): every node a number, as in micrograd's draw_dot."""
    x1, x2 = mg.tensor(2.0, name="x1"), mg.tensor(0.0, name="x2")  # inputs: no gradient needed
    w1 = mg.tensor(-3.0, requires_grad=True, name="w1")
    w2 = mg.tensor(1.0, requires_grad=True, name="w2")
    b = mg.tensor(6.8813735870195432, requires_grad=True, name="b")  # makes the output a round 0.7071
    x1w1 = x1 * w1
    x2w2 = x2 * w2
    n = x1w1 + x2w2 + b
    out = n.tanh()
    for t, name in [(x1w1, "x1*w1"), (x2w2, "x2*w2"), (n, "n"), (out, "out")]:
        t.name = name
    return out, viz.draw_graph(out, show="data")


# %% [markdown]
# ## 2. One causal attention head
#
# Four tokens of width 8, projections to width 4; the mask `future` keeps each
# token from looking ahead. Named tensors (`q`, `scores`, `weights`...) carry
# their names into the picture.

# %%
def attention_head(rng: np.random.Generator):
    """softmax(q k^T / sqrt(d), causal) v for one head over T=4 tokens, from Tensor ops."""
    T, C, d = 4, 8, 4
    x = mg.tensor(rng.standard_normal((T, C)).astype(np.float32), name="x")
    W_q, W_k, W_v = (mg.tensor(rng.standard_normal((C, d)).astype(np.float32) / math.sqrt(C), requires_grad=True)
                     for _ in range(3))
    q, k, v = x @ W_q, x @ W_k, x @ W_v  # (T, d) each
    scores = (q @ k.T) * (1 / math.sqrt(d))  # (T, T): how much each token attends to each other
    future = mg.tensor(np.triu(np.ones((T, T), dtype=bool), k=1), name="future")  # a token may not look ahead
    weights = scores.masked_fill(future, -np.inf).softmax(axis=-1)  # (T, T), rows sum to 1
    out = weights @ v  # (T, d)
    for t, name in [(q, "q"), (k, "k"), (v, "v"), (scores, "scores"), (weights, "weights"), (out, "out")]:
        t.name = name
    return out, viz.draw_graph(out, params={"W_q": W_q, "W_k": W_k, "W_v": W_v})


# %% [markdown]
# ## 3. A transformer block from minigrad.nn
#
# No names given by hand: the parameters are named from
# `block.named_parameters()`, and each module call becomes a labelled cluster.

# %%
def transformer_block(rng: np.random.Generator):
    """A causal pre-norm block from minigrad.nn: each module it calls becomes a labelled cluster."""
    block = nn.TransformerBlock(d_model=16, n_heads=2, causal=True, rng=rng)
    x = mg.tensor(rng.standard_normal((2, 5, 16)).astype(np.float32), name="x")  # (B, T, d_model)
    out = block(x)
    # Parameters are named from block.named_parameters() without being passed; TB suits a deep stack.
    return out, viz.draw_graph(out, rankdir="TB")


# %% [markdown]
# ## 4. An RNN unrolled over 6 steps, coloured by gradient
#
# The loss reads only the last state, so every gradient flows back through the
# same W, step by step; the colour of each h_t is the norm of d loss / d h_t.

# %%
def unrolled_rnn(rng: np.random.Generator, steps: int = 6, d: int = 8):
    """h_t = tanh(W h_(t-1) + U x_t); the loss reads only the last state, so gradients flow back through W."""
    W = mg.tensor(rng.normal(0, 0.5 / math.sqrt(d), (d, d)).astype(np.float32), requires_grad=True)
    U = mg.tensor(rng.normal(0, 1 / math.sqrt(d), (d, d)).astype(np.float32), requires_grad=True)
    h = mg.zeros(d, requires_grad=True)
    h.name = "h0"
    for t in range(1, steps + 1):
        x = mg.tensor(rng.standard_normal(d).astype(np.float32), name=f"x{t}")
        h = (W @ h + U @ x).tanh()
        h.name = f"h{t}"
    loss = (h * h).sum()
    loss.name = "loss"
    return loss, viz.draw_graph(loss, params={"W": W, "U": U}, show="grad", rankdir="TB")


# %% [markdown]
# ## 5. The backward pass, drawn
#
# `mg.grad(y, [w], create_graph=True)` records the backward pass as it runs
# it: each op's VJP is made of ops from the table, so the gradient is a tensor
# with a graph of its own. For y = tanh(w·x) it is dy/dw = (1 - y²) x: tanh's
# VJP multiplies by 1 - y*y (reading y, a forward result), the dot product's
# VJP by x. In the picture the forward ops are grey and the VJPs pink.

# %%
def gradient_graph(rng: np.random.Generator, d: int = 3):
    """dy/dw for y = tanh(w·x), computed with create_graph=True, and the graph of that gradient."""
    w = mg.tensor(rng.standard_normal(d).astype(np.float32), requires_grad=True, name="w")
    x = mg.tensor(rng.standard_normal(d).astype(np.float32), name="x")
    y = (w @ x).tanh()  # w·x: a scalar
    y.name = "y"
    (dy_dw,) = mg.grad(y, [w], create_graph=True)  # a Tensor recorded op by op, so it could be differentiated again
    dy_dw.name = "dy/dw"
    by_hand = (1 - y.item() ** 2) * x.numpy()
    print(f"dy/dw = {np.round(dy_dw.numpy(), 4)}; (1 - y^2) x by hand = {np.round(by_hand, 4)}")
    return dy_dw, viz.draw_graph(dy_dw)


# %% [markdown]
# ## 6. The backward pass, step by step
#
# `viz.backward_steps(out)` runs one backward pass of the neuron (leaving
# `.grad` alone) and records it as it happens: which tensor the engine visits
# next, its gradient, now complete, and the share it hands each of its inputs.
# In a notebook it shows a slider over the frames; `save_html` writes the same
# stepper as one page for a browser, and `text()` prints it.

# %%
def stepping():
    """The scalar neuron's backward pass as frames."""
    out, _ = scalar_expression()  # a fresh graph: backward_steps records before backward() frees it
    steps = viz.backward_steps(out)
    print(steps.frame_text(1))  # the first visit: d out / d out = 1, handed to tanh's input
    print(steps.frame_text(len(steps) - 1))
    return steps


# %% [markdown]
# ## Draw them
#
# `--out DIR` chooses the folder (default `out/draw_graphs`, not tracked by git).

# %%
def main(argv=None) -> dict[str, Path]:
    args = parse_args(argv, "draw_graphs", "Draw five computation graphs with minigrad.viz.")

    scalar_out, scalar_graph = scalar_expression()
    graphs = {
        "scalar_expression": scalar_graph,
        "attention_head": attention_head(np.random.default_rng(0))[1],
        "transformer_block": transformer_block(np.random.default_rng(0))[1],
        "rnn_unrolled": unrolled_rnn(np.random.default_rng(0))[1],
        "gradient_graph": gradient_graph(np.random.default_rng(0))[1],
    }
    viz.print_graph(scalar_out, show="data")
    print()

    can_render = shutil.which("dot") is not None
    written = {}
    for name, graph in graphs.items():
        written[name] = Path(viz.save(graph, args.out / f"{name}.gv"))
        if can_render:
            written[name] = Path(viz.save(graph, args.out / f"{name}.svg"))
        print(f"wrote {written[name]}")
        show(graph)  # inline, in a notebook
    steps = stepping()
    written["backward_steps"] = Path(steps.save_html(args.out / "backward_steps.html"))
    print(f"wrote {written['backward_steps']} (open it in a browser and press next)")
    show(steps)
    if not can_render:
        print(f"(only the .gv sources: {viz.dot.INSTALL_HINT} to get SVGs)")
    return written


# %%
if __name__ == "__main__":  # a script, or a Jupyter kernel; not when imported
    main()
