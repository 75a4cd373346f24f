"""What a query reads of the tables: the one module the fleet (`fleet/engine.py`,
`fleet/api.py`, `fleet/sourcemaps.py`) imports from them.

A query reads the committed manifest once (`read_manifest`), adds what is not compacted
yet (`read_tail`: the uploads stored after the manifest's cursor, interned in memory into
parts beside the committed ones), and asks which parts of a kind it must scan
(`part_files`: checked against their CRC-32, parts outside its time range skipped
unopened). It writes nothing and takes no lock: a query answers the same as a user who
may only read the store, and never waits on the compactor, nor the compactor on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

from ... import script_lines
from ...errors import JsprofError
from . import vitals as rollup_vitals
from .compact import UploadSource
from .intern import (
    Release,
    number_of,
    release_key,
    text_of,
    upload_row,
    write_release_parts,
    write_upload_parts,
)
from .manifest import (
    CompactError,
    cursor_in,
    read_manifest,
    tables_dir,
    tail_release,
    with_tail,
)
from .parts import day_of, part_files
from .perload import LOAD_KEY, function_hash, prior_self
from .rollup import (
    EXAMPLES_KEPT,
    HLL_ERROR,
    ROLLUP_KINDS,
    bucket_of,
    frame_groups,
    load_hash,
    page_loads,
    quantiles,
)
from .rollup import schemas as rollup_schemas
from .timeroll import BUCKETS as TIME_BUCKETS
from .timeroll import (
    IDLE_MARKERS,
    TIME_KINDS,
    TIMED_SQL,
    nice,
    percentile_key,
    time_key,
    time_rows,
    timed,
    view_grid,
)
from .vitals import prior_timelines

__all__ = [
    "EXAMPLES_KEPT",
    "HLL_ERROR",
    "IDLE_MARKERS",
    "TIME_BUCKETS",
    "TIME_KINDS",
    "TIMED_SQL",
    "LOAD_KEY",
    "ROLLUP_KINDS",
    "TAIL_MAX",
    "TAIL_MAX_SAMPLES",
    "TAIL_NEW_MAX",
    "CompactError",
    "Tail",
    "bucket_of",
    "frame_groups",
    "day_of",
    "function_hash",
    "load_hash",
    "nice",
    "page_loads",
    "part_files",
    "percentile_key",
    "quantiles",
    "read_manifest",
    "read_tail",
    "release_key",
    "rollup_schemas",
    "rollup_vitals",
    "time_key",
    "time_rows",
    "timed",
    "view_grid",
    "tables_dir",
]

# Uploads a query reads past the tables: ~5 s of parsing at most, on the collector's CPU
# and GIL while it runs. While the background compactor keeps up, the tail is a few seconds
# of uploads; past the cap a query counts what it left out (`Tail.pending`).
TAIL_MAX = 500
# ... and samples: what the tail holds in memory grows with its samples (~40 bytes each in
# its tables, about twice that at the peak while they are built), not with its uploads,
# which may hold 6,000 samples or 200,000 (`serve.config.Limits.max_samples`). 3 M is 500
# field uploads of 6,000: ~120 MB of tables, a peak of ~250 MB in all (issue 34: 500
# such uploads peaked at 1.2 GB before the tail's moments were built a block at a time).
TAIL_MAX_SAMPLES = 3_000_000
# New uploads one query of a collector worker reads (`keep`: the rest wait, counted in
# `Tail.pending`, for its next query): ~2 s of one core at ~6 ms of CPU per field upload
# (6,000 samples; benchmarks/RESULTS.md, issue 34). The answer then comes within that,
# however far the compactor is behind, on a worker that gets a tenth of a core: 20 s,
# where a query that read all that had come (hundreds) took minutes at load 24-36.
TAIL_NEW_MAX = 300


@dataclass
class Tail:
    """The uploads stored after the manifest's cursor, as tables beside the committed ones."""

    manifest: dict  # the committed manifest plus the tail's parts (in memory: "table")
    uploads: int = 0  # uploads of the tail in `manifest`
    pending: int = 0  # uploads after those (over the cap): in no table and not in `manifest`
    damaged: int = 0  # damaged records met in the tail that the manifest does not list


