"""Firefox Profiler processed profile (https://profiler.firefox.com): write only.

The processed format is struct-of-arrays tables with a `length` each; stacks are a
prefix tree exactly like ProfilerTrace's (prefix = parentId), so the columns map almost
one to one. We write `preprocessedProfileVersion` 54 with a string array per thread (the
shape samply's fxprof-processed-profile writes); the front end upgrades older versions on
load, so a stable older version is valid input, while chasing the newest (58 moved
strings and sources into `shared`) would break with each release.

- One thread per track (`name` = track name), all in one process. `meta.startTime` is the
  earliest track time origin (Unix epoch ms); each thread's sample times are ms from
  there, so tracks line up as they did.
- Frames map to one frameTable row and one funcTable row each (JS functions: `isJS`,
  `relevantForJS`, `fileName`, `lineNumber`, `columnNumber`); resources to resourceTable
  rows of type URL. Per-sample lines go to the frame's `line` column: a frame row is
  made per (frame, line) that samples hit at the leaf.
- Categories: Other (grey, the default), JavaScript (yellow), Idle (transparent) and
  GC / CC (orange). Samples without JavaScript get a pseudo frame (`(idle)`,
  `(garbage collector)`, `(program)`, ...) in the Idle, GC / CC or Other category, so
  their time shows and is coloured for what it was.
- Sample weights are plain samples (`weightType: "samples"`); the time axis carries the
  real gaps.
"""

from __future__ import annotations

import numpy as np
import orjson

from ..errors import TraceFormatError
from ..trace import NO_LINE, NONE, Recording, Track
from ._common import PSEUDO_NAMES, pseudo_index
from ._format import Format

PROCESSED_VERSION = 54
GECKO_VERSION = 24  # meta.version; the front end only reads preprocessedProfileVersion
CATEGORIES = [
    {"name": "Other", "color": "grey", "subcategories": ["Other"]},
    {"name": "JavaScript", "color": "yellow", "subcategories": ["Other"]},
    {"name": "Idle", "color": "transparent", "subcategories": ["Other"]},
    {"name": "GC / CC", "color": "orange", "subcategories": ["Other"]},
]
CAT_OTHER, CAT_JS, CAT_IDLE, CAT_GC = 0, 1, 2, 3
RESOURCE_TYPE_URL = 5  # resourceTypes.url in the front end
_PSEUDO_CATEGORY = {"(idle)": CAT_IDLE, "(garbage collector)": CAT_GC}


def _table(**cols: list) -> dict:
    n = {len(v) for v in cols.values()}
    assert len(n) <= 1, "columns differ in length"
    return {**cols, "length": n.pop() if n else 0}


