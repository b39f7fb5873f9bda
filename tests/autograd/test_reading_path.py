"""Backward reads in an hour: the files its pass runs through, their size, and its loop, held to the bar.

The pass is ``backprop.py`` (the walk), ``contract.py`` (its checks), ``freed.py`` (a node's inputs, and
what is left of a freed node) and ``registry.record`` (the one place a node is written).
"""

import ast
import inspect
from pathlib import Path

import minigrad
from minigrad import registry
from minigrad.autograd import backprop

AUTOGRAD = Path(minigrad.__file__).parent / "autograd"


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def test_backward_runs_through_three_autograd_files_and_the_record():
    imported = {node.module for node in ast.walk(ast.parse(inspect.getsource(backprop)))
                if isinstance(node, ast.ImportFrom) and node.level == 1}
    assert imported == {"contract", "freed"}
    contract_imports = {node.module for node in ast.walk(ast.parse((AUTOGRAD / "contract.py").read_text()))
                        if isinstance(node, ast.ImportFrom) and node.level == 1}
    assert contract_imports <= {"anomaly", "freed"}  # anomaly.py: only its error class
    files = [AUTOGRAD / name for name in ("backprop.py", "contract.py", "freed.py")]
    record = len(inspect.getsource(registry.record).splitlines())
    assert sum(map(_lines, files)) + record <= 600


def test_the_loop_is_at_most_45_lines_with_one_vjp_call():
    loop = inspect.getsource(backprop._backpropagate)
    assert len(loop.splitlines()) <= 45
    calls = [path.name for path in AUTOGRAD.glob("*.py") if "._op.vjp(" in path.read_text() or "op.vjp(" in
             path.read_text()]
    assert calls == ["contract.py"]
