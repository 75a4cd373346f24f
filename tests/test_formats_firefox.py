"""Firefox Profiler processed profile: table shapes, categories, tracks, totals.

No loader for the processed format is published on npm and none runs offline, so the
checks here pin down what docs/formats.md lists a file needs to load: every table's columns
and `length`, indices inside their tables, categories, and meta.
"""

from __future__ import annotations

import collections

import orjson
import pytest

import jsprof
from formats_util import CHROMIUM, DATA, jsprof_cli, mixed_recording, totals
from jsprof.formats import firefox, writer_for
from jsprof.trace import NONE

TABLE_COLUMNS = {
    "samples": {"stack", "time", "weight", "weightType", "length"},
    "stackTable": {"frame", "prefix", "length"},
    "frameTable": {
        "address",
        "inlineDepth",
        "category",
        "subcategory",
        "func",
        "nativeSymbol",
        "innerWindowID",
        "line",
        "column",
        "length",
    },
    "funcTable": {
        "name",
        "isJS",
        "relevantForJS",
        "resource",
        "fileName",
        "lineNumber",
        "columnNumber",
        "length",
    },
    "resourceTable": {"lib", "name", "host", "type", "length"},
    "markers": {"data", "name", "startTime", "endTime", "phase", "category", "length"},
    "nativeSymbols": {"libIndex", "address", "name", "functionSize", "length"},
}
THREAD_KEYS = {
    "processType",
    "processStartupTime",
    "processShutdownTime",
    "registerTime",
    "unregisterTime",
    "pausedRanges",
    "name",
    "isMainThread",
    "pid",
    "tid",
    "stringArray",
}


def check_profile(doc: dict) -> None:
    meta = doc["meta"]
    for k in (
        "interval",
        "startTime",
        "version",
        "preprocessedProfileVersion",
        "categories",
        "markerSchema",
        "product",
        "processType",
        "stackwalk",
    ):
        assert k in meta, k
    assert meta["preprocessedProfileVersion"] == firefox.PROCESSED_VERSION
    cats = [c["name"] for c in meta["categories"]]
    assert {"JavaScript", "Idle", "Other"} <= set(cats)
    assert any(c["color"] == "grey" for c in meta["categories"])
    for c in meta["categories"]:
        assert c["subcategories"]
    for th in doc["threads"]:
        assert THREAD_KEYS <= set(th), THREAD_KEYS - set(th)
        assert isinstance(th["pid"], str)
        strings = th["stringArray"]
        for table, cols in TABLE_COLUMNS.items():
            t = th[table]
            assert set(t) == cols, (table, set(t) ^ cols)
            n = t["length"]
            for c in cols - {"length", "weight", "weightType"}:
                assert len(t[c]) == n, (table, c)
        st, ft, fn = th["stackTable"], th["frameTable"], th["funcTable"]
        for i, (p, f) in enumerate(zip(st["prefix"], st["frame"], strict=True)):
            assert p is None or 0 <= p < i  # prefixes come first
            assert 0 <= f < ft["length"]
        for f, c in zip(ft["func"], ft["category"], strict=True):
            assert 0 <= f < fn["length"] and 0 <= c < len(cats)
        for name, res in zip(fn["name"], fn["resource"], strict=True):
            assert 0 <= name < len(strings)
            assert res == -1 or 0 <= res < th["resourceTable"]["length"]
        for name in th["resourceTable"]["name"]:
            assert 0 <= name < len(strings)
        for s in th["samples"]["stack"]:
            assert s is None or 0 <= s < st["length"]


def firefox_totals(th: dict) -> collections.Counter:
    """Samples per stack of function names, read back from the tables."""
    st, ft, fn, strings = th["stackTable"], th["frameTable"], th["funcTable"], th["stringArray"]
    out: collections.Counter = collections.Counter()
    for s in th["samples"]["stack"]:
        names = []
        while s is not None:
            names.append(strings[fn["name"][ft["func"][st["frame"][s]]]])
            s = st["prefix"][s]
        out[tuple(reversed(names))] += 1
    return out


def _want(trace) -> collections.Counter:
    out: collections.Counter = collections.Counter()
    for (path, marker), c in totals(trace).items():
        if path is None:
            out[({NONE: "(idle)", 1: "(garbage collector)", 5: "(program)"}[marker],)] += c
        else:
            out[tuple(p[0] or "(anonymous)" for p in path)] += c
    return out


@pytest.mark.parametrize(
    "fixture", [*CHROMIUM, DATA / "node" / "bench.cpuprofile"], ids=lambda p: p.stem
)
def test_cli_convert_tables(fixture, tmp_path):
    out = tmp_path / "out.firefox.json"
    r = jsprof_cli("convert", str(fixture), str(out))
    assert r.returncode == 0, r.stderr
    doc = orjson.loads(out.read_bytes())
    check_profile(doc)
    track = jsprof.load(fixture).tracks[0]
    (th,) = doc["threads"]
    assert th["samples"]["length"] == track.trace.num_samples
    assert th["samples"]["time"] == pytest.approx(track.trace.sample_time.tolist())
    assert firefox_totals(th) == _want(track.trace)


def test_tracks_are_threads_on_one_timeline():
    rec = mixed_recording()
    doc = orjson.loads(firefox.write(rec))
    check_profile(doc)
    assert [t["name"] for t in doc["threads"]] == ["main", "worker 1"]
    assert doc["meta"]["startTime"] == rec.tracks[0].time_origin
    offset = rec.tracks[1].time_origin - rec.tracks[0].time_origin
    assert doc["threads"][1]["samples"]["time"][0] == pytest.approx(
        rec.tracks[1].trace.sample_time[0] + offset
    )
    for th, track in zip(doc["threads"], rec.tracks, strict=True):
        assert firefox_totals(th) == _want(track.trace)
    # Samples without JavaScript sit in their own categories.
    th = doc["threads"][0]
    cats = [c["name"] for c in doc["meta"]["categories"]]
    ft, fn, strings = th["frameTable"], th["funcTable"], th["stringArray"]
    by_name = {
        strings[fn["name"][f]]: cats[c] for f, c in zip(ft["func"], ft["category"], strict=True)
    }
    assert by_name["(idle)"] == "Idle"
    assert by_name["(garbage collector)"] == "GC / CC"
    assert by_name["main"] == "JavaScript"
    # Per-sample lines become frame rows with that line.
    assert 6 in ft["line"] and 7 in ft["line"]


def test_extension_is_not_jsprof_json():
    assert writer_for("x.firefox.json", None).name == "firefox"
    assert writer_for("x.json", None).name == "jsprof"
