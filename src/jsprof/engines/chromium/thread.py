"""One JavaScript thread of a tab (the page, a dedicated worker or an out-of-process
iframe) seen through its CDP session: its profiler and the slices taken while it runs,
its time origin, whether it is idle (the `--until load` rule), and the Track made of its
profile."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...errors import EngineError
from ...meta import QUIET_WAIT_DROPPED
from ...trace import Spans, Track
from .. import _v8session
from ..cdp import SESSION_NOT_FOUND, CDPClosed, CDPError, Session
from .helper import SOURCE_URL, strip_internal

ENGINE = "chromium"
MIN_INTERVAL_US = 50
SLICE_PERIOD = 1.0  # s: at most this much is lost when a thread dies unannounced
_SLICE_PREFIX = "jsprof-slice-"
_CLOSED_SLICE = _SLICE_PREFIX + "closed"  # chromium_page.js: a worker's close() ended it
PROBE_PERIOD = 0.1  # s
CUT_GONE = 2.0  # s: a worker gone this soon after a cut of its slice was the one ended
PROFILE_STOP_TIMEOUT = 120.0


def interval_us(sample_interval: float) -> int:
    """CDP's whole microseconds; 0 means the minimum, 50 us."""
    return _v8session.interval_us(sample_interval, MIN_INTERVAL_US)


def effective_interval(sample_interval: float) -> float:
    return _v8session.effective_interval(sample_interval, MIN_INTERVAL_US)


