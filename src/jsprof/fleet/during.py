"""`--during interaction|long-frame|load`: only the samples taken while users waited.

Reads only tables (issue 34): the samples table keeps each sample's time on its upload's
clock, stack and weight, and the uploads table each upload's timeline (its meta). This
plan keeps the matching uploads' samples inside the windows and interns what is left into
per-release tables of the same shape the tables give (`release.Release`, `StackRows`,
`FrameRows`): top, flame, diff and export then run unchanged. Its cost grows with the
matching uploads' samples, not with distinct stacks (docs/design.md, Deviations).

Samples the browser lost the stack of were attributed at compaction by the upload's own
long frames (analysis/busy.py: inside a long frame's script entry, that entry point's
`(stack not captured)`; elsewhere in the frame, its own rows); here they are attributed
again by the frames of the whole page load (all its chunks: a frame reported with the
next chunk still covers its samples), so a handler is charged only for the time inside
its own script entries; the kept time so charged to entry points is reported
(`attributedMs`). The lost time (what a gap had beyond the weight cap, `trace.gap_cap`) is
counted as the time is: a kept sample's own, so `lostMs` of a `--during` query is what was
lost inside its windows, not the whole uploads'"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from .. import script_lines
from ..analysis.busy import attribute_trace, charged_mask
from ..store.tables.view import timed
from ..trace import NONE, ProfilerTrace, TraceBuilder
from . import timeline as tl
from .engine import FrameRows, Snapshot, StackRows, Uploads
from .release import mapped_release, stored_trace

NS_PER_MS = 1_000_000


class _Tables:
    """One release's frames and stacks, interned across uploads (a TraceBuilder's)."""

    def __init__(self) -> None:
        self.b = TraceBuilder()

    def frame(self, name: str, resource: str | None, line: int | None, col: int | None) -> int:
        rid = None if resource is None else self.b.resource_id(resource)
        return self.b.frame_id(name, rid, line, col)

    def stack(self, parent: int, frame: int) -> int:
        return self.b.stack_id_from(parent, frame)

    def add_trace(self, tr: ProfilerTrace) -> np.ndarray:
        """Per stack of `tr`, its id here (a last entry for NONE -> NONE)."""
        res = tr.resources
        fmap = [self.frame(f.name, None if f.resource_id is None else res[f.resource_id],
                           f.line, f.column) for f in tr.frames]
        smap = np.full(tr.num_stacks + 1, NONE, np.int64)
        # Parents come before children in a ProfilerTrace's stack table only by custom:
        # resolve in an order that is sure to see a parent first.
        order = np.argsort(tr.stack_depths(), kind="stable") if tr.num_stacks else []
        for s in np.asarray(order).tolist():
            p = int(tr.stack_parent[s])
            smap[s] = self.stack(NONE if p == NONE else int(smap[p]),
                                 fmap[int(tr.stack_frame[s])])
        return smap

    def trace(self) -> ProfilerTrace:
        return self.b.build()


def upload_metas(snap: Snapshot, up: Uploads) -> dict[int, dict]:
    """Per upload key of `up`: its meta as the uploads table keeps it (with its timeline)."""
    import orjson

    from .engine import read_part

    want = set(up.uk.tolist())
    out: dict[int, dict] = {}
    at = up.received_at[np.isfinite(up.received_at)]
    span = (float(at.min()), float(at.max()) + 1.0) if len(at) == len(up) and len(at) else (
        None, None)
    for p in snap.files("uploads", up.rkeys, *span):
        t = read_part(p, ["uk", "meta"]).to_pydict()
        for uk, meta in zip(t["uk"], t["meta"], strict=True):
            if uk in want:
                out[uk] = orjson.loads(meta) if meta else {}
    return out


def _upload_trace(rel: ProfilerTrace, t: np.ndarray, st: np.ndarray, mk: np.ndarray
                  ) -> ProfilerTrace:
    """One upload's samples over the part of its release's stored tables they use (their
    stacks, the stacks' ancestors and frames): the upload's trace as compaction stored
    it. A marker column only when some sample has a marker (stored -1 is "none")."""
    par = rel.stack_parent
    need: set[int] = set()
    for s in np.unique(st[st >= 0]).tolist():
        while s != NONE and s not in need:
            need.add(s)
            s = int(par[s])
    idx = np.asarray(sorted(need), np.int64)  # stored parents precede their children
    sid = np.full(rel.num_stacks + 1, NONE, np.int64)  # the last entry: NONE -> NONE
    sid[idx] = np.arange(len(idx))
    fr = rel.stack_frame[idx].astype(np.int64) if len(idx) else np.zeros(0, np.int64)
    used = np.unique(fr)
    fid = np.full(len(rel.frames) or 1, NONE, np.int64)
    fid[used] = np.arange(len(used))
    parent = rel.stack_parent[idx].astype(np.int64) if len(idx) else np.zeros(0, np.int64)
    return ProfilerTrace(
        rel.resources, [rel.frames[f] for f in used.tolist()],
        np.where(parent >= 0, sid[parent], NONE), fid[fr],
        sample_time=t, sample_stack=sid[st],
        sample_marker=mk if (mk != NONE).any() else None,
    )


def select_during(snap: Snapshot, up: Uploads, during: str, slower_than: float | None,
                  app: str, pick: Callable[[dict], bool] | None = None) -> dict:
    """The pieces of a `query.Selection` for the samples inside `during` windows: releases,
    rows, per-trace rows, frame rows, and the time charged to LoAF entry points. `pick`
    keeps only the interactions it says yes to (`fleet interactions`, per target)."""
    from .engine import sample_rows

    threshold = tl.DEFAULT_SLOWER_THAN[during] if slower_than is None else slower_than
    metas = upload_metas(snap, up)
    loads = tl.page_loads([(up.page_load[i] or f"upload:{uid}",
                            metas.get(int(up.uk[i]), {}).get("timeline"))
                           for i, uid in enumerate(up.id)])
    samples = sample_rows(snap, up)
    spans: dict[int, tuple[int, int]] = {}
    if len(samples["uk"]):
        cut = np.flatnonzero(np.diff(samples["uk"])) + 1
        for a, b in zip(np.r_[0, cut].tolist(), np.r_[cut, len(samples["uk"])].tolist(),
                        strict=True):
            spans[int(samples["uk"][a])] = (a, b)
    stored = {rkey: stored_trace(snap, rkey) for rkey in up.rkeys}
    lines = script_lines.for_store(snap.store_path)  # where an entry point's offset lies
    tables = {rkey: _Tables() for rkey in up.rkeys}
    rows: list[tuple[np.ndarray, ...]] = []  # per upload: ri, stack, marker, weight_ns, uk
    attributed_ms = 0.0
    lost = np.zeros(len(up), np.float64)  # per upload: the lost time of its kept samples
    # Uploads whose timeline has a window of this kind at any length: none means the
    # filter selects nothing (exit 2), where a threshold that keeps none is a real zero.
    with_kind = 0
    kept: dict[str, int] = {}  # per page load: its windows kept (its chunks share them)
    # Uploads compacted before the tables kept sample times (format 4): counted, not read.
    from_uk = snap.manifest.get("samplesFromUk", 0)
    untimed = 0
    for i, uid in enumerate(up.id):
        key = up.page_load[i] or f"upload:{uid}"
        pl = loads[key]
        with_kind += bool(pl.windows(during, -math.inf, pick))
        windows = pl.windows(during, threshold, pick)
        kept[key] = len(windows)
        if windows and int(up.uk[i]) < from_uk:
            untimed += 1
        if not windows or int(up.uk[i]) not in spans:
            continue
        a, b = spans[int(up.uk[i])]
        # A sample whose stored time is not finite is in no window and is no neighbour:
        # left out before all else, by the Time view's rule (`timed`), so the gaps (its
        # lost time) are those of the samples with a time (an infinite gap to one made
        # the kept samples' lost time infinite)
        on = timed(samples["t"][a:b])
        t, wns = samples["t"][a:b][on], samples["weight_ns"][a:b][on]
        w = wns / NS_PER_MS  # the weights the compactor stored
        tr = _upload_trace(stored[up.rkey[i]], t, samples["stack_id"][a:b][on],
                           samples["marker"][a:b][on].astype(np.int64))
        keep = tl.in_windows(tr.sample_time, windows)
        if not keep.any():
            continue
        # Compaction charged lost stacks by the upload's own long frames; a frame that
        # ended after its chunk was sent is in the next chunk's timeline: the page load's.
        tr = attribute_trace(tr, pl.long_frames, w, lines(up.rkey[i]))[0]
        ri = int(up.ri[i])
        smap = tables[up.rkey[i]].add_trace(tr)
        st = smap[tr.sample_stack[keep]]
        mk = (tr.sample_marker[keep].astype(np.int64) if tr.sample_marker is not None
              else np.full(int(keep.sum()), NONE, np.int64))
        wk = w[keep]
        attributed_ms += float(wk[charged_mask(tr)[keep]].sum())
        if up.lost_ms[i] > 0:
            lost[i] = float(lost_per_sample(t, w)[keep].sum())
        rows.append((np.full(len(st), ri, np.int64), st, mk, wns[keep],
                     np.full(len(st), int(up.uk[i]), np.int64)))
    releases = {}
    leaf_frame = {}
    parent_of = {}
    rel_names = dict(zip(up.rkey, up.release, strict=True))
    for rkey, tab in tables.items():
        trace = tab.trace()
        leaf_frame[rkey] = trace.stack_frame.astype(np.int64)
        parent_of[rkey] = trace.stack_parent.astype(np.int64)
        releases[rkey] = mapped_release(snap, rkey, app, rel_names[rkey], trace)
    cols = [np.concatenate([r[k] for r in rows]) if rows else np.zeros(0, np.int64)
            for k in range(5)]
    ri, st, mk, wns, uk = cols
    per_trace = _sum_rows(ri, st, mk, wns, uk)
    total = _sum_rows(ri, st, mk, wns, None)
    # Per trace and leaf frame: what `fleet top` reads for its traces/p50/p95 columns.
    leaf = np.full(len(st), NONE, np.int64)
    for r, rkey in enumerate(up.rkeys):
        m = (ri == r) & (st >= 0)
        if m.any():
            leaf[m] = leaf_frame[rkey][st[m]]
    fr = _sum_rows(ri, leaf, mk, wns, uk)
    frames = _with_callers(FrameRows(fr.uk, fr.ri, fr.stack_id, fr.marker, fr.weight_ns),
                           per_trace, [leaf_frame[k] for k in up.rkeys],
                           [parent_of[k] for k in up.rkeys])
    return {"releases": releases, "rows": total, "per_trace": per_trace, "frames": frames,
            "attributed_ms": attributed_ms, "with_kind": with_kind, "untimed": untimed,
            "windows": sum(kept.values()), "lost_ms": lost}


def lost_per_sample(t: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Per sample of one upload (its stored times `t` and weights `w`, ms): what its gap
    to the next sample had beyond the weight cap, so the upload's lost time (`trace.
    weights_and_lost`) sample by sample. A capped sample weighs the cap, the largest
    weight of its upload; any other sample's weight is its whole gap, except the last of
    a track (its interval, never the cap), whose "gap" to the next track's first sample is
    no gap at all."""
    out = np.zeros(len(t), np.float64)
    if len(t) < 2:
        return out
    gap = np.diff(t)
    head = w[:-1]
    # weights are stored in whole ns: a capped one is the cap to within a ns
    capped = (head >= float(w.max()) - 1e-6) & (gap > head + 1e-6)
    out[:-1][capped] = gap[capped] - head[capped]
    return out


def _with_callers(fr: FrameRows, per_trace: StackRows, frame_of: list[np.ndarray],
                  parent_of: list[np.ndarray]) -> FrameRows:
    """`fr` (per trace, its leaf frames' self time) with a row of self time 0 for every
    other frame on the trace's kept stacks, as the compactor's `upload_frames` has one
    for every frame present: a function that only calls others (a handler, a parser's
    entry) is in those traces too (`top`'s traces, p50 and p95 count it)."""
    extra_uk, extra_ri, extra_f = [], [], []
    if per_trace.uk is None or not len(per_trace.uk):
        return fr
    have = set(zip(fr.uk.tolist(), fr.ri.tolist(), fr.frame_id.tolist(), strict=True))
    js = per_trace.stack_id >= 0
    pairs = np.unique(np.stack([per_trace.uk[js], per_trace.ri[js]], axis=1), axis=0)
    for u, r in pairs.tolist():
        m = js & (per_trace.uk == u) & (per_trace.ri == r)
        par, frm = parent_of[r], frame_of[r]
        seen: set[int] = set()
        present: set[int] = set()
        for s in np.unique(per_trace.stack_id[m]).tolist():
            s = int(par[s])  # the leaf's own frame has its row already
            while s != NONE and s not in seen:
                seen.add(s)
                present.add(int(frm[s]))
                s = int(par[s])
        for f in sorted(present):
            if (u, r, f) not in have:
                extra_uk.append(u)
                extra_ri.append(r)
                extra_f.append(f)
    if not extra_uk:
        return fr
    n = len(extra_uk)
    return FrameRows(np.concatenate([fr.uk, np.asarray(extra_uk, np.int64)]),
                     np.concatenate([fr.ri, np.asarray(extra_ri, np.int64)]),
                     np.concatenate([fr.frame_id, np.asarray(extra_f, np.int64)]),
                     np.concatenate([fr.marker, np.full(n, NONE, np.int64)]),
                     np.concatenate([fr.self_ns, np.zeros(n, np.int64)]))


def _sum_rows(ri: np.ndarray, st: np.ndarray, mk: np.ndarray, wns: np.ndarray,
              uk: np.ndarray | None) -> StackRows:
    """Rows summed per (uk, ri, stack, marker), sorted so."""
    if not len(ri):
        z = np.zeros(0, np.int64)
        return StackRows(z, z, z, z, z, None if uk is None else z)
    keys = np.stack([uk if uk is not None else np.zeros_like(ri), ri, st, mk], axis=1)
    uniq, inv = np.unique(keys, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    n = np.bincount(inv, minlength=len(uniq)).astype(np.int64)
    ns = np.rint(np.bincount(inv, weights=wns, minlength=len(uniq))).astype(np.int64)
    return StackRows(uniq[:, 1].copy(), uniq[:, 2].copy(), uniq[:, 3].copy(), n, ns,
                     None if uk is None else uniq[:, 0].copy())
