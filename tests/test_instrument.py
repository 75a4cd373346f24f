"""The instrumenting method profiler on real engines: QuickJS (embedded) and Node
(subprocess with jsprof's preload). Exact counts, invisibility, time accounting, spans."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import orjson
import pytest

import jsprof
from jsprof.errors import JSError, UsageError
from jsprof.instrument import run_instrumented
from jsprof.instrument.transform import transform

DATA = Path(__file__).parent / "data" / "instrument"
SHAPES = DATA / "shapes.js"
HAS_NODE = shutil.which("node") is not None
ENGINES = [
    "quickjs",
    "node",
]
JSPROF = [sys.executable, "-m", "jsprof.cli"]


def _need_node() -> None:
    if not HAS_NODE:  # Node 20 is part of the machine: fail loudly, never skip
        pytest.fail("node is not installed; these tests need Node.js 20")


# Exact calls per row of shapes.js with --watch '*'.
SHAPES_CALLS = {
    # the super() calls of 3 Circles and 2 Squares, and Shape.create's `new Shape` (the
    # class's inner binding)
    "Shape.constructor": 6,
    "Circle.constructor": 3,
    "Square.constructor": 2,
    "MathBox.constructor": 1,
    "Shape.create": 1,
    "Shape.describe": 6,
    "Circle.area": 3,
    "Square.area": 2,
    "Shape.area": 1,
    "Shape.get label": 2,
    "Shape.set label": 1,
    "Shape.greet": 2,  # mixin onto the prototype after the class was defined
    "Circle.wave": 1,  # mixin onto one instance after construction
    "MathBox.fib": 177,  # fib(10): every recursive call
    "MathBox.fail": 1,
    "MathBox.later": 2,
    "MathBox.count": 1,
}


def by_name(result):
    return {r.name: r for r in result.rows}


# ---- the transform ------------------------------------------------------------------------


def test_transform_keeps_lines_and_registers_every_class():
    src = (
        "class A {}\n"
        "const B = class {};\n"
        "x = new class { m() { return 'class {'; } }();\n"
        "export default class { f() {} }\n"
        "function f() { return class Inner extends A {}; }\n"
    )
    out = transform(src)
    assert out.count("\n") == src.count("\n")
    for a, b in zip(src.splitlines(), out.splitlines(), strict=True):
        assert b.startswith(a[: a.find("class")])  # insertions only, on the same line
    assert 'A=__jsprof_register(A,"A",1)' in out
    assert '(__jsprof_register(class {},"B",2,1))' in out
    assert "new (__jsprof_register(class" in out  # `new class {}()` keeps its meaning
    assert "'class {'" in out  # strings untouched
    assert 'static{__jsprof_register(this,"default",4,2)}' in out
    assert '(__jsprof_register(class Inner extends A {},"Inner",5,0))' in out
    # the inner binding inside a class's own body goes through the registration too
    out = transform(
        "class S {\n static make() { return new S(1); }\n static T = class extends S {};\n}"
    )
    assert 'new (__jsprof_register(S,"S",1,3))(1)' in out
    assert 'extends (__jsprof_register(S,"S",1,3))' in out


def test_transform_leaves_unparseable_and_classless_sources_alone():
    assert transform("class {{{ oops") == "class {{{ oops"
    assert transform("let x = 1;") == "let x = 1;"


# ---- exact counts on real engines ---------------------------------------------------------


@pytest.mark.parametrize("engine", ENGINES)
def test_exact_calls_on_every_feature(engine, capfd):
    res = run_instrumented(SHAPES, ["*"], engine=engine)
    rows = by_name(res)
    assert {k: r.calls for k, r in rows.items()} == SHAPES_CALLS
    assert rows["MathBox.later"].kind == "async"
    assert rows["MathBox.count"].kind == "generator"
    assert rows["Shape.get label"].kind == "get"
    assert rows["Shape.create"].kind == "static"
    # async: total runs until settle, so it covers the synchronous part
    later = rows["MathBox.later"]
    assert later.total_ms >= later.sync_ms >= later.self_ms >= 0
    # recursion: total counted once per outermost call, so total == self for fib
    fib = rows["MathBox.fib"]
    assert fib.total_ms == pytest.approx(fib.self_ms, abs=1e-9)
    assert fib.max_ms <= fib.total_ms + 1e-9
    assert [r.self_ms for r in res.rows] == sorted((r.self_ms for r in res.rows), reverse=True)
    out = capfd.readouterr().out
    # the program saw everything as before: instanceof, constructor, name, length, toString
    assert "<round> true true true" in out
    assert "Circle 1 area 0" in out
    assert "true class MathBox " in out
    assert "caught true bad 7" in out  # the exception passed unchanged


CONSTRUCTIONS = DATA / "constructions.js"


@pytest.mark.parametrize("engine", ENGINES)
def test_every_construction_is_counted_however_reached(engine, capfd):
    """Directly, through the class's inner binding (a static factory, a static generator, a
    static initializer), through super() of a subclass defined in the body or outside,
    through Reflect.construct and this.constructor (issue 11)."""
    res = run_instrumented(CONSTRUCTIONS, ["*"], engine=engine)
    rows = by_name(res)
    assert rows["Shape.constructor"].calls == 9
    assert rows["Circle.constructor"].calls == 1 and rows["Unit.constructor"].calls == 1
    # statics are named like methods; the kind says static
    assert (rows["Shape.make"].kind, rows["Shape.make"].calls) == ("static", 1)
    assert rows["Shape.many"].kind == "static generator"
    assert rows["Shape.get count"].kind == "static get"
    assert not any("static " in name for name in rows)
    # `new.target === Abstract` inside the constructor behaves as without jsprof
    assert rows["Abstract.constructor"].calls == 2
    out = capfd.readouterr().out
    assert "8 origin 0 true\nabstract throws true\nconcrete true\n" in out


def test_constructions_output_identical_with_and_without_watch():
    plain = _run(["node", str(CONSTRUCTIONS)])
    inst = _run([*JSPROF, "instrument", "--engine", "node", "--watch", "*", str(CONSTRUCTIONS)])
    q_plain = _run(
        [sys.executable, "-c", f"from jsprof.record import run; run({str(CONSTRUCTIONS)!r})"]
    )
    q_inst = _run([*JSPROF, "instrument", "--watch", "*", str(CONSTRUCTIONS)])
    assert plain.returncode == inst.returncode == q_plain.returncode == q_inst.returncode == 0
    assert inst.stdout == plain.stdout == q_plain.stdout == q_inst.stdout


@pytest.mark.parametrize("engine", ENGINES)
def test_watch_list_only_watches_those_classes(engine):
    res = run_instrumented(SHAPES, ["Circle", "MathBox"], engine=engine)
    assert {r.cls for r in res.rows} == {"Circle", "MathBox"}
    assert by_name(res)["Circle.area"].calls == 3


@pytest.mark.parametrize("engine", ENGINES)
def test_classes_in_es_modules(engine):
    res = run_instrumented(DATA / "mod_main.mjs", ["Store", "Item"], engine=engine)
    calls = {r.name: r.calls for r in res.rows}
    assert calls == {
        "Store.constructor": 1,
        "Store.put": 4,
        "Store.get": 1,
        "Store.size": 1,
        "Item.constructor": 4,
        "Item.key": 4,
    }


@pytest.mark.parametrize("engine", ENGINES)
def test_jsprof_global_watch_profile_report(engine, capfd):
    res = run_instrumented(DATA / "api.js", [], engine=engine)
    out = capfd.readouterr().out.splitlines()
    # own wrappers on the profiled array are non-enumerable: keys and JSON unchanged
    assert out[0] == "1,2,3,4 0,1,2,3 [1,2,3,4]"
    assert out[1] == "3 1 1 1"  # calls seen by jsprof.report(): only after watch()
    calls = {r.name: r.calls for r in res.rows}
    assert calls["Counter.inc"] == 3 and calls["Array.push"] == 1


@pytest.mark.parametrize("engine", ENGINES)
def test_by_instance_numbers_instances_in_creation_order(engine):
    res = run_instrumented(SHAPES, ["Circle", "Shape"], engine=engine, by_instance=True)
    area = sorted(
        (r.instance, r.calls) for r in res.rows if r.method == "area" and r.cls == "Circle"
    )
    assert area == [(1, 1), (2, 1), (3, 1)]


@pytest.mark.parametrize("engine", ENGINES)
def test_throwing_script_still_reports(engine):
    with pytest.raises(JSError) as ei:
        run_instrumented(DATA / "throws.js", ["Boom"], engine=engine)
    res = ei.value.result
    assert res.exit == "error"
    assert by_name(res)["Boom.go"].calls == 1


def test_unknown_engine_and_missing_file():
    with pytest.raises(UsageError):
        run_instrumented(SHAPES, ["*"], engine="rhino")
    with pytest.raises(UsageError):
        run_instrumented(DATA / "nope.js", ["*"])


# ---- time accounting ----------------------------------------------------------------------


@pytest.mark.parametrize("engine", ENGINES)
def test_self_plus_callees_is_total(engine):
    res = run_instrumented(SHAPES, ["*"], engine=engine)
    s = res.recording.tracks[0].spans
    frames = res.recording.tracks[0].trace.frames
    dur = s.end - s.start
    assert np.all(dur >= 0)
    assert np.all(s.parent < np.arange(len(s)))
    children = np.zeros(len(s))
    has = s.parent >= 0
    np.add.at(children, s.parent[has], dur[has])
    self_per_span = dur - children
    # rows' self time is exactly what the spans say, within float error
    for r in res.rows:
        fid = next(i for i, f in enumerate(frames) if f.name == r.name)
        mask = s.frame == fid
        if r.kind != "async":
            assert self_per_span[mask].sum() == pytest.approx(r.self_ms, abs=1e-6)
    # and for a non-recursive method: total = self + its watched callees' totals
    describe = by_name(res)["Shape.describe"]
    fid = next(i for i, f in enumerate(frames) if f.name == "Shape.describe")
    callee_total = children[s.frame == fid].sum()
    assert describe.total_ms == pytest.approx(describe.self_ms + callee_total, abs=1e-6)
    assert callee_total > 0


# ---- output unchanged, CLI, trace files ---------------------------------------------------


def _run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def test_output_identical_with_and_without_watch_quickjs():
    plain = _run([sys.executable, "-c", f"from jsprof.record import run; run({str(SHAPES)!r})"])
    inst = _run([*JSPROF, "instrument", "--watch", "*", str(SHAPES)])
    assert plain.returncode == inst.returncode == 0
    assert inst.stdout == plain.stdout
    assert "MathBox.fib" in inst.stderr and "per class" in inst.stderr


@pytest.mark.parametrize("script", ["shapes.js", "mod_main.mjs"])
def test_output_identical_with_and_without_watch_node(script):
    plain = _run(["node", str(DATA / script)])
    inst = _run([*JSPROF, "instrument", "--engine", "node", "--watch", "*", str(DATA / script)])
    assert plain.returncode == inst.returncode == 0
    assert inst.stdout == plain.stdout
    assert plain.stderr == ""


def test_cli_json_and_traces(tmp_path):
    out, tj, ct = tmp_path / "rows.json", tmp_path / "spans.json", tmp_path / "spans.trace.json"
    r = _run(
        [*JSPROF, "instrument", "--watch", "Shape,MathBox", "-o", str(out), "--trace", str(tj)]
        + [str(SHAPES)]
    )
    assert r.returncode == 0, r.stderr
    rows = orjson.loads(out.read_bytes())["rows"]
    fib = next(x for x in rows if x["method"] == "fib")
    assert set(fib) >= {"class", "method", "calls", "total_ms", "self_ms", "mean_ms", "max_ms"}
    assert fib["calls"] == 177
    rec = jsprof.load(str(tj))
    spans = rec.tracks[0].spans
    # one span per call, plus one per generator resumption: count(4) is resumed 5 times
    assert spans is not None
    assert len(spans) == sum(x["calls"] for x in rows) + 5
    assert rec.tracks[0].trace.frames[int(spans.frame[0])].name.startswith(("Shape.", "MathBox."))
    # Chrome trace: complete (X) events, one per call
    r = _run([*JSPROF, "instrument", "--watch", "MathBox", "--trace", str(ct), str(SHAPES)])
    assert r.returncode == 0, r.stderr
    doc = orjson.loads(ct.read_bytes())
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    xs = [e for e in events if e.get("ph") == "X"]
    assert sum(1 for e in xs if e["name"] == "MathBox.fib") == 177


def test_cli_errors_are_one_line(tmp_path):
    r = _run([*JSPROF, "instrument", "--watch", ",", str(SHAPES)])
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    r = _run([*JSPROF, "instrument", "--watch", "Boom", str(DATA / "throws.js")])
    assert r.returncode == 1
    # The program's own error: named, with its JS stack, never a Python traceback.
    assert "jsprof: uncaught JavaScript exception: TypeError: boom" in r.stderr
    assert "throws.js:2" in r.stderr and "Traceback" not in r.stderr
    assert r.stdout == "before\n"


def test_env_not_leaked_to_program(tmp_path):
    _need_node()
    script = tmp_path / "env.js"
    script.write_text("console.log(Object.keys(process.env).some(k => k.startsWith('JSPROF')))\n")
    r = _run([*JSPROF, "instrument", "--engine", "node", "--watch", "*", str(script)])
    assert r.stdout == "false\n", r.stderr
    assert os.environ.get("JSPROF_INSTRUMENT") is None


def test_instrument_trace_opens_in_report_and_flame_with_spans_as_time(tmp_path):
    rows_out, spans_out = tmp_path / "rows.json", tmp_path / "spans.jsprof.json"
    r = _run(
        [*JSPROF, "instrument", "--watch", "*", "-o", str(rows_out), "--trace", str(spans_out)]
        + [str(SHAPES)]
    )
    assert r.returncode == 0, r.stderr
    rows = {f"{x['class']}.{x['method']}": x for x in orjson.loads(rows_out.read_bytes())["rows"]}
    rep = _run([*JSPROF, "report", str(spans_out), "--json", "--all"])
    assert rep.returncode == 0, rep.stderr
    got = {x["name"]: x for x in orjson.loads(rep.stdout)["rows"]}
    # exactly the instrumented rows, each with its self time (async: the synchronous part)
    assert set(got) == set(rows)
    for name, row in rows.items():
        assert got[name]["self_ms"] == pytest.approx(row["self_ms"], abs=2e-3), name
    describe = rows["Shape.describe"]
    assert got["Shape.describe"]["total_ms"] == pytest.approx(describe["total_ms"], abs=2e-3)
    assert got["MathBox.fib"]["self_samples"] == 177  # one sample per call
    flame = tmp_path / "spans.html"
    f = _run([*JSPROF, "flame", str(spans_out), "-o", str(flame)])
    assert f.returncode == 0, f.stderr
    assert "MathBox.fib" in flame.read_text()


def test_report_tables_are_plain_with_titles_on_their_own_line():
    # As `report` prints: no borders, no line ending in spaces, each title on its own line.
    r = _run([*JSPROF, "instrument", "--watch", "*", str(DATA / "api.js")])
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert all(ln == ln.rstrip() for ln in lines), [ln for ln in lines if ln[-1:] == " "]
    head = lines.index(f"{DATA / 'api.js'} · quickjs · watching *")
    assert lines[head + 1].split() == [
        "Class.method", "kind", "calls", "self", "ms", "total", "ms", "mean", "ms", "max", "ms"
    ]
    per_class = lines[lines.index("per class") + 1].split()
    assert per_class == ["class", "methods", "calls", "self", "ms"]
    assert not any(c in r.stderr for c in "│┃━")


ACORN = Path(__file__).parent / "js" / "node_modules" / "acorn" / "dist" / "acorn.mjs"


@pytest.mark.npm
@pytest.mark.parametrize("engine", ENGINES)
def test_scripts_using_the_patched_builtins_run_as_without_instrument(engine, tmp_path):
    # The runtime patches Object.defineProperties, Reflect.getPrototypeOf and
    # Reflect.defineProperty; each called itself through the patched global, so a script
    # using one overflowed the stack: acorn (Object.defineProperties of its prototype
    # accessors) could not be instrumented at all.
    if engine == "node":
        _need_node()
    shutil.copy(ACORN, tmp_path / "acorn.mjs")
    app = tmp_path / "app.mjs"
    app.write_text(
        'import { parse } from "./acorn.mjs";\n'
        "class Shape { area() { return 1; } }\n"
        "const s = new Shape();\n"
        "const m = (value) => ({ value, writable: true, configurable: true });\n"
        "Object.defineProperties(Shape.prototype, { twice: m(function () { return 2; }) });\n"
        'Reflect.defineProperty(Shape.prototype, "thrice", m(function () { return 3; }));\n'
        "const same = Reflect.getPrototypeOf(s) === Shape.prototype;\n"
        'const ast = parse("let x = s.area() + s.twice() + s.thrice()", {ecmaVersion: 2022});\n'
        "console.log(same, ast.body[0].type, s.area() + s.twice() + s.thrice());\n"
    )
    res = run_instrumented(app, ["*"], engine=engine)
    calls = {r.name: r.calls for r in res.rows}
    assert calls == {"Shape.constructor": 1, "Shape.area": 1, "Shape.twice": 1,
                     "Shape.thrice": 1}, calls
