"""The compactor's lease and fencing on object storage (store/objstore.py): a compactor whose
lease lapsed while it pushes (paused, partitioned) harms nothing the next holder wrote, and
the lease is judged without comparing two machines' wall clocks.

The interleavings are made with gates in the object-store interface (a thread stops before
one operation until the test lets it go), on moto's S3 server (loopback) and on the local
directory. No two threads ever write one key at once (moto does not serialize that:
docs/store.md)."""

from __future__ import annotations

import threading
import time
import zlib
from pathlib import Path

import orjson
import pytest

pytest.importorskip("boto3")
pytest.importorskip("moto")

from jsprof.store import objstore  # noqa: E402
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
from serve_util import FIXTURES  # noqa: E402

TRACE = (FIXTURES / "trace-basic.json").read_bytes()
WAIT_S = 300  # a gate or a thread that never comes is a failure, not a hang


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


class Gated:
    """`inner` with a gate: the first operation `when(op, key)` picks waits (after saying
    so in `paused`) until `go` is set. Counts the unconditional writes under tables/."""

    def __init__(self, inner: object, when: object) -> None:
        self.inner, self.when, self.url = inner, when, inner.url
        self.paused, self.go = threading.Event(), threading.Event()
        self.blind_table_writes = 0

    def _gate(self, op: str, key: str) -> None:
        if not self.paused.is_set() and self.when(op, key):
            self.paused.set()
            assert self.go.wait(WAIT_S)

    def get(self, key: str) -> object:
        self._gate("get", key)
        return self.inner.get(key)

    def put(self, key: str, data: bytes) -> str:
        self._gate("put", key)
        if key.startswith("tables/"):
            self.blind_table_writes += 1
        return self.inner.put(key, data)

    def put_new(self, key: str, data: bytes) -> bool:
        self._gate("put_new", key)
        return self.inner.put_new(key, data)

    def put_if(self, key: str, data: bytes, etag: str) -> object:
        self._gate("put_if", key)
        return self.inner.put_if(key, data, etag)

    def list(self, prefix: str, **kw: object) -> list:
        self._gate("list", prefix)
        return self.inner.list(prefix, **kw)

    def aged(self, prefix: str, **kw: object) -> list:
        self._gate("aged", prefix)
        return self.inner.aged(prefix, **kw)

    def clock(self) -> float:
        return self.inner.clock()

    def delete(self, key: str) -> None:
        self._gate("delete", key)
        self.inner.delete(key)


def _meta(i: int) -> dict:
    return {"app": "shop", "release": "r1", "receivedAt": time.time() * 1000 + i,
            "sampleInterval": 10.0}


def _entries(man: dict) -> list[dict]:
    out = list(man["uploads"])
    for r in man["releases"].values():
        for entries in r["parts"].values():
            out += entries
    return out


def _check_committed(objects: object) -> list[str]:
    """Every part the committed manifest lists is in the bucket with the size and CRC-32
    the manifest gives it; the upload ids the tables hold, one per row."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    man = orjson.loads(objects.get(MANIFEST_KEY)[0])
    ids: list[str] = []
    for e in _entries(man):
        got = objects.get("tables/" + e["path"])
        assert got is not None, f"{e['path']} is listed but not in the bucket"
        assert (len(got[0]), zlib.crc32(got[0])) == (e["bytes"], e["crc32"]), (
            f"{e['path']} is not the part the manifest committed")
    for e in man["uploads"]:
        data = objects.get("tables/" + e["path"])[0]
        ids += pq.read_table(pa.BufferReader(data), columns=["id"]).column("id").to_pylist()
    return sorted(ids)


def _thread(fn: object) -> tuple[threading.Thread, list]:
    out: list = []

    def run() -> None:
        try:
            out.append(fn())
        except BaseException as e:  # noqa: BLE001 - handed to the test
            out.append(e)

    t = threading.Thread(target=run)
    t.start()
    return t, out


def test_a_compactor_whose_lease_lapsed_mid_push_overwrites_nothing(
        objects: object, tmp_path: Path) -> None:
    """A renews its lease and starts pushing; its lease lapses (a pause), B takes over from
    the same committed manifest, pushes its parts and is about to commit. A's push goes on
    (it has read the manifest: unchanged), B commits, A finishes its push. B's commit must
    stand as B wrote it: A writes no part under a name B's run may use (before: the same
    part numbers, and A replaced B's just-committed part once it had found the manifest
    unchanged), and A's run fails cleanly (Conflict)."""
    st = ObjectSegmentStore(objects.url, objects)
    for i in range(3):
        st.append(f"u{i}", _meta(i), TRACE)
    assert ObjectCompactor(objects, tmp_path / "first").run().uploads == 3
    for i in range(3, 6):
        st.append(f"u{i}", _meta(i), TRACE)

    b_objects = Gated(objects, lambda op, key: op == "put_if" and key == MANIFEST_KEY)
    b = ObjectCompactor(b_objects, tmp_path / "b")
    tb, b_out = _thread(b.run)
    assert b_objects.paused.wait(WAIT_S), b_out  # B pushed, before its commit
    for i in range(6, 8):  # A reads more than B did: its parts differ from B's
        st.append(f"u{i}", _meta(i), TRACE)
    # A: its lease is renewed before its push, then lost; it stops at a write to tables/
    # that no condition guards (where B's commit can come between its check and its put).
    a_objects = Gated(objects, lambda op, key: op == "put" and key.startswith("tables/"))
    a = ObjectCompactor(a_objects, tmp_path / "a")
    asked: list[bool] = []

    def a_lease() -> bool:
        asked.append(True)
        return len(asked) == 1

    ta, a_out = _thread(lambda: a.run(still_held=a_lease))
    deadline = time.monotonic() + WAIT_S
    while ta.is_alive() and not a_objects.paused.is_set():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    b_objects.go.set()
    tb.join(WAIT_S)
    a_objects.go.set()
    ta.join(WAIT_S)
    assert not ta.is_alive() and not tb.is_alive()
    assert isinstance(a_out[0], Conflict), a_out
    assert b_out[0].uploads == 3, b_out
    assert a_objects.blind_table_writes == 0
    assert _check_committed(objects) == [f"u{i}" for i in range(6)]
    # The next run (B's, the holder) builds on B's commit, and removes A's pushed parts
    # once they are old enough to be a dead run's (here: made so).
    assert b.run().uploads == 2
    assert _check_committed(objects) == [f"u{i}" for i in range(8)]
    from jsprof.store.tables.manifest import listed

    b.STRAY_S = -1.0
    st.append("u8", _meta(8), TRACE)
    assert b.run().uploads == 1
    man = orjson.loads(objects.get(MANIFEST_KEY)[0])
    held = {k[len("tables/"):] for k, _ in objects.list("tables/")} - {"_manifest.json"}
    assert held == listed(man)


