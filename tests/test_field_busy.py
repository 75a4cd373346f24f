"""Issue 33: busy time is never called idle. Real clicks in headless Chromium on handlers
busy in built-ins (sort with a comparator, JSON, regular expressions), where Chromium's
Profiler keeps few stacks; the real client posts to a real `jsprof serve`. A stack-less
sample inside a long animation frame's script entry is that entry point's (under
`(stack not captured)`), elsewhere in a long frame the frame's own row, and `(idle)` only
outside every long frame: in `jsprof report` of the upload, in the fleet's tables (top,
flame, --exclude-idle, the dashboard) and in `--during`, which charges a handler only
inside its own script entries."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from browser_util import HTML, fresh_pages, open_page, page_server, playwright_chromium
from serve_util import JSPROF, Collector, signed_in

HANDLER = "sortClickHandlerForJsprof"
TIMER = "regexTimerTaskForJsprof"

PAGE = """<!doctype html>
<meta charset="utf-8"><title>busy</title>
<button id="sort" class="buy">sort</button>
<button id="later">later</button>
<p id="out"></p>
<div id="list"></div>
<script type="module">
import {startProfiling} from "%(collector)s/v1/client.js";
const data = Array.from({length: 3000}, (_, i) => ({k: (i * 7919) %% 3001, s: "item " + i}));
// Busy in built-ins: Array.prototype.sort with a comparator, JSON, a regular expression.
function sortClickHandlerForJsprof() {
  const end = performance.now() + 180;
  let n = 0;
  while (performance.now() < end) {
    const text = JSON.stringify(data.slice().sort((a, b) => a.k - b.k));
    n += (text.match(/item [0-9]+7/g) || []).length + JSON.parse(text).length;
  }
  document.getElementById("out").textContent = String(n);
  // The frame then lays out what it wrote: the browser's work after the handler returned.
  document.getElementById("list").innerHTML = data.map(
    (d) => `<div style="padding:${d.k %% 7}px;float:${d.k %% 2 ? "left" : "none"}">${d.s}</div>`,
  ).join("");
}
// A task of another kind (a timer the click schedules): its own script entry.
function regexTimerTaskForJsprof() {
  const end = performance.now() + 120;
  let n = 0;
  const text = JSON.stringify(data);
  while (performance.now() < end) n += text.replace(/[0-9]+/g, "#").length;
  document.getElementById("out").textContent = String(n);
}
document.getElementById("sort").addEventListener("click", sortClickHandlerForJsprof);
document.getElementById("later").addEventListener("click",
  () => setTimeout(regexTimerTaskForJsprof, 0));
window.profiler = startProfiling({endpoint: "%(collector)s", app: "shop", key: "k1",
                                  release: "3.0.0", sampleRate: 1, chunkMs: 60000});
window.ready = true;
</script>
"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium for the module: the page loads `stored` makes (up to three)
    and the dashboard test (a launch and close is 3.7-5.4 s at load 18); each use's pages
    are its own (`fresh_pages`)."""
    with playwright_chromium() as b:
        yield b


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory, browser: Any
           ) -> Iterator[tuple[Collector, Path, list]]:
    """One page load clicked for real; the collector (still running), its store and the
    uploads as `GET /v1/traces/{id}` gives them back."""
    collector: list[str] = []
    with page_server(lambda _: ((PAGE % {"collector": collector[0]}).encode(), HTML,
                                {"Document-Policy": "js-profiling"})) as origin:
        # Chromium decides which samples lose their stack: a load whose handler and timer
        # entries both hold some is what the tests need (else they would hold of nothing;
        # a full run at 72666f1 got one where neither was); up to three loads, each into a
        # store of its own: the fleet's answers are compared with the one load's upload
        # (a second load in the same store read as the handler's time twice: 1469 ms
        # against the upload's 739.5)
        for attempt in range(3):
            store = tmp_path_factory.mktemp("busy") / "store"
            col = Collector(store, "--app", "shop:k1", "--allow-origin", f"shop={origin}")
            collector[:] = [col.url]
            try:
                docs = _load_once(browser, col, origin)
            except BaseException:
                col.stop()
                raise
            if attempt == 2 or (
                len(docs) == 1 and {HANDLER, TIMER} <= _entries_with_lost_samples(docs[0])
            ):
                break
            col.stop()
        try:
            yield col, store, docs
        finally:
            col.stop()


def _load_once(browser: Any, col: Collector, origin: str) -> list:
    with fresh_pages(browser) as b:
        page = open_page(b, f"{origin}/busy", profiled=True)
        page.wait_for_timeout(300)  # some real idle before the clicks
        for _ in range(4):
            page.click("#sort")
            page.wait_for_timeout(250)
            page.click("#later")
            page.wait_for_timeout(250)
        page.wait_for_timeout(500)  # the last frames' entries are reported
        ids = page.evaluate("profiler.stop()")
        page.close()
    return [orjson.loads(data) for data in col.wait_stored(*ids)]


def _entries_with_lost_samples(doc: dict) -> set[str]:
    """The entry points (by the first script entry holding it, as _expected keys them)
    with at least one stack-less sample inside their script entries."""
    _, sc = _windows(doc)
    out = set()
    for s in doc["samples"]:
        if s.get("stackId") is None:
            hit = [x[2] for x in sc if x[0] <= s["timestamp"] < x[1]]
            if hit:
                out.add(hit[0])
    return out


def _windows(doc: dict) -> tuple[list[tuple[float, float]], list[tuple[float, float, str]]]:
    """The upload's long frames [start, end) and script entries [start, end, name)."""
    frames = doc["jsprof"]["meta"]["timeline"]["longFrames"]
    lf = [(f["start"], f["start"] + f["duration"]) for f in frames]
    sc = [(s["start"], s["start"] + s["duration"], s["sourceFunctionName"] or s["invoker"])
          for f in frames for s in f["scripts"]]
    return lf, sc


