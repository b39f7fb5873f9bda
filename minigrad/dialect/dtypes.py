"""PyTorch's dtype names, meaning NumPy's dtypes: ``mg.float32``, ``mg.long``, ``mg.bool``...

They are ``np.dtype`` objects, so ``x.dtype == mg.int64``, ``x.to(mg.float64)``
and ``np.zeros(3, mg.float32)`` all work. (Their own module: ``float``, ``int``
and ``bool`` are among PyTorch's names, and would hide Python's builtins in any
module that also computes.)
"""

import numpy as np

float16 = half = np.dtype(np.float16)
float32 = float = np.dtype(np.float32)  # noqa: A001  (torch.float is float32)
float64 = double = np.dtype(np.float64)
int8, int16 = np.dtype(np.int8), np.dtype(np.int16)
int32 = int = np.dtype(np.int32)  # noqa: A001  (torch.int is int32)
int64 = long = np.dtype(np.int64)
uint8 = np.dtype(np.uint8)
bool = np.dtype(np.bool_)  # noqa: A001  (torch.bool)

DTYPE_NAMES = ("float16", "half", "float32", "float", "float64", "double", "int8", "int16", "int32", "int",
               "int64", "long", "uint8", "bool")


def as_dtype(dtype, who: str) -> np.dtype | None:
    """``dtype`` (a NumPy dtype, a type such as ``np.float32`` or a name such as ``'float32'``) as a np.dtype."""
    if dtype is None:
        return None
    try:
        return np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{who}: dtype={dtype!r} is not a dtype; write one of mg.float32, mg.float64, mg.int64 "
                        f"(mg.long), mg.bool") from None


