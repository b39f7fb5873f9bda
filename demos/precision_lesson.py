# %% [markdown]
# # Training in bfloat16 and float16: what is lost, and the two fixes
#
#     python -m demos.precision_lesson [--out DIR]
#     (draws precision_curves.png into DIR, default out/precision_lesson)
#
# GPUs multiply 16-bit floats several times faster than 32-bit ones, and store
# them in half the memory, so large models train in bfloat16 or float16. Both
# keep far fewer bits than float32, and each loses something different.
# minigrad has no 16-bit arrays, so it emulates them: `x.round_to("bfloat16")`
# rounds every element of a float32 array to the nearest bfloat16 (round to
# nearest, ties to even, on the bit pattern), and `"float16"` to the nearest
# float16 (with its small range and its subnormals); the gradient of a rounded
# value is rounded the same way, as a 16-bit tensor's gradient is 16-bit. What
# you will see:
#
# 1. the three formats side by side: significant bits, range, the gap between
#    1 and the next number (an "ulp");
# 2. a weight update smaller than half an ulp vanishes in a bfloat16 weight,
#    however often it is applied; float32 *master weights* keep it;
# 3. float16 gradients underflow to zero; *dynamic loss scaling* (what
#    PyTorch's `GradScaler` does) multiplies the loss so they do not, and skips
#    the steps whose gradients overflow; then a training run over micro-batches
#    where float16 without scaling stalls and with it trains as float32 does,
#    the gradients unscaled once per step and the schedule stepped only on the
#    steps taken;
# 4. the demo GPT trained 200 steps in float32, in bfloat16 with float32 master
#    weights, and in pure bfloat16: the loss curves side by side;
# 5. which ops autocast runs in float16 and which it keeps in float32, and why,
#    each reason measured (attention's two products and the softmax between them).
#
# Each `# %%` line starts a cell: open the file in Jupyter (with jupytext) or VS
# Code to run it cell by cell, or run it whole as a script.

# %%
import numpy as np

import minigrad as mg
from demos._common import parse_args, pyplot, save_figure
from minigrad import nn, optim
from minigrad.nn import functional as F
from models.gpt import GPT, GPTConfig

args = parse_args(None, "precision_lesson", "bfloat16 and float16 emulated: lost updates, master weights, "
                  "gradient underflow and loss scaling.")


def rounded(value, fmt: str) -> float:
    """``value`` (a Python number) as the nearest number of the format, computed by the op round_to."""
    return mg.tensor(np.float32(value)).round_to(fmt).item()


# %% [markdown]
# ## 1. Three formats
#
# A float is sign x significand x 2^exponent. float32 keeps 24 significant bits
# and 8 exponent bits. bfloat16 is float32's upper half: the same 8 exponent
# bits, so the same range, but only 8 significant bits. float16 splits its 16
# bits the other way: 11 significant bits, but 5 exponent bits, so nothing
# above 65504, and below 2^-14 it runs out of exponent: *subnormals* lose one
# significant bit per halving, down to 2^-24, and below that is zero.
# Every number printed below is computed by `round_to`.

# %%
FORMATS = {"float32": 24, "bfloat16": 8, "float16": 11}  # significant bits (the leading 1 included)
print("format     bits  ulp at 1      1/3 as stored         largest     smallest normal   smallest > 0")
for fmt, bits in FORMATS.items():
    ulp = 2.0 ** (1 - bits)
    assert rounded(1 + ulp, fmt) == 1 + ulp and rounded(1 + ulp / 2, fmt) == 1.0  # ulp: the next number after 1
    largest = {"float32": float(np.finfo(np.float32).max), "bfloat16": (2 - 2 ** -7) * 2.0 ** 127,
               "float16": 65504.0}[fmt]
    normal = 2.0 ** -14 if fmt == "float16" else 2.0 ** -126
    tiny = 2.0 ** -24 if fmt == "float16" else 2.0 ** (-126 - (bits - 1))
    assert rounded(largest, fmt) == largest and rounded(tiny, fmt) == tiny and rounded(tiny / 2, fmt) == 0.0
    print(f"{fmt:<9} {bits:4d}  {ulp:.3e}   {rounded(1 / 3, fmt):.10f}   {largest:.4e}   {normal:.4e}      "
          f"{tiny:.3e}")
