"""QuickJS-ng embedded in Python, with jsprof's sampling profiler (the C extension
``jsprof._quickjs``, built from the pinned quickjs-ng sdist by setup.py).

``QuickJS()`` is a runtime with one context and a small host: ``console.log/error``
(straight to the process's stdout/stderr), ``setTimeout``/``setInterval`` and their
clears, ``performance.now()``/``performance.timeOrigin`` (Unix epoch ms), ``scriptArgs``,
ES modules (``.mjs`` or import/export detected) loaded from files. ``eval`` runs the code,
then promise jobs and timers until nothing is left, with the GIL released, so several
runtimes on several threads run (and are profiled) at once.

Frames in the traces
--------------------
- ``name`` is the function's ECMAScript ``name`` (its own ``name`` data property, read
  after the run, never through a getter: ``const f = () => ...`` -> ``f``, ``get x``/``set
  x``, methods by their key); where that is empty, the name V8 gives the function, read
  from the script's source when the session's trace is built (``jsprof.names``: ``pp.next
  = function () {}`` -> ``pp.next``); ``''`` for top-level script or module code and
  functions V8 leaves anonymous too. Built-in (C) functions are never frames:
  time inside them is charged to the JavaScript function that called them.
- ``resourceId`` names the script given to ``eval``/``eval_file`` as
  ``jsprof.trace.normalise_resource`` spells it: a local file as the ``file://`` URL of
  its real path, however it was named.
- ``line``/``column`` (1-based characters) are where V8 places the function, where the
  script's source is at hand (``jsprof.names``): the ``(`` that opens its parameter list,
  an arrow's or a class's first character (a class's default constructor and its instance
  fields' initializer function), for top-level code line 1, column 1. QuickJS itself
  records the ``function`` keyword, a method's name, an arrow's first token, and counts a
  column in UTF-8 bytes from the token's own start (our quickjs.patch: upstream counts
  from the last identifier or blank before it, from 0 on line 1).
- The per-sample ``line`` column is the line executing in the leaf frame: the instruction
  at which the interpreter polled (a backward jump, i.e. the loop the time is spent in, or
  a call being made).
"""

from __future__ import annotations

import functools
import json
import os
import re
import signal
import sys
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import unquote, urlparse

import numpy as np
import orjson

from ..errors import EngineError, JSError, UsageError
from ..formats.jsprof import trace_to_doc
from ..meta import CLOCKS, WALL
from ..session import Chunk, ProfilerSession, SharedSampler, sessions_json_ids
from ..trace import ProfilerTrace, Recording, Track, normalise_resource
from ._ending import DurationEnded, Progress, signal_name, terminate_as_interrupt
from .base import (
    DEFAULT_INTERVAL_MS,
    Instrumentation,
    RuntimeProfiler,
    is_module,
    read_script,
)

try:
    from .. import _quickjs
except ImportError as e:  # pragma: no cover - only when the extension was not built
    _quickjs = None
    _IMPORT_ERROR: ImportError | None = e
else:
    _IMPORT_ERROR = None
    # The sampler self-samples (the interpreter checks a cheap clock at polls and where
    # built-ins return); JSPROF_QUICKJS_SAMPLER=timer selects the older timer-thread mode
    # (one wake-up per tick), for benchmarks/bench_quickjs.py's side-by-side figures.
    if os.environ.get("JSPROF_QUICKJS_SAMPLER") == "timer":
        _quickjs.set_tuning(0.0, 1.0)

ENGINE = "quickjs"
MIN_INTERVAL_MS = 0.1  # below this sampling costs more than the goal (benchmarks/RESULTS.md)
# An hour of samples at 1 ms; the buffer is virtual memory committed only as it fills.
DEFAULT_MAX_BUFFER_SIZE = 3_600_000
MAX_NAMED_SOURCE_BYTES = 32 << 20  # a larger script's frames keep QuickJS's names


def _require_extension() -> Any:
    if _quickjs is None:
        raise EngineError(
            f"the QuickJS engine is not built ({_IMPORT_ERROR}); "
            "run `make` or `pip install -e .` with a C compiler and PyPI reachable"
        )
    return _quickjs


def effective_interval(sample_interval: float) -> float:
    """The interval actually used: the request raised to QuickJS's minimum (0 -> minimum)."""
    if sample_interval != sample_interval or sample_interval < 0:  # NaN or negative
        raise UsageError(f"sample interval must be >= 0 ms, got {sample_interval}")
    return max(float(sample_interval), MIN_INTERVAL_MS)


