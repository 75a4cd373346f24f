"""One truth for the Node summary (issue 32's follow-up): `jsprof record --engine node`
summarises its recording without numpy (recorded.py over array.array columns), every
other input is summarised by the model (trace.py, analysis/ over numpy columns). Here, on
real programs recorded by the CLI, the numbers the record path computed and printed are
the numbers the model computes for the file it wrote, loaded back with jsprof.load: each
sample's weight, the lost time and the capped gaps, the achieved interval, the samples
counted, and the top rows by self time; equal as floats, not as printed text.

The CLI runs in a child process (as a user runs it) with its summary hooked: the hook
computes recorded.py's numbers on the recording the summary was given and writes them
out as JSON (floats kept exactly: repr round-trips), then prints the summary as usual."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import jsprof
from jsprof.analysis.profile import summarize
from jsprof.analysis.sampling import track_sampling
from jsprof.render import summary as summary_mod
from jsprof.render.rows import summary_rows
from jsprof.trace import weights_and_lost
from test_node_light import ACORN, JS, ROOT, SRC

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="needs node")

TSC = JS / "typescript" / "bin" / "tsc"
TOPS = (1, 3, 5, 20, 10**6)
ROW_KEYS = ("name", "location", "self_ms", "self_pct")

# The CLI with its summary hooked (see the module's docstring). numpy: whether the record
# path had imported it by the time the summary was printed (it must not, when light).
PROBE = r"""
import json, sys
from jsprof import cli
from jsprof.render import summary

numbers, tops = sys.argv[1], json.loads(sys.argv[2])
shown = summary.print_recording_summary


def hooked(rec, out, top=5, mapped=None):
    from jsprof import recorded

    got = {"light": isinstance(rec, recorded.LightRecording), "mapped": mapped is not None}
    if got["light"]:
        tracks = []
        for t in rec.tracks:
            w, lost = recorded.weights_and_lost(t)
            s = recorded.track_sampling(t)
            tracks.append({
                "name": t.name, "weights": w, "lost": lost, "samples": s.samples,
                "span_ms": s.span_ms, "lost_ms": s.lost_ms, "cpu": s.cpu, "wall_ms": s.wall_ms,
                "capping": None if s.capping is None else list(s.capping),
                "achieved": None if s.achieved is None
                else [s.achieved.median, s.achieved.mean, s.achieved.behind],
            })
        got["tracks"] = tracks
        got["top"] = {str(k): recorded.top_rows(rec, k) for k in tops}
    got["numpy"] = "numpy" in sys.modules
    with open(numbers, "w") as f:
        json.dump(got, f)
    shown(rec, out, top, mapped)


