"""What an op is, and how calling one records it: ``Op``, ``@op``, and ``apply``.

``@op(method=..., operator=...)`` reads a block of ``ops.py`` (a class used as a
namespace: ``forward``, ``vjp``, ``samples``, optionally ``composite``), makes an
``Op``, stores it in ``OPS`` and binds ``Tensor.<method>`` and the operators, each
named for its op (``Tensor.__mul__`` carries ``mul``'s docstring and leads
``inspect.getsource`` to the block). Running a block again (an edited notebook
cell) replaces its op; a different block that takes a name already in use is an
error. ``ops.py`` and ``fused/`` hold the blocks; the tests walk ``OPS``.

A method whose spelling needs reading (``x.transpose(0, 1)``, ``x.var(0, keepdim=True)``,
``x.max(-1)``) is a call form instead: ``dialect/`` writes it, and
``bind_call_form`` binds it, named for its op as the op's own methods are.

Calling an op, as a method, an operator or ``Op.__call__``, is ``apply``: run the
forward on the inputs' arrays and, when a gradient may be wanted, record the op,
its inputs and parameters on the output. That record is the graph backward walks.
"""

from __future__ import annotations

import dis
import inspect
import types
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .modes import state as _state
from .tensor import OpError, Tensor
from .versions import writes as _writes


@dataclass
class Sample:
    """Inputs for the finite-difference tests of one op.

    Each entry of ``inputs`` is a shape (drawn at random, float64) or a ready
    ndarray (used as is; boolean and integer arrays are not differentiated).
    ``domain=(lo, hi)`` draws uniformly from that interval instead of N(0, 1),
    for ops defined only there (log on positives, say).
    """

    inputs: tuple
    params: dict = field(default_factory=dict)
    domain: tuple | None = None

    def arrays(self, rng: np.random.Generator) -> list[np.ndarray]:
        out = []
        for spec in self.inputs:
            if isinstance(spec, np.ndarray):
                out.append(spec.copy())
            elif self.domain is not None:
                out.append(rng.uniform(*self.domain, size=spec))
            else:
                out.append(rng.standard_normal(spec))
        return out


def sample(*inputs, domain=None, **params) -> Sample:
    """Shorthand: ``sample((3, 4), (4,), axis=0)``."""
    return Sample(inputs, params, domain)


@dataclass
class Op:
    """One primitive: its forward on ndarrays, its VJP on Tensors, its test samples.

    ``composite`` (fused ops only): the same function written with core ops, on
    Tensors; ``minigrad.composite_mode()`` runs it instead of the op.
    """

    name: str
    forward: Callable
    vjp: Callable
    samples: list[Sample]
    doc: str = ""
    method: str | None = None  # bind as Tensor.<method>
    operator: str | None = None  # bind as Tensor.__<op>__ and __r<op>__
    composite: Callable | None = None
    origin: str = ""  # module and name of the block that defined it: running that block again replaces it
    block: type | None = None  # the block itself, so the bound methods can point at its source
    promotes: bool = False  # inputs of different dtypes are cast to PyTorch's result type first (``promoted``)
    saves: tuple | None = None  # what the VJP reads: positions in (out, *inputs) (found in its code: _reads)

    def __post_init__(self):
        if self.saves is None or isinstance(self.saves, dict) or isinstance(self.saves[0] if self.saves else 0, str):
            self.saves = _reads(self.vjp, self.saves)

    def __call__(self, *inputs, **params):
        return apply(self, *inputs, **params)

    def __repr__(self) -> str:
        return f"<op {self.name}>"


OPS: dict[str, Op] = {}

_METADATA = {"shape", "ndim", "dtype", "size", "_saved"}  # read from a tensor, these are not its values


