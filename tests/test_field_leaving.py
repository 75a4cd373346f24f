"""What a page that goes away sends (issue 34): an interaction just before a navigation
must arrive. In real headless Chromium, with the real client and a real `jsprof serve` on
loopback: a click whose handler runs ~200 ms, then the page goes (a link to the next page,
`page.goto`: the browser's own navigation, or the tab closed) a few hundred ms later,
while the piece that holds the click is still running. Profiler.stop() resolves in a task
a page being unloaded may never run, so what the browser gave the page before pagehide
(the click's Event Timing entry) must go in the upload sent at once, not wait for stop().

What is counted is the page's own Event Timing entries (its observer, apart from the
client's) against the interactions the collector's store holds for that page load."""

from __future__ import annotations

import base64
import gzip
import subprocess
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from browser_util import HTML, Response, page_server, playwright_chromium
from jsprof.store import Store
from serve_util import JSPROF, Collector

PAGE = """<!doctype html>
<meta charset="utf-8"><title>leaving</title>
<button id="act">act</button>
<a id="next" href="%(next)s">next page</a>
<script>
// The page's own view of its interactions: what the browser gave it.
window.__et = [];
window.__etObs = new PerformanceObserver((l) => {
  for (const e of l.getEntries()) {
    if (e.interactionId) {
      window.__et.push({name: e.name, id: e.interactionId, start: e.startTime,
                        duration: e.duration});
    }
  }
});
__etObs.observe({type: "event", buffered: true, durationThreshold: 16});
// The bodies of the keepalive requests the page made, as it made them.
window.__sent = [];
const realFetch = window.fetch;
window.fetch = function (url, init) {
  // a chunk prepared before (gzip) as "gz:" and its base64: under load the piece the
  // click fell in may have ended, and the chunk holding it been prepared, before a test
  // hides the page (one gzip body and nothing after it, at load ~20)
  if (init && init.keepalive) {
    const b = init.body;
    __sent.push(typeof b === "string" ? b : b instanceof Uint8Array
      ? "gz:" + btoa(Array.from(b, (c) => String.fromCharCode(c)).join("")) : null);
  }
  return realFetch.apply(this, arguments);
};
let vis = "visible";
window.hide = () => {
  Object.defineProperty(document, "visibilityState", {configurable: true, get: () => vis});
  vis = "hidden";
  document.dispatchEvent(new Event("visibilitychange"));
};
window.__loaf = 0;
window.__loafs = [];
window.__loafObs = new PerformanceObserver((l) => {
  window.__loaf += l.getEntries().length;
  for (const e of l.getEntries()) __loafs.push({start: e.startTime, duration: e.duration});
});
__loafObs.observe({type: "long-animation-frame", buffered: true});
// ?measure=1: when each Profiler was made (after its constructor returned, and when the
// client next touched it: the client's own note of its start lies between), and the
// pagehide as the client's listener saw it (this one runs before it, the test's after).
window.__ctors = [];
if (new URLSearchParams(location.search).get("measure")) {
  const Real = window.Profiler;
  window.Profiler = class extends Real {
    constructor(o) {
      super(o);
      this.__m = {made: performance.now(), touched: null};
      __ctors.push(this.__m);
    }
    addEventListener(...a) {
      if (this.__m.touched === null) this.__m.touched = performance.now();
      return super.addEventListener(...a);
    }
  };
  addEventListener("pagehide", () => { window.__hideBefore = performance.now(); });
}
</script>
<script type="module">
import {startProfiling} from "%(collector)s/v1/client.js";
function actHandlerForJsprof(ms) {
  const end = performance.now() + ms;
  let x = 0;
  while (performance.now() < end) for (let i = 0; i < 2000; i++) x += Math.sqrt(i * x + 1);
  return x;
}
const q = new URLSearchParams(location.search);
window.profiling = startProfiling({
  endpoint: "%(collector)s", app: "shop", key: "k1", release: q.get("release"),
  sampleRate: 1, drainDelayMs: Number(q.get("drain") || 1000),
  firstPieceMs: Number(q.get("first") || 250),
  keepaliveLimit: Number(q.get("keepalive") || 65536),
});
// What Chromium does with a beacon over its budget: refuses it.
if (q.get("nobeacon")) navigator.sendBeacon = () => false;
document.getElementById("act").addEventListener("click", () => actHandlerForJsprof(200));
// `n` long animation frames (a 70 ms task each, a frame apart).
window.longFrames = async (n) => {
  for (let i = 0; i < n; i++) {
    actHandlerForJsprof(70);
    await new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
  }
};
window.ready = true;
</script>
"""
N = 4
NOTES: list[str] = []  # the pages' /note requests (their queries), in order


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with playwright_chromium() as b:
        yield b


