"""models.tokenizer: byte-level BPE (training, encode/decode round trips, special tokens, files) and the
character tokenizer; compared with the ``regex`` package's GPT-2 pattern and Hugging Face ``tokenizers``'
byte-level BPE trainer where those are installed."""

import json
import re
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models.tokenizer import (
    ENDOFTEXT,
    GPT2_SPLIT,
    BPETokenizer,
    CharTokenizer,
    TokenizerError,
    load_tokenizer,
    merge_pair,
    pretokenize,
)

TEXT = ("Return the value of the attribute. Return True if the object is callable.\n"
        "The naïve café serves crème brûlée; 日本語のテキスト, ελληνικά, русский текст.\n"
        "Numbers: 123, 4567, 3.14159 and ½ or Ⅻ. Tabs\tand  double  spaces, emoji 🙂🙂.\n") * 20


@pytest.fixture(scope="module")
def tok():
    return BPETokenizer.train(TEXT, vocab_size=256 + 120 + 1)


def naive_train(text: str, n_merges: int) -> list[tuple[int, int]]:
    """The textbook loop: recount every adjacent pair of the whole (chunked) text after every merge."""
    words = [list(chunk.encode("utf-8")) for chunk in pretokenize(text)]
    merges = []
    for _ in range(n_merges):
        counts = Counter(pair for ids in words for pair in zip(ids, ids[1:]))
        if not counts:
            break
        best = max(counts.values())
        pair = min(p for p, n in counts.items() if n == best)  # ties: the smallest pair of ids
        merges.append(pair)
        words = [merge_pair(ids, pair, 255 + len(merges)) for ids in words]
    return merges


# --------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------


def test_incremental_counts_learn_exactly_the_merges_of_the_naive_loop():
    text = TEXT[:2000]
    assert BPETokenizer.train(text, 256 + 150, special_tokens=()).merges == naive_train(text, 150)


def test_training_is_deterministic_and_the_vocabulary_is_bytes_merges_then_specials(tok):
    again = BPETokenizer.train(TEXT, vocab_size=tok.vocab_size)
    assert again.merges == tok.merges and again.to_json() == tok.to_json()
    assert tok.vocab_size == 377 and len(tok.merges) == 120 and tok.special_tokens == {ENDOFTEXT: 376}
    assert tok.vocab[:256] == [bytes([i]) for i in range(256)]
    assert all(tok.vocab[256 + i] == tok.vocab[a] + tok.vocab[b] for i, (a, b) in enumerate(tok.merges))
    assert tok.token_text(tok.ranks[(ord(" "), ord("t"))]) == " t"


def test_training_compresses_and_stops_when_the_text_runs_out_of_pairs(tok):
    assert len(tok.encode(TEXT)) < len(TEXT.encode("utf-8")) / 2
    small = BPETokenizer.train("ab ab ab", vocab_size=1000)  # chunks "ab", " ab", " ab": 2 merges, then no pairs
    assert small.merges == [(ord("a"), ord("b")), (ord(" "), 256)]  # "ab" (3 times), then " " + "ab" (twice)
    assert small.vocab_size == 256 + 2 + 1 and list(small.encode("ab ab")) == [256, 257]


def test_merges_never_cross_chunks_or_special_tokens():
    text = f"ab{ENDOFTEXT}ab{ENDOFTEXT}" * 50
    tok = BPETokenizer.train(text, vocab_size=300)
    assert all(b"<" not in tok.vocab[i] or tok.vocab[i].startswith(b"<") for i in range(256, len(tok.vocab)))
    assert not any(b"b<" in v or b"|a" in v for v in tok.vocab)
    assert list(tok.encode(text[:len(ENDOFTEXT) + 4])) == [tok.encode("ab")[0], tok.special_tokens[ENDOFTEXT],
                                                          tok.encode("ab")[0]]


