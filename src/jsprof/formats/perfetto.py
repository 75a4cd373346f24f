"""Perfetto trace (protobuf), written and read with the `perfetto` package's generated classes.

One packet sequence per track, as Chrome's own sampler writes it: the first packet clears
incremental state and carries a `thread_descriptor` (pid, tid, the track's name,
`reference_timestamp_us`) and the interned strings, frames and call stacks; then
`streaming_profile_packet`s with `callstack_iid` and `timestamp_delta_us` per sample. All
tracks share one clock: microseconds since the Unix epoch (time origin + sample time), so
runtimes recorded together line up in ui.perfetto.dev; a track whose time origin is
unknown is written relative to 0. `reference_timestamp_us` is the track's time 0.
Reading, that reference is the track's time 0 and its time origin when it is an epoch
time (`trace.epoch_origin`); else the origin is unknown (Chrome stamps a boot-time clock)
and such tracks share the earliest reference as time 0, so they stay aligned.

Mapping of the spec's frame: function name -> `function_names`, resource -> `source_paths`
(`source_path_iid`), line -> `line_number`, column -> `rel_pc` (Perfetto has no column
field; the UI does not show rel_pc for JS). Samples with no JavaScript use a one-frame
stack named like V8's pseudo nodes: `(idle)`, `(garbage collector)` for the `gc` marker,
`(program)` for `other`, `(<marker>)` for the rest; reading maps them back. Timestamps are
whole microseconds (the packet's unit); the per-sample line column is not carried.
Per-sample weights (the time each sample stands for, where that is not the gap to the
next: a filtered, instrumented or merged trace) and a merged profile's counts are instant
TrackEvents, one per sample, on the thread's child track "sample weights", with the
sample's interned call stack, `callstack_weight` in ms and the count as `jsprof.count`
(`_write_weights`); reading takes them back in sample order.

A track's spans are TrackEvent slices (whole ns) on child tracks of the thread's track:
instrumented calls on "calls", the page's windows (`record --engine chromium`: long
animation frames with their script entries, interactions) on "long animation frames" and
"interactions" (another of the same name where two would overlap), nested as the spans
are. Each carries `jsprof.kind`; a window its fields as debug annotations; a call is named
as every output names its function, with its frame's `url`, `line`, `column` (and
`function: ""` for one with no name) as annotations and its own fields, when the spans
keep any, in the dict annotation `jsprof.args`. Reading takes back the slices that carry
`jsprof.kind`; a call's frame is found among the frames its samples brought (or added).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ErrorAt, TraceFormatError
from ..meta import CLOCK, CPU, clock_of
from ..timeline import span_args_problem
from ..trace import (
    MARKERS,
    MAX_MS,
    NONE,
    SPAN_KIND_CODE,
    SPAN_KINDS,
    Recording,
    SpanColumns,
    Track,
    epoch_origin,
    sample_weights,
    spans_in_order,
    step_back,
    step_back_problem,
)
from . import _protobuf as pb
from ._common import (
    PSEUDO_NAMES,
    FrameFinder,
    build_trace,
    call_frame_key,
    call_slice,
    canonical,
    counts_problem,
    weights_problem,
)
from ._format import Format

SEQ_INCREMENTAL_STATE_CLEARED = 1
SEQ_NEEDS_INCREMENTAL_STATE = 2
BATCH = 1000  # samples per streaming_profile_packet
PID = 1

# Samples with no JavaScript: marker code -> pseudo frame name (-1: no marker).
_PSEUDO = {i - 1: name for i, name in enumerate(PSEUDO_NAMES)}


def _pb() -> Any:
    try:
        from perfetto.protos.perfetto.trace import perfetto_trace_pb2
    except ImportError as e:  # pragma: no cover - a declared dependency
        raise TraceFormatError(
            f"the perfetto package is needed for Perfetto traces ({e})"
        ) from None
    return perfetto_trace_pb2


# ---- writing -----------------------------------------------------------------------------


def _int32(v: object, default: int) -> int:
    """A pid or tid from a track's meta, if it is one a thread_descriptor can carry."""
    return v if type(v) is int and -(2**31) <= v < 2**31 else default


