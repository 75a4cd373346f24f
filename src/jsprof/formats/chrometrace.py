"""Chrome trace-event JSON: CPU profiles embedded the way Chrome does (Profile + ProfileChunk).

Writing: per track, a `Profile` event and `ProfileChunk` events (category
`disabled-by-default-v8.cpu_profiler`, phase `P`, linked by `id` and `pid`) carrying the
nodes (with `parent`, each node once, in the chunk that first uses it), `samples`,
`timeDeltas` (µs, a sibling of `cpuProfile`) and `lines`; a trace with per-sample
weights (a filtered, instrumented or merged one: the time each sample stands for is not
the gap to the next) or counts (merged) carries them beside those, `jsprofWeights` (ms)
and `jsprofCounts`, which viewers skip and reading takes back; plus `thread_name` /
`process_name` metadata. Instrumented calls become complete (`X`) events (category
`jsprof.span`) named as every output names their function, the frame's URL, line and
column in `args` (`function: ""` for one with no name), the caller by its number among the
track's calls (`jsprofParent`: a coarse clock leaves times alone ambiguous) and, when the
spans keep fields of their own, those (`jsprofArgs`); the page's windows (long animation
frames with their script entries, interactions) nestable async slices (`b`/`e`, category
`jsprof.timeline`, their fields in `args`). Times are microseconds since the Unix epoch
(the track's time origin + sample time), so tracks from different runtimes line up on one
clock; a track whose origin is unknown is written relative to 0. Precision is 1 µs, as in
Chrome's own files; spans are placed from the profile's (whole µs) start, which reading
measures them from.

Reading keeps both as the track's spans: a call's frame is found among the frames its
samples brought (or added, for a function no sample shows).

Reading: the same events (as a bare array or `{"traceEvents": [...]}`) from jsprof or from
Chrome DevTools' Performance panel, and the `CpuProfile` instant event DevTools also
accepts. Each profile becomes one track; its nodes are turned into a CDP profile and
converted by `formats.cpuprofile`, so both formats share one set of V8 rules. A profile
that starts at an epoch time (`trace.epoch_origin`: what jsprof writes) keeps it as its
time origin; Chrome's own files stamp a boot-time clock, so their origin is unknown and
their profiles share one time 0, the earliest profile's start, to stay aligned.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import orjson

from ..errors import ErrorAt, TraceFormatError, shown
from ..meta import CLOCK, CPU, clock_of
from ..timeline import span_args_problem
from ..trace import (
    MAX_MS,
    NONE,
    SPAN_KIND_CODE,
    SPAN_KINDS,
    Recording,
    SpanColumns,
    Spans,
    Track,
    epoch_origin,
    spans_in_order,
)
from ._common import (
    FrameFinder,
    call_frame_key,
    call_slice,
    canonical,
    counts_problem,
    weights_problem,
)
from ._format import Format, Probe
from ._v8profile import profile_to_trace, trace_to_profile

CATEGORY = "disabled-by-default-v8.cpu_profiler"
CHUNK_SAMPLES = 5000  # V8 flushes every 100 samples; bigger chunks keep files smaller
PID = 1
ENGINE_KEY = "jsprofEngine"  # in thread_name's args: the engine of a non-V8 track
CLOCK_KEY = "jsprofClock"  # in thread_name's args: "cpu" when the weights are CPU time
WINDOWS = "jsprof.timeline"  # the category of the page's windows (async slices)
KIND_KEY = "jsprofKind"  # in a window's args: long-frame, script, interaction
CALLS = "jsprof.span"  # the category of instrumented calls (complete events)
PARENT_KEY = "jsprofParent"  # in a call's args: its caller's number among the calls
ARGS_KEY = "jsprofArgs"  # in a call's args: the span's own fields
WEIGHTS_KEY = "jsprofWeights"  # in a chunk's args.data: ms per sample (the trace's weights)
COUNTS_KEY = "jsprofCounts"  # in a chunk's args.data: samples each stands for (merged)


def _err(source: str, where: str, problem: str) -> TraceFormatError:
    return ErrorAt(source)(where, problem)


# ---- writing -----------------------------------------------------------------------------


def _id(v: object, default: int) -> int:
    """A pid or tid from a track's meta, if it is one a trace event can carry."""
    return v if type(v) is int and 0 <= v < 2**63 else default


