"""fleet diff's intervals resample in the engine, and `series?by=day` reads once.

The bootstrap weights each upload by an Exp(1) draw per resample (the Bayesian
bootstrap), drawn from a hash of (seed, upload, resample) and summed by DuckDB (per Dask
partition on a cluster: test_fleet_dask.py), so what Python holds is resamples x keys.
Checked here on real stores: the intervals contain their estimates, agree with the
multinomial bootstrap of every trace's own shares (computed apart, by `analysis`), and
the memory a diff takes does not grow with the uploads it resamples.
"""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fleet_util import make_trace, upload
from jsprof.analysis.diff import diff_profiles, function_times
from jsprof.fleet import api, engine, query
from jsprof.fleet.engine import (
    WEIGHT_SCALE,
    DuckEngine,
    fmix32,
    resample_rows,
    stack_key,
    weight_draws,
)
from jsprof.fleet.filters import Filters
from jsprof.store import Store
from jsprof.trace import Recording, Track

T0 = 1.7e12


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    st = Store(tmp_path_factory.mktemp("resample") / "store")
    rng = np.random.default_rng(3)
    raw = {}
    for rel, hot in (("1.0", None), ("1.1", "slowThing")):
        for i in range(30):
            tr = make_trace(rng, int(rng.integers(100, 400)), hot=hot,
                            hot_share=float(rng.uniform(0.02, 0.2)))
            uid = f"{rel}-{i}"
            # four UTC days, the third without uploads
            day = (0, 1, 3)[i % 3]
            upload(st, uid, tr, app="shop", release=rel,
                   receivedAt=T0 + day * 86400e3 + i * 1e3)
            raw[uid] = tr
    st.raw = raw
    yield st
    st.close()


def test_weights_are_exp_one_independent_and_deterministic():
    rng = np.random.default_rng(0)
    hu = fmix32(rng.integers(0, 2**32, 2000).astype(np.uint64))
    rh = fmix32(np.arange(500, dtype=np.uint64))
    n = weight_draws(hu, rh)
    assert n.dtype.kind == "i"  # whole numbers: sums exact in any order
    w = n / WEIGHT_SCALE
    assert w.mean() == pytest.approx(1.0, abs=0.005)
    assert w.var() == pytest.approx(1.0, abs=0.01)
    for x in (0.1, 0.5, 1.0, 2.0, 4.0):  # the Exp(1) distribution function
        assert (w <= x).mean() == pytest.approx(1 - math.exp(-x), abs=0.003), x
    # per (upload, resample) independent: no correlation between neighbours either way
    assert abs(np.corrcoef(w[:-1].ravel(), w[1:].ravel())[0, 1]) < 0.01
    assert abs(np.corrcoef(w[:, :-1].ravel(), w[:, 1:].ravel())[0, 1]) < 0.01
    assert np.array_equal(weight_draws(hu, rh), n)


def _keys_of_all(d) -> list:
    return [r.key for r in d.rows]


def test_sql_sums_equal_the_same_steps_in_numpy(store, monkeypatch):
    """DuckDB's SQL draws and sums (hash, Poisson, µs) = the numpy steps over the weights
    rows read straight from the Parquet parts, to the bit; seeds give their own draws."""
    eng = DuckEngine()
    try:
        with api.session(store, eng) as s:
            sel = query.select(eng, s.snap, Filters(app="shop"))
            keys = _keys_of_all(diff_profiles(sel.recording, sel.recording))
            assert len(keys) >= 12
            from jsprof.fleet.releases import matcher

            match = matcher(set(), set(), False)
            # the tables' parts, and the uploads not compacted yet as tables in memory
            rows = [(p if isinstance(p, pa.Table) else pq.read_table(p)).to_pydict()
                    for p in s.snap.row_files("weights", sel.uploads)]
            col = {c: np.concatenate([np.asarray(r[c], np.int64) for r in rows])
                   for c in ("uk", "stack_id", "marker", "weight_ns")}
            ri = sel.uploads.ri[np.searchsorted(sel.uploads.uk, col["uk"])]
            sk = stack_key(ri, col["stack_id"], col["marker"])
            for seed in (0, 7):
                spec = query.resample_spec(sel, keys, match, 300, seed)
                got = eng.resample(s.snap, sel.uploads, spec)
                want = resample_rows(col["uk"], sk, col["weight_ns"], spec)
                for a, b in ((got.self_us, want.self_us), (got.total_us, want.total_us),
                             (got.all_us, want.all_us)):
                    assert np.array_equal(a, b), seed
                assert got.self_us.any() and got.all_us.min() > 0
            other = eng.resample(s.snap, sel.uploads, query.resample_spec(sel, keys, match,
                                                                          300, 0))
            assert not np.array_equal(other.all_us, got.all_us)  # seed 0 vs seed 7
            # Several blocks of keys, the last one short.
            monkeypatch.setattr(engine, "KEY_BLOCK", 5)
            spec = query.resample_spec(sel, keys, match, 50, 1)
            got = eng.resample(s.snap, sel.uploads, spec)
            want = resample_rows(col["uk"], sk, col["weight_ns"], spec)
            assert np.array_equal(got.self_us, want.self_us)
            assert np.array_equal(got.total_us, want.total_us)
    finally:
        eng.close()


