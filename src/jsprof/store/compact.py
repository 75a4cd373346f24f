"""The compactor: raw uploads -> Parquet tables that queries scan without re-parsing JSON.

Layout under `<store>/tables/` (documented in docs/store.md):

    _manifest.json                 what is committed: cursor, part files, per-release sizes
    _compact.lock                  flock: one compactor at a time
    uploads/K/D/part-NNNNNN.parquet                 one row per upload
    frames/rkey=K/part-NNNNNN.parquet               a release's frames, interned
    stacks/rkey=K/part-NNNNNN.parquet               a release's stacks (parent-pointer tree)
    weights/rkey=K/D/part-NNNNNN.parquet            per upload: (stack, marker, samples, ns)
    upload_frames/rkey=K/D/part-NNNNNN.parquet      per upload: frames present, self time
    samples/rkey=K/D/part-NNNNNN.parquet            per sample: time, stack, marker, ns

K is a short hash of (app, release), D the UTC day of receivedAt. The manifest lists each
part with its receivedAt range, rows, size and CRC-32: a query skips parts outside its time
range, prune drops whole parts, and a damaged part is one clear error, never wrong data.
(Only `rkey=` is a hive-style folder name: the uploads table has an `rkey` column, and a
second partition key would make engines add or refuse columns.)
Part files are immutable once listed in the manifest;
the manifest is replaced atomically after its parts are fsync'd, so a reader that reads
the manifest once sees one consistent snapshot, and a compactor killed at any instant
leaves only unlisted files that the next run overwrites.

The time rule is applied here, per trace, before any filter or merge: a sample weighs the
gap to the next sample of its trace, the last one the trace's `sampleInterval` from its
metadata, else the trace's median gap; no sample weighs more than 20 intervals, at least
100 ms (`trace.gap_cap`), the rest of a longer gap is the upload's `lost_ms`. Weights are
kept as integer nanoseconds so that sums are exact and independent of the order an engine
adds them in.
"""

from __future__ import annotations

import calendar
import contextlib
import hashlib
import math
import os
import re
import time
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import orjson

from ..errors import JsprofError
from ..trace import NONE, weights_and_lost
from .cursor import Cursor
from .durable import fsync_dir
from .lock import TablesLock

TABLES = "tables"
MANIFEST = "_manifest.json"
# 2: uploads.lost_ms; 3: uploads.page_load; 4: stack-less samples inside long animation
# frames on their attributed stacks (analysis/busy.py), where 3 kept them (idle); 5: the
# samples table (each sample's time on its upload's clock: the merged Time view and
# `--during` read it instead of the raw uploads)
FORMAT_VERSION = 5
# Formats read as they are and upgraded by the next compaction, not rebuilt: 4 has every
# table of 5 but `samples`, which only its uploads from `samplesFromUk` on have (a rebuild
# would need raw segments that raw retention, `--keep-raw`, may have deleted).
UPGRADES = (4,)
BATCH = 2000  # uploads per committed batch: bounds memory and lost work on a crash
NS_PER_MS = 1_000_000

KINDS = ("frames", "stacks", "weights", "upload_frames", "samples")
ROW_KINDS = ("weights", "upload_frames", "samples")  # per-upload rows, parted by day


class UploadSource(Protocol):
    """What the compactor needs of `jsprof.store.Store`."""

    @property
    def path(self) -> Any: ...

    def iter_uploads(
        self, after: Any = None, on_damage: Any = None
    ) -> Iterator[tuple[Any, str, dict, bytes]]: ...


class CompactError(JsprofError):
    pass


def release_key(app: str, release: str) -> str:
    """A short, path-safe key for (app, release): the directory of its tables."""
    return hashlib.sha1(f"{app}\0{release}".encode()).hexdigest()[:16]


def tables_dir(store_path: str | os.PathLike) -> Path:
    return Path(store_path) / TABLES


# ---- the manifest ------------------------------------------------------------------------


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
    }


