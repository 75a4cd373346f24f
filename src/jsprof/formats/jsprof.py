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

from ..errors import TraceFormatError
from ..trace import (
    MARKERS,
    NONE,
    ProfilerTrace,
    Recording,
)
from ._format import Format, Probe
from ._json import gc_paused, parse_json
from ._jsprof_read import (  # the validating reader, keys and limits: below this module
    _MARKER_JSON,  # noqa: F401 - tests read it here
    FORMAT_KEY,
    FORMAT_VERSION,
    _Ctx,
    is_profiler_trace,
    recording_from_doc,
)

# The writer, numpy-free (it also writes recorded.py's columns): its own module.
from ._jsprof_write import dumps, frame_dicts, track_ext, write_file


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


def trace_to_doc(trace: ProfilerTrace) -> dict:
    """The spec's ProfilerTrace as a JSON-able dict (keys absent where the spec omits them)."""
    frames = frame_dicts(trace)
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


def recording_to_doc(rec: Recording) -> dict:
    if not rec.tracks:
        raise TraceFormatError("cannot write a recording with no tracks")
    first, *rest = rec.tracks
    doc = trace_to_doc(first.trace)
    ext = {"formatVersion": FORMAT_VERSION, **track_ext(first)}
    if rest:
        ext["tracks"] = [{**track_ext(t), "trace": trace_to_doc(t.trace)} for t in rest]
    doc[FORMAT_KEY] = ext
    return doc


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
