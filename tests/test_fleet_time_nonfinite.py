"""The merged Time view and `--during` on samples whose stored time is not finite (NaN,
inf, -inf; issue 34). The recorders' formats refuse such times, so a store has them only
in a samples table written by other means (here: parts rewritten, as an older jsprof or
another writer could leave them). The Time view's rollups leave such samples out and
count them (store/tables/timeroll.py); the per-sample view, which answers whenever the
rollups cannot, must give the same page: the same width, buckets, "later", sums and page
loads, and the same count of samples left out, on both fleet engines. A non-finite time
must not be the 99th percentile the buckets are cut at, nor go to "later" or bucket 0."""

from __future__ import annotations

import shutil
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from fleet_util import T0, as_tables_format_10, real_store
from jsprof.fleet import api, timecourse
from jsprof.fleet import engine as fleet_engine
from jsprof.fleet.filters import Filters

FILTERS = [Filters(app="shop"), Filters(app="shop", exclude_idle=True),
           Filters(app="shop", route="/home")]


def _routes(i: int) -> str:
    return ["/cart", "/home"][i % 2]


def _base(path: Path) -> Path:
    """12 page loads of one day (resampled real Chromium traces), some in two chunks, on
    two routes: compacted (the samples table and the Time view's rollups written)."""
    from jsprof.store import Store
    from jsprof.store.tables.compact import compact

    real_store(path, 1, n=12, chunks=lambda i: 1 + i % 2, route=_routes)
    st = Store(path)
    compact(st, batch=5)
    st.close()
    return path


