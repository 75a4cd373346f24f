"""Source maps (v3): map frames' generated positions and names back to original sources.

A frame (name, resource, line, column) whose resource has a map is looked up at its
line/column: the mapping segment at or before that position gives the original source,
line and column, and the original name when the segment carries one (minifiers record
names at the identifier). Frames without a mapping stay as they are. A sample's executing
line (no column: see `_map_lines`) is mapped only when its whole generated line maps to one
line of the function's own original file, within the function (at or below its start, and
not past its end where the original source is at hand to parse); otherwise it becomes
unknown (NO_LINE), never a line of some other code on a minified line.

Finding and reading maps (and the original sources a map does not carry) is
`jsprof.sourcemap_files`: this module works on the data it is given.
Maps are data: decoded, never evaluated.
"""

from __future__ import annotations

import bisect
import functools
import os
import re
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ..errors import JsprofError
from ..names import MAX_TEXT_CHARS, FunctionNames, JsFunction, dialect_of
from ..trace import NO_LINE, NONE, ProfilerTrace, TraceBuilder, normalise_resource

MAX_MAP_BYTES = 256 << 20
_B64 = {
    c: i for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
}


class SourceMapError(JsprofError):
    pass


# ECMA-426: each VLQ value is a 32-bit signed integer. A larger one is no real map's, and
# sums of 60-bit values (as many as a map has) would wrap the numpy decoder's int64.
_MAX_VALUE = 1 << 31


def _vlq(segment: str, where: str) -> list[int]:
    out, value, shift = [], 0, 0
    for ch in segment:
        d = _B64.get(ch)
        if d is None:
            raise SourceMapError(f"{where}: invalid base64 VLQ character {ch!r}")
        value += (d & 31) << shift
        if d & 32:
            shift += 5
            continue
        if value >> 1 > _MAX_VALUE:
            raise SourceMapError(
                f"{where}: VLQ value {value >> 1} out of range (a source map's values are "
                "32-bit): the map is corrupt; rebuild it")
        out.append(-(value >> 1) if value & 1 else value >> 1)
        value, shift = 0, 0
    return out


def _decode_python(mappings: str, where: str) -> tuple[list, list]:
    """The mappings, one generated line at a time, in Python: the reference `_decode`
    keeps to, and what says exactly where a malformed map goes wrong."""
    all_cols: list[list[int]] = []
    all_segs: list[list[tuple[int, int, int, int]]] = []
    src = line = col = name = 0
    for gl, text in enumerate(mappings.split(";")):
        cols: list[int] = []
        segs: list[tuple[int, int, int, int]] = []
        gcol = 0
        for seg in text.split(","):
            if not seg:
                continue
            v = _vlq(seg, f"{where}: mappings line {gl + 1}")
            if not v:
                raise SourceMapError(f"{where}: mappings line {gl + 1}: unfinished VLQ {seg!r}")
            gcol += v[0]
            if len(v) >= 4:
                src += v[1]
                line += v[2]
                col += v[3]
                n = -1
                if len(v) >= 5:
                    name += v[4]
                    n = name
                cols.append(gcol)
                segs.append((src, line, col, n))
        order = sorted(range(len(cols)), key=cols.__getitem__)
        all_cols.append([cols[i] for i in order])
        all_segs.append([segs[i] for i in order])
    return all_cols, all_segs


_DIGIT = np.full(256, -1, np.int64)  # byte -> base64 digit; -2 ',' and -3 ';'; -1 other
for _i, _c in enumerate(_B64):
    _DIGIT[ord(_c)] = _i
_DIGIT[ord(",")], _DIGIT[ord(";")] = -2, -3
_MAX_DIGITS = 7  # of one value: 35 bits hold any 32-bit value and its sign bit