@pytest.mark.parametrize("vocab_size, special, message", [
    (200, (ENDOFTEXT,), "at least 256 bytes \\+ 1 special token\\(s\\) = 257, got 200"),
    (300.0, (ENDOFTEXT,), "must be an int"),
    (300, ("<a>", "<a>"), "distinct non-empty strings"),
])
def test_bad_training_arguments(vocab_size, special, message):
    with pytest.raises(TokenizerError, match=message):
        BPETokenizer.train("some text", vocab_size, special_tokens=special)


# --------------------------------------------------------------------------------------
# Round trips
# --------------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_every_text_round_trips(tok, text):
    ids = tok.encode(text)
    assert ids.dtype == np.int64 and (ids.size == 0 or (0 <= ids.min() and ids.max() < tok.vocab_size))
    assert tok.decode(ids) == text


@settings(max_examples=300, deadline=None)
@given(st.binary() | st.lists(st.sampled_from([b"\xff", b"\xc3", b"\xa9", b"\x80", b"<|endoftext|>", b"the ",
                                               b"\xe6\x97\xa5", b"\x00", b"\n"])).map(b"".join))
def test_every_byte_string_round_trips(tok, data):
    assert tok.decode_bytes(tok.encode_bytes(data)) == data


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_chunks_join_back_to_the_text(text):
    assert "".join(pretokenize(text)) == text


def test_special_tokens_are_one_id_on_the_way_in_and_out(tok):
    eot = tok.special_tokens[ENDOFTEXT]
    ids = tok.encode(f"Return the value.{ENDOFTEXT}The")
    assert list(ids).count(eot) == 1 and tok.decode(ids) == f"Return the value.{ENDOFTEXT}The"
    plain = tok.encode(ENDOFTEXT, special=False)  # as ordinary text: several tokens, none of them the special one
    assert len(plain) > 1 and eot not in plain and tok.decode(plain) == ENDOFTEXT
    assert tok.decode([eot, eot]) == ENDOFTEXT * 2


def test_a_special_token_that_extends_another_wins():
    tok = BPETokenizer.train("x y z", vocab_size=300, special_tokens=("<|a|>", "<|a|>>"))
    ids = tok.encode("x<|a|>>y<|a|>")
    assert list(ids[1:2]) == [tok.special_tokens["<|a|>>"]] and ids[-1] == tok.special_tokens["<|a|>"]
    assert tok.decode(ids) == "x<|a|>>y<|a|>"


def test_decode_of_a_cut_character_and_bad_input(tok):
    euro = tok.encode_bytes("€".encode())
    assert tok.decode(tok.encode("€")[:0]) == ""
    assert tok.decode_bytes(euro) == b"\xe2\x82\xac"
    assert tok.decode([0xE2]) == "\ufffd"  # half a character: the replacement character, never an exception
    with pytest.raises(TokenizerError, match="id 9999 is outside the vocabulary"):
        tok.decode([9999])
    with pytest.raises(TokenizerError, match="lone surrogate"):
        tok.encode("a\ud800b")
    with pytest.raises(TokenizerError, match="for bytes use encode_bytes"):
        tok.encode(b"bytes")


# --------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------


def test_save_load_gives_the_same_tokenizer(tok, tmp_path):
    path = tmp_path / "tokenizer.json"
    tok.save(path)
    again = load_tokenizer(path)
    assert isinstance(again, BPETokenizer) and again.merges == tok.merges
    assert again.special_tokens == tok.special_tokens and list(again.encode(TEXT)) == list(tok.encode(TEXT))
    assert json.loads(path.read_text())["type"] == "bpe"
    assert [p.name for p in tmp_path.iterdir()] == ["tokenizer.json"]  # atomic: no temporary file left


def hf_file():
    return {"version": "1.0", "added_tokens": [], "model": {"type": "BPE", "vocab": {}, "merges": []}}


