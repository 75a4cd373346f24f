"""The merged flame page's Time view in two scans of the samples (issue 34: its three
scans of 500 uploads' samples were ~70 % of a flame query's CPU, the slowest query of a
collector's round): the same page, byte for byte, as the three scans made (kept below as
they were), on a store with two releases, a tail, markers and idle samples, and functions
of exactly equal time; and the samples read twice, not three times."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fleet_util import make_trace, upload
from jsprof import io
from jsprof.analysis.profile import FunctionKey
from jsprof.fleet import api, timecourse
from jsprof.fleet import engine as fleet_engine
from jsprof.fleet.engine import Snapshot, Uploads
from jsprof.fleet.filters import Filters
from jsprof.fleet.timecourse import _percentile99, floor_div_sql
from jsprof.store import Store
from jsprof.store.tables.compact import compact
from jsprof.store.tables.view import TIME_BUCKETS as BUCKETS
from jsprof.store.tables.view import nice as _nice
from jsprof.trace import MARKERS, NONE, TraceBuilder, no_stack_name

DATA = Path(__file__).parent / "data" / "chromium"


def _tied(n: int) -> Any:
    """Two leaf functions sampled alternately, `n` samples 10 ms apart: equal self time."""
    b = TraceBuilder()
    res = b.resource_id("https://shop.example/tie.js")
    stacks = [b.stack_id([b.frame_id("main", res, 1, 1), b.frame_id(name, res, line, 1)])
              for name, line in (("left", 5), ("right", 9))]
    for i in range(n):
        b.add_sample(10.0 * i, stacks[i % 2], marker="script")
    return b.build()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("timescans") / "store"
    rng = np.random.default_rng(34)
    idle = io.load(DATA / "trace-idle.json").tracks[0].trace
    st = Store(path)
    try:
        for i in range(12):
            rel = ("1.0", "1.1")[i % 2]
            trace = (_tied(40 + 2 * i), idle)[i % 2] if i % 3 == 0 else make_trace(rng, 300)
            upload(st, f"u{i}", trace, app="shop", release=rel, route="/p",
                   pageLoad=f"pl{i // 2}")
            if i == 7:
                compact(st)  # the rest stays in the tail
    finally:
        st.close()
    return path


@contextlib.contextmanager
def _scans() -> Iterator[list[str]]:
    """The queries run over the Time view's sample scans."""
    got: list[str] = []
    orig = fleet_engine.DuckEngine.sample_scan

    @contextlib.contextmanager
    def counted(self: Any, snap: Any, up: Any, **cols: Any) -> Iterator[Any]:
        with orig(self, snap, up, **cols) as run:
            def each(sql: str, *p: Any) -> Any:
                got.append(sql)
                return run(sql, *p)

            yield None if run is None else each

    fleet_engine.DuckEngine.sample_scan = counted  # type: ignore[method-assign]
    try:
        yield got
    finally:
        fleet_engine.DuckEngine.sample_scan = orig  # type: ignore[method-assign]


def _pages(path: Path, f: Filters) -> tuple[str, str]:
    with api.session(Store(path)) as s:
        return (api.flame(s, f, "html", 2000, example_url="/v1/traces/{id}/flame"),
                api.flame(s, f, "svg", 2000))


@pytest.mark.parametrize("exclude_idle", [False, True])
@pytest.mark.parametrize("release", [None, "1.1"])
def test_the_page_is_the_three_scans_page(store: Path, monkeypatch: pytest.MonkeyPatch,
                                          exclude_idle: bool, release: str | None) -> None:
    f = Filters(app="shop", release=release, exclude_idle=exclude_idle)
    with _scans() as scans:
        now = _pages(store, f)
    assert len(scans) == 2  # per page: the SVG has no Time view
    # Too few of the largest times fetched in the first scan: the percentile's own query.
    monkeypatch.setattr(timecourse, "_top_wanted", lambda rows: 1)
    with _scans() as scans:
        assert _pages(store, f) == now
    assert len(scans) == 3
    monkeypatch.setattr(timecourse, "_bucket_sums", _bucket_sums_before)
    before = _pages(store, f)
    assert before == now
    model = now[0]
    assert "(idle)" in model and "left" in model and "right" in model


def test_the_samples_are_read_twice(store: Path) -> None:
    # Each scan reads every part holding a picked upload's samples: two, not three.
    with _scans() as scans, api.session(Store(store)) as s:
        api.flame(s, Filters(app="shop"), "html", 2000)
    assert len(scans) == 2, scans


# ---- the Time view's sums as three scans made them (before issue 34's round) ----------------