class _Backend:
    """The C sampler seen by the session layer (session.SamplerBackend)."""

    def __init__(self, runtime: QuickJS) -> None:
        self._q = runtime

    def start(self, interval: float, capacity: int, cpu: bool = False) -> None:
        self._q._rt.sampler_start(interval, capacity, cpu)

    def cpu_now(self) -> float:
        return float(self._q._rt.sampler_cpu)

    def set_interval(self, interval: float) -> None:
        self._q._rt.sampler_set_interval(interval)

    def stop(self) -> None:
        self._q._rt.sampler_stop()

    def sample_now(self) -> None:
        self._q._rt.sampler_sample_now()

    def notify_at(self, n: int) -> None:
        self._q._rt.sampler_notify_at(n)

    def drain(self) -> Chunk:
        return chunk_from_drain(self._q._rt.sampler_drain(), self._q._muted)


def chunk_from_drain(raw: dict[str, Any], muted: set[str] | frozenset[str] = frozenset()) -> Chunk:
    """One drain of the C sampler as a session Chunk (resources as URLs, muted marked)."""
    funcs = [
        (name, normalise_resource(filename), line, col, int(realm), filename in muted)
        for name, filename, line, col, realm in raw["funcs"]
    ]
    return Chunk(
        funcs=funcs,
        stack_parent=np.frombuffer(raw["stack_parent"], np.int32),
        stack_func=np.frombuffer(raw["stack_func"], np.int32),
        time=np.frombuffer(raw["ts"], np.float64),
        stack=np.frombuffer(raw["stack"], np.int32),
        line=np.frombuffer(raw["line"], np.int32),
        flags=np.frombuffer(raw["flags"], np.uint8),
        due=np.frombuffer(raw["due"], np.float64),
        cap=np.frombuffer(raw["cap"], np.float64),
        cpu=np.frombuffer(raw["cpu"], np.float64),
        overflow=bool(raw["full"]),
        dropped=int(raw["dropped"]),
        stall_dropped=int(raw["stall_dropped"]),
        offcpu_dropped=int(raw["offcpu_dropped"]),
        truncated=int(raw["truncated"]),
    )