def _reads(vjp, names=None) -> tuple:
    """The positions in ``(out, *inputs)`` of the tensors ``vjp`` reads the values of: what backward checks.

    As PyTorch saves for backward only what the formula needs, a tensor the VJP
    reads only for its shape, ndim or dtype (``sum``'s input), or not at all
    (``add``'s), is not saved, and may be written in place before backward.
    ``names``: the block's own ``saves = ("x", ...)``, instead of reading the
    code; a dict says which gradients read each (``mul``'s). A var-positional input
    (``*xs``) that is read is one ``slice``: all of them.
    """
    code = getattr(vjp, "__code__", None)
    if code is None:  # (a VJP that is not a plain function: taken to read everything)
        return (slice(0, None),)
    params = list(code.co_varnames[1:code.co_argcount])  # (out, *inputs) after g
    if code.co_flags & inspect.CO_VARARGS:
        params.append(code.co_varnames[code.co_argcount + code.co_kwonlyargcount])
    if isinstance(names, dict):  # {"a": ("b",)}: a is read only for b's gradient, so only when b requires grad
        return tuple((params.index(name), tuple(map(params.index, by))) for name, by in names.items())
    if names is None:
        names = set(code.co_cellvars)  # a tensor a nested function reads: taken as read
        instructions = list(dis.get_instructions(code)) + [None]
        for ins, after in zip(instructions, instructions[1:]):
            if ins.opname.startswith("LOAD_FAST") or ins.opname == "LOAD_DEREF":
                loaded = ins.argval if isinstance(ins.argval, tuple) else (ins.argval,)
                if len(loaded) > 1 or after is None or after.opname != "LOAD_ATTR" or after.argval not in _METADATA:
                    names.update(loaded)
    star = len(params) - 1 if code.co_flags & inspect.CO_VARARGS else None
    return tuple(slice(i, None) if i == star else i for i, name in enumerate(params) if name in names)


def record(out: Tensor, op, inputs: tuple, params: dict, saved=None) -> Tensor:
    """Make ``out`` a node of the graph: the op that made it, its inputs and parameters, what its forward kept.

    The one place a node is written: ``apply`` (every op), ``checkpoint``, in-place
    ops in the graph (``inplace.py``). The clock of writes (``versions.py``) dates
    the node, so backward can refuse it if an array its VJP reads is written later.
    """
    out.requires_grad = True
    out._op, out._inputs, out._params, out._saved = op, inputs, params, saved
    out._scope, out._vjp_depth, out._made_at = _state.scope, _state.vjp_depth, _writes.count
    return out


# --------------------------------------------------------------------------------------
# apply: run one op of the table and record it in the graph
# --------------------------------------------------------------------------------------


_NUMBER = (bool, int, float, np.bool_, np.number)  # (tuples made once: `bool | int | ...` is built at each call)
_FLOAT = (float, np.floating)


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
    if isinstance(x, _NUMBER):
        is_float = isinstance(x, _FLOAT)
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
        if isinstance(x, Tensor):
            dtype = x._data.dtype
            if dtype.kind == "f":
                like = dtype
                break
            if like is None and dtype.kind in "iu":
                like = dtype
    tensors = []  # (a loop: `x * 0.5` comes here on every call, and a comprehension is a function call of its own)
    for x in inputs:
        tensors.append(_as_input(x, like))
    return tuple(tensors)


_CATEGORY = {"b": 0, "u": 1, "i": 1, "f": 2}


def _result_type(dtypes) -> np.dtype | None:
    """PyTorch's promotion inside one group of operands: the highest category (int < float) decides, and only the
    dtypes of that category are promoted with each other (float32 with int64 is float32, not NumPy's float64)."""
    if not dtypes:
        return None
    top = max(_CATEGORY.get(d.kind, 3) for d in dtypes)
    return np.result_type(*[d for d in dtypes if _CATEGORY.get(d.kind, 3) == top])


def promoted(tensors: tuple) -> tuple:
    """The inputs of an op that ``promotes``, cast to PyTorch's result type (``torch.result_type``).

    Tensors with dims outrank 0-d tensors and numbers (which ``_as_input`` made 0-d), unless those
    are of a higher category: a float32 matrix times an int64 vector is float32, an int64 vector
    times a float64 0-d tensor is float64, ``int_tensor * 0.5`` is float32. Bool inputs (a
    condition, a mask) are left as they are. The casts are recorded ops: gradients flow back
    through them in each input's own dtype.
    """
    first = tensors[0]._data.dtype
    if all(t._data.dtype == first for t in tensors):
        return tensors
    dims, zeros = [], []
    for t in tensors:
        dtype = t._data.dtype
        if dtype.kind != "b":
            (dims if t._data.ndim else zeros).append(dtype)
    want, zero = _result_type(dims), _result_type(zeros)
    if want is None or (zero is not None and _CATEGORY.get(zero.kind, 3) > _CATEGORY.get(want.kind, 3)):
        want = zero
    return tuple(t if t._data.dtype.kind == "b" or t._data.dtype == want else apply(OPS["astype"], t, dtype=want)
                 for t in tensors)


