"""A collector worker's tail, kept between its queries (issue 34).

Every query reads the uploads not compacted yet (`view.read_tail`). While the background
compactor is behind, that is up to 500 uploads (3 M samples): ~6-8 s of one core, and
30-40 s on a loaded machine, for every query of a dashboard refresh, the same uploads
parsed and interned again each time. A worker (`jsprof serve`) keeps them instead: the
uploads are read once, a chunk at a time (`CHUNK`), into a release interner of the tail's
own (ids from 0) and written as tables in memory; a query reads only the uploads stored
since the last one and hands the kept tables on, their frame and stack ids moved up by the
committed tables' counts of the moment (one vectorised add per id column).

When the compactor commits, the uploads it took (a prefix of the tail, identified by the
store's cursor after each upload and its upload key) are dropped from what is kept; a
chunk the commit cut through is read again from the store (its other uploads only: at
most `CHUNK`). Their frames and stacks stay (later chunks' stacks may point into them)
until nothing kept is left or the dropped uploads reach `DEAD_MAX`: then it starts anew.
Anything that does not line up (the manifest's cursor not one the kept tail passed, an
upload key or id not the one expected, a release's script line index changed, a
segment of damage met and not compacted yet rewritten by a prune) starts anew too:
the answer is always the one `view.read_tail` gives for the same manifest, up
to how the rows are split into parts.
"""

from __future__ import annotations

import os
import threading
import weakref
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from ... import script_lines
from ...errors import JsprofError
from .intern import (
    Release,
    number_of,
    perload_table,
    release_key,
    text_of,
    upload_row,
    vitals_table,
    write_release_parts,
    write_upload_parts,
)
from .manifest import cursor_in, tables_dir, tail_release, with_tail
from .parts import day_of, new_part, schemas
from .perload import prior_self
from .vitals import counts_left_out, prior_timelines

# Uploads interned and written as one set of tables: a commit that cuts through a chunk
# costs reading its other uploads again (~20 ms of CPU each), so chunks stay small;
# each kind's tables are one per chunk (a full tail of 500: 10 per kind).
CHUNK = 50
# Compacted uploads whose frames and stacks the kept tail may still carry
DEAD_MAX = 500

# id columns per kind, and which base (committed frames "f", stacks "s") moves them
_IDS = {
    "frames": {"frame_id": "f"},
    "stacks": {"stack_id": "s", "parent_id": "s", "frame_id": "f"},
    "weights": {"stack_id": "s"},
    "samples": {"stack_id": "s"},
    "upload_frames": {"frame_id": "f"},
    "rollup_stacks": {"stack_id": "s"},
    # (the Time view's: left as the tail's own ids, its stacks were the committed
    # tables' of those numbers, another function's time)
    "rollup_time": {"stack_id": "s"},
    "rollup_frames": {"frame_id": "f"},
    "rollup_moments": {"key": "f"},
}
_VIT = ("route", "env", "page_load", "timeline")


@dataclass
class _Upload:
    after: Any  # the store's cursor after this upload
    upload_id: str
    uk: int | None  # None: not parsable (compaction skips it too, with no key)


@dataclass
class _Chunk:
    uploads: list[_Upload]
    samples: int
    upload_parts: list[dict]
    # rkey -> kind -> entries (tables with the tail's own ids, from 0)
    parts: dict[str, dict[str, list[dict]]]
    # (rkey, day) -> the columns rollup_vitals is made of, per upload in key order
    vit: dict[tuple[str, str | None], dict[str, list]]
    # (rkey, day) -> what rollup_perload is made of: the uploads' columns, their keys' sums
    perload: dict[tuple[str, str | None], tuple[dict[str, list], dict[str, Any]]]


@dataclass
class _Kept:
    start: Any  # the cursor the kept uploads start after (a manifest's)
    releases: dict[str, Release] = field(default_factory=dict)
    chunks: list[_Chunk] = field(default_factory=list)
    # frames and stacks of chunks compacted since: rkey -> kind -> entries
    dead: dict[str, dict[str, list[dict]]] = field(default_factory=dict)
    dead_uploads: int = 0
    end: Any = None  # the cursor after the last upload read
    next_uk: int = 0
    seq: int = 0  # chunks written (their part numbers)
    # (segment, offset) -> (uploads read before it, its segment file's identity): the
    # damage met past `start`. Once the compactor's cursor has passed the upload after it,
    # the manifest's `damaged` list speaks for it (listing it while it lasts, leaving it
    # out once a prune dropped it or its segment): it leaves this map (`_follow`).
    damaged: dict = field(default_factory=dict)
    read_total: int = 0  # uploads read into this kept tail, compacted ones included
    cut_total: int = 0  # of those, the ones the compactor has taken since
    lines: dict[str, Any] = field(default_factory=dict)  # rkey -> its maps dir's state


