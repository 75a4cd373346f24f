"""Compaction in the collector's background, and queries that read the uncompacted tail.

`jsprof serve` runs one compactor process per store (store/background.py), whatever the
workers; its queries never compact: they read the committed tables plus the uploads stored
since (`tables.view.read_tail`). Tested on real stores and a real collector on loopback."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import orjson

from fleet_util import damage_a_body, make_trace, upload
from jsprof.fleet import api
from jsprof.fleet.filters import Filters
from jsprof.store import Store
from jsprof.store.lock import TablesLock
from jsprof.store.tables.compact import compact
from jsprof.store.tables.manifest import read_manifest
from jsprof.store.tables.view import read_tail
from serve_util import JSPROF, READ_TOKEN, Collector, field_trace

T0 = 1.7e12


def _fill(st: Store, rng: np.random.Generator, start: int, n: int) -> None:
    for i in range(start, start + n):
        rel, hot = (("1.0", None), ("1.1", "slowThing"), ("2.0", "newThing"))[i % 3]
        upload(st, f"u{i}", make_trace(rng, 300, hot=hot, hot_share=0.2), app="shop",
               release=rel, route=f"/p/{i % 2}", env="prod", receivedAt=T0 + i * 60e3,
               pageLoad=f"pl{i // 2}")


def _queries(s: api.Session) -> dict:
    f = Filters(app="shop")
    doc, _ = api.diff(s, Filters(app="shop", release="1.0"), Filters(app="shop", release="1.1"),
                      None, [], 2, 100, None, 50)
    return {
        "top": api.top(s, f, None),
        "top-1.1": api.top(s, Filters(app="shop", release="1.1"), 5),
        # Float sums of the same ns weights in another row order (the tail's stack ids are
        # not the compacted ones) may differ in the last bit: compared to 1e-6 ms.
        "flame": re.sub(r"\d+\.\d+", lambda m: f"{float(m[0]):.6f}",
                        api.flame(s, f, "svg", 500)),
        "diff": doc,
        "list": api.list_uploads(s, f, 100),
        "series": api.series(s, f, "slowThing"),
        "options": api.options(s, "shop"),
        "export": api.recording(s, f).tracks[0].meta,
    }


def test_a_query_reads_the_uncompacted_tail_as_compaction_would_count_it(
    tmp_path: Path,
) -> None:
    """Committed tables plus the tail give the very documents the same store gives once
    compacted (frames known to the tables and new ones, a release only in the tail), and
    reading the tail writes nothing of the store's tables."""
    st = Store(tmp_path / "store")
    rng = np.random.default_rng(11)
    _fill(st, rng, 0, 8)  # releases 1.0, 1.1 and 2.0 compacted ...
    compact(st)
    _fill(st, rng, 8, 9)  # ... and more of each stored since
    upload(st, "new-release", make_trace(rng, 300, hot="onlyHere", hot_share=0.3), app="shop",
           release="3.0", route="/p/0", env="prod", receivedAt=T0 + 99 * 60e3)
    tables = tmp_path / "store" / "tables"
    before = sorted(p.relative_to(tables) for p in tables.rglob("*"))
    man = read_manifest(st.path)
    with api.session(st) as s:
        assert s.snap.pending == 0
        tail_docs = _queries(s)
    assert sorted(p.relative_to(tables) for p in tables.rglob("*")) == before
    assert read_manifest(st.path) == man
    assert tail_docs["top"]["traces"] == 18 and "3.0" in tail_docs["options"]["releases"]
    with api.session(st, tail_limit=0) as s:  # the tables alone: what was compacted
        assert api.top(s, Filters(app="shop"), None)["traces"] == 8
    compact(st)
    with api.session(st) as s:
        assert _queries(s) == tail_docs
    st.close()


def test_the_tail_a_query_reads_is_capped_and_what_it_leaves_out_is_counted(
    tmp_path: Path,
) -> None:
    st = Store(tmp_path / "store")
    _fill(st, np.random.default_rng(3), 0, 7)
    tail = read_tail(st, read_manifest(st.path), limit=3)
    assert (tail.uploads, tail.pending) == (3, 4)
    assert tail.manifest["nextUk"] == 3
    with api.session(st) as s:
        assert s.snap.pending == 0 and api.top(s, Filters(app="shop"), 3)["traces"] == 7
    st.close()
    # Counted from the trailer of a sealed segment, the headers of an open one.
    st = Store(tmp_path / "store")
    _fill(st, np.random.default_rng(4), 7, 2)
    assert len(list((tmp_path / "store" / "segments").glob("*.seg"))) == 2
    assert st.count_uploads() == 9 == len(st)
    cursors = [c for c, *_ in st.iter_uploads()]
    assert [st.count_uploads(c) for c in cursors] == list(range(8, -1, -1))
    tail = read_tail(st, read_manifest(st.path), limit=5)
    assert (tail.uploads, tail.pending) == (5, 4)
    st.close()


# ---- a real collector on loopback ------------------------------------------------------------


def _manifest_uk(store: Path) -> int:
    p = store / "tables" / "_manifest.json"
    return orjson.loads(p.read_bytes())["nextUk"] if p.exists() else 0