print("float16 of 70000:", rounded(70000, "float16"), "  float16 of 1e-8:", rounded(1e-8, "float16"),
      "  bfloat16 of 1e-8:", f"{rounded(1e-8, 'bfloat16'):.4e}")

# %% [markdown]
# ## 2. An update below half an ulp vanishes
#
# A weight of 1.0 stored in bfloat16 has the neighbours 1 - 2^-8 = 0.99609375
# below and 1 + 2^-7 above. An update of -0.001 gives 0.999, nearer to 1.0 than
# to 0.99609375, so the stored weight rounds back to 1.0: the update is lost,
# and so is every one after it. Any update smaller than half the gap (here
# 2^-9 = 0.00195) vanishes. A thousand updates of -0.001 should take the
# weight to 0; in bfloat16 it does not move at all.
#
# The fix is to keep a float32 *master* copy of every weight: the optimizer
# updates the master, and the forward pass uses its rounding to bfloat16. The
# small updates add up in the master until they cross a bfloat16 gap.

# %%
STEPS, UPDATE = 1000, 0.001
bf16_weight = np.float32(1.0)
master = np.float32(1.0)
seen_by_forward = []
for _ in range(STEPS):
    bf16_weight = np.float32(rounded(bf16_weight - UPDATE, "bfloat16"))  # stored in bfloat16: rounded at once
    master = np.float32(master - np.float32(UPDATE))  # stored in float32
    seen_by_forward.append(rounded(master, "bfloat16"))  # what a bfloat16 forward pass reads
print(f"{STEPS} updates of -{UPDATE} to a weight of 1.0 (the exact result: {1 - STEPS * UPDATE:.1f}):")
print(f"  the weight kept in bfloat16:          {float(bf16_weight):.6f}")
print(f"  a float32 master weight:             {float(master):.6f}")
print(f"  its bfloat16 copy for the forward:   {seen_by_forward[-1]:.6f} (it first moved at update "
      f"{next(i for i, w in enumerate(seen_by_forward) if w != 1.0) + 1})")

# %% [markdown]
# ## 3. float16 gradients underflow; loss scaling brings them back
#
# float16 has the significant bits but not the range: gradients are small
# numbers, and everything below 2^-24 (6e-8) becomes 0. They are smallest where
# the loss is weighted down: with gradient accumulation over 256 micro-batches,
# each micro-batch's loss counts 1/256 (demos/data_parallel_lesson.py, section 3). Here the demo GPT's
# linear layers run under a float16 policy (autocast's rule for the layers
# that multiply matrices: the input, the weight and the output rounded to
# float16; the weights themselves stay float32), so every gradient that flows
# back through them is float16 too. Counted: the gradient entries that are
# nonzero in float32 but zero under float16.
#
# Below 2^-14 float16 has fewer significant bits, so the gradients that survive
# are coarse too (the median relative error, against float32, of every entry).
#
# The fix: multiply the loss by a large *scale* S before backward, so every
# gradient is S times larger and clears the bottom of the range; divide the
# float32 gradients by S before the update. Too large an S overflows (past
# 65504: inf), so the scale is chosen *dynamically*: a step whose gradients hold
# an inf or a NaN is skipped and S halved; after a run of good steps S doubles.

# %%
WORDS = "the cat sat on a mat and a dog ran to the park while birds sang in tall green trees".split()
TEXT = " ".join(np.random.default_rng(0).choice(WORDS, size=3000))
CHARS = sorted(set(TEXT))
IDS = np.array([CHARS.index(c) for c in TEXT])
CONFIG = GPTConfig(vocab_size=len(CHARS), block_size=16, n_layer=1, n_head=2, d_model=32)


def get_batch(rng: np.random.Generator, B: int = 8, T: int = 16):
    starts = rng.integers(0, len(IDS) - T - 1, B)
    return np.stack([IDS[s:s + T] for s in starts]), np.stack([IDS[s + 1:s + T + 1] for s in starts])


def run_linears_in(model: GPT, fmt: str) -> GPT:
    """The precision policy: every nn.Linear computes on its input, weight and bias rounded to ``fmt``, and its
    output is rounded to ``fmt``; gradients through it are held in ``fmt`` (round_to's rule). The rest of the
    model (embeddings, norms, softmax, the loss) stays float32, as under PyTorch's autocast."""
    for layer in model.modules():
        if isinstance(layer, nn.Linear):
            def forward(x, layer=layer):
                bias = None if layer.bias is None else layer.bias.round_to(fmt)
                return F.linear(x.round_to(fmt), layer.weight.round_to(fmt), bias).round_to(fmt)
            layer.forward = forward
    return model