def _shares(store, sel, keys, match):
    """Per trace: self and total ms of each key and all its ms, by `analysis` on the raw
    upload (what the old bootstrap resampled, computed apart from the fleet)."""
    pos = {k: i for i, k in enumerate(keys)}
    S = np.zeros((len(sel.uploads), len(keys)))
    T = np.zeros_like(S)
    A = np.zeros(len(sel.uploads))
    for u, uid in enumerate(sel.uploads.id):
        rec = Recording([Track("main", store.raw[uid], sample_interval=10.0)])
        times, A[u] = function_times(rec, None, match, False)
        for k, (s, t) in times.items():
            if k in pos:
                S[u, pos[k]] += s
                T[u, pos[k]] += t
    return S, T, A


def _multinomial(base, new, reps, rng):
    """The previous method: resample traces with replacement (a multinomial count per
    trace), uploads x resamples in memory."""
    out = {}
    for side, (S, T, A) in (("base", base), ("new", new)):
        U = len(A)
        c = rng.multinomial(U, np.full(U, 1.0 / U), size=reps).astype(np.float64)
        den = c @ A
        out[side] = (100 * (c @ S) / den[:, None], 100 * (c @ T) / den[:, None])
    return {"self_pp": out["new"][0] - out["base"][0],
            "total_pp": out["new"][1] - out["base"][1]}


def test_intervals_contain_estimates_and_agree_with_the_multinomial_bootstrap(store):
    reps = 2000
    with api.session(store) as s:
        base = query.select(s.engine, s.snap, Filters(app="shop", release="1.0"))
        new = query.select(s.engine, s.snap, Filters(app="shop", release="1.1"))
        d, keys, ci, match = query.diff(s.engine, s.snap, base, new, _keys_of_all, reps)
        again = query.bootstrap(s.engine, s.snap, base, new, keys, match, reps)
        other = query.bootstrap(s.engine, s.snap, base, new, keys, match, reps, seed=1)
    assert all(np.array_equal(again[m], ci[m], equal_nan=True) for m in ci)  # deterministic
    assert not np.array_equal(other["self_pp"], ci["self_pp"], equal_nan=True)
    ref_b, ref_n = _shares(store, base, keys, match), _shares(store, new, keys, match)
    with api.session(store) as s:  # the engine's per-trace sums (`fleet regressions`)
        for sel, ref in ((base, ref_b), (new, ref_n)):
            got = query.trace_shares(s.engine, s.snap, sel, keys, match)
            for g, r in zip(got, ref, strict=True):
                assert np.allclose(g, r, rtol=0, atol=1e-3)  # ns rounding per sample
    old = _multinomial(ref_b, ref_n, reps, np.random.default_rng(0))
    rows = {r.key: r for r in d.rows}
    checked = 0
    for j, k in enumerate(keys):
        r = rows[k]
        for m, est in (("self_pp", r.d_self), ("total_pp", r.d_total),
                       ("self_rel", r.relative("self")), ("total_rel", r.relative("total"))):
            lo, hi = ci[m][:, j]
            if m.endswith("pp"):
                assert math.isfinite(lo) and math.isfinite(hi), (k, m)
            if not (math.isfinite(est) and math.isfinite(lo)):
                continue  # a relative change of a share that is 0 in BASE: no interval
            # the raw percentiles, before api.diff widens an interval to its estimate
            assert lo - 1e-9 <= est <= hi + 1e-9, (k, m, lo, est, hi)
            if m in old:
                olo, ohi = query._interval(old[m], len(keys))[:, j]
                tol = 0.15 * (ohi - olo) + 0.02
                assert abs(lo - olo) <= tol and abs(hi - ohi) <= tol, (k, m, lo, hi, olo, ohi)
                checked += (ohi - olo) > 0.5
    assert checked >= 10  # most keys have a real interval, not a point
    slow = keys.index(next(k for k in keys if k.name == "slowThing"))
    assert ci["self_pp"][0, slow] > 5  # the regression stands out


