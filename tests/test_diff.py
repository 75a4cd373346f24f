"""Profile diffs on traces whose share changes follow from how they were built."""

import json
import re

import numpy as np
import pytest

from jsprof import io
from jsprof.analysis.calltree import build_call_tree
from jsprof.analysis.diff import (
    ALL_UNITS,
    KeyRule,
    NameKey,
    check_gates,
    diff_profiles,
    parse_gate,
    tree_changes,
)
from jsprof.cli import main
from jsprof.errors import UsageError
from jsprof.trace import Recording, TraceBuilder

APP = "file:///app.js"


def _rec(stacks, lines=None, resource=APP):
    """One sample per ms; stacks are lists of names, outermost first; `lines` moves
    functions (as an edit above them would), by name."""
    b = TraceBuilder()
    r = b.resource_id(resource)
    lines = lines or {}
    for i, names in enumerate(stacks):
        ids = [b.frame_id(n, r, lines.get(n, 10 + len(n)), 3) for n in names]
        b.add_sample(float(i), b.stack_id(ids))
    return Recording.of(b.build(), sample_interval=1.0)


# BASE: 10 ms, a 6 (60%), b 3 (30%), gone 1 (10%).
BASE = [["main", "a"]] * 6 + [["main", "b"]] * 3 + [["main", "gone"]]
# NEW: 20 ms, a 4 (20%), b 6 (30%), c 10 (50%, new); `a` moved 40 lines down.
NEW = [["main", "a"]] * 4 + [["main", "b"]] * 6 + [["main", "c"]] * 10


def _rows(d):
    return {r.key.name: r for r in d.rows}


def test_share_changes_follow_from_construction():
    d = diff_profiles(_rec(BASE), _rec(NEW, lines={"a": 55}))
    rows = _rows(d)
    assert d.base_total_ms == pytest.approx(10) and d.new_total_ms == pytest.approx(20)
    # a moved to another line but is still matched (by name and resource): 60% -> 20%.
    assert rows["a"].status == ""
    assert rows["a"].d_self == pytest.approx(-40) and rows["a"].d_total == pytest.approx(-40)
    assert rows["a"].relative("self") == pytest.approx(-200 / 3)
    assert rows["b"].d_self == pytest.approx(0) and rows["b"].new_self == pytest.approx(30)
    assert rows["c"].status == "new" and rows["c"].d_self == pytest.approx(50)
    assert rows["c"].relative("self") == float("inf")
    assert rows["gone"].status == "removed" and rows["gone"].d_total == pytest.approx(-10)
    # main has no self time and 100% total in both.
    assert rows["main"].d_self == 0 and rows["main"].d_total == pytest.approx(0)
    # Largest absolute change first; the unchanged ones last.
    assert [r.key.name for r in d.rows][:3] == ["c", "a", "gone"]
    assert {r.key.name for r in d.rows[3:]} == {"b", "main"}


def test_recursion_counts_once_in_total_share():
    base = _rec([["main", "f", "f", "f"]] * 5 + [["main", "g"]] * 5)
    new = _rec([["main", "f"]] * 5 + [["main", "g"]] * 5)
    rows = _rows(diff_profiles(base, new))
    assert rows["f"].base_total == pytest.approx(50)  # not 150
    assert rows["f"].d_total == pytest.approx(0)


def test_query_string_of_resource_does_not_break_the_match():
    base = _rec(BASE, resource="https://x.test/app.js?v=41")
    new = _rec(BASE, resource="https://x.test/app.js?v=42#frag")
    d = diff_profiles(base, new)
    assert all(r.status == "" and r.impact == pytest.approx(0) for r in d.rows)
    assert d.rows[0].key.resource == "https://x.test/app.js"


def test_fixture_against_itself_is_zero(data):
    rec = io.load(data / "chromium" / "trace-basic.json")
    d = diff_profiles(rec, io.load(data / "chromium" / "trace-basic.json"))
    assert len(d.rows) > 5
    assert all(r.status == "" for r in d.rows)
    assert max(r.impact for r in d.rows) == pytest.approx(0, abs=1e-9)
    assert NameKey("busyLoop", "http://127.0.0.1:8000/page.html") in {r.key for r in d.rows}
    tree = build_call_tree(rec)
    ch = tree_changes(tree, build_call_tree(rec))
    assert ch.in_base.all()
    assert np.abs(ch.d_self).max() == pytest.approx(0, abs=1e-9)
    assert np.abs(ch.d_total).max() == pytest.approx(0, abs=1e-9)


