"""Record or run a script: what `jsprof record` and `jsprof run` call.

Both raise typed errors (jsprof.errors) and print nothing themselves; the CLI prints.
A script that throws or is interrupted still yields its samples: `record` saves the trace
(when `output` is given) and attaches the Recording to the exception it re-raises.

The exit-code rule (`exit_status`): `jsprof record` ends as the script would have ended
without jsprof -- its own status (`process.exit(3)` -> 3, `process.exitCode = 4` -> 4, an
uncaught error -> 1, killed by a signal -> 128 + the signal's number); jsprof itself told
to end (Ctrl-C -> 130, SIGTERM -> 143) saves the trace first; a run jsprof ended on purpose
(`--duration`) -> 0. jsprof's own errors exit 2 (the CLI).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence

from .errors import EngineError, JSError, UsageError

# numpy comes with the trace model: not imported here, so that `jsprof record --engine
# node` can start Node before it pays for those imports (see start_engine).
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (~10 ms before Node starts)
if TYPE_CHECKING:
    from typing import Any

    from .trace import Recording

ENGINES = ("quickjs", "node", "chromium")


# Engines that run a script file; pages and URLs are for a browser engine.
SCRIPT_ENGINES = ("quickjs", "node")
SCRIPT_EXTENSIONS = (".js", ".mjs", ".cjs")
_TRACE_EXTENSIONS = (".json", ".cpuprofile", ".pftrace", ".gz", ".pprof", ".folded")


def check_script(path: str | os.PathLike[str], engine: str) -> str:
    """The script's path, or a UsageError saying why `engine` cannot run it."""
    if engine not in ENGINES:
        raise UsageError(f"unknown engine {engine!r}; choose one of: {', '.join(ENGINES)}")
    p = os.fspath(path)
    if engine == "chromium":
        from .engines.chromium.record import resolve_target

        resolve_target(p)  # a URL, or a local .html/.js/.mjs file
        return p
    low = p.lower()
    script_engine = engine in SCRIPT_ENGINES
    if script_engine and ("://" in p or low.endswith((".html", ".htm"))):
        raise UsageError(f"{p}: pages and URLs are for a browser engine; {engine} runs scripts")
    if os.path.isdir(p):
        raise UsageError(f"{p}: is a directory; give the path of a .js or .mjs script")
    if not os.path.exists(p):
        raise UsageError(f"{p}: no such file; give the path of a .js or .mjs script")
    if not os.path.isfile(p):
        raise UsageError(f"{p}: not a regular file; give the path of a .js or .mjs script")
    ext = os.path.splitext(low)[1]
    if script_engine and ext and ext not in SCRIPT_EXTENSIONS:
        hint = "; it looks like a trace: see it with `jsprof report`" if (
            ext in _TRACE_EXTENSIONS
        ) else ""
        raise UsageError(f"{p}: not a JavaScript file ({engine} runs .js, .mjs or .cjs){hint}")
    return p


class Progress:
    """Where a live status line reads a recording's progress: the engine sets `poll` to a
    cheap, thread-safe callable returning (samples so far, tracks); None while it has none."""

    def __init__(self) -> None:
        self.poll: Callable[[], tuple[int, int]] | None = None


class DurationEnded(KeyboardInterrupt):
    """`duration` seconds passed: the run ends on purpose (exit "duration", status 0)."""


