"""argparse value types shared by every command's parser (`cli.py`, `serve/cli.py`,
`fleet/cli.py`): one wording for a bad number everywhere. Imports nothing heavy."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def int_at_least(low: int) -> Callable[[str], int]:
    """A whole number >= `low`, or argparse's one-line error naming what was given."""

    def parse(s: str) -> int:
        try:
            v = int(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {s!r}") from None
        if v < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {v}")
        return v

    return parse


positive_int = int_at_least(1)
nonneg_int = int_at_least(0)


def nonneg_float(s: str) -> float:
    """A finite number >= 0 (ms, seconds, percentage points), or argparse's one-line error
    naming what was given (argparse's own says "invalid float value")."""
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {s!r}") from None
    if not v >= 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {s}")
    return v


def path(s: str) -> str:
    """A file or folder name as given. An empty one (`""`: what an unset shell variable
    gives) names nothing: argparse's one-line error says so, naming the argument, where
    the file's check would say `: no such file` about a name that cannot be seen."""
    if s == "":
        raise argparse.ArgumentTypeError("the path is empty (''); give a file or folder name")
    return s
