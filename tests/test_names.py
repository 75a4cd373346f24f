"""jsprof.names: the names V8 gives functions, read from their source, checked against V8
itself (node --cpu-prof: every call frame's functionName at its position)."""

import json
import os
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from jsprof.names import FunctionNames

ACORN = Path(__file__).parent / "js" / "node_modules" / "acorn" / "dist" / "acorn.mjs"

# Every form V8 names differently; each function spins so that it is sampled. (An arrow
# in a call's arguments that V8 names after an assignment later in the statement, from
# its parser's state, is left out: jsprof.names does not make that inference.)
CASES = """\
// the first line is no function (the script's own code is at 1:1)
function spin() { var e = Date.now() + 3; while (Date.now() < e); }
var calls = [];
function decl() { spin(); } calls.push(decl);
var byVar = function () { spin(); }; calls.push(byVar);
var other = function ownName() { spin(); }; calls.push(other);
var o = {}; o.member = function () { spin(); }; calls.push(o.member);
function X() {} X.prototype.proto = function () { spin(); }; calls.push(X.prototype.proto);
var lit = { key: function () { spin(); } }; calls.push(lit.key);
var lit2 = { short() { spin(); } }; calls.push(lit2.short);
var deep = { a: { b: function () { spin(); } } }; calls.push(deep.a.b);
const arrow = () => { spin(); }; calls.push(arrow);
o.arrowMember = () => { spin(); }; calls.push(o.arrowMember);
o.asyncArrow = async x => { spin(); }; calls.push(o.asyncArrow);
var one = y => { spin(); }; calls.push(one);
class K {
  constructor() { spin(); }
  method() { spin(); }
  static stat() { spin(); }
  get getter() { spin(); return 1; }
  set setter(v) { spin(); }
  #priv() { spin(); }
  callPriv() { this.#priv(); }
  field = () => { spin(); };
  spun = spin();
}
var k = new K(); calls.push(() => new K());
calls.push(() => k.method());
calls.push(K.stat);
calls.push(() => k.getter);
calls.push(() => { k.setter = 1; });
calls.push(() => k.callPriv());
calls.push(k.field);
var v1, v2; v1 = v2 = function () { spin(); }; calls.push(v1);
calls.push(function () { spin(); });
o["str"] = function () { spin(); }; calls.push(o.str);
o[0] = function () { spin(); }; calls.push(o[0]);
o.b = { c: {} }; o.b.c.d = function () { spin(); }; calls.push(o.b.c.d);
function Ctor() { spin(); this.t = function () { spin(); }; calls.push(this.t); }
new Ctor();
function lower() { spin(); this.u = function () { spin(); }; calls.push(this.u); }
lower.call({});
function ret() { spin(); return function () { spin(); }; } calls.push(ret());
var quoted = { "str key": function () { spin(); }, 7: function () { spin(); } };
calls.push(quoted["str key"], quoted[7]);
var acc = { get gx() { spin(); return 1; } }; calls.push(() => acc.gx);
o.e = {}; o.f = {}; o.e.x = o.f.y = function () { spin(); }; calls.push(o.e.x);
var paren = (function () { spin(); }); calls.push(paren);
var cond = Math.random() < 2 ? function () { spin(); } : null; calls.push(cond);
var orElse = o.nothing || function () { spin(); }; calls.push(orElse);
var Cls = class { m2() { spin(); } }; calls.push(() => new Cls().m2());
var NoCtor = class extends K {}; calls.push(() => new NoCtor());
var inArray = { a: [function () { spin(); }] }; calls.push(inArray.a[0]);
var computed = { ["comp" + 1]: function () { spin(); } }; calls.push(computed.comp1);
var TokContext = function TokContext(f) { spin(); this.f = f; };
var types = { tmpl: new TokContext(function (p) { spin(); }) }; calls.push(types.tmpl.f);
var bound = function () { spin(); }.bind(null); calls.push(bound);
var dflt = function (f = function () { spin(); }) { f(); }; calls.push(dflt);
for (var n = 0; n < 4; n++) for (const f of calls) f();
"""


