"""Chrome trace events and Perfetto: multi-track recordings out and back in."""

import json
import subprocess
import sys

import numpy as np
import pytest
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

import jsprof
from jsprof.errors import TraceFormatError
from jsprof.trace import MARKERS, NONE, Recording, TraceBuilder, Track


def resolved(track: Track) -> list[tuple]:
    """(absolute µs, frames root-first as (name, url, line, column), marker) per sample."""
    tr = track.trace
    out = []
    for t, s, i in zip(
        tr.sample_time.tolist(), tr.sample_stack.tolist(), range(tr.num_samples), strict=True
    ):
        frames = tuple(
            (
                f.name,
                None if f.resource_id is None else tr.resources[f.resource_id],
                f.line,
                f.column,
            )
            for f in (tr.frames[j] for j in (tr.stack_frames(s) if s != NONE else []))
        )
        m = tr.sample_marker[i] if tr.sample_marker is not None else NONE
        marker = MARKERS[m] if m != NONE and s == NONE else None  # JS samples may gain "script"
        origin = track.time_origin or 0.0  # unknown: on the recording's shared time 0
        out.append((round(origin * 1000 + t * 1000), frames, marker))
    return out


def three_tracks() -> Recording:
    tracks = []
    for k, (name, origin) in enumerate(
        [("main", 1.79e12), ("worker 1", 1.79e12 + 3.5), ("node", 1.79e12 + 7.25)]
    ):
        b = TraceBuilder()
        r = b.resource_id(f"file:///app{k}.js")
        f = b.frame_id("outer", r, 1, 10)
        g = b.frame_id("inner", r, 5, 3)
        h = b.frame_id("", r, 9, 1)
        for i in range(50 + 10 * k):
            if i % 7 == 3:
                b.add_sample(i * 1.0, None, marker=["gc", "other", None][i % 3])
            else:
                b.add_sample(i * 1.0 + 0.25, b.stack_id([f, g] if i % 2 else [f, h, g]))
        tracks.append(Track(name, b.build(), time_origin=origin, engine="quickjs"))
    return Recording(tracks)


@pytest.mark.parametrize("ext", [".trace.json", ".pftrace"])
def test_multi_track_round_trip_keeps_samples_and_stacks(tmp_path, ext):
    rec = three_tracks()
    out = tmp_path / f"rec{ext}"
    jsprof.save(rec, out)
    back = jsprof.load(out)
    assert [t.name for t in back.tracks] == ["main", "worker 1", "node"]
    for a, b in zip(rec.tracks, back.tracks, strict=True):
        assert resolved(b) == resolved(a)


@pytest.mark.parametrize("ext", [".trace.json", ".pftrace"])
def test_chromium_fixture_round_trip(data, tmp_path, ext):
    rec = jsprof.load(data / "chromium" / "trace-builtins.json")
    out = tmp_path / f"t{ext}"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "jsprof.cli",
            "convert",
            str(data / "chromium" / "trace-builtins.json"),
            str(out),
        ],
        check=True,
    )
    back = jsprof.load(out)
    assert resolved(back.tracks[0]) == resolved(rec.tracks[0])


def test_perfetto_decodes_with_the_packages_schema(tmp_path):
    rec = three_tracks()
    out = tmp_path / "rec.pftrace"
    jsprof.save(rec, out)
    msg = pb.Trace.FromString(out.read_bytes())
    names, counts = {}, {}
    for p in msg.packet:
        if p.HasField("thread_descriptor"):
            names[p.trusted_packet_sequence_id] = p.thread_descriptor.thread_name
        if p.HasField("streaming_profile_packet"):
            seq = p.trusted_packet_sequence_id
            counts[seq] = counts.get(seq, 0) + len(p.streaming_profile_packet.callstack_iid)
    got = {names[s]: n for s, n in counts.items()}
    assert got == {t.name: t.trace.num_samples for t in rec.tracks}
    # One clock: each track's first sample lies at its own time origin (epoch µs).
    refs = {
        p.thread_descriptor.thread_name: p.thread_descriptor.reference_timestamp_us
        for p in msg.packet
        if p.HasField("thread_descriptor")
    }
    assert refs["worker 1"] - refs["main"] == 3500


