"""V8 through Node.js: the inspector protocol (CDP) drives V8's own CPU profiler.

- `record_node(script, ...)`: run a script under `node --inspect-brk=127.0.0.1:0` (its own
  process group, random port, loopback only), profile the main thread and every worker
  thread (the inspector's NodeWorker domain), return a Recording with a track per thread.
- `attach_node(pid, ...)`: profile a running Node process (SIGUSR1 opens its inspector on
  127.0.0.1:9229), then close that inspector again.
- `NodeRuntime` + `NodeProfiler`: a long-lived Node process whose V8 profiler implements
  the RuntimeProfiler contract (engines/base.py).
- `run_node(script, ...)`: run a script with the spec's `Profiler` global (js/node_profiler.js).

V8's profile comes back as a CDP Profile and is converted by formats/cpuprofile.py: the one
place that knows CDP's units. Times are made relative to each thread's own
`performance.timeOrigin`, through the monotonic clock that V8's timestamps and
`process.hrtime` share.

How each ending is caught (measured, see shared/notes/ENGINES.md):
- main thread: with --inspect-brk Node waits for the debugger to disconnect after the
  script ends, throws or calls process.exit(), so Profiler.stop still works then;
- a worker thread does not wait: a `process.on('exit')` hook holding a `debugger`
  statement pauses it at its end, we stop its profiler, then resume it;
- Ctrl-C: jsprof gets SIGINT (Node is in another process group), stops every profiler,
  then ends Node;
- Node killed from outside: nothing was delivered; the error says so.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Sequence
from importlib import resources as _res
from typing import Any, BinaryIO, ClassVar

import orjson

from ..errors import EngineError, UsageError
from ..formats.cpuprofile import profile_to_trace
from ..trace import ProfilerTrace, Recording, Track
from .base import DEFAULT_INTERVAL_MS, RuntimeProfiler
from .cdp import CDPClient, CDPClosed, CDPError, Session

ENGINE = "node"
_WS_RE = re.compile(rb"Debugger listening on (ws://\S+)")
# Lines the inspector writes to stderr that are ours, not the script's.
_INSPECTOR_LINES = (
    b"Debugger listening on ",
    b"For help, see: https://nodejs.org/",
    b"Debugger attached.",
    b"Waiting for the debugger to disconnect...",
    b"Debugger ending on ",
)
_WAITING = b"Waiting for the debugger to disconnect..."
# Evaluated in each isolate: its epoch time origin and the same instant on the monotonic
# clock V8's profile timestamps use (microseconds), read back to back.
_ORIGIN_EXPR = (
    "(() => { const n = performance.now(); const h = process.hrtime.bigint();"
    " return [performance.timeOrigin, Number(h / 1000n) - n * 1000]; })()"
)
_WORKER_EXIT_FN = "jsprofWorkerExit"
_WORKER_EXIT_HOOK = f"process.on('exit', function {_WORKER_EXIT_FN}() {{ debugger; }}); 0"
MIN_INTERVAL_US = 100
PROFILE_STOP_TIMEOUT = 120.0  # s; a long recording's profile is big
# While recording, each thread's profile is also taken in slices this often (nested V8
# profiles on the same sampler), so that if Node is killed from outside, the samples up
# to the last slice survive. The full profile from Profiler.stop is used when there is one.
SLICE_PERIOD = 1.0  # s
_SLICE_PREFIX = "jsprof-slice-"
# console.profile/profileEnd as they are before the script runs (it may replace them later),
# kept as a remote object: nothing is added to the script's globals. Not require(): at the
# --inspect-brk pause Node's module system is not ready, and calling it there breaks it.
_CONSOLE_FNS = "((c) => [c.profile.bind(c), c.profileEnd.bind(c)])(console)"
# The main thread also reports an uncaught exception through that channel: a profile titled
# with the error, started and ended at once, reaches us as Profiler.consoleProfileStarted.
# (Runtime.enable would tell us too, but it makes every console.log of the script cost a
# protocol message with previews and a stack: measured 14x slower on a logging loop.)
_ERROR_PREFIX = "jsprof-error:"
_CONSOLE_FNS_MAIN = (
    "((c) => { const p = c.profile.bind(c), e = c.profileEnd.bind(c);"
    " process.on('uncaughtExceptionMonitor', (err) => {"
    f" const t = '{_ERROR_PREFIX}' + String((err && err.stack) || err); p(t); e(t); }});"
    " return [p, e]; })(console)"
)
_ROTATE_FN = "function (next, prev) { this[0](next); if (prev) this[1](prev); }"


def find_node(node: str | None = None) -> str:
    """The node binary: the argument, $JSPROF_NODE, or `node` on PATH."""
    exe = node or os.environ.get("JSPROF_NODE") or "node"
    path = shutil.which(exe)
    if path is None:
        raise EngineError(
            f"cannot find Node.js ({exe!r}); install Node 18+ or set JSPROF_NODE to its path"
        )
    return path


def interval_us(sample_interval: float) -> int:
    """CDP wants whole microseconds. 0 means the minimum, 0.1 ms as in the Profiler global:
    V8 takes finer requests but spaces samples ~120-180 us apart anyway."""
    if not sample_interval >= 0 or sample_interval == float("inf"):
        raise UsageError(f"sample interval must be a finite number >= 0 ms, got {sample_interval}")
    if sample_interval == 0:
        return MIN_INTERVAL_US
    return max(1, round(sample_interval * 1000))


def effective_interval(sample_interval: float) -> float:
    """The interval asked of V8 in ms: the request, or V8's minimum for 0."""
    return sample_interval if sample_interval > 0 else MIN_INTERVAL_US / 1000.0


