"""Record or run a script: what `jsprof record` and `jsprof run` call.

Both raise typed errors (jsprof.errors) and print nothing themselves; the CLI prints.
A script that throws or is interrupted still yields its samples: `record` saves the trace
(when `output` is given) and attaches the Recording to the exception it re-raises.

The exit-code rule (`exit_status`): `jsprof record` ends as the script would have ended
without jsprof -- its own status (`process.exit(3)` -> 3, `process.exitCode = 4` -> 4, an
uncaught error -> 1, killed by a signal -> 128 + the signal's number); jsprof itself told
to end (Ctrl-C -> 130, SIGTERM -> 143) saves the trace first; a run jsprof ended on purpose
(`--duration`) -> 0. jsprof's own errors exit 2 (the CLI), and so does a script that does
not parse: nothing of it ran, so it is the user's mistake (one line, file:line:column), not
the script's ending, and no trace is written.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Sequence

# The endings moved to engines/_ending.py (engines use them); kept importable from here.
from .engines._ending import DurationEnded as DurationEnded
from .engines._ending import Progress as Progress
from .engines._ending import Terminated as Terminated
from .engines._ending import signal_name, signum_of
from .engines._ending import terminate_as_interrupt as terminate_as_interrupt
from .engines.registry import NAMES, engine_spec
from .errors import EngineError, JSError, UsageError

# numpy comes with the trace model: not imported here, so that `jsprof record --engine
# node` can start Node before it pays for those imports (see start_engine).
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (~10 ms before Node starts)
if TYPE_CHECKING:
    from typing import Any

    from .recorded import LightRecording
    from .trace import Recording

# The engines, their options and entry points: engines/registry.py (one EngineSpec each).
ENGINES = NAMES


def check_script(path: str | os.PathLike[str], engine: str) -> str:
    """The script's path, or a UsageError saying why `engine` cannot run it."""
    return engine_spec(engine).check(os.fspath(path))


def exit_status(rec: Recording) -> int:
    """The status `jsprof record` exits with for this recording (see the module's rule)."""
    meta = rec.tracks[0].meta if rec.tracks else {}
    how = meta.get("exit")
    if how == "duration":
        return 0
    if how == "interrupted":
        return 128 + signum_of(meta.get("signal"), signal.SIGINT)
    if how == "killed":
        return 128 + signum_of(meta.get("signal"), signal.SIGKILL)
    code = meta.get("exitCode")  # older files' exit_code: read as exitCode (meta.normalise)
    if isinstance(code, int) and not isinstance(code, bool) and code >= 0:
        return code
    return 1 if how == "error" else 0


def not_parsed_here(path: str, error: BaseException | None) -> bool:
    """Whether `error` says the script at `path` itself does not parse. A module it imports
    that does not parse is the script's error as before (exit 1), on every engine alike:
    Node names no place for it before it ran."""
    if not isinstance(error, JSError):
        return False
    if not (error.compile and error.name == "SyntaxError" and error.where):
        return False
    file = error.where.rsplit(":", 2)[0]
    try:
        return file == path or os.path.samefile(file, path)
    except OSError:
        return False


