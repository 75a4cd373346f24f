"""Headless Chromium for the tests and the benchmarks, started one way: the binary jsprof's
engine would use (`find_chromium`: $JSPROF_CHROMIUM or chromium on PATH) with the engine's
own headless flags (HEADLESS_FLAGS), driven by Playwright (`playwright_chromium`), by the
engine itself (`engine_browser`), or left open on a DevTools port for `record --cdp`
(`cdp_chromium`); the loopback server of the pages it loads (`page_server`) and a page
opened once its script is ready (`open_page`). A missing Chromium fails loudly with
find_chromium's message, never a skip. The benchmarks import this module too
(benchmarks/bench_viewer.py, bench_header.py).
"""

from __future__ import annotations

import http.server
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from jsprof.engines.chromium.browser import HEADLESS_FLAGS, Browser, find_chromium


def chromium_path() -> str:
    """The Chromium binary every test and benchmark starts."""
    return find_chromium()


@contextmanager
def playwright_chromium(*args: str) -> Iterator[Any]:
    """Playwright's Browser on that Chromium (Playwright downloads no browser of its own),
    closed at the end; `args` go after the headless flags."""
    os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
    from playwright.sync_api import sync_playwright

    exe = chromium_path()
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, headless=True, args=[*HEADLESS_FLAGS, *args])
        try:
            yield b
        finally:
            b.close()


@contextmanager
def fresh_pages(browser: Any) -> Iterator[Any]:
    """A module's Playwright Browser (launched once: a launch and close is ~2 s of a test,
    more under load) for one test: the contexts the test opens (each `new_page()` makes
    its own) are closed at its end, so no page of one test runs on into the next."""
    before = list(browser.contexts)
    try:
        yield browser
    finally:
        for c in browser.contexts:
            if not any(c is b for b in before):
                c.close()


@contextmanager
def engine_browser() -> Iterator[Browser]:
    """jsprof's own Browser (the Chromium engine's, on a debugging pipe); at the end it is
    closed and its process is gone."""
    chromium_path()  # its message, not the engine's, when Chromium is missing
    b = Browser()
    try:
        yield b
    finally:
        b.close()
    assert b.proc.poll() is not None, "Chromium outlived Browser.close()"


@contextmanager
def cdp_chromium(profile: Path, url: str, timeout: float = 60.0) -> Iterator[str]:
    """Chromium showing `url` with its DevTools port open on 127.0.0.1 (what `jsprof record
    --cdp` attaches to, as to a browser the user started); yields the endpoint
    (http://127.0.0.1:PORT) and kills the browser's process group at the end."""
    proc = subprocess.Popen(
        [chromium_path(), *HEADLESS_FLAGS, f"--user-data-dir={profile}",
         "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", url],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        port = 0
        while not port and time.monotonic() < deadline:
            # The file may exist before Chromium has written the port into it.
            text = port_file.read_text() if port_file.exists() else ""
            port = int(text.split()[0]) if text.split() else 0
            time.sleep(0.1)
        assert port, "Chromium did not open its debugging port"
        yield f"http://127.0.0.1:{port}"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def open_page(opener: Any, url: str, *, profiled: bool = False, timeout_ms: float = 15000
              ) -> Any:
    """A new Playwright page of `opener` (a Browser or a BrowserContext) at `url`, once the
    page's script has set `window.ready`; with `profiled`, the jsprof client the page
    started (`window.profiler`) must be profiling, else the test fails with its reason."""
    page = opener.new_page()
    page.goto(url)
    page.wait_for_function("window.ready === true", timeout=timeout_ms)
    if profiled:
        assert page.evaluate("profiler.enabled"), page.evaluate("profiler.reason")
    return page


def wait_entry(page: Any, entry_type: str, match: str, timeout_ms: float = 30000) -> None:
    """Wait until the browser has reported to `page` a performance entry of `entry_type`
    ("long-animation-frame", "event") for which the JS expression `match` of `e` holds,
    instead of a sleep that a loaded machine outlasts. A PerformanceObserver of the page's
    own client made before this one is given the same entry in the same task, first: once
    this returns, the client holds it."""
    page.evaluate("""([type, src, ms]) => new Promise((resolve, reject) => {
      const hit = new Function("e", "return (" + src + ");");
      const t = setTimeout(() => reject(new Error(`no ${type} entry with ${src} in ${ms} ms`)), ms);
      new PerformanceObserver((l, o) => {
        if (l.getEntries().some(hit)) { clearTimeout(t); o.disconnect(); resolve(true); }
      }).observe(type === "event" ? {type, buffered: true, durationThreshold: 16}
                                  : {type, buffered: true});
    })""", [entry_type, match, timeout_ms])


HTML = "text/html; charset=utf-8"
# What a page server answers a GET with: the body, its Content-Type and more headers.
Response = tuple[bytes, str, dict[str, str]]


@contextmanager
def page_server(respond: Callable[[str], Response]) -> Iterator[str]:
    """A loopback HTTP server of the pages Chromium loads: `respond(path)` answers each
    GET (200, no caching); yields its origin (http://127.0.0.1:PORT), shut at the end."""

    class Pages(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            body, ctype, headers = respond(self.path)
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Cache-Control", "no-store")
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Pages)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
