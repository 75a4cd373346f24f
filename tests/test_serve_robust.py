"""The collector under abuse: a malformed-trace corpus next to good uploads, and SIGKILL in
the middle of many concurrent uploads (one process and two workers)."""

from __future__ import annotations

import copy
import os
import random
import signal
import threading
import time
import zlib
from pathlib import Path

import orjson
import pytest

from jsprof.store import Store
from jsprof.store import segment as seg
from serve_util import Collector, field_trace, fixture_bytes, gz

REAL = ["trace-basic.json", "trace-idle.json", "trace-builtins.json"]


def _structural(doc: dict, rng: random.Random) -> list[tuple[str, dict | list | str | int]]:
    """Mutations of a real trace that jsprof's reader must refuse, each labelled."""
    out: list[tuple[str, object]] = []

    def mut(label: str, fn) -> None:
        d = copy.deepcopy(doc)
        fn(d)
        out.append((label, d))

    nf, ns, nr = len(doc["frames"]), len(doc["stacks"]), len(doc["resources"])
    for key in ("resources", "frames", "stacks", "samples"):
        mut(f"drop {key}", lambda d, k=key: d.pop(k))
        mut(f"{key} as object", lambda d, k=key: d.update({k: {}}))
        mut(f"{key} as string", lambda d, k=key: d.update({k: "x"}))
    f = rng.randrange(nf)
    s = rng.randrange(1, ns)
    i = rng.randrange(len(doc["samples"]))
    mut("frame not object", lambda d: d["frames"].__setitem__(f, 7))
    mut("frame name null", lambda d: d["frames"][f].update(name=None))
    mut("frame name missing", lambda d: d["frames"][f].pop("name"))
    mut("resourceId out of range", lambda d: d["frames"][f].update(resourceId=nr))
    mut("resourceId float", lambda d: d["frames"][f].update(resourceId=0.5))
    mut("line zero", lambda d: d["frames"][f].update(line=0))
    mut("column string", lambda d: d["frames"][f].update(column="3"))
    mut("resource number", lambda d: d["resources"].append(5))
    mut("frameId out of range", lambda d: d["stacks"][s].update(frameId=nf + 3))
    mut("frameId missing", lambda d: d["stacks"][s].pop("frameId"))
    mut("parentId forward", lambda d: d["stacks"][s].update(parentId=s))
    mut("parentId negative", lambda d: d["stacks"][s].update(parentId=-2))
    mut("parentId null", lambda d: d["stacks"][s].update(parentId=None))
    mut("stack not object", lambda d: d["stacks"].__setitem__(s, [1]))
    mut("timestamp missing", lambda d: d["samples"][i].pop("timestamp"))
    mut("timestamp string", lambda d: d["samples"][i].update(timestamp="12.5"))
    # (Booleans where numbers belong are formats-speed's open reader fix, issue 11.)
    mut("stackId out of range", lambda d: d["samples"][i].update(stackId=ns))
    mut("stackId float", lambda d: d["samples"][i].update(stackId=1.5))
    mut("marker unknown", lambda d: d["samples"][i].update(marker="nap"))
    mut("sample not object", lambda d: d["samples"].__setitem__(i, None))
    # jsprof's own files are taken (issue 33), a broken `jsprof` key is not.
    mut("jsprof key too new", lambda d: d.update(jsprof={"formatVersion": 99}))
    mut("jsprof tracks not array", lambda d: d.update(jsprof={"formatVersion": 1, "tracks": 5}))
    out.append(("envelope trace not object", {"trace": "x", "meta": {}}))
    out.append(("envelope unknown key", {"trace": doc, "meta": {}, "x": 1}))
    out.append(("envelope meta array", {"trace": doc, "meta": []}))
    out.append(("top-level array", [doc]))
    out.append(("top-level number", 3))
    return out


