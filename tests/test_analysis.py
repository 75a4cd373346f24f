"""Self/total/tree/lines on traces whose answers follow from how they were built."""

import re

import numpy as np
import pytest

import jsprof
from jsprof.analysis.calltree import build_call_tree
from jsprof.analysis.profile import depth_levels, hot_lines, sample_weights, subtree_sums, summarize
from jsprof.errors import UsageError
from jsprof.trace import NO_STACK_NAMES, Recording, TraceBuilder, Track


def _by_name(summary):
    st = summary.stats
    return {
        k.name: (st.self_ms[i], st.total_ms[i], st.self_samples[i], st.total_samples[i])
        for i, k in enumerate(st.keys)
    }


def _trace(stacks: list[list[str]], lines=None, markers=None):
    """One sample per ms; each stack is a list of function names, outermost first."""
    b = TraceBuilder()
    r = b.resource_id("file:///t.js")
    fids = {}
    for i, names in enumerate(stacks):
        for n in names:
            if n not in fids:
                fids[n] = b.frame_id(n, r, len(fids) + 1, 1)
        ids = [fids[n] for n in names]
        b.add_sample(
            float(i),
            b.stack_id(ids),
            marker=markers[i] if markers else None,
            line=lines[i] if lines else None,
        )
    return b.build()


def test_self_and_total_with_recursion_counted_once():
    stacks = [["main", "fib", "fib", "fib"]] * 6 + [["main", "fib", "leaf"]] * 3 + [["main"]]
    rec = Recording.of(_trace(stacks), sample_interval=1.0)
    s = _by_name(summarize(rec))
    assert s["fib"][0] == pytest.approx(6.0) and s["fib"][2] == 6
    assert s["fib"][1] == pytest.approx(9.0) and s["fib"][3] == 9  # not 6*3 + 3*1
    assert s["leaf"][:2] == pytest.approx((3.0, 3.0))
    assert s["main"][:2] == pytest.approx((1.0, 10.0))
    assert summarize(rec).total_ms == pytest.approx(10.0)


def test_top_self_gives_the_full_summarys_first_rows(data):
    # `jsprof record`'s summary shows the top 5 by self time: summarize(top_self=5) gives
    # only the keys that can be among them their totals (the totals of a tsc profile's
    # 20,000 stacks were most of the summary's CPU, issue 32). Its rows, their totals and
    # their order (self, then total, for ties) are the full summary's first rows. Here ties
    # in self time broken by total, recursion, and real profiles.
    from jsprof.render.rows import summary_rows

    stacks = (
        [["main", "a", "x"]] * 3 + [["main", "b", "x"]] * 3 + [["main", "b", "c"]] * 3
        + [["main", "c", "c", "d"]] * 3 + [["main", "e"]] * 2 + [["main"]] * 2
        + [["main", "b"]] * 3
    )
    recs = [Recording.of(_trace(stacks), sample_interval=1.0)]
    recs += [jsprof.load(data / "chromium" / "trace-basic.json")]
    recs += [jsprof.load(p) for p in sorted((data / "node").glob("*.cpuprofile"))[:3]]
    for rec in recs:
        for top in (1, 2, 3, 5, 50):
            full = summary_rows(summarize(rec), top)
            some = summary_rows(summarize(rec, top_self=top), top)
            assert some == full, (top, rec)
    few = summarize(recs[0], top_self=2)
    # x 6 ms; b, c and d 3 ms each (all three tie for second); main and e 2 ms: not rows
    assert {k.name for k in few.stats.keys} == {"x", "b", "c", "d"}
    assert few.total_ms == summarize(recs[0]).total_ms


def test_weights_use_gaps_and_clip_backwards_time():
    b = TraceBuilder()
    s = b.stack_id([b.frame_id("a")])
    for t in (0.0, 1.0, 5.0, 4.9, 6.0):
        b.add_sample(t, s)
    w = sample_weights(b.build(), interval=2.0)
    assert w.tolist() == pytest.approx([1.0, 4.0, 0.0, 1.1, 2.0])


def test_no_js_samples_are_reported_by_marker_not_dropped():
    stacks = [["a"], [], [], ["a"], []]
    markers = [None, "gc", None, None, "gc"]
    rec = Recording.of(_trace(stacks, markers=markers), sample_interval=1.0)
    summ = summarize(rec)
    rows = {r.label: (r.samples, r.ms) for r in summ.no_js}
    assert rows == {"(garbage collector)": (2, 2.0), "(idle)": (1, 1.0)}
    js = sum(summ.stats.self_ms)
    assert js + sum(r.ms for r in summ.no_js) == pytest.approx(summ.total_ms)


