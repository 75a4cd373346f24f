"""Writing jsprof's own JSON (formats/jsprof.py's `dumps` and `write_file`), numpy-free:
the columns are numpy arrays (the model's ProfilerTrace) or `array.array`s of the same item
sizes (recorded.py's columns, which `jsprof record --engine node` writes without importing
numpy); either way the C writer reads them through the buffer protocol and the text is the
same, byte for byte. The spec's four tables come first; the `jsprof` key after the first
track's samples holds the rest (see formats/jsprof.py)."""

from __future__ import annotations

import json
import os
from array import array
from typing import Any, BinaryIO

from ..errors import TraceFormatError
from ..traceparts import MARKERS
from . import _columns

FORMAT_KEY = "jsprof"
FORMAT_VERSION = 1
# Each marker's JSON text, as the C reader and writer take them.
MARKER_JSON = tuple(json.dumps(m).encode() for m in MARKERS)
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


# A value of at most this many values in all, each of a kind `_plain` lets through, is
# written by the stdlib's json (the same text); others by orjson, imported then. A short
# recording's tables and meta are that small (a 4-line tsc: 866 frames, 5 values each:
# ~1 ms for the check and json), and orjson's import costs ~13 ms of CPU (dataclasses,
# inspect, uuid, platform, datetime: issue 32), a tenth of such a recording's process;
# 4,000 frames cost the check and json ~5 ms; a bigger table goes to orjson (0.2 ms).
_PLAIN_ITEMS = 20_000
_I64_MIN, _U64_END = -(1 << 63), 1 << 64  # orjson's ints (it refuses others)


def _plain(v: Any, budget: list[int]) -> bool:
    """Whether json.dumps writes `v` as orjson does: str, bool, None, ints orjson takes,
    floats that both write in positional notation (Python's repr turns to exponents below
    1e-4 and from 1e16 on, orjson at other points; within, both write the shortest digits:
    checked on 200,000 random floats), lists and tuples, dicts with str keys; at most
    `budget[0]` values in all. Strings are checked when encoded (a lone surrogate)."""
    budget[0] -= 1
    if budget[0] < 0:
        return False
    t = type(v)
    if t is str or t is bool or v is None:
        return True
    if t is int:
        return _I64_MIN <= v < _U64_END
    if t is float:
        return v == 0.0 or 1e-4 <= abs(v) < 1e16
    if t is dict:
        for k, x in v.items():
            if type(k) is not str or not _plain(x, budget):
                return False
        return True
    if t is list or t is tuple:
        if len(v) > budget[0]:
            return False
        for x in v:
            if not _plain(x, budget):
                return False
        return True
    return False  # numpy arrays and scalars (the model's columns), anything else


def dumps_json(v: Any) -> bytes:
    """`orjson.dumps(v, option=OPT_SERIALIZE_NUMPY)`, byte for byte: through the stdlib's
    json when `_plain`, so that writing a short recording does not import orjson."""
    if _plain(v, [_PLAIN_ITEMS]):
        try:
            text = json.dumps(v, ensure_ascii=False, separators=(",", ":"), check_circular=False)
            return text.encode()
        except UnicodeEncodeError:
            pass  # a lone surrogate: orjson's own error below
    import orjson

    return orjson.dumps(v, option=orjson.OPT_SERIALIZE_NUMPY)


def json_object(items: dict[str, Any]) -> bytes:
    """An object as orjson writes it, with `Json` values kept verbatim (the ext object has
    a handful of keys; only its column values are big)."""
    parts = [
        dumps_json(k) + b":" + (v if type(v) is Json else dumps_json(v))
        for k, v in items.items()
    ]
    return b"{" + b",".join(parts) + b"}"


def _trace_head(trace: Trace) -> bytes:
    """The text of a trace object up to its samples array, `[` included."""
    return b"".join(
        (
            b'{"resources":',
            dumps_json(list(trace.resources)),
            b',"frames":',
            dumps_json(frame_dicts(trace)),
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