@pytest.fixture
def site() -> Iterator[tuple[str, list[str]]]:
    """Pages /leave/K?release=R, each linking to /leave/K+1; the collector's URL is set by
    the test."""
    collector: list[str] = []

    def respond(path: str) -> Response:
        base, _, query = path.partition("?")
        if base == "/note":  # what a page measured, sent as it went away
            NOTES.append(urllib.parse.unquote(query))
            return b"", "text/plain", {}
        if not base.startswith("/leave/"):
            return b"", "text/plain", {}  # the browser's favicon.ico
        k = int(base.rsplit("/", 1)[1])
        body = PAGE % {"collector": collector[0], "next": f"/leave/{k + 1}?{query}"}
        return body.encode(), HTML, {"Document-Policy": "js-profiling"}

    with page_server(respond) as origin:
        yield origin, collector


def _plain(body: str) -> bytes:
    """A keepalive body as the page's fetch wrapper kept it: JSON, or "gz:" and the base64
    of a gzipped chunk."""
    if body.startswith("gz:"):
        return gzip.decompress(base64.b64decode(body[3:]))
    return body.encode()


def _click(page: object) -> tuple[str, list[int]]:
    """Click #act while the piece that will hold it runs, and wait until the page has seen
    the click's Event Timing entry; (pageLoad, the page's interaction ids of its clicks)."""
    page.wait_for_function("window.ready === true", timeout=30000)
    assert page.evaluate("profiling.enabled"), page.evaluate("profiling.reason")
    # The third piece (1 s) has begun: the chunk as prepared holds pieces one and two, and
    # the click falls in the running piece, which goes away with the page.
    page.wait_for_function("profiling.stats.profilers >= 3", timeout=30000)
    page.click("#act")
    page.wait_for_function("__et.some((e) => e.name === 'click')", timeout=30000)
    ids = page.evaluate("[...new Set(__et.filter((e) => e.name === 'click').map((e) => e.id))]")
    return page.evaluate("profiling.pageLoad"), ids


def _stored_clicks(store: Path, release: str) -> dict[str, set[int]]:
    """pageLoad -> the interaction ids on #act its stored timelines hold."""
    out: dict[str, set[int]] = {}
    with Store(store) as s:
        for _, _, meta, _ in s.iter_uploads():
            if meta.get("release") != release:
                continue
            got = out.setdefault(meta.get("pageLoad"), set())
            for e in (meta.get("timeline") or {}).get("interactions", []):
                if e["target"] == "button#act":  # its click, or a part of it (pointerdown)
                    got.add(e["id"])
    return out


def _arrived(store: Path, release: str, truth: dict[str, list[int]],
             seconds: float = 30.0) -> dict[str, set[int]]:
    """The stored clicks once every one the pages saw is stored (or after `seconds`)."""
    deadline = time.monotonic() + seconds
    while True:
        got = _stored_clicks(store, release)
        if all(set(ids) <= got.get(pl, set()) for pl, ids in truth.items()):
            return got
        if time.monotonic() > deadline:
            return got
        time.sleep(0.5)


@pytest.mark.parametrize("how", ["navigation", "goto", "close"])
def test_a_click_just_before_the_page_goes_arrives(site, browser, tmp_path: Path,
                                                   how: str) -> None:
    origin, collector = site
    store = tmp_path / "store"
    col = Collector(store, "--app", "shop:k1", "--allow-origin", f"shop={origin}")
    collector.append(col.url)
    truth: dict[str, list[int]] = {}
    try:
        context = browser.new_context()
        if how in ("navigation", "goto"):
            page = context.new_page()
            page.goto(f"{origin}/leave/0?release={how}")
            for k in range(N):
                pl, ids = _click(page)
                truth[pl] = ids
                if how == "goto":
                    page.goto(f"{origin}/leave/{k + 1}?release={how}")
                else:
                    with page.expect_navigation(url=f"**/leave/{k + 1}?*"):
                        page.click("#next")
            # The last page sends what earlier ones left in the outbox (over budget: none).
            page.wait_for_function("window.ready === true", timeout=30000)
        else:
            # No page after: what arrives is what the closing page sent itself. Playwright's
            # close() gives pagehide alone, no beforeunload (no task runs after it).
            for _ in range(N):
                page = context.new_page()
                page.goto(f"{origin}/leave/0?release={how}&drain=600000")
                pl, ids = _click(page)
                truth[pl] = ids
                page.close()
        got = _arrived(store, how, truth)
        lost = {pl: sorted(set(ids) - got.get(pl, set())) for pl, ids in truth.items()}
        lost = {pl: ids for pl, ids in lost.items() if ids}
        print(f"{how}: {sum(map(len, truth.values()))} clicks seen by the pages, "
              f"{sum(len(got.get(pl, set()) & set(ids)) for pl, ids in truth.items())} stored")
        assert all(truth.values()), truth  # every page saw its click
        assert not lost, lost
        context.close()
    finally:
        col.stop()


