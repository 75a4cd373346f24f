"""`jsprof record --engine node -- COMMAND ARGS`: a command found on PATH (real npm, npx and
TypeScript's tsc from tests/js/node_modules), every Node process it starts profiled (npm's
own, the script npm runs, a `child_process.fork`, a spawned `node`, a worker thread), one
recording with a track per process and thread, the command's status, Ctrl-C and a child
killed by SIGKILL keeping their samples. Before this, `npm` was taken for a script:
"npm: no such file"."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import jsprof

JSPROF = [sys.executable, "-m", "jsprof.cli"]
JS = Path(__file__).parent / "js"

# Each process burns CPU in a function named for it (by CPU time, so a descheduled process
# still runs it that long), and the ones that wait say so on stdout.
_HOT = r"""
function %s(ms) { const t0 = process.cpuUsage(); let x = 0;
  while ((process.cpuUsage(t0).user + process.cpuUsage(t0).system) / 1000 < ms)
    for (let i = 0; i < 1e4; i++) x += Math.sqrt(x + i);
  return x; }
"""

PARENT = (_HOT % "parentHot") + r"""
const { fork, spawn } = require('node:child_process');
const path = require('node:path');
console.log('parent argv', JSON.stringify(process.argv.slice(2)));
parentHot(150);
const f = fork(path.join(__dirname, 'forked.js'), ['--from-fork', 'x y']);
f.on('exit', (code) => {
  const s = spawn(process.execPath, [path.join(__dirname, 'spawned.js'), 'spawned-arg'],
    { stdio: 'inherit' });
  s.on('exit', (c2) => { console.log('children', code, c2); process.exitCode = 3; });
});
"""

FORKED = (_HOT % "forkedHot") + r"""
console.log('forked argv', JSON.stringify(process.argv.slice(2)));
forkedHot(150);
"""

SPAWNED = (_HOT % "spawnedHot") + (_HOT % "workerHot") + r"""
const { Worker } = require('node:worker_threads');
console.log('spawned argv', JSON.stringify(process.argv.slice(2)));
spawnedHot(150);
new Worker(workerHot.toString() + '\nworkerHot(150);', { eval: true });
"""


@pytest.fixture(autouse=True)
def _npm_is_required() -> None:
    for tool in ("node", "npm", "npx"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is not installed; these tests need Node.js 20 with npm")


def _package(tmp_path: Path) -> Path:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "package.json").write_text(
        '{"name": "jsprof-command-test", "version": "1.0.0", "private": true,\n'
        ' "scripts": {"test": "node parent.js"}}\n'
    )
    (pkg / "parent.js").write_text(PARENT)
    (pkg / "forked.js").write_text(FORKED)
    (pkg / "spawned.js").write_text(SPAWNED)
    return pkg


def _run(*args: object, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*JSPROF, *map(str, args)], capture_output=True, text=True, timeout=180, cwd=cwd
    )


def _samples_in(track, name: str) -> int:
    """Samples whose stack holds the function `name`."""
    tr = track.trace
    frames = {i for i, f in enumerate(tr.frames) if f.name == name}
    return sum(
        1
        for s in tr.sample_stack.tolist()
        if s >= 0 and frames.intersection(tr.stack_frames(s))
    )


def _first_time_in(track, name: str) -> float:
    """Epoch ms of the first sample inside `name`."""
    tr = track.trace
    frames = {i for i, f in enumerate(tr.frames) if f.name == name}
    for s, t in zip(tr.sample_stack.tolist(), tr.sample_time.tolist(), strict=True):
        if s >= 0 and frames.intersection(tr.stack_frames(s)):
            return track.time_origin + t
    raise AssertionError(f"no sample in {name} on {track.name}")


def test_npm_test_records_every_node_process_it_starts(tmp_path):
    pkg = _package(tmp_path)
    out = tmp_path / "npm.json"
    p = _run("record", "--engine", "node", "-o", out, "--", "npm", "test", "--", "a", "b c",
             cwd=pkg)
    assert "Traceback" not in p.stderr
    assert p.returncode == 3, p.stderr  # the script's process.exitCode, through npm
    # Arguments pass through npm to the script, and through fork/spawn to the children.
    assert 'parent argv ["a","b c"]' in p.stdout, p.stdout
    assert 'forked argv ["--from-fork","x y"]' in p.stdout
    assert 'spawned argv ["spawned-arg"]' in p.stdout
    assert "children 0 0" in p.stdout
    # The inspector's own lines ("Debugger attached.", ...) are not the command's.
    assert "Debugger" not in p.stderr and "ws://" not in p.stderr, p.stderr

    rec = jsprof.load(out)
    by_script: dict[str, list] = {}
    for t in rec.tracks:
        assert t.name.startswith("pid "), t.name
        by_script.setdefault(t.name.split(" ", 2)[2], []).append(t)
    mains = [t for t in rec.tracks if "argv" in t.meta]
    assert len(mains) == 4, [t.name for t in rec.tracks]  # npm, parent, forked, spawned
    # npm's own Node process is recorded too: its script is npm's CLI.
    npm = [t for t in mains if "npm" in os.path.basename(t.meta["argv"][1])]
    assert len(npm) == 1 and npm[0] is rec.tracks[0], [t.meta["argv"] for t in mains]
    parent, forked, spawned = (by_script[n][0] for n in ("parent.js", "forked.js", "spawned.js"))
    assert parent.name == f"pid {parent.meta['pid']} parent.js"
    assert parent.meta["argv"][2:] == ["a", "b c"]
    assert forked.meta["ppid"] == parent.meta["pid"]
    assert spawned.meta["ppid"] == parent.meta["pid"]
    assert forked.meta["processExitCode"] == 0 and parent.meta["processExitCode"] == 3
    # Each process's hot function, in its own track only.
    hot = {"parentHot": parent, "forkedHot": forked, "spawnedHot": spawned}
    for name, track in hot.items():
        for t in rec.tracks:
            n = _samples_in(t, name)
            if t is track:
                assert n >= 5, (name, t.name, n)
            else:
                assert n == 0, (name, t.name, n)
    # The spawned process's worker thread: a track of its own under that process.
    worker = [t for t in rec.tracks if t.name.startswith(f"{spawned.name} worker")]
    assert [t.name for t in worker] == [f"{spawned.name} worker 1"]
    assert _samples_in(worker[0], "workerHot") >= 5
    # Every thread carries its process's pid: a Perfetto trace groups them by process.
    assert worker[0].meta["pid"] == spawned.meta["pid"]
    jsprof.save(rec, tmp_path / "npm.pftrace")
    back = {t.name: t.meta.get("pid") for t in jsprof.load(tmp_path / "npm.pftrace").tracks}
    assert back == {t.name: t.meta["pid"] for t in rec.tracks}, back
    # One time line: every track's times are epoch ms, so they line up in order.
    assert (_first_time_in(parent, "parentHot") < _first_time_in(forked, "forkedHot")
            < _first_time_in(spawned, "spawnedHot"))
    # The command's ending, as a script's: in the first track's meta.
    first = rec.tracks[0].meta
    assert first["command"] == ["npm", "test", "--", "a", "b c"]
    assert first["exit"] == "error" and first["exitCode"] == 3


def test_npx_tsc_real_typescript_compiler(tmp_path):
    """Real third-party code from tests/js/node_modules (typescript 5.9.3) through npx:
    npx's own Node process and tsc's, tsc's track with the compiler's own frames."""
    if not (JS / "node_modules" / "typescript").is_dir():
        pytest.fail("tests/js/node_modules lacks typescript; run `make test` (npm ci there)")
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "tsconfig.json").write_text(
        '{"compilerOptions": {"strict": true, "noEmit": true, "target": "es2022"},'
        ' "include": ["*.ts"]}'
    )
    for i in range(3):
        (proj / f"m{i}.ts").write_text(
            f"export interface Shape{i} {{ area(): number; name: string }}\n"
            f"export class Circle{i} implements Shape{i} {{\n"
            f"  constructor(public r: number, public name = 'c{i}') {{}}\n"
            "  area(): number { return Math.PI * this.r ** 2; } }\n"
            f"export const total{i} = (xs: Shape{i}[]): number =>"
            " xs.reduce((a, s) => a + s.area(), 0);\n"
        )
    out = tmp_path / "tsc.json"
    p = _run("record", "--engine", "node", "-o", out, "--", "npx", "--no-install", "tsc",
             "-p", proj, cwd=JS)
    assert p.returncode == 0, p.stderr
    rec = jsprof.load(out)
    scripts = [os.path.basename(t.meta["argv"][1]) for t in rec.tracks if "argv" in t.meta]
    assert "tsc" in scripts and any("npx" in s for s in scripts), scripts
    tsc = next(t for t in rec.tracks if t.meta.get("argv", ["", ""])[1].endswith("tsc"))
    urls = [r for r in tsc.trace.resources if "typescript/lib/" in r]
    assert urls, tsc.trace.resources
    frames = {i for i, f in enumerate(tsc.trace.frames)
              if f.resource_id is not None
              and "typescript/lib/" in tsc.trace.resources[f.resource_id]}
    n = sum(1 for s in tsc.trace.sample_stack.tolist()
            if s >= 0 and frames.intersection(tsc.trace.stack_frames(s)))
    assert n >= 20, n


def test_command_not_found_is_one_line_and_2(tmp_path):
    p = _run("record", "--engine", "node", "-o", tmp_path / "o.json", "--",
             "no-such-command-jsprof", "x", cwd=tmp_path)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "no-such-command-jsprof: command not found on PATH" in lines[0]
    assert not (tmp_path / "o.json").exists()
    # A command is Node's: another engine says so in one line.
    p = _run("record", "--", "npm", "test", cwd=tmp_path)
    assert p.returncode == 2 and "--engine node" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_a_script_after_dashdash_is_still_a_script(tmp_path):
    app = tmp_path / "app.js"
    app.write_text("console.log('ran', process.argv.slice(2).join(','));\n")
    p = _run("record", "--engine", "node", "-o", tmp_path / "o.json", "--", app, "z",
             cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "ran z" in p.stdout
    assert jsprof.load(tmp_path / "o.json").tracks[0].name == "main"


def test_the_commands_own_stderr_is_passed_on_less_the_inspectors_lines(tmp_path):
    app = tmp_path / "app.js"
    # The last write leaves its line open: Node's "Waiting for the debugger to
    # disconnect..." came on the same line and was passed on with it.
    app.write_text("console.error('said on stderr'); process.stderr.write('no newline');\n")
    p = _run("record", "--engine", "node", "-o", tmp_path / "o.json", "--", "node", app,
             cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    # (jsprof's own summary follows)
    assert p.stderr.startswith("said on stderr\nno newlinepid "), p.stderr
    assert "Debugger" not in p.stderr and "Waiting for the debugger" not in p.stderr


FOREVER = (_HOT % "parentHot") + r"""
const { fork } = require('node:child_process');
if (process.argv[2] === 'child') {
  console.log('child ' + process.pid);
  setInterval(() => parentHot(5), 1);
} else {
  const c = fork(__filename, ['child']);
  setInterval(() => parentHot(5), 1);
}
"""


@pytest.mark.parametrize("sig,status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_ctrl_c_keeps_every_process_samples_and_ends_the_command(tmp_path, sig, status):
    app = tmp_path / "forever.js"
    app.write_text(FOREVER)
    out = tmp_path / "o.json"
    proc = subprocess.Popen(
        [*JSPROF, "record", "--engine", "node", "-o", str(out), "--", "node", str(app)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("child "), line
    child = int(line.split()[1])
    time.sleep(1.0)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == status, err
    assert "Traceback" not in err
    rec = jsprof.load(out)
    assert rec.tracks[0].meta["exit"] == "interrupted"
    assert rec.tracks[0].meta["signal"] == sig.name
    mains = [t for t in rec.tracks if "argv" in t.meta]
    assert len(mains) == 2
    for t in mains:
        assert t.meta["processExit"] == "interrupted"
        assert _samples_in(t, "parentHot") >= 5, t.name
    assert {t.meta["pid"] for t in mains} >= {child}
    # The command's processes were ended with it.
    with pytest.raises(ProcessLookupError):
        for _ in range(100):
            os.kill(child, 0)
            time.sleep(0.05)


CRASHES = (_HOT % "parentHot") + (_HOT % "killedHot") + (_HOT % "throwerHot") + r"""
const { fork } = require('node:child_process');
const how = process.argv[2];
if (how === 'killed') { process.send('busy'); killedHot(1e9); }
else if (how === 'thrower') { throwerHot(150); throw new Error('child failed'); }
else {
  const k = fork(__filename, ['killed']);
  k.on('message', () => setTimeout(() => k.kill('SIGKILL'), 600));
  k.on('exit', (code, sig) => {
    console.log('killed', sig);
    const t = fork(__filename, ['thrower'], { stdio: ['ignore', 'inherit', 'ignore', 'ipc'] });
    t.on('exit', (c) => { console.log('thrower', c); parentHot(50); });
  });
}
"""


def test_a_child_killed_or_crashing_keeps_its_samples(tmp_path):
    app = tmp_path / "crashes.js"
    app.write_text(CRASHES)
    out = tmp_path / "o.json"
    p = _run("record", "--engine", "node", "-o", out, "--", "node", app, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "killed SIGKILL" in p.stdout and "thrower 1" in p.stdout
    rec = jsprof.load(out)
    by_how = {t.meta["argv"][2] if len(t.meta["argv"]) > 2 else "parent": t
              for t in rec.tracks if "argv" in t.meta}
    assert set(by_how) == {"parent", "killed", "thrower"}
    killed = by_how["killed"]
    # SIGKILL cannot be caught: the slices taken while it ran are its samples.
    assert "partial" in killed.meta and killed.meta["processExit"] == "killed", killed.meta
    assert _samples_in(killed, "killedHot") >= 5
    thrower = by_how["thrower"]
    assert thrower.meta["processExit"] == "error" and thrower.meta["processExitCode"] == 1
    assert "child failed" in thrower.meta["processError"]
    assert _samples_in(thrower, "throwerHot") >= 5


@pytest.mark.parametrize("left", ["directory", "doorbell", "nothing"])
def test_a_node_started_after_jsprof_is_gone_runs_unprofiled(tmp_path, left):
    """jsprof killed (SIGKILL: nothing cleaned up) while the command's processes live on:
    a Node process they start later finds no reader at the doorbell (or no directory) and
    runs as it would without jsprof, rather than wait for a profiler forever."""
    from jsprof.engines.node.command import ANNOUNCE_ENV, _node_options, command_hook_path

    where = tmp_path / "jsprof-command-x"
    if left != "nothing":
        where.mkdir(mode=0o700)
    if left == "doorbell":
        os.mkfifo(where / "doorbell", 0o600)
    env = dict(os.environ, **{ANNOUNCE_ENV: str(where)})
    env["NODE_OPTIONS"] = _node_options(None, command_hook_path())
    p = subprocess.run(["node", "-e", "console.log(6 * 7)"], env=env, capture_output=True,
                       text=True, timeout=60)
    assert (p.returncode, p.stdout, p.stderr) == (0, "42\n", "")
    if left != "nothing":
        assert [f.name for f in where.iterdir() if f.name != "doorbell"] == []


def test_duration_ends_the_command_with_0_and_keeps_every_process(tmp_path):
    app = tmp_path / "forever.js"
    app.write_text(FOREVER)
    out = tmp_path / "o.json"
    p = _run("record", "--engine", "node", "--duration", "3", "-o", out, "--", "node", app,
             cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    rec = jsprof.load(out)
    assert rec.tracks[0].meta["exit"] == "duration"
    mains = [t for t in rec.tracks if "argv" in t.meta]
    assert len(mains) == 2 and all(t.meta["processExit"] == "duration" for t in mains)
    assert all(_samples_in(t, "parentHot") >= 5 for t in mains)


def test_python_api_record_command(tmp_path):
    from jsprof.record import exit_status

    out = tmp_path / "o.jsprof.json"
    code = (_HOT % "apiHot") + "apiHot(100); process.exitCode = 5;"
    rec = jsprof.record_command(["node", "-e", code], sample_interval=0.5, output=out)
    assert exit_status(rec) == 5
    assert [t.name for t in rec.tracks] == [f"pid {rec.tracks[0].meta['pid']} node"]
    assert _samples_in(rec.tracks[0], "apiHot") >= 5
    assert rec.tracks[0].sample_interval == 0.5
    assert jsprof.load(out).tracks[0].name == rec.tracks[0].name


def test_node_test_runner_a_track_per_test_file(tmp_path):
    """`node --test` runs each test file in a child process of its own: each is a track
    (the runner's own process loads no preload on Node 20: it has none), and a failing
    test's status comes back as the runner gives it (1)."""
    for name, ok in (("alpha", "true"), ("beta", "false")):
        (tmp_path / f"{name}.test.js").write_text(
            (_HOT % f"{name}Hot")
            + "const test = require('node:test'); const assert = require('node:assert');\n"
            f"test('{name}', () => {{ {name}Hot(100); assert.ok({ok}); }});\n"
        )
    out = tmp_path / "o.json"
    p = _run("record", "--engine", "node", "-o", out, "--", "node", "--test", cwd=tmp_path)
    assert p.returncode == 1, p.stderr
    assert "# pass 1" in p.stdout and "# fail 1" in p.stdout, p.stdout
    rec = jsprof.load(out)
    names = sorted(t.name.split(" ", 2)[2] for t in rec.tracks)
    assert names == ["alpha.test.js", "beta.test.js"], names
    for t in rec.tracks:
        script = t.name.split(" ", 2)[2].split(".")[0]
        assert _samples_in(t, f"{script}Hot") >= 5, t.name
    assert rec.tracks[0].meta["exitCode"] == 1


def test_a_command_without_dashdash_says_how(tmp_path):
    """The issue's first try: `record --engine node npm test` took npm for a script file."""
    p = _run("record", "--engine", "node", "npm", "test", cwd=tmp_path)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert "npm: no such script file, but a command on PATH" in lines[0]
    assert lines[0].endswith("jsprof record --engine node -- npm test")
    assert list(tmp_path.iterdir()) == []


ENDS = (_HOT % "endsHot") + r"""
const { fork } = require('node:child_process');
if (process.argv[2] === 'child') {
  endsHot(100);
  process.stdout.write('jsprof-test-end ' + process.pid + '\n');
  process.exit(0);
} else {
  fork(__filename, ['child']);
}
"""


def _cpu_ticks(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[11]) + int(fields[12])  # utime + stime


def _until_cpu_still(pid: int, still: float = 0.2, limit: float = 30.0) -> None:
    """Until process `pid` has used no CPU for `still` seconds (or is gone)."""
    deadline = time.monotonic() + limit
    last, since = _cpu_ticks(pid), time.monotonic()
    while time.monotonic() < deadline and last is not None:
        time.sleep(0.02)
        now = _cpu_ticks(pid)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= still:
            return


def test_each_process_wait_for_jsprof_after_its_end_is_dropped(tmp_path):
    """As for a script (tests/test_node_exit_wait.py): a process of the command that ends
    with process.exit() waits in reallyExit until jsprof has its profile; jsprof held still
    300 ms then (a loaded machine) must not show as the program's time."""
    app = tmp_path / "ends.js"
    app.write_text(ENDS)
    out = tmp_path / "o.json"
    p = subprocess.Popen(
        [*JSPROF, "record", "--engine", "node", "-o", str(out), "--", "node", str(app)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path,
    )
    assert p.stdout is not None
    held = False
    for line in p.stdout:
        if line.startswith(b"jsprof-test-end ") and not held:
            held = True
            os.kill(p.pid, signal.SIGSTOP)
            try:
                # Held until the child is seen waiting for jsprof (its CPU time still), then
                # 300 ms more: on a loaded machine the child may reach its end only after a
                # fixed 300 ms, and then it never waited (no exitWaitDropped, seen in a run).
                _until_cpu_still(int(line.split()[1]))
                time.sleep(0.3)
            finally:
                os.kill(p.pid, signal.SIGCONT)
    _, err = p.communicate(timeout=120)
    assert held and p.returncode == 0, err
    child = next(t for t in jsprof.load(out).tracks if t.meta.get("argv", [])[2:] == ["child"])
    tr = child.trace
    leaf = [None if s < 0 else tr.frames[tr.stack_frame[s]].name for s in tr.sample_stack.tolist()]
    assert _samples_in(child, "endsHot") >= 5
    # The 300 ms held would be some 300 samples of reallyExit at the end.
    assert leaf.count("reallyExit") <= 5, (leaf.count("reallyExit"), child.meta)
    assert child.meta["exitWaitDropped"]["samples"] >= 1, child.meta


def test_a_process_left_running_when_the_command_ends_is_recorded_until_then(tmp_path):
    """`sh -c 'node bg.js & ...'`: the command ends while its background Node runs on; that
    process's samples up to the command's end are kept (processExit "outlived") and it is
    ended with the command's process group, as a script's leftovers are."""
    bg = tmp_path / "bg.js"
    bg.write_text((_HOT % "bgHot") + "console.log('bg ' + process.pid);\n"
                  "setInterval(() => bgHot(5), 1);\n")
    out = tmp_path / "o.json"
    # The background node writes its pid to a file; the shell waits for it, 1 s more, exits 4.
    script = (f"node {bg} > {tmp_path}/pid & while [ ! -s {tmp_path}/pid ]; do sleep 0.1; "
              "done; sleep 1; exit 4")
    p = subprocess.run(
        [*JSPROF, "record", "--engine", "node", "-o", str(out), "--", "sh", "-c", script],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )
    assert p.returncode == 4, p.stderr
    pid = int((tmp_path / "pid").read_text().split()[1])
    rec = jsprof.load(out)
    assert [t.meta["processExit"] for t in rec.tracks] == ["outlived"]
    assert rec.tracks[0].meta["pid"] == pid and rec.tracks[0].meta["exitCode"] == 4
    assert _samples_in(rec.tracks[0], "bgHot") >= 5
    with pytest.raises(ProcessLookupError):
        for _ in range(100):
            os.kill(pid, 0)
            time.sleep(0.05)


def test_nothing_outside_its_private_directory_is_read_or_removed(tmp_path, monkeypatch):
    """jsprof closes the hooks' directory by a rename: once to `<dir>.closed`, a sibling
    in /tmp that anyone who saw the name could make first. Then jsprof read the
    'announcements' in it (and connected to the inspector URLs they named) and removed it.
    Now the rename stays inside jsprof's own 0700 directory."""
    import socket
    import tempfile

    import jsprof.engines.node.command as command

    top = tmp_path / "jsprof-command-known"
    planted = tmp_path / "jsprof-command-known.closed"
    planted.mkdir()
    (planted / "precious").write_text("not jsprof's")
    lure = socket.socket()
    lure.bind(("127.0.0.1", 0))
    lure.listen(8)
    (planted / "1-1.json").write_text(
        f'{{"pid": 1, "url": "ws://127.0.0.1:{lure.getsockname()[1]}/planted"}}')

    def mkdtemp(prefix=None):
        top.mkdir(mode=0o700)
        return str(top)

    monkeypatch.setattr(tempfile, "mkdtemp", mkdtemp)
    try:
        rec, _ = command.record_command(["node", "-e", (_HOT % "ownHot") + "ownHot(50);"])
        assert _samples_in(rec.tracks[0], "ownHot") >= 1
        lure.setblocking(False)
        with pytest.raises(BlockingIOError):
            lure.accept()[0].close()  # no connection to the URL it named
    finally:
        lure.close()
    assert (planted / "precious").read_text() == "not jsprof's"
    assert not top.exists()


def test_hooks_stay_commonjs_in_an_esm_project(tmp_path):
    """jsprof installed in a venv inside a project whose package.json says "type":
    "module" (a common layout): Node took jsprof's .js hooks for ES modules ('require is
    not defined in ES module scope') and every Node process of the command crashed, as did
    `record --engine node` and `run`. The hooks' folder says it is CommonJS. The package's
    js/ folder is copied as installed under such a project and each hook is preloaded."""
    import importlib.resources

    from jsprof.engines.node.command import ANNOUNCE_ENV, _node_options

    proj = tmp_path / "proj"
    js = proj / ".venv" / "lib" / "site-packages" / "jsprof" / "js"
    shutil.copytree(Path(str(importlib.resources.files("jsprof") / "js")), js)
    (proj / "package.json").write_text('{"name": "esm-app", "type": "module"}\n')
    (proj / "app.js").write_text("import { sep } from 'node:path';\nconsole.log(6 * 7, sep);\n")
    env = dict(os.environ, **{ANNOUNCE_ENV: str(tmp_path / "gone")})
    env["NODE_OPTIONS"] = _node_options(None, str(js / "node_command_hook.js"))
    p = subprocess.run(["node", "app.js"], env=env, cwd=proj, capture_output=True, text=True,
                       timeout=60)
    assert (p.returncode, p.stdout, p.stderr) == (0, "42 /\n", ""), p.stderr
    # run's preload (the Profiler global) likewise
    p = subprocess.run(["node", "--require", str(js / "node_profiler.js"), "-e",
                        "console.log(typeof Profiler)"], cwd=proj, capture_output=True,
                       text=True, timeout=60)
    assert (p.returncode, p.stdout.strip()) == (0, "function"), p.stderr


def test_a_process_jsprof_failed_to_profile_runs_on(tmp_path, monkeypatch):
    """jsprof connected to a process's inspector but could not start its profiler (a
    fault injected where the profiler starts): the process's hook was left waiting for
    jsprof's go, so the command never ended (until --duration or Ctrl-C). Now jsprof lets
    it go: it runs unprofiled, the failure said."""
    import jsprof.engines.node.command as command
    from jsprof.engines.node.isolate import _Isolate
    from jsprof.errors import EngineError

    def fail(self, us, reoptimize=False):
        raise EngineError("injected: the profiler did not start")

    monkeypatch.setattr(_Isolate, "start", fail)
    ran = tmp_path / "ran"
    code = f"require('node:fs').writeFileSync({str(ran)!r}, 'ran');"
    # (--duration only so that a hung command ends: then its process never ran)
    with pytest.raises(EngineError, match="nothing was recorded"):
        command.record_command(["node", "-e", code], duration=60)
    assert ran.read_text() == "ran"


def test_a_process_with_its_own_inspector_runs_as_it_would(tmp_path):
    """A program run with its own --inspect keeps its inspector (jsprof's hook steps
    aside), runs unprofiled, and jsprof's one line says why nothing was recorded."""
    out = tmp_path / "out"
    code = f"require('node:fs').writeFileSync({str(out)!r}, String(!!require('inspector').url()))"
    p = _run("record", "--engine", "node", "-o", tmp_path / "o.json", "--", "node",
             "--inspect=127.0.0.1:0", "-e", code, cwd=tmp_path)
    assert out.read_text() == "true"  # its own inspector, open
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "opens its own inspector: --inspect" in lines[0], p.stderr
    assert not (tmp_path / "o.json").exists()


LISTS = r"""
const inspector = require('node:inspector');
const http = require('node:http');
const url = inspector.url();
const id = url.slice(url.lastIndexOf('/') + 1);
http.get({ host: '127.0.0.1', port: new URL(url).port, path: '/json/list' }, (r) => {
  let body = '';
  r.on('data', (c) => { body += c; });
  r.on('end', () => console.log('listed', r.statusCode, body.includes(id)));
});
"""


def test_no_process_lists_its_inspector_id_over_http(tmp_path):
    # The inspector's id is what lets a client in: any local user can ask a loopback port's
    # /json/list, so the hook's inspector publishes the id nowhere (jsprof reads it from its
    # private directory). With --inspect-publish-uid=http the id was listed (200, true).
    app = tmp_path / "lists.js"
    app.write_text(LISTS)
    p = _run("record", "--engine", "node", "-o", tmp_path / "o.json", "--", "node", app,
             cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "listed 404 false" in p.stdout, p.stdout
    assert jsprof.load(tmp_path / "o.json").tracks, "the process was still profiled"


def test_one_process_of_two_command_recordings_by_its_script(tmp_path):
    """A command's process tracks are `pid PID SCRIPT`, and the pid is new on every run:
    `--track` took only a name or its start, so the one process a user compares across two
    recordings of `npm run build` could not be named in both (`diff --track 'pid 27822'`:
    no such track in the other file). Its script, or the script's file name, names it in
    each. Real acorn (tests/js/node_modules) parsing its own source, run by a shell
    command beside a `node -e`, recorded twice."""
    acorn = JS / "node_modules" / "acorn"
    if not (acorn / "bin" / "acorn").is_file():
        pytest.fail("tests/js/node_modules lacks acorn; run `make test` (npm ci there)")
    cmd = (f"node {acorn / 'bin' / 'acorn'} --ecma2022 --silent {acorn / 'dist' / 'acorn.js'}"
           " && node -e 0")
    outs = [tmp_path / f"run{i}.jsprof.json" for i in (1, 2)]
    for out in outs:
        p = _run("record", "--engine", "node", "-o", out, "--", "sh", "-c", cmd)
        assert p.returncode == 0, p.stderr
    pids = [next(t.name for t in jsprof.load(out).tracks if t.name.endswith("/acorn"))
            for out in outs]
    assert pids[0] != pids[1], pids  # two runs, two pids: the name alone does not match
    # the file name, and the script as the track names it (relative to the working folder)
    for name in ("acorn", pids[0].split(" ", 2)[2]):
        p = _run("diff", *outs, "--track", name, "--json")
        assert p.returncode == 0, p.stderr
        # the acorn process alone, on both sides: acorn's parser, no `node -e`
        rows = json.loads(p.stdout)["rows"]
        parser = [r for r in rows if str(r["resource"]).endswith("acorn/dist/acorn.js")]
        assert len(parser) >= 5 and all(r["status"] != "new" for r in parser[:5]), rows[:5]
        p = _run("report", outs[0], "--track", name, "--json")
        assert p.returncode == 0, p.stderr
    p = _run("report", outs[0], "--track", "no-such-script")
    assert p.returncode == 2 and "no track named 'no-such-script'" in p.stderr, p.stderr