def _thread(track: Track, offset: float, index: int) -> dict:
    trace = track.trace
    strings: dict[str, int] = {}

    def s(x: str) -> int:
        i = strings.get(x)
        if i is None:
            i = strings[x] = len(strings)
        return i

    res_name = [s(r) for r in trace.resources]
    resource_table = _table(
        lib=[None] * len(res_name),
        name=res_name,
        host=[None] * len(res_name),
        type=[RESOURCE_TYPE_URL] * len(res_name),
    )
    func: dict[str, list] = {
        k: []
        for k in (
            "name",
            "isJS",
            "relevantForJS",
            "resource",
            "fileName",
            "lineNumber",
            "columnNumber",
        )
    }
    for f in trace.frames:
        func["name"].append(s(f.name or "(anonymous)"))
        func["isJS"].append(True)
        func["relevantForJS"].append(False)
        func["resource"].append(f.resource_id if f.resource_id is not None else -1)
        func["fileName"].append(
            s(trace.resources[f.resource_id]) if f.resource_id is not None else None
        )
        func["lineNumber"].append(f.line)
        func["columnNumber"].append(f.column)
    n_funcs = len(trace.frames)
    for name in PSEUDO_NAMES:
        func["name"].append(s(name))
        func["isJS"].append(False)
        func["relevantForJS"].append(False)
        func["resource"].append(-1)
        func["fileName"].append(None)
        func["lineNumber"].append(None)
        func["columnNumber"].append(None)

    # Frame rows: one per func (its own line), then one per (leaf stack, line) hit.
    frame: dict[str, list] = {k: [] for k in ("func", "category", "line", "column")}
    for i, f in enumerate(trace.frames):
        frame["func"].append(i)
        frame["category"].append(CAT_JS)
        frame["line"].append(f.line)
        frame["column"].append(f.column)
    for j, name in enumerate(PSEUDO_NAMES):
        frame["func"].append(n_funcs + j)
        frame["category"].append(_PSEUDO_CATEGORY.get(name, CAT_OTHER))
        frame["line"].append(None)
        frame["column"].append(None)

    prefix = [None if p == NONE else p for p in trace.stack_parent.tolist()]
    frames_col = trace.stack_frame.tolist()
    # Samples without JavaScript: a root stack per pseudo frame used.
    pseudo = pseudo_index(trace)
    sample_stack = trace.sample_stack.astype(np.int64)
    for j in np.unique(pseudo[pseudo >= 0]).tolist():
        prefix.append(None)
        frames_col.append(n_funcs + j)
        sample_stack[pseudo == j] = len(frames_col) - 1
    # Per-sample lines: a leaf stack re-pointed at a frame row that carries the line.
    if trace.sample_line is not None:
        has = (trace.sample_line != NO_LINE) & (trace.sample_stack != NONE)
        if has.any():
            pairs = np.stack([sample_stack[has], trace.sample_line[has].astype(np.int64)], 1)
            uniq, inv = np.unique(pairs, axis=0, return_inverse=True)
            new_ids = []
            for st, ln in uniq.tolist():
                fid = int(trace.stack_frame[st])
                frame["func"].append(fid)
                frame["category"].append(CAT_JS)
                frame["line"].append(ln)
                frame["column"].append(None)
                prefix.append(prefix[st])
                frames_col.append(len(frame["func"]) - 1)
                new_ids.append(len(frames_col) - 1)
            sample_stack[has] = np.array(new_ids, np.int64)[inv.reshape(-1)]
    nf = len(frame["func"])
    frame_table = _table(
        address=[-1] * nf,
        inlineDepth=[0] * nf,
        category=frame["category"],
        subcategory=[0] * nf,
        func=frame["func"],
        nativeSymbol=[None] * nf,
        innerWindowID=[None] * nf,
        line=frame["line"],
        column=frame["column"],
    )
    times = trace.sample_time + offset
    stacks = [None if x == NONE else x for x in sample_stack.tolist()]
    start = float(times.min()) if len(times) else offset
    end = float(times.max()) if len(times) else offset
    return {
        "name": track.name,
        "isMainThread": index == 0,
        "processType": "default",
        "processName": track.engine or "JavaScript",
        "processStartupTime": 0.0,
        "processShutdownTime": None,
        "registerTime": start,
        "unregisterTime": end,
        "pausedRanges": [],
        "pid": "1",
        "tid": index + 1,
        "samples": {
            "stack": stacks,
            "time": times,
            "weight": None,
            "weightType": "samples",
            "length": len(stacks),
        },
        "markers": _table(data=[], name=[], startTime=[], endTime=[], phase=[], category=[]),
        "stackTable": _table(frame=frames_col, prefix=prefix),
        "frameTable": frame_table,
        "funcTable": _table(**func),
        "resourceTable": resource_table,
        "nativeSymbols": _table(libIndex=[], address=[], name=[], functionSize=[]),
        "stringArray": list(strings),
    }


def write(rec: Recording) -> bytes:
    if not rec.tracks:
        raise TraceFormatError("cannot write a recording with no tracks")
    # meta.startTime is epoch ms; with no known origin, 0 (the profiler shows times
    # relative to it). A track whose origin is unknown sits at the profile's start.
    known = [t.time_origin for t in rec.tracks if t.time_origin is not None]
    start = min(known) if known else 0.0
    intervals = [t.sample_interval for t in rec.tracks if t.sample_interval]
    if not intervals:
        intervals = [g for t in rec.tracks if (g := t.trace.median_gap()) is not None]
    threads = [
        _thread(t, t.time_origin - start if t.time_origin is not None else 0.0, i)
        for i, t in enumerate(rec.tracks)
    ]
    doc = {
        "meta": {
            "interval": float(np.median(intervals)) if intervals else 1.0,
            "startTime": start,
            "processType": 0,
            "product": "jsprof",
            "stackwalk": 0,
            "debug": False,
            "version": GECKO_VERSION,
            "preprocessedProfileVersion": PROCESSED_VERSION,
            "symbolicated": True,
            "categories": CATEGORIES,
            "markerSchema": [],
            "pausedRanges": [],
        },
        "libs": [],
        "threads": threads,
        "pages": [],
        "profilerOverhead": [],
        "counters": [],
    }
    return orjson.dumps(doc, option=orjson.OPT_SERIALIZE_NUMPY)


FORMAT = Format(
    name="firefox",
    description="Firefox Profiler processed profile (write only; open in profiler.firefox.com)",
    extensions=(".firefox.json",),
    write=write,
)
