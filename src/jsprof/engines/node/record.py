"""`record_node`: run a script under Node with V8's sampling profiler, one track per
thread (the main thread and every worker, through the inspector's NodeWorker domain)."""

from __future__ import annotations

import contextlib
import math
import os
import signal
import time
from collections.abc import Callable, Sequence

from ...errors import EngineError, JSError
from .._ending import interruption, signum_of
from .._process import SignalFlag
from .._v8text import ProfileText
from .process import NodeProcess, effective_interval, interval_us, script_path

# Light on purpose: Node is started first, and numpy, the formats and the WebSocket client
# are imported while it boots (start_node, then record_node).
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from ...recorded import LightRecording, LightTrack
    from ...trace import Recording, Track
    from .._ending import Progress
    from ..cdp import CDPClient, Session
    from .isolate import _Isolate

_CHILD_TITLE = "jsprof-child"
_GO_PREFIX = "jsprof-go:"  # the hook went on to the script, at this instant (monotonic us)
_END_PREFIX = "jsprof-end:"  # the program ended ('exit'), at this instant (monotonic us)
_RESEND_GO = 0.05  # s between repeats of runIfWaitingForDebugger until the hook went on
_POLL = 0.1  # s: the recording loop looks at what no socket message tells (see _record)
# A worker's last samples are taken in its 'exit' event: the hook says so with a
# console.profile title and waits (inspector.waitForDebugger) until we have stopped its
# profiler and say go (Runtime.runIfWaitingForDebugger). It used a `debugger;` statement
# before, which needs the Debugger domain on in the worker; with it on, Node also pauses the
# worker "on start", and V8 20 sometimes died computing that pause's scopes (a fatal CHECK
# in ScopeIterator::VisitLocalScope, seen in CI). `require` is the command-line API's (the
# worker's module system is not up yet when we attach); console.profile is taken now so the
# script cannot replace it. The sourceURL lets its wait be dropped from the samples.
_WORKER_EXIT_TITLE = "jsprof-worker-exit"
_WORKER_EXIT_URL = "jsprof:worker-exit"
_WORKER_EXIT_HOOK = (
    "((req, prof) => { process.on('exit', function jsprofWorkerExit() {"
    f" prof('{_WORKER_EXIT_TITLE}'); req('inspector').waitForDebugger(); }}); return 0; }})"
    f"(require, console.profile.bind(console))\n//# sourceURL={_WORKER_EXIT_URL}"
)


def hook_path() -> str:
    """The preload that holds the script until profiling runs (js/node_record_hook.js).
    A plain path (jsprof is installed as files: it has a C extension); importlib.resources
    cost ~15 ms before Node could start."""
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.join(os.path.dirname(os.path.dirname(here)), "js", "node_record_hook.js")


def start_node(
    script: str | os.PathLike[str],
    args: Sequence[str] = (),
    node: str | None = None,
    node_args: Sequence[str] = (),
) -> NodeProcess:
    """Spawn Node for `record_node(..., process=)` and return at once: the hook holds the
    script until the profiler runs, so the caller can do its own start-up meanwhile (and
    kill the process if it gives up)."""
    path = script_path(script)
    return NodeProcess(
        [path, *args],
        node=node,
        node_args=node_args,
        inspect=("--inspect=127.0.0.1:0", "--require", hook_path()),
        wait=False,
    )


