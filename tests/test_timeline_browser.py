"""Issue 23 end to end in real headless Chromium: real clicks on a page whose click
handlers are slow (one in plain JavaScript, one busy in built-ins, where Chromium's
Profiler keeps few stacks); the real client posts traces with their timeline to a real
`jsprof serve` on loopback; `jsprof fleet` answers what users waited for."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from browser_util import HTML, open_page, page_server, playwright_chromium
from serve_util import JSPROF, Collector

PAGE = """<!doctype html>
<meta charset="utf-8"><title>checkout</title>
<button id="slow" class="buy primary">buy</button>
<button id="builtin">sort</button>
<p id="out"></p>
<script type="module">
import {startProfiling} from "%(collector)s/v1/client.js";
// Plain JavaScript: every sample has this function on its stack.
function slowClickHandlerForJsprof() {
  const end = performance.now() + 260;
  let x = 0;
  while (performance.now() < end) for (let i = 0; i < 2000; i++) x += Math.sqrt(i * x + 1);
  document.getElementById("out").textContent = String(x).slice(0, 4);
}
// Busy in built-ins (JSON, sort): Chromium's Profiler drops most of these samples' stacks.
function builtinHeavyHandlerForJsprof() {
  const data = Array.from({length: 4000}, (_, i) => ({k: (i * 7919) %% 4001, s: "x" + i}));
  const end = performance.now() + 150;
  let n = 0;
  while (performance.now() < end) {
    n += JSON.parse(JSON.stringify(data)).sort((a, b) => a.k - b.k).length;
  }
  document.getElementById("out").textContent = String(n);
}
document.getElementById("slow").addEventListener("click", slowClickHandlerForJsprof);
document.getElementById("builtin").addEventListener("click", builtinHeavyHandlerForJsprof);
window.profiler = startProfiling({endpoint: "%(collector)s", app: "shop", key: "k1",
                                  release: "2.0.0", sampleRate: 1, chunkMs: 60000});
