"""The viewer's Time and Source views of a fleet merge (issue 24), on a real store: the
merged Time view's numbers are `fleet top`'s and `fleet vitals`' on the same selection,
the Source view says why no line has a time (as `report --by line` does of the same
traces) and shows a function's text where the release's source map carries it; both drawn
in real headless Chromium."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from browser_util import fresh_pages, playwright_chromium
from fleet_util import make_trace, upload, vlq
from jsprof.cli import main
from jsprof.fleet import api, timecourse
from jsprof.fleet.filters import Filters
from jsprof.store import Store

LAYOUT_TS = "// layout\nexport function helper() {}\nfunction measureLayout(box) {\n" \
    "  return box.w * box.h;\n}\n"


def _timeline(i: int) -> dict:
    return {
        "longFrames": [{"start": 200.0 + 40 * i, "duration": 90.0, "blockingDuration": 20.0 + i,
                        "scripts": []}],
        "interactions": [{"id": 1, "type": "click", "start": 900.0 + 100 * i,
                          "duration": 40.0 + 8 * i, "processingStart": 905.0 + 100 * i,
                          "processingEnd": 930.0 + 100 * i, "target": "button#buy"}],
        "load": {"lcp": 300.0 + 25 * i},
    }


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("fleetviews") / "store"
    st = Store(path)
    rng = np.random.default_rng(24)
    try:
        # 1.0 another build of app.min.js (its functions a column over): release 1.1's map
        # is not its (a map names the same bundle in every release: fleet/release.py)
        for rel, col in (("1.0", 4), ("1.1", 3)):
            for i in range(5):
                meta = dict(app="shop", release=rel, route="/p", pageLoad=f"{rel}-pl{i}",
                            timeline=_timeline(i))
                upload(st, f"{rel}-{i}", make_trace(rng, 250 + 20 * i, column=col), **meta)
            # A page load in two chunks: the second's samples come later on its clock.
            late = make_trace(rng, 200, column=col)
            late.sample_time = late.sample_time + 6000.0
            upload(st, f"{rel}-4b", late, app="shop", release=rel, route="/p",
                   pageLoad=f"{rel}-pl4")
    finally:
        st.close()
    # Release 1.1's map: `measure` (app.min.js 59:3) is measureLayout in src/layout.ts,
    # whose text the map carries.
    lines = [""] * 58 + [vlq(2) + vlq(0) + vlq(2) + vlq(9) + vlq(0)]
    sm = {"version": 3, "file": "app.min.js", "sources": ["src/layout.ts"],
          "sourcesContent": [LAYOUT_TS], "names": ["measureLayout"], "mappings": ";".join(lines)}
    mp = path.parent / "app.min.js.map"
    mp.write_bytes(orjson.dumps(sm))
    assert main(["fleet", "sourcemaps", "upload", "--store", str(path), "--app", "shop",
                 "--release", "1.1", str(mp)]) == 0
    return path


def _json(capsys: pytest.CaptureFixture, argv: list[str]) -> dict:
    capsys.readouterr()
    assert main(argv) == 0
    return orjson.loads(capsys.readouterr().out)


def _blocks(page: str) -> tuple[dict, dict]:
    model = re.search(r'id="fg-model">(.*?)</script>', page, re.S).group(1)
    source = re.search(r'id="fg-source">(.*?)</script>', page, re.S).group(1)
    return orjson.loads(model), orjson.loads(source)


@pytest.fixture(scope="module")
def page(store: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("fleetviews-page") / "fleet.html"
    assert main(["fleet", "flame", "--store", str(store), "--app", "shop", "-o", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium for the module's three page tests (a launch and close is
    3.7-5.4 s at load 18): each test's pages are its own (`fresh_pages`)."""
    with playwright_chromium("--disable-dev-shm-usage") as b:
        yield b


def _loc(r: dict) -> str:
    if r["resource"] is None and r["line"] is None:
        return ""
    return ":".join(str(x) for x in (r["resource"] or "(unknown)", r["line"], r["column"])
                    if x is not None)


