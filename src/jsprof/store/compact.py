"""The compactor: raw uploads -> Parquet tables that queries scan without re-parsing JSON.

Layout under `<store>/tables/` (documented in docs/store.md):

    _manifest.json                 what is committed: cursor, part files, per-release sizes
    _compact.lock                  flock: one compactor at a time
    uploads/part-NNNNNN.parquet    one row per upload
    frames/rkey=K/part-NNNNNN.parquet         a release's frames, interned across its uploads
    stacks/rkey=K/part-NNNNNN.parquet         a release's stacks (parent-pointer tree)
    weights/rkey=K/part-NNNNNN.parquet        per upload: (stack, marker, samples, weight_ns)
    upload_frames/rkey=K/part-NNNNNN.parquet  per upload: frames present, their self time

K is a short hash of (app, release). Part files are immutable once listed in the manifest;
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

import fcntl
import hashlib
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import orjson

from ..errors import JsprofError
from ..trace import NONE, weights_and_lost

TABLES = "tables"
MANIFEST = "_manifest.json"
LOCK = "_compact.lock"
FORMAT_VERSION = 2  # 2: uploads.lost_ms
BATCH = 2000  # uploads per committed batch: bounds memory and lost work on a crash
NS_PER_MS = 1_000_000

KINDS = ("frames", "stacks", "weights", "upload_frames")


class UploadSource(Protocol):
    """What the compactor needs of `jsprof.store.Store`."""

    @property
    def path(self) -> Any: ...

    def iter_uploads(self, after: Any = None) -> Iterator[tuple[Any, str, dict, bytes]]: ...


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
    }


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
    if doc.get("formatVersion") != FORMAT_VERSION:
        raise CompactError(
            f"{p}: tables of format {doc.get('formatVersion')!r}, this jsprof "
            f"reads {FORMAT_VERSION}; remove {p.parent} to rebuild them"
        )
    return doc


def _fsync_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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


def _load_release(tdir: Path, rkey: str, entry: dict) -> _Release:
    import pyarrow.parquet as pq

    rel = _Release(entry["app"], entry["release"])
    for part in entry["parts"]["frames"]:
        t = pq.read_table(tdir / part).to_pydict()
        for fid, n, r, ln, c in zip(
            t["frame_id"], t["name"], t["resource"], t["line"], t["column"], strict=True
        ):
            rel.frame_ids[(n, r, ln, c)] = fid
    for part in entry["parts"]["stacks"]:
        t = pq.read_table(tdir / part).to_pydict()
        for sid, p, f in zip(t["stack_id"], t["parent_id"], t["frame_id"], strict=True):
            assert sid == len(rel.stack_parent), "stack parts must be contiguous"
            rel.stack_ids[(p, f)] = sid
            rel.stack_parent.append(p)
            rel.stack_frame.append(f)
    rel.n_frames_committed = len(rel.frame_ids)
    rel.n_stacks_committed = len(rel.stack_parent)
    return rel


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


def add_upload(rel: _Release, uk: int, rec: Any, meta: dict) -> tuple[int, float]:
    """Intern one upload's tracks into `rel`; queue its weights and frame rows.

    Returns (samples, total ms, lost ms: gaps beyond the weight cap, `trace.gap_cap`).
    """
    meta_interval = _number(meta.get("sampleInterval"))
    keys, samples, wns = [], [], []
    lost_ms = 0.0
    for track in rec.tracks:
        tr = track.trace
        if tr.num_samples == 0:
            continue
        interval = meta_interval if meta_interval and meta_interval > 0 else track.sample_interval
        w, lost = weights_and_lost(tr, interval)
        lost_ms += lost
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
    if not keys:
        return 0, 0.0, 0.0
    k, n, ns = _segment_sums(np.concatenate(keys), np.concatenate(samples), np.concatenate(wns))
    stack = k // 16 - 1
    marker = k % 16 - 1
    rel.weights.append(
        {"uk": uk, "stack_id": stack, "marker": marker, "samples": n, "weight_ns": ns}
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


def _write_parquet(path: Path, columns: dict[str, Any], schema: Any) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.table(columns, schema=schema)
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(table, tmp, compression="zstd")
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)


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
    }


def _concat_rows(rows: list[dict], cols: Iterable[str]) -> dict[str, np.ndarray]:
    out = {}
    for c in cols:
        parts = [np.broadcast_to(np.asarray(r[c]), np.shape(r["marker"])) for r in rows]
        out[c] = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    return out


def write_release_parts(tdir: Path, rkey: str, rel: _Release, part: int) -> dict[str, str]:
    """Write this batch's new rows of one release; returns kind -> relative path."""
    sch = schemas()
    name = f"part-{part:06d}.parquet"
    written = {}
    if rel.new_frames:
        n0 = rel.n_frames_committed
        cols = list(zip(*rel.new_frames, strict=True))
        _write_parquet(
            tdir / "frames" / f"rkey={rkey}" / name,
            {
                "frame_id": np.arange(n0, n0 + len(rel.new_frames), dtype=np.int64),
                "name": list(cols[0]),
                "resource": list(cols[1]),
                "line": list(cols[2]),
                "column": list(cols[3]),
            },
            sch["frames"],
        )
        written["frames"] = f"frames/rkey={rkey}/{name}"
    if len(rel.stack_parent) > rel.n_stacks_committed:
        s0 = rel.n_stacks_committed
        _write_parquet(
            tdir / "stacks" / f"rkey={rkey}" / name,
            {
                "stack_id": np.arange(s0, len(rel.stack_parent), dtype=np.int64),
                "parent_id": np.asarray(rel.stack_parent[s0:], np.int64),
                "frame_id": np.asarray(rel.stack_frame[s0:], np.int64),
            },
            sch["stacks"],
        )
        written["stacks"] = f"stacks/rkey={rkey}/{name}"
    for kind, rows in (("weights", rel.weights), ("upload_frames", rel.upload_frames)):
        if not rows:
            continue
        cols = [f.name for f in sch[kind]]
        data = _concat_rows(rows, cols)
        data["marker"] = data["marker"].astype(np.int8)
        _write_parquet(tdir / kind / f"rkey={rkey}" / name, data, sch[kind])
        written[kind] = f"{kind}/rkey={rkey}/{name}"
    return written