@pytest.mark.parametrize("content, message", [
    (b"{not json", "not JSON text"),
    (b"\xff\xfe\x00", "not JSON text"),
    (b"[1, 2]", "the JSON is a list"),
    (json.dumps(hf_file()).encode(), "a Hugging Face tokenizers file"),
    (b'{"type": "wordpiece"}', "its 'type' is 'wordpiece'"),
    (b'{"type": "bpe", "version": 2, "pretokenizer": "gpt2", "merges": [], "special_tokens": {}}',
     "not a minigrad BPE tokenizer file"),
    (b'{"type": "bpe", "version": 1, "pretokenizer": "gpt2", "merges": [[1, 2], [300, 1]], "special_tokens": {}}',
     "merge 1 is \\[300, 1\\]"),
    (b'{"type": "bpe", "version": 1, "pretokenizer": "gpt2", "merges": [[1, 2], [1, 2]], "special_tokens": {}}',
     "the same pair is merged twice"),
    (b'{"type": "bpe", "version": 1, "pretokenizer": "gpt2", "merges": [[1, 2]], "special_tokens": {"<e>": 5}}',
     "the ids after the merges \\(\\[257\\]\\)"),
    (b'{"type": "char", "chars": ["a", "a"]}', "distinct single characters"),
])
def test_bad_or_foreign_files_are_one_clear_error(tmp_path, content, message):
    path = tmp_path / "tokenizer.json"
    path.write_bytes(content)
    with pytest.raises(TokenizerError, match=message):
        load_tokenizer(path)


def test_merges_that_double_a_token_are_refused_before_anything_is_spelled_out(tmp_path):
    """40 merges of a token with itself: a 585-byte file whose last token would be 2^40 bytes long."""
    merges = [[97, 97]] + [[256 + i, 256 + i] for i in range(39)]
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps({"type": "bpe", "version": 1, "pretokenizer": "gpt2",
                                "special_tokens": {ENDOFTEXT: 296}, "merges": merges}))
    assert path.stat().st_size == 585
    with pytest.raises(TokenizerError, match=r"spell tokens of 2,199,023,255,806 bytes in all"):
        load_tokenizer(path)
    with pytest.raises(TokenizerError, match="more than the 67,108,864 a tokenizer may hold"):
        BPETokenizer(merges)  # the constructor holds the bound, whoever builds one


def test_special_ids_of_mixed_types_are_a_tokenizer_error(tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps({"type": "bpe", "version": 1, "pretokenizer": "gpt2", "merges": [],
                                "special_tokens": {"<a>": 256, "<b>": "257"}}))
    with pytest.raises(TokenizerError, match="special tokens must be non-empty strings with the ids after"):
        load_tokenizer(path)


