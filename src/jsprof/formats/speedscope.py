"""speedscope's file format (https://www.speedscope.app/file-format-schema.json): read and write.

Writing: one sampled profile per track, unit milliseconds, `shared.frames` with name,
file (the resource URL), line and col (both 1-based, as in the trace). Consecutive
samples with the same stack are merged into one entry whose weight is the time they
stand for (`trace.sample_weights`): a full stack per sample would make big
profiles huge. Samples without JavaScript become one-frame pseudo stacks (`(idle)`,
`(garbage collector)`, ...; see `_common`).

Merging loses the individual timestamps, markers and lines, so each profile carries one
extra key, `jsprof`, which the schema allows (it sets no `additionalProperties`) and the
viewer ignores:

    "jsprof": {"version": 1, "counts": [samples per entry], "timestamps": [ms per sample],
               "timeOrigin": epoch ms (absent: unknown), "engine", "sampleInterval",
               "requestedInterval",
               "markers": [code per sample, -1 none; codes index "markerNames"],
               "markerNames": [...], "lines": [line per sample, 0 unknown],
               "anonymousFrames": [shared frame indices written "(anonymous)" for ""],
               "weights": [ms per sample, only when the trace carries a weight column],
               "clock": "cpu" (the weights are CPU time: track meta `clock`)}

Timestamps are the trace's own (ms since `timeOrigin`), written at full float precision,
so a round trip through speedscope keeps every sample, its order and its time. Reading
uses the key only when it is present and consistent with the entries; a file from any
other producer (or one edited in a way that breaks the counts) falls back to the weights:
one sample per entry, at the entry's start (startValue plus the weights before it), so
time-weighted totals stay right. Where stacks are deep and change little from one entry to
the next (a 30,000-deep recursion), a track is written as an evented profile instead: frames
opened and closed at each entry's start where its stack differs from the one before, so
callers shared by consecutive stacks are written once (the same `jsprof` key; each entry is
the span between two event times). Unit `none` (counts, as speedscope's own folded import
writes) gives weight-many samples 1 ms apart; unit `bytes` is refused (not a time
profile). Evented profiles are read too: each span between two events becomes one sample
of the stack open during it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson

from ..errors import ErrorAt, TraceFormatError
from ..meta import CLOCK, CPU, clock_of
from ..trace import (
    MARKERS,
    NO_LINE,
    NONE,
    ProfilerTrace,
    Recording,
    Track,
    sample_weights,
    step_back,
)
from ._common import (
    PSEUDO_NAMES,
    FrameKey,
    build_trace,
    build_trace_tree,
    check_expansion,
    frame_keys,
    pseudo_index,
    stack_lists,
)
from ._format import Format, Probe
from ._json import type_name

SCHEMA_URL = "https://www.speedscope.app/file-format-schema.json"
EXTRA = "jsprof"
EXTRA_VERSION = 1
ANONYMOUS = "(anonymous)"
# Times and weights beyond this (ms) are refused: a double holds them to a fraction of a
# microsecond below it, and their gaps and sums stay finite for every writer.
MAX_MS = 2.0**53
UNIT_MS = {"nanoseconds": 1e-6, "microseconds": 1e-3, "milliseconds": 1.0, "seconds": 1000.0}


# ---- writing -----------------------------------------------------------------------------


class _SharedFrames:
    def __init__(self) -> None:
        self.index: dict[FrameKey, int] = {}
        self.frames: list[dict] = []
        self.anonymous: list[int] = []

    def get(self, key: FrameKey) -> int:
        i = self.index.get(key)
        if i is None:
            i = self.index[key] = len(self.frames)
            name, url, line, col = key
            # The viewer shows an empty name as a blank box; V8's "" is an anonymous function.
            d: dict[str, Any] = {"name": name or ANONYMOUS}
            if not name:
                self.anonymous.append(i)
            if url is not None:
                d["file"] = url
            if line is not None:
                d["line"] = line
            if col is not None:
                d["col"] = col
            self.frames.append(d)
        return i


def _profile(track: Track, shared: _SharedFrames) -> dict:
    trace = track.trace
    n = trace.num_samples
    keys = frame_keys(trace)
    # Shared frames in the order the samples first use them (root first), and only those:
    # the order reading interns them in, so a written file reads back and writes the same.
    fids: dict[int, int] = {}
    stacks: dict[int, list[int]] = {}

    def fid(f: int) -> int:
        return fids[f] if f in fids else fids.setdefault(f, shared.get(keys[f]))

    all_stacks: list | None = None

    def stack(k: int) -> list[int]:
        nonlocal all_stacks
        s = stacks.get(k)
        if s is None:
            if all_stacks is None:
                all_stacks = stack_lists(trace)
            s = stacks[k] = [fid(f) for f in all_stacks[k]]
        return s

    pseudo = pseudo_index(trace)
    key = np.where(trace.sample_stack != NONE, trace.sample_stack.astype(np.int64), -pseudo - 2)
    if n:
        starts = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))
        weights = np.add.reduceat(sample_weights(trace, track.sample_interval), starts)
        counts = np.diff(np.append(starts, n))
        start_value = float(trace.sample_time[0])
    else:
        starts = np.zeros(0, np.int64)
        weights = np.zeros(0)
        counts = np.zeros(0, np.int64)
        start_value = 0.0
    pseudo_stack: dict[int, list[int]] = {}

    def pseudo_fid(k: int) -> int:
        s = pseudo_stack.get(k)
        if s is None:
            s = pseudo_stack[k] = [shared.get((PSEUDO_NAMES[-k - 2], None, None, None))]
        return s[0]

    events = _events(trace, key[starts], weights, start_value, fid, pseudo_fid)
    samples: list[list[int]] = []
    for k in key[starts].tolist() if events is None else ():
        if k >= 0:
            samples.append(stack(k))
        else:
            s = pseudo_stack.get(k)
            if s is None:
                s = pseudo_stack[k] = [shared.get((PSEUDO_NAMES[-k - 2], None, None, None))]
            samples.append(s)
    extra: dict[str, Any] = {
        "version": EXTRA_VERSION,
        "counts": counts,
        "timestamps": trace.sample_time,
    }
    for k, v in (
        ("timeOrigin", track.time_origin),  # absent: unknown
        ("engine", track.engine),
        ("sampleInterval", track.sample_interval),
        ("requestedInterval", track.requested_interval),
    ):
        if v is not None:
            extra[k] = v
    if trace.sample_marker is not None:
        extra["markers"] = trace.sample_marker
        extra["markerNames"] = list(MARKERS)
    if trace.sample_line is not None:
        extra["lines"] = trace.sample_line
    if trace.sample_weight is not None:
        extra["weights"] = trace.sample_weight  # a filtered trace: gaps no longer imply them
        if clock_of(track.meta) == CPU:
            extra[CLOCK] = CPU  # the weights are CPU time (the samples' times are wall)
    end_value = start_value + float(weights.sum())
    if events is not None:
        return {
            "type": "evented",
            "name": track.name,
            "unit": "milliseconds",
            "startValue": start_value,
            "endValue": end_value,
            "events": events,
            EXTRA: extra,
        }
    return {
        "type": "sampled",
        "name": track.name,
        "unit": "milliseconds",
        "startValue": start_value,
        "endValue": end_value,
        "samples": samples,
        "weights": weights,
        EXTRA: extra,
    }


def _events(
    trace: Any, entries: np.ndarray, weights: np.ndarray, start: float,
    fid: Any, pseudo_fid: Any,
) -> list[dict] | None:
    """The entries (stack ids; a negative one a pseudo frame's) as an evented profile:
    frames closed and opened at each entry's start where its stack leaves the one before,
    so callers shared by consecutive stacks are written once (the sampled form repeats
    every stack whole: a 30,000-deep recursion made a 600 MB file of a 5.6 MB
    .cpuprofile). Walked up the stack table from both stacks to where they meet, never
    building a stack whole. None (write the sampled form) unless it is much smaller, or
    where an entry weighs nothing (it would have no span of its own to be read back as)."""
    if not len(entries) or not (weights > 0).all():
        return None
    par = trace.stack_parent
    sf = trace.stack_frame
    depth = trace.stack_depths() if trace.num_stacks else np.zeros(0, np.int32)
    ks = entries.tolist()
    whole = int(np.where(entries >= 0, depth[np.maximum(entries, 0)] if len(depth) else 1,
                         1).sum())
    # An event costs about five frame indices of JSON (its type, frame and time): worth it
    # below a fifth of the sampled form's indices. The first entries tell early.
    budget = whole // 5

    def diff(a: int | None, b: int | None) -> tuple[list[int], list[int]]:
        """Frames to close (innermost first) and to open (outermost first)."""
        closes: list[int] = []
        opens: list[int] = []
        if a is not None and a < 0:
            closes.append(pseudo_fid(a))
            a = None
        if b is not None and b < 0:
            opens.append(pseudo_fid(b))
            b = None
        da = int(depth[a]) if a is not None else 0
        db = int(depth[b]) if b is not None else 0
        while da > db:
            closes.append(int(sf[a]))
            p = int(par[a])
            a = None if p == NONE else p
            da -= 1
        up: list[int] = []
        while db > da:
            up.append(int(sf[b]))
            p = int(par[b])
            b = None if p == NONE else p
            db -= 1
        while a != b:
            closes.append(int(sf[a]))  # type: ignore[index]
            up.append(int(sf[b]))  # type: ignore[index]
            pa, pb = int(par[a]), int(par[b])  # type: ignore[index]
            a = None if pa == NONE else pa
            b = None if pb == NONE else pb
        return closes, opens + up[::-1]

    at = (start + np.concatenate(([0.0], np.cumsum(weights)))).tolist()
    out: list[dict] = []
    prev: int | None = None
    for j, k in enumerate([*ks, None]):
        closes, opens = diff(prev, k)
        t = at[j]
        # (a pseudo frame's is a shared index already; a trace frame's is mapped)
        shared_c = prev is not None and prev < 0
        shared_o = k is not None and k < 0
        out.extend({"type": "C", "frame": f if shared_c else fid(f), "at": t} for f in closes)
        out.extend({"type": "O", "frame": f if shared_o else fid(f), "at": t} for f in opens)
        prev = k
        if len(out) > budget or (j == 1000 and len(out) * len(ks) > budget * 1000):
            return None
    return out


def write(rec: Recording) -> bytes:
    if not rec.tracks:
        raise TraceFormatError("cannot write a recording with no tracks")
    shared = _SharedFrames()
    profiles = [_profile(t, shared) for t in rec.tracks]
    if shared.anonymous:
        for p in profiles:
            p[EXTRA]["anonymousFrames"] = shared.anonymous
    doc = {
        "$schema": SCHEMA_URL,
        "shared": {"frames": shared.frames},
        "profiles": profiles,
        "name": rec.tracks[0].name if len(rec.tracks) == 1 else "jsprof recording",
        "activeProfileIndex": 0,
        "exporter": "jsprof",
    }
    return orjson.dumps(doc, option=orjson.OPT_SERIALIZE_NUMPY)


# ---- reading -----------------------------------------------------------------------------


def _num(v: Any) -> bool:
    return type(v) in (int, float)


def _sniff_head(probe: Probe) -> bool:
    return probe.first_key == "$schema" and SCHEMA_URL.encode() in probe.data[:512]


def sniff(data: bytes, doc: Any) -> bool:
    if type(doc) is not dict:
        return False
    return doc.get("$schema") == SCHEMA_URL or ("shared" in doc and "profiles" in doc)


def _frames(doc: dict, err) -> list[FrameKey]:
    shared = doc.get("shared")
    if type(shared) is not dict:
        raise err("shared", "missing; a speedscope file needs shared.frames")
    frames = shared.get("frames")
    if type(frames) is not list:
        raise err("shared.frames", "missing" if frames is None else "expected an array")
    out: list[FrameKey] = []
    for i, f in enumerate(frames):
        if type(f) is not dict:
            raise err(f"shared.frames[{i}]", f"expected an object, got {type_name(f)}")
        name = f.get("name")
        if type(name) is not str:
            raise err(f"shared.frames[{i}].name", "missing or not a string")
        file = f.get("file")
        if file is not None and type(file) is not str:
            raise err(f"shared.frames[{i}].file", f"expected a string, got {type_name(file)}")
        pos: list[int | None] = []
        for k in ("line", "col"):
            v = f.get(k)
            if v is not None and not _num(v):
                raise err(f"shared.frames[{i}].{k}", f"expected a number, got {type_name(v)}")
            if v is not None and not v < 2**31:  # also NaN: positions are 32-bit everywhere
                raise err(f"shared.frames[{i}].{k}", f"is {v}; lines and columns end at 2**31-1")
            pos.append(int(v) if v is not None and v >= 1 else None)
        out.append((name, file or None, pos[0], pos[1]))
    return out


def _stack_keys(samples: list, nframes: int, err, where: str) -> tuple[list, np.ndarray]:
    """Unique stacks (as frame index tuples) and a per-entry index into them."""
    index: dict[tuple, int] = {}
    keys = np.empty(len(samples), np.int64)
    for j, s in enumerate(samples):
        if type(s) is not list:
            raise err(
                f"{where}.samples[{j}]", f"expected an array of frame indices, got {type_name(s)}"
            )
        t = tuple(s)
        k = index.get(t) if all(type(v) is int for v in t) else None
        if k is None:
            for v in t:
                if type(v) is not int or not 0 <= v < nframes:
                    raise err(
                        f"{where}.samples[{j}]",
                        f"{v!r} is not an index into shared.frames (0..{nframes - 1})",
                    )
            k = index[t] = len(index)
        keys[j] = k
    return list(index), keys


def _extra(p: dict, n_entries: int, n_frames: int) -> dict | None:
    """The `jsprof` key if present and consistent with the entries; else None (fall back)."""
    x = p.get(EXTRA)
    if type(x) is not dict or x.get("version") != EXTRA_VERSION:
        return None
    counts, ts = x.get("counts"), x.get("timestamps")
    if type(counts) is not list or type(ts) is not list or len(counts) != n_entries:
        return None
    try:
        c = np.array(counts, dtype=np.int64) if counts else np.zeros(0, np.int64)
        t = np.array(ts, dtype=np.float64) if ts else np.zeros(0)
    except (ValueError, TypeError, OverflowError):
        return None
    if c.ndim != 1 or t.ndim != 1 or (c < 1).any() or int(c.sum()) != len(t):
        return None
    # Times a double holds to the sub-microsecond and every writer writes back (null or a
    # boolean would have become NaN or 1 above): anything else is not jsprof's key.
    if not all(_num(v) for v in ts) or not (np.abs(t) < MAX_MS).all():
        return None
    if step_back(t) is not None:  # out of order, as every reader refuses: not jsprof's key
        return None
    out = {"counts": c, "timestamps": t}
    for k in ("markers", "lines"):
        v = x.get(k)
        if type(v) is list and len(v) == len(t):
            try:
                a = np.array(v, dtype=np.int64) if v else np.zeros(0, np.int64)
            except (ValueError, TypeError, OverflowError):
                continue
            if a.ndim == 1 and ((a >= -(2**31)) & (a < 2**31)).all():  # int32 columns
                out[k] = a
    w = x.get("weights")
    if type(w) is list and len(w) == len(t) and all(_num(v) for v in w):
        wa = np.array(w, dtype=np.float64) if w else np.zeros(0)
        if ((wa >= 0) & (wa < MAX_MS)).all():
            out["weights"] = wa
    names = x.get("markerNames")
    if "markers" in out:
        # Codes are indices into markerNames; map them to ours by name.
        if type(names) is not list or not all(type(s) is str for s in names):
            del out["markers"]
        else:
            lut = np.array([MARKERS.index(s) if s in MARKERS else NONE for s in names] + [NONE])
            m = out["markers"]
            m = np.where((m >= 0) & (m < len(names)), m, len(names))
            out["markers"] = lut[m].astype(np.int8)
    out["engine"] = x.get("engine")
    out["cpu"] = x.get(CLOCK) == CPU
    for k in ("timeOrigin", "sampleInterval", "requestedInterval"):
        # A time every format holds (as the jsprof reader bounds them), else unknown.
        v = x.get(k)
        out[k] = float(v) if _num(v) and abs(v) < MAX_MS else None
    anon = x.get("anonymousFrames")
    ok = type(anon) is list and all(type(i) is int and 0 <= i < n_frames for i in anon)
    out["anonymousFrames"] = anon if ok else []
    return out


def _from_extra(name: str, make: Any, keys: np.ndarray, x: dict) -> Track:
    """A profile's track from its entries' stacks (`make(key, times, markers, lines)`: the
    trace of those stacks, `build_trace`'s arguments less the stacks) and jsprof's key
    (`_extra`): every sample, its time, marker and line, as written."""
    key = np.repeat(keys, x["counts"])
    lines = x.get("lines")
    trace = make(key, x["timestamps"], x.get("markers"),
                 None if lines is None else np.maximum(lines, NO_LINE))
    trace.sample_weight = x.get("weights")
    origin = x["timeOrigin"]
    return Track(
        name,
        trace,
        time_origin=origin or None,  # 0: what "unknown" was written as before
        engine=x["engine"] if type(x["engine"]) is str else None,
        sample_interval=x["sampleInterval"],
        requested_interval=x["requestedInterval"],
        # CPU time only with the weights that hold it
        meta={CLOCK: CPU} if x.get("cpu") and trace.sample_weight is not None else {},
    )


def _sampled(p: dict, frames: list[FrameKey], err, where: str) -> Track:
    unit = p.get("unit")
    if unit == "bytes":
        raise err(f"{where}.unit", "is bytes: a memory profile; jsprof reads time profiles")
    if unit != "none" and (type(unit) is not str or unit not in UNIT_MS):
        raise err(f"{where}.unit", f"{unit!r} is not a speedscope unit")
    samples = p.get("samples")
    if type(samples) is not list:
        raise err(f"{where}.samples", "missing or not an array")
    weights = p.get("weights")
    if type(weights) is not list:
        raise err(f"{where}.weights", "missing or not an array")
    if len(weights) != len(samples):
        raise err(
            f"{where}.weights",
            f"has {len(weights)} entries but samples has {len(samples)}; each sample needs one",
        )
    try:
        w = np.array(weights) if weights else np.zeros(0)
    except (ValueError, TypeError):
        w = np.zeros(0, object)
    # np.array would turn "1" into a number under dtype=float; check the kinds first.
    if w.dtype.kind not in "iuf" or any(type(v) is bool for v in weights):
        bad = next((i for i, v in enumerate(weights) if not _num(v)), 0)
        raise err(f"{where}.weights[{bad}]", f"expected a number, got {type_name(weights[bad])}")
    w = w.astype(np.float64)
    if w.ndim != 1 or (bad_w := ~(w >= 0)).any():
        i = int(np.argmax(bad_w)) if w.ndim == 1 else 0
        raise err(f"{where}.weights[{i}]", "expected a number >= 0")
    start = p.get("startValue", 0)
    if not _num(start):
        raise err(f"{where}.startValue", f"expected a number, got {type_name(start)}")
    if not abs(start) < 2**53:  # also NaN and inf: a clock that fits a double exactly
        raise err(f"{where}.startValue", f"is {start}; expected a finite time below 2**53")
    uniq, keys = _stack_keys(samples, len(frames), err, where)
    x = _extra(p, len(samples), len(frames))
    if x is not None and x["anonymousFrames"]:
        frames = list(frames)
        for i in x["anonymousFrames"]:
            frames[i] = ("", *frames[i][1:])
    stacks = [[frames[i] for i in s] for s in uniq]
    # An empty stack: a sample without JavaScript and without a marker.
    stacks = [s or [(PSEUDO_NAMES[0], None, None, None)] for s in stacks]
    name = p.get("name") if type(p.get("name")) is str else "main"
    if x is not None:
        return _from_extra(
            name, lambda key, times, markers, lines: build_trace(stacks, key, times, markers,
                                                                  lines), keys, x)
    if unit == "none":

        # Weights are sample counts (speedscope's folded import writes these).
        check_expansion(int(min(float(w.sum()), 2.0**62)), err.source, f"{where}.weights")
        reps = np.rint(w).astype(np.int64)
        key = np.repeat(keys, reps)
        times = float(start) + np.arange(len(key), dtype=np.float64)
        return Track(name, build_trace(stacks, key, times))
    with np.errstate(over="ignore", invalid="ignore"):  # inf or NaN: refused just below
        ms = w * UNIT_MS[unit]
        times = float(start) * UNIT_MS[unit] + np.cumsum(ms) - ms
    if len(times) and not np.abs(times[-1] + ms[-1]) < MAX_MS:
        raise err(
            f"{where}.weights",
            "add up to more than 2**53 ms after startValue; is this file intact?",
        )
    if len(times) and not abs(times[0]) < MAX_MS:  # a unit bigger than ms scaled it past
        raise err(f"{where}.startValue", f"is {start:g} {unit}, beyond 2**53 ms once in ms")
    interval = float(np.median(ms[ms > 0])) if (ms > 0).any() else None
    trace = build_trace(stacks, keys, times)
    trace.sample_weight = ms  # the file's weights, the last entry's too
    return Track(name, trace, sample_interval=interval)


def _evented(p: dict, frames: list[FrameKey], err, where: str) -> Track:
    unit = p.get("unit")
    if type(unit) is not str or unit not in UNIT_MS:
        raise err(f"{where}.unit", f"{unit!r}: evented profiles need a time unit")
    events = p.get("events")
    if type(events) is not list:
        raise err(f"{where}.events", "missing or not an array")
    scale = UNIT_MS[unit]
    # The open frames as a path in a tree of nodes (parent node, frame index), each sample
    # the innermost open node: per event a dict lookup, not a tuple of the whole open
    # stack per sample (a recursion 30,000 deep: 40 s to read 3,000 samples).
    open_: list[int] = []  # the open frames' indices, innermost last
    path: list[int] = []  # their nodes
    child: dict[tuple[int, int], int] = {}
    node_parent: list[int] = []
    node_fr: list[int] = []
    index: dict[int, int] = {}  # node -> its unique stack's index, in order of first sample
    keys: list[int] = []
    times: list[float] = []
    prev = None
    for j, e in enumerate(events):
        if type(e) is not dict:
            raise err(f"{where}.events[{j}]", f"expected an object, got {type_name(e)}")
        kind, at, fr = e.get("type"), e.get("at"), e.get("frame")
        if kind not in ("O", "C"):
            raise err(f"{where}.events[{j}].type", f'expected "O" or "C", got {kind!r}')
        if not _num(at):
            raise err(f"{where}.events[{j}].at", "missing or not a number")
        if not abs(at * scale) < MAX_MS:
            raise err(f"{where}.events[{j}].at", f"is {at}; expected a time below 2**53 ms")
        if type(fr) is not int or not 0 <= fr < len(frames):
            raise err(f"{where}.events[{j}].frame", f"{fr!r} is not an index into shared.frames")
        if prev is not None and at < prev:
            raise err(f"{where}.events[{j}].at", "goes backwards; events must be in time order")
        if prev is not None and at > prev and open_:
            k = index.get(path[-1])
            if k is None:
                k = index[path[-1]] = len(index)
            keys.append(k)
            times.append(prev * scale)
        prev = at
        if kind == "O":
            up = path[-1] if path else -1
            n = child.get((up, fr))
            if n is None:
                n = child[up, fr] = len(node_fr)
                node_parent.append(up)
                node_fr.append(fr)
            open_.append(fr)
            path.append(n)
        elif not open_ or open_[-1] != fr:
            raise err(
                f"{where}.events[{j}]", f"closes frame {fr}, which is not the innermost open frame"
            )
        else:
            open_.pop()
            path.pop()
    name = p.get("name") if type(p.get("name")) is str else "main"
    # jsprof's own evented profiles (deep stacks) carry its key: one entry per span.
    x = _extra(p, len(keys), len(frames))
    if x is not None and x["anonymousFrames"]:
        frames = list(frames)
        for i in x["anonymousFrames"]:
            frames[i] = ("", *frames[i][1:])
    node_frame = [frames[i] for i in node_fr]
    sampled = list(index)

    def make(key: np.ndarray, times: np.ndarray, markers: Any = None, lines: Any = None
             ) -> ProfilerTrace:
        return build_trace_tree(node_parent, node_frame, sampled, key, times, markers, lines)

    if x is not None:
        return _from_extra(name, make, np.array(keys, np.int64), x)
    return Track(name, make(np.array(keys, np.int64), np.array(times, np.float64)))


def read(data: bytes, doc: Any, source: str) -> Recording:
    err = ErrorAt(source)

    if doc.get("$schema", SCHEMA_URL) != SCHEMA_URL:
        raise err("$schema", f"expected {SCHEMA_URL!r}; is this a speedscope file?")
    frames = _frames(doc, err)
    profiles = doc.get("profiles")
    if type(profiles) is not list or not profiles:
        raise err("profiles", "missing or empty; a speedscope file needs at least one profile")
    tracks = []
    names: set[str] = set()
    for i, p in enumerate(profiles):
        where = f"profiles[{i}]"
        if type(p) is not dict:
            raise err(where, f"expected an object, got {type_name(p)}")
        kind = p.get("type")
        if kind == "sampled":
            track = _sampled(p, frames, err, where)
        elif kind == "evented":
            track = _evented(p, frames, err, where)
        else:
            raise err(f"{where}.type", f'expected "sampled" or "evented", got {kind!r}')
        # Track names identify tracks; speedscope does not require them to differ.
        base, n = track.name, 2
        while track.name in names:
            track.name = f"{base} ({n})"
            n += 1
        names.add(track.name)
        tracks.append(track)
    return Recording(tracks)


FORMAT = Format(
    name="speedscope",
    description="speedscope JSON (sampled profiles; reads evented ones too)",
    extensions=(".speedscope.json",),
    sniff_head=_sniff_head,
    sniff=lambda p: p.is_json and sniff(p.data, p.doc),
    read=lambda p: read(p.data, p.doc, p.source),
    write=write,
)
