"""Rollups (format 6): a release's day of uploads summed per cell (route, env), so that `fleet top`
over any span of days reads rows that grow with distinct stacks and days, not uploads.

The compactor writes them beside the per-upload tables, from the same rows, one part per
release and UTC day and batch (`rollup_*` kinds, listed in the manifest as the row kinds
are); a merge sums the rows of the parts it merges by their keys, so a day's merged part
holds one row per key whatever the number of batches. Queries only read them.

  rollup_cells   route, env, sample_interval -> uploads, own_loads, samples, total_ns,
                 lost_ms    (own_loads: uploads without a page-load id, each its own load)
  rollup_loads   route, env, load_hash          distinct page-load ids (64-bit hashes);
                 registers                      or, for a cell past LOADS_EXACT loads, a
                                                HyperLogLog sketch of them (`page_loads`)
  rollup_stacks  route, env, stack_id, marker -> samples, weight_ns   (as `weights`)
  rollup_frames  route, env, frame_id, marker, bucket, grouped -> traces
                 per frame present in an upload (as `upload_frames`): how many uploads
                 had its self time in each `bucket` of a log scale (`bucket_of`), so
                 per-trace counts and percentiles sum across days (grouped 0); and per
                 function the default script identity rule makes of two or more of the
                 release's frames (`page.html?exp=a` and `?exp=b`: `frame_groups`),
                 keyed by its smallest frame id, the same of their summed self time
                 (grouped 1), so a query by that rule counts such an upload once

  rollup_moments route, env, key -> uploads, s_sum, s_sq, s_a, t_sum, t_sq, t_a
                 per function (`frame_groups`: name, the default identity rule's
                 script, line and column, as rollup_frames groups them; format 12,
                 where 8-11 grouped by name and script, any line; keyed by its smallest
                 frame id; a sample with no stack by -2 - its marker), so a diff that
                 keys a minified script's functions by place reads each apart and one
                 that keys a function by name reads its one place in a release (issue
                 32); over the uploads: the sums of its self
                 ns s, of s^2 and of s x a (a: the upload's all ns), and the same of its
                 total ns t (on a stack's path once); rollup_cells' `a_sq` sums a^2.
                 What `fleet diff`'s intervals of a share S/A need (the delta method of
                 the bootstrap over uploads), added up over uploads, parts and days
  rollup_vitals  route, env, metric, label, bucket -> count
                 what `fleet vitals` reads (tables/vitals.py): per page load its INP,
                 LCP (and element), CLS, per long frame its blocking, per interaction
                 its duration and parts by type, each as a bucket of the log scale; a
                 batch adds its page loads' values with their earlier chunks and takes
                 away those of the earlier chunks alone (counts -1), so a day sums to
                 each page load once
  rollup_perload route, env, key -> loads, s_sum, s_sq
                 what `fleet regressions` tests (tables/perload.py): per function (a hash
                 of its `group_key`, by place as rollup_moments) the page loads' sum
                 and sum of squares of its self ns per page load, added across batches
                 as rollup_vitals is; key
                 LOAD_KEY counts the page loads (`loads`) and sums their all ns
  rollup_examples route, env, key, uk -> id, self_ns
                 per function the EXAMPLES_KEPT uploads with the most self ns in it;
                 a merge keeps the top EXAMPLES_KEPT of its parts'

Percentiles of per-trace self time come from those buckets: every value is replaced by
its bucket's middle, within `ALPHA` (1 %) of it, on every path (the per-upload tables
too), so a rollup answer and a per-upload one are the same numbers.

Page loads are distinct ids, which no sum gives: a cell's ids are kept (as hashes) up to
LOADS_EXACT per part, and a merged cell past that keeps a HyperLogLog sketch of them
instead (2^HLL_P registers: the count is then an estimate, standard error 1.6 %), so a
count over 30 days reads kilobytes per cell and day, not one row per page load.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

import numpy as np

from ...trace import NONE
from .timeroll import TIME_KINDS
from .timeroll import schemas as time_schemas

ROLLUP_KINDS = ("rollup_cells", "rollup_loads", "rollup_stacks", "rollup_frames",
                "rollup_moments", "rollup_vitals", "rollup_perload", "rollup_examples",
                *TIME_KINDS)
CELL = ("route", "env")
# What `rollup_columns` takes of each upload (the compactor's, or the uploads table's)
CELL_COLS = ("uk", "route", "env", "sample_interval", "page_load", "samples", "lost_ms")
# Key columns of each kind: a merge sums the other columns over rows with equal keys
# (rollup_loads has no value column: its rows are made distinct).
KEYS = {
    "rollup_cells": (*CELL, "sample_interval"),
    "rollup_loads": (*CELL, "load_hash"),
    "rollup_stacks": (*CELL, "stack_id", "marker"),
    "rollup_frames": (*CELL, "frame_id", "marker", "bucket", "grouped"),
    "rollup_moments": (*CELL, "key"),
    "rollup_vitals": (*CELL, "metric", "label", "bucket"),
    "rollup_perload": (*CELL, "key"),
    "rollup_examples": (*CELL, "key", "uk"),
    "rollup_time": (*CELL, "grid", "tb", "stack_id", "marker"),
    "rollup_timeloads": (*CELL, "grid", "tb", "load_hash"),
    "rollup_timekeys": (*CELL, "idle", "width", "nb"),
}
# Value columns a merge keeps the least of (the others are summed)
MIN_VALUES = frozenset({"first_uk"})

# Relative accuracy of a per-trace percentile: a value v > 0 ns is in bucket
# 1 + ceil(log_GAMMA(v)), whose middle 2 GAMMA^k / (GAMMA + 1) is within ALPHA of every
# value in it (DDSketch's mapping); bucket 0 holds exact zeros.
ALPHA = 0.01
GAMMA = (1 + ALPHA) / (1 - ALPHA)
_LOG_GAMMA = math.log(GAMMA)


def bucket_of(ns: np.ndarray) -> np.ndarray:
    """Per value in integer ns (>= 0): its bucket (int16)."""
    v = np.asarray(ns, np.int64)
    out = np.zeros(len(v), np.int16)
    pos = v > 0
    out[pos] = 1 + np.ceil(np.log(v[pos].astype(np.float64)) / _LOG_GAMMA).astype(np.int16)
    return out


def bucket_value(b: np.ndarray) -> np.ndarray:
    """Per bucket: the value (ns) it stands for."""
    b = np.asarray(b, np.int64)
    return np.where(b > 0, 2.0 * GAMMA ** (b - 1) / (GAMMA + 1.0), 0.0)


def quantiles(groups: np.ndarray, buckets: np.ndarray, counts: np.ndarray, n_groups: int,
              qs: tuple[float, ...] = (0.5, 0.95)) -> tuple[np.ndarray, list[np.ndarray]]:
    """Per group: how many values (traces), and each quantile of the values in ms, the
    values being their buckets' middles (linear interpolation between the two nearest
    ranks, as numpy's default percentile)."""
    g = np.asarray(groups, np.int64)
    c = np.asarray(counts, np.int64)
    total = np.bincount(g, weights=c, minlength=n_groups).astype(np.int64) if len(g) else \
        np.zeros(n_groups, np.int64)
    outs = [np.full(n_groups, np.nan) for _ in qs]
    if not len(g):
        return total, outs
    # One row per (group, bucket), in value order within each group
    key = g * 65536 + np.asarray(buckets, np.int64)
    uk, inv = np.unique(key, return_inverse=True)
    cnt = np.bincount(inv.reshape(-1), weights=c).astype(np.int64)
    rg, rb = uk // 65536, uk % 65536
    vals = bucket_value(rb) / 1e6
    cum = np.cumsum(cnt)
    base = np.zeros(n_groups, np.int64)
    base[1:] = np.cumsum(total)[:-1]
    has = total > 0
    assert (np.unique(rg) == np.nonzero(has)[0]).all()
    for q, out in zip(qs, outs, strict=True):
        pos = (total[has] - 1) * q
        lo = np.floor(pos).astype(np.int64)
        hi = np.ceil(pos).astype(np.int64)
        b0 = base[has]
        a = vals[np.searchsorted(cum, b0 + lo, side="right")]
        b = vals[np.searchsorted(cum, b0 + hi, side="right")]
        out[has] = a + (b - a) * (pos - lo)
    return total, outs


