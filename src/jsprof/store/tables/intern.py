"""Interning: one parsed upload -> a release's frame and stack ids and its rows.

A release (app, release) has one frames table and one stacks table (a parent-pointer tree)
that every upload of it shares; each upload adds its weights (per stack and marker), the
frames present with their self time, and its samples. `write_release_parts` and
`write_upload_parts` turn a batch of them into parts.

The time rule is applied here, per trace, before any filter or merge: a sample weighs the
gap to the next sample of its trace, the last one the trace's `sampleInterval` from its
metadata, else the trace's median gap; no sample weighs more than 20 intervals, at least
100 ms (`trace.gap_cap`), the rest of a longer gap is the upload's `lost_ms`. Weights are
kept as integer nanoseconds so that sums are exact and independent of the order an engine
adds them in.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from ...trace import NONE, weights_and_lost
from ..cursor import segment_span
from .parts import day_of, new_part, new_parts_streamed, read_part, schemas, verify_part
from .perload import PriorSelf, function_hash, upload_keys
from .perload import batch_rows as perload_rows
from .rollup import (
    CELL_COLS,
    ROLLUP_KINDS,
    group_key,
    load_hash,
    rollup_columns,
    upload_moments,
)
from .timeroll import TIME_KINDS, time_parts
from .vitals import Prior, batch_rows, counts_left_out

log = logging.getLogger("jsprof.store")

NS_PER_MS = 1_000_000


def release_key(app: str, release: str) -> str:
    """A short, path-safe key for (app, release): the directory of its tables."""
    return hashlib.sha1(f"{app}\0{release}".encode()).hexdigest()[:16]


@dataclass
class Release:
    """A release's frame and stack tables: those already committed plus this batch's."""

    app: str
    release: str
    frame_ids: dict[tuple, int] = field(default_factory=dict)
    stack_ids: dict[tuple[int, int], int] = field(default_factory=dict)
    stack_parent: list[int] = field(default_factory=list)
    stack_frame: list[int] = field(default_factory=list)
    n_frames_committed: int = 0
    n_stacks_committed: int = 0
    new_frames: list[tuple] = field(default_factory=list)
    weights: list[dict] = field(default_factory=list)
    upload_frames: list[dict] = field(default_factory=list)
    samples: list[dict] = field(default_factory=list)
    cells: list[dict] = field(default_factory=list)  # per upload: what the rollups need
    # receivedAt of the upload being added: its rows go to that day's parts
    cur_at: float | None = None
    # the manifest's frame/stack part entries this object holds (see _cached_release)
    loaded_frames: list = field(default_factory=list)
    loaded_stacks: list = field(default_factory=list)
    # per frame id: the smallest id of the frames the default script identity rule makes
    # one function with it (`rollup.frame_groups`, kept as frames come)
    groups: list[int] = field(default_factory=list)
    group_first: dict[tuple, int] = field(default_factory=dict)
    # per frame id: its function's key in rollup_perload (`perload.function_hash`)
    hashes: list[int] = field(default_factory=list)

    def frame(self, key: tuple) -> int:
        fid = self.frame_ids.get(key)
        if fid is None:
            fid = self.frame_ids[key] = len(self.frame_ids)
            self.new_frames.append(key)
            self.grouped(key, fid)
        return fid

    def grouped(self, key: tuple, fid: int) -> None:
        """Frame `fid` (the next id) in its function's group."""
        assert fid == len(self.groups), "frames must come in id order"
        gk = group_key(key)
        self.groups.append(self.group_first.setdefault(gk, fid))
        self.hashes.append(function_hash(*key[:4]))

    def stack(self, parent: int, frame: int) -> int:
        sid = self.stack_ids.get((parent, frame))
        if sid is None:
            sid = self.stack_ids[(parent, frame)] = len(self.stack_parent)
            self.stack_parent.append(parent)
            self.stack_frame.append(frame)
        return sid


# Releases interned by earlier runs in this process: (tables dir, rkey) -> Release, with
# the frame and stack parts it was built from. A long-lived collector compacts often; each
# run used to rebuild every touched release's frame/stack dicts from all its parts. Now a
# run reads only the parts committed since (by another process), or everything when the
# parts it was built from are no longer a prefix of the manifest's (tables rebuilt or the
# release pruned). Only used under the compaction lock; dropped when a run fails.
_cache: dict[tuple[str, str], Release] = {}
_CACHE_MAX_ROWS = 4_000_000  # frames + stacks kept: about 1 GB of Python objects at most


