"""The retention cut on a store on object storage (`jsprof serve prune --store s3://...`,
and `--retention` in the collectors' compactor): the local store's meaning
(docs/store.md, "Retention and pruning"), under the bucket's lease, every write
conditional or to a name no one else makes, so it never races the compactor.

1. The mark first: `pruned.json` (app, or `*`, -> epoch ms; a cut never moves back),
   replaced with If-Match. Queries pull it into their mirror (`Store.pruned_before`) and
   leave out an upload received before it, whatever manifest they read.
2. The tables: pruned in the compactor's mirror (`tables/prune.py`), their new parts
   pushed under names of their own and the manifest committed with If-Match on the etag
   read, as a compaction run commits (`ObjectCompactor._commit`).
3. The raw segment objects: one whose records are all to go is deleted; one that holds
   some is written anew without them (the records kept byte for byte, with their
   numbers) under a name of its own that sorts where the old one did, then the old one
   deleted. Only below the committed cursor's listing floor (read to its end, listed by no
   reader: no record is read twice); a segment object of the last minutes keeps its
   records until a later cut (the mark hides them). Segment objects are listed up to a
   day past the cut (their names' time is the put's, their records' receivedAt before it).
"""

from __future__ import annotations

import os
import re
import secrets
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from . import segment as seg
from .errors import StoreError
from .objects import ObjectStore
from .objstore import (
    NEW_SEGMENTS,
    PRUNED_KEY,
    SEGMENTS,
    Conflict,
    ObjectCompactor,
    listing_floor,
    segment_count,
    segment_match,
    segment_put_time,
)
from .segment import RecordHeader

DAY_MS = 86_400_000


@dataclass
class ObjectPrune:
    tables_removed: int = 0  # uploads the tables no longer hold
    removed: int = 0  # records dropped from segment objects
    kept: int = 0  # records kept in the segment objects it read
    deleted: int = 0  # segment objects deleted
    rewritten: int = 0  # segment objects written anew without some records
    recent: int = 0  # segment objects above the floor left whole (the mark hides them)


def mark(objects: ObjectStore, older_than: float, app: str | None) -> None:
    """Write the retention mark (If-Match / If-None-Match: a cut never moves back)."""
    key = "*" if app is None else app
    for _ in range(10):
        got = objects.get(PRUNED_KEY)
        marks = orjson.loads(got[0]) if got is not None else {}
        if type(marks) is not dict:
            marks = {}
        if marks.get(key, float("-inf")) >= older_than:
            return
        marks[key] = older_than
        data = orjson.dumps(marks, option=orjson.OPT_SORT_KEYS)
        if got is None:
            if objects.put_new(PRUNED_KEY, data):
                return
        elif objects.put_if(PRUNED_KEY, data, got[1]) is not None:
            return
    raise StoreError(f"{objects.url}: cannot write {PRUNED_KEY}: it kept changing")


def pruned_marks(objects: ObjectStore) -> bytes | None:
    got = objects.get(PRUNED_KEY)
    return got[0] if got is not None else None


def prune_objects(comp: ObjectCompactor, older_than: float, app: str | None = None,
                  still_held: Any = None, marked: bool = False) -> ObjectPrune:
    """Remove the uploads received before `older_than` (epoch ms), only `app`'s if given,
    from the bucket's tables and segment objects (see the module's docstring). The caller
    holds the lease; `still_held()` renews it (False: lost, nothing more is written)."""
    from .tables.manifest import cursor_in, read_manifest
    from .tables.prune import prune_tables

    objects = comp.objects
    res = ObjectPrune()
    if still_held is not None and not still_held():
        raise Conflict(f"{objects.url}: the compactor's lease was lost; the prune stops")
    if not marked:
        mark(objects, older_than, app)
    comp.mirror.pull_tables()
    start_etag = comp.mirror.etag
    man = read_manifest(comp.mirror.root)
    cur = cursor_in(man)
    positions = dict(getattr(cur, "positions", None) or {})
    try:
        res.tables_removed = prune_tables(comp.mirror.root, older_than, app)
        if res.tables_removed:
            cut = read_manifest(comp.mirror.root)
            gone = _pruned_ids(comp.mirror.root, man, cut)
            new = comp._commit(man, cut, start_etag, still_held)  # noqa: SLF001
            comp._sweep(man, new)  # noqa: SLF001
            # out of the compacted ids too: the same id sent again is a new upload (as on
            # a local store), not a retry of one the tables no longer hold
            comp.ids_pruned(gone)
    except BaseException:
        comp._reset()  # noqa: SLF001 - the mirror may be ahead of the bucket
        raise
    floor = listing_floor(positions) or ""
    keys = [k for k, _ in objects.list(SEGMENTS, end_before=NEW_SEGMENTS)]
    keys += [k for k, _ in objects.list(
        NEW_SEGMENTS, end_before=f"{NEW_SEGMENTS}{int(older_than) + DAY_MS:013d}")]
    for key in keys:
        if still_held is not None and not still_held():
            raise Conflict(f"{objects.url}: the compactor's lease was lost; the prune stops")
        _prune_segment(objects, key, older_than, app, floor, positions, res)
    return res


def _pruned_ids(root: Path, before: dict, after: dict) -> set[str]:
    """The ids of the uploads the manifest `after` (a prune's) no longer holds of
    `before`'s: those of the uploads parts it dropped or rewrote, less those of the parts
    it wrote (read in the mirror, where the dropped parts stay for their grace)."""
    import pyarrow.parquet as pq

    from .tables.manifest import part_path

    def ids(man: dict, other: dict) -> set[str]:
        theirs = {part_path(e) for e in other["uploads"]}
        out: set[str] = set()
        for e in man["uploads"]:
            if part_path(e) not in theirs:
                out.update(pq.read_table(root / "tables" / part_path(e), columns=["id"])
                           .column("id").to_pylist())
        return out

    return ids(before, after) - ids(after, before)


