"""models/checks.py, the models' input checks: config fields and (B, T) batches, each rule written once, its
messages naming the model and the argument; the targets checked once per step, by the loss."""

import dataclasses

import numpy as np
import pytest

import minigrad as mg
from minigrad import fused
from minigrad.nn import checks as layer_checks
from models import checks
from models.encoder import EncoderConfig, MaskedLM
from models.gpt import GPT, GPTConfig
from models.rnn import RNNLM, RNNConfig
from models.seq2seq import Seq2Seq, Seq2SeqConfig


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
    assert layer_checks.IGNORE_INDEX == -100
    ids = checks.target_batch(np.array([[-100, 4]], dtype=np.int32), (1, 2), 5, "Model.run")
    assert ids.dtype == np.int64
    with pytest.raises(ValueError, match=r"targets holds token id -1, outside \[0, vocab_size=5\) \(1 such id\(s\); "
                                         r"targets shape \(1, 3\), min -100, max 2; use -100 for positions without "
                                         r"a target\)"):
        checks.target_batch([[-100, -1, 2]], (1, 3), 5, "Model.run")


def test_config_checks_name_the_config_and_the_field():
    class Config:
        size, eps, flag, kind, head, n_head, d_model, pad = 0, 0.0, 1, "x", 2, 3, 8, 7

    for call, error, message in [
        (lambda c: checks.positive_ints(c, "size"), ValueError,
         "Config: size must be a positive integer, got 0"),
        (lambda c: checks.positive_numbers(c, "eps"), ValueError,
         "Config: eps must be a positive number, got 0.0"),
        (lambda c: checks.bools(c, "flag"), TypeError, "Config: flag must be True or False, got 1"),
        (lambda c: checks.choices(c, kind=("a", "b")), ValueError,
         r"Config: kind='x'; expected one of \('a', 'b'\)"),
        (lambda c: checks.heads(c), ValueError, "Config: d_model=8 must be divisible by n_head=3"),
        (lambda c: checks.token_id_fields(c, "size", "pad"), ValueError,
         r"Config: pad=7 is not a token id in \[0, size=0\)"),
    ]:
        with pytest.raises(error, match=message):
            call(Config())
    with pytest.raises(ValueError, match=r"costs: size must be a positive integer"):
        checks.positive_ints(Config(), "size", who="costs")


def test_the_configs_reject_non_bool_flags_and_bad_epsilons():
    with pytest.raises(TypeError, match="RNNConfig: tie_weights must be True or False, got 1"):
        RNNConfig(vocab_size=5, tie_weights=1)
    with pytest.raises(TypeError, match="Seq2SeqConfig: norm_first must be True or False"):
        Seq2SeqConfig(src_vocab_size=5, tgt_vocab_size=5, block_size=4, norm_first="yes")
    with pytest.raises(ValueError, match="EncoderConfig: norm_eps must be a positive number, got -1"):
        EncoderConfig(vocab_size=5, block_size=4, norm_eps=-1)
    with pytest.raises(ValueError, match=r"Seq2SeqConfig: bos_id=2.5 is not a target token id"):
        Seq2SeqConfig(src_vocab_size=5, tgt_vocab_size=5, block_size=4, bos_id=2.5)


def test_every_model_names_its_config_class_and_how_to_make_one():

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


def _tiny_gpt():
    return GPT(GPTConfig(vocab_size=7, block_size=4, n_layer=1, n_head=2, d_model=8), seed=0)


def test_a_training_step_checks_its_targets_once(monkeypatch):
    """Forward and backward of a GPT step: the targets' range is read once (by the loss), not in each layer."""
    ranges, ids = [], []
    check_targets, token_ids = fused.loss._check_targets, layer_checks.token_ids
    monkeypatch.setattr(fused.loss, "_check_targets", lambda *a: ranges.append(a) or check_targets(*a))
    for module in (layer_checks, checks):  # models/checks.py imported it by name
        monkeypatch.setattr(module, "token_ids", lambda *a, **k: ids.append(a[2] if len(a) > 2 else k.get("who"))
                            or token_ids(*a, **k))
    _, loss = _tiny_gpt()(np.array([[1, 2, 3]]), np.array([[2, 3, -100]]))
    loss.backward()
    assert len(ranges) == 1
    assert ids == ["GPT.forward"]  # the token ids (idx), once; the targets are not checked a second time


@pytest.mark.parametrize("targets, error, message", [
    ([[2, 9, 1]], ValueError, r"GPT.forward: targets holds token id 9, outside \[0, vocab_size=7\) \(1 such id\(s\); "
                              r"targets shape \(1, 3\), min 1, max 9; use -100 for positions without a target\)"),
    ([[2, -1, 1]], ValueError, r"GPT.forward: targets holds token id -1, outside \[0, vocab_size=7\)"),
    ([[2, 3]], ValueError, r"GPT.forward: targets must have shape \(1, 3\) \(one target per input position\), "
                           r"got \(1, 2\)"),
    ([[2.0, 3.0, 1.0]], TypeError, r"GPT.forward: targets must hold integer token ids, got dtype float64"),
])
def test_bad_targets_are_the_models_own_error(targets, error, message):
    with pytest.raises(error, match=message):
        _tiny_gpt()(np.array([[1, 2, 3]]), np.array(targets))


def test_every_model_names_its_targets_argument():
    with pytest.raises(ValueError, match=r"RNNLM.forward: targets holds token id 5"):
        RNNLM(RNNConfig(vocab_size=5))(np.array([[1, 2]]), np.array([[1, 5]]))
    with pytest.raises(ValueError, match=r"MaskedLM.forward: targets holds token id 5"):
        MaskedLM(EncoderConfig(vocab_size=5, block_size=4))(np.array([[1, 2]]), np.array([[-100, 5]]))
    model = Seq2Seq(Seq2SeqConfig(src_vocab_size=5, tgt_vocab_size=6, block_size=4, pad_id=0))
    with pytest.raises(ValueError, match=r"Seq2Seq.forward: tgt_out holds token id 6, outside \[0, vocab_size=6\)"):
        model(np.array([[1, 2]]), np.array([[1, 2]]), np.array([[6, 0]]))
    with pytest.raises(TypeError, match=r"Seq2Seq.forward: tgt_out must hold integer token ids"):
        model(np.array([[1, 2]]), np.array([[1, 2]]), np.array([[1.5, 0.0]]))
