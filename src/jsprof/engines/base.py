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

from abc import ABC, abstractmethod
from typing import ClassVar

from ..trace import ProfilerTrace, Track

DEFAULT_INTERVAL_MS = 1.0


class RuntimeProfiler(ABC):
    """One runtime's sampler, seen through the manager's four-method contract."""

    type: ClassVar[str]

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
