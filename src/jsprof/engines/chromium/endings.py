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


# A probe of `--until js:EXPR` may take this long on the page's main thread; a statement
# that never ends (`js:while(true){}`) is stopped by V8 then (Runtime.evaluate's timeout).
# Left running, it held the main thread, the profile could not be stopped, and jsprof hung
# past --duration (2 min, then "Chromium delivered no profile").
PROBE_TIMEOUT_MS = 1000


def _given(until_expr: str) -> str:
    given = "js:" + until_expr
    return given[:77] + "..." if len(given) > 80 else given


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
    replies = threw = 0
    thrown = ""
    expr_sent = 0.0
    was_loaded = False
    s = page.main.session
    while True:
        ended = "interrupted" if sig.hit else None
        if ended is None and deadline is not None and time.monotonic() >= deadline:
            ended = "duration"
        if ended and until_expr is not None and expr_mid is not None and (
            time.monotonic() - expr_sent > PROBE_TIMEOUT_MS / 1000
        ):
            page.until_problem = (
                f"--until {_given(until_expr)!r}: the expression did not finish on the "
                f"page's main thread (a probe ran {time.monotonic() - expr_sent:.1f} s), so "
                f"it never ended the recording; give an expression that returns, e.g. "
                "--until 'js:window.done === true'"
            )
            return ended
        if ended == "interrupted":
            return ended
        if ended == "duration":
            if until_expr is not None and replies and threw == replies:
                # one line for the user (record's and run's notes): it could never be true
                page.until_problem = (
                    f"--until {_given(until_expr)!r}: the expression threw at each of its "
                    f"{replies} probes ({thrown}), so it never ended the recording; "
                    "--duration did"
                )
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
                        "timeout": PROBE_TIMEOUT_MS,
                    },
                )
                expr_sent = now
        elif expr_mid is not None and expr_mid in s.replies:
            mid, expr_mid = expr_mid, None
            try:
                r = s.result(mid, 0)
            except CDPError as e:  # a probe V8 stopped at its timeout: an error reply
                terminated = "terminat" in str(e).lower()
                r = {"exceptionDetails": {"text": str(e)}} if terminated else None
            except (CDPClosed, EngineError):
                r = None
            if r is not None:
                replies += 1
                details = r.get("exceptionDetails")
                if details:
                    threw += 1
                    exc = details.get("exception") or {}
                    text = str(exc.get("description") or details.get("text") or "")
                    thrown = (text.splitlines() or ["an exception"])[0][:120]
                    if "terminat" in text.lower():
                        page.until_problem = (
                            f"--until {_given(until_expr)!r}: the expression did not finish "
                            f"in {PROBE_TIMEOUT_MS} ms on the page's main thread and was "
                            "stopped; give an expression that returns, e.g. "
                            "--until 'js:window.done === true'"
                        )
                        return "until-stuck"
                elif r.get("result", {}).get("value") is True:
                    return "ok"
