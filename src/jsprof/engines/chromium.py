"""V8 in headless Chromium, driven over the DevTools protocol on `--remote-debugging-pipe`.

- `record_chromium(target, ...)`: open a URL, a local .html page or a .js/.mjs script (see
  engines/chromium_serve.py) and profile it: the page's main thread is the `main` track,
  each dedicated worker and out-of-process iframe its own track named by its URL.
- `run_chromium(path, ...)`: run a page or script with the browser's *native* `Profiler`
  (served with `Document-Policy: js-profiling`); console to stdout/stderr.
- `attach_cdp(endpoint, ...)`: profile a tab of a browser the user already runs.
- `ChromiumRuntime` + `ChromiumProfiler`: one page behind the RuntimeProfiler contract.

How it is done (measured on Chromium 156):
- The browser is started with no port at all (the pipe), a fresh profile folder, in its
  own process group, with a parent-death signal: it never outlives jsprof.
- Profiling starts on the blank tab before navigation; V8's inspector keeps the profiler
  state of a session and restores it (interval included) in the renderer the navigation
  lands in, before the page's first script. Workers and iframes are auto-attached
  paused (`waitForDebuggerOnStart`), get `setSamplingInterval` then `start`, then run.
- Timestamps: V8 profiles count microseconds of the monotonic clock Chromium's
  `performance.timeOrigin` is derived from; each track is made relative to its own
  context's time origin (page or worker), so they line up with `performance.now()`.
- Nothing lost: while recording, each thread's profile is also taken in one-second slices
  (nested `console.profile` titles on the same sampler); a crashed page, an ended worker
  or a browser killed from outside leave those. Ctrl-C stops every profiler cleanly.
- Our helper (js/chromium_page.js) and the expressions we evaluate carry the source URL
  `INTERNAL_URL`; their frames are removed from the profiles before conversion.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from importlib import resources as _res
from typing import Any, ClassVar, TextIO

from ..errors import EngineError, JSError, UsageError
from ..trace import ProfilerTrace, Recording, Track
from .base import DEFAULT_INTERVAL_MS, RuntimeProfiler
from .cdp import CDPClient, CDPClosed, CDPError, Session
from .cdp_pipe import child_pipes, install_in_child

ENGINE = "chromium"
HEADLESS_FLAGS = (
    "--headless",
    "--no-sandbox",  # as root (CI, containers) Chromium refuses to start with its sandbox
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--mute-audio",
    "--no-default-browser-check",
)
INTERNAL_URL = "jsprof-internal://chromium_page.js"
_SOURCE_URL = f"\n//# sourceURL={INTERNAL_URL}"
MIN_INTERVAL_US = 50
SLICE_PERIOD = 1.0  # s: at most this much is lost when a thread dies unannounced
_SLICE_PREFIX = "jsprof-slice-"
QUIET_MS = 500  # the --until load rule: no task ran for this long
PROBE_PERIOD = 0.1  # s
PROFILE_STOP_TIMEOUT = 120.0


def find_chromium(exe: str | None = None) -> str:
    """The browser: the argument, $JSPROF_CHROMIUM, or chromium/google-chrome on PATH."""
    names = [exe] if exe else []
    env = os.environ.get("JSPROF_CHROMIUM")
    if env and not exe:
        names = [env]
    names = names or ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"]
    for n in names:
        path = shutil.which(n)
        if path:
            return path
    raise EngineError(
        f"cannot find Chromium ({', '.join(names)}); install it (Debian: apt-get install "
        "chromium, or `make chromium`) or set JSPROF_CHROMIUM to its path"
    )


def interval_us(sample_interval: float) -> int:
    if not sample_interval >= 0 or sample_interval == float("inf"):
        raise UsageError(f"sample interval must be a finite number >= 0 ms, got {sample_interval}")
    if sample_interval == 0:
        return MIN_INTERVAL_US
    return max(1, round(sample_interval * 1000))


def effective_interval(sample_interval: float) -> float:
    return sample_interval if sample_interval > 0 else MIN_INTERVAL_US / 1000.0


def _helper_source() -> str:
    return _res.files("jsprof").joinpath("js", "chromium_page.js").read_text("utf-8")


_prctl: Any = None
if sys.platform == "linux":
    with contextlib.suppress(OSError, AttributeError):
        _prctl = ctypes.CDLL(None, use_errno=True).prctl


# ---- the browser process ------------------------------------------------------------------


class Browser:
    """A headless Chromium on a debugging pipe, in its own process group and profile
    folder; `close()` (or jsprof's death: PR_SET_PDEATHSIG) ends it."""

    def __init__(
        self,
        chromium: str | None = None,
        extra_args: tuple[str, ...] = (),
        start_timeout: float = 60.0,
    ) -> None:
        exe = find_chromium(chromium)
        self.user_data = tempfile.mkdtemp(prefix="jsprof-chromium-")
        conn, fds = child_pipes()
        self._log_path = os.path.join(self.user_data, "chromium.log")
        cmd = [
            exe,
            *HEADLESS_FLAGS,
            f"--user-data-dir={self.user_data}",
            "--remote-debugging-pipe",
            *extra_args,
            "about:blank",
        ]

        def child() -> None:
            install_in_child(fds)
            if _prctl is not None:
                _prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG

        try:
            with open(self._log_path, "wb") as log:
                self.proc = subprocess.Popen(
                    cmd,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    start_new_session=True,
                    close_fds=False,  # fds 3 and 4 are the pipe; ours are all close-on-exec
                    preexec_fn=child,
                )
        except OSError as e:
            conn.close()
            shutil.rmtree(self.user_data, ignore_errors=True)
            raise EngineError(f"cannot start {exe}: {e}") from None
        finally:
            for fd in fds:
                os.close(fd)
        self.client = CDPClient("chromium (pipe)", connection=conn)
        self._contexts: dict[str, str] = {}
        try:
            self.version = self.client.session.send("Browser.getVersion", timeout=start_timeout)
        except (CDPClosed, EngineError) as e:
            tail = self.log_tail()
            self.close()
            raise EngineError(
                f"{exe} did not answer on its debugging pipe ({e}); its last words: {tail}"
            ) from None

    def log_tail(self, n: int = 300) -> str:
        try:
            with open(self._log_path, "rb") as f:
                data = f.read()[-n:]
        except OSError:
            return "(no log)"
        return data.decode(errors="replace").strip().replace("\n", " | ") or "(nothing)"

    def new_page(self) -> tuple[Session, str]:
        """A fresh blank tab, in a browser context of its own, and a flattened session.

        Its own context, because the profiler must already run in the renderer the page
        lands in: the first navigation of a fresh context's blank tab stays in the tab's
        still unassigned renderer, where we started it; in a shared context Chromium may
        move the page to another renderer of the same site, and V8's inspector restores
        the profiler there only after the page's first scripts ran (measured: 1 in 6)."""
        root = self.client.session
        ctx = root.send("Target.createBrowserContext", {"disposeOnDetach": True})
        cid = ctx["browserContextId"]
        tid = root.send("Target.createTarget", {"url": "about:blank", "browserContextId": cid})[
            "targetId"
        ]
        self._contexts[tid] = cid
        sid = root.send("Target.attachToTarget", {"targetId": tid, "flatten": True})["sessionId"]
        return self.client.attach(sid, via_node_worker=False), tid

    def close_page(self, target_id: str) -> None:
        """Close a tab of ours and drop its browser context (cookies, caches, processes)."""
        root = self.client.session
        cid = self._contexts.pop(target_id, None)
        with contextlib.suppress(CDPClosed, CDPError, EngineError):
            root.send("Target.closeTarget", {"targetId": target_id}, timeout=10)
            if cid is not None:
                root.send("Target.disposeBrowserContext", {"browserContextId": cid}, timeout=10)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self, grace: float = 3.0) -> int | None:
        if self.proc.poll() is None and not self.client.closed:
            with contextlib.suppress(CDPClosed, EngineError):
                self.client.session.send_nowait("Browser.close", reply=False)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                pass
        self.client.close()
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, sig)
            try:
                self.proc.wait(2.0)
                break
            except subprocess.TimeoutExpired:
                continue
        # Renderers and helpers left in the group go too.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        shutil.rmtree(self.user_data, ignore_errors=True)
        return self.proc.returncode

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---- console ------------------------------------------------------------------------------


