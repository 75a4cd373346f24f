"""What leaves the store, and when: the retention cut, raw segments once compacted, and
claims. Every step here holds the tables' lock (`lock.py`), the one lock of every writer
of the tables (compaction, merging) too, so none of them sees the store half-changed.

**The retention cut.** `prune(store, older_than, app)` (`jsprof serve prune`, and
`--retention` in the collector) removes the uploads received before the cut from the raw
segments (`Store.prune_segments`) and from the tables (`tables/prune.py`) under one hold
of the lock: the tables' list of damaged records names places in segments that the
rewrite moves, and no compaction may add one between the rewrite and the tables' update.
The retention mark (`Store.pruned_before`) is written first, so a query never counts a
pruned upload whatever it read before or during the cut.

What the compactor retires, so the store's files stay few:

**Claims.** Every durable record's claim file (`claims/<aa>/<sha256>`, one per upload) is
moved into a run of the claim index (claimindex.py): the places are written in a run,
fsync'd and renamed into place first, and only then each claim file is removed, under its
flock, if it still says that place. A reader or an append that finds no claim file asks the
index (`Store._retired`), so an id is found in one or the other at every instant: nothing
acknowledged is lost, and a retry of a retired upload is still answered as a duplicate.
Only claims that say `1 <segment> <offset>` (durable, marked) are retired: a pending one
(`P`, an append in progress holds its flock, so we wait for it; one left by a writer that
died is recovery's) stays where it is.

**Raw segments.** Once every record of a sealed segment is compacted into the tables and
its claims are retired, the segment is only needed to give a trace back as uploaded
(`GET /v1/traces/{id}`), to rebuild the tables, and for the fleet's raw-record views.
`remove_raw(store, keep_s)` deletes such segments sealed more than `keep_s` ago
(`jsprof serve --keep-raw`, default 7 days), after copying any damaged bytes to
quarantine/ and naming the segment in `raw-removed.json` (a retried upload whose record
was there is still a duplicate; `get` says the raw trace was removed).

Both run in the collector's compactor process.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from . import segment as seg
from .claimindex import ClaimIndex, key_of
from .lock import TablesLock
from .segment import Damage, RecordHeader
from .tables.prune import prune_tables

# Records looked at per run of `retire_claims`: bounds its memory and how long it holds
# the tables' lock (a backlog is retired over several runs).
BATCH = 20_000
KEEP_RAW_S = 7 * 86400.0  # default of --keep-raw


def prune(store: Any, older_than: float, app: str | None = None) -> Any:
    """Remove the uploads received before `older_than` (epoch ms), only `app`'s if given,
    from the raw segments and the tables; returns the store's `PruneResult` (with
    `tables_removed`). Open segments of live writers are skipped and reported (`busy`)."""
    store.rotate()
    store.recover()
    store.mark_pruned(older_than, app)
    # The lock even before the first compaction (TablesLock makes tables/): a compactor
    # that starts now must not read the segments the prune is rewriting, or its list of
    # damaged records names offsets the rewrite moved.
    with TablesLock(Path(store.path) / "tables"):
        res, places = store.prune_segments(older_than, app)
        n = prune_tables(store.path, older_than, app, places, locked=True)
    return res._replace(tables_removed=n)


class Retired(NamedTuple):
    claims: int  # claim files removed
    runs_merged: int


def retire_claims(store: Any, batch: int = BATCH) -> Retired:
    """Move the claims of durable records into the claim index; remove their files."""
    tdir = Path(store.path) / "tables"
    with TablesLock(tdir):
        return _retire(store, batch)


def _retire(store: Any, batch: int) -> Retired:
    index: ClaimIndex = store._index  # noqa: SLF001 - the store's own index
    upto = index.upto()
    entries: list[tuple[bytes, str, int]] = []
    done: list[tuple[str, str, int]] = []  # (id, segment, offset) whose claim file goes
    new_upto = dict(upto)
    seen = 0
    for name in store._segment_names():  # noqa: SLF001
        if seen >= batch:
            break
        start = upto.get(name, 0)
        with store._open_segment(name) as fd:  # noqa: SLF001
            if fd is None:
                continue
            tr = seg.trailer_at_end(fd)
            if tr is not None and tr.count <= start:
                continue
            for h in seg.scan(fd):
                if not isinstance(h, RecordHeader):
                    continue
                if h.seq < start:
                    continue
                if seen >= batch:
                    break
                seen += 1
                state = _claim_state(store, h.upload_id, name, h.offset)
                if state == "pending":
                    break  # its append is unfinished or its writer died: retired later
                new_upto[name] = h.seq + 1
                if state in ("here", "none"):
                    entries.append((key_of(h.upload_id), name, h.offset))
                    if state == "here":
                        done.append((h.upload_id, name, h.offset))
    if new_upto == upto:
        return Retired(0, index.merge())
    index.dir.mkdir(parents=True, exist_ok=True)
    from .claimindex import write_run

    write_run(index.dir, index.next_number(), entries, new_upto)
    removed = 0
    for uid, name, offset in done:
        removed += _remove_claim(store, uid, name, offset)
    return Retired(removed, index.merge())


def _claim_state(store: Any, upload_id: str, name: str, offset: int) -> str:
    """"here": the claim says this record, durable; "elsewhere": another copy (or an old
    claim without a place); "pending": not marked durable; "empty": a failed append (its
    record cut or about to be); "none": no claim file (retired before, its run lost)."""
    from .store import STORED, read_claim

    fd = store._claim(upload_id, create=False)  # noqa: SLF001 - waits for an append of it
    if fd is None:
        return "none"
    try:
        loc = read_claim(fd)
    finally:
        os.close(fd)
    if loc is None:
        return "empty"
    if loc.status != STORED:
        return "pending" if (loc.segment, loc.offset) == (name, offset) else "elsewhere"
    return "here" if (loc.segment, loc.offset) == (name, offset) else "elsewhere"


def _remove_claim(store: Any, upload_id: str, name: str, offset: int) -> int:
    from .store import STORED, read_claim

    fd = store._claim(upload_id, create=False)  # noqa: SLF001
    if fd is None:
        return 0
    try:
        loc = read_claim(fd)
        if loc is not None and (loc.status, loc.segment, loc.offset) == (STORED, name, offset):
            os.unlink(store._claim_path(upload_id))  # noqa: SLF001 - under its flock
            return 1
        return 0
    except FileNotFoundError:
        return 0
    finally:
        os.close(fd)


def sweep_claims(store: Any) -> int:
    """Remove claim files whose place a run holds already (a compactor killed between
    writing a run and removing the claims it retired). Once per compactor process; costs a
    look at every claim file, which are few."""
    from .store import STORED, read_claim

    index: ClaimIndex = store._index  # noqa: SLF001
    if not index.runs():
        return 0
    removed = 0
    with TablesLock(Path(store.path) / "tables"):
        for sub in sorted(os.listdir(store._claimdir)):  # noqa: SLF001
            if len(sub) != 2:
                continue
            try:
                names = os.listdir(store._claimdir / sub)  # noqa: SLF001
            except (FileNotFoundError, NotADirectoryError):
                continue
            for fname in names:
                try:
                    key = bytes.fromhex(fname[:32])
                except ValueError:
                    continue
                place = None
                for run in reversed(index.runs()):
                    place = run.find(key)
                    if place is not None:
                        break
                if place is None:
                    continue
                path = store._claimdir / sub / fname  # noqa: SLF001
                try:
                    fd = os.open(path, os.O_RDWR)
                except FileNotFoundError:
                    continue
                try:
                    import fcntl

                    fcntl.flock(fd, fcntl.LOCK_EX)
                    loc = read_claim(fd)
                    if loc is not None and (loc.status, loc.segment, loc.offset) == (
                        STORED, place.segment, place.offset
                    ):
                        os.unlink(path)
                        removed += 1
                except FileNotFoundError:
                    pass
                finally:
                    os.close(fd)
    return removed


def remove_raw(store: Any, keep_s: float, now: float | None = None) -> list[str]:
    """Delete sealed segments whose every record is compacted and claim-retired, sealed
    more than `keep_s` seconds ago; returns their names."""
    from .tables.manifest import cursor_in, read_manifest

    now = time.time() if now is None else now
    tdir = Path(store.path) / "tables"
    removed: list[str] = []
    with TablesLock(tdir):
        cursor = cursor_in(read_manifest(store.path))
        compacted = dict(getattr(cursor, "positions", None) or {})
        retired = store._index.upto()  # noqa: SLF001
        marked = set(_listdir(store._opendir))  # noqa: SLF001
        cut = now - keep_s
        for name in store._segment_names():  # noqa: SLF001
            if name in marked:
                continue
            path = store._segdir / name  # noqa: SLF001
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                continue
            try:
                # Its age is the time since it was sealed (its last write: the trailer, or
                # a prune's rewrite), not its uploads' receivedAt: a backlog compacted
                # today is kept `keep_s` from today.
                tr = seg.trailer_at_end(fd)
                if tr is None or os.fstat(fd).st_mtime >= cut:
                    continue
                if compacted.get(name, 0) < tr.count or retired.get(name, 0) < tr.count:
                    continue
                damage = [d for d in seg.scan(fd) if isinstance(d, Damage)]
                if damage:
                    store._quarantine(fd, name, damage)  # noqa: SLF001
            finally:
                os.close(fd)
            _mark_removed(store, name, now)
            try:
                os.unlink(path)
            except FileNotFoundError:
                continue
            removed.append(name)
        if removed:
            from .durable import fsync_dir

            fsync_dir(store._segdir)  # noqa: SLF001
    return removed


def _mark_removed(store: Any, name: str, now: float) -> None:
    """Name the segment in raw-removed.json (durable) before it goes."""
    from .durable import fsync_dir
    from .store import RAW_REMOVED, write_all

    marks = store.raw_removed()
    marks[name] = now
    tmp = Path(store.path) / (RAW_REMOVED + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, orjson.dumps(marks, option=orjson.OPT_SORT_KEYS))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, Path(store.path) / RAW_REMOVED)
    fsync_dir(Path(store.path))


def _listdir(path: Path) -> list[str]:
    try:
        return os.listdir(path)
    except FileNotFoundError:
        return []