def _inputs_text(tensors, params) -> str:
    parts = [f"{tuple(t.shape)} {t.dtype}" for t in tensors]
    def is_array(v):  # arrays (a mask, layer norm's stats) would flood the message
        return isinstance(v, np.ndarray) or (isinstance(v, tuple) and any(isinstance(a, np.ndarray) for a in v))

    shown = {k: v for k, v in (params or {}).items() if not is_array(v)}
    return "inputs " + ", ".join(parts) + (f"; params {shown}" if shown else "")


def apply(op, *inputs, **params) -> Tensor:
    """Run ``op.forward`` on the inputs' arrays and, if needed, record the op for backward.

    ``op`` is an entry of the op table (``registry.Op``): a name, a forward on
    ndarrays and a VJP. In composite mode a fused op runs its composite instead,
    which records the core ops it is made of.
    """
    tensors = inputs
    for x in inputs:
        if not isinstance(x, Tensor):  # a number or array among the inputs: make them all Tensors
            tensors = _as_inputs(inputs)
            break
    if op.promotes:  # (add, mul, where, cat...: PyTorch's type promotion, where the dtypes differ)
        first = tensors[0]._data.dtype
        for t in tensors:
            if t._data.dtype is not first:  # (one dtype is one object: an identity test, as this runs on every op)
                tensors = promoted(tensors)
                break
    if op.composite is not None and _state.composite:  # (core ops have no composite: no mode lookup)
        return op.composite(*tensors, **params)
    arrays = []  # the arrays themselves (.data is a property, versions.py), gathered by a loop: a comprehension
    for t in tensors:  # is a function call of its own, and this runs on every op
        arrays.append(t._data)
    try:
        out = op.forward(*arrays, **params)
    except (ValueError, IndexError, TypeError) as err:
        renamed = {new: params[old] for old, new in (("dim", "axis"), ("keepdim", "keepdims")) if old in params}
        if renamed:  # PyTorch's spelling given to a block, whose parameters are NumPy's
            spelled = ", ".join(f"{name}={value!r}" for name, value in renamed.items())
            raise OpError(f"{op.name}: the op table's blocks take NumPy's parameter names: OPS[{op.name!r}](x, "
                          f"{spelled}) (the Tensor methods take PyTorch's dim= and keepdim= too) "
                          f"({_inputs_text(tensors, params)})") from None
        raise OpError(f"{op.name}: {err} ({_inputs_text(tensors, params)})") from None
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
    result = Tensor._wrap(out)
    if needs_grad:
        record(result, op, tensors, params, saved)
    if _state.anomaly:  # detect_anomaly(): remember the user's line, check the output for NaN/Inf
        from .autograd.anomaly import check_forward, user_frame  # (autograd is built on this file)

        result._trace = user_frame()
        check_forward(op, tensors, params, result)
    return result


