"""The one data model: ProfilerTrace (the spec's four tables), Recording (tracks), TraceBuilder.

Stacks and samples are numpy columns so that traces of tens of millions of samples are
analysed without Python loops. Frames and resources stay Python lists: they are few.

JSON io lives in `jsprof.formats.jsprof` (formerly `jsprof.tracefile`); this module only holds
the model, and the rules on sample times that every reader applies alike (`step_back`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .meta import GAP_CAPPING, TrackMeta

# The numpy-free half of the model, re-exported: every reader and writer imports it from here.
from .traceparts import (  # noqa: F401
    GAP_CAP_INTERVALS,
    GAP_CAP_MIN_MS,
    MARKER_CODE,
    MARKERS,
    MAX_BACKWARDS_MS,
    NO_LINE,
    NO_STACK_NAMES,
    NONE,
    URL_SCHEME,
    FunctionKey,
    GapCapping,
    ProfilerFrame,
    StackTable,
    anonymous_label,
    gap_cap_and_base,
    middle,
    no_stack_name,
    normalise_resource,
    normalised_tables,
)

# The most samples a reader makes from counts in a file (pprof values, folded counts,
# PrimJS hitCounts, speedscope weights): ~2 GB of columns. A count beyond it is a broken
# or hostile file, not a profile; readers say so rather than run out of memory.
MAX_SAMPLES = 100_000_000

# Sample times (ms) a recording can have, the one rule every reader applies (a writer then
# never writes what a reader refuses). A double counts ms exactly below 2**53 (285,000
# years): anything beyond is a broken file, not a recording.
MAX_MS = 2.0**53


def function_keys(trace: ProfilerTrace) -> list[FunctionKey]:
    """Each frame of `trace` as a FunctionKey (its resource id resolved to the URL)."""
    res = trace.resources
    return [
        FunctionKey(f.name, None if f.resource_id is None else res[f.resource_id], f.line, f.column)
        for f in trace.frames
    ]


def _i32(values: Iterable[int] | np.ndarray | None, n: int = 0) -> np.ndarray:
    if values is None:
        return np.full(n, NONE, dtype=np.int32)
    return np.ascontiguousarray(values, dtype=np.int32)


class ProfilerTrace:
    """The spec's ProfilerTrace as columns.

    stack_parent / stack_frame: int32, one entry per stack, NONE for no parent.
    sample_time: float64 ms since the track's time origin.
    sample_stack: int32, NONE for a sample with no JavaScript on the stack.
    sample_marker: int8 codes into MARKERS, or None when the trace has no markers.
    sample_line: int32 line executing in the leaf frame (NO_LINE unknown), or None.
    sample_weight: float64 ms each sample stands for, or None: then it is implied by the
        timestamps (`sample_weights`). A filter that drops samples fills it in first, so a
        kept sample keeps the weight it had in the recording.
    sample_count: int64 recorded samples each sample stands for, or None: one each. A
        merged profile (`fleet`) keeps one weighted sample per distinct stack; this column
        keeps the real counts (`sample_counts`, `recorded_samples`).
    """

    __slots__ = (
        "resources",
        "frames",
        "stack_parent",
        "stack_frame",
        "sample_time",
        "sample_stack",
        "sample_marker",
        "sample_line",
        "sample_weight",
        "sample_count",
    )

    def __init__(
        self,
        resources: Sequence[str] = (),
        frames: Sequence[ProfilerFrame] = (),
        stack_parent: Iterable[int] | np.ndarray = (),
        stack_frame: Iterable[int] | np.ndarray = (),
        sample_time: Iterable[float] | np.ndarray = (),
        sample_stack: Iterable[int] | np.ndarray | None = None,
        sample_marker: Iterable[int] | np.ndarray | None = None,
        sample_line: Iterable[int] | np.ndarray | None = None,
        sample_weight: Iterable[float] | np.ndarray | None = None,
        sample_count: Iterable[int] | np.ndarray | None = None,
    ) -> None:
        self.resources: list[str] = list(resources)
        # Frames that are ProfilerFrames already (every reader's) are kept, not built again:
        # a namedtuple's __new__ is Python code (the collector's parse paid it twice)
        self.frames: list[ProfilerFrame] = [
            f if type(f) is ProfilerFrame else ProfilerFrame(*f) for f in frames]
        self.stack_parent = _i32(stack_parent)
        self.stack_frame = _i32(stack_frame)
        self.sample_time = np.ascontiguousarray(sample_time, dtype=np.float64)
        n = len(self.sample_time)
        self.sample_stack = _i32(sample_stack, n)
        self.sample_marker = (
            None if sample_marker is None else np.ascontiguousarray(sample_marker, np.int8)
        )
        self.sample_line = None if sample_line is None else _i32(sample_line)
        self.sample_weight = (
            None if sample_weight is None else np.ascontiguousarray(sample_weight, np.float64)
        )
        self.sample_count = (
            None if sample_count is None else np.ascontiguousarray(sample_count, np.int64)
        )
        if len(self.stack_parent) != len(self.stack_frame):
            raise ValueError("stack_parent and stack_frame differ in length")
        for col in (self.sample_stack, self.sample_marker, self.sample_line, self.sample_weight,
                    self.sample_count):
            if col is not None and len(col) != n:
                raise ValueError("sample columns differ in length")

    def replace(self, **columns: Any) -> ProfilerTrace:
        """A new trace with the given columns (by their attribute names) replaced and the
        others shared, not copied: the one way a filter or mapping rebuilds a trace."""
        unknown = set(columns) - set(self.__slots__)
        if unknown:
            raise TypeError(f"ProfilerTrace has no column {', '.join(sorted(unknown))}")
        kept = {name: getattr(self, name) for name in self.__slots__ if name not in columns}
        return ProfilerTrace(**kept, **columns)

    def with_tables(self, tables: ProfilerTrace, **columns: Any) -> ProfilerTrace:
        """This trace's samples over the resource, frame and stack tables of `tables` (a
        TraceBuilder's rebuild, say), with `columns` replaced too (the sample stacks, mapped
        into the new stack table, in most callers)."""
        return self.replace(
            resources=tables.resources,
            frames=tables.frames,
            stack_parent=tables.stack_parent,
            stack_frame=tables.stack_frame,
            **columns,
        )

    @property
    def num_samples(self) -> int:
        return len(self.sample_time)

    @property
    def num_stacks(self) -> int:
        return len(self.stack_frame)

    def __len__(self) -> int:
        return self.num_samples

    def __repr__(self) -> str:
        return (
            f"ProfilerTrace({len(self.resources)} resources, {len(self.frames)} frames, "
            f"{self.num_stacks} stacks, {self.num_samples} samples)"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProfilerTrace):
            return NotImplemented
        return (
            self.resources == other.resources
            and self.frames == other.frames
            and np.array_equal(self.stack_parent, other.stack_parent)
            and np.array_equal(self.stack_frame, other.stack_frame)
            and np.array_equal(self.sample_time, other.sample_time)
            and np.array_equal(self.sample_stack, other.sample_stack)
            and _opt_equal(self.sample_marker, other.sample_marker)
            and _opt_equal(self.sample_line, other.sample_line)
            and _opt_equal(self.sample_weight, other.sample_weight)
            and _opt_equal(self.sample_count, other.sample_count)
        )

    __hash__ = None  # type: ignore[assignment]

    def median_gap(self) -> float | None:
        """The median of the positive gaps between samples (ms): the interval the samples
        show, for traces that do not say theirs. None with fewer than two distinct times."""
        d = np.diff(self.sample_time)
        d = d[d > 0]
        if not len(d):
            return None
        # np.median would import numpy.ma (~10 ms of `jsprof record`'s start-up).
        n = len(d)
        return middle(np.partition(d, [(n - 1) // 2, n // 2]))

    def stack_frames(self, stack_id: int) -> list[int]:
        """Frame ids of a stack, outermost first."""
        out = []
        while stack_id != NONE:
            out.append(int(self.stack_frame[stack_id]))
            stack_id = int(self.stack_parent[stack_id])
        return out[::-1]

    def stack_depths(self) -> np.ndarray:
        """Depth of each stack (1 for a root), vectorised: parents are earlier stacks."""
        return stack_depths(self.stack_parent)


def gap_cap(trace: ProfilerTrace, interval: float | None = None) -> float | None:
    """The most one sample may weigh (ms): GAP_CAP_INTERVALS times the trace's interval,
    the larger of the one it says (`interval`) and the median gap its samples show (so a
    wrong declared interval cannot make healthy gaps look like holes), and at least
    GAP_CAP_MIN_MS. None when the trace shows no interval at all (fewer than two distinct
    times and none declared)."""
    got = gap_cap_and_base(interval, trace.median_gap())
    return None if got is None else got[0]


def weights_and_lost(trace: ProfilerTrace, interval: float | None = None
                     ) -> tuple[np.ndarray, float]:
    """`sample_weights` and the milliseconds its cap left out (the lost time).
    recorded.weights_and_lost is this over lists (`record --engine node`, without numpy):
    a rule changed here changes there (tests/test_node_light_summary.py compares the two
    on real recordings, tests/test_node_light.py on drawn ones)."""
    if trace.sample_weight is not None:
        return trace.sample_weight, 0.0
    t = trace.sample_time
    n = len(t)
    w = np.empty(n, dtype=np.float64)
    if n == 0:
        return w, 0.0
    np.maximum(np.diff(t), 0.0, out=w[:-1])
    declared = interval if interval is not None and interval > 0 else None
    w[-1] = declared if declared is not None else (trace.median_gap() or 0.0)
    lost = 0.0
    # The cap is at least this: below it no gap needs the median (a sort) to be judged.
    floor = max(GAP_CAP_INTERVALS * (declared or 0.0), GAP_CAP_MIN_MS)
    if float(w.max()) > floor:
        cap = gap_cap(trace, interval)
        if cap is not None:
            over = w > cap
            if over.any():
                lost = float((w[over] - cap).sum())
                w[over] = cap
    return w, lost


def gap_capping(trace: ProfilerTrace, interval: float | None = None) -> GapCapping | None:
    """How `sample_weights` capped this trace's gaps; None when no gap was capped (or the
    trace carries its own weights). For the notes that show lost time: which cap, why, how
    many gaps and how much. (recorded.py's gap_capping: the same over lists.)"""
    if trace.sample_weight is not None or trace.num_samples < 2:
        return None
    got = gap_cap_and_base(interval, trace.median_gap())
    if got is None:
        return None
    gaps = np.diff(trace.sample_time)
    over = gaps > got[0]
    if not over.any():
        return None
    return GapCapping.of(int(over.sum()), float((gaps[over] - got[0]).sum()), got)


def is_finite_number(v: object) -> bool:
    """A JSON number a double holds (not a bool; an int of any size is a JSON number, and
    one beyond MAX_MS made math.isfinite raise)."""
    if type(v) is int:
        return abs(v) < MAX_MS
    return type(v) is float and math.isfinite(v)


def stored_capping(meta: TrackMeta | dict[str, Any]) -> GapCapping | None:
    """The meta key `gapCapping` as a GapCapping: what the gap cap did to the recording
    whose capped weights a track stores (a pprof read back: its samples have no times to
    cap again). None without it, or where it is not four finite numbers that a cap can
    have given (a hand-edited or damaged file: such a key is ignored, as other meta is)."""
    got = meta.get(GAP_CAPPING)
    if not isinstance(got, dict):
        return None
    vals = [got.get(k) for k in ("gaps", "lostMs", "capMs", "intervalMs")]
    if not all(is_finite_number(v) for v in vals):
        return None
    gaps, lost, cap, base = vals
    if gaps != int(gaps) or not 1 <= gaps < MAX_SAMPLES or not 0 < lost < MAX_MS:
        return None
    # the cap its interval gives (`gap_cap`), as a recording's own notes say (review14: a
    # comment with capMs 1 and intervalMs 1 printed "cap of 1 ms (the floor; 20 x the 1 ms
    # interval is 20 ms)")
    if not 0 < base < MAX_MS or not math.isclose(
            cap, max(GAP_CAP_INTERVALS * base, GAP_CAP_MIN_MS), rel_tol=1e-9):
        return None
    return GapCapping.of(int(gaps), float(lost), (float(cap), float(base)))


def capping_meta(c: GapCapping) -> dict[str, float]:
    """`gapCapping`'s value for `c` (stored_capping reads it back as `c`)."""
    return {"gaps": c.gaps, "lostMs": c.lost_ms, "capMs": c.cap_ms, "intervalMs": c.base_ms}


def track_weights_and_lost(track: Track) -> tuple[np.ndarray, float]:
    """`weights_and_lost` of the track's trace, with the lost time its meta keeps for
    stored weights (`stored_capping`) where its samples no longer show it."""
    w, lost = weights_and_lost(track.trace, track.sample_interval)
    if track.trace.sample_weight is not None:
        c = stored_capping(track.meta)
        if c is not None:
            lost = c.lost_ms
    return w, lost


def track_gap_capping(track: Track) -> GapCapping | None:
    """`gap_capping` of the track's trace, or for stored weights the meta's
    (`stored_capping`): the same that `track_weights_and_lost` counts."""
    if track.trace.sample_weight is not None:
        return stored_capping(track.meta)
    return gap_capping(track.trace, track.sample_interval)


def samples_dropped(track: Track, trace: ProfilerTrace) -> Track:
    """`track` holding `trace`, a selection of its samples (a filter's, `--during`'s):
    without the stored gap capping, whose lost time was the whole recording's, so a
    selection of a pprof read back reports what the same selection of the recording
    does (the gap cap is not applied to a selection's kept weights)."""
    from dataclasses import replace

    meta = track.meta
    if GAP_CAPPING in meta:
        meta = {k: v for k, v in meta.items() if k != GAP_CAPPING}  # type: ignore[assignment]
    return replace(track, trace=trace, meta=meta)


def step_back(times: np.ndarray) -> tuple[int, int] | None:
    """The first sample more than MAX_BACKWARDS_MS earlier than the latest sample before
    it, and that latest sample, as (i, j); None when the times are in order. Every reader
    that can express such a step refuses it with this, on the times it would return (so
    the check is the same whichever format carried them)."""
    if len(times) < 2:
        return None
    latest = np.maximum.accumulate(times)
    back = times[1:] < latest[:-1] - MAX_BACKWARDS_MS
    if not back.any():
        return None
    i = int(np.argmax(back)) + 1
    return i, int(np.argmax(times[:i] == latest[i - 1]))


def step_back_problem(times: np.ndarray, i: int, j: int, name: str) -> str:
    """How a reader that cannot sort its samples words `step_back`'s finding (i, j);
    `name` names sample j as the file does."""
    return (
        f"{times[j] - times[i]:.6g} ms before {name}; samples must be in time order (steps "
        f"back of up to {MAX_BACKWARDS_MS:g} ms, V8's jitter, are read); is this file intact?"
    )


def sample_weights(trace: ProfilerTrace, interval: float | None = None) -> np.ndarray:
    """Milliseconds each sample stands for, as the recording implies them.

    The stored `sample_weight` column when there is one; otherwise the gap to the next
    sample (out-of-order gaps count 0), the last sample getting `interval` (the track's
    effective interval), else the median gap; no sample weighs more than `gap_cap` (the
    rest of a longer gap is lost time: `lost_ms`). Compute it before dropping samples: a
    gap to the next *kept* sample would charge a sample for time it never stood for.
    """
    return weights_and_lost(trace, interval)[0]


def lost_ms(trace: ProfilerTrace, interval: float | None = None) -> float:
    """The milliseconds of gaps beyond `gap_cap` that no sample stands for."""
    return weights_and_lost(trace, interval)[1]


def laid_out(rec: Recording) -> Recording:
    """`rec` with each aggregated track's samples (meta `aggregated`: no time axis) laid
    out one after another from 0, each as long as its weight: for a writer whose format
    keeps time only as timestamps (the weights would be lost otherwise). Other tracks are
    kept as they are."""
    from dataclasses import replace

    from .meta import is_aggregated

    if not any(is_aggregated(t.meta) for t in rec.tracks):
        return rec
    tracks = []
    for t in rec.tracks:
        if is_aggregated(t.meta):
            w = sample_weights(t.trace, t.sample_interval)
            t = replace(t, trace=t.trace.replace(sample_time=np.cumsum(w) - w))
        tracks.append(t)
    return Recording(tracks)


def sample_counts(trace: ProfilerTrace) -> np.ndarray:
    """Recorded samples each sample stands for: the `sample_count` column, else one each."""
    if trace.sample_count is not None:
        return trace.sample_count
    return np.ones(trace.num_samples, np.int64)


def recorded_samples(trace: ProfilerTrace) -> int:
    """How many samples were recorded: rows, or the sum of `sample_count` (merged)."""
    if trace.sample_count is not None:
        return int(trace.sample_count.sum())
    return trace.num_samples


def stack_depths(parent: np.ndarray) -> np.ndarray:
    """Depth per node of a forest (1 for a root)."""
    n = len(parent)
    depth = np.ones(n, dtype=np.int32)
    anc = parent.astype(np.int64)
    active = np.nonzero(anc != NONE)[0]
    # Pointer jumping: `depth[i]` counts the nodes from i up to, not including, `anc[i]`,
    # and each round doubles the reach (depth[anc] is read before depth is written), so a
    # path of depth d takes log2(d) rounds, not d: a tsc profile's 20,000 stacks up to
    # ~150 deep took 14 ms one level per round, every `report` and `record` summary.
    while len(active):
        a = anc[active]
        depth[active] += depth[a]
        anc[active] = anc[a]
        active = active[anc[active] != NONE]
    return depth


def _opt_equal(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return np.array_equal(a, b)


# What a span is (Spans.kind): an instrumented call (its frame names it), or a window the
# page reported (Chromium's long animation frames with their script entries, and Event
# Timing interactions; named by Spans.names, their details in Spans.args).
SPAN_KINDS: tuple[str, ...] = ("call", "long-frame", "script", "interaction")
SPAN_KIND_CODE: dict[str, int] = {k: i for i, k in enumerate(SPAN_KINDS)}


@dataclass
class Spans:
    """Named time windows on a track's clock, as columns (ms, ids): instrumented calls
    (`kind` "call", named by their `frame`) and the windows a page reported (`kind`
    "long-frame", "script", "interaction": `frame` NONE, named by `name` into `names`).
    `parent` nests a span in another (a call in its caller, a LoAF script entry in its
    frame). `args`, when not None, holds one dict per span: the page's own fields for the
    entry, in the client timeline's camelCase shape (jsprof.timeline; times in them are ms
    on the track's clock, like `start`); few spans carry them (at most thousands), so they
    stay objects while the columns are numpy."""

    start: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64))
    end: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64))
    frame: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    parent: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    kind: np.ndarray | None = None  # int8 codes into SPAN_KINDS; None: all calls
    name: np.ndarray | None = None  # int32 into `names`; NONE (or None): the frame names it
    names: list[str] = field(default_factory=list)
    args: list[dict] | None = None

    def __post_init__(self) -> None:
        n = len(self.start)
        if self.kind is None:
            self.kind = np.zeros(n, np.int8)
        if self.name is None:
            self.name = np.full(n, NONE, np.int32)

    def __len__(self) -> int:
        return len(self.start)

    def of_kind(self, kind: str) -> np.ndarray:
        """Indices of the spans of this kind (SPAN_KINDS), in order."""
        return np.nonzero(self.kind == SPAN_KIND_CODE[kind])[0]

    def label(self, i: int) -> str | None:
        """Span i's name when it has one of its own (windows), else None (the frame's)."""
        k = int(self.name[i])  # type: ignore[index]
        return self.names[k] if 0 <= k < len(self.names) else None

    def arg(self, i: int) -> dict:
        return self.args[i] if self.args is not None and i < len(self.args) else {}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Spans):
            return NotImplemented
        return (
            all(
                np.array_equal(getattr(self, k), getattr(other, k))
                for k in ("start", "end", "frame", "parent", "kind", "name")
            )
            and self.names == other.names
            and (self.args or []) == (other.args or [])
        )

    __hash__ = None  # type: ignore[assignment]


