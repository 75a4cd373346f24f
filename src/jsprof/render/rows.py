"""The rows of the function table as plain data (no rich): `jsprof record`'s short summary
prints them without importing rich when stderr is not a terminal."""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote, urlparse

# numpy-free: `jsprof record --engine node` labels its summary's rows with key_label
from ..traceparts import FunctionKey, GapCapping, LineKey

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..analysis.profile import Summary


def _pct(x: float, total: float) -> float:
    return 100.0 * x / total if total > 0 else 0.0


def key_label(key: Any) -> tuple[str, str]:
    """(what, where) for a function, resource or line key."""
    if isinstance(key, LineKey):
        if not key.function.resource:
            # a native (V8's `RegExp: ...`) has neither: "(unknown) (line unknown)" said it twice
            return key.function.label(), "(unknown)"
        where = key.function.resource
        if not key.line:
            return key.function.label(), f"{where} (line unknown)"
        return key.function.label(), f"{where}:{key.line}"
    if isinstance(key, FunctionKey):
        return key.label(), key.location()
    return (key or "(no resource)"), ""


def short_location(where: str, cwd: str | None = None) -> str:
    """A `file://` URL or absolute path under the current directory, relative to it
    (`file:///home/me/app/src/a.js:3:5` -> `src/a.js:3:5` in /home/me/app); else as is."""
    path = where
    if where.startswith("file://"):
        path = unquote(urlparse(where).path)
    if not path.startswith("/"):
        return where
    cwd = cwd if cwd is not None else os.getcwd()
    prefix = cwd.rstrip("/") + "/"
    return path[len(prefix) :] if path.startswith(prefix) else path


def summary_rows(summary: Summary, top: int | None, sort: str = "self") -> list[dict]:
    """Rows for the table and for --json, largest first by `sort`: the keys and the
    no-JavaScript rows together (idle time is ranked and counted like any function).
    recorded.top_rows gives the record summary's rows (name, location, self_ms, self_pct)
    as this does, without numpy: a change here changes there."""
    st = summary.stats
    total = summary.total_ms
    rows = []
    order = st.order(sort)
    if top is not None:
        # Only the first `top` keys can be among the first `top` rows (the no-JavaScript
        # rows are few and all kept): a tsc profile has thousands of functions, and labelling
        # each was most of `jsprof record`'s summary (25 of 40 ms, measured).
        order = order[: max(top, 0)]
    for i in order.tolist():
        what, where = key_label(st.keys[i])
        row = {
            "name": what,
            "location": where,
            "self_ms": round(float(st.self_ms[i]), 3),
            "total_ms": round(float(st.total_ms[i]), 3),
            "self_pct": round(_pct(float(st.self_ms[i]), total), 2),
            "total_pct": round(_pct(float(st.total_ms[i]), total), 2),
            "self_samples": int(st.self_samples[i]),
            "total_samples": int(st.total_samples[i]),
        }
        key = st.keys[i]
        if isinstance(key, FunctionKey):
            row.update(resource=key.resource, line=key.line, column=key.column)
        elif isinstance(key, LineKey):
            row.update(resource=key.function.resource, line=key.line or None)
        rows.append(row)
    for r in summary.no_js:
        rows.append(
            {
                "name": r.label,
                "location": "",
                "self_ms": round(r.ms, 3),
                "total_ms": round(r.ms, 3),
                "self_pct": round(_pct(r.ms, total), 2),
                "total_pct": round(_pct(r.ms, total), 2),
                "self_samples": r.samples,
                "total_samples": r.samples,
            }
        )
    key = "self_ms" if sort == "self" else "total_ms"
    rows.sort(key=lambda r: -r[key])  # stable: equal shares keep the analysis's order
    return rows if top is None else rows[:top]


# ---- how wide a text table may be (every command's text tables: one rule) -------------------

# Text output that is not a terminal (a pipe, a CI log, a file) is not cut: whoever reads it
# there (grep, a log, a diff of two reports) needs names whole, and no terminal wraps it
# (#36: piped `fleet top` printed `(anonymo…ge.js:1)`). On a terminal, tables fit its
# columns; `--wide` prints every name and location whole there too.
ELLIPSIS = "…"
# The narrowest a name or location column is cut to, however narrow the terminal.
MIN_ELASTIC = 12
# Between two columns of a table (rich pads each cell by one on either side, not the edges).
COLUMN_GAP = 2


def output_width(terminal_columns: int | None, wide: bool = False) -> int | None:
    """The width text tables are fitted to: the terminal's columns; no limit when the
    output is no terminal (`terminal_columns` None) or with `wide`."""
    if wide or not terminal_columns:
        return None
    return terminal_columns


