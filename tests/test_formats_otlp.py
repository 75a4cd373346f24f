"""OpenTelemetry profiles (OTLP protobuf and OTLP/JSON): real recordings (QuickJS and Node
recorded here, Chromium's traces in tests/data) written by `jsprof convert`, decoded with
the `opentelemetry-proto` package itself, and read back: every sample, its time to the ns
and its stack kept; the dictionary's zero values, leaf-first stacks, period and frame type
as the proto says; weighted and merged profiles; bad input is one line."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest
from google.protobuf import json_format
from opentelemetry.proto.profiles.v1development import profiles_pb2 as pb

import jsprof
from formats_util import (
    CHROMIUM,
    DATA,
    jsprof_cli,
    markers,
    mixed_recording,
    one_line_error,
    paths,
    weighted_recordings,
)
from jsprof.errors import TraceFormatError
from jsprof.formats import detect, otlp, otlpjson, read_any
from jsprof.trace import NONE, laid_out, sample_counts, sample_weights

BENCH = DATA / "node" / "bench.cpuprofile"


def test_field_numbers_are_the_current_v1development_ones() -> None:
    # An older numbering (values and timestamps swapped places) made Pyroscope drop
    # profiles silently: the package jsprof is built on must number them as the proto does.
    def numbers(msg) -> dict[str, int]:
        return {f.name: f.number for f in msg.DESCRIPTOR.fields}

    assert pb.DESCRIPTOR.package == "opentelemetry.proto.profiles.v1development"
    assert numbers(pb.Sample) == {"stack_index": 1, "attribute_indices": 2, "link_index": 3,
                                  "values": 4, "timestamps_unix_nano": 5}
    assert numbers(pb.ProfilesData) == {"resource_profiles": 1, "dictionary": 2}
    assert numbers(pb.ProfilesDictionary) == {
        "mapping_table": 1, "location_table": 2, "function_table": 3, "link_table": 4,
        "string_table": 5, "attribute_table": 6, "stack_table": 7}
    assert numbers(pb.ResourceProfiles) == {"resource": 1, "scope_profiles": 2, "schema_url": 3}
    assert numbers(pb.ScopeProfiles) == {"scope": 1, "profiles": 2, "schema_url": 3}
    p = numbers(pb.Profile)
    assert {k: p[k] for k in ("sample_type", "samples", "time_unix_nano", "duration_nano",
                              "period_type", "period", "attribute_indices")} == {
        "sample_type": 1, "samples": 2, "time_unix_nano": 3, "duration_nano": 4,
        "period_type": 5, "period": 6, "attribute_indices": 11}
    assert numbers(pb.Stack) == {"location_indices": 1}
    assert numbers(pb.Location) == {"mapping_index": 1, "address": 2, "lines": 3,
                                    "attribute_indices": 4}
    assert numbers(pb.Line) == {"function_index": 1, "line": 2, "column": 3}
    assert numbers(pb.Function) == {"name_strindex": 1, "system_name_strindex": 2,
                                    "filename_strindex": 3, "start_line": 4}
    assert numbers(pb.KeyValueAndUnit) == {"key_strindex": 1, "value": 2, "unit_strindex": 3}
    assert numbers(pb.ValueType) == {"type_strindex": 1, "unit_strindex": 2}
    # timestamps are fixed64 (wire type 1), values int64 varints
    fd = pb.Sample.DESCRIPTOR.fields_by_name
    assert fd["timestamps_unix_nano"].type == fd["timestamps_unix_nano"].TYPE_FIXED64
    assert fd["values"].type == fd["values"].TYPE_INT64


# ---- what the file holds, decoded by opentelemetry-proto alone -----------------------------


def _decoded(data) -> dict:
    """Per profile: the track name, sample type, period, and the observations as
    (timestamp ns, value, leaf-first frames (name, url, line, column), executing line,
    marker)."""
    d = data.dictionary
    s = d.string_table
    assert s[0] == ""
    zero = {"mapping_table": pb.Mapping(), "location_table": pb.Location(),
            "function_table": pb.Function(), "link_table": pb.Link(),
            "attribute_table": pb.KeyValueAndUnit(), "stack_table": pb.Stack()}
    for table, value in zero.items():
        assert getattr(d, table)[0] == value, table
    attrs = [(s[a.key_strindex], a.value.string_value) for a in d.attribute_table]
    for loc in d.location_table[1:]:
        assert [attrs[i] for i in loc.attribute_indices] == [("profile.frame.type", "v8js")]
        assert len(loc.lines) == 1
    out = {}
    for rp in data.resource_profiles:
        for sp in rp.scope_profiles:
            assert sp.scope.name == "jsprof"
            for prof in sp.profiles:
                pa = dict(attrs[i] for i in prof.attribute_indices)
                kind = (s[prof.sample_type.type_strindex], s[prof.sample_type.unit_strindex])
                obs = []
                for sample in prof.samples:
                    frames = []
                    for li in d.stack_table[sample.stack_index].location_indices:
                        line = d.location_table[li].lines[0]
                        fn = d.function_table[line.function_index]
                        name = s[fn.name_strindex] if s[fn.system_name_strindex] or s[
                            fn.name_strindex] != "(anonymous)" else ""
                        frames.append((name, s[fn.filename_strindex] or None,
                                       fn.start_line or None, line.column or None))
                    leaf_line = d.location_table[
                        d.stack_table[sample.stack_index].location_indices[0]].lines[0].line
                    marker = dict(attrs[i] for i in sample.attribute_indices).get(
                        "jsprof.marker")
                    assert len(sample.values) == len(sample.timestamps_unix_nano)
                    for ts, v in zip(sample.timestamps_unix_nano, sample.values, strict=True):
                        obs.append((ts, v, tuple(frames), leaf_line, marker))
                out[(pa["thread.name"], kind)] = {
                    "profile": prof, "obs": sorted(obs, key=repr),
                    "meta": json.loads(pa.get("jsprof.meta", "{}"))}
    return out


def _expected(track) -> list:
    """The track's samples as the file must hold them."""
    from jsprof.trace import MARKERS, NO_STACK_NAMES

    trace = track.trace
    origin = round(Fraction(track.time_origin) * 10**6) if track.time_origin is not None else 0
    ts = np.rint(trace.sample_time * 1e6).astype(np.int64) + origin
    w = np.rint(sample_weights(trace, track.sample_interval) * 1e6).astype(np.int64)
    ms = markers(trace)
    lines = trace.sample_line.tolist() if trace.sample_line is not None else [0] * len(ts)
    out = []
    for i, path in enumerate(paths(trace)):
        m = MARKERS[ms[i]] if ms[i] != NONE else None
        if path is None:  # no JavaScript: the pseudo frame of its marker
            frames = ((NO_STACK_NAMES[ms[i] + 1], None, None, None),)
            line = 0
        else:
            frames = tuple(reversed(path))  # leaf first
            line = lines[i]
        out.append((int(ts[i]), int(w[i]), frames, line, m))
    return sorted(out, key=repr)


