"""The dashboard's merged flame page reads its Time view when the Time tab is opened, not
with the page (issue 34: the Time view's reads were most of the page's cost beyond `fleet
top`'s, and most looks never open it). In real headless Chromium on a real `jsprof serve`
whose Time view reads are counted (a sitecustomize in the collector's process wraps
`timecourse.time_course`): signing in and drawing the graph reads none; the tab, opened by
keyboard, reads it once and shows what the complete page (no `time_view`, as `fleet flame
--url` saves it) shows, from the same `fleetTime` block."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import orjson
import pytest

from browser_util import fresh_pages, playwright_chromium
from fleet_util import real_store
from serve_util import READ_TOKEN, Collector, signed_in

SHOTS = os.environ.get("JSPROF_DASHBOARD_SHOTS")  # a folder to keep the screenshots in
AUTH = {"Authorization": f"Bearer {READ_TOKEN}"}

# Each call of the Time view's query, a line in $JSPROF_TEST_TIME_LOG.
SITECUSTOMIZE = '''
import os
_log = os.environ.get("JSPROF_TEST_TIME_LOG")
if _log:
    from jsprof.fleet import timecourse as _tc

    _real = _tc.time_course

    def _counted(*a, **k):
        with open(_log, "a") as f:
            f.write("time_course\\n")
        return _real(*a, **k)

    _tc.time_course = _counted
'''


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    with playwright_chromium() as b:
        yield b


@pytest.fixture(scope="module")
def col(tmp_path_factory) -> Iterator[tuple[Collector, Path]]:
    root = tmp_path_factory.mktemp("dashtime")
    store = real_store(root / "store", 7, n=12)
    hook = root / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(SITECUSTOMIZE)
    log = root / "time_course.log"
    log.write_text("")
    path = os.pathsep.join(p for p in (str(hook), os.environ.get("PYTHONPATH")) if p)
    c = Collector(store, "--app", "shop:k1",
                  env={"PYTHONPATH": path, "JSPROF_TEST_TIME_LOG": str(log)})
    yield c, log
    c.stop()


def _reads(log: Path) -> int:
    return len(log.read_text().splitlines())


# The Time view as drawn: the section's content (its own aria-busy aside).
TIME_VIEW = "() => document.getElementById('v-time').innerHTML"


def test_the_dashboards_flame_page_reads_its_time_view_when_the_tab_opens(
        chromium: Any, col: tuple[Collector, Path], tmp_path: Path) -> None:
    from playwright.sync_api import expect

    c, log = col
    shots = Path(SHOTS) if SHOTS else tmp_path
    with fresh_pages(chromium) as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        signed_in(page, c.url)
        expect(page.locator("#flame-note")).to_have_text("", timeout=60000)
        frame = page.locator("#flame").element_handle().content_frame()
        frame.wait_for_selector("body[data-ready='1']", timeout=20000)
        assert _reads(log) == 0  # the graph drawn, no Time view read
        src = frame.url
        assert "time_view=fetch" in src
        # By keyboard, as a screen reader user would: the tab is a link, Enter opens it.
        tab = frame.locator("nav.tabs a[data-tab='time']")
        tab.focus()
        page.keyboard.press("Enter")
        frame.wait_for_selector("body[data-view='time']", timeout=20000)
        expect(frame.locator("#v-time")).to_have_attribute("aria-busy", "false",
                                                          timeout=20000)
        expect(frame.locator("#v-time .flane[data-kind='function']").first).to_be_visible()
        assert tab.get_attribute("aria-current") == "true"
        assert frame.locator("nav.tabs a[aria-current]").count() == 1
        assert _reads(log) == 1
        lazy = frame.evaluate(TIME_VIEW)
        size = frame.evaluate("[innerWidth, innerHeight]")
        page.screenshot(path=str(shots / "dashboard-time.png"), full_page=True)
        # Back to the graph and the Time view again: no second read.
        frame.locator("nav.tabs a[data-tab='flame']").click()
        frame.wait_for_selector("body[data-view='flame']")
        frame.locator("nav.tabs a[data-tab='time']").click()
        frame.wait_for_selector("body[data-view='time']")
        assert _reads(log) == 1
        assert errors == []

        # The complete page of the same filters (as `fleet flame --url` saves it), its Time
        # view at the frame's size: the same view, from the same block.
        u = urlsplit(src)
        q = [(k, v) for k, v in parse_qsl(u.query) if k != "time_view"]
        whole = browser.new_page(extra_http_headers=AUTH,
                                 viewport={"width": size[0], "height": size[1]})
        whole.goto(f"{c.url}{u.path}?{urlencode(q)}#view=time")
        whole.wait_for_selector("body[data-view='time']", timeout=20000)
        assert whole.evaluate(TIME_VIEW) == lazy
        assert whole.evaluate("document.getElementById('v-time').hasAttribute('aria-busy')"
                              ) is False
    status, _, body = c.request("GET", f"{u.path}?{urlencode(q)}", headers=AUTH)
    assert status == 200
    inline = orjson.loads(re.search(rb'id="fg-model">(.*?)</script>', body, re.S).group(1))
    filters = [(k, v) for k, v in q if k not in ("format", "max_nodes")]
    status, _, got = c.request("GET", f"/v1/query/flame_time?{urlencode(filters)}",
                               headers=AUTH)
    assert status == 200, got
    fetched = orjson.loads(got)["fleetTime"]
    assert orjson.dumps(fetched) == orjson.dumps(inline["fleetTime"])
    assert fetched["examples"] and fetched["fns"]


def test_the_time_views_own_query_refuses_what_it_cannot_answer(
        col: tuple[Collector, Path]) -> None:
    c, _ = col
    for path, why in (
            ("/v1/query/flame?app=shop&time_view=later",
             "query parameter time_view: 'later'; use inline or fetch"),
            ("/v1/query/flame_time?app=shop&during=interaction", "no Time view with during="),
            ("/v1/query/flame_time?app=shop&max_nodes=5", "max_nodes"),
            ("/v1/query/flame_time?app=nope", "no uploads of app 'nope'")):
        status, _, body = c.request("GET", path, headers=AUTH)
        err = orjson.loads(body)["error"]
        assert status == 400 and why in err and "\n" not in err, (path, err)
    assert c.request("GET", "/v1/query/flame_time?app=shop")[0] == 401


def test_a_time_view_that_cannot_be_read_says_why(chromium: Any,
                                                  col: tuple[Collector, Path]) -> None:
    # (a session that ended while the page was open: the collector answers 401 JSON)
    from playwright.sync_api import expect

    c, _ = col
    with fresh_pages(chromium) as browser:
        page = browser.new_page(extra_http_headers=AUTH)
        page.route("**/v1/query/flame_time*", lambda r: r.fulfill(
            status=401, content_type="application/json",
            body=orjson.dumps({"error": "sign in again"})))
        page.goto(f"{c.url}/v1/query/flame?app=shop&time_view=fetch#view=time")
        page.wait_for_selector("body[data-view='time']", timeout=20000)
        sec = page.locator("#v-time")
        expect(sec).to_have_attribute("aria-busy", "false", timeout=20000)
        note = sec.locator("p[role='status']")
        expect(note).to_have_text("The Time view could not be read: sign in again")
        assert sec.locator(".flane").count() == 0


def test_the_time_view_read_later_covers_the_window_the_graph_was_drawn_with(
        col: tuple[Collector, Path]) -> None:
    # The dashboard's Since is an age (1h, 7d): read against each request's clock, the tab
    # opened later would move the window. The page's Time view URL carries the graph's.
    import time

    c, _ = col
    before = time.time() * 1000.0
    status, _, body = c.request(
        "GET", "/v1/query/flame?app=shop&since=3650d&time_view=fetch", headers=AUTH)
    after = time.time() * 1000.0
    assert status == 200, body
    model = orjson.loads(re.search(rb'id="fg-model">(.*?)</script>', body, re.S).group(1))
    url = urlsplit(model["fleetTime"]["url"])
    q = dict(parse_qsl(url.query))
    ten_years = 3650 * 86400e3
    assert before - ten_years <= float(q["since"]) <= after - ten_years, q
    assert q["app"] == "shop" and "until" not in q
    status, _, got = c.request("GET", f"{url.path}?{url.query}", headers=AUTH)
    assert status == 200, got
    assert orjson.loads(got)["fleetTime"]["fns"]


@pytest.mark.parametrize("why", ["behind", "pruned"])
def test_a_time_view_not_of_the_graphs_uploads_says_so(chromium: Any,
                                                       col: tuple[Collector, Path],
                                                       why: str) -> None:
    # (the collector's read did not reach the page's pin: another worker's tail behind, the
    # tables made anew; or a prune took some of the graph's uploads since: here its answer
    # is made so by the route, the rest real)
    from playwright.sync_api import expect

    c, _ = col
    said = ("This Time view is of the uploads the collector holds now" if why == "behind"
            else "3 uploads of the 12 the graph above was drawn from were pruned")

    def behind(route: Any) -> None:
        doc = orjson.loads(route.fetch().body())
        held = doc.get("pin", {}).get("asked", 12)  # (the real answer: the graph's uploads)
        doc["pin"] = ({"asked": held + 3, "read": held, "same": False} if why == "behind"
                      else {"asked": held, "read": held, "same": True, "pruned": 3})
        doc["pin"]["note"] = said + " \u202e(not the graph's)."
        route.fulfill(status=200, content_type="application/json", body=orjson.dumps(doc))

    with fresh_pages(chromium) as browser:
        page = browser.new_page(extra_http_headers=AUTH)
        page.route("**/v1/query/flame_time*", behind)
        page.goto(f"{c.url}/v1/query/flame?app=shop&time_view=fetch#view=time")
        page.wait_for_selector("body[data-view='time']", timeout=20000)
        sec = page.locator("#v-time")
        expect(sec).to_have_attribute("aria-busy", "false", timeout=20000)
        note = sec.locator("p[data-note='pin']")
        expect(note).to_have_attribute("role", "status")
        # said first, above the lanes, its text shown as text (a bidi control made visible)
        assert note.text_content() == said + " \\u202e(not the graph's)."
        assert sec.evaluate("s => s.querySelector('p.note').dataset.note") == "pin"
        expect(sec.locator(".flane[data-kind='function']").first).to_be_visible()
