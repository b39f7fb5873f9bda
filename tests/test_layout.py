"""The house stays light: the layout's bars, held (the package root, file sizes, the speed machinery's reach, the
READMEs' length). Backward's own bar is ``tests/autograd/test_reading_path.py``'s."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "minigrad"


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def _policy_names(path: Path) -> set[str]:
    """The names ``path`` reads off the thread policy module (``policy.on_backward`` -> ``on_backward``)."""
    tree = ast.parse(path.read_text())
    return {node.attr for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "policy"}


def test_the_package_root_holds_at_most_ten_modules():
    modules = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert len(modules) <= 10, f"minigrad/ holds {len(modules)} modules: {modules}; give a concern a package"


def test_no_file_but_the_op_table_is_over_600_lines():
    long = {str(path.relative_to(ROOT)): _lines(path) for path in PACKAGE.rglob("*.py") if _lines(path) > 600}
    assert set(long) <= {"minigrad/ops.py"}, f"split by concern: {long}"


def test_the_kernels_lean_on_nothing_of_the_engine_but_its_modes():
    # The engine calls the kernels and the thread policy, never the reverse: no import circle between them.
    for path in (PACKAGE / "kernels").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level >= 2:
                assert node.module == "modes", f"kernels/{path.name} imports minigrad.{node.module}"
            named = [alias.name for alias in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
            assert not any(name.split(".")[0] == "minigrad" for name in named), f"kernels/{path.name}: {named}"


def test_the_engine_reaches_the_thread_policy_through_one_hook():
    # Autodiff, Module and optimizer code call policy.on_backward and nothing else of it; in the kernels, only the
    # kernel wrapper's check of the tuner's deadline and the backend's report and load hook reach it.
    for path in PACKAGE.rglob("*.py"):
        where = path.relative_to(PACKAGE)
        if where.parts[0] != "kernels":
            assert _policy_names(path) <= {"on_backward"}, f"{where} reaches into the policy"
    assert _policy_names(PACKAGE / "kernels/kernel.py") == {"tuner"}
    assert _policy_names(PACKAGE / "kernels/backend.py") == {"report", "fast_backend_loaded"}


def test_the_readmes_are_short_and_hold_no_log_of_rounds():
    assert _lines(ROOT / "README.md") <= 500, "the README is for newcomers: move reference tables to docs/"
    benchmarks = (ROOT / "benchmarks/README.md").read_text()
    assert len(benchmarks.splitlines()) <= 400
    history = re.findall(r"^#+ .*\b(?:round|issue \d+|earlier|history)\b.*$", benchmarks, flags=re.M | re.I)
    assert history == [], f"benchmarks/README.md holds the method and current tables; the history is git's: {history}"


def test_a_refusal_is_checked_by_its_error_type_and_words():
    # pytest.raises with a bare Exception passes for any mistake at all, a typo in the test included.
    broad = re.compile(r"raises\((?:Base)?" + r"Exception\b")
    found = [f"{path.relative_to(ROOT)}:{n}" for path in (ROOT / "tests").rglob("*.py")
             for n, line in enumerate(path.read_text().splitlines(), 1) if broad.search(line)]
    assert found == [], f"name the error type and match the words that tell the user what to write: {found}"
