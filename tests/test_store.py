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

from jsprof.store import Cursor, Store, StoreError, StoreFullError
from jsprof.store import segment as seg
from jsprof.store.retention import prune

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
    data = path.read_bytes()
    assert data.startswith(whole) and len(data) == len(whole) + 56  # tail cut, trailer added
    fd = os.open(path, os.O_RDONLY)
    tr = seg.trailer_at_end(fd)
    os.close(fd)
    assert tr is not None and tr.count == 3
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
    res = prune(s, time.time() * 1000 - 30 * 86400e3, app="shop")
    assert (res.removed, res.kept, res.busy) == (1, 2, [])
    assert s.get("old-shop") is None and s.get("old-blog") is not None
    assert [u for _, u, _, _ in s.iter_uploads(cur)] == ["old-blog", "new-shop"]
    assert s.append("old-shop", _meta("shop"), _trace(1)) is True  # its claim went too
    other = Store(tmp_path)  # a fresh reader indexes the rewritten segment
    assert other.get("new-shop")[1] == _trace(3)
    cut = time.time() * 1000 - 30 * 86400e3
    assert s.pruned_before() == {"shop": pytest.approx(cut, abs=5e3)}
    res = prune(s, cut)
    assert res.removed == 1 and s.get("old-blog") is None
    marks = Store(tmp_path).pruned_before()
    assert set(marks) == {"shop", "*"} and marks["*"] == cut
    prune(s, cut - 86400e3)  # an older cut does not move the mark back
    assert Store(tmp_path).pruned_before()["*"] == cut
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
    st.close()
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
            assert heads[-1].end == os.fstat(fd).st_size
            assert all(seg.body_ok(fd, h) for h in heads[:-1])
        finally:
            os.close(fd)


def test_url_store_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="local directory"):
        Store("s3://bucket/store")
    (tmp_path / "f").write_text("x")
    with pytest.raises(StoreError, match="not a store"):
        Store(tmp_path / "f")