def gradients(model: GPT, x, y, share: float, scale: float = 1.0) -> np.ndarray:
    """The gradient of share x the loss, every parameter's end to end; computed with the loss x scale, then / scale."""
    model.zero_grad()
    _, loss = model(x, y)
    (loss * (share * scale)).backward()
    return np.concatenate([p.grad.numpy().ravel() for p in model.parameters()]) / np.float32(scale)


SHARE = 1 / 256  # one micro-batch of 256: gradient accumulation weighs its loss so
x, y = get_batch(np.random.default_rng(1))
fp32_grads = gradients(GPT(CONFIG, seed=0), x, y, share=SHARE)
fp16_model = run_linears_in(GPT(CONFIG, seed=0), "float16")
fp16_grads = gradients(fp16_model, x, y, share=SHARE)
scaled_grads = gradients(fp16_model, x, y, share=SHARE, scale=2.0 ** 16)
nonzero = fp32_grads != 0
print(f"gradient entries, loss weighted by 1/256: {fp32_grads.size:,}; nonzero in float32: {nonzero.sum():,}")
print(f"  in float32 below 2^-24, float16's smallest: {(np.abs(fp32_grads) < 2.0 ** -24).mean():.1%}; "
      f"below 2^-14, where its subnormals start: {(np.abs(fp32_grads) < 2.0 ** -14).mean():.1%}")
for name, grads in (("float16", fp16_grads), ("float16, loss x 2^16", scaled_grads)):
    lost = nonzero & (grads == 0)
    error = np.median(np.abs(grads - fp32_grads)[nonzero] / np.abs(fp32_grads[nonzero]))
    print(f"  {name:<21} zero where float32 is not: {lost.mean():6.1%};  median relative error: {error:.1e}")

# %% [markdown]
# The scaler, as PyTorch's `GradScaler` runs it: scale the loss; unscale the
# gradients (divide by S); if any is inf or NaN, skip the optimizer step and
# halve S; otherwise step, and after `growth_interval` good steps in a row
# double S. Started too high (2^24), it finds its level in a few skipped
# steps, then trains, trying a larger scale after every 10 good steps:

# %%
class LossScaler:
    """Dynamic loss scaling, as torch.amp.GradScaler: scale, unscale, skip on inf/NaN, back off, grow."""

    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000):
        self.scale, self.growth_factor, self.backoff_factor = init_scale, growth_factor, backoff_factor
        self.growth_interval, self.good_steps = growth_interval, 0

    def scale_loss(self, loss: mg.Tensor) -> mg.Tensor:
        return loss * self.scale

    def unscale(self, grads: list[np.ndarray]) -> bool:
        """Divide the gradients by the scale, in place (float32); True if any is inf or NaN. (A parameter no
        gradient reached has none to unscale: ``step`` leaves it out, as GradScaler does.)"""
        found_inf = False
        for g in grads:
            g *= np.float32(1 / self.scale)
            found_inf = found_inf or not np.isfinite(g).all()
        return found_inf

    def update(self, found_inf: bool) -> None:
        if found_inf:
            self.scale *= self.backoff_factor
            self.good_steps = 0
        else:
            self.good_steps += 1
            if self.good_steps == self.growth_interval:
                self.scale *= self.growth_factor
                self.good_steps = 0

    def step(self, optimizer, params) -> bool:
        """Unscale, then step unless a gradient is inf/NaN; update the scale. True if the step was taken."""
        found_inf = self.unscale([p.grad.data for p in params if p.grad is not None])
        if not found_inf:
            optimizer.step()
        self.update(found_inf)
        return not found_inf


def train_fp16(steps: int, scaler: LossScaler | None, seed: int = 1):
    model = run_linears_in(GPT(CONFIG, seed=0), "float16")
    params = list(model.parameters())
    opt = optim.AdamW(params, lr=2e-3, weight_decay=0.1)
    rng, log = np.random.default_rng(seed), []
    for _ in range(steps):
        x, y = get_batch(rng)
        model.zero_grad()
        _, loss = model(x, y)
        if scaler is None:
            loss.backward()
            opt.step()
            log.append((loss.item(), None, True))
        else:
            scale = scaler.scale
            with np.errstate(over="ignore", invalid="ignore"):  # too large a scale overflows: the scaler sees it
                scaler.scale_loss(loss).backward()
            log.append((loss.item(), scale, scaler.step(opt, params)))
    return log