def _preview_value(p: dict) -> str:
    t = p.get("type")
    v = p.get("value", "")
    if t == "string":
        return repr_js_string(v)
    if t == "object" and p.get("subtype") not in (None, "null"):
        return v or p.get("subtype", "")
    return str(v)


def repr_js_string(s: str) -> str:
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def format_remote(o: dict, top: bool = True) -> str:
    """A Runtime.RemoteObject as the console shows it (strings unquoted at the top level)."""
    t = o.get("type")
    if t == "string":
        return o.get("value", "") if top else repr_js_string(o.get("value", ""))
    if t == "undefined":
        return "undefined"
    if t == "boolean":
        return "true" if o.get("value") else "false"
    if t == "number":
        return o.get("description") or str(o.get("value"))
    if t == "bigint":
        return o.get("description") or str(o.get("unserializableValue", ""))
    if t == "symbol":
        return o.get("description", "Symbol()")
    if t == "function":
        return o.get("description", "function")
    sub = o.get("subtype")
    if sub == "null":
        return "null"
    if sub == "error":
        return o.get("description", "Error")
    pv = o.get("preview")
    if pv and sub in (None, "array", "typedarray"):
        props = pv.get("properties", [])
        if sub in ("array", "typedarray"):
            body = ", ".join(_preview_value(p) for p in props)
        else:
            body = ", ".join(f"{p.get('name')}: {_preview_value(p)}" for p in props)
        if pv.get("overflow"):
            body += ", …"
        if sub in ("array", "typedarray"):
            return f"[{body}]"
        cls = o.get("className", "Object")
        prefix = "" if cls == "Object" else cls + " "
        return prefix + "{" + body + "}"
    return o.get("description") or str(o.get("value", ""))


