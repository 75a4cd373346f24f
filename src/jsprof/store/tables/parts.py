"""Part files: the tables' Parquet schemas, writing a part (temporary name, fsync, rename),
its manifest entry (receivedAt range, rows, size, CRC-32), and finding and checking the
parts a query reads. A part is immutable once a manifest lists it.
"""

from __future__ import annotations

import math
import os
import re
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .manifest import CompactError, part_path


def read_part(pq: Any, path: str, tdir: Path, columns: list[str] | None = None,
              filters: list | None = None) -> Any:
    import pyarrow as pa

    try:
        return pq.read_table(path, columns=columns, filters=filters)
    except (OSError, pa.ArrowException) as e:
        msg = (str(e).splitlines() or ["unreadable"])[0][:200]
        raise CompactError(
            f"{path}: table part does not read ({msg}); remove {tdir} to rebuild the "
            "tables from the raw uploads"
        ) from None


def is_uploads(schema: Any) -> bool:
    """Whether `schema` is the uploads table's (whose parts keep a filter of their ids)."""
    return schema.names == schemas()["uploads"].names


def _write_parquet(path: Path, columns: dict[str, Any], schema: Any) -> tuple[int, int]:
    """Write a part (temporary name, fsync, rename); returns its (size, CRC-32)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.table(columns, schema=schema)
    tmp = path.with_name(f".{path.name}.tmp")
    # The samples table's times compress a third smaller split by byte (a float column
    # whose neighbours differ in their low bytes); its upload keys and markers are runs.
    extra = ({"use_byte_stream_split": ["t"], "use_dictionary": ["uk", "marker"]}
             if "t" in columns else {})
    with pq.ParquetWriter(tmp, table.schema, compression="zstd", **extra) as w:
        w.write_table(table)
        if is_uploads(schema):
            from .idfilter import encode, put

            put(w, encode(table["id"]))
    return _settle(tmp, path)


def _settle(tmp: Path, path: Path) -> tuple[int, int]:
    """A written temporary part fsynced and renamed to `path`; its (size, CRC-32)."""
    with open(tmp, "rb") as f:
        data = f.read()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return len(data), zlib.crc32(data)


# ---- part entries in the manifest ------------------------------------------------------------


def day_of(at: float | None) -> str | None:
    """The UTC day (YYYY-MM-DD) of an epoch-ms time, None when unknown."""
    if at is None or not math.isfinite(at):
        return None
    return time.strftime("%Y-%m-%d", time.gmtime(at / 1000.0))


def _entry(rel: str, rows: int, day: str | None, times: list[float | None] | None,
           uks: tuple[int, int] | None = None) -> dict:
    known = [t for t in times or [] if t is not None and math.isfinite(t)]
    # `uks`: the least and largest upload key of the part's uploads (the Time view's
    # rollups): a query pinned below later uploads reads the parts wholly below its pin
    # (`rollups.plan`); a part without them is read only when its day holds none.
    span = {} if uks is None else {"minUk": int(uks[0]), "maxUk": int(uks[1])}
    return {**span,
        "path": rel,
        "day": day,
        # A part with any upload of unknown time has no range: it is never skipped.
        "minAt": min(known) if known and len(known) == len(times or []) else None,
        "maxAt": max(known) if known and len(known) == len(times or []) else None,
        "rows": rows,
    }


def new_part(
    tdir: Path | None, rel: str, columns: dict[str, Any], schema: Any, rows: int,
    day: str | None = None, times: list[float | None] | None = None,
    uks: tuple[int, int] | None = None,
) -> dict:
    entry = _entry(rel, rows, day, times, uks)
    if tdir is None:
        # A query's tail: the part as a table in memory, never written (`read_tail`)
        import pyarrow as pa

        entry["table"] = pa.table(columns, schema=schema)
        return entry
    entry["bytes"], entry["crc32"] = _write_parquet(tdir / rel, columns, schema)
    return entry


def new_parts_streamed(
    tdir: Path | None, rels: dict[str, str], pieces: Iterator[tuple[str, Any]],
    schemas: dict[str, Any], day: str | None = None, times: list[float | None] | None = None,
    uks: tuple[int, int] | None = None,
) -> dict[str, dict]:
    """One part per kind of `rels` (kind -> its path) from `pieces`, (kind, table) in
    any interleaving, each written as a row group when it comes, so that only one piece
    is held at a time (the Time view's rollups: a grid per piece, tables/timeroll.py);
    kind -> its manifest entry. `tdir` None: the parts as tables in memory (a tail)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = dict.fromkeys(rels, 0)
    if tdir is None:
        held: dict[str, list] = {k: [] for k in rels}
        for kind, t in pieces:
            held[kind].append(t)
            rows[kind] += t.num_rows
        out = {k: _entry(rel, rows[k], day, times, uks) for k, rel in rels.items()}
        for k, e in out.items():
            e["table"] = (pa.concat_tables(held[k]) if held[k] else
                          schemas[k].empty_table())
        return out
    paths = {k: tdir / rel for k, rel in rels.items()}
    tmps = {k: p.with_name(f".{p.name}.tmp") for k, p in paths.items()}
    writers: dict[str, Any] = {}
    try:
        for k, p in paths.items():
            p.parent.mkdir(parents=True, exist_ok=True)
            writers[k] = pq.ParquetWriter(tmps[k], schemas[k], compression="zstd")
        for kind, t in pieces:
            if t.num_rows:
                writers[kind].write_table(t)
            rows[kind] += t.num_rows
            del t  # not held while the next piece is made
        for w in writers.values():
            w.close()
    except BaseException:
        for k, w in writers.items():
            try:
                w.close()
            finally:
                tmps[k].unlink(missing_ok=True)
        raise
    out = {}
    for k, rel in rels.items():
        out[k] = _entry(rel, rows[k], day, times, uks)
        out[k]["bytes"], out[k]["crc32"] = _settle(tmps[k], paths[k])
    return out


def _overlaps(entry: str | dict, since: float | None, until: float | None) -> bool:
    if isinstance(entry, str) or entry.get("minAt") is None:
        return True
    if since is not None and entry["maxAt"] < since:
        return False
    return not (until is not None and entry["minAt"] >= until)


# Parts checked by this process: path -> (inode, size, mtime_ns, crc32). Parts are never
# modified once listed, so one check per process is enough (a long-lived collector does
# not re-read gigabytes of tables per dashboard query); a file replaced or touched since
# is checked again. A store lists a few hundred parts at a time, but a collector's
# compactor makes a part every few seconds and merges them away: the oldest entry goes
# past the bound (at 200,000 entries, ~300 bytes each, a worker grew to ~60 MB of them
# over days; issue 34), and one still listed is checked once more when next read.
_verified: dict[str, tuple[int, int, int, int]] = {}
_VERIFIED_MAX = 10_000


CRC_CHUNK = 1 << 20


def _crc32(path: Path) -> tuple[int, int]:
    """A file's size and CRC-32, read a chunk at a time: a collector checks each new part
    once, and a merged part is up to hundreds of MB, which read whole was a transient of
    that size in a query worker (issue 34)."""
    crc = size = 0
    buf = bytearray(CRC_CHUNK)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buf):
            crc = zlib.crc32(view[:n], crc)
            size += n
    return size, crc