def test_the_upload_at_pagehide_is_one_the_page_sends_at_once(site, browser,
                                                             tmp_path: Path) -> None:
    # The click's timeline goes with the page's way out (chunkReason "pagehide" or
    # "beforeunload"), in an upload built in the event's own task: no Profiler.stop(), no
    # gzip awaited. Shown where no later task runs at all: the page's event loop is blocked
    # from pagehide on, so only what the handler itself sent can arrive.
    origin, collector = site
    store = tmp_path / "store"
    col = Collector(store, "--app", "shop:k1", "--allow-origin", f"shop={origin}")
    collector.append(col.url)
    try:
        context = browser.new_context()
        page = context.new_page()
        page.goto(f"{origin}/leave/0?release=blocked&drain=600000")
        pl, ids = _click(page)
        # Added after the client's listener: runs after it, in the same task, and keeps
        # every later task of this page from running (a stop() that resolves, a gzip).
        page.evaluate("addEventListener('pagehide', () => { const end = performance.now() + 3000;"
                      " while (performance.now() < end); })")
        page.close()
        got = _arrived(store, "blocked", {pl: ids})
        assert set(ids) <= got.get(pl, set()), (ids, got)
        context.close()
    finally:
        col.stop()


def _unsampled(store: Path, release: str, pl: str) -> dict[int, dict]:
    """Piece number -> its smallest `timeline.unsampled` report among the stored uploads of
    page load `pl` (as the fleet merges them: the upload that brought its samples says 0)."""
    out: dict[int, dict] = {}
    with Store(store) as s:
        for _, _, meta, _ in s.iter_uploads():
            u = (meta.get("timeline") or {}).get("unsampled")
            if meta.get("release") == release and meta.get("pageLoad") == pl and u:
                if u["piece"] not in out or u["ms"] < out[u["piece"]]["ms"]:
                    out[u["piece"]] = u
    return out


# The page's own measure as it goes (a listener after the client's, so its pagehide), sent
# by a keepalive request to the page's server; then the page's event loop is blocked: no
# later task runs, as when a page is unloaded, so the running piece's stop() never resolves.
MEASURE_AND_BLOCK = """addEventListener('pagehide', () => {
  const after = performance.now();
  const et = __et.slice();
  for (const e of __etObs.takeRecords()) {
    if (e.interactionId) et.push({id: e.interactionId, start: e.startTime, duration: e.duration});
  }
  const lf = __loafs.concat(__loafObs.takeRecords().map(
    (e) => ({start: e.startTime, duration: e.duration})));
  const note = {before: __hideBefore, after, ctors: __ctors, et, lf};
  fetch('/note?' + encodeURIComponent(JSON.stringify(note)), {keepalive: true});
  const end = performance.now() + 3000;
  while (performance.now() < end);
})"""


