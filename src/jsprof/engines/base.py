"""The RuntimeProfiler contract every engine implements (Lynx's four methods).

A manager drives any number of these: ``setup(sample_interval)`` once, then ``start()``,
then ``stop()`` which hands back what was sampled as a ProfilerTrace. Engine differences
stay behind this contract; ``tests/test_engine_contract.py`` runs every engine through
the same checks.

Lifecycle (pinned by the contract tests):
  - ``setup(sample_interval)``: interval in milliseconds (float, > 0 or 0 for the engine's
    minimum); may be called again while stopped to change it. Calling ``start`` without
    ``setup`` uses ``DEFAULT_INTERVAL_MS``.
  - ``start(is_create=False)``: begin sampling. ``is_create`` is true when the runtime is
    being created as profiling starts (late registration in the manager); engines may use
    it to skip work that only matters for a runtime that already ran code. Starting twice
    is a no-op.
  - ``stop(is_destroy=False) -> ProfilerTrace | None``: end sampling and return the trace of
    the samples taken since ``start``; ``None`` if not started (so a second ``stop``
    returns ``None``). ``is_destroy`` is true when the runtime is going away right after.
  - ``type``: ``"quickjs"`` for the QuickJS family, ``"v8"`` for V8.
  - ``track(name)`` after ``stop``: the last trace wrapped as a Track with time origin,
    engine, intervals and meta (capture latency etc.).
"""

from __future__ import annotations

import os
import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any, ClassVar

from ..errors import EngineError, UsageError
from ..trace import ProfilerTrace, Track

DEFAULT_INTERVAL_MS = 1.0


class RuntimeProfiler(ABC):
    """One runtime's sampler, seen through the manager's four-method contract."""

    type: ClassVar[str]
    # How long a stop() from a foreign thread waits for the owner thread (seconds).
    stop_timeout: float = 10.0

    # --- owner-thread dispatch (issue 6): a runtime is used from the thread that owns it.
    # Engines whose runtime is thread-bound call `_dispatch` from setup/start/stop and
    # override `_owner_thread` and `_submit`; the default runs everything inline.

    def _owner_thread(self) -> bool:
        """True when the caller may use the runtime directly."""
        return True

    def _submit(self, fn: Callable[[], Any]) -> Future:
        """Hand `fn` to the owner thread; the default runs it here."""
        fut: Future = Future()
        try:
            fut.set_result(fn())
        except BaseException as e:  # noqa: BLE001 - handed to the waiter
            fut.set_exception(e)
        return fut

    def _dispatch(self, fn: Callable[[], Any], inline: bool, wait: bool) -> Any:
        """Run `fn` inline on the owner thread (or when `inline`), else hand it over: then
        return at once (`wait=False`) or block until it ran, with `stop_timeout`."""
        if inline or self._owner_thread():
            return fn()
        fut = self._submit(fn)
        if not wait:
            return None
        try:
            return fut.result(timeout=self.stop_timeout)
        except FutureTimeout:
            raise EngineError(
                f"the {self.type} runtime's owner thread did not answer within "
                f"{self.stop_timeout:g} s (is it blocked outside JavaScript?); the profile "
                "was not collected"
            ) from None

    @abstractmethod
    def setup(self, sample_interval: float) -> None:
        """Choose the sampling interval (ms) for the next start."""

    @abstractmethod
    def start(self, is_create: bool = False) -> None:
        """Begin sampling; a no-op when already started."""

    @abstractmethod
    def stop(self, is_destroy: bool = False) -> ProfilerTrace | None:
        """End sampling: the trace since start, or None when not started."""

    @abstractmethod
    def track(self, name: str = "main") -> Track | None:
        """The last stopped trace as a Track (None before the first stop)."""

    @property
    @abstractmethod
    def started(self) -> bool:
        """True between start() and stop()."""


@dataclass(frozen=True)
class Instrumentation:
    """What `jsprof instrument` hands an engine's `instrument` entry point
    (engines/registry.py): the source transform and the JavaScript books stay in
    instrument/, above the engines; the engine only runs them and returns the books'
    dump (`__jsprof_dump()`'s JSON), the script's error and its clock's time origin."""

    config: dict[str, Any]  # globalThis.__jsprof_config: watch, byInstance, spans
    runtime: str  # instrument/runtime.js, evaluated before the script
    transform: Callable[[str], str]  # source -> source with each class registered
    # (entry, source) -> (name, source) of the file modules it imports, in evaluation order
    module_deps: Callable[[str, str], list[tuple[str, str]]]
    preload: str  # file URI of instrument/node_preload.mjs (Node's --import)


def read_script(path: str | os.PathLike[str]) -> str:
    """A script's source text, or a one-line UsageError naming the file."""
    p = os.fspath(path)
    try:
        with open(p, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        raise UsageError(f"{p}: no such file; give the path of a .js or .mjs script") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"{p}: cannot read the script ({e})") from None


# An import/export statement at the start of a line (not `import(`): an ES module. QuickJS's
# own JS_DetectModule calls anything that *parses* as a module a module, which would turn
# sloppy scripts strict and their top-level `var`s non-global. Here, not in quickjs.py:
# instrument/ asks it too, and names no engine.
_MODULE_RE = re.compile(r"^[ \t]*(import\b[ \t]*[\w{*'\"]|import\.meta\b|export\b)", re.M)


def is_module(source: str, filename: str) -> bool:
    """ES module when the file is .mjs or the source has import/export statements."""
    if filename.endswith(".mjs"):
        return True
    if filename.endswith(".cjs"):
        return False
    return _MODULE_RE.search(source) is not None
