"""Rollups made anew from the per-upload tables (no raw segment needed, which raw
retention may have deleted): a day a prune cut in two (`prune.py`), and tables of format 6
(rollup_frames without the identity rule's groups), 7, 8 and 9 (without the moments, the
vitals or the per-load sums), 5 or 4 (no rollups) at the first
compaction that reads them (`compact.py`). The same
`rollup_columns` as the compactor's batches, so the rows are the same sums."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson

from ..durable import fsync_dir
from .manifest import part_path, write_manifest
from .parts import new_part, read_part, schemas, verify_part
from .perload import batch_rows as perload_rows
from .perload import frame_hashes, upload_keys
from .rollup import (
    CELL_COLS,
    ROLLUP_KINDS,
    aggregate,
    frame_groups,
    load_hash,
    rollup_columns,
    upload_moments,
)
from .timeroll import TIME_KINDS, time_rows
from .vitals import batch_rows, counts_left_out


def rebuild_rollups(tdir: Path, man: dict, rkey: str, day: str | None, part: int
                    ) -> dict[str, list]:
    """The rollup parts of one release and day from its per-upload tables as `man` lists
    them, written under `part` (`part-NNNNNN-r.parquet`); kind -> manifest entries."""
    import pyarrow.parquet as pq

    entry = man["releases"][rkey]
    cols: dict[str, list] = {k: [] for k in (*CELL_COLS, "id", "received_at", "meta")}
    for e in man["uploads"]:
        if isinstance(e, dict) and e.get("rkey") == rkey and e.get("day") == day:
            t = read_part(pq, verify_part(tdir, e), tdir, list(cols)).to_pydict()
            for k in cols:
                cols[k].extend(t[k])
    if not cols["uk"]:
        return {}
    sch = schemas()
    rows: dict[str, dict] = {}
    for kind in ("weights", "upload_frames"):
        got: dict[str, list] = {f.name: [] for f in sch[kind]}
        for e in entry["parts"][kind]:
            if isinstance(e, dict) and e.get("day") == day:
                t = read_part(pq, verify_part(tdir, e), tdir)
                for k in got:
                    got[k].append(t[k].to_numpy())
        rows[kind] = {k: np.concatenate(v) if v else np.zeros(0, np.int64)
                      for k, v in got.items()}
    frames: list[tuple] = []
    for e in entry["parts"]["frames"]:  # in id order, as the compactor numbered them
        t = read_part(pq, verify_part(tdir, e), tdir).to_pydict()
        frames += zip(t["name"], t["resource"], t["line"], t["column"], strict=True)
    par, sfr = [], []
    for e in entry["parts"]["stacks"]:  # in id order
        t = read_part(pq, verify_part(tdir, e), tdir, ["parent_id", "frame_id"])
        par.append(t["parent_id"].to_numpy())
        sfr.append(t["frame_id"].to_numpy())
    parent = np.concatenate(par) if par else np.zeros(0, np.int64)
    sframe = np.concatenate(sfr) if sfr else np.zeros(0, np.int64)
    w = rows["weights"]
    # per upload, so a block of rows holds its uploads whole: ~1 M rows at a time
    order = np.argsort(w["uk"], kind="stable")
    w = {k: np.asarray(v)[order] for k, v in w.items()}
    cuts = np.nonzero(np.diff(w["uk"]))[0] + 1 if len(w["uk"]) else np.zeros(0, np.int64)
    bounds = [0, *[int(c) for c in cuts[np.diff(cuts // (1 << 20), prepend=0) > 0]],
              len(w["uk"])]
    groups = frame_groups(frames)  # rollup_moments' keys too (by place: format 12)
    got = [upload_moments(w["uk"][a:b], w["stack_id"][a:b], w["marker"][a:b],
                          w["weight_ns"][a:b], parent, sframe, groups)
           for a, b in zip(bounds[:-1], bounds[1:], strict=True) if b > a]
    moments = {k: np.concatenate([g[k] for g in got]) if got else np.zeros(0, np.int64)
               for k in ("uk", "key", "s", "t")}
    data = rollup_columns(cols, rows["weights"], rows["upload_frames"], groups,
                          moments)
    # the day's page loads whole, all their chunks at once (no earlier batch to take away)
    order = np.argsort(np.asarray(cols["uk"], np.int64), kind="stable").tolist()
    tls = [(orjson.loads(m) if m else {}).get("timeline") for m in cols["meta"]]
    data["rollup_vitals"] = batch_rows({
        "route": [cols["route"][i] for i in order], "env": [cols["env"][i] for i in order],
        "page_load": [cols["page_load"][i] for i in order],
        "timeline": [tls[i] if isinstance(tls[i], dict) else None for i in order]}, None)
    # per function and page load, the day's chunks all at once (no earlier batch)
    uf = rows["upload_frames"]
    per = upload_keys(uf["uk"], uf["frame_id"], uf["marker"], uf["self_ns"],
                      frame_hashes(frames))
    data["rollup_perload"], data["rollup_examples"] = perload_rows(
        {k: cols[k] for k in ("uk", "id", "route", "env", "page_load")}, per, None)
    data.update(_time_rollups(tdir, entry, day, cols))
    sub = f"{day}/" if day else ""
    # the day's upload keys on the parts a pinned query reads by them (`parts._entry`):
    # a rebuilt day (a prune's cut, an older format's) gets them as a batch's parts do
    span = (min(cols["uk"]), max(cols["uk"]))
    out = {kind: [new_part(tdir, f"{kind}/rkey={rkey}/{sub}part-{part:06d}-r.parquet",
                           data[kind], sch[kind], len(data[kind]["route"]), day,
                           cols["received_at"],
                           span if kind in (*TIME_KINDS, "rollup_vitals") else None)]
           for kind in ROLLUP_KINDS}
    counts_left_out(out["rollup_vitals"][0])
    return out


def _time_rollups(tdir: Path, entry: dict, day: str | None, cols: dict) -> dict[str, dict]:
    """The Time view's rollups of a release's day from its samples parts, a part at a
    time (a day's samples are the bulk of its tables), then summed by key as a merge."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sch = schemas()
    cells = {k: cols[k] for k in ("uk", "id", "route", "env", "page_load")}
    got: dict[str, list] = {k: [] for k in TIME_KINDS}
    for e in entry["parts"]["samples"]:
        if isinstance(e, dict) and e.get("day") == day:
            t = read_part(pq, verify_part(tdir, e), tdir)
            rows = time_rows(cells, {k: t[k].to_numpy() for k in t.column_names}, load_hash)
            for k in TIME_KINDS:
                got[k].append(rows[k])
    out = {}
    for k in TIME_KINDS:
        t = aggregate(k, pa.concat_tables(got[k])) if got[k] else sch[k].empty_table()
        out[k] = {c: t[c].to_pylist() if c in ("route", "env") else t[c].to_numpy()
                  for c in t.column_names}
    return out


def build_rollups(tdir: Path, man: dict) -> None:
    """Tables without rollups (an older format's): every release's days rolled up from
    their per-upload tables, and committed. Under the tables' lock."""
    if man.get("rollups") or any(not isinstance(e, dict) or "rkey" not in e
                                 for e in man["uploads"]):
        return  # tables of the oldest layout (all releases mixed) keep reading per upload
    part = man["nextPart"]
    dirs: set[Path] = set()
    for rkey, entry in man["releases"].items():
        days = {e.get("day") for e in man["uploads"] if e.get("rkey") == rkey}
        for kind in ROLLUP_KINDS:
            entry["parts"][kind] = []
        for day in sorted(days, key=lambda d: d or ""):
            for kind, entries in rebuild_rollups(tdir, man, rkey, day, part).items():
                entry["parts"][kind].extend(entries)
                dirs.update((tdir / part_path(x)).parent for x in entries)
    for d in sorted(dirs, key=lambda d: -len(d.parts)):
        fsync_dir(d)
    man["nextPart"] = part + 1
    man["rollups"] = True
    write_manifest(tdir, man)
