"""A long-lived page for the RuntimeProfiler contract (engines/base.py): ChromiumRuntime
runs JavaScript in a blank page served from loopback, ChromiumProfiler is V8's CPU
profiler of that page."""

from __future__ import annotations

import tempfile
import time
from typing import Any, ClassVar

from ...errors import EngineError, JSError, UsageError
from ...trace import ProfilerTrace, Track
from ..base import DEFAULT_INTERVAL_MS, RuntimeProfiler
from .browser import Browser
from .console import exception_text
from .page import PageSession
from .serve import GENERATED_PAGE, PageServer
from .thread import effective_interval, interval_us


class ChromiumRuntime:
    """A headless Chromium with one blank page served from loopback; `eval(source)` runs
    JavaScript in it. Several runtimes may share one Browser (tabs are separate
    renderers)."""

    def __init__(self, browser: Browser | None = None, chromium: str | None = None) -> None:
        self._own = browser is None
        self.browser = browser or Browser(chromium)
        try:
            self.session, self.target_id = self.browser.new_page()
            self.page = PageSession(
                self.browser.client, self.session, None, helper=False, network=False
            )
            self.page.prepare(start_profiler=False)
            self.server = PageServer(
                tempfile.gettempdir(), page=b"<!doctype html><title>jsprof</title>"
            )
            self.page.navigate(self.server.url(GENERATED_PAGE))
            deadline = time.monotonic() + 30
            while not self.page.loaded and time.monotonic() < deadline:
                self.page.pump(0.05)
            self.page.read_origins()
        except BaseException:
            if self._own:
                self.browser.close()
            raise

    def eval(self, source: str, timeout: float = 60.0) -> Any:
        r = self.session.send(
            "Runtime.evaluate",
            {"expression": source, "returnByValue": True, "awaitPromise": True},
            timeout=timeout,
        )
        self.page.pump(0)  # console lines, errors
        if "exceptionDetails" in r:
            text = exception_text(r["exceptionDetails"])
            raise JSError(text.splitlines()[0], text)
        return r.get("result", {}).get("value")

    def profiler(self) -> ChromiumProfiler:
        return ChromiumProfiler(self)

    def close(self) -> None:
        self.browser.close_page(self.target_id)
        self.server.close()
        if self._own:
            self.browser.close()

    def __enter__(self) -> ChromiumRuntime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ChromiumProfiler(RuntimeProfiler):
    """V8's CPU profiler of a ChromiumRuntime's page, behind the engine contract."""

    type: ClassVar[str] = "v8"

    def __init__(self, runtime: ChromiumRuntime) -> None:
        self.runtime = runtime
        self._interval = DEFAULT_INTERVAL_MS
        self._started = False
        self._track: Track | None = None

    def setup(self, sample_interval: float) -> None:
        if self._started:
            raise UsageError("cannot change the sample interval while the profiler runs")
        interval_us(sample_interval)
        self._interval = sample_interval

    def start(self, is_create: bool = False) -> None:
        if self._started:
            return
        th = self.runtime.page.main
        s = th.session
        s.send("Profiler.enable")
        s.send("Profiler.setSamplingInterval", {"interval": interval_us(self._interval)})
        s.send("Profiler.start")
        th.profiling = True
        th.profile = None
        self._started = True

    def stop(self, is_destroy: bool = False) -> ProfilerTrace | None:
        if not self._started:
            return None
        th = self.runtime.page.main
        th.collect(th.stop_nowait())
        self._started = False
        if th.profile is None:
            raise EngineError(f"chromium: {th.lost or 'no profile delivered'}")
        mono_to_epoch_us = (time.time_ns() - time.monotonic_ns()) / 1000.0
        self._track = th.to_track(effective_interval(self._interval), mono_to_epoch_us)
        th.profile = None
        return self._track.trace if self._track else None

    def track(self, name: str = "main") -> Track | None:
        if self._track is None:
            return None
        self._track.name = name
        return self._track

    @property
    def started(self) -> bool:
        return self._started