def test_fixtures_of_two_pages_differ_as_their_workloads(data):
    d = diff_profiles(
        io.load(data / "chromium" / "trace-basic.json"),
        io.load(data / "chromium" / "trace-builtins.json"),
    )
    rows = _rows(d)
    assert rows["busyLoop"].status == "removed" and rows["busyLoop"].d_self < -50
    assert rows["domWork"].status == "new" and rows["domWork"].d_self > 5


def test_tree_changes_per_call_path():
    base = _rec(BASE)
    new = _rec(NEW, lines={"a": 55})
    tree = build_call_tree(new)
    ch = tree_changes(build_call_tree(base), tree)
    by_name = {tree.functions[int(tree.function[i])].name: i for i in range(len(tree.parent))}
    assert ch.d_self[by_name["a"]] == pytest.approx(-40)
    assert ch.d_self[by_name["c"]] == pytest.approx(50)
    assert not ch.in_base[by_name["c"]] and ch.in_base[by_name["a"]]
    assert ch.d_total[by_name["main"]] == pytest.approx(0)


def test_gates():
    d = diff_profiles(_rec(BASE), _rec(NEW))
    assert check_gates(d, [parse_gate("b:self>+1pp")]) == []
    (msg,) = check_gates(d, [parse_gate("c:self>+5pp")])
    assert "c (file:///app.js)" in msg and "+50.00pp" in msg
    assert check_gates(d, [parse_gate("a:total > -50pp")])  # -40 is above -50
    assert check_gates(d, [parse_gate("a:self<-30%")])  # relative: -66.7%
    assert not check_gates(d, [parse_gate("a:self<-70%")])
    assert len(check_gates(d, [parse_gate("*:self>+0.5pp")])) == 1  # only c grew
    assert check_gates(d, [parse_gate("c:total>+20%")])  # from nothing: infinitely more
    for bad in ("fib>3", "fib:self>5", "fib:wall>+5pp", ":self>+5pp"):
        with pytest.raises(UsageError, match="fail-if"):
            parse_gate(bad)


def _write(tmp_path, name, rec):
    p = tmp_path / name
    io.save(rec, p)
    return str(p)


def test_cli_diff_table_json_gate_and_flame(tmp_path, capsys):
    base = _write(tmp_path, "base.json", _rec(BASE))
    new = _write(tmp_path, "new.json", _rec(NEW))
    assert main(["diff", base, new]) == 0
    out = capsys.readouterr().out
    assert "c  [new]" in out and "gone  [removed]" in out and "-40.00" in out

    assert main(["diff", base, new, "--json", "--top", "2"]) == 0
    doc = json.loads(capsys.readouterr().out)
    # by change in self ms: c +10 ms, b +3 ms (its share stayed 30 %), a -2 ms, gone -1 ms
    assert [r["name"] for r in doc["rows"]] == ["c", "b"] and doc["ranked_by"] == "self_delta_ms"
    assert doc["rows"][0]["status"] == "new" and doc["rows"][0]["self_rel_pct"] is None
    assert doc["rows"][1]["self_pp"] == pytest.approx(0)
    assert doc["rows"][1]["self_delta_ms"] == pytest.approx(3)
    assert (doc["rows"][1]["base_self_ms"], doc["rows"][1]["new_self_ms"]) == (3, 6)

    flame = tmp_path / "d.html"
    rc = main(["diff", base, new, "--flame", str(flame), "--fail-if", "c:self>+10pp"])
    err = capsys.readouterr().err
    assert rc == 1 and "breaks --fail-if 'c:self>+10pp'" in err
    # two runs of one program: the flame graph too is coloured and labelled by ms, share
    # beside. The page draws on a canvas, its tooltips built by its script: read them there,
    # as a pointer would show them, and its legend; the SVG's <title>s say the same.
    said = ("vs base: self -2.0 ms (-40.00 pp)", "new: this call path is not in the base",
            "more self time than base (up to +10.0 ms)")
    from browser_util import playwright_chromium

    with playwright_chromium() as b:
        pg = b.new_page(viewport={"width": 1280, "height": 700})
        errors: list[str] = []
        pg.on("pageerror", lambda e: errors.append(str(e)))
        pg.goto(flame.as_uri())
        for _ in range(400):
            if pg.evaluate("document.body.dataset.ready === '1' || !!document.body.dataset.view"):
                break
            pg.wait_for_timeout(50)
        tips = pg.evaluate("jsprofFrames().map(f => jsprofTip(f.i)).join('\\n')")
        legend = pg.inner_text(".legend")
        assert not errors, errors
    assert said[0] in tips and said[1] in tips, tips
    assert said[2] in legend, legend
    svg = tmp_path / "d.svg"
    assert main(["diff", base, new, "--flame", str(svg)]) == 0
    for text in said[:2]:  # the SVG has no legend: its tooltips only
        assert text in svg.read_text(), text

    assert main(["diff", base, new, "--fail-if", "c>1"]) == 2
    assert main(["diff", base, new, "--flame", str(tmp_path / "d.png")]) == 2
    assert not (tmp_path / "d.png").exists()


