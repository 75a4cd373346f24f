"""The viewer as an analysis tool (issue 35): a time range that every view counts, search
that shows its matches, and what keeps pages small. Driven in headless Chromium."""

from __future__ import annotations

import pytest

from browser_util import chromium_path, playwright_chromium
from jsprof import io
from jsprof.cli import main
from jsprof.trace import Recording, TraceBuilder
from viewer_util import open_page, wait


@pytest.fixture(scope="module")
def browser():
    chromium_path()  # missing, it fails with what to do
    with playwright_chromium() as b:
        yield b


def _page(browser, url: str, width: int = 1280, height: int = 700):
    """`url` once its first view shows (page.errors: its errors), at this file's size."""
    return open_page(browser, url, None, width, height)


def _flame(rec: Recording, tmp_path, name: str = "f") -> str:
    trace = tmp_path / f"{name}.jsprof.json"
    io.save(rec, trace)
    out = tmp_path / f"{name}.html"
    assert main(["flame", str(trace), "-o", str(out)]) == 0
    return out.as_uri()


def _timed(samples: list[tuple[float, list[str]]], interval: float = 1.0) -> Recording:
    """Samples at the given times (ms); stacks are lists of names, outermost first."""
    b = TraceBuilder()
    r = b.resource_id("file:///app.js")
    for t, names in samples:
        ids = [b.frame_id(n, r, 1 + len(n), 1) for n in names]
        b.add_sample(float(t), b.stack_id(ids) if ids else None)
    return Recording.of(b.build(), sample_interval=interval)


# ---- the time axis says s and min on long recordings -------------------------------------


@pytest.mark.parametrize("span, unit", [(250.0, " ms"), (30_000.0, " s"), (1_000_000.0, " min")])
def test_time_axis_ticks_use_seconds_and_minutes(browser, tmp_path, span, unit):
    # "1000000.0 ms" on a 17-minute recording's axis: ticks now say min (or s).
    n = 200
    rec = _timed([(span * k / (n - 1), ["main", "work"]) for k in range(n)], span / (n - 1))
    page = _page(browser, _flame(rec, tmp_path) + "#view=time")
    wait(page, "!!document.querySelector('#v-time canvas.tl-axis[data-ticks]')")
    ticks = page.evaluate("document.querySelector('#v-time canvas.tl-axis').dataset.ticks")
    ticks = ticks.split("|")
    assert len(ticks) >= 3, ticks
    assert all(t.endswith(unit) for t in ticks), ticks
    assert all(len(t) <= 9 for t in ticks), ticks  # "16.5 min", not "1000000.0 ms"
    assert page.errors == []


# ---- a range applies everywhere ------------------------------------------------------------


def _phases() -> tuple[Recording, list[tuple[float, list[str]]]]:
    """Three phases at uneven gaps (0.8-1.2 ms): main>parse, main>render>paint (with idle
    samples among them), main>parse>lex; the samples, for counting by hand."""
    import random

    rnd = random.Random(7)
    samples, t = [], 0.0
    for k in range(3000):
        t += rnd.choice((0.8, 1.0, 1.2))
        if k < 1000:
            st = ["main", "parse"]
        elif k < 2000:
            st = [] if k % 10 == 0 else ["main", "render", "paint"]
        else:
            st = ["main", "parse", "lex"] if k % 3 else ["main", "parse"]
        samples.append((round(t, 3), st))
    return _timed(samples), samples


def _by_hand(samples, a: float, b: float) -> dict[str, tuple[int, float]]:
    """Per function: (samples, ms) of the samples with a <= time - start < b, each weighing
    the gap to the next sample (the last: the interval), a function once per sample."""
    start = samples[0][0]
    out: dict[str, list] = {}
    for k, (t, st) in enumerate(samples):
        if not a <= t - start < b:
            continue
        w = samples[k + 1][0] - t if k + 1 < len(samples) else 1.0
        for name in set(st or ["(idle)"]):
            row = out.setdefault(name, [0, 0.0])
            row[0] += 1
            row[1] += w
    return {k: (n, ms) for k, (n, ms) in out.items()}


def _flame_numbers(page) -> dict[str, tuple[int, float]]:
    """Per drawn frame name: samples and total ms, as its tooltip says them."""
    import re

    out = {}
    for f in page.evaluate("jsprofFrames()"):
        if f["i"] == 0:
            continue
        tip = page.evaluate(f"jsprofTip({f['i']})")
        m = re.search(r"total ([\d.]+) ms .* (\d+) samples?", tip)
        out[f["name"]] = (int(m.group(2)), float(m.group(1)))
    return out


