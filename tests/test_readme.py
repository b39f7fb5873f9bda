"""The README's reading path stays true: the files it names exist, with about the line counts it gives."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_the_reading_path_gives_true_line_counts():
    rows = re.findall(r"^\| \d+ \| `([^`]+)` \| (\d*) \|", README, flags=re.M)
    assert [path for path, _ in rows][:5] == ["minigrad/tensor.py", "minigrad/registry.py", "minigrad/ops.py",
                                              "minigrad/autograd/backprop.py", "minigrad/autograd/gradcheck.py"]
    for path, count in rows:
        assert (ROOT / path).exists(), path
        if count:
            actual = len((ROOT / path).read_text().splitlines())
            assert abs(actual - int(count)) <= max(10, actual // 20), f"{path}: README says {count}, it has {actual}"


def test_the_speed_appendix_line_counts_are_true():
    for path, count in re.findall(r"`(minigrad/(?:fused\.py|kernels/\w+\.py))` \((\d+) lines\)", README):
        actual = len((ROOT / path).read_text().splitlines())
        assert abs(actual - int(count)) <= max(10, actual // 20), f"{path}: README says {count}, it has {actual}"


def test_ops_py_holds_math_only():
    # The op table states the math: no kernel helpers, no speed branches (those are the kernels').
    source = (ROOT / "minigrad/ops.py").read_text()
    assert len(source.splitlines()) <= 850
    for speed_word in ("BLAS", "blockwise", "_blas_summable", "einsum(", "in place", "out="):
        assert speed_word not in source, speed_word


# --------------------------------------------------------------------------------------
# PyTorch code runs as written: the rule's example and the table of calls that read both ways
# --------------------------------------------------------------------------------------

DIALECT = README[README.index("## PyTorch code runs as written"):README.index("## Layers: `minigrad.nn`")]
_TABLES = DIALECT.split("PyTorch also takes NumPy's `axis=`")
BOTH_WAYS = re.findall(r"^\| `([^`]+)` \| `([^`]+)` \| ([^|]+) \|$", _TABLES[0], flags=re.M)
NUMPY_KEYWORDS = re.findall(r"^\| `([^`]+)` \| `([^`]+)` \| ([^|]+) \|$", _TABLES[1], flags=re.M)


def test_the_dialect_example_runs_as_written():
    import minigrad as mg

    (example,) = re.findall(r"```python\n(.*?)```", DIALECT, flags=re.S)
    names: dict = {}
    exec(example, names)  # noqa: S102
    assert names["xs"].dtype == mg.int64 and names["x"].dtype == mg.float64
    assert names["v"].shape == (27,) and names["i"].dtype == mg.int64 and names["W"].grad is not None


def _leaves(out) -> list:
    if isinstance(out, tuple | list):
        return [leaf for part in out for leaf in _leaves(part)]
    return [out]


def _evaluate(code: str, engine: str):
    import numpy as np

    import minigrad as mg

    a = np.random.default_rng(0).standard_normal((6, 4))
    if engine == "numpy":
        names = {"x": a, "T": np}
    elif engine == "torch":
        import torch

        names = {"x": torch.tensor(a), "T": torch}
    else:
        names = {"x": mg.tensor(a), "T": mg}
    try:
        out = eval(code, names)  # noqa: S307
    except Exception as err:  # noqa: BLE001  (an error is a result the other side must share)
        return err
    arrays = []
    for leaf in _leaves(out):
        arrays.append(leaf.detach().numpy() if hasattr(leaf, "detach") else np.asarray(leaf))
    return arrays


def _same(got, expected) -> bool:
    import numpy as np

    if isinstance(expected, Exception) or isinstance(got, Exception):
        return isinstance(expected, Exception) and isinstance(got, Exception)
    return len(got) == len(expected) and all(
        g.shape == e.shape and g.dtype == e.dtype and np.allclose(g, e) for g, e in zip(got, expected))


def test_the_table_of_calls_that_read_both_ways_is_true():
    import pytest

    assert len(BOTH_WAYS) >= 10
    for call, numpy_spelling, _ in BOTH_WAYS:
        # the NumPy column, on minigrad, is what NumPy does with the call
        assert _same(_evaluate(numpy_spelling, "minigrad"), _evaluate(call, "numpy")), (call, numpy_spelling)
        # and the two readings really differ: the call on minigrad is not NumPy's meaning
        assert not _same(_evaluate(call, "minigrad"), _evaluate(call, "numpy")), call
    pytest.importorskip("torch")
    for call, _, _ in BOTH_WAYS:  # the call, on minigrad, is what PyTorch does with it
        assert _same(_evaluate(call, "minigrad"), _evaluate(call, "torch")), call


def test_the_table_of_pytorch_calls_with_numpys_keywords_is_true():
    import pytest

    assert len(NUMPY_KEYWORDS) >= 5
    for call, _, _ in NUMPY_KEYWORDS:  # on minigrad the call is NumPy's meaning
        assert _same(_evaluate(call, "minigrad"), _evaluate(call, "numpy")), call
    pytest.importorskip("torch")
    for call, pytorch_spelling, _ in NUMPY_KEYWORDS:  # PyTorch reads it otherwise: the second column, here
        assert _same(_evaluate(pytorch_spelling, "minigrad"), _evaluate(call, "torch")), (call, pytorch_spelling)
        assert not _same(_evaluate(call, "minigrad"), _evaluate(call, "torch")), call