def test_diff_filter_names_need_to_match_in_one_profile_only(tmp_path, capsys):
    """`--exclude gone` when NEW removed `gone`: fine; a name neither has: one line, 2."""
    base = _write(tmp_path, "base.json", _rec(BASE))
    new = _write(tmp_path, "new.json", _rec(NEW))
    assert main(["diff", base, new, "--exclude", "gone", "--json"]) == 0
    rows = {r["name"] for r in json.loads(capsys.readouterr().out)["rows"]}
    assert "gone" not in rows and "a" in rows
    assert main(["diff", base, new, "--focus", "c"]) == 0  # only NEW has c
    capsys.readouterr()
    assert main(["diff", base, new, "--exclude", "nosuch"]) == 2
    err = capsys.readouterr().err
    assert "--exclude 'nosuch': no function in" in err and err.count("\n") == 1


def _rec_markers(spec):
    """(stack names or None, marker) per 1 ms sample."""
    b = TraceBuilder()
    r = b.resource_id(APP)
    for i, (names, marker) in enumerate(spec):
        sid = None if names is None else b.stack_id([b.frame_id(n, r, 1, 1) for n in names])
        b.add_sample(float(i), sid, marker)
    return Recording.of(b.build(), sample_interval=1.0)


def test_samples_without_a_stack_are_rows(tmp_path, capsys):
    # BASE 10 ms: f 6, (idle) 2, (garbage collector) 2; NEW 10 ms: f 3, (idle) 1, GC 5,
    # (program) 1.
    base = _rec_markers([(["f"], None)] * 6 + [(None, None)] * 2 + [(None, "gc")] * 2)
    new = _rec_markers([(["f"], None)] * 3 + [(None, None)] + [(None, "gc")] * 5
                       + [(None, "other")])
    d = diff_profiles(base, new)
    rows = {r.key: r for r in d.rows}
    gc = rows[NameKey("(garbage collector)", None)]
    assert gc.base_self == pytest.approx(20) and gc.new_self == pytest.approx(50)
    assert gc.d_total == pytest.approx(30)
    assert rows[NameKey("(idle)", None)].d_self == pytest.approx(-10)
    assert rows[NameKey("(program)", None)].status == "new"
    # every sample is in some row: self shares add up to 100 % on both sides
    assert sum(r.base_self for r in d.rows) == pytest.approx(100)
    assert sum(r.new_self for r in d.rows) == pytest.approx(100)
    b, n = _write(tmp_path, "b.json", base), _write(tmp_path, "n.json", new)
    assert main(["diff", b, n, "--fail-if", "(garbage collector):self>+5pp"]) == 1
    err = capsys.readouterr().err
    assert "(garbage collector): self share 20.00% -> 50.00%" in err
    assert main(["diff", b, n]) == 0
    out = capsys.readouterr().out
    gc_line = next(ln for ln in out.splitlines() if "(garbage collector)" in ln)
    assert "+30.00" in gc_line and "(unknown)" not in gc_line


# ---- issue 20: ranked by change in self ms; ms rules; anonymous functions by line ----


