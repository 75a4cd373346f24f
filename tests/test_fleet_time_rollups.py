"""The merged Time view from rollups (issue 34): the compactor sums the samples per time
bucket of fixed grids (store/tables/timeroll.py), so a flame page over whole days reads no
sample row; the page's Time view is the one the per-sample scans give: on a real store
(page loads resampled from real Chromium traces, chunked, on several routes and envs),
with and without --exclude-idle, with uploads not compacted yet, after merging, with the
Dask engine, and from tables an older jsprof wrote (read per sample until the next
compaction rolls them up)."""

from __future__ import annotations

import contextlib
import math
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fleet_util import DAY, T0, as_tables_format_10, make_trace, real_store, upload
from jsprof.fleet import api, timecourse
from jsprof.fleet import engine as fleet_engine
from jsprof.fleet.filters import Filters
from jsprof.store import Store
from jsprof.store.tables.compact import compact
from jsprof.store.tables.manifest import read_manifest
from jsprof.store.tables.merge import merge_parts
from jsprof.store.tables.timeroll import (
    percentile_key,
    time_key,
    time_keys,
    view_grid,
)

FILTERS = [
    Filters(app="shop"),
    Filters(app="shop", release="1.10.0"),
    Filters(app="shop", route="/c*"),
    Filters(app="shop", env="prod"),
    Filters(app="shop", exclude_idle=True),
    Filters(app="shop", since=T0 + DAY, until=T0 + 3 * DAY),
]


def _routes(i: int) -> str | None:
    return ["/cart", "/home", None][i % 3]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """36 page loads over 3 days, chunked in 1 to 3 uploads, on three routes, and a few
    uploads with an env, compacted in batches of 7 (several parts a day)."""
    path = tmp_path_factory.mktemp("timeroll") / "store"
    real_store(path, 11, n=36, chunks=lambda i: 1 + i % 3, route=_routes)
    st = Store(path)
    rng = np.random.default_rng(3)
    for k in range(4):
        upload(st, f"env{k}", make_trace(rng, 300), app="shop", release="1.9.0",
               route="/cart", env="prod" if k % 2 else "dev", receivedAt=T0 + k * DAY + 7e6)
    compact(st, batch=7)
    st.close()
    return path


@contextlib.contextmanager
def counted() -> Iterator[dict[str, int]]:
    """How often a Time view read the rollups, and scanned the samples."""
    n = {"rolled": 0, "scans": 0}
    rolled, scan = timecourse._rolled_sums, fleet_engine.DuckEngine.sample_scan

    def r(*a: Any) -> Any:
        got = rolled(*a)
        n["rolled"] += got is not None
        return got

    def s(*a: Any, **k: Any) -> Any:
        n["scans"] += 1
        return scan(*a, **k)

    timecourse._rolled_sums = r
    fleet_engine.DuckEngine.sample_scan = s  # type: ignore[method-assign]
    try:
        yield n
    finally:
        timecourse._rolled_sums = rolled
        fleet_engine.DuckEngine.sample_scan = scan  # type: ignore[method-assign]


def _per_sample(s: api.Session, f: Filters) -> dict:
    """The Time view as the samples give it (the rollups not read)."""
    from jsprof.fleet.query import select

    rolled = timecourse._rolled_sums
    timecourse._rolled_sums = lambda *a: None
    try:
        return timecourse.time_course(s.engine, s.snap, select(s.engine, s.snap, f), "shop")
    finally:
        timecourse._rolled_sums = rolled


def _view(s: api.Session, f: Filters) -> dict:
    from jsprof.fleet.query import select

    return timecourse.time_course(s.engine, s.snap, select(s.engine, s.snap, f), "shop")


def _check(path: Path, rolled: bool = True, filters: list[Filters] = FILTERS,
           engine: Any = "duckdb") -> None:
    st = api.open_store(path)
    with api.session(st, engine) as s:
        for f in filters:
            want = _per_sample(s, f)
            with counted() as n:
                got = _view(s, f)
            assert n == ({"rolled": 1, "scans": 0} if rolled else
                         {"rolled": 0, "scans": 1}), f
            assert got == want, f
            assert got["fns"] and got["uploads"] == got["uploadsAll"] > 0
    st.close()


def test_the_time_view_from_rollups_is_the_samples_view(store: Path) -> None:
    _check(store)


def test_the_flame_page_is_the_same_page(store: Path) -> None:
    """The whole page (HTML and its Time view's model), byte for byte."""
    st = api.open_store(store)
    f = Filters(app="shop")
    with api.session(st) as s:
        with counted() as n:
            a = api.flame(s, f, "html", 2000)
        rolled = timecourse._rolled_sums
        timecourse._rolled_sums = lambda *a: None
        try:
            b = api.flame(s, f, "html", 2000)
        finally:
            timecourse._rolled_sums = rolled
    st.close()
    assert n == {"rolled": 1, "scans": 0}
    assert a == b


