"""A source map uploaded for one release: every comparison across releases compares like
with like (issue 34, mapmix).

A new user's store: releases 1.0.0 and 1.1.0 served the SAME bundle (1.1.0 walks the AST
4 times a parse instead of once), the map was uploaded for 1.0.0 only. Before the fix
1.0.0's functions were named from the map and 1.1.0's as recorded (minified), so
`fleet regressions` reported every hot minified function of 1.1.0 "new" and `fleet diff`
listed each function [removed] on one side and [new] on the other. A map is about a
script's bytes, not a release label: it now names the same bundle in the other release
(`release.shared_maps`). When the other release's script is another build, the script
is compared as recorded on both sides and `warnings` says which release lacks a map.

Real code: acorn (npm, pinned) and a walker bundled by esbuild (as the other source-map
tests do), run by QuickJS on the CPU clock, several runs per release."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from fleet_util import T0, upload
from jsprof.cli import main
from jsprof.record import record
from jsprof.store import Store
from jsprof.store.tables.compact import compact

pytestmark = pytest.mark.npm

JS = Path(__file__).parent / "js" / "node_modules"
ESBUILD = JS / ".bin" / "esbuild"
DRIVER = """import {{ parse }} from "./acorn.mjs";
const SOURCE = {source};
function countNodes(ast) {{
  let n = 0;
  const stack = [ast];
  while (stack.length) {{
    const node = stack.pop();
    n++;
    for (const k in node) {{
      const v = node[k];
      if (v && typeof v === "object") {{
        if (Array.isArray(v)) {{
          for (const c of v) if (c && typeof c.type === "string") stack.push(c);
        }} else if (typeof v.type === "string") stack.push(v);
      }}
    }}
  }}
  return n;
}}
const rounds = Number(scriptArgs[1]);
let total = 0;
for (let i = 0; i < 15; i++) {{
  const ast = parse(SOURCE, {{ ecmaVersion: "latest" }});
  for (let r = 0; r < rounds; r++) total += countNodes(ast);
}}
console.log(total > 0);
"""
RUNS = 10  # page loads per release (6 a side: a permutation p of at least 1/462)
PLANTED = "countNodes"


def _bundle(d: Path, out: str, *extra: str) -> None:
    subprocess.run([str(ESBUILD), "driver.mjs", "--bundle", "--minify", "--sourcemap",
                    f"--outfile={out}", "--log-level=warning", *extra],
                   cwd=d, check=True, timeout=120)


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """Three builds of one app and the traces of RUNS runs of each: `a` walking once and
    4 times a parse, `b` (a banner above the code: every position moves) and `m` (a
    statement added in acorn's `toAssignable`: on the minified line, every function
    after it a few columns on, the ones before in place) 4 times."""
    assert ESBUILD.exists(), "tests/js missing: `make test` installs it"
    d = tmp_path_factory.mktemp("mapmix")
    acorn = (JS / "acorn" / "dist" / "acorn.mjs").read_text()
    head = "pp$7.toAssignable = function(node, isBinding, refDestructuringErrors) {\n"
    assert head in acorn
    src = (JS / "acorn" / "dist" / "bin.js").read_text()
    for b in ("a", "b", "m"):
        (d / b).mkdir()
    for at, code in ((d, acorn), (d / "m", acorn.replace(head, head + (
            '  if (node && node.type === "ParenthesizedExpression" && '
            "this.options.ecmaVersion < 3) { return node }\n"), 1))):
        (at / "acorn.mjs").write_text(code)
        (at / "driver.mjs").write_text(DRIVER.format(source=json.dumps(src)))
    _bundle(d, "a/app.min.js")
    _bundle(d, "b/app.min.js", "--banner:js=/*! shop 2.0\n * acorn (MIT)\n */")
    _bundle(d / "m", "app.min.js")
    traces = {}
    for key, build, rounds in (("a1", "a", 1), ("a4", "a", 4), ("b4", "b", 4),
                               ("m4", "m", 4)):
        traces[key] = [record(d / build / "app.min.js", sample_interval=1.0, clock="cpu",
                              args=[str(rounds)]).tracks[0].trace for _ in range(RUNS)]
    return d, traces


def _store(path: Path, sides: list[tuple[str, list]], days: list[int] | None = None) -> Path:
    """Releases in turn, each page load one upload of /static/app.min.js, compacted; a
    side's uploads on UTC day `days[i]` from T0 (default: all on the first)."""
    st = Store(path)
    n = 0
    for i, (release, traces) in enumerate(sides):
        day = 0 if days is None else days[i]
        for tr in traces:
            tr = tr.replace(resources=[
                "https://shop.example/static/app.min.js" if r.endswith("app.min.js") else r
                for r in tr.resources])
            upload(st, f"{release}-{n}", tr, app="shop", release=release, route="/",
                   sampleInterval=1.0, receivedAt=T0 + day * 86400e3 + 3600e3 + n * 60e3,
                   pageLoad=f"l{n}")
            n += 1
    compact(st)
    st.close()
    return path