@dataclass
class JSThread:
    session: Session
    kind: str  # "page", "worker", "iframe"
    url: str
    # A worker's own name (`new Worker(url, {name})`, its target's title): two workers of
    # one script, or one from a Blob, are told apart by it.
    worker_name: str = ""
    name: str = "main"
    profiling: bool = False
    profile: dict | None = None
    slices: list[dict] = field(default_factory=list)
    slice_no: int = 0
    next_slice: float = float("inf")
    # When a cut for a worker the page terminated (PageSession.cut_workers) ended this
    # thread's slice, and when the thread went away: a worker gone right after a cut, or
    # one whose own close() ended its slice, has all it ran in its slices.
    cut_at: float = float("-inf")
    gone_at: float = float("inf")
    closed_itself: bool = False
    lost: str | None = None
    partial: bool = False
    gone: bool = False
    time_origin: float | None = None  # epoch ms
    origin_mid: int | None = None
    helper: bool = False
    probe_mid: int | None = None
    probe_sent: float = 0.0
    last_active: float = 0.0
    probed_after_load: bool = False
    # The latest probe's answer, in time, said nothing is pending: the page's own word.
    # A stale `last_active` alone is not idleness: jsprof's own loop held up (a loaded
    # machine, a big slice to read) while no probe was out made a page whose interval
    # never stops look quiet, and `--until load` ended it (3 of 16 runs at load 11-19).
    said_idle: bool = False
    # The page's timeline, taken every slice: (document's timeOrigin, raw timeline) each.
    timelines: list[tuple[float, Any]] = field(default_factory=list)
    timeline_mids: list[int] = field(default_factory=list)  # asked, not answered yet
    timeline_on: bool = False  # the Timeline runs without the helper (record --cdp)
    next_timeline: float = 0.0

    # -- profiler
    def start_profiler(self, us: int, wait: bool = False) -> None:
        """Queued without waiting (a thread paused at its start: the commands run in order,
        before its first line); `wait`: until the thread said the profiler runs."""
        _v8session.start_profiler(self.session, us, wait=wait)
        self.profiling = True

    def rotate(self, reply: bool = False) -> int | None:
        """End the current slice and start the next in one call (no tick falls between).
        `reply`: return the message id of the call, whose answer comes once the ended
        slice's profile was sent (it comes first, on this session)."""
        if not self.profiling or not self.helper or self.gone or self.session.closed:
            return None
        k = self.slice_no + 1
        prev = f"'{_SLICE_PREFIX}{self.slice_no}'" if self.slice_no else "''"
        expr = f"globalThis.__jsprof && __jsprof.slice('{_SLICE_PREFIX}{k}', {prev})"
        mid = None
        with contextlib.suppress(CDPClosed):
            mid = self.session.send_nowait(
                "Runtime.evaluate", {"expression": expr + SOURCE_URL}, reply=reply
            )
        self.slice_no = k
        self.next_slice = time.monotonic() + SLICE_PERIOD
        self.ask_timeline()
        return mid if reply else None

    def ended_whole(self) -> bool:
        """The thread ended with nothing it ran outside its slices: its own close() ended
        the slice it was in (the helper), or it was terminated right after a cut."""
        return self.gone and bool(self.slices) and (
            self.closed_itself or 0 <= self.gone_at - self.cut_at <= CUT_GONE
        )

    # -- the page's timeline (long animation frames, interactions)
    def ask_timeline(self, last: bool = False) -> None:
        """Ask for what the page observed since the last time (pages and iframes);
        `last`: the recording ends (the page waits for its next frame first)."""
        if (
            self.kind not in ("page", "iframe")
            or not (self.helper or self.timeline_on)
            or self.gone
            or self.session.closed
        ):
            return
        with contextlib.suppress(CDPClosed):
            mid = self.session.send_nowait(
                "Runtime.evaluate",
                {
                    "expression": "(globalThis.__jsprof || globalThis.__jsprofTimeline)"
                    + " ? (globalThis.__jsprof || __jsprofTimeline).timeline("
                    + ("true" if last else "false")
                    + ") : null"
                    + SOURCE_URL,
                    "returnByValue": True,
                    "awaitPromise": last,
                },
            )
            self.timeline_mids.append(mid)

    def poll_timeline(self) -> None:
        """Keep the answers that came (in the order asked: they are in time order)."""
        while self.timeline_mids and self.timeline_mids[0] in self.session.replies:
            mid = self.timeline_mids.pop(0)
            with contextlib.suppress(CDPError, CDPClosed, EngineError):
                v = self.session.result(mid, 0).get("result", {}).get("value")
                if (
                    isinstance(v, list)
                    and len(v) == 2
                    and isinstance(v[0], (int, float))
                    and isinstance(v[1], dict)
                ):
                    self.timelines.append((float(v[0]), v[1]))

    def take_slice(self, event: dict) -> bool:
        p = event.get("params", {})
        if event.get("method") == "Profiler.consoleProfileFinished" and str(
            p.get("title", "")
        ).startswith(_SLICE_PREFIX):
            if p.get("title") == _CLOSED_SLICE:  # the worker's close(): its end, empty
                self.closed_itself = True
                return True
            self.slices.append(p["profile"])
            return True
        return False

    def ended(self) -> None:
        """The thread's target went away (its session was detached): as the page notes
        Target.detachedFromTarget, here when its end was learnt first some other way."""
        if not self.gone:
            self.gone = True
            self.gone_at = min(self.gone_at, time.monotonic())

    def stop_nowait(self) -> int | None:
        if self.session.closed and self.session.session_id is not None:
            self.ended()
        if not self.profiling or self.gone:
            return None
        return _v8session.stop_nowait(self.session)

    def collect(self, mid: int | None, timeout: float = PROFILE_STOP_TIMEOUT) -> None:
        if mid is not None:
            try:
                self.profile = self.session.result(mid, timeout)["profile"]
            except (CDPClosed, CDPError, EngineError) as e:
                # A worker the page ended just before jsprof's stop reached it (its detach
                # was not handled yet): the thread ended, and whether its slices hold all
                # it ran is ended_whole's question, as for one gone before the stop. Taken
                # as a failed stop, the track of a worker terminated right after its cut
                # was called partial (CI of ab2c067; 3 of 8 runs of a page that ends its
                # recording as it terminates its worker).
                if self.session.session_id is not None and (
                    isinstance(e, CDPClosed)
                    or (isinstance(e, CDPError) and e.code == SESSION_NOT_FOUND)
                ):
                    self.ended()
                else:
                    self.lost = f"the profile could not be taken ({e})"
        if (
            self.lost is None
            and self.profiling
            and self.profile is None
            and not self.ended_whole()
        ):
            self.lost = "the thread ended before its profile could be taken"
        self.profiling = False
        if self.profile is None and self.slices:
            from .._v8slices import concat_profiles

            self.profile = concat_profiles(self.slices)
            if self.ended_whole():
                return
            self.partial = True
            self.lost = (
                f"{self.lost or 'no full profile'}; kept {len(self.slices)} slice(s) taken "
                f"every {SLICE_PERIOD:g} s, so up to the last {SLICE_PERIOD:g} s is missing"
            )

    # -- time origin
    def ask_origin(self) -> None:
        if self.session.closed or self.gone:
            return
        with contextlib.suppress(CDPClosed):
            self.origin_mid = self.session.send_nowait(
                "Runtime.evaluate",
                {
                    # (Not `location` in a worker paused at its start: reading it there
                    # crashed the renderer. A worker's URL comes with its target info.)
                    "expression": "[performance.timeOrigin, "
                    + ("String(location.href)]" if self.kind == "iframe" else "'']")
                    + SOURCE_URL,
                    "returnByValue": True,
                },
            )

    def poll_origin(self) -> None:
        mid = self.origin_mid
        if mid is not None and mid in self.session.replies:
            self.origin_mid = None
            with contextlib.suppress(CDPError, CDPClosed, EngineError):
                v = self.session.result(mid, 0).get("result", {}).get("value")
                if isinstance(v, list) and len(v) == 2 and isinstance(v[0], (int, float)):
                    self.time_origin = float(v[0])
                    # An iframe is attached before it navigates: its URL comes now.
                    if isinstance(v[1], str) and v[1] and (not self.url or self.kind == "iframe"):
                        self.url = v[1].split("#", 1)[0]

    # -- idleness (the --until load rule)
    def probe(self, now: float) -> None:
        if not self.helper or self.gone or self.session.closed:
            return
        mid = self.probe_mid
        if mid is None:
            if now - self.probe_sent >= PROBE_PERIOD:
                with contextlib.suppress(CDPClosed):
                    self.probe_mid = self.session.send_nowait(
                        "Runtime.evaluate",
                        {
                            "expression": "globalThis.__jsprof ? __jsprof.idle() : [0, 1e9]"
                            + SOURCE_URL,
                            "awaitPromise": True,
                            "returnByValue": True,
                        },
                    )
                    self.probe_sent = now
            return
        if mid not in self.session.replies:
            if now - self.probe_sent > PROBE_PERIOD:
                self.last_active = now  # the thread has not come round to our task: busy
                self.said_idle = False
            return
        self.probe_mid = None
        try:
            v = self.session.result(mid, 0).get("result", {}).get("value")
        except (CDPError, CDPClosed, EngineError):
            return
        self.probed_after_load = True
        late = now - self.probe_sent > PROBE_PERIOD
        if not (isinstance(v, list) and len(v) == 2):
            self.said_idle = not late  # no helper to ask: nothing known to be pending
            return
        pending, since_ms = v
        self.said_idle = not pending and not late
        if pending or late:
            self.last_active = now
        else:
            self.last_active = max(self.last_active, now - float(since_ms) / 1000.0)

    def work_end_us(self) -> float | None:
        """When this thread last ran the page's JavaScript or a GC (V8's clock, us), as
        to_track's quiet_end sees it; None: never, or no profile."""
        if self.profile is None:
            return None
        from .._v8slices import last_work_us

        return last_work_us(strip_internal(self.profile))

    def to_track(
        self,
        requested_ms: float,
        mono_to_epoch_us: float,
        rename: Callable[[str], str] | None = None,
        quiet_end: bool = False,
        page_end_us: float | None = None,
    ) -> Track | None:
        """The track of this thread's profile; `rename` respells its scripts' URLs.
        `quiet_end`: the `--until load` rule ended the page. It waited QUIET_MS after the
        page went quiet, and jsprof stopped the profilers after that: the trailing idle
        samples are that wait and are dropped, as Node's exit wait is (a recording of
        examples/app.js's 320 ms of work was 72 % idle, 480-600 ms of it at the end).
        Only "(idle)" and "(program)" samples after the last JS or GC one go, not the
        "(program)" right after it (rendering); jsprof's probes are "(program)" too. Nor
        any sample up to `page_end_us`, the page's last work on any thread (work_end_us):
        the rule waited for every thread, so idle while another worked is the page's."""
        if self.profile is None:
            return None
        from ...formats.cpuprofile import profile_to_trace

        profile = strip_internal(self.profile)
        waited = (0, 0.0)
        if quiet_end:
            from .._v8slices import drop_after_last_work

            profile, n, ms = drop_after_last_work(profile, page_end_us)
            waited = (n, ms)
        if rename is not None:
            profile = _renamed(profile, rename)
        if self.time_origin is not None:
            origin_us = self.time_origin * 1000.0 - mono_to_epoch_us
            time_origin = self.time_origin
        else:
            origin_us = float(profile.get("startTime", 0))
            time_origin = (origin_us + mono_to_epoch_us) / 1000.0
        trace, _ = profile_to_trace(profile, self.url or self.name, origin_us=origin_us)
        meta: dict[str, Any] = {"url": self.url, "kind": self.kind}
        if self.worker_name:
            meta["workerName"] = self.worker_name
        if self.partial:
            meta["partial"] = self.lost
        if waited[0]:
            meta[QUIET_WAIT_DROPPED] = {"samples": waited[0], "ms": round(waited[1], 1)}
        track = _v8session.make_track(self.name, trace, time_origin, requested_ms, ENGINE, meta)
        if self.timelines:
            track.spans = timeline_spans(self.timelines, time_origin, rename, track.meta)
        return track