scaler_log = train_fp16(40, LossScaler(init_scale=2.0 ** 24, growth_interval=10))
print(" step   loss     scale    step taken")
for step, (loss_value, scale, taken) in enumerate(scaler_log[:8]):
    said = "yes" if taken else "no: inf in the gradients"
    print(f"{step:5d}  {loss_value:.3f}  2^{int(np.log2(scale)):<3d}     {said}")
skipped = sum(not taken for _, _, taken in scaler_log)
print(f"... after 40 steps: {skipped} skipped, scale 2^{int(np.log2(scaler_log[-1][1]))} "
      f"(it doubles after 10 good steps in a row), loss {np.mean([l for l, _, _ in scaler_log[-5:]]):.3f}")

# %% [markdown]
# ### Training where float16 without scaling stalls
#
# How small do gradients get? The loss is a mean over the tokens of the
# batch, so each token's share of the gradient is 1 / (tokens per batch).
# Large models train on batches of millions of tokens (GPT-3: 3.2 M); a
# micro-batch of 2 x 16 = 32 tokens in a batch of 2^22 tokens weighs
# 32 / 2^22 = 2^-17 of the step's loss, and its gradients are that much
# smaller. Here each step accumulates 2 such micro-batches, three ways: in
# float32; under the float16 policy with no scaling; and under the float16
# policy with the scaler. AdamW divides by the gradient's size, so in float32
# the small weight changes little. In float16 the gradients fall below 2^-24
# and vanish.
#
# With accumulation the scaler's calls move: every micro-batch's loss is
# scaled and backpropagated, the gradients add up (scaled) in `.grad`, and only
# after the last micro-batch are they unscaled, once, checked for inf/NaN, and
# stepped (unscaling after each micro-batch would divide the first ones several
# times, and a skip decided per micro-batch would be undone by the next). A
# learning-rate schedule counts optimizer steps: on a skipped step there was no
# update, so the scheduler is not stepped either (PyTorch warns when it is).
# The scaler grows its scale after every 10 good steps, until a step overflows:
# that step is skipped and the scale halved.

# %%
TOKENS_PER_BATCH, MICRO_BATCHES, RUN_STEPS = 2 ** 22, 2, 100
MICRO_SHARE = 2 * 16 / TOKENS_PER_BATCH  # one micro-batch of 2 sequences of 16 tokens: 2^-17


def train_small_share(mode: str, steps: int = RUN_STEPS) -> dict:
    """``steps`` AdamW steps of MICRO_BATCHES micro-batches, each weighing MICRO_SHARE of the batch's loss; mode is
    "float32", "float16" (no scaling) or "float16 + loss scaling". Returns the run's log."""
    model = GPT(CONFIG, seed=0)
    if mode != "float32":
        run_linears_in(model, "float16")
    params = list(model.parameters())
    opt = optim.AdamW(params, lr=2e-3, weight_decay=0.1)
    scheduler = optim.LambdaLR(opt, lambda step: min(1.0, (step + 1) / 10))  # 10 steps of warmup
    scaler = LossScaler(init_scale=2.0 ** 32, growth_interval=10) if mode.endswith("scaling") else None
    rng = np.random.default_rng(1)
    log = dict(loss=[], zero=[], taken=[], unscaled=0)
    for _ in range(steps):
        model.zero_grad()
        loss_sum = 0.0
        for _ in range(MICRO_BATCHES):
            _, loss = model(*get_batch(rng, B=2))
            weighted = loss * MICRO_SHARE
            with np.errstate(over="ignore", invalid="ignore"):
                (weighted if scaler is None else scaler.scale_loss(weighted)).backward()  # .grad adds up
            loss_sum += loss.item()
        grads = [p.grad.data for p in params if p.grad is not None]
        if scaler is None:
            opt.step()
            taken = True
        else:
            taken = scaler.step(opt, params)  # unscaled once, after the last micro-batch; skipped on inf/NaN
            log["unscaled"] += 1
        if taken:
            scheduler.step()  # the schedule counts the steps taken
            log["zero"].append(float(np.mean(np.concatenate([(g == 0).ravel() for g in grads]))))
        log["loss"].append(loss_sum / MICRO_BATCHES)
        log["taken"].append(taken)
    log["scheduler_steps"] = scheduler.last_step
    return log