def _inside(t: float, spans: list) -> bool:
    return any(s[0] <= t < s[1] for s in spans)


def test_trace_has_stackless_samples_inside_script_entries(stored) -> None:
    _, _, docs = stored
    (doc,) = docs
    lf, sc = _windows(doc)
    names = {s[2] for s in sc}
    assert {HANDLER, TIMER} <= names, names
    lost = [s["timestamp"] for s in doc["samples"] if s.get("stackId") is None]
    in_script = [t for t in lost if _inside(t, sc)]
    # What this issue is about: many samples of busy handlers arrive without a stack.
    assert len(in_script) >= 10, (len(lost), len(in_script), len(doc["samples"]))


def _saved(doc: dict, tmp_path: Path) -> Path:
    p = tmp_path / "upload.json"
    p.write_bytes(orjson.dumps(doc))
    return p


def _expected(path: Path, doc: dict) -> dict[str, float]:
    """From the raw upload and its timeline alone: the ms of its stack-less samples inside
    each entry point's script entries, elsewhere in long frames, and outside them all."""
    import jsprof

    track = jsprof.load(str(path)).tracks[0]
    w = jsprof.trace.sample_weights(track.trace, track.sample_interval)
    lf, sc = _windows(doc)
    out = {"idle": 0.0, "frame": 0.0, HANDLER: 0.0, TIMER: 0.0}
    for s, wi in zip(doc["samples"], w.tolist(), strict=True):
        if s.get("stackId") is not None:
            continue
        t = s["timestamp"]
        hit = [x[2] for x in sc if x[0] <= t < x[1]]
        key = hit[0] if hit else "frame" if _inside(t, lf) else "idle"
        out[key] = out.get(key, 0.0) + wi
    return out