class SpanColumns:
    """Spans gathered one at a time (the page's timeline, a reader's events), then made
    into Spans' numpy columns by `build`: the one place those columns are declared. A
    span may be added open (`end` NaN, set later through `end[i]`); `build` leaves out
    the ones never closed (their children become roots). `args` is kept when the caller
    asks for it (`with_args`) or any span was added with some."""

    def __init__(self, with_args: bool = False) -> None:
        self.start: list[float] = []
        self.end: list[float] = []
        self.frame: list[int] = []
        self.parent: list[int] = []
        self.kind: list[int] = []
        self.label: list[str | None] = []
        self.args: list[dict | None] = []
        self.with_args = with_args

    def __len__(self) -> int:
        return len(self.start)

    def add(
        self,
        kind: str,
        start: float,
        end: float = float("nan"),
        *,
        parent: int = NONE,
        frame: int = NONE,
        label: str | None = None,
        args: dict | None = None,
    ) -> int:
        """Span number `len(self)`: a call (named by `frame`) or a window (by `label`)."""
        self.start.append(start)
        self.end.append(end)
        self.frame.append(frame)
        self.parent.append(parent)
        self.kind.append(SPAN_KIND_CODE[kind])
        self.label.append(label)
        self.args.append(args)
        self.with_args = self.with_args or args is not None
        return len(self.start) - 1

    def build(self) -> Spans:
        """The closed spans (`end` not NaN) as Spans, in the order added; names numbered in
        order of first use, parents renumbered over the kept spans."""
        kept = [j for j, e in enumerate(self.end) if e == e]
        new = {j: n for n, j in enumerate(kept)}
        ids: dict[str, int] = {}
        name = [NONE if (lb := self.label[j]) is None else ids.setdefault(lb, len(ids))
                for j in kept]
        return Spans(
            np.array([self.start[j] for j in kept], np.float64),
            np.array([self.end[j] for j in kept], np.float64),
            np.array([self.frame[j] for j in kept], np.int32),
            np.array([new.get(self.parent[j], NONE) for j in kept], np.int32),
            np.array([self.kind[j] for j in kept], np.int8),
            np.array(name, np.int32),
            list(ids),
            [a if (a := self.args[j]) is not None else {} for j in kept]
            if self.with_args else None,
        )


