"""The spec's `Profiler` session, engine-independent: many sessions share one sampler.

A `ProfilerSession` has a state (started, stopped), a sample interval, a sample buffer
limit and the realm it profiles; `stop()` gives its ProfilerTrace once. A `SharedSampler`
owns one engine sampler (a `SamplerBackend`) and the live sessions on it:

- the sampler ticks at the smallest live interval (`base`); each session keeps a tick when
  at least its own interval less half a tick has passed since its last kept sample (the
  rule Chromium follows: a 100 ms profiler keeps every 10th tick of a 10 ms one); on the
  wall clock a due time that falls in a gap of the grid (a stop's ticks dropped) is the
  tick's before the gap, and the session's grid keeps its phase past it (`keep_spans`);
- samples are drained from the engine whenever the set of live sessions changes, so every
  drained chunk belongs to exactly the sessions live during it, and stopping one session
  never disturbs another;
- a session whose trace holds `max_buffer_size` samples moves to stopped (the spec's rule)
  and is reported by `check()`, which the engine calls between jobs, never from inside the
  sampler, so that `samplebufferfull` is dispatched as a task.

Frames follow the spec's "get a frame ID": a function of another realm or of a muted script
has no frame ID, so it is skipped and its caller's stack is used (TraceBuilder interning).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from .errors import UsageError
from .meta import CLOCKS, CPU, WALL
from .trace import MARKER_CODE, NONE, ProfilerTrace, TraceBuilder, Track

# flag bits per raw sample (GC: due during the engine's garbage collection, no stack)
DEFERRED, IDLE, NATIVE, GC = 1, 2, 4, 8
# WebIDL unsigned long
MAX_UNSIGNED_LONG = 2**32 - 1


class InvalidStateError(UsageError):
    """stop() on a session whose trace was already given (the spec's InvalidStateError)."""

    js_name = "InvalidStateError"


@dataclass
class Chunk:
    """One drain of an engine sampler: raw samples over a trie of functions.

    `funcs`: (name, resource url, line, column, realm, muted) per function (line and
    column None when the engine knows no position); the trie
    `stack_parent`/`stack_func` lists parents before children; per sample: `time` (ms,
    strictly increasing), `stack` (trie node or -1), `line`, `flags`, `due` (the tick's
    time on the grid, increasing), `cap` (when its stack was captured); on the CPU clock
    `cpu`, the tick's place on the CPU-time grid (ms of the runtime's CPU, increasing),
    while `due` is its wall time.
    """

    funcs: list[tuple[str, str, int | None, int | None, int, bool]]
    stack_parent: np.ndarray
    stack_func: np.ndarray
    time: np.ndarray
    stack: np.ndarray
    line: np.ndarray
    flags: np.ndarray
    due: np.ndarray
    cap: np.ndarray
    overflow: bool = False  # the engine's raw buffer overflowed
    dropped: int = 0  # ticks lost to a full raw buffer
    stall_dropped: int = 0  # ticks beyond the engine's stall cap (process stopped)
    offcpu_dropped: int = 0  # ticks due while the engine's thread could not run
    truncated: int = 0  # stacks deeper than the engine's walker limit
    interval: float = 1.0  # the sampler's interval during this chunk
    cpu: np.ndarray | None = None  # the CPU clock's grid (None on the wall clock)

    def __len__(self) -> int:
        return len(self.time)


class SamplerBackend(Protocol):
    """What an engine's sampler offers the session layer (all on the owner thread)."""

    def start(self, interval: float, capacity: int, cpu: bool = False) -> None: ...
    def cpu_now(self) -> float: ...
    def set_interval(self, interval: float) -> None: ...
    def stop(self) -> None: ...
    def drain(self) -> Chunk: ...
    def sample_now(self) -> None: ...
    def notify_at(self, n: int) -> None: ...


def keep_indices(time: np.ndarray, threshold: float, last_kept: float) -> np.ndarray:
    """Indices of the ticks a session keeps: each at least `threshold` ms after the last
    kept one. Vectorised when every tick qualifies (one session alone on the sampler)."""
    n = len(time)
    if n == 0:
        return np.zeros(0, np.intp)
    if time[0] - last_kept >= threshold and (n == 1 or float(np.min(np.diff(time))) >= threshold):
        return np.arange(n)
    out = []
    last = last_kept
    for i, t in enumerate(time.tolist()):
        if t - last >= threshold:
            out.append(i)
            last = t
    return np.asarray(out, np.intp)


def keep_spans(time: np.ndarray, threshold: float, last_kept: float, interval: float,
               tick: float, before: bool = False) -> tuple[np.ndarray, np.ndarray, float]:
    """The wall clock's `keep_indices`, for a session slower than the sampler: indices of
    the ticks it keeps (-1: the tick just before `time`, the previous chunk's last, when
    `before`), the times to stamp them at, and the new `last_kept`.

    On the wall clock a sample weighs the gap to the next one, so each tick stands for
    its time until the next tick. A gap in the sampler's grid (`tick` ms apart) is the
    tick's before it: a stop's first tick, restamped where the stop began (the ticks
    after it dropped as off-CPU, see the engine's sampler_capture_locked), or the last
    JavaScript sample before an idle wait's lost ticks. The session samples what a
    sampler at its own interval would have: at each of its due times (the last kept
    sample + `interval`, on a full grid the first tick at least `threshold` after it, as
    `keep_indices`), the tick that stands for that time. Where a due time falls in a gap
    that is the tick before it, stamped at the due time (a sampler at the session's
    interval keeps the first tick due in a stop so); the session's later due times in
    the gap are no sample (that sampler drops them as off-CPU), and its grid goes on
    after the gap at the same phase. Thinning by times alone kept the first tick after
    the gap, so the stop weighed on the session's sample before it, and the session's
    grid restarted where the thread resumed (issue 32: beside a 1 ms session and busy
    loops, a 10 ms session's f share 0.08-0.19 off performance.now()'s, the 1 ms
    one's within 0.003; restamping alone left 0.03-0.05)."""
    out: list[int] = []
    at: list[float] = []
    last = last_kept
    prev = -1 if before else None  # the last tick not kept
    for i, t in enumerate(time.tolist()):
        if t - last < threshold:
            prev = i
            continue
        due = last + interval
        if t >= due + tick / 2 and math.isfinite(due):
            # ticks are missing around the due time: a gap's, the tick's before it
            if prev is not None:
                out.append(prev)
                at.append(due)
            # the next due time at or past this tick (within half a tick of it on a grid
            # of the session's interval, else later)
            last = due + max(math.ceil((t - tick / 2 - due) / interval), 1) * interval - interval
            if t - last < threshold:
                prev = i
                continue
        out.append(i)
        at.append(t)
        last = t
        prev = None
    return np.asarray(out, np.intp), np.asarray(at, np.float64), last


def strictly_increasing(t: np.ndarray, after: float) -> np.ndarray:
    """`t` raised where needed so each time is at least 1 ns past the one before (and the
    first past `after`): the trace format's rule, kept even if an engine's grid stepped
    back (a tick registered late)."""
    out = np.empty_like(t)
    last = after
    for i, x in enumerate(t.tolist()):
        last = x if x > last else last + 1e-6
        out[i] = last
    return out


def _percentiles(values: np.ndarray) -> dict[str, float | None]:
    if len(values) == 0:
        return {"p50": None, "p99": None}
    p50, p99 = np.percentile(values, [50, 99])
    return {"p50": round(float(p50), 4), "p99": round(float(p99), 4)}


class ProfilerSession:
    """One profiling session (the spec's Profiler), created through a runtime:
    `runtime.profiler(sample_interval=..., max_buffer_size=...)`.

    `sample_interval` is the interval actually used (the request raised to the engine's
    minimum); `stopped` is true once stopped (by `stop()` or a full buffer); `stop()`
    returns the ProfilerTrace the first time, then raises InvalidStateError;
    `on_sample_buffer_full` (a callable taking the session) is called once when the buffer
    fills, on the owner thread, outside the sampler.

    `clock` ("wall" or "cpu", None: the one the runtime's sampler runs on, else the
    runtime's default): on "cpu" the sampler ticks once per interval of the runtime's CPU
    time, so time spent waiting (timers, the event loop) or preempted by other processes
    makes no samples, and each sample weighs the CPU ms since the session's previous one
    (the trace's `sample_weight`; its times stay on the wall clock). Sessions of one
    runtime share one sampler, hence one clock.
    """

    def __init__(
        self,
        sampler: SharedSampler,
        sample_interval: float,
        max_buffer_size: int,
        realm: int = 0,
        on_sample_buffer_full: Callable[[ProfilerSession], Any] | None = None,
        clock: str | None = None,
    ) -> None:
        self._sampler = sampler
        self.clock = sampler.clock_for(clock)
        self.requested_interval = float(sample_interval)
        self.sample_interval = sampler.effective_interval(sample_interval)
        self.max_buffer_size = int(max_buffer_size)
        self.realm = realm
        self.on_sample_buffer_full = on_sample_buffer_full
        self.state = "started"
        self.buffer_full = False
        self.js_id: int | None = None
        self.meta: dict[str, Any] = {}
        self._taken = False
        self._trace: ProfilerTrace | None = None
        self._builder = TraceBuilder()
        self._times: list[np.ndarray] = []
        self._stacks: list[np.ndarray] = []
        self._markers: list[np.ndarray] = []
        self._lines: list[np.ndarray] = []
        self._latencies: list[np.ndarray] = []
        self._count = 0
        self._last_kept = -math.inf
        self._last_time = -math.inf
        self._last_base = math.inf
        # wall clock: the last tick of the chunks so far when not kept (stack id, line,
        # flags, capture latency), a slower session's sample should the next chunk begin
        # after a gap (keep_spans)
        self._tail: tuple[int, int, int, float] | None = None
        self._weights: list[np.ndarray] = []
        self._last_cpu = 0.0  # the CPU clock's reading at the previous kept sample (or start)
        self._counts = {
            "idle": 0, "deferred": 0, "native": 0, "gc": 0, "dropped": 0, "stall": 0,
            "offcpu": 0, "truncated": 0
        }
        self._overflow = False
        # due -> capture (ms) of each sample stamped at its capture time; for benchmarks
        self.capture_latencies_ms = np.zeros(0)
        sampler.add(self)

    @property
    def stopped(self) -> bool:
        """True in the stopped state (after stop(), or once the buffer filled)."""
        if self.state == "started":
            self._sampler.refresh()
        return self.state == "stopped"

    def stop(self) -> ProfilerTrace:
        """Stop sampling (if still started) and return the trace; only the first call."""
        if self._taken:
            raise InvalidStateError("this profiling session is already stopped")
        self._sampler.require_owner("stop a profiling session")
        if self.state == "started":
            self._sampler.remove(self)
        self._taken = True
        return self._build()

    def track(self, trace: ProfilerTrace, name: str = "main") -> Track:
        """Wrap a trace from `stop()` as a Track with this session's facts."""
        return Track(
            name=name,
            trace=trace,
            time_origin=self._sampler.time_origin,
            engine=self._sampler.engine,
            sample_interval=self.sample_interval,
            requested_interval=self.requested_interval,
            meta=dict(self.meta),
        )

    # --- fed by the SharedSampler

    def _finish(self) -> None:
        self.state = "stopped"

    def _stack_map(self, chunk: Chunk) -> np.ndarray:
        """Trie node -> this session's stack id (index -1, no stack, maps to NONE)."""
        realm = self.realm
        # A function of another realm or of a muted script has no frame ID (None): it is
        # skipped and its caller's stack is used.
        frames = [
            None if muted or f_realm != realm else (name, url, line, col)
            for name, url, line, col, f_realm, muted in chunk.funcs
        ]
        b = self._builder
        # Frame IDs in the engine's function order (the order traces have always had).
        for f in frames:
            if f is not None:
                b.frame_id(f[0], b.resource_id(f[1]), f[2], f[3])
        func = chunk.stack_func.tolist()
        parent = chunk.stack_parent.tolist()  # -1 (a root) is NONE
        node_stack = b.intern_tree(
            parent, [frames[f] for f in func], range(len(parent))
        )
        remap = np.empty(len(parent) + 1, np.int32)
        remap[:-1] = node_stack
        remap[-1] = NONE
        return remap

    def _add_chunk(self, chunk: Chunk) -> bool:
        """Keep this session's share of a chunk; True when the buffer became full."""
        if self.state != "started":
            return False
        self._overflow |= chunk.overflow
        self._counts["dropped"] += chunk.dropped
        self._counts["stall"] += chunk.stall_dropped
        self._counts["offcpu"] += chunk.offcpu_dropped
        self._counts["truncated"] += chunk.truncated
        # half a tick of the finer of the grids before and now (the sampler may just have
        # been slowed down when a faster session stopped)
        threshold = self.sample_interval - min(self._last_base, chunk.interval) / 2
        # the ticks' places on the sampler's grid: wall time, or the CPU clock's
        grid = chunk.cpu if self.clock == CPU and chunk.cpu is not None else chunk.due
        wall = self.clock != CPU
        # index -1: the previous chunk's last tick (self._tail), wall clock only
        before = wall and self._tail is not None
        if wall:
            n = len(grid)
            if self.sample_interval <= chunk.interval:
                # Every tick of the sampler is one of ours, once past the last kept
                # sample, but for ticks closer than the threshold: a batch due on a faster
                # session's grid, taken after the sampler slowed down (a stop's, seen
                # 1 ms apart in a 3 ms session's trace). keep_spans thins those and the
                # chunk's head (a due time in a gap before its first kept tick); after
                # them every tick is kept (on this grid keep_spans would keep them too).
                close = np.flatnonzero(np.diff(grid) < threshold)
                n = min(n, int(close[-1]) + 3 if len(close) else 2)
            idx, at, self._last_kept = keep_spans(
                grid[:n], threshold, self._last_kept, self.sample_interval, chunk.interval,
                before,
            )
            if n < len(grid):
                idx = np.concatenate([idx, np.arange(n, len(grid))])
                at = np.concatenate([at, grid[n:]])
                self._last_kept = float(grid[-1])
        elif self.sample_interval <= chunk.interval:
            # Every tick of the sampler is one of ours, once past the last kept sample.
            # (Thinning by timestamps throughout would drop ticks captured late on a
            # loaded machine, which are still real ticks.)
            first = int(np.searchsorted(grid, self._last_kept + threshold))
            idx = np.arange(first, len(chunk))
            at = grid[idx]
        else:
            idx = keep_indices(grid, threshold, self._last_kept)
            at = grid[idx]
        left = self.max_buffer_size - self._count
        full = len(idx) >= left
        idx, at = idx[: max(left, 0)], at[: max(left, 0)]
        remap = None
        if len(idx):
            if not wall:  # keep_spans moved it on (past a gap's due times too)
                self._last_kept = float(at[-1])
            if self.clock == CPU:
                # each sample weighs the runtime's CPU time since the one before it
                g = grid[idx]
                self._weights.append(np.maximum(np.diff(g, prepend=self._last_cpu), 0.0))
                self._last_cpu = float(g[-1])
            self._last_base = chunk.interval
            remap = self._stack_map(chunk)
            # A sample is stamped with its tick's due time on the sampler's grid (its
            # stack is the one captured at the interpreter's next poll, `captureLatencyMs`
            # later): so a session's samples are exactly as far apart as its ticks. (The
            # wall clock: a gap's tick kept at our due time in it, see keep_spans.)
            t = at if wall else chunk.due[idx]
            if t[0] <= self._last_time or (len(t) > 1 and not (t[1:] > t[:-1]).all()):
                t = strictly_increasing(t, self._last_time)
            self._last_time = float(t[-1])
            self._times.append(t)
            tail = self._tail if idx[0] < 0 else None
            if tail is not None:
                idx = idx[1:]
            stacks = remap[chunk.stack[idx]]
            lines = chunk.line[idx]
            flags = chunk.flags[idx]
            latency = chunk.cap[idx] - chunk.due[idx]
            if tail is not None:
                stacks = np.concatenate(([tail[0]], stacks)).astype(stacks.dtype)
                lines = np.concatenate(([tail[1]], lines)).astype(lines.dtype)
                flags = np.concatenate(([tail[2]], flags)).astype(flags.dtype)
                latency = np.concatenate(([tail[3]], latency))
            self._stacks.append(stacks)
            self._lines.append(lines)
            # the collector's samples: no stack, V8's `gc` marker ("(garbage collector)")
            self._markers.append(np.where(flags & GC, MARKER_CODE["gc"], NONE).astype(np.int8))
            self._counts["gc"] += int(np.count_nonzero(flags & GC))
            self._counts["idle"] += int(np.count_nonzero(flags & IDLE))
            deferred = (flags & (DEFERRED | IDLE | GC)) == DEFERRED
            self._counts["deferred"] += int(np.count_nonzero(deferred))
            self._counts["native"] += int(np.count_nonzero(flags & NATIVE))
            # a latency is a tick's wait for its stack's capture: an idle or collector's
            # sample has no stack captured (a collection's last one came due up to an
            # interval before the collection ended, a wait that is the collector's)
            captured = (flags & (DEFERRED | IDLE | GC)) == 0
            self._latencies.append(latency[captured])
            self._count += len(stacks)
        n = len(chunk)
        if not wall or (n and len(idx) and idx[-1] == n - 1):
            self._tail = None
        elif n:
            if remap is None:
                remap = self._stack_map(chunk)
            self._tail = (int(remap[chunk.stack[-1]]), int(chunk.line[-1]),
                          int(chunk.flags[-1]), float(chunk.cap[-1] - chunk.due[-1]))
        if full:
            self.buffer_full = True
            self._finish()
        return full

    def _build(self) -> ProfilerTrace:
        if self._trace is not None:
            return self._trace
        b = self._builder.build()

        def cat(parts: list[np.ndarray], dtype: Any) -> np.ndarray:
            return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype)

        self.capture_latencies_ms = cat(self._latencies, np.float64)
        # Track meta keys are camelCase, like the trace format's own keys.
        self.meta.update(
            samples=self._count,
            idleSamples=self._counts["idle"],
            # ticks stamped at their due time, captured later: due inside a built-in call
            # (charged to its JS caller), or the first of a stall's (wall clock: where the
            # thread resumed; the gap to the next sample is the stall's)
            deferredSamples=self._counts["deferred"],
            nativeReturnSamples=self._counts["native"],
            # ticks due during a garbage collection: no stack, the `gc` marker
            gcSamples=self._counts["gc"],
            # due -> captured at the interpreter's next poll: the accuracy of a sample's time
            captureLatencyMs=_percentiles(self.capture_latencies_ms),
            bufferFull=self.buffer_full or self._overflow,
            # ticks never recorded: the engine's raw buffer was full, or the process was
            # stopped (suspended) longer than the engine's stall cap
            droppedTicks=self._counts["dropped"] + self._counts["stall"] + self._counts["offcpu"],
            stallDroppedTicks=self._counts["stall"],
            # wall clock: ticks that came due while the script's thread could not run
            # (stopped, or waiting for a core): their stack is unknown, so no one's
            offCpuDroppedTicks=self._counts["offcpu"],
            # samples whose stack was deeper than the engine's walker limit (root side cut)
            truncatedStacks=self._counts["truncated"],
            clock=self.clock,
        )
        self.meta.update(self._sampler.meta)
        self._trace = ProfilerTrace(
            resources=b.resources,
            frames=b.frames,
            stack_parent=b.stack_parent,
            stack_frame=b.stack_frame,
            sample_time=cat(self._times, np.float64),
            sample_stack=cat(self._stacks, np.int32),
            # a marker column only when there is a marker (else the trace has none)
            sample_marker=cat(self._markers, np.int8) if self._counts["gc"] else None,
            sample_line=cat(self._lines, np.int32),
            sample_weight=cat(self._weights, np.float64) if self.clock == CPU else None,
        )
        if self._sampler.name_frames is not None:
            self._trace = self._sampler.name_frames(self._trace)
        self._times, self._stacks, self._lines, self._latencies = [], [], [], []
        self._markers = []
        self._weights = []
        return self._trace


