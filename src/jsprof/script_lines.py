"""Where each line of a release's script starts: what turns a long animation frame's
script entry (`sourceCharPosition`, a character offset into the script, not a line) into
a line and column that the release's source map can map.

`jsprof fleet sourcemaps upload` reads the script beside each map (the map's `file`, else
the map's name without `.map`) and puts its line starts into the map as `x_jsprof_lineStarts`
(an `x_` field: source map readers ignore it), so the index travels with the map to a
collector (`upload --url`) as its sources do; `store_map` keeps it beside the stored map as
`<script>.lines` (JSON: an array of offsets), and the compactor reads it there for each
upload's release. Offsets count UTF-16 code units and lines end at `\\n`, `\\r`, `\\r\\n`,
U+2028 and U+2029, as V8 counts a script's positions and lines (and a source map's columns).
"""

from __future__ import annotations

import os
import re
from bisect import bisect_right
from collections.abc import Callable, Sequence
from pathlib import Path

KEY = "x_jsprof_lineStarts"
MAPS_DIR = "sourcemaps"  # <store>/sourcemaps/rkey=K/: a release's maps (fleet/sourcemaps.py)
SUFFIX = ".lines"
MAX_LINES = 5_000_000
_TERMINATOR = re.compile("\r\n|[\n\r\u2028\u2029]")


def line_starts(text: str) -> list[int]:
    """The UTF-16 offset at which each line of `text` starts (the first is 0)."""
    starts = [0]
    if text.isascii():
        starts += [m.end() for m in _TERMINATOR.finditer(text)]
        return starts
    # A character outside the BMP is two UTF-16 code units: count them up to each end.
    units = 0
    last = 0
    for m in _TERMINATOR.finditer(text):
        seg = text[last:m.end()]
        units += len(seg) + sum(1 for c in seg if ord(c) > 0xFFFF)
        last = m.end()
        starts.append(units)
    return starts


def check(starts: object) -> list[int] | None:
    """`starts` if it is a line index (ints from 0, increasing, at most MAX_LINES), else None
    (data from a file or a request: never trusted)."""
    if type(starts) is not list or not starts or len(starts) > MAX_LINES:
        return None
    if any(type(s) is not int for s in starts) or starts[0] != 0:
        return None
    if any(b <= a for a, b in zip(starts, starts[1:], strict=False)):
        return None
    return starts


def position(starts: Sequence[int], offset: object) -> tuple[int, int] | None:
    """(line, column), both 1-based, of a 0-based character offset; None when it is no
    offset (LoAF's -1: not known)."""
    if type(offset) not in (int, float) or not offset >= 0 or offset != int(offset):
        return None
    o = int(offset)
    i = bisect_right(starts, o) - 1
    return i + 1, o - starts[i] + 1


def script_base(url: str) -> str:
    """A script's basename as the stored maps are named (`app.min.js` of its URL)."""
    return os.path.basename(url.split("?", 1)[0].split("#", 1)[0])


def write(release_dir: Path, map_name: str, starts: list[int] | None) -> None:
    """Keep `starts` beside the stored map `map_name` (`<script>.map`); None removes an
    index an earlier upload of that map left (it would be another build's)."""
    from .io import atomic_write

    p = release_dir / (map_name[: -len(".map")] + SUFFIX)
    if starts is None:
        p.unlink(missing_ok=True)
        return
    import orjson

    atomic_write(p, orjson.dumps(starts))


def reader(release_dir: Path) -> Callable[[str], list[int] | None]:
    """A script URL -> its stored line starts (None: no index for it), read once each."""
    cache: dict[str, list[int] | None] = {}

    def lines(url: str) -> list[int] | None:
        base = script_base(url)
        if base not in cache:
            got = None
            p = release_dir / (base + SUFFIX)
            if base and p.is_file():
                import orjson

                try:
                    got = check(orjson.loads(p.read_bytes()))
                except (OSError, orjson.JSONDecodeError):
                    got = None
            cache[base] = got
        return cache[base]

    return lines


def for_store(store_path: str | os.PathLike) -> Callable[[str], Callable[[str], list[int] | None]]:
    """A release key -> its scripts' line index reader (`reader`), made once per release."""
    made: dict[str, Callable[[str], list[int] | None]] = {}

    def of(rkey: str) -> Callable[[str], list[int] | None]:
        if rkey not in made:
            made[rkey] = reader(Path(store_path) / MAPS_DIR / f"rkey={rkey}")
        return made[rkey]

    return of