def test_the_flame_page_reads_each_release_once(store: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The Time view names the stored stacks with the selection's own releases: a
    release's frames and stacks read and named twice were ~15 % of the page's CPU."""
    from jsprof.fleet import query, release

    reads: list[str] = []
    real = release.stored_trace

    def counted_read(snap: Any, rkey: str) -> Any:
        reads.append(rkey)
        return real(snap, rkey)

    monkeypatch.setattr(release, "stored_trace", counted_read)
    monkeypatch.setattr(query, "stored_trace", counted_read)
    st = api.open_store(store)
    with api.session(st) as s:
        page = api.flame(s, Filters(app="shop"), "html", 2000)
        rkeys = s.engine.uploads(s.snap, Filters(app="shop")).rkeys
    st.close()
    assert '"fleetTime"' in page
    assert sorted(reads) == sorted(rkeys) and len(rkeys) > 1


def test_uploads_not_compacted_yet_and_merged_parts(store: Path, tmp_path: Path) -> None:
    copy = tmp_path / "s"
    shutil.copytree(store, copy)
    st = Store(copy)
    rng = np.random.default_rng(9)
    for k in range(3):  # the tail: rolled up in memory by the query
        upload(st, f"late{k}", make_trace(rng, 400), app="shop", release="1.10.0",
               route="/cart", receivedAt=T0 + 2 * DAY + 9e6 + k)
    st.close()
    _check(copy, filters=FILTERS[:2])
    st = Store(copy)
    compact(st)
    merge_parts(copy, now=T0 / 1000 + 30 * 86400, fanout=2)
    st.close()
    _check(copy, filters=FILTERS[:2])
    # a merge sums the parts a grid at a time (issue 34): a row group per grid
    import pyarrow.parquet as pq

    from jsprof.store.tables.manifest import part_path, tables_dir

    man = read_manifest(copy)
    merged = [e for r in man["releases"].values() for k in ("rollup_time", "rollup_timeloads")
              for e in r["parts"][k] if e.get("level", 0) > 0]
    assert merged
    for e in merged:
        meta = pq.ParquetFile(tables_dir(copy) / part_path(e)).metadata
        col = meta.schema.names.index("grid")
        grids = [(meta.row_group(i).column(col).statistics.min,
                  meta.row_group(i).column(col).statistics.max)
                 for i in range(meta.num_row_groups)]
        assert all(lo == hi for lo, hi in grids) and len(grids) > 1, (e["path"], grids)


def test_tables_of_the_format_before_are_read_per_sample_then_rolled_up(
        store: Path, tmp_path: Path) -> None:
    """Tables format 10 wrote (no Time view rollups) answer from the samples until the
    next compaction, which rolls their days up from the samples tables: then the same."""
    copy = tmp_path / "s"
    shutil.copytree(store, copy)
    as_tables_format_10(copy)
    _check(copy, rolled=False, filters=FILTERS[:1])
    st = Store(copy)
    compact(st)
    st.close()
    assert read_manifest(copy)["formatVersion"] == 12
    _check(copy, filters=FILTERS[:1])


def test_the_dask_engine_draws_the_same_view(store: Path, dask_client: Any) -> None:
    _check(store, filters=FILTERS[:1] + FILTERS[4:5],
           engine=fleet_engine.DaskEngine(client=dask_client))


def test_the_percentile_s_key_from_counts_is_numpy_s() -> None:
    """`percentile_key` of counts per `time_keys` is `time_key(np.percentile(t, 99))`
    whenever it answers; times on bucket edges and decade edges included."""
    rng = np.random.default_rng(4)
    answered = 0
    for trial in range(300):
        n = int(rng.integers(1, 300)) if trial % 2 else int(rng.integers(3000, 30000))
        scale = 10.0 ** rng.uniform(-1, 6)
        t = rng.exponential(scale, n)
        if trial % 3 == 0:  # on edges: whole multiples of nice widths
            t = np.round(t / 10 ** np.floor(np.log10(scale))) * 10 ** np.floor(np.log10(scale))
        x = np.maximum(t, 0.0)
        w, nb = time_keys(x)
        some = rng.choice(n, min(n, 300), replace=False)
        assert [time_key(float(v)) for v in x[some]] == list(zip(
            w[some].tolist(), nb[some].tolist(), strict=True))
        key = percentile_key(w, nb, np.ones(len(x), np.int64))
        if key is not None:
            answered += 1
            assert key == time_key(float(np.percentile(x, 99))), (trial, x)
    assert answered > 100


def test_a_view_grid_sums_exactly() -> None:
    """A width of 1, 2 or 5 x 10^k ms sums from grid k: `t // w` is `(t // 10^k) // m`."""
    assert view_grid(0.5) is None and view_grid(5e5) == (5, 5) and view_grid(1e6) is None
    rng = np.random.default_rng(1)
    t = np.concatenate([rng.uniform(0, 1e6, 20000), np.arange(0, 2e5, 0.5),
                        rng.uniform(0, 1e4, 2000).round(1)])
    for width in (1.0, 2.0, 5.0, 10.0, 20.0, 500.0, 1000.0, 2e4, 5e5):
        k, m = view_grid(width)
        assert (np.floor_divide(t, width) == np.floor_divide(np.floor_divide(t, 10.0 ** k), m)
                ).all(), width
        assert math.isclose(m * 10 ** k, width)


@pytest.mark.parametrize("f", FILTERS + [Filters(app="shop", since=T0 + DAY + 3600e3)])
def test_the_call_tree_from_the_rollups_is_the_same_page(store: Path, f: Filters) -> None:
    """The flame page's call tree from rollup_stacks, as `top` reads them (no weights row
    per upload), and its Time view from the uploads table: byte for byte the page the
    per-upload selection draws (a part day too: its ends read per upload)."""
    from jsprof.fleet import query, rollups

    st = api.open_store(store)
    with api.session(st) as s:
        calls = {"per_upload": 0}
        orig_sel, orig_q = rollups.select, query.select

        def q(*a: Any, **k: Any) -> Any:
            calls["per_upload"] += 1
            return orig_q(*a, **k)

        query.select = q
        try:
            a = [api.flame(s, f, fmt, 2000) for fmt in ("html", "svg")]
            assert calls["per_upload"] == 0  # no weights read per upload
        finally:
            query.select = orig_q
        rollups.select = lambda *a: None
        try:
            b = [api.flame(s, f, fmt, 2000) for fmt in ("html", "svg")]
        finally:
            rollups.select = orig_sel
    st.close()
    assert a == b