def _compactors(store: Path) -> list[int]:
    """Pids of compactor processes of this store (`python -m jsprof.store.background`)."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"jsprof.store.background" in cmd and str(store).encode() in cmd:
            try:
                state = (d / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if state != "Z":
                out.append(int(d.name))
    return out


def _wait(cond, timeout: float, what: str) -> None:  # noqa: ANN001
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.2)


def _top(col: Collector, **q: str) -> dict:
    from urllib.parse import urlencode

    status, _, data = col.request(
        "GET", f"/v1/query/top?{urlencode({'app': 'shop', **q})}",
        headers={"Authorization": f"Bearer {READ_TOKEN}"}, timeout=300,
    )
    assert status == 200, data
    return orjson.loads(data)


def test_the_collector_compacts_by_itself_and_a_query_reads_what_it_has_not(
    tmp_path: Path,
) -> None:
    body = field_trace(500)
    # No compactor (--compact-every 0): a query still counts every upload (the tail) and
    # compacts nothing itself.
    col = Collector(tmp_path / "a", "--app", "shop:k1", "--compact-every", "0")
    try:
        for i in range(6):
            assert col.post(body, f"app=shop&key=k1&release=1.0&id=a{i}")[0] == 202
        doc = _top(col, top="3")
        assert (doc["traces"], doc["pendingUploads"], doc["damagedRecords"]) == (6, 0, 0)
        assert _manifest_uk(tmp_path / "a") == 0 and not _compactors(tmp_path / "a")
    finally:
        col.stop()
    # The default: uploads are compacted in the background, no query asked.
    col = Collector(tmp_path / "b", "--app", "shop:k1", "--compact-every", "1")
    try:
        for i in range(8):
            assert col.post(body, f"app=shop&key=k1&release=1.0&id=b{i}")[0] == 202
        _wait(lambda: _manifest_uk(tmp_path / "b") == 8, 90, "8 uploads compacted")
        assert _compactors(tmp_path / "b")
        assert _top(col, top="3")["traces"] == 8
    finally:
        col.stop()
    _wait(lambda: not _compactors(tmp_path / "b"), 10, "the compactor gone with the collector")


def test_one_compactor_per_store_and_another_worker_takes_over_when_its_worker_dies(
    tmp_path: Path,
) -> None:
    store = tmp_path / "st"
    body = field_trace(300)
    col = Collector(store, "--app", "shop:k1", "--workers", "2", "--compact-every", "1")
    lease = store / "tables" / "_compactor.lock"

    def holder() -> int:
        text = lease.read_text().strip() if lease.exists() else ""
        return int(text) if text.isdigit() else 0

    try:
        _wait(lambda: holder() and len(_compactors(store)) == 1, 60, "a compactor")
        first = holder()
        assert first != col.proc.pid  # a worker holds it, not the supervisor
        for _ in range(5):  # exactly one, over a while
            assert len(_compactors(store)) == 1, _compactors(store)
            time.sleep(0.3)
        for i in range(10):
            assert col.post(body, f"app=shop&key=k1&release=1.0&id=x{i}")[0] == 202
        _wait(lambda: _manifest_uk(store) == 10, 90, "10 uploads compacted")
        old = _compactors(store)
        os.kill(first, signal.SIGKILL)  # the worker that runs the compactor
        _wait(lambda: holder() not in (0, first) and _compactors(store)
              and not set(_compactors(store)) & set(old), 60, "another worker's compactor")
        assert len(_compactors(store)) == 1
        for i in range(10):
            assert col.post(body, f"app=shop&key=k1&release=1.0&id=y{i}")[0] == 202
        _wait(lambda: _manifest_uk(store) == 20, 90, "20 uploads compacted")
    finally:
        col.stop()
    assert "Traceback" not in "".join(col.stderr_lines)


def _held_at_work(pid: int, store: Path) -> bool:
    """Whether the stopped compactor `pid` is mid-run: it has the store's raw segments open
    and someone holds the tables' lock (only a compactor takes it; this test runs no other).
    Probed without waiting; if the lock was free it is let go at once."""
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False
    seg = str(store / "segments")
    reading = False
    for fd in fds:
        try:
            reading = reading or os.readlink(fd).startswith(seg)
        except OSError:
            pass
    if not reading:
        return False
    with TablesLock(store / "tables", wait=False) as probe:
        return not probe.held


def test_a_query_during_a_long_compaction_does_not_hold_ingest(tmp_path: Path) -> None:
    """A backlog the compactor needs a while for. Caught mid-run and held there (SIGSTOP:
    its lock taken, its segments open, it will not finish until let go), uploads are still
    acknowledged and a query still answers from the tables and a capped tail: neither waits
    on the compaction. Decided on what the test knows, not on rates: an ingest or a query
    that waited on the held compaction would never be answered (the deadline below only
    turns that hang into a failure)."""
    store_path = tmp_path / "st"
    st = Store(store_path)
    big = field_trace(3000)
    n_backlog = 1200

    def fill(k: int) -> None:
        for i in range(k, n_backlog, 4):
            st.append(f"old{i}", {"app": "shop", "release": "1.0", "sampleInterval": 10,
                                  "receivedAt": T0 + i}, big)

    fillers = [threading.Thread(target=fill, args=(k,)) for k in range(4)]
    for t in fillers:
        t.start()
    for t in fillers:
        t.join()
    st.close()
    col = Collector(store_path, "--app", "shop:k1", "--compact-every", "1")
    small = field_trace(300)
    acked: list[str] = []
    errors: list[str] = []

    def uploader(k: int, n: int) -> None:
        import http.client

        # Generous: only an upload that waits on the held compaction reaches it.
        c = http.client.HTTPConnection(col.host, col.port, timeout=300)
        for i in range(n):
            uid = f"n{k}-{i}"
            try:
                c.request("POST", f"/v1/traces?app=shop&key=k1&release=2.0&id={uid}", small,
                          {"Content-Type": "application/json"})
                r = c.getresponse()
                r.read()
            except OSError as e:
                errors.append(f"{uid}: {e!r} (waiting on the held compaction?)")
                return
            if r.status != 202:
                errors.append(f"{uid}: HTTP {r.status}")
                return
            acked.append(uid)

    held = None
    try:
        deadline = time.monotonic() + 120
        while held is None:
            assert time.monotonic() < deadline, "no compaction caught at work"
            pids = _compactors(store_path)
            if not pids:
                time.sleep(0.05)
                continue
            pid = pids[0]
            try:
                os.kill(pid, signal.SIGSTOP)
            except ProcessLookupError:
                continue
            if _held_at_work(pid, store_path):
                held = pid
            else:  # between runs or still starting: let it go on and look again
                os.kill(pid, signal.SIGCONT)
                time.sleep(0.02)
        before = _manifest_uk(store_path)
        threads = [threading.Thread(target=uploader, args=(k, 10), daemon=True)
                   for k in range(4)]
        for t in threads:
            t.start()
        doc = _top(col, top="5")
        for t in threads:
            t.join(600)
        # Still held mid-run, its lock still taken, its tables not committed: everything
        # above was answered before the compaction ended.
        assert _held_at_work(held, store_path), "the held compaction let go of its work"
        assert _manifest_uk(store_path) == before
    finally:
        if held is not None:
            os.kill(held, signal.SIGCONT)
        col.stop()
    assert not errors, errors[:3]
    assert len(acked) == 40, acked
    # The query did not compact the backlog nor wait for it: its answer counts the tables
    # and a capped tail, and says how many uploads it left for later (a query that
    # compacted first would count them all).
    assert doc["pendingUploads"] > 0 and doc["traces"] > 0, doc


def test_damaged_records_are_counted_and_reported_by_every_query(
    tmp_path: Path, capsys, monkeypatch,  # noqa: ANN001
) -> None:
    """A flipped byte in one stored body: queries count the 5 others and say that 1 record
    could not be read: `damagedRecords` in JSON (CLI --json and HTTP, from the tail before
    compaction and from the manifest after), one note on stderr in text output."""
    from jsprof.cli import main

    path = tmp_path / "st"
    st = Store(path)
    _fill(st, np.random.default_rng(8), 0, 6)
    st.close()
    damage_a_body(path)  # the third upload's checksum fails

    col = Collector(path, "--app", "shop:k1", "--compact-every", "0")
    try:
        doc = _top(col)  # nothing compacted: met in the tail
        assert (doc["traces"], doc["damagedRecords"]) == (5, 1), doc
        top = ["fleet", "top", "--store", str(path), "--app", "shop"]
        assert main([*top, "--json"]) == 0  # compacts: now listed in the manifest
        out = capsys.readouterr()
        got = orjson.loads(out.out)
        assert (got["traces"], got["damagedRecords"], got["pendingUploads"]) == (5, 1, 0)
        assert "damaged" not in out.err  # --json says it in the document
        assert main(top) == 0
        err = capsys.readouterr().err.strip().splitlines()
        notes = [ln for ln in err if "damaged record" in ln]
        assert len(notes) == 1 and notes[0].startswith("jsprof: note: 1 damaged record in "), err
        assert f"serve check --store {path}" in notes[0]
        assert _top(col)["damagedRecords"] == 1  # from the manifest, counted once
        monkeypatch.setenv("JSPROF_READ_TOKEN", READ_TOKEN)
        assert main(["fleet", "diff", "--url", col.url, "--app", "shop", "--base",
                     "release=1.0", "--new", "release=1.1", "--min-traces", "1",
                     "--min-samples", "1", "--resamples", "20"]) == 0
        err = capsys.readouterr().err
        assert err.count("1 damaged record in the collector's store") == 1, err
    finally:
        col.stop()


def test_a_bad_compact_every_names_the_off_switch(tmp_path: Path) -> None:
    # `--compact-every -1` said "must be over 0", although 0 (off) is taken.
    for bad in ("-1", "abc", "1e9"):
        r = subprocess.run([str(JSPROF), "serve", "--store", str(tmp_path / "s"), "--app",
                            "shop:k1", "--compact-every", bad], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and "(or 0: off)" in r.stderr, r.stderr
    assert not (tmp_path / "s").exists()
