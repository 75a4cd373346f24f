"""`attach_cdp`: profile a tab of a browser the user already runs with remote debugging,
then leave it as it was. Loopback endpoints only, unless allowed."""

from __future__ import annotations

import contextlib
import time
from typing import TextIO

from ...errors import EngineError, UsageError
from ...trace import Recording
from .._process import SignalFlag
from .._v8session import start_profiler
from ..base import DEFAULT_INTERVAL_MS
from ..cdp import CDPClient, CDPClosed, CDPError
from .helper import SOURCE_URL, attach_timeline_source
from .page import PageSession
from .thread import effective_interval, interval_us


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
        with SignalFlag() as sig:
            s = page.main.session
            s.send("Runtime.enable")
            s.send(
                "Target.setAutoAttach",
                {"autoAttach": True, "waitForDebuggerOnStart": False, "flatten": True},
            )
            start_profiler(s, us)
            page.main.profiling = True
            page.main.ask_origin()
            # The page's long frames and interactions, as `record` has them (taken away
            # again before detaching). A page that refuses it is profiled all the same.
            with contextlib.suppress(CDPError, EngineError):
                s.send("Runtime.evaluate", {"expression": attach_timeline_source()}, timeout=10)
                page.main.timeline_on = True
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
                # Leave the tab as it was: no domain or observer of ours stays on.
                for th in page.threads:
                    if th.gone or th.session.closed:
                        continue
                    with contextlib.suppress(CDPClosed, CDPError, EngineError):
                        if th.timeline_on:
                            th.session.send(
                                "Runtime.evaluate",
                                {
                                    "expression": "globalThis.__jsprofTimeline && "
                                    "__jsprofTimeline.stop()" + SOURCE_URL
                                },
                                timeout=5,
                            )
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
