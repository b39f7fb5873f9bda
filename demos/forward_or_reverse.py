# %% [markdown]
# # Forward or reverse mode: two ways to differentiate, and when each one is cheaper
#
#     python -m demos.forward_or_reverse [--out DIR]
#
# A lesson written as cells (`# %%`): open it in Jupyter or VS Code and run it
# cell by cell, or run the whole file as above (the README's lesson table has its time). Like a
# notebook, the file does its work at the top level: it is meant to be run, not
# imported.
#
# For f: R^n -> R^m the Jacobian J is m x n. Reverse mode (``mg.vjp``) gives one
# row combination u^T J per backward pass; forward mode (``mg.jvp``) gives one
# column combination J t per pushed tangent. The lesson:
#
# 1. builds one Jacobian both ways, and checks both against finite differences;
# 2. times both as n and m vary, and finds where they cross (drawn to
#    ``forward_or_reverse.png`` in ``--out``);
# 3. takes a Hessian-vector product of a small network's loss without building
#    the Hessian, checked against finite differences of gradients;
# 4. measures an RNN's d h_T / d h_0 column by column and row by row.

# %%
# Set-up. The command line has two options: --out, the folder for the plot, and
# --repeats, how many times each timing is taken (the fastest counts). In a
# notebook the kernel adds arguments of its own, so unknown ones are ignored.
# The timings run on one BLAS thread: on a machine busy with other work, a
# thread pool that waits for a core makes one run ten times slower than the
# next, and the fastest of a few single-threaded runs is the steady number.
import argparse
import time
from pathlib import Path

import numpy as np

import minigrad as mg
from demos._common import counting_matmul_flops, out_folder, show
from minigrad import nn
from minigrad.kernels import policy
from minigrad.nn import functional as F

parser = argparse.ArgumentParser(prog="python -m demos.forward_or_reverse",
                                 description="Forward or reverse mode: when each one is cheaper.")
parser.add_argument("--out", type=Path, default=out_folder("forward_or_reverse"),
                    help="folder for the plot (default: %(default)s)")
parser.add_argument("--repeats", type=int, default=5, help="runs per timing; the fastest counts (default: 5)")
args, _ = parser.parse_known_args()
if args.repeats < 1:
    parser.error("--repeats must be at least 1")
policy.set_threads(1)  # (MINIGRAD_THREADS=N still overrides it)


