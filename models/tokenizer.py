"""Tokenizers: text <-> token ids. A character table, and byte-level BPE as GPT-2 trains it.

    tok = BPETokenizer.train(text, vocab_size=2048)          # 256 bytes + 2047 - 256 merges + <|endoftext|>
    ids = tok.encode("Return the value.<|endoftext|>")       # int64 ids; the special token is one id
    tok.decode(ids) == "Return the value.<|endoftext|>"      # exactly, for every text
    tok.save("tokenizer.json"); load_tokenizer("tokenizer.json")

**Byte-level BPE** (byte-pair encoding, as in GPT-2). The base vocabulary is
the 256 byte values, so any text, in any script, and any byte string at all,
can be encoded: nothing is ever "unknown". Training repeats one rule: find the
most frequent pair of adjacent tokens in the training text and make it a new
token. After a few thousand merges frequent words are single tokens and rare
ones are spelled out in pieces; the training text becomes ~3x fewer tokens
than bytes, which is ~3x more text in the same context window.

Before merging, the text is cut into chunks with GPT-2's split pattern
(``GPT2_SPLIT`` below): a word with its leading space, a run of digits, a run
of punctuation, whitespace. Merges never cross a chunk boundary, so "dog." and
"dog!" share the token " dog" rather than each growing their own. Python's
``re`` has no ``\\p{L}`` (letters) or ``\\p{N}`` (numbers), so the pattern
here spells those classes out as code-point ranges taken from ``unicodedata``
(built once, on first use); it then matches what GPT-2's pattern matches with
the ``regex`` package, up to differences between the two packages' Unicode
versions (tests/models/test_tokenizer.py compares them where ``regex`` is installed).

**Training fast.** The naive loop recounts every pair of the whole text after
each merge: quadratic. Here the text is first reduced to its distinct chunks
with their counts (a 1 MB text has ~30k distinct chunks), and the pair counts
are kept up to date incrementally: a merge touches only the chunks that
contain the pair (an index pair -> chunks finds them), subtracting their old
pairs and adding their new ones. A heap of (count, pair) finds the most
frequent pair; entries whose count has changed since they were pushed are
skipped when they surface. Ties go to the smallest pair of ids (so, among
base bytes, the smallest byte values): the result depends only on the text.

**Special tokens** (``<|endoftext|>`` by default) get the ids after the
merges. ``encode`` turns each occurrence of a special token's text into its
one id (``special=False`` encodes it as ordinary text), and training never
merges across one.

``decode`` returns text (invalid UTF-8, e.g. a sequence cut mid-character,
becomes U+FFFD); ``decode_bytes`` returns the exact bytes, and
``encode_bytes`` accepts any bytes: ``decode_bytes(encode_bytes(b)) == b`` for
every byte string.

Saved as a small JSON file (``{"type": "bpe", "merges": [[a, b], ...],
"special_tokens": {...}}``), written atomically. Loading checks every value's
type, and bounds what it allocates (the file's size, the bytes its merges
spell) before building anything. ``CharTokenizer`` (one id per
distinct character of the training text) saves as ``{"type": "char", ...}``;
``load_tokenizer`` reads either, and any other file is a clear error.
"""

from __future__ import annotations

import heapq
import json
import re
import unicodedata
from collections import Counter, defaultdict
from functools import lru_cache
from pathlib import Path

import numpy as np

from minigrad.files import atomic_write

ENDOFTEXT = "<|endoftext|>"

# GPT-2's split pattern, as written for the ``regex`` package (openai/gpt-2, encoder.py).
GPT2_SPLIT = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""

# The Unicode White_Space property (what ``regex``'s \s matches). Python's \s differs: it also
# matches U+001C..U+001F (the information separators), which are not White_Space.
_WHITE_SPACE = [(0x09, 0x0D), (0x20, 0x20), (0x85, 0x85), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A),
                (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000)]


# Bounds on what loading a file may allocate. A tokenizer file this module writes is ~12 bytes a merge, and its
# tokens spell a few bytes each; a damaged or hostile file (merges that each double a token's length) could
# otherwise make a 600-byte file ask for terabytes.
MAX_FILE_BYTES = 64 << 20
MAX_VOCAB_BYTES = 64 << 20  # the bytes of all tokens together


class TokenizerError(ValueError):
    """A text a tokenizer cannot encode, or a file that is not a tokenizer; the message says which and why."""


