"""Time view rollups, the design measured before it is built (issue 34): what the merged
flame page's Time view would cost answered from sums made at compaction, and whether
those sums give exactly the answer the per-sample scans give.

Nothing here is in jsprof: the rollups are made by this script from a compacted store's
samples table (as a compactor would make them from a batch's samples), written as Parquet
beside it, then read as a query would. Three things are measured on one store:

- `top`, and the flame page (HTML) as today (TIME_UPLOADS = 500: a spread) and over every
  upload (TIME_UPLOADS unbounded: what rollups over whole days sum), process CPU;
- the rollups' rows and their making;
- a query from them: the bucket width and count from counts per `time_key` (no order
  statistic of the samples: below), then the sums per (release, stack, marker, bucket),
  per bucket, and the page loads per bucket, compared with the per-sample SQL of
  fleet/timecourse.py over every upload (equal, or the script says what differs).

Why counts per key give the 99th percentile's buckets exactly: the view uses the
percentile `hi` only through width = _nice(max(hi, 1) / BUCKETS) and nb = ceil(hi / width)
(`time_key`). Both are non-decreasing in hi, so the set of times with one key is an
interval; numpy's `hi` lies between the two order statistics it interpolates, so when
both have one key (found from cumulative counts per key in key order) `hi` has it too.
When they differ the query must read the samples for the percentile (as today): counted.

    .venv/bin/python benchmarks/bench_time_rollup.py --store DIR    # bench_flame_query's
"""

from __future__ import annotations

import argparse
import math
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from jsprof.fleet import api, timecourse
from jsprof.fleet.filters import Filters
from jsprof.fleet.query import IDLE_MARKERS, select
from jsprof.fleet.timecourse import BUCKETS, _nice, floor_div_sql
from jsprof.store import Store
from jsprof.store.tables.compact import compact
from jsprof.trace import NONE

GRIDS = range(6)  # 10^k ms, k = 0..5: a width of 1, 2 or 5 x 10^k sums from grid k
TB_CAP = 500  # nb <= 100 buckets of width <= 5 grid steps: tb past 500 is "later" anyway


def time_key(x: float) -> tuple[float, int]:
    """(width, nb) the Time view draws when the 99th percentile is `x`."""
    width = _nice(max(x, 1.0) / BUCKETS)
    return width, max(int(math.ceil(x / width)), 1)


