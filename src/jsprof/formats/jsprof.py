"""jsprof's own JSON: a ProfilerTrace file with one extra top-level key, validated on load.

A single-track file is exactly a spec ProfilerTrace (`resources`, `frames`, `stacks`,
`samples`, and the marker extension's `marker` on samples) plus the key `jsprof` holding what
the spec has no field for: format version, track name, engine, time origin, intervals, the
per-sample line column (`sampleLines`), the per-sample weight column (`sampleWeights`, ms,
only when the trace carries one), the per-sample count column (`sampleCounts`: recorded
samples each stands for, only in merged profiles), spans, free-form meta, and any further
tracks. Files written by Chromium's native Profiler (no `jsprof` key) load unchanged as one track.

Big files are the hot path both ways. Loading: our C scanner (`_columns`) reads the
`samples` array straight into numpy columns, msgspec decodes the small tables typed, numpy
checks ranges; only when that fails does the validating path read the file again, slowly,
to name the first bad field and index. Saving: the C writer writes the stacks and samples
from their columns; orjson writes the rest. No Python object is made per sample either way.
"""

from __future__ import annotations

import os
from typing import Any, BinaryIO

import numpy as np
import orjson

from ..errors import TraceFormatError
from ..trace import (
    MARKERS,
    NONE,
    SPAN_KINDS,
    ProfilerTrace,
    Recording,
    Track,
)
from . import _columns
from ._format import Format, Probe
from ._json import gc_paused, parse_json
from ._jsprof_read import (  # the validating reader, keys and limits: below this module
    _MARKER_JSON,
    FORMAT_KEY,
    FORMAT_VERSION,
    _Ctx,
    is_profiler_trace,
    recording_from_doc,
)

_NUMPY = orjson.OPT_SERIALIZE_NUMPY
# Threads writing a big samples array (consecutive shares, without the GIL): formatting
# shortest floats is most of a save, and it splits evenly.
_WRITERS = min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)


def read_bytes(data: bytes, source: str) -> Recording:
    """Load a jsprof/ProfilerTrace file from its bytes: typed decoding when the file is
    valid, the validating path (which names what is wrong) when it is not."""
    from ._jsprof_typed import TYPED_ERRORS, fast_recording  # msgspec: for reading only

    ctx = _Ctx(source)
    try:
        with gc_paused():
            return fast_recording(ctx, data)
    except TYPED_ERRORS:
        pass
    with gc_paused():
        doc = parse_json(data, source)
        rec = recording_from_doc(doc, source, has_markers=True)
        del doc  # freed while the GC is still paused
        return rec


def _frame_dicts(trace: ProfilerTrace) -> list[dict]:
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


def trace_to_doc(trace: ProfilerTrace) -> dict:
    """The spec's ProfilerTrace as a JSON-able dict (keys absent where the spec omits them)."""
    frames = _frame_dicts(trace)
    stacks = [
        {"frameId": fr} if pa == NONE else {"parentId": pa, "frameId": fr}
        for pa, fr in zip(trace.stack_parent.tolist(), trace.stack_frame.tolist(), strict=True)
    ]
    times = trace.sample_time.tolist()
    sids = trace.sample_stack.tolist()
    samples = [
        {"timestamp": t} if s == NONE else {"timestamp": t, "stackId": s}
        for t, s in zip(times, sids, strict=True)
    ]
    if trace.sample_marker is not None:
        for d, m in zip(samples, trace.sample_marker.tolist(), strict=True):
            if m != NONE:
                d["marker"] = MARKERS[m]
    return {
        "resources": list(trace.resources),
        "frames": frames,
        "stacks": stacks,
        "samples": samples,
    }


def _track_ext(track: Track, where: str | None = None) -> dict:
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
        ext["sampleLines"] = lines.tolist() if where is None else lines  # orjson: numpy ints
    if weights is not None:
        # Only a trace whose samples were filtered (or read with weights) carries it: the
        # timestamps no longer imply what each sample stood for.
        ext["sampleWeights"] = weights.tolist() if where is None else _weights_json(weights, where)
    counts = track.trace.sample_count
    if counts is not None:
        ext["sampleCounts"] = counts.tolist() if where is None else counts
    if track.spans is not None:
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


def recording_to_doc(rec: Recording) -> dict:
    if not rec.tracks:
        raise TraceFormatError("cannot write a recording with no tracks")
    first, *rest = rec.tracks
    doc = trace_to_doc(first.trace)
    ext = {"formatVersion": FORMAT_VERSION, **_track_ext(first)}
    if rest:
        ext["tracks"] = [{**_track_ext(t), "trace": trace_to_doc(t.trace)} for t in rest]
    doc[FORMAT_KEY] = ext
    return doc