class _JSFacingError(UsageError):
    """An error the JS Profiler global rethrows under the spec's name."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.js_name = name


_SITE_RE = re.compile(r"^\s*at (.+:\d+:\d+)\s*$")


def _compile_site(js_stack: str) -> str | None:
    """Where a script failed to compile, `file:line:column`: QuickJS's stack for it is
    that one frame (`    at app.js:3:11`)."""
    first = js_stack.splitlines()[0] if js_stack else ""
    m = _SITE_RE.match(first)
    return m.group(1) if m else None


# The host's module loader (jsprof_quickjs.c, module_loader) when no file has the name
# QuickJS resolved: `./` and `../` against the importing module's directory, anything else
# as it is written (a package name is then looked for as a file in the working directory).
_NO_MODULE_RE = re.compile(r"^could not load module '(.*)'$")

# Node's built-in modules (`require('module').builtinModules` of Node 20, without the
# `_`-prefixed internals), which Node also resolves without `node:` (`import fs from "fs"`).
# tests/test_quickjs_imports.py checks this against the Node it runs.
NODE_BUILTINS = frozenset(
    "assert async_hooks buffer child_process cluster console constants crypto dgram "
    "diagnostics_channel dns domain events fs http http2 https inspector module net os "
    "path perf_hooks process punycode querystring readline repl stream string_decoder sys "
    "timers tls trace_events tty url util v8 vm wasi worker_threads zlib".split()
)


def module_hint(e: JSError) -> str | None:
    """What to do when an import found no file: jsprof's QuickJS host loads modules by
    path only. Looking packages up in node_modules (package.json `exports` and its
    conditions, `module`, `main`) would still not run most of them: CommonJS packages and
    Node's built-in modules (`node:fs`) do not exist in QuickJS; a bundler resolves all of
    it, and Node runs it as it is."""
    m = _NO_MODULE_RE.match(str(e)) if e.name == "ReferenceError" else None
    if m is None:
        return None
    # QuickJS has made `./x.mjs` of a script named without a directory `x.mjs`, which
    # then reads like a package name: one hint for both.
    spec = m.group(1)
    if spec.startswith("node:") or spec.split("/")[0] in NODE_BUILTINS:
        return (f"'{spec}' is a Node built-in module, which QuickJS does not have: record "
                "with --engine node")
    return (
        f"no file '{spec}': jsprof's QuickJS loads imports by path only ('./x.mjs', "
        "'../x.mjs' from the importing file, '/abs/x.mjs'), never a package from "
        "node_modules; bundle the script first (esbuild app.mjs --bundle --format=esm "
        "--outfile=app.bundle.mjs) or record it with --engine node"
    )


_BOOTSTRAP = "jsprof:quickjs_profiler.js"
_JS_DIR = Path(__file__).resolve().parent.parent / "js"


@functools.cache
def _bootstrap_source() -> str:
    """The Profiler global's source, read once per process: the shared Profiler base
    (WebIDL option checks included) and the QuickJS backend in one function scope, so
    neither adds a global."""
    parts = [
        (_JS_DIR / n).read_text(encoding="utf-8")
        for n in ("profiler_base.js", "quickjs_profiler.js")
    ]
    return "(() => {\n" + "\n".join(parts) + "\n})();\n"


class QuickJS:
    """A QuickJS-ng runtime. Use from one thread at a time (any thread).

    The global `Profiler` (the W3C JS Self-Profiling API, extending `EventTarget`) is
    available to scripts; with `allow_profiling=False` its constructor throws
    `NotAllowedError` (the embedder forbids profiling, like a page without the document
    policy). Python sessions (`profiler()`) and JS ones share the runtime's one sampler.
    `memory_limit` (bytes): QuickJS's allocation limit for the runtime; an allocation
    past it throws `InternalError: out of memory` in the script.
    `clock` ("wall" or "cpu"): what sessions that name no clock sample on, the script's
    `Profiler`s included (see ProfilerSession).
    """

    type: ClassVar[str] = ENGINE

    def __init__(
        self,
        args: Sequence[str] = (),
        allow_profiling: bool = True,
        memory_limit: int | None = None,
        clock: str = WALL,
    ) -> None:
        q = _require_extension()
        if memory_limit is not None and memory_limit <= 0:
            raise UsageError(f"memory limit must be > 0 bytes, got {memory_limit}")
        if clock not in CLOCKS:
            raise UsageError(f"unknown clock {clock!r}; choose one of: {', '.join(CLOCKS)}")
        self._rt = q.Runtime(args=[str(a) for a in args])
        self.allow_profiling = allow_profiling
        self._muted: set[str] = {_BOOTSTRAP}
        # the scripts' sources by URL and their functions' V8 names (_name_frames)
        self._sources: dict[str, str | None] = {}
        self._names: dict[str, Any] = {}
        self._js_sessions: dict[int, ProfilerSession] = {}
        self._next_js_id = 0
        # Held by eval() for its whole run: whoever holds it owns the runtime. Work from
        # other threads queues in _requests and is served by the caller itself: at once
        # when the runtime is idle, else while the owner is parked at its next poll.
        self._owner_lock = threading.RLock()
        self._requests: list[tuple[Callable[[], Any], Future]] = []
        self._requests_lock = threading.Lock()
        self.sampler = SharedSampler(
            backend=_Backend(self),
            min_interval=MIN_INTERVAL_MS,
            capacity=DEFAULT_MAX_BUFFER_SIZE,
            engine=ENGINE,
            time_origin=self.time_origin,
            meta={"quickjsVersion": str(q.QUICKJS_VERSION)},
            can_drain=self._can_drain,
            require_owner=self._check_owner,
            on_filled=self._rt.request_check,
            default_clock=clock,
            name_frames=self._name_frames,
        )
        # The C side holds the callback; a weak reference back avoids a cycle through a
        # C object the garbage collector cannot see (it would keep the runtime alive).
        ref = weakref.ref(self)

        def host(op: str, arg: str) -> str | None:
            me = ref()
            if me is None:
                raise _JSFacingError("InvalidStateError", "the runtime is gone")
            return me._host_call(op, arg)

        self._rt.set_host_callback(host)
        self._rt.eval(_bootstrap_source(), _BOOTSTRAP, 0, False)
        if memory_limit is not None:
            # counted from here, bootstrap included (~0.3 MB); past it the script gets
            # InternalError: out of memory, and sampling goes on (its buffers are apart)
            self._rt.set_memory_limit(int(memory_limit))

    @property
    def time_origin(self) -> float:
        """performance.timeOrigin: Unix epoch ms at which performance.now() was 0."""
        return float(self._rt.time_origin)

    def now(self) -> float:
        """This runtime's performance.now(), ms."""
        return float(self._rt.now())

    def new_realm(self) -> int:
        """Create another realm (a second context of this runtime, with console and
        timers); returns its index for `eval(..., realm=)`. Sessions profile realm 0."""
        return int(self._rt.new_context())

    def eval(
        self,
        source: str,
        filename: str = "<input>",
        muted: bool = False,
        *,
        module: bool | None = None,
        realm: int = 0,
    ) -> Any:
        """Run `source` to completion (promise jobs and timers included).

        Returns the completion value when it is a primitive (else None). Raises
        jsprof.errors.JSError for an uncaught exception or unhandled rejection, and
        KeyboardInterrupt on Ctrl-C (main thread) or `interrupt()`. `muted=True` treats
        the script like a cross-origin script without CORS: it contributes no resource and
        no frames to traces (samples inside it keep their non-muted callers).
        """
        # Keep Python's buffered output ahead of what the script writes to the same fds.
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (AttributeError, ValueError, OSError):
                pass
        catch_sigint = threading.current_thread() is threading.main_thread() and callable(
            signal.getsignal(signal.SIGINT)
        )
        if self._rt.in_owner_callback:
            # A nested run would mark the runtime free while the outer eval still runs in
            # it (two threads could then enter one JSRuntime).
            raise UsageError(
                "eval() was called from inside a callback of this runtime's running eval; "
                "run it after eval() returns"
            )
        if muted:
            self._muted.add(filename)
        else:
            self._remember_source(normalise_resource(filename), source)
        mod = is_module(source, filename) if module is None else module
        try:
            with self._owner_lock:
                try:
                    return self._rt.eval(source, filename, int(mod), catch_sigint, realm)
                except JSError as e:
                    if e.compile:  # the C side compiles apart from the run (host_eval)
                        e.where = _compile_site(e.js_stack)
                    e.hint = e.hint or module_hint(e)
                    raise
                finally:
                    self._serve_requests()
                    # buffer-full callbacks of Python sessions noticed at the very end
                    if self.sampler.filled and not self._rt.busy:
                        self.sampler.check()
        finally:
            # A request queued after the last service above but before the lock was
            # released found the runtime owned and asked the owner, who had stopped
            # looking: serve it now.
            self._serve_orphans()

    def call_on_owner(self, fn: Callable[[], Any], timeout: float = 10.0) -> Future:
        """Run `fn` where the runtime may be used and return a Future with its outcome:
        now, by this thread, when the runtime is idle; while another thread runs eval(),
        also by this thread, once that thread has parked at its next poll or event-loop
        turn (about one sampler interval, even deep inside a long eval; the interrupt
        handler itself runs no Python). Thread-safe. If the runtime is held but runs no
        JavaScript for `timeout` s, the request stays queued for the holder (served when
        its eval returns) and the Future is still pending."""
        fut: Future = Future()
        with self._requests_lock:
            self._requests.append((fn, fut))
        deadline = time.monotonic() + timeout
        while not fut.done():
            if self._owner_lock.acquire(blocking=False):
                try:
                    self._serve_requests()
                finally:
                    self._owner_lock.release()
                break
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if self._rt.busy:
                if self._rt.borrow(left):
                    try:
                        self._serve_requests()
                    finally:
                        self._rt.give_back()
                    break
            else:
                # held by a thread about to run (or just done with) an eval: look again
                time.sleep(0.001)
        return fut

    def _serve_orphans(self) -> None:
        """Serve requests left queued while nobody owns the runtime (see call_on_owner:
        the requester serves them itself when it gets the lock, so this loop only has to
        look again after each release)."""
        while self._requests and self._owner_lock.acquire(blocking=False):
            try:
                self._serve_requests()
            finally:
                self._owner_lock.release()

    def _serve_requests(self) -> None:
        with self._requests_lock:
            todo, self._requests = self._requests, []
        for fn, fut in todo:
            try:
                fut.set_result(fn())
            except BaseException as e:  # noqa: BLE001 - handed to the waiter
                fut.set_exception(e)

    def set_script_window(self, on: bool = True) -> None:
        """With `on`, this runtime's profiling sessions record only while `eval()` runs:
        from just before the script's first instruction to the end of its last job, the
        event loop's waits (as idle) included, and not the time between evals (making the
        runtime, reading files, the caller's own work), which would be recorded as idle.
        What `jsprof record` uses; call it before eval(), not from inside one."""
        self._rt.sampler_script_window(bool(on))

    def eval_file(self, path: str | os.PathLike[str], *, module: bool | None = None) -> Any:
        """Run a script file; its resource is the path as given (absolute -> file:// URL)."""
        p = os.fspath(path)
        return self.eval(read_script(p), p, module=module)

    def interrupt(self) -> None:
        """Stop the running script with KeyboardInterrupt (safe from any thread)."""
        self._rt.interrupt()

    def profiler(
        self,
        sample_interval: float = DEFAULT_INTERVAL_MS,
        max_buffer_size: int | None = None,
        on_sample_buffer_full: Callable[[ProfilerSession], Any] | None = None,
        clock: str | None = None,
    ) -> ProfilerSession:
        """Start a profiling session on this runtime (sampling starts now, with a first
        sample); `.stop()` returns the ProfilerTrace. Several may run at once, on one
        clock: `clock` "cpu" samples the runtime's CPU time (ProfilerSession)."""
        if max_buffer_size is None:
            max_buffer_size = DEFAULT_MAX_BUFFER_SIZE
        if max_buffer_size < 0:
            raise UsageError(f"max buffer size must be >= 0 samples, got {max_buffer_size}")
        self._check_owner("start a profiling session")
        return ProfilerSession(
            self.sampler,
            sample_interval,
            max_buffer_size,
            on_sample_buffer_full=on_sample_buffer_full,
            clock=clock,
        )

    # --- the owner-thread rule and the JS side

    def _can_drain(self) -> bool:
        # Draining symbolises through the runtime: only its owner may, i.e. nobody while
        # an eval runs, except the eval's own thread inside a host callback.
        return not self._rt.busy or bool(self._rt.in_owner_callback)

    def _check_owner(self, what: str) -> None:
        if not self._can_drain():
            raise UsageError(
                f"cannot {what} while this QuickJS runtime runs JavaScript on another "
                "thread; do it after eval() returns (or interrupt() it)"
            )

    def _name_frames(self, trace: ProfilerTrace) -> ProfilerTrace:
        """Frames placed in characters and named as V8 names their functions (`pp.next =
        function () {}` is `pp.next`; QuickJS leaves it anonymous), from the scripts'
        sources: the text given to eval, else the local file a module was loaded from."""
        from ..names import name_frames

        return name_frames(self._character_columns(trace), self._source_text, self._names)

    def _character_columns(self, trace: ProfilerTrace) -> ProfilerTrace:
        """QuickJS counts a column in UTF-8 bytes (1-based, our quickjs.patch: upstream
        counts from 0 on a script's first line): converted to the 1-based characters of
        the line, where the script's text is at hand (a minified bundle is one first line,
        often with non-ASCII text in it)."""
        frames = list(trace.frames)
        lines: dict[str, list[str] | None] = {}
        ascii_lines: dict[tuple[str, int], bool] = {}
        for i, f in enumerate(frames):
            if f.resource_id is None or f.line is None or f.column is None:
                continue
            if f.line == 1 and f.column == 1:
                continue  # the script's own code, or a function at its very start
            url = trace.resources[f.resource_id]
            if url not in lines:
                text = self._source_text(url)
                lines[url] = None if text is None else text.split("\n")
            got = lines[url]
            if got is None or f.line > len(got):
                continue
            text = got[f.line - 1]
            if (url, f.line) not in ascii_lines:
                ascii_lines[url, f.line] = text.isascii()  # once per line of a bundle
            if ascii_lines[url, f.line]:
                continue
            column = len(text.encode("utf-8")[: f.column - 1].decode("utf-8", "replace")) + 1
            if column != f.column:
                frames[i] = f._replace(column=column)
        return trace.replace(frames=frames)

    def _remember_source(self, url: str, source: str) -> None:
        """Keep a script's text to name its frames from. `<input>` is also where QuickJS
        puts `new Function` and `eval` code (positions in other texts), and a name given
        twice with different texts holds both: neither is kept (their frames keep
        QuickJS's names)."""
        known = self._sources.get(url, source)
        ok = url != "<input>" and known == source and len(source) <= MAX_NAMED_SOURCE_BYTES
        self._sources[url] = source if ok else None
        self._names.pop(url, None)

    def _source_text(self, url: str) -> str | None:
        if url in self._sources or not url.startswith("file://"):
            return self._sources.get(url)
        try:
            path = Path(unquote(urlparse(url).path))
            if not path.is_file() or path.stat().st_size > MAX_NAMED_SOURCE_BYTES:
                return None
            return path.read_bytes()[:MAX_NAMED_SOURCE_BYTES].decode("utf-8", "replace")
        except OSError:
            return None

    def _host_call(self, op: str, arg: str) -> str | None:
        """The JS Profiler global's requests (owner thread, GIL held)."""
        if op == "create":
            if not self.allow_profiling:
                raise _JSFacingError(
                    "NotAllowedError", "profiling is not allowed here (jsprof run --no-profiling)"
                )
            opts = json.loads(arg)
            s = ProfilerSession(self.sampler, opts["sampleInterval"], opts["maxBufferSize"])
            self._next_js_id += 1
            s.js_id = self._next_js_id
            self._js_sessions[s.js_id] = s
            return json.dumps({"id": s.js_id, "sampleInterval": s.sample_interval})
        if op == "stop":
            s = self._js_sessions.pop(int(arg), None)
            if s is None:
                raise _JSFacingError("InvalidStateError", "the profiler was already stopped")
            return orjson.dumps(trace_to_doc(s.stop())).decode()
        if op == "stopped":
            s = self._js_sessions.get(int(arg))
            return "1" if s is None or s.stopped else "0"
        if op == "check":
            return sessions_json_ids(self.sampler.check())
        if op == "serve":
            self._serve_requests()
            return None
        raise _JSFacingError("TypeError", f"unknown host request {op!r}")


