"""Filters are pure Recording -> Recording steps; their effects follow from construction."""

import subprocess
import sys

import numpy as np
import pytest

import jsprof
from jsprof.analysis import filters
from jsprof.analysis.profile import summarize
from jsprof.trace import NONE, Recording, TraceBuilder


def _rec() -> Recording:
    b = TraceBuilder()
    app = b.resource_id("file:///app.js")
    internal = b.resource_id("node:internal/timers")
    main = b.frame_id("main", app, 1, 1)
    fib = b.frame_id("fib", app, 5, 13)
    tick = b.frame_id("processTimers", internal, 500, 3)
    cb = b.frame_id("onTimer", app, 9, 1)
    stacks = (
        [[main, fib, fib]] * 4  # 0..3
        + [[tick, cb]] * 3  # 4..6: user callback under an internal frame
        + [[tick]] * 2  # 7..8: only internal
        + [[main]] * 1  # 9
    )
    for i, st in enumerate(stacks):
        b.add_sample(float(i), b.stack_id(st), line=7)
    b.add_sample(10.0, None)
    return Recording.of(b.build(), sample_interval=1.0)


def _self(rec: Recording) -> dict:
    s = summarize(rec)
    return {k.name: round(float(s.stats.self_ms[i]), 6) for i, k in enumerate(s.stats.keys)}


def test_focus_and_exclude():
    rec = _rec()
    f = filters.focus(rec, "fib")
    assert f.tracks[0].trace.num_samples == 4 and set(_self(f)) >= {"fib"}
    e = filters.exclude(rec, "fib")
    assert e.tracks[0].trace.num_samples == 11 - 4
    assert "fib" not in {k for k, v in _self(e).items() if v > 0}
    assert filters.focus(rec, "on*").tracks[0].trace.num_samples == 3  # wildcards
    assert rec.tracks[0].trace.num_samples == 11  # the input is untouched


def test_hide_internal_charges_the_caller_and_keeps_totals():
    rec = _rec()
    h = filters.hide_internal(rec)
    tr = h.tracks[0].trace
    assert "processTimers" not in {f.name for f in tr.frames}
    assert tr.num_samples == 11
    s = _self(h)
    assert s["onTimer"] == 3.0 and s["(hidden)"] == 2.0
    assert summarize(h).total_ms == summarize(rec).total_ms
    # A sample whose leaf was hidden loses its line (it was the hidden frame's line).
    assert tr.sample_line.tolist()[7:9] == [0, 0] and tr.sample_line[4] == 7
    assert tr.sample_stack[10] == NONE


def test_time_range():
    rec = _rec()
    r = filters.time_range(rec, 2.0, 5.0)
    assert r.tracks[0].trace.sample_time.tolist() == [2.0, 3.0, 4.0]
    assert filters.parse_time_range("2:") == (2.0, None)
    with pytest.raises(ValueError, match="END must be after START"):
        filters.parse_time_range("5:2")


def test_filters_on_the_command_line(data, tmp_path):
    out = tmp_path / "f.json"
    cmd = [sys.executable, "-m", "jsprof.cli"]
    subprocess.run(
        [
            *cmd,
            "convert",
            str(data / "chromium" / "trace-basic.json"),
            str(out),
            "--focus",
            "fib",
            "--time-range",
            "0:1500",
        ],
        check=True,
        capture_output=True,
    )
    tr = jsprof.load(out).tracks[0].trace
    assert tr.num_samples > 0 and float(np.max(tr.sample_time)) < 1500
    names = {tr.frames[tr.stack_frame[s]].name for s in tr.sample_stack.tolist()}
    assert "busyLoop" not in names
    p = subprocess.run(
        [*cmd, "report", str(data / "chromium" / "trace-basic.json"), "--time-range", "x"],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 2 and "--time-range" in p.stderr and "Traceback" not in p.stderr
