"""Loading, saving and validating trace files (real Chromium fixtures and broken files)."""

import copy
import gzip
import io as pyio
import json

import numpy as np
import pytest

import jsprof
from formats_util import small_trace_doc
from jsprof import io as jio
from jsprof.cli import main
from jsprof.errors import TraceFormatError
from jsprof.formats import _jsprof_read
from jsprof.formats import jsprof as jsprof_format
from jsprof.trace import NONE, ProfilerTrace, Recording, Spans, TraceBuilder, Track

FIXTURES = ["trace-basic.json", "trace-idle.json", "trace-builtins.json"]


@pytest.mark.parametrize("name", FIXTURES)
def test_chromium_fixtures_load_with_their_values(data, name):
    raw = json.loads((data / "chromium" / name).read_text())
    rec = jsprof.load(data / "chromium" / name)
    assert len(rec.tracks) == 1
    t = rec.tracks[0].trace
    assert t.resources == raw["resources"]
    assert [f.name for f in t.frames] == [f["name"] for f in raw["frames"]]
    assert [f.line for f in t.frames] == [f.get("line") for f in raw["frames"]]
    assert t.stack_frame.tolist() == [s["frameId"] for s in raw["stacks"]]
    assert t.stack_parent.tolist() == [s.get("parentId", NONE) for s in raw["stacks"]]
    assert t.sample_time.tolist() == [s["timestamp"] for s in raw["samples"]]
    assert t.sample_stack.tolist() == [s.get("stackId", NONE) for s in raw["samples"]]


@pytest.mark.parametrize("name", FIXTURES)
def test_round_trip_keeps_values_and_stays_a_profiler_trace(data, tmp_path, name):
    rec = jsprof.load(data / "chromium" / name)
    out = tmp_path / "out.json"
    jsprof.save(rec, out)
    again = jsprof.load(out)
    assert again.tracks[0].trace == rec.tracks[0].trace
    doc = json.loads(out.read_text())
    raw = json.loads((data / "chromium" / name).read_text())
    # Still a plain ProfilerTrace for other consumers: the spec's tables are unchanged.
    for key in ("resources", "frames", "stacks", "samples"):
        assert doc[key] == raw[key]
    assert doc["jsprof"]["formatVersion"] == jsprof_format.FORMAT_VERSION


def _rich_recording() -> Recording:
    b = TraceBuilder()
    r = b.resource_id("file:///app.js")
    f, g = b.frame_id("f", r, 1, 11), b.frame_id("get x", r, 5, 8)
    s = b.stack_id([f, g])
    b.add_sample(0.5, s, line=6)
    b.add_sample(1.5, None, marker="gc")
    b.add_sample(2.25, b.stack_id([f]), marker="script", line=2)
    t1 = b.build()
    spans = Spans(
        np.array([0.0, 0.1]),
        np.array([1.0, 0.5]),
        np.array([0, 0], np.int32),
        np.array([NONE, 0], np.int32),
    )
    t2 = TraceBuilder()
    t2.add_sample(3.0, t2.stack_id([t2.frame_id("main")]))
    return Recording(
        [
            Track(
                "main thread",
                t1,
                time_origin=1.7e12 + 0.25,
                engine="quickjs",
                sample_interval=1.0,
                requested_interval=0.5,
                meta={"latency_ms": {"p50": 0.01}},
            ),
            Track("worker 1", t2.build(), time_origin=1.7e12 + 10, engine="v8", spans=spans),
        ]
    )


@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
def test_multi_track_round_trip_keeps_everything(tmp_path, suffix):
    rec = _rich_recording()
    out = tmp_path / f"rec{suffix}"
    jsprof.save(rec, out)
    if suffix.endswith(".gz"):
        assert out.read_bytes()[:2] == b"\x1f\x8b"
    again = jsprof.load(out)
    assert again == rec


def test_stdin_and_stdout(tmp_path, monkeypatch, capsysbinary):
    rec = _rich_recording()
    jsprof.save(rec, "-")
    written = capsysbinary.readouterr().out
    monkeypatch.setattr("sys.stdin", pyio.TextIOWrapper(pyio.BytesIO(written)))
    assert jsprof.load("-") == rec


def test_failed_write_leaves_no_file(tmp_path, monkeypatch):
    out = tmp_path / "out.json"
    out.write_text("previous")

    def boom(rec):
        raise RuntimeError("disk full")

    monkeypatch.setattr(
        jio, "writer_for",
        lambda p, f: type("F", (), {"name": "jsprof", "write": staticmethod(boom)}),
    )
    with pytest.raises(RuntimeError):
        jsprof.save(_rich_recording(), out)
    assert out.read_text() == "previous"
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


