"""Merging small parts, off the query path: the compactor runs `merge_parts` after each
compaction (see the constants below for the levels, the closed days and the grace)."""

from __future__ import annotations

import calendar
import os
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..cursor import segment_span
from ..durable import fsync_dir
from ..lock import TablesLock
from .idfilter import Builder, put
from .intern import follow_merge, forget
from .manifest import (
    KINDS,
    MANIFEST,
    CompactError,
    listed,
    locked_manifest,
    part_path,
    tables_dir,
    write_manifest,
)
from .parts import (
    is_uploads,
    level,
    new_part,
    new_parts_streamed,
    part_no,
    read_part,
    schemas,
    unlink_parts,
    verify_part,
)
from .rollup import ROLLUP_KINDS, aggregate
from .timeroll import GRIDS
from .vitals import LEFT_OUT_MARK

GRIDDED = ("rollup_time", "rollup_timeloads")  # rollups whose keys hold a grid

# A collector compacts every few seconds and each run writes a few small parts. Parts of one
# group (a table, release and UTC day; a release's frames or stacks) are merged the way
# Grafana Pyroscope's compaction levels do it: once FANOUT parts of one level accumulate,
# they become one part of the next level, so a group holds at most (FANOUT - 1) parts per
# level, and levels grow with the log of the runs. A day that is over (DAY_CLOSED_S past
# its end: receivedAt is the collector's clock, so no upload joins it later) is merged into
# one part. A merge writes the new part, commits the manifest that lists it instead of the
# old ones, and only then removes the old files, after GRACE_S (a query that read the
# manifest before keeps reading them meanwhile): a reader sees either the old parts or the
# merged one, never both and never neither, whenever the merging process dies.
FANOUT = 8
DAY_CLOSED_S = 3600.0
GRACE_S = 900.0
# No merged part over this many rows, nor this many bytes of column data (encoded, as its
# parts' footers say; an uploads row holds the upload's meta, up to 64 KiB by
# `Limits.max_meta`, plus a timeline): a query reads a part as a unit. A busier group keeps
# parts of about this size, bounded by its data.
MERGE_MAX_ROWS = 4_000_000
MERGE_MAX_BYTES = 256 << 20
# A merge streams (`_merge_group`): it holds at most about this much of its rows at once,
# the merged part's row groups.
MERGE_GROUP_BYTES = 16 << 20
MERGE_GROUP_ROWS = 1 << 20

# Called with a stage name ("written": merged parts written, manifest not committed yet;
# "committed": manifest committed, old files still there; "deleted": old files removed,
# their `obsolete` entries still listed), for tests that kill the process there.
_merge_hook: Any = None


@dataclass
class MergeStats:
    merged: int = 0  # parts merged into others
    written: int = 0  # merged parts written
    bytes: int = 0  # bytes of the merged parts written
    deleted: int = 0  # obsolete files removed (their grace over)



def _raw_bytes(tdir: Path, entry: dict) -> int:
    """Bytes of column data of a part, uncompressed (its footer's row groups; one small
    read, only for parts about to be merged); cached, parts being immutable."""
    import pyarrow.parquet as pq

    key = str(tdir / entry["path"])
    n = _raw_sizes.get(key)
    if n is None:
        md = pq.read_metadata(verify_part(tdir, entry))
        n = sum(md.row_group(i).total_byte_size for i in range(md.num_row_groups))
        if len(_raw_sizes) >= _RAW_SIZES_MAX:
            _raw_sizes.clear()
        _raw_sizes[key] = n
    return n


_raw_sizes: dict[str, int] = {}
_RAW_SIZES_MAX = 200_000