def spans_in_order(spans: Spans) -> Spans:
    """The spans in one canonical order, whatever order they were made or read in: roots
    by (kind, start), each followed by its children by start (depth first); names numbered
    in that order. Engines and readers give spans so, so a file's spans read back equal."""
    n = len(spans)
    kids: dict[int, list[int]] = {}
    for i, p in enumerate(spans.parent.tolist()):
        kids.setdefault(p if 0 <= p < n else NONE, []).append(i)
    start, kind = spans.start.tolist(), spans.kind.tolist()  # type: ignore[union-attr]
    order: list[int] = []
    todo = sorted(kids.get(NONE, []), key=lambda i: (kind[i], start[i], i), reverse=True)
    while todo:
        i = todo.pop()
        order.append(i)
        todo += sorted(kids.get(i, []), key=lambda j: (start[j], j), reverse=True)
    pos = np.full(n, NONE, np.int64)
    pos[np.array(order, np.int64)] = np.arange(len(order))
    idx = np.array(order, np.int64)
    par = spans.parent[idx]
    par = np.where(par >= 0, pos[np.maximum(par, 0)], NONE)
    names: list[str] = []
    name = []
    for k in spans.name[idx].tolist():  # type: ignore[index]
        name.append(NONE if k < 0 else _intern(names, spans.names[k]))
    return Spans(
        spans.start[idx], spans.end[idx], spans.frame[idx], par.astype(np.int32),
        spans.kind[idx], np.array(name, np.int32), names,  # type: ignore[index]
        None if spans.args is None else [spans.args[i] for i in order],
    )


