"""Fleet queries: the engine's small sorted columns -> a Recording and analysis tables.

A query result is a `Recording` with one track per (app, release): the release's frame
and stack tables (source-mapped) and one weighted sample per (stack, marker) with the
summed time of every matching sample. `analysis/` reads it like any recording (the
per-sample weights column carries the time), so `fleet top` is `summarize`, `fleet flame`
is `build_call_tree` + the flame renderer, and `fleet diff` is `diff_profiles`: the same
numbers `jsprof report` gives for those traces merged.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..analysis.calltree import CallTree
from ..analysis.diff import (
    NameKey,
    ProfileDiff,
    ResourceMatcher,
    diff_profiles,
    key_index,
)
from ..analysis.profile import FunctionKey, Summary, repeats_an_ancestor, summarize
from ..errors import UsageError
from ..meta import AGGREGATED
from ..store.tables.view import IDLE_MARKERS as TABLE_IDLE_MARKERS
from ..store.tables.view import bucket_of, quantiles
from ..trace import (
    MARKERS,
    NONE,
    ProfilerTrace,
    Recording,
    Track,
    no_stack_name,
)
from ..words import plural
from .engine import (
    DaskEngine,
    Draws,
    DuckEngine,
    FrameRows,
    Resample,
    Snapshot,
    StackRows,
    Uploads,
    Want,
    per_upload_key,
    resample_rows,
    stack_key,
)
from .filters import Filters
from .release import Release, mapped_release, merges_frames, named, stored_trace

NS_PER_MS = 1_000_000
Engine = DuckEngine | DaskEngine


@dataclass
class Selection:
    """What one filter set matched."""

    filters: Filters
    uploads: Uploads
    releases: dict[str, Release]
    recording: Recording
    samples: int
    total_ms: float
    per_trace: Any = None
    meta: dict = field(default_factory=dict)
    frame_rows: FrameRows | None = None  # --during: per-trace frame rows made with the rows
    attributed_ms: float = 0.0  # --during: lost stacks charged to LoAF entry points
    untimed: int = 0  # --during: uploads with windows but no sample times in the tables
    with_window: int | None = None  # --during: matching uploads with a window of that kind
    windows: int | None = None  # --during: the windows kept (interactions, long frames...)
    # --exclude-idle: the time and samples of the (idle) and (program) samples left out
    idle_ms: float = 0.0
    idle_samples: int = 0
    rollup: Any = None  # the rollup parts it was read from (fleet/rollups.py), if so
    ends: Any = None  # with `rollup`: the uploads of part days read per upload (Uploads)

    @property
    def traces(self) -> int:
        return len(self.uploads)

    @property
    def lost_ms(self) -> float:
        """Gap time beyond the weight cap in the matching uploads: not in total_ms."""
        return float(self.uploads.lost_ms.sum())


def map_warnings(*sels: Selection) -> list[str]:
    """The source-map notes of the releases the selections hold, each once, in order."""
    out: dict[str, None] = {}
    for sel in sels:
        for rkey in sel.uploads.rkeys:
            rel = sel.releases.get(rkey)
            for line in rel.warnings if rel is not None else ():
                out[line] = None
    return list(out)


def _read_release(snap: Snapshot, rkey: str) -> Release:
    entry = snap.manifest["releases"][rkey]
    return mapped_release(snap, rkey, entry["app"], entry["release"], stored_trace(snap, rkey))


def _recording(releases: dict[str, Release], rows: StackRows, up: Uploads) -> Recording:
    """One track per release: a weighted sample per (stack, marker) row."""
    tracks = []
    for i, rkey in enumerate(up.rkeys):
        rel = releases[rkey]
        sel = rows.ri == i
        stack = rows.stack_id[sel]
        marker = rows.marker[sel]
        w = rows.weight_ns[sel] / NS_PER_MS
        base = rel.trace
        st = stack if rel.stack_map is None else rel.stack_map[stack]
        trace = ProfilerTrace(
            base.resources, base.frames, base.stack_parent, base.stack_frame,
            # aggregates of samples from many page loads: no time axis (meta `aggregated`),
            # not one invented by laying the rows end to end
            sample_time=np.zeros(len(w)),
            sample_stack=st,
            sample_marker=marker if (marker != NONE).any() else None,
            sample_weight=w,
            # the real counts: each row is every sample of one (stack, marker)
            sample_count=rows.samples[sel],
        )
        mine = up.ri == i
        tracks.append(Track(
            name=f"{rel.app} {rel.release}".strip(),
            trace=trace,
            engine="fleet",
            sample_interval=_merged_interval(up, mine),
            meta={
                AGGREGATED: True,
                "app": rel.app, "release": rel.release, "traces": int(up.count[mine].sum()),
                "samples": int(up.samples[mine].sum()),
                # gap time beyond the weight cap in these uploads: in no weight above
                "lostMs": round(float(up.lost_ms[mine].sum()), 3),
            },
        ))
    return Recording(tracks)


def _merged_interval(up: Uploads, mine: np.ndarray) -> float | None:
    """The interval of a merged track: the median of the intervals its uploads declared,
    else the mean time a sample stood for (never one merged row's weight)."""
    declared = up.sample_interval[mine]
    ok = np.isfinite(declared) & (declared > 0)
    if ok.any():
        # np.median of the intervals, each counted for its uploads (a rollup's row
        # stands for several): the middle one, or the mean of the middle two
        v, c = declared[ok], up.count[mine][ok]
        order = np.argsort(v, kind="stable")
        v, cum = v[order], np.cumsum(c[order])
        n = int(cum[-1])
        a, b = v[np.searchsorted(cum, (n - 1) // 2, side="right")], \
            v[np.searchsorted(cum, n // 2, side="right")]
        return float(np.mean([a, b]))
    n = int(up.samples[mine].sum())
    return float(up.total_ms[mine].sum()) / n if n else None


# Samples with no JavaScript that --exclude-idle leaves out: no stack, and the marker of
# (idle) (none) or of (program) ("other"). GC, style, layout and paint stay: they are work
# the page's code caused. Defined with the tables (the Time view's rollups count them).
IDLE_MARKERS = TABLE_IDLE_MARKERS


def idle_mask(stack_id: np.ndarray, marker: np.ndarray) -> np.ndarray:
    """Which (stack, marker) rows or samples are (idle) or (program)."""
    return (np.asarray(stack_id) == NONE) & np.isin(marker, IDLE_MARKERS)


def without_idle(rows: StackRows) -> tuple[StackRows, float, int]:
    """`rows` without the (idle) and (program) rows, and those rows' ms and samples."""
    drop = idle_mask(rows.stack_id, rows.marker)
    keep = ~drop
    out = StackRows(
        rows.ri[keep], rows.stack_id[keep], rows.marker[keep], rows.samples[keep],
        rows.weight_ns[keep],
        None if rows.uk is None else rows.uk[keep],
        None if rows.group is None else rows.group[keep],
    )
    return (out, float(rows.weight_ns[drop].sum()) / NS_PER_MS,
            int(rows.samples[drop].sum()))


def select(engine: Engine, snap: Snapshot, f: Filters, up: Uploads | None = None,
           pick: Callable[[dict], bool] | None = None) -> Selection:
    """Run the plan for one filter set (`up`: of these of its uploads only; `pick`: with
    --during interaction, only the interactions it says yes to)."""
    up = engine.uploads(snap, f) if up is None else up
    pick = pick or target_pick(f)
    idle_ms, idle_n = 0.0, 0
    if f.during is not None:
        from .during import select_during

        got = select_during(snap, up, f.during, f.slower_than, f.app, pick)
        # the lost time inside the windows, not the whole uploads' (the note under a
        # `--during` table, `lostMs`)
        up = replace(up, lost_ms=got["lost_ms"])
        rows = got["rows"]
        if f.exclude_idle:
            rows, idle_ms, idle_n = without_idle(rows)
        releases = named(got["releases"], f)
        return Selection(
            f, up, releases, _recording(releases, rows, up),
            int(rows.samples.sum()), float(rows.weight_ns.sum()) / NS_PER_MS,
            got["per_trace"], frame_rows=got["frames"], attributed_ms=got["attributed_ms"],
            with_window=got["with_kind"], windows=got["windows"], idle_ms=idle_ms,
            untimed=got["untimed"],
            idle_samples=idle_n,
        )
    releases = named({k: _read_release(snap, k) for k in up.rkeys}, f)
    rows = engine.stacks(snap, up)
    if f.exclude_idle:
        rows, idle_ms, idle_n = without_idle(rows)
    return Selection(
        f, up, releases, _recording(releases, rows, up), int(up.samples.sum()) - idle_n,
        float(rows.weight_ns.sum()) / NS_PER_MS, idle_ms=idle_ms, idle_samples=idle_n,
    )


def target_pick(f: Filters) -> Callable[[dict], bool] | None:
    """--target: the interactions on that target only (None: every one)."""
    if f.target is None:
        return None
    return lambda e: e.get("target") == f.target


def select_groups(engine: Engine, snap: Snapshot, f: Filters, up: Uploads,
                  group: np.ndarray) -> dict[int, Selection]:
    """One Selection per group of `up` (`group`: one int per upload, -1: left out), all
    read in one scan of the weights: what `select` gives for each group's uploads alone."""
    if f.during is not None:
        from .during import select_during

        got = select_during(snap, up, f.during, f.slower_than, f.app, target_pick(f))
        up = replace(up, lost_ms=got["lost_ms"])
        releases = named(got["releases"], f)
        pt: StackRows = got["per_trace"]
        if f.exclude_idle:
            pt = without_idle(pt)[0]
        g = group[np.searchsorted(up.uk, pt.uk)] if len(pt.uk) else np.zeros(0, np.int64)
        rows = _sum_groups(g, pt)
        samples_of = None
    else:
        releases = named({k: _read_release(snap, k) for k in up.rkeys}, f)
        rows = engine.stacks(snap, up, group)
        samples_of = up.samples
        if f.exclude_idle:
            rows = without_idle(rows)[0]
            samples_of = None  # the kept rows' samples
    out = {}
    for g in np.unique(group[group >= 0]).tolist():
        mine = group == g
        sub = up.subset(mine)
        # release indices of `up` -> of `sub` (whose rkeys are the group's own)
        to_sub = np.asarray([sub.rkeys.index(k) if k in sub.rkeys else -1 for k in up.rkeys]
                            or [-1], np.int64)
        m = rows.group == g
        rg = StackRows(to_sub[rows.ri[m]], rows.stack_id[m], rows.marker[m],
                       rows.samples[m], rows.weight_ns[m])
        rels = {k: releases[k] for k in sub.rkeys}
        out[g] = Selection(
            f, sub, rels, _recording(rels, rg, sub),
            int(samples_of[mine].sum()) if samples_of is not None else int(rg.samples.sum()),
            float(rg.weight_ns.sum()) / NS_PER_MS,
        )
    return out


def _sum_groups(g: np.ndarray, rows: StackRows) -> StackRows:
    """Per-trace rows summed per (group, release, stack, marker), sorted so."""
    keep = g >= 0
    keys = np.stack([g[keep], rows.ri[keep], rows.stack_id[keep], rows.marker[keep]], axis=1)
    z = np.zeros(0, np.int64)
    if not len(keys):
        return StackRows(z, z, z, z, z, group=z)
    uniq, inv = np.unique(keys, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    n = np.bincount(inv, weights=rows.samples[keep], minlength=len(uniq))
    ns = np.bincount(inv, weights=rows.weight_ns[keep], minlength=len(uniq))
    return StackRows(uniq[:, 1].copy(), uniq[:, 2].copy(), uniq[:, 3].copy(),
                     np.rint(n).astype(np.int64), np.rint(ns).astype(np.int64),
                     group=uniq[:, 0].copy())


# ---- top -------------------------------------------------------------------------------------


def top(engine: Engine, snap: Snapshot, sel: Selection, n: int | None = 20) -> dict:
    """The `fleet top --json` document."""
    summary = summarize(sel.recording)
    st = summary.stats
    index = {k: i for i, k in enumerate(st.keys)}
    n_keys = len(st.keys)
    # Per-trace figures (traces, p50, p95) only for the rows shown: those rows cost one
    # row per trace and function, the rest of the query only one per distinct stack.
    want = None
    rolled = sel.rollup is not None
    if n is not None or rolled:
        shown = np.zeros(n_keys + 1, bool)
        shown[st.order("self")[:n] if n is not None else slice(None)] = True
        ri_l, fid_l = [], []
        for ri, rkey in enumerate(sel.uploads.rkeys):
            fk = np.asarray([index.get(k, n_keys) for k in sel.releases[rkey].frame_key]
                            or [n_keys], np.int64)
            hit = np.nonzero(shown[fk])[0]
            ri_l.append(np.full(len(hit), ri, np.int64))
            fid_l.append(hit.astype(np.int64))
        want = Want(np.concatenate(ri_l or [np.zeros(0, np.int64)]),
                    np.concatenate(fid_l or [np.zeros(0, np.int64)]))
    if rolled:
        # uploads per (release, frame, marker, bucket of self time): rows per distinct
        # frame and day, not per upload (fleet/rollups.py)
        got = _rolled_frames(engine, snap, sel, want)
        fr = FrameRows(np.zeros(len(got["ri"]), np.int64), got["ri"], got["frame_id"],
                       got["marker"], np.zeros(len(got["ri"]), np.int64))
        buckets, counts = got["bucket"], got["traces"]
    else:
        fr = (sel.frame_rows if sel.frame_rows is not None
              else engine.frames(snap, sel.uploads, want))
    # Per stored (release, frame): the summary row of its mapped function.
    gid = np.full(len(fr.uk), -1, np.int64)
    for ri, rkey in enumerate(sel.uploads.rkeys):
        rel = sel.releases[rkey]
        m = fr.ri == ri
        fk = np.asarray([index.get(k, -1) for k in rel.frame_key] or [-1], np.int64)
        js = m & (fr.frame_id >= 0)
        gid[js] = fk[fr.frame_id[js]]
    no_js_labels = {r.label: n_keys + i for i, r in enumerate(summary.no_js)}
    idle = fr.frame_id < 0
    for code in np.unique(fr.marker[idle]).tolist():
        g = no_js_labels.get(no_stack_name(code))
        if g is not None:
            gid[idle & (fr.marker == code)] = g
    ok = gid >= 0
    n_groups = n_keys + len(summary.no_js)
    if rolled:
        traces, (p50, p95) = quantiles(gid[ok], buckets[ok], counts[ok], n_groups)
        return top_document(sel, summary, traces, p50, p95, n)
    groups, ns = gid[ok], fr.self_ns[ok]
    if any(merges_frames(rel) for rel in sel.releases.values()):
        # Source maps or the script identity rule can make two stored frames of one trace
        # one function: that trace counts once, with their sum. (Otherwise a release's
        # frames are distinct functions already, and each upload belongs to one release.)
        pair = fr.uk[ok] * (n_groups + 1) + groups
        uniq, inv = np.unique(pair, return_inverse=True)
        # float64 sums of integer ns are exact below 2**53 ns
        ns = np.rint(np.bincount(inv, weights=ns, minlength=len(uniq))).astype(np.int64)
        groups = uniq % (n_groups + 1)
    # Each trace's value as its bucket's middle, as the rollups keep it (tables/rollup.py)
    traces, (p50, p95) = quantiles(groups, bucket_of(ns), np.ones(len(groups), np.int64),
                                   n_groups)
    return top_document(sel, summary, traces, p50, p95, n)


def _rolled_frames(engine: Engine, snap: Snapshot, sel: Selection, want: Want
                   ) -> dict[str, np.ndarray]:
    """Per (release of `sel.uploads`, frame, marker, bucket): uploads, from the rollups
    `sel` was read from (fleet/rollups.py), for `want`'s frames and every row without
    one."""
    p = sel.rollup
    back = {k: i for i, k in enumerate(p.rkeys)}
    plan_ri = np.asarray([back[k] for k in sel.uploads.rkeys] or [0], np.int64)
    got = engine.rollup(p, "rollup_frames", sel.filters, (plan_ri[want.ri], want.frame_id))
    # each release's rows that count a function once per upload (`rollups.Frames`): per
    # frame, or per identity group and per frame alone in its group
    keep = np.ones(len(got["ri"]), bool)
    fid = np.asarray(got["frame_id"], np.int64)
    grouped = np.asarray(got["grouped"], np.int64) == 1
    for ri, how in (p.frames or {}).items():
        mine = np.asarray(got["ri"]) == ri
        js = mine & (fid >= 0)
        if not how.grouped:
            keep[mine & grouped] = False
        else:
            keep[js & ~grouped & ~how.single[np.clip(fid, 0, len(how.single) - 1)]] = False
    got = {k: np.asarray(v)[keep] for k, v in got.items()}
    got["ri"] = sel.uploads.ri_of[got["ri"]]
    ends = sel.ends
    if ends is not None and len(ends):
        # the part days at the window's ends: their uploads' own rows, a trace each
        to_end = np.asarray([ends.rkeys.index(k) if k in ends.rkeys else -1
                             for k in sel.uploads.rkeys] or [-1], np.int64)
        w = to_end[want.ri] if len(want.ri) else want.ri
        fr = engine.frames(snap, ends, Want(w[w >= 0], want.frame_id[w >= 0]))
        back = np.asarray([sel.uploads.rkeys.index(k) for k in ends.rkeys] or [0], np.int64)
        ri = back[fr.ri] if len(fr.ri) else fr.ri
        # per upload, each frame's self time on the row its rollup adds it to (a group's)
        fid = fr.frame_id.copy()
        plan_of = {k: i for i, k in enumerate(p.rkeys)}
        for i, rkey in enumerate(sel.uploads.rkeys):
            how = (p.frames or {}).get(plan_of[rkey])
            m = (ri == i) & (fid >= 0)
            if how is not None and how.grouped and m.any():
                fid[m] = how.rep[fid[m]]
        key = np.stack([fr.uk, ri, fid, fr.marker], axis=1) if len(fid) else \
            np.zeros((0, 4), np.int64)
        uq, inv = np.unique(key, axis=0, return_inverse=True)
        ns = np.zeros(len(uq), np.int64)
        np.add.at(ns, inv.reshape(-1), fr.self_ns)
        more = {"ri": uq[:, 1], "frame_id": uq[:, 2], "marker": uq[:, 3],
                "bucket": bucket_of(ns), "grouped": np.zeros(len(uq), np.int64),
                "traces": np.ones(len(uq), np.int64)}
        got = {k: np.concatenate([np.asarray(got[k]).astype(np.int64), v.astype(np.int64)])
               for k, v in more.items()}
    return got


def _r(x: float, nd: int = 3) -> float | None:
    return None if x is None or not math.isfinite(x) else round(float(x), nd)


def top_document(sel: Selection, summary: Summary, traces: np.ndarray, p50: np.ndarray,
                 p95: np.ndarray, n: int | None) -> dict:
    st = summary.stats
    total = summary.total_ms
    pct = 100.0 / total if total > 0 else 0.0
    order = st.order("self")
    if n is not None:
        order = order[:n]
    rows = []
    for i in order.tolist():
        k: FunctionKey = st.keys[i]
        rows.append({
            "name": k.name, "label": k.label(), "resource": k.resource, "line": k.line,
            "column": k.column, "selfMs": _r(st.self_ms[i]), "totalMs": _r(st.total_ms[i]),
            "selfPct": _r(st.self_ms[i] * pct, 2), "totalPct": _r(st.total_ms[i] * pct, 2),
            "traces": int(traces[i]), "p50SelfMs": _r(p50[i]), "p95SelfMs": _r(p95[i]),
        })
    _explain_lost_stacks(rows, sel.recording)
    base = len(st.keys)
    for j, r in enumerate(summary.no_js):
        rows.append({
            "name": r.label, "label": r.label, "resource": None, "line": None, "column": None,
            "selfMs": _r(r.ms), "totalMs": _r(r.ms), "selfPct": _r(r.ms * pct, 2),
            "totalPct": _r(r.ms * pct, 2), "traces": int(traces[base + j]),
            "p50SelfMs": _r(p50[base + j]), "p95SelfMs": _r(p95[base + j]),
        })
    doc = {"traces": sel.traces, "pageLoads": sel.uploads.page_loads(),
           # past 4,096 page loads in a rollup cell the count is a HyperLogLog estimate
           "pageLoadsEstimated": sel.uploads.page_loads_estimated(), "samples": sel.samples,
           "totalMs": _r(total), "lostMs": _r(sel.lost_ms), "rows": rows,
           "warnings": map_warnings(sel)}
    if sel.filters.exclude_idle:
        # what --exclude-idle left out (not in totalMs, samples or the shares)
        doc["excludedIdleMs"] = _r(sel.idle_ms)
        doc["excludedIdleSamples"] = sel.idle_samples
    if sel.filters.during is not None:
        # what --during kept, and the stack-less samples charged to a LoAF entry point
        doc["during"] = sel.filters.during
        doc["attributedMs"] = _r(sel.attributed_ms)
        if sel.untimed:
            # compacted before the tables kept sample times (format 4): not in this answer
            doc["untimedUploads"] = sel.untimed
    return doc


# Entry points listed on the `(stack not captured)` row (the rest summed as `otherMs`).
ENTRY_POINTS_SHOWN = 5


def _explain_lost_stacks(rows: list[dict], rec: Recording) -> None:
    """The rows busy time without a stack made (analysis/busy.py) have no location: each
    gets `why` (what its samples are), and `(stack not captured)` the entry points its
    samples are charged to (`entryPoints`, most first: where the trace says they were),
    so the row says where to look; its self time stays one row, counted once."""
    from ..analysis import busy

    for r in rows:
        if r["resource"] is not None or r["name"] not in busy.WHY:
            continue
        r["why"] = busy.WHY[r["name"]]
        if r["name"] != busy.NOT_CAPTURED:
            continue
        got = busy.charged_entries(rec)
        r["entryPoints"] = [
            {"name": k.name, "label": k.label(), "resource": k.resource, "line": k.line,
             "column": k.column, "ms": _r(ms)} for k, ms in got[:ENTRY_POINTS_SHOWN]]
        r["otherEntryPointsMs"] = _r(sum(ms for _, ms in got[ENTRY_POINTS_SHOWN:]))


# ---- flame -----------------------------------------------------------------------------------

OTHER = FunctionKey("other", None, None, None)


def fold_tree(tree: CallTree, max_nodes: int) -> CallTree:
    """Keep the `max_nodes` widest nodes; each parent's dropped children become one "other"."""
    n = len(tree.parent)
    if n <= max_nodes:
        return tree
    # Widest first; a parent is never narrower than its child, ties broken toward parents
    # (lower depth first), so the kept set is closed under parents.
    from ..trace import stack_depths

    depth = stack_depths(tree.parent) if n else np.zeros(0, np.int32)
    order = np.lexsort((np.arange(n), depth, -tree.total_ms))
    keep = np.zeros(n, bool)
    keep[order[:max_nodes]] = True
    # Close under parents (float ties could otherwise leave a child without its parent).
    p = tree.parent
    while True:
        bad = np.nonzero(keep & (p != NONE))[0]
        missing = bad[~keep[p[bad]]]
        if not len(missing):
            break
        keep[p[missing]] = True
    new_id = np.full(n, NONE, np.int64)
    kept = np.nonzero(keep)[0]
    new_id[kept] = np.arange(len(kept))
    functions = list(tree.functions)
    other_fn = len(functions)
    functions.append(OTHER)
    parent = [int(new_id[p[i]]) if p[i] != NONE else NONE for i in kept.tolist()]
    function = tree.function[kept].tolist()
    self_ms = tree.self_ms[kept].tolist()
    total_ms = tree.total_ms[kept].tolist()
    self_n = tree.self_samples[kept].tolist()
    total_n = tree.total_samples[kept].tolist()
    dropped = np.nonzero(~keep)[0]
    top_dropped = dropped[(p[dropped] == NONE) | keep[np.maximum(p[dropped], 0)]]
    acc: dict[int, list[float]] = {}
    for i in top_dropped.tolist():
        a = acc.setdefault(int(p[i]), [0.0, 0])
        a[0] += float(tree.total_ms[i])
        a[1] += int(tree.total_samples[i])
    for par, (ms, cnt) in sorted(acc.items()):
        parent.append(NONE if par == NONE else int(new_id[par]))
        function.append(other_fn)
        self_ms.append(ms)
        total_ms.append(ms)
        self_n.append(cnt)
        total_n.append(cnt)
    return CallTree(
        functions=functions, parent=np.asarray(parent, np.int64),
        function=np.asarray(function, np.int64), self_ms=np.asarray(self_ms),
        total_ms=np.asarray(total_ms), self_samples=np.asarray(self_n, np.int64),
        total_samples=np.asarray(total_n, np.int64), total_time=tree.total_time,
    )


# ---- diff ------------------------------------------------------------------------------------

MIN_TRACES = 5
MIN_SAMPLES = 1000


def check_evidence(sel: Selection, side: str, min_traces: int, min_samples: int) -> None:
    """Enough evidence on one side of a diff (`side`: its name, the refusal's subject):
    `min_traces` counts page loads, not uploads
    (the option keeps its old name): the chunks of one page load (one `pageLoad` id) are one
    user's visit, not several independent traces, as `regressions` tests them."""
    loads = sel.uploads.page_loads()
    if loads < min_traces or sel.samples < min_samples:
        # The upload count only when it differs: chunked uploads are why the two part.
        ups = "" if sel.traces == loads else f" (in {plural(sel.traces, 'upload')})"
        said = plural(loads, "page load")
        if sel.uploads.page_loads_estimated():
            # From a rollup cell's HyperLogLog sketch: the count it is judged on is an
            # estimate, which the reader should know before widening filters for it.
            from ..store.tables.view import HLL_ERROR

            said = (f"~{said} (an estimate from the rollups' page-load sketch: standard "
                    f"error {100 * HLL_ERROR:.1f} %)")
        raise UsageError(
            f"{side} matches {said}{ups} and "
            f"{plural(sel.samples, 'sample')}; each side needs at least "
            f"{plural(min_traces, 'page load')} and {plural(min_samples, 'sample')} (widen "
            "the filters, wait for more uploads, or lower --min-traces/--min-samples)"
        )


def _trace_function_keys(tr: ProfilerTrace) -> list[FunctionKey]:
    res = tr.resources
    return [
        FunctionKey(f.name, None if f.resource_id is None else res[f.resource_id], f.line,
                    f.column)
        for f in tr.frames
    ]


def resample_spec(sel: Selection, keys: list[NameKey],
                  match: Callable[[str | None], str | None], reps: int, seed: int
                  ) -> Resample:
    """What each weights row of `sel` adds to which key (`engine.Resample`).

    Keys are the diff's rows: functions by name and `match`ed resource (the matcher the
    diff itself used), and the samples with no JavaScript by the names `report` gives
    them ((idle), (garbage collector), ...), so every row gets its own interval. A stored
    stack adds its time to the self of its leaf's key and to the total of every key on
    its path, once each (as `summarize` counts). The table is per release and stack,
    never per upload."""
    pos = {k: i for i, k in enumerate(keys)}
    sk_l, j_l, self_l = [], [], []
    for code in range(NONE, len(MARKERS)):
        j = pos.get(NameKey(no_stack_name(code), None))
        if j is not None:
            sk_l.append(np.asarray([-2 - code], np.int64))
            j_l.append(np.asarray([j], np.int64))
            self_l.append(np.ones(1, bool))
    for ri, rkey in enumerate(sel.uploads.rkeys):
        rel = sel.releases[rkey]
        tr = rel.trace
        if not tr.num_stacks or not keys:
            continue
        fkey = np.asarray(
            [key_index(pos, k.name, match(k.resource), k.line, k.column)
             for k in _trace_function_keys(tr)]
            or [-1], np.int64
        )
        node_key = fkey[tr.stack_frame]
        first = ~repeats_an_ancestor(tr.stack_parent, node_key) & (node_key >= 0)
        stored = (np.arange(tr.num_stacks, dtype=np.int64) if rel.stack_map is None
                  else np.arange(len(rel.stack_map) - 1, dtype=np.int64))
        st = stored if rel.stack_map is None else rel.stack_map[stored]
        leaf = np.where(st >= 0, node_key[np.maximum(st, 0)], -1)
        cur = st.copy()
        active = np.nonzero(cur >= 0)[0]
        while len(active):  # up each stored stack's path, one level per round
            node = cur[active]
            add = first[node]
            on = active[add]
            jj = node_key[node[add]]
            sk_l.append((np.int64(ri) << 32) + stored[on])
            j_l.append(jj)
            self_l.append(leaf[on] == jj)
            cur[active] = tr.stack_parent[node]
            active = active[cur[active] >= 0]
    sk = np.concatenate(sk_l) if sk_l else np.zeros(0, np.int64)
    j = np.concatenate(j_l) if j_l else np.zeros(0, np.int64)
    is_self = np.concatenate(self_l) if self_l else np.zeros(0, bool)
    order = np.lexsort((j, sk))
    sk, j, is_self = sk[order], j[order], is_self[order]
    first_row = np.ones(len(sk), bool)
    first_row[1:] = sk[1:] != sk[:-1]
    return Resample(sk, j, is_self.astype(np.int8), np.ones(len(sk), np.int8),
                    first_row.astype(np.int8), len(keys), reps, seed)


def trace_shares(engine: Engine, snap: Snapshot, sel: Selection, keys: list[NameKey],
                 match: Callable[[str | None], str | None]
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per trace: self and total ms of each of `keys` (traces x keys), and all its ms, as
    the engine sums them per (upload, key) (`resample_spec`'s rule): what `fleet
    regressions` reads per trace. Memory: uploads x keys."""
    spec = resample_spec(sel, keys, match, 0, 0)
    if sel.per_trace is not None:  # --during: its rows are in memory already
        rows: StackRows = sel.per_trace
        per = per_upload_key(rows.uk, stack_key(rows.ri, rows.stack_id, rows.marker),
                             rows.weight_ns, spec)
    else:
        per = engine.per_upload_key(snap, sel.uploads, spec)
    U, K = len(sel.uploads), len(keys)
    ti = np.searchsorted(sel.uploads.uk, per["uk"])
    on = per["j"] >= 0
    self_m = np.zeros((U, K))
    total_m = np.zeros((U, K))
    self_m[ti[on], per["j"][on]] = per["s"][on] / NS_PER_MS
    total_m[ti[on], per["j"][on]] = per["t"][on] / NS_PER_MS
    all_ms = np.bincount(ti, weights=per["a"], minlength=U) / NS_PER_MS
    return self_m, total_m, all_ms


@dataclass
class Interval:
    lo: float
    hi: float

    def excludes_zero(self) -> bool:
        return self.lo > 0 or self.hi < 0


def resample(engine: Engine, snap: Snapshot, sel: Selection, spec: Resample) -> Draws:
    """`sel`'s weighted sums per resample, by its engine (or, for `--during`'s
    rows, which are in memory already, by the same steps in numpy)."""
    if sel.per_trace is not None:
        rows: StackRows = sel.per_trace
        return resample_rows(rows.uk, stack_key(rows.ri, rows.stack_id, rows.marker),
                             rows.weight_ns, spec)
    return engine.resample(snap, sel.uploads, spec)


def bootstrap(engine: Engine, snap: Snapshot, base: Selection, new: Selection,
              keys: list[NameKey], match: Callable[[str | None], str | None],
              reps: int = 200, seed: int = 0) -> dict[str, np.ndarray]:
    """95 % intervals of each key's change (pp of share, and relative %) by resampling
    traces on both sides: the Bayesian bootstrap, each trace weighted by an Exp(1) draw
    per resample (`engine.Resample`), summed in the engine (`Engine.resample`), so
    memory holds resamples x keys whatever the number of traces. Deterministic for a
    seed."""
    out = {}
    draws = {}
    for side, (name, sel) in enumerate((("base", base), ("new", new))):
        # each side its own stream: a trace on both sides is not drawn alike on both
        got = resample(engine, snap, sel, resample_spec(sel, keys, match, reps,
                                                        2 * seed + side))
        den = got.all_us.astype(np.float64)
        den[den == 0] = np.nan
        draws[name] = (100.0 * got.self_us / den[:, None], 100.0 * got.total_us / den[:, None])
    for j, metric in enumerate(("self", "total")):
        b, n = draws["base"][j], draws["new"][j]
        d = n - b
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.where(b > 0, 100.0 * d / b, np.nan)
        out[f"{metric}_pp"] = _interval(d, len(keys))
        out[f"{metric}_rel"] = _interval(rel, len(keys))
    return out


def _interval(draws: np.ndarray, k: int) -> np.ndarray:
    """2.5th and 97.5th percentiles per column, NaN where a column has no finite draw."""
    out = np.full((2, k), np.nan)
    ok = np.isfinite(draws).any(axis=0) if len(draws) else np.zeros(k, bool)
    if ok.any():
        out[:, ok] = np.nanpercentile(draws[:, ok], [2.5, 97.5], axis=0)
    return out


def diff(engine: Engine, snap: Snapshot, base: Selection, new: Selection,
         keys_for: Callable[[ProfileDiff], list[NameKey]], reps: int = 200,
         exact_resources: bool = False,
         intervals: Callable[[list[NameKey], Any], dict | None] | None = None
         ) -> tuple[ProfileDiff, list[NameKey], dict[str, np.ndarray], ResourceMatcher]:
    """The diff of two selections, its rows' keys (`keys_for`) and their 95 % intervals:
    by the bootstrap over uploads, or by `intervals(keys, match)` (the rollups' moments;
    None from it: `NeedRows`)."""
    from .releases import matcher

    match = matcher(_resources(base.recording), _resources(new.recording), exact_resources)
    d = diff_profiles(base.recording, new.recording, match=match)
    keys = keys_for(d)
    if intervals is not None:
        # from the rollups' moments (fleet/rollups.py), or the per-upload rows must answer
        ci = intervals(keys, match) if keys and reps else {}
        if ci is None:
            raise NeedRows
        return d, keys, ci, match
    ci = bootstrap(engine, snap, base, new, keys, match, reps) if keys else {}
    return d, keys, ci, match


class NeedRows(Exception):
    """A diff read from the rollups whose intervals they cannot give: read per upload."""


def unmatched_share(d: ProfileDiff) -> tuple[float, float]:
    """The share (percent) of BASE's time in rows only BASE has, and of NEW's in rows only
    NEW has: most of either means the two sides did not match, not that the code changed."""
    return d.unmatched_share()


def _resources(rec: Recording) -> set[str]:
    return {r for t in rec.tracks for r in t.trace.resources}
