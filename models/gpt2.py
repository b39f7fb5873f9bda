"""GPT-2 weights in and out: Hugging Face's GPT-2 safetensors files <-> ``models.GPT``.

GPT-2 is a ``models.GPT`` with LayerNorm, learned positions, a GELU (tanh
formula) MLP of width 4 * d_model, biases everywhere and the output layer tied
to the token embedding. Only the names and one layout differ. Hugging Face's
``GPT2LMHeadModel`` stores (with or without a ``transformer.`` prefix)::

    wte.weight (vocab, d)               -> tok_emb.weight
    wpe.weight (n_positions, d)         -> pos_emb.weight
    h.{i}.ln_1.weight / .bias           -> blocks.{i}.attn_norm.weight / .bias
    h.{i}.attn.c_attn.weight (d, 3d)    -> blocks.{i}.attn.q_proj / k_proj / v_proj .weight, each (d, d)
    h.{i}.attn.c_attn.bias (3d,)        -> ... .bias, each (d,)
    h.{i}.attn.c_proj.weight (d, d)     -> blocks.{i}.attn.out_proj.weight
    h.{i}.ln_2.weight / .bias           -> blocks.{i}.mlp_norm.weight / .bias
    h.{i}.mlp.c_fc.weight (d, d_ff)     -> blocks.{i}.mlp.up_proj.weight (d_ff, d)
    h.{i}.mlp.c_proj.weight (d_ff, d)   -> blocks.{i}.mlp.down_proj.weight (d, d_ff)
    ln_f.weight / .bias                 -> norm_f.weight / .bias

GPT-2's linear layers are ``Conv1D`` modules computing ``x @ W + b``, so their
weights are stored (in_features, out_features): the transpose of ``nn.Linear``'s
(out, in). And GPT-2 computes q, k and v with one matrix ``c_attn``; its three
column blocks are our ``q_proj``, ``k_proj`` and ``v_proj``.

The file holds no head count (the shapes cannot tell 12 heads of 64 from 6 of
128), so ``n_head`` comes from the ``config.json`` that ``save_pretrained``
writes beside the weights, or from the caller.
"""

from __future__ import annotations

import json
import os
import re

import numpy as np

from minigrad import io
from minigrad.files import atomic_write

from .gpt import GPT, GPTConfig

# (GPT-2 name, models.GPT name, stored transposed?) for the tensors of block i that map one to one.
_BLOCK_TENSORS = [
    ("ln_1.weight", "attn_norm.weight", False),
    ("ln_1.bias", "attn_norm.bias", False),
    ("attn.c_proj.weight", "attn.out_proj.weight", True),
    ("attn.c_proj.bias", "attn.out_proj.bias", False),
    ("ln_2.weight", "mlp_norm.weight", False),
    ("ln_2.bias", "mlp_norm.bias", False),
    ("mlp.c_fc.weight", "mlp.up_proj.weight", True),
    ("mlp.c_fc.bias", "mlp.up_proj.bias", False),
    ("mlp.c_proj.weight", "mlp.down_proj.weight", True),
    ("mlp.c_proj.bias", "mlp.down_proj.bias", False),
]
_TOP_TENSORS = [("wte.weight", "tok_emb.weight"), ("wpe.weight", "pos_emb.weight"),
                ("ln_f.weight", "norm_f.weight"), ("ln_f.bias", "norm_f.bias")]
_QKV = ("q_proj", "k_proj", "v_proj")
# Older GPT-2 files also store each block's causal mask (attn.bias, attn.masked_bias): buffers, not weights.
_MASK_BUFFER = re.compile(r"h\.\d+\.attn\.(bias|masked_bias)$")
_GELU = {"gelu_new": "tanh", "gelu_pytorch_tanh": "tanh", "gelu": "none"}  # Hugging Face name -> approximate


# --------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------


