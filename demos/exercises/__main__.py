"""``python -m demos.exercises list | check N | check all [--solutions]``: the course's command line."""

from __future__ import annotations

import argparse
import re
import sys

from .course import EXERCISES, check, exercise, status
from .grader import Wrong


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m demos.exercises",
                                     description="Exercises graded by minigrad's own checkers.")
    sub = parser.add_subparsers(dest="command", required=True)
    listing = sub.add_parser("list", help="the exercises, and which are done")
    listing.add_argument("--solutions", action="store_true", help="the reference solutions' status instead")
    grading = sub.add_parser("check", help="grade one exercise (a number) or all of them ('all')")
    grading.add_argument("which", help="an exercise number, or 'all'")
    grading.add_argument("--solutions", action="store_true", help="grade the reference solutions instead of yours")
    args = parser.parse_args(argv)

    if args.command == "list":
        for e in EXERCISES:
            state, why = status(e.number, args.solutions)
            print(f"{e.number}. {state:<12} {e.title}   (demos/exercises/{e.module}.py)")
            if state in ("failing", "in progress") and why:
                print(f"      {why}")
        return 0
    if args.which == "all":
        numbers = [e.number for e in EXERCISES]
    else:
        try:
            numbers = [exercise(int(args.which)).number]
        except ValueError as err:
            parser.error(str(err) if args.which.isdigit() else f"'{args.which}' is not an exercise number or 'all'")
    for n in numbers:
        e = exercise(n)
        print(f"== exercise {n}: {e.title}")
        try:
            check(n, args.solutions, say=lambda line: print(f"  ok  {line}"))
        except NotImplementedError as err:
            found = re.match(r"exercise (\d+):", str(err))  # a stub of this exercise, or of an earlier one it uses
            where = exercise(int(found.group(1))).module if found else e.module
            print(f"  not started: {err} is still a stub (fill it in: demos/exercises/{where}.py)")
            return 1
        except Wrong as err:
            print("  WRONG  " + str(err).replace("\n", "\n         "))
            return 1
        print(f"  exercise {n} passes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
