"""Writing files so that nothing is ever half-written: the one atomic writer every part of minigrad uses.

The bytes go to a temporary file beside the target, are flushed to disk, and the
temporary file is then renamed over the target. A rename within one folder is
atomic on POSIX: readers see the old file or the new one, never a mix, and a
crash (or Ctrl-C) mid-write leaves the old file and no temporary file behind.
Checkpoints, graph pictures, the demos' JSON, text and figures all go through it.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from typing import BinaryIO


def atomic_write(path, data: bytes | str | Callable[[BinaryIO], None], *, make_dirs: bool = False) -> str:
    """Write ``data`` to ``path`` atomically; returns the path written.

    ``data``: bytes, text (written as UTF-8), or a function that writes to a
    binary file object (``lambda f: fig.savefig(f, format="png")``).
    ``make_dirs``: create the missing folders; otherwise a missing folder is an error.
    """
    path = os.fspath(path)
    directory, name = os.path.split(os.path.abspath(path))
    if make_dirs:
        os.makedirs(directory, exist_ok=True)
    elif not os.path.isdir(directory):
        raise FileNotFoundError(f"cannot write {path}: the directory {directory} does not exist")
    tmp = os.path.join(directory, f".{name}.{secrets.token_hex(4)}.tmp")
    # os.open rather than tempfile.mkstemp: mode 0o666 lets the umask decide the final file's permissions.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            if callable(data):
                data(f)
            else:
                f.write(data.encode("utf-8") if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())  # the bytes are on disk before the rename makes them the file
        os.replace(tmp, path)
    except BaseException:  # KeyboardInterrupt included: never leave the temporary file behind
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    if hasattr(os, "O_DIRECTORY"):  # make the rename itself durable (POSIX; a no-op elsewhere)
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    return path