window.ready = true;
</script>
"""


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[str]]]:
    """Two page loads of /checkout, clicked for real; the store and the upload ids."""
    collector: list[str] = []  # its URL, known once the collector runs
    with page_server(lambda _: ((PAGE % {"collector": collector[-1]}).encode(), HTML,
                                {"Document-Policy": "js-profiling"})) as origin:
        # Chromium decides which samples lose their stack: two loads into a fresh store, up
        # to three times, until one has some inside the builtin handler's long frames,
        # which the lost-stack tests charge (a full run at 72666f1 got none there)
        for attempt in range(3):
            store = tmp_path_factory.mktemp("timeline") / "store"
            col = Collector(store, "--app", "shop:k1", "--allow-origin", f"shop={origin}")
            collector.append(col.url)
            try:
                ids = _two_loads(origin)
                if _lost_inside_the_builtin_handler(col, ids) or attempt == 2:
                    yield store, ids
                    return
            finally:
                col.stop()


def _lost_inside_the_builtin_handler(col: Collector, ids: list[str]) -> bool:
    for data in col.wait_stored(*ids):
        doc = orjson.loads(data)
        frames = doc["jsprof"]["meta"].get("timeline", {}).get("longFrames", [])
        entries = [(e["start"], e["start"] + e["duration"]) for f in frames
                   for e in f["scripts"]
                   if (e.get("sourceFunctionName") or e.get("invoker") or "")
                   == "builtinHeavyHandlerForJsprof"]
        if any(s.get("stackId") is None and any(a <= s["timestamp"] < z for a, z in entries)
               for s in doc["samples"]):
            return True
    return False


def _two_loads(origin: str) -> list[str]:
    ids: list[str] = []
    with playwright_chromium() as b:
        for _ in range(2):
            page = open_page(b, f"{origin}/checkout", profiled=True)
            for _ in range(3):
                page.click("#slow")
                page.wait_for_timeout(150)
                page.click("#builtin")
                page.wait_for_timeout(150)
            # One chunk mid-way: the rest of the clicks land in a second chunk of the
            # same page load (its interactions may be reported in either).
            page.evaluate("profiler.flush()")
            page.click("#slow")
            page.wait_for_timeout(400)  # Event Timing reports after the next paint
            ids += page.evaluate("profiler.stop()")
            page.close()
    return ids


def _fleet(store: Path, *args: str) -> dict:
    r = subprocess.run([str(JSPROF), "fleet", *args, "--store", str(store), "--app", "shop",
                        "--json"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return orjson.loads(r.stdout)


def test_timeline_is_stored_with_the_upload(stored, tmp_path: Path) -> None:
    store, ids = stored
    assert len(ids) >= 4  # two chunks per page load
    from jsprof.store import Store

    metas = [Store(store).get(i)[0] for i in ids]
    assert len({m["pageLoad"] for m in metas}) == 2  # the chunks of a load share its id
    frames = [f for m in metas for f in m["timeline"]["longFrames"]]
    inter = [e for m in metas for e in m["timeline"]["interactions"]]
    assert any(e["type"] == "click" and e["target"] == "button#slow"
               for e in inter), inter
    scripts = [s for f in frames for s in f["scripts"]]
    assert {"slowClickHandlerForJsprof", "builtinHeavyHandlerForJsprof"} <= {
        s["sourceFunctionName"] for s in scripts}, scripts
    assert all("?" not in (s["sourceURL"] or "") for s in scripts)
    assert any(m["timeline"]["load"] and m["timeline"]["load"]["load"] for m in metas)


def test_slow_handler_tops_the_interactions(stored) -> None:
    store, _ = stored
    doc = _fleet(store, "top", "--during", "interaction")
    assert doc["during"] == "interaction" and doc["pageLoads"] == 2
    js = [r for r in doc["rows"] if r["resource"] is not None]
    assert js[0]["name"] == "slowClickHandlerForJsprof", doc["rows"][:5]
    # The same shape as top --json without --during.
    plain = _fleet(store, "top")
    assert set(plain) <= set(doc) and set(plain["rows"][0]) == set(doc["rows"][0])
    # Only the interactions' time: less than all of it.
    assert doc["totalMs"] < plain["totalMs"]
    # A threshold over every interaction leaves no samples.
    none = _fleet(store, "top", "--during", "interaction", "--slower-than", "100000")
    assert none["samples"] == 0


def test_lost_stacks_charged_to_the_builtin_handler(stored) -> None:
    store, _ = stored
    doc = _fleet(store, "top", "--during", "long-frame", "--all")
    assert doc["attributedMs"] > 0, doc
    rows = {r["name"]: r for r in doc["rows"]}
    assert "(stack not captured)" in rows
    heavy = rows["builtinHeavyHandlerForJsprof"]
    # Its total holds the lost samples charged to it: more than its self time.
    assert heavy["totalMs"] > heavy["selfMs"], heavy
    # Without --during too (issue 33): the compactor wrote the same attribution, so busy
    # time is never (idle) in the default views (tests/test_field_busy.py checks the rule).
    plain = {r["name"]: r for r in _fleet(store, "top", "--all")["rows"]}
    assert plain["(stack not captured)"]["selfMs"] > 0
    # In the tree: (stack not captured) hangs under the entry point of its long frame.
    from jsprof.fleet import api
    from jsprof.fleet.filters import Filters

    with api.session(api.open_store(store)) as s:
        rec = api.recording(s, Filters(app="shop", during="long-frame"))
    tr = rec.tracks[0].trace
    parents = set()
    for sid in range(tr.num_stacks):
        if tr.frames[tr.stack_frame[sid]].name == "(stack not captured)":
            p = tr.stack_parent[sid]
            parents.add(tr.frames[tr.stack_frame[p]].name)
    assert "builtinHeavyHandlerForJsprof" in parents, parents


def test_vitals_shows_inp_for_the_route(stored) -> None:
    store, _ = stored
    doc = _fleet(store, "vitals")
    (row,) = doc["rows"]
    assert row["route"] == "/checkout" and row["release"] == "2.0.0"
    assert row["pageLoads"] == 2 and row["interactions"] >= 10  # of 14 clicks
    # Each page load's INP is its slowest click: the 260 ms handler and more.
    assert row["inpP75Ms"] >= 250, row
    assert row["longFrameBlockingP75Ms"] > 0 and row["lcpP75Ms"] is not None
    click = row["interactionTypes"]["click"]
    assert click["processingP75Ms"] >= 140 and click["inputDelayP75Ms"] is not None
    text = subprocess.run([str(JSPROF), "fleet", "vitals", "--store", str(store), "--app",
                           "shop"], capture_output=True, text=True, timeout=120)
    assert text.returncode == 0 and "/checkout" in text.stdout, text.stderr
