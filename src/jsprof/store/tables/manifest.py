"""The tables' manifest: what is committed (cursor, part files, per-release sizes).

`<store>/tables/_manifest.json` is replaced atomically (`write_manifest`: temporary file,
fsync, rename) after the parts it lists are fsync'd, so a reader that reads it once sees one
consistent snapshot. Layout of the tables: the package's docstring and docs/store.md.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from ...errors import JsprofError
from ..cursor import Cursor
from .rollup import ROLLUP_KINDS

TABLES = "tables"
MANIFEST = "_manifest.json"
# 2: uploads.lost_ms; 3: uploads.page_load; 4: stack-less samples inside long animation
# frames on their attributed stacks (analysis/busy.py), where 3 kept them (idle); 5: the
# samples table (each sample's time on its upload's clock: the merged Time view and
# `--during` read it instead of the raw uploads); 6: the rollups (tables/rollup.py: per
# release, day, route and env, what `fleet top` sums, so it reads no per-upload row); 7:
# rollup_frames also per function of two or more frames by the default identity rule; 8:
# rollup_moments and rollup_cells.a_sq (what `fleet diff`'s intervals need); 9:
# rollup_vitals (what `fleet vitals` counts: tables/vitals.py); 10: rollup_perload and
# rollup_examples (what `fleet regressions` tests: tables/perload.py); 11: rollup_time,
# rollup_timeloads and rollup_timekeys (what the merged Time view sums: tables/timeroll.py);
# 12: rollup_moments, rollup_perload and rollup_examples per function by place (name,
# script, line, column), where 8-11 had one row per name and script: a minified script's
# anonymous or same-named functions, which `fleet diff` and `regressions` key by place,
# each their own (issue 32)
FORMAT_VERSION = 12
# Formats read as they are and upgraded by the next compaction, not rebuilt: 4 has every
# table of 5 but `samples`, which only its uploads from `samplesFromUk` on have (a rebuild
# would need raw segments that raw retention, `--keep-raw`, may have deleted).
# 5 has every table of 6 but the rollups, which the next compaction builds from its
# per-upload tables (`tables/rebuild.py`); until then queries read the per-upload tables.
# 6, 7, 8, 9 and 10 have them without the groups, the moments, the vitals, the per-load
# sums or the Time view's, and 11 with the moments and per-load sums by name and script:
# rebuilt so too (the per-upload tables are the same). Their rollups are never read as
# they are (a key by place there would be its name's sum): queries read the per-upload
# tables until then.
UPGRADES = (4, 5, 6, 7, 8, 9, 10, 11)

KINDS = ("frames", "stacks", "weights", "upload_frames", "samples", *ROLLUP_KINDS)
ROW_KINDS = ("weights", "upload_frames", "samples")  # per-upload rows, parted by day


class CompactError(JsprofError):
    """The tables cannot be read or written as they are (one line: what, where, what to do)."""


def tables_dir(store_path: str | os.PathLike) -> Path:
    return Path(store_path) / TABLES


def _empty_manifest() -> dict:
    return {
        "formatVersion": FORMAT_VERSION,
        "cursor": None,
        "hasCursor": False,
        "nextUk": 0,
        "nextPart": 1,
        "uploads": [],
        "releases": {},
        "skipped": [],
        "samplesFromUk": 0,  # uploads from this key on have rows in the samples table
        "rollups": True,  # every upload compacted is in the rollup tables
    }


def _upgraded(doc: dict) -> dict:
    """A manifest of a format in UPGRADES as this format reads it (in memory; the next
    compaction commits it): no samples parts, and no sample rows for any upload so far
    (format 4); no rollups (4 and 5) or rollups without the identity groups (6), the
    moments (7), the vitals (8), the per-load sums (9), the Time view's (10) or the
    moments and per-load sums by place (11), which that compaction builds
    (`rebuild.py`)."""
    was = doc.get("formatVersion")
    doc = dict(doc, formatVersion=FORMAT_VERSION)
    doc.setdefault("samplesFromUk", doc.get("nextUk", 0))
    if "rollups" not in doc or was in (6, 7, 8, 9, 10, 11):
        doc["rollups"] = not doc.get("nextUk")
    doc["releases"] = {k: dict(v, parts={**{n: [] for n in KINDS}, **v["parts"]})
                       for k, v in doc["releases"].items()}
    return doc


def read_manifest(store_path: str | os.PathLike) -> dict:
    """The committed state; an empty one for a store never compacted."""
    p = tables_dir(store_path) / MANIFEST
    try:
        doc = orjson.loads(p.read_bytes())
    except FileNotFoundError:
        return _empty_manifest()
    except (OSError, orjson.JSONDecodeError) as e:
        raise CompactError(
            f"{p}: unreadable compaction manifest ({e}); remove {p.parent} "
            "to rebuild the tables from the raw uploads"
        ) from None
    if doc.get("formatVersion") in UPGRADES:
        return _upgraded(doc)
    if doc.get("formatVersion") != FORMAT_VERSION:
        if _older(doc):
            raise CompactError(
                f"{p}: tables of format {doc.get('formatVersion')!r} (an older jsprof's), "
                f"this jsprof reads {FORMAT_VERSION}; the next compaction rebuilds them from "
                f"the raw uploads (the collector's compactor, or `jsprof serve compact --store "
                f"{Path(store_path)}`)"
            )
        raise CompactError(
            f"{p}: tables of format {doc.get('formatVersion')!r}, this jsprof "
            f"reads {FORMAT_VERSION}; remove {p.parent} to rebuild them"
        )
    return doc


def _older(doc: object) -> bool:
    """Tables an older jsprof wrote (a format this one replaced, not a newer one's)."""
    v = doc.get("formatVersion") if isinstance(doc, dict) else None
    return type(v) is int and 1 <= v < FORMAT_VERSION and v not in UPGRADES


def locked_manifest(tdir: Path, forget: Callable[[Path], None] | None = None) -> dict:
    """`read_manifest` for a process holding the compaction lock. Tables an older jsprof
    wrote are started anew: the raw uploads are the record (a query leaves out an upload
    pruned from them), so the compaction that follows rebuilds every table under this
    jsprof's reading. The old parts are listed `obsolete` (deleted after the grace, by a
    later merge or prune, as merged parts are: a reader still on the old manifest keeps its
    files), and new parts are numbered after them, never over them. `forget(tdir)`: called
    then, to drop what this process keeps of the old tables (`intern.forget`)."""
    p = tdir / MANIFEST
    try:
        doc = orjson.loads(p.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        doc = None
    if not _older(doc):
        return read_manifest(tdir.parent)
    assert isinstance(doc, dict)
    man = _empty_manifest()
    try:
        old = sorted(listed(doc))
        part = max(1, int(doc.get("nextPart") or 1))
    except (KeyError, TypeError, ValueError, AttributeError):
        old, part = [], 1  # unlisted files: the sweep removes them, new ones overwrite
    now = time.time()
    man["obsolete"] = [{"path": x, "at": now} for x in old]
    man["nextPart"] = man["mergeSeen"] = part
    man["rebuiltFrom"] = doc["formatVersion"]
    if forget is not None:
        forget(tdir)
    write_manifest(tdir, man)
    return man


def write_manifest(tdir: Path, man: dict) -> None:
    """Commit `man`: written to a temporary name, fsync'd, renamed over the manifest."""
    _fsync_write(tdir / MANIFEST, orjson.dumps(man))


def _fsync_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def part_path(entry: str | dict) -> str:
    """The relative path of a manifest part entry (a plain string in older manifests)."""
    return entry if isinstance(entry, str) else entry["path"]


def with_tail(man: dict, next_uk: int, upload_entries: list[dict]) -> dict:
    """A copy of `man` that a query's tail extends: its own releases dict, the tail's
    upload parts after the committed ones, `nextUk` past the tail's uploads."""
    new = dict(man)
    new["releases"] = dict(man["releases"])
    new["nextUk"] = next_uk
    new["uploads"] = [*man["uploads"], *upload_entries]
    return new


def tail_release(man: dict, rkey: str, app: str, release: str, frames: int, stacks: int
                 ) -> tuple[dict, int, int]:
    """Release `rkey`'s entry with a tail's `frames` and `stacks` after the committed
    ones, and the committed counts (fb, sb) the tail's ids continue from. Frame ids below
    `committedFrames` are the committed ones; no upload holds frames of both
    (`fleet.release.merges_in_an_upload`). The committed parts are copied: the tail's are
    appended by the caller."""
    old = man["releases"].get(rkey)
    fb, sb = (old["frames"], old["stacks"]) if old else (0, 0)
    entry = {
        "app": app, "release": release,
        "frames": fb + frames, "stacks": sb + stacks,
        "committedFrames": fb,
        "parts": {k: list(old["parts"][k]) if old else [] for k in KINDS},
    }
    return entry, fb, sb


def part_paths(man: dict) -> set[str]:
    """The parts the manifest lists (uploads' and every release's, not the obsolete)."""
    out = {part_path(e) for e in man.get("uploads", [])}
    for r in man.get("releases", {}).values():
        for entries in r["parts"].values():
            out.update(part_path(e) for e in entries)
    return out


def listed(man: dict) -> set[str]:
    """Every file the manifest names: its parts and the obsolete ones not yet deleted."""
    return part_paths(man) | {o["path"] for o in man.get("obsolete", [])}


def cursor_in(man: dict) -> Any:
    """The store's cursor from the manifest (`Cursor.dumps` text, or a plain JSON value)."""
    if not man["hasCursor"]:
        return None
    if man.get("cursorKind") == "Cursor":
        return Cursor.loads(man["cursor"])
    return man["cursor"]


def cursor_out(man: dict, cursor: Any) -> None:
    """Record `cursor` (where the compacted uploads end) in `man`."""
    if hasattr(cursor, "dumps"):
        man["cursor"], man["cursorKind"] = cursor.dumps(), "Cursor"
    else:
        man["cursor"], man["cursorKind"] = cursor, "json"
    man["hasCursor"] = True
