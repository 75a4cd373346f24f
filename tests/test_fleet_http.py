"""The fleet over HTTP: a real `jsprof serve` on loopback takes uploads, answers the query
API with the read token, and its dashboard works in real headless Chromium."""

from __future__ import annotations

import http.client
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import numpy as np
import orjson
import pytest

from browser_util import fresh_pages, playwright_chromium
from fleet_util import make_trace
from jsprof.cli import main
from jsprof.formats.jsprof import trace_to_doc
from jsprof.trace import TraceBuilder, anonymous_label

JSPROF = Path(sys.executable).parent / "jsprof"
TOKEN = "read-tok-123"
ADMIN = "admin-tok-456"
HOSTILE = '<img src=x onerror="document.title=\'pwned\'">'
HOSTILE_URL = 'https://evil.example/"><script>document.title="pwned"</script>.js'
LONG = "N" * 1024  # the longest name the collector keeps whole


class Server:
    def __init__(self, store: Path, *extra: str) -> None:
        env = {k: v for k, v in os.environ.items() if k != "JSPROF_READ_TOKEN"}
        self.proc = subprocess.Popen(
            [str(JSPROF), "serve", "--store", str(store), "--port", "0", "--app", "shop:k1",
             "--read-token", TOKEN, "--admin-token", ADMIN, *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
        )
        line = self.proc.stdout.readline().decode()
        if not line.startswith("jsprof serve: listening on "):
            self.proc.kill()
            raise AssertionError(f"{line!r}: {self.proc.stderr.read().decode()}")
        self.url = line.rsplit(" ", 1)[1].strip()
        u = urlsplit(self.url)
        self.host, self.port = u.hostname, u.port
        self.err: list[bytes] = []
        threading.Thread(target=lambda: self.err.extend(self.proc.stderr), daemon=True).start()

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict | None = None) -> tuple[int, dict, bytes]:
        c = http.client.HTTPConnection(self.host, self.port, timeout=120)
        try:
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            c.close()

    def get(self, path: str, params: list, token: str | None = TOKEN) -> tuple[int, dict, bytes]:
        h = {"Authorization": f"Bearer {token}"} if token else {}
        return self.request("GET", f"{path}?{urlencode(params)}", headers=h)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(15)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """One Playwright Chromium for the module's tests, each taking its pages through
    fresh_pages (a launch and close per test was ~2 s of each)."""
    with playwright_chromium() as b:
        yield b


def _hostile_trace(rng: np.random.Generator) -> object:
    b = TraceBuilder()
    r = b.resource_id(HOSTILE_URL)
    main_f = b.frame_id("main", r, 1, 1)
    bad = b.frame_id(HOSTILE, r, 2, 1)
    anon = b.frame_id("", r, 7, 3)
    long = b.frame_id(LONG, r, 9, 1)
    s1 = b.stack_id([main_f, bad])
    s0 = b.stack_id([main_f])
    s2 = b.stack_id([main_f, anon])
    s3 = b.stack_id([main_f, long])
    t = np.cumsum(rng.uniform(8, 12, 400))
    for i, ti in enumerate(t.tolist()):
        b.add_sample(ti, s2 if i % 5 == 1 else s3 if i % 5 == 3 else s1 if i % 3 else s0)
    return b.build()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    store = tmp_path_factory.mktemp("http") / "store"
    srv = Server(store)
    rng = np.random.default_rng(21)
    for rel, hot in (("1.0", None), ("1.1", "slowThing")):
        for i in range(6):
            tr = make_trace(rng, 500, hot=hot, hot_share=0.2)
            body = orjson.dumps({"trace": trace_to_doc(tr), "meta": {"sampleInterval": 10}})
            q = urlencode({"app": "shop", "release": rel, "route": f"/p/{i % 2}", "env": "prod",
                           "id": f"{rel}-{i}", "key": "k1"})
            status, _, data = srv.request("POST", f"/v1/traces?{q}", body,
                                          {"Content-Type": "application/json"})
            assert status == 202, data
    body = orjson.dumps(trace_to_doc(_hostile_trace(rng)))
    q = urlencode({"app": "shop", "release": "1.1", "route": "/p/0", "id": "evil", "key": "k1"})
    assert srv.request("POST", f"/v1/traces?{q}", body,
                       {"Content-Type": "application/json"})[0] == 202
    srv.store = store
    yield srv
    srv.stop()