def format_console(args: list[dict]) -> str:
    """Arguments joined by spaces; a leading format string's %s %d %i %f %o %O %c apply."""
    if not args:
        return ""
    parts: list[str] = []
    rest = list(args)
    first = rest[0]
    if first.get("type") == "string" and "%" in first.get("value", "") and len(rest) > 1:
        fmt = first["value"]
        rest = rest[1:]
        out = []
        i = 0
        while i < len(fmt):
            ch = fmt[i]
            if ch == "%" and i + 1 < len(fmt):
                spec = fmt[i + 1]
                if spec == "%":
                    out.append("%")
                    i += 2
                    continue
                if spec in "sdifoOc" and rest:
                    a = rest.pop(0)
                    if spec == "c":
                        pass  # CSS: no meaning on a terminal
                    elif spec in "di":
                        v = a.get("value")
                        out.append(str(int(v)) if isinstance(v, (int, float)) and v == v else "NaN")
                    elif spec == "f":
                        v = a.get("value")
                        out.append(str(v) if isinstance(v, (int, float)) else "NaN")
                    else:
                        out.append(format_remote(a, top=spec == "s"))
                    i += 2
                    continue
            out.append(ch)
            i += 1
        parts.append("".join(out))
    parts.extend(format_remote(a) for a in rest)
    return " ".join(parts)


_STDERR_TYPES = {"error", "warning", "assert", "trace"}


def exception_text(details: dict) -> str:
    """An uncaught error's stack, or the rejected value, as one text."""
    exc = details.get("exception") or {}
    if exc.get("subtype") == "error" and exc.get("description"):
        return str(exc["description"])
    head = str(details.get("text") or "Uncaught")
    if exc:
        return f"{head} {format_remote(exc, top=False)}"
    return head


# ---- one thread (page, worker or iframe) ---------------------------------------------------


