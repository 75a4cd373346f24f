"""`--exclude-idle` and the dashboard's "Exclude idle" toggle: a mostly idle upload filled
the merged flame graph with (idle). With the choice on, (idle) and (program) samples are
left out of `fleet top`, `fleet flame` (and its Time view) and the dashboard's top table and
merged flame, which say how much was left out; the dashboard's numbers equal the CLI's given
the same choice. Real Chromium traces (tests/data/chromium: trace-idle.json waits on a
timer) in a real store, a real `jsprof serve` and headless Chromium. The same dashboard
also shows a function name's bidirectional controls as escapes."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from browser_util import fresh_pages, playwright_chromium
from fleet_util import upload
from jsprof import io
from jsprof.cli import main
from jsprof.render.base import visible
from jsprof.store import Store
from jsprof.trace import MARKERS, NONE
from serve_util import READ_TOKEN, Collector, signed_in

DATA = Path(__file__).parent / "data" / "chromium"
NO_JS_LEFT_OUT = ("(idle)", "(program)")
EVIL = "fib\u202elive"  # drew as "fibevil" reversed: "fiblive" read backwards after fib


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """One Playwright Chromium for the module's tests, each taking its pages through
    fresh_pages (a launch and close per test was ~2 s of each)."""
    with playwright_chromium() as b:
        yield b


@pytest.fixture(scope="module")
def store_path(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("idle") / "store"
    st = Store(path)
    idle = io.load(DATA / "trace-idle.json").tracks[0].trace
    basic = io.load(DATA / "trace-basic.json").tracks[0].trace
    for i in range(3):
        upload(st, f"idle{i}", idle, app="shop", release="1.0", route="/cart")
    # The busy page's fib is named with a right-to-left override (trace content is hostile:
    # the dashboard shows the control as an escape, test_the_dashboard_shows_bidi_...).
    frames = [f._replace(name=EVIL) if f.name == "fib" else f for f in basic.frames]
    upload(st, "busy", basic.replace(frames=frames), app="shop", release="1.0",
           route="/cart")
    st.close()
    return path


@pytest.fixture(scope="module")
def col(store_path: Path):
    c = Collector(store_path, "--app", "shop:k1")
    yield c
    c.stop()


def _top(capsys, store_path: Path, *extra: str) -> dict:
    capsys.readouterr()
    assert main(["fleet", "top", "--store", str(store_path), "--app", "shop", "--all",
                 "--json", *extra]) == 0
    return orjson.loads(capsys.readouterr().out)


def _model(page_html: str, block: str) -> dict:
    m = re.search(f'<script type="application/json" id="{block}">(.*?)</script>', page_html,
                  re.S)
    assert m, block
    return json.loads(m.group(1))


def test_the_rule_leaves_out_idle_and_program_only() -> None:
    # (A unit check of the rule beside the real runs below: the fixtures have no
    # (program) samples.) No stack and the marker of (idle) or (program); a stack, or GC,
    # style, layout, paint (work the page's code caused) stay.
    from jsprof.fleet.query import idle_mask

    other, gc = MARKERS.index("other"), MARKERS.index("gc")
    stack = np.array([NONE, NONE, NONE, 3, 3, NONE])
    marker = np.array([NONE, other, gc, NONE, other, MARKERS.index("paint")])
    assert idle_mask(stack, marker).tolist() == [True, True, False, False, False, False]


def test_exclude_idle_in_fleet_top_and_flame(store_path: Path, tmp_path: Path, capsys) -> None:
    every = _top(capsys, store_path)
    busy = _top(capsys, store_path, "--exclude-idle")
    idle_row = next(r for r in every["rows"] if r["name"] == "(idle)")
    assert idle_row["selfPct"] > 30  # what filled the merged views
    assert not any(r["name"] in NO_JS_LEFT_OUT for r in busy["rows"])
    # What was left out is said, and is exactly the idle rows' time and samples.
    assert busy["excludedIdleMs"] == pytest.approx(idle_row["selfMs"], abs=0.002)
    assert busy["totalMs"] == pytest.approx(every["totalMs"] - idle_row["selfMs"], abs=0.01)
    assert "excludedIdleMs" not in every
    assert busy["samples"] + busy["excludedIdleSamples"] == every["samples"]
    # Every function keeps its ms; its share is of the time that is left.
    def key(r: dict) -> tuple:
        return r["name"], r["resource"], r["line"], r["column"]

    left = {key(r): r for r in busy["rows"]}
    for r in every["rows"]:
        if r["name"] in NO_JS_LEFT_OUT:
            continue
        got = left[key(r)]
        assert got["selfMs"] == r["selfMs"] and got["totalMs"] == r["totalMs"]
        assert got["selfPct"] == pytest.approx(100 * r["selfMs"] / busy["totalMs"], abs=0.01)
    # The text table says so.
    capsys.readouterr()
    assert main(["fleet", "top", "--store", str(store_path), "--app", "shop",
                 "--exclude-idle"]) == 0
    out = capsys.readouterr().out
    assert "--exclude-idle:" in out and f"{busy['excludedIdleMs']:.1f} ms of (idle)" in out
    # The merged flame: no (idle) frame, the root is the time left, the subtitle says so;
    # its Time view sums to the same time (no (idle) lane).
    for flag, doc in (([], every), (["--exclude-idle"], busy)):
        out_html = tmp_path / f"flame{len(flag)}.html"
        assert main(["fleet", "flame", "--store", str(store_path), "--app", "shop", *flag,
                     "-o", str(out_html)]) == 0
        html = out_html.read_text()
        data = _model(html, "fg-data")
        assert data["total"] == pytest.approx(doc["totalMs"], abs=0.01)
        assert ("(idle)" in data["names"]) is (not flag)
        assert ("(idle) and (program) left out" in html) is bool(flag)
        ft = _model(html, "fg-model")["fleetTime"]
        assert ft["totalMs"] == pytest.approx(doc["totalMs"], abs=0.01)
        assert ("(idle)" in {r["name"] for r in ft["fns"]}) is (not flag)


def test_exclude_idle_refusals(store_path: Path, capsys) -> None:
    # Where it does not apply, one line and exit 2 (CLI) or 400 naming it (HTTP).
    for argv, word in (
        (["vitals"], "fleet vitals: --exclude-idle"),
        (["diff", "--base", "release=1.0", "--new", "release=1.0"], "fleet diff: --exclude-idle"),
        (["regressions"], "fleet regressions: --exclude-idle"),
    ):
        capsys.readouterr()
        code = main(["fleet", *argv, "--store", str(store_path), "--app", "shop",
                     "--exclude-idle"])
        err = capsys.readouterr().err
        assert code == 2 and word in err and err.count("\n") == 1, (argv, err)


def test_the_dashboards_exclude_idle_toggle(chromium: Any, store_path: Path, col: Collector,
                                            capsys) -> None:
    every = _top(capsys, store_path)
    busy = _top(capsys, store_path, "--exclude-idle")
    auth = {"Authorization": f"Bearer {READ_TOKEN}"}
    st, _, body = col.request("GET", "/v1/query/vitals?app=shop&exclude_idle=1",
                              headers=auth)
    assert st == 400 and b"exclude_idle" in body
    st, _, body = col.request("GET", "/v1/query/top?app=shop&exclude_idle=yes",
                              headers=auth)
    assert st == 400 and b"use 1 or 0" in body
    with fresh_pages(chromium) as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        signed_in(page, col.url)
        # On by default: the top table and merged flame are the CLI's --exclude-idle.
        assert page.locator("#exclude-idle").is_checked()
        for doc, on in ((busy, True), (every, False)):
            if not on:
                page.locator("#exclude-idle").uncheck()
            summary = page.locator("#top-summary")
            want = f"{doc['samples']} samples"
            page.wait_for_function(
                "w => document.getElementById('top-summary').textContent.includes(w)",
                arg=want, timeout=60000)
            assert ("idle excluded" in summary.text_content()) is on
            if on:
                assert f"({doc['excludedIdleSamples']})" in summary.text_content()
            shown = page.eval_on_selector_all(
                "#top tbody tr",
                "trs => trs.map(tr => [tr.querySelector('td.fn').textContent,"
                " tr.querySelector('td.loc').textContent, tr.children[2].textContent])")
            names = [n for n, _, _ in shown]
            assert ("(idle)" in names) is (not on)
            cli = {(visible(r["label"]), "" if r["resource"] is None else
                    f"{r['resource']}:{r['line']}:{r['column']}"): r["selfMs"]
                   for r in doc["rows"]}
            assert len(shown) == min(len(cli), 30)
            for name, loc, self_ms in shown:
                assert float(self_ms) == pytest.approx(cli[(name, loc)], abs=0.051), name
            # The merged flame graph in its frame: its root is the same total.
            frame = page.frame_locator("#flame")
            # (the frame's page is the new one once its root says the new total)
            want = f"total {doc['totalMs']:.1f} ms (100.0%)"
            page.wait_for_function(
                "w => { const f = document.getElementById('flame').contentWindow;"
                " return !!(f && f.jsprofTip && f.jsprofTip(0).includes(w)); }",
                arg=want, timeout=60000)
            canvas = frame.locator("#fg-canvas")
            drawn = canvas.evaluate("() => jsprofFrames()")
            root_tip = canvas.evaluate("() => jsprofTip(0)")
            assert f"total {doc['totalMs']:.1f} ms (100.0%)" in root_tip, root_tip
            assert ("(idle)" in {f["name"] for f in drawn}) is (not on)
            sub = frame.locator(".sub").text_content()
            assert ("(idle) and (program) left out" in sub) is on
            page.screenshot(path=str(store_path.parent / f"dash-idle-{on}.png"),
                            full_page=True)
        assert errors == []


def test_the_dashboard_shows_bidi_controls_as_escapes(chromium: Any, col: Collector,
                                                      tmp_path: Path) -> None:
    # A function named with U+202E: the top table's cell and its title, the chart's
    # heading, the uploads' "that run ..." and the merged flame's label show "\u202e"; the
    # queries the page makes with the name (chart, uploads) still find it.
    shown = "fib\\u202elive"
    with fresh_pages(chromium) as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        signed_in(page, col.url)
        row = page.locator("#top tbody tr", has_text=shown)
        row.wait_for(timeout=60000)
        fn = row.locator("td.fn")
        assert fn.text_content() == shown and fn.get_attribute("title") == shown
        row.click()
        page.wait_for_function("w => document.getElementById('chart-fn').textContent === w",
                               arg=shown, timeout=60000)
        page.locator("#chart svg rect").first.wait_for(timeout=60000)  # the query found it
        row.locator("button.link").click()
        page.wait_for_function(
            "w => document.getElementById('uploads-what').textContent === 'that run ' + w",
            arg=shown, timeout=60000)
        ids = page.locator("#uploads tbody a.upload")
        page.wait_for_function(
            "() => document.querySelectorAll('#uploads tbody a.upload').length === 1",
            timeout=60000)
        assert ids.all_text_contents() == ["busy"]  # the exact name found its upload
        frame = page.frame_locator("#flame")
        page.wait_for_function(
            "() => { const f = document.getElementById('flame').contentWindow;"
            " return !!(f && f.jsprofFrames && f.jsprofFrames().length); }", timeout=60000)
        drawn = frame.locator("#fg-canvas").evaluate("() => jsprofFrames()")
        evil = [f for f in drawn if f["name"] == EVIL]
        # (a label is the shown name, or its start cut to its box with an ellipsis)
        assert evil and all(f["label"] in ("", shown) or (
            f["label"].endswith("\u2026") and shown.startswith(f["label"][:-1]))
            for f in evil), [f["label"] for f in evil]
        assert any("\\u202e" in f["label"] for f in evil)
        text = page.evaluate("document.body.innerText")
        assert "\u202e" not in text and shown in text
        page.screenshot(path=str(tmp_path / "dash-bidi.png"), full_page=True)
        assert errors == []
