"""Instrumented calls (`jsprof instrument`'s spans) through the trace-event formats: Chrome
trace (complete events) and Perfetto (TrackEvent slices) write them and read them back with
their frames, kinds, parents, args and times, as the page's windows already were
(tests/test_chromium_spans.py). Real QuickJS and Node runs; the rules that no run exercises
(anonymous functions with a script and position, a call no sample shows, a call's own
fields beside a page's windows) on a real run's recording, changed by hand."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import orjson
import pytest

import jsprof
from jsprof import timeline
from jsprof.formats import FORMATS
from jsprof.trace import ProfilerFrame, Recording, Spans, function_keys, join_spans

DATA = Path(__file__).parent / "data" / "instrument"
JSPROF = [sys.executable, "-m", "jsprof.cli"]
# What each format holds of a span's times (ms): Chrome trace whole-ish µs (a double holds
# epoch µs to 1/4 µs), Perfetto ns.
PRECISION = {".trace.json": 1e-3, ".pftrace": 1e-6}


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def _same_spans(a: Spans, ta, b: Spans, tb, precision: float) -> None:
    """Spans `b` (of trace `tb`) are `a` (of `ta`) read back: the same calls of the same
    functions, nested alike, with the same kinds, names, args and times."""
    assert len(b) == len(a) > 0
    assert np.array_equal(b.kind, a.kind)
    assert np.array_equal(b.parent, a.parent)
    ka, kb = function_keys(ta), function_keys(tb)
    calls = a.kind == 0
    assert [ka[f] for f in a.frame[calls].tolist()] == [kb[f] for f in b.frame[calls].tolist()]
    assert (b.frame[~calls] == -1).all()
    assert [a.label(i) for i in range(len(a))] == [b.label(i) for i in range(len(b))]
    assert b.args == a.args
    assert np.abs(b.start - a.start).max() < precision
    assert np.abs(b.end - a.end).max() < precision


@pytest.fixture(scope="module", params=["quickjs", "node"])
def instrumented(request, tmp_path_factory) -> Path:
    """A real `jsprof instrument --trace` run of shapes.js on the engine."""
    out = tmp_path_factory.mktemp(request.param) / "shapes.jsprof.json"
    r = _run([*JSPROF, "instrument", "--engine", request.param, "--watch", "*",
              "--trace", str(out), str(DATA / "shapes.js")])
    assert r.returncode == 0, r.stderr
    return out


@pytest.mark.parametrize("ext", [".trace.json", ".pftrace"])
def test_instrumented_calls_round_trip_through_chrome_trace_and_perfetto(
    instrumented: Path, tmp_path: Path, ext: str
) -> None:
    out = tmp_path / ("shapes" + ext)
    r = _run([*JSPROF, "convert", str(instrumented), str(out)])
    assert r.returncode == 0, r.stderr
    a, b = jsprof.load(instrumented).tracks[0], jsprof.load(out).tracks[0]
    assert a.spans is not None and b.spans is not None
    assert len(a.spans) >= 200 and a.spans.args is None
    _same_spans(a.spans, a.trace, b.spans, b.trace, PRECISION[ext])
    # fib(10)'s 177 calls, nested 9 deep under the first
    fib = [i for i, f in enumerate(b.trace.frames) if f.name == "MathBox.fib"]
    assert np.isin(b.spans.frame, fib).sum() == 177
    # what reads back writes back the same, byte for byte
    again = tmp_path / ("again" + ext)
    jsprof.save(jsprof.load(out), again)
    assert again.read_bytes() == out.read_bytes()
    if ext == ".trace.json":
        evs = orjson.loads(out.read_bytes())["traceEvents"]
        calls = [e for e in evs if e.get("cat") == "jsprof.span"]
        assert len(calls) == len(a.spans) and {e["ph"] for e in calls} == {"X"}
        # a viewer nests complete events by time: each call lies inside its caller
        for e in calls:
            p = e["args"].get("jsprofParent")
            if p is not None:
                c = calls[p]
                assert c["ts"] <= e["ts"] and e["ts"] + e["dur"] <= c["ts"] + c["dur"] + 1e-3


def test_instrument_writes_its_trace_as_perfetto_with_a_calls_lane(tmp_path: Path) -> None:
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb2

    out = tmp_path / "shapes.pftrace"
    r = _run([*JSPROF, "instrument", "--watch", "MathBox", "--trace", str(out),
              str(DATA / "shapes.js")])
    assert r.returncode == 0, r.stderr
    msg = pb2.Trace.FromString(out.read_bytes())
    lanes = {p.track_descriptor.uuid for p in msg.packet
             if p.HasField("track_descriptor") and p.track_descriptor.name == "calls"}
    begins = [p.track_event for p in msg.packet
              if p.HasField("track_event") and p.track_event.type == 1]
    assert lanes and {e.track_uuid for e in begins} <= lanes
    assert sum(e.name == "MathBox.fib" for e in begins) == 177
    sp = jsprof.load(out).tracks[0].spans
    assert sp is not None and len(sp) == len(begins)


def _changed(rec: Recording) -> Recording:
    """The real run's recording with what no instrument run makes: an anonymous function
    with a script, line and column; a call of a function no sample shows; a call's own
    fields; and a page's windows beside the calls."""
    t = rec.tracks[0]
    tr, sp = t.trace, t.spans
    assert sp is not None
    tr.resources.append("file:///app/shapes.js")
    area = next(i for i, f in enumerate(tr.frames) if f.name == "Shape.area")
    tr.frames[area] = ProfilerFrame("", len(tr.resources) - 1, 12, 5)
    tr.frames.append(ProfilerFrame("neverSampled", len(tr.resources) - 1, 40, 1))
    sp.frame[-1] = len(tr.frames) - 1
    # a call that took no time at its caller's start (a coarse clock): it still nests
    parents = sp.parent.tolist()
    leaf = next(i for i in range(1, len(sp)) if parents[i] == i - 1
                and (i + 1 == len(sp) or parents[i + 1] != i))
    sp.start[leaf] = sp.end[leaf] = sp.start[leaf - 1]
    sp.args = [{"n": i, "ok": i % 2 == 0, "note": None} if i % 3 == 0 else {}
               for i in range(len(sp))]
    end = float(sp.end.max())
    windows = timeline.to_spans({
        "longFrames": [{"start": end + 1.0, "duration": 60.0, "blockingDuration": 10.0,
                        "renderStart": end + 58.0, "styleAndLayoutStart": end + 59.0,
                        "scripts": [{"start": end + 2.0, "duration": 50.0,
                                     "invoker": "BUTTON#go.onclick", "invokerType":
                                     "event-listener", "sourceURL": "https://x/app.js",
                                     "sourceFunctionName": "go", "sourceCharPosition": 7,
                                     "forcedStyleAndLayoutDuration": 0.0,
                                     "pauseDuration": 0.0}]}],
        "interactions": [{"start": end + 0.5, "duration": 64.0, "type": "click",
                          "target": "button#go", "processingStart": end + 1.5,
                          "processingEnd": end + 52.0}],
    })
    t.spans = join_spans(sp, windows)
    return rec


