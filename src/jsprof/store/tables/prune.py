"""Pruning the tables: the uploads a retention cut removes from the raw store leave the
tables too (`retention.py` runs both under the tables' lock)."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..durable import fsync_dir
from ..lock import TablesLock
from .intern import forget
from .manifest import MANIFEST, ROW_KINDS, locked_manifest, part_path, tables_dir, write_manifest
from .merge import GRACE_S
from .parts import level, new_part, read_part, schemas, unlink_parts, verify_part
from .rebuild import rebuild_rollups
from .rollup import ROLLUP_KINDS

# Called with a stage name ("segments": the raw segments pruned, the tables not yet;
# "written": rewritten parts written, manifest not committed; "committed"), for tests
# that kill the process there.
_prune_hook: Any = None


def prune_tables(
    store_path: str | os.PathLike, older_than: float, app: str | None = None,
    places: dict[str, dict[int, int] | None] | None = None, locked: bool = False,
    now: float | None = None, grace: float = GRACE_S,
) -> int:
    """Remove from the tables the uploads received before `older_than` (epoch ms), only
    `app`'s if given: what `Store.prune_segments` does to the raw uploads
    (`store/retention.py` runs both). Returns uploads removed.

    `places`: the segments the prune rewrote (old offset -> new offset of each record
    kept) or deleted (None): the damaged records listed there move with them, or leave
    the list with their bytes (a prune copies those to quarantine/ first). `locked`: the
    caller holds the compaction lock.

    Parts wholly before the cut are dropped from the manifest without being read; only a
    part that straddles it (the cut's day) is rewritten without those rows, under a new
    part number. A release left with no uploads loses its frames and stacks too. The
    files the new manifest no longer lists are listed in its `obsolete` and deleted after
    `grace` seconds (`now`: the time, for tests), by a later merge or prune.
    """
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    tdir = tables_dir(store_path)
    if not (tdir / MANIFEST).exists():
        return 0
    if _prune_hook:
        _prune_hook("segments")
    with contextlib.nullcontext() if locked else TablesLock(tdir):
        man = locked_manifest(tdir, forget)
        moved_damage = _move_damaged(man, places or {})
        apps = {k: v["app"] for k, v in man["releases"].items()}
        part = man["nextPart"]
        n_rewritten = 0
        garbage: list[str] = []
        dirs: set[Path] = set()  # of the rewritten parts: fsync'd before the commit
        dropped: dict[str, set[int]] = {}
        removed = 0

        def rewrite(e: str | dict, t: Any, keep: Any, schema: Any) -> dict:
            nonlocal n_rewritten
            n_rewritten += 1
            rel = str(Path(part_path(e)).parent / f"part-{part:06d}-{n_rewritten}.parquet")
            cols = t.filter(keep).to_pydict()
            ne = new_part(
                tdir, rel, cols, schema, len(next(iter(cols.values()), [])),
                e.get("day") if isinstance(e, dict) else None,
                cols["received_at"] if "received_at" in cols else [
                    None if isinstance(e, str) or e.get("minAt") is None else e["minAt"],
                    None if isinstance(e, str) or e.get("maxAt") is None else e["maxAt"],
                ],
            )
            dirs.add((tdir / rel).parent)
            if isinstance(e, dict) and "rkey" in e:
                ne["rkey"] = e["rkey"]
            if isinstance(e, dict) and "segments" in e:  # those of what it keeps, and more
                ne["segments"] = e["segments"]
            if level(e):  # in place of a merged part: levels never rise along a list
                ne["level"] = level(e)
            return ne

        sch = schemas()
        uploads = []
        for e in man["uploads"]:
            ranged = isinstance(e, dict) and e.get("minAt") is not None
            rk = e.get("rkey") if isinstance(e, dict) else None
            if ranged and (e["minAt"] >= older_than or (app is not None and apps.get(rk) != app)):
                uploads.append(e)
                continue
            t = read_part(pq, verify_part(tdir, e), tdir)
            at = pc.fill_null(pc.less(t["received_at"], older_than), False)
            if app is not None:
                at = pc.and_(at, pc.fill_null(pc.equal(t["app"], app), False))
            n = pc.sum(at).as_py() or 0
            if not n:
                uploads.append(e)
                continue
            removed += n
            drop = t.filter(at)
            for r, u in zip(drop["rkey"].to_pylist(), drop["uk"].to_pylist(), strict=True):
                dropped.setdefault(r, set()).add(u)
            garbage.append(part_path(e))
            if n < t.num_rows:
                uploads.append(rewrite(e, t, pc.invert(at), sch["uploads"]))
        man["uploads"] = uploads
        if removed:
            # counted: a compactor's index of compacted ids on another machine (objstore's
            # CompactedIds, caught up by `uk`, which a prune adds none of) sees the change
            man["prunes"] = int(man.get("prunes", 0)) + 1
        for rkey, uks in dropped.items():
            entry = man["releases"].get(rkey)
            if entry is None:
                continue
            keys = np.fromiter(uks, np.int64)
            straddled: set[str] = set()
            for kind in ROLLUP_KINDS:
                kept = []
                for e in entry["parts"][kind]:
                    if not isinstance(e, dict) or e.get("minAt") is None or \
                            e["minAt"] >= older_than:
                        kept.append(e)  # no upload of it is dropped (none without a time)
                        continue
                    garbage.append(part_path(e))
                    if e["maxAt"] >= older_than:  # made anew from what the day keeps
                        straddled.add(e["day"])
                entry["parts"][kind] = kept
            # A cut day is rolled up anew from every upload it keeps, so its parts from
            # after the cut go too: kept beside the new part, their uploads counted twice
            for kind in ROLLUP_KINDS:
                kept = []
                for e in entry["parts"][kind]:
                    if isinstance(e, dict) and e.get("minAt") is not None and \
                            e.get("day") in straddled:
                        garbage.append(part_path(e))
                    else:
                        kept.append(e)
                entry["parts"][kind] = kept
            for kind in ROW_KINDS:
                kept = []
                for e in entry["parts"][kind]:
                    if isinstance(e, dict) and e.get("minAt") is not None:
                        if e["minAt"] >= older_than:
                            kept.append(e)
                            continue
                        if e["maxAt"] < older_than:  # every upload in it is dropped
                            garbage.append(part_path(e))
                            continue
                    t = read_part(pq, verify_part(tdir, e), tdir)
                    hit = np.isin(t["uk"].to_numpy(), keys)
                    if not hit.any():
                        kept.append(e)
                        continue
                    garbage.append(part_path(e))
                    if not hit.all():
                        kept.append(rewrite(e, t, ~hit, sch[kind]))
                entry["parts"][kind] = kept
            for day in sorted(straddled):
                for kind, entries in rebuild_rollups(tdir, man, rkey, day, part).items():
                    entry["parts"][kind].extend(entries)
                    dirs.update((tdir / part_path(x)).parent for x in entries)
        live = {e.get("rkey") if isinstance(e, dict) else None for e in uploads}
        if None not in live:  # no part of the old layout (all releases mixed) is left
            for rkey in [k for k in man["releases"] if k not in live]:
                for entries in man["releases"].pop(rkey)["parts"].values():
                    garbage.extend(part_path(e) for e in entries)
        # The dropped parts' files stay for GRACE_S, listed in `obsolete` as a merge's
        # are: a query that read the manifest before this commit still reads them (deleted
        # at once, it failed with "cannot be read"). Those whose grace is over go now.
        now = time.time() if now is None else now
        obsolete = man.setdefault("obsolete", [])
        due = [o for o in obsolete if now - o["at"] >= grace]
        if not removed and not garbage and not moved_damage and not due:
            return 0
        if _prune_hook:
            _prune_hook("written")
        gone_now = {o["path"] for o in due}
        man["obsolete"] = [o for o in obsolete if o["path"] not in gone_now]
        man["obsolete"].extend({"path": g, "at": now} for g in garbage)
        man["nextPart"] = part + 1
        for d in sorted(dirs, key=lambda d: -len(d.parts)):
            fsync_dir(d)
        write_manifest(tdir, man)
        fsync_dir(tdir)
        if _prune_hook:
            _prune_hook("committed")
        unlink_parts(tdir, due)  # a kill before: unlisted files, which a sweep removes
    return removed


def _move_damaged(man: dict, places: dict[str, dict[int, int] | None]) -> bool:
    """Follow a prune's rewrites in the manifest's damaged records; True if any changed.
    A damaged record the rewrite kept is at its new offset; damaged bytes it dropped (a
    range the scan resynced past, a record of the pruned time) and a deleted segment's
    are no longer in the store: they leave the list (and every query's count)."""
    out, changed = [], False
    for d in man.get("damaged", []):
        if d["segment"] not in places:
            out.append(d)
            continue
        new = (places[d["segment"]] or {}).get(d["offset"])
        changed = changed or new != d["offset"]
        if new is not None:
            out.append(dict(d, offset=new))
    if changed:
        man["damaged"] = out
    return changed