class Terminated(KeyboardInterrupt):
    """jsprof was told to end by a signal other than Ctrl-C (SIGTERM, SIGHUP): handled like
    Ctrl-C (the samples so far are kept), but exits with that signal's status."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextlib.contextmanager
def terminate_as_interrupt(
    interrupt: Callable[[], None], duration: float | None = None
) -> Iterator[None]:
    """While an in-process engine runs on this (main) thread: SIGTERM/SIGHUP, and the end
    of `duration` seconds, stop the script through `interrupt` (the engine's thread-safe
    stop, which raises KeyboardInterrupt in its eval) and turn that KeyboardInterrupt into
    Terminated or DurationEnded, so the trace is saved before jsprof ends. Python's own
    handlers would not run while the engine holds the thread: a watcher thread hears the
    signals through Python's wakeup fd instead."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    import select

    sigs = {signal.SIGTERM, signal.SIGHUP}
    got: list[BaseException] = []
    done = threading.Event()
    r, w = os.pipe()
    os.set_blocking(w, False)
    old_fd = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    old = {sig: signal.signal(sig, lambda signum, frame: None) for sig in sigs}
    deadline = None if duration is None else time.monotonic() + duration

    def watch() -> None:
        while not done.is_set():
            wait = 0.05 if deadline is None else min(0.05, max(deadline - time.monotonic(), 0))
            if select.select([r], [], [], wait)[0]:
                for b in os.read(r, 64):
                    if b in sigs:
                        got.append(Terminated(b))
                        break
            elif deadline is not None and time.monotonic() >= deadline:
                got.append(DurationEnded())
            if got:
                # Again until the block ends: eval() drops an interrupt that came before
                # it started (so one from an earlier run cannot stop it), so a signal heard
                # while no eval ran (the runtime starting, between two evals) would be lost
                # and the script would run on.
                interrupt()
                while not done.wait(0.05):
                    interrupt()
                return

    watcher = threading.Thread(target=watch, name="jsprof-signals", daemon=True)
    watcher.start()
    try:
        yield
    except KeyboardInterrupt as e:
        if got and not isinstance(e, (Terminated, DurationEnded)):
            raise got[0] from None
        raise
    finally:
        done.set()
        watcher.join()
        signal.set_wakeup_fd(old_fd)
        for sig, handler in old.items():
            signal.signal(sig, handler)
        os.close(r)
        os.close(w)
    if got:  # it came as the script ended on its own: end as told all the same
        raise got[0]


def _signum(name: Any, default: int) -> int:
    try:
        return int(signal.Signals[str(name)])
    except KeyError:
        return default


def exit_status(rec: Recording) -> int:
    """The status `jsprof record` exits with for this recording (see the module's rule)."""
    meta = rec.tracks[0].meta if rec.tracks else {}
    how = meta.get("exit")
    if how == "duration":
        return 0
    if how == "interrupted":
        return 128 + _signum(meta.get("signal"), signal.SIGINT)
    if how == "killed":
        return 128 + _signum(meta.get("signal"), signal.SIGKILL)
    code = meta.get("exitCode", meta.get("exit_code"))
    if isinstance(code, int) and not isinstance(code, bool) and code >= 0:
        return code
    return 1 if how == "error" else 0


def start_engine(
    path: str | os.PathLike[str],
    engine: str,
    args: Sequence[str] = (),
    node_args: Sequence[str] = (),
) -> Any:
    """Start the engine's process now, when it has one (Node: it boots, held before the
    script, while the caller imports and checks what it needs); pass the result to
    `record(..., started=)`, or call its `.kill()` if the caller gives up. None for
    in-process engines."""
    if engine != "node":
        return None
    from .engines.node.record import start_node

    return start_node(path, args, node_args=node_args)


