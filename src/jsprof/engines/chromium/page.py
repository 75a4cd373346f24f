"""One tab: its threads (the page, and each worker or out-of-process iframe auto-attached
paused, profiled before its first line), its console and errors, its network, and the
rules that end a recording."""

from __future__ import annotations

import contextlib
import math
import sys
import time
from collections.abc import Callable
from typing import TextIO

from ...errors import EngineError
from ...trace import Track
from ...words import printable, printable_lines
from ..cdp import CDPClient, CDPClosed, CDPError, Session
from .console import STDERR_TYPES, exception_text, format_console
from .helper import SOURCE_URL, helper_source
from .thread import SLICE_PERIOD, JSThread

# The page's performance.measure entries kept on the main track (`jsprof budget --measure`).
MEASURES_MAX = 1000
_MEASURES_JS = (
    "(() => { try { return performance.getEntriesByType('measure').slice(0, "
    f"{MEASURES_MAX}).map(e => [String(e.name).slice(0, 200), +e.startTime, +e.duration]); "
    "} catch (e) { return null; } })()"
    # Read while the profiler still runs: jsprof's own frames are dropped by this URL.
    + SOURCE_URL
)
QUIET_MS = 500  # the --until load rule: no task ran for this long
CUT_WAIT = 2.0  # s: a worker terminated by the page is ended after this at the latest


