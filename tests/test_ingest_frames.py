"""The collector's parse keeps the reader's frames (built once, in C) and checks name and
URL lengths in one pass: the same decisions, less CPU per upload (bench_ingest.py)."""

from __future__ import annotations

import dataclasses

import orjson

from jsprof.formats import jsprof as tracefile
from jsprof.serve import ingest
from jsprof.serve.config import Limits
from jsprof.trace import ProfilerFrame, ProfilerTrace


def _doc(name: str = "f", url: str = "https://a.example/app.js") -> bytes:
    return orjson.dumps({
        "resources": [url],
        "frames": [{"name": name, "resourceId": 0, "line": 3, "column": 7}, {"name": "g"}],
        "stacks": [{"frameId": 0}, {"frameId": 1, "parentId": 0}],
        "samples": [{"timestamp": 1.0, "stackId": 1}, {"timestamp": 11.0}],
    })


def test_a_trace_keeps_the_readers_frames():
    tr = tracefile.read_bytes(_doc(), "t").tracks[0].trace
    assert tr.frames == [ProfilerFrame("f", 0, 3, 7), ProfilerFrame("g", None, None, None)]
    assert all(type(f) is ProfilerFrame for f in tr.frames)
    again = ProfilerTrace(tr.resources, tr.frames, tr.stack_parent, tr.stack_frame)
    assert all(a is b for a, b in zip(again.frames, tr.frames, strict=True))  # not rebuilt
    assert again.frames is not tr.frames  # a list of its own
    plain = ProfilerTrace(["r"], [("h", 0, 1, 2)], [-1], [0])
    assert type(plain.frames[0]) is ProfilerFrame and plain.frames[0].column == 2


def test_names_and_urls_at_the_cap_stay_on_the_fast_path():
    lim = dataclasses.replace(Limits(), max_name=40, max_url=60)
    url = "https://a.example/" + "x" * 39 + ".js"
    assert len(url) == 60
    assert ingest._fast_path(_doc("n" * 40, url), lim, False)
    # one character more: the general path, which cuts it
    assert not ingest._fast_path(_doc("n" * 41, url), lim, False)
    assert not ingest._fast_path(_doc("n" * 40, url[:-3] + "x.js"), lim, False)
    meta, body, _ = ingest.prepare(_doc("n" * 41), "identity", {"app": "a"}, None, lim, False)
    name = orjson.loads(body)["frames"][0]["name"]
    assert len(name) == 40 and "…" in name
