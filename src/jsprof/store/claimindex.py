"""Where retired claims went: sorted runs of (id hash, segment, offset), a few files in all.

A claim file per upload id (`claims/<aa>/<sha256>`) is what makes `append` idempotent across
processes (its flock) and `get` one read. Kept for ever they were ~98 % of the store's files
(1.7 M a day at 20 uploads/s). The compactor retires them (store/retention.py): the places of
durable records go into a *run* here, fsync'd and renamed into place, and only then are
their claim files removed. A reader that finds no claim file asks the runs; one that finds
it asks nothing else, so an id is always found in one place or the other (the claim is
removed after the run that names its record is durable, under the claim's flock).

    claims/index/run-<n>.idx
        8 bytes   magic b"JSIX1\\n\\0\\0"
        4 bytes   header length H (little-endian)
        4 bytes   CRC-32 of everything after these 16 bytes
        H bytes   header JSON: {"segments": [names], "count": n, "upto": {segment: seq}}
        n x 8     the ids' keys' first halves as numbers, sorted (a key is the first 16
        n x 8     bytes of sha256(id), each half read big-endian), their second halves
        n x 4     index into "segments" of each key's record
        n x 8     offset of the record in its segment

`upto` says, per segment, how many of its records (by record number) have been looked at
for retirement: the next pass starts there. Runs are merged in size tiers (four runs of
one tier make one of the next), so a store holds O(log uploads) of them; where two runs
name the same key, the newer (higher n) wins (an upload pruned and sent again).
"""

from __future__ import annotations

import hashlib
import logging
import mmap
import os
import threading
import zlib
from pathlib import Path
from typing import NamedTuple

import numpy as np
import orjson

from .durable import fsync_dir

log = logging.getLogger("jsprof.store")

MAGIC = b"JSIX1\n\0\0"
DIR = "index"
KEY = 16
TIER = 4  # runs of one size tier merged into one of the next


class Place(NamedTuple):
    segment: str
    offset: int


def key_of(upload_id: str) -> bytes:
    return hashlib.sha256(upload_id.encode()).digest()[:KEY]


class Run:
    """One run file (28 bytes per upload: 28 MB per million), mapped."""

    __slots__ = ("name", "n", "segments", "upto", "hi", "lo", "segs", "offsets")

    def __init__(self, path: Path) -> None:
        # Mapped, not read: the pages are the page cache's, shared by every worker.
        with open(path, "rb") as f:
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        if data[:8] != MAGIC or len(data) < 16:
            raise ValueError(f"{path}: not a claim index run")
        hlen = int.from_bytes(data[8:12], "little")
        if zlib.crc32(data[16:]) != int.from_bytes(data[12:16], "little"):
            raise ValueError(f"{path}: damaged (its checksum fails)")
        try:
            head = orjson.loads(data[16 : 16 + hlen])
        except orjson.JSONDecodeError as e:  # pragma: no cover - the CRC holds
            raise ValueError(f"{path}: damaged ({e})") from None
        self.name = path.name
        self.n = run_number(path.name)
        self.segments: list[str] = head["segments"]
        self.upto: dict[str, int] = head["upto"]
        count = int(head["count"])
        at = 16 + hlen
        self.hi = np.frombuffer(data, dtype="<u8", count=count, offset=at)
        at += 8 * count
        self.lo = np.frombuffer(data, dtype="<u8", count=count, offset=at)
        at += 8 * count
        self.segs = np.frombuffer(data, dtype="<u4", count=count, offset=at)
        at += 4 * count
        self.offsets = np.frombuffer(data, dtype="<u8", count=count, offset=at)

    def __len__(self) -> int:
        return len(self.hi)

    def find(self, key: bytes) -> Place | None:
        return self.find_halves(*_halves(key))

    def find_halves(self, hi: np.uint64, lo: np.uint64) -> Place | None:
        hi_col = self.hi
        i = int(hi_col.searchsorted(hi))
        n = len(hi_col)
        while i < n and hi_col[i] == hi:
            if self.lo[i] == lo:
                return Place(self.segments[int(self.segs[i])], int(self.offsets[i]))
            i += 1
        return None

    def keys(self) -> list[bytes]:
        return [h.to_bytes(8, "big") + lo.to_bytes(8, "big")
                for h, lo in zip(self.hi.tolist(), self.lo.tolist(), strict=True)]


def _halves(key: bytes) -> tuple[np.uint64, np.uint64]:
    # uint64 scalars: a Python int past 2^63 would make numpy convert the whole column.
    return (np.uint64(int.from_bytes(key[:8], "big")),
            np.uint64(int.from_bytes(key[8:KEY], "big")))


def run_number(name: str) -> int:
    return int(name[len("run-") : -len(".idx")])


