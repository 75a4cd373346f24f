"""One V8 isolate (the main thread or a worker) seen through a CDP session: its clock,
its profiler, the slices taken while it runs, and the Track made of its profile."""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING

from ...errors import EngineError
from .._v8session import make_track, start_profiler, stop_nowait
from ..cdp import CDPClosed, CDPError, Session
from .process import ENGINE

# The trace model (numpy) is imported only to make the track: `jsprof record` imports it
# in another thread while this module starts the profiler.
if TYPE_CHECKING:
    from ...recorded import LightTrack
    from ...trace import ProfilerTrace, Track

# Every expression jsprof evaluates in a thread whose profiler may be running names this
# source URL: V8 samples it like the program's code, and without a URL its frames were
# the program's "(anonymous line 1)" (the slices' console.profile lookup in a worker,
# taken after the worker's profiler started: 2 frames, seen in CI). The samples in it are
# dropped like the bridge's.
INTERNAL_URL = "jsprof:internal"


def internal(expression: str) -> str:
    """`expression` as jsprof's own code (see INTERNAL_URL)."""
    return f"{expression}\n//# sourceURL={INTERNAL_URL}\n"


# Evaluated in each isolate: its epoch time origin and the same instant on the monotonic
# clock V8's profile timestamps use (microseconds, from nanoseconds read around it).
_ORIGIN_EXPR = internal(
    "(() => { const a = process.hrtime.bigint(); const n = performance.now();"
    " const b = process.hrtime.bigint();"
    " return [performance.timeOrigin, Number(a + b) / 2000 - n * 1000]; })()"
)
PROFILE_STOP_TIMEOUT = 120.0  # s; a long recording's profile is big
# While recording, each thread's profile is taken in slices (Profiler.stop, then
# Profiler.start at once), so that if Node is killed from outside the samples up to the
# last slice survive. Each sample is recorded once (the slices do not overlap) and each
# slice is serialised once, so together they cost what one profile at the end costs, plus
# a small fixed price per slice. Slices come often at first (a short run is the common
# case): each after a quarter of the time recorded so far, at least FIRST_SLICE and at
# most SLICE_PERIOD apart.
FIRST_SLICE = 0.05  # s
SLICE_PERIOD = 0.5  # s
# While one slice ends and the next starts, a console.profile "bridge" keeps V8's profiler
# alive: a profiler that stops entirely forgets the positions of code optimised while it
# ran, and the next one loses their inlined frames (measured). The bridge holds a few
# samples at most and is dropped. console.profile/profileEnd are bound as they are before
# the script runs (it may replace them later) and kept as a remote object: nothing is
# added to the script's globals.
_BRIDGE = "jsprof-bridge"
_CONSOLE_FNS = internal("((c) => [c.profile.bind(c), c.profileEnd.bind(c)])(console)")
# The bridge's own call costs the thread a few ms per slice (10 ms in a 1 s run, measured):
# jsprof's time, not the script's. Its sourceURL (V8 reads the magic comment anywhere in the
# text it compiles) lets those samples be dropped like the preload's.
BRIDGE_URL = "jsprof:bridge"
_BRIDGE_FN = f"function (i) {{ this[i]('{_BRIDGE}'); }}\n//# sourceURL={BRIDGE_URL}\n"
# The main thread reports an uncaught exception (and its child processes) through console.profile
# titles (js/node_record_hook.js): Runtime.enable would tell us too, but it makes every
# console.log of the script cost a protocol message (measured 14x slower on a logging loop).
_ERROR_PREFIX = "jsprof-error:"


