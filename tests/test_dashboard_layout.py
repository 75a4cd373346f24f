"""The dashboard holds still while it refreshes: a refresh used to empty the vitals,
interactions, regressions and uploads tables above the merged flame graph, and fill each
when its answer came, after the frame had drawn. The frame moved under the user's pointer
(123 px when the uploads came back: a click aimed at its Sandwich tab landed on the
dashboard). In real headless Chromium on a real `jsprof serve`, every answer held in turn:
with unchanged data the frame's y never changes and the page's layout-shift entries sum to
0 (the Web Vitals CLS measure, counting shifts right after the click too); with new uploads
the tables end with exactly the new rows."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import numpy as np
import orjson
import pytest

from browser_util import fresh_pages, playwright_chromium
from fleet_util import make_trace
from jsprof.formats.jsprof import trace_to_doc
from serve_util import READ_TOKEN, Collector, signed_in

# Tall enough that everything down to the merged flame graph is in the viewport: the
# browser reports layout shifts of visible elements only.
VIEWPORT = {"width": 1280, "height": 2400}


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    with playwright_chromium() as b:
        yield b


def _post(col: Collector, rng: np.random.Generator, release: str, uid: str, hot: str | None
          ) -> None:
    body = orjson.dumps({"trace": trace_to_doc(make_trace(rng, 500, hot=hot, hot_share=0.2)),
                         "meta": {"sampleInterval": 10}})
    q = urlencode({"app": "shop", "release": release, "route": f"/p/{uid[-1]}", "env": "prod",
                   "id": uid, "key": "k1"})
    status, doc = col.post(body, q)
    assert status == 202, doc


@pytest.fixture(scope="module")
def col(tmp_path_factory) -> Iterator[Collector]:
    # Two releases, the second with a hot function: rows in the regressions table, the
    # uploads table and the top table above the frame.
    c = Collector(tmp_path_factory.mktemp("layout") / "store", "--app", "shop:k1")
    rng = np.random.default_rng(5)
    ids = []
    for rel, hot in (("1.0", None), ("1.1", "slowThing")):
        for i in range(6):
            ids.append(f"{rel}-{i}")
            _post(c, rng, rel, ids[-1], hot)
    c.wait_stored(*ids)
    yield c
    c.stop()


# Records, from now on, every layout-shift entry (value, whether after input, the shifted
# nodes) and, each animation frame, the flame frame's y in the document.
WATCH = """() => {
  const rec = window.layoutWatch = {shift: 0, shifts: [], ys: [], frames: 0};
  const take = (list) => {
    for (const e of list) {
      rec.shift += e.value;
      rec.shifts.push({value: e.value, recent: e.hadRecentInput, sources: (e.sources || []).map(
        (s) => { const n = s.node; if (!n) return '?';
                 const el = n.nodeType === 1 ? n : n.parentElement;
                 return (el && (el.id || el.closest('[id]')?.id)) || n.nodeName; })});
    }
  };
  rec.observer = new PerformanceObserver((l) => take(l.getEntries()));
  rec.observer.observe({type: 'layout-shift', buffered: false});
  rec.take = () => take(rec.observer.takeRecords());
  const f = document.getElementById('flame');
  const tick = () => {
    const y = Math.round((f.getBoundingClientRect().top + window.scrollY) * 10) / 10;
    if (rec.ys[rec.ys.length - 1] !== y) rec.ys.push(y);
    rec.frames++;
    if (!rec.stop) requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
}"""

# After two more animation frames (the last layout is done and its shifts are queued), the
# entries not yet delivered are taken: what the watch saw.
SEEN = """() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(() => {
  const rec = window.layoutWatch;
  rec.take();
  rec.stop = true;
  done({shift: rec.shift, shifts: rec.shifts, ys: rec.ys, frames: rec.frames});
})))"""

# What a user sees above and at the frame: its y, and each section's box.
BOXES = """() => {
  const box = (id) => { const r = document.getElementById(id).getBoundingClientRect();
                        return [Math.round((r.top + scrollY) * 10) / 10,
                                Math.round(r.height * 10) / 10]; };
  return {flame: box('flame'), vitals: box('vitals-section'),
          interactions: box('interactions-section'), top: box('top-section'),
          regressions: box('regressions-section'), uploads: box('uploads-section')};
}"""

ROWS = """() => Object.fromEntries(['vitals', 'interactions', 'top', 'regressions', 'uploads'].map(
  (id) => [id, [...document.querySelectorAll(`#${id} tbody tr`)].map((tr) => tr.textContent)]))"""


def _settled(page) -> None:
    """Until the dashboard is done (aria-busy false) and the flame frame has loaded."""
    from playwright.sync_api import expect

    expect(page.locator("body")).to_have_attribute("aria-busy", "false", timeout=120000)
    expect(page.locator("#flame-note")).to_have_text("", timeout=120000)


def _uploads_listed(col: Collector, **params: str) -> list[str]:
    status, _, body = col.request(
        "GET", f"/v1/traces?{urlencode({'app': 'shop', 'limit': '20', **params})}",
        headers={"Authorization": f"Bearer {READ_TOKEN}"}, timeout=120)
    assert status == 200, body
    return [u["id"] for u in orjson.loads(body)["uploads"]]


def _refresh_holding_each_answer(page) -> list[tuple[str, dict]]:
    """Apply, with every request under /v1/ held until the one before it was answered and
    drawn; before each is let go the boxes are measured. Returns (request, boxes)."""
    held: list = []
    page.route("**/v1/**", lambda route: held.append(route))
    steps: list[tuple[str, dict]] = []
    try:
        page.click("#apply")
        deadline = time.monotonic() + 120
        while True:
            if held:
                route = held.pop(0)
                steps.append((route.request.url.split("?")[0].rsplit("/v1/", 1)[1],
                              page.evaluate(BOXES)))
                route.continue_()
            elif page.get_attribute("body", "aria-busy") == "false":
                break
            assert time.monotonic() < deadline, f"the refresh did not end: {steps}"
            page.wait_for_timeout(50)  # (Playwright's events run while the page waits)
    finally:
        page.unroute("**/v1/**")
        for route in held:
            route.continue_()
    _settled(page)
    steps.append(("(done)", page.evaluate(BOXES)))
    return steps


def test_a_refresh_with_unchanged_data_moves_nothing(chromium: Any, col: Collector,
                                                    tmp_path) -> None:
    with fresh_pages(chromium) as browser:
        page = browser.new_page(viewport=VIEWPORT)
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        signed_in(page, col.url)
        _settled(page)
        rows = page.evaluate(ROWS)
        # every section above the frame has content to keep
        assert rows["regressions"] and len(rows["uploads"]) == 12 and len(rows["top"]) > 5
        before = page.evaluate(BOXES)
        page.screenshot(path=str(tmp_path / "before.png"), full_page=True)
        page.evaluate(WATCH)
        steps = _refresh_holding_each_answer(page)
        seen = page.evaluate(SEEN)
        page.screenshot(path=str(tmp_path / "after.png"), full_page=True)
        said = "\n".join(f"{what}: {boxes}" for what, boxes in steps)
        # the refresh asked for every section's answer, each held in turn
        asked = [what for what, _ in steps]
        for q in ("query/vitals", "query/interactions", "query/top", "query/flame",
                  "query/regressions", "traces"):
            assert q in asked, said
        assert seen["frames"] > len(steps), seen
        assert seen["ys"] == [before["flame"][0]], f"the frame moved: {seen['ys']}\n{said}"
        for what, boxes in steps:
            assert boxes == before, f"before {before}\nat {what}: {boxes}\n{said}"
        assert seen["shift"] == 0, seen["shifts"]
        assert page.evaluate(ROWS) == rows
        assert errors == []


def test_a_refresh_with_new_uploads_ends_with_exactly_the_new_rows(chromium: Any,
                                                                    col: Collector) -> None:
    with fresh_pages(chromium) as browser:
        page = browser.new_page(viewport=VIEWPORT)
        signed_in(page, col.url)
        _settled(page)
        old = page.locator("#uploads tbody a.upload").all_text_contents()
        assert old == _uploads_listed(col)
        rng = np.random.default_rng(9)
        new = ["1.1-6", "1.1-7"]
        for uid in new:
            _post(col, rng, "1.1", uid, "slowThing")
        col.wait_stored(*new)
        # Until the uploads' answer comes, the table keeps its rows (no emptied table).
        held: list = []
        page.route("**/v1/traces?*", lambda route: held.append(route))
        try:
            page.click("#apply")
            deadline = time.monotonic() + 120
            while not held:
                assert time.monotonic() < deadline, "the refresh listed no uploads"
                page.wait_for_timeout(50)
            assert page.locator("#uploads tbody a.upload").all_text_contents() == old
            held.pop().continue_()
        finally:
            page.unroute("**/v1/traces?*")
        _settled(page)
        listed = _uploads_listed(col)
        assert set(new) <= set(listed) and len(listed) == 14
        assert page.locator("#uploads tbody a.upload").all_text_contents() == listed
        assert page.locator("#uploads tbody tr").count() == 14
        assert "14 traces" in page.locator("#top-summary").text_content()
        # Fewer rows (one release): none of the others' rows is left behind.
        page.select_option("#release", "1.0")
        page.click("#apply")
        from playwright.sync_api import expect

        expect(page.locator("#top-summary")).to_contain_text("6 traces", timeout=120000)
        _settled(page)
        assert page.locator("#uploads tbody a.upload").all_text_contents() == _uploads_listed(
            col, release="1.0")
        assert page.locator("#uploads tbody tr").count() == 6



# Counts the dashboard's queries in flight (fetches of /v1/query/* and /v1/traces), from
# their request to their answer; in the page before its scripts run.
COUNT_QUERIES = r"""
window.queriesInFlight = 0;
const realFetch = window.fetch;
window.fetch = (...args) => {
  if (!/\/v1\/(query|traces)/.test(String(args[0]))) return realFetch(...args);
  window.queriesInFlight += 1;
  return realFetch(...args).finally(() => { window.queriesInFlight -= 1; });
};
"""

# Each time the page says it is done (body aria-busy false): the queries still in flight
# and the tables still waiting for their answer.
WATCH_DONE = """() => {
  window.doneAt = [];
  new MutationObserver(() => {
    if (document.body.getAttribute('aria-busy') !== 'false') return;
    window.doneAt.push({queries: window.queriesInFlight,
                        tables: [...document.querySelectorAll('table[aria-busy="true"]')]
                          .map((t) => t.id)});
  }).observe(document.body, {attributes: true, attributeFilter: ['aria-busy']});
}"""


def test_overlapping_refreshes_are_done_when_the_last_has_ended(chromium: Any,
                                                                col: Collector) -> None:
    """Apply clicked again while a refresh runs: the two overlap, and the first to end
    (the older, or the newer whose top table the older overtook) said the page was done
    (aria-busy false, the loading note hidden) while the other's queries ran and its
    tables waited: a test or a screen reader waiting for it read the tables too early."""
    with fresh_pages(chromium) as browser:
        page = browser.new_page(viewport=VIEWPORT)
        page.add_init_script(COUNT_QUERIES)
        signed_in(page, col.url)
        _settled(page)
        page.evaluate(WATCH_DONE)
        held: list = []
        page.route("**/v1/**", lambda route: held.append(route))
        try:
            deadline = time.monotonic() + 120
            page.click("#apply")
            while not held:  # the first refresh's first query, held
                assert time.monotonic() < deadline, "the refresh asked nothing"
                page.wait_for_timeout(50)
            page.click("#apply")
            while True:  # every query answered in the order asked, one at a time
                if held:
                    held.pop(0).continue_()
                elif page.get_attribute("body", "aria-busy") == "false":
                    break
                assert time.monotonic() < deadline, "the refreshes did not end"
                page.wait_for_timeout(50)
        finally:
            page.unroute("**/v1/**")
            for route in held:
                route.continue_()
        _settled(page)
        done = page.evaluate("() => window.doneAt")
        assert done and all(d == {"queries": 0, "tables": []} for d in done), done
