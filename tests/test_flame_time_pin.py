"""The dashboard's merged flame page and its Time tab answer for the same uploads (issue 34).

The page (`/v1/query/flame?time_view=fetch`) is drawn from one read of the store and its
Time view is read when the tab opens, maybe minutes later: the view's URL carries the
page's `pin` (the upload key bound of its read), so uploads that arrive in between are in
neither. A real `jsprof serve` on loopback, real uploads posted to it; the Time view's own
read is counted in the collector's process (a sitecustomize): it builds no call tree.
"""

from __future__ import annotations

import html
import os
import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit

import numpy as np
import orjson
import pytest

from fleet_util import DAY, T0, real_store, resampled_page_load, upload
from serve_util import READ_TOKEN, Collector, field_trace

AUTH = {"Authorization": f"Bearer {READ_TOKEN}"}

# Each call of what builds the merged call tree (the selections that sum the stacks, the
# stacks' scan, the tree), a line in $JSPROF_TEST_WORK_LOG.
SITECUSTOMIZE = '''
import os
_log = os.environ.get("JSPROF_TEST_WORK_LOG")
if _log:
    from jsprof.analysis import calltree as _ct
    from jsprof.fleet import engine as _en, query as _q, rollups as _r

    def _counting(owner, name):
        real = getattr(owner, name)

        def counted(*a, **k):
            with open(_log, "a") as f:
                f.write(name + "\\n")
            return real(*a, **k)

        setattr(owner, name, counted)

    _counting(_q, "select")
    _counting(_r, "select")
    _counting(_en.DuckEngine, "stacks")
    _counting(_ct, "build_call_tree")
'''


@pytest.fixture(params=["tail", "compacting"])
def col(request, tmp_path: Path) -> Iterator[tuple[Collector, Path]]:
    store = real_store(tmp_path / "store", 5, n=12)
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(SITECUSTOMIZE)
    log = tmp_path / "work.log"
    log.write_text("")
    path = os.pathsep.join(p for p in (str(hook), os.environ.get("PYTHONPATH")) if p)
    # "tail": nothing compacted while the test runs (the new uploads stay the tail);
    # "compacting": the collector's background compactor, every second
    extra = ["--compact-every", "0"] if request.param == "tail" else ["--compact-every", "1"]
    c = Collector(store, "--app", "shop:k1", *extra,
                  env={"PYTHONPATH": path, "JSPROF_TEST_WORK_LOG": str(log)})
    yield c, log
    c.stop()


def _time_url(c: Collector, query: str) -> str:
    status, _, body = c.request("GET", f"/v1/query/flame?{query}", headers=AUTH)
    assert status == 200, body[:300]
    model = orjson.loads(re.search(rb'id="fg-model">(.*?)</script>', body, re.S).group(1))
    return html.unescape(model["fleetTime"]["url"])


def _get(c: Collector, url: str) -> dict:
    status, _, body = c.request("GET", url, headers=AUTH)
    assert status == 200, body[:300]
    return orjson.loads(body)


def test_uploads_arriving_between_the_page_and_its_time_tab_are_in_neither(
        col: tuple[Collector, Path]) -> None:
    c, log = col
    url = _time_url(c, "app=shop&format=html&max_nodes=1500&time_view=fetch")
    assert dict(parse_qsl(urlsplit(url).query))["app"] == "shop"
    before = _get(c, url)  # the tab opened at once: the page's uploads
    assert before["fleetTime"]["uploadsAll"] == 12
    # Uploads arrive while the page is open; the store reads them (an unpinned query).
    body = field_trace(400)
    for i in range(3):
        assert c.post(body, f"app=shop&key=k1&release=1.9.0&id=late{i}")[0] == 202
    c.wait_stored("late0", "late1", "late2")
    now = _get(c, "/v1/query/flame_time?" + urlencode({"app": "shop"}))
    assert now["fleetTime"]["uploadsAll"] == 15  # they are read...
    later = _get(c, url)  # ...but the tab opened now answers for the graph's uploads
    assert later["fleetTime"]["uploadsAll"] == 12
    assert orjson.dumps(later["fleetTime"]) == orjson.dumps(before["fleetTime"])
    assert later["pin"] == before["pin"] and later["pin"]["same"] is True
    # The page drawn now pins the new read, and its tab counts them.
    again = _get(c, _time_url(c, "app=shop&format=html&time_view=fetch"))
    assert again["fleetTime"]["uploadsAll"] == 15 and again["pin"]["same"] is True