def _decode(mappings: str, where: str) -> tuple[Any, Any]:
    """`_decode_python`'s lines from whole-string numpy operations: a map's VLQ values
    decoded per character in Python were ~30 % of a source-mapped report of prettier
    (2.4 MB of map); each line's lists are made when a lookup first reads it. Anything
    irregular (a character outside base64, an unfinished value, a value over 32 bits)
    goes to `_decode_python`, which says where."""
    raw = mappings.encode("utf-8")
    d = _DIGIT[np.frombuffer(raw, np.uint8)]
    dig = d >= 0
    p = np.nonzero(dig)[0]
    dv = d[p]
    cont = (dv & 32) != 0
    after = dig[np.minimum(p + 1, len(d) - 1)] & (p + 1 < len(d))  # a digit follows
    if (d == -1).any() or (cont & ~after).any():
        return _decode_python(mappings, where)
    end = ~cont
    first = np.concatenate([[0], np.nonzero(end)[0][:-1] + 1]) if len(p) else p
    vid = np.cumsum(end) - end  # each digit's value
    k = np.arange(len(p)) - first[vid]
    if len(p) and k.max() >= _MAX_DIGITS:
        return _decode_python(mappings, where)
    raw_v = np.add.reduceat((dv & 31) << (5 * k), first) if len(p) else p
    if len(p) and (raw_v >> 1).max() > _MAX_VALUE:
        return _decode_python(mappings, where)
    values = np.where(raw_v & 1, -(raw_v >> 1), raw_v >> 1)
    vend = p[end]  # each value's last byte
    seps = np.cumsum(d < -1)
    lines = np.cumsum(d == -3)
    n_lines = int(lines[-1]) + 1 if len(d) else 1
    seg = seps[vend]  # each value's segment (values of one segment are adjacent)
    head = np.concatenate([[True], seg[1:] != seg[:-1]]) if len(seg) else seg.astype(bool)
    start = np.nonzero(head)[0]  # each segment's first value
    count = np.diff(np.concatenate([start, [len(seg)]]))
    gl = lines[vend[start]]
    # the generated column restarts at 0 on every line; the others run on across lines
    gsum = np.cumsum(values[start])
    line_start = np.searchsorted(gl, gl)  # each segment's line's first segment
    gcol = gsum - np.concatenate([[0], gsum])[line_start]
    mapped = count >= 4
    named = count >= 5

    def running(f: int, keep: np.ndarray) -> np.ndarray:
        delta = np.zeros(len(start), np.int64)
        delta[keep] = values[start[keep] + f]
        return np.cumsum(delta)

    src, oline, ocol, name = (running(1, mapped), running(2, mapped), running(3, mapped),
                              running(4, named))
    name = np.where(named, name, -1)
    keep = np.nonzero(mapped)[0]
    order = keep[np.lexsort((gcol[keep], gl[keep]))]
    cols = gcol[order]
    segs = np.stack([src[order], oline[order], ocol[order], name[order]], axis=1)
    bounds = np.searchsorted(gl[order], np.arange(n_lines + 1))
    return _Lines(cols, segs, bounds, tuples=False), _Lines(cols, segs, bounds, tuples=True)


class _Lines:
    """Per generated line a list (columns, or (source, line, column, name) tuples), made
    on first reading from the decoded columns."""

    def __init__(self, cols: np.ndarray, segs: np.ndarray, bounds: np.ndarray,
                 tuples: bool) -> None:
        self._cols, self._segs, self._bounds, self._tuples = cols, segs, bounds, tuples
        self._made: dict[int, list] = {}

    def __len__(self) -> int:
        return len(self._bounds) - 1

    def __getitem__(self, gl: int) -> list:
        got = self._made.get(gl)
        if got is None:
            a, b = int(self._bounds[gl]), int(self._bounds[gl + 1])
            got = self._made[gl] = (list(map(tuple, self._segs[a:b].tolist())) if self._tuples
                                    else self._cols[a:b].tolist())
        return got