# --------------------------------------------------------------------------------------
# The pre-tokenizer: GPT-2's split pattern with Python's re
# --------------------------------------------------------------------------------------


def _char_class(ranges) -> str:
    return "".join(f"\\U{lo:08x}" if lo == hi else f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in ranges)


def _category_ranges(prefix: str) -> list[tuple[int, int]]:
    """The code points whose general category starts with ``prefix`` ("L": letters, "N": numbers), as ranges."""
    ranges, start = [], None
    for cp in range(0x110000 + 1):
        inside = cp < 0x110000 and unicodedata.category(chr(cp)).startswith(prefix)
        if inside and start is None:
            start = cp
        elif not inside and start is not None:
            ranges.append((start, cp - 1))
            start = None
    return ranges


@lru_cache(maxsize=1)
def split_pattern() -> re.Pattern:
    """GPT2_SPLIT for Python's ``re``: \\p{L}, \\p{N} and \\s written out as explicit character classes."""
    letters, numbers = _char_class(_category_ranges("L")), _char_class(_category_ranges("N"))
    space = _char_class(_WHITE_SPACE)
    pattern = (rf"'s|'t|'re|'ve|'m|'ll|'d| ?[{letters}]+| ?[{numbers}]+| ?[^{space}{letters}{numbers}]+"
               rf"|[{space}]+(?![^{space}])|[{space}]+")
    return re.compile(pattern)


def pretokenize(text: str) -> list[str]:
    """``text`` cut into GPT-2's chunks: ``"Hello world!!"`` -> ``["Hello", " world", "!!"]``. They join back to it."""
    return split_pattern().findall(text)


# --------------------------------------------------------------------------------------
# Byte-level BPE
# --------------------------------------------------------------------------------------