def _v8_names(profile: Path, url_suffix: str) -> dict[tuple[int, int], str]:
    """(line, column) 1-based -> functionName, of every call frame of a script."""
    doc = json.loads(profile.read_text())
    out = {}
    for node in doc["nodes"]:
        cf = node["callFrame"]
        if cf["url"].endswith(url_suffix):
            out[(cf["lineNumber"] + 1, cf["columnNumber"] + 1)] = cf["functionName"]
    return out


def _cpu_prof(tmp_path: Path, script: Path, *args: str) -> Path:
    """V8's profile of the script; beside it, in tmp_path/"coverage", V8's coverage of the
    same run (which functions ran: see _v8_ran)."""
    if shutil.which("node") is None:
        pytest.fail("node is not installed; these tests need Node.js 20")
    out = tmp_path / "prof"
    subprocess.run(
        ["node", "--cpu-prof", f"--cpu-prof-dir={out}", "--cpu-prof-interval", "100",
         str(script), *args],
        check=True, timeout=120,
        env={**os.environ, "NODE_V8_COVERAGE": str(tmp_path / "coverage")},
    )
    (profile,) = out.glob("*.cpuprofile")
    return profile


def _v8_ran(tmp_path: Path, url_suffix: str) -> Counter[str]:
    """How many functions of each name ran in _cpu_prof's run, by V8's coverage (which,
    unlike a profile, lists a function that ran too briefly to be sampled)."""
    ran: Counter[str] = Counter()
    for part in (tmp_path / "coverage").glob("*.json"):
        for script in json.loads(part.read_text())["result"]:
            if script["url"].endswith(url_suffix):
                ran.update(fn["functionName"] for fn in script["functions"]
                           if fn["ranges"][0]["count"] > 0)
    return ran


def test_every_form_is_named_as_v8_names_it(tmp_path):
    script = tmp_path / "cases.js"
    script.write_text(CASES)
    v8 = _v8_names(_cpu_prof(tmp_path, script), "/cases.js")
    index = FunctionNames(CASES)
    want = {pos: name for pos, name in v8.items() if pos != (1, 1)}  # the script's own code
    assert len(want) >= 50, sorted(v8.items())
    # A class and the function that runs its field initializers share one position in V8's
    # profile: which of the two a run's dict keeps depends on which V8 sampled last, so
    # there either of V8's names at that position is the one jsprof.names gives.
    doc = json.loads(next((tmp_path / "prof").glob("*.cpuprofile")).read_text())
    at: dict[tuple[int, int], set[str]] = {}
    for node in doc["nodes"]:
        cf = node["callFrame"]
        if cf["url"].endswith("/cases.js"):
            at.setdefault((cf["lineNumber"] + 1, cf["columnNumber"] + 1), set()).add(
                cf["functionName"])
    got = {}
    for pos in want:
        fn = index.at(*pos)
        got[pos] = None if fn is None else fn.name
        if len(at[pos]) > 1 and got[pos] in at[pos]:
            want[pos] = got[pos]
        # and V8's position is where jsprof.names places the function for V8
        assert fn is None or (fn.v8_line, fn.v8_column) == pos, (pos, fn)
    assert got == want
    assert index.at(1, 1) is None
    # the forms V8 itself names this way (pinned: a change of V8's rules shows here)
    by_name = set(want.values())
    assert {"o.member", "X.proto", "key", "b", "o.arrowMember",
            "K", "get getter", "set setter", "#priv", "o.<computed>", "o.str", "o.b.c.d",
            "Ctor.t", "o.e.x.o.f.y", "cond", "orElse", "inArray.a", "computed",
            "types.tmpl", "NoCtor", "str key", "7", "f", ""} <= by_name, by_name


