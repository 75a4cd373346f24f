"""`jsprof fleet regressions` on a real store: a planted release regression is found at
the release it happened in (releases in version order: 1.9.0 < 1.10.0), reported once,
exit 1; stores without a planted change report nothing, exit 0."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import orjson
import pytest

from fleet_util import DAY, T0, jittered_store, make_trace, real_store, upload
from jsprof.fleet.text import RegressionsText
from jsprof.store import Store
from serve_util import JSPROF, READ_TOKEN, Collector


def _store(path: Path, releases: list[tuple[str, str | None]], seed: int) -> Path:
    st = Store(path)
    rng = np.random.default_rng(seed)
    at = 1.7e12
    for rel, hot in releases:
        for i in range(16):
            at += 60e3
            upload(st, f"{rel}-{i}", make_trace(rng, 500, hot=hot, hot_share=0.12),
                   app="shop", release=rel, route="/cart", receivedAt=at,
                   pageLoad=f"{rel}-load-{i // 2}")
    st.close()
    return path


def _run(store: Path, *extra: str) -> tuple[int, dict]:
    # `_store`'s releases are 8 page loads each (16 uploads in pairs): --min-traces 4.
    r = subprocess.run([str(JSPROF), "fleet", "regressions", "--store", str(store), "--app",
                        "shop", "--json", "--min-traces", "4", *extra],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode in (0, 1), r.stderr
    return r.returncode, orjson.loads(r.stdout)


def test_planted_regression_found_once(tmp_path: Path) -> None:
    # Uploaded out of version order: 1.10.0 first, then 1.9.0, then 1.11.0 (slowPricing
    # starts in 1.10.0 and stays in 1.11.0: reported once, at 1.10.0).
    store = _store(tmp_path / "s", [("1.10.0", "slowPricing"), ("1.9.0", None),
                                    ("1.11.0", "slowPricing")], seed=3)
    code, doc = _run(store)
    assert doc["releases"] == ["1.9.0", "1.10.0", "1.11.0"]
    assert code == 1
    (reg,) = doc["regressions"]
    assert reg["name"] == "slowPricing" and reg["release"] == "1.10.0"
    assert reg["baseRelease"] == "1.9.0" and reg["beforeSelfPct"] == 0
    assert reg["afterMsPerLoad"] > reg["beforeMsPerLoad"] == 0
    assert reg["changeMsCi"][0] > 0 and reg["changePct"] is None  # new: no relative change
    assert len(reg["exampleIds"]) == 3 and all(i.startswith("1.10.0-") for i in reg["exampleIds"])


def test_clean_stores_report_nothing(tmp_path: Path) -> None:
    # Five releases from one generator, three seeds: 12 release pairs x ~12 functions,
    # none of them changed; any report is a false positive.
    false = 0
    for seed in (11, 12, 13):
        rels = [(f"2.{i}.0", None) for i in range(5)]
        code, doc = _run(_store(tmp_path / f"c{seed}", rels, seed))
        assert not doc["skipped"]
        false += len(doc["regressions"])
        assert code == (1 if doc["regressions"] else 0)
    assert false == 0


def test_mistakes_are_one_line_and_exit_2(tmp_path: Path) -> None:
    # A --route matching no upload said "no regressions over 2 releases" with exit 0 (every
    # other query exits 2 naming the routes), and --min-change -1 or nan was taken.
    store = _store(tmp_path / "s", [("1.0.0", None), ("1.1.0", None)], seed=4)
    base = [str(JSPROF), "fleet", "regressions", "--store", str(store), "--app", "shop",
            "--min-traces", "4"]
    for extra, said in ((["--route", "/nope"], "route '/nope' matches no route of app shop"),
                        (["--where", "country=XX"], "no uploads match"),
                        (["--min-change", "-1"], "--min-change: must be a finite number >= 0"),
                        (["--min-change", "nan"], "--min-change: must be a finite number >= 0"),
                        (["--min-change", "abc"], "--min-change: expected a number, got 'abc'")):
        r = subprocess.run(base + extra, capture_output=True, text=True, timeout=300)
        assert r.returncode == 2, (extra, r.stdout, r.stderr)
        assert said in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = subprocess.run(base + ["--route", "/cart"], capture_output=True, text=True, timeout=300)
    # ... and what 8 page loads a side could not have seen (issue 34)
    head, unseen = r.stdout.splitlines()
    assert r.returncode == 0 and head == "no regressions over 2 releases (1.0.0 to 1.1.0)", (
        r.stdout, r.stderr)
    assert unseen.startswith("unseen at release 1.1.0 (after 1.0.0; 8 -> 8 page loads): "
                             "rises in "), unseen
    # Too little evidence for every pair is not "no regressions" (it said so): nothing was
    # compared, and stderr says why.
    r = subprocess.run(base + ["--min-traces", "9"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout == (
        "nothing compared over 2 releases (1.0.0 to 1.1.0): no release had enough evidence "
        "beside the one before (why: the lines on stderr)\n"), (r.stdout, r.stderr)
    # ... in regressions' words: it said "fleet diff: --base (...)", options of another
    # command (a field try: `regressions --during interaction` on a 21-page-load store).
    assert r.stderr.startswith(
        "not compared: 1.0.0 -> 1.1.0: release 1.0.0 matches 8 page loads"), r.stderr
    assert "fleet diff" not in r.stderr and "--base" not in r.stderr, r.stderr


# ---- page loads resampled from real Chromium traces ------------------------------------------
#
# Each upload is a page load made of blocks of the three real Chromium traces'
# (tests/data/chromium) samples, drawn with replacement: the real functions, stacks and
# sample steps, varying as real page loads vary. 48 uploads over 4 UTC days (12 a day)
# and 3 releases (16 each, one release after another within each day), so days and
# releases are different partitions of one store.

RELS = ["1.9.0", "1.10.0", "1.11.0"]
DAYS = ["2026-11-26", "2026-11-27", "2026-11-28", "2026-11-29"]


def _real_store(path: Path, seed: int, plant: Callable[[int, int, str], str | None] | None
                = None) -> Path:
    return real_store(path, seed, plant)


def _fib_self_ms(trace_doc: bytes) -> float:
    """fib's self time in one upload as read back (GET /v1/traces/{id} or the store)."""
    from jsprof.analysis.profile import summarize
    from jsprof.formats import read_any

    sm = summarize(read_any(trace_doc, "upload"))
    return sum(float(ms) for k, ms in zip(sm.stats.keys, sm.stats.self_ms, strict=True)
               if k.name == "fib")