def test_functions_merge_across_tracks_and_track_selection():
    t1 = _trace([["main", "work"]] * 4)
    t2 = _trace([["main", "work"]] * 2 + [["main"]] * 2)
    rec = Recording([Track("a", t1, sample_interval=1.0), Track("b", t2, sample_interval=1.0)])
    assert _by_name(summarize(rec))["work"][0] == pytest.approx(6.0)
    assert _by_name(summarize(rec, track="b"))["work"][0] == pytest.approx(2.0)
    with pytest.raises(UsageError, match="no track named 'c'"):
        summarize(rec, track="c")


def test_by_resource():
    b = TraceBuilder()
    ra, rb = b.resource_id("file:///a.js"), b.resource_id("file:///b.js")
    fa, fb = b.frame_id("fa", ra, 1, 1), b.frame_id("fb", rb, 1, 1)
    for i in range(4):
        b.add_sample(float(i), b.stack_id([fa, fb] if i < 3 else [fa]))
    s = summarize(Recording.of(b.build(), sample_interval=1.0), by="resource")
    got = {k: (s.stats.self_ms[i], s.stats.total_ms[i]) for i, k in enumerate(s.stats.keys)}
    assert got == {"file:///a.js": (1.0, 4.0), "file:///b.js": (3.0, 3.0)}


def test_call_tree_merges_paths_by_function():
    # Two frame ids for one function (same name/resource/line/column) merge in the tree.
    tr = _trace([["main", "a", "b"]] * 3 + [["main", "c"]] * 2 + [["main"]])
    rec = Recording.of(tr, sample_interval=1.0)
    tree = build_call_tree(rec)
    names = [tree.functions[f].name for f in tree.function.tolist()]
    kids = tree.children()
    (root,) = tree.roots()
    assert names[root] == "main" and tree.total_ms[root] == pytest.approx(6.0)
    assert tree.self_ms[root] == pytest.approx(1.0)
    child = {names[k]: k for k in kids[root]}
    assert tree.total_ms[child["a"]] == pytest.approx(3.0)
    assert tree.total_ms[child["c"]] == pytest.approx(2.0)
    assert [names[k] for k in kids[child["a"]]] == ["b"]


def test_call_tree_over_two_tracks_merges_equal_paths():
    rec = Recording(
        [
            Track("a", _trace([["m", "x"]] * 2), sample_interval=1.0),
            Track("b", _trace([["m", "x"]] * 3), sample_interval=1.0),
        ]
    )
    tree = build_call_tree(rec)
    assert len(tree.roots()) == 1 and len(tree.parent) == 2
    assert tree.total_ms.tolist() == pytest.approx([5.0, 5.0])


def test_hot_lines():
    stacks = [["main", "loop"]] * 5
    lines = [3, 4, 4, 4, 3]
    s = hot_lines(Recording.of(_trace(stacks, lines=lines), sample_interval=1.0))
    got = {(k.function.name, k.line): s.stats.self_samples[i] for i, k in enumerate(s.stats.keys)}
    assert got == {("loop", 3): 2, ("loop", 4): 3}
    assert hot_lines(Recording.of(_trace(stacks))) is None


def test_chromium_fixture_self_time_led_by_busyloop_and_fib(data):
    summ = summarize(jsprof.load(data / "chromium" / "trace-basic.json"))
    order = summ.stats.order("self")
    top2 = {summ.stats.keys[i].name for i in order[:2].tolist()}
    assert top2 == {"busyLoop", "fib"}
    # Every sample's time is accounted for exactly once in self time.
    total_self = float(np.sum(summ.stats.self_ms)) + sum(r.ms for r in summ.no_js)
    assert total_self == pytest.approx(summ.total_ms)


def test_analysis_takes_a_bare_trace_or_says_what_it_needs():
    from jsprof.analysis import filters
    from jsprof.analysis.calltree import build_call_tree
    from jsprof.analysis.diff import diff_profiles

    b = TraceBuilder()
    f = b.frame_id("f", b.resource_id("file:///a.js"), 1, 1)
    g = b.frame_id("g", b.resource_id("file:///a.js"), 5, 1)
    for i in range(6):
        b.add_sample(float(i), b.stack_id([f, g] if i % 3 else [f]))
    trace = b.build()
    s = summarize(trace)
    assert [r.key.name for r in s.top()] == ["g", "f"]
    assert s.top(1)[0].self_ms == pytest.approx(4.0)
    assert build_call_tree(trace).total_time == pytest.approx(6.0)
    assert all(r.impact == 0 for r in diff_profiles(trace, trace).rows)
    assert filters.focus(trace, "g").num_samples == 4
    with pytest.raises(TypeError, match="expected a Recording or a ProfilerTrace, got dict"):
        summarize({"samples": []})


