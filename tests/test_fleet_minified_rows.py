"""`fleet diff` and `fleet regressions` of a minified page are per function (issue 32,
anonkey). Chromium's own Profiler gives no name to acorn's `pp.x = function () {}` methods,
and terser writes the bundle on one line: every anonymous function of the page is at
app.min.js:1, and dozens of functions share terser's short names. The fleet matched them by
name and script (any line), so one `(anonymous app.min.js)` row held most of the page's
JavaScript (a user's store: 1,247 ms per page load), and a `--fail-if` rule on it gated
nothing real.

Real code: a click handler that parses with acorn (npm, pinned), bundled by esbuild and
minified by terser to one line (both from npm), no source map uploaded; two releases of the
same script, each a page load in headless Chromium with the real client, stored by a real
`jsprof serve` on loopback and compacted. Each row of `fleet diff` and of `regressions`
(its functions judged) is one function of `fleet top` (name, script, line, column); and
answered from the rollups (tables format 12: moments and per-load sums per function place),
on DuckDB and on Dask, with no per-upload row read: what the per-upload rows answer."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import orjson
import pytest

from browser_util import HTML, open_page, page_server, playwright_chromium
from jsprof.analysis import stats
from jsprof.fleet import api, regressions, rollups
from jsprof.fleet.filters import Filters
from mapped_app_util import fleet_top
from serve_util import JSPROF, Collector

pytestmark = [pytest.mark.npm, pytest.mark.chromium]

JS = Path(__file__).parent / "js" / "node_modules"
ESBUILD = JS / ".bin" / "esbuild"
TERSER = JS / ".bin" / "terser"
SRC = """import { parse } from "./acorn.mjs";
import { SOURCE } from "./input.js";

document.getElementById("parse").addEventListener("click", () => {
  const end = performance.now() + 250;
  let n = 0;
  while (performance.now() < end) n += parse(SOURCE, { ecmaVersion: "latest" }).body.length;
  document.getElementById("out").textContent = String(n);
});
window.appReady = true;
"""
PAGE = """<!doctype html><meta charset="utf-8"><title>min</title>
<button id="parse">parse</button><p id="out"></p>
<script type="module" src="/static/app.min.js"></script>
<script type="module">
import {startProfiling} from "%(collector)s/v1/client.js";
window.profiler = startProfiling({endpoint: "%(collector)s", app: "shop", key: "k1",
                                  release: new URLSearchParams(location.search).get("r"),
                                  sampleRate: 1});