def test_query_api_needs_the_read_token_and_matches_the_cli(server, capsys, monkeypatch):
    status, h, body = server.get("/v1/query/top", [("app", "shop")], token=None)
    assert status == 401 and orjson.loads(body)["error"]
    status, h, body = server.get("/v1/query/top", [("app", "shop")], token="wrong")
    assert status == 401
    status, h, body = server.get("/v1/query/top", [("release", "1.0")])
    assert status == 400 and "app" in orjson.loads(body)["error"]
    status, h, body = server.get("/v1/query/top", [("app", "shop"), ("top", "all")])
    assert status == 200 and h["content-type"].startswith("application/json")
    doc = orjson.loads(body)
    assert doc["traces"] == 13
    names = {r["name"] for r in doc["rows"]}
    assert HOSTILE in names and "slowThing" in names
    # The CLI with --url asks the server; with --store it reads the same store itself.
    monkeypatch.setenv("JSPROF_READ_TOKEN", TOKEN)
    assert main(["fleet", "top", "--url", server.url, "--app", "shop", "--json", "--all"]) == 0
    remote = orjson.loads(capsys.readouterr().out)
    assert main(["fleet", "top", "--store", str(server.store), "--app", "shop", "--json",
                 "--all"]) == 0
    assert orjson.loads(capsys.readouterr().out) == remote == doc
    # HTML: the hostile name is text.
    status, h, body = server.get("/v1/query/top", [("app", "shop"), ("format", "html")])
    page = body.decode()
    assert status == 200 and "default-src 'none'" in h["content-security-policy"]
    assert "<img src=x" not in page and "&lt;img src=x" in page
    assert "<script>document" not in page


