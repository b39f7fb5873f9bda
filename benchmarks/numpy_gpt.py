"""A GPT training step written by hand in NumPy: explicit forward, explicit backward, AdamW. No autograd.

Why it exists: it is the floor the benchmarks measure minigrad against. An
autodiff engine pays for its generality: a Tensor wrapper and a graph node per
op, a VJP call per node, gradients accumulated by the engine, activations it
recomputes in backward rather than keep. This file pays none of that. It runs
the model ``benchmarks/train_step.py`` builds (``build_minigrad``: minigrad's
``models.GPT``; ``torch_gpt.TorchGPT`` is the same model in PyTorch) the way one
writes a transformer by hand: each layer's forward keeps what its backward needs
(layer norm's xhat and 1/std, GELU's gate, the attention weights), backward is
written out layer by layer in reverse, and the arrays are updated in place
where that is natural. ``python -m benchmarks.train_step --handwritten`` races
it against minigrad (and torch); the gap between minigrad and this is what the
engine costs.

The model (the benchmark's configuration of ``models.GPT``)::

    x = tok_emb[idx] + pos_emb[:T]                          (B, T, d), learned positions
    n_layer times:  x = x + out_proj(attention(attn_norm(x)))  causal, separate q/k/v projections
                    x = x + down_proj(gelu(up_proj(mlp_norm(x))))  d -> 4d -> d; GELU tanh form, or erf
    logits = norm_f(x) @ tok_emb.T                          head tied to the token embedding
    loss = mean cross-entropy over the B*T positions

then AdamW (lr 3e-4, betas (0.9, 0.999), eps 1e-8, weight decay 0.01, decoupled
and applied to every parameter), the same arithmetic as ``minigrad.optim.AdamW``.

It does the same GEMMs as minigrad's model and TorchGPT (separate q, k and v
projections, attention as ``softmax(q k^T / sqrt(hd) + mask) v``), so the
comparison is between ways of running one algorithm, not between algorithms.
Where it is quicker than a literal transcription, it is with plain NumPy:
(B, T, d) activations are kept as (B*T, d) matrices, so each projection is one
2-D GEMM; attention's per-head products are written straight into a
(B, T, H, hd) buffer, so the heads come out side by side with no transpose
copy; short row and column sums are matrix-vector products with a vector of
ones (BLAS does a (4096, 64) row sum several times faster than ``sum(axis=-1)``);
the long elementwise formulas (GELU, its derivative, AdamW) run a cache-sized
block at a time; gradient and optimizer buffers are allocated once, and all the
parameters live in one flat array (their gradients and Adam's moments in three
more), so AdamW is one loop over blocks, not one per parameter. minigrad's ops
use the same NumPy tricks (GEMV sums, blocked GELU), so what is left between the
two is the engine and what it recomputes.

Parameters are named as in ``models.GPT.state_dict()`` (``blocks.0.attn.q_proj.weight``, ...),
and the model is built from such a state dict: ``NumpyGPT(minigrad_gpt.state_dict(), n_head)``.
float32 by default; ``dtype=np.float64`` for gradient checks. Every constant is
made in the model's dtype, so nothing upcasts a float32 array to float64.
"""

from __future__ import annotations

import math

import numpy as np

# erf on an ndarray (SciPy's when installed, else minigrad's Chebyshev fits): a NumPy helper, not an op
from minigrad.kernels import erf as _erf

_C = math.sqrt(2 / math.pi)  # GELU's tanh form: tanh(_C (x + 0.044715 x^3))

# Elements per block for the long elementwise formulas (GELU and its derivative, AdamW): a block of
# each operand (256 KiB in float32) stays in a core's L2 cache between the formula's dozen passes,
# where whole (B*T, 4d) arrays would go out to memory and back on every pass.
_BLOCK = 1 << 16


def _blocks(n: int):
    """Slices of length _BLOCK covering range(n)."""
    return (slice(start, start + _BLOCK) for start in range(0, n, _BLOCK))