def central_differences(fn, x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """d fn(x) / d x, of shape fn(x).shape + x.shape, one perturbed input element at a time (float64)."""
    columns = []
    with mg.no_grad():  # no graph needed: only values
        for k in range(x.size):
            step = np.zeros(x.size)
            step[k] = eps
            step = step.reshape(x.shape)
            columns.append((fn(mg.tensor(x + step)).data - fn(mg.tensor(x - step)).data).reshape(-1) / (2 * eps))
        return np.stack(columns, axis=-1).reshape(fn(mg.tensor(x)).shape + x.shape)


# %% [markdown]
# ## 1. One Jacobian, two ways
#
# A small map from R^5 to R^3: f(x) = tanh(A tanh(B x)). Forward mode pushes the
# unit vector e_j through and gets column j of J; reverse mode pulls the unit
# vector e_i back and gets row i. Five pushes or three pulls: the same matrix.

# %%
rng = np.random.default_rng(0)  # each section seeds its own draws, so its cells can be rerun alone
n_small, m_small = 5, 3
A, B = rng.standard_normal((m_small, 4)), rng.standard_normal((4, n_small))


def small_map(x):
    return (mg.tensor(A) @ (mg.tensor(B) @ x).tanh()).tanh()


x_small = rng.standard_normal(n_small)
eye_in, eye_out = np.eye(n_small), np.eye(m_small)
by_columns = np.stack([mg.jvp(small_map, mg.tensor(x_small), mg.tensor(e))[1].data for e in eye_in], axis=1)
_, pullback = mg.vjp(small_map, mg.tensor(x_small))
by_rows = np.stack([pullback(mg.tensor(e))[0].data for e in eye_out], axis=0)
both_ways_difference = float(np.abs(by_columns - by_rows).max())
small_fd_error = float(np.abs(by_rows - central_differences(small_map, x_small)).max())
print(f"J of f: R^{n_small} -> R^{m_small} built from {n_small} jvps (columns) and from {m_small} vjps (rows): "
      f"largest |difference| between the two {both_ways_difference:.1e}")
print(f"The same Jacobian against central finite differences (each x_j perturbed by +-1e-6): "
      f"largest |difference| {small_fd_error:.1e}")

# %% [markdown]
# ## 2. Which is cheaper?
#
# A whole Jacobian costs n pushes forward or m pulls back, after one forward
# pass. minigrad's forward mode is *double backward* (see minigrad/autograd/functional.py):
# the backward pass g(u) = J^T u is linear in u, so differentiating it with
# respect to u pushes a tangent forward. ``mg.jacobian(..., mode="forward")``
# records that backward pass once and then pushes one unit tangent per column.
#
# First, what one of each costs compared with a forward pass, on
# F(X) = tanh(X W1) W2 with X, W1 and W2 all 256 x 256: big enough that the
# arithmetic, not Python, sets the time. Two measures: seconds (the fastest of
# a few runs), and the work done, counted as the flops of the matrix products
# (``counting_matmul_flops``), which no other program on the machine can change.


# %%
def best_time(fn) -> float:
    """The fastest of ``--repeats`` runs, in seconds: the least disturbed by whatever else the machine does."""
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


rng = np.random.default_rng(1)
N = 256
W1, W2 = (mg.tensor(rng.standard_normal((N, N)) / np.sqrt(N)) for _ in range(2))


def big_map(X):
    return (X @ W1).tanh() @ W2


def flops(fn) -> int:
    """The flops of the matrix products one call of ``fn`` runs."""
    with counting_matmul_flops() as count:
        fn()
    return count[0]


X_big, T_big, U_big = (mg.tensor(rng.standard_normal((N, N))) for _ in range(3))
_, push = mg.linearize(big_map, X_big)
costs = {  # name -> (what it does, the call)
    "forward": ("One forward pass of F (graph recorded)", lambda: big_map(X_big.detach().requires_grad_())),
    "vjp": ("One vjp (forward, then a backward pass)", lambda: mg.vjp(big_map, X_big)[1](U_big)),
    "jvp": ("One jvp (forward, recorded backward, backward of the backward)", lambda: mg.jvp(big_map, X_big, T_big)),
    "push": ("One more tangent through mg.linearize (only the backward of the backward)", lambda: push(T_big)),
}
work = {name: flops(fn) for name, (_, fn) in costs.items()}
seconds = {name: best_time(fn) for name, (_, fn) in costs.items()}
print(f"One forward pass of F: {work['forward'] / 1e6:.0f} Mflop of matrix products, "
      f"{seconds['forward'] * 1e3:.1f} ms (best of {args.repeats}, one thread)")
for name in ("vjp", "jvp", "push"):
    print(f"{costs[name][0]}: {work[name] / work['forward']:.1f}x its work, "
          f"{seconds[name] / seconds['forward']:.1f}x its time")


def wide_map(n: int, m: int, hidden: int = 256, seed: int = 1):
    """x (n,) -> W2 tanh(W1 x) (m,), weights scaled so tanh is neither saturated nor linear."""
    r = np.random.default_rng(seed)
    A1 = mg.tensor(r.standard_normal((hidden, n)) / np.sqrt(n))
    A2 = mg.tensor(r.standard_normal((m, hidden)) / np.sqrt(hidden))
    return lambda x: A2 @ (A1 @ x).tanh()


# %% [markdown]
# Now whole Jacobians: n fixed at 32 while m grows, then m fixed at 32 while n
# grows. Reverse mode's cost follows m, forward mode's follows n. Where the two
# curves cross, the cheaper mode changes.

# %%
FIXED = 32
SIZES = (4, 8, 16, 32, 64, 128)


def jacobian_times(n: int, m: int) -> tuple[float, float]:
    fn, x = wide_map(n, m), mg.tensor(np.random.default_rng(2).standard_normal(n))
    return (best_time(lambda: mg.jacobian(fn, x, mode="forward")),
            best_time(lambda: mg.jacobian(fn, x, mode="reverse")))


def crossing(sizes, forward_times, reverse_times) -> float | None:
    """The size where reverse - forward changes sign, interpolated on log axes (None if it never does)."""
    gap = np.log(np.array(reverse_times)) - np.log(np.array(forward_times))
    for k in range(len(sizes) - 1):
        if gap[k] == 0:
            return float(sizes[k])
        if gap[k] * gap[k + 1] < 0:
            s = gap[k] / (gap[k] - gap[k + 1])
            return float(np.exp(np.log(sizes[k]) + s * (np.log(sizes[k + 1]) - np.log(sizes[k]))))
    return None


vary_m = [jacobian_times(FIXED, m) for m in SIZES]
vary_n = [jacobian_times(n, FIXED) for n in SIZES]
print(f"Whole Jacobians, best of {args.repeats}, with n = {FIXED} inputs fixed; m = number of outputs:")
for m, (fwd, rev) in zip(SIZES, vary_m):
    print(f"  m = {m:>3}: forward mode ({FIXED} pushes) {fwd * 1e3:6.1f} ms   "
          f"reverse mode ({m} pulls) {rev * 1e3:6.1f} ms")
print(f"Whole Jacobians, best of {args.repeats}, with m = {FIXED} outputs fixed; n = number of inputs:")
for n, (fwd, rev) in zip(SIZES, vary_n):
    print(f"  n = {n:>3}: forward mode ({n} pushes) {fwd * 1e3:6.1f} ms   "
          f"reverse mode ({FIXED} pulls) {rev * 1e3:6.1f} ms")
m_cross = crossing(SIZES, *zip(*vary_m))
n_cross = crossing(SIZES, *zip(*vary_n))
for name, fixed_name, at in (("m", "n", m_cross), ("n", "m", n_cross)):
    if at is None:
        print(f"With {fixed_name} = {FIXED}, the two modes did not cross for {name} in {SIZES[0]}..{SIZES[-1]}")
    else:
        print(f"With {fixed_name} = {FIXED}, the two modes cost the same at {name} = {at:.0f}: "
              f"reverse mode is cheaper on the {'smaller' if name == 'm' else 'larger'} side")


# %%
def plot(out_dir: Path) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: the plot is skipped (pip install matplotlib to draw it)")
        return None
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, runs, name, fixed_name, at in ((axes[0], vary_m, "m (outputs)", "n", m_cross),
                                            (axes[1], vary_n, "n (inputs)", "m", n_cross)):
        fwd, rev = (np.array(t) * 1e3 for t in zip(*runs))
        ax.loglog(SIZES, fwd, "o-", color="tab:blue", label="forward mode: a push per input")
        ax.loglog(SIZES, rev, "s-", color="tab:red", label="reverse mode: a pull per output")
        if at is not None:
            ax.axvline(at, color="grey", ls="--", lw=1)
            ax.text(at, ax.get_ylim()[0], f" cross at {at:.0f}", va="bottom", color="grey")
        ax.set_xticks(SIZES, [str(size) for size in SIZES])
        ax.minorticks_off()
        ax.set_xlabel(name)
        ax.set_title(f"Whole Jacobian, {fixed_name} = {FIXED} fixed")
        ax.grid(True, which="major", alpha=0.3)
    axes[0].set_ylabel(f"time (ms, best of {args.repeats})")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="lower center", ncol=2, bbox_to_anchor=(0.5, -0.08))
    show(fig)  # inline, in a notebook
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "forward_or_reverse.png"
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    print(f"Saved the timing plot to {path}")
    return path