# ---- validation: each rule, a broken file and the message it must produce ---------------


def _mutate(fn):
    d = copy.deepcopy(small_trace_doc())
    fn(d)
    return d


BROKEN = [
    ("missing samples", lambda d: d.pop("samples"), "samples: missing"),
    ("frames not array", lambda d: d.update(frames={}), "frames: expected an array, got an object"),
    (
        "resource not string",
        lambda d: d["resources"].append(3),
        "resources[1]: expected a string, got a number",
    ),
    ("frame name missing", lambda d: d["frames"][1].pop("name"), "frames[1].name: missing"),
    (
        "frame name wrong type",
        lambda d: d["frames"][0].update(name=None),
        "frames[0].name: expected a string, got null",
    ),
    (
        "resourceId out of range",
        lambda d: d["frames"][0].update(resourceId=4),
        "frames[0].resourceId: 4 is out of range (resources has 1)",
    ),
    (
        "line below 1",
        lambda d: d["frames"][0].update(line=0),
        "frames[0].line: is 0; lines and columns are 1-based",
    ),
    (
        "column below 1",
        lambda d: d["frames"][0].update(column=-3),
        "frames[0].column: is -3; lines and columns are 1-based",
    ),
    (
        "column not int",
        lambda d: d["frames"][0].update(column="2"),
        "frames[0].column: expected an integer, got a string",
    ),
    ("frameId missing", lambda d: d["stacks"][1].pop("frameId"), "stacks[1].frameId: missing"),
    (
        "frameId out of range",
        lambda d: d["stacks"][1].update(frameId=2),
        "stacks[1].frameId: 2 is out of range (frames has 2)",
    ),
    (
        "parent not earlier (cycle)",
        lambda d: d["stacks"][0].update(parentId=1),
        "stacks[0].parentId: 1 is not an earlier stack",
    ),
    (
        "parent self",
        lambda d: d["stacks"][1].update(parentId=1),
        "stacks[1].parentId: 1 is not an earlier stack",
    ),
    (
        "parent negative",
        lambda d: d["stacks"][1].update(parentId=-1),
        "stacks[1].parentId: -1 is not an earlier stack",
    ),
    ("stack not object", lambda d: d["stacks"].append(5), "stacks[2]: expected an object"),
    (
        "timestamp missing",
        lambda d: d["samples"][1].pop("timestamp"),
        "samples[1].timestamp: missing",
    ),
    (
        "timestamp string",
        lambda d: d["samples"][0].update(timestamp="1"),
        "samples[0].timestamp: expected a number, got a string",
    ),
    (
        "stackId out of range",
        lambda d: d["samples"][1].update(stackId=2),
        "samples[1].stackId: 2 is out of range (stacks has 2)",
    ),
    (
        "stackId negative",
        lambda d: d["samples"][1].update(stackId=-1),
        "samples[1].stackId: -1 is out of range",
    ),
    (
        "stackId float",
        lambda d: d["samples"][0].update(stackId=0.5),
        "samples[0].stackId: expected an integer, got a number",
    ),
    (
        "stackId null",
        lambda d: d["samples"][0].update(stackId=None),
        "samples[0].stackId: is null; omit the key instead",
    ),
    (
        "bad marker",
        lambda d: d["samples"][0].update(marker="sleep"),
        "samples[0].marker: 'sleep' is not a spec marker",
    ),
    (
        "newer format",
        lambda d: d.update(jsprof={"formatVersion": 99}),
        "jsprof.formatVersion: is 99, newer than this jsprof understands",
    ),
    (
        "line column length",
        lambda d: d.update(jsprof={"formatVersion": 1, "sampleLines": [1]}),
        "jsprof.sampleLines: has 1 entries but there are 2 samples",
    ),
]


