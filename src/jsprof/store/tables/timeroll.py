"""The merged Time view's rollups (format 11): what `fleet flame`'s Time view sums, made
from a batch's samples at compaction, so that a query over whole days reads rows that grow
with distinct stacks and time buckets, not with the samples (issue 34: the view's scans of
the samples were ~85 % of a flame page, ~9x `fleet top`).

  rollup_time      route, env, grid, tb, stack_id, marker -> weight_ns, first_uk
                   the samples' ns per time bucket `tb` = min(t // 10^grid ms, TB_CAP) of
                   each grid (t: ms since the page's start, at least 0), and the first
                   upload with them (min uk: the order the view names no-stack samples in)
  rollup_timeloads route, env, grid, tb, load_hash -> samples, busy
                   per page load (`load_hash` of its id, or of its upload's own id) its
                   samples in each bucket, and those not idle (`IDLE_MARKERS`): the view's
                   page loads per bucket, with and without --exclude-idle
  rollup_timekeys  route, env, idle, width, nb -> samples
                   the samples counted per `time_key` of their time: what the 99th
                   percentile of the times picks (the buckets' width and count), found
                   without the times themselves (`percentile_key`)

The view's width is 1, 2 or 5 x 10^k ms; for k in 0..GRIDS-1 its buckets are sums of grid
k's (integer ms: `t // w` is exact, and equals `(t // 10^k) // (w / 10^k)`). Bucket
indices past TB_CAP grid steps are one row: every view puts them in its "later" bucket.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from ...trace import MARKERS, NONE

BUCKETS = 100  # the view's time buckets up to the 99th percentile (and one "later")
GRIDS = 6  # grids of 10^0 .. 10^5 ms: views of widths 1 ms .. 500 s
# A view has at most BUCKETS + 1 buckets before "later" (`_nice` may undershoot by 1e-12)
# of at most 5 grid steps each: 505 steps; past TB_CAP a bucket is "later" in every view.
TB_CAP = 1023
# Samples that --exclude-idle leaves out: no stack, marked idle or unmarked ("other")
IDLE_MARKERS = (NONE, MARKERS.index("other"))
TIME_KINDS = ("rollup_time", "rollup_timeloads", "rollup_timekeys")
# Which samples the Time view places: those whose stored time is finite. A NaN or
# infinite time is in no bucket and no key, so it is left out and counted, by the
# rollups here (`timed`) and by the view's scans of the samples (this SQL, on the samples'
# `t`): one rule, so either path gives the same view (issue 34).
TIMED_SQL = "isfinite(t)"


def timed(t: np.ndarray) -> np.ndarray:
    """`TIMED_SQL` of times `t`: which are finite."""
    return np.isfinite(np.asarray(t, np.float64))


def nice(x: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten at or above `x` (ms)."""
    if not x > 0:
        return 1.0
    p = 10.0 ** math.floor(math.log10(x))
    for m in (1, 2, 5, 10):
        if m * p >= x - 1e-12:
            return m * p
    return 10 * p


def time_key(hi: float) -> tuple[float, int]:
    """(width ms, buckets) of a Time view whose samples' 99th percentile time is `hi`.
    Non-decreasing in `hi` (width first, then buckets): the times with one key are an
    interval."""
    width = nice(max(hi, 1.0) / BUCKETS)
    return width, max(int(math.ceil(hi / width)), 1)