# ---- the node process ---------------------------------------------------------------------


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL it if jsprof dies (even by SIGKILL), so no Node
    process is ever left behind. Linux only (prctl PR_SET_PDEATHSIG); a no-op elsewhere.
    The signal follows the thread that started Node, so start it from a thread that lives
    as long as the recording (record_node and NodeRuntime do)."""
    if sys.platform != "linux":
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class NodeProcess:
    """`node --inspect-brk=127.0.0.1:0 ...` in its own process group; forwards its stderr
    (less the inspector's own lines) and finds the WebSocket URL there."""

    def __init__(
        self,
        argv: Sequence[str],
        node: str | None = None,
        node_args: Sequence[str] = (),
        env: dict[str, str] | None = None,
        stderr: BinaryIO | None = None,
        start_timeout: float = 15.0,
    ) -> None:
        exe = find_node(node)
        cmd = [exe, "--inspect-brk=127.0.0.1:0", *node_args, *argv]
        self._err_out = stderr
        self.url: str | None = None
        self.waiting = threading.Event()  # "Waiting for the debugger to disconnect..."
        self._url_ready = threading.Event()
        try:
            self.proc = subprocess.Popen(
                cmd,
                stderr=subprocess.PIPE,
                start_new_session=True,
                env=env,
                preexec_fn=_die_with_parent,
            )
        except OSError as e:
            raise EngineError(f"cannot start {exe}: {e}") from None
        self._reader = threading.Thread(target=self._read_stderr, daemon=True, name="node-stderr")
        self._reader.start()
        if not self._url_ready.wait(start_timeout) or self.url is None:
            self.kill()
            raise EngineError(
                f"node did not open its inspector within {start_timeout:g} s "
                f"(exit code {self.proc.poll()}); is {exe} Node.js 18 or newer?"
            )

    def _write_err(self, line: bytes) -> None:
        out = self._err_out
        if out is None:
            out = getattr(sys.stderr, "buffer", None)
        try:
            if out is None:
                sys.stderr.write(line.decode(errors="replace"))
                sys.stderr.flush()
            else:
                out.write(line)
                out.flush()
        except (OSError, ValueError):
            pass  # our stderr went away; the script's stderr is not worth dying for

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in iter(self.proc.stderr.readline, b""):
            if self.url is None:
                m = _WS_RE.search(line)
                if m:
                    self.url = m.group(1).decode()
                    self._url_ready.set()
                    continue
            if line.startswith(_WAITING):
                self.waiting.set()
                continue
            if line.startswith(_INSPECTOR_LINES):
                continue
            self._write_err(line)
        self._url_ready.set()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def kill(self, grace: float = 2.0) -> int | None:
        """End the whole process group: SIGTERM, then SIGKILL after `grace` s."""
        if self.proc.poll() is None:
            for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.proc.pid, sig)
                try:
                    self.proc.wait(wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        # Worker or child processes left in the group die with it.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self._reader.join(2.0)
        return self.proc.poll()

    def wait_exit(self, timeout: float = 10.0) -> int | None:
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return self.kill()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self._reader.join(2.0)
        return self.proc.returncode


# ---- one isolate (main thread or a worker) -------------------------------------------------


class _Isolate:
    """One V8 isolate seen through a CDP session: its clock and its profiler."""

    def __init__(self, session: Session, name: str) -> None:
        self.session = session
        self.name = name
        self.time_origin = 0.0  # epoch ms
        self.origin_us: float | None = None  # the same instant, monotonic microseconds
        self.profile: dict | None = None
        self.lost: str | None = None
        self.profiling = False
        self.slices: list[dict] = []
        self.partial = False  # the profile was joined from slices
        self.slice_no = 0
        self.next_slice = float("inf")
        self._console_id: str | None = None

    def read_origin(self) -> None:
        r = self.session.send(
            "Runtime.evaluate", {"expression": _ORIGIN_EXPR, "returnByValue": True}
        )
        value = r.get("result", {}).get("value")
        if isinstance(value, list) and len(value) == 2:
            self.time_origin, self.origin_us = float(value[0]), float(value[1])

    def start(self, us: int, reoptimize: bool = False) -> None:
        s = self.session
        s.send("Profiler.enable")
        # Must come before start: V8 refuses to change the interval of a running profiler.
        s.send("Profiler.setSamplingInterval", {"interval": us})
        s.send("Profiler.start")
        if reoptimize:
            # Code V8 optimised while no profiler ran lacks the positions of inlined
            # functions, so their frames vanish (measured: a timer callback optimised
            # before an attach showed only as its caller). Switching precise coverage on
            # and off deoptimises everything; it re-optimises with the profiler running.
            # The price is a short slowdown while hot code is optimised again.
            with contextlib.suppress(CDPError):
                s.send("Profiler.startPreciseCoverage", {"callCount": False, "detailed": False})
                s.send("Profiler.stopPreciseCoverage")
        self.profiling = True

    def begin_slices(self, report_errors: bool = False) -> None:
        """Start the first slice (after `start`). Without slices we only lose the
        insurance against a kill from outside, so failures here are not fatal."""
        try:
            r = self.session.send(
                "Runtime.evaluate",
                {
                    "expression": _CONSOLE_FNS_MAIN if report_errors else _CONSOLE_FNS,
                    "objectGroup": "jsprof",
                },
            )
            ok = "exceptionDetails" not in r and r.get("result", {}).get("subtype") == "array"
            self._console_id = r["result"].get("objectId") if ok else None
        except (CDPError, CDPClosed):
            self._console_id = None
        if self._console_id is None:
            return
        self.slice_no = 0
        # Not waited for: commands run in order, so the slice starts before the script does
        # (waiting would cost ~40 ms: Node sends the reply after an event, Nagle-delayed).
        self.rotate()

    def rotate(self, wait: bool = False) -> None:
        """End the current slice and start the next in one call (no tick falls between)."""
        if self._console_id is None or not self.profiling or self.session.closed:
            return
        k = self.slice_no + 1
        prev = f"{_SLICE_PREFIX}{self.slice_no}" if self.slice_no else ""
        params = {
            "objectId": self._console_id,
            "functionDeclaration": _ROTATE_FN,
            "arguments": [{"value": f"{_SLICE_PREFIX}{k}"}, {"value": prev}],
        }
        try:
            if wait:
                self.session.send("Runtime.callFunctionOn", params)
            else:
                self.session.send_nowait("Runtime.callFunctionOn", params, reply=False)
        except (CDPError, CDPClosed):
            return
        self.slice_no = k
        self.next_slice = time.monotonic() + SLICE_PERIOD

    def take_slice(self, event: dict) -> bool:
        """Keep a slice that arrived (Profiler.consoleProfileFinished of ours)."""
        p = event.get("params", {})
        if event.get("method") == "Profiler.consoleProfileFinished" and str(
            p.get("title", "")
        ).startswith(_SLICE_PREFIX):
            self.slices.append(p["profile"])
            return True
        return False

    def fall_back_to_slices(self) -> None:
        """No full profile: join the slices taken so far, and say what was lost."""
        if self.profile is None and self.slices:
            from ..formats.cpuprofile import concat_profiles

            self.profile = concat_profiles(self.slices)
            self.lost = (
                f"the full profile was never delivered; kept {len(self.slices)} slice(s) "
                f"taken every {SLICE_PERIOD:g} s, so up to the last {SLICE_PERIOD:g} s is missing"
            )
            self.partial = True

    def stop_nowait(self) -> int | None:
        if not self.profiling or self.session.closed:
            return None
        try:
            return self.session.send_nowait("Profiler.stop")
        except CDPClosed:
            return None

    def collect(self, mid: int | None, timeout: float = PROFILE_STOP_TIMEOUT) -> None:
        if mid is None:
            if self.profiling and self.profile is None:
                self.lost = "the thread ended before its profile could be taken"
            self.profiling = False
            return
        try:
            self.profile = self.session.result(mid, timeout)["profile"]
        except (CDPClosed, CDPError, EngineError) as e:
            self.lost = f"the profile could not be taken ({e})"
        self.profiling = False

    def track(self, requested_ms: float, source: str) -> Track | None:
        if self.profile is None:
            return None
        trace, _ = profile_to_trace(self.profile, source, origin_us=self.origin_us)
        return _make_track(self.name, trace, self.time_origin, requested_ms)


def _make_track(name: str, trace: ProfilerTrace, time_origin: float, requested: float) -> Track:
    gap = trace.median_gap()
    meta: dict[str, Any] = {} if gap is None else {"median_interval_ms": round(gap, 4)}
    return Track(
        name=name,
        trace=trace,
        time_origin=time_origin,
        engine=ENGINE,
        sample_interval=requested,
        requested_interval=requested,
        meta=meta,
    )


# ---- record a script ----------------------------------------------------------------------


class _SigintFlag:
    """Turn Ctrl-C (and SIGTERM/SIGHUP: being told to end) into a flag while recording, so
    we stop the profiler and end Node before we go."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self) -> None:
        self.hit = False
        self._old: dict[int, Any] = {}

    def __enter__(self) -> _SigintFlag:
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                self._old[sig] = signal.signal(sig, self._on)
        return self

    def _on(self, signum: int, frame: Any) -> None:
        self.hit = True

    def __exit__(self, *exc: object) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)


def record_node(
    script: str | os.PathLike[str],
    args: Sequence[str] = (),
    sample_interval: float = DEFAULT_INTERVAL_MS,
    node: str | None = None,
    node_args: Sequence[str] = (),
    workers: bool = True,
    timeout: float | None = None,
) -> Recording:
    """Run `script` under Node with V8's sampling profiler; one track per thread.

    Tracks: "main", then "worker N" in the order workers started. `meta` of the main track:
    `script`, `args`, `exit` ("ok", "error", "interrupted", "timeout", "killed"), `exit_code`,
    `error` (the uncaught exception's text) when the script threw, and `partial` when Node
    died without delivering its profile and the slices taken while recording stand in. A
    worker whose profile could not be taken is listed in the main track's `meta["lost"]`.
    Raises EngineError when Node cannot start or dies before any profile is delivered.
    """
    path = os.fspath(script)
    if not os.path.isfile(path):
        raise UsageError(f"{path}: no such file; give the path of a .js, .mjs or .cjs script")
    us = interval_us(sample_interval)
    requested = effective_interval(sample_interval)
    proc = NodeProcess([path, *args], node=node, node_args=node_args)
    client: CDPClient | None = None
    isolates: list[_Isolate] = []
    error_text: str | None = None
    how = "ok"
    finished = False  # False while an exception unwinds: then Node is ended, not awaited
    try:
        client = CDPClient(proc.url or "")
        root = client.session
        main = _Isolate(root, "main")
        isolates.append(main)
        main.read_origin()
        # The end of the script: this event, or the same news on stderr, whichever is first.
        with contextlib.suppress(CDPError):
            root.send("NodeRuntime.notifyWhenWaitingForDisconnect", {"enabled": True})
        main.start(us)
        main.begin_slices(report_errors=True)
        if workers:
            root.send("NodeWorker.enable", {"waitForDebuggerOnStart": True})
        root.send("Runtime.runIfWaitingForDebugger")
        deadline = None if timeout is None else time.monotonic() + timeout
        with _SigintFlag() as sigint:
            while True:
                if sigint.hit:
                    how = "interrupted"
                    break
                if deadline is not None and time.monotonic() > deadline:
                    how = "timeout"
                    break
                # The end shows on Node's stderr ("Waiting for the debugger to disconnect"),
                # seen by the reader thread: poll often enough to stop within ~20 ms.
                if not client.pump(0.02):
                    break  # the socket closed: Node is gone
                while root.events:
                    e = root.events.popleft()
                    m = e["method"]
                    if main.take_slice(e):
                        continue
                    if m == "NodeRuntime.waitingForDisconnect":
                        proc.waiting.set()
                    elif m == "Profiler.consoleProfileStarted":
                        title = str(e["params"].get("title", ""))
                        if title.startswith(_ERROR_PREFIX):
                            error_text = title[len(_ERROR_PREFIX) :]
                    elif m == "NodeWorker.attachedToWorker":
                        isolates.append(_attach_worker(client, e["params"], us, len(isolates)))
                # Workers, including those a worker starts (appended while we go).
                for iso in isolates[1:]:
                    _service_worker(client, iso, us, isolates)
                now = time.monotonic()
                for iso in isolates:
                    if now >= iso.next_slice:
                        iso.rotate()
                if proc.waiting.is_set():
                    break
        # Stop every profiler still running: all requests first, so none waits on another.
        pending = [(iso, iso.stop_nowait()) for iso in isolates]
        for iso, mid in pending:
            iso.collect(mid)
        for iso in isolates:
            for e in list(iso.session.events):
                iso.take_slice(e)
            iso.fall_back_to_slices()
        # The stop's reply comes after every earlier event on the socket: an uncaught
        # exception reported just before the end is in the queue by now.
        for e in root.events:
            title = str(e.get("params", {}).get("title", ""))
            if e["method"] == "Profiler.consoleProfileStarted" and title.startswith(_ERROR_PREFIX):
                error_text = error_text or title[len(_ERROR_PREFIX) :]
        finished = True
    except CDPClosed:
        finished = True
        # Node went away without answering: whatever slices arrived are all there is.
        for iso in isolates:
            while iso.session.events:
                iso.take_slice(iso.session.events.popleft())
            iso.fall_back_to_slices()
    finally:
        if client is not None:
            client.close()
        if how in ("interrupted", "timeout") or not finished:
            code = proc.kill()
        else:
            # Closing the socket lets Node finish exiting on its own.
            code = proc.wait_exit(10.0)
    if (not isolates or isolates[0].profile is None) and how != "interrupted":
        signame = ""
        if code is not None and code < 0:
            signame = f" (killed by {signal.Signals(-code).name})"
        raise EngineError(
            f"{path}: node exited{signame} with code {code} before V8 delivered its profile; "
            "nothing was recorded (was it killed from outside?)"
        )
    tracks: list[Track] = []
    lost: list[str] = []
    for iso in isolates:
        t = iso.track(requested, f"{path} [{iso.name}]")
        if t is not None:
            tracks.append(t)
            if iso.partial:
                t.meta["partial"] = iso.lost
        elif iso.lost:
            lost.append(f"{iso.name}: {iso.lost}")
    if not tracks:
        raise EngineError(f"{path}: no profile was delivered by node")
    meta = tracks[0].meta
    meta.update(script=path, args=list(args), exit_code=code, node_pid=proc.pid)
    if how == "ok" and code is not None and code < 0:
        how = "killed"
        meta["signal"] = signal.Signals(-code).name
    if how == "ok" and (error_text is not None or (code or 0) != 0):
        how = "error"
    meta["exit"] = how
    if error_text is not None:
        meta["error"] = error_text
    if lost:
        meta["lost"] = lost
    return Recording(tracks)


def _exception_text(details: dict) -> str:
    exc = details.get("exception") or {}
    return str(exc.get("description") or details.get("text") or "uncaught exception")


def _attach_worker(
    client: CDPClient, params: dict, us: int, n: int, parent: Session | None = None
) -> _Isolate:
    session = client.attach(params["sessionId"], parent=parent)
    info = params.get("workerInfo", {})
    # Node's workerId is the thread id: unique in the process, also for nested workers.
    iso = _Isolate(session, f"worker {info.get('workerId', n)}")
    try:
        # Its own workers would reach us through it; Node 20 has no NodeWorker domain in a
        # worker's session ("wasn't found"), so there they run unprofiled.
        with contextlib.suppress(CDPError):
            session.send("NodeWorker.enable", {"waitForDebuggerOnStart": True})
        session.send("Debugger.enable")
        iso.read_origin()
        iso.start(us)
        session.send("Runtime.evaluate", {"expression": _WORKER_EXIT_HOOK})
        iso.begin_slices()
    except (CDPClosed, CDPError) as e:
        iso.lost = f"could not start profiling it ({e})"
    finally:
        # Whatever happened above, the worker must not stay waiting for a debugger.
        with contextlib.suppress(CDPClosed):
            session.send_nowait("Runtime.runIfWaitingForDebugger", reply=False)
    return iso


def _service_worker(client: CDPClient, iso: _Isolate, us: int, isolates: list[_Isolate]) -> None:
    """Handle a worker's events: its pauses (ours, the exit hook, takes the profile; others
    resume), its slices, and workers it starts (appended to `isolates`)."""
    s = iso.session
    while s.events:
        e = s.events.popleft()
        if e["method"] == "NodeWorker.attachedToWorker":
            isolates.append(_attach_worker(client, e["params"], us, len(isolates), parent=s))
            continue
        if iso.take_slice(e) or e["method"] != "Debugger.paused":
            continue
        frames = e["params"].get("callFrames") or [{}]
        if frames[0].get("functionName") == _WORKER_EXIT_FN and iso.profiling:
            iso.collect(iso.stop_nowait())
        # "Break on start", a `debugger` statement of the script, or ours after the stop.
        with contextlib.suppress(CDPClosed):
            s.send_nowait("Debugger.resume")


# ---- a long-lived runtime for the RuntimeProfiler contract ------------------------------


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
            from ..errors import JSError

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
        self._enabled = False

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


# ---- attach to a running process ----------------------------------------------------------

INSPECTOR_PORT = 9229


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _inspector_targets(port: int) -> list[dict]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=1.0) as r:
        return orjson.loads(r.read())


def attach_node(
    pid: int,
    duration: float | None = None,
    sample_interval: float = DEFAULT_INTERVAL_MS,
    port: int = INSPECTOR_PORT,
    open_timeout: float = 10.0,
) -> Recording:
    """Profile the running Node process `pid` for `duration` s (None: until Ctrl-C or its
    exit), then close its inspector again and leave it running."""
    us = interval_us(sample_interval)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        raise UsageError(f"--pid {pid}: no such process") from None
    except PermissionError:
        raise UsageError(f"--pid {pid}: not allowed to signal that process") from None
    if _port_open(port):
        raise EngineError(
            f"127.0.0.1:{port} is already in use; the inspector of process {pid} cannot open "
            "there (close whatever listens on it, or a debugger attached to that process)"
        )
    os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + open_timeout
    url = None
    while time.monotonic() < deadline:
        try:
            targets = _inspector_targets(port)
            if targets:
                url = targets[0]["webSocketDebuggerUrl"]
                break
        except (OSError, ValueError, KeyError, IndexError):
            pass
        time.sleep(0.05)
    if url is None:
        raise EngineError(
            f"process {pid} did not open an inspector on 127.0.0.1:{port} within "
            f"{open_timeout:g} s after SIGUSR1; is it Node.js (and not run with "
            "--disable-sigusr1)?"
        )
    client = CDPClient(url)
    iso = _Isolate(client.session, "main")
    how = "duration"
    try:
        iso.read_origin()
        # A process that ends while we are connected waits for us to disconnect: ask to
        # be told, then take the profile before letting it go.
        with contextlib.suppress(CDPError):
            client.session.send("NodeRuntime.notifyWhenWaitingForDisconnect", {"enabled": True})
        iso.start(us, reoptimize=True)
        iso.begin_slices()  # insurance if the process dies while we watch
        end = None if duration is None else time.monotonic() + duration
        with _SigintFlag() as sigint:
            while not sigint.hit and (end is None or time.monotonic() < end):
                if not client.pump(0.05):
                    how = "exited"
                    break
                while client.session.events:
                    e = client.session.events.popleft()
                    if e["method"] == "NodeRuntime.waitingForDisconnect":
                        how = "exited"
                    iso.take_slice(e)
                if how == "exited":
                    break
                if time.monotonic() >= iso.next_slice:
                    iso.rotate()
            if sigint.hit:
                how = "interrupted"
        iso.collect(iso.stop_nowait())
        while client.session.events:
            iso.take_slice(client.session.events.popleft())
        iso.fall_back_to_slices()
        # Close the inspector it opened for us, so the process is as it was. close() waits
        # for sessions to end, so it runs after we disconnect. (Not for a process that is
        # ending: its context is gone.)
        with contextlib.suppress(CDPClosed, CDPError, EngineError):
            if how == "exited":
                raise CDPClosed("ending")
            client.session.send(
                "Runtime.evaluate",
                {
                    # `require` of the console's command line API is gone once the
                    # evaluation ends: capture it for the deferred call.
                    "expression": "((r) => { setImmediate(() => r('node:inspector').close());"
                    " return 0; })(require)",
                    "includeCommandLineAPI": True,
                },
                timeout=5.0,
            )
    finally:
        client.close()
    if iso.profile is None:
        raise EngineError(f"process {pid}: {iso.lost or 'no profile delivered'}")
    track = iso.track(effective_interval(sample_interval), f"pid {pid}")
    assert track is not None
    track.meta.update(pid=pid, exit=how)
    if iso.partial:
        track.meta["partial"] = iso.lost
    return Recording([track])


def preload_path() -> str:
    """The Profiler-global preload shipped as package data."""
    return str(_res.files("jsprof").joinpath("js", "node_profiler.js"))


def run_node(
    script: str | os.PathLike[str],
    args: Sequence[str] = (),
    node: str | None = None,
    node_args: Sequence[str] = (),
    allow_profiling: bool = True,
) -> int:
    """Run `script` under Node with the spec's `Profiler` global; returns Node's exit code.

    The global comes from a preload (`--require`), so it exists in worker threads too.
    With `allow_profiling=False` its constructor throws a `NotAllowedError`. Stdio is
    the caller's; Ctrl-C reaches Node (same process group) and we wait for it to end.
    """
    path = os.fspath(script)
    if not os.path.isfile(path):
        raise UsageError(f"{path}: no such file; give the path of a .js, .mjs or .cjs script")
    exe = find_node(node)
    env = dict(os.environ)
    env.pop("JSPROF_NO_PROFILING", None)
    if not allow_profiling:
        env["JSPROF_NO_PROFILING"] = "1"
    cmd = [exe, "--require", preload_path(), *node_args, path, *args]
    try:
        proc = subprocess.Popen(cmd, env=env)
    except OSError as e:
        raise EngineError(f"cannot start {exe}: {e}") from None
    try:
        return proc.wait()
    except KeyboardInterrupt:
        # Node got the same SIGINT; give it a moment to end, then make sure it did.
        try:
            proc.wait(5.0)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        raise
