# %% [markdown]
# # Data parallelism from scratch: workers, a ring all-reduce, and ZeRO
#
#     python -m demos.data_parallel_lesson [--out DIR]
#     (draws data_parallel.png into DIR, default out/data_parallel_lesson)
#
# Training on several GPUs usually means *data parallelism*: every worker holds
# a replica of the model, takes its own share of the batch, computes the
# gradient of that share, and then the workers add their gradients up, so that
# every replica makes the same update. Here the workers are simulated in one
# process (each a replica and a shard of the batch), and the one piece of
# communication is written out: the ring all-reduce. What you will see:
#
# 1. four workers, each with its quarter of the batch and its own gradient;
# 2. the ring all-reduce step by step on a vector of 8 numbers (reduce-scatter,
#    then all-gather), then on the GPT's gradients with every byte each worker
#    sends counted: 2 (N - 1) / N times the gradient's size, whatever N;
# 3. the summed gradient equal, in float64 to 1e-12, to one worker's gradient
#    accumulation over the same batch, and to the project's own `--grad-accum`
#    (`demos.train_charlm.accumulate_gradients`);
# 4. ZeRO-1: AdamW's two moments sharded across the workers, each updating its
#    slice of the parameters: the same 20-step trajectory as plain AdamW, and
#    the optimizer memory per worker divided by N, measured;
# 5. what PyTorch's DistributedDataParallel does differently: it averages
#    (each worker's mean loss, the all-reduce divided by N), which is wrong on
#    unequal shards, measured; it all-reduces the gradients in buckets, filled
#    in reverse order while backward continues (simulated, the overlap
#    counted); `no_sync` for accumulation; the ring's latency term;
# 6. ZeRO further: clipping by the global norm when each worker holds a slice,
#    ZeRO-2 (each worker keeps only its slice of the gradient), and the
#    mixed-precision budget (2 + 2 + 12 bytes per parameter) under which ZeRO-1
#    saves nearly 4 times.
#
# Each `# %%` line starts a cell: open the file in Jupyter (with jupytext) or VS
# Code to run it cell by cell, or run it whole as a script.

# %%
import copy

import numpy as np

import minigrad as mg
from demos._common import parse_args, pyplot, save_figure
from demos.train_charlm import accumulate_gradients
from minigrad import optim
from models.gpt import GPT, GPTConfig

args = parse_args(None, "data_parallel_lesson", "Data parallelism from scratch: a ring all-reduce and ZeRO-1.")
np.set_printoptions(precision=1, suppress=True, linewidth=120)

CONFIG = GPTConfig(vocab_size=32, block_size=16, n_layer=2, n_head=2, d_model=32)
N_WORKERS, BATCH = 4, 8  # 8 sequences, 2 per worker


def make_model() -> GPT:
    return GPT(CONFIG, seed=0).to(np.float64)  # float64: equalities to 1e-12


def batch(seed: int):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 32, (BATCH, 16)), rng.integers(0, 32, (BATCH, 16))


# %% [markdown]
# ## 1. Workers: a replica each, and a shard of the batch
#
# The loss of the batch is the mean over its 8 sequences; a worker holding 2 of
# them computes the mean over its 2 and weighs it by its share, 2/8, so that the
# workers' gradients *add up* to the batch's gradient. Each gradient is then laid
# out as one flat vector (all parameters end to end), the buffer the
# communication works on.

# %%
model = make_model()
replicas = [copy.deepcopy(model) for _ in range(N_WORKERS)]
params = list(model.parameters())
n_params = sum(p.data.size for p in params)


def flat_grad(m: GPT) -> np.ndarray:
    return np.concatenate([p.grad.data.ravel() for p in m.parameters()])


def local_gradients(replicas, x, y) -> list[np.ndarray]:
    """Each worker's gradient of its shard's loss, weighted by the shard's share of the batch."""
    grads = []
    for replica, xs, ys in zip(replicas, np.array_split(x, len(replicas)), np.array_split(y, len(replicas))):
        replica.zero_grad()
        _, loss = replica(xs, ys)
        (loss * (len(xs) / len(x))).backward()
        grads.append(flat_grad(replica))
    return grads


x, y = batch(0)
local = local_gradients(replicas, x, y)
print(f"{N_WORKERS} workers, {BATCH // N_WORKERS} sequences each; gradient vector: {n_params:,} float64 numbers "
      f"({n_params * 8:,} bytes)")
print("Euclidean norm of each worker's gradient:", " ".join(f"{np.linalg.norm(g):.4f}" for g in local))

