"""DuckDB and Dask run the same plan: identical results on a real 2-worker LocalCluster."""

from __future__ import annotations

import numpy as np
import orjson
import pytest

from fleet_util import make_trace, upload
from jsprof.cli import main
from jsprof.fleet import api
from jsprof.fleet.engine import DaskEngine, DuckEngine
from jsprof.fleet.filters import Filters
from jsprof.store import Store
from jsprof.store.tables.compact import compact


@pytest.fixture(scope="module")
def cluster(dask_client):
    """The session's LocalCluster (conftest.dask_client) and its Client."""
    return dask_client.cluster, dask_client


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    st = Store(tmp_path_factory.mktemp("dask") / "store")
    rng = np.random.default_rng(5)
    for rel, hot in (("1.0", None), ("1.1", "slowThing"), ("1.2", "slowThing")):
        for i in range(8):
            upload(st, f"{rel}-{i}", make_trace(rng, 500, hot=hot, hot_share=0.1),
                   app="shop", release=rel, route=f"/p/{i % 3}", env="prod",
                   receivedAt=1.7e12 + i * 60e3, country=["DE", "FR"][i % 2], ab=i % 2 == 0)
    compact(st)
    # not compacted: both engines read it from memory, beside the tables' files
    upload(st, "other-app", make_trace(rng, 300), app="blog", release="1.0")
    return st


FILTERS = [
    Filters(app="shop"),
    Filters(app="shop", release="1.1", route="/p/?", where=(("country", "DE"),)),
    Filters(app="shop", since=1.7e12 + 120e3, until=1.7e12 + 400e3, env="prod",
            where=(("ab", "true"),)),
]


def test_both_engines_give_identical_results(store, cluster):
    _, client = cluster
    duck = DuckEngine()
    dask = DaskEngine(client=client)
    with api.session(store, duck) as sd, api.session(store, dask) as sk:
        for f in FILTERS:
            a, b = api.top(sd, f, None), api.top(sk, f, None)
            assert a == b, f
            assert a["traces"] > 0, f
        # --top N fetches per-trace rows for the N shown functions only: same figures
        a5, b5 = api.top(sd, FILTERS[0], 5), api.top(sk, FILTERS[0], 5)
        assert a5 == b5
        a = api.top(sd, FILTERS[0], None)
        assert a5["rows"][:5] == [r for r in a["rows"] if r["resource"] is not None][:5]
        assert a5["rows"][5:] == [r for r in a["rows"] if r["resource"] is None]
        assert api.top(sd, Filters(app="blog"), None) == api.top(sk, Filters(app="blog"), None)
        assert api.top(sd, Filters(app="blog"), None)["traces"] == 1
        base, new = Filters(app="shop", release="1.0"), Filters(app="shop", release="1.2")
        da, _ = api.diff(sd, base, new, None, ["slowThing:self>+2pp"])
        dk, _ = api.diff(sk, base, new, None, ["slowThing:self>+2pp"])
        assert da == dk
        assert da["failures"]
        # regressions: the engines' per-upload sums, then one client-side test (#33)
        from jsprof.fleet.regressions import regressions

        ra = regressions(sd, Filters(app="shop"), min_traces=8)
        assert ra == regressions(sk, Filters(app="shop"), min_traces=8)
        assert [(r["name"], r["release"]) for r in ra["regressions"]] == [("slowThing", "1.1")]
    duck.close()


def test_resampling_on_the_cluster_equals_duckdb_to_the_bit(store, cluster):
    """fleet diff's bootstrap sums: DuckDB's SQL and the workers' per-partition steps draw
    the same Poisson weights from the same hash and add the same whole µs."""
    from jsprof.analysis.diff import diff_profiles
    from jsprof.fleet import query
    from jsprof.fleet.releases import matcher

    _, client = cluster
    duck = DuckEngine()
    dask = DaskEngine(client=client)
    try:
        with api.session(store, duck) as s:
            sel = query.select(duck, s.snap, Filters(app="shop"))
            assert len(s.snap.row_files("weights", sel.uploads)) >= 3  # partitions
            keys = [r.key for r in diff_profiles(sel.recording, sel.recording).rows]
            for reps, seed in ((300, 0), (1, 5)):
                spec = query.resample_spec(sel, keys, matcher(set(), set(), False), reps, seed)
                a = duck.resample(s.snap, sel.uploads, spec)
                b = dask.resample(s.snap, sel.uploads, spec)
                for x, y in ((a.self_us, b.self_us), (a.total_us, b.total_us),
                             (a.all_us, b.all_us)):
                    assert x.shape == y.shape and np.array_equal(x, y), (reps, seed)
                assert a.all_us.sum() > 0
            pa_, pk = duck.per_upload_key(s.snap, sel.uploads, spec), dask.per_upload_key(
                s.snap, sel.uploads, spec)
            order = [np.lexsort((p["j"], p["uk"])) for p in (pa_, pk)]
            for c in ("uk", "j", "s", "t", "a"):
                assert np.array_equal(pa_[c][order[0]], pk[c][order[1]]), c
    finally:
        duck.close()


