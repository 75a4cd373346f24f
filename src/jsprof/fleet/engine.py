"""The query plan, run by an engine: DuckDB in process (default) or Dask on a cluster.

Both run the same three steps over the store's Parquet tables and hand back the same
small, sorted numpy columns; everything after that (trees, symbolication, quantiles) is
one shared piece of client code, so the engines give identical results. Weights are
integer nanoseconds, so the sums do not depend on the order an engine adds them in.

  1. uploads  : the uploads table filtered (app, release, route glob, env, time, meta)
  2. stacks   : weights of those uploads, summed per (release, stack, marker)
  3. per trace: upload_frames rows (frames present, self ns) for `top`; for `diff`'s
                intervals, the resampling itself (`resample`): a random weight per
                upload and resample drawn and summed in the engine, so what comes back
                is resamples x keys, whatever the number of uploads
"""

from __future__ import annotations

import json
import math
import operator
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import JsprofError, UsageError
from .filters import Filters, glob_regex, meta_matches, where_number

UPLOAD_COLS = ("uk", "id", "rkey", "release", "received_at", "samples", "total_ms", "lost_ms",
               "sample_interval", "page_load")


@dataclass
class Uploads:
    uk: np.ndarray
    id: list[str]
    rkey: list[str]
    release: list[str]
    received_at: np.ndarray
    samples: np.ndarray
    total_ms: np.ndarray
    lost_ms: np.ndarray  # per upload: gap time beyond the weight cap (`trace.gap_cap`)
    sample_interval: np.ndarray  # per upload: the interval its client declared (NaN: none)
    page_load: list[str | None]  # per upload: the client's page-load id (None: its own)

    def __post_init__(self) -> None:
        # Releases as small ints: the engines hand back `ri`, not strings, per row.
        self.rkeys = sorted(set(self.rkey))
        pos = {k: i for i, k in enumerate(self.rkeys)}
        self.ri = np.asarray([pos[k] for k in self.rkey], np.int64)

    def __len__(self) -> int:
        return len(self.uk)

    @property
    def count(self) -> np.ndarray:
        """Uploads per row: one (`fleet.rollups.Rolled`'s rows stand for several)."""
        return np.ones(len(self.uk), np.int64)

    def page_loads(self) -> int:
        """Page loads: distinct page-load ids, and one per upload without an id."""
        ids = {p for p in self.page_load if p is not None}
        return len(ids) + sum(1 for p in self.page_load if p is None)

    def page_loads_estimated(self) -> bool:
        """Whether `page_loads` is an estimate: never, counted from the uploads' ids."""
        return False

    def page_load_index(self) -> np.ndarray:
        """Per upload: the index of its page load (0 .. page_loads() - 1, in order of first
        upload), chunks with one page-load id sharing one; an upload without an id is a
        page load of its own."""
        pos: dict[tuple[str, object], int] = {}
        return np.asarray([pos.setdefault(("load", p) if p is not None else ("upload", i),
                                          len(pos))
                           for i, p in enumerate(self.page_load)], np.int64)

    def subset(self, keep: np.ndarray) -> Uploads:
        idx = np.nonzero(keep)[0].tolist()
        return Uploads(
            self.uk[keep], [self.id[i] for i in idx], [self.rkey[i] for i in idx],
            [self.release[i] for i in idx], self.received_at[keep], self.samples[keep],
            self.total_ms[keep], self.lost_ms[keep], self.sample_interval[keep],
            [self.page_load[i] for i in idx],
        )


@dataclass
class StackRows:
    """(release index, stack_id, marker) -> samples, weight_ns; per trace when `uk` is set
    (`--during`'s rows), per group of uploads when `group` is."""

    ri: np.ndarray
    stack_id: np.ndarray
    marker: np.ndarray
    samples: np.ndarray
    weight_ns: np.ndarray
    uk: np.ndarray | None = None
    group: np.ndarray | None = None


@dataclass
class Want:
    """(release index, stored frame id) pairs a query needs per-trace rows for."""

    ri: np.ndarray
    frame_id: np.ndarray


@dataclass
class FrameRows:
    uk: np.ndarray
    ri: np.ndarray
    frame_id: np.ndarray
    marker: np.ndarray
    self_ns: np.ndarray


@dataclass
class Resample:
    """What `diff`'s bootstrap sums in the engine: per resample and key, the self and total
    time of the uploads, each upload weighted by an Exp(1) draw (`WEIGHTS`): the Bayesian
    bootstrap, whose shares (ratios, so the weights' sum cancels) are those of Dirichlet
    weights, as close to resampling traces with replacement as that is. The weights are
    drawn independently per upload and resample, so a resample is a sum the engine
    streams, never a draw of `uploads` indices held in memory. (Poisson(1) counts, the
    other streaming bootstrap, let the resample's size vary too: with 8 traces a side
    its intervals were far wider than resampling's, the weight-0 tail too heavy.)

    Weights rows are keyed by `stack_key` (release index and stored stack id, or the
    marker of a sample with no stack). `sk` (sorted) -> `key` (0..keys-1), `is_self` (the
    key is the stack's leaf function), `is_total` (on its path, counted once), `first` (1
    on one row per sk: a row's weight counts once in all time). A row whose sk is not
    listed counts in all time only. Draws depend on (seed, upload key, resample) alone:
    deterministic, and the same on every engine."""

    sk: np.ndarray
    key: np.ndarray
    is_self: np.ndarray
    is_total: np.ndarray
    first: np.ndarray
    keys: int
    reps: int
    seed: int

    def rep_hash(self) -> np.ndarray:
        return fmix32(fmix32(np.arange(self.reps, dtype=np.uint64)) ^ _seed32(self.seed, 1))

    def upload_hash(self, uk: np.ndarray) -> np.ndarray:
        u = np.asarray(uk, np.int64).view(np.uint64)
        return fmix32(fmix32((u >> np.uint64(32)) ^ _seed32(self.seed, 0)) ^ (u & _M32))

    def empty(self) -> Draws:
        z = np.zeros((self.reps, self.keys), np.int64)
        return Draws(z, z.copy(), np.zeros(self.reps, np.int64))


@dataclass
class Draws:
    """Per resample: self and total µs of each key (reps x keys), and all µs (reps)."""

    self_us: np.ndarray
    total_us: np.ndarray
    all_us: np.ndarray

    def __add__(self, other: Draws) -> Draws:
        return Draws(self.self_us + other.self_us, self.total_us + other.total_us,
                     self.all_us + other.all_us)


_M32 = np.uint64(0xFFFFFFFF)
# Exp(1) by inversion, as whole numbers: the top 12 bits of a 32-bit hash pick one of 4,096
# equally likely quantiles (bin middles) of Exp(1), in 1/256ths. Integers, so the sums are
# exact and every engine adds the same bits; mean 1.000 and variance 0.998 (the tail past
# 9.0 is folded into the last bin).
WEIGHT_BITS = 12
WEIGHT_SCALE = 256
WEIGHTS = tuple(
    int(round(-math.log((i + 0.5) / 2**WEIGHT_BITS) * WEIGHT_SCALE))
    for i in range(2**WEIGHT_BITS)
)
# Keys per resampling query: one column of sums per key and kind, so a block's row is wide
# but the rows stay uploads x resamples (the per-row cost of a GROUP BY is what counts).
KEY_BLOCK = 32