def _write_track(pb: Any, trace_msg: Any, track: Track, index: int) -> None:
    tr = canonical(track.trace)
    seq = index + 1
    tid, pid = _int32(track.meta.get("tid"), seq), _int32(track.meta.get("pid"), PID)
    origin_us = (track.time_origin or 0.0) * 1000.0  # unknown: relative to 0, as read back
    rel_us = np.rint(tr.sample_time * 1000.0)
    # What the reader takes: a reference and times from it below 2**52 µs (the year 2112).
    if not abs(origin_us) < 2**52 or not (np.abs(rel_us) < 2**52).all():
        raise TraceFormatError(
            f"cannot write track {track.name!r} as Perfetto: its times reach beyond 2**52 µs "
            "(the year 2112 on the epoch clock), which a Perfetto trace does not hold; write "
            ".jsprof.json"
        )
    abs_us = np.rint(tr.sample_time * 1000.0 + origin_us).astype(np.int64)
    ref_us = int(round(origin_us))  # the track's time 0: reading measures from it

    first = trace_msg.packet.add()
    first.trusted_packet_sequence_id = seq
    first.sequence_flags = SEQ_INCREMENTAL_STATE_CLEARED
    if ref_us >= 0:  # an unsigned clock: a time 0 before it has no packet timestamp
        first.timestamp = ref_us * 1000
    td = first.thread_descriptor
    td.pid, td.tid, td.thread_name, td.reference_timestamp_us = pid, tid, track.name, ref_us
    interned = first.interned_data
    # iids start at 1: 0 means "unset" in Perfetto's interning.
    for i, name in enumerate(sorted({f.name for f in tr.frames} | set(_PSEUDO.values()))):
        interned.function_names.add(iid=i + 1, str=name.encode())
    name_iid = {e.str.decode(): e.iid for e in interned.function_names}
    for r, url in enumerate(tr.resources):
        interned.source_paths.add(iid=r + 1, str=url.encode())
    for f_id, f in enumerate(tr.frames):
        fr = interned.frames.add(iid=f_id + 1, function_name_id=name_iid[f.name])
        if f.resource_id is not None:
            fr.source_path_iid = f.resource_id + 1
        if f.line is not None:
            fr.line_number = f.line
        if f.column is not None:
            fr.rel_pc = f.column
    n_frames = len(tr.frames)
    pseudo_frame = {}
    for j, (code, name) in enumerate(sorted(_PSEUDO.items())):
        pseudo_frame[code] = n_frames + j + 1
        interned.frames.add(iid=n_frames + j + 1, function_name_id=name_iid[name])
    # Call stacks: one per stack id (iid = stack id + 1), frames root first.
    # Each stack's root-first frame path, built from its parent's (parents come first).
    paths: list[list[int]] = []
    for p, f in zip(tr.stack_parent.tolist(), tr.stack_frame.tolist(), strict=True):
        path = (paths[p] if p != NONE else []) + [f + 1]
        paths.append(path)
        interned.callstacks.add(iid=len(paths), frame_ids=path)
    pseudo_stack = {}
    for j, code in enumerate(sorted(_PSEUDO)):
        pseudo_stack[code] = tr.num_stacks + j + 1
        interned.callstacks.add(iid=tr.num_stacks + j + 1, frame_ids=[pseudo_frame[code]])

    stack_iid = tr.sample_stack.astype(np.int64) + 1
    no_js = tr.sample_stack == NONE
    if no_js.any():
        codes = (
            tr.sample_marker.astype(np.int64)
            if tr.sample_marker is not None
            else np.full(tr.num_samples, NONE, np.int64)
        )
        lut = np.array([pseudo_stack[c] for c in range(-1, len(MARKERS))], dtype=np.int64)
        stack_iid = np.where(no_js, lut[codes + 1], stack_iid)
    deltas = np.diff(abs_us, prepend=ref_us)
    for lo in range(0, len(stack_iid), BATCH):
        pkt = trace_msg.packet.add()
        pkt.trusted_packet_sequence_id = seq
        pkt.sequence_flags = SEQ_NEEDS_INCREMENTAL_STATE
        sp = pkt.streaming_profile_packet
        sp.callstack_iid.extend(stack_iid[lo : lo + BATCH].tolist())
        sp.timestamp_delta_us.extend(deltas[lo : lo + BATCH].tolist())
    if tr.sample_weight is not None or tr.sample_count is not None:
        _write_weights(pb, trace_msg, track, index, tr, stack_iid, abs_us)


