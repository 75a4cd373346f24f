"""`run_chromium`: run a page or script where `new Profiler(...)` is the browser's own
(served with `Document-Policy: js-profiling`); console to stdout/stderr."""

from __future__ import annotations

import os
import sys
import urllib.parse
from collections.abc import Sequence
from typing import TextIO

from ...errors import JSError, UsageError
from .._process import SignalFlag
from ..cdp import CDPClosed
from .browser import Browser
from .endings import check_until, parse_until, wait_for_end
from .page import PageSession
from .record import resolve_target
from .serve import serve_target


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
    headers = {"Document-Policy": "js-profiling"} if allow_profiling else {}
    server, url = serve_target(str(value), headers=headers)
    own = browser is None
    try:
        if browser is None:
            browser = Browser(chromium)
        session, target_id = browser.new_page()
        page = PageSession(browser.client, session, None, stdout, stderr)
        page.rename_text = server.file_urls_in
        page.served_root = server.root
        if str(value).lower().endswith((".js", ".mjs")):
            page.script_url = server.url("/" + urllib.parse.quote(os.path.basename(value)))
        with SignalFlag() as sig:
            try:
                page.prepare()
                try:
                    check_until(page, until_expr)
                except UsageError:
                    browser.close_page(target_id)  # a browser given by the caller lives on
                    raise
                page.navigate(url)
                how = wait_for_end(page, until_expr, duration, sig, on_error_stop=True)
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
    if page.not_compiled is not None:
        # Nothing of the script ran: the user's mistake (the CLI says it in one line).
        name, message, line, column = page.not_compiled
        error = JSError(message, "", name)
        error.compile, error.where = True, f"{path}:{line}:{column}"
        raise error
    if how == "interrupted":
        return 130
    if how == "crashed":
        print(f"jsprof: {path}: the page crashed", file=stderr or sys.stderr)
        return 1
    if how == "browser-exited":
        print(f"jsprof: {path}: Chromium exited unexpectedly", file=stderr or sys.stderr)
        return 1
    return 1 if page.errors else 0


def run_script(
    path: str,
    args: Sequence[str] = (),
    allow_profiling: bool = True,
    until: str | None = None,
    duration: float | None = None,
) -> int:
    """The registry's `run` (engines/registry.py): a page takes no arguments."""
    if args:
        raise UsageError(f"{path}: a page takes no arguments ({' '.join(args)!r})")
    return run_chromium(path, allow_profiling=allow_profiling, until=until, duration=duration)