def cpu(fn: Any) -> tuple[float, Any]:
    c0 = time.process_time()
    out = fn()
    return time.process_time() - c0, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", type=Path, required=True)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="jsprof-timeroll-"))
    try:
        return run(args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(args: Any, tmp: Path) -> int:
    path = tmp / "store"
    shutil.copytree(args.store, path)
    st = Store(path)
    compact(st)  # the tail too: every sample in the tables
    f = Filters(app="soak")
    got: dict[str, Any] = {}
    orig = timecourse.time_course

    def keep(*a: Any) -> Any:
        got["ft"] = orig(*a)
        return got["ft"]

    timecourse.time_course = keep  # type: ignore[assignment]
    html = lambda s: api.flame(s, f, "html", 2000)  # noqa: E731
    for name, cap, ask in (("top", None, lambda s: api.top(s, f, 20)),
                           ("flame html, 500 uploads (today)", 500, html),
                           ("flame html, every upload", 10**9, html)):
        for r in range(args.runs):
            if cap:
                timecourse.TIME_UPLOADS = cap
            with api.session(st) as s:
                c, _ = cpu(lambda s=s, ask=ask: ask(s))
            print(f"{name} run {r}: {c:.2f} s CPU", flush=True)
    timecourse.time_course = orig  # type: ignore[assignment]
    ref = got["ft"]  # every upload's
    with api.session(st) as s:
        up = select(s.engine, s.snap, f).uploads
    load_of = dict(zip(up.uk.tolist(), up.page_load_index().tolist(), strict=True))
    files = sorted(str(p) for p in (path / "tables" / "samples").rglob("*.parquet"))
    con = duckdb.connect()
    con.sql("SET threads=1")
    t = con.sql(f"SELECT uk, t, stack_id, marker, weight_ns FROM read_parquet({files!r})"
                ).to_arrow_table()
    # ---- the compactor's part: per sample its key and grid buckets, summed ----------
    c0 = time.process_time()
    uk = t["uk"].to_numpy()
    x = np.maximum(t["t"].to_numpy(), 0.0)
    sid = t["stack_id"].to_numpy()
    mk = t["marker"].to_numpy().astype(np.int64)
    ns = t["weight_ns"].to_numpy()
    idle = (sid == NONE) & np.isin(mk, IDLE_MARKERS)
    load = np.fromiter((load_of[u] for u in uk.tolist()), np.int64, len(uk))
    ux, inv = np.unique(x, return_inverse=True)
    keys = [time_key(float(v)) for v in ux.tolist()]
    kw = np.asarray([k[0] for k in keys])[inv]
    kn = np.asarray([k[1] for k in keys], np.int64)[inv]
    kt = pa.table({"idle": idle, "width": kw, "nb": kn}).group_by(
        ["idle", "width", "nb"]).aggregate([("nb", "count")]).rename_columns(
        ["idle", "width", "nb", "samples"])
    times, loads = [], []
    for k in GRIDS:
        tb = np.minimum(np.floor_divide(x, 10.0 ** k), TB_CAP).astype(np.int64)
        tt = pa.table({"grid": np.full(len(tb), k, np.int8), "tb": tb, "stack_id": sid,
                       "marker": mk, "weight_ns": ns, "uk": uk})
        times.append(tt.group_by(["grid", "tb", "stack_id", "marker"]).aggregate(
            [("weight_ns", "sum"), ("uk", "min")]))
        tl = pa.table({"grid": np.full(len(tb), k, np.int8), "tb": tb, "load": load,
                       "busy": (~idle).astype(np.int64)})
        loads.append(tl.group_by(["grid", "tb", "load"]).aggregate([("busy", "sum")]))
    rt, rl = pa.concat_tables(times), pa.concat_tables(loads)
    pq.write_table(rt, tmp / "rollup_time.parquet")
    pq.write_table(rl, tmp / "rollup_timeloads.parquet")
    pq.write_table(kt, tmp / "rollup_timekeys.parquet")
    made = time.process_time() - c0
    print(f"rollups made in {made:.1f} s CPU from {len(x):,} samples: rollup_time "
          f"{rt.num_rows:,} rows, rollup_timeloads {rl.num_rows:,}, rollup_timekeys "
          f"{kt.num_rows:,}", flush=True)
    for k in GRIDS:
        print(f"  grid 10^{k} ms: {int((rt['grid'].to_numpy() == k).sum()):,} time rows, "
              f"{int((rl['grid'].to_numpy() == k).sum()):,} (bucket, load) rows")
    del t, uk, x, sid, mk, ns, idle, load, kw, kn
    # ---- the query's part ----------------------------------------------------------
    for r in range(args.runs):
        c, ans = cpu(lambda: from_rollups(tmp))
        print(f"Time view sums from the rollups, run {r}: {c:.3f} s CPU", flush=True)
    width, nb, later, cells, total_b, loads_b = ans
    ok = width == ref["width"] and len(total_b) == ref["buckets"] and later == ref["later"]
    print(f"width {width} ms, {len(total_b)} buckets, later {later}: "
          f"{'as' if ok else 'NOT as'} the page's ({ref['width']}, {ref['buckets']}, "
          f"{ref['later']})")
    same_b = [round(float(v) / 1e6, 6) for v in total_b] == ref["bucketMs"]
    same_l = loads_b.tolist() == ref["bucketLoads"]
    # the cells against the per-sample SQL of the view (every upload, one release here)
    q = con.sql(
        "SELECT stack_id AS sid, marker AS m, b, sum(weight_ns)::BIGINT AS ns, "
        "min(uk) AS first FROM (SELECT *, "
        f"least({floor_div_sql('x', 'w')}, nb)::BIGINT AS b FROM (SELECT *, "
        f"greatest(t, 0.0) AS x, {width}::DOUBLE AS w, {nb}::DOUBLE AS nb "
        f"FROM read_parquet({files!r}))) GROUP BY ALL ORDER BY ALL").fetchall()
    same_c = q == cells
    print(f"per bucket ms {'equal' if same_b else 'DIFFER'}, page loads per bucket "
          f"{'equal' if same_l else 'DIFFER'}, (stack, marker, bucket) cells "
          f"{'equal' if same_c else 'DIFFER'} ({len(cells):,} cells)")
    st.close()
    return 0 if ok and same_b and same_l and same_c else 1


def from_rollups(d: Path) -> tuple:
    """What `_bucket_sums` gives (for one release: the stacks' functions are not looked
    up here, the same as today's after the sums), from the three rollups."""
    con = duckdb.connect()
    con.sql("SET threads=1")
    kt = con.sql(f"SELECT width, nb, sum(samples)::BIGINT AS n FROM "
                 f"'{d}/rollup_timekeys.parquet' GROUP BY ALL ORDER BY width, nb").fetchall()
    n = sum(r[2] for r in kt)
    virtual = (n - 1) * 0.99
    k0 = math.floor(virtual)
    k1 = min(k0 + 1, n - 1)
    cum = np.cumsum([r[2] for r in kt])
    a, b = np.searchsorted(cum, [k0, k1], side="right")
    if a != b:
        raise SystemExit("the percentile's order statistics have two keys: a sample scan")
    width, nb = float(kt[a][0]), int(kt[a][1])
    grid = int(round(math.log10(width)))  # 1, 2, 5 x 10^grid (widths >= 1 ms here)
    m = int(round(width / 10 ** grid))
    cells = con.sql(
        f"SELECT stack_id AS sid, marker AS m, least(tb // {m}, {nb})::BIGINT AS b, "
        "sum(weight_ns_sum)::BIGINT AS ns, min(uk_min) AS first "
        f"FROM '{d}/rollup_time.parquet' WHERE grid = {grid} GROUP BY ALL ORDER BY ALL"
    ).fetchall()
    lb = con.sql(f"SELECT least(tb // {m}, {nb})::BIGINT AS b, count(DISTINCT load) AS n "
                 f"FROM '{d}/rollup_timeloads.parquet' WHERE grid = {grid} "
                 "GROUP BY ALL ORDER BY b").fetchall()
    later = any(c[2] == nb for c in cells)
    nbk = nb + 1 if later else nb
    total_b = np.zeros(nbk, np.int64)
    for c in cells:
        total_b[c[2]] += c[3]
    loads_b = np.zeros(nbk, np.int64)
    for bb, c in lb:
        loads_b[bb] = c
    return width, nb, later, cells, total_b, loads_b


if __name__ == "__main__":
    raise SystemExit(main())