def _pick_run(entries: list, day: str | None, now: float, fanout: int,
              raw: Any = None, landing: Any = None) -> list[int] | None:
    """Indices (in `entries`, one group's parts) of parts to merge into one, or None.
    `raw`: a part entry's bytes of column data (else only rows are capped). `landing`:
    whether parts are still landing in the group (see merge_parts); a closed day is then
    merged by levels only, not yet into one part."""
    ok = [i for i, e in enumerate(entries) if isinstance(e, dict) and "crc32" in e]

    def small(idx: list[int]) -> bool:
        if sum(entries[i]["rows"] for i in idx) > MERGE_MAX_ROWS:
            return False
        return raw is None or sum(raw(entries[i]) for i in idx) <= MERGE_MAX_BYTES

    if day is not None and len(ok) > 1 and len(ok) == len(entries):
        end = calendar.timegm(time.strptime(day, "%Y-%m-%d")) + 86400
        if now >= end + DAY_CLOSED_S and not (landing and landing(entries)) and small(ok):
            return ok  # the day is over: one part
    by_level: dict[int, list[int]] = {}
    for i in ok:
        by_level.setdefault(level(entries[i]), []).append(i)
    for lvl in sorted(by_level):
        idx = by_level[lvl]
        # Contiguous in list order: a release's frame and stack ids must stay in order
        # from part to part (levels never rise along a list, so they are).
        if len(idx) >= fanout and idx == list(range(idx[0], idx[0] + len(idx))):
            while len(idx) > 1 and not small(idx):  # the first ones, up to the cap
                idx = idx[:-1]
            if len(idx) > 1:
                return idx
    return None


