"""PyTorch's call surface: how a Tensor method or an ``mg.`` function, spelled as PyTorch spells it, reaches its op.

The op table (``minigrad/ops.py``) states each primitive once, with NumPy's
parameters (``axis``, ``keepdims``, ``ddof``). This package is the one place
that reads a call and says which op it means, with which parameters. Every
Tensor method and ``mg.`` function PyTorch has takes PyTorch's spellings,
positional arguments included, with PyTorch's meaning: ``x.transpose(0, 1)``
swaps two dims, ``x.split(64, 2)`` cuts pieces of size 64 along dim 2,
``x.var(0, keepdim=True)`` is unbiased, ``x.max(-1)`` is (values, indices). A
spelling minigrad does not take is an error that names the one to write.

One file a concern, read in any order:

* ``arguments.py``: reading ``dim``/``axis``, ``keepdim``/``keepdims``; ``bind``;
* ``reductions.py``: sum, mean, prod, var, std, logsumexp, all, any;
* ``extremes.py``: max, min, argmax, argmin, sort, topk;
* ``elementwise.py``: softmax, clamp, tril/triu, log10/log2, pow, neg;
* ``shapes.py``: indexing, reshape/view, transpose/permute, squeeze, expand, split, gather, scatter...;
* ``linalg.py``: mm, bmm, mv, outer, dot, and ``mg.add(input, other)``...;
* ``casts.py``: ``x.to(...)``, ``x.float()``, the device, ``x.add_(v)``...;
* ``creation.py`` and ``random.py``: ``mg.tensor``, ``mg.zeros``, ``mg.randn(..., generator=g)``;
* ``dtypes.py``: PyTorch's dtype names (``mg.float32``, ``mg.long``);
* ``refused.py``: PyTorch's names minigrad lacks, each an error saying what to write;
* ``functions.py``: the ``mg.`` functions (``mg.cat``, ``mg.where``, ``mg.sum(x, 1)``).

``bind`` (``registry.bind_call_form``) puts each form on ``Tensor``, named for
its op: ``help(Tensor.var)`` shows the form, where it is written, and then the
op's block; ``inspect.getsource(Tensor.var)`` shows the op's block.
"""

from .. import fused, ops  # noqa: F401  (the op table first: its blocks are what the forms apply)
from . import casts, creation, elementwise, extremes, linalg, random, reductions, refused, shapes  # noqa: F401  (each binds its forms)
from .arguments import bind
from .extremes import ValuesIndices
from .functions import functions

bind(None, "normal_")(random.normal_)
bind(None, "uniform_")(random.uniform_)
bind(None, "multinomial")(random.multinomial)

__all__ = ["ValuesIndices", "functions"]