# Kept per store object (a collector's app holds one for its life), not per path: a store
# removed and made again at the same path is a new Store with nothing kept, where a tail
# kept by path answered with the old store's uploads (its cursor and upload keys both
# still lined up with a new store's first ones). Weak keys: a store dropped takes its
# tail with it. A lock per store: one store's query never waits on another's read.
_kept: weakref.WeakKeyDictionary[Any, _Kept] = weakref.WeakKeyDictionary()
_locks: weakref.WeakKeyDictionary[Any, threading.Lock] = weakref.WeakKeyDictionary()
_lock = threading.Lock()  # guards the two maps only
# uploads parsed and interned here, by every kept tail of this process (tests count them)
reads = 0


def forget() -> None:
    """Drop every kept tail (tests)."""
    with _lock:
        _kept.clear()


def read(store: Any, man: dict, limit: int, max_samples: int, new_max: int | None = None
         ) -> tuple[dict, int, int, int]:
    """`view.read_tail(store, man, limit, max_samples)`'s Tail (manifest, uploads, pending,
    damaged), from what this process kept of `store`'s tail at its last query plus the
    uploads stored since: at most `new_max` of them (None: no cap but `limit`), the rest
    counted as pending for a later call to read (`view.TAIL_NEW_MAX`)."""
    with _lock:
        lock = _locks.setdefault(store, threading.Lock())
    with lock:
        with _lock:
            kept = _kept.pop(store, None)
        if kept is not None and not _follow(store, kept, man):
            kept = None
        if kept is None:
            kept = _Kept(cursor_in(man), next_uk=man["nextUk"])
        pending = _read_new(store, kept, man, limit, max_samples, new_max)
        damaged = len(kept.damaged.keys() - {(d["segment"], d["offset"])
                                             for d in man.get("damaged", [])})
        uploads = sum(u.uk is not None for c in kept.chunks for u in c.uploads)
        manifest = _manifest(store, kept, man) if uploads else man
        with _lock:
            _kept[store] = kept
        return manifest, uploads, pending, damaged


def _lines_state(store: Any, rkey: str) -> Any:
    try:
        st = os.stat(Path(store.path) / script_lines.MAPS_DIR / f"rkey={rkey}")
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns)


def _follow(store: Any, kept: _Kept, man: dict) -> bool:
    """Bring `kept` to `man`: drop what it compacted since. False: start anew."""
    if any(_lines_state(store, r) != s for r, s in kept.lines.items()):
        return False  # a release's line index changed: its uploads attribute otherwise
    cur = cursor_in(man)
    ups = [u for c in kept.chunks for u in c.uploads]
    if cur == kept.start:
        cut = 0
    else:
        cut = next((i + 1 for i, u in enumerate(ups) if u.after == cur), None)
        if cut is None:
            return False
    first = next((u.uk for u in ups[cut:] if u.uk is not None), kept.next_uk)
    if first != man["nextUk"]:
        return False
    kept.cut_total += cut
    kept.damaged = {k: v for k, v in kept.damaged.items() if v[0] >= kept.cut_total}
    if any(_segment_id(store, k[0]) != v[1] for k, v in kept.damaged.items()):
        return False  # a prune rewrote (or removed) a segment of damage not compacted yet
    if cut == 0:
        return True
    n = 0
    live: list[_Chunk] = []
    redo: tuple[_Chunk, int] | None = None
    for c in kept.chunks:
        if n + len(c.uploads) <= cut:
            _bury(kept, c)
        elif n >= cut:
            live.append(c)
        else:
            redo = (c, cut - n)
        n += len(c.uploads)
    kept.dead_uploads += sum(u.uk is not None for u in ups[:cut])
    kept.start = cur
    if not live and redo is None or kept.dead_uploads > DEAD_MAX:
        return False  # nothing kept is needed, or too much that is not
    if redo is not None:
        again = _reread(store, kept, *redo)
        if again is None:
            return False
        _bury(kept, redo[0])
        live.insert(0, again)
    kept.chunks = live
    return True


def _segment_id(store: Any, name: str) -> Any:
    """The identity of segment `name`'s file: a prune's rewrite renames a new file over
    it (and may drop damaged bytes or move them), an empty one is deleted."""
    try:
        st = os.stat(Path(store.path) / "segments" / name)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _bury(kept: _Kept, c: _Chunk) -> None:
    """A chunk compacted (or read again): only its frames and stacks stay."""
    for rkey, kinds in c.parts.items():
        d = kept.dead.setdefault(rkey, {"frames": [], "stacks": []})
        for k in ("frames", "stacks"):
            d[k] += kinds.get(k, [])


