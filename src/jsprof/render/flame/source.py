"""The viewer's Source view block: per function, its self time per line and the text of
the lines shown, size-capped; the text comes from a reader the caller passes in, so this
reads no files."""

from __future__ import annotations

from collections.abc import Callable

from ...analysis.profile import FunctionKey, hot_lines
from ...analysis.source import SourceFile
from ...trace import Recording
from .escape import clean

# The source view embeds only what it shows: each function's own lines (or windows around
# its sampled lines when it is long), lines cut at SOURCE_LINE_CHARS, SOURCE_CHARS in all.
SOURCE_CHARS = 2_000_000
SOURCE_LINE_CHARS = 400
SOURCE_FN_LINES = 300
SOURCE_FUNCTIONS = 5_000
SOURCE_WINDOW = 6  # lines either side of a sampled line in a long function
# A line longer than SOURCE_LINE_CHARS (a minified script's: 30 kB, dozens of functions on
# it) is shown per function as a window of that many characters, starting SOURCE_LEAD
# before the function's column: its start would be some other function's text.
SOURCE_LEAD = 40


def source_model(
    rec: Recording,
    keys: list[FunctionKey],
    ftotal: list[float],
    track: str | None,
    read: Callable[[str], str | None] | None,
) -> dict:
    """The source view's data: per model function (index into `keys`), its self ms and
    samples per executing line as `report --by line` counts them (`hot_lines`), the line
    range shown, and the text of those lines where `read` (URL -> text or None) has it.
    `why` says why a function has no text: "noscript" (no script: a native or the
    engine's own frame), "nolocal" (its script is not a file here), "outside" (a local file
    the reader may not embed: outside the trace's and the current folder), "cap" (the size
    cap), or the reader's own `missing` word (the fleet's: "nomap", no source map of the
    release carries the text). A function's long lines are its own cuts (its 11th item:
    [line, first column, text, line length, marked column or 0]), not shared chunks."""
    lines = hot_lines(rec, track)
    rows: dict[FunctionKey, list[tuple[int, float, int]]] = {}
    total = 0.0
    if lines is not None:
        total = lines.total_ms
        st = lines.stats
        for k, m, n in zip(st.keys, st.self_ms.tolist(), st.self_samples.tolist(), strict=True):
            rows.setdefault(k.function, []).append((int(k.line), m, n))
    texts: dict[str, SourceFile | None] = {}
    kept: dict[str, dict[int, str]] = {}  # per file: line -> text
    # A reader with its own word for a missing text (the fleet's) lists every function of
    # a script, text or not: its traces have no line data, so the list is all there is.
    bare = getattr(read, "missing", None) is not None
    files: dict[str, int] = {}
    budget = SOURCE_CHARS
    out = []
    for f in sorted(range(len(keys)), key=lambda i: -ftotal[i]):
        key = keys[f]
        got = rows.get(key, [])
        if not got and (read is None or key.resource is None or not key.line):
            continue
        known = sorted(r for r in got if r[0] > 0)
        unk_ms = sum(r[1] for r in got if r[0] <= 0)
        unk_n = sum(r[2] for r in got if r[0] <= 0)
        sf = None
        why = ""
        if key.resource is None:
            why = "noscript"
        elif read is not None:
            if key.resource not in texts:
                text = read(key.resource)
                texts[key.resource] = None if text is None else SourceFile(text, key.resource)
            sf = texts[key.resource]
            if sf is None:
                # a local file the reader would not put in the page (outside the folders
                # the command points at)
                why = ("outside" if key.resource in getattr(read, "refused", ())
                       else getattr(read, "missing", "nolocal"))
        else:
            why = "nolocal"
        a = b = 0
        shown: list[int] = []
        cuts: list[list] = []
        if sf is not None and len(out) < SOURCE_FUNCTIONS:
            where = sf.function_span(key.line, key.column, bool(key.name))
            span = None if where is None else (where[0][0], where[1][0])
            a, b = span if span is not None else (key.line or known[0][0], key.line or 0)
            if known:
                a, b = min(a, known[0][0]), max(b, known[-1][0])
            if span is None and not known:
                b = a + 9
            b = min(b, len(sf.lines))
            if b - a + 1 <= SOURCE_FN_LINES:
                shown = list(range(a, b + 1))
            else:
                want = set(range(a, min(a + SOURCE_WINDOW, b) + 1))
                for ln, _, _ in known:
                    want.update(range(max(a, ln - SOURCE_WINDOW), min(b, ln + SOURCE_WINDOW) + 1))
                shown = sorted(want)[: SOURCE_FN_LINES * 4]
            have = kept.setdefault(key.resource, {})  # type: ignore[arg-type]
            long = {ln for ln in shown if len(sf.lines[ln - 1].rstrip("\r")) > SOURCE_LINE_CHARS}
            new = [ln for ln in shown if ln not in have and ln not in long]
            cost = sum(len(sf.lines[ln - 1]) + 4 for ln in new)
            cost += len(long) * (SOURCE_LINE_CHARS + 24)
            if cost > budget:
                why, shown = "cap", []
            else:
                budget -= cost
                for ln in new:
                    have[ln] = clean(sf.lines[ln - 1].rstrip("\r"))
                for ln in sorted(long):
                    t = sf.lines[ln - 1].rstrip("\r")
                    cuts.append(_cut(t, ln, key.line, key.column, where))
        if not got and not shown and not bare:
            continue
        if shown:
            fi = files.setdefault(key.resource, len(files))  # type: ignore[arg-type]
        else:
            fi = -1
            a = known[0][0] if known else 0
            b = known[-1][0] if known else 0
        out.append([
            f, fi, a, b,
            [r[0] for r in known], [round(r[1], 6) for r in known], [r[2] for r in known],
            round(unk_ms, 6), unk_n, why, cuts,
        ])
    chunks = []
    for url, fi in files.items():
        have = kept.get(url, {})
        run: list[str] = []
        first = prev = 0
        for ln in sorted(have):
            if run and ln != prev + 1:
                chunks.append([fi, first, run])
                run = []
            if not run:
                first = ln
            run.append(have[ln])
            prev = ln
        if run:
            chunks.append([fi, first, run])
    return {
        "lineData": lines is not None,
        # a source of traces with no line data at all says why itself (the fleet's uploads)
        **({"noLines": read.no_lines} if getattr(read, "no_lines", None) else {}),
        "total": total,
        "files": [clean(u) for u in files],
        "chunks": chunks,
        "fns": out,
    }


def _cut(
    text: str,
    ln: int,
    line: int | None,
    column: int | None,
    where: tuple[tuple[int, int], tuple[int, int]] | None,
) -> list:
    """A long line's window for one function: [ln, first column (1-based), text, the
    line's length, the frame's column on it or 0]. On the frame's line the window is
    around its column; on the function's first or last line (when the frame is not on
    it), around the function's start or end; on a line in between, its start."""
    mark = column if ln == line and column else 0
    if mark:
        at = mark
    elif where is not None and ln == where[0][0]:
        at = where[0][1]
    elif where is not None and ln == where[1][0]:
        at = max(1, where[1][1] - SOURCE_LINE_CHARS + 2 * SOURCE_LEAD)
    else:
        at = 1
    first = max(1, min(at - SOURCE_LEAD, len(text) - SOURCE_LINE_CHARS + 1))
    return [ln, first, clean(text[first - 1 : first - 1 + SOURCE_LINE_CHARS]), len(text), mark]