def cached_release(tdir: Path, rkey: str, entry: dict) -> Release:
    rel = _cache.pop((str(tdir), rkey), None)
    fparts, sparts = entry["parts"]["frames"], entry["parts"]["stacks"]
    if (
        rel is None
        or fparts[: len(rel.loaded_frames)] != rel.loaded_frames
        or sparts[: len(rel.loaded_stacks)] != rel.loaded_stacks
    ):
        return _load_release(tdir, rkey, entry)
    return _load_release(tdir, rkey, entry, rel)


def keep_releases(tdir: Path, releases: dict[str, Release], man: dict) -> None:
    for rkey, rel in releases.items():
        entry = man["releases"].get(rkey)
        if entry is None:
            continue
        rel.loaded_frames = list(entry["parts"]["frames"])
        rel.loaded_stacks = list(entry["parts"]["stacks"])
        _cache[(str(tdir), rkey)] = rel
    if sum(len(r.frame_ids) + len(r.stack_parent) for r in _cache.values()) > _CACHE_MAX_ROWS:
        _cache.clear()


def _load_release(
    tdir: Path, rkey: str, entry: dict, rel: Release | None = None
) -> Release:
    """The release's committed frames and stacks: all its parts, or (`rel` given) only
    those after the ones `rel` was built from."""
    import pyarrow.parquet as pq

    if rel is None:
        rel = Release(entry["app"], entry["release"])
    for part in entry["parts"]["frames"][len(rel.loaded_frames) :]:
        t = read_part(pq, verify_part(tdir, part), tdir).to_pydict()
        for fid, n, r, ln, c in zip(
            t["frame_id"], t["name"], t["resource"], t["line"], t["column"], strict=True
        ):
            rel.frame_ids[(n, r, ln, c)] = fid
            rel.grouped((n, r, ln, c), fid)
    for part in entry["parts"]["stacks"][len(rel.loaded_stacks) :]:
        t = read_part(pq, verify_part(tdir, part), tdir).to_pydict()
        for sid, p, f in zip(t["stack_id"], t["parent_id"], t["frame_id"], strict=True):
            assert sid == len(rel.stack_parent), "stack parts must be contiguous"
            rel.stack_ids[(p, f)] = sid
            rel.stack_parent.append(p)
            rel.stack_frame.append(f)
    rel.n_frames_committed = len(rel.frame_ids)
    rel.n_stacks_committed = len(rel.stack_parent)
    return rel

def _segment_sums(keys: np.ndarray, *values: np.ndarray) -> tuple[np.ndarray, ...]:
    """Unique keys and exact integer sums of each value column per key."""
    order = np.argsort(keys)  # the sums are of integers: any order within a key
    k = keys[order]
    starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]]) if len(k) else np.zeros(0, np.int64)
    out = [k[starts]]
    for v in values:
        out.append(np.add.reduceat(v[order], starts) if len(k) else v[:0])
    return tuple(out)


def number_of(v: Any) -> float | None:
    return float(v) if type(v) in (int, float) and np.isfinite(v) else None


def text_of(v: Any) -> str | None:
    return v if type(v) is str else None


def page_load_of(meta: dict) -> str | None:
    """The client's page-load id (`pageLoad`, a string or a whole number), else None: an
    upload without one is a page load of its own."""
    v = meta.get("pageLoad")
    if type(v) is int:
        return str(v)
    return v if type(v) is str and v else None


def upload_weights(track: Any, meta: dict) -> tuple[np.ndarray, float]:
    """The milliseconds each sample of one upload's track stands for, and its lost time:
    the one rule for an upload's weights, which the compactor stores and the queries that
    read raw records (`fleet/during.py`, `fleet/timecourse.py`) take again. The upload's
    `sampleInterval` when it is a positive, finite number (not a bool: JSON's `true` is
    no interval), else the track's own."""
    v = number_of(meta.get("sampleInterval"))
    return weights_and_lost(track.trace, v if v is not None and v > 0 else track.sample_interval)


