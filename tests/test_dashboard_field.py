"""The dashboard's regressions list, uploads list and example-upload flame graphs, in real
headless Chromium against a real `jsprof serve`, on page loads resampled from real
Chromium traces (fleet_util.real_store) with a planted release regression. The regressed
function and some routes carry markup: the page must show it as text."""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import orjson
import pytest

from browser_util import fresh_pages, playwright_chromium
from fleet_util import real_store
from serve_util import READ_TOKEN, Collector, signed_in

HOSTILE = '<img src=x onerror="document.title=\'pwned\'">fib'
HOSTILE_ROUTE = '/cart/"><script>document.title="pwned"</script>'
SHOTS = os.environ.get("JSPROF_DASHBOARD_SHOTS")  # a folder to keep the screenshots in


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """One Playwright Chromium for the module's tests, each taking its pages through
    fresh_pages (a launch and close per test was ~2 s of each)."""
    with playwright_chromium() as b:
        yield b


def _plant(i: int, day: int, rel: str) -> str | None:
    # fib (named HOSTILE here) 6x slower from 1.10.0 on; 1.10.0's newest upload runs no fib
    return None if rel == "1.9.0" else "none" if i == 46 else "fib"


@pytest.fixture(scope="module")
def col(tmp_path_factory):
    store = real_store(tmp_path_factory.mktemp("dash") / "store", 41, _plant,
                       rename={"fib": HOSTILE},
                       route=lambda i: HOSTILE_ROUTE if i % 8 == 5 else "/cart")
    c = Collector(store, "--app", "shop:k1")
    yield c
    c.stop()


def _api(col: Collector, path: str, **params: str) -> dict:
    status, _, body = col.request("GET", f"{path}?{urlencode(params)}",
                                  headers={"Authorization": f"Bearer {READ_TOKEN}"})
    assert status == 200, body
    return orjson.loads(body)


def _total_ms(trace_doc: bytes, name: str) -> float:
    """`name`'s total time in one upload as GET /v1/traces/{id} gives it back."""
    from jsprof.analysis.profile import summarize
    from jsprof.formats import read_any

    st = summarize(read_any(trace_doc, "upload")).stats
    return sum(float(ms) for k, ms in zip(st.keys, st.total_ms, strict=True) if k.name == name)


def test_function_filter_on_the_uploads_listing(col: Collector) -> None:
    # GET /v1/traces?function=: only uploads whose samples run it (self or total).
    every = _api(col, "/v1/traces", app="shop", limit="100")["uploads"]
    assert len(every) == 48
    fib = _api(col, "/v1/traces", app="shop", limit="100", function=HOSTILE)["uploads"]
    ids = {u["id"] for u in fib}
    assert "u46" not in ids and 0 < len(ids) < 48
    for uid in ids:  # each one, read back whole, runs it
        status, _, body = col.request("GET", f"/v1/traces/{uid}",
                                      headers={"Authorization": f"Bearer {READ_TOKEN}"})
        assert status == 200 and _total_ms(body, HOSTILE) > 0, uid
    # A caller with no self time of its own is run by every upload that runs any JS.
    work = _api(col, "/v1/traces", app="shop", limit="100", function="workload")["uploads"]
    assert {u["id"] for u in work} == {u["id"] for u in every if u["id"] != "u46"}
    # A function no upload runs: an empty page, not an error.
    assert _api(col, "/v1/traces", app="shop", function="nope")["uploads"] == []
    status, _, body = col.request("GET", "/v1/traces?app=shop&resource=x",
                                  headers={"Authorization": f"Bearer {READ_TOKEN}"})
    assert status == 400 and b"only with function" in body


