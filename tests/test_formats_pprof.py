"""pprof: decoded by the real npm `pprof-format`, per-stack totals through round trips, errors."""

from __future__ import annotations

import collections
import gzip

import numpy as np
import orjson
import pytest

import jsprof
from formats_util import (
    CHROMIUM,
    DATA,
    jsprof_cli,
    mixed_recording,
    node,
    one_line_error,
    totals,
    weighted_recordings,
)
from jsprof.analysis.profile import sample_weights
from jsprof.errors import TraceFormatError
from jsprof.formats import _protobuf as pb
from jsprof.formats import pprof, read_any
from jsprof.trace import NO_LINE, NONE

BENCH = DATA / "node" / "bench.cpuprofile"


def _decode(path) -> dict:
    r = node("decode-pprof.js", str(path))
    assert r.returncode == 0, r.stderr
    return orjson.loads(r.stdout)


@pytest.mark.npm
@pytest.mark.parametrize("fixture", [*CHROMIUM, BENCH], ids=lambda p: p.stem)
def test_cli_convert_decoded_by_pprof_format(fixture, tmp_path):
    out = tmp_path / "out.pb.gz"
    r = jsprof_cli("convert", str(fixture), str(out))
    assert r.returncode == 0, r.stderr
    raw = out.read_bytes()
    assert raw[:2] == b"\x1f\x8b" and gzip.decompress(raw)[:2] != b"\x1f\x8b"  # gzipped once
    p = _decode(out)
    assert p["sampleType"] == [["samples", "count"], ["cpu", "nanoseconds"]]
    assert p["periodType"] == ["cpu", "nanoseconds"]
    track = jsprof.load(fixture).tracks[0]
    trace = track.trace
    assert sum(s["value"][0] for s in p["samples"]) == trace.num_samples
    ns = sample_weights(trace, track.sample_interval).sum() * 1e6
    assert sum(s["value"][1] for s in p["samples"]) == pytest.approx(ns, abs=len(p["samples"]))
    # Locations leaf first: reversed, the function names are the stack root first.
    funcs = {f["id"]: f for f in p["functions"]}
    locs = {loc["id"]: loc for loc in p["locations"]}
    decoded = collections.Counter()
    for s in p["samples"]:
        names = tuple(
            funcs[locs[lid]["lines"][0]["functionId"]]["name"] for lid in reversed(s["locationId"])
        )
        decoded[names] += s["value"][0]
    want = collections.Counter()
    for path, _m in totals(trace, by_marker=False).elements():
        want[tuple(f[0] or "(anonymous)" for f in path) if path is not None else None] += 1
    no_js = sum(c for k, c in want.items() if k is None)
    pseudo = sum(c for k, c in decoded.items() if len(k) == 1 and k[0].startswith("("))
    assert pseudo >= no_js
    for k, c in want.items():
        if k is not None:
            assert decoded[k] >= c
    # Functions carry file and start line.
    f0 = trace.frames[0]
    assert any(
        f["name"] == (f0.name or "(anonymous)")
        and f["startLine"] == (f0.line or 0)
        and f["filename"]
        for f in p["functions"]
    )
    # Round trip: per-stack totals (columns are not in pprof).
    back = jsprof.load(out).tracks[0].trace
    assert totals(back) == totals(trace)


def test_lines_from_the_per_sample_column():
    rec = jsprof.load(BENCH)
    trace = rec.tracks[0].trace
    assert trace.sample_line is not None
    back = read_any(pprof.write(rec), "b.pb.gz").tracks[0].trace

    def per_stack_line(t):
        return collections.Counter(
            zip(
                [None if p is None else p for p in _paths(t)],
                np.where(t.sample_stack != NONE, t.sample_line, NO_LINE).tolist(),
                strict=True,
            )
        )

    assert per_stack_line(back) == per_stack_line(trace)


def _paths(t):
    from formats_util import paths

    return paths(t, with_column=False)


