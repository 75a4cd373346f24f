"""Issue 33 end to end in real headless Chromium: per interaction target and per page.

A checkout page with two buttons of different cost, a menu button without an id (clicked
on its icon), a search box typed in, and a large hero image that the page re-renders
after load (as a framework hydrating does). The real client posts traces with their
timelines to a real `jsprof serve` on loopback (two workers, background compaction);
`jsprof fleet interactions` ranks the targets, the LCP element is named, and one
upload's page shows its vitals and its long-frame and interaction lanes."""

from __future__ import annotations

import struct
import subprocess
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from browser_util import HTML, fresh_pages, open_page, page_server, playwright_chromium
from serve_util import JSPROF, READ_TOKEN, Collector

PAGE = """<!doctype html>
<meta charset="utf-8"><title>checkout</title>
<main id="main"><img class="hero" src="/hero.png?v=1&amp;t=abc" width="600" height="300"></main>
<button id="pay" class="buy primary">pay</button>
<button id="add">add to cart</button>
<input id="q" placeholder="search">
<ul class="menu"><li><button class="item">one</button></li>
<li><button class="item"><span class="icon">*</span> two</button></li></ul>
<p id="out"></p>
<script type="module">
import {startProfiling} from "%(collector)s/v1/client.js";
// Each handler busy in its own loop: its samples' leaf is the handler itself.
function payClickHandlerForJsprof() {
  const end = performance.now() + 300;
  let x = 0;
  while (performance.now() < end) for (let i = 0; i < 2000; i++) x += Math.sqrt(i * x + 1);
  document.getElementById("out").textContent = String(x).slice(0, 4);
}
function addClickHandlerForJsprof() {
  const end = performance.now() + 60;
  let x = 0;
  while (performance.now() < end) for (let i = 0; i < 2000; i++) x += Math.sqrt(i * x + 2);
  document.getElementById("out").textContent = String(x).slice(0, 4);
}
function menuClickHandlerForJsprof() {
  const end = performance.now() + 30;
  while (performance.now() < end) {}
}
function searchKeyHandlerForJsprof() {
  const end = performance.now() + 25;
  while (performance.now() < end) {}
}
document.getElementById("pay").addEventListener("click", payClickHandlerForJsprof);
document.getElementById("add").addEventListener("click", addClickHandlerForJsprof);
for (const b of document.querySelectorAll(".menu button")) {
  b.addEventListener("click", menuClickHandlerForJsprof);
}
document.getElementById("q").addEventListener("keydown", searchKeyHandlerForJsprof);
window.profiler = startProfiling({endpoint: "%(collector)s", app: "shop", key: "k1",
                                  release: "3.0.0", sampleRate: 1, chunkMs: 60000});
// After load the page draws its main part again (a framework hydrating): the element LCP
// named is no longer in the document when the chunk is sent.
// Then a banner comes in above everything, with no input: a layout shift (CLS).
addEventListener("load", () => setTimeout(() => {
  const main = document.getElementById("main");
  main.innerHTML = main.innerHTML;
  const banner = document.createElement("div");
  banner.style.height = "120px";
  document.body.prepend(banner);
  setTimeout(() => { window.ready = true; }, 200);
}, 300));
</script>
"""


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """One Playwright Chromium for the module's tests, each taking its pages through
    fresh_pages (a launch and close per test was ~2 s of each)."""
    with playwright_chromium() as b:
        yield b


