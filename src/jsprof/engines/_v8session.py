"""What the Node and Chromium engines share of V8 behind a CDP session: the sampling
interval in CDP's units, starting and stopping V8's CPU profiler, evaluating JavaScript.
Light to import (Node is started before the CDP client and numpy are imported)."""

from __future__ import annotations

from collections.abc import Callable

from ..errors import JSError, UsageError

# typing.TYPE_CHECKING without importing typing: `record --engine node` imports this
# before it starts Node.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ..trace import ProfilerTrace, Track
    from .cdp import Session


def interval_us(sample_interval: float, min_us: int) -> int:
    """CDP wants whole microseconds; 0 means the engine's minimum `min_us`."""
    if not sample_interval >= 0 or sample_interval == float("inf"):
        raise UsageError(f"sample interval must be a finite number >= 0 ms, got {sample_interval}")
    if sample_interval == 0:
        return min_us
    return max(1, round(sample_interval * 1000))


def effective_interval(sample_interval: float, min_us: int) -> float:
    """The interval asked of V8 in ms: the request, or the engine's minimum for 0."""
    return sample_interval if sample_interval > 0 else min_us / 1000.0


def start_profiler(session: Session, us: int, wait: bool = True) -> None:
    """Enable V8's profiler, set its interval, start it: one round trip, the three run in
    order. The interval must come before the start: V8 refuses to change the interval of
    a running profiler. wait=False does not wait for the replies (the commands still run
    before the first line of a thread paused at its start)."""
    ids = [
        session.send_nowait("Profiler.enable", reply=wait),
        session.send_nowait("Profiler.setSamplingInterval", {"interval": us}, reply=wait),
        session.send_nowait("Profiler.start", reply=wait),
    ]
    if wait:
        for mid in ids:
            session.result(mid)


def stop_nowait(session: Session) -> int | None:
    """Ask for the profile; the reply's id, or None when the session is gone already."""
    from .cdp import CDPClosed

    if session.closed:
        return None
    try:
        return session.send_nowait("Profiler.stop")
    except CDPClosed:
        return None


def exception_text(details: dict) -> str:
    """An uncaught error's stack, or what was thrown, from CDP's exceptionDetails."""
    exc = details.get("exception") or {}
    return str(exc.get("description") or details.get("text") or "uncaught exception")


def evaluate(
    session: Session,
    source: str,
    timeout: float,
    describe: Callable[[dict], str] = exception_text,
) -> Any:
    """Run `source` (awaiting a promise it gives) and return its value as JSON; what it
    throws is a JSError (message: its first line; `describe` makes the text)."""
    r = session.send(
        "Runtime.evaluate",
        {"expression": source, "returnByValue": True, "awaitPromise": True},
        timeout=timeout,
    )
    if "exceptionDetails" in r:
        text = describe(r["exceptionDetails"])
        raise JSError(text.splitlines()[0] if text else text, text)
    return r.get("result", {}).get("value")


def make_track(
    name: str,
    trace: ProfilerTrace,
    time_origin: float,
    requested_ms: float,
    engine: str,
    meta: dict[str, Any] | None = None,
) -> Track:
    """One thread's Track: the interval asked of V8, and in `meta` the median gap V8
    achieved (`medianIntervalMs`) beside the engine's own keys."""
    from ..trace import Track

    meta = dict(meta or {})
    gap = trace.median_gap()
    if gap is not None:
        meta["medianIntervalMs"] = round(gap, 4)
    return Track(
        name=name,
        trace=trace,
        time_origin=time_origin,
        engine=engine,
        sample_interval=requested_ms,
        requested_interval=requested_ms,
        meta=meta,
    )