def record(
    path: str | os.PathLike[str],
    engine: str = "quickjs",
    sample_interval: float = 1.0,
    max_buffer_size: int | None = None,
    args: Sequence[str] = (),
    output: str | os.PathLike[str] | None = None,
    workers: int | None = None,
    node_args: Sequence[str] = (),
    duration: float | None = None,
    started: Any = None,
    progress: Progress | None = None,
    gate: Callable[[], object] | None = None,
    until: str | None = None,
) -> Recording:
    """Run the script at `path` under the sampling profiler and return its Recording.

    engine="chromium": `path` is a URL (http, https, file), a local .html page or a
    .js/.mjs script (served from loopback), opened in headless Chromium; `until` is "load"
    (the default) or "js:EXPR", `duration` caps it; a track per thread (main, then each
    worker or out-of-process iframe by URL). The page's uncaught errors were printed on
    stderr and raise a JSError carrying the recording, as a script's do.

    `started`: what `start_engine` returned for this script (Node already booting).
    `gate` (engine="node"): called once the profiler runs, before the script starts (the
    CLI checks its output meanwhile, in another thread); what it raises ends Node.
    `progress`: filled in with a cheap way to count samples while the script runs (a status
    line's; QuickJS so far).

    `duration` (seconds): end the script after that long and keep what was taken (exit
    "duration", not an error). `node_args`: flags for Node itself (engine="node").

    `workers=N` (QuickJS) runs N copies on N threads into one Recording, a track each.

    One track, named "main", engine "quickjs"; `meta` holds the capture latency
    (p50/p99 ms), `buffer_full`, the script and how it ended (`exit`: ok/error/
    interrupted). With `output`, the recording is also saved there -- also when the
    script fails: then the JSError (or KeyboardInterrupt) is re-raised carrying
    `.recording` (and `.output`), so the caller can report on the partial profile.
    `scriptArgs` in the script is [path, *args], as with qjs.
    """
    p = check_script(path, engine)
    if until is not None and engine != "chromium":
        raise UsageError("--until goes with --engine chromium (a page's ending)")
    if workers is not None:
        if engine != "quickjs":
            raise UsageError("--workers runs QuickJS runtimes; use --engine quickjs")
        if duration is not None:
            raise UsageError("--duration does not go with --workers; stop them with Ctrl-C")
        from .workers import record_workers

        try:
            rec = record_workers(p, workers, sample_interval, max_buffer_size, args)
            error = None
        except (JSError, KeyboardInterrupt) as e:
            rec, error = e.recording, e  # type: ignore[union-attr]
            if isinstance(e, KeyboardInterrupt) and rec.tracks:
                rec.tracks[0].meta["exit"] = "interrupted"
                rec.tracks[0].meta["signal"] = _signal_name(e)
    elif engine == "chromium":
        rec, error = _record_chromium(p, sample_interval, max_buffer_size, args, duration, until)
    elif engine == "node":
        rec, error = _record_node(
            p, sample_interval, max_buffer_size, args, node_args, duration, started, progress,
            gate,
        )
    else:
        rec, error = _record_quickjs(
            p, sample_interval, max_buffer_size, args, duration, progress
        )
    if output is not None:
        from .io import save

        try:
            save(rec, output)
        except OSError as e:
            raise EngineError(f"{os.fspath(output)}: cannot write the recording ({e})") from None
    if error is not None:
        error.recording = rec  # type: ignore[attr-defined]
        error.output = None if output is None else os.fspath(output)  # type: ignore[attr-defined]
        raise error
    return rec


def _record_quickjs(
    p: str,
    sample_interval: float,
    max_buffer_size: int | None,
    args: Sequence[str],
    duration: float | None = None,
    progress: Progress | None = None,
) -> tuple[Recording, BaseException | None]:
    """One track, "main"; the script's error (JSError, KeyboardInterrupt) is returned."""
    from .engines.quickjs import QuickJS

    error: BaseException | None = None
    ended = False
    rts: list[QuickJS] = []
    session = None
    try:
        # Entered first: the sampler's thread must inherit the blocked signals.
        with terminate_as_interrupt(lambda: rts and rts[0].interrupt(), duration):
            rts.append(QuickJS(args=[p, *args]))
            session = rts[0].profiler(
                sample_interval=sample_interval, max_buffer_size=max_buffer_size
            )
            if progress is not None:
                # kept so far + taken since the last drain (read from another thread)
                rt, sess = rts[0], session
                progress.poll = lambda: (sess._count + rt._rt.sampler_pending, 1)
            rts[0].eval_file(p)
    except DurationEnded:
        ended = True
    except (JSError, KeyboardInterrupt) as e:
        error = e
        if session is None:
            raise
    finally:
        trace = session.stop() if session is not None else None
    if session is None:
        raise EngineError(f"{p}: the run ended before the profiler started (--duration 0?)")
    track = session.track(trace)
    track.meta["script"] = p
    track.meta["args"] = list(args)
    if ended:
        track.meta["exit"] = "duration"
    elif error is None:
        track.meta["exit"] = "ok"
    elif isinstance(error, KeyboardInterrupt):
        track.meta["exit"] = "interrupted"
        track.meta["signal"] = _signal_name(error)
    else:
        track.meta["exit"] = "error"
        track.meta["error"] = f"{getattr(error, 'name', 'Error')}: {error}"
    from .trace import Recording

    return Recording([track]), error