LOADS_EXACT = 4096
HLL_P = 12
HLL_M = 1 << HLL_P
# The sketch's relative standard error (Flajolet et al.): 1.6 % at 4,096 registers, what
# every output that shows an estimated page-load count says beside it
HLL_ERROR = 1.04 / math.sqrt(HLL_M)


def hll_registers(hashes: np.ndarray) -> np.ndarray:
    """HyperLogLog registers (uint8, HLL_M) of 64-bit hashes: the first HLL_P bits pick
    the register, which keeps the most leading zeros (+1) seen in the rest."""
    h = np.asarray(hashes, np.int64).view(np.uint64)
    reg = (h >> np.uint64(64 - HLL_P)).astype(np.int64)
    x = (h << np.uint64(HLL_P)) | np.uint64(1 << (HLL_P - 1))  # a stop bit: rho <= 53
    rho = np.ones(len(x), np.int64)  # leading zeros of x, + 1 (binary search)
    for s in (32, 16, 8, 4, 2, 1):
        top0 = x < np.uint64(1 << (64 - s))
        rho[top0] += s
        x[top0] <<= np.uint64(s)
    out = np.zeros(HLL_M, np.uint8)
    np.maximum.at(out, reg, rho.astype(np.uint8))
    return out


def page_loads(hashes: np.ndarray, registers: list[bytes]) -> int:
    """Distinct page loads: exact from the hashes when no cell was sketched, else the
    HyperLogLog estimate of them all (linear counting while registers are empty)."""
    if not registers:
        return int(len(np.unique(np.asarray(hashes, np.int64))))
    m = hll_registers(hashes)
    for r in registers:
        np.maximum(m, np.frombuffer(r, np.uint8), out=m)
    alpha = 0.7213 / (1 + 1.079 / HLL_M)
    est = alpha * HLL_M * HLL_M / float(np.sum(np.ldexp(1.0, -m.astype(np.int64))))
    zeros = int((m == 0).sum())
    if est <= 2.5 * HLL_M and zeros:
        est = HLL_M * np.log(HLL_M / zeros)
    return int(round(est))


