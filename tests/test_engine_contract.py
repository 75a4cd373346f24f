"""The RuntimeProfiler contract (engines/base.py), the same checks for every engine.

Each engine contributes a factory: it returns a fresh RuntimeProfiler and a `work(ms)`
callable that runs JavaScript on that runtime for about `ms` milliseconds in a function
named `contractWork`. Node joins this list in its issue.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from jsprof.engines.base import DEFAULT_INTERVAL_MS, RuntimeProfiler
from jsprof.errors import UsageError
from jsprof.trace import ProfilerTrace, Track

Factory = Callable[[], tuple[RuntimeProfiler, Callable[[float], Any]]]

WORK = (
    "function contractWork(ms) {{ const t = performance.now();"
    " while (performance.now() - t < ms) {{}} }} contractWork({ms});"
)


def quickjs_factory() -> tuple[RuntimeProfiler, Callable[[float], Any]]:
    from jsprof.engines.quickjs import QuickJS, QuickJSProfiler

    rt = QuickJS()
    return QuickJSProfiler(rt), lambda ms: rt.eval(WORK.format(ms=ms), "contract.js")


_node_runtimes: list[Any] = []


def node_factory() -> tuple[RuntimeProfiler, Callable[[float], Any]]:
    from jsprof.engines.node import NodeProfiler, NodeRuntime

    rt = NodeRuntime()
    _node_runtimes.append(rt)  # closed by the fixture: a Node process must not outlive a test
    return NodeProfiler(rt), lambda ms: rt.eval(WORK.format(ms=ms))


_chromium: list[Any] = []  # one browser for the module (closed below); a tab per test


def chromium_factory() -> tuple[RuntimeProfiler, Callable[[float], Any]]:
    from jsprof.engines.chromium import Browser, ChromiumProfiler, ChromiumRuntime

    if not _chromium:
        _chromium.append(Browser())
    rt = ChromiumRuntime(browser=_chromium[0])
    _node_runtimes.append(rt)  # its tab is closed by the fixture
    return ChromiumProfiler(rt), lambda ms: rt.eval(WORK.format(ms=ms))


@pytest.fixture(scope="module", autouse=True)
def _close_chromium() -> Iterator[None]:
    yield
    while _chromium:
        _chromium.pop().close()


ENGINES: dict[str, Factory] = {
    "quickjs": quickjs_factory,
    "node": node_factory,
    "chromium": chromium_factory,
}
EXPECTED_TYPE = {"quickjs": "quickjs", "node": "v8", "chromium": "v8"}


@pytest.fixture(params=sorted(ENGINES))
def engine(
    request: pytest.FixtureRequest,
) -> Iterator[tuple[str, RuntimeProfiler, Callable[[float], Any]]]:
    if request.param == "node" and shutil.which("node") is None:
        pytest.fail("node is not installed; the contract tests need Node.js 20")
    prof, work = ENGINES[request.param]()
    try:
        yield request.param, prof, work
    finally:
        while _node_runtimes:
            _node_runtimes.pop().close()


def _spans_the_work(trace: ProfilerTrace, ms: float) -> None:
    """The samples through contractWork span its `ms` of wall-clock work but for a gap at
    each end, the largest the recording has. Not a count of samples: how many ticks a
    wall-clock sampler gets in 100 ms is the machine's (Node: ~100 quiet, 24 at load 18,
    7 at load 20 beside busy loops)."""
    frame_names = [f.name for f in trace.frames]
    times = [t for s, t in zip(trace.sample_stack.tolist(), trace.sample_time.tolist(), strict=True)
             if s >= 0 and "contractWork" in {frame_names[f] for f in trace.stack_frames(s)}]
    # every sample as (time, its stack's frames, outermost first): what the span's rest held
    # (CI once: contractWork's samples spanned 49 of its 100 ms, the largest gap 14 ms,
    # 25 samples; what the other ones were was not known)
    every = [(round(t, 1), [frame_names[f] for f in trace.stack_frames(s)] if s >= 0 else [])
             for s, t in zip(trace.sample_stack.tolist(), trace.sample_time.tolist(),
                             strict=True)]
    assert len(times) >= 2, every
    gap = float(np.max(np.diff(trace.sample_time)))
    assert times[-1] - times[0] >= ms - 2 * gap, (times[0], times[-1], gap, every)


def names(trace: ProfilerTrace) -> set[str]:
    return {trace.frames[trace.stack_frame[s]].name for s in trace.sample_stack if s >= 0}


def test_type(engine: tuple[str, RuntimeProfiler, Any]) -> None:
    name, prof, _ = engine
    assert prof.type == EXPECTED_TYPE[name]
    assert isinstance(prof, RuntimeProfiler)


def test_setup_start_stop_returns_trace(engine: tuple[str, RuntimeProfiler, Any]) -> None:
    _, prof, work = engine
    prof.setup(1.0)
    assert not prof.started
    prof.start()
    assert prof.started
    work(100)
    trace = prof.stop()
    assert isinstance(trace, ProfilerTrace)
    assert not prof.started
    # Sampled through the 100 ms of work; the interval's fidelity is tested in test_node
    _spans_the_work(trace, 100)
    assert "contractWork" in names(trace)
    assert np.all(np.diff(trace.sample_time) > 0)


def test_stop_again_returns_none(engine: tuple[str, RuntimeProfiler, Any]) -> None:
    _, prof, work = engine
    assert prof.stop() is None  # never started
    prof.setup(1.0)
    prof.start()
    work(10)
    assert prof.stop() is not None
    assert prof.stop() is None


def test_start_twice_is_one_session(engine: tuple[str, RuntimeProfiler, Any]) -> None:
    _, prof, work = engine
    prof.setup(1.0)
    prof.start()
    prof.start()
    work(30)
    assert prof.stop() is not None
    assert prof.stop() is None


def test_start_without_setup_uses_default(engine: tuple[str, RuntimeProfiler, Any]) -> None:
    _, prof, work = engine
    prof.start(is_create=True)
    work(100)
    trace = prof.stop(is_destroy=True)
    assert trace is not None
    _spans_the_work(trace, 100)
    assert "contractWork" in names(trace)
    track = prof.track()
    assert track is not None and track.sample_interval == DEFAULT_INTERVAL_MS


def test_restart_gives_fresh_trace(engine: tuple[str, RuntimeProfiler, Any]) -> None:
    _, prof, work = engine
    prof.setup(1.0)
    prof.start()
    work(50)
    first = prof.stop()
    prof.setup(0.5)
    prof.start()
    work(50)
    second = prof.stop()
    assert first is not None and second is not None
    assert second.sample_time[0] > first.sample_time[-1]
    # (That the new interval takes effect is engine-specific: QuickJS checks it in
    # test_quickjs.py; V8 through Node kept its first interval across a restart here.)


def test_setup_validates(engine: tuple[str, RuntimeProfiler, Any]) -> None:
    _, prof, _ = engine
    with pytest.raises(UsageError):
        prof.setup(-1.0)
    prof.setup(1.0)
    prof.start()
    with pytest.raises(UsageError):
        prof.setup(2.0)  # not while started
    prof.stop()


def test_track_after_stop(engine: tuple[str, RuntimeProfiler, Any]) -> None:
    name, prof, work = engine
    assert prof.track() is None
    prof.setup(1.0)
    prof.start()
    work(30)
    trace = prof.stop()
    track = prof.track("worker")
    assert isinstance(track, Track)
    assert track.name == "worker" and track.trace is trace
    assert track.engine == name
    assert track.sample_interval == 1.0
    assert track.time_origin > 1.5e12  # Unix epoch ms