def attributed(track: Any, meta: dict, w: np.ndarray, lines: Any = None) -> Any:
    """One upload track's trace with its busy samples attributed (analysis/busy.py: a
    stack-less sample inside a long animation frame of the upload's timeline is its script
    entry point's, or the frame's own, never `(idle)`): what the tables keep, so every
    query reads it without re-reading raw uploads. The frames are the upload's own (the
    collector checked them); a frame that ends after its chunk was sent is reported with
    the next chunk, and its samples in this one stay `(idle)` here (`--during` reads the
    whole page load's frames). The queries that read raw records (`fleet/during.py`,
    `fleet/timecourse.py`) call this too. `lines`: the release's script line starts
    (`script_lines.reader`), which place an entry point by its character offset."""
    from ...analysis.busy import attribute_trace
    from ...timeline import of_track

    t = meta.get("timeline")
    frames = list(t.get("longFrames") or ()) if isinstance(t, dict) else []
    frames += of_track(track).long_frames
    return attribute_trace(track.trace, frames, w, lines)[0]


def add_upload(rel: Release, uk: int, rec: Any, meta: dict, lines: Any = None
               ) -> tuple[int, float]:
    """Intern one upload's tracks into `rel`; queue its weights and frame rows.

    Returns (samples, total ms, lost ms: gaps beyond the weight cap, `trace.gap_cap`).
    """
    keys, samples, wns = [], [], []
    times, stacks, markers = [], [], []
    present: list[np.ndarray] = []  # per track: the frames on its sampled stacks
    leaves: list[np.ndarray] = []  # per sample: its stack's frame (NONE: no stack)
    lost_ms = 0.0
    for track in rec.tracks:
        tr = track.trace
        if tr.num_samples == 0:
            continue
        w, lost = upload_weights(track, meta)
        lost_ms += lost
        tr = attributed(track, meta, w, lines)
        res = tr.resources
        fmap = [
            rel.frame(
                (f.name, None if f.resource_id is None else res[f.resource_id], f.line, f.column)
            )
            for f in tr.frames
        ]
        smap = map_stacks(rel, tr.stack_parent, tr.stack_frame, fmap)
        st = smap[tr.sample_stack]  # NONE stays NONE through the last entry
        # the release frames on its sampled stacks, found in the trace's own (smaller)
        # stack table: a release stack's path is its trace stack's, mapped
        fm = np.asarray(fmap + [NONE], np.int64)
        present.append(fm[tr.stack_frame[on_path(tr.stack_parent, tr.sample_stack)]])
        leaf_of = fm[np.r_[tr.stack_frame, -1]]  # per trace stack (+ NONE): its frame
        leaves.append(leaf_of[tr.sample_stack])
        mk = (
            tr.sample_marker.astype(np.int64)
            if tr.sample_marker is not None
            else np.full(tr.num_samples, NONE, np.int64)
        )
        # One key per (stack, marker); markers are small codes, -1 for none.
        keys.append((st + 1) * 16 + (mk + 1))
        samples.append(np.ones(tr.num_samples, np.int64))
        wns.append(np.rint(w * NS_PER_MS).astype(np.int64))
        times.append(tr.sample_time)
        stacks.append(st)
        markers.append(mk)
    if not keys:
        return 0, 0.0, 0.0
    # Each sample as stored (its time on the upload's clock, its stack as attributed, its
    # weight): what the merged Time view and `--during` read, so no query reads raw uploads.
    rel.samples.append(
        {"uk": uk, "t": np.concatenate(times), "stack_id": np.concatenate(stacks),
         "marker": np.concatenate(markers).astype(np.int8), "weight_ns": np.concatenate(wns),
         "_at": rel.cur_at}
    )
    k, n, ns = _segment_sums(np.concatenate(keys), np.concatenate(samples), np.concatenate(wns))
    stack = k // 16 - 1
    marker = k % 16 - 1
    rel.weights.append(
        {"uk": uk, "stack_id": stack, "marker": marker, "samples": n, "weight_ns": ns,
         "_at": rel.cur_at}
    )
    # Frames present in this upload (anywhere on a sampled stack) and their self time.
    # Self time per leaf frame summed from the samples (integers: the same sums as from
    # the per-stack rows above, with no look-up in the release's stack table)
    js = stack >= 0
    fids = np.unique(np.concatenate(present))
    leaf = np.concatenate(leaves)
    on = leaf >= 0
    fk, fn, fns = _segment_sums(leaf[on], np.concatenate(samples)[on], np.concatenate(wns)[on])
    self_n = np.zeros(len(fids), np.int64)
    self_ns = np.zeros(len(fids), np.int64)
    at = np.searchsorted(fids, fk)  # a leaf's frame is on its stack: present
    self_n[at] = fn
    self_ns[at] = fns
    ik, in_, ins = _segment_sums(marker[~js], n[~js], ns[~js])
    none = np.full(len(ik), NONE, np.int64)
    rel.upload_frames.append(
        {
            "uk": uk,
            "frame_id": np.concatenate([fids, none]),
            "marker": np.concatenate([np.full(len(fids), NONE, np.int64), ik]),
            "self_samples": np.concatenate([self_n, in_]),
            "self_ns": np.concatenate([self_ns, ins]),
            "_at": rel.cur_at,
        }
    )
    return int(n.sum()), float(ns.sum()) / NS_PER_MS, lost_ms