def _run(*args: str) -> dict:
    r = subprocess.run([str(JSPROF), *args], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return orjson.loads(r.stdout)


def _children(tree: list[dict], name: str) -> dict[str, dict]:
    (node,) = [n for n in tree if n["name"] == name]
    return {c["name"]: c for c in node["children"]}


def test_report_of_an_upload_charges_busy_time(stored, tmp_path: Path) -> None:
    _, _, (doc,) = stored
    path = _saved(doc, tmp_path)
    want = _expected(path, doc)
    doc_json = _run("report", str(path), "--json", "--all")
    rows = {r["name"]: r for r in doc_json["rows"]}
    # What was charged, said beside the table.
    assert doc_json["busy"]["script_ms"] == pytest.approx(want[HANDLER] + want[TIMER], abs=0.01)
    assert doc_json["busy"]["frame_ms"] == pytest.approx(want["frame"], abs=0.01)
    # (idle) is exactly the stack-less time outside every long animation frame.
    assert rows["(idle)"]["self_ms"] == pytest.approx(want["idle"], abs=0.05)
    frame_rows = sum(rows[n]["self_ms"] for n in ("(long frame: rendering)",
                                                  "(long frame: not in script)") if n in rows)
    assert frame_rows == pytest.approx(want["frame"], abs=0.1)
    # Inside a script entry: under its entry point, the sampled function of that name.
    tree = _run("report", str(path), "--json", "--tree", "--threshold", "0")["tree"]
    for name in (HANDLER, TIMER):
        lost = _children(tree, name).get("(stack not captured)", {"total_ms": 0.0})
        assert lost["total_ms"] == pytest.approx(want[name], abs=0.05), name
    assert want[HANDLER] > 0 and want[TIMER] > 0  # else the checks above held of nothing
    assert rows[TIMER]["total_ms"] > rows[TIMER]["self_ms"]
    assert rows["(stack not captured)"]["total_ms"] == pytest.approx(
        want[HANDLER] + want[TIMER], abs=0.1)


def _fleet(store: Path, *args: str) -> dict:
    return _run("fleet", *args, "--store", str(store), "--app", "shop", "--json")


def test_fleet_tables_and_exclude_idle_keep_busy_time(stored, tmp_path: Path) -> None:
    _, store, (doc,) = stored
    path = _saved(doc, tmp_path)
    want = _expected(path, doc)
    local = {r["name"]: r for r in _run("report", str(path), "--json", "--all")["rows"]}
    top = _fleet(store, "top", "--all")
    rows = {r["name"]: r for r in top["rows"]}
    # The compactor wrote the attributed stacks: fleet and report count alike.
    for name in (HANDLER, TIMER, "(stack not captured)", "(idle)"):
        assert rows[name]["totalMs"] == pytest.approx(local[name]["total_ms"], abs=0.1), name
    # Exclude idle leaves out only the time outside every long frame.
    ex = _fleet(store, "top", "--all", "--exclude-idle")
    assert ex["excludedIdleMs"] == pytest.approx(want["idle"], abs=0.1)
    kept = {r["name"]: r for r in ex["rows"]}
    assert "(idle)" not in kept
    assert kept["(stack not captured)"]["totalMs"] == pytest.approx(
        want[HANDLER] + want[TIMER], abs=0.1)
    assert kept[TIMER]["totalMs"] == pytest.approx(rows[TIMER]["totalMs"], abs=0.1)
    # The merged flame graph draws them too.
    out = tmp_path / "f.html"
    r = subprocess.run([str(JSPROF), "fleet", "flame", "--store", str(store), "--app", "shop",
                        "--exclude-idle", "-o", str(out)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert "(stack not captured)" in out.read_text()


def test_fleet_top_says_where_the_lost_stacks_were(stored, tmp_path: Path) -> None:
    # Issue 34 (a): `(stack not captured)` was a row of 9 % with `(unknown)` for its
    # location. It stays one row (its time is not a function's), and says what it is and
    # which entry points its samples are charged to, as much as each: nothing vanishes.
    _, store, (doc,) = stored
    want = _expected(_saved(doc, tmp_path), doc)
    top = _fleet(store, "top", "--all")
    rows = {r["name"]: r for r in top["rows"]}
    lost = rows["(stack not captured)"]
    assert "built-ins" in lost["why"] and "entry point" in lost["why"], lost
    eps = {e["label"]: e["ms"] for e in lost["entryPoints"]}
    assert eps[HANDLER] == pytest.approx(want[HANDLER], abs=0.1), eps
    assert eps[TIMER] == pytest.approx(want[TIMER], abs=0.1), eps
    assert sum(eps.values()) + lost["otherEntryPointsMs"] == pytest.approx(
        lost["selfMs"], abs=0.1)
    assert list(eps) == sorted(eps, key=lambda k: -eps[k])  # most first
    for name in ("(long frame: rendering)", "(long frame: not in script)"):
        if name in rows:
            assert "long animation frame" in rows[name]["why"] and \
                "entryPoints" not in rows[name]
    assert all("why" not in r for r in top["rows"] if r["name"] == "(idle)")
    # The table: the location column names the entry points, a note says what it means.
    r = subprocess.run([str(JSPROF), "fleet", "top", "--store", str(store), "--app", "shop",
                        "--all"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    (line,) = [x for x in r.stdout.splitlines() if x.split("  ")[-1] != ""
               and "(stack not captured)  " in x]
    assert "(no stack) under " in line and HANDLER in line and "(unknown)" not in line, line
    assert any(x.startswith("(stack not captured): samples the browser's Profiler took")
               for x in r.stdout.splitlines()), r.stdout


def _entries(doc: dict, name: str) -> list[tuple[float, float]]:
    return [(s, e) for s, e, n in _windows(doc)[1] if n == name]


def _bound(path: Path, doc: dict, name: str) -> float:
    """The most time a handler can be charged inside its script entries: each entry's
    duration, plus what its last sample weighs past the entry's end (the gap to the next
    sample: a sample weighs until the next one is taken)."""
    import jsprof

    track = jsprof.load(str(path)).tracks[0]
    w = jsprof.trace.sample_weights(track.trace, track.sample_interval)
    t = track.trace.sample_time
    total = 0.0
    for s, e in _entries(doc, name):
        inside = np.flatnonzero((t >= s) & (t < e))
        over = max(0.0, float(t[inside[-1]] + w[inside[-1]] - e)) if len(inside) else 0.0
        total += (e - s) + over
    return total


def test_during_charges_a_handler_only_inside_its_script_entries(stored, tmp_path) -> None:
    _, store, (doc,) = stored
    path = _saved(doc, tmp_path)
    want = _expected(path, doc)
    bound = _bound(path, doc, HANDLER)
    fleet = {r["name"]: r for r in _fleet(store, "top", "--all", "--during", "interaction",
                                          "--slower-than", "100")["rows"]}
    assert fleet[HANDLER]["totalMs"] <= bound + 0.05, (fleet[HANDLER], bound)
    # `report` of the upload reads the same windows from its meta's timeline
    local = {r["name"]: r for r in _run("report", str(path), "--json", "--all", "--during",
                                        "interaction", "--slower-than", "100")["rows"]}
    assert fleet[HANDLER]["totalMs"] == pytest.approx(local[HANDLER]["total_ms"], abs=0.1)
    # and the busy time inside its entries is charged to it, not dropped
    tree = _run("report", str(path), "--json", "--tree", "--threshold", "0", "--during",
                "interaction", "--slower-than", "100")["tree"]
    lost = _children(tree, HANDLER).get("(stack not captured)", {"total_ms": 0.0})
    assert want[HANDLER] > 0 and lost["total_ms"] == pytest.approx(want[HANDLER], abs=0.05)


def test_dashboard_exclude_idle_shows_busy_time(stored, browser: Any, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    col, _, (doc,) = stored
    with fresh_pages(browser) as browser:
        page = browser.new_page()
        signed_in(page, col.url)
        assert page.is_checked("#exclude-idle")  # the default
        expect(page.locator("#top td.fn").first).not_to_have_text("", timeout=60000)
        names = page.locator("#top td.fn").all_text_contents()
        assert "(stack not captured)" in names and TIMER in names, names
        assert "(idle)" not in names, names
        # Its location says where its samples were, its note what they are (issue 34).
        loc = page.locator("#top tr", has=page.locator("td.fn", has_text="(stack not "
                                                            "captured)")).locator("td.loc")
        assert "(no stack) under " in loc.text_content() and HANDLER in loc.text_content()
        assert "(stack not captured): samples the browser's Profiler took" in \
            page.locator("#top-note").text_content()
        page.locator("#top-section").screenshot(path=str(tmp_path / "top.png"))


def test_tables_of_the_old_reading_are_rebuilt(stored, tmp_path: Path) -> None:
    import shutil

    _, store, _ = stored
    want = {r["name"]: r["totalMs"] for r in _fleet(store, "top", "--all")["rows"]}
    old = tmp_path / "store"
    shutil.copytree(store, old)
    man = old / "tables" / "_manifest.json"
    doc = orjson.loads(man.read_bytes())
    doc["formatVersion"] = 3  # tables an older jsprof wrote: lost stacks there are (idle)
    man.write_bytes(orjson.dumps(doc))
    # A query (which only reads) says so in one line; the next compaction rebuilds them
    # from the raw uploads.
    r = subprocess.run([str(JSPROF), "fleet", "top", "--store", str(old), "--app", "shop"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "tables of format 3" in r.stderr and "jsprof serve compact" in r.stderr, r.stderr
    r = subprocess.run([str(JSPROF), "serve", "compact", "--store", str(old)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    got = {r["name"]: r["totalMs"] for r in _fleet(old, "top", "--all")["rows"]}
    assert "(stack not captured)" in got and got == pytest.approx(want), (got, want)
    assert orjson.loads(man.read_bytes())["rebuiltFrom"] == 3
