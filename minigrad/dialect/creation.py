"""Making tensors: from data, filled, ranges; and the one device minigrad has, the CPU.

``mg.tensor(data)`` picks the dtype as PyTorch and NumPy both do for integers
(a list of ints is int64, so it can index), keeps bools bool, and makes float
data float32 (minigrad trains in float32; NumPy would make it float64).
``mg.Tensor(data)``, the class, always makes floats of a list, as ``torch.Tensor``
does. ndarrays keep their dtype; ``mg.from_numpy(a)`` shares ``a``'s memory.

The dtype names (``mg.float32``, ``mg.long``...) are in ``dtypes.py``. Every
constructor takes ``device=``; minigrad computes on the CPU only, so ``'cpu'``
is accepted and anything else is an error that says where to go for a GPU
(the README's "continue on PyTorch" section).
"""

from __future__ import annotations

import numpy as np

from ..tensor import Tensor
from .arguments import bind
from .dtypes import as_dtype

# --------------------------------------------------------------------------------------
# Devices: the CPU only
# --------------------------------------------------------------------------------------


class device(str):  # noqa: N801  (torch.device's name)
    """``mg.device('cpu')``, what ``t.device`` returns: a string that is ``'cpu'``, with ``.type``, as torch.device."""

    def __new__(cls, spec="cpu"):
        return super().__new__(cls, check_device(spec, "device"))

    @property
    def type(self) -> str:
        return "cpu"

    def __repr__(self) -> str:
        return "device(type='cpu')"


CPU_ONLY = ("minigrad computes on the CPU only (NumPy arrays); use device='cpu' here, and for a GPU continue the "
            "same model in PyTorch (README: 'When you outgrow minigrad: continue on PyTorch', "
            "python -m demos.continue_in_pytorch)")


def check_device(spec, who: str) -> str:
    """``'cpu'`` for None, ``'cpu'``, ``'cpu:0'`` or a device; an error naming the README's PyTorch path otherwise."""
    if spec is None:
        return "cpu"
    name = spec if isinstance(spec, str) else getattr(spec, "type", None)
    if not isinstance(name, str):
        raise TypeError(f"{who}: device={spec!r} is not a device; write device='cpu'")
    if name.split(":")[0] != "cpu":
        raise RuntimeError(f"{who}: device={spec!r}: {CPU_ONLY}")
    return "cpu"


CPU = device("cpu")


class cuda:  # noqa: N801  (torch.cuda's name)
    """``mg.cuda.is_available()`` is False, so ``device = 'cuda' if torch.cuda.is_available() else 'cpu'`` runs."""

    @staticmethod
    def is_available() -> bool:
        return False

    @staticmethod
    def device_count() -> int:
        return 0

    @staticmethod
    def manual_seed(seed: int) -> None:
        """Seeds the CPU generator (``mg.manual_seed``), so device-agnostic code that seeds CUDA runs as on CPU."""
        from .random import manual_seed

        manual_seed(seed)

    manual_seed_all = manual_seed


class accelerator:  # noqa: N801  (torch.accelerator's name)
    """No accelerator here, as PyTorch says on such a machine: ``is_available()`` is False and
    ``current_accelerator()`` None, so the tutorials' device line picks "cpu"."""

    @staticmethod
    def is_available() -> bool:
        return False

    @staticmethod
    def current_accelerator():
        return None

    @staticmethod
    def device_count() -> int:
        return 0


class _Absent:
    """A GPU backend this machine lacks (``mg.backends.mps``): not available, not built."""

    @staticmethod
    def is_available() -> bool:
        return False

    @staticmethod
    def is_built() -> bool:
        return False


class backends:  # noqa: N801  (torch.backends' name)
    """``mg.backends.mps.is_available()`` is False (the tutorials' device line), and the GPU switches scripts set
    (``torch.backends.cuda.matmul.allow_tf32 = True``, ``torch.backends.cudnn.benchmark = True``) can be set:
    on the CPU they change nothing."""

    mps = _Absent

    class cuda:  # noqa: N801
        class matmul:  # noqa: N801
            allow_tf32 = False

    class cudnn(_Absent):  # noqa: N801
        allow_tf32, benchmark, deterministic = True, False, False


# --------------------------------------------------------------------------------------
# Constructors
# --------------------------------------------------------------------------------------