def map_stacks(
    rel: Release, parent: np.ndarray, frame: np.ndarray, fmap: list[int]
) -> np.ndarray:
    """Per trace stack id, the release's stack id (plus a last NONE entry for samples).

    New release stacks get their ids in trace stack order, as `_map_stacks_walk` (the
    general walk) gives them. When every parent comes before its child (the readers
    check it for the jsprof format; builders make them so), one pass over plain lists
    does it: the per-stack numpy scalar reads and the walk were 3.7 s of the 8 s a tail
    of 500 field uploads took (issue 34)."""
    n = len(parent)
    par = np.asarray(parent, np.int64)
    if n and bool(((par < NONE) | (par >= np.arange(n))).any()):
        return _map_stacks_walk(rel, parent, frame, fmap)
    ids = rel.stack_ids
    sp, sf = rel.stack_parent, rel.stack_frame
    out = [NONE] * (n + 1)  # out[NONE] (the last) stays NONE: a root's parent
    for s, (p, f) in enumerate(zip(par.tolist(), frame.tolist(), strict=True)):
        key = (out[p], fmap[f])
        sid = ids.get(key)
        if sid is None:
            sid = ids[key] = len(sp)
            sp.append(key[0])
            sf.append(key[1])
        out[s] = sid
    return np.asarray(out, np.int64)


def _map_stacks_walk(
    rel: Release, parent: np.ndarray, frame: np.ndarray, fmap: list[int]
) -> np.ndarray:
    """`map_stacks` for any parent order: each stack walks up to a mapped ancestor."""
    n = len(parent)
    out = np.full(n + 1, NONE, np.int64)
    par = parent.tolist()
    fr = frame.tolist()
    for s in range(n):
        if out[s] != NONE:
            continue
        chain = []
        cur = s
        while cur != NONE and out[cur] == NONE and len(chain) <= n:
            chain.append(cur)
            cur = par[cur]
        up = NONE if cur == NONE else int(out[cur])
        for c in reversed(chain):
            up = rel.stack(up, fmap[fr[c]])
            out[c] = up
    return out


def on_path(parent: np.ndarray, sample_stack: np.ndarray) -> np.ndarray:
    """The trace stacks on the path of some sample's stack (itself or an ancestor), as a
    mask: one vectorised step per level, from the sampled stacks up."""
    par = np.asarray(parent, np.int64)
    mark = np.zeros(len(par) + 1, bool)  # the last: NONE's, the parent of a root
    new = np.zeros(len(par) + 1, bool)
    new[sample_stack] = True
    while True:
        new[-1] = False
        new &= ~mark
        cur = np.flatnonzero(new)
        if not len(cur):
            return mark[:-1]
        mark[cur] = True
        new[:] = False
        new[par[cur]] = True


# ---- a batch's rows as parts -----------------------------------------------------------------

def _concat_rows(rows: list[dict], cols: Iterable[str]) -> dict[str, np.ndarray]:
    """The rows' columns concatenated. Each row's arrays are taken out of it (`pop`) as
    their column is built, so the rows and their table are held at once one column at a
    time, not whole (a tail of 3 M samples held both: ~100 MB more at the peak)."""
    out = {}
    n = [len(r["marker"]) for r in rows]
    for c in cols:
        parts = [np.broadcast_to(np.asarray(r.pop(c)), k) for r, k in zip(rows, n, strict=True)]
        out[c] = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        del parts
    return out


def _shift(ids: np.ndarray, base: int) -> np.ndarray:
    """Ids moved up by `base`; NONE (-1: no parent, no stack, an idle row) stays NONE."""
    return np.where(ids >= 0, ids + base, ids) if base else ids


