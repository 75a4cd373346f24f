"""OpenTelemetry profiles (OTLP, `opentelemetry.proto.profiles.v1development`): the
Recording <-> `ProfilesData` mapping both OTLP encodings share (`otlp.py` writes and reads
the protobuf bytes, `otlpjson.py` OTLP/JSON). Messages from the `opentelemetry-proto`
package (the `otlp` extra); a missing extra is one line (`MissingExtra`).

What jsprof writes:

- One shared `ProfilesDictionary` for the whole file; element 0 of every table is the zero
  value (the empty string, an empty Mapping, Location, Function, Link, Stack and
  KeyValueAndUnit), as the proto requires.
- One `ResourceProfiles` per track (scope `jsprof`), whose resource says what ran:
  `service.name` = the upload's app, `service.version` its release, `deployment.environment.name`
  its env, `http.route` its route, `user_agent.original` the browser's user agent (where the
  track's meta holds them: a `jsprof serve` upload), `process.runtime.name` the engine.
- One `Profile` per track: sample type `wall/nanoseconds` (`cpu/nanoseconds` for a track
  recorded on the CPU clock), the same period type, `period` = the sampling interval in ns,
  `time_unix_nano` = the track's time origin (0 when unknown), `duration_nano` the span.
  Profile attributes: `thread.name` = the track's name, `jsprof.meta` = the track's meta
  as JSON (read back as it was).
- One `Sample` per distinct (stack, marker); each observation of it is one entry of
  `timestamps_unix_nano` (absolute: time origin + sample time, in ns) and of `values` (the
  ns the sample stands for: `trace.sample_weights`, so filtered and weighted traces keep
  their weights). Reading lays the observations out in time order again (pprof loses it).
- A merged profile (per-sample counts, `fleet`) gets a second Profile for the track with
  sample type `samples/count`: the same Samples, `values` = the counts.
- Stacks are leaf first. A Location per (frame, executing line): one Line with
  `function_index`, `line` = the line executing (the leaf's per-sample line where the trace
  has one, else 0 = unknown, as in pprof) and `column` = the frame's column; every
  Location has the attribute `profile.frame.type = v8js`. A Function per frame: name
  (`(anonymous)` for an empty one, `system_name` keeps it empty), `filename` = the
  resource URL, `start_line` = the frame's line.
- Samples without JavaScript are one-location pseudo stacks (`(idle)`, `(garbage
  collector)`, ...; `_common`), the marker a sample attribute `jsprof.marker`.

Reading accepts a `ProfilesData` from any producer: each Profile whose sample type is in
nanoseconds (values are the weights) or a count (weights = count x period where the
period is in ns) becomes a track; observations without timestamps are laid end to end.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from .. import trace as model
from ..errors import ErrorAt, TraceFormatError
from ..meta import CLOCK, CPU, clock_of
from ..trace import MARKERS, NO_LINE, NONE, Recording, Track, sample_weights
from ._common import PSEUDO_NAMES, FrameKey, build_trace, frame_keys, pseudo_index, stack_lists

NS_PER_MS = 1_000_000
MAX_NS = 2**63 - 1
ANONYMOUS = "(anonymous)"
FRAME_TYPE = "profile.frame.type"
V8JS = "v8js"
THREAD_NAME = "thread.name"
META = "jsprof.meta"
MARKER = "jsprof.marker"
ENGINE = "process.runtime.name"
SCOPE = "jsprof"
# track meta key -> resource attribute (OpenTelemetry semantic conventions)
RESOURCE_KEYS = {
    "app": "service.name",
    "release": "service.version",
    "env": "deployment.environment.name",
    "route": "http.route",
    "userAgent": "user_agent.original",
}
# The largest file read: a protobuf message cannot exceed 2 GiB anyway.
EXTRA = "otlp"


def messages() -> Any:
    """The `profiles_pb2` module, or MissingExtra (one line naming the extra)."""
    try:
        from opentelemetry.proto.profiles.v1development import profiles_pb2
    except ImportError:
        from ..extras import MissingExtra

        raise MissingExtra("reading or writing OTLP", EXTRA, "opentelemetry") from None
    return profiles_pb2


# ---- writing -----------------------------------------------------------------------------


class _Table:
    """An interning table whose element 0 is the zero value."""

    def __init__(self, zero: Any) -> None:
        self.index: dict[Any, int] = {zero: 0}

    def __call__(self, key: Any) -> int:
        i = self.index.get(key)
        if i is None:
            i = self.index[key] = len(self.index)
        return i


def _any_value(pb: Any, value: Any) -> Any:
    from opentelemetry.proto.common.v1 import common_pb2

    v = common_pb2.AnyValue()
    if isinstance(value, bool):
        v.bool_value = value
    elif isinstance(value, int):
        v.int_value = value
    elif isinstance(value, float):
        v.double_value = value
    else:
        v.string_value = str(value)
    return v


def to_message(rec: Recording) -> Any:
    """The `ProfilesData` message of `rec`."""
    pb = messages()
    from opentelemetry.proto.common.v1 import common_pb2

    if not rec.tracks:
        raise TraceFormatError("cannot write a recording with no tracks")
    data = pb.ProfilesData()
    d = data.dictionary
    strings = _Table("")
    functions = _Table(None)
    locations = _Table(None)
    stacks = _Table(())
    attributes = _Table(None)

    def attr(key: str, value: Any) -> int:
        # value types kept apart: 1 and True and "1" are different attributes
        return attributes((key, type(value).__name__, value))

    frame_type = attr(FRAME_TYPE, V8JS)

    def function_index(k: FrameKey) -> int:
        return functions(tuple(k))

    for track in rec.tracks:
        trace = track.trace
        n = trace.num_samples
        rp = data.resource_profiles.add()
        res_attrs = rp.resource.attributes
        meta = dict(track.meta)
        for key, otel in RESOURCE_KEYS.items():
            if isinstance(meta.get(key), str) and meta[key]:
                res_attrs.add(key=otel, value=common_pb2.AnyValue(string_value=meta[key]))
        if track.engine:
            res_attrs.add(key=ENGINE, value=common_pb2.AnyValue(string_value=track.engine))
        sp = rp.scope_profiles.add()
        sp.scope.name = SCOPE
        from .. import __version__

        sp.scope.version = __version__
        interval = track.sample_interval
        w = sample_weights(trace, interval) if n else np.zeros(0)
        ns = np.rint(w * NS_PER_MS)
        if n and not float(ns.sum()) < MAX_NS:
            _too_long(f"track {track.name!r} adds up to {float(ns.sum()):.6g} ns")
        ns = ns.astype(np.int64)
        origin = _origin_ns(track.time_origin)
        rel = np.rint(trace.sample_time * NS_PER_MS)
        if n and not (float(np.abs(rel).max()) + origin < MAX_NS):
            _too_long(f"track {track.name!r} spans beyond int64 ns")
        stamps = rel.astype(np.int64) + origin
        if n and int(stamps.min()) < 0:
            _too_long(f"track {track.name!r} has samples before 1970")
        period = round(interval * NS_PER_MS) if interval else 0
        kind = "cpu" if clock_of(track.meta) == CPU else "wall"
        prof = sp.profiles.add()
        prof.sample_type.type_strindex = strings(kind)
        prof.sample_type.unit_strindex = strings("nanoseconds")
        prof.period_type.type_strindex = strings(kind)
        prof.period_type.unit_strindex = strings("nanoseconds")
        prof.period = period
        prof.time_unix_nano = origin
        if n:
            prof.duration_nano = max(int((stamps + ns).max()) - origin, 0)
        prof.attribute_indices.append(attr(THREAD_NAME, track.name))
        if meta:
            prof.attribute_indices.append(
                attr(META, json.dumps(meta, separators=(",", ":"), sort_keys=True))
            )
        counts_prof = None
        if trace.sample_count is not None:
            counts_prof = sp.profiles.add()
            counts_prof.sample_type.type_strindex = strings("samples")
            counts_prof.sample_type.unit_strindex = strings("count")
            counts_prof.period_type.CopyFrom(prof.period_type)
            counts_prof.period = period
            counts_prof.time_unix_nano = origin
            counts_prof.duration_nano = prof.duration_nano
            counts_prof.attribute_indices.extend(prof.attribute_indices)
        if not n:
            continue
        keys = frame_keys(trace)
        paths = stack_lists(trace)
        pseudo = pseudo_index(trace)
        stack = np.where(trace.sample_stack != NONE, trace.sample_stack.astype(np.int64),
                         -pseudo - 2)
        line = (np.zeros(n, np.int64) if trace.sample_line is None else
                np.where(trace.sample_stack != NONE, trace.sample_line.astype(np.int64), NO_LINE))
        marker = (np.full(n, NONE, np.int64) if trace.sample_marker is None
                  else trace.sample_marker.astype(np.int64))
        nl = int(line.max()) + 1
        packed = ((stack + len(PSEUDO_NAMES) + 1) * nl + line) * (len(MARKERS) + 1) + marker + 1
        _, first, inverse = np.unique(packed, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
        # Observations grouped by Sample, each group in time (file) order.
        order = np.argsort(inverse, kind="stable")
        bounds = np.searchsorted(inverse[order], np.arange(len(first) + 1))
        for u in np.argsort(first, kind="stable").tolist():
            j = int(first[u])
            s, ln, m = int(stack[j]), int(line[j]), int(marker[j])
            if s >= 0:
                frames = [keys[f] for f in paths[s]]
            else:
                frames = [FrameKey(PSEUDO_NAMES[-s - 2])]
            # Leaf first; only the leaf knows its executing line.
            locs = [locations((function_index(frames[-1]), ln, frames[-1].column))]
            locs += [locations((function_index(f), 0, f.column)) for f in reversed(frames[:-1])]
            rows = order[bounds[u] : bounds[u + 1]]
            sample = prof.samples.add(
                stack_index=stacks(tuple(locs)),
                values=ns[rows].tolist(),
                timestamps_unix_nano=stamps[rows].tolist(),
            )
            if m != NONE:
                sample.attribute_indices.append(attr(MARKER, MARKERS[m]))
            if counts_prof is not None:
                counts_prof.samples.add(
                    stack_index=sample.stack_index,
                    attribute_indices=sample.attribute_indices,
                    values=trace.sample_count[rows].tolist(),
                    timestamps_unix_nano=sample.timestamps_unix_nano,
                )

    # The tables, element 0 the zero value of each.
    d.mapping_table.add()
    d.link_table.add()
    d.location_table.add()
    for key in list(locations.index)[1:]:
        fi, ln, col = key
        loc = d.location_table.add()
        loc.lines.add(function_index=fi, line=ln, column=col or 0)
        loc.attribute_indices.append(frame_type)
    d.function_table.add()
    for key in list(functions.index)[1:]:
        name, url, ln, _col = key
        d.function_table.add(
            name_strindex=strings(name or ANONYMOUS),
            system_name_strindex=strings(name),
            filename_strindex=strings(url or ""),
            start_line=ln or 0,
        )
    d.stack_table.add()
    for key in list(stacks.index)[1:]:
        d.stack_table.add(location_indices=key)
    d.attribute_table.add()
    for key in list(attributes.index)[1:]:
        k, _t, value = key
        d.attribute_table.add(key_strindex=strings(k), value=_any_value(pb, value))
    d.string_table.extend(strings.index)
    return data


def _origin_ns(origin: float | None) -> int:
    """The time origin (ms) in whole ns, rounded from the float's exact value: reading it
    back (ns / 10**6, correctly rounded) gives the same float again."""
    if origin is None:
        return 0
    from fractions import Fraction

    return round(Fraction(origin) * NS_PER_MS)


def _too_long(what: str) -> None:
    raise TraceFormatError(
        f"cannot write OTLP: {what}, beyond the int64 nanoseconds OTLP counts in; "
        "write .jsprof.json"
    )


# ---- reading -----------------------------------------------------------------------------


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    return None if kind is None else getattr(v, kind)


def from_message(data: Any, source: str) -> Recording:
    """The Recording of a parsed `ProfilesData` (`source` names the input in errors)."""
    err = ErrorAt(source)
    d = data.dictionary
    strings = list(d.string_table)
    if strings and strings[0] != "":
        raise err("dictionary.string_table[0]", "must be the empty string")

    def string(i: int, where: str) -> str:
        if not 0 <= i < len(strings):
            if i == 0:
                return ""
            raise err(where, f"string index {i} is outside string_table (0..{len(strings) - 1})")
        return strings[i]

    def attribute(i: int, where: str) -> tuple[str, Any]:
        if not 0 <= i < len(d.attribute_table):
            raise err(where, f"attribute index {i} is outside attribute_table "
                      f"(0..{len(d.attribute_table) - 1})")
        a = d.attribute_table[i]
        return string(a.key_strindex, f"dictionary.attribute_table[{i}].key_strindex"), _value(
            a.value)

    fkeys: list[tuple[str, str | None, int | None]] = []
    for i, fn in enumerate(d.function_table):
        w = f"dictionary.function_table[{i}]"
        name = string(fn.name_strindex, f"{w}.name_strindex")
        system = string(fn.system_name_strindex, f"{w}.system_name_strindex")
        if name == ANONYMOUS and not system:
            name = ""
        url = string(fn.filename_strindex, f"{w}.filename_strindex") or None
        if not fn.start_line < 2**31:  # 1-based, 32-bit in every engine and format
            raise err(f"{w}.start_line", f"{fn.start_line} is not a line number")
        fkeys.append((name, url, fn.start_line if fn.start_line > 0 else None))
    # Location -> (caller-first frame keys, the leaf's line)
    locs: list[tuple[list[FrameKey], int]] = []
    for i, loc in enumerate(d.location_table):
        frames = []
        for ln in reversed(loc.lines):  # the last Line is the caller of the ones before
            if not (ln.line < 2**31 and ln.column < 2**31):
                raise err(f"dictionary.location_table[{i}].lines",
                          f"line {ln.line}, column {ln.column}: not a position in a script")
            if not 0 <= ln.function_index < len(fkeys):
                raise err(f"dictionary.location_table[{i}].lines",
                          f"function index {ln.function_index} is outside function_table")
            name, url, start = fkeys[ln.function_index]
            frames.append(FrameKey(name, url, start, ln.column if ln.column > 0 else None))
        locs.append((frames, loc.lines[0].line if len(loc.lines) else 0))
    stacks: list[tuple[list[FrameKey], int]] = []
    for i, st in enumerate(d.stack_table):
        frames = []
        for li in reversed(st.location_indices):  # leaf first in the file
            if not 0 <= li < len(locs):
                raise err(f"dictionary.stack_table[{i}].location_indices",
                          f"location index {li} is outside location_table")
            frames.extend(locs[li][0])
        leaf_line = locs[st.location_indices[0]][1] if len(st.location_indices) else 0
        stacks.append((frames, max(leaf_line, 0)))

    # Profiles by track: (name, meta, engine, origin, interval, ns profile, count profile)
    tracks: dict[str, dict[str, Any]] = {}
    for r, rp in enumerate(data.resource_profiles):
        engine = None
        for a in rp.resource.attributes:
            if a.key == ENGINE and a.value.WhichOneof("value") == "string_value":
                engine = a.value.string_value
        for s, sp in enumerate(rp.scope_profiles):
            for p, prof in enumerate(sp.profiles):
                where = f"resource_profiles[{r}].scope_profiles[{s}].profiles[{p}]"
                name, meta = None, {}
                for i in prof.attribute_indices:
                    key, value = attribute(i, f"{where}.attribute_indices")
                    if key == THREAD_NAME and isinstance(value, str):
                        name = value
                    elif key == META and isinstance(value, str):
                        try:
                            meta = json.loads(value)
                        except ValueError:
                            raise err(f"{where}: attribute {META}", "not JSON") from None
                        if not isinstance(meta, dict):
                            raise err(f"{where}: attribute {META}", "not a JSON object")
                if name is None:
                    name = "main" if not tracks else f"profile {len(tracks) + 1}"
                unit = string(prof.sample_type.unit_strindex, f"{where}.sample_type")
                period_unit = string(prof.period_type.unit_strindex, f"{where}.period_type")
                t = tracks.setdefault(name, {"meta": meta, "engine": engine})
                stype = string(prof.sample_type.type_strindex, f"{where}.sample_type")
                slot = "ns" if unit == "nanoseconds" else "count" if unit == "count" else None
                if slot is None:
                    said = f"is {stype}/{unit}" if stype or unit else "is not set"
                    raise err(f"{where}.sample_type", f"{said}; jsprof reads CPU and "
                              "wall-time profiles (a unit of nanoseconds or count)")
                if slot in t:
                    raise err(where, f"a second {unit} profile for track {name!r}")
                t[slot] = (prof, where, period_unit)
                if slot == "ns" and stype == CPU:
                    t["cpu"] = True

    out = []
    for name, t in tracks.items():
        out.append(_track(name, t, stacks, attribute, err))
    if not out:
        out.append(Track("main", build_trace([], np.zeros(0, np.int64), np.zeros(0))))
    return Recording(out)


def _beyond(ns: int) -> str:
    # fixed64 holds up to 2**64 - 1; jsprof's times (and its writer) stop at int64's end.
    return f"{ns} ns is beyond {MAX_NS} (the year 2262); is this file intact?"


def _observations(prof: Any, where: str, nstacks: int, attribute: Any, err: ErrorAt
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, bool]:
    """Per observation: stack index, marker code, value (None-filled: -1), timestamp; and
    whether the profile has timestamps at all."""
    st: list[int] = []
    mk: list[int] = []
    vals: list[int] = []
    ts: list[int] = []
    timed = False
    for j, sample in enumerate(prof.samples):
        w = f"{where}.samples[{j}]"
        if not 0 <= sample.stack_index < nstacks:
            raise err(f"{w}.stack_index", f"{sample.stack_index} is outside stack_table "
                      f"(0..{nstacks - 1})")
        marker = NONE
        for i in sample.attribute_indices:
            key, value = attribute(i, f"{w}.attribute_indices")
            if key == MARKER and value in MARKERS:
                marker = MARKERS.index(value)
        v, s = list(sample.values), list(sample.timestamps_unix_nano)
        if v and s and len(v) != len(s):
            raise err(w, f"has {len(v)} values but {len(s)} timestamps_unix_nano; they must "
                      "be as many")
        if not v and not s:
            raise err(w, "has neither values nor timestamps_unix_nano")
        k = max(len(v), len(s))
        if any(x < 0 for x in v):
            raise err(f"{w}.values", "a negative value")
        if s and max(s) > MAX_NS:
            raise err(f"{w}.timestamps_unix_nano", _beyond(max(s)))
        timed = timed or bool(s)
        st.extend([sample.stack_index] * k)
        mk.extend([marker] * k)
        vals.extend(v or [-1] * k)
        ts.extend(s or [0] * k)
        if len(st) > model.MAX_SAMPLES:
            raise err(where, f"holds more than {model.MAX_SAMPLES:,} observations, more than "
                      "jsprof reads; is this file intact?")
    return (np.array(st, np.int64), np.array(mk, np.int64), np.array(vals, np.int64),
            np.array(ts, np.uint64).astype(np.int64), timed)


def _track(name: str, t: dict[str, Any], stacks: list, attribute: Any, err: ErrorAt) -> Track:
    main = t.get("ns") or t["count"]
    prof, where, period_unit = main
    period_ns = prof.period if period_unit == "nanoseconds" and prof.period > 0 else 0
    st, mk, vals, ts, timed = _observations(prof, where, len(stacks), attribute, err)
    counts = None
    if "ns" in t:
        weights_ns = np.where(vals >= 0, vals, period_ns)
        if "count" in t:
            cprof, cwhere, _ = t["count"]
            cst, _cmk, cvals, _cts, _ = _observations(cprof, cwhere, len(stacks), attribute, err)
            if len(cst) != len(st) or (cst != st).any():
                raise err(cwhere, f"its samples do not match those of {where}")
            counts = np.where(cvals >= 0, cvals, 1)
    else:
        c = np.where(vals >= 0, vals, 1)
        weights_ns = c * period_ns if period_ns else None
        counts = c if (c != 1).any() else None
    if counts is not None and (counts > model.MAX_SAMPLES).any():
        raise err(where, f"a count beyond {model.MAX_SAMPLES:,}; is this file intact?")
    origin_ns = prof.time_unix_nano
    if origin_ns > MAX_NS:
        raise err(f"{where}.time_unix_nano", _beyond(origin_ns))
    if origin_ns:
        base, origin = origin_ns, origin_ns / NS_PER_MS  # int / int: correctly rounded
    elif timed and len(ts) and model.epoch_origin(int(ts.min()) / NS_PER_MS) is not None:
        # no time origin said, epoch timestamps: the first sample's time is time 0
        base = int(ts.min())
        origin = base / NS_PER_MS
    else:  # no origin (jsprof writes 0 for an unknown one): times relative to 0
        base, origin = 0, None
    if timed:
        rel_ns = ts - base
        # time order: the observations of one stack are grouped in the file
        order = np.argsort(rel_ns, kind="stable")
    else:
        spacing = weights_ns if weights_ns is not None else np.full(len(st), period_ns or 10**6)
        rel_ns = np.cumsum(spacing) - spacing
        order = np.arange(len(st))
    st, mk, rel_ns = st[order], mk[order], rel_ns[order]
    times = rel_ns / NS_PER_MS
    used, local = np.unique(st, return_inverse=True)
    lines = np.array([stacks[k][1] for k in used.tolist()], np.int64)[local.reshape(-1)]
    frames = [stacks[k][0] or [FrameKey(PSEUDO_NAMES[0])] for k in used.tolist()]
    trace = build_trace(
        frames,
        local.reshape(-1),
        times,
        markers=mk.astype(np.int8) if (mk != NONE).any() else None,
        lines=lines if (lines != NO_LINE).any() else None,
    )
    interval = period_ns / NS_PER_MS if period_ns else None
    if weights_ns is not None:
        w_ns = weights_ns[order]
        # Keep weights only where they are not what the timestamps imply already.
        implied = np.rint(sample_weights(trace, interval) * NS_PER_MS).astype(np.int64)
        if not timed or not np.array_equal(implied, w_ns):
            trace.sample_weight = w_ns / NS_PER_MS
    if counts is not None:
        trace.sample_count = counts[order]
    meta = dict(t["meta"])
    if t.get("cpu") and CLOCK not in meta:
        meta[CLOCK] = CPU  # the samples weigh CPU time
    track = Track(name, trace, time_origin=origin, engine=t["engine"], sample_interval=interval,
                  meta=meta)  # type: ignore[arg-type]
    return track