const wait = () => window.appReady ? (window.ready = true) : setTimeout(wait, 20);
wait();
</script>
"""
RELEASES = ("1.0.0", "1.0.1")
LOADS = 3  # page loads a release: regressions judges a function on its spread over them


def _build(d: Path) -> bytes:
    assert ESBUILD.exists() and TERSER.exists(), "tests/js missing: `make test` installs it"
    shutil.copy(JS / "acorn" / "dist" / "acorn.mjs", d / "acorn.mjs")
    src = (JS / "acorn" / "dist" / "acorn.js").read_text()[:60000]
    (d / "input.js").write_text(f"export const SOURCE = {json.dumps(src)};\n")
    (d / "src.js").write_text(SRC)
    subprocess.run([str(ESBUILD), "src.js", "--bundle", "--format=esm",
                    "--outfile=bundle.js", "--log-level=warning"],
                   cwd=d, check=True, timeout=120)
    subprocess.run([str(TERSER), "bundle.js", "-c", "-m", "--module", "-o", "app.min.js"],
                   cwd=d, check=True, timeout=300)
    return (d / "app.min.js").read_bytes()


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """A store of RELEASES, each LOADS page loads of the same minified script."""
    d = tmp_path_factory.mktemp("minified_page")
    script = _build(d)
    collector: list[str] = []

    def respond(path: str) -> tuple[bytes, str, dict]:
        if path.startswith("/static/app.min.js"):
            return script, "text/javascript", {}
        return (PAGE % {"collector": collector[0]}).encode(), HTML, {
            "Document-Policy": "js-profiling"}

    st = d / "store"
    with page_server(respond) as origin:
        col = Collector(st, "--app", "shop:k1", "--allow-origin", f"shop={origin}",
                        "--compact-every", "1")
        collector.append(col.url)
        try:
            with playwright_chromium() as b:
                for rel in RELEASES:
                    for _ in range(LOADS):
                        page = open_page(b, f"{origin}/?r={rel}", profiled=True,
                                         timeout_ms=60000)
                        for _ in range(3):
                            page.click("#parse")
                            page.wait_for_timeout(100)
                        ids = page.evaluate("profiler.stop()")
                        page.close()
                        col.wait_stored(*ids, timeout=60)
            deadline = time.monotonic() + 120
            while fleet_top(st)["pendingUploads"]:
                assert time.monotonic() < deadline, "uploads never compacted"
                time.sleep(0.5)
        finally:
            col.stop()
    return st


def _fleet(store: Path, *args: str) -> dict:
    r = subprocess.run([str(JSPROF), "fleet", *args, "--store", str(store), "--app", "shop",
                        "--json"], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert r.returncode == 0, r.stderr
    return orjson.loads(r.stdout)


def _members(row: dict, functions: list[dict]) -> list[dict]:
    """The functions of `fleet top` a row stands for: same name and script, and its line
    and column where the row has them."""
    return [f for f in functions
            if f["name"] == row["name"] and f["resource"] == row["resource"]
            and row.get("line") in (None, f["line"])
            and row.get("column") in (None, f["column"])]


def test_fleet_rows_of_a_minified_page_are_per_function(store: Path) -> None:
    functions = [f for f in fleet_top(store)["rows"]
                 if (f["resource"] or "").endswith("/app.min.js")]
    anonymous = [f for f in functions if not f["name"]]
    # what makes this case: many anonymous functions, all on the bundle's one line
    assert len(anonymous) >= 5 and {f["line"] for f in anonymous} == {1}, anonymous

    diff = _fleet(store, "diff", "--base", f"release={RELEASES[0]}",
                  "--new", f"release={RELEASES[1]}", "--min-traces", "2", "--min-samples", "100",
                  "--all", "--resamples", "20")
    rows = [r for r in diff["rows"] if (r["resource"] or "").endswith("/app.min.js")]
    assert rows
    for r in rows:
        members = _members(r, functions)
        assert len(members) == 1, (r["label"], [(f["label"], f["column"]) for f in members])
        if r["status"] == "same" or r["status"] == "changed":
            assert r["label"] != "(anonymous app.min.js)"
    labels = [r["label"] for r in rows]
    assert len(labels) == len(set(labels)), labels  # told apart on screen too

    reg = _fleet(store, "regressions", "--min-traces", "2", "--min-samples", "100",
                 "--min-share", "0")
    judged = [fn for u in reg["unseen"] for fn in u["functions"]
              if (fn["resource"] or "").endswith("/app.min.js")]
    judged += [x for x in reg["regressions"] if (x["resource"] or "").endswith("/app.min.js")]
    assert judged, (reg["skipped"], reg["unseen"])
    for fn in judged:
        members = _members(fn, functions)
        assert len(members) == 1, (fn["label"], [(f["label"], f["column"]) for f in members])


def _no_upload_rows(s: api.Session, m: pytest.MonkeyPatch) -> None:
    """Every per-upload read of the session's engine fails the test."""
    def refuse(*a: object, **k: object) -> None:
        raise AssertionError("read per upload")

    for name in ("uploads", "stacks", "frames", "per_upload_key", "resample", "sample_scan"):
        if hasattr(s.engine, name):
            m.setattr(s.engine, name, refuse)


CI = ("selfPpCi", "totalPpCi", "selfRelCi", "totalRelCi")
NUMBERS = ("beforeMsPerLoad", "afterMsPerLoad", "changeMsPerLoad")