@dataclass
class _Thread:
    session: Session
    kind: str  # "page", "worker", "iframe"
    url: str
    name: str = "main"
    profiling: bool = False
    profile: dict | None = None
    slices: list[dict] = field(default_factory=list)
    slice_no: int = 0
    next_slice: float = float("inf")
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

    # -- profiler
    def start_profiler(self, us: int) -> None:
        """Queued without waiting: commands run in order, before the thread's first line."""
        s = self.session
        s.send_nowait("Profiler.enable", reply=False)
        s.send_nowait("Profiler.setSamplingInterval", {"interval": us}, reply=False)
        s.send_nowait("Profiler.start", reply=False)
        self.profiling = True

    def rotate(self) -> None:
        """End the current slice and start the next in one call (no tick falls between)."""
        if not self.profiling or not self.helper or self.gone or self.session.closed:
            return
        k = self.slice_no + 1
        prev = f"'{_SLICE_PREFIX}{self.slice_no}'" if self.slice_no else "''"
        expr = f"globalThis.__jsprof && __jsprof.slice('{_SLICE_PREFIX}{k}', {prev})"
        with contextlib.suppress(CDPClosed):
            self.session.send_nowait(
                "Runtime.evaluate", {"expression": expr + _SOURCE_URL}, reply=False
            )
        self.slice_no = k
        self.next_slice = time.monotonic() + SLICE_PERIOD

    def take_slice(self, event: dict) -> bool:
        p = event.get("params", {})
        if event.get("method") == "Profiler.consoleProfileFinished" and str(
            p.get("title", "")
        ).startswith(_SLICE_PREFIX):
            self.slices.append(p["profile"])
            return True
        return False

    def stop_nowait(self) -> int | None:
        if not self.profiling or self.gone or self.session.closed:
            return None
        try:
            return self.session.send_nowait("Profiler.stop")
        except CDPClosed:
            return None

    def collect(self, mid: int | None, timeout: float = PROFILE_STOP_TIMEOUT) -> None:
        if mid is not None:
            try:
                self.profile = self.session.result(mid, timeout)["profile"]
            except (CDPClosed, CDPError, EngineError) as e:
                self.lost = f"the profile could not be taken ({e})"
        elif self.profiling and self.profile is None:
            self.lost = "the thread ended before its profile could be taken"
        self.profiling = False
        if self.profile is None and self.slices:
            from .node.slices import concat_profiles

            self.profile = concat_profiles(self.slices)
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
                    + _SOURCE_URL,
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
                            + _SOURCE_URL,
                            "awaitPromise": True,
                            "returnByValue": True,
                        },
                    )
                    self.probe_sent = now
            return
        if mid not in self.session.replies:
            if now - self.probe_sent > PROBE_PERIOD:
                self.last_active = now  # the thread has not come round to our task: busy
            return
        self.probe_mid = None
        try:
            v = self.session.result(mid, 0).get("result", {}).get("value")
        except (CDPError, CDPClosed, EngineError):
            return
        self.probed_after_load = True
        if not (isinstance(v, list) and len(v) == 2):
            return
        pending, since_ms = v
        if pending or now - self.probe_sent > PROBE_PERIOD:
            self.last_active = now
        else:
            self.last_active = max(self.last_active, now - float(since_ms) / 1000.0)

    def to_track(self, requested_ms: float, mono_to_epoch_us: float) -> Track | None:
        if self.profile is None:
            return None
        from ..formats.cpuprofile import profile_to_trace

        profile = strip_internal(self.profile)
        if self.time_origin is not None:
            origin_us = self.time_origin * 1000.0 - mono_to_epoch_us
            time_origin = self.time_origin
        else:
            origin_us = float(profile.get("startTime", 0))
            time_origin = (origin_us + mono_to_epoch_us) / 1000.0
        trace, _ = profile_to_trace(profile, self.url or self.name, origin_us=origin_us)
        gap = trace.median_gap()
        meta: dict[str, Any] = {"url": self.url, "kind": self.kind}
        if gap is not None:
            meta["medianIntervalMs"] = round(gap, 4)
        if self.partial:
            meta["partial"] = self.lost
        return Track(
            name=self.name,
            trace=trace,
            time_origin=time_origin,
            engine=ENGINE,
            sample_interval=requested_ms,
            requested_interval=requested_ms,
            meta=meta,
        )


_PSEUDO = ("(root)", "(program)", "(idle)", "(garbage collector)")


def _dropped(cf: dict) -> bool:
    """jsprof's own code, or a built-in/API function (no script: scriptId 0), which the
    native Profiler never shows either (its time goes to the JavaScript caller)."""
    if cf.get("url") == INTERNAL_URL:
        return True
    return str(cf.get("scriptId", "")) == "0" and cf.get("functionName") not in _PSEUDO


def strip_internal(profile: dict) -> dict:
    """The profile without jsprof's own frames and built-ins (see `_dropped`): their
    children and samples go to the nearest caller; URL fragments are dropped, as the
    native Profiler does."""
    nodes = profile.get("nodes") or []
    by_id = {n["id"]: n for n in nodes}
    parent: dict[int, int] = {}
    for n in nodes:
        for c in n.get("children") or ():
            parent[c] = n["id"]
    internal = {n["id"] for n in nodes if _dropped(n.get("callFrame") or {})}
    has_fragment = any("#" in n.get("callFrame", {}).get("url", "") for n in nodes)
    if not internal and not has_fragment:
        return profile

    def keep(i: int) -> int:
        while i in internal and i in parent:
            i = parent[i]
        return i

    out_nodes = []
    for n in nodes:
        if n["id"] in internal and n["id"] in parent:
            continue
        m = dict(n)
        cf = m.get("callFrame")
        if cf and "#" in cf.get("url", ""):
            m["callFrame"] = dict(cf, url=cf["url"].split("#", 1)[0])
        kids: list[int] = []
        stack = list(n.get("children") or ())
        while stack:
            c = stack.pop(0)
            if c in internal:
                stack[:0] = list(by_id[c].get("children") or ())
            else:
                kids.append(c)
        m["children"] = kids
        out_nodes.append(m)
    out = dict(profile)
    out["nodes"] = out_nodes
    if internal:
        out["samples"] = [keep(s) if s in internal else s for s in profile.get("samples") or []]
    return out