def _reread(store: Any, kept: _Kept, c: _Chunk, skip: int) -> _Chunk | None:
    """Chunk `c`'s uploads after its first `skip` (compacted), read again from the store:
    the same keys, the frames and stacks already interned."""
    want = c.uploads[skip:]
    build = _Builder(store, kept)
    it = store.iter_uploads(kept.start, on_damage=lambda f: None)
    try:
        for u in want:
            got = next(it, None)
            if got is None or got[0] != u.after or got[1] != u.upload_id:
                return None
            build.add(*got, uk=u.uk)
    finally:
        it.close()
    return build.flush()


def _read_new(store: Any, kept: _Kept, man: dict, limit: int, max_samples: int,
              new_max: int | None = None) -> int:
    """Read the uploads after `kept.end` into new chunks, up to the caps (and at most
    `new_max` this call); returns how many are left out over them (`Tail.pending`)."""
    live = sum(u.uk is not None for c in kept.chunks for u in c.uploads)
    samples = sum(c.samples for c in kept.chunks)
    after = kept.end if kept.end is not None else kept.start
    if live >= limit or samples >= max_samples:
        return store.count_uploads(after)

    def damaged(f: Any) -> None:
        kept.damaged.setdefault((f.segment, f.offset),
                                (kept.read_total, _segment_id(store, f.segment)))

    build = _Builder(store, kept)
    pending = 0
    read_now = 0
    it = store.iter_uploads(after, on_damage=damaged)
    try:
        for got in it:
            if (live >= limit or samples >= max_samples
                    or new_max is not None and read_now >= new_max):
                pending = 1 + store.count_uploads(got[0])  # this one, and all after it
                break
            n = build.add(*got, uk=None)
            read_now += 1
            kept.read_total += 1
            kept.end = got[0]
            live += n is not None
            samples += n or 0
            if len(build.uploads) >= CHUNK:
                kept.chunks.append(build.flush())
    finally:
        it.close()
    if build.uploads:
        kept.chunks.append(build.flush())
    return pending


class _Builder:
    """One chunk being read: its uploads interned into the kept tail's releases."""

    def __init__(self, store: Any, kept: _Kept) -> None:
        self.kept = kept
        self.lines = script_lines.for_store(store.path)
        self.store = store
        self.uploads: list[_Upload] = []
        self.rows: list[dict] = []
        self.touched: dict[str, Release] = {}
        self.samples = 0

    def add(self, cur: Any, upload_id: str, meta: dict, body: bytes, uk: int | None
            ) -> int | None:
        """Intern one upload (key `uk`, else the next); its samples, None: not parsable."""
        global reads
        from ...formats import read_any

        kept = self.kept
        app = text_of(meta.get("app")) or ""
        release = text_of(meta.get("release")) or ""
        rkey = release_key(app, release)
        rel = kept.releases.get(rkey)
        if rel is None:
            rel = kept.releases[rkey] = Release(app, release)
            kept.lines[rkey] = _lines_state(self.store, rkey)
        rel.cur_at = number_of(meta.get("receivedAt"))
        try:
            rec = read_any(body, f"upload {upload_id}")
        except JsprofError:
            self.uploads.append(_Upload(cur, upload_id, None))
            return None
        reads += 1
        if uk is None:
            uk = kept.next_uk
            kept.next_uk += 1
        self.touched[rkey] = rel
        self.rows.append(upload_row(rel, uk, upload_id, rkey, meta, rec, self.lines(rkey)))
        del rec
        self.uploads.append(_Upload(cur, upload_id, uk))
        n = self.rows[-1]["samples"]
        self.samples += n
        return n

    def flush(self) -> _Chunk:
        kept = self.kept
        seq = kept.seq = kept.seq + 1
        parts: dict[str, dict[str, list[dict]]] = {}
        vit: dict[tuple[str, str | None], dict[str, list]] = {}
        perload: dict[tuple[str, str | None], tuple[dict[str, list], dict[str, Any]]] = {}
        for rkey, rel in self.touched.items():
            for c in rel.cells:
                v = vit.setdefault((rkey, day_of(c.get("_at"))),
                                   {k: [] for k in (*_VIT, "at", "uk")})
                for k in _VIT:
                    v[k].append(c[k])
                v["at"].append(c.get("_at"))
                v["uk"].append(int(c["uk"]))
            got = write_release_parts(None, rkey, rel, seq)
            # made over the whole tail when read (_manifest): a page load's chunks may be
            # in two kept chunks, and what came before them is the manifest's of the moment
            got.pop("rollup_vitals", None)
            for e in got.pop("rollup_perload", []):
                up, per = e["build"].args[:2]  # intern.perload_table's
                perload[(rkey, e["day"])] = (up, per)
            assert not any("build" in e for es in got.values() for e in es), list(got)
            parts[rkey] = got
            rel.cells.clear()
            rel.new_frames = []
            rel.n_frames_committed = len(rel.frame_ids)
            rel.n_stacks_committed = len(rel.stack_parent)
        chunk = _Chunk(self.uploads, self.samples, write_upload_parts(None, self.rows, seq),
                       parts, vit, perload)
        self.uploads, self.rows, self.touched, self.samples = [], [], {}, 0
        return chunk