def _shape(size: tuple, who: str) -> tuple:
    """``zeros(2, 3)`` or ``zeros((2, 3))``: the shape as a tuple of ints."""
    shape = tuple(size[0]) if len(size) == 1 and isinstance(size[0], tuple | list) else tuple(size)
    for n in shape:
        if not isinstance(n, int | np.integer) or isinstance(n, np.bool_ | bool):
            raise TypeError(f"{who}: the size must be ints, as {who}(2, 3) or {who}((2, 3)); got {size!r}")
    return shape


def tensor(data, dtype=None, device=None, requires_grad: bool = False, name: str | None = None) -> Tensor:
    """A tensor holding a copy of ``data``: int data is int64, bool stays bool, float data float32.

    ndarrays and tensors keep their dtype; ``dtype=`` (``mg.float64``, ``mg.long``...) chooses another.
    """
    check_device(device, "tensor")
    dtype = as_dtype(dtype, "tensor")
    if dtype is None and not isinstance(data, np.ndarray | np.generic | Tensor):
        kind = np.asarray(data).dtype.kind
        if kind in "iu":
            dtype = np.dtype(np.int64)  # (Tensor's own rule would make them float32, as torch.Tensor does)
    return Tensor(data, requires_grad=requires_grad, dtype=dtype, name=name)


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor sharing ``array``'s memory (a write to either shows in both), as ``torch.from_numpy``."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy: expected an ndarray, got {type(array).__name__}; for other data write "
                        f"mg.tensor(data)")
    return Tensor._wrap(array)


def sized(shape: tuple, size, who: str) -> tuple:
    """The size given positionally (``zeros(2, 3)``, ``zeros((2, 3))``) or as PyTorch's keyword (``size=(2, 3)``)."""
    if size is None:
        return shape
    if shape:
        raise TypeError(f"{who}: the size is given twice, positionally and as size=; write {who}(size=...) alone")
    return (size,)


def _filled(who: str, fill, size, dtype, device, requires_grad) -> Tensor:
    check_device(device, who)
    dtype = as_dtype(dtype, who) or np.dtype(np.float32)
    return Tensor(np.full(_shape(size, who), fill, dtype=dtype), requires_grad=requires_grad)


