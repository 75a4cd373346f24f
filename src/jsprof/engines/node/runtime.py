"""A long-lived Node process driven over CDP, and its V8 profiler behind the
RuntimeProfiler contract (engines/base.py)."""

from __future__ import annotations

from typing import Any, ClassVar

from ...errors import EngineError, UsageError
from ...trace import ProfilerTrace, Track
from ..base import DEFAULT_INTERVAL_MS, RuntimeProfiler
from ..cdp import CDPClient
from .isolate import _exception_text, _Isolate
from .process import NodeProcess, effective_interval, interval_us


class NodeRuntime:
    """A Node process kept alive and driven over CDP: `eval(source)` runs JavaScript."""

    def __init__(self, node: str | None = None) -> None:
        # An interval holds the event loop open until we close the process.
        self.proc = NodeProcess(["-e", "setInterval(() => {}, 1 << 30)"], node=node)
        try:
            self.client = CDPClient(self.proc.url or "")
            self.session = self.client.session
            self.session.send("Runtime.runIfWaitingForDebugger")
            self.isolate = _Isolate(self.session, "main")
            self.isolate.read_origin()
        except BaseException:
            self.proc.kill()
            raise

    def eval(self, source: str, timeout: float = 60.0) -> Any:
        r = self.session.send(
            "Runtime.evaluate",
            {"expression": source, "returnByValue": True, "awaitPromise": True},
            timeout=timeout,
        )
        if "exceptionDetails" in r:
            from ...errors import JSError

            raise JSError(_exception_text(r["exceptionDetails"]))
        return r.get("result", {}).get("value")

    def profiler(self) -> NodeProfiler:
        return NodeProfiler(self)

    def close(self) -> None:
        self.client.close()
        self.proc.kill(grace=1.0)

    def __enter__(self) -> NodeRuntime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class NodeProfiler(RuntimeProfiler):
    """V8's CPU profiler of a NodeRuntime, behind the engine contract."""

    type: ClassVar[str] = "v8"

    def __init__(self, runtime: NodeRuntime) -> None:
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
        # A runtime that already ran code (a restart, or code run before the first start)
        # has optimised code without inlining positions: re-optimise under the profiler.
        self.runtime.isolate.start(interval_us(self._interval), reoptimize=not is_create)
        self._started = True

    def stop(self, is_destroy: bool = False) -> ProfilerTrace | None:
        if not self._started:
            return None
        iso = self.runtime.isolate
        iso.collect(iso.stop_nowait())
        self._started = False
        if iso.profile is None:
            raise EngineError(f"node: {iso.lost or 'no profile delivered'}")
        requested = effective_interval(self._interval)
        self._track = iso.track(requested, "node")
        iso.profile = None
        return self._track.trace if self._track else None

    def track(self, name: str = "main") -> Track | None:
        if self._track is None:
            return None
        self._track.name = name
        return self._track

    @property
    def started(self) -> bool:
        return self._started