def spans_without_calls(spans: Spans | None) -> Spans | None:
    """The spans that do not point into the frames table (the page's windows), for a step
    that rebuilt the frames (source maps, filters that drop frames): calls go, windows
    stay. None when none is left."""
    if spans is None:
        return None
    keep = np.nonzero(spans.kind != SPAN_KIND_CODE["call"])[0]  # type: ignore[operator]
    if not len(keep):
        return None
    if len(keep) == len(spans):
        return spans
    new = np.full(len(spans), NONE, np.int64)
    new[keep] = np.arange(len(keep))
    par = spans.parent[keep]
    par = np.where(par >= 0, new[np.maximum(par, 0)], NONE)
    return Spans(
        spans.start[keep], spans.end[keep], spans.frame[keep], par.astype(np.int32),
        spans.kind[keep], spans.name[keep], list(spans.names),  # type: ignore[index]
        None if spans.args is None else [spans.args[i] for i in keep.tolist()],
    )


def join_spans(a: Spans | None, b: Spans | None) -> Spans | None:
    """Both sets of spans on one track (b's parents and names renumbered after a's)."""
    if a is None or not len(a):
        return b
    if b is None or not len(b):
        return a
    n = len(a)
    names = list(a.names)
    remap = np.array([_intern(names, s) for s in b.names] or [0], np.int32)
    bname = np.where(b.name >= 0, remap[np.maximum(b.name, 0)], NONE).astype(np.int32)  # type: ignore[operator,call-overload]
    args = None
    if a.args is not None or b.args is not None:
        args = [a.arg(i) for i in range(n)] + [b.arg(i) for i in range(len(b))]
    return Spans(
        np.concatenate([a.start, b.start]),
        np.concatenate([a.end, b.end]),
        np.concatenate([a.frame, b.frame]).astype(np.int32),
        np.concatenate([a.parent, np.where(b.parent >= 0, b.parent + n, NONE)]).astype(np.int32),
        np.concatenate([a.kind, b.kind]).astype(np.int8),  # type: ignore[list-item]
        np.concatenate([a.name, bname]).astype(np.int32),  # type: ignore[list-item]
        names,
        args,
    )


