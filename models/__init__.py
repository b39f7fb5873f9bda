"""Complete models assembled from ``minigrad.nn``, each readable top to bottom in one file.

| file | what it holds |
|---|---|
| ``gpt.py``        | ``GPTConfig``, ``CausalSelfAttention``, ``MLP``, ``Block``, ``GPT``: decoder-only LM, KV cache |
| ``gpt2.py``       | Hugging Face GPT-2 weights into ``GPT`` and back (``from_gpt2``, ``save_gpt2``) |
| ``encoder.py``    | ``EncoderConfig``, ``MaskedLM``: bidirectional encoder + masked-LM head; BERT's ``mask_tokens`` |
| ``seq2seq.py``    | ``Seq2SeqConfig``, ``Seq2Seq``: the encoder-decoder of "Attention Is All You Need" |
| ``rnn.py``        | ``RNNConfig``, ``RNNLM``: RNN / LSTM / GRU language models with GPT's interface |
| ``generation.py`` | sampling (temperature, top-k, top-p, greedy) and the decoding loop all models share |
| ``costs.py``      | parameter, FLOP and KV-cache counts from a config, without building a model |
| ``checks.py``     | the models' input checks, each written once: config fields, (B, T) batches and targets |

Every language model here has ``forward(idx, targets=None) -> (logits, loss)``
(the encoder-decoder: ``forward(src, tgt_in, tgt_out=None)``) and a
``generate`` with the same sampling options; configs are dataclasses, so
``dataclasses.asdict(config)`` goes into a ``minigrad.io`` checkpoint and
``Config(**d)`` comes back out.
"""

from .encoder import EncoderConfig, MaskedLM, mask_tokens
from .gpt import GPT, GPTConfig
from .rnn import RNNLM, RNNConfig
from .seq2seq import Seq2Seq, Seq2SeqConfig

__all__ = ["GPT", "RNNLM", "EncoderConfig", "GPTConfig", "MaskedLM", "RNNConfig", "Seq2Seq", "Seq2SeqConfig",
           "mask_tokens"]