@pytest.mark.parametrize("label,mutate,message", BROKEN, ids=[b[0] for b in BROKEN])
def test_broken_file_gives_one_line_naming_field_and_index(
    tmp_path, capsys, label, mutate, message
):
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(_mutate(mutate)))
    assert main(["validate", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"jsprof: error: {path}: ")
    assert message in err, err


def test_valid_file_validates_ok(tmp_path, capsys):
    path = tmp_path / "ok.json"
    path.write_text(json.dumps(small_trace_doc()))
    assert main(["validate", str(path)]) == 0
    assert "OK" in capsys.readouterr().out


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_non_finite_timestamp(tmp_path, capsys, value):
    text = json.dumps(small_trace_doc()).replace('"timestamp": 2.0', f'"timestamp": {value}')
    path = tmp_path / "nf.json"
    path.write_text(text)
    assert main(["validate", str(path)]) == 1
    err = capsys.readouterr().err
    # orjson rejects NaN/Infinity tokens as invalid JSON; 1e999 parses to inf and is caught.
    assert (
        "samples[1].timestamp" in err and "not a finite number" in err
    ) or "not valid JSON" in err


def test_out_of_order_timestamps_load_and_validate_mentions_them(tmp_path, capsys):
    d = small_trace_doc()
    d["samples"][1]["timestamp"] = 0.5
    path = tmp_path / "ooo.json"
    path.write_text(json.dumps(d))
    assert jsprof.load(path).tracks[0].trace.sample_time.tolist() == [1.0, 0.5]
    assert main(["validate", str(path)]) == 0
    assert "1 timestamps go backwards" in capsys.readouterr().out


def test_nesting_too_deep(tmp_path, capsys):
    path = tmp_path / "deep.json"
    d = small_trace_doc()
    text = json.dumps(d).replace(
        '"resources": ["file:///a.js"]', '"resources": ' + "[" * 2000 + "]" * 2000
    )
    path.write_text(text)
    assert main(["validate", str(path)]) == 1
    assert "nesting deeper than 1024 levels" in capsys.readouterr().err


def test_meta_nesting_limited(tmp_path):
    d = small_trace_doc()
    nested: list = []
    for _ in range(40):
        nested = [nested]
    d["jsprof"] = {"formatVersion": 1, "meta": {"x": nested}}
    path = tmp_path / "meta.json"
    path.write_text(json.dumps(d))
    with pytest.raises(TraceFormatError, match="jsprof.meta: nests deeper than 32 levels"):
        jsprof.load(path)


def test_table_size_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(_jsprof_read, "MAX_TABLE_ENTRIES", 1)  # the limit is the reader's
    path = tmp_path / "big.json"
    path.write_text(json.dumps(small_trace_doc()))
    with pytest.raises(TraceFormatError, match="frames: 2 entries exceed the limit of 1"):
        jsprof.load(path)


def test_input_size_limit_and_gzip_bomb(tmp_path, monkeypatch):
    monkeypatch.setattr(jio, "MAX_INPUT_BYTES", 200)
    path = tmp_path / "t.json"
    path.write_text(json.dumps(small_trace_doc()) + " " * 300)
    with pytest.raises(TraceFormatError, match="larger than the 200 byte input limit"):
        jsprof.load(path)
    gz = tmp_path / "t.json.gz"
    gz.write_bytes(gzip.compress((json.dumps(small_trace_doc()) + " " * 10_000).encode()))
    assert gz.stat().st_size < 200
    with pytest.raises(TraceFormatError, match="decompresses to more than the 200 byte"):
        jsprof.load(gz)


@pytest.mark.parametrize(
    "content,message",
    [
        (b"", "empty file"),
        (b"{not json", "not valid JSON"),
        (b'{"a": 1}', "not a trace format jsprof reads"),
        (b"\x1f\x8b\x08garbage", "corrupt gzip data"),
    ],
)
def test_not_a_trace(tmp_path, capsys, content, message):
    path = tmp_path / "x.json"
    path.write_bytes(content)
    assert main(["report", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    # validate answers "not a valid trace" with 1
    assert main(["validate", str(path)]) == 1
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("command", ["report", "flame", "convert", "diff", "validate"])
def test_missing_or_unreadable_input_exits_2_in_one_line(tmp_path, capsys, command):
    nope = str(tmp_path / "nope.json")
    extra = {"convert": [str(tmp_path / "o.folded")], "diff": [nope]}.get(command, [])
    assert main([command, nope, *extra]) == 2
    err = capsys.readouterr().err
    assert err == f"jsprof: error: {nope}: no such file\n", err
    assert main([command, str(tmp_path), *extra]) == 2
    assert "is a directory" in capsys.readouterr().err


def test_save_plain_trace_wraps_it_as_one_track(tmp_path):
    b = TraceBuilder()
    b.add_sample(1.0, b.stack_id([b.frame_id("x")]))
    t: ProfilerTrace = b.build()
    jsprof.save(t, tmp_path / "t.json")
    rec = jsprof.load(tmp_path / "t.json")
    assert rec.tracks[0].trace == t and rec.tracks[0].name == "main"


def test_saved_file_has_the_usual_mode(tmp_path):
    import os
    import stat

    jsprof.save(_rich_recording(), tmp_path / "m.json")
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE((tmp_path / "m.json").stat().st_mode) == 0o666 & ~umask


def test_one_name_for_the_jsprof_format() -> None:
    """The jsprof JSON format has one module, `formats/jsprof.py`: no second name for it."""
    import importlib.util

    assert importlib.util.find_spec("jsprof.tracefile") is None
    assert callable(jsprof_format.read_bytes)