def test_one_uploads_flame_graph(col: Collector) -> None:
    auth = {"Authorization": f"Bearer {READ_TOKEN}"}
    status, headers, body = col.request("GET", "/v1/traces/u03/flame", headers=auth)
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert "frame-ancestors 'self'" in headers["content-security-policy"]
    page = body.decode()
    assert "upload u03" in page and "<img src=x" not in page  # the name is data, escaped
    assert col.request("GET", "/v1/traces/u03/flame")[0] == 401
    status, _, body = col.request("GET", "/v1/traces/nope/flame", headers=auth)
    assert status == 404 and orjson.loads(body)["error"] == "no upload with id 'nope'"
    # It reads no query parameter: one it was given is refused, not ignored.
    status, _, body = col.request("GET", "/v1/traces/u03/flame?format=svg", headers=auth)
    assert status == 400, body
    assert orjson.loads(body)["error"].startswith(
        "query parameter 'format': not one /v1/traces/{id}/flame reads (none)")


def test_a_served_svg_runs_its_own_script_and_no_other(chromium: Any, col: Collector) -> None:
    # An SVG has no <meta> for a policy: the collector sends the file's own (its script by
    # hash, no network) as a header, or any script in an SVG ran on the dashboard's origin.
    from browser_util import page_server

    auth = {"Authorization": f"Bearer {READ_TOKEN}"}
    status, headers, body = col.request("GET", "/v1/query/flame?app=shop&format=svg",
                                        headers=auth, timeout=120)
    assert status == 200 and headers["content-type"].startswith("image/svg+xml")
    csp = headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src 'sha256-" in csp, csp
    assert "frame-ancestors 'self'" in csp
    assert b"&lt;img src=x" in body  # the hostile name is text
    # A script the file does not own (as an escaping slip would let in) does not run, its
    # own one does: the same bytes and headers, one script element added, from loopback.
    evil = body.replace(b"</svg>", b"<script>document.documentElement.setAttribute("
                        b"'data-pwned','1')</script></svg>")
    served = {k: v for k, v in headers.items() if k == "content-security-policy"}
    with fresh_pages(chromium) as browser:
        page = browser.new_page(extra_http_headers=auth)
        page.goto(col.url + "/v1/query/flame?app=shop&format=svg")
        page.wait_for_selector("svg[data-ready='1']", timeout=20000)
        with page_server(lambda path: (evil, "image/svg+xml", served)) as origin:
            page = browser.new_page()
            page.goto(origin + "/f.svg")
            page.wait_for_selector("svg[data-ready='1']", timeout=20000)
            assert page.evaluate("document.documentElement.getAttribute('data-pwned')") is None


def test_the_fleet_pages_views_keep_hostile_names_as_text(chromium: Any, col: Collector) -> None:
    # The merged page's Time, Sandwich and Source views (fleet lanes, example uploads,
    # sourcesContent text) with a function named as markup and a route as a script.
    from urllib.parse import quote

    auth = {"Authorization": f"Bearer {READ_TOKEN}"}
    base = col.url + "/v1/query/flame?app=shop"
    with fresh_pages(chromium) as browser:
        page = browser.new_page(extra_http_headers=auth)
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        for h in ("view=time", "view=sandwich&fn=" + quote(HOSTILE),
                  "view=source&fn=" + quote(HOSTILE), "q=" + quote(HOSTILE[:12])):
            page.goto("about:blank")
            page.goto(base + "#" + h)
            page.wait_for_selector("body[data-ready='1']", timeout=60000)
            view = h.split("&")[0].split("=")[1] if h.startswith("view") else "flame"
            page.wait_for_selector(f"body[data-view='{view}']", timeout=20000)
            assert page.evaluate("document.images.length") == 0, h
            # the page's own code only (a <script> per viewer module): none made of a name
            assert page.evaluate(
                "[...document.querySelectorAll('script:not([type])')]"
                ".filter(s => s.text.includes('pwned')).length") == 0, h
            assert "pwned" not in page.title(), h
            if view != "flame":
                assert HOSTILE in page.locator(f"#v-{view}").text_content(), h
        assert errors == []