def test_merged_time_view_equals_top_and_vitals(store: Path, page: Path, capsys) -> None:
    model, _ = _blocks(page.read_text())
    ft = model["fleetTime"]
    top = _json(capsys, ["fleet", "top", "--store", str(store), "--app", "shop", "--json",
                         "--all"])
    vit = _json(capsys, ["fleet", "vitals", "--store", str(store), "--app", "shop", "--json"])
    assert ft["uploads"] == ft["uploadsAll"] == top["traces"] == 12
    assert ft["pageLoads"] == top["pageLoads"] == 10
    # Every function's lane sums to its `fleet top` self time; the buckets to the total.
    want = {(r["label"], _loc(r)): r["selfMs"] for r in top["rows"] if r["selfMs"] > 0}
    got = {(r["name"], r["loc"]): r for r in ft["fns"]}
    assert set(got) == set(want)
    for k, ms in want.items():
        assert sum(got[k]["v"]) == pytest.approx(ms, abs=2e-3), k
        assert got[k]["self"] == pytest.approx(ms, abs=2e-3), k
    assert sum(ft["bucketMs"]) == pytest.approx(top["totalMs"], abs=2e-3)
    assert ft["totalMs"] == pytest.approx(top["totalMs"], abs=2e-3)
    # Time since each page's start: the chunk 6 s into its page load is in the late buckets.
    assert ft["later"] and ft["bucketLoads"][-1] >= 1
    # The page's reports and the vitals rows: the same counts `fleet vitals` gives.
    assert ft["vitals"] == vit["rows"]
    assert sum(ft["longFrames"]["n"]) == sum(r["longFrames"] for r in vit["rows"]) == 10
    assert sum(ft["interactions"]["n"]) == sum(r["interactions"] for r in vit["rows"]) == 10
    assert sum(ft["lcp"]) == 10
    # Example uploads: the slowest interaction's page load first (i = 4: 72 ms).
    assert ft["examples"][0]["id"] == "1.1-4" and "72 ms" in ft["examples"][0]["why"]
    assert "href" not in ft["examples"][0]  # a file of the CLI's: no collector to link


def test_merged_time_view_over_the_upload_cap_says_so(store: Path, monkeypatch) -> None:
    monkeypatch.setattr(timecourse, "TIME_UPLOADS", 4)
    with api.session(api.open_store(store)) as s:
        page = api.flame(s, Filters(app="shop"))
    ft = _blocks(page)[0]["fleetTime"]
    assert (ft["uploads"], ft["uploadsAll"]) == (4, 12)
    assert sum(ft["bucketMs"]) == pytest.approx(ft["totalMs"])


def test_merged_source_view(store: Path, page: Path, tmp_path: Path, capsys) -> None:
    model, src = _blocks(page.read_text())
    # No line data in the uploads: the page says so, as `report --by line` does of the
    # same traces merged (`fleet export`).
    assert src["lineData"] is False and "no per-line data" in src["noLines"]
    merged = tmp_path / "merged.jsprof.json"
    assert main(["fleet", "export", "--store", str(store), "--app", "shop",
                 "-o", str(merged)]) == 0
    capsys.readouterr()
    assert main(["report", str(merged), "--by", "line"]) == 2
    assert "no per-sample line data" in capsys.readouterr().err
    # A function of a mapped release has the text its map carries; an unmapped one says why.
    by_name = {model["fname"][e[0]]: e for e in src["fns"]}
    e = by_name["measureLayout"]
    assert src["files"][e[1]] == "https://shop.example/static/src/layout.ts"
    text = [t for c in src["chunks"] if c[0] == e[1] for t in c[2]]
    assert "  return box.w * box.h;" in text
    assert by_name["measure"][1] == -1 and by_name["measure"][9] == "nomap"
    # Every listed function keeps its `fleet top` self time.
    top = _json(capsys, ["fleet", "top", "--store", str(store), "--app", "shop", "--json",
                         "--all"])
    self_of = {r["label"]: r["selfMs"] for r in top["rows"]}
    assert model["fself"][e[0]] == pytest.approx(self_of["measureLayout"], abs=1e-3)