def load_hash(ids: list[str]) -> np.ndarray:
    """Page-load ids as 64-bit hashes (blake2b): what rollup_loads keeps of them."""
    return np.asarray([int.from_bytes(hashlib.blake2b(i.encode(), digest_size=8).digest(),
                                      "little", signed=True) for i in ids], np.int64)


def schemas() -> dict[str, Any]:
    import pyarrow as pa

    cell = [("route", pa.string()), ("env", pa.string())]
    return {
        "rollup_cells": pa.schema([*cell, ("sample_interval", pa.float64()),
                                   ("uploads", pa.int64()), ("own_loads", pa.int64()),
                                   ("samples", pa.int64()), ("total_ns", pa.int64()),
                                   ("lost_ms", pa.float64()), ("a_sq", pa.float64())]),
        "rollup_loads": pa.schema([*cell, ("load_hash", pa.int64()),
                                   ("registers", pa.binary())]),
        "rollup_stacks": pa.schema([*cell, ("stack_id", pa.int64()), ("marker", pa.int8()),
                                    ("samples", pa.int64()), ("weight_ns", pa.int64())]),
        "rollup_frames": pa.schema([*cell, ("frame_id", pa.int64()), ("marker", pa.int8()),
                                    ("bucket", pa.int16()), ("grouped", pa.int8()),
                                    ("traces", pa.int64())]),
        "rollup_moments": pa.schema([*cell, ("key", pa.int64()), ("uploads", pa.int64()),
                                     ("s_sum", pa.int64()), ("s_sq", pa.float64()),
                                     ("s_a", pa.float64()), ("t_sum", pa.int64()),
                                     ("t_sq", pa.float64()), ("t_a", pa.float64())]),
        "rollup_vitals": pa.schema([*cell, ("metric", pa.int8()), ("label", pa.string()),
                                    ("bucket", pa.int16()), ("count", pa.int64())]),
        "rollup_perload": pa.schema([*cell, ("key", pa.int64()), ("loads", pa.int64()),
                                     ("s_sum", pa.int64()), ("s_sq", pa.float64())]),
        "rollup_examples": pa.schema([*cell, ("key", pa.int64()), ("uk", pa.int64()),
                                      ("id", pa.string()), ("self_ns", pa.int64())]),
        **time_schemas(),
    }


def _interval(v: Any) -> float | None:
    """A declared interval as `_merged_interval` counts it: finite and > 0, else none."""
    return float(v) if v is not None and math.isfinite(v) and v > 0 else None


def group_key(frame: tuple) -> tuple:
    """A stored frame (name, resource, line, column) as the default script identity rule
    names its function (`fleet.releases`): frames with one key are one function."""
    from ...analysis.diff import script_identity

    name, res, line, col = frame
    return (name, script_identity(res), line, col)


