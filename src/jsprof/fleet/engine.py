"""The query plan, run by an engine: DuckDB in process (default) or Dask on a cluster.

Both run the same three steps over the store's Parquet tables and hand back the same
small, sorted numpy columns; everything after that (trees, symbolication, quantiles) is
one shared piece of client code, so the engines give identical results. Weights are
integer nanoseconds, so the sums do not depend on the order an engine adds them in.

  1. uploads  : the uploads table filtered (app, release, route glob, env, time, meta)
  2. stacks   : weights of those uploads, summed per (release, stack, marker)
  3. per trace: either upload_frames rows (frames present, self ns) for `top`, or the
                uploads' own (stack, marker, weight) rows for `diff`'s resampling
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UsageError
from .filters import Filters, glob_regex, meta_matches, where_number

UPLOAD_COLS = ("uk", "id", "rkey", "release", "received_at", "samples", "total_ms", "lost_ms",
               "sample_interval", "page_load")


@dataclass
class Uploads:
    uk: np.ndarray
    id: list[str]
    rkey: list[str]
    release: list[str]
    received_at: np.ndarray
    samples: np.ndarray
    total_ms: np.ndarray
    lost_ms: np.ndarray  # per upload: gap time beyond the weight cap (`trace.gap_cap`)
    sample_interval: np.ndarray  # per upload: the interval its client declared (NaN: none)
    page_load: list[str | None]  # per upload: the client's page-load id (None: its own)

    def __post_init__(self) -> None:
        # Releases as small ints: the engines hand back `ri`, not strings, per row.
        self.rkeys = sorted(set(self.rkey))
        pos = {k: i for i, k in enumerate(self.rkeys)}
        self.ri = np.asarray([pos[k] for k in self.rkey], np.int64)

    def __len__(self) -> int:
        return len(self.uk)

    def page_loads(self) -> int:
        """Page loads: distinct page-load ids, and one per upload without an id."""
        ids = {p for p in self.page_load if p is not None}
        return len(ids) + sum(1 for p in self.page_load if p is None)

    def subset(self, keep: np.ndarray) -> Uploads:
        idx = np.nonzero(keep)[0].tolist()
        return Uploads(
            self.uk[keep], [self.id[i] for i in idx], [self.rkey[i] for i in idx],
            [self.release[i] for i in idx], self.received_at[keep], self.samples[keep],
            self.total_ms[keep], self.lost_ms[keep], self.sample_interval[keep],
            [self.page_load[i] for i in idx],
        )


@dataclass
class StackRows:
    """(release index, stack_id, marker) -> samples, weight_ns; per trace when `uk` is set."""

    ri: np.ndarray
    stack_id: np.ndarray
    marker: np.ndarray
    samples: np.ndarray
    weight_ns: np.ndarray
    uk: np.ndarray | None = None


@dataclass
class Want:
    """(release index, stored frame id) pairs a query needs per-trace rows for."""

    ri: np.ndarray
    frame_id: np.ndarray


@dataclass
class FrameRows:
    uk: np.ndarray
    ri: np.ndarray
    frame_id: np.ndarray
    marker: np.ndarray
    self_ns: np.ndarray


class Snapshot:
    """The committed tables a query reads: the manifest read once."""

    def __init__(self, store_path: str | os.PathLike, manifest: dict,
                 live: Callable[[str], bool] | None = None,
                 pruned: dict[str, float] | None = None) -> None:
        from ..store.compact import tables_dir

        self.tdir = tables_dir(store_path)
        self.manifest = manifest
        # What a prune removed may still have rows in the tables (parts not yet rewritten):
        # a query never counts it. `pruned`: the store's retention marks (app or "*" ->
        # receivedAt before which uploads are gone; `Store.pruned_before`, read after the
        # manifest); `live`: whether the store holds an id, asked only of rows without a
        # receivedAt. None: no filter.
        self.live = live
        self.pruned = pruned or {}
        # Damaged raw records (body or header failing its checksum) that no query can
        # count: those compaction listed in the manifest, plus those met in the tail.
        self.damaged = len(manifest.get("damaged", []))
        # Uploads stored but neither compacted nor read as the tail (over its cap).
        self.pending = 0

    def alive(self, ids: list[str], apps: list[str], received_at: np.ndarray) -> np.ndarray:
        """Per upload row: not pruned."""
        keep = np.ones(len(ids), bool)
        if not self.pruned and self.live is None:
            return keep
        every = self.pruned.get("*", -np.inf)
        for i, (app, at) in enumerate(zip(apps, received_at.tolist(), strict=True)):
            if at == at:  # a time: the marks say
                keep[i] = at >= max(every, self.pruned.get(app, -np.inf))
            elif self.live is not None:
                keep[i] = self.live(ids[i])
        return keep

    def keep_live(self, up: Uploads, app: str) -> Uploads:
        """`up` (all of `app`) without what was pruned and, for an id stored again after a
        prune, only its latest row."""
        if not len(up):
            return up
        keep = self.alive(up.id, [app] * len(up), up.received_at)
        last: dict[str, int] = {}
        for i, uid in enumerate(up.id):
            last[uid] = i
        if len(last) < len(up):
            latest = np.zeros(len(up), bool)
            latest[list(last.values())] = True
            keep &= latest
        if keep.all():
            return up
        return up.subset(keep)

    def files(
        self, kind: str, rkeys: list[str] | None = None,
        since: float | None = None, until: float | None = None,
    ) -> list[str]:
        """The parts of `kind` to read, checked against their manifest checksums; parts
        of other releases or wholly outside [since, until) are skipped unopened."""
        from ..store.compact import part_files

        return part_files(self.tdir, self.manifest, kind, rkeys, since, until)

    def upload_files(self, f: Filters) -> list[str]:
        from ..store.compact import release_key

        rkeys = None if f.release is None else [release_key(f.app, f.release)]
        return self.files("uploads", rkeys, f.since, f.until)

    def row_files(self, kind: str, up: Uploads) -> list[str]:
        """Per-upload parts (weights, upload_frames) that can hold rows of `up`."""
        t = up.received_at[np.isfinite(up.received_at)] if len(up.received_at) else None
        if t is None or not len(t):
            return self.files(kind, up.rkeys)
        return self.files(kind, up.rkeys, float(t.min()), float(t.max()) + 1.0)


def _uploads_sql(f: Filters) -> tuple[str, list[Any]]:
    where = ["app = ?"]
    params: list[Any] = [f.app]
    if f.release is not None:
        where.append("release = ?")
        params.append(f.release)
    if f.route is not None:
        where.append("regexp_full_match(coalesce(route, ''), ?, 's')")
        params.append(glob_regex(f.route))
    if f.env is not None:
        where.append("env = ?")
        params.append(f.env)
    if f.since is not None:
        where.append("received_at >= ?")
        params.append(f.since)
    if f.until is not None:
        where.append("received_at < ?")
        params.append(f.until)
    for key, value in f.where:
        # `filters.meta_matches`, in SQL: strings and true/false by text, null by the word,
        # numbers as float64 (never by their text: DuckDB and Python spell 1.5e300 apart).
        path = _json_path(key)
        where.append(
            "coalesce(CASE json_type(meta, ?) "
            "WHEN 'VARCHAR' THEN json_extract_string(meta, ?) = ? "
            "WHEN 'BOOLEAN' THEN json_extract_string(meta, ?) = ? "
            "WHEN 'NULL' THEN ? = 'null' "
            "WHEN 'BIGINT' THEN TRY_CAST(json_extract_string(meta, ?) AS DOUBLE) = ? "
            "WHEN 'UBIGINT' THEN TRY_CAST(json_extract_string(meta, ?) AS DOUBLE) = ? "
            "WHEN 'DOUBLE' THEN TRY_CAST(json_extract_string(meta, ?) AS DOUBLE) = ? "
            "ELSE false END, false)"
        )
        num = where_number(value)
        params.extend([path, path, value, path, value, value, path, num, path, num, path, num])
    return " AND ".join(where), params


def _json_path(key: str) -> str:
    return "$." + json.dumps(key)


def _pandas_filter(df: Any, f: Filters) -> Any:
    """The same predicate as _uploads_sql, on a pandas frame (one Dask partition)."""
    import orjson

    m = df["app"] == f.app
    if f.release is not None:
        m &= df["release"] == f.release
    if f.route is not None:
        m &= df["route"].fillna("").str.fullmatch(glob_regex(f.route), flags=16)  # re.DOTALL
    if f.env is not None:
        m &= df["env"] == f.env
    if f.since is not None:
        m &= df["received_at"] >= f.since
    if f.until is not None:
        m &= df["received_at"] < f.until
    for key, value in f.where:
        num = where_number(value)
        got = df["meta"].map(
            lambda s, k=key, v=value, n=num: meta_matches(orjson.loads(s), k, v, n))
        m &= got.astype(bool)
    return df[m.fillna(False).astype(bool)]


def _np(col: Any, dtype: Any) -> np.ndarray:
    return np.asarray(col, dtype=dtype)


def _arrow_cols(t: Any) -> dict[str, np.ndarray]:
    return {name: t.column(name).to_numpy() for name in t.column_names}


class DuckEngine:
    name = "duckdb"

    def __init__(self, threads: int | None = None) -> None:
        import duckdb

        self.con = duckdb.connect(":memory:")
        if threads:
            self.con.execute(f"SET threads = {int(threads)}")

    def close(self) -> None:
        self.con.close()

    def uploads(self, snap: Snapshot, f: Filters) -> Uploads:
        files = snap.upload_files(f)
        if not files:
            return _no_uploads()
        cond, params = _uploads_sql(f)
        t = self.con.sql(
            f"SELECT {', '.join(UPLOAD_COLS)} FROM read_parquet(?) WHERE {cond} ORDER BY uk",
            params=[files, *params],
        ).to_arrow_table()
        return snap.keep_live(_uploads_from(t.to_pydict()), f.app)

    def _register_u(self, up: Uploads) -> None:
        import pyarrow as pa

        self.con.register("u", pa.table({"uk": up.uk, "ri": up.ri}))

    def stacks(self, snap: Snapshot, up: Uploads, per_trace: bool = False) -> StackRows:
        files = snap.row_files("weights", up)
        if not files:
            return _empty_stacks(per_trace)
        self._register_u(up)
        if per_trace:
            sql = (
                "SELECT u.ri, w.stack_id, w.marker, w.samples, w.weight_ns, w.uk "
                "FROM read_parquet(?) w JOIN u USING (uk) "
                "ORDER BY w.uk, w.stack_id, w.marker"
            )
        else:
            sql = (
                "SELECT u.ri, w.stack_id, w.marker, sum(w.samples)::BIGINT AS samples, "
                "sum(w.weight_ns)::BIGINT AS weight_ns "
                "FROM read_parquet(?) w JOIN u USING (uk) GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
            )
        t = _arrow_cols(self.con.sql(sql, params=[files]).to_arrow_table())
        self.con.unregister("u")
        return _stacks_from(t, per_trace)

    def frames(self, snap: Snapshot, up: Uploads, want: Want | None = None) -> FrameRows:
        """Per-trace frame rows of the matching uploads: all, or only `want`'s frames
        (plus the idle rows)."""
        import pyarrow as pa

        files = snap.row_files("upload_frames", up)
        if not files:
            return _empty_frames()
        self._register_u(up)
        where = ""
        if want is not None:
            self.con.register("want", pa.table({"ri": want.ri, "frame_id": want.frame_id}))
            where = ("WHERE f.frame_id < 0 OR (u.ri, f.frame_id) IN "
                     "(SELECT (ri, frame_id) FROM want)")
        t = _arrow_cols(self.con.sql(
            "SELECT f.uk, u.ri, f.frame_id, f.marker, f.self_ns "
            # No ORDER BY: the client groups these rows by value and sums integers, so
            # their order cannot change a result.
            f"FROM read_parquet(?) f JOIN u USING (uk) {where}",
            params=[files],
        ).to_arrow_table())
        self.con.unregister("u")
        if want is not None:
            self.con.unregister("want")
        return _frames_from(t)


class DaskEngine:
    """The same plan as dask dataframe steps on a distributed cluster."""

    name = "dask"

    def __init__(self, scheduler: str | None = None, local_workers: int | None = None,
                 client: Any = None) -> None:
        from distributed import Client, LocalCluster

        self._own: list[Any] = []
        if client is not None:
            self.client = client
        elif scheduler:
            try:
                self.client = Client(scheduler, timeout="10s")
            except OSError as e:
                raise UsageError(
                    f"--scheduler {scheduler}: cannot reach the Dask scheduler ({e}); check "
                    "the address, or use --local-workers N"
                ) from None
            except Exception as e:  # noqa: BLE001 - whatever a peer that is no scheduler sends
                # Something answered, but not as a Dask scheduler does (a web server's port:
                # Dask reads its bytes as a frame length and fails allocating exabytes).
                raise UsageError(
                    f"--scheduler {scheduler}: what answered there is not a Dask scheduler "
                    f"({type(e).__name__}); check the address, or use --local-workers N"
                ) from None
            self._own.append(self.client)
        else:
            cluster = LocalCluster(
                n_workers=local_workers or 1, threads_per_worker=1, processes=True,
                dashboard_address="127.0.0.1:0", host="127.0.0.1",
            )
            self.client = Client(cluster)
            self._own += [self.client, cluster]

    def close(self) -> None:
        for o in self._own:
            o.close()

    def _read(self, files: list[str], columns: list[str]) -> Any:
        import dask.dataframe as dd

        return dd.read_parquet(files, columns=columns)

    def uploads(self, snap: Snapshot, f: Filters) -> Uploads:
        files = snap.upload_files(f)
        if not files:
            return _no_uploads()
        cols = sorted(set(UPLOAD_COLS) | {"app", "route", "env", "meta"})
        df = self._read(files, cols)
        out = df.map_partitions(_pandas_filter, f, meta=df._meta)[list(UPLOAD_COLS)]
        pdf = self.client.compute(out).result().sort_values("uk", kind="stable")
        return snap.keep_live(_uploads_from({c: pdf[c].tolist() for c in UPLOAD_COLS}), f.app)

    def stacks(self, snap: Snapshot, up: Uploads, per_trace: bool = False) -> StackRows:
        import pandas as pd

        files = snap.row_files("weights", up)
        if not files:
            return _empty_stacks(per_trace)
        u = pd.DataFrame({"uk": up.uk, "ri": up.ri})
        w = self._read(files, ["uk", "stack_id", "marker", "samples", "weight_ns"])
        j = _join_uploads(w, u)
        if per_trace:
            pdf = self.client.compute(j).result()
            pdf = pdf.sort_values(["uk", "stack_id", "marker"], kind="stable")
            cols = ["ri", "stack_id", "marker", "samples", "weight_ns", "uk"]
        else:
            g = j.groupby(["ri", "stack_id", "marker"])[["samples", "weight_ns"]].sum()
            pdf = self.client.compute(g).result().reset_index()
            pdf = pdf.sort_values(["ri", "stack_id", "marker"], kind="stable")
            cols = ["ri", "stack_id", "marker", "samples", "weight_ns"]
        return _stacks_from({c: pdf[c].to_numpy() for c in cols}, per_trace)

    def frames(self, snap: Snapshot, up: Uploads, want: Want | None = None) -> FrameRows:
        import pandas as pd

        files = snap.row_files("upload_frames", up)
        if not files:
            return _empty_frames()
        u = pd.DataFrame({"uk": up.uk, "ri": up.ri})
        fr = _join_uploads(self._read(files, ["uk", "frame_id", "marker", "self_ns"]), u)
        if want is not None:
            keys = want.ri * (1 << 32) + want.frame_id

            def pick(part: Any, keys: np.ndarray = keys) -> Any:
                k = part["ri"].to_numpy() * (1 << 32) + part["frame_id"].to_numpy()
                return part[(part["frame_id"].to_numpy() < 0) | np.isin(k, keys)]

            fr = fr.map_partitions(pick, meta=fr._meta)
        pdf = self.client.compute(fr).result()
        return _frames_from({c: pdf[c].to_numpy()
                             for c in ("uk", "ri", "frame_id", "marker", "self_ns")})


def _join_uploads(df: Any, u: Any) -> Any:
    """The inner join with the (small) matching uploads, partition by partition: the
    uploads table is broadcast, the big side never shuffled."""
    meta = df._meta.merge(u.iloc[:0], on="uk", how="inner")
    return df.map_partitions(lambda part, u=u: part.merge(u, on="uk", how="inner"), meta=meta)


def _uploads_from(t: dict) -> Uploads:
    return Uploads(
        uk=_np(t["uk"], np.int64), id=list(t["id"]), rkey=list(t["rkey"]),
        release=list(t["release"]),
        received_at=np.asarray([np.nan if v is None else v for v in t["received_at"]],
                               np.float64),
        samples=_np(t["samples"], np.int64), total_ms=_np(t["total_ms"], np.float64),
        lost_ms=_np(t["lost_ms"], np.float64),
        sample_interval=np.asarray(
            [np.nan if v is None else v for v in t["sample_interval"]], np.float64),
        page_load=[v if isinstance(v, str) else None for v in t["page_load"]],  # NaN: None
    )


def _no_uploads() -> Uploads:
    z = np.zeros(0)
    return Uploads(np.zeros(0, np.int64), [], [], [], z, np.zeros(0, np.int64), z, z, z, [])


def _stacks_from(t: dict, per_trace: bool) -> StackRows:
    return StackRows(
        ri=_np(t["ri"], np.int64), stack_id=_np(t["stack_id"], np.int64),
        marker=_np(t["marker"], np.int64), samples=_np(t["samples"], np.int64),
        weight_ns=_np(t["weight_ns"], np.int64),
        uk=_np(t["uk"], np.int64) if per_trace else None,
    )


def _frames_from(t: dict) -> FrameRows:
    return FrameRows(
        uk=_np(t["uk"], np.int64), ri=_np(t["ri"], np.int64),
        frame_id=_np(t["frame_id"], np.int64),
        marker=_np(t["marker"], np.int64), self_ns=_np(t["self_ns"], np.int64),
    )


def _empty_stacks(per_trace: bool) -> StackRows:
    z = np.zeros(0, np.int64)
    return StackRows(z, z, z, z, z, z if per_trace else None)


def _empty_frames() -> FrameRows:
    z = np.zeros(0, np.int64)
    return FrameRows(z, z, z, z, z)


def open_engine(name: str, scheduler: str | None = None, local_workers: int | None = None
                ) -> DuckEngine | DaskEngine:
    if name == "duckdb":
        if scheduler or local_workers:
            raise UsageError("--scheduler and --local-workers go with --engine dask")
        return DuckEngine()
    if name == "dask":
        return DaskEngine(scheduler, local_workers)
    raise UsageError(f"--engine {name!r}: choose duckdb or dask")


def snapshot_path(p: str | os.PathLike) -> Path:
    return Path(p)
