"""Filters are pure Recording -> Recording steps; their effects follow from construction."""

import json
import subprocess
import sys

import numpy as np
import pytest

import jsprof
from jsprof.analysis import filters
from jsprof.analysis.profile import summarize
from jsprof.errors import TraceFormatError
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
    assert s["onTimer"] == 3.0 and s["(internal)"] == 2.0
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


# ---- a sample's weight is a property of the recording (issue 11) --------------------------


def _interleaved() -> Recording:
    """`hot` runs 2 ms, then `other` 20 ms, alternating: hot's self time is 10 x 2 ms."""
    b = TraceBuilder()
    app = b.resource_id("file:///app.js")
    main = b.frame_id("main", app, 1, 1)
    hot = b.frame_id("hot", app, 3, 1)
    other = b.frame_id("other", app, 9, 1)
    t = 0.0
    for _ in range(10):
        b.add_sample(t, b.stack_id([main, hot]))
        t += 2.0
        b.add_sample(t, b.stack_id([main, other]))
        t += 20.0
    return Recording.of(b.build(), sample_interval=2.0)


def test_focus_exclude_and_time_range_keep_each_samples_weight():
    rec = _interleaved()
    assert _self(rec)["hot"] == 20.0
    # Before the fix hot was charged the gap to the next *kept* sample: 22 ms each.
    assert _self(filters.focus(rec, "hot"))["hot"] == 20.0
    assert _self(filters.exclude(rec, "other"))["hot"] == 20.0
    assert summarize(filters.exclude(rec, "other")).total_ms == 20.0
    r = filters.time_range(rec, 0.0, 44.0)  # hot, other, hot, other
    assert _self(r) == {"main": 0.0, "hot": 4.0, "other": 40.0}
    # Composed filters keep the weights too, and the input is untouched.
    both = filters.focus(filters.time_range(rec, 20.0, None), "hot")
    assert _self(both)["hot"] == 18.0
    assert rec.tracks[0].trace.sample_weight is None


def test_hide_and_sourcemap_style_rebuilds_keep_the_weight_column():
    f = filters.focus(_interleaved(), "hot")
    h = filters.hide(f, lambda fr, url: fr.name == "main")
    assert h.tracks[0].trace.sample_weight.tolist() == [2.0] * 10
    assert _self(h)["hot"] == 20.0


def test_weights_survive_the_jsprof_format(tmp_path):
    f = filters.focus(_interleaved(), "hot")
    out = tmp_path / "focus.jsprof.json"
    jsprof.save(f, out)
    doc = json.loads(out.read_text())
    assert doc["jsprof"]["sampleWeights"] == [2.0] * 10
    back = jsprof.load(out)
    assert back.tracks[0].trace == f.tracks[0].trace
    assert _self(back)["hot"] == 20.0
    # An unfiltered trace has no column: its timestamps imply the weights.
    plain = tmp_path / "plain.jsprof.json"
    jsprof.save(_interleaved(), plain)
    assert "sampleWeights" not in json.loads(plain.read_text())["jsprof"]


@pytest.mark.parametrize(
    ("weights", "problem"),
    [
        ("[1, 2]", "has 2 entries but there are 10 samples"),
        ('"x"', "expected an array, got a string"),
        ("[true, 2, 2, 2, 2, 2, 2, 2, 2, 2]", "sampleWeights[0]: expected a number, got a boolean"),
        ("[2, 2, -1, 2, 2, 2, 2, 2, 2, 2]", "sampleWeights[2]: is -1.0"),
    ],
)
def test_a_bad_weight_column_is_named(tmp_path, weights, problem):
    f = filters.focus(_interleaved(), "hot")
    out = tmp_path / "focus.jsprof.json"
    jsprof.save(f, out)
    text = out.read_text().replace(
        '"sampleWeights":[2.0,2.0,2.0,2.0,2.0,2.0,2.0,2.0,2.0,2.0]', f'"sampleWeights":{weights}'
    )
    assert text != out.read_text()
    out.write_text(text)
    with pytest.raises(TraceFormatError, match=problem.replace("[", r"\[")):
        jsprof.load(out)


def _report_self(path, *flags) -> dict:
    p = subprocess.run(
        [sys.executable, "-m", "jsprof.cli", "report", str(path), "--json", "--all", *flags],
        check=True,
        capture_output=True,
    )
    rows = json.loads(p.stdout)["rows"]
    return {r["name"]: r["self_ms"] for r in rows}


def test_focus_keeps_self_ms_on_a_real_chromium_trace(data, tmp_path):
    """The issue's symptom on a real recording: report --focus must not inflate self ms."""
    src = data / "chromium" / "trace-basic.json"
    full = _report_self(src)
    focused = _report_self(src, "--focus", "fib")
    assert focused["fib"] == full["fib"]
    excluded = _report_self(src, "--exclude", "busyLoop")
    assert excluded["fib"] == full["fib"]
    # The call tree (what the flame graph draws) agrees: only fib's time is left.
    p = subprocess.run(
        [sys.executable, "-m", "jsprof.cli", "report", str(src), "--tree", "--json"]
        + ["--focus", "fib"],
        check=True,
        capture_output=True,
    )
    roots = json.loads(p.stdout)["tree"]
    assert sum(r["total_ms"] for r in roots) == pytest.approx(full["fib"], abs=1e-3)
    # ... and through a converted file too: the focused jsprof file keeps its weights.
    out = tmp_path / "focused.jsprof.json"
    subprocess.run(
        [sys.executable, "-m", "jsprof.cli", "convert", str(src), str(out), "--focus", "fib"],
        check=True,
        capture_output=True,
    )
    assert _report_self(out)["fib"] == full["fib"]


