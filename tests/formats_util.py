"""Shared helpers for tests/test_formats_*.py: fixtures, comparisons, the Node tools."""

from __future__ import annotations

import collections
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from jsprof.trace import NONE, ProfilerTrace, Recording, TraceBuilder, Track

DATA = Path(__file__).parent / "data"
CHROMIUM = sorted((DATA / "chromium").glob("trace-*.json"))
CHROMIUM = [p for p in CHROMIUM if not p.name.endswith(".meta.json")]
JS = Path(__file__).parent / "js"
JSPROF = [sys.executable, "-m", "jsprof.cli"]


def jsprof_cli(*args: str) -> subprocess.CompletedProcess:
    """Run the real CLI in a subprocess (as a user would)."""
    return subprocess.run([*JSPROF, *args], capture_output=True, text=True, timeout=120)


def node(script: str, *args: str) -> subprocess.CompletedProcess:
    """Run a tests/js script; fail (never skip) when node or the npm packages are missing."""
    exe = shutil.which("node")
    if exe is None:
        pytest.fail("node is not installed; the format tests need Node 20 (`make test`)")
    if not (JS / "node_modules").is_dir():
        pytest.fail("tests/js/node_modules is missing; run `npm ci --prefix tests/js`")
    return subprocess.run(
        [exe, str(JS / script), *args], capture_output=True, text=True, timeout=120
    )


def paths(trace: ProfilerTrace, with_column: bool = True) -> list:
    """Per sample: the resolved stack root first ((name, url, line[, col]) each), or None."""
    res = trace.resources

    def key(fid: int) -> tuple:
        f = trace.frames[fid]
        url = res[f.resource_id] if f.resource_id is not None else None
        return (f.name, url, f.line, f.column) if with_column else (f.name, url, f.line)

    cache: dict[int, tuple] = {}
    out = []
    for s in trace.sample_stack.tolist():
        if s == NONE:
            out.append(None)
            continue
        p = cache.get(s)
        if p is None:
            p = cache[s] = tuple(key(f) for f in trace.stack_frames(s))
        out.append(p)
    return out


def markers(trace: ProfilerTrace) -> list:
    if trace.sample_marker is None:
        return [NONE] * trace.num_samples
    return trace.sample_marker.tolist()


def totals(trace: ProfilerTrace, with_column: bool = False, by_marker: bool = True):
    """Samples per (stack path, marker): what aggregating formats keep."""
    ms = markers(trace) if by_marker else [0] * trace.num_samples
    return collections.Counter(zip(paths(trace, with_column), ms, strict=True))


def mixed_recording() -> Recording:
    """Two tracks, with no-JS samples (idle, gc, program), markers, lines, odd names."""
    tracks = []
    for n, (name, origin) in enumerate(
        (("main", 1_700_000_000_000.5), ("worker 1", 1_700_000_000_003.25))
    ):
        b = TraceBuilder()
        r = b.resource_id(f"file:///app/{n}.js")
        main = b.frame_id("main", r, 1, 1)
        f = b.frame_id("f;g\nh", r, 5, 3)  # a name no line-based format can hold as is
        anon = b.frame_id("", r, 9, None)
        native = b.frame_id("Array.prototype.sort", None, None, None)
        s_main = b.stack_id([main])
        s_f = b.stack_id([main, f])
        s_anon = b.stack_id([main, anon, native])
        seq = [
            (s_main, "script", 2),
            (s_f, "script", 6),
            (s_f, "script", 7),
            (s_f, "script", 6),
            (None, "gc", None),
            (None, "gc", None),
            (None, None, None),
            (s_anon, "script", None),
            (None, "other", None),
            (s_main, "script", 3),
            (s_main, "script", 3),
        ]
        t = 0.0
        for i, (sid, marker, line) in enumerate(seq * (n + 1)):
            t += 1.0 + 0.125 * (i % 3)
            b.add_sample(t, sid, marker, line)
        tracks.append(Track(name, b.build(), time_origin=origin, engine="v8", sample_interval=1.0))
    return Recording(tracks)


def small_trace_doc() -> dict:
    """A small valid ProfilerTrace document (a new one each call: tests break it)."""
    return {
        "resources": ["file:///a.js"],
        "frames": [{"name": "f", "resourceId": 0, "line": 1, "column": 2}, {"name": "g"}],
        "stacks": [{"frameId": 0}, {"frameId": 1, "parentId": 0}],
        "samples": [{"timestamp": 1.0, "stackId": 1}, {"timestamp": 2.0}],
    }


def one_line_error(text: str) -> str:
    lines = [x for x in text.strip().splitlines() if x.strip()]
    assert len(lines) == 1, text
    assert "Traceback" not in text
    return lines[0]


def assert_same_samples(a: ProfilerTrace, b: ProfilerTrace) -> None:
    """Same samples in the same order with the same times, stacks, markers and lines."""
    assert paths(a) == paths(b)
    assert np.array_equal(a.sample_time, b.sample_time)
    assert markers(a) == markers(b)
    la = a.sample_line.tolist() if a.sample_line is not None else None
    lb = b.sample_line.tolist() if b.sample_line is not None else None
    assert la == lb


def weighted_recordings(d: Path) -> dict[str, bytes]:
    """Weighted recordings, each as its jsprof JSON: a real `jsprof instrument` run on
    QuickJS (its weights are not its gaps: the instrumentation's own samples were
    dropped), a real QuickJS recording cut by `convert --focus` to one of its two
    alternating functions (the dropped samples' time stays out), and a real `jsprof fleet
    export` (three tracks of merged samples, with their counts)."""
    from fleet_util import fleet_export

    inst = d / "shapes.jsprof.json"
    r = jsprof_cli("instrument", "--engine", "quickjs", "--watch", "*", "--trace", str(inst),
                   str(DATA / "instrument" / "shapes.js"))
    assert r.returncode == 0, r.stderr
    script, rec, focus = d / "ab.js", d / "ab.jsprof.json", d / "focus.jsprof.json"
    script.write_text(
        "function a() { let s = 0; for (let i = 0; i < 2e6; i++) s += i; return s; }\n"
        "function b() { let s = 0; for (let i = 0; i < 2e6; i++) s ^= i; return s; }\n"
        "for (let k = 0; k < 8; k++) { a(); b(); }\n"
    )
    r = jsprof_cli("record", "--engine", "quickjs", "-o", str(rec), str(script))
    assert r.returncode == 0, r.stderr
    r = jsprof_cli("convert", "--focus", "b", str(rec), str(focus))
    assert r.returncode == 0, r.stderr
    return {
        "instrument": inst.read_bytes(),
        "focus": focus.read_bytes(),
        "fleet": fleet_export(d).read_bytes(),
    }