def test_deeply_nested_json_is_a_tokenizer_error(tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_text('{"type": "bpe", "merges": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(TokenizerError, match="nested deeper than the parser goes"):
        load_tokenizer(path)


def test_a_file_larger_than_any_tokenizer_is_refused_unread(tmp_path, monkeypatch):
    import models.tokenizer as tokenizer_module

    path = tmp_path / "tokenizer.json"
    path.write_text('{"type": "char", "chars": ["a"]}')
    monkeypatch.setattr(tokenizer_module, "MAX_FILE_BYTES", 10)
    with pytest.raises(TokenizerError, match="larger than any tokenizer file"):
        load_tokenizer(path)


def test_truncated_file_and_the_wrong_kind(tok, tmp_path):
    path = tmp_path / "tokenizer.json"
    tok.save(path)
    path.write_text(path.read_text()[:-40])
    with pytest.raises(TokenizerError, match="not JSON"):
        BPETokenizer.load(path)
    CharTokenizer.from_text("abc").save(path)
    with pytest.raises(TokenizerError, match="holds a CharTokenizer, not a BPE tokenizer"):
        BPETokenizer.load(path)
    with pytest.raises(TokenizerError, match="cannot be read"):
        load_tokenizer(tmp_path / "missing.json")


def test_char_tokenizer_round_trip_and_unknown_characters(tmp_path):
    tok = CharTokenizer.from_text("hello, world\n")
    assert tok.decode(tok.encode("hello")) == "hello" and tok.can_encode("hole") and not tok.can_encode("x")
    tok.save(tmp_path / "t.json")
    assert load_tokenizer(tmp_path / "t.json").chars == tok.chars
    with pytest.raises(TokenizerError, match="never saw in training: 'xz'"):
        tok.encode("xoz")


# --------------------------------------------------------------------------------------
# Against the regex package and Hugging Face tokenizers
# --------------------------------------------------------------------------------------


@settings(max_examples=500, deadline=None)
@given(st.text(st.characters(exclude_categories=("Cn", "Cs"))) | st.text("aé1½Ⅻ٣ \t\n\x1c\u3000\u0301'sllve.!"))
def test_the_split_matches_gpt2s_pattern_run_by_the_regex_package(text):
    """Our classes are built from Python's unicodedata; ``regex`` has its own Unicode tables. Unassigned
    code points (Cn) are left out: the two may be on different Unicode versions, and a character one
    version assigns (a letter) and the other does not (no category) splits differently."""
    regex = pytest.importorskip("regex")
    assert pretokenize(text) == regex.findall(GPT2_SPLIT, text)


def test_pythons_own_classes_would_differ_from_gpt2s():
    """Why the pattern spells \\p{L}, \\p{N} and \\s out: the obvious stand-ins in Python's re are not them."""
    assert re.fullmatch(r"[^\W\d_]+", "½Ⅻ")  # Python's "letters" include numbers that are not digits (No, Nl)
    assert pretokenize("x½Ⅻ") == ["x", "½Ⅻ"]  # GPT-2: letters, then numbers
    assert re.fullmatch(r"\s", "\x1c") and pretokenize("a\x1cb") == ["a", "\x1c", "b"]  # \x1c: not White_Space


@pytest.fixture(scope="module")
def corpus_text():
    """300 kB of the main demo's corpus (the standard library's docstrings), built in memory, not cached."""
    from demos import charlm_data

    return charlm_data.build_stdlib_corpus(300_000)


def test_against_hugging_face_tokenizers_byte_level_bpe(corpus_text):
    """Same text, same vocabulary size, GPT-2's split pattern in both (ByteLevel with use_regex).

    The same merges are learned and the text encodes to the same number of tokens. Their order differs
    only where pair counts tie: both take the pair of smallest ids, but tokenizers numbers the 256 base
    tokens in the order of GPT-2's byte-to-unicode characters (space is 'Ġ', U+0120, after every
    printable ASCII character), while here a base token's id is its byte value. tokenizers also puts
    the special tokens first (id 0); here they come last.
    """
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import models, pre_tokenizers, trainers

    vocab_size = 1024
    hf = tokenizers.Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    hf.train_from_iterator([corpus_text], trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=[ENDOFTEXT], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    ours = BPETokenizer.train(corpus_text, vocab_size)
    assert hf.get_vocab_size() == ours.vocab_size == vocab_size

    n_hf, n_ours = len(hf.encode(corpus_text).ids), len(ours.encode(corpus_text))
    assert abs(n_hf - n_ours) <= 0.005 * n_ours, (n_hf, n_ours)

    to_byte = byte_level_decoder()
    hf_merges = [tuple(bytes(to_byte[ch] for ch in part) for part in merge)
                 for merge in json.loads(hf.to_str())["model"]["merges"]]
    our_merges = [(ours.vocab[a], ours.vocab[b]) for a, b in ours.merges]
    assert len(set(hf_merges) & set(our_merges)) >= 0.98 * len(our_merges)


def byte_level_decoder() -> dict[str, int]:
    """GPT-2's byte-to-unicode table, inverted: printable bytes stand for themselves, the rest are shifted."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table, shifted = {chr(b): b for b in printable}, 0
    for b in range(256):
        if b not in printable:
            table[chr(256 + shifted)] = b
            shifted += 1
    return table


def test_the_tokenizer_benchmark_runs_and_prints_its_table():
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "benchmarks.tokenizer", "--quick", "--threads", "1"], cwd=root,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("|")]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines]
    cells = next(row for row in rows if row[0] == "512")
    assert cells[1] == "255" and float(cells[5]) > 1.5  # 512 = 256 bytes + 255 merges + <|endoftext|>; compresses
    assert "load average" in done.stdout