small_share = {mode: train_small_share(mode) for mode in ("float32", "float16", "float16 + loss scaling")}
print(f"each micro-batch weighs 32 / 2^22 = 2^{int(np.log2(MICRO_SHARE))} of the loss; {RUN_STEPS} steps of "
      f"{MICRO_BATCHES} micro-batches")
print("                         loss, steps 1-10   steps 81-100   gradient entries zero   steps taken   "
      "scheduler steps")
for mode, log in small_share.items():
    loss = np.array(log["loss"])
    print(f"{mode:<24} {loss[:10].mean():17.3f} {loss[-20:].mean():14.3f} {np.mean(log['zero']):23.1%} "
          f"{sum(log['taken']):13d} {log['scheduler_steps']:17d}")
skipped_steps = [step for step, taken in enumerate(small_share["float16 + loss scaling"]["taken"]) if not taken]
print(f"steps skipped by the scaler (inf in the gradients): {skipped_steps}")

# %% [markdown]
# float16 without scaling stalls: most gradient entries are zero, so most
# weights never move. With the scaler it follows float32; the steps where a
# grown scale overflowed were skipped, and the schedule was stepped once per
# step taken, no more (so it ends a little behind float32: fewer updates).

# %% [markdown]
# ## 4. The demo GPT in float32, in bfloat16 with master weights, in pure bfloat16
#
# The same model, data and seed, 200 AdamW steps, three ways:
#
# * **float32**: the reference;
# * **bfloat16 + master weights**: the linear layers run in bfloat16 (the policy
#   above), the parameters and AdamW's state stay float32: what
#   `torch.autocast(dtype=torch.bfloat16)` does;
# * **pure bfloat16**: the same, but the parameters and AdamW's state are
#   *stored* in bfloat16, rounded after every step, as after `model.bfloat16()`.
#
# bfloat16 has float32's range, so no loss scaling is needed. What differs is
# where the updates land.

# %%
TRAIN_STEPS = 200


def train(mode: str, steps: int = TRAIN_STEPS, lr: float = 1e-3):
    model = GPT(CONFIG, seed=0)
    if mode != "float32":
        run_linears_in(model, "bfloat16")
    params = list(model.parameters())
    opt = optim.AdamW(params, lr=lr, weight_decay=0.1)
    pure = mode == "pure bfloat16"
    if pure:
        with mg.no_grad():
            for p in params:
                p.copy_(p.round_to("bfloat16"))
    rng, losses, unmoved = np.random.default_rng(1), [], 0.0
    for _ in range(steps):
        x, y = get_batch(rng)
        model.zero_grad()
        _, loss = model(x, y)
        loss.backward()
        before = [p.data.copy() for p in params]
        opt.step()
        if pure:  # stored in bfloat16: the weights and both moments rounded after the step
            for p in params:
                with mg.no_grad():
                    p.copy_(p.round_to("bfloat16"))
                for moment in ("exp_avg", "exp_avg_sq"):
                    opt.state[p][moment][...] = mg.tensor(opt.state[p][moment]).round_to("bfloat16").data
        unmoved = np.mean(np.concatenate([(p.data == b).ravel() for p, b in zip(params, before)]))
        losses.append(loss.item())
    gains = np.concatenate([m.weight.numpy().ravel() for m in model.modules() if isinstance(m, nn.LayerNorm)])
    return np.array(losses), float(unmoved), float(np.abs(gains - 1).max())


curves, unmoved, gain_moves = {}, {}, {}
for mode in ("float32", "bfloat16 + master weights", "pure bfloat16"):
    curves[mode], unmoved[mode], gain_moves[mode] = train(mode)
print("mean loss over steps      1-20     91-110   181-200   weights the last step     norm gains: largest")
print("                                                      left unchanged            distance from 1.0")
for mode, losses in curves.items():
    print(f"{mode:<25} {losses[:20].mean():.3f}    {losses[90:110].mean():.3f}    {losses[-20:].mean():.3f}"
          f"     {unmoved[mode]:6.1%}                    {gain_moves[mode]:.4f}")