def _track_events(track: Track, index: int, threads: set[tuple[int, int]]) -> list[dict]:
    pid = _id(track.meta.get("pid"), PID)
    tid = _id(track.meta.get("tid"), index + 1)
    # Reading names a profile by its thread's thread_name: two tracks on one thread (two
    # profiles of it) would both read back under the last name, so a later one moves.
    while (pid, tid) in threads:
        tid = (tid + 1) % 2**63
    threads.add((pid, tid))
    # Unknown origin: times relative to 0, far below any epoch time, so they read back
    # as unknown again.
    origin_us = (track.time_origin or 0.0) * 1000.0
    # Chunks carry only the nodes samples use, so the stacks are numbered as reading
    # numbers what it gets back (`canonical`): write(read(x)) gives x byte for byte.
    trace = canonical(track.trace)
    prof = trace_to_profile(trace, origin_us)
    pid_id = f"0x{index + 1:x}"
    base = {"ph": "P", "cat": CATEGORY, "id": pid_id, "pid": pid, "tid": tid}
    thread_args: dict[str, Any] = {"name": track.name}
    if track.engine not in (None, "v8"):
        thread_args[ENGINE_KEY] = track.engine  # a converted trace keeps its engine
    if clock_of(track.meta) == CPU and track.trace.sample_weight is not None:
        thread_args[CLOCK_KEY] = CPU  # the weights are CPU time (the times are wall)
    events: list[dict] = [
        {"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": thread_args},
        {
            "name": "Profile",
            **base,
            "ts": prof["startTime"],
            "args": {"data": {"startTime": prof["startTime"]}},
        },
    ]
    # Nodes with `parent` instead of `children`, emitted in the chunk that first needs them.
    parent_of: dict[int, int] = {}
    for nd in prof["nodes"]:
        for c in nd.get("children", ()):
            parent_of[c] = nd["id"]
    node_by_id = {nd["id"]: nd for nd in prof["nodes"]}
    emitted = np.zeros(len(prof["nodes"]) + 2, dtype=bool)  # node ids are 1..n
    samples = np.asarray(prof["samples"], dtype=np.int64)
    deltas = prof["timeDeltas"]
    chunk_end_ts = prof["startTime"] + np.cumsum(np.asarray(deltas, dtype=np.int64))
    lines = trace.sample_line

    def chunk_nodes(ids: list[int]) -> list[dict]:
        """The nodes this chunk uses that no earlier chunk emitted, parents first."""
        out: list[dict] = []
        for nid in ids:
            chain = []
            while not emitted[nid]:
                chain.append(nid)
                emitted[nid] = True
                p = parent_of.get(nid)
                if p is None:
                    break
                nid = p
            for n in reversed(chain):
                nd = node_by_id[n]
                cf = {
                    k: v for k, v in nd["callFrame"].items() if not (k.endswith("Number") and v < 0)
                }
                cf["scriptId"] = int(cf.get("scriptId", 0))
                cf["codeType"] = (
                    "other" if cf["functionName"].startswith("(") and not cf["url"] else "JS"
                )
                node = {"id": n, "callFrame": cf}
                if n in parent_of:
                    node["parent"] = parent_of[n]
                out.append(node)
        return out

    n = len(samples)
    for lo in range(0, max(n, 1), CHUNK_SAMPLES):
        hi = min(n, lo + CHUNK_SAMPLES)
        part = samples[lo:hi]
        # Only ids no earlier chunk emitted need the (Python) walk up their parents.
        used = np.unique(part) if len(part) else np.array([1], np.int64)
        fresh = used[~emitted[used]].tolist()
        data: dict[str, Any] = {
            "cpuProfile": {"nodes": chunk_nodes(fresh), "samples": part.tolist()},
            "timeDeltas": deltas[lo:hi],
        }
        if lines is not None and (lines[lo:hi] != 0).any():
            data["lines"] = lines[lo:hi].tolist()
        # What timeDeltas cannot say: the time each sample stands for when that is not the
        # gap to the next one (a filtered, instrumented or merged trace), and a merged
        # profile's counts. Viewers read only the keys they know.
        if trace.sample_weight is not None:
            data[WEIGHTS_KEY] = trace.sample_weight[lo:hi].tolist()
        if trace.sample_count is not None:
            data[COUNTS_KEY] = trace.sample_count[lo:hi].tolist()
        ts = int(chunk_end_ts[hi - 1]) if hi > lo else prof["startTime"]
        events.append({"name": "ProfileChunk", **base, "ts": ts, "args": {"data": data}})
    events.append(
        {
            "name": "ProfileChunk",
            **base,
            "ts": prof["endTime"],
            "args": {"data": {"endTime": prof["endTime"]}},
        }
    )
    if track.spans is not None and len(track.spans):
        # On the profile's clock: reading measures spans from its (whole µs) startTime.
        zero_us = float(prof["startTime"])
        events.extend(_span_events(track, pid, tid, zero_us))
        events.extend(_window_events(track, index, pid, tid, zero_us))
    return events


