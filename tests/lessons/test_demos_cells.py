"""The lessons stand on their own: cells that run in order, no references the reader cannot follow, numbers
with their units, ``--out`` where they draw, and one runtime each in the README.

The three longer lessons are run cell by cell in tests/lessons/test_demos_lessons.py; here the two short ones run
the same way, and every lesson's command line is checked through ``--help`` (which stops before any work).
"""

import re
import subprocess
import sys
from pathlib import Path

import pytest
from demos_helpers import DEMOS, cells, run_cells

ROOT = DEMOS.parent
LESSONS = ["quickstart", "rnn_vanishing_gradient", "attention_from_scratch", "transformer_lesson", "draw_graphs",
           "forward_or_reverse", "memory_lesson", "data_parallel_lesson", "precision_lesson",
           "flash_attention_lesson"]
DRAWS_PICTURES = {"rnn_vanishing_gradient", "attention_from_scratch", "draw_graphs", "forward_or_reverse",
                  "memory_lesson", "data_parallel_lesson", "precision_lesson", "flash_attention_lesson"}

# Ways a demo could send the reader to a file the repository does not have: the seed texts' file names,
# the "seeds" folder, and step numbers of a notebook the reader never saw.
FOREIGN_REFERENCES = [
    re.compile(r"\d{3}_[0-9a-f]{16}"),  # the seed texts' file names
    re.compile(r"project's seeds|/seeds/", re.IGNORECASE),
    re.compile(r"\bthe notebook\b|notebook's|notebook step", re.IGNORECASE),
    re.compile(r"\bsteps? \d+ (to|-|–|…|and) \d+", re.IGNORECASE),  # "steps 3 to 8", "Step 3…8"
]


@pytest.mark.parametrize("path", sorted(DEMOS.glob("*.py")) + [ROOT / "tests" / "lessons" / "demos_helpers.py"]
                         + [p for p in sorted(ROOT.glob("tests/lessons/test_demos_*.py"))
                            if p.name != Path(__file__).name],
                         ids=lambda p: p.name)
def test_no_demo_cites_a_file_the_repository_lacks(path):
    text = path.read_text(encoding="utf-8")
    for pattern in FOREIGN_REFERENCES:
        assert not pattern.search(text), f"{path.name}: {pattern.search(text).group(0)!r}"


@pytest.mark.parametrize("lesson", LESSONS)
def test_lessons_are_written_as_cells(lesson):
    found = cells(DEMOS / f"{lesson}.py")
    kinds = [cell.kind for cell in found]
    assert kinds[0] == "markdown", "a lesson opens with prose saying what it is"
    assert kinds.count("code") >= 4 and kinds.count("markdown") >= 4, kinds
    for cell in found:
        if cell.kind == "markdown":  # prose only: every line a comment
            assert all(line.startswith("#") or not line.strip() for line in cell.source.splitlines()), cell.line
    assert "python -m demos." + lesson in found[0].source  # and how to run it


def test_quickstart_cells_run_in_order():
    run = run_cells(DEMOS / "quickstart.py")
    assert "gradcheck of df/dx and df/dw against finite differences: True" in run.lines
    assert run.ns.d2y.numpy().tolist() == [3.0, -6.0, 12.0]


def test_draw_graphs_cells_run_in_order(tmp_path):
    run = run_cells(DEMOS / "draw_graphs.py", ["--out", tmp_path])
    names = sorted(p.name for p in tmp_path.glob("*.gv"))
    assert names == ["attention_head.gv", "gradient_graph.gv", "rnn_unrolled.gv", "scalar_expression.gv",
                     "transformer_block.gv"]
    assert "tanh" in run.text


def test_quickstart_runs_as_a_script():
    done = subprocess.run([sys.executable, "-m", "demos.quickstart"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "gradcheck of df/dx and df/dw against finite differences: True" in done.stdout


@pytest.mark.parametrize("lesson", LESSONS)
def test_lessons_say_whether_they_write_pictures(lesson):
    done = subprocess.run([sys.executable, "-m", f"demos.{lesson}", "--help"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    if lesson in DRAWS_PICTURES:
        assert "--out" in done.stdout
    else:
        assert "--out" not in done.stdout and "writes no files" in done.stdout


def readme_lessons() -> dict[str, list[str]]:
    """The README's lesson table: {lesson: [what, pictures, time]}."""
    rows = {}
    for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines():
        match = re.match(r"\| `python -m demos\.(\w+)` \|(.*)\|\s*$", line)
        if match:
            rows[match.group(1)] = [cell.strip() for cell in match.group(2).split("|")]
    return rows


def test_readme_lists_every_lesson_once_with_its_pictures_and_one_runtime():
    rows = readme_lessons()
    assert sorted(rows) == sorted(LESSONS)
    for lesson, (_, pictures, time) in rows.items():
        assert re.fullmatch(r"\d+(\.\d)? s", time), (lesson, time)  # (from benchmarks/lesson_times.py)
        assert pictures.startswith("none") == (lesson not in DRAWS_PICTURES), (lesson, pictures)


def test_readme_gives_each_demo_one_runtime():
    """Outside the tables, no line that runs a demo states a time of its own (it would drift from the table)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    duration = re.compile(r"~\s*\d|\d+(\.\d+)?\s*(minutes?|min|seconds?)\b|\(\d+ s\)")
    for line in text.splitlines():
        if ("python -m demos." in line or "make demo" in line) and not line.startswith("|"):
            hit = duration.search(line)
            if hit and "demos.induction_heads" not in line and "demos.seq2seq" not in line:
                pytest.fail(f"a second runtime in the README: {line!r}")
    assert text.count("demos.induction_heads` (14 s)") == 1 and text.count("demos.seq2seq` (26 s)") == 1
