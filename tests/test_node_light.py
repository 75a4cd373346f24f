"""`jsprof record --engine node` without numpy (issue 32): the slices become the track's
columns over lists (engines/_v8join.py), the file is written by the model's own writer
from array.array columns, and the summary's numbers are computed over lists
(recorded.py). Checked here against the numpy path on real recordings (acorn, tsc from
tests/js, the ending cases: an empty script, an uncaught error, process.exit, a process
stopped past the 100 ms gap cap, a worker), and the summary's arithmetic on synthetic
tracks with ties and capped gaps: the same columns, the same bytes, the same lines."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from array import array
from pathlib import Path

import pytest

import jsprof
from jsprof.engines import _v8join
from jsprof.engines._v8slices import drop_exit_wait, drop_preload, join_slices
from jsprof.engines.node.record import record_node
from jsprof.recorded import LightRecording, LightTrace, LightTrack, np_sum
from jsprof.render import summary as summary_mod
from jsprof.trace import ProfilerFrame, Recording, Track, normalise_resources

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="needs node")

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
JS = ROOT / "tests" / "js" / "node_modules"
ACORN = JS / "acorn" / "dist" / "acorn.js"
TYPESCRIPT = JS / "typescript" / "lib" / "typescript.js"


spliced: list[str] = []  # the tracks whose pause wrapper _v8slices spliced out


def _reference(monkeypatch: pytest.MonkeyPatch) -> list:
    """Every thread_track call also converted by _v8slices on numpy, as before: (light
    result, numpy trace, numpy exit wait)."""
    pairs: list = []
    orig = _v8join.thread_track

    def both(slices, name, engine, requested_ms, time_origin, origin_us,
             hide_urls=frozenset(), splice=None, go_us=None, exit_end=None):
        got = orig(slices, name, engine, requested_ms, time_origin, origin_us, hide_urls,
                   splice, go_us, exit_end)
        joined = join_slices(slices, "s", hide_urls, splice)
        if joined.removed.any():
            spliced.append(name)
        if go_us is not None:
            drop_preload(joined, go_us)
        wait = drop_exit_wait(joined, exit_end) if exit_end is not None else None
        pairs.append((got, normalise_resources(joined.to_trace(origin_us)), wait))
        return got

    monkeypatch.setattr(_v8join, "thread_track", both)
    spliced.clear()
    return pairs


def _same_columns(light: LightTrace, trace) -> None:
    assert light.resources == trace.resources
    assert light.frames == trace.frames
    for name in ("stack_parent", "stack_frame", "sample_time", "sample_stack",
                 "sample_marker", "sample_line"):
        a, b = getattr(light, name), getattr(trace, name)
        assert (a is None) == (b is None), name
        if a is not None:
            assert a.tolist() == b.tolist(), name


def _summary(rec, out: str, capsys: pytest.CaptureFixture) -> str:
    capsys.readouterr()
    summary_mod.print_recording_summary(rec, out)
    return capsys.readouterr().err


def _check_recording(rec, pairs: list, tmp_path: Path, capsys) -> None:
    """The light recording against the numpy path's: columns, file bytes, summary."""
    assert isinstance(rec, LightRecording)
    assert len(pairs) == len(rec.tracks)
    tracks = []
    for t, (got, trace, wait) in zip(rec.tracks, pairs, strict=True):
        assert got is not None
        light, light_wait = got
        assert light is t
        _same_columns(light.trace, trace)
        assert light_wait == wait
        gap = trace.median_gap()
        assert t.meta.get("medianIntervalMs") == (None if gap is None else round(gap, 4))
        tracks.append(Track(t.name, trace, t.time_origin, t.engine, t.sample_interval,
                            t.requested_interval, meta=dict(t.meta)))
    ref = Recording(tracks)
    a, b = tmp_path / "light.jsprof.json", tmp_path / "numpy.jsprof.json"
    jsprof.save(rec, a)
    jsprof.save(ref, b)
    assert a.read_bytes() == b.read_bytes()
    assert _summary(rec, "x", capsys) == _summary(ref, "x", capsys)
    # and the model of it (`.recording()`: the Python API's) is the same file
    jsprof.save(rec.recording(), b)
    assert a.read_bytes() == b.read_bytes()