def verify_part(tdir: Path, entry: str | dict) -> str:
    """The part's absolute path, after checking its size and CRC-32 against the manifest.

    A damaged or missing part is a one-line CompactError naming it, never a reader's
    traceback or, worse, rows with wrong values.
    """
    path = tdir / part_path(entry)
    if isinstance(entry, dict) and "crc32" in entry:
        cant = (
            f"{path}: table part listed in the manifest cannot be read ({{}}); "
            f"remove {tdir} to rebuild the tables from the raw uploads"
        )
        try:
            st = path.stat()
        except OSError as e:
            raise CompactError(cant.format(e.strerror)) from None
        key = str(path)
        seen = (st.st_ino, st.st_size, st.st_mtime_ns, entry["crc32"])
        if _verified.get(key) == seen:
            return key
        try:
            size, crc = _crc32(path)
        except OSError as e:
            raise CompactError(cant.format(e.strerror)) from None
        if size != entry["bytes"] or crc != entry["crc32"]:
            raise CompactError(
                f"{path}: table part is damaged (its checksum does not match the manifest); "
                f"remove {tdir} to rebuild the tables from the raw uploads"
            )
        _verified.pop(key, None)
        while len(_verified) >= _VERIFIED_MAX:
            del _verified[next(iter(_verified))]
        _verified[key] = seen
    return str(path)