def test_ranked_by_self_ms_not_by_share():
    """`f` got 50 ms slower and the run waited 40 ms longer; `g` did not change. Every
    share fell, `g`'s most (-7.4 pp): ranked by share, the unchanged `g` came first."""
    base = _rec([["main", "g"]] * 900 + [["main", "f"]] * 10 + [None] * 90)
    new = _rec([["main", "g"]] * 900 + [["main", "f"]] * 60 + [None] * 130)
    d = diff_profiles(base, new, rank="ms")
    # main's total grew with f's self time: after every change in self time, before g
    assert [r.key.label() for r in d.rows] == ["f", "(idle)", "main", "g"]
    f = d.rows[0]
    assert (f.base_self_ms, f.new_self_ms, f.d_self_ms) == (10, 60, 50)
    assert f.d_self == pytest.approx(100 * 60 / 1090 - 1)  # the share is there too
    g = d.rows[3]
    assert g.d_self_ms == 0 and g.d_self == pytest.approx(100 * 900 / 1090 - 90)
    assert d.rows[2].d_self_ms == 0 and d.rows[2].d_total_ms == 50
    by_share = diff_profiles(base, new, rank="share")
    assert by_share.rows[0].key.name == "g"  # what `fleet diff` (populations) keeps
    # the differential flame graph of `jsprof diff` colours by ms: g is unchanged (white),
    # where by share it was the bluest node
    tree = build_call_tree(new)
    node = {tree.functions[int(tree.function[i])].name: i for i in range(len(tree.parent))}
    ms = tree_changes(build_call_tree(base), tree, unit="ms")
    pp = tree_changes(build_call_tree(base), tree)
    assert ms.colour[node["g"]] == 0 and ms.colour[node["f"]] == 50
    assert pp.colour[node["g"]] == pytest.approx(100 * 900 / 1090 - 90)


def _rec(stacks, lines=None, resource=APP):  # noqa: F811 - None: a sample with no stack
    b = TraceBuilder()
    r = b.resource_id(resource)
    lines = lines or {}
    for i, names in enumerate(stacks):
        if names is None:
            b.add_sample(float(i), None)
            continue
        ids = [b.frame_id(n, r, lines.get(n, 10 + len(n)), 3) for n in names]
        b.add_sample(float(i), b.stack_id(ids))
    return Recording.of(b.build(), sample_interval=1.0)


def test_rules_in_ms():
    base = _rec([["main", "g"]] * 900 + [["main", "f"]] * 10)
    new = _rec([["main", "g"]] * 900 + [["main", "f"]] * 60)
    d = diff_profiles(base, new, rank="ms")
    ms = ALL_UNITS
    (msg,) = check_gates(d, [parse_gate("f:self>+30ms", ms)])
    assert "f (file:///app.js): self time 10.0 ms -> 60.0 ms (+50.0ms)" in msg
    assert not check_gates(d, [parse_gate("f:self>+50ms", ms)])
    assert check_gates(d, [parse_gate("main:total>+49.5ms", ms)])
    assert not check_gates(d, [parse_gate("g:self>+1ms", ms)])
    assert check_gates(d, [parse_gate("g:self<-1pp", ms)])  # its share fell all the same
    # Where milliseconds don't compare (fleet diff: page loads of different lengths), the
    # default parser refuses them.
    with pytest.raises(UsageError, match=r"CHANGE in pp or % \(ms is not comparable here\)"):
        parse_gate("f:self>+30ms")


def test_a_rule_naming_no_function_is_refused_with_the_closest_names(tmp_path, capsys):
    base = _rec([["main", "render"]] * 5 + [["main", "renderList"]] * 5)
    new = _rec([["main", "render"]] * 9 + [["main", "renderList"]] * 5)
    d = diff_profiles(base, new, rank="ms")
    with pytest.raises(UsageError) as e:
        check_gates(d, [parse_gate("rendr:self>+1pp")])
    assert str(e.value) == (
        "--fail-if 'rendr:self>+1pp': no function named 'rendr' in either profile "
        "(the closest: render, renderList)"
    )
    with pytest.raises(UsageError, match="none is close; the largest changes: render, main"):
        check_gates(d, [parse_gate("zzz:self>+1pp")])
    b, n = _write(tmp_path, "b.json", base), _write(tmp_path, "n.json", new)
    # the rule that matches fails alone; with a typo beside it the run is an error
    assert main(["diff", b, n, "--fail-if", "render:self>+1ms"]) == 1
    capsys.readouterr()
    rules = ["--fail-if", "render:self>+1ms", "--fail-if", "rendr:self>+1ms"]
    assert main(["diff", b, n, *rules]) == 2
    cap = capsys.readouterr()
    assert cap.err == (
        "jsprof: error: --fail-if 'rendr:self>+1ms': no function named 'rendr' in either profile "
        "(the closest: render, renderList)\n"
    )
    assert cap.out == ""  # refused before any table