def _upgraded(doc: dict) -> dict:
    """A manifest of a format in UPGRADES as this format reads it (in memory; the next
    compaction commits it): no samples parts, and no sample rows for any upload so far."""
    doc = dict(doc, formatVersion=FORMAT_VERSION)
    doc.setdefault("samplesFromUk", doc.get("nextUk", 0))
    doc["releases"] = {k: dict(v, parts={**v["parts"], "samples": v["parts"].get("samples", [])})
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


def _locked_manifest(tdir: Path) -> dict:
    """`read_manifest` for a process holding the compaction lock. Tables an older jsprof
    wrote are started anew: the raw uploads are the record (a query leaves out an upload
    pruned from them), so the compaction that follows rebuilds every table under this
    jsprof's reading. The old parts are listed `obsolete` (deleted after the grace, by a
    later merge or prune, as merged parts are: a reader still on the old manifest keeps its
    files), and new parts are numbered after them, never over them."""
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
        listed = sorted(_listed(doc))
        part = max(1, int(doc.get("nextPart") or 1))
    except (KeyError, TypeError, ValueError, AttributeError):
        listed, part = [], 1  # unlisted files: the sweep removes them, new ones overwrite
    now = time.time()
    man["obsolete"] = [{"path": x, "at": now} for x in listed]
    man["nextPart"] = man["mergeSeen"] = part
    man["rebuiltFrom"] = doc["formatVersion"]
    for key in [k for k in _cache if k[0] == str(tdir)]:
        del _cache[key]
    _fsync_write(p, orjson.dumps(man))
    return man


def _fsync_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


# ---- per release interning -----------------------------------------------------------------


@dataclass
class _Release:
    """A release's frame and stack tables: those already committed plus this batch's."""

    app: str
    release: str
    frame_ids: dict[tuple, int] = field(default_factory=dict)
    stack_ids: dict[tuple[int, int], int] = field(default_factory=dict)
    stack_parent: list[int] = field(default_factory=list)
    stack_frame: list[int] = field(default_factory=list)
    n_frames_committed: int = 0
    n_stacks_committed: int = 0
    new_frames: list[tuple] = field(default_factory=list)
    weights: list[dict] = field(default_factory=list)
    upload_frames: list[dict] = field(default_factory=list)
    samples: list[dict] = field(default_factory=list)
    # receivedAt of the upload being added: its rows go to that day's parts
    cur_at: float | None = None
    # the manifest's frame/stack part entries this object holds (see _cached_release)
    loaded_frames: list = field(default_factory=list)
    loaded_stacks: list = field(default_factory=list)

    def frame(self, key: tuple) -> int:
        fid = self.frame_ids.get(key)
        if fid is None:
            fid = self.frame_ids[key] = len(self.frame_ids)
            self.new_frames.append(key)
        return fid

    def stack(self, parent: int, frame: int) -> int:
        sid = self.stack_ids.get((parent, frame))
        if sid is None:
            sid = self.stack_ids[(parent, frame)] = len(self.stack_parent)
            self.stack_parent.append(parent)
            self.stack_frame.append(frame)
        return sid


# Releases interned by earlier runs in this process: (tables dir, rkey) -> _Release, with
# the frame and stack parts it was built from. A long-lived collector compacts often; each
# run used to rebuild every touched release's frame/stack dicts from all its parts. Now a
# run reads only the parts committed since (by another process), or everything when the
# parts it was built from are no longer a prefix of the manifest's (tables rebuilt or the
# release pruned). Only used under the compaction lock; dropped when a run fails.
_cache: dict[tuple[str, str], _Release] = {}
_CACHE_MAX_ROWS = 4_000_000  # frames + stacks kept: about 1 GB of Python objects at most


def _cached_release(tdir: Path, rkey: str, entry: dict) -> _Release:
    rel = _cache.pop((str(tdir), rkey), None)
    fparts, sparts = entry["parts"]["frames"], entry["parts"]["stacks"]
    if (
        rel is None
        or fparts[: len(rel.loaded_frames)] != rel.loaded_frames
        or sparts[: len(rel.loaded_stacks)] != rel.loaded_stacks
    ):
        return _load_release(tdir, rkey, entry)
    return _load_release(tdir, rkey, entry, rel)


def _keep_releases(tdir: Path, releases: dict[str, _Release], man: dict) -> None:
    for rkey, rel in releases.items():
        entry = man["releases"].get(rkey)
        if entry is None:
            continue
        rel.loaded_frames = list(entry["parts"]["frames"])
        rel.loaded_stacks = list(entry["parts"]["stacks"])
        _cache[(str(tdir), rkey)] = rel
    if sum(len(r.frame_ids) + len(r.stack_parent) for r in _cache.values()) > _CACHE_MAX_ROWS:
        _cache.clear()


def _load_release(
    tdir: Path, rkey: str, entry: dict, rel: _Release | None = None
) -> _Release:
    """The release's committed frames and stacks: all its parts, or (`rel` given) only
    those after the ones `rel` was built from."""
    import pyarrow.parquet as pq

    if rel is None:
        rel = _Release(entry["app"], entry["release"])
    for part in entry["parts"]["frames"][len(rel.loaded_frames) :]:
        t = _read(pq, verify_part(tdir, part), tdir).to_pydict()
        for fid, n, r, ln, c in zip(
            t["frame_id"], t["name"], t["resource"], t["line"], t["column"], strict=True
        ):
            rel.frame_ids[(n, r, ln, c)] = fid
    for part in entry["parts"]["stacks"][len(rel.loaded_stacks) :]:
        t = _read(pq, verify_part(tdir, part), tdir).to_pydict()
        for sid, p, f in zip(t["stack_id"], t["parent_id"], t["frame_id"], strict=True):
            assert sid == len(rel.stack_parent), "stack parts must be contiguous"
            rel.stack_ids[(p, f)] = sid
            rel.stack_parent.append(p)
            rel.stack_frame.append(f)
    rel.n_frames_committed = len(rel.frame_ids)
    rel.n_stacks_committed = len(rel.stack_parent)
    return rel


def _read(pq: Any, path: str, tdir: Path, columns: list[str] | None = None) -> Any:
    import pyarrow as pa

    try:
        return pq.read_table(path, columns=columns)
    except (OSError, pa.ArrowException) as e:
        msg = (str(e).splitlines() or ["unreadable"])[0][:200]
        raise CompactError(
            f"{path}: table part does not read ({msg}); remove {tdir} to rebuild the "
            "tables from the raw uploads"
        ) from None


def _segment_sums(keys: np.ndarray, *values: np.ndarray) -> tuple[np.ndarray, ...]:
    """Unique keys and exact integer sums of each value column per key."""
    order = np.argsort(keys, kind="stable")
    k = keys[order]
    starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]]) if len(k) else np.zeros(0, np.int64)
    out = [k[starts]]
    for v in values:
        out.append(np.add.reduceat(v[order], starts) if len(k) else v[:0])
    return tuple(out)