def _close(a: object, b: object) -> None:
    """Documents equal but for float rounding (sums added in another order)."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), (a, b)
        for k in a:
            _close(a[k], b[k])
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), (a, b)
        for x, y in zip(a, b, strict=True):
            _close(x, y)
    elif isinstance(a, float) or isinstance(b, float):
        assert np.isclose(float(a), float(b), rtol=1e-6, atol=2e-3), (a, b)
    else:
        assert a == b


def _by_key(rows: list[dict], but: tuple[str, ...] = ()) -> dict:
    """Rows by function (name, script, line, column): an order of equal values may differ."""
    out = {(r["name"], r["resource"], r.get("line"), r.get("column")):
           {k: v for k, v in r.items() if k not in but} for r in rows}
    assert len(out) == len(rows)
    return out


@pytest.mark.parametrize("engine", ["duckdb", "dask"])
def test_the_rollups_answer_per_function(store: Path, engine: str,
                                         request: pytest.FixtureRequest,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The diff's keys by place read the rollups' moments, and regressions' the per-load
    sums, as any other key (before format 12 they were kept per name and script, and a
    diff keyed by place fell back to every upload's rows). This store's sides are small,
    so the thresholds for the rollups are lowered: both paths read it alike."""
    from jsprof.fleet.engine import DaskEngine

    monkeypatch.setattr(rollups, "MOMENTS_MIN_UPLOADS", 1)
    monkeypatch.setattr(stats, "PERM_MAX_LOADS", 2)  # 2 x LOADS page loads a pair
    eng = "duckdb" if engine == "duckdb" else DaskEngine(
        client=request.getfixturevalue("dask_client"))
    functions = [f for f in fleet_top(store)["rows"]
                 if (f["resource"] or "").endswith("/app.min.js")]
    base, new = (Filters(app="shop", release=r) for r in RELEASES)
    f = Filters(app="shop")
    ev = {"min_traces": 2, "min_samples": 100}
    with api.session(api.open_store(store), eng) as s:
        with monkeypatch.context() as m:  # the per-upload answers
            m.setattr(rollups, "MOMENTS_MIN_UPLOADS", 10**9)
            ref = api.diff_parts(s, base, new, None, **ev)
            assert ref.base.rollup is None
            m.setattr(regressions, "_rolled_units", lambda *a: None)
            ref_reg = regressions.regressions(s, f, min_share=0, **ev)
        with monkeypatch.context() as m:
            _no_upload_rows(s, m)
            got = api.diff_parts(s, base, new, None, **ev)
            reg = regressions.regressions(s, f, min_share=0, **ev)
    assert got.base.rollup is not None and got.new.rollup is not None
    rows = [r for r in got.doc["rows"] if (r["resource"] or "").endswith("/app.min.js")]
    assert len(rows) >= 5
    for r in rows:
        assert len(_members(r, functions)) == 1, r["label"]
    _close(_by_key(got.doc["rows"], CI), _by_key(ref.doc["rows"], CI))
    assert {k: v for k, v in got.doc.items() if k != "rows"} == {
        k: v for k, v in ref.doc.items() if k != "rows"}
    judged = [fn for u in reg["unseen"] for fn in u["functions"]
              if (fn["resource"] or "").endswith("/app.min.js")]
    assert len(judged) >= 5 and reg["tests"] >= 5
    for fn in judged:
        assert len(_members(fn, functions)) == 1, fn["label"]
    for u, v in zip(reg["unseen"], ref_reg["unseen"], strict=True):
        _close(_by_key(u.pop("functions")), _by_key(v.pop("functions")))
    _close(reg, ref_reg)


def test_format_11_tables_are_read_per_upload_until_rebuilt(
        store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Format 11 kept the moments and per-load sums per name and script, which a key by
    place cannot be read from: such tables answer from the per-upload rows (never a
    name's sum as one of its places) until the next compaction rebuilds their rollups,
    then from the rollups, the same answer."""
    from jsprof.store import Store
    from jsprof.store.tables.compact import compact
    from jsprof.store.tables.manifest import FORMAT_VERSION, read_manifest

    monkeypatch.setattr(rollups, "MOMENTS_MIN_UPLOADS", 1)
    copy = tmp_path / "s"
    shutil.copytree(store, copy)
    mp = copy / "tables" / "_manifest.json"
    man = orjson.loads(mp.read_bytes())
    man["formatVersion"] = 11
    mp.write_bytes(orjson.dumps(man))
    base, new = (Filters(app="shop", release=r) for r in RELEASES)
    ev = {"min_traces": 2, "min_samples": 100}
    with api.session(api.open_store(copy)) as s:
        before = api.diff_parts(s, base, new, None, **ev)
        assert before.base.rollup is None
    st = Store(copy)
    compact(st)
    st.close()
    assert read_manifest(copy)["formatVersion"] == FORMAT_VERSION == 12
    with api.session(api.open_store(copy)) as s, monkeypatch.context() as m:
        _no_upload_rows(s, m)
        after = api.diff_parts(s, base, new, None, **ev)
    assert after.base.rollup is not None
    _close(_by_key(after.doc["rows"], CI), _by_key(before.doc["rows"], CI))
