"""Issue 11 on the real, patched QuickJS: the one-thread guard, owner-thread dispatch,
timers, the Profiler's brand, loop-body lines and what the sampler counts in `meta`."""

from __future__ import annotations

import collections
import json
import signal
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import Future
from pathlib import Path

import pytest

from jsprof import _quickjs, load
from jsprof.engines.quickjs import QuickJS, QuickJSProfiler
from jsprof.errors import UsageError
from jsprof.trace import ProfilerTrace

SPIN = "function spin(ms) { const t = performance.now(); while (performance.now() - t < ms) {} }"


def leaf_lines(trace: ProfilerTrace, name: str) -> collections.Counter:
    """Samples per line of the leaf frame, for samples whose leaf is `name`."""
    c: collections.Counter = collections.Counter()
    for s, line in zip(trace.sample_stack, trace.sample_line, strict=True):
        if s >= 0 and trace.frames[trace.stack_frame[s]].name == name:
            c[int(line)] += 1
    return c


# --------------------------------------------------------------------------- one thread


def test_nested_eval_from_a_host_callback_is_refused_and_the_guard_kept() -> None:
    rt = QuickJS()
    got: dict = {}

    def nested() -> None:
        # runs on the owner thread, inside the running eval (its interrupt handler)
        try:
            rt.eval("1 + 1")
        except UsageError as e:
            got["error"] = str(e)
        got["busy_after"] = rt._rt.busy

    def requester() -> None:
        time.sleep(0.2)
        fut = rt.call_on_owner(nested)
        fut.result(timeout=5)
        # the outer eval still runs: another thread must still be refused
        try:
            rt._rt.eval("2")
        except RuntimeError as e:
            got["foreign"] = str(e)

    th = threading.Thread(target=requester)
    th.start()
    rt.eval(SPIN + " spin(700);", "outer.js")
    th.join()
    assert "after eval() returns" in got["error"]
    assert got["busy_after"] is True
    assert "one thread at a time" in got["foreign"]
    assert rt.eval("3") == 3


def test_request_in_the_release_window_is_served() -> None:
    """A request queued after the eval's last service but before the owner lock is
    released (widened here to 0.3 s) is served, not left until a 10 s timeout."""
    rt = QuickJS()
    in_window = threading.Event()
    serve = rt._serve_requests

    def slow_last_service() -> None:
        serve()
        if rt._owner_lock._is_owned() and not rt._rt.busy:  # type: ignore[attr-defined]
            in_window.set()
            time.sleep(0.3)

    rt._serve_requests = slow_last_service  # type: ignore[method-assign]
    futs: list[Future] = []

    def requester() -> None:
        in_window.wait(5)
        futs.append(rt.call_on_owner(lambda: "served"))

    th = threading.Thread(target=requester)
    th.start()
    rt.eval(SPIN + " spin(50);")
    th.join()
    assert futs[0].result(timeout=2) == "served"


def test_foreign_start_error_reaches_the_caller() -> None:
    rt = QuickJS()
    prof = QuickJSProfiler(rt, max_buffer_size=-1)  # the session refuses this
    got: dict = {}

    def starter() -> None:
        time.sleep(0.2)
        try:
            prof.start()
        except UsageError as e:
            got["error"] = str(e)
        got["started"] = prof.started

    th = threading.Thread(target=starter)
    th.start()
    rt.eval(SPIN + " spin(600);")
    th.join()
    assert "max buffer size" in got["error"]
    assert got["started"] is False


# --------------------------------------------------------------------------- host


def test_clear_interval_inside_its_own_callback() -> None:
    rt = QuickJS()
    rt.eval(
        textwrap.dedent(
            """
            globalThis.n = 0;
            const id = setInterval(() => {
              n++;
              if (n === 3) clearInterval(id);
              if (n > 20) throw new Error('the interval was not cleared');
            }, 1);
            setTimeout(() => { globalThis.later = n; }, 60);
            """
        )
    )
    assert rt.eval("n") == 3
    assert rt.eval("later") == 3


def test_profiler_brand() -> None:
    rt = QuickJS()
    got = rt.eval(
        "const p = new Profiler({sampleInterval: 1, maxBufferSize: 10}); p.stop();"
        "[Object.prototype.toString.call(p), Object.prototype.toString.call(new EventTarget()),"
        " String(Profiler.prototype)].join()"
    )
    assert got == "[object Profiler],[object EventTarget],[object Profiler]"


# --------------------------------------------------------------------------- lines


@pytest.mark.parametrize("interval", [1.0, 0.1])
def test_loop_body_lines_not_the_header(interval: float) -> None:
    src = textwrap.dedent(
        """\
        function forBody() {
          let a = 0;
          for (let i = 0; i < 4e6; i++)
            a += i % 7;
          return a;
        }
        function whileBody() {
          let a = 0, i = 0;
          while (i < 4e6) {
            a += i++ % 7;
          }
          return a;
        }
        function oneLine() { let a = 0; for (let i = 0; i < 4e6; i++) a += i % 7; return a; }
        forBody(); whileBody(); oneLine();
        """
    )
    rt = QuickJS()
    session = rt.profiler(sample_interval=interval)
    rt.eval(src, "lines.js")
    trace = session.stop()
    for name, want in (("forBody", 4), ("whileBody", 10), ("oneLine", 14)):
        lines = leaf_lines(trace, name)
        assert sum(lines.values()) > 20, (name, lines)
        assert lines[want] / sum(lines.values()) > 0.9, (name, lines)


# --------------------------------------------------------------------------- meta


def test_stacks_deeper_than_the_walker_are_counted() -> None:
    _quickjs.set_max_depth(50)
    try:
        rt = QuickJS()
        session = rt.profiler(sample_interval=1.0)
        rt.eval(SPIN + "\nfunction rec(n, d) { if (n === 0) spin(d); else rec(n - 1, d); }"
                "\nrec(100, 150); rec(10, 100);")
        trace = session.stop()
    finally:
        _quickjs.set_max_depth(_quickjs.MAX_DEPTH)
    deep = session.meta["truncatedStacks"]
    assert 100 <= deep <= 170, session.meta
    assert trace.num_samples >= deep + 80


def test_ticks_lost_to_a_stopped_process_are_counted(tmp_path: Path) -> None:
    script = tmp_path / "spin.js"
    script.write_text(SPIN + "\nconsole.log('started');\nspin(900);\n")
    out = tmp_path / "spin.jsprof.json"
    p = subprocess.Popen(
        [str(Path(sys.executable).parent / "jsprof"), "record", "--interval", "0.1", "-o", str(out),
         str(script)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert p.stdout is not None
    assert p.stdout.readline() == "started\n"
    time.sleep(0.2)
    t0 = time.perf_counter()
    p.send_signal(signal.SIGSTOP)
    time.sleep(0.5)  # ~5,000 ticks at 0.1 ms; the stall cap keeps 1,000
    p.send_signal(signal.SIGCONT)
    stopped_ticks = (time.perf_counter() - t0) / 1e-4
    _, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    meta = load(out).tracks[0].meta
    # the stop as seen from outside, give or take the child's scheduling after SIGCONT
    assert 0.7 * (stopped_ticks - 1000) <= meta["stallDroppedTicks"] <= stopped_ticks + 3000, (
        stopped_ticks, meta)
    assert meta["droppedTicks"] >= meta["stallDroppedTicks"]
    assert json.loads(json.dumps(meta))["truncatedStacks"] == 0