def fmix32(h: np.ndarray) -> np.ndarray:
    """MurmurHash3's 32-bit finaliser on uint64 lanes holding 32-bit values (the SQL in
    `DuckEngine.resample` computes the same, bit for bit)."""
    h = h ^ (h >> np.uint64(16))
    h = (h * np.uint64(0x85EBCA6B)) & _M32
    h = h ^ (h >> np.uint64(13))
    h = (h * np.uint64(0xC2B2AE35)) & _M32
    return h ^ (h >> np.uint64(16))


def _seed32(seed: int, lane: int) -> np.uint64:
    x = np.asarray([(int(seed) * 2 + lane) & 0xFFFFFFFF], np.uint64)
    return np.uint64(fmix32(fmix32(x) ^ np.uint64(0x9E3779B9))[0])


def weight_draws(upload_hash: np.ndarray, rep_hash: np.ndarray) -> np.ndarray:
    """uploads x resamples weights (`WEIGHTS`, int): only ever for a bounded block."""
    h = fmix32(upload_hash[:, None] ^ rep_hash[None, :])
    return np.asarray(WEIGHTS, np.int64)[(h >> np.uint64(32 - WEIGHT_BITS)).astype(np.int64)]


def stack_key(ri: np.ndarray, stack_id: np.ndarray, marker: np.ndarray) -> np.ndarray:
    """A weights row's key in `Resample.sk`: release and stack, or its marker (no stack)."""
    return np.where(stack_id >= 0, (np.asarray(ri, np.int64) << 32) + stack_id,
                    -2 - np.asarray(marker, np.int64))