SCRIPTS = {
    "empty": "",
    "busy": "function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }\n"
            "const t = Date.now(); let x = 0; while (Date.now() - t < 150) x += fib(18);\n",
    "throws": "function f() { const t = Date.now(); while (Date.now() - t < 80); "
              "throw new Error('boom'); }\nf();\n",
    "exits": "const t = Date.now(); while (Date.now() - t < 80);\nprocess.exit(3);\n",
}


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_the_light_track_is_the_numpy_track(name, tmp_path, monkeypatch, capsys):
    script = tmp_path / f"{name}.js"
    script.write_text(SCRIPTS[name])
    pairs = _reference(monkeypatch)
    rec = record_node(script, light=True)
    _check_recording(rec, pairs, tmp_path, capsys)


@pytest.mark.parametrize("lib", [ACORN, TYPESCRIPT], ids=["acorn", "typescript"])
def test_real_code_is_converted_alike(lib, tmp_path, monkeypatch, capsys):
    """acorn parsing its own source, typescript transpiling a file of itself: thousands of
    nodes over many slices, position ticks, Node's internals."""
    assert lib.exists(), f"{lib} missing: `make test` installs tests/js (npm ci)"
    script = tmp_path / "run.js"
    if lib == ACORN:
        body = (f"const acorn = require({json.dumps(str(lib))});\n"
                f"const src = require('fs').readFileSync({json.dumps(str(lib))}, 'utf8');\n"
                "for (let i = 0; i < 3; i++) acorn.parse(src, {ecmaVersion: 'latest'});\n")
    else:
        body = (f"const ts = require({json.dumps(str(lib))});\n"
                f"const src = require('fs').readFileSync({json.dumps(str(ACORN))}, 'utf8');\n"
                "ts.transpileModule(src, {compilerOptions: {target: 99}});\n")
    script.write_text(body)
    pairs = _reference(monkeypatch)
    rec = record_node(script, light=True)
    assert rec.tracks[0].trace.num_stacks > 500
    _check_recording(rec, pairs, tmp_path, capsys)


def test_a_stopped_process_is_converted_alike(tmp_path, monkeypatch, capsys):
    """Node stopped (SIGSTOP) for 0.4 s, lost ticks: the same columns and summary (the
    gap cap's lost time itself: test_the_summary_numbers_are_the_models, on gaps set)."""
    script = tmp_path / "stop.js"
    script.write_text(
        "const { spawn } = require('child_process');\n"
        "const t = Date.now(); while (Date.now() - t < 60);\n"
        "spawn('sh', ['-c', `sleep 0.4; kill -CONT ${process.pid}`], {stdio: 'ignore'});\n"
        "process.kill(process.pid, 'SIGSTOP');\n"
        "const u = Date.now(); while (Date.now() - u < 60);\n"
    )
    pairs = _reference(monkeypatch)
    rec = record_node(script, light=True)
    _check_recording(rec, pairs, tmp_path, capsys)


def test_a_worker_is_converted_alike(tmp_path, monkeypatch, capsys):
    """A worker waits for jsprof at its start in a pause wrapper (engines/node/pause.py),
    spliced out of its profile: its samples dropped, its children hung from its parent.
    _v8join splices it as _v8slices does (it left such a recording to numpy before)."""
    script = ROOT / "tests" / "data" / "nodejs" / "worker.js"
    pairs = _reference(monkeypatch)
    rec = record_node(script, light=True)
    assert len(rec.tracks) >= 2
    assert spliced, "no worker waited in its pause wrapper: nothing was spliced"
    _check_recording(rec, pairs, tmp_path, capsys)


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    code = (
        "import sys\nfrom jsprof.cli import main\nrc = main(sys.argv[1:])\n"
        "print('numpy' in sys.modules, file=sys.stdout)\nsys.exit(rc)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    for v in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        env.pop(v, None)
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=240)


