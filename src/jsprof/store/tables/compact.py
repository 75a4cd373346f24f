"""The compactor's run: every upload the raw store acknowledged since the last run ->
interned rows (`intern.py`) -> parts (`parts.py`) -> one committed manifest per batch.

Runs only in the collector's compactor process (`store/background.py`) and in
`jsprof serve compact`, under the tables' lock; a query never compacts (it reads the
uncompacted tail in memory: `tail.py`). A run killed at any instant leaves only files no
manifest lists, which the next run overwrites or a merge's sweep removes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

from ... import script_lines
from ...errors import JsprofError
from ..durable import fsync_dir
from ..lock import TablesLock
from .intern import (
    Release,
    cached_release,
    forget,
    keep_releases,
    number_of,
    release_key,
    text_of,
    upload_row,
    write_release_parts,
    write_upload_parts,
)
from .manifest import (
    KINDS,
    cursor_in,
    cursor_out,
    locked_manifest,
    part_path,
    tables_dir,
    write_manifest,
)
from .perload import prior_self
from .rebuild import build_rollups
from .vitals import prior_timelines

BATCH = 2000  # uploads per committed batch: bounds memory and lost work on a crash
# ... and samples: a batch's memory follows its samples (its rows and tables, ~40 bytes a
# sample, twice that while a part is built), and an upload may hold 6,000 or 200,000
BATCH_SAMPLES = 3_000_000


class UploadSource(Protocol):
    """What the compactor needs of `jsprof.store.Store`."""

    @property
    def path(self) -> Any: ...

    def iter_uploads(
        self, after: Any = None, on_damage: Any = None
    ) -> Iterator[tuple[Any, str, dict, bytes]]: ...



@dataclass
class CompactStats:
    uploads: int = 0
    samples: int = 0
    skipped: int = 0
    batches: int = 0
    damaged: int = 0  # damaged records met in the raw store (listed in manifest["damaged"])



def compact(store: UploadSource, batch: int = BATCH, progress: Any = None,
            batch_samples: int = BATCH_SAMPLES) -> CompactStats:
    """Append every upload the store acknowledged since the last run to the tables, in
    batches of at most `batch` uploads, each committed once its samples reach
    `batch_samples`.

    Idempotent and safe to run while collectors write and while another compactor runs
    (the second waits on the lock, then finds only what is left).
    """
    from ...formats import read_any

    tdir = tables_dir(store.path)
    stats = CompactStats()
    with TablesLock(tdir):
        man = locked_manifest(tdir, forget)
        build_rollups(tdir, man)
        releases: dict[str, Release] = {}
        pending: list[dict] = []
        cursor = cursor_in(man)
        last_cursor: Any = None
        have_new = False

        in_batch = 0  # samples of `pending`

        def commit() -> None:
            nonlocal pending, have_new, in_batch
            if not have_new:
                return
            part = man["nextPart"]
            n_uploads = len(man["uploads"])
            written: list[dict] = []
            for rkey, rel in releases.items():
                entry = man["releases"].setdefault(
                    rkey,
                    {
                        "app": rel.app,
                        "release": rel.release,
                        "frames": 0,
                        "stacks": 0,
                        "parts": {k: [] for k in KINDS},
                    },
                )
                # rollup_vitals: a page load's chunks committed before (`vitals.py`)
                prior = partial(prior_timelines, tdir, man, rkey)
                # rollup_perload: their self time per function (`perload.py`)
                pself = partial(prior_self, tdir, man, rkey)
                for kind, entries in write_release_parts(tdir, rkey, rel, part, prior=prior,
                                                         prior_self=pself).items():
                    entry["parts"][kind].extend(entries)
                    written.extend(entries)
                entry["frames"] = len(rel.frame_ids)
                entry["stacks"] = len(rel.stack_parent)
                rel.n_frames_committed = len(rel.frame_ids)
                rel.n_stacks_committed = len(rel.stack_parent)
                rel.new_frames.clear()
                rel.weights.clear()
                rel.upload_frames.clear()
                rel.samples.clear()
                rel.cells.clear()
            man["uploads"].extend(write_upload_parts(tdir, pending, part))
            dirs = {
                d
                for e in [*man["uploads"][n_uploads:], *written]
                for d in (tdir / part_path(e)).parents
                if d != tdir and tdir in d.parents
            }
            for d in sorted(dirs, key=lambda d: -len(d.parts)):  # new folders' entries too
                fsync_dir(d)
            man["nextPart"] = part + 1
            if last_cursor is not None:  # a run that met only damage keeps its cursor
                cursor_out(man, last_cursor)
            write_manifest(tdir, man)
            stats.batches += 1
            pending = []
            in_batch = 0
            have_new = False

        known = {(d["segment"], d["offset"]) for d in man.setdefault("damaged", [])}

        def damaged(f: Any) -> None:
            # Counted once each, and committed with the next batch: a reader of the
            # manifest (fleet, the dashboard) can say how many uploads it cannot count.
            nonlocal have_new
            if (f.segment, f.offset) in known:
                return
            known.add((f.segment, f.offset))
            man["damaged"].append(
                {"segment": f.segment, "offset": f.offset, "length": f.length, "what": f.what}
            )
            stats.damaged += 1
            have_new = True

        # each release's script line index: where a LoAF entry point's offset lies
        lines = script_lines.for_store(store.path)
        for cur, upload_id, meta, body in store.iter_uploads(cursor, on_damage=damaged):
            last_cursor = cur
            have_new = True
            app = text_of(meta.get("app")) or ""
            release = text_of(meta.get("release")) or ""
            rkey = release_key(app, release)
            rel = releases.get(rkey)
            if rel is None:
                entry = man["releases"].get(rkey)
                rel = releases[rkey] = (
                    cached_release(tdir, rkey, entry) if entry else Release(app, release)
                )
            rel.cur_at = number_of(meta.get("receivedAt"))
            try:
                rec = read_any(body, f"upload {upload_id}")
            except JsprofError as e:
                # The collector validated it; a body that no longer parses is recorded,
                # never allowed to stop compaction of everything after it.
                man["skipped"].append({"id": upload_id, "error": str(e)[:300]})
                stats.skipped += 1
                continue
            uk = man["nextUk"]
            man["nextUk"] = uk + 1
            row = upload_row(rel, uk, upload_id, rkey, meta, rec, lines(rkey))
            row["_segment"] = getattr(cur, "last", None)  # its part's `segments`
            pending.append(row)
            n = row["samples"]
            stats.uploads += 1
            stats.samples += n
            in_batch += n
            if progress is not None:
                progress(stats)
            if len(pending) >= batch or in_batch >= batch_samples:
                commit()
        commit()
        keep_releases(tdir, releases, man)
    return stats


# ---- a query's view of what is not compacted yet ---------------------------------------------

# Uploads a query reads past the tables: ~5 s of parsing at most, on the collector's CPU
