"""The embedded store: raw uploads in segment files, shared by several collector processes.

Layout (see docs/store.md):
    <store>/segments/<writer>-<n>.seg   records; one writer (process) per file, append-only
    <store>/open/<writer>-<n>.seg       marker: a segment not yet sealed, or whose claims
                                        are not yet known durable (recover() finishes it)
    <store>/claims/<aa>/<sha256(id)>    one small file per upload id: where its record is
    <store>/quarantine/                 copies of damaged bytes, kept for inspection

Durability: `append` returns only after the record is fdatasync'd. Concurrent appends in a
process share fsyncs (group commit): whoever finds no sync running becomes the leader and
syncs everything written so far; the others wait for it. A failed sync fails every record
it covered: nothing is acknowledged that a sync did not report durable.

Where an upload is: its claim file says `P <segment> <offset>` (pending: written before
the record itself, under the claim's flock) and then `1 <segment> <offset>` once the record
is durable. So `get` costs one small read and a seek, and opening a store reads nothing:
no process keeps an index of ids in memory, whatever the size of the store.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import hashlib
import logging
import os
import secrets
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from . import segment as seg
from .claimindex import ClaimIndex, Place
from .cursor import Cursor
from .durable import fsync_dir
from .errors import (
    RawRemoved,
    StoreError,
    StoreIOError,
    unavailable,
)
from .segment import Damage, RecordHeader, SegmentError, Trailer

log = logging.getLogger("jsprof.store")

SEGMENT_BYTES = 64 << 20
SEGMENT_SECONDS = 3600.0  # a quiet collector still closes a segment hourly, so prune can work
STORED = b"1"
_PENDING = b"P"
_NEW = ".new"  # a segment being created: locked, then renamed to its .seg name
FINISH_SECONDS = 10.0
PRUNED = "pruned.json"  # retention marks (Store.pruned_before)
RAW_REMOVED = "raw-removed.json"  # segments the raw retention removed (store/retention.py)


class PruneResult(NamedTuple):
    removed: int  # uploads removed
    kept: int  # uploads left in the segments that were read (others were skipped whole)
    busy: list[str]  # open segments of live writers, left for a later prune
    tables_removed: int = 0  # uploads removed from the Parquet tables (tables/)


class Finding(NamedTuple):
    """One thing `Store.check` found wrong."""

    segment: str
    offset: int
    length: int
    what: str


class CheckReport(NamedTuple):
    segments: int
    records: int
    findings: list[Finding]
    open_segments: list[str]  # live writers' segments (fine) and dead ones not yet recovered
    quarantined: list[str]  # files in <store>/quarantine/


class _Loc(NamedTuple):
    status: bytes  # STORED or _PENDING
    segment: str | None  # None: a claim written before claims held locations ("1")
    offset: int


def _parse_claim(data: bytes) -> _Loc | None:
    parts = data.split()
    if parts == [STORED]:
        return _Loc(STORED, None, -1)
    if len(parts) == 3 and parts[0] in (STORED, _PENDING) and parts[2].isdigit():
        name = parts[1].decode("ascii", "replace")
        if name.endswith(".seg") and "/" not in name and not name.startswith("."):
            return _Loc(parts[0], name, int(parts[2]))
    return None  # empty (never stored) or unreadable: not stored


def read_claim(fd: int) -> _Loc | None:
    """Where an open claim file says its record is: its one short line (status, segment
    name, offset; see `_write_claim`) is in its first 256 bytes."""
    return _parse_claim(os.pread(fd, 256, 0))


def _write_claim(fd: int, status: bytes, name: str, offset: int, old_len: int = -1) -> None:
    """`old_len`: the claim's length when known; it is only truncated when it was longer
    (an ftruncate is one more metadata change in the journal, on the ingest path)."""
    data = b"%s %s %d\n" % (status, name.encode(), offset)
    os.pwrite(fd, data, 0)
    if old_len < 0 or old_len > len(data):
        os.ftruncate(fd, len(data))  # shrinking needs no space


class _Writer:
    """This process's open segment: writes under a lock, fsyncs shared between threads."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.segdir = store._segdir  # noqa: SLF001
        self.opendir = store._opendir  # noqa: SLF001
        self.segment_bytes = store._segment_bytes  # noqa: SLF001
        self.pid = os.getpid()
        self.prefix = f"{int(time.time()):010d}-{self.pid}-{secrets.token_hex(3)}"
        self.n = 0
        self.gen = 0  # segments opened: a failed sync knows if its segment is still open
        self.wlock = threading.Lock()
        self.cond = threading.Condition()
        self.written = 0  # bytes written by this writer over all its segments
        self.synced = 0  # every byte up to here is durable (unless in a failed range)
        self.failed: list[tuple[int, int]] = []  # (lo, hi]: records there are not stored
        self.syncing = False
        self.fd = -1  # no open segment: the next write opens one
        self.closed = False
        self.need_recover = False  # a segment was left unsealed: recover() seals it
        self.to_finish: list[str] = []  # sealed segments whose claims are to be made durable
        self.finished_at = time.monotonic()

    def _open_next(self) -> None:
        name = f"{self.prefix}-{self.n:06d}.seg"
        self.n += 1
        path = self.segdir / name
        tmp: Path | None = self.segdir / (name + _NEW)
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o644)
        except OSError as e:
            raise unavailable(e, f"cannot create a segment in {self.segdir}") from None
        try:
            # Locked before it has its name, then renamed: another process's recover()
            # never finds this segment unlocked and takes it for a dead writer's.
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.rename(tmp, path)
            tmp = None
            os.close(os.open(self.opendir / name, os.O_WRONLY | os.O_CREAT, 0o644))
            fsync_dir(self.segdir)
            fsync_dir(self.opendir)
        except OSError as e:
            os.close(fd)  # never leaked, whichever step failed
            _unlink(tmp if tmp is not None else path)  # empty, and ours: nothing to keep
            if tmp is None:
                _unlink(self.opendir / name)
            raise unavailable(e, f"cannot create a segment in {self.segdir}") from None
        self.name, self.fd, self.size, self.seq = name, fd, 0, 0
        self.opened, self.base, self.gen = time.monotonic(), self.written, self.gen + 1
        self.time_range = seg.NO_RANGE

    def _seal(self) -> None:
        """Trailer, fsync, close (under wlock); on failure the segment is abandoned."""
        try:
            write_all(self.fd, seg.encode_trailer(self.seq, self.time_range))
            os.fdatasync(self.fd)
        except OSError as e:
            log.error("store: %s: cannot seal (%s); left for recovery", self.name, e.strerror)
            self._abandon(sync_failed=False)
            return
        os.close(self.fd)
        self.fd = -1
        self.to_finish.append(self.name)
        with self.cond:
            self.synced = max(self.synced, self.written)
            self.cond.notify_all()

    def _abandon(self, sync_failed: bool) -> None:
        """Leave the open segment unsealed after a failed write, seal or sync (under wlock).

        Whatever was written to it is made durable or failed here, before it is closed, so
        no later sync can acknowledge bytes nobody synced. After a failed sync, everything
        past the last durable byte is failed and cut. Its marker stays: recover() (ours at
        the next append, or another process's) seals it, cutting any torn tail.
        """
        fd, self.fd = self.fd, -1
        keep = self.size
        if sync_failed:
            with self.cond:
                keep = max(0, min(self.size, self.synced - self.base))
        try:
            os.ftruncate(fd, keep)
        except OSError:
            pass  # a partial record left behind is a provably torn tail for recover()
        ok = not sync_failed
        if ok:
            try:
                os.fdatasync(fd)
            except OSError:
                ok = False
        os.close(fd)
        self.need_recover = True
        with self.cond:
            if ok:
                self.synced = max(self.synced, self.written)
            else:
                self.failed.append((min(self.synced, self.base + keep), self.written))
            self.cond.notify_all()

    def write(
        self, record: seg.Record, claim_fd: int, claim_len: int = -1
    ) -> tuple[str, int, int]:
        """Append one record; returns (segment, offset, position to sync to).

        The claim (flock'd by the caller) is set to `P <segment> <offset>` just before the
        record is written, so whoever finds this claim later knows where to look.
        """
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
            offset = self.size
            try:
                _write_claim(claim_fd, _PENDING, self.name, offset, claim_len)
            except OSError as e:
                raise unavailable(e, "cannot write the upload's claim file") from None
            try:
                _writev_all(self.fd, record.parts(self.seq))
            except OSError as e:
                self._abandon(sync_failed=False)
                raise unavailable(e, f"cannot write to segment {self.name}") from None
            name = self.name
            self.size += record.size
            self.seq += 1
            self.written += record.size
            lo, hi = self.time_range
            self.time_range = (min(lo, record.received_at), max(hi, record.received_at))
            upto = self.written
        self._finish(force=False)
        return name, offset, upto

    def _finish(self, force: bool) -> None:
        """Drop the markers of sealed segments after one syncfs for all of them (at most
        every FINISH_SECONDS while writing: a syncfs flushes the whole filesystem)."""
        with self.wlock:
            if not self.to_finish or (
                not force and time.monotonic() - self.finished_at < FINISH_SECONDS
            ):
                return
            names, self.to_finish = self.to_finish, []
            self.finished_at = time.monotonic()
        self.store._finish_segments(names)  # noqa: SLF001

    def _failed(self, upto: int) -> bool:
        return any(lo < upto <= hi for lo, hi in self.failed)

    def sync(self, upto: int) -> None:
        """Return once bytes up to `upto` are durable (group commit); raise StoreIOError if
        a sync covering them failed."""
        while True:
            with self.cond:
                while True:
                    if self._failed(upto):
                        raise StoreIOError(
                            "the disk reported an error while syncing; this upload was not stored"
                        )
                    if self.synced >= upto:
                        return
                    if not self.syncing:
                        self.syncing = True
                        break
                    self.cond.wait()
            ok: bool | None = None
            target, gen = 0, -1
            try:
                with self.wlock:
                    target, gen = self.written, self.gen
                    fd = os.dup(self.fd) if self.fd >= 0 else -1
                # fd < 0: no open segment; each closed one was synced or failed when closed.
                if fd >= 0:
                    try:
                        os.fdatasync(fd)
                        ok = True
                    except OSError as e:
                        log.error("store: %s: fdatasync failed: %s", self.name, e.strerror)
                        ok = False
                    finally:
                        os.close(fd)
            finally:
                with self.cond:
                    self.syncing = False
                    if ok:
                        self.synced = max(self.synced, target)
                    elif ok is False or self.synced < target:
                        # Failed before anyone else may sync: on Linux a second fsync can
                        # report success for pages the first one lost. (No open segment
                        # and bytes neither synced nor failed cannot happen: each closed
                        # segment is resolved when closed; if it did, fail, never ack.)
                        self.failed.append((self.synced, target))
                    self.cond.notify_all()
            if ok is False:
                with self.wlock:
                    if self.gen == gen and self.fd >= 0:
                        self._abandon(sync_failed=True)

    def rotate(self) -> None:
        with self.wlock:
            if self.fd >= 0:
                self._seal()
        self._finish(force=True)

    def close(self) -> None:
        with self.wlock:
            self.closed = True
        self.rotate()