def _write_weights(pb: Any, msg: Any, track: Track, index: int, tr: Any,
                   stack_iid: np.ndarray, abs_us: np.ndarray) -> None:
    """Weights a streaming_profile_packet has no field for (the time each sample stands
    for when it is not the gap to the next: a filtered, instrumented or merged trace):
    one instant TrackEvent per sample, in sample order, on the thread's child track
    WEIGHTS_LANE, with the sample's interned call stack and `callstack_weight` (ms), which
    the Perfetto UI sums in its flame graph of an area selected on that track; a merged
    profile's count (`sample_count`) as the annotation COUNT_KEY. On the samples'
    sequence, whose interned call stacks they name; a sample before the clock's 0 (a
    packet's time is unsigned) is placed at 0."""
    seq = index + 1
    thread_uuid = (index + 1) << 32
    lane = thread_uuid | 0xFFFFFFFF  # the spans' lanes count up from thread_uuid + 1
    d = msg.packet.add()
    d.trusted_packet_sequence_id = seq
    d.track_descriptor.uuid = thread_uuid
    d.track_descriptor.thread.pid = _int32(track.meta.get("pid"), PID)
    d.track_descriptor.thread.tid = _int32(track.meta.get("tid"), seq)
    d.track_descriptor.thread.thread_name = track.name
    d = msg.packet.add()
    d.trusted_packet_sequence_id = seq
    d.sequence_flags = SEQ_NEEDS_INCREMENTAL_STATE
    d.track_descriptor.uuid, d.track_descriptor.parent_uuid = lane, thread_uuid
    d.track_descriptor.name = WEIGHTS_LANE
    if clock_of(track.meta) == CPU and tr.sample_weight is not None:
        d.track_descriptor.description = CPU_CLOCK  # the weights are CPU time
    d.interned_data.event_names.add(iid=1, name="sample")  # 2 bytes an event, not 8
    n = tr.num_samples
    weights = (tr.sample_weight if tr.sample_weight is not None
               else sample_weights(tr, track.sample_interval)).tolist()
    counts = tr.sample_count.tolist() if tr.sample_count is not None else None
    ts = (np.maximum(abs_us, 0) * 1000).tolist()
    iids = stack_iid.tolist()
    instant = pb.TrackEvent.TYPE_INSTANT
    for i in range(n):
        pkt = msg.packet.add()
        pkt.trusted_packet_sequence_id = seq
        pkt.sequence_flags = SEQ_NEEDS_INCREMENTAL_STATE
        pkt.timestamp = ts[i]
        ev = pkt.track_event
        ev.type, ev.track_uuid, ev.name_iid = instant, lane, 1
        ev.callstack_iid, ev.callstack_weight = iids[i], weights[i]
        if counts is not None:
            ev.debug_annotations.add(name=COUNT_KEY, int_value=counts[i])


def write(rec: Recording) -> bytes:
    if not rec.tracks:
        raise TraceFormatError("cannot write a recording with no tracks")
    pb = _pb()
    msg = pb.Trace()
    proc = msg.packet.add()
    proc.trusted_packet_sequence_id = len(rec.tracks) + 1
    proc.process_descriptor.pid = PID
    proc.process_descriptor.process_name = "jsprof"
    for i, t in enumerate(rec.tracks):
        _write_track(pb, msg, t, i)
    for i, t in enumerate(rec.tracks):
        _write_spans(pb, msg, t, i, len(rec.tracks) + 2 + i)
    return msg.SerializeToString()