def _rows(track) -> list:
    """The samples read back, in their order, to the ns: (time, weight, path, marker, line,
    count)."""
    t = track.trace
    ms = markers(t)
    lines = t.sample_line.tolist() if t.sample_line is not None else [0] * t.num_samples
    return list(zip(np.rint(t.sample_time * 1e6).astype(np.int64).tolist(),
                    np.rint(sample_weights(t, track.sample_interval) * 1e6).astype(
                        np.int64).tolist(),
                    paths(t), ms, lines, sample_counts(t).tolist(), strict=True))


def _check(rec, data: bytes, back) -> None:
    """`data` (the OTLP bytes of `rec`, either encoding) holds every sample of every track
    with its time and stack; `back` (read back by jsprof) has them all again."""
    msg = (pb.ProfilesData.FromString(data) if data[:1] != b"{" else
           json_format.Parse(data, pb.ProfilesData()))
    dec = _decoded(msg)
    assert len(back.tracks) == len(rec.tracks)
    for track, got in zip(rec.tracks, back.tracks, strict=True):
        kind = "cpu" if track.meta.get("clock") == "cpu" else "wall"
        p = dec[(track.name, (kind, "nanoseconds"))]
        assert p["obs"] == _expected(track)
        assert p["profile"].period == (round(track.sample_interval * 1e6)
                                       if track.sample_interval else 0)
        assert p["profile"].period_type == p["profile"].sample_type
        assert p["meta"] == track.meta
        if track.trace.sample_count is not None:
            counts = dec[(track.name, ("samples", "count"))]
            assert sum(o[1] for o in counts["obs"]) == int(track.trace.sample_count.sum())
        # read back: time order, every sample with its time, weight, stack, marker, line
        assert got.name == track.name and got.engine == track.engine
        assert got.time_origin == track.time_origin and got.meta == track.meta
        assert got.sample_interval == track.sample_interval
        t_back = got.trace.sample_time
        assert (np.diff(t_back) >= 0).all()
        assert sorted(_rows(got), key=repr) == sorted(_rows(track), key=repr)
        if (np.diff(track.trace.sample_time) > 0).all():  # strictly in time order: same order
            assert _rows(got) == _rows(track)


