"""The Node engine on real Node.js: V8's profiler through the inspector."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import jsprof
from jsprof.cli import main
from jsprof.engines.node import attach_node, record_node
from jsprof.engines.node.attach import _listening_ports
from jsprof.errors import EngineError, UsageError
from jsprof.formats import cpuprofile as cp
from jsprof.formats import read_any
from jsprof.trace import ProfilerFrame, ProfilerTrace, lost_ms, sample_weights


@pytest.fixture(autouse=True)
def _node_is_required() -> None:
    # Node 20 is part of the machine; a missing node must fail loudly, never skip.
    if shutil.which("node") is None:
        pytest.fail("node is not installed; these tests need Node.js 20")


JS = Path(__file__).parent / "data" / "nodejs"


def _inclusive_share(trace: ProfilerTrace, names: tuple[str, ...],
                     interval: float | None = None) -> dict[str, float]:
    """Each name's share of the time on stacks through it, weighed as `report` weighs
    samples (the gap to the next: V8 loses the ticks due while Node is descheduled, and a
    count then follows how much of each function's wall time the machine's load let it run)."""
    frame_names = [f.name for f in trace.frames]
    counts = dict.fromkeys(names, 0.0)
    weights = sample_weights(trace, interval).tolist()
    for s, w in zip(trace.sample_stack.tolist(), weights, strict=True):
        if s < 0:
            continue
        on = {frame_names[f] for f in trace.stack_frames(s)}
        for n in names:
            if n in on:
                counts[n] += w
    total = sum(counts.values())
    return {n: 100.0 * c / total for n, c in counts.items()}


def _script_frames(trace: ProfilerTrace, script: str) -> set[ProfilerFrame]:
    return {
        f
        for f in trace.frames
        if f.resource_id is not None and trace.resources[f.resource_id].endswith(script)
    }


@contextlib.contextmanager
def _node_to_attach(script: str) -> Iterator[subprocess.Popen]:
    """`node tests/js/SCRIPT` in a session of its own, once it printed "ready"; its
    inspector closed until SIGUSR1 opens it on a free loopback port (--inspect-port
    127.0.0.1:0: no fixed 9229 to collide with). Its process group is killed at the end."""
    p = subprocess.Popen(
        ["node", "--inspect-port=127.0.0.1:0", str(JS / script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        yield p
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


# Not under_load (make test-load): beside 6 busy loops V8's sampler falls behind (279-1,198
# ms of gaps over 2 ms in a 1.3-2.1 s recording) and misplaces tens of ms between the three
# functions (off their own timed ms by up to 70 ms each): the nominal split failed in 10 of
# 16 recordings, each function's timed ms in 15 of 16. An accuracy test needs a sampler that
# keeps up.
def test_known_split_within_3_points():
    # Busy loops timed by the wall clock: on a loaded 2-core machine a burst of
    # descheduling can skew one run, so one retry is allowed (both runs are reported).
    # The calls are 10-25 ms: a gap between two samples longer than two intervals (V8's
    # sampler or Node descheduled) is time whose function nobody knows, charged whole to
    # the sample before it. That time, as the recording shows it, widens the 3 points
    # (0 on a quiet machine; beside busy loops V8 missed 3 points in 10 of 16 runs).
    shares = []
    for _ in range(2):
        rec = record_node(JS / "split.js", sample_interval=1.0)
        main_track = rec.tracks[0]
        assert main_track.engine == "node" and main_track.sample_interval == 1.0
        tr, interval = main_track.trace, main_track.sample_interval
        share = _inclusive_share(tr, ("fifty", "thirty", "twenty"), interval)
        w = sample_weights(tr, interval)
        unknown = float(np.clip(w - 2 * interval, 0, None).sum()) + lost_ms(tr, interval)
        tol = 3 + 100 * unknown / float(w.sum() + lost_ms(tr, interval))
        shares.append((share, round(tol, 1)))
        if all(abs(share[n] - v) <= tol for n, v in (("fifty", 50), ("thirty", 30),
                                                        ("twenty", 20))):
            return
    pytest.fail(f"split off by more than the tolerance: {shares}")


def test_names_lines_columns_as_v8_reports_them():
    rec = record_node(JS / "names.js", sample_interval=0.2)
    trace = rec.tracks[0].trace
    url = (JS / "names.js").resolve().as_uri()
    assert url in trace.resources
    rid = trace.resources.index(url)
    got = {(f.name, f.line, f.column) for f in _script_frames(trace, "names.js")}
    assert all(f.resource_id == rid for f in _script_frames(trace, "names.js"))
    # 1-based; the column of the `(` opening the parameters (an arrow: its first character).
    assert {
        ("", 1, 1),  # top-level script code
        ("declared", 1, 18),
        ("arrow", 2, 15),
        ("area", 4, 7),
        ("get size", 5, 11),
        ("busy", 7, 14),
        ("", 9, 11),
        ("", 10, 11),
    } <= got
    # Time origin: Unix epoch ms; samples are on the performance.now() clock of the script.
    t = rec.tracks[0]
    assert t.time_origin > 1.5e12
    assert 0 < trace.sample_time[0] < 5000
    # Node's own code is there, and --hide-internal can drop it.
    assert any(r.startswith("node:internal/") for r in trace.resources)


@pytest.mark.parametrize(
    "how,exit_,code",
    [("normal", "ok", 0), ("throw", "error", 1), ("exit", "error", 3)],
)
# Not under_load yet: beside 6 busy loops at load 38-41, V8 took fewer than 20 samples of the
# 200 ms in 1-4 of 15 recordings (12; once 5 samples over 60 ms), its weights as short (40
# ms of `work`); the recording's medianIntervalMs (up to 5 ms) does not explain them all.
def test_each_ending_yields_the_trace(how, exit_, code, capfd):
    rec = record_node(JS / "ending.js", args=[how], sample_interval=1.0)
    t = rec.tracks[0]
    assert t.meta["exit"] == exit_ and t.meta["exitCode"] == code
    # The script's work is in it. (Not a sample count: V8's sampler is on the wall clock,
    # and beside busy loops it took 5 samples of the 200 ms once; that slices join into
    # the whole run is test_slices_joined_as_columns_keep_every_sample_and_its_stack's.)
    assert any(f.name == "work" for f in _script_frames(t.trace, "ending.js"))
    err = capfd.readouterr().err
    # The inspector's own chatter is not passed on; the script's stderr is.
    assert "Debugger" not in err
    if how == "throw":
        assert "boom from ending.js" in t.meta["error"]
        assert "boom from ending.js" in err


@pytest.mark.under_load
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_stops_the_profiler_then_node(tmp_path, sig):
    out = tmp_path / "out.jsprof.json"
    code = (
        "import sys; from jsprof.engines.node import record_node; import jsprof\n"
        f"rec = record_node({str(JS / 'ending.js')!r}, args=['forever'])\n"
        f"jsprof.save(rec, {str(out)!r})\n"
        "print(rec.tracks[0].meta['exit'], rec.tracks[0].meta['nodePid'])\n"
    )
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    # Python's start-up on a loaded machine can take longer than any fixed sleep: wait for
    # Node to exist (jsprof's handlers are in place by then), then for Node to have run 0.8 s
    # of CPU (start-up ~0.1 s, then the script's loop): 1.5 s of sleep once passed with Node
    # hardly running, and the trace rightly held 0 samples (CI, 2 pytest workers).
    deadline = time.monotonic() + 60
    while not _children_of(p.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    while time.monotonic() < deadline and max(
            (_cpu_seconds(c) for c in _children_of(p.pid)), default=0.0) < 0.8:
        time.sleep(0.05)
    p.send_signal(sig)
    stdout, _ = p.communicate(timeout=30)
    assert p.returncode == 0, stdout
    how, pid = stdout.split()
    assert how == "interrupted"
    assert not _alive(int(pid))
    rec = jsprof.load(out)
    assert rec.tracks[0].trace.num_samples >= 50  # ~1.4 s at 1 ms; fewer on a loaded machine


def test_worker_thread_is_its_own_track():
    rec = record_node(JS / "worker.js", sample_interval=1.0)
    names = [t.name for t in rec.tracks]
    assert names == ["main", "worker 1"], names
    main_t, worker_t = rec.tracks
    main_fns = {f.name for f in _script_frames(main_t.trace, "worker.js")}
    worker_fns = {f.name for f in _script_frames(worker_t.trace, "worker.js")}
    assert "mainWork" in main_fns and "workerWork" not in main_fns
    assert "workerWork" in worker_fns and "mainWork" not in worker_fns
    share = _inclusive_share(worker_t.trace, ("workerWork",))
    assert share["workerWork"] == 100.0
    # Sampled through its whole spin (300 ms of Date.now): the workerWork samples span it
    # but for a gap at each end, the largest the recording has (a count, `>= 50`, failed
    # with 48 at load 17-26: how many ticks V8's sampler got in 300 ms is the machine's).
    wt = worker_t.trace
    frame_names = [f.name for f in wt.frames]
    times = [t for s, t in zip(wt.sample_stack.tolist(), wt.sample_time.tolist(), strict=True)
             if s >= 0 and "workerWork" in {frame_names[f] for f in wt.stack_frames(s)}]
    gaps = np.diff(wt.sample_time).tolist()
    assert times[-1] - times[0] >= 300 - 2 * max(gaps), (times[0], times[-1], max(gaps))
    assert worker_t.time_origin > 1.5e12


def test_a_worker_that_takes_the_go_before_it_waits_still_ends(monkeypatch):
    """The worker's exit hook says "take my profile" and then waits for jsprof's go. V8
    serves the stop and the go by interrupts while JavaScript runs: a go served before the
    hook waits is forgotten, and the program waited for ever (seen in CI). Here the hook
    spins 3 s before it waits, so the stop (~0.5 s) and the first go are served in the spin;
    jsprof says go again until the worker is gone. Before: the recording ran into its 60 s
    limit ("duration")."""
    from jsprof.engines.node import record as node_record

    hook = node_record._WORKER_EXIT_HOOK
    wait = "req('inspector').waitForDebugger();"
    assert wait in hook
    spin = "{ const end = Date.now() + 3000; while (Date.now() < end); } "
    monkeypatch.setattr(node_record, "_WORKER_EXIT_HOOK", hook.replace(wait, spin + wait))
    rec = record_node(JS / "worker.js", sample_interval=1.0, timeout=60)
    assert rec.tracks[0].meta["exit"] == "ok"
    assert [t.name for t in rec.tracks] == ["main", "worker 1"]
    # Both threads' work is there; the worker's was taken before its hook's spin.
    worker_fns = {f.name for f in _script_frames(rec.tracks[1].trace, "worker.js")}
    assert "workerWork" in worker_fns


def test_a_workers_wait_for_jsprof_is_not_its_cpu_time():
    # A worker waits in Node's callAndPauseOnStart while jsprof attaches; at 0.1 ms those
    # samples made tens of ms of self time. They and the wrapper frame go; its work stays.
    rec = record_node(JS / "worker.js", sample_interval=0.1)
    assert [t.name for t in rec.tracks] == ["main", "worker 1"]
    for t in rec.tracks:
        names = {f.name for f in t.trace.frames}
        assert "callAndPauseOnStart" not in names, t.name
    worker_t = rec.tracks[1]
    assert "workerWork" in {f.name for f in _script_frames(worker_t.trace, "worker.js")}
    # The worker's own start (Node's bootstrap of the thread, before the script) is kept.
    starts = {
        worker_t.trace.resources[f.resource_id]
        for f in worker_t.trace.frames
        if f.resource_id is not None
    }
    assert "node:internal/main/worker_thread" in starts, starts


def test_jsprofs_own_code_is_not_in_any_thread():
    # jsprof runs code of its own in each thread: the slices' console.profile bridge (10 ms
    # of a 1 s main thread at 0.1 ms, measured) and a worker's exit hook, which waits while
    # jsprof takes the profile (16 ms). Both were the script's self time, as a url-less
    # "(anonymous line 1)" and "jsprofWorkerExit". Every frame of the script and of Node has
    # a URL; only natives ((program), MessageChannel, ...) have neither URL nor line.
    rec = record_node(JS / "worker.js", sample_interval=0.1)
    assert [t.name for t in rec.tracks] == ["main", "worker 1"]
    for t in rec.tracks:
        ours = [
            (f.name, f.line, f.column)
            for f in t.trace.frames
            if f.name == "jsprofWorkerExit"
            or (f.resource_id is None and f.line is not None)
            or (
                f.resource_id is not None and t.trace.resources[f.resource_id].startswith("jsprof:")
            )
        ]
        assert ours == [], (t.name, ours)
    assert "workerWork" in {f.name for f in _script_frames(rec.tracks[1].trace, "worker.js")}


def test_every_expression_jsprof_evaluates_while_profiling_is_hidden(monkeypatch):
    # The test above sees jsprof's code only when a sample happens to fall in it: in one CI
    # run a worker's console.profile lookup (evaluated after its profiler started) was 2
    # url-less frames of the worker's profile. Here every expression or function jsprof
    # sends to a thread whose profiler was started must name a source URL whose samples
    # are dropped, whether or not a sample fell in it this time.
    from jsprof.engines.cdp import Session
    from jsprof.engines.node.isolate import BRIDGE_URL, INTERNAL_URL
    from jsprof.engines.node.record import _WORKER_EXIT_URL

    hidden = {BRIDGE_URL, INTERNAL_URL, _WORKER_EXIT_URL}
    sent: list[tuple[int, str, dict]] = []
    real = Session.send_nowait

    def spy(self, method, params=None, reply=True):
        sent.append((id(self), method, params or {}))
        return real(self, method, params, reply)

    monkeypatch.setattr(Session, "send_nowait", spy)
    rec = record_node(JS / "worker.js", sample_interval=0.1)
    assert [t.name for t in rec.tracks] == ["main", "worker 1"]
    started: set[int] = set()
    seen = 0
    for who, method, params in sent:
        if method == "Profiler.start":
            started.add(who)
        elif who in started and method in ("Runtime.evaluate", "Runtime.callFunctionOn"):
            text = params.get("expression") or params.get("functionDeclaration") or ""
            urls = [line.split("=", 1)[1] for line in text.splitlines()
                    if line.startswith("//# sourceURL=")]
            assert urls and urls[-1] in hidden, (method, text[:200])
            seen += 1
    # both threads' slices (the bridge) and the worker's console lookup and exit hook
    assert len(started) == 2 and seen >= 4, (started, seen)


@pytest.mark.under_load
def test_attach_by_pid_then_close_the_inspector():
    # --inspect-port=127.0.0.1:0: SIGUSR1 opens the inspector on a random loopback port
    # (no fixed 9229 to collide with); jsprof finds it in /proc. Afterwards no port is
    # left open and the process lives on: Node 20 died of SIGSEGV when its inspector was
    # closed while our session was still connected (2 of 12 runs under load).
    with _node_to_attach("server.js") as p:
        # Let V8 optimise `tick` first: its frame must survive an attach all the same.
        time.sleep(2.0)
        assert _listening_ports(p.pid) == set()
        rec = attach_node(p.pid, duration=1.0, sample_interval=1.0)
        t = rec.tracks[0]
        assert t.meta["pid"] == p.pid and t.meta["exit"] == "duration"
        assert any(f.name == "tick" for f in _script_frames(t.trace, "server.js"))
        # Sampled through the 1 s attach: its samples span it but for a gap at each end,
        # the largest the recording has. Not `>= 50`: how many ticks V8's sampler gets in
        # 1 s is the machine's (195-535 beside 6 busy loops at load 15, gaps up to 366 ms).
        st = t.trace.sample_time
        worst = float(np.diff(st).max()) if len(st) > 1 else 0.0
        span = float(st[-1] - st[0]) if len(st) else 0.0
        assert len(st) >= 2 and span >= 1000 - 2 * worst - 2, (len(st), span, worst)
        deadline = time.monotonic() + 10
        while _listening_ports(p.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _listening_ports(p.pid) == set(), "the inspector is still open"
        time.sleep(1.0)
        assert p.poll() is None, f"the process did not keep running ({p.returncode})"


def test_attach_refuses_a_missing_process():
    with pytest.raises(UsageError, match="no such process"):
        attach_node(2**22 + 12345, duration=0.1)


def test_attach_refuses_a_process_that_is_not_node_and_leaves_it_alone():
    # SIGUSR1 ends a `sleep` (it once killed one): nothing may be sent to a non-Node process.
    p = subprocess.Popen(["sleep", "30"])
    try:
        r = subprocess.run(
            [sys.executable, "-m", "jsprof.cli", "record", "--pid", str(p.pid), "--duration", "1"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert r.returncode == 2, r.stderr
        assert r.stderr.count("\n") == 1 and "not Node.js" in r.stderr, r.stderr
        time.sleep(0.3)
        assert p.poll() is None, "the sleep was harmed"
    finally:
        p.kill()
        p.wait()


def test_node_trace_round_trips_through_cpuprofile(tmp_path):
    rec = record_node(JS / "split.js", sample_interval=1.0)
    t = rec.tracks[0].trace
    data = cp.write(jsprof.Recording([rec.tracks[0]]))
    back = read_any(data, "x.cpuprofile").tracks[0].trace
    assert back.frames == t.frames and back.resources == t.resources
    assert np.array_equal(back.sample_stack, t.sample_stack)
    assert np.array_equal(back.stack_parent, t.stack_parent)
    assert np.allclose(back.sample_time, t.sample_time, atol=1e-3)


def test_hide_internal_on_a_node_recording(tmp_path, capsys):
    rec = record_node(JS / "names.js", sample_interval=1.0)
    path = tmp_path / "n.jsprof.json"
    jsprof.save(rec, path)
    assert main(["report", str(path), "--hide-internal", "--all", "--json"]) == 0
    out = capsys.readouterr().out
    assert "node:internal" not in out and "declared" in out


def test_python_api_record_engine_node(tmp_path):
    from jsprof.errors import JSError
    from jsprof.record import record

    out = tmp_path / "split.jsprof.json"
    rec = record(JS / "split.js", engine="node", sample_interval=0.5, output=out)
    assert rec.tracks[0].engine == "node" and rec.tracks[0].sample_interval == 0.5
    assert jsprof.load(out).tracks[0].trace.num_samples == rec.tracks[0].trace.num_samples
    # A script that throws: saved first, then the JSError carries the recording.
    with pytest.raises(JSError, match="boom from ending.js") as e:
        record(JS / "ending.js", engine="node", args=["throw"], output=tmp_path / "t.json")
    assert e.value.recording.tracks[0].trace.num_samples > 0  # type: ignore[attr-defined]
    assert (tmp_path / "t.json").exists()


def _cpu_seconds(pid: int) -> float:
    """user + system CPU time the process has run, 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children_of(pid: int) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(d))
    return out