def _number(v: Any) -> float | None:
    return float(v) if type(v) in (int, float) and np.isfinite(v) else None


def _text(v: Any) -> str | None:
    return v if type(v) is str else None


def _page_load(meta: dict) -> str | None:
    """The client's page-load id (`pageLoad`, a string or a whole number), else None: an
    upload without one is a page load of its own."""
    v = meta.get("pageLoad")
    if type(v) is int:
        return str(v)
    return v if type(v) is str and v else None


def upload_weights(track: Any, meta: dict) -> tuple[np.ndarray, float]:
    """The milliseconds each sample of one upload's track stands for, and its lost time:
    the one rule for an upload's weights, which the compactor stores and the queries that
    read raw records (`fleet/during.py`, `fleet/timecourse.py`) take again. The upload's
    `sampleInterval` when it is a positive, finite number (not a bool: JSON's `true` is
    no interval), else the track's own."""
    v = _number(meta.get("sampleInterval"))
    return weights_and_lost(track.trace, v if v is not None and v > 0 else track.sample_interval)


def attributed(track: Any, meta: dict, w: np.ndarray) -> Any:
    """One upload track's trace with its busy samples attributed (analysis/busy.py: a
    stack-less sample inside a long animation frame of the upload's timeline is its script
    entry point's, or the frame's own, never `(idle)`): what the tables keep, so every
    query reads it without re-reading raw uploads. The frames are the upload's own (the
    collector checked them); a frame that ends after its chunk was sent is reported with
    the next chunk, and its samples in this one stay `(idle)` here (`--during` reads the
    whole page load's frames). The queries that read raw records (`fleet/during.py`,
    `fleet/timecourse.py`) call this too."""
    from ..analysis.busy import attribute_trace
    from ..timeline import of_track

    t = meta.get("timeline")
    frames = list(t.get("longFrames") or ()) if isinstance(t, dict) else []
    frames += of_track(track).long_frames
    return attribute_trace(track.trace, frames, w)[0]


def add_upload(rel: _Release, uk: int, rec: Any, meta: dict) -> tuple[int, float]:
    """Intern one upload's tracks into `rel`; queue its weights and frame rows.

    Returns (samples, total ms, lost ms: gaps beyond the weight cap, `trace.gap_cap`).
    """
    keys, samples, wns = [], [], []
    times, stacks, markers = [], [], []
    lost_ms = 0.0
    for track in rec.tracks:
        tr = track.trace
        if tr.num_samples == 0:
            continue
        w, lost = upload_weights(track, meta)
        lost_ms += lost
        tr = attributed(track, meta, w)
        res = tr.resources
        fmap = [
            rel.frame(
                (f.name, None if f.resource_id is None else res[f.resource_id], f.line, f.column)
            )
            for f in tr.frames
        ]
        smap = _map_stacks(rel, tr.stack_parent, tr.stack_frame, fmap)
        st = smap[tr.sample_stack]  # NONE stays NONE through the last entry
        mk = (
            tr.sample_marker.astype(np.int64)
            if tr.sample_marker is not None
            else np.full(tr.num_samples, NONE, np.int64)
        )
        # One key per (stack, marker); markers are small codes, -1 for none.
        keys.append((st + 1) * 16 + (mk + 1))
        samples.append(np.ones(tr.num_samples, np.int64))
        wns.append(np.rint(w * NS_PER_MS).astype(np.int64))
        times.append(tr.sample_time)
        stacks.append(st)
        markers.append(mk)
    if not keys:
        return 0, 0.0, 0.0
    # Each sample as stored (its time on the upload's clock, its stack as attributed, its
    # weight): what the merged Time view and `--during` read, so no query reads raw uploads.
    rel.samples.append(
        {"uk": uk, "t": np.concatenate(times), "stack_id": np.concatenate(stacks),
         "marker": np.concatenate(markers), "weight_ns": np.concatenate(wns),
         "_at": rel.cur_at}
    )
    k, n, ns = _segment_sums(np.concatenate(keys), np.concatenate(samples), np.concatenate(wns))
    stack = k // 16 - 1
    marker = k % 16 - 1
    rel.weights.append(
        {"uk": uk, "stack_id": stack, "marker": marker, "samples": n, "weight_ns": ns,
         "_at": rel.cur_at}
    )
    # Frames present in this upload (anywhere on a sampled stack) and their self time.
    sp = rel.stack_parent
    sf = rel.stack_frame
    present: set[int] = set()
    seen: set[int] = set()
    for s in stack[stack >= 0].tolist():
        while s != NONE and s not in seen:
            seen.add(s)
            present.add(sf[s])
            s = sp[s]
    js = stack >= 0
    leaf = np.asarray(sf, np.int64)[stack[js]] if js.any() else np.zeros(0, np.int64)
    fk, fn, fns = _segment_sums(leaf, n[js], ns[js])
    self_n = dict(zip(fk.tolist(), fn.tolist(), strict=True))
    self_ns = dict(zip(fk.tolist(), fns.tolist(), strict=True))
    fids = sorted(present)
    ik, in_, ins = _segment_sums(marker[~js], n[~js], ns[~js])
    rel.upload_frames.append(
        {
            "uk": uk,
            "frame_id": np.asarray(fids + [NONE] * len(ik), np.int64),
            "marker": np.asarray([NONE] * len(fids) + ik.tolist(), np.int64),
            "self_samples": np.asarray([self_n.get(f, 0) for f in fids] + in_.tolist(), np.int64),
            "self_ns": np.asarray([self_ns.get(f, 0) for f in fids] + ins.tolist(), np.int64),
            "_at": rel.cur_at,
        }
    )
    return int(n.sum()), float(ns.sum()) / NS_PER_MS, lost_ms