@pytest.mark.parametrize("name", ["busy", "throws", "exits"])
def test_record_imports_no_numpy_and_prints_what_the_file_says(name, tmp_path, capsys):
    """The CLI end to end: no numpy in the process, and the summary it printed is the one
    the model prints for the file it wrote (loaded back: numpy, analysis/)."""
    script = tmp_path / f"{name}.js"
    script.write_text(SCRIPTS[name])
    out = tmp_path / "out.jsprof.json"
    r = _cli(["record", "--engine", "node", "-o", str(out), script.name], tmp_path)
    assert r.stdout.strip().splitlines()[-1] == "False", r.stderr
    assert r.returncode == {"busy": 0, "throws": 1, "exits": 3}[name], r.stderr
    rec = jsprof.load(out)
    cwd = os.getcwd()
    os.chdir(tmp_path)  # locations are shown relative to it
    try:
        want = _summary(rec, str(out), capsys)
    finally:
        os.chdir(cwd)
    assert want in r.stderr, (want, r.stderr)


def test_lost_time_is_said_without_numpy(tmp_path, monkeypatch, capsys):
    """A summary with gaps past the cap (a loaded machine's) says its lost time without
    the model: its note's constants are traceparts' (rows.lost_note imported trace.py)."""
    code = (
        "import sys\nfrom array import array\n"
        "from jsprof.recorded import LightRecording, LightTrace, LightTrack\n"
        "from jsprof.render.summary import print_recording_summary\n"
        "tr = LightTrace([], [], array('i'), array('i'), array('d', [0.0, 1.0, 400.0, 401.0]),"
        " array('i', [-1, -1, -1, -1]), None, None)\n"
        "print_recording_summary(LightRecording([LightTrack('main', tr, 0.0, 'node', 1.0, 1.0,"
        " {})]), 'x')\nprint('numpy' in sys.modules)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(SRC)}, timeout=60)
    assert "ms lost in 1 gap" in r.stderr, r.stderr
    assert r.stdout.strip() == "False", r.stderr


def test_a_map_comment_naming_no_file_needs_no_numpy(tmp_path):
    """typescript's own lib/_tsc.js ends in `//# sourceMappingURL=_tsc.js.map`, a file npm
    does not install: no map is read, so the summary needs no model (it did, measured)."""
    script = tmp_path / "m.js"
    script.write_text(SCRIPTS["busy"] + "//# sourceMappingURL=m.js.map\n")
    r = _cli(["record", "--engine", "node", "-o", "o.jsprof.json", "m.js"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "False", r.stderr
    assert "--sourcemap" not in r.stderr


def test_record_with_a_source_map_goes_through_the_model(tmp_path):
    """A script with a sourceMappingURL: the summary is shown through the map (numpy);
    the file is the same either way."""
    script = tmp_path / "m.js"
    script.write_text(SCRIPTS["busy"] + "//# sourceMappingURL=m.js.map\n")
    (tmp_path / "m.js.map").write_text(json.dumps(
        {"version": 3, "sources": ["m.ts"], "names": [], "mappings": "AAAA"}))
    r = _cli(["record", "--engine", "node", "-o", "o.jsprof.json", "m.js"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "True", r.stderr
    assert "--sourcemap" in r.stderr


# ---- the summary's arithmetic on synthetic tracks ----------------------------------------


def _synthetic(rng: random.Random, n_samples: int, ties: bool, gaps: bool) -> LightTrack:
    resources = ["file:///a.js", "node:internal/x", "file:///b.js"]
    frames = [ProfilerFrame(f"f{i % 7}" if i % 5 else "", rng.choice([None, 0, 1, 2]),
                            rng.choice([None, 3, 9]), 1) for i in range(12)]
    parent, frame = [], []
    for s in range(40):
        parent.append(-1 if s < 3 else rng.randrange(s))
        frame.append(rng.randrange(len(frames)))
    t, times = 0.0, []
    for _ in range(n_samples):
        step = rng.choice([1.0, 1.0, 2.0]) if ties else rng.uniform(0.2, 3.0)
        if gaps and rng.random() < 0.02:
            step += rng.choice([150.0, 400.0])
        if rng.random() < 0.02:
            step = -rng.uniform(0, 0.05)  # V8's small steps back
        t += step
        times.append(t)
    stacks = [rng.choice([-1, *range(40)]) for _ in range(n_samples)]
    markers = array("b", [rng.choice([-1, 0, 1, 5]) if s == -1 else 0 for s in stacks])
    trace = LightTrace(resources, frames, array("i", parent), array("i", frame),
                       array("d", times), array("i", stacks), markers, None)
    return LightTrack("main", trace, 0.0, "node", rng.choice([1.0, 0.1]), 1.0, {})


lost_seen: list[int] = []


@pytest.mark.parametrize("seed", range(40))
def test_the_summary_numbers_are_the_models(seed, capsys):
    rng = random.Random(seed)
    tracks = [
        _synthetic(rng, rng.choice([0, 1, 2, 7, 50, 130, 900, 3000]), seed % 2 == 0,
                   seed % 3 == 0)
        for _ in range(1 + seed % 3)
    ]
    for i, t in enumerate(tracks):
        t.name = f"t{i}"
    rec = LightRecording(tracks)
    model = rec.recording()
    if not rec.num_samples:
        return
    text = _summary(rec, "x", capsys)
    assert text == _summary(model, "x", capsys)
    if seed % 3 == 0 and any(t.trace.num_samples >= 900 for t in tracks):
        assert "ms lost in" in text, text  # gaps past the cap were drawn
        lost_seen.append(seed)
    for top in (1, 3, 5, 20):
        capsys.readouterr()
        a = list(summary_mod._summary_lines(rec, None, top, str))
        b = list(summary_mod._summary_lines(model, None, top, str))
        assert a == b


def test_some_drawn_tracks_lost_time() -> None:
    """(after the seeds above: the gap cap's rule was among what they compared)"""
    assert lost_seen


def test_sums_are_numpys_bits() -> None:
    import numpy as np

    rng = random.Random(1)
    for n in [*range(0, 300), 1000, 8191, 8193, 65537]:
        a = [rng.random() * 10 ** rng.randint(-3, 3) for _ in range(n)]
        assert np_sum(a) == float(np.asarray(a).sum())


def _text(nodes: list[dict], samples: list[int], deltas: list[int]):
    from jsprof.engines._v8text import ProfileText

    profile = {"nodes": nodes, "startTime": 1000, "endTime": 1000 + sum(deltas),
               "samples": samples, "timeDeltas": deltas}
    raw = b'{"id":7,"result":{"profile":' + json.dumps(profile).encode() + b"}}"
    return ProfileText(raw, raw.index(b'{"nodes"'))


def _node(i: int, name: str, children: list[int], url: str = "file:///a.js") -> dict:
    n = {"id": i, "callFrame": {"functionName": name, "scriptId": "1", "url": url,
                                "lineNumber": i, "columnNumber": 2}, "hitCount": 0}
    if children:
        n["children"] = children
    return n


@pytest.mark.parametrize("shape", ["sparse ids", "child listed first"])
def test_other_numbering_is_converted_alike_or_left_to_numpy(shape):
    if shape == "sparse ids":  # not 1..n: the id table
        nodes = [_node(50, "(root)", [90, 70], ""), _node(90, "a", [30]), _node(70, "b", []),
                 _node(30, "c", [])]
        samples = [90, 30, 70, 30, 50]
    else:  # a child before its parent: _v8slices orders the tree
        nodes = [_node(2, "a", []), _node(1, "(root)", [2], "")]
        samples = [2, 2, 1]
    deltas = [5, 1000, 1000, 1000, 1000][: len(samples)]
    args = ("main", "node", 1.0, 0.0, None)
    got = _v8join.thread_track([_text(nodes, samples, deltas)], *args)
    trace = normalise_resources(join_slices([_text(nodes, samples, deltas)], "s").to_trace(None))
    if shape == "sparse ids":
        assert got is not None
        _same_columns(got[0].trace, trace)
        assert got[0].trace.num_stacks == 3
    else:
        assert got is None and trace.num_stacks == 1