# ---- a page session: record, run, attach --------------------------------------------------


class _SigFlag:
    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self) -> None:
        self.hit = False
        self._old: dict[int, Any] = {}

    def __enter__(self) -> _SigFlag:
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                self._old[sig] = signal.signal(sig, self._on)
        return self

    def _on(self, signum: int, frame: Any) -> None:
        self.hit = True

    def __exit__(self, *exc: object) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)


def parse_until(until: str | None) -> str | None:
    """'load' (None) or 'js:EXPR' -> None for load, else the expression."""
    if until is None or until == "load":
        return None
    if until.startswith("js:") and until[3:].strip():
        return until[3:]
    raise UsageError(f"--until {until!r}: give `load` or `js:EXPRESSION`")


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
        self.stop_on_error = stop_on_error
        self.main = _Thread(session, "page", "")
        self.threads: list[_Thread] = [self.main]
        self.by_session: dict[str, _Thread] = {}
        self.errors: list[str] = []
        self.loaded = False
        self.closed_by_page = False
        self.crashed = False
        self.inflight: set[str] = set()
        self.last_net = 0.0
        self.last_console = 0.0
        self.frame_id: str | None = None
        self._helper = _helper_source() + _SOURCE_URL if helper else None
        self.network = network

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
            s.send("Page.addScriptToEvaluateOnNewDocument", {"source": self._helper})
            self.main.helper = True
        s.send(
            "Target.setAutoAttach",
            {"autoAttach": True, "waitForDebuggerOnStart": True, "flatten": True},
        )
        if self.us is not None and start_profiler:
            self.main.start_profiler(self.us)

    def navigate(self, url: str) -> None:
        self.main.url = url
        r = self.main.session.send("Page.navigate", {"url": url})
        if r.get("errorText"):
            raise EngineError(f"{url}: Chromium could not load it ({r['errorText']})")

    # -- output
    def _print(self, text: str, err: bool) -> None:
        out = (self.stderr or sys.stderr) if err else (self.stdout or sys.stdout)
        try:
            out.write(text + "\n")
            out.flush()
        except (OSError, ValueError):
            pass

    # -- events
    def _attach(self, params: dict, parent: _Thread) -> None:
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
        th = _Thread(sess, kind, url, name=name)
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

    def _handle(self, th: _Thread, e: dict) -> None:
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
            self._print(format_console(p.get("args", [])), p.get("type") in _STDERR_TYPES)
        elif m == "Runtime.exceptionThrown":
            text = exception_text(p.get("exceptionDetails", {}))
            self.errors.append(text)
            self._print(text, True)
            th.last_active = now
        elif m == "Target.attachedToTarget":
            self._attach(p, th)
        elif m == "Target.detachedFromTarget":
            gone = self.by_session.get(p.get("sessionId", ""))
            if gone is not None:
                gone.gone = True
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
        elif m == "Network.requestWillBeSent":
            self.inflight.add(p.get("requestId", ""))
            self.last_net = now
        elif m in ("Network.loadingFinished", "Network.loadingFailed"):
            self.inflight.discard(p.get("requestId", ""))
            self.last_net = now

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
        return alive

    def tick(self) -> None:
        now = time.monotonic()
        for th in self.threads:
            th.poll_origin()
            if self.us is not None and now >= th.next_slice:
                th.rotate()

    def quiet(self) -> bool:
        """The --until load rule: loaded, and nothing pending or running for QUIET_MS."""
        now = time.monotonic()
        for th in self.threads:
            if not th.gone:
                th.probe(now)
        if not self.loaded or self.inflight:
            return False
        live = [th for th in self.threads if not th.gone and th.helper]
        if not all(th.probed_after_load for th in live):
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

    def read_origins(self, timeout: float = 2.0) -> None:
        for th in self.threads:
            # An iframe's document (and so its origin) is the one it navigated to.
            if (th.time_origin is None or th.kind == "iframe") and th.origin_mid is None:
                th.ask_origin()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and any(
            th.origin_mid is not None and not th.session.closed for th in self.threads
        ):
            if not self.client.pump(0.02):
                break
            for th in self.threads:
                th.poll_origin()

    def recording(self, requested_ms: float) -> tuple[list[Track], list[str]]:
        mono_to_epoch_us = (time.time_ns() - time.monotonic_ns()) / 1000.0
        tracks: list[Track] = []
        lost: list[str] = []
        # Tracks are named by URL, known for an iframe only once it navigated.
        seen: dict[str, int] = {}
        for th in self.threads[1:]:
            base = th.url or th.kind
            seen[base] = seen.get(base, 0) + 1
            th.name = base if seen[base] == 1 else f"{base} #{seen[base]}"
        for th in self.threads:
            t = th.to_track(requested_ms, mono_to_epoch_us)
            if t is not None:
                tracks.append(t)
            elif th.lost:
                lost.append(f"{th.name}: {th.lost}")
        return tracks, lost


