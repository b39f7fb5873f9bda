"""Running a lesson the way Jupyter does: its ``# %%`` cells one after another, in one namespace.

The lessons under demos/ are scripts made of cells. ``run_cells`` splits a file
at its ``# %%`` lines and executes each cell in turn in a shared namespace named
``__main__`` (as a notebook kernel does), with ``sys.argv`` set to the given
command line, and returns what they printed and the namespace they built. A
failing cell is reported by its number and its own line numbers.
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
from pathlib import Path
from types import SimpleNamespace

DEMOS = Path(__file__).resolve().parents[2] / "demos"
CELL_MARKER = re.compile(r"^# %%(.*)$")


def cells(path: Path) -> list[SimpleNamespace]:
    """The file's cells: kind ("code" or "markdown"), first line number (1-based), and source."""
    lines = Path(path).read_text(encoding="utf-8").splitlines(keepends=True)
    found = []
    for number, line in enumerate(lines, start=1):
        match = CELL_MARKER.match(line)
        if match:
            kind = "markdown" if "[markdown]" in match.group(1) else "code"
            found.append(SimpleNamespace(kind=kind, line=number, source=""))
        elif found:
            found[-1].source += line
        elif line.strip():
            raise AssertionError(f"{path}:{number}: text before the first '# %%' cell")
    return found


def run_cells(path: Path, argv=()) -> SimpleNamespace:
    """Execute the code cells of ``path`` in order, as a notebook kernel would; return printout and namespace."""
    path = Path(path)
    namespace = {"__name__": "__main__", "__file__": str(path)}
    out = io.StringIO()
    old_argv = sys.argv
    sys.argv = [str(path), *map(str, argv)]
    try:
        with contextlib.redirect_stdout(out):
            for index, cell in enumerate(cells(path)):
                if cell.kind != "code":
                    continue
                # Pad with blank lines so a traceback shows the line number in the file itself.
                code = compile("\n" * cell.line + cell.source, str(path), "exec")
                try:
                    exec(code, namespace)
                except SystemExit:
                    raise
                except Exception as err:
                    raise AssertionError(f"{path.name}: cell {index} (line {cell.line}) failed: {err!r}") from err
    finally:
        sys.argv = old_argv
    text = out.getvalue()
    return SimpleNamespace(ns=SimpleNamespace(**{k: v for k, v in namespace.items() if not k.startswith("__")}),
                           text=text, lines=text.splitlines())
