"""minigrad.nn.checks, the layers' input checks: each written once, its messages, and who uses it (the configs
share its rules: a probability, GELU's forms, heads)."""

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from minigrad.nn import checks
from minigrad.nn import functional as F
from models.encoder import EncoderConfig
from models.gpt import GPTConfig
from models.rnn import RNNConfig
from models.seq2seq import Seq2SeqConfig


def test_padding_mask_and_attention_mask_checks():
    assert checks.check_padding_mask("Attn", np.array([[True, False]]), (1, 2)).dtype == np.bool_
    with pytest.raises(ValueError, match=r"Attn: key_padding_mask must be bool \(B, Tk\) = \(1, 2\) with True at "
                                         r"padding, got \(1, 2\) int64"):
        checks.check_padding_mask("Attn", np.array([[1, 0]]), (1, 2))
    with pytest.raises(TypeError, match="Attn: attn_mask must be bool"):
        checks.check_mask_broadcasts("Attn", "attn_mask", np.zeros((2, 2), dtype=int), (1, 1, 2, 2))
    checks.check_mask_broadcasts("Attn", "attn_mask", np.ones((2, 2), dtype=bool), (1, 1, 2, 2))


@pytest.mark.parametrize("p", [0, 0.0, 0.5, 1, 1.0, np.float32(0.25)])
def test_one_probability_rule_for_dropout_its_module_and_the_configs(p):
    """PyTorch's rule, 0 <= p <= 1, in F.dropout, nn.Dropout and every model config."""
    x = mg.Tensor(np.ones((2, 3), np.float32))
    assert F.dropout(x, p, training=False) is x
    assert nn.Dropout(p).p == float(p)
    GPTConfig(vocab_size=5, block_size=4, n_head=2, d_model=8, dropout=p)
    RNNConfig(vocab_size=5, dropout=p)
    EncoderConfig(vocab_size=5, block_size=4, dropout=p)
    Seq2SeqConfig(src_vocab_size=5, tgt_vocab_size=5, block_size=4, dropout=p)


@pytest.mark.parametrize("p", [-0.1, 1.5, True, "0.1", None, float("nan")])
def test_a_probability_outside_the_rule_is_rejected_everywhere_with_the_same_words(p):
    x = mg.Tensor(np.ones((2, 3), np.float32))
    cases = [(lambda: F.dropout(x, p), "dropout: p"), (lambda: nn.Dropout(p), "Dropout: p"),
             (lambda: GPTConfig(vocab_size=5, block_size=4, n_head=2, d_model=8, dropout=p), "GPTConfig: dropout"),
             (lambda: RNNConfig(vocab_size=5, dropout=p), "RNNConfig: dropout"),
             (lambda: EncoderConfig(vocab_size=5, block_size=4, dropout=p), "EncoderConfig: dropout"),
             (lambda: Seq2SeqConfig(src_vocab_size=5, tgt_vocab_size=5, block_size=4, dropout=p),
              "Seq2SeqConfig: dropout")]
    for make, who in cases:
        with pytest.raises(ValueError, match=rf"{who} must be a probability in \[0, 1\], got "):
            make()


def test_gelus_form_is_checked_in_one_place_for_function_module_and_configs():
    x = mg.Tensor(np.ones(3, np.float32))
    for make, who in [(lambda: F.gelu(x, "fast"), "gelu: approximate"), (lambda: nn.GELU("fast"), "GELU: approximate"),
                      (lambda: GPTConfig(vocab_size=5, block_size=4, gelu_approximate="fast"),
                       "GPTConfig: gelu_approximate"),
                      (lambda: EncoderConfig(vocab_size=5, block_size=4, gelu_approximate="fast"),
                       "EncoderConfig: gelu_approximate")]:
        with pytest.raises(ValueError, match=rf"{who}='fast'; expected one of \('none', 'tanh'\)"):
            make()


def test_one_head_rule_for_attention_configs_and_costs():
    from models import costs
    with pytest.raises(ValueError, match=r"MultiHeadAttention: d_model=10 must be divisible by n_heads=4 "
                                         r"\(each head gets d_model // n_heads features\)"):
        nn.MultiHeadAttention(10, 4)
    for make, who in [(lambda: GPTConfig(vocab_size=5, block_size=4, n_head=4, d_model=10), "GPTConfig"),
                      (lambda: EncoderConfig(vocab_size=5, block_size=4, n_head=4, d_model=10), "EncoderConfig"),
                      (lambda: Seq2SeqConfig(src_vocab_size=5, tgt_vocab_size=5, block_size=4, n_head=4, d_model=10),
                       "Seq2SeqConfig"),
                      (lambda: costs.count(dict(vocab_size=5, block_size=4, n_layer=1, n_head=4, d_model=10,
                                                d_ff=8)), "costs")]:
        with pytest.raises(ValueError, match=rf"{who}: d_model=10 must be divisible by n_head=4 \(each head gets "
                                             rf"d_model // n_head features\)"):
            make()
    with pytest.raises(ValueError, match=r"n_heads=4 must be divisible by n_kv_heads=0"):
        nn.MultiHeadAttention(8, 4, n_kv_heads=0)
    with pytest.raises(ValueError, match=r"n_heads=0"):
        nn.MultiHeadAttention(8, 0)


def test_the_embedding_and_its_function_share_the_one_id_check():
    """nn.Embedding and F.embedding reach ``checks.token_ids``, naming the layer or the function."""
    from minigrad.nn import layers
    assert layers.token_ids is checks.token_ids
    with pytest.raises(IndexError, match=r"Embedding\(5, 2\): ids holds token id 5"):
        nn.Embedding(5, 2)(np.array([5]))
    with pytest.raises(IndexError, match=r"embedding: ids holds token id -1, outside \[0, num_embeddings=5\)"):
        F.embedding(np.array([-1]), mg.Tensor(np.zeros((5, 2), np.float32)))


def test_layer_input_checks_live_in_checks_and_name_the_layer():
    layer = nn.Linear(4, 2)
    from minigrad.nn import layers
    assert layers.check_features is checks.check_features  # the layers use these, not copies
    with pytest.raises(TypeError, match=r"Linear\(in_features=4, out_features=2, bias=True\): the input is float64 "
                                        r"but the layer's parameters are float32"):
        checks.check_input(layer, mg.Tensor(np.zeros((1, 4))))
    with pytest.raises(ValueError, match=r"the x has shape \(1, 3\), but its last axis should have 4 features"):
        checks.check_features(layer, mg.Tensor(np.zeros((1, 3), np.float32)), 4, "x")
    assert checks.layer_repr(nn.Dropout(0.5)) == "Dropout(p=0.5)"


def test_a_modules_gradcheck_has_its_own_name():
    """mg.gradcheck(fn, inputs) checks a function; nn.gradcheck_module(module, *inputs) a module: two names."""
    from minigrad.nn.gradcheck_module import gradcheck_module
    assert nn.gradcheck_module is gradcheck_module and not hasattr(nn, "gradcheck")
    with pytest.raises(TypeError, match=r"nn.gradcheck_module: the first argument must be a Module, not function "
                                        r"\(for a plain function use minigrad.gradcheck\(fn, inputs\)\)"):
        nn.gradcheck_module(lambda x: x, mg.Tensor(np.ones(2)))
