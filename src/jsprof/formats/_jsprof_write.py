"""Writing jsprof's own JSON (formats/jsprof.py's `dumps` and `write_file`), numpy-free:
the columns are numpy arrays (the model's ProfilerTrace) or `array.array`s of the same item
sizes (recorded.py's columns, which `jsprof record --engine node` writes without importing
numpy); either way the C writer reads them through the buffer protocol and the text is the
same, byte for byte. The spec's four tables come first; the `jsprof` key after the first
track's samples holds the rest (see formats/jsprof.py)."""

from __future__ import annotations

import os
from array import array
from typing import Any, BinaryIO

import orjson

from ..errors import TraceFormatError
from ..traceparts import MARKERS
from . import _columns

FORMAT_KEY = "jsprof"
FORMAT_VERSION = 1
# Each marker's JSON text, as the C reader and writer take them.
MARKER_JSON = tuple(orjson.dumps(m) for m in MARKERS)

_NUMPY = orjson.OPT_SERIALIZE_NUMPY
# Threads writing a big samples array (consecutive shares, without the GIL): formatting
# shortest floats is most of a save, and it splits evenly.
_WRITERS = min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..recorded import LightRecording, LightTrace, LightTrack
    from ..trace import ProfilerTrace, Recording, Track

    Trace = ProfilerTrace | LightTrace
    AnyTrack = Track | LightTrack
    AnyRecording = Recording | LightRecording


def _col(col: Any, code: str) -> Any:
    """A column as the C writer takes it: an array.array of `code` as it is, a numpy array
    as a contiguous one of that item type (numpy is loaded whenever one is given)."""
    if type(col) is array and col.typecode == code:
        return col
    import numpy as np

    return np.ascontiguousarray(col, {"i": np.int32, "d": np.float64, "b": np.int8}[code])


def _listed(col: Any, where: str | None) -> Any:
    """A per-sample column for orjson: numpy as it is when writing (`where`), else a list."""
    return col.tolist() if where is None or type(col) is array else col


def frame_dicts(trace: Trace) -> list[dict]:
    frames = []
    for f in trace.frames:
        d: dict[str, Any] = {"name": f.name}
        if f.resource_id is not None:
            d["resourceId"] = f.resource_id
        if f.line is not None:
            d["line"] = f.line
        if f.column is not None:
            d["column"] = f.column
        frames.append(d)
    return frames


def track_ext(track: AnyTrack, where: str | None = None) -> dict:
    """The track's `jsprof` members; with `where` (the track's place, for messages) the
    per-sample columns stay numpy or are written by the C writer, for `dumps`."""
    ext: dict[str, Any] = {"track": track.name, "timeOrigin": track.time_origin}
    if track.engine is not None:
        ext["engine"] = track.engine
    if track.sample_interval is not None:
        ext["sampleInterval"] = track.sample_interval
    if track.requested_interval is not None:
        ext["requestedInterval"] = track.requested_interval
    lines, weights = track.trace.sample_line, track.trace.sample_weight
    if lines is not None:
        ext["sampleLines"] = _listed(lines, where)  # orjson: numpy ints
    if weights is not None:
        # Only a trace whose samples were filtered (or read with weights) carries it: the
        # timestamps no longer imply what each sample stood for.
        ext["sampleWeights"] = weights.tolist() if where is None else _weights_json(weights, where)
    counts = track.trace.sample_count
    if counts is not None:
        ext["sampleCounts"] = _listed(counts, where)
    if track.spans is not None:
        from ..trace import SPAN_KINDS

        s = track.spans
        ext["spans"] = {
            "start": s.start.tolist(),
            "end": s.end.tolist(),
            "frameId": s.frame.tolist(),
            "parentId": s.parent.tolist(),
        }
        if len(s) and (s.kind != 0).any():  # type: ignore[union-attr]
            ext["spans"]["kind"] = [SPAN_KINDS[k] for k in s.kind.tolist()]  # type: ignore[union-attr]
            ext["spans"]["name"] = [None if k < 0 else k for k in s.name.tolist()]  # type: ignore[union-attr]
            ext["spans"]["names"] = s.names
        if s.args is not None:
            ext["spans"]["args"] = s.args
    if track.meta:
        ext["meta"] = track.meta
    return ext


class Json(bytes):
    """Text already serialised (by the C column writer), put into an object as it is."""


