"""The character-level language model's data: a corpus, its train/validation split, and random batches.

The default corpus is text every Python installation already has: the
docstrings of the standard library's own ``.py`` files. Nothing third-party is
shipped with the project, yet the model learns real English (plus some code
and reStructuredText). The corpus is built the same way every time:

* walk the folder ``sysconfig.get_paths()['stdlib']`` in sorted order, skipping
  test folders (``test/``, ``tests/``, ``idle_test/``...) and installed
  packages (``site-packages/``);
* parse each file with ``ast`` (no import, no code runs) and take the module's,
  then each class's and function's docstring, in source order;
* drop exact duplicates (``"Return self==value."`` is written dozens of times),
  fold to ASCII (``unicodedata`` NFKD, then drop what is not ASCII), and stop
  once the text reaches ``max_bytes`` (1 MB by default).

So for one interpreter version the corpus is the same bytes on every machine.
It is cached in ``$XDG_CACHE_HOME/minigrad`` (``~/.cache/minigrad``), outside
the repository; the SHA-256 recorded with each run tells which text it saw.

The tokenizers live in ``models/tokenizer.py``: ``CharTokenizer`` maps each
distinct character to an integer id (sorted, so the ids do not depend on the
order characters first appear); ``BPETokenizer`` is byte-level BPE. Either is
saved with the run as JSON, because a model's output layer only means
something together with the exact table it was trained with.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import os
import platform
import sys
import sysconfig
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from minigrad.files import atomic_write

DEFAULT_MAX_BYTES = 1_000_000
SKIPPED_FOLDERS = frozenset({"test", "tests", "idle_test", "site-packages", "dist-packages", "__pycache__"})


class DataError(ValueError):
    """Training text that cannot be used (missing, empty, binary, too short); the message says why."""


# --------------------------------------------------------------------------------------
# The default corpus: the standard library's docstrings
# --------------------------------------------------------------------------------------


def stdlib_files(root: Path) -> list[Path]:
    """Every ``.py`` file under ``root`` in sorted order, outside test folders and installed packages."""
    files = []
    for folder, subfolders, names in os.walk(root):
        subfolders[:] = sorted(d for d in subfolders if d not in SKIPPED_FOLDERS)  # os.walk follows this order
        files += [Path(folder) / name for name in sorted(names) if name.endswith(".py")]
    return files


def docstrings(source: str) -> list[str]:
    """The module docstring, then every class's and function's docstring in source order."""
    tree = ast.parse(source)
    found = []

    def visit(node):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=True)  # clean: the indentation is removed
            if doc:
                found.append(doc)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def fold_to_ascii(text: str) -> str:
    """``'café — naïve'`` -> ``'cafe  naive'``: accents come off, what has no ASCII form goes.

    Tabs become four spaces and other control characters are dropped, so the
    vocabulary is printable ASCII and newlines.
    """
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = text.replace("\t", "    ")
    return "".join(ch for ch in text if ch == "\n" or " " <= ch <= "~")


def build_stdlib_corpus(max_bytes: int = DEFAULT_MAX_BYTES, root: Path | None = None) -> str:
    """The docstring corpus (see the module docstring), at most ``max_bytes`` long."""
    root = Path(root or sysconfig.get_paths()["stdlib"])
    seen: set[str] = set()
    parts: list[str] = []
    size = 0
    for path in stdlib_files(root):
        try:
            found = docstrings(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError, OSError):
            continue  # a few files are deliberately broken (bad syntax, odd encodings): not text we want
        for doc in found:
            doc = fold_to_ascii(doc).strip()
            if len(doc) < 20 or doc in seen:  # one-liners like "Return x." carry almost nothing
                continue
            seen.add(doc)
            parts.append(doc)
            size += len(doc) + 2  # the blank line that separates docstrings
            if size >= max_bytes:
                return "\n\n".join(parts)[:max_bytes]
    return "\n\n".join(parts)


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/minigrad``, or ``~/.cache/minigrad``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "minigrad"


@dataclass
class Corpus:
    """A training text and where it came from (recorded in the run's config.json)."""

    text: str
    source: str  # "stdlib docstrings (Python 3.11.7)" or the file's path
    sha256: str
    cached_at: str | None = None  # the cache file, for the default corpus

    @property
    def description(self) -> str:
        where = f", cached at {self.cached_at}" if self.cached_at else ""
        return f"{self.source}: {len(self.text):,} characters, sha256 {self.sha256[:12]}{where}"


def sha256_of(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def stdlib_corpus(max_bytes: int = DEFAULT_MAX_BYTES) -> Corpus:
    """The docstring corpus, read from the cache or built (a few seconds) and cached.

    The cache file's name holds the interpreter's version and the size cap, and
    a JSON sidecar holds its SHA-256: a damaged or edited cache file is rebuilt.
    """
    version = platform.python_version()
    source = f"stdlib docstrings ({sys.implementation.name} {version})"
    path = cache_dir() / f"stdlib-docstrings-{sys.implementation.name}-{version}-{max_bytes}.txt"
    sidecar = path.with_suffix(".json")
    try:
        if path.stat().st_size <= max_bytes and sidecar.stat().st_size <= 4096:  # larger: not this cache's files
            text = path.read_text(encoding="ascii")
            if json.loads(sidecar.read_text())["sha256"] == sha256_of(text):
                return Corpus(text, source, sha256_of(text), str(path))
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        pass  # no cache yet, or a damaged one
    text = build_stdlib_corpus(max_bytes)
    digest = sha256_of(text)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, text)
        atomic_write(sidecar, json.dumps({"sha256": digest, "characters": len(text), "source": source}))
    except OSError:
        return Corpus(text, source, digest, None)  # a read-only home: fine, just not cached
    return Corpus(text, source, digest, str(path))


# --------------------------------------------------------------------------------------
# Any text file instead
# --------------------------------------------------------------------------------------


def text_file_corpus(path, min_chars: int) -> Corpus:
    """The UTF-8 text in ``path``; ``DataError`` (one clear sentence) if it cannot be trained on."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"--text {path}: no such file")
    if path.is_dir():
        raise DataError(f"--text {path}: is a folder, not a text file")
    if not (path.is_file() or path.is_fifo()):  # a device (/dev/zero, /dev/urandom) would be read for ever
        raise DataError(f"--text {path}: is a device or socket, not a text file")
    try:
        data = path.read_bytes()
    except OSError as err:
        raise DataError(f"--text {path}: cannot be read ({err.strerror})") from None
    if not data.strip():
        raise DataError(f"--text {path}: the file is empty")
    if b"\x00" in data[:65536]:
        raise DataError(f"--text {path}: looks like a binary file (it contains NUL bytes); give a UTF-8 text file")
    try:
        text = data.decode("utf-8-sig")  # -sig: a byte-order mark is not part of the text
    except UnicodeDecodeError as err:
        raise DataError(f"--text {path}: not UTF-8 text (byte {err.start} is {data[err.start]:#04x}); "
                        f"give a UTF-8 text file") from None
    text = text.replace("\r\n", "\n")
    if len(text) < min_chars:
        raise DataError(f"--text {path}: only {len(text):,} characters; need at least {min_chars:,} "
                        f"(the validation split must hold more than one context window)")
    return Corpus(text, str(path), sha256_of(text))


# --------------------------------------------------------------------------------------
# Splits, batches and the baseline to beat
# --------------------------------------------------------------------------------------


def split_text(text: str, val_fraction: float) -> tuple[str, str]:
    """The first (1 - val_fraction) of the characters to train on, the rest to validate on: split before
    tokenizing, so every tokenizer validates on the same text (and BPE learns its merges from training text only)."""
    n_val = int(round(len(text) * val_fraction))
    return text[:len(text) - n_val], text[len(text) - n_val:]


def train_val_split(ids: np.ndarray, val_fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """The first (1 - val_fraction) of the text to train on, the rest to validate on (no shuffling:
    neighbouring characters are not independent, so a random split would leak the validation text)."""
    n_val = int(round(len(ids) * val_fraction))
    return ids[:len(ids) - n_val], ids[len(ids) - n_val:]


def min_chars_needed(block_size: int, val_fraction: float) -> int:
    """The shortest text whose validation split still holds a window of block_size + 1 characters."""
    return math.ceil((block_size + 2) / val_fraction)


def get_batch(data: np.ndarray, batch_size: int, block_size: int,
              rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``batch_size`` random windows: inputs x (B, T) and targets y (B, T), y being x shifted by one."""
    starts = rng.integers(0, len(data) - block_size, size=batch_size)
    offsets = np.arange(block_size)
    x = data[starts[:, None] + offsets]  # (B, T)
    y = data[starts[:, None] + offsets + 1]  # (B, T): the next character at every position
    return x, y


def unigram_bits_per_char(train: np.ndarray, val: np.ndarray, vocab_size: int) -> float:
    """Cross-entropy, in bits per character, of the validation text under the training text's
    character frequencies (add-one smoothed): what a model that ignores all context achieves."""
    counts = np.bincount(train, minlength=vocab_size) + 1.0
    log2_p = np.log2(counts / counts.sum())
    return float(-log2_p[val].mean())
