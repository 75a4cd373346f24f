"""`jsprof diff` of minified bundles (issue 32, anonkey): acorn (npm, pinned) minified by
terser and by esbuild, recorded on Node. Every anonymous function of a one-line bundle is on
line 1 and dozens of functions share terser's short names (`e`, `t`), so matching by name
and script (and line, for the anonymous) added up different functions into one row: a
prettier bundle diffed with itself had 119 functions in its top row. Each row is now one
function of `report`; a recording against itself changes nothing."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import jsprof
from jsprof.analysis.diff import ResourceMatcher, diff_profiles, key_rule
from jsprof.analysis.profile import summarize
from jsprof.record import record

pytestmark = pytest.mark.npm

JS = Path(__file__).parent / "js" / "node_modules"
BIN = JS / ".bin"

# acorn parses marked's source for a while: enough samples in many of its functions
DRIVER = """
var SOURCE = {source};
var end = Date.now() + 700, n = 0;
while (Date.now() < end || n < 4) {{
  acornLib.parse(SOURCE, {{ ecmaVersion: "latest", sourceType: "module", locations: true }});
  n++;
}}
console.log(n > 0);
"""


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    """terser.min.js and esbuild.min.js: acorn with the driver, minified to one line."""
    d = tmp_path_factory.mktemp("minified")
    for f in ("acorn.js", "acorn.mjs"):
        assert (JS / "acorn" / "dist" / f).exists(), "tests/js missing: `make test` installs it"
        shutil.copy(JS / "acorn" / "dist" / f, d / f)
    body = DRIVER.format(source=json.dumps((JS / "marked" / "lib" / "marked.esm.js").read_text()))
    (d / "driver.mjs").write_text('import * as acornLib from "./acorn.mjs";\n' + body)
    (d / "driver.js").write_text(
        'var acornLib = typeof exports === "object" ? exports : globalThis.acorn;\n' + body
    )
    subprocess.run(
        [str(BIN / "esbuild"), "driver.mjs", "--bundle", "--minify",
         "--outfile=esbuild.min.js", "--log-level=warning"],
        cwd=d, check=True, timeout=120,
    )
    subprocess.run(
        [str(BIN / "terser"), "acorn.js", "driver.js", "-c", "-m", "-o", "terser.min.js"],
        cwd=d, check=True, timeout=180,
    )
    return d


def _functions(rec):
    """(name, resource, line, column) -> self ms, per function `report` lists."""
    s = summarize(rec)
    return {
        (k.name, k.resource, k.line, k.column): ms
        for k, ms, n in zip(
            s.stats.keys, s.stats.self_ms.tolist(), s.stats.total_samples.tolist(), strict=True
        )
        if n > 0 and k.resource
    }


def _members(key, functions):
    """The functions of `report` a diff row stands for."""
    return [
        f for f in functions
        if f[0] == key.name and f[1] == key.resource
        and (key.line is None or f[2] == key.line)
        and (getattr(key, "column", None) in (None, f[3]))
    ]


@pytest.mark.parametrize("bundle", ["terser.min.js", "esbuild.min.js"])
def test_diff_of_a_minified_bundle_is_per_function(bundles, bundle, tmp_path):
    a = record(bundles / bundle, engine="node", sample_interval=0.5)
    b = record(bundles / bundle, engine="node", sample_interval=0.5)
    fa, fb = _functions(a), _functions(b)
    script = next(f[1] for f in fa if f[1].endswith(bundle))
    lines = [f[2] for f in fa if f[1] == script and not f[0]]
    names = [f[0] for f in fa if f[1] == script and f[0]]
    # what the rule is for: anonymous functions sharing a line, and a shared name
    assert len(lines) > len(set(lines)), lines
    assert len(names) > len(set(names)), sorted(names)

    # against itself: no change, and each row of the bundle is one function of `report`
    d = diff_profiles(a, a, rank="ms", anonymous_by_line=True)
    rows = [r for r in d.rows if r.key.resource == script]
    assert all(r.status == "" and not r.changed for r in d.rows)
    for r in rows:
        members = _members(r.key, fa)
        assert len(members) == 1, (r.key.label(), members)
        assert r.base_self_ms == pytest.approx(fa[members[0]])
    assert len(rows) == len([f for f in fa if f[1] == script])
    assert len({r.key.label() for r in rows}) == len(rows)  # told apart on screen too

    # two recordings of one bundle: each row one function of each side's `report`
    d = diff_profiles(a, b, rank="ms", anonymous_by_line=True)
    for r in (r for r in d.rows if r.key.resource == script):
        ma, mb = _members(r.key, fa), _members(r.key, fb)
        assert len(ma) <= 1 and len(mb) <= 1, (r.key.label(), ma, mb)
        if ma and mb:
            assert ma == mb  # one function: the same place in the same bundle
        assert (r.status == "new") == (not ma) and (r.status == "removed") == (not mb)

    # the command: its table and --json name the rows apart
    out = tmp_path / "a.json"
    jsprof.save(a, out)
    p = subprocess.run(
        [sys.executable, "-m", "jsprof.cli", "diff", str(out), str(out), "--json"],
        capture_output=True, text=True, timeout=120,
    )
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    names = [(r["name"], r["resource"]) for r in doc["rows"]]
    assert len(names) == len(set(names))


EDIT = "globalThis.jsprofEdit=1;"


def test_an_edit_mid_line_keeps_each_function_of_a_shared_name_itself(bundles, tmp_path):
    """keyorder (issue 32): esbuild's bundle and the same bundle with a statement added in
    the middle of one line, recorded on Node: the columns after the edit shift,
    the rest of the bundle stays. Every function of a name several functions share (the
    anonymous ones, minified names) pairs with itself in the diff: its key on each side
    is the same exactly when the edit moved the one onto the other, so the edit causes no
    [new] or [removed] and no row holds strangers. Before, the script counted as moved (its
    functions of a name of their own after the edit moved) and each such name was one
    row of all its functions."""
    text = (bundles / "esbuild.min.js").read_text()
    lines = text.split("\n")
    # top-level statement boundaries (acorn's `var pp$N = Parser.prototype`): the middle
    # one of the line that has most
    spots = [[m.start() + 1 for m in re.finditer(r";var \w+=\w+\.prototype[,;]", s)]
             for s in lines]
    longest = max(range(len(lines)), key=lambda i: len(spots[i]))
    spots = spots[longest]
    assert len(spots) >= 3, spots
    start = sum(len(s) + 1 for s in lines[:longest])
    at = spots[len(spots) // 2]
    edited = tmp_path / "edited"
    edited.mkdir()
    (edited / "esbuild.min.js").write_text(text[: start + at] + EDIT + text[start + at:])
    line, column = longest + 1, at + 1  # of the first character added (1-based)

    def moved(p):
        return (p[0], p[1] + len(EDIT)) if p[0] == line and p[1] >= column else p

    a = record(bundles / "esbuild.min.js", engine="node", sample_interval=0.5)
    b = record(edited / "esbuild.min.js", engine="node", sample_interval=0.5)
    prefixes = (str(bundles), str(edited))
    match = ResourceMatcher.for_pair(
        *({r for t in rec.tracks for r in t.trace.resources} for rec in (a, b)), prefixes
    )
    rule = key_rule((a, b), None, match)
    fa, fb = _functions(a), _functions(b)
    script = next(f[1] for f in fa if f[1].endswith("esbuild.min.js"))
    groups: dict[str, list[set]] = {}
    for side, fs in enumerate((fa, fb)):
        for name, res, ln, col in fs:
            if res.endswith("esbuild.min.js"):
                groups.setdefault(name, [set(), set()])[side].add((ln, col))
    shared = {n: g for n, g in groups.items() if max(len(g[0]), len(g[1])) > 1}
    places = [p for g in shared.values() for p in g[0]]
    # what the test is for: shared names on both sides of the edit, and on the edit's line
    assert any(moved(p) != p for p in places) and any(moved(p) == p for p in places), places
    wrong = []
    for name, (pa, pb) in shared.items():
        for p in pa:
            for q in pb:
                same = rule(name, match(script), *p, side=0) == rule(
                    name, match(script), *q, side=1)
                if same != (q == moved(p)):
                    wrong.append((name or "(anonymous)", p, q, same))
    assert wrong == [], (len(wrong), wrong[:10])
    # and the diff: a row only one side has is a function the other did not sample
    d = diff_profiles(a, b, rank="ms", anonymous_by_line=True, strip_prefixes=prefixes)
    for r in d.rows:
        if r.key.resource == match(script) and r.key.name in shared and r.status:
            pa, pb = shared[r.key.name]
            there = {moved(p) for p in pa} & pb
            assert (r.key.line, r.key.column) not in there, (r.key.label(), r.status)
