"""`jsprof serve check --store s3://...`: the local store's check (docs/store.md,
"Checking") of a store on object storage. Read-only: it lists and reads, never writes (a
read-only key is enough).

Every segment object is fetched (one at a time, into a temporary file) and each record's
header and body CRCs checked, as `Store.check` does on a directory; a segment object is
written whole by one put, so a missing trailer or bytes after it are damage too. The
manifest's parts are checked to be in the bucket. What the compactor has not reached is
counted from the committed cursor as the compactor reads it (`listing_floor`).
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from . import segment as seg
from .objects import ObjectStore
from .objstore import (
    MANIFEST_KEY,
    NEW_SEGMENTS,
    SEGMENTS,
    ManifestDamaged,
    bucket_manifest,
    compacted_rows,
    listing_floor,
    read_report,
    segment_count,
)
from .segment import Damage, SegmentError, Trailer
from .store import Finding


@dataclass
class ObjectCheck:
    segments: int = 0
    records: int = 0
    findings: list[Finding] = field(default_factory=list)
    pending: int = 0  # records past the committed cursor
    oldest_pending: float | None = None  # epoch ms
    compacted: int = 0  # uploads the tables hold
    folders: dict[str, tuple[int, int]] = field(default_factory=dict)  # bytes, objects
    report: dict = field(default_factory=dict)  # the compactor's (objstore.RunReport)


def check_objects(objects: ObjectStore) -> ObjectCheck:
    """Check every segment object and the parts the committed manifest lists."""
    from .tables.manifest import cursor_in, part_paths

    rep = ObjectCheck(report=read_report(objects))
    try:
        man = bucket_manifest(objects)
    except ManifestDamaged as e:  # damage to report, as a segment's is: not a traceback
        man = {}
        rep.findings.append(Finding(MANIFEST_KEY, 0, 0, str(e).split(": ", 1)[1]))
    positions: dict[str, int] = {}
    if man:
        cur = cursor_in(man)
        positions = dict(getattr(cur, "positions", None) or {})
        rep.compacted = compacted_rows(man)
    floor = listing_floor(positions) or ""
    keys: list[str] = []
    folders: dict[str, list[int]] = {}
    for key, size in objects.list(""):
        f = folders.setdefault(key.split("/", 1)[0], [0, 0])
        f[0] += size
        f[1] += 1
        keys.append(key)
    rep.folders = {k: (v[0], v[1]) for k, v in folders.items()}
    present = set(keys)
    for rel in sorted(part_paths(man)) if man else []:
        if "tables/" + rel not in present:
            rep.findings.append(Finding(f"tables/{rel}", 0, 0,
                                        "listed by the manifest, missing from the store"))
    with tempfile.TemporaryDirectory(prefix="jsprof-check-") as tmp:
        for key in keys:
            name = key[len(SEGMENTS):]
            if not key.startswith(SEGMENTS) or segment_count(name) is None:
                continue
            obj = objects.get(key)
            if obj is None:
                continue  # removed since listed (raw retention)
            rep.segments += 1
            # below the floor: read to its end by the compactor (it left the cursor)
            start = (1 << 62) if key.startswith(NEW_SEGMENTS) and key <= floor \
                else positions.get(name, 0)
            path = Path(tmp, "segment")
            path.write_bytes(obj[0])
            fd = os.open(path, os.O_RDONLY)
            try:
                _check_segment(fd, key, len(obj[0]), start, rep)
            finally:
                os.close(fd)
                path.unlink()
    return rep


def _check_segment(fd: int, key: str, size: int, start: int, rep: ObjectCheck) -> None:
    sealed = False
    for h in seg.scan(fd, 0, size):
        if isinstance(h, Trailer):
            sealed = True
            if h.end < size:
                rep.findings.append(Finding(key, h.end, size - h.end,
                                            "bytes after the trailer, hidden from every reader"))
        elif isinstance(h, Damage):
            rep.findings.append(Finding(key, h.offset, h.end - h.offset, "damaged bytes"))
        else:
            rep.records += 1
            if h.seq >= start:
                rep.pending += 1
                if rep.oldest_pending is None or h.received_at < rep.oldest_pending:
                    rep.oldest_pending = h.received_at
            try:
                seg.read_record(fd, h)
            except SegmentError as e:
                rep.findings.append(Finding(key, h.offset, h.end - h.offset,
                                            f"{h.upload_id!r}: {e}"))
    if not sealed:
        rep.findings.append(Finding(key, size, 0, "no trailer: the object is not whole"))