KIND_KEY = "jsprof.kind"  # the debug annotation naming a span's kind
WEIGHTS_LANE = "sample weights"  # the child track of a thread's per-sample weights
COUNT_KEY = "jsprof.count"  # a weight event's annotation: the samples it stands for
# The weights lane's description when the weights are CPU time (track meta `clock`).
CPU_CLOCK = "jsprof: the samples weigh CPU time (clock cpu)"
ARGS_KEY = "jsprof.args"  # a call's own fields (a dict annotation)
_LANE_GROUPS = (("calls", ("call",)),
                ("long animation frames", ("long-frame", "script")),
                ("interactions", ("interaction",)))


def _annotate(ev: Any, key: str, v: object, entries: bool = False) -> None:
    """One debug annotation (of a slice, or with `entries` of a dict annotation)."""
    d = (ev.dict_entries if entries else ev.debug_annotations).add(name=key)
    if type(v) is bool:
        d.bool_value = v
    elif type(v) is int and -(2**63) <= v < 2**63:
        d.int_value = v
    elif type(v) in (int, float):
        d.double_value = float(v)
    elif v is None:
        d.string_value = ""
        d.name = key + "?"  # null: read back as None
    else:
        d.string_value = str(v)


def _write_spans(pb: Any, msg: Any, track: Track, index: int, seq: int) -> None:
    """The track's spans (instrumented calls; the page's long animation frames with their
    script entries, interactions) as TrackEvent slices on child tracks of the thread: a
    lane per group (`_LANE_GROUPS`), more when some overlap (slices on one track must
    nest). A span before the clock's 0 is left out (a packet's time is unsigned)."""
    sp = track.spans
    if sp is None or not len(sp):
        return
    # Integers: epoch nanoseconds are beyond a double's exact range (2**53).
    origin_ns = int(round((track.time_origin or 0.0) * 1000.0)) * 1000  # the samples' whole µs
    pid, tid = _int32(track.meta.get("pid"), PID), _int32(track.meta.get("tid"), index + 1)
    thread_uuid = (index + 1) << 32
    d = msg.packet.add()
    d.trusted_packet_sequence_id = seq
    d.track_descriptor.uuid = thread_uuid
    d.track_descriptor.thread.pid, d.track_descriptor.thread.tid = pid, tid
    d.track_descriptor.thread.thread_name = track.name
    parents = sp.parent.tolist()
    kinds = sp.kind.tolist()  # type: ignore[union-attr]
    ns = (
        [origin_ns + int(v) for v in np.rint(sp.start * 1e6).tolist()],
        [origin_ns + int(v) for v in np.rint(sp.end * 1e6).tolist()],
    )
    lane_of: dict[int, int] = {}
    lanes: list[tuple[str, int]] = []  # (group title, end of its last root)
    kids: dict[int, list[int]] = {}  # per lane (NONE - lane) or span: its slices, in order
    for i in range(len(sp)):
        if ns[0][i] < 0 or not ns[1][i] < 2**63:
            continue
        p = parents[i]
        if p in lane_of:
            lane_of[i] = lane_of[p]
            kids.setdefault(p, []).append(i)
            continue
        title = next(t for t, ks in _LANE_GROUPS if SPAN_KINDS[kinds[i]] in ks)
        free = next((j for j, (t, e) in enumerate(lanes) if t == title and e <= ns[0][i]), None)
        if free is None:
            lanes.append((title, 0))
            free = len(lanes) - 1
            ld = msg.packet.add()
            ld.trusted_packet_sequence_id = seq
            ld.track_descriptor.uuid = thread_uuid + free + 1
            ld.track_descriptor.parent_uuid = thread_uuid
            ld.track_descriptor.name = title
        lanes[free] = (title, ns[1][i])
        lane_of[i] = free
        kids.setdefault(NONE - free, []).append(i)
    # Each lane's slices nested (depth first: a zero-length slice still begins before it
    # ends), then all by time; a stable sort keeps that nesting among equal times.
    events: list[tuple[int, int, int]] = []  # (ns, 1 begin / 0 end, span)
    for lane in range(len(lanes)):
        todo = [(i, 1) for i in reversed(kids.get(NONE - lane, []))]
        while todo:
            i, begin = todo.pop()
            events.append((ns[1 - begin][i], begin, i))
            if begin:
                todo.append((i, 0))
                todo.extend((c, 1) for c in reversed(kids.get(i, [])))
    frames, res = track.trace.frames, track.trace.resources
    for t, begin, i in sorted(events, key=lambda e: e[0]):
        pkt = msg.packet.add()
        pkt.trusted_packet_sequence_id = seq
        pkt.timestamp = t
        ev = pkt.track_event
        ev.track_uuid = thread_uuid + lane_of[i] + 1
        if not begin:
            ev.type = pb.TrackEvent.TYPE_SLICE_END
            continue
        ev.type = pb.TrackEvent.TYPE_SLICE_BEGIN
        _annotate(ev, KIND_KEY, SPAN_KINDS[kinds[i]])
        if kinds[i] == SPAN_KIND_CODE["call"]:
            ev.name, ident = call_slice(frames[int(sp.frame[i])], res)
            for key, v in ident.items():
                _annotate(ev, key, v)
            if sp.args is not None:  # the call's own fields, apart from its frame's
                own = ev.debug_annotations.add(name=ARGS_KEY)
                for key, v in sp.arg(i).items():
                    _annotate(own, key, v, entries=True)
        else:
            ev.name = sp.label(i) or SPAN_KINDS[kinds[i]]
            for key, v in sp.arg(i).items():
                _annotate(ev, key, v)


