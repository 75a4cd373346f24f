"""The fast path of the jsprof format's reader: typed decoding (msgspec, and our C scanner
for the samples) straight into columns. Apart from `jsprof` so that msgspec (and
typing_extensions, ~8 ms of a run's start-up) is imported only when a file is read, not
when `jsprof record` writes one."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, NamedTuple

import msgspec
import numpy as np
import orjson

from ..trace import MARKER_CODE, NONE, ProfilerFrame, ProfilerTrace, Recording
from . import _columns
from . import _jsprof_read as _fmt  # its limits read when used: tests lower them
from ._jsprof_read import (
    _ABSENT,
    _MARKER_JSON,
    FORMAT_KEY,
    _Ctx,
    _RawTrace,
    _recording,
    _time_problem,
)

# ---- the fast path: typed decoding straight into columns ---------------------------------
#
# The C scanner reads the samples array into columns and refuses (returns None for) any
# text it does not take exactly: other keys, escapes, a boolean, null or float id, a
# non-finite time. Then msgspec decodes the array in pieces into small typed structs, and
# rejects a wrong type as it goes; numpy checks the ranges. This path never words an
# error: whenever it cannot accept a file it gives up, and the validating path reads the
# file again and names the first bad field and index. So all paths accept the same files,
# and only a broken file pays for two reads.


class _Fallback(Exception):
    """The typed path cannot accept this input; the validating path will say why."""


class _Frame(msgspec.Struct, gc=False):
    name: str
    resourceId: int = _ABSENT
    line: int = _ABSENT
    column: int = _ABSENT


class _Stack(msgspec.Struct, gc=False):
    frameId: int
    parentId: int = _ABSENT


class _Sample(msgspec.Struct, gc=False, forbid_unknown_fields=True):
    """Most samples: without a marker (or any other key) they decode fastest this way."""

    timestamp: float
    stackId: int = _ABSENT


class _MarkedSample(msgspec.Struct, gc=False):
    timestamp: float
    stackId: int = _ABSENT
    marker: str | None = None


_PARTS = msgspec.json.Decoder(dict[str, msgspec.Raw])
_TRACK_PARTS = msgspec.json.Decoder(list[dict[str, msgspec.Raw]])
_STRINGS = msgspec.json.Decoder(list[str])
_FRAMES = msgspec.json.Decoder(list[_Frame])
_STACKS = msgspec.json.Decoder(list[_Stack])
_SAMPLES = msgspec.json.Decoder(list[_Sample])
_MARKED_SAMPLES = msgspec.json.Decoder(list[_MarkedSample])
_INTS = msgspec.json.Decoder(list[int])
_MARKER_CODES: dict[str | None, int] = {None: NONE, **MARKER_CODE}
# Samples are decoded a few MB at a time, so the per-sample structs of only one piece are
# alive at once: peak memory stays near the file's size plus the columns.
_PIECE_BYTES = 1 << 22
_SEPARATOR = re.compile(rb"\}\s*,\s*\{")
_SAMPLES_KEY = b'"samples"'
_ARRAY_START = re.compile(rb"[ \t\r\n]*:[ \t\r\n]*\[")
TYPED_ERRORS = (
    msgspec.MsgspecError,
    _Fallback,
    OverflowError,
    KeyError,
    ValueError,
    RecursionError,
)


def fast_recording(ctx: _Ctx, data: bytes) -> Recording:
    split = _split_samples(data)
    if split is not None:
        parts, columns = split
        trace = _fast_trace(parts, columns)
    else:
        parts = _PARTS.decode(data)
        trace = _fast_trace(parts, _raw_columns(parts.get("samples")))
    doc = {}
    if FORMAT_KEY in parts:
        doc[FORMAT_KEY] = _fast_ext(parts[FORMAT_KEY])
    return _recording(ctx, trace, doc, _fast_sub_trace)


def _split_samples(data: bytes) -> tuple[dict, _Columns] | None:
    """The top-level `samples` array read without parsing it twice: its columns, and the
    other keys decoded as raw parts. None when the file is not laid out as jsprof and
    Chromium write it (then the whole top level is scanned once more)."""
    i = data.find(_SAMPLES_KEY)
    if i < 0:
        return None
    m = _ARRAY_START.match(data, i + len(_SAMPLES_KEY))
    if m is None:
        return None
    start = m.end()
    columns = _columns_at(data, start)
    if columns is None:
        return None
    end = columns.end
    # If `"samples"` was found anywhere but as the top-level key (a key of a nested
    # object, a further track), the rest holds another one, or its top level no
    # placeholder: then this layout guess is wrong and the caller scans instead.
    rest = data[:i] + _SAMPLES_KEY + b":[]" + data[end + 1 :]
    if rest.count(b'"samples') != 1:
        return None
    parts = _PARTS.decode(rest)
    if bytes(parts.get("samples", b"")) != b"[]":
        return None
    return parts, columns


class _Columns(NamedTuple):
    """A samples array as columns: stackId -1 where absent (ids not yet checked against
    the stacks table), markers None when no sample has one; `end` is the offset of `]`."""

    times: np.ndarray
    stack: np.ndarray
    markers: np.ndarray | None
    end: int


def _columns_at(buf: Any, start: int) -> _Columns | None:
    """The C scanner's columns of the object array whose first element is at `start`
    (just after its `[`), or None when it does not take that text as it is."""
    got = _columns.read_samples(buf, start, _fmt.MAX_TABLE_ENTRIES, _MARKER_JSON)
    if got is None:
        return None
    times, stack, markers, end = got
    return _Columns(
        np.frombuffer(times, np.float64),
        np.frombuffer(stack, np.int32),
        None if markers is None else np.frombuffer(markers, np.int8),
        end,
    )


def _raw_columns(raw: msgspec.Raw | None) -> _Columns | Iterator[bytes]:
    """A further track's (or an unusual layout's) samples: the C scanner's columns, else
    msgspec pieces."""
    if raw is None:
        raise _Fallback("no samples")
    buf = memoryview(raw)
    text = bytes(buf[:1]), bytes(buf[-1:])
    if text != (b"[", b"]"):
        raise _Fallback("samples is not an array")
    columns = _columns_at(buf, 1)
    if columns is not None and columns.end == len(buf) - 1:
        return columns
    return _pieces(buf, 1, len(buf) - 1)


def _pieces(buf: Any, start: int, end: int) -> Iterator[bytes]:
    """JSON arrays of consecutive elements of the object array whose first element starts
    at `start` and whose `]` is at `end`, split only between two objects."""
    pos = start
    while True:
        m = _SEPARATOR.search(buf, pos + _PIECE_BYTES, end) if end - pos > _PIECE_BYTES else None
        stop = end if m is None else m.start() + 1
        yield b"".join((b"[", memoryview(buf)[pos:stop], b"]"))
        if m is None:
            return
        pos = m.end() - 1


def _fast_trace(parts: dict, samples: _Columns | Iterator[bytes]) -> ProfilerTrace:
    limit = _fmt.MAX_TABLE_ENTRIES
    resources = _STRINGS.decode(parts["resources"])
    frames = _FRAMES.decode(parts["frames"])
    stacks = _STACKS.decode(parts["stacks"])
    if max(len(resources), len(frames), len(stacks)) > limit:
        raise _Fallback("table too long")
    n_res = len(resources)
    out_frames = []
    new = tuple.__new__  # in C: the namedtuple's own __new__ (and _make) is Python code
    for f in frames:
        rid, line, col = f.resourceId, f.line, f.column
        if rid != _ABSENT and not 0 <= rid < n_res:
            raise _Fallback("resourceId")
        if (line != _ABSENT and not 1 <= line <= _fmt.MAX_POSITION) or (
            col != _ABSENT and not 1 <= col <= _fmt.MAX_POSITION
        ):
            raise _Fallback("line or column")
        out_frames.append(new(ProfilerFrame, (
            f.name,
            None if rid == _ABSENT else rid,
            None if line == _ABSENT else line,
            None if col == _ABSENT else col,
        )))
    n_frames = len(out_frames)
    frame = np.array([s.frameId for s in stacks], np.int64)
    parent = np.array([s.parentId for s in stacks], np.int64)
    del stacks
    if len(frame) and ((frame < 0) | (frame >= n_frames)).any():
        raise _Fallback("frameId")
    has_parent = parent != _ABSENT
    if ((parent < 0) | (parent >= np.arange(len(parent))))[has_parent].any():
        raise _Fallback("parentId")
    parent[~has_parent] = NONE

    if type(samples) is _Columns:
        times, stack, markers = samples.times, samples.stack, samples.markers
    else:
        times, stack, markers = _sample_columns(samples)
    if len(times) > limit:
        raise _Fallback("samples too long")
    if _time_problem(times) is not None:
        raise _Fallback("timestamp")
    # Absent ids are -1 and the others were checked >= 0: the largest is the one to check.
    if len(stack) and int(stack.max()) >= len(frame):
        raise _Fallback("stackId")
    return ProfilerTrace(
        resources,
        out_frames,
        parent.astype(np.int32),
        frame.astype(np.int32),
        times,
        stack,
        markers,
    )


def _sample_columns(
    pieces: Iterator[bytes],
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    times: list[np.ndarray] = []
    stacks: list[np.ndarray] = []
    markers: list[np.ndarray | None] = []
    codes = _MARKER_CODES
    for piece in pieces:
        try:
            items = _SAMPLES.decode(piece)
            marked = False
        except msgspec.ValidationError:
            # A marker (or another key): decoded again with the struct that keeps it.
            items = _MARKED_SAMPLES.decode(piece)
            marked = True
        times.append(np.array([s.timestamp for s in items], np.float64))
        stacks.append(np.array([s.stackId for s in items], np.int64))
        markers.append(
            np.array([codes[s.marker] for s in items], np.int8) if marked else None
        )
        del items
    if not times:
        return np.zeros(0), np.zeros(0, np.int32), None
    time = np.concatenate(times)
    if not np.isfinite(time).all():
        raise _Fallback("timestamp")
    stack = np.concatenate(stacks)
    has_stack = stack != _ABSENT
    if (stack[has_stack] < 0).any() or (stack > _fmt.MAX_TABLE_ENTRIES).any():
        raise _Fallback("stackId")
    stack[~has_stack] = NONE
    marker = None
    if any(m is not None and (m != NONE).any() for m in markers):
        marker = np.concatenate(
            [
                np.full(len(t), NONE, np.int8) if m is None else m
                for t, m in zip(times, markers, strict=True)
            ]
        )
    return time, stack.astype(np.int32), marker


def _fast_ext(raw: msgspec.Raw) -> Any:
    """The `jsprof` key (or a further track) with its per-sample columns decoded typed
    and each further track's trace left raw; everything else decoded as plain JSON for the
    validating checks (it is small)."""
    if bytes(memoryview(raw)[:1]) != b"{":
        return orjson.loads(bytes(raw))  # not an object: the checks will say so
    out: dict[str, Any] = {}
    for key, value in _PARTS.decode(raw).items():
        if key == "tracks" and bytes(memoryview(value)[:1]) == b"[":
            out[key] = [
                {k: _RawTrace(v) if k == "trace" else _fast_value(k, v) for k, v in t.items()}
                for t in _TRACK_PARTS.decode(value)
            ]
        else:
            out[key] = _fast_value(key, value)
    return out


def _fast_value(key: str, raw: msgspec.Raw) -> Any:
    """A per-sample column as numpy when the C scanner takes its text whole (the checks
    then need no list); anything else as plain JSON."""
    view = memoryview(raw)
    if key in ("sampleLines", "sampleWeights", "sampleCounts") and bytes(view[:1]) == b"[":
        ints = key != "sampleWeights"
        got = (_columns.read_ints if ints else _columns.read_floats)(view, 1)
        if got is not None and got[1] == len(view) - 1:
            return np.frombuffer(got[0], np.int64 if ints else np.float64)
    return orjson.loads(bytes(raw))


def _fast_sub_trace(ctx: _Ctx, value: Any) -> ProfilerTrace:
    if type(value) is not _RawTrace:
        raise _Fallback("track trace")
    parts = _PARTS.decode(value.raw)
    return _fast_trace(parts, _raw_columns(parts.get("samples")))


# ---- writing ---------------------------------------------------------------------------