def _record_and_kill(after: float, ran: float = 0.0) -> dict:
    """record_node of ending.js killed `after` s from Node's start, and once Node has run
    `ran` s of CPU: a stretch of wall-clock time can pass with Node hardly running."""
    import threading

    box: dict = {}

    def go() -> None:
        try:
            box["rec"] = record_node(JS / "ending.js", args=["forever"])
        except EngineError as e:
            box["err"] = e

    def kids() -> list[int]:
        out = []
        for k in _children_of(os.getpid()):
            try:
                if "ending.js" in Path(f"/proc/{k}/cmdline").read_text():
                    out.append(k)
            except OSError:
                pass  # another test's child, gone meanwhile
        return out

    th = threading.Thread(target=go)
    th.start()
    # `after` counts from Node's start, not the thread's: at load 10-15 jsprof had not
    # started Node 0.3 s after the thread (CI: no child to kill)
    deadline = time.monotonic() + 60
    while not kids() and th.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(after)
    while time.monotonic() < deadline and max(map(_cpu_seconds, kids()), default=0.0) < ran:
        time.sleep(0.05)
    found = kids()
    assert len(found) == 1, (found, box)
    os.kill(found[0], signal.SIGKILL)
    th.join(30)
    assert not th.is_alive()
    return box


def test_node_killed_from_outside_keeps_the_slices():
    # 0.8 s of Node's CPU at least (2.6 s of sleep is ~2.5 s of it on a quiet machine):
    # samples kept then are V8's of its running, not of the machine's load
    box = _record_and_kill(2.6, ran=0.8)
    rec = box.get("rec")
    assert rec is not None, box
    t = rec.tracks[0]
    assert t.meta["exit"] == "killed" and t.meta["signal"] == "SIGKILL"
    assert "slice" in t.meta["partial"]
    assert t.trace.num_samples >= 50
    assert any(f.name == "work" for f in _script_frames(t.trace, "ending.js"))
    assert np.all(np.diff(t.trace.sample_time) >= -0.2)


