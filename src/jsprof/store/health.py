"""How a store is doing, for operators: compactor lag, the compactor's recent runs, disk use.

Read-only except `record_run`, which the compactor calls after each run. Nothing here knows
of HTTP: `jsprof serve`'s `/metrics` and `/readyz` (serve/metrics.py), `jsprof serve check`
and the dashboard's status line all read these.

The compactor runs in a process of its own (store/background.py), so what it did is kept
in a small file in the store's root, `compactor.json` (not under tables/: a compactor that
fails because it cannot write tables/ must still be able to say so):
    {"lastRunAt", "lastSuccessAt", "lastFailureAt", "lastError", "consecutiveFailures",
     "failuresTotal", "runsTotal", "pid", "diskUse": {"at", "bytes", "files"}}
Replaced atomically after each run (no fsync: it is a report, not data).

Disk use costs a walk of the store (a stat of every file), so a scrape of `/metrics` or
`/v1/status` never walks it on its own: it takes the compactor's `diskUse` (walked after
a run, at most every DISK_USE_EVERY_S / 2 seconds) while that is at most DISK_USE_EVERY_S
old, else this process's own walk, made at most once per DISK_USE_EVERY_S
(`current_disk_use`). `jsprof serve check` walks (`disk_use`): it runs once.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from . import segment as seg
from .segment import RecordHeader, Trailer

STATUS = "compactor.json"
# Failures in a row after which the compactor counts as failing (readyz says not ready):
# one failed run can be a race with a prune or a full disk for a moment; three in a row at
# the default 5 s interval is a compactor that does not recover by itself.
FAILING_AFTER = 3
# How old the disk use a scrape reports may be: a store's bytes move by a compactor run's
# worth at most meanwhile (a few seconds of uploads), and Prometheus scrapes every 15-60 s.
DISK_USE_EVERY_S = 10.0


def read_status(store_path: str | os.PathLike) -> dict[str, Any]:
    """The compactor's last report (an empty dict for a store never compacted here)."""
    try:
        doc = orjson.loads((Path(store_path) / STATUS).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    return doc if type(doc) is dict else {}


def record_run(store_path: str | os.PathLike, error: str | None, now: float | None = None,
               disk: DiskUse | None = None) -> dict:
    """Add one compactor run (failed with `error`, or succeeded) to the store's report,
    with the store's disk use if walked (`disk`, as of `now`); returns the new report.
    Never raises: a report that cannot be written is logged by the caller's own failure
    (the run's error says why)."""
    now = time.time() if now is None else now
    doc = read_status(store_path)
    if disk is not None:
        doc["diskUse"] = {"at": now, "bytes": disk.bytes, "files": disk.files}
    doc = with_run(doc, error, now)
    path = Path(store_path) / STATUS
    tmp = path.with_name(f".{STATUS}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(orjson.dumps(doc))
        os.replace(tmp, path)
    except OSError:
        try:
            tmp.unlink()
        except OSError:
            pass
    return doc


def with_run(doc: dict[str, Any], error: str | None, now: float) -> dict[str, Any]:
    """The report `doc` with one more run (failed with `error`, or succeeded) at `now`:
    a local store's `compactor.json`, and a bucket's (objstore.RunReport)."""
    doc = dict(doc)
    doc["runsTotal"] = int(doc.get("runsTotal", 0)) + 1
    doc["lastRunAt"] = now
    doc["pid"] = os.getpid()
    if error is None:
        doc["lastSuccessAt"] = now
        doc["consecutiveFailures"] = 0
    else:
        doc["lastFailureAt"] = now
        doc["lastError"] = " ".join(error.split())[:500]
        doc["consecutiveFailures"] = int(doc.get("consecutiveFailures", 0)) + 1
        doc["failuresTotal"] = int(doc.get("failuresTotal", 0)) + 1
    return doc


def failing(status: dict[str, Any]) -> bool:
    """Whether the compactor's last FAILING_AFTER runs (at least) all failed."""
    return int(status.get("consecutiveFailures", 0)) >= FAILING_AFTER


@dataclass
class Lag:
    """Uploads stored but not yet in the tables, and when the oldest of them came."""

    pending: int
    oldest_received_at: float | None  # epoch ms; None when nothing is pending

    def seconds(self, now: float | None = None) -> float:
        """Age of the oldest uncompacted upload (0 when none is pending)."""
        if self.oldest_received_at is None:
            return 0.0
        now = time.time() if now is None else now
        return max(0.0, now - self.oldest_received_at / 1000.0)


# Sealed segments' record counts (their trailers'), per store, as this process read them:
# a sealed segment's count never changes (a prune's rewrite keeps record numbers), so a
# scrape opens only the segments that are open or not compacted to their end, not the
# thousands a store keeps raw for a week.
_sealed: dict[str, dict[str, int]] = {}


def compaction_lag(store: Any) -> Lag:
    """What the compactor has not reached yet, from the tables' cursor: a sealed segment it
    read to the end costs one read of its trailer, once per process; others, a scan of
    their record headers (no bodies). Read-only."""
    from .tables.manifest import CompactError, cursor_in, read_manifest

    try:
        cursor = cursor_in(read_manifest(store.path))
    except CompactError:
        cursor = None  # unreadable tables: everything is pending
    positions: dict[str, int] = dict(getattr(cursor, "positions", None) or {})
    segdir = Path(store.path) / "segments"
    pending = 0
    oldest: float | None = None
    try:
        names = sorted(e.name for e in os.scandir(segdir) if e.name.endswith(".seg"))
    except FileNotFoundError:
        names = []
    known = _sealed.get(os.fspath(store.path), {})
    sealed = _sealed[os.fspath(store.path)] = {n: known[n] for n in names if n in known}
    for name in names:
        start = positions.get(name, 0)
        if sealed.get(name, start + 1) <= start:
            continue
        try:
            fd = os.open(segdir / name, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            tr = seg.trailer_at_end(fd)
            if tr is not None:
                sealed[name] = tr.count
            if tr is not None and tr.count <= start:
                continue
            for h in seg.scan(fd):
                if isinstance(h, Trailer):
                    break
                if isinstance(h, RecordHeader) and h.seq >= start:
                    pending += 1
                    if oldest is None or h.received_at < oldest:
                        oldest = h.received_at
        finally:
            os.close(fd)
    return Lag(pending, oldest)


@dataclass
class DiskUse:
    """Bytes (allocated on disk, as `du` counts) and files under each top-level folder."""

    bytes: dict[str, int]
    files: dict[str, int]

    @property
    def total_bytes(self) -> int:
        return sum(self.bytes.values())

    @property
    def total_files(self) -> int:
        return sum(self.files.values())


def disk_use(store_path: str | os.PathLike) -> DiskUse:
    """Walk the store: bytes and files per top-level entry (`segments`, `claims`, `tables`,
    ...; files in the root are counted under `root`)."""
    root = Path(store_path)
    sizes: dict[str, int] = {}
    files: dict[str, int] = {}
    try:
        top = list(os.scandir(root))
    except FileNotFoundError:
        return DiskUse({}, {})
    for e in top:
        key = e.name if e.is_dir(follow_symlinks=False) else "root"
        if key == "root":
            try:
                sizes[key] = sizes.get(key, 0) + _allocated(e.stat(follow_symlinks=False))
                files[key] = files.get(key, 0) + 1
            except FileNotFoundError:
                pass
            continue
        b = n = 0
        for d, _, names in os.walk(e.path):
            for f in names:
                try:
                    b += _allocated(os.lstat(os.path.join(d, f)))
                    n += 1
                except FileNotFoundError:
                    pass
        sizes[key] = b
        files[key] = n
    return DiskUse(sizes, files)


def disk_use_due(status: dict[str, Any], now: float | None = None) -> bool:
    """Whether the compactor should walk the store after this run: its report's disk use is
    older than half DISK_USE_EVERY_S (so a scrape always finds it fresh enough)."""
    now = time.time() if now is None else now
    at = (status.get("diskUse") or {}).get("at")
    return type(at) not in (int, float) or now - at >= DISK_USE_EVERY_S / 2


def _reported(status: dict[str, Any], now: float, every: float) -> DiskUse | None:
    doc = status.get("diskUse")
    if not isinstance(doc, dict) or type(doc.get("at")) not in (int, float):
        return None
    if not 0 <= now - doc["at"] <= every:
        return None
    b, f = doc.get("bytes"), doc.get("files")
    if not isinstance(b, dict) or not isinstance(f, dict):
        return None
    return DiskUse({str(k): int(v) for k, v in b.items()}, {str(k): int(v) for k, v in f.items()})


# This process's last walk of each store: path -> (when, what). One walk at a time: a
# scrape that comes while another walks waits for it and takes its result.
_walked: dict[str, tuple[float, DiskUse]] = {}
_walk_lock = threading.Lock()


def current_disk_use(store_path: str | os.PathLike, status: dict[str, Any] | None = None,
                     now: float | None = None, every: float | None = None) -> DiskUse:
    """The store's disk use at most `every` seconds old, at bounded cost: the compactor's
    report (`status`: `read_status`'s, read by the caller anyway) when fresh enough, else
    this process's last walk, else a walk (at most one per `every` seconds per process;
    default DISK_USE_EVERY_S)."""
    now = time.time() if now is None else now
    every = DISK_USE_EVERY_S if every is None else every
    got = _reported(status if status is not None else read_status(store_path), now, every)
    if got is not None:
        return got
    key = os.fspath(store_path)
    with _walk_lock:
        last = _walked.get(key)
        if last is not None and 0 <= now - last[0] <= every:
            return last[1]
        use = disk_use(store_path)
        _walked[key] = (now, use)
        return use


def _allocated(st: os.stat_result) -> int:
    blocks = getattr(st, "st_blocks", None)
    return blocks * 512 if blocks is not None else st.st_size


def table_parts(store_path: str | os.PathLike) -> int:
    """Part files the tables' manifest lists (0 for a store without tables)."""
    from .tables.manifest import CompactError, listed, read_manifest

    try:
        return len(listed(read_manifest(store_path)))
    except CompactError:
        return 0


def compacted_uploads(store_path: str | os.PathLike) -> int:
    """Uploads the query tables hold (0 for a store without tables)."""
    from .tables.manifest import CompactError, read_manifest

    try:
        return sum(int(e["rows"]) for e in read_manifest(store_path)["uploads"]
                   if isinstance(e, dict))
    except (CompactError, KeyError, TypeError, ValueError):
        return 0