def test_uncreatable_store_dir_is_one_line_exit_2(tmp_path: Path, capsys) -> None:
    from jsprof.cli import main

    # /proc refuses mkdir with ENOENT: not FileExists/NotADirectory/Permission, still the
    # user's path, so one line naming it and why, exit 2, no traceback.
    with pytest.raises(StoreError, match=r"/proc/x: cannot create"):
        Store("/proc/x")
    assert main(["serve", "--store", "/proc/x", "--app", "a:b", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "/proc/x" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


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
    with pytest.raises(StoreFullError, match="nothing was stored"):
        s.append("b", _meta(), _trace(2))
    monkeypatch.setattr(store_mod.os, "writev", real)
    assert s.append("c", _meta(), _trace(3)) is True
    assert s.append("b", _meta(), _trace(2)) is True  # its claim was not marked stored
    other = Store(tmp_path)  # another process sees every acknowledged record
    assert [u for _, u, _, _ in other.iter_uploads()] == ["a", "c", "b"]
    s.close()


# ---- issue 21: nothing acknowledged is ever lost ----------------------------------------

_ROTATOR = textwrap.dedent(
    """
    import sys
    from jsprof.store import Store
    st = Store(sys.argv[1], segment_bytes=1)  # every record opens a new segment
    body = open(sys.argv[2], 'rb').read()
    for i in range(int(sys.argv[3])):
        if st.append(f"n{i}", {"app": "a", "n": i}, body):
            sys.stdout.write(f"n{i}\\n")
    sys.stdout.flush()
    """
)

_RECOVERER = textwrap.dedent(
    """
    import os, sys
    from jsprof.store import Store
    st = Store(sys.argv[1])
    stop = sys.argv[2]
    n = 0
    while not os.path.exists(stop):
        st.recover()
        n += 1
    print(n)
    """
)


def test_recover_in_another_process_never_takes_a_new_segment(tmp_path: Path) -> None:
    """Two real processes: one opens a new segment per upload while the other runs recover()
    without pause. A segment must never be seen unlocked before its writer holds it (it
    would be sealed empty, hiding every record appended to it after)."""
    store = tmp_path / "st"
    body = tmp_path / "body.json"
    body.write_bytes(_trace(0))
    Store(store).close()
    stop = tmp_path / "stop"
    rec = subprocess.Popen(
        [sys.executable, "-c", _RECOVERER, str(store), str(stop)], stdout=subprocess.PIPE, text=True
    )
    try:
        w = subprocess.run(
            [sys.executable, "-c", _ROTATOR, str(store), str(body), "600"],
            capture_output=True, text=True, timeout=300,
        )
    finally:
        stop.write_text("")
        loops = int(rec.communicate(timeout=60)[0])
    assert w.returncode == 0, w.stderr
    acked = w.stdout.split()
    assert len(acked) == 600 and loops > 0
    st = Store(store)
    assert sorted(u for _, u, _, _ in st.iter_uploads()) == sorted(acked)
    for uid in acked[::37]:
        assert st.get(uid)[1] == _trace(0)
    assert st.check().findings == []


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_recover_never_seals_an_empty_segment_and_a_failed_lock_leaks_nothing(
    tmp_path: Path, monkeypatch
) -> None:
    from jsprof.store import StoreUnavailable
    from jsprof.store import store as store_mod

    s = Store(tmp_path)
    # A dead writer's empty segment (marked open, unlocked): removed, never given a trailer
    # that would hide records behind it.
    empty = tmp_path / "segments" / "0000000001-1-aaaaaa-000000.seg"
    empty.write_bytes(b"")
    (tmp_path / "open" / empty.name).write_bytes(b"")
    assert s.recover() == 0
    assert not empty.exists() and not (tmp_path / "open" / empty.name).exists()
    # flock failing on a new segment: an error, no fd left open, no file left behind.
    real = store_mod.fcntl.flock

    def refuse(fd: int, op: int) -> None:
        if op & store_mod.fcntl.LOCK_NB:
            raise OSError(37, "No locks available")
        real(fd, op)

    monkeypatch.setattr(store_mod.fcntl, "flock", refuse)
    before = _open_fds()
    for _ in range(3):
        with pytest.raises(StoreUnavailable):
            s.append("a", _meta(), _trace(1))
    assert _open_fds() == before
    assert list((tmp_path / "segments").iterdir()) == []
    monkeypatch.setattr(store_mod.fcntl, "flock", real)
    assert s.append("a", _meta(), _trace(1)) is True
    s.close()


def _writer_of(s: Store):  # noqa: ANN202
    return s._get_writer()  # noqa: SLF001


def test_failed_write_and_failed_truncate_acknowledge_nothing_unsynced(
    tmp_path: Path, monkeypatch
) -> None:
    """Fault injection (the rule): a record written but not yet synced, then another write
    fails and so do ftruncate and fdatasync. The first record must not be acknowledged."""
    from jsprof.store import StoreIOError, StoreUnavailable
    from jsprof.store import store as store_mod

    s = Store(tmp_path)
    w = _writer_of(s)
    fa = s._claim("a", create=True)  # noqa: SLF001
    fb = s._claim("b", create=True)  # noqa: SLF001
    _, _, upto = w.write(seg.make_record("a", b"{}", _trace(1), 1.0), fa)

    def fail(*_a: object) -> None:
        raise OSError(5, "Input/output error")

    real_truncate = os.ftruncate
    cut: list[int] = []

    def truncate_fails_on_segments(fd: int, n: int) -> None:
        if fd in (fa, fb):  # the claim files: fine
            real_truncate(fd, n)
        else:
            cut.append(fd)
            fail()

    monkeypatch.setattr(store_mod.os, "writev", fail)
    monkeypatch.setattr(store_mod.os, "ftruncate", truncate_fails_on_segments)
    monkeypatch.setattr(store_mod.os, "fdatasync", fail)
    with pytest.raises(StoreUnavailable):
        w.write(seg.make_record("b", b"{}", _trace(2), 1.0), fb)
    assert cut  # the failed write's partial record could not be cut
    with pytest.raises(StoreIOError):
        w.sync(upto)  # before the fix: "synced", as the segment had been closed
    os.close(fa)
    os.close(fb)
    monkeypatch.undo()
    s.close()


def test_a_failed_sync_fails_its_records_even_if_a_later_sync_succeeds(
    tmp_path: Path, monkeypatch
) -> None:
    """Fault injection (the rule): fdatasync fails once (Linux then reports the next one as
    a success, the lost pages marked clean). Every append it covered fails; the next ones
    land in a new segment; a retry of the failed id stores it once."""
    from jsprof.store import StoreIOError
    from jsprof.store import store as store_mod

    s = Store(tmp_path)
    assert s.append("a", _meta(), _trace(1)) is True
    real = os.fdatasync
    calls = {"n": 0}

    def once(fd: int) -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise OSError(5, "Input/output error")
        real(fd)

    monkeypatch.setattr(store_mod.os, "fdatasync", once)
    with pytest.raises(StoreIOError, match="not stored"):
        s.append("b", _meta(), _trace(2))
    assert "b" not in s and s.get("b") is None
    assert s.append("c", _meta(), _trace(3)) is True
    assert s.append("b", _meta(), _trace(2)) is True  # the retry stores it, once
    s.close()
    ids = [u for _, u, _, _ in Store(tmp_path).iter_uploads()]
    assert sorted(ids) == ["a", "b", "c"]


def _jsprof(*args: str) -> subprocess.CompletedProcess:
    from serve_util import JSPROF

    return subprocess.run([str(JSPROF), *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("sealed", [True, False], ids=["sealed", "writer-killed"])
def test_one_flipped_header_byte_costs_one_record_never_the_rest(
    tmp_path: Path, sealed: bool
) -> None:
    """60 real uploads in one segment; one byte flipped in the 11th record's header. The
    other 59 read back (get and iter_uploads), the next write and a prune delete nothing,
    `jsprof serve check` reports the damage, and its bytes are quarantined."""
    store = tmp_path / "st"
    p = _spawn(tmp_path, "u", 60, threads=1)
    if sealed:
        assert p.wait(timeout=120) == 0
        acked = p.stdout.read().split()[::2]
    else:  # killed once all 60 are acknowledged: its segment stays open, unsealed
        acked = [p.stdout.readline().split()[0] for _ in range(60)]
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
    assert len(acked) == 60
    (path,) = (store / "segments").glob("*.seg")
    fd = os.open(path, os.O_RDONLY)
    heads = [h for h in seg.scan(fd) if isinstance(h, seg.RecordHeader)]
    os.close(fd)
    victim = heads[10]
    data = bytearray(path.read_bytes())
    data[victim.offset + 13] ^= 0x04  # one bit of the meta length: the header CRC fails
    path.write_bytes(bytes(data))
    size = len(data)
    st = Store(store)
    survivors = [u for u in acked if u != victim.upload_id]
    assert sorted(u for _, u, _, _ in st.iter_uploads()) == sorted(survivors)
    body = (tmp_path / "body.json").read_bytes()
    for uid in survivors:
        meta, got = st.get(uid)
        assert got == body + b" " * (meta["n"] % 7)
    with pytest.raises(StoreError, match="damaged"):
        st.get(victim.upload_id)
    assert st.append("after", {"app": "a"}, body) is True  # the next write recovers
    assert path.stat().st_size >= size  # nothing cut: at most a trailer added
    r = _jsprof("serve", "prune", "--store", str(store), "--older-than", "30d")
    assert r.returncode == 0, r.stderr
    assert "removed 0 uploads" in r.stdout
    assert path.stat().st_size >= size
    st2 = Store(store)
    assert sorted(u for _, u, _, _ in st2.iter_uploads()) == sorted([*survivors, "after"])
    r = _jsprof("serve", "check", "--store", str(store))
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"{path.name}: offset {victim.offset}: {victim.end - victim.offset} bytes" in r.stdout
    assert "damaged bytes" in r.stdout and "Traceback" not in r.stderr
    if not sealed:  # recovered by the next write: the damage was copied aside too
        q = store / "quarantine" / f"{path.name}@{victim.offset}.bin"
        assert q.read_bytes() == bytes(data[victim.offset : victim.end])
    st.close()


_DISK_FULL = textwrap.dedent(
    """
    import gzip, random, sys, threading
    from pathlib import Path
    from jsprof.store import Store, StoreFullError

    disk = Path(sys.argv[1])
    filler = disk / "filler"
    filler.write_bytes(b"x" * 1_000_000)  # what filled the disk; deleted later
    st = Store(disk / "st", segment_bytes=300_000)
    rng = random.Random(7)
    # Incompressible bodies of varied sizes: the disk fills mid-record, mid-claim, etc.
    bodies = {f"u{i}": gzip.compress(rng.randbytes(rng.randrange(2_000, 30_000)), 1)
              for i in range(80)}
    acked, refused = set(), set()
    lock = threading.Lock()

    def send(ids):
        for uid in ids:
            try:
                ok = st.append(uid, {"app": "a"}, None, gzipped=bodies[uid])
            except StoreFullError as e:
                assert "nothing was stored" in str(e) and e.disk_full
                with lock:
                    refused.add(uid)
                continue
            assert ok
            with lock:
                acked.add(uid)

    ids = list(bodies)
    ts = [threading.Thread(target=send, args=(ids[i::4],)) for i in range(4)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert acked and refused, (len(acked), len(refused))  # the disk did fill up
    # Nothing acknowledged is missing or altered; nothing refused is half there.
    for uid in acked:
        assert st.get(uid)[1] == gzip.decompress(bodies[uid])
    for uid in refused:
        assert uid not in st and st.get(uid) is None
    assert st.check().findings == []
    # Space returns: the same requests now succeed, in the same process, by themselves.
    filler.unlink()
    for uid in sorted(refused):
        assert st.append(uid, {"app": "a"}, None, gzipped=bodies[uid]) is True
    for uid in sorted(acked)[:5]:
        assert st.append(uid, {"app": "a"}, None, gzipped=bodies[uid]) is False
    st.close()
    st2 = Store(disk / "st")
    got = {u: b for _, u, _, b in st2.iter_uploads()}
    assert got == {u: gzip.decompress(b) for u, b in bodies.items()}  # each once, whole
    rep = st2.check()
    assert rep.findings == [] and rep.open_segments == [], rep
    print(len(acked), len(refused))
    """
)


def test_disk_full_stores_nothing_damaged_and_resumes_when_space_returns(
    tmp_path: Path,
) -> None:
    """On a real 2 MiB filesystem (a tmpfs in its own mount namespace: no root needed,
    gone with the process) that fills up under four appending threads."""
    disk = tmp_path / "disk"
    disk.mkdir()
    setup = f"mount -t tmpfs -o size=2m tmpfs {disk} && exec \"$0\" -c \"$1\" {disk}"
    r = subprocess.run(
        ["unshare", "--mount", "--map-root-user", "sh", "-c", setup, sys.executable,
         _DISK_FULL],
        capture_output=True, text=True, timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    acked, refused = map(int, r.stdout.split())
    assert acked > 0 and refused > 0


# ---- issue 21: a store of any size ------------------------------------------------------


def test_open_reads_no_segment_and_get_reads_one_record(tmp_path: Path, monkeypatch) -> None:
    """Opening a store reads nothing (no id index in memory, whatever its size); `get`
    reads the id's claim and its one record; a repeated id is refused from its claim."""
    from jsprof.store import store as store_mod

    s = Store(tmp_path, segment_bytes=20_000)
    for i in range(30):
        s.append(f"k{i}", _meta(), _trace(i))
    s.close()
    opened: list[str] = []
    preads: list[tuple[int, int]] = []
    real_open, real_pread = os.open, os.pread

    def spy_open(path, *a, **k):  # noqa: ANN001, ANN202
        opened.append(str(path))
        return real_open(path, *a, **k)

    def spy_pread(fd: int, n: int, off: int) -> bytes:
        preads.append((fd, n))
        return real_pread(fd, n, off)

    monkeypatch.setattr(store_mod.os, "open", spy_open)
    monkeypatch.setattr(store_mod.os, "pread", spy_pread)
    monkeypatch.setattr(seg.os, "pread", spy_pread)
    st = Store(tmp_path)
    assert opened == [] and preads == []
    assert st.get("k17")[1] == _trace(17)
    segs = [p for p in opened if "/segments/" in p]
    assert len(segs) == 1 and len([p for p in opened if "/claims/" in p]) == 1
    assert len(preads) <= 4  # claim, header, record
    opened.clear()
    assert "k3" in st and "nope" not in st and st.get("nope") is None
    assert not [p for p in opened if "/segments/" in p]
    # A repeated id is answered from its claim: no segment is opened.
    st2 = Store(tmp_path)
    opened.clear()
    assert st2.append("k5", _meta(), _trace(5)) is False
    assert not [p for p in opened if "/segments/" in p and not p.endswith(".new")]
    st2.close()


def test_prune_keeps_locations_right_and_skips_new_segments(tmp_path: Path) -> None:
    s = Store(tmp_path, segment_bytes=20_000)
    now = time.time() * 1000
    old = now - 40 * 86400e3
    for i in range(20):  # old and new mixed in the same segments
        s.append(f"k{i}", _meta("shop", old if i % 3 == 0 else now), _trace(i))
    s.rotate()
    for i in range(20, 30):  # segments with only new uploads: skipped from their trailer
        s.append(f"k{i}", _meta("shop", now), _trace(i))
    res = prune(s, now - 30 * 86400e3)
    assert res.removed == 7
    other = Store(tmp_path)
    for i in range(30):
        got = other.get(f"k{i}")
        assert (got is None) == (i % 3 == 0 and i < 20), i
        if got is not None:
            assert got[1] == _trace(i)
            loc = other._lookup(f"k{i}")  # noqa: SLF001 - its claim names its new place
            fd = os.open(tmp_path / "segments" / loc.segment, os.O_RDONLY)
            assert next(seg.scan(fd, loc.offset)).upload_id == f"k{i}"
            os.close(fd)
    assert other.check().findings == []
    s.close()


def test_a_store_from_before_claims_held_places_is_migrated_by_its_first_writer(
    tmp_path: Path,
) -> None:
    s = Store(tmp_path, segment_bytes=20_000)
    for i in range(12):
        s.append(f"k{i}", _meta(), _trace(i))
    s.close()
    # As the previous version left it: claims say just "1", no open/ folder.
    for claim in (tmp_path / "claims").rglob("*"):
        if claim.is_file():
            claim.write_bytes(b"1")
    (tmp_path / "open").rmdir()
    old = Store(tmp_path)
    assert old.get("k4")[1] == _trace(4)  # found by scanning until migrated
    assert old.append("k4", _meta(), _trace(4)) is False
    assert old.append("new", _meta(), _trace(40)) is True  # the first writer migrates
    assert (tmp_path / "open").is_dir()
    for i in range(12):
        assert old._lookup(f"k{i}").segment is not None  # noqa: SLF001
        assert old.get(f"k{i}")[1] == _trace(i)
    old.close()
    assert Store(tmp_path).check().findings == []


def test_check_reports_records_hidden_behind_an_early_trailer(tmp_path: Path) -> None:
    """What the old segment race left: a trailer at offset 0, acknowledged records after
    it that no reader sees. `check` says so."""
    s = Store(tmp_path)
    s.append("a", _meta(), _trace(1))
    s.close()
    (path,) = (tmp_path / "segments").glob("*.seg")
    data = path.read_bytes()
    path.write_bytes(seg.encode_trailer(0) + data)
    rep = Store(tmp_path).check()
    assert [f.what for f in rep.findings] == ["bytes after the trailer, hidden from every reader"]