WORK = """\
function spin(n) {
  let x = 0;
  for (let i = 0; i < n; i++) x += i % 7;
  return x;
}
const data = [1, 2, 3];
const out = data.map(
  (v) => spin(v * MAP)
);
setTimeout(() => {
  globalThis.t = spin(150000 * SCALE);
}, 0);
let top = 0;
for (let i = 0; i < 150000 * SCALE; i++) top += i % 5;
"""


# loop counts per engine for tens of ms each: V8 runs these loops ~100x faster
@pytest.mark.parametrize("engine,scale", [("quickjs", 1), ("node", 300)])
def test_anonymous_functions_are_rows_of_their_own_on_a_real_engine(
    tmp_path, capsys, engine, scale
):
    """The script's own code (line 1), the `map` callback and the timer arrow
    of one file are three rows, matched across runs by line and named with it; the
    callback got slower and is the top row."""
    paths = []
    for name, work in (("base", 20000 * scale), ("new", 400000 * scale)):
        d = tmp_path / name
        d.mkdir()
        (d / "work.js").write_text(f"const MAP = {work}, SCALE = {scale};\n" + WORK)
        out = str(tmp_path / f"{name}.json")
        args = ["record", "-o", out, "--engine", engine, str(d / "work.js")]
        assert main(args) == 0
        paths.append(out)
    capsys.readouterr()
    # Unmatched, the two checkouts match nothing: every row [new] or [removed], and one
    # line says why and what to do (the table alone did not).
    assert main(["diff", *paths]) == 0
    err = capsys.readouterr().err
    # (Node's own node: frames match: 97-99 %)
    assert re.search(r"jsprof: warning: (9\d|100)% of NEW's time is in functions BASE does "
                     r"not have and (9\d|100)% of BASE's", err), err
    assert f"BASE's in {tmp_path / 'base' / 'work.js'}" in err
    assert f"NEW's in {tmp_path / 'new' / 'work.js'}" in err and "--strip-prefix" in err
    # the two checkouts are matched relative to their roots
    strip = ["--strip-prefix", str(tmp_path / "base"), "--strip-prefix", str(tmp_path / "new")]
    assert main(["diff", *paths, "--json", "--all", *strip]) == 0
    out = capsys.readouterr()
    assert "warning" not in out.err, out.err
    rows = json.loads(out.out)["rows"]
    anon = {r["name"]: r for r in rows if r["name"].startswith("(anonymous work.js")}
    # the script (line 1), the callback and the arrow (one line down: `const MAP` above)
    assert {"(anonymous work.js:1)", "(anonymous work.js:9)", "(anonymous work.js:11)"} <= set(
        anon
    ), [r["name"] for r in rows]
    assert anon["(anonymous work.js:9)"]["line"] == 9
    assert all(r["status"] in ("changed", "same") for r in anon.values())
    # the callback is what got slower: first among the script's own rows (spin is what
    # it calls, and the callback's total is where the time shows)
    ours = [r for r in rows if (r["resource"] or "").endswith("work.js")]
    assert ours[0]["name"] == "spin"
    cb = anon["(anonymous work.js:9)"]
    assert cb["total_delta_ms"] > 0.5 * ours[0]["self_delta_ms"] > 0
    assert main(["diff", *paths, *strip, "--fail-if", "(anonymous work.js:9):total>+20ms"]) == 1
    assert "(anonymous work.js:9) (work.js): total time" in capsys.readouterr().err
    # report, tree and flame graph name them alike
    assert main(["report", paths[1], "--json", "--all"]) == 0
    names = {r["name"] for r in json.loads(capsys.readouterr().out)["rows"]}
    assert "(anonymous work.js:9)" in names and "(anonymous work.js:11)" in names
    assert main(["report", paths[1], "--tree", "--threshold", "0"]) == 0
    assert "(anonymous work.js:9)" in capsys.readouterr().out
    flame = tmp_path / "f.html"
    assert main(["flame", paths[1], "-o", str(flame)]) == 0
    assert "(anonymous work.js:9)" in flame.read_text()
    # and --focus takes the name the tables show
    assert main(["report", paths[1], "--json", "--all", "--focus", "(anonymous work.js:9)"]) == 0
    names = {r["name"] for r in json.loads(capsys.readouterr().out)["rows"]}
    assert {"(anonymous work.js:9)", "spin"} <= names and "(anonymous work.js:11)" not in names