def test_node_killed_at_start_is_reported_not_hung():
    # Killed 0.3 s after it was started: before its inspector opened on a slow machine
    # (then an error naming the signal), or after the first slices (then those are kept).
    box = _record_and_kill(0.3)
    if "rec" in box:
        assert "last slice" in box["rec"].tracks[0].meta["partial"]
        return
    assert "SIGKILL" in str(box.get("err")), box


def test_console_output_is_not_a_protocol_message(capfd, monkeypatch):
    # With Runtime.enable every console call of the script became a protocol message to
    # jsprof (a logging loop ran ~14x slower). Checked directly: what jsprof asks Node for
    # and how many messages it reads while 20,000 lines are logged. (The loop's speed, a
    # timing, is benchmarks/bench_node_console.py's.)
    from jsprof.engines.cdp import CDPClient

    sent: list[str] = []
    read = [0]
    send, recv = CDPClient._send, CDPClient._recv

    def spy_send(self: CDPClient, msg: dict) -> None:
        sent.append(str(msg.get("method")))
        send(self, msg)

    def spy_recv(self: CDPClient, timeout: float) -> bytes:
        raw = recv(self, timeout)
        read[0] += 1
        return raw

    monkeypatch.setattr(CDPClient, "_send", spy_send)
    monkeypatch.setattr(CDPClient, "_recv", spy_recv)
    rec = record_node(JS / "logs.js")
    out = capfd.readouterr().out
    assert rec.tracks[0].meta["exit"] == "ok"
    assert out.count("\n") == 20000 and out.startswith("line 0 { a: 0 }\n")  # passed on
    assert "Profiler.start" in sent  # the spies saw jsprof's traffic
    # Replies and the slices' few events: some tens; one per console call would be 20,000.
    assert read[0] < 1000, (read[0], sent)
    assert "Runtime.enable" not in sent, sent