def test_dashboard_regressions_uploads_and_example_flames(chromium: Any, col: Collector,
                                                          tmp_path: Path) -> None:
    from playwright.sync_api import expect

    shots = Path(SHOTS) if SHOTS else tmp_path
    expected = _api(col, "/v1/query/regressions", app="shop")["regressions"]
    assert [r["name"] for r in expected] == [HOSTILE]
    with fresh_pages(chromium) as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        dialogs: list[str] = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        csp: list[str] = []
        page.on("console", lambda m: csp.append(m.text)
                if "Content Security Policy" in m.text else None)
        signed_in(page, col.url)

        # The regressions list: the planted one, its name as text, its examples.
        rows = page.locator("#regressions tbody tr")
        expect(rows).to_have_count(1, timeout=60000)
        assert rows.locator("td.fn").text_content() == HOSTILE
        assert "1.10.0 (after 1.9.0)" in rows.text_content()
        # By how much: ms per page load before -> after, the change in ms and %, and the
        # intervals, as the document has them.
        r0 = expected[0]
        cells = rows.locator("td").all_text_contents()
        assert cells[3] == f"{r0['beforeMsPerLoad']:.1f} → {r0['afterMsPerLoad']:.1f} ms"
        assert cells[4] == f"+{r0['changeMsPerLoad']:.1f} ms (+{r0['changePct']:.0f}%)"
        lo, hi = r0["changeMsCi"]
        plo, phi = r0["changePctCi"]
        assert cells[5] == f"+{lo:.1f} to +{hi:.1f} ms\n+{plo:.0f}% to +{phi:.0f}%", cells
        assert "Intervals at " in page.locator("#regressions-note").text_content()
        links = rows.locator("a.upload")
        assert links.all_text_contents() == expected[0]["exampleIds"]
        page.screenshot(path=str(shots / "regressions.png"), full_page=True)
        # Its elided columns keep the page as wide as the window (it was 1,355 px in
        # a 1,280 px window, the examples off screen).
        assert page.evaluate("document.documentElement.scrollWidth") <= 1280
        # An example opens in the flame graph: that upload's, with the function in it.
        links.first.click()
        expect(page.locator("#upload-flame-id")).to_have_text(expected[0]["exampleIds"][0])
        frame = page.frame_locator("#upload-flame")
        frame.locator("#fg-canvas[data-ready]").wait_for(timeout=60000)
        # The hostile name is drawn (canvas text: never markup) and worded as text.
        drawn = frame.locator("#fg-canvas").evaluate("() => jsprofFrames()")
        assert any(f["name"] == HOSTILE for f in drawn), [f["name"] for f in drawn]
        page.screenshot(path=str(shots / "example-flame.png"), full_page=True)

        # By day: none (the releases are spread over every day), said in a sentence.
        page.select_option("#reg-by", "day")
        expect(page.locator("#regressions tbody tr.sentence")).to_have_text(
            "No rise of more than 10% found in a function's self time per page load over "
            "4 days (2026-11-26 to 2026-11-29).", timeout=60000)
        # ... and what the last pair's page loads could not have seen (issue 34): the
        # document's rises, its three largest named functions
        u = _api(col, "/v1/query/regressions", app="shop", by="day")["unseen"][-1]
        fns = [f for f in u["functions"] if f["resource"] and f["name"]][:3]
        rises = ", ".join(f"{f['label']} under +{math.floor(f['minRisePct'] + 0.5)}%"
                          if f["minRisePct"] is not None else f"{f['label']} of any size"
                          for f in fns)
        assert fns and u["day"] == "2026-11-29"
        expect(page.locator("#regressions-note")).to_have_text(
            f"At 2026-11-29 (after 2026-11-28; {u['beforePageLoads']} → "
            f"{u['afterPageLoads']} page loads) rises in {rises} are more often missed "
            "than found: more page loads see smaller ones.")

        # The uploads list: 48 uploads, 20 a page, newest first; the cursor pages on.
        ids = page.locator("#uploads tbody a.upload")
        expect(ids).to_have_count(20, timeout=60000)
        assert ids.first.text_content() == "u47"
        assert HOSTILE_ROUTE in page.locator("#uploads td.route").all_text_contents()
        page.click("#uploads-next")
        expect(ids.first).to_have_text("u27", timeout=60000)
        page.click("#uploads-next")
        expect(ids).to_have_count(8, timeout=60000)
        assert page.locator("#uploads-next").is_hidden()
        page.click("#uploads-first")
        expect(ids.first).to_have_text("u47", timeout=60000)
        page.screenshot(path=str(shots / "uploads.png"), full_page=True)
        # Filtered by release from the header.
        page.select_option("#release", "1.10.0")
        page.click("#apply")
        expect(ids.first).to_have_text("u46", timeout=60000)
        assert ids.count() == 16
        page.select_option("#release", "")
        page.click("#apply")
        expect(ids).to_have_count(20, timeout=60000)

        # From a top-table row: the uploads that run the function, each a link.
        top_row = page.locator("#top tbody tr", has=page.locator("td.fn",
                                                                   has_text=HOSTILE))
        top_row.locator("button.link").click()
        expect(page.locator("#uploads-what")).to_have_text(f"that run {HOSTILE}",
                                                           timeout=60000)
        want = [u["id"] for u in _api(col, "/v1/traces", app="shop", limit="20",
                                      function=HOSTILE)["uploads"]]
        expect(ids).to_have_text(want, timeout=60000)
        assert "u46" not in ids.all_text_contents()
        page.locator("#uploads tbody button.link").nth(1).click()
        expect(page.locator("#upload-flame-id")).to_have_text(want[1])
        page.screenshot(path=str(shots / "function-uploads.png"), full_page=True)
        page.click("#uploads-all")
        expect(page.locator("#uploads-what")).to_have_text("", timeout=60000)

        # A filter matching nothing: sentences where the results would be, no JSON.
        page.fill("#route", "/nope*")
        page.click("#apply")
        sentence = page.locator("#regressions tbody tr.sentence")
        expect(sentence).to_contain_text("matches no route", timeout=60000)
        assert sentence.text_content().startswith("Regressions could not be computed: ")
        expect(page.locator("#uploads tbody tr.sentence")).to_have_text(
            "No uploads match these filters.", timeout=60000)
        expect(page.locator("#top tbody tr.sentence")).to_contain_text(
            "Top functions could not be computed: route '/nope*' matches no route")
        assert page.locator("#flame").is_hidden()
        assert page.locator("#flame-note").text_content() == "No flame graph for these filters."
        expect(page.locator("#chart p.note")).to_have_text("No uploads match these filters.")
        assert page.locator("#chart svg").count() == 0
        # The release diff under these filters: a sentence in its table, no frame.
        page.select_option("#base", "1.9.0")
        page.select_option("#new", "1.10.0")
        page.click("#diff-run")
        expect(page.locator("#diff tbody tr.sentence")).to_contain_text(
            "The releases could not be compared: ", timeout=60000)
        assert page.locator("#diff-flame").is_hidden()
        page.screenshot(path=str(shots / "errors.png"), full_page=True)
        text = page.locator("main").text_content()
        assert '{"error"' not in text and "{" not in page.locator("#status").text_content()

        assert page.evaluate("document.documentElement.scrollWidth") <= page.evaluate(
            "window.innerWidth"), "the dashboard is wider than the window"
        assert page.title() != "pwned" and dialogs == [] and csp == [], csp
        assert page.locator("main img").count() == 0