def unique_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`np.unique(rows, axis=0, return_inverse=True)` of an (n, k) integer array: the
    distinct rows in lexicographic order, and each row's index among them. numpy sorts
    the rows as opaque byte records there (a comparison sort of k-field structs): 2.5 s of
    the 8 s a tail of 500 field uploads took (issue 34). Here the columns are packed into
    one int64 key when their value ranges allow (offsets in mixed radix keep the order),
    else ordered with `np.lexsort`; either way an integer sort."""
    a = np.asarray(rows, np.int64)
    n, k = a.shape
    if not n:
        return a.copy(), np.zeros(0, np.intp)
    lo, hi = a.min(axis=0), a.max(axis=0)
    spans = [int(h) - int(m) + 1 for h, m in zip(hi.tolist(), lo.tolist(), strict=True)]
    if math.prod(spans) < 1 << 62:
        packed = np.zeros(n, np.int64)
        for j in range(k):
            packed *= spans[j]
            packed += a[:, j] - lo[j]
        order = np.argsort(packed)
        s = packed[order]
        first = np.r_[True, s[1:] != s[:-1]]
    else:  # a column of hashes: the whole int64 range
        order = np.lexsort(a.T[::-1])
        s = a[order]
        first = np.r_[True, (s[1:] != s[:-1]).any(axis=1)]
    inv = np.empty(n, np.intp)
    inv[order] = np.cumsum(first) - 1
    return a[order[first]], inv


# Expanded (upload, key) rows `upload_moments` builds at a time: ~40 bytes each in its
# arrays, a few copies in np.unique's sort, so a block costs some tens of MB whatever the
# batch. All of a batch's rows at once (each weights row times the groups on its stack's
# path) took ~800 MiB for 500 field uploads (issue 34: the tail a query reads, the
# compactor's first batch).
MOMENTS_BLOCK = 1 << 18
# A block's (upload, key) sums go through a dense array of every pair when it has at most
# this many cells, or this many per expanded row (8 bytes each, three arrays): else sorted
DENSE_CELLS = 1 << 20
DENSE_PER_ROW = 4


def upload_moments(uk: np.ndarray, stack_id: np.ndarray, marker: np.ndarray,
                   weight_ns: np.ndarray, parent: np.ndarray, frame: np.ndarray,
                   group: np.ndarray, block: int = MOMENTS_BLOCK) -> dict[str, np.ndarray]:
    """Weights rows (uk, stack, marker, ns) -> per (upload, key) the self ns `s` and the
    total ns `t` of each key: a frame's `group` (`frame_groups`) for the stacks (self: the
    leaf's; total: every group on the path, once), -2 - marker for rows with no stack.
    Rows sorted by (uk, key).

    Each distinct stack's path is walked once; the rows are then expanded a block of
    whole uploads at a time (about `block` expanded rows; one upload's own rows may be
    more), so memory follows the block and the distinct stacks, not the batch."""
    uk = np.asarray(uk, np.int64)
    st = np.asarray(stack_id, np.int64)
    w = np.asarray(weight_ns, np.int64)
    mk = np.asarray(marker, np.int64)
    if len(uk) and np.any(uk[1:] < uk[:-1]):
        order = np.argsort(uk, kind="stable")
        uk, st, w, mk = uk[order], st[order], w[order], mk[order]
    js = st >= 0
    # Per distinct stack: the distinct groups on its path (`pair[start[i]:][:cnt[i]]`)
    su = np.unique(st[js])
    par = np.asarray(parent, np.int64)
    grp = np.asarray(group, np.int64)[np.asarray(frame, np.int64)] if len(su) else su
    pi, pg = [], []
    cur, idx = su.copy(), np.arange(len(su))
    while len(cur):  # up each distinct stack's path, one level per round
        pi.append(idx)
        pg.append(grp[cur])
        cur = par[cur]
        on = cur >= 0
        cur, idx = cur[on], idx[on]
    pair = (unique_rows(np.stack([np.concatenate(pi), np.concatenate(pg)], axis=1))[0]
            if pi else np.zeros((0, 2), np.int64))
    cnt = np.bincount(pair[:, 0], minlength=len(su))
    start = np.cumsum(cnt) - cnt
    leaf = grp[su]
    # Expanded rows per weights row: its path's groups and its leaf's (self), or 1 (idle)
    sidx = np.searchsorted(su, st)
    n_exp = np.ones(len(st), np.int64)
    n_exp[js] = cnt[sidx[js]] + 1
    ends = np.flatnonzero(np.r_[uk[1:] != uk[:-1], True]) + 1 if len(uk) else np.zeros(0, int)
    total = np.cumsum(n_exp)
    bounds = [0]
    for e in ends.tolist():  # cut after an upload once the block is full
        if total[e - 1] - (total[bounds[-1] - 1] if bounds[-1] else 0) >= block:
            bounds.append(e)
    if bounds[-1] != len(uk):
        bounds.append(len(uk))
    out: list[dict[str, np.ndarray]] = []
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        out.append(_moments_block(uk[a:b], st[a:b], mk[a:b], w[a:b], js[a:b], sidx[a:b],
                                  pair, cnt, start, leaf))
    if not out:
        z = np.zeros(0, np.int64)
        return {"uk": z, "key": z.copy(), "s": z.copy(), "t": z.copy()}
    return {k: np.concatenate([o[k] for o in out]) for k in ("uk", "key", "s", "t")}


def _moments_block(uk: np.ndarray, st: np.ndarray, mk: np.ndarray, w: np.ndarray,
                   js: np.ndarray, sidx: np.ndarray, pair: np.ndarray, cnt: np.ndarray,
                   start: np.ndarray, leaf: np.ndarray) -> dict[str, np.ndarray]:
    """`upload_moments` of whole uploads' rows; `sidx`: each row's index in the distinct
    stacks (where `js`)."""
    ku, kk = [uk[~js]], [-2 - mk[~js]]
    s_l, t_l = [w[~js]], [w[~js]]
    if js.any():
        inv = sidx[js]
        n_of = cnt[inv]
        row = np.repeat(np.arange(len(inv)), n_of)
        off = np.arange(len(row)) - np.repeat(np.cumsum(n_of) - n_of, n_of)
        ujs, wjs = uk[js], w[js]
        ku.append(ujs[row])
        kk.append(pair[start[inv][row] + off, 1])
        s_l.append(np.zeros(len(row), np.int64))
        t_l.append(wjs[row])
        del row, off
        ku.append(ujs)  # self: the leaf's group
        kk.append(leaf[inv])
        s_l.append(wjs)
        t_l.append(np.zeros(len(wjs), np.int64))
    k_uk, k_key = np.concatenate(ku), np.concatenate(kk)
    del ku, kk
    if not len(k_uk):
        z = np.zeros(0, np.int64)
        return {"uk": z, "key": z.copy(), "s": z.copy(), "t": z.copy()}
    # (uk, key) packed into one index: both columns are small (the block's upload keys;
    # group ids and -2 - marker). Summed into a dense array of every index when that is
    # not much larger than the rows, which gives them in (uk, key) order with no sort (the
    # lexsort was ~40 % of a tail's interning, issue 34); else sorted by the index.
    lo, ulo = int(k_key.min()), int(k_uk.min())
    span = int(k_key.max()) - lo + 1
    size = (int(k_uk.max()) - ulo + 1) * span
    packed = (k_uk - ulo) * span + (k_key - lo)
    del k_uk, k_key
    if size <= max(DENSE_PER_ROW * len(packed), DENSE_CELLS):
        cells = np.flatnonzero(np.bincount(packed, minlength=size))
        out = {"uk": cells // span + ulo, "key": cells % span + lo}
        for name, vals in (("s", s_l), ("t", t_l)):
            acc = np.zeros(size, np.int64)
            np.add.at(acc, packed, np.concatenate(vals))  # integers: exact
            out[name] = acc[cells]
        return out
    order = np.argsort(packed)
    sp = packed[order]
    first = np.flatnonzero(np.r_[True, sp[1:] != sp[:-1]])
    cells = sp[first]
    del sp
    out = {"uk": cells // span + ulo, "key": cells % span + lo}
    for name, vals in (("s", s_l), ("t", t_l)):
        v = np.concatenate(vals)[order]
        out[name] = np.add.reduceat(v, first)  # integers: exact
    return out


def frame_groups(frames: list[tuple]) -> np.ndarray:
    """Per frame (in id order): the smallest id of the frames with its `group_key`. A
    release's ids only grow, so a group's smallest id never changes as frames come."""
    first: dict[tuple, int] = {}
    return np.asarray([first.setdefault(group_key(f), i) for i, f in enumerate(frames)],
                      np.int64)


def rollup_columns(up: dict[str, Any], weights: dict[str, np.ndarray],
                   frames: dict[str, np.ndarray], groups: np.ndarray | None = None,
                   moments: dict[str, np.ndarray] | None = None
                   ) -> dict[str, dict[str, Any]]:
    """The rollup rows (kind -> columns) of some uploads of one release and day.

    `up`: per upload `uk`, `route`, `env`, `sample_interval`, `page_load`, `samples`,
    `lost_ms` (lists or arrays); `weights`, `frames`: their rows of the weights and
    upload_frames tables (uk, ...). Rows of uploads not in `up` are ignored. `groups`:
    per frame id, its group's smallest id (`frame_groups`; -1 or beyond: none).
    `moments`: per (upload, key) self and total ns (`upload_moments`)."""
    g = np.asarray(groups if groups is not None else [], np.int64)
    uks = np.asarray(up["uk"], np.int64)
    # Each upload's cell: an index into the distinct (route, env) pairs, in first-seen order
    cells: dict[tuple, int] = {}
    cell_of = np.asarray([cells.setdefault((r, e), len(cells))
                          for r, e in zip(up["route"], up["env"], strict=True)], np.int64)
    names = list(cells)
    order = np.argsort(uks, kind="stable")
    suk = uks[order]

    def cell_rows(uk: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per row of upload `uk`: its cell (-1: an upload not in `up`)."""
        if not len(suk):
            return np.full(len(uk), -1, np.int64), np.zeros(len(uk), bool)
        i = np.minimum(np.searchsorted(suk, uk), len(suk) - 1)
        ok = suk[i] == uk
        return np.where(ok, cell_of[order[i]], -1), ok

    def with_cell(c: np.ndarray, cols: dict[str, Any]) -> dict[str, Any]:
        return {"route": [names[i][0] for i in c.tolist()],
                "env": [names[i][1] for i in c.tolist()], **cols}

    out: dict[str, dict[str, Any]] = {}
    # cells: per (cell, interval)
    total_ns = np.zeros(len(uks), np.int64)
    wc, wok = cell_rows(np.asarray(weights["uk"], np.int64))
    if wok.any():
        pos = np.searchsorted(suk, np.asarray(weights["uk"], np.int64)[wok])
        np.add.at(total_ns, order[pos], np.asarray(weights["weight_ns"], np.int64)[wok])
    ivs = [_interval(v) for v in up["sample_interval"]]
    groups: dict[tuple[int, float | None], list[int]] = {}
    for i, (c, iv) in enumerate(zip(cell_of.tolist(), ivs, strict=True)):
        groups.setdefault((c, iv), []).append(i)
    samples = np.asarray(up["samples"], np.int64)
    lost = np.asarray(up["lost_ms"], np.float64)
    own = np.asarray([p is None for p in up["page_load"]], bool)
    keys = list(groups)
    idx = [np.asarray(groups[k], np.int64) for k in keys]
    out["rollup_cells"] = with_cell(np.asarray([k[0] for k in keys], np.int64), {
        "sample_interval": [k[1] for k in keys],
        "uploads": np.asarray([len(i) for i in idx], np.int64),
        "own_loads": np.asarray([int(own[i].sum()) for i in idx], np.int64),
        "samples": np.asarray([int(samples[i].sum()) for i in idx], np.int64),
        "total_ns": np.asarray([int(total_ns[i].sum()) for i in idx], np.int64),
        "lost_ms": np.asarray([float(lost[i].sum()) for i in idx], np.float64),
        "a_sq": np.asarray([float((total_ns[i].astype(np.float64) ** 2).sum()) for i in idx],
                           np.float64),
    })
    # loads: distinct (cell, page-load id)
    pl = sorted({(c, p) for c, p in zip(cell_of.tolist(), up["page_load"], strict=True)
                 if p is not None})
    out["rollup_loads"] = with_cell(np.asarray([c for c, _ in pl], np.int64),
                                    {"load_hash": load_hash([p for _, p in pl]),
                                     "registers": [None] * len(pl)})
    # stacks: weights summed per (cell, stack, marker)
    st = np.asarray(weights["stack_id"], np.int64)[wok]
    mk = np.asarray(weights["marker"], np.int64)[wok]
    key = np.stack([wc[wok], st, mk], axis=1) if wok.any() else np.zeros((0, 3), np.int64)
    uq, inv = unique_rows(key)
    inv = inv.reshape(-1)
    out["rollup_stacks"] = with_cell(uq[:, 0], {
        "stack_id": uq[:, 1].copy(), "marker": uq[:, 2].astype(np.int8),
        "samples": _sum(inv, np.asarray(weights["samples"], np.int64)[wok], len(uq)),
        "weight_ns": _sum(inv, np.asarray(weights["weight_ns"], np.int64)[wok], len(uq)),
    })
    # frames: uploads per (cell, frame, marker, bucket of its self time)
    fc, fok = cell_rows(np.asarray(frames["uk"], np.int64))
    fid = np.asarray(frames["frame_id"], np.int64)[fok]
    fmk = np.asarray(frames["marker"], np.int64)[fok]
    fns = np.asarray(frames["self_ns"], np.int64)[fok]
    key = (np.stack([fc[fok], fid, fmk, bucket_of(fns), np.zeros(len(fid), np.int64)],
                    axis=1) if fok.any() else np.zeros((0, 5), np.int64))
    # functions of two or more frames: each upload's frames of one summed, then bucketed
    if len(g) and len(fid):
        sizes = np.bincount(g[g >= 0], minlength=len(g))
        rep = np.where((fid >= 0) & (fid < len(g)), g[np.clip(fid, 0, len(g) - 1)], -1)
        multi = rep >= 0
        multi[multi] = sizes[rep[multi]] > 1
        if multi.any():
            uk = np.asarray(frames["uk"], np.int64)[fok][multi]
            pk = np.stack([uk, rep[multi], fc[fok][multi]], axis=1)
            uq, inv = unique_rows(pk)
            ns = _sum(inv.reshape(-1), fns[multi], len(uq))
            key = np.concatenate([key, np.stack([
                uq[:, 2], uq[:, 1], np.full(len(uq), NONE, np.int64), bucket_of(ns),
                np.ones(len(uq), np.int64)], axis=1)])
    uq, inv = unique_rows(key)
    out["rollup_frames"] = with_cell(uq[:, 0], {
        "frame_id": uq[:, 1].copy(), "marker": uq[:, 2].astype(np.int8),
        "bucket": uq[:, 3].astype(np.int16), "grouped": uq[:, 4].astype(np.int8),
        "traces": np.bincount(inv.reshape(-1), minlength=len(uq)).astype(np.int64),
    })
    # moments: per (cell, key) over the uploads, with each upload's all ns `a`
    m = moments or {"uk": np.zeros(0, np.int64), "key": np.zeros(0, np.int64),
                    "s": np.zeros(0, np.int64), "t": np.zeros(0, np.int64)}
    mc, mok = cell_rows(np.asarray(m["uk"], np.int64))
    a = np.zeros(int(mok.sum()))
    if mok.any():
        a = total_ns[order[np.searchsorted(suk, np.asarray(m["uk"], np.int64)[mok])]].astype(
            np.float64)
    ms = np.asarray(m["s"], np.int64)[mok]
    mt = np.asarray(m["t"], np.int64)[mok]
    key = np.stack([mc[mok], np.asarray(m["key"], np.int64)[mok]], axis=1) if mok.any() \
        else np.zeros((0, 2), np.int64)
    uq, inv = unique_rows(key)
    inv = inv.reshape(-1)

    def fsum(v: np.ndarray) -> np.ndarray:
        return np.bincount(inv, weights=v, minlength=len(uq)).astype(np.float64)

    sf, tf = ms.astype(np.float64), mt.astype(np.float64)
    out["rollup_moments"] = with_cell(uq[:, 0], {
        "key": uq[:, 1].copy(),
        "uploads": np.bincount(inv, minlength=len(uq)).astype(np.int64),
        "s_sum": _sum(inv, ms, len(uq)), "s_sq": fsum(sf * sf), "s_a": fsum(sf * a),
        "t_sum": _sum(inv, mt, len(uq)), "t_sq": fsum(tf * tf), "t_a": fsum(tf * a),
    })
    return out