def write_release_parts(
    tdir: Path | None, rkey: str, rel: Release, part: int, frame_base: int = 0, stack_base: int = 0,
    prior: Callable[[str | None], Prior] | None = None,
    prior_self: Callable[[str | None], PriorSelf] | None = None,
) -> dict[str, list]:
    """Write this batch's new rows of one release; returns kind -> manifest entries.

    Frames and stacks are the release's dictionaries (needed by any time range): one part.
    Weights and upload frames go to one part per UTC day of their uploads' receivedAt.
    `frame_base`, `stack_base`: where `rel`'s own ids start in the release's tables (a
    query's tail, interned apart from the committed tables, continues their ids).
    `tdir` None: the parts are tables in memory (`read_tail`), nothing is written.
    `prior(day)`: the timelines of the chunks committed before this batch of the page
    loads it holds (`vitals.prior_timelines`), so rollup_vitals counts each page load once;
    `prior_self(day)`: their self ns per function (`perload.prior_self`), for rollup_perload.
    """
    sch = schemas()
    name = f"part-{part:06d}.parquet"
    written: dict[str, list] = {}
    if rel.new_frames:
        n0 = rel.n_frames_committed + frame_base
        cols = list(zip(*rel.new_frames, strict=True))
        path = f"frames/rkey={rkey}/{name}"
        written["frames"] = [new_part(tdir, path, {
            "frame_id": np.arange(n0, n0 + len(rel.new_frames), dtype=np.int64),
            "name": list(cols[0]),
            "resource": list(cols[1]),
            "line": list(cols[2]),
            "column": list(cols[3]),
        }, sch["frames"], len(rel.new_frames))]
    if len(rel.stack_parent) > rel.n_stacks_committed:
        s0 = rel.n_stacks_committed
        path = f"stacks/rkey={rkey}/{name}"
        written["stacks"] = [new_part(tdir, path, {
            "stack_id": np.arange(s0, len(rel.stack_parent), dtype=np.int64) + stack_base,
            "parent_id": _shift(np.asarray(rel.stack_parent[s0:], np.int64), stack_base),
            "frame_id": np.asarray(rel.stack_frame[s0:], np.int64) + frame_base,
        }, sch["stacks"], len(rel.stack_parent) - s0)]
    per_day: dict[tuple[str, str | None], dict] = {}
    time_parts_of: dict[str | None, dict[str, dict]] = {}  # day -> the Time view's parts
    for kind, rows in (("weights", rel.weights), ("upload_frames", rel.upload_frames),
                       ("samples", rel.samples)):
        # The rows are consumed (their arrays move into the parts): the caller drops
        # them after this anyway, and a tail's samples are the bulk of what it holds
        by_day: dict[str | None, list[dict]] = {}
        for r in rows:
            by_day.setdefault(day_of(r.get("_at")), []).append(r)
        rows.clear()
        cols = [f.name for f in sch[kind]]
        for day in sorted(by_day, key=lambda d: d or ""):
            group = by_day.pop(day)
            times = [r.get("_at") for r in group]
            data = _concat_rows(group, cols)
            del group
            data["marker"] = data["marker"].astype(np.int8)
            if kind in ("weights", "samples"):
                data["stack_id"] = _shift(data["stack_id"], stack_base)
            else:
                data["frame_id"] = _shift(data["frame_id"], frame_base)
            if kind != "samples":  # the rollups below read weights and upload frames
                per_day[(kind, day)] = data
            sub = f"{day}/" if day else ""
            if kind == "samples":  # and the Time view's sums of them (tables/timeroll.py),
                # written a grid at a time as they are made (a batch's grids held together
                # were most of a compaction's peak: issue 34)
                mine = [c for c in rel.cells if day_of(c.get("_at")) == day]
                dropped, pieces = time_parts(
                    {k: [c[k] for c in mine] for k in ("uk", "id", "route", "env", "page_load")},
                    data, load_hash)
                if dropped:
                    log.warning("%s: %d samples with a time that is not finite left out "
                                "of the Time view's rollups", rkey, dropped)
                uks = [int(c["uk"]) for c in mine]
                time_parts_of[day] = new_parts_streamed(
                    tdir, {k: f"{k}/rkey={rkey}/{sub}{name}" for k in TIME_KINDS}, pieces,
                    sch, day, [c.get("_at") for c in mine],
                    (min(uks), max(uks)) if uks else None)
                del pieces, mine
            path = f"{kind}/rkey={rkey}/{sub}{name}"
            written.setdefault(kind, []).append(new_part(
                tdir, path, data, sch[kind], len(data["uk"]), day, times))
            del data
    # The rollups of the same rows (tables/rollup.py), one part per kind and day; frame ids
    # as stored (from `frame_base`), each group's too
    groups = np.concatenate([np.full(frame_base, -1, np.int64),
                             np.asarray(rel.groups, np.int64) + frame_base])
    parent = np.asarray(rel.stack_parent, np.int64)
    sframe = np.asarray(rel.stack_frame, np.int64)
    # rollup_moments keys by those groups too (format 12: by place, issue 32)
    own = np.asarray(rel.groups, np.int64)
    cells: dict[str | None, list[dict]] = {}
    for c in rel.cells:
        cells.setdefault(day_of(c.get("_at")), []).append(c)
    for day in sorted(cells, key=lambda d: d or ""):
        group = cells[day]
        up = {k: [c[k] for c in group] for k in CELL_COLS}
        w = per_day.get(("weights", day), _no_rows(sch["weights"]))
        st = np.asarray(w["stack_id"], np.int64)
        m = upload_moments(w["uk"], np.where(st >= 0, st - stack_base, st), w["marker"],
                           w["weight_ns"], parent, sframe, own)
        m["key"] = np.where(m["key"] >= 0, m["key"] + frame_base, m["key"])
        got = rollup_columns(up, w, per_day.get(("upload_frames", day),
                                                _no_rows(sch["upload_frames"])), groups, m)
        vit = {k: [c[k] for c in group] for k in ("route", "env", "page_load", "timeline")}
        pr = prior(day) if prior is not None else None
        if tdir is not None:
            got["rollup_vitals"] = batch_rows(vit, pr)
        # per function and page load (tables/perload.py): keys by hash, the same in a tail
        uf = per_day.get(("upload_frames", day), _no_rows(sch["upload_frames"]))
        hashes = np.asarray(rel.hashes, np.int64)
        per = upload_keys(uf["uk"], uf["frame_id"], uf["marker"], uf["self_ns"], hashes,
                          frame_base)
        pl = {k: [c[k] for c in group] for k in ("uk", "id", "route", "env", "page_load")}
        ps = prior_self(day) if prior_self is not None else None
        if tdir is not None:
            got["rollup_perload"], got["rollup_examples"] = perload_rows(pl, per, ps)
        else:  # the tail: its examples need no earlier chunk
            got["rollup_examples"] = perload_rows(pl, per, None)[1]
        sub = f"{day}/" if day else ""
        # rollup_vitals' upload keys, as the Time view's: a query pinned below later
        # uploads reads the parts wholly below its pin (fleet/vitals.py `rolled`)
        uks = [int(c["uk"]) for c in group]
        span = (min(uks), max(uks)) if uks else None
        for kind in ROLLUP_KINDS:
            if kind in TIME_KINDS and day in time_parts_of:  # written with the samples
                written.setdefault(kind, []).append(time_parts_of[day][kind])
                continue
            if kind in TIME_KINDS:  # uploads of the day without samples
                got[kind] = _no_rows(sch[kind]) | {"route": [], "env": []}
            if kind in ("rollup_vitals", "rollup_perload") and tdir is None:
                # A query's tail: made when a query reads it (`part_files`), so that the
                # others need not look for its page loads' earlier chunks
                e = new_part(None, f"{kind}/rkey={rkey}/{sub}{name}",
                             {f.name: [] for f in sch[kind]}, sch[kind], 0, day,
                             [c.get("_at") for c in group],
                             span if kind == "rollup_vitals" else None)
                e.pop("table")
                e["build"] = (partial(vitals_table, vit, pr, sch[kind])
                              if kind == "rollup_vitals" else
                              partial(perload_table, pl, per, ps, sch[kind]))
                written.setdefault(kind, []).append(
                    counts_left_out(e) if kind == "rollup_vitals" else e)
                continue
            data = got[kind]
            e = new_part(
                tdir, f"{kind}/rkey={rkey}/{sub}{name}", data, sch[kind], len(data["route"]),
                day, [c.get("_at") for c in group],
                span if kind == "rollup_vitals" else None,
            )
            written.setdefault(kind, []).append(
                counts_left_out(e) if kind == "rollup_vitals" else e)
    return written