def _places(stacks, resource=APP):
    """Like _rec, with frames given as (name, line, column): many functions of one name."""
    b = TraceBuilder()
    r = b.resource_id(resource)
    for i, frames in enumerate(stacks):
        ids = [b.frame_id(n, r, line, col) for n, line, col in frames]
        b.add_sample(float(i), b.stack_id(ids))
    return Recording.of(b.build(), sample_interval=1.0)


def test_a_shared_name_matches_by_place():
    """Two `e`s and two anonymous functions of one line (a minified bundle), two runs of one
    build: four rows, told apart by place (issue 32, anonkey); a rule names one place or
    all. (A script that moved: the next test.)"""
    top = ("run", 1, 1)
    e1, e2, a1, a2 = ("e", 1, 40), ("e", 1, 90), ("", 1, 200), ("", 1, 300)
    base = _places([[top, e1]] * 4 + [[top, e2]] * 2 + [[top, a1]] * 3 + [[top, a2]])
    new = _places([[top, e1]] * 2 + [[top, e2]] * 6 + [[top, a1]] * 3 + [[top, a2]])
    d = diff_profiles(base, new, rank="ms", anonymous_by_line=True)
    rows = {r.key.label(): r for r in d.rows}
    assert set(rows) == {"run", "e@app.js:1:40", "e@app.js:1:90", "(anonymous app.js:1:200)",
                         "(anonymous app.js:1:300)"}
    assert rows["run"].status == "" and rows["run"].d_total == pytest.approx(0)  # 100 % both
    assert rows["e@app.js:1:40"].d_self_ms == pytest.approx(-2)
    assert rows["e@app.js:1:90"].d_self_ms == pytest.approx(4)
    assert rows["(anonymous app.js:1:200)"].d_self_ms == pytest.approx(0)
    assert len(check_gates(d, [parse_gate("e@app.js:1:90:self>+3ms", ALL_UNITS)])) == 1
    assert len(check_gates(d, [parse_gate("e@app.js:1:40:self>+3ms", ALL_UNITS)])) == 0
    assert len(check_gates(d, [parse_gate("e:self>+3ms", ALL_UNITS)])) == 1
    assert len(d.find("(anonymous app.js:1)")) == 2
    # the flame diff keys paths alike: each e its own node
    tree = build_call_tree(new)
    ch = tree_changes(build_call_tree(base), tree, unit="ms")
    by_col = {tree.functions[int(tree.function[i])].column: i for i in range(len(tree.parent))}
    assert ch.d_self_ms[by_col[40]] == pytest.approx(-2)
    assert ch.d_self_ms[by_col[90]] == pytest.approx(4)


