"""The Tensor: an ndarray plus what autodiff needs to walk back through it.

A Tensor produced by an op remembers the op (from the op table in ``ops.py``),
its input Tensors and the op's parameters. That record *is* the computation
graph; ``backward`` (in ``autograd.py``) walks it in reverse.

Graph recording happens only when it can matter: when grad mode is on and at
least one input requires grad. Everything else is a thin wrapper over NumPy.
Tensor methods and operators are bound from the op table at the bottom of this
file, so adding an op to the table adds its method too.
"""

from __future__ import annotations

import functools
import inspect
import threading
import traceback

import numpy as np

from . import ops as _ops
from .ops import OPS, Op


class OpError(ValueError):
    """Bad input to an op: the message names the op, the shapes and the dtypes."""


# --------------------------------------------------------------------------------------
# Global modes: grad on/off, anomaly detection, the current module scope
# --------------------------------------------------------------------------------------


class _State(threading.local):
    grad_enabled = True
    anomaly = False
    scope: tuple = ()  # the modules whose forward is running, outermost first (for viz)


_state = _State()


class set_grad_enabled:
    """Turn graph recording on or off inside a ``with`` block or a decorated function."""

    def __init__(self, mode: bool):
        self.mode = bool(mode)
        self._prev: list[bool] = []  # a stack, so one object can be entered again while active

    def __enter__(self):
        self._prev.append(_state.grad_enabled)
        _state.grad_enabled = self.mode

    def __exit__(self, *exc):
        _state.grad_enabled = self._prev.pop()

    def __call__(self, fn):
        # A fresh context per call: one shared object would mix up the saved modes of
        # a decorated function that recurses or runs in two threads at once.
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with set_grad_enabled(self.mode):
                return fn(*args, **kwargs)

        return wrapper


class no_grad(set_grad_enabled):
    """Record no graph (inference, optimizer updates): ``with no_grad():`` or ``@no_grad()``."""

    def __init__(self):
        super().__init__(False)


class enable_grad(set_grad_enabled):
    """Record the graph again inside a ``no_grad`` region."""

    def __init__(self):
        super().__init__(True)


def is_grad_enabled() -> bool:
    return _state.grad_enabled


