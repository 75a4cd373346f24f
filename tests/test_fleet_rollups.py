"""Rollups (issue 34): `fleet top` over whole days reads the rollup tables the compactor
writes (per release, day, route and env: stack -> weight, frame -> uploads per bucket of
self time), whose rows grow with distinct stacks and days, not uploads, and answers
exactly what the per-upload tables answer: on real stores (page loads resampled from
real Chromium traces, chunked, on several routes and envs), over many small parts, after
merging, with uploads not compacted yet, and after a retention prune cut a day in two.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import orjson
import pytest

from fleet_util import DAY, T0, make_trace, real_store, upload
from jsprof.errors import UsageError
from jsprof.fleet import api, query, rollups
from jsprof.fleet.filters import Filters
from jsprof.store import Store
from jsprof.store.retention import prune
from jsprof.store.tables.compact import compact
from jsprof.store.tables.manifest import read_manifest
from jsprof.store.tables.merge import merge_parts
from jsprof.store.tables.rollup import (
    ALPHA,
    HLL_M,
    KEYS,
    LOADS_EXACT,
    ROLLUP_KINDS,
    aggregate,
    bucket_of,
    bucket_value,
    load_hash,
    page_loads,
    schemas,
)

FILTERS = [
    Filters(app="shop"),
    Filters(app="shop", release="1.10.0"),
    Filters(app="shop", route="/c*"),
    Filters(app="shop", route="/home"),
    Filters(app="shop", env="prod"),
    Filters(app="shop", exclude_idle=True),
    Filters(app="shop", since=T0 + DAY),
    Filters(app="shop", since=T0 + DAY, until=T0 + 3 * DAY, release="1.9.0"),
]


def _routes(i: int) -> str | None:
    return ["/cart", "/home", None][i % 3]


def _fill(path: Path) -> Path:
    """48 page loads over 4 days, chunked in 1 to 3 uploads, on three routes, plus a few
    uploads with an env and a page load of their own."""
    real_store(path, 7, n=48, chunks=lambda i: 1 + i % 3, route=_routes)
    st = Store(path)
    rng = np.random.default_rng(2)
    for k in range(6):
        upload(st, f"env{k}", make_trace(rng, 200), app="shop", release="1.9.0",
               route="/cart", env="prod" if k % 2 else "dev",
               receivedAt=T0 + (k % 4) * DAY + 7200e3 + k, sampleInterval=[10.0, 4.0][k % 2])
    st.close()
    return path


def _raw(s: api.Session, f: Filters, n: int | None) -> dict:
    """`top` from the per-upload tables (what every query read before the rollups)."""
    sel = query.select(s.engine, s.snap, f)
    return {**query.top(s.engine, s.snap, sel, n), **api.notes(s)}


def _check(store: Path, filters: list[Filters] = FILTERS, rolled: bool = True) -> None:
    st = api.open_store(store)
    with api.session(st) as s:
        # Each filter also with scripts as recorded (`--url-rule none`): there the real
        # traces' `page.html?exp=basic` and `?exp=idle` stay two scripts, and the rollups'
        # rows per stored frame answer; by the default rule they are one `page.html`, and
        # the rows per function of two frames answer (format 7).
        for f in [g for h in filters for g in (h, replace(h, url_rules=("none",)))]:
            assert (rollups.plan(s.snap, f) is not None) == rolled, f
            assert (rollups.select(s.engine, s.snap, f) is not None) == rolled, f
            for n in (5, None):
                got = api.top(s, f, n)
                assert got == _raw(s, f, n), (f, n)
                assert got["traces"] > 0
    st.close()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _fill(tmp_path_factory.mktemp("rollups") / "store")


def test_top_from_rollups_equals_top_from_per_upload_rows(store: Path, tmp_path: Path) -> None:
    copy = tmp_path / "s"
    shutil.copytree(store, copy)
    st = Store(copy)
    compact(st, batch=5)  # many small parts per day: rows of one key in several
    st.close()
    man = read_manifest(copy)
    assert man["rollups"]
    _check(copy)
    # Merged: a closed day's rollup part holds one row per key, whatever the batches
    merge_parts(copy, now=T0 / 1000 + 30 * 86400, fanout=2)
    man = read_manifest(copy)
    import pyarrow.parquet as pq

    for entry in man["releases"].values():
        for kind in ROLLUP_KINDS:
            days = [e["day"] for e in entry["parts"][kind]]
            assert len(days) == len(set(days)) == 4, (kind, days)
            for e in entry["parts"][kind]:
                t = pq.read_table(copy / "tables" / e["path"]).to_pandas()
                assert not t.duplicated(list(KEYS[kind])).any()
    _check(copy)


def test_uploads_not_compacted_yet_are_in_the_answer(store: Path, tmp_path: Path) -> None:
    copy = tmp_path / "s"
    shutil.copytree(store, copy)
    st = Store(copy)
    compact(st)
    rng = np.random.default_rng(9)
    for k in range(4):  # the tail: read by the query in memory, rolled up there too
        upload(st, f"late{k}", make_trace(rng, 250), app="shop", release="1.10.0",
               route="/home", receivedAt=T0 + 2 * DAY + 9000e3 + k, pageLoad=f"load-{k}")
    st.close()
    _check(copy)
    st = api.open_store(copy)
    with api.session(st) as s:
        assert api.top(s, Filters(app="shop", release="1.10.0"), 3)["traces"] == 32 + 4
    st.close()


def test_a_tail_holding_the_committed_functions_is_read_from_the_rollups(
        store: Path, tmp_path: Path) -> None:
    """Uncompacted uploads of a compacted release that run its functions (page loads of
    the same real traces): the tail interns its frames apart, so each of those functions
    has a committed frame and a tail frame, never both in one upload. The rollups still
    answer (they stepped aside for any such tail before: on a live collector, which
    always has one, every `top` read every upload), and equal the per-upload answer."""
    from fleet_util import resampled_page_load

    copy = tmp_path / "s"
    shutil.copytree(store, copy)
    st = Store(copy)
    compact(st)
    rng = np.random.default_rng(10)
    for k in range(3):
        upload(st, f"late{k}", resampled_page_load(rng), app="shop", release="1.10.0",
               route="/home", receivedAt=T0 + 2 * DAY + 9000e3 + k, pageLoad=f"late-{k}")
    st.close()
    _check(copy, [Filters(app="shop"), Filters(app="shop", release="1.10.0", route="/home"),
                  Filters(app="shop", since=T0 + DAY)])
    st = api.open_store(copy)
    with api.session(st) as s:
        f = Filters(app="shop", release="1.10.0", url_rules=("none",))
        assert api.top(s, f, 3)["traces"] == 32 + 3
        # the case at hand: the release's functions have a committed and a tail frame
        from jsprof.fleet.release import merges_frames, merges_in_an_upload, named
        from jsprof.store.tables.intern import release_key

        rkey = release_key("shop", "1.10.0")
        rel = named({rkey: query._read_release(s.snap, rkey)}, f)[rkey]
        committed = s.snap.manifest["releases"][rkey]["committedFrames"]
        assert 0 < committed < len(rel.frame_key)
        assert merges_frames(rel) and not merges_in_an_upload(rel, committed)
    st.close()


def test_a_prune_that_cuts_a_day_rolls_the_day_up_anew(store: Path, tmp_path: Path) -> None:
    copy = tmp_path / "s"
    shutil.copytree(store, copy)
    st = Store(copy)
    compact(st)
    before = read_manifest(copy)
    cut = T0 + DAY + 3600e3 + 18 * 60e3  # in the middle of day 1's uploads
    prune(st, cut)
    st.close()
    man = read_manifest(copy)
    assert man["rollups"] and man["nextPart"] > before["nextPart"]
    _check(copy, [Filters(app="shop"), Filters(app="shop", route="/home"),
                  Filters(app="shop", since=T0 + DAY, until=T0 + 2 * DAY)])
    st = api.open_store(copy)
    with api.session(st) as s:
        got = api.top(s, Filters(app="shop"), 3)
    st.close()
    # page loads 18..47 are left, and the env uploads from day 2 on (received at 02:00)
    assert got["pageLoads"] == 30 + 2 + 2


def test_a_prune_that_cuts_a_day_of_several_parts_rolls_it_up_once(store: Path,
                                                                   tmp_path: Path) -> None:
    """A day compacted in several batches, cut by a prune inside one part's range: the
    day is rolled up anew from what it keeps, and its parts after the cut, which hold
    those uploads too, go with the cut one. Was: they were kept beside the new part, and
    their uploads counted twice (top: 80 traces against 74; the Time view's too)."""
    from test_fleet_time_rollups import _per_sample, _view

    copy = tmp_path / "s"
    shutil.copytree(store, copy)
    st = Store(copy)
    compact(st, batch=5)  # several parts a day
    man = read_manifest(copy)
    parts = sorted((e["minAt"], e["maxAt"]) for r in man["releases"].values()
                   for e in r["parts"]["rollup_cells"] if e["day"] == "2026-11-27")
    # the end of day 1's first part of two or more uploads' times: inside its range
    cut = next(hi for lo, hi in parts if lo < hi)
    assert any(lo >= cut for lo, _ in parts)  # a later part of the day is kept
    prune(st, cut)
    st.close()
    _check(copy, [Filters(app="shop"), Filters(app="shop", since=T0 + DAY, until=T0 + 2 * DAY)])
    st = api.open_store(copy)
    with api.session(st) as s:
        f = Filters(app="shop")
        assert _view(s, f) == _per_sample(s, f)
    st.close()


def test_a_prune_under_way_is_answered_from_the_per_upload_rows(store: Path,
                                                                 tmp_path: Path) -> None:
    """A prune writes its cut first, then rewrites the tables: in between, a day it cuts
    is not rolled up anew yet, and a query reads that app's per-upload rows."""
    copy = tmp_path / "s"
    shutil.copytree(store, copy)
    st = Store(copy)
    compact(st)
    st.close()
    (copy / "pruned.json").write_bytes(orjson.dumps({"*": T0 + DAY + 3600e3 + 18 * 60e3}))
    _check(copy, [Filters(app="shop")], rolled=False)
    # A cut at a day's start leaves every day whole: rollups answer
    (copy / "pruned.json").write_bytes(orjson.dumps({"*": T0 + DAY}))
    _check(copy, [Filters(app="shop"), Filters(app="shop", release="1.11.0")])


def test_what_rollups_cannot_say_is_read_per_upload(store: Path, tmp_path: Path) -> None:
    copy = tmp_path / "s"
    shutil.copytree(store, copy)
    st = Store(copy)
    compact(st)
    st.close()
    _check(copy, [Filters(app="shop", where=(("route", "/cart"),)),
                  Filters(app="shop", since=T0 + DAY + 3600e3, until=T0 + DAY + 7200e3)],
           rolled=False)


def test_a_window_inside_days_adds_its_part_days_per_upload(store: Path,
                                                            tmp_path: Path) -> None:
    """--since/--until inside a day: the whole days between from the rollups, the part
    days at the ends from their uploads' rows; page loads across both counted once."""
    copy = tmp_path / "s"
    shutil.copytree(store, copy)
    st = Store(copy)
    compact(st)
    st.close()
    cut = T0 + DAY + 3600e3 + 17 * 60e3 + 0.5  # between the chunks of day 1's page loads
    windows = [Filters(app="shop", since=cut), Filters(app="shop", until=T0 + 2 * DAY + 4e6),
               Filters(app="shop", since=cut, until=T0 + 3 * DAY + 3600e3 + 40 * 60e3,
                       route="/home"),
               Filters(app="shop", since=cut, exclude_idle=True, release="1.9.0")]
    st = api.open_store(copy)
    with api.session(st) as s:
        for f in windows:
            whole = rollups._split_days(f)[0]
            assert whole is not None and rollups.plan(s.snap, whole) is not None
            for n in (5, None):
                got = api.top(s, f, n)
                assert got == _raw(s, f, n), (f, n)
                assert got["traces"] > 0
    st.close()


def test_buckets_stand_for_their_values_within_alpha() -> None:
    rng = np.random.default_rng(0)
    v = np.concatenate([rng.integers(1, 1 << 42, 100_000), np.arange(1, 2000)])
    mid = bucket_value(bucket_of(v))
    assert (np.abs(mid - v) <= ALPHA * v * (1 + 1e-9)).all()
    assert bucket_of(np.zeros(3, np.int64)).tolist() == [0, 0, 0]
    # buckets keep the values' order
    order = np.argsort(v, kind="stable")
    assert (np.diff(bucket_of(v[order]).astype(np.int64)) >= 0).all()


def test_page_loads_past_the_exact_limit_are_a_sketch_of_known_error() -> None:
    """A merged cell past LOADS_EXACT page loads keeps a HyperLogLog sketch (HLL_M
    registers, standard error 1.04 / sqrt(HLL_M) = 1.6 %) instead of their ids; cells
    under it stay exact, and a union of both is estimated from all of them."""
    import pyarrow as pa

    sch = schemas()["rollup_loads"]

    def part(route: str, ids: list[str]) -> pa.Table:
        return pa.table({"route": [route] * len(ids), "env": [None] * len(ids),
                         "load_hash": load_hash(ids), "registers": [None] * len(ids)},
                        schema=sch)

    big = [f"load-{i}" for i in range(3 * LOADS_EXACT)]
    # three batches of the big cell, chunks of a load in two of them; a small cell
    merged = aggregate("rollup_loads", pa.concat_tables([
        part("/a", big[:5000]), part("/a", big[4000:9000]), part("/a", big[9000:]),
        part("/b", ["x", "y", "x"])]))
    rows = merged.to_pydict()
    sketched = [r for r, g in zip(rows["route"], rows["registers"], strict=True) if g]
    assert sketched == ["/a"] and sorted(h is not None for h in rows["load_hash"]) == [
        False, True, True]
    regs = [g for g in rows["registers"] if g]
    assert len(regs[0]) == HLL_M
    exact_b = np.asarray([h for r, h in zip(rows["route"], rows["load_hash"], strict=True)
                          if r == "/b"], np.int64)
    assert page_loads(exact_b, []) == 2
    err = 4 * 1.04 / np.sqrt(HLL_M)  # four standard errors
    got = page_loads(np.zeros(0, np.int64), regs)
    assert abs(got / len(big) - 1) < err, got
    both = page_loads(exact_b, regs)
    assert abs(both / (len(big) + 2) - 1) < err
    # merging a sketch again (a higher level) keeps it a sketch of the same registers
    again = aggregate("rollup_loads", pa.concat_tables([merged, part("/a", big[:10])]))
    assert [g for g in again.to_pydict()["registers"] if g] == regs


def test_a_function_in_two_scripts_named_alike_counts_once_a_trace(tmp_path: Path) -> None:
    """Page loads made of the real Chromium traces hold busyLoop twice: in
    `page.html?exp=basic` and in `page.html?exp=idle`, two stored frames the script
    identity rule names as one function (`page.html`). Each trace with it counts once,
    with both frames' self time summed, from the rollups as from the per-upload rows (it
    counted twice on both, 14 traces of 8 uploads, before). The rollups answer it from
    their rows per function of two frames (format 7; before, they stepped aside and the
    per-upload rows answered)."""
    from fleet_util import merged_recording, resampled_page_load
    from jsprof.analysis.profile import summarize
    from jsprof.store.tables.rollup import ALPHA

    rng = np.random.default_rng(11)
    st = Store(tmp_path / "s")
    traces = {}
    for i in range(8):
        # two of them only from trace-builtins and trace-idle: one busyLoop frame, or none
        tr = resampled_page_load(rng, only=(1, 2) if i % 4 == 3 else (0, 1, 2))
        traces[f"u{i}"] = tr
        upload(st, f"u{i}", tr, app="shop", release="1.0", route="/cart",
               receivedAt=T0 + 3600e3 + i * 60e3, pageLoad=f"load-{i}")
    compact(st)
    st.close()
    # By hand, per upload: busyLoop's frames on its sampled stacks and their self ms
    per_trace, both = [], 0
    for tr in traces.values():
        s = summarize(merged_recording([tr], [10.0]))
        mine = [i for i, k in enumerate(s.stats.keys) if k.name == "busyLoop"]
        both += {s.stats.keys[i].resource for i in mine} == {
            "http://127.0.0.1:8000/page.html?exp=basic",
            "http://127.0.0.1:8000/page.html?exp=idle"}
        if mine:
            per_trace.append(sum(float(s.stats.self_ms[i]) for i in mine))
    assert both >= 4  # the case at hand: one trace, two frames, one function
    st = api.open_store(tmp_path / "s")
    with api.session(st) as s:
        f = Filters(app="shop")
        assert rollups.plan(s.snap, f) is not None
        assert rollups.select(s.engine, s.snap, f) is not None
        assert api.top(s, f, None) == _raw(s, f, None)
        for got in (api.top(s, f, None), _raw(s, f, None)):
            (row,) = [r for r in got["rows"] if r["name"] == "busyLoop"]
            assert row["resource"] == "http://127.0.0.1:8000/page.html"
            assert got["traces"] == 8
            assert row["traces"] == len(per_trace) <= got["traces"]
            assert row["p50SelfMs"] == pytest.approx(np.percentile(per_trace, 50), rel=ALPHA)
            assert row["p95SelfMs"] == pytest.approx(np.percentile(per_trace, 95), rel=ALPHA)
    st.close()


def test_diff_and_regressions_count_a_trace_once_when_two_frames_are_one_function(
        tmp_path: Path) -> None:
    """`fleet diff` and `fleet regressions` read the same real page loads as the test above
    (busyLoop in `page.html?exp=basic` and `?exp=idle`, one function by the identity
    rule): each trace's busyLoop is one value, the sum of both frames' self time, per
    upload (what `regressions` tests) and in the shares `diff` shows; one row, not two."""
    from fleet_util import merged_recording, resampled_page_load
    from jsprof.analysis.diff import NameKey
    from jsprof.analysis.profile import summarize
    from jsprof.fleet.regressions import regressions

    rng = np.random.default_rng(12)
    st = Store(tmp_path / "s")
    hand: dict[str, list[tuple[float, float, bool]]] = {"1.0": [], "2.0": []}
    for rel, plant in (("1.0", None), ("2.0", "busyLoop")):
        for i in range(8):
            # release 2.0's busyLoop samples taken 3 times: a slowdown to find
            tr = resampled_page_load(rng, plant=plant, repeat=2)
            upload(st, f"{rel}-{i}", tr, app="shop", release=rel, route="/cart",
                   receivedAt=T0 + 3600e3 + i * 60e3, pageLoad=f"load-{rel}-{i}")
            s = summarize(merged_recording([tr], [10.0]))
            mine = [j for j, k in enumerate(s.stats.keys) if k.name == "busyLoop"]
            two = len({s.stats.keys[j].resource for j in mine}) == 2
            hand[rel].append((sum(float(s.stats.self_ms[j]) for j in mine), s.total_ms, two))
    compact(st)
    st.close()
    assert sum(two for v in hand.values() for _, _, two in v) >= 8  # the case at hand
    st = api.open_store(tmp_path / "s")
    with api.session(st) as s:
        parts = api.diff_parts(s, Filters(app="shop", release="1.0"),
                               Filters(app="shop", release="2.0"), None, reps=50)
        rows = [r for r in parts.doc["rows"] if r["name"] == "busyLoop"]
        assert [r["resource"] for r in rows] == ["http://127.0.0.1:8000/page.html"]
        for side, rel in (("base", "1.0"), ("new", "2.0")):
            pct = 100.0 * sum(x for x, _, _ in hand[rel]) / sum(t for _, t, _ in hand[rel])
            assert rows[0][f"{side}SelfPct"] == pytest.approx(pct, abs=1e-3)
            assert parts.doc[side]["traces"] == parts.doc[side]["pageLoads"] == 8
            sel = getattr(parts, side)
            key = NameKey("busyLoop", parts.match("http://127.0.0.1:8000/page.html"))
            self_m, _, _ = query.trace_shares(s.engine, s.snap, sel, [key], parts.match)
            by_id = dict(zip(sel.uploads.id, self_m[:, 0].tolist(), strict=True))
            want = [x for x, _, _ in hand[rel]]
            assert [by_id[f"{rel}-{i}"] for i in range(8)] == pytest.approx(want, rel=1e-6)
        doc = regressions(s, Filters(app="shop"), min_change=0.0, alpha=1.0, min_share=0.0)
        (found,) = [r for r in doc["regressions"] if r["name"] == "busyLoop"]
        assert found["beforePageLoads"] == found["afterPageLoads"] == 8
        for rel, k in (("1.0", "beforeMsPerLoad"), ("2.0", "afterMsPerLoad")):
            mean = float(np.mean([x for x, _, _ in hand[rel]]))
            assert found[k] == pytest.approx(mean, abs=2e-3)
    st.close()


def test_an_estimated_page_load_count_says_so_where_it_is_shown(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """Past LOADS_EXACT page loads in a merged rollup cell, `pageLoads` is a HyperLogLog
    estimate: `top --json` says `pageLoadsEstimated`, the table and the dashboard put
    `~` and the sketch's standard error beside the number; from per-upload rows (a window
    inside a day) the count is exact and says nothing. LOADS_EXACT is made 4 for the
    merge, so 24 page loads make a sketch without 4,097 uploads."""
    from browser_util import playwright_chromium
    from jsprof.cli import main
    from jsprof.store.tables import rollup
    from serve_util import Collector, signed_in

    st = Store(tmp_path / "s")
    rng = np.random.default_rng(5)
    for i in range(24):
        upload(st, f"u{i}", make_trace(rng, 60), app="shop", release="1.0", route="/cart",
               receivedAt=T0 + 3600e3 + i * 60e3, pageLoad=f"load-{i}")
    compact(st, batch=5)
    st.close()
    monkeypatch.setattr(rollup, "LOADS_EXACT", 4)
    merge_parts(tmp_path / "s", now=T0 / 1000 + 30 * 86400, fanout=2)
    monkeypatch.undo()
    whole, part = Filters(app="shop"), Filters(app="shop", until=T0 + 12 * 3600e3)
    st = api.open_store(tmp_path / "s")
    with api.session(st) as s:
        got = api.top(s, whole, 5)
        assert got["pageLoadsEstimated"] is True
        assert abs(got["pageLoads"] / 24 - 1) < 4 * rollup.HLL_ERROR
        exact = api.top(s, part, 5)
        assert exact["pageLoadsEstimated"] is False and exact["pageLoads"] == 24
        # The min-evidence refusal names the count it judged, and says when it is the
        # sketch's estimate (a diff reads the rollups from MOMENTS_MIN_UPLOADS uploads)
        monkeypatch.setattr(rollups, "MOMENTS_MIN_UPLOADS", 1)
        for f, said in ((whole, f"matches ~{got['pageLoads']} page loads (an estimate from "
                         "the rollups' page-load sketch: standard error 1.6 %) and"),
                        (part, "matches 24 page loads and")):
            with pytest.raises(UsageError) as e:
                api.diff(s, f, f, min_traces=1000)
            assert said in str(e.value), str(e.value)
        monkeypatch.undo()
    st.close()
    for argv, said in (([], f"~{got['pageLoads']} page loads (estimated: standard error 1.6 %)"),
                       (["--until", "2026-11-26T12:00Z"], "; 24 page loads")):
        capsys.readouterr()
        assert main(["fleet", "top", "--store", str(tmp_path / "s"), "--app", "shop",
                     *argv]) == 0
        out = " ".join(capsys.readouterr().out.split())
        assert said in out and ("estimated" in out) is not argv, out
    col = Collector(tmp_path / "s", "--app", "shop:k1")
    try:
        with playwright_chromium() as browser:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            signed_in(page, col.url)
            page.wait_for_function(
                "w => document.getElementById('top-summary').textContent.includes(w)",
                arg="page load", timeout=60000)
            text = page.locator("#top-summary").text_content()
            assert f"~{got['pageLoads']} page loads (estimated: standard error 1.6 %)" in text
    finally:
        col.stop()


def test_format_6_rollups_are_rebuilt_with_the_identity_groups(
        store: Path, tmp_path: Path) -> None:
    """Format 6's rollup_frames had rows per stored frame only (no `grouped` column): such
    tables are read per upload until the next compaction, which rebuilds the rollups from
    the per-upload tables (no raw segment needed) with the rows per function of two frames
    that the default identity rule reads: then the rollups answer, as the rows do."""
    import orjson
    import pyarrow.parquet as pq

    from jsprof.store.tables.manifest import FORMAT_VERSION

    copy = tmp_path / "s"
    shutil.copytree(store, copy)
    st = Store(copy)
    compact(st)
    st.close()
    mp = copy / "tables" / "_manifest.json"
    man = orjson.loads(mp.read_bytes())
    for entry in man["releases"].values():  # as format 6 wrote them
        for e in entry["parts"]["rollup_frames"]:
            p = copy / "tables" / e["path"]
            t = pq.read_table(p)
            t = t.filter(pq.read_table(p).column("grouped").to_numpy() == 0).drop(["grouped"])
            pq.write_table(t, p)
            e.pop("crc32", None)
            e["bytes"] = p.stat().st_size
    man["formatVersion"] = 6
    mp.write_bytes(orjson.dumps(man))
    st = api.open_store(copy)
    with api.session(st) as s:
        f = Filters(app="shop")
        assert rollups.plan(s.snap, f) is None  # read per upload meanwhile
        before = api.top(s, f, 5)
    st.close()
    st = Store(copy)
    compact(st)
    st.close()
    man = read_manifest(copy)
    assert man["formatVersion"] == FORMAT_VERSION == 12 and man["rollups"]
    st = api.open_store(copy)
    with api.session(st) as s:
        assert rollups.select(s.engine, s.snap, f) is not None
        assert api.top(s, f, 5) == before == _raw(s, f, 5)
    st.close()
    _check(copy)