def test_root_names_agree_between_table_tree_json_and_folded(data, tmp_path):
    """The top-level script is `(anonymous page.html:N)` in the table and the tree JSON, and
    `(anonymous)` (with its location) in the folded export, which keeps the frame's name;
    samples without JavaScript are tree roots named as the table names them, so the
    roots add up to all the time (issue 15)."""
    import json
    import subprocess
    import sys

    def cli(*args):
        p = subprocess.run(
            [sys.executable, "-m", "jsprof.cli", *args], check=True, capture_output=True
        )
        return p.stdout

    for name in ("trace-basic.json", "trace-idle.json"):
        src = str(data / "chromium" / name)
        table = json.loads(cli("report", src, "--json", "--all"))
        tree = json.loads(cli("report", src, "--tree", "--json", "--threshold", "0"))["tree"]
        names = {r["name"] for r in table["rows"]}
        roots = {r["name"] for r in tree}
        assert roots <= names, (roots, names)
        assert sum(r["total_ms"] for r in tree) == pytest.approx(table["total_ms"], abs=0.01)
        folded = tmp_path / f"{name}.folded"
        cli("convert", src, str(folded))
        # "root (location);child (location) count": the root's name, location dropped
        folded_roots = {
            re.sub(r" \([^()]*\)$", "", line.rsplit(" ", 1)[0].split(";")[0])
            for line in folded.read_text().splitlines()
        }
        named = {re.sub(r"^\(anonymous .*\)$", "(anonymous)", r) for r in roots}
        assert named == folded_roots, (roots, folded_roots)
    assert NO_STACK_NAMES[0] in roots and "(anonymous page.html:445)" in roots


def test_one_name_for_samples_with_no_stack():
    """Table, tree, flame graph, folded/speedscope/pprof and the dashboard name samples
    with no stack alike: trace.NO_STACK_NAMES (issue 15)."""
    from pathlib import Path

    from jsprof.formats._common import PSEUDO_NAMES
    from jsprof.trace import MARKER_CODE, NONE, no_stack_name

    assert PSEUDO_NAMES is NO_STACK_NAMES
    assert no_stack_name(NONE) == "(idle)"
    assert no_stack_name(MARKER_CODE["gc"]) == "(garbage collector)"
    assert no_stack_name(MARKER_CODE["other"]) == "(program)"
    dash = (Path(jsprof.__file__).parent / "serve" / "static" / "dashboard.js").read_text()
    listed = re.search(r"NO_STACK_NAMES = new Set\(\[(.*?)\]\)", dash, re.S).group(1)
    assert re.findall(r'"([^"]+)"', listed) == list(NO_STACK_NAMES)


def test_track_chosen_by_name_then_unique_prefix():
    t = _trace([["main"]])
    rec = Recording([Track(n, t) for n in ("worker 1 (a)", "worker 10 (b)", "work", "x")])
    assert rec.track("work").name == "work"  # an exact name first
    assert rec.track("worker 1").name == "worker 1 (a)"  # a whole word before `worker 10`
    assert rec.track("worker 10").name == "worker 10 (b)"
    assert rec.track("worker 1 (").name == "worker 1 (a)"
    with pytest.raises(UsageError, match="'worker' is ambiguous: 2 tracks start with it"):
        rec.track("worker")
    with pytest.raises(UsageError, match=r"no track named 'y' \(the tracks: 'worker 1 \(a\)'"):
        rec.track("y")
    with pytest.raises(UsageError, match="no track named ''"):
        rec.track("")


def test_depth_levels_and_subtree_sums_on_random_forests():
    # depth_levels replaced a scan per level (`depth == d`): every node once, in its own
    # level, ascending within it; the sums over subtrees agree with a walk up each path.
    from jsprof.trace import stack_depths

    rng = np.random.default_rng(7)
    for n in (0, 1, 2, 50, 400):
        parent = np.array([-1 if k == 0 or rng.random() < 0.1 else int(rng.integers(0, k))
                           for k in range(n)], np.int64)
        depth = stack_depths(parent) if n else np.zeros(0, np.int32)
        levels = depth_levels(depth)
        assert len(levels) == (int(depth.max()) if n else 0)
        for d, level in enumerate(levels, start=1):
            assert level.tolist() == np.nonzero(depth == d)[0].tolist()
        own = rng.random(n)
        want = own.copy()
        for k in range(n):
            p = parent[k]
            while p != -1:
                want[p] += own[k]
                p = parent[p]
        assert np.allclose(subtree_sums(parent, own, depth), want)
