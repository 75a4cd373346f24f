"""The client's timeline (issue 23) at the collector and in fleet queries, on a real
`jsprof serve` on loopback and a real store: validation (a bad timeline is a 400 naming
the field, never a half-stored upload), `--during` windows, lost stacks charged to a long
frame's entry point, and the vitals' INP rule."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import orjson
import pytest

from browser_util import playwright_chromium
from jsprof import timeline as tl
from jsprof.fleet.vitals import inp
from serve_util import JSPROF, READ_TOKEN, Collector, gz, signed_in

APP_JS = "https://shop.example/app.js"


def _trace() -> dict:
    """alpha 0-100 ms, beta 100-200 ms, no stack 200-300 ms, idle after (10 ms apart)."""
    samples = []
    for i in range(40):
        t = 1000.0 + 10 * i  # the page's performance.now(): not zero-based
        sid = 0 if t < 1100 else 1 if t < 1200 else None
        samples.append({"timestamp": t} if sid is None else {"timestamp": t, "stackId": sid})
    return {
        "resources": [APP_JS + "?v=3"],
        "frames": [{"name": "alpha", "resourceId": 0, "line": 1, "column": 1},
                   {"name": "beta", "resourceId": 0, "line": 9, "column": 1}],
        "stacks": [{"frameId": 0}, {"frameId": 1}],
        "samples": samples,
    }


def _timeline() -> dict:
    return {
        "longFrames": [{
            "start": 1195.0, "duration": 110.0, "blockingDuration": 60.0, "renderStart": 1300.0,
            "styleAndLayoutStart": 1301.0,
            "scripts": [{"invoker": "BUTTON#buy.onclick", "invokerType": "event-listener",
                         "sourceURL": APP_JS + "?v=3", "sourceFunctionName": "onBuy",
                         "sourceCharPosition": 120, "start": 1196.0, "duration": 105.0,
                         "forcedStyleAndLayoutDuration": 0}],
        }],
        "interactions": [
            {"id": 7, "type": "click", "start": 1100.0, "duration": 100.0,
             "processingStart": 1104.0, "processingEnd": 1190.0, "target": "button#buy"},
        ],
        "load": {"responseStart": 20.0, "domContentLoaded": 300.0, "load": 900.0,
                 "lcp": 450.0, "lcpElement": "img"},
        "dropped": {"longFrames": 0, "interactions": 0},
    }


@pytest.fixture(scope="module")
def col(tmp_path_factory: pytest.TempPathFactory) -> Collector:
    c = Collector(tmp_path_factory.mktemp("tl") / "store", "--app", "shop:k1")
    yield c
    c.stop()


def _post(col: Collector, doc: dict, upload_id: str, gzip: bool = False) -> tuple[int, dict]:
    body = orjson.dumps(doc)
    return col.post(gz(body) if gzip else body, f"app=shop&key=k1&id={upload_id}&route=/buy"
                    "&release=1.0.0", encoding="gzip" if gzip else None)


def test_timeline_stored_in_meta(col: Collector) -> None:
    status, _ = _post(col, {"trace": _trace(), "meta": {"pageLoad": "pl-1",
                                                       "timeline": "not kept"},
                            "timeline": _timeline()}, "ok-1", gzip=True)
    assert status == 202
    meta = orjson.loads(col.get("ok-1")[1])["jsprof"]["meta"]
    t = meta["timeline"]
    assert t["longFrames"][0]["scripts"][0]["sourceURL"] == APP_JS  # query stripped
    assert t["interactions"][0]["type"] == "click" and t["load"]["lcp"] == 450.0


@pytest.mark.parametrize("plain_trace", [True, False], ids=["fast-path", "general-path"])
@pytest.mark.parametrize("bad, field", [
    (lambda t: t["longFrames"][0].update(duration="long"), "body.timeline.longFrames[0].duration"),
    (lambda t: t["longFrames"][0]["scripts"][0].update(start=-5),
     "body.timeline.longFrames[0].scripts[0].start"),
    (lambda t: t["interactions"][0].pop("start"), "body.timeline.interactions[0].start"),
    (lambda t: t["interactions"][0].update(target="x" * 300),
     "body.timeline.interactions[0].target"),
    (lambda t: t.update(interactions=t["interactions"] * 101), "body.timeline.interactions"),
    (lambda t: t.update(secrets=1), "body.timeline.secrets"),
    (lambda t: t["load"].update(lcp=float("1e300")), "body.timeline.load.lcp"),
    (lambda t: t["load"].update(cls=-0.1), "body.timeline.load.cls"),
    (lambda t: t["load"].update(cls="0.1"), "body.timeline.load.cls"),
    (lambda t: t["load"].update(lcpUrl="x" * 3000), "body.timeline.load.lcpUrl"),
    # review14: more long frames (50 ms or more each, one after another) than the piece's
    # ms can hold; before, 2**53 - 1 of them in a piece were stored and summed
    (lambda t: t.update(unsampled={"piece": 1, "start": 10.0, "ms": 100.0, "longFrames": 5,
                                   "interactions": 0}), "body.timeline.unsampled.longFrames"),
    (lambda t: t.update(unsampled={"piece": 1, "start": 10.0, "ms": 1e4,
                                   "longFrames": 2**53 - 1, "interactions": 0}),
     "body.timeline.unsampled.longFrames"),
])
def test_bad_timeline_is_a_400_naming_the_field(col: Collector, bad, field: str,
                                                plain_trace: bool) -> None:
    t = _timeline()
    bad(t)
    trace = _trace()
    if plain_trace:
        trace["resources"] = [APP_JS]  # nothing to normalise: the fast envelope path
    uid = f"bad-{abs(hash((field, plain_trace)))}"
    status, answer = _post(col, {"trace": trace, "meta": {}, "timeline": t}, uid)
    assert status in (400, 413), answer
    assert answer["error"].startswith(field + ":"), answer
    assert col.get(uid)[0] == 404  # nothing of it stored


def test_timeline_not_an_object(col: Collector) -> None:
    status, answer = _post(col, {"trace": _trace(), "timeline": [1]}, "bad-list")
    assert status == 400 and answer["error"].startswith("body.timeline: expected an object")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("during") / "store"
    c = Collector(path, "--app", "shop:k1")
    try:
        # Two chunks of one page load: the trace in the first, its timeline in the second
        # (Event Timing and LoAF entries arrive after the frame they describe).
        assert _post(c, {"trace": _trace(), "meta": {"pageLoad": "pl-1"}}, "c1")[0] == 202
        late = {"resources": [], "frames": [], "stacks": [],
                "samples": [{"timestamp": 5000.0}, {"timestamp": 5010.0}]}
        assert _post(c, {"trace": late, "meta": {"pageLoad": "pl-1"},
                         "timeline": _timeline()}, "c2")[0] == 202
    finally:
        c.stop()
    return path


def _fleet(store: Path, *args: str, code: int = 0) -> dict | str:
    r = subprocess.run([str(JSPROF), "fleet", *args, "--store", str(store), "--app", "shop"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == code, r.stderr
    return orjson.loads(r.stdout) if "--json" in args else r.stdout + r.stderr


def test_during_interaction_keeps_its_window(store: Path) -> None:
    doc = _fleet(store, "top", "--json", "--during", "interaction", "--slower-than", "50")
    rows = {r["name"]: r for r in doc["rows"]}
    # The click [1100, 1200): beta's ten samples of 10 ms; alpha's time is outside it.
    assert rows["beta"]["selfMs"] == pytest.approx(100.0)
    assert "alpha" not in rows and doc["pageLoads"] == 1
    # The default threshold (200 ms) leaves this 100 ms click out.
    assert _fleet(store, "top", "--json", "--during", "interaction")["samples"] == 0


def test_lost_stacks_go_to_the_long_frame_entry_point(store: Path) -> None:
    doc = _fleet(store, "top", "--json", "--during", "long-frame", "--all")
    rows = {r["name"]: r for r in doc["rows"]}
    # [1195, 1305): beta's last sample (1190) is out, the ten stack-less samples
    # 1200..1290 are in, and the one at 1300 too: eleven, none of them idle.
    assert rows["(stack not captured)"]["selfMs"] == pytest.approx(110.0)
    assert rows["onBuy"]["totalMs"] == pytest.approx(110.0)
    assert rows["onBuy"]["resource"] == APP_JS
    assert doc["attributedMs"] == pytest.approx(110.0)
    assert "(idle)" not in rows
    text = _fleet(store, "top", "--during", "long-frame")
    assert "110.0 ms of samples whose stack the browser did not capture" in text
    # 50 ms of blocking: below a threshold of 61 ms nothing is kept.
    assert _fleet(store, "top", "--json", "--during", "long-frame",
                  "--slower-than", "61")["samples"] == 0


def test_during_on_flame_diff_export(store: Path, tmp_path: Path) -> None:
    out = tmp_path / "f.html"
    _fleet(store, "flame", "-o", str(out), "--during", "long-frame")
    assert "lost stacks charged" in out.read_text()
    exp = tmp_path / "e.json"
    _fleet(store, "export", "-o", str(exp), "--during", "long-frame")
    assert exp.stat().st_size > 0
    d = _fleet(store, "diff", "--json", "--during", "long-frame", "--base", "release=1.0.0",
               "--new", "route=/buy", "--min-traces", "1", "--min-samples", "1")
    assert {r["name"] for r in d["rows"]} == {"onBuy", "(stack not captured)"}
    err = _fleet(store, "top", "--slower-than", "5", code=2)
    assert "--slower-than needs --during" in err


def test_during_over_uploads_without_timelines_selects_nothing(tmp_path: Path) -> None:
    path = tmp_path / "store"
    c = Collector(path, "--app", "shop:k1")
    try:
        for i in range(3):  # traces, but no timeline: no window of any kind
            assert _post(c, {"trace": _trace(), "meta": {"pageLoad": f"pl-{i}"}},
                         f"n{i}")[0] == 202
        status, _, data = c.request("GET", "/v1/query/top?app=shop&during=interaction",
                                    None, {"Authorization": f"Bearer {READ_TOKEN}"})
        assert status == 400, data
        assert "none of the 3 matching uploads" in orjson.loads(data)["error"]
    finally:
        c.stop()
    # The house rule for a filter that selects nothing: exit 2, one line saying what exists.
    for cmd in (["top"], ["flame", "-o", str(tmp_path / "f.html")],
                ["export", "-o", str(tmp_path / "e.jsprof.json")],
                ["diff", "--base", "release=1.0.0", "--new", "route=/buy"]):
        err = _fleet(path, *cmd, "--during", "interaction", code=2).strip()
        assert "none of the 3 matching uploads" in err and "has an interaction window" in err, err
        assert "\n" not in err and "Traceback" not in err
    assert not (tmp_path / "f.html").exists() and not (tmp_path / "e.jsprof.json").exists()


def _kept(ms: float) -> float:
    """A vital as `fleet vitals` keeps it: the middle of its bucket of the log scale,
    within 1 % (store/tables/vitals.py), to 3 decimals."""
    from jsprof.store.tables.rollup import bucket_value
    from jsprof.store.tables.vitals import buckets

    return round(float(bucket_value(buckets([ms]))[0]) / 1e6, 3)


def test_vitals(store: Path) -> None:
    doc = _fleet(store, "vitals", "--json")
    (row,) = doc["rows"]
    assert row["route"] == "/buy" and row["pageLoads"] == 1 and row["interactions"] == 1
    assert row["inpP75Ms"] == _kept(100.0) == pytest.approx(100.0, rel=0.01)
    assert row["lcpP75Ms"] == _kept(450.0) == pytest.approx(450.0, rel=0.01)
    assert row["longFrameBlockingP75Ms"] == _kept(60.0)
    click = row["interactionTypes"]["click"]
    assert (click["inputDelayP75Ms"], click["processingP75Ms"],
            click["presentationP75Ms"]) == (_kept(4.0), _kept(86.0), _kept(10.0))
    # The text table, piped: nothing cut (#36), its footer one line (a terminal's width
    # applies in a terminal only: test_cli_tables). 100 ms is kept as 100.99 (its bucket).
    text = _fleet(store, "vitals")
    assert "/buy" in text and "click 101 ms (4 ms / 86 ms / 10 ms)" in text, text
    assert "…" not in text and len(text.strip().splitlines()) == 4, text


def test_inp_ignores_one_per_fifty() -> None:
    assert inp([]) is None
    assert inp([30.0, 500.0, 40.0]) == 500.0
    # 120 interactions: the two slowest are ignored, the third slowest is the INP.
    assert inp([float(i) for i in range(120)]) == 117.0


def test_during_over_http(store: Path) -> None:
    c = Collector(store, "--app", "shop:k1")
    try:
        auth = {"Authorization": f"Bearer {READ_TOKEN}"}
        status, _, data = c.request(
            "GET", "/v1/query/top?app=shop&during=long-frame&format=json", None, auth)
        assert status == 200, data
        doc = orjson.loads(data)
        assert doc["attributedMs"] == pytest.approx(110.0)
        status, _, data = c.request(
            "GET", "/v1/query/top?app=shop&during=interaction&slower_than=50&format=json",
            None, auth)
        rows = {r["name"]: r for r in orjson.loads(data)["rows"]}
        assert status == 200 and rows["beta"]["selfMs"] == pytest.approx(100.0)
        r = subprocess.run([str(JSPROF), "fleet", "vitals", "--url", c.url, "--app", "shop",
                            "--json"], capture_output=True, text=True, timeout=120,
                           env={**os.environ, "JSPROF_READ_TOKEN": READ_TOKEN})
        assert r.returncode == 0, r.stderr
        assert orjson.loads(r.stdout)["rows"][0]["inpP75Ms"] == _kept(100.0)
        status, _, data = c.request("GET", "/v1/query/vitals?app=shop&format=html", None, auth)
        assert status == 200 and b"/buy" in data and b"INP p75" in data
        # The listing: newest first, a page at a time, the timeline as counts.
        status, _, data = c.request("GET", "/v1/traces?app=shop&limit=1", None, auth)
        assert status == 200, data
        first = orjson.loads(data)
        (u,) = first["uploads"]
        assert u["id"] == "c2" and u["longFrames"] == 1 and u["interactions"] == 1
        assert u["pageLoad"] == "pl-1" and u["route"] == "/buy" and "timeline" not in u["meta"]
        status, _, data = c.request(
            "GET", f"/v1/traces?app=shop&limit=1&cursor={first['nextCursor']}", None, auth)
        second = orjson.loads(data)
        assert [x["id"] for x in second["uploads"]] == ["c1"] and second["nextCursor"] is None
        assert c.request("GET", "/v1/traces?app=shop", None, {})[0] == 401
        status, _, data = c.request("GET", "/v1/traces?app=shop&cursor=x", None, auth)
        assert status == 400 and b"cursor" in data
        status, _, data = c.request("GET", "/v1/query/top?app=shop&during=typing", None, auth)
        assert status == 400 and b"during" in data
        status, _, data = c.request("GET", "/v1/query/top?app=shop&slower_than=3", None, auth)
        assert status == 400 and b"needs during" in data
    finally:
        c.stop()


def test_dashboard_vitals_and_during(store: Path, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    c = Collector(store, "--app", "shop:k1")
    try:
        with playwright_chromium() as browser:
            page = browser.new_page()
            signed_in(page, c.url)
            cells = page.locator("#vitals tbody td").all_text_contents()
            # INP 100 ms and LCP 450 ms as kept: their buckets' middles (`_kept`)
            assert cells == ["/buy", "1.0.0", "1", "1", "101 ms", "60 ms", "453 ms",
                             "img (1)", "–"], cells
            page.select_option("#during", "long-frame")
            page.click("#apply")
            expect(page.locator("#top td.fn").first).to_have_text(
                "(stack not captured)", timeout=60000)
            assert "onBuy" in page.locator("#top td.fn").all_text_contents()
            page.screenshot(path=str(tmp_path / "dashboard.png"), full_page=True)
            # A filter that matches nothing: a sentence where the table would be.
            page.select_option("#during", "")
            page.fill("#route", "/nothing*")
            page.click("#apply")
            expect(page.locator("#vitals-empty")).to_contain_text("matches no route",
                                                                  timeout=60000)
            assert page.locator("#vitals tbody tr").count() == 0
    finally:
        c.stop()


def test_an_interaction_window_covers_its_handlers() -> None:
    # The client reports an interaction by its first event's start (pointerdown) and its
    # longest event's duration (INP's number); a press held 150 ms puts the click's
    # handlers after start + duration, and they are what the user waited for.
    pl = tl.PageLoad([], [{"start": 100.0, "duration": 210.0, "processingStart": 252.0,
                           "processingEnd": 520.0}], None)
    assert pl.windows("interaction", 200.0) == [(100.0, 520.0)]
    assert pl.windows("interaction", 250.0) == []  # the threshold is INP's number


def test_series_by_day_during_a_window(store: Path) -> None:
    """`series?by=day` with --during: one pass over the uploads' windows (select_groups),
    the same shares as the one day's selection by itself."""
    import math
    from dataclasses import replace

    from jsprof.analysis.profile import summarize
    from jsprof.fleet import api, query
    from jsprof.fleet.filters import Filters
    from jsprof.store import Store

    st = Store(store)
    try:
        with api.session(st) as s:
            f = Filters(app="shop", during="long-frame")
            doc = api.series(s, f, "onBuy", "day")
            assert len(doc["points"]) == 1
            p = doc["points"][0]
            at = s.engine.uploads(s.snap, f).received_at
            d = math.floor(float(at[0]) / 86400e3)
            sel = query.select(s.engine, s.snap, replace(f, since=d * 86400e3,
                                                         until=(d + 1) * 86400e3))
            sm = summarize(sel.recording)
            hit = [i for i, k in enumerate(sm.stats.keys) if k.name == "onBuy"]
            assert p["traces"] == sel.traces == 2
            assert p["totalMs"] == round(sm.total_ms, 3)
            assert p["totalPct"] == round(
                float(max(sm.stats.total_ms[i] for i in hit)) * 100.0 / sm.total_ms, 3)
            assert p["totalPct"] > 0
    finally:
        st.close()


def test_left_out_counts_are_bounded_alike_for_every_query():
    """review14: three uploads of one page load, each a running piece of its own with
    2**52 interactions: `fleet interactions` summed them whole (unsampledInteractions
    27,021,597,764,222,973) where the vitals rollups kept each page load's count at most
    2**32, so the two said different totals. Both read `timeline.left_out` now."""
    from jsprof.store.tables import vitals as rv
    from jsprof.timeline import LEFT_OUT_MAX, check, left_out, page_loads

    ups = []
    for piece in (1, 2, 3):
        t = {"longFrames": [], "interactions": [], "unsampled": {
            "piece": piece, "start": 1000.0 * piece, "ms": 500.0, "longFrames": 3,
            "interactions": 2**52}}
        ups.append(("pl-1", check(t)))
    pl = page_loads(ups)["pl-1"]
    got = left_out(pl)
    assert got["unsampledInteractions"] == LEFT_OUT_MAX, got
    assert got["unsampledLongFrames"] == 9 and got["unsampledMs"] == 1500
    assert dict(rv.left_out(pl))["unsampledInteractions"] == LEFT_OUT_MAX