class SourceMap:
    """One decoded v3 map: per generated line, sorted columns and their original position."""

    def __init__(self, doc: object, where: str, base_dir: str | None = None) -> None:
        if type(doc) is not dict or doc.get("version") != 3:
            raise SourceMapError(f"{where}: not a version 3 source map")
        if "sections" in doc:
            raise SourceMapError(f"{where}: indexed (sectioned) source maps are not supported")
        mappings = doc.get("mappings")
        if type(mappings) is not str:
            raise SourceMapError(f"{where}: mappings: missing or not a string")
        root = doc.get("sourceRoot") or ""
        srcs = doc.get("sources") or []
        names = doc.get("names") or []
        for key, v, want in (
            ("sourceRoot", root, str),
            ("sources", srcs, list),
            ("names", names, list),
        ):
            if type(v) is not want:
                raise SourceMapError(
                    f"{where}: {key}: expected {'a string' if want is str else 'an array'}"
                )
        self.sources = [root + s if type(s) is str else "" for s in srcs]
        content = doc.get("sourcesContent")
        self.contents: list[str | None] = [
            c if type(c) is str else None
            for c in (content if type(content) is list else [])
        ]
        self.names = [n if type(n) is str else "" for n in names]
        self.file = doc.get("file") if type(doc.get("file")) is str else None
        self.base_dir = base_dir
        self.read_source: Callable[[str], str | None] | None = None
        self._cols, self._segs = _decode(mappings, where)

    def line_of(self, line: int, from_column: int = 1) -> tuple[int, int] | None:
        """(source index, original line 1-based) that a generated line maps to as a whole:
        only when every mapping on it (at or after `from_column`, 1-based) points at one
        line of one source. A sample's line without its column cannot tell which of several
        mappings it was at (a minified bundle is one line of many functions), so a line
        whose mappings disagree maps to nothing rather than to the first of them."""
        gl = line - 1
        if not 0 <= gl < len(self._segs):
            return None
        i = bisect.bisect_left(self._cols[gl], from_column - 1)
        where = {(s, ln) for s, ln, _, _ in self._segs[gl][i:]}
        if len(where) != 1:
            return None
        s, ln = where.pop()
        return s, ln + 1

    def source_index(self, line: int, column: int) -> int | None:
        """The source index of the mapping at or before a 1-based generated position."""
        gl = line - 1
        if not 0 <= gl < len(self._cols):
            return None
        i = bisect.bisect_right(self._cols[gl], column - 1) - 1
        return self._segs[gl][i][0] if i >= 0 else None

    def lookup(
        self, line: int, column: int, named: bool = True
    ) -> tuple[str, int, int, str | None] | None:
        """1-based generated position -> (source, line, column 1-based, name or None).

        `named=False` is for frames without a name (top-level code, anonymous functions):
        their position is mapped as is, and no neighbouring name is borrowed.
        """
        gl = line - 1
        if not 0 <= gl < len(self._cols):
            return None
        cols = self._cols[gl]
        i = bisect.bisect_right(cols, column - 1) - 1
        if i < 0:
            return None
        j = self._function_segment(gl, i, column - 1) if named else i
        s, ln, c, n = self._segs[gl][j]
        if not 0 <= s < len(self.sources):
            return None
        src = self.source_url(s)
        name = self.names[n] if named and 0 <= n < len(self.names) else None
        return src, ln + 1, c + 1, name

    def source_url(self, s: int) -> str:
        src = self.sources[s]
        if self.base_dir and not re.match(r"^[a-z][a-z0-9+.-]*:", src):
            # spelled as engines spell scripts, so original sources match across runs
            src = normalise_resource(os.path.abspath(os.path.join(self.base_dir, src)))
        return src

    def source_text(self, s: int) -> str | None:
        """Source `s` as written: the map's `sourcesContent`, else what `read_source` (set
        by the loader, `jsprof.sourcemap_files`) gives for its URL. This module reads no
        files: a map built from data alone knows only its `sourcesContent`."""
        if s < len(self.contents) and self.contents[s] is not None:
            return self.contents[s]
        return None if self.read_source is None else self.read_source(self.source_url(s))

    def next_position(self, line: int, column: int) -> tuple[int, int, int] | None:
        """(source index, original line, column; 1-based) of the first mapping after a
        1-based generated position on its line: where a minifier gave a function's first
        character no mapping of its own, or an engine places it before that character
        (QuickJS: some arrows a token or two early), the next mapping is the function's."""
        gl = line - 1
        if not 0 <= gl < len(self._cols):
            return None
        i = bisect.bisect_right(self._cols[gl], column - 1)
        if i >= len(self._cols[gl]):
            return None
        s, ln, c, _ = self._segs[gl][i]
        return s, ln + 1, c + 1

    def _function_segment(self, gl: int, i: int, col0: int) -> int:
        """The segment naming the function whose position is col0 (segment i at/before it).

        Engines point at different tokens: V8 at the `(` of the parameters, which has no
        segment of its own, so the name is segment i itself; QuickJS at the `function`
        keyword (or the token just before it), which starts a segment, and the name
        follows within a couple of segments. Fall back to segment i.
        """
        cols, segs = self._cols[gl], self._segs[gl]
        if segs[i][3] >= 0:
            return i
        if cols[i] == col0:
            for j in (i + 1, i + 2):
                if j < len(segs) and cols[j] - col0 <= 16 and segs[j][3] >= 0:
                    return j
        return i


