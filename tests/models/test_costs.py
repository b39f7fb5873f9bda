"""The cost calculator: the lesson's table digit for digit, published model sizes, and models.GPT."""

import itertools
from types import SimpleNamespace

import pytest

from models.costs import LESSON_MODELS, cost_summary, count, lesson_table

# Printed by the lesson's code cell (../shared/seeds/004_78febfc9bfabf30a.txt, "Costs").
LESSON_PRINTED = """\
GPT-2 small: 0.12 B parameters (0.08 B in layers, 0.04 B embeddings)
   forward FLOPs per token ~ 0.2 GFLOP; KV cache 36 KiB per token, 0.04 GiB for 1024 tokens
7B decoder (multi-head): 6.74 B parameters (6.48 B in layers, 0.26 B embeddings)
   forward FLOPs per token ~ 13.0 GFLOP; KV cache 512 KiB per token, 2.00 GiB for 4096 tokens
8B decoder (grouped-query, 8 KV heads): 8.03 B parameters (6.98 B in layers, 1.05 B embeddings)
   forward FLOPs per token ~ 14.0 GFLOP; KV cache 128 KiB per token, 1.00 GiB for 8192 tokens"""


def small(**changes) -> dict:
    config = dict(vocab_size=11, block_size=8, n_layer=2, n_head=4, n_kv_head=4, d_model=16, d_ff=24,
                  norm="layernorm", position="learned", mlp="gelu", bias=True, tie_weights=True)
    config.update(changes)
    return config


def test_lesson_table_digit_for_digit():
    assert lesson_table("lesson") == LESSON_PRINTED


def test_exact_counts_equal_the_published_sizes():
    # GPT-2 small as distributed (wte, wpe, 12 blocks, ln_f): 124,439,808 numbers. A Llama-2-7B-shaped
    # and a Llama-3-8B-shaped decoder: 6,738,415,616 and 8,030,261,248.
    published = [124_439_808, 6_738_415_616, 8_030_261_248]
    assert [count(config).params for _, config, _ in LESSON_MODELS] == published


def test_lesson_rule_of_thumb_12_d_squared_per_layer():
    d = 64
    costs = count(small(d_model=d, d_ff=4 * d, n_layer=3, vocab_size=100, tie_weights=True), mode="lesson")
    assert costs.params_layers == 3 * 12 * d * d
    assert costs.params_embeddings == 100 * d
    assert costs.params_final_norm == 0
    assert costs.flops_per_token() == 2 * costs.params_layers  # 2 FLOPs per weight, embeddings excluded


def test_exact_count_by_hand_for_a_tiny_config():
    # d=16, ff=24, 2 layers, vocab 11, 8 positions, biases, layernorm, GELU MLP, tied head.
    d, ff = 16, 24
    attention = 4 * (d * d + d)
    mlp = d * ff + ff + ff * d + d
    norms = 2 * (2 * d)
    expected = 11 * d + 8 * d + 2 * (attention + mlp + norms) + 2 * d
    assert count(small()).params == expected


def test_gqa_shrinks_keys_values_and_the_cache():
    mha, gqa = count(small(n_kv_head=4)), count(small(n_kv_head=1))
    d, head_dim, layers = 16, 4, 2
    # K and V projections (weights and biases) go from d x d to d x head_dim.
    assert mha.params - gqa.params == layers * 2 * (d * d + d - d * head_dim - head_dim)
    assert mha.kv_bytes_per_token == 4 * gqa.kv_bytes_per_token
    assert mha.kv_bytes_per_token == 2 * layers * d * 2  # K and V, every layer, 2 bytes each
    assert count(small(), bytes_per_value=4).kv_cache_bytes(100) == 2 * mha.kv_cache_bytes(100)


def test_tied_gated_and_bias_differences():
    d, ff, vocab, layers = 16, 24, 11, 2
    assert count(small(tie_weights=False)).params - count(small()).params == vocab * d
    assert count(small(mlp="swiglu")).params - count(small()).params == layers * (d * ff + ff)
    no_bias = count(small(bias=False))
    # Attention 4 bias vectors of d, MLP ff + d, and each layernorm's shift (2 per layer + final).
    assert count(small()).params - no_bias.params == layers * (4 * d + ff + d + 2 * d) + d
    assert count(small(norm="rmsnorm", bias=False)).params == no_bias.params
    assert count(small(position="rope")).params == count(small()).params - 8 * d


def test_flops_count_every_matrix_product_and_attention_over_the_context():
    d, ff, vocab, layers = 16, 24, 11, 2
    costs = count(small())
    weights = layers * (4 * d * d + 2 * d * ff) + vocab * d  # the output layer runs even when tied
    assert costs.flops_per_token() == 2 * weights
    assert costs.flops_per_token(context=10) == 2 * weights + 10 * layers * 2 * 2 * d
    assert costs.training_flops(tokens=5) == 3 * 5 * 2 * weights


def test_config_as_object_and_defaults():
    as_object = SimpleNamespace(**small())
    assert count(as_object) == count(small())
    minimal = dict(vocab_size=11, n_layer=2, n_head=4, d_model=16, d_ff=24, block_size=8)
    assert count(minimal) == count(small())  # n_kv_head defaults to n_head, and GPT-2-like defaults


@pytest.mark.parametrize("changes, message", [
    (dict(n_head=5), "costs: d_model=16 must be divisible by n_head=5"),
    (dict(n_kv_head=3), "costs: n_head=4 must be divisible by n_kv_head=3"),
    (dict(norm="batchnorm"), "norm='batchnorm'"),
    (dict(mlp="relu"), "mlp='relu'"),
    (dict(block_size=0), "learned positions need block_size > 0"),
])
def test_bad_configs_name_the_field(changes, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        count(small(**changes))


def test_missing_field_and_bad_mode():
    with pytest.raises(ValueError, match="no field 'd_ff'"):
        count({k: v for k, v in small().items() if k != "d_ff"})
    with pytest.raises(ValueError, match="mode='rough'"):
        count(small(), mode="rough")


def test_cost_summary_format():
    text = cost_summary("tiny", count(small()), context=4)
    assert text.startswith("tiny: 0.00 B parameters")
    assert text.endswith("0.00 GiB for 4 tokens")


# --------------------------------------------------------------------------------------
# Exact mode equals the parameters of an instantiated models.GPT
# --------------------------------------------------------------------------------------

_VARIANTS = list(itertools.product(["layernorm", "rmsnorm"], ["learned", "sinusoidal", "rope"], ["gelu", "swiglu"],
                                   [True, False], [True, False], [4, 2]))


@pytest.mark.parametrize("norm, position, mlp, bias, tie, n_kv_head", _VARIANTS)
def test_exact_count_equals_gpt_num_parameters(norm, position, mlp, bias, tie, n_kv_head):
    gpt = pytest.importorskip("models.gpt", reason="models.gpt is not written yet")
    config = small(norm=norm, position=position, mlp=mlp, bias=bias, tie_weights=tie, n_kv_head=n_kv_head,
                   n_layer=1)
    gpt_config = gpt.GPTConfig(**config)
    assert count(gpt_config).params == gpt.GPT(gpt_config).num_parameters()
