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

import orjson
import pytest

from fleet_util import real_store
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