def _map_stacks(
    rel: _Release, parent: np.ndarray, frame: np.ndarray, fmap: list[int]
) -> np.ndarray:
    """Per trace stack id, the release's stack id (plus a last NONE entry for samples)."""
    n = len(parent)
    out = np.full(n + 1, NONE, np.int64)
    par = parent.tolist()
    fr = frame.tolist()
    for s in range(n):
        if out[s] != NONE:
            continue
        # Walk up to a mapped ancestor (parents usually precede children; not trusted).
        chain = []
        cur = s
        while cur != NONE and out[cur] == NONE and len(chain) <= n:
            chain.append(cur)
            cur = par[cur]
        up = NONE if cur == NONE else int(out[cur])
        for c in reversed(chain):
            up = rel.stack(up, fmap[fr[c]])
            out[c] = up
    return out


# ---- writing ---------------------------------------------------------------------------------


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
    pq.write_table(table, tmp, compression="zstd", **extra)
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


def _entry(
    tdir: Path | None, rel: str, columns: dict[str, Any], schema: Any, rows: int,
    day: str | None = None, times: list[float | None] | None = None,
) -> dict:
    known = [t for t in times or [] if t is not None and math.isfinite(t)]
    entry = {
        "path": rel,
        "day": day,
        # A part with any upload of unknown time has no range: it is never skipped.
        "minAt": min(known) if known and len(known) == len(times or []) else None,
        "maxAt": max(known) if known and len(known) == len(times or []) else None,
        "rows": rows,
    }
    if tdir is None:
        # A query's tail: the part as a table in memory, never written (`read_tail`)
        import pyarrow as pa

        entry["table"] = pa.table(columns, schema=schema)
        return entry
    entry["bytes"], entry["crc32"] = _write_parquet(tdir / rel, columns, schema)
    return entry


def part_path(entry: str | dict) -> str:
    """The relative path of a manifest part entry (a plain string in older manifests)."""
    return entry if isinstance(entry, str) else entry["path"]


def _overlaps(entry: str | dict, since: float | None, until: float | None) -> bool:
    if isinstance(entry, str) or entry.get("minAt") is None:
        return True
    if since is not None and entry["maxAt"] < since:
        return False
    return not (until is not None and entry["minAt"] >= until)


# Parts checked by this process: path -> (inode, size, mtime_ns, crc32). Parts are never
# modified once listed, so one check per process is enough (a long-lived collector does
# not re-read gigabytes of tables per dashboard query); a file replaced or touched since
# is checked again.
_verified: dict[str, tuple[int, int, int, int]] = {}
_VERIFIED_MAX = 200_000


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
            data = path.read_bytes()
        except OSError as e:
            raise CompactError(cant.format(e.strerror)) from None
        if len(data) != entry["bytes"] or zlib.crc32(data) != entry["crc32"]:
            raise CompactError(
                f"{path}: table part is damaged (its checksum does not match the manifest); "
                f"remove {tdir} to rebuild the tables from the raw uploads"
            )
        if len(_verified) >= _VERIFIED_MAX:
            _verified.clear()
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
    return [e["table"] if isinstance(e, dict) and "table" in e
            else verify_part(tdir, e) if verify else str(tdir / part_path(e)) for e in keep]


def schemas() -> dict[str, Any]:
    import pyarrow as pa

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
    }


def _concat_rows(rows: list[dict], cols: Iterable[str]) -> dict[str, np.ndarray]:
    out = {}
    for c in cols:
        parts = [np.broadcast_to(np.asarray(r[c]), np.shape(r["marker"])) for r in rows]
        out[c] = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    return out


def _shift(ids: np.ndarray, base: int) -> np.ndarray:
    """Ids moved up by `base`; NONE (-1: no parent, no stack, an idle row) stays NONE."""
    return np.where(ids >= 0, ids + base, ids) if base else ids