class module_scope:
    """Mark ops run inside ``module``'s forward (nn.Module does this); viz draws them as a cluster.

    A class rather than a generator-based context manager: every module call enters one.
    """

    def __init__(self, module):
        self.module = module

    def __enter__(self):
        self.prev = _state.scope
        _state.scope = self.prev + (self.module,)

    def __exit__(self, *exc):
        _state.scope = self.prev


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

    __slots__ = ("data", "grad", "requires_grad", "name", "_op", "_inputs", "_params", "_saved", "_scope",
                 "_hooks", "_retains_grad", "_trace", "__weakref__")

    def __init__(self, data, requires_grad: bool = False, dtype=None, name: str | None = None):
        self.data = _to_array(data, dtype)
        self.grad: Tensor | None = None
        self.name = name
        self._op: Op | None = None
        self._inputs: tuple | None = ()
        self._params: dict | None = None
        self._saved = None  # what the op's forward kept for its VJP (see ops.py), while the graph lives
        self._scope: tuple = ()
        self._hooks: list | None = None
        self._retains_grad = False
        self._trace = None
        self.requires_grad = False
        if requires_grad:
            self.requires_grad_(True)

    @classmethod
    def _wrap(cls, array: np.ndarray, requires_grad: bool = False) -> Tensor:
        """Fast path for the engine: wrap an ndarray without copying or checking it."""
        t = cls.__new__(cls)
        t.data = array
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
        return t

    # --- array-like properties -----------------------------------------------------------

    @property
    def shape(self) -> tuple:
        return self.data.shape

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    @property
    def ndim(self) -> int:
        return self.data.ndim

    @property
    def size(self) -> int:
        return self.data.size

    @property
    def T(self) -> Tensor:
        return self.transpose()

    @property
    def is_leaf(self) -> bool:
        """True for tensors made by the user (not by an op that recorded a graph)."""
        return self._op is None

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
        """The same data (shared, not copied), cut off from the graph."""
        return Tensor._wrap(self.data)

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

    def backward(self, gradient=None, retain_graph: bool | None = None, create_graph: bool = False):
        """Accumulate d(self)/d(leaf) into every leaf's ``.grad`` (see ``autograd.backward``)."""
        from .autograd import backward

        backward(self, gradient, retain_graph=retain_graph, create_graph=create_graph)

    def zero_grad(self) -> None:
        self.grad = None

    # --- convenience forms of table ops --------------------------------------------------
    # These only adapt call signatures (``x.reshape(2, 3)`` as well as ``x.reshape((2, 3))``);
    # the ops themselves, and their gradients, are in the table.

    def reshape(self, *shape) -> Tensor:
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], tuple | list) else shape
        return _ops.reshape(self, shape=tuple(shape))

    def transpose(self, *axes) -> Tensor:
        axes = axes[0] if len(axes) == 1 and isinstance(axes[0], tuple | list | type(None)) else axes
        return _ops.transpose(self, axes=tuple(axes) if axes else None)

    permute = transpose

    def swapaxes(self, axis1: int, axis2: int) -> Tensor:
        axis1, axis2 = _check_axis("swapaxes", self, axis1), _check_axis("swapaxes", self, axis2)
        axes = list(range(self.ndim))
        axes[axis1], axes[axis2] = axes[axis2], axes[axis1]
        return _ops.transpose(self, axes=tuple(axes))

    def broadcast_to(self, *shape) -> Tensor:
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], tuple | list) else shape
        if tuple(shape) == self.shape:
            return self
        return _ops.broadcast_to(self, shape=tuple(shape))

    expand = broadcast_to

    def unsqueeze(self, axis: int) -> Tensor:
        axis = _check_axis("unsqueeze", self, axis, self.ndim + 1)
        return self.reshape(self.shape[:axis] + (1,) + self.shape[axis:])

    def squeeze(self, axis=None) -> Tensor:
        if axis is None:
            return self.reshape(tuple(n for n in self.shape if n != 1))
        axes = {_check_axis("squeeze", self, a) for a in ((axis,) if isinstance(axis, int) else axis)}
        bad = [a for a in axes if self.shape[a] != 1]
        if bad:
            raise OpError(f"squeeze: axis {bad[0]} has size {self.shape[bad[0]]}, not 1 "
                          f"(input {self.shape} {self.dtype})")
        return self.reshape(tuple(n for i, n in enumerate(self.shape) if i not in axes))

    def flatten(self) -> Tensor:
        return self.reshape(-1)

    def split(self, sections, axis: int = 0) -> list[Tensor]:
        """Split into equal ``sections`` (an int) or at the given indices, like ``np.split``."""
        return split(self, sections, axis)

    def scatter_add(self, *, index, shape) -> Tensor:
        return _ops.scatter_add(self, index=index, shape=tuple(shape))

    def __getitem__(self, index) -> Tensor:
        return _ops.getitem(self, index=_normalise_index(index))

    def __pow__(self, exponent) -> Tensor:
        if isinstance(exponent, Tensor | np.ndarray):
            return _ops.pow_tensor(self, exponent)
        return _ops.pow(self, exponent=exponent)

    def __rpow__(self, base) -> Tensor:
        return _ops.pow_tensor(base, self)

    def float(self) -> Tensor:
        return self.astype(np.float32)

    def double(self) -> Tensor:
        return self.astype(np.float64)

    # --- comparisons and argmax: not differentiable, they return plain (bool/int) tensors

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

    def argmax(self, axis=None, keepdims=False) -> Tensor:
        return Tensor._wrap(np.asarray(self.data.argmax(axis=axis, keepdims=keepdims)))

    def argmin(self, axis=None, keepdims=False) -> Tensor:
        return Tensor._wrap(np.asarray(self.data.argmin(axis=axis, keepdims=keepdims)))


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
# NumPy names whose Tensor method has another name.
_METHOD_FOR = {"amax": "max", "amin": "min", "absolute": "abs", "negative": "__neg__ (-t)", "true_divide": "div",
               "concatenate": "mg.concatenate", "stack": "mg.stack", "where": "mg.where", "maximum": "mg.maximum",
               "minimum": "mg.minimum", "einsum": "mg.einsum", "split": "split"}