class NumpyGPT:
    """The benchmark's GPT as plain NumPy: ``forward(idx, targets)``, ``backward()``, ``step()`` (AdamW).

    ``state_dict``: name -> array (or Tensor), as ``models.GPT.state_dict()`` gives it (the
    tied ``lm_head.weight`` is the token embedding and is skipped). ``matmul``:
    the function every GEMM of the model goes through (``np.matmul`` by default;
    the benchmark passes one with a clock). Gradients are in ``grads`` (same
    names) after ``backward``; ``step`` applies AdamW to ``params``.
    """

    def __init__(self, state_dict: dict, n_head: int, *, gelu: str = "tanh", eps: float = 1e-5, lr: float = 3e-4,
                 betas: tuple[float, float] = (0.9, 0.999), adam_eps: float = 1e-8, weight_decay: float = 0.01,
                 dtype=np.float32, matmul=np.matmul):
        if gelu not in ("tanh", "none"):
            raise ValueError(f"NumpyGPT: gelu must be 'tanh' or 'none', not {gelu!r}")
        self.dtype = dt = np.dtype(dtype)
        names = [name for name in state_dict if name != "lm_head.weight"]  # the head is tok_emb.weight (tied)
        shapes = {name: np.shape(state_dict[name]) for name in names}
        self.vocab_size, self.d_model = shapes["tok_emb.weight"]
        self.block_size = shapes["pos_emb.weight"][0]
        self.n_layer = sum(1 for name in names if name.endswith(".attn_norm.weight"))
        self.n_head, self.gelu, self.matmul = n_head, gelu, matmul
        if self.d_model % n_head:
            raise ValueError(f"NumpyGPT: d_model={self.d_model} is not divisible by n_head={n_head}")

        # One flat array each for the parameters, their gradients and Adam's two moments; every
        # named array is a view into it. The optimizer then updates all parameters in one loop.
        size = sum(math.prod(s) for s in shapes.values())
        self.flat = {kind: np.zeros(size, dt) for kind in ("param", "grad", "exp_avg", "exp_avg_sq")}
        self.params, self.grads = {}, {}
        offset = 0
        for name in names:
            n = math.prod(shapes[name])
            self.params[name] = self.flat["param"][offset:offset + n].reshape(shapes[name])
            self.grads[name] = self.flat["grad"][offset:offset + n].reshape(shapes[name])
            self.params[name][...] = state_dict[name]
            offset += n

        # Constants in the model's dtype (a Python float is fine too under NumPy 2's rules, but a
        # NumPy float64 scalar would silently turn float32 arrays into float64 ones).
        self.eps = dt.type(eps)
        self.scale = dt.type(1.0 / math.sqrt(self.d_model // n_head))  # attention's 1/sqrt(head_dim)
        # -inf above the diagonal: added to the scores, it gives the future exactly zero weight.
        self.causal_bias = np.triu(np.full((self.block_size, self.block_size), -np.inf, dt), k=1)
        self.ones = np.ones(0, dt)  # for sums as matrix-vector products; grown as needed (_ones)
        # AdamW's hyperparameters stay Python floats: under NumPy 2 they multiply float32 arrays in float32.
        self.lr, self.adam_eps, self.weight_decay = float(lr), float(adam_eps), float(weight_decay)
        self.betas = (float(betas[0]), float(betas[1]))
        self.t = 0  # AdamW's step count
        self.cache: dict = {}

    # --- small pieces ---------------------------------------------------------------------

    def _ones(self, n: int) -> np.ndarray:
        if self.ones.size < n:
            self.ones = np.ones(n, self.dtype)
        return self.ones[:n]

    def _row_sum(self, x: np.ndarray) -> np.ndarray:
        """Sum over the last axis, kept as a size-1 axis: one GEMV, several times quicker than x.sum(-1) here."""
        n = x.shape[-1]
        return (x.reshape(-1, n) @ self._ones(n)).reshape(x.shape[:-1] + (1,))

    def _column_sum(self, x: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Sum over the rows of x (N, n) into out (n,): a GEMV again, 3x quicker than x.sum(axis=0)."""
        return np.matmul(self._ones(x.shape[0]), x, out=out)

    def _linear(self, x: np.ndarray, prefix: str) -> np.ndarray:
        """x (N, in) @ weight.T + bias -> (N, out); weight is stored (out, in) as in PyTorch."""
        out = self.matmul(x, self.params[prefix + ".weight"].T)
        out += self.params[prefix + ".bias"]
        return out

    def _linear_backward(self, g: np.ndarray, x: np.ndarray, prefix: str) -> np.ndarray:
        """Write the weight's and bias's gradients; return the input's. g (N, out), x (N, in) the forward input."""
        self.matmul(g.T, x, out=self.grads[prefix + ".weight"])  # (out, in), straight into its buffer
        self._column_sum(g, self.grads[prefix + ".bias"])
        return self.matmul(g, self.params[prefix + ".weight"])  # (N, in)

    def _layer_norm(self, x: np.ndarray, prefix: str):
        """(x - mean) / sqrt(var + eps) * weight + bias over the last axis; also returns (xhat, rstd) for backward."""
        inv_n = self.dtype.type(1.0 / x.shape[-1])
        xhat = x - self._row_sum(x) * inv_n  # centred
        var = np.einsum("ij,ij->i", xhat, xhat)[:, None] * inv_n  # (N, 1): a fused multiply-add per row
        rstd = 1 / np.sqrt(var + self.eps)
        xhat *= rstd
        out = xhat * self.params[prefix + ".weight"]
        out += self.params[prefix + ".bias"]
        return out, (xhat, rstd)

    def _layer_norm_backward(self, g: np.ndarray, cache, prefix: str) -> np.ndarray:
        """Write the gain's and bias's gradients; return the input's: rstd * (v - mean(v) - xhat * mean(v * xhat))."""
        xhat, rstd = cache
        inv_n = self.dtype.type(1.0 / g.shape[-1])
        np.einsum("ij,ij->j", g, xhat, out=self.grads[prefix + ".weight"])
        self._column_sum(g, self.grads[prefix + ".bias"])
        v = g * self.params[prefix + ".weight"]  # the gradient at xhat
        mean_v_xhat = np.einsum("ij,ij->i", v, xhat)[:, None] * inv_n
        v -= self._row_sum(v) * inv_n  # v is projected off the two directions layer norm removes:
        v -= xhat * mean_v_xhat  # a shift of x, and a rescaling of it
        v *= rstd
        return v

    def _gelu(self, u: np.ndarray):
        """GELU of the MLP's hidden layer; also returns what its derivative needs: the gate (x times it is GELU)."""
        dt = self.dtype.type
        out, saved = np.empty_like(u), np.empty_like(u)
        for block in _blocks(u.size):  # a dozen passes each: a block at a time, they run in cache
            x, o, t = (a.reshape(-1)[block] for a in (u, out, saved))
            if self.gelu == "tanh":  # x gate, gate = (1 + tanh u) / 2 = 1 / (1 + exp(-2u)), u = _C (x + 0.044715 x^3)
                np.multiply(x, x, out=t)  # (exp is about twice as quick as tanh in NumPy's float32)
                t *= dt(-2 * _C * 0.044715)
                t += dt(-2 * _C)
                t *= x  # -2u
                with np.errstate(over="ignore"):  # exp(-2u) = inf: the gate is 0
                    np.exp(t, out=t)
                t += 1
                np.divide(1, t, out=t)
                np.multiply(x, t, out=o)
            else:  # x Phi(x), Phi(x) = 0.5 (1 + erf(x / sqrt 2)) the normal CDF
                np.multiply(x, dt(1 / math.sqrt(2)), out=t)
                t[...] = _erf(t)
                t += 1
                t *= dt(0.5)
                np.multiply(x, t, out=o)
        return out, saved

    def _gelu_backward(self, g: np.ndarray, u: np.ndarray, saved: np.ndarray) -> np.ndarray:
        """g * gelu'(u), in place on g; ``saved`` is what ``_gelu`` returned with its output."""
        dt = self.dtype.type
        scratch = np.empty((2, min(_BLOCK, u.size)), self.dtype)
        for block in _blocks(u.size):
            x, gb, s = (a.reshape(-1)[block] for a in (u, g, saved))
            d, e = scratch[:, :x.size]
            if self.gelu == "tanh":  # gate (1 + 2 x u' (1 - gate)), u' = _C (1 + 3 * 0.044715 x^2), gate = s
                np.multiply(x, x, out=d)
                d *= dt(2 * _C * 3 * 0.044715)
                d += dt(2 * _C)
                d *= x
                np.subtract(1, s, out=e)
                d *= e
                d += 1
                d *= s
            else:  # Phi(x) + x phi(x), phi the normal density; Phi = s
                np.multiply(x, x, out=d)
                d *= dt(-0.5)
                np.exp(d, out=d)
                d *= x
                d *= dt(1 / math.sqrt(2 * math.pi))
                d += s
            gb *= d
        return g

    # --- forward ----------------------------------------------------------------------------

    def forward(self, idx: np.ndarray, targets: np.ndarray):
        """Logits (B, T, vocab) and the mean cross-entropy (a NumPy scalar) for token ids idx, targets (B, T)."""
        P, mm = self.params, self.matmul
        B, T = idx.shape
        if T > self.block_size or targets.shape != idx.shape:
            raise ValueError(f"NumpyGPT.forward: idx {idx.shape} and targets {targets.shape} must be the same "
                             f"(B, T) with T <= block_size={self.block_size}")
        C, H = self.d_model, self.n_head
        hd, N = C // H, B * T
        ids = idx.reshape(N)
        x = P["tok_emb.weight"][ids]  # (N, C): fancy indexing copies, so the residual stream is ours to update
        x.reshape(B, T, C)[...] += P["pos_emb.weight"][:T]
        layers = []
        for layer in range(self.n_layer):
            p = f"blocks.{layer}."
            # Attention: x = x + out_proj(softmax(q k^T / sqrt(hd) + mask) v), per head.
            h, ln1 = self._layer_norm(x, p + "attn_norm")
            q, k, v = (self._linear(h, p + f"attn.{name}_proj") for name in "qkv")
            q *= self.scale  # scaled here, (N, C), rather than the (B, H, T, T) scores
            qh, kh, vh = (a.reshape(B, T, H, hd).transpose(0, 2, 1, 3) for a in (q, k, v))  # (B, H, T, hd) views
            att = mm(qh, kh.transpose(0, 1, 3, 2))  # (B, H, T, T) scores
            att += self.causal_bias[:T, :T]
            att -= att.max(axis=-1, keepdims=True)  # softmax, in place (stable: the row max is 0)
            np.exp(att, out=att)
            att *= 1 / self._row_sum(att)
            y = np.empty((B, T, H, hd), self.dtype)
            mm(att, vh, out=y.transpose(0, 2, 1, 3))  # each head's output lands beside the others'
            y = y.reshape(N, C)
            x += self._linear(y, p + "attn.out_proj")  # the residual stream, in place: backward needs xhat, not x
            # MLP: x = x + down_proj(gelu(up_proj(x))).
            h2, ln2 = self._layer_norm(x, p + "mlp_norm")
            u = self._linear(h2, p + "mlp.up_proj")  # (N, 4C)
            a, gelu_saved = self._gelu(u)
            x += self._linear(a, p + "mlp.down_proj")
            layers.append((h, ln1, qh, kh, vh, att, y, h2, ln2, u, gelu_saved, a))
        xf, lnf = self._layer_norm(x, "norm_f")
        logits = mm(xf, P["tok_emb.weight"].T)  # (N, V): the head is the token embedding (tied)

        # Cross-entropy: loss_i = log(sum(exp(logits_i))) - logits_i[target_i], shifted by the row max.
        rows, tgt = np.arange(N), targets.reshape(N)
        probs = logits - logits.max(axis=1, keepdims=True)
        picked = probs[rows, tgt]
        np.exp(probs, out=probs)
        total = self._row_sum(probs)
        loss = (np.log(total[:, 0]) - picked).mean()
        probs /= total  # softmax: kept for backward
        self.cache = {"B": B, "T": T, "ids": ids, "rows": rows, "targets": tgt, "layers": layers, "xf": xf,
                      "lnf": lnf, "probs": probs}
        return logits.reshape(B, T, -1), loss

    # --- backward ---------------------------------------------------------------------------

    def backward(self) -> None:
        """Every parameter's gradient of the last forward's loss, into ``grads`` (each buffer fully overwritten)."""
        c, P, G, mm = self.cache, self.params, self.grads, self.matmul
        B, T = c["B"], c["T"]
        C, H = self.d_model, self.n_head
        hd, N = C // H, B * T
        # d loss / d logits = (softmax - onehot(target)) / N, in place on the saved softmax.
        dlogits = c["probs"]
        dlogits[c["rows"], c["targets"]] -= 1
        dlogits *= self.dtype.type(1.0 / N)
        mm(dlogits.T, c["xf"], out=G["tok_emb.weight"])  # the head's share; the embedding's is added at the end
        dx = self._layer_norm_backward(mm(dlogits, P["tok_emb.weight"]), c["lnf"], "norm_f")  # (N, C)
        # dx is the gradient of the residual stream; each block adds its branches' gradients to it.
        for layer in reversed(range(self.n_layer)):
            p = f"blocks.{layer}."
            h, ln1, qh, kh, vh, att, y, h2, ln2, u, gelu_saved, a = c["layers"][layer]
            # MLP branch.
            da = self._linear_backward(dx, a, p + "mlp.down_proj")  # (N, 4C), a fresh array
            du = self._gelu_backward(da, u, gelu_saved)
            dh2 = self._linear_backward(du, h2, p + "mlp.up_proj")
            dx += self._layer_norm_backward(dh2, ln2, p + "mlp_norm")
            # Attention branch.
            dy = self._linear_backward(dx, y, p + "attn.out_proj")  # (N, C): heads side by side
            dyh = dy.reshape(B, T, H, hd).transpose(0, 2, 1, 3)  # (B, H, T, hd) view
            datt = mm(dyh, vh.transpose(0, 1, 3, 2))  # (B, H, T, T)
            dq, dk, dv = (np.empty((B, T, H, hd), self.dtype) for _ in range(3))  # written per head, read as (N, C)
            mm(att.transpose(0, 1, 3, 2), dyh, out=dv.transpose(0, 2, 1, 3))
            # Through the softmax, in place: dscores = att * (datt - sum(datt * att)) per row.
            datt -= np.einsum("...i,...i->...", datt, att)[..., None]
            datt *= att  # masked positions have att = 0, so no gradient leaks to the future
            mm(datt, kh, out=dq.transpose(0, 2, 1, 3))  # gradient of the scaled q
            mm(datt.transpose(0, 1, 3, 2), qh, out=dk.transpose(0, 2, 1, 3))  # qh is scaled: the scale is in
            dq = dq.reshape(N, C)
            dq *= self.scale
            dh = self._linear_backward(dq, h, p + "attn.q_proj")
            dh += self._linear_backward(dk.reshape(N, C), h, p + "attn.k_proj")
            dh += self._linear_backward(dv.reshape(N, C), h, p + "attn.v_proj")
            dx += self._layer_norm_backward(dh, ln1, p + "attn_norm")
        # Embeddings. Positions: summed over the batch. Tokens: each row of dx goes to its id's row; as a
        # product with the (N, V) one-hot matrix that is one small GEMM (V is 65 here), where np.add.at
        # adds element by element (10x slower). A large vocabulary would sort the ids and np.add.reduceat.
        self._column_sum(dx.reshape(B, T * C), G["pos_emb.weight"][:T].reshape(T * C))
        G["pos_emb.weight"][T:] = 0
        onehot = np.zeros((N, self.vocab_size), self.dtype)
        onehot[c["rows"], c["ids"]] = 1
        G["tok_emb.weight"] += onehot.T @ dx
        self.cache = {}

    # --- AdamW ------------------------------------------------------------------------------

    def step(self) -> None:
        """One AdamW update of every parameter, as ``minigrad.optim.AdamW`` (and torch's) computes it.

        The same passes, in the same order, as minigrad's (so the same numbers), but over
        the flat arrays a block at a time rather than parameter by parameter.
        """
        lr, eps, wd = self.lr, self.adam_eps, self.weight_decay
        beta1, beta2 = self.betas
        self.t += 1
        step_size, denom_scale = lr / (1 - beta1**self.t), 1 / math.sqrt(1 - beta2**self.t)
        scratch = np.empty(min(_BLOCK, self.flat["param"].size), self.dtype)
        for block in _blocks(self.flat["param"].size):  # 13 passes per block, in cache
            p, g, m, v = (self.flat[k][block] for k in ("param", "grad", "exp_avg", "exp_avg_sq"))
            tmp = scratch[:p.size]
            p *= 1 - lr * wd  # decoupled weight decay, on every parameter
            np.subtract(g, m, out=tmp)  # m = beta1 m + (1 - beta1) g, as m + (1 - beta1)(g - m)
            tmp *= 1 - beta1
            m += tmp
            v *= beta2  # v = beta2 v + (1 - beta2) g^2
            np.multiply(g, g, out=tmp)
            tmp *= 1 - beta2
            v += tmp
            denom = np.sqrt(v, out=tmp)  # the bias corrections, folded into the denominator and the step size
            denom *= denom_scale
            denom += eps
            update = np.divide(m, denom, out=tmp)
            update *= step_size
            p -= update