# %% [markdown]
# ## 2. The ring all-reduce, step by step
#
# The workers sit on a ring; each sends only to the next one. The vector is cut
# into N chunks. *Reduce-scatter*: at step s, worker i sends its chunk
# (i - s) mod N to worker i + 1, which adds it to its own. After N - 1 steps
# worker i holds the complete sum of chunk (i + 1) mod N. *All-gather*: N - 1
# more steps pass the finished chunks around the ring, each worker overwriting
# its copy. Every worker sends 2 (N - 1) chunks of size/N: 2 (N - 1)/N times the
# vector, nearly twice the vector however many workers there are. That is why
# the ring is the all-reduce of choice: each link carries the same, bounded load.
#
# On 8 numbers and 4 workers (chunks of 2), each worker's buffer after each step:

# %%
def ring_reduce_scatter(buffers: list[np.ndarray], send, trace=None) -> None:
    """In place: afterwards worker i holds the sum over all workers of chunk (i + 1) mod n of its buffer.

    ``send(src, dst, array)`` delivers a copy of ``array`` from worker src to worker dst (the next on the ring),
    as a network would, and counts its bytes: the only way data moves between workers.
    """
    n = len(buffers)
    chunks = [np.array_split(b, n) for b in buffers]  # views: adding into a chunk writes the buffer
    for step in range(n - 1):
        messages = [send(i, (i + 1) % n, chunks[i][(i - step) % n]) for i in range(n)]  # all send at once
        for i in range(n):
            chunks[(i + 1) % n][(i - step) % n] += messages[i]
        if trace:
            trace(f"reduce-scatter {step + 1}")


def ring_all_gather(buffers: list[np.ndarray], send, trace=None) -> None:
    """In place: worker i starts with chunk (i + 1) mod n final; afterwards every worker holds every chunk."""
    n = len(buffers)
    chunks = [np.array_split(b, n) for b in buffers]
    for step in range(n - 1):
        messages = [send(i, (i + 1) % n, chunks[i][(i + 1 - step) % n]) for i in range(n)]
        for i in range(n):
            chunks[(i + 1) % n][(i + 1 - step) % n][...] = messages[i]
        if trace:
            trace(f"all-gather {step + 1}")


def ring_all_reduce(buffers: list[np.ndarray], send, trace=None) -> None:
    """Every worker's buffer becomes the sum of all of them: reduce-scatter, then all-gather."""
    ring_reduce_scatter(buffers, send, trace)
    ring_all_gather(buffers, send, trace)


class Network:
    """Delivers copies between ring neighbours and counts the bytes each worker sends."""

    def __init__(self, n: int):
        self.sent = [0] * n

    def send(self, src: int, dst: int, array: np.ndarray) -> np.ndarray:
        assert dst == (src + 1) % len(self.sent), "a ring sends only to the next worker"
        self.sent[src] += array.nbytes
        return array.copy()


toy = [np.array([1.0, 2, 3, 4, 5, 6, 7, 8]) * 10 ** i for i in range(4)]  # worker i: (1..8) * 10^i
def show(what: str) -> None:
    print(f"{what:<16}", " | ".join(" ".join(f"{int(v):4d}" for v in b) for b in toy))


show("start")
ring_all_reduce(toy, Network(4).send, trace=show)
print("every worker holds the sum (1..8) * 1111:", all(np.array_equal(b, np.arange(1, 9) * 1111.0) for b in toy))

# %% [markdown]
# Now the GPT's gradients, every byte counted:

# %%
buffers = [g.copy() for g in local]
network = Network(N_WORKERS)
ring_all_reduce(buffers, network.send)
formula = 2 * (N_WORKERS - 1) / N_WORKERS * n_params * 8
print(f"bytes sent by each worker: {network.sent}")
print(f"formula 2 (N - 1) / N x size: {formula:,.0f} bytes per worker; all workers together "
      f"{sum(network.sent):,} = 2 (N - 1) x size = {2 * (N_WORKERS - 1) * n_params * 8:,}")
print("every worker ends with the same vector, bit for bit:", all(np.array_equal(b, buffers[0]) for b in buffers))

# %% [markdown]
# ## 3. The same gradient as one worker with gradient accumulation
#
# One worker can compute the same sum alone: run the four shards one after
# another and let backward add their weighted gradients in `.grad`. That is
# gradient accumulation, what `--grad-accum 4` does in the training demo
# (`accumulate_gradients` there); the all-reduce is the same sum, computed by
# four workers at once. The sums are added in a different order, so they agree
# to rounding, not bit for bit.

# %%
single = make_model()
single.zero_grad()
for xs, ys in zip(np.array_split(x, N_WORKERS), np.array_split(y, N_WORKERS)):
    _, loss = single(xs, ys)
    (loss * (len(xs) / len(x))).backward()
accumulated = flat_grad(single)

project = make_model()
project_loss = accumulate_gradients(project, x, y, N_WORKERS)  # the training demo's --grad-accum
from_project = flat_grad(project)