@pytest.mark.parametrize("fmt", ["chrome-trace", "perfetto"])
def test_call_frames_args_and_windows_together_round_trip(
    instrumented: Path, fmt: str
) -> None:
    rec = _changed(jsprof.load(instrumented))
    data = FORMATS[fmt].write(rec)
    back = jsprof.load(io.BytesIO(data))
    a, b = rec.tracks[0], back.tracks[0]
    assert a.spans is not None and b.spans is not None
    _same_spans(a.spans, a.trace, b.spans, b.trace,
                PRECISION[".trace.json" if fmt == "chrome-trace" else ".pftrace"])
    assert "neverSampled" in {f.name for f in b.trace.frames}
    assert FORMATS[fmt].write(back) == data
    if fmt == "chrome-trace":
        evs = orjson.loads(data)["traceEvents"]
        anon = [e for e in evs if e.get("cat") == "jsprof.span" and e["args"].get("function") == ""]
        # named as every output names an anonymous function; its identity beside the name
        assert anon and anon[0]["name"] == "(anonymous shapes.js:12)"
        assert anon[0]["args"]["url"] == "file:///app/shapes.js"
        assert (anon[0]["args"]["line"], anon[0]["args"]["column"]) == (12, 5)


def _chrome(instrumented: Path) -> dict:
    return orjson.loads(FORMATS["chrome-trace"].write(jsprof.load(instrumented)))