def per_upload_key(uk: np.ndarray, sk: np.ndarray, weight_ns: np.ndarray, spec: Resample
                   ) -> dict[str, np.ndarray]:
    """Weights rows -> ns summed per (upload, key): `s` self, `t` total, `a` all time; key
    -1 holds the time on no key. What DuckDB's `per` table holds, for rows in memory."""
    if not len(sk):
        z = np.zeros(0, np.int64)
        return {"uk": z, "j": z, "s": z, "t": z, "a": z}
    lo = np.searchsorted(spec.sk, sk, "left")
    cnt = np.searchsorted(spec.sk, sk, "right") - lo
    has = cnt > 0
    n_of = np.where(has, cnt, 1)  # a row on no key stays one row, of key -1
    row = np.repeat(np.arange(len(sk)), n_of)
    start = np.cumsum(n_of) - n_of
    ci = np.repeat(lo, n_of) + (np.arange(len(row)) - np.repeat(start, n_of))
    hit = has[row]
    ci = np.where(hit, ci, 0)

    def col(c: np.ndarray, miss: int) -> np.ndarray:
        return np.where(hit, c[ci], miss) if len(c) else np.full(len(row), miss, np.int64)

    w = np.asarray(weight_ns, np.int64)[row]
    pair = np.stack([np.asarray(uk, np.int64)[row], col(spec.key, -1)], axis=1)
    uniq, inv = np.unique(pair, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    out = {"uk": uniq[:, 0].copy(), "j": uniq[:, 1].copy()}
    for name, c, miss in (("s", spec.is_self, 0), ("t", spec.is_total, 0), ("a", spec.first, 1)):
        v = np.zeros(len(uniq), np.int64)
        np.add.at(v, inv, w * col(c, miss))  # integers: exact, in any order
        out[name] = v
    return out


def to_us(ns: np.ndarray) -> np.ndarray:
    """ns -> whole µs (half up), as DuckDB's `(ns + 500) // 1000`: the resampled sums are
    then whole numbers in float64, exact in any order (below 2**53: a selection's time
    x WEIGHT_SCALE, up to a year of samples), so every engine gets the same bits."""
    return (np.asarray(ns, np.int64) + 500) // 1000


_DRAWS = 1 << 19  # weights drawn at once (uploads x resamples of one block): ~4 MB


def draw_sums(per: dict[str, np.ndarray], spec: Resample) -> Draws:
    """Per (upload, key) µs sums (`per_upload_key`, then `to_us`; each pair complete) ->
    the weighted sums per resample (`Draws`), uploads taken a block at a time."""
    out = spec.empty()
    if not len(per["uk"]) or not spec.reps:
        return out
    K = spec.keys
    uu, ui = np.unique(per["uk"], return_inverse=True)
    ui = ui.reshape(-1)
    dense = np.zeros((len(uu), 2 * K + 1))
    on = per["j"] >= 0
    dense[ui[on], per["j"][on]] = per["s"][on]
    dense[ui[on], K + per["j"][on]] = per["t"][on]
    np.add.at(dense[:, 2 * K], ui, per["a"])
    hu = spec.upload_hash(uu)
    rh = spec.rep_hash()
    acc = np.zeros((spec.reps, 2 * K + 1), np.int64)
    cap = 2**53 / max(WEIGHTS)  # a block's float64 sums stay whole numbers, so exact
    block = max(1, _DRAWS // spec.reps)
    i = 0
    while i < len(uu):
        end = min(i + block, len(uu))
        end = i + max(1, int((np.cumsum(dense[i:end, 2 * K]) < cap).sum()))
        n = weight_draws(hu[i:end], rh).astype(np.float64)
        acc += np.rint(n.T @ dense[i:end]).astype(np.int64)
        i = end
    return Draws(acc[:, :K], acc[:, K:2 * K], acc[:, 2 * K])


def resample_rows(uk: np.ndarray, sk: np.ndarray, weight_ns: np.ndarray, spec: Resample
                  ) -> Draws:
    """`Resample` over weights rows in memory (`--during`'s per-trace rows)."""
    per = per_upload_key(uk, sk, weight_ns, spec)
    for c in "sta":
        per[c] = to_us(per[c])
    return draw_sums(per, spec)


class Snapshot:
    """The committed tables a query reads: the manifest read once."""

    def __init__(self, store_path: str | os.PathLike, manifest: dict,
                 live: Callable[[str], bool] | None = None,
                 pruned: dict[str, float] | None = None) -> None:
        from ..store.tables.view import tables_dir

        self.tdir = tables_dir(store_path)
        self.store_path = store_path
        self.manifest = manifest
        # What a prune removed may still have rows in the tables (parts not yet rewritten):
        # a query never counts it. `pruned`: the store's retention marks (app or "*" ->
        # receivedAt before which uploads are gone; `Store.pruned_before`, read after the
        # manifest); `live`: whether the store holds an id, asked only of rows without a
        # receivedAt. None: no filter.
        self.live = live
        self.pruned = pruned or {}
        # Damaged raw records (body or header failing its checksum) that no query can
        # count: those compaction listed in the manifest, plus those met in the tail.
        self.damaged = len(manifest.get("damaged", []))
        # Uploads stored but neither compacted nor read as the tail (over its cap).
        self.pending = 0
        # The store's URL when it is on object storage (its parts also in the bucket).
        self.remote: str | None = None
        # Only uploads with a key below this (None: all): an earlier query's upload set
        # (`pin`). Keys are given in the order uploads were stored and stay theirs through
        # compaction and merges, so "uk < N" is the same uploads whatever came since.
        self.uk_below: int | None = None
        # Per query's filters: the receivedAt of the uploads the pin left out of its
        # `uploads` (`keep_live`), whose days the rollups cannot answer (`rollups.plan`)
        self.past_pin: dict[Filters, np.ndarray] = {}

    def pin(self, uk_below: int) -> None:
        """Count only the uploads whose key is below `uk_below`: those of an earlier
        snapshot whose tables' `nextUk` it was (what a page read, for a view of that page
        read later). The rollups, which sum uploads past it, then answer only for the
        days that hold none of them (`rollups.plan`, from `past_pin`): the per-upload
        tables for the others."""
        self.uk_below = uk_below

    def pinned_out(self) -> bool:
        """Whether the pin leaves out uploads this snapshot holds (the rollups cannot
        answer then)."""
        return self.uk_below is not None and self.uk_below < int(self.manifest["nextUk"])

    def alive(self, ids: list[str], apps: list[str], received_at: np.ndarray) -> np.ndarray:
        """Per upload row: not pruned."""
        keep = np.ones(len(ids), bool)
        if not self.pruned and self.live is None:
            return keep
        every = self.pruned.get("*", -np.inf)
        for i, (app, at) in enumerate(zip(apps, received_at.tolist(), strict=True)):
            if at == at:  # a time: the marks say
                keep[i] = at >= max(every, self.pruned.get(app, -np.inf))
            elif self.live is not None:
                keep[i] = self.live(ids[i])
        return keep

    def keep_live(self, up: Uploads, app: str, f: Filters | None = None) -> Uploads:
        """`up` (all of `app`) without what was pruned and, for an id stored again after a
        prune, only its latest row; below the pin (`pin`) when there is one. `f`: the
        filters `up` was read with, under which the times of the uploads past the pin are
        kept (`past_pin`)."""
        if self.uk_below is not None and len(up) and int(up.uk.max()) >= self.uk_below:
            if f is not None:
                self.past_pin[f] = up.received_at[up.uk >= self.uk_below]
            up = up.subset(up.uk < self.uk_below)
        elif self.uk_below is not None and f is not None:
            self.past_pin[f] = up.received_at[:0]
        if not len(up):
            return up
        keep = self.alive(up.id, [app] * len(up), up.received_at)
        last: dict[str, int] = {}
        for i, uid in enumerate(up.id):
            last[uid] = i
        if len(last) < len(up):
            latest = np.zeros(len(up), bool)
            latest[list(last.values())] = True
            keep &= latest
        if keep.all():
            return up
        return up.subset(keep)

    def files(
        self, kind: str, rkeys: list[str] | None = None,
        since: float | None = None, until: float | None = None,
    ) -> list[Part]:
        """The parts of `kind` to read, checked against their manifest checksums; parts
        of other releases or wholly outside [since, until) are skipped unopened."""
        from ..store.tables.view import part_files

        return part_files(self.tdir, self.manifest, kind, rkeys, since, until)

    def upload_files(self, f: Filters) -> list[Part]:
        from ..store.tables.view import release_key

        rkeys = None if f.release is None else [release_key(f.app, f.release)]
        return self.files("uploads", rkeys, f.since, f.until)

    def row_files(self, kind: str, up: Uploads) -> list[Part]:
        """Per-upload parts (weights, upload_frames) that can hold rows of `up`."""
        t = up.received_at[np.isfinite(up.received_at)] if len(up.received_at) else None
        if t is None or not len(t):
            return self.files(kind, up.rkeys)
        return self.files(kind, up.rkeys, float(t.min()), float(t.max()) + 1.0)


def _uploads_sql(f: Filters) -> tuple[str, list[Any]]:
    where = ["app = ?"]
    params: list[Any] = [f.app]
    if f.release is not None:
        where.append("release = ?")
        params.append(f.release)
    if f.route is not None:
        where.append("regexp_full_match(coalesce(route, ''), ?, 's')")
        params.append(glob_regex(f.route))
    if f.env is not None:
        where.append("env = ?")
        params.append(f.env)
    if f.since is not None:
        where.append("received_at >= ?")
        params.append(f.since)
    if f.until is not None:
        where.append("received_at < ?")
        params.append(f.until)
    for key, value in f.where:
        # `filters.meta_matches`, in SQL: strings and true/false by text, null by the word,
        # numbers as float64 (never by their text: DuckDB and Python spell 1.5e300 apart).
        path = _json_path(key)
        where.append(
            "coalesce(CASE json_type(meta, ?) "
            "WHEN 'VARCHAR' THEN json_extract_string(meta, ?) = ? "
            "WHEN 'BOOLEAN' THEN json_extract_string(meta, ?) = ? "
            "WHEN 'NULL' THEN ? = 'null' "
            "WHEN 'BIGINT' THEN TRY_CAST(json_extract_string(meta, ?) AS DOUBLE) = ? "
            "WHEN 'UBIGINT' THEN TRY_CAST(json_extract_string(meta, ?) AS DOUBLE) = ? "
            "WHEN 'DOUBLE' THEN TRY_CAST(json_extract_string(meta, ?) AS DOUBLE) = ? "
            "ELSE false END, false)"
        )
        num = where_number(value)
        params.extend([path, path, value, path, value, value, path, num, path, num, path, num])
    return " AND ".join(where), params


# Per rollup kind: the columns its rows are summed by, and those summed
ROLLUP_OUT = {
    "rollup_cells": (("ri", "sample_interval"),
                     ("uploads", "own_loads", "samples", "total_ns", "lost_ms", "a_sq")),
    "rollup_loads": ((), ()),
    "rollup_stacks": (("ri", "stack_id", "marker"), ("samples", "weight_ns")),
    "rollup_frames": (("ri", "frame_id", "marker", "bucket", "grouped"), ("traces",)),
    "rollup_moments": (("ri", "key"), ("uploads", "s_sum", "s_sq", "s_a", "t_sum", "t_sq",
                                       "t_a")),
    "rollup_vitals": (("ri", "route", "metric", "label", "bucket"), ("count",)),
    "rollup_perload": (("ri", "key"), ("loads", "s_sum", "s_sq")),
    # not summed: each row as kept (`want`: the keys read)
    "rollup_examples": (("ri", "key", "uk", "id"), ("self_ns",)),
}
ROLLUP_TEXT = ("route", "label", "id")  # rollup columns of text (object arrays)
# rollup columns summed as floats (the rest are integers, summed exactly)
ROLLUP_FLOATS = ("sample_interval", "lost_ms", "a_sq", "s_sq", "s_a", "t_sq", "t_a")
ROLLUP_KEYED = ("rollup_examples",)  # `want` names its keys, not frames


def _loads(hashes: list, registers: list, ri: list | None = None) -> dict[str, Any]:
    """rollup_loads rows: the page-load hashes, and the cells' sketches; with `ri` (per
    row, the plan's index) also `hash_ri` and `registers_ri`, per hash and per sketch."""
    ri = [0] * len(hashes) if ri is None else ri
    return {"load_hash": np.asarray([x for x in hashes if x is not None], np.int64),
            "registers": [r for r in registers if r is not None],
            "hash_ri": np.asarray([i for i, x in zip(ri, hashes, strict=True)
                                   if x is not None], np.int64),
            "registers_ri": np.asarray([i for i, r in zip(ri, registers, strict=True)
                                        if r is not None], np.int64)}


def _empty_rollup(kind: str) -> dict[str, np.ndarray]:
    if kind == "rollup_loads":
        return _loads([], [])
    keys, sums = ROLLUP_OUT[kind]
    return {c: np.zeros(0, object if c in ROLLUP_TEXT else
                        np.float64 if c in ROLLUP_FLOATS else np.int64)
            for c in (*keys, *sums)}


def _cells_sql(f: Filters) -> tuple[str, list[Any]]:
    """The route and env filters of `_uploads_sql`, on a rollup table's cells."""
    where, params = ["true"], []
    if f.route is not None and not any(c in f.route for c in "*?"):
        # A route without wildcards as an equality, which the Parquet reader filters by
        # its dictionaries (a regex per row cost ~4 s over 18 M rollup_frames rows)
        where.append("route = ?" if f.route else "coalesce(route, '') = ?")
        params.append(f.route)
    elif f.route is not None:
        where.append("regexp_full_match(coalesce(route, ''), ?, 's')")
        params.append(glob_regex(f.route))
    if f.env is not None:
        where.append("env = ?")
        params.append(f.env)
    return " AND ".join(where), params


def _pandas_cells(df: Any, f: Filters) -> Any:
    """`_cells_sql` on a pandas frame."""
    m = np.ones(len(df), bool)
    if f.route is not None:
        m &= df["route"].fillna("").str.fullmatch(glob_regex(f.route), flags=16).to_numpy(bool)
    if f.env is not None:
        m &= (df["env"] == f.env).fillna(False).to_numpy(bool)
    return df[m]


def _json_path(key: str) -> str:
    return "$." + json.dumps(key)


def _pandas_filter(df: Any, f: Filters) -> Any:
    """The same predicate as _uploads_sql, on a pandas frame (one Dask partition)."""
    import orjson

    m = df["app"] == f.app
    if f.release is not None:
        m &= df["release"] == f.release
    if f.route is not None:
        m &= df["route"].fillna("").str.fullmatch(glob_regex(f.route), flags=16)  # re.DOTALL
    if f.env is not None:
        m &= df["env"] == f.env
    if f.since is not None:
        m &= df["received_at"] >= f.since
    if f.until is not None:
        m &= df["received_at"] < f.until
    for key, value in f.where:
        num = where_number(value)
        got = df["meta"].map(
            lambda s, k=key, v=value, n=num: meta_matches(orjson.loads(s), k, v, n))
        m &= got.astype(bool)
    return df[m.fillna(False).astype(bool)]


def _np(col: Any, dtype: Any) -> np.ndarray:
    return np.asarray(col, dtype=dtype)


def _arrow_cols(t: Any) -> dict[str, np.ndarray]:
    return {name: t.column(name).to_numpy() for name in t.column_names}


Part = Any  # a part to read: its path (str), or a query's tail part as a pyarrow Table


_objects_read = 0  # parts `read_object` fetched in this process (tests ask the workers)


def read_object(key: str, url: str, columns: list[str]) -> Any:
    """A part of a store on object storage as a pandas frame, fetched from the bucket by
    key (a Dask task: runs on a worker, which reads its own AWS environment)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..store.objects import open_objects

    global _objects_read
    got = open_objects(url).get(key)
    if got is None:
        raise JsprofError(f"{url}: {key} is gone (a merge's grace passed during the query); "
                          "run it again")
    _objects_read += 1
    return pq.read_table(pa.BufferReader(got[0]), columns=columns).to_pandas()


def read_part(part: Part, columns: list[str] | None = None) -> Any:
    """One part as a pyarrow Table: read from its file, or the tail's table in memory."""
    if isinstance(part, str):
        import pyarrow.parquet as pq

        return pq.read_table(part, columns=columns)
    return part if columns is None else part.select(columns)


SAMPLE_COLS = ("uk", "t", "stack_id", "marker", "weight_ns")


def sample_rows(snap: Snapshot, up: Uploads) -> dict[str, np.ndarray]:
    """Every sample of the uploads `up` as the samples table stores it (time on its
    upload's clock, stack as attributed, marker, weight in ns), an upload's samples
    together and in their order, uploads in the order of `up`. Read from the parts of
    `up`'s releases and days only (the merged Time view and `--during` read these)."""
    pieces: dict[str, list[np.ndarray]] = {k: [] for k in SAMPLE_COLS}
    if len(up.uk):
        for p in snap.row_files("samples", up):
            cols = _arrow_cols(read_part(p, list(SAMPLE_COLS)))
            hit = np.isin(cols["uk"], up.uk)
            if hit.any():
                for k in SAMPLE_COLS:
                    pieces[k].append(cols[k][hit])
    out = {k: (np.concatenate(v) if v else np.zeros(0, np.float64 if k == "t" else np.int64))
           for k, v in pieces.items()}
    # By each upload's place in `up`; stable, so an upload's samples keep their order (an
    # upload's rows are all in the one part its compaction batch wrote).
    rank = {u: i for i, u in enumerate(up.uk.tolist())}
    order = np.argsort(np.fromiter((rank[u] for u in out["uk"].tolist()), np.int64,
                                   len(out["uk"])), kind="stable")
    return {k: v[order] for k, v in out.items()}


def _split(parts: list[Part]) -> tuple[list[str], Any]:
    """Parts -> (paths, the in-memory parts as one Table or None)."""
    paths = [p for p in parts if isinstance(p, str)]
    mem = [p for p in parts if not isinstance(p, str)]
    if not mem:
        return paths, None
    import pyarrow as pa

    return paths, pa.concat_tables(mem)


class DuckEngine:
    name = "duckdb"

    def __init__(self, threads: int | None = None) -> None:
        import duckdb

        self.con = duckdb.connect(":memory:")
        # DuckDB draws a progress bar on stdout (tty or not) for a query past 2 s: it
        # would land in the middle of `--json` output
        self.con.execute("SET enable_progress_bar = false")
        self.con.execute("SET enable_progress_bar_print = false")
        if threads:
            self.con.execute(f"SET threads = {int(threads)}")

    def close(self) -> None:
        self.con.close()

    @contextmanager
    def _source(self, parts: list[Part]) -> Iterator[tuple[str, list[Any]]]:
        """The SQL relation of `parts` and its parameters: `read_parquet(?)` over the
        files, with a query's tail parts (in memory) registered beside them."""
        paths, mem = _split(parts)
        if mem is None:
            yield "read_parquet(?)", [paths]
            return
        name = f"tail_{id(mem):x}"
        self.con.register(name, mem)
        try:
            if not paths:
                yield f"(SELECT * FROM {name})", []
            else:
                yield (f"(SELECT * FROM read_parquet(?) UNION ALL BY NAME SELECT * FROM {name})",
                       [paths])
        finally:
            self.con.unregister(name)

    def uploads(self, snap: Snapshot, f: Filters) -> Uploads:
        files = snap.upload_files(f)
        if not files:
            return _no_uploads()
        cond, params = _uploads_sql(f)
        with self._source(files) as (src, p):
            t = self.con.sql(
                f"SELECT {', '.join(UPLOAD_COLS)} FROM {src} WHERE {cond} ORDER BY uk",
                params=[*p, *params],
            ).to_arrow_table()
        return snap.keep_live(_uploads_from(t.to_pydict()), f.app, f)

    def _register_u(self, up: Uploads, group: np.ndarray | None = None) -> None:
        import pyarrow as pa

        cols = {"uk": up.uk, "ri": up.ri}
        if group is not None:
            cols["g"] = np.asarray(group, np.int64)
        self.con.register("u", pa.table(cols))

    def stacks(self, snap: Snapshot, up: Uploads, group: np.ndarray | None = None
               ) -> StackRows:
        """Weights summed per (release, stack, marker) over `up`; per (group, ...) when
        `group` gives each upload a group (>= 0; -1: left out): one scan for many
        selections (`series?by=day`)."""
        files = snap.row_files("weights", up)
        if not files:
            return _empty_stacks(group is not None)
        self._register_u(up, group)
        g = "u.g, " if group is not None else ""
        where = "WHERE u.g >= 0 " if group is not None else ""
        n = 4 if group is not None else 3
        keys = ", ".join(str(i) for i in range(1, n + 1))
        with self._source(files) as (src, p):
            t = _arrow_cols(self.con.sql(
                f"SELECT {g}u.ri, w.stack_id, w.marker, sum(w.samples)::BIGINT AS samples, "
                "sum(w.weight_ns)::BIGINT AS weight_ns "
                f"FROM {src} w JOIN u USING (uk) {where}"
                f"GROUP BY {keys} ORDER BY {keys}",
                params=p,
            ).to_arrow_table())
        self.con.unregister("u")
        return _stacks_from(t, group is not None)

    def _register_keys(self, up: Uploads, spec: Resample) -> None:
        import pyarrow as pa

        self.con.register("u", pa.table({"uk": up.uk, "ri": up.ri,
                                         "hu": spec.upload_hash(up.uk)}))
        self.con.register("c", pa.table({
            "sk": spec.sk.astype(np.int64), "j": spec.key.astype(np.int64),
            "s": spec.is_self.astype(np.int64), "t": spec.is_total.astype(np.int64),
            "first": spec.first.astype(np.int64)}))

    @staticmethod
    def _per_sql(unit: str, src: str) -> str:
        """The weights (`src`) summed per (upload, key), as `per_upload_key`
        does: exact ns (BIGINT), or whole µs as DOUBLE (`to_us`) for the resampling."""
        def col(expr: str) -> str:
            total = f"sum(w.weight_ns * {expr})"
            return f"{total}::BIGINT" if unit == "ns" else f"(({total} + 500) // 1000)::DOUBLE"

        return f"""
            WITH w AS (
                SELECT w.uk, w.weight_ns,
                       CASE WHEN w.stack_id >= 0 THEN u.ri * 4294967296 + w.stack_id
                            ELSE -2 - w.marker END AS sk
                FROM {src} w JOIN u USING (uk))
            SELECT w.uk, coalesce(c.j, -1) AS j, {col("coalesce(c.s, 0)")} AS s,
                   {col("coalesce(c.t, 0)")} AS t, {col("coalesce(c.first, 1)")} AS a
            FROM w LEFT JOIN c USING (sk) GROUP BY w.uk, coalesce(c.j, -1)"""

    def per_upload_key(self, snap: Snapshot, up: Uploads, spec: Resample
                       ) -> dict[str, np.ndarray]:
        """ns per (upload, key) of `spec`'s keys (`engine.per_upload_key`'s columns):
        uploads x keys, what per-trace figures (`fleet regressions`) read."""
        files = snap.row_files("weights", up)
        if not files:
            return per_upload_key(np.zeros(0, np.int64), np.zeros(0, np.int64),
                                  np.zeros(0, np.int64), spec)
        self._register_keys(up, spec)
        try:
            with self._source(files) as (src, p):
                t = _arrow_cols(self.con.sql(self._per_sql("ns", src), params=p)
                                .to_arrow_table())
        finally:
            for name in ("u", "c"):
                self.con.unregister(name)
        return {c: np.asarray(t[c], np.int64) for c in ("uk", "j", "s", "t", "a")}

    def resample(self, snap: Snapshot, up: Uploads, spec: Resample) -> Draws:
        """`Resample` in SQL: the weights summed per (upload, key) into a table of the
        engine's, then per block of keys, uploads x resamples rows whose weight is a
        hash of (upload, resample), summed per resample. Python holds resamples x keys."""
        import pyarrow as pa

        files = snap.row_files("weights", up)
        if not files or not spec.reps:
            return spec.empty()
        K = spec.keys
        self._register_keys(up, spec)
        self.con.register("r", pa.table({"rep": np.arange(spec.reps, dtype=np.int64),
                                         "rm": spec.rep_hash()}))
        self.con.register("wt", pa.table({"i": np.arange(len(WEIGHTS), dtype=np.uint64),
                                          "n": np.asarray(WEIGHTS, np.int64)}))
        per = f"resample_per_{id(spec):x}"
        try:
            with self._source(files) as (src, p):
                self.con.execute(f"CREATE TEMP TABLE {per} AS {self._per_sql('us', src)}", p)
            out = spec.empty()
            for lo in range(0, max(K, 1), KEY_BLOCK):
                js = range(lo, min(lo + KEY_BLOCK, K))
                cols = [f"s{j}" for j in js] + [f"t{j}" for j in js] + (["a"] if lo == 0 else [])
                got = self._resample_block(per, cols, spec.reps)
                for j in js:
                    out.self_us[:, j] = got[f"s{j}"]
                    out.total_us[:, j] = got[f"t{j}"]
                if lo == 0:
                    out.all_us[:] = got["a"]
            return out
        finally:
            self.con.execute(f"DROP TABLE IF EXISTS {per}")
            for name in ("u", "c", "r", "wt"):
                self.con.unregister(name)

    def _resample_block(self, per: str, cols: list[str], reps: int) -> dict[str, np.ndarray]:
        """One block of keys: per resample, the sum over uploads of n(upload, resample) x
        each column; n = WEIGHTS[fmix32(hu xor rm) >> 20] (as `weight_draws`)."""
        pivot = ", ".join(
            "sum(a) AS a" if c == "a" else
            f"coalesce(sum({c[0]}) FILTER (WHERE j = {c[1:]}), 0) AS {c}" for c in cols)
        keep = ", ".join(cols)
        m = 0xFFFFFFFF
        sums = ", ".join(f"sum(n * {c}) AS {c}" for c in cols)
        # one step of the hash per level, so no expression is spelled out twice
        t = self.con.sql(f"""
            WITH p AS (SELECT any_value(u.hu) AS hu, {pivot}
                       FROM {per} JOIN u USING (uk) GROUP BY uk),
            h0 AS (SELECT r.rep, {keep}, xor(p.hu, r.rm) AS h FROM p CROSS JOIN r),
            h1 AS (SELECT rep, {keep}, (xor(h, h >> 16) * 2246822507::UBIGINT) & {m} AS h
                   FROM h0),
            h2 AS (SELECT rep, {keep}, (xor(h, h >> 13) * 3266489909::UBIGINT) & {m} AS h
                   FROM h1),
            h3 AS (SELECT rep, {keep}, xor(h, h >> 16) AS h FROM h2),
            d AS (SELECT rep, {keep}, wt.n FROM h3 JOIN wt ON wt.i = h >> {32 - WEIGHT_BITS})
            SELECT rep, {sums} FROM d GROUP BY rep""").to_arrow_table()
        got = _arrow_cols(t)
        rep = got.pop("rep")
        out = {}
        for c, v in got.items():  # a resample that drew no upload has no row: zeros
            out[c] = np.zeros(reps, np.int64)
            out[c][rep] = np.rint(v).astype(np.int64)
        return out

    def _rollup_pieces(self, plan: Any, kind: str, where: Callable[[int], str]
                       ) -> tuple[list[str], list[Any], list[str]]:
        """One SELECT per release of `plan`'s `kind` parts (their files, and the tail's
        table in memory, registered here: the caller unregisters `names`), each with `ri`
        (the plan's release index) and `where(ri)` after it; (pieces, params, names)."""
        pieces: list[str] = []
        params: list[Any] = []
        names: list[str] = []
        for ri, parts in enumerate(plan.parts[kind]):
            paths, mem = _split(parts)
            if paths:
                pieces.append(f"SELECT {ri}::BIGINT AS ri, * FROM read_parquet(?){where(ri)}")
                params.append(paths)
            if mem is not None:
                names.append(f"roll_{id(mem):x}")
                self.con.register(names[-1], mem)
                pieces.append(f"SELECT {ri}::BIGINT AS ri, * FROM {names[-1]}{where(ri)}")
        return pieces, params, names

    def rollup(self, plan: Any, kind: str, f: Filters,
               want: tuple[np.ndarray, np.ndarray] | None = None) -> dict[str, np.ndarray]:
        """One rollup table of `plan`'s parts (fleet/rollups.py), its rows of `f`'s
        routes and envs summed per `ROLLUP_OUT[kind]` (`ri`: the plan's release index);
        `want` (release indices, frame ids): rollup_frames of those frames only, and of
        the rows without one."""

        def mine(ri: int) -> str:
            if want is None:
                return ""
            # The wanted frames of this release as a list of integers in the scan's filter,
            # which DuckDB applies in the Parquet reader (a semi-join on (ri, frame_id)
            # pairs took 2.5 s over 18 M rows; this 0.3 s)
            ids = ", ".join(str(int(x)) for x in
                            np.asarray(want[1])[np.asarray(want[0]) == ri])
            return (f" WHERE key IN ({ids or '-1'})" if kind in ROLLUP_KEYED else
                    f" WHERE frame_id < 0 OR frame_id IN ({ids or '-1'})")

        pieces, params, names = self._rollup_pieces(plan, kind, mine)
        cond, cp = _cells_sql(f)
        keys, sums = ROLLUP_OUT[kind]
        try:
            if not pieces:
                return _empty_rollup(kind)
            src = " UNION ALL BY NAME ".join(pieces)
            if kind == "rollup_loads":
                t = self.con.sql(f"SELECT ri, load_hash, registers FROM ({src}) WHERE {cond}",
                                 params=[*params, *cp]).to_arrow_table()
                return _loads(t.column("load_hash").to_pylist(),
                              t.column("registers").to_pylist(), t.column("ri").to_pylist())
            elif kind in ROLLUP_KEYED:
                sql = (f"SELECT {', '.join((*keys, *sums))} FROM ({src}) WHERE {cond} "
                       f"ORDER BY {', '.join(keys)}")
            else:
                k = ", ".join(keys)
                sql = (f"SELECT {k}, " + ", ".join(
                    f"sum({c})::{'DOUBLE' if c in ROLLUP_FLOATS else 'BIGINT'} AS {c}"
                    for c in sums)
                    + f" FROM ({src}) WHERE {cond} GROUP BY {k} ORDER BY {k}")
            return _arrow_cols(self.con.sql(sql, params=[*params, *cp]).to_arrow_table())
        finally:
            for n in names:
                self.con.unregister(n)

    def rollup_sql(self, plan: Any, kind: str, f: Filters, sql: str, *params: Any
                   ) -> dict[str, np.ndarray]:
        """`sql` over the relation `r`: the rows of one rollup table of `plan`'s parts in
        `f`'s routes and envs, with `ri` (the plan's release index): for sums that are
        not `rollup`'s (the Time view's: a least, distinct page loads)."""
        pieces, pp, names = self._rollup_pieces(plan, kind, lambda ri: "")
        if not pieces:
            from ..store.tables.view import rollup_schemas

            pieces.append("SELECT 0::BIGINT AS ri, * FROM empty_rollup")
            names.append("empty_rollup")
            self.con.register("empty_rollup", rollup_schemas()[kind].empty_table())
        cond, cp = _cells_sql(f)
        try:
            src = " UNION ALL BY NAME ".join(pieces)
            return _arrow_cols(self.con.sql(
                f"WITH r AS (SELECT * FROM ({src}) WHERE {cond}) {sql}",
                params=[*pp, *cp, *params]).to_arrow_table())
        finally:
            for n in names:
                self.con.unregister(n)

    @contextmanager
    def sample_scan(self, snap: Snapshot, up: Uploads, **cols: np.ndarray
                    ) -> Iterator[Callable[..., dict[str, np.ndarray]] | None]:
        """Queries over the samples table rows of `up`, which the engine streams from the
        parts and aggregates, so that no query holds them (a Time view's 500 uploads of
        6,000 samples read into numpy took ~1.2 GiB at its peak, issue 34). Yields
        `run(sql, *params)` -> the result's columns, where `sql` reads the relation `s`:
        every sample of `up` (uk, t, stack_id, marker, weight_ns) with `cols` (one value
        per upload of `up`) beside it; None when no part can hold a sample of `up`."""
        import pyarrow as pa

        files = snap.row_files("samples", up) if len(up) else []
        if not files:
            yield None
            return
        name = f"scan_{id(up):x}"
        self.con.register(name, pa.table({"uk": up.uk, **cols}))
        try:
            with self._source(files) as (src, p):
                extra = "".join(f", p.{c}" for c in cols)
                rel = (f"SELECT s.uk, s.t, s.stack_id, s.marker, s.weight_ns{extra} "
                       f"FROM {src} s JOIN {name} p USING (uk)")

                def run(sql: str, *params: Any) -> dict[str, np.ndarray]:
                    return _arrow_cols(self.con.sql(f"WITH s AS ({rel}) {sql}",
                                                    params=[*p, *params]).to_arrow_table())

                yield run
        finally:
            self.con.unregister(name)

    def frames(self, snap: Snapshot, up: Uploads, want: Want | None = None) -> FrameRows:
        """Per-trace frame rows of the matching uploads: all, or only `want`'s frames
        (plus the idle rows)."""
        import pyarrow as pa

        files = snap.row_files("upload_frames", up)
        if not files:
            return _empty_frames()
        self._register_u(up)
        where = ""
        if want is not None:
            self.con.register("want", pa.table({"ri": want.ri, "frame_id": want.frame_id}))
            where = ("WHERE f.frame_id < 0 OR (u.ri, f.frame_id) IN "
                     "(SELECT (ri, frame_id) FROM want)")
        with self._source(files) as (src, p):
            t = _arrow_cols(self.con.sql(
                "SELECT f.uk, u.ri, f.frame_id, f.marker, f.self_ns "
                # No ORDER BY: the client groups these rows by value and sums integers, so
                # their order cannot change a result.
                f"FROM {src} f JOIN u USING (uk) {where}",
                params=p,
            ).to_arrow_table())
        self.con.unregister("u")
        if want is not None:
            self.con.unregister("want")
        return _frames_from(t)


class DaskEngine:
    """The same plan as dask dataframe steps on a distributed cluster."""

    name = "dask"

    def __init__(self, scheduler: str | None = None, local_workers: int | None = None,
                 client: Any = None) -> None:
        from distributed import Client, LocalCluster

        self._own: list[Any] = []
        if client is not None:
            self.client = client
        elif scheduler:
            try:
                self.client = Client(scheduler, timeout="10s")
            except OSError as e:
                raise UsageError(
                    f"--scheduler {scheduler}: cannot reach the Dask scheduler ({e}); check "
                    "the address, or use --local-workers N"
                ) from None
            except Exception as e:  # noqa: BLE001 - whatever a peer that is no scheduler sends
                # Something answered, but not as a Dask scheduler does (a web server's port:
                # Dask reads its bytes as a frame length and fails allocating exabytes).
                raise UsageError(
                    f"--scheduler {scheduler}: what answered there is not a Dask scheduler "
                    f"({type(e).__name__}); check the address, or use --local-workers N"
                ) from None
            self._own.append(self.client)
        else:
            cluster = LocalCluster(
                n_workers=local_workers or 1, threads_per_worker=1, processes=True,
                dashboard_address="127.0.0.1:0", host="127.0.0.1",
            )
            self.client = Client(cluster)
            self._own += [self.client, cluster]

    # (url, tables folder of the query's mirror) when the store is on object storage: the
    # workers read the parts from the bucket (`read_object`), so they may run anywhere.
    remote: tuple[str, Path] | None = None

    def close(self) -> None:
        for o in self._own:
            o.close()

    def _read_remote(self, paths: list[str], columns: list[str]) -> Any:
        """Parts read on the workers from the object store, by key: each worker opens the
        bucket with its own AWS environment (no credential travels with the tasks)."""
        import dask.dataframe as dd
        import pyarrow.parquet as pq

        assert self.remote is not None
        url, tdir = self.remote
        keys = ["tables/" + Path(p).relative_to(tdir).as_posix() for p in paths]
        # the frame's columns and types, from the first part's footer (in the mirror)
        meta = pq.read_schema(paths[0]).empty_table().select(columns).to_pandas()
        return dd.from_map(read_object, keys, url=url, columns=columns, meta=meta,
                           enforce_metadata=False)

    def _read(self, files: list[Part], columns: list[str]) -> Any:
        """The parts as one dask dataframe: the files read on the workers, a query's tail
        parts (in memory, a few hundred uploads at most) sent as one partition."""
        import dask.dataframe as dd

        paths, mem = _split(files)
        if paths and self.remote is not None:
            got = [self._read_remote(paths, columns)]
        else:
            got = [dd.read_parquet(paths, columns=columns)] if paths else []
        if mem is not None:
            got.append(dd.from_pandas(mem.select(columns).to_pandas(), npartitions=1))
        return got[0] if len(got) == 1 else dd.concat(got)

    def uploads(self, snap: Snapshot, f: Filters) -> Uploads:
        files = snap.upload_files(f)
        if not files:
            return _no_uploads()
        cols = sorted(set(UPLOAD_COLS) | {"app", "route", "env", "meta"})
        df = self._read(files, cols)
        out = df.map_partitions(_pandas_filter, f, meta=df._meta)[list(UPLOAD_COLS)]
        pdf = self.client.compute(out).result().sort_values("uk", kind="stable")
        return snap.keep_live(_uploads_from({c: pdf[c].tolist() for c in UPLOAD_COLS}),
                              f.app, f)

    def stacks(self, snap: Snapshot, up: Uploads, group: np.ndarray | None = None
               ) -> StackRows:
        import pandas as pd

        files = snap.row_files("weights", up)
        if not files:
            return _empty_stacks(group is not None)
        u = pd.DataFrame({"uk": up.uk, "ri": up.ri})
        by = ["ri", "stack_id", "marker"]
        if group is not None:
            u["g"] = np.asarray(group, np.int64)
            u = u[u["g"] >= 0]
            by = ["g", *by]
        w = self._read(files, ["uk", "stack_id", "marker", "samples", "weight_ns"])
        g = _join_uploads(w, u).groupby(by)[["samples", "weight_ns"]].sum()
        pdf = self.client.compute(g).result().reset_index()
        pdf = pdf.sort_values(by, kind="stable")
        return _stacks_from({c: pdf[c].to_numpy() for c in [*by, "samples", "weight_ns"]},
                            group is not None)

    def _per(self, files: list[Part], up: Uploads, spec: Resample) -> Any:
        """The (upload, key) ns sums as a dask dataframe: per partition on the workers,
        then a groupby, so each pair is whole."""
        import pandas as pd

        w = self._read(files, ["uk", "stack_id", "marker", "weight_ns"])
        meta = pd.DataFrame({c: pd.Series([], dtype="int64") for c in ("uk", "j", "s", "t", "a")})
        rows = w.map_partitions(_per_upload_key_part, (up.uk, up.ri, spec), meta=meta)
        return rows.groupby(["uk", "j"]).sum(split_out=max(1, w.npartitions)).reset_index()

    def per_upload_key(self, snap: Snapshot, up: Uploads, spec: Resample
                       ) -> dict[str, np.ndarray]:
        files = snap.row_files("weights", up)
        if not files:
            return per_upload_key(np.zeros(0, np.int64), np.zeros(0, np.int64),
                                  np.zeros(0, np.int64), spec)
        pdf = self.client.compute(self._per(files, up, spec)).result()
        return {c: pdf[c].to_numpy().astype(np.int64) for c in ("uk", "j", "s", "t", "a")}

    def resample(self, snap: Snapshot, up: Uploads, spec: Resample) -> Draws:
        """`Resample` as DuckDB runs it: (upload, key) sums on the workers (`_per`), then
        per partition the weights by the same hash (`draw_sums`), the partitions' sums
        added in a tree. The client holds resamples x keys."""
        from dask import delayed

        files = snap.row_files("weights", up)
        if not files or not spec.reps:
            return spec.empty()
        per = self._per(files, up, spec)
        parts = [delayed(_draw_part)(p, spec) for p in per.to_delayed()]
        while len(parts) > 1:
            parts = [delayed(operator.add)(a, b) for a, b in zip(parts[::2], parts[1::2],
                                                                  strict=False)] + (
                [parts[-1]] if len(parts) % 2 else [])
        return self.client.compute(parts[0]).result() if parts else spec.empty()

    def frames(self, snap: Snapshot, up: Uploads, want: Want | None = None) -> FrameRows:
        import pandas as pd

        files = snap.row_files("upload_frames", up)
        if not files:
            return _empty_frames()
        u = pd.DataFrame({"uk": up.uk, "ri": up.ri})
        fr = _join_uploads(self._read(files, ["uk", "frame_id", "marker", "self_ns"]), u)
        if want is not None:
            keys = want.ri * (1 << 32) + want.frame_id

            def pick(part: Any, keys: np.ndarray = keys) -> Any:
                k = part["ri"].to_numpy() * (1 << 32) + part["frame_id"].to_numpy()
                return part[(part["frame_id"].to_numpy() < 0) | np.isin(k, keys)]

            fr = fr.map_partitions(pick, meta=fr._meta)
        pdf = self.client.compute(fr).result()
        return _frames_from({c: pdf[c].to_numpy()
                             for c in ("uk", "ri", "frame_id", "marker", "self_ns")})


    def rollup(self, plan: Any, kind: str, f: Filters,
               want: tuple[np.ndarray, np.ndarray] | None = None) -> dict[str, np.ndarray]:
        """`DuckEngine.rollup` as dask steps: each release's parts read on the workers,
        filtered and summed per partition, then summed again."""
        import dask.dataframe as dd

        from ..store.tables.view import rollup_schemas

        cols = rollup_schemas()[kind].names
        frames = []
        for ri, parts in enumerate(plan.parts[kind]):
            if parts:
                frames.append(self._read(parts, cols).assign(ri=ri))
        if not frames:
            return _empty_rollup(kind)
        df = frames[0] if len(frames) == 1 else dd.concat(frames)
        df = df.map_partitions(_pandas_cells, f, meta=df._meta)
        if want is not None and kind in ROLLUP_KEYED:
            pairs = {(int(a), int(b)) for a, b in zip(np.asarray(want[0]).tolist(),
                                                      np.asarray(want[1]).tolist(), strict=True)}

            def pick_keys(part: Any, pairs: set = pairs) -> Any:
                on = [(a, b) in pairs for a, b in zip(part["ri"].tolist(), part["key"].tolist(),
                                                      strict=True)]
                return part[np.asarray(on, bool)]

            df = df.map_partitions(pick_keys, meta=df._meta)
        elif want is not None:
            keys = np.asarray(want[0], np.int64) * (1 << 32) + np.asarray(want[1], np.int64)

            def pick(part: Any, keys: np.ndarray = keys) -> Any:
                k = part["ri"].to_numpy() * (1 << 32) + part["frame_id"].to_numpy()
                return part[(part["frame_id"].to_numpy() < 0) | np.isin(k, keys)]

            df = df.map_partitions(pick, meta=df._meta)
        if kind == "rollup_loads":
            import pandas as pd

            pdf = self.client.compute(df[["ri", "load_hash", "registers"]]).result()
            return _loads([None if pd.isna(v) else int(v) for v in pdf["load_hash"].tolist()],
                          pdf["registers"].tolist(), [int(v) for v in pdf["ri"].tolist()])
        keys, sums = ROLLUP_OUT[kind]
        if kind in ROLLUP_KEYED:
            pdf = self.client.compute(df[[*keys, *sums]]).result().sort_values(
                list(keys), kind="stable")
        else:
            g = df.groupby(list(keys), dropna=False)[list(sums)].sum()
            pdf = self.client.compute(g).result().reset_index().sort_values(
                list(keys), kind="stable")
        import pandas as pd

        # text keys as DuckDB gives them: None, not pandas' NaN, for a null
        return {c: np.asarray([None if pd.isna(v) else v for v in pdf[c].tolist()], object)
                if c in ROLLUP_TEXT else
                pdf[c].to_numpy().astype(np.float64 if c in ROLLUP_FLOATS else np.int64)
                for c in (*keys, *sums)}


def _per_upload_key_part(part: Any, u: tuple) -> Any:
    """One weights partition -> its (upload, key) ns sums (`per_upload_key`), joined to
    the matching uploads (`u`: sorted uk, their release index, the Resample) here."""
    import pandas as pd

    uk_sorted, ri, spec = u
    uk = part["uk"].to_numpy()
    idx = np.minimum(np.searchsorted(uk_sorted, uk), max(len(uk_sorted) - 1, 0))
    ok = uk_sorted[idx] == uk if len(uk_sorted) else np.zeros(len(uk), bool)
    sk = stack_key(ri[idx[ok]], part["stack_id"].to_numpy()[ok],
                   part["marker"].to_numpy()[ok])
    return pd.DataFrame(per_upload_key(uk[ok], sk, part["weight_ns"].to_numpy()[ok], spec))


def _draw_part(part: Any, spec: Resample) -> Draws:
    """(upload, key) sums, each pair whole -> `draw_sums` of this partition."""
    per = {c: part[c].to_numpy() for c in ("uk", "j")}
    for c in "sta":
        per[c] = to_us(part[c].to_numpy())
    return draw_sums(per, spec)


def _join_uploads(df: Any, u: Any) -> Any:
    """The inner join with the (small) matching uploads, partition by partition: the
    uploads table is broadcast, the big side never shuffled."""
    meta = df._meta.merge(u.iloc[:0], on="uk", how="inner")
    return df.map_partitions(lambda part, u=u: part.merge(u, on="uk", how="inner"), meta=meta)


def _uploads_from(t: dict) -> Uploads:
    return Uploads(
        uk=_np(t["uk"], np.int64), id=list(t["id"]), rkey=list(t["rkey"]),
        release=list(t["release"]),
        received_at=np.asarray([np.nan if v is None else v for v in t["received_at"]],
                               np.float64),
        samples=_np(t["samples"], np.int64), total_ms=_np(t["total_ms"], np.float64),
        lost_ms=_np(t["lost_ms"], np.float64),
        sample_interval=np.asarray(
            [np.nan if v is None else v for v in t["sample_interval"]], np.float64),
        page_load=[v if isinstance(v, str) else None for v in t["page_load"]],  # NaN: None
    )


def _no_uploads() -> Uploads:
    z = np.zeros(0)
    return Uploads(np.zeros(0, np.int64), [], [], [], z, np.zeros(0, np.int64), z, z, z, [])


def _stacks_from(t: dict, grouped: bool) -> StackRows:
    return StackRows(
        ri=_np(t["ri"], np.int64), stack_id=_np(t["stack_id"], np.int64),
        marker=_np(t["marker"], np.int64), samples=_np(t["samples"], np.int64),
        weight_ns=_np(t["weight_ns"], np.int64),
        group=_np(t["g"], np.int64) if grouped else None,
    )


def _frames_from(t: dict) -> FrameRows:
    return FrameRows(
        uk=_np(t["uk"], np.int64), ri=_np(t["ri"], np.int64),
        frame_id=_np(t["frame_id"], np.int64),
        marker=_np(t["marker"], np.int64), self_ns=_np(t["self_ns"], np.int64),
    )


def _empty_stacks(grouped: bool) -> StackRows:
    z = np.zeros(0, np.int64)
    return StackRows(z, z, z, z, z, group=z if grouped else None)


def _empty_frames() -> FrameRows:
    z = np.zeros(0, np.int64)
    return FrameRows(z, z, z, z, z)


def open_engine(name: str, scheduler: str | None = None, local_workers: int | None = None
                ) -> DuckEngine | DaskEngine:
    if name == "duckdb":
        if scheduler or local_workers:
            raise UsageError("--scheduler and --local-workers go with --engine dask")
        return DuckEngine()
    if name == "dask":
        return DaskEngine(scheduler, local_workers)
    raise UsageError(f"--engine {name!r}: choose duckdb or dask")


def snapshot_path(p: str | os.PathLike) -> Path:
    return Path(p)