whole = make_model()
_, whole_loss = whole(x, y)
whole_loss.backward()
all_reduce_vs_accumulation = float(np.abs(buffers[0] - accumulated).max())
all_reduce_vs_project = float(np.abs(buffers[0] - from_project).max())
all_reduce_vs_whole_batch = float(np.abs(buffers[0] - flat_grad(whole)).max())
print(f"largest |all-reduced gradient - one worker accumulating 4 micro-batches|: {all_reduce_vs_accumulation:.1e}")
print(f"largest |all-reduced gradient - train_charlm's accumulate_gradients(.., 4)|: {all_reduce_vs_project:.1e}")
print(f"largest |all-reduced gradient - the whole batch in one pass|: {all_reduce_vs_whole_batch:.1e}")

# %% [markdown]
# ## 4. ZeRO-1: shard the optimizer's state
#
# Data parallelism replicates everything: each worker holds the parameters,
# the gradients and AdamW's two moments, 4 copies of the model. But AdamW's
# update is elementwise, so no worker needs the moments of parameters it does
# not update. ZeRO stage 1 gives each worker one N-th of the flat parameter
# vector to own: after the reduce-scatter (the first half of the ring) a worker
# holds the summed gradient of exactly its chunk; it runs AdamW on that chunk
# alone, with moments for that chunk alone, and the all-gather (the second half)
# sends the updated parameters around instead of the gradients. The traffic is
# the same as the all-reduce's; the optimizer memory per worker is divided by N.
#
# 20 steps, against replicated data parallelism (every worker running
# `optim.AdamW` on its whole replica with the all-reduced gradient: the same
# numbers, elementwise, so the same bits) and against one model trained with
# `optim.AdamW` on the whole batch (the gradients summed in another order: equal
# to rounding):

# %%
STEPS, LR, WEIGHT_DECAY = 20, 3e-3, 0.1


def flat_params(m: GPT) -> np.ndarray:
    return np.concatenate([p.data.ravel() for p in m.parameters()])


def set_flat_params(m: GPT, flat: np.ndarray) -> None:
    offset = 0
    with mg.no_grad():  # an update in place, as an optimizer's: counted on each weight's version
        for p in m.parameters():
            p.copy_(mg.tensor(flat[offset:offset + p.numel()].reshape(p.shape)))
            offset += p.numel()