def write_release_parts(
    tdir: Path | None, rkey: str, rel: _Release, part: int, frame_base: int = 0, stack_base: int = 0
) -> dict[str, list]:
    """Write this batch's new rows of one release; returns kind -> manifest entries.

    Frames and stacks are the release's dictionaries (needed by any time range): one part.
    Weights and upload frames go to one part per UTC day of their uploads' receivedAt.
    `frame_base`, `stack_base`: where `rel`'s own ids start in the release's tables (a
    query's tail, interned apart from the committed tables, continues their ids).
    `tdir` None: the parts are tables in memory (`read_tail`), nothing is written.
    """
    sch = schemas()
    name = f"part-{part:06d}.parquet"
    written: dict[str, list] = {}
    if rel.new_frames:
        n0 = rel.n_frames_committed + frame_base
        cols = list(zip(*rel.new_frames, strict=True))
        path = f"frames/rkey={rkey}/{name}"
        written["frames"] = [_entry(tdir, path, {
            "frame_id": np.arange(n0, n0 + len(rel.new_frames), dtype=np.int64),
            "name": list(cols[0]),
            "resource": list(cols[1]),
            "line": list(cols[2]),
            "column": list(cols[3]),
        }, sch["frames"], len(rel.new_frames))]
    if len(rel.stack_parent) > rel.n_stacks_committed:
        s0 = rel.n_stacks_committed
        path = f"stacks/rkey={rkey}/{name}"
        written["stacks"] = [_entry(tdir, path, {
            "stack_id": np.arange(s0, len(rel.stack_parent), dtype=np.int64) + stack_base,
            "parent_id": _shift(np.asarray(rel.stack_parent[s0:], np.int64), stack_base),
            "frame_id": np.asarray(rel.stack_frame[s0:], np.int64) + frame_base,
        }, sch["stacks"], len(rel.stack_parent) - s0)]
    for kind, rows in (("weights", rel.weights), ("upload_frames", rel.upload_frames),
                       ("samples", rel.samples)):
        by_day: dict[str | None, list[dict]] = {}
        for r in rows:
            by_day.setdefault(day_of(r.get("_at")), []).append(r)
        cols = [f.name for f in sch[kind]]
        for day in sorted(by_day, key=lambda d: d or ""):
            group = by_day[day]
            data = _concat_rows(group, cols)
            data["marker"] = data["marker"].astype(np.int8)
            if kind in ("weights", "samples"):
                data["stack_id"] = _shift(data["stack_id"], stack_base)
            else:
                data["frame_id"] = _shift(data["frame_id"], frame_base)
            sub = f"{day}/" if day else ""
            path = f"{kind}/rkey={rkey}/{sub}{name}"
            written.setdefault(kind, []).append(_entry(
                tdir, path, data, sch[kind], len(data["uk"]), day,
                [r.get("_at") for r in group],
            ))
    return written


def upload_row(rel: _Release, uk: int, upload_id: str, rkey: str, meta: dict, rec: Any) -> dict:
    """Intern one parsed upload into `rel` (`add_upload`) and return its uploads-table row."""
    n, total_ms, lost_ms = add_upload(rel, uk, rec, meta)
    return {
        "uk": uk,
        "id": upload_id,
        "app": rel.app,
        "release": rel.release,
        "rkey": rkey,
        "route": _text(meta.get("route")),
        "env": _text(meta.get("env")),
        "received_at": _number(meta.get("receivedAt")),
        "user_agent": _text(meta.get("userAgent")),
        "sample_interval": _number(meta.get("sampleInterval")),
        "meta": orjson.dumps(meta, option=orjson.OPT_SORT_KEYS).decode(),
        "samples": n,
        "total_ms": total_ms,
        "lost_ms": lost_ms,
        "page_load": _page_load(meta),
    }


def write_upload_parts(tdir: Path | None, rows: list[dict], part: int) -> list[dict]:
    """The uploads-table parts of `rows`: one per release and UTC day; manifest entries."""
    sch = schemas()["uploads"]
    groups: dict[tuple[str, str | None], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["rkey"], day_of(r["received_at"])), []).append(r)
    out = []
    for (rkey, day), group in sorted(groups.items(), key=lambda g: (g[0][0], g[0][1] or "")):
        cols = {f.name: [r[f.name] for r in group] for f in sch}
        sub = f"{day}/" if day else ""
        path = f"uploads/{rkey}/{sub}part-{part:06d}.parquet"
        e = _entry(tdir, path, cols, sch, len(group), day, [r["received_at"] for r in group])
        e["rkey"] = rkey
        out.append(e)
    return out


# ---- the compaction run ----------------------------------------------------------------------


@dataclass
class CompactStats:
    uploads: int = 0
    samples: int = 0
    skipped: int = 0
    batches: int = 0
    damaged: int = 0  # damaged records met in the raw store (listed in manifest["damaged"])


