"""Every lesson as a Jupyter .ipynb file, made from its script, to open in Jupyter or Colab without jupytext.

    make notebooks                                   (installs the [notebooks] extra, then runs the next line)
    python -m demos.make_notebooks [--out DIR] [LESSON ...]     (default: every lesson, into out/notebooks)

The lessons are written as scripts whose ``# %%`` lines start cells (jupytext's
"percent" format); the scripts are the source, and the .ipynb files are made
from them, never edited by hand: each markdown cell becomes a markdown cell,
each code cell a code cell, in order, with no outputs (run them to see the
numbers and pictures). tests/lessons/test_lessons_notebooks.py makes them
again and checks that they hold exactly the scripts' cells.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

DEMOS = Path(__file__).resolve().parent
# The lessons, in the order the README's table gives them.
LESSONS = ["quickstart", "rnn_vanishing_gradient", "attention_from_scratch", "transformer_lesson", "draw_graphs",
           "forward_or_reverse", "memory_lesson", "data_parallel_lesson", "precision_lesson",
           "flash_attention_lesson"]
KERNEL = {"name": "python3", "display_name": "Python 3", "language": "python"}


def notebook(lesson: str):
    """The lesson's script as a notebook object (nbformat 4), its cells those of the script."""
    import jupytext

    nb = jupytext.read(DEMOS / f"{lesson}.py", fmt="py:percent")
    nb.metadata.pop("jupytext", None)  # a plain notebook: nothing in it asks for jupytext
    for number, cell in enumerate(nb.cells):
        cell.id = f"{lesson}-{number}"  # the same file every time it is made (jupytext draws random ids)
        cell.metadata.pop("lines_to_next_cell", None)
    nb.metadata["kernelspec"] = KERNEL
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def write_notebooks(out: Path, lessons=LESSONS) -> list[Path]:
    """Write ``<out>/<lesson>.ipynb`` for each lesson (atomically); return the paths."""
    import nbformat

    from minigrad.files import atomic_write

    written = []
    for lesson in lessons:
        path = out / f"{lesson}.ipynb"
        atomic_write(path, nbformat.writes(notebook(lesson)) + "\n", make_dirs=True)
        written.append(path)
    return written


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m demos.make_notebooks", description=__doc__.splitlines()[0])
    parser.add_argument("lessons", nargs="*", metavar="LESSON", help=f"lessons to convert (default: all: "
                                                                     f"{', '.join(LESSONS)})")
    parser.add_argument("--out", type=Path, default=Path("out") / "notebooks",
                        help="folder for the .ipynb files (default: %(default)s)")
    args = parser.parse_args(argv)
    unknown = [name for name in args.lessons if name not in LESSONS]
    if unknown:
        parser.error(f"not a lesson: {', '.join(unknown)} (the lessons: {', '.join(LESSONS)})")
    try:
        import jupytext  # noqa: F401
        import nbformat  # noqa: F401
    except ImportError:
        print("error: jupytext is needed to make the notebooks: pip install -e '.[notebooks]' (or: make notebooks)",
              file=sys.stderr)
        return 1
    for path in write_notebooks(args.out, args.lessons or LESSONS):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