def _numpy_function(shown: str, name: str, args, kwargs, call):
    """A NumPy function given Tensors: a hint to the Tensor method if there is one; else run it on the arrays."""
    method = _METHOD_FOR.get(name, name if callable(getattr(Tensor, name, None)) else None)
    if method is not None:
        spelled = method if method.startswith(("mg.", "__")) else f"t.{method}(...)"
        raise TypeError(f"{shown}() was given a minigrad Tensor; use {spelled} instead, which records the "
                        f"gradient (or {shown}(t.numpy()) for a plain NumPy result)")

    def plain(x):
        if isinstance(x, Tensor):
            if x.requires_grad:
                raise TypeError(f"{shown}() was given a Tensor that requires grad; NumPy cannot record its "
                                f"gradient. Use Tensor ops, or {shown}(t.detach().numpy()) for a plain result")
            return x.data
        if isinstance(x, list | tuple):
            return type(x)(plain(v) for v in x)
        return x

    return call(plain(list(args)), {k: plain(v) for k, v in kwargs.items()})


def _check_axis(name: str, t: Tensor, axis: int, ndim: int | None = None) -> int:
    """``axis`` as a positive index below ``ndim`` (default ``t.ndim``); an OpError if out of range.

    Python's ``%`` alone would silently wrap a bad axis round to a valid one.
    """
    ndim = t.ndim if ndim is None else ndim
    if not -ndim <= axis < ndim:
        raise OpError(f"{name}: axis {axis} is out of range for {ndim} axes (input {t.shape} {t.dtype})")
    return axis % ndim


def _normalise_index(index):
    """Indices may hold Tensors and lists; NumPy wants ndarrays."""
    def one(part):
        if isinstance(part, Tensor):
            return part.data
        if isinstance(part, list):
            return np.asarray(part)
        return part

    return tuple(one(p) for p in index) if isinstance(index, tuple) else one(index)


# --------------------------------------------------------------------------------------
# apply: run one op of the table and record it in the graph
# --------------------------------------------------------------------------------------


def _as_input(x, like_dtype) -> Tensor:
    """Turn a Python number or ndarray operand into a constant Tensor.

    A number takes the dtype of the tensor it meets, so ``x * 0.5`` stays float32
    for float32 ``x`` and keeps full precision for float64 ``x``, and ``index + 1``
    stays integer. A float meeting no float tensor is made float32 (NumPy then
    promotes ``int64 * float32`` to float64, as ``np.arange(3) * 0.5`` does). NumPy scalars
    (``np.sqrt(d)`` is an ``np.float64``) count as numbers too: as 0-d float64
    arrays they would silently turn float32 results into float64.
    """
    if isinstance(x, Tensor):
        return x
    if isinstance(x, bool | int | float | np.bool_ | np.number):
        is_float = isinstance(x, float | np.floating)
        if like_dtype is None or (is_float and like_dtype.kind != "f"):
            dtype = np.float32 if is_float else None  # None: NumPy's int64 (or bool for a bool)
        else:
            dtype = like_dtype
        return Tensor._wrap(np.asarray(x, dtype=dtype))
    if isinstance(x, np.ndarray | np.generic):
        return Tensor._wrap(np.asarray(x))
    raise TypeError(f"expected a Tensor, ndarray or number, got {type(x).__name__}")


def _as_inputs(inputs) -> tuple:
    """The inputs as Tensors, numbers taking the dtype of the first float tensor (else integer one)."""
    like = None
    for x in inputs:
        if isinstance(x, Tensor) and x.dtype.kind == "f":
            like = x.dtype
            break
        if like is None and isinstance(x, Tensor) and x.dtype.kind in "iu":
            like = x.dtype
    return tuple(_as_input(x, like) for x in inputs)