summary.print_recording_summary = hooked
sys.exit(cli.main(sys.argv[3:]))
"""


def _record(
    args: list[str], cwd: Path, on_line: Callable[[str], None] | None = None
) -> tuple[subprocess.CompletedProcess, dict, Path]:
    """The CLI's run, the record path's numbers and the file it wrote; `on_line` sees each
    line the program prints, as it prints it."""
    out = cwd / "out.jsprof.json"
    numbers = cwd / "numbers.json"
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    for v in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        env.pop(v, None)
    cmd = [sys.executable, "-c", PROBE, str(numbers), json.dumps(TOPS),
           "record", "--engine", "node", "-o", str(out), *args]
    with subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as p:
        assert p.stdout is not None
        lines = []
        for line in p.stdout:
            lines.append(line)
            if on_line is not None:
                on_line(line)
        _, err = p.communicate(timeout=300)
    r = subprocess.CompletedProcess(cmd, p.returncode, "".join(lines), err)
    assert numbers.exists(), r.stderr
    return r, json.loads(numbers.read_text()), out


def _shown(rows: list[dict], top: int) -> list[dict]:
    """The rows as the summary prints them (render/summary._summary_lines): those with self
    time, largest first, `top` of them; the keys both paths give."""
    rows = [{k: r[k] for k in ROW_KEYS} for r in rows if r.get("self_ms", 0) > 0]
    return sorted(rows, key=lambda r: -r["self_ms"])[:top]


def _model_summary(rec, out: Path, cwd: Path, capsys: pytest.CaptureFixture) -> str:
    capsys.readouterr()
    here = os.getcwd()
    os.chdir(cwd)  # locations are shown relative to it
    try:
        summary_mod.print_recording_summary(rec, str(out))
    finally:
        os.chdir(here)
    return capsys.readouterr().err


def _check(r: subprocess.CompletedProcess, got: dict, out: Path, cwd: Path, capsys) -> dict:
    """The record path's numbers against the model's of the file it wrote; returns counts
    of what was compared, for the caller's own checks."""
    rec = jsprof.load(out)
    # What the CLI printed is what the model prints for the file.
    want = _model_summary(rec, out, cwd, capsys)
    assert want in r.stderr, (want, r.stderr)
    if not got["light"]:
        return {"light": False}
    assert not got["numpy"], "the light record path imported numpy"
    assert [t["name"] for t in got["tracks"]] == [t.name for t in rec.tracks]
    compared = {"light": True, "samples": 0, "lost_ms": 0.0, "capped": 0, "rows": 0}
    for t, light in zip(rec.tracks, got["tracks"], strict=True):
        w, lost = weights_and_lost(t.trace, t.sample_interval)
        assert light["weights"] == w.tolist(), t.name
        assert light["lost"] == lost, t.name
        s = track_sampling(t)
        assert light["samples"] == s.samples, t.name
        assert light["span_ms"] == s.span_ms, t.name
        assert light["lost_ms"] == s.lost_ms, t.name
        assert light["cpu"] == s.cpu and light["wall_ms"] == s.wall_ms, t.name
        assert light["capping"] == (None if s.capping is None else list(s.capping)), t.name
        achieved = s.achieved
        assert light["achieved"] == (
            None if achieved is None else [achieved.median, achieved.mean, achieved.behind]
        ), t.name
        compared["samples"] += s.samples
        compared["lost_ms"] += s.lost_ms
        compared["capped"] += 0 if s.capping is None else s.capping.gaps
    for top in TOPS:
        light_rows = got["top"][str(top)]
        model_rows = summary_rows(summarize(rec, top_self=top), top) if rec.num_samples else []
        assert _shown(light_rows, top) == _shown(model_rows, top), top
        compared["rows"] = max(compared["rows"], len(_shown(light_rows, top)))
    return compared


SCRIPTS = {
    "empty": "",
    "throws": "function f() { const t = Date.now(); while (Date.now() - t < 80); "
              "throw new Error('boom'); }\nf();\n",
    "exits": "function g() { const t = Date.now(); while (Date.now() - t < 80); }\ng();\n"
             "process.exit(3);\n",
    "acorn": (f"const acorn = require({json.dumps(str(ACORN))});\n"
              f"const src = require('fs').readFileSync({json.dumps(str(ACORN))}, 'utf8');\n"
              "for (let i = 0; i < 3; i++) acorn.parse(src, {ecmaVersion: 'latest'});\n"),
}
STATUS = {"empty": 0, "throws": 1, "exits": 3, "acorn": 0}


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_the_printed_numbers_are_the_models_of_the_file(name, tmp_path, capsys):
    assert ACORN.exists(), f"{ACORN} missing: `make test` installs tests/js (npm ci)"
    (tmp_path / f"{name}.js").write_text(SCRIPTS[name])
    r, got, out = _record([f"{name}.js"], tmp_path)
    assert r.returncode == STATUS[name], r.stderr
    compared = _check(r, got, out, tmp_path, capsys)
    assert compared["light"], "a plain script is recorded on the light path"
    if name == "acorn":
        assert compared["rows"] >= 20