def _table(page, sel: str) -> dict[str, tuple[float, float]]:
    """Rows of a functions table: name -> (self ms, total ms)."""
    rows = page.eval_on_selector_all(
        sel, "trs => trs.map(tr => [tr.children[4].textContent, +tr.children[0].textContent,"
        " +tr.children[2].textContent])")
    return {name: (s, t) for name, s, t in rows}


def test_a_range_in_the_link_is_what_every_view_counts(browser, tmp_path):
    rec, samples = _phases()
    url = _flame(rec, tmp_path)
    want = _by_hand(samples, 1200, 2400)
    assert want["parse"][0] > 0 and want["paint"][0] > 0 and want["lex"][0] > 0
    page = _page(browser, url + "#range=1200-2400")
    wait(page, "document.body.dataset.range === '1200-2400'")
    # Flame: each frame's samples and ms are those of the range, counted by hand.
    got = _flame_numbers(page)
    for name, (n, ms) in want.items():
        assert got[name][0] == n, (name, got[name], n)
        assert got[name][1] == pytest.approx(ms, abs=0.051), name
    assert set(got) == set(want)
    # The range is shown, with its samples, and says so.
    bar = page.locator("#fg-range").text_content()
    total_n = sum(1 for t, _ in samples if 1200 <= t - samples[0][0] < 2400)
    assert "1200.0\u20132400.0 ms" in bar and f"({total_n} samples)" in bar, bar
    # Sandwich (its table and the chosen function's head) counts the same samples.
    page.locator("nav.tabs a[data-tab='sandwich']").click()
    wait(page, "document.body.dataset.view === 'sandwich'")
    assert "range=1200-2400" in page.url
    table = _table(page, "#v-sandwich tr[data-f]")
    assert set(table) == set(want)
    for name, (_n, ms) in want.items():
        assert table[name][1] == pytest.approx(ms, abs=0.051), name
    self_lex = want["lex"][1]
    assert table["lex"][0] == pytest.approx(self_lex, abs=0.051)
    # Bottom-up (the tables read the same selection): each function's self and total.
    page.locator("nav.tabs a[data-tab='bottomup']").click()
    wait(page, "document.body.dataset.view === 'bottomup'")
    wait(page, "jsprofTableRows().length > 0")
    rows = {r["name"]: r for r in page.evaluate("jsprofTableRows()")}
    assert set(rows) == set(want)
    for name, (_n, ms) in want.items():
        assert float(rows[name]["total"]) == pytest.approx(ms, abs=0.051), name
        assert float(rows[name]["self"]) == pytest.approx(table[name][0], abs=0.051), name
    # The Time view shades the range and its table says the same.
    page.locator("nav.tabs a[data-tab='time']").click()
    wait(page, "document.body.dataset.view === 'time'")
    tt = _table(page, "[data-panel='range'] tr[data-f]")
    assert tt == table
    # Source: the function's head counts the range too.
    page.evaluate("location.hash = 'view=source&fn=parse&range=1200-2400'")
    wait(page, "document.body.dataset.view === 'source'")
    head = page.locator("#v-source [data-panel='function'] .note").text_content()
    assert f"total {want['parse'][1]:.1f} ms (" in head, (head, want["parse"])
    # Cleared: the link loses it, and the flame graph is the whole recording's again.
    page.locator("#fg-range button").click()
    wait(page, "document.body.dataset.range === ''")
    assert "range=" not in page.url
    page.locator("nav.tabs a[data-tab='flame']").click()
    wait(page, "document.body.dataset.view === 'flame'")
    whole = _flame_numbers(page)
    assert whole["parse"][0] == sum(1 for _, st in samples if "parse" in st)
    assert not page.locator("#fg-range").is_visible()
    assert page.errors == []


def test_a_range_dragged_in_the_time_view_applies_to_flame(browser, tmp_path):
    rec, samples = _phases()
    page = _page(browser, _flame(rec, tmp_path) + "#view=time")
    lane = page.locator("[data-lane='main'] canvas")
    box = lane.bounding_box()
    span = samples[-1][0] + 1.0 - samples[0][0]  # the lanes' extent: to the last one's end

    def x_of(t):
        return box["x"] + box["width"] * t / span

    page.mouse.move(x_of(500), box["y"] + 5)
    page.mouse.down()
    page.mouse.move(x_of(1500), box["y"] + 5)
    page.mouse.up()
    wait(page, "document.body.dataset.range !== undefined && document.body.dataset.range !== ''")
    import re

    a, b = map(float, re.search(r"range=([\d.]+)-([\d.]+)", page.url).groups())
    assert a == pytest.approx(500, abs=span / box["width"] * 2)
    assert b == pytest.approx(1500, abs=span / box["width"] * 2)
    want = _by_hand(samples, a, b)
    page.evaluate("location.hash = location.hash.replace('view=time', 'view=flame')")
    wait(page, "document.body.dataset.view === 'flame'")
    got = _flame_numbers(page)
    assert {k: v[0] for k, v in got.items()} == {k: v[0] for k, v in want.items()}
    assert page.errors == []


