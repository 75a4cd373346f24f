"""`fleet regressions` from the rollups (issue 34): over whole days, a pair of more than
PERM_MAX_LOADS page loads is tested from rollup_perload (per function and page load: the
page loads, the sum and the sum of squares of its self ns per page load, added across
compaction batches as rollup_vitals is) and its examples come from rollup_examples, so
the query reads no per-upload row. On stores of page loads resampled from the real
Chromium traces, sent in 1 to 3 chunks that compaction batches of 5 cut apart, with
uploads not compacted yet, after merging, after a format 9 upgrade and on Dask: the same
findings, numbers and examples as the per-upload rows give. (PERM_MAX_LOADS is lowered
for these stores of a few dozen page loads a side: both paths read it alike.)
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from fleet_util import DAY, T0, real_store, resampled_page_load, split_trace, upload
from jsprof.analysis import stats
from jsprof.fleet import api, regressions
from jsprof.fleet.filters import Filters
from jsprof.store import Store
from jsprof.store.tables.compact import compact
from jsprof.store.tables.merge import merge_parts

NUMBERS = ("beforeMsPerLoad", "afterMsPerLoad", "changeMsPerLoad")


def _plant(i: int, day: int, rel: str) -> str | None:
    # fib 6x slower from 1.10.0 on
    return "fib" if rel != "1.9.0" else None


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rollups_regressions") / "store"
    real_store(path, 17, _plant, n=96, chunks=lambda i: 1 + i % 3,
               route=lambda i: ["/cart", "/home"][i % 2])
    st = Store(path)
    compact(st, batch=5)  # a page load's chunks in two batches, often
    st.close()
    return path


@pytest.fixture
def low_perm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stats, "PERM_MAX_LOADS", 10)


def _per_upload(s: api.Session, f: Filters, by: str, monkeypatch: pytest.MonkeyPatch) -> dict:
    """The document as the per-upload rows give it (what every query read before)."""
    with monkeypatch.context() as m:
        m.setattr(regressions, "_rolled_units", lambda *a: None)
        return regressions.regressions(s, f, by=by)


def _no_upload_rows(s: api.Session, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every per-upload read of the session's engine fails the test."""
    def refuse(*a: object, **k: object) -> None:
        raise AssertionError("read per upload")

    for name in ("uploads", "stacks", "frames", "per_upload_key", "resample", "sample_scan"):
        if hasattr(s.engine, name):
            monkeypatch.setattr(s.engine, name, refuse)


def _same(a: dict, b: dict) -> None:
    assert {k: v for k, v in a.items() if k != "regressions"} == {
        k: v for k, v in b.items() if k != "regressions"}
    assert len(a["regressions"]) == len(b["regressions"])
    for x, y in zip(a["regressions"], b["regressions"], strict=True):
        for k, v in x.items():
            if k in NUMBERS:
                assert v == pytest.approx(y[k], abs=2e-3), k
            elif k == "changeMsCi":
                assert np.allclose(v, y[k], atol=2e-3), (v, y[k])
            elif k == "changePctCi" or k == "changePct":
                assert np.allclose(np.asarray(v, float), np.asarray(y[k], float), atol=0.11)
            else:
                assert v == y[k], (k, v, y[k])


