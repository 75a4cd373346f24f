"""Owner-thread dispatch (issue 6) on QuickJS: a foreign-thread stop is served by the
interrupt handler while the owner is deep inside a long eval."""

from __future__ import annotations

import threading
import time

import pytest

from jsprof.engines.quickjs import QuickJS, QuickJSProfiler
from jsprof.errors import EngineError

LONG = "function spin(ms) { const t = performance.now(); while (performance.now() - t < ms) {} }"


def test_foreign_stop_served_mid_eval() -> None:
    rt = QuickJS()
    prof = QuickJSProfiler(rt)
    prof.setup(1.0)
    prof.start()  # idle runtime: served directly by this thread
    assert prof.started
    got: dict = {}

    def stopper() -> None:
        time.sleep(0.5)
        t0 = time.perf_counter()
        got["trace"] = prof.stop()
        got["took"] = time.perf_counter() - t0
        got["at"] = time.perf_counter()

    th = threading.Thread(target=stopper)
    th.start()
    t_start = time.perf_counter()
    rt.eval(LONG + " spin(5000);", "long.js")
    t_end = time.perf_counter()
    th.join()
    assert got["took"] < 0.5 and got["at"] < t_end - 3.0
    trace = got["trace"]
    assert 300 <= trace.num_samples <= 1000, trace.num_samples
    assert "spin" in {f.name for f in trace.frames}
    assert t_end - t_start >= 4.9  # the eval itself was not disturbed
    assert prof.stop() is None


def test_foreign_start_returns_at_once_and_is_served_mid_eval() -> None:
    rt = QuickJS()
    prof = QuickJSProfiler(rt)
    th = threading.Thread(target=lambda: (time.sleep(0.2), prof.start()))
    th.start()
    rt.eval(LONG + " spin(600);")
    th.join()
    trace = prof.stop()
    assert trace is not None and 250 <= trace.num_samples <= 450


def test_foreign_stop_times_out_with_a_clear_error() -> None:
    rt = QuickJS()
    prof = QuickJSProfiler(rt)
    prof.start()
    prof.stop_timeout = 0.3
    # The owner holds the runtime but runs no JavaScript (blocked in Python): nobody polls.
    release = threading.Event()
    owner = threading.Thread(target=lambda: (rt._owner_lock.acquire(), release.wait(),
                                             rt._owner_lock.release()))
    owner.start()
    time.sleep(0.05)
    try:
        with pytest.raises(EngineError, match="owner thread did not answer"):
            prof.stop()
    finally:
        release.set()
        owner.join()
