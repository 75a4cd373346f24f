"""The segment store: durable, idempotent appends; torn tails; cursors; several processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import orjson
import pytest

from jsprof.store import Cursor, Store, StoreError
from jsprof.store import segment as seg

CHROMIUM = Path(__file__).parent / "data" / "chromium"


def _trace(i: int) -> bytes:
    doc = orjson.loads((CHROMIUM / "trace-basic.json").read_bytes())
    doc["samples"][0]["timestamp"] += i * 1e-9  # distinct bodies, same shape
    return orjson.dumps(doc)


def _meta(app: str = "shop", received: float | None = None) -> dict:
    return {"app": app, "release": "1.0", "receivedAt": received or time.time() * 1000}


def test_append_get_idempotent(tmp_path: Path) -> None:
    s = Store(tmp_path / "st")
    body = _trace(1)
    assert s.append("a", _meta(), body) is True
    assert s.append("a", _meta(), b"{}") is False  # stored once, first body kept
    meta, got = s.get("a")
    assert got == body and meta["app"] == "shop"
    assert s.get("nope") is None
    assert "a" in s and len(s) == 1
    s.close()
    with pytest.raises(StoreError):
        s.append("b", _meta(), body)
    # A new process (here: a new Store) sees it and refuses the same id.
    s2 = Store(tmp_path / "st")
    assert s2.get("a")[1] == body
    assert s2.append("a", _meta(), body) is False
    assert s2.append("b", _meta(), body) is True
    assert len(s2) == 2
    s2.close()


def test_rotation_and_cursor_resume(tmp_path: Path) -> None:
    s = Store(tmp_path, segment_bytes=6000)  # a few records per segment
    bodies = {f"id{i}": _trace(i) for i in range(12)}
    for k, v in bodies.items():
        assert s.append(k, _meta(), v)
    assert len(list((tmp_path / "segments").glob("*.seg"))) > 2
    seen = list(s.iter_uploads())
    assert [u for _, u, _, _ in seen] == list(bodies)  # one writer: append order
    assert all(bodies[u] == b for _, u, _, b in seen)
    cur = Cursor.loads(seen[4][0].dumps())
    assert [u for _, u, _, _ in s.iter_uploads(cur)] == list(bodies)[5:]
    # Another writer appends; resuming from the end yields exactly the new ones.
    end = seen[-1][0]
    other = Store(tmp_path)
    other.append("x1", _meta(), _trace(99))
    s.append("x2", _meta(), _trace(98))
    assert sorted(u for _, u, _, _ in s.iter_uploads(end)) == ["x1", "x2"]
    assert s.get("x1")[1] == _trace(99)  # found by re-scanning the other writer's segment
    other.close()
    s.close()


def test_cursor_rejects_garbage() -> None:
    with pytest.raises(StoreError):
        Cursor.loads(b'{"a": -1}')
    with pytest.raises(StoreError):
        Cursor.loads(b"[1]")


def test_torn_tail_is_cut_and_store_reopens(tmp_path: Path) -> None:
    s = Store(tmp_path)
    for i in range(3):
        s.append(f"k{i}", _meta(), _trace(i))
    name = s._writer.name  # noqa: SLF001
    # Drop the segment as a killed process would: no trailer, flock released.
    os.close(s._writer.fd)  # noqa: SLF001
    s._writer.fd = -1  # noqa: SLF001
    path = tmp_path / "segments" / name
    whole = path.read_bytes()
    rec = seg.encode_record(3, "k3", b"{}", _trace(3), 1.0)
    path.write_bytes(whole + rec[: len(rec) // 2])  # a record cut mid-body
    s2 = Store(tmp_path)
    assert s2.get("k3") is None
    assert [u for _, u, _, _ in s2.iter_uploads()] == ["k0", "k1", "k2"]
    assert s2.recover() == 1
    assert path.read_bytes() == whole + seg.encode_trailer(3)
    assert s2.append("k3", _meta(), _trace(3)) is True
    assert sorted(u for _, u, _, _ in s2.iter_uploads()) == ["k0", "k1", "k2", "k3"]
    s2.close()


def test_damaged_record_is_an_error_on_get_and_skipped_by_iter(tmp_path: Path, caplog) -> None:
    s = Store(tmp_path)
    for i in range(3):
        s.append(f"k{i}", _meta(), _trace(i))
    s.close()
    path = next((tmp_path / "segments").glob("*.seg"))
    data = bytearray(path.read_bytes())
    h = [x for x in seg.scan(os.open(path, os.O_RDONLY)) if isinstance(x, seg.RecordHeader)]
    data[h[1].end - 5] ^= 0xFF  # one flipped bit in the middle record's body
    path.write_bytes(bytes(data))
    s2 = Store(tmp_path)
    with pytest.raises(StoreError, match="checksum"):
        s2.get("k1")
    assert [u for _, u, _, _ in s2.iter_uploads()] == ["k0", "k2"]
    assert "damaged record" in caplog.text


def test_prune_by_age_and_app_keeps_cursors(tmp_path: Path) -> None:
    s = Store(tmp_path)
    old = time.time() * 1000 - 40 * 86400e3
    s.append("old-shop", _meta("shop", old), _trace(1))
    s.append("old-blog", _meta("blog", old), _trace(2))
    s.append("new-shop", _meta("shop"), _trace(3))
    cur = next(iter(s.iter_uploads()))[0]  # after the first record
    res = s.prune(time.time() * 1000 - 30 * 86400e3, app="shop")
    assert (res.removed, res.kept, res.busy) == (1, 2, [])
    assert s.get("old-shop") is None and s.get("old-blog") is not None
    assert [u for _, u, _, _ in s.iter_uploads(cur)] == ["old-blog", "new-shop"]
    assert s.append("old-shop", _meta("shop"), _trace(1)) is True  # its claim went too
    other = Store(tmp_path)  # a fresh reader indexes the rewritten segment
    assert other.get("new-shop")[1] == _trace(3)
    res = s.prune(time.time() * 1000 - 30 * 86400e3)
    assert res.removed == 1 and s.get("old-blog") is None
    s.close()


_WRITER = textwrap.dedent(
    """
    import sys, threading, orjson
    from jsprof.store import Store
    st = Store(sys.argv[1])
    prefix, n, threads = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    body = open(sys.argv[5], 'rb').read()
    lock = threading.Lock()
    def work(t):
        for i in range(t, n, threads):
            uid = f"{prefix}{i}"
            new = st.append(uid, {"app": "a", "n": i}, body + b" " * (i % 7))
            with lock:
                sys.stdout.write(f"{uid} {int(new)}\\n")
                sys.stdout.flush()
    ts = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    """
)


def _spawn(tmp_path: Path, prefix: str, n: int, threads: int = 4) -> subprocess.Popen:
    body = tmp_path / "body.json"
    if not body.exists():
        body.write_bytes(_trace(0))
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            _WRITER,
            str(tmp_path / "st"),
            prefix,
            str(n),
            str(threads),
            str(body),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )


def test_two_processes_same_ids_store_each_once(tmp_path: Path) -> None:
    procs = [_spawn(tmp_path, "u", 150), _spawn(tmp_path, "u", 150)]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs)
    new = [line.split() for out in outs for line in out.splitlines()]
    assert len(new) == 300
    # Each id was acknowledged as new by exactly one of the two processes.
    winners = {u for u, flag in new if flag == "1"}
    assert len(winners) == 150 and sum(flag == "1" for _, flag in new) == 150
    st = Store(tmp_path / "st")
    ids = [u for _, u, _, _ in st.iter_uploads()]
    assert sorted(ids) == sorted(winners)


def test_sigkill_mid_stream_loses_no_acknowledged_upload(tmp_path: Path) -> None:
    body = _trace(0)
    for round_ in range(3):
        p = _spawn(tmp_path, f"r{round_}-", 100000, threads=6)
        acked = []
        deadline = time.monotonic() + 30
        while len(acked) < 40 + 30 * round_ and time.monotonic() < deadline:
            acked.append(p.stdout.readline().split()[0])
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        st = Store(tmp_path / "st")
        for uid in acked:
            got = st.get(uid)
            assert got is not None, uid
            assert got[1] == body + b" " * (got[0]["n"] % 7)
        st.recover()
        n = len(st)
        for uid in acked:  # re-sending stores nothing twice
            assert st.append(uid, {"app": "a"}, b"{}") is False
        assert len(st) == n
        assert st.append(f"after{round_}", {"app": "a"}, body) is True
        st.close()
    # Every segment is sealed and every record in it is whole.
    for path in (tmp_path / "st" / "segments").glob("*.seg"):
        fd = os.open(path, os.O_RDONLY)
        try:
            heads = list(seg.scan(fd))
            assert isinstance(heads[-1], seg.Trailer), path
            assert heads[-1].offset + seg.HEADER_SIZE == os.fstat(fd).st_size
            assert all(seg.body_ok(fd, h) for h in heads[:-1])
        finally:
            os.close(fd)


def test_url_store_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="local directory"):
        Store("s3://bucket/store")
    (tmp_path / "f").write_text("x")
    with pytest.raises(StoreError, match="not a store"):
        Store(tmp_path / "f")


def test_gzipped_body_is_kept_as_received(tmp_path: Path) -> None:
    import gzip

    s = Store(tmp_path)
    body = _trace(5)
    zipped = gzip.compress(body)
    assert s.append("gz", _meta(), None, gzipped=zipped) is True
    assert s.get("gz")[1] == body
    assert [b for _, u, _, b in s.iter_uploads()] == [body]
    path = next((tmp_path / "segments").glob("*.seg"))
    assert zipped in path.read_bytes()  # not compressed again
    s.close()


def test_failed_write_leaves_no_torn_record_behind(tmp_path: Path, monkeypatch) -> None:
    from jsprof.store import store as store_mod

    s = Store(tmp_path)
    s.append("a", _meta(), _trace(1))
    real = os.writev

    def half_then_fail(fd: int, parts: list) -> int:
        data = b"".join(parts)
        os.write(fd, data[: len(data) // 2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store_mod.os, "writev", half_then_fail)
    with pytest.raises(OSError):
        s.append("b", _meta(), _trace(2))
    monkeypatch.setattr(store_mod.os, "writev", real)
    assert s.append("c", _meta(), _trace(3)) is True
    assert s.append("b", _meta(), _trace(2)) is True  # its claim was not marked stored
    other = Store(tmp_path)  # another process sees every acknowledged record
    assert [u for _, u, _, _ in other.iter_uploads()] == ["a", "c", "b"]
    s.close()