def _prune_segment(objects: ObjectStore, key: str, older_than: float, app: str | None,
                   floor: str, positions: dict[str, int], res: ObjectPrune) -> None:
    from .store import app_is

    name = key[len(SEGMENTS):]
    m = segment_match(name)
    if m is None or (m.group(2) is not None and int(m.group(2)) >= older_than):
        return  # not ours, or every record newer than the cut
    if m.group(3) is not None and int(m.group(3)) < older_than and app is None:
        if _deletable(key, name, floor, positions):
            objects.delete(key)
            res.deleted += 1
            res.removed += _records_in(name)
        else:
            res.recent += 1
        return
    got = objects.get(key)
    if got is None:
        return
    with tempfile.TemporaryDirectory(prefix="jsprof-prune-") as tmp:
        path = Path(tmp, "segment")
        path.write_bytes(got[0])
        fd = os.open(path, os.O_RDONLY)
        try:
            heads = [h for h in seg.scan(fd) if isinstance(h, RecordHeader)]
            drop = {h.offset for h in heads
                    if h.received_at < older_than and app_is(fd, h, app)}
            if not drop:
                res.kept += len(heads)
                return
            if not _deletable(key, name, floor, positions):
                res.recent += 1
                res.kept += len(heads)
                return
            new = _rewritten_key(name) if len(drop) < len(heads) else None
            if new is not None and new > floor:
                res.recent += 1  # it would be listed: read again (an older jsprof's name)
                res.kept += len(heads)
                return
            res.removed += len(drop)
            res.kept += len(heads) - len(drop)
            if new is not None:
                _rewrite(objects, fd, new, name, heads, drop)
                res.rewritten += 1
            else:
                res.deleted += 1
        finally:
            os.close(fd)
    objects.delete(key)


def _deletable(key: str, name: str, floor: str, positions: dict[str, int]) -> bool:
    """Whether no reader lists segment object `key` any more: below the floor (new names),
    or (an older jsprof's, listed in full) read to its end by the committed cursor."""
    if key.startswith(NEW_SEGMENTS):
        return key <= floor
    return positions.get(name, 0) >= (segment_count(name) or 0)


def _records_in(name: str) -> int:
    """Records segment object `name` holds: the count in its name (record numbers used),
    or what a prune kept of them (its writer `pruned_<kept>`)."""
    m = re.match(r"^t[0-9]{13}-pruned_([0-9]+)-", name)
    return int(m.group(1)) if m else (segment_count(name) or 0)


def _rewritten_key(name: str) -> str:
    """A name of its own sorting where `name` did (its time; an older jsprof's name: its
    writer's start), its kept records (`{kept}`) and receivedAt range filled in by
    `_rewrite`."""
    t = segment_put_time(name)
    if t is None:
        t = int(name[:10]) * 1000
    return f"{NEW_SEGMENTS}{t:013d}-pruned_{{kept}}-{os.getpid()}-{secrets.token_hex(3)}-000000"


def _rewrite(objects: ObjectStore, fd: int, new: str, name: str, heads: list[RecordHeader],
             drop: set[int]) -> None:
    """The kept records of `name`, byte for byte with their numbers, as `new`."""
    import math

    count = segment_count(name) or 0
    parts: list[bytes] = []
    lo, hi = seg.NO_RANGE
    for h in heads:
        if h.offset not in drop:
            parts.append(os.pread(fd, h.end - h.offset, h.offset))
            lo, hi = min(lo, h.received_at), max(hi, h.received_at)
    parts.append(seg.encode_trailer(count, (lo, hi), len(heads) - len(drop)))
    kept = len(heads) - len(drop)
    key = f"{new.format(kept=kept)}-t{math.floor(lo)}-{math.ceil(hi)}-{count}.seg"
    if not objects.put_new(key, b"".join(parts)):
        raise StoreError(f"{objects.url}: cannot create {key}: it exists")


class Pruner:
    """The cuts the lease holder makes (the compactor process, after its runs): every
    mark `pruned.json` holds that it has not applied yet (`jsprof serve prune` writes its
    mark, and prunes itself only when it can take the lease), and `--retention`'s, marked
    hourly. Applied marks are remembered by this process; a new holder applies them again
    once (a prune done already finds nothing more to remove)."""

    EVERY_S = 3600.0

    def __init__(self, comp: ObjectCompactor, retention_s: float | None = None) -> None:
        self.comp = comp
        self.retention_s = retention_s
        self.applied: bytes | None = None
        self._marked_at: float | None = None

    def run(self, still_held: Any = None) -> ObjectPrune | None:
        objects = self.comp.objects
        if self.retention_s and (self._marked_at is None
                                 or time.monotonic() - self._marked_at >= self.EVERY_S):
            mark(objects, objects.clock() * 1000 - self.retention_s * 1000, None)
            self._marked_at = time.monotonic()
        raw = pruned_marks(objects)
        if raw is None or raw == self.applied:
            return None
        total = ObjectPrune()
        for key, cut in sorted(orjson.loads(raw).items()):
            r = prune_objects(self.comp, float(cut), None if key == "*" else key,
                              still_held, marked=True)
            for f in ("tables_removed", "removed", "kept", "deleted", "rewritten", "recent"):
                setattr(total, f, getattr(total, f) + getattr(r, f))
        self.applied = raw
        return total