def _docs(store: Path, engine: object) -> tuple[dict, dict]:
    """`fleet regressions --json` and `fleet diff --json` of 1.0.0 -> 1.1.0 on `engine`."""
    from jsprof.fleet import api, regressions
    from jsprof.fleet.filters import Filters

    f = Filters(app="shop")
    with api.session(api.open_store(store), engine) as s:
        reg = regressions.regressions(s, f, min_traces=3, min_samples=100)
        diff, _ = api.diff(s, f.with_side("release=1.0.0", "--base"),
                           f.with_side("release=1.1.0", "--new"), None, (), 3, 100)
    return reg, diff


def _one_sided(diff: dict) -> list[tuple[str, str, float]]:
    """The diff's new and removed rows: label, status, self % on the side that has it."""
    return [(r["label"], r["status"], r["newSelfPct"] if r["status"] == "new"
             else r["baseSelfPct"]) for r in diff["rows"] if r["status"] in ("new", "removed")]


def _one_sided_pct(diff: dict) -> float:
    """The most self time % one side has in functions the other lacks."""
    got = _one_sided(diff)
    return max(sum(p for _, st, p in got if st == k) for k in ("new", "removed"))


def _engines(dask_client: object) -> list[object]:
    from jsprof.fleet.engine import DaskEngine

    return ["duckdb", DaskEngine(client=dask_client)]


def _upload_map(store: Path, release: str, build: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["fleet", "sourcemaps", "upload", "--store", str(store), "--app", "shop",
                 "--release", release, str(build / "app.min.js.map")]) == 0
    capsys.readouterr()


def test_a_map_uploaded_for_one_release_names_the_same_bundle_in_both(
        builds: tuple[Path, dict], tmp_path: Path, capsys: pytest.CaptureFixture,
        dask_client: object) -> None:
    d, traces = builds
    store = _store(tmp_path / "store", [("1.0.0", traces["a1"]), ("1.1.0", traces["a4"])])
    _upload_map(store, "1.0.0", d / "a", capsys)
    for engine in _engines(dask_client):
        reg, diff = _docs(store, engine)
        # the planted function, risen (not "new": it ran in both), named by the map; no
        # function "new" (before: every hot function of 1.1.0's minified script was).
        # Another rise may be found beside it: one run at load ~20 also found the
        # tokenizer's pp.fullCharCodeAt (a 5 % false discovery rate allows it).
        got = {r["name"]: r for r in reg["regressions"]}
        assert PLANTED in got, reg["regressions"]
        assert got[PLANTED]["changePct"] > 0, got[PLANTED]
        assert not [n for n, r in got.items() if r["beforeMsPerLoad"] == 0], got
        assert reg["warnings"] == []
        # A rare function sampled on one side only is new or removed by chance; a naming
        # change made every function of the script so (before: ~100 % of a side's time)
        assert _one_sided_pct(diff) < 5, _one_sided(diff)
        # the map's names on both sides (acorn's own `pp$...` methods)
        assert any(row["name"].startswith("pp$") for row in diff["rows"])
        assert diff["warnings"] == []


def test_the_release_chart_names_the_same_bundle_alike(builds: tuple[Path, dict],
                                                       tmp_path: Path,
                                                       capsys: pytest.CaptureFixture) -> None:
    from jsprof.fleet import api
    from jsprof.fleet.filters import Filters

    d, traces = builds
    store = _store(tmp_path / "store", [("1.0.0", traces["a1"]), ("1.1.0", traces["a4"])])
    _upload_map(store, "1.0.0", d / "a", capsys)
    with api.session(api.open_store(store)) as s:
        doc = api.series(s, Filters(app="shop"), PLANTED)
    pts = {p["label"]: p["selfPct"] for p in doc["points"]}
    # walked 4 times a parse in 1.1.0, once in 1.0.0: a share in both, larger in 1.1.0
    assert 0 < pts["1.0.0"] < pts["1.1.0"], pts
    assert doc["warnings"] == []


