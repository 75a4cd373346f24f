"""The jsprof format's validating reader: a parsed document -> Recording, checking every
field and naming the first bad one (where, index, what is wrong), and the format's keys and
limits. Below both `jsprof.py` (the format: reading, writing, sniffing) and
`_jsprof_typed.py` (the fast typed path, which falls back here and builds its Recording
with `_recording`), so neither imports the other's module in a circle.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from operator import itemgetter
from typing import Any

import numpy as np

from ..errors import ErrorAt, TraceFormatError, shown
from ..meta import normalise as normalise_meta
from ..trace import (
    MARKER_CODE,
    MARKERS,
    MAX_MS,
    MAX_SAMPLES,
    NONE,
    SPAN_KIND_CODE,
    SPAN_KINDS,
    ProfilerFrame,
    ProfilerTrace,
    Recording,
    Spans,
    Track,
    step_back,
)
from ._json import type_name
from ._jsprof_write import FORMAT_KEY, FORMAT_VERSION  # noqa: F401 - the format's keys
from ._jsprof_write import MARKER_JSON as _MARKER_JSON  # noqa: F401 - read by _jsprof_typed

MAX_TABLE_ENTRIES = 2**31 - 1  # ids are int32 columns
MAX_POSITION = 2**31 - 1  # lines and columns: 32-bit in every engine and writer
MAX_META_DEPTH = 32  # free-form meta is for small facts, not documents
# Stands for an absent optional id while columns are pulled out; far outside int32, so an
# explicit -1 in a file stays distinguishable from "key absent".
_ABSENT = -(2**40)
# The spec's marker strings as JSON text, by code: what the C reader and writer match.


def is_profiler_trace(doc: Any) -> bool:
    """Ours, or meant as a ProfilerTrace: validation then names whatever is missing."""
    if type(doc) is not dict:
        return False
    tables = sum(k in doc for k in ("resources", "frames", "stacks", "samples"))
    return FORMAT_KEY in doc or tables >= 2


_Ctx = ErrorAt  # `ctx.error(where, problem)`: where we are, for messages


def _is_int(v: Any) -> bool:
    return type(v) is int


def _table(ctx: _Ctx, doc: dict, key: str) -> list:
    if key not in doc:
        raise ctx.error(key, "missing; a ProfilerTrace needs resources, frames, stacks and samples")
    table = doc[key]
    if type(table) is not list:
        raise ctx.error(key, f"expected an array, got {type_name(table)}")
    if len(table) > MAX_TABLE_ENTRIES:
        raise ctx.error(key, f"{len(table)} entries exceed the limit of {MAX_TABLE_ENTRIES}")
    return table


def _opt_pos_int(ctx: _Ctx, obj: dict, where: str, key: str) -> int | None:
    v = obj.get(key)
    if v is None:
        if key in obj:
            raise ctx.error(f"{where}.{key}", "is null; omit the key instead")
        return None
    if not _is_int(v):
        raise ctx.error(f"{where}.{key}", f"expected an integer, got {type_name(v)}")
    if v < 1:
        raise ctx.error(f"{where}.{key}", f"is {v}; lines and columns are 1-based")
    if v > MAX_POSITION:
        raise ctx.error(f"{where}.{key}", f"is {v}; lines and columns end at {MAX_POSITION}")
    return v


def _read_resources(ctx: _Ctx, doc: dict) -> list[str]:
    resources = _table(ctx, doc, "resources")
    for i, r in enumerate(resources):
        if type(r) is not str:
            raise ctx.error(f"resources[{i}]", f"expected a string, got {type_name(r)}")
    return resources


def _read_frames(ctx: _Ctx, doc: dict, n_resources: int) -> list[ProfilerFrame]:
    frames = _table(ctx, doc, "frames")
    out = []
    for i, f in enumerate(frames):
        where = f"frames[{i}]"
        if type(f) is not dict:
            raise ctx.error(where, f"expected an object, got {type_name(f)}")
        name = f.get("name")
        if type(name) is not str:
            problem = "missing" if "name" not in f else f"expected a string, got {type_name(name)}"
            raise ctx.error(f"{where}.name", problem)
        rid = f.get("resourceId")
        if rid is not None:
            if not _is_int(rid):
                raise ctx.error(
                    f"{where}.resourceId", f"expected an integer, got {type_name(rid)}"
                )
            if not 0 <= rid < n_resources:
                raise ctx.error(
                    f"{where}.resourceId", f"{rid} is out of range (resources has {n_resources})"
                )
        elif "resourceId" in f:
            raise ctx.error(f"{where}.resourceId", "is null; omit the key instead")
        line = _opt_pos_int(ctx, f, where, "line")
        column = _opt_pos_int(ctx, f, where, "column")
        out.append(ProfilerFrame(name, rid, line, column))
    return out


def _int_column(values: list, what: str) -> np.ndarray | None:
    """A list of ints as int64, or None when any entry is not a plain integer."""
    try:
        arr = np.array(values)
    except (ValueError, TypeError, OverflowError):
        return None
    if len(values) == 0:
        return np.zeros(0, np.int64)
    if arr.dtype.kind != "i" or _has_bool(values):
        return None
    return arr


def _has_bool(values: list) -> bool:
    """numpy takes true for 1; JSON's booleans are neither numbers nor ids."""
    return any(type(v) is bool for v in values)


