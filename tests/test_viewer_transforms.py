"""The viewer's transforms, in headless Chromium: each command-line kind applied in the page
gives `jsprof report --transform`'s numbers on a real recording (QuickJS running acorn,
npm-pinned) and the command line's call paths on the hand-built recording of
test_transforms; the page's own kinds against results computed by hand; and the page's
menu, keys, bar, undo and link."""

import json
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pytest

import jsprof
from browser_util import playwright_chromium
from jsprof import io
from jsprof.analysis import transforms
from jsprof.analysis.calltree import build_call_tree
from jsprof.cli import main
from jsprof.trace import NO_STACK_NAMES, NONE
from test_transforms import ORIGINAL, _paths, _rec
from viewer_util import on_screen, open_page, record_acorn, wait, write_page


@pytest.fixture(scope="module")
def acorn_trace(tmp_path_factory) -> Path:
    return record_acorn(tmp_path_factory.mktemp("acorn"))


@pytest.fixture(scope="module")
def acorn_page(acorn_trace, tmp_path_factory) -> Path:
    return write_page(acorn_trace, tmp_path_factory.mktemp("page") / "acorn.html")


@pytest.fixture(scope="module")
def browser():
    with playwright_chromium() as b:
        yield b


def _apply(page, specs: list[str]) -> None:
    """Put `specs` in the page's link and wait until the page shows them."""
    page.evaluate(f"location.hash = 'view=flame&tf=' + {json.dumps(quote(chr(10).join(specs)))}")
    want = json.dumps(json.dumps(specs, separators=(",", ":")))
    wait(page, f"JSON.stringify(jsprofTransforms().map(t => t.spec)) === {want}")


def _report(trace: Path, capsys, specs: list[str]) -> dict:
    capsys.readouterr()
    args = ["report", str(trace), "--json", "--all"]
    for s in specs:
        args += ["--transform", s]
    assert main(args) == 0
    return json.loads(capsys.readouterr().out)


def _widest_path(trace: Path, depth: int) -> str:
    """The names of the widest call path `depth` deep, root first, joined by `>`."""
    t = build_call_tree(io.load(trace))
    node = max(t.roots(), key=lambda r: t.total_ms[r])
    path = [node]
    for _ in range(depth - 1):
        kids = np.nonzero(t.parent == path[-1])[0]
        path.append(int(max(kids, key=lambda k: t.total_ms[k])))
    return ">".join(t.functions[int(t.function[n])].label() for n in path)


def test_each_kind_in_the_page_is_the_command_lines(browser, acorn_trace, acorn_page, capsys):
    page = open_page(browser, acorn_page.as_uri(), "flame")
    two, four = _widest_path(acorn_trace, 2), _widest_path(acorn_trace, 4)
    cases = [
        ["merge:pp.next"], ["merge:*.parseExpression"], [f"merge-node:{two}"],
        [f"focus-subtree:{four}"], ["focus:*.parseStatement"], ["collapse:*.parseStatement"],
        ["collapse-resource:*acorn.mjs"], ["collapse-recursion:*.parseStatement"],
        ["drop:*.parseExpression"], ["focus-resource:*acorn.mjs"],
        # in order, each on what the one before left
        ["merge:pp.next", "focus:*.parseStatement", "collapse:pp.readWord"],
        ["collapse-resource:*acorn.mjs", "merge-node:(anonymous driver.mjs:1)"],
    ]
    kinds = {s.split(":")[0] for c in cases for s in c}
    assert kinds == set(transforms.KINDS)
    for specs in cases:
        _apply(page, specs)
        steps = page.evaluate("jsprofTransforms()")
        assert all(t["matched"] and not t["error"] for t in steps), specs
        got = page.evaluate("jsprofFunctionTotals()")
        want = _report(acorn_trace, capsys, specs)
        assert got["total"] == pytest.approx(want["total_ms"], abs=1.5e-3), specs
        rows = {(r["name"], r["location"]): r for r in want["rows"] if r["total_samples"] > 0}
        mine = {(r["name"], r["loc"]): r for r in got["rows"] if r["totalN"] > 0}
        assert set(mine) == set(rows), (specs, set(mine) ^ set(rows))
        for key, r in rows.items():
            m = mine[key]
            assert (round(m["selfN"]), round(m["totalN"])) == (
                r["self_samples"], r["total_samples"]), (specs, key)
            assert m["self"] == pytest.approx(r["self_ms"], abs=1.5e-3), (specs, key)
            assert m["total"] == pytest.approx(r["total_ms"], abs=1.5e-3), (specs, key)
    # A spec that matches nothing changes nothing and says so (the command line refuses it).
    _apply(page, ["merge:no such function"])
    assert page.evaluate("jsprofTransforms()")[0]["matched"] is False
    assert page.locator("#fg-transforms .tf-step.bad").count() == 1
    assert page.errors == []