def _round_trip(rec, tmp_path, name: str) -> None:
    src = tmp_path / f"{name}.jsprof.json"
    src.write_bytes(jsprof.formats.writer_for(str(src), None).write(rec))
    for ext in (".otlp.pb", ".otlp.json"):
        out = tmp_path / f"{name}{ext}"
        r = jsprof_cli("convert", str(src), str(out))
        assert r.returncode == 0, r.stderr
        assert "no per-sample weights" not in r.stderr  # OTLP keeps them: no false note
        data = out.read_bytes()
        assert detect(data, str(out)).name == ("otlp" if ext == ".otlp.pb" else "otlp-json")
        back = jsprof.load(out)
        # a merged profile has no time axis (meta `aggregated`): OTLP keeps time, so the
        # writer lays its samples out one after another (trace.laid_out); that is the file
        _check(laid_out(rec), data, back)
        # and what was read writes the same file again
        assert jsprof.formats.writer_for(str(out), None).write(back) == data


@pytest.mark.parametrize("fixture", [*CHROMIUM, BENCH], ids=lambda p: p.stem)
def test_chromium_and_node_files_round_trip(fixture, tmp_path) -> None:
    _round_trip(jsprof.load(fixture), tmp_path, fixture.stem)


@pytest.mark.parametrize("engine", ["quickjs", "quickjs-cpu", "node"])
def test_recordings_round_trip(engine, tmp_path) -> None:
    script = tmp_path / "work.js"
    script.write_text(
        "function leaf(n) { let s = 0; for (let i = 0; i < n; i++) s += i % 7; return s; }\n"
        "function mid(n) { return leaf(n) + leaf(n >> 1); }\n"
        "let t = 0; for (let k = 0; k < 40; k++) t += mid(2e5);\n"
        "console.log(t > 0 ? 'ok' : 'no');\n"
    )
    rec_path = tmp_path / "rec.jsprof.json"
    clock = ["--clock", "cpu"] if engine == "quickjs-cpu" else []
    r = jsprof_cli("record", "--engine", engine.split("-")[0], *clock, "-o", str(rec_path),
                   str(script))
    assert r.returncode == 0, r.stderr
    rec = jsprof.load(rec_path)
    assert rec.num_samples > 0 and rec.tracks[0].time_origin is not None
    # leaf() is recorded below mid(): the file's stacks list it first
    _round_trip(rec, tmp_path, engine)
    data = (tmp_path / f"{engine}.otlp.pb").read_bytes()
    dec = _decoded(pb.ProfilesData.FromString(data))
    leaf_first = [o[2] for p in dec.values() for o in p["obs"]
                  if len(o[2]) >= 2 and o[2][1][0] == "mid"]
    assert leaf_first and all(f[0][0] == "leaf" for f in leaf_first)
    if clock:  # CPU-clock samples: cpu/nanoseconds, their CPU-time weights in values
        assert rec.tracks[0].meta.get("clock") == "cpu"
        assert {k[1] for k in dec} == {("cpu", "nanoseconds")}
    # absolute times: epoch ns within the recording's span
    origin = round(Fraction(rec.tracks[0].time_origin) * 10**6)
    ts = [o[0] for p in dec.values() for o in p["obs"]]
    assert min(ts) >= origin and min(ts) > 1.6e18


def test_markers_tracks_pseudo_stacks_and_odd_names(tmp_path) -> None:
    _round_trip(mixed_recording(), tmp_path, "mixed")


@pytest.fixture(scope="module")
def weighted(tmp_path_factory) -> dict[str, bytes]:
    return weighted_recordings(tmp_path_factory.mktemp("weighted"))


@pytest.mark.parametrize("what", ["instrument", "focus", "fleet"])
def test_weighted_and_merged_profiles(weighted, what, tmp_path) -> None:
    rec = read_any(weighted[what], what)
    if what == "fleet":
        assert any(t.trace.sample_count is not None for t in rec.tracks)
    else:
        assert any(t.trace.sample_weight is not None for t in rec.tracks)
    _round_trip(rec, tmp_path, what)


def test_otlp_json_follows_the_otlp_json_rules() -> None:
    data = otlpjson.write(mixed_recording())
    doc = json.loads(data)
    assert list(doc) == ["resourceProfiles", "dictionary"]
    prof = doc["resourceProfiles"][0]["scopeProfiles"][0]["profiles"][0]
    s = prof["samples"][0]
    assert set(s) >= {"stackIndex", "values", "timestampsUnixNano"}
    # int64 and fixed64 as decimal strings
    assert all(isinstance(v, str) for v in s["values"] + s["timestampsUnixNano"])
    assert isinstance(prof["timeUnixNano"], str)
    # the zero values: empty objects, the empty string
    d = doc["dictionary"]
    assert d["stringTable"][0] == "" and d["stackTable"][0] == {} and d["functionTable"][0] == {}
    # the same message as the protobuf encoding
    assert json_format.Parse(data, pb.ProfilesData()) == pb.ProfilesData.FromString(
        otlp.write(mixed_recording()))


