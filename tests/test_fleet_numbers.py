"""Every fleet number is right (issue 22), on real Chromium traces where the item allows:
the weight cap and lost time, diff intervals, merged counts and intervals, releases that
rename their bundles, pruning, page loads, empty filters, engine-independent meta."""

from __future__ import annotations

import html
from pathlib import Path

import numpy as np
import orjson
import pytest

from fleet_util import upload
from jsprof import io
from jsprof.cli import main
from jsprof.store import Store
from jsprof.trace import GAP_CAP_INTERVALS, ProfilerTrace, Recording, Track

DATA = Path(__file__).parent / "data" / "chromium"
HOUR = 3600e3


def chromium(name: str = "trace-basic.json") -> ProfilerTrace:
    """A real trace from Chromium's JS Self-Profiling API (see tests/data/chromium)."""
    rec = io.load(DATA / name)
    assert len(rec.tracks) == 1
    return rec.tracks[0].trace


def shifted(tr: ProfilerTrace, after: int, by: float) -> ProfilerTrace:
    """`tr` with every sample after index `after` moved `by` ms later: a planted hole."""
    t = tr.sample_time.copy()
    t[after + 1:] += by
    return ProfilerTrace(tr.resources, tr.frames, tr.stack_parent, tr.stack_frame, t,
                         tr.sample_stack, tr.sample_marker, tr.sample_line)


@pytest.fixture
def store(tmp_path):
    st = Store(tmp_path / "store")
    yield st
    st.close()


def run_json(capsys, argv):
    code = main(argv)
    out = capsys.readouterr().out
    assert code == 0, argv
    return orjson.loads(out)


def by_name(rows, ms_key="selfMs"):
    """ms per function name; report's "(anonymous file.js:N)" is fleet's frame name ""."""
    out: dict[str, float] = {}
    for r in rows:
        name = "" if r["name"].startswith("(anonymous") else r["name"]
        out[name] = out.get(name, 0.0) + r[ms_key]
    return out


# ---- 1. the weight cap ---------------------------------------------------------------------