# ---- the hand-built recording (test_transforms): call paths, exactly -----------------------

def _page_paths(page) -> dict[tuple[str, ...], float]:
    got = page.evaluate("jsprofPaths()")
    # the sample with no stack is the tree's "(idle)" root, () in _paths
    return {(() if k == "(idle)" else tuple(k.split(" > "))): v for k, v in got.items()}


@pytest.fixture(scope="module")
def hand_page(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("hand")
    jsprof.save(_rec(), d / "hand.jsprof.json")
    return write_page(d / "hand.jsprof.json", d / "hand.html")


CLI_SPECS = [
    ["merge:A"], ["merge:main"], ["merge:li*"], ["merge-node:main>A>B"],
    ["merge-node:main>fib>fib"],
    ["focus-subtree:main>A"], ["focus-subtree:main>fib>A"], ["focus:A"], ["focus:fib"],
    ["collapse:A"], ["collapse:lib1"], ["collapse-resource:*/lib.js"],
    ["collapse-recursion:fib"], ["drop:A"], ["drop:lib2"],
    ["merge:A", "focus:fib"], ["focus:A", "merge:A"], ["merge:A", "focus-subtree:main>B"],
    ["focus-resource:*/lib.js"], ["focus-resource:*/app.js"],
    ["merge:X", "focus-resource:*/lib.js"],
]


def test_the_hand_built_recording_gives_the_command_lines_paths(browser, hand_page):
    page = open_page(browser, hand_page.as_uri(), "flame")
    assert _page_paths(page) == ORIGINAL
    for specs in CLI_SPECS:
        _apply(page, specs)
        want = _paths(transforms.apply(_rec(), "hand", [transforms.parse_spec(s) for s in specs]))
        got = _page_paths(page)
        assert got.keys() == want.keys(), specs
        for k, v in want.items():
            assert got[k] == pytest.approx(v), (specs, k)
    assert page.errors == []


def _with(changes: dict, drop: tuple = ()) -> dict:
    out = {k: v for k, v in ORIGINAL.items() if k not in drop}
    for k, v in changes.items():
        out[k] = out.get(k, 0.0) + v
    return out


def test_focus_on_resource_by_hand_from_the_menu_key_and_the_link(browser, hand_page):
    """focus-resource:URL keeps only one script's frames: the others leave (their self
    time to their nearest caller in the script), the samples with none are dropped."""
    page = open_page(browser, hand_page.as_uri(), "flame")
    lib2 = max((f for f in _frames(page) if f["name"] == "lib2"), key=lambda f: f["w"])
    page.mouse.click(lib2["cx"], lib2["cy"], button="right")
    entry = page.locator("#fg-menu button[data-kind='focus-resource']")
    assert entry.get_attribute("title") == "focus-resource:file:///srv/lib.js"
    page.keyboard.press("Escape")
    page.mouse.move(lib2["cx"], lib2["cy"])
    page.keyboard.press("s")  # the menu entry's key, on the frame under the pointer
    wait(page, "document.body.dataset.transforms === '1'")
    assert "tf=focus-resource%3Afile%3A%2F%2F%2Fsrv%2Flib.js" in page.url
    # main>lib1>lib2 (1 ms) and main>lib1>X>lib2 (3 ms): main and X leave
    assert _page_paths(page) == {("lib1", "lib2"): 4.0}
    assert {f["name"] for f in _frames(page)} >= {"lib1", "lib2"}
    assert not {"main", "X", "A"} & {f["name"] for f in _frames(page)}
    # app.js: lib1 and lib2 leave; main gets lib2's 1 ms, main>X the 3 ms; idle dropped
    _apply(page, ["focus-resource:*/app.js"])
    assert _page_paths(page) == _with(
        {("main",): 1, ("main", "X"): 3},
        drop=((), ("main", "lib1", "lib2"), ("main", "lib1", "X", "lib2")))
    assert page.evaluate("jsprofFunctionTotals()")["total"] == pytest.approx(14.0)
    # a script no frame is of: matches nothing, changes nothing
    _apply(page, ["focus-resource:*/nosuch.js"])
    assert page.evaluate("jsprofTransforms()")[0]["matched"] is False
    assert _page_paths(page) == ORIGINAL
    assert page.errors == []


def test_a_scripts_sibling_frames_collapse_into_one(browser, tmp_path):
    """main calls lib1 and lib2 (both lib.js) and app's B: collapse-resource:*lib.js makes
    main>lib.js one frame of both (the page builds the step without look-ups where no two
    children can meet, so this is the case it must see)."""
    from jsprof.trace import Recording, TraceBuilder

    b = TraceBuilder()
    app, lib = b.resource_id("file:///srv/app.js"), b.resource_id("file:///srv/lib.js")
    fr = {n: b.frame_id(n, lib if n.startswith("lib") else app, k + 1, 1)
          for k, n in enumerate(("main", "lib1", "lib2", "B", "C"))}
    stacks = [("main", "lib1"), ("main", "lib2"), ("main", "lib2", "C"), ("main", "B"),
              ("main", "lib1", "C"), ("main", "lib1", "C")]
    for t, st in enumerate(stacks):
        b.add_sample(float(t), b.stack_id([fr[n] for n in st]))
    jsprof.save(Recording.of(b.build(), sample_interval=1.0), tmp_path / "sib.jsprof.json")
    page = open_page(browser, write_page(tmp_path / "sib.jsprof.json",
                                         tmp_path / "sib.html").as_uri(), "flame")
    _apply(page, ["collapse-resource:*lib.js"])
    assert _page_paths(page) == {("main", "lib.js"): 2.0, ("main", "lib.js", "C"): 3.0,
                                 ("main", "B"): 1.0}
    # one frame each (the paths above would sum two frames of one path alike)
    assert sorted((f["name"], f["depth"]) for f in _frames(page)) == [
        ("B", 2), ("C", 3), ("all", 0), ("lib.js", 2), ("main", 1)]
    assert page.errors == []


def test_the_pages_own_kinds_by_hand(browser, hand_page):
    page = open_page(browser, hand_page.as_uri(), "flame")
    # fib called by fib joins its caller; fib called through A stays
    direct = _with({("main", "fib", "B"): 2}, drop=(("main", "fib", "fib", "B"),))
    _apply(page, ["collapse-direct-recursion:fib"])
    assert _page_paths(page) == direct
    # DevTools' "hide repeating children" of main>fib: the same, under that node only
    _apply(page, ["hide-repeating:main>fib"])
    assert _page_paths(page) == direct
    _apply(page, ["hide-repeating:main>A"])
    assert _page_paths(page) == ORIGINAL
    # the ignore list: lib.js's functions leave every path, their time to their callers
    _apply(page, [r"ignore:/lib\.js$"])
    assert _page_paths(page) == _with(
        {("main",): 1, ("main", "X"): 3},
        drop=(("main", "lib1", "lib2"), ("main", "lib1", "X", "lib2")))
    # a bad regular expression is said in the bar and changes nothing
    _apply(page, ["ignore:("])
    assert "not a regular expression" in page.evaluate("jsprofTransforms()")[0]["error"]
    assert _page_paths(page) == ORIGINAL
    assert page.errors == []


def test_the_ignore_list_is_merging_its_scripts_functions(browser, acorn_trace, acorn_page):
    """ignore:REGEX against the command line's merge of every frame of the matching
    scripts (transforms' own merge step, given that set of frames), rows as `report` has
    them: the functions' and those of the samples with no stack. A marker row ('(garbage
    collector)', '(idle)', '(program)') is no script's frame: the ignore list, as a merge,
    leaves it as it is, on both sides (the reference once left out report's no-stack rows,
    and failed when QuickJS's collector got its row, issue 32)."""
    page = open_page(browser, acorn_page.as_uri(), "flame")
    _apply(page, [r"ignore:acorn\.mjs$"])
    got = {(r["name"], r["loc"]): r for r in page.evaluate("jsprofFunctionTotals()")["rows"]}
    rec = io.load(acorn_trace)
    tracks = []
    for track in rec.tracks:
        tr = track.trace
        r = transforms._Rebuild(tr)
        hit = [f.resource_id is not None and tr.resources[f.resource_id].endswith("acorn.mjs")
               for f in tr.frames]
        assert any(hit)
        transforms._merge(r, hit)
        tracks.append(track.__class__(track.name, r.finish(track.sample_interval, False),
                                      sample_interval=track.sample_interval))
    from jsprof.analysis.profile import summarize

    s = summarize(jsprof.Recording(tracks))
    want = {(k.label(), k.location()): (float(a), float(b)) for k, a, b in
            zip(s.stats.keys, s.stats.self_ms, s.stats.total_ms, strict=True) if b > 0}
    want.update({(r.label, ""): (r.ms, r.ms) for r in s.no_js if r.ms > 0})
    # acorn's ASTs are garbage for QuickJS's collector: its row is there to keep
    assert ("(garbage collector)", "") in want
    assert {k for k in got if got[k]["total"] > 0} == set(want)
    assert not any("acorn.mjs" in loc for _, loc in want)
    for k, (a, b) in want.items():
        assert (got[k]["self"], got[k]["total"]) == pytest.approx((a, b), abs=1e-6), k


# ---- the page's menu, keys, bar, undo and link ---------------------------------------------

def _frames(page) -> list[dict]:
    return page.evaluate("jsprofFrames()")


def test_menu_keys_bar_undo_and_the_link(browser, acorn_page):
    page = open_page(browser, acorn_page.as_uri(), "flame")
    wait(page, "!!document.getElementById('fg-transforms')")
    before = [(f["name"], round(f["w"], 3)) for f in _frames(page)]
    fill = {f["name"]: f["fill"] for f in _frames(page)}
    word = max((f for f in _frames(page) if f["name"] == "pp.readWord"), key=lambda f: f["w"])
    # right-click a frame: its menu; "Merge function" merges it everywhere
    word = on_screen(page, word)
    page.mouse.click(word["cx"], word["cy"], button="right")
    assert page.locator("#fg-menu").is_visible()
    merge = page.locator("#fg-menu button[data-kind='merge']")
    assert merge.get_attribute("title") == "merge:pp.readWord"
    page.locator("#fg-menu button[data-kind='merge']").click()
    wait(page, "document.body.dataset.transforms === '1'")
    assert "tf=merge%3App.readWord" in page.url
    assert not page.locator("#fg-menu").count()
    assert not any(f["name"] == "pp.readWord" for f in _frames(page))
    # the page's own layout colours each function as render/flame/ did
    assert {f["name"]: f["fill"] for f in _frames(page) if f["name"] in fill} == {
        n: fill[n] for n in {f["name"] for f in _frames(page)} if n in fill}
    assert page.locator("#fg-transforms .tf-step.on").text_content() == "1. merge:pp.readWord"
    # the menu by keyboard: down to an entry, Escape closes it with nothing done
    wide = on_screen(page, max((f for f in _frames(page) if f["depth"] > 0), key=lambda f: f["w"]))
    page.mouse.click(wide["cx"], wide["cy"], button="right")
    wait(page, "!!document.getElementById('fg-menu')")
    page.keyboard.press("ArrowDown")
    assert page.evaluate("document.activeElement.dataset.kind") == "merge-node"
    page.keyboard.press("Escape")
    assert not page.locator("#fg-menu").count()
    assert page.evaluate("document.body.dataset.transforms") == "1"
    # a key on the frame under the pointer: F focuses on its function
    stmt = on_screen(page, max((f for f in _frames(page) if f["name"] == "pp$8.parseStatement"),
                               key=lambda f: f["w"]))
    page.mouse.move(stmt["cx"], stmt["cy"])
    page.keyboard.press("Shift+F")
    wait(page, "document.body.dataset.transforms === '2'")
    assert {f["name"] for f in _frames(page) if f["depth"] == 1} == {"pp$8.parseStatement"}
    shown = [(f["name"], round(f["w"], 3)) for f in _frames(page)]
    # the link reproduces the view
    again = open_page(browser, page.url, "flame")
    wait(again, "document.body.dataset.transforms === '2'")
    assert [(f["name"], round(f["w"], 3)) for f in _frames(again)] == shown
    # Ctrl+Z takes the last off; the bar's first step goes back to the complete profile
    page.mouse.move(5, 5)
    page.keyboard.press("Control+z")
    wait(page, "document.body.dataset.transforms === '1'")
    page.locator("#fg-transforms [data-step='0']").click()
    wait(page, "document.body.dataset.transforms === '0'")
    assert [(f["name"], round(f["w"], 3)) for f in _frames(page)] == before
    # a table row's menu: drop the samples with the hottest function; the tabs keep it.
    # A row of samples with no stack ('(garbage collector)', QuickJS's collector, issue 32:
    # acorn's hottest row) is no function: every entry of its menu is off, as no command-
    # line transform matches it (test_samples_without_a_stack_are_no_frame_to_transform)
    page.locator("nav.tabs a[data-tab='bottomup']").click()
    wait(page, "document.body.dataset.view === 'bottomup'")
    table = page.evaluate("jsprofTableRows()")
    for marker in [r for r in table if r["name"] in NO_STACK_NAMES and not r["loc"]]:
        page.locator(f"#v-bottomup tr[data-key='{marker['key']}']").click(button="right")
        wait(page, "!!document.getElementById('fg-menu')")
        assert page.locator("#fg-menu button:not([disabled])").count() == 0, marker
        page.keyboard.press("Escape")
        assert not page.locator("#fg-menu").count()
    top = [r for r in table if r["loc"]][0]
    page.locator(f"#v-bottomup tr[data-key='{top['key']}']").click(button="right")
    page.locator("#fg-menu button[data-kind='drop']").click()
    wait(page, "document.body.dataset.transforms === '1'")
    rows = page.evaluate("jsprofTableRows()")
    assert top["name"] not in {r["name"] for r in rows}
    page.locator("nav.tabs a[data-tab='flame']").click()
    wait(page, "document.body.dataset.view === 'flame' && location.hash.indexOf('tf=drop') >= 0")
    assert page.evaluate("document.body.dataset.transforms") == "1"
    # the ignore list's box
    page.fill("#fg-ignore", r"acorn\.mjs$")
    page.press("#fg-ignore", "Enter")
    wait(page, "document.body.dataset.transforms === '2'")
    names = {r["loc"] for r in page.evaluate("jsprofFunctionTotals()")["rows"]}
    assert not any("acorn.mjs" in n for n in names)
    assert page.errors == []


def test_samples_without_a_stack_are_no_frame_to_transform(browser, hand_page):
    """The "(idle)" row is samples with no stack: no transform matches it, focus drops it."""
    page = open_page(browser, hand_page.as_uri(), "flame")
    _apply(page, ["merge:(idle)"])
    assert page.evaluate("jsprofTransforms()")[0]["matched"] is False
    _apply(page, ["focus-subtree:main"])
    assert () not in _page_paths(page)
    rec = transforms.apply(_rec(), "hand", [transforms.parse_spec("focus-subtree:main")])
    assert not (rec.tracks[0].trace.sample_stack == NONE).any()


# ---- a Time range, transforms and the tables together -------------------------------------

def test_a_range_the_transforms_and_the_tables_are_the_command_lines(browser, acorn_trace,
                                                                     acorn_page, capsys):
    """#range=A-B (ms from the recording's start) with tf=... : the tables count the
    transformed samples of the range, as `report --time-range --transform` does; clearing
    the range gives the whole recording's back."""
    tr = io.load(acorn_trace).tracks[0].trace
    t = np.sort(tr.sample_time.astype(float))
    t0 = float(t[0])
    # edges half way between two samples: no sample sits near one
    i, j = len(t) // 4, len(t) // 2
    a, b = round((t[i - 1] + t[i]) / 2 - t0, 3), round((t[j - 1] + t[j]) / 2 - t0, 3)
    specs = ["merge:pp.next"]
    page = open_page(browser, acorn_page.as_uri() + f"#view=bottomup&range={a}-{b}&tf="
                     + quote("\n".join(specs)), "bottomup")
    wait(page, "!!document.body.dataset.range && document.body.dataset.transforms === '1'")
    capsys.readouterr()
    assert main(["report", str(acorn_trace), "--json", "--all", "--time-range",
                 f"{t0 + a}:{t0 + b}", "--transform", specs[0]]) == 0
    want = json.loads(capsys.readouterr().out)
    n = int(((t >= t0 + a) & (t < t0 + b)).sum())
    assert want["total_samples"] == n
    got = page.evaluate("jsprofFunctionTotals()")
    # (the page keeps times in whole microseconds: a sample's weight within 1 us)
    tol = 1e-3 * n + 2e-3
    assert got["total"] == pytest.approx(want["total_ms"], abs=tol)
    rows = {(r["name"], r["location"]): r for r in want["rows"] if r["total_samples"] > 0}
    mine = {(r["name"], r["loc"]): r for r in got["rows"] if r["totalN"] > 0}
    assert set(mine) == set(rows)
    for key, r in rows.items():
        assert (round(mine[key]["selfN"]), round(mine[key]["totalN"])) == (
            r["self_samples"], r["total_samples"]), key
        assert mine[key]["total"] == pytest.approx(r["total_ms"], abs=tol), key
    top = max(rows.values(), key=lambda r: (r["self_ms"], r["total_ms"]))
    wait(page, "jsprofTableRows().length > 0 && "
               f"jsprofTableRows()[0].name === {json.dumps(top['name'])}")
    first = page.evaluate("jsprofTableRows()")[0]
    assert float(first["self"]) == pytest.approx(top["self_ms"], abs=0.05 + tol)
    # the range cleared: the table counts the whole recording (still transformed)
    whole = _report(acorn_trace, capsys, specs)
    wtop = max(whole["rows"], key=lambda r: (r["self_ms"], r["total_ms"]))
    page.evaluate("location.hash = location.hash.replace(/&?range=[^&]*/, '')")
    wait(page, "!document.body.dataset.range")
    wait(page, f"Math.abs(parseFloat(jsprofTableRows()[0].self) - {wtop['self_ms']}) < 0.06")
    assert page.evaluate("document.body.dataset.transforms") == "1"
    assert page.errors == []


def test_a_link_of_thousands_of_steps_applies_at_most_the_limit(browser, hand_page):
    """Each step keeps a whole tree: a link of 5,000 steps applied them all (5,000 trees
    held). The page applies the first JV.MAX_STEPS and says how many more it left out."""
    page = open_page(browser, hand_page.as_uri(), "flame")
    limit = page.evaluate("JsprofViewer.MAX_STEPS")
    assert 16 <= limit <= 256
    specs = ["merge:lib1"] + [f"merge:nothing{i}" for i in range(4999)]
    page.evaluate(f"location.hash = 'view=flame&tf=' + {json.dumps(quote(chr(10).join(specs)))}")
    wait(page, f"document.body.dataset.transforms === '{limit}'")
    got = page.evaluate("jsprofTransforms()")
    assert [t["spec"] for t in got] == specs[:limit]
    assert got[0]["matched"] and not got[1]["matched"]
    note = page.locator("#fg-transforms .tf-over")
    assert note.text_content() == (
        f"{5000 - limit} more in the link not applied (at most {limit} transforms)")
    # Undo goes back one step of the applied ones, and the note leaves with the extra ones.
    page.keyboard.press("Control+z")
    wait(page, f"document.body.dataset.transforms === '{limit - 1}'")
    assert page.locator("#fg-transforms .tf-over").count() == 0
    assert page.errors == []


def test_an_ignore_pattern_that_backtracks_without_end_is_refused(browser, hand_page):
    """A link is anyone's: `ignore:(a+)+$` ran on every script URL and could hang the tab.
    Quantified groups holding a quantifier or `|`, back-references and long patterns are
    refused in the page's one line; ordinary URL patterns still apply."""
    page = open_page(browser, hand_page.as_uri(), "flame")
    refused = page.evaluate("""() => ["(a+)+$", "(a|aa)*b", "((x*))+", "(\\\\w+\\\\s?){3}",
        "(a)\\\\1", "x".repeat(201)].map(p => {
        try { JsprofViewer.parseSpec("ignore:" + p); return null; } catch (e) { return e.message; }
    })""")
    assert all(r is not None and "back-reference" in r for r in refused), refused
    kept = page.evaluate("""() => ["node_modules", "(vendor|lib)/", "^https://cdn\\\\.",
        "(ab)+", "[a+]+"].map(p => JsprofViewer.parseSpec("ignore:" + p).re.source)""")
    assert len(kept) == 5
    assert page.errors == []