def _check(path: Path, monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    docs = []
    for by in ("release", "day"):
        for f in (Filters(app="shop"), Filters(app="shop", route="/cart")):
            with api.session(api.open_store(path)) as s:
                ref = _per_upload(s, f, by, monkeypatch)
                with monkeypatch.context() as m:
                    _no_upload_rows(s, m)
                    got = regressions.regressions(s, f, by=by)
            _same(got, ref)
            assert not got["skipped"] and got["tests"] > 5
            docs.append(got)
    return docs


def test_rolled_regressions_equal_the_per_upload_ones(store: Path, low_perm: None,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    docs = _check(store, monkeypatch)
    (rel,) = [r for r in docs[0]["regressions"] if r["name"] == "fib"]
    assert (rel["release"], rel["baseRelease"]) == ("1.10.0", "1.9.0")
    assert rel["beforePageLoads"] == rel["afterPageLoads"] == 32
    assert len(rel["exampleIds"]) == 3
    assert docs[2]["days"][0] == "2026-11-26" and len(docs[2]["days"]) == 8


def test_merged_parts_answer_alike(store: Path, tmp_path: Path, low_perm: None,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    copy = tmp_path / "s"
    shutil.copytree(store, copy)
    merge_parts(copy, now=T0 / 1000 + 30 * 86400, fanout=2)
    _check(copy, monkeypatch)


def test_a_page_load_cut_between_the_tables_and_the_tail(tmp_path: Path, low_perm: None,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    # Each page load's chunks but the last compacted; the last ones are the query's tail,
    # whose frame ids differ from the committed ones': the per-load sums add up on the
    # functions' hashes, the earlier chunks' values read back from the tables.
    path = tmp_path / "s"
    rng = np.random.default_rng(23)
    st = Store(path)
    last = []
    n_first = 0
    for i in range(72):
        day, rel = i // 24, ["1.9.0", "1.10.0", "1.11.0"][i % 3]
        tr = resampled_page_load(rng, plant=None if rel == "1.9.0" else "fib", repeat=5)
        pieces = split_trace(tr, 2 + i % 2)
        meta = {"app": "shop", "release": rel, "route": "/cart", "pageLoad": f"load-{i}"}
        for j, piece in enumerate(pieces):
            at = T0 + day * DAY + 3600e3 + i * 60e3 + j
            if j < len(pieces) - 1:
                upload(st, f"u{i}.{j}", piece, receivedAt=at, **meta)
                n_first += 1
            else:
                last.append((f"u{i}.{j}", piece, dict(meta, receivedAt=at)))
    compact(st, batch=7)
    for uid, piece, meta in last:
        upload(st, uid, piece, **meta)
    st.close()
    from jsprof.store.tables.manifest import read_manifest

    assert read_manifest(path)["nextUk"] == n_first  # the last chunks: the tail
    _check(path, monkeypatch)


def test_format_9_tables_are_read_per_upload_until_rebuilt(
        store: Path, tmp_path: Path, low_perm: None, monkeypatch: pytest.MonkeyPatch) -> None:
    import orjson

    from jsprof.store.tables.manifest import FORMAT_VERSION, read_manifest

    copy = tmp_path / "s"
    shutil.copytree(store, copy)
    mp = copy / "tables" / "_manifest.json"
    man = orjson.loads(mp.read_bytes())
    for entry in man["releases"].values():  # as format 9 wrote them
        entry["parts"].pop("rollup_perload")
        entry["parts"].pop("rollup_examples")
    man["formatVersion"] = 9
    mp.write_bytes(orjson.dumps(man))
    f = Filters(app="shop")
    with api.session(api.open_store(copy)) as s:
        before = regressions.regressions(s, f)
        with monkeypatch.context() as m:
            _no_upload_rows(s, m)
            with pytest.raises(AssertionError, match="read per upload"):
                regressions.regressions(s, f)
    st = Store(copy)
    compact(st)
    st.close()
    assert read_manifest(copy)["formatVersion"] == FORMAT_VERSION == 12
    with api.session(api.open_store(copy)) as s:
        with monkeypatch.context() as m:
            _no_upload_rows(s, m)
            _same(regressions.regressions(s, f), before)


def test_small_pairs_still_read_their_page_loads(store: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # At the real PERM_MAX_LOADS (400) every pair here is small: its test is the
    # permutation one, on each page load's value, read per upload (a few hundred loads
    # at most, by construction) -- the same document as before the rollups.
    with api.session(api.open_store(store)) as s:
        got = regressions.regressions(s, Filters(app="shop"))
        assert got == _per_upload(s, Filters(app="shop"), "release", monkeypatch)
        assert got["regressions"]


def test_dask_gives_the_rolled_regressions_duckdb_gives(dask_client: object, store: Path,
                                                        tmp_path: Path,
                                                        low_perm: None,
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    # DuckDB's rolled answer equals the per-upload one (above); Dask's, read from the same
    # rollups on a real LocalCluster's workers with no per-upload read, equals DuckDB's
    # (the parts merged, as a collector's closed days are: a task per small part of a
    # batch of 5 took minutes at load 30; three days by day).
    from jsprof.fleet.engine import DaskEngine

    copy = tmp_path / "s"
    shutil.copytree(store, copy)
    merge_parts(copy, now=T0 / 1000 + 30 * 86400, fanout=64)

    for by, f in (("release", Filters(app="shop")),
                  ("day", Filters(app="shop", since=T0, until=T0 + 3 * DAY))):
        docs = []
        for engine in ("duckdb", DaskEngine(client=dask_client)):
            with api.session(api.open_store(copy), engine) as s:
                with monkeypatch.context() as m:
                    _no_upload_rows(s, m)
                    docs.append(regressions.regressions(s, f, by=by))
        _same(*docs)
        assert docs[0]["tests"] > 5


class _PerPair:
    """`rollups.Units` as every pair read its sides before: each day (release) on its own,
    with its own scans of rollup_cells, rollup_loads, rollup_stacks and rollup_perload."""

    def __init__(self, engine: object, snap: object, f: Filters, fs: list[Filters]) -> None:
        from jsprof.fleet import rollups

        self.select = lambda i: rollups.select(engine, snap, fs[i])
        plans = [rollups.perload_plan(snap, g) for g in fs]
        self.perload = [None if p is None else (p, engine.rollup(p, "rollup_perload", g))
                        for p, g in zip(plans, fs, strict=True)]


@pytest.fixture(scope="module")
def days_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # fib 6x slower from the fourth day on, in every release
    path = tmp_path_factory.mktemp("rollups_regressions_days") / "store"
    real_store(path, 29, lambda i, day, rel: "fib" if day >= 3 else None, n=72,
               chunks=lambda i: 1 + i % 3, route=lambda i: ["/cart", "/home"][i % 2])
    st = Store(path)
    compact(st, batch=5)
    st.close()
    return path


def test_every_day_read_in_one_scan_per_table(store: Path, days_store: Path, low_perm: None,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    # `--by day` over 30 days read each pair as a diff of two rolled selections: ~10 scans
    # of the rollups a pair, each day read twice (29 pairs: 33-48 s at load 20-30). Now
    # each table is scanned once for every day, whatever their number; the document is
    # the per-pair reads' to the last digit, its order and ties too.
    from jsprof.fleet import rollups

    docs = []
    for path, by, f in ((days_store, "day", Filters(app="shop")),
                        (days_store, "day", Filters(app="shop", route="/cart")),
                        (store, "release", Filters(app="shop"))):
        with api.session(api.open_store(path)) as s:
            with monkeypatch.context() as m:
                m.setattr(rollups, "Units", _PerPair)
                ref = regressions.regressions(s, f, by=by)
            scans: list[str] = []
            scan = s.engine.rollup

            def counted(*a: object, scans: list = scans, scan: object = scan,
                        **k: object) -> dict:
                scans.append(str(a[1]))
                return scan(*a, **k)

            with monkeypatch.context() as m:
                _no_upload_rows(s, m)
                m.setattr(s.engine, "rollup", counted)
                got = regressions.regressions(s, f, by=by)
        assert got == ref
        assert got["tests"] > 5 and not got["skipped"]
        # the days (rollup_cells), then cells, loads, stacks and per-load sums of every
        # unit, then the examples of the pairs that found something
        assert scans[:5] == ["rollup_cells", "rollup_cells", "rollup_loads", "rollup_stacks",
                             "rollup_perload"], scans
        assert set(scans[5:]) <= {"rollup_examples"}
        assert len(scans) - 5 <= len({(x["baseDay"] if by == "day" else x["baseRelease"])
                                      for x in got["regressions"]})
        docs.append(got)
    assert len(docs[0]["days"]) == 6
    assert [(x["name"], x["day"]) for x in docs[0]["regressions"]][:1] == [
        ("fib", "2026-11-29")]
    assert docs[2]["regressions"]