def test_dashboard_diff_minimum_evidence(chromium: Any, col: Collector, tmp_path: Path) -> None:
    # The release diff's minimum evidence (min_traces, min_samples) is set on the page and
    # reaches the query: 16 page loads a release pass 16 and fail 17, in a sentence (it counts
    # page loads, and the box says so: "Min page loads"); a bad
    # value is a sentence naming the field, and the route answers it with a 400 JSON.
    from playwright.sync_api import expect

    auth = {"Authorization": f"Bearer {READ_TOKEN}"}
    q = "/v1/query/diff?app=shop&base=release%3D1.9.0&new=release%3D1.10.0"
    for extra, said in (("&min_traces=abc", "query parameter min_traces: expected a whole"),
                        ("&min_traces=0", "query parameter min_traces: must be at least 1"),
                        ("&min_samples=1e3", "query parameter min_samples: expected a whole"),
                        ("&min_traces=17", "each side needs at least 17 page loads")):
        status, headers, body = col.request("GET", q + extra, headers=auth)
        assert status == 400 and headers["content-type"] == "application/json", extra
        assert said in orjson.loads(body)["error"], (extra, body)
    samples = _api(col, "/v1/query/diff", app="shop", base="release=1.9.0",
                   new="release=1.10.0", min_traces="16")["base"]["samples"]

    shots = Path(SHOTS) if SHOTS else tmp_path
    with fresh_pages(chromium) as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        signed_in(page, col.url)
        assert page.input_value("#diff-min-traces") == "5"
        label = page.locator("label", has=page.locator("#diff-min-traces"))
        assert label.inner_text().strip() == "Min page loads", label.inner_text()
        assert "page loads" in label.get_attribute("title")
        assert page.input_value("#diff-min-samples") == "1000"
        page.select_option("#base", "1.9.0")
        page.select_option("#new", "1.10.0")
        rows = page.locator("#diff tbody tr")
        sentence = page.locator("#diff tbody tr.sentence")

        page.fill("#diff-min-traces", "16")
        page.click("#diff-run")
        expect(page.locator("#diff tbody td.fn", has_text=HOSTILE)).to_have_count(
            1, timeout=60000)
        assert sentence.count() == 0
        # By how much, relatively too: the row's self share change in %, as --json has it;
        # the rows in the document's order (the surest change first).
        doc = _api(col, "/v1/query/diff", app="shop", base="release=1.9.0",
                   new="release=1.10.0", min_traces="16", top="25")
        shown = page.locator("#diff tbody td.rel").all_text_contents()
        want = ["new" if r["status"] == "new" else "" if not (r["baseSelfPct"] or
                r["newSelfPct"]) else f"{r['selfRelPct']:+.0f}%" for r in doc["rows"]]
        assert shown == want and any(x.startswith("+") for x in want), (shown, want)
        src = page.get_attribute("#diff-flame", "src")
        assert "min_traces=16" in src and "min_samples=1000" in src, src
        page.screenshot(path=str(shots / "diff-evidence.png"), full_page=True)

        page.fill("#diff-min-traces", "17")
        page.click("#diff-run")
        expect(sentence).to_contain_text("each side needs at least 17 page loads",
                                         timeout=60000)
        assert rows.count() == 1 and page.locator("#diff-flame").is_hidden()
        page.fill("#diff-min-traces", "16")
        page.fill("#diff-min-samples", str(samples + 1))
        page.click("#diff-run")
        expect(sentence).to_contain_text(
            f"each side needs at least 16 page loads and {samples + 1} samples (widen "
            "the filters, wait for more uploads, or lower Min page loads/Min samples)",
            timeout=60000)
        for bad in ("abc", "0", "-3", "2.5"):
            page.fill("#diff-min-traces", bad)
            page.click("#diff-run")
            expect(sentence).to_have_text(
                f"The releases could not be compared: Min page loads is “{bad}”; enter a "
                "whole number, 1 or more.", timeout=60000)
        page.fill("#diff-min-traces", "5")
        page.fill("#diff-min-samples", "<b>x</b>")
        page.click("#diff-run")
        expect(sentence).to_contain_text("Min samples is “<b>x</b>”", timeout=60000)
        assert page.locator("#diff b").count() == 0
        page.screenshot(path=str(shots / "diff-evidence-error.png"), full_page=True)
        assert '{"error"' not in page.locator("main").text_content()