def not_parsed(path: str, error: JSError, command: str = "record") -> UsageError:
    """The one line for a script that does not compile: where, what, what to do (`command`
    again: record, run, instrument)."""
    where = error.where or path
    return UsageError(
        f"{where}: {error.name}: {error} ({path} does not parse, so nothing ran; "
        f"fix it and {command} again)"
    )


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
    return engine_spec(engine).start(os.fspath(path), args, node_args)


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
    clock: str = "wall",
    light: bool = False,
) -> Recording | LightRecording:
    """Run the script at `path` under the sampling profiler and return its Recording.

    engine="chromium": `path` is a URL (http, https, file), a local .html page or a
    .js/.mjs script (served from loopback), opened in headless Chromium; `until` is "load"
    (the default) or "js:EXPR", `duration` caps it; a track per thread (main, then each
    worker or out-of-process iframe by URL). The page's uncaught errors were printed on
    stderr and raise a JSError carrying the recording, as a script's do.

    `started`: what `start_engine` returned for this script (Node already booting).
    `gate` (engine="node"): called once the profiler runs, before the script starts (the
    CLI checks its output meanwhile, in another thread); what it raises ends Node.
    `light` (engine="node"): a recorded.LightRecording when every track could be made
    without numpy (what `jsprof record` writes and summarises; `.recording()` is the model).
    `progress`: filled in with a cheap way to count samples while the script runs (a status
    line's; QuickJS so far).

    `duration` (seconds): end the script after that long and keep what was taken (exit
    "duration", not an error). `node_args`: flags for Node itself (engine="node").

    `workers=N` (QuickJS) runs N copies on N threads into one Recording, a track each.

    `clock="cpu"` (QuickJS) samples the script's CPU time instead of wall time: a sample
    per interval of CPU, each weighing the CPU ms since the one before, none while it waits
    or other processes hold the CPU (meta `clock`); other engines refuse it.

    One track, named "main", engine "quickjs"; `meta` holds the capture latency
    (p50/p99 ms), `buffer_full`, the script and how it ended (`exit`: ok/error/
    interrupted). With `output`, the recording is also saved there -- also when the
    script fails: then the JSError (or KeyboardInterrupt) is re-raised carrying
    `.recording` (and `.output`), so the caller can report on the partial profile.
    `scriptArgs` in the script is [path, *args], as with qjs.
    """
    p = check_script(path, engine)
    spec = engine_spec(engine)
    try:
        spec.check_clock(clock)
    except UsageError:
        if started is not None:
            started.kill()
        raise
    if until is not None and not spec.takes("until"):
        raise UsageError("--until goes with --engine chromium (a page's ending)")
    if workers is not None:
        spec.check_workers(workers)
        if duration is not None:
            raise UsageError("--duration does not go with --workers; stop them with Ctrl-C")
        from .workers import record_workers

        try:
            rec = record_workers(p, workers, sample_interval, max_buffer_size, args, clock)
            error = None
        except (JSError, KeyboardInterrupt) as e:
            rec, error = e.recording, e  # type: ignore[union-attr]
            if isinstance(e, KeyboardInterrupt) and rec.tracks:
                rec.tracks[0].meta["exit"] = "interrupted"
                rec.tracks[0].meta["signal"] = signal_name(e)
    else:
        try:
            spec.check_max_buffer_size(max_buffer_size)
        except UsageError:
            if started is not None:
                started.kill()
            raise
        rec, error = spec.record(
            p, sample_interval=sample_interval, max_buffer_size=max_buffer_size, args=args,
            node_args=node_args, duration=duration, started=started, progress=progress,
            gate=gate, until=until, clock=clock, light=light,
        )
    if isinstance(error, JSError) and not_parsed_here(p, error):
        # The script never ran: a mistake in it, not its ending (no trace, no exit 1).
        raise not_parsed(p, error)
    return _saved(rec, error, output)


def _saved(
    rec: Recording, error: BaseException | None, output: str | os.PathLike[str] | None
) -> Recording:
    """`rec`, saved to `output` when given; the script's `error`, when there is one, is
    raised carrying `.recording` and `.output` (the samples are never lost with it)."""
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


def record_command(
    argv: Sequence[str],
    engine: str = "node",
    sample_interval: float = 1.0,
    output: str | os.PathLike[str] | None = None,
    duration: float | None = None,
    progress: Progress | None = None,
) -> Recording:
    """Run a command (`["npm", "test"]`: its first word found on PATH, as a shell does) and
    profile every process of `engine` it starts, children and forks included, each as its
    own tracks in one Recording (engine="node": `pid PID SCRIPT`, then its workers).

    The first track's meta holds the command's ending as a script's (`command`, `exit`,
    `exitCode`, `signal`): `exit_status` gives the command's own status. Saved to `output`
    when given; Ctrl-C/SIGTERM/SIGHUP keep the samples and are re-raised carrying
    `.recording` (and `.output`), as `record` does."""
    rec, error = engine_spec(engine).record_command(
        list(argv), sample_interval=sample_interval, duration=duration, progress=progress
    )
    return _saved(rec, error, output)


def run(
    path: str | os.PathLike[str],
    args: Sequence[str] = (),
    engine: str = "quickjs",
    allow_profiling: bool = True,
    node_args: Sequence[str] = (),
    clock: str = "wall",
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
    spec = engine_spec(engine)
    spec.check_clock(clock)
    options: dict[str, Any] = {"node_args": node_args} if spec.takes("node_args") else {}
    if spec.takes("clock"):
        options["clock"] = clock
    return spec.run(p, args, allow_profiling=allow_profiling, **options)