def _wait(
    page: PageSession,
    until_expr: str | None,
    duration: float | None,
    sig: _SigFlag,
    on_error_stop: bool = False,
) -> str:
    """Serve the page until an ending; returns how it ended."""
    deadline = None if duration is None else time.monotonic() + duration
    expr_mid: int | None = None
    expr_sent = 0.0
    was_loaded = False
    s = page.main.session
    while True:
        if sig.hit:
            return "interrupted"
        if deadline is not None and time.monotonic() >= deadline:
            return "duration"
        if not page.pump(0.02):
            return "browser-exited"
        page.tick()
        if page.crashed:
            return "crashed"
        if page.closed_by_page or page.main.gone:
            return "closed"
        if on_error_stop and page.errors:
            return "error"
        if page.loaded and not was_loaded:
            page.loaded_reset()
        was_loaded = page.loaded
        if until_expr is None:
            if page.quiet():
                return "ok"
            continue
        now = time.monotonic()
        if expr_mid is None and now - expr_sent >= PROBE_PERIOD:
            with contextlib.suppress(CDPClosed):
                expr_mid = s.send_nowait(
                    "Runtime.evaluate",
                    {
                        "expression": f"Boolean(eval({_js_string(until_expr)}))",
                        "returnByValue": True,
                    },
                )
                expr_sent = now
        elif expr_mid is not None and expr_mid in s.replies:
            mid, expr_mid = expr_mid, None
            with contextlib.suppress(CDPError, CDPClosed, EngineError):
                r = s.result(mid, 0)
                if r.get("result", {}).get("value") is True:
                    return "ok"


def _js_string(s: str) -> str:
    import json

    return json.dumps(s)


def resolve_target(target: str) -> tuple[str, str | None]:
    """(kind, value): ("url", url) for http(s)/file URLs, ("file", path) for local files."""
    low = target.lower()
    if low.startswith(("http://", "https://", "file://")):
        parsed = urllib.parse.urlparse(target)
        if low.startswith("http") and not parsed.netloc:
            raise UsageError(f"{target}: not a URL with a host; give http://HOST/PATH")
        return "url", target
    if "://" in target or low.startswith(("javascript:", "data:")):
        raise UsageError(
            f"{target}: only http://, https:// and file:// URLs, or a local .html/.js/.mjs file"
        )
    if not os.path.isfile(target):
        raise UsageError(f"{target}: no such file; give a URL or a .html, .js or .mjs file")
    ext = os.path.splitext(target)[1].lower()
    if ext not in (".html", ".htm", ".js", ".mjs"):
        raise UsageError(f"{target}: give a .html, .js or .mjs file (or a URL)")
    return "file", target