@pytest.mark.npm
def test_multi_track_markers_and_time_weights(tmp_path):
    rec = mixed_recording()
    out = tmp_path / "m.pprof"
    out.write_bytes(pprof.write(rec))
    p = _decode(out)
    labels = {tuple(sorted(s["labels"].items())) for s in p["samples"]}
    assert any(("track", "worker 1") in x for x in labels)
    assert any(("marker", "gc") in x for x in labels)
    back = jsprof.load(out)
    assert [t.name for t in back.tracks] == ["main", "worker 1"]
    for a, b in zip(rec.tracks, back.tracks, strict=True):
        assert totals(b.trace) == totals(a.trace)
        # Each sample keeps its share of the nanoseconds, so time totals survive too.
        wa = sample_weights(a.trace, a.sample_interval).sum()
        wb = sample_weights(b.trace, b.sample_interval).sum()
        assert wb == pytest.approx(wa, rel=0.05)
        # pprof has one start time: the earliest sample of the recording (epoch ms).
        first = min(t.time_origin + float(t.trace.sample_time.min()) for t in rec.tracks)
        assert b.time_origin == pytest.approx(first, abs=1e-3)


@pytest.mark.npm
def test_reads_a_file_written_by_pprof_format(tmp_path):
    out = tmp_path / "foreign.pb.gz"
    spec = [
        {"stack": [["main", "/a.js", 1, 3], ["f", "/a.js", 5, 7]], "count": 3, "ns": 3_000_000},
        {"stack": [["main", "/a.js", 1, 4]], "count": 2, "ns": 2_000_000},
    ]
    r = node("encode-pprof.js", str(out), orjson.dumps(spec).decode())
    assert r.returncode == 0, r.stderr
    rec = jsprof.load(out)
    t = rec.tracks[0].trace
    got = collections.Counter(_paths(t))
    assert got == {
        (("main", "/a.js", 1), ("f", "/a.js", 5)): 3,
        (("main", "/a.js", 1),): 2,
    }
    # The leaf's Line.line is the per-sample line.
    assert sorted(t.sample_line.tolist()) == [4, 4, 7, 7, 7]
    assert rec.tracks[0].time_origin == 1_700_000_000_000.0
    assert rec.tracks[0].sample_interval == 1.0


def test_unpacked_repeated_fields_and_inlined_lines():
    # Some encoders write repeated integers unpacked; Locations may hold inlined Lines.
    s = pb.bytes_field
    u = pb.uint_field

    def vt(t, un):
        return u(1, t) + u(2, un)

    line_inner = u(1, 2) + u(2, 30)
    line_outer = u(1, 1) + u(2, 10)
    data = (
        s(1, vt(1, 2))
        + s(2, u(1, 1) + u(2, 4))  # one location id, one value, unpacked
        + s(4, u(1, 1) + s(4, line_inner) + s(4, line_outer))
        + s(5, u(1, 1) + u(2, 3) + u(4, 5) + u(5, 1))
        + s(5, u(1, 2) + u(2, 4) + u(4, 5) + u(5, 20))
        + b"".join(s(6, x.encode()) for x in ["", "samples", "count", "outer", "inner", "x.js"])
    )
    t = read_any(data, "raw.pb").tracks[0].trace
    assert collections.Counter(_paths(t)) == {(("outer", "x.js", 1), ("inner", "x.js", 20)): 4}


def _profile(*parts: bytes) -> bytes:
    return b"".join(parts)


S, U = pb.bytes_field, pb.uint_field
STRINGS = b"".join(S(6, x.encode()) for x in ["", "samples", "count", "f"])
TYPES = S(1, U(1, 1) + U(2, 2))
FUNC = S(5, U(1, 1) + U(2, 3))
LOC = S(4, U(1, 1) + S(4, U(1, 1)))