def test_cli_runs_on_a_cluster_by_scheduler_address(store, cluster, capsys):
    c, _ = cluster
    argv = ["fleet", "top", "--store", str(store.path), "--app", "shop", "--json", "--all"]
    assert main(argv) == 0
    local = orjson.loads(capsys.readouterr().out)
    assert main(argv + ["--engine", "dask", "--scheduler", c.scheduler_address]) == 0
    assert orjson.loads(capsys.readouterr().out) == local
    # --local-workers starts (and stops) a LocalCluster of its own for the one query
    assert main(argv + ["--engine", "dask", "--local-workers", "1"]) == 0
    assert orjson.loads(capsys.readouterr().out) == local
    assert main(argv + ["--engine", "dask", "--scheduler", "tcp://127.0.0.1:1"]) == 2
    assert "cannot reach the Dask scheduler" in capsys.readouterr().err


META = [  # one upload each, real Chromium traces
    {"n": 1.5e300}, {"n": 12345678901234567890}, {"n": 1e16}, {"n": 0.1}, {"n": -5},
    {"n": True}, {"n": None}, {"n": {"a": 1}}, {"n": "1.5e300"}, {"n": "DE"}, {},
]
WHERE = {  # --where n=VALUE -> the META rows it matches
    "1.5e300": [0, 8], "1.5e+300": [0], "15e299": [0], "12345678901234567890": [1],
    "1e16": [2], "10000000000000000": [2], "0.1": [3], "-5": [4], "-5.0": [4],
    "true": [5], "null": [6], '{"a":1}': [], "DE": [9], "": [],
}


def test_engines_agree_on_meta_values_of_every_kind(tmp_path, cluster):
    from pathlib import Path

    from jsprof import io

    _, client = cluster
    trace = io.load(Path(__file__).parent / "data" / "chromium" / "trace-basic.json")
    st = Store(tmp_path / "store")
    for i, meta in enumerate(META):
        upload(st, f"m{i}", trace.tracks[0].trace, app="shop", release="1.0", **meta)
    duck = DuckEngine()
    dask = DaskEngine(client=client)
    try:
        with api.session(st, duck) as s:
            for value, want in WHERE.items():
                f = Filters(app="shop", where=(("n", value),))
                a = duck.uploads(s.snap, f)
                b = dask.uploads(s.snap, f)
                assert a.id == b.id, value
                assert sorted(int(i[1:]) for i in a.id) == want, value
    finally:
        duck.close()
        st.close()


def test_a_scheduler_address_that_is_no_dask_scheduler_is_one_line(store, capsys):
    # A real loopback peer that answers as a web server does (a collector's port given by
    # mistake): Dask read its bytes as a frame length of 3 EiB and the query died with a
    # MemoryError traceback.
    import socket
    import threading

    srv = socket.create_server(("127.0.0.1", 0))
    port = srv.getsockname()[1]
    stop = threading.Event()

    def answer() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            with conn:
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n"
                             b"Content-Length: 17\r\n\r\n{\"error\": \"no\"}\r\n")
    t = threading.Thread(target=answer, daemon=True)
    t.start()
    try:
        argv = ["fleet", "top", "--store", str(store.path), "--app", "shop",
                "--engine", "dask", "--scheduler", f"tcp://127.0.0.1:{port}"]
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
        assert f"--scheduler tcp://127.0.0.1:{port}" in err and "Dask scheduler" in err, err
    finally:
        stop.set()
        t.join(5)
        srv.close()