def _png(w: int, h: int) -> bytes:
    """A solid PNG of w x h (the LCP candidate)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    raw = b"".join(b"\x00" + bytes((40, 120, 200)) * w for _ in range(h))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


HERO = _png(600, 300)
MENU_TWO = "body > ul.menu > li:nth-of-type(2) > button.item"


@pytest.fixture(scope="module")
def stored(chromium: Any, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[tuple[Path, list[str], Collector]]:
    """Two page loads clicked and typed in for real; the store, upload ids, collector."""
    collector: list[str] = []

    def respond(path: str) -> tuple[bytes, str, dict]:
        if path.startswith("/hero.png"):
            return HERO, "image/png", {}
        return (PAGE % {"collector": collector[0]}).encode(), HTML, {
            "Document-Policy": "js-profiling"}

    with page_server(respond) as origin:
        store = tmp_path_factory.mktemp("interactions") / "store"
        col = Collector(store, "--app", "shop:k1", "--allow-origin", f"shop={origin}",
                        "--workers", "2", "--compact-every", "1")
        collector.append(col.url)
        ids: list[str] = []
        try:
            with fresh_pages(chromium) as b:
                for _ in range(2):
                    page = open_page(b, f"{origin}/checkout", profiled=True)
                    for _ in range(3):
                        page.click("#pay")
                        page.wait_for_timeout(100)
                        page.click("#add")
                        page.wait_for_timeout(100)
                        page.click(".menu li:nth-of-type(2) .icon")
                        page.wait_for_timeout(100)
                    page.type("#q", "abc", delay=60)
                    page.wait_for_timeout(400)  # Event Timing reports after the next paint
                    ids += page.evaluate("profiler.stop()")
                    page.close()
            col.wait_stored(*ids)
            yield store, ids, col
        finally:
            col.stop()


def _fleet(store: Path, *args: str, json: bool = True) -> dict | str:
    r = subprocess.run([str(JSPROF), "fleet", *args, "--store", str(store), "--app", "shop",
                        *(["--json"] if json else [])],
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    return orjson.loads(r.stdout) if json else r.stdout


def _metas(store: Path, ids: list[str]) -> list[dict]:
    from jsprof.store import Store

    return [Store(store).get(i)[0] for i in ids]


def test_targets_are_stable_selectors(stored) -> None:
    store, ids, _ = stored
    metas = _metas(store, ids)
    targets = {}
    for m in metas:
        for e in m["timeline"]["interactions"]:
            targets.setdefault(e["target"], set()).add(m["pageLoad"])
    # An id names its element; the menu's button (clicked on its icon) by its path, the
    # same in both page loads; never the text of anything.
    assert targets.get("button#pay") == targets.get("button#add") == {
        m["pageLoad"] for m in metas}, targets
    assert len(targets.get(MENU_TWO, ())) == 2, targets
    assert "input#q" in targets, targets
    assert not any("two" in t or "pay</" in t for t in targets), targets


def test_lcp_element_is_named_though_the_page_redrew_it(stored) -> None:
    # The client describes the element as the LCP entry comes: by the time the chunk is
    # sent the page has replaced it, and a removed element's entry says null.
    store, ids, _ = stored
    metas = _metas(store, ids)
    # (a chunk sent before the first paint would have no LCP yet: each page load has one)
    loads = [m["timeline"]["load"] for m in metas
             if m["timeline"]["load"] and m["timeline"]["load"]["lcp"] is not None]
    assert {m["pageLoad"] for m in metas
            if m["timeline"]["load"] and m["timeline"]["load"]["lcp"] is not None} == {
        m["pageLoad"] for m in metas}
    for ld in loads:
        assert ld["lcpElement"] == "main#main > img.hero", ld
        # the image's URL without its query (it may hold a token)
        assert ld["lcpUrl"].endswith("/hero.png"), ld
        assert ld["cls"] > 0, ld  # the banner moved everything down, no input before it
    vit = _fleet(store, "vitals")
    (row,) = vit["rows"]
    assert row["lcpElements"] == [{"element": "main#main > img.hero", "pageLoads": 2}]
    assert row["clsP75"] > 0 and row["clsPageLoads"] == 2


def test_the_costly_button_ranks_first_with_its_handler(stored) -> None:
    store, _, _ = stored
    doc = _fleet(store, "interactions")
    rows = {(r["target"], r["type"]): r for r in doc["rows"]}
    assert doc["pageLoads"] == 2
    first = doc["rows"][0]
    assert (first["target"], first["type"]) == ("button#pay", "click"), doc["rows"][:3]
    assert first["inpPageLoads"] == 2 and first["count"] >= 5  # of 6 clicks
    add = rows[("button#add", "click")]
    assert add["p75Ms"] < first["p75Ms"] and add["inpPageLoads"] == 0
    assert first["longFrameMs"] > add["longFrameMs"] > 0
    # The functions that ran during each target's interactions: its own handler, and not
    # the other button's.
    assert first["functions"][0]["name"] == "payClickHandlerForJsprof", first["functions"]
    names = {f["name"] for f in add["functions"]}
    assert "addClickHandlerForJsprof" in names and "payClickHandlerForJsprof" not in names
    assert (MENU_TWO, "click") in rows
    assert any(t == "input#q" and k in ("keydown", "keyup", "keypress") for t, k in rows)
    text = _fleet(store, "interactions", json=False)
    assert "button#pay" in text and "payClickHandlerForJsprof" in text


def test_top_during_one_targets_interactions(stored) -> None:
    store, _, _ = stored
    doc = _fleet(store, "top", "--during", "interaction", "--slower-than", "0", "--target",
                 "button#add")
    names = [r["name"] for r in doc["rows"] if r["resource"] is not None]
    assert names[0] == "addClickHandlerForJsprof" and "payClickHandlerForJsprof" not in names
    r = subprocess.run([str(JSPROF), "fleet", "top", "--store", str(store), "--app", "shop",
                        "--during", "interaction", "--target", "button#nope"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "--target 'button#nope': no interaction on that target" in r.stderr
    r = subprocess.run([str(JSPROF), "fleet", "top", "--store", str(store), "--app", "shop",
                        "--target", "button#add"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "needs --during interaction" in r.stderr, r.stderr


def test_the_collector_answers_the_same_document(stored) -> None:
    store, _, col = stored
    status, _, body = col.request(
        "GET", "/v1/query/interactions?app=shop&functions=3",
        headers={"Authorization": f"Bearer {READ_TOKEN}"}, timeout=120)
    assert status == 200, body
    doc = orjson.loads(body)
    assert doc["rows"][0]["target"] == "button#pay"
    assert len(doc["rows"][0]["functions"]) <= 3
    status, _, body = col.request(
        "GET", "/v1/query/interactions?app=shop&during=interaction",
        headers={"Authorization": f"Bearer {READ_TOKEN}"})
    assert status == 400, body
    # `fleet interactions --url`: the collector's document, through the CLI.
    import os

    r = subprocess.run([str(JSPROF), "fleet", "interactions", "--url", col.url, "--app",
                        "shop", "--json", "--functions", "3"], capture_output=True, text=True,
                       timeout=180, env={**os.environ, "JSPROF_READ_TOKEN": READ_TOKEN})
    assert r.returncode == 0, r.stderr
    assert orjson.loads(r.stdout)["rows"][0]["functions"] == doc["rows"][0]["functions"]


def _open_upload(browser, col: Collector, uid: str):
    page = browser.new_page(extra_http_headers={"Authorization": f"Bearer {READ_TOKEN}"},
                            viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{col.url}/v1/traces/{uid}/flame#view=time")
    page.wait_for_selector("#v-time div.lane", timeout=60000)
    return page, errors


def _lanes(page) -> dict[str, int]:
    return dict(page.eval_on_selector_all(
        "#v-time div.lane[data-count]",
        "ls => ls.map(l => [l.dataset.lane, Number(l.dataset.count)])"))


def test_one_uploads_page_has_its_vitals_and_lanes(chromium: Any, stored) -> None:
    store, ids, col = stored
    metas = _metas(store, ids)
    uid, meta = max(zip(ids, metas, strict=True),
                    key=lambda x: len(x[1]["timeline"]["interactions"]))
    t = meta["timeline"]
    assert t["interactions"] and t["longFrames"]
    with fresh_pages(chromium) as b:
        page, errors = _open_upload(b, col, uid)
        lanes = _lanes(page)
        # A lane per kind of window, one box per window the upload's timeline holds.
        assert lanes == {"main long animation frames": len(t["longFrames"]),
                         "main interactions": len(t["interactions"])}, lanes
        facts = dict(page.eval_on_selector_all(
            "#fg-facts span[data-fact]", "s => s.map(x => [x.dataset.fact, x.textContent])"))
        assert "main#main > img.hero" in facts["lcp"], facts
        assert facts["inp"].startswith("INP ") and "click on button#pay" in facts["inp"], facts
        assert facts["interactions"] == f"Interactions {len(t['interactions'])}"
        if t["load"] and t["load"]["cls"] is not None:
            assert facts["cls"] == f"CLS {t['load']['cls']:.3f}", facts
        assert errors == []


HOSTILE = '<img src=x onerror="document.title=\'pwned\'">'


def _post_hostile(col: Collector) -> str:
    """An upload whose timeline's text is markup (the same bytes each time: a retry)."""
    from serve_util import fixture_bytes

    trace = orjson.loads(fixture_bytes())
    t0 = trace["samples"][0]["timestamp"]
    timeline = {
        "longFrames": [{"start": t0, "duration": 120.0, "blockingDuration": 70.0,
                        "scripts": [{"invoker": HOSTILE, "sourceFunctionName": HOSTILE,
                                     "start": t0 + 1, "duration": 100.0}]}],
        "interactions": [{"id": 7, "type": "click", "start": t0 + 5, "duration": 110.0,
                          "processingStart": t0 + 8, "processingEnd": t0 + 100,
                          "target": HOSTILE}],
        "load": {"lcp": 300.0, "lcpElement": HOSTILE, "lcpUrl": None},
    }
    body = orjson.dumps({"trace": trace, "meta": {}, "timeline": timeline})
    status, _, got = col.request("POST", "/v1/traces?app=shop&key=k1&id=hostile-1&route=/x",
                                 body, {"Content-Type": "application/json"})
    assert status == 202, got
    return "hostile-1"