def test_a_hole_in_one_upload_cannot_take_over_the_fleet(store, tmp_path, capsys):
    healthy = [chromium(n) for n in ("trace-basic.json", "trace-idle.json",
                                     "trace-builtins.json")] * 6
    hole_at = 20
    broken = shifted(chromium(), hole_at, 3 * HOUR)  # a laptop suspended mid-chunk
    traces = [*healthy, broken]
    for i, tr in enumerate(traces):
        upload(store, f"u{i}", tr, app="shop", release="1.0")
    top = run_json(capsys, ["fleet", "top", "--store", str(store.path), "--app", "shop",
                            "--json", "--all"])
    # Without the cap the sample before the hole weighed 3 hours: ~99 % of all time.
    kept = sum(float(np.diff(t.sample_time).clip(0, _cap(t)).sum()) + 10.0 for t in traces)
    lost = sum(float((np.diff(t.sample_time) - _cap(t)).clip(0).sum()) for t in traces)
    assert top["totalMs"] == pytest.approx(kept, rel=1e-6)
    # (busyLoop, the top row, runs in two of the real pages, page.html?exp=basic and
    # ?exp=idle: one script, so one function, in the fleet since #33: 46 % of the time.)
    assert top["rows"][0]["selfPct"] < 50, top["rows"][0]
    assert lost > 3 * HOUR - 300
    assert top["lostMs"] == pytest.approx(lost, rel=1e-9)
    # The same rule in `jsprof report`: local and fleet numbers are equal.
    merged = tmp_path / "merged.jsprof.json"
    io.save(Recording([Track(f"t{i}", tr, sample_interval=10.0)
                       for i, tr in enumerate(traces)]), merged)
    rep = run_json(capsys, ["report", str(merged), "--json", "--all"])
    assert rep["total_ms"] == pytest.approx(top["totalMs"], abs=2e-3)
    assert rep["lost_ms"] == pytest.approx(top["lostMs"], abs=2e-3)
    want = by_name(rep["rows"], ms_key="self_ms")
    got = by_name(top["rows"])
    for name, ms in want.items():
        assert got[name] == pytest.approx(ms, abs=2e-3), name
    assert main(["report", str(merged)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    # report knows each track's cap: it names it (fleet top has the merged total only)
    assert f"ms lost in 1 gap between samples longer than the cap of {_cap(broken):.0f} ms (" in out
    assert main(["fleet", "top", "--store", str(store.path), "--app", "shop"]) == 0
    assert f"ms lost in gaps over {GAP_CAP_INTERVALS:g} intervals" in capsys.readouterr().out
    # The merged profile's track meta says it too.
    out = tmp_path / "fleet.jsprof.json"
    assert main(["fleet", "export", "--store", str(store.path), "--app", "shop",
                 "-o", str(out)]) == 0
    assert io.load(out).tracks[0].meta["lostMs"] == pytest.approx(top["lostMs"], abs=2e-3)


def _cap(tr: ProfilerTrace, declared: float = 10.0) -> float:
    """The documented cap: 20 x the larger of the declared interval and the median gap,
    at least 100 ms."""
    d = np.diff(tr.sample_time)
    return max(GAP_CAP_INTERVALS * max(declared, float(np.median(d[d > 0]))), 100.0)


def test_healthy_real_traces_lose_nothing():
    # The cap is for holes, not for a sampler running late (trace-basic has a 157 ms gap
    # inside `fib` at 10 ms): every real trace keeps all its time.
    from jsprof.trace import weights_and_lost

    for name in ("trace-basic.json", "trace-idle.json", "trace-builtins.json"):
        for declared in (None, 10.0):
            w, lost = weights_and_lost(chromium(name), declared)
            assert lost == 0.0, name
    node = io.load(Path(__file__).parent / "data" / "node" / "bench.cpuprofile").tracks[0]
    assert weights_and_lost(node.trace, node.sample_interval)[1] == 0.0


# ---- 2. diff intervals -----------------------------------------------------------------------


def fill_releases(store, sides: dict[str, list[ProfilerTrace]], **meta) -> None:
    for rel, traces in sides.items():
        for i, tr in enumerate(traces):
            upload(store, f"{rel}-{i}", tr, app="shop", release=rel, **meta)


DIFF = ["--min-traces", "3", "--min-samples", "100"]


def test_every_diff_interval_contains_its_estimate(store, capsys):
    # BASE waits on a timer (mostly idle), NEW computes: (idle) drops by tens of points.
    fill_releases(store, {
        "1.0": [chromium("trace-idle.json"), chromium("trace-builtins.json")] * 4,
        "1.1": [chromium("trace-basic.json"), chromium("trace-builtins.json")] * 4,
    })
    argv = ["fleet", "diff", "--store", str(store.path), "--app", "shop", "--base",
            "release=1.0", "--new", "release=1.1", "--json", "--all", *DIFF]
    code = main(argv + ["--fail-if", "(idle):self<-2pp"])
    doc = orjson.loads(capsys.readouterr().out)
    idle = next(r for r in doc["rows"] if r["name"] == "(idle)")
    assert idle["selfPp"] < -10
    for r in doc["rows"]:
        for est, ci in (("selfPp", "selfPpCi"), ("totalPp", "totalPpCi"),
                        ("selfRelPct", "selfRelCi"), ("totalRelPct", "totalRelCi")):
            if r[ci] is not None and r[est] is not None:
                assert r[ci][0] - 1e-9 <= r[est] <= r[ci][1] + 1e-9, (r["name"], est, r)
        assert r["selfPpCi"] is not None, r["name"]
    assert idle["selfPpCi"][1] < 0
    assert code == 1 and any("(idle)" in f for f in doc["failures"])
    # A rule naming no function is a typo: exit 2 naming the closest names (one line).
    code = main(argv + ["--fail-if", "(idel):self<-2pp"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and "closest: (idle)" in err, err


# ---- 3. merged counts and intervals ----------------------------------------------------------


def test_merged_profiles_keep_the_real_counts_and_interval(store, tmp_path, capsys):
    traces = [chromium("trace-basic.json"), chromium("trace-builtins.json"),
              chromium("trace-idle.json")] * 3
    for i, tr in enumerate(traces):
        upload(store, f"u{i}", tr, app="shop", release="1.0")
    n = sum(tr.num_samples for tr in traces)
    out = tmp_path / "merged.jsprof.json"
    assert main(["fleet", "export", "--store", str(store.path), "--app", "shop",
                 "-o", str(out)]) == 0
    capsys.readouterr()
    rep = run_json(capsys, ["report", str(out), "--json", "--all"])
    assert rep["total_samples"] == n
    assert main(["report", str(out)]) == 0
    text = capsys.readouterr().out
    assert "10 ms interval" in text and f"{n} samples, " in text, text
    # Per function, the merged file counts what the same traces merged locally count.
    local = tmp_path / "local.jsprof.json"
    io.save(Recording([Track(f"t{i}", tr, sample_interval=10.0)
                       for i, tr in enumerate(traces)]), local)
    want = run_json(capsys, ["report", str(local), "--json", "--all"])
    # (Summed per name: the local report keeps busyLoop of page.html?exp=basic and of
    # ?exp=idle apart, the fleet names them one script since #33.)
    def counts(rows: list[dict]) -> dict[str, tuple[int, int]]:
        out: dict[str, tuple[int, int]] = {}
        for r in rows:
            a, b = out.get(r["name"], (0, 0))
            out[r["name"]] = (a + r["self_samples"], b + r["total_samples"])
        return out

    assert counts(rep["rows"]) == counts(want["rows"])
    # The flame graph's hover counts samples, not merged rows.
    from jsprof.analysis.calltree import build_call_tree
    from jsprof.fleet import api
    from jsprof.fleet.filters import Filters

    with api.session(store) as s:
        tree = build_call_tree(api.recording(s, Filters(app="shop")))
    roots = tree.parent == -1
    assert int(tree.total_samples[roots].sum()) == n
    fib = [i for i in range(len(tree.parent))
           if tree.functions[tree.function[i]].name == "workload"]
    said = f"· {int(tree.total_samples[fib[0]])} samples"
    # The SVG's static <title>s, and the page's tooltip as a pointer shows it (the page
    # draws on a canvas and builds its tooltips in its script).
    svg = tmp_path / "merged.svg"
    assert main(["fleet", "flame", "--store", str(store.path), "--app", "shop",
                 "-o", str(svg)]) == 0
    assert said in html.unescape(svg.read_text())
    page = tmp_path / "merged.html"
    assert main(["fleet", "flame", "--store", str(store.path), "--app", "shop",
                 "-o", str(page)]) == 0
    from browser_util import playwright_chromium

    with playwright_chromium() as b:
        pg = b.new_page(viewport={"width": 1280, "height": 700})
        pg.goto(page.as_uri())
        for _ in range(400):
            if pg.evaluate("!!document.body.dataset.view"):
                break
            pg.wait_for_timeout(50)
        tips = pg.evaluate("jsprofFrames().filter(f => f.name === 'workload')"
                           ".map(f => jsprofTip(f.i))")
    assert tips and all(said in t for t in tips), (said, tips)


# ---- 4. releases that rename their bundles ---------------------------------------------------


def renamed(tr: ProfilerTrace, names: dict[str, str]) -> ProfilerTrace:
    """`tr` with its scripts served under other URLs (a bundler's build names)."""
    res = [next((v for k, v in names.items() if k in r), r) for r in tr.resources]
    return ProfilerTrace(res, tr.frames, tr.stack_parent, tr.stack_frame, tr.sample_time,
                         tr.sample_stack, tr.sample_marker, tr.sample_line)


BUILDS = {
    "1.4.1": {"page.html": "https://shop.example/assets/index-DiwrgTda.js",
              "workload-ext.js": "https://shop.example/static/js/main.3f2a1c9b.chunk.js"},
    "1.4.2": {"page.html": "https://shop.example/assets/index-B3kq9xZp.js",
              "workload-ext.js": "https://shop.example/static/js/main.9e8d7c6b.chunk.js"},
}


def test_release_diff_matches_scripts_across_build_names(store, capsys):
    for rel, names in BUILDS.items():
        for i in range(4):
            upload(store, f"{rel}-{i}", renamed(chromium(), names), app="shop", release=rel)
    # A third naming: the version as a folder.
    for rel in ("1.4.3", "1.4.4"):
        for i in range(4):
            upload(store, f"{rel}-{i}", renamed(chromium(), {
                "page.html": f"https://cdn.example/{rel}/app.js",
                "workload-ext.js": f"https://cdn.example/{rel}/ext.js"}), app="shop",
                release=rel)
    for base, new in (("1.4.1", "1.4.2"), ("1.4.3", "1.4.4")):
        argv = ["fleet", "diff", "--store", str(store.path), "--app", "shop", "--base",
                f"release={base}", "--new", f"release={new}", "--json", "--all", *DIFF]
        doc = run_json(capsys, argv)
        assert {r["status"] for r in doc["rows"]} <= {"same", "changed"}, doc["rows"]
        assert not doc["warnings"]
        fib = [r for r in doc["rows"] if r["name"] == "fib"]
        assert len(fib) == 1 and abs(fib[0]["selfPp"]) < 1e-6
        # The same builds compared by exact URL: every function new and removed, and said.
        code = main(argv + ["--exact-resources"])
        cap = capsys.readouterr()
        exact = orjson.loads(cap.out)
        assert code == 0
        assert {r["status"] for r in exact["rows"] if r["resource"]} == {"new", "removed"}
        assert exact["warnings"] and "did not match" in exact["warnings"][0]
        assert "jsprof: warning:" in cap.err and "did not match" in cap.err


def test_the_build_name_rule():
    from jsprof.fleet.releases import strip_build_marks as key

    assert key("https://x/static/js/main.3f2a1c9b.chunk.js") == "https://x/static/js/main.chunk.js"
    assert key("https://x/assets/index-DiwrgTda.js") == "https://x/assets/index.js"
    assert key("https://x/1.4.2/app.js") == key("https://x/v1.4.3/app.js") == "https://x/app.js"
    # Words and plain names stay as they are.
    for url in ("https://x/user-Settings.js", "https://x/app.min.js",
                "https://x/react-dom.production.min.js", "file:///home/me/app.js"):
        assert key(url) == url


# ---- 5. pruned means gone --------------------------------------------------------------------


def test_pruned_uploads_are_gone_from_every_query(tmp_path, capsys):
    import time

    from test_fleet_http import Server

    path = tmp_path / "store"
    st = Store(path)
    now = time.time() * 1000
    for i in range(3):  # two months old: retention takes them
        upload(st, f"old-{i}", chromium("trace-idle.json"), app="shop", release="0.9",
               receivedAt=now - 60 * 86400e3)
    for i in range(4):
        upload(st, f"new-{i}", chromium(), app="shop", release="1.0", receivedAt=now)
    st.close()
    srv = Server(path)
    try:
        def top() -> dict:
            status, _, body = srv.get("/v1/query/top", [("app", "shop"), ("top", "all")])
            assert status == 200, body
            return orjson.loads(body)

        assert top()["traces"] == 7  # compacted: every upload is in the Parquet tables
        assert srv.get("/v1/traces/old-0", [])[0] == 200
        assert main(["serve", "prune", "--store", str(path), "--older-than", "30d"]) == 0
        assert "removed 3 uploads" in capsys.readouterr().out
        doc = top()
        assert doc["traces"] == 4 and doc["samples"] == 4 * chromium().num_samples
        assert "(idle)" not in {r["name"] for r in doc["rows"]} or all(
            r["traces"] <= 4 for r in doc["rows"])
        status, _, body = srv.get("/v1/query/options", [("app", "shop")])
        assert status == 200 and orjson.loads(body)["releases"] == ["1.0"]
        assert srv.get("/v1/traces/old-0", [])[0] == 404
        status, _, body = srv.get("/v1/query/top", [("app", "shop"), ("release", "0.9")])
        assert orjson.loads(body).get("traces", 0) == 0 or status == 400
        # The CLI, on the store itself, agrees.
        cli = run_json(capsys, ["fleet", "top", "--store", str(path), "--app", "shop",
                                "--json", "--all"])
        assert cli == doc
    finally:
        srv.stop()


# ---- 6. page loads ---------------------------------------------------------------------------


def test_page_loads_are_counted_beside_uploads(store, capsys):
    # Three page loads sent their profile in two chunks each (a flush and the page-hide
    # chunk), with the client's page-load id; two uploads carry none: one page load each.
    basic = chromium()
    half = basic.num_samples // 2
    for pl in range(3):
        for part, keep in enumerate((slice(0, half), slice(half, None))):
            tr = ProfilerTrace(basic.resources, basic.frames, basic.stack_parent,
                               basic.stack_frame, basic.sample_time[keep],
                               basic.sample_stack[keep])
            upload(store, f"pl{pl}-{part}", tr, app="shop", release="1.0", pageLoad=f"pl-{pl}")
    for i in range(2):
        upload(store, f"bare-{i}", chromium("trace-idle.json"), app="shop", release="1.0")
    doc = run_json(capsys, ["fleet", "top", "--store", str(store.path), "--app", "shop",
                            "--json"])
    assert (doc["traces"], doc["pageLoads"]) == (8, 5)
    assert run_json(capsys, ["fleet", "top", "--store", str(store.path), "--app", "shop",
                             "--json", "--where", "pageLoad=pl-1"])["pageLoads"] == 1
    assert main(["fleet", "top", "--store", str(store.path), "--app", "shop"]) == 0
    out = capsys.readouterr().out
    assert "8 traces, " in out and "; 5 page loads" in out, out


# ---- 7. a filter that matches nothing; the HTTP API's parameters -----------------------------


def test_a_filter_matching_nothing_exits_2_saying_what_exists(store, tmp_path, capsys):
    for rel in ("1.0", "1.1"):
        for i, route in enumerate(("/cart", "/product/1", "/product/2")):
            upload(store, f"{rel}-{i}", chromium(), app="shop", release=rel, route=route)
    s = ["--store", str(store.path)]
    cases = {
        ("--app", "shpo"): ["apps: shop"],
        ("--app", "shop", "--release", "1.2"): ["releases", "1.0", "1.1"],
        ("--app", "shop", "--route", "/checkout*"): ["routes", "/cart", "/product/1"],
        ("--app", "shop", "--where", "country=XX"): ["no uploads match", "releases"],
    }
    for filt, words in cases.items():
        for cmd in (["fleet", "top", *s], ["fleet", "flame", *s, "-o", str(tmp_path / "f.html")],
                    ["fleet", "export", *s, "-o", str(tmp_path / "e.jsprof.json")]):
            code = main([*cmd, *filt])
            cap = capsys.readouterr()
            err = cap.err.strip()
            assert code == 2 and cap.out == "", (cmd, filt, cap.out)
            assert err.startswith("jsprof: error:") and "\n" not in err, err
            for w in words:
                assert w in err, (filt, err)
    assert not (tmp_path / "f.html").exists() and not (tmp_path / "e.jsprof.json").exists()
    code = main(["fleet", "diff", *s, "--app", "shop", "--base", "release=1.0", "--new",
                 "release=1.3", *DIFF])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "--new" in err and "1.0" in err and "1.1" in err, err


def test_a_time_window_matching_nothing_is_named_with_when_uploads_came(store, capsys):
    # It said "no uploads match app=shop" and listed releases and routes that all exist,
    # leaving the user to guess that --since/--until emptied the query.
    import time

    now = time.time() * 1000.0
    for i in range(3):
        upload(store, f"u{i}", chromium(), app="shop", release="1.0", receivedAt=now - i * HOUR)
    s = ["--store", str(store.path), "--app", "shop"]
    cases = {
        ("--since", "2999-01-01T00:00Z"): "since=2999-01-01T00:00Z",
        ("--until", "2001-01-01T00:00Z"): "until=2001-01-01T00:00Z",
    }
    for window, named in cases.items():
        for cmd in (["fleet", "top"], ["fleet", "regressions", "--by", "day"]):
            code = main([*cmd, *s, *window])
            cap = capsys.readouterr()
            err = cap.err.strip()
            assert code == 2 and cap.out == "", (cmd, window, cap.out)
            assert err.startswith("jsprof: error:") and "\n" not in err, err
            assert named in err and "its uploads were received from 20" in err, err


def test_the_http_api_refuses_what_it_cannot_answer(tmp_path):
    from test_fleet_http import Server

    path = tmp_path / "store"
    st = Store(path)
    for i in range(3):
        upload(st, f"u{i}", chromium(), app="shop", release="1.0")
    st.close()
    srv = Server(path)
    try:
        status, h, body = srv.get("/v1/query/top", [("app", "shop"), ("relase", "1.0")])
        assert status == 400 and "relase" in orjson.loads(body)["error"]
        assert h["content-type"].startswith("application/json")
        status, _, body = srv.get("/v1/query/export", [("app", "shop"), ("format", "pprof")])
        assert status == 200 and body[:2] == b"\x1f\x8b"  # pprof is gzipped protobuf
        from jsprof.formats import read_any

        assert read_any(body, "export").num_samples == 3 * chromium().num_samples
        for route, fmt in (("export", "xml"), ("top", "pprof"), ("flame", "png")):
            status, _, body = srv.get(f"/v1/query/{route}", [("app", "shop"), ("format", fmt)])
            assert status == 400 and fmt in orjson.loads(body)["error"], (route, fmt, body)
        status, _, body = srv.get("/v1/query/top", [("app", "shop"), ("release", "2.0")])
        assert status == 400 and "1.0" in orjson.loads(body)["error"]
    finally:
        srv.stop()


def test_the_cap_without_a_declared_interval():
    # A real trace read from a file that says no interval: the median gap is the interval.
    from jsprof.trace import gap_cap, sample_weights, weights_and_lost

    tr = shifted(chromium("trace-idle.json"), 40, HOUR)
    d = np.diff(tr.sample_time)
    cap = max(GAP_CAP_INTERVALS * float(np.median(d[d > 0])), 100.0)
    assert gap_cap(tr) == pytest.approx(cap)
    w, lost = weights_and_lost(tr)
    assert w.max() == pytest.approx(cap) and lost == pytest.approx(d[40] - cap)
    assert np.array_equal(sample_weights(tr), w)


def test_the_http_diff_page_says_the_releases_did_not_match(tmp_path):
    from test_fleet_http import Server

    path = tmp_path / "store"
    st = Store(path)
    for rel, names in BUILDS.items():
        for i in range(3):
            upload(st, f"{rel}-{i}", renamed(chromium(), names), app="shop", release=rel)
    st.close()
    srv = Server(path)
    try:
        q = [("app", "shop"), ("base", "release=1.4.1"), ("new", "release=1.4.2"),
             ("min_traces", "3"), ("min_samples", "100"), ("format", "html")]
        status, _, body = srv.get("/v1/query/diff", q)
        assert status == 200 and "did not match" not in body.decode()
        status, _, body = srv.get("/v1/query/diff", [*q, ("exact_resources", "1")])
        assert status == 200 and "did not match" in body.decode()
    finally:
        srv.stop()