def _describe(tensors, params) -> str:
    parts = [f"{tuple(t.shape)} {t.dtype}" for t in tensors]
    def is_array(v):  # arrays (a mask, layer norm's stats) would flood the message
        return isinstance(v, np.ndarray) or (isinstance(v, tuple) and any(isinstance(a, np.ndarray) for a in v))

    shown = {k: v for k, v in (params or {}).items() if not is_array(v)}
    return "inputs " + ", ".join(parts) + (f"; params {shown}" if shown else "")


def _user_frame() -> str:
    """The first stack frame outside minigrad itself: the user's line that made this op."""
    pkg = __file__.rsplit("/", 1)[0]
    for frame in reversed(traceback.extract_stack()[:-2]):
        if not frame.filename.startswith(pkg):
            return f'{frame.filename}:{frame.lineno}: {(frame.line or "").strip()}'
    return "<unknown>"


def apply(op: Op, *inputs, **params) -> Tensor:
    """Run ``op.forward`` on the inputs' arrays and, if needed, record the op for backward."""
    tensors = inputs
    for x in inputs:
        if not isinstance(x, Tensor):  # a number or array among the inputs: make them all Tensors
            tensors = _as_inputs(inputs)
            break
    try:
        out = op.forward(*[t.data for t in tensors], **params)
    except (ValueError, IndexError, TypeError) as err:
        renamed = {new: params[old] for old, new in (("dim", "axis"), ("keepdim", "keepdims")) if old in params}
        if renamed:  # PyTorch's spelling: say NumPy's
            spelled = ", ".join(f"{name}={value!r}" for name, value in renamed.items())
            raise OpError(f"{op.name}: minigrad takes NumPy's argument names, axis= and keepdims= (not PyTorch's "
                          f"dim= and keepdim=): x.{op.name}({spelled}) ({_describe(tensors, params)})") from None
        raise OpError(f"{op.name}: {err} ({_describe(tensors, params)})") from None
    saved = None
    if type(out) is tuple:  # (output, saved): the forward kept something for its VJP
        out, saved = out
    if type(out) is not np.ndarray:
        out = np.asarray(out)
    # Integer and bool results (astype(int)) are not differentiable, so never require grad.
    needs_grad = False
    if _state.grad_enabled and out.dtype.kind == "f":
        for t in tensors:
            if t.requires_grad:
                needs_grad = True
                break
    result = Tensor._wrap(out, needs_grad)
    if needs_grad:
        result._op = op
        result._inputs = tensors
        result._params = params
        result._saved = saved
        result._scope = _state.scope
    if _state.anomaly:
        from .autograd import check_forward

        result._trace = _user_frame()
        check_forward(op, tensors, params, result)
    return result


# --------------------------------------------------------------------------------------
# Bind the table: module-level functions, Tensor methods and operators
# --------------------------------------------------------------------------------------


def _method(op: Op):
    """A Tensor method for ``op``: extra positional arguments fill its parameters in order.

    An op whose forward takes ``*inputs`` (a variable number of tensors) takes
    every positional argument as a tensor; its parameters are keyword-only.
    """
    signature = inspect.signature(op.forward)
    kinds = [p.kind for p in signature.parameters.values()]
    n_tensors = sum(k == inspect.Parameter.POSITIONAL_OR_KEYWORD for k in kinds)
    if inspect.Parameter.VAR_POSITIONAL in kinds:
        n_tensors = None  # every positional argument is a tensor
    param_names = [p.name for p in signature.parameters.values() if p.kind == inspect.Parameter.KEYWORD_ONLY]

    def method(self, *args, **params):
        if n_tensors is None:
            return apply(op, self, *args, **params)
        tensors, extra = args[: n_tensors - 1], args[n_tensors - 1:]
        params.update(zip(param_names, extra))
        return apply(op, self, *tensors, **params)

    method.__name__ = op.method
    method.__doc__ = op.doc
    return method


def _operators(op: Op):
    def forward(self, other):
        return apply(op, self, other)

    def reflected(self, other):
        return apply(op, other, self)

    return forward, reflected