def test_one_uploads_page_shows_client_text_as_text(chromium: Any, stored) -> None:
    # Timeline text is the client's: a target or an LCP element that is markup is shown as
    # its characters on the upload's page, never run.
    _, _, col = stored
    hostile = HOSTILE
    _post_hostile(col)
    with fresh_pages(chromium) as b:
        page, errors = _open_upload(b, col, "hostile-1")
        assert _lanes(page) == {"main long animation frames": 1, "main interactions": 1}
        facts = page.text_content("#fg-facts")
        assert hostile in facts and f"click on {hostile}" in facts
        assert page.title() == "upload hostile-1"
        assert page.locator("img").count() == 0
        assert errors == []


def test_the_dashboard_lists_interactions_per_target(chromium: Any, stored) -> None:
    from serve_util import signed_in

    _, _, col = stored
    _post_hostile(col)
    with fresh_pages(chromium) as b:
        page = b.new_page(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        signed_in(page, col.url)
        rows = page.eval_on_selector_all(
            "#interactions tbody tr",
            "trs => trs.map(tr => Array.from(tr.children, td => td.textContent))")
        assert rows[0][:2] == ["button#pay", "click"], rows
        assert "payClickHandlerForJsprof" in rows[0][7], rows[0]
        assert [HOSTILE, "click"] in [r[:2] for r in rows]  # markup shown as text
        assert page.title() == "jsprof · field profiles"
        # A row's "flame" draws the merged flame graph of that target's interactions.
        page.click("#interactions tbody tr:first-child td.ex button:has-text('flame')")
        page.wait_for_function(
            "() => { const f = document.getElementById('flame').contentDocument;"
            " return !!(f && f.querySelector('h1') &&"
            " f.querySelector('h1').textContent.includes('target=button#pay')); }",
            timeout=60000)
        frames = page.frame_locator("#flame").locator("#fg-canvas").evaluate(
            "() => jsprofFrames()")
        names = {f["name"] for f in frames}
        assert "payClickHandlerForJsprof" in names and "addClickHandlerForJsprof" not in names
        # A function of a row charts that function.
        page.click("#interactions tbody tr:first-child td.ex button:nth-of-type(2)")
        page.wait_for_function(
            "() => document.getElementById('chart-fn').textContent === "
            "'payClickHandlerForJsprof' && !!document.querySelector('#chart svg rect')",
            timeout=60000)
        assert errors == []


def test_functions_read_a_bounded_spread_of_page_loads(stored, monkeypatch) -> None:
    # A row's functions read at most MAX_FUNCTION_LOADS page loads' records (here 1 of 2).
    from jsprof.fleet import api
    from jsprof.fleet import interactions as mod
    from jsprof.fleet.filters import Filters

    store, _, _ = stored
    monkeypatch.setattr(mod, "MAX_FUNCTION_LOADS", 1)
    with api.session(api.open_store(store)) as s:
        doc = api.interactions(s, Filters(app="shop", route="/checkout"))
    first = doc["rows"][0]
    assert first["target"] == "button#pay" and first["pageLoads"] == 2
    assert first["functionsPageLoads"] == 1
    assert first["functions"][0]["name"] == "payClickHandlerForJsprof"


def test_one_uploads_page_has_its_page_loads_windows(chromium: Any, stored) -> None:
    # The client reports an interaction after the next paint: one near a chunk's end comes
    # in the next chunk's timeline. The first chunk's page still draws it over its samples,
    # and its vitals are the page load's (INP from the later chunk).
    from serve_util import fixture_bytes

    _, _, col = stored
    first = orjson.loads(fixture_bytes())
    ts = [s["timestamp"] for s in first["samples"]]
    span = ts[-1] - ts[0] + 10.0
    second = orjson.loads(fixture_bytes())
    for s in second["samples"]:
        s["timestamp"] += span
    late = {"id": 41, "type": "click", "start": ts[-1] - 80.0, "duration": 130.0,
            "processingStart": ts[-1] - 70.0, "processingEnd": ts[-1] + 30.0,
            "target": "button#late"}
    for uid, trace, timeline in (
            ("chunk-1", first, {"interactions": [], "longFrames": []}),
            ("chunk-2", second, {"interactions": [late], "longFrames": []})):
        body = orjson.dumps({"trace": trace, "meta": {"pageLoad": "load-late"},
                             "timeline": timeline})
        status, _, got = col.request(
            "POST", f"/v1/traces?app=shop&key=k1&id={uid}&route=/late&release=9.9", body,
            {"Content-Type": "application/json"})
        assert status in (202,), got
    with fresh_pages(chromium) as b:
        page, errors = _open_upload(b, col, "chunk-1")
        assert _lanes(page) == {"main interactions": 1}
        facts = dict(page.eval_on_selector_all(
            "#fg-facts span[data-fact]", "s => s.map(x => [x.dataset.fact, x.textContent])"))
        assert facts["inp"] == "INP 130 ms (click on button#late)", facts
        assert facts["pageLoad"] == "Page load 2 uploads (its chunks), merged", facts
        assert errors == []


def test_an_uploads_own_long_frame_after_its_last_sample_is_drawn(chromium: Any, stored) -> None:
    """The upload page's Time view drew the page load's windows that cover its samples
    only, its own among them: a long frame of its own that ended after its last sample (its
    entry reported with the chunk) was left out (6 boxes of its 7 long frames, once in a
    full run). Its own windows are all drawn; other chunks' where they cover its samples."""
    store, ids, col = stored
    _, body = col.get(ids[0])
    doc = orjson.loads(body)
    frames = doc["jsprof"]["meta"]["timeline"]["longFrames"]
    last = max(s["timestamp"] for s in doc["samples"])
    late = dict(frames[-1])
    shift = last + 200 - late["start"]
    late["start"] += shift
    for k in ("renderStart", "styleAndLayoutStart", "firstUIEventTimestamp"):
        if isinstance(late.get(k), (int, float)) and late[k] > 0:
            late[k] += shift
    late["scripts"] = []
    frames.append(late)
    meta = doc["jsprof"]["meta"]
    envelope = {"trace": {k: doc[k] for k in ("resources", "frames", "stacks", "samples")},
                # a page load of its own: no other chunk's windows beside its own
                "meta": {**{k: meta[k] for k in ("release", "route") if k in meta},
                         "pageLoad": "late-frame-load"},
                "timeline": meta["timeline"]}
    status, got = col.post(orjson.dumps(envelope), query="app=shop&key=k1&id=late-frame")
    assert status == 202, got
    _, back = col.get("late-frame")
    assert len(orjson.loads(back)["jsprof"]["meta"]["timeline"]["longFrames"]) == len(frames)
    with fresh_pages(chromium) as b:
        page, errors = _open_upload(b, col, "late-frame")
        lanes = _lanes(page)
        assert lanes["main long animation frames"] == len(frames), (lanes, len(frames))
        assert errors == []