def _window_events(track: Track, index: int, pid: int, tid: int, zero_us: float) -> list[dict]:
    """The page's windows as nestable async slices (`b`/`e`, category WINDOWS): they may
    overlap (an interaction and a long frame), which complete events on one thread may
    not. A long frame and its script entries share an id, so they nest."""
    s = track.spans
    assert s is not None
    out = []
    kinds = s.kind.tolist()  # type: ignore[union-attr]
    parents = s.parent.tolist()
    ids: dict[int, str] = {}
    for i, k in enumerate(kinds):
        if k == SPAN_KIND_CODE["call"]:
            continue
        p = parents[i]
        sid = ids[p] if p in ids else f"0x{index + 1:x}.{i:x}"
        ids[i] = sid
        name = s.label(i) or SPAN_KINDS[k]
        base = {"name": name, "cat": WINDOWS, "id": sid, "pid": pid, "tid": tid}
        out.append({**base, "ph": "b", "ts": round(zero_us + float(s.start[i]) * 1000.0, 3),
                    "args": {**s.arg(i), KIND_KEY: SPAN_KINDS[k]}})
        out.append({**base, "ph": "e", "ts": round(zero_us + float(s.end[i]) * 1000.0, 3)})
    # Nested ones must close before their parent: order by time, ends before begins at one
    # time, a child's end (later in the list) before its parent's.
    order = sorted(range(len(out)), key=lambda j: (out[j]["ts"], out[j]["ph"] == "b",
                                                    -j if out[j]["ph"] == "e" else j))
    return [out[j] for j in order]


def _span_events(track: Track, pid: int, tid: int, zero_us: float) -> list[dict]:
    """Instrumented calls as complete events (category CALLS), in span order: the frame
    by its identity (`call_slice`), the caller by its number among the track's calls
    (PARENT_KEY; times alone cannot tell who called whom when a clock ticks coarsely), the
    call's own fields, if the spans keep any, under ARGS_KEY."""
    s = track.spans
    assert s is not None
    frames, res = track.trace.frames, track.trace.resources
    out = []
    calls = np.nonzero(s.kind == SPAN_KIND_CODE["call"])[0].tolist()
    number = {i: n for n, i in enumerate(calls)}
    starts, ends = s.start.tolist(), s.end.tolist()
    fids, parents = s.frame.tolist(), s.parent.tolist()
    for i in calls:
        name, args = call_slice(frames[fids[i]], res)
        if parents[i] in number:
            args[PARENT_KEY] = number[parents[i]]
        if s.args is not None:
            args[ARGS_KEY] = s.arg(i)
        out.append(
            {
                "name": name,
                "cat": CALLS,
                "ph": "X",
                "pid": pid,
                "tid": tid,
                "ts": round(zero_us + starts[i] * 1000.0, 3),
                "dur": round((ends[i] - starts[i]) * 1000.0, 3),
                "args": args,
            }
        )
    return out


