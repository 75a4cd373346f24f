"""One V8 isolate (the main thread or a worker) seen through a CDP session: its clock,
its profiler, the slices taken while it runs, and the Track made of its profile."""

from __future__ import annotations

import contextlib
import time
from typing import Any

from ...errors import EngineError
from ...trace import ProfilerTrace, Track, normalise_resources
from ..cdp import CDPClosed, CDPError, Session
from .process import ENGINE

# Evaluated in each isolate: its epoch time origin and the same instant on the monotonic
# clock V8's profile timestamps use (microseconds), read back to back.
_ORIGIN_EXPR = (
    "(() => { const n = performance.now(); const h = process.hrtime.bigint();"
    " return [performance.timeOrigin, Number(h / 1000n) - n * 1000]; })()"
)
PROFILE_STOP_TIMEOUT = 120.0  # s; a long recording's profile is big
# While recording, each thread's profile is also taken in slices this often (nested V8
# profiles on the same sampler), so that if Node is killed from outside, the samples up
# to the last slice survive. The full profile from Profiler.stop is used when there is one.
SLICE_PERIOD = 1.0  # s
_SLICE_PREFIX = "jsprof-slice-"
# console.profile/profileEnd as they are before the script runs (it may replace them later),
# kept as a remote object: nothing is added to the script's globals. Not require(): at the
# --inspect-brk pause Node's module system is not ready, and calling it there breaks it.
_CONSOLE_FNS = "((c) => [c.profile.bind(c), c.profileEnd.bind(c)])(console)"
# The main thread also reports an uncaught exception through that channel: a profile titled
# with the error, started and ended at once, reaches us as Profiler.consoleProfileStarted.
# (Runtime.enable would tell us too, but it makes every console.log of the script cost a
# protocol message with previews and a stack: measured 14x slower on a logging loop.)
_ERROR_PREFIX = "jsprof-error:"
_CONSOLE_FNS_MAIN = (
    "((c) => { const p = c.profile.bind(c), e = c.profileEnd.bind(c);"
    " process.on('uncaughtExceptionMonitor', (err) => {"
    f" const t = '{_ERROR_PREFIX}' + String((err && err.stack) || err); p(t); e(t); }});"
    " return [p, e]; })(console)"
)
_ROTATE_FN = "function (next, prev) { this[0](next); if (prev) this[1](prev); }"