def _fill_many(st, n: int, rng) -> None:
    for rel, hot in (("1.0", None), ("1.1", "slowThing")):
        for i in range(n):
            upload(st, f"{rel}-{i}", make_trace(rng, 40, hot=hot, hot_share=0.1),
                   app="shop", release=rel, env="few" if i < n // 10 else "rest",
                   receivedAt=T0 + i * 1e3)


def test_diff_memory_does_not_grow_with_the_uploads_resampled(tmp_path, capfd):
    """tracemalloc's peak over a whole `fleet diff` (4,000 resamples) of 40 and of 400
    uploads a side: the same keys x resamples, ten times the uploads. Resampling traces
    in memory took uploads x resamples float64s: 40 MB more at 400 than at 40."""
    st = Store(tmp_path / "store")
    _fill_many(st, 400, np.random.default_rng(9))
    peaks = {}
    try:
        with api.session(st) as s:
            for env in ("few", None, "few", None):  # the second round, warm
                f = {"app": "shop", "env": env}
                tracemalloc.start()
                doc, _ = api.diff(s, Filters(release="1.0", **f), Filters(release="1.1", **f),
                                  20, reps=4000, min_samples=1)
                peaks[doc["base"]["traces"]] = tracemalloc.get_traced_memory()[1]
                tracemalloc.stop()
                assert any(r["selfPpCi"] for r in doc["rows"])
    finally:
        st.close()
    assert set(peaks) == {40, 400}
    grew = peaks[400] - peaks[40]
    # what grows is per upload (ids, keys: ~0.5 KB each), never per resample
    assert grew < 1.5e6, peaks
    assert capfd.readouterr().out == ""


def test_the_engine_prints_nothing(store, capfd):
    """DuckDB draws a progress bar on stdout, tty or not, for a query past
    progress_bar_time (2 s): a long `fleet diff --json` came out with it in the JSON."""
    eng = DuckEngine()
    eng.con.execute("SET progress_bar_time = 0")  # as if every query took long
    try:
        with api.session(store, eng) as s:
            api.diff(s, Filters(app="shop", release="1.0"), Filters(app="shop", release="1.1"),
                     20, reps=200, min_samples=1)
    finally:
        eng.close()
    assert capfd.readouterr().out == ""


def _series_per_day(s, f, name):
    """`series?by=day` as it was: one select per UTC day (the reference)."""
    from dataclasses import replace
    from datetime import UTC, datetime

    from jsprof.analysis.profile import summarize

    up = s.engine.uploads(s.snap, f)
    times = [t for t in up.received_at.tolist() if math.isfinite(t)]
    day = 86400e3
    d0 = math.floor(min(times) / day)
    d1 = min(math.floor(max(times) / day), d0 + 90)
    points = []
    for d in range(d0, d1 + 1):
        sel = query.select(s.engine, s.snap, replace(f, since=max(d * day, f.since or -math.inf),
                                                     until=min((d + 1) * day,
                                                               f.until or math.inf)))
        if not sel.traces:
            continue
        sm = summarize(sel.recording)
        hit = [i for i, k in enumerate(sm.stats.keys) if k.name == name]
        pct = 100.0 / sm.total_ms
        points.append({
            "label": datetime.fromtimestamp(d * 86400, UTC).strftime("%Y-%m-%d"),
            "selfPct": round(float(sum(sm.stats.self_ms[i] for i in hit)) * pct, 3),
            "totalPct": round(float(max((sm.stats.total_ms[i] for i in hit), default=0.0))
                              * pct, 3),
            "traces": sel.traces, "leftOutTraces": 0, "totalMs": round(sm.total_ms, 3)})
    return points


def test_series_by_day_reads_the_selection_once(store, monkeypatch):
    eng = DuckEngine()
    calls = {"uploads": 0, "stacks": 0}
    for name in calls:
        real = getattr(eng, name)

        def spy(*a, _real=real, _name=name, **k):
            calls[_name] += 1
            return _real(*a, **k)

        monkeypatch.setattr(eng, name, spy)
    try:
        with api.session(store, eng) as s:
            for f in (Filters(app="shop"), Filters(app="shop", release="1.1"),
                      Filters(app="shop", since=T0 + 86400e3)):
                for fn in ("slowThing", "render"):
                    want = _series_per_day(s, f, fn)
                    for k in calls:
                        calls[k] = 0
                    doc = api.series(s, f, fn, "day")
                    assert calls == {"uploads": 1, "stacks": 1}, (f, calls)
                    assert doc["points"] == want, (f, fn)
            assert [p["label"] for p in api.series(s, Filters(app="shop"), "fib", "day")
                    ["points"]] == ["2023-11-14", "2023-11-15", "2023-11-17"]
    finally:
        eng.close()