def record_chromium(
    target: str,
    sample_interval: float = DEFAULT_INTERVAL_MS,
    until: str | None = None,
    duration: float | None = None,
    chromium: str | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    browser: Browser | None = None,
) -> Recording:
    """Open `target` in headless Chromium and profile it; one track per thread.

    `until`: "load" (default) or "js:EXPR"; `duration` (s) caps either. Tracks: "main"
    (the page), then each worker/iframe by URL. Main track meta: `url`, `exit` (ok,
    duration, interrupted, crashed, closed, browser-exited), `errors` (uncaught errors'
    stacks) and `partial`/`lost` when a thread's profile could not be taken whole.
    `browser`: use this running Browser (a new tab in it) instead of starting one.
    """
    us = interval_us(sample_interval)
    until_expr = parse_until(until)
    kind, value = resolve_target(target)
    server = None
    if kind == "file":
        from .chromium_serve import serve_target

        server, url = serve_target(str(value))
    else:
        url = str(value)
    try:
        if browser is not None:
            return _record_in(
                browser, url, us, sample_interval, until_expr, duration, stdout, stderr, target
            )
        with Browser(chromium) as own:
            return _record_in(
                own, url, us, sample_interval, until_expr, duration, stdout, stderr, target
            )
    finally:
        if server is not None:
            server.close()


def _record_in(
    browser: Browser,
    url: str,
    us: int,
    sample_interval: float,
    until_expr: str | None,
    duration: float | None,
    stdout: TextIO | None,
    stderr: TextIO | None,
    label: str,
) -> Recording:
    session, target_id = browser.new_page()
    page = PageSession(browser.client, session, us, stdout, stderr)
    how = "ok"
    with _SigFlag() as sig:
        try:
            page.prepare()
            page.navigate(url)
            how = _wait(page, until_expr, duration, sig)
            if how not in ("browser-exited",):
                page.read_origins()
                page.stop_all()
            browser.close_page(target_id)
        except CDPClosed:
            how = "browser-exited"
        if how == "browser-exited":
            for th in page.threads:
                while th.session.events:
                    th.take_slice(th.session.events.popleft())
                th.collect(None)
    tracks, lost = page.recording(effective_interval(sample_interval))
    if not tracks:
        code = browser.proc.poll()
        raise EngineError(
            f"{label}: Chromium delivered no profile ({how}; browser exit code {code}); "
            "nothing was recorded"
        )
    meta = tracks[0].meta
    meta.update(target=label, exit=how, chromium=browser.version.get("product"))
    if tracks[0].name != "main":
        meta["mainLost"] = True
    if page.errors:
        meta["errors"] = page.errors
        meta["error"] = page.errors[0]
    if lost:
        meta["lost"] = lost
    return Recording(tracks)


# ---- jsprof run: the native Profiler ------------------------------------------------------


def run_chromium(
    path: str,
    allow_profiling: bool = True,
    chromium: str | None = None,
    until: str | None = None,
    duration: float | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    browser: Browser | None = None,
) -> int:
    """Run a .js/.mjs/.html file in a page where `new Profiler(...)` is Chromium's own.

    Console lines go to stdout/stderr; the first uncaught error or unhandled rejection is
    printed and gives exit code 1. The run ends when the page calls window.close(), an
    error is uncaught, or by the `--until load` rule. Returns the exit code (130 on Ctrl-C).
    """
    kind, value = resolve_target(path)
    if kind != "file":
        raise UsageError(f"{path}: jsprof run takes a local .js, .mjs or .html file")
    until_expr = parse_until(until)
    from .chromium_serve import serve_target

    headers = {"Document-Policy": "js-profiling"} if allow_profiling else {}
    server, url = serve_target(str(value), headers=headers)
    own = browser is None
    try:
        if browser is None:
            browser = Browser(chromium)
        session, target_id = browser.new_page()
        page = PageSession(browser.client, session, None, stdout, stderr)
        with _SigFlag() as sig:
            try:
                page.prepare()
                page.navigate(url)
                how = _wait(page, until_expr, duration, sig, on_error_stop=True)
                # Console messages already on their way are still printed.
                if how not in ("browser-exited", "crashed"):
                    page.pump(0.05)
                    browser.close_page(target_id)
            except CDPClosed:
                how = "browser-exited"
    finally:
        server.close()
        if own and browser is not None:
            browser.close()
    if how == "interrupted":
        return 130
    if how == "crashed":
        print(f"jsprof: {path}: the page crashed", file=stderr or sys.stderr)
        return 1
    if how == "browser-exited":
        print(f"jsprof: {path}: Chromium exited unexpectedly", file=stderr or sys.stderr)
        return 1
    return 1 if page.errors else 0


# ---- attach to a running browser ----------------------------------------------------------