def wrap_to(text: str, width: int | None) -> list[str]:
    """`text` as lines of at most `width` columns, broken after its `, ` and `; ` where
    those parts fit (so "3 page loads" stays whole), else at spaces (a word longer than the
    width is cut); one line when no limit applies. For the lines around a table (titles,
    footers), which `output_width` bounds as it bounds the table."""
    if width is None or cell_len(text) <= width:
        return [text]
    import re
    import textwrap

    width = max(width, 1)
    lines: list[str] = []
    line = ""
    for part in re.split(r"(?<=[,;]) ", text):
        joined = f"{line} {part}" if line else part
        if cell_len(joined) <= width:
            line = joined
            continue
        if line:
            lines.append(line)
        if cell_len(part) <= width:
            line = part
        else:  # a part too long for a line of its own: broken at spaces
            *whole, line = textwrap.wrap(part, width, break_on_hyphens=False) or [""]
            lines.extend(whole)
    lines.append(line)
    return lines


def cell_len(text: str) -> int:
    """Columns `text` takes in a terminal: wide (East Asian) characters two, combining
    marks none."""
    if text.isascii():
        return len(text)
    n = 0
    for ch in text:
        if unicodedata.combining(ch):
            continue
        n += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return n


def _take(text: str, width: int, from_end: bool) -> str:
    """The longest start (or end) of `text` that fits in `width` columns."""
    out = []
    used = 0
    for ch in reversed(text) if from_end else text:
        w = cell_len(ch)
        if used + w > width:
            break
        out.append(ch)
        used += w
    return "".join(reversed(out) if from_end else out)


def elide_middle(text: str, width: int, keep_end: float = 0.5) -> str:
    """`text` cut to `width` columns by replacing its middle with `…`, so that both its
    start and its end stay readable; `keep_end` is the share of the room its end gets
    (LOCATION_END for a location, whose end is the file name, line and column)."""
    if cell_len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    tail = _take(text, int((width - 1) * keep_end), True)
    # the start gets what the end left (a wide character may not have fitted there)
    return _take(text, width - 1 - cell_len(tail), False) + ELLIPSIS + tail


# A location keeps more of its end: `http://127.0…/page.html?v=2:14:18`.
LOCATION_END = 0.7


def elide_location(text: str, width: int) -> str:
    """A location (`URL-or-path:line:column`, or a resource) cut to `width` columns: as
    `elide_middle` with LOCATION_END, but its file name and position (what follows the
    last `/`) stay whole whenever they fit: a narrow column (`fleet top` beside six number
    columns) otherwise kept `http:….html:20:17`, neither the host nor the file."""
    if cell_len(text) <= width or width <= 1:
        return elide_middle(text, width, LOCATION_END)
    name = text[text.rfind("/") + 1 :]
    need = cell_len(name)
    if not name or need > width - 1 or need <= int((width - 1) * LOCATION_END):
        return elide_middle(text, width, LOCATION_END)
    room = width - 1 - need
    # a start of a character or two says nothing (`h…page.html:3`): then the name alone
    head = _take(text, room, False) if room >= 4 else ""
    return head + ELLIPSIS + name


def fit_widths(natural: Sequence[int], available: int, minimum: int = MIN_ELASTIC) -> list[int]:
    """Widths for the columns that may be elided (names, locations), sharing `available`
    columns: each keeps its natural width when all fit; otherwise the narrow ones keep
    theirs and the wide ones share the rest equally, none below `minimum` (or its own
    natural width)."""
    if sum(natural) <= available:
        return list(natural)
    out = [0] * len(natural)
    left = available
    todo = sorted(range(len(natural)), key=lambda i: natural[i])
    for k, i in enumerate(todo):
        share = left // (len(todo) - k)
        out[i] = min(natural[i], max(share, minimum))
        left -= out[i]
    return out


def elastic_widths(
    rows: Sequence[Sequence[str]],
    headers: Sequence[str],
    elastic: Sequence[int],
    width: int | None,
    gap: int = COLUMN_GAP,
) -> dict[int, int] | None:
    """How wide each elastic column (index into a row) may be for every line of a table of
    `rows` (text cells as printed) to fit `width`; None when no limit applies."""
    if width is None:
        return None
    n = len(headers)
    natural = [max([cell_len(h) for h in (headers[i],)] + [cell_len(r[i]) for r in rows])
               for i in range(n)]
    fixed = sum(natural[i] for i in range(n) if i not in elastic) + gap * (n - 1)
    got = fit_widths([natural[i] for i in elastic], width - fixed)
    # a header is never elided: a column is at least as wide as its header
    return {i: max(w, cell_len(headers[i])) for i, w in zip(elastic, got, strict=True)}


