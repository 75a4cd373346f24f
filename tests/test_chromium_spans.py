"""Issue 23's local side in real headless Chromium: `record --engine chromium` keeps the
page's long animation frames (with their script entries) and interactions as spans of the
page's track, from real input (CDP Input events, trusted like a user's clicks, sent on a
session of their own while jsprof records); `report --during` reads them as the fleet
does; Perfetto and Chrome trace carry them as slices and read them back; the viewer's Time
view draws them as lanes."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import orjson
import pytest

from browser_util import cdp_chromium, engine_browser, playwright_chromium
from jsprof.analysis.during import during
from jsprof.engines.chromium import Browser, record_chromium
from jsprof.io import load, save
from jsprof.trace import NONE, SPAN_KIND_CODE, Recording, Spans
from viewer_util import open_page

JSPROF = [sys.executable, "-m", "jsprof.cli"]

# Two buttons: one slow in plain JavaScript, one busy in built-ins (JSON, sort), where
# Chromium's profiler keeps few stacks (issue 23's "stacks the browser lost").
PAGE = """<!doctype html>
<meta charset="utf-8"><title>clicks</title>
<style>button{position:absolute;left:10px;width:120px;height:40px}</style>
<button id="slow" class="buy primary" style="top:10px">buy</button>
<button id="builtin" style="top:80px">sort</button>
<p id="out" style="position:absolute;top:150px"></p>
<script>
function slowClickHandlerForJsprof() {
  const end = performance.now() + 500;
  let x = 0;
  while (performance.now() < end) for (let i = 0; i < 2000; i++) x += Math.sqrt(i * x + 1);
  document.getElementById("out").textContent = String(x).slice(0, 4);
  window.clicks = (window.clicks || 0) + 1;
}
function builtinHeavyHandlerForJsprof() {
  const data = Array.from({length: 4000}, (_, i) => ({k: (i * 7919) % 4001, s: "x" + i}));
  const end = performance.now() + 150;
  let n = 0;
  while (performance.now() < end) {
    n += JSON.parse(JSON.stringify(data)).sort((a, b) => a.k - b.k).length;
  }
  document.getElementById("out").textContent = String(n);
  window.clicks = (window.clicks || 0) + 1;
}
document.getElementById("slow").addEventListener("click", slowClickHandlerForJsprof);
document.getElementById("builtin").addEventListener("click", builtinHeavyHandlerForJsprof);
window.ready = true;
</script>
"""


def _click(sess: object, x: int, y: int) -> None:
    for t in ("mousePressed", "mouseReleased"):
        sess.send(  # type: ignore[attr-defined]
            "Input.dispatchMouseEvent",
            {"type": t, "x": x, "y": y, "button": "left", "clickCount": 1},
        )


def record_with_clicks(browser: Browser, page: Path) -> Recording:
    """Record `page` while another CDP session on its tab clicks "buy", then "sort"."""
    out: dict[str, object] = {}

    def run() -> None:
        try:
            out["rec"] = record_chromium(
                str(page), 1.0, until="js:window.clicks >= 2", duration=60, browser=browser
            )
        except BaseException as e:  # noqa: BLE001 - handed to the test thread
            out["error"] = e

    th = threading.Thread(target=run)
    th.start()
    try:
        root = browser.client.session
        sess = None
        deadline = time.monotonic() + 30
        while sess is None and time.monotonic() < deadline and th.is_alive():
            infos = root.send("Target.getTargets")["targetInfos"]
            tabs = [t for t in infos if t["type"] == "page" and t["url"].startswith("http")]
            if tabs:
                sid = root.send(
                    "Target.attachToTarget", {"targetId": tabs[0]["targetId"], "flatten": True}
                )["sessionId"]
                sess = browser.client.attach(sid, via_node_worker=False)
            else:
                time.sleep(0.05)
        assert sess is not None, out.get("error", "the page never opened")
        ready = {"expression": "window.ready === true", "returnByValue": True}
        while sess.send("Runtime.evaluate", ready)["result"].get("value") is not True:
            assert time.monotonic() < deadline, "the page never got ready"
            time.sleep(0.05)
        time.sleep(0.3)
        _click(sess, 60, 30)
        time.sleep(0.6)
        _click(sess, 60, 100)
    finally:
        th.join(90)
    if "error" in out:
        raise out["error"]  # type: ignore[misc]
    return out["rec"]  # type: ignore[return-value]


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with engine_browser() as b:
        yield b


@pytest.fixture(scope="module")
def recorded(browser: Browser, tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("clicks")
    page = d / "clicks.html"
    page.write_text(PAGE)
    rec = record_with_clicks(browser, page)
    out = d / "clicks.jsprof.json"
    save(rec, out)
    return out


def test_long_frames_and_interactions_are_spans_of_the_page(recorded: Path) -> None:
    rec = load(recorded)
    main = rec.tracks[0]
    sp = main.spans
    assert sp is not None
    clicks = sp.of_kind("interaction")
    targets = sorted(sp.arg(int(i)).get("target") for i in clicks)
    assert targets == ["button#builtin", "button#slow"], targets
    slow = next(int(i) for i in clicks if sp.arg(int(i))["target"] == "button#slow")
    assert sp.label(slow) == "click"
    assert sp.end[slow] - sp.start[slow] >= 490  # the handler runs 500 ms
    a = sp.arg(slow)
    assert sp.start[slow] <= a["processingStart"] < a["processingEnd"] <= sp.end[slow]
    # The handler's long frame names it as its script entry, on the track's clock: inside
    # the frame, and over the samples of the handler.
    scripts = [int(i) for i in sp.of_kind("script")]
    entry = next(i for i in scripts if sp.label(i) == "slowClickHandlerForJsprof")
    frame = int(sp.parent[entry])
    assert sp.kind[frame] == SPAN_KIND_CODE["long-frame"]
    assert sp.arg(frame)["blockingDuration"] >= 150
    assert sp.arg(entry)["invokerType"] == "event-listener"
    assert sp.arg(entry)["sourceURL"] == recorded.parent.joinpath("clicks.html").as_uri()
    tr = main.trace
    names = [f.name for f in tr.frames]
    on_handler = [
        float(t)
        for t, s in zip(tr.sample_time.tolist(), tr.sample_stack.tolist(), strict=True)
        if s >= 0 and "slowClickHandlerForJsprof" in {names[f] for f in tr.stack_frames(s)}
    ]
    # Sampled through the handler's 500 ms of wall-clock work: its samples span it but for
    # a gap at each end, the largest the recording has (not a count of samples: how many
    # ticks a wall-clock sampler gets in 500 ms is the machine's).
    gap = float(np.max(np.diff(tr.sample_time)))
    assert len(on_handler) >= 2 and on_handler[-1] - on_handler[0] >= 500 - 2 * gap, (
        len(on_handler), on_handler[:1], on_handler[-1:], gap)
    for span in (entry, slow):
        inside = [sp.start[span] - 2 <= t <= sp.end[span] + 2 for t in on_handler]
        assert sum(inside) / len(inside) > 0.95, sp.label(span)
    assert a["duration"] <= sp.end[slow] - sp.start[slow]  # INP's number, kept as reported
    # The .jsprof.json file keeps them as they are.
    assert orjson.loads(recorded.read_bytes())["jsprof"]["spans"]["kind"].count("interaction") == 2


def _report(path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*JSPROF, "report", str(path), *args], capture_output=True, text=True, timeout=120
    )


def _top_function(doc: dict) -> dict:
    """The top row that is a function (not (program), (garbage collector), ...)."""
    return next(r for r in doc["rows"] if not r["name"].startswith("("))


def test_slow_click_handler_tops_report_during_interaction(recorded: Path) -> None:
    r = _report(recorded, "--during", "interaction", "--json")
    assert r.returncode == 0, r.stderr
    doc = orjson.loads(r.stdout)
    top = _top_function(doc)
    assert top["name"] == "slowClickHandlerForJsprof", doc["rows"][:3]
    # It ran 500 ms of wall time, which its samples' weights add up to. (Rows with no
    # JavaScript, (program) and GC, grow on a loaded machine, where a starved sampler's
    # gaps count up to their cap: not asserted on.)
    assert top["self_ms"] > 250
    # The "sort" click (150 ms of handler) takes under 200 ms (INP's "poor" line) unless
    # the machine is loaded: kept by default only then; with a threshold below its
    # duration its handler is in, and the window count says so.
    sp = load(recorded).tracks[0].spans
    assert sp is not None
    sort = next(int(i) for i in sp.of_kind("interaction")
                if sp.arg(int(i))["target"] == "button#builtin")
    slow_sort = sp.arg(sort)["duration"] >= 200
    assert doc["during"] == "interaction" and doc["windows"] == 1 + slow_sort
    names = {f["name"] for f in doc["rows"]}
    assert ("builtinHeavyHandlerForJsprof" in names) == slow_sort
    r = _report(recorded, "--during", "interaction", "--slower-than", "100", "--json")
    doc = orjson.loads(r.stdout)
    assert doc["windows"] == 2
    assert "builtinHeavyHandlerForJsprof" in {f["name"] for f in doc["rows"]}
    # Text output: the table, then one line on stderr naming what was kept.
    r = _report(recorded, "--during", "long-frame")
    assert r.returncode == 0, r.stderr
    assert "slowClickHandlerForJsprof" in r.stdout
    assert re.fullmatch(
        r"jsprof: only samples during \d+ long animation frames?"
        r"(; [\d.]+ ms of samples whose stack the browser did not capture charged to the long "
        r"animation frame's script entry point, under \(stack not captured\))?\n",
        r.stderr,
    ), r.stderr


def test_report_during_refusals(recorded: Path, tmp_path: Path) -> None:
    r = _report(recorded, "--during", "long-frame", "--slower-than", "5000")
    assert r.returncode == 2
    assert "took 5000 ms of blocking or more; lower --slower-than" in r.stderr
    assert "Traceback" not in r.stderr
    r = _report(recorded, "--slower-than", "10")
    assert r.returncode == 2 and "--slower-than needs --during" in r.stderr
    # A recording without the page's spans (here: the same one with them dropped).
    rec = load(recorded)
    for t in rec.tracks:
        t.spans = None
    bare = tmp_path / "bare.jsprof.json"
    save(rec, bare)
    r = _report(bare, "--during", "interaction")
    assert r.returncode == 2
    assert r.stderr.strip().startswith("jsprof: error: --during interaction:")
    assert "holds no interaction" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    # The page's windows without its interactions: a page with no real input. It said
    # "only `jsprof record --engine chromium` records ..." of a Chromium recording.
    rec = load(recorded)
    for t in rec.tracks:
        if t.spans is not None and len(t.spans):
            t.spans = _without_interactions(t.spans)
    no_input = tmp_path / "no-input.jsprof.json"
    save(rec, no_input)
    r = _report(no_input, "--during", "interaction")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "the page in" in r.stderr and "el.click()" in r.stderr, r.stderr
    assert "record --engine" not in r.stderr


def _without_interactions(sp: Spans) -> Spans:
    """`sp` less its interactions (which nest nothing), parents renumbered."""
    keep = np.nonzero(sp.kind != SPAN_KIND_CODE["interaction"])[0]
    new_at = np.full(len(sp), -1, np.int64)
    new_at[keep] = np.arange(len(keep))
    par = sp.parent[keep]
    par = np.where(par >= 0, new_at[np.maximum(par, 0)], -1).astype(np.int32)
    return Spans(sp.start[keep], sp.end[keep], sp.frame[keep], par, sp.kind[keep],
                 sp.name[keep], sp.names, None if sp.args is None else
                 [sp.args[int(i)] for i in keep])


def test_lost_stacks_inside_a_long_frame_go_to_its_entry_point(recorded: Path) -> None:
    # The rule on real data: the native Profiler drops most stacks while JS runs built-ins
    # (issue 23); V8's CDP profiler here kept them, so take the stacks off the samples of
    # the built-in-heavy handler as the native one would, and see them charged back.
    rec = load(recorded)
    main = rec.tracks[0]
    tr = main.trace
    names = [f.name for f in tr.frames]
    on = np.array(
        [
            s >= 0 and "builtinHeavyHandlerForJsprof" in {names[f] for f in tr.stack_frames(s)}
            for s in tr.sample_stack.tolist()
        ]
    )
    # How many samples V8 takes in the handler's 150 ms of wall clock is the machine's (3
    # at load ~28 in a CI run where this said `>= 10`): at least one, and every one of
    # them must be charged back below.
    assert on.sum() >= 1, names
    main.trace = tr.replace(sample_stack=np.where(on, NONE, tr.sample_stack))
    sp = main.spans
    assert sp is not None
    assert any(sp.label(int(i)) == "builtinHeavyHandlerForJsprof" for i in sp.of_kind("script")), [
        (sp.label(i), float(sp.start[i]), float(sp.end[i])) for i in range(len(sp))
    ]
    got = during(rec, "long-frame")
    kept = got.recording.tracks[0].trace
    knames = [f.name for f in kept.frames]
    moved = [
        [knames[f] for f in kept.stack_frames(s)][::-1]
        for s in kept.sample_stack.tolist()
        if s >= 0 and knames[kept.stack_frame[s]] == "(stack not captured)"
    ]
    # (A sample the profiler itself lost in the other handler's frame goes to that one.)
    handlers = {"builtinHeavyHandlerForJsprof", "slowClickHandlerForJsprof"}
    assert all(m[-1] in handlers for m in moved), moved[:3]
    assert sum(m[-1] == "builtinHeavyHandlerForJsprof" for m in moved) >= 0.9 * on.sum()
    # The entry point is the profile's own frame of that function (one with a line).
    entry = next(f for f in kept.frames if f.name == "builtinHeavyHandlerForJsprof")
    assert entry.line is not None
    assert got.attributed_ms > 50


def test_the_pages_windows_outlive_steps_that_rebuild_frames(recorded: Path) -> None:
    # --hide-internal and source maps rebuild the frames table, which calls point into;
    # the page's windows do not, and stay (the Time view and --during need them).
    from jsprof.analysis.filters import hide_internal

    rec = load(recorded)
    before = rec.tracks[0].spans
    after = hide_internal(rec).tracks[0].spans
    assert after is not None and after == before


def test_time_view_draws_lanes_for_the_pages_windows(recorded: Path, tmp_path: Path) -> None:



    # A hostile target description must come out as text (the page chose it, not jsprof).
    rec = load(recorded)
    sp = rec.tracks[0].spans
    assert sp is not None and sp.args is not None
    hostile = '<img src=x onerror="window.pwned=1">'
    for i in sp.of_kind("interaction").tolist():
        sp.args[i]["target"] = hostile
    src = tmp_path / "hostile.jsprof.json"
    save(rec, src)
    html = tmp_path / "clicks.html"
    r = subprocess.run([*JSPROF, "flame", str(src), "-o", str(html)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    with playwright_chromium() as b:
        page = open_page(b, html.as_uri() + "#view=time", "time", 1280, 800)
        lanes = page.eval_on_selector_all("[data-lane]", "es => es.map(e => e.dataset.lane)")
        assert "main long animation frames" in lanes and "main interactions" in lanes, lanes
        page.screenshot(path=str(tmp_path / "time-view.png"), full_page=True)
        # Hover the slow click's interaction: its tooltip names it and its parts.
        inter = page.locator("[data-lane='main interactions'] canvas").bounding_box()
        t0 = [float(sp.start[i]) for i in sp.of_kind("interaction").tolist()]
        t1 = [float(sp.end[i]) for i in sp.of_kind("interaction").tolist()]
        slow = max(range(len(t0)), key=lambda k: t1[k] - t0[k])
        tip = ""
        # The time axis spans the recording's samples and spans; find the box by
        # sweeping the lane (a few dozen moves) rather than guessing the scale.
        for k in range(200):
            page.mouse.move(inter["x"] + inter["width"] * (k + 0.5) / 200,
                            inter["y"] + 6)
            if page.locator("#fg-tip").is_visible():
                text = page.locator("#fg-tip").text_content() or ""
                if "input delay" in text:
                    tip = text
                    if f"{t1[slow] - t0[slow]:.1f}" in text or "duration" in text:
                        break
        assert tip.startswith("click on " + hostile), tip
        assert "processing" in tip and "presentation" in tip
        assert page.evaluate("window.pwned") is None
        assert page.locator("img").count() == 0
        frames = page.locator("[data-lane='main long animation frames'] canvas").bounding_box()
        # frames, and their script entries a row below
        assert frames["height"] >= 2 * inter["height"] - 1
        assert page.errors == []


@pytest.mark.parametrize("ext", [".trace.json", ".pftrace"])
def test_windows_round_trip_through_chrome_trace_and_perfetto(
    recorded: Path, tmp_path: Path, ext: str
) -> None:
    out = tmp_path / ("clicks" + ext)
    r = subprocess.run([*JSPROF, "convert", str(recorded), str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    a = load(recorded).tracks[0].spans
    b = load(out).tracks[0].spans
    assert a is not None and b is not None and len(b) == len(a) >= 5
    assert b.names == a.names and b.args == a.args
    assert np.array_equal(b.kind, a.kind) and np.array_equal(b.parent, a.parent)
    assert np.abs(b.start - a.start).max() < 1e-6 and np.abs(b.end - a.end).max() < 1e-6
    if ext == ".trace.json":
        evs = orjson.loads(out.read_bytes())["traceEvents"]
        slices = [e for e in evs if e.get("cat") == "jsprof.timeline"]
        assert {e["ph"] for e in slices} == {"b", "e"}
        assert {e["name"] for e in slices} >= {"click", "long animation frame",
                                               "slowClickHandlerForJsprof"}
    # ... and what they are for works on the converted file as on the recording.
    r = _report(out, "--during", "interaction", "--json")
    assert r.returncode == 0, r.stderr
    assert _top_function(orjson.loads(r.stdout))["name"] == "slowClickHandlerForJsprof"


def test_record_cdp_keeps_the_windows_of_a_tab_clicked_while_attached(tmp_path: Path) -> None:
    # `record --cdp`: a browser the user runs (here: one started with a debugging port),
    # clicked while jsprof is attached; the clicks come as they would from the user (CDP
    # Input events from a connection of their own). Detaching takes the observer away.
    import json
    import urllib.request

    from jsprof.engines.cdp import CDPClient
    from jsprof.engines.chromium import attach_cdp
    from jsprof.engines.chromium.serve import serve_target

    page = tmp_path / "clicks.html"
    page.write_text(PAGE)
    server, url = serve_target(str(page))
    client = None
    try:
        with cdp_chromium(tmp_path / "profile", url) as endpoint:
            deadline = time.monotonic() + 60
            with urllib.request.urlopen(endpoint + "/json/version", timeout=10) as r:
                client = CDPClient(json.loads(r.read())["webSocketDebuggerUrl"])
            root = client.session
            tab = None
            while tab is None and time.monotonic() < deadline:
                tabs = [t for t in root.send("Target.getTargets")["targetInfos"]
                        if t["type"] == "page" and "clicks.html" in t["url"]]
                tab = tabs[0] if tabs else None
                time.sleep(0.05)
            assert tab is not None
            sid = root.send("Target.attachToTarget",
                            {"targetId": tab["targetId"], "flatten": True})["sessionId"]
            sess = client.attach(sid, via_node_worker=False)
            ready = {"expression": "window.ready === true", "returnByValue": True}
            while sess.send("Runtime.evaluate", ready)["result"].get("value") is not True:
                assert time.monotonic() < deadline, "the page never got ready"
                time.sleep(0.05)
            out: dict[str, object] = {}
            th = threading.Thread(target=lambda: out.setdefault(
                "rec", attach_cdp(endpoint, target="clicks.html", duration=3.0)))
            th.start()
            time.sleep(1.0)
            _click(sess, 60, 30)
            th.join(60)
            rec = out["rec"]
            assert isinstance(rec, Recording)
            sp = rec.tracks[0].spans
            assert sp is not None
            clicks = [int(i) for i in sp.of_kind("interaction")]
            assert [sp.arg(i)["target"] for i in clicks] == ["button#slow"]
            assert any(sp.label(int(i)) == "slowClickHandlerForJsprof"
                       for i in sp.of_kind("script"))
            gone = {"expression": "'__jsprofTimeline' in globalThis", "returnByValue": True}
            assert sess.send("Runtime.evaluate", gone)["result"]["value"] is False
    finally:
        if client is not None:
            client.close()
        server.close()


def test_a_script_entry_is_named_by_its_file_not_the_loopback_url(
    browser: Browser, tmp_path: Path
) -> None:
    """A served .js whose first run is a long frame: its script entry (a classic script,
    no function name) was labelled by its invoker, `http://127.0.0.1:PORT/busy.js`, a port
    gone with the recording, while everything else names the file by its file:// URL."""
    js = tmp_path / "busy.js"
    js.write_text("const end = performance.now() + 300;\nlet x = 0;\n"
                  "while (performance.now() < end) x += Math.sqrt(x + 1);\n")
    rec = record_chromium(str(js), 1.0, duration=30, browser=browser)
    sp = rec.tracks[0].spans
    assert sp is not None
    entries = [int(i) for i in sp.of_kind("script")]
    assert entries, "no long frame's script entry (the 300 ms script is one)"
    want = Path(js.resolve()).as_uri()
    ours = [i for i in entries if sp.arg(i).get("sourceURL") == want]
    assert ours, [sp.arg(i) for i in entries]
    for i in ours:
        assert sp.arg(i)["invoker"] == want and sp.label(i) == want, sp.arg(i)
    every = orjson.dumps([sp.arg(i) for i in range(len(sp.start))]).decode()
    assert "127.0.0.1" not in every, every