class _Isolate:
    """One V8 isolate seen through a CDP session: its clock and its profiler."""

    def __init__(self, session: Session, name: str) -> None:
        self.session = session
        self.name = name
        self.time_origin = 0.0  # epoch ms
        self.origin_us: float | None = None  # the same instant, monotonic microseconds
        # the slices of the profile once taken (`collect`), joined by `track`
        self.profile: list[dict] | None = None
        self.lost: str | None = None
        self.profiling = False
        self.slices: list[dict] = []
        self.partial = False  # the profile was joined from slices
        self.lost_window: tuple[float, float] | None = None  # ms: the samples lost, at most
        self.slice_period = FIRST_SLICE
        self.next_slice = float("inf")
        self._sliced_since = 0.0
        self._console_id: str | None = None
        # Code whose samples are jsprof's, not the script's.
        self.hide_urls: set[str] = {BRIDGE_URL, INTERNAL_URL}
        # The main thread: when jsprof's preload let the script go (monotonic us, V8's
        # clock); the recording starts there (_v8slices.drop_preload).
        self.go_us: float | None = None
        # The main thread: when the program ended (its 'exit' event; monotonic us), and
        # what of Node's wait for jsprof after it was dropped: (samples, ms).
        self.end_us: float | None = None
        self.exit_wait: tuple[int, float] | None = None
        self._exit_end: float | None = None  # drop_exit_wait asked for, from here
        self.paused_at_start = False  # a worker: drop its wait for jsprof (pause.py)
        # A worker whose exit hook waits for our go: when to say it again (monotonic s).
        self.exit_go_at: float | None = None
        self._stops: list[int] = []  # Profiler.stop requests of slices not yet answered

    def read_origin(self) -> None:
        r = self.session.send(
            "Runtime.evaluate", {"expression": _ORIGIN_EXPR, "returnByValue": True}
        )
        value = r.get("result", {}).get("value")
        if isinstance(value, list) and len(value) == 2:
            self.time_origin, self.origin_us = float(value[0]), float(value[1])

    def start(self, us: int, reoptimize: bool = False) -> None:
        s = self.session
        start_profiler(s, us)
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

    def begin_slices(self) -> None:
        """Slice the profile from now on (after `start`). Without the bridge a slice would
        restart V8's profiler, so failures here mean no slices: only the insurance against
        a kill from outside is lost."""
        try:
            r = self.session.send(
                "Runtime.evaluate", {"expression": _CONSOLE_FNS, "objectGroup": "jsprof"}
            )
            ok = "exceptionDetails" not in r and r.get("result", {}).get("subtype") == "array"
            self._console_id = r["result"].get("objectId") if ok else None
        except (CDPError, CDPClosed):
            self._console_id = None
        self.slices_from_now()

    def slices_from_now(self) -> None:
        """Time the slices from now (e.g. when the script starts after `begin_slices`)."""
        if self._console_id is not None:
            self.slice_period = FIRST_SLICE
            self._sliced_since = time.monotonic()
            self.next_slice = self._sliced_since + FIRST_SLICE

    def _bridge(self, i: int) -> None:
        self.session.send_nowait(
            "Runtime.callFunctionOn",
            {
                "objectId": self._console_id,
                "functionDeclaration": _BRIDGE_FN,
                "arguments": [{"value": i}],
            },
            reply=False,
        )

    def rotate(self) -> None:
        """End the current slice and start the next. Not waited for: the four commands run
        in order on Node's main thread, and the slice's reply is picked up later."""
        if self._console_id is None or not self.profiling or self.session.closed:
            return
        try:
            self._bridge(0)
            self._stops.append(self.session.send_nowait("Profiler.stop"))
            self.session.send_nowait("Profiler.start", reply=False)
            self._bridge(1)
        except CDPClosed:
            return
        now = time.monotonic()
        # What a kill from outside can lose stays under a quarter of the run so far.
        self.slice_period = min(max((now - self._sliced_since) / 4, FIRST_SLICE), SLICE_PERIOD)
        self.next_slice = now + self.slice_period

    def take_slices(self) -> None:
        """Keep the slices whose replies have arrived, in order."""
        while self._stops and self._stops[0] in self.session.replies:
            reply = self.session.replies.pop(self._stops.pop(0))
            profile = reply.get("result", {}).get("profile")
            if profile is not None:
                self.slices.append(profile)

    def stop_nowait(self) -> int | None:
        return stop_nowait(self.session) if self.profiling else None

    def collect(self, mid: int | None, timeout: float = PROFILE_STOP_TIMEOUT) -> None:
        """Wait for the last slice (the reply to `mid`), then keep all slices as `profile`
        (`track` joins them). Without that last one, what arrived before stands in, said in
        `lost`."""
        if mid is None and not self.profiling:
            return  # taken already (a worker at its end), or never started
        self.profiling = False
        last = None
        if mid is not None:
            try:
                last = self.session.result(mid, timeout)["profile"]
            except (CDPClosed, CDPError, EngineError) as e:
                self.lost = f"the profile could not be taken ({e})"
        elif self.lost is None:
            self.lost = "the thread ended before its profile could be taken"
        self.take_slices()
        if last is not None:
            self.slices.append(last)
        elif self.slices:
            self.partial = True
            self.lost_window = self._lost_window(time.monotonic())
            start, end = self.lost_window
            self.lost = (
                f"Node ended before its last slice was taken (killed from outside? a SIGKILL "
                f"cannot be caught): kept {len(self.slices)} slice(s), up to {start:.0f} ms; "
                f"the samples from then to its end, at most {end - start:.0f} ms later, are "
                "lost (slices come every quarter of the run so far, 50 ms to 0.5 s apart)"
            )
        # Joined and converted in `track`, once Node is let go: until then the slices as
        # they came (each pass over a tsc run's ~25,000 nodes cost ms, Node waiting).
        self.profile = self.slices or None
        self.slices = []

    def drop_exit_wait(self) -> None:
        """After `collect`: drop Node's wait for jsprof after the program's end (`end_us`,
        known once every event before the last slice's reply has been read), when the
        track is made; `exit_wait` says what went."""
        if self.profile is not None and self.end_us is not None and self._exit_end is None:
            self._exit_end = self.end_us

    def _lost_window(self, noticed: float) -> tuple[float, float]:
        """(end of the last slice kept, when the end was noticed) in ms of the isolate's
        own time (performance.now()): V8's timestamps and time.monotonic() are both
        CLOCK_MONOTONIC, in us and s."""
        origin = self.origin_us or 0.0
        end_us = max(float(p.get("endTime", 0)) for p in self.slices)
        return (end_us - origin) / 1000.0, (noticed * 1e6 - origin) / 1000.0

    def track(
        self, requested_ms: float, source: str, light: bool = False
    ) -> Track | LightTrack | None:
        """The thread's track: made without numpy (engines/_v8join.py) from what V8 writes,
        as a LightTrack with `light` (the record path's), else as the model's Track; through
        _v8slices on numpy for anything else (which words what is wrong)."""
        if self.profile is None:
            return None
        from .._v8join import thread_track
        from .pause import PAUSE_WRAPPER

        splice = PAUSE_WRAPPER if self.paused_at_start else None
        got = thread_track(
            self.profile, self.name, ENGINE, requested_ms, self.time_origin, self.origin_us,
            self.hide_urls, splice, self.go_us, self._exit_end,
        )
        if got is not None:
            t, exit_wait = got
            if self._exit_end is not None:
                self.exit_wait = exit_wait
            return t if light else t.to_track()
        from .._v8slices import drop_exit_wait, drop_preload, join_slices

        # The slices read once into columns and joined; jsprof's own code, a worker's wait
        # at its start, the preload and the exit wait dropped from the samples; the trace
        # made of the nodes the kept samples are at or under.
        joined = join_slices(self.profile, source, self.hide_urls, splice)
        if self.go_us is not None:
            drop_preload(joined, self.go_us)
        if self._exit_end is not None:
            self.exit_wait = drop_exit_wait(joined, self._exit_end)
        trace = joined.to_trace(self.origin_us)
        return _make_track(self.name, trace, self.time_origin, requested_ms)


def _make_track(name: str, trace: ProfilerTrace, time_origin: float, requested: float) -> Track:
    from ...trace import normalise_resources

    # `vm` scripts named `app.js` or `./app.js` too
    return make_track(name, normalise_resources(trace), time_origin, requested, ENGINE)
