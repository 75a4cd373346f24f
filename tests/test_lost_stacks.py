"""Stack-less samples between samples of one function: `jsprof report` warns (one line on
stderr, `lostStacks` in --json). The rule on small traces, then real engines: Chromium's
native Profiler (which loses stacks while V8 collects garbage) warns, QuickJS and a CDP
recording of the same loop do not."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from jsprof.analysis.lost_stacks import MAX_RUN, lost_stacks, suspect_mask
from jsprof.trace import Recording, TraceBuilder

CHROMIUM_DATA = Path(__file__).parent / "data" / "chromium_engine"


def _trace(pattern: str, markers: dict[int, str] | None = None):
    """One sample per letter, 1 ms apart: a letter is the leaf function of a stack under
    `main`, `.` a sample with no stack; `markers` gives some samples a marker."""
    b = TraceBuilder()
    r = b.resource_id("file:///app.js")
    main = b.frame_id("main", r, 1, 1)
    for i, ch in enumerate(pattern):
        stack = None if ch == "." else b.stack_id([main, b.frame_id(ch, r, 2 + ord(ch), 1)])
        b.add_sample(float(i), stack, (markers or {}).get(i))
    return b.build()


def test_the_rule_on_small_traces():
    assert suspect_mask(_trace("aa.aa")).tolist() == [0, 0, 1, 0, 0]
    assert suspect_mask(_trace("a..b")).tolist() == [0] * 4  # two functions: a real gap
    assert suspect_mask(_trace(".a.a.")).tolist() == [0, 0, 1, 0, 0]  # no neighbour: not
    run = "a" + "." * MAX_RUN + "a"
    assert suspect_mask(_trace(run)).sum() == MAX_RUN
    longer = "a" + "." * (MAX_RUN + 1) + "a"
    assert not suspect_mask(_trace(longer)).any()  # a long wait is a wait
    # A producer that marks its samples says an unmarked one was idle.
    assert not suspect_mask(_trace("aa.aa", {0: "script"})).any()
    found = lost_stacks(Recording.of(_trace("aa.aa..a")))
    assert found is not None and found.samples == 3
    assert found.ms == pytest.approx(3.0) and found.total_ms == pytest.approx(8.0)
    assert lost_stacks(Recording.of(_trace("aaab"))) is None


def _report(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jsprof.cli", "report", *args, str(path)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_chromiums_native_trace_of_a_busy_loop_warns(tmp_path: Path) -> None:
    from jsprof.engines.chromium import run_chromium

    out = io.StringIO()
    assert run_chromium(str(CHROMIUM_DATA / "builtin_loop_native.js"), stdout=out) == 0
    native = tmp_path / "native.json"
    native.write_text(out.getvalue())
    trace = json.loads(native.read_text())
    assert not any("marker" in s for s in trace["samples"])
    p = _report(native)
    assert p.returncode == 0, p.stderr
    warn = [ln for ln in p.stderr.splitlines() if "no stack but lie between" in ln]
    assert len(warn) == 1 and warn[0].startswith("jsprof: warning: "), p.stderr
    j = _report(native, "--json")
    lost = json.loads(j.stdout)["lostStacks"]
    assert lost["samples"] >= 1 and lost["ms"] > 0 and 0 < lost["percent"] < 100, lost
    tree = json.loads(_report(native, "--tree", "--json").stdout)
    assert tree["lostStacks"] == lost


def test_quickjs_and_a_cdp_recording_of_the_same_loop_do_not_warn(tmp_path: Path) -> None:
    import jsprof
    from jsprof.engines.chromium import record_chromium
    from jsprof.record import record

    loop = tmp_path / "loop.js"
    src = (CHROMIUM_DATA / "builtin_loop_native.js").read_text()
    loop.write_text(src[: src.index("(async () =>")] + "builtinLoop(400);\n")
    for name, rec in (
        ("quickjs", record(str(loop), engine="quickjs", sample_interval=1.0)),
        ("chromium", record_chromium(str(loop), 10.0, stdout=io.StringIO())),
    ):
        f = tmp_path / f"{name}.jsprof.json"
        jsprof.save(rec, f)
        p = _report(f, "--json")
        assert p.returncode == 0, p.stderr
        assert "lostStacks" not in json.loads(p.stdout), name
        assert "no stack but lie between" not in p.stderr, (name, p.stderr)
        if name == "chromium":  # its collector's samples are marked, not lost
            t = rec.tracks[0].trace
            assert t.sample_marker is not None and (t.sample_marker >= 0).any()
        else:
            assert np.count_nonzero(rec.tracks[0].trace.sample_stack >= 0) > 20
