"""The typed path of `_v8profile`: big CDP profiles decoded by msgspec straight into
columns. Apart from `_v8profile` so that msgspec (and typing_extensions, ~8 ms of a run's
start-up) is imported only when a profile is read from a file, not when an engine converts
the one it was handed (`jsprof record --engine node`)."""

from __future__ import annotations

import msgspec
import numpy as np

from ..errors import ErrorAt
from ..trace import ProfilerTrace
from . import _columns
from ._v8profile import _convert

# ---- the typed path: big profiles decoded straight into columns --------------------------
#
# Node structs decoded by msgspec and the two big integer arrays (samples, timeDeltas)
# read by our C scanner (`_columns`) from their text, so no Python object is made per
# sample. It gives up (returns None) on anything unusual; the caller then reads the parsed
# document, whose checks name the field and index.


class _CallFrame(msgspec.Struct, gc=False):
    functionName: str
    url: str = ""
    lineNumber: int = -1
    columnNumber: int = -1


class _Tick(msgspec.Struct, gc=False):
    line: int
    ticks: int


class _Node(msgspec.Struct, gc=False):
    id: int
    callFrame: _CallFrame
    children: list[int] = []
    hitCount: int = 0
    positionTicks: list[_Tick] = []


class _Profile(msgspec.Struct, gc=False):
    nodes: list[_Node]
    startTime: int | float = 0
    endTime: int | float | None = None
    samples: msgspec.Raw = msgspec.field(default_factory=lambda: msgspec.Raw(b"[]"))
    timeDeltas: msgspec.Raw = msgspec.field(default_factory=lambda: msgspec.Raw(b"[]"))
    jsprofEngine: str | None = None


class _Wrapped(msgspec.Struct, gc=False):
    profile: _Profile


_PROFILE = msgspec.json.Decoder(_Profile)
_WRAPPED = msgspec.json.Decoder(_Wrapped)


def _int_text(raw: msgspec.Raw) -> np.ndarray | None:
    """A JSON array of integers (already checked to be valid JSON) read by the C scanner
    straight into int64 (no Python int per sample); None for anything else, e.g. a value
    beyond int64, which is not one V8 writes."""
    view = memoryview(raw)
    if bytes(view[:1]) != b"[":
        return None
    got = _columns.read_ints(view, 1)
    if got is None or got[1] != len(view) - 1:
        return None
    return np.frombuffer(got[0], np.int64)


def typed_profile_to_trace(
    data: bytes, source: str, wrapped: bool
) -> tuple[ProfilerTrace, float, int, str | None] | None:
    """Like `profile_to_trace_counted` on `data` (a Profile, or PrimJS's `{"profile": ...}`
    when `wrapped`), plus the `jsprofEngine` key; None when typed decoding cannot take it."""
    try:
        profile = _WRAPPED.decode(data).profile if wrapped else _PROFILE.decode(data)
    except (msgspec.MsgspecError, RecursionError, ValueError):  # ValueError: bad UTF-8
        return None
    sample_ids = _int_text(profile.samples)
    deltas = _int_text(profile.timeDeltas)
    if sample_ids is None or deltas is None or len(sample_ids) != len(deltas):
        return None
    nodes = profile.nodes
    frames = [n.callFrame for n in nodes]
    ticks = [
        [{"line": t.line, "ticks": t.ticks} for t in n.positionTicks] if n.positionTicks else None
        for n in nodes
    ]
    columns = (
        [n.id for n in nodes],
        [f.functionName for f in frames],
        [f.url for f in frames],
        [f.lineNumber for f in frames],
        [f.columnNumber for f in frames],
        [n.children for n in nodes],
        [n.hitCount for n in nodes],
        ticks,
    )
    err = ErrorAt(source, "profile." if wrapped else "")
    trace, origin, added = _convert(
        err,
        columns,
        profile.startTime,
        profile.endTime,
        sample_ids,
        deltas,
        None,
        wrapped,
        nodes,
    )
    return trace, origin, added, profile.jsprofEngine
