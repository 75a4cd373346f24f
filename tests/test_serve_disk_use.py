"""`/metrics` and `/v1/status` report the store's disk use at bounded cost (issue 34): a
scrape never walks the store while the compactor's report (walked after its runs) is
fresh, and a process without one walks it at most once per `DISK_USE_EVERY_S`; the numbers
are those of a walk of the store after uploads and compaction. The scrape code runs
in-process (its stat calls counted) on a real store, and through a real collector with
its compactor process on loopback."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from fleet_util import make_trace, upload
from jsprof.serve import metrics
from jsprof.store import Store, health
from jsprof.store.tables.compact import compact
from serve_util import READ_TOKEN, Collector, fixture_bytes

T0 = 1.7e12
JSON = {"Content-Type": "application/json"}


class _Count:
    """Calls of os.lstat (files stat'ed) and os.scandir (folders listed), by path."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.lstat: list[str] = []
        self.scandir: list[str] = []
        real_lstat, real_scandir = os.lstat, os.scandir

        def lstat(p, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
            self.lstat.append(os.fspath(p))
            return real_lstat(p, *a, **k)

        def scandir(p=".", *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
            self.scandir.append(os.fspath(p))
            return real_scandir(p, *a, **k)

        monkeypatch.setattr(os, "lstat", lstat)
        monkeypatch.setattr(os, "scandir", scandir)

    def clear(self) -> None:
        self.lstat.clear()
        self.scandir.clear()


def _scrape(m: metrics.Metrics, store: Store) -> dict[tuple[str, str], float]:
    out = {}
    for fam in text_string_to_metric_families(m.exposition(store, False).decode()):
        for s in fam.samples:
            if s.name in ("jsprof_store_bytes", "jsprof_store_files"):
                out[(s.name, s.labels["dir"])] = s.value
    return out


def _as_metrics(use: health.DiskUse) -> dict[tuple[str, str], float]:
    return {**{("jsprof_store_bytes", k): float(v) for k, v in use.bytes.items()},
            **{("jsprof_store_files", k): float(v) for k, v in use.files.items()}}


def _add(st: Store, rng: np.random.Generator, tag: str, n: int) -> None:
    for i in range(n):
        upload(st, f"{tag}{i}", make_trace(rng, 300), app="shop", release="1.0",
               receivedAt=T0 + i * 1e3)


def test_a_scrape_walks_the_store_at_most_once_per_interval_and_reads_the_compactors_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    st = Store(tmp_path / "st")
    rng = np.random.default_rng(4)
    _add(st, rng, "a", 30)
    compact(st)
    health._walked.clear()  # noqa: SLF001 - a fresh process
    m = metrics.Metrics(["shop"])
    count = _Count(monkeypatch)
    # "Within the interval" is an hour here: a compaction at load 40 can take seconds, and
    # the steps below must not find the interval over because the machine was slow.
    monkeypatch.setattr(health, "DISK_USE_EVERY_S", 3600.0)

    # The first scrape of a process walks (no compactor report here): right numbers.
    first = _scrape(m, st)
    files = sum(health.disk_use(st.path).files.values())
    assert first == _as_metrics(health.disk_use(st.path))
    assert first[("jsprof_store_files", "tables")] > 0
    count.clear()
    # The next ones within the interval stat no file and list no folder but the segments'
    # (the compaction lag reads their trailers), however many there are.
    for _ in range(5):
        assert _scrape(m, st) == first
        assert metrics.status(st, False)["store"]["files"] == files
    assert count.lstat == []
    assert set(count.scandir) <= {str(st.path / "segments")}, count.scandir

    # Uploads and a compaction change the store: once the interval is over, the next
    # scrape walks again, once, and says what a walk says.
    _add(st, rng, "b", 20)
    compact(st)
    assert _scrape(m, st) == first  # still the walk of less than an interval ago
    monkeypatch.setattr(health, "DISK_USE_EVERY_S", 0.0)
    count.clear()
    now = _scrape(m, st)
    assert len(count.lstat) == one_walk(count, st) and now != first
    monkeypatch.setattr(health, "DISK_USE_EVERY_S", 3600.0)
    assert now == _as_metrics(health.disk_use(st.path))

    # The compactor's report (walked after its run): every scrape takes it, walking nothing.
    _add(st, rng, "c", 10)
    compact(st)
    walked = health.disk_use(st.path)
    health.record_run(st.path, None, disk=walked)
    count.clear()
    for _ in range(5):
        got = _scrape(m, st)
        assert metrics.status(st, False)["store"]["bytes"] == walked.total_bytes
    assert count.lstat == [] and set(count.scandir) <= {str(st.path / "segments")}
    assert got == _as_metrics(walked) and got != now
    # A report older than the interval is not taken: this process walks (once).
    health.record_run(st.path, None, now=time.time() - 7200, disk=walked)  # 2 h > 1 h
    health._walked.clear()  # noqa: SLF001
    count.clear()
    _scrape(m, st)
    _scrape(m, st)
    assert len(count.lstat) == one_walk(count, st)
    st.close()


def one_walk(count: _Count, st: Store) -> int:
    """The stat calls of one walk of the store as it is (every file, and its folders)."""
    count.clear()
    health.disk_use(st.path)
    n = len(count.lstat)
    files = sum(len(f) for _, _, f in os.walk(st.path))
    assert n >= files > 0
    return n


def test_a_collectors_scrapes_report_what_its_compactor_walked(tmp_path: Path) -> None:
    """A real collector with its compactor process: after uploads and compaction, the
    scraped disk use is the compactor's report, and the report is what a walk of the store
    finds once the store is quiet; more uploads, the same again."""
    store = tmp_path / "st"
    col = Collector(store, "--app", "shop:k1", "--compact-every", "1")
    auth = {"Authorization": f"Bearer {READ_TOKEN}"}

    def scrape() -> dict[tuple[str, str], float]:
        status, _, body = col.request("GET", "/metrics", headers=auth)
        assert status == 200
        return {(s.name, s.labels["dir"]): s.value
                for fam in text_string_to_metric_families(body.decode())
                for s in fam.samples if s.name in ("jsprof_store_bytes", "jsprof_store_files")}

    def settled() -> health.DiskUse:
        """The compactor's report once it equals a walk of the (quiet) store."""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            st = health.read_status(store)
            rep = health._reported(st, time.time(), 3600.0)  # noqa: SLF001
            if rep is not None and st.get("diskUse", {}).get("at", 0) > since:
                if rep == health.disk_use(store):
                    return rep
            time.sleep(0.5)
        raise AssertionError(f"the compactor's disk use never matched the store: {st}")

    try:
        for rnd in range(2):
            for i in range(25):
                assert col.request("POST", f"/v1/traces?app=shop&key=k1&id=r{rnd}-{i}",
                                   fixture_bytes(), JSON)[0] == 202
            since = time.time()
            rep = settled()
            got = scrape()
            # Taken from the report (a walk of its own could differ from it only if the
            # store changed since: the compactor's next runs merge, retire, rewrite its
            # report; then the report moved too and the scrape equals the newer one).
            assert got == _as_metrics(rep) or got == _as_metrics(
                health._reported(health.read_status(store), time.time(), 3600.0))  # noqa: SLF001
            status, _, body = col.request("GET", "/v1/status", headers=auth)
            doc = orjson.loads(body)
            assert doc["store"]["files"] in (rep.total_files, sum(
                v for (n, _), v in scrape().items() if n == "jsprof_store_files"))
            assert rep.files.get("tables", 0) > 0
    finally:
        col.stop()


def test_the_compaction_lag_opens_only_segments_not_compacted_to_their_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scrape's compaction lag reads a sealed, compacted segment's trailer once per
    process, not on every scrape (a store keeps a week of them raw); the lag stays right
    as uploads come, are compacted, and a prune rewrites segments."""
    from jsprof.store.retention import prune

    st = Store(tmp_path / "st")
    rng = np.random.default_rng(5)
    for r in range(6):  # six sealed segments
        _add(st, rng, f"s{r}-", 4)
        st.rotate()
    compact(st)
    health._sealed.clear()  # noqa: SLF001 - a fresh process
    opened: list[str] = []
    real_open = os.open

    def counting_open(p, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        if Path(p).parent == st.path / "segments":
            opened.append(os.fspath(p))
        return real_open(p, *a, **k)

    monkeypatch.setattr(os, "open", counting_open)
    assert metrics.status(st, False)["compactor"]["pending"] == 0
    assert len(opened) == 6  # each trailer read once
    opened.clear()
    for _ in range(5):
        assert metrics.status(st, False)["compactor"]["pending"] == 0
    assert opened == []
    # New uploads in an open segment: only that one is read, and counted.
    _add(st, rng, "n", 5)
    opened.clear()
    assert health.compaction_lag(st).pending == 5
    assert len(set(opened)) == 1
    compact(st)
    assert health.compaction_lag(st).pending == 0
    # A prune rewrites segments (same record numbers) and deletes some: still right.
    st.rotate()
    prune(st, T0 + 2e3)
    _add(st, rng, "m", 3)
    assert health.compaction_lag(st).pending == 3
    compact(st)
    opened.clear()
    assert health.compaction_lag(st).pending == 0
    assert len(set(opened)) <= 1  # the open segment of the last uploads, if any
    st.close()
