"""What a store on object storage gives operators as a local one does (store/objstore.py):
`GET /v1/traces/{id}` of an upload in the tail or compacted, on moto's S3 server (loopback)
and on the local-directory implementation of the same interface."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import orjson
import pytest

pytest.importorskip("boto3")
pytest.importorskip("moto")

from jsprof.store.errors import RawRemoved  # noqa: E402
from jsprof.store.objects import LocalObjects, open_objects  # noqa: E402
from jsprof.store.objstore import ObjectCompactor, ObjectSegmentStore  # noqa: E402
from jsprof.store.segment import HEADER_SIZE  # noqa: E402
from s3_util import aws_env, moto_server, new_bucket  # noqa: E402
from serve_util import FIXTURES  # noqa: E402

TRACE = (FIXTURES / "trace-basic.json").read_bytes()


@pytest.fixture(scope="module")
def s3() -> dict[str, str]:
    with moto_server() as env:
        yield env


@pytest.fixture(params=["local", "s3"])
def objects(request: pytest.FixtureRequest, tmp_path: Path, s3: dict[str, str],
            monkeypatch: pytest.MonkeyPatch) -> object:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    if request.param == "local":
        yield LocalObjects(tmp_path / "objects")
        return
    with aws_env(s3):
        yield open_objects(f"s3://{new_bucket(s3)}/store")


class Counted:
    """`inner`, counting the segment objects fetched."""

    def __init__(self, inner: object) -> None:
        self.inner, self.url = inner, inner.url
        self.segment_gets = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def get(self, key: str) -> object:
        if key.startswith("segments/"):
            self.segment_gets += 1
        return self.inner.get(key)


def _meta(i: int) -> dict:
    # one second apart: each flush's receivedAt range (in its name) is its own
    return {"app": "shop", "release": "r1", "receivedAt": time.time() * 1000 - 60e3 + i * 1e3,
            "sampleInterval": 10.0, "n": i}


def test_get_finds_an_upload_in_the_tail_and_once_compacted(
        objects: object, tmp_path: Path) -> None:
    """As on a local store: an upload is given back as stored while it waits in a segment
    object past the cursor and after the compactor has run; a compacted one costs one
    segment fetch (its name's receivedAt range), not a scan of the bucket; an id never
    stored is None; a compacted upload whose segment objects are gone (a lifecycle rule) is
    RawRemoved (410), not 404."""
    st = ObjectSegmentStore(objects.url, objects)
    for i in range(6):
        assert st.append(f"u{i}", _meta(i), TRACE) is True
    meta, trace = st.get("u2")
    assert trace == TRACE and meta["n"] == 2
    assert st.get("never") is None
    assert ObjectCompactor(objects, tmp_path / "compactor").run().uploads == 6
    counted = Counted(objects)
    st = ObjectSegmentStore(objects.url, counted)
    for i in (0, 4):
        counted.segment_gets = 0
        meta, trace = st.get(f"u{i}")
        assert trace == TRACE and meta["n"] == i
        assert counted.segment_gets == 1
    assert st.get("never") is None
    for key, _ in objects.list("segments/"):
        objects.delete(key)
    with pytest.raises(RawRemoved):
        st.get("u3")


def test_get_trace_on_a_collector_of_a_bucket(s3: dict[str, str], tmp_path: Path) -> None:
    """`GET /v1/traces/{id}` on a real `jsprof serve --store s3://...`: 200 with the trace
    before and after its compactor has run, 404 for an id never stored (was: 404 always)."""

    from jsprof.store.objstore import MANIFEST_KEY
    from serve_util import Collector

    bucket = new_bucket(s3)
    url = f"s3://{bucket}/fleet"
    c = Collector(url, "--app", "shop:k1", "--compact-every", "1", env=_cli_env(s3, tmp_path))
    try:
        assert c.post(TRACE, "app=shop&key=k1&id=first")[0] == 202
        status, body = c.get("first")
        assert status == 200, body
        doc = orjson.loads(body)
        assert doc["jsprof"]["meta"]["app"] == "shop"
        assert doc["frames"] == orjson.loads(TRACE)["frames"]
        with aws_env(s3):
            objects = open_objects(url)
            deadline = time.monotonic() + 300
            while (got := objects.get(MANIFEST_KEY)) is None or \
                    orjson.loads(got[0])["nextUk"] < 1:
                assert time.monotonic() < deadline, c.stderr_lines
                time.sleep(0.5)
        status, body2 = c.get("first")
        assert status == 200, body2
        assert orjson.loads(body2) == doc
        assert c.get("never")[0] == 404
    finally:
        c.stop()


def _ids(objects: object) -> list[str]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from jsprof.store.objstore import MANIFEST_KEY

    man = orjson.loads(objects.get(MANIFEST_KEY)[0])
    ids: list[str] = []
    for e in man["uploads"]:
        data = objects.get("tables/" + e["path"])[0]
        ids += pq.read_table(pa.BufferReader(data), columns=["id"]).column("id").to_pylist()
    return sorted(ids)


def _cursor(objects: object) -> dict[str, int]:
    from jsprof.store.objstore import MANIFEST_KEY

    return orjson.loads(orjson.loads(objects.get(MANIFEST_KEY)[0])["cursor"])


def test_raw_retention_deletes_compacted_segment_objects(
        objects: object, tmp_path: Path) -> None:
    """`--keep-raw` on a bucket: a segment object goes once the committed cursor has read
    it to its end and it is older than the age (0 here: at once), never before; its name
    leaves the cursor (which stays the size of what the bucket keeps); every upload stays
    counted once, and GET answers 410 for one whose raw record went. A longer age keeps
    them."""
    st = ObjectSegmentStore(objects.url, objects)
    for i in range(4):
        st.append(f"u{i}", _meta(i), TRACE)
    keep = ObjectCompactor(objects, tmp_path / "keep", keep_raw=3600.0)
    assert keep.run().uploads == 4
    st.append("u4", _meta(4), TRACE)
    assert keep.run().uploads == 1
    assert keep.raw_removed == 0 and len(objects.list("segments/")) == 5

    comp = ObjectCompactor(objects, tmp_path / "drop", keep_raw=0.0)
    st.append("u5", _meta(5), TRACE)
    assert comp.run().uploads == 1
    assert comp.raw_removed == 5  # compacted by the committed cursor: u0-u4's, not u5's
    left = [k for k, _ in objects.list("segments/")]
    assert len(left) == 1 and segment_holds(objects, left[0], "u5")
    st.append("u6", _meta(6), TRACE)
    assert comp.run().uploads == 1
    assert comp.raw_removed == 1
    # u5's (deleted in this run, after its listing: the next run trims it) and u6's
    assert len(_cursor(objects)) == 2
    assert _ids(objects) == [f"u{i}" for i in range(7)]
    with pytest.raises(RawRemoved):
        st.get("u1")
    assert st.get("u6")[1] == TRACE
    st.append("u7", _meta(7), TRACE)
    assert comp.run().uploads == 1
    assert len(_cursor(objects)) == 2 and len(objects.list("segments/")) == 1
    assert _ids(objects) == [f"u{i}" for i in range(8)]


def segment_holds(objects: object, key: str, upload_id: str) -> bool:
    return upload_id.encode() in objects.get(key)[0]


def _cli_env(s3: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """The environment of a `jsprof` command on the moto server: its AWS variables only
    (none of the caller's), its own cache folder."""
    import os

    base = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return {**base, **s3, "XDG_CACHE_HOME": str(tmp_path / "cache")}


def _jsprof(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    from serve_util import JSPROF

    return subprocess.run([str(JSPROF), *args], env=env, capture_output=True, timeout=600)


def test_backup_and_restore_of_a_bucket(s3: dict[str, str], tmp_path: Path) -> None:
    """`jsprof serve backup --store s3://... --to DIR` copies the store (segment objects,
    the committed tables); `--store DIR --to s3://new/prefix` restores it into an empty
    prefix, where `jsprof fleet` counts what the source counted when copied (compacted
    uploads and the tail), and the compactor goes on from the copied manifest, each
    upload once. Refused, one line: a destination not empty, a folder that is not a whole
    backup."""

    env = _cli_env(s3, tmp_path)
    src_url = f"s3://{new_bucket(s3)}/fleet"
    with aws_env(s3):
        src = open_objects(src_url)
        st = ObjectSegmentStore(src_url, src)
        for i in range(6):
            st.append(f"u{i}", _meta(i), TRACE)
        assert ObjectCompactor(src, tmp_path / "compactor").run().uploads == 6
        for i in range(6, 8):
            st.append(f"u{i}", _meta(i), TRACE)
    copy = tmp_path / "backup"
    out = _jsprof(env, "serve", "backup", "--store", src_url, "--to", str(copy))
    assert out.returncode == 0, out.stderr.decode()
    assert "8 segment objects" in out.stdout.decode()
    with aws_env(s3):
        st.append("u8", _meta(8), TRACE)  # after the backup: not in it
    dst_url = f"s3://{new_bucket(s3)}/restored"
    out = _jsprof(env, "serve", "backup", "--store", str(copy), "--to", dst_url)
    assert out.returncode == 0, out.stderr.decode()
    top = _jsprof(env, "fleet", "top", "--store", dst_url, "--app", "shop", "--json")
    assert top.returncode == 0, top.stderr.decode()
    assert orjson.loads(top.stdout)["traces"] == 8
    with aws_env(s3):
        dst = open_objects(dst_url)
        assert ObjectCompactor(dst, tmp_path / "restored-compactor").run().uploads == 2
        assert _ids(dst) == [f"u{i}" for i in range(8)]
        assert ObjectSegmentStore(dst_url, dst).get("u3")[1] == TRACE
    # refused: into a prefix that holds a store; from a folder that is no whole backup
    for args in (("--store", str(copy), "--to", dst_url),
                 ("--store", str(tmp_path / "cache"), "--to", f"s3://{new_bucket(s3)}/x")):
        out = _jsprof(env, "serve", "backup", *args)
        err = out.stderr.decode()
        assert out.returncode != 0 and "Traceback" not in err, err
        assert len([x for x in err.splitlines() if x.strip()]) == 1, err


def test_the_compactors_ids_are_kept_on_disk_not_in_memory(tmp_path: Path) -> None:
    """The ids of the compacted uploads (what keeps a client's retry once) are indexed in
    the compactor's mirror (SQLite), read from the uploads parts in batches: indexing
    200,000 ids leaves no Python object per id and peaks far below what a set of them
    holds (it was a set of every id the store ever compacted, read whole). Catching up
    with another compactor's commit reads only the rows from the last indexed `uk`."""
    import tracemalloc

    import pyarrow as pa
    import pyarrow.compute  # noqa: F401 - imported before the count: modules are not ids
    import pyarrow.parquet as pq

    from jsprof.store.objstore import CompactedIds

    tdir = tmp_path / "tables"
    tdir.mkdir()
    n = 200_000
    ids = [f"upload-{i:012d}-{i * 7919 % 1000003:07d}" for i in range(n)]
    pq.write_table(pa.table({"uk": pa.array(range(n), pa.int64()), "id": ids}),
                   tdir / "a.parquet", row_group_size=50_000)
    man = {"uploads": [{"path": "a.parquet"}], "nextUk": n}
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        index = CompactedIds(tmp_path / "ids.sqlite")
        index.catch_up(tdir, man)
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    as_set = set(ids)
    import sys

    set_bytes = sys.getsizeof(as_set) + sum(sys.getsizeof(i) for i in ids)
    assert current - base < set_bytes / 10, (current - base, set_bytes)
    assert peak - base < set_bytes / 4, (peak - base, set_bytes)
    assert len(index) == n and ids[123_456] in index and "never" not in index
    # another compactor committed 10 more; a run's own ids count once committed
    more = [f"later-{i}" for i in range(10)]
    pq.write_table(pa.table({"uk": pa.array(range(n, n + 10), pa.int64()), "id": more}),
                   tdir / "b.parquet")
    man = {"uploads": [{"path": "a.parquet"}, {"path": "b.parquet"}], "nextUk": n + 10}
    index.catch_up(tdir, man)
    assert len(index) == n + 10 and "later-3" in index
    index.add("mine")
    assert "mine" in index
    index.close()
    again = CompactedIds(tmp_path / "ids.sqlite")  # a run that did not commit: not kept
    assert "mine" not in again and "later-3" in again and again.upto == n + 10
    again.add("mine")
    again.commit(n + 11)
    again.close()
    assert "mine" in CompactedIds(tmp_path / "ids.sqlite")


class Clocked:
    """`inner` whose clock (the bucket's, which names segment objects) is `now`: a test's
    hours pass in a moment."""

    def __init__(self, inner: object, now: float) -> None:
        self.inner, self.url, self.now = inner, inner.url, now

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def clock(self) -> float:
        return self.now


def _old_segment(objects: object, upload_id: str, i: int) -> str:
    """A segment object as a jsprof before time-sorted names stored it (named by its
    writer's start)."""
    from jsprof.store import segment as seg

    at = time.time() * 1000
    rec = seg.make_record(upload_id, orjson.dumps(_meta(i)), TRACE, at, None)
    data = b"".join([*rec.parts(0), seg.encode_trailer(1, (at, at))])
    key = (f"segments/{int(time.time()) - 86400:010d}-oldhost-77-abcdef-{i:06d}"
           f"-t{int(at)}-{int(at) + 1}-1.seg")
    assert objects.put_new(key, data)
    return key


def test_a_compaction_lists_what_is_new_not_the_buckets_history(
        s3: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With raw segments kept forever, a compaction run (and a query's refresh) lists the
    segment objects of the last minutes and those not read yet, not every one the bucket
    keeps: their names begin with the put's time by the bucket's clock and the listing
    starts (StartAfter) LIST_MARGIN_S before the newest the committed cursor has read;
    the cursor drops the names below, so the manifest stays as small. Objects counted as
    moto's ListObjectsV2 answers them. Segment objects of an older jsprof (named by their
    writer's start, one of them written after the upgrade began) are listed in full and
    compacted once. Was: every run listed every segment object (48 and more here)."""
    from jsprof.store import objstore

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with aws_env(s3):
        objects = open_objects(f"s3://{new_bucket(s3)}/store")
    listed = [0]
    real = objects.client.list_objects_v2

    def counted(**kw: object) -> dict:
        page = real(**kw)
        if str(kw["Prefix"]).startswith("store/segments/"):
            listed[0] += len(page.get("Contents", []))
        return page

    objects.client.list_objects_v2 = counted
    _old_segment(objects, "old0", 0)
    _old_segment(objects, "old1", 1)
    clocked = Clocked(objects, time.time())
    st = ObjectSegmentStore(objects.url, clocked)
    comp = ObjectCompactor(objects, tmp_path / "compactor")  # keep-raw forever
    per_run, ids = [], ["old0", "old1"]
    step = 120.0  # between runs, by the bucket's clock: 300 s of margin spans 2.5 of them
    for r in range(16):
        clocked.now += step
        for i in range(3):
            ids.append(f"u{r}-{i}")
            st.append(ids[-1], _meta(i), TRACE)
        if r == 5:  # a collector of the older jsprof still running
            _old_segment(objects, "old2", 2)
            ids.append("old2")
        listed[0] = 0
        assert comp.run().uploads == 3 + (r == 0) * 2 + (r == 5)
        per_run.append(listed[0])
    # this run's 3, the 3 runs within the margin's 300 s of the newest read, the 3 old
    # ones and the 8 new ones their growing pages (1, then 2 x 1 + 8 keys) run past
    assert per_run[-8:] == [3 + 9 + 3 + 8] * 8, per_run
    assert len(objects.list("segments/")) == 3 + 16 * 3
    assert len(_cursor(objects)) == 12 + 3  # what the last run listed
    assert _ids(objects) == sorted(ids)
    listed[0] = 0
    with aws_env(s3):
        objstore.query_mirror(objects.url, objects)
    assert listed[0] == 9 + 3 + 8  # no new one: those within the margin
    assert objstore.object_health(objects)["pending"] == 0


def test_raw_retention_deletes_what_fell_below_the_listing(tmp_path: Path) -> None:
    """`--keep-raw AGE` still deletes compacted segment objects the listing no longer
    reaches (below the cursor's floor), once they are AGE old by the store's clock, and
    only those. On a local directory, whose files' times the test sets as a bucket's
    LastModified would be (moto's are the puts' own)."""
    import os

    objects = LocalObjects(tmp_path / "objects")
    clocked = Clocked(objects, objects.clock() - 3 * 3600)  # names from 3 h ago on
    st = ObjectSegmentStore(objects.url, clocked)
    comp = ObjectCompactor(objects, tmp_path / "compactor")
    for r in range(6):
        clocked.now += 600
        st.append(f"u{r}", _meta(r), TRACE)
        assert comp.run().uploads == 1
    assert len(_cursor(objects)) == 2  # the last two runs' listing: the rest fell below
    for key, _ in objects.list("segments/"):
        t = int(key[len("segments/t"):][:13]) / 1000
        os.utime(objects.root / key, (t, t))
    drop = ObjectCompactor(objects, tmp_path / "drop", keep_raw=2 * 3600 + 25 * 60)
    st.append("u6", _meta(6), TRACE)
    assert drop.run().uploads == 1
    # 2 h 50, 2 h 40 and 2 h 30 old went; 2 h 20 and 2 h 10 (below the floor too) stay
    left = sorted(k for k, _ in objects.list("segments/"))
    assert drop.raw_removed == 3 and len(left) == 4, left
    assert [int(k[len("segments/t"):][:13]) for k in left[:2]] == [
        int((clocked.now - m * 60) * 1000) for m in (20, 10)]  # u5 is 2 h old
    assert _ids(objects) == [f"u{i}" for i in range(7)]


def test_a_segment_is_named_by_the_buckets_clock_and_a_slow_put_is_not_acknowledged(
        s3: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A collector whose own clock is an hour ahead names its segment objects by the
    bucket's (the Date of its replies), so names from many machines sort by one clock;
    a put that returned later than PUT_MAX_S after its name's time is answered 503 (a
    reader may have listed past it), the client retries."""
    import types

    from jsprof.store import objstore
    from jsprof.store import s3 as s3mod
    from jsprof.store.errors import StoreUnavailable

    ahead = types.SimpleNamespace(time=lambda: time.time() + 3600)
    with aws_env(s3):
        objects = open_objects(f"s3://{new_bucket(s3)}/store")
    monkeypatch.setattr(s3mod, "time", ahead)
    st = ObjectSegmentStore(objects.url, objects)
    assert st.append("u0", _meta(0), TRACE) is True
    [(key, _)] = objects.list("segments/")
    named = objstore.segment_time(key[len("segments/"):]) / 1000
    assert abs(named - time.time()) < 10, (named, time.time())
    monkeypatch.setattr(objstore, "PUT_MAX_S", -1.0)
    with pytest.raises(StoreUnavailable, match="not acknowledged"):
        st.append("u1", _meta(1), TRACE)


def _bucket_state(s3: dict[str, str], bucket: str) -> list[tuple]:
    from s3_util import client

    pages = client(s3).get_paginator("list_objects_v2").paginate(Bucket=bucket)
    return sorted((o["Key"], o["ETag"], o["LastModified"], o["Size"])
                  for p in pages for o in p.get("Contents", []))


def test_check_of_a_bucket_reports_a_damaged_segment_object_and_writes_nothing(
        s3: dict[str, str], tmp_path: Path) -> None:
    """`jsprof serve check --store s3://...` (was refused: not supported on object storage)
    reads every segment object's records: a sound store exits 0 and says what the
    compactor has not reached; a segment object with a damaged record is one line naming
    it, exit 1, one line on stderr. The bucket is the same before and after (keys, etags,
    times): check writes nothing."""

    env = _cli_env(s3, tmp_path)
    bucket = new_bucket(s3)
    url = f"s3://{bucket}/fleet"
    with aws_env(s3):
        objects = open_objects(url)
        st = ObjectSegmentStore(url, objects)
        for i in range(4):
            st.append(f"u{i}", _meta(i), TRACE)
        assert ObjectCompactor(objects, tmp_path / "compactor").run().uploads == 4
        for i in range(4, 6):
            st.append(f"u{i}", _meta(i), TRACE)
    before = _bucket_state(s3, bucket)
    out = _jsprof(env, "serve", "check", "--store", url)
    text = out.stdout.decode()
    assert out.returncode == 0, (text, out.stderr.decode())
    assert "6 segment objects, 6 uploads" in text
    assert "compactor: 2 uploads not yet compacted" in text
    assert "per compacted upload (4 uploads in the tables)" in text
    assert _bucket_state(s3, bucket) == before
    with aws_env(s3):
        key = sorted(k for k, _ in objects.list("segments/"))[1]
        data = bytearray(objects.get(key)[0])
        # the upload it holds (one a segment here; which one sorts second is the names'
        # put times': u2 did once, in the CI of 630538a)
        held = bytes(data[HEADER_SIZE:HEADER_SIZE + 2]).decode()  # the record's id, at 0
        assert held in {f"u{i}" for i in range(6)}, held
        data[len(data) // 2] ^= 0xFF  # within its trace
        objects.put(key, bytes(data))
    before = _bucket_state(s3, bucket)
    out = _jsprof(env, "serve", "check", "--store", url)
    text, err = out.stdout.decode(), out.stderr.decode()
    assert out.returncode == 1, (text, err)
    problems = [x for x in text.splitlines() if x.startswith("segments/")]
    assert len(problems) == 1 and problems[0].startswith(key + ": offset "), text
    assert f"'{held}'" in problems[0], (held, problems)
    assert len([x for x in err.splitlines() if x.strip()]) == 1 and "Traceback" not in err
    assert _bucket_state(s3, bucket) == before


def _segment(objects: object, at_ms: int, records: list[tuple[str, dict]]) -> str:
    """A segment object of this jsprof's naming, put at `at_ms` (bucket's clock), holding
    `records` (several uploads: a flush that took a burst)."""
    import math

    from jsprof.store import segment as seg

    parts: list[bytes] = []
    lo, hi = seg.NO_RANGE
    for i, (uid, meta) in enumerate(records):
        at = meta["receivedAt"]
        parts += seg.make_record(uid, orjson.dumps(meta), TRACE, at, None).parts(i)
        lo, hi = min(lo, at), max(hi, at)
    parts.append(seg.encode_trailer(len(records), (lo, hi)))
    key = (f"segments/t{at_ms:013d}-testhost-1-abcdef-{at_ms % 1000000:06d}-t{math.floor(lo)}-"
           f"{math.ceil(hi)}-{len(records)}.seg")
    assert objects.put_new(key, b"".join(parts))
    return key


def test_prune_of_a_bucket_removes_what_it_should_and_the_counts_stay_right(
        s3: dict[str, str], tmp_path: Path) -> None:
    """`jsprof serve prune --store s3://... --older-than 5d [--app A]` (was refused): the
    uploads received before the cut leave the tables and the segment objects (one all
    old: deleted; one that also holds what stays: written anew without them), under the
    lease; `fleet top` counts what is left, GET of a pruned one is 404, the next
    compaction reads nothing again, `serve check` is sound. While a collector's compactor
    holds the lease, prune writes the mark (queries leave the uploads out at once) and that
    compactor's next run removes them (`Pruner`)."""

    from jsprof.store import objstore
    from jsprof.store.objprune import Pruner
    from jsprof.store.objstore import Lease

    env = _cli_env(s3, tmp_path)
    url = f"s3://{new_bucket(s3)}/fleet"
    now = time.time() * 1000
    old = now - 10 * 86400e3

    def meta(app: str, at: float) -> dict:
        return {"app": app, "release": "r1", "receivedAt": at, "sampleInterval": 10.0}

    with aws_env(s3):
        objects = open_objects(url)
        gone = _segment(objects, int(old) + 5000, [("s1", meta("shop", old)),
                                                   ("s2", meta("shop", old + 1))])
        mixed = _segment(objects, int(old) + 6000, [("s3", meta("shop", old + 2)),
                                                    ("a1", meta("admin", old + 3))])
        _segment(objects, int(now - 86400e3), [("s4", meta("shop", now - 86400e3))])
        st = ObjectSegmentStore(url, objects)
        st.append("s5", meta("shop", now), TRACE)
        assert ObjectCompactor(objects, tmp_path / "first").run().uploads == 6

    def top(app: str) -> int:
        out = _jsprof(env, "fleet", "top", "--store", url, "--app", app, "--json")
        assert out.returncode == 0, out.stderr.decode()
        return orjson.loads(out.stdout)["traces"]

    assert (top("shop"), top("admin")) == (5, 1)
    out = _jsprof(env, "serve", "prune", "--store", url, "--older-than", "5d", "--app", "shop")
    text = out.stdout.decode()
    assert out.returncode == 0, out.stderr.decode()
    assert "removed 3 uploads from the tables and 3 raw records" in text, text
    assert (top("shop"), top("admin")) == (2, 1)
    with aws_env(s3):
        keys = {k for k, _ in objects.list("segments/")}
        assert gone not in keys and mixed not in keys and len(keys) == 3
        assert _ids(objects) == ["a1", "s4", "s5"]
        assert st.get("s1") is None and st.get("s3") is None
        assert st.get("a1")[1] == TRACE  # from the segment object written anew
        assert ObjectCompactor(objects, tmp_path / "first").run().uploads == 0
        assert ObjectCompactor(objects, tmp_path / "other").run().uploads == 0
        health = objstore.object_health(objects)
        assert (health["pending"], health["compacted"]) == (0, 3)
    out = _jsprof(env, "serve", "check", "--store", url)
    assert out.returncode == 0, out.stdout.decode() + out.stderr.decode()
    assert "3 segment objects, 3 uploads" in out.stdout.decode()
    # a collector's compactor holds the lease: the mark now, the cut at its next run
    with aws_env(s3):
        holder = Lease(objects)
        assert holder.acquire()
    out = _jsprof(env, "serve", "prune", "--store", url, "--older-than", "5d")
    assert out.returncode == 0, out.stderr.decode()
    assert "marked" in out.stdout.decode()
    out = _jsprof(env, "fleet", "top", "--store", url, "--app", "admin", "--json")
    assert "no uploads of app 'admin'" in out.stderr.decode()  # left out at once
    with aws_env(s3):
        assert _ids(objects) == ["a1", "s4", "s5"]
        comp = ObjectCompactor(objects, tmp_path / "holder")
        assert comp.run(holder.acquire).uploads == 0
        cut = Pruner(comp).run(holder.acquire)
        assert cut.tables_removed == 1 and cut.removed == 1
        assert Pruner(comp).run(holder.acquire).removed == 0  # done already
        assert _ids(objects) == ["s4", "s5"]
        assert len(objects.list("segments/")) == 2


def test_the_compactor_process_cuts_by_retention(tmp_path: Path) -> None:
    """`jsprof serve --store s3://... --retention AGE` hands AGE to its compactor process
    (`python -m jsprof.store.objcompactor URL --retention SECONDS`), which marks the cut and
    makes it after its run: an upload older than AGE leaves the tables and its segment
    object goes; a newer one stays. On a local directory (the same code)."""
    import os
    import sys

    from jsprof.store.objprune import PRUNED_KEY

    objects = LocalObjects(tmp_path / "objects")
    now = time.time() * 1000
    old = now - 10 * 86400e3
    _segment(objects, int(old) + 1000, [("old", dict(_meta(0), receivedAt=old))])
    ObjectSegmentStore(objects.url, objects).append("new", _meta(1), TRACE)
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    out = subprocess.run([sys.executable, "-m", "jsprof.store.objcompactor", objects.url,
                          "--once", "--retention", str(5 * 86400)], env=env,
                         capture_output=True, timeout=600)
    assert out.returncode == 0, out.stderr.decode()
    assert "pruned 1 uploads from the tables and 1 raw records" in out.stderr.decode()
    assert _ids(objects) == ["new"]
    assert len(objects.list("segments/")) == 1
    assert orjson.loads(objects.get(PRUNED_KEY)[0])["*"] > old


def test_the_compactors_run_report_and_lag_on_a_bucket(
        s3: dict[str, str], tmp_path: Path) -> None:
    """The compactor holding the lease writes its run report to the bucket
    (`compactor.json`, as a local store's) after each run; `/metrics` and `/v1/status`
    give its runs, failures and the lag in seconds (the oldest uncompacted upload's age,
    from the receivedAt range in its segment object's name), and `jsprof serve check`
    prints them, exit 1 once the compactor is failing (3 runs in a row). Was: no report,
    lag None."""
    import sys

    from prometheus_client.core import Metric  # noqa: F401 - the metrics' own types

    from jsprof.serve import metrics
    from jsprof.store import objstore

    env = _cli_env(s3, tmp_path)
    url = f"s3://{new_bucket(s3)}/fleet"

    def scrape(objects: object) -> dict[str, float]:
        return {f.samples[0].name: f.samples[0].value
                for f in metrics._object_store_metrics(objstore.object_health(objects))
                if f.samples and not f.samples[0].labels}

    def once(cache: str = "cache") -> None:
        subprocess.run([sys.executable, "-m", "jsprof.store.objcompactor", url, "--once"],
                       env={**env, "XDG_CACHE_HOME": str(tmp_path / cache)},
                       capture_output=True, timeout=600)

    with aws_env(s3):
        objects = open_objects(url)
        st = ObjectSegmentStore(url, objects)
        st.append("u0", _meta(0), TRACE)  # received 60 s ago
        st.append("u1", _meta(1), TRACE)
        got = scrape(objects)
        assert got["jsprof_compactor_pending_uploads"] == 2
        assert 55 <= got["jsprof_compactor_lag_seconds"] < 600
        assert got["jsprof_compactor_runs_total"] == 0
    once()
    with aws_env(s3):
        got = scrape(objects)
        assert got["jsprof_compactor_lag_seconds"] == 0
        assert got["jsprof_compactor_runs_total"] == 1
        assert got["jsprof_compactor_last_success_timestamp_seconds"] > time.time() - 600
        status = metrics.status(st, True)["compactor"]
        assert status["lagSeconds"] == 0 and status["failing"] is False
        assert status["lastSuccessAt"] is not None
        # the folders' figures: the process's walk of the bucket (`BucketUse`), in its report
        folders = objstore.object_health(objects)["folders"]
        assert folders["segments"]["objects"] == 2 and folders["tables"]["objects"] > 2
        assert metrics.status(st, True)["store"]["files"] > 4
    out = _jsprof(env, "serve", "check", "--store", url)
    text = out.stdout.decode()
    assert out.returncode == 0, text + out.stderr.decode()
    assert "compactor: caught up" in text and "ok; 0 failed runs of 1" in text, text
    with aws_env(s3):  # a part the manifest lists goes: every run fails
        part = next(k for k, _ in objects.list("tables/") if k.endswith(".parquet"))
        objects.delete(part)
        st.append("u2", _meta(2), TRACE)
    for i in range(3):
        once(f"machine{i}")  # a mirror without the part: each run fails to pull it
    with aws_env(s3):
        got = scrape(objects)
        assert got["jsprof_compactor_runs_total"] == 4
        assert got["jsprof_compactor_failures_total"] == 3
        assert got["jsprof_compactor_consecutive_failures"] == 3
        assert got["jsprof_compactor_lag_seconds"] >= 55
        assert metrics.status(st, True)["compactor"]["failing"] is True
    out = _jsprof(env, "serve", "check", "--store", url)
    text = out.stdout.decode()
    assert out.returncode == 1
    assert "compactor: failing, 3 runs in a row" in text and part in text, text


def test_a_damaged_manifest_in_the_bucket_is_reported_not_a_traceback(
        s3: dict[str, str], tmp_path: Path) -> None:
    """A committed manifest that does not parse (a torn hand edit, a bad restore) made
    `serve check` and the collector's `/metrics`, `/v1/status` and `/readyz` (all
    `ObjectSegmentStore.health`) fail with a JSONDecodeError traceback. Now check names it
    as damage (one line, exit 1, nothing written) and health counts no tables and says why,
    as a local store's unreadable manifest does."""

    env = _cli_env(s3, tmp_path)
    bucket = new_bucket(s3)
    url = f"s3://{bucket}/fleet"
    with aws_env(s3):
        objects = open_objects(url)
        st = ObjectSegmentStore(url, objects)
        for i in range(2):
            st.append(f"u{i}", _meta(i), TRACE)
        assert ObjectCompactor(objects, tmp_path / "compactor").run().uploads == 2
        for bad in (b'{"formatVersion": 9, "uploads": [', b"[1, 2]"):
            objects.put("tables/_manifest.json", bad)
            h = st.health()
            assert h["compacted"] == 0 and h["parts"] == 0
            assert h["manifestProblem"].startswith("tables/_manifest.json: not a readable")
    before = _bucket_state(s3, bucket)
    out = _jsprof(env, "serve", "check", "--store", url)
    text, err = out.stdout.decode(), out.stderr.decode()
    assert out.returncode == 1, (text, err)
    assert "Traceback" not in err and "Traceback" not in text
    problems = [x for x in text.splitlines() if x.startswith("tables/_manifest.json")]
    assert len(problems) == 1 and "not a readable compaction manifest" in problems[0], text
    assert "2 segment objects, 2 uploads" in text
    assert _bucket_state(s3, bucket) == before


def test_a_scrape_lists_what_is_new_not_the_buckets_history(
        s3: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`/metrics`, `/v1/status` and `/readyz` (`object_health`) listed the whole bucket on
    every scrape (its bytes and objects per folder): a bucket keeping a week of raw
    segments costs a thousand ListObjectsV2 pages a scrape. Now a scrape lists what a
    compaction run lists (the segment objects of the last minutes and those not read yet)
    and takes the folders' figures from the compactor's report, which walks the bucket a
    step a run (`BucketUse`, here 500 keys a step). Counted as moto answers
    ListObjectsV2: the same requests and keys with 8 and with 1,100 segment objects
    kept, and the figures are a listing's of the whole bucket."""
    from jsprof.serve import metrics
    from jsprof.store import objstore

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    seen = {}
    for n in (8, 1100):
        with aws_env(s3):
            objects = open_objects(f"s3://{new_bucket(s3)}/store")
        listed = [0, 0]  # requests, keys
        real = objects.client.list_objects_v2

        def counted(real: object = real, listed: list = listed, **kw: object) -> dict:
            page = real(**kw)
            listed[0] += 1
            listed[1] += len(page.get("Contents", []))
            return page

        objects.client.list_objects_v2 = counted
        now = int(time.time() * 1000)
        for i in range(n):  # one a minute until a minute ago, by the bucket's clock
            at = now - (n - i) * 60_000
            _segment(objects, at, [(f"u{i}", dict(_meta(i), receivedAt=at - 500.0))])
        assert ObjectCompactor(objects, tmp_path / f"compactor-{n}", batch=500
                               ).run().uploads == n
        walk, use, steps = objstore.BucketUse(objects, step=500), None, 0
        while use is None:
            listed[0] = 0
            use = walk.walk()
            assert listed[0] == 1  # one page a step
            steps += 1
        assert steps == 1 + (n + 10) // 500
        objstore.RunReport(objects).record(None, use=use)
        listed[:] = [0, 0]
        h = objstore.object_health(objects)
        seen[n] = tuple(listed)
        assert h["pending"] == 0 and h["compacted"] == n
        every: dict[str, list[int]] = {}
        for key, size in objects.list(""):
            f = every.setdefault(key.split("/", 1)[0], [0, 0])
            f[0] += size
            f[1] += 1
        for folder in ("segments", "tables"):
            assert [h["folders"][folder]["bytes"], h["folders"][folder]["objects"]] == \
                every[folder], folder
        assert h["folders"]["segments"]["objects"] == n
        assert h["foldersAt"] == pytest.approx(time.time(), abs=600)
        st = ObjectSegmentStore(objects.url, objects)
        for i in range(2):
            st.append(f"new{i}", _meta(i), TRACE)
        listed[:] = [0, 0]
        assert objstore.object_health(objects)["pending"] == 2
        assert listed[0] == seen[n][0] and listed[1] == seen[n][1] + 2
        text = {f.name: f for f in metrics._object_store_metrics(h)}
        assert text["jsprof_store_walked_timestamp_seconds"].samples[0].value == h["foldersAt"]
    # the segment objects within LIST_MARGIN_S of the newest read (6 of one a minute)
    # and the one-key look for an older jsprof's names: whatever the bucket keeps
    assert seen[8] == seen[1100] == (2, 7), seen


class Listed:
    """`inner`, counting the segment object keys its listings returned."""

    def __init__(self, inner: object) -> None:
        self.inner, self.url = inner, inner.url
        self.segment_keys = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def list(self, prefix: str, *a: object, **kw: object) -> list:
        got = self.inner.list(prefix, *a, **kw)
        self.segment_keys += sum(1 for k, _ in got if k.startswith("segments/"))
        return got


def test_get_of_a_compacted_upload_lists_the_hours_around_it(
        objects: object, tmp_path: Path) -> None:
    """`GET /v1/traces/{id}` of a compacted upload listed every segment object the bucket
    keeps (41 here) to pick the ones whose receivedAt range holds the upload's. Now it
    lists those put within GET_WINDOW_S (an hour) of that time: names sort by the put's
    time. An upload whose collector's clock was hours off the bucket's is still found
    (then by its uploads part's range of segment names)."""
    now = int(time.time() * 1000)
    for i in range(40):  # one an hour
        at = now - (40 - i) * 3600_000
        _segment(objects, at, [(f"h{i}", dict(_meta(i), receivedAt=at - 500.0))])
    skewed = now - 10 * 3600_000 + 1800_000  # its collector's clock 3 hours behind
    _segment(objects, skewed, [("late", dict(_meta(99), receivedAt=skewed - 3 * 3600e3))])
    assert ObjectCompactor(objects, tmp_path / "compactor", batch=500).run().uploads == 41
    listed = Listed(objects)
    st = ObjectSegmentStore(objects.url, listed)
    meta, trace = st.get("h20")
    assert meta["n"] == 20 and trace == TRACE
    # The hour's segment objects: h20's, and h19's (put an hour before) when the part
    # holding h20 holds it too: the lookup lists within its part's range, and the
    # compactor's parts split by UTC day (a CI run at 20:07 UTC, h20 the first of its day,
    # counted 1). Either way not the bucket's 41.
    assert 1 <= listed.segment_keys <= 2, listed.segment_keys
    meta, trace = st.get("late")
    assert meta["n"] == 99 and trace == TRACE


def test_get_by_id_lists_the_same_whatever_history_the_bucket_keeps(
        s3: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`GET /v1/traces/{id}` of a compacted upload whose segment object is not within an
    hour of its receivedAt (its collector's clock hours behind the bucket's) or is gone
    (raw retention: 410) listed every segment object the bucket keeps: its cost grew with
    the history. Now the uploads part holding it names the first and last segment
    objects it came from, and the lookup lists that range only. Buckets of 6 and of 12
    days of segment objects (three a day, written directly, compacted a day at a time),
    counted as moto answers ListObjectsV2: the same requests and keys for an id of the
    first day, a skewed one, one whose raw record is gone and one never stored. (Any
    listing that grows with the history differs between the two: the whole bucket's 18
    against 36 keys. 12 days, not 24 as before, halve the larger bucket's compactions;
    both stay within one page of ListObjectsV2, as 24 days' 72 keys did.)"""
    from jsprof.store import objstore

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    seen = {}
    for days in (6, 12):
        with aws_env(s3):
            objects = open_objects(f"s3://{new_bucket(s3)}/store")
        comp = ObjectCompactor(objects, tmp_path / f"compactor-{days}", batch=500)
        now = int(time.time() * 1000) - 3600_000
        gone = ""
        for d in range(days):
            for k in range(3):  # eight hours apart
                at = now - (days - d) * 86400_000 + k * 8 * 3600_000
                received = at - (3 * 3600e3 if (d, k) == (1, 1) else 500.0)  # 3 h behind
                key = _segment(objects, at, [(f"d{d}-{k}", dict(_meta(k), receivedAt=received,
                                                                 n=d * 10 + k))])
                if (d, k) == (1, 2):
                    gone = key
            assert comp.run().uploads == 3
        objects.delete(gone)  # raw retention, a lifecycle rule
        listed = [0, 0]  # requests, keys
        real = objects.client.list_objects_v2

        def counted(real: object = real, listed: list = listed, **kw: object) -> dict:
            page = real(**kw)
            if str(kw["Prefix"]).startswith("store/segments/"):
                listed[0] += 1
                listed[1] += len(page.get("Contents", []))
            return page

        objects.client.list_objects_v2 = counted
        st = ObjectSegmentStore(objects.url, objects)
        costs = []
        for uid, n in (("d0-0", 0), ("d1-1", 11), ("d1-2", None), ("never", None)):
            listed[:] = [0, 0]
            with aws_env(s3):
                if uid == "d1-2":
                    with pytest.raises(RawRemoved):
                        st.get(uid)
                elif n is None:
                    assert st.get(uid) is None
                else:
                    meta, trace = st.get(uid)
                    assert meta["n"] == n and trace == TRACE
            costs.append(tuple(listed))
        seen[days] = costs
        assert objstore.object_health(objects)["pending"] == 0
    assert seen[6] == seen[12], seen


def test_a_pruned_upload_sent_again_is_stored_again(objects: object, tmp_path: Path) -> None:
    """A prune left the pruned uploads' ids in the compactor's index of compacted ids
    (`ids.sqlite` of its mirror): the same id sent again (acknowledged, 202) was then
    dropped by that machine's compactor as a retry of an upload the tables no longer held,
    and counted nowhere, while a compactor on another machine (its index caught up from
    the tables) would have stored it. Now the prune takes those ids out of the index: the
    upload sent again is stored again, whichever machine compacts, as on a local store."""
    from jsprof.store.objprune import prune_objects

    now = time.time() * 1000
    old = now - 10 * 86400e3
    _segment(objects, int(old) + 5000, [("p1", dict(_meta(1), receivedAt=old)),
                                         ("p2", dict(_meta(2), receivedAt=old + 1))])
    _segment(objects, int(now - 3600e3), [("k1", dict(_meta(3), receivedAt=now - 3600e3))])
    comp = ObjectCompactor(objects, tmp_path / "a")
    assert comp.run().uploads == 3
    cut = prune_objects(comp, now - 5 * 86400e3)
    assert cut.tables_removed == 2
    assert _ids(objects) == ["k1"]
    st = ObjectSegmentStore(objects.url, objects)
    assert st.append("p1", _meta(4), TRACE)  # sent again, now
    assert comp.run().uploads == 1
    assert _ids(objects) == ["k1", "p1"]
    assert ObjectCompactor(objects, tmp_path / "b").run().uploads == 0  # each once
    meta, trace = st.get("p1")
    assert meta["n"] == 4 and trace == TRACE


def test_a_prune_on_another_machine_empties_this_ones_index_too(
        objects: object, tmp_path: Path) -> None:
    """Machine B indexed the compacted ids (p1 among them) before machine A pruned p1: B's
    index (`ids.sqlite`, caught up by `uk` only, and a prune adds none) still held p1, so
    p1 sent again and compacted by B was dropped as a retry, and counted nowhere. The
    manifest counts prunes; an index that saw another count is made anew from the tables."""
    from jsprof.store.objprune import prune_objects

    now = time.time() * 1000
    old = now - 10 * 86400e3
    _segment(objects, int(old) + 5000, [("p1", dict(_meta(1), receivedAt=old))])
    _segment(objects, int(now - 3600e3), [("k1", dict(_meta(3), receivedAt=now - 3600e3))])
    a = ObjectCompactor(objects, tmp_path / "a")
    assert a.run().uploads == 2
    b = ObjectCompactor(objects, tmp_path / "b")
    assert b.run().uploads == 0  # b's index now holds p1 and k1
    assert prune_objects(a, now - 5 * 86400e3).tables_removed == 1
    assert _ids(objects) == ["k1"]
    st = ObjectSegmentStore(objects.url, objects)
    assert st.append("p1", _meta(4), TRACE)  # sent again, now
    assert b.run().uploads == 1
    assert _ids(objects) == ["k1", "p1"]
    assert a.run().uploads == 0  # each once
    assert ObjectCompactor(objects, tmp_path / "c").run().uploads == 0
    meta, trace = st.get("p1")
    assert meta["n"] == 4 and trace == TRACE


def test_get_by_id_finds_an_old_named_segment_a_prune_wrote_anew(
        objects: object, tmp_path: Path) -> None:
    """An uploads part compacted from segment objects of an older jsprof only (names by
    their writer's start: `segments` both old names) whose segment object a prune then
    wrote anew without its pruned records: the copy is named by time (`t<writer start>-
    pruned_...`), among the time-sorted names. GET of an upload it kept listed only the
    older jsprof's names for such a part, and answered 410 (RawRemoved) for a record the
    bucket holds."""
    from jsprof.store import segment as seg
    from jsprof.store.objprune import prune_objects

    now = time.time() * 1000
    old = now - 10 * 86400e3
    parts: list[bytes] = []
    for i, (uid, at) in enumerate((("p1", old), ("k1", now - 2 * 86400e3))):
        parts += seg.make_record(uid, orjson.dumps(dict(_meta(i), receivedAt=at)), TRACE,
                                 at, None).parts(i)
    parts.append(seg.encode_trailer(2, (old, now - 2 * 86400e3)))
    key = (f"segments/{int(old / 1000):010d}-oldhost-77-abcdef-000000"
           f"-t{int(old)}-{int(now - 2 * 86400e3) + 1}-2.seg")
    assert objects.put_new(key, b"".join(parts))
    comp = ObjectCompactor(objects, tmp_path / "a")
    assert comp.run().uploads == 2
    # a new collector's segment object after it (the listing's floor is past the old name)
    _segment(objects, int(now - 3600e3), [("k2", dict(_meta(3), receivedAt=now - 3600e3))])
    assert comp.run().uploads == 1
    cut = prune_objects(comp, now - 5 * 86400e3)
    assert (cut.tables_removed, cut.rewritten) == (1, 1)
    keys = [k for k, _ in objects.list("segments/")]
    assert key not in keys and any("-pruned_1-" in k for k in keys), keys
    st = ObjectSegmentStore(objects.url, objects)
    assert st.get("p1") is None
    meta, trace = st.get("k1")
    assert meta["n"] == 1 and trace == TRACE


def test_get_by_id_finds_a_pruned_copy_of_an_old_name_written_after_the_part_s_last_new(
        objects: object, tmp_path: Path) -> None:
    """One uploads part from an older jsprof's segment object (its writer started 6 days
    ago) and a new collector's put before that start (7 days ago): by name the new one is
    the part's last. A prune's copy of the old object is named by its writer's start,
    after that last put: GET of an upload the copy kept listed only up to the new name's
    time and answered 410 (RawRemoved) for a record the bucket holds."""
    from jsprof.store import segment as seg
    from jsprof.store.objprune import prune_objects

    now = time.time() * 1000
    old, kept_at = now - 10 * 86400e3, now - 2 * 86400e3
    parts: list[bytes] = []
    for i, (uid, at) in enumerate((("p1", old), ("k1", kept_at))):
        parts += seg.make_record(uid, orjson.dumps(dict(_meta(i), receivedAt=at)), TRACE,
                                 at, None).parts(i)
    parts.append(seg.encode_trailer(2, (old, kept_at)))
    key = (f"segments/{int((now - 6 * 86400e3) / 1000):010d}-oldhost-77-abcdef-000000"
           f"-t{int(old)}-{int(kept_at) + 1}-2.seg")
    assert objects.put_new(key, b"".join(parts))
    _segment(objects, int(now - 7 * 86400e3),
             [("k2", dict(_meta(3), receivedAt=kept_at + 1))])
    comp = ObjectCompactor(objects, tmp_path / "a")
    assert comp.run().uploads == 3
    # a later put, read in another part: the listing's floor passes the old writer's start
    _segment(objects, int(now - 3600e3), [("k3", dict(_meta(4), receivedAt=now - 3600e3))])
    assert comp.run().uploads == 1
    cut = prune_objects(comp, now - 5 * 86400e3)
    assert (cut.tables_removed, cut.rewritten) == (1, 1)
    keys = [k for k, _ in objects.list("segments/")]
    assert key not in keys and any("-pruned_1-" in k for k in keys), keys
    st = ObjectSegmentStore(objects.url, objects)
    assert st.get("p1") is None
    meta, trace = st.get("k1")
    assert meta["n"] == 1 and trace == TRACE
    assert st.get("k2")[1] == TRACE and st.get("k3")[1] == TRACE


def test_get_of_an_unknown_id_reads_no_parts_ids(
        objects: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`GET /v1/traces/{id}` of an id the bucket never stored read the id column of every
    uploads part in the query mirror (min/max statistics say nothing of random ids): its
    cost grew with the store's history. Each uploads part now has a Bloom filter on `id`
    (in its footer; written at compaction, merge and a prune's rewrite; read once): an
    unknown id opens no part's ids, a compacted one only its own part's. Counted as the
    reads of the id column, on real parts of real compactor runs: nine runs (eight of
    them merged into one part), then a prune that rewrites that part."""
    import pyarrow.parquet as pq

    from jsprof.store.objprune import prune_objects
    from jsprof.store.objstore import MANIFEST_KEY
    from jsprof.store.tables.merge import FANOUT

    comp = ObjectCompactor(objects, tmp_path / "compactor")
    st = ObjectSegmentStore(objects.url, objects)
    for run in range(FANOUT + 1):
        for i in range(2):
            assert st.append(f"r{run}-u{i}", _meta(run * 2 + i), TRACE)
        assert comp.run().uploads == 2
    parts = orjson.loads(objects.get(MANIFEST_KEY)[0])["uploads"]
    assert len(parts) == 2 and parts[0].get("level") == 1, parts
    reads: list[str] = []
    real = pq.read_table

    def counted(source: object, *a: object, columns: list | None = None, **kw: object) -> object:
        if columns is not None and "id" in columns:
            reads.append(str(source))
        return real(source, *a, columns=columns, **kw)

    def looked_up() -> None:
        reads.clear()
        assert st.get("never-stored") is None
        assert reads == []  # was: one read per uploads part
        for uid, n in (("r1-u1", 3), (f"r{FANOUT}-u0", FANOUT * 2)):
            reads.clear()
            meta, trace = st.get(uid)
            assert meta["n"] == n and trace == TRACE
            assert len(reads) == 1, reads

    monkeypatch.setattr(pq, "read_table", counted)
    looked_up()
    # the merged part holds uploads on both sides of the cut: written anew without r0's
    cut = prune_objects(comp, st.get("r1-u0")[0]["receivedAt"] - 500)
    assert cut.tables_removed == 2
    assert st.get("r0-u0") is None
    looked_up()


class PruneInTheMiddle:
    """`inner`, whose first fetch of a segment object first runs `prune()` to its end: a
    prune by the lease holder racing a lookup that has refreshed its mirror (manifest,
    parts) and listed the segment objects, and now fetches one."""

    def __init__(self, inner: object, prune: object) -> None:
        self.inner, self.url, self.prune = inner, inner.url, prune
        self.pruned = None

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def get(self, key: str) -> object:
        if key.startswith("segments/") and self.pruned is None:
            self.pruned = self.prune()
        return self.inner.get(key)


def test_get_by_id_during_a_prune(objects: object, tmp_path: Path) -> None:
    """A prune that runs while `GET /v1/traces/{id}` looks an upload up, after the lookup
    read the tables (the upload compacted) and listed the segment objects. One segment
    object holds p1, q1 and k1, received 2 ms apart; a first cut removes p1 (the prune
    writes the object anew without it and deletes it), a second q1. Their collector's
    clock was 3 hours behind the bucket's: the hour around an upload's receivedAt lists
    nothing, and the lookup lists its part's whole range of segment names.
    A kept upload (k1, during the second cut) was answered 410 (RawRemoved) though the
    bucket holds it: the object listed was gone when fetched, and its copy (put before the
    original is deleted, named where it sorted) was never listed. Now a name that vanished
    between listing and fetch makes the lookup list again. A removed one (p1, during the
    first cut) was 410 too ("its raw record removed") for an upload that is gone; now it
    is 404, as after the prune and as a query counts it: before answering 410 the lookup
    reads the retention marks again (a prune writes its mark first)."""
    from jsprof.store.objprune import prune_objects

    now = time.time() * 1000
    old = now - 10 * 86400e3
    key = _segment(objects, int(old + 3 * 3600e3),
                   [("p1", dict(_meta(1), receivedAt=old)),
                    ("q1", dict(_meta(2), receivedAt=old + 2)),
                    ("k1", dict(_meta(3), receivedAt=old + 4))])
    _segment(objects, int(now - 3600e3), [("k2", dict(_meta(4), receivedAt=now - 3600e3))])
    comp = ObjectCompactor(objects, tmp_path / "compactor")
    assert comp.run().uploads == 4
    for uid, cut, n in (("p1", old + 1, None), ("k1", old + 3, 3)):
        raced = PruneInTheMiddle(objects, lambda cut=cut: prune_objects(comp, cut))
        st = ObjectSegmentStore(objects.url, raced)
        if n is None:
            assert st.get(uid) is None  # was: RawRemoved (410)
        else:
            meta, trace = st.get(uid)  # was: RawRemoved (410)
            assert meta["n"] == n and trace == TRACE
        assert raced.pruned is not None and raced.pruned.rewritten == 1
    keys = [k for k, _ in objects.list("segments/")]
    assert key not in keys and any("-pruned_1-" in k for k in keys), keys
    st = ObjectSegmentStore(objects.url, objects)
    assert st.get("p1") is None and st.get("q1") is None and st.get("k1")[1] == TRACE
