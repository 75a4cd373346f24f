"""`jsprof record` / `jsprof run` end to end on real QuickJS, as a user runs them."""

import os
import re
import signal
import subprocess
import sys
import time

import pytest

import jsprof
from jsprof.trace import sample_weights

JSPROF = [sys.executable, "-m", "jsprof.cli"]

BUSY = """
function spin(ms) { const end = performance.now() + ms; let x = 0;
  while (performance.now() < end) x++; return x; }
function work() { return spin(MS); }
work();
console.log("done");
"""


def _script(tmp_path, text, name="app.js"):
    p = tmp_path / name
    p.write_text(text)
    return p


def run(*args, **kw):
    return subprocess.run(
        [*JSPROF, *map(str, args)], capture_output=True, text=True, timeout=120, **kw
    )


@pytest.mark.under_load
def test_record_writes_trace_and_summary(tmp_path):
    app = _script(tmp_path, BUSY.replace("MS", "150"))
    p = run("record", "--interval", "0.5", app, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "done\n"  # the program's stdout is untouched
    out = tmp_path / "app.quickjs.jsprof.json"  # in the current directory, naming the engine
    assert "samples over" in p.stderr and "wrote app.quickjs.jsprof.json" in p.stderr
    # requested and achieved interval; the summary ends with the hottest functions
    # (on a loaded machine the achieved one is a median, with the mean and the share of
    # time in long gaps beside it)
    assert re.search(r"interval 0\.5 ms \(achieved [\d.]+ ms(?: median, [\d.]+ ms mean)?[);]",
                     p.stderr), p.stderr
    tail = p.stderr.split("wrote app.quickjs.jsprof.json")[1].splitlines()[1:]
    assert tail[0].startswith("top ") and tail[0].endswith("by self time:"), p.stderr
    assert len(tail) - 1 == int(tail[0].split()[1]) <= 5
    # where V8 places spin: the ( of its parameters (QuickJS: the function keyword, 2:1)
    assert tail[1].split()[3:] == ["spin", "app.js:2:14"], p.stderr
    t = jsprof.load(out).tracks[0]
    assert t.engine == "quickjs" and t.sample_interval == 0.5
    # 150 ms at 0.5 ms: 300 ticks, those due while the thread could not run lost, not samples
    assert t.trace.num_samples + t.meta["droppedTicks"] >= 200, t.meta
    assert "work" in {f.name for f in t.trace.frames}


def test_uncaught_exception_keeps_samples_and_shows_js_stack(tmp_path):
    app = _script(
        tmp_path,
        BUSY.replace("MS", "60") + "\nfunction f() { throw new TypeError('boom'); }\nf();\n",
    )
    out = tmp_path / "t.json"
    p = run("record", "-o", out, app)
    assert p.returncode == 1
    assert "uncaught JavaScript exception: TypeError: boom" in p.stderr
    assert "at f" in p.stderr and "Traceback" not in p.stderr
    tr = jsprof.load(out).tracks[0]
    # 60 ms at 1 ms: the ticks due while the thread could not run are lost, not samples
    assert tr.meta["exit"] == "error" and tr.trace.num_samples > 0
    assert tr.trace.num_samples + tr.meta["droppedTicks"] >= 40, tr.meta


def test_buffer_full_is_loud(tmp_path):
    app = _script(tmp_path, BUSY.replace("MS", "120"))
    out = tmp_path / "t.json"
    p = run("record", "--max-buffer-size", "30", "-o", out, app)
    assert p.returncode == 0
    assert "WARNING: the sample buffer" in p.stderr
    assert jsprof.load(out).tracks[0].trace.num_samples == 30


def test_ctrl_c_still_writes_the_trace(tmp_path):
    app = _script(tmp_path, "function loop() { for (;;) {} }\nconsole.log('started');\nloop();\n")
    out = tmp_path / "t.json"
    proc = subprocess.Popen(
        [*JSPROF, "record", "-o", str(out), str(app)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline() == "started\n"
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    tr = jsprof.load(out).tracks[0]
    assert "loop" in {f.name for f in tr.trace.frames}
    # 300 ms or more of the loop, weighed as `report` does (a loaded machine's ticks due
    # while the script waited for a core are lost; the gap weighs on the first of them,
    # where the thread resumed)
    assert float(sample_weights(tr.trace, tr.sample_interval).sum()) >= 100


@pytest.mark.under_load
def test_workers_record_one_track_per_runtime(tmp_path):
    app = _script(
        tmp_path,
        BUSY.replace("MS", "80").replace(
            'console.log("done");',
            'console.log("worker", jsprof.worker.index, jsprof.worker.count);',
        ),
    )
    out = tmp_path / "w.jsprof.json"
    p = run("record", "--workers", "3", "-o", out, app)
    assert p.returncode == 0, p.stderr
    assert sorted(p.stdout.splitlines()) == ["worker 0 3", "worker 1 3", "worker 2 3"]
    rec = jsprof.load(out)
    assert [t.name.split(" (")[0] for t in rec.tracks] == ["worker 0", "worker 1", "worker 2"]
    for t in rec.tracks:
        # 80 ms at 1 ms each; the ticks due while a worker could not run are lost, not
        # samples (droppedTicks: three workers on 2 cores at load 25 kept 24 samples)
        assert "work" in {f.name for f in t.trace.frames}
        assert t.trace.num_samples + t.meta["droppedTicks"] >= 60, t.meta
    # and Perfetto's file keeps a track each
    p = run("convert", out, tmp_path / "w.pftrace")
    assert p.returncode == 0, p.stderr
    back = jsprof.load(tmp_path / "w.pftrace")
    assert [t.name for t in back.tracks] == [t.name for t in rec.tracks]
    assert [t.trace.num_samples for t in back.tracks] == [t.trace.num_samples for t in rec.tracks]


def test_run_and_usage_errors(tmp_path):
    app = _script(tmp_path, "console.log(scriptArgs.slice(1).join(','));")
    p = run("run", app, "a", "--b")
    assert p.returncode == 0 and p.stdout == "a,--b\n"
    p = run("record", tmp_path / "missing.js")
    assert p.returncode == 2 and "no such file" in p.stderr and "Traceback" not in p.stderr
    p = run("record")
    assert p.returncode == 2 and "give the script" in p.stderr
    assert not os.path.exists(tmp_path / "missing.jsprof.json")


def _read_all(fd: int) -> bytes:
    out = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the other side closed
            return out
        if not chunk:
            return out
        out += chunk


def test_live_status_line_on_a_terminal_only(tmp_path):
    import pty

    app = _script(tmp_path, BUSY.replace("MS", "1500"))
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [*JSPROF, "record", "-o", str(tmp_path / "t.json"), str(app)],
        stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL,
    )
    os.close(slave)
    err = _read_all(master).decode()
    os.close(master)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0 and out == b"done\n", err
    lines = [s for s in err.split("\r") if s.startswith("\x1b[Kjsprof: recording")]
    # before the runtime is made (slow on a loaded machine) a line has only the time
    lines = [s for s in lines if " · " in s]
    assert len(lines) >= 3, err  # updated while it ran (every 0.25 s)
    counts = [int(s.split(" · ")[1].split()[0]) for s in lines]
    assert counts == sorted(counts) and counts[-1] >= 500, counts  # samples so far, growing
    assert all(s.endswith(" · 1 track") for s in lines)
    plain = re.sub(r"\x1b\[[0-9;]*m", "", err)  # the summary is in colour on a terminal
    assert "main: " in plain and "samples over" in plain  # the summary follows
    # Piped: nothing but the summary.
    p = run("record", "-o", tmp_path / "u.json", _script(tmp_path, BUSY.replace("MS", "600")))
    assert p.returncode == 0 and "\r" not in p.stderr and "recording" not in p.stderr


def test_live_status_line_counts_node_samples_too(tmp_path):
    import pty

    app = _script(tmp_path, BUSY.replace("MS", "2500"))
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [*JSPROF, "record", "--engine", "node", "-o", str(tmp_path / "n.json"), str(app)],
        stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL,
    )
    os.close(slave)
    err = _read_all(master).decode()
    os.close(master)
    proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    lines = [s for s in err.split("\r") if s.startswith("\x1b[Kjsprof: recording")]
    counted = [s for s in lines if " · " in s]
    assert counted, err  # the samples of the slices taken so far, and the tracks
    counts = [int(s.split(" · ")[1].split()[0]) for s in counted]
    assert counts == sorted(counts) and counts[-1] > 0 and counted[-1].endswith("1 track")


CLASS_FIELDS = """
function spin(n) { let s = 0; for (let i = 0; i < n; i++) s += i; return s; }
class Point {
  x = spin(3000);          // an instance field initializer
  #secret = spin(3000);    // a private field
  static origin = spin(300000);  // a static field
  static { Point.ready = spin(300000); }  // a static block
  get secret() { return this.#secret; }
}
let t = 0;
for (let i = 0; i < 300; i++) t += new Point().secret;
console.log(t > 0);
"""


def test_class_field_initializers_are_placed_where_v8_places_them(tmp_path):
    # QuickJS runs class field initializers and static blocks in functions of its own,
    # with line 0 for the function (upstream). They are placed where V8 places the
    # functions running them, so two classes' initializers are told apart in every table
    # (they once shared "(anonymous app.js)") and match a V8 profile of the code: the
    # instance fields' at the class's first character, the static ones' at the `static`
    # of the last static field, never at no position or an invalid 0; `validate` and
    # `report` read the file.
    two = CLASS_FIELDS + "class Other { y = spin(3000); static { spin(300000); } }\n" + (
        "for (let i = 0; i < 300; i++) new Other();\n")
    app = _script(tmp_path, two)
    out = tmp_path / "t.json"
    p = run("record", "--interval", "0.1", "-o", out, app)
    assert p.returncode == 0, p.stderr
    v = run("validate", out)
    assert v.returncode == 0, v.stderr
    frames = jsprof.load(out).tracks[0].trace.frames
    # named as V8 names the functions that run a class's field initializers
    anon = {
        (f.name, f.line, f.column) for f in frames
        if f.name in ("<instance_members_initializer>", "<static_initializer>")
    }
    # Point (line 3): its instance fields at 3:1, its static field and block at the
    # `static` of line 6; Other's (line 13) instance field at 13:1, its block at 13:31
    assert anon <= {("<instance_members_initializer>", 3, 1), ("<static_initializer>", 6, 3),
                    ("<instance_members_initializer>", 13, 1),
                    ("<static_initializer>", 13, 31)}, frames
    assert {3, 6, 13} <= {line for _, line, _ in anon}, frames
    assert all(f.line >= 1 and f.column >= 1 for f in frames if f.line is not None)
    assert all(f.line is not None for f in frames if f.resource_id is not None)
    r = run("report", "--by", "function", "--wide", out)
    assert r.returncode == 0, r.stderr
    rows = r.stdout.splitlines()
    for at, name in (("3:1", "<instance_members_initializer>"), ("6:3", "<static_initializer>"),
                     ("13:1", "<instance_members_initializer>")):
        assert any(name in row and row.endswith(f"app.js:{at}") for row in rows), r.stdout


def test_summary_figures_are_the_recordings_own(tmp_path):
    # The summary's achieved interval is what the written file shows: on a steady run one
    # figure; with jsprof stopped (SIGSTOP) for 2.5 s mid-script, past the sampler's stall
    # cap (1,000 ticks), a real gap, and the summary says the sampler fell behind instead
    # of a median that hides it.
    import numpy as np

    app = _script(
        tmp_path,
        BUSY.replace("MS", "3000").replace("work();", "console.log('started'); work();"),
    )
    out = tmp_path / "t.json"
    proc = subprocess.Popen(
        [*JSPROF, "record", "-o", str(out), str(app)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout.readline() == "started\n"
        time.sleep(0.3)
        proc.send_signal(signal.SIGSTOP)
        time.sleep(2.5)
        proc.send_signal(signal.SIGCONT)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    t = jsprof.load(out).tracks[0].trace.sample_time
    d = np.diff(t)
    share = d[d > 5].sum() / d.sum()
    assert share > 0.2, share  # the 1.5 s beyond the stall cap, of about 3 s
    def ms(x: float) -> str:
        return f"{x:.3g}" if x < 10 else f"{x:.0f}"

    assert f"(achieved {ms(np.median(d))} ms median, {ms(d.mean())} ms mean; " in err, err
    assert (
        f"{share * 100:.0f} % of the time in gaps > 5x the interval: the sampler fell behind"
    ) in err, err