def _intern(names: list[str], s: str) -> int:
    try:
        return names.index(s)
    except ValueError:
        names.append(s)
        return len(names) - 1


# A clock reading this large (ms) can only be the Unix epoch's (2001-09-09 onwards): the
# monotonic and boot-time clocks V8, Chrome and Perfetto stamp with count from boot.
EPOCH_MIN_MS = 1e12


def epoch_origin(ms: float) -> float | None:
    """`ms`, an absolute time read from a file whose clock is not named, as a time origin:
    itself when it can only be Unix epoch time, else None (unknown)."""
    return float(ms) if ms >= EPOCH_MIN_MS else None


@dataclass
class Track:
    """One runtime/thread: its trace, time origin and what we know of it.

    `time_origin` is the Unix epoch time (ms) of the trace's time 0, or None when it is
    unknown: a file without an epoch clock (`.cpuprofile`, folded stacks, pprof without
    `time_nanos`, a bare ProfilerTrace, Chrome trace and Perfetto times on a boot-time
    clock) says nothing about when it was recorded, and jsprof does not invent a date.
    The tracks of one recording whose origins are unknown share one time 0 (a reader puts
    the tracks of one file on the file's clock). A writer whose format needs a number
    writes times relative to 0 for such a track (see each format's notes).
    """

    name: str
    trace: ProfilerTrace
    time_origin: float | None = None
    engine: str | None = None
    sample_interval: float | None = None  # effective, ms
    requested_interval: float | None = None  # ms
    spans: Spans | None = None
    # the facts engines, formats and the CLI share: keys in jsprof/meta.py (TrackMeta)
    meta: TrackMeta = field(default_factory=dict)  # type: ignore[assignment]


