"""Autodiff: everything that differentiates the graph the ops record, laid out like ``torch.autograd``.

Read in this order:

* ``backprop.py``: the backward pass, ``backward`` and ``grad``: sort the graph, call each op's VJP,
  sum the gradients back to their inputs;
* ``gradcheck.py``: ``gradcheck`` and ``gradgradcheck``, backprop against finite differences;
* ``functional.py``: ``vjp``, ``jvp``, ``linearize``, ``jacobian``, ``hessian``, ``hvp``: forward and
  reverse mode as functions.

Beside them: ``contract.py`` (what backward checks: its arguments, that no array a VJP reads was
changed in place since the forward pass, and what each VJP returns, with errors that name the culprit),
``freed.py`` (a node's inputs as its op read them, and what backward keeps of a node it frees, so the
graph can still be drawn), ``anomaly.py`` (``detect_anomaly``), ``checkpoint.py`` (``checkpoint``: keep
a segment's inputs, recompute it in backward), ``function.py`` (``Function``: a forward and a backward
written as a class, PyTorch's way of adding a differentiable function from outside the op table),
``memory.py`` (``graph_bytes``: what a recorded graph holds for backward). A node is written in one
place, ``registry.record``.
"""

from .anomaly import AnomalyError, detect_anomaly
from .backprop import backward, grad
from .checkpoint import checkpoint
from .contract import VJPError
from .function import Function, FunctionCtx
from .functional import hessian, hvp, jacobian, jvp, linearize, vjp
from .gradcheck import GradcheckError, gradcheck, gradgradcheck
from .memory import GraphBytes, graph_bytes

__all__ = ["AnomalyError", "Function", "FunctionCtx", "GradcheckError", "GraphBytes", "VJPError", "backward",
           "checkpoint", "detect_anomaly", "grad", "gradcheck", "graph_bytes", "gradgradcheck", "hessian", "hvp",
           "jacobian", "jvp", "linearize", "vjp"]
