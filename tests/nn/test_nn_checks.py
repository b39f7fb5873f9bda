"""minigrad.nn.checks and models.config_checks: each check written once, its messages, and who uses it."""

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from minigrad.nn import checks
from minigrad.nn import functional as F
from models import config_checks
from models.encoder import EncoderConfig
from models.gpt import GPTConfig
from models.rnn import RNNConfig
from models.seq2seq import Seq2SeqConfig


def test_token_checks_name_the_caller_and_argument():
    with pytest.raises(ValueError, match=r"Model.run: src holds token id 7, outside \[0, vocab_size=5\) "
                                         r"\(2 such id\(s\)"):
        checks.token_batch([[1, 7, 9]], 5, "Model.run", "src")
    with pytest.raises(TypeError, match="Model.run: idx must hold integer token ids, got dtype float32"):
        checks.token_batch(mg.Tensor([[1.0]]), 5, "Model.run")
    with pytest.raises(ValueError, match=r"labels must have shape \(1, 2\) \(one target per input position\), got "
                                         r"\(2,\)"):
        checks.target_batch(np.array([1, 2]), (1, 2), 5, "Model.run", "labels")
    np.testing.assert_array_equal(checks.target_batch([[1, -100]], (1, 2), 5, "Model.run"), [[1, -100]])


def test_targets_may_hold_ignore_index_but_nothing_else_outside_the_vocabulary():
    assert checks.IGNORE_INDEX == -100
    ids = checks.target_batch(np.array([[-100, 4]], dtype=np.int32), (1, 2), 5, "Model.run")
    assert ids.dtype == np.int64
    with pytest.raises(ValueError, match=r"targets holds token id -1, outside \[0, vocab_size=5\) \(1 such id\(s\); "
                                         r"targets shape \(1, 3\), min -100, max 2; use -100 for positions without "
                                         r"a target\)"):
        checks.target_batch([[-100, -1, 2]], (1, 3), 5, "Model.run")


def test_the_layers_functions_and_models_share_the_one_token_check():
    """Embedding, F.embedding, F.cross_entropy and the models all reach ``checks.token_ids``."""
    assert F.token_ids is checks.token_ids
    seen = []
    original = checks.token_ids

    def spy(*args, **kwargs):
        seen.append(args[2] if len(args) > 2 else kwargs.get("who", "embedding"))
        return original(*args, **kwargs)

    import minigrad.nn.functional as functional
    import models.gpt
    saved = functional.token_ids, checks.token_ids
    functional.token_ids = checks.token_ids = spy
    try:
        model = models.gpt.GPT(GPTConfig(vocab_size=7, block_size=4, n_layer=1, n_head=2, d_model=8), seed=0)
        model(np.array([[1, 2, 3]]), np.array([[2, 3, -100]]))
    finally:
        functional.token_ids, checks.token_ids = saved
    assert "GPT.forward" in seen and "cross_entropy" in seen and any(w.startswith("Embedding(") for w in seen)


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


def test_config_checks_name_the_config_and_the_field():
    class Config:
        size, eps, flag, kind, head, n_head, d_model, pad = 0, 0.0, 1, "x", 2, 3, 8, 7

    for call, error, message in [
        (lambda c: config_checks.positive_ints(c, "size"), ValueError,
         "Config: size must be a positive integer, got 0"),
        (lambda c: config_checks.positive_numbers(c, "eps"), ValueError,
         "Config: eps must be a positive number, got 0.0"),
        (lambda c: config_checks.bools(c, "flag"), TypeError, "Config: flag must be True or False, got 1"),
        (lambda c: config_checks.choices(c, kind=("a", "b")), ValueError,
         r"Config: kind='x'; expected one of \('a', 'b'\)"),
        (lambda c: config_checks.heads(c), ValueError, "Config: d_model=8 must be divisible by n_head=3"),
        (lambda c: config_checks.token_ids(c, "size", "pad"), ValueError,
         r"Config: pad=7 is not a token id in \[0, size=0\)"),
    ]:
        with pytest.raises(error, match=message):
            call(Config())
    with pytest.raises(ValueError, match=r"costs: size must be a positive integer"):
        config_checks.positive_ints(Config(), "size", who="costs")


def test_the_configs_reject_non_bool_flags_and_bad_epsilons():
    with pytest.raises(TypeError, match="RNNConfig: tie_weights must be True or False, got 1"):
        RNNConfig(vocab_size=5, tie_weights=1)
    with pytest.raises(TypeError, match="Seq2SeqConfig: norm_first must be True or False"):
        Seq2SeqConfig(src_vocab_size=5, tgt_vocab_size=5, block_size=4, norm_first="yes")
    with pytest.raises(ValueError, match="EncoderConfig: norm_eps must be a positive number, got -1"):
        EncoderConfig(vocab_size=5, block_size=4, norm_eps=-1)
    with pytest.raises(ValueError, match=r"Seq2SeqConfig: bos_id=2.5 is not a target token id"):
        Seq2SeqConfig(src_vocab_size=5, tgt_vocab_size=5, block_size=4, bos_id=2.5)


def test_layer_input_checks_live_in_checks_and_name_the_layer():
    layer = nn.Linear(4, 2)
    from minigrad.nn import layers
    assert layers.check_features is checks.check_features  # the layers use these, not copies
    with pytest.raises(TypeError, match=r"Linear\(in_features=4, out_features=2, bias=True\): the input is float64 "
                                        r"but the layer's parameters are float32"):
        checks.check_input(layer, mg.Tensor(np.zeros((1, 4))))
    with pytest.raises(ValueError, match=r"the x has shape \(1, 3\), but its last axis should have 4 features"):
        checks.check_features(layer, mg.Tensor(np.zeros((1, 3), np.float32)), 4, "x")
    assert checks.describe(nn.Dropout(0.5)) == "Dropout(p=0.5)"


def test_gradcheck_keeps_its_public_name():
    from minigrad.nn.gradcheck import gradcheck
    assert nn.gradcheck is gradcheck


def test_every_model_names_its_config_class_and_how_to_make_one():
    import dataclasses

    from models.encoder import MaskedLM
    from models.gpt import GPT
    from models.rnn import RNNLM
    from models.seq2seq import Seq2Seq
    for model, config in [(GPT, GPTConfig(vocab_size=5, block_size=4)), (RNNLM, RNNConfig(vocab_size=5)),
                          (MaskedLM, EncoderConfig(vocab_size=5, block_size=4)),
                          (Seq2Seq, Seq2SeqConfig(src_vocab_size=5, tgt_vocab_size=5, block_size=4))]:
        name, cls = model.__name__, type(config).__name__
        with pytest.raises(TypeError, match=rf"{name}: config must be an instance of {cls}, got dict \(from a dict: "
                                            rf"{name}\({cls}\(\*\*d\)\)\)"):
            model(dataclasses.asdict(config))
