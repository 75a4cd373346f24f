"""The field store on object storage (`--store s3://bucket/prefix`, store/objstore.py).

The S3 API is moto's server mode on loopback (`s3_util.moto_server`: an emulator of the
API, a real HTTP server in a subprocess); the collectors are real `jsprof serve`
processes posting real Chromium traces, the queries real `jsprof fleet` processes. The
same object-store code also runs over a local directory (`objects.LocalObjects`): the
interface's tests run on both."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest

pytest.importorskip("boto3")
pytest.importorskip("moto")

from jsprof.store.objects import LocalObjects, open_objects  # noqa: E402
from jsprof.store.objstore import (  # noqa: E402
    LEASE_KEY,
    MANIFEST_KEY,
    Conflict,
    Lease,
    ObjectCompactor,
    ObjectSegmentStore,
)
from s3_util import aws_env, moto_server, new_bucket  # noqa: E402
from serve_util import FIXTURES, JSPROF, Collector  # noqa: E402

TRACE = (FIXTURES / "trace-basic.json").read_bytes()


@pytest.fixture(scope="module")
def s3() -> dict[str, str]:
    with moto_server() as env:
        yield env


@pytest.fixture(params=["local", "s3"])
def objects(request: pytest.FixtureRequest, tmp_path: Path, s3: dict[str, str]) -> object:
    if request.param == "local":
        yield LocalObjects(tmp_path / "objects")
        return
    with aws_env(s3):
        yield open_objects(f"s3://{new_bucket(s3)}/store")


def test_conditional_writes(objects: object) -> None:
    """What the store rests on, on both: a key is created once; a replace goes through only
    on the etag last read; a list sees what was put; a deleted key is gone."""
    assert objects.put_new("a/x", b"one") is True
    assert objects.put_new("a/x", b"two") is False
    data, etag = objects.get("a/x")
    assert data == b"one"
    assert objects.put_if("a/x", b"three", '"not-its-etag"') is None
    assert objects.get("a/x")[0] == b"one"
    etag2 = objects.put_if("a/x", b"three", etag)
    assert etag2 is not None and etag2 != etag
    assert objects.put_if("a/x", b"four", etag) is None  # the etag read before is stale
    assert objects.get("a/x") == (b"three", etag2)
    objects.put("a/y", b"12345")
    assert objects.list("a/") == [("a/x", 5), ("a/y", 5)]
    objects.delete("a/x")
    assert objects.get("a/x") is None
    assert objects.put_if("missing", b"", etag) is None


def test_the_lease_has_one_holder(objects: object) -> None:
    a, b = Lease(objects, "a"), Lease(objects, "b")
    assert a.acquire() is True
    assert b.acquire() is False  # held, not expired
    assert a.acquire() is True  # renewed
    a.release()
    assert b.acquire() is True
    assert a.acquire() is False  # its etag is stale: b's now
    # An expired lease (its holder stopped renewing) is taken over, with If-Match on it.
    lapsed = Lease(objects, "c", seconds=-1)
    b.release()
    assert lapsed.acquire() is True
    d = Lease(objects, "d")
    assert d.acquire() is True
    assert lapsed.acquire() is False
    assert orjson.loads(objects.get(LEASE_KEY)[0])["owner"] == "d"


def test_racing_for_the_lease_makes_one_holder(tmp_path: Path) -> None:
    """Eight would-be compactors ask at the same instant, twenty times over: each time
    exactly one holds the lease (If-None-Match on a free lease, If-Match on a lapsed one).
    On the local directory only: there the atomicity is ours (link, flock); on S3 it is the
    service's. moto's server is no judge of it: it checks a condition, then writes, with
    no lock between (moto/s3/responses.py, 5.2.6), and racing conditional puts on one key
    hung its server for good in 1 of ~30 rounds (docs/store.md)."""
    objects = LocalObjects(tmp_path / "objects")
    for r in range(20):
        if r % 2:  # a lapsed lease to take over
            objects.put(LEASE_KEY, orjson.dumps({"owner": "gone", "until": 0}))
        else:
            objects.delete(LEASE_KEY)
        leases = [Lease(objects, f"c{i}") for i in range(8)]
        won: list[bool] = [False] * 8
        barrier = threading.Barrier(8)

        def ask(i: int, leases: list = leases, won: list = won,
                barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            won[i] = leases[i].acquire()

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert sum(won) == 1, (r, won)
        holder = won.index(True)
        assert orjson.loads(objects.get(LEASE_KEY)[0])["owner"] == f"c{holder}"


def _meta(i: int) -> dict:
    return {"app": "shop", "release": "r1", "receivedAt": time.time() * 1000 + i,
            "sampleInterval": 10.0}


def _compacted_ids(objects: object) -> list[str]:
    """Every upload id the committed tables hold, one per row."""
    man = orjson.loads(objects.get(MANIFEST_KEY)[0])
    ids: list[str] = []
    for e in man["uploads"]:
        data = objects.get("tables/" + e["path"])[0]
        ids += pq.read_table(pa_buffer(data), columns=["id"]).column("id").to_pylist()
    return ids


def pa_buffer(data: bytes) -> object:
    import pyarrow as pa

    return pa.BufferReader(data)


def test_compactors_keep_each_upload_once_and_a_stale_commit_loses(
        objects: object, tmp_path: Path) -> None:
    """Two collectors (a retry of one upload stored by both), two compactors on two
    "machines" (mirrors): every id once in the tables; a compactor whose commit comes after
    another's commit since it read the manifest lists nothing and does its run again."""
    one, two = ObjectSegmentStore(objects.url, objects), ObjectSegmentStore(objects.url, objects)
    for i in range(5):
        assert one.append(f"u{i}", _meta(i), TRACE) is True
    assert two.append("u4", _meta(4), TRACE) is True  # a client's retry, on another collector
    segments = objects.list("segments/")
    assert len(segments) == 6  # one object per flush (appends one at a time here)
    x = ObjectCompactor(objects, tmp_path / "machine-x")
    y = ObjectCompactor(objects, tmp_path / "machine-y")
    assert x.run().uploads == 5
    assert x.duplicates == 1
    assert sorted(_compacted_ids(objects)) == [f"u{i}" for i in range(5)]
    for i in range(5, 8):
        one.append(f"u{i}", _meta(i), TRACE)
    two.append("u6", _meta(6), TRACE)

    # y commits while x is between its compaction and its commit (x asks for its lease
    # before its push and again before its commit).
    asked: list[bool] = []

    def y_commits_first() -> bool:
        if not asked:
            assert y.run().uploads == 3
        asked.append(True)
        return True

    with pytest.raises(Conflict):
        x.run(still_held=y_commits_first)
    assert sorted(_compacted_ids(objects)) == [f"u{i}" for i in range(8)]
    one.append("u8", _meta(8), TRACE)
    assert x.run().uploads == 1  # from y's commit on
    assert sorted(_compacted_ids(objects)) == [f"u{i}" for i in range(9)]
    assert x.run().uploads == 0  # caught up: nothing is put
    # The manifest lists every part the bucket holds and the bucket every part it lists.
    from jsprof.store.tables.manifest import listed

    man = orjson.loads(objects.get(MANIFEST_KEY)[0])
    held = {k[len("tables/"):] for k, _ in objects.list("tables/")} - {"_manifest.json"}
    assert held == listed(man)