class QuickJSProfiler(RuntimeProfiler):
    """The RuntimeProfiler contract over one QuickJS runtime."""

    type: ClassVar[str] = ENGINE

    def __init__(
        self, runtime: QuickJS, max_buffer_size: int | None = None, clock: str | None = None
    ) -> None:
        if clock is not None and clock not in CLOCKS:
            raise UsageError(f"unknown clock {clock!r}; choose one of: {', '.join(CLOCKS)}")
        self.runtime = runtime
        self.max_buffer_size = max_buffer_size
        self.clock = clock  # None: the runtime's
        self.sample_interval = DEFAULT_INTERVAL_MS
        self._session: ProfilerSession | None = None
        self._starting = False  # start() asked (maybe not yet served by the owner)
        self._start_error: BaseException | None = None
        self._last: tuple[ProfilerSession, ProfilerTrace] | None = None

    def setup(self, sample_interval: float) -> None:
        if self._session is not None:
            raise UsageError("setup() while profiling: stop() first")
        effective_interval(sample_interval)  # validate now, not at start
        self.sample_interval = float(sample_interval)

    # Owner-thread dispatch (base.py): inline inside a host callback on the eval's thread;
    # otherwise through QuickJS.call_on_owner (inline when the runtime is idle, else by
    # this thread while the running eval's thread is parked at its next poll).
    def _owner_thread(self) -> bool:
        return bool(self.runtime._rt.in_owner_callback)

    def _submit(self, fn: Callable[[], Any]) -> Future:
        return self.runtime.call_on_owner(fn, timeout=self.stop_timeout)

    def start(self, is_create: bool = False) -> None:
        if self._session is not None:
            return
        self._starting = True
        try:
            self._dispatch(self._start_here, inline=is_create, wait=True)
        except EngineError:
            # The owner did not answer in time (blocked outside JavaScript): the start
            # stays queued and runs when it next polls; its error, if any, is raised by
            # stop().
            pass
        except BaseException:
            self._starting = False
            raise

    def _start_here(self) -> None:
        if self._session is None and self._starting:
            try:
                self._session = self.runtime.profiler(
                    self.sample_interval, self.max_buffer_size, clock=self.clock
                )
            except BaseException as e:
                self._start_error = e
                self._starting = False
                raise

    def stop(self, is_destroy: bool = False) -> ProfilerTrace | None:
        self._starting = False
        err, self._start_error = self._start_error, None
        if err is not None and self._session is None:
            raise err  # a late start (served after start() returned) failed
        return self._dispatch(self._stop_here, inline=is_destroy, wait=True)

    def _stop_here(self) -> ProfilerTrace | None:
        session, self._session = self._session, None
        if session is None:
            return None
        trace = session.stop()
        self._last = (session, trace)
        return trace

    def track(self, name: str = "main") -> Track | None:
        if self._last is None:
            return None
        session, trace = self._last
        return session.track(trace, name)

    @property
    def started(self) -> bool:
        return self._session is not None or self._starting


