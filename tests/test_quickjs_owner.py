"""Owner-thread dispatch (issue 6) on QuickJS: a foreign-thread stop is served by the
requesting thread while the owner, deep inside a long eval, is parked at its next poll."""

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
    t_profiling = time.perf_counter()
    prof.start()  # idle runtime: served directly by this thread
    assert prof.started
    got: dict = {}

    def stopper() -> None:
        time.sleep(0.5)
        got["asked"] = time.perf_counter()
        got["trace"] = prof.stop()
        got["at"] = time.perf_counter()

    th = threading.Thread(target=stopper)
    th.start()
    t_start = time.perf_counter()
    rt.eval(LONG + " spin(5000);", "long.js")
    t_end = time.perf_counter()
    th.join()
    # Served mid-eval, by the interrupt handler: long before the eval ended (the 5 s spin
    # is wall-clock, so a loaded machine cannot shorten it), not at its end.
    assert got["at"] < t_end - 2.0, (got, t_end)
    trace = got["trace"]
    # As many samples as the time profiled allows at 1 ms, measured rather than assumed (a
    # loaded machine may wake the stopper late): at most one per tick (+ the first one),
    # at least half the ticks until the stop was asked.
    most = (got["at"] - t_profiling) * 1000 + 2
    least = (got["asked"] - t_start) * 1000 / 2
    assert least <= trace.num_samples <= most, (least, trace.num_samples, most)
    assert "spin" in {f.name for f in trace.frames}
    assert t_end - t_start >= 4.9  # the eval itself was not disturbed
    assert prof.stop() is None


def test_foreign_start_returns_at_once_and_is_served_mid_eval() -> None:
    rt = QuickJS()
    prof = QuickJSProfiler(rt)
    got: dict = {}

    def starter() -> None:
        time.sleep(0.2)
        got["asked"] = time.perf_counter()
        prof.start()
        got["returned"] = time.perf_counter()

    th = threading.Thread(target=starter)
    th.start()
    rt.eval(LONG + " spin(1500);")
    t_end = time.perf_counter()
    th.join()
    trace = prof.stop()
    # start() returned at once (it did not wait for the eval to end) and sampling began
    # mid-eval: samples from about then until the eval ended, measured, not assumed.
    assert got["returned"] < t_end - 0.3, (got, t_end)
    most = (time.perf_counter() - got["asked"]) * 1000 + 2
    least = (t_end - got["returned"]) * 1000 / 2
    assert trace is not None and least <= trace.num_samples <= most, (least, most)


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
