"""The .cpuprofile format (Chrome DevTools / node --cpu-prof / PrimJS): read, write, errors."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import numpy as np
import orjson
import pytest

import jsprof
from jsprof.cli import main
from jsprof.errors import TraceFormatError
from jsprof.formats import cpuprofile as cp
from jsprof.formats import read_any
from jsprof.trace import MARKER_CODE, NONE

DATA = Path(__file__).parent / "data"
BENCH = DATA / "node" / "bench.cpuprofile"
PRIMJS = DATA / "primjs" / "profile-interval100.json"


def _read(doc: dict) -> jsprof.ProfilerTrace:
    data = orjson.dumps(doc)
    return read_any(data, "t.cpuprofile").tracks[0].trace


def _profile(nodes, samples, deltas, start=1000):
    return {
        "nodes": nodes,
        "startTime": start,
        "endTime": start + sum(deltas),
        "samples": samples,
        "timeDeltas": deltas,
    }


def _node(nid, name, url="", line=-1, col=-1, children=(), hit=0, **kw):
    d = {
        "id": nid,
        "callFrame": {
            "functionName": name,
            "scriptId": "1" if url else "0",
            "url": url,
            "lineNumber": line,
            "columnNumber": col,
        },
        "hitCount": hit,
    }
    if children:
        d["children"] = list(children)
    d.update(kw)
    return d


SMALL = _profile(
    [
        _node(1, "(root)", children=[2, 5, 6, 7]),
        _node(2, "main", "file:///a.js", 0, 13, children=[3]),
        _node(3, "f", "file:///a.js", 4, -1, children=[4], positionTicks=[{"line": 6, "ticks": 2}]),
        _node(4, "g", "", -1, -1),
        _node(5, "(program)"),
        _node(6, "(garbage collector)"),
        _node(7, "(idle)"),
    ],
    [3, 3, 4, 5, 6, 7, 2],
    [10, 1000, 0, -20, 1000, 1000, 1000],
)


def test_conversion_rules():
    t = _read(SMALL)
    assert t.resources == ["file:///a.js"]
    # 0-based -> 1-based; -1 -> omitted; no URL -> no resource; (root) is not a frame.
    assert [tuple(f) for f in t.frames] == [
        ("main", 0, 1, 14),
        ("f", 0, 5, None),
        ("g", None, None, None),
    ]
    assert t.stack_parent.tolist() == [NONE, 0, 1]
    assert t.sample_stack.tolist() == [1, 1, 2, NONE, NONE, NONE, 0]
    m = MARKER_CODE
    assert t.sample_marker.tolist() == [
        m["script"],
        m["script"],
        m["script"],
        m["other"],
        m["gc"],
        NONE,
        m["script"],
    ]
    # microseconds -> ms from startTime; a negative delta keeps its place.
    assert np.allclose(t.sample_time, [0.01, 1.01, 1.01, 0.99, 1.99, 2.99, 3.99])
    # positionTicks (1-based already) fill the line column for that node's samples only.
    assert t.sample_line.tolist() == [6, 6, 0, 0, 0, 0, 0]


def test_round_trip_same_samples_and_stacks():
    rec = jsprof.load(BENCH)
    t = rec.tracks[0].trace
    data = cp.write(rec)
    t2 = read_any(data, "again.cpuprofile").tracks[0].trace
    assert t2.resources == t.resources and t2.frames == t.frames
    assert np.array_equal(t2.stack_parent, t.stack_parent)
    assert np.array_equal(t2.stack_frame, t.stack_frame)
    assert np.array_equal(t2.sample_stack, t.sample_stack)
    assert np.array_equal(t2.sample_marker, t.sample_marker)
    assert np.array_equal(t2.sample_time, t.sample_time)

    # positionTicks are per-node totals: the multiset of lines per stack survives.
    def per_stack(tr):
        return collections.Counter(
            zip(tr.sample_stack.tolist(), tr.sample_line.tolist(), strict=True)
        )

    assert per_stack(t2) == per_stack(t)
    # And the written file is byte-for-byte stable from then on.
    assert cp.write(read_any(data, "x")) == cp.write(read_any(cp.write(read_any(data, "x")), "y"))
    # The original absolute microseconds come back.
    doc = orjson.loads(data)
    orig = json.loads(BENCH.read_text())
    assert doc["startTime"] == orig["startTime"]
    assert doc["samples"] and len(doc["samples"]) == len(orig["samples"])


def test_bench_fixture_matches_the_file():
    orig = json.loads(BENCH.read_text())
    t = jsprof.load(BENCH).tracks[0].trace
    assert t.num_samples == len(orig["samples"])
    names = {n["id"]: n["callFrame"]["functionName"] for n in orig["nodes"]}
    gc = sum(1 for s in orig["samples"] if names[s] == "(garbage collector)")
    assert int((t.sample_marker == MARKER_CODE["gc"]).sum()) == gc
    js = sum(1 for s in orig["samples"] if not names[s].startswith("("))
    assert int((t.sample_stack != NONE).sum()) == js


def test_primjs_dialect_restores_repeats():
    doc = json.loads(PRIMJS.read_text())["profile"]
    hits = {n["id"]: n["hitCount"] for n in doc["nodes"]}
    t = jsprof.load(PRIMJS).tracks[0].trace
    assert t.num_samples == sum(hits.values()) == 10
    assert (np.diff(t.sample_time) > 0).all()
    # Per leaf: as many samples as hitCount says.
    depth = t.stack_depths()
    counts = collections.Counter(int(depth[s]) for s in t.sample_stack.tolist())
    # node id n sits at depth n-1 below (root) in this linear profile
    assert counts == {nid - 1: h for nid, h in hits.items() if h}
    assert [f.name for f in t.frames] == ["<eval>", "outer", "fib"]


@pytest.mark.parametrize("path", [BENCH, PRIMJS])
def test_fixtures_report_and_convert(path, tmp_path, capsys):
    assert main(["report", str(path), "--top", "5"]) == 0
    out = tmp_path / "out.jsprof.json"
    assert main(["convert", str(path), str(out)]) == 0
    back = tmp_path / "back.cpuprofile"
    assert main(["convert", str(out), str(back)]) == 0
    a = jsprof.load(path).tracks[0].trace
    b = jsprof.load(back).tracks[0].trace
    assert np.array_equal(a.sample_stack, b.sample_stack) and a.frames == b.frames
    assert "cpuprofile" in capsys.readouterr().out or True


BAD = [
    ({"nodes": 3, "startTime": 0}, "t.cpuprofile: nodes: expected an array"),
    (
        _profile([_node(1, "(root)"), {"id": 2}], [], []),
        "t.cpuprofile: nodes[1].callFrame: missing",
    ),
    (
        _profile([_node(1, "(root)", children=[2]), _node(2, "f", line="x")], [], []),
        "t.cpuprofile: nodes[1].callFrame.lineNumber: expected an integer, got a string",
    ),
    (
        _profile([_node(1, "(root)", children=[9])], [], []),
        "node id 9 is not in nodes",
    ),
    (
        _profile([_node(1, "(root)")], [1, 1, 5], [1, 1, 1]),
        "t.cpuprofile: samples[2]: node id 5 is not in nodes",
    ),
    (
        _profile([_node(1, "(root)")], [1, 1], [1]),
        "t.cpuprofile: timeDeltas: has 1 entries but samples has 2",
    ),
    (
        _profile([_node(1, "(root)")], [1, "a"], [1, 1]),
        "t.cpuprofile: samples[1]: expected an integer, got a string",
    ),
    (
        _profile([_node(1, "(root)", children=[2]), _node(2, "f", children=[1])], [], []),
        "cycle",
    ),
    (
        _profile([_node(1, "(root)"), _node(1, "f")], [], []),
        "t.cpuprofile: nodes[1].id: 1 is used by two nodes",
    ),
    (
        {"profile": _profile([_node(1, "(root)")], [1], [1.5])},
        "t.cpuprofile: profile.timeDeltas[0]: expected an integer, got a number",
    ),
]


@pytest.mark.parametrize("doc,message", BAD)
def test_malformed_input_is_one_clear_line(doc, message):
    with pytest.raises(TraceFormatError) as e:
        _read(doc)
    assert message in str(e.value)
    assert "\n" not in str(e.value)


def test_write_several_tracks_is_refused():
    t = jsprof.load(BENCH)
    two = jsprof.Recording([t.tracks[0], jsprof.Track("worker 1", t.tracks[0].trace)])
    with pytest.raises(jsprof.errors.UsageError, match="2 tracks"):
        cp.write(two)
