"""jsprof fleet: compaction into Parquet and the queries on DuckDB, end to end."""

from __future__ import annotations

import multiprocessing
import os

import numpy as np
import orjson
import pytest

from fleet_util import RES, make_trace, merged_recording, upload, vlq
from jsprof import io
from jsprof.analysis.profile import summarize
from jsprof.cli import main
from jsprof.fleet import api
from jsprof.fleet.filters import Filters
from jsprof.store import Store
from jsprof.store.tables.compact import compact
from jsprof.store.tables.manifest import part_path, read_manifest
from jsprof.trace import NO_STACK_NAMES


@pytest.fixture
def store(tmp_path):
    st = Store(tmp_path / "store")
    yield st
    st.close()


def _as_terminal(monkeypatch, columns: int) -> None:
    """Text tables drawn as for a terminal `columns` wide (capsys is no terminal, and
    output that is not one is never cut: test_cli_tables runs a real pty)."""
    from jsprof.fleet import text
    from jsprof.render import console, rows

    def fit(_console, wide=False):
        return rows.output_width(columns, wide)

    monkeypatch.setattr(console, "table_width", fit)
    monkeypatch.setattr(text, "table_width", fit)


def _fill(st, n_per_release=6, samples=600, seed=7):
    rng = np.random.default_rng(seed)
    traces, intervals = {}, {}
    for rel, hot in (("1.0", None), ("1.1", "slowThing")):
        for i in range(n_per_release):
            tr = make_trace(rng, samples, hot=hot, hot_share=0.15)
            uid = f"{rel}-{i}"
            meta = dict(app="shop", release=rel, route="/cart" if i % 2 else f"/product/{i}",
                        env="prod" if i % 3 else "staging", receivedAt=1.7e12 + i * 3600e3,
                        country="DE" if i < 2 else "FR")
            if i == 0:
                del_interval = True  # this one says no interval: the median gap is used
                upload(st, uid, tr, sampleInterval=None, **meta)
            else:
                del_interval = False
                upload(st, uid, tr, **meta)
            traces[uid] = tr
            intervals[uid] = None if del_interval else 10.0
    return traces, intervals


def _run_json(capsys, argv):
    code = main(argv)
    out = capsys.readouterr().out
    return code, orjson.loads(out)


def test_top_equals_report_of_the_same_traces_merged(store, tmp_path, capsys):
    traces, intervals = _fill(store)
    merged = merged_recording(list(traces.values()), list(intervals.values()))
    path = tmp_path / "merged.jsprof.json"
    io.save(merged, path)
    code, rep = _run_json(capsys, ["report", str(path), "--json", "--all"])
    assert code == 0
    code, top = _run_json(capsys, ["fleet", "top", "--store", str(store.path), "--app", "shop",
                                   "--json", "--all"])
    assert code == 0
    assert top["traces"] == 12 and top["samples"] == 12 * 600
    assert top["totalMs"] == pytest.approx(rep["total_ms"], abs=2e-3)
    # report labels a nameless function "(anonymous file.js:N)"; fleet keeps the frame's "".
    want = {("" if r["name"].startswith("(anonymous") else r["name"], r.get("resource"),
             r.get("line"), r.get("column")):
            (r["self_ms"], r["total_ms"]) for r in rep["rows"]}
    got = {(r["name"], r["resource"], r["line"], r["column"]): (r["selfMs"], r["totalMs"])
           for r in top["rows"]}
    assert set(got) == set(want)
    for k, (s, t) in want.items():
        assert got[k][0] == pytest.approx(s, abs=2e-3), k
        assert got[k][1] == pytest.approx(t, abs=2e-3), k
    # Each row's label is the one report gives it.
    assert {r["label"] for r in top["rows"]} == {r["name"] for r in rep["rows"]}
    # The schema, exactly.
    for r in top["rows"]:
        assert list(r) == ["name", "label", "resource", "line", "column", "selfMs", "totalMs",
                           "selfPct", "totalPct", "traces", "p50SelfMs", "p95SelfMs"]
    hot = next(r for r in top["rows"] if r["name"] == "slowThing")
    assert hot["traces"] == 6  # only release 1.1 has it
    per_trace = []
    for uid, tr in traces.items():
        if uid.startswith("1.1"):
            s = summarize(merged_recording([tr], [intervals[uid]]))
            i = [k.name for k in s.stats.keys].index("slowThing")
            per_trace.append(s.stats.self_ms[i])
    # Percentiles of values each taken as its bucket's middle (tables/rollup.py: what the
    # rollups keep of a trace's self time), so within ALPHA of the exact ones
    from jsprof.store.tables.rollup import ALPHA

    assert hot["p50SelfMs"] == pytest.approx(np.percentile(per_trace, 50), rel=ALPHA)
    assert hot["p95SelfMs"] == pytest.approx(np.percentile(per_trace, 95), rel=ALPHA)
    idle = [r for r in top["rows"] if r["name"] in NO_STACK_NAMES]
    assert {r["name"] for r in idle} == {"(garbage collector)", "(paint)", "(program)"}
    assert all(r["resource"] is None and r["traces"] == 12 for r in idle)


