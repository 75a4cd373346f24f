"""pprof (`profile.proto`, package perftools.profiles), gzipped: read and write.

The Profile message is read and written with the `protobuf` package (message classes
from `_pprof_proto`: 10x faster than our own codec, measured there); the codec
(`_protobuf`) only sniffs a file's head and finds where a malformed file breaks. What
jsprof writes, and how the model maps onto it:

- Sample types `samples/count` and `cpu/nanoseconds` (period type `cpu/nanoseconds`,
  period = the track's sample interval). pprof aggregates by design: one pprof sample
  per distinct (stack, leaf line, marker, track), with its sample count and the time the
  samples stood for (`trace.sample_weights`, ms -> ns here and only here).
- One Function per distinct frame: name (`(anonymous)` for an empty one, which
  system_name keeps empty, so it reads back as it was), filename = the resource URL,
  start_line = the frame's line (the function's position in ProfilerTrace). Functions are
  kept apart by (name, file, line, column): a minified bundle has all of them on line 1.
- Locations hold one Line each; a sample lists them leaf first. `Line.line` is the line
  executing: for the leaf it is the per-sample line column where the trace has one
  (0 = unknown, as profile.proto says); callers get 0, since a trace does not know
  call-site lines. `Line.column` (field 3, added to profile.proto in 2024) is the
  frame's column, as in OTLP (`_otlp`): Function has no start column, and without it the
  functions of a one-line bundle read back as one (551 rows of a terser bundle became
  413). Read back from jsprof's own files (a comment says so); from other producers only
  with the Datadog-style line guess below (their Lines then name the function's place).
- Samples without JavaScript are one-location pseudo stacks (`(idle)`,
  `(garbage collector)`, ...; see `_common`). Labels carry what pprof has no field for:
  `marker` (the spec's marker, when the trace has markers) and `track` (only when the
  recording has several tracks; reading splits by it).
- A comment (`OWN_LINES`) says that a Line is the line executing; reading a file without
  it, a function with no start_line takes its Lines' line when they all name one
  (@datadog/pprof's way of giving V8's function line).
- A comment per track with samples (`TRACK_INFO`, JSON): its name, engine, declared and
  requested interval and, when the gap cap left time out (`trace.lost_ms`), how
  (`gapCapping`: gaps, lost ms, the cap, the interval it counted from). pprof's samples
  have no times to find lost time in again and its one `period` stands for every track;
  the values stay the time the samples stood for, what other pprof readers sum. Read back
  into the Track's fields and its meta `gapCapping` (`trace.stored_capping`), so `report`
  of the pprof is the recording's; a value that is not valid is left out.
- A comment (`CPU_CLOCK` and the track's name) per track recorded on the CPU clock (track
  meta `clock`: its weights are CPU time), read back into the meta.
- `time_nanos` is the earliest sample's Unix epoch time (left out when a track's time
  origin is unknown, and read back as unknown when 0 or absent),
  `duration_nanos` the span, `period` the median of the tracks' intervals (a track without
  one: the median share a sample of it gets on reading, so it writes back the same).

Reading accepts any pprof whose sample types include a count (`samples`/`sample` with
unit `count`) or a time in nanoseconds (`count = value / period`); a negative time, a
count beyond `trace.MAX_SAMPLES` in one sample or times adding up beyond 2**62 ns are
refused. Individual timestamps do not exist in pprof: a pprof sample's samples are laid
out one after another, each taking its share of the sample's nanoseconds (or the
period), in file order, and that share is kept as the sample's weight
(`sample_weight`), so per-stack counts and time totals survive a round trip, also of a
filtered trace. Where those shares do not add up to `duration_nanos` (weights that are not
the gaps between samples: a filtered, instrumented or merged trace), the layout is
stretched or squeezed by one factor to span it, so the file writes back byte for byte.
When the counts add up to more than `trace.MAX_SAMPLES` (a merged fleet profile), each
pprof sample is instead one sample standing for its count (`sample_count`) and its whole
time. Inlined functions (several Lines in one Location)
become caller-first frames.
"""