def test_a_position_in_a_head_names_its_function():
    """Engines and maps point at different tokens of a function's head: the `function`
    keyword (QuickJS), the `(` (V8), a method's key, an arrow's parameter, an original
    token a source map moved them to; all name the same function, and a position in its
    body names none."""
    src = (
        "var pp = {};\npp.next = function (a) {\n  return a;\n};\n"
        "class C { static get x() { return 1; } }\n"
    )
    index = FunctionNames(src)
    for col in (11, 20, 24):  # `function`, `(`, `{`... the body's `{` is not the head
        fn = index.at(2, col)
        assert (fn.name if fn else None) == ("pp.next" if col < 24 else None)
    assert index.at(3, 3) is None  # inside the body
    assert index.at(5, 11).name == "get x" and index.at(5, 22).name == "get x"
    assert index.at(99, 1) is None and index.at(0, 1) is None


def test_columns_are_characters_not_bytes():
    src = 'var s = "ééé"; var f = function () {};\nvar g = () => 1;\n'
    index = FunctionNames(src)
    fn = index.at(1, 25)
    assert fn is not None and fn.name == "f" and fn.column == 24
    assert (fn.v8_line, fn.v8_column) == (1, 33)
    assert index.at(2, 9).name == "g"


@pytest.mark.npm
def test_acorn_is_named_as_v8_names_it(tmp_path):
    """Real code: every function of acorn that V8 profiles while acorn parses itself has
    V8's name and V8's position in jsprof.names."""
    assert ACORN.exists(), f"{ACORN} missing: `make test` installs tests/js (npm ci)"
    driver = tmp_path / "parse.mjs"
    driver.write_text(
        f"import {{ parse }} from {json.dumps(ACORN.as_uri())};\n"
        'import { readFileSync } from "node:fs";\n'
        f"const src = readFileSync({json.dumps(str(ACORN))}, 'utf8');\n"
        "const end = Date.now() + 1000;\n"
        "while (Date.now() < end) parse(src, { ecmaVersion: 'latest', sourceType: 'module' });\n"
    )
    v8 = _v8_names(_cpu_prof(tmp_path, driver), "/acorn.mjs")
    index = FunctionNames(ACORN.read_text())
    positions = [pos for pos in v8 if pos != (1, 1)]
    assert len(positions) >= 100
    wrong = {
        pos: (v8[pos], None if index.at(*pos) is None else index.at(*pos).name)
        for pos in positions
        if index.at(*pos) is None or index.at(*pos).name != v8[pos]
    }
    assert wrong == {}


SPIN = "function spin() { var e = Date.now() + 40; while (Date.now() < e); }\n"


def _quickjs_frames(rt, src, filename=None):
    session = rt.profiler(sample_interval=1.0)
    rt.eval(src, filename) if filename else rt.eval(src)
    trace = session.stop()
    return {(trace.resources[f.resource_id], f.line, f.column): f.name for f in trace.frames}


def test_quickjs_names_frames_from_their_own_source_only():
    """QuickJS names a script's frames as V8 does, from the text it ran; code QuickJS
    files under `<input>` (`new Function`, eval, and eval() without a name) and a name
    given to two different texts are not named from a text that is not theirs."""
    from jsprof.engines.quickjs import QuickJS

    # `new Function` code: its `function` keyword at <input>:5:8 (two lines of header),
    # where the script has `o.tc = function` (V8: `o.tc`)
    src = (
        SPIN + "var o = {};\n"
        'o.made = new Function("spin", "\\n\\nreturn function () { spin(); };")(spin);\n'
        "o.made();\n"
        "o.tc = function () { spin(); }; o.tc();\n"
    )
    assert src.splitlines()[4].index("function") == 7
    named = _quickjs_frames(QuickJS(), src, "app.js")
    app = [k for k in named if k[0].endswith("app.js")]
    # named and placed as V8 does: at the `(` of its parameters (QuickJS: its `function`)
    assert named[(app[0][0], 5, 17)] == "o.tc" and (app[0][0], 5, 8) not in named
    assert named[("<input>", 5, 8)] == ""  # the Function's own code, not the script's
    unnamed = _quickjs_frames(QuickJS(), src)  # the script itself under <input>
    assert unnamed[("<input>", 5, 8)] == ""
    rt = QuickJS()
    _quickjs_frames(rt, SPIN + "var a = {}; a.x = function () { spin(); }; a.x();\n", "same.js")
    again = _quickjs_frames(rt, SPIN + "var b = {}; b.y = function () { spin(); }; b.y();\n",
                            "same.js")
    assert "b.y" not in again.values() and "a.x" not in again.values()


