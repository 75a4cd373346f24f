"""A long-lived Node process driven over CDP, and its V8 profiler behind the
RuntimeProfiler contract (engines/base.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...errors import EngineError
from .._v8runtime import V8RuntimeProfiler
from .._v8session import evaluate
from ..cdp import CDPClient, CDPTimeout
from .isolate import _Isolate
from .process import MIN_INTERVAL_US, NodeProcess, process_state

if TYPE_CHECKING:
    from ...trace import Track


class NodeRuntime:
    """A Node process kept alive and driven over CDP: `eval(source)` runs JavaScript."""

    def __init__(self, node: str | None = None) -> None:
        # An interval holds the event loop open until we close the process. Node is not
        # held for the debugger (--inspect, not --inspect-brk): nothing runs before our
        # first eval anyway, and a held Node could stay held. Node handles a
        # runIfWaitingForDebugger that comes before it starts to wait (its inspector opens
        # first; under load the command can be handled in between) as a no-op, then waits
        # for a go that never comes. It still answers commands from
        # its wait loop, but no microtask runs there, so an evaluate with awaitPromise
        # (every eval) never answered: CI's "no CDP reply within 60 s", Node's main thread
        # in a futex (in Agent::WaitForConnectByOptions, said gdb): 35 of 3,074 starts, six
        # at a time beside six busy loops; 0 of 2,460 so.
        self.proc = NodeProcess(
            ["-e", "setInterval(() => {}, 1 << 30)"], node=node,
            inspect=("--inspect=127.0.0.1:0",),
        )
        try:
            self.client = CDPClient(self.proc.url or "")
            self.session = self.client.session
            self.isolate = _Isolate(self.session, "main")
            self.isolate.read_origin()
        except BaseException:
            self.proc.kill()
            raise

    def eval(self, source: str, timeout: float = 60.0) -> Any:
        try:
            return evaluate(self.session, source, timeout)
        except CDPTimeout as e:
            # Busy in the script, stopped, or hung: what the kernel says of the process
            # and its threads tells which.
            raise CDPTimeout(
                f"node (pid {self.proc.pid}): {e}; {process_state(self.proc.pid)}"
            ) from None

    def profiler(self) -> NodeProfiler:
        return NodeProfiler(self)

    def close(self) -> None:
        self.client.close()
        self.proc.kill(grace=1.0)

    def __enter__(self) -> NodeRuntime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class NodeProfiler(V8RuntimeProfiler):
    """V8's CPU profiler of a NodeRuntime, behind the engine contract."""

    min_us = MIN_INTERVAL_US

    def __init__(self, runtime: NodeRuntime) -> None:
        super().__init__()
        self.runtime = runtime

    def _start(self, us: int, is_create: bool) -> None:
        # A runtime that already ran code (a restart, or code run before the first start)
        # has optimised code without inlining positions: re-optimise under the profiler.
        self.runtime.isolate.start(us, reoptimize=not is_create)

    def _stop(self, requested_ms: float) -> Track | None:
        iso = self.runtime.isolate
        iso.collect(iso.stop_nowait())
        if iso.profile is None:
            raise EngineError(f"node: {iso.lost or 'no profile delivered'}")
        track = iso.track(requested_ms, "node")
        iso.profile = None
        return track