def _moved(e: dict, kind: str, fb: int, sb: int) -> dict:
    """A kept entry for one query: a copy, its ids moved up by the committed counts."""
    import pyarrow.compute as pc

    out = dict(e)
    t = e["table"]
    for name, which in _IDS.get(kind, {}).items():
        base = fb if which == "f" else sb
        if base:
            i = t.schema.get_field_index(name)
            col = t.column(i)
            t = t.set_column(i, t.schema.field(i),
                             pc.if_else(pc.greater_equal(col, 0), pc.add(col, base), col))
    out["table"] = t
    return out


def _manifest(store: Any, kept: _Kept, man: dict) -> dict:
    """`man` plus the kept tail's tables, as `read_tail` lists them."""
    sch = schemas()["rollup_vitals"]
    tdir = tables_dir(store.path)
    new = with_tail(man, kept.next_uk,
                    [dict(e) for c in kept.chunks for e in c.upload_parts])
    for rkey, rel in kept.releases.items():
        entry, fb, sb = tail_release(man, rkey, rel.app, rel.release, len(rel.frame_ids),
                                     len(rel.stack_parent))
        for kind, es in kept.dead.get(rkey, {}).items():
            entry["parts"][kind] += [_moved(e, kind, fb, sb) for e in es]
        vit: dict[str | None, dict[str, list]] = {}
        for c in kept.chunks:
            for kind, es in c.parts.get(rkey, {}).items():
                entry["parts"][kind] += [_moved(e, kind, fb, sb) for e in es]
            for (rk, day), v in c.vit.items():
                if rk == rkey:
                    acc = vit.setdefault(day, {k: [] for k in (*_VIT, "at", "uk")})
                    for k, col in v.items():
                        acc[k] += col
        pl: dict[str | None, tuple[dict[str, list], dict[str, list]]] = {}
        for c in kept.chunks:
            for (rk, day), (up, per) in c.perload.items():
                if rk == rkey:
                    acc_up, acc_per = pl.setdefault(day, ({}, {}))
                    for k, col in up.items():
                        acc_up.setdefault(k, []).extend(col)
                    for k, arr in per.items():
                        acc_per.setdefault(k, []).append(arr)
        psch = schemas()["rollup_perload"]
        for day in sorted(pl, key=lambda d: d or ""):
            up, per = pl[day]
            sub = f"{day}/" if day else ""
            e = new_part(None, f"rollup_perload/rkey={rkey}/{sub}part-tail.parquet",
                         {f.name: [] for f in psch}, psch, 0, day,
                         vit.get(day, {}).get("at", [None]))
            e.pop("table")
            e["build"] = partial(_build_perload, up, {k: np.concatenate(v)
                                                      for k, v in per.items()},
                                 partial(prior_self, tdir, man, rkey, day), psch)
            entry["parts"]["rollup_perload"].append(e)
        for day in sorted(vit, key=lambda d: d or ""):
            v = vit[day]
            sub = f"{day}/" if day else ""
            e = new_part(None, f"rollup_vitals/rkey={rkey}/{sub}part-tail.parquet",
                         {f.name: [] for f in sch}, sch, 0, day, v["at"],
                         (min(v["uk"]), max(v["uk"])) if v["uk"] else None)
            e.pop("table")
            prior = partial(prior_timelines, tdir, man, rkey, day)
            e["build"] = partial(_build_vitals, {k: v[k] for k in _VIT}, prior, sch)
            entry["parts"]["rollup_vitals"].append(counts_left_out(e))
        new["releases"][rkey] = entry
    return new


def _build_vitals(up: dict, prior: Any, schema: Any) -> Any:
    return vitals_table(up, prior(), schema)


def _build_perload(up: dict, per: dict, prior: Any, schema: Any) -> Any:
    return perload_table(up, per, prior(), schema)
