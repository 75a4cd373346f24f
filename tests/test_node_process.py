"""The Node process on real Node.js: waiting for its exit and its start-up errors."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time

import pytest

from jsprof.engines.node import NodeProcess


@pytest.fixture(autouse=True)
def _node_is_required() -> None:
    if shutil.which("node") is None:
        pytest.fail("node is not installed; these tests need Node.js 20")


def _spawn_with_pid(pid: int) -> subprocess.Popen | None:
    """A `sleep` that gets `pid`, through /proc/sys/kernel/ns_last_pid (root only), or None
    when another process took that pid first."""
    with open("/proc/sys/kernel/ns_last_pid", "w") as f:
        f.write(str(pid - 1))
    proc = subprocess.Popen(["sleep", "30"])
    if proc.pid == pid:
        return proc
    proc.kill()
    proc.wait()
    return None


def test_wait_exit_after_reap_ignores_a_process_that_reused_the_pid() -> None:
    # poll() has reaped Node and the kernel has given its pid to an unrelated process:
    # a pidfd for that pid would wait on the stranger for the whole timeout.
    node = NodeProcess(["-e", "0"], inspect=(), wait=False)
    deadline = time.monotonic() + 30
    while node.proc.poll() is None:
        assert time.monotonic() < deadline, "node -e 0 did not exit"
        time.sleep(0.01)
    stranger = None
    for _ in range(50):
        stranger = _spawn_with_pid(node.pid)
        if stranger is not None:
            break
    assert stranger is not None, f"could not get pid {node.pid} reused"
    try:
        t0 = time.monotonic()
        # A long timeout, so that waiting it out (on the stranger) and a loaded machine's
        # slow answer (seconds, not tens of them) stay far apart.
        code = node.wait_exit(timeout=30.0)
        took = time.monotonic() - t0
        assert code == 0
        assert took < 10, f"wait_exit waited {took:.1f} s on an unrelated process"
        assert stranger.poll() is None, "the unrelated process was killed"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(stranger.pid, 9)
        stranger.wait()


def test_a_bad_node_flag_is_reported_in_nodes_own_words(tmp_path, capfd) -> None:
    from jsprof.cli import main

    script = tmp_path / "x.js"
    script.write_text("console.log(1)\n")
    out = tmp_path / "x.json"
    rc = main(["record", "--engine", "node", "--node-arg=--bogus", "-o", str(out), str(script)])
    err = capfd.readouterr().err
    assert rc == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "bad option: --bogus" in lines[0]
    assert "exited with code 9" in lines[0]
    assert "did not open its inspector" not in err
    assert not out.exists()


def test_nodes_stderr_without_an_inspector_is_still_forwarded(capfd) -> None:
    node = NodeProcess(["-e", "process.stderr.write('early words\\n')"], inspect=(), wait=False)
    assert node.wait_exit(timeout=30.0) == 0
    assert capfd.readouterr().err == "early words\n"


def test_a_scripts_last_stderr_line_left_open_is_passed_on_without_the_inspectors(
        tmp_path, capfd) -> None:
    # Node's "Waiting for the debugger to disconnect..." came on the script's open line
    # and was passed on with it ("no newlineWaiting for the debugger to disconnect...").
    from jsprof.engines.node import record_node

    script = tmp_path / "x.js"
    script.write_text("process.stderr.write('said'); process.stderr.write(' no newline');\n")
    rec = record_node(script, sample_interval=1.0)
    assert rec.tracks[0].meta["exit"] == "ok"
    assert capfd.readouterr().err == "said no newline"


# The script asks its own inspector's HTTP endpoint what it lists, as any local user could.
_LISTS_ITS_ID = r"""
const u = new URL(require('node:inspector').url());
require('node:http').get(`http://127.0.0.1:${u.port}/json/list`, (r) => {
  let d = '';
  r.on('data', (c) => { d += c; });
  r.on('end', () => console.log('listed ' + d.includes(u.pathname.slice(1))));
});
"""


def test_the_inspectors_id_is_not_published_over_http(tmp_path) -> None:
    """jsprof reads the inspector's URL from Node's stderr (its pipe); Node also served it
    at http://127.0.0.1:PORT/json/list to any local process (--inspect's default), and the
    id is all it takes to run code in the profiled process."""
    import sys

    if shutil.which("node") is None:
        pytest.fail("node is not installed; these tests need Node.js 20")
    app = tmp_path / "app.js"
    app.write_text(_LISTS_ITS_ID)
    p = subprocess.run([sys.executable, "-m", "jsprof.cli", "record", "--engine", "node",
                        "-o", str(tmp_path / "o.json"), str(app)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "listed false" in p.stdout, (p.stdout, p.stderr)


def test_a_scripts_line_that_mentions_an_inspector_line_is_passed_on_whole(
        tmp_path, capfd) -> None:
    # Only a whole inspector line at the end of an open line is split off it: a line of the
    # script's own that quotes one mid-line was cut there and lost its rest.
    from jsprof.engines.node import record_node

    script = tmp_path / "x.js"
    said = ("note: Debugger attached. twice\n"
            "see Debugger listening on the port you gave\n"
            "and Waiting for the debugger to disconnect... is Node's")
    script.write_text(f"process.stderr.write({said!r});\n")
    rec = record_node(script, sample_interval=1.0)
    assert rec.tracks[0].meta["exit"] == "ok"
    assert capfd.readouterr().err == said


def test_a_hung_node_is_described_thread_by_thread() -> None:
    # A Node that stops answering CDP is described by where its main thread and each of
    # its other threads wait (the CI hang: its main thread in a futex; which others did
    # was not said), so the error itself tells a deadlock from a lost reply.
    from jsprof.engines.node.process import process_state

    block = "Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0)"
    proc = subprocess.Popen(["node", "-e", block])
    try:
        deadline = time.monotonic() + 60
        said = ""
        while time.monotonic() < deadline:
            said = process_state(proc.pid)
            # the main thread blocked in Atomics.wait, Node's threads all started (its main
            # thread waits in a futex at start-up too, beside one other: CI of ccc986c)
            if "futex" in said.split(";")[0] and said.count("node: ") + sum(
                    int(p.rsplit(" x", 1)[1]) - 1 for p in said.split("; ") if " x" in p) >= 3:
                break
            time.sleep(0.05)
        main, _, threads = said.partition("; threads: ")
        assert "waiting in futex" in main, said
        # the main thread and Node's helper threads (V8's workers, libuv's), grouped
        parts = threads.split("; ")
        counts = [int(p.rsplit(" x", 1)[1]) if " x" in p else 1 for p in parts]
        assert sum(counts) >= 3 and "node: " in threads, said
    finally:
        proc.kill()
        proc.wait()


def test_a_node_held_for_the_debugger_answers_commands_but_no_awaited_evaluate() -> None:
    # The CI hang's mechanism (gdb on a reproduced hang: Node's main thread still in
    # Agent::WaitForConnectByOptions after our runIfWaitingForDebugger was answered): a
    # Node held for the debugger runs commands from its wait loop, where no microtask runs,
    # so an evaluate that awaits its value (as every NodeRuntime.eval does) never answers.
    from jsprof.engines.cdp import CDPClient, CDPTimeout

    node = NodeProcess(["-e", "setInterval(() => {}, 1 << 30)"])  # --inspect-brk
    try:
        with CDPClient(node.url or "") as client:
            s = client.session
            said = s.send("Runtime.evaluate", {"expression": "6 * 7", "returnByValue": True})
            assert said["result"]["value"] == 42
            with pytest.raises(CDPTimeout):
                s.send("Runtime.evaluate", {"expression": "6 * 7", "returnByValue": True,
                                            "awaitPromise": True}, timeout=3)
    finally:
        node.kill()


def test_a_node_runtime_does_not_depend_on_nodes_go(monkeypatch) -> None:
    # Node took a runIfWaitingForDebugger that came before it began to wait as a no-op and
    # then waited for good (35 of 3,074 starts beside busy loops). Here every go is lost so:
    # answered, not heeded. A NodeRuntime must work all the same (it hung: no reply in 60 s).
    from jsprof.engines.cdp import Session
    from jsprof.engines.node import NodeRuntime

    send_nowait = Session.send_nowait

    def lose_go(self, method, params=None, reply=True):
        if method == "Runtime.runIfWaitingForDebugger":
            method, params = "Runtime.evaluate", {"expression": "0"}  # a reply, no go
        return send_nowait(self, method, params, reply)

    monkeypatch.setattr(Session, "send_nowait", lose_go)
    with NodeRuntime() as rt:
        assert rt.eval("Promise.resolve(6 * 7)", timeout=30) == 42
