"""The embedded store: raw uploads in segment files, shared by several collector processes.

Layout (see docs/store.md):
    <store>/segments/<writer>-<n>.seg   records; one writer (process) per file, append-only
    <store>/claims/<aa>/<sha256(id)>    one small file per upload id, flock'd while appending

Durability: `append` returns only after the record is fdatasync'd. Concurrent appends in a
process share fsyncs (group commit): whoever finds no sync running becomes the leader and
syncs everything written so far; the others wait for it.

Idempotency across processes: an append takes an exclusive flock on the id's claim file (the
kernel drops it when a process dies, even by SIGKILL), and writes "1" into it after the
record is durable. A claim that says "1" means stored; an empty one that someone else made
means a writer may have died between the fsync and that "1", so the segments are re-scanned
before deciding.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import logging
import os
import secrets
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from . import segment as seg
from .segment import RecordHeader, SegmentError, Trailer

log = logging.getLogger("jsprof.store")

SEGMENT_BYTES = 64 << 20
SEGMENT_SECONDS = 3600.0  # a quiet collector still closes a segment hourly, so prune can work
_STORED = b"1"


class StoreError(Exception):
    """The store cannot be used as asked (bad path, unsupported URL, damaged record)."""


class Cursor:
    """A position in `iter_uploads`: per segment, how many of its records were consumed.

    Segments grow concurrently, so one offset cannot say where a reader is; a vector of
    per-segment counts can. `dumps`/`loads` keep it between runs (JSON).
    """

    __slots__ = ("positions",)

    def __init__(self, positions: Mapping[str, int] | None = None) -> None:
        self.positions: dict[str, int] = dict(positions or {})

    def dumps(self) -> str:
        return orjson.dumps(self.positions, option=orjson.OPT_SORT_KEYS).decode()

    @classmethod
    def loads(cls, text: str | bytes) -> Cursor:
        data = orjson.loads(text)
        if type(data) is not dict or not all(
            type(k) is str and type(v) is int and v >= 0 for k, v in data.items()
        ):
            raise StoreError("cursor: expected a JSON object of segment name -> count")
        return cls(data)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Cursor) and self.positions == other.positions

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Cursor({self.positions!r})"


class _Seen(NamedTuple):
    inode: int
    offset: int  # bytes scanned so far (end of the last whole record)
    sealed: bool


class PruneResult(NamedTuple):
    removed: int  # uploads removed
    kept: int  # uploads left in the segments that were looked at
    busy: list[str]  # open segments of live writers, left for a later prune


class _Writer:
    """This process's open segment: writes under a lock, fsyncs shared between threads."""

    def __init__(self, segdir: Path, segment_bytes: int) -> None:
        self.segdir = segdir
        self.segment_bytes = segment_bytes
        self.pid = os.getpid()
        self.prefix = f"{int(time.time()):010d}-{self.pid}-{secrets.token_hex(3)}"
        self.n = 0
        self.wlock = threading.Lock()
        self.cond = threading.Condition()
        self.written = 0  # bytes written by this writer over all its segments
        self.synced = 0
        self.syncing = False
        self.fd = -1  # no open segment: the next write opens one
        self.closed = False

    def _open_next(self) -> None:
        self.name = f"{self.prefix}-{self.n:06d}.seg"
        self.n += 1
        fd = os.open(
            self.segdir / self.name, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o644
        )
        # Held for the writer's life: tells other processes this segment is live.
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        _fsync_dir(self.segdir)
        self.fd, self.size, self.seq, self.opened = fd, 0, 0, time.monotonic()

    def _seal(self) -> None:
        """Trailer, fsync, close. Called under wlock."""
        _write_all(self.fd, seg.encode_trailer(self.seq))
        os.fdatasync(self.fd)
        os.close(self.fd)
        self.fd = -1
        with self.cond:
            self.synced = max(self.synced, self.written)

    def write(self, record: seg.Record) -> tuple[str, int, int, int]:
        """Append one record; returns (segment, offset, seq, position to sync to)."""
        with self.wlock:
            if self.closed:
                raise StoreError("store is closed")
            if self.fd >= 0 and (
                self.size + record.size > self.segment_bytes
                or time.monotonic() - self.opened > SEGMENT_SECONDS
            ):
                self._seal()
            if self.fd < 0:
                self._open_next()
            try:
                _writev_all(self.fd, record.parts(self.seq))
            except OSError:
                self._abandon_partial()
                raise
            offset, seq = self.size, self.seq
            self.size += record.size
            self.seq += 1
            self.written += record.size
            return self.name, offset, seq, self.written

    def _abandon_partial(self) -> None:
        """After a failed write (disk full, I/O error): cut what part of the record got
        written, so the next record does not land behind a torn one that would hide it from
        every reader; if even that fails, leave this segment (its tail is cut by whoever
        recovers it) and open a new one on the next write. Called under wlock."""
        try:
            os.ftruncate(self.fd, self.size)
        except OSError:
            os.close(self.fd)
            self.fd = -1

    def sync(self, upto: int) -> None:
        """Return once bytes up to `upto` are durable (group commit)."""
        with self.cond:
            while self.synced < upto:
                if not self.syncing:
                    self.syncing = True
                    break
                self.cond.wait()
            else:
                return
        target, ok = 0, False
        try:
            with self.wlock:
                target = self.written
                fd = os.dup(self.fd) if self.fd >= 0 else -1
            if fd >= 0:
                try:
                    os.fdatasync(fd)
                finally:
                    os.close(fd)
            # fd < 0: the segment was sealed (and synced) since our write.
            ok = True
        finally:
            with self.cond:
                self.syncing = False
                if ok:
                    self.synced = max(self.synced, target)
                self.cond.notify_all()

    def rotate(self) -> None:
        with self.wlock:
            if self.fd >= 0:
                self._seal()

    def close(self) -> None:
        with self.wlock:
            self.closed = True
            if self.fd >= 0:
                self._seal()


