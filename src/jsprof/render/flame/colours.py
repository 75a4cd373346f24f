"""The flame files' one colour rule: by script (a hue per script, hottest first) or by
function name, and a diff's colours by change; the page's viewer_tree.js repeats it."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

from .escape import clean

# Hues for resources, most time first: distinct, and light enough for dark labels.
HUES = (28, 205, 140, 275, 340, 50, 175, 0, 235, 100, 310, 75)


def _hash(s: str) -> int:
    return zlib.crc32(s.encode("utf-8", "replace"))


def resource_fill(hue: int, name: str) -> str:
    # Hue and lightness vary a little per function, within the resource's family, so
    # neighbouring frames stay distinguishable and one function keeps one colour.
    h = _hash(name)
    return f"hsl({hue - 7 + h % 15},{58 + (h >> 8) % 20}%,{62 + (h >> 16) % 15}%)"


def function_fill(name: str) -> str:
    # The classic warm palette: red to yellow, stable per name.
    h = _hash(name)
    return f"hsl({8 + h % 44},{70 + (h >> 8) % 20}%,{58 + (h >> 16) % 12}%)"


GREY = "hsl(220,8%,78%)"
NO_RESOURCE = "hsl(210,18%,72%)"


def fill_rule(color_by: str, hue_of: dict[str | None, int]) -> Callable[[Any], str]:
    """A function's fill in every view of the page (Flame, Time, Sandwich), by its script
    (`hue_of`: a script's hue, the drawn ones hottest first; a script not drawn gets the
    next hue when first asked) or by its name. Diff pages colour the Flame view's frames
    by change instead, and keep this rule in the other views."""

    memo: dict[Any, str] = {}  # a function's fill never changes once it has one

    def fill_of(fn: Any) -> str:
        got = memo.get(fn)
        if got is None:
            got = memo[fn] = _fill(fn)
        return got

    def _fill(fn: Any) -> str:
        name = clean(fn.label())
        if color_by == "function":
            return function_fill(name)
        if fn.resource is None and not fn.location():
            return GREY  # samples without JavaScript, as the report names them
        if fn.resource is None:
            return NO_RESOURCE
        if fn.resource not in hue_of:
            hue_of[fn.resource] = HUES[len(hue_of) % len(HUES)]
        return resource_fill(hue_of[fn.resource], name)

    fill_of.color_by = color_by  # type: ignore[attr-defined]  # (tree_index reads these)
    fill_of.hue_of = hue_of  # type: ignore[attr-defined]
    return fill_of


def signed_ms(ms: float) -> str:
    return f"{ms:+.1f} ms"


def diff_fill(d: float, scale: float) -> str:
    """White for no change, towards red for a larger share, blue for a smaller one."""
    t = min(abs(d) / scale, 1.0) if scale > 0 else 0.0
    light = 96 - 44 * t
    hue = 2 if d > 0 else 215
    return f"hsl({hue},{int(20 + 65 * t)}%,{light:.0f}%)"