def test_class_field_initializers_have_v8s_names():
    """QuickJS runs a class's field initializers in nameless functions placed at the first
    initializer's code; V8 calls them `<instance_members_initializer>` and (static fields
    and blocks) `<static_initializer>`. A function inside an initializer is itself."""
    src = (
        "class P {\n"
        "  x = make(1);\n"
        "  static s = make(2);\n"
        "  static { P.r = make(3); }\n"
        "  f = () => make(4);\n"
        "}\n"
    )
    index = FunctionNames(src)
    # placed where V8 places them: the class's first character, the `static` of its last
    # static field (measured: tests/test_names.py::test_quickjs_places_functions_as_v8)
    assert index.initializer_at(2, 7) == ("<instance_members_initializer>", 1, 1)
    assert index.initializer_at(3, 14) == ("<static_initializer>", 3, 3)
    assert index.initializer_at(4, 12) == ("<static_initializer>", 3, 3)
    assert index.initializer_at(5, 13) is None  # in the arrow's body
    assert index.at(5, 7).name == "f"
    assert index.initializer_at(1, 1) is None


CLASSES = """\
function spin() { var e = Date.now() + 2; while (Date.now() < e); }
class WithCtor {
  constructor() { spin(); }
  field = (spin(), () => { spin(); });
}
class NoCtor {
  field = (spin(), 1);
}
class Plain {
  constructor() { spin(); }
  m() { spin(); }
}
for (let i = 0; i < 60; i++) { new WithCtor(); new NoCtor(); new Plain().m(); }
"""


def test_the_function_at_a_class_is_named_as_v8_names_it(tmp_path):
    """At a class with a constructor of its own V8 reports only the function running its
    instance fields' initializers (`<instance_members_initializer>`), the constructor being
    at `constructor(`; at a class without one, its default constructor (the class's name)
    shares the position with that function, which holds the self time. Every initializer
    here spins, so V8 samples it or the spin it calls."""
    script = tmp_path / "classes.js"
    script.write_text(CLASSES)
    prof = _cpu_prof(tmp_path, script)
    at: dict[tuple[int, int], set[str]] = {}
    for node in json.loads(prof.read_text())["nodes"]:
        cf = node["callFrame"]
        # on a sampled stack (beside busy loops V8's few samples of an initializer can all
        # be in the spin it calls: no self hits of its own)
        if cf["url"].endswith("/classes.js"):
            at.setdefault((cf["lineNumber"] + 1, cf["columnNumber"] + 1), set()).add(
                cf["functionName"])
    index = FunctionNames(CLASSES)
    assert at[(2, 1)] == {"<instance_members_initializer>"}, at
    assert index.at(2, 1).name == "<instance_members_initializer>"
    assert index.at(3, 14).name == "WithCtor" == next(iter(at[(3, 14)]))
    assert at[(6, 1)] <= {"NoCtor", "<instance_members_initializer>"}, at
    assert "<instance_members_initializer>" in at[(6, 1)]
    assert index.at(6, 1).name == "<instance_members_initializer>"
    assert index.at(10, 14).name == "Plain"
    assert index.at(9, 1).name == ""  # V8 has no function of its own there