def _bucket_sums_before(duck: Any, snap: Snapshot, sel: Any, app: str, sub: Uploads,
                 load: np.ndarray) -> tuple:
    """The samples of `sub` summed in the engine: (bucket width ms, buckets, whether the
    last is "later", the functions (FunctionKey or a no-stack name) by index, the
    (function, bucket, ns) cells, ns per bucket, page loads with a sample per bucket).
    Functions are indexed as the releases' frames come (releases by key), then the
    samples without a stack by their name, in the order the uploads first have them."""
    from jsprof.fleet.query import IDLE_MARKERS
    from jsprof.fleet.release import identity, mapped_release, named_release, stored_trace

    empty = np.zeros(0, np.int64)
    keys: dict[FunctionKey | str, int] = {}
    # (idle) and (program) left out with exclude_idle, as the other merged views do
    keep = (f"NOT (stack_id = {NONE} AND marker IN ({', '.join(map(str, IDLE_MARKERS))}))"
            if sel.filters.exclude_idle else "true")
    got = {"g": empty, "b": empty, "load": empty, "ns": empty}
    with duck.sample_scan(snap, sub, ri=sub.ri, pos=np.arange(len(sub), dtype=np.int64),
                          load=np.asarray(load, np.int64)) as run:
        # The releases with samples, the markers of the samples without a stack (where
        # they first come), and how many samples are kept.
        seen = {"ri": empty, "m": empty, "first": empty, "n": empty} if run is None else run(
            f"SELECT ri, CASE WHEN stack_id = {NONE} THEN marker END AS m, "
            f"min(pos) FILTER (WHERE {keep}) AS first, "
            f"count(*) FILTER (WHERE {keep}) AS n FROM s GROUP BY ALL")
        n = int(seen["n"].sum())
        # Each stored stack's leaf function as `fleet top` names it (the release's maps).
        ident = identity(sel.filters)
        m_ri, m_sid, m_g = [], [], []
        for ri in sorted(set(seen["ri"].tolist())):  # sub.rkeys is sorted
            rkey = sub.rkeys[ri]
            trace = stored_trace(snap, rkey)
            rel = named_release(mapped_release(
                snap, rkey, app, sub.release[sub.rkey.index(rkey)], trace), ident)
            fid = np.asarray([keys.setdefault(k, len(keys)) for k in rel.frame_key] or [0],
                             np.int64)
            m_ri.append(np.full(trace.num_stacks, ri, np.int64))
            m_sid.append(np.arange(trace.num_stacks, dtype=np.int64))
            m_g.append(fid[trace.stack_frame.astype(np.int64)])
        marker_g: dict[int, int] = {}
        for _, mk in sorted({(int(f), int(mk)) for f, mk, c in zip(
                seen["first"].tolist(), seen["m"].tolist(), seen["n"].tolist(), strict=True)
                if mk == mk and c > 0}):  # (NaN: a row of samples with a stack)
            # Samples without a stack are named as `report` and `fleet top` name them.
            marker_g[mk] = keys.setdefault(no_stack_name(mk), len(keys))
        # Buckets up to the 99th percentile of the samples' times, so one tab left open
        # for an hour does not squeeze every page load into the first bucket; later
        # samples are one last bucket ("later"). A sample before navigation start (none
        # should be) counts at 0.
        hi = _percentile99(run, keep, n) if n else 1.0
        width = _nice(max(hi, 1.0) / BUCKETS)
        nb = max(int(math.ceil(hi / width)), 1)
        if n:
            import pyarrow as pa

            duck.con.register("gmap", pa.table({
                "ri": np.concatenate(m_ri), "stack_id": np.concatenate(m_sid),
                "g": np.concatenate(m_g)}))
            try:
                # Per (function, bucket) and per bucket: ns and page loads. `t // width` as
                # numpy floors it (fmod, then the quotient rounded), so a sample on a
                # bucket's edge falls where numpy puts it. A sample without a stack is
                # the function -2 - marker here.
                # `t // width` as numpy floors it (fmod, then the quotient rounded), so a
                # sample on a bucket's edge falls where numpy puts it. A sample without a
                # stack is the function -2 - marker here. Per (function, bucket): ns; per
                # (bucket, page load): whether it has a sample.
                got = run(
                    "SELECT g, b, load, sum(weight_ns)::BIGINT AS ns FROM ("
                    "  SELECT coalesce(gm.g, -2 - s.marker) AS g, s.weight_ns, s.load,"
                    f"  least({floor_div_sql('s.x', 's.w')}, s.nb)::BIGINT AS b FROM ("
                    "   SELECT *, greatest(t, 0.0) AS x, ?::DOUBLE AS w, ?::DOUBLE AS nb"
                    f"  FROM s WHERE {keep}) s"
                    "  LEFT JOIN gmap gm ON s.stack_id >= 0 AND gm.ri = s.ri"
                    "  AND gm.stack_id = s.stack_id"
                    ") GROUP BY GROUPING SETS ((g, b), (b, load))", width, float(nb))
            finally:
                duck.con.unregister("gmap")
    later = bool((got["b"] == nb).any())
    nbk = nb + 1 if later else nb
    per_load = got["g"] != got["g"]  # NaN: a (bucket, page load) row
    loads_b = np.bincount(np.asarray(got["b"][per_load], np.int64), minlength=nbk)
    cell = ~per_load
    g = np.asarray(got["g"][cell], np.int64)
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
    # and the samples left out for a time that is not finite (a later count, issue 34):
    # none here, this store's times are all finite
    return width, nbk, later, names, (g, b, ns), total_b, loads_b, 0