def record_node(
    script: str | os.PathLike[str],
    args: Sequence[str] = (),
    sample_interval: float = 1.0,
    node: str | None = None,
    node_args: Sequence[str] = (),
    workers: bool = True,
    timeout: float | None = None,
    process: NodeProcess | None = None,
    progress: Progress | None = None,
    gate: Callable[[], object] | None = None,
    light: bool = False,
) -> Recording | LightRecording:
    """Run `script` under Node with V8's sampling profiler; one track per thread.

    Tracks: "main", then "worker N" in the order workers started. `meta` of the main track:
    `script`, `args`, `exit` ("ok", "error", "killed", "interrupted", "duration"),
    `exitCode` (Node's: negative for a signal, as in subprocess), `signal` (the signal
    that ended Node for "killed", jsprof's own for "interrupted"), `error` (the uncaught
    exception's text: `Name: message` then the stack) and `errorName`/`errorMessage` when the script
    threw, and `partial` when Node died before the last slice of its profile was taken.
    With `timeout` (seconds) Node is ended after that long ("duration"). A worker whose
    profile could not be taken is listed in the main track's `meta["lost"]`. `gate` is
    called once the profiler runs, before the script starts (the CLI waits there for its
    output check, done meanwhile); what it raises ends Node and propagates. `light`: a
    recorded.LightRecording when every track could be made without numpy (`jsprof record`
    writes and summarises it so; `.recording()` is the model), else the Recording.
    Raises EngineError when Node cannot start or dies before any sample was delivered.
    """
    path = script_path(script)
    us = interval_us(sample_interval)
    requested = effective_interval(sample_interval)
    with SignalFlag() as sigint:
        proc = process or start_node(path, args, node, node_args)
        try:
            proc.wait_ready()
        except BaseException:
            proc.kill()
            raise
        isolates, how, error, code, children, exiting = _record(
            proc, us, workers, timeout, sigint, progress, gate
        )
        tracks: list[Track | LightTrack] = []
        lost: list[str] = []
        try:
            # Node exits on its own once we disconnected: its profiles become tracks
            # meanwhile (its exit took 2-30 ms after an empty script, measured).
            for iso in isolates if isolates and isolates[0].profile is not None else ():
                t = iso.track(requested, f"{path} [{iso.name}]", light)
                if t is not None:
                    tracks.append(t)
                    if iso.exit_wait is not None and iso.exit_wait[0]:
                        t.meta["exitWaitDropped"] = {
                            "samples": iso.exit_wait[0],
                            "ms": round(iso.exit_wait[1], 1),
                        }
                    if iso.partial:
                        t.meta["partial"] = iso.lost
                        if iso.lost_window is not None:
                            t.meta["lostWindowMs"] = [round(x, 1) for x in iso.lost_window]
                elif iso.lost:
                    lost.append(f"{iso.name}: {iso.lost}")
        finally:
            if exiting:
                code = proc.wait_exit(10.0)
    if not tracks:
        signame = ""
        if code is not None and code < 0:
            signame = f" (killed by {signal.Signals(-code).name})"
        raise EngineError(
            f"{path}: node exited{signame} with code {code} before V8 delivered any sample; "
            "nothing was recorded (was it killed from outside?)"
        )
    meta = tracks[0].meta
    meta.update(script=path, args=list(args), exitCode=code, nodePid=proc.pid)
    if how == "interrupted" and sigint.signum is not None:
        meta["signal"] = signal.Signals(sigint.signum).name
    elif how == "ok" and code is not None and code < 0:
        how = "killed"
        meta["signal"] = signal.Signals(-code).name
    if how == "ok" and (error is not None or (code or 0) != 0):
        how = "error"
    meta["exit"] = how
    if error is not None:
        name = str(error.get("name") or "Error")
        message = str(error.get("message") or "")
        stack = str(error.get("stack") or "")
        meta["errorName"] = name
        meta["error"] = stack if stack else f"{name}: {message}"
        meta["errorMessage"] = message
        at = error.get("compile")  # the hook's: the script did not compile, here
        if isinstance(at, dict):
            meta["errorWhere"] = f"{at.get('file')}:{at.get('line')}:{at.get('column')}"
    if lost:
        meta["lost"] = lost
    if children:
        meta["childProcesses"] = "not profiled: child processes run without jsprof"
    from ...recorded import LightRecording, LightTrack

    if all(type(t) is LightTrack for t in tracks):
        return LightRecording(tracks)  # type: ignore[arg-type]
    from ...trace import Recording

    # (a track _v8join could not make came through numpy: the model for all)
    return Recording([t.to_track() if type(t) is LightTrack else t for t in tracks])