from __future__ import annotations

import gzip
import json
import math
import zlib
from typing import Any

import numpy as np

from .. import trace as model
from ..errors import ErrorAt, TraceFormatError
from ..meta import CLOCK, CPU, GAP_CAPPING, clock_of
from ..trace import (
    MARKERS,
    NO_LINE,
    NONE,
    GapCapping,
    Recording,
    Track,
    capping_meta,
    is_finite_number,
    stored_capping,
    track_gap_capping,
    track_weights_and_lost,
)
from . import _protobuf as pb
from ._common import (
    PSEUDO_NAMES,
    FrameKey,
    build_trace,
    frame_keys,
    pseudo_index,
    stack_lists,
)
from ._format import Format
from ._pprof_proto import classes

NS_PER_MS = 1_000_000
# The most time a file's values add up to: times stay far inside what a double counts in
# ms, and every writer's clock (pprof's int64 ns, CDP's µs) holds it.
MAX_NS = 2**62
# pprof tools show an empty name as "<unknown>"; V8's empty name means an anonymous function.
ANONYMOUS = "(anonymous)"
# Profile message fields (profile.proto).
SAMPLE_TYPE, SAMPLE, MAPPING, LOCATION, FUNCTION, STRING_TABLE = 1, 2, 3, 4, 5, 6
TIME_NANOS, DURATION_NANOS, PERIOD_TYPE, PERIOD, COMMENT = 9, 10, 11, 12, 13
# The comment jsprof writes: how its Lines are meant (read back, it turns off the
# Datadog-style guess of a function's line from its Lines).
OWN_LINES = "jsprof: Line.line is the line executing; Function.start_line the function's line"
# Said beside it since Line.column is written (files before it hold 0 there: unknown).
OWN_COLUMNS = "jsprof: Line.column is the function's column (Function has no field for it)"
CPU_CLOCK = "jsprof: the samples weigh CPU time (clock cpu) in track: "
# One per track with samples: what a report of the recording says of it that pprof has no
# field for, as JSON (`_track_info`): its name, engine, declared and requested interval
# and, when the gap cap left time out, how (`gapCapping`: trace.capping_meta). pprof's
# period is one for all tracks, and its samples have no times to find the lost time in.
TRACK_INFO = "jsprof: track "
# A track's comment is a few hundred bytes; a longer one is not ours (nor read: json's
# parser recurses per nesting level, and a file is data, not a request for work).
TRACK_INFO_MAX = 64 << 10
LEN_FIELDS = {1, 2, 3, 4, 5, 6, 11}
VARINT_FIELDS = {7, 8, 9, 10, 12, 14, 15}


# ---- writing -----------------------------------------------------------------------------


class _Strings:
    def __init__(self) -> None:
        self.index: dict[str, int] = {"": 0}

    def __call__(self, s: str) -> int:
        i = self.index.get(s)
        if i is None:
            i = self.index[s] = len(self.index)
        return i


def _value_type(msg: Any, strings: _Strings, type_: str, unit: str) -> None:
    msg.type, msg.unit = strings(type_), strings(unit)


