"""The Tensor: an ndarray plus what autodiff needs to walk back through it.

A Tensor produced by an op remembers the op (from the op table in ``ops.py``),
its input Tensors and the op's parameters. That record *is* the computation
graph; ``backward`` (``autograd/backprop.py``) walks it in reverse.

This file holds the array-like basics. The arithmetic comes from the op table:
as each block of ``ops.py`` is registered, ``registry.py`` binds its method and
operators here (``x * w`` is ``Tensor.__mul__``, bound to the ``mul`` block;
``help(Tensor.__mul__)`` shows that block's docstring), and ``registry.apply``
runs the op and records it. So adding an op adds its method too. Methods whose
spelling needs reading (``x.transpose(0, 1)``, ``x.var(0, keepdim=True)``,
``x.max(-1)``, ``x.to('cpu')``) are call forms, bound from ``dialect/``.
"""

from __future__ import annotations

import operator

import numpy as np

from . import modes as _modes
from . import versions as _versions

_new = object.__new__  # (Tensor._wrap: a Tensor made without __init__)


class OpError(ValueError):
    """Bad input to an op: the message names the op, the shapes and the dtypes."""


class NumpyOnTensorError(TypeError):
    """A NumPy function given a Tensor where it would lose the gradient; the message names the Tensor method."""


# --------------------------------------------------------------------------------------
# Tensor
# --------------------------------------------------------------------------------------


def _to_array(data, dtype) -> np.ndarray:
    """Python numbers and lists become float32 (bools stay bool); ndarrays keep their dtype."""
    if isinstance(data, Tensor):
        data = data.data
    if isinstance(data, np.ndarray | np.generic):
        return np.array(data, dtype=dtype)  # a copy: the tensor never aliases the caller's array
    arr = np.array(data, dtype=dtype)
    if dtype is None and arr.dtype != np.bool_:
        if arr.dtype.kind not in "biuf":
            raise TypeError(f"Tensor: cannot make a tensor from {type(data).__name__} (dtype {arr.dtype})")
        arr = arr.astype(np.float32)
    return arr