def _cursor_in(man: dict) -> Any:
    """The store's cursor from the manifest (`Cursor.dumps` text, or a plain JSON value)."""
    if not man["hasCursor"]:
        return None
    if man.get("cursorKind") == "Cursor":
        return Cursor.loads(man["cursor"])
    return man["cursor"]


def _cursor_out(man: dict, cursor: Any) -> None:
    if hasattr(cursor, "dumps"):
        man["cursor"], man["cursorKind"] = cursor.dumps(), "Cursor"
    else:
        man["cursor"], man["cursorKind"] = cursor, "json"
    man["hasCursor"] = True


def compact(store: UploadSource, batch: int = BATCH, progress: Any = None) -> CompactStats:
    """Append every upload the store acknowledged since the last run to the tables.

    Idempotent and safe to run while collectors write and while another compactor runs
    (the second waits on the lock, then finds only what is left).
    """
    from ..formats import read_any

    tdir = tables_dir(store.path)
    stats = CompactStats()
    with TablesLock(tdir):
        man = _locked_manifest(tdir)
        releases: dict[str, _Release] = {}
        pending: list[dict] = []
        cursor = _cursor_in(man)
        last_cursor: Any = None
        have_new = False

        def commit() -> None:
            nonlocal pending, have_new
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
                for kind, entries in write_release_parts(tdir, rkey, rel, part).items():
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
                _cursor_out(man, last_cursor)
            _fsync_write(tdir / MANIFEST, orjson.dumps(man))
            stats.batches += 1
            pending = []
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

        for cur, upload_id, meta, body in store.iter_uploads(cursor, on_damage=damaged):
            last_cursor = cur
            have_new = True
            app = _text(meta.get("app")) or ""
            release = _text(meta.get("release")) or ""
            rkey = release_key(app, release)
            rel = releases.get(rkey)
            if rel is None:
                entry = man["releases"].get(rkey)
                rel = releases[rkey] = (
                    _cached_release(tdir, rkey, entry) if entry else _Release(app, release)
                )
            rel.cur_at = _number(meta.get("receivedAt"))
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
            row = upload_row(rel, uk, upload_id, rkey, meta, rec)
            pending.append(row)
            n = row["samples"]
            stats.uploads += 1
            stats.samples += n
            if progress is not None:
                progress(stats)
            if len(pending) >= batch:
                commit()
        commit()
        _keep_releases(tdir, releases, man)
    return stats


# ---- a query's view of what is not compacted yet ---------------------------------------------

# Uploads a query reads past the tables: ~5 s of parsing at most, on the collector's CPU
# and GIL while it runs. While the background compactor keeps up, the tail is a few seconds
# of uploads; past the cap a query counts what it left out (`Tail.pending`).
TAIL_MAX = 500


@dataclass
class Tail:
    """The uploads stored after the manifest's cursor, as tables beside the committed ones."""

    manifest: dict  # the committed manifest plus the tail's parts (in memory: "table")
    uploads: int = 0  # uploads of the tail in `manifest`
    pending: int = 0  # uploads after those (over the cap): in no table and not in `manifest`
    damaged: int = 0  # damaged records met in the tail that the manifest does not list


def read_tail(store: UploadSource, man: dict, limit: int = TAIL_MAX) -> Tail:
    """What a query adds to the committed tables `man` without compacting: the uploads
    stored after its cursor (at most `limit`, oldest first), interned into parts held in
    memory (pyarrow Tables, listed in a copy of `man`: `part_files` gives them as such).
    Nothing is written anywhere (no temporary file either: a query runs as a user who may
    only read the store) and no lock is taken, so a query never waits on a compaction,
    nor a compaction on it.

    The tail is interned apart from the committed frames and stacks (reading those would
    cost what compaction saves): its ids continue the release's, a frame already committed
    gets a second id with the same name and place, which every query merges by function.
    Upload keys continue `nextUk` in the order compaction will give them.
    """
    from ..formats import read_any

    releases: dict[str, _Release] = {}
    rows: list[dict] = []
    known = {(d["segment"], d["offset"]) for d in man.get("damaged", [])}
    tail = Tail(man)

    def damaged(f: Any) -> None:
        if (f.segment, f.offset) not in known:
            known.add((f.segment, f.offset))
            tail.damaged += 1

    uk = man["nextUk"]
    it = store.iter_uploads(_cursor_in(man), on_damage=damaged)
    try:
        for cur, upload_id, meta, body in it:
            if len(rows) >= limit:
                tail.pending = 1 + store.count_uploads(cur)  # this one, and all after it
                break
            app = _text(meta.get("app")) or ""
            release = _text(meta.get("release")) or ""
            rkey = release_key(app, release)
            rel = releases.get(rkey)
            if rel is None:
                rel = releases[rkey] = _Release(app, release)
            rel.cur_at = _number(meta.get("receivedAt"))
            try:
                rec = read_any(body, f"upload {upload_id}")
            except JsprofError:
                continue  # compaction lists it in `skipped`; no upload key, as there
            rows.append(upload_row(rel, uk, upload_id, rkey, meta, rec))
            uk += 1
    finally:
        it.close()
    if not rows:
        return tail
    new = dict(man)
    new["releases"] = dict(man["releases"])
    new["nextUk"] = uk
    new["uploads"] = [*man["uploads"], *write_upload_parts(None, rows, 0)]
    for rkey, rel in releases.items():
        old = man["releases"].get(rkey)
        fb, sb = (old["frames"], old["stacks"]) if old else (0, 0)
        entry = {
            "app": rel.app, "release": rel.release,
            "frames": fb + len(rel.frame_ids), "stacks": sb + len(rel.stack_parent),
            "parts": {k: list(old["parts"][k]) if old else [] for k in KINDS},
        }
        for kind, entries in write_release_parts(None, rkey, rel, 0, fb, sb).items():
            entry["parts"][kind].extend(entries)
        new["releases"][rkey] = entry
    tail.manifest = new
    tail.uploads = len(rows)
    return tail