@pytest.mark.parametrize("other", ["b4", "m4"])
def test_a_script_mapped_on_one_side_only_is_compared_as_recorded_with_a_warning(
        builds: tuple[Path, dict], tmp_path: Path, capsys: pytest.CaptureFixture,
        dask_client: object, other: str) -> None:
    from jsprof.fleet import api
    from jsprof.fleet.filters import Filters

    d, traces = builds
    # 1.1.0 is another build with no map of its own: a banner above the code (b4), or a
    # statement added mid-line (m4: before the fix its map was lent, as every position
    # both releases recorded held one name, and named 14 % of 1.1.0's self time wrongly,
    # `pp$5.parseSubscript` as `noCalls`, with no warning)
    store = _store(tmp_path / "store", [("1.0.0", traces["a4"]), ("1.1.0", traces[other])])
    _upload_map(store, "1.0.0", d / "a", capsys)
    url = "https://shop.example/static/app.min.js"
    without = tmp_path / "without"
    shutil.copytree(store, without)
    shutil.rmtree(without / "sourcemaps")
    bare = _docs(without, "duckdb")
    assert not any(row["name"].startswith("pp$") for row in bare[1]["rows"])
    for engine in _engines(dask_client):
        reg, diff = _docs(store, engine)
        # the same code on both sides: nothing "new" from names (before: every function
        # of 1.1.0's script; a rise of a function that ran on both sides is noise the
        # store without maps shows alike, below)
        assert not [r["name"] for r in reg["regressions"] if r["beforeMsPerLoad"] == 0]
        (line,) = reg["warnings"]
        assert line.startswith(f"{url}: no source map names it in shop 1.1.0"), line
        assert "shop 1.0.0" in line and "jsprof fleet sourcemaps upload" in line, line
        assert diff["warnings"][:1] == [line], diff["warnings"]
        assert _one_sided_pct(diff) < 5, _one_sided(diff)
        # both sides as recorded: what the store without any map gives
        assert reg["regressions"] == bare[0]["regressions"]
        assert diff["rows"] == bare[1]["rows"]
    # the text output says it too (stderr), and the release chart reads it the same way
    capsys.readouterr()
    assert main(["fleet", "regressions", "--store", str(store), "--app", "shop",
                 "--min-traces", "3", "--min-samples", "100"]) in (0, 1)
    assert f"jsprof: warning: {line}" in capsys.readouterr().err.splitlines()
    # the release chart: each release as its own map names it (a point is no comparison),
    # and where the function cannot be named, unknown with a line saying why (before: the
    # script read as recorded in every release, countNodes 0 % in both)
    with api.session(api.open_store(store)) as sess:
        doc = api.series(sess, Filters(app="shop"), PLANTED)
    pts = {p["label"]: p["selfPct"] for p in doc["points"]}
    assert pts["1.0.0"] > 0 and pts["1.1.0"] is None, pts
    (note,) = doc["warnings"]
    assert note.startswith(f"shop 1.1.0: no function named {PLANTED}, and {url} is named by "
                           "no source map in shop 1.1.0"), note
    assert note.endswith("upload the .map built with this script for shop 1.1.0 "
                         "(jsprof fleet sourcemaps upload)"), note