def _bind(op: Op) -> None:
    if op.method:
        setattr(Tensor, op.method, _method(op))
    if op.operator:
        fwd, rev = _operators(op)
        setattr(Tensor, f"__{op.operator}__", fwd)
        setattr(Tensor, f"__r{op.operator}__", rev)


_ops._apply = apply
for _op in OPS.values():
    _bind(_op)
_ops._on_register.append(_bind)  # ops registered later (user extensions) get methods too
Tensor.__neg__ = lambda self: _ops.neg(self)


# --------------------------------------------------------------------------------------
# Functions (NumPy / PyTorch names) and constructors
# --------------------------------------------------------------------------------------


def tensor(data, requires_grad: bool = False, dtype=None, name: str | None = None) -> Tensor:
    """Make a Tensor (numbers and lists become float32; ndarrays keep their dtype)."""
    return Tensor(data, requires_grad=requires_grad, dtype=dtype, name=name)


def where(cond, x, y) -> Tensor:
    """``x`` where ``cond`` is True, else ``y`` (the condition is not differentiated)."""
    return _ops.where(np.asarray(_data(cond), dtype=bool), x, y)


def concatenate(tensors, axis: int = 0) -> Tensor:
    return _ops.concatenate(*tensors, axis=axis)


cat = concatenate


def stack(tensors, axis: int = 0) -> Tensor:
    return _ops.stack(*tensors, axis=axis)


def split(x: Tensor, sections, axis: int = 0) -> list[Tensor]:
    """``np.split`` for tensors: ``sections`` equal parts, or cut at the given indices."""
    axis = _check_axis("split", x, axis)
    size = x.shape[axis]
    if isinstance(sections, int):
        if sections <= 0 or size % sections:
            raise OpError(f"split: axis {axis} of size {size} does not divide into {sections} equal parts "
                          f"(input {x.shape} {x.dtype})")
        cuts = list(range(0, size + 1, size // sections))
    else:
        cuts = [0, *sections, size]
    lead = (slice(None),) * (axis % x.ndim)
    return [x[lead + (slice(lo, hi),)] for lo, hi in zip(cuts[:-1], cuts[1:])]


def einsum(subscripts: str, *operands) -> Tensor:
    """Einstein summation, as ``np.einsum`` / ``torch.einsum``: ``einsum("ij,jk->ik", a, b)``."""
    return _ops.einsum(*operands, subscripts=subscripts)


def maximum(a, b) -> Tensor:
    return _ops.maximum(a, b)


def minimum(a, b) -> Tensor:
    return _ops.minimum(a, b)


def zeros(*shape, dtype=np.float32, requires_grad=False) -> Tensor:
    shape = shape[0] if len(shape) == 1 and isinstance(shape[0], tuple | list) else shape
    return Tensor(np.zeros(shape, dtype=dtype), requires_grad=requires_grad)


def ones(*shape, dtype=np.float32, requires_grad=False) -> Tensor:
    shape = shape[0] if len(shape) == 1 and isinstance(shape[0], tuple | list) else shape
    return Tensor(np.ones(shape, dtype=dtype), requires_grad=requires_grad)


def zeros_like(t: Tensor, requires_grad=False) -> Tensor:
    return Tensor(np.zeros_like(t.data), requires_grad=requires_grad)


def ones_like(t: Tensor, requires_grad=False) -> Tensor:
    return Tensor(np.ones_like(t.data), requires_grad=requires_grad)


def arange(*args, dtype=None) -> Tensor:
    return Tensor(np.arange(*args, dtype=dtype))


def randn(*shape, rng: np.random.Generator | None = None, dtype=np.float32, requires_grad=False) -> Tensor:
    """Standard-normal samples; pass ``rng`` (a NumPy Generator) for reproducible draws."""
    shape = shape[0] if len(shape) == 1 and isinstance(shape[0], tuple | list) else shape
    rng = rng if rng is not None else np.random.default_rng()
    return Tensor(rng.standard_normal(shape).astype(dtype), requires_grad=requires_grad)