def _signal_name(e: BaseException) -> str:
    return signal.Signals(e.signum).name if isinstance(e, Terminated) else "SIGINT"


def _record_node(
    p: str,
    sample_interval: float,
    max_buffer_size: int | None,
    args: Sequence[str],
    node_args: Sequence[str],
    duration: float | None,
    started: Any = None,
    progress: Progress | None = None,
    gate: Callable[[], object] | None = None,
) -> tuple[Recording, BaseException | None]:
    """One track per thread (main, worker N); the script's error is taken from the main
    track's meta (record_node itself never raises for the script)."""
    from .engines.node import record_node

    if max_buffer_size is not None:
        if started is not None:
            started.kill()
        raise UsageError("--max-buffer-size is not supported with --engine node (V8 keeps all)")
    rec = record_node(
        p,
        args=args,
        sample_interval=sample_interval,
        node_args=node_args,
        timeout=duration,
        process=started,
        progress=progress,
        gate=gate,
    )
    meta = rec.tracks[0].meta
    error: BaseException | None = None
    if meta.get("exit") == "interrupted":
        signum = _signum(meta.get("signal"), signal.SIGINT)
        error = KeyboardInterrupt() if signum == signal.SIGINT else Terminated(signum)
    elif meta.get("error"):
        error = JSError(
            str(meta.get("errorMessage", "")),
            str(meta["error"]),
            name=str(meta.get("errorName", "Error")),
        )
        # Node printed it already (its stderr is the script's): the CLI does not repeat it.
        error.printed = True  # type: ignore[attr-defined]
    return rec, error


def _record_chromium(
    p: str,
    sample_interval: float,
    max_buffer_size: int | None,
    args: Sequence[str],
    duration: float | None,
    until: str | None,
) -> tuple[Recording, BaseException | None]:
    """One track per thread; the page's first uncaught error, Ctrl-C or a page or browser
    that died are returned as the error (record_chromium never raises for the page)."""
    if max_buffer_size is not None:
        raise UsageError("--max-buffer-size is not supported with Chromium (V8 keeps all)")
    if args:
        raise UsageError(f"{p}: a page takes no arguments ({' '.join(args)!r})")
    from .engines.chromium.record import record_chromium

    rec = record_chromium(p, sample_interval, until=until, duration=duration)
    meta = rec.tracks[0].meta
    error: BaseException | None = None
    how = meta.get("exit")
    if how == "interrupted":
        signum = _signum(meta.get("signal"), signal.SIGINT)
        error = KeyboardInterrupt() if signum == signal.SIGINT else Terminated(signum)
    elif how in ("crashed", "browser-exited"):
        what = "the page crashed" if how == "crashed" else "Chromium exited unexpectedly"
        error = EngineError(f"{p}: {what}; the samples taken so far were kept")
    elif meta.get("errors"):
        text = str(meta["errors"][0])
        error = JSError(text.splitlines()[0] if text else "uncaught error", text)
        error.printed = True  # type: ignore[attr-defined]  # the page's stderr had it
    return rec, error


def run(
    path: str | os.PathLike[str],
    args: Sequence[str] = (),
    engine: str = "quickjs",
    allow_profiling: bool = True,
    node_args: Sequence[str] = (),
) -> int | None:
    """Run the script at `path` with no outer profiling (console output goes to stdout/
    stderr). Raises JSError for an uncaught error, KeyboardInterrupt on Ctrl-C.

    The script sees the spec's `Profiler` global on both engines (QuickJS: built into our
    host, js/quickjs_profiler.js; engine="node": the preload js/node_profiler.js, and the
    return value is Node's exit code, Node having printed any error).
    `allow_profiling=False` (`jsprof run --no-profiling`) makes its constructor throw
    NotAllowedError.
    """
    p = check_script(path, engine)
    if engine == "node":
        from .engines.node import run_node

        return run_node(p, args, allow_profiling=allow_profiling, node_args=node_args)
    from .engines.quickjs import QuickJS

    rts: list[QuickJS] = []
    with terminate_as_interrupt(lambda: rts and rts[0].interrupt()):
        rts.append(QuickJS(args=[p, *args], allow_profiling=allow_profiling))
        rts[0].eval_file(p)
    return None