def test_chrome_trace_shape(tmp_path):
    rec = three_tracks()
    out = tmp_path / "rec.trace.json"
    jsprof.save(rec, out)
    events = json.loads(out.read_text())["traceEvents"]
    profiles = [e for e in events if e["name"] == "Profile"]
    chunks = [
        e for e in events if e["name"] == "ProfileChunk" and "cpuProfile" in e["args"]["data"]
    ]
    threads = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert len(profiles) == 3 and sorted(threads.values()) == ["main", "node", "worker 1"]
    for p in profiles:
        mine = [c for c in chunks if c["id"] == p["id"]]
        total = sum(len(c["args"]["data"]["cpuProfile"]["samples"]) for c in mine)
        assert total == rec.track(threads[p["tid"]]).trace.num_samples
        ids = [n["id"] for c in mine for n in c["args"]["data"]["cpuProfile"]["nodes"]]
        assert len(ids) == len(set(ids))  # each node once, as Chrome does


def _write(tmp_path, obj, name="bad.json"):
    p = tmp_path / name
    p.write_text(json.dumps(obj))
    return p


def test_chrome_trace_broken_inputs(tmp_path):
    chunk = {
        "name": "ProfileChunk",
        "ph": "P",
        "id": "0x1",
        "pid": 1,
        "tid": 1,
        "ts": 0,
        "args": {"data": {"cpuProfile": {"nodes": [], "samples": [1]}, "timeDeltas": []}},
    }
    with pytest.raises(
        TraceFormatError, match=r"traceEvents\[0\]: ProfileChunk for id '0x1' before"
    ):
        jsprof.load(_write(tmp_path, {"traceEvents": [chunk]}))
    prof = {
        "name": "Profile",
        "ph": "P",
        "id": "0x1",
        "pid": 1,
        "tid": 1,
        "ts": 0,
        "args": {"data": {"startTime": 0}},
    }
    with pytest.raises(TraceFormatError, match=r"traceEvents\[1\].args.data.timeDeltas: has 0"):
        jsprof.load(_write(tmp_path, [prof, chunk]))
    with pytest.raises(TraceFormatError, match="no CPU profile"):
        jsprof.load(_write(tmp_path, {"traceEvents": [{"name": "x", "ph": "X", "ts": 0}]}))


def test_perfetto_broken_input(tmp_path):
    msg = pb.Trace()
    p = msg.packet.add()
    p.trusted_packet_sequence_id = 1
    p.thread_descriptor.thread_name = "t"
    p.streaming_profile_packet.callstack_iid.extend([7])
    p.streaming_profile_packet.timestamp_delta_us.extend([1])
    path = tmp_path / "bad.pftrace"
    path.write_bytes(msg.SerializeToString())
    with pytest.raises(TraceFormatError, match=r"packet\[0\]: callstack_iid 7 was never interned"):
        jsprof.load(path)


def test_times_line_up_across_tracks(tmp_path):
    rec = three_tracks()
    for ext in (".trace.json", ".pftrace"):
        back = jsprof.load(_save(rec, tmp_path / f"x{ext}"))
        starts = {t.name: t.time_origin + float(np.min(t.trace.sample_time)) for t in back.tracks}
        assert starts["node"] - starts["main"] == pytest.approx(7.25, abs=1e-3)


def _save(rec, path):
    jsprof.save(rec, path)
    return path


def test_convert_one_track_to_a_one_thread_format(tmp_path):
    src = _save(three_tracks(), tmp_path / "rec.json")
    out = tmp_path / "one.cpuprofile"
    cmd = [sys.executable, "-m", "jsprof.cli", "convert", str(src), str(out)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    assert p.returncode == 2 and "--track NAME" in p.stderr and not out.exists()
    subprocess.run([*cmd, "--track", "worker 1"], check=True, capture_output=True)
    back = jsprof.load(out).tracks[0]
    want = three_tracks().track("worker 1")
    assert back.trace.num_samples == want.trace.num_samples