def zeros(*shape, size=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Zeros of shape ``size`` (float32 unless ``dtype``): ``mg.zeros(2, 3)``, ``mg.zeros((2, 3))``,
    ``mg.zeros(size=(2, 3))``."""
    return _filled("zeros", 0, sized(shape, size, "zeros"), dtype, device, requires_grad)


def ones(*shape, size=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Ones of shape ``size`` (float32 unless ``dtype``)."""
    return _filled("ones", 1, sized(shape, size, "ones"), dtype, device, requires_grad)


def empty(*shape, size=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor of shape ``size`` to be written over (minigrad fills it with zeros)."""
    return _filled("empty", 0, sized(shape, size, "empty"), dtype, device, requires_grad)


def full(size, fill_value, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """``fill_value`` everywhere in shape ``size``: float32 for a float, int64 for an int, bool for a bool."""
    if dtype is None and isinstance(fill_value, bool | int | np.integer | np.bool_):
        dtype = np.bool_ if isinstance(fill_value, bool | np.bool_) else np.int64
    return _filled("full", fill_value, (size,), dtype, device, requires_grad)


def eye(n: int, m: int | None = None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """The ``n`` x ``m`` identity matrix (float32 unless ``dtype``)."""
    check_device(device, "eye")
    return Tensor(np.eye(n, m, dtype=as_dtype(dtype, "eye") or np.float32), requires_grad=requires_grad)


def _like(who: str, fill, t: Tensor, dtype, device, requires_grad) -> Tensor:
    check_device(device, who)
    return Tensor(np.full(t.shape, fill, dtype=as_dtype(dtype, who) or t.dtype), requires_grad=requires_grad)


def zeros_like(input: Tensor, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Zeros with ``input``'s shape and dtype."""
    return _like("zeros_like", 0, input, dtype, device, requires_grad)


def ones_like(input: Tensor, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Ones with ``input``'s shape and dtype."""
    return _like("ones_like", 1, input, dtype, device, requires_grad)


def full_like(input: Tensor, fill_value, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """``fill_value`` with ``input``'s shape and dtype."""
    return _like("full_like", fill_value, input, dtype, device, requires_grad)


def arange(*args, start=None, end=None, step=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """``arange(end)``, ``arange(start, end[, step])`` (or PyTorch's keywords, ``arange(start=0, end=10, step=2)``):
    int64 for int arguments, float32 if any is a float."""
    keywords = {k: v for k, v in dict(start=start, end=end, step=step).items() if v is not None}
    if keywords:  # the positional ones are start, end, step in that order
        given = dict(zip(("start", "end", "step"), args))
        if given.keys() & keywords.keys() or "end" not in given.keys() | keywords.keys():
            raise TypeError(f"arange: got {args} and {keywords}; write mg.arange(0, 10, 2) or "
                            f"mg.arange(start=0, end=10, step=2)")
        given |= keywords
        args = (given.get("start", 0), given["end"], given.get("step", 1))
    check_device(device, "arange")
    dtype = as_dtype(dtype, "arange")
    if dtype is None:
        dtype = np.dtype(np.float32) if any(isinstance(a, float | np.floating) for a in args) else np.dtype(np.int64)
    return Tensor(np.arange(*args, dtype=dtype), requires_grad=requires_grad)


def linspace(start, end, steps: int, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """``steps`` evenly spaced values from ``start`` to ``end``, both included (float32 unless ``dtype``)."""
    check_device(device, "linspace")
    dtype = as_dtype(dtype, "linspace") or np.dtype(np.float32)
    return Tensor(np.linspace(start, end, steps).astype(dtype), requires_grad=requires_grad)


# --------------------------------------------------------------------------------------
# x.new_zeros(...) and friends: a new tensor with x's dtype (PyTorch's "new_" methods)
# --------------------------------------------------------------------------------------


@bind(None, "new_zeros")
def new_zeros(self, *size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """``x.new_zeros(2, 3)``: zeros in x's dtype (unless ``dtype=``)."""
    return zeros(*size, dtype=self.dtype if dtype is None else dtype, device=device, requires_grad=requires_grad)


@bind(None, "new_ones")
def new_ones(self, *size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """``x.new_ones(2, 3)``: ones in x's dtype (unless ``dtype=``)."""
    return ones(*size, dtype=self.dtype if dtype is None else dtype, device=device, requires_grad=requires_grad)


@bind(None, "new_empty")
def new_empty(self, *size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """``x.new_empty(2, 3)``: a new tensor in x's dtype (zeros here, as ``mg.empty``)."""
    return empty(*size, dtype=self.dtype if dtype is None else dtype, device=device, requires_grad=requires_grad)


@bind(None, "new_full")
def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """``x.new_full(size, v)``: ``v`` everywhere, in x's dtype (unless ``dtype=``)."""
    return full(size, fill_value, dtype=self.dtype if dtype is None else dtype, device=device,
                requires_grad=requires_grad)


@bind(None, "new_tensor")
def new_tensor(self, data, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """``x.new_tensor(data)``: a copy of ``data`` in x's dtype (unless ``dtype=``)."""
    return tensor(data, dtype=self.dtype if dtype is None else dtype, device=device, requires_grad=requires_grad)


# --------------------------------------------------------------------------------------
# Defaults: the dtype and device PyTorch code may set at its top
# --------------------------------------------------------------------------------------


def get_default_dtype() -> np.dtype:
    """float32: minigrad's floats (``mg.tensor([1.0])``, ``mg.randn``, every layer's parameters)."""
    return np.dtype(np.float32)


def set_default_dtype(d) -> None:
    """``mg.set_default_dtype(mg.float32)`` is accepted (it is the default); another dtype is an error saying what
    to write, since minigrad's constructors and layers make float32 (cast a model with ``model.double()``)."""
    if as_dtype(d, "set_default_dtype") != np.float32:
        raise ValueError(f"set_default_dtype: minigrad's default float is float32 and cannot be changed; make "
                         f"tensors with dtype={d!r} (mg.zeros(3, dtype=mg.float64)) or cast them (x.double(), "
                         f"model.double())")


def set_default_device(device) -> None:
    """``mg.set_default_device('cpu')`` is accepted: the CPU is minigrad's only device (a GPU is an error)."""
    check_device(device, "set_default_device")