class _Isolate:
    """One V8 isolate seen through a CDP session: its clock and its profiler."""

    def __init__(self, session: Session, name: str) -> None:
        self.session = session
        self.name = name
        self.time_origin = 0.0  # epoch ms
        self.origin_us: float | None = None  # the same instant, monotonic microseconds
        self.profile: dict | None = None
        self.lost: str | None = None
        self.profiling = False
        self.slices: list[dict] = []
        self.partial = False  # the profile was joined from slices
        self.slice_no = 0
        self.next_slice = float("inf")
        self._console_id: str | None = None

    def read_origin(self) -> None:
        r = self.session.send(
            "Runtime.evaluate", {"expression": _ORIGIN_EXPR, "returnByValue": True}
        )
        value = r.get("result", {}).get("value")
        if isinstance(value, list) and len(value) == 2:
            self.time_origin, self.origin_us = float(value[0]), float(value[1])

    def start(self, us: int, reoptimize: bool = False) -> None:
        s = self.session
        s.send("Profiler.enable")
        # Must come before start: V8 refuses to change the interval of a running profiler.
        s.send("Profiler.setSamplingInterval", {"interval": us})
        s.send("Profiler.start")
        if reoptimize:
            # Code V8 optimised while no profiler ran lacks the positions of inlined
            # functions, so their frames vanish (measured: a timer callback optimised
            # before an attach showed only as its caller). Switching precise coverage on
            # and off deoptimises everything; it re-optimises with the profiler running.
            # The price is a short slowdown while hot code is optimised again.
            with contextlib.suppress(CDPError):
                s.send("Profiler.startPreciseCoverage", {"callCount": False, "detailed": False})
                s.send("Profiler.stopPreciseCoverage")
        self.profiling = True

    def begin_slices(self, report_errors: bool = False) -> None:
        """Start the first slice (after `start`). Without slices we only lose the
        insurance against a kill from outside, so failures here are not fatal."""
        try:
            r = self.session.send(
                "Runtime.evaluate",
                {
                    "expression": _CONSOLE_FNS_MAIN if report_errors else _CONSOLE_FNS,
                    "objectGroup": "jsprof",
                },
            )
            ok = "exceptionDetails" not in r and r.get("result", {}).get("subtype") == "array"
            self._console_id = r["result"].get("objectId") if ok else None
        except (CDPError, CDPClosed):
            self._console_id = None
        if self._console_id is None:
            return
        self.slice_no = 0
        # Not waited for: commands run in order, so the slice starts before the script does
        # (waiting would cost ~40 ms: Node sends the reply after an event, Nagle-delayed).
        self.rotate()

    def rotate(self, wait: bool = False) -> None:
        """End the current slice and start the next in one call (no tick falls between)."""
        if self._console_id is None or not self.profiling or self.session.closed:
            return
        k = self.slice_no + 1
        prev = f"{_SLICE_PREFIX}{self.slice_no}" if self.slice_no else ""
        params = {
            "objectId": self._console_id,
            "functionDeclaration": _ROTATE_FN,
            "arguments": [{"value": f"{_SLICE_PREFIX}{k}"}, {"value": prev}],
        }
        try:
            if wait:
                self.session.send("Runtime.callFunctionOn", params)
            else:
                self.session.send_nowait("Runtime.callFunctionOn", params, reply=False)
        except (CDPError, CDPClosed):
            return
        self.slice_no = k
        self.next_slice = time.monotonic() + SLICE_PERIOD

    def take_slice(self, event: dict) -> bool:
        """Keep a slice that arrived (Profiler.consoleProfileFinished of ours)."""
        p = event.get("params", {})
        if event.get("method") == "Profiler.consoleProfileFinished" and str(
            p.get("title", "")
        ).startswith(_SLICE_PREFIX):
            self.slices.append(p["profile"])
            return True
        return False

    def fall_back_to_slices(self) -> None:
        """No full profile: join the slices taken so far, and say what was lost."""
        if self.profile is None and self.slices:
            from .slices import concat_profiles

            self.profile = concat_profiles(self.slices)
            self.lost = (
                f"the full profile was never delivered; kept {len(self.slices)} slice(s) "
                f"taken every {SLICE_PERIOD:g} s, so up to the last {SLICE_PERIOD:g} s is missing"
            )
            self.partial = True

    def stop_nowait(self) -> int | None:
        if not self.profiling or self.session.closed:
            return None
        try:
            return self.session.send_nowait("Profiler.stop")
        except CDPClosed:
            return None

    def collect(self, mid: int | None, timeout: float = PROFILE_STOP_TIMEOUT) -> None:
        if mid is None:
            if self.profiling and self.profile is None:
                self.lost = "the thread ended before its profile could be taken"
            self.profiling = False
            return
        try:
            self.profile = self.session.result(mid, timeout)["profile"]
        except (CDPClosed, CDPError, EngineError) as e:
            self.lost = f"the profile could not be taken ({e})"
        self.profiling = False

    def track(self, requested_ms: float, source: str) -> Track | None:
        if self.profile is None:
            return None
        from ...formats.cpuprofile import profile_to_trace

        trace, _ = profile_to_trace(self.profile, source, origin_us=self.origin_us)
        return _make_track(self.name, trace, self.time_origin, requested_ms)


def _make_track(name: str, trace: ProfilerTrace, time_origin: float, requested: float) -> Track:
    gap = trace.median_gap()
    meta: dict[str, Any] = {} if gap is None else {"median_interval_ms": round(gap, 4)}
    return Track(
        name=name,
        trace=normalise_resources(trace),  # `vm` scripts named `app.js` or `./app.js` too
        time_origin=time_origin,
        engine=ENGINE,
        sample_interval=requested,
        requested_interval=requested,
        meta=meta,
    )


def _exception_text(details: dict) -> str:
    exc = details.get("exception") or {}
    return str(exc.get("description") or details.get("text") or "uncaught exception")