def test_dashboard_regressions_minimum_evidence_in_its_words(chromium: Any, col: Collector) -> None:
    # The regressions' pairs without enough evidence are skipped with the server's reason,
    # which names the command line's --min-traces/--min-samples; on the dashboard the
    # boxes are "Min page loads"/"Min samples", beside the table, and they reach the query.
    # 16 page loads a release: 17 skips the one pair, 16 finds the planted regression.
    from playwright.sync_api import expect

    with fresh_pages(chromium) as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        signed_in(page, col.url)
        rows = page.locator("#regressions tbody tr")
        expect(rows).to_have_count(1, timeout=60000)
        label = page.locator("label", has=page.locator("#reg-min-traces"))
        assert label.inner_text().strip() == "Min page loads", label.inner_text()
        assert page.input_value("#reg-min-traces") == "5"

        page.fill("#reg-min-traces", "17")
        page.click("#reg-run")
        note = page.locator("#regressions-note")
        expect(note).to_contain_text("1.9.0 → 1.10.0 not compared: ", timeout=60000)
        said = note.text_content()
        assert "each side needs at least 17 page loads" in said, said
        assert "or lower Min page loads/Min samples)" in said, said
        assert "--min" not in said
        expect(page.locator("#regressions tbody tr.sentence")).to_have_text(
            "Nothing compared over 3 releases (1.9.0 to 1.11.0): no release had enough "
            "evidence beside the one before (see below).")

        page.fill("#reg-min-traces", "16")
        page.click("#reg-run")
        expect(rows.locator("td.fn")).to_have_text([HOSTILE], timeout=60000)
        assert "1.9.0 → 1.10.0" not in note.text_content()
        page.fill("#reg-min-samples", "0")
        page.click("#reg-run")
        expect(page.locator("#regressions tbody tr.sentence")).to_have_text(
            "Regressions could not be computed: Min samples is “0”; enter a whole "
            "number, 1 or more.", timeout=60000)