def write(rec: Recording) -> bytes:
    if not rec.tracks:
        raise TraceFormatError("cannot write a recording with no tracks")
    events: list[dict] = [
        {"name": "process_name", "ph": "M", "pid": PID, "tid": 0, "args": {"name": "jsprof"}}
    ]
    threads: set[tuple[int, int]] = set()
    for i, t in enumerate(rec.tracks):
        events.extend(_track_events(t, i, threads))
    return orjson.dumps({"traceEvents": events, "displayTimeUnit": "ms"})


# ---- reading -----------------------------------------------------------------------------


def _events(doc: Any) -> list | None:
    if type(doc) is list:
        return doc
    if type(doc) is dict and type(doc.get("traceEvents")) is list:
        return doc["traceEvents"]
    return None


_HEAD = re.compile(rb'\s*(\[\s*\{\s*"(name|ph|cat|pid|tid|ts|args)"|\{\s*"traceEvents"\s*:)')


def _sniff_head(probe: Probe) -> bool:
    """An array whose first object starts with an event key, or `{"traceEvents": ...`."""
    return _HEAD.match(probe.data, 0, 4096) is not None


def sniff(data: bytes, doc: Any) -> bool:
    """Any trace-event file: reading then says so if it holds no CPU profile."""
    events = _events(doc)
    return bool(events) and all(type(e) is dict and "ph" in e for e in events[:10])


class _Profile:
    def __init__(self, pid: Any, tid: Any, start: float) -> None:
        self.pid, self.tid, self.start = pid, tid, start
        self.nodes: list[dict] = []
        self.samples: list = []
        self.deltas: list = []
        self.lines: list = []
        # per chunk with samples: its weights / counts, or None where it has none
        self.weights: list[list | None] = []
        self.counts: list[list | None] = []


def _num(source: str, where: str, v: Any) -> float:
    if type(v) not in (int, float):
        raise _err(source, where, "expected a number")
    return float(v)


_SCALARS = (int, float, str, type(None))