# The planted release regression: fib 6x slower from 1.10.0 on, except in 1.10.0's newest
# upload (u46), a page load that never runs fib: it is no example of the regression.
def _by_release(i: int, day: int, rel: str) -> str | None:
    return None if rel == "1.9.0" else "none" if i == 46 else "fib"


# The planted day regression: fib 6x slower from 2026-11-28 on (every release), except in
# that day's newest upload (u35).
def _by_day(i: int, day: int, rel: str) -> str | None:
    return None if day < 2 else "none" if i == 35 else "fib"


def test_planted_release_regression_in_real_traces(tmp_path: Path) -> None:
    store = _real_store(tmp_path / "s", 31, _by_release)
    code, doc = _run(store)
    assert code == 1 and doc["by"] == "release" and doc["releases"] == RELS
    (reg,) = doc["regressions"]
    assert (reg["name"], reg["release"], reg["baseRelease"]) == ("fib", "1.10.0", "1.9.0")
    assert reg["afterMsPerLoad"] > 2 * reg["beforeMsPerLoad"] > 0
    assert reg["changeMsCi"][0] > 0 and reg["changePctCi"][0] > 0
    # The examples are 1.10.0 uploads that hold fib (read back from the store), never the
    # newest one, which does not (the examples were the newest three, fib or not).
    st = Store(store)
    try:
        assert len(reg["exampleIds"]) == 3 and "u46" not in reg["exampleIds"]
        for uid in reg["exampleIds"]:
            meta, body = st.get(uid)
            assert meta["release"] == "1.10.0" and _fib_self_ms(body) > 0, uid
        assert _fib_self_ms(st.get("u46")[1]) == 0
    finally:
        st.close()