def test_flame_diff_export_and_sourcemaps_over_http(server, tmp_path, capsys, monkeypatch):
    status, h, body = server.get("/v1/query/flame", [("app", "shop"), ("max_nodes", "50")])
    assert status == 200 and h["content-type"].startswith("text/html")
    assert "<img src=x" not in body.decode()
    # The Time view's example uploads link to their own pages on this collector, and each
    # link answers with that upload's viewer (real sample times: its own Time view).
    model = orjson.loads(re.search(rb'id="fg-model">(.*?)</script>', body, re.S).group(1))
    examples = model["fleetTime"]["examples"]
    assert examples and all(x["href"] == f"/v1/traces/{x['id']}/flame" for x in examples)
    st, _, one = server.get(examples[0]["href"], [])
    assert st == 200 and b'data-tab="time"' in one
    monkeypatch.setenv("JSPROF_READ_TOKEN", TOKEN)
    base = ["fleet", "diff", "--url", server.url, "--app", "shop", "--base", "release=1.0",
            "--new", "release=1.1"]
    out = tmp_path / "d.html"
    assert main(base + ["--fail-if", "slowThing:self>+5pp", "--flame", str(out)]) == 1
    assert "breaks --fail-if" in capsys.readouterr().err
    assert "larger self share than base" in out.read_text()
    assert main(base + ["--min-traces", "50"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "at least 50 page loads" in err
    exp = tmp_path / "all.speedscope.json"
    assert main(["fleet", "export", "--url", server.url, "--app", "shop", "-o", str(exp)]) == 0
    assert exp.stat().st_size > 100
    # Source maps are a write: the read token is not enough.
    sm = orjson.dumps({"version": 3, "file": "app.min.js", "sources": ["a.ts"], "names": [],
                       "mappings": "AAAA"})
    q = urlencode({"app": "shop", "release": "1.1", "name": "app.min.js.map"})
    status, _, body = server.request("POST", f"/v1/sourcemaps?{q}", sm,
                                     {"Authorization": f"Bearer {TOKEN}"})
    assert status == 401
    status, _, body = server.request("POST", f"/v1/sourcemaps?{q}", sm,
                                     {"Authorization": f"Bearer {ADMIN}"})
    assert status == 201 and orjson.loads(body)["stored"] == "app.min.js.map"
    status, _, body = server.request("POST", f"/v1/sourcemaps?{q}", b'{"version": 1}',
                                     {"Authorization": f"Bearer {ADMIN}"})
    assert status == 400 and "version 3" in orjson.loads(body)["error"]
    mp = tmp_path / "vendor.js.map"
    mp.write_bytes(sm.replace(b"app.min.js", b"vendor.js"))
    monkeypatch.setenv("JSPROF_ADMIN_TOKEN", ADMIN)
    assert main(["fleet", "sourcemaps", "upload", "--url", server.url, "--app", "shop",
                 "--release", "1.1", str(mp)]) == 0
    assert "stored vendor.js.map" in capsys.readouterr().err
    status, _, body = server.get("/v1/query/diff", [("app", "shop"), ("base", "release=1.0"),
                                                    ("new", "release=1.1"),
                                                    ("resamples", "100000")])
    assert status == 400 and "at most 5,000" in orjson.loads(body)["error"]


def test_series_by_day_and_by_release_over_http(server):
    # by day: one scan of the weights whatever the days (tests/test_fleet_resample.py)
    rows = {}
    for by in ("day", "release"):
        status, _, body = server.get("/v1/query/series", [("app", "shop"), ("by", by),
                                                           ("function", "slowThing")])
        assert status == 200, body
        rows[by] = orjson.loads(body)["points"]
    day, rel = rows["day"], rows["release"]
    assert sum(p["traces"] for p in day) == 13 and [p["label"] for p in rel] == ["1.0", "1.1"]
    assert sum(p["totalMs"] for p in day) == pytest.approx(sum(p["totalMs"] for p in rel),
                                                           abs=0.01)
    if len(day) == 1:  # one UTC day (all but a run across midnight): all of it
        both = sum(p["totalMs"] for p in rel)
        assert day[0]["selfPct"] == pytest.approx(
            sum(p["selfPct"] * p["totalMs"] for p in rel) / both, abs=0.01)


def test_dashboard_in_chromium(chromium: Any, server):
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import expect

    with fresh_pages(chromium) as browser:
        page = browser.new_page()
        dialogs: list[str] = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        csp_errors: list[str] = []
        page.on("console", lambda m: csp_errors.append(m.text)
                if "Content Security Policy" in m.text else None)
        # Every console line and uncaught error of the page and its frames, said if the
        # sandwich rows never come (issue 37: once in 60 s, not reproduced).
        console: list[str] = []
        page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
        page.on("pageerror", lambda e: console.append(f"pageerror: {e}"))
        page.on("framenavigated", lambda f: console.append(f"navigated: {f.url[:160]}"))
        page.goto(server.url + "/")
        # Not signed in: the form, and no data.
        assert page.locator("#token").count() == 1
        page.fill("#token", "wrong")
        page.click("#signin")
        assert "Wrong token" in page.content()
        page.fill("#token", TOKEN)
        page.click("#signin")
        page.wait_for_selector("body[data-ready='1']", timeout=60000)
        assert TOKEN not in page.url
        cookies = page.context.cookies()
        # A signed, expiring session, never the token itself.
        c = next(c for c in cookies if c["name"] == "jsprof_session")
        assert TOKEN not in c["value"] and all(TOKEN not in x["value"] for x in cookies)
        assert c["httpOnly"] and c["sameSite"] == "Strict"
        assert time.time() < c["expires"] < time.time() + 13 * 3600
        assert page.evaluate("document.cookie") == ""
        # The top table shows every upload's functions; the hostile name is text.
        rows = page.locator("#top tbody tr")
        assert rows.count() > 5
        fn_cells = page.locator("#top td.fn").all_text_contents()
        assert HOSTILE in fn_cells
        # An anonymous function is labelled as every other output labels it.
        assert anonymous_label(HOSTILE_URL, 7) in fn_cells and "(anonymous)" not in fn_cells
        # A 1,024-character name is elided in its cell, whole on hover: the page stays
        # as wide as the window (it was 10,000 px wide, every location off screen).
        assert LONG in fn_cells
        assert page.locator("#top td.fn", has_text=LONG).get_attribute("title") == LONG
        assert page.evaluate("document.documentElement.scrollWidth") <= page.evaluate(
            "window.innerWidth"), "the dashboard is wider than the window"
        assert page.locator("#top img").count() == 0
        assert page.title() != "pwned"
        assert "13 traces" in page.locator("#top-summary").text_content()
        # Filters: one release.
        page.select_option("#release", "1.0")
        page.click("#apply")
        # (wait_for_function would evaluate a string: the page's CSP forbids that)
        expect(page.locator("#top-summary")).to_have_text(re.compile("^6 traces"),
                                                          timeout=60000)
        assert "slowThing" not in page.locator("#top td.fn").all_text_contents()
        # The merged flame graph of the filtered selection draws in its frame. The first
        # load's frame is replaced after the table: waiting on "a drawn frame" could catch
        # the old document just before it went, and count none a moment later.
        deadline = time.monotonic() + 60
        while True:
            drawn = next((f for f in page.frames if "/v1/query/flame" in f.url
                          and "release=1.0" in f.url), None)
            if drawn is not None and _drawn_frames(drawn) > 5:
                break
            assert time.monotonic() < deadline, [f.url for f in page.frames]
            page.wait_for_timeout(100)  # (time.sleep would hold Playwright's events)
        # The uploads above the frame get this release's rows (6 for 13) after its src is
        # set: until the dashboard says it is done (aria-busy false) and the frame's note
        # is gone, the frame may move (with unchanged data nothing moves now:
        # tests/test_dashboard_layout.py). A click inside it is aimed where the tab was; if
        # the frame moved past the tab, the click lands on the dashboard, Playwright counts
        # it done (the frame never saw it) and the viewer stays on Flame: the 60 s wait for
        # sandwich rows of issue 37. Forced before the tables kept their rows (the uploads'
        # answer held until the frame drew): the tab moved 123 px down, a click where it
        # was left the view on Flame.
        expect(page.locator("body")).to_have_attribute("aria-busy", "false", timeout=60000)
        expect(page.locator("#flame-note")).to_have_text("", timeout=60000)
        frame = page.frame_locator("#flame")
        # It is the viewer `jsprof flame` writes: its sandwich view lists the merged
        # profile's functions as the top table counts them.
        assert frame.locator("nav.tabs a").all_text_contents() == [
            "Flame", "Time", "Sandwich", "Bottom-up", "Call tree", "Source"]
        frame.locator("nav.tabs a[data-tab='sandwich']").click()
        first = frame.locator("#v-sandwich tbody tr").first
        try:
            first.wait_for(timeout=60000)
        except PlaywrightTimeout:
            raise AssertionError(_sandwich_state(page, console)) from None
        top_row = page.locator("#top tbody tr").first.locator("td")
        assert first.locator("td.name").text_content() == top_row.nth(6).text_content()
        assert float(first.locator("td").first.text_content()) == pytest.approx(
            float(top_row.nth(2).text_content().replace(",", "")), abs=0.051)
        # Release diff and the per-release chart.
        page.select_option("#base", "1.0")
        page.select_option("#new", "1.1")
        page.click("#diff-run")
        page.wait_for_selector("#diff tbody tr", timeout=60000)
        assert "slowThing  [new]" in page.locator("#diff tbody").text_content()
        page.locator("#top td.fn", has_text="measure").first.click()
        expect(page.locator("#chart rect")).to_have_count(2, timeout=60000)
        assert page.locator("#chart-fn").text_content() == "measure"
        page.select_option("#chart-by", "day")  # bars per UTC day: labels are dates
        expect(page.locator("#chart text").last).to_contain_text("-", timeout=60000)
        assert dialogs == [] and page.title() != "pwned"
        assert csp_errors == [], csp_errors
        # Sign-out (a same-origin form post with the session's CSRF token) ends it.
        page.click("#signout")
        page.wait_for_selector("#token", timeout=60000)
        assert not any(x["name"] == "jsprof_session" for x in page.context.cookies())


def _until_held(page, held: list, seconds: float, what: str) -> None:
    """Until a route handler has held a request in `held` (Playwright's events run while
    the page waits, not in time.sleep)."""
    deadline = time.monotonic() + seconds
    while not held:
        assert time.monotonic() < deadline, what
        page.wait_for_timeout(50)


def test_the_chart_draws_the_last_asked_for_not_the_last_answered(chromium: Any, server):
    """The dashboard charts the first row's function as the table loads; on a cold
    collector that answer can come after the user has clicked another function and asked
    for it by day. It was drawn over theirs (a full CI run: the chart stayed on releases
    for 60 s after "by day"). Here the first chart's answer is held until the user's own
    are drawn, then let go: the chart stays the user's."""
    from playwright.sync_api import expect

    with fresh_pages(chromium) as browser:
        page = browser.new_page()
        held: list = []

        def hold_first(route) -> None:
            if held:
                route.continue_()
            else:
                held.append(route)

        page.route("**/v1/query/series*", hold_first)
        page.goto(server.url + "/")
        page.fill("#token", TOKEN)
        page.click("#signin")
        page.wait_for_selector("body[data-ready='1']", timeout=60000)
        _until_held(page, held, 60, "the dashboard charted no first row")
        first = held[0].request.url
        # another function than the one charted first (the table's first row of a script)
        names = page.locator("#top tbody tr:not(.idle) td.fn").all_text_contents()
        charted = parse_qs(urlsplit(first).query)["function"][0]
        other = next(n for n in names if n != charted)
        page.locator("#top tbody tr:not(.idle) td.fn", has_text=other).first.click()
        expect(page.locator("#chart rect").first).to_be_visible(timeout=60000)
        page.select_option("#chart-by", "day")
        expect(page.locator("#chart text").last).to_contain_text("-", timeout=60000)
        day_chart = page.locator("#chart").inner_html()
        with page.expect_response(lambda r: r.url == first, timeout=60000):
            held[0].continue_()
        page.wait_for_timeout(500)  # the late answer's handler has run by then
        assert page.locator("#chart-fn").text_content() == other
        assert page.locator("#chart").inner_html() == day_chart


def _sandwich_state(page, console: list[str]) -> str:
    """What a missing sandwich table needs said: every frame's URL, the flame frame's hash,
    view, tabs, sandwich section and drawn frames, and the console of page and frames."""
    from playwright.sync_api import Error

    lines = ["no #v-sandwich rows in 60 s", "frames: " + repr([f.url[:160] for f in page.frames])]
    for f in page.frames:
        if "/v1/query/flame" not in f.url:
            continue
        try:
            lines.append("flame frame: " + repr(f.evaluate("""() => {
              const s = document.getElementById('v-sandwich');
              const c = document.getElementById('fg-canvas');
              return {hash: location.hash, readyState: document.readyState,
                view: document.body.getAttribute('data-view'),
                tabs: [...document.querySelectorAll('nav.tabs a')].map(
                  (a) => [a.dataset.tab, a.className, a.getAttribute('href')]),
                sandwich: s && {hidden: s.hidden, rows: s.querySelectorAll('tbody tr').length,
                  html: s.innerHTML.slice(0, 400)},
                frames: c && c.dataset.frames};
            }""")))
        except Error as e:
            lines.append(f"flame frame {f.url[:80]}: {e}")
    lines.append("iframe #flame src: " + repr(page.evaluate(
        "() => document.getElementById('flame').getAttribute('src')")))
    lines += ["console:", *console[-60:]]
    return "\n".join(lines)


def _drawn_frames(frame) -> int:
    """The frames the flame viewer in `frame` draws (0 while it loads, or if it went)."""
    from playwright.sync_api import Error

    try:
        return int(frame.evaluate(
            "() => +((document.getElementById('fg-canvas') || {dataset: {}}).dataset.frames || 0)"))
    except Error:  # the frame navigated away meanwhile
        return 0


def test_dashboard_says_it_is_loading_until_the_answers_come(chromium: Any, server):
    """The first load's tables are empty for seconds on a large store: a sentence says
    the answers are coming, and goes once they are drawn; the flame frame says so too."""
    from playwright.sync_api import expect

    with fresh_pages(chromium) as browser:
        page = browser.new_page()
        held: list = []
        # Hold the first query's answer: the page is as a slow store leaves it.
        page.route("**/v1/query/options*", lambda route: held.append(route))
        page.goto(server.url + "/")
        page.fill("#token", TOKEN)
        page.click("#signin")
        page.wait_for_selector("#top", timeout=60000)
        _until_held(page, held, 30, "the dashboard asked for no options")
        note = page.locator("#loading")
        expect(note).to_be_visible()
        assert note.text_content().startswith("Loading the field profiles")
        assert page.locator("#top tbody tr").count() == 0
        held.pop().continue_()
        page.unroute("**/v1/query/options*")
        page.wait_for_selector("body[data-ready='1']", timeout=60000)
        expect(note).to_be_hidden()
        assert page.locator("#top tbody tr").count() > 5
        assert page.get_attribute("body", "aria-busy") == "false"
        # The merged flame graph's note goes once its frame has loaded.
        expect(page.locator("#flame-note")).to_have_text("", timeout=60000)


def test_a_query_reads_at_most_query_new_uploads_and_counts_the_rest(tmp_path):
    """Issue 34: `--query-new-uploads N`: each query reads at most N uploads its worker
    had not read (none compacted here: --compact-every 0), answers with those and counts
    the rest in pendingUploads (JSON) and X-Jsprof-Pending-Uploads (a flame page); the
    next queries read on."""
    srv = Server(tmp_path / "store", "--compact-every", "0", "--query-new-uploads", "2")
    try:
        rng = np.random.default_rng(4)
        for i in range(5):
            body = orjson.dumps({"trace": trace_to_doc(make_trace(rng, 100)),
                                 "meta": {"sampleInterval": 10}})
            q = urlencode({"app": "shop", "release": "1.0", "id": f"u{i}", "key": "k1"})
            assert srv.request("POST", f"/v1/traces?{q}", body,
                               {"Content-Type": "application/json"})[0] == 202
        seen = []
        for _ in range(2):
            status, _, data = srv.get("/v1/query/top", [("app", "shop")])
            assert status == 200, data
            doc = orjson.loads(data)
            seen.append((doc["traces"], doc["pendingUploads"]))
        status, headers, _ = srv.get("/v1/query/flame", [("app", "shop")])
        assert status == 200
        seen.append(int(headers["x-jsprof-pending-uploads"]))
        assert seen == [(2, 3), (4, 1), 0]
    finally:
        srv.stop()


def test_dashboard_says_how_many_uploads_it_has_not_read_yet(chromium: Any, server):
    """The top-functions line says when a query left uploads for the next ones
    (pendingUploads; the answer here is the server's with that count set)."""
    from playwright.sync_api import expect

    def pending(route) -> None:
        got = route.fetch()
        route.fulfill(response=got, json={**got.json(), "pendingUploads": 7})

    with fresh_pages(chromium) as browser:
        page = browser.new_page()
        page.route("**/v1/query/top*", pending)
        page.goto(server.url + "/")
        page.fill("#token", TOKEN)
        page.click("#signin")
        page.wait_for_selector("body[data-ready='1']", timeout=60000)
        expect(page.locator("#top-summary")).to_contain_text(
            "7 newer uploads not read yet (each refresh reads more)", timeout=60000)