# What a note on a map that does not match its script tells the user to do (the fleet,
# whose maps are uploaded per release, says how to upload the right one instead).
MISMATCH_HINT = "give the .map built with this script"


def apply_to_trace(
    trace: ProfilerTrace, maps: dict[str, SourceMap], notes: list[str] | None = None,
    hint: str = MISMATCH_HINT,
) -> ProfilerTrace:
    """Frames mapped to original positions and names; stacks re-interned (two generated
    frames may map to one original frame), samples remapped through them.

    A mapped frame is named as V8 names the function at its original position in the
    original source (`jsprof.names`: `pp$8.parseStatement`, not the minified receiver's
    `f.parseStatement`) and placed where V8 places it, so a minified profile reads and
    diffs as one of the code the developer wrote. Where the source is not at hand (no
    `sourcesContent`, no local file) the map's own name at the position is taken. A map
    whose positions land outside every function of its sources is not the bundle's map
    (another build's): it is not applied, and `notes` gets one line saying so."""
    if not maps:
        return trace
    res = trace.resources
    names: dict[tuple[int, int], FunctionNames | None] = {}
    looked: list[tuple[SourceMap, tuple, int | None, JsFunction | None] | None] = []
    # resource -> named frames [in a function, in none, with no mapping, with no column,
    # with a mapping]
    tally: dict[str, list[int]] = {}
    for f in trace.frames:
        url = None if f.resource_id is None else res[f.resource_id]
        sm = maps.get(url) if url is not None else None
        hit = (
            sm.lookup(f.line, f.column or 1, named=bool(f.name))
            if sm is not None and f.line is not None
            else None
        )
        if sm is not None and f.name and not f.name.startswith(("(", "<")):
            counts = tally.setdefault(url, [0, 0, 0, 0, 0])
            counts[2] += hit is None
            counts[3] += f.column is None
            counts[4] += hit is not None
        if hit is None:
            looked.append(None)
            continue
        assert sm is not None and f.line is not None and url is not None
        source = sm.source_index(f.line, f.column or 1)
        fn = None
        # The script's own code (no name, at 1:1) and V8's own frames keep their names.
        top_level = not f.name and f.line == 1 and (f.column or 1) == 1
        if source is not None and not top_level and not f.name.startswith(("(", "<")):
            index = _function_names(sm, source, names)
            if index is not None:
                # The function is the one whose head holds the mapping at or before the
                # frame's position (QuickJS: the `function` keyword, which maps to the
                # original's); the map's name heuristic (a name a segment or two on) is
                # only a fallback: in a minified body that may be a label or a variable.
                plain = sm.lookup(f.line, f.column or 1, named=False) if f.name else hit
                fn = None if plain is None else index.at(plain[1], plain[2])
                if fn is not None:
                    hit = plain
                elif plain is not hit:
                    fn = index.at(hit[1], hit[2])
                if fn is None:
                    fn = _function_after(sm, index, source, f.line, f.column or 1)
                if f.name:
                    tally[url][fn is None] += 1
        looked.append((sm, hit, source, fn))
    # A script whose named frames mostly land outside every function is not the map's.
    # Or whose named frames the map has no mapping for at all: a map of another build that
    # ends before the script's functions begin (a one-line bundle's map for a bundle whose
    # code starts below a license banner) mapped nothing and said nothing.
    wrong = {url for url, (inside, outside, unmapped, _, mapped) in tally.items()
             if outside > inside or (unmapped and not mapped)}
    if notes is not None:
        # One map given for every script (no `file` field) matches one of them: only a map
        # that matches none of the scripts it was tried on is said, at its busiest script.
        for sm in {id(m): m for m in maps.values()}.values():
            tried = [u for u, m in maps.items() if m is sm and u in tally]
            if tried and all(u in wrong for u in tried):
                url = max(tried, key=lambda u: (sum(tally[u]), u))
                inside, outside, unmapped, no_column, _ = tally[url]
                named = inside + outside + unmapped
                if no_column * 2 > named:
                    # a trace format that keeps lines only (pprof): a map places a position
                    # by its column, so the map is not the one at fault
                    notes.append(
                        f"{url}: the trace gives {no_column} of its {named} "
                        "functions a line but no column (pprof keeps none), and a source map "
                        "needs both; shown as recorded: apply the map before converting "
                        "(jsprof convert IN OUT --sourcemap)"
                    )
                    continue
                why = (f"{outside} of {inside + outside} functions map into no function "
                       "of its original sources" if inside + outside else
                       f"it has no mapping at any of its {unmapped} functions' positions")
                notes.append(
                    f"{url}: its source map does not match it ({why}); shown as recorded: "
                    f"{hint}"
                )
    b = TraceBuilder()
    new_frame: list[int] = []
    frame_map: list[_MappedFrame | None] = []
    for f, got in zip(trace.frames, looked, strict=True):
        url = None if f.resource_id is None else res[f.resource_id]
        if got is None or url in wrong:
            frame_map.append(None)
            rid = None if url is None else b.resource_id(url)
            new_frame.append(b.frame_id(f.name, rid, f.line, f.column))
            continue
        sm, (src, line, col, name), source, fn = got
        assert f.line is not None
        if fn is not None:
            name, line, col = fn.name, fn.v8_line, fn.v8_column
        else:
            name = name or f.name
        frame_map.append(
            _MappedFrame(
                sm, f.line, f.column or 1, source, line, col, bool(name or f.name),
                None if fn is None else fn.line, None if fn is None else fn.end_line or None,
            )
        )
        new_frame.append(b.frame_id(name, b.resource_id(src), line, col))
    new_stack = b.map_stacks(trace, new_frame)
    return trace.with_tables(
        b.build(),
        sample_stack=new_stack[trace.sample_stack],
        sample_line=_map_lines(trace, frame_map),
    )