def time_keys(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`time_key` of each time (>= 0), exactly as it computes it: the width in numpy,
    checked against `nice` at each width's smallest and largest time (the key is
    monotone, so the times between have it too), the rest by `nice` itself."""
    x = np.asarray(x, np.float64)
    if not len(x):
        return np.zeros(0), np.zeros(0, np.int64)
    v = np.maximum(x, 1.0) / BUCKETS
    p = 10.0 ** np.floor(np.log10(v))
    w = np.where(1 * p >= v - 1e-12, p, np.where(2 * p >= v - 1e-12, 2 * p,
                 np.where(5 * p >= v - 1e-12, 5 * p, 10 * p)))
    for c in np.unique(w).tolist():
        on = w == c
        lo, hi = float(x[on].min()), float(x[on].max())
        if nice(max(lo, 1.0) / BUCKETS) != c or nice(max(hi, 1.0) / BUCKETS) != c:
            ux, inv = np.unique(x[on], return_inverse=True)
            w[on] = np.asarray([nice(max(u, 1.0) / BUCKETS) for u in ux.tolist()])[inv]
    nb = np.maximum(np.ceil(x / w), 1).astype(np.int64)
    return w, nb


def percentile_key(width: np.ndarray, nb: np.ndarray, n: np.ndarray
                   ) -> tuple[float, int] | None:
    """`time_key` of np.percentile(times, 99) from the times counted per key (`n` of
    key (`width`, `nb`)), or None when the two times numpy interpolates between have two
    keys (the percentile then needs the times). numpy's value lies between those two,
    and the times with one key are an interval: the same key."""
    cnt = np.asarray(n, np.int64)
    keep = cnt > 0
    w, b, cnt = np.asarray(width, np.float64)[keep], np.asarray(nb, np.int64)[keep], cnt[keep]
    total = int(cnt.sum())
    if not total:
        return None
    order = np.lexsort((b, w))
    w, b, cum = w[order], b[order], np.cumsum(cnt[order])
    k0 = math.floor((total - 1) * (99 / 100))  # numpy's "linear" method's ranks
    k1 = min(k0 + 1, total - 1)
    i0, i1 = np.searchsorted(cum, [k0, k1], side="right").tolist()
    if w[i0] != w[i1] or b[i0] != b[i1]:  # (rows of one key need not be one row)
        return None
    return float(w[i0]), int(b[i0])


def view_grid(width: float) -> tuple[int, int] | None:
    """(grid k, buckets of the grid per view bucket) that a view of `width` ms sums
    from, or None (under 1 ms or past the largest grid: its sums need the samples)."""
    if not (width >= 1 and width == int(width)):
        return None
    k = len(str(int(width))) - 1
    if k >= GRIDS or int(width) % 10 ** k:
        return None
    return k, int(width) // 10 ** k


def time_parts(cells: dict[str, Any], samples: dict[str, np.ndarray], load_hash: Any
               ) -> tuple[int, Iterator[tuple[str, Any]]]:
    """The three kinds' rows of a batch's samples (uk, t, stack_id as stored, marker,
    weight_ns) of one day, as (kind, pyarrow table) pieces: rollup_timekeys whole, then
    per grid its rollup_time and rollup_timeloads rows, each made when the one before
    has been taken, so a writer holds one grid's rows at a time (issue 34: the six grids
    held together, route and env as a Python string per row, were a 574 MiB peak of a
    3 M-sample batch). `cells`: its uploads' uk, id, route, env, page_load (lists);
    `load_hash`: page-load ids -> 64-bit hashes (rollup.load_hash).

    Returns (samples dropped, pieces). A sample whose time is not finite is in no time
    bucket (NaN cast to int64 is an arbitrary one) and no time key (`time_keys` raised on
    a NaN, `nice` on an infinity: either failed every compaction of its batch): it is
    left out of the rollups and counted. The recorders' formats refuse such times, so a
    stored sample has one only if the table was written by other means."""
    keep = timed(samples["t"])
    dropped = int(len(keep) - keep.sum())
    if dropped:
        samples = {k: np.asarray(samples[k])[keep]
                   for k in ("uk", "t", "stack_id", "marker", "weight_ns")}
    return dropped, _pieces(cells, samples, load_hash)


def _pieces(cells: dict[str, Any], samples: dict[str, np.ndarray], load_hash: Any
            ) -> Iterator[tuple[str, Any]]:
    import pyarrow as pa

    sch = schemas()
    uks = np.asarray(cells["uk"], np.int64)
    order = np.argsort(uks, kind="stable")
    uks = uks[order]
    cid: dict[tuple, int] = {}
    ci = np.asarray([cid.setdefault((r, e), len(cid)) for r, e in
                     zip(cells["route"], cells["env"], strict=True)], np.int64)[order]
    lh = load_hash([p if p is not None else f"\0upload:{u}"
                    for p, u in zip(cells["page_load"], cells["id"], strict=True)])[order]
    uk = np.asarray(samples["uk"], np.int64)
    at = np.searchsorted(uks, uk)
    c = ci[at]
    x = np.maximum(np.asarray(samples["t"], np.float64), 0.0)
    sid = np.asarray(samples["stack_id"], np.int64)
    mk = np.asarray(samples["marker"], np.int64)
    ns = np.asarray(samples["weight_ns"], np.int64)
    idle = (sid == NONE) & np.isin(mk, IDLE_MARKERS)
    # route and env by their cell's code: a row's strings are taken from the cells' only
    # as a piece's table is made (one Python str per row was ~80 MB of the 3 M batch's)
    route = pa.array([r for r, _ in cid], pa.string())
    env = pa.array([e for _, e in cid], pa.string())

    def cell(codes: np.ndarray) -> dict[str, Any]:
        i = pa.array(np.asarray(codes, np.int64))
        return {"route": route.take(i), "env": env.take(i)}

    # the keys counted a slice of samples at a time, then summed: `time_keys`'s arrays of
    # a whole batch were its peak (~145 MiB of temporaries at 3 M samples)
    counted = []
    for a in range(0, len(x), SLICE_ROWS):
        w, nb = time_keys(x[a:a + SLICE_ROWS])
        counted.append(pa.table({
            "c": c[a:a + SLICE_ROWS], "idle": idle[a:a + SLICE_ROWS].astype(np.int8),
            "width": w, "nb": nb}).group_by(["c", "idle", "width", "nb"], use_threads=False
                                             ).aggregate([("nb", "count")]))
        del w, nb
    keys = (pa.concat_tables(counted).group_by(["c", "idle", "width", "nb"], use_threads=False)
            .aggregate([("nb_count", "sum")]).rename_columns(
                {"nb_count_sum": "nb_count"}) if counted else None)
    del counted
    yield "rollup_timekeys", pa.table({
        **cell(keys["c"].to_numpy()), "idle": keys["idle"].to_numpy(),
        "width": keys["width"].to_numpy(), "nb": keys["nb"].to_numpy(),
        "samples": keys["nb_count"].to_numpy()} if keys is not None else
        {f.name: [] for f in sch["rollup_timekeys"]}, schema=sch["rollup_timekeys"])
    del keys
    # Each grid's keys packed into one int64 (mixed radix: cell, tb, marker + 1, stack + 1;
    # page loads by their index among the batch's) and grouped on it: half the CPU of a
    # group-by on the columns (issue 34: the compactor pays this per batch)
    lid = np.unique(lh, return_inverse=True)[1].reshape(-1)[at] if len(lh) else at
    lhs = np.unique(lh) if len(lh) else lh
    del at
    ms, ss, ls = int(mk.max(initial=0)) + 2, int(sid.max(initial=0)) + 2, len(lhs) + 1
    cs, ts = len(cid) + 1, TB_CAP + 1
    sids = None
    if cs * ts * ms * ss >= 1 << 62:  # stack ids too large to pack: packed by their rank
        sids, rank = np.unique(sid, return_inverse=True)
        sid, ss = rank.reshape(-1).astype(np.int64) - 1, len(sids) + 1
    # the key's low digits (marker, stack) and high (cell), the same in every grid
    msid = (mk + 1) * ss + (sid + 1)
    cts = c * ts
    busy = (~idle).astype(np.int8)
    del mk, sid, idle, c
    for k in range(GRIDS):
        tb = np.floor_divide(x, 10.0 ** k)
        np.minimum(tb, TB_CAP, out=tb)
        ct = tb.astype(np.int64)
        del tb
        ct += cts
        for on in _slices(ct, cs * ts):
            g = _grouped(ct[on] * (ms * ss) + msid[on], cs * ts * ms * ss,
                         {"weight_ns": (ns[on], "sum"), "uk": (uk[on], "min")},
                         lambda key: {"ct": key // (ms * ss), "marker": (key // ss) % ms - 1,
                                      "stack_id": key % ss - 1})
            yield "rollup_time", pa.table({
                **cell(g["ct"] // ts), "grid": np.full(len(g["ct"]), k, np.int8),
                "tb": (g["ct"] % ts).astype(np.int16),
                "stack_id": g["stack_id"] if sids is None else sids[g["stack_id"] + 1],
                "marker": g["marker"].astype(np.int8), "weight_ns": g["weight_ns"],
                "first_uk": g["uk"]}, schema=sch["rollup_time"])
            del g
            b = busy[on]
            g = _grouped(ct[on] * ls + lid[on], cs * ts * ls,
                         {"busy": (b, "sum"), "samples": (b, "count")},
                         lambda key: {"ct": key // ls, "load": key % ls})
            del b
            yield "rollup_timeloads", pa.table({
                **cell(g["ct"] // ts), "grid": np.full(len(g["ct"]), k, np.int8),
                "tb": (g["ct"] % ts).astype(np.int16), "load_hash": lhs[g["load"]],
                "samples": g["samples"], "busy": g["busy"]}, schema=sch["rollup_timeloads"])
            del g
        del ct


SLICE_ROWS = 1 << 20


def _slices(ct: np.ndarray, span: int) -> Iterator[Any]:
    """The rows of a grid in slices of whole (cell, tb) values `ct` (< `span`) of about
    SLICE_ROWS rows each (more when one value has more), so that no group-by holds its
    hash table of a whole batch (a grid of 2.5 M groups of the 3 M-sample batch took
    Arrow's pool to ~285 MiB): as slices, the same rows, keys never split. One slice is
    `slice(None)`: the arrays as they are."""
    if len(ct) <= SLICE_ROWS:
        yield slice(None)
        return
    cum = np.cumsum(np.bincount(ct, minlength=span))
    lo = 0
    while lo < span:
        hi = int(np.searchsorted(cum, (cum[lo - 1] if lo else 0) + SLICE_ROWS, "right"))
        hi = min(max(hi, lo + 1), span)  # at least one value
        yield (ct >= lo) & (ct < hi)
        lo = hi


def time_rows(cells: dict[str, Any], samples: dict[str, np.ndarray],
              load_hash: Any) -> dict[str, Any]:
    """`time_parts`'s pieces of each kind as one table (all grids at once: for a table
    that is small or held anyway, as a query's tail is)."""
    import pyarrow as pa

    got: dict[str, list] = {k: [] for k in TIME_KINDS}
    for kind, t in time_parts(cells, samples, load_hash)[1]:
        got[kind].append(t)
    sch = schemas()
    return {k: pa.concat_tables(v) if v else sch[k].empty_table() for k, v in got.items()}


def _grouped(key: np.ndarray, span: int, vals: dict[str, tuple[np.ndarray, str]],
             unpack: Any) -> dict[str, np.ndarray]:
    """Rows grouped by a packed key (`span`: its values' bound): each of `vals` summed or
    its least kept, and the key unpacked into columns."""
    import pyarrow as pa

    assert span < 1 << 62, span  # bounded by the batch's samples (`time_rows`)
    t = pa.table({"k": key, **{n: v for n, (v, _) in vals.items()}}).group_by(
        ["k"], use_threads=False).aggregate([(n, how) for n, (_, how) in vals.items()])
    k = t["k"].to_numpy()
    out = {n: t[f"{n}_{how}"].to_numpy() for n, (_, how) in vals.items()}
    return {**out, **unpack(k)}


def schemas() -> dict[str, Any]:
    import pyarrow as pa

    cell = [("route", pa.string()), ("env", pa.string())]
    return {
        "rollup_time": pa.schema([*cell, ("grid", pa.int8()), ("tb", pa.int16()),
                                  ("stack_id", pa.int64()), ("marker", pa.int8()),
                                  ("weight_ns", pa.int64()), ("first_uk", pa.int64())]),
        "rollup_timeloads": pa.schema([*cell, ("grid", pa.int8()), ("tb", pa.int16()),
                                       ("load_hash", pa.int64()), ("samples", pa.int64()),
                                       ("busy", pa.int64())]),
        "rollup_timekeys": pa.schema([*cell, ("idle", pa.int8()), ("width", pa.float64()),
                                      ("nb", pa.int64()), ("samples", pa.int64())]),
    }