# ---- the registry's entry points (engines/registry.py) ----------------------------------


def record_script(
    p: str,
    *,
    sample_interval: float,
    args: Sequence[str] = (),
    max_buffer_size: int | None = None,
    duration: float | None = None,
    progress: Progress | None = None,
    clock: str = WALL,
) -> tuple[Recording, BaseException | None]:
    """One track, "main"; the script's error (JSError, KeyboardInterrupt) is returned.
    `clock` "cpu": samples on the script's CPU time (ProfilerSession)."""
    error: BaseException | None = None
    ended = False
    rts: list[QuickJS] = []
    session = None
    trace = None
    try:
        # Entered first: the sampler's thread must inherit the blocked signals.
        with terminate_as_interrupt(lambda: rts and rts[0].interrupt(), duration):
            rts.append(QuickJS(args=[p, *args], clock=clock))
            source = read_script(p)
            # The recording holds the script, not jsprof: from just before its first
            # instruction to the end of its last job (the runtime's script window), and
            # the session is stopped before this block's exit waits for the signal watcher
            # (up to one of its 50 ms polls, once recorded as idle).
            rts[0].set_script_window(True)
            session = rts[0].profiler(
                sample_interval=sample_interval, max_buffer_size=max_buffer_size
            )
            if progress is not None:
                # kept so far + taken since the last drain (read from another thread)
                rt, sess = rts[0], session
                progress.poll = lambda: (sess._count + rt._rt.sampler_pending, 1)
            try:
                rts[0].eval(source, p)
            finally:
                trace = session.stop()
    except DurationEnded:
        ended = True
    except (JSError, KeyboardInterrupt) as e:
        error = e
        if session is None:
            raise
    finally:
        if session is not None and trace is None:
            trace = session.stop()
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
        track.meta["signal"] = signal_name(error)
    else:
        track.meta["exit"] = "error"
        track.meta["error"] = f"{getattr(error, 'name', 'Error')}: {error}"
    return Recording([track]), error