def load_gpt2(path, n_head: int | None = None) -> GPT:
    """A ``models.GPT`` with the weights of a GPT-2 safetensors file (or a directory holding model.safetensors).

    The shapes give vocab_size, block_size, d_model, d_ff and n_layer;
    ``n_head`` comes from the argument or the config.json beside the file
    (which also gives the GELU variant and the LayerNorm epsilon). A separate
    ``lm_head.weight`` that differs from ``wte.weight`` gives an untied head.
    """
    file = os.path.join(path, "model.safetensors") if os.path.isdir(path) else os.fspath(path)
    if not os.path.isfile(file):
        raise FileNotFoundError(f"load_gpt2: no such file: {file}")
    tensors = {_strip(name): array for name, array in io.load_safetensors(file).items()}
    tensors = {name: array for name, array in tensors.items() if not _MASK_BUFFER.match(name)}
    hf = _read_config(os.path.join(os.path.dirname(file), "config.json"))
    config = _infer_config(tensors, hf, n_head, file)
    model = GPT(config, seed=0)  # the random weights are all replaced below
    model.load_state_dict(_to_minigrad(tensors, config, file))
    return model


def _strip(name: str) -> str:
    return name[len("transformer."):] if name.startswith("transformer.") else name


def _read_config(path: str) -> dict:
    """The config.json beside the weights ({} if there is none), its settings checked before any is used."""
    if not os.path.isfile(path):
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as err:  # (JSONDecodeError is a ValueError)
        raise ValueError(f"load_gpt2: {path} is not a readable JSON file ({type(err).__name__}: {err})") from None
    if not isinstance(config, dict):
        raise ValueError(f"load_gpt2: {path} must hold a JSON object of GPT-2 settings, not a {type(config).__name__}")
    wrong = {key: config[key] for key, right in _CONFIG_TYPES.items() if key in config and not right(config[key])}
    if wrong:
        raise ValueError(f"load_gpt2: {path} has settings of the wrong kind: {wrong} (n_head: a whole number >= 1, "
                         f"activation_function: a string, layer_norm_epsilon: a number > 0, the options: true/false)")
    supported = {"scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False,
                 "reorder_and_upcast_attn": False, "add_cross_attention": False}
    unsupported = {key: config[key] for key, ok in supported.items() if config.get(key, ok) != ok}
    if unsupported:
        raise ValueError(f"load_gpt2: {path} asks for GPT-2 options models.GPT does not implement: {unsupported}")
    return config


_CONFIG_TYPES = {  # the settings load_gpt2 reads, and what each must be
    "n_head": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1,
    "activation_function": lambda v: isinstance(v, str),
    "layer_norm_epsilon": lambda v: isinstance(v, int | float) and not isinstance(v, bool) and 0 < v < float("inf"),
    **{option: lambda v: isinstance(v, bool) for option in ("scale_attn_weights", "scale_attn_by_inverse_layer_idx",
                                                           "reorder_and_upcast_attn", "add_cross_attention")},
}