def timeline_spans(
    batches: list[tuple[float, Any]],
    time_origin: float,
    rename: Callable[[str], str] | None,
    meta: dict[str, Any],
) -> Spans | None:
    """The page's timeline batches (document timeOrigin, raw timeline) as spans on the
    track's clock. Each batch is checked as the collector checks an upload's (what the
    page reports is data: a bad batch is left out and named in meta); batches of one
    document are merged as the fleet merges one page load's chunks (an interaction
    reported twice counts once); a document before a navigation is moved onto the last
    one's clock."""
    from ... import timeline as tl
    from ...trace import join_spans, spans_in_order

    by_doc: dict[float, list[tuple[str, dict]]] = {}
    dropped: dict[str, int] = {}
    refused: list[str] = []
    for origin, raw in batches:
        try:
            t = tl.check(raw, "timeline", keep_query=True)
        except tl.TimelineError as e:
            refused.append(str(e))
            continue
        if rename is not None:
            for f in t["longFrames"]:
                for sc in f["scripts"]:
                    if sc["sourceURL"]:
                        sc["sourceURL"] = rename(sc["sourceURL"])
                    # A classic or module script's invoker is its URL, and it is the
                    # entry's label when it has no function name (the Time view showed
                    # `http://127.0.0.1:44655/work.js`, a port that is gone); an event
                    # listener's (`BUTTON#go.onclick`) is no URL and stays as it is.
                    if sc.get("invoker"):
                        sc["invoker"] = rename(sc["invoker"])
        by_doc.setdefault(origin, []).append((str(origin), t))
        # the client's counts are since the document started: the last one is the total
        for k, v in t["dropped"].items():
            dropped[f"{origin}:{k}"] = max(dropped.get(f"{origin}:{k}", 0), v)
    spans: Spans | None = None
    for origin, items in sorted(by_doc.items()):
        pl = tl.page_loads(items)[str(origin)]
        doc = {"longFrames": pl.long_frames, "interactions": pl.interactions}
        spans = join_spans(spans, tl.to_spans(doc, origin - time_origin))
    total: dict[str, int] = {}
    for key, v in dropped.items():
        k = key.rsplit(":", 1)[1]
        total[k] = total.get(k, 0) + v
    if any(total.values()):
        meta["timelineDropped"] = total
    if refused:
        meta["timelineRefused"] = refused[:10]
    return spans_in_order(spans) if spans is not None and len(spans) else None


def _renamed(profile: dict, rename: Callable[[str], str]) -> dict:
    """The profile with each call frame's URL respelled (once per distinct URL)."""
    names: dict[str, str] = {}
    nodes = []
    for n in profile.get("nodes") or ():
        cf = n.get("callFrame")
        url = cf.get("url") if isinstance(cf, dict) else None
        if isinstance(url, str) and url:
            new = names.get(url)
            if new is None:
                new = names[url] = rename(url)
            if new != url:
                n = {**n, "callFrame": {**cf, "url": new}}
        nodes.append(n)
    return {**profile, "nodes": nodes}