# ---- reading -----------------------------------------------------------------------------


# TracePacket fields that say "a Perfetto trace with CPU samples": thread_descriptor,
# streaming_profile_packet, process_descriptor, interned_data, track_descriptor.
_PACKET_FIELDS = {44, 54, 43, 12, 60}
SNIFF_PACKETS = 16
SNIFF_BYTES = 4096  # no tag read past this offset: a first packet may be megabytes long


def sniff(data: bytes, doc: Any) -> bool:
    """The first packets in the first few KB only: a Trace is a run of field-1
    TracePackets, and one of them carries a descriptor, interned data or samples. read()
    parses the file once."""
    if doc is not None or not data or data[0] != 0x0A:  # field 1 (packet), length-delimited
        return False
    buf = memoryview(data)
    known = False
    try:
        for i, (field, wire, value, _at) in enumerate(pb.fields(buf, stop=SNIFF_BYTES)):
            if field != 1 or wire != pb.LEN:
                return False
            if not known:
                inner = pb.fields(buf, *value, stop=SNIFF_BYTES)
                known = any(f in _PACKET_FIELDS for f, *_ in inner)
            if i >= SNIFF_PACKETS:
                break
    except pb.WireError:
        pass  # cut short: read() says so
    return known


def _parse(data: bytes, source: str) -> Any:
    pb2 = _pb()
    try:
        return pb2.Trace.FromString(data)
    except Exception as e:  # protobuf raises DecodeError, or others on garbage
        raise TraceFormatError(
            f"{source}: truncated or corrupt Perfetto trace ({len(data)} bytes; the protobuf "
            f"does not parse: {str(e) or type(e).__name__}); was the file copied whole?"
        ) from None


class _Epoch:
    """Interning tables valid between two SEQ_INCREMENTAL_STATE_CLEARED packets."""

    def __init__(self) -> None:
        self.names: dict[int, str] = {}
        self.paths: dict[int, str] = {}
        self.frames: dict[int, Any] = {}
        self.stacks: dict[int, list[int]] = {}
        self.iids: list[np.ndarray] = []
        self.first_packet = 0


class _Seq:
    def __init__(self) -> None:
        self.epochs: list[_Epoch] = [_Epoch()]
        self.thread: Any = None
        self.ref_us = 0
        self.deltas: list[np.ndarray] = []
        # instant events with a callstack_weight: packet index, track uuid, weight, and
        # the event where it has annotations (a count)
        self.weighted: list[tuple[int, int, float, Any]] = []
        self.cpu_clock = False  # its weights lane says they are CPU time