def encode_profile(rec: Recording) -> bytes:
    """The uncompressed Profile message."""
    cls = classes()
    prof = cls["Profile"]()
    strings = _Strings()
    functions: dict[FrameKey, int] = {}
    locations: dict[tuple[int, int], int] = {}
    columns: dict[int, int] = {}  # function id -> the frame's column (0 unknown)
    # The file's order: sample types, samples, locations, functions, then the strings.
    _value_type(prof.sample_type.add(), strings, "samples", "count")
    _value_type(prof.sample_type.add(), strings, "cpu", "nanoseconds")

    def function_id(k: FrameKey) -> int:
        fid = functions.get(k)
        if fid is None:
            fid = functions[k] = len(functions) + 1
            name, url, line, col = k
            columns[fid] = col or 0
            prof.function.add(
                id=fid,
                name=strings(name or ANONYMOUS),
                system_name=strings(name),
                filename=strings(url or ""),
                start_line=line or 0,
            )
        return fid

    def location_id(fid: int, line: int) -> int:
        lid = locations.get((fid, line))
        if lid is None:
            lid = locations[(fid, line)] = len(locations) + 1
            prof.location.add(id=lid).line.add(function_id=fid, line=line, column=columns[fid])
        return lid

    several = len(rec.tracks) > 1
    # Times relative to the first track's origin, so that the epoch's magnitude never
    # enters the span's arithmetic (a double at 1.7e12 ms has 0.24 µs steps).
    with_samples = [t for t in rec.tracks if t.trace.num_samples]
    origins = [t.time_origin for t in with_samples]
    base = origins[0] if origins and origins[0] is not None else 0.0
    starts: list[float] = []
    ends: list[float] = []
    intervals: list[float] = []
    infos: list[str] = []
    for track in rec.tracks:
        trace = track.trace
        n = trace.num_samples
        if not n:
            continue
        keys = frame_keys(trace)
        stacks = stack_lists(trace)
        w, lost = track_weights_and_lost(track)
        infos.append(_track_info(track, track_gap_capping(track) if lost > 0 else None))
        # An unknown origin: the track is on the recording's shared time 0.
        offset = track.time_origin - base if track.time_origin is not None else 0.0
        rel = trace.sample_time + offset
        starts.append(float(rel.min()))
        ends.append(float((rel + w).max()))
        pseudo = pseudo_index(trace)
        stack = np.where(
            trace.sample_stack != NONE, trace.sample_stack.astype(np.int64), -pseudo - 2
        )
        line = (
            np.zeros(n, np.int64)
            if trace.sample_line is None
            else np.where(trace.sample_stack != NONE, trace.sample_line.astype(np.int64), NO_LINE)
        )
        marker = (
            np.full(n, NONE, np.int64)
            if trace.sample_marker is None
            else trace.sample_marker.astype(np.int64)
        )
        # One pprof sample per distinct (stack, leaf line, marker), in first-seen order.
        # Packed into one int64 key: 1-D np.unique is far faster than unique rows.
        nl = int(line.max()) + 1
        packed = ((stack + len(PSEUDO_NAMES) + 1) * nl + line) * (len(MARKERS) + 1) + marker + 1
        _, first, inverse, counts = np.unique(
            packed, return_index=True, return_inverse=True, return_counts=True
        )
        uniq = np.stack([stack[first], line[first], marker[first]], 1)
        inverse = inverse.reshape(-1)
        ns = _group_ns(inverse, w, len(uniq), track.name)
        if trace.sample_count is not None:  # a merged profile: the samples each row stands for
            counts = np.rint(np.bincount(inverse, weights=trace.sample_count,
                                         minlength=len(uniq))).astype(np.int64)
        # A track without an interval: the median time a sample stands for, as reading lays
        # them out (each its pprof sample's share), so the file read back writes it again.
        intervals.append(track.sample_interval or _median_share(ns, counts))
        track_label = (strings("track"), strings(track.name)) if several else None
        for u in np.argsort(first, kind="stable").tolist():
            s, ln, m = uniq[u].tolist()
            if s >= 0:
                fids = [function_id(keys[f]) for f in stacks[s]]
            else:
                fids = [function_id((PSEUDO_NAMES[-s - 2], None, None, None))]
            # Leaf first; only the leaf knows its executing line.
            locs = [location_id(fids[-1], ln)] + [location_id(f, 0) for f in reversed(fids[:-1])]
            sample = prof.sample.add(location_id=locs, value=[int(counts[u]), int(ns[u])])
            if track_label is not None:
                sample.label.add(key=track_label[0], str=track_label[1])
            if m != NONE:
                sample.label.add(key=strings("marker"), str=strings(MARKERS[m]))

    # ns -> ms -> ns gives the same ns once a number has made the trip once, so the origin
    # read back writes the same time_nanos again. Written only when every origin is known.
    known = bool(starts) and all(o is not None for o in origins)
    time_nanos = round((base + min(starts)) * NS_PER_MS) if known else 0
    duration = round((max(ends) - min(starts)) * NS_PER_MS) if starts else 0
    period = round(float(np.median(intervals)) * NS_PER_MS) if intervals else 0
    for what, v in (("starts at", time_nanos), ("spans", duration), ("has an interval of", period)):
        if not -(2**63) <= v < 2**63:
            _too_long(f"the recording {what} {v:.6g} ns")
    _value_type(prof.period_type, strings, "cpu", "nanoseconds")
    prof.comment.append(strings(OWN_LINES))
    prof.comment.append(strings(OWN_COLUMNS))
    for t in rec.tracks:
        if clock_of(t.meta) == CPU:
            prof.comment.append(strings(CPU_CLOCK + t.name))
    for info in infos:
        prof.comment.append(strings(info))
    prof.string_table.extend(s.encode("utf-8") for s in strings.index)
    if starts:
        if known:
            prof.time_nanos = time_nanos
        prof.duration_nanos = duration
    if intervals:
        prof.period = period
    return prof.SerializeToString()