# ---- merging small parts ---------------------------------------------------------------------

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
# The same for a prune of the tables ("segments": the raw segments pruned, the tables not
# yet; "written": rewritten parts written, manifest not committed; "committed").
_prune_hook: Any = None


@dataclass
class MergeStats:
    merged: int = 0  # parts merged into others
    written: int = 0  # merged parts written
    bytes: int = 0  # bytes of the merged parts written
    deleted: int = 0  # obsolete files removed (their grace over)


def _level(e: str | dict) -> int:
    return e.get("level", 0) if isinstance(e, dict) else 0


def _raw_bytes(tdir: Path, entry: dict) -> int:
    """Bytes of column data of a part, uncompressed (its footer's row groups; one small
    read, only for parts about to be merged); cached, parts being immutable."""
    import pyarrow.parquet as pq

    key = str(tdir / entry["path"])
    n = _raw_sizes.get(key)
    if n is None:
        md = pq.read_metadata(verify_part(tdir, entry))
        n = sum(md.row_group(i).total_byte_size for i in range(md.num_row_groups))
        if len(_raw_sizes) >= _VERIFIED_MAX:
            _raw_sizes.clear()
        _raw_sizes[key] = n
    return n


_raw_sizes: dict[str, int] = {}


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
        by_level.setdefault(_level(entries[i]), []).append(i)
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
            except (OSError, pa.ArrowException) as err:
                msg = (str(err).splitlines() or ["unreadable"])[0][:200]
                raise CompactError(
                    f"{src}: table part does not read ({msg}); remove {tdir} to rebuild the "
                    "tables from the raw uploads"
                ) from None
        flush()
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
        "level": max(_level(e) for e in entries) + 1,
    }
    if "rkey" in entries[0]:
        out["rkey"] = entries[0]["rkey"]
    return out


def _part_no(entry: str | dict) -> int:
    """The number of the run that wrote a part (`part-NNNNNN[-k].parquet`)."""
    m = _PART_NO.match(Path(part_path(entry)).name)
    return int(m.group(1)) if m else -1


# At least six digits: a collector past a million runs (~2 months of 5 s runs) has seven.
_PART_NO = re.compile(r"part-(\d+)")


def _listed(man: dict) -> set[str]:
    out = {part_path(e) for e in man["uploads"]}
    for r in man["releases"].values():
        for entries in r["parts"].values():
            out.update(part_path(e) for e in entries)
    out.update(o["path"] for o in man.get("obsolete", []))
    return out


_swept: set[str] = set()


def _sweep(tdir: Path, man: dict) -> None:
    """Remove what a killed compaction, merge or prune left (files no manifest lists):
    once per process, under the lock (nothing else writes tables/ then)."""
    if str(tdir) in _swept:
        return
    _swept.add(str(tdir))
    listed = _listed(man)
    for d, _, files in os.walk(tdir):
        for name in files:
            if not name.endswith((".parquet", ".parquet.tmp")):
                continue
            full = Path(d) / name
            if str(full.relative_to(tdir)) not in listed:
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
        man = _locked_manifest(tdir)
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
            new = any(_part_no(e) >= seen for e in entries)
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
            _fsync_write(tdir / MANIFEST, orjson.dumps(man))
        if not gone and not due:
            return stats
        if gone:
            for d in sorted(dirs, key=lambda d: -len(d.parts)):
                fsync_dir(d)
            man["nextPart"] = man["mergeSeen"] = part + 1
            obsolete.extend({"path": g, "at": now} for g in gone)
            if _merge_hook:
                _merge_hook("written")
            _fsync_write(tdir / MANIFEST, orjson.dumps(man))
            if _merge_hook:
                _merge_hook("committed")
            _merged_release_cache(tdir, man, merged_rel)
        if due:
            stats.deleted += _unlink_parts(tdir, due)
            if _merge_hook:
                _merge_hook("deleted")
            gone_now = {o["path"] for o in due}
            man["obsolete"] = [o for o in man["obsolete"] if o["path"] not in gone_now]
            _fsync_write(tdir / MANIFEST, orjson.dumps(man))
    return stats


def _unlink_parts(tdir: Path, entries: list[dict]) -> int:
    """Remove the files of these `obsolete` entries (gone already is fine)."""
    for o in entries:
        try:
            (tdir / o["path"]).unlink()
        except FileNotFoundError:
            pass
    return len(entries)