def _function_after(
    sm: SourceMap, index: FunctionNames, source: int, line: int, column: int
) -> JsFunction | None:
    """The function whose head holds the first mapping after a frame's position, when
    the mapping at or before it is in no function's head (see `SourceMap.next_position`).
    QuickJS places some arrows a token or two before their `(` (`h=(t)=>...` at the `h`,
    `a,(e,n)=>...` at the `a`): the next mapping is then the arrow's own first
    character. A mapping at the first character of any other function is one nested in
    this one's body (`function(){return function(){}}`), not this one."""
    nxt = sm.next_position(line, column)
    if nxt is None or nxt[0] != source:
        return None
    fn = index.at(nxt[1], nxt[2])
    if fn is None:
        return None
    arrow = (fn.v8_line, fn.v8_column) == (fn.line, fn.column)
    if (fn.line, fn.column) == (nxt[1], nxt[2]) and not arrow:
        return None
    return fn


def _function_names(
    sm: SourceMap, source: int, cache: dict[tuple[int, int], FunctionNames | None]
) -> FunctionNames | None:
    """The functions of one original source with their V8 names, parsed once per map and
    source; None when its text is not at hand."""
    key = (id(sm), source)
    if key not in cache:
        text = sm.source_text(source)
        ok = text is not None and len(text) <= MAX_TEXT_CHARS
        dialect = dialect_of(sm.sources[source]) if source < len(sm.sources) else "javascript"
        cache[key] = FunctionNames(text, dialect) if ok else None  # type: ignore[arg-type]
    return cache[key]