class Store:
    """Raw uploads, durable and idempotent by id; see the module docstring for the design.

    Thread-safe. Several processes may open the same path; each writes its own segments.
    Opening reads nothing but the directory's existence: cost and memory do not grow with
    the store.
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
        self._claimstr = os.fspath(self._claimdir)
        self._opendir = self.path / "open"
        self._qdir = self.path / "quarantine"
        # Claims the compactor retired (store/retention.py): asked only where no claim file is.
        self._index = ClaimIndex(self._claimdir)
        try:
            new = not self._segdir.is_dir()
            if not new:
                with os.scandir(self._segdir) as it:
                    new = not any(it)
            self._segdir.mkdir(parents=True, exist_ok=True)
            self._claimdir.mkdir(exist_ok=True)
            if new:
                # A store written before claims held locations has no open/: the first
                # writer migrates it (recover()); a new one starts in the current layout.
                self._opendir.mkdir(exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise StoreError(f"{text}: exists and is not a store directory") from None
        except PermissionError:
            raise StoreError(f"{text}: permission denied") from None
        except OSError as e:
            # Any other failure to make the directory (no such parent on /proc, read-only
            # filesystem, disk full) is the user's path, not a bug: name it and the reason.
            raise StoreError(f"{text}: cannot create store directory: {e.strerror or e}") from None
        self._segment_bytes = segment_bytes
        self._lock = threading.RLock()
        self._writer: _Writer | None = None
        self._closed = False

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

        Raises StoreUnavailable (StoreFullError, StoreIOError) when the upload could not be
        stored: then nothing of it was acknowledged, and nothing stored was damaged.
        """
        meta_json = orjson.dumps(meta)
        received = meta.get("receivedAt")
        if type(received) not in (int, float):
            received = time.time() * 1000.0
        record = seg.make_record(upload_id, meta_json, trace_json, float(received), gzipped)
        writer = self._get_writer()  # recovers dead writers' segments first, holding no claim
        fd = self._claim(upload_id, create=True)
        assert fd is not None
        try:
            claim = os.pread(fd, 256, 0)
            loc = _parse_claim(claim)
            if loc is None and self._retired(upload_id) is not None:
                # Stored, and its claim retired: the empty claim this made goes again.
                _unlink(self._claim_path(upload_id))
                return False
            if loc is not None:
                if loc.status == STORED:
                    return False
                # Pending: its writer died or failed after naming the place. A whole record
                # there is this upload (made durable before saying so); else store it anew.
                if self._whole_at(loc, upload_id, sync=True) is not None:
                    _mark_stored(fd, upload_id)
                    return False
            try:
                _, _, upto = writer.write(record, fd, len(claim))
                writer.sync(upto)
            except BaseException:
                try:
                    os.ftruncate(fd, 0)  # not stored: a retry must not take it for pending
                except OSError:
                    pass
                raise
            _mark_stored(fd, upload_id)
            return True
        finally:
            os.close(fd)  # releases the flock

    def _claim_path(self, upload_id: str) -> str:
        # A str, not a Path: this runs once per id looked up, and pathlib costs more than
        # the open/flock/pread/close of the claim itself.
        h = hashlib.sha256(upload_id.encode()).hexdigest()
        return f"{self._claimstr}/{h[:2]}/{h}"

    def _claim(self, upload_id: str, create: bool, shared: bool = False) -> int | None:
        """The id's claim file, open and flock'd; None when it does not exist (create=False).
        `shared`: a read-only look (waits for an append of that id in progress)."""
        p = self._claim_path(upload_id)
        fd = -1
        flags = os.O_RDONLY if shared else os.O_RDWR | (os.O_CREAT if create else 0)
        for _ in range(2):
            try:
                fd = os.open(p, flags, 0o644)
                break
            except FileNotFoundError:
                if not create:
                    return None
                try:
                    os.mkdir(os.path.dirname(p))
                except FileExistsError:
                    pass
                except OSError as e:
                    raise unavailable(e, "cannot create a claim folder") from None
            except OSError as e:
                raise unavailable(e, "cannot create the upload's claim file") from None
        if fd < 0:  # pragma: no cover - the directory vanished twice
            raise StoreError(f"{os.path.dirname(p)}: cannot create claim files")
        fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        return fd

    def _get_writer(self) -> _Writer:
        with self._lock:
            if self._closed:
                raise StoreError("store is closed")
            w = self._writer
            if w is None or w.pid != os.getpid():
                self.recover()
                self._writer = w = _Writer(self)
            elif w.need_recover:
                w.need_recover = False
                self.recover()
            return w

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

    # ---- recovery ----

    def _finish_segments(self, names: list[str]) -> None:
        """After sealing: make the claims of their records durable, then drop the markers.

        Every claim of a record in a segment said at least `P <segment> <offset>` before
        the record was written, so one syncfs covers them all; a crash before a marker goes
        leaves it for recover(), which re-checks those claims.
        """
        try:
            _syncfs(self._claimdir)
            for name in names:
                _unlink(self._opendir / name)
            fsync_dir(self._opendir)
        except OSError as e:
            log.warning("store: sealed segments' markers left for recovery (%s)", e.strerror)

    def recover(self) -> int:
        """Finish the segments of writers that died: cut a provably torn tail, add the
        trailer, and make sure each record's claim says where it is.

        Returns how many segments were sealed. Live writers' segments are left alone (their
        flock says they are live). Only segments marked open (`<store>/open/`) are looked
        at, so this costs nothing per sealed segment. Damaged records are kept (and copied
        to `<store>/quarantine/`), never cut.
        """
        if not self._opendir.is_dir():
            self._migrate()
        sealed = 0
        try:
            names = sorted(os.listdir(self._opendir))
        except FileNotFoundError:
            return 0
        for name in names:
            try:
                sealed += self._recover_one(name)
            except OSError as e:  # disk full, I/O error: left marked for a later recover
                log.error("store: %s: cannot recover it now (%s)", name, e.strerror)
        return sealed

    def _recover_one(self, name: str) -> int:
        path = self._segdir / name
        marker = self._opendir / name
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            _unlink(marker)
            return 0
        try:
            if not _try_lock(fd):
                return 0
            if not marker.exists():  # another process finished it since we listed
                return 0
            st = seg.tail_state(fd)
            sealed = 0
            if not st.sealed:
                size = os.fstat(fd).st_size
                if not st.records and not st.damage:
                    # Nothing whole in it (empty, or one torn record): removed, never sealed.
                    os.unlink(path)
                    fsync_dir(self._segdir)
                    _unlink(marker)
                    return 0
                if st.keep < size:
                    log.warning("store: %s: cut a torn tail of %d bytes", name, size - st.keep)
                    os.ftruncate(fd, st.keep)
                os.pwrite(fd, seg.encode_trailer(st.count, st.time_range), st.keep)
                os.fdatasync(fd)
                sealed = 1
            if st.damage:
                self._quarantine(fd, name, st.damage)
            self._reindex(fd, name, st.records, check_bodies=True)
            _syncfs(self._claimdir)
            _unlink(marker)
            fsync_dir(self._opendir)
            return sealed
        finally:
            os.close(fd)

    def _reindex(
        self, fd: int, name: str, records: list[RecordHeader], check_bodies: bool
    ) -> None:
        """Make each record's claim name its place, where the claim does not already say
        the upload is stored (a crash lost the claim, or its writer died before marking)."""
        for h in records:
            cfd = self._claim(h.upload_id, create=True)
            assert cfd is not None
            try:
                loc = read_claim(cfd)
                if loc is not None and loc.status == STORED and loc.segment is not None:
                    continue  # stored (here, or an earlier copy elsewhere): keep that
                if loc is None and self._retired(h.upload_id) is not None:
                    _unlink(self._claim_path(h.upload_id))  # its claim was retired
                    continue
                if check_bodies and not seg.body_ok(fd, h):
                    continue
                _write_claim(cfd, STORED, name, h.offset)
            finally:
                os.close(cfd)

    def _migrate(self) -> None:
        """A store from before claims held locations: write every record's location into
        its claim, mark unsealed segments open. Once, by the first writer; O(store)."""
        lock = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if self._opendir.is_dir():
                return
            log.warning("store: %s: writing record locations into claims (once)", self.path)
            tmp = self.path / "open.new"
            tmp.mkdir(exist_ok=True)
            for name in self._segment_names():
                with self._open_segment(name) as fd:
                    if fd is None:
                        continue
                    records, sealed = [], False
                    for h in seg.scan(fd):
                        if isinstance(h, RecordHeader):
                            records.append(h)
                        sealed = sealed or isinstance(h, Trailer)
                    if not sealed:
                        os.close(os.open(tmp / name, os.O_WRONLY | os.O_CREAT, 0o644))
                    self._reindex(fd, name, records, check_bodies=False)
            _syncfs(self._claimdir)
            os.rename(tmp, self._opendir)
            fsync_dir(self.path)
        finally:
            os.close(lock)

    def _quarantine(self, fd: int, name: str, damage: list[Damage]) -> None:
        """Copy damaged bytes to <store>/quarantine/ (once), before anything could drop them."""
        self._qdir.mkdir(exist_ok=True)
        for d in damage:
            out = self._qdir / f"{name}@{d.offset}.bin"
            if out.exists():
                continue
            log.error(
                "store: %s: %d damaged bytes at offset %d kept in %s",
                name, d.end - d.offset, d.offset, out,
            )
            tmp = out.with_suffix(".tmp")
            wfd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                pos = d.offset
                while pos < d.end:
                    buf = os.pread(fd, min(1 << 20, d.end - pos), pos)
                    if not buf:
                        break
                    write_all(wfd, buf)
                    pos += len(buf)
                os.fsync(wfd)
            finally:
                os.close(wfd)
            os.replace(tmp, out)
        fsync_dir(self._qdir)

    # ---- pruning ----

    def prune_segments(
        self, older_than: float, app: str | None = None
    ) -> tuple[PruneResult, dict[str, dict[int, int] | None]]:
        """The raw half of a retention cut (`store/retention.py`'s `prune` runs it, with
        the tables' half, under the tables' lock): remove the uploads received before
        `older_than` (epoch ms), only `app`'s if given, from the segments.

        Segments are rewritten without those records (same record numbers, so cursors stay
        valid) and renamed into place; a segment left empty is deleted. A sealed segment
        whose trailer's time range is all newer is skipped without reading it. Open
        segments of live writers are skipped and reported. Damaged bytes are copied to
        quarantine/ before a rewrite drops them. Returns the result and the places the
        rewrite moved: segment -> old offset -> new offset of each record kept (None:
        the segment was deleted), which the tables' list of damaged records follows.
        """
        removed = kept = 0
        busy: list[str] = []
        marked = set(_listdir(self._opendir))
        # segment -> old offset -> new offset of each record kept (None: segment deleted)
        places: dict[str, dict[int, int] | None] = {}
        for name in self._segment_names():
            if name in marked:
                busy.append(name)
                continue
            path = self._segdir / name
            try:
                fd = os.open(path, os.O_RDWR)
            except FileNotFoundError:
                continue
            try:
                if not _try_lock(fd):
                    busy.append(name)
                    continue
                tr = seg.trailer_at_end(fd)
                if tr is not None and tr.min_at is not None and tr.min_at >= older_than:
                    continue  # all newer than the cut: nothing to read
                heads, damage, count = [], [], 0
                for h in seg.scan(fd):
                    if isinstance(h, RecordHeader):
                        heads.append(h)
                        count = h.seq + 1
                    elif isinstance(h, Damage):
                        damage.append(h)
                    else:
                        count = max(count, h.count)
                drop = [h for h in heads if h.received_at < older_than and app_is(fd, h, app)]
                kept += len(heads) - len(drop)
                if not drop:
                    continue
                removed += len(drop)
                if damage:
                    self._quarantine(fd, name, damage)
                if len(drop) == len(heads):
                    os.unlink(path)
                    moved: dict[str, int] = {}
                    places[name] = None
                else:
                    offsets = places[name] = {}
                    moved = self._rewrite(
                        fd, path, heads, {h.offset for h in drop}, count, offsets
                    )
                fsync_dir(self._segdir)
                for uid, offset in moved.items():
                    self._relocate(uid, name, offset)
                for h in drop:
                    self._unclaim(h.upload_id, name, h.offset)
            finally:
                os.close(fd)
        self._clean_new_files()
        return PruneResult(removed, kept, busy), places

    def pruned_before(self) -> dict[str, float]:
        """Retention marks: app ("*": every app) -> epoch ms before which uploads were
        pruned. Written before a prune starts, so a reader that filters with them (e.g.
        `received_at >= mark` in SQL) never counts a pruned upload, whatever it read
        before or during the prune; costs one small read, not one per upload."""
        try:
            doc = orjson.loads((self.path / PRUNED).read_bytes())
        except (FileNotFoundError, orjson.JSONDecodeError):
            return {}
        if type(doc) is not dict:
            return {}
        return {k: float(v) for k, v in doc.items() if type(v) in (int, float)}

    def mark_pruned(self, older_than: float, app: str | None) -> None:
        """Write the retention mark (`pruned_before`) for a cut about to be made."""
        marks = self.pruned_before()
        key = "*" if app is None else app
        if marks.get(key, float("-inf")) >= older_than:
            return
        marks[key] = older_than
        tmp = self.path / (PRUNED + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            write_all(fd, orjson.dumps(marks, option=orjson.OPT_SORT_KEYS))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path / PRUNED)
        fsync_dir(self.path)

    def _rewrite(
        self, fd: int, path: Path, heads: list[RecordHeader], drop: set[int], count: int,
        offsets: dict[int, int],
    ) -> dict[str, int]:
        """Write the kept records to a new file renamed over `path`; their new offsets (by
        id; and in `offsets`, old offset -> new, every kept record)."""
        tmp = path.with_suffix(".tmp")
        out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        moved: dict[str, int] = {}
        lo, hi = seg.NO_RANGE
        try:
            pos = 0
            for h in heads:
                if h.offset not in drop:
                    write_all(out, os.pread(fd, h.end - h.offset, h.offset))
                    offsets[h.offset] = pos
                    if pos != h.offset:
                        moved[h.upload_id] = pos
                    pos += h.end - h.offset
                    lo, hi = min(lo, h.received_at), max(hi, h.received_at)
            # The trailer counts record numbers, not records: cursors compare with it; and
            # how many records are left, for `count_uploads`.
            write_all(out, seg.encode_trailer(count, (lo, hi), len(heads) - len(drop)))
            os.fdatasync(out)
        finally:
            os.close(out)
        os.replace(tmp, path)
        return moved

    def _relocate(self, upload_id: str, name: str, offset: int) -> None:
        fd = self._claim(upload_id, create=False)
        if fd is None:
            return
        try:
            loc = read_claim(fd)
            if loc is not None and loc.segment in (name, None):
                _write_claim(fd, STORED, name, offset)
        finally:
            os.close(fd)

    def _unclaim(self, upload_id: str, name: str, offset: int) -> None:
        fd = self._claim(upload_id, create=False)
        if fd is None:
            return
        try:
            loc = read_claim(fd)
            # Only a claim that names this record (or no place): another copy stays claimed.
            if loc is None or loc.segment is None or (loc.segment, loc.offset) == (name, offset):
                _unlink(self._claim_path(upload_id))
        finally:
            os.close(fd)

    def _clean_new_files(self) -> None:
        """Remove segments whose creator died before renaming them (empty, unlocked)."""
        for e in os.scandir(self._segdir):
            if not e.name.endswith(_NEW):
                continue
            try:
                fd = os.open(e.path, os.O_RDONLY)
            except FileNotFoundError:
                continue
            try:
                if _try_lock(fd):
                    _unlink(Path(e.path))
            finally:
                os.close(fd)

    # ---- reading ----

    def _segment_names(self) -> list[str]:
        try:
            return sorted(e.name for e in os.scandir(self._segdir) if e.name.endswith(".seg"))
        except FileNotFoundError:
            return []

    @contextlib.contextmanager
    def _open_segment(self, name: str) -> Iterator[int | None]:
        """Segment `name` open read-only, closed on leaving; None when it is gone (a prune
        or compaction removed it since it was listed)."""
        try:
            fd = os.open(self._segdir / name, os.O_RDONLY)
        except FileNotFoundError:
            yield None
            return
        try:
            yield fd
        finally:
            os.close(fd)

    def _lookup(self, upload_id: str) -> _Loc | None:
        fd = self._claim(upload_id, create=False, shared=True)
        if fd is None:
            return None
        try:
            return read_claim(fd)
        finally:
            os.close(fd)

    def _whole_at(
        self, loc: _Loc, upload_id: str, sync: bool = False
    ) -> tuple[bytes, bytes] | None:
        """(meta_json, trace) of the whole record of `upload_id` at `loc`, else None.

        Raises StoreError when a record with that id is there but damaged. `sync`: make the
        segment durable first (a pending claim is about to be taken as stored).
        """
        assert loc.segment is not None
        try:
            fd = os.open(self._segdir / loc.segment, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            h = next(seg.scan(fd, loc.offset), None)
            if not isinstance(h, RecordHeader) or h.upload_id != upload_id:
                return None
            try:
                found = seg.read_record(fd, h)
            except SegmentError as e:
                if loc.status == _PENDING:
                    return None
                raise StoreError(f"{self._segdir / loc.segment}: {e}") from None
            if sync:
                try:
                    os.fdatasync(fd)
                except OSError as e:
                    raise unavailable(e, f"cannot sync segment {loc.segment}") from None
            return found
        finally:
            os.close(fd)

    def _find(self, names: list[str], upload_id: str) -> tuple[bytes, bytes] | None:
        """The record of `upload_id` found by scanning segments (slow path, rare)."""
        for name in names:
            with self._open_segment(name) as fd:
                if fd is None:
                    continue
                for h in seg.scan(fd):
                    if isinstance(h, RecordHeader) and h.upload_id == upload_id:
                        try:
                            return seg.read_record(fd, h)
                        except SegmentError as e:
                            raise StoreError(f"{self._segdir / name}: {e}") from None
        return None

    def _retired(self, upload_id: str) -> Place | None:
        """Where the record of `upload_id` is when its claim was retired (claimindex.py)
        and the record is still in the store, or was removed by the raw retention (then
        the upload counts as stored: the tables hold it); None otherwise (never stored,
        or pruned since)."""
        place = self._index.find(upload_id)
        if place is None:
            return None
        try:
            fd = os.open(self._segdir / place.segment, os.O_RDONLY)
        except FileNotFoundError:
            return place if place.segment in self.raw_removed() else None
        try:
            h = next(seg.scan(fd, place.offset), None)
            if isinstance(h, RecordHeader) and h.upload_id == upload_id:
                return place
            # A prune rewrote the segment since: the record moved, or is gone.
            for h in seg.scan(fd):
                if isinstance(h, RecordHeader) and h.upload_id == upload_id:
                    return Place(place.segment, h.offset)
            return None
        finally:
            os.close(fd)

    def raw_removed(self) -> dict[str, float]:
        """Segments the raw retention removed once compacted: name -> when (Unix s)."""
        try:
            doc = orjson.loads((self.path / RAW_REMOVED).read_bytes())
        except (FileNotFoundError, orjson.JSONDecodeError):
            return {}
        return doc if type(doc) is dict else {}

    def __contains__(self, upload_id: str) -> bool:
        loc = self._lookup(upload_id)
        if loc is None:
            return self._retired(upload_id) is not None
        return loc.status == STORED or self._whole_at(loc, upload_id) is not None

    def __len__(self) -> int:
        """Uploads stored: reads every record header (O(store); for tests and tools)."""
        return sum(1 for _ in self._records())

    def _records(self) -> Iterator[tuple[str, RecordHeader]]:
        for name in self._segment_names():
            with self._open_segment(name) as fd:
                if fd is None:
                    continue
                for h in seg.scan(fd):
                    if isinstance(h, RecordHeader):
                        yield name, h

    def get(self, upload_id: str) -> tuple[dict, bytes] | None:
        """(meta, trace_json) of a stored upload, or None. One claim read and one record
        read; raises StoreError when the upload is stored but its record is damaged."""
        loc = self._lookup(upload_id)
        if loc is None:
            place = self._retired(upload_id)
            if place is None:
                return None
            loc = _Loc(STORED, place.segment, place.offset)
            if not (self._segdir / place.segment).exists():  # so _retired found it removed
                raise RawRemoved(
                    f"{upload_id!r}: compacted, and its raw record removed since by the raw "
                    "retention (--keep-raw); the query tables still count it"
                )
        found = None
        for _ in range(3):
            if loc is None:
                return None
            if loc.segment is None:  # a claim from before claims held locations
                found = self._find(self._segment_names(), upload_id)
                break
            found = self._whole_at(loc, upload_id)
            if found is not None or loc.status == _PENDING:
                break
            # Not there: a prune may have moved it since we read the claim. Look again.
            again = self._lookup(upload_id)
            if again == loc:
                # The claim was not updated (a prune died in between): find it in its
                # segment; not there at all means its header was damaged.
                found = self._find([loc.segment], upload_id)
                if found is None:
                    raise StoreError(
                        f"{upload_id!r}: stored, but its record in {loc.segment} is damaged "
                        "(see `jsprof serve check --store`)"
                    )
                break
            loc = again
        if found is None:
            return None
        meta, trace = found
        return orjson.loads(meta), trace

    def iter_uploads(
        self, after: Cursor | None = None, on_damage: Any = None
    ) -> Iterator[tuple[Cursor, str, dict, bytes]]:
        """Every stored upload in a stable order (segment name, then record number).

        Resumable: pass the cursor of the last upload handled to get only those stored since
        (in any segment); a sealed segment read to its end is skipped after one read of its
        trailer. A damaged record is logged and skipped, and the records after it still read;
        `on_damage(Finding)`, when given, is told of each (so a reader can count them).
        """
        positions = dict(after.positions) if after is not None else {}
        for name in self._segment_names():
            start = positions.get(name, 0)
            with self._open_segment(name) as fd:
                if fd is None:
                    continue
                if start:
                    tr = seg.trailer_at_end(fd)
                    if tr is not None and tr.count <= start:
                        continue
                for h in seg.scan(fd):
                    if isinstance(h, Trailer):
                        break
                    if isinstance(h, Damage):
                        if not h.tail:
                            log.error(
                                "store: %s: skipped %d damaged bytes at offset %d",
                                name, h.end - h.offset, h.offset,
                            )
                            if on_damage is not None:
                                on_damage(
                                    Finding(name, h.offset, h.end - h.offset, "damaged bytes")
                                )
                        continue
                    if h.seq < start:
                        continue
                    positions[name] = h.seq + 1
                    try:
                        meta, trace = seg.read_record(fd, h)
                    except SegmentError as e:
                        log.error("store: %s: skipped a damaged record: %s", name, e)
                        if on_damage is not None:
                            on_damage(
                                Finding(name, h.offset, h.end - h.offset, f"{h.upload_id!r}: {e}")
                            )
                        continue
                    yield Cursor(positions, name), h.upload_id, orjson.loads(meta), trace

    def count_uploads(self, after: Cursor | None = None) -> int:
        """How many uploads `iter_uploads(after)` has left to yield (damaged ones too),
        without reading their bodies: a sealed segment's trailer says how many records it
        holds (one read; a segment a prune rewrote says how many it kept, and its headers
        are scanned when a reader is part-way through it: the numbers of the records it
        dropped are gaps), an open one's headers are scanned. A reader that stopped early
        can say how many it left out at the cost of a compaction's resume."""
        positions = after.positions if after is not None else {}
        n = 0
        for name in self._segment_names():
            start = positions.get(name, 0)
            with self._open_segment(name) as fd:
                if fd is None:
                    continue
                tr = seg.trailer_at_end(fd)
                if tr is not None and tr.records is None:
                    n += max(0, tr.count - start)
                    continue
                if tr is not None and tr.count <= start:
                    continue  # read to its end
                if tr is not None and start == 0:
                    n += tr.records  # rewritten by a prune: what is left, not its numbers
                    continue
                for h in seg.scan(fd):  # open, or rewritten and partly read: the headers
                    if isinstance(h, Trailer):
                        break
                    if isinstance(h, RecordHeader) and h.seq >= start:
                        n += 1
        return n

    def stats(self) -> dict[str, Any]:
        names = self._segment_names()
        size = 0
        for n in names:
            try:
                size += (self._segdir / n).stat().st_size
            except FileNotFoundError:
                pass
        return {"uploads": len(self), "segments": len(names), "bytes": size}

    def check(self) -> CheckReport:
        """Read every record and its checksum: what is damaged, where (read-only)."""
        findings: list[Finding] = []
        records = 0
        names = self._segment_names()
        marked = set(_listdir(self._opendir))
        open_segments = []
        for name in names:
            with self._open_segment(name) as fd:
                if fd is None:
                    continue
                live = not _try_lock(fd, shared=True)
                sealed = False
                size = os.fstat(fd).st_size
                for h in seg.scan(fd, 0, size):
                    if isinstance(h, Trailer):
                        sealed = True
                        if h.end < size:  # e.g. a trailer written at a new segment's start
                            findings.append(Finding(
                                name, h.end, size - h.end,
                                "bytes after the trailer, hidden from every reader",
                            ))
                    elif isinstance(h, Damage):
                        # An open segment's tail is a write in progress (live writer) or
                        # left for recovery, which cuts it only if it is provably torn.
                        if not (h.tail and (live or name in marked)):
                            findings.append(
                                Finding(name, h.offset, h.end - h.offset, "damaged bytes")
                            )
                    else:
                        records += 1
                        try:
                            seg.read_record(fd, h)
                        except SegmentError as e:
                            findings.append(
                                Finding(name, h.offset, h.end - h.offset, f"{h.upload_id!r}: {e}")
                            )
                if name in marked or not sealed:
                    open_segments.append(
                        f"{name} ({'live writer' if live else 'writer gone, not yet recovered'})"
                    )
        quarantined = sorted(_listdir(self._qdir))
        return CheckReport(len(names), records, findings, open_segments, quarantined)


def _mark_stored(fd: int, upload_id: str) -> None:
    """`P` -> `1` in place: one byte over an allocated block, which a full disk cannot
    refuse. If it fails anyway the record is durable and its claim still names it."""
    try:
        os.pwrite(fd, STORED, 0)
    except OSError as e:
        log.error("store: %r stored, but its claim not marked (%s)", upload_id, e.strerror)


def app_is(fd: int, h: RecordHeader, app: str | None) -> bool:
    if app is None:
        return True
    meta = os.pread(fd, h.meta_len, h.offset + seg.HEADER_SIZE + h.id_len)
    try:
        return orjson.loads(meta).get("app") == app
    except (orjson.JSONDecodeError, AttributeError):
        return False


def _try_lock(fd: int, shared: bool = False) -> bool:
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        return True
    except OSError as e:
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return False
        raise


def _listdir(path: Path) -> list[str]:
    try:
        return os.listdir(path)
    except FileNotFoundError:
        return []


def _unlink(path: str | Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _writev_all(fd: int, parts: list[bytes]) -> None:
    n = os.writev(fd, parts)
    total = sum(len(p) for p in parts)
    if n < total:  # a short write (rare on regular files): finish it from where it stopped
        write_all(fd, b"".join(parts)[n:])


_libc = ctypes.CDLL(None, use_errno=True)


def _syncfs(path: Path) -> None:
    """Flush the store's filesystem (claims written since the last one): once per sealed
    segment, not once per upload."""
    if not hasattr(_libc, "syncfs"):  # pragma: no cover - not Linux
        os.sync()
        return
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if _libc.syncfs(fd) != 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
    finally:
        os.close(fd)