def op(method: str | None = None, operator: str | None = None):
    """Class decorator that turns one block into an ``Op``, registers it and binds its Tensor method.

    Running the same block again (a notebook cell, edited) replaces the op and
    rebinds its method: a block is known by its origin, module and qualified
    name (``__main__.softplus`` in a notebook). A different block that takes an
    op name, a Tensor method or an operator already in use is an error naming
    both blocks.
    """
    if isinstance(method, type):  # written @op, without the parentheses: method is the block itself
        raise TypeError(f"@op needs parentheses: write @op() (or @op(method=...)) above class {method.__name__}")
    if not (method is None or isinstance(method, str)) or not (operator is None or isinstance(operator, str)):
        raise TypeError(f"@op(method=..., operator=...) takes names (strings), got {method!r}, {operator!r}")

    def register(block) -> Op:
        name = block.__name__
        origin = f"{block.__module__}.{block.__qualname__}"
        for part in ("forward", "vjp"):
            if not callable(getattr(block, part, None)):
                raise TypeError(f"op {name!r}: the block needs a {part}() function")
        previous = OPS.get(name)
        if previous is not None and previous.origin != origin:
            raise ValueError(f"op {name!r} is already registered by {previous.origin}, so {origin} cannot take "
                             f"its name: rename the class (the op takes the class's name), or call "
                             f"minigrad.ops.unregister({name!r}) first if you mean to replace it")
        for attribute in _attributes(method, operator):
            holder = _bound_by(attribute)
            if holder is not None and (holder is _TENSOR_OWN or holder.origin != origin):
                if holder is _TENSOR_OWN:
                    owner = "one of Tensor's own methods"
                elif getattr(vars(Tensor)[attribute], "_call_form", False):
                    owner = f"a call form of op {holder.name!r} ({vars(Tensor)[attribute].__module__})"
                else:
                    owner = f"bound by op {holder.name!r} ({holder.origin}); unregister({holder.name!r}) frees it"
                raise ValueError(f"op {name!r} ({origin}): Tensor.{attribute} is already {owner}. "
                                 f"Pick another method= / operator= for this op")
        new = Op(name, block.forward, block.vjp, list(getattr(block, "samples", [])),
                 inspect.cleandoc(block.__doc__ or ""), method, operator,
                 getattr(block, "composite", None), origin, block, getattr(block, "promotes", False),
                 getattr(block, "saves", None))
        if previous is not None:
            _unbind(previous)  # the edited block may bind a different method, or none
        OPS[name] = new
        _bind(new)
        return new

    return register


def unregister(name: str) -> Op:
    """Remove op ``name`` from the table and its method and operators from ``Tensor``; returns the op.

    For notebooks and tests that define ops of their own and want them gone again.
    """
    if name not in OPS:
        raise KeyError(f"unregister: there is no op {name!r} in the table")
    removed = OPS.pop(name)
    _unbind(removed)
    return removed


def _attributes(method: str | None, operator: str | None) -> list[str]:
    """The Tensor attributes an op binds: its method, and ``__<op>__``/``__r<op>__`` for an operator."""
    return ([method] if method else []) + ([f"__{operator}__", f"__r{operator}__"] if operator else [])


_TENSOR_OWN = object()  # what _bound_by returns for a Tensor method no op bound (float, reshape...)


def _bound_by(attribute: str):
    """The op that bound ``Tensor.<attribute>``, ``_TENSOR_OWN`` if Tensor has it otherwise, None if free."""
    if attribute not in vars(Tensor):
        return None
    return getattr(vars(Tensor)[attribute], "_bound_by_op", _TENSOR_OWN)


def _bind(op: Op) -> None:
    """Give ``Tensor`` the op's method (``x.sum(axis=0)``) and operators (``a + b``, ``2 + a``)."""
    bound = {}
    if op.method:
        bound[op.method] = _method(op)
    if op.operator:
        bound[f"__{op.operator}__"], bound[f"__r{op.operator}__"] = _operators(op)
    for attribute, function in bound.items():
        function.__name__ = attribute
        function.__qualname__ = f"Tensor.{attribute}"
        function.__module__ = Tensor.__module__
        function.__wrapped__ = op.block  # inspect.getsource(Tensor.__mul__) shows the op's block in ops.py
        function._bound_by_op = op  # so a re-run of the block may rebind it, and another block may not
        function._displaced = vars(Tensor).get(attribute)  # a free name's placeholder (dialect.refused), put back
        setattr(Tensor, attribute, function)


_SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "matmul": "@"}  # for the operators' docstrings


def _operators(op: Op):
    """``a <op> b`` and the reflected ``b <op> a`` (Python calls ``a.__r<op>__(b)`` when ``b`` is a number)."""
    def operator(self, other) -> Tensor:
        return apply(op, self, other)

    def reflected(self, other) -> Tensor:
        return apply(op, other, self)

    signature = inspect.Signature([inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD)
                                   for name in ("self", "other")], return_annotation="Tensor")
    symbol = _SYMBOLS.get(op.operator, op.operator)
    for function, spelled in ((operator, f"self {symbol} other"), (reflected, f"other {symbol} self")):
        function.__signature__ = signature
        function.__doc__ = f"``{spelled}``: the op ``{op.name}`` ({op.origin}).\n\n{op.doc}"
    return operator, reflected