@pytest.mark.parametrize(
    "change,where",
    [
        (lambda e: e["args"].update(jsprofParent=10**6), "args.jsprofParent"),
        (lambda e: e["args"].update(jsprofParent="0"), "args.jsprofParent"),
        (lambda e: e.update(dur=-1), ".dur"),
        (lambda e: e.update(ts=1e300), ".ts"),
        # starts inside the 2**53 ms a trace holds, ends beyond them
        (lambda e: e.update(ts=e["ts"] + (2**53 - 2**40) * 1e3, dur=2.0**52), ".dur"),
        (lambda e: e["args"].update(line=0), "args.line"),
        (lambda e: e["args"].update(url=7), "args.url"),
        (lambda e: e["args"].update(function="f"), "args.function"),
        (lambda e: e["args"].update(jsprofArgs={"deep": {"x": 1}}), "args.jsprofArgs"),
        (lambda e: e.update(args=[]), ".args"),
        (lambda e: e.update(name=3), ".name"),
    ],
)
def test_a_bad_call_event_is_refused_in_one_line_naming_it(
    instrumented: Path, tmp_path: Path, change, where: str
) -> None:
    doc = _chrome(instrumented)
    evs = doc["traceEvents"]
    i, e = next((i, e) for i, e in enumerate(evs)
                if e.get("cat") == "jsprof.span" and "jsprofParent" in e["args"])
    change(e)
    bad = tmp_path / "bad.trace.json"
    bad.write_bytes(orjson.dumps(doc))
    r = _run([*JSPROF, "report", str(bad)])
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert f"traceEvents[{i}]" in r.stderr and where in r.stderr, r.stderr


def test_a_perfetto_call_that_ends_before_it_begins_is_refused(
    instrumented: Path, tmp_path: Path
) -> None:
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb2

    msg = pb2.Trace.FromString(FORMATS["perfetto"].write(jsprof.load(instrumented)))
    end = next(p for p in msg.packet if p.HasField("track_event") and p.track_event.type == 2)
    end.timestamp = 0
    bad = tmp_path / "bad.pftrace"
    bad.write_bytes(msg.SerializeToString())
    r = _run([*JSPROF, "report", str(bad)])
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "a slice ends before it begins" in r.stderr and "Traceback" not in r.stderr


def test_perfetto_names_that_are_not_utf8_read_as_text(instrumented: Path) -> None:
    # Found by fuzzing: protobuf hands back a string field that is not UTF-8 as bytes.
    data = FORMATS["perfetto"].write(jsprof.load(instrumented))
    assert data.count(b"jsprof.kind") > 1 and b"MathBox.count" in data
    data = data.replace(b"jsprof.kind", b"\x80sprof.kind", 1)  # a slice not of ours now
    data = data.replace(b"MathBox.count", b"\xffathBox.count")  # interned and slice names
    rec = jsprof.load(io.BytesIO(data))
    sp, frames = rec.tracks[0].spans, rec.tracks[0].trace.frames
    assert sp is not None
    assert "\ufffdathBox.count" in {frames[f].name for f in sp.frame.tolist()}
    out = FORMATS["perfetto"].write(rec)
    assert FORMATS["perfetto"].write(jsprof.load(io.BytesIO(out))) == out
