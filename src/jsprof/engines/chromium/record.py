"""`record_chromium`: open a URL, a local .html page or a .js/.mjs script (served from
loopback, see serve.py) in headless Chromium and profile it, a track per thread."""

from __future__ import annotations

import os
import signal
import urllib.parse
from collections.abc import Sequence
from typing import TextIO

from ...errors import EngineError, JSError, UsageError
from ...trace import Recording
from .._ending import interruption, signum_of
from .._process import SignalFlag
from ..base import DEFAULT_INTERVAL_MS
from ..cdp import CDPClosed
from .browser import Browser
from .endings import check_until, parse_until, wait_for_end
from .page import PageSession
from .serve import PageServer, serve_target
from .thread import effective_interval, interval_us


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
    if os.path.isdir(target):
        raise UsageError(f"{target}: is a directory; give a URL or a .html, .js or .mjs file")
    if not os.path.isfile(target):
        raise UsageError(f"{target}: no such file; give a URL or a .html, .js or .mjs file")
    ext = os.path.splitext(target)[1].lower()
    if ext not in (".html", ".htm", ".js", ".mjs"):
        raise UsageError(f"{target}: give a .html, .js or .mjs file (or a URL)")
    if not os.access(target, os.R_OK):
        # The page server would answer 404 and the recording would be of an empty page.
        raise UsageError(f"{target}: permission denied; give a file you can read")
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
        server, url = serve_target(str(value))
    else:
        url = str(value)
    try:
        if browser is not None:
            return _record_in(
                browser,
                url,
                us,
                sample_interval,
                until_expr,
                duration,
                stdout,
                stderr,
                target,
                server,
            )
        with Browser(chromium) as own:
            return _record_in(
                own, url, us, sample_interval, until_expr, duration, stdout, stderr, target, server
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
    server: PageServer | None = None,
) -> Recording:
    session, target_id = browser.new_page()
    page = PageSession(browser.client, session, us, stdout, stderr)
    if server is not None:
        page.rename_text = server.file_urls_in
        page.served_root = server.root
    how = "ok"
    measures: list[dict] = []
    with SignalFlag() as sig:
        try:
            page.prepare()
            try:
                check_until(page, until_expr)
            except UsageError:
                browser.close_page(target_id)  # a browser given by the caller lives on
                raise
            page.navigate(url)
            how = wait_for_end(page, until_expr, duration, sig)
            if how not in ("browser-exited",):
                if how not in ("crashed", "closed"):
                    measures = page.read_measures()
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
    # A served local file is named by its file:// URL, not by the server's random port.
    rename = server.file_url if server is not None else None
    # ended by the load rule: what followed the page going quiet is jsprof's wait
    quiet_end = how == "ok" and until_expr is None
    tracks, lost = page.recording(effective_interval(sample_interval), rename, quiet_end)
    if not tracks:
        code = browser.proc.poll()
        raise EngineError(
            f"{label}: Chromium delivered no profile ({how}; browser exit code {code}); "
            "nothing was recorded"
        )
    meta = tracks[0].meta
    meta.update(target=label, exit=how, chromium=browser.version.get("product"))
    if how == "interrupted" and sig.signum is not None:
        meta["signal"] = signal.Signals(sig.signum).name
    if tracks[0].name != "main":
        meta["mainLost"] = True
    if page.errors:
        meta["errors"] = list(page.errors)
        meta["error"] = page.errors[0]
    if lost:
        meta["lost"] = lost
    if page.until_problem:
        meta["untilProblem"] = page.until_problem
    if measures and tracks[0].name == "main":
        meta["measures"] = measures
    return Recording(tracks)


def check_target(p: str, engine: str = "chromium") -> str:
    """`p` if Chromium can open it (a URL, or a local .html/.js/.mjs file), else a
    UsageError."""
    resolve_target(p)
    return p


def record_target(
    p: str,
    *,
    sample_interval: float,
    args: Sequence[str] = (),
    duration: float | None = None,
    until: str | None = None,
    progress: object = None,
) -> tuple[Recording, BaseException | None]:
    """One track per thread; the page's first uncaught error, Ctrl-C or a page or browser
    that died are returned as the error (record_chromium never raises for the page)."""
    if args:
        raise UsageError(f"{p}: a page takes no arguments ({' '.join(args)!r})")
    rec = record_chromium(p, sample_interval, until=until, duration=duration)
    meta = rec.tracks[0].meta
    error: BaseException | None = None
    how = meta.get("exit")
    if how == "interrupted":
        error = interruption(signum_of(meta.get("signal"), signal.SIGINT))
    elif how in ("crashed", "browser-exited"):
        what = "the page crashed" if how == "crashed" else "Chromium exited unexpectedly"
        error = EngineError(f"{p}: {what}; the samples taken so far were kept")
    elif meta.get("errors"):
        text = str(meta["errors"][0])
        error = JSError(text.splitlines()[0] if text else "uncaught error", text)
        error.printed = True  # type: ignore[attr-defined]  # the page's stderr had it
    return rec, error
