"""Every lesson, as a learner meets it: opened as a notebook (jupytext) and run in a real Jupyter kernel
(nbclient), from the demos/ folder as Jupyter starts it. Each picture a lesson draws is displayed inline,
no cell shows a stray value, and the pictures land in the repository's out/, not demos/out/.

Needs the optional test extra ``notebooks`` (jupytext, nbclient, ipykernel); skipped without it.
"""

import importlib.util
import os
import shutil

import pytest

jupytext = pytest.importorskip("jupytext")
nbclient = pytest.importorskip("nbclient")
if importlib.util.find_spec("ipykernel") is None:  # (not imported here: the kernel runs in its own process)
    pytest.skip("ipykernel is not installed", allow_module_level=True)

from demos_helpers import DEMOS, cells  # noqa: E402
from test_demos_cells import LESSONS  # noqa: E402

from demos import make_notebooks  # noqa: E402

ROOT = DEMOS.parent
# lesson -> how many pictures it displays inline (images: SVG or PNG)
PICTURES = {"quickstart": 0, "rnn_vanishing_gradient": 1, "attention_from_scratch": 2, "transformer_lesson": 0,
            "draw_graphs": 5, "forward_or_reverse": 1, "memory_lesson": 1,
            "data_parallel_lesson": 1, "precision_lesson": 1, "flash_attention_lesson": 1}
NEEDS_MATPLOTLIB = {"rnn_vanishing_gradient", "attention_from_scratch", "forward_or_reverse", "memory_lesson",
                    "data_parallel_lesson", "precision_lesson", "flash_attention_lesson"}


def run_as_notebook(lesson: str):
    notebook = make_notebooks.notebook(lesson)  # the very .ipynb `make notebooks` writes
    client = nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(DEMOS)}})
    client.execute()
    return notebook


@pytest.fixture(autouse=True)
def kernel_imports_this_checkout(monkeypatch):
    """The kernel starts in demos/: put this repository first on its path, before any installed copy."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))


@pytest.mark.parametrize("lesson", list(PICTURES))
def test_each_lesson_runs_as_a_notebook_and_shows_its_pictures_inline(lesson):
    if lesson in NEEDS_MATPLOTLIB:
        pytest.importorskip("matplotlib")
    if lesson == "draw_graphs" and shutil.which("dot") is None:
        pytest.skip("Graphviz's dot is needed to show the graphs as pictures (apt-get install graphviz)")
    had_stray_folder = (DEMOS / "out").exists()
    notebook = run_as_notebook(lesson)
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    images = [o for o in outputs if o.output_type == "display_data"
              and ({"image/svg+xml", "image/png"} & set(o.get("data", {})))]
    assert len(images) == PICTURES[lesson], [o.get("data", {}).keys() for o in outputs if "data" in o]
    shown = [o["data"].get("text/plain", "") for o in outputs if o.output_type == "execute_result"]
    assert not [text for text in shown if "Namespace(" in text], "a cell shows a stray value"
    if not had_stray_folder:
        assert not (DEMOS / "out").exists(), "pictures go to the repository's out/, not demos/out/"
    if lesson == "draw_graphs":
        for image in images:  # never wider than the notebook's column
            assert 'style="max-width:100%' in image["data"]["image/svg+xml"]
        steppers = [o for o in outputs if o.output_type == "display_data" and "<script>" in
                    o.get("data", {}).get("text/html", "")]
        assert len(steppers) == 1, "the backward pass, step by step, is shown as a widget"
        assert (ROOT / "out" / "draw_graphs" / "backward_steps.html").exists()


def test_make_notebooks_writes_every_lesson_as_its_scripts_cells(tmp_path):
    import nbformat

    assert make_notebooks.LESSONS == LESSONS == list(PICTURES)
    assert make_notebooks.main(["--out", str(tmp_path)]) == 0
    for lesson in LESSONS:
        path = tmp_path / f"{lesson}.ipynb"
        notebook = nbformat.read(path, as_version=4)
        nbformat.validate(notebook)
        assert "jupytext" not in notebook.metadata and notebook.metadata.kernelspec.name == "python3"
        script = cells(DEMOS / f"{lesson}.py")
        assert [c.cell_type for c in notebook.cells] == [c.kind for c in script]
        for made, written in zip(notebook.cells, script):
            assert not made.get("outputs")
            if made.cell_type == "code":
                assert made.source == written.source.strip("\n"), (lesson, written.line)
            else:  # the prose, without its comment marks
                prose = "\n".join(line[2:] if line.startswith("# ") else line.lstrip("#")
                                  for line in written.source.strip("\n").splitlines())
                assert made.source == prose, (lesson, written.line)
    again = tmp_path / "again"
    make_notebooks.main(["--out", str(again), "memory_lesson"])
    assert (again / "memory_lesson.ipynb").read_bytes() == (tmp_path / "memory_lesson.ipynb").read_bytes()


def test_make_notebooks_names_a_lesson_it_does_not_know(capsys):
    with pytest.raises(SystemExit):
        make_notebooks.main(["no_such_lesson"])
    assert "not a lesson: no_such_lesson" in capsys.readouterr().err
