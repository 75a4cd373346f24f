"""How a recording or run ends: `--until load` (the load event, then nothing pending for
QUIET_MS), `--until js:EXPR`, `--duration`, Ctrl-C/SIGTERM, the page closing or crashing,
the browser going away."""

from __future__ import annotations

import contextlib
import json
import time

from ...errors import EngineError, UsageError
from .._process import SignalFlag
from ..cdp import CDPClosed, CDPError
from .helper import SOURCE_URL
from .page import PageSession
from .thread import PROBE_PERIOD


def parse_until(until: str | None) -> str | None:
    """'load' (None) or 'js:EXPR' -> None for load, else the expression."""
    if until is None or until == "load":
        return None
    if until.startswith("js:") and until[3:].strip():
        return until[3:]
    raise UsageError(f"--until {until!r}: give `load` or `js:EXPRESSION`")


def check_until(page: PageSession, until_expr: str | None) -> None:
    """A js: expression that does not compile can end nothing: the probe's eval threw a
    SyntaxError each time, unseen, and the page ran on to --duration (exit 0). So it is
    compiled once in the page (not run), before the page is opened, and refused in one
    line with V8's message."""
    if until_expr is None:
        return
    r = page.main.session.send(
        "Runtime.compileScript",
        {"expression": until_expr, "sourceURL": "", "persistScript": False},
    )
    details = r.get("exceptionDetails")
    if not details:
        return
    exc = details.get("exception") or {}
    message = str(exc.get("description") or details.get("text") or "SyntaxError")
    given = "js:" + until_expr
    if len(given) > 80:
        given = given[:77] + "..."
    raise UsageError(
        f"--until {given!r}: the expression does not compile ({message.splitlines()[0]}); "
        "give a JavaScript expression, e.g. --until 'js:window.done === true'"
    )


def wait_for_end(
    page: PageSession,
    until_expr: str | None,
    duration: float | None,
    sig: SignalFlag,
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
                        # Probed while the profiler runs: the wrapper and the eval'd
                        # expression carry jsprof's URL, so their frames are dropped (the
                        # page's functions they call stay, with their samples).
                        "expression": f"Boolean(eval({json.dumps(until_expr + SOURCE_URL)}))"
                        + SOURCE_URL,
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