plot_path = plot(args.out)

# %% [markdown]
# ## 3. A Hessian-vector product, without the Hessian
#
# The loss of a small network (2 inputs -> 8 tanh units -> 1 output, squared
# error on 16 points) as a function of its four parameter tensors. ``mg.hvp``
# records the gradient and differentiates it once more against v: H v for about
# the cost of two gradients, and no 33 x 33 Hessian. The check: the gradient at
# w + eps v minus the gradient at w - eps v, over 2 eps.

# %%
rng = np.random.default_rng(2)
layers = [nn.Linear(2, 8, rng=np.random.default_rng(3)).double(),
          nn.Linear(8, 1, rng=np.random.default_rng(4)).double()]
params = tuple(p.detach() for layer in layers for p in (layer.weight, layer.bias))  # W1 (8,2) b1 (8,) W2 (1,8) b2
points = rng.uniform(-1, 1, (16, 2))
targets = np.sin(3 * points[:, :1]) * points[:, 1:]  # something the network has to bend to fit


def network_loss(W1, b1, W2, b2):
    prediction = F.linear(F.linear(mg.tensor(points), W1, b1).tanh(), W2, b2)  # (16, 1)
    return ((prediction - mg.tensor(targets)) ** 2).mean()


def gradient(*ps):
    return mg.vjp(network_loss, *ps)[1](mg.tensor(1.0, dtype=np.float64))