def _track_info(track: Track, capping: GapCapping | None) -> str:
    """TRACK_INFO's comment for `track`, whose gaps `capping` capped (None: no time lost)."""
    info: dict[str, Any] = {"name": track.name}
    if track.engine is not None:
        info["engine"] = track.engine
    for key, v in (("sampleInterval", track.sample_interval),
                   ("requestedInterval", track.requested_interval)):
        info[key] = _interval(v)
    if capping is not None:
        info[GAP_CAPPING] = capping_meta(capping)
    return TRACK_INFO + json.dumps(info, ensure_ascii=False, allow_nan=False)


def _interval(v: Any) -> float | None:
    """An interval as TRACK_INFO holds one: a positive finite number, else None."""
    ok = is_finite_number(v) or (isinstance(v, np.floating) and math.isfinite(v))
    return float(v) if ok and v > 0 else None


def _track_infos(said: list[str]) -> dict[str, dict[str, Any]]:
    """TRACK_INFO's comments by track name, each as Track's fields and meta keys it gives:
    what is not a valid value is left out (a damaged comment reads as no comment)."""
    out: dict[str, dict[str, Any]] = {}
    for c in said:
        if not c.startswith(TRACK_INFO) or len(c) > TRACK_INFO_MAX:
            continue
        try:
            info = json.loads(c[len(TRACK_INFO):])
        except (ValueError, RecursionError):  # RecursionError: nesting past the stack
            continue
        if not isinstance(info, dict) or not isinstance(info.get("name"), str):
            continue
        got: dict[str, Any] = {
            "engine": info["engine"] if isinstance(info.get("engine"), str) else None,
            "requested_interval": _interval(info.get("requestedInterval")),
        }
        # null: the track has none; a damaged value leaves the period's
        said = info.get("sampleInterval")
        if "sampleInterval" in info and (said is None or _interval(said) is not None):
            got["sample_interval"] = _interval(said)
        capping = stored_capping(info)
        if capping is not None:
            got[GAP_CAPPING] = capping_meta(capping)
        out[info["name"]] = got
    return out