def _slow_id_error(ctx: _Ctx, table: list, name: str, key: str, required: bool) -> TraceFormatError:
    """Walk a table to find the first entry whose `key` is not an integer."""
    for i, s in enumerate(table):
        where = f"{name}[{i}]"
        if type(s) is not dict:
            return ctx.error(where, f"expected an object, got {type_name(s)}")
        if key not in s:
            if required:
                return ctx.error(f"{where}.{key}", "missing")
            continue
        v = s[key]
        if v is None:
            return ctx.error(f"{where}.{key}", "is null; omit the key instead")
        if not _is_int(v):
            return ctx.error(f"{where}.{key}", f"expected an integer, got {type_name(v)}")
    return ctx.error(name, "malformed")  # pragma: no cover - the fast path failed for a reason


def _read_stacks(ctx: _Ctx, doc: dict, n_frames: int) -> tuple[np.ndarray, np.ndarray]:
    stacks = _table(ctx, doc, "stacks")
    try:
        frame = _int_column([s["frameId"] for s in stacks], "frameId")
        parent = _int_column([s.get("parentId", _ABSENT) for s in stacks], "parentId")
    except (KeyError, TypeError, AttributeError):
        frame = parent = None
    if frame is None:
        raise _slow_id_error(ctx, stacks, "stacks", "frameId", True)
    if parent is None:
        raise _slow_id_error(ctx, stacks, "stacks", "parentId", False)
    bad = np.nonzero((frame < 0) | (frame >= n_frames))[0]
    if len(bad):
        i = int(bad[0])
        raise ctx.error(
            f"stacks[{i}].frameId", f"{int(frame[i])} is out of range (frames has {n_frames})"
        )
    # A parent must be an earlier stack: this rules out cycles and forward references.
    idx = np.arange(len(parent))
    bad = np.nonzero((parent != _ABSENT) & ((parent < 0) | (parent >= idx)))[0]
    if len(bad):
        i = int(bad[0])
        raise ctx.error(
            f"stacks[{i}].parentId",
            f"{int(parent[i])} is not an earlier stack; a parent must come before its child",
        )
    parent[parent == _ABSENT] = NONE
    return parent.astype(np.int32), frame.astype(np.int32)


_get_timestamp = itemgetter("timestamp")
_get_stack_id = itemgetter("stackId")


def _stack_ids(samples: list) -> list:
    """stackId per sample, _ABSENT where the key is missing.

    Busy traces often have a stackId on every sample: map(itemgetter) is ~30 % faster than
    a comprehension with dict.get, so try it first and fall back at the first idle sample.
    """
    try:
        return list(map(_get_stack_id, samples))
    except KeyError:
        return [s.get("stackId", _ABSENT) for s in samples]


