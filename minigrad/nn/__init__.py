"""minigrad.nn: layers, attention and transformer blocks built from Tensor ops (PyTorch's names).

| file | what it holds |
|---|---|
| ``module.py``      | Module, Parameter, Sequential, ModuleList, ModuleDict: registration, state_dict |
| ``functional.py``  | stateless functions (``F``): activations, norms, dropout, pad, attention; the losses |
| ``losses.py``      | the losses, as functions (``F.cross_entropy``...) and modules (``nn.CrossEntropyLoss``...) |
| ``init.py``        | the default random generator (``manual_seed``) and in-place initialisers (xavier, kaiming...) |
| ``layers.py``      | Linear, Embedding, LayerNorm, RMSNorm, Dropout, Flatten, Unflatten, Identity, activations |
| ``positional.py``  | sinusoidal encoding, learned position embedding, rotary embedding (RoPE) |
| ``attention.py``   | MultiHeadAttention (self/cross, masks, GQA, RoPE) and KVCache |
| ``feedforward.py`` | MLP and SwiGLU |
| ``transformer.py`` | TransformerBlock: pre-/post-norm, encoder / decoder / decoder with cross-attention |
| ``recurrent.py``   | RNNCell, LSTMCell, GRUCell and the RNN, LSTM, GRU layers |
| ``checks.py``      | the layers' input checks: tensors and dtypes, features, ids, masks, p, GELU's form |
| ``utils.py``       | ``nn.utils.clip_grad_norm_``, PyTorch's home for it (the function is ``optim``'s) |
| ``gradcheck_module.py`` | ``gradcheck_module(module, *inputs)``: a layer's parameters and inputs, in float64 |

No layer has backward code: every gradient comes from the op table (core ops in
``minigrad/ops.py``, fused ones in ``minigrad/fused/``), and the tests gradcheck every layer against finite
differences with ``nn.gradcheck_module``, which a layer of your own can use too.
"""

from . import checks, functional, init, utils
from .attention import KVCache, MultiHeadAttention
from .feedforward import MLP, SwiGLU
from .gradcheck_module import gradcheck_module
from .init import manual_seed
from .layers import (
    GELU,
    Dropout,
    Embedding,
    Flatten,
    Identity,
    LayerNorm,
    Linear,
    LogSoftmax,
    ReLU,
    RMSNorm,
    Sigmoid,
    SiLU,
    Softmax,
    Tanh,
    Unflatten,
)
from .losses import BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, L1Loss, MSELoss, NLLLoss
from .module import IncompatibleKeys, Module, ModuleDict, ModuleList, Parameter, Sequential, StateDictError
from .positional import LearnedPositionalEmbedding, RotaryEmbedding, SinusoidalPositionalEncoding, sinusoidal_encoding
from .recurrent import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell
from .transformer import TransformerBlock

__all__ = [
    "BCELoss", "BCEWithLogitsLoss", "CrossEntropyLoss", "Flatten", "L1Loss", "MSELoss", "NLLLoss", "Unflatten",
    "GELU", "GRU", "LSTM", "MLP", "RNN", "Dropout", "Embedding", "GRUCell", "Identity", "IncompatibleKeys", "KVCache",
    "LSTMCell", "LayerNorm", "LearnedPositionalEmbedding", "Linear", "LogSoftmax", "Module", "ModuleDict", "ModuleList",
    "MultiHeadAttention", "Parameter", "RMSNorm", "RNNCell", "ReLU", "RotaryEmbedding", "Sequential", "SiLU",
    "Sigmoid", "Softmax", "SinusoidalPositionalEncoding", "StateDictError", "SwiGLU", "Tanh", "TransformerBlock",
    "checks", "functional", "gradcheck_module", "init", "manual_seed", "sinusoidal_encoding", "utils",
]


def __getattr__(name: str):
    """A PyTorch name minigrad.nn lacks (``nn.Conv2d``) is an error that lists what it has."""
    if name.startswith("__"):
        raise AttributeError(f"module 'minigrad.nn' has no attribute {name!r}")
    raise AttributeError(f"module 'minigrad.nn' has no attribute {name!r}: torch.nn.{name} is not in minigrad; "
                         f"its layers and tools are {', '.join(sorted(n for n in __all__ if n[0].isupper()))}")