def test_the_time_view_read_alone_builds_no_call_tree(col: tuple[Collector, Path]) -> None:
    c, log = col
    url = _time_url(c, "app=shop&format=html&time_view=fetch")
    drawn = log.read_text().splitlines()
    assert "build_call_tree" in drawn  # (the counting works: the page built its tree)
    log.write_text("")
    doc = _get(c, url)
    assert doc["fleetTime"]["fns"]
    assert log.read_text().splitlines() == []  # no selection of stacks, no tree


def test_a_pin_the_collector_cannot_answer_is_said_and_bad_ones_refused(
        col: tuple[Collector, Path]) -> None:
    c, _ = col
    url = _time_url(c, "app=shop&format=html&time_view=fetch")
    q = dict(parse_qsl(urlsplit(url).query))
    held = int(q["pin"])
    # A read of the store past what this collector holds (another worker's, tables made
    # anew): the view is of the uploads held now, and says so.
    doc = _get(c, "/v1/query/flame_time?" + urlencode({**q, "pin": str(held + 7)}))
    assert doc["pin"] == {"asked": held + 7, "read": held, "same": False,
                          "note": doc["pin"]["note"]}
    assert "not of those the graph above was drawn from" in doc["pin"]["note"]
    assert doc["fleetTime"]["uploadsAll"] == 12
    for bad in ("", "-1", "1e3", "0x10", "1" * 16, "١٢", "__import__('os')"):
        status, _, body = c.request(
            "GET", "/v1/query/flame_time?" + urlencode({"app": "shop", "pin": bad}),
            headers=AUTH)
        err = orjson.loads(body)["error"]
        assert status == 400 and "query parameter pin" in err and "\n" not in err, (bad, err)
    status, _, body = c.request("GET", "/v1/query/top?app=shop&pin=3", headers=AUTH)
    assert status == 400 and b"pin" in body


def _same_day(st: object, rng: np.random.Generator, ids: range) -> None:
    """Uploads u{i} of `ids` on real_store's first day, after its 12."""
    for i in ids:
        upload(st, f"u{i:02d}", resampled_page_load(rng, repeat=5), app="shop",
               release=("1.9.0", "1.10.0", "1.11.0")[i % 3], route="/cart",
               receivedAt=T0 + 3600e3 + i * 60e3, pageLoad=f"load-{i}")


@pytest.mark.parametrize("late", ["tail", "compacted"])
def test_a_pinned_tab_reads_per_upload_only_the_parts_its_pin_cuts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, late: str) -> None:
    """Uploads that arrive between the page and its tab are in the Time view's rollups of
    their day: the tab reads the parts wholly below its pin as rolled up and per upload
    only the uploads below it of the parts that hold later ones (compacted: 3 of 15; in the
    tail: none; before, all 15: ~9x `fleet top` on bench_flame_query's 1,000), the same
    answer as the page's read and as the samples' (the rollups set aside)."""
    from jsprof.fleet import api, timecourse
    from jsprof.fleet.engine import DuckEngine
    from jsprof.fleet.filters import Filters
    from jsprof.store import Store
    from jsprof.store.tables.compact import compact

    scanned: list[int] = []
    real_scan = DuckEngine.sample_scan

    def counted(self: DuckEngine, snap: object, up: object, **cols: object) -> object:
        scanned.append(len(up))
        return real_scan(self, snap, up, **cols)

    monkeypatch.setattr(DuckEngine, "sample_scan", counted)
    rng = np.random.default_rng(7)
    st = Store(real_store(tmp_path / "store", 5, n=12))
    compact(st)  # u00-u11 committed, one part a release
    _same_day(st, rng, range(12, 15))  # the tail when the page is drawn
    f = Filters(app="shop", since=T0, until=T0 + DAY)
    with api.session(st, keep_tail=True) as s:
        pin = api.data_pin(s)
        page = api.flame_time(s, f, pin=pin)
        assert page["fleetTime"]["uploadsAll"] == 15 and scanned == []  # all rolled up
        with monkeypatch.context() as m:  # the samples' answer: the kept tail's rollups
            m.setattr(timecourse, "_rolled_sums", lambda *a: None)  # held its stacks' ids
            page_samples = api.flame_time(s, f, pin=pin)  # as its own (another function's)
        scanned.clear()
    assert orjson.dumps(page["fleetTime"]) == orjson.dumps(page_samples["fleetTime"])
    _same_day(st, rng, range(15, 18))  # past the pin, on the same day
    if late == "compacted":
        compact(st)  # u12-u17 one batch: its parts hold uploads on both sides of the pin
    with api.session(st, keep_tail=True) as s:
        assert api.data_pin(s) == pin + 3
        tab = api.flame_time(s, f, pin=pin)
        # compacted: u12-u14's samples, not the other 12's; in the tail: none (the kept
        # tail read u12-u14 as one chunk, u15-u17 as the next)
        assert scanned == ([3] if late == "compacted" else []), scanned
        monkeypatch.setattr(timecourse, "_rolled_sums", lambda *a: None)
        slow = api.flame_time(s, f, pin=pin)
    assert tab["fleetTime"]["uploadsAll"] == 15
    assert orjson.dumps(tab["fleetTime"]) == orjson.dumps(page["fleetTime"])
    assert orjson.dumps(tab["fleetTime"]) == orjson.dumps(slow["fleetTime"])


