"""One time-origin rule (issue 15): a file without an epoch clock reads with the time
origin unknown (None), never an invented 0; every writer and command takes such a track;
a known origin survives every format that can hold one."""

from __future__ import annotations

import gzip
import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import orjson
import pytest

import jsprof
from jsprof.formats import FORMATS
from jsprof.formats import jsprof as jsprof_format
from jsprof.trace import NONE, Recording, TraceBuilder, Track

DATA = Path(__file__).parent / "data"
EPOCH = 1_796_011_922_569.5  # a real time origin (ms), from a QuickJS recording

# Real files whose producers wrote no epoch time.
NO_CLOCK = [
    "node/bench.cpuprofile",  # node --cpu-prof: V8's monotonic clock
    "primjs/profile-interval100.json",  # PrimJS
    "chromium/trace-basic.json",  # Chromium's own ProfilerTrace, no jsprof key
    "speedscope/py-spy.speedscope.json",  # py-spy
    "folded/py-spy-raw.folded",  # py-spy --format raw
]


@pytest.mark.parametrize("name", NO_CLOCK)
def test_files_without_an_epoch_clock_read_as_unknown(name):
    rec = jsprof.load(DATA / name)
    assert rec.tracks and all(t.time_origin is None for t in rec.tracks)


def test_pprof_time_nanos_is_the_origin_and_its_absence_unknown():
    raw = (DATA / "pprof" / "datadog-pprof-node20.pb.gz").read_bytes()
    rec = jsprof.load(io.BytesIO(raw))
    assert rec.tracks[0].time_origin is not None and rec.tracks[0].time_origin > 1.6e12
    # The same profile without time_nanos (field 9, a varint at the top level).
    from jsprof.formats import _protobuf as pb

    data = gzip.decompress(raw)
    at = [(f, a) for f, _w, _v, a in pb.fields(memoryview(data))]
    ends = [a for _, a in at[1:]] + [len(data)]
    kept = b"".join(data[a:e] for (f, a), e in zip(at, ends, strict=True) if f != 9)
    assert len(kept) < len(data)
    rec2 = jsprof.load(io.BytesIO(bytes(kept)))
    assert rec2.tracks[0].time_origin is None
    assert rec2.num_samples == rec.num_samples


def _devtools_trace(starts_us: list[int]) -> bytes:
    """Chrome trace events as DevTools writes them: a Profile per thread on Chrome's
    boot-time clock, the nodes and samples of a real `node --cpu-prof` profile."""
    prof = orjson.loads((DATA / "node" / "bench.cpuprofile").read_bytes())
    nodes = []
    for nd in prof["nodes"]:
        cf = dict(nd["callFrame"], scriptId=int(nd["callFrame"]["scriptId"]))
        nodes.append({"id": nd["id"], "callFrame": cf})
    parent = {c: nd["id"] for nd in prof["nodes"] for c in nd.get("children", ())}
    for nd in nodes:
        if nd["id"] in parent:
            nd["parent"] = parent[nd["id"]]
    events = []
    for k, start in enumerate(starts_us):
        pid_id = f"0x{k + 1}"
        base = {"ph": "P", "cat": "disabled-by-default-v8.cpu_profiler", "id": pid_id, "pid": 7}
        events.append(
            {"name": "thread_name", "ph": "M", "pid": 7, "tid": k, "args": {"name": f"t{k}"}}
        )
        events.append(
            {
                "name": "Profile",
                **base,
                "tid": k,
                "ts": start,
                "args": {"data": {"startTime": start}},
            }
        )
        data = {
            "cpuProfile": {"nodes": nodes, "samples": prof["samples"][:200]},
            "timeDeltas": prof["timeDeltas"][:200],
        }
        events.append(
            {"name": "ProfileChunk", **base, "tid": k, "ts": start, "args": {"data": data}}
        )
    return orjson.dumps({"traceEvents": events})


def test_chrome_trace_on_a_boot_time_clock_is_unknown_and_keeps_its_tracks_aligned():
    # Two threads whose profiles start 5 ms apart on a clock ~3 days after boot.
    rec = jsprof.load(io.BytesIO(_devtools_trace([250_000_000_000, 250_000_005_000])))
    a, b = rec.tracks
    assert a.time_origin is None and b.time_origin is None
    # Same samples and deltas, so the second thread's times are the first's + 5 ms.
    assert np.allclose(b.trace.sample_time - a.trace.sample_time, 5.0)
    # Written and read again, still unknown and still 5 ms apart.
    back = jsprof.load(io.BytesIO(FORMATS["chrome-trace"].write(rec)))
    assert [t.time_origin for t in back.tracks] == [None, None]
    assert np.allclose(back.tracks[1].trace.sample_time - back.tracks[0].trace.sample_time, 5.0)


