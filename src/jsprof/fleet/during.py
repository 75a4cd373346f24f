"""`--during interaction|long-frame|load`: only the samples taken while users waited.

The compacted tables keep one weight per (upload, stack), not sample times, so this plan
reads the matching uploads' raw records (`Store.get`: one claim and one record each) with
their timelines, keeps the samples inside the windows, and interns what is left into
per-release tables of the same shape the tables give (`release.Release`, `StackRows`,
`FrameRows`): top, flame, diff and export then run unchanged. Its cost grows with the
matching uploads, not with distinct stacks (docs/design.md, Deviations).

Samples the browser lost the stack of are attributed as the compactor attributes them
(analysis/busy.py: inside a long frame's script entry, that entry point's `(stack not
captured)`; elsewhere in the frame, its own rows), but by the frames of the whole page
load (all its chunks: a frame reported with the next chunk still covers its samples), so
a handler is charged only for the time inside its own script entries; the kept time so
charged to entry points is reported (`attributedMs`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..analysis.busy import attribute_trace, charged_mask
from ..errors import JsprofError
from ..trace import NONE, ProfilerTrace, TraceBuilder
from . import timeline as tl
from .engine import FrameRows, Snapshot, StackRows, Uploads
from .release import mapped_release

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


def _timelines(store: Any, up: Uploads) -> tuple[list[Any], dict[str, tl.PageLoad]]:
    raw = []
    keyed = []
    from ..store import StoreError

    for i, uid in enumerate(up.id):
        try:
            got = store.get(uid)
        except StoreError:  # damaged, or its raw record removed once compacted (--keep-raw)
            got = None
        raw.append(got)
        key = up.page_load[i] or f"upload:{uid}"
        keyed.append((key, None if got is None else got[0].get("timeline")))
    return raw, tl.page_loads(keyed)


def select_during(snap: Snapshot, up: Uploads, during: str, slower_than: float | None,
                  app: str, pick: Callable[[dict], bool] | None = None) -> dict:
    """The pieces of a `query.Selection` for the samples inside `during` windows: releases,
    rows, per-trace rows, frame rows, and the time charged to LoAF entry points. `pick`
    keeps only the interactions it says yes to (`fleet interactions`, per target)."""
    from ..formats import read_any
    from ..store import Store
    from ..store.compact import upload_weights

    threshold = tl.DEFAULT_SLOWER_THAN[during] if slower_than is None else slower_than
    store = Store(snap.tdir.parent)
    raw, loads = _timelines(store, up)
    tables = {rkey: _Tables() for rkey in up.rkeys}
    rows: list[tuple[np.ndarray, ...]] = []  # per upload: ri, stack, marker, weight_ns, uk
    attributed_ms = 0.0
    # Uploads whose timeline has a window of this kind at any length: none means the
    # filter selects nothing (exit 2), where a threshold that keeps none is a real zero.
    with_kind = 0
    kept: dict[str, int] = {}  # per page load: its windows kept (its chunks share them)
    for i, got in enumerate(raw):
        if got is None:
            continue  # pruned since it was compacted
        meta, body = got
        key = up.page_load[i] or f"upload:{up.id[i]}"
        pl = loads[key]
        with_kind += bool(pl.windows(during, -math.inf, pick))
        windows = pl.windows(during, threshold, pick)
        kept[key] = len(windows)
        if not windows:
            continue
        try:
            rec = read_any(body, f"upload {up.id[i]}")
        except JsprofError:
            continue  # compaction recorded it as skipped
        ri = int(up.ri[i])
        tab = tables[up.rkey[i]]
        for track in rec.tracks:
            tr = track.trace
            if tr.num_samples == 0:
                continue
            w, _ = upload_weights(track, meta)  # the weights the compactor stored
            keep = tl.in_windows(tr.sample_time, windows)
            if not keep.any():
                continue
            tr = attribute_trace(tr, pl.long_frames, w)[0]
            smap = tab.add_trace(tr)
            st = smap[tr.sample_stack[keep]]
            mk = (tr.sample_marker[keep].astype(np.int64) if tr.sample_marker is not None
                  else np.full(int(keep.sum()), NONE, np.int64))
            wk = w[keep]
            attributed_ms += float(wk[charged_mask(tr)[keep]].sum())
            rows.append((np.full(len(st), ri, np.int64), st, mk,
                         np.rint(wk * NS_PER_MS).astype(np.int64),
                         np.full(len(st), int(up.uk[i]), np.int64)))
    releases = {}
    leaf_frame = {}
    rel_names = dict(zip(up.rkey, up.release, strict=True))
    for rkey, tab in tables.items():
        trace = tab.trace()
        leaf_frame[rkey] = trace.stack_frame.astype(np.int64)
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
    frames = FrameRows(fr.uk, fr.ri, fr.stack_id, fr.marker, fr.weight_ns)
    return {"releases": releases, "rows": total, "per_trace": per_trace, "frames": frames,
            "attributed_ms": attributed_ms, "with_kind": with_kind,
            "windows": sum(kept.values())}


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
