"""A consistent copy of a live store (`jsprof serve backup --store PATH --to DIR`).

Collectors keep taking uploads while it runs; the compactor, merges, claim retirement, raw
removal and prunes wait (it holds the tables' lock, which all of them take), so the tables,
the claims and the claim index are copied as of one instant. The order keeps every copied
record findable:

1. the names of the segments and of the open markers, then the markers: a segment still
   being written (or sealed during the copy) is marked open in the copy, and recovery
   finishes it when the copy is opened (cuts a torn tail, writes its records' claims);
2. `tables/`, then `claims/` (claim files, then the index runs): no claim is retired
   meanwhile, so an upload acknowledged before the backup is in one or the other;
3. the segments named in 1 (segments created since hold uploads newer than the backup);
4. the store's small files (retention marks, raw-removed.json, the compactor's report,
   the generated read token).

Each file is fsync'd, and the copy is made in `DIR.partial` and renamed to `DIR` at the end:
a `DIR` is always a whole backup. Restore: use the copy as a store (`jsprof serve --store
DIR`, or copy it where the store was, with no collector running there); `jsprof serve
check --store DIR` verifies it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .durable import fsync_dir
from .errors import StoreError
from .lock import LOCK, TablesLock

# Files of the store's root that a backup keeps (the rest are folders, or temporary).
ROOT_FILES = ("pruned.json", "raw-removed.json", "compactor.json", "read-token")
# Locks and leases are per running store, not data.
SKIP = {LOCK, "_compactor.lock"}


@dataclass
class BackupStats:
    segments: int = 0
    open_segments: int = 0
    files: int = 0
    bytes: int = 0


def backup(store_path: str | os.PathLike, dest: str | os.PathLike) -> BackupStats:
    """Copy the store at `store_path` to the new folder `dest` (see the module doc)."""
    src = Path(store_path)
    out = Path(dest)
    if not (src / "segments").is_dir():
        raise StoreError(f"{src}: not a jsprof store (no segments/ folder)")
    if out.exists():
        raise StoreError(f"{out}: exists; back up into a new folder")
    if out.resolve().is_relative_to(src.resolve()):
        # The copy would copy itself (claims/x: claims/x.partial/claims/x.partial/...
        # until the path is too long), and leave its folders in the store.
        raise StoreError(f"{out}: inside the store {src}; back up into a folder outside it")
    tmp = out.with_name(out.name + ".partial")
    if tmp.exists():
        shutil.rmtree(tmp)  # an earlier backup that did not finish
    tmp.mkdir(parents=True)
    # it holds every trace and a copy of the read token: the owner's alone, as the store
    os.chmod(tmp, 0o700)
    try:
        stats = _backup(src, tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)  # no half copy left beside the backups
        raise
    os.rename(tmp, out)
    fsync_dir(out.parent)
    return stats


def _backup(src: Path, tmp: Path) -> BackupStats:
    stats = BackupStats()
    with TablesLock(src / "tables"):
        segments = sorted(n for n in _listdir(src / "segments") if n.endswith(".seg"))
        marked = sorted(_listdir(src / "open"))
        (tmp / "open").mkdir()
        for name in marked:
            _copy(src / "open" / name, tmp / "open" / name, stats)
        stats.open_segments = len(marked)
        _copy_tree(src / "tables", tmp / "tables", stats)
        index = src / "claims" / "index"
        # Not the claims of records in segments made since step 1 (not in the copy).
        _copy_tree(src / "claims", tmp / "claims", stats, skip_dir=index,
                   keep=lambda p: _names_copied(p, set(segments)))
        _copy_tree(index, tmp / "claims" / "index", stats)
        (tmp / "segments").mkdir()
        for name in segments:
            if _copy(src / "segments" / name, tmp / "segments" / name, stats):
                stats.segments += 1
        for name in ROOT_FILES:
            _copy(src / name, tmp / name, stats)
    for d, _, _ in os.walk(tmp):
        fsync_dir(Path(d))
    return stats


def _copy(a: Path, b: Path, stats: BackupStats) -> bool:
    """Copy one file (mode kept), fsync'd; False when it is gone (removed meanwhile)."""
    try:
        with open(a, "rb") as fa, open(b, "wb") as fb:
            shutil.copyfileobj(fa, fb, 1 << 20)
            fb.flush()
            os.fsync(fb.fileno())
            stats.bytes += fb.tell()
        shutil.copymode(a, b)
    except FileNotFoundError:
        try:
            b.unlink()
        except FileNotFoundError:
            pass
        return False
    stats.files += 1
    return True


def _copy_tree(a: Path, b: Path, stats: BackupStats, skip_dir: Path | None = None,
               keep: Callable[[Path], bool] | None = None) -> None:
    for d, dirs, files in os.walk(a):
        here = Path(d)
        if skip_dir is not None and here == skip_dir:
            dirs[:] = []
            continue
        target = b / here.relative_to(a)
        target.mkdir(parents=True, exist_ok=True)
        for f in files:
            if f in SKIP or f.endswith(".tmp") or (keep is not None and not keep(here / f)):
                continue
            _copy(here / f, target / f, stats)


def _names_copied(claim: Path, segments: set[str]) -> bool:
    """Whether a claim names no segment, or one the backup copies."""
    try:
        with open(claim, "rb") as f:
            parts = f.read(256).split()
    except FileNotFoundError:
        return False
    return len(parts) != 3 or parts[1].decode("ascii", "replace") in segments


def _listdir(path: Path) -> list[str]:
    try:
        return os.listdir(path)
    except FileNotFoundError:
        return []