@pytest.mark.parametrize(
    ("data", "expect"),
    [
        (TYPES + S(2, U(1, 1) + U(2, 1)) + LOC + FUNC + STRINGS[:-1], "malformed protobuf"),
        (TYPES + S(2, U(1, 9) + U(2, 1)) + LOC + FUNC + STRINGS, "location id 9 does not exist"),
        (
            TYPES + S(2, U(1, 1) + U(2, 1)) + S(4, U(1, 1) + S(4, U(1, 7))) + FUNC + STRINGS,
            "function id 7",
        ),
        (S(1, U(1, 1) + U(2, 99)) + LOC + FUNC + STRINGS, "sample_type[0].unit: string index 99"),
        (S(1, U(1, 3) + U(2, 3)) + LOC + FUNC + STRINGS, "sample_type: has no samples/count"),
        (
            TYPES + S(2, U(1, 1) + S(2, b"\x01\x02")) + LOC + FUNC + STRINGS,
            "sample[0].value: has 2 values",
        ),
        (
            TYPES + S(2, U(1, 1) + U(2, 1)) + LOC + FUNC + S(6, b"x") + STRINGS,
            "string_table[0]: must be the empty string",
        ),
        (
            TYPES + S(2, U(1, 1) + U(2, 1)) + S(4, S(4, U(1, 1))) + FUNC + STRINGS,
            "location[0].id: missing or 0",
        ),
        (gzip.compress(TYPES + STRINGS)[:-6], "corrupt gzip"),
    ],
    ids=lambda v: v.split(":")[0][:30].replace(" ", "-") if isinstance(v, str) else "",
)
def test_malformed_input_is_one_clear_line(data, expect):
    with pytest.raises(TraceFormatError) as e:
        pprof.read(data, None, "bad.pb.gz")
    msg = str(e.value)
    assert msg.startswith("bad.pb.gz: ") and "\n" not in msg
    assert expect in msg


