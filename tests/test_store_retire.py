"""Claims retired into the claim index and raw segments removed once compacted
(store/retention.py): the store's files stay few, and an upload is still found, still a
duplicate when sent again, and stored again once pruned."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from fleet_util import make_trace, upload
from jsprof.store import RawRemoved, Store
from jsprof.store.retention import prune, remove_raw, retire_claims, sweep_claims
from jsprof.store.tables.compact import compact
from jsprof.store.tables.manifest import read_manifest
from jsprof.store.tables.merge import merge_parts

T0 = 1.7e12


def _claim_files(store: Path) -> int:
    return sum(len(files) for d, _, files in os.walk(store / "claims")
               if "index" not in Path(d).parts)


def _files(store: Path) -> int:
    return sum(len(files) for _, _, files in os.walk(store))


def _fill(path: Path, n: int, start: int = 0, segment_bytes: int = 200_000) -> list[str]:
    st = Store(path, segment_bytes=segment_bytes)
    rng = np.random.default_rng(start)
    ids = []
    for i in range(start, start + n):
        upload(st, f"u{i}", make_trace(rng, 40), app="shop", release="1.0", receivedAt=T0 + i)
        ids.append(f"u{i}")
    st.close()
    return ids


def test_retired_claims_are_found_and_still_duplicates(tmp_path: Path) -> None:
    path = tmp_path / "st"
    ids = _fill(path, 300)
    st = Store(path)
    before = {u: st.get(u) for u in ids[::37]}
    assert _claim_files(path) == 300
    compact(st)
    got = retire_claims(st)
    assert got.claims == 300 and _claim_files(path) == 0
    assert len(list((path / "claims" / "index").glob("run-*.idx"))) == 1
    for u, doc in before.items():
        assert st.get(u) == doc and u in st
    assert "nope" not in st and st.get("nope") is None
    # A retry of a retired upload: a duplicate, and no claim file left behind by it.
    trace = make_trace(np.random.default_rng(0), 40)
    assert upload_again(st, "u5", trace) is False
    assert _claim_files(path) == 0
    assert len(st) == 300
    # Another process sees the same (its index is read from disk).
    other = Store(path)
    assert "u7" in other and other.get("u7") == st.get("u7")
    # A new upload after retirement gets a claim, retired by the next run.
    assert upload_again(st, "new-1", trace) is True
    assert _claim_files(path) == 1
    compact(st)
    assert retire_claims(st).claims == 1 and _claim_files(path) == 0
    assert "new-1" in st
    st.close()


def upload_again(st: Store, uid: str, trace: object) -> bool:
    from jsprof.formats.jsprof import dumps
    from jsprof.trace import Recording, Track

    return st.append(uid, {"app": "shop", "release": "1.0", "sampleInterval": 10.0,
                           "receivedAt": T0}, dumps(Recording([Track("main", trace)])))


def test_runs_merge_in_tiers_and_pruned_uploads_store_again(tmp_path: Path) -> None:
    path = tmp_path / "st"
    st = Store(path, segment_bytes=100_000)
    rng = np.random.default_rng(1)
    trace = make_trace(rng, 40)
    n = 0
    for _ in range(9):  # nine retire runs of 30 uploads each
        for _ in range(30):
            assert upload_again(st, f"r{n}", trace)
            n += 1
        st.rotate()
        retire_claims(st)
    runs = list((path / "claims" / "index").glob("run-*.idx"))
    assert len(runs) < 9, runs  # merged in tiers of four
    assert _claim_files(path) == 0
    assert all(f"r{i}" in st for i in range(n))
    # Pruned: gone from the store, and stored anew when sent again (newest place wins,
    # through a later merge too).
    res = prune(st, T0 + 1)
    assert res.removed == n
    assert "r3" not in st and st.get("r3") is None
    assert upload_again(st, "r3", trace) is True
    assert "r3" in st
    for k in range(5):
        assert upload_again(st, f"late{k}", trace)
        st.rotate()
        retire_claims(st)
    assert "r3" in st and st.get("r3") is not None
    assert upload_again(st, "r3", trace) is False
    st.close()


def test_concurrent_appends_while_claims_retire(tmp_path: Path) -> None:
    """Appends of new ids and retries of old ones race retirement runs: every id is
    stored exactly once (iter_uploads), every retry is a duplicate."""
    path = tmp_path / "st"
    st = Store(path, segment_bytes=150_000)
    trace = make_trace(np.random.default_rng(2), 40)
    results: dict[str, list[bool]] = {}
    lock = threading.Lock()
    stop = threading.Event()

    def writer(k: int) -> None:
        for i in range(120):
            uid = f"w{k}-{i}"
            first = upload_again(st, uid, trace)
            again = upload_again(st, f"w{k}-{i // 2}", trace)
            with lock:
                results.setdefault(uid, []).append(first)
                results.setdefault(f"w{k}-{i // 2}", []).append(again)

    def retirer() -> None:
        while not stop.is_set():
            retire_claims(st)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    r = threading.Thread(target=retirer)
    r.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    r.join()
    st.rotate()
    retire_claims(st)
    for uid, got in results.items():
        assert got.count(True) == 1, (uid, got)
    ids = [u for _, u, _, _ in Store(path).iter_uploads()]
    assert len(ids) == len(set(ids)) == 480
    assert _claim_files(path) == 0
    st.close()


def test_a_run_killed_before_removing_claims_is_swept(tmp_path: Path) -> None:
    path = tmp_path / "st"
    _fill(path, 50)
    st = Store(path)
    import jsprof.store.retention as retire

    real = retire._remove_claim
    retire._remove_claim = lambda *a: 0  # the run dies after its index run is durable
    try:
        retire_claims(st)
    finally:
        retire._remove_claim = real
    assert _claim_files(path) == 50
    assert sweep_claims(st) == 50 and _claim_files(path) == 0
    assert all(f"u{i}" in st for i in range(50))
    st.close()


def test_raw_segments_removed_once_compacted_and_old(tmp_path: Path) -> None:
    path = tmp_path / "st"
    ids = _fill(path, 200, segment_bytes=60_000)
    st = Store(path)
    segs = len(list((path / "segments").glob("*.seg")))
    assert segs > 3
    assert remove_raw(st, 0.0) == []  # not compacted yet: nothing goes
    compact(st)
    assert remove_raw(st, 0.0) == []  # claims not retired yet
    retire_claims(st)
    # Kept for a day after they were sealed: not yet; a day later they go.
    assert remove_raw(st, 86400.0) == []
    gone = remove_raw(st, 86400.0, now=time.time() + 86401)
    assert len(gone) == segs
    assert not list((path / "segments").glob("*.seg"))
    with pytest.raises(RawRemoved):
        st.get(ids[3])
    assert ids[3] in st
    trace = make_trace(np.random.default_rng(0), 40)
    assert upload_again(st, ids[3], trace) is False  # still a duplicate
    man = read_manifest(path)
    assert sum(e["rows"] for e in man["uploads"]) == 200  # the tables keep them all
    merge_parts(path)
    st.close()


def test_during_views_leave_out_uploads_whose_raw_is_removed(tmp_path: Path) -> None:
    """`fleet top --during` reads the samples and timelines from the tables (issue 34), so
    once the raw records are removed (--keep-raw) it answers as before. (When it read raw
    records, those uploads took no part: exit 2, no window.)"""
    import subprocess

    import orjson

    from serve_util import JSPROF, Collector
    from test_timeline import _post, _timeline, _trace

    path = tmp_path / "st"
    c = Collector(path, "--app", "shop:k1", "--compact-every", "0")
    try:
        assert _post(c, {"trace": _trace(), "meta": {"pageLoad": "pl-1"}}, "c1")[0] == 202
        assert _post(c, {"trace": _trace(), "meta": {"pageLoad": "pl-1"},
                         "timeline": _timeline()}, "c2")[0] == 202
    finally:
        c.stop()

    def during() -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(JSPROF), "fleet", "top", "--json", "--during", "interaction", "--slower-than",
             "50", "--store", str(path), "--app", "shop"],
            capture_output=True, text=True, timeout=120)

    st = Store(path)
    compact(st)
    retire_claims(st)
    r = during()
    assert r.returncode == 0 and orjson.loads(r.stdout)["pageLoads"] == 1, r.stderr
    assert remove_raw(st, 0.0, now=time.time() + 1)
    st.close()
    r2 = during()
    assert r2.returncode == 0, r2.stdout + r2.stderr
    assert orjson.loads(r2.stdout) == orjson.loads(r.stdout)


def test_a_damaged_index_run_is_reported_and_ingest_goes_on(tmp_path: Path) -> None:
    import subprocess

    from serve_util import JSPROF

    path = tmp_path / "st"
    _fill(path, 20)
    st = Store(path)
    retire_claims(st)
    (run,) = (path / "claims" / "index").glob("run-*.idx")
    data = bytearray(run.read_bytes())
    data[-3] ^= 0xFF  # a flipped bit in an offset
    run.write_bytes(bytes(data))
    st2 = Store(path)  # a process that reads it afresh
    trace = make_trace(np.random.default_rng(3), 40)
    assert upload_again(st2, "after", trace) is True  # ingest goes on
    assert "after" in st2
    assert list(st2._index.damaged()) == [run.name]
    st.close()
    st2.close()
    r = subprocess.run([str(JSPROF), "serve", "check", "--store", str(path)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"claim index: {run}: damaged (its checksum fails)" in r.stdout, r.stdout