def _read_samples(
    ctx: _Ctx, doc: dict, n_stacks: int, has_markers: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    samples = _table(ctx, doc, "samples")
    try:
        raw_times = list(map(_get_timestamp, samples))
        times = np.array(raw_times)
        if _has_bool(raw_times):
            times = None
        del raw_times
        stack = _int_column(_stack_ids(samples), "stackId")
    except (KeyError, TypeError, AttributeError, ValueError, OverflowError):
        times, stack = None, None
    if times is None or (len(samples) and times.dtype.kind not in "if"):
        for i, s in enumerate(samples):
            where = f"samples[{i}]"
            if type(s) is not dict:
                raise ctx.error(where, f"expected an object, got {type_name(s)}")
            t = s.get("timestamp")
            if type(t) not in (int, float):
                got = (
                    "missing" if "timestamp" not in s else f"expected a number, got {type_name(t)}"
                )
                raise ctx.error(f"{where}.timestamp", got)
        raise ctx.error("samples", "malformed")  # pragma: no cover
    times = times.astype(np.float64, copy=False)
    finite = np.isfinite(times)
    if not finite.all():
        i = int(np.argmin(finite))
        raise ctx.error(f"samples[{i}].timestamp", f"{times[i]} is not a finite number")
    _check_times(ctx, times)
    if stack is None:
        raise _slow_id_error(ctx, samples, "samples", "stackId", False)
    bad = np.nonzero((stack != _ABSENT) & ((stack < 0) | (stack >= n_stacks)))[0]
    if len(bad):
        i = int(bad[0])
        raise ctx.error(
            f"samples[{i}].stackId", f"{int(stack[i])} is out of range (stacks has {n_stacks})"
        )
    markers = None
    if has_markers:
        raw = [s.get("marker") for s in samples]
        markers = np.full(len(raw), NONE, dtype=np.int8)
        for i, m in enumerate(raw):
            if m is not None:
                code = MARKER_CODE.get(m) if type(m) is str else None
                if code is None:
                    raise ctx.error(
                        f"samples[{i}].marker",
                        f"{shown(m)} is not a spec marker ({', '.join(MARKERS)})",
                    )
                markers[i] = code
        if not (markers != NONE).any():
            markers = None
    stack[stack == _ABSENT] = NONE
    return times, stack.astype(np.int32), markers


def _time_problem(times: np.ndarray) -> tuple[int, str] | None:
    """The first sample time out of range or out of order, and what is wrong with it
    (the rule every reader applies: `trace.step_back`)."""
    big = ~(np.abs(times) < MAX_MS)
    if big.any():
        i = int(np.argmax(big))
        return i, f"is {times[i]}; expected a time below 2**53 ms; is this file intact?"
    back = step_back(times)
    if back is None:
        return None
    i, j = back
    return i, (
        f"is {times[i]}, {times[j] - times[i]:.6g} ms before samples[{j}] "
        f"({times[j]}); samples must be in time order (sort them by timestamp)"
    )


def _check_times(ctx: _Ctx, times: np.ndarray) -> None:
    problem = _time_problem(times)
    if problem is not None:
        raise ctx.error(f"samples[{problem[0]}].timestamp", problem[1])


def _trace_from_doc(ctx: _Ctx, doc: Any, has_markers: bool) -> ProfilerTrace:
    if type(doc) is not dict:
        raise ctx.error("(top level)", f"expected an object, got {type_name(doc)}")
    resources = _read_resources(ctx, doc)
    frames = _read_frames(ctx, doc, len(resources))
    parent, frame = _read_stacks(ctx, doc, len(frames))
    times, stack, markers = _read_samples(ctx, doc, len(parent), has_markers)
    return ProfilerTrace(resources, frames, parent, frame, times, stack, markers)


def _opt_number(ctx: _Ctx, obj: dict, key: str, where: str) -> float | None:
    v = obj.get(key)
    if v is None:
        return None
    if type(v) not in (int, float) or not math.isfinite(v):
        raise ctx.error(f"{where}.{key}", f"expected a finite number, got {type_name(v)}")
    if not abs(v) < MAX_MS:
        raise ctx.error(f"{where}.{key}", f"is {v}; expected a time below 2**53 ms")
    return float(v)


def _check_depth(ctx: _Ctx, v: Any, where: str, depth: int = 0) -> None:
    if depth > MAX_META_DEPTH:
        raise ctx.error(where, f"nests deeper than {MAX_META_DEPTH} levels")
    if type(v) is dict:
        for x in v.values():
            _check_depth(ctx, x, where, depth + 1)
    elif type(v) is list:
        for x in v:
            _check_depth(ctx, x, where, depth + 1)


def _read_lines(ctx: _Ctx, ext: dict, where: str, n: int) -> np.ndarray | None:
    lines = ext.get("sampleLines")
    if lines is None:
        return None
    if type(lines) is np.ndarray:  # the typed path decoded integers already
        arr = lines
    elif type(lines) is not list:
        raise ctx.error(f"{where}.sampleLines", f"expected an array, got {type_name(lines)}")
    if len(lines) != n:
        raise ctx.error(
            f"{where}.sampleLines", f"has {len(lines)} entries but there are {n} samples"
        )
    if type(lines) is list:
        arr = _int_column(lines, "sampleLines")
        if arr is None:
            # Not an integer, or one beyond int64 (numpy then gives up on the column).
            bad = next(
                i for i, v in enumerate(lines) if not (_is_int(v) and -(2**63) <= v < 2**63)
            )
            got = lines[bad] if _is_int(lines[bad]) else type_name(lines[bad])
            raise ctx.error(f"{where}.sampleLines[{bad}]", f"expected a line number, got {got}")
    neg = np.nonzero(arr < 0)[0]
    if len(neg):
        i = int(neg[0])
        raise ctx.error(f"{where}.sampleLines[{i}]", f"is {int(arr[i])}; use 0 for unknown")
    return arr.astype(np.int32)


def _per_sample(
    ctx: _Ctx,
    ext: dict,
    where: str,
    n: int,
    key: str,
    types: tuple,
    expected: str,
    dtype: Any,
    in_range: Callable[[np.ndarray], np.ndarray],
    rule: str,
) -> np.ndarray | None:
    """A per-sample column `key` of `n` entries whose elements are of `types`, as numpy,
    each `in_range` (else the first that is not is named with `rule`); None when absent."""
    col = ext.get(key)
    if col is None:
        return None
    if type(col) not in (list, np.ndarray):  # ndarray: the typed path decoded numbers
        raise ctx.error(f"{where}.{key}", f"expected an array, got {type_name(col)}")
    if len(col) != n:
        raise ctx.error(f"{where}.{key}", f"has {len(col)} entries but there are {n} samples")
    if type(col) is list:
        bad = next((i for i, v in enumerate(col) if type(v) not in types), None)
        if bad is not None:
            raise ctx.error(
                f"{where}.{key}[{bad}]", f"expected {expected}, got {type_name(col[bad])}"
            )
    arr = np.asarray(col, dtype=dtype)
    bad_mask = ~in_range(arr)
    if bad_mask.any():
        i = int(np.argmax(bad_mask))
        raise ctx.error(f"{where}.{key}[{i}]", f"is {arr[i]}; {rule}")
    return arr


def _read_weights(ctx: _Ctx, ext: dict, where: str, n: int) -> np.ndarray | None:
    return _per_sample(
        ctx, ext, where, n, "sampleWeights", (int, float), "a number", np.float64,
        lambda a: (a >= 0) & (a < MAX_MS), "a weight is a number of ms >= 0 and below 2**53",
    )


def _read_counts(ctx: _Ctx, ext: dict, where: str, n: int) -> np.ndarray | None:
    return _per_sample(
        ctx, ext, where, n, "sampleCounts", (int,), "a whole number", np.int64,
        lambda a: (a >= 1) & (a <= MAX_SAMPLES),
        f"a count is a whole number of samples from 1 to {MAX_SAMPLES:,}",
    )


def _read_spans(ctx: _Ctx, ext: dict, where: str, trace: ProfilerTrace) -> Spans | None:
    spans = ext.get("spans")
    if spans is None:
        return None
    where = f"{where}.spans"
    if type(spans) is not dict:
        raise ctx.error(where, f"expected an object, got {type_name(spans)}")
    cols = {}
    for key in ("start", "end", "frameId", "parentId"):
        v = spans.get(key)
        if type(v) is not list:
            raise ctx.error(f"{where}.{key}", "missing" if v is None else "expected an array")
        cols[key] = v
    n = len(cols["start"])
    for key, v in cols.items():
        if len(v) != n:
            raise ctx.error(f"{where}.{key}", f"has {len(v)} entries, start has {n}")
    for key in ("start", "end"):
        bad = next((i for i, v in enumerate(cols[key]) if type(v) not in (int, float)), None)
        if bad is not None:
            raise ctx.error(
                f"{where}.{key}[{bad}]", f"expected a number, got {type_name(cols[key][bad])}"
            )
    start = np.array(cols["start"], dtype=np.float64) if n else np.zeros(0)
    end = np.array(cols["end"], dtype=np.float64) if n else np.zeros(0)
    frame = _int_column(cols["frameId"], "frameId")
    parent = _int_column(cols["parentId"], "parentId")
    if frame is None or parent is None:
        raise ctx.error(where, "frameId and parentId must be integers")
    kind, name, names, args = _read_span_names(ctx, spans, where, n)
    # A call is named by its frame; a window the page reported (frameId -1) by `name`.
    calls = kind == SPAN_KIND_CODE["call"]
    bad = np.nonzero(
        (frame >= len(trace.frames)) | (calls & (frame < 0)) | (~calls & (frame != NONE))
    )[0]
    if len(bad):
        i = int(bad[0])
        raise ctx.error(f"{where}.frameId[{i}]", f"{int(frame[i])} is out of range")
    bad = np.nonzero((parent != NONE) & ((parent < 0) | (parent >= np.arange(n))))[0]
    if len(bad):
        i = int(bad[0])
        raise ctx.error(f"{where}.parentId[{i}]", f"{int(parent[i])} is not an earlier span")
    bad = np.nonzero(~(np.abs(start) < MAX_MS) | ~(np.abs(end) < MAX_MS) | (end < start))[0]
    if len(bad):
        i = int(bad[0])
        raise ctx.error(
            f"{where}[{i}]", "start and end must be finite, below 2**53 ms, with end >= start"
        )
    return Spans(start, end, frame.astype(np.int32), parent.astype(np.int32), kind, name, names,
                 args)


_ARG_TYPES = (str, int, float, bool, type(None))


def _span_column(
    ctx: _Ctx,
    spans: dict,
    where: str,
    key: str,
    n: int,
    what: str,
    problem: Callable[[int, Any], tuple[str, str] | None],
) -> list | None:
    """The optional span column `key`: None when absent, else `n` entries, each of which
    `problem` passes (or names: the place below the entry, what is wrong)."""
    col = spans.get(key)
    if col is None:
        return None
    if type(col) is not list or len(col) != n:
        raise ctx.error(f"{where}.{key}", f"expected an array of {n} {what}")
    for i, v in enumerate(col):
        bad = problem(i, v)
        if bad is not None:
            raise ctx.error(f"{where}.{key}[{i}]{bad[0]}", bad[1])
    return col


def _read_span_names(
    ctx: _Ctx, spans: dict, where: str, n: int
) -> tuple[np.ndarray, np.ndarray, list[str], list[dict] | None]:
    """The optional `kind`, `name`, `names` and `args` columns of spans (all calls, named
    by their frames, when absent)."""
    from .. import timeline

    kinds = _span_column(
        ctx, spans, where, "kind", n, "span kinds",
        lambda i, k: None if type(k) is str and k in SPAN_KIND_CODE
        else ("", f"{shown(k)} is not one of {', '.join(SPAN_KINDS)}"),
    )
    kind = (np.array([SPAN_KIND_CODE[k] for k in kinds], np.int8) if kinds is not None
            else np.zeros(n, np.int8))
    names = spans.get("names")
    if names is not None and (type(names) is not list or any(type(x) is not str for x in names)):
        raise ctx.error(f"{where}.names", "expected an array of strings")
    names = names or []
    col = _span_column(
        ctx, spans, where, "name", n, "name ids or nulls",
        lambda i, v: None if v is None or (type(v) is int and 0 <= v < len(names))
        else ("", f"{shown(v)} is not an index into names"),
    )
    name = (np.array([NONE if v is None else v for v in col], np.int32) if col is not None
            else np.full(n, NONE, np.int32))
    missing = np.nonzero((kind != SPAN_KIND_CODE["call"]) & (name == NONE))[0]
    if len(missing):
        i = int(missing[0])
        raise ctx.error(f"{where}.name[{i}]", "a span that is not a call needs a name")

    def arg_problem(i: int, a: Any) -> tuple[str, str] | None:
        if type(a) is not dict or any(type(v) not in _ARG_TYPES for v in a.values()):
            return "", "expected an object of strings, numbers and nulls"
        # A page window's fields are computed with (--during, the Time view): their
        # types are checked as the collector checks a client's timeline.
        bad = timeline.span_args_problem(SPAN_KINDS[kind[i]], a)
        return None if bad is None else (f".{bad[0]}", bad[1])

    args = _span_column(ctx, spans, where, "args", n, "objects", arg_problem)
    return kind, name, names, args


def _track_from(ctx: _Ctx, trace: ProfilerTrace, ext: dict, where: str, default: str) -> Track:
    name = ext.get("track", default)
    if type(name) is not str:
        raise ctx.error(f"{where}.track", f"expected a string, got {type_name(name)}")
    engine = ext.get("engine")
    if engine is not None and type(engine) is not str:
        raise ctx.error(f"{where}.engine", f"expected a string, got {type_name(engine)}")
    meta = ext.get("meta", {})
    if type(meta) is not dict:
        raise ctx.error(f"{where}.meta", f"expected an object, got {type_name(meta)}")
    _check_depth(ctx, meta, f"{where}.meta")
    trace.sample_line = _read_lines(ctx, ext, where, trace.num_samples)
    trace.sample_weight = _read_weights(ctx, ext, where, trace.num_samples)
    trace.sample_count = _read_counts(ctx, ext, where, trace.num_samples)
    return Track(
        name=name,
        trace=trace,
        # null or absent: unknown. 0 (1970) is what jsprof wrote for "unknown" before it
        # could say so, never a real recording's origin.
        time_origin=_opt_number(ctx, ext, "timeOrigin", where) or None,
        engine=engine,
        sample_interval=_opt_number(ctx, ext, "sampleInterval", where),
        requested_interval=_opt_number(ctx, ext, "requestedInterval", where),
        spans=_read_spans(ctx, ext, where, trace),
        # older files spelled some keys in snake_case: one spelling from here on
        meta=normalise_meta(meta),
    )


def recording_from_doc(doc: Any, source: str, has_markers: bool = True) -> Recording:
    """Validate a parsed jsprof/ProfilerTrace document and build the Recording.

    The validating path: slow, and it names the first bad field and index.
    """
    ctx = _Ctx(source)
    trace = _trace_from_doc(ctx, doc, has_markers)
    return _recording(
        ctx,
        trace,
        doc,
        lambda sub_ctx, d: _trace_from_doc(sub_ctx, d, has_markers),
    )


def _recording(ctx: _Ctx, trace: ProfilerTrace, doc: dict, make_trace) -> Recording:
    """The Recording of a top-level trace and its `jsprof` key; `make_trace(ctx, value)`
    builds the trace of each further track from its `trace` value."""
    ext = doc.get(FORMAT_KEY)
    if ext is None:
        return Recording([Track("main", trace)])
    if type(ext) is not dict:
        raise ctx.error(FORMAT_KEY, f"expected an object, got {type_name(ext)}")
    version = ext.get("formatVersion")
    if not _is_int(version):
        raise ctx.error(f"{FORMAT_KEY}.formatVersion", "missing or not an integer")
    if version > FORMAT_VERSION:
        raise ctx.error(
            f"{FORMAT_KEY}.formatVersion",
            f"is {version}, newer than this jsprof understands ({FORMAT_VERSION}); upgrade jsprof",
        )
    tracks = [_track_from(ctx, trace, ext, FORMAT_KEY, "main")]
    more = ext.get("tracks", [])
    if type(more) is not list:
        raise ctx.error(f"{FORMAT_KEY}.tracks", f"expected an array, got {type_name(more)}")
    for i, t in enumerate(more):
        where = f"{FORMAT_KEY}.tracks[{i}]"
        if type(t) is not dict or type(t.get("trace")) not in (dict, _RawTrace):
            raise ctx.error(where, "expected an object with a `trace` object")
        sub = make_trace(_Ctx(ctx.source, f"{where}.trace."), t["trace"])
        tracks.append(_track_from(ctx, sub, t, where, f"track {i + 1}"))
    names = [t.name for t in tracks]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise ctx.error(f"{FORMAT_KEY}.tracks", f"track name {shown(dup)} appears twice")
    return Recording(tracks)


class _RawTrace:
    """A further track's `trace` object, still undecoded."""

    __slots__ = ("raw",)

    def __init__(self, raw: Any) -> None:
        self.raw = raw