def _two_tracks(origins: list[float | None]) -> Recording:
    tracks = []
    for k, origin in enumerate(origins):
        b = TraceBuilder()
        r = b.resource_id(f"file:///w{k}.js")
        f, g = b.frame_id("outer", r, 1, 1), b.frame_id("inner", r, 4, 2)
        for i in range(40):
            b.add_sample(2.0 + i * 1.25, b.stack_id([f, g] if i % 3 else [f]))
        tracks.append(Track(f"t{k}", b.build(), time_origin=origin, sample_interval=1.25))
    return Recording(tracks)


def _first_sample_epoch(t: Track) -> float:
    assert t.time_origin is not None
    return t.time_origin + float(t.trace.sample_time.min())


WRITERS = [n for n, f in FORMATS.items() if f.write is not None and f.read is not None]


@pytest.mark.parametrize("fmt", WRITERS)
def test_every_writer_takes_an_unknown_origin_and_it_reads_back_unknown(fmt):
    rec = _two_tracks([None]) if fmt == "cpuprofile" else _two_tracks([None, None])
    out = FORMATS[fmt].write(rec)
    back = jsprof.load(io.BytesIO(out))
    assert [t.time_origin for t in back.tracks] == [None] * len(back.tracks)
    # And the bytes are stable: no number was invented on the way.
    assert FORMATS[fmt].write(back) == out


# Formats that carry an epoch time, and how exactly (ms).
KEEPS_ORIGIN = {
    "jsprof": 0.0,
    "speedscope": 0.0,
    "chrome-trace": 1e-3,
    "perfetto": 1e-3,
    "pprof": 1e-3,
}


@pytest.mark.parametrize("fmt", sorted(KEEPS_ORIGIN))
def test_a_known_origin_survives_formats_that_hold_one(fmt):
    rec = _two_tracks([EPOCH, EPOCH + 3.5])
    back = jsprof.load(io.BytesIO(FORMATS[fmt].write(rec)))
    if fmt == "pprof":  # one time for the whole profile: the earliest sample's
        assert _first_sample_epoch(back.tracks[0]) == pytest.approx(EPOCH + 2.0, abs=1e-3)
        return
    for a, b in zip(rec.tracks, back.tracks, strict=True):
        assert b.time_origin is not None
        assert _first_sample_epoch(b) == pytest.approx(
            _first_sample_epoch(a), abs=KEEPS_ORIGIN[fmt]
        )


def test_mixed_known_and_unknown_tracks_write_everywhere():
    rec = _two_tracks([EPOCH, None])
    for fmt in WRITERS:
        if fmt == "cpuprofile":
            continue
        back = jsprof.load(io.BytesIO(FORMATS[fmt].write(rec)))
        assert back.num_samples == rec.num_samples, fmt
    doc = orjson.loads(FORMATS["firefox"].write(rec))
    assert doc["meta"]["startTime"] == EPOCH
    assert (
        orjson.loads(FORMATS["firefox"].write(_two_tracks([None, None])))["meta"]["startTime"]
        == 0.0
    )
    # pprof has one time for the profile: with any track unknown it states none.
    assert jsprof.load(io.BytesIO(FORMATS["pprof"].write(rec))).tracks[0].time_origin is None


def test_jsprof_files_say_null_for_unknown_and_read_both_spellings():
    rec = _two_tracks([None])
    doc = orjson.loads(jsprof_format.dumps(rec))
    assert "timeOrigin" in doc["jsprof"] and doc["jsprof"]["timeOrigin"] is None
    for value, want in ((None, None), (0, None), (0.0, None), (EPOCH, EPOCH)):
        doc["jsprof"]["timeOrigin"] = value
        assert jsprof.load(io.BytesIO(orjson.dumps(doc))).tracks[0].time_origin == want
    del doc["jsprof"]["timeOrigin"]
    assert jsprof.load(io.BytesIO(orjson.dumps(doc))).tracks[0].time_origin is None


@pytest.mark.parametrize(
    "args",
    [
        ["report"],
        ["report", "--tree"],
        ["report", "--time-range", "0:50"],
        ["validate"],
    ],
)
def test_commands_take_files_with_unknown_origin(tmp_path, args):
    src = DATA / "node" / "bench.cpuprofile"
    r = subprocess.run(
        [sys.executable, "-m", "jsprof.cli", args[0], str(src), *args[1:]],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr


def test_convert_flame_and_diff_of_unknown_origins(tmp_path):
    src = DATA / "node" / "bench.cpuprofile"
    for out in ("a.pftrace", "a.trace.json", "a.pb.gz", "a.firefox.json", "a.jsprof.json"):
        r = subprocess.run(
            [sys.executable, "-m", "jsprof.cli", "convert", str(src), str(tmp_path / out)],
            capture_output=True,
            text=True,
        )
        assert r.returncode == 0, (out, r.stderr)
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "jsprof.cli",
            "flame",
            str(tmp_path / "a.pftrace"),
            "-o",
            str(tmp_path / "f.html"),
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    r = subprocess.run(
        [sys.executable, "-m", "jsprof.cli", "diff", str(src), str(tmp_path / "a.trace.json")],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    back = jsprof.load(tmp_path / "a.jsprof.json")
    assert back.tracks[0].time_origin is None
    assert (back.tracks[0].trace.sample_stack != NONE).any()