def _infer_config(tensors: dict, hf: dict, n_head: int | None, file: str) -> GPTConfig:
    for name in ("wte.weight", "wpe.weight", "h.0.mlp.c_fc.weight"):
        if name not in tensors:
            raise ValueError(f"load_gpt2: {file} is not a GPT-2 weight file: it has no {name!r} "
                             f"(its first names: {sorted(tensors)[:5]})")
    if n_head is None:
        n_head = hf.get("n_head")
    elif hf.get("n_head", n_head) != n_head:
        raise ValueError(f"load_gpt2: n_head={n_head} was passed, but the config.json beside {file} says "
                         f"n_head={hf['n_head']}")
    if n_head is None:
        raise ValueError(f"load_gpt2: the number of heads is not stored in the weights; pass n_head=..., or put "
                         f"the model's config.json (with \"n_head\") beside {file}")
    activation = hf.get("activation_function", "gelu_new")
    if activation not in _GELU:
        raise ValueError(f"load_gpt2: activation_function={activation!r} is not supported (only {sorted(_GELU)})")
    vocab_size, d_model = tensors["wte.weight"].shape
    tied = "lm_head.weight" not in tensors or np.array_equal(tensors["lm_head.weight"], tensors["wte.weight"])
    sizes = dict(vocab_size=int(vocab_size), n_positions=int(tensors["wpe.weight"].shape[0]),
                 n_layer=len({name.split(".")[1] for name in tensors if name.startswith("h.")}), n_embd=int(d_model),
                 n_inner=int(tensors["h.0.mlp.c_fc.weight"].shape[1]))
    differ = {key: (hf[key], size) for key, size in sizes.items() if hf.get(key) is not None and hf[key] != size}
    if differ:  # the weights' shapes are the model; a config.json that says otherwise belongs to another one
        raise ValueError(f"load_gpt2: the config.json beside {file} does not describe its weights: "
                         + ", ".join(f"{key}={said!r} where the weights have {size}" for key, (said, size) in
                                     differ.items()) + "; put that model's own config.json beside it")
    if d_model % n_head:
        raise ValueError(f"load_gpt2: n_head={n_head} does not divide the weights' width n_embd={d_model}; the "
                         f"number of heads is wrong (from {'the config.json' if 'n_head' in hf else 'n_head='})")
    return GPTConfig(vocab_size=sizes["vocab_size"], block_size=sizes["n_positions"], n_layer=sizes["n_layer"],
                     n_head=int(n_head), d_model=int(d_model), d_ff=sizes["n_inner"],
                     gelu_approximate=_GELU[activation], norm_eps=float(hf.get("layer_norm_epsilon", 1e-5)),
                     dropout=0.0, bias=True, tie_weights=bool(tied))


def _to_minigrad(tensors: dict, config: GPTConfig, file: str) -> dict[str, np.ndarray]:
    """GPT-2 names and layouts -> the state_dict of a models.GPT; one error listing every missing/extra name."""
    d, state, used = config.d_model, {}, set()

    def take(name: str) -> np.ndarray:
        used.add(name)
        return np.asarray(tensors[name], dtype=np.float32)

    expected = [g for g, _ in _TOP_TENSORS] + [f"h.{i}.{g}" for i in range(config.n_layer)
                                               for g in [t[0] for t in _BLOCK_TENSORS] + ["attn.c_attn.weight",
                                                                                       "attn.c_attn.bias"]]
    missing = [name for name in expected if name not in tensors]
    if missing:
        raise ValueError(f"load_gpt2: {file} lacks {len(missing)} GPT-2 tensor(s): {missing[:8]}")
    for gpt2_name, ours in _TOP_TENSORS:
        state[ours] = take(gpt2_name)
    for i in range(config.n_layer):
        for gpt2_name, ours, transposed in _BLOCK_TENSORS:
            array = take(f"h.{i}.{gpt2_name}")
            state[f"blocks.{i}.{ours}"] = np.ascontiguousarray(array.T) if transposed else array
        weight, bias = take(f"h.{i}.attn.c_attn.weight"), take(f"h.{i}.attn.c_attn.bias")  # (d, 3d), (3d,)
        if weight.shape != (d, 3 * d) or bias.shape != (3 * d,):
            raise ValueError(f"load_gpt2: h.{i}.attn.c_attn has weight {weight.shape} and bias {bias.shape}; "
                             f"expected ({d}, {3 * d}) and ({3 * d},) for d_model={d}")
        for j, proj in enumerate(_QKV):
            state[f"blocks.{i}.attn.{proj}.weight"] = np.ascontiguousarray(weight[:, j * d:(j + 1) * d].T)
            state[f"blocks.{i}.attn.{proj}.bias"] = bias[j * d:(j + 1) * d].copy()
    state["lm_head.weight"] = take("lm_head.weight") if "lm_head.weight" in tensors else state["tok_emb.weight"]
    used.add("lm_head.weight")
    unexpected = sorted(set(tensors) - used)
    if unexpected:
        raise ValueError(f"load_gpt2: {file} has tensor(s) a GPT-2 does not: {unexpected[:8]}")
    return state


