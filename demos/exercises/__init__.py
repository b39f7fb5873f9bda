"""Learn by building: exercises the engine's own checkers grade, from one VJP to a trained GPT's KV cache.

    python -m demos.exercises list            what there is, and how far you are
    python -m demos.exercises check 3         grade exercise 3 (your file demos/exercises/ex03_backward.py)
    python -m demos.exercises check all       grade them all, in order

Each ``exNN_*.py`` file in this folder is yours: its stubs raise
``NotImplementedError("exercise N: ...")`` under a comment stating the math.
Fill them in, one exercise at a time, each building on the last; ``check N``
says what passed, or what is wrong: which op, which input, the worst index,
the expected and the received value, and where to read about it.

Reference solutions are in ``solutions/`` (``check N --solutions`` grades
them). Try first: the checker is there so you need not look.
"""

from .course import EXERCISES, check, status

__all__ = ["EXERCISES", "check", "status"]