def _timeline(i: int, k: int) -> dict:
    """Page load i's chunk k: an interaction, a long frame and its LCP, all its own."""
    return {"interactions": [{"id": k + 1, "type": "click", "start": 10.0 + k,
                              "duration": 100.0 + 37 * i + k, "processingStart": 15.0,
                              "processingEnd": 60.0, "target": "button#buy"}],
            "longFrames": [{"start": 5.0, "duration": 80.0 + i, "blockingDuration": 30.0 + i + k}],
            "load": {"lcp": 500.0 + 11 * i + k}}


@pytest.mark.parametrize("mode", ["tail", "compacting"])
def test_the_vitals_of_a_pinned_tab_are_the_page_s_when_uploads_arrive(
        tmp_path: Path, mode: str) -> None:
    """The vitals beside the Time view count the graph's uploads, as its lanes do: read
    after uploads arrived, the pinned tab gives the page's vitals, from the rollups. One
    page load's chunks fall on two UTC days: one page load a day there, as the page's read
    (the rollups) counted it; read per upload, as the pinned tab's vitals were, it was one
    page load (8 where the page said 9): the answer changed as uploads arrived."""
    from jsprof.store import Store

    st = Store(real_store(tmp_path / "store", 5, n=12))
    rng = np.random.default_rng(3)
    n = 0
    for i in range(4):  # page loads of 1 to 3 chunks, one of them over midnight
        for k in range(1 + i % 3):
            n += 1
            at = T0 + DAY - 30e3 + k * 60e3 if i == 2 else T0 + 7200e3 + n * 60e3
            upload(st, f"v{i}.{k}", resampled_page_load(rng, repeat=1), app="shop",
                   release="1.9.0", route="/cart", receivedAt=at, pageLoad=f"vl-{i}",
                   timeline=_timeline(i, k))
    st.close()
    extra = ["--compact-every", "0"] if mode == "tail" else ["--compact-every", "1"]
    c = Collector(tmp_path / "store", "--app", "shop:k1", *extra)
    try:
        url = _time_url(c, "app=shop&format=html&time_view=fetch")
        before = _get(c, url)
        mine = [r for r in before["fleetTime"]["vitals"] if r["release"] == "1.9.0"]
        assert [r["pageLoads"] for r in mine] == [9] and mine[0]["inpP75Ms"] is not None
        for i in range(3):
            assert c.post(field_trace(300, seed=i + 3),
                          f"app=shop&key=k1&release=1.9.0&id=late{i}")[0] == 202
        c.wait_stored("late0", "late1", "late2")
        later = _get(c, url)
        assert later["pin"]["same"] is True
        assert later["fleetTime"]["vitals"] == before["fleetTime"]["vitals"]
    finally:
        c.stop()