def _merged_release_cache(tdir: Path, man: dict, merged: dict[str, set[str]]) -> None:
    """A release kept in memory (`_cache`) was built from parts now merged: it holds the
    same rows, so it now stands for the merged parts (else the next run would rebuild it
    from every part); dropped when it had not read all of them. Only the merged kinds'
    lists are replaced: the other's may hold parts another process committed since this
    one read it (a `jsprof fleet --store` beside the collector), which the next run reads
    as its list's new tail; marking them read would hand out their ids again."""
    for rkey, kinds in merged.items():
        rel = _cache.get((str(tdir), rkey))
        if rel is None:
            continue
        entry = man["releases"][rkey]
        n = {"frames": rel.n_frames_committed, "stacks": rel.n_stacks_committed}
        have = {"frames": entry["frames"], "stacks": entry["stacks"]}
        if any(n[k] != have[k] for k in kinds):
            _cache.pop((str(tdir), rkey), None)
            continue
        if "frames" in kinds:
            rel.loaded_frames = list(entry["parts"]["frames"])
        if "stacks" in kinds:
            rel.loaded_stacks = list(entry["parts"]["stacks"])


# ---- pruning ---------------------------------------------------------------------------------


def prune_tables(
    store_path: str | os.PathLike, older_than: float, app: str | None = None,
    places: dict[str, dict[int, int] | None] | None = None, locked: bool = False,
    now: float | None = None, grace: float = GRACE_S,
) -> int:
    """Remove from the tables the uploads received before `older_than` (epoch ms), only
    `app`'s if given: what `Store.prune` does to the raw uploads. Returns uploads removed.

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
        man = _locked_manifest(tdir)
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
            ne = _entry(
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
            if _level(e):  # in place of a merged part: levels never rise along a list
                ne["level"] = _level(e)
            return ne

        sch = schemas()
        uploads = []
        for e in man["uploads"]:
            ranged = isinstance(e, dict) and e.get("minAt") is not None
            rk = e.get("rkey") if isinstance(e, dict) else None
            if ranged and (e["minAt"] >= older_than or (app is not None and apps.get(rk) != app)):
                uploads.append(e)
                continue
            t = _read(pq, verify_part(tdir, e), tdir)
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
        for rkey, uks in dropped.items():
            entry = man["releases"].get(rkey)
            if entry is None:
                continue
            keys = np.fromiter(uks, np.int64)
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
                    t = _read(pq, verify_part(tdir, e), tdir)
                    hit = np.isin(t["uk"].to_numpy(), keys)
                    if not hit.any():
                        kept.append(e)
                        continue
                    garbage.append(part_path(e))
                    if not hit.all():
                        kept.append(rewrite(e, t, ~hit, sch[kind]))
                entry["parts"][kind] = kept
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
        _fsync_write(tdir / MANIFEST, orjson.dumps(man))
        fsync_dir(tdir)
        if _prune_hook:
            _prune_hook("committed")
        _unlink_parts(tdir, due)  # a kill before: unlisted files, which a sweep removes
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


# ---- the collector's own compaction loop --------------------------------------------------


class Compactor:
    """Compaction as a background loop on its own thread, for a long-lived collector.

    Queries then never compact on the threads that serve requests (ingest's pool): they
    read the committed tables, or first `wait_current()`, which blocks the asking thread
    only until a run that started after the call has committed (so the query still sees
    every upload acknowledged before it asked) while the work runs here. Runs are
    serialised with every other compactor by the tables' lock; errors are logged once per
    message and the loop goes on.
    """

    def __init__(self, store: UploadSource, interval: float = 2.0) -> None:
        import threading

        self.store = store
        self.interval = interval
        self._cond = threading.Condition()
        self._started = 0  # runs started
        self._done = 0  # runs finished (committed or failed)
        self._kicked = False
        self._stop = False
        self._errors: set[str] = set()
        self._thread = threading.Thread(target=self._loop, name="jsprof-compactor", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def kick(self) -> None:
        """Run soon (e.g. after new uploads), without waiting for the interval."""
        with self._cond:
            self._kicked = True
            self._cond.notify_all()

    def wait_current(self, timeout: float | None = None) -> bool:
        """Block until a run that starts after this call has finished; False on timeout."""
        with self._cond:
            target = self._started + 1
            self._kicked = True
            self._cond.notify_all()
            return self._cond.wait_for(lambda: self._done >= target or self._stop, timeout)

    def stop(self, timeout: float = 30.0) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _loop(self) -> None:
        import logging

        log = logging.getLogger("jsprof.store")
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._kicked or self._stop, self.interval)
                if self._stop:
                    self._cond.notify_all()
                    return
                self._kicked = False
                self._started += 1
            try:
                compact(self.store)
                merge_parts(self.store.path)
            except Exception as e:  # noqa: BLE001 - the loop must outlive one bad run
                msg = str(e)
                if msg not in self._errors:
                    self._errors.add(msg)
                    log.error("store: compaction failed: %s", msg)
            finally:
                with self._cond:
                    self._done += 1
                    self._cond.notify_all()