def test_a_refresh_answers_the_filters_it_started_with(chromium: Any, col: Collector) -> None:
    # A refresh loads its sections one after another (seconds on a large store). A release
    # picked meanwhile, not applied, was read by the later sections (top, regressions,
    # uploads) while the vitals above them had the filters applied: a field try showed
    # every release's vitals and interactions beside release 1.0.2's top table. The pick
    # is made here at the moment the vitals are asked for (the page's fetch wrapped).
    from playwright.sync_api import expect

    with fresh_pages(chromium) as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        signed_in(page, col.url)
        ids = page.locator("#uploads tbody a.upload")
        expect(ids).to_have_count(20, timeout=60000)
        page.evaluate("""() => {
          const f = window.fetch;
          window.fetch = function (url, opts) {
            if (String(url).includes("/v1/query/vitals") && !window.picked) {
              window.picked = true;
              document.getElementById("release").value = "1.10.0";
            }
            return f.call(this, url, opts);
          };
        }""")
        page.click("#apply")  # every release, as the controls say when it is clicked
        expect(page.locator("body")).to_have_attribute("aria-busy", "false", timeout=60000)
        assert page.evaluate("window.picked") is True
        # Every section of that refresh: all releases (1.10.0 alone has 16 uploads, the
        # newest u46), the vitals of each.
        expect(ids).to_have_count(20, timeout=60000)
        assert ids.first.text_content() == "u47"
        vitals = page.locator("#vitals tbody").inner_text()
        assert "1.9.0" in vitals and "1.11.0" in vitals, vitals
        # Applied, the pick is every section's.
        page.click("#apply")
        expect(ids).to_have_count(16, timeout=60000)
        assert ids.first.text_content() == "u46"
        expect(page.locator("#vitals tbody")).not_to_contain_text("1.9.0", timeout=60000)