def test_top_gives_a_name_with_no_location_the_locations_room(store, capsys, monkeypatch):
    # Beside seven number columns, function and location shared the room equally:
    # `(garbage…llector)` showed beside an empty location. As `jsprof report` lays them out
    # now, a row with no location gives its name that room; the others stay aligned, each
    # location keeping its file name and position.
    _fill(store)
    _as_terminal(monkeypatch, 100)
    assert main(["fleet", "top", "--store", str(store.path), "--app", "shop", "--all"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 100, out
    for name in ("(garbage collector)", "(program)", "(paint)"):
        (row,) = [ln for ln in lines if name in ln]
        assert row.rstrip().endswith(f"  {name}"), out
    header = lines[1]
    at = header.index("location")
    located = [ln for ln in lines[2:] if ".js:" in ln]
    assert len(located) >= 10 and all(ln[at:].startswith("…app.min.js:") for ln in located), out


def test_text_tables_label_anonymous_as_report_and_fit_100_columns(store, tmp_path, capsys,
                                                                   monkeypatch):
    traces, intervals = _fill(store)
    path = tmp_path / "merged.jsprof.json"
    io.save(merged_recording(list(traces.values()), list(intervals.values())), path)
    code, rep = _run_json(capsys, ["report", str(path), "--json", "--all"])
    anon = {r["name"] for r in rep["rows"] if r["name"].startswith("(anonymous")}
    assert code == 0 and len(anon) == 1
    base = ["--store", str(store.path), "--app", "shop"]
    label = next(iter(anon))
    cases = (["fleet", "top", *base, "--all"],
             ["fleet", "diff", *base, "--base", "release=1.0", "--new", "release=1.1",
              "--all", "--resamples", "20"])
    # Piped (#36): every name and location whole, as --wide prints them; it printed
    # `(anonymo…ge.js:1)`.
    for argv in cases:
        assert main(argv) == 0, argv
        out = capsys.readouterr().out
        whole = label if argv[1] == "top" else label.rsplit(":", 1)[0] + ")"
        assert whole in out and RES in out and "…" not in out, out
        assert main([*argv, "--wide"]) == 0
        assert capsys.readouterr().out == out
    _as_terminal(monkeypatch, 100)
    for argv in cases:
        assert main(argv) == 0, argv
        out = capsys.readouterr().out
        # A terminal 100 columns wide: the table keeps to it.
        assert max(len(line) for line in out.splitlines()) <= 100, out
        assert "(anonymous)" not in out and "…" in out
        # An elided location keeps its file name and position whole: the location column
        # beside seven number columns is 17 wide, where it showed `https…n.js:59:3`.
        if argv[1] == "top":
            locs = [ln.split()[-1] for ln in out.splitlines()[2:] if ".js:" in ln]
            assert len(locs) >= 10 and all(c.startswith("…app.min.js:") for c in locs), out
        else:
            # every function's name whole beside its tag: the new one a gate is about first
            rows = out.splitlines()[3:-1]
            assert rows[0].split()[-3:-1] == ["slowThing", "[new]"], out
            assert rows[0].endswith("app.min.js"), out
            for name in ("layoutTree", "measure", "JSON.parse", "throttle", "(program)"):
                assert any(name in ln.split() for ln in rows), (name, out)
            # time with no JavaScript names no script (it said "(unknown)")
            for name in ("(program)", "(paint)", "(garbage collector)"):
                (row,) = [ln for ln in rows if ln.endswith(name)]
        # --wide prints every name and location whole, and one label everywhere:
        # `(anonymous app.min.js:N)`, as report and flame print it.
        assert main([*argv, "--wide"]) == 0
        out = capsys.readouterr().out
        if argv[1] == "diff":  # diff matches a script's anonymous functions as one (NameKey)
            label = label.rsplit(":", 1)[0] + ")"
        assert label in out and RES in out, out
        assert "(anonymous)" not in out and "…" not in out


def test_filters_select_uploads(store, capsys):
    _fill(store)

    def traces(*extra):
        code, doc = _run_json(capsys, ["fleet", "top", "--store", str(store.path), "--app",
                                       "shop", "--json", *extra])
        assert code == 0
        return doc["traces"]

    assert traces("--release", "1.1") == 6
    assert traces("--route", "/product/*") == 6
    assert traces("--route", "/cart") == 6
    assert traces("--env", "staging") == 4
    assert traces("--where", "country=DE") == 4
    assert traces("--where", "country=DE", "--release", "1.0") == 2
    # receivedAt 1.7e12 + i h: the first three hours of each release
    assert traces("--since", "2023-11-15T00:13:20Z") == 8  # i >= 2 of each release
    assert traces("--since", "2023-11-15T00:13:20Z", "--until", "2023-11-15T02:13:20Z") == 4
    # Nothing matches: exit 2 saying what exists (the last --app wins).
    for extra in (("--until", "2023-11-14T22:13:20Z", "--since", "2023-11-14T22:13:20Z"),
                  ("--app", "other")):
        assert main(["fleet", "top", "--store", str(store.path), "--app", "shop", *extra]) == 2
        err = capsys.readouterr().err
        assert "releases" in err or "apps: shop" in err, err


def test_compaction_is_idempotent_and_sees_new_uploads(store):
    _fill(store, n_per_release=3)
    s1 = compact(store)
    s2 = compact(store)
    assert (s1.uploads, s2.uploads) == (6, 0)
    man = read_manifest(store.path)
    assert man["nextUk"] == 6
    rng = np.random.default_rng(3)
    upload(store, "late", make_trace(rng, 300), app="shop", release="1.0")
    with api.session(store) as s:  # a query compacts what was acknowledged before it
        assert api.top(s, Filters(app="shop"), 3)["traces"] == 7
    # Frames and stacks are interned across uploads of a release.
    rel = next(v for v in read_manifest(store.path)["releases"].values()
               if v["release"] == "1.0")
    one = make_trace(rng, 300)
    assert (rel["frames"], rel["stacks"]) == (len(one.frames), one.num_stacks) == (12, 14)


def _compact_in_child(path: str) -> int:
    return compact(Store(path)).uploads


def _writer(path: str, n: int) -> None:
    st = Store(path)
    rng = np.random.default_rng(11)
    for i in range(n):
        upload(st, f"w{i}", make_trace(rng, 200), app="shop", release="2.0")


def test_concurrent_compactors_and_writers_store_each_upload_once(store):
    _fill(store, n_per_release=10, samples=200)
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(3) as pool:
        w = pool.apply_async(_writer, (str(store.path), 15))
        a = pool.apply_async(_compact_in_child, (str(store.path),))
        b = pool.apply_async(_compact_in_child, (str(store.path),))
        w.get(60)
        n = a.get(60) + b.get(60)
    n += compact(store).uploads
    assert n == 35
    import pyarrow.parquet as pq

    man = read_manifest(store.path)
    tdir = store.path / "tables"
    ids = [i for p in man["uploads"] for i in pq.read_table(tdir / part_path(p))["id"].to_pylist()]
    assert len(ids) == len(set(ids)) == 35
    with api.session(store) as s:
        assert api.top(s, Filters(app="shop"), 1)["samples"] == 35 * 200


def test_compactor_killed_midway_leaves_no_duplicates(store, monkeypatch):
    import jsprof.store.tables.compact as c

    _fill(store, n_per_release=4, samples=200)
    real = c.write_manifest

    def boom(tdir, man):
        raise OSError("disk gone")

    monkeypatch.setattr(c, "write_manifest", boom)  # the manifest never gets written
    with pytest.raises(OSError):
        compact(store, batch=3)
    monkeypatch.setattr(c, "write_manifest", real)
    assert read_manifest(store.path)["nextUk"] == 0
    assert compact(store, batch=3).uploads == 8
    with api.session(store) as s:
        assert api.top(s, Filters(app="shop"), 1)["traces"] == 8


def test_diff_gates_intervals_and_evidence(store, tmp_path, capsys):
    _fill(store)
    base = ["fleet", "diff", "--store", str(store.path), "--app", "shop",
            "--base", "release=1.0", "--new", "release=1.1"]
    flame = tmp_path / "d.html"
    code = main(base + ["--fail-if", "slowThing:self>+5pp", "--flame", str(flame)])
    err = capsys.readouterr().err
    assert code == 1
    assert "slowThing" in err and "breaks --fail-if 'slowThing:self>+5pp'" in err
    assert "larger self share than base" in flame.read_text()
    # A change inside the noise does not fire, however the point estimate falls.
    code, doc = _run_json(capsys, base + ["--json", "--all", "--fail-if", "fib:self>-50pp"])
    fib = next(r for r in doc["rows"] if r["name"] == "fib")
    lo, hi = fib["selfPpCi"]
    assert lo <= fib["selfPp"] <= hi
    assert code == (1 if lo > 0 or hi < 0 else 0)
    new = next(r for r in doc["rows"] if r["name"] == "slowThing")
    assert new["status"] == "new" and new["selfPpCi"][0] > 5
    # Too little evidence: exit 2 and one line naming what is missing.
    code = main(base[:-1] + ["release=1.1,country=DE"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err
    assert "--new" in err and "2 page loads" in err and "at least 5 page loads" in err


def test_flame_folds_the_tail_into_other(store, tmp_path, capsys):
    _fill(store, n_per_release=3)
    out = tmp_path / "merged.html"
    assert main(["fleet", "flame", "--store", str(store.path), "--app", "shop", "-o", str(out),
                 "--max-nodes", "4"]) == 0
    page = out.read_text()
    assert "other" in page and "measure" not in page.split("<script")[0] or "other" in page
    from jsprof.analysis.calltree import build_call_tree
    from jsprof.fleet.query import fold_tree, select

    with api.session(store) as s:
        rec = select(s.engine, s.snap, Filters(app="shop")).recording
    tree = build_call_tree(rec)
    folded = fold_tree(tree, 4)
    real = [i for i, f in enumerate(folded.function.tolist())
            if folded.functions[f].name != "other"]
    assert len(real) == 4
    roots = folded.parent == -1
    assert folded.total_ms[roots].sum() == pytest.approx(tree.total_ms[tree.parent == -1].sum())


@pytest.mark.parametrize("ext", [".jsprof.json", ".pprof", ".speedscope.json"])
def test_export_writes_the_merged_profile(store, tmp_path, capsys, ext):
    _fill(store, n_per_release=3)
    out = tmp_path / f"merged{ext}"
    assert main(["fleet", "export", "--store", str(store.path), "--app", "shop",
                 "-o", str(out)]) == 0
    rec = io.load(out)
    code, top = _run_json(capsys, ["fleet", "top", "--store", str(store.path), "--app", "shop",
                                   "--json", "--all"])
    s = summarize(rec)
    # By name: a format may drop columns, and the two releases place functions differently.
    got: dict[str, float] = {}
    for i, k in enumerate(s.stats.keys):
        got[k.name] = got.get(k.name, 0.0) + float(s.stats.self_ms[i])
    want: dict[str, float] = {}
    for r in top["rows"]:
        if r["resource"] is not None:
            want[r["name"]] = want.get(r["name"], 0.0) + r["selfMs"]
    assert want.keys() <= got.keys()
    if ext == ".pprof":
        return  # pprof's own round trip moves time between frames (formats' matter)
    for name, ms in want.items():
        assert got[name] == pytest.approx(ms, rel=1e-6, abs=5e-3), name


def test_sourcemaps_rename_frames_of_their_release_only(store, tmp_path, capsys):
    _fill(store, n_per_release=3)
    # measure is at line 59, column 3 of the minified file: map it to layout.ts:120:5 and
    # the original name measureLayout.
    lines = [""] * 58 + [vlq(2) + vlq(0) + vlq(119) + vlq(4) + vlq(0)]
    sm = {"version": 3, "file": "app.min.js", "sources": ["src/layout.ts"],
          "names": ["measureLayout"], "mappings": ";".join(lines)}
    mp = tmp_path / "app.min.js.map"
    mp.write_bytes(orjson.dumps(sm))
    assert main(["fleet", "sourcemaps", "upload", "--store", str(store.path), "--app", "shop",
                 "--release", "1.1", str(mp)]) == 0
    capsys.readouterr()
    code, doc = _run_json(capsys, ["fleet", "top", "--store", str(store.path), "--app", "shop",
                                   "--json", "--all", "--release", "1.1"])
    names = {r["name"]: r for r in doc["rows"]}
    assert "measure" not in names
    assert names["measureLayout"]["resource"] == "https://shop.example/static/src/layout.ts"
    assert (names["measureLayout"]["line"], names["measureLayout"]["column"]) == (120, 5)
    code, doc = _run_json(capsys, ["fleet", "top", "--store", str(store.path), "--app", "shop",
                                   "--json", "--all", "--release", "1.0"])
    assert "measure" in {r["name"] for r in doc["rows"]}
    bad = tmp_path / "bad.map"
    bad.write_text('{"version": 2}')
    assert main(["fleet", "sourcemaps", "upload", "--store", str(store.path), "--app", "shop",
                 "--release", "1.1", str(bad)]) == 2
    assert "not a version 3 source map" in capsys.readouterr().err


def test_user_mistakes_are_one_line(store, tmp_path, capsys):
    _fill(store, n_per_release=1)
    cases = [
        ["fleet", "top", "--store", str(tmp_path / "nope"), "--app", "shop"],
        ["fleet", "top", "--store", str(store.path), "--app", "shop", "--since", "yesterday"],
        ["fleet", "top", "--store", str(store.path), "--app", "shop", "--where", "novalue"],
        ["fleet", "flame", "--store", str(store.path), "--app", "shop", "-o", "x.png"],
        ["fleet", "diff", "--store", str(store.path), "--app", "shop", "--base", "release=1.0",
         "--new", "release=1.1", "--fail-if", "nonsense"],
        ["fleet", "top", "--store", str(store.path), "--url", "http://x", "--app", "shop"],
    ]
    for argv in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert err.startswith("jsprof: error:") and "\n" not in err, (argv, err)
    assert not os.path.exists("x.png")
    _ = RES


def test_top_table_has_no_trailing_spaces_and_counts_in_words(store, capsys):
    # One upload of release 1.0: "1 trace", not "1 traces"; no line ends in a space.
    _fill(store, n_per_release=1, samples=200)
    assert main(["fleet", "top", "--store", str(store.path), "--app", "shop",
                 "--release", "1.0"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines and all(ln == ln.rstrip() for ln in lines), [ln for ln in lines if ln[-1:] == " "]
    assert lines[-1].startswith("1 trace, 200 samples, "), lines[-1]
    assert lines[1].split()[:4] == ["self", "%", "total", "%"]


def test_a_time_that_is_no_number_is_refused_in_one_line(store, capsys):
    """`nan`, `inf` and 1e999 read as floats: each would be a filter no receivedAt passes
    (NaN compares false) or every one does, with exit 0. Refused, naming the option."""
    _fill(store, n_per_release=1)
    top = ["fleet", "top", "--store", str(store.path), "--app", "shop"]
    for argv in (top + ["--since", "nan"], top + ["--until", "inf"],
                 top + ["--since=-Infinity"], top + ["--until", "1e999"],
                 ["fleet", "diff", "--store", str(store.path), "--app", "shop",
                  "--base", "release=1.0,since=NaN", "--new", "release=1.1"]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert err.startswith("jsprof: error:") and "\n" not in err, (argv, err)
        assert "not a time" in err and ("--since" in err or "--until" in err
                                        or "--base since=" in err), err
    # A finite epoch-ms number is still a time.
    assert main(top + ["--since", "0", "--json"]) == 0
    assert orjson.loads(capsys.readouterr().out)["traces"] == 2
