"""Self and total time per function, per resource and per line: vectorised over the columns.

A function is name + resource + line + column (frames that agree on all four are one
function, whichever track or frame id they came from). A sample's time is its weight
(`trace.sample_weights`: the stored column, else the gap to the next sample of its track,
the last sample getting the track's interval), so samples around an idle gap or a late tick
carry the time they stood for, and filters that drop samples don't move time around.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ..meta import counts_only
from ..trace import (
    NONE,
    FunctionKey,
    GapCapping,
    ProfilerTrace,
    Recording,
    Track,
    function_keys,
    no_stack_name,
    recorded_samples,
    sample_counts,
    sample_weights,  # noqa: F401 - re-exported: calltree, diff and callers import it here
    track_gap_capping,
    track_weights_and_lost,
)
from ..traceparts import LineKey


class KeyTable:
    """Interns keys (functions, resources, ...) across tracks: key -> dense index."""

    def __init__(self) -> None:
        self.keys: list = []
        self._index: dict = {}

    def intern(self, key: object) -> int:
        i = self._index.get(key)
        if i is None:
            i = self._index[key] = len(self.keys)
            self.keys.append(key)
        return i

    def __len__(self) -> int:
        return len(self.keys)


def frame_function_ids(trace: ProfilerTrace, table: KeyTable) -> np.ndarray:
    ids = [table.intern(k) for k in function_keys(trace)]
    return np.asarray(ids, dtype=np.int64)


def frame_resource_ids(trace: ProfilerTrace, table: KeyTable) -> np.ndarray:
    res = trace.resources
    ids = [
        table.intern(None if f.resource_id is None else res[f.resource_id]) for f in trace.frames
    ]
    return np.asarray(ids, dtype=np.int64)


def subtree_sums(parent: np.ndarray, own: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """Each node's own value plus all its descendants', one depth level at a time."""
    acc = own.astype(np.float64, copy=True)
    if len(parent) == 0:
        return acc
    levels = depth_levels(depth)
    for level in reversed(levels[1:]):
        np.add.at(acc, parent[level], acc[level])
    return acc


def depth_levels(depth: np.ndarray) -> list[np.ndarray]:
    """The nodes of each depth 1, 2, ... (ascending ids within a level), from one stable
    sort: a scan per level (`depth == d`) costs nodes x depth, ~2.5 s of a 30,000-deep
    recursion's call tree."""
    if len(depth) == 0:
        return []
    order = np.argsort(depth, kind="stable")
    bounds = np.searchsorted(depth[order], np.arange(1, int(depth.max()) + 2))
    return [order[bounds[d - 1] : bounds[d]] for d in range(1, len(bounds))]


def repeats_an_ancestor(
    parent: np.ndarray, key: np.ndarray, only: np.ndarray | None = None
) -> np.ndarray:
    """True where a node's key already appears among its ancestors (recursion). `only` (a
    mask over the nodes): the others are not looked at (False)."""
    n = len(parent)
    rep = np.zeros(n, dtype=bool)
    anc = parent.astype(np.int64)
    active = np.nonzero(anc != NONE if only is None else (anc != NONE) & only)[0]
    while len(active):
        a = anc[active]
        hit = key[a] == key[active]
        rep[active[hit]] = True
        active = active[~hit]
        anc[active] = parent[anc[active]]
        active = active[anc[active] != NONE]
    return rep


@dataclass
class KeyStats:
    """Self and total per key: parallel columns indexed like `keys`."""

    keys: list
    self_ms: np.ndarray
    total_ms: np.ndarray
    self_samples: np.ndarray
    total_samples: np.ndarray

    def order(self, by: str = "self") -> np.ndarray:
        primary = self.self_ms if by == "self" else self.total_ms
        secondary = self.total_ms if by == "self" else self.self_ms
        return np.lexsort((-secondary, -primary))


class NoJsRow(NamedTuple):
    label: str
    samples: int
    ms: float


class TopRow(NamedTuple):
    key: FunctionKey | LineKey | str | None
    self_ms: float
    total_ms: float
    self_samples: int
    total_samples: int
    # of the summary's total_ms (all sampled time, idle included), as `report`'s columns
    self_pct: float = 0.0
    total_pct: float = 0.0

    def __repr__(self) -> str:
        name, where = key_text(self.key)
        at = f" · {where}" if where else ""
        return (f"TopRow({name}{at} · self {self.self_ms:.1f} ms {self.self_pct:.1f}% · "
                f"total {self.total_ms:.1f} ms {self.total_pct:.1f}%)")


