"""Every python code block in the learner's docs runs, top to bottom, as the cells of one notebook.

``docs/backward.md`` and ``docs/adding_an_op.md`` promise that their code runs. Each
doc's blocks run in order in one fresh namespace named ``__main__`` (so op blocks get
the origin they would have in a notebook), in a temporary directory (the backward
walkthrough saves its picture). Ops a doc registers are taken out of the table
afterwards, because other tests walk ``minigrad.OPS``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import minigrad as mg
from minigrad.ops import unregister

DOCS = Path(__file__).resolve().parent.parent / "docs"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def python_blocks(path: Path) -> list[str]:
    return BLOCK.findall(path.read_text())


def run_doc(path: Path) -> dict:
    """Run the doc's blocks in order in one namespace; an error names the block and its first line."""
    namespace = {"__name__": "__main__"}
    before = dict(mg.OPS)
    try:
        for k, code in enumerate(python_blocks(path)):
            try:
                exec(compile(code, f"{path.name}, block {k}", "exec"), namespace)
            except Exception as err:
                raise AssertionError(f"{path.name}: code block {k} ({code.splitlines()[0]!r}) failed: "
                                     f"{type(err).__name__}: {err}") from err
    finally:
        for name in [n for n in mg.OPS if mg.OPS[n] is not before.get(n)]:
            unregister(name)
        assert mg.OPS == before
    return namespace


@pytest.mark.parametrize("doc", ["backward.md", "adding_an_op.md"])
def test_every_code_block_runs(doc, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert len(python_blocks(DOCS / doc)) >= 5
    run_doc(DOCS / doc)


def test_the_backward_walkthrough_saves_its_picture(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run_doc(DOCS / "backward.md")
    assert list(tmp_path.glob("backward_graph.*")), "the picture's code block wrote nothing"
    assert (DOCS / "backward_graph.svg").exists(), "docs/backward_graph.svg (the committed picture) is missing"


def test_the_ops_a_doc_adds_are_gone_afterwards(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace = run_doc(DOCS / "adding_an_op.md")
    for name in ("sin", "cos", "arcsin", "silu", "sin_with_numpy"):
        assert name not in mg.OPS
    assert namespace["sin"].name == "sin"  # the doc did define them
    for method in ("sin", "cos", "arcsin"):
        assert not hasattr(mg.Tensor, method)


def test_the_docs_are_linked_from_the_readme():
    readme = (DOCS.parent / "README.md").read_text()
    assert "docs/backward.md" in readme and "docs/adding_an_op.md" in readme


def test_the_checkpoint_and_precision_page_runs_and_says_what_it_prints(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    run_doc(DOCS / "checkpoint_and_precision.md")
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "checkpoint 2"
    assert printed[1] == "[1.0, 1.015625, 70144.0, 1.0011717677116394e-08]"
    assert printed[2] == "[1.00390625, 1.01171875, inf, 0.0]"
    assert printed[3] == "[0.0, 0.0010004043579101562]"
    assert "docs/checkpoint_and_precision.md" in (DOCS.parent / "README.md").read_text()
