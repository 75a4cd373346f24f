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
  after the run, never through a getter): inferred names (``const f = () => ...`` -> ``f``),
  ``get x``/``set x``, class and static methods by their key; ``''`` for top-level script
  or module code and truly anonymous functions. Built-in (C) functions are never frames:
  time inside them is charged to the JavaScript function that called them.
- ``resourceId`` names the script as given to ``eval``/``eval_file``; an absolute path
  becomes a ``file://`` URL.
- ``line``/``column`` (1-based) are the function's *definition position as QuickJS
  records it*: for ``function f(a) {}`` (declaration or expression) the ``function``
  keyword; for methods, getters/setters and class members the start of the property name
  (``x`` in ``get x() {}``, ``m`` in ``static m() {}``); for arrow functions the start of
  the parameter list (``(`` or the lone parameter's name); for a class constructor the
  ``constructor`` keyword (its name is the class's); for top-level code line 1, column 1.
  Chromium/V8 instead report the ``(`` that opens the parameter list, so a QuickJS column
  is usually a few characters left of Chromium's for the same function (equal for
  parenthesised arrows).
- The per-sample ``line`` column is the line executing in the leaf frame: the instruction
  at which the interpreter polled (a backward jump, i.e. the loop the time is spent in, or
  a call being made).
"""

from __future__ import annotations

import os
import re
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from ..errors import EngineError, UsageError
from ..trace import ProfilerTrace, Track
from .base import DEFAULT_INTERVAL_MS, RuntimeProfiler

try:
    from .. import _quickjs
except ImportError as e:  # pragma: no cover - only when the extension was not built
    _quickjs = None
    _IMPORT_ERROR: ImportError | None = e
else:
    _IMPORT_ERROR = None

ENGINE = "quickjs"
MIN_INTERVAL_MS = 0.1  # below this the timer thread's wake-ups dominate (notes/ENGINES.md)
# An hour of samples at 1 ms; the buffer is virtual memory committed only as it fills.
DEFAULT_MAX_BUFFER_SIZE = 3_600_000

# flag bits per raw sample, as the C drain reports them
_DEFERRED, _IDLE, _NATIVE = 1, 2, 4


# An import/export statement at the start of a line (not `import(`): an ES module. QuickJS's
# own JS_DetectModule calls anything that *parses* as a module a module, which would turn
# sloppy scripts strict and their top-level `var`s non-global.
_MODULE_RE = re.compile(r"^[ \t]*(import\b[ \t]*[\w{*'\"]|import\.meta\b|export\b)", re.M)


def is_module(source: str, filename: str) -> bool:
    """ES module when the file is .mjs or the source has import/export statements."""
    if filename.endswith(".mjs"):
        return True
    if filename.endswith(".cjs"):
        return False
    return _MODULE_RE.search(source) is not None


def _require_extension() -> Any:
    if _quickjs is None:
        raise EngineError(
            f"the QuickJS engine is not built ({_IMPORT_ERROR}); "
            "run `make` or `pip install -e .` with a C compiler and PyPI reachable"
        )
    return _quickjs


def resource_url(filename: str) -> str:
    """The resource string for a script: as given, but absolute paths as file:// URLs."""
    if os.path.isabs(filename):
        return Path(filename).as_uri()
    return filename


def effective_interval(sample_interval: float) -> float:
    """The interval actually used: the request raised to QuickJS's minimum (0 -> minimum)."""
    if sample_interval != sample_interval or sample_interval < 0:  # NaN or negative
        raise UsageError(f"sample interval must be >= 0 ms, got {sample_interval}")
    return max(float(sample_interval), MIN_INTERVAL_MS)


class QuickJS:
    """A QuickJS-ng runtime. Use from one thread at a time (any thread)."""

    type: ClassVar[str] = ENGINE

    def __init__(self, args: Sequence[str] = ()) -> None:
        q = _require_extension()
        self._rt = q.Runtime(args=[str(a) for a in args])
        self._session: ProfilerSession | None = None

    @property
    def time_origin(self) -> float:
        """performance.timeOrigin: Unix epoch ms at which performance.now() was 0."""
        return float(self._rt.time_origin)

    def now(self) -> float:
        """This runtime's performance.now(), ms."""
        return float(self._rt.now())

    def eval(self, source: str, filename: str = "<input>", *, module: bool | None = None) -> Any:
        """Run `source` to completion (promise jobs and timers included).

        Returns the completion value when it is a primitive (else None). Raises
        jsprof.errors.JSError for an uncaught exception or unhandled rejection, and
        KeyboardInterrupt on Ctrl-C (main thread) or `interrupt()`.
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
        mod = is_module(source, filename) if module is None else module
        return self._rt.eval(source, filename, int(mod), catch_sigint)

    def eval_file(self, path: str | os.PathLike[str], *, module: bool | None = None) -> Any:
        """Run a script file; its resource is the path as given (absolute -> file:// URL)."""
        p = os.fspath(path)
        try:
            with open(p, encoding="utf-8") as f:
                source = f.read()
        except FileNotFoundError:
            raise UsageError(f"{p}: no such file; give the path of a .js or .mjs script") from None
        except (OSError, UnicodeDecodeError) as e:
            raise UsageError(f"{p}: cannot read the script ({e})") from None
        return self.eval(source, p, module=module)

    def interrupt(self) -> None:
        """Stop the running script with KeyboardInterrupt (safe from any thread)."""
        self._rt.interrupt()

    def profiler(
        self, sample_interval: float = DEFAULT_INTERVAL_MS, max_buffer_size: int | None = None
    ) -> ProfilerSession:
        """Start a profiling session on this runtime; `.stop()` returns the ProfilerTrace."""
        return ProfilerSession(self, sample_interval, max_buffer_size)


class ProfilerSession:
    """A started sampling session (the Profiler-API issue grows this into the spec's
    Profiler; today: one session per runtime at a time).

    The C sampler is per runtime; its interval can be changed while it runs and it can be
    drained repeatedly, which is what sharing it between sessions needs.
    """

    def __init__(
        self, runtime: QuickJS, sample_interval: float, max_buffer_size: int | None
    ) -> None:
        if runtime._session is not None and not runtime._session.stopped:
            raise UsageError(
                "this QuickJS runtime already has a profiling session; stop it first"
            )
        if max_buffer_size is None:
            max_buffer_size = DEFAULT_MAX_BUFFER_SIZE
        if max_buffer_size < 1:
            raise UsageError(f"max buffer size must be >= 1 sample, got {max_buffer_size}")
        self.runtime = runtime
        self.requested_interval = float(sample_interval)
        self.sample_interval = effective_interval(sample_interval)
        self.max_buffer_size = int(max_buffer_size)
        self.stopped = False
        self.meta: dict[str, Any] = {}
        # due -> capture (ms) of each sample stamped at its capture time; for benchmarks
        self.capture_latencies_ms = np.zeros(0)
        runtime._rt.sampler_start(self.sample_interval, self.max_buffer_size)
        runtime._session = self

    def stop(self) -> ProfilerTrace:
        """Stop sampling and return the trace (also after an exception or Ctrl-C)."""
        if self.stopped:
            raise UsageError("this profiling session is already stopped")
        rt = self.runtime._rt
        if rt.busy:
            # symbolising needs the runtime, which belongs to the thread running it now
            raise UsageError(
                "cannot stop a QuickJS profiling session while its runtime runs JavaScript "
                "on another thread; stop it after eval() returns (or interrupt() it)"
            )
        rt.sampler_stop()
        self.stopped = True
        raw = rt.sampler_drain()
        trace, self.meta, self.capture_latencies_ms = build_trace(raw, self.max_buffer_size)
        return trace

    def track(self, trace: ProfilerTrace, name: str = "main") -> Track:
        """Wrap a trace from `stop()` as a Track with this session's facts."""
        return Track(
            name=name,
            trace=trace,
            time_origin=self.runtime.time_origin,
            engine=ENGINE,
            sample_interval=self.sample_interval,
            requested_interval=self.requested_interval,
            meta=dict(self.meta),
        )


def _percentiles(values: np.ndarray) -> dict[str, float | None]:
    if len(values) == 0:
        return {"p50": None, "p99": None}
    p50, p99 = np.percentile(values, [50, 99])
    return {"p50": round(float(p50), 4), "p99": round(float(p99), 4)}


def build_trace(
    raw: dict[str, Any], max_buffer_size: int
) -> tuple[ProfilerTrace, dict, np.ndarray]:
    """Turn one drain of the C sampler into a ProfilerTrace, meta facts and the capture
    latencies (ms) of the samples captured directly at a poll.

    Frames are interned by (name, resource, line, column) as the spec's "get an element
    ID" says; distinct closures of one function collapse into one frame, and the C
    stack trie is re-interned over frame IDs accordingly. Sample columns stay vectorised.
    """
    resources: dict[str, int] = {}
    frames: dict[tuple[str, int, int, int], int] = {}
    func_frame: list[int] = []
    for name, filename, line, col in raw["funcs"]:
        url = resource_url(filename)
        rid = resources.setdefault(url, len(resources))
        key = (name, rid, int(line), int(col))
        func_frame.append(frames.setdefault(key, len(frames)))

    c_parent = np.frombuffer(raw["stack_parent"], np.int32)
    c_func = np.frombuffer(raw["stack_func"], np.int32)
    # C stack nodes are created parent-first, so one forward pass re-interns them.
    stacks: dict[tuple[int, int], int] = {}
    stack_parent: list[int] = []
    stack_frame: list[int] = []
    remap = np.empty(len(c_parent) + 1, np.int32)
    remap[-1] = -1  # index -1 (no stack) maps to no stack
    for i in range(len(c_parent)):
        p = int(c_parent[i])
        parent = int(remap[p]) if p >= 0 else -1
        key = (parent, func_frame[c_func[i]])
        sid = stacks.get(key)
        if sid is None:
            sid = stacks[key] = len(stack_frame)
            stack_parent.append(parent)
            stack_frame.append(key[1])
        remap[i] = sid

    ts = np.frombuffer(raw["ts"], np.float64)
    due = np.frombuffer(raw["due"], np.float64)
    cap = np.frombuffer(raw["cap"], np.float64)
    flags = np.frombuffer(raw["flags"], np.uint8)
    c_stack = np.frombuffer(raw["stack"], np.int32)
    line = np.frombuffer(raw["line"], np.int32)
    n = min(len(ts), max_buffer_size)
    sample_stack = remap[c_stack[:n]]
    # Samples stamped at their capture time (all but deferred ones, which carry their
    # due time: they came due inside a built-in call and were captured when it returned).
    captured = (flags[:n] & (_DEFERRED | _IDLE)) == 0
    latencies = (cap[:n] - due[:n])[captured]
    full = bool(raw["full"]) or len(ts) > max_buffer_size
    meta: dict[str, Any] = {
        "samples": int(n),
        "idle_samples": int(np.count_nonzero(flags[:n] & _IDLE)),
        # ticks that came due inside a built-in call, charged to its JS caller
        "deferred_samples": int(np.count_nonzero((flags[:n] & (_DEFERRED | _IDLE)) == _DEFERRED)),
        "native_return_samples": int(np.count_nonzero(flags[:n] & _NATIVE)),
        # due -> captured at the interpreter's next poll: the accuracy of a sample's time
        "capture_latency_ms": _percentiles(latencies),
        "buffer_full": full,
        "dropped_ticks": int(raw["dropped"]) + max(0, len(ts) - max_buffer_size),
        "quickjs_version": str(_quickjs.QUICKJS_VERSION) if _quickjs else None,
    }
    trace = ProfilerTrace(
        resources=list(resources),
        frames=list(frames),
        stack_parent=stack_parent,
        stack_frame=stack_frame,
        sample_time=ts[:n].copy(),
        sample_stack=sample_stack,
        sample_line=line[:n].copy(),
    )
    return trace, meta, latencies


class QuickJSProfiler(RuntimeProfiler):
    """The RuntimeProfiler contract over one QuickJS runtime."""

    type: ClassVar[str] = ENGINE

    def __init__(self, runtime: QuickJS, max_buffer_size: int | None = None) -> None:
        self.runtime = runtime
        self.max_buffer_size = max_buffer_size
        self.sample_interval = DEFAULT_INTERVAL_MS
        self._session: ProfilerSession | None = None
        self._last: tuple[ProfilerSession, ProfilerTrace] | None = None

    def setup(self, sample_interval: float) -> None:
        if self._session is not None:
            raise UsageError("setup() while profiling: stop() first")
        effective_interval(sample_interval)  # validate now, not at start
        self.sample_interval = float(sample_interval)

    def start(self, is_create: bool = False) -> None:
        if self._session is None:
            self._session = self.runtime.profiler(self.sample_interval, self.max_buffer_size)

    def stop(self, is_destroy: bool = False) -> ProfilerTrace | None:
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
        return self._session is not None
