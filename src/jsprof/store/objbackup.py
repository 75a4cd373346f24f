"""A consistent copy of a live store on object storage (`jsprof serve backup --store
s3://... --to DIR|s3://...`), and its restore (the same, the other way round).

Collectors and the compactor keep running while it copies; nothing is locked. The order
keeps every acknowledged upload in the copy:

1. the segment objects, as listed when the copy starts (a segment object is never
   rewritten; one deleted meanwhile by raw retention was compacted by a manifest committed
   before its deletion, so by the manifest read in 2);
2. the committed manifest, read after 1: its cursor is at least as far as any deletion
   in 1 assumed, and uploads stored after the listing are in its tables or newer than the
   backup;
3. the parts it lists (immutable; a part it lists stays in the bucket for at least the
   merge's grace, 15 min, after a later manifest stops listing it);
4. the manifest, then `backup.json` (when, from where, what), written last: a local copy
   without it is unfinished, and `jsprof serve backup` refuses to restore from it.

The copy is laid out as the bucket is (segments/, tables/; not leases/): a local directory
(`LocalObjects`) or another bucket or prefix. Each object is created with If-None-Match, so
a copy never replaces anything: the destination must be empty.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from .errors import StoreError
from .objects import ObjectStore
from .objstore import MANIFEST_KEY, SEGMENTS, segment_count

MARKER = "backup.json"


@dataclass
class CopyStats:
    segments: int = 0
    parts: int = 0
    bytes: int = 0


def copy_store(src: ObjectStore, dst: ObjectStore) -> CopyStats:
    """Copy the store in `src` to the empty `dst` (see the module's docstring)."""
    import orjson

    if dst.list(SEGMENTS) or dst.list("tables/"):
        raise StoreError(f"{dst.url}: not empty; back up to (or restore into) an empty "
                         "directory or prefix")
    stats = CopyStats()
    names = [k for k, _ in src.list(SEGMENTS) if segment_count(k[len(SEGMENTS):]) is not None]
    for key in names:
        got = src.get(key)
        if got is None:
            continue  # removed by raw retention since listed: compacted (see 1 above)
        _create(dst, key, got[0])
        stats.segments += 1
        stats.bytes += len(got[0])
    got = src.get(MANIFEST_KEY)
    if got is not None:
        _copy_tables(src, dst, got[0], stats)
    _create(dst, MARKER, orjson.dumps({"from": src.url, "at": time.time(),
                                       "segments": stats.segments, "parts": stats.parts}))
    return stats


def _copy_tables(src: ObjectStore, dst: ObjectStore, manifest: bytes,
                 stats: CopyStats) -> None:
    import orjson

    from .tables.manifest import part_paths

    for rel in sorted(part_paths(orjson.loads(manifest))):
        part = src.get("tables/" + rel)
        if part is None:
            raise StoreError(f"{src.url}: tables/{rel} is listed by the manifest but missing "
                             "(merged away during a copy that took longer than 15 min?); "
                             "run the backup again")
        _create(dst, "tables/" + rel, part[0])
        stats.parts += 1
        stats.bytes += len(part[0])
    _create(dst, MANIFEST_KEY, manifest)
    stats.bytes += len(manifest)


def is_backup(src: ObjectStore) -> bool:
    """Whether `src` is a whole copy made by `copy_store` (its marker written last)."""
    return src.get(MARKER) is not None


def _create(dst: ObjectStore, key: str, data: bytes) -> None:
    if not dst.put_new(key, data):
        raise StoreError(f"{dst.url}: {key} exists already; back up to (or restore into) an "
                         "empty directory or prefix")