@pytest.mark.parametrize("ext", [".speedscope.json", ".pb.gz"])
def test_convert_keeps_the_weights_where_the_format_has_them(data, tmp_path, ext):
    src = data / "chromium" / "trace-basic.json"
    full = _report_self(src)
    out = tmp_path / f"focused{ext}"
    p = subprocess.run(
        [sys.executable, "-m", "jsprof.cli", "convert", str(src), str(out), "--focus", "fib"],
        check=True,
        capture_output=True,
        text=True,
    )
    assert "note:" not in p.stderr
    assert _report_self(out)["fib"] == pytest.approx(full["fib"], abs=1e-3)


def test_convert_says_what_a_format_without_weights_loses(data, tmp_path):
    src = data / "chromium" / "trace-basic.json"
    out = tmp_path / "focused.cpuprofile"
    p = subprocess.run(
        [sys.executable, "-m", "jsprof.cli", "convert", str(src), str(out), "--focus", "fib"],
        check=True,
        capture_output=True,
        text=True,
    )
    assert "note: cpuprofile has no per-sample weights" in p.stderr
    plain = subprocess.run(
        [sys.executable, "-m", "jsprof.cli", "convert", str(src), str(tmp_path / "p.cpuprofile")],
        check=True,
        capture_output=True,
        text=True,
    )
    assert "note:" not in plain.stderr


def test_internal_means_node_modules_and_natives_not_eval_code():
    from jsprof.trace import ProfilerFrame as F

    assert filters.is_internal(F("readFileSync", 0, 441, 22), "node:fs")
    assert filters.is_internal(F("join", 0, 1298, 7), "node:path")
    assert filters.is_internal(F("x", 0, 1, 1), "node:internal/modules/cjs/loader")
    assert filters.is_internal(F("read"), None)  # a native (V8's C++ binding)
    assert filters.is_internal(F("callAndPauseOnStart"), None)
    assert not filters.is_internal(F("(anonymous)", None, 1, 11), None)  # eval'd code
    assert not filters.is_internal(F("(program)"), None)  # a pseudo frame
    assert not filters.is_internal(F("fs", 0, 1, 1), "file:///app/node_modules/fs.js")


NODE_FS = """\
const fs = require("fs"), path = require("path");
function hot() { let s = 0; for (let i = 0; i < 2e5; i++) s += i % 7; return s; }
const t = Date.now();
while (Date.now() - t < 300) { hot(); fs.readFileSync(__filename); path.join("a", "b"); }
"""


def test_hide_internal_on_a_real_node_recording(tmp_path):
    script = tmp_path / "fsy.js"
    script.write_text(NODE_FS)
    out = tmp_path / "n.json"
    subprocess.run(
        [sys.executable, "-m", "jsprof.cli", "record", "--engine", "node", "-o", str(out)]
        + [str(script)],
        check=True,
        capture_output=True,
    )
    rec = jsprof.load(out)
    h = filters.hide_internal(rec)
    tr = h.tracks[0].trace
    urls = {tr.resources[f.resource_id] for f in tr.frames if f.resource_id is not None}
    assert not any(u.startswith("node:") for u in urls), urls
    # natives are gone; what has no script but a position is eval'd code and stays
    assert all(f.name == "(internal)" or f.line is not None for f in tr.frames)
    assert summarize(h).total_ms == pytest.approx(summarize(rec).total_ms)
    p = subprocess.run(
        [sys.executable, "-m", "jsprof.cli", "report", str(out), "--hide-internal", "--all"]
        + ["--json"],
        check=True,
        capture_output=True,
    )
    rows = json.loads(p.stdout)["rows"]
    names = [r["name"] for r in rows]
    assert "hot" in names and "(hidden)" not in names
    assert not any(r["location"] == "(unknown)" for r in rows), rows
    internal = [r for r in rows if r["name"] == "(internal)"]
    assert all(r["location"] == "" for r in internal)


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--focus", "nosuch"], "--focus 'nosuch': no function in"),
        (["--exclude", "nosuch*"], "--exclude 'nosuch*': no function in"),
        (["--time-range", "99999:"], "no sample of"),
    ],
)
@pytest.mark.parametrize("command", ["report", "flame", "convert"])
def test_a_filter_that_selects_nothing_says_so(data, tmp_path, flags, says, command):
    src = str(data / "chromium" / "trace-basic.json")
    out = {"report": [], "flame": ["-o", str(tmp_path / "f.html")]}.get(
        command, [str(tmp_path / "c.json")]
    )
    p = subprocess.run(
        [sys.executable, "-m", "jsprof.cli", command, src, *out, *flags],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 2 and says in p.stderr, p.stderr
    assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr
    assert not list(tmp_path.iterdir())  # nothing written


def test_rows_are_only_functions_that_were_sampled():
    rec = filters.focus(_rec(), "fib")
    assert set(_self(rec)) == {"main", "fib"}  # not onTimer or processTimers with 0 ms