@dataclass
class SharedSampler:
    """One engine sampler shared by the live sessions of one runtime.

    Every method runs on the runtime's owner thread (the engine makes sure: draining
    symbolises through the runtime). `refresh()` is a no-op when `can_drain()` says the
    caller may not drain now.
    """

    backend: SamplerBackend
    min_interval: float
    capacity: int
    engine: str = ""
    time_origin: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict)
    can_drain: Callable[[], bool] = lambda: True
    # raises (UsageError) when the calling thread may not drive the sampler now
    require_owner: Callable[[str], None] = lambda what: None
    live: list[ProfilerSession] = field(default_factory=list)
    interval: float | None = None  # the backend's interval while running
    # sessions whose buffer filled, not yet reported by check()
    filled: list[ProfilerSession] = field(default_factory=list)
    on_filled: Callable[[], Any] | None = None  # ask the engine for a check() soon
    default_clock: str = WALL  # the clock of sessions that name none, when none runs
    # names a stopped session's frames from the scripts' source (QuickJS: V8's names)
    name_frames: Callable[[ProfilerTrace], ProfilerTrace] | None = None
    clock: str | None = None  # the backend's clock while running

    def clock_for(self, clock: str | None) -> str:
        """The clock a new session samples on: the one running (all sessions share the
        sampler), else `clock`, else the default; a UsageError for another one."""
        if clock is not None and clock not in CLOCKS:
            raise UsageError(f"unknown clock {clock!r}; choose one of: {', '.join(CLOCKS)}")
        if self.clock is not None and self.live:
            if clock is not None and clock != self.clock:
                raise UsageError(
                    f"this runtime's sampler runs on the {self.clock} clock for another "
                    f"session; stop it first, or start this one with clock={self.clock!r}"
                )
            return self.clock
        return clock or self.default_clock

    def effective_interval(self, sample_interval: float) -> float:
        """The request raised to the engine's minimum (0 -> minimum)."""
        x = float(sample_interval)
        if not math.isfinite(x) or x < 0:
            raise UsageError(
                f"sample interval must be a finite number >= 0 ms, got {sample_interval}"
            )
        return max(x, self.min_interval)

    def add(self, session: ProfilerSession) -> None:
        if self.interval is not None:
            self._distribute()  # what was sampled so far belongs to the sessions before
        if not self.live:
            self.clock = session.clock
        self.live.append(session)
        self._retune(start_capacity=max(self.capacity, min(session.max_buffer_size, 1 << 28)))
        if session.clock == CPU:
            session._last_cpu = self.backend.cpu_now()  # its first sample weighs from here
        # The spec: the constructor takes the first sample.
        self.backend.sample_now()
        if session.max_buffer_size == 0:  # keeps nothing: full at once
            self._distribute()
            self._retune()

    def remove(self, session: ProfilerSession) -> None:
        if session in self.live and len(self.live) == 1:
            # last one: stop first so the final ticks are in the drain
            self.backend.stop()
            self._distribute()
        elif session in self.live:
            self._distribute()
        if session in self.live:
            self.live.remove(session)
        session._finish()
        self._retune()

    def refresh(self) -> None:
        """Drain now (if allowed) so states and buffers are current."""
        if self.interval is not None and self.can_drain():
            self._distribute()
            self._retune()

    def check(self) -> list[ProfilerSession]:
        """Drain, and return the sessions whose buffer filled since the last check (each
        once); Python callbacks (`on_sample_buffer_full`) are called here."""
        self.refresh()
        filled, self.filled = self.filled, []
        for s in filled:
            if s.on_sample_buffer_full is not None:
                s.on_sample_buffer_full(s)
        return filled

    def _distribute(self) -> None:
        chunk = self.backend.drain()
        if self.clock != CPU:
            chunk.cpu = None
        chunk.interval = self.interval if self.interval is not None else self.min_interval
        newly = []
        for s in list(self.live):
            if s._add_chunk(chunk):
                self.live.remove(s)
                newly.append(s)
        if newly:
            self.filled.extend(newly)
            if self.on_filled is not None:
                self.on_filled()

    def _retune(self, start_capacity: int | None = None) -> None:
        """Run the backend at the smallest live interval, or stop it when none is live."""
        if not self.live:
            if self.interval is not None:
                self.backend.stop()
                self.backend.drain()  # release what the last stop left behind
                self.interval = None
            return
        base = min(s.sample_interval for s in self.live)
        if self.interval is None:
            self.backend.start(base, start_capacity or self.capacity, self.clock == CPU)
        elif base != self.interval:
            self.backend.set_interval(base)
        self.interval = base
        # No session can fill before `left` more ticks: look again then.
        left = min(s.max_buffer_size - s._count for s in self.live)
        self.backend.notify_at(max(1, min(left, self.capacity * 9 // 10)))


def sessions_json_ids(sessions: Sequence[ProfilerSession]) -> str:
    """The JS-side ids of sessions, comma-separated (for the engine's dispatcher)."""
    return ",".join(str(s.js_id) for s in sessions if s.js_id is not None)
