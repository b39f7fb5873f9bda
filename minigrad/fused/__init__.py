"""Fused primitives: functions that could be composites of core ops, made single ops for speed.

A transformer spends its step in a handful of functions: its projections,
GELU, layer norm, attention's weights and the loss. Written as composites of
the core ops in ``ops.py`` each of them is many graph nodes and many passes
over memory, and each is called on every layer. Here each is one op with a
forward (a kernel from ``kernels/``) and a hand-written VJP.

Every block also carries its ``composite``: the same function written with core
ops, as runnable code. It is the definition the fused op has to meet, and

* ``minigrad.composite_mode()`` runs it instead of the op, so a graph can be
  read (and drawn) op by op, and checked against the fused run;
* the tests hold op and composite equal on every sample, in value, gradient
  and second derivative.

The backward primitives the VJPs use (``softmax_grad``, ``gelu_grad``,
``layer_norm_grad``) are fused ops too, with composites of their own: that
keeps each VJP itself differentiable (``create_graph=True``); so is
``flash_attention_lse``, the logsumexp ``flash_attention`` keeps for its VJP.
Adding a fused op is like adding a core op, plus a ``composite``.

One file a concern: ``layers.py`` (linear, gelu, layer_norm, rms_norm),
``attention.py`` (attention_weights, flash_attention), ``loss.py``
(cross_entropy), ``einsum.py``.
"""

from .attention import attention_weights, flash_attention, flash_attention_lse, softmax_grad
from .einsum import einsum
from .layers import gelu, gelu_grad, layer_norm, layer_norm_grad, linear, linear_weight_grad, rms_norm
from .loss import cross_entropy

__all__ = ["attention_weights", "cross_entropy", "einsum", "flash_attention", "flash_attention_lse", "gelu",
           "gelu_grad", "layer_norm", "layer_norm_grad", "linear", "linear_weight_grad", "rms_norm", "softmax_grad"]