def test_the_release_chart_names_each_release_by_its_own_or_a_rightly_lent_map(
        builds: tuple[Path, dict], tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """1.0.0 with its map, 1.0.1 the same bundle (the map lent), 1.1.0 another build
    without one. Before: one unmapped release made the chart read the script as recorded
    in all three, so countNodes (~35 % of each) was 0.0 % everywhere."""
    from jsprof.fleet import api
    from jsprof.fleet.filters import Filters

    d, traces = builds
    half = RUNS // 2
    store = _store(tmp_path / "store", [("1.0.0", traces["a4"][:half]),
                                        ("1.0.1", traces["a4"][half:]),
                                        ("1.1.0", traces["m4"])])
    _upload_map(store, "1.0.0", d / "a", capsys)
    with api.session(api.open_store(store)) as s:
        doc = api.series(s, Filters(app="shop"), PLANTED)
    pts = {p["label"]: p for p in doc["points"]}
    assert pts["1.0.0"]["selfPct"] > 0 and pts["1.0.1"]["selfPct"] > 0, pts
    assert pts["1.1.0"]["selfPct"] is None and pts["1.1.0"]["totalPct"] is None, pts
    assert pts["1.1.0"]["traces"] == RUNS
    (note,) = doc["warnings"]
    assert note.startswith(f"shop 1.1.0: no function named {PLANTED}"), note
    # and the other way: 1.1.0's hottest function of the script, as recorded (minified),
    # cannot be named in the mapped releases
    with api.session(api.open_store(store)) as s:
        rows = api.top(s, Filters(app="shop").with_side("release=1.1.0", "--new"), 10)["rows"]
        mini = next(r["name"] for r in rows if (r["resource"] or "").endswith("app.min.js"))
        doc = api.series(s, Filters(app="shop"), mini)
    pts = {p["label"]: p["selfPct"] for p in doc["points"]}
    assert pts["1.1.0"] > 0 and pts["1.0.0"] is None and pts["1.0.1"] is None, (mini, pts)
    assert [w.split(":")[0] for w in doc["warnings"]] == ["shop 1.0.0", "shop 1.0.1"], doc


def test_the_day_chart_and_regressions_by_day_with_a_map_for_some_releases(
        builds: tuple[Path, dict], tmp_path: Path, capsys: pytest.CaptureFixture,
        dask_client: object) -> None:
    """A rollout: day 1 1.0.0 (its map uploaded), day 2 1.0.0 and 1.1.0 (another build,
    no map), day 3 1.1.0. Each release is named by its own map, as in the release chart;
    before, the day chart summed them, so countNodes (~35 % of every page load) read
    33.8 / 19.0 / 0.0 % (1.1.0's time under minified names sank day 2 and hid it on day
    3), and the minified name of 1.1.0's 0.0 / 15.7 / 33.3. Now a release that cannot
    name the function is left out of a day's share (null with only it) with a note.
    `regressions --by day` compares each pair of days as recorded, with a warning."""
    from jsprof.fleet import api, regressions
    from jsprof.fleet.filters import Filters

    d, traces = builds
    half = RUNS // 2
    a4, m4 = traces["a4"], traces["m4"]
    store = _store(tmp_path / "store", [("1.0.0", a4[:half]), ("1.0.0", a4[half:]),
                                        ("1.1.0", m4[:half]), ("1.1.0", m4[half:])],
                   days=[0, 1, 1, 2])
    _upload_map(store, "1.0.0", d / "a", capsys)
    without = tmp_path / "without"
    shutil.copytree(store, without)
    shutil.rmtree(without / "sourcemaps")
    f = Filters(app="shop")
    url = "https://shop.example/static/app.min.js"
    with api.session(api.open_store(without)) as s:
        bare = regressions.regressions(s, f, min_traces=3, min_samples=100, by="day")
    for engine in _engines(dask_client):
        with api.session(api.open_store(store), engine) as s:
            doc = api.series(s, f, PLANTED, by="day")
            # one release's uploads alone: what the day's share is of
            own = {r: {p["label"]: p for p in api.series(
                s, replace(f, release=r), PLANTED, by="day")["points"]}
                for r in ("1.0.0", "1.1.0")}
            rows = api.top(s, f.with_side("release=1.1.0", "--new"), 10)["rows"]
            mini = next(r["name"] for r in rows
                        if (r["resource"] or "").endswith("app.min.js"))
            other = api.series(s, f, mini, by="day")
            mine = {p["label"]: p for p in api.series(
                s, replace(f, release="1.1.0"), mini, by="day")["points"]}
            reg = regressions.regressions(s, f, min_traces=3, min_samples=100, by="day")
        d1, d2, d3 = doc["points"]
        assert [p["traces"] for p in doc["points"]] == [half, 2 * half, half]
        assert [p["leftOutTraces"] for p in doc["points"]] == [0, half, half]
        assert d1["selfPct"] > 0
        # day 2: 1.0.0's uploads of that day alone (before: diluted by 1.1.0's)
        assert d2["selfPct"] == own["1.0.0"][d2["label"]]["selfPct"] > 0, (doc, own)
        assert d3["selfPct"] is None and d3["totalPct"] is None, doc  # before: 0.0
        (note,) = doc["warnings"]
        assert note.startswith(f"shop 1.1.0: no function named {PLANTED}, and {url} is "
                               "named by no source map in shop 1.1.0"), note
        assert "1.1.0's uploads are left out of each day's share" in note, note
        # the other way: the minified name, 1.1.0's, unknown where only 1.0.0 ran
        o1, o2, o3 = other["points"]
        assert o1["selfPct"] is None, other
        assert o2["selfPct"] == mine[o2["label"]]["selfPct"] > 0, (other, mine)
        assert o3["selfPct"] == mine[o3["label"]]["selfPct"] > 0, (other, mine)
        assert [w.split(":")[0] for w in other["warnings"]] == ["shop 1.0.0"], other
        # regressions by day: each pair of days as recorded on both sides (day 2 runs
        # both builds), nothing "new" from names, said once; what no map gives
        assert reg["days"] == [p["label"] for p in doc["points"]]
        assert not [r["name"] for r in reg["regressions"] if r["beforeMsPerLoad"] == 0]
        (line,) = reg["warnings"]
        assert line.startswith(f"{url}: no source map names it in shop 1.1.0"), line
        assert reg["regressions"] == bare["regressions"]
        assert reg["unseen"] == bare["unseen"]