def test_sniffing_and_cli_errors(tmp_path):
    good = pprof.encode_profile(mixed_recording())
    assert pprof.sniff(good, None)
    assert not pprof.sniff(b"main;f 3\n", None)
    assert not pprof.sniff(S(1, b"\x08\x01") * 3, None)  # field 1 only: a Perfetto trace
    bad = tmp_path / "bad.pb.gz"
    bad.write_bytes(gzip.compress(good[: len(good) // 2]))
    r = jsprof_cli("convert", str(bad), str(tmp_path / "o.json"))
    assert r.returncode != 0
    one_line_error(r.stderr)


def _merged(counts: list[int]):
    from jsprof.trace import Recording, TraceBuilder

    b = TraceBuilder()
    r = b.resource_id("file:///a.js")
    main, f = b.frame_id("main", r, 1, 1), b.frame_id("f", r, 4, 1)
    for i in range(len(counts)):
        b.add_sample(float(i * 10), b.stack_id([main, f] if i % 2 else [main]))
    trace = b.build()
    trace.sample_count = np.asarray(counts, np.int64)  # a merged (fleet) profile
    trace.sample_weight = np.asarray([c * 0.5 for c in counts], np.float64)
    return Recording.of(trace)


def test_a_merged_profile_counting_more_samples_than_jsprof_expands_reads_back(monkeypatch):
    # Its pprof was refused on reading ("counts add up to ... more than jsprof reads"):
    # what jsprof writes, jsprof reads. Beyond the limit each pprof sample is one sample
    # standing for its count.
    from jsprof import trace as model

    monkeypatch.setattr(model, "MAX_SAMPLES", 1000)
    rec = _merged([600, 500, 300])
    out = pprof.write(rec)
    back = read_any(out, "merged.pb.gz").tracks[0].trace
    # pprof aggregates by stack: `main` (600 + 300) and `f` (500)
    assert model.recorded_samples(back) == 1400 and back.sample_count.tolist() == [900, 500]
    assert back.sample_weight.tolist() == [450.0, 250.0]
    again = pprof.write(read_any(out, "again.pb.gz"))
    assert pprof.write(read_any(again, "again.pb.gz")) == again  # stable
    # Within the limit, the samples are laid out one by one as before.
    small = read_any(pprof.write(_merged([600, 300])), "small.pb.gz").tracks[0].trace
    assert small.num_samples == 900 and small.sample_count is None


@pytest.mark.parametrize(
    ("values", "expect"),
    [
        ((5, -1), r"sample\[0\]\.value\[1\]: negative time -1 ns"),
        ((2001, 5), r"sample\[0\]\.value\[0\]: counts 2001 samples of one stack"),
        ((1, 2**62), r"sample: values add up to more than 2\*\*62 ns"),
    ],
)
def test_counts_and_times_no_writer_could_write_back_are_refused(values, expect, monkeypatch):
    # A negative time laid the samples out backwards (the jsprof JSON was then refused);
    # 2**62 ns and more made times no writer's clock counts.
    from jsprof import trace as model

    monkeypatch.setattr(model, "MAX_SAMPLES", 2000)
    with pytest.raises(TraceFormatError, match=expect):
        read_any(_one_sample(*values), "bad.pb")


def _one_sample(count: int, ns: int) -> bytes:
    """A pprof of one sample (`main`): `count` samples taking `ns` nanoseconds."""
    from jsprof.formats import _protobuf as pb

    strings = ["", "samples", "count", "cpu", "nanoseconds", "main", "file:///a.js"]
    msg = pb.bytes_field(1, pb.uint_field(1, 1) + pb.uint_field(2, 2))
    msg += pb.bytes_field(1, pb.uint_field(1, 3) + pb.uint_field(2, 4))
    msg += pb.bytes_field(2, pb.packed(1, [1]) + pb.packed(2, [count, ns]))
    msg += pb.bytes_field(4, pb.uint_field(1, 1) + pb.bytes_field(4, pb.uint_field(1, 1)))
    msg += pb.bytes_field(5, pb.uint_field(1, 1) + pb.uint_field(2, 5) + pb.uint_field(4, 6))
    msg += b"".join(pb.bytes_field(6, s.encode()) for s in strings)
    return msg


@pytest.mark.parametrize(
    ("count", "ns"), [(99991, 10**12 + 3), (1000, 10**15 + 7), (3, 2**53 + 3), (7, 10**9 + 1)]
)
def test_a_sample_whose_time_does_not_divide_by_its_count_writes_back_stably(count, ns):
    # Its samples shared ns / count as float ms; summing them back drifted by some ns on
    # every round trip (make fuzz: "pprof: write(read(x)) is not stable").
    out = pprof.write(read_any(_one_sample(count, ns), "x.pb"))
    assert pprof.write(read_any(out, "out.pb.gz")) == out
    back = read_any(out, "out.pb.gz").tracks[0].trace
    assert back.num_samples == count
    assert round(float(back.sample_weight.sum()) * 1e6) == pytest.approx(ns, rel=1e-15)


@pytest.fixture(scope="module")
def weighted(tmp_path_factory) -> dict[str, bytes]:
    return weighted_recordings(tmp_path_factory.mktemp("weighted"))


@pytest.mark.npm
@pytest.mark.parametrize("what", ["instrument", "focus", "fleet"])
def test_weighted_recordings_write_back_byte_for_byte(weighted, what, tmp_path):
    # duration_nanos was the recording's span, but reading lays the samples end to end:
    # where weights are not the gaps, the span read back (their sum) wrote another
    # duration_nanos, so write(read(write(x))) != write(x).
    rec = read_any(weighted[what], f"{what}.jsprof.json")
    assert all(t.trace.sample_weight is not None for t in rec.tracks)
    out = pprof.write(rec)
    back = read_any(out, "out.pb.gz")
    assert pprof.write(back) == out
    # ... and the profile read back spans the recording's span, its weights kept
    span = max(float((t.trace.sample_time + t.trace.sample_weight).max()) for t in back.tracks)
    path = tmp_path / "out.pb.gz"
    path.write_bytes(out)
    assert round(span * 1e6) == _decode(path)["durationNanos"] > 0  # as pprof-format reads it
    for a, b in zip(rec.tracks, back.tracks, strict=True):
        # each weight to whole ns
        assert float(b.trace.sample_weight.sum()) == pytest.approx(
            float(a.trace.sample_weight.sum()), abs=a.trace.num_samples * 5e-7)
        assert (np.diff(b.trace.sample_time) >= 0).all()