def read(data: bytes, doc: Any, source: str) -> Recording:
    msg = _parse(data, source)
    seqs: dict[int, _Seq] = {}
    lanes: set[int] = set()  # the tracks jsprof writes a thread's weights on
    for i, p in enumerate(msg.packet):
        seq = seqs.get(p.trusted_packet_sequence_id)
        if seq is None:  # not setdefault: a _Seq built per packet cost more than the rest
            seq = seqs[p.trusted_packet_sequence_id] = _Seq()
        if p.sequence_flags & SEQ_INCREMENTAL_STATE_CLEARED and seq.epochs[-1].iids:
            seq.epochs.append(_Epoch())
        ep = seq.epochs[-1]
        kind = p.WhichOneof("data")  # one call, not a HasField per kind: per packet work
        if kind == "thread_descriptor":
            seq.thread = p.thread_descriptor
            seq.ref_us = p.thread_descriptor.reference_timestamp_us
            if not abs(seq.ref_us) < 2**52:  # a double holds it, and track offsets, exactly
                raise ErrorAt(source)(
                    f"packet[{i}].thread_descriptor.reference_timestamp_us",
                    f"{seq.ref_us} is beyond 2**52 µs (the year 2112); is this file intact?",
                )
        if p.HasField("interned_data"):
            d = p.interned_data
            ep.names.update({e.iid: e.str.decode("utf-8", "replace") for e in d.function_names})
            ep.paths.update({e.iid: e.str.decode("utf-8", "replace") for e in d.source_paths})
            ep.frames.update({f.iid: f for f in d.frames})
            ep.stacks.update({c.iid: list(c.frame_ids) for c in d.callstacks})
        if kind == "streaming_profile_packet":
            sp = p.streaming_profile_packet
            if len(sp.callstack_iid) != len(sp.timestamp_delta_us):
                raise TraceFormatError(
                    f"{source}: packet[{i}].streaming_profile_packet: "
                    f"{len(sp.callstack_iid)} callstacks but {len(sp.timestamp_delta_us)} deltas"
                )
            if not ep.iids:
                ep.first_packet = i
            ep.iids.append(np.array(sp.callstack_iid, dtype=np.int64))
            seq.deltas.append(np.array(sp.timestamp_delta_us, dtype=np.int64))
        if kind == "track_event" and p.track_event.HasField("callstack_weight"):
            ev = p.track_event
            seq.weighted.append((i, ev.track_uuid, ev.callstack_weight,
                                 ev if len(ev.debug_annotations) else None))
        if kind == "track_descriptor" and p.track_descriptor.name == WEIGHTS_LANE:
            lanes.add(p.track_descriptor.uuid)
            if p.track_descriptor.description == CPU_CLOCK:
                seq.cpu_clock = True
    kept = [(i, seq) for i, seq in sorted(seqs.items()) if seq.thread is not None or seq.deltas]
    unknown = [s.ref_us for _, s in kept if epoch_origin(s.ref_us / 1000.0) is None]
    shared_zero = min(unknown) if unknown else 0
    tracks = [_to_track(seq, seq_id, source, shared_zero) for seq_id, seq in kept]
    for (seq_id, seq), track in zip(kept, tracks, strict=True):
        _read_weights(seq, seq_id, lanes, track.trace, source)
        if seq.cpu_clock and track.trace.sample_weight is not None:
            track.meta[CLOCK] = CPU
    if not tracks:
        raise TraceFormatError(f"{source}: Perfetto trace holds no CPU samples")
    zeros = [seq.ref_us if epoch_origin(seq.ref_us / 1000.0) is not None else shared_zero
             for _, seq in kept]
    _read_spans(msg, tracks, zeros, source)
    return Recording(tracks)


def _text(v: Any) -> Any:
    """A string field as text: protobuf hands back one that is not UTF-8 as bytes."""
    return v.decode("utf-8", "replace") if type(v) is bytes else v


def _annotation(d: Any) -> tuple[str, object]:
    name = _text(d.name)
    if name.endswith("?") and d.HasField("string_value") and not d.string_value:
        return name[:-1], None
    for f in ("bool_value", "int_value", "uint_value", "double_value", "string_value"):
        if d.HasField(f):
            return name, _text(getattr(d, f))
    return name, None