def test_merged_time_and_source_views_in_chromium(store: Path, page: Path, capsys,
                                                  browser: Any, tmp_path: Path) -> None:
    top = _json(capsys, ["fleet", "top", "--store", str(store), "--app", "shop", "--json",
                         "--all"])
    vit = _json(capsys, ["fleet", "vitals", "--store", str(store), "--app", "shop", "--json"])
    with fresh_pages(browser) as browser:
        p = browser.new_page(viewport={"width": 1300, "height": 1000})
        errors: list[str] = []
        p.on("pageerror", lambda e: errors.append(str(e)))
        p.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        p.goto(page.as_uri() + "#view=time")
        p.wait_for_selector("body[data-view='time']", timeout=30000)
        assert p.locator("nav.tabs a").all_text_contents() == [
            "Flame", "Time", "Sandwich", "Bottom-up", "Call tree", "Source"]
        assert "No common clock" in p.locator("[data-note='fleet']").text_content()
        lane = p.locator("#v-time [data-lane='measureLayout'] canvas")
        assert lane.count() == 1 and lane.bounding_box()["width"] > 300
        # A drag across the whole sampled-time lane: the range's table is `fleet top`'s.
        box = p.locator("#v-time [data-lane='sampled time'] canvas").bounding_box()
        p.mouse.move(box["x"] + 1, box["y"] + 5)
        p.mouse.down()
        p.mouse.move(box["x"] + box["width"] - 1, box["y"] + 5, steps=4)
        p.mouse.up()
        first = p.locator("#v-time [data-panel='range'] tr").nth(1).locator("td")
        best = max(top["rows"], key=lambda r: r["selfMs"])
        assert first.nth(2).text_content() == best["label"]
        assert float(first.nth(0).text_content()) == pytest.approx(best["selfMs"], abs=0.051)
        head = p.locator("#v-time [data-panel='range'] h2").text_content()
        assert f"{top['totalMs']:.1f} ms sampled" in head, head
        # The vitals panel: `fleet vitals`' INP p75.
        inp = p.locator("#v-time [data-panel='vitals'] td[data-col='inpP75Ms']")
        assert float(inp.first.text_content()) == pytest.approx(vit["rows"][0]["inpP75Ms"],
                                                                abs=0.051)
        assert p.locator("#v-time [data-panel='examples'] li").count() >= 2
        assert p.locator("#v-time [data-lane='measureLayout'] .fname").all_text_contents() == [
            "measureLayout"]
        p.screenshot(path=str(tmp_path / "fleet-time.png"))
        # Source: the mapped function's text; the unmapped one's reason in a sentence.
        p.goto(page.as_uri() + "#view=source&fn=measureLayout")
        p.wait_for_selector("#v-source [data-table='source']", timeout=30000)
        assert "  return box.w * box.h;" in p.locator("#v-source td.code").all_text_contents()
        assert "no per-line data" in p.locator("[data-note='nolines']").text_content()
        p.goto(page.as_uri() + "#view=source&fn=measure")
        p.wait_for_selector("#v-source [data-note='nosource']", timeout=30000)
        assert "no source map of this release" in p.locator(
            "[data-note='nosource']").text_content()
        assert p.locator("#v-source [data-table='source']").count() == 0
        assert errors == [], errors


def test_during_has_no_time_tab_but_its_source_view(store: Path, tmp_path: Path) -> None:
    """--during keeps samples in windows and loses their times: no Time view (docs say
    so), but the Source view lists the kept samples' functions."""
    out = tmp_path / "lf.html"
    assert main(["fleet", "flame", "--store", str(store), "--app", "shop", "--during",
                 "long-frame", "--slower-than", "0", "-o", str(out)]) == 0
    page = out.read_text()
    assert re.findall(r'data-tab="(\w+)"', page) == ["flame", "sandwich", "bottomup", "calltree",
                                                         "source"]
    model, src = _blocks(page)
    assert "fleetTime" not in model and "time" not in model
    assert src["lineData"] is False and src["fns"]