def test_quickjs_columns_are_characters():
    """QuickJS counts columns in UTF-8 bytes, from 0 on a script's first line: jsprof
    gives the line's 1-based characters, as every engine and format does."""
    from jsprof.engines.quickjs import QuickJS

    src = (
        'var s = "éé€"; var f = function () { spin(); }; f();\n'
        'var t = "éé€"; var g = function () { spin(); }; g();\n'
        + SPIN
    )
    got = _quickjs_frames(QuickJS(), src, "cols.js")
    # placed as V8 does, at the `(` after `function ` (QuickJS: `function`, byte 27 and 28)
    want = src.splitlines()[0].index("function") + 10  # 33
    assert {(line, col) for (_, line, col), name in got.items() if name in ("f", "g")} == {
        (1, want), (2, want)
    }, got


# Minified code, every kind of function: QuickJS counted a token's column from the last
# identifier or blank before it (`var h=(t)=>` put the arrow at `h`, `#m(){` after
# `#a=[];` at `class`), from 0 on line 1, and placed a class's default constructor at its
# closing `}`, its field initializers at their first code (or nowhere).
MINIFIED = """\
function spin(){var e=Date.now()+3;while(Date.now()<e);}
var h=(t)=>{spin()},cu=()=>{spin();return()=>{spin()}},ap={apply:(m,l)=>{spin()}};
const g=async function(){spin()},gen=function*(){spin();yield 1};
var o={m(){spin()},get v(){spin();return 1},"s k"(){spin()},*gm(){spin();yield 1},
async am(){spin()}};
class K{#a=[];#b="";static s=(()=>{spin();return 1})();f=(()=>{spin();return 1})();
#m(){spin()}static sm(){spin()}run(){this.#m()}get gg(){spin();return 1}}
class D{a=null;b=[];c=(spin(),1)}class E extends D{constructor(){super();spin()}}
class S{static a=spin();static{spin()}static b=spin();}class T{static{spin()}}
var fe=(function(){spin();return function named(){spin()}})(),w=[1,function(){spin()}];
function run(){h(1);cu()();ap.apply();g();gen().next();o.m();o.v;o["s k"]();o.gm().next();o.am();
var k=new K;k.run();K.sm();k.gg;new D;new E;fe();w[1]()}
for(var i=0;i<4;i++)run();
"""


def test_quickjs_places_functions_as_v8(tmp_path):
    """Every function QuickJS sampled, on V8's test forms and minified code of every kind
    (arrows, methods, getters, private and static class members, async and generator
    functions, function expressions, class constructors and field initializers), is at
    V8's position for it under V8's name: one function is one row whichever engine ran it
    (before: 20 of the minified forms elsewhere)."""
    from jsprof.engines.quickjs import QuickJS

    for i, src in enumerate((CASES, MINIFIED)):
        script = tmp_path / f"forms{i}.js"
        script.write_text(src)
        # The comparison is sound only if V8 sampled every function that ran: one QuickJS
        # caught in a moment and V8 did not would be a row V8 "lacks" by chance (a CI run
        # failed so on Ctor, which then ran for microseconds). So every function spins, and
        # V8's coverage of the same run says none that ran is missing from its profile.
        # A spin is 3 ms of wall clock: a loaded machine can keep the thread off its core
        # for all of it (TokContext unsampled in a run beside another pytest worker at load
        # ~20), so V8 runs again, at most 4 times, until its profile holds every function.
        for attempt in range(4):
            out = tmp_path / f"{i}-{attempt}"
            prof = _cpu_prof(out, script)
            v8: set[tuple[str, int, int]] = set()
            for node in json.loads(prof.read_text())["nodes"]:
                cf = node["callFrame"]
                if cf["url"].endswith(f"/forms{i}.js"):
                    v8.add((cf["functionName"], cf["lineNumber"] + 1, cf["columnNumber"] + 1))
            rows = Counter(name for name, _, _ in v8)
            ran = _v8_ran(out, f"/forms{i}.js")
            missed = {name for name, n in ran.items() if rows[name] < n}
            if not missed:
                break
        assert missed == set(), (ran, rows)
        got = {(name, line, col) for (url, line, col), name in
               _quickjs_frames(QuickJS(), src, str(script)).items() if url.endswith(".js")}
        assert len(got) >= (50 if i == 0 else 25), sorted(got)
        # a computed key: QuickJS names the function by the key's value (jsprof.names)
        got = {("computed" if name == "comp1" else name, line, col) for name, line, col in got}
        assert got - v8 == set(), (sorted(got - v8), sorted(v8 - got))