class PageSession:
    """One tab: its threads, console, errors, network, and the rules that end it."""

    def __init__(
        self,
        client: CDPClient,
        session: Session,
        us: int | None,
        stdout: TextIO | None = None,
        stderr: TextIO | None = None,
        helper: bool = True,
        stop_on_error: bool = False,
        network: bool = True,
    ) -> None:
        self.client = client
        self.us = us  # None: not profiling (jsprof run)
        self.stdout = stdout
        self.stderr = stderr
        # why `--until js:EXPR` could not end the recording, one line (endings.py)
        self.until_problem: str | None = None
        self.stop_on_error = stop_on_error
        self.main = JSThread(session, "page", "")
        self.threads: list[JSThread] = [self.main]
        self.by_session: dict[str, JSThread] = {}
        self.errors: list[str] = []
        self.loaded = False
        self.closed_by_page = False
        self.crashed = False
        self.inflight: set[str] = set()
        self.last_net = 0.0
        # The last network event's own time (Chromium's monotonic clock, which V8's
        # profiles use too; us): a request pending keeps the page from being quiet, so the
        # idle before its end is the page's time, not the rule's wait (recording()).
        self.last_net_us: float | None = None
        self.last_console = 0.0
        self.frame_id: str | None = None
        self._helper = helper_source() if helper else None
        self.network = network
        # Spells the page's uncaught errors as printed and kept (a served local file by
        # its file:// URL, not the loopback server's random port); None: as the page said.
        self.rename_text: Callable[[str], str] | None = None
        # `jsprof run` of a .js/.mjs file: its URL here. A SyntaxError of that script's own
        # compile (no frame: none of it ran) is kept in `not_compiled` (name, message,
        # 1-based line and column) and not printed: run says it in one line, exit 2.
        self.script_url: str | None = None
        self.not_compiled: tuple[str, str, int, int] | None = None
        # A local page's folder, which its loopback server serves (None: a URL). A script
        # of such a page that does not load is an error of the run, as an uncaught one is:
        # a module whose import 404s runs none of its code and throws nothing, so the
        # recording was all idle and said nothing (exit 0).
        self.served_root: str | None = None
        self._scripts: dict[str, str] = {}  # requestId -> URL of a script being loaded
        # Worker.terminate() calls the helper holds until the workers' slices are cut
        # (cut_workers): how many are held and not in the cut under way, and that cut's
        # (thread, message id) answers to wait for, its count and deadline.
        self._terminations = 0
        self._cutting: list[tuple[JSThread, int | None]] = []
        self._cut_count = 0
        self._cut_deadline = 0.0

    # -- setup
    def prepare(self, start_profiler: bool = True) -> None:
        s = self.main.session
        s.send("Page.enable")
        s.send("Runtime.enable")
        if self.network:
            s.send("Network.enable")
        tree = s.send("Page.getFrameTree")
        self.frame_id = tree.get("frameTree", {}).get("frame", {}).get("id")
        if self._helper is not None:
            s.send("Runtime.addBinding", {"name": "__jsprofClose"})
            s.send("Runtime.addBinding", {"name": "__jsprofTerminate"})
            s.send("Page.addScriptToEvaluateOnNewDocument", {"source": self._helper})
            self.main.helper = True
        s.send(
            "Target.setAutoAttach",
            {"autoAttach": True, "waitForDebuggerOnStart": True, "flatten": True},
        )
        if self.us is not None and start_profiler:
            # Waited for before the navigation: the page lands in a new document, whose
            # inspector restores the profiler from the state the blank tab's renderer had
            # confirmed. A start the blank renderer had not processed yet (it was busy or
            # still starting, as on a loaded machine) was not in that state: the new
            # document ran it as a plain message after its own first task, and a page
            # whose scripts all ran in that task had none of their samples (CI of 5e6d00a;
            # 5 of 30 loads with the blank tab busy 400 ms, 0 of 30 waiting).
            self.main.start_profiler(self.us, wait=True)

    def navigate(self, url: str) -> None:
        self.main.url = url
        r = self.main.session.send("Page.navigate", {"url": url})
        if r.get("errorText"):
            raise EngineError(f"{url}: Chromium could not load it ({r['errorText']})")

    # -- output
    def _print(self, text: str, err: bool) -> None:
        # A page is not the user's own program: it may be any site, so what it logs
        # reaches the terminal without escape sequences (its line breaks kept).
        out = (self.stderr or sys.stderr) if err else (self.stdout or sys.stdout)
        try:
            out.write(printable_lines(text) + "\n")
            out.flush()
        except (OSError, ValueError):
            pass

    # -- events
    def _attach(self, params: dict, parent: JSThread) -> None:
        info = params.get("targetInfo", {})
        sid = params["sessionId"]
        kind = info.get("type", "")
        sess = self.client.attach(sid, via_node_worker=False)
        if kind not in ("worker", "iframe"):
            # Service and shared workers, and whatever else: let them go on unwatched.
            with contextlib.suppress(CDPClosed):
                sess.send_nowait("Runtime.runIfWaitingForDebugger", reply=False)
                sess.send_nowait("Target.detachFromTarget", {"sessionId": sid}, reply=False)
            return
        url = info.get("url", "")
        name = url or kind
        th = JSThread(sess, kind, url, name=name)
        title = info.get("title", "")
        if kind == "worker" and isinstance(title, str) and title and title != url:
            th.worker_name = printable(title)
        self.threads.append(th)
        self.by_session[sid] = th
        try:
            sess.send_nowait("Runtime.enable", reply=False)
            if self.network:
                # A worker's own script and fetches finish on its session, not the page's.
                sess.send_nowait("Network.enable", reply=False)
            if kind == "iframe":
                sess.send_nowait("Page.enable", reply=False)
                if self._helper is not None:
                    sess.send_nowait(
                        "Page.addScriptToEvaluateOnNewDocument",
                        {"source": self._helper},
                        reply=False,
                    )
                    th.helper = True
            elif self._helper is not None:
                sess.send_nowait("Runtime.evaluate", {"expression": self._helper}, reply=False)
                th.helper = True
            sess.send_nowait(
                "Target.setAutoAttach",
                {"autoAttach": True, "waitForDebuggerOnStart": True, "flatten": True},
                reply=False,
            )
            if self.us is not None:
                th.start_profiler(self.us)
                th.rotate()
            if kind == "worker":
                th.ask_origin()
        finally:
            with contextlib.suppress(CDPClosed):
                sess.send_nowait("Runtime.runIfWaitingForDebugger", reply=False)
        th.last_active = time.monotonic()

    def _compile_error(self, details: dict) -> tuple[str, str, int, int] | None:
        """(name, message, line, column) when `details` says the run's script did not
        compile: a SyntaxError at its URL with no frame (a thrown one has its stack)."""
        exc = details.get("exception") or {}
        if self.script_url is None or details.get("url") != self.script_url:
            return None
        if exc.get("className") != "SyntaxError" or (details.get("stackTrace") or {}).get(
            "callFrames"
        ):
            return None
        desc = str(exc.get("description") or "SyntaxError")
        message = desc.split("\n", 1)[0].removeprefix("SyntaxError: ")
        line = int(details.get("lineNumber") or 0) + 1  # CDP's are 0-based
        return "SyntaxError", message, line, int(details.get("columnNumber") or 0) + 1

    def _handle(self, th: JSThread, e: dict) -> None:
        m = e.get("method", "")
        p = e.get("params", {})
        now = time.monotonic()
        if th.take_slice(e):
            return
        if m == "Runtime.consoleAPICalled":
            if p.get("type") == "profile" or p.get("type") == "profileEnd":
                return
            self.last_console = now
            th.last_active = now
            self._print(format_console(p.get("args", [])), p.get("type") in STDERR_TYPES)
        elif m == "Runtime.exceptionThrown":
            details = p.get("exceptionDetails", {})
            text = exception_text(details)
            if self.rename_text is not None:
                text = self.rename_text(text)
            self.errors.append(text)
            bad = th is self.main and self._compile_error(details)
            if bad:
                self.not_compiled = bad
            else:
                self._print(text, True)
            th.last_active = now
        elif m == "Target.attachedToTarget":
            self._attach(p, th)
        elif m == "Target.detachedFromTarget":
            gone = self.by_session.get(p.get("sessionId", ""))
            if gone is not None:
                gone.gone = True
                gone.gone_at = now
                gone.session.closed = True
        elif m == "Runtime.executionContextCreated" and th is self.main:
            aux = p.get("context", {}).get("auxData", {})
            if aux.get("isDefault") and aux.get("frameId") == self.frame_id:
                th.ask_origin()
                if self.us is not None and th.profiling and th.slice_no == 0:
                    th.rotate()
                elif th.profiling:
                    th.slice_no = max(th.slice_no, 0)
        elif m == "Page.frameNavigated" and th is self.main:
            fr = p.get("frame", {})
            if not fr.get("parentId"):
                self.frame_id = fr.get("id", self.frame_id)
                self.main.url = fr.get("url", self.main.url)
                self.loaded = False
        elif m == "Page.loadEventFired" and th is self.main:
            self.loaded = True
            th.last_active = now
        elif m == "Inspector.targetCrashed":
            if th is self.main:
                self.crashed = True
            th.gone = True
        elif m == "Inspector.detached":
            th.gone = True
            if th is self.main:
                self.closed_by_page = True
        elif m == "Runtime.bindingCalled" and p.get("name") == "__jsprofClose":
            if th is self.main:
                self.closed_by_page = True
        elif m == "Runtime.bindingCalled" and p.get("name") == "__jsprofTerminate":
            if th is self.main:
                self._terminations += 1
        elif m == "Network.requestWillBeSent":
            self.inflight.add(p.get("requestId", ""))
            self.last_net = now
            self._net_at(p)
            if p.get("type") == "Script":
                self._scripts[p.get("requestId", "")] = str(p.get("request", {}).get("url", ""))
        elif m == "Network.responseReceived":
            status = (p.get("response") or {}).get("status")
            url = self._scripts.get(p.get("requestId", ""))
            if url is not None and isinstance(status, int) and status >= 400:
                del self._scripts[p.get("requestId", "")]
                reason = str((p.get("response") or {}).get("statusText") or "").strip()
                self._script_not_loaded(th, url, f"HTTP {status} {reason}".strip())
        elif m in ("Network.loadingFinished", "Network.loadingFailed"):
            self.inflight.discard(p.get("requestId", ""))
            self.last_net = now
            self._net_at(p)
            url = self._scripts.pop(p.get("requestId", ""), None)
            if m == "Network.loadingFailed" and url is not None and not p.get("canceled"):
                self._script_not_loaded(th, url, str(p.get("errorText") or "failed"))

    def _net_at(self, p: dict) -> None:
        t = p.get("timestamp")  # Network.MonotonicTime: seconds
        if type(t) in (int, float) and math.isfinite(t) and t > 0:
            us = float(t) * 1e6
            if self.last_net_us is None or us > self.last_net_us:
                self.last_net_us = us

    def _script_not_loaded(self, th: JSThread, url: str, reason: str) -> None:
        """Say that a script did not load, as the console's 'Failed to load resource'
        does; for a local page's own files it is an error (exit 1, as an uncaught one)."""
        if self.rename_text is not None:
            url = self.rename_text(url)
        text = f"{url}: the page could not load this script ({reason})"
        if self.served_root is not None and url.startswith("file://"):
            text += f"; only files under {self.served_root} are served to the page"
            self.errors.append(text)
        self._print(text, True)
        th.last_active = time.monotonic()

    def pump(self, timeout: float) -> bool:
        """Read and handle events; False once the browser is gone."""
        alive = self.client.pump(timeout)
        for th in list(self.threads):
            q = th.session.events
            while q:
                self._handle(th, q.popleft())
        root = self.client.session
        while root.events:
            e = root.events.popleft()
            if e.get("method") == "Target.detachedFromTarget" and (
                e["params"].get("sessionId") == self.main.session.session_id
            ):
                self.main.gone = True
                self.closed_by_page = True
        self.cut_workers()
        return alive

    def cut_workers(self) -> None:
        """A worker ended takes its profile with it, keeping only its slices: when the
        page terminates workers (the helper holds each Worker.terminate() call), end every
        live worker's slice, wait for the answers (the slice's profile comes before its
        answer), then let the page end the workers it terminated (`__jsprof.release`).
        Which Worker object is which thread the protocol does not say, so all are cut."""
        if self._cutting:
            done = time.monotonic() >= self._cut_deadline
            waiting = False
            for th, mid in self._cutting:
                if mid is not None and not (th.gone or th.session.closed):
                    waiting = waiting or mid not in th.session.replies
            if waiting and not done:
                return
            for th, mid in self._cutting:
                if mid is not None and mid in th.session.replies:
                    th.cut_at = time.monotonic()
            n, self._cutting, self._cut_count = self._cut_count, [], 0
            with contextlib.suppress(CDPClosed):
                self.main.session.send_nowait(
                    "Runtime.evaluate",
                    {"expression": f"globalThis.__jsprof && __jsprof.release({n})" + SOURCE_URL},
                    reply=False,
                )
        if not self._terminations or self.main.gone:
            return
        self._cut_count, self._terminations = self._terminations, 0
        workers = [th for th in self.threads if th.kind == "worker" and not th.gone]
        self._cutting = [(th, th.rotate(reply=True)) for th in workers]
        self._cut_deadline = time.monotonic() + CUT_WAIT
        if not any(mid is not None for _, mid in self._cutting):
            self._cutting = [(self.main, None)]  # nothing to wait for: released next call
            self.cut_workers()

    def tick(self) -> None:
        now = time.monotonic()
        for th in self.threads:
            th.poll_origin()
            th.poll_timeline()
            if self.us is not None and now >= th.next_slice:
                th.rotate()  # asks for the timeline too
            elif th.timeline_on and not th.helper and now >= th.next_timeline:
                th.ask_timeline()  # attached: no slices, but the timeline every second
                th.next_timeline = now + SLICE_PERIOD

    def quiet(self) -> bool:
        """The --until load rule: loaded, and nothing pending or running for QUIET_MS."""
        now = time.monotonic()
        for th in self.threads:
            if not th.gone:
                th.probe(now)
        if not self.loaded or self.inflight:
            return False
        live = [th for th in self.threads if not th.gone and th.helper]
        if not all(th.probed_after_load and th.said_idle for th in live):
            return False
        last = max([self.last_net, self.last_console, *(th.last_active for th in live)])
        return now - last >= QUIET_MS / 1000.0

    def loaded_reset(self) -> None:
        for th in self.threads:
            th.probed_after_load = False

    # -- the end
    def stop_all(self) -> None:
        pending = [(th, th.stop_nowait()) for th in self.threads]
        for th, mid in pending:
            th.collect(mid)
        for th in self.threads:
            for e in list(th.session.events):
                th.take_slice(e)
            if th.profile is None and th.slices:
                th.collect(None)

    def read_origins(self, timeout: float = 3.0) -> None:
        """The threads' time origins, and the last of each page's timeline."""
        for th in self.threads:
            if self.us is not None:
                th.poll_timeline()
                th.ask_timeline(last=True)
        for th in self.threads:
            # An iframe's document (and so its origin) is the one it navigated to.
            if (th.time_origin is None or th.kind == "iframe") and th.origin_mid is None:
                th.ask_origin()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and any(
            (th.origin_mid is not None or th.timeline_mids) and not th.session.closed
            for th in self.threads
        ):
            if not self.client.pump(0.02):
                break
            for th in self.threads:
                th.poll_origin()
                th.poll_timeline()

    def read_measures(self, timeout: float = 3.0) -> list[dict]:
        """The main document's `performance.measure` entries (at most MEASURES_MAX, names
        cut to 200 characters): name, startTime and duration in ms on its performance
        clock. The page's own values, checked as data; [] when it gave none."""
        s = self.main.session
        try:
            mid = s.send_nowait("Runtime.evaluate", {"expression": _MEASURES_JS,
                                                      "returnByValue": True})
            deadline = time.monotonic() + timeout
            while mid not in s.replies and time.monotonic() < deadline and not s.closed:
                if not self.client.pump(0.02):
                    return []
            got = s.result(mid, 0).get("result", {}).get("value")
        except (CDPError, CDPClosed, EngineError):
            return []
        out = []
        for e in got if isinstance(got, list) else ():
            if (isinstance(e, list) and len(e) == 3 and isinstance(e[0], str)
                    and all(isinstance(x, (int, float)) and math.isfinite(x) for x in e[1:])):
                out.append({"name": e[0], "startTime": float(e[1]), "duration": float(e[2])})
        return out[:MEASURES_MAX]

    def recording(
        self,
        requested_ms: float,
        rename: Callable[[str], str] | None = None,
        quiet_end: bool = False,
    ) -> tuple[list[Track], list[str]]:
        """The threads' tracks (and what was lost). `rename` respells every script URL:
        the served local files' `file://` names (serve.PageServer.file_url). `quiet_end`:
        the --until load rule ended the page; each thread's samples after the page's last
        work on any thread are dropped (JSThread.to_track)."""
        mono_to_epoch_us = (time.time_ns() - time.monotonic_ns()) / 1000.0
        tracks: list[Track] = []
        lost: list[str] = []
        if rename is not None:
            for th in self.threads:
                th.url = rename(th.url) if th.url else th.url
        # Tracks are named by URL, known for an iframe only once it navigated.
        seen: dict[str, int] = {}
        for th in self.threads[1:]:
            base = th.url or th.kind
            if th.worker_name:  # named by the page: the name first, so --track NAME finds it
                base = f"{th.worker_name} ({base})"
            seen[base] = seen.get(base, 0) + 1
            th.name = base if seen[base] == 1 else f"{base} #{seen[base]}"
        # The rule's wait began at the page's last work on any thread, or its last request's
        # end: a thread's idle while another still worked (a page waiting on its worker) or
        # while a request was pending (an image asked for after the load) is not that wait.
        ends = [e for e in (th.work_end_us() for th in self.threads) if e is not None] \
            if quiet_end else []
        if ends and self.last_net_us is not None:
            ends.append(self.last_net_us)
        page_end = max(ends) if ends else None
        for th in self.threads:
            t = th.to_track(requested_ms, mono_to_epoch_us, rename, quiet_end=quiet_end,
                            page_end_us=page_end)
            if t is not None:
                tracks.append(t)
            elif th.lost:
                lost.append(f"{th.name}: {th.lost}")
        return tracks, lost
