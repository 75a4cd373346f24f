"""A recording as `jsprof record --engine node` holds it on its way to the file: the
spec's tables as lists and `array.array` columns of the model's item types, no numpy.

Why (issue 32): `record --engine node` ends by writing a file and printing a few summary
lines. numpy's import (~50-65 ms of CPU) and the trace model's conversion were most of
jsprof's own CPU above the floor of the recording itself on a tsc run. The engine makes
these columns from the inspector's text (engines/_v8join.py), formats/_jsprof_write.py
writes them (the model's own writer: the same bytes), and the summary's numbers are
computed here over them, as the model's functions compute them over numpy columns
(trace.weights_and_lost, analysis.sampling.track_sampling, analysis.profile.summarize):
sums in numpy's own order (pairwise, or one at a time where numpy adds so), so every
printed figure is the same. `LightRecording.recording()` gives the model (numpy) for
anything else: another output format, source maps, the Python API.

This is the record path's border, not a second model: analysis stays on numpy columns.
"""

from __future__ import annotations

from array import array
from typing import Any

from .traceparts import (
    GAP_CAP_INTERVALS,
    GAP_CAP_MIN_MS,
    NONE,
    FunctionKey,
    GapCapping,
    ProfilerFrame,
    gap_cap_and_base,
    middle,
    no_stack_name,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .analysis.sampling import TrackSampling
    from .trace import ProfilerTrace, Recording, Track


class LightTrace:
    """ProfilerTrace's tables and columns (the same names), numpy-free: stacks and samples
    as array.array ('i' int32, 'd' float64, 'b' int8); no weights or counts (a recording's
    samples imply their weights)."""

    __slots__ = (
        "resources", "frames", "stack_parent", "stack_frame", "sample_time", "sample_stack",
        "sample_marker", "sample_line", "sample_weight", "sample_count",
    )

    def __init__(
        self, resources: list[str], frames: list[ProfilerFrame], stack_parent: array,
        stack_frame: array, sample_time: array, sample_stack: array,
        sample_marker: array | None, sample_line: array | None,
    ) -> None:
        self.resources = resources
        self.frames = frames
        self.stack_parent = stack_parent
        self.stack_frame = stack_frame
        self.sample_time = sample_time
        self.sample_stack = sample_stack
        self.sample_marker = sample_marker
        self.sample_line = sample_line
        self.sample_weight = None
        self.sample_count = None

    @property
    def num_samples(self) -> int:
        return len(self.sample_time)

    @property
    def num_stacks(self) -> int:
        return len(self.stack_frame)

    def median_gap(self) -> float | None:
        """ProfilerTrace.median_gap: the median of the positive gaps between samples."""
        return _median_gap(self.sample_time)

    def to_trace(self) -> ProfilerTrace:
        from .trace import ProfilerTrace

        return ProfilerTrace(
            self.resources, self.frames, self.stack_parent, self.stack_frame,
            self.sample_time, self.sample_stack, self.sample_marker, self.sample_line,
        )


class LightTrack:
    """trace.Track's fields over a LightTrace (no spans: a Node recording has none)."""

    __slots__ = (
        "name", "trace", "time_origin", "engine", "sample_interval", "requested_interval",
        "spans", "meta",
    )

    def __init__(
        self, name: str, trace: LightTrace, time_origin: float | None, engine: str | None,
        sample_interval: float | None, requested_interval: float | None, meta: dict,
    ) -> None:
        self.name = name
        self.trace = trace
        self.time_origin = time_origin
        self.engine = engine
        self.sample_interval = sample_interval
        self.requested_interval = requested_interval
        self.spans = None
        self.meta: dict[str, Any] = meta

    def to_track(self) -> Track:
        from .trace import Track

        return Track(
            name=self.name, trace=self.trace.to_trace(), time_origin=self.time_origin,
            engine=self.engine, sample_interval=self.sample_interval,
            requested_interval=self.requested_interval, meta=self.meta,  # type: ignore[arg-type]
        )


class LightRecording:
    """trace.Recording's tracks as LightTracks: what `record` writes and summarises
    without numpy; `recording()` is the model (the same tracks, the meta shared)."""

    def __init__(self, tracks: list[LightTrack]) -> None:
        self.tracks = tracks
        self._full: Recording | None = None

    @property
    def num_samples(self) -> int:
        return sum(t.trace.num_samples for t in self.tracks)

    def recording(self) -> Recording:
        if self._full is None:
            from .trace import Recording

            self._full = Recording([t.to_track() for t in self.tracks])
        return self._full


# ---- the summary's numbers, as the model computes them ---------------------------------


def _diff(x: Any) -> list[float]:
    return [b - a for a, b in zip(x, x[1:], strict=False)]


def _pairwise(a: list[float], lo: int, n: int) -> float:
    """numpy's pairwise summation of a[lo:lo + n] (float64 add.reduce over a contiguous
    column: 8 accumulators up to 128 items, halves above), so the sums are numpy's bits."""
    if n < 8:
        res = 0.0
        for i in range(lo, lo + n):
            res += a[i]
        return res
    if n <= 128:
        r0, r1, r2, r3, r4, r5, r6, r7 = a[lo:lo + 8]
        i = 8
        end = n - n % 8
        while i < end:
            b = lo + i
            r0 += a[b]
            r1 += a[b + 1]
            r2 += a[b + 2]
            r3 += a[b + 3]
            r4 += a[b + 4]
            r5 += a[b + 5]
            r6 += a[b + 6]
            r7 += a[b + 7]
            i += 8
        res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
        while i < n:
            res += a[lo + i]
            i += 1
        return res
    n2 = n // 2
    n2 -= n2 % 8
    return _pairwise(a, lo, n2) + _pairwise(a, lo + n2, n - n2)


def np_sum(a: list[float]) -> float:
    """`float(np.asarray(a, np.float64).sum())`, bit for bit."""
    return _pairwise(a, 0, len(a))


# The rules below are the model's (trace.py, analysis/sampling.py, analysis/profile.py:
# each cites its counterpart here) over lists; their scalar parts are shared
# (traceparts.gap_cap_and_base, middle, GapCapping.of, sampling.Achieved.of), the column
# arithmetic is written twice, and tests/test_node_light_summary.py holds the two equal on
# real recordings (tests/test_node_light.py on drawn tracks with ties and capped gaps).


def _median_gap(times: Any) -> float | None:
    """trace.ProfilerTrace.median_gap of these sample times."""
    d = sorted(x for x in _diff(times) if x > 0)
    return middle(d) if d else None


def _gap_cap(times: Any, interval: float | None) -> tuple[float, float] | None:
    """trace.gap_cap and the base it counts from."""
    return gap_cap_and_base(interval, _median_gap(times))


def weights_and_lost(track: LightTrack) -> tuple[list[float], float]:
    """trace.weights_and_lost of the track's trace at its interval."""
    t = track.trace.sample_time
    interval = track.sample_interval
    n = len(t)
    if n == 0:
        return [], 0.0
    w = [x if x > 0.0 else 0.0 for x in _diff(t)]  # np.maximum(diff, 0.0)
    declared = interval if interval is not None and interval > 0 else None
    w.append(declared if declared is not None else (_median_gap(t) or 0.0))
    lost = 0.0
    floor = max(GAP_CAP_INTERVALS * (declared or 0.0), GAP_CAP_MIN_MS)
    if max(w) > floor:
        got = _gap_cap(t, interval)
        if got is not None:
            cap = got[0]
            over = [x - cap for x in w if x > cap]
            if over:
                lost = np_sum(over)
                w = [cap if x > cap else x for x in w]
    return w, lost


def _gap_capping(track: LightTrack) -> GapCapping | None:
    t = track.trace.sample_time
    if len(t) < 2:
        return None
    got = _gap_cap(t, track.sample_interval)
    if got is None:
        return None
    over = [g - got[0] for g in _diff(t) if g > got[0]]
    if not over:
        return None
    return GapCapping.of(len(over), np_sum(over), got)


def track_sampling(track: LightTrack) -> TrackSampling:
    """analysis.sampling.track_sampling of a track on the wall clock."""
    from .analysis.sampling import BEHIND_GAP, Achieved, TrackSampling
    from .meta import CPU, clock_of

    if clock_of(track.meta) == CPU:  # not a Node recording's: weights from the CPU clock
        raise ValueError("a CPU-clock track is summarised through the model")
    weights, lost = weights_and_lost(track)
    got = None
    if track.sample_interval:
        d = [x for x in _diff(track.trace.sample_time) if x > 0]
        if d:
            behind = [x for x in d if x > BEHIND_GAP * track.sample_interval]
            got = Achieved.of(sorted(d), np_sum(d), np_sum(behind))
    return TrackSampling(
        samples=track.trace.num_samples,
        span_ms=np_sum(weights),
        lost_ms=float(lost),
        capping=_gap_capping(track) if lost > 0 else None,
        cpu=False,
        achieved=got,
        wall_ms=None,
    )


def _subtree_sums(parent: Any, own: list[float], depth: list[int]) -> list[float]:
    """analysis.profile.subtree_sums in its order of additions: deepest level first, each
    level's nodes in index order."""
    acc = list(own)
    if not parent:
        return acc
    levels: list[list[int]] = [[] for _ in range(max(depth) + 1)]
    for i, d in enumerate(depth):
        levels[d].append(i)
    for d in range(len(levels) - 1, 1, -1):
        for i in levels[d]:
            acc[parent[i]] += acc[i]
    return acc


def _totals(
    tracks: list[LightTrack], parts: list[tuple | None], wanted: set[int], n_keys: int
) -> list[float]:
    """analysis.profile's total time of the `wanted` keys (0 for the others): subtree sums
    at each key's outermost occurrence on a path, over the tracks in order."""
    total = [0.0] * n_keys
    for t, part in zip(tracks, parts, strict=True):
        if part is None:
            continue
        node_key, stack_ms = part
        parent = t.trace.stack_parent
        depth = [0] * len(parent)
        for i, p in enumerate(parent):  # parents come before their children
            depth[i] = 1 if p == NONE else depth[p] + 1
        sub = _subtree_sums(parent, stack_ms, depth)
        mine = [0.0] * n_keys
        for i, k in enumerate(node_key):
            if k not in wanted:
                continue
            a = parent[i]
            while a != NONE and node_key[a] != k:
                a = parent[a]
            if a == NONE:
                mine[k] += sub[i]
        total = [x + y for x, y in zip(total, mine, strict=True)]
    return total


def top_rows(rec: LightRecording, top: int) -> list[dict]:
    """render/summary's rows of `top` functions by self time (name, location, self_ms,
    self_pct), as summary_rows(summarize(rec, top_self=top), top) gives them: the keys
    with self time, ranked by self then total time, with the no-JavaScript rows."""
    from .render.rows import key_label

    index: dict[FunctionKey, int] = {}
    keys: list[FunctionKey] = []
    self_ms: list[float] = []
    parts: list[tuple | None] = []
    all_weights = []
    no_js: dict[str, list] = {}
    for t in rec.tracks:
        tr = t.trace
        res = tr.resources
        frame_key = []
        for f in tr.frames:
            k = FunctionKey(f.name, None if f.resource_id is None else res[f.resource_id],
                            f.line, f.column)
            i = index.get(k)
            if i is None:
                i = index[k] = len(keys)
                keys.append(k)
                self_ms.append(0.0)
            frame_key.append(i)
        w, _ = weights_and_lost(t)
        all_weights.append(w)
        n_st = tr.num_stacks
        stack_ms = [0.0] * n_st
        marker = tr.sample_marker
        none: dict[int, list[float]] = {}  # marker code -> weights of stack-less samples
        for j, (s, x) in enumerate(zip(tr.sample_stack, w, strict=True)):
            if s != NONE:
                stack_ms[s] += x
            else:
                none.setdefault(NONE if marker is None else marker[j], []).append(x)
        if n_st:
            node_key = [frame_key[f] for f in tr.stack_frame]
            mine = [0.0] * len(keys)
            for k, x in zip(node_key, stack_ms, strict=True):
                mine[k] += x
            self_ms[:len(mine)] = [a + b for a, b in zip(self_ms, mine, strict=False)]
            parts.append((node_key, stack_ms))
        else:
            parts.append(None)
        for code in sorted(none):
            row = no_js.setdefault(no_stack_name(code), [0, 0.0])
            row[0] += len(none[code])
            row[1] += np_sum(none[code])
    total_ms = float(sum(np_sum(w) for w in all_weights))
    # The keys ranked as KeyStats.order("self") ranks them: by self time, then total time,
    # then first seen. Only keys with self time can be shown; totals only break ties.
    shown = sorted((i for i, x in enumerate(self_ms) if x > 0), key=lambda i: -self_ms[i])
    first = shown[:max(top, 0)]
    if first:
        last = self_ms[first[-1]]
        tied = {self_ms[i] for i in shown if self_ms[i] >= last}
        if len(tied) < len([i for i in shown if self_ms[i] >= last]):
            wanted = {i for i in shown if self_ms[i] >= last}
            total = _totals(rec.tracks, parts, wanted, len(keys))
            shown = sorted(wanted, key=lambda i: (-self_ms[i], -total[i], i))
            first = shown[:max(top, 0)]

    def pct(ms: float) -> float:
        return 100.0 * ms / total_ms if total_ms > 0 else 0.0

    rows = []
    for i in first:
        name, where = key_label(keys[i])
        rows.append({"name": name, "location": where, "self_ms": round(self_ms[i], 3),
                     "self_pct": round(pct(self_ms[i]), 2)})
    for label, (_n, ms) in sorted(no_js.items(), key=lambda kv: -kv[1][1]):
        rows.append({"name": label, "location": "", "self_ms": round(ms, 3),
                     "self_pct": round(pct(ms), 2)})
    rows.sort(key=lambda r: -r["self_ms"])
    return rows[:top]