# ---- search you can see ---------------------------------------------------------------------


def _search_rec() -> Recording:
    """main calls hot (860 samples) and three functions matching "needle" (47 samples in
    all, at three depths), once each in their own part of the graph."""
    st = [["main", "hot"]] * 860 + [["main", "cold"]] * 93
    st += [["main", "needleA"]] * 40 + [["main", "cold", "needleB"]] * 5
    st += [["main", "hot", "x", "needleC"]] * 2
    return _timed([(float(k), s) for k, s in enumerate(st)])


def _type(page, q: str) -> str:
    page.locator("#fg-search").fill(q)
    wait(page, "document.getElementById('fg-status').textContent"
          f".indexOf('\\u201c{q}\\u201d') >= 0")
    return page.locator("#fg-status").text_content()


def test_search_dims_what_does_not_match_and_says_how_many(browser, tmp_path):
    from PIL import Image

    page = _page(browser, _flame(_search_rec(), tmp_path))
    frames = {f["name"]: f for f in page.evaluate("jsprofFrames()")}
    hot = frames["hot"]
    png = tmp_path / "before.png"
    page.screenshot(path=str(png))
    before = Image.open(png).convert("RGB").getpixel((int(hot["cx"]), int(hot["cy"])))
    status = _type(page, "needle")
    # The count beside the share: three functions, 47 of 1000 samples.
    assert status.startswith("\u201cneedle\u201d: 3 functions, 4.7 % of samples (47.0 ms"), status
    png = tmp_path / "after.png"
    page.screenshot(path=str(png))
    img = Image.open(png).convert("RGB")
    # hot does not match: dimmed towards the background (each channel near 251).
    after = img.getpixel((int(hot["cx"]), int(hot["cy"])))
    assert min(after) > 215 and sum(after) > sum(before) + 60, (before, after)
    # needleA matches: full colour (the search's), outlined in a dark line at its edge.
    a = next(f for f in page.evaluate("jsprofFrames()") if f["name"] == "needleA")
    assert a["hit"]
    r, g, b = img.getpixel((int(a["cx"]), int(a["cy"])))
    assert r > 200 and g < 130 and b > 200, (r, g, b)
    top = [img.getpixel((int(a["cx"]), int(y))) for y in range(int(a["cy"]) - 9, int(a["cy"]) - 4)]
    assert any(sum(p) < 300 for p in top), top  # the outline's dark row above the middle
    assert page.errors == []


def test_next_and_previous_match_zoom_to_each(browser, tmp_path):
    page = _page(browser, _flame(_search_rec(), tmp_path))
    _type(page, "needle")
    page.locator("#fg-search").press("Enter")
    wait(page, "!!document.getElementById('fg-canvas').dataset.match")
    seen = []
    for _ in range(3):
        zoomed = [f for f in page.evaluate("jsprofFrames()") if not f["faded"] and f["hit"]]
        status = page.locator("#fg-status").text_content()
        assert f"match {len(seen) + 1} of 3" in status, status
        # Zoomed to the match: it fills the width.
        top = min(zoomed, key=lambda f: f["depth"])
        assert top["w"] > 1000, top
        seen.append(top["name"])
        page.locator("#fg-search").press("Enter")
    assert seen == ["needleA", "needleB", "needleC"]  # widest first: 40, 5, 2 samples
    assert "match 1 of 3" in page.locator("#fg-status").text_content()
    # N (shift+Enter) goes back, round the list.
    page.locator("#fg-search").press("Shift+Enter")
    assert "match 3 of 3" in page.locator("#fg-status").text_content()
    page.locator("#fg-canvas").focus()
    page.keyboard.press("n")
    assert "match 1 of 3" in page.locator("#fg-status").text_content()
    assert page.errors == []


def test_search_counts_only_the_range(browser, tmp_path):
    # 950-980 ms: 3 samples of cold, 27 of needleA; one function matches there.
    page = _page(browser, _flame(_search_rec(), tmp_path) + "#range=950-980")
    wait(page, "document.body.dataset.range === '950-980'")
    status = _type(page, "needle")
    assert status.startswith("\u201cneedle\u201d: 1 function, 90.0 % of samples (27.0 ms"), status
    assert page.errors == []