def _read_spans(msg: Any, tracks: list[Track], zeros: list[float], source: str) -> None:
    """Slices jsprof wrote for a track's spans (those with a `jsprof.kind` annotation),
    back as the spans of the track of their thread; a call's frame found among the
    track's frames (or added to them)."""
    thread_of: dict[int, tuple[int, int]] = {}
    parent_of: dict[int, int] = {}
    slices: dict[int, list[tuple[int, Any]]] = {}
    for p in msg.packet:
        kind = p.WhichOneof("data")
        if kind == "track_descriptor":
            td = p.track_descriptor
            if td.HasField("thread"):
                thread_of[td.uuid] = (td.thread.pid, td.thread.tid)
            if td.parent_uuid:
                parent_of[td.uuid] = td.parent_uuid
        if kind == "track_event" and p.track_event.type in (1, 2):
            slices.setdefault(p.track_event.track_uuid, []).append((p.timestamp, p.track_event))
    if not slices:
        return
    by_thread = {(t.meta.get("pid"), t.meta.get("tid")): k for k, t in enumerate(tracks)}
    got: dict[int, SpanColumns] = {}
    finders: dict[int, FrameFinder] = {}
    for uuid, evs in slices.items():
        k = by_thread.get(thread_of.get(parent_of.get(uuid, uuid), (None, None)))
        if k is None:
            continue
        zero_ns = int(zeros[k]) * 1000
        cols = got.setdefault(k, SpanColumns())
        stack: list[int] = []  # this lane's open slices (NONE: one not ours)
        for ts, ev in evs:
            if ev.type == 2:  # end: of the innermost open slice (ours or not)
                if stack and (j := stack.pop()) != NONE:
                    cols.end[j] = (ts - zero_ns) / 1e6
                    if cols.end[j] < cols.start[j]:  # read in packet order, not sorted
                        raise ErrorAt(source)(f"track_event on track {uuid}",
                                              "a slice ends before it begins")
                continue
            a = dict(_annotation(d) for d in ev.debug_annotations)
            label = _text(ev.name)
            kd = a.pop(KIND_KEY, None)
            if kd not in SPAN_KIND_CODE:
                stack.append(NONE)  # a slice that is not one of ours: keep the nesting
                continue
            where = f"track_event {label[:80]!r}.debug_annotations"
            parent = next((j for j in reversed(stack) if j != NONE), NONE)
            start = (ts - zero_ns) / 1e6
            if kd == "call":
                key, bad = call_frame_key(label, a)
                if key is None:
                    raise ErrorAt(source)(f"{where}.{bad.partition(': ')[0]}",
                                          bad.partition(": ")[2])
                own = next((d for d in ev.debug_annotations if _text(d.name) == ARGS_KEY), None)
                if k not in finders:
                    finders[k] = FrameFinder(tracks[k].trace)
                stack.append(cols.add(
                    "call", start, parent=parent, frame=finders[k](key),
                    args=None if own is None else dict(_annotation(d) for d in own.dict_entries),
                ))
                continue
            bad = span_args_problem(str(kd), a)  # computed with (--during, Time view)
            if bad is not None:
                raise ErrorAt(source)(f"{where}.{bad[0]}", bad[1])
            stack.append(cols.add(str(kd), start, parent=parent, label=label, args=a))
    for k, cols in got.items():
        sp = cols.build()  # a slice never ended is left out, its children float
        if len(sp):
            tracks[k].spans = spans_in_order(sp)


