"""ProfilerManager: one recording over many runtimes (the Lynx runtime-profiling design).

Runtimes register their RuntimeProfiler as they are created and unregister as they go.
The manager only dispatches and filters by type: `setup(sample_interval, types)`,
`begin()`, `end() -> Recording`. A profiler registered while recording is set up and
started at once (`is_create=True`); one removed while recording is stopped first
(`is_destroy=True`) and its profile kept. Results come back in registration order.

The single-V8 rule: two V8 profilers for one V8 instance corrupt each other's data, so a
profiler marked `single` removes the V8 profilers registered before it and refuses later
ones until it is removed.

Thread-safe: one lock guards the registry; engine calls are made outside it where they
may block (a stop handed to a busy owner thread), so a runtime can register or leave
from its own thread while another thread is ending the recording.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from .engines.base import RuntimeProfiler
from .errors import UsageError
from .trace import Recording, Track

ALL = "all"


@dataclass
class _Entry:
    profiler: RuntimeProfiler
    order: int
    name: str
    configured: bool = False
    started: bool = False


@dataclass
class _Result:
    order: int
    track: Track


@dataclass
class RecordingHandle:
    """What `ProfilerManager.recording()` yields; `.recording` is set when the block ends."""

    recording: Recording | None = None
    out: str | None = None


def _types(types: str | Iterable[str]) -> frozenset[str] | None:
    if isinstance(types, str):
        return None if types == ALL else frozenset([types])
    t = frozenset(types)
    return None if ALL in t else t


def track_name(profiler: RuntimeProfiler, name: str | None) -> str:
    """The track a profiler was registered from: runtime name and thread."""
    base = name or getattr(profiler, "name", None) or profiler.type
    return f"{base} ({threading.current_thread().name})"


class ProfilerManager:
    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._entries: list[_Entry] = []
        self._results: list[_Result] = []
        self._counter = 0
        self._recording = False
        self._interval = 0.0
        self._types: frozenset[str] | None = None
        self._single: _Entry | None = None

    # ---- registry ----------------------------------------------------------------------

    @property
    def recording_active(self) -> bool:
        return self._recording

    @property
    def profilers(self) -> list[RuntimeProfiler]:
        with self._lock:
            return [e.profiler for e in self._entries]

    def _matches(self, p: RuntimeProfiler) -> bool:
        return self._types is None or p.type in self._types

    def add(self, profiler: RuntimeProfiler, name: str | None = None) -> None:
        """Register a runtime's profiler; while recording it starts at once."""
        evicted: list[_Entry] = []
        with self._lock:
            if any(e.profiler is profiler for e in self._entries):
                raise UsageError("this profiler is already registered")
            single = bool(getattr(profiler, "single", False))
            if profiler.type == "v8" and self._single is not None:
                raise UsageError(
                    f"{self._single.name} is the single V8 profiler; remove it before "
                    "registering another V8 profiler (two would corrupt each other's data)"
                )
            if single and profiler.type == "v8":
                evicted = [e for e in self._entries if e.profiler.type == "v8"]
            self._counter += 1
            entry = _Entry(profiler, self._counter, track_name(profiler, name))
            self._entries = [e for e in self._entries if e not in evicted]
            self._entries.append(entry)
            if single and profiler.type == "v8":
                self._single = entry
            # Late registration starts under the lock so end() cannot miss it; setup and
            # start never block (a foreign-thread request is handed over and returns).
            if self._recording and self._interval > 0 and self._matches(profiler):
                profiler.setup(self._interval)
                entry.configured = True
                profiler.start(is_create=True)
                entry.started = True
        for e in evicted:
            self._stop_entry(e, is_destroy=True)

    def remove(self, profiler: RuntimeProfiler) -> None:
        """Unregister; while recording the profiler is stopped first and its profile kept."""
        with self._lock:
            entry = next((e for e in self._entries if e.profiler is profiler), None)
            if entry is None:
                return
            self._entries.remove(entry)
            if self._single is entry:
                self._single = None
        self._stop_entry(entry, is_destroy=True)

    def _stop_entry(self, entry: _Entry, is_destroy: bool) -> None:
        # Claimed under the lock so end() and remove() racing never stop one twice; the
        # stop itself runs outside it, since it may wait for a busy owner thread.
        with self._lock:
            if not entry.started:
                return
            entry.started = False
        trace = entry.profiler.stop(is_destroy=is_destroy)
        if trace is None or trace.num_samples == 0:
            return
        track = entry.profiler.track(entry.name)
        if track is not None:
            with self._lock:
                self._results.append(_Result(entry.order, track))

    # ---- the three phases ----------------------------------------------------------------

    def setup(self, sample_interval: float, types: str | Iterable[str] = ALL) -> None:
        """Configure every registered profiler of `types`; an interval <= 0 turns JS
        profiling off for this recording."""
        with self._lock:
            if self._recording:
                raise UsageError("setup() during a recording: end() it first")
            self._interval = float(sample_interval)
            self._types = _types(types)
            entries = [e for e in self._entries if self._matches(e.profiler)]
        if self._interval <= 0:
            return
        for e in entries:
            e.profiler.setup(self._interval)
            e.configured = True

    def begin(self) -> None:
        """Mark started, clear earlier results, start every matching profiler."""
        with self._lock:
            if self._recording:
                raise UsageError("begin() twice: a recording is already running")
            self._recording = True
            self._results = []
            entries = [e for e in self._entries if self._matches(e.profiler)]
        if self._interval <= 0:
            return
        for e in entries:
            if not e.configured:
                e.profiler.setup(self._interval)
                e.configured = True
            e.profiler.start()
            e.started = True

    def end(self) -> Recording:
        """Stop every matching profiler; the non-empty results in registration order."""
        with self._lock:
            if not self._recording:
                raise UsageError("end() without begin()")
            self._recording = False  # from here no late registration starts
            entries = [e for e in self._entries if e.started]
        for e in entries:
            self._stop_entry(e, is_destroy=False)
        with self._lock:
            results, self._results = self._results, []
        results.sort(key=lambda r: r.order)
        tracks: list[Track] = []
        seen: set[str] = set()
        for r in results:
            name = r.track.name
            k = 2
            while name in seen:  # a runtime re-registered in one recording
                name = f"{r.track.name} #{k}"
                k += 1
            seen.add(name)
            r.track.name = name
            tracks.append(r.track)
        return Recording(tracks)

    @contextmanager
    def recording(
        self,
        sample_interval: float = 1.0,
        types: str | Iterable[str] = ALL,
        out: str | os.PathLike | None = None,
    ) -> Iterator[RecordingHandle]:
        """`with manager.recording(1.0, out="app.pftrace") as rec:` around the work.

        The recording is ended and written (format from `out`'s extension) also when the
        block raises, so the samples taken so far are never lost.
        """
        from .io import save

        handle = RecordingHandle(out=None if out is None else os.fspath(out))
        self.setup(sample_interval, types)
        self.begin()
        try:
            yield handle
        finally:
            handle.recording = self.end()
            if out is not None and handle.recording.tracks:
                save(handle.recording, out)