def test_no_node_left_behind_when_jsprof_is_killed():
    code = (
        "from jsprof.engines.node import record_node\n"
        f"record_node({str(JS / 'ending.js')!r}, args=['forever'])\n"
    )
    p = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 10
        kids: list[int] = []
        while not kids and time.monotonic() < deadline:
            time.sleep(0.1)
            kids = _children_of(p.pid)
        assert kids, "node did not start"
        p.kill()  # SIGKILL: no cleanup code of ours runs
        p.wait()
        deadline = time.monotonic() + 5
        while any(_alive(k) for k in kids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(_alive(k) for k in kids)
    finally:
        if p.poll() is None:
            p.kill()


def test_attach_to_a_process_that_exits_while_watched():
    with _node_to_attach("server_exits.js") as p:
        rec = attach_node(p.pid, duration=None, sample_interval=1.0)
        t = rec.tracks[0]
        assert t.meta["exit"] == "exited" and "partial" not in t.meta
        assert any(f.name == "tick" for f in _script_frames(t.trace, "server_exits.js"))
        # It waited for us to disconnect, then ended as it meant to.
        assert p.wait(5) == 0


def test_a_workers_own_worker_is_a_track_too():
    # Node 20 reports a worker's own worker on the main session (a worker's session has no
    # NodeWorker domain): three threads, three tracks, each with only its own function.
    rec = record_node(JS / "nested_worker.js", sample_interval=1.0)
    assert [t.name for t in rec.tracks][0] == "main" and len(rec.tracks) == 3, rec.tracks
    levels = {"level0", "level1", "level2"}
    for i, t in enumerate(rec.tracks):
        fns = {f.name for f in _script_frames(t.trace, "nested_worker.js")} & levels
        assert fns == {f"level{i}"}, (t.name, fns)


def test_a_script_that_forks_runs_its_children_unprofiled_and_says_so(tmp_path):
    # The children once inherited --inspect-brk and waited for a debugger forever.
    out = tmp_path / "o.jsprof.json"
    p = subprocess.run(
        [sys.executable, "-m", "jsprof.cli", "record", "--engine", "node", "-o", str(out),
         str(JS / "forks.js")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    # process.execArgv as without jsprof, in the parent and in both children.
    assert p.stdout.splitlines() == ["parent []", "child []", "child []", "exits 0 0"], p.stdout
    assert "child processes" in p.stderr
    t = jsprof.load(out).tracks[0]
    assert "not profiled" in t.meta["childProcesses"]
    names = {f.name for f in t.trace.frames}
    assert "parentWork" in names
    # No inspector artefact between Node's loader and the script, nor jsprof's preload.
    assert "callAndPauseOnStart" not in names and "waitForDebugger" not in names
    assert not any("node_record_hook" in r for r in t.trace.resources)


@pytest.mark.under_load
def test_manager_end_from_another_thread_while_an_eval_waits():
    # One CDP connection, two threads: the eval's thread waits for its reply while the
    # main thread ends the recording (Profiler.stop on the same socket).
    import threading

    from jsprof.engines.node import NodeRuntime
    from jsprof.manager import ProfilerManager

    with NodeRuntime() as node:
        m = ProfilerManager()
        m.add(node.profiler(), name="node")
        m.setup(1.0)
        m.begin()
        box: dict = {}

        def run() -> None:
            try:
                box["value"] = node.eval(
                    "(() => { function busy() { const end = Date.now() + 1500; let x = 0;"
                    " while (Date.now() < end) x++; return 7; } return busy(); })()"
                )
            except BaseException as e:  # noqa: BLE001 - reported below
                box["error"] = e

        th = threading.Thread(target=run)
        th.start()
        time.sleep(0.5)
        rec = m.end()
        th.join(30)
        assert box == {"value": 7}, box
        t = rec.tracks[0]
        # Sampled through busy to the end: its samples span the 0.5 s the end came after
        # the eval's thread started, less a gap at each end, the largest between them
        # (Node answers the stop once busy returns: spans of 1460-1500 ms beside 6 busy
        # loops), and reach the recording's last sample but for that gap. Not `>= 20`:
        # how many ticks V8's sampler gets in 0.5 s of wall clock is the machine's.
        names = [f.name for f in t.trace.frames]
        on_busy = np.array(
            [
                s >= 0 and "busy" in {names[f] for f in t.trace.stack_frames(s)}
                for s in t.trace.sample_stack.tolist()
            ],
            dtype=bool,
        )
        st = t.trace.sample_time
        bt = st[on_busy]
        worst = float(np.diff(bt).max()) if len(bt) > 1 else 0.0
        span = float(bt[-1] - bt[0]) if len(bt) else 0.0
        assert len(bt) >= 2 and span >= 500 - 2 * worst - 2, (len(bt), span, worst)
        assert st[-1] - bt[-1] <= worst + 2, (float(st[-1]), float(bt[-1]), worst)
        # The runtime still answers afterwards.
        assert node.eval("1 + 1") == 2


_PRELOAD_FNS = {"loadPreloadModules", "Module._preloadModules"}


def test_jsprofs_own_preload_never_lands_in_the_profile():
    # Issue 20: the loader's return from jsprof's --require hook (and the frames of the
    # path to its wait) stayed in the profile: `prepareMainThreadExecution ->
    # loadPreloadModules -> Module._preloadModules`, once 23 ms of a 170 ms script. Many
    # short recordings at V8's finest interval, where the few samples there show most.
    # A recording with no stack at all (V8's sampler thread got no core while the script
    # ran: once in CI beside a second pytest worker) says nothing either way, so it is made
    # again; ten that sampled the script must each be free of the preload's frames.
    sampled, empty = 0, 0
    while sampled < 10:
        t = record_node(JS / "short.js", sample_interval=0.1).tracks[0]
        names = {f.name for f in t.trace.frames}
        assert not names & _PRELOAD_FNS, (sampled, names & _PRELOAD_FNS)
        assert not any("node_record_hook" in r for r in t.trace.resources), t.trace.resources
        if not names:
            empty += 1
            assert empty <= 5, f"{empty} recordings of short.js kept no stack at all"
            continue
        assert "shortWork" in names and "executeUserEntryPoint" in names, (sampled, names)
        sampled += 1


def test_a_users_own_preload_stays_in_the_profile():
    # What jsprof drops is its own preload only: a --require of the user's is the script's
    # start-up and keeps its time (40 ms busy), under Node's preload path.
    rec = record_node(
        JS / "short.js",
        sample_interval=0.5,
        node_args=["--require", str(JS / "user_preload.js")],
    )
    t = rec.tracks[0]
    tr = t.trace
    names = [f.name for f in tr.frames]
    w = jsprof.trace.sample_weights(tr)
    under = 0.0
    for s, ms in zip(tr.sample_stack.tolist(), w.tolist(), strict=True):
        if s >= 0 and "preloadWork" in {names[f] for f in tr.stack_frames(s)}:
            assert "Module._preloadModules" in {names[f] for f in tr.stack_frames(s)}
            under += ms
    # (Loosely: a starved sampler on a loaded machine spaces its ticks; dropped, it is 0.)
    assert under >= 10.0, under
    assert "shortWork" in names


def test_drop_preload_keeps_every_other_sample_and_its_time():
    # The rule on a small CDP profile: before the go instant (the preload's wait), and the
    # loader's return just after it, are dropped; the rest keep their timestamps, so no
    # kept sample takes the dropped time; unsampled nodes are no frames of the trace.
    from jsprof.engines._v8slices import drop_preload, join_slices

    def node(i, name, url="", kids=()):
        return {"id": i, "callFrame": {"functionName": name, "url": url}, "children": list(kids)}

    nodes = [
        node(1, "(root)", kids=[2, 7, 8]),
        node(2, "prepareMainThreadExecution", "node:internal/process/pre_execution", [3]),
        node(3, "loadPreloadModules", "node:internal/process/pre_execution", [4]),
        node(4, "Module._preloadModules", "node:internal/modules/cjs/loader", [5]),
        node(5, "", "file:///x/node_record_hook.js", [6]),
        node(6, "waitForDebugger", "", []),
        node(7, "work", "file:///x/app.js", []),
        node(8, "(program)", "", []),
    ]
    profile = {
        "nodes": nodes,
        "startTime": 1000,
        # 1000 wait, 1100 wait, [go 1150] 1200 loader return, 1250 program, 1300 work,
        # 1400 loader again (not leading: kept), 1500 work
        "samples": [6, 6, 4, 8, 7, 4, 7],
        "timeDeltas": [0, 100, 100, 50, 50, 100, 100],
    }
    tp = join_slices([profile], "t.cpuprofile")
    drop_preload(tp, 1150.0)
    assert tp.ts.tolist() == [1250, 1300, 1400, 1500]
    assert tp.node.tolist() == [7, 6, 3, 6]  # node indices: ids 8, 7, 4, 7
    trace = tp.to_trace(1000.0)
    assert trace.sample_time.tolist() == [0.25, 0.3, 0.4, 0.5]
    assert sorted(f.name for f in trace.frames) == [
        "Module._preloadModules", "loadPreloadModules", "prepareMainThreadExecution", "work"
    ]
    assert trace.sample_marker is not None and trace.sample_stack[0] == -1  # (program)


def _paths(trace: ProfilerTrace) -> list[tuple]:
    """Each sample as (time, marker, line, its stack's frames root first): what a trace
    says of a sample whatever its ids."""
    frames = trace.frames
    markers = trace.sample_marker
    lines = trace.sample_line
    out = []
    for i, s in enumerate(trace.sample_stack.tolist()):
        path = () if s < 0 else tuple(
            (frames[f].name, trace.resources[frames[f].resource_id]
             if frames[f].resource_id is not None else None, frames[f].line, frames[f].column)
            for f in reversed(trace.stack_frames(s))
        )
        out.append((
            float(trace.sample_time[i]),
            None if markers is None else int(markers[i]),
            None if lines is None else int(lines[i]),
            path,
        ))
    return out


def test_slices_joined_as_columns_keep_every_sample_and_its_stack(tmp_path):
    # record --engine node reads each slice of a thread's profile once into columns and
    # joins them there (each pass over a tsc profile's ~25,000 node dicts cost ms of every
    # recording's end; issue 32). On a real V8 profile (node --cpu-prof of split.js) cut in
    # three slices: every sample keeps its time, stack, marker and line, as the reader
    # gives them for the whole profile; jsprof's own code's samples go, and no frame is
    # left that only they had.
    import orjson

    from jsprof.engines._v8slices import join_slices

    subprocess.run(
        ["node", "--cpu-prof", "--cpu-prof-interval", "200", "--cpu-prof-dir", str(tmp_path),
         str(JS / "split.js")],
        check=True, capture_output=True, timeout=60,
    )
    (path,) = tmp_path.glob("*.cpuprofile")
    profile = orjson.loads(path.read_bytes())
    ts = np.cumsum(profile["timeDeltas"]) + profile["startTime"]
    assert len(ts) > 100
    # V8's ticks in time order, as a recording's slices are joined (each slice sorted, a
    # tick two slices hold kept once): here the profile's own, so nothing is dropped.
    order = np.argsort(ts, kind="stable")
    samples = np.asarray(profile["samples"])[order]
    ts = ts[order]
    unique = np.append(True, ts[1:] > ts[:-1])
    samples, ts = samples[unique], ts[unique]
    whole = dict(profile, samples=samples.tolist(),
                 timeDeltas=np.diff(ts, prepend=profile["startTime"]).tolist())
    cuts = [0, len(ts) // 3, 2 * len(ts) // 3, len(ts)]
    # Each slice's positionTicks are its own samples' (V8's, as each slice is a profile of
    # its own): a node's lines in sample order, cut where its samples are.
    lines_of = {
        n["id"]: [t["line"] for t in n.get("positionTicks") or () for _ in range(t["ticks"])]
        for n in profile["nodes"]
    }
    seen: dict[int, int] = {}

    def one_slice(a: int, b: int) -> dict:
        mine: dict[int, list[int]] = {}
        for nid in samples[a:b].tolist():
            i = seen.get(nid, 0)
            seen[nid] = i + 1
            if i < len(lines_of[nid]):
                mine.setdefault(nid, []).append(lines_of[nid][i])
        nodes = []
        for n in profile["nodes"]:
            n = {k: v for k, v in n.items() if k != "positionTicks"}
            got = mine.get(n["id"])
            if got:
                n["positionTicks"] = [{"line": ln, "ticks": 1} for ln in got]
            nodes.append(n)
        return dict(profile, nodes=nodes, startTime=int(ts[a]), samples=samples[a:b].tolist(),
                    timeDeltas=np.diff(ts[a:b], prepend=int(ts[a])).tolist())

    slices = [one_slice(a, b) for a, b in zip(cuts, cuts[1:], strict=False)]
    origin = float(profile["startTime"])
    expected, _ = cp.profile_to_trace(whole, "whole", origin_us=origin)
    joined = join_slices(slices, "slices").to_trace(origin)
    assert _paths(joined) == _paths(expected)

    # Without the samples in Node's modules that the script's frames are not called from
    # ("jsprof's own code" here): the others as they were, and no frame of those modules.
    parent = {c: n["id"] for n in profile["nodes"] for c in n.get("children") or ()}
    by_id = {n["id"]: n for n in profile["nodes"]}
    above = set()
    for n in profile["nodes"]:
        if n["callFrame"]["url"].endswith("split.js"):
            up = parent.get(n["id"])
            while up is not None:
                above.add(by_id[up]["callFrame"]["url"])
                up = parent.get(up)
    hidden = {
        n["callFrame"]["url"] for n in profile["nodes"]
        if n["callFrame"]["url"].startswith("node:") and n["callFrame"]["url"] not in above
    }
    kept = [p for p in _paths(expected) if not any(f[1] in hidden for f in p[3])]
    # (On a quiet machine some samples are in those modules; beside two busy loops V8 took
    # none there once: then the drop has nothing to drop, and the checks below still hold.)
    assert 0 < len(kept) <= len(ts)
    dropped = join_slices(slices, "slices", hidden).to_trace(origin)
    assert _paths(dropped) == kept
    assert not {dropped.resources[f.resource_id] for f in dropped.frames
                if f.resource_id is not None} & hidden
    # every stack is one a kept sample is at or under
    on_path = set()
    for s in dropped.sample_stack.tolist():
        while s >= 0 and s not in on_path:
            on_path.add(s)
            s = int(dropped.stack_parent[s])
    assert on_path == set(range(dropped.num_stacks))


def test_a_recording_reads_each_slice_once(monkeypatch):
    # The guard of the above: record_node reads each slice V8 sent once and no other node
    # list (before, five passes over the nodes as dicts: the drops, the join, the prune,
    # the conversion of the joined profile). The main thread's slices stay the inspector's
    # text until the track is made and are read there in C, with no dict per node (a tsc
    # run's 7 MB of slices: orjson's parse and the node columns read from its dicts cost
    # ~5x the C read; issue 32). split.js runs ~1.2 s: several slices (every quarter of
    # the run so far).
    from jsprof.engines._v8text import ProfileText
    from jsprof.engines.node.isolate import _Isolate
    from jsprof.formats import _columns, _v8profile

    read: list[int] = []
    as_dicts: list[int] = []
    sent: list[object] = []
    read_text = _columns.read_profile  # the C reader, whichever path calls it
    node_columns = _v8profile._node_columns
    track = _Isolate.track

    def counted(text, start):
        got = read_text(text, start)
        read.append(len(got[1]) if got is not None else -1)
        return got

    def counted_dicts(err, nodes):
        as_dicts.append(len(nodes))
        return node_columns(err, nodes)

    def spied(self, *args):
        sent.extend(self.profile or ())
        return track(self, *args)

    monkeypatch.setattr(_columns, "read_profile", counted)
    monkeypatch.setattr(_v8profile, "_node_columns", counted_dicts)
    monkeypatch.setattr(_Isolate, "track", spied)
    rec = record_node(JS / "split.js", sample_interval=1.0)
    assert len(sent) >= 3, sent
    assert all(isinstance(p, ProfileText) for p in sent), [type(p) for p in sent]
    assert len(read) == len(sent) and min(read) > 0, read  # each once, all by the C reader
    assert as_dicts == []
    names = {f.name for f in rec.tracks[0].trace.frames}
    assert {"fifty", "thirty", "twenty"} <= names


def test_the_recording_loop_wakes_for_messages_and_timers_not_on_a_short_poll(
    monkeypatch, tmp_path
):
    # The loop waited 20 ms at a time for the socket: 50 wakes a second with nothing to
    # do, each ~30-80 us of CPU at load (30 ms of a tsc run's 20 s at load 18; issue 32).
    # It now waits until its next timer (a slice, the --duration, a go to a hook), at most
    # _POLL. Counted on a script that sleeps 1.5 s: the wakes that read no message are at
    # most one per _POLL of the recording plus one per timer that ran (a slice taken, a go
    # said again to the hook while a loaded machine had not yet let it wait for it).
    from jsprof.engines.cdp import CDPClient
    from jsprof.engines.node import record as node_record
    from jsprof.engines.node.isolate import _Isolate

    idle = [0]
    rotations = [0]
    pump, recv, rotate = CDPClient.pump, CDPClient._recv, _Isolate.rotate
    got = [0]

    def spy_recv(self, timeout):
        raw = recv(self, timeout)
        got[0] += 1
        return raw

    def spy_pump(self, timeout=0.1):
        before = got[0]
        alive = pump(self, timeout)
        idle[0] += got[0] == before
        return alive

    def spy_rotate(self):
        rotations[0] += 1
        return rotate(self)

    gos = [0]
    send = CDPClient._send

    def spy_send(self, msg):
        gos[0] += msg.get("method") == "Runtime.runIfWaitingForDebugger"
        return send(self, msg)

    monkeypatch.setattr(CDPClient, "_recv", spy_recv)
    monkeypatch.setattr(CDPClient, "_send", spy_send)
    monkeypatch.setattr(CDPClient, "pump", spy_pump)
    monkeypatch.setattr(_Isolate, "rotate", spy_rotate)
    app = tmp_path / "sleeps.js"
    app.write_text("setTimeout(() => console.log('woke'), 1500);\n")
    t0 = time.monotonic()
    rec = record_node(app)
    elapsed = time.monotonic() - t0
    assert rec.tracks[0].meta["exit"] == "ok"
    assert rotations[0] >= 3  # the slices' timers ran
    bound = elapsed / node_record._POLL + rotations[0] + gos[0] + 5
    assert idle[0] <= bound, (idle[0], bound, elapsed, rotations[0], gos[0])


def test_an_eval_with_no_answer_says_what_node_is_doing():
    # CI saw `no CDP reply within 60 s` once, with nothing to tell a busy Node from a
    # stopped or hung one: the error says what the kernel says of the process.
    from jsprof.engines.cdp import CDPTimeout
    from jsprof.engines.node import NodeRuntime

    with NodeRuntime() as rt:
        os.kill(rt.proc.pid, signal.SIGSTOP)
        try:
            with pytest.raises(
                CDPTimeout, match=r"^node \(pid \d+\): no CDP reply within 1 s; stopped"
            ):
                rt.eval("1 + 1", timeout=1)
        finally:
            os.kill(rt.proc.pid, signal.SIGCONT)
        assert rt.eval("2 + 2") == 4
        with pytest.raises(CDPTimeout, match=r"no CDP reply within 1 s; running, [\d.]+ s of CPU"):
            rt.eval("for (;;) {}", timeout=1)