def test_the_running_piece_at_pagehide_is_counted_as_unsampled(site, browser,
                                                               tmp_path: Path) -> None:
    # A click whose handler runs 200 ms in the running piece, then the page goes (pagehide
    # alone, its event loop blocked from there: the piece's Profiler.stop() never
    # resolves). Its samples never come; the upload sent in the pagehide task counts them:
    # `timeline.unsampled`, the piece's wall clock from its Profiler's start to the
    # pagehide, and the interactions and long frames in it, as the page itself measured
    # them. The fleet says so. Before, nothing did: the samples were lost without a count.
    origin, collector = site
    NOTES.clear()
    store = tmp_path / "store"
    col = Collector(store, "--app", "shop:k1", "--allow-origin", f"shop={origin}")
    collector.append(col.url)
    try:
        context = browser.new_context()
        page = context.new_page()
        page.goto(f"{origin}/leave/0?release=unsampled&measure=1&drain=600000")
        pl, ids = _click(page)
        page.evaluate(MEASURE_AND_BLOCK)
        page.close()
        got = _arrived(store, "unsampled", {pl: ids})
        assert set(ids) <= got.get(pl, set()), (ids, got)
        deadline = time.monotonic() + 30
        while not NOTES and time.monotonic() < deadline:
            time.sleep(0.2)
        note = orjson.loads(NOTES[-1])
        counted = _unsampled(store, "unsampled", pl)
        lost = {k: u for k, u in counted.items() if u["ms"] > 0}
        print(f"unsampled: {counted}, the page made {len(note['ctors'])} Profilers")
        # The piece running at pagehide is the page's last Profiler, and only it is lost.
        assert list(lost) == [len(note["ctors"])], (counted, len(note["ctors"]))
        u = lost[len(note["ctors"])]
        made = note["ctors"][-1]
        # Its start: after the Profiler's constructor returned, before the client next
        # touched it; its end: the pagehide, between the page's listeners around the client's.
        assert made["made"] <= u["start"] <= made["touched"], (made, u)
        end = u["start"] + u["ms"]
        assert note["before"] - 1e-6 <= end <= note["after"] + 1e-6, (note, u)
        assert note["before"] - made["touched"] - 1e-6 <= u["ms"] <= note["after"] - made["made"]

        def over(x: dict) -> bool:
            return x["start"] < end and x["start"] + x["duration"] > u["start"]

        assert u["interactions"] == len({e["id"] for e in note["et"] if over(e)}), (u, note)
        assert u["longFrames"] == sum(map(over, note["lf"])), (u, note)
        # The fleet says it: one page load ended with that much unsampled.
        want = {"unsampledPageLoads": 1, "unsampledMs": round(u["ms"]),
                "unsampledInteractions": u["interactions"],
                "unsampledLongFrames": u["longFrames"]}
        words = f"1 page load ended with {round(u['ms']) / 1000:.1f} s unsampled"
        for cmd in ("vitals", "interactions"):
            args = [str(JSPROF), "fleet", cmd, "--store", str(store), "--app", "shop",
                    "--release", "unsampled"]
            r = subprocess.run([*args, "--json"], capture_output=True, text=True, timeout=120)
            assert r.returncode == 0, r.stderr
            doc = orjson.loads(r.stdout)
            left = doc["leftOut"] if cmd == "interactions" else {
                k: sum(row["leftOut"][k] for row in doc["rows"]) for k in want}
            assert {k: left[k] for k in want} == want, (cmd, left)
            r = subprocess.run(args, capture_output=True, text=True, timeout=120)
            assert r.returncode == 0, r.stderr
            assert words in " ".join(r.stdout.split()), r.stdout
        context.close()
    finally:
        col.stop()


def test_a_tab_that_is_hidden_sends_its_click_in_that_task(site, browser,
                                                           tmp_path: Path) -> None:
    # Hidden may be the last a page runs (a phone's browser freezes or discards a
    # background tab, no pagehide): the keepalive request with the click leaves in the
    # visibilitychange task itself, before any later task, and is stored.
    origin, collector = site
    store = tmp_path / "store"
    col = Collector(store, "--app", "shop:k1", "--allow-origin", f"shop={origin}")
    collector.append(col.url)
    try:
        context = browser.new_context()
        page = context.new_page()
        page.goto(f"{origin}/leave/0?release=hidden&drain=600000")
        pl, ids = _click(page)
        bodies = page.evaluate("(() => { __sent.length = 0; hide(); return __sent.slice(); })()")
        sent = {e["id"] for b in bodies if b
                for e in (orjson.loads(_plain(b)).get("timeline") or {}).get("interactions", [])}
        assert set(ids) <= sent, (ids, sent, len(bodies))
        got = _arrived(store, "hidden", {pl: ids})
        assert set(ids) <= got.get(pl, set()), (ids, got)
        # The tab lives on, so the running piece's stop() resolves: the hidden task's upload
        # counted it as unsampled, the rest brought its samples and says so (ms 0), and the
        # page load ends with nothing unsampled (not counted as lost when it came).
        deadline = time.monotonic() + 30
        counted = _unsampled(store, "hidden", pl)
        while (not counted or any(u["ms"] for u in counted.values())) \
                and time.monotonic() < deadline:
            time.sleep(0.5)
            counted = _unsampled(store, "hidden", pl)
        assert counted and not any(u["ms"] for u in counted.values()), counted
        r = subprocess.run([str(JSPROF), "fleet", "interactions", "--store", str(store),
                            "--app", "shop", "--release", "hidden", "--json"],
                           capture_output=True, text=True, timeout=120)
        assert orjson.loads(r.stdout)["leftOut"]["unsampledPageLoads"] == 0, r.stdout
        context.close()
    finally:
        col.stop()