v = tuple(mg.tensor(rng.standard_normal(p.shape)) for p in params)
loss_value, Hv = mg.hvp(network_loss, params, v)
eps = 1e-5
plus = gradient(*(p + eps * d for p, d in zip(params, v)))
minus = gradient(*(p - eps * d for p, d in zip(params, v)))
fd_Hv = np.concatenate([((a - b) / (2 * eps)).data.ravel() for a, b in zip(plus, minus)])
Hv_flat = np.concatenate([h.data.ravel() for h in Hv])
hvp_fd_error = float(np.linalg.norm(Hv_flat - fd_Hv) / np.linalg.norm(Hv_flat))
n_params = sum(p.size for p in params)
print(f"Loss of the 2-8-1 network on 16 points: {loss_value.item():.4f} (mean squared error)")
print(f"H v over its {n_params} parameters, v a random direction: 2-norm {np.linalg.norm(Hv_flat):.4f}")
print(f"H v against finite differences of gradients (parameters moved by +-{eps} v): "
      f"relative 2-norm error {hvp_fd_error:.1e}")

# %% [markdown]
# The same product by forward over reverse: push v forward through the gradient
# function (a jvp of a function that itself calls vjp), as JAX's ``hvp`` does.
# With forward mode built from backward passes this is a backward of a backward
# of a backward; it agrees, and is the more expensive route here.

# %%
_, Hv_forward = mg.jvp(gradient, params, v)
forward_over_reverse_difference = float(np.abs(np.concatenate([h.data.ravel() for h in Hv_forward]) - Hv_flat).max())
print(f"H v by forward over reverse against reverse over reverse: largest |difference| "
      f"{forward_over_reverse_difference:.1e}")

# %% [markdown]
# ## 4. An RNN's d h_T / d h_0, column by column and row by row
#
# h_t = tanh(x_t W_ih^T + h_{t-1} W_hh^T) with 16 hidden units (``nn.RNNCell``),
# run over T random inputs from h_0. Its Jacobian d h_T / d h_0 is 16 x 16, so
# both modes need 16 passes; they must agree, and the Frobenius norm shows the
# gradient through time vanishing as T grows.

# %%
HIDDEN, STEPS = 16, (1, 5, 10, 20)
cell = nn.RNNCell(HIDDEN, HIDDEN, bias=False, rng=np.random.default_rng(5)).double()
sequence = np.random.default_rng(6).standard_normal((max(STEPS), 1, HIDDEN))
h0 = np.random.default_rng(7).normal(0, 0.5, (1, HIDDEN))


def h_T(h, T):
    for x_t in sequence[:T]:
        h = cell(mg.tensor(x_t), h)
    return h


rnn_norms = {}
for T in STEPS:
    forward = mg.jacobian(lambda h, T=T: h_T(h, T), mg.tensor(h0), mode="forward").data.reshape(HIDDEN, HIDDEN)
    reverse = mg.jacobian(lambda h, T=T: h_T(h, T), mg.tensor(h0), mode="reverse").data.reshape(HIDDEN, HIDDEN)
    rnn_norms[T] = (float(np.linalg.norm(forward)), float(np.linalg.norm(reverse)),
                    float(np.abs(forward - reverse).max()))
    print(f"After {T:>2} steps, Frobenius norm of d h_T / d h_0: forward mode {rnn_norms[T][0]:.3e}, "
          f"reverse mode {rnn_norms[T][1]:.3e} (largest |difference| {rnn_norms[T][2]:.1e})")
rnn_fd_error = float(np.abs(mg.jacobian(lambda h: h_T(h, 5), mg.tensor(h0), mode="forward").data
                            - central_differences(lambda h: h_T(h, 5), h0)).max())
print(f"Forward-mode d h_5 / d h_0 against central finite differences (each h_0 entry perturbed by +-1e-6): "
      f"largest |difference| {rnn_fd_error:.1e}")

# %% [markdown]
# ## What to take away
#
# * Reverse mode pays per output, forward mode per input: a loss (m = 1) wants
#   reverse mode, a single direction through many outputs wants forward mode.
# * Built by double backward, one jvp from scratch costs more than one vjp (the
#   work and timings in section 2). A whole Jacobian hides most of that: forward mode
#   records the backward pass once and then each column is only a backward of
#   the backward, about what a pull costs, so the crossing sits near m = n.
# * Hessian-vector products are cheap; Hessians are n of them.