def test_a_shared_name_whose_places_moved_matches_by_name():
    """review12: two `render` methods of one file (classes A and B), a comment line added
    above both: matched by line, B's `render` (line 3 before) was paired with A's (line 3
    after) and A's came out [new], failing a `render:self>+50%` gate on a move alone. As
    many places on each side, moved alike by one edit: paired in order, each render its
    own row (keyorder; review12's fix gave one row, the two added up). Where nothing pairs
    them (places that disagree, not as many on each side), the name matches by name as
    before anonkey: one row, its functions added up. And the flame diff keeps the paths
    under a shared name whose column moved (a rebuilt one-line bundle): they were all new."""
    run = ("run", 1, 1)
    a, b = ("render", 2, 10), ("render", 3, 10)
    a2, b2 = ("render", 3, 10), ("render", 4, 10)
    base = _places([[run, a]] * 6 + [[run, b]] * 4)
    new = _places([[("run", 2, 1), a2]] * 6 + [[("run", 2, 1), b2]] * 5)
    d = diff_profiles(base, new, rank="ms", anonymous_by_line=True)
    rows = {r.key.label(): r for r in d.rows}
    assert set(rows) == {"run", "render@app.js:3", "render@app.js:4"}, set(rows)
    assert rows["render@app.js:3"].status == "" and rows["render@app.js:3"].d_self_ms == 0
    assert rows["render@app.js:4"].status == "" and rows["render@app.js:4"].d_self_ms == 1
    assert check_gates(d, [parse_gate("render:self>+50%", ALL_UNITS)]) == []
    # B moved, A not sampled in NEW: B's place is A's old one, and one place against two
    # says nothing of which is which: by name, one row
    d = diff_profiles(base, _places([[("run", 2, 1), b2]] * 5), rank="ms",
                      anonymous_by_line=True)
    rows = {r.key.label(): r for r in d.rows}
    assert set(rows) == {"run", "render"}, set(rows)
    assert rows["render"].status == "" and rows["render"].d_self_ms == pytest.approx(-5)
    assert check_gates(d, [parse_gate("render:self>+50%", ALL_UNITS)]) == []
    # places that agree (two runs of one build, B not sampled in one): by place, as before
    d = diff_profiles(base, _places([[run, a]] * 9), rank="ms", anonymous_by_line=True)
    assert {r.key.label() for r in d.rows} == {"run", "render@app.js:2", "render@app.js:3"}
    # ... and where each run sampled one the other did not (A and B, A and C): `run` did
    # not move, so the script did not: by place
    c = ("render", 4, 10)
    d = diff_profiles(base, _places([[run, a]] * 5 + [[run, c]] * 5), rank="ms",
                      anonymous_by_line=True)
    assert {r.key.label() for r in d.rows} == {"run", "render@app.js:2", "render@app.js:3",
                                               "render@app.js:4"}
    # a one-line bundle rebuilt: `j.parse` twice on line 1, both moved by 45 columns
    p1, p2, leaf = ("j.parse", 1, 13875), ("j.parse", 1, 20000), ("walk", 1, 30000)
    q1, q2, leaf2 = ("j.parse", 1, 13920), ("j.parse", 1, 20045), ("walk", 1, 30045)
    base = _places([[run, p1, leaf]] * 5 + [[run, p2]] * 2)
    new = _places([[run, q1, leaf2]] * 5 + [[run, q2]] * 2)
    tree = build_call_tree(new)
    ch = tree_changes(build_call_tree(base), tree, unit="ms")
    assert all(ch.in_base), ch.in_base  # every path of NEW had one in BASE


def test_an_edit_below_an_unmoved_function_pairs_the_moved_ones_in_order():
    """review13 (keyorder): `run` on line 1 stays, a comment line added below it moves the
    two `render` methods down a line. Decided per script (`run` did not move: by place),
    B's old render (line 3) was paired with A's new one and the gate failed on a move
    alone (`render@2 removed -6`, `render@4 new +5`, `render@3 +2`). Per name: as many
    places on each side, moved by one edit: in order, each render itself."""
    run = ("run", 1, 1)
    base = _places([[run, ("render", 2, 10)]] * 6 + [[run, ("render", 3, 10)]] * 4)
    new = _places([[run, ("render", 3, 10)]] * 6 + [[run, ("render", 4, 10)]] * 5)
    d = diff_profiles(base, new, rank="ms", anonymous_by_line=True)
    rows = {r.key.label(): r for r in d.rows}
    assert set(rows) == {"run", "render@app.js:3", "render@app.js:4"}, set(rows)
    assert all(r.status == "" for r in d.rows), [(r.key.label(), r.status) for r in d.rows]
    assert rows["render@app.js:3"].d_self_ms == 0 and rows["render@app.js:4"].d_self_ms == 1
    assert check_gates(d, [parse_gate("render:self>+50%", ALL_UNITS)]) == []
    ch = tree_changes(build_call_tree(base), build_call_tree(new), unit="ms")
    assert all(ch.in_base), ch.in_base