def test_acorn_at_a_tenth_of_a_millisecond(tmp_path, capsys):
    """--interval 0.1: ten times the samples, and gaps far from the interval."""
    (tmp_path / "acorn.js").write_text(SCRIPTS["acorn"])
    r, got, out = _record(["--interval", "0.1", "acorn.js"], tmp_path)
    assert r.returncode == 0, r.stderr
    compared = _check(r, got, out, tmp_path, capsys)
    assert compared["light"] and compared["rows"] >= 20


def test_a_process_held_still(tmp_path, capsys):
    """Node stopped from outside (SIGSTOP) for 0.4 s mid-run, as a suspended process or a
    starved machine is: where V8's sampler leaves the hole in its samples (not every time:
    test_cli_report's gap cap test says so too), the gap cap's lost time and capped gaps
    are among the numbers compared. The script works on until it sees the hold (as
    test_cli_report's do, the line said from inside the loop that watches): however late the
    test reads the line, the hold is mid-run."""
    (tmp_path / "held.js").write_text(
        "function work(ms) { const end = performance.now() + ms; let x = 0;\n"
        "  while (performance.now() < end) x += Math.sqrt(x + 1); return x; }\n"
        "function untilHeld(say) { let last = performance.now(); const limit = last + 60000;\n"
        "  for (;;) { const now = performance.now(); if (now - last > 300 || now > limit) return;\n"
        "    last = now; if (say) { process.stdout.write(say); say = ''; } } }\n"
        "work(100);\nuntilHeld('hold ' + process.pid + '\\n');\n"
        "work(100);\n"
    )

    def hold(line: str) -> None:
        if line.startswith("hold "):
            pid = int(line.split()[1])
            os.kill(pid, signal.SIGSTOP)
            time.sleep(0.4)
            os.kill(pid, signal.SIGCONT)

    r, got, out = _record(["held.js"], tmp_path, hold)
    assert r.returncode == 0, r.stderr
    compared = _check(r, got, out, tmp_path, capsys)
    assert compared["light"]


def test_typescript_compiling_a_project(tmp_path, capsys):
    """tsc itself (typescript/bin/tsc -p): a large program, thousands of stacks."""
    assert TSC.exists(), f"{TSC} missing: `make test` installs tests/js (npm ci)"
    proj = tmp_path / "proj"
    (proj / "src").mkdir(parents=True)
    (proj / "tsconfig.json").write_text(json.dumps({
        "compilerOptions": {"target": "es2020", "module": "commonjs", "strict": True,
                            "outDir": "out"},
        "include": ["src"],
    }))
    (proj / "src" / "shapes.ts").write_text(
        "export interface Shape { area(): number }\n"
        "export class Circle implements Shape {\n"
        "  constructor(private r: number) {}\n"
        "  area(): number { return Math.PI * this.r ** 2; }\n}\n"
        "export class Square implements Shape {\n"
        "  constructor(private s: number) {}\n  area(): number { return this.s * this.s; }\n}\n"
    )
    (proj / "src" / "main.ts").write_text(
        "import { Circle, Shape, Square } from './shapes';\n"
        "const shapes: Shape[] = [new Circle(1), new Square(2)];\n"
        "export const total = shapes.reduce((a, s) => a + s.area(), 0);\n"
    )
    r, got, out = _record([str(TSC), "-p", "proj"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert (proj / "out" / "main.js").exists()
    compared = _check(r, got, out, tmp_path, capsys)
    assert compared["light"] and compared["rows"] >= 20


def test_a_worker_threads_script(tmp_path, capsys):
    """A worker: two tracks, the worker's wait for jsprof at its start spliced out."""
    script = tmp_path / "worker.js"
    shutil.copy(ROOT / "tests" / "data" / "nodejs" / "worker.js", script)
    r, got, out = _record(["worker.js"], tmp_path)
    assert r.returncode == 0, r.stderr
    compared = _check(r, got, out, tmp_path, capsys)
    assert len(jsprof.load(out).tracks) >= 2
    assert compared["light"], "a worker's recording is summarised on the light path"