def _record(
    proc: NodeProcess,
    us: int,
    workers: bool,
    timeout: float | None,
    sigint: SignalFlag,
    progress: Progress | None = None,
    gate: Callable[[], object] | None = None,
    hook: str | None = None,
    on_title: Callable[[str], object] | None = None,
) -> tuple[list[_Isolate], str, dict | None, int | None, bool, bool]:
    """Drive one recording: (isolates, how it ended, the uncaught error, Node's exit code,
    whether the script started child processes, whether Node is still exiting on its own:
    then the caller waits for its exit code, proc.wait_exit). `hook`: the preload whose
    samples are dropped (default: hook_path()); `on_title`: told every console.profile
    title the main thread reports (command.py reads the exit code there)."""
    import json
    import pathlib

    from ..cdp import CDPClient, CDPClosed
    from .isolate import _ERROR_PREFIX, _Isolate

    client: CDPClient | None = None
    isolates: list[_Isolate] = []
    error: dict | None = None
    children = False
    how = "ok"
    finished = False  # False while an exception unwinds: then Node is ended, not awaited

    def note(e: dict) -> None:
        nonlocal error, children
        title = str(e.get("params", {}).get("title", ""))
        if on_title is not None:
            on_title(title)
        if title == _CHILD_TITLE:
            children = True
        if title.startswith(_END_PREFIX) and main.end_us is None:
            main.end_us = _number(title[len(_END_PREFIX) :])
        if title.startswith(_ERROR_PREFIX) and error is None:
            with contextlib.suppress(ValueError):  # (the hook's JSON.stringify: valid)
                got = json.loads(title[len(_ERROR_PREFIX) :])
                error = got if isinstance(got, dict) else {"message": str(got)}

    try:
        client = CDPClient(proc.url or "")
        client.raw_profiles = True  # the slices read in C when the track is made
        # Each slice's bridge ends a console.profile: V8 sends its profile (~7 KB on tsc, a
        # deep stack's nodes), as for the script's own console.profileEnd calls. Nothing
        # here reads them: dropped unparsed (21 on a 4-line tsc run, 155 KB of JSON).
        client.unread = (b'{"method":"Profiler.consoleProfileFinished"',)
        root = client.session
        main = _Isolate(root, "main")
        hook = hook or hook_path()
        main.hide_urls |= {hook, pathlib.Path(hook).as_uri()}  # as a path and as a file URL
        isolates.append(main)
        if progress is not None:  # _ending.Progress: a status line's count, from its thread
            progress.poll = lambda: (
                sum(_num_samples(s) for i in list(isolates) for s in list(i.slices)),
                len(isolates),
            )
        # The end of the script: this event, or the same news on stderr, whichever is first.
        root.send_nowait("NodeRuntime.notifyWhenWaitingForDisconnect", {"enabled": True})
        main.start(us)
        main.begin_slices()
        if workers:
            root.send_nowait("NodeWorker.enable", {"waitForDebuggerOnStart": True}, reply=False)
        main.read_origin()
        if gate is not None:
            gate()  # e.g. the output checked: a mistake there must not cost a run
        _release(root)
        released = False
        resend = time.monotonic() + _RESEND_GO
        deadline = None if timeout is None else time.monotonic() + timeout
        main.slices_from_now()  # the first slice counts from the script's start
        while True:
            if sigint.hit:
                how = "interrupted"
                break
            if deadline is not None and time.monotonic() > deadline:
                how = "duration"
                break
            # Wait for the socket (replies, events: the end comes as NodeRuntime's
            # waitingForDisconnect) or the next timer, at most _POLL: the end also shows
            # on Node's stderr, seen by the reader thread (proc.waiting), and a stop may
            # come from another thread. Each idle wake cost ~30-80 us of CPU (a select
            # and its context switches): every 20 ms, as before, that was 30 ms of a tsc
            # run's 20 s at load 18 (issue 32).
            if not client.pump(_wait(deadline, None if released else resend, isolates)):
                break  # the socket closed: Node is gone
            while root.events:
                e = root.events.popleft()
                m = e["method"]
                if m == "NodeRuntime.waitingForDisconnect":
                    proc.waiting.set()
                elif m == "Profiler.consoleProfileStarted":
                    title = str(e.get("params", {}).get("title", ""))
                    if title.startswith(_GO_PREFIX):
                        released = True
                        main.go_us = _number(title[len(_GO_PREFIX) :])
                    note(e)
                elif m == "NodeWorker.attachedToWorker":
                    isolates.append(_attach_worker(client, e["params"], us, len(isolates)))
            # Workers, including those a worker starts (appended while we go).
            for iso in isolates[1:]:
                _service_worker(client, iso, us, isolates)
            now = time.monotonic()
            if not released and now >= resend:
                root.send_nowait("Runtime.runIfWaitingForDebugger", reply=False)
                resend = now + _RESEND_GO
            for iso in isolates:
                iso.take_slices()
                if now >= iso.next_slice:
                    iso.rotate()
            if proc.waiting.is_set():
                break
        # Stop every profiler still running: all requests first, so none waits on another.
        pending = [(iso, iso.stop_nowait()) for iso in isolates]
        for iso, mid in pending:
            iso.collect(mid)
        # The stop's reply comes after every earlier event on the socket: an uncaught
        # exception reported just before the end is in the queue by now.
        for e in root.events:
            if e["method"] == "Profiler.consoleProfileStarted":
                note(e)
        main.drop_exit_wait()
        finished = True
    except CDPClosed:
        finished = True
        # Node went away without answering: whatever slices arrived are all there is.
        for iso in isolates:
            iso.collect(None)
        if isolates:
            isolates[0].drop_exit_wait()
    finally:
        if client is not None:
            client.close()
        code = None
        exiting = not (how in ("interrupted", "duration") or not finished)
        if not exiting:
            code = proc.kill()
        # else closing the socket lets Node finish exiting on its own.
    return isolates, how, error, code, children, exiting