def test_two_runs_of_one_build_keep_a_function_both_sampled_as_itself():
    """review14: two runs of one build, `e` at 2:134 sampled in both, each run one other
    `e` the other did not (3:130 in BASE, 1:10 in NEW). In order they paired as "one edit"
    (shifts (-1,-124) and (-1,+4): lines moved and columns too, on different lines, which
    no edit does): e@2 50 -> 5, a `e:self>+50%` gate broken (+900 %). Now nothing tells
    them apart (no anchor above them): by name, one row, unchanged."""
    run = ("run", 5, 1)
    base = _places([[run, ("e", 2, 134)]] * 50 + [[run, ("e", 3, 130)]] * 5 + [[run]] * 45)
    new = _places([[run, ("e", 1, 10)]] * 5 + [[run, ("e", 2, 134)]] * 50 + [[run]] * 45)
    d = diff_profiles(base, new, rank="ms", anonymous_by_line=True)
    rows = {r.key.label(): r for r in d.rows}
    assert set(rows) == {"run", "e"}, set(rows)
    assert rows["e"].status == "" and rows["e"].d_self_ms == 0
    assert check_gates(d, [parse_gate("e:self>+50%", ALL_UNITS)]) == []
    # a real one-edit move still pairs in order: a line added above both
    moved = _places([[run, ("e", 3, 134)]] * 50 + [[run, ("e", 4, 130)]] * 5 + [[run]] * 45)
    d = diff_profiles(base, moved, rank="ms", anonymous_by_line=True)
    assert all(r.status == "" for r in d.rows), [(r.key.label(), r.status) for r in d.rows]


def test_functions_of_a_name_of_their_own_carry_a_shared_name_across_an_edit():
    """Where the code moved is told by the script's functions with a name of their own
    (one place a side): three lines added between `helper` and `tail` move the `e`s below
    `helper`, not the one above. BASE sampled an `e` NEW did not (line 50): not as many
    places on each side, and in order they would pair strangers; carried by the anchors
    around each, every `e` is itself, the unsampled one [removed] at its place."""
    run, helper, tail, end = ("run", 1, 1), ("helper", 20, 1), ("tail", 40, 1), ("end", 60, 1)
    base = _places([[run, ("e", 10, 5)]] * 3 + [[run, helper, ("e", 30, 5)]] * 4
                   + [[run, tail, ("e", 50, 5)]] * 2 + [[run, end]])
    moved = lambda f: (f[0], f[1] + 3, f[2])  # noqa: E731
    new = _places([[run, ("e", 10, 5)]] * 3 + [[run, helper, ("e", 33, 5)]] * 5
                  + [[run, moved(tail)]] * 2 + [[run, moved(end)]])
    d = diff_profiles(base, new, rank="ms", anonymous_by_line=True)
    rows = {r.key.label(): r for r in d.rows if r.key.name == "e"}
    assert set(rows) == {"e@app.js:10", "e@app.js:33", "e@app.js:50"}, set(rows)
    assert rows["e@app.js:10"].status == "" and rows["e@app.js:10"].d_self_ms == 0
    assert rows["e@app.js:33"].status == "" and rows["e@app.js:33"].d_self_ms == 1
    assert rows["e@app.js:50"].status == "removed"


def test_key_rule_without_a_side_keeps_its_former_form():
    """`KeyRule(...)(name, resource, line, column)` without `side` (its callers before
    keyorder): a name whose functions moved matches by name on both sides (a place of
    BASE's and NEW's is not one key), one whose functions stayed by place."""
    base = [("run", "a.js", 1, 1), ("render", "a.js", 2, 10), ("render", "a.js", 3, 10),
            ("e", "a.js", 1, 40), ("e", "a.js", 1, 90)]
    new = [("run", "a.js", 1, 1), ("render", "a.js", 3, 10), ("render", "a.js", 4, 10),
           ("e", "a.js", 1, 40), ("e", "a.js", 1, 90)]
    rule = KeyRule([base, new])
    assert rule("render", "a.js", 3, 10) == NameKey("render", "a.js")
    assert rule("render", "a.js", 3, 10, side=0) == NameKey("render", "a.js", 4)
    assert rule("render", "a.js", 3, 10, side=1) == NameKey("render", "a.js", 3)
    assert rule("e", "a.js", 1, 90) == rule("e", "a.js", 1, 90, side=0) == NameKey(
        "e", "a.js", 1, 90)