def test_merged_time_axis_labels_do_not_overlap_later(store: Path, page: Path, browser: Any
                                                     ) -> None:
    """The Time view's axis of buckets ends in "later" (the chunks past the last bucket);
    the last tick's label was printed over it ("late120000.0"). Every label drawn on the
    axis canvas stays clear of "later" and inside the canvas, at several widths."""
    record = """
      window.__texts = [];
      const orig = CanvasRenderingContext2D.prototype.fillText;
      CanvasRenderingContext2D.prototype.fillText = function (text, x, y) {
        const w = this.measureText(text).width;
        const left = this.textAlign === "right" ? x - w : x;
        window.__texts.push({text: String(text), left, right: left + w, y,
                             cw: this.canvas.width / (window.devicePixelRatio || 1),
                             id: this.canvas.__id || (this.canvas.__id = Math.random())});
        return orig.apply(this, arguments);
      };"""
    with fresh_pages(browser) as browser:
        for width in (900, 1300, 1400, 1700):
            p = browser.new_page(viewport={"width": width, "height": 900})
            p.add_init_script(record)
            p.goto(page.as_uri() + "#view=time")
            p.wait_for_selector("body[data-view='time']", timeout=30000)
            p.wait_for_timeout(300)
            texts = p.evaluate("window.__texts")
            later = [t for t in texts if t["text"] == "later"]
            assert later, width
            axis = [t for t in texts if t["id"] == later[-1]["id"] and t["y"] == later[-1]["y"]]
            ticks = [t for t in axis if t["text"] != "later"]
            assert len(ticks) >= 3, (width, axis)
            for t in ticks:
                assert t["right"] <= later[-1]["left"], (width, t, later[-1])
                assert t["right"] <= t["cw"], (width, t)
            p.close()


def test_merged_time_lanes_of_one_name_say_where(tmp_path: Path, browser: Any) -> None:
    """Two functions of one name in two scripts (`has42` of page.html and of
    page11.html) were two Time lanes both labelled `has42`; each now says its place."""
    from jsprof.trace import TraceBuilder

    st = Store(tmp_path / "store")
    try:
        for i, page in enumerate(("page.html", "page11.html")):
            b = TraceBuilder()
            r = b.resource_id(f"https://shop.example/{page}")
            sid = b.stack_id([b.frame_id(f"main{i}", r, 1, 1), b.frame_id("has42", r, 20, 17)])
            top = b.stack_id([b.frame_id(f"main{i}", r, 1, 1)])
            for k in range(50):
                b.add_sample(10.0 * k, sid if k % 5 else top)
            upload(st, f"u{i}", b.build(), app="shop", release="1.0", route="/p",
                   pageLoad=f"pl{i}")
    finally:
        st.close()
    out = tmp_path / "fleet.html"
    assert main(["fleet", "flame", "--store", str(tmp_path / "store"), "--app", "shop",
                 "-o", str(out)]) == 0
    with fresh_pages(browser) as browser:
        p = browser.new_page(viewport={"width": 1300, "height": 900})
        p.goto(out.as_uri() + "#view=time")
        p.wait_for_selector("#v-time [data-lane='has42']", timeout=30000)
        names = p.locator("#v-time [data-lane='has42'] .fname").all_text_contents()
        assert sorted(names) == ["has42 (page.html:20:17)", "has42 (page11.html:20:17)"], names
        # a name of its own stays bare
        assert p.locator("#v-time [data-lane='main1'] .fname").all_text_contents() == ["main1"]


def test_upload_interval_that_is_a_bool_is_no_interval_on_every_path(tmp_path: Path,
                                                                      capsys) -> None:
    """An upload whose `sampleInterval` is JSON's `true` (a Store written directly, not
    through the collector's checks): the compactor and the Time view took no interval
    from it (the trace's own), `--during` took it as 1 ms, so its last sample weighed 1 ms
    where the stored weight said ~10 and `top --during` over a window covering the whole
    page load did not add up to `top`. One rule now (`store.tables.intern.upload_weights`)."""
    path = tmp_path / "store"
    st = Store(path)
    rng = np.random.default_rng(5)
    try:
        for i in range(3):
            tl = {"longFrames": [{"start": 0.0, "duration": 60_000.0, "blockingDuration": 500.0,
                                  "scripts": []}]}
            upload(st, f"b{i}", make_trace(rng, 120), app="shop", release="1.0", route="/p",
                   pageLoad=f"pl{i}", timeline=tl, sampleInterval=True)
    finally:
        st.close()
    base = ["--store", str(path), "--app", "shop", "--json"]
    top = _json(capsys, ["fleet", "top", *base])
    during = _json(capsys, ["fleet", "top", *base, "--during", "long-frame"])
    assert top["traces"] == during["traces"] == 3
    assert during["totalMs"] == pytest.approx(top["totalMs"], abs=2e-3)
    with api.session(api.open_store(path)) as s:
        ft = _blocks(api.flame(s, Filters(app="shop")))[0]["fleetTime"]
    assert ft["totalMs"] == pytest.approx(top["totalMs"], abs=2e-3)