def test_a_collector_past_a_million_flushes_still_has_its_uploads_compacted(
        tmp_path: Path) -> None:
    """A segment object's number is written with six digits or more: the millionth flush
    of a long-running collector (group commit: one object per burst of uploads) makes a
    seven-digit name, which the compactor, the query mirror and the health counts must
    still read (an acknowledged upload is never left behind)."""
    from jsprof.store.objstore import object_health

    objects = LocalObjects(tmp_path / "objects")
    st = ObjectSegmentStore(objects.url, objects)
    st.n = 999_999
    for i in range(3):
        assert st.append(f"u{i}", _meta(i), TRACE) is True
    assert len(objects.list("segments/")) == 3
    assert object_health(objects)["pending"] == 3
    assert ObjectCompactor(objects, tmp_path / "machine").run().uploads == 3
    assert sorted(_compacted_ids(objects)) == ["u0", "u1", "u2"]
    assert object_health(objects)["pending"] == 0


def test_a_run_that_met_only_a_retry_commits_its_cursor(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A client's retry of an upload already compacted, stored by another collector: the
    compactor drops it and commits the cursor past it, so no query's tail holds it again
    (counted twice: once in the tables, once in the tail) and /readyz's pending is 0."""
    from jsprof.store import objstore
    from jsprof.store.store import Store
    from jsprof.store.tables.view import cursor_in, read_manifest

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    objects = LocalObjects(tmp_path / "objects")
    one, two = ObjectSegmentStore(objects.url, objects), ObjectSegmentStore(objects.url, objects)
    for i in range(3):
        one.append(f"u{i}", _meta(i), TRACE)
    comp = ObjectCompactor(objects, tmp_path / "machine")
    assert comp.run().uploads == 3
    two.append("u0", _meta(0), TRACE)  # the retry
    assert comp.run().uploads == 0
    assert comp.duplicates == 1
    assert objstore.object_health(objects)["pending"] == 0
    tail = Store(objstore.query_mirror(objects.url, objects))
    man = read_manifest(tail.path)
    assert [u for _, u, _, _ in tail.iter_uploads(cursor_in(man))] == []
    assert sorted(_compacted_ids(objects)) == ["u0", "u1", "u2"]


def test_a_segment_put_answered_there_already_is_checked_before_it_is_acknowledged(
        tmp_path: Path) -> None:
    """S3 answers a conditional create 412 (there already) or 409 (a conditional write to
    the key in flight): for a collector's own segment key that is its own earlier attempt
    (botocore's retry of a put whose first try landed, or is still under way). An upload
    is acknowledged only once its object is seen stored; one in flight that may still fail
    is answered 503 (the client retries; the compactor keeps each id once)."""
    from jsprof.store.errors import StoreUnavailable

    class InFlight(LocalObjects):
        """put_new answers False for a segment it did not store (a 409's outcome)."""

        def put_new(self, key: str, data: bytes) -> bool:
            if key.startswith("segments/"):
                return False
            return super().put_new(key, data)

    objects = InFlight(tmp_path / "objects")
    st = ObjectSegmentStore(objects.url, objects)
    with pytest.raises(StoreUnavailable):
        st.append("u0", _meta(0), TRACE)
    assert objects.list("segments/") == []

    class Landed(LocalObjects):
        """put_new stores the object, then answers False (a retried put whose first try
        landed): acknowledged."""

        def put_new(self, key: str, data: bytes) -> bool:
            super().put_new(key, data)
            return False

    objects = Landed(tmp_path / "landed")
    st = ObjectSegmentStore(objects.url, objects)
    assert st.append("u0", _meta(0), TRACE) is True
    assert len(objects.list("segments/")) == 1


@pytest.mark.parametrize("via", ["collector", "fleet"])
def test_a_query_reads_its_tail_while_another_refreshes_the_mirror(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, via: str) -> None:
    """Queries on one machine share a mirror (a collector's query threads, its workers,
    fleet commands): one refreshing it after a compaction drops the segments the new
    cursor passed, which another query, still reading its tail after the older manifest,
    was counting. Its uploads must count: a refresh waits for the tails being read."""
    from jsprof.fleet import api
    from jsprof.store import objstore
    from jsprof.store.tables import view

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    objects = LocalObjects(tmp_path / "objects")
    st = ObjectSegmentStore(objects.url, objects)
    for i in range(3):
        st.append(f"u{i}", _meta(i), TRACE)
    real_read_tail = view.read_tail
    other: list[threading.Thread] = []

    def read_tail(store: object, man: dict, limit: int, **kw: object) -> object:
        if not other:  # the first query: another compacts and refreshes the mirror now
            def refresh() -> None:
                ObjectCompactor(objects, tmp_path / "compactor").run()
                api.snapshot(opened())

            other.append(threading.Thread(target=refresh))
            other[0].start()
            other[0].join(3.0)  # done unless it waits for this query's tail
        return real_read_tail(store, man, limit, **kw)

    def opened() -> object:  # as `jsprof serve` hands it over, or fleet's open_store
        return st if via == "collector" else api._object_store(objects.url)

    store = opened()
    monkeypatch.setattr(view, "read_tail", read_tail)
    snap = api.snapshot(store)
    other[0].join()
    assert sum(e["rows"] for e in snap.manifest["uploads"]) == 3
    assert objstore.object_health(objects)["pending"] == 0


# ---- real collectors on moto, killed mid-flush ------------------------------------------------

# The collector as `jsprof serve` runs it, with a hook in the segment writer: at the flush
# named by JSPROF_TEST_STALL ("before:N" or "after:N": around the put of segment object N)
# it says so in a file and waits there, for the test to kill -9 it.
STALLING = """
import os, sys, time
import jsprof.store.objstore as o
stage, n = os.environ["JSPROF_TEST_STALL"].split(":")
def hook(s, i):
    if s == stage and i == int(n):
        open(os.environ["JSPROF_TEST_STALLED"], "w").close()
        time.sleep(3600)
o._flush_hook = hook
from jsprof.cli import main
sys.exit(main(sys.argv[2:]))
"""


def _post_all(c: Collector, ids: list[str], acked: set[str], failed: set[str]) -> None:
    def one(uid: str) -> None:
        try:
            status, doc = c.post(TRACE, f"app=shop&key=k1&id={uid}")
        except OSError:  # the collector died with this request in flight
            failed.add(uid)
            return
        (acked if status == 202 else failed).add(uid)

    threads = [threading.Thread(target=one, args=(u,)) for u in ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)


def _fleet(env: dict[str, str], *args: str) -> dict:
    out = subprocess.run([str(JSPROF), "fleet", *args, "--json"], env=env,
                         capture_output=True, timeout=600)
    assert out.returncode == 0, out.stderr.decode()
    return orjson.loads(out.stdout)


@pytest.mark.parametrize("stage", ["before", "after"])
def test_every_acknowledged_upload_counts_once_after_a_kill_mid_flush(
        s3: dict[str, str], tmp_path: Path, stage: str) -> None:
    """Collector A is killed (SIGKILL) while it flushes a segment object: before its put
    (the object never lands) or after it (the object holds uploads nobody acknowledged).
    The client retries what was not acknowledged on collector B (two worker processes,
    each its own writer); B's compactor (the bucket's lease) compacts. `jsprof fleet top`
    then counts every upload exactly once, and the tables hold each id once: after the put,
    the bucket held more records than uploads, the retries' copies, which compaction
    dropped."""
    bucket = new_bucket(s3)
    url = f"s3://{bucket}/fleet"
    base = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    stalled = tmp_path / "stalled"
    env_a = {**base, **s3, "XDG_CACHE_HOME": str(tmp_path / "cache-a"),
             "JSPROF_TEST_STALL": f"{stage}:2", "JSPROF_TEST_STALLED": str(stalled)}
    a = Collector(url, "--app", "shop:k1", "--compact-every", "0", env=env_a,
                  wrap=[sys.executable, "-c", STALLING])
    ids = [f"up-{i:03d}" for i in range(24)]
    acked: set[str] = set()
    failed: set[str] = set()
    try:
        # Three flushes' worth one by one (objects 0, 1 stored and acknowledged), then the
        # rest at once: flush 2 takes some and stalls, the others wait behind it.
        _post_all(a, ids[:2], acked, failed)
        assert acked == set(ids[:2])
        poster = threading.Thread(target=_post_all, args=(a, ids[2:], acked, failed))
        poster.start()
        deadline = time.monotonic() + 120
        while not stalled.exists():
            assert time.monotonic() < deadline and a.proc.poll() is None, a.stderr_lines
            time.sleep(0.05)
        time.sleep(0.5)  # let the other posts arrive and queue behind the stalled flush
        a.proc.kill()  # kill -9, mid-flush
        a.proc.wait()
        poster.join(120)
    finally:
        a.kill()
    assert acked | failed == set(ids) and not acked & failed
    assert failed, "the kill left nothing unacknowledged"
    with aws_env(s3):
        objects = open_objects(url)
        stored_records = sum(int(k.rsplit("-", 1)[1][:-4]) for k, _ in objects.list("segments/"))
    if stage == "after":
        assert stored_records > len(acked)  # the stalled flush's object landed, unacknowledged
    else:
        assert stored_records == len(acked)

    env_b = {**base, **s3, "XDG_CACHE_HOME": str(tmp_path / "cache-b")}
    b = Collector(url, "--app", "shop:k1", "--compact-every", "1", "--workers", "2",
                  env=env_b)
    try:
        retried: set[str] = set()
        still: set[str] = set()
        _post_all(b, sorted(failed), retried, still)
        assert retried == failed and not still
        with aws_env(s3):
            total = sum(int(k.rsplit("-", 1)[1][:-4]) for k, _ in objects.list("segments/"))
            if stage == "after":
                assert total > len(ids)  # duplicates are in the bucket
            # B's compactor takes the lease and compacts everything (no deadline on how
            # fast: only that it gets there).
            deadline = time.monotonic() + 300
            while True:
                got = objects.get(MANIFEST_KEY)
                if got is not None and orjson.loads(got[0])["nextUk"] >= len(ids):
                    break
                assert time.monotonic() < deadline, b.stderr_lines
                assert b.proc.poll() is None, b.stderr_lines
                time.sleep(0.5)
            time.sleep(2)  # one more run: anything left would be compacted now
            ids_in_tables = _compacted_ids(objects)
        assert sorted(ids_in_tables) == ids  # each once
        env_q = {**base, **s3, "XDG_CACHE_HOME": str(tmp_path / "cache-query")}
        top = _fleet(env_q, "top", "--store", url, "--app", "shop")
        assert top["traces"] == len(ids)
        # What operators read of it: ready, nothing pending, the bucket's objects.
        status, _, body = b.request("GET", "/readyz")
        assert status == 200, body
        status, _, body = b.request("GET", "/v1/status",
                                    headers={"Authorization": "Bearer test-read-token"})
        assert status == 200, body
        assert orjson.loads(body)["compactor"]["pending"] == 0
        status, _, body = b.request("GET", "/metrics",
                                    headers={"Authorization": "Bearer test-read-token"})
        assert status == 200, body
        assert "jsprof_compactor_pending_uploads 0.0" in body.decode()
        assert "jsprof_compactor_lag_seconds 0.0" in body.decode()
        # the lease holder's runs, from its report in the bucket
        runs = [x for x in body.decode().splitlines()
                if x.startswith("jsprof_compactor_runs_total ")]
        assert runs and float(runs[0].split()[1]) >= 1, body.decode()
        assert 'jsprof_store_files{folder="segments"}' in body.decode()
    finally:
        b.stop()
    # No secret on a command line or in the collectors' logs.
    assert not any(s3["AWS_SECRET_ACCESS_KEY"] in line for line in b.stderr_lines)


# ---- fleet --engine dask: the workers read the bucket ------------------------------------------


def test_dask_workers_read_the_parts_from_the_bucket(s3: dict[str, str], tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A real 2-worker Dask LocalCluster answers a store on s3:// as DuckDB does, and its
    workers fetched the parts from the bucket by key (no path of this machine's mirror in
    their tasks: they could run on any machine that reaches the bucket)."""
    import numpy as np
    from distributed import Client, LocalCluster

    from fleet_util import make_trace
    from jsprof.fleet import api
    from jsprof.fleet.engine import DaskEngine, DuckEngine
    from jsprof.fleet.filters import Filters
    from jsprof.formats.jsprof import dumps
    from jsprof.trace import Recording, Track

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with aws_env(s3):
        url = f"s3://{new_bucket(s3)}/fleet"
        objects = open_objects(url)
        st = ObjectSegmentStore(url, objects)
        rng = np.random.default_rng(7)
        for rel, hot in (("1.0", None), ("1.1", "slowThing")):
            for i in range(6):
                tr = make_trace(rng, 400, hot=hot, hot_share=0.1)
                st.append(f"{rel}-{i}", {"app": "shop", "release": rel, "route": f"/p/{i % 2}",
                                         "receivedAt": 1.7e12 + i * 60e3,
                                         "sampleInterval": 10.0},
                          dumps(Recording([Track("main", tr)])))
        assert ObjectCompactor(objects, tmp_path / "compactor").run().uploads == 12
        # and one not compacted yet: the tail, read on the client beside the parts
        st.append("late", {"app": "shop", "release": "1.1", "receivedAt": 1.7e12 + 9e5,
                           "sampleInterval": 10.0},
                  dumps(Recording([Track("main", make_trace(rng, 200))])))
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                               dashboard_address="127.0.0.1:0", host="127.0.0.1")
        client = Client(cluster)
        try:
            store = api.open_store(url)
            duck = DuckEngine()
            dask = DaskEngine(client=client)
            with api.session(store, duck) as sd, api.session(store, dask) as sk:
                assert sk.engine.remote is not None
                for f in (Filters(app="shop"), Filters(app="shop", release="1.1",
                                                       route="/p/1")):
                    a, b = api.top(sd, f, None), api.top(sk, f, None)
                    assert a == b, f
                assert api.top(sd, Filters(app="shop"), None)["traces"] == 13
            from jsprof.fleet import engine

            fetched = client.run(lambda: engine._objects_read)
            assert sum(fetched.values()) > 0, fetched
            duck.close()
        finally:
            client.close()
            cluster.close()


def test_serve_refuses_a_bucket_it_cannot_reach(s3: dict[str, str], tmp_path: Path) -> None:
    """A missing bucket, or an endpoint where nothing listens: one line before any upload is
    taken, exit 2, no traceback, no credential in it."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    from s3_util import _free_port

    for env, what in (
        ({**s3}, "NoSuchBucket"),
        ({**s3, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{_free_port()}"}, "connect"),
    ):
        out = subprocess.run(
            [str(JSPROF), "serve", "--store", "s3://jsprof-no-such-bucket/x", "--port", "0",
             "--app", "shop:k1"],
            env={**base, **env, "JSPROF_READ_TOKEN": "t",
                 "XDG_CACHE_HOME": str(tmp_path / "c")},
            capture_output=True, timeout=300)
        err = out.stderr.decode()
        assert out.returncode == 2, err
        lines = [x for x in err.splitlines() if x.strip()]
        assert len(lines) == 1 and "Traceback" not in err, err
        assert lines[0].count("s3://jsprof-no-such-bucket/x") == 1 and what in lines[0], err
        assert s3["AWS_SECRET_ACCESS_KEY"] not in err


def test_fleet_names_an_unreachable_bucket_once(tmp_path: Path) -> None:
    """`jsprof fleet top --store s3://...` with nothing listening at the endpoint: one
    line that names the store once (it said `--store URL: URL: cannot read ...`)."""
    from s3_util import CREDENTIALS, _free_port

    base = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    out = subprocess.run(
        [str(JSPROF), "fleet", "top", "--store", "s3://jsprof-nowhere/x", "--app", "shop"],
        env={**base, **CREDENTIALS, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{_free_port()}",
             "XDG_CACHE_HOME": str(tmp_path / "c")},
        capture_output=True, timeout=300)
    err = out.stderr.decode()
    lines = [x for x in err.splitlines() if x.strip()]
    assert out.returncode != 0 and len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].count("s3://jsprof-nowhere/x") == 1 and "connect" in lines[0], err


def test_a_url_with_credentials_is_refused() -> None:
    out = subprocess.run(
        [str(JSPROF), "fleet", "top", "--store", "s3://AKIA:secret@bucket/x", "--app", "a"],
        capture_output=True, timeout=120)
    err = out.stderr.decode()
    assert out.returncode != 0 and "Traceback" not in err, err
    assert "AWS_ACCESS_KEY_ID" in err


def test_a_query_mirror_drops_unlisted_parts_after_the_grace(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A part the manifest stopped listing (merged, pruned) stays in a query's mirror for the
    merge's grace from the pull that found it unlisted, then goes; listed parts stay."""
    from jsprof.store import objstore
    from jsprof.store.tables.merge import GRACE_S

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    objects = LocalObjects(tmp_path / "bucket")
    st = ObjectSegmentStore(objects.url, objects)
    for i in range(3):
        st.append(f"u{i}", _meta(i), TRACE)
    ObjectCompactor(objects, tmp_path / "compactor").run()
    root = objstore.query_mirror(objects.url, objects)
    man, etag = objects.get(MANIFEST_KEY)
    doc = orjson.loads(man)
    gone = root / "tables" / doc["uploads"][0]["path"]
    kept = root / "tables" / doc["releases"][next(iter(doc["releases"]))]["parts"]["frames"][0][
        "path"]
    assert gone.exists() and kept.exists()
    doc["uploads"] = []  # as a merge or prune would stop listing it
    etag = objects.put_if(MANIFEST_KEY, orjson.dumps(doc), etag)
    objstore.query_mirror(objects.url, objects)
    assert gone.exists()  # a query that read the manifest before may still read it
    later = time.time() + GRACE_S + 1
    monkeypatch.setattr(objstore.time, "time", lambda: later)
    doc["touched"] = 1
    objects.put_if(MANIFEST_KEY, orjson.dumps(doc), etag)
    objstore.query_mirror(objects.url, objects)
    assert not gone.exists() and kept.exists()


def test_a_failed_put_acknowledges_nothing(tmp_path: Path) -> None:
    """The S3 API goes away under a running collector: its next upload is answered 503 with
    Retry-After and a one-line JSON error (nothing acknowledged), and the collector lives on."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    with moto_server() as env:
        url = f"s3://{new_bucket(env)}/fleet"
        c = Collector(url, "--app", "shop:k1", "--compact-every", "0",
                      env={**base, **env, "XDG_CACHE_HOME": str(tmp_path / "c")})
        try:
            assert c.post(TRACE, "app=shop&key=k1&id=first")[0] == 202
            with aws_env(env):
                objects = open_objects(url)
                assert [k for k, _ in objects.list("segments/")]
        except BaseException:
            c.kill()
            raise
    # moto's server is gone (its context closed); the collector runs on
    try:
        status, headers, body = c.request("POST", "/v1/traces?app=shop&key=k1&id=second",
                                          TRACE, {"Content-Type": "application/json"},
                                          timeout=300)
        assert status == 503, body
        assert "retry-after" in headers
        doc = orjson.loads(body)
        assert list(doc) == ["error"] and "\n" not in doc["error"]
        assert c.proc.poll() is None
    finally:
        c.stop()
    assert not any(env["AWS_SECRET_ACCESS_KEY"] in line for line in c.stderr_lines)