def test_what_could_not_be_sent_at_once_goes_with_the_rest(site, browser,
                                                          tmp_path: Path) -> None:
    # The upload made in the hidden task fails to be made (here its first TextEncoder call
    # throws, as a JSON too large for the engine would): what it held is not lost, the
    # rest of the chunk (once stop() resolves; the tab lives on) carries the click. Before
    # (review11), the rest started past the timeline that upload would have held.
    origin, collector = site
    store = tmp_path / "store"
    col = Collector(store, "--app", "shop:k1", "--allow-origin", f"shop={origin}")
    collector.append(col.url)
    try:
        context = browser.new_context()
        page = context.new_page()
        page.goto(f"{origin}/leave/0?release=failed&drain=600000")
        pl, ids = _click(page)
        failed = page.evaluate("""(() => {
          const enc = TextEncoder.prototype.encode;
          TextEncoder.prototype.encode = function () {
            TextEncoder.prototype.encode = enc;
            throw new RangeError("too large");
          };
          const before = profiling.stats.failed;
          hide();
          return profiling.stats.failed - before;
        })()""")
        assert failed == 1  # the premise: the upload of the hidden task was not made
        got = _arrived(store, "failed", {pl: ids})
        assert set(ids) <= got.get(pl, set()), (ids, got)
        context.close()
    finally:
        col.stop()


def test_what_the_keepalive_budget_cannot_take_is_left_out_by_count(site, browser,
                                                                   tmp_path: Path) -> None:
    # Long frames, then a click, all in the first piece (5 s: nothing prepared yet), with a
    # keepalive budget of 2,500 bytes and no beacon: the timeline at pagehide does not fit
    # whole. Its shortest long frames are left out, counted in timeline.dropped, and the
    # click (an interaction goes only after every long frame) arrives by keepalive.
    origin, collector = site
    store = tmp_path / "store"
    col = Collector(store, "--app", "shop:k1", "--allow-origin", f"shop={origin}")
    collector.append(col.url)
    try:
        context = browser.new_context()
        page = context.new_page()
        page.goto(f"{origin}/leave/0?release=budget&first=5000&keepalive=2500&nobeacon=1"
                  "&drain=600000")
        page.wait_for_function("window.ready === true", timeout=30000)
        page.evaluate("longFrames(12)")
        page.click("#act")
        page.wait_for_function("__et.some((e) => e.name === 'click')", timeout=30000)
        ids = page.evaluate("[...new Set(__et.filter((e) => e.name === 'click').map((e) => e.id))]")
        pl = page.evaluate("profiling.pageLoad")
        seen = page.evaluate("__loaf")
        assert page.evaluate("profiling.stats.profilers") == 1  # still the first piece
        page.close()
        got = _arrived(store, "budget", {pl: ids})
        assert set(ids) <= got.get(pl, set()), (ids, got)
        frames, dropped = 0, 0
        with Store(store) as s:
            for _, _, meta, _ in s.iter_uploads():
                tl = meta.get("timeline") or {}
                if meta.get("pageLoad") == pl and tl:
                    frames += len(tl["longFrames"])
                    dropped = max(dropped, tl["dropped"]["longFrames"])
        print(f"budget: {frames} long frames stored, {dropped} left out (counted), "
              f"the page saw {seen}")
        # Every long frame the page saw is stored or counted as left out (the client may
        # see one more than the page did: a frame that ended after the page's count).
        assert dropped >= 1 and frames + dropped >= seen >= 12, (frames, dropped, seen)
        # The fleet reports what the client left out, by its count.
        args = [str(JSPROF), "fleet", "interactions", "--store", str(store), "--app", "shop",
                "--release", "budget"]
        r = subprocess.run([*args, "--json"], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        left = orjson.loads(r.stdout)["leftOut"]
        assert {k: left[k] for k in ("interactions", "longFrames")} == {
            "interactions": 0, "longFrames": dropped}
        r = subprocess.run(args, capture_output=True, text=True, timeout=120)
        assert f"0 interactions, {dropped} long frames" in " ".join(r.stdout.split()), r.stdout
        context.close()
    finally:
        col.stop()
