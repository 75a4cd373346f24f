"""The RuntimeProfiler glue (engines/base.py) of a long-lived V8 runtime driven over CDP,
shared by NodeProfiler and ChromiumProfiler."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from ..errors import UsageError
from ._v8session import effective_interval, interval_us
from .base import DEFAULT_INTERVAL_MS, RuntimeProfiler

if TYPE_CHECKING:
    from ..trace import ProfilerTrace, Track


class V8RuntimeProfiler(RuntimeProfiler):
    """V8's CPU profiler of a long-lived runtime behind the engine contract: the engine
    says how to start (`_start`) and how to stop into a Track (`_stop`)."""

    type: ClassVar[str] = "v8"
    min_us: ClassVar[int]

    def __init__(self) -> None:
        self._interval = DEFAULT_INTERVAL_MS
        self._started = False
        self._track: Track | None = None

    def _start(self, us: int, is_create: bool) -> None:
        raise NotImplementedError

    def _stop(self, requested_ms: float) -> Track | None:
        raise NotImplementedError

    def setup(self, sample_interval: float) -> None:
        if self._started:
            raise UsageError("cannot change the sample interval while the profiler runs")
        interval_us(sample_interval, self.min_us)
        self._interval = sample_interval

    def start(self, is_create: bool = False) -> None:
        if self._started:
            return
        self._start(interval_us(self._interval, self.min_us), is_create)
        self._started = True

    def stop(self, is_destroy: bool = False) -> ProfilerTrace | None:
        if not self._started:
            return None
        self._started = False
        self._track = self._stop(effective_interval(self._interval, self.min_us))
        return self._track.trace if self._track else None

    def track(self, name: str = "main") -> Track | None:
        if self._track is None:
            return None
        self._track.name = name
        return self._track

    @property
    def started(self) -> bool:
        return self._started