class Tensor:
    """An n-dimensional array that records the ops applied to it, for reverse-mode autodiff."""

    __slots__ = ("_data", "grad", "requires_grad", "name", "_op", "_inputs", "_params", "_saved", "_scope",
                 "_hooks", "_retains_grad", "_trace", "_record", "_vjp_depth", "_made_at", "_before", "__weakref__")

    def __init__(self, data, requires_grad: bool = False, dtype=None, name: str | None = None):
        self._data = _to_array(data, dtype)
        self.grad: Tensor | None = None
        self.name = name
        self._op = None  # the op-table entry (registry.Op) that made this tensor, while it is in a recorded graph
        self._inputs: tuple | None = ()
        self._params: dict | None = None
        self._saved = None  # what the op's forward kept for its VJP (see ops.py), while the graph lives
        self._scope: tuple = ()
        self._hooks: list | None = None
        self._retains_grad = False
        self._trace = None
        self._record = None  # what viz still needs once backward frees this node (freed.FreedNode)
        self._vjp_depth = 0  # 0: made by the forward pass; n: by the VJPs of backward pass n (create_graph)
        self._made_at = 0  # a recorded op's output: the clock of in-place writes when the op ran (versions.py)
        self._before = None  # after an in-place op in the graph: a tensor holding the node it had before (inplace.py)
        self.requires_grad = False
        if requires_grad:
            self.requires_grad_(True)

    @staticmethod
    def _wrap(array: np.ndarray, requires_grad: bool = False) -> Tensor:
        """Fast path for the engine: wrap an ndarray in a Tensor without copying or checking it.

        Every op's result is made here, so it is a static method calling ``object.__new__`` itself
        (a class method, and ``cls.__new__``, each cost a lookup per call).
        """
        t = _new(Tensor)
        t._data = array
        t.grad = None
        t.requires_grad = requires_grad
        t.name = None
        t._op = None
        t._inputs = ()
        t._params = None
        t._saved = None
        t._scope = ()
        t._hooks = None
        t._retains_grad = False
        t._trace = None
        t._record = None
        t._vjp_depth = 0
        t._made_at = 0
        t._before = None
        return t

    # --- the array, and its version counter (versions.py) ------------------------------------

    def _assign_data(self, array) -> None:
        # `p.data -= lr * g` runs NumPy's in-place operator, then assigns the same array back: an in-place
        # write, counted. Another array (or a Tensor's) replaces the storage, which a recorded graph that
        # saved this tensor would read in backward: counted as a write too.
        if array is self._data:
            _versions.bump(self, "an update through .data (p.data -= ...)")
        else:
            _versions.replace_storage(self, array.data if isinstance(array, Tensor) else np.asarray(array),
                                      "an assignment to .data")

    # Reading t.data gives the array (through operator.attrgetter: no Python call, as the engine reads it
    # on every op); assigning to it is counted as a write of the storage (_assign_data).
    data = property(operator.attrgetter("_data"), _assign_data, doc="The NumPy array holding the values (shared).")

    @property
    def _version(self) -> int:
        """How many times this tensor's storage was written in place (PyTorch's ``t._version``)."""
        counter = _versions.version(self._data)
        return 0 if counter is None else counter.count

    # --- array-like properties -----------------------------------------------------------

    @property
    def shape(self) -> tuple:
        return self._data.shape

    @property
    def dtype(self) -> np.dtype:
        return self._data.dtype

    @property
    def ndim(self) -> int:
        return self._data.ndim

    @property
    def size(self) -> ElementCount:
        """NumPy's element count, an int; called, ``t.size()`` / ``t.size(dim)`` is PyTorch's (the shape)."""
        return ElementCount(self.data.size, self.data.shape)

    @property
    def T(self) -> Tensor:
        return self.transpose()

    @property
    def is_leaf(self) -> bool:
        """True for tensors made by the user (not by an op that recorded a graph)."""
        return self._op is None

    @property
    def grad_fn(self):
        """PyTorch's name for what made this tensor in a recorded graph: its op-table entry (``registry.Op``,
        ``.name`` says which op); None for a leaf and for a tensor made outside a graph (under ``no_grad``)."""
        return self._op

    def __len__(self) -> int:
        return len(self.data)

    def __iter__(self):
        # Without this, Python iterates through __getitem__ until an IndexError, but
        # getitem raises OpError there, so `for row in t` and `a, b = t` would crash.
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(len(self)))

    def __bool__(self) -> bool:
        # Without this, Python falls back to __len__: `if Tensor([0.0]):` would be True.
        # NumPy's rule instead: one element is its truth value; more is an error.
        return bool(self.data)

    def item(self) -> float:
        return self.data.item()

    def __float__(self) -> float:
        return float(self._scalar("float"))

    def __int__(self) -> int:
        return int(self._scalar("int"))

    def __index__(self) -> int:
        """A one-element integer tensor as an index: ``data[i:i + block_size]`` with ``i`` from ``randint``."""
        if self.dtype.kind not in "iub":
            raise TypeError(f"only integer tensors can be used as an index; this one is {self.dtype}")
        return int(self._scalar("index"))

    def _scalar(self, who: str):
        if self.size != 1:
            raise TypeError(f"{who}(): only a one-element tensor converts to a Python number; this one has shape "
                            f"{self.shape} (reduce it first, e.g. t.sum(), or index one element)")
        return self.data.item()

    def numpy(self) -> np.ndarray:
        return self.data

    def tolist(self):
        return self.data.tolist()

    def __array__(self, dtype=None, copy=None):
        return self.data if dtype is None else self.data.astype(dtype)

    # --- NumPy meeting a Tensor --------------------------------------------------------------
    # NumPy's operators work and give Tensors (`ndarray + t` is t.__radd__). NumPy *functions*
    # would silently drop the gradient, so those with a Tensor method say to use it, and the
    # others see the plain array only when no gradient is at stake.

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method == "__call__" and len(inputs) == 2 and ufunc in _NUMPY_UPDATES and kwargs.keys() == {"out"} \
                and kwargs["out"][0] is inputs[0] and type(inputs[0]) is np.ndarray:
            return _update_array(ufunc, *inputs)  # `p.data += -lr * p.grad`: the update goes to p's array
        if method == "__call__" and not kwargs and len(inputs) == 2 and ufunc in _NUMPY_OPERATORS:
            forward, reflected = _NUMPY_OPERATORS[ufunc]
            a, b = inputs
            return getattr(a, forward)(b) if isinstance(a, Tensor) else getattr(b, reflected)(a)
        return _numpy_function(f"np.{ufunc.__name__}", ufunc.__name__, inputs, kwargs,
                               lambda args, kw: getattr(ufunc, method)(*args, **kw))

    def __array_function__(self, func, types, args, kwargs):
        return _numpy_function(f"np.{func.__name__}", func.__name__, args, kwargs,
                               lambda args, kw: func(*args, **kw))

    def __repr__(self) -> str:
        body = np.array2string(self.data, separator=", ", precision=4, prefix="Tensor(")
        extra = f", dtype={self.dtype}" if self.dtype != np.float32 else ""
        if self._op is not None:
            extra += f", op={self._op.name}"
        elif self.requires_grad:
            extra += ", requires_grad=True"
        return f"Tensor({body}{extra})"

    __hash__ = object.__hash__  # == is elementwise (as in NumPy), so hash by identity

    # --- autograd ------------------------------------------------------------------------

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        if requires_grad and self.dtype.kind != "f":
            raise TypeError(f"requires_grad: only floating-point tensors can require grad; "
                            f"this one is {self.dtype} with shape {self.shape}")
        if not self.is_leaf:
            raise RuntimeError("requires_grad_: only leaf tensors can change requires_grad; use .detach()")
        self.requires_grad = bool(requires_grad)
        return self

    def detach(self) -> Tensor:
        """The same data (shared, not copied, with one version counter), cut off from the graph."""
        return Tensor._wrap(self._data)

    def retain_grad(self) -> Tensor:
        """Keep ``.grad`` on this non-leaf tensor after backward (leaves always keep theirs)."""
        if not self.requires_grad:
            raise RuntimeError("retain_grad: this tensor does not require grad")
        self._retains_grad = True
        return self

    def register_hook(self, fn):
        """Call ``fn(grad)`` when this tensor's gradient is computed; a returned Tensor replaces it."""
        if not self.requires_grad:
            raise RuntimeError("register_hook: cannot hook a tensor that does not require grad")
        if self._hooks is None:
            self._hooks = []
        self._hooks.append(fn)
        return _HookHandle(self._hooks, fn)

    def backward(self, gradient=None, retain_graph: bool | None = None, create_graph: bool = False) -> None:
        """Accumulate d(self)/d(leaf) into the ``.grad`` of every leaf this tensor was computed from.

        ``gradient`` is d(loss)/d(self), needed when ``self`` is not a scalar;
        ``retain_graph`` keeps the graph for another backward (default: ``create_graph``);
        ``create_graph`` records the backward pass itself, for higher-order gradients.
        The pass itself is ``minigrad.autograd.backward`` (``autograd/backprop.py``).
        """
        from .autograd.backprop import backward  # (autograd is built on Tensor: imported when first used)

        backward(self, gradient, retain_graph=retain_graph, create_graph=create_graph)

    def zero_grad(self) -> None:
        self.grad = None

    # --- in-place ops, PyTorch's rules (inplace.py): `with mg.no_grad(): w -= lr * w.grad`; `out += b` -------

    def __iadd__(self, other) -> Tensor:
        return _inplace.update(self, "+=", other)

    def __isub__(self, other) -> Tensor:
        return _inplace.update(self, "-=", other)

    def __imul__(self, other) -> Tensor:
        return _inplace.update(self, "*=", other)

    def __itruediv__(self, other) -> Tensor:
        return _inplace.update(self, "/=", other)

    def __setitem__(self, index, value) -> None:
        """``x[index] = value`` in place; in the graph where a gradient is at stake, as PyTorch (``inplace.py``)."""
        _inplace.setitem(self, index, value)

    def zero_(self) -> Tensor:
        """Set every element to 0 in place (``x.grad.zero_()``); the same rules as ``-=`` (``inplace.py``)."""
        return _inplace.zero(self)

    def fill_(self, value) -> Tensor:
        """Set every element to ``value`` in place; the same rules as ``-=`` (``inplace.py``)."""
        return _inplace.fill(self, value)

    def copy_(self, src) -> Tensor:
        """Write ``src``'s values into this tensor in place (broadcast, cast to its dtype); as in PyTorch.

        It writes through to the tensors sharing this storage: under ``no_grad()``,
        ``model.state_dict()[k].copy_(w)`` loads ``w`` into the model (``inplace.py``).
        """
        return _inplace.copy(self, src)

    def masked_fill_(self, mask, value) -> Tensor:
        """Write ``value`` where the boolean ``mask`` is True, in place; the same rules as ``-=`` (``inplace.py``)."""
        return _inplace.masked_fill(self, mask, value)

    def clamp_(self, min=None, max=None) -> Tensor:  # noqa: A002  (PyTorch's names)
        """Limit every element to [min, max] in place; the same rules as ``-=`` (``inplace.py``)."""
        return _inplace.clamp(self, min, max)

    # --- PyTorch's spellings, where they mean the same thing -------------------------------

    def numel(self) -> int:
        """The number of elements (PyTorch's name for NumPy's ``t.size``)."""
        return self.data.size

    def clone(self) -> Tensor:
        """A copy of the data that stays in the graph (its gradient flows back to this tensor)."""
        return self.astype(self.dtype)  # the astype op copies, and records itself

    def dim(self) -> int:
        """The number of dims (PyTorch's name for NumPy's ``t.ndim``)."""
        return self.data.ndim

    ndimension = dim

    def nelement(self) -> int:
        """The number of elements (``numel``)."""
        return self.data.size

    def __abs__(self) -> Tensor:
        return self.abs()

    def __format__(self, spec: str) -> str:
        """``f"{loss:.4f}"`` formats a one-element tensor's value; an empty spec is ``str(t)``."""
        if not spec:
            return str(self)
        return format(self._scalar(f"format (f'{{t:{spec}}}')"), spec)

    # --- comparisons, // and %: not differentiable, they return plain tensors

    def __eq__(self, other):
        return Tensor._wrap(np.asarray(self.data == _data(other)))

    def __ne__(self, other):
        return Tensor._wrap(np.asarray(self.data != _data(other)))

    def __lt__(self, other):
        return Tensor._wrap(np.asarray(self.data < _data(other)))

    def __le__(self, other):
        return Tensor._wrap(np.asarray(self.data <= _data(other)))

    def __gt__(self, other):
        return Tensor._wrap(np.asarray(self.data > _data(other)))

    def __ge__(self, other):
        return Tensor._wrap(np.asarray(self.data >= _data(other)))

    def __invert__(self):
        return Tensor._wrap(~self.data)

    def __floordiv__(self, other):  # (piecewise constant: no gradient, as PyTorch's floor_divide has none)
        return Tensor._wrap(np.asarray(self.data // _data(other)))

    def __rfloordiv__(self, other):
        return Tensor._wrap(np.asarray(_data(other) // self.data))

    def __mod__(self, other):
        return Tensor._wrap(np.asarray(self.data % _data(other)))


class ElementCount(int):
    """``t.size``: the number of elements (an int, NumPy's meaning) that PyTorch's ``t.size()`` can also call.

    NumPy's ``a.size`` is the element count and PyTorch's ``t.size()`` the shape;
    both habits read the same attribute, so it is an int that, called, gives the
    shape (``t.size()``) or one axis of it (``t.size(0)``, ``t.size(-1)``).
    """

    def __new__(cls, count: int, shape: tuple):
        self = super().__new__(cls, count)
        self._shape = shape
        return self

    def __call__(self, dim: int | None = None):
        if dim is None:
            return self._shape
        if not -len(self._shape) <= dim < len(self._shape):
            raise IndexError(f"size({dim}): dimension out of range for a tensor of shape {self._shape}")
        return self._shape[dim]


class _HookHandle:
    def __init__(self, hooks: list, fn):
        self.hooks, self.fn = hooks, fn

    def remove(self) -> None:
        if self.fn in self.hooks:
            self.hooks.remove(self.fn)


def _data(x):
    return x.data if isinstance(x, Tensor) else x


# NumPy ufuncs that Python operators reach from the ndarray side (`ndarray < t`): (method, reflected method).
_NUMPY_OPERATORS = {
    np.add: ("__add__", "__radd__"), np.subtract: ("__sub__", "__rsub__"), np.multiply: ("__mul__", "__rmul__"),
    np.true_divide: ("__truediv__", "__rtruediv__"), np.matmul: ("__matmul__", "__rmatmul__"),
    np.power: ("__pow__", "__rpow__"), np.equal: ("__eq__", "__eq__"), np.not_equal: ("__ne__", "__ne__"),
    np.less: ("__lt__", "__gt__"), np.less_equal: ("__le__", "__ge__"), np.greater: ("__gt__", "__lt__"),
    np.greater_equal: ("__ge__", "__le__"),
}
_NUMPY_UPDATES = {np.add: "+=", np.subtract: "-=", np.multiply: "*=", np.true_divide: "/="}


def _update_array(ufunc, array: np.ndarray, other: Tensor) -> np.ndarray:
    """``array += t`` for the array a tensor's ``.data`` names: written in place, as PyTorch's ``p.data += ...``.

    ``p.data`` is p's array, outside the graph (PyTorch's: a detached alias), so the update changes
    p and is not recorded (nor tracked for backward, as in PyTorch). A right-hand side that requires
    grad, while the graph is recorded, is refused: the update could not carry its gradient.
    """
    if other.requires_grad and _modes.state.grad_enabled:
        raise RuntimeError(f"p.data {_NUMPY_UPDATES[ufunc]} value: the value requires grad, and an update of .data "
                           f"is outside the graph; compute it under `with mg.no_grad():` (or use .detach())")
    return ufunc(array, other.data, out=array, casting="same_kind")


# NumPy names whose Tensor method has another name.
_METHOD_FOR = {"amax": "max", "amin": "min", "absolute": "abs", "negative": "__neg__ (-t)", "true_divide": "div",
               "concatenate": "mg.concatenate", "stack": "mg.stack", "where": "mg.where", "maximum": "mg.maximum",
               "minimum": "mg.minimum", "einsum": "mg.einsum", "split": "split"}


def _numpy_function(shown: str, name: str, args, kwargs, call):
    """A NumPy function given Tensors: a hint to the Tensor method if there is one; else run it on the arrays."""
    method = _METHOD_FOR.get(name, name if callable(getattr(Tensor, name, None)) else None)
    if method is not None:
        spelled = method if method.startswith(("mg.", "__")) else f"t.{method}(...)"
        raise NumpyOnTensorError(f"{shown}() was given a minigrad Tensor; use {spelled} instead, which records the "
                        f"gradient (or {shown}(t.numpy()) for a plain NumPy result)")

    def plain(x):
        if isinstance(x, Tensor):
            if x.requires_grad:
                raise NumpyOnTensorError(f"{shown}() was given a Tensor that requires grad; NumPy cannot record its "
                                f"gradient. Use Tensor ops, or {shown}(t.detach().numpy()) for a plain result")
            return x.data
        if isinstance(x, list | tuple):
            return type(x)(plain(v) for v in x)
        return x

    return call(plain(list(args)), {k: plain(v) for k, v in kwargs.items()})


from . import inplace as _inplace  # noqa: E402  (in-place updates are written on top of Tensor)
