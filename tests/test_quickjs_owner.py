"""Owner-thread dispatch (issue 6) on QuickJS: a foreign-thread stop is served by the
requesting thread while the owner, deep inside a long eval, is parked at its next poll."""

from __future__ import annotations

import threading
import time

import pytest

from jsprof.engines.quickjs import QuickJS, QuickJSProfiler
from jsprof.errors import EngineError

LONG = "function spin(ms) { const t = performance.now(); while (performance.now() - t < ms) {} }"


def _ticks(prof: QuickJSProfiler, trace) -> int:  # noqa: ANN001 - a ProfilerTrace
    """The ticks that came due while profiling: samples plus the ticks the recording
    says it dropped (its meta's droppedTicks)."""
    track = prof.track()
    assert track is not None
    return trace.num_samples + track.meta["droppedTicks"]


def _eval_until_interrupted(rt: QuickJS, ended: threading.Event) -> None:
    """Spin until the test interrupts the eval: a fixed spin (5 s) raced the test's own
    progress on a loaded machine, where the other thread can wait seconds for a core."""
    try:
        rt.eval(LONG + " spin(60000);", "long.js")
    except KeyboardInterrupt:
        pass
    else:
        pytest.fail("the 60 s spin ended without the test's interrupt")
    finally:
        ended.set()


def test_foreign_stop_served_mid_eval() -> None:
    rt = QuickJS()
    prof = QuickJSProfiler(rt)
    prof.setup(1.0)
    t_profiling = time.perf_counter()
    prof.start()  # idle runtime: served directly by this thread
    assert prof.started
    got: dict = {}
    ended = threading.Event()

    def stopper() -> None:
        time.sleep(0.5)
        got["asked"] = time.perf_counter()
        got["trace"] = prof.stop()
        got["at"] = time.perf_counter()
        # Served mid-eval, by the interrupt handler: the eval still runs (had the stop
        # waited for it, it would return 60 s on, the eval over).
        got["eval_running"] = not ended.is_set()
        got["interrupted_at"] = time.perf_counter()
        rt.interrupt()

    th = threading.Thread(target=stopper)
    th.start()
    t_start = time.perf_counter()
    _eval_until_interrupted(rt, ended)
    t_end = time.perf_counter()
    th.join()
    assert got["eval_running"], (got, t_end)
    trace = got["trace"]
    # Every 1 ms tick of the time profiled is accounted for, measured rather than assumed (a
    # loaded machine may wake the stopper late): a sample, or a tick the recording says it
    # dropped (wall clock: due while the eval's thread waited for a core; at load 20 that
    # was 77 samples and 495 dropped in 0.5 s, so samples alone are the machine's). At
    # most one per tick (+ the first one), at least half the ticks until the stop was asked.
    ticks = _ticks(prof, trace)
    most = (got["at"] - t_profiling) * 1000 + 2
    least = (got["asked"] - t_start) * 1000 / 2
    assert least <= ticks <= most, (least, trace.num_samples, ticks, most)
    assert trace.num_samples > 0
    assert "spin" in {f.name for f in trace.frames}
    # the eval itself was not disturbed: it ran on until the interrupt
    assert t_end >= got["interrupted_at"], (got, t_end)
    assert prof.stop() is None


def test_foreign_start_returns_at_once_and_is_served_mid_eval() -> None:
    rt = QuickJS()
    prof = QuickJSProfiler(rt)
    got: dict = {}
    ended = threading.Event()

    def starter() -> None:
        time.sleep(0.2)
        got["asked"] = time.perf_counter()
        prof.start()
        got["returned"] = time.perf_counter()
        # start() returned at once: it did not wait for the eval to end (60 s on)
        got["eval_running"] = not ended.is_set()
        time.sleep(0.5)  # sampled meanwhile (the bounds measure however long this was)
        rt.interrupt()

    th = threading.Thread(target=starter)
    th.start()
    _eval_until_interrupted(rt, ended)
    t_end = time.perf_counter()
    th.join()
    trace = prof.stop()
    assert got["eval_running"], (got, t_end)
    # sampling began mid-eval: samples from about then until the eval ended, measured,
    # not assumed
    most = (time.perf_counter() - got["asked"]) * 1000 + 2
    least = (t_end - got["returned"]) * 1000 / 2
    assert trace is not None and trace.num_samples > 0
    ticks = _ticks(prof, trace)
    assert least <= ticks <= most, (least, trace.num_samples, ticks, most)


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