def part_files(
    tdir: Path, manifest: dict, kind: str, rkeys: list[str] | None = None,
    since: float | None = None, until: float | None = None, verify: bool = True,
) -> list[str]:
    """Absolute paths of the parts of `kind` a query over [since, until) must read, checked
    (a query's tail parts, held in memory, as their pyarrow Tables: `read_tail`).

    `rkeys`: only these releases (None: all). Parts whose receivedAt range lies outside
    the time range are skipped without being opened.
    """
    if kind == "uploads":
        entries = [
            e for e in manifest["uploads"]
            if rkeys is None or isinstance(e, str) or e.get("rkey") in (None, *rkeys)
        ]
    else:
        rel = manifest["releases"]
        keys = sorted(rel) if rkeys is None else rkeys
        entries = [e for k in keys if k in rel for e in rel[k]["parts"][kind]]
    keep = [e for e in entries if _overlaps(e, since, until)]
    for e in keep:
        if isinstance(e, dict) and "build" in e:  # a tail part made when first read
            e["table"] = e.pop("build")()
    return [e["table"] if isinstance(e, dict) and "table" in e
            else verify_part(tdir, e) if verify else str(tdir / part_path(e)) for e in keep]


def schemas() -> dict[str, Any]:
    import pyarrow as pa

    from .rollup import schemas as rollup_schemas

    return {
        "uploads": pa.schema(
            [
                ("uk", pa.int64()),
                ("id", pa.string()),
                ("app", pa.string()),
                ("release", pa.string()),
                ("rkey", pa.string()),
                ("route", pa.string()),
                ("env", pa.string()),
                ("received_at", pa.float64()),
                ("user_agent", pa.string()),
                ("sample_interval", pa.float64()),
                ("meta", pa.string()),
                ("samples", pa.int64()),
                ("total_ms", pa.float64()),
                ("lost_ms", pa.float64()),
                # the client's page-load id (meta `pageLoad`): chunks of one page load
                ("page_load", pa.string()),
            ]
        ),
        "frames": pa.schema(
            [
                ("frame_id", pa.int64()),
                ("name", pa.string()),
                ("resource", pa.string()),
                ("line", pa.int64()),
                ("column", pa.int64()),
            ]
        ),
        "stacks": pa.schema(
            [
                ("stack_id", pa.int64()),
                ("parent_id", pa.int64()),
                ("frame_id", pa.int64()),
            ]
        ),
        "weights": pa.schema(
            [
                ("uk", pa.int64()),
                ("stack_id", pa.int64()),
                ("marker", pa.int8()),
                ("samples", pa.int64()),
                ("weight_ns", pa.int64()),
            ]
        ),
        "upload_frames": pa.schema(
            [
                ("uk", pa.int64()),
                ("frame_id", pa.int64()),
                ("marker", pa.int8()),
                ("self_samples", pa.int64()),
                ("self_ns", pa.int64()),
            ]
        ),
        "samples": pa.schema(
            [
                ("uk", pa.int64()),
                ("t", pa.float64()),  # ms on the upload's clock (since its page's start)
                ("stack_id", pa.int64()),
                ("marker", pa.int8()),
                ("weight_ns", pa.int64()),
            ]
        ),
        **rollup_schemas(),
    }


def level(e: str | dict) -> int:
    """A part's merge level (0: written by a compaction run; `merge.py`)."""
    return e.get("level", 0) if isinstance(e, dict) else 0


def part_no(entry: str | dict) -> int:
    """The number of the run that wrote a part (`part-NNNNNN[-k].parquet`)."""
    m = _PART_NO.match(Path(part_path(entry)).name)
    return int(m.group(1)) if m else -1


# At least six digits: a collector past a million runs (~2 months of 5 s runs) has seven.
_PART_NO = re.compile(r"part-(\d+)")


def unlink_parts(tdir: Path, entries: list[dict]) -> int:
    """Remove the files of these `obsolete` entries (gone already is fine)."""
    for o in entries:
        try:
            (tdir / o["path"]).unlink()
        except FileNotFoundError:
            pass
    return len(entries)