def _rewrite_samples(path: Path, how: Any) -> int:
    """Each samples part's rows rewritten by `how(t)`: new times, or `(keep,)` the rows
    kept (the part's bytes and CRC in the manifest with it); the number of times that are
    no longer finite."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tdir = path / "tables"
    mp = tdir / "_manifest.json"
    man = orjson.loads(mp.read_bytes())
    bad = 0
    for entry in man["releases"].values():
        for e in entry["parts"]["samples"]:
            p = tdir / e["path"]
            t = pq.read_table(p)
            times = how(t["t"].to_numpy().copy())
            if isinstance(times, tuple):  # (which rows to keep,)
                t = t.filter(pa.array(times[0]))
            else:
                bad += int((~np.isfinite(times)).sum())
                t = t.set_column(t.column_names.index("t"), "t", pa.array(times))
            pq.write_table(t, p)
            data = p.read_bytes()
            e["bytes"], e["crc32"] = len(data), zlib.crc32(data)
    mp.write_bytes(orjson.dumps(man))
    return bad


def _roll_up_again(path: Path) -> None:
    """The Time view's rollups made anew from the samples tables as they are now (the
    manifest of format 10 has none: the next compaction builds them, `rebuild.py`)."""
    from jsprof.store import Store
    from jsprof.store.tables.compact import compact
    from jsprof.store.tables.manifest import read_manifest

    as_tables_format_10(path)
    st = Store(path)
    compact(st)
    st.close()
    assert read_manifest(path)["formatVersion"] == 12


def _mark(frac: float, seed: int) -> Any:
    """A `how` that sets about `frac` of each part's times (at least one of each kind) to
    NaN, inf and -inf in turn."""
    rng = np.random.default_rng(seed)

    def how(t: np.ndarray) -> np.ndarray:
        n = max(int(len(t) * frac), 3)
        at = rng.choice(len(t), n, replace=False)
        t[at] = np.resize(np.asarray([np.nan, np.inf, -np.inf]), n)
        return t
    return how


@pytest.fixture(scope="module", params=[0.002, 0.05], ids=["few", "over-1-percent"])
def stores(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
           ) -> tuple[Path, Path, int]:
    """(the store with non-finite times and its rollups made from them, the same store
    with those samples' rows taken out of its samples table, how many there are).
    "few": under 1 % of the samples, so they are not where the 99th percentile lies;
    "over-1-percent": NaN and +inf would be the largest times."""
    root = tmp_path_factory.mktemp("nonfinite")
    bad = _base(root / "bad")
    clean = root / "clean"
    shutil.copytree(bad, clean)
    n = _rewrite_samples(bad, _mark(request.param, 11))
    assert n > 0
    _roll_up_again(bad)
    # the same rows taken out of the copy: each part's non-finite times, read back from
    # the rewritten part (the parts are the same files in both copies)
    import pyarrow.parquet as pq

    man = orjson.loads((clean / "tables" / "_manifest.json").read_bytes())
    order = [e["path"] for entry in man["releases"].values() for e in entry["parts"]["samples"]]

    def drop(t: np.ndarray) -> tuple[np.ndarray]:
        was = pq.read_table(bad / "tables" / order.pop(0))["t"].to_numpy()
        assert len(was) == len(t)
        return (np.isfinite(was),)

    _rewrite_samples(clean, drop)
    return bad, clean, n


def _views(path: Path, engine: Any, rolled: bool, filters: list[Filters]) -> list[dict]:
    """The Time view of each of `filters`; `rolled`: from the rollups (asserted), else
    from the samples (the rollups not read)."""
    from jsprof.fleet.query import select

    got = []
    answered: list[bool] = []
    orig = timecourse._rolled_sums

    def r(*a: Any) -> Any:
        out = orig(*a)
        answered.append(out is not None)
        return out

    st = api.open_store(path)
    timecourse._rolled_sums = r if rolled else (lambda *a: None)
    try:
        with api.session(st, engine) as s:
            for f in filters:
                got.append(timecourse.time_course(
                    s.engine, s.snap, select(s.engine, s.snap, f), "shop"))
    finally:
        timecourse._rolled_sums = orig
        st.close()
    assert answered == [True] * len(filters) if rolled else not answered
    return got


def _same_from_both_paths(bad: Path, n: int, engine: Any, filters: list[Filters]
                          ) -> list[dict]:
    per_sample = _views(bad, engine, False, filters)
    rolled = _views(bad, engine, True, filters)
    for f, a, b in zip(filters, per_sample, rolled, strict=True):
        assert a == b, f  # the same page from either path
        # every non-finite time of the selection's uploads counted (idle or not)
        assert (a["samplesNonFinite"] == n) == (f.route is None), (f, a["samplesNonFinite"])
        assert a["buckets"] == len(a["bucketMs"]) and a["fns"]
    return per_sample


def test_the_time_view_leaves_non_finite_times_out_on_both_paths(
        stores: tuple[Path, Path, int]) -> None:
    bad, clean, n = stores
    got = _same_from_both_paths(bad, n, "duckdb", FILTERS)
    # what is left is the view of the same store without those samples' rows
    for f, a, c in zip(FILTERS, got, _views(clean, "duckdb", False, FILTERS), strict=True):
        assert c["samplesNonFinite"] == 0
        assert {**a, "samplesNonFinite": 0} == c, f


def test_the_dask_engine_too(stores: tuple[Path, Path, int], dask_client: Any) -> None:
    """(Its Time view's sample scans are DuckDB's whatever the engine: the rest is Dask's.
    Two filters: each view is ~9 s of Dask at load ~12.)"""
    bad, _, n = stores
    _same_from_both_paths(bad, n, fleet_engine.DaskEngine(client=dask_client), FILTERS[:2])


@pytest.fixture(scope="module")
def during_stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """6 page loads, each one interaction over the whole load (its timeline) and a 5 s
    gap in its samples (a lost time: the sample before it weighs the cap); in the first
    store the sample after each gap has time +inf and a few others NaN, inf or -inf, the
    second has those samples' rows taken out."""
    from fleet_util import make_trace, upload
    from jsprof.store import Store
    from jsprof.store.tables.compact import compact

    root = tmp_path_factory.mktemp("during_nonfinite")
    bad = root / "bad"
    st = Store(bad)
    rng = np.random.default_rng(8)
    for i in range(6):
        tr = make_trace(rng, 300)
        t = tr.sample_time.copy()
        t[150:] += 5000.0
        tr = tr.replace(sample_time=t)
        end = float(t[-1]) + 1.0
        upload(st, f"u{i}", tr, app="shop", release="1.0", route="/cart",
               receivedAt=T0 + 3600e3 + i * 60e3, pageLoad=f"load-{i}",
               timeline={"interactions": [
                   {"id": 1, "type": "click", "start": 0.0, "duration": end,
                    "processingStart": 5.0, "processingEnd": 250.0, "target": "button#buy"}]})
    compact(st)
    st.close()
    clean = root / "clean"
    shutil.copytree(bad, clean)
    marks = np.random.default_rng(2)

    def how(t: np.ndarray) -> np.ndarray:
        # each upload's 300 samples in order: the one after the gap, and 3 others
        for a in range(0, len(t), 300):
            t[a + 150] = np.inf
            t[a + marks.choice(np.r_[0:149, 151:300], 3, replace=False)] = [
                np.nan, np.inf, -np.inf]
        return t

    assert _rewrite_samples(bad, how) == 6 * 4
    man = orjson.loads((clean / "tables" / "_manifest.json").read_bytes())
    order = [e["path"] for entry in man["releases"].values() for e in entry["parts"]["samples"]]

    def drop(t: np.ndarray) -> tuple[np.ndarray]:
        import pyarrow.parquet as pq

        return (np.isfinite(pq.read_table(bad / "tables" / order.pop(0))["t"].to_numpy()),)

    _rewrite_samples(clean, drop)
    return bad, clean


def test_during_windows_leave_non_finite_times_out(during_stores: tuple[Path, Path]
                                                   ) -> None:
    """`--during`: a sample whose time is not finite is in no window, and no neighbour
    either: the gap before a sample at +inf was an infinite lost time. The answer is the
    store's without those samples: the same rows, the same lost time."""
    got = []
    for path in during_stores:
        st = api.open_store(path)
        with api.session(st) as s:
            got.append(api.top(s, Filters(app="shop", during="interaction"), None))
        st.close()
    assert got[1]["lostMs"] > 0  # the premise: the gaps are lost time
    assert got[0] == got[1], (got[0]["lostMs"], got[1]["lostMs"])


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium for the module's page tests (one per store parameter): a
    launch and close is ~2 s, more under load; each test's pages are its own
    (`fresh_pages`)."""
    from browser_util import playwright_chromium

    with playwright_chromium("--disable-dev-shm-usage") as b:
        yield b


@pytest.mark.chromium
def test_the_page_says_how_many_were_left_out(stores: tuple[Path, Path, int], browser: Any,
                                              tmp_path: Path) -> None:
    """The merged flame page's Time view (in headless Chromium) says how many samples it
    left out for their time; the page of the store without them says nothing of it."""
    from browser_util import fresh_pages

    bad, clean, n = stores
    notes = []
    with fresh_pages(browser) as browser:
        for path in (bad, clean):
            st = api.open_store(path)
            with api.session(st) as s:
                html = api.flame(s, Filters(app="shop"))
            st.close()
            page = tmp_path / f"{path.name}.html"
            page.write_text(html)
            p = browser.new_page(viewport={"width": 1300, "height": 1000})
            errors: list[str] = []
            p.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
            p.goto(page.as_uri() + "#view=time")
            p.wait_for_selector("body[data-view='time']", timeout=30000)
            notes.append(p.locator("[data-note='fleet']").text_content())
            assert not errors
    assert f" {n} samples stored with a time that is not a finite number" in notes[0]
    assert "not a finite number" not in notes[1]