def _collect(events: list, source: str, cpu_clock: set) -> tuple[list[_Profile], dict, dict,
                                                                 dict, dict]:
    """Profiles, thread names, engines, windows and calls by thread; `cpu_clock` gets the
    threads whose weights are CPU time."""
    profiles: dict[tuple, _Profile] = {}
    names: dict[tuple, str] = {}
    engines: dict[tuple, str] = {}
    windows: dict[tuple, list[tuple[int, dict]]] = {}
    calls: dict[tuple, list[tuple[int, dict]]] = {}
    for i, e in enumerate(events):
        if type(e) is not dict:
            raise _err(source, f"traceEvents[{i}]", "expected an event object")
        name = e.get("name")
        where = f"traceEvents[{i}]"
        for key in ("pid", "tid", "id"):
            if type(e.get(key)) not in _SCALARS:
                raise _err(source, f"{where}.{key}", "expected a number or a string")
        if e.get("cat") == WINDOWS and e.get("ph") in ("b", "e"):
            windows.setdefault((e.get("pid"), e.get("tid")), []).append((i, e))
        elif e.get("cat") == CALLS and e.get("ph") == "X":
            calls.setdefault((e.get("pid"), e.get("tid")), []).append((i, e))
        elif name == "thread_name" and e.get("ph") == "M":
            a = e.get("args")
            if type(a) is dict and type(a.get("name")) is str:
                names[(e.get("pid"), e.get("tid"))] = a["name"]
            if type(a) is dict and type(a.get(ENGINE_KEY)) is str:
                engines[(e.get("pid"), e.get("tid"))] = a[ENGINE_KEY]
            if type(a) is dict and a.get(CLOCK_KEY) == CPU:
                cpu_clock.add((e.get("pid"), e.get("tid")))
        elif name == "Profile":
            data = (e.get("args") or {}).get("data") if type(e.get("args")) is dict else None
            start = data.get("startTime", e.get("ts")) if type(data) is dict else e.get("ts")
            key = (e.get("pid"), e.get("id"))
            profiles[key] = _Profile(e.get("pid"), e.get("tid"), _num(source, f"{where}.ts", start))
        elif name == "ProfileChunk":
            key = (e.get("pid"), e.get("id"))
            prof = profiles.get(key)
            if prof is None:
                raise _err(
                    source, where, f"ProfileChunk for id {e.get('id')!r} before its Profile event"
                )
            args = e.get("args")
            data = args.get("data") if type(args) is dict else None
            if type(data) is not dict:
                raise _err(source, f"{where}.args.data", "missing")
            cpu = data.get("cpuProfile")
            if cpu is None:
                continue  # the closing chunk with only endTime
            if type(cpu) is not dict:
                raise _err(source, f"{where}.args.data.cpuProfile", "expected an object")
            nodes, samples = cpu.get("nodes", []), cpu.get("samples", [])
            deltas = data.get("timeDeltas", [])
            if type(nodes) is not list or type(samples) is not list or type(deltas) is not list:
                raise _err(
                    source, f"{where}.args.data", "nodes, samples and timeDeltas must be arrays"
                )
            if len(deltas) != len(samples):
                raise _err(
                    source,
                    f"{where}.args.data.timeDeltas",
                    f"has {len(deltas)} entries but samples has {len(samples)}",
                )
            lines = data.get("lines")
            if lines is not None and (type(lines) is not list or len(lines) != len(samples)):
                raise _err(source, f"{where}.args.data.lines", "must be an array, one per sample")
            for j, ln in enumerate(lines or ()):
                # Lines are 1-based, 0 unknown (V8), and 32-bit in every engine and format.
                if type(ln) is not int or not 0 <= ln < 2**31:
                    raise _err(
                        source,
                        f"{where}.args.data.lines[{j}]",
                        f"expected a line number (0 for unknown), got {ln!r}"[:200],
                    )
            for key, column, problem in ((WEIGHTS_KEY, prof.weights, weights_problem),
                                         (COUNTS_KEY, prof.counts, counts_problem)):
                v = data.get(key)
                if v is not None and (type(v) is not list or len(v) != len(samples)):
                    raise _err(source, f"{where}.args.data.{key}",
                               "must be an array, one per sample")
                if v is not None and (bad := problem(v)) is not None:
                    raise _err(source, f"{where}.args.data.{key}[{bad[0]}]", bad[1])
                column.append(v)
            prof.nodes.extend(nodes)
            prof.samples.extend(samples)
            prof.deltas.extend(deltas)
            prof.lines.extend(lines if lines is not None else [0] * len(samples))
        elif name == "CpuProfile":
            data = (e.get("args") or {}).get("data") if type(e.get("args")) is dict else None
            cpu = data.get("cpuProfile") if type(data) is dict else None
            if type(cpu) is not dict:
                raise _err(source, f"{where}.args.data.cpuProfile", "expected a CDP profile object")
            start = _num(source, f"{where}.args.data.cpuProfile.startTime", cpu.get("startTime", 0))
            p = _Profile(e.get("pid"), e.get("tid"), start)
            p.nodes = cpu.get("nodes", [])
            p.samples = cpu.get("samples", [])
            p.deltas = cpu.get("timeDeltas", data.get("timeDeltas", []))
            p.lines = []
            profiles[("cpu", i)] = p
    return list(profiles.values()), names, engines, windows, calls


