"""The demos and lessons, each run as ``python -m demos.<name>`` with the project's interpreter.

A plain ``python`` is usually the system's, without minigrad's dependencies; run
that way, every demo would end in a traceback about a missing module. So before
any demo is imported, this says in one line which interpreter to use.
"""

import importlib.util
import sys

_missing = [name for name in ("numpy", "safetensors", "threadpoolctl", "graphviz")
            if importlib.util.find_spec(name) is None]
if _missing:
    _argv = getattr(sys, "orig_argv", [])
    _command = " ".join(_argv[_argv.index("-m"):]) if "-m" in _argv else "-m demos.<name>"
    raise SystemExit(f"error: this Python ({sys.executable}) lacks minigrad's dependencies (no module "
                     f"{', '.join(map(repr, _missing))}); run .venv/bin/python {_command} (make creates .venv), "
                     f"or activate the venv first (. .venv/bin/activate)")
