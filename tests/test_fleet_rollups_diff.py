"""`fleet diff` from the rollups (issue 34): over whole days, each side's shares from
rollup_stacks and the 95 % intervals from rollup_moments (per function by place, format 12:
sums over uploads of its self and total ns, their squares and their products with the
upload's all ns), instead of a bootstrap over every upload's rows. On a store of page loads
resampled from the real Chromium traces (chunked, ~160 uploads a release): the moments
equal those of the per-upload values, the shares equal the per-upload diff's, the
intervals are within 8 % of their width of a 4,000-resample bootstrap's (measured: 4.4 %;
the default 200 resamples differ from that by 10-13 %), and Dask answers as DuckDB does.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from fleet_util import real_store
from jsprof.fleet import api, query, rollups
from jsprof.fleet.filters import Filters
from jsprof.store import Store
from jsprof.store.tables.compact import compact

BASE, NEW = Filters(app="shop", release="1.9.0"), Filters(app="shop", release="1.10.0")
CI = ("selfPpCi", "totalPpCi", "selfRelCi", "totalRelCi")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rollups_diff") / "store"
    real_store(path, 7, n=240, chunks=lambda i: 1 + (i // 3) % 3)  # ~160 uploads a release
    st = Store(path)
    compact(st, batch=50)
    st.close()
    return path


def _rows(doc: dict) -> dict:
    return {(r["name"], r["resource"], r["line"]): {k: v for k, v in r.items() if k not in CI}
            for r in doc["rows"]}


def test_a_diff_of_whole_days_reads_the_rollups(store: Path) -> None:
    st = api.open_store(store)
    with api.session(st) as s:
        parts = api.diff_parts(s, BASE, NEW, None)
        assert parts.base.rollup is not None and parts.new.rollup is not None
        assert parts.base.traces >= rollups.MOMENTS_MIN_UPLOADS
        # the per-upload answer: the same selections read per upload, bootstrapped
        base = query.select(s.engine, s.snap, BASE)
        new = query.select(s.engine, s.snap, NEW)
        assert (base.traces, new.traces) == (parts.base.traces, parts.new.traces)
        ref = query.bootstrap(s.engine, s.snap, base, new, parts.keys, parts.match, 4000)
        mine = rollups.diff_intervals(s.engine, parts.base, parts.new, parts.keys, parts.match)
        for name in ("self_pp", "total_pp", "self_rel", "total_rel"):
            m, r = mine[name], ref[name]
            width = r[1] - r[0]
            ok = np.isfinite(r).all(axis=0) & (width > 0)
            assert ok.sum() >= 8 and np.isfinite(m[:, ok]).all(), name
            assert (np.abs(m - r)[:, ok] / width[ok]).max() < 0.08, name
        # the moments are those of the per-upload values (float sums: to rounding)
        self_m, total_m, all_ms = query.trace_shares(s.engine, s.snap, base, parts.keys,
                                                     parts.match)
        got = rollups._side_moments(s.engine, parts.base, parts.keys, parts.match)
        a = all_ms * 1e6
        assert got["a"] == pytest.approx(a.sum(), rel=1e-12)
        assert got["b"] == pytest.approx((a * a).sum(), rel=1e-12)
        for metric, m in (("self", self_m * 1e6), ("total", total_m * 1e6)):
            assert got[metric]["sum"] == pytest.approx(m.sum(axis=0), rel=1e-9, abs=1.0)
            assert got[metric]["sq"] == pytest.approx((m * m).sum(axis=0), rel=1e-9, abs=1.0)
            assert got[metric]["a"] == pytest.approx((m * a[:, None]).sum(axis=0), rel=1e-9,
                                                      abs=1.0)
    st.close()


def test_the_rolled_diff_document_equals_the_per_upload_one_but_its_intervals(
        store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    st = api.open_store(store)
    with api.session(st) as s:
        rolled, _ = api.diff(s, BASE, NEW, None, ["fib:self>+50pp"])
        # the same diff read per upload: no side reaches the moments' minimum
        monkeypatch.setattr(rollups, "MOMENTS_MIN_UPLOADS", 10**9)
        rows = api.diff_parts(s, BASE, NEW, None, ["fib:self>+50pp"])
        assert rows.base.rollup is None
        assert _rows(rolled) == _rows(rows.doc)
        assert {k: v for k, v in rolled.items() if k != "rows"} == {
            k: v for k, v in rows.doc.items() if k != "rows"}
        assert rolled["functions"] > 10 and not rolled["failures"]
    st.close()


def test_small_sides_and_part_days_read_per_upload(store: Path) -> None:
    """Below MOMENTS_MIN_UPLOADS a side's intervals are the bootstrap's (a ratio of few
    uploads is skewed); a window that ends inside a day too (its part day's uploads have
    no moments of their own here: the whole diff reads per upload)."""
    from fleet_util import DAY, T0

    st = api.open_store(store)
    with api.session(st) as s:
        one_day = Filters(app="shop", release="1.10.0", until=T0 + 3 * DAY)
        small = api.diff_parts(s, BASE, one_day, None)
        assert small.base.rollup is None and small.new.rollup is None
        assert small.doc["new"]["traces"] < rollups.MOMENTS_MIN_UPLOADS
        part = Filters(app="shop", release="1.10.0", until=T0 + 15.5 * DAY)
        sel = rollups.select(s.engine, s.snap, part)
        assert sel is not None and len(sel.ends) and sel.traces >= rollups.MOMENTS_MIN_UPLOADS
        got = api.diff_parts(s, BASE, part, None)
        assert got.base.rollup is None and got.new.rollup is None
        # a rule that names `page.html?exp=idle` apart: busyLoop of `?exp=basic` and of
        # `?exp=idle` are two keys of the diff, one name group of the moments (the default
        # rule's script), which cannot say each apart: the per-upload rows answer
        rule = ("none", "[?]exp=idle$=-idle")
        split = api.diff_parts(s, replace(BASE, url_rules=rule), replace(NEW, url_rules=rule),
                               None)
        assert rollups.select(s.engine, s.snap, replace(BASE, url_rules=rule)) is not None
        assert split.base.rollup is None and split.new.rollup is None
        res = {r["resource"] for r in split.doc["rows"] if r["name"] == "busyLoop"}
        assert res == {"http://127.0.0.1:8000/page.html", "http://127.0.0.1:8000/page.html-idle"}
    st.close()


def test_dask_gives_the_rolled_diff_duckdb_gives(dask_client: object, store: Path) -> None:
    from jsprof.fleet.engine import DaskEngine, DuckEngine

    st = api.open_store(store)
    with api.session(st, DuckEngine()) as sd, api.session(st, DaskEngine(client=dask_client)) as sk:
        pd_, pk = api.diff_parts(sd, BASE, NEW, None), api.diff_parts(sk, BASE, NEW, None)
        assert pk.base.rollup is not None
        assert _rows(pd_.doc) == _rows(pk.doc)
        for a, b in zip(pd_.doc["rows"], pk.doc["rows"], strict=True):
            for k in CI:
                assert (a[k] is None) == (b[k] is None)
                if a[k] is not None:
                    assert a[k] == pytest.approx(b[k], abs=2e-3), k
    st.close()