# ---- smaller: deep recursion shares its frames -----------------------------------------------


def _deep(tmp_path, depth: int = 30_000, n: int = 3000):
    """A .cpuprofile of main > rec x `depth` > leaf, its samples walking down the recursion
    and back up (each a few levels from the one before)."""
    b = TraceBuilder()
    r = b.resource_id("file:///deep.js")
    main_f, rec_f, leaf_f = (b.frame_id(nm, r, k + 1, 1) for k, nm in enumerate(("main", "rec",
                                                                                    "leaf")))
    chain = [b.stack_id([main_f])]
    for _ in range(depth):
        chain.append(b.stack_id_from(chain[-1], rec_f))
    for k in range(n):
        d = int(depth * (1 - abs(2 * k / n - 1)))
        b.add_sample(float(k), b.stack_id_from(chain[d], leaf_f))
    path = tmp_path / "deep.cpuprofile"
    io.save(Recording.of(b.build(), sample_interval=1.0), path)
    return path


def test_a_deep_recursion_page_is_smaller_than_its_input(browser, tmp_path):
    # 30,000 levels: the page was larger than the .cpuprofile (every frame's columns in
    # full, and the model's per-node lists); packed, what repeats costs bytes.
    src = _deep(tmp_path)
    out = tmp_path / "deep.html"
    assert main(["flame", str(src), "-o", str(out)]) == 0
    assert out.stat().st_size < src.stat().st_size / 2, (out.stat().st_size, src.stat().st_size)
    page = _page(browser, out.as_uri())
    # The deepest leaf is drawn (it is 30,002 levels up), with its numbers.
    frames = page.evaluate("jsprofFrames().filter(f => f.depth > 29000).length")
    assert frames > 100
    page.evaluate("location.hash = 'view=sandwich&fn=leaf'")
    wait(page, "document.body.dataset.view === 'sandwich'")
    assert page.locator("[data-panel='function'] .note").text_content().endswith(
        "total 3000.0 ms (100.0%)")
    assert page.errors == []


def test_a_deep_recursion_speedscope_export_shares_its_callers(tmp_path):
    # The sampled form wrote every stack whole (600 MB for a 5.6 MB .cpuprofile): deep
    # stacks that change little are written as frames opened and closed.
    import json

    from jsprof.analysis.calltree import build_call_tree

    src = _deep(tmp_path)
    out = tmp_path / "deep.speedscope.json"
    assert main(["convert", str(src), str(out)]) == 0
    assert out.stat().st_size < src.stat().st_size, (out.stat().st_size, src.stat().st_size)
    doc = json.loads(out.read_text())
    assert doc["profiles"][0]["type"] == "evented"
    # Read back: every sample, its time and stack.
    a, b = io.load(src), io.load(out)
    ta, tb = a.tracks[0].trace, b.tracks[0].trace
    assert tb.num_samples == ta.num_samples
    assert tb.sample_time.tolist() == ta.sample_time.tolist()
    x, y = build_call_tree(a), build_call_tree(b)
    assert len(x.parent) == len(y.parent) and y.total_time == x.total_time
    assert sorted(x.total_ms.tolist()) == sorted(y.total_ms.tolist())


def test_a_range_and_transforms_compose(browser, tmp_path):
    # The transforms start from the range's samples: drop:lex in 1200-2400 leaves the
    # range's samples without lex on their stack.
    rec, samples = _phases()
    page = _page(browser, _flame(rec, tmp_path) + "#range=1200-2400&tf=drop%3Alex")
    wait(page, "document.body.dataset.range === '1200-2400' && "
          "document.body.dataset.transforms === '1'")
    kept = [(t, st) for t, st in samples if "lex" not in st]
    start = samples[0][0]
    want = sum(1 for t, st in kept if 1200 <= t - start < 2400 and "parse" in st)
    got = _flame_numbers(page)
    assert "lex" not in got
    assert got["parse"][0] == want, (got["parse"], want)
    # Cleared, the transform stays and counts the whole recording again.
    page.locator("#fg-range button").click()
    wait(page, "document.body.dataset.range === ''")
    got = _flame_numbers(page)
    assert got["parse"][0] == sum(1 for _, st in kept if "parse" in st)
    assert page.errors == []