def _read_weights(seq: _Seq, seq_id: int, lanes: set[int], trace: Any, source: str) -> None:
    """The weights (and counts) `_write_weights` wrote on this sequence, in sample order."""
    evs = [e for e in seq.weighted if e[1] in lanes]
    if not evs:
        return
    where = f"sequence {seq_id}: {WEIGHTS_LANE!r} track_event"
    if len(evs) != trace.num_samples:
        raise ErrorAt(source)(where, f"{len(evs)} weights for {trace.num_samples} samples; "
                              "is this file intact?")
    weights = np.array([e[2] for e in evs], np.float64)
    if not ((weights >= 0) & (weights < MAX_MS)).all():  # numpy first: the rule below names it
        i, problem = weights_problem(weights.tolist()) or (0, "not a weight")
        raise ErrorAt(source)(f"packet[{evs[i][0]}].track_event.callstack_weight", problem)
    trace.sample_weight = weights
    if all(e[3] is None for e in evs):
        return
    counts = [None if ev is None else next(
        (d.int_value for d in ev.debug_annotations if _text(d.name) == COUNT_KEY), None)
        for *_, ev in evs]
    if (bad := counts_problem(counts)) is not None:
        raise ErrorAt(source)(f"packet[{evs[bad[0]][0]}].track_event.{COUNT_KEY}", bad[1])
    trace.sample_count = np.asarray(counts, np.int64)


def _resolve(ep: _Epoch, iid: int, source: str) -> tuple:
    err, where = ErrorAt(source), f"packet[{ep.first_packet}]"
    frames = ep.stacks.get(iid)
    if frames is None:
        raise err(where, f"callstack_iid {iid} was never interned")
    out = []
    for fid in frames:
        f = ep.frames.get(fid)
        if f is None:
            raise err(where, f"frame iid {fid} was never interned")
        out.append(
            (
                ep.names.get(f.function_name_id, ""),
                ep.paths.get(f.source_path_iid) if f.source_path_iid else None,
                f.line_number or None,
                f.rel_pc or None,
            )
        )
    return tuple(out)


def _to_track(seq: _Seq, seq_id: int, source: str, shared_zero: int) -> Track:
    # Per unique call stack Python work; per sample numpy.
    stacks: list[tuple] = []
    index: dict[tuple, int] = {}
    keys = []
    for ep in seq.epochs:
        if not ep.iids:
            continue
        iids = np.concatenate(ep.iids)
        uniq, inv = np.unique(iids, return_inverse=True)
        lut = np.empty(len(uniq), np.int64)
        for j, iid in enumerate(uniq.tolist()):
            st = _resolve(ep, iid, source)
            lut[j] = index.setdefault(st, len(stacks))
            if lut[j] == len(stacks):
                stacks.append(st)
        keys.append(lut[inv])
    sample_key = np.concatenate(keys) if keys else np.zeros(0, np.int64)
    origin = epoch_origin(seq.ref_us / 1000.0)
    zero = seq.ref_us if origin is not None else shared_zero
    deltas = np.concatenate(seq.deltas) if seq.deltas else np.zeros(0, np.int64)
    # Microseconds from the track's time 0, summed in integers (exact); the float sum only
    # checks that no partial sum leaves the range a double holds exactly (nor wraps).
    rel_us = (seq.ref_us - zero) + np.cumsum(deltas)
    if len(deltas) and not np.abs(np.cumsum(deltas, dtype=np.float64)).max() < 2**52:
        raise ErrorAt(source)(
            f"sequence {seq_id}.timestamp_delta_us",
            "sample times run beyond 2**52 µs from the reference; is this file intact?",
        )
    times = rel_us / 1000.0
    back = step_back(times)  # the rule every reader applies
    if back is not None:
        i, j = back
        raise ErrorAt(source)(
            f"sequence {seq_id}.timestamp_delta_us",
            f"puts sample {i} {step_back_problem(times, i, j, f'sample {j}')}",
        )
    th = seq.thread
    name = th.thread_name if th is not None and th.thread_name else f"sequence {seq_id}"
    name = _text(name)
    meta = {"pid": th.pid, "tid": th.tid} if th is not None else {}
    trace = build_trace(stacks, sample_key, times.astype(np.float64))
    return Track(name, trace, time_origin=origin, meta=meta)


FORMAT = Format(
    name="perfetto",
    description="Perfetto trace (protobuf): a track per runtime, for ui.perfetto.dev",
    extensions=(".pftrace", ".perfetto-trace", ".perfetto"),
    sniff_head=lambda p: not p.is_json and sniff(p.data, None),
    read=lambda p: read(p.data, None, p.source),
    write=write,
)
