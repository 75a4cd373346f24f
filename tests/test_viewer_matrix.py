"""Issue 24's "done when": every view of the viewer (flame, time, sandwich, source, diff)
works on a QuickJS, a Node and a Chromium recording and on a fleet merge (a real `jsprof
serve`), in headless Chromium, and the numbers each view shows are `jsprof report`'s (the
fleet's: `fleet top`'s). One real recording per engine of one app; a screenshot of each
view is written beside the test's files (pytest --basetemp=DIR keeps them)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote, urlencode

import orjson
import pytest

from browser_util import playwright_chromium
from jsprof import io
from jsprof.cli import main
from jsprof.formats.jsprof import trace_to_doc
from serve_util import READ_TOKEN, Collector
from viewer_util import record_app

ENGINES = ("quickjs", "node", "chromium")
SOURCES = (*ENGINES, "fleet")
VIEWS = ("flame", "time", "sandwich", "source", "diff")

# Names no other function's contains, so a search for one matches it alone.
APP = """\
function crunchLeaf(n) {
  let x = 0;
  for (let i = 0; i < n; i++) x += i % 7;
  return x;
}
function walkTree(d) {
  return d === 0 ? crunchLeaf(300) : walkTree(d - 1) + walkTree(d - 1);
}
function buildTable() {
  let s = 0;
  for (let k = 0; k < 30; k++) s += crunchLeaf(2000);
  return s;
}
function mainLoop() {
  const end = Date.now() + 700;
  let s = 0;
  while (Date.now() < end) { s += walkTree(5); s += buildTable(); }
  return s;
}
mainLoop();
"""




@pytest.fixture(scope="module")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = {}
    for engine in ENGINES:
        out[engine] = record_app(tmp_path_factory.mktemp(f"matrix-{engine}"), APP, engine)
    return out


def _report(trace: Path, *extra: str) -> dict:
    p = subprocess.run([sys.executable, "-m", "jsprof.cli", "report", str(trace), "--json",
                        "--all", *extra], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


@pytest.fixture(scope="module")
def fleet(recordings: dict[str, Path], tmp_path_factory: pytest.TempPathFactory):
    """A real collector holding the Chromium recording's page track as four page loads of
    two releases (a ProfilerTrace, as the browser client sends one). (One engine's: the
    other engines' traces name the same functions in other files, so a function's name
    alone would no longer say which row a view shows.)"""
    tmp = tmp_path_factory.mktemp("matrix-fleet")
    col = Collector(tmp / "store", "--app", "shop:k1")
    try:
        track = max(io.load(recordings["chromium"]).tracks, key=lambda t: t.trace.num_samples)
        for engine in ("a", "b"):
            for rel in ("1.0", "1.1"):
                body = orjson.dumps({"trace": trace_to_doc(track.trace),
                                     "meta": {"sampleInterval": track.sample_interval}})
                q = urlencode({"app": "shop", "key": "k1", "release": rel, "route": "/p",
                               "id": f"{engine}-{rel}"})
                status, answer = col.post(body, q)
                assert status == 202, answer
        yield col
    finally:
        col.stop()


def _query(col: Collector, path: str, params: list) -> bytes:
    status, _, body = col.request("GET", f"{path}?{urlencode(params)}",
                                  headers={"Authorization": f"Bearer {READ_TOKEN}"},
                                  timeout=120)
    assert status == 200, body[:300]
    return body


@pytest.fixture(scope="module")
def browser():
    with playwright_chromium() as b:
        yield b


def _open(browser, url: str, view: str):
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.errors = []
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.goto(url)
    page.wait_for_selector(f"body[data-view='{view}']", timeout=30000)
    return page


def _ms(v: float) -> str:
    return f"{v:.1f}" if v >= 0.1 or v == 0 else f"{v:.3f}"


class Truth:
    """What `report` (or `fleet top`) says: total, and self/total per function label."""

    def __init__(self, total: float, rows: list[tuple[str, float, float]]) -> None:
        self.total = total
        self.self = {n: s for n, s, _ in rows}
        self.tot = {n: t for n, _, t in rows}
        self.hottest = max(rows, key=lambda r: r[1])[0]


def _truth(source: str, recordings: dict[str, Path], fleet: Collector | None,
           view: str) -> Truth:
    if source == "fleet":
        # The diff page's numbers are NEW's (release 1.1); the others all uploads'.
        sel = [("release", "1.1")] if view == "diff" else []
        doc = orjson.loads(_query(fleet, "/v1/query/top", [("app", "shop"), ("top", "1000"),
                                                           *sel]))
        return Truth(doc["totalMs"], [(r["label"], r["selfMs"], r["totalMs"])
                                      for r in doc["rows"]])
    doc = _report(recordings[source])
    return Truth(doc["total_ms"], [(r["name"], r["self_ms"], r["total_ms"]) for r in doc["rows"]])


def _page_file(source: str, view: str, recordings: dict[str, Path], fleet: Collector | None,
               tmp: Path) -> Path:
    out = tmp / f"{source}-{view}.html"
    if source == "fleet":
        if view == "diff":
            params = [("app", "shop"), ("base", "release=1.0"), ("new", "release=1.1"),
                      ("min_traces", "1"), ("min_samples", "1"), ("format", "flame-html")]
            out.write_bytes(_query(fleet, "/v1/query/diff", params))
        else:
            out.write_bytes(_query(fleet, "/v1/query/flame", [("app", "shop")]))
        return out
    trace = recordings[source]
    if view == "diff":  # a recording against itself: the same viewer, NEW's numbers
        assert main(["diff", str(trace), str(trace), "--flame", str(out)]) in (0, 1)
    else:
        assert main(["flame", str(trace), "-o", str(out)]) == 0
    return out


@pytest.mark.parametrize("view", VIEWS)
@pytest.mark.parametrize("source", SOURCES)
def test_every_view_on_every_source(browser, recordings, fleet, source: str, view: str,
                                    tmp_path: Path, capsys) -> None:
    truth = _truth(source, recordings, fleet, view)
    page_file = _page_file(source, view, recordings, fleet, tmp_path)
    capsys.readouterr()
    shown = {"diff": "flame"}.get(view, view)
    hot, suffix = truth.hottest, ""
    if view == "source":
        # the function of the app with the most self time (not an engine's own row)
        hot = max((n for n in truth.self if n in ("crunchLeaf", "walkTree", "buildTable")),
                  key=lambda n: truth.self[n])
        suffix = f"&fn={quote(hot)}"
    page = _open(browser, page_file.as_uri() + f"#view={shown}{suffix}", shown)
    assert page.locator("nav.tabs a").all_text_contents() == [
        "Flame", "Time", "Sandwich", "Bottom-up", "Call tree", "Source"]
    if view in ("flame", "diff"):
        # The root's tooltip is the profile's total; a search's share is the function's
        # total, counted once however often it recurses (report's total).
        tip = page.evaluate("jsprofTip(0)")
        assert f"total {_ms(truth.total)} ms" in tip, (tip, truth.total)
        page.fill("#fg-search", "walkTree")
        status = ""
        for _ in range(100):
            status = page.locator("#fg-status").text_content()
            if " ms; " in status:
                break
            page.wait_for_timeout(50)
        got = float(re.search(r"\(([\d.]+) ms; ", status).group(1))
        assert got == pytest.approx(truth.tot["walkTree"], abs=0.051), status
        if view == "diff":
            assert "than base" in page.locator(".legend").text_content()
            # Its sandwich is NEW's: report's numbers (the search cleared: it filters there).
            page.fill("#fg-search", "")
            page.locator("nav.tabs a[data-tab='sandwich']").click()
            page.wait_for_selector("body[data-view='sandwich']")
            _check_sandwich(page, truth)
    elif view == "time":
        if source == "fleet":
            box = page.locator("#v-time [data-lane='sampled time'] canvas").bounding_box()
            page.mouse.move(box["x"] + 1, box["y"] + 5)
            page.mouse.down()
            page.mouse.move(box["x"] + box["width"] - 1, box["y"] + 5, steps=4)
            page.mouse.up()
            rows = page.eval_on_selector_all(
                "[data-panel='range'] tr", "trs => trs.slice(1).map(tr => "
                "[tr.children[2].textContent, +tr.children[0].textContent])")
            head = page.locator("[data-panel='range'] h2").text_content()
            assert f"{_ms(truth.total)} ms sampled" in head, head
        else:
            lanes = page.locator("#v-time .lane[data-kind='samples'] canvas")
            assert lanes.count() >= 1
            lanes.first.dblclick()
            page.wait_for_selector("[data-panel='range'] tr[data-f]", timeout=10000)
            rows = page.eval_on_selector_all(
                "[data-panel='range'] tr[data-f]", "trs => trs.map(tr => "
                "[tr.children[4].textContent, +tr.children[0].textContent,"
                " +tr.children[2].textContent])")
            for name, _s, t in rows:
                assert t == pytest.approx(truth.tot[name], abs=0.051), (name, t)
        assert rows
        for row in rows:
            name, s = row[0], row[1]
            assert s == pytest.approx(truth.self[name], abs=0.051), (name, s)
        # Sorted by self, as report sorts (samples with no stack are no lane here).
        assert rows[0][1] == pytest.approx(max(truth.self[r[0]] for r in rows), abs=0.051)
    elif view == "sandwich":
        _check_sandwich(page, truth)
    elif view == "source":
        note = page.locator("[data-panel='function'] .note").first.text_content()
        assert f"self {_ms(truth.self[hot])} ms" in note, note
        assert f"total {_ms(truth.tot[hot])} ms" in note, note
        if source == "fleet":
            assert "no per-line data" in page.locator("[data-note='nolines']").text_content()
        else:
            # The lines' self times add up to the function's (as report --by line counts).
            lines = _report(recordings[source], "--by", "line")["rows"]
            want = sum(r["self_ms"] for r in lines if r["name"] == hot)
            s = page.locator("[data-note='sum']").text_content()
            got = float(re.search(r"executing: ([\d.]+) ms", s).group(1))
            assert got == pytest.approx(want, abs=0.051), s
            assert got == pytest.approx(truth.self[hot], abs=0.051), s
            assert page.locator("#v-source td.code", has_text="crunchLeaf(").count() >= 1
    page.screenshot(path=str(tmp_path / f"{source}-{view}.png"), full_page=False)
    assert page.errors == [], page.errors
    page.close()


def _check_sandwich(page, truth: Truth) -> None:
    first = page.locator("#v-sandwich tbody tr").first
    first.wait_for(timeout=10000)
    cells = first.locator("td")
    name = first.locator("td.name").text_content()
    assert truth.self[name] == pytest.approx(truth.self[truth.hottest], abs=0.051)
    assert float(cells.nth(0).text_content()) == pytest.approx(truth.self[name], abs=0.051)