def test_a_diff_page_has_no_range(tmp_path):
    # Its colours are the two whole recordings' change: a range of NEW alone would leave
    # them saying something else. The page carries no samples to select from.
    from jsprof.analysis.calltree import build_call_tree
    from jsprof.analysis.diff import tree_changes
    from jsprof.render.flame import render_flame

    rec, _ = _phases()
    tree = build_call_tree(rec)
    change = tree_changes(tree, tree)
    diff = render_flame(tree, "html", rec=rec, change=change)
    plain = render_flame(tree, "html", rec=rec)
    assert 'id="fg-samples"' in plain and 'id="fg-samples"' not in diff


def test_a_pages_range_table_and_a_lanes_range_table_are_one_table(browser, tmp_path):
    """The Time view's range table comes from the page's samples (every view counts the
    range) or, on a page without them (a diff's), from the lanes' runs: one table, the
    same columns, rows, order and numbers for the same range (the whole recording)."""
    from jsprof.analysis.calltree import build_call_tree
    from jsprof.analysis.diff import tree_changes
    from jsprof.render.flame import render_flame

    rec, samples = _phases()
    tree = build_call_tree(rec)
    tables = {}
    for kind, change in (("plain", None), ("diff", tree_changes(tree, tree))):
        path = tmp_path / f"{kind}.html"
        path.write_text(render_flame(tree, "html", rec=rec, change=change), encoding="utf-8")
        page = _page(browser, path.as_uri() + "#view=time")
        wait(page, "document.body.dataset.view === 'time'")
        page.locator("[data-lane='main'] canvas").dblclick()  # the whole view
        wait(page, "document.querySelectorAll(\"[data-panel='range'] tr[data-f]\").length > 0")
        heads = page.eval_on_selector_all("[data-panel='range'] th",
                                          "ths => ths.map(t => t.textContent)")
        rows = page.eval_on_selector_all(
            "[data-panel='range'] tr[data-f]",
            "trs => trs.map(tr => Array.from(tr.children, td => td.textContent))")
        tables[kind] = (heads, rows)
        assert page.errors == []
    assert tables["plain"][0] == tables["diff"][0] == [
        "Self ms", "Self %", "Total ms", "Total %", "Function", "Location"]
    plain, diff = tables["plain"][1], tables["diff"][1]
    # (the samples with no stack are a row of the page's, no lane's)
    assert [r[4] for r in plain] == ["parse", "paint", "lex", "(idle)", "main", "render"]
    assert [r[4] for r in diff] == [r[4] for r in plain if r[4] != "(idle)"]
    want = _by_hand(samples, 0, 1e9)
    for rows in (plain, diff):
        for r in rows:
            if r[4] != "(idle)":
                assert float(r[2]) == pytest.approx(want[r[4]][1], abs=0.051), r


def _late_track() -> Recording:
    """Two tracks, the second's time origin an hour after the first's (tracks of one
    recording made apart, e.g. two workers' or merged runs): main>a then, 3,600 s on,
    main>b, 100 samples each 1 ms apart."""
    from jsprof.trace import Track

    def trace(name: str):
        b = TraceBuilder()
        r = b.resource_id("file:///app.js")
        st = b.stack_id([b.frame_id("main", r, 1, 1), b.frame_id(name, r, 2, 1)])
        for k in range(100):
            b.add_sample(float(k), st)
        return b.build()

    origin = 1.7e12
    return Recording([Track("early", trace("a"), origin, sample_interval=1.0),
                      Track("late", trace("b"), origin + 3_600_000.0, sample_interval=1.0)])


def test_a_track_that_starts_an_hour_late_keeps_its_sample_times():
    """The page's sample times were int32 µs gaps from the start: a lane's first gap of an
    hour (3.6e9 µs) wrapped to -0.69e9, so a range over the late track counted nothing."""
    import base64
    import zlib

    import numpy as np

    from jsprof.analysis.calltree import build_call_tree
    from jsprof.render.viewer_samples import sample_columns

    rec = _late_track()
    cols = sample_columns(rec, build_call_tree(rec), None)
    assert cols is not None
    for lane, first_ms in zip(cols["lanes"], (0.0, 3_600_000.0), strict=True):
        gaps = np.frombuffer(zlib.decompress(base64.b64decode(lane["t"])), "<i4")
        us = lane.get("t0", 0) + np.cumsum(gaps.astype(np.int64))
        assert us.tolist() == [round((first_ms + k) * 1000) for k in range(100)]


def test_a_range_over_a_late_track_counts_its_samples(browser, tmp_path):
    page = _page(browser, _flame(_late_track(), tmp_path) + "#range=3600010-3600050")
    wait(page, "document.body.dataset.range === '3600010-3600050'")
    got = _flame_numbers(page)
    assert got == {"main": (40, 40.0), "b": (40, 40.0)}, got
    assert page.errors == []