def merge_pair(ids: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """``ids`` with every occurrence of ``pair``, left to right and not overlapping, replaced by ``new_id``."""
    out, i, n = [], 0, len(ids)
    a, b = pair
    while i < n:
        if i + 1 < n and ids[i] == a and ids[i + 1] == b:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


class BPETokenizer:
    """Byte-level BPE: ids 0-255 are the bytes, 256 + i is merge i, then the special tokens.

    Build one with ``BPETokenizer.train(text, vocab_size)`` or ``load_tokenizer(path)``.
    """

    def __init__(self, merges, special_tokens=(ENDOFTEXT,)):
        self.merges = [(int(a), int(b)) for a, b in merges]
        lengths = [1] * 256  # each token's length in bytes, counted before any token is spelled out
        for i, (a, b) in enumerate(self.merges):
            if not (0 <= a < 256 + i and 0 <= b < 256 + i):
                raise TokenizerError(f"BPETokenizer: merge {i} is {(a, b)}; each merge joins two earlier tokens "
                                     f"(ids 0 to {256 + i - 1})")
            lengths.append(lengths[a] + lengths[b])
        if sum(lengths) > MAX_VOCAB_BYTES:
            raise TokenizerError(f"BPETokenizer: the merges spell tokens of {sum(lengths):,} bytes in all (the "
                                 f"longest {max(lengths):,}), more than the {MAX_VOCAB_BYTES:,} a tokenizer may hold")
        self.ranks = {pair: 256 + i for i, pair in enumerate(self.merges)}  # pair -> the id it merges into
        self.vocab = [bytes([i]) for i in range(256)]  # id -> its bytes
        for a, b in self.merges:
            self.vocab.append(self.vocab[a] + self.vocab[b])
        specials = list(special_tokens)
        if len(set(specials)) != len(specials) or not all(isinstance(s, str) and s for s in specials):
            raise TokenizerError(f"BPETokenizer: special tokens must be distinct non-empty strings, got {specials}")
        self.special_tokens = {s: len(self.vocab) + k for k, s in enumerate(specials)}
        self._special_text = {i: s for s, i in self.special_tokens.items()}
        # Longest first, so that one special token that is a prefix of another never wins over it.
        by_length = sorted(specials, key=len, reverse=True)
        self._special_split = re.compile("(" + "|".join(map(re.escape, by_length)) + ")") if specials else None
        self._cache: dict[bytes, list[int]] = {}

    @property
    def vocab_size(self) -> int:
        return len(self.vocab) + len(self.special_tokens)

    # --- training -----------------------------------------------------------------------------

    @classmethod
    def train(cls, text: str, vocab_size: int, special_tokens=(ENDOFTEXT,)) -> BPETokenizer:
        """Learn ``vocab_size - 256 - len(special_tokens)`` merges from ``text`` (see the module docstring).

        Stops early, with a smaller vocabulary, if the text runs out of pairs (every chunk one token).
        """
        special_tokens = tuple(special_tokens)
        n_merges = vocab_size - 256 - len(special_tokens) if isinstance(vocab_size, int) else -1
        if n_merges < 0:
            raise TokenizerError(f"BPETokenizer.train: vocab_size must be an int of at least 256 bytes + "
                                 f"{len(special_tokens)} special token(s) = {256 + len(special_tokens)}, "
                                 f"got {vocab_size!r}")
        if not isinstance(text, str):
            raise TokenizerError(f"BPETokenizer.train: text must be a str, got {type(text).__name__}")
        pieces = re.split("|".join(map(re.escape, special_tokens)), text) if special_tokens else [text]
        chunk_counts = Counter()
        for piece in pieces:  # special tokens are cut out: no merge crosses one
            chunk_counts.update(pretokenize(piece))
        words = [list(chunk.encode("utf-8", "surrogatepass")) for chunk in chunk_counts]  # each chunk's ids
        counts = list(chunk_counts.values())  # how often each chunk occurs

        pair_counts: dict[tuple[int, int], int] = defaultdict(int)
        where: dict[tuple[int, int], set[int]] = defaultdict(set)  # pair -> the chunks that (may) hold it
        for w, (ids, n) in enumerate(zip(words, counts)):
            for pair in zip(ids, ids[1:]):
                pair_counts[pair] += n
                where[pair].add(w)
        heap = [(-n, pair) for pair, n in pair_counts.items()]  # a max-heap by count, then the smallest pair
        heapq.heapify(heap)

        merges = []
        while len(merges) < n_merges and heap:
            minus_n, pair = heapq.heappop(heap)
            if pair_counts.get(pair, 0) != -minus_n:
                continue  # a stale entry: this pair's count changed after it was pushed
            new_id = 256 + len(merges)
            merges.append(pair)
            changed = set()
            for w in where.pop(pair):
                ids = words[w]
                merged = merge_pair(ids, pair, new_id)
                if len(merged) == len(ids):
                    continue  # the index is loose: this chunk no longer holds the pair
                n = counts[w]
                for old in zip(ids, ids[1:]):
                    pair_counts[old] -= n
                    changed.add(old)
                for new in zip(merged, merged[1:]):
                    pair_counts[new] += n
                    where[new].add(w)
                    changed.add(new)
                words[w] = merged
            for p in changed:
                if pair_counts[p] > 0:
                    heapq.heappush(heap, (-pair_counts[p], p))
                else:
                    del pair_counts[p]
        return cls(merges, special_tokens)

    # --- encoding and decoding ----------------------------------------------------------------------

    def _encode_chunk(self, chunk: bytes) -> list[int]:
        """One pre-tokenized chunk: apply the merges in the order they were learned (lowest rank first)."""
        cached = self._cache.get(chunk)
        if cached is not None:
            return cached
        ids = list(chunk)
        while len(ids) > 1:
            ranked = [(self.ranks.get(pair, 1 << 62), pair) for pair in zip(ids, ids[1:])]
            rank, pair = min(ranked)
            if rank == 1 << 62:
                break  # no adjacent pair was ever merged
            ids = merge_pair(ids, pair, rank)
        if len(self._cache) > 200_000:
            self._cache.clear()  # bounded memory on huge, varied texts
        self._cache[chunk] = ids
        return ids

    def _encode_text(self, text: str, special: bool, errors: str) -> np.ndarray:
        pieces = self._special_split.split(text) if special and self._special_split else [text]
        out: list[int] = []
        for k, piece in enumerate(pieces):
            if k % 2:  # re.split with a group: the odd pieces are the special tokens found
                out.append(self.special_tokens[piece])
                continue
            for chunk in pretokenize(piece):
                out += self._encode_chunk(chunk.encode("utf-8", errors))
        return np.asarray(out, dtype=np.int64)

    def encode(self, text: str, special: bool = True) -> np.ndarray:
        """The ids (int64) of ``text``. ``special``: a special token's text becomes its one id (else plain text)."""
        if not isinstance(text, str):
            raise TokenizerError(f"BPETokenizer.encode: expected a str, got {type(text).__name__} "
                                 f"(for bytes use encode_bytes)")
        try:
            return self._encode_text(text, special, "strict")
        except UnicodeEncodeError as err:
            raise TokenizerError(f"BPETokenizer.encode: the text holds a lone surrogate {text[err.start]!r} at "
                                 f"index {err.start}, which is not UTF-8 text") from None

    def encode_bytes(self, data: bytes, special: bool = True) -> np.ndarray:
        """The ids of any byte string, valid UTF-8 or not: ``decode_bytes(encode_bytes(b)) == b``."""
        # surrogateescape: each byte that is not valid UTF-8 becomes one lone surrogate (U+DC80..U+DCFF), which
        # the split pattern treats as punctuation, and turns back into that exact byte when the chunk is encoded.
        return self._encode_text(bytes(data).decode("utf-8", "surrogateescape"), special, "surrogateescape")

    def decode_bytes(self, ids) -> bytes:
        """The exact bytes of ``ids`` (a special token gives its text's UTF-8 bytes)."""
        parts = []
        for i in np.asarray(ids, dtype=np.int64).reshape(-1).tolist():
            if 0 <= i < len(self.vocab):
                parts.append(self.vocab[i])
            elif i in self._special_text:
                parts.append(self._special_text[i].encode("utf-8"))
            else:
                raise TokenizerError(f"BPETokenizer.decode: id {i} is outside the vocabulary (0 to "
                                     f"{self.vocab_size - 1})")
        return b"".join(parts)

    def decode(self, ids) -> str:
        """The text of ``ids``; bytes that are not valid UTF-8 (a character cut in two) become U+FFFD."""
        return self.decode_bytes(ids).decode("utf-8", errors="replace")

    def can_encode(self, text: str) -> bool:
        return isinstance(text, str)  # byte-level: every text has an encoding

    def token_text(self, i: int) -> str:
        """How token ``i`` reads (its bytes as text, invalid UTF-8 shown as U+FFFD)."""
        return self._special_text.get(i) or self.vocab[i].decode("utf-8", errors="replace")

    # --- files ----------------------------------------------------------------------------------

    def to_json(self) -> str:
        merges = ",\n  ".join(f"[{a}, {b}]" for a, b in self.merges)  # one merge a line: a small, diffable file
        return (f'{{"type": "bpe", "version": 1, "pretokenizer": "gpt2",\n'
                f' "special_tokens": {json.dumps(self.special_tokens)},\n "merges": [\n  {merges}]}}\n')

    def save(self, path) -> None:
        atomic_write(Path(path), self.to_json())

    @classmethod
    def from_dict(cls, data: dict, where: str = "BPETokenizer") -> BPETokenizer:
        """A tokenizer from the parsed JSON of ``to_json``; TokenizerError naming what is wrong otherwise."""
        if data.get("type") != "bpe" or data.get("version") != 1 or data.get("pretokenizer") != "gpt2":
            raise TokenizerError(f"{where}: not a minigrad BPE tokenizer file (type {data.get('type')!r}, "
                                 f"version {data.get('version')!r}, pretokenizer {data.get('pretokenizer')!r})")
        merges, specials = data.get("merges"), data.get("special_tokens")
        if not isinstance(merges, list) or not isinstance(specials, dict):
            raise TokenizerError(f"{where}: a BPE file needs a list 'merges' and a dict 'special_tokens'")
        for i, pair in enumerate(merges):
            if not (isinstance(pair, list) and len(pair) == 2 and all(type(x) is int and 0 <= x < 256 + i
                                                                       for x in pair)):
                raise TokenizerError(f"{where}: merge {i} is {pair!r}; each merge must be two ids of earlier "
                                     f"tokens (0 to {256 + i - 1})")
        if len({tuple(p) for p in merges}) != len(merges):
            raise TokenizerError(f"{where}: the same pair is merged twice")
        expected = list(range(256 + len(merges), 256 + len(merges) + len(specials)))
        ids_are_ints = all(type(i) is int for i in specials.values())
        if not ids_are_ints or sorted(specials.values()) != expected or not all(isinstance(s, str) and s
                                                                               for s in specials):
            raise TokenizerError(f"{where}: special tokens must be non-empty strings with the ids after the "
                                 f"merges ({expected}), got {specials}")
        try:
            return cls(merges, sorted(specials, key=specials.get))
        except TokenizerError as err:
            raise TokenizerError(f"{where}: {err}") from None

    @classmethod
    def load(cls, path) -> BPETokenizer:
        return load_tokenizer(path, expect=cls)

    def __repr__(self) -> str:
        return f"BPETokenizer(vocab_size={self.vocab_size}, merges={len(self.merges)}, " \
               f"special_tokens={list(self.special_tokens)})"


# --------------------------------------------------------------------------------------
# Characters
# --------------------------------------------------------------------------------------


class CharTokenizer:
    """Each distinct character of the training text gets an id, in sorted order of the characters."""

    def __init__(self, chars):
        self.chars = list(chars)
        if len(set(self.chars)) != len(self.chars) or not self.chars or \
                not all(isinstance(ch, str) and len(ch) == 1 for ch in self.chars):
            raise TokenizerError("CharTokenizer: the characters must be distinct single characters, and not none")
        self.ids = {ch: i for i, ch in enumerate(self.chars)}

    @classmethod
    def from_text(cls, text: str) -> CharTokenizer:
        return cls(sorted(set(text)))

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def can_encode(self, text: str) -> bool:
        return set(text) <= self.ids.keys()

    def encode(self, text: str) -> np.ndarray:
        """The ids of ``text`` (int64); a character the tokenizer has never seen is an error naming it."""
        unknown = sorted(set(text) - self.ids.keys())
        if unknown:
            raise TokenizerError(f"the text has characters this model never saw in training: "
                                 f"{''.join(unknown)!r}; the vocabulary is {''.join(self.chars)!r}")
        return np.fromiter((self.ids[ch] for ch in text), dtype=np.int64, count=len(text))

    def decode(self, ids) -> str:
        return "".join(self.chars[i] for i in np.asarray(ids).reshape(-1))

    def to_json(self) -> str:
        return json.dumps({"type": "char", "chars": self.chars}, indent=1)

    def save(self, path) -> None:
        atomic_write(Path(path), self.to_json())

    @classmethod
    def load(cls, path) -> CharTokenizer:
        return load_tokenizer(path, expect=cls)

    def __repr__(self) -> str:
        return f"CharTokenizer(vocab_size={self.vocab_size})"


# --------------------------------------------------------------------------------------
# Either, from a file
# --------------------------------------------------------------------------------------


def load_tokenizer(path, expect: type | None = None) -> CharTokenizer | BPETokenizer:
    """The tokenizer saved in ``path`` (by ``CharTokenizer.save`` or ``BPETokenizer.save``).

    Anything else (not JSON, another program's tokenizer file, a damaged file) is a TokenizerError saying so;
    so is a tokenizer of another kind than ``expect`` (a class), when given.
    """
    tok = _read_tokenizer(path)
    if expect is not None and not isinstance(tok, expect):
        wanted = "a BPE tokenizer" if expect is BPETokenizer else "a character tokenizer"
        raise TokenizerError(f"{path}: holds a {type(tok).__name__}, not {wanted}")
    return tok


def _read_tokenizer(path) -> CharTokenizer | BPETokenizer:
    try:
        size = Path(path).stat().st_size
        if size > MAX_FILE_BYTES:
            raise TokenizerError(f"{path}: {size:,} bytes, larger than any tokenizer file ({MAX_FILE_BYTES:,} at "
                                 f"most)")
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as err:
        raise TokenizerError(f"{path}: cannot be read ({err.strerror})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise TokenizerError(f"{path}: not a tokenizer file (not JSON text: {err})") from None
    except RecursionError:
        raise TokenizerError(f"{path}: not a tokenizer file (its JSON is nested deeper than the parser goes)") \
            from None
    if not isinstance(data, dict):
        raise TokenizerError(f"{path}: not a tokenizer file (the JSON is a {type(data).__name__}, not an object)")
    kind = data.get("type")
    if kind == "char":
        if not isinstance(data.get("chars"), list):
            raise TokenizerError(f"{path}: a character tokenizer file needs a list 'chars'")
        try:
            return CharTokenizer(data["chars"])
        except TokenizerError as err:
            raise TokenizerError(f"{path}: {err}") from None
    if kind == "bpe":
        return BPETokenizer.from_dict(data, where=str(path))
    if "model" in data and "added_tokens" in data:
        raise TokenizerError(f"{path}: a Hugging Face tokenizers file; minigrad reads only the files its own "
                             f"CharTokenizer.save and BPETokenizer.save write")
    raise TokenizerError(f"{path}: not a minigrad tokenizer file (its 'type' is {kind!r}; expected 'char' or "
                         f"'bpe')")
