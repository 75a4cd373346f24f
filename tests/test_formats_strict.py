"""Readers are strict about JSON types: a boolean is not a number, nor an id (issue 11).

Also: the jsprof loader's typed fast path and its validating path agree, whatever the
layout of the file (compact, pretty-printed, keys in another order, several tracks,
strings that look like JSON syntax).
"""

import copy
import json
import re
from pathlib import Path

import numpy as np
import pytest

import jsprof
from formats_util import small_trace_doc
from jsprof.cli import main
from jsprof.errors import TraceFormatError
from jsprof.formats import _jsprof_typed, read_any
from jsprof.formats import jsprof as jsprof_format
from jsprof.trace import MARKER_CODE, NONE, ProfilerTrace, Recording, Spans, Track

DATA = Path(__file__).parent / "data"


def _ext(**kw) -> dict:
    return {"formatVersion": 1, **kw}


BOOLEANS = [
    ("timestamp", lambda d: d["samples"][0].update(timestamp=True), "samples[0].timestamp"),
    ("stackId", lambda d: d["samples"][0].update(stackId=True), "samples[0].stackId"),
    ("stackId false", lambda d: d["samples"][1].update(stackId=False), "samples[1].stackId"),
    ("frameId", lambda d: d["stacks"][1].update(frameId=True), "stacks[1].frameId"),
    ("parentId", lambda d: d["stacks"][1].update(parentId=False), "stacks[1].parentId"),
    ("resourceId", lambda d: d["frames"][0].update(resourceId=False), "frames[0].resourceId"),
    ("line", lambda d: d["frames"][0].update(line=True), "frames[0].line"),
    ("column", lambda d: d["frames"][0].update(column=True), "frames[0].column"),
    (
        "sampleLines",
        lambda d: d.update(jsprof=_ext(sampleLines=[3, True])),
        "jsprof.sampleLines[1]",
    ),
    (
        "span start",
        lambda d: d.update(
            jsprof=_ext(spans={"start": [True], "end": [1.0], "frameId": [0], "parentId": [-1]})
        ),
        "jsprof.spans.start[0]",
    ),
    (
        "span frameId",
        lambda d: d.update(
            jsprof=_ext(spans={"start": [0.0], "end": [1.0], "frameId": [True], "parentId": [-1]})
        ),
        "jsprof.spans",
    ),
    ("timeOrigin", lambda d: d.update(jsprof=_ext(timeOrigin=True)), "jsprof.timeOrigin"),
    ("formatVersion", lambda d: d.update(jsprof={"formatVersion": True}), "jsprof.formatVersion"),
]


