"""Call-tree transforms (`--transform SPEC`): each kind against results computed by hand on a
small recording, their order, their refusals, and invariants on a real QuickJS recording."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import jsprof
from jsprof.analysis import transforms
from jsprof.analysis.profile import summarize
from jsprof.errors import UsageError
from jsprof.trace import NONE, Recording, TraceBuilder, sample_weights

# The hand-built recording: one sample per row, each weighing the gap to the next sample
# (the last one the 1 ms interval). Frames lib1 and lib2 are in lib.js, the rest in app.js.
SAMPLES = [
    (("main", "A", "B"), 1.0),
    (("main", "A", "B", "C"), 2.0),
    (("main", "A"), 1.0),
    (("main", "fib", "fib", "B"), 2.0),
    (("main", "fib", "A", "fib"), 1.0),  # fib recursing through A
    (("main", "lib1", "lib2"), 1.0),
    (("main", "lib1", "X", "lib2"), 3.0),  # lib.js calling back into itself through X
    (("main", "C"), 1.0),
    (("main",), 2.0),
    ((), 1.0),  # no stack: idle
]
ORIGINAL = {stack: ms for stack, ms in SAMPLES}
LIB = "file:///srv/lib.js"


def _rec() -> Recording:
    b = TraceBuilder()
    app, lib = b.resource_id("file:///srv/app.js"), b.resource_id(LIB)
    line = {"main": 1, "A": 10, "B": 20, "C": 30, "fib": 40, "X": 50, "lib1": 1, "lib2": 9}
    frame = {n: b.frame_id(n, lib if n.startswith("lib") else app, ln, 1)
             for n, ln in line.items()}
    t = 0.0
    for stack, ms in SAMPLES:
        b.add_sample(t, b.stack_id([frame[n] for n in stack]), line=7)
        t += ms
    return Recording.of(b.build(), sample_interval=1.0)


def _paths(rec: Recording) -> dict[tuple[str, ...], float]:
    """ms per root-to-leaf stack of names (() for samples with no stack)."""
    out: dict[tuple[str, ...], float] = {}
    for track in rec.tracks:
        tr = track.trace
        w = sample_weights(tr, track.sample_interval)
        for sid, ms in zip(tr.sample_stack.tolist(), w.tolist(), strict=True):
            names = () if sid == NONE else tuple(tr.frames[f].name for f in tr.stack_frames(sid))
            out[names] = out.get(names, 0.0) + ms
    return out


def _run(*specs: str, rec: Recording | None = None) -> dict[tuple[str, ...], float]:
    parsed = [transforms.parse_spec(s) for s in specs]
    return _paths(transforms.apply(rec or _rec(), "hand.json", parsed))


def _with(changes: dict, drop: tuple = ()) -> dict:
    out = {k: v for k, v in ORIGINAL.items() if k not in drop}
    for k, v in changes.items():
        out[k] = out.get(k, 0.0) + v
    return out


def test_the_hand_built_recording_is_what_the_table_says():
    assert _paths(_rec()) == ORIGINAL
    assert sum(ORIGINAL.values()) == 15.0


def test_merge_gives_the_self_time_to_the_callers():
    A = ("main", "A")
    assert _run("merge:A") == _with(
        {("main", "B"): 1, ("main", "B", "C"): 2, ("main",): 1,
         ("main", "fib", "fib"): 1},
        drop=(A + ("B",), A + ("B", "C"), A, ("main", "fib", "A", "fib")),
    )
    # A root merged away: its own samples keep their time under (merged)
    got = _run("merge:main")
    assert got == {(k[1:] if k else k): v for k, v in ORIGINAL.items() if k != ("main",)} | {
        ("(merged)",): 2.0}
    assert _run("merge:li*") == _with(  # wildcards, as --focus has them
        {("main",): 1, ("main", "X"): 3},
        drop=(("main", "lib1", "lib2"), ("main", "lib1", "X", "lib2")))


def test_merge_node_removes_only_that_call_node():
    assert _run("merge-node:main>A>B") == _with(
        {("main", "A"): 1, ("main", "A", "C"): 2},
        drop=(("main", "A", "B"), ("main", "A", "B", "C")))
    # the middle fib of main>fib>fib>B only; main>fib>A>fib keeps both of its fibs
    assert _run("merge-node:main>fib>fib") == _with(
        {("main", "fib", "B"): 2}, drop=(("main", "fib", "fib", "B"),))


def test_focus_subtree_keeps_the_samples_under_the_path_rooted_at_its_last_node():
    assert _run("focus-subtree:main>A") == {("A", "B"): 1, ("A", "B", "C"): 2, ("A",): 1}
    assert _run("focus-subtree:main>fib>A") == {("A", "fib"): 1}
    assert _run("focus-subtree:main") == {k: v for k, v in ORIGINAL.items() if k}


def test_focus_roots_every_call_and_merges_recursion():
    # every call of A, wherever it is called from (main>A and main>fib>A)
    assert _run("focus:A") == {("A", "B"): 1, ("A", "B", "C"): 2, ("A",): 1, ("A", "fib"): 1}
    # fib's inner calls join the outermost one: main>fib>A>fib is fib's self time
    assert _run("focus:fib") == {("fib", "B"): 2, ("fib",): 1}


def test_collapse_folds_the_subtree_into_the_function():
    assert _run("collapse:A") == _with(
        {("main", "A"): 3, ("main", "fib", "A"): 1},
        drop=(("main", "A", "B"), ("main", "A", "B", "C"), ("main", "fib", "A", "fib")))
    assert _run("collapse:lib1") == _with(
        {("main", "lib1"): 4}, drop=(("main", "lib1", "lib2"), ("main", "lib1", "X", "lib2")))


def test_collapse_resource_makes_one_frame_of_a_script():
    want = _with({("main", "lib.js"): 1, ("main", "lib.js", "X", "lib.js"): 3},
                 drop=(("main", "lib1", "lib2"), ("main", "lib1", "X", "lib2")))
    assert _run(f"collapse-resource:{LIB}") == want
    assert _run("collapse-resource:*/lib.js") == want
    assert _run("collapse-resource:/srv/lib.js") == want  # as the tables show it
    spec = transforms.parse_spec("collapse-resource:*lib.js")
    rec = transforms.apply(_rec(), "hand.json", [spec])
    tr = rec.tracks[0].trace
    (frame,) = [f for f in tr.frames if f.name == "lib.js"]
    assert tr.resources[frame.resource_id] == LIB and frame.line is None  # the script, whole


def test_collapse_resource_takes_the_path_the_tables_show(tmp_path, monkeypatch):
    b = TraceBuilder()
    lib = b.resource_id(f"file://{tmp_path}/src/lib.js")
    b.add_sample(0.0, b.stack_id([b.frame_id("f", lib, 1, 1), b.frame_id("g", lib, 2, 1)]))
    rec = Recording.of(b.build(), sample_interval=1.0)
    monkeypatch.chdir(tmp_path)  # the tables show src/lib.js
    assert _run("collapse-resource:src/lib.js", rec=rec) == {("lib.js",): 1.0}


def test_focus_resource_keeps_only_one_scripts_frames():
    # lib.js: main and X leave; the samples with no lib.js frame (and no stack) are dropped
    want = {("lib1", "lib2"): 4.0}
    assert _run(f"focus-resource:{LIB}") == want
    assert _run("focus-resource:*/lib.js") == want
    assert _run("focus-resource:/srv/lib.js") == want  # as the tables show it
    # app.js: lib1 and lib2 leave, their time to their nearest app.js caller
    assert _run("focus-resource:*/app.js") == _with(
        {("main",): 1, ("main", "X"): 3},
        drop=((), ("main", "lib1", "lib2"), ("main", "lib1", "X", "lib2")))
    # the kept samples keep their weights from the whole recording (the last lib.js
    # sample weighs the 3 ms gap to the next sample, which is dropped)
    out = transforms.apply(_rec(), "hand.json", [transforms.parse_spec("focus-resource:*lib.js")])
    assert out.num_samples == 2 and _total(out) == pytest.approx(4.0)


def test_collapse_recursion_joins_direct_and_indirect_calls():
    assert _run("collapse-recursion:fib") == _with(
        {("main", "fib", "B"): 2, ("main", "fib"): 1},
        drop=(("main", "fib", "fib", "B"), ("main", "fib", "A", "fib")))
    assert _run("collapse-recursion:A") == ORIGINAL  # no recursion: nothing changes


def test_drop_removes_the_samples_and_keeps_the_others_weights():
    assert _run("drop:A") == {
        k: v for k, v in ORIGINAL.items() if "A" not in k}  # 4 samples, 5 ms gone
    assert sum(_run("drop:A").values()) == 10.0
    assert _run("drop:lib2") == _with({}, drop=(("main", "lib1", "lib2"),
                                                ("main", "lib1", "X", "lib2")))


def test_transforms_apply_in_the_order_given():
    assert _run("merge:A", "focus:fib") == {("fib", "B"): 2, ("fib",): 1}
    assert _run("focus:A", "merge:A") == {
        ("B",): 1, ("B", "C"): 2, ("(merged)",): 1, ("fib",): 1}
    assert _run("merge:A", "focus-subtree:main>B") == {("B",): 1, ("B", "C"): 2}
    # the other way round, main>B is not a call path yet
    with pytest.raises(UsageError, match="'focus-subtree:main>B': no call path in hand.json"):
        _run("focus-subtree:main>B", "merge:A")
    # a function merged away is gone for the steps after it
    with pytest.raises(UsageError, match="'focus:A': no function in hand.json matches"):
        _run("merge:A", "focus:A")


def test_the_input_is_untouched_and_lines_stay_only_on_their_own_leaf():
    rec = _rec()
    out = transforms.apply(rec, "x", [transforms.parse_spec("collapse:A")])
    assert _paths(rec) == ORIGINAL
    lines = out.tracks[0].trace.sample_line.tolist()
    # main>A>B, main>A>B>C now end in A: the line executing was B's and C's
    assert lines[:3] == [0, 0, 7] and lines[3] == 7


@pytest.mark.parametrize(
    "spec, says",
    [
        ("bogus:x", "unknown transform 'bogus'; one of merge, merge-node, focus-subtree"),
        ("merge", "expected KIND:NAME"),
        ("merge:", "merge needs a NAME after the colon"),
        ("merge-node: ", "merge-node needs a call path A>B>C after the colon"),
        ("focus-subtree:a>>b", "an empty name in the call path"),
        ("collapse-resource:", "collapse-resource needs a URL"),
        ("focus-resource: ", "focus-resource needs a URL"),
    ],
)
def test_a_bad_spec_is_one_line(spec, says):
    with pytest.raises(ValueError, match=says):
        transforms.parse_spec(spec)


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "jsprof.cli", *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd)


@pytest.fixture
def hand_file(tmp_path) -> Path:
    path = tmp_path / "hand.jsprof.json"
    jsprof.save(_rec(), path)
    return path


@pytest.mark.parametrize(
    "spec, says",
    [
        ("bogus:x", "argument --transform: 'bogus:x': unknown transform 'bogus'"),
        ("merge:nosuch", "--transform 'merge:nosuch': no function in"),
        ("merge-node:main>nosuch", "--transform 'merge-node:main>nosuch': no call path in"),
        ("collapse-resource:https://x/*", "no script URL in"),
        ("focus-resource:https://x/*",
         "--transform 'focus-resource:https://x/*': no script URL in"),
        ("drop:nosuch", "--transform 'drop:nosuch': no function in"),
    ],
)
@pytest.mark.parametrize("command", ["report", "flame", "convert"])
def test_the_command_line_refuses_a_bad_transform_in_one_line(hand_file, tmp_path, spec, says,
                                                              command):
    extra = {"flame": ["-o", str(tmp_path / "f.html")],
             "convert": [str(tmp_path / "out.jsprof.json")]}.get(command, [])
    p = _cli(command, str(hand_file), *extra, "--transform", spec)
    assert p.returncode == 2, p.stderr
    assert says in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert not list(tmp_path.glob("f.html*")) and not (tmp_path / "out.jsprof.json").exists()


def test_report_json_and_convert_carry_the_transforms(hand_file, tmp_path):
    p = _cli("report", str(hand_file), "--json", "--transform", "merge:A",
             "--transform", "collapse-resource:*lib.js")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["transforms"] == ["merge:A", "collapse-resource:*lib.js"]
    self_ms = {r["name"]: r["self_ms"] for r in doc["rows"]}
    # by hand: main's own 2 ms and main>A's 1 ms; lib1 and lib2's 4 ms are lib.js's
    assert "A" not in self_ms and self_ms["main"] == 3.0 and self_ms["lib.js"] == 4.0
    assert doc["total_ms"] == 15.0
    p = _cli("report", str(hand_file), "--transform", "focus:fib")
    assert p.returncode == 0, p.stderr
    assert "transforms, in order: focus:fib" in p.stderr
    out = tmp_path / "t.jsprof.json"
    p = _cli("convert", str(hand_file), str(out), "--transform", "focus-subtree:main>A")
    assert p.returncode == 0, p.stderr
    assert _paths(jsprof.load(out)) == {("A", "B"): 1, ("A", "B", "C"): 2, ("A",): 1}


def test_flame_and_the_tree_show_the_transformed_tree(hand_file, tmp_path):
    out = tmp_path / "f.html"
    p = _cli("flame", str(hand_file), "-o", str(out), "--transform", "collapse:A",
             "--transform", "merge:main")
    assert p.returncode == 0, p.stderr
    html = out.read_text()
    assert "collapse:A · merge:main" in html  # the subtitle says what was done
    p = _cli("report", str(hand_file), "--tree", "--json", "--transform", "collapse:A",
             "--transform", "merge:main")
    doc = json.loads(p.stdout)
    assert doc["transforms"] == ["collapse:A", "merge:main"]
    roots = {n["name"]: n for n in doc["tree"]}
    # by hand: main>A>... is 4 ms, all A's own now (main>fib>A is under fib)
    assert roots["A"]["self_ms"] == roots["A"]["total_ms"] == 4.0, roots["A"]
    assert roots["(merged)"]["total_ms"] == 2.0 and "main" not in roots


def test_diff_transforms_both_sides(hand_file, tmp_path):
    other = tmp_path / "other.jsprof.json"
    rec = _rec()
    jsprof.save(transforms.apply(rec, "x", [transforms.parse_spec("drop:fib")]), other)
    p = _cli("diff", str(hand_file), str(other), "--json", "--transform", "merge:A")
    assert p.returncode == 0, p.stderr
    names = json.dumps(json.loads(p.stdout))
    assert '"A"' not in names and "fib" in names
    # a name in one side only is fine (a function removed); in neither it is refused
    p = _cli("diff", str(other), str(hand_file), "--transform", "focus:fib")
    assert p.returncode == 0, p.stderr
    p = _cli("diff", str(other), str(hand_file), "--transform", "focus:nosuch")
    assert p.returncode == 2 and "no function in" in p.stderr, p.stderr


# ---- a real recording: QuickJS running acorn (npm, pinned) on its own source ----------

JS = Path(__file__).parent / "js" / "node_modules"
DRIVER = """import * as acorn from "./acorn.mjs";
var SOURCE = {source};
var end = Date.now() + 800, n = 0;
while (Date.now() < end || n < 4) {{
  acorn.parse(SOURCE, {{ ecmaVersion: "latest", sourceType: "module", locations: true }});
  n++;
}}
"""


@pytest.fixture(scope="module")
def acorn_rec(tmp_path_factory) -> Recording:
    from jsprof.record import record

    d = tmp_path_factory.mktemp("acorn")
    src = JS / "acorn" / "dist" / "acorn.mjs"
    assert src.exists(), "tests/js missing: `make test` installs it"
    shutil.copy(src, d / "acorn.mjs")
    (d / "driver.mjs").write_text(DRIVER.format(source=json.dumps(src.read_text())))
    return record(d / "driver.mjs", sample_interval=1.0, clock="cpu")


def _total(rec: Recording) -> float:
    return summarize(rec).total_ms


def _index(s, name: str) -> int:
    (i,) = [i for i, k in enumerate(s.stats.keys) if k.name == name]
    return i


@pytest.mark.npm
def test_invariants_on_a_real_quickjs_recording(acorn_rec):
    """acorn's methods are named as V8 names them (`pp$8.parseStatement`): the specs use
    wildcards as a user would."""
    rec = acorn_rec
    s = summarize(rec)
    stmt, expr = "pp$8.parseStatement", "pp$5.parseExpression"
    names = {k.name for k in s.stats.keys}
    assert {stmt, expr, "pp.next"} <= names, sorted(names)
    total = _total(rec)
    assert total > 0
    for spec in ("merge:*.parseExpression", "merge:pp.next", "collapse:*.parseStatement",
                 "collapse-recursion:*.parseStatement", "merge-node:*>*",
                 "collapse-resource:*acorn.mjs"):
        out = transforms.apply(rec, "acorn", [transforms.parse_spec(spec)])
        assert _total(out) == pytest.approx(total), spec  # time is moved, never lost
        assert out.num_samples == rec.num_samples, spec
    merged = summarize(transforms.apply(rec, "acorn", [transforms.parse_spec("merge:pp.next")]))
    assert "pp.next" not in {k.name for k in merged.stats.keys}
    # collapse: parseStatement's total stays, and it has no callees left
    col = transforms.apply(rec, "acorn", [transforms.parse_spec("collapse:*.parseStatement")])
    c = summarize(col)
    i, j = _index(c, stmt), _index(s, stmt)
    assert c.stats.total_ms[i] == pytest.approx(s.stats.total_ms[j])
    assert c.stats.self_ms[i] == pytest.approx(c.stats.total_ms[i])
    # collapse-recursion: parseStatement never calls itself any more, directly or not
    # (acorn's statements nest: a block's statements are parsed inside parseStatement)
    rc = transforms.apply(rec, "acorn",
                          [transforms.parse_spec("collapse-recursion:*.parseStatement")])
    def most(r: Recording) -> int:
        tr = r.tracks[0].trace
        return max(
            [tr.frames[f].name for f in tr.stack_frames(sid)].count(stmt)
            for sid in np.unique(tr.sample_stack[tr.sample_stack != NONE]).tolist())
    assert most(rec) > 1 and most(rc) == 1
    assert summarize(rc).stats.total_ms[_index(summarize(rc), stmt)] == pytest.approx(
        s.stats.total_ms[j])
    # drop removes exactly the samples whose stack holds the name, each keeping its weight
    tr_in = rec.tracks[0].trace
    tr_out = transforms.apply(
        rec, "acorn", [transforms.parse_spec("drop:*.parseExpression")]).tracks[0].trace
    has = np.array([sid != NONE and any(
        tr_in.frames[f].name == expr for f in tr_in.stack_frames(sid))
        for sid in tr_in.sample_stack.tolist()], bool)
    assert has.any() and tr_out.num_samples == int((~has).sum())
    assert np.array_equal(tr_out.sample_time, tr_in.sample_time[~has])
    w = sample_weights(tr_in, rec.tracks[0].sample_interval)
    assert _total(Recording([rec.tracks[0].__class__(
        "main", tr_out, sample_interval=rec.tracks[0].sample_interval)])) == pytest.approx(
        float(w[~has].sum()))
    # focus: only the samples through the function, all of its total time, under one root
    f = summarize(transforms.apply(rec, "acorn", [transforms.parse_spec("focus:*.parseStatement")]))
    assert f.total_ms == pytest.approx(s.stats.total_ms[j])
    assert f.stats.total_ms[_index(f, stmt)] == pytest.approx(f.total_ms)