def key_text(key: object) -> tuple[str, str]:
    """A row key as (name, location) for people: a function, a line of one, a resource."""
    if isinstance(key, FunctionKey):
        return key.label(), key.location()
    if isinstance(key, LineKey):
        where = key.function.location()
        if key.line:
            where = ":".join([key.function.resource or "(unknown)", str(key.line)])
        return key.function.label(), where
    return ("(no resource)" if key is None else str(key)), ""


class TopRows(list):
    """`Summary.top()`'s rows: a list of TopRow that prints as a small table (and shows as
    one in a notebook)."""

    def _cells(self) -> list[list[str]]:
        return [[f"{r.self_pct:.1f}", f"{r.total_pct:.1f}", f"{r.self_ms:.1f}",
                 f"{r.total_ms:.1f}", *key_text(r.key)] for r in self]

    HEADERS = ("self %", "total %", "self ms", "total ms", "function", "location")

    def __repr__(self) -> str:
        rows = [list(self.HEADERS), *self._cells()]
        widths = [max(len(r[i]) for r in rows) for i in range(6)]
        return "\n".join(
            "  ".join([*(c.rjust(w) for c, w in zip(r[:4], widths, strict=False)),
                       r[4].ljust(widths[4]), r[5]]).rstrip()
            for r in rows
        )

    def _repr_html_(self) -> str:
        import html

        head = "".join(f"<th>{h}</th>" for h in self.HEADERS)
        body = "".join(
            "<tr>" + "".join(f'<td style="text-align:{"right" if i < 4 else "left"}">'
                             f"{html.escape(c)}</td>" for i, c in enumerate(r)) + "</tr>"
            for r in self._cells()
        )
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


@dataclass
class Summary:
    """What `jsprof report` shows: totals, per-key stats, and the samples with no JS."""

    total_ms: float
    total_samples: int
    stats: KeyStats
    no_js: list[NoJsRow] = field(default_factory=list)
    # Gaps beyond `trace.gap_cap` that no sample stands for (holes, not time): not in
    # total_ms, reported beside it.
    lost_ms: float = 0.0
    # How each track's gaps were capped (`trace.gap_capping`), for the tracks that lost any.
    capping: list[GapCapping] = field(default_factory=list)
    # The tracks were read from folded stacks: their ms are sample counts, not times.
    counts_only: bool = False

    def __repr__(self) -> str:
        # The generated repr printed every column; this reads as report's table does.
        return (f"Summary: {self.total_samples} samples, {self.total_ms:.1f} ms; the "
                f"hottest by self time:\n{self.top(10)!r}")

    def _repr_html_(self) -> str:
        import html

        return (f"<div>{html.escape(f'{self.total_samples} samples, {self.total_ms:.1f} ms')}"
                f"; the hottest by self time:</div>{self.top(10)._repr_html_()}")

    def top(self, n: int | None = 10, by: str = "self") -> TopRows:
        """The `n` hottest keys (all with None) by self or total time, hottest first: a list
        that prints as a table."""
        st = self.stats
        order = st.order(by).tolist()
        total = self.total_ms

        def pct(ms: float) -> float:
            return 100.0 * ms / total if total > 0 else 0.0

        return TopRows(
            TopRow(
                st.keys[i],
                float(st.self_ms[i]),
                float(st.total_ms[i]),
                int(st.self_samples[i]),
                int(st.total_samples[i]),
                pct(float(st.self_ms[i])),
                pct(float(st.total_ms[i])),
            )
            for i in (order if n is None else order[:n])
        )