# --------------------------------------------------------------------------------------
# Saving
# --------------------------------------------------------------------------------------


def save_gpt2(model: GPT, path) -> None:
    """Write ``model`` in GPT-2's format: model.safetensors + config.json, loadable by Hugging Face.

    ``path`` is a directory (created if needed), or a ``.safetensors`` file
    name with config.json written beside it. ``transformers``'
    ``GPT2LMHeadModel.from_pretrained(directory)`` then computes the same
    logits. The model must be GPT-2-shaped: LayerNorm, learned positions, a
    GELU MLP, biases, multi-head attention.
    """
    if not isinstance(model, GPT):
        raise TypeError(f"save_gpt2: expected a models.GPT, got {type(model).__name__}")
    c = model.config
    wrong = [f"{name}={getattr(c, name)!r} (GPT-2: {want!r})" for name, want in
             (("norm", "layernorm"), ("position", "learned"), ("mlp", "gelu"), ("bias", True))
             if getattr(c, name) != want]
    if c.n_kv_head != c.n_head:
        wrong.append(f"n_kv_head={c.n_kv_head} (GPT-2 has one key/value head per query head: {c.n_head})")
    if wrong:
        raise ValueError("save_gpt2: this GPT is not GPT-2-shaped: " + "; ".join(wrong) + ". GPT-2's format "
                         "cannot hold these options; build the model with GPT-2's choices to export it (the main "
                         "demo: python -m demos.train_charlm --position learned)")
    path = os.fspath(path)
    file = path if path.endswith(".safetensors") else os.path.join(path, "model.safetensors")
    os.makedirs(os.path.dirname(os.path.abspath(file)), exist_ok=True)

    state = {name: param.data.astype(np.float32) for name, param in model.named_parameters(remove_duplicate=False)}
    tensors = {"wte.weight": state["tok_emb.weight"], "wpe.weight": state["pos_emb.weight"],
               "ln_f.weight": state["norm_f.weight"], "ln_f.bias": state["norm_f.bias"]}
    for i in range(c.n_layer):
        for gpt2_name, ours, transposed in _BLOCK_TENSORS:
            array = state[f"blocks.{i}.{ours}"]
            tensors[f"h.{i}.{gpt2_name}"] = array.T if transposed else array
        tensors[f"h.{i}.attn.c_attn.weight"] = np.concatenate(
            [state[f"blocks.{i}.attn.{p}.weight"].T for p in _QKV], axis=1)  # (d, 3d): q, k, v column blocks
        tensors[f"h.{i}.attn.c_attn.bias"] = np.concatenate([state[f"blocks.{i}.attn.{p}.bias"] for p in _QKV])
    tensors = {f"transformer.{name}": array for name, array in tensors.items()}  # as GPT2LMHeadModel names them
    if not c.tie_weights:
        tensors["lm_head.weight"] = state["lm_head.weight"]
    io.save_safetensors(file, tensors, metadata={"format": "pt"})  # "pt": what transformers expects to find

    gelu = {"tanh": "gelu_new", "none": "gelu"}[c.gelu_approximate]
    hf_config = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": c.vocab_size,
                 "n_positions": c.block_size, "n_embd": c.d_model, "n_layer": c.n_layer, "n_head": c.n_head,
                 "n_inner": c.d_ff, "activation_function": gelu, "layer_norm_epsilon": c.norm_eps,
                 "resid_pdrop": c.dropout, "embd_pdrop": c.dropout, "attn_pdrop": c.dropout,
                 "tie_word_embeddings": c.tie_weights,
                 # GPT-2's <|endoftext|> is token 50256; a smaller vocabulary has no such token.
                 "bos_token_id": 50256 if c.vocab_size > 50256 else None,
                 "eos_token_id": 50256 if c.vocab_size > 50256 else None}
    # Atomic (temporary file, fsync, rename), so a crash never leaves half a config.
    atomic_write(os.path.join(os.path.dirname(os.path.abspath(file)), "config.json"),
                 json.dumps(hf_config, indent=2) + "\n")