# %% [markdown]
# bfloat16 with master weights follows the float32 curve closely: rounding the
# activations costs little. Pure bfloat16 falls behind: with every weight
# stored in bfloat16, the updates smaller than half a gap are lost (the last
# column: the share of weights the final step did not move at all; the norm
# gains, which start at 1.0, never move), and weight decay, a relative change of lr x 0.1 =
# 1e-4 per step, never registers.

# %%
def draw(plt, curves, path):
    fig, ax = plt.subplots(figsize=(8, 4.5))
    window = 10
    styles = {"float32": dict(color="black", lw=3, alpha=0.35), "bfloat16 + master weights": dict(ls="--"),
              "pure bfloat16": dict()}
    for mode, losses in curves.items():
        smooth = np.convolve(losses, np.ones(window) / window, mode="valid")
        ax.plot(np.arange(window, len(losses) + 1), smooth, label=mode, **styles[mode])
    ax.set_xlabel("step")
    ax.set_ylabel(f"training loss (nats/char, mean of {window} steps)")
    ax.set_title("The same GPT, data and seed, in three precisions")
    ax.grid(alpha=0.3)
    ax.legend()
    return save_figure(fig, path)


pictures = []
plt = pyplot()
if plt is not None:
    pictures.append(draw(plt, curves, args.out / "precision_curves.png"))
    print(f"Saved {pictures[-1]}")

# %% [markdown]
# ## 5. What autocast runs in float16, and what it keeps in float32
#
# `torch.autocast(device_type="cuda", dtype=torch.float16)` does not run the
# whole model in float16. Its op lists (PyTorch's "Autocast Op Reference"):
#
# * **float16**: the products: `matmul`, `mm`, `bmm`, `baddbmm`, `addmm`,
#   `linear`, the convolutions. In attention, both products, the scores
#   Q K^T and the weighted values P V; the GPU's matrix units add the products
#   up in float32 inside the kernel, and round only the result;
# * **float32**: what needs range or many additions: `softmax`, `log_softmax`,
#   `layer_norm`, `exp`, `log`, `pow`, `sum`, `cumsum`, `norm`, the losses
#   (`cross_entropy`, `nll_loss`, `mse_loss`...). So attention's softmax, between
#   the two float16 products, runs in float32;
# * anything else runs in the dtype of its inputs.
#
# Each reason, measured on float16 as `round_to` computes it (the policy of
# section 3 follows the first list: only the products of `nn.Linear` are rounded):

# %%
def float16_running_sum(values) -> float:
    """The values added one by one, the running sum rounded to float16 after each addition."""
    total = 0.0
    for v in values:
        total = rounded(total + v, "float16")
    return total


sum_of_ones = float16_running_sum(np.ones(4096))
exp_12 = mg.tensor(np.float32(12.0)).exp().round_to("float16").item()
mean_square = rounded(rounded(300.0, "float16") ** 2, "float16")  # a layer norm input of 300, squared
probability = rounded(1e-8, "float16")
score = rounded(64 * 40.0 * 40.0, "float16")  # q . k over d = 64, entries of 40
score_scaled = rounded(64 * (40.0 / 8) * 40.0, "float16")  # q scaled by 1/sqrt(64) first
print(f"4096 ones added one by one in float16:  {sum_of_ones:.0f}    (past 2048, + 1 is half an ulp: sum, "
      f"softmax's denominator, layer_norm's mean: float32)")
print(f"exp(12) in float16:                     {exp_12}     (exp, softmax, log_softmax: float32)")
print(f"300^2, a layer norm input squared:      {mean_square}     (layer_norm, norm, pow: float32)")
print(f"a probability of 1e-8 in float16:       {probability}     (its log is -inf: log, cross_entropy, "
      f"nll_loss: float32)")
print(f"q . k over d = 64 with entries of 40:   {score}     (attention's scores overflow; with q scaled by "
      f"1/sqrt(d) first: {score_scaled:.0f})")

# %% [markdown]
# The rounding op, its gradient rule and the policy are described in
# docs/checkpoint_and_precision.md. Exercise 12
# (demos/exercises/ex12_loss_scaler.py, graded by `python -m demos.exercises check 12`)
# asks you to write the loss scaler with what a real loop adds and this lesson does
# not: gradient clipping, which must see the gradients unscaled (PyTorch's
# `scaler.unscale_(optimizer)`), inside a step over micro-batches some of which
# overflow, with the scale's growth and backoff counted per step.