def _empty(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    return (np.zeros(n), np.zeros(n), np.zeros(n, np.int64), np.zeros(n, np.int64))


def _accumulate_track(
    track: Track, frame_key: np.ndarray, n_keys: int, acc: tuple, weights: np.ndarray
) -> None:
    """Add one track's self/total per key into acc (self_ms, total_ms, self_n, total_n)."""
    part = _self_of_track(track, frame_key, n_keys, acc, weights)
    if part is not None:
        _total_of_track(track.trace, part, n_keys, acc)


def _self_of_track(
    track: Track, frame_key: np.ndarray, n_keys: int, acc: tuple, weights: np.ndarray
) -> tuple | None:
    """Add one track's self time per key into acc; what its totals need (None: no stacks)."""
    tr = track.trace
    self_ms, _total_ms, self_n, _total_n = acc
    sid = tr.sample_stack
    has = sid != NONE
    sid_v, w_v = sid[has], weights[has]
    n_st = tr.num_stacks
    if n_st == 0:
        return None
    node_key = frame_key[tr.stack_frame] if len(frame_key) else np.zeros(0, np.int64)
    # Self: by the leaf frame of each sample.
    stack_ms = np.bincount(sid_v, weights=w_v, minlength=n_st)
    # Counts, not rows: a merged profile's sample stands for `sample_count` samples.
    cnt = tr.sample_count
    stack_n = (np.bincount(sid_v, minlength=n_st) if cnt is None
               else np.rint(np.bincount(sid_v, weights=cnt[has], minlength=n_st)).astype(np.int64))
    self_ms += np.bincount(node_key, weights=stack_ms, minlength=n_keys)
    self_n += np.bincount(node_key, weights=stack_n, minlength=n_keys).astype(np.int64)
    return node_key, stack_ms, stack_n


def _total_of_track(
    tr: ProfilerTrace, part: tuple, n_keys: int, acc: tuple, only: np.ndarray | None = None
) -> None:
    """Add one track's total time per key into acc: subtree sums at the outermost
    occurrence of each key on a path, so recursion counts once per sample. `only` (a mask
    over the keys): the other keys' totals are not computed (left as they are)."""
    node_key, stack_ms, stack_n = part
    _self_ms, total_ms, _self_n, total_n = acc
    depth = tr.stack_depths()
    sub_ms = subtree_sums(tr.stack_parent, stack_ms, depth)
    sub_n = subtree_sums(tr.stack_parent, stack_n.astype(np.float64), depth)
    if only is None:
        first = ~repeats_an_ancestor(tr.stack_parent, node_key)
    else:
        wanted = only[node_key]
        first = wanted & ~repeats_an_ancestor(tr.stack_parent, node_key, wanted)
    total_ms += np.bincount(node_key[first], weights=sub_ms[first], minlength=n_keys)
    total_n += np.rint(np.bincount(node_key[first], weights=sub_n[first], minlength=n_keys)).astype(
        np.int64
    )


def no_js_rows(tracks: Sequence[Track], weights: Sequence[np.ndarray]) -> list[NoJsRow]:
    counts: dict[str, list] = {}
    for track, w in zip(tracks, weights, strict=True):
        tr = track.trace
        none = tr.sample_stack == NONE
        if not none.any():
            continue
        markers = (
            tr.sample_marker[none]
            if tr.sample_marker is not None
            else np.full(int(none.sum()), NONE, np.int8)
        )
        wn = w[none]
        cn = sample_counts(tr)[none]
        # Not np.unique: it imports numpy.ma (~10-20 ms of `jsprof record`'s summary).
        lo = int(markers.min())
        codes = np.flatnonzero(np.bincount(markers.astype(np.int64) - lo)) + lo
        for code in codes.tolist():
            sel = markers == code
            label = no_stack_name(code)
            row = counts.setdefault(label, [0, 0.0])
            row[0] += int(cn[sel].sum())
            row[1] += float(wn[sel].sum())
    return sorted((NoJsRow(k, n, ms) for k, (n, ms) in counts.items()), key=lambda r: -r.ms)


def as_recording(rec: Recording | ProfilerTrace) -> Recording:
    """A Recording as is; a bare ProfilerTrace (what `Profiler.stop()` returns) as one."""
    if isinstance(rec, Recording):
        return rec
    if isinstance(rec, ProfilerTrace):
        return Recording.of(rec)
    raise TypeError(f"expected a Recording or a ProfilerTrace, got {type(rec).__name__}")


def _tracks(rec: Recording | ProfilerTrace, track: str | None) -> list[Track]:
    rec = as_recording(rec)
    return [rec.track(track)] if track is not None else list(rec.tracks)


def summarize(
    rec: Recording | ProfilerTrace, by: str = "function", track: str | None = None,
    top_self: int | None = None,
) -> Summary:
    """Self/total per function or per resource over one track or all tracks.

    `top_self`: only the keys that can be among the first `top_self` by self time (ties
    included) get their total and are rows, for a caller that shows no more (`jsprof
    record`'s summary: the totals of a tsc profile's 20,000 stacks were most of its CPU).
    Those rows, and their order by self then total, are the full summary's.
    recorded.top_rows is the summary's top rows over lists (`record --engine node`, without
    numpy): a rule changed here changes there (tests/test_node_light_summary.py)."""
    tracks = _tracks(rec, track)
    table = KeyTable()
    keyer = frame_function_ids if by == "function" else frame_resource_ids
    frame_keys = [keyer(t.trace, table) for t in tracks]
    wl = [track_weights_and_lost(t) for t in tracks]
    weights = [w for w, _ in wl]
    acc = _empty(len(table))
    parts = [
        _self_of_track(t, fk, len(table), acc, w)
        for t, fk, w in zip(tracks, frame_keys, weights, strict=True)
    ]
    only = None
    if top_self is not None and 0 < top_self < len(table):
        # every key whose self time reaches the top_self-th largest (ties kept)
        floor = np.partition(acc[0], len(table) - top_self)[len(table) - top_self]
        only = acc[0] >= floor
    for t, part in zip(tracks, parts, strict=True):
        if part is not None:
            _total_of_track(t.trace, part, len(table), acc, only)
    # Functions no sample passed through (a filter dropped them, or the engine listed them
    # without sampling them) are not rows.
    seen = np.nonzero(acc[3] > 0)[0]
    return Summary(
        total_ms=float(sum(w.sum() for w in weights)),
        total_samples=sum(recorded_samples(t.trace) for t in tracks),
        stats=KeyStats([table.keys[i] for i in seen.tolist()], *(a[seen] for a in acc)),
        no_js=no_js_rows(tracks, weights),
        lost_ms=float(sum(lost for _, lost in wl)),
        capping=_capping(tracks, [lost for _, lost in wl]),
        counts_only=any(counts_only(t.meta) for t in tracks),
    )


def count_share_shift(summary: Summary) -> tuple[float, object] | None:
    """How far counting samples moves a function's share of self time: the largest
    difference, in percentage points, between a key's share of the self ms and its share of
    the self samples, with that key (a no-JavaScript row's name); None without samples.
    Zero when every sample weighs the same; what folded stacks (counts only) change."""
    ms = [*summary.stats.self_ms.tolist(), *(r.ms for r in summary.no_js)]
    n = [*summary.stats.self_samples.tolist(), *(r.samples for r in summary.no_js)]
    keys = [*summary.stats.keys, *(r.label for r in summary.no_js)]
    if not ms or not summary.total_samples or not summary.total_ms > 0:
        return None
    shift = [abs(a / summary.total_ms - b / summary.total_samples) * 100
             for a, b in zip(ms, n, strict=True)]
    i = max(range(len(shift)), key=shift.__getitem__)
    return shift[i], keys[i]


def _capping(tracks: list[Track], losses: list[float]) -> list[GapCapping]:
    """`gap_capping` of each track that lost time (only those: it sorts the gaps again)."""
    out = []
    for t, lost in zip(tracks, losses, strict=True):
        if lost > 0:
            c = track_gap_capping(t)
            if c is not None:
                out.append(c)
    return out


def hot_lines(rec: Recording | ProfilerTrace, track: str | None = None) -> Summary | None:
    """Self time per (leaf function, executing line); None when no track has line data.
    Samples of a track with line data whose line is unknown are keyed line NO_LINE."""
    tracks = _tracks(rec, track)
    if all(t.trace.sample_line is None for t in tracks):
        return None
    funcs = KeyTable()
    lines = KeyTable()
    self_ms: dict[int, float] = {}
    self_n: dict[int, int] = {}
    weights = []
    lost = 0.0
    losses = []
    for t in tracks:
        tr = t.trace
        w, lo = track_weights_and_lost(t)
        weights.append(w)
        lost += lo
        losses.append(lo)
        if tr.sample_line is None:
            continue
        fk = frame_function_ids(tr, funcs)
        # A sample whose line is unknown (NO_LINE: the engine gave none, or a source map
        # could not place it precisely) is a row of its own, line 0, "line unknown": its
        # time is not dropped, and not charged to a line it may not have run.
        ok = tr.sample_stack != NONE
        leaf_fn = fk[tr.stack_frame[tr.sample_stack[ok]]]
        ln = tr.sample_line[ok].astype(np.int64)
        combined = leaf_fn * (1 << 32) + ln
        uniq, inv = np.unique(combined, return_inverse=True)
        ms = np.bincount(inv, weights=w[ok], minlength=len(uniq))
        cnt = np.rint(np.bincount(inv, weights=sample_counts(tr)[ok], minlength=len(uniq))
                      ).astype(np.int64)
        for u, m, c in zip(uniq.tolist(), ms.tolist(), cnt.tolist(), strict=True):
            key = lines.intern(LineKey(funcs.keys[u >> 32], u & 0xFFFFFFFF))
            self_ms[key] = self_ms.get(key, 0.0) + m
            self_n[key] = self_n.get(key, 0) + c
    n = len(lines)
    s_ms = np.array([self_ms[i] for i in range(n)], dtype=np.float64)
    s_n = np.array([self_n[i] for i in range(n)], dtype=np.int64)
    return Summary(
        total_ms=float(sum(w.sum() for w in weights)),
        total_samples=sum(recorded_samples(t.trace) for t in tracks),
        stats=KeyStats(lines.keys, s_ms, s_ms.copy(), s_n, s_n.copy()),
        no_js=no_js_rows(tracks, weights),
        lost_ms=lost,
        capping=_capping(tracks, losses),
    )
