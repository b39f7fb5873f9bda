"""GPT-2 weights: Hugging Face GPT-2 safetensors files into models.GPT and back, checked against transformers.

The transformers tests build a small *random* GPT2LMHeadModel (nothing is
downloaded) and compare logits both ways. They are skipped where torch or
transformers is not installed (``pip install torch==2.13.0 transformers``).
"""

import json
import os

import numpy as np
import pytest
import safetensors.numpy

from models.gpt import GPT, GPTConfig

os.environ["HF_HUB_OFFLINE"] = "1"  # never reach for the network (set before transformers is imported)

SHAPE = dict(vocab_size=50, block_size=16, n_layer=2, n_head=4, d_model=32)


@pytest.fixture(scope="module")
def hf():
    """(torch, transformers), or skip the test."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
    transformers = pytest.importorskip("transformers", reason="transformers is not installed (pip install "
                                                              "transformers)")
    return torch, transformers


def random_hf_gpt2(hf, **changes):
    torch, transformers = hf
    torch.manual_seed(0)
    options = dict(n_embd=32, n_layer=2, n_head=4, vocab_size=50, n_positions=16)
    options.update(changes)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(**options)).eval()
    with torch.no_grad():  # LayerNorms start at (1, 0): make them matter
        for name, p in model.named_parameters():
            if ".ln_" in name:
                p.add_(0.1 * torch.randn_like(p))
    return model


def hf_logits(hf, model, idx):
    torch, _ = hf
    with torch.no_grad():
        return model(torch.from_numpy(idx)).logits.numpy()


def tokens(*shape, seed=0):
    return np.random.default_rng(seed).integers(0, 50, size=shape)


def minigrad_gpt2(**changes) -> GPT:
    model = GPT(GPTConfig(**{**SHAPE, **changes}), seed=1)
    for p in model.parameters():  # biases and norms away from 0 and 1, so a swapped name would show
        p.data += np.random.default_rng(2).normal(0, 0.05, p.shape).astype(np.float32)
    return model


# --------------------------------------------------------------------------------------
# transformers -> minigrad
# --------------------------------------------------------------------------------------


def test_hugging_face_gpt2_loads_with_the_same_logits(hf, tmp_path):
    reference = random_hf_gpt2(hf)
    reference.save_pretrained(tmp_path, safe_serialization=True)
    model = GPT.from_gpt2(tmp_path / "model.safetensors")  # n_head from the config.json beside it
    c = model.config
    assert (c.vocab_size, c.block_size, c.n_layer, c.n_head, c.d_model, c.d_ff) == (50, 16, 2, 4, 32, 128)
    assert c.gelu_approximate == "tanh" and c.tie_weights and model.lm_head.weight is model.tok_emb.weight
    idx = tokens(2, 16)
    np.testing.assert_allclose(model(idx)[0].data, hf_logits(hf, reference, idx), atol=1e-4, rtol=0)
    # A directory works too; and the KV cache decodes what transformers would predict greedily.
    generated = GPT.from_gpt2(tmp_path).generate(idx[:, :4], 8, temperature=0.0)
    expected_next = hf_logits(hf, reference, generated)[:, 3:-1].argmax(-1)
    np.testing.assert_array_equal(generated[:, 4:], expected_next)


def test_weights_without_the_transformer_prefix_and_n_head_given(hf, tmp_path):
    reference = random_hf_gpt2(hf, activation_function="gelu")
    reference.save_pretrained(tmp_path, safe_serialization=True)
    tensors = safetensors.numpy.load_file(tmp_path / "model.safetensors")
    bare = tmp_path / "bare"
    bare.mkdir()
    safetensors.numpy.save_file({k.removeprefix("transformer."): v for k, v in tensors.items()},
                                bare / "weights.safetensors")
    with pytest.raises(ValueError, match="pass n_head=..., or put the model's config.json"):
        GPT.from_gpt2(bare / "weights.safetensors")
    model = GPT.from_gpt2(bare / "weights.safetensors", n_head=4)
    assert model.config.gelu_approximate == "tanh"  # no config.json: GPT-2's default GELU
    (bare / "config.json").write_text(json.dumps({"n_head": 4, "activation_function": "gelu"}))
    model = GPT.from_gpt2(bare / "weights.safetensors")
    assert model.config.gelu_approximate == "none"
    idx = tokens(2, 16)
    np.testing.assert_allclose(model(idx)[0].data, hf_logits(hf, reference, idx), atol=1e-4, rtol=0)
    with pytest.raises(ValueError, match="n_head=2 was passed, but the config.json beside .* says n_head=4"):
        GPT.from_gpt2(bare / "weights.safetensors", n_head=2)


# --------------------------------------------------------------------------------------
# minigrad -> transformers
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("changes", [{}, dict(tie_weights=False, gelu_approximate="none", norm_eps=1e-6)])
def test_saved_gpt2_loads_in_transformers_with_the_same_logits(hf, tmp_path, changes):
    _, transformers = hf
    model = minigrad_gpt2(**changes)
    model.save_gpt2(tmp_path / "export")
    reference = transformers.GPT2LMHeadModel.from_pretrained(tmp_path / "export").eval()
    idx = tokens(3, 16)
    np.testing.assert_allclose(hf_logits(hf, reference, idx), model(idx)[0].data, atol=1e-4, rtol=0)


# --------------------------------------------------------------------------------------
# Without transformers: the round trip, and the errors
# --------------------------------------------------------------------------------------


def test_round_trip_through_the_gpt2_format(tmp_path):
    model = minigrad_gpt2(tie_weights=False)
    model.save_gpt2(tmp_path / "model.safetensors")
    config = json.loads((tmp_path / "config.json").read_text())
    assert (config["n_head"], config["n_embd"], config["n_positions"], config["tie_word_embeddings"]) == \
           (4, 32, 16, False)
    stored = safetensors.numpy.load_file(tmp_path / "model.safetensors")
    assert stored["transformer.h.0.attn.c_attn.weight"].shape == (32, 96)  # Conv1D: (in, out)
    np.testing.assert_array_equal(stored["transformer.h.1.mlp.c_fc.weight"], model.blocks[1].mlp.up_proj.weight.data.T)
    loaded = GPT.from_gpt2(tmp_path)
    assert loaded.config == model.config
    idx = tokens(2, 16)
    np.testing.assert_array_equal(loaded(idx)[0].data, model(idx)[0].data)


def test_save_refuses_models_gpt2_cannot_express(tmp_path):
    model = GPT(GPTConfig(**SHAPE, norm="rmsnorm", position="rope", n_kv_head=2), seed=0)
    with pytest.raises(ValueError, match=r"not GPT-2-shaped: norm='rmsnorm' \(GPT-2: 'layernorm'\); "
                                         r"position='rope' .*n_kv_head=2"):
        model.save_gpt2(tmp_path / "export")
    assert not os.path.exists(tmp_path / "export")


def test_load_rejects_files_that_are_not_gpt2(tmp_path):
    safetensors.numpy.save_file({"weight": np.zeros((2, 2), np.float32)}, tmp_path / "other.safetensors")
    with pytest.raises(ValueError, match="is not a GPT-2 weight file: it has no 'wte.weight'"):
        GPT.from_gpt2(tmp_path / "other.safetensors", n_head=1)
    minigrad_gpt2().save_gpt2(tmp_path / "gpt2")
    tensors = safetensors.numpy.load_file(tmp_path / "gpt2" / "model.safetensors")
    tensors["transformer.h.0.attn.extra"] = np.zeros(3, np.float32)
    safetensors.numpy.save_file(tensors, tmp_path / "gpt2" / "model.safetensors")
    with pytest.raises(ValueError, match=r"has tensor\(s\) a GPT-2 does not: \['h.0.attn.extra'\]"):
        GPT.from_gpt2(tmp_path / "gpt2")
    del tensors["transformer.h.1.ln_2.bias"]
    safetensors.numpy.save_file(tensors, tmp_path / "gpt2" / "model.safetensors")
    with pytest.raises(ValueError, match=r"lacks 1 GPT-2 tensor\(s\): \['h.1.ln_2.bias'\]"):
        GPT.from_gpt2(tmp_path / "gpt2")
    with pytest.raises(FileNotFoundError, match="no such file"):
        GPT.from_gpt2(tmp_path / "missing.safetensors")


@pytest.mark.parametrize("text, message", [
    ("{not json", "is not a readable JSON file"),
    ("[1, 2]", "must hold a JSON object of GPT-2 settings, not a list"),
    ("[" * 100_000, "is not a readable JSON file"),
    ('{"n_head": "4"}', "settings of the wrong kind: {'n_head': '4'}"),
    ('{"n_head": 0}', "settings of the wrong kind"),
    ('{"activation_function": ["gelu"]}', "settings of the wrong kind"),
    ('{"layer_norm_epsilon": "1e-5"}', "settings of the wrong kind"),
    ('{"layer_norm_epsilon": -1}', "settings of the wrong kind"),
    ('{"scale_attn_weights": "yes"}', "settings of the wrong kind"),
])
def test_a_damaged_config_json_is_a_load_gpt2_error_naming_the_file(tmp_path, text, message):
    minigrad_gpt2().save_gpt2(tmp_path / "model.safetensors")
    (tmp_path / "config.json").write_text(text)
    with pytest.raises(ValueError, match="load_gpt2: .*config.json") as caught:
        GPT.from_gpt2(tmp_path)
    assert message in str(caught.value)
    (tmp_path / "config.json").write_bytes(b"\xff\xfe")  # not UTF-8 either
    with pytest.raises(ValueError, match="is not a readable JSON file"):
        GPT.from_gpt2(tmp_path)


@pytest.mark.parametrize("settings, message", [
    ({"n_head": 3}, "n_head=3 does not divide the weights' width n_embd=32; the number of heads is wrong"),
    ({"n_head": 4, "vocab_size": 5}, "does not describe its weights: vocab_size=5 where the weights have"),
    ({"n_head": 4, "n_embd": 64, "n_layer": "2"}, "n_layer='2' where the weights have 2, n_embd=64 where"),
    ({"n_head": 4, "n_positions": 4}, "n_positions=4 where the weights have 16"),
])
def test_a_config_json_of_another_model_is_a_load_gpt2_error(tmp_path, settings, message):
    """A config.json whose sizes contradict the weights beside it belongs to another model: said, not ignored."""
    minigrad_gpt2().save_gpt2(tmp_path / "model.safetensors")
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, **settings}))
    with pytest.raises(ValueError, match="load_gpt2: ") as caught:
        GPT.from_gpt2(tmp_path)
    assert message in str(caught.value)