class _Json(bytes):
    """Text already serialised (by the C column writer), put into an object as it is."""


def _object(items: dict[str, Any]) -> bytes:
    """An object as orjson writes it, with `_Json` values kept verbatim (the ext object has
    a handful of keys; only its column values are big)."""
    parts = [
        orjson.dumps(k) + b":" + (v if type(v) is _Json else orjson.dumps(v, option=_NUMPY))
        for k, v in items.items()
    ]
    return b"{" + b",".join(parts) + b"}"


def _trace_head(trace: ProfilerTrace) -> bytes:
    """The text of a trace object up to its samples array, `[` included."""
    return b"".join(
        (
            b'{"resources":',
            orjson.dumps(list(trace.resources)),
            b',"frames":',
            orjson.dumps(_frame_dicts(trace)),
            b',"stacks":',
            _columns.write_stacks(_i32(trace.stack_parent), _i32(trace.stack_frame)),
            b',"samples":[',
        )
    )


def _sample_args(trace: ProfilerTrace) -> tuple:
    """The sample columns as the C writer takes them."""
    marker = trace.sample_marker
    return (
        np.ascontiguousarray(trace.sample_time, np.float64),
        _i32(trace.sample_stack),
        None if marker is None else np.ascontiguousarray(marker, np.int8),
        _MARKER_JSON,
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


def _trace_json(trace: ProfilerTrace, where: str, tail: bytes) -> bytes:
    """The spec's four tables of `trace` as one JSON object's members, followed by `tail`
    (which closes the object): the same text as orjson of `trace_to_doc`, with the stacks
    and samples written straight from their columns by the C writer."""
    args = _sample_args(trace)
    try:
        return _columns.write_samples(_trace_head(trace)[:-1], *args, tail, _WRITERS)
    except ValueError as e:
        raise _refused(e, where, args) from None


def _i32(col: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(col, np.int32)


def _weights_json(weights: np.ndarray, where: str) -> _Json:
    w = np.ascontiguousarray(weights, np.float64)
    try:
        return _Json(_columns.write_floats(w))
    except ValueError as e:
        i = e.args[1]
        raise TraceFormatError(
            f"cannot write {where}sampleWeights[{i}]: {w[i]} is not a finite number "
            "(JSON has no NaN or Infinity)"
        ) from None


def _first_tail(rec: Recording) -> bytes:
    """What follows the first track's samples array: the `jsprof` key (further tracks
    inside it) and the closing brace."""
    if not rec.tracks:
        raise TraceFormatError("cannot write a recording with no tracks")
    first, *rest = rec.tracks
    ext = {"formatVersion": FORMAT_VERSION, **_track_ext(first, f"{FORMAT_KEY}.")}
    if rest:
        tracks = []
        for i, t in enumerate(rest):
            where = f"{FORMAT_KEY}.tracks[{i}]."
            trace = _trace_json(t.trace, f"{where}trace.", b"}}")
            tracks.append(_object(_track_ext(t, where))[:-1] + b',"trace":' + trace)
        ext["tracks"] = _Json(b"[" + b",".join(tracks) + b"]")
    return b',"' + FORMAT_KEY.encode() + b'":' + _object(ext) + b"}"


def dumps(rec: Recording) -> bytes:
    """The same text as orjson of `recording_to_doc(rec)` (byte for byte with orjson >=
    3.11.7's float layout), without a dict per sample or stack."""
    tail = _first_tail(rec)
    return _trace_json(rec.tracks[0].trace, "", tail)


def write_file(rec: Recording, f: BinaryIO) -> None:
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


def sniff_head(probe: Probe) -> bool:
    """jsprof and Chromium write one of the spec's tables first."""
    return probe.first_key in ("resources", "frames", "stacks", FORMAT_KEY)


def sniff(probe: Probe) -> bool:
    return probe.is_json and is_profiler_trace(probe.doc)


def read(probe: Probe) -> Recording:
    return read_bytes(probe.data, probe.source)


FORMAT = Format(
    name="jsprof",
    description="W3C JS Self-Profiling ProfilerTrace, with jsprof's extra track data",
    extensions=(".json", ".jsprof.json"),
    sniff_head=sniff_head,
    sniff=sniff,
    read=read,
    write=dumps,
    write_file=write_file,
)