def json_object(items: dict[str, Any]) -> bytes:
    """An object as orjson writes it, with `Json` values kept verbatim (the ext object has
    a handful of keys; only its column values are big)."""
    parts = [
        orjson.dumps(k) + b":" + (v if type(v) is Json else orjson.dumps(v, option=_NUMPY))
        for k, v in items.items()
    ]
    return b"{" + b",".join(parts) + b"}"


def _trace_head(trace: Trace) -> bytes:
    """The text of a trace object up to its samples array, `[` included."""
    return b"".join(
        (
            b'{"resources":',
            orjson.dumps(list(trace.resources)),
            b',"frames":',
            orjson.dumps(frame_dicts(trace)),
            b',"stacks":',
            _columns.write_stacks(_i32(trace.stack_parent), _i32(trace.stack_frame)),
            b',"samples":[',
        )
    )


def _sample_args(trace: Trace) -> tuple:
    """The sample columns as the C writer takes them."""
    marker = trace.sample_marker
    return (
        _col(trace.sample_time, "d"),
        _col(trace.sample_stack, "i"),
        None if marker is None else _col(marker, "b"),
        MARKER_JSON,
    )


def _refused(e: ValueError, where: str, args: tuple) -> TraceFormatError:
    field, i = e.args
    times, _, marker, _ = args
    if field == "timestamp":
        return TraceFormatError(
            f"cannot write {where}samples[{i}].timestamp: {times[i]} is not a finite "
            "number (JSON has no NaN or Infinity); drop or fix that sample"
        )
    return TraceFormatError(
        f"cannot write {where}samples[{i}].marker: code {int(marker[i])} is not a spec "
        f"marker ({', '.join(MARKERS)})"
    )


def _trace_json(trace: Trace, where: str, tail: bytes) -> bytes:
    """The spec's four tables of `trace` as one JSON object's members, followed by `tail`
    (which closes the object): the same text as orjson of `trace_to_doc`, with the stacks
    and samples written straight from their columns by the C writer."""
    args = _sample_args(trace)
    try:
        return _columns.write_samples(_trace_head(trace)[:-1], *args, tail, _WRITERS)
    except ValueError as e:
        raise _refused(e, where, args) from None


def _i32(col: Any) -> Any:
    return _col(col, "i")


def _weights_json(weights: Any, where: str) -> Json:
    w = _col(weights, "d")
    try:
        return Json(_columns.write_floats(w))
    except ValueError as e:
        i = e.args[1]
        raise TraceFormatError(
            f"cannot write {where}sampleWeights[{i}]: {w[i]} is not a finite number "
            "(JSON has no NaN or Infinity)"
        ) from None


def _first_tail(rec: AnyRecording) -> bytes:
    """What follows the first track's samples array: the `jsprof` key (further tracks
    inside it) and the closing brace."""
    if not rec.tracks:
        raise TraceFormatError("cannot write a recording with no tracks")
    first, *rest = rec.tracks
    ext = {"formatVersion": FORMAT_VERSION, **track_ext(first, f"{FORMAT_KEY}.")}
    if rest:
        tracks = []
        for i, t in enumerate(rest):
            where = f"{FORMAT_KEY}.tracks[{i}]."
            trace = _trace_json(t.trace, f"{where}trace.", b"}}")
            tracks.append(json_object(track_ext(t, where))[:-1] + b',"trace":' + trace)
        ext["tracks"] = Json(b"[" + b",".join(tracks) + b"]")
    return b',"' + FORMAT_KEY.encode() + b'":' + json_object(ext) + b"}"


def dumps(rec: AnyRecording) -> bytes:
    """The same text as orjson of `recording_to_doc(rec)` (byte for byte with orjson >=
    3.11.7's float layout), without a dict per sample or stack."""
    tail = _first_tail(rec)
    return _trace_json(rec.tracks[0].trace, "", tail)


def write_file(rec: AnyRecording, f: BinaryIO) -> None:
    """`dumps(rec)` written to the open file `f`: the samples array goes from the columns
    to the file in chunks (threads format while one writes), with no buffer the size of
    the output."""
    tail = _first_tail(rec)
    trace = rec.tracks[0].trace
    args = _sample_args(trace)
    f.write(_trace_head(trace))
    f.flush()
    try:
        _columns.write_samples_to(f.fileno(), *args, _WRITERS)
    except ValueError as e:
        raise _refused(e, "", args) from None
    f.write(b"]" + tail)