def _unbind(op: Op) -> None:
    """Take the op's method and operators off ``Tensor`` (those it bound itself, nothing else)."""
    for attribute in _attributes(op.method, op.operator):
        bound = vars(Tensor).get(attribute)
        if getattr(bound, "_bound_by_op", None) is op:
            delattr(Tensor, attribute)
            if bound._displaced is not None:
                setattr(Tensor, attribute, bound._displaced)


def _method(op: Op):
    """A Tensor method for ``op``: the tensor is the first input; the op's parameters may come positionally.

    Its signature is the forward's, with the parameters made positional-or-keyword,
    so ``help(Tensor.sum)`` shows ``(self, axis=None, keepdims=False)``.
    """
    signature = inspect.signature(op.forward)
    params = list(signature.parameters.values())
    takes_many = any(p.kind == p.VAR_POSITIONAL for p in params)  # (*inputs: every argument is a tensor)
    n_tensors = len([p for p in params if p.kind == p.POSITIONAL_OR_KEYWORD])  # (the builtin sum is an op here)
    names = [p.name for p in params if p.kind == p.KEYWORD_ONLY]

    def method(self, *args, **kwargs):
        if takes_many:
            return apply(op, self, *args, **kwargs)
        tensors, extra = args[: n_tensors - 1], args[n_tensors - 1:]
        if len(extra) > len(names):
            raise TypeError(f"{op.method}() takes at most {len(names)} parameter(s) after its tensor inputs "
                            f"({', '.join(names) or 'none'}), got {len(extra)}")
        kwargs.update(zip(names, extra))
        return apply(op, self, *tensors, **kwargs)

    shown = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    for p in params[1:]:
        shown.append(p if takes_many or p.kind != p.KEYWORD_ONLY else p.replace(kind=p.POSITIONAL_OR_KEYWORD))
    method.__signature__ = signature.replace(parameters=shown, return_annotation="Tensor")
    method.__doc__ = f"The op ``{op.name}`` ({op.origin}).\n\n{op.doc}"
    return method


def bind_call_form(function, name: str, op_name: str | None) -> None:
    """Put ``function`` on ``Tensor`` as ``Tensor.<name>``: a call form (``dialect/``) of op ``op_name``.

    A call form reads PyTorch's and NumPy's spellings of a call and applies the op.
    ``help(Tensor.<name>)`` shows the form's docstring, then the op's; ``inspect.getsource``
    leads to the op's block; and no other op's block can take the name. A property
    (``x.mT``) is bound as it is.
    """
    op = OPS[op_name] if op_name else None
    current = vars(Tensor).get(name)
    if current is not None and not getattr(current, "_call_form", False) and not isinstance(current, property):
        raise ValueError(f"Tensor.{name} is already {_bound_by(name)!r}; a call form cannot take its name")
    if isinstance(function, property):
        setattr(Tensor, name, function)
        return
    bound = types.FunctionType(function.__code__, function.__globals__, name, function.__defaults__,
                               function.__closure__)  # a copy: one form may be bound under several names
    bound.__kwdefaults__ = function.__kwdefaults__
    bound.__signature__ = inspect.signature(function)
    bound.__qualname__ = f"Tensor.{name}"
    bound.__module__ = function.__module__
    doc = inspect.cleandoc(function.__doc__ or "")
    doc += f"\n\nThe call is read by ``{function.__module__}.{function.__qualname__}``"
    bound.__doc__ = f"{doc}." if op is None else f"{doc}, a form of the op ``{op.name}`` ({op.origin}):\n\n{op.doc}"
    if op is not None:
        bound.__wrapped__ = op.block  # inspect.getsource(Tensor.var) shows the op's block
        bound._bound_by_op = op  # so no other block takes the name
    bound._call_form = True
    setattr(Tensor, name, bound)
