"""The Time view of a fleet merge: when in a page load each function runs, over many.

Page loads share no clock, but each has its own: the time since its navigation start (its
`timeOrigin`, which the browser's sample times and timeline entries count from). So the
merged Time view places every sample at its time since its page's start and sums them per
time bucket over the matching page loads: per function, its self time in each bucket and
its share of that bucket's sampled time; beside them, when long animation frames,
interactions and LCP happened (from the timelines the uploads carry) and the `fleet
vitals` rows of the same selection, and links to example uploads, whose own Time view
has real sample times.

The samples table keeps each sample's time on its upload's clock (written at compaction,
issue 34), and the uploads table the timelines, so this reads only tables: the samples of
at most TIME_UPLOADS uploads (an even spread over the selection, said on the page), to
bound the page's size and the work. Within that cap each function's time summed over the
buckets is its `fleet top` self time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..analysis.profile import FunctionKey
from ..store.tables.view import TIMED_SQL, time_key
from ..trace import MARKERS, NONE, no_stack_name
from . import timeline as tl
from .engine import Snapshot, Uploads

TIME_UPLOADS = 500  # uploads whose samples a view reads at most
# BUCKETS: time buckets up to the 99th percentile of sample times (and one "later");
# `_nice` their width. One definition with the tables' Time view rollups, which count
# the samples by the (width, buckets) their time would give (`time_key`).
FUNCTIONS = 200  # functions with a per-bucket row; the rest are one "(other functions)" row
EXAMPLES = 6  # example uploads linked
NS_PER_MS = 1_000_000


@dataclass
class TimeSelection:
    """What `time_course` reads of a query's Selection: its filters and uploads, and the
    releases it has already read (it reads the others it needs itself). The Time view read
    on its own (`api.flame_time`) makes one of these: no stacks summed, no call tree."""

    filters: Any
    uploads: Uploads
    releases: dict = field(default_factory=dict)


def _spread(n: int, cap: int) -> np.ndarray:
    """Indices of at most `cap` of n items, evenly spread (all of them under the cap)."""
    if n <= cap:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, cap).round().astype(np.int64))


def time_course(engine: Any, snap: Snapshot, sel: Any, app: str) -> dict:
    """The `fleetTime` block of the viewer's model for a query's Selection `sel`.

    Its samples are summed in the engine per (function, bucket), never held: the answer
    costs functions x buckets of memory, whatever the samples of the uploads read."""
    from .engine import DuckEngine
    from .vitals import upload_rows, vitals

    up: Uploads = sel.uploads
    pick = _spread(len(up), TIME_UPLOADS)
    chosen = np.zeros(len(up), bool)
    chosen[pick] = True
    sub = up.subset(chosen)  # in the order of `pick` (ascending)
    # Each picked upload's timeline (the uploads table's meta): no raw upload is read.
    metas = upload_rows(snap, sel.filters, sub)
    timelines: list[tuple[str, dict | None]] = []
    with_timeline: set[int] = set()
    # Uploads compacted before the tables kept sample times (format 4) have none here.
    untimed = int((sub.uk < snap.manifest.get("samplesFromUk", 0)).sum())
    for i in pick.tolist():
        meta = metas.get(int(up.uk[i]), (None, {}))[1]
        timelines.append((up.page_load[i] or f"upload:{up.id[i]}", meta.get("timeline")))
        if meta.get("timeline"):
            with_timeline.add(i)
    read = len(pick) - untimed
    # The samples table is a local read whatever the engine: Dask's too runs it here.
    duck = engine if isinstance(engine, DuckEngine) else DuckEngine(threads=1)
    try:
        got = _rolled_sums(duck, snap, sel, app, up)
        rolled = got is not None
        if got is None:
            got = _bucket_sums(duck, snap, sel, app, sub, up.page_load_index()[pick])
    finally:
        if duck is not engine:
            duck.close()
    width, nbk, later, names, cells, total_b, loads_b, non_finite = got
    page_loads = len(tl.page_loads(timelines))
    if rolled:  # every upload's samples, the timelines of `pick`'s
        read, untimed, page_loads = len(up), 0, up.page_loads()
    g, b, ns = cells
    # As `fleet top` sums them: exact integer ns per function and bucket, then ms.
    self_ns = np.bincount(g, weights=ns, minlength=len(names))
    self_ms = self_ns / NS_PER_MS
    order = np.argsort(-self_ms, kind="stable")
    order = order[self_ms[order] > 0]

    # Each shown function's ns per bucket, and the rest's together, in one bincount over
    # the cells (a mask of the cells per function was FUNCTIONS passes over them); each
    # bin adds its cells in the same order as a function's own bincount did.
    top = order[:FUNCTIONS]
    row_of = np.full(len(names), len(top), dtype=np.int64)
    row_of[top] = np.arange(len(top))
    per_row = np.rint(np.bincount(row_of[g] * nbk + b, weights=ns,
                                  minlength=(len(top) + 1) * nbk)).astype(np.int64)
    per_row = per_row.reshape(len(top) + 1, nbk)

    def bucket_row(r: int) -> tuple[np.ndarray, np.ndarray]:
        nz = np.nonzero(per_row[r])[0]
        return nz, per_row[r][nz]

    rows = []
    for r, j in enumerate(top.tolist()):
        nz, per = bucket_row(r)
        k = names[j]
        rows.append({
            "name": k.label() if isinstance(k, FunctionKey) else k,
            "loc": k.location() if isinstance(k, FunctionKey) else "",
            "self": round(float(self_ms[j]), 6),
            "b": nz.tolist(), "v": [round(float(x) / NS_PER_MS, 6) for x in per],
        })
    rest = order[FUNCTIONS:]
    if len(rest):
        nz, per = bucket_row(len(top))
        rows.append({"name": f"(other functions: {len(rest)})", "loc": "",
                     "self": round(float(per.sum()) / NS_PER_MS, 6), "other": True,
                     "b": nz.tolist(), "v": [round(float(x) / NS_PER_MS, 6) for x in per]})
    # The page's own reports, on the same buckets: when long frames and interactions
    # started, and when LCP came.
    pls = tl.page_loads(timelines)

    def bucket(ms: float) -> int:
        return min(int(max(ms, 0.0) // width), nbk - 1)

    lf_n = [0] * nbk
    lf_block = [0.0] * nbk
    in_n = [0] * nbk
    in_slow = [0.0] * nbk  # the slowest interaction starting in each bucket
    lcp_n = [0] * nbk
    for pl in pls.values():
        for f in pl.long_frames:
            k = bucket(f["start"])
            lf_n[k] += 1
            lf_block[k] += float(f.get("blockingDuration") or 0.0)
        for e in pl.interactions:
            k = bucket(e["start"])
            in_n[k] += 1
            in_slow[k] = max(in_slow[k], float(e["duration"]))
        if pl.load and pl.load.get("lcp") is not None:
            lcp_n[bucket(pl.load["lcp"])] += 1
    return {
        "width": width, "buckets": nbk, "later": later,
        "uploads": read, "uploadsAll": len(up), "uploadsUntimed": untimed,
        # samples of the uploads read whose stored time is not finite: in no bucket
        "samplesNonFinite": non_finite,
        "pageLoads": page_loads, "timelineUploads": len(pick),
        "pageLoadsAll": up.page_loads(),
        "totalMs": round(float(total_b.sum()) / NS_PER_MS, 6),
        "bucketMs": [round(float(x) / NS_PER_MS, 6) for x in total_b],
        "bucketLoads": loads_b.tolist(),
        "fns": rows,
        "longFrames": {"n": lf_n, "blocking": [round(x, 3) for x in lf_block]},
        "interactions": {"n": in_n, "slowest": [round(x, 3) for x in in_slow]},
        "lcp": lcp_n,
        "vitals": vitals(engine, snap, sel.filters)["rows"],
        "examples": _examples(up, pls, pick, with_timeline),
    }


def _bucket_sums(duck: Any, snap: Snapshot, sel: Any, app: str, sub: Uploads,
                 load: np.ndarray) -> tuple:
    """The samples of `sub` summed in the engine: (bucket width ms, buckets, whether the
    last is "later", the functions (FunctionKey or a no-stack name) by index, the
    (function, bucket, ns) cells, ns per bucket, page loads with a sample per bucket,
    samples left out for a time that is not finite). Functions are indexed as the
    releases' frames come (releases by key), then the samples without a stack by their
    name, in the order the uploads first have them."""
    from .query import IDLE_MARKERS

    empty = np.zeros(0, np.int64)
    keys: dict[FunctionKey | str, int] = {}
    # A time that is not finite places its sample nowhere (NaN sorted as the largest time
    # was the 99th percentile, and fell in "later"; -inf counted at 0): left out and
    # counted, by the rule the rollups follow (`TIMED_SQL`), so both paths agree.
    # (idle) and (program) left out with exclude_idle, as the other merged views do.
    keep = TIMED_SQL + (
        f" AND NOT (stack_id = {NONE} AND marker IN ({', '.join(map(str, IDLE_MARKERS))}))"
        if sel.filters.exclude_idle else "")
    got = {"ri": empty, "sid": empty, "m": empty, "b": empty, "load": empty, "ns": empty,
           "first": empty}
    m_g: dict[int, np.ndarray] = {}  # release index -> each stored stack's function
    with duck.sample_scan(snap, sub, ri=sub.ri, pos=np.arange(len(sub), dtype=np.int64),
                          load=np.asarray(load, np.int64)) as run:
        # Two scans of the samples (each reads the parts: most of the view's cost). The
        # first: the releases with samples, how many samples are kept, and the largest
        # kept times, enough of them for the 99th percentile (`_percentile99`) whatever
        # `n` is up to the uploads' sample count (a third scan only if there are more).
        most = _top_wanted(int(sub.samples.sum()))
        seen = {"ri": empty, "n": empty, "top": empty, "bad": empty} if run is None else run(
            f"SELECT ri, count(*) FILTER (WHERE {keep}) AS n, "
            f"max(greatest(t, 0.0), {most}) FILTER (WHERE {keep}) AS top, "
            f"count(*) FILTER (WHERE NOT {TIMED_SQL}) AS bad FROM s GROUP BY ri")
        n = int(seen["n"].sum())
        non_finite = int(np.asarray(seen["bad"], np.int64).sum())
        # Each stored stack's leaf function as `fleet top` names it (the release's maps).
        m_g = _stack_functions(snap, sel, app, sub, seen["ri"], keys)
        # Buckets up to the 99th percentile of the samples' times, so one tab left open
        # for an hour does not squeeze every page load into the first bucket; later
        # samples are one last bucket ("later"). A sample before navigation start (none
        # should be) counts at 0.
        hi = 1.0
        if n:
            tops = [np.asarray(v, np.float64) for v in seen["top"] if v is not None]
            # descending as the engine orders them (no NaN: `keep` has none)
            largest = np.sort(np.concatenate(tops))[::-1] if tops else np.zeros(0)
            hi = _percentile99(run, keep, n, largest)
        width, nb = time_key(hi)
        if n:
            # Per (release, stack, marker, bucket) and per (bucket, page load): ns, and the
            # first upload with it (the order of the functions of samples without a
            # stack); the stacks' functions are looked up after, in numpy.
            # `t // width` as numpy floors it (fmod, then the quotient rounded), so a
            # sample on a bucket's edge falls where numpy puts it.
            got = run(
                "SELECT ri, stack_id AS sid, marker AS m, b, load, "
                "sum(weight_ns)::BIGINT AS ns, min(pos) AS first FROM ("
                "  SELECT s.ri, s.stack_id, s.marker, s.weight_ns, s.load, s.pos,"
                f"  least({floor_div_sql('s.x', 's.w')}, s.nb)::BIGINT AS b FROM ("
                "   SELECT *, greatest(t, 0.0) AS x, ?::DOUBLE AS w, ?::DOUBLE AS nb"
                f"  FROM s WHERE {keep}) s"
                ") GROUP BY GROUPING SETS ((ri, stack_id, marker, b), (b, load))",
                width, float(nb))
    per_load = got["ri"] != got["ri"]  # NaN: a (bucket, page load) row
    cell = ~per_load
    loads_b = np.bincount(np.asarray(got["b"][per_load], np.int64))
    return width, *_cells(got, cell, nb, loads_b, m_g, keys), non_finite


def _stack_functions(snap: Snapshot, sel: Any, app: str, up: Uploads, ris: np.ndarray,
                     keys: dict) -> dict[int, np.ndarray]:
    """Per release index of `up` in `ris`: each stored stack's function index in `keys`
    (which this adds the releases' functions to, releases by key)."""
    from .release import mapped_release, named, stored_trace

    m_g: dict[int, np.ndarray] = {}
    for ri in sorted(set(np.asarray(ris, np.int64).tolist())):  # up.rkeys is sorted
        rkey = up.rkeys[ri]
        # The selection's own release, named by the same rule, when it has it: reading
        # and naming a release again was ~15 % of a merged flame page's CPU (issue 34)
        rel = sel.releases.get(rkey)
        if rel is None or rel.stack_frame is None:
            rel = named({rkey: mapped_release(
                snap, rkey, app, up.release[up.rkey.index(rkey)], stored_trace(snap, rkey))},
                sel.filters)[rkey]
        assert rel.stack_frame is not None
        fid = np.asarray([keys.setdefault(k, len(keys)) for k in rel.frame_key] or [0],
                         np.int64)
        m_g[int(ri)] = fid[rel.stack_frame.astype(np.int64)]
    return m_g


def _cells(got: dict, cell: np.ndarray, nb: int, loads_b: np.ndarray,
           m_g: dict[int, np.ndarray], keys: dict) -> tuple:
    """`_bucket_sums`' answer from the (release, stack, marker, bucket) rows `got[cell]`
    (ns, and `first`: an order of the uploads that first have them) and the page loads
    per bucket."""
    later = bool((got["b"][cell] == nb).any())
    nbk = nb + 1 if later else nb
    loads_b = np.concatenate([loads_b, np.zeros(max(nbk - len(loads_b), 0), np.int64)])
    g = _functions_of(np.asarray(got["ri"][cell], np.int64),
                      np.asarray(got["sid"][cell], np.int64),
                      np.asarray(got["m"][cell], np.int64), m_g)
    # Samples without a stack are named as `report` and `fleet top` name them, their
    # functions after the releases' in the order the uploads first have them.
    marker_g: dict[int, int] = {}
    first = got["first"][cell]
    for _, mk in sorted({(int(f), int(mk)) for f, mk, sid in zip(
            first.tolist(), got["m"][cell].tolist(), got["sid"][cell].tolist(), strict=True)
            if sid == NONE}):
        marker_g[mk] = keys.setdefault(no_stack_name(mk), len(keys))
    nos = g < 0
    if nos.any():
        to = np.full(len(MARKERS) + 1, -1, np.int64)  # marker + 1 -> its function
        for mk, j in marker_g.items():
            to[mk + 1] = j
        g[nos] = to[-1 - g[nos]]
    names: list = [None] * len(keys)
    for k, v in keys.items():
        names[v] = k
    b, ns = np.asarray(got["b"][cell], np.int64), np.asarray(got["ns"][cell], np.int64)
    # exact: float64 sums of integer ns below 2**53 ns
    total_b = np.rint(np.bincount(b, weights=ns, minlength=nbk)).astype(np.int64)
    return nbk, later, names, (g, b, ns), total_b, loads_b


def _rolled_sums(duck: Any, snap: Snapshot, sel: Any, app: str, up: Uploads
                 ) -> tuple | None:
    """`_bucket_sums` of every upload of the selection from the Time view's rollups
    (store/tables/timeroll.py), or None when they cannot answer it: a selection the
    rollups do not (`rollups.plan`: whole days, app, release, route, env), uploads
    without sample rows, a 99th percentile between two of their keys, a width under 1 ms
    or past their largest grid. The same sums, buckets and page loads as the samples', and
    the same count of samples left out for a time that is not finite: the rollups have no
    key for them (`timeroll.time_parts`), so they are the uploads' samples less those the
    keys count."""
    from ..store.tables.view import TIME_KINDS, percentile_key, view_grid
    from .query import IDLE_MARKERS
    from .rollups import pinned_days, plan

    f = sel.filters
    if not len(up) or bool((up.uk < snap.manifest.get("samplesFromUk", 0)).any()):
        return None
    # Pinned below uploads the store holds (`Snapshot.pin`): the parts of the days those
    # are on that may sum them are read as their uploads' rows, the rest as rolled up
    days = pinned_days(snap, f) if snap.pinned_out() else None
    p = plan(snap, f, TIME_KINDS, days)
    if p is None or not set(up.rkeys) <= set(p.rkeys):
        return None
    if days and not _rolled_per_upload(duck, snap, f, p, up):
        return None
    keys = duck.rollup_sql(p, "rollup_timekeys", f, (
        "SELECT idle, width, nb, sum(samples)::BIGINT AS n FROM r GROUP BY idle, width, nb"))
    keyed = np.asarray(keys["n"], np.int64)
    non_finite = int(up.samples.sum()) - int(keyed.sum())
    if non_finite < 0:  # keys of samples the uploads do not have: the samples answer
        return None
    if f.exclude_idle:
        keyed = np.where(np.asarray(keys["idle"], np.int64) == 0, keyed, 0)
    key = percentile_key(keys["width"], keys["nb"], keyed)
    grid = None if key is None else view_grid(key[0])
    if key is None or grid is None:
        return None
    (width, nb), (k, m) = key, grid
    keep = (f"NOT (stack_id = {NONE} AND marker IN ({', '.join(map(str, IDLE_MARKERS))}))"
            if f.exclude_idle else "true")
    b = f"least(tb // {m}, {nb})::BIGINT"
    got = duck.rollup_sql(p, "rollup_time", f, (
        f"SELECT ri, stack_id AS sid, marker AS m, {b} AS b, sum(weight_ns)::BIGINT AS ns, "
        f"min(first_uk) AS first FROM r WHERE grid = ? AND {keep} GROUP BY ALL"), k)
    lb = duck.rollup_sql(p, "rollup_timeloads", f, (
        f"SELECT {b} AS b, count(DISTINCT load_hash)::BIGINT AS n FROM r WHERE grid = ? "
        f"{'AND busy > 0 ' if f.exclude_idle else ''}GROUP BY b"), k)
    if set(np.asarray(got["ri"], np.int64).tolist()) - set(range(len(p.rkeys))):
        return None
    # the plan's release indices as the selection's (both sorted keys)
    to = np.asarray([up.rkeys.index(r) if r in up.rkeys else -1 for r in p.rkeys] or [0],
                    np.int64)
    got["ri"] = to[np.asarray(got["ri"], np.int64)]
    if (got["ri"] < 0).any():
        return None
    loads_b = np.zeros(nb + 1, np.int64)
    loads_b[np.asarray(lb["b"], np.int64)] = np.asarray(lb["n"], np.int64)
    fn: dict = {}
    m_g = _stack_functions(snap, sel, app, up, got["ri"], fn)
    nbk, *rest = _cells(got, np.ones(len(got["ri"]), bool), nb, loads_b, m_g, fn)
    return width, nbk, rest[0], rest[1], rest[2], rest[3], rest[4][:nbk], non_finite


def _rolled_per_upload(duck: Any, snap: Snapshot, f: Any, p: Any, up: Uploads) -> bool:
    """The Time view's rollup rows of the uploads of `up` in the parts `p` left out for a
    pin (`rollups.plan`'s `left`), made from their samples as compaction makes a batch's
    (`timeroll.time_rows`), added to `p` as parts in memory; False (the caller reads the
    samples) when the kinds left out different uploads. Their work is theirs: the rows of
    the uploads read, not of the store's history."""
    from ..store.tables.view import TIME_KINDS, day_of, load_hash, time_rows
    from .engine import read_part

    pos = {k: i for i, k in enumerate(p.rkeys)}
    pri = np.asarray([pos[k] for k in up.rkeys] or [0], np.int64)[up.ri]
    days = [day_of(float(t)) for t in up.received_at.tolist()]
    masks = []
    for kind in TIME_KINDS:
        m = np.zeros(len(up), bool)
        for i, (ri, day, uk) in enumerate(zip(pri.tolist(), days, up.uk.tolist(),
                                              strict=True)):
            spans = p.left[kind][ri].get(day)
            m[i] = spans is not None and any(s is None or s[0] <= uk <= s[1] for s in spans)
        masks.append(m)
    if any((m != masks[0]).any() for m in masks[1:]):
        return False
    sub = up.subset(masks[0])
    if not len(sub):
        return True
    want = set(sub.uk.tolist())
    route_env: dict[int, tuple] = {}
    for part in snap.upload_files(f):
        t = read_part(part, ["uk", "route", "env"]).to_pydict()
        for uk, r, e in zip(t["uk"], t["route"], t["env"], strict=True):
            if uk in want:
                route_env[uk] = (r, e)
    if len(route_env) < len(want):
        return False
    with duck.sample_scan(snap, sub, ri=sub.ri) as run:
        rows = None if run is None else run(
            "SELECT uk, t, stack_id, marker, weight_ns, ri FROM s")
    for ri, rkey in enumerate(sub.rkeys):
        mine = sub.ri == ri
        uks = sub.uk[mine].tolist()
        cells = {"uk": uks, "id": [x for x, m in zip(sub.id, mine, strict=True) if m],
                 "route": [route_env[u][0] for u in uks],
                 "env": [route_env[u][1] for u in uks],
                 "page_load": [x for x, m in zip(sub.page_load, mine, strict=True) if m]}
        if rows is None:
            samples = {k: np.zeros(0, np.int64) for k in ("uk", "stack_id", "marker",
                                                          "weight_ns")}
            samples["t"] = np.zeros(0, np.float64)
        else:
            at = np.asarray(rows["ri"], np.int64) == ri
            samples = {k: np.asarray(rows[k])[at]
                       for k in ("uk", "t", "stack_id", "marker", "weight_ns")}
        made = time_rows(cells, samples, load_hash)
        for kind in TIME_KINDS:
            p.parts[kind][pos[rkey]].append(made[kind])
    return True


def floor_div_sql(x: str, w: str) -> str:
    """SQL for `x // w` (DOUBLE columns, x >= 0, w > 0) as numpy's floor_divide computes
    it: the quotient of x less fmod(x, w), rounded to the nearest whole (npy_divmod).
    floor(x / w) differs at a bucket's edge (1.0 // 0.1 is 9.0, floor(1.0 / 0.1) 10.0):
    a sample would fall one bucket over from where numpy put it."""
    q = f"(({x} - fmod({x}, {w})) / {w})"
    return f"(CASE WHEN {q} - floor({q}) > 0.5 THEN floor({q}) + 1 ELSE floor({q}) END)"


def _top_wanted(rows: int) -> int:
    """How many of the largest times `_percentile99` reads of `rows` samples (at least as
    many as it reads of any fewer: the count only grows with `rows`)."""
    n = max(rows, 1)
    return n - math.floor((n - 1) * (99 / 100)) + 1


def _percentile99(run: Any, keep: str, n: int, largest: np.ndarray | None = None) -> float:
    """np.percentile(times, 99) of the `n` kept samples' times (at least 0), from the two
    order statistics it interpolates between: from `largest` (the largest kept times,
    descending) when it holds them, else fetched from the engine (a top-N of 1 % of the
    samples, not all of them): numpy's own interpolation of those two gives its exact
    answer."""
    virtual = (n - 1) * (99 / 100)  # numpy's "linear" method
    k0 = math.floor(virtual)
    if virtual >= n - 1:
        if largest is not None and len(largest):
            return float(largest[0])
        return float(run(f"SELECT max(greatest(t, 0.0)) AS v FROM s WHERE {keep}")["v"][0])
    if largest is not None and len(largest) >= n - k0:
        top = largest[n - 2 - k0:n - k0]
    else:
        top = run(f"SELECT greatest(t, 0.0) AS v FROM s WHERE {keep} ORDER BY v DESC "
                  "LIMIT 2 OFFSET ?", n - 2 - k0)["v"]
    return float(np.quantile(np.asarray([top[1], top[0]], np.float64), virtual - k0))


def _functions_of(ri: np.ndarray, sid: np.ndarray, marker: np.ndarray,
                  m_g: dict[int, np.ndarray]) -> np.ndarray:
    """Each (release, stack) row's function index, from the releases' stack -> function
    arrays; a row without one (no stack) is -2 - its marker."""
    g = -2 - marker
    for r, fn in m_g.items():
        mine = (ri == r) & (sid >= 0) & (sid < len(fn))
        g[mine] = fn[sid[mine]]
    return g


def _examples(up: Uploads, pls: dict[str, tl.PageLoad], pick: np.ndarray,
              with_timeline: set[int]) -> list[dict]:
    """A few uploads worth opening on their own: the slowest interaction's, the most
    blocking long frames', the most sampled time's, the median page load's. Of a page load
    in chunks, the chunk that carries the timeline (its Time view shows the windows)."""
    from .vitals import inp

    out: list[dict] = []
    seen: set[str] = set()

    def add(i: int, why: str) -> None:
        if up.id[i] not in seen and len(out) < EXAMPLES:
            seen.add(up.id[i])
            out.append({"id": up.id[i], "why": why, "release": up.release[i]})

    idx = pick.tolist()
    key = {i: up.page_load[i] or f"upload:{up.id[i]}" for i in idx}
    by_inp = [(inp([e["duration"] for e in pls[key[i]].interactions]), i in with_timeline, i)
              for i in idx
              if key[i] in pls and pls[key[i]].interactions]
    if by_inp:
        v, _, i = max(by_inp)
        add(i, f"slowest INP of the selection: {v:.0f} ms")
    by_block = [(sum(float(f.get("blockingDuration") or 0.0) for f in pls[key[i]].long_frames),
                 i in with_timeline, i)
                for i in idx if key[i] in pls and pls[key[i]].long_frames]
    if by_block:
        v, _, i = max(by_block)
        add(i, f"most long-frame blocking: {v:.0f} ms")
    if idx:
        by_ms = sorted(idx, key=lambda i: (float(up.total_ms[i]), up.id[i]))
        add(by_ms[-1], f"most sampled time: {float(up.total_ms[by_ms[-1]]):.0f} ms")
        mid = by_ms[len(by_ms) // 2]
        add(mid, f"median sampled time: {float(up.total_ms[mid]):.0f} ms")
    return out


class StoreSources:
    """The source view's reader for a fleet merge: the store keeps no scripts, so the only
    text is what the releases' source maps carry (`sourcesContent`), by source URL."""

    missing = "nomap"  # the source view's word for a function without text
    no_lines = ("The uploads of a fleet merge have no per-line data: the browser's Profiler "
                "records each function's position, not the line that ran (`jsprof report "
                "--by line` says the same of these traces), so time is per function here.")

    def __init__(self, releases: dict, ident: Any = None) -> None:
        self.texts: dict[str, str] = {}
        for rel in releases.values():
            for sm in (getattr(rel, "maps", None) or {}).values():
                for s, content in enumerate(sm.contents):
                    if content is not None:
                        self.texts.setdefault(sm.source_url(s), content)
        # by the names the merged views give the sources too (`fleet.releases`' rule)
        if ident is not None:
            for url, content in list(self.texts.items()):
                self.texts.setdefault(ident(url) or url, content)

    def __call__(self, url: str) -> str | None:
        return self.texts.get(url)