# Functions waiting for V8's inferrer to name them (array elements, a ternary's branches,
# a sequence's): an arrow or a call takes the last one out of the list, so V8 names only
# the last of `[() => 1, () => 2]` (measured, Node 20). Left out, as in CASES: names V8
# takes from its parser's state (`[() => 1, {k: 1}, () => 2]` names the first `g.k`).
ARRAYS = """\
// the first line is no function (the script's own code is at 1:1)
function spin() { var e = Date.now() + 3; while (Date.now() < e); }
function id(v) { return v; }
var calls = [];
const two = [() => { spin(); }, () => { spin(); }]; calls.push(...two);
const four = [() => { spin(); }, () => { spin(); }, () => { spin(); }, () => { spin(); }];
calls.push(...four);
const mixed = [() => { spin(); }, () => { spin(); }, function () { spin(); }];
calls.push(...mixed);
const fnFirst = [function () { spin(); }, () => { spin(); }]; calls.push(...fnFirst);
const fnBetween = [() => { spin(); }, function () { spin(); }, () => { spin(); }];
calls.push(...fnBetween);
const fns = [function () { spin(); }, function () { spin(); }]; calls.push(...fns);
const gap = [() => { spin(); }, 5, () => { spin(); }]; calls.push(gap[0], gap[2]);
const nested = [[() => { spin(); }], () => { spin(); }]; calls.push(nested[0][0], nested[1]);
const afterCall = [() => { spin(); }, id(1)]; calls.push(afterCall[0]);
const fnAfterCall = [function () { spin(); }, id(2)]; calls.push(fnAfterCall[0]);
const afterNew = [() => { spin(); }, new Array(2)]; calls.push(afterNew[0]);
const one = [() => { spin(); }]; calls.push(one[0]);
var obj = { list: [() => { spin(); }, () => { spin(); }] }; calls.push(...obj.list);
obj.later = [() => { spin(); }, () => { spin(); }]; calls.push(...obj.later);
const pick = Math.random() < 2 ? () => { spin(); } : () => { spin(); }; calls.push(pick);
const pick2 = Math.random() > 2 ? () => { spin(); } : () => { spin(); }; calls.push(pick2);
const asArg = id([() => { spin(); }, () => { spin(); }]); calls.push(...asArg);
for (var n = 0; n < 2; n++) for (const f of calls) f();
"""


def test_array_elements_are_named_as_v8_names_them(tmp_path):
    script = tmp_path / "arrays.js"
    script.write_text(ARRAYS)
    v8 = _v8_names(_cpu_prof(tmp_path, script), "/arrays.js")
    index = FunctionNames(ARRAYS)
    want = {pos: name for pos, name in v8.items() if pos != (1, 1) and name not in (
        "spin", "id")}
    assert len(want) >= 30, sorted(v8.items())
    got = {pos: getattr(index.at(*pos), "name", None) for pos in want}
    assert got == want
    # the forms pinned (a change of V8's rules shows here): of two arrows only the last
    # is named, of two function expressions both; a call after one unnames it, a `new` does not
    by_line: dict[int, list[str]] = {}
    for (line, _col), name in sorted(want.items()):
        by_line.setdefault(line, []).append(name)
    assert by_line[5] == ["", "two"], by_line
    assert by_line[13] == ["fns", "fns"], by_line
    assert by_line[16] == [""] and by_line[17] == [""] and by_line[18] == ["afterNew"], by_line