def _sum(inv: np.ndarray, v: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros(n, np.int64)
    np.add.at(out, inv, v)  # integers: exact
    return out


def aggregate(kind: str, table: Any) -> Any:
    """A rollup table's rows summed by their keys (`KEYS`): what a merge writes."""
    import pyarrow as pa

    sch = schemas()[kind]
    keys = list(KEYS[kind])
    vals = [n for n in sch.names if n not in keys]
    if not table.num_rows:
        return table
    if kind == "rollup_loads":
        return _merge_loads(table, sch)
    if kind == "rollup_examples":
        return merge_examples(table, sch)
    # Floats (a null interval) are grouped as values; lost_ms is summed in float64.
    how = {v: "min" if v in MIN_VALUES else "sum" for v in vals}
    got = table.group_by(keys, use_threads=False).aggregate([(v, h) for v, h in how.items()])
    cols = {k: got[k] for k in keys}
    cols.update({v: got[f"{v}_{h}"] for v, h in how.items()})
    out = pa.table(cols).select(sch.names).cast(sch)
    if kind == "rollup_vitals":  # a page load's -1s met its +1s: nothing left to keep
        import pyarrow.compute as pc

        out = out.filter(pc.not_equal(out["count"], 0))
    if kind == "rollup_perload":  # a key only an earlier chunk had, taken away again
        import pyarrow.compute as pc

        out = out.filter(pc.or_(pc.or_(pc.not_equal(out["loads"], 0),
                                       pc.not_equal(out["s_sum"], 0)),
                                pc.not_equal(out["s_sq"], 0.0)))
    return out


def _merge_loads(table: Any, sch: Any) -> Any:
    """rollup_loads rows made distinct per cell; a cell past LOADS_EXACT ids (or with a
    sketch already) becomes one row of HyperLogLog registers."""
    import pyarrow as pa

    d = table.to_pydict()
    cells: dict[tuple, tuple[set, list]] = {}
    for r, e, h, g in zip(d["route"], d["env"], d["load_hash"], d["registers"], strict=True):
        ids, regs = cells.setdefault((r, e), (set(), []))
        if g is not None:
            regs.append(g)
        elif h is not None:
            ids.add(h)
    out: dict[str, list] = {n: [] for n in sch.names}
    for (r, e), (ids, regs) in cells.items():
        hashes = np.fromiter(ids, np.int64, len(ids))
        if regs or len(ids) > LOADS_EXACT:
            m = hll_registers(hashes)
            for g in regs:
                np.maximum(m, np.frombuffer(g, np.uint8), out=m)
            rows = [(None, m.tobytes())]
        else:
            rows = [(h, None) for h in sorted(hashes.tolist())]
        for h, g in rows:
            out["route"].append(r)
            out["env"].append(e)
            out["load_hash"].append(h)
            out["registers"].append(g)
    return pa.table(out, schema=sch)


# rollup_examples (what `fleet regressions` cites; tables/perload.py makes the rows)
EXAMPLES_KEPT = 5  # uploads kept per (route, env, function): `--examples` at most this


def top_examples(group: np.ndarray, key: np.ndarray, self_ns: np.ndarray, uk: np.ndarray,
         k: int = EXAMPLES_KEPT) -> np.ndarray:
    """Indices of the rows that are among the `k` with the most `self_ns` (then the
    largest `uk`) of their (group, key), in that order."""
    if not len(key):
        return np.zeros(0, np.int64)
    order = np.lexsort((-np.asarray(uk, np.int64), -np.asarray(self_ns, np.int64),
                        np.asarray(key, np.int64), np.asarray(group, np.int64)))
    g, kk = np.asarray(group)[order], np.asarray(key)[order]
    start = np.r_[True, (g[1:] != g[:-1]) | (kk[1:] != kk[:-1])]
    first = np.maximum.accumulate(np.where(start, np.arange(len(order)), 0))
    rank = np.arange(len(order)) - first
    return order[rank < k]


def merge_examples(table: Any, sch: Any) -> Any:
    """rollup_examples rows of several parts: the top EXAMPLES_KEPT per (route, env, key)."""
    import pyarrow as pa

    d = table.to_pydict()
    cells: dict[tuple, int] = {}
    c = np.asarray([cells.setdefault((r, e), len(cells))
                    for r, e in zip(d["route"], d["env"], strict=True)], np.int64)
    top = top_examples(c, np.asarray(d["key"], np.int64), np.asarray(d["self_ns"], np.int64),
               np.asarray(d["uk"], np.int64)).tolist()
    return pa.table({n: [d[n][i] for i in top] for n in sch.names}, schema=sch)
