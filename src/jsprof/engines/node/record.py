"""`record_node`: run a script under Node with V8's sampling profiler, one track per
thread (the main thread and every worker, through the inspector's NodeWorker domain)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Sequence

from ...errors import EngineError, UsageError
from ...trace import Recording, Track
from ..base import DEFAULT_INTERVAL_MS
from ..cdp import CDPClient, CDPClosed, CDPError, Session
from .isolate import _ERROR_PREFIX, _Isolate
from .process import NodeProcess, _SigintFlag, effective_interval, interval_us

_WORKER_EXIT_FN = "jsprofWorkerExit"
_WORKER_EXIT_HOOK = f"process.on('exit', function {_WORKER_EXIT_FN}() {{ debugger; }}); 0"


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
