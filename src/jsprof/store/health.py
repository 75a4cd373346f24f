"""How a store is doing, for operators: compactor lag, the compactor's recent runs, disk use.

Read-only except `record_run`, which the compactor calls after each run. Nothing here knows
of HTTP: `jsprof serve`'s `/metrics` and `/readyz` (serve/metrics.py), `jsprof serve check`
and the dashboard's status line all read these.

The compactor runs in a process of its own (store/background.py), so what it did is kept
in a small file in the store's root, `compactor.json` (not under tables/: a compactor that
fails because it cannot write tables/ must still be able to say so):
    {"lastRunAt", "lastSuccessAt", "lastFailureAt", "lastError", "consecutiveFailures",
     "failuresTotal", "runsTotal", "pid"}
Replaced atomically after each run (no fsync: it is a report, not data).
"""

from __future__ import annotations

import os
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


def read_status(store_path: str | os.PathLike) -> dict[str, Any]:
    """The compactor's last report (an empty dict for a store never compacted here)."""
    try:
        doc = orjson.loads((Path(store_path) / STATUS).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    return doc if type(doc) is dict else {}


def record_run(store_path: str | os.PathLike, error: str | None, now: float | None = None) -> dict:
    """Add one compactor run (failed with `error`, or succeeded) to the store's report;
    returns the new report. Never raises: a report that cannot be written is logged by
    the caller's own failure (the run's error says why)."""
    now = time.time() if now is None else now
    doc = read_status(store_path)
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


def compaction_lag(store: Any) -> Lag:
    """What the compactor has not reached yet, from the tables' cursor: a sealed segment it
    read to the end costs one read of its trailer; others, a scan of their record headers
    (no bodies). Read-only."""
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
    for name in names:
        start = positions.get(name, 0)
        try:
            fd = os.open(segdir / name, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            tr = seg.trailer_at_end(fd)
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
