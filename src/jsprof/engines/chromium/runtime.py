"""A long-lived page for the RuntimeProfiler contract (engines/base.py): ChromiumRuntime
runs JavaScript in a blank page served from loopback, ChromiumProfiler is V8's CPU
profiler of that page."""

from __future__ import annotations

import tempfile
import time
from typing import Any

from ...errors import EngineError
from ...trace import Track
from .._v8runtime import V8RuntimeProfiler
from .._v8session import evaluate, start_profiler
from .browser import Browser
from .console import exception_text
from .page import PageSession
from .serve import GENERATED_PAGE, PageServer
from .thread import MIN_INTERVAL_US


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
        try:
            return evaluate(self.session, source, timeout, describe=exception_text)
        finally:
            self.page.pump(0)  # console lines, errors

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


class ChromiumProfiler(V8RuntimeProfiler):
    """V8's CPU profiler of a ChromiumRuntime's page, behind the engine contract."""

    min_us = MIN_INTERVAL_US

    def __init__(self, runtime: ChromiumRuntime) -> None:
        super().__init__()
        self.runtime = runtime

    def _start(self, us: int, is_create: bool) -> None:
        th = self.runtime.page.main
        start_profiler(th.session, us)
        th.profiling = True
        th.profile = None

    def _stop(self, requested_ms: float) -> Track | None:
        th = self.runtime.page.main
        th.collect(th.stop_nowait())
        if th.profile is None:
            raise EngineError(f"chromium: {th.lost or 'no profile delivered'}")
        mono_to_epoch_us = (time.time_ns() - time.monotonic_ns()) / 1000.0
        track = th.to_track(requested_ms, mono_to_epoch_us)
        th.profile = None
        return track
