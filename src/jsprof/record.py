"""Record or run a script: what `jsprof record` and `jsprof run` call.

Both raise typed errors (jsprof.errors) and print nothing themselves; the CLI prints.
A script that throws or is interrupted still yields its samples: `record` saves the trace
(when `output` is given) and attaches the Recording to the exception it re-raises.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from .errors import EngineError, JSError, UsageError
from .trace import Recording

ENGINES = ("quickjs", "node")


# Engines that run a script file; pages and URLs are for a browser engine.
SCRIPT_ENGINES = ("quickjs", "node")
SCRIPT_EXTENSIONS = (".js", ".mjs", ".cjs")
_TRACE_EXTENSIONS = (".json", ".cpuprofile", ".pftrace", ".gz", ".pprof", ".folded")


def check_script(path: str | os.PathLike[str], engine: str) -> str:
    """The script's path, or a UsageError saying why `engine` cannot run it."""
    if engine not in ENGINES:
        raise UsageError(f"unknown engine {engine!r}; choose one of: {', '.join(ENGINES)}")
    p = os.fspath(path)
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


def record(
    path: str | os.PathLike[str],
    engine: str = "quickjs",
    sample_interval: float = 1.0,
    max_buffer_size: int | None = None,
    args: Sequence[str] = (),
    output: str | os.PathLike[str] | None = None,
    workers: int | None = None,
    progress: Progress | None = None,
) -> Recording:
    """Run the script at `path` under the sampling profiler and return its Recording.

    `workers=N` (QuickJS) runs N copies on N threads into one Recording, a track each.

    One track, named "main", engine "quickjs"; `meta` holds the capture latency
    (p50/p99 ms), `buffer_full`, the script and how it ended (`exit`: ok/error/
    interrupted). With `output`, the recording is also saved there -- also when the
    script fails: then the JSError (or KeyboardInterrupt) is re-raised carrying
    `.recording` (and `.output`), so the caller can report on the partial profile.
    `scriptArgs` in the script is [path, *args], as with qjs. `progress`: filled in with a
    cheap way to count samples while the script runs (a status line's; QuickJS so far).
    """
    p = check_script(path, engine)
    if workers is not None:
        if engine != "quickjs":
            raise UsageError("--workers runs QuickJS runtimes; use --engine quickjs")
        from .workers import record_workers

        try:
            rec, error = record_workers(p, workers, sample_interval, max_buffer_size, args), None
        except (JSError, KeyboardInterrupt) as e:
            rec, error = e.recording, e  # type: ignore[union-attr]
    elif engine == "node":
        rec, error = _record_node(p, sample_interval, max_buffer_size, args)
    else:
        rec, error = _record_quickjs(p, sample_interval, max_buffer_size, args, progress)
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
    progress: Progress | None = None,
) -> tuple[Recording, BaseException | None]:
    """One track, "main"; the script's error (JSError, KeyboardInterrupt) is returned."""
    from .engines.quickjs import QuickJS

    rt = QuickJS(args=[p, *args])
    session = rt.profiler(sample_interval=sample_interval, max_buffer_size=max_buffer_size)
    if progress is not None:
        # kept so far + taken since the last drain (read from another thread, lock-free)
        progress.poll = lambda: (session._count + rt._rt.sampler_pending, 1)
    error: BaseException | None = None
    try:
        rt.eval_file(p)
    except (JSError, KeyboardInterrupt) as e:
        error = e
    finally:
        trace = session.stop()
    track = session.track(trace)
    track.meta["script"] = p
    track.meta["args"] = list(args)
    if error is None:
        track.meta["exit"] = "ok"
    elif isinstance(error, KeyboardInterrupt):
        track.meta["exit"] = "interrupted"
    else:
        track.meta["exit"] = "error"
        track.meta["error"] = f"{getattr(error, 'name', 'Error')}: {error}"
    return Recording([track]), error


def _record_node(
    p: str, sample_interval: float, max_buffer_size: int | None, args: Sequence[str]
) -> tuple[Recording, BaseException | None]:
    """One track per thread (main, worker N); the script's error is taken from the main
    track's meta (record_node itself never raises for the script)."""
    from .engines.node import record_node

    if max_buffer_size is not None:
        raise UsageError("--max-buffer-size is not supported with --engine node (V8 keeps all)")
    rec = record_node(p, args=args, sample_interval=sample_interval)
    meta = rec.tracks[0].meta
    error: BaseException | None = None
    if meta.get("exit") == "interrupted":
        error = KeyboardInterrupt()
    elif meta.get("error"):
        text = str(meta["error"])
        error = JSError(text.splitlines()[0] if text else "uncaught exception", text)
    return rec, error


def run(
    path: str | os.PathLike[str],
    args: Sequence[str] = (),
    engine: str = "quickjs",
    allow_profiling: bool = True,
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

        return run_node(p, args, allow_profiling=allow_profiling)
    from .engines.quickjs import QuickJS

    QuickJS(args=[p, *args], allow_profiling=allow_profiling).eval_file(p)
    return None
