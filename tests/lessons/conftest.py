"""Fixtures of the lessons' and demos' tests: a private corpus cache, and small text files to train on."""

from pathlib import Path

import numpy as np
import pytest


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory, monkeypatch):
    """The docstring corpus is cached under pytest's tmp folder, not in ~/.cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "xdg-cache"))


@pytest.fixture(scope="session")
def word_salad(tmp_path_factory):
    """``word_salad(words)``: a file of 110 lines of 10 words drawn from ``words`` (seed 0), about 6,000
    characters with structure a tiny model picks up at once."""
    def write(words: str) -> Path:
        rng = np.random.default_rng(0)
        vocabulary = words.split()
        path = tmp_path_factory.mktemp("text") / "words.txt"
        path.write_text("\n".join(" ".join(rng.choice(vocabulary, size=10)) + "." for _ in range(110)) + "\n",
                        encoding="utf-8")
        return path

    return write
