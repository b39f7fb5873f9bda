"""PyTorch's dtype names, meaning NumPy's dtypes: ``mg.float32``, ``mg.long``, ``mg.bool``...

They are ``np.dtype`` objects, so ``x.dtype == mg.int64``, ``x.to(mg.float64)``
and ``np.zeros(3, mg.float32)`` all work. (Their own module: ``float``, ``int``
and ``bool`` are among PyTorch's names, and would hide Python's builtins in any
module that also computes.)
"""

import builtins

import numpy as np

float16 = half = np.dtype(np.float16)
float32 = float = np.dtype(np.float32)  # noqa: A001  (torch.float is float32)
float64 = double = np.dtype(np.float64)
int8, int16 = np.dtype(np.int8), np.dtype(np.int16)
int32 = int = np.dtype(np.int32)  # noqa: A001  (torch.int is int32)
int64 = long = np.dtype(np.int64)
uint8 = np.dtype(np.uint8)
bool = np.dtype(np.bool_)  # noqa: A001  (torch.bool)



class TensorType:
    """``mg.LongTensor``, ``mg.FloatTensor``...: PyTorch's legacy tensor types, which code still passes to name a
    dtype (``x.type(torch.LongTensor)``); here each stands for its dtype. Called, each is PyTorch's legacy
    constructor: ``mg.LongTensor([1, 2])`` holds that data, ``mg.FloatTensor(2, 3)`` is ``mg.empty(2, 3)``."""

    def __init__(self, name: str, dtype):
        self.__name__, self._dtype = name, np.dtype(dtype)  # (not .dtype: np.dtype() would read it as one)

    def __repr__(self) -> str:
        return f"<class 'minigrad.{self.__name__}'>"

    def __call__(self, *args):
        from .creation import empty, tensor  # (creation.py reads this file)

        if len(args) == 1 and not isinstance(args[0], builtins.int | np.integer):  # (int is a dtype here)
            return tensor(args[0], dtype=self._dtype)
        return empty(*args, dtype=self._dtype)


FloatTensor, DoubleTensor, HalfTensor = (TensorType(n, t) for n, t in (
    ("FloatTensor", np.float32), ("DoubleTensor", np.float64), ("HalfTensor", np.float16)))
LongTensor, IntTensor, ShortTensor, CharTensor, ByteTensor, BoolTensor = (TensorType(n, t) for n, t in (
    ("LongTensor", np.int64), ("IntTensor", np.int32), ("ShortTensor", np.int16), ("CharTensor", np.int8),
    ("ByteTensor", np.uint8), ("BoolTensor", np.bool_)))

DTYPE_NAMES = ("float16", "half", "float32", "float", "float64", "double", "int8", "int16", "int32", "int",
               "int64", "long", "uint8", "bool", "FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor",
               "IntTensor", "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor")


def legacy(dtype):
    """``x.type(...)``'s argument: a legacy tensor type (``mg.LongTensor``, ``'torch.LongTensor'``) as its dtype,
    anything else as given (only ``x.type`` takes them, as in PyTorch)."""
    if isinstance(dtype, str) and dtype.startswith(("torch.", "minigrad.")) and dtype.endswith("Tensor"):
        dtype = globals().get(dtype.split(".", 1)[1], dtype)
    return dtype._dtype if isinstance(dtype, TensorType) else dtype


def as_dtype(dtype, who: str) -> np.dtype | None:
    """``dtype`` (a NumPy dtype, a type such as ``np.float32`` or a name such as ``'float32'``) as a np.dtype."""
    if dtype is None:
        return None
    try:
        return np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{who}: dtype={dtype!r} is not a dtype; write one of mg.float32, mg.float64, mg.int64 "
                        f"(mg.long), mg.bool") from None


