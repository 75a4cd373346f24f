"""Queries answered from the rollup tables (store/tables/rollup.py) instead of per-upload rows.

A selection of whole UTC days, by app, release, route and env, reads the rollups of its
releases' days: rows per (route, env) and distinct stack or frame, not per upload, so its
cost follows the question (releases x days x distinct stacks), not the store's history.
What the rollups cannot say, the per-upload tables answer as before (`plan` says None):
`--where` (any meta key), `--during` (windows of one upload's timeline), a `--since` or
`--until` inside a day, tables not yet rolled up (an older format before its first
compaction), uploads without a receivedAt, a retention prune in progress over a day, and
releases whose source maps give two stored frames one function (a trace's self time is
then their sum, which only its own rows hold).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .engine import Part, Snapshot
from .filters import Filters

DAY_MS = 86400e3


@dataclass
class Plan:
    """The rollup parts a selection reads: per release (sorted keys), per kind."""

    rkeys: list[str]
    parts: dict[str, list[list[Part]]]  # kind -> per release, its parts


def plan(snap: Snapshot, f: Filters) -> Plan | None:
    """The rollup parts that answer `f` exactly, or None: the per-upload tables must."""
    from ..store.tables.view import ROLLUP_KINDS, part_files

    man = snap.manifest
    if not man.get("rollups") or f.where or f.during is not None:
        return None
    for t in (f.since, f.until):
        if t is not None and t % DAY_MS:
            return None
    rkeys = sorted(k for k, e in man["releases"].items() if e["app"] == f.app and (
        f.release is None or e["release"] == f.release))
    marks = [m for k, m in snap.pruned.items() if k in ("*", f.app)]
    parts: dict[str, list[list[Part]]] = {k: [] for k in ROLLUP_KINDS}
    for rkey in rkeys:
        for kind in ROLLUP_KINDS:
            keep = []
            for e in man["releases"][rkey]["parts"][kind]:
                if not isinstance(e, dict) or e.get("minAt") is None:
                    return None  # uploads without a time: only their ids say if pruned
                if (f.since is not None and e["maxAt"] < f.since) or (
                        f.until is not None and e["minAt"] >= f.until):
                    continue
                if any(e["maxAt"] < m for m in marks):
                    continue  # every upload of it was pruned
                if any(e["minAt"] < m for m in marks):
                    return None  # a prune is under way: its day is not rolled up anew yet
                keep.append(e)
            one = {"releases": {rkey: {"parts": {kind: keep}}}, "uploads": []}
            parts[kind].append(part_files(snap.tdir, one, kind, [rkey]))
    return Plan(rkeys, parts)


class Rolled:
    """What a selection's uploads add up to, per (release, declared interval), as the
    rollups hold them: the `engine.Uploads` a query reads, without one row per upload."""

    def __init__(self, rkeys: list[str], cells: dict[str, np.ndarray], loads: int) -> None:
        ri = np.asarray(cells["ri"], np.int64)
        has = sorted(set(ri.tolist()))
        self.rkeys = [rkeys[i] for i in has]
        to = np.full(len(rkeys) + 1, -1, np.int64)
        to[has] = np.arange(len(has))
        self.ri = to[ri]
        self.count = np.asarray(cells["uploads"], np.int64)
        self.samples = np.asarray(cells["samples"], np.int64)
        self.total_ms = np.asarray(cells["total_ns"], np.int64) / 1e6
        self.lost_ms = np.asarray(cells["lost_ms"], np.float64)
        self.sample_interval = np.asarray(cells["sample_interval"], np.float64)
        self._loads = loads
        self.ri_of = to  # plan's release index -> this one's

    def __len__(self) -> int:
        return int(self.count.sum())

    def page_loads(self) -> int:
        return self._loads


def select(engine: Any, snap: Snapshot, f: Filters) -> Any:
    """`query.select` from the rollups, or None when they cannot answer `f` (`plan`)."""
    from . import query
    from .engine import StackRows
    from .release import named

    p = plan(snap, f)
    if p is None:
        return None
    cells = engine.rollup(p, "rollup_cells", f)
    loads = engine.rollup(p, "rollup_loads", f)["loads"]
    up = Rolled(p.rkeys, cells, int(np.asarray(cells["own_loads"]).sum()) + int(loads[0]))
    releases = named({k: query._read_release(snap, k) for k in up.rkeys}, f)
    if any(_collides(r) for r in releases.values()):
        return None
    got = engine.rollup(p, "rollup_stacks", f)
    rows = StackRows(up.ri_of[got["ri"]], got["stack_id"], got["marker"], got["samples"],
                     got["weight_ns"])
    idle_ms, idle_n = 0.0, 0
    if f.exclude_idle:
        rows, idle_ms, idle_n = query.without_idle(rows)
    sel = query.Selection(
        f, up, releases, query._recording(releases, rows, up), int(up.samples.sum()) - idle_n,
        float(rows.weight_ns.sum()) / query.NS_PER_MS, idle_ms=idle_ms, idle_samples=idle_n)
    sel.rollup = p
    return sel


def _collides(rel: Any) -> bool:
    """Source maps give two stored frames of the release one function (see the module)."""
    return rel.stack_map is not None and len(set(rel.frame_key)) < len(rel.frame_key)