def test_planted_day_regression_local_url_and_http_alike(tmp_path: Path) -> None:
    store = _real_store(tmp_path / "s", 32, _by_day)
    code, doc = _run(store, "--by", "day")
    assert code == 1 and doc["by"] == "day" and doc["days"] == DAYS and not doc["skipped"]
    # fib rose on 2026-11-28 and stayed up on 11-29: reported once, at the first day.
    (reg,) = doc["regressions"]
    assert (reg["name"], reg["day"], reg["baseDay"]) == ("fib", "2026-11-28", "2026-11-27")
    assert "release" not in reg and "baseRelease" not in reg
    assert reg["afterMsPerLoad"] > 2 * reg["beforeMsPerLoad"] > 0
    assert reg["changeMsCi"][0] > 0 and reg["changePctCi"][0] > 0
    assert len(reg["exampleIds"]) == 3 and "u35" not in reg["exampleIds"]
    # The text says the day.
    r = subprocess.run([str(JSPROF), "fleet", "regressions", "--store", str(store), "--app",
                        "shop", "--by", "day"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 1 and "at day 2026-11-28 (after 2026-11-27)" in r.stdout, r.stderr
    # Over a running collector: `--url` and the HTTP route give the same document.
    col = Collector(store, "--app", "shop:k1")
    try:
        env = dict(os.environ, JSPROF_READ_TOKEN=READ_TOKEN)
        r = subprocess.run([str(JSPROF), "fleet", "regressions", "--url", col.url, "--app",
                            "shop", "--by", "day", "--json"], capture_output=True, text=True,
                           timeout=300, env=env)
        assert r.returncode == 1, r.stderr
        assert orjson.loads(r.stdout) == doc
        auth = {"Authorization": f"Bearer {READ_TOKEN}"}
        status, _, body = col.request("GET", "/v1/query/regressions?app=shop&by=day",
                                      headers=auth)
        assert status == 200 and orjson.loads(body) == doc
        # Each example, fetched as any reader would, holds fib and is of that day.
        for uid in reg["exampleIds"]:
            status, _, body = col.request("GET", f"/v1/traces/{uid}", headers=auth)
            assert status == 200 and _fib_self_ms(body) > 0, uid
            at = orjson.loads(body)["jsprof"]["meta"]["receivedAt"]
            assert T0 + 2 * DAY <= at < T0 + 3 * DAY
        # Mistakes are a 400 in one sentence, and `--url` says the server's words.
        for q, said in (("by=week", "query parameter by: 'week'; use release or day"),
                        ("min_change=nan", "query parameter min_change: expected"),
                        ("relase=1", "query parameter 'relase': not one"),
                        ("route=/nope", "route '/nope' matches no route of app shop")):
            status, _, body = col.request("GET", f"/v1/query/regressions?app=shop&{q}",
                                          headers=auth)
            assert status == 400 and said in orjson.loads(body)["error"], (q, body)
        r = subprocess.run([str(JSPROF), "fleet", "regressions", "--url", col.url, "--app",
                            "shop", "--route", "/nope"], capture_output=True, text=True,
                           timeout=300, env=env)
        assert r.returncode == 2 and "matches no route" in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
    finally:
        col.stop()


def test_chunks_of_one_page_load_are_one_sample(tmp_path: Path) -> None:
    # The same real-trace page loads, whole in one store and every other one sent in five
    # chunks (one pageLoad id) in the other: the test's unit is the page load, so both
    # stores give the same regression, ms per load, interval and sample count (the page
    # loads, 16 a release, 12 a day). Counting each chunk as a sample narrowed the
    # interval as if the split page loads were five each.
    from jsprof.fleet import api
    from jsprof.fleet.filters import Filters
    from jsprof.fleet.regressions import regressions

    for by, plant, loads in (("release", _by_release, 16), ("day", _by_day, 12)):
        whole = _real_store(tmp_path / f"whole-{by}", 31, plant)
        split = real_store(tmp_path / f"split-{by}", 31, plant,
                           chunks=lambda i: 5 if i % 2 else 1)
        st = Store(split)
        try:
            assert st.get("u01.4")[0]["pageLoad"] == "load-1"
        finally:
            st.close()
        docs = []
        for path in (whole, split):
            with api.session(api.open_store(path)) as s:
                docs.append(regressions(s, Filters(app="shop"), by=by))
        a, b = docs
        assert a["tests"] == b["tests"] and a["regressions"], by
        for ra, rb in zip(a["regressions"], b["regressions"], strict=True):
            for k in ("name", by, "beforeSelfPct", "afterSelfPct", "selfPp"):
                assert ra[k] == rb[k], (by, k, ra, rb)
            for k in ("beforeMsPerLoad", "afterMsPerLoad", "changeMsPerLoad"):
                assert abs(ra[k] - rb[k]) <= 1e-3 * max(ra[k], 1), (by, k, ra[k], rb[k])
            assert np.allclose(ra["changeMsCi"], rb["changeMsCi"], atol=2e-3), (by, ra, rb)
            assert ra["changePctCi"] == rb["changePctCi"] and ra["pValue"] == rb["pValue"]
            assert ra["beforePageLoads"] == rb["beforePageLoads"] == loads
            assert ra["afterPageLoads"] == rb["afterPageLoads"] == loads


def test_min_traces_counts_page_loads_not_chunks(tmp_path: Path) -> None:
    # 4 page loads a release, each sent in 5 chunks (real Chromium traces, `split_trace`):
    # 20 uploads a release met --min-traces 5 when the check counted uploads, so a diff and
    # a regression test ran on 4 visits. The check counts page loads; the sentence says so.
    # The same page loads unsplit (4 uploads a release) fail alike and pass --min-traces 4
    # as before.
    split = real_store(tmp_path / "split", 33, n=12, chunks=lambda i: 5)
    whole = real_store(tmp_path / "whole", 33, n=12)
    diff = ["fleet", "diff", "--app", "shop", "--base", "release=1.9.0", "--new",
            "release=1.10.0", "--min-samples", "1", "--resamples", "20"]
    for path, ups in ((split, " (in 20 uploads)"), (whole, "")):
        r = subprocess.run([str(JSPROF), *diff, "--store", str(path), "--min-traces", "5"],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 2, (path, r.stdout, r.stderr)
        (line,) = r.stderr.strip().splitlines()
        assert line.startswith(
            "jsprof: error: fleet diff: --base (app=shop, release=1.9.0) matches 4 page "
            f"loads{ups} and "), line
        assert line.endswith(
            "; each side needs at least 5 page loads and 1 sample (widen the filters, wait for "
            "more uploads, or lower --min-traces/--min-samples)"), line
        r = subprocess.run([str(JSPROF), *diff, "--store", str(path), "--min-traces", "4"],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, (path, r.stderr)
        for n, skipped in ((5, 2), (4, 0)):
            rg = subprocess.run([str(JSPROF), "fleet", "regressions", "--store", str(path),
                                 "--app", "shop", "--json", "--min-samples", "1",
                                 "--min-traces", str(n)],
                                capture_output=True, text=True, timeout=300)
            assert rg.returncode in (0, 1), rg.stderr
            doc = orjson.loads(rg.stdout)
            assert len(doc["skipped"]) == skipped, (path, n, doc["skipped"])
            for sk in doc["skipped"]:
                assert f"matches 4 page loads{ups} and " in sk["reason"], sk
                assert "needs at least 5 page loads and 1 sample" in sk["reason"], sk


FP_STORES = 20


def test_false_positive_rate_on_resampled_real_traces(tmp_path: Path) -> None:
    """20 stores of real-trace page loads with no planted change, each asked by release
    and by day (40 queries, ~500 function changes judged). The page loads are blocks of
    the real traces drawn with replacement, so a function's ms per page load spreads far
    more than a real page's: the harshest clean store we have. A false discovery rate of
    5 % lets a query with nothing to find report something 5 % of the time; measured:
    4 of 40 (docs/field.md); Student's t instead of the permutation null: 3 of 40; the
    old share rule: 0 of 40, and blind to a 1.5x slowdown of a function with 2 % of the
    time (below)."""
    from jsprof.fleet import api
    from jsprof.fleet.filters import Filters
    from jsprof.fleet.regressions import regressions

    reported = 0
    tests = 0
    for k in range(FP_STORES):
        path = _real_store(tmp_path / f"c{k}", 1000 + k)
        with api.session(api.open_store(path)) as s:
            for by in ("release", "day"):
                doc = regressions(s, Filters(app="shop"), by=by)
                assert not doc["skipped"] and len(doc[f"{by}s"]) == (3 if by == "release" else 4)
                tests += doc["tests"]
                reported += bool(doc["regressions"])
        shutil.rmtree(path)
    rate = reported / (2 * FP_STORES)
    print(f"false positives: {reported} of {2 * FP_STORES} clean queries ({rate:.0%}); "
          f"{tests} changes judged")
    # a 5 % rate reports in 6 or more of 40 queries less than 5 % of the time
    assert reported <= 5, rate


# ---- a 1.5x slowdown of a function with ~2 % of the samples -------------------------------
#
# Page loads that run the same code each time: every sample of the three real Chromium
# traces, each taken Poisson(1) times (a sampler's count of fixed work varies so), steps
# scaled by a log-normal device speed per page load; jsonWork (2.2 % of the samples) 1.5x
# slower from 1.10.0 on: its samples taken Poisson(1.5) times, so the change is in the
# samples and their time. 16 page loads a release.

SLOWER = {"1.9.0": 1.0, "1.10.0": 1.5, "1.11.0": 1.5}
SAME = {"1.9.0": 1.0, "1.10.0": 1.0, "1.11.0": 1.0}


def _jittered(path: Path, seed: int, factors: dict[str, float]) -> dict:
    from jsprof.fleet import api
    from jsprof.fleet.filters import Filters
    from jsprof.fleet.regressions import regressions

    jittered_store(path, seed, factors, loads=16)
    with api.session(api.open_store(path)) as s:
        doc = regressions(s, Filters(app="shop"))
    shutil.rmtree(path)
    return doc


def test_a_2pct_function_1_5x_slower_is_found_by_its_ms_per_page_load(tmp_path: Path) -> None:
    found = 0
    for seed in range(5):
        doc = _jittered(tmp_path / f"s{seed}", seed, SLOWER)
        assert doc["releases"] == ["1.9.0", "1.10.0", "1.11.0"] and not doc["skipped"]
        assert doc["metric"] == "self ms per page load" and doc["tests"] > 6
        # Nothing else is reported (the other functions did not change).
        assert all(r["name"] == "jsonWork" for r in doc["regressions"]), doc["regressions"]
        for r in doc["regressions"]:
            found += 1
            assert (r["release"], r["baseRelease"]) == ("1.10.0", "1.9.0")  # once, the first
            # Its share moved less than the old rule's 2 points (what it could not see) ...
            assert 1.5 < r["beforeSelfPct"] < 3 and r["afterSelfPct"] - r["beforeSelfPct"] < 2
            # ... its ms per page load rose by about half, and the intervals say so.
            assert r["afterMsPerLoad"] > r["beforeMsPerLoad"] > 50
            lo, hi = r["changePctCi"]
            assert 0 < lo < r["changePct"] < hi and lo < 50 < hi, r
            assert 0 < r["changeMsCi"][0] < r["changeMsPerLoad"] < r["changeMsCi"][1]
            assert r["qValue"] <= doc["fdr"] and r["pValue"] <= 1 - doc["ciLevel"] + 1e-9
            assert r["beforePageLoads"] == r["afterPageLoads"] == 16
            # The pair it was found at does not also list it as a rise it could miss
            # (the unseen line said "rises in jsonWork under +N% are more often missed").
            (u,) = [u for u in doc["unseen"] if u["release"] == r["release"]]
            flags = {f["name"]: f["found"] for f in u["functions"]}
            assert flags.pop("jsonWork") is True and not any(flags.values()), u
            text = RegressionsText().render(doc).splitlines()
            (line,) = [x for x in text if x.startswith("unseen at release 1.10.0 ")]
            assert "jsonWork" not in line, line
    # Found in 17 of 20 seeds when measured (docs/field.md); 5 here.
    assert found >= 4, found


def test_the_same_store_without_the_slowdown_reports_nothing(tmp_path: Path) -> None:
    # The same page loads, the same jitter, nothing planted (A/A): 1 of 40 seeds reported
    # something when measured (a 5 % false discovery rate allows 2); none of these 8.
    for seed in range(8):
        doc = _jittered(tmp_path / f"s{seed}", 100 + seed, SAME)
        assert doc["tests"] > 6 and doc["regressions"] == [], (seed, doc["regressions"])


def test_no_regressions_says_what_its_page_loads_could_not_see(tmp_path: Path) -> None:
    """Issue 34: a site's summarizeTree called twice in release 2 (+33 % of its ms, a field
    try, 24 -> 25 page loads) was not reported, rightly: its ms per page load spread 1.4x
    its mean (7 of 24 page loads without a sample of it), where a sound test finds +33 %
    1 time in 10 (uncorrected; the query's 12 tests, 3 in 100) and needs ~1,000 page loads
    a side to find it 19 times in 20. So the answer says what it could not see. Here on
    real Chromium samples (nothing planted): each tested function's smallest rise found
    half the time, checked by planting half and twice that rise in its page loads
    resampled (Welch's t at the query's level, 4,000 resamples at once)."""
    from jsprof.analysis import stats
    from jsprof.fleet import api, query
    from jsprof.fleet.filters import Filters
    from jsprof.fleet.regressions import per_page_load, regressions
    from jsprof.fleet.text import RegressionsText

    jittered_store(tmp_path / "s", 5, SAME, loads=16)
    f = Filters(app="shop")
    with api.session(api.open_store(tmp_path / "s")) as s:
        doc = regressions(s, f)
        parts = api.diff_parts(s, replace(f, release="1.9.0"), replace(f, release="1.10.0"),
                               None, (), 5, 1000, None, 0)
        j = [r["name"] for r in parts.doc["rows"]].index("jsonWork")
        base, _, base_all = query.trace_shares(s.engine, s.snap, parts.base, parts.keys,
                                               parts.match)
        x = per_page_load(parts.base.uploads, base, base_all)[0][:, j]
    assert doc["regressions"] == [] and doc["unseenPower"] == 0.5
    assert [(u["release"], u["baseRelease"], u["beforePageLoads"], u["afterPageLoads"])
            for u in doc["unseen"]] == [("1.10.0", "1.9.0", 16, 16), ("1.11.0", "1.10.0", 16, 16)]
    fns = doc["unseen"][0]["functions"]
    assert len(fns) <= doc["tests"] and fns == sorted(fns, key=lambda g: -g["beforeMsPerLoad"])
    (jw,) = [g for g in fns if g["name"] == "jsonWork"]
    assert jw["beforeMsPerLoad"] == round(float(x.mean()), 3)
    # (1.5x of jsonWork was found in 17 of 20 such stores: docs/field.md)
    rise = jw["minRisePct"] / 100.0
    assert 0.1 <= rise < 0.6, jw
    level = doc["fdr"] / doc["tests"]
    rng = np.random.default_rng(11)

    def found(r: float) -> float:
        b = x[rng.integers(0, len(x), (4000, 16))]
        a = x[rng.integers(0, len(x), (4000, 16))] * (1.0 + r)
        t = (a.mean(1) - b.mean(1)) / np.sqrt((a.var(1, ddof=1) + b.var(1, ddof=1)) / 16)
        return float(np.mean(t > stats.t_quantile(1.0 - level / 2.0, 30)))

    low, at, high = found(rise / 2), found(rise), found(2 * rise)
    print(f"jsonWork: unseen under +{100 * rise:.0f}%; found {low:.2f} at half, {at:.2f} at "
          f"it, {high:.2f} at twice")
    assert low <= 0.25 and 0.3 <= at <= 0.8 and high >= 0.9, (low, at, high)
    # ... and the text says so, per pair, after "no regressions"
    lines = RegressionsText().render(doc).splitlines()
    assert lines[0] == "no regressions over 3 releases (1.9.0 to 1.11.0)", lines
    assert lines[1].startswith("unseen at release 1.10.0 (after 1.9.0; 16 -> 16 page loads): "
                               "rises in "), lines
    assert f"jsonWork under +{jw['minRisePct']:.0f}%" in lines[1], lines
    assert lines[2].startswith("unseen at release 1.11.0 (after 1.10.0; "), lines


def test_permutation_p_value_and_critical_value_agree() -> None:
    # The interval of a change excludes 0 exactly when its p-value is at most the level,
    # at every level (the critical value is read off the same permutations).
    from jsprof.fleet.regressions import changes

    rng = np.random.default_rng(7)
    b = rng.gamma(2.0, 10.0, size=(12, 6))
    a = rng.gamma(2.0, 10.0, size=(12, 6)) * np.asarray([1.0, 1.2, 1.5, 2.0, 3.0, 0.5])
    for c in changes(b, a):
        for level in (0.001, 0.005, 0.01, 0.02, 0.05, 0.2):
            lo, hi = c.ms_interval(level)
            assert (c.p <= level) == (lo > 0 or hi < 0), (c.p, level, lo, hi)
            rlo, rhi = c.ratio_interval(level)
            if rlo is not None and rhi is not None:
                assert (rlo > 1 or rhi < 1) == (c.p <= level)


def test_student_t_quantiles() -> None:
    # Table values (two-sided 95 % and 99.9 %): the interval's critical values.
    from jsprof.fleet.regressions import t_quantile

    for df, q975, q9995 in ((1, 12.706, 636.619), (5, 2.571, 6.869), (10, 2.228, 4.587),
                            (30, 2.042, 3.646), (1000, 1.962, 3.300)):
        assert abs(t_quantile(0.975, df) - q975) < 1e-3
        assert abs(t_quantile(0.9995, df) - q9995) < 1e-3 * q9995


def test_one_release_is_nothing_to_compare(tmp_path: Path) -> None:
    # One release (or one day) cannot show a regression: the text says there was nothing
    # to compare, not "no regressions", which reads as a clean bill of health.
    store = _store(tmp_path / "s", [("1.0.0", None)], seed=5)
    for by in ("release", "day"):
        r = subprocess.run([str(JSPROF), "fleet", "regressions", "--store", str(store),
                            "--app", "shop", "--by", by], capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, r.stderr
        assert f"nothing to compare: regressions compare each {by} with the one before" \
            in r.stdout, r.stdout
        assert f"of 1 {by} (" in r.stdout and "no regressions" not in r.stdout, r.stdout
    code, doc = _run(store)
    assert code == 0 and doc["releases"] == ["1.0.0"] and doc["regressions"] == []


def test_diff_ranks_by_the_change_its_interval_is_sure_of(tmp_path: Path) -> None:
    # The store: jsonWork 1.5x slower. `fleet diff` ranked it 4th, below
    # functions whose intervals include 0 (a larger estimate, no evidence), and gave the
    # relative change only in --json. Now a row whose interval excludes 0 is never below
    # one whose intervals both include it, jsonWork comes first, and the text says +x%.
    store = jittered_store(tmp_path / "s", 1, SLOWER, loads=16)
    base = [str(JSPROF), "fleet", "diff", "--store", str(store), "--app", "shop", "--base",
            "release=1.9.0", "--new", "release=1.10.0", "--min-samples", "100", "--top", "8"]
    r = subprocess.run([*base, "--json"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    rows = orjson.loads(r.stdout)["rows"]

    def sure(row: dict) -> bool:
        return any(iv is not None and (iv[0] > 0 or iv[1] < 0)
                   for iv in (row["selfPpCi"], row["totalPpCi"]))

    flags = [sure(x) for x in rows]
    assert flags == sorted(flags, reverse=True) and not all(flags), rows
    assert rows[0]["name"] == "jsonWork" and rows[0]["selfPpCi"][0] > 0, rows[0]
    r = subprocess.run(base, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    (line,) = [x for x in r.stdout.splitlines() if "jsonWork" in x]
    assert f"{rows[0]['selfRelPct']:+.0f}%" in line.split(), line


def test_during_interaction_says_ms_per_interaction(tmp_path: Path) -> None:
    # --during interaction: the test is the same (self ms inside interactions per page
    # load), and each regression also says ms per interaction and how many there were,
    # so more interactions per visit are told from slower code. Every page load here has
    # one interaction over all of it and up to two more inside it.
    from jsprof.fleet import api
    from jsprof.fleet.filters import Filters
    from jsprof.fleet.regressions import regressions

    path = jittered_store(tmp_path / "s", 0, SLOWER, loads=16, interactions=True)
    st = Store(path)
    try:
        n = {rel: sum(len(st.get(f"{rel}-{i}")[0]["timeline"]["interactions"])
                      for i in range(16)) for rel in SLOWER}
    finally:
        st.close()
    with api.session(api.open_store(path)) as s:
        doc = regressions(s, Filters(app="shop", during="interaction"))
        plain = regressions(s, Filters(app="shop"))
    (reg,) = doc["regressions"]
    assert (reg["name"], reg["release"]) == ("jsonWork", "1.10.0")
    # The windows cover every sample: the same ms per page load as without --during.
    (p,) = plain["regressions"]
    assert reg["afterMsPerLoad"] == pytest.approx(p["afterMsPerLoad"], abs=1e-3)
    assert (reg["beforeInteractions"], reg["afterInteractions"]) == (n["1.9.0"], n["1.10.0"])
    assert n["1.10.0"] > 16  # more than one interaction a page load
    assert reg["afterMsPerInteraction"] == pytest.approx(
        reg["afterMsPerLoad"] * 16 / n["1.10.0"], abs=2e-3)
    assert reg["beforeMsPerInteraction"] == pytest.approx(
        reg["beforeMsPerLoad"] * 16 / n["1.9.0"], abs=2e-3)
    assert "beforeInteractions" not in p