def _merge_group(tdir: Path, kind: str, entries: list, part: int) -> dict:
    """Write the rows of `entries` (in order) as one part; returns its manifest entry."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sch = schemas()[kind]
    rel = str(Path(part_path(entries[0])).parent / f"part-{part:06d}.parquet")
    path = tdir / rel
    tmp = path.with_name(f".{path.name}.tmp")
    # the merged parts' upload keys (the Time view's rollups keep them: `parts._entry`)
    spans = [(e.get("minUk"), e.get("maxUk")) for e in entries]
    uks = None if any(a is None or b is None for a, b in spans) else (
        min(a for a, _ in spans), max(b for _, b in spans))
    if kind in GRIDDED:
        # Summed a grid at a time (a key holds its grid: no key is in two), each grid a
        # row group: the parts of batches at the compactor's cap hold millions of rows
        # each (4 M at 3 M samples), which held at once with their sums' hash table were
        # over a GiB for a merge of 8 (issue 34)
        src = [verify_part(tdir, e) for e in entries]
        pieces = ((kind, aggregate(kind, pa.concat_tables([
            read_part(pq, p, tdir, filters=[("grid", "=", g)]).select(sch.names).cast(sch)
            for p in src]))) for g in range(GRIDS))
        out = new_parts_streamed(tdir, {kind: rel}, pieces, {kind: sch},
                                 entries[0].get("day"),
                                 [x for e in entries for x in (e.get("minAt"), e.get("maxAt"))],
                                 uks)[kind]
        out["level"] = max(level(e) for e in entries) + 1
        return out
    if kind in ROLLUP_KINDS:
        # Rows summed by their keys: a day's part holds one row per key, however many
        # batches wrote it (rollups are small: held at once)
        t = aggregate(kind, pa.concat_tables([
            read_part(pq, verify_part(tdir, e), tdir).select(sch.names).cast(sch)
            for e in entries]))
        out = new_part(tdir, rel, {n: t[n] for n in sch.names}, sch, t.num_rows,
                       entries[0].get("day"),
                       [x for e in entries for x in (e.get("minAt"), e.get("maxAt"))], uks)
        out["level"] = max(level(e) for e in entries) + 1
        if all(e.get(LEFT_OUT_MARK) for e in entries):  # (every part's page loads counted)
            out[LEFT_OUT_MARK] = True
        return out
    # Streamed: the parts' row groups are read one at a time and written as row groups of
    # up to MERGE_GROUP_BYTES (in memory) or MERGE_GROUP_ROWS, so a merge holds about that
    # much, not all its parts (an uploads row holds the upload's meta).
    rows = 0
    buf: list = []
    held = 0

    def flush() -> None:
        nonlocal buf, held
        if buf:
            t = pa.concat_tables(buf)
            w.write_table(t, row_group_size=max(1, t.num_rows))
        buf, held = [], 0

    # an uploads part's filter of its ids (idfilter.py), made as its rows stream by
    ids = Builder(sum(int(e.get("rows") or 0) for e in entries)) if is_uploads(sch) else None
    with pq.ParquetWriter(tmp, sch, compression="zstd") as w:
        for e in entries:
            src = verify_part(tdir, e)
            try:
                f = pq.ParquetFile(src)
                for i in range(f.num_row_groups):
                    t = f.read_row_group(i).select(sch.names).cast(sch)
                    if held + t.nbytes > MERGE_GROUP_BYTES or (
                            buf and sum(b.num_rows for b in buf) + t.num_rows > MERGE_GROUP_ROWS):
                        flush()
                    buf.append(t)
                    held += t.nbytes
                    rows += t.num_rows
                    if ids is not None:
                        ids.add(t.column("id"))
            except (OSError, pa.ArrowException) as err:
                msg = (str(err).splitlines() or ["unreadable"])[0][:200]
                raise CompactError(
                    f"{src}: table part does not read ({msg}); remove {tdir} to rebuild the "
                    "tables from the raw uploads"
                ) from None
        flush()
        if ids is not None:
            put(w, ids.encode())
    crc, size = 0, 0
    with open(tmp, "rb") as fh:
        while chunk := fh.read(1 << 20):
            crc, size = zlib.crc32(chunk, crc), size + len(chunk)
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    mins = [e.get("minAt") for e in entries]
    maxs = [e.get("maxAt") for e in entries]
    ranged = all(m is not None for m in mins + maxs)
    out = {
        "path": rel,
        "day": entries[0].get("day"),
        "minAt": min(mins) if ranged else None,
        "maxAt": max(maxs) if ranged else None,
        "rows": rows,
        "bytes": size,
        "crc32": crc,
        "level": max(level(e) for e in entries) + 1,
    }
    if "rkey" in entries[0]:
        out["rkey"] = entries[0]["rkey"]
    if all(isinstance(e.get("segments"), list) for e in entries):  # uploads parts
        out["segments"] = segment_span([n for e in entries for n in e["segments"]])
    return out


_swept: set[str] = set()  # tables dirs swept by this process


def _sweep(tdir: Path, man: dict) -> None:
    """Remove what a killed compaction, merge or prune left (files no manifest lists):
    once per process, under the lock (nothing else writes tables/ then)."""
    if str(tdir) in _swept:
        return
    _swept.add(str(tdir))
    names = listed(man)
    for d, _, files in os.walk(tdir):
        for name in files:
            if not name.endswith((".parquet", ".parquet.tmp")):
                continue
            full = Path(d) / name
            if str(full.relative_to(tdir)) not in names:
                try:
                    full.unlink()
                except OSError:
                    pass


def merge_parts(store_path: str | os.PathLike, now: float | None = None,
                fanout: int = FANOUT, grace: float = GRACE_S, wait: bool = True,
                budget: int | None = None) -> MergeStats:
    """Merge small parts (see FANOUT above) and remove the files of parts merged more
    than `grace` seconds ago. The collector's compactor runs it after each compaction,
    `jsprof fleet` after its own. Results of every query are unchanged (the same rows, in
    part order).

    `wait=False`: do nothing if another process holds the compaction lock. `budget`: start
    no further merge once the parts merged in this call hold that many bytes of column
    data (a query that merges stays quick; the next call goes on where this one stopped).
    """
    tdir = tables_dir(store_path)
    stats = MergeStats()
    if not (tdir / MANIFEST).exists():
        return stats
    now = time.time() if now is None else now
    spent = 0
    with TablesLock(tdir, wait) as lock:
        if not lock.held:
            return stats
        man = locked_manifest(tdir, forget)
        _sweep(tdir, man)
        obsolete = man.setdefault("obsolete", [])
        part = man["nextPart"]
        gone: list[str] = []
        dirs: set[Path] = set()
        # Parts numbered from `seen` on were written after the last pass that looked (a
        # pass that deferred a closed day, or committed, says so in `mergeSeen`). A closed
        # day that got some is still being compacted (a backlog past the day's end): merged
        # into one part on each run, its whole day was rewritten every few seconds. It is
        # merged by levels meanwhile, and into one part once a run adds nothing to it.
        seen = man.get("mergeSeen", 0)
        deferred = False

        def landing(entries: list) -> bool:
            nonlocal deferred
            new = any(part_no(e) >= seen for e in entries)
            deferred = deferred or new
            return new

        def merge(kind: str, entries: list, day: str | None) -> list | None:
            nonlocal spent
            if budget is not None and spent >= budget:
                return None
            run = _pick_run(entries, day, now, fanout, lambda e: _raw_bytes(tdir, e), landing)
            if run is None:
                return None
            old = [entries[i] for i in run]
            spent += sum(_raw_bytes(tdir, e) for e in old)
            new = _merge_group(tdir, kind, old, part)
            dirs.add((tdir / new["path"]).parent)
            gone.extend(part_path(e) for e in old)
            stats.merged += len(old)
            stats.written += 1
            stats.bytes += new["bytes"]
            drop = set(run[1:])
            return [new if i == run[0] else e for i, e in enumerate(entries) if i not in drop]

        def merge_groups(kind: str, entries: list, key: Any) -> list:
            """`entries` with each group's (by `key`) run merged: a group's parts keep
            their slots in order, the ones merged away leave theirs."""
            groups: dict[Any, list[int]] = {}
            for i, e in enumerate(entries):
                k = key(e)
                if k is not False:
                    groups.setdefault(k, []).append(i)
            out: list = list(entries)
            for k, idx in groups.items():
                res = merge(kind, [entries[i] for i in idx], k[-1] if kind == "uploads" else k)
                if res is None:
                    continue
                for j, i in enumerate(idx):
                    out[i] = res[j] if j < len(res) else None
            return [e for e in out if e is not None]

        man["uploads"] = merge_groups(
            "uploads", man["uploads"],
            lambda e: (e["rkey"], e.get("day")) if isinstance(e, dict) and "rkey" in e else False,
        )
        merged_rel: dict[str, set[str]] = {}
        for rkey, entry in man["releases"].items():
            for kind in KINDS:
                if kind in ROLLUP_KINDS and not man.get("rollups"):
                    continue  # an older format's, which the next compaction rebuilds
                n = stats.written
                if kind in ("frames", "stacks"):
                    entry["parts"][kind] = merge(kind, entry["parts"][kind], None) or entry[
                        "parts"][kind]
                    if stats.written > n:
                        merged_rel.setdefault(rkey, set()).add(kind)
                else:
                    entry["parts"][kind] = merge_groups(
                        kind, entry["parts"][kind],
                        lambda e: e.get("day") if isinstance(e, dict) else False,
                    )
        due = [o for o in obsolete if now - o["at"] >= grace]
        if deferred and not gone:  # the next pass must know what this one saw
            man["mergeSeen"] = man["nextPart"]
            write_manifest(tdir, man)
        if not gone and not due:
            return stats
        if gone:
            for d in sorted(dirs, key=lambda d: -len(d.parts)):
                fsync_dir(d)
            man["nextPart"] = man["mergeSeen"] = part + 1
            obsolete.extend({"path": g, "at": now} for g in gone)
            if _merge_hook:
                _merge_hook("written")
            write_manifest(tdir, man)
            if _merge_hook:
                _merge_hook("committed")
            follow_merge(tdir, man, merged_rel)
        if due:
            stats.deleted += unlink_parts(tdir, due)
            if _merge_hook:
                _merge_hook("deleted")
            gone_now = {o["path"] for o in due}
            man["obsolete"] = [o for o in man["obsolete"] if o["path"] not in gone_now]
            write_manifest(tdir, man)
    return stats