def write_run(
    index_dir: Path, n: int, entries: list[tuple[bytes, str, int]], upto: dict[str, int]
) -> Path:
    """Write run `n` (entries: key, segment, offset; any order; a later entry of a key
    wins), durable before it has its name."""
    latest: dict[bytes, tuple[str, int]] = {}
    for k, s, off in entries:
        latest[k] = (s, off)
    segments = sorted({s for s, _ in latest.values()})
    seg_no = {s: i for i, s in enumerate(segments)}
    keys = sorted(latest)  # bytewise: the same order as (first half, second half)
    halves = [_halves(k) for k in keys]
    hi = np.array([h for h, _ in halves], dtype="<u8")  # numbers: native order
    lo = np.array([lo for _, lo in halves], dtype="<u8")
    segs = np.array([seg_no[latest[k][0]] for k in keys], dtype="<u4")
    offsets = np.array([latest[k][1] for k in keys], dtype="<u8")
    head = orjson.dumps({"segments": segments, "count": len(keys), "upto": upto})
    body = head + hi.tobytes() + lo.tobytes() + segs.tobytes() + offsets.tobytes()
    data = MAGIC + len(head).to_bytes(4, "little") + zlib.crc32(body).to_bytes(4, "little") + body
    index_dir.mkdir(parents=True, exist_ok=True)
    path = index_dir / f"run-{n:08d}.idx"
    tmp = index_dir / f".run-{n:08d}.idx.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(index_dir)
    return path


class ClaimIndex:
    """The runs of one store, as a reader sees them: listed at each lookup (a run merged
    away since is dropped, a new one read once), so every process sees retirements made by
    the compactor's process."""

    def __init__(self, claims_dir: Path) -> None:
        self.dir = claims_dir / DIR
        self._runs: dict[str, Run] = {}
        self._damaged: dict[str, str] = {}
        self._lock = threading.Lock()

    def names(self) -> list[str]:
        try:  # run-NNNNNNNN.idx: the names sort as the numbers do
            return sorted(e for e in os.listdir(self.dir) if e.endswith(".idx"))
        except FileNotFoundError:
            return []

    def runs(self) -> list[Run]:
        """The current runs, oldest first. A damaged run is left out (logged once, and
        reported by `damaged()`): ingest goes on; the ids it held are not found."""
        for _ in range(3):
            names = self.names()
            with self._lock:
                try:
                    for name in names:
                        if name not in self._runs and name not in self._damaged:
                            try:
                                self._runs[name] = Run(self.dir / name)
                            except ValueError as e:
                                self._damaged[name] = str(e)
                                log.error("store: claim index: %s", e)
                except FileNotFoundError:
                    continue  # merged away between the listing and the read: list again
                for gone in set(self._runs) - set(names):
                    del self._runs[gone]
                return [self._runs[n] for n in names if n in self._runs]
        return []

    def damaged(self) -> dict[str, str]:
        """Runs that failed their checks: name -> what is wrong."""
        self.runs()
        return dict(self._damaged)

    def find(self, upload_id: str) -> Place | None:
        """Where the retired claim of `upload_id` said its record was (None: never retired)."""
        runs = self.runs()
        if not runs:
            return None
        hi, lo = _halves(key_of(upload_id))
        for run in reversed(runs):  # the newest first: it wins
            got = run.find_halves(hi, lo)
            if got is not None:
                return got
        return None

    def upto(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for run in self.runs():
            for s, k in run.upto.items():
                out[s] = max(out.get(s, 0), int(k))
        return out

    def segments(self) -> set[str]:
        """Segments any run names a record in."""
        return {s for run in self.runs() for s in run.segments}

    def next_number(self) -> int:
        names = self.names()
        return run_number(names[-1]) + 1 if names else 1

    def merge(self) -> int:
        """Merge runs of one size tier, four at a time, into one (the newest entries win);
        returns the runs merged away. One writer (the compactor) at a time."""
        merged = 0
        while True:
            runs = self.runs()
            tiers: dict[int, list[Run]] = {}
            for r in runs:
                tiers.setdefault(_tier(len(r)), []).append(r)
            group = next((g for _, g in sorted(tiers.items()) if len(g) >= TIER), None)
            if group is None:
                return merged
            # The merged run is numbered after every run, so it would shadow a newer run
            # of another tier that names one of its keys again (an upload pruned and sent
            # again): such keys are left out of it, the newer place stands.
            first = min(r.n for r in group)
            newer = [r for r in runs if r.n > first and r not in group]
            shadow_hi = np.concatenate([r.hi for r in newer]) if newer else None
            entries: list[tuple[bytes, str, int]] = []
            upto: dict[str, int] = {}
            # `upto` of segments gone from segments/ (pruned, removed once compacted) is
            # dropped: names are never reused, so nothing will look there again.
            try:
                present = set(os.listdir(self.dir.parent.parent / "segments"))
            except FileNotFoundError:
                present = set()
            for r in sorted(group, key=lambda r: r.n):
                maybe = (np.isin(r.hi, shadow_hi) if shadow_hi is not None
                         else np.zeros(len(r), dtype=bool))
                for k, s, off, m in zip(r.keys(), r.segs.tolist(), r.offsets.tolist(),
                                        maybe.tolist(), strict=True):
                    if m and any(o.find(k) is not None for o in newer):
                        continue
                    entries.append((k, r.segments[s], off))
                for s, k in r.upto.items():
                    if s in present:
                        upto[s] = max(upto.get(s, 0), int(k))
            n = self.next_number()
            write_run(self.dir, n, entries, upto)
            for r in group:
                try:
                    os.unlink(self.dir / r.name)
                except FileNotFoundError:
                    pass
            fsync_dir(self.dir)
            merged += len(group)


def _tier(n: int) -> int:
    t = 0
    n = max(n, 1)
    while n >= 64 * TIER ** (t + 1):
        t += 1
    return t