_PID_TRACK = re.compile(r"pid \d+ (.+)")


def _process_names(track_name: str) -> list[str]:
    """The names a command's process track `pid PID SCRIPT[ worker N]` also answers to:
    the rest after its pid, and that with the script's folders left out."""
    m = _PID_TRACK.fullmatch(track_name)
    if m is None:
        return []
    rest = m.group(1)
    short = re.sub(r"^\S*/", "", rest)
    return [rest] if short == rest else [rest, short]


def _starting(tracks: Sequence[Track], name: str, names: Any) -> list[Track]:
    """The tracks one of whose `names(track)` starts with `name`; of several, the one
    whose name goes on with a non-word character there, when that is one track."""
    if not name:
        return []
    hits: list[tuple[Track, str]] = []
    for t in tracks:
        n = next((n for n in names(t) if n.startswith(name)), None)
        if n is not None:
            hits.append((t, n))
    if len(hits) > 1:
        whole = [t for t, n in hits if len(n) > len(name) and not n[len(name)].isalnum()]
        if len(whole) == 1:
            return whole
    return [t for t, _ in hits]


@dataclass
class Recording:
    """One or more tracks. A plain ProfilerTrace file is a Recording of one track."""

    tracks: list[Track] = field(default_factory=list)

    @classmethod
    def of(cls, trace: ProfilerTrace, name: str = "main", **kw: object) -> Recording:
        return cls([Track(name, trace, **kw)])  # type: ignore[arg-type]

    def track(self, name: str) -> Track:
        """The track called `name`, else the one whose name starts with it (`worker 1` for
        `worker 1 (js-worker-1)`; where several do, the one whose name goes on with a
        non-word character, so `worker 1` is not `worker 10 (...)`). A command's process
        track, `pid PID SCRIPT` (`record --engine node -- COMMAND`), also answers to its
        SCRIPT and to SCRIPT's file name (`tsc` for `pid 41 node_modules/.bin/tsc`, `tsc
        worker 1` for its worker), whole or by its start as above: its pid is new on every
        run, so one name finds the same process in two recordings (`diff --track tsc`).
        An unknown or ambiguous name is a UsageError listing the tracks, on one line."""
        for t in self.tracks:
            if t.name == name:
                return t
        named = [t for t in self.tracks if name in _process_names(t.name)]
        hits = named or _starting(self.tracks, name, lambda t: [t.name])
        if not hits:
            hits = _starting(self.tracks, name, lambda t: _process_names(t.name))
        if len(hits) == 1:
            return hits[0]
        from .errors import UsageError

        names = ", ".join(repr(t.name) for t in self.tracks)
        if hits:
            how = "are called" if named else "start with"
            raise UsageError(
                f"track {name!r} is ambiguous: {len(hits)} tracks {how} it; give more of "
                f"the name (the tracks: {names})"
            )
        raise UsageError(f"no track named {name!r} (the tracks: {names})")

    @property
    def num_samples(self) -> int:
        return sum(t.trace.num_samples for t in self.tracks)

    def __repr__(self) -> str:
        # Short: the generated repr printed every column of every track (a notebook's cell).
        tracks = "; ".join(
            " · ".join([repr(t.name), *([t.engine] if t.engine else []),
                        f"{t.trace.num_samples} samples"])
            for t in self.tracks[:4]
        )
        more = f"; and {len(self.tracks) - 4} more" if len(self.tracks) > 4 else ""
        return f"Recording({len(self.tracks)} track(s): {tracks}{more})"