def test_a_function_before_a_deep_expression_is_named(tmp_path):
    """A function followed in its array by an expression thousands of nodes deep (a long
    `+` chain, as minified string concatenations are): named as V8 names it, where the
    walk of what follows it was recursive and raised RecursionError (a QuickJS recording
    of such a script failed with a traceback)."""
    terms = " + ".join(["1"] * 3000)
    src = ("// the first line is no function (the script's own code is at 1:1)\n"
           "function spin() { var e = Date.now() + 3; while (Date.now() < e); }\n"
           f"var deep = [function () {{ spin(); }}, {terms}];\n"
           "for (var n = 0; n < 4; n++) deep[0]();\n")
    script = tmp_path / "deep.js"
    script.write_text(src)
    v8 = _v8_names(_cpu_prof(tmp_path, script), "/deep.js")
    want = {pos: name for pos, name in v8.items() if pos[0] == 3}
    assert len(want) == 1, sorted(v8.items())
    index = FunctionNames(src)
    got = {pos: getattr(index.at(*pos), "name", None) for pos in want}
    assert got == want and list(want.values()) == ["deep"], (got, want)


def test_the_functions_of_a_script_are_settled_in_one_pass(monkeypatch):
    """Whether V8's inferrer drops a function before naming it was decided per function by
    a walk of everything after it (`names._dropped`): naming an array of N function
    expressions (a compiler's function table) took N^2 steps, 1.8 s of CPU for 1,000 and
    13 s for 3,000. `FunctionNames` now runs V8's list once per function body
    (`dropped_functions`) and never takes that walk for a function V8 lists; the walk and
    the one pass agree on every function of real npm code (minified, too)."""
    import jsprof.names as names

    node_modules = Path(__file__).parent / "js" / "node_modules"
    for rel in ("acorn/dist/acorn.mjs", "terser/dist/bundle.min.js",
                "prettier/plugins/babel.js", "lodash/lodash.js"):
        index = FunctionNames((node_modules / rel).read_text(encoding="utf-8"))
        once = names.dropped_functions(index._root)
        assert once, rel  # real code has functions V8 drops (arguments of calls)
        walked = [names.v8_name(n) for n in index._nodes]
        assert [names.v8_name(n, once) for n in index._nodes] == walked, rel
    mixed = "[function () {}, f(x), function () {}, () => 1, () => 2, function () {}]"
    table = "var t = [" + ", ".join(["function () {}"] * 500) + "];\nvar m = " + mixed + ";\n"
    walked = [names.v8_name(n) for n in FunctionNames(table)._nodes]

    def walk(*args):
        raise AssertionError("the per-function walk was taken")

    monkeypatch.setattr(names, "_dropped", walk)
    index = FunctionNames(table)
    got = [index.name(i) for i in range(len(index))]
    assert got == walked
    assert got[:500] == ["t"] * 500  # two function expressions in a row: both named
    assert got[500:] == ["", "", "", "m", "m"]  # as test_array_elements_... pins V8's rules


def test_naming_a_function_walks_only_the_body_that_holds_it(monkeypatch):
    """A source-mapped report names the few functions a profile sampled, but the names'
    index walked every body of the original sources for V8's dropped functions (1.3 s of
    a 3.8 s report of prettier on QuickJS). Now only the bodies holding the functions
    asked about are walked, and the names are those of the whole-tree pass."""
    import jsprof.names as names

    text = (Path(__file__).parent / "js" / "node_modules" / "acorn" / "dist" / "acorn.mjs"
            ).read_text(encoding="utf-8")
    walked: list[int] = []
    real = names.dropped_in_scope

    def counted(scope, nested=None):
        walked.append(scope.id)
        return real(scope, nested)

    index = FunctionNames(text)
    monkeypatch.setattr(names, "dropped_in_scope", counted)
    inner = max(range(len(index)), key=lambda i: index._nodes[i].start_point[0])
    index.name(inner)
    assert len(walked) == 1, len(walked)
    monkeypatch.setattr(names, "dropped_in_scope", real)
    once = names.dropped_functions(index._root)
    assert [index.name(i) for i in range(len(index))] == [
        names.v8_name(n, once) for n in index._nodes]
