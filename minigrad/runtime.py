"""Process-wide settings an entry script may choose; importing minigrad changes none of them.

``tune_malloc()`` keeps freed arrays in the process's heap instead of handing
them back to the OS. A training step allocates and frees the same few-megabyte
arrays hundreds of times (activations, gradients, temporaries). glibc's malloc
serves blocks that large with mmap and returns them to the kernel when they are
freed, and trims the heap when its top is free, so the next step page-faults the
same memory back in, a few microseconds per 4 KB page. Raising the two thresholds
keeps the memory in the process, as PyTorch's caching allocator does for its
tensors. Peak memory is unchanged: the same blocks are reused rather than
returned and re-requested. What it is worth: ``benchmarks/README.md``
(``python -m benchmarks.train_step --ab-malloc``).

The training demos and the benchmark workers call it; a library that imports
minigrad should not have its process's allocator changed behind its back, so
``import minigrad`` does not. Only glibc has these knobs; elsewhere it does
nothing. The environment variable ``MINIGRAD_MALLOC_TUNE=0`` turns it off.
"""

from __future__ import annotations

import ctypes
import os
import sys

_M_TRIM_THRESHOLD = -1  # mallopt parameter numbers, from glibc's <malloc.h>
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD = 32 * 1024 * 1024  # glibc's largest allowed value on 64-bit: blocks above it still use mmap
_TRIM_THRESHOLD = 512 * 1024 * 1024


def tune_malloc() -> bool:
    """Raise glibc's mmap and trim thresholds; True if it was done."""
    if os.environ.get("MINIGRAD_MALLOC_TUNE", "1") == "0" or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.gnu_get_libc_version  # noqa: B018 -- only glibc has it (musl, for one, does not)
    except (OSError, AttributeError):
        return False
    return bool(libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)) and bool(
        libc.mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD))