@pytest.mark.parametrize(("cut", "expect"), [
    (lambda b: b[: len(b) // 2], "malformed protobuf"),
    (lambda b: b[:-3], "malformed protobuf"),
])
def test_truncated_protobuf_is_one_clear_line(cut, expect, tmp_path) -> None:
    good = otlp.write(jsprof.load(BENCH))
    bad = tmp_path / "bad.otlp.pb"
    bad.write_bytes(cut(good))
    assert detect(bad.read_bytes(), "bad").name == "otlp"
    with pytest.raises(TraceFormatError, match=expect):
        jsprof.load(bad)
    r = jsprof_cli("convert", str(bad), str(tmp_path / "o.json"))
    assert r.returncode != 0
    line = one_line_error(r.stderr)
    assert "bad.otlp.pb" in line and expect in line
    assert not (tmp_path / "o.json").exists()


@pytest.mark.parametrize(("field", "where"), [(1, "resource_profiles[0]"), (2, "dictionary")])
def test_a_broken_embedded_message_is_named_with_its_byte(field, where, tmp_path) -> None:
    # The protobuf package says only "malformed"; the field whose message breaks is named
    # (the one dictionary without an index), at the byte its field starts.
    from jsprof.formats import _protobuf

    good = otlp.write(jsprof.load(BENCH))
    at, (start, end) = next((at, value) for f, _, value, at in
                            _protobuf.fields(memoryview(good)) if f == field)
    bad = bytearray(good)
    bad[end - 8 : end] = b"\x07" * 8  # wire type 7: no such type
    with pytest.raises(TraceFormatError) as e:
        read_any(bytes(bad), "bad.otlp.pb")
    assert str(e.value).startswith(f"bad.otlp.pb: {where}: malformed protobuf in the field at "
                                   f"byte {at} (Error parsing message"), e.value
    assert str(e.value).endswith("); is the file complete?"), e.value


@pytest.mark.parametrize(("doc", "expect"), [
    (b'{"resourceProfiles": 3}', "not OTLP/JSON profiles"),
    (b'{"resourceProfiles": [{"scopeProfiles": [{"profiles": [{"samples": '
     b'[{"stackIndex": 9, "values": ["1"]}]}]}]}], "dictionary": {"stringTable": [""]}}',
     "sample_type: is not set; jsprof reads CPU and wall-time profiles"),
    (b'{"resourceProfiles": [{"scopeProfiles": [{"profiles": [{"sampleType": {"typeStrindex"'
     b': 1, "unitStrindex": 2}, "samples": [{"stackIndex": 9, "values": ["1"]}]}]}]}], '
     b'"dictionary": {"stringTable": ["", "wall", "nanoseconds"]}}',
     "samples[0].stack_index: 9 is outside stack_table"),
    (b'{"resourceProfiles": [{"scopeProfiles": [{"profiles": [{"sampleType": {"typeStrindex"'
     b': 1, "unitStrindex": 2}, "samples": [{"values": ["1", "2"], "timestampsUnixNano": '
     b'["5"]}]}]}]}], "dictionary": {"stringTable": ["", "wall", "nanoseconds"], '
     b'"stackTable": [{}]}}',
     "has 2 values but 1 timestamps_unix_nano"),
    (b'{"resourceProfiles": [], "dictionary": {"stringTable": [""]', "not OTLP/JSON"),
])
def test_wrong_json_is_one_clear_line(doc, expect, tmp_path) -> None:
    bad = tmp_path / "bad.otlp.json"
    bad.write_bytes(doc)
    r = jsprof_cli("convert", str(bad), str(tmp_path / "o.json"))
    assert r.returncode != 0
    line = one_line_error(r.stderr)
    assert "bad.otlp.json" in line and expect in line, line


def test_pprof_and_perfetto_are_not_taken_for_otlp(tmp_path) -> None:
    from jsprof.formats import perfetto, pprof

    rec = jsprof.load(BENCH)
    assert not otlp.sniff(pprof.encode_profile(rec))
    assert not otlp.sniff(perfetto.FORMAT.write(rec))
    assert otlp.sniff(otlp.write(rec))