def _read_spans(
    calls: list[tuple[int, dict]],
    windows: list[tuple[int, dict]],
    zero_us: float,
    find: FrameFinder,
    source: str,
) -> Spans | None:
    """The calls (`_span_events`) and the page's windows (`_window_events`) jsprof wrote,
    back as spans on the clock of the track whose time 0 is `zero_us`; the calls' frames
    found (or added) by `find`. A window that never ends is left out."""
    cols = SpanColumns()

    def ms(where: str, ts: float) -> float:
        """`ts` on the track's clock; what the jsprof format would refuse is refused here."""
        t = (ts - zero_us) / 1000.0
        if not abs(t) < MAX_MS:
            raise _err(source, where, f"{ts:g} µs is beyond 2**53 ms from the profile's start")
        return t

    for n, (i, e) in enumerate(calls):
        where = f"traceEvents[{i}]"
        ts = _num(source, f"{where}.ts", e.get("ts"))
        dur = _num(source, f"{where}.dur", e.get("dur"))
        if not 0 <= dur < MAX_MS:
            raise _err(source, f"{where}.dur", f"{dur:g} is not a duration (µs from 0 to 2**53)")
        a = e.get("args")
        if type(a) is not dict:
            raise _err(source, f"{where}.args", "expected an object")
        key, bad = call_frame_key(e.get("name"), a)
        if key is None:
            k, _, problem = bad.partition(": ")
            raise _err(source, f"{where}.{'args.' if k != 'name' else ''}{k}", problem)
        parent = a.get(PARENT_KEY, NONE)
        if parent != NONE and (type(parent) is not int or not 0 <= parent < n):
            raise _err(source, f"{where}.args.{PARENT_KEY}",
                       f"{shown(parent)} is not the number of an earlier call")
        own = a.get(ARGS_KEY)
        if own is not None and (type(own) is not dict
                                or any(type(v) not in (*_SCALARS, bool) for v in own.values())):
            raise _err(source, f"{where}.args.{ARGS_KEY}",
                       "expected an object of strings and numbers")
        # end from the duration, not ts + dur (a double holds epoch µs to 1/4 µs only)
        start = ms(f"{where}.ts", ts)
        end = start + dur / 1000.0
        if not abs(end) < MAX_MS:
            raise _err(source, f"{where}.dur", f"ends {end:g} ms from the profile's start, "
                       "beyond 2**53 ms")
        cols.add("call", start, end, parent=parent, frame=find(key), args=own)
    open_: dict[Any, list[int]] = {}
    for i, e in windows:
        where = f"traceEvents[{i}]"
        ts = _num(source, f"{where}.ts", e.get("ts"))
        stack = open_.setdefault(e.get("id"), [])
        if e["ph"] == "e":
            if not stack:
                raise _err(source, where, "a window's end with no begin of its id before it")
            j = stack.pop()
            cols.end[j] = ms(f"{where}.ts", ts)
            if cols.end[j] < cols.start[j]:
                raise _err(source, f"{where}.ts", "a window's end before its begin")
            continue
        a = e.get("args")
        if type(a) is not dict or any(type(v) not in (*_SCALARS, bool) for v in a.values()):
            raise _err(source, f"{where}.args", "expected an object of strings and numbers")
        a = dict(a)
        k = a.pop(KIND_KEY, None)
        if k not in SPAN_KIND_CODE or k == "call":
            raise _err(source, f"{where}.args.{KIND_KEY}", f"{shown(k)} is not a kind of window")
        bad = span_args_problem(k, a)  # its fields are computed with (--during, Time view)
        if bad is not None:
            raise _err(source, f"{where}.args.{bad[0]}", bad[1])
        label = e.get("name")
        if type(label) is not str:
            raise _err(source, f"{where}.name", "expected a string")
        stack.append(cols.add(k, ms(f"{where}.ts", ts), parent=stack[-1] if stack else NONE,
                              label=label, args=a))
    spans = cols.build()
    # A window's parent never ended: its children float (build renumbers the kept ones).
    return spans_in_order(spans) if len(spans) else None


def _as_cdp(prof: _Profile, source: str, where: str) -> dict:
    """Chunk nodes (with `parent`) as a CDP profile (with `children`)."""
    nodes = []
    children: dict[Any, list] = {}
    for j, nd in enumerate(prof.nodes):
        if type(nd) is not dict:
            raise _err(source, f"{where}.nodes[{j}]", "expected a node object")
        if "parent" in nd:
            if type(nd["parent"]) is not int:
                raise _err(source, f"{where}.nodes[{j}].parent", "expected a node id")
            children.setdefault(nd["parent"], []).append(nd.get("id"))
    for nd in prof.nodes:
        cf = nd.get("callFrame")
        if type(cf) is dict:  # anything else: the CDP checks name it
            cf = dict(cf)
            cf["scriptId"] = str(cf.get("scriptId", "0"))
            cf.setdefault("url", "")
            cf.setdefault("lineNumber", -1)
            cf.setdefault("columnNumber", -1)
        out = {"id": nd.get("id"), "callFrame": cf}
        if "children" in nd:
            out["children"] = nd["children"]
        elif type(nd.get("id")) is int and nd["id"] in children:
            out["children"] = children[nd["id"]]
        nodes.append(out)
    return {
        "nodes": nodes,
        "startTime": prof.start,
        "samples": prof.samples,
        "timeDeltas": prof.deltas,
    }