def train_plain(steps: int) -> list[np.ndarray]:
    m = make_model()
    opt = optim.AdamW(m.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    trajectory = []
    for step in range(steps):
        m.zero_grad()
        _, loss = m(*batch(step))
        loss.backward()
        opt.step()
        trajectory.append(flat_params(m))
    return trajectory


def train_replicated(steps: int, n: int) -> list[np.ndarray]:
    """Plain data parallelism: n replicas, each with the whole AdamW state, stepping on the all-reduced gradient."""
    workers = [make_model() for _ in range(n)]
    optimizers = [optim.AdamW(w.parameters(), lr=LR, weight_decay=WEIGHT_DECAY) for w in workers]
    network, trajectory = Network(n), []
    for step in range(steps):
        grads = local_gradients(workers, *batch(step))
        ring_all_reduce(grads, network.send)
        for worker, opt, flat in zip(workers, optimizers, grads):
            offset = 0
            for p in worker.parameters():
                p.grad = mg.tensor(flat[offset:offset + p.data.size].reshape(p.shape))
                offset += p.data.size
            opt.step()
        trajectory.append(flat_params(workers[0]))
    return trajectory


def train_zero1(steps: int, n: int):
    """n workers; worker i owns chunk i of the flat parameters and the AdamW moments of that chunk only."""
    workers = [make_model() for _ in range(n)]
    owned = [mg.tensor(chunk.copy(), requires_grad=True) for chunk in np.array_split(flat_params(workers[0]), n)]
    optimizers = [optim.AdamW([p], lr=LR, weight_decay=WEIGHT_DECAY) for p in owned]
    network, trajectory = Network(n), []
    for step in range(steps):
        x, y = batch(step)
        grads = local_gradients(workers, x, y)
        ring_reduce_scatter(grads, network.send)  # worker i now holds the summed chunk (i + 1) mod n
        for i in range(n):
            chunk = (i + 1) % n
            owned[chunk].grad = mg.tensor(np.array_split(grads[i], n)[chunk])
            optimizers[chunk].step()  # AdamW on this chunk alone; its moments live on this worker only
        # All-gather the parameters: worker i sends the chunk it updated around the ring. (Every worker's
        # buffer is filled from all owned chunks here for brevity; only chunk (i + 1) mod n is read from it.)
        new = [np.concatenate([p.data for p in owned]) for _ in range(n)]
        ring_all_gather(new, network.send)
        for worker, flat in zip(workers, new):
            set_flat_params(worker, flat)
        trajectory.append(flat_params(workers[0]))
    state_bytes = [sum(a.nbytes for s in opt.state.values() for a in (s["exp_avg"], s["exp_avg_sq"]))
                   for opt in optimizers]
    return trajectory, workers, state_bytes, network


plain_trajectory = train_plain(STEPS)
replicated_trajectory = train_replicated(STEPS, N_WORKERS)
zero_trajectory, zero_workers, zero_state, zero_network = train_zero1(STEPS, N_WORKERS)
zero_vs_replicated = max(float(np.abs(a - b).max()) for a, b in zip(replicated_trajectory, zero_trajectory))
zero_vs_plain = max(float(np.abs(a - b).max()) for a, b in zip(plain_trajectory, zero_trajectory))
replicas_agree = all(np.array_equal(flat_params(w), flat_params(zero_workers[0])) for w in zero_workers)
print(f"largest |parameter, ZeRO-1 - replicated AdamW on the same all-reduced gradients| over {STEPS} steps: "
      f"{zero_vs_replicated:.1e}")
print(f"largest |parameter, ZeRO-1 - one model, plain AdamW on the whole batch| over {STEPS} steps: "
      f"{zero_vs_plain:.1e}")
print(f"the {N_WORKERS} workers hold the same parameters after every step: {replicas_agree}")
print(f"parameters moved by the training (largest change): "
      f"{float(np.abs(plain_trajectory[-1] - flat_params(make_model())).max()):.3f}")

# %% [markdown]
# Memory per worker, in bytes, measured (each worker's arrays) against the
# formula: replicated, every worker keeps 4 x P x 8 bytes (parameters,
# gradients, two moments, P = the parameter count); with ZeRO-1, 2 x P x 8 +
# 2 x P x 8 / N.

# %%
m0 = make_model()  # a replicated worker: its optimizer after one step
_, loss0 = m0(x, y)
loss0.backward()
plain_opt = optim.AdamW(m0.parameters())
plain_opt.step()
replicated_state = sum(s["exp_avg"].nbytes + s["exp_avg_sq"].nbytes for s in plain_opt.state.values())
weights_and_grads = 2 * n_params * 8
print("                    parameters + gradients   AdamW moments   total per worker   formula")
print(f"replicated          {weights_and_grads:>22,} {replicated_state:>15,} "
      f"{weights_and_grads + replicated_state:>18,} {4 * n_params * 8:>9,}")
for i, state in enumerate(zero_state):
    print(f"ZeRO-1, worker {i}    {weights_and_grads:>22,} {state:>15,} {weights_and_grads + state:>18,} "
          f"{2 * n_params * 8 + 2 * n_params * 8 / N_WORKERS:>9,.0f}")
print(f"bytes each worker sent over the {STEPS} ZeRO-1 steps (reduce-scatter + all-gather): {zero_network.sent}; "
      f"per step {sum(zero_network.sent) / STEPS / N_WORKERS:,.0f} on average, "
      f"= 2 (N - 1) / N x size: {formula:,.0f}")

# %% [markdown]
# ## 5. DistributedDataParallel's conventions
#
# ### The mean, not the sum
#
# DDP does not weigh a worker's loss by its share. Each worker computes the
# loss as usual, the *mean* over its own shard, and the all-reduce *averages*
# the gradients: the sum divided by N. With equal shards the average of the
# workers' means is the mean over the batch, and the gradient is right. With
# unequal shards (the end of an epoch whose size N does not divide) it is not:
# a sequence on a worker with fewer sequences counts more. PyTorch's
# `DistributedSampler` pads the last shards to equal size (or drops them,
# `drop_last=True`) for this reason. Measured on the 8 sequences, split 2 + 2 +
# 2 + 2 and split 5 + 1 + 1 + 1:

# %%
def ddp_gradient(replicas, x, y, sizes) -> np.ndarray:
    """DDP's convention: each worker's mean loss over its shard; the all-reduced sum divided by N."""
    bounds = np.cumsum([0, *sizes])
    grads = []
    for replica, lo, hi in zip(replicas, bounds[:-1], bounds[1:]):
        replica.zero_grad()
        _, loss = replica(x[lo:hi], y[lo:hi])
        loss.backward()
        grads.append(flat_grad(replica))
    ring_all_reduce(grads, Network(len(replicas)).send)
    return grads[0] / len(replicas)


whole_batch_gradient = flat_grad(whole)  # section 3: the whole batch in one pass
ddp_error = {}
for sizes in ((2, 2, 2, 2), (5, 1, 1, 1)):
    g = ddp_gradient(replicas, x, y, sizes)
    ddp_error[sizes] = float(np.linalg.norm(g - whole_batch_gradient) / np.linalg.norm(whole_batch_gradient))
    print(f"shards {sizes}: |DDP's averaged gradient - the batch's| / |the batch's| = {ddp_error[sizes]:.1e}")

# %% [markdown]
# ### Buckets, filled in reverse order, all-reduced while backward continues
#
# Backward produces the gradients last layer first: the reverse of the order
# the parameters were made in (measured below with a hook on every
# parameter). DDP packs them in that order into *buckets* of about 25 MB and
# starts a bucket's all-reduce as soon as its last gradient is ready, while
# backward goes on computing the earlier layers: the communication hides
# behind the computation, and only the last bucket's all-reduce is left when
# backward ends. One all-reduce per bucket, rather than per parameter, also
# means far fewer messages, each paying the link's latency (below).
#
# The simulation: backward's time taken as proportional to the bytes of
# gradient it has produced (one unit for the whole backward pass); each bucket's
# all-reduce takes alpha per message plus beta per byte, on one link, one
# bucket at a time. The numbers (a bucket of 32 KiB here; the all-reduce of the
# whole gradient costing 0.8 of the backward pass) are assumptions; the order,
# the buckets and the overlap follow from them.

# %%
ready_order = []
hooked = make_model()
handles = [p.register_hook(lambda g, i=i: ready_order.append(i)) for i, p in enumerate(hooked.parameters())]
_, hooked_loss = hooked(x, y)
hooked_loss.backward()
for handle in handles:
    handle.remove()
sizes_bytes = [p.data.nbytes for p in params]
print(f"gradients ready in the reverse of model.parameters() order: {ready_order == list(range(len(params)))[::-1]}")

BUCKET_BYTES, ALPHA, COMM_SHARE = 32 * 1024, 0.004, 0.8  # bucket cap; latency per message; all-reduce / backward


def make_buckets(order, cap: int) -> list[list[int]]:
    """Parameters in the order their gradients become ready, cut into buckets of at least ``cap`` bytes."""
    buckets, current, filled = [], [], 0
    for i in order:
        current.append(i)
        filled += sizes_bytes[i]
        if filled >= cap:
            buckets.append(current)
            current, filled = [], 0
    return buckets + ([current] if current else [])


def simulate_overlap(buckets, order, n: int = N_WORKERS) -> dict:
    """When each bucket's all-reduce runs, overlapped with backward, on one link: the timeline's totals."""
    total = sum(sizes_bytes)
    done, ready_at = 0, {}
    for i in order:  # backward's time: the share of the gradient bytes produced so far
        done += sizes_bytes[i]
        ready_at[i] = done / total
    beta = COMM_SHARE / (2 * (n - 1) / n * total)  # per byte: the whole gradient's all-reduce costs COMM_SHARE
    link_free, comm = 0.0, 0.0
    for bucket in buckets:
        took = 2 * (n - 1) * ALPHA + 2 * (n - 1) / n * sum(sizes_bytes[i] for i in bucket) * beta
        link_free = max(link_free, max(ready_at[i] for i in bucket)) + took
        comm += took
    return dict(backward=1.0, communication=comm, after_backward=link_free - 1.0, sequential=1.0 + comm,
                overlapped=link_free, hidden=(1.0 + comm - link_free) / comm)


buckets = make_buckets(ready_order, BUCKET_BYTES)
per_parameter = make_buckets(ready_order, 0)
offsets = np.cumsum([0, *[p.data.size for p in params]])
bucketed = [g.copy() for g in local]  # section 1's gradients, all-reduced bucket by bucket
bucket_network = Network(N_WORKERS)
for bucket in buckets:
    index = np.concatenate([np.arange(offsets[i], offsets[i + 1]) for i in bucket])
    pieces = [g[index] for g in bucketed]
    ring_all_reduce(pieces, bucket_network.send)
    for g, piece in zip(bucketed, pieces):
        g[index] = piece
bucketed_vs_whole = float(np.abs(bucketed[0] - buffers[0]).max())
overlap = simulate_overlap(buckets, ready_order)
no_overlap = simulate_overlap([list(range(len(params)))], ready_order)  # one bucket: all after backward
tiny = simulate_overlap(per_parameter, ready_order)
print(f"{len(buckets)} buckets of >= {BUCKET_BYTES // 1024} KiB (parameters, in ready order): "
      f"{[len(b) for b in buckets]}")
print(f"bucket by bucket vs one all-reduce of the whole vector: largest difference {bucketed_vs_whole:.1e}")
print("                         messages per worker   communication   after backward ends   step   hidden")
for name, sim, count in (("one bucket (no overlap)", no_overlap, 1), (f"{len(buckets)} buckets", overlap, len(buckets)),
                         ("one per parameter", tiny, len(params))):
    print(f"{name:<24} {count * 2 * (N_WORKERS - 1):20d} {sim['communication']:15.2f} {sim['after_backward']:21.2f} "
          f"{sim['overlapped']:6.2f} {sim['hidden']:8.0%}")

# %% [markdown]
# With the buckets, most of the communication runs during backward; one
# bucket for everything waits for backward to end; one all-reduce per
# parameter starts earliest but pays the latency on every message.
#
# ### Accumulation: `no_sync`
#
# DDP all-reduces on every backward. With gradient accumulation over K
# micro-batches that is K all-reduces per step, and only the last is needed:
# the sum is linear, so the workers can add their micro-batches' gradients
# locally and communicate once. `with model.no_sync():` turns the all-reduce
# off for the backwards inside it. Counted, over K = 4 micro-batches of one
# sequence per worker:

# %%
def accumulate(replicas, x, y, k: int, sync_every: bool):
    """Each worker accumulates k micro-batches; all-reduce after each (sync_every) or only after the last."""
    network = Network(len(replicas))
    for replica in replicas:
        replica.zero_grad()
    shards = list(zip(np.array_split(x, len(replicas)), np.array_split(y, len(replicas))))
    summed = [np.zeros(n_params) for _ in replicas]
    for micro in range(k):
        grads = []
        for replica, (xs, ys) in zip(replicas, shards):
            rows = np.array_split(np.arange(len(xs)), k)[micro]
            replica.zero_grad()
            _, loss = replica(xs[rows], ys[rows])
            (loss * (len(rows) / len(x))).backward()
            grads.append(flat_grad(replica))
        if sync_every:  # DDP without no_sync: every backward all-reduces
            ring_all_reduce(grads, network.send)
        summed = [a + g for a, g in zip(summed, grads)]
    if not sync_every:  # no_sync for the first k - 1, then one all-reduce of the local sums
        ring_all_reduce(summed, network.send)
    return summed[0], sum(network.sent) / len(replicas)


(x7, y7), (x8, y8) = batch(7), batch(8)
x16, y16 = np.concatenate([x7, x8]), np.concatenate([y7, y8])  # 16 sequences, 4 per worker
synced, synced_bytes = accumulate(replicas, x16, y16, 4, sync_every=True)
unsynced, unsynced_bytes = accumulate(replicas, x16, y16, 4, sync_every=False)
no_sync_difference = float(np.abs(synced - unsynced).max())
print(f"bytes sent per worker per step: all-reduce after every micro-batch {synced_bytes:,.0f}, "
      f"with no_sync {unsynced_bytes:,.0f} ({synced_bytes / unsynced_bytes:.0f} times fewer); "
      f"largest difference in the gradient {no_sync_difference:.1e}")

# %% [markdown]
# ### The ring's latency term
#
# Section 2 counted bytes: 2 (N - 1) / N times the vector per worker, nearly
# constant in N. But the ring also takes 2 (N - 1) *steps*, each a message
# that pays the link's latency alpha whatever its size:
#
#     time = 2 (N - 1) alpha + 2 (N - 1) / N x size x beta
#
# The byte term stays flat as N grows; the latency term grows linearly. For a
# small vector, or with many workers, latency dominates (which is why NCCL
# switches to trees, whose latency grows as log N, and why DDP makes buckets
# big). Counted: the messages each worker sends, and the time for an
# illustrative alpha = 5 microseconds and 25 GB/s per link:

# %%
def ring_messages(n: int, size: int = 1000) -> int:
    """Messages worker 0 sends in one ring all-reduce of n workers, counted."""
    counts = [0] * n

    def send(src, dst, array):
        counts[src] += 1
        return array.copy()

    ring_all_reduce([np.zeros(size) for _ in range(n)], send)
    return counts[0]


RING_NS = [2, 4, 8, 16, 32, 64]
LINK_ALPHA, LINK_BETA = 5e-6, 1 / 25e9  # seconds per message; seconds per byte
messages = {n: ring_messages(n) for n in RING_NS}
print("   N   messages per worker   time for 1 MB: latency   bytes      time for 1 GB: latency   bytes")
for n in RING_NS:
    lat = 2 * (n - 1) * LINK_ALPHA
    print(f"{n:4d} {messages[n]:21d} {lat * 1e6:21.0f} us {2 * (n - 1) / n * 1e6 * LINK_BETA * 1e6:6.0f} us "
          f"{lat * 1e3:22.2f} ms {2 * (n - 1) / n * 1e9 * LINK_BETA * 1e3:6.1f} ms")

# %% [markdown]
# ## 6. ZeRO further
#
# ### Clipping by the global norm when each worker holds a slice
#
# `clip_grad_norm_` scales every gradient by max_norm / (the norm of *all* of
# them). Under ZeRO a worker holds only its slice of the summed gradient. Its
# own norm is not the global one: clipping with it scales each slice by a
# different factor. The fix costs one number per worker: each sends the sum of
# squares of its slice, an all-reduce adds them, and every worker takes the
# square root. ZeRO-1 with that clipping against plain AdamW with
# `optim.clip_grad_norm_`, 20 steps (max_norm small enough that every step clips):

# %%
MAX_NORM = 0.05


def train_plain_clipped(steps: int) -> list[np.ndarray]:
    m = make_model()
    opt = optim.AdamW(m.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    trajectory, norms = [], []
    for step in range(steps):
        m.zero_grad()
        _, loss = m(*batch(step))
        loss.backward()
        norms.append(optim.clip_grad_norm_(m.parameters(), MAX_NORM))
        opt.step()
        trajectory.append(flat_params(m))
    return trajectory, norms


def train_zero_clipped(steps: int, n: int, global_norm: bool, keep_full_gradient: bool = True):
    """ZeRO-1 (or, with keep_full_gradient=False, ZeRO-2) with clipping by the global or the local norm."""
    workers = [make_model() for _ in range(n)]
    owned = [mg.tensor(chunk.copy(), requires_grad=True) for chunk in np.array_split(flat_params(workers[0]), n)]
    optimizers = [optim.AdamW([p], lr=LR, weight_decay=WEIGHT_DECAY) for p in owned]
    network, trajectory, kept = Network(n), [], []
    for step in range(steps):
        grads = local_gradients(workers, *batch(step))
        ring_reduce_scatter(grads, network.send)
        slices = [np.array_split(grads[i], n)[(i + 1) % n].copy() for i in range(n)]  # worker i's summed slice
        if not keep_full_gradient:  # ZeRO-2: the rest of the buffer is dropped, only the slice is kept
            grads = None
        kept.append([g.nbytes for g in (grads if keep_full_gradient else slices)])  # gradient bytes each holds
        squares = [np.array([float((s * s).sum())]) for s in slices]
        ring_all_reduce(squares, network.send)  # one number per worker: the global sum of squares
        for i in range(n):
            norm = float(np.sqrt(squares[i][0])) if global_norm else float(np.linalg.norm(slices[i]))
            factor = min(1.0, MAX_NORM / (norm + 1e-6))  # clip_grad_norm_'s factor
            chunk = (i + 1) % n
            owned[chunk].grad = mg.tensor(slices[i] * factor)
            optimizers[chunk].step()
        new = [np.concatenate([p.data for p in owned]) for _ in range(n)]
        ring_all_gather(new, network.send)
        for worker, flat in zip(workers, new):
            set_flat_params(worker, flat)
        trajectory.append(flat_params(workers[0]))
    return trajectory, kept


clipped_plain, clip_norms = train_plain_clipped(STEPS)
clipped_global, zero1_kept = train_zero_clipped(STEPS, N_WORKERS, global_norm=True)
clipped_local, _ = train_zero_clipped(STEPS, N_WORKERS, global_norm=False)
zero2_trajectory, zero2_kept = train_zero_clipped(STEPS, N_WORKERS, global_norm=True, keep_full_gradient=False)
clip_global_vs_plain = max(float(np.abs(a - b).max()) for a, b in zip(clipped_plain, clipped_global))
clip_local_vs_plain = max(float(np.abs(a - b).max()) for a, b in zip(clipped_plain, clipped_local))
zero2_vs_zero1 = max(float(np.abs(a - b).max()) for a, b in zip(clipped_global, zero2_trajectory))
print(f"every step clipped (gradient norms {min(clip_norms):.2f} to {max(clip_norms):.2f}, max_norm {MAX_NORM})")
print(f"largest |parameter, ZeRO-1 clipped by the global norm - AdamW after clip_grad_norm_|: "
      f"{clip_global_vs_plain:.1e}")
print(f"largest |parameter, ZeRO-1 clipped by each worker's own norm - AdamW after clip_grad_norm_|: "
      f"{clip_local_vs_plain:.1e}")

# %% [markdown]
# ### ZeRO-2: keep only your slice of the gradient
#
# After the reduce-scatter, worker i needs only its slice of the summed
# gradient: the rest of the buffer served to pass partial sums along the ring
# and can be freed (in DDP-style bucketing, bucket by bucket during backward).
# The same trajectory as ZeRO-1, with the gradient held per worker divided by N:

# %%
print(f"largest |parameter, ZeRO-2 - ZeRO-1| over {STEPS} steps: {zero2_vs_zero1:.1e}")
print(f"gradient bytes each worker holds for the update: ZeRO-1 {zero1_kept[-1]} (the whole buffer), "
      f"ZeRO-2 {zero2_kept[-1]} (its slice: size / {N_WORKERS} = {n_params * 8 // N_WORKERS:,})")

# %% [markdown]
# ### The mixed-precision budget
#
# This lesson is in float64, where the four copies of the model cost the same.
# Mixed-precision training (the ZeRO paper's accounting, Rajbhandari et al.)
# keeps, per parameter: the float16 weights (2 bytes) and float16 gradients
# (2), and for Adam a float32 master copy of the weights, the float32 momentum
# and variance (4 + 4 + 4 = 12): 2 + 2 + 12 = 16 bytes per parameter, of which
# the optimizer's 12 are what ZeRO-1 shards. So ZeRO-1 brings 16 down to
# 4 + 12 / N, nearly 4 times less for many workers; ZeRO-2 shards the gradients
# too (2 + 14 / N), ZeRO-3 everything (16 / N). Measured on this model's
# arrays, stored as a worker would store them (NumPy's float16 and float32):

# %%
def worker_bytes(stage: int, n: int, worker: int = 0) -> int:
    """Bytes one worker holds under mixed precision for ZeRO stage 0 (plain DDP) to 3: its arrays, counted."""
    shard = np.array_split(np.arange(n_params), n)[worker]
    whole = np.arange(n_params)
    held = {"weights": np.zeros(whole.size if stage < 3 else shard.size, np.float16),
            "gradients": np.zeros(whole.size if stage < 2 else shard.size, np.float16)}
    for name in ("master weights", "momentum", "variance"):
        held[name] = np.zeros(whole.size if stage < 1 else shard.size, np.float32)
    return sum(a.nbytes for a in held.values())


def budget_formula(stage: int, n: int, psi: float) -> float:
    return {0: 16 * psi, 1: 4 * psi + 12 * psi / n, 2: 2 * psi + 14 * psi / n, 3: 16 * psi / n}[stage]


budget_rows = []
for n in (4, 64):
    measured_stage = [worker_bytes(stage, n) for stage in range(4)]
    budget_rows.append((n, measured_stage, [budget_formula(stage, n, n_params) for stage in range(4)]))
print(f"bytes per worker, this model (P = {n_params:,} parameters):")
print("   N        plain DDP (16 P)      ZeRO-1            ZeRO-2            ZeRO-3")
for n, got, formula in budget_rows:
    print(f"{n:4d}  " + "  ".join(f"{g:>8,} ({f:>8,.0f})" for g, f in zip(got, formula)))
PSI = 7.5e9  # the ZeRO paper's example: 7.5 B parameters on 64 GPUs
paper = [budget_formula(stage, 64, PSI) / 1e9 for stage in range(4)]
print(f"a 7.5 B model on 64 workers (formula): {paper[0]:.1f} GB, ZeRO-1 {paper[1]:.1f} GB, ZeRO-2 {paper[2]:.1f} GB, "
      f"ZeRO-3 {paper[3]:.2f} GB; ZeRO-1 saves {paper[0] / paper[1]:.2f} times")

# %% [markdown]
# The plot: as N grows, the bytes each worker sends per all-reduce approach
# twice the gradient (left), and the memory each worker needs approaches the
# parameters and gradients alone under ZeRO-1 (right), both from the formulas,
# with the measured points of this lesson's ring for N = 2 to 8.

# %%
def measured_traffic(n: int) -> float:
    buffers = [g.copy() for g in local_gradients([copy.deepcopy(model) for _ in range(n)], x, y)]
    net = Network(n)
    ring_all_reduce(buffers, net.send)
    return sum(net.sent) / n


NS = list(range(2, 9))
traffic = [measured_traffic(n) for n in NS]


def draw(plt, path):
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    size = n_params * 8
    grid = np.arange(1, 17)
    axes[0].plot(grid, 2 * (grid - 1) / grid, "-", label="2 (N - 1) / N")
    axes[0].plot(NS, [t / size for t in traffic], "o", label="measured, this ring")
    axes[0].set_xlabel("workers N")
    axes[0].set_ylabel("bytes sent per worker / gradient bytes")
    axes[0].legend()
    axes[1].plot(grid, [4.0] * len(grid), "-", label="replicated: 4 P")
    axes[1].plot(grid, 2 + 2 / grid, "-", label="ZeRO-1: 2 P + 2 P / N")
    axes[1].plot([N_WORKERS], [(weights_and_grads + zero_state[0]) / (n_params * 8)], "o",
                 label=f"measured, worker 0 of {N_WORKERS}")
    axes[1].set_xlabel("workers N")
    axes[1].set_ylabel("memory per worker / parameter bytes")
    axes[1].set_ylim(0, 4.5)
    axes[1].legend()
    for ax in axes:
        ax.grid(alpha=0.3)
    return save_figure(fig, path)


pictures = []
plt = pyplot()
if plt is not None:
    pictures.append(draw(plt, args.out / "data_parallel.png"))
    print(f"Saved {pictures[-1]}")

# %% [markdown]
# ## Where to go from here
#
# The real thing for more than one machine is PyTorch's
# `DistributedDataParallel`, which runs this all-reduce (NCCL's ring, or a tree)
# in buckets during the backward pass, as section 5 simulated, and
# `torch.distributed.optim.ZeroRedundancyOptimizer` or FSDP for ZeRO.
# `demos/continue_in_pytorch.py` takes a run trained here and continues it on
# DDP under `torchrun`, its first loss equal to the one minigrad would report.
# Exercise 11 (demos/exercises/ex11_ring_all_reduce.py, graded by
# `python -m demos.exercises check 11`) asks you to write the ring all-reduce.