def vitals_table(up: dict, prior: Prior | None, schema: Any) -> Any:
    import pyarrow as pa

    return pa.table(batch_rows(up, prior), schema=schema)


def perload_table(up: dict, per: dict, prior: PriorSelf | None, schema: Any) -> Any:
    import pyarrow as pa

    return pa.table(perload_rows(up, per, prior)[0], schema=schema)


def _no_rows(schema: Any) -> dict[str, np.ndarray]:
    return {f.name: np.zeros(0, np.int64) for f in schema}


def upload_row(rel: Release, uk: int, upload_id: str, rkey: str, meta: dict, rec: Any,
               lines: Any = None) -> dict:
    """Intern one parsed upload into `rel` (`add_upload`) and return its uploads-table row."""
    n, total_ms, lost_ms = add_upload(rel, uk, rec, meta, lines)
    rel.cells.append({
        "uk": uk, "id": upload_id, "route": text_of(meta.get("route")),
        "env": text_of(meta.get("env")),
        "sample_interval": number_of(meta.get("sampleInterval")),
        "page_load": page_load_of(meta), "samples": n, "lost_ms": lost_ms, "_at": rel.cur_at,
        "timeline": meta.get("timeline") if isinstance(meta.get("timeline"), dict) else None,
    })
    return {
        "uk": uk,
        "id": upload_id,
        "app": rel.app,
        "release": rel.release,
        "rkey": rkey,
        "route": text_of(meta.get("route")),
        "env": text_of(meta.get("env")),
        "received_at": number_of(meta.get("receivedAt")),
        "user_agent": text_of(meta.get("userAgent")),
        "sample_interval": number_of(meta.get("sampleInterval")),
        "meta": orjson.dumps(meta, option=orjson.OPT_SORT_KEYS).decode(),
        "samples": n,
        "total_ms": total_ms,
        "lost_ms": lost_ms,
        "page_load": page_load_of(meta),
    }