def read_tail(store: UploadSource, man: dict, limit: int = TAIL_MAX,
              max_samples: int = TAIL_MAX_SAMPLES, keep: bool = False,
              new_max: int | None = None) -> Tail:
    """What a query adds to the committed tables `man` without compacting: the uploads
    stored after its cursor (at most `limit`, oldest first, and no upload once
    `max_samples` samples are read: the last one read may pass it by its own samples,
    so the memory held is bounded by the cap plus one upload), interned into parts held in
    memory (pyarrow Tables, listed in a copy of `man`: `part_files` gives them as such).
    Nothing is written anywhere (no temporary file either: a query runs as a user who may
    only read the store) and no lock is taken, so a query never waits on a compaction,
    nor a compaction on it.

    The tail is interned apart from the committed frames and stacks (reading those would
    cost what compaction saves): its ids continue the release's, a frame already committed
    gets a second id with the same name and place, which every query merges by function.
    Upload keys continue `nextUk` in the order compaction will give them.

    `keep`: what was read is kept in this process for its next call, which reads only
    the uploads stored since (`kept_tail`: a collector worker's queries), and each call
    reads at most `new_max` of those (None: any number up to `limit`; a collector's
    queries pass `TAIL_NEW_MAX`); the others are counted in `pending` and read by the
    calls after it, `new_max` at a time.
    """
    from ...formats import read_any

    if keep:
        from . import kept_tail

        kept, uploads, pending, damaged = kept_tail.read(store, man, limit, max_samples,
                                                         new_max)
        return Tail(kept, uploads=uploads, pending=pending, damaged=damaged)

    releases: dict[str, Release] = {}
    rows: list[dict] = []
    known = {(d["segment"], d["offset"]) for d in man.get("damaged", [])}
    tail = Tail(man)

    def damaged(f: Any) -> None:
        if (f.segment, f.offset) not in known:
            known.add((f.segment, f.offset))
            tail.damaged += 1

    uk = man["nextUk"]
    samples = 0
    # each release's script line index: where a LoAF entry point's offset lies
    lines = script_lines.for_store(store.path)
    it = store.iter_uploads(cursor_in(man), on_damage=damaged)
    try:
        for cur, upload_id, meta, body in it:
            if len(rows) >= limit or samples >= max_samples:
                tail.pending = 1 + store.count_uploads(cur)  # this one, and all after it
                break
            app = text_of(meta.get("app")) or ""
            release = text_of(meta.get("release")) or ""
            rkey = release_key(app, release)
            rel = releases.get(rkey)
            if rel is None:
                rel = releases[rkey] = Release(app, release)
            rel.cur_at = number_of(meta.get("receivedAt"))
            try:
                rec = read_any(body, f"upload {upload_id}")
            except JsprofError:
                continue  # compaction lists it in `skipped`; no upload key, as there
            rows.append(upload_row(rel, uk, upload_id, rkey, meta, rec, lines(rkey)))
            del rec  # parsed: its columns are interned
            samples += rows[-1]["samples"]
            uk += 1
    finally:
        it.close()
    if not rows:
        return tail
    new = with_tail(man, uk, write_upload_parts(None, rows, 0))
    for rkey, rel in releases.items():
        entry, fb, sb = tail_release(man, rkey, rel.app, rel.release, len(rel.frame_ids),
                                     len(rel.stack_parent))
        # a page load's chunks committed before the tail (rollup_vitals: `vitals.py`)
        prior = partial(prior_timelines, tables_dir(store.path), man, rkey)
        pself = partial(prior_self, tables_dir(store.path), man, rkey)
        for kind, entries in write_release_parts(None, rkey, rel, 0, fb, sb, prior=prior,
                                                 prior_self=pself).items():
            entry["parts"][kind].extend(entries)
        new["releases"][rkey] = entry
    tail.manifest = new
    tail.uploads = len(rows)
    return tail
