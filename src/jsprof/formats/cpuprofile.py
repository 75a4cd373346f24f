"""Chrome DevTools `.cpuprofile` (CDP `Profiler.Profile`, what `node --cpu-prof` writes):
read and write. The CDP shape itself, and its conversion, live in `_v8profile`.

PrimJS (Lynx's QuickJS-derived engine) writes a dialect: wrapped as `{"profile": {...}}`
and recording a sample only when the node changes while `hitCount` counts every tick.
Only for that dialect are the missing repeats restored (and counted in the track's meta
as `synthesizedSamples`): V8 counts its hitCounts from its samples.
"""

from __future__ import annotations

from typing import Any

import orjson

from ..errors import TraceFormatError, UsageError
from ..trace import ProfilerTrace, Recording, Track
from ._format import Format, Probe
from ._v8profile import profile_to_trace, profile_to_trace_counted, trace_to_profile

__all__ = ["profile_to_trace", "read", "sniff", "trace_to_profile", "write"]

# Where a file gives no time origin we keep its startTime here, so writing it back
# restores the original absolute microseconds.
META_START = "cpuprofileStartTime"
# The engine of a trace that was not recorded on V8 (a converted QuickJS trace).
ENGINE_KEY = "jsprofEngine"
# How many samples were restored from PrimJS's hitCounts (they were not in the file).
META_SYNTHESIZED = "synthesizedSamples"


def sniff(data: bytes, doc: Any) -> bool:
    if type(doc) is not dict:
        return False
    inner = doc.get("profile")
    if type(inner) is dict and "nodes" in inner:
        return True
    return "nodes" in doc and ("startTime" in doc or "samples" in doc)


def unwrap(doc: Any) -> tuple[dict, str]:
    """The Profile object and the path prefix for messages (`profile.` for PrimJS/CDP replies)."""
    if type(doc) is dict and type(doc.get("profile")) is dict and "nodes" not in doc:
        return doc["profile"], "profile."
    return doc, ""


def read(data: bytes, doc: Any, source: str) -> Recording:
    """Read from the parsed document (its checks name the field and index)."""
    profile, prefix = unwrap(doc)
    # Only PrimJS wraps its profile (`{"profile": {...}}`) and lists changes only; V8's
    # hitCounts are counted from its samples, so a surplus there is not ours to invent.
    converted = profile_to_trace_counted(profile, source, prefix=prefix, changes_only=bool(prefix))
    engine = profile.get(ENGINE_KEY) if type(profile) is dict else None
    return _recording(*converted, primjs=bool(prefix), engine=engine)


def read_probe(probe: Probe) -> Recording:
    """The typed path first (no Python object per sample); the parsed document when it
    gives up, which then also words any error."""
    from ._v8profile_typed import typed_profile_to_trace  # msgspec: for reading only

    wrapped = probe.first_key == "profile"
    converted = typed_profile_to_trace(probe.data, probe.source, wrapped)
    if converted is None:
        return read(probe.data, probe.doc, probe.source)
    *converted, engine = converted
    return _recording(*converted, primjs=wrapped, engine=engine)


def _recording(
    trace: ProfilerTrace, origin: float, added: int, primjs: bool, engine: Any = None
) -> Recording:
    gap = trace.median_gap()
    interval = None if gap is None else round(gap, 4)
    meta: dict = {META_START: origin}
    if added:
        meta[META_SYNTHESIZED] = added
    return Recording(
        [
            Track(
                "main",
                trace,
                time_origin=None,  # startTime is on V8's monotonic clock: no epoch
                engine=engine if type(engine) is str else None if primjs else "v8",
                sample_interval=interval,
                meta=meta,
            )
        ]
    )


# ---- writing -----------------------------------------------------------------------------


def write(rec: Recording) -> bytes:
    if not rec.tracks:
        raise TraceFormatError("cannot write a recording with no tracks")
    if len(rec.tracks) > 1:
        names = ", ".join(repr(t.name) for t in rec.tracks)
        raise UsageError(
            f"a .cpuprofile holds one thread but this recording has {len(rec.tracks)} tracks "
            f"({names}); write a .jsprof.json, or pick one with --track NAME"
        )
    return write_track(rec.tracks[0])


def write_track(track: Track) -> bytes:
    start = track.meta.get(META_START)
    start_us = float(start) if isinstance(start, int | float) else 0.0
    profile = trace_to_profile(track.trace, start_us)
    if track.engine not in (None, "v8"):
        # A converted trace keeps its engine: an extra key that V8's tools ignore.
        profile[ENGINE_KEY] = track.engine
    return orjson.dumps(profile)


FORMAT = Format(
    name="cpuprofile",
    description="Chrome DevTools / node --cpu-prof CPU profile (also PrimJS's dialect)",
    extensions=(".cpuprofile",),
    sniff_head=lambda p: p.first_key == "nodes",
    sniff=lambda p: p.is_json and sniff(p.data, p.doc),
    read=read_probe,
    write=write,
)