def write_upload_parts(tdir: Path | None, rows: list[dict], part: int) -> list[dict]:
    """The uploads-table parts of `rows`: one per release and UTC day; manifest entries."""
    sch = schemas()["uploads"]
    groups: dict[tuple[str, str | None], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["rkey"], day_of(r["received_at"])), []).append(r)
    out = []
    for (rkey, day), group in sorted(groups.items(), key=lambda g: (g[0][0], g[0][1] or "")):
        cols = {f.name: [r[f.name] for r in group] for f in sch}
        sub = f"{day}/" if day else ""
        path = f"uploads/{rkey}/{sub}part-{part:06d}.parquet"
        e = new_part(tdir, path, cols, sch, len(group), day, [r["received_at"] for r in group])
        e["rkey"] = rkey
        # The first and last segment names its uploads came from (the compactor's rows
        # say, a query's tail's do not): on a bucket, names sort by their put's time, so
        # `GET /v1/traces/{id}` lists only the segment objects between them
        # (objstore.find_upload), never the bucket's whole history.
        segs = [r.get("_segment") for r in group]
        if all(segs):
            e["segments"] = segment_span(segs)
        out.append(e)
    return out


def follow_merge(tdir: Path, man: dict, merged: dict[str, set[str]]) -> None:
    """A release kept in memory (`_cache`) was built from parts now merged: it holds the
    same rows, so it now stands for the merged parts (else the next run would rebuild it
    from every part); dropped when it had not read all of them. Only the merged kinds'
    lists are replaced: the other's may hold parts another process committed since this
    one read it (a `jsprof fleet --store` beside the collector), which the next run reads
    as its list's new tail; marking them read would hand out their ids again."""
    for rkey, kinds in merged.items():
        rel = _cache.get((str(tdir), rkey))
        if rel is None:
            continue
        entry = man["releases"][rkey]
        n = {"frames": rel.n_frames_committed, "stacks": rel.n_stacks_committed}
        have = {"frames": entry["frames"], "stacks": entry["stacks"]}
        if any(n[k] != have[k] for k in kinds):
            _cache.pop((str(tdir), rkey), None)
            continue
        if "frames" in kinds:
            rel.loaded_frames = list(entry["parts"]["frames"])
        if "stacks" in kinds:
            rel.loaded_stacks = list(entry["parts"]["stacks"])


def forget(tdir: Path | None = None) -> None:
    """Drop the releases kept in memory for `tdir`'s tables (None: every store's)."""
    for key in [k for k in _cache if tdir is None or k[0] == str(tdir)]:
        del _cache[key]