@pytest.mark.parametrize("label,mutate,where", BOOLEANS, ids=[b[0] for b in BOOLEANS])
def test_jsprof_rejects_booleans_naming_the_field(tmp_path, capsys, label, mutate, where):
    d = copy.deepcopy(small_trace_doc())
    mutate(d)
    path = tmp_path / "bool.json"
    path.write_text(json.dumps(d))
    assert main(["validate", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"{path}: {where}" in err, err


def _cpuprofile() -> dict:
    return {
        "nodes": [
            {
                "id": 1,
                "callFrame": {"functionName": "(root)", "scriptId": "0", "url": ""},
                "children": [2],
            },
            {
                "id": 2,
                "callFrame": {
                    "functionName": "f",
                    "scriptId": "1",
                    "url": "file:///a.js",
                    "lineNumber": 0,
                    "columnNumber": 0,
                },
                "hitCount": 2,
                "positionTicks": [{"line": 1, "ticks": 2}],
            },
        ],
        "startTime": 0,
        "endTime": 20,
        "samples": [2, 2],
        "timeDeltas": [10, 10],
    }


CPU_BOOLEANS = [
    ("startTime", lambda d: d.update(startTime=True), "startTime"),
    ("endTime", lambda d: d.update(endTime=False), "endTime"),
    ("sample id", lambda d: d["samples"].__setitem__(0, True), "samples[0]"),
    ("delta", lambda d: d["timeDeltas"].__setitem__(1, True), "timeDeltas[1]"),
    ("node id", lambda d: d["nodes"][1].update(id=True), "nodes[1].id"),
    ("child id", lambda d: d["nodes"][0].update(children=[True]), "nodes[0].children"),
    (
        "lineNumber",
        lambda d: d["nodes"][1]["callFrame"].update(lineNumber=True),
        "nodes[1].callFrame.lineNumber",
    ),
    (
        "columnNumber",
        lambda d: d["nodes"][1]["callFrame"].update(columnNumber=False),
        "nodes[1].callFrame.columnNumber",
    ),
    ("hitCount", lambda d: d["nodes"][1].update(hitCount=True), "nodes[1].hitCount"),
    (
        "positionTicks line",
        lambda d: d["nodes"][1]["positionTicks"][0].update(line=True),
        "nodes[1].positionTicks[0]",
    ),
]


@pytest.mark.parametrize("label,mutate,where", CPU_BOOLEANS, ids=[b[0] for b in CPU_BOOLEANS])
def test_cpuprofile_rejects_booleans_naming_the_field(label, mutate, where):
    d = _cpuprofile()
    read_any(json.dumps(d).encode(), "ok.cpuprofile")  # the unmutated profile reads
    mutate(d)
    with pytest.raises(TraceFormatError) as e:
        read_any(json.dumps(d).encode(), "b.cpuprofile")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"b.cpuprofile: {where}"), msg


def test_speedscope_rejects_boolean_weights_and_indices():
    base = {
        "$schema": "https://www.speedscope.app/file-format-schema.json",
        "shared": {"frames": [{"name": "f"}]},
        "profiles": [
            {
                "type": "sampled",
                "name": "p",
                "unit": "milliseconds",
                "startValue": 0,
                "endValue": 2,
                "samples": [[0], [0]],
                "weights": [1, 1],
            }
        ],
    }
    read_any(json.dumps(base).encode(), "ok.speedscope.json")
    for mutate, where in (
        (lambda d: d["profiles"][0]["weights"].__setitem__(1, True), "profiles[0].weights[1]"),
        (lambda d: d["profiles"][0]["samples"].__setitem__(0, [False]), "profiles[0].samples[0]"),
        (lambda d: d["shared"]["frames"][0].update(line=True), "shared.frames[0].line"),
        (lambda d: d["profiles"][0].update(startValue=True), "profiles[0].startValue"),
    ):
        d = copy.deepcopy(base)
        mutate(d)
        with pytest.raises(TraceFormatError) as e:
            read_any(json.dumps(d).encode(), "s.json")
        assert str(e.value).startswith(f"s.json: {where}"), str(e.value)


def _recording(markers: list[str | None]) -> Recording:
    n = len(markers)
    codes = [NONE if m is None else MARKER_CODE[m] for m in markers]
    trace = ProfilerTrace(
        ["file:///x.js"],
        [("f", 0, 1, 1), ("g]", None, None, None)],
        [NONE, 0],
        [0, 1],
        np.arange(n, dtype=np.float64) * 0.5,
        [i % 3 - 1 for i in range(n)],
        codes,
    )
    return Recording(
        [
            Track("main", trace, time_origin=5.0, meta={"note": '}],"samples":[{'}),
            Track(
                "w",
                trace,
                spans=Spans(
                    np.array([0.0]), np.array([1.0]), np.array([0], np.int32), np.array([-1])
                ),
            ),
        ]
    )


@pytest.mark.parametrize("layout", ["compact", "indented", "reversed keys", "one track"])
def test_fast_and_validating_paths_agree_on_any_layout(layout, monkeypatch):
    rec = _recording(["script", None, "gc", "other", None] * 40)
    if layout == "one track":
        rec = Recording(rec.tracks[:1])
    doc = json.loads(jsprof_format.dumps(rec))
    if layout == "indented":
        data = json.dumps(doc, indent=1).encode()
    elif layout == "reversed keys":
        data = json.dumps(dict(reversed(list(doc.items())))).encode()
    else:
        data = jsprof_format.dumps(rec)
    # Small pieces, so the samples are split into many.
    monkeypatch.setattr(_jsprof_typed, "_PIECE_BYTES", 64)
    fast = _jsprof_typed.fast_recording(jsprof_format._Ctx("x"), data)
    slow = jsprof_format.recording_from_doc(json.loads(data), "x")
    for a, b, c in zip(fast.tracks, slow.tracks, rec.tracks, strict=True):
        assert a.trace == b.trace == c.trace
        assert (a.name, a.time_origin, a.meta, a.spans) == (b.name, b.time_origin, b.meta, b.spans)


def test_a_string_that_looks_like_the_end_of_the_samples_is_not_taken_for_it(tmp_path):
    rec = _recording(["script"] * 10)
    rec.tracks[0].trace.frames[1] = rec.tracks[0].trace.frames[1]._replace(name='x"}],{"')
    rec = Recording(rec.tracks[:1])
    path = tmp_path / "t.json"
    jsprof.save(rec, path)
    again = jsprof.load(path)
    assert again.tracks[0].trace == rec.tracks[0].trace
    assert again.tracks[0].meta == rec.tracks[0].meta


@pytest.mark.parametrize("fmt,name", [("perfetto", "t.pftrace"), ("pprof", "t.pb.gz")])
def test_a_truncated_binary_trace_names_the_file_and_what_is_wrong(fmt, name, tmp_path, capsys):
    from pathlib import Path

    from jsprof.formats import FORMATS

    rec = jsprof.load(Path(__file__).parent / "data" / "chromium" / "trace-basic.json")
    whole = FORMATS[fmt].write(rec)
    path = tmp_path / name
    path.write_bytes(whole[: len(whole) * 2 // 3])
    assert main(["report", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{path}: " in err, err
    assert "truncated" in err and "not a trace format" not in err, err


@pytest.mark.parametrize("fmt", ["jsprof", "cpuprofile", "chrome-trace", "speedscope"])
def test_converted_traces_keep_their_engine(fmt):
    from jsprof.formats import FORMATS
    from jsprof.trace import TraceBuilder

    b = TraceBuilder()
    s = b.stack_id([b.frame_id("f", b.resource_id("file:///a.js"), 1, 1)])
    for i in range(5):
        b.add_sample(float(i), s)
    rec = Recording([Track("main", b.build(), engine="quickjs")])
    again = read_any(FORMATS[fmt].write(rec), "x")
    assert again.tracks[0].engine == "quickjs"


# Found by `make fuzz`: values a reader took but no writer can write.
@pytest.mark.parametrize("key", ["line", "column"])
@pytest.mark.parametrize("value", [2**40, 2**70])
def test_jsprof_rejects_positions_beyond_32_bits(tmp_path, key, value):
    doc = small_trace_doc()
    doc["frames"][0][key] = value
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    for read in (lambda: jsprof.load(path), lambda: read_any(path.read_bytes(), "t.json")):
        with pytest.raises(TraceFormatError, match=rf"frames\[0\]\.{key}: "):
            read()


def test_cpuprofile_rejects_a_position_tick_line_beyond_32_bits(data):
    doc = json.loads((data / "node" / "bench.cpuprofile").read_text())
    node = next(n for n in doc["nodes"] if n.get("positionTicks"))
    node["positionTicks"][0]["line"] = 2**70
    with pytest.raises(TraceFormatError, match=r"positionTicks\[0\]"):
        read_any(json.dumps(doc).encode(), "p.cpuprofile")


def test_perfetto_thread_name_that_is_not_utf8_reads_and_writes(tmp_path):
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb2

    rec = jsprof.load(DATA / "chromium" / "trace-basic.json")
    out = tmp_path / "t.pftrace"
    jsprof.save(rec, out)
    trace = pb2.Trace()
    trace.ParseFromString(out.read_bytes())
    named = next(p for p in trace.packet if p.HasField("thread_descriptor"))
    name = named.thread_descriptor.thread_name.encode()
    # Swap the name's bytes in place (same length) for bytes that are not UTF-8.
    raw = out.read_bytes().replace(name, b"\x80" * len(name), 1)
    got = read_any(raw, "t.pftrace")
    assert got.tracks[0].name == "\ufffd" * len(name)
    again = tmp_path / "again.pftrace"
    jsprof.save(got, again)  # writes back without a UnicodeDecodeError
    assert jsprof.load(again).tracks[0].name == got.tracks[0].name


@pytest.mark.parametrize(
    ("mutate", "where"),
    [
        (lambda d: d["shared"]["frames"][0].update(line=2**70), "shared.frames[0].line"),
        (lambda d: d["shared"]["frames"][0].update(col=2**40), "shared.frames[0].col"),
        (lambda d: d["profiles"][0].update(startValue=1e308), "profiles[0].startValue"),
    ],
)
def test_speedscope_refuses_values_no_writer_can_write(mutate, where):
    doc = json.loads((DATA / "speedscope" / "py-spy.speedscope.json").read_text())
    mutate(doc)
    with pytest.raises(TraceFormatError, match=re.escape(where)):
        read_any(json.dumps(doc).encode(), "p.speedscope.json")


@pytest.mark.parametrize("value", [2**70, -(2**70)])
def test_jsprof_sample_line_beyond_64_bits_is_named(tmp_path, value):
    doc = small_trace_doc()
    doc["jsprof"] = _ext(sampleLines=[3, value])
    with pytest.raises(TraceFormatError, match=r"jsprof\.sampleLines\[1\]: expected a line number"):
        read_any(json.dumps(doc).encode(), "t.json")


def _spans(**cols) -> dict:
    """A valid file whose track has two spans (a call, a long frame) with `cols` changed."""
    d = small_trace_doc()
    spans = {"start": [0.0, 1.0], "end": [1.0, 2.0], "frameId": [0, -1], "parentId": [-1, -1],
             "kind": ["call", "long-frame"], "name": [None, 0], "names": ["long animation frame"],
             "args": [{}, {"blockingDuration": 1.0}]}
    spans.update(cols)
    d["jsprof"] = _ext(spans={k: v for k, v in spans.items() if v is not None})
    return d


SPAN_COLUMNS = [
    ({"kind": "call"}, "jsprof.spans.kind: expected an array of 2 span kinds"),
    ({"kind": ["call"]}, "jsprof.spans.kind: expected an array of 2 span kinds"),
    ({"kind": ["call", "frame"]},
     "jsprof.spans.kind[1]: 'frame' is not one of call, long-frame, script, interaction"),
    ({"kind": ["call", 1]},
     "jsprof.spans.kind[1]: 1 is not one of call, long-frame, script, interaction"),
    ({"names": [1]}, "jsprof.spans.names: expected an array of strings"),
    ({"name": [None]}, "jsprof.spans.name: expected an array of 2 name ids or nulls"),
    ({"name": [None, 1]}, "jsprof.spans.name[1]: 1 is not an index into names"),
    ({"name": [None, True]}, "jsprof.spans.name[1]: True is not an index into names"),
    ({"name": [None, None]}, "jsprof.spans.name[1]: a span that is not a call needs a name"),
    ({"args": {}}, "jsprof.spans.args: expected an array of 2 objects"),
    ({"args": [{}, []]},
     "jsprof.spans.args[1]: expected an object of strings, numbers and nulls"),
    ({"args": [{"a": [1]}, {}]},
     "jsprof.spans.args[0]: expected an object of strings, numbers and nulls"),
    ({"args": [{}, {"blockingDuration": "long"}]},
     "jsprof.spans.args[1].blockingDuration: expected a number"),
]


@pytest.mark.parametrize("cols,message", SPAN_COLUMNS)
def test_jsprof_span_columns_are_refused_naming_the_entry(tmp_path, capsys, cols, message):
    path = tmp_path / "spans.json"
    path.write_text(json.dumps(small_trace_doc() | {"jsprof": _spans()["jsprof"]}))
    assert main(["validate", str(path)]) == 0  # the file unchanged is valid
    capsys.readouterr()
    path.write_text(json.dumps(_spans(**cols)))
    assert main(["validate", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"{path}: {message}" in err, err