def _num_samples(profile: dict | ProfileText) -> int:
    if isinstance(profile, ProfileText):
        return profile.num_samples()
    return len(profile.get("samples", ()))


def _wait(deadline: float | None, resend: float | None, isolates: list[_Isolate]) -> float:
    """How long the recording loop may wait for the socket: until its next timer (the
    --duration, the next go to the hook, a slice, a worker's go at its exit), at most
    _POLL."""
    now = time.monotonic()
    wait = _POLL
    for t in (deadline, resend):
        if t is not None:
            wait = min(wait, t - now)
    for iso in isolates:
        wait = min(wait, iso.next_slice - now)
        if iso.exit_go_at is not None:
            wait = min(wait, iso.exit_go_at - now)
    return max(wait, 0.0)


def _release(root: Session) -> None:
    """Let the script start: the hook waits (inspector.waitForDebugger) until a flag is
    set, then says so with a console.profile title (_GO_PREFIX and the instant). Both
    commands are handled in order on Node's main thread, so the hook either finds the flag
    set or is released from its wait; should both land between its test of the flag and its
    wait, the recording loop says go again until that title comes."""
    from .isolate import internal

    root.send_nowait(
        "Runtime.evaluate",
        {"expression": internal("globalThis[Symbol.for('jsprof.go')] = true")},
        reply=False,
    )
    root.send_nowait("Runtime.runIfWaitingForDebugger", reply=False)


def _number(text: str) -> float | None:
    try:
        x = float(text)
    except ValueError:
        return None
    return x if math.isfinite(x) else None