@pytest.mark.parametrize("late", ["tail", "compacted"])
def test_pinned_vitals_read_per_upload_only_the_page_loads_of_the_parts_the_pin_cuts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, late: str) -> None:
    """Chunks of page loads on both sides of the pin, in one part once compacted: the pinned
    vitals come from the rollups (before: every upload's timeline), the parts wholly below
    the pin as rolled up and the cut ones' uploads below it added as a batch of them would
    be, so they equal the page's."""
    from jsprof.fleet import api
    from jsprof.fleet import vitals as fv
    from jsprof.fleet.filters import Filters
    from jsprof.store import Store
    from jsprof.store.tables.compact import compact

    answered: list[bool] = []
    real = fv.rolled
    monkeypatch.setattr(fv, "rolled", lambda *a: answered.append(
        (got := real(*a)) is not None) or got)
    rng = np.random.default_rng(7)
    st = Store(real_store(tmp_path / "store", 5, n=12))
    n = 0

    def chunk(i: int, k: int) -> None:
        nonlocal n
        n += 1
        upload(st, f"p{i}.{k}", resampled_page_load(rng, repeat=1), app="shop",
               release="1.9.0", route="/cart", receivedAt=T0 + 7200e3 + n * 60e3,
               pageLoad=f"pl-{i}", timeline=_timeline(i, k))

    for i in range(4):
        chunk(i, 0)
    compact(st)
    for i in range(2, 6):  # the tail when the page is drawn
        chunk(i, 1)
    f = Filters(app="shop", since=T0, until=T0 + DAY)
    with api.session(st, keep_tail=True) as s:
        pin = api.data_pin(s)
        page = api.flame_time(s, f, pin=pin)["fleetTime"]["vitals"]
    for i in range(3, 8):  # past the pin: page loads 3-5 go on, 6 and 7 begin
        chunk(i, 2)
    if late == "compacted":
        compact(st)  # p2.1-p7.2 one batch: its part holds uploads on both sides of the pin
    answered.clear()
    with api.session(st, keep_tail=True) as s:
        tab = api.flame_time(s, f, pin=pin)["fleetTime"]["vitals"]
    assert answered == [True]
    assert tab == page
    assert [r["pageLoads"] for r in tab if r["release"] == "1.9.0"] == [4 + 6]


def test_uploads_pruned_between_the_page_and_its_tab_are_said(tmp_path: Path) -> None:
    """A retention prune between the page and its Time tab takes some of the graph's
    uploads: the tab can count only the rest, and says how many went (before: 6 of 10
    fewer, said nowhere). A real collector; the prune is `jsprof serve prune`."""
    import subprocess
    import time

    from jsprof.store import Store
    from serve_util import JSPROF

    st = Store(tmp_path / "store")
    rng = np.random.default_rng(5)
    now = time.time() * 1000
    for i in range(10):  # 6 received 40 days ago, 4 an hour ago
        upload(st, f"u{i}", resampled_page_load(rng, repeat=1), app="shop",
               release="1.9.0", route="/cart", pageLoad=f"load-{i}",
               receivedAt=(now - 40 * DAY if i < 6 else now - 3600e3) + i * 1e3)
    st.close()
    c = Collector(tmp_path / "store", "--app", "shop:k1", "--compact-every", "0")
    try:
        url = _time_url(c, "app=shop&format=html&time_view=fetch")
        assert dict(parse_qsl(urlsplit(url).query))["drawn"] == "10"
        before = _get(c, url)
        assert before["fleetTime"]["uploadsAll"] == 10 and "note" not in before["pin"]
        r = subprocess.run([str(JSPROF), "serve", "prune", "--store", str(tmp_path / "store"),
                            "--older-than", "30d"], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and "removed 6 uploads" in r.stdout, (r.stdout, r.stderr)
        later = _get(c, url)
        assert later["fleetTime"]["uploadsAll"] == 4
        assert later["pin"]["same"] is True and later["pin"]["pruned"] == 6
        assert "6 uploads of the 10 the graph above was drawn from were pruned" in (
            later["pin"]["note"]), later["pin"]
        status, _, body = c.request("GET", url.replace("drawn=10", "drawn=1e3"), headers=AUTH)
        assert status == 400 and b"query parameter drawn" in body
    finally:
        c.stop()