def _median_share(ns: np.ndarray, counts: np.ndarray) -> float:
    """The median of the pprof samples' shares of their time (ns / count, ms), each share
    counted as many times as its sample counts."""
    share = ns / np.maximum(counts, 1) / NS_PER_MS
    order = np.argsort(share, kind="stable")
    cum = np.cumsum(counts[order])
    if not len(cum) or cum[-1] <= 0:
        return 0.0
    total = int(cum[-1])
    pick = np.searchsorted(cum, [(total - 1) // 2, total // 2], side="right")
    return float(share[order][pick].mean())


def _group_ns(inverse: np.ndarray, w: np.ndarray, n: int, name: str) -> np.ndarray:
    """Per group, the nanoseconds its samples stand for: each sample's weight rounded to
    whole ns, summed exactly (two float sums of 26-bit halves, each below 2**53). Reading
    gives a pprof sample's samples whole-ns shares of its value, so its value comes back
    exactly; a float sum of their ms drifted by some ns on each round trip."""
    each = np.rint(w * NS_PER_MS)
    if len(each) and not float(each.sum()) < MAX_NS:
        _too_long(f"track {name!r} adds up to {float(each.sum()):.6g} ns")
    each = each.astype(np.int64)
    low = np.bincount(inverse, weights=each & (2**26 - 1), minlength=n)
    high = np.bincount(inverse, weights=each >> 26, minlength=n)
    return (high.astype(np.int64) << 26) + low.astype(np.int64)


def _too_long(what: str) -> None:
    raise TraceFormatError(
        f"cannot write pprof: {what}, beyond the int64 nanoseconds pprof counts in (292 "
        "years); write .jsprof.json"
    )


def write(rec: Recording) -> bytes:
    if not rec.tracks:
        raise TraceFormatError("cannot write a recording with no tracks")
    # pprof files are gzipped on disk; mtime=0 keeps the output reproducible.
    return gzip.compress(encode_profile(rec), compresslevel=6, mtime=0)


# ---- reading -----------------------------------------------------------------------------


SNIFF_FIELDS = 256  # top-level fields looked at: enough to tell, cheap on any size
SNIFF_BYTES = 4096  # and no tag read past this offset: sniffing reads the head only


_TEXT_CONTROLS = frozenset(b"\t\n\r")


def _is_text(head: bytes) -> bool:
    """No byte below 0x20 but tab and line ends (UTF-8 text of any script passes)."""
    return all(b >= 0x20 or b in _TEXT_CONTROLS for b in head)


def sniff(data: bytes, doc: Any) -> bool:
    """A Profile message: its first top-level fields are Profile fields with their wire
    types, and more than one field number (a Perfetto trace, also protobuf, has only field
    1 at the top). A file cut short still sniffs as pprof; read() says where it breaks."""
    if doc is not None:
        return False
    if data[:2] == b"\x1f\x8b":
        return True  # gzip inside gzip: only pprof is stored that way (read() checks)
    if _is_text(data[:SNIFF_BYTES]):
        # Every Profile holds varint tags (0x08, 0x10: control bytes) in its first messages;
        # text can still parse as wire fields (a folded file starting `":` did: read back as
        # pprof, it failed, found by make fuzz).
        return False
    seen = set()
    complete = False
    try:
        buf = memoryview(data)
        for i, (field, wire, _v, _at) in enumerate(pb.fields(buf, stop=SNIFF_BYTES)):
            ok = (field in LEN_FIELDS and wire == pb.LEN) or (
                field in VARINT_FIELDS | {COMMENT} and wire in (pb.VARINT, pb.LEN)
            )
            if not ok:
                return False
            seen.add(field)
            if i >= SNIFF_FIELDS:
                break
        else:
            complete = len(data) <= SNIFF_BYTES  # every field seen, not just the head's
    except pb.WireError:
        pass
    if complete:
        return STRING_TABLE in seen and len(seen) >= 2
    return len(seen) >= 2


def _parse(data: bytes, source: str) -> Any:
    """The Profile message, or a TraceFormatError saying where the file breaks."""
    from google.protobuf.message import DecodeError

    cls = classes()
    try:
        return cls["Profile"].FromString(data)
    except DecodeError:
        pass
    # The package says only that the message is malformed; our codec finds where.
    kinds = {SAMPLE_TYPE: ("sample_type", cls["ValueType"].FromString),
             SAMPLE: ("sample", cls["Sample"].FromString),
             LOCATION: ("location", cls["Location"].FromString),
             FUNCTION: ("function", cls["Function"].FromString),
             PERIOD_TYPE: ("period_type", cls["ValueType"].FromString)}
    raise pb.where_it_breaks(data, source, kinds) from None


def read(data: bytes, doc: Any, source: str) -> Recording:
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:
            raise TraceFormatError(f"{source}: corrupt gzip data ({e})") from None
    prof = _parse(data, source)
    err = ErrorAt(source)
    strings: list[str] = []
    for i, raw in enumerate(prof.string_table):
        try:
            strings.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            raise err(f"string_table[{i}]", "not UTF-8") from None
    sample_types = [(vt.type, vt.unit) for vt in prof.sample_type]
    locs: dict[int, list[tuple[int, int, int]]] = {}
    for i, loc in enumerate(prof.location):
        if loc.id == 0:
            raise err(f"location[{i}].id", "missing or 0; location ids must be nonzero")
        locs[loc.id] = [(ln.function_id, ln.line, ln.column) for ln in loc.line]
    funcs: dict[int, tuple[int, int, int, int]] = {}
    for i, fn in enumerate(prof.function):
        if fn.id == 0:
            raise err(f"function[{i}].id", "missing or 0; function ids must be nonzero")
        funcs[fn.id] = (fn.name, fn.system_name, fn.filename, fn.start_line)
    time_nanos, period = prof.time_nanos, prof.period
    comments = list(prof.comment)
    if not strings or strings[0] != "":
        raise err("string_table[0]", "must be the empty string; is this a pprof profile?")

    def string(i: int, where: str) -> str:
        if not 0 <= i < len(strings):
            raise err(where, f"string index {i} is outside string_table (0..{len(strings) - 1})")
        return strings[i]

    types = [
        (string(t, f"sample_type[{i}].type"), string(u, f"sample_type[{i}].unit"))
        for i, (t, u) in enumerate(sample_types)
    ]
    count_idx = next(
        (i for i, (t, u) in enumerate(types) if t in ("samples", "sample") and u == "count"), None
    )
    ns_idx = next((i for i, (_t, u) in enumerate(types) if u == "nanoseconds"), None)
    if count_idx is None and (ns_idx is None or period <= 0):
        found = ", ".join(f"{t}/{u}" for t, u in types) or "none"
        raise err(
            "sample_type",
            f"has no samples/count and no nanoseconds type with a period (found {found}); "
            "jsprof reads CPU and wall-time profiles",
        )

    # Functions -> frame keys; locations -> caller-first frame keys and the leaf line.
    # A function without start_line (0, unset) whose Lines all name one line takes that
    # line: @datadog/pprof leaves start_line unset and puts V8's function line in every Line.
    # Not in jsprof's own files (their comment says so): there a Line is the line executing,
    # and taking it would give a frame without a line one on the way back.
    line_of: dict[int, set[int]] = {}
    column_of: dict[int, set[int]] = {}
    said = [strings[i] for i in comments if 0 <= i < len(strings)]
    own = OWN_LINES in said
    cpu_tracks = {c[len(CPU_CLOCK):] for c in said if c.startswith(CPU_CLOCK)}
    infos = _track_infos(said)
    # A function's column: in jsprof's own files every Line of it holds the frame's; from
    # other producers only where its Lines give its line too (their Line.column is
    # otherwise the executing column, not the function's place).
    for lines in locs.values():
        for fn, ln, col in lines:
            line_of.setdefault(fn, set()).add(ln)
            column_of.setdefault(fn, set()).add(col)
    fkeys: dict[int, FrameKey] = {}
    for fid, (name_i, system_i, fname, start) in funcs.items():
        cols = column_of.get(fid, ())
        column = next(iter(cols)) if len(cols) == 1 else 0
        if own:
            pass
        elif start <= 0 and len(only := line_of.get(fid, ())) == 1:
            start = next(iter(only))
        else:
            column = 0
        w = f"function id {fid}"
        name = string(name_i, f"{w}.name")
        if name == ANONYMOUS and not string(system_i, f"{w}.system_name"):
            name = ""  # what V8 and the spec call an anonymous function
        fkeys[fid] = (
            name,
            string(fname, f"{w}.filename") or None,
            start if start > 0 else None,
            column if column > 0 else None,
        )
    loc_frames: dict[int, list[FrameKey]] = {}
    for lid, lines in locs.items():
        fr = []
        for fn, _ln, _col in reversed(lines):  # the last Line is the caller of the ones before
            if fn not in fkeys:
                raise err(
                    f"location id {lid}", f"refers to function id {fn}, which does not exist"
                )
            fr.append(fkeys[fn])
        loc_frames[lid] = fr

    stack_index: dict[tuple, int] = {}
    per_track: dict[str, dict[str, list]] = {}
    nvalues = len(types)
    for j, sample in enumerate(prof.sample):
        where = f"sample[{j}]"
        loc_ids = list(sample.location_id)
        values = list(sample.value)
        track, marker = "main", NONE
        for i, label in enumerate(sample.label):
            lw = f"{where}.label[{i}]"
            k, s = string(label.key, f"{lw}.key"), string(label.str, f"{lw}.str")
            if k == "track" and s:
                track = s
            elif k == "marker" and s in MARKERS:
                marker = MARKERS.index(s)
        if len(values) != nvalues:
            raise err(
                f"{where}.value", f"has {len(values)} values but there are {nvalues} sample types"
            )
        if count_idx is not None:
            count = values[count_idx]
        else:
            count = round(values[ns_idx] / period)  # type: ignore[index]
        if count < 0:
            raise err(f"{where}.value[{count_idx}]", f"negative sample count {count}")
        if count > model.MAX_SAMPLES:  # the most one row stands for, as jsprof JSON's sampleCounts
            raise err(
                f"{where}.value[{count_idx}]",
                f"counts {count} samples of one stack, more than jsprof reads "
                f"({model.MAX_SAMPLES}); is this file intact?",
            )
        key = tuple(loc_ids)
        k = stack_index.get(key)
        if k is None:
            for lid in loc_ids:
                if lid not in loc_frames:
                    raise err(f"{where}.location_id", f"location id {lid} does not exist")
            k = stack_index[key] = len(stack_index)
        leaf_line = locs[loc_ids[0]][0][1] if loc_ids and locs[loc_ids[0]] else 0
        ns = values[ns_idx] if ns_idx is not None else count * period
        if ns < 0:  # time runs forward: the samples would be laid out backwards
            raise err(f"{where}.value[{ns_idx}]", f"negative time {ns} ns")
        t = per_track.setdefault(
            track, {"key": [], "count": [], "ns": [], "marker": [], "line": []}
        )
        t["key"].append(k)
        t["count"].append(count)
        t["ns"].append(ns)
        t["marker"].append(marker)
        t["line"].append(max(leaf_line, 0))

    all_stacks: list[list[FrameKey]] = [[] for _ in stack_index]
    for key, k in stack_index.items():
        all_stacks[k] = [fr for lid in reversed(key) for fr in loc_frames[lid]] or [
            (PSEUDO_NAMES[0], None, None, None)
        ]
    # Up to MAX_SAMPLES in all, a sample's samples are laid out one by one; beyond, each
    # pprof sample is one row standing for its count (`sample_count`, as a merged fleet
    # profile holds them), so whatever jsprof writes as pprof reads back.
    total = sum(sum(t["count"]) for t in per_track.values())
    rows = total > model.MAX_SAMPLES
    if sum(sum(t["ns"]) for t in per_track.values()) >= MAX_NS:
        raise err(
            "sample", "values add up to more than 2**62 ns (146 years); is this file intact?"
        )
    tracks = []
    interval_ms = period / NS_PER_MS if period > 0 else None
    if len(per_track) == 1 and len(infos) == 1:
        # one track: written without a track label, named by its comment
        per_track = {next(iter(infos)): next(iter(per_track.values()))}
    for name, t in per_track.items():
        c = np.array(t["count"], np.int64)
        ns = np.array(t["ns"], np.int64)
        reps = (c > 0).astype(np.int64) if rows else c
        if ns_idx is not None and (ns[c > 0] > 0).any():
            # Each sample's samples share its nanoseconds in whole ns (q or q + 1 each),
            # so the writer's exact sum gives the value back (`_group_ns`).
            if rows:
                spacing_ns = ns[c > 0]
            else:
                q, r = np.divmod(ns, np.maximum(c, 1))
                first = np.cumsum(c) - c
                within = np.arange(int(c.sum())) - np.repeat(first, c)
                spacing_ns = np.repeat(q, c) + (within < np.repeat(r, c))
            spacing = spacing_ns / NS_PER_MS
        else:  # no time per sample: each takes one period
            spacing = np.full(int(reps.sum()), interval_ms or 1.0)
            if rows:
                spacing = spacing * c[c > 0]
        times = _spread(np.cumsum(spacing) - spacing, spacing, prof.duration_nanos)
        marker = np.array(t["marker"], np.int64)
        line = np.array(t["line"], np.int64)
        # Only this track's stacks, so each track's frame table holds its own frames.
        used, local = np.unique(np.array(t["key"], np.int64), return_inverse=True)
        trace = build_trace(
            [all_stacks[k] for k in used.tolist()],
            np.repeat(local.reshape(-1), reps),
            times,
            markers=np.repeat(marker, reps).astype(np.int8) if (marker != NONE).any() else None,
            lines=np.repeat(line, reps) if (line != NO_LINE).any() else None,
        )
        trace.sample_weight = spacing  # pprof's values are the weights, the last one too
        if rows:
            trace.sample_count = c[c > 0]
        info = infos.get(name)
        meta: dict[str, Any] = {CLOCK: CPU} if name in cpu_tracks else {}
        if info is not None and GAP_CAPPING in info:
            meta[GAP_CAPPING] = info[GAP_CAPPING]
        tracks.append(
            Track(
                name,
                trace,
                # 0 or absent: the profile does not say when it was taken.
                time_origin=time_nanos / NS_PER_MS if time_nanos else None,
                engine=None if info is None else info["engine"],
                sample_interval=(info or {}).get("sample_interval", interval_ms),
                requested_interval=None if info is None else info["requested_interval"],
                meta=meta,  # type: ignore[arg-type]
            )
        )
    if not tracks:
        tracks.append(Track("main", build_trace([], np.zeros(0, np.int64), np.zeros(0))))
    return Recording(tracks)


def _spread(times: np.ndarray, weights: np.ndarray, duration_ns: int) -> np.ndarray:
    """The end-to-end layout `times` stretched (or squeezed) by one factor so that the
    samples span the profile's `duration_nanos`, as the writer counts it (the latest
    sample's end): weights that are not the gaps between samples (a filtered or merged
    trace, time lost beyond the gap cap) make the span differ from their sum, and the
    span read back must write the same `duration_nanos` again. Left end to end when they
    already span it, when the file says no duration, or when one that short cannot hold
    the samples' weights (not a file jsprof writes)."""
    if duration_ns <= 0 or not len(times):
        return times
    span = times + weights
    if round(float(span.max()) * NS_PER_MS) == duration_ns:
        return times
    d = duration_ns / NS_PER_MS
    after = times > 0  # a sample at 0 keeps its place whatever the factor
    if not after.any() or float(weights.max()) > d:
        return times
    # Each sample's end grows with the factor; the first to reach `d` sets it.
    factor = float(((d - weights[after]) / times[after]).min())
    return times * factor


FORMAT = Format(
    name="pprof",
    description="pprof profile.proto, gzipped (go tool pprof, Datadog, Pyroscope)",
    extensions=(".pprof", ".pb", ".pb.gz"),
    sniff_head=lambda p: not p.is_json and sniff(p.data, None),
    read=lambda p: read(p.data, None, p.source),
    write=write,
)
