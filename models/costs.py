"""What a transformer costs: parameters, forward FLOPs per token, KV-cache memory.

Everything here is arithmetic on a config; no model is built. The config is a
``models.gpt.GPTConfig``, or anything with the same field names (an object or a
dict): ``vocab_size, block_size, n_layer, n_head, n_kv_head, d_model, d_ff,
norm, position, mlp, bias, tie_weights``.

Two ways to count, chosen with ``mode``:

* ``"exact"``: every number a ``models.GPT`` of that config holds, so that
  ``count(config).params == GPT(config).num_parameters()``. Biases, norm weights
  and learned position embeddings are included.
* ``"lesson"``: the transformer lesson's simplified count (weight matrices only:
  the attention projections, the MLP matrices and the embeddings), which is
  where the rules of thumb come from: ``12 d^2`` parameters per layer, and about
  2 FLOPs per parameter per token for the forward pass.

The architecture counted (pre-norm decoder, one block per layer)::

    token embedding        vocab_size x d_model
    position embedding     block_size x d_model        (position == "learned" only)
    each of n_layer blocks:
        norm 1             d_model (+ d_model bias: layernorm with bias=True)
        attention          W_Q, W_O: d_model x d_model; W_K, W_V: d_model x (n_kv_head * head_dim)
                           (+ biases when bias=True)
        norm 2
        MLP                gelu: d_model x d_ff, d_ff x d_model
                           swiglu (gated): two d_model x d_ff matrices and one d_ff x d_model
                           (+ biases when bias=True)
    final norm
    output layer           vocab_size x d_model, unless tied to the token embedding

Grouped-query attention (``n_kv_head < n_head``) shrinks W_K, W_V and the KV
cache: each key/value head serves ``n_head // n_kv_head`` query heads.

FLOPs count the matrix products only (2 per multiply-add); the elementwise work
(norms, activations, softmax) is a few percent and is left out, as in the
lesson. Attention over earlier tokens adds ``attention_flops_per_key`` for each
key a token attends to; ``flops_per_token(context)`` includes it.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import checks

# --------------------------------------------------------------------------------------
# Reading a config
# --------------------------------------------------------------------------------------

_DEFAULTS = {"n_kv_head": None, "norm": "layernorm", "position": "learned", "mlp": "gelu", "bias": True,
             "tie_weights": True, "block_size": 0}
_REQUIRED = ("vocab_size", "n_layer", "n_head", "d_model", "d_ff")


@dataclass(frozen=True)
class _Shape:
    """The config fields the counts need, read from any config-like object and checked."""

    vocab_size: int
    block_size: int
    n_layer: int
    n_head: int
    n_kv_head: int
    d_model: int
    d_ff: int
    norm: str
    position: str
    mlp: str
    bias: bool
    tie_weights: bool

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_head

    @classmethod
    def of(cls, config) -> _Shape:
        def get(name):
            if isinstance(config, dict):
                if name in config:
                    return config[name]
            elif hasattr(config, name):
                return getattr(config, name)
            if name in _DEFAULTS:
                return _DEFAULTS[name]
            raise ValueError(f"costs: the config has no field {name!r} (needed: {', '.join(_REQUIRED)})")

        fields = {name: get(name) for name in (*_REQUIRED, *_DEFAULTS)}
        if fields["n_kv_head"] is None:
            fields["n_kv_head"] = fields["n_head"]
        shape = cls(**fields)
        shape._check()
        return shape

    def _check(self) -> None:
        checks.heads(self, n_kv_head=self.n_kv_head, who="costs")
        checks.choices(self, who="costs", norm=("layernorm", "rmsnorm"), position=("learned", "sinusoidal", "rope"),
                      mlp=("gelu", "swiglu"))
        if self.position == "learned" and self.block_size <= 0:
            raise ValueError("costs: learned positions need block_size > 0 (one embedding per position)")


# --------------------------------------------------------------------------------------
# The counts
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Costs:
    """Parameter, FLOP and memory counts for one config (see ``count``)."""

    params_layers: int  # all n_layer blocks together
    params_embeddings: int  # token embedding, learned positions, untied output layer
    params_final_norm: int  # 0 in the lesson's count
    weight_flops_per_token: int  # forward matrix products with the weights
    attention_flops_per_key: int  # forward, per key attended to (QK^T and the weighted sum of V)
    kv_bytes_per_token: int  # keys and values of one token, all layers

    @property
    def params(self) -> int:
        return self.params_layers + self.params_embeddings + self.params_final_norm

    def flops_per_token(self, context: int = 0) -> int:
        """Forward FLOPs for one token that attends to ``context`` keys (0: the weights only)."""
        return self.weight_flops_per_token + self.attention_flops_per_key * context

    def training_flops(self, tokens: int, context: int = 0) -> int:
        """About 3x the forward pass (forward, then backward for activations and weights): ~6 N D."""
        return 3 * self.flops_per_token(context) * tokens

    def kv_cache_bytes(self, context: int) -> int:
        """Memory the KV cache needs to hold ``context`` tokens of one sequence."""
        return self.kv_bytes_per_token * context


def _norm_params(shape: _Shape) -> int:
    if shape.norm == "rmsnorm":
        return shape.d_model  # a gain per feature
    return shape.d_model * (2 if shape.bias else 1)  # gain, and shift when biases are on


def count(config, mode: str = "exact", bytes_per_value: int = 2) -> Costs:
    """Parameters, forward FLOPs and KV-cache bytes of the decoder described by ``config``.

    ``mode="exact"`` counts everything a ``models.GPT`` holds; ``mode="lesson"``
    counts weight matrices only, as the lesson does. ``bytes_per_value`` is the
    size of one cached key or value number (2 for 16-bit, 4 for float32).
    """
    if mode not in ("exact", "lesson"):
        raise ValueError(f"costs.count: mode={mode!r}; expected 'exact' or 'lesson'")
    s = _Shape.of(config)
    exact = mode == "exact"
    d, kv_width = s.d_model, s.n_kv_head * s.head_dim
    with_bias = exact and s.bias

    # Attention: Q and output projections are d x d; K and V are d x kv_width (smaller under GQA).
    attention_weights = 2 * d * d + 2 * d * kv_width
    attention_biases = (d + 2 * kv_width + d) if with_bias else 0
    # MLP: gated (SwiGLU) has a gate and an up projection, then a down projection.
    n_in = 2 if s.mlp == "swiglu" else 1
    mlp_weights = (n_in + 1) * d * s.d_ff
    mlp_biases = (n_in * s.d_ff + d) if with_bias else 0
    norms = 2 * _norm_params(s) if exact else 0
    per_layer = attention_weights + attention_biases + mlp_weights + mlp_biases + norms

    output_layer = 0 if s.tie_weights else s.vocab_size * d
    positions = s.block_size * d if exact and s.position == "learned" else 0
    embeddings = s.vocab_size * d + output_layer + positions

    # One multiply-add (2 FLOPs) per weight of every matrix product. The lesson counts the
    # layers only; the exact count adds the output layer, which runs whether tied or not.
    matmul_weights = s.n_layer * (attention_weights + mlp_weights)
    if exact:
        matmul_weights += s.vocab_size * d
    return Costs(
        params_layers=s.n_layer * per_layer,
        params_embeddings=embeddings,
        params_final_norm=_norm_params(s) if exact else 0,
        weight_flops_per_token=2 * matmul_weights,
        attention_flops_per_key=2 * 2 * s.n_layer * s.n_head * s.head_dim if exact else 0,
        kv_bytes_per_token=2 * s.n_layer * kv_width * bytes_per_value,  # K and V
    )


# --------------------------------------------------------------------------------------
# The lesson's table
# --------------------------------------------------------------------------------------

# The three decoders of the lesson, as configs (name, config, context length). The fields the
# lesson does not use (norm, position, bias, block_size) are those of the published models, so
# the exact count of each gives its published size.
LESSON_MODELS = [
    ("GPT-2 small",
     dict(vocab_size=50257, block_size=1024, n_layer=12, n_head=12, n_kv_head=12, d_model=768, d_ff=3072,
          norm="layernorm", position="learned", mlp="gelu", bias=True, tie_weights=True),
     1024),
    ("7B decoder (multi-head)",
     dict(vocab_size=32000, block_size=4096, n_layer=32, n_head=32, n_kv_head=32, d_model=4096, d_ff=11008,
          norm="rmsnorm", position="rope", mlp="swiglu", bias=False, tie_weights=False),
     4096),
    ("8B decoder (grouped-query, 8 KV heads)",
     dict(vocab_size=128256, block_size=8192, n_layer=32, n_head=32, n_kv_head=8, d_model=4096, d_ff=14336,
          norm="rmsnorm", position="rope", mlp="swiglu", bias=False, tie_weights=False),
     8192),
]


def cost_summary(name: str, costs: Costs, context: int) -> str:
    """Two lines in the lesson's format: the parameter split, then FLOPs and the KV cache."""
    kv = costs.kv_bytes_per_token
    return (f"{name}: {costs.params / 1e9:.2f} B parameters ({costs.params_layers / 1e9:.2f} B in layers,"
            f" {costs.params_embeddings / 1e9:.2f} B embeddings)\n"
            f"   forward FLOPs per token ~ {costs.flops_per_token() / 1e9:.1f} GFLOP;"
            f" KV cache {kv / 1024:.0f} KiB per token, {costs.kv_cache_bytes(context) / 2**30:.2f} GiB"
            f" for {context} tokens")


def lesson_table(mode: str = "lesson") -> str:
    """The lesson's cost table (``mode="lesson"`` reproduces it digit for digit)."""
    return "\n".join(cost_summary(name, count(config, mode), context) for name, config, context in LESSON_MODELS)


if __name__ == "__main__":
    print("The lesson's count (weight matrices only):")
    print(lesson_table("lesson"))
    print("\nExact count (biases, norms, learned positions and the output layer's FLOPs included):")
    print(lesson_table("exact"))
    for name, config, _ in LESSON_MODELS:
        print(f"{name}: {count(config).params:,} parameters exactly")
