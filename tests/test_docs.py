"""Every code block in README.md and docs/*.md is checked, so an example cannot describe an API that is not there.

A block says what it is on its opening fence:

* ```` ```python ````: run. A page's Python blocks run in order in one fresh namespace named
  ``__main__`` (as the cells of one notebook: op blocks get the origin they would have there), in a
  temporary directory (pictures and checkpoints land there). Ops a page registers are taken out of
  the table afterwards, and the default generator is put back where it was, because other tests walk
  ``minigrad.OPS`` and draw from it.
* ```` ```bash ```` / ```` ```sh ```` / ```` ```console ````: commands, checked without running them
  (they train models, install packages): each is a program this checkout has or names, a
  ``make`` target the Makefile defines, a ``python -m`` module that exists with the ``--flags`` it
  parses, ``pip install`` extras that ``pyproject.toml`` declares, ``python -c`` code that compiles.
* ```` ```text ````: output or a layout, not run.

A block with no kind, or another one, fails: the page must say which it is.
"""

from __future__ import annotations

import re
import shlex
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

import minigrad as mg
from minigrad.ops import unregister

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
FENCE = re.compile(r"^(?P<indent>[ ]*)```(?P<kind>[^\n`]*)\n(?P<body>.*?)^(?P=indent)```[ ]*$", re.M | re.S)
SHELL = {"bash", "sh", "console"}


@dataclass
class Block:
    kind: str
    code: str
    line: int  # where the block opens in its page, 1-based

    def where(self, page: Path) -> str:
        return f"{page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    return [Block(m["kind"].strip(), textwrap.dedent(m["body"]), text.count("\n", 0, m.start()) + 1)
            for m in FENCE.finditer(text)]


def page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


# --------------------------------------------------------------------------------------
# Python blocks: run, page by page
# --------------------------------------------------------------------------------------


def run_page(page: Path) -> dict:
    """Run the page's Python blocks in order in one namespace; an error names the block's line and first line."""
    namespace = {"__name__": "__main__"}
    ops_before = dict(mg.OPS)
    random_state = mg.default_generator.get_state()
    try:
        for block in blocks(page):
            if block.kind != "python":
                continue
            try:
                exec(compile(block.code, block.where(page), "exec"), namespace)  # noqa: S102
            except Exception as err:
                raise AssertionError(f"{block.where(page)}: the code block ({block.code.splitlines()[0]!r}) "
                                     f"failed: {type(err).__name__}: {err}") from err
    finally:
        for name in [n for n in mg.OPS if mg.OPS[n] is not ops_before.get(n)]:
            unregister(name)
        mg.default_generator.set_state(random_state)
        assert mg.OPS == ops_before
    return namespace


@pytest.mark.parametrize("page", [p for p in PAGES if any(b.kind == "python" for b in blocks(p))], ids=page_id)
def test_every_python_block_runs(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run_page(page)


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_block_says_what_it_is(page):
    for block in blocks(page):
        assert block.kind in {"python", "text"} | SHELL, (
            f"{block.where(page)}: a code block marked {block.kind!r}; mark it python (it runs), bash (commands, "
            f"checked) or text (output, not run)")


# --------------------------------------------------------------------------------------
# Shell blocks: every command names something that exists
# --------------------------------------------------------------------------------------

MAKE_TARGETS = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), flags=re.M))
_PYPROJECT = (ROOT / "pyproject.toml").read_text()
EXTRAS = set(re.findall(r"^(\w+) = \[", _PYPROJECT.split("[project.optional-dependencies]")[1].split("\n[")[0], re.M))
OUR_PACKAGES = {"minigrad", "models", "demos", "benchmarks"}
OTHER_MODULES = {"pytest", "venv", "pip", "torch.distributed.run", "jupytext"}  # installed by the README's commands
PYTHONS = {"python", "python3", ".venv/bin/python"}
OTHER_PROGRAMS = {"apt-get", "brew", ".", "source", "cd", "git"}  # the system's, or the shell's own


def commands(code: str) -> list[list[str]]:
    """The commands of a shell block, each as its words, split at ``&&``, ``;`` and ``|``; comments dropped."""
    found = []
    for line in code.replace("\\\n", " ").splitlines():
        line = line.removeprefix("$ ")
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        words: list[str] = []
        for word in [*lexer, ";"]:
            if word in {"&&", "||", ";", "|"}:
                while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):  # VAR=value before a command
                    words.pop(0)
                if words:
                    found.append(words)
                words = []
            else:
                words.append(word)
    return found


def module_file(name: str) -> Path | None:
    base = ROOT.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__main__.py"):
        if candidate.exists():
            return candidate
    return None


def check_module(name: str, args: list[str]) -> None:
    if name.split(".")[0] not in OUR_PACKAGES:
        assert name in OTHER_MODULES, f"python -m {name}: not a module of this checkout nor one the README installs"
        paths = [a for a in args if a.startswith("tests/")]
    else:
        path = module_file(name)
        assert path is not None, f"python -m {name}: there is no {name.replace('.', '/')}.py"
        # the flags it parses: in its own file, or the helpers its folder shares (demos/_common.py...)
        source = "".join(p.read_text() for p in [path, *path.parent.glob("_*.py")])
        for flag in (a.split("=")[0] for a in args if a.startswith("--")):
            assert f'"{flag}"' in source or f"'{flag}'" in source, f"python -m {name}: it has no {flag} option"
        paths = [a for a in args if a.split("/")[0] in {"tests", "demos", "models", "docs"} and "<" not in a]
    for p in paths:
        assert (ROOT / p).exists(), f"python -m {name} {p}: there is no {p}"