def _is_loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def attach_cdp(
    endpoint: str,
    target: str | None = None,
    duration: float | None = None,
    sample_interval: float = DEFAULT_INTERVAL_MS,
    allow_remote: bool = False,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> Recording:
    """Profile the tab of a running browser (remote debugging at `endpoint`, e.g.
    http://127.0.0.1:9222) whose URL contains `target` (or the first page), for
    `duration` s or until Ctrl-C; then stop, detach, and leave the browser as it was."""
    import urllib.request

    import orjson

    us = interval_us(sample_interval)
    parsed = urllib.parse.urlparse(endpoint if "://" in endpoint else "http://" + endpoint)
    host = parsed.hostname or ""
    if parsed.scheme not in ("http", "ws") or not parsed.port:
        raise UsageError(
            f"--cdp {endpoint}: give the browser's debugging endpoint as http://HOST:PORT"
        )
    if not _is_loopback(host) and not allow_remote:
        raise UsageError(
            f"--cdp {endpoint}: {host} is not a loopback address; the DevTools protocol gives "
            "full control of that browser, so only 127.0.0.1/localhost unless --allow-remote"
        )
    base = f"http://{parsed.netloc}"
    try:
        with urllib.request.urlopen(base + "/json/version", timeout=5) as r:
            version = orjson.loads(r.read())
    except (OSError, ValueError) as e:
        raise EngineError(f"--cdp {endpoint}: no browser answers there ({e})") from None
    ws = version.get("webSocketDebuggerUrl")
    if not ws:
        raise EngineError(f"--cdp {endpoint}: the answer has no webSocketDebuggerUrl")
    client = CDPClient(ws)
    try:
        root = client.session
        infos = root.send("Target.getTargets").get("targetInfos", [])
        pages = [t for t in infos if t.get("type") == "page"]
        chosen = [t for t in pages if target is None or target in t.get("url", "")]
        if not chosen:
            urls = ", ".join(t.get("url", "?") for t in pages) or "none"
            raise UsageError(f"--target {target!r}: no open tab's URL contains it (tabs: {urls})")
        info = chosen[0]
        sid = root.send("Target.attachToTarget", {"targetId": info["targetId"], "flatten": True})[
            "sessionId"
        ]
        session = client.attach(sid, via_node_worker=False)
        page = PageSession(client, session, us, stdout, stderr, helper=False, network=False)
        page.main.url = info.get("url", "")
        how = "duration"
        with _SigFlag() as sig:
            s = page.main.session
            s.send("Runtime.enable")
            s.send(
                "Target.setAutoAttach",
                {"autoAttach": True, "waitForDebuggerOnStart": False, "flatten": True},
            )
            s.send("Profiler.enable")
            s.send("Profiler.setSamplingInterval", {"interval": us})
            s.send("Profiler.start")
            page.main.profiling = True
            page.main.ask_origin()
            end = None if duration is None else time.monotonic() + duration
            while True:
                if sig.hit:
                    how = "interrupted"
                    break
                if end is not None and time.monotonic() >= end:
                    break
                if not page.pump(0.05):
                    how = "browser-exited"
                    break
                page.tick()
                if page.main.gone:
                    how = "closed"
                    break
            if how != "browser-exited":
                page.read_origins()
                page.stop_all()
                # Leave the tab as it was: no domain of ours stays on.
                for th in page.threads:
                    if th.gone or th.session.closed:
                        continue
                    with contextlib.suppress(CDPClosed, CDPError, EngineError):
                        th.session.send("Profiler.disable", timeout=5)
                        th.session.send("Runtime.disable", timeout=5)
                with contextlib.suppress(CDPClosed, CDPError, EngineError):
                    root.send("Target.detachFromTarget", {"sessionId": sid}, timeout=5)
    finally:
        client.close()
    tracks, lost = page.recording(effective_interval(sample_interval))
    if not tracks:
        raise EngineError(f"--cdp {endpoint}: the browser delivered no profile ({how})")
    tracks[0].meta.update(exit=how, endpoint=endpoint, chromium=version.get("Browser"))
    if lost:
        tracks[0].meta["lost"] = lost
    return Recording(tracks)


# ---- a long-lived page for the RuntimeProfiler contract --------------------------------


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
            from .chromium_serve import PageServer

            self.server = PageServer(
                tempfile.gettempdir(), page=b"<!doctype html><title>jsprof</title>"
            )
            from .chromium_serve import GENERATED_PAGE

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