def _column(chunks: list[list | None], dtype: Any, n: int, key: str, source: str,
            where: str) -> np.ndarray | None:
    """A profile's per-sample column `key` from its chunks: None when no chunk has it."""
    if all(c is None for c in chunks):
        return None
    if any(c is None for c in chunks):
        raise _err(source, f"{where}: ProfileChunk args.data.{key}",
                   "in some of the profile's chunks only; is this file intact?")
    col = np.asarray([v for c in chunks for v in c], dtype)  # type: ignore[union-attr]
    if len(col) != n:
        raise _err(source, f"{where}: ProfileChunk args.data.{key}",
                   f"has {len(col)} entries but the profile has {n} samples")
    return col


def read(data: bytes, doc: Any, source: str) -> Recording:
    events = _events(doc)
    if events is None:
        raise _err(source, "(top level)", "expected a trace-event array or {traceEvents: [...]}")
    cpu_clock: set[tuple] = set()
    profiles, names, engines, windows, calls = _collect(events, source, cpu_clock)
    if not profiles:
        raise _err(
            source, "traceEvents", "no CPU profile (Profile/ProfileChunk events) in this trace"
        )
    tracks: list[Track] = []
    used: set[str] = set()
    # Profiles on a clock without an epoch share one time 0, so they stay aligned.
    # (A start beyond 2**53 µs is refused by the conversion, not made everyone's zero.)
    unknown = [
        p.start for p in profiles if epoch_origin(p.start / 1000.0) is None and p.start > -(2**53)
    ]
    shared_zero = min(unknown) if unknown else 0.0
    for k, p in enumerate(profiles):
        where = f"profile {k + 1}"
        origin = epoch_origin(p.start / 1000.0)
        trace, _ = profile_to_trace(
            _as_cdp(p, source, where),
            source,
            p.start if origin is not None else shared_zero,
            f"{where}: ",
        )
        if any(p.lines) and len(p.lines) == trace.num_samples:
            trace.sample_line = np.asarray(p.lines, dtype=np.int32)
        trace.sample_weight = _column(p.weights, np.float64, trace.num_samples, WEIGHTS_KEY,
                                      source, where)
        trace.sample_count = _column(p.counts, np.int64, trace.num_samples, COUNTS_KEY,
                                     source, where)
        name = names.get((p.pid, p.tid), f"pid {p.pid} tid {p.tid}")
        while name in used:
            name += "'"
        used.add(name)
        engine = engines.get((p.pid, p.tid), "v8")
        track = Track(name, trace, time_origin=origin, engine=engine)
        if (p.pid, p.tid) in windows or (p.pid, p.tid) in calls:
            zero = p.start if origin is not None else shared_zero
            track.spans = _read_spans(calls.pop((p.pid, p.tid), []),
                                      windows.pop((p.pid, p.tid), []), zero,
                                      FrameFinder(trace), source)
        track.meta = (
            {"pid": p.pid, "tid": p.tid}
            if isinstance(p.pid, int) and isinstance(p.tid, int)
            else {}
        )
        if (p.pid, p.tid) in cpu_clock and trace.sample_weight is not None:
            track.meta[CLOCK] = CPU
        tracks.append(track)
    return Recording(tracks)


FORMAT = Format(
    name="chrome-trace",
    description="Chrome trace events with embedded CPU profiles (Profile/ProfileChunk)",
    extensions=(".trace.json", ".chrome.json"),
    sniff_head=_sniff_head,
    sniff=lambda p: p.is_json and sniff(p.data, p.doc),
    read=lambda p: read(p.data, p.doc, p.source),
    write=write,
)