def elide_cells(
    line: list[str], fit: dict[int, int] | None, ends: dict[int, float] | None = None
) -> list[str]:
    """`line` with each elastic cell (`fit`'s columns) elided in the middle to its width;
    `ends` gives a column's `keep_end` (LOCATION_END for locations: `elide_location`; 0.5
    otherwise). As is when no limit applies (`fit` None)."""
    if not fit:
        return line
    ends = ends or {}

    def cut(c: str, i: int) -> str:
        keep = ends.get(i, 0.5)
        return elide_location(c, fit[i]) if keep == LOCATION_END else elide_middle(c, fit[i], keep)

    return [cut(c, i) if i in fit else c for i, c in enumerate(line)]


def name_and_location(
    pairs: Sequence[tuple[str, str]],
    headers: tuple[str, str],
    room: int | None,
    gap: int = COLUMN_GAP,
) -> tuple[str, list[tuple[str, str]]]:
    """A function column and its location column drawn as one column `room` wide (None:
    no limit), so that a row with no location (`(garbage collector)`, `(idle)`) gives its
    name the location's room too. The rows that have a location share the room as
    `fit_widths` shares it (their locations stay aligned); the names of the others are
    cut only to the whole room. Returns the header text and, per row, (the name, padded
    where a location follows it, the location), each elided in the middle to fit."""
    located = [(n, loc) for n, loc in pairs if loc]
    nat_n = max([cell_len(headers[0])] + [cell_len(n) for n, _ in located])
    nat_l = max([cell_len(headers[1])] + [cell_len(loc) for _, loc in located])
    if room is None:
        wn, wl = nat_n, nat_l
    else:
        wn, wl = fit_widths([nat_n, nat_l], max(room - gap, 0))
        # a header is never elided
        wn, wl = max(wn, cell_len(headers[0])), max(wl, cell_len(headers[1]))
    whole = wn + gap + wl if room is None else max(room, wn + gap + wl)

    def pad(text: str, width: int) -> str:
        return text + " " * (width - cell_len(text))

    out = []
    for n, loc in pairs:
        if loc:
            out.append((pad(elide_middle(n, wn), wn + gap), elide_location(loc, wl)))
        else:
            out.append((n if room is None else elide_middle(n, whole), ""))
    return pad(headers[0], wn + gap) + headers[1], out


def room_left(
    rows: Sequence[Sequence[str]],
    headers: Sequence[str],
    width: int | None,
    more: int,
    gap: int = COLUMN_GAP,
) -> int | None:
    """The columns left of `width` beside the fixed columns of `rows` (text cells as
    printed, under `headers`) for `more` columns after them; None when no limit applies."""
    if width is None:
        return None
    n = len(headers)
    natural = sum(max([cell_len(headers[i])] + [cell_len(r[i]) for r in rows]) for i in range(n))
    return width - natural - gap * (n + more - 1)


def lost_note(lost: float, capping: Sequence[GapCapping] = ()) -> str:
    """` (+1234.5 ms lost in ...)` when a gap was capped: with `capping` (the tracks' own,
    `trace.gap_capping`) which cap applied, to how many gaps, and why; without it (a fleet
    query's merged total) the rule."""
    from ..traceparts import GAP_CAP_INTERVALS, GAP_CAP_MIN_MS
    from ..words import plural

    if not lost > 0:
        return ""
    if not capping:
        return (f" (+{lost:.1f} ms lost in gaps over {GAP_CAP_INTERVALS:g} intervals (at least "
                f"{GAP_CAP_MIN_MS:g} ms), not counted)")
    n = sum(c.gaps for c in capping)
    rules = []
    for c in capping:
        if c.floor:
            rule = (f"{_interval(c.cap_ms)} ms (the floor; {GAP_CAP_INTERVALS:g} x the "
                    f"{_interval(c.base_ms)} ms interval is "
                    f"{_interval(GAP_CAP_INTERVALS * c.base_ms)} ms)")
        else:
            rule = (f"{_interval(c.cap_ms)} ms ({GAP_CAP_INTERVALS:g} x the "
                    f"{_interval(c.base_ms)} ms interval)")
        if rule not in rules:
            rules.append(rule)
    return (f" (+{lost:.1f} ms lost in {plural(n, 'gap')} between samples longer than the cap "
            f"of {'; '.join(rules)}: a sample counts at most the cap, as a gap that long is "
            "time the sampler did not run, e.g. a busy machine or a suspended process)")


def _interval(ms: float) -> str:
    return f"{ms:.3g}" if ms < 100 else f"{ms:.0f}"