class _MappedFrame(NamedTuple):
    """A frame the map moved: its map, generated start, and original source and position."""

    map: SourceMap
    line: int  # generated, 1-based
    column: int
    source: int | None  # index into map.sources
    original_line: int
    original_column: int
    named: bool
    function_line: int | None = None  # where the function starts, when its source is at hand
    function_end: int | None = None  # and ends


_FUNCTION_NODES = frozenset(
    {
        "function_declaration",
        "function_expression",
        "function",
        "arrow_function",
        "method_definition",
        "generator_function_declaration",
        "generator_function",
    }
)


def _function_end(m: _MappedFrame, cache: dict) -> int | None:
    """The last original line of the function that starts at `m`'s original position,
    from its source text (tree-sitter); None when the text is not at hand, the position
    is in no function (top-level code) or the function does not parse cleanly."""
    if m.source is None:
        return None
    key = (id(m.map), m.source)
    if key not in cache:
        text = m.map.source_text(m.source)
        cache[key] = None if text is None else (text.split("\n"), _parse(text))
    got = cache[key]
    if got is None or got[1] is None:
        return None
    lines, tree = got
    row = m.original_line - 1
    if row >= len(lines):
        return None
    # tree-sitter counts columns in bytes; a map's are characters of the line
    col = len(lines[row][: m.original_column - 1].encode("utf-8"))
    node = tree.root_node.descendant_for_point_range((row, col), (row, col))
    # the `function` keyword is a token whose type is `function` too (the grammar's old
    # name for a function expression): only a named node is the function itself
    while node is not None and not (node.is_named and node.type in _FUNCTION_NODES):
        node = node.parent
    if node is None or node.has_error:
        return None
    if not m.named and tuple(node.start_point) == (row, col):
        # A nameless frame at a function's first character may be the script's own code
        # (top-level frames start at 1:1, where a bundle's first function starts too).
        return None
    return int(node.end_point.row) + 1


@functools.cache
def _js_parser() -> Any:
    try:
        import tree_sitter
        import tree_sitter_javascript
    except ImportError:  # pragma: no cover - dependencies of the package
        return None
    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_javascript.language()))


def _parse(text: str) -> Any:
    parser = _js_parser()
    return None if parser is None else parser.parse(text.encode("utf-8"))


def _original_line(m: _MappedFrame, line: int, end: int | None) -> int:
    """A sample's generated line in frame `m` -> its original line, NO_LINE when the
    position is not known precisely enough: the line's mappings (from the function's own
    start, on its first line) must all agree, and the line must lie in the function's own
    original file and range: at or below its start, and at or above its `end` when the
    source is at hand to say where it ends (inlined code of another function would
    otherwise put it there)."""
    got = m.map.line_of(line, m.column if line == m.line else 1)
    if got is None:
        return NO_LINE
    source, original = got
    start = m.original_line if m.function_line is None else m.function_line
    if source != m.source or original < start:
        return NO_LINE
    if end is not None and original > end:
        return NO_LINE
    return original


def _map_lines(trace: ProfilerTrace, frame_map: list[_MappedFrame | None]) -> np.ndarray | None:
    """Per-sample executing lines of mapped leaf frames -> original lines (NO_LINE where
    unknown: see `_original_line`). The trace holds no column per sample (V8's position
    ticks are per line; QuickJS's sampler keeps lines), so only whole-line mappings count."""
    lines = trace.sample_line
    if lines is None:
        return None
    out = lines.copy()
    has = (trace.sample_stack != NONE) & (lines != NO_LINE)
    if not has.any():
        return out
    leaf = np.full(len(lines), -1, np.int64)
    leaf[has] = trace.stack_frame[trace.sample_stack[has]]
    parsed: dict = {}
    for f in np.unique(leaf[has]).tolist():
        m = frame_map[f]
        if m is None:
            continue
        sel = leaf == f
        end = m.function_end if m.function_line is not None else _function_end(m, parsed)
        for ln in np.unique(lines[sel]).tolist():
            out[sel & (lines == ln)] = _original_line(m, ln, end)
    return out