class TraceBuilder(StackTable):
    """Builds a ProfilerTrace with the spec's algorithms.

    "get an element ID": a component-wise equal resource, frame or stack gets the index
    it already has, otherwise it is appended. "get a stack ID": frames outermost first; a
    frame whose ID is undefined (None) is skipped and its parent's stack ID used; an empty
    stack gives no stackId. The spec's sample buffer limit is the session's
    (`session.ProfilerSession`, `maxBufferSize`), the one place that applies it.
    """

    def __init__(self) -> None:
        super().__init__()
        self._times: list[float] = []
        self._sample_stacks: list[int] = []
        self._markers: list[int] | None = None
        self._lines: list[int] | None = None

    def __len__(self) -> int:
        return len(self._times)

    def map_stacks(self, trace: ProfilerTrace, new_frame: Sequence[int | None]) -> np.ndarray:
        """Re-intern `trace`'s stacks with each frame f replaced by `new_frame[f]`.

        A None frame is skipped as the spec skips a frame with no ID (its caller's stack is
        used). Returns, per old stack id, the new stack id (NONE where no frame is left),
        plus a last entry NONE, so indexing it with a sample's NONE keeps "no stack".
        """
        out = np.empty(trace.num_stacks + 1, np.int64)
        out[-1] = NONE
        for s, (p, f) in enumerate(
            zip(trace.stack_parent.tolist(), trace.stack_frame.tolist(), strict=True)
        ):
            up = int(out[p]) if p != NONE else NONE
            nf = new_frame[f]
            out[s] = up if nf is None else self.stack_id_from(up, nf)
        return out

    def add_sample(
        self,
        timestamp: float,
        stack_id: int | None,
        marker: str | None = None,
        line: int | None = None,
    ) -> None:
        n = len(self._times)
        self._times.append(timestamp)
        self._sample_stacks.append(NONE if stack_id is None else stack_id)
        if marker is not None:
            if self._markers is None:
                self._markers = [NONE] * n
            self._markers.append(MARKER_CODE[marker])
        elif self._markers is not None:
            self._markers.append(NONE)
        if line is not None:
            if self._lines is None:
                self._lines = [NO_LINE] * n
            self._lines.append(line)
        elif self._lines is not None:
            self._lines.append(NO_LINE)

    def build(self) -> ProfilerTrace:
        return ProfilerTrace(
            resources=list(self._resources),
            frames=list(self._frames),
            stack_parent=self._stack_parent,
            stack_frame=self._stack_frame,
            sample_time=self._times,
            sample_stack=self._sample_stacks,
            sample_marker=self._markers,
            sample_line=self._lines,
        )


# ---- resources: one spelling per script -------------------------------------------------

def normalise_resources(trace: ProfilerTrace) -> ProfilerTrace:
    """`trace` with every resource spelled by `normalise_resource`; two spellings of one
    script become one resource (frames are re-pointed), so the table stays unique."""
    got = normalised_tables(trace.resources, trace.frames)
    if got is None:
        return trace
    resources, frames = got
    return ProfilerTrace(
        resources,
        frames,
        trace.stack_parent,
        trace.stack_frame,
        trace.sample_time,
        trace.sample_stack,
        trace.sample_marker,
        trace.sample_line,
        trace.sample_weight,
        trace.sample_count,
    )