class Store:
    """Raw uploads, durable and idempotent by id; see the module docstring for the design.

    Thread-safe. Several processes may open the same path; each writes its own segments.
    """

    def __init__(self, path: str | os.PathLike, *, segment_bytes: int = SEGMENT_BYTES) -> None:
        text = os.fspath(path)
        if "://" in str(text):
            # Room for fsspec: segments could live in an object store, but append-only files
            # with fsync and flock need a local filesystem; a URL store is read-only later.
            raise StoreError(f"{text}: only a local directory can be a store for now")
        self.path = Path(text)
        self._segdir = self.path / "segments"
        self._claimdir = self.path / "claims"
        try:
            self._segdir.mkdir(parents=True, exist_ok=True)
            self._claimdir.mkdir(exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise StoreError(f"{text}: exists and is not a store directory") from None
        except PermissionError:
            raise StoreError(f"{text}: permission denied") from None
        self._segment_bytes = segment_bytes
        self._lock = threading.RLock()
        self._index: dict[str, tuple[str, int]] = {}
        self._seen: dict[str, _Seen] = {}
        self._writer: _Writer | None = None
        self._closed = False
        self.refresh()

    # ---- writing ----

    def append(
        self,
        upload_id: str,
        meta: dict,
        trace_json: bytes | None,
        *,
        gzipped: bytes | None = None,
    ) -> bool:
        """Store an upload durably. False (and nothing written) when the id is stored already.

        `gzipped`: the trace JSON as one gzip stream (a client's upload that needed no
        change); kept as is, and `trace_json` may then be None.
        """
        meta_json = orjson.dumps(meta)
        received = meta.get("receivedAt")
        if type(received) not in (int, float):
            received = time.time() * 1000.0
        record = seg.make_record(upload_id, meta_json, trace_json, float(received), gzipped)
        fd, fresh = self._claim(upload_id)
        try:
            if os.pread(fd, 1, 0) == _STORED:
                return False
            with self._lock:
                if not fresh:
                    self.refresh()
                if upload_id in self._index:
                    os.pwrite(fd, _STORED, 0)
                    return False
            writer = self._get_writer()
            name, offset, _, upto = writer.write(record)
            writer.sync(upto)
            with self._lock:
                self._index[upload_id] = (name, offset)
            os.pwrite(fd, _STORED, 0)
            return True
        finally:
            os.close(fd)  # releases the flock

    def _claim(self, upload_id: str) -> tuple[int, bool]:
        h = hashlib.sha256(upload_id.encode()).hexdigest()
        d = self._claimdir / h[:2]
        p = d / h
        for _ in range(2):
            try:
                fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
                fresh = True
                break
            except FileExistsError:
                fd = os.open(p, os.O_RDWR)
                fresh = False
                break
            except FileNotFoundError:
                d.mkdir(exist_ok=True)
        else:  # pragma: no cover - the directory vanished twice
            raise StoreError(f"{d}: cannot create claim files")
        fcntl.flock(fd, fcntl.LOCK_EX)
        return fd, fresh

    def _get_writer(self) -> _Writer:
        with self._lock:
            if self._closed:
                raise StoreError("store is closed")
            if self._writer is None or self._writer.pid != os.getpid():
                self.recover()
                self._writer = _Writer(self._segdir, self._segment_bytes)
            return self._writer

    def rotate(self) -> None:
        """Close this process's open segment (so prune can rewrite it) and start a new one."""
        if self._writer is not None and self._writer.pid == os.getpid():
            self._writer.rotate()

    def close(self) -> None:
        """Seal this process's segment. Appends after this raise StoreError."""
        with self._lock:
            self._closed = True
            w, self._writer = self._writer, None
        if w is not None and w.pid == os.getpid():
            w.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- recovery and pruning ----

    def recover(self) -> int:
        """Seal the segments of writers that died: cut a torn tail, add the trailer.

        Returns how many segments were sealed. Live writers' segments are left alone (their
        flock says they are live).
        """
        sealed = 0
        for name in self._segment_names():
            if name in self._seen and self._seen[name].sealed:
                continue
            try:
                fd = os.open(self._segdir / name, os.O_RDWR)
            except FileNotFoundError:
                continue
            try:
                if not _try_lock(fd):
                    continue
                end, count, is_sealed = seg.valid_prefix(fd)
                if is_sealed:
                    continue
                size = os.fstat(fd).st_size
                if end < size:
                    log.warning("store: %s: cut a torn tail of %d bytes", name, size - end)
                    os.ftruncate(fd, end)
                os.pwrite(fd, seg.encode_trailer(count), end)
                os.fdatasync(fd)
                sealed += 1
            finally:
                os.close(fd)
        self.refresh()
        return sealed

    def prune(self, older_than: float, app: str | None = None) -> PruneResult:
        """Remove uploads received before `older_than` (epoch ms), only `app`'s if given.

        Segments are rewritten without those records (same record numbers, so cursors stay
        valid) and renamed into place; a segment left empty is deleted. Open segments of
        live writers are skipped and reported.
        """
        self.rotate()
        self.recover()
        removed = kept = 0
        busy: list[str] = []
        for name in self._segment_names():
            path = self._segdir / name
            try:
                fd = os.open(path, os.O_RDWR)
            except FileNotFoundError:
                continue
            try:
                if not _try_lock(fd):
                    busy.append(name)
                    continue
                heads = [h for h in seg.scan(fd) if isinstance(h, RecordHeader)]
                drop = [h for h in heads if h.received_at < older_than and _app_is(fd, h, app)]
                kept += len(heads) - len(drop)
                if not drop:
                    continue
                removed += len(drop)
                if len(drop) == len(heads):
                    os.unlink(path)
                else:
                    self._rewrite(fd, path, heads, {h.offset for h in drop})
                _fsync_dir(self._segdir)
                with self._lock:
                    for h in drop:
                        self._index.pop(h.upload_id, None)
                    self._seen.pop(name, None)
                for h in drop:
                    self._unclaim(h.upload_id)
            finally:
                os.close(fd)
        self.refresh()
        return PruneResult(removed, kept, busy)

    def _rewrite(self, fd: int, path: Path, heads: list[RecordHeader], drop: set[int]) -> None:
        tmp = path.with_suffix(".tmp")
        out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            last = 0
            for h in heads:
                if h.offset not in drop:
                    _write_all(out, os.pread(fd, h.end - h.offset, h.offset))
                    last = h.seq + 1
            # The trailer counts record numbers, not records: cursors compare with it.
            _write_all(out, seg.encode_trailer(last))
            os.fdatasync(out)
        finally:
            os.close(out)
        os.replace(tmp, path)

    def _unclaim(self, upload_id: str) -> None:
        h = hashlib.sha256(upload_id.encode()).hexdigest()
        try:
            os.unlink(self._claimdir / h[:2] / h)
        except FileNotFoundError:
            pass

    # ---- reading ----

    def _segment_names(self) -> list[str]:
        try:
            return sorted(e.name for e in os.scandir(self._segdir) if e.name.endswith(".seg"))
        except FileNotFoundError:
            return []

    def refresh(self) -> None:
        """Index what other processes appended since the last look (cheap when nothing did)."""
        with self._lock:
            names = self._segment_names()
            for name in set(self._seen) - set(names):
                self._forget(name)
            for name in names:
                seen = self._seen.get(name)
                if seen is not None and seen.sealed:
                    continue
                try:
                    fd = os.open(self._segdir / name, os.O_RDONLY)
                except FileNotFoundError:
                    continue
                try:
                    st = os.fstat(fd)
                    if seen is not None and seen.inode != st.st_ino:
                        self._forget(name)
                        seen = None
                    start = 0 if seen is None else seen.offset
                    if seen is not None and st.st_size <= start:
                        continue
                    sealed = False
                    for h in seg.scan(fd, start, st.st_size):
                        if isinstance(h, Trailer):
                            sealed = True
                            break
                        self._index.setdefault(h.upload_id, (name, h.offset))
                        start = h.end
                    self._seen[name] = _Seen(st.st_ino, start, sealed)
                finally:
                    os.close(fd)

    def _forget(self, name: str) -> None:
        self._seen.pop(name, None)
        for k in [k for k, (n, _) in self._index.items() if n == name]:
            del self._index[k]

    def __contains__(self, upload_id: str) -> bool:
        with self._lock:
            if upload_id not in self._index:
                self.refresh()
            return upload_id in self._index

    def __len__(self) -> int:
        with self._lock:
            self.refresh()
            return len(self._index)

    def get(self, upload_id: str) -> tuple[dict, bytes] | None:
        """(meta, trace_json) of a stored upload, or None."""
        for attempt in range(2):
            with self._lock:
                if attempt or upload_id not in self._index:
                    self.refresh()
                where = self._index.get(upload_id)
            if where is None:
                return None
            name, offset = where
            try:
                fd = os.open(self._segdir / name, os.O_RDONLY)
            except FileNotFoundError:
                with self._lock:
                    self._forget(name)
                continue
            try:
                h = next(seg.scan(fd, offset), None)
                if not isinstance(h, RecordHeader) or h.upload_id != upload_id:
                    # Rewritten by a prune since we indexed it: look again.
                    with self._lock:
                        self._forget(name)
                    continue
                meta, trace = seg.read_record(fd, h)
                return orjson.loads(meta), trace
            except SegmentError as e:
                raise StoreError(f"{self._segdir / name}: {e}") from None
            finally:
                os.close(fd)
        return None

    def iter_uploads(
        self, after: Cursor | None = None
    ) -> Iterator[tuple[Cursor, str, dict, bytes]]:
        """Every stored upload in a stable order (segment name, then record number).

        Resumable: pass the cursor of the last upload handled to get only those stored since
        (in any segment). A record that fails its checksum is logged and skipped.
        """
        positions = dict(after.positions) if after is not None else {}
        for name in self._segment_names():
            start = positions.get(name, 0)
            try:
                fd = os.open(self._segdir / name, os.O_RDONLY)
            except FileNotFoundError:
                continue
            try:
                for h in seg.scan(fd):
                    if isinstance(h, Trailer):
                        break
                    if h.seq < start:
                        continue
                    positions[name] = h.seq + 1
                    try:
                        meta, trace = seg.read_record(fd, h)
                    except SegmentError as e:
                        log.error("store: %s: skipped a damaged record: %s", name, e)
                        continue
                    yield Cursor(positions), h.upload_id, orjson.loads(meta), trace
            finally:
                os.close(fd)

    def stats(self) -> dict[str, Any]:
        names = self._segment_names()
        size = 0
        for n in names:
            try:
                size += (self._segdir / n).stat().st_size
            except FileNotFoundError:
                pass
        return {"uploads": len(self), "segments": len(names), "bytes": size}


def _app_is(fd: int, h: RecordHeader, app: str | None) -> bool:
    if app is None:
        return True
    meta = os.pread(fd, h.meta_len, h.offset + seg.HEADER_SIZE + h.id_len)
    try:
        return orjson.loads(meta).get("app") == app
    except (orjson.JSONDecodeError, AttributeError):
        return False


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError as e:
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return False
        raise


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _writev_all(fd: int, parts: list[bytes]) -> None:
    n = os.writev(fd, parts)
    total = sum(len(p) for p in parts)
    if n < total:  # a short write (rare on regular files): finish it from where it stopped
        _write_all(fd, b"".join(parts)[n:])


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