def test_a_compactors_sweep_leaves_the_next_holders_parts(
        objects: object, tmp_path: Path) -> None:
    """A commits, then its lease lapses before its sweep (the table objects its manifest
    does not list); B takes over, reads A's commit, pushes its parts and is about to commit
    when A's sweep lists the tables. A must not delete B's parts (before: every unlisted
    object went, and B's commit then listed parts the bucket no longer held)."""
    st = ObjectSegmentStore(objects.url, objects)
    for i in range(3):
        st.append(f"u{i}", _meta(i), TRACE)
    a_objects = Gated(objects, lambda op, key: op in ("list", "aged") and key == "tables/")
    a = ObjectCompactor(a_objects, tmp_path / "a")
    ta, a_out = _thread(a.run)
    assert a_objects.paused.wait(WAIT_S), a_out  # committed, sweeping
    for i in range(3, 6):
        st.append(f"u{i}", _meta(i), TRACE)
    b_objects = Gated(objects, lambda op, key: op == "put_if" and key == MANIFEST_KEY)
    b = ObjectCompactor(b_objects, tmp_path / "b")
    tb, b_out = _thread(b.run)
    assert b_objects.paused.wait(WAIT_S), b_out  # pushed, before its commit
    a_objects.go.set()
    ta.join(WAIT_S)
    b_objects.go.set()
    tb.join(WAIT_S)
    assert not ta.is_alive() and not tb.is_alive()
    assert a_out[0].uploads == 3, a_out
    assert b_out[0].uploads == 3, b_out
    assert _check_committed(objects) == [f"u{i}" for i in range(6)]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("skew", [-3600.0, 3600.0])
def test_the_lease_is_judged_by_the_contenders_own_clock(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, skew: float) -> None:
    """The holder's wall clock is an hour behind (or ahead of) the contender's. A lease the
    holder renews is never taken over (before: with its clock behind, its `until` had
    always passed by the contender's clock, and two compactors each held it); one it stops
    renewing is taken once its duration has passed on the contender's monotonic clock
    (before: with the holder's clock ahead, only an hour later). The holder counts its
    hold on its own monotonic clock, and it ends before the contender may take over."""
    objects = LocalObjects(tmp_path / "objects")
    clock = Clock()
    monkeypatch.setattr(objstore.time, "monotonic", clock)
    real_time = time.time
    holder, contender = Lease(objects, "holder"), Lease(objects, "contender")
    monkeypatch.setattr(objstore.time, "time", lambda: real_time() + skew)
    assert holder.acquire() is True
    monkeypatch.setattr(objstore.time, "time", real_time)
    for _ in range(10):  # the holder renews every 5 s for 50 s
        assert contender.acquire() is False
        clock.now += 5.0
        monkeypatch.setattr(objstore.time, "time", lambda: real_time() + skew)
        assert holder.held() is True
        assert holder.acquire() is True
        monkeypatch.setattr(objstore.time, "time", real_time)
    assert contender.acquire() is False  # sees the last renewal: counts from now
    clock.now += objstore.LEASE_S * Lease.HOLD_SHARE
    assert holder.held() is False  # its hold is over before anyone may take it over
    clock.now += objstore.LEASE_S * (1 - Lease.HOLD_SHARE) - 0.5
    assert contender.acquire() is False
    clock.now += 1.0
    assert contender.acquire() is True
    doc = orjson.loads(objects.get(LEASE_KEY)[0])
    assert doc["owner"] == "contender" and doc["generation"] == 12
    assert holder.acquire() is False  # its etag is stale


def test_an_older_jsprofs_lease_is_judged_by_its_until(tmp_path: Path) -> None:
    """A document without a duration (written by an older jsprof) is lapsed once its
    `until` has passed, as that jsprof judged it; a released one is free at once."""
    objects = LocalObjects(tmp_path / "objects")
    objects.put(LEASE_KEY, orjson.dumps({"owner": "old", "until": time.time() + 3600}))
    assert Lease(objects, "new").acquire() is False
    objects.put(LEASE_KEY, orjson.dumps({"owner": "old", "until": time.time() - 1}))
    assert Lease(objects, "new").acquire() is True
    a = Lease(objects, "a")
    assert a.acquire() is False
    Lease(objects, "x").release()  # not the holder: nothing changes
    assert orjson.loads(objects.get(LEASE_KEY)[0])["owner"] == "new"


def test_a_released_lease_is_taken_at_once(tmp_path: Path) -> None:
    objects = LocalObjects(tmp_path / "objects")
    a, b = Lease(objects, "a"), Lease(objects, "b")
    assert a.acquire() is True
    assert b.acquire() is False
    a.release()
    assert a.held() is False
    assert b.acquire() is True