def check_command(words: list[str]) -> None:
    program, *args = words
    if program == "make":
        for target in (a for a in args if not a.startswith("-")):
            assert target in MAKE_TARGETS, f"make {target}: the Makefile has no such target ({sorted(MAKE_TARGETS)})"
    elif program in PYTHONS:
        if args[:1] == ["-m"]:
            if args[1] == "pip":
                check_command(["pip", *args[2:]])
            else:
                check_module(args[1], args[2:])
        elif args[:1] == ["-c"]:
            compile(args[1], "python -c", "exec")
        else:
            assert args and (ROOT / args[0]).exists(), f"{program} {' '.join(args)}: no such script"
    elif program in {"pip", ".venv/bin/pip"}:
        for arg in args:
            for extras in re.findall(r"^\.\[([\w,]+)\]$", arg):
                assert set(extras.split(",")) <= EXTRAS, f"pip install {arg}: pyproject.toml declares {EXTRAS}"
    elif program in {"torchrun", ".venv/bin/torchrun"}:
        assert "-m" in args, "torchrun: the README runs modules (-m)"
        at = args.index("-m")
        check_module(args[at + 1], args[at + 2:])
    else:
        assert program in OTHER_PROGRAMS, f"{program}: not a program this checkout has or the README installs"


@pytest.mark.parametrize("page", [p for p in PAGES if any(b.kind in SHELL for b in blocks(p))], ids=page_id)
def test_every_command_names_what_exists(page):
    for block in (b for b in blocks(page) if b.kind in SHELL):
        for words in commands(block.code):
            try:
                check_command(words)
            except (AssertionError, SyntaxError) as err:
                raise AssertionError(f"{block.where(page)}: {shlex.join(words)}: {err}") from err


def test_the_command_check_refuses_what_does_not_exist():
    for wrong in ("make tests", "python -m demos.no_such_lesson", "python -m demos.train_charlm --no-such-flag",
                  ".venv/bin/pip install -e '.[dev,no_such_extra]'", "python -c 'print('",
                  "python -m pytest tests/no_such_test.py", "frobnicate --now"):
        (words,) = commands(wrong)
        with pytest.raises((AssertionError, SyntaxError)):
            check_command(words)
    assert commands("MINIGRAD_THREADS=1 make test  # a comment\nmake demo && python -m demos.quickstart") == [
        ["make", "test"], ["make", "demo"], ["python", "-m", "demos.quickstart"]]


# --------------------------------------------------------------------------------------
# What the pages say, beyond running
# --------------------------------------------------------------------------------------


def test_every_page_of_docs_is_linked_from_the_readme():
    readme = (ROOT / "README.md").read_text()
    for page in DOCS.glob("*.md"):
        assert f"docs/{page.name}" in readme, f"README.md does not link docs/{page.name}"


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_the_files_a_page_names_exist(page):
    text = page.read_text(encoding="utf-8")
    named = set(re.findall(r"`((?:minigrad|models|demos|benchmarks|tests|docs)/[\w/.]+?\.(?:py|md|svg|png))`", text))
    named |= {f"docs/{link}" for link in re.findall(r"\]\(([\w.]+\.(?:md|svg|png))(?:#[\w-]+)?\)", text)
              if page.parent == DOCS}
    named |= set(re.findall(r"(?:src=\"|\]\()((?:docs|demos)/[\w/.]+\.(?:md|svg|png))", text))
    missing = sorted(path for path in named if not (ROOT / path).exists())
    assert not missing, f"{page_id(page)} names files that are not there: {missing}"


def heading_anchors(page: Path) -> set[str]:
    """GitHub's anchors for a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    headings = re.findall(r"^#+ (.+)$", FENCE.sub("", page.read_text(encoding="utf-8")), flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_link_to_a_heading_finds_it(page):
    for target, anchor in re.findall(r"\]\(([\w/.]*?)#([\w-]+)\)", page.read_text(encoding="utf-8")):
        linked = (page.parent / target) if target else page
        assert anchor in heading_anchors(linked), f"{page_id(page)} links {target}#{anchor}, a heading it lacks"


def test_the_backward_walkthrough_saves_its_picture(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run_page(DOCS / "backward.md")
    assert list(tmp_path.glob("backward_graph.*")), "the picture's code block wrote nothing"


def test_the_ops_a_page_adds_are_gone_afterwards(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace = run_page(DOCS / "adding_an_op.md")
    for name in ("my_sin", "my_cos", "my_arcsin", "my_silu", "sin_with_numpy"):
        assert namespace[name].name == name  # the page did define them
        assert name not in mg.OPS and not hasattr(mg.Tensor, name)
    run_page(ROOT / "README.md")
    assert "softplus" not in mg.OPS and not hasattr(mg.Tensor, "softplus")


def test_the_checkpoint_and_precision_page_runs_and_says_what_it_prints(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    run_page(DOCS / "checkpoint_and_precision.md")
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "checkpoint 2"
    assert printed[1] == "[1.0, 1.015625, 70144.0, 1.0011717677116394e-08]"
    assert printed[2] == "[1.00390625, 1.01171875, inf, 0.0]"
    assert printed[3] == "[0.0, 0.0010004043579101562]"