# ---- the compaction run ----------------------------------------------------------------------


@dataclass
class CompactStats:
    uploads: int = 0
    samples: int = 0
    skipped: int = 0
    batches: int = 0


class _Lock:
    """An exclusive flock on `<tables>/_compact.lock`, held for one compaction run."""

    def __init__(self, tdir: Path) -> None:
        tdir.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(tdir / LOCK, os.O_RDWR | os.O_CREAT, 0o644)

    def __enter__(self) -> _Lock:
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


def _cursor_in(man: dict) -> Any:
    """The store's cursor from the manifest (`Cursor.dumps` text, or a plain JSON value)."""
    if not man["hasCursor"]:
        return None
    if man.get("cursorKind") == "Cursor":
        from .store import Cursor

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
    with _Lock(tdir):
        man = read_manifest(store.path)
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
                for kind, path in write_release_parts(tdir, rkey, rel, part).items():
                    entry["parts"][kind].append(path)
                entry["frames"] = len(rel.frame_ids)
                entry["stacks"] = len(rel.stack_parent)
                rel.n_frames_committed = len(rel.frame_ids)
                rel.n_stacks_committed = len(rel.stack_parent)
                rel.new_frames.clear()
                rel.weights.clear()
                rel.upload_frames.clear()
            if pending:
                sch = schemas()["uploads"]
                cols = {f.name: [r[f.name] for r in pending] for f in sch}
                path = f"uploads/part-{part:06d}.parquet"
                _write_parquet(tdir / path, cols, sch)
                man["uploads"].append(path)
            for sub in ("uploads", *KINDS):
                if (tdir / sub).is_dir():
                    _fsync_dir(tdir / sub)
            man["nextPart"] = part + 1
            _cursor_out(man, last_cursor)
            _fsync_write(tdir / MANIFEST, orjson.dumps(man))
            stats.batches += 1
            pending = []
            have_new = False

        for cur, upload_id, meta, body in store.iter_uploads(cursor):
            last_cursor = cur
            have_new = True
            app = _text(meta.get("app")) or ""
            release = _text(meta.get("release")) or ""
            rkey = release_key(app, release)
            rel = releases.get(rkey)
            if rel is None:
                entry = man["releases"].get(rkey)
                rel = releases[rkey] = (
                    _load_release(tdir, rkey, entry) if entry else _Release(app, release)
                )
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
            n, total_ms, lost_ms = add_upload(rel, uk, rec, meta)
            pending.append(
                {
                    "uk": uk,
                    "id": upload_id,
                    "app": app,
                    "release": release,
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
                }
            )
            stats.uploads += 1
            stats.samples += n
            if progress is not None:
                progress(stats)
            if len(pending) >= batch:
                commit()
        commit()
    return stats