def _corpus() -> list[tuple[str, bytes, str | None, int]]:
    """(label, body, Content-Encoding, expected status) over the three real traces."""
    rng = random.Random(13)
    corpus = []
    for name in REAL:
        raw = fixture_bytes(name)
        doc = orjson.loads(raw)
        for label, bad in _structural(doc, rng):
            body = orjson.dumps(bad)
            enc = rng.choice([None, "gzip", "deflate"])
            data = gz(body) if enc == "gzip" else zlib.compress(body) if enc == "deflate" else body
            corpus.append((f"{name}: {label}", data, enc, 400))
        corpus.append((f"{name}: cut short", raw[: len(raw) // 2], None, 400))
        corpus.append(
            (f"{name}: NaN", raw.replace(b'"timestamp":', b'"timestamp":NaN,"t":', 1), None, 400)
        )
        corpus.append((f"{name}: gzip cut", gz(raw)[:-9], "gzip", 400))
        corpus.append((f"{name}: gzip flipped", _flip(gz(raw), 30), "gzip", 400))
        corpus.append((f"{name}: gzip trailing junk", gz(raw) + b"junk", "gzip", 400))
        corpus.append((f"{name}: deflate garbage", os.urandom(300), "deflate", 400))
        corpus.append((f"{name}: deep nesting", b"[" * 5000 + b"]" * 5000, None, 400))
    corpus.append(
        (
            "cpuprofile",
            (Path(__file__).parent / "data/node/bench.cpuprofile").read_bytes(),
            None,
            400,
        )
    )
    corpus.append(("gzip bomb", gz(b"{" + b" " * (80 << 20) + b"}"), "gzip", 413))
    return corpus


def _flip(data: bytes, at: int) -> bytes:
    b = bytearray(data)
    b[at] ^= 0x55
    return bytes(b)


def test_malformed_corpus_is_refused_while_good_uploads_land(tmp_path: Path) -> None:
    col = Collector(tmp_path / "st", "--app", "shop:k1")
    corpus = _corpus()
    assert len(corpus) > 100
    results: dict[str, tuple[int, dict]] = {}
    good: list[str] = []
    stop = threading.Event()
    good_body = gz(field_trace(3000))

    def bad_sender(part: list) -> None:
        for label, body, enc, _ in part:
            results[label] = col.post(
                body, f"app=shop&key=k1&id=bad-{len(results)}-{os.getpid()}", encoding=enc
            )

    def good_sender() -> None:
        n = 0
        while not stop.is_set():
            status, doc = col.post(good_body, f"app=shop&key=k1&id=good-{n}", encoding="gzip")
            assert status == 202, doc
            good.append(doc["id"])
            n += 1

    try:
        g = threading.Thread(target=good_sender)
        g.start()
        senders = [threading.Thread(target=bad_sender, args=(corpus[i::4],)) for i in range(4)]
        [t.start() for t in senders]
        [t.join() for t in senders]
        stop.set()
        g.join()
        for label, _, _, want in corpus:
            status, doc = results[label]
            assert status == want, (label, status, doc)
            assert list(doc) == ["error"] and doc["error"] and "\n" not in doc["error"], label
        assert good
        for uid in good:
            status, data = col.get(uid)
            assert status == 200
    finally:
        col.stop()
    ids = [u for _, u, _, _ in Store(tmp_path / "st").iter_uploads()]
    assert sorted(ids) == sorted(good)  # nothing bad was stored


def _bodies() -> list[bytes]:
    return [field_trace(2000, seed) for seed in range(4)]


def _body_for(uid: str, bodies: list[bytes]) -> bytes:
    return bodies[zlib.crc32(uid.encode()) % len(bodies)]


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        out += [int(x) for x in text]
    return out


@pytest.mark.parametrize("workers", [1, 2])
def test_sigkill_mid_stream_loses_nothing_acknowledged(tmp_path: Path, workers: int) -> None:
    store = tmp_path / "st"
    bodies = _bodies()
    zipped = [gz(b) for b in bodies]
    acked: list[str] = []
    sent: list[str] = []
    col = Collector(store, "--app", "shop:k1", "--workers", str(workers))
    if workers > 1:
        deadline = time.monotonic() + 20
        while len(_children(col.proc.pid)) < workers and time.monotonic() < deadline:
            time.sleep(0.05)
        kids = _children(col.proc.pid)
        assert len(kids) == workers

    def client(t: int) -> None:
        for j in range(10_000):
            uid = f"c{t}-{j}"
            sent.append(uid)
            body = zipped[zlib.crc32(uid.encode()) % len(zipped)]
            try:
                status, doc = col.post(body, f"app=shop&key=k1&id={uid}", encoding="gzip")
            except OSError:
                return  # the collector is gone
            assert status == 202, doc
            acked.append(uid)

    threads = [threading.Thread(target=client, args=(t,)) for t in range(16)]
    [t.start() for t in threads]
    deadline = time.monotonic() + 60
    while len(acked) < 200 and time.monotonic() < deadline:
        time.sleep(0.01)
    os.kill(col.proc.pid, signal.SIGKILL)  # mid-stream: 16 uploads in flight
    if workers > 1:
        for k in kids:  # a crash of the whole collector
            try:
                os.kill(k, signal.SIGKILL)
            except ProcessLookupError:
                pass
    col.proc.wait()
    [t.join() for t in threads]
    n_acked = len(acked)
    assert n_acked >= 200

    col = Collector(store, "--app", "shop:k1", "--workers", str(workers))
    try:
        for uid in acked:
            status, data = col.get(uid)
            assert status == 200, uid
            got = orjson.loads(data)
            want = orjson.loads(_body_for(uid, bodies))
            for key in ("resources", "frames", "stacks", "samples"):
                assert got[key] == want[key], (uid, key)
        before = Store(store)
        ids_before = [u for _, u, _, _ in before.iter_uploads()]
        assert len(ids_before) == len(set(ids_before))
        # Re-send everything that was sent (acknowledged or not): all 202, nothing twice.
        resend = sorted(set(sent))

        def again(part: list[str]) -> None:
            for uid in part:
                body = zipped[zlib.crc32(uid.encode()) % len(zipped)]
                status, doc = col.post(body, f"app=shop&key=k1&id={uid}", encoding="gzip")
                assert (status, doc) == (202, {"id": uid})

        ts = [threading.Thread(target=again, args=(resend[i::8],)) for i in range(8)]
        [t.start() for t in ts]
        [t.join() for t in ts]
    finally:
        col.stop()
    after = Store(store)
    ids_after = [u for _, u, _, _ in after.iter_uploads()]
    assert sorted(ids_after) == resend  # every id once
    assert set(ids_before) <= set(ids_after)
    # Nothing corrupt: each segment is sealed (recovered) and each record passes its CRC.
    for path in (store / "segments").glob("*.seg"):
        fd = os.open(path, os.O_RDONLY)
        try:
            heads = list(seg.scan(fd))
            assert heads and isinstance(heads[-1], seg.Trailer), path
            assert heads[-1].end == os.fstat(fd).st_size
            assert all(seg.body_ok(fd, h) for h in heads[:-1])
        finally:
            os.close(fd)


def test_fast_path_decides_as_the_general_path() -> None:
    """The typed-reader shortcut never accepts what the dict path refuses, and takes the
    plain valid traces (those are the bytes it stores unchanged)."""
    from jsprof.serve import ingest
    from jsprof.serve.config import Limits

    limits = Limits()
    for label, body, enc, _ in _corpus():
        try:
            data, _ = ingest.decode_body(body, enc or "identity", limits)
        except ingest.Refused:
            continue
        try:
            fast = ingest._fast_path(data, limits, False)
        except ingest.Refused as e:
            fast = False
            # Refused here with the same status and words as on the general path.
            with pytest.raises(ingest.Refused) as general:
                ingest.prepare_general(data, {"app": "a"}, None, limits, False)
            assert (general.value.status, general.value.message) == (e.status, e.message)
        assert not fast, label
    for name in REAL:
        doc = orjson.loads(fixture_bytes(name))
        doc["resources"] = [r.split("?")[0] for r in doc["resources"]]
        data = orjson.dumps(doc)
        assert ingest._fast_path(data, limits, False), name
        meta, stored, _ = ingest.prepare(data, "identity", {"app": "a"}, None, limits, False)
        assert stored == data


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


BOMB = gz(b"{" + b" " * (70 << 20) + b"}")  # 70 MiB of nothing in ~70 KB
JUNK = b"x" * ((8 << 20) - 1)  # junk just under --max-body


def test_refused_uploads_free_their_memory_at_once(tmp_path: Path) -> None:
    """Nothing of a refused request waits for the cyclic GC: with the GC off, the bytes
    alive after a few gzip bombs and junk bodies are what was alive before (an exception
    raised in the worker thread and anyio's Future used to hold each 64 MiB inflation)."""
    import gc
    import tracemalloc

    import anyio

    from jsprof.serve.app import create_app
    from jsprof.serve.config import ServeConfig
    from serve_util import _lifespan, asgi_call_async

    async def main() -> tuple[int, int, list[int]]:
        st = Store(tmp_path / "st")
        app = create_app(ServeConfig(store=str(tmp_path / "st"), apps={"shop": "k1"}), st)
        statuses = []
        try:
            async with _lifespan(app):
                gc.collect()
                gc.disable()
                tracemalloc.start()
                try:
                    before = tracemalloc.get_traced_memory()[0]
                    small = b"y" * 500_000  # checked on the loop, not in the thread
                    for body, enc in [(BOMB, "gzip"), (JUNK, None), (small, None)] * 3:
                        h = {"content-type": "application/json"}
                        if enc:
                            h["content-encoding"] = enc
                        status, _, _ = await asgi_call_async(
                            app, "POST", "/v1/traces?app=shop&key=k1", body, h, lifespan=False
                        )
                        statuses.append(status)
                    await anyio.sleep(0.2)  # the worker threads drop their last job
                    alive = tracemalloc.get_traced_memory()[0] - before
                    gc.collect()
                    freed_by_gc = alive - (tracemalloc.get_traced_memory()[0] - before)
                finally:
                    tracemalloc.stop()
                    gc.enable()
        finally:
            st.close()
        return alive, freed_by_gc, statuses

    alive, freed_by_gc, statuses = anyio.run(main)
    assert statuses == [413, 400, 400] * 3
    assert freed_by_gc < 1 << 20, f"{freed_by_gc >> 20} MiB waited for the GC"
    assert alive < 4 << 20, f"{alive >> 20} MiB still alive"


def test_refused_uploads_leave_rss_flat_on_a_real_server(tmp_path: Path) -> None:
    col = Collector(tmp_path / "st", "--app", "shop:k1")
    try:
        good = gz(field_trace(2000))
        # Warm up: the allocator's arenas, the thread pool, the imports.
        assert col.post(BOMB, encoding="gzip")[0] == 413
        assert col.post(JUNK)[0] == 400
        for i in range(5):
            assert col.post(good, f"app=shop&key=k1&id=warm-{i}", encoding="gzip")[0] == 202
        base = _rss(col.proc.pid)
        peak = base
        errors: list[object] = []

        def sender(n: int) -> None:
            for j in range(n):
                body, enc, want = (BOMB, "gzip", 413) if j % 2 else (JUNK, None, 400)
                status, doc = col.post(body, encoding=enc)
                if status != want:
                    errors.append((status, doc))

        ts = [threading.Thread(target=sender, args=(20,)) for _ in range(4)]
        [t.start() for t in ts]
        while any(t.is_alive() for t in ts):
            peak = max(peak, _rss(col.proc.pid))
            time.sleep(0.05)
        [t.join() for t in ts]
        assert not errors, errors[:3]
        # Normal traffic afterwards still lands.
        for i in range(5):
            assert col.post(good, f"app=shop&key=k1&id=after-{i}", encoding="gzip")[0] == 202
        end = _rss(col.proc.pid)
    finally:
        col.stop()
    # 40 bombs and 40 junk bodies: pinned they were 40 x 64 MiB + 40 x 8 MiB (~2.8 GiB).
    # At most four are in flight at once (~4 x 72 MiB); after them the process is back.
    assert peak - base < 450 << 20, f"peak {(peak - base) >> 20} MiB over {base >> 20} MiB"
    assert end - base < 200 << 20, f"end {(end - base) >> 20} MiB over {base >> 20} MiB"


def _sockets(pid: int) -> int:
    n = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            n += os.readlink(fd).startswith("socket:")
        except OSError:
            pass
    return n


class Slowloris:
    """Keeps `n` connections open to the collector, each sending as little as it can: some
    nothing, some a request line a byte at a time, some headers then a body a byte at a
    time. A closed one is opened again at once. Stops by itself after `seconds`."""

    def __init__(self, host: str, port: int, n: int, seconds: float) -> None:
        import socket

        self.socket = socket
        self.host, self.port, self.n, self.seconds = host, port, n, seconds
        self.reopened = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _open(self, i: int) -> tuple[object, bytes]:
        s = self.socket.socket()
        s.setblocking(False)
        try:
            s.connect((self.host, self.port))
        except BlockingIOError:
            pass
        kind = i % 3
        if kind == 0:
            return s, b""  # silent
        if kind == 1:
            return s, b"POST /v1/traces?app=shop&key=k1 HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 500
        head = (
            b"POST /v1/traces?app=shop&key=k1 HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
        )
        return s, head + b" " * 100000

    def _run(self) -> None:
        conns = [[*self._open(i), 0] for i in range(self.n)]
        end = time.monotonic() + self.seconds
        while time.monotonic() < end:
            for i, c in enumerate(conns):
                s, data, sent = c
                step = 1 if data[sent : sent + 1] != b"\n" else 2
                if i % 3 == 2 and sent == 0:
                    step = data.index(b"\r\n\r\n") + 4  # the headers at once, then the body
                try:
                    if data and sent < len(data):
                        c[2] += s.send(data[sent : sent + step])
                    else:
                        s.recv(1 << 16)  # a closed connection shows here
                        raise ConnectionResetError
                except BlockingIOError:
                    pass
                except OSError:
                    s.close()
                    self.reopened += 1
                    conns[i] = [*self._open(i), 0]
            time.sleep(0.25)
        for s, _, _ in conns:
            s.close()


def test_slow_clients_cannot_starve_uploads(tmp_path: Path) -> None:
    """Slowloris on loopback against a collector with a small open-file limit (256): 400
    connections that send next to nothing (more than it has file descriptors). Uploads still
    land, the server's sockets stay under its cap, and a stalled request is answered 408."""
    col = Collector(tmp_path / "st", "--app", "shop:k1", "--read-timeout", "2", nofile=256)
    attack = Slowloris(col.host, col.port, 400, seconds=12)
    body = gz(field_trace(2000))
    try:
        assert col.post(body, "app=shop&key=k1&id=before", encoding="gzip")[0] == 202
        attack.thread.start()
        time.sleep(2)
        results: list[object] = []
        most = 0
        while attack.thread.is_alive() and len(results) < 200:
            most = max(most, _sockets(col.proc.pid))
            try:
                status, _ = col.post(body, f"app=shop&key=k1&id=u{len(results)}", encoding="gzip")
            except OSError as e:
                status = repr(e)
            results.append(status)
            time.sleep(0.05)
        # A request that stalls mid-headers is answered 408 in JSON, then closed.
        import socket

        s = socket.create_connection((col.host, col.port), timeout=15)
        s.sendall(b"POST /v1/traces?app=shop HTTP/1.1\r\nHost: x\r\n")
        t0 = time.monotonic()
        answer = b""
        while chunk := s.recv(4096):
            answer += chunk
        took = time.monotonic() - t0
        s.close()
        attack.thread.join()
    finally:
        col.stop()
    assert len(results) >= 10 and all(r == 202 for r in results), results
    assert attack.reopened > 100  # the collector closed the attacker's connections
    assert most < 256, most
    assert answer.startswith(b"HTTP/1.1 408 ") and b'{"error":' in answer, answer[:200]
    assert took < 2 + 10, took  # --read-timeout 2, checked twice a second (a loaded box)


def test_full_disk_answers_503_and_ingest_resumes(tmp_path: Path) -> None:
    """The store on a 4 MiB tmpfs (its own mount namespace: no root needed, gone with the
    process) that fills up: 503 with Retry-After, one log line, every 202 reads back; once
    space is freed, uploads land again without a restart."""
    import shlex

    mnt = tmp_path / "small"
    mnt.mkdir()
    setup = (
        f"mount -t tmpfs -o size=4m tmpfs {shlex.quote(str(mnt))} && "
        f'head -c 2900000 /dev/zero > {shlex.quote(str(mnt))}/ballast && exec "$@"'
    )
    col = Collector(
        mnt / "st",
        "--app",
        "shop:k1",
        wrap=["unshare", "--mount", "--map-root-user", "sh", "-c", setup, "sh"],
    )
    body = fixture_bytes("trace-basic.json")  # ~20 KB, stored compressed
    acked: list[str] = []
    full: list[tuple[str, dict]] = []
    statuses: list[int] = []
    try:
        for i in range(400):
            status, h, data = col.request(
                "POST",
                f"/v1/traces?app=shop&key=k1&id=u{i}",
                body + b" " * (i % 7),  # not one repeated body: each record stored apart
                {"Content-Type": "application/json"},
            )
            assert status in (202, 503), (status, data)
            statuses.append(status)
            if status == 202:
                acked.append(f"u{i}")
            else:
                assert int(h["retry-after"]) > 0 and "full" in orjson.loads(data)["error"]
                full.append((f"u{i}", h))
                if len(full) >= 20:
                    break
        assert acked and len(full) >= 20, (len(acked), len(full))
        for uid in acked:
            assert col.get(uid)[0] == 200, uid
        # Space comes back: the collector's view of its tmpfs, through /proc.
        Path(f"/proc/{col.proc.pid}/root{mnt}/ballast").unlink()
        resumed = [col.post(body, f"app=shop&key=k1&id=after-{i}")[0] for i in range(5)]
        assert resumed == [202] * 5, resumed
        for uid in acked:
            assert col.get(uid)[0] == 200, uid
    finally:
        col.stop()
    log = "".join(col.stderr_lines)
    # One line per episode: a run of 503s with no upload stored in it. The compactor,
    # running while the disk fills, can free a little (a failed compaction's own files)
    # and let an upload land between two runs (CI: a line at a segment's write, then one
    # at a claim's, a 202 between): that is a new episode, said again. A line per request
    # would give one per 503, and the runs are fewer than the 503s.
    runs = sum(1 for i, st in enumerate(statuses)
               if st == 503 and (i == 0 or statuses[i - 1] == 202))
    assert runs < len(full), statuses
    assert log.count("disk is full") == runs, (statuses, log[-2000:])
    assert "Traceback" not in log


def test_a_store_that_cannot_be_written_answers_503_not_500(tmp_path: Path) -> None:
    """A disk error (here: the claims folder remounted read-only, as ext4 does itself after
    an I/O error with errors=remount-ro; a bind mount in the collector's own mount
    namespace, no root needed) is `StoreIOError`: 503 with Retry-After and a JSON error,
    one log line per episode (not one traceback per request), stored uploads still read
    back, and ingest resumes by itself once the disk takes writes again."""
    import shlex
    import subprocess

    st = tmp_path / "st"
    claims = st / "claims"
    claims.mkdir(parents=True)
    setup = f'mount --bind {shlex.quote(str(claims))} {shlex.quote(str(claims))} && exec "$@"'
    col = Collector(
        st, "--app", "shop:k1",
        wrap=["unshare", "--mount", "--map-root-user", "sh", "-c", setup, "sh"],
    )

    def remount(mode: str) -> None:
        # In the collector's namespaces (a claim file open for writing at that instant
        # makes the kernel refuse a read-only remount: try again).
        for _ in range(50):
            r = subprocess.run(
                ["nsenter", "-t", str(col.proc.pid), "-U", "-m", "--preserve-credentials",
                 "mount", "-o", f"remount,bind,{mode}", str(claims)],
                capture_output=True, text=True,
            )
            if r.returncode == 0:
                return
            time.sleep(0.1)
        raise AssertionError(r.stderr)

    body = fixture_bytes("trace-basic.json")
    try:
        assert col.post(body, "app=shop&key=k1&id=before")[0] == 202
        for episode in range(2):
            remount("ro")
            for i in range(5):
                status, h, data = col.request(
                    "POST", f"/v1/traces?app=shop&key=k1&id=ro-{episode}-{i}", body,
                    {"Content-Type": "application/json"},
                )
                assert status == 503, (status, data)
                assert int(h["retry-after"]) > 0 and h["content-type"] == "application/json"
                err = orjson.loads(data)["error"]
                assert "retry later" in err and "\n" not in err, err
            assert col.get("before")[0] == 200  # reads go on
            remount("rw")
            assert col.post(body, f"app=shop&key=k1&id=after-{episode}")[0] == 202
            assert col.get(f"after-{episode}")[0] == 200
            assert col.get(f"ro-{episode}-0")[0] == 404  # refused, so never stored
    finally:
        col.stop()
    log = "".join(col.stderr_lines)
    assert log.count("cannot be written: disk I/O error") == 2, log[-3000:]  # once an episode
    assert "Traceback" not in log and " 500" not in log, log[-3000:]


def _outcome(fn, *args) -> tuple:
    from jsprof.serve import ingest

    try:
        meta, trace_json = fn(*args)[:2]
    except ingest.Refused as e:
        return ("refused", e.status, e.message)
    meta = {k: v for k, v in meta.items() if k != "receivedAt"}
    return ("stored", meta, orjson.loads(trace_json))


def test_prepare_decides_as_the_general_path_bare_and_enveloped() -> None:
    """Every body of the malformed corpus, bare and in the browser client's envelope (and
    the real traces, valid): `prepare` (with its fast paths) stores or refuses exactly as
    the dict path does, with the same words; a valid envelope keeps its trace's bytes."""
    from jsprof.serve import ingest
    from jsprof.serve.config import Limits

    limits = Limits()
    params = {"app": "a", "release": "r", "route": None, "env": None}
    datas = []
    for label, body, enc, _ in _corpus():
        try:
            data, _ = ingest.decode_body(body, enc or "identity", limits)
        except ingest.Refused:
            continue
        datas.append((label, data))
    for name in REAL:
        doc = orjson.loads(fixture_bytes(name))
        datas.append((name, orjson.dumps(doc)))
        doc["resources"] = [r.split("?")[0] for r in doc["resources"]]
        datas.append((name + " clean", orjson.dumps(doc)))
    seen_envelope_fast = 0
    for label, data in datas:
        for form, body in (
            ("bare", data),
            ("envelope", b'{"trace":' + data + b',"meta":{"sampleInterval":10,"build":"x"}}'),
            ("envelope no meta", b'{"trace": ' + data + b"}"),
            ("envelope bad meta", b'{"trace":' + data + b',"meta":[1]}'),
        ):
            fast = _outcome(ingest.prepare, body, "identity", params, "UA", limits, False)
            general = _outcome(ingest.prepare_general, body, params, "UA", limits, False)
            assert fast == general, (label, form, fast[:3], general[:3])
            if form == "envelope" and fast[0] == "stored":
                stored = ingest.prepare(body, "identity", params, "UA", limits, False)[1]
                if stored == data:
                    seen_envelope_fast += 1
    assert seen_envelope_fast >= len(REAL)  # the clean real traces: bytes kept as sent


def test_small_bodies_on_the_loop_big_ones_in_the_thread() -> None:
    """What is checked on the event loop is what says it is small, and a body that lies
    about it (a gzip ISIZE trailer) is inflated no further than INLINE_MAX there before the
    thread decides with the real limits: the same answers either way."""
    from jsprof.serve import ingest
    from jsprof.serve.config import Limits

    limits = Limits()
    params = {"app": "a", "release": None, "route": None, "env": None}
    small = field_trace(2000)
    big = field_trace(30000)
    assert len(small) < ingest.INLINE_MAX < len(big)
    for body, enc, inline in (
        (small, "identity", True),
        (gz(small), "gzip", True),
        (gz(small), "identity", True),  # sendBeacon's gzip without Content-Encoding
        (big, "identity", False),
        (gz(big), "gzip", False),
        (zlib.compress(small), "deflate", False),  # no size to go by
    ):
        assert ingest.says_small(body, enc) == inline
        want = ingest.prepare(body, enc, params, None, limits, False)
        if inline:
            got = ingest.prepare_small(body, enc, params, None, limits, False)
            assert got[1:] == want[1:]
    # A gzip that says it is small and is not: the loop gives up at INLINE_MAX...
    liar = bytearray(gz(big))
    liar[-4:] = (100).to_bytes(4, "little")
    liar = bytes(liar)
    assert ingest.says_small(liar, "gzip")
    assert ingest.prepare_small(liar, "gzip", params, None, limits, False) is None
    # ... and the full path refuses it (its length check fails at the end).
    with pytest.raises(ingest.Refused) as e:
        ingest.prepare(liar, "gzip", params, None, limits, False)
    assert e.value.status == 400
    bomb = bytearray(BOMB)
    bomb[-4:] = (100).to_bytes(4, "little")
    assert ingest.prepare_small(bytes(bomb), "gzip", params, None, limits, False) is None
    with pytest.raises(ingest.Refused) as e:
        ingest.prepare(bytes(bomb), "gzip", params, None, limits, False)
    assert e.value.status == 413