def _attach_worker(
    client: CDPClient, params: dict, us: int, n: int, parent: Session | None = None
) -> _Isolate:
    from .._v8session import exception_text
    from ..cdp import CDPClosed, CDPError
    from .isolate import _Isolate

    session = client.attach(params["sessionId"], parent=parent)
    info = params.get("workerInfo", {})
    # Node's workerId is the thread id: unique in the process, also for nested workers.
    iso = _Isolate(session, f"worker {info.get('workerId', n)}")
    # Node wraps a worker waiting for a debugger in callAndPauseOnStart; should it pause
    # there (a Node whose Debugger domain is on), that wait is dropped from the samples.
    iso.paused_at_start = True
    iso.hide_urls.add(_WORKER_EXIT_URL)
    try:
        # Its own workers would reach us through it; Node 20 has no NodeWorker domain in a
        # worker's session ("wasn't found"), so there they run unprofiled.
        with contextlib.suppress(CDPError):
            session.send("NodeWorker.enable", {"waitForDebuggerOnStart": True})
        iso.read_origin()
        iso.start(us)
        r = session.send(
            "Runtime.evaluate", {"expression": _WORKER_EXIT_HOOK, "includeCommandLineAPI": True}
        )
        if "exceptionDetails" in r:
            raise CDPError(f"its exit hook failed: {exception_text(r['exceptionDetails'])}")
        iso.begin_slices()
    except (CDPClosed, CDPError) as e:
        iso.lost = f"could not start profiling it ({e})"
    finally:
        # Whatever happened above, the worker must not stay waiting for a debugger.
        with contextlib.suppress(CDPClosed):
            session.send_nowait("Runtime.runIfWaitingForDebugger", reply=False)
    return iso


def _service_worker(client: CDPClient, iso: _Isolate, us: int, isolates: list[_Isolate]) -> None:
    """Handle a worker's events: its exit (the hook waits while we take the profile, then
    goes on), its slices, and workers it starts (appended to `isolates`).

    The go is said again every _RESEND_GO until the worker is gone: a go that the worker
    handles before its hook waits (the stop and the go are served by V8's interrupts while
    the hook's JavaScript still runs) is forgotten, and the worker, then the program, would
    wait for ever (seen in CI: a recording of tests/data/nodejs/worker.js that never ended)."""
    from ..cdp import CDPClosed

    s = iso.session
    if iso.exit_go_at is not None and not s.closed and time.monotonic() >= iso.exit_go_at:
        iso.exit_go_at = time.monotonic() + _RESEND_GO
        with contextlib.suppress(CDPClosed):
            s.send_nowait("Runtime.runIfWaitingForDebugger", reply=False)
    while s.events:
        e = s.events.popleft()
        m = e["method"]
        if m == "NodeWorker.attachedToWorker":
            isolates.append(_attach_worker(client, e["params"], us, len(isolates), parent=s))
            continue
        if m != "Profiler.consoleProfileStarted":
            continue
        if e.get("params", {}).get("title") != _WORKER_EXIT_TITLE:
            continue
        if iso.profiling:
            iso.collect(iso.stop_nowait())
        with contextlib.suppress(CDPClosed):
            s.send_nowait("Runtime.runIfWaitingForDebugger", reply=False)
        iso.exit_go_at = time.monotonic() + _RESEND_GO


def record_script(
    p: str,
    *,
    sample_interval: float,
    args: Sequence[str] = (),
    node_args: Sequence[str] = (),
    duration: float | None = None,
    started: NodeProcess | None = None,
    progress: Progress | None = None,
    gate: Callable[[], object] | None = None,
    light: bool = False,
) -> tuple[Recording | LightRecording, BaseException | None]:
    """One track per thread (main, worker N); the script's error is taken from the main
    track's meta (record_node itself never raises for the script). `light`: record_node's."""
    rec = record_node(
        p,
        args=args,
        sample_interval=sample_interval,
        node_args=node_args,
        timeout=duration,
        process=started,
        progress=progress,
        gate=gate,
        light=light,
    )
    meta = rec.tracks[0].meta
    error: BaseException | None = None
    if meta.get("exit") == "interrupted":
        error = interruption(signum_of(meta.get("signal"), signal.SIGINT))
    elif meta.get("error"):
        error = JSError(
            str(meta.get("errorMessage", "")),
            str(meta["error"]),
            name=str(meta.get("errorName", "Error")),
        )
        # Node printed it already (its stderr is the script's): the CLI does not repeat it.
        error.printed = True  # type: ignore[attr-defined]
        where = meta.get("errorWhere")
        if isinstance(where, str):
            # The hook ended Node before it printed anything: nothing of the script ran.
            error.compile = True
            from .preload import as_given  # (tempfile, importlib.resources: not before Node)

            error.where = as_given(where, p)
    return rec, error