def run_script(
    p: str, args: Sequence[str] = (), allow_profiling: bool = True, clock: str = WALL
) -> None:
    """`jsprof run`: the script with the spec's `Profiler` global (ours, in the host); its
    error raised (JSError), Ctrl-C/SIGTERM as KeyboardInterrupt. `clock` "cpu": its
    Profilers sample its CPU time."""
    rts: list[QuickJS] = []
    with terminate_as_interrupt(lambda: rts and rts[0].interrupt()):
        rts.append(QuickJS(args=[p, *args], allow_profiling=allow_profiling, clock=clock))
        rts[0].eval_file(p)


def run_instrumented(
    p: str, source: str, args: Sequence[str], how: Instrumentation
) -> tuple[dict[str, Any], BaseException | None, float]:
    """`jsprof instrument`: the script with its classes' methods wrapped (instrument/'s
    transform and runtime); (the books' dump, the script's error or None, the runtime's
    time origin)."""
    rt = QuickJS(args=[p, *args])
    prelude = f"globalThis.__jsprof_config = {json.dumps(how.config)};\n" + how.runtime
    rt.eval(prelude, "jsprof-instrument-runtime.js", module=False)
    error: BaseException | None = None
    try:
        # SIGTERM/SIGHUP stop the script as Ctrl-C does (Terminated carries the signal),
        # so the books below are read either way; the dump runs after the block, where
        # no stop request can interrupt it.
        with terminate_as_interrupt(rt.interrupt):
            # Imported modules are read by QuickJS's own loader, past the transform:
            # evaluate their transformed sources first under the names the imports
            # resolve to, so the loader finds them already loaded.
            for name, dsrc in how.module_deps(p, source):
                rt.eval(how.transform(dsrc), name, module=True)
            rt.eval(how.transform(source), p, module=is_module(source, p))
    except (JSError, KeyboardInterrupt) as e:
        error = e
    raw = rt.eval("__jsprof_dump()", "<jsprof>", module=False)
    return json.loads(raw), error, rt.time_origin
