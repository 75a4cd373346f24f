"""Queries answered from the rollup tables (store/tables/rollup.py) instead of per-upload rows.

A selection of whole UTC days, by app, release, route and env, reads the rollups of its
releases' days: rows per (route, env) and distinct stack or frame, not per upload, so its
cost follows the question (releases x days x distinct stacks), not the store's history.
A `--since` or `--until` inside a day reads the whole days between from the rollups and
the uploads of the part days at the ends from their own rows. What the rollups cannot
say, the per-upload tables answer as before (`plan` says None): `--where` (any meta
key), `--during` (windows of one upload's timeline), a window within one day, tables
not yet rolled up (an older format before its first compaction), uploads without a
receivedAt, a retention prune in progress over a day, and releases in which two stored
frames that one upload may hold are one function other than as the rollups group them: a
trace holding both counts once, with their summed self time. The rollups hold that sum
per function of the default script identity rule (`page.html?exp=a` and `?exp=b`: rows
`grouped` 1), so source maps that join frames, or a `--url-rule` that joins others, are
what the per-upload rows answer (`frames_of`). The uncompacted tail's copies of committed
frames are never in one upload with them.

`fleet top` reads a selection so (`select`); `fleet diff` too when both sides have at least
MOMENTS_MIN_UPLOADS uploads and no part day, its intervals from rollup_moments
(`diff_intervals`: the bootstrap's first-order variance from sums over uploads).
`fleet regressions` reads the releases or days from rollup_cells and, per pair of more
than PERM_MAX_LOADS page loads, its tests' sums from rollup_perload (`perload_side`: per
function its self ms per page load summed, and squared, over the side's page loads) and
the examples from rollup_examples (store/tables/perload.py).
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
    frames: dict[int, Frames] | None = None  # per release index: `select` sets it
    stored: dict | None = None  # rkey -> its Release before the identity rule (`select`)
    committed: dict | None = None  # rkey -> its committed frames, when a tail follows them
    entries: dict | None = None  # kind -> per release, the manifest entries of its parts
    # kind -> per release: day -> the (minUk, maxUk) of its parts left out for a pin (None:
    # unknown, every upload of the day), whose uploads the caller reads per upload
    left: dict | None = None


def plan(snap: Snapshot, f: Filters, kinds: tuple[str, ...] | None = None,
         pinned: set[str | None] | None = None) -> Plan | None:
    """The rollup parts that answer `f` exactly, or None: the per-upload tables must.
    `kinds`: the rollup tables read (default: all but rollup_vitals, rollup_perload,
    rollup_examples and the Time view's, which only `fleet vitals`, `fleet regressions` and
    the flame page read: a query's
    tail makes the first two when they are read). `pinned`: `pinned_days`, passed by a
    caller that reads per upload the uploads of the parts `left` out; with a pin past
    some of `f`'s uploads, None without it. A part of those days is read when its upload
    keys are all below the pin and no part left out is among them."""
    from ..store.tables.view import ROLLUP_KINDS, TIME_KINDS, part_files

    kinds = tuple(k for k in ROLLUP_KINDS if k not in (
        "rollup_vitals", "rollup_perload", "rollup_examples", *TIME_KINDS)
    ) if kinds is None else kinds

    man = snap.manifest
    if not man.get("rollups") or f.where or f.during is not None:
        return None
    # Pinned below uploads the snapshot holds (`Snapshot.pin`): their days' sums count
    # them, so only the days without one are read here (`pinned_days` says which).
    if not snap.pinned_out():
        pinned = None
    else:
        out = pinned_days(snap, f)
        if out is None or pinned is None or not out <= pinned:
            return None  # (a caller that reads those days per upload passes `pinned`)
    for t in (f.since, f.until):
        if t is not None and t % DAY_MS:
            return None
    rkeys = sorted(k for k, e in man["releases"].items() if e["app"] == f.app and (
        f.release is None or e["release"] == f.release))
    marks = [m for k, m in snap.pruned.items() if k in ("*", f.app)]
    parts: dict[str, list[list[Part]]] = {k: [] for k in kinds}
    kept: dict[str, list[list[dict]]] = {k: [] for k in kinds}
    left: dict[str, list[dict]] = {k: [] for k in kinds}
    for rkey in rkeys:
        for kind in kinds:
            keep = []
            out_: dict[str | None, list] = {}
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
                if pinned is not None and e.get("day") in pinned and not (
                        e.get("maxUk") is not None and e["maxUk"] < snap.uk_below):
                    out_.setdefault(e.get("day"), []).append(
                        None if e.get("minUk") is None else (e["minUk"], e["maxUk"]))
                    continue  # its uploads below the pin: read per upload by the caller
                keep.append(e)
            keep, out_ = _apart(keep, out_)
            left[kind].append(out_)
            one = {"releases": {rkey: {"parts": {kind: keep}}}, "uploads": []}
            parts[kind].append(part_files(snap.tdir, one, kind, [rkey]))
            kept[kind].append(keep)
    return Plan(rkeys, parts, entries=kept, left=left)


def _apart(keep: list[dict], out: dict[str | None, list]) -> tuple[list[dict], dict]:
    """`plan`'s parts kept and left out per day, the days where a kept part's upload keys
    may be among a left one's (or a left one's are unknown) left out whole: each upload
    then is in a part read or in a span read per upload, never both."""
    for day, spans in out.items():
        mine = [e for e in keep if e.get("day") == day]
        if None in spans or any(
                e.get("minUk") is None or any(e["minUk"] <= b and a <= e["maxUk"]
                                              for a, b in spans) for e in mine):
            keep = [e for e in keep if e.get("day") != day]
            out[day] = [None]
    return keep, out


def pinned_days(snap: Snapshot, f: Filters) -> set[str | None] | None:
    """The UTC days of `f`'s uploads that `snap`'s pin leaves out (`Snapshot.pin`, a pin
    past uploads it holds): their days' rollups sum them, so only those days must be read
    per upload. None when the uploads `f` reads were not listed under the pin (their
    days unknown: no rollups). A rollup part is one day's uploads (`day_of` their
    receivedAt), and `f`'s rows of it are of the uploads `f` matches (route, env)."""
    from ..store.tables.view import day_of

    at = snap.past_pin.get(f)
    if at is None:
        return None
    return {day_of(float(t)) for t in np.asarray(at, np.float64).tolist()}


def uploads_by_day(engine: Any, snap: Snapshot, f: Filters) -> dict[str, int] | None:
    """Per UTC day ('YYYY-MM-DD') with rollups of `f`: its uploads that `f` matches (its
    routes and envs), from rollup_cells; None when the rollups cannot answer (`plan`)."""
    from ..store.tables.view import part_files

    p = plan(snap, f, ("rollup_cells",))
    if p is None:
        return None
    days: dict[str, list] = {}
    for rkey, keep in zip(p.rkeys, (p.entries or {})["rollup_cells"], strict=True):
        for e in keep:
            one = {"releases": {rkey: {"parts": {"rollup_cells": [e]}}}, "uploads": []}
            days.setdefault(e.get("day") or "", []).extend(
                part_files(snap.tdir, one, "rollup_cells", [rkey]))
    labels = sorted(days)
    got = engine.rollup(Plan(labels, {"rollup_cells": [days[d] for d in labels]}),
                        "rollup_cells", f)
    n = np.bincount(np.asarray(got["ri"], np.int64),
                    weights=np.asarray(got["uploads"], np.float64), minlength=len(labels))
    return {d: int(c) for d, c in zip(labels, n.tolist(), strict=True) if c > 0}


@dataclass
class Frames:
    """Which rollup_frames rows of a release a query reads: per stored frame (`grouped`
    0) when no function of the query is two frames one upload may hold; else per
    function of the default identity rule (`grouped` 1, keyed by its smallest frame id)
    and per frame for the frames alone in theirs, when the query's functions are those
    groups. `rep`: per frame id, the row its per-upload rows add to (the ends' days)."""

    grouped: bool
    single: np.ndarray  # per frame id: read its grouped-0 rows
    rep: np.ndarray


def frames_of(stored: Any, rel: Any, committed: int | None) -> Frames | None:
    """How `rel`'s (as the query names it; `stored`: before the identity rule) rollup
    rows count each function once per upload, or None. An upload's frames are all
    committed (ids below `committed`) or all the uncompacted tail's, which interns them
    apart: its copy of a committed frame is never in one upload with it, so groups and
    functions are compared within each."""
    from ..store.tables.view import frame_groups
    from .release import merges_in_an_upload

    n = len(rel.frame_key)
    ids = np.arange(n, dtype=np.int64)
    if not merges_in_an_upload(rel, committed):
        return Frames(False, np.ones(n, bool), ids)
    if stored.maps:
        return None  # grouped by the stored frames, not by what the maps make of them
    tr = stored.trace
    keys = [(fr.name, None if fr.resource_id is None else tr.resources[fr.resource_id],
             fr.line, fr.column) for fr in tr.frames]
    c = n if committed is None else min(committed, n)
    g = np.concatenate([frame_groups(keys[:c]), frame_groups(keys[c:]) + c])
    # one function per group and one group per function, within each origin
    fn: dict[int, Any] = {}
    grp: dict[tuple, int] = {}
    for i, (gi, k) in enumerate(zip(g.tolist(), rel.frame_key, strict=True)):
        if fn.setdefault(gi, k) != k or grp.setdefault((i < c, k), gi) != gi:
            return None
    return Frames(True, np.bincount(g, minlength=n)[g] == 1, g)


class Rolled:
    """What a selection's uploads add up to, per (release, declared interval), as the
    rollups hold them: the `engine.Uploads` a query reads, without one row per upload."""

    def __init__(self, rkeys: list[str], cells: dict[str, np.ndarray], loads: int,
                 estimated: bool = False) -> None:
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
        # each upload's all ns (a) summed, and a^2: `diff_intervals`' denominators
        self.total_ns = int(np.asarray(cells["total_ns"], np.int64).sum())
        self.a_sq = float(np.asarray(cells["a_sq"], np.float64).sum())
        self.sample_interval = np.asarray(cells["sample_interval"], np.float64)
        self._loads = loads
        self._estimated = estimated  # `loads` from a HyperLogLog sketch (a cell past 4,096)
        self.ri_of = to  # plan's release index -> this one's

    def __len__(self) -> int:
        return int(self.count.sum())

    def page_loads(self) -> int:
        return self._loads

    def page_loads_estimated(self) -> bool:
        return self._estimated


def select(engine: Any, snap: Snapshot, f: Filters) -> Any:
    """`query.select` from the rollups, or None when they cannot answer `f` (`plan`). A
    `--since`/`--until` inside a day: the whole days between from the rollups, the
    uploads of the part days at the ends from their own rows (`edges`), added up."""
    whole, edges = _split_days(f)
    if whole is None:
        return None
    p = plan(snap, whole)
    if p is None:
        return None
    return _selection(engine, snap, f, p, edges, engine.rollup(p, "rollup_cells", f),
                      engine.rollup(p, "rollup_loads", f),
                      lambda: engine.rollup(p, "rollup_stacks", f), _Releases(snap, f))


class _Releases:
    """A query's releases, each read and named once however many selections hold it
    (`Units`: a regressions query's days hold the same releases)."""

    def __init__(self, snap: Snapshot, f: Filters) -> None:
        self.snap, self.f = snap, f
        self.stored: dict[str, Any] = {}
        self.named: dict[str, Any] = {}
        self.frames: dict[str, Frames | None] = {}

    def read(self, rkeys: list[str]) -> tuple[dict, dict, dict]:
        """`rkeys`' stored releases, named releases and `frames_of` (None: per upload)."""
        from . import query
        from .release import named

        for k in rkeys:
            if k not in self.stored:
                self.stored[k] = query._read_release(self.snap, k)
                self.named.update(named({k: self.stored[k]}, self.f))
                self.frames[k] = frames_of(
                    self.stored[k], self.named[k],
                    self.snap.manifest["releases"][k].get("committedFrames"))
        return ({k: self.stored[k] for k in rkeys}, {k: self.named[k] for k in rkeys},
                {k: self.frames[k] for k in rkeys})


def _selection(engine: Any, snap: Snapshot, f: Filters, p: Plan, edges: list[Filters],
               cells: dict, loads: dict, stacks: Any, rels: _Releases) -> Any:
    """`select`'s Selection from the plan `p`'s rollup_cells and rollup_loads rows,
    `stacks()` its rollup_stacks rows (read only when the rollups can answer), and the
    uploads of the part days `edges`."""
    from ..store.tables.view import load_hash, page_loads
    from . import query
    from .engine import StackRows

    ends = _no_uploads()
    for e in edges:
        ends = _concat(ends, engine.uploads(snap, e))
    pos = {k: i for i, k in enumerate(p.rkeys)}
    end_ri = np.asarray([pos[k] for k in ends.rkeys] or [0], np.int64)  # ends' -> plan's
    cells = {k: np.concatenate([np.asarray(cells[k]), v]) for k, v in {
        "ri": end_ri[ends.ri] if len(ends) else np.zeros(0, np.int64),
        "sample_interval": ends.sample_interval, "uploads": np.ones(len(ends), np.int64),
        "own_loads": np.asarray([x is None for x in ends.page_load], np.int64),
        "samples": ends.samples, "total_ns": np.rint(ends.total_ms * 1e6).astype(np.int64),
        "lost_ms": ends.lost_ms,
        "a_sq": np.rint(ends.total_ms * 1e6) ** 2}.items()}
    ids = [x for x in ends.page_load if x is not None]
    n_loads = page_loads(np.concatenate([loads["load_hash"], load_hash(ids)]),
                         loads["registers"])
    up = Rolled(p.rkeys, cells, int(cells["own_loads"].sum()) + n_loads,
                estimated=bool(loads["registers"]))
    stored, releases, how = rels.read(up.rkeys)
    p.stored = stored
    p.committed = {k: snap.manifest["releases"][k].get("committedFrames") for k in stored}
    # How each release's rollup_frames rows count a function once per upload (`Frames`),
    # or None: only its per-upload rows can
    p.frames = {}
    for k in releases:
        if how[k] is None:
            return None
        p.frames[pos[k]] = how[k]
    got = stacks()
    if len(ends):
        more = engine.stacks(snap, ends)
        got = _sum_stacks({k: np.concatenate([np.asarray(got[k]), v]) for k, v in {
            "ri": end_ri[more.ri] if len(more.ri) else more.ri, "stack_id": more.stack_id,
            "marker": more.marker, "samples": more.samples,
            "weight_ns": more.weight_ns}.items()})
    rows = StackRows(up.ri_of[got["ri"]], got["stack_id"], got["marker"], got["samples"],
                     got["weight_ns"])
    idle_ms, idle_n = 0.0, 0
    if f.exclude_idle:
        rows, idle_ms, idle_n = query.without_idle(rows)
    sel = query.Selection(
        f, up, releases, query._recording(releases, rows, up), int(up.samples.sum()) - idle_n,
        float(rows.weight_ns.sum()) / query.NS_PER_MS, idle_ms=idle_ms, idle_samples=idle_n)
    sel.rollup = p
    sel.ends = ends
    return sel


# ---- several selections read at once (`fleet regressions`' days or releases) ------------------


def _scan_many(engine: Any, plans: list[Plan], kind: str, f: Filters) -> list[dict]:
    """`engine.rollup(plan, kind, f)` of each of `plans`, all read in one scan: one plan
    whose releases are every plan's in turn, its rows then split by plan (in each, the
    same rows in the same order as its own scan gives)."""
    off = np.cumsum([0] + [len(p.rkeys) for p in plans])
    one = Plan([k for p in plans for k in p.rkeys],
               {kind: [x for p in plans for x in p.parts[kind]]})
    got = engine.rollup(one, kind, f)
    out = []
    for i in range(len(plans)):
        lo, hi = int(off[i]), int(off[i + 1])
        if kind == "rollup_loads":
            h, r = got["hash_ri"], got["registers_ri"]
            out.append({"load_hash": got["load_hash"][(h >= lo) & (h < hi)],
                        "registers": [x for x, j in zip(got["registers"], r.tolist(),
                                                        strict=True) if lo <= j < hi]})
            continue
        ri = np.asarray(got["ri"], np.int64)
        a, b = np.searchsorted(ri, lo), np.searchsorted(ri, hi)  # rows sorted by ri
        mine = {c: np.asarray(v)[a:b] for c, v in got.items()}
        mine["ri"] = mine["ri"] - lo
        out.append(mine)
    return out


class Units:
    """The selections `fleet regressions` compares (each day or release, `fs`; every one
    with `f`'s route and env), read from the rollups as `select` and `perload_plan` read
    them one by one, but each rollup table in one scan for all of them (29 pairs of days
    read each day twice, 10 scans a pair: 290 scans where these are 4) and each release
    read and named once. Selections are built when asked, the last two kept (a pair's
    NEW is the next pair's BASE)."""

    def __init__(self, engine: Any, snap: Snapshot, f: Filters, fs: list[Filters]) -> None:
        self.engine, self.snap, self.fs = engine, snap, fs
        self.rels = _Releases(snap, f)
        self._sel: dict[int, Any] = {}
        plans = [plan(snap, g) if _split_days(g) == (g, []) else None for g in fs]
        got = [p for p in plans if p is not None]
        scans = {k: _scan_many(engine, got, k, f) if got else []
                 for k in ("rollup_cells", "rollup_loads", "rollup_stacks")}
        self._plans: list[Plan | None] = []
        self._rows: list[dict | None] = []
        it = iter(range(len(got)))
        for p in plans:
            j = None if p is None else next(it)
            self._plans.append(p)
            self._rows.append(None if j is None else {k: v[j] for k, v in scans.items()})
        pl = [perload_plan(snap, g) for g in fs]
        got = [p for p in pl if p is not None]
        rows = iter(_scan_many(engine, got, "rollup_perload", f) if got else [])
        self.perload: list[tuple[Plan, dict] | None] = [
            None if p is None else (p, next(rows)) for p in pl]

    def select(self, i: int) -> Any:
        """`select(engine, snap, fs[i])`: None when the rollups cannot answer it."""
        if i not in self._sel:
            p, rows = self._plans[i], self._rows[i]
            self._sel[i] = select(self.engine, self.snap, self.fs[i]) if rows is None else (
                _selection(
                self.engine, self.snap, self.fs[i], p, [], rows["rollup_cells"],
                    rows["rollup_loads"], lambda: rows["rollup_stacks"], self.rels))
            for k in [k for k in self._sel if k < i - 1]:
                del self._sel[k]
        return self._sel[i]


def _split_days(f: Filters) -> tuple[Filters | None, list[Filters]]:
    """`f` as its whole UTC days (None: none, within one day) and the filters of the part
    days at its ends."""
    import math
    from dataclasses import replace

    lo = None if f.since is None else math.ceil(f.since / DAY_MS) * DAY_MS
    hi = None if f.until is None else math.floor(f.until / DAY_MS) * DAY_MS
    if lo is not None and hi is not None and lo >= hi:
        return None, []
    edges = []
    if lo is not None and lo != f.since:
        edges.append(replace(f, since=f.since, until=lo))
    if hi is not None and hi != f.until:
        edges.append(replace(f, since=hi, until=f.until))
    return replace(f, since=lo, until=hi), edges


def _no_uploads() -> Any:
    from .engine import _no_uploads as empty

    return empty()


def _concat(a: Any, b: Any) -> Any:
    """Two `engine.Uploads` as one."""
    from .engine import Uploads

    if not len(a):
        return b
    return Uploads(np.concatenate([a.uk, b.uk]), a.id + b.id, a.rkey + b.rkey,
                   a.release + b.release, np.concatenate([a.received_at, b.received_at]),
                   np.concatenate([a.samples, b.samples]),
                   np.concatenate([a.total_ms, b.total_ms]),
                   np.concatenate([a.lost_ms, b.lost_ms]),
                   np.concatenate([a.sample_interval, b.sample_interval]),
                   a.page_load + b.page_load)


def _sum_stacks(t: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Stack rows summed per (ri, stack, marker), in that order (as the engines give)."""
    key = np.stack([t["ri"], t["stack_id"], t["marker"]], axis=1).astype(np.int64)
    uq, inv = np.unique(key, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    out = {"ri": uq[:, 0].copy(), "stack_id": uq[:, 1].copy(), "marker": uq[:, 2].copy()}
    for c in ("samples", "weight_ns"):
        v = np.zeros(len(uq), np.int64)
        np.add.at(v, inv, np.asarray(t[c], np.int64))
        out[c] = v
    return out




# ---- diff's intervals from rollup_moments -----------------------------------------------------

Z95 = 1.959963984540054
# Uploads a side needs before its intervals come from the moments: measured on page loads
# resampled from the real traces, at ~160 uploads a side every interval's ends were within
# 4.4 % of its width of a 4,000-resample bootstrap's (the default 200 resamples are 10-13 %
# off that), at 16 a side the relative change's up to 53 % (a skewed ratio of few uploads).
# Below it the bootstrap over the per-upload rows answers, which costs little there.
MOMENTS_MIN_UPLOADS = 100


def diff_intervals(engine: Any, base: Any, new: Any, keys: list, match: Any
                   ) -> dict[str, np.ndarray] | None:
    """`query.bootstrap`'s 95 % intervals (pp of share and relative %, self and total, per
    key) from the rollups' moments, or None (the per-upload rows must resample): both
    sides read from the rollups with no part day at a window's end, and each key one
    function (`frame_groups`: name, script, line, column) of each release's frames that
    one upload may hold.

    A key's share is a ratio of sums over uploads, R = S/A (S: its ns, A: all ns). The
    Bayesian bootstrap (each upload weighted by an Exp(1) draw) has, to first order, the
    variance of the linearised ratio: sum over uploads of (s - R a)^2 / A^2, which is
    (sum s^2 - 2 R sum s a + R^2 sum a^2) / A^2: sums the rollups keep. The change in
    points is normal with the two sides' variances added; the relative change is
    log-normal (its log's variance by the delta method)."""
    sides = []
    for sel in (base, new):
        if sel.rollup is None or (sel.ends is not None and len(sel.ends)):
            return None
        got = _side_moments(engine, sel, keys, match)
        if got is None:
            return None
        sides.append(got)
    out = {}
    for metric in ("self", "total"):
        (rb, vb), (rn, vn) = (_ratio(g[metric], g["a"], g["b"]) for g in sides)
        d = 100.0 * (rn - rb)
        sd = 100.0 * np.sqrt(vb + vn)
        out[f"{metric}_pp"] = np.stack([d - Z95 * sd, d + Z95 * sd])
        rel = np.full((2, len(keys)), np.nan)
        with np.errstate(divide="ignore", invalid="ignore"):
            both = (rb > 0) & (rn > 0)
            q = rn / rb
            sl = np.sqrt(vn / rn**2 + vb / rb**2)
            rel[0, both] = 100.0 * (q[both] * np.exp(-Z95 * sl[both]) - 1.0)
            rel[1, both] = 100.0 * (q[both] * np.exp(Z95 * sl[both]) - 1.0)
            gone = (rb > 0) & (rn == 0)  # linear: the log has no variance at 0
            sq = np.sqrt(vn) / rb
            rel[0, gone] = 100.0 * (-Z95 * sq[gone] - 1.0)
            rel[1, gone] = 100.0 * (Z95 * sq[gone] - 1.0)
        out[f"{metric}_rel"] = rel
    return out


def _ratio(m: dict[str, np.ndarray], a: float, b: float) -> tuple[np.ndarray, np.ndarray]:
    """Per key: the share R = S/A and its bootstrap variance (see `diff_intervals`)."""
    if not a > 0:
        n = len(m["sum"])
        return np.full(n, np.nan), np.full(n, np.nan)
    r = m["sum"] / a
    v = np.maximum(m["sq"] - 2.0 * r * m["a"] + r * r * b, 0.0) / (a * a)
    return r, v


def _side_moments(engine: Any, sel: Any, keys: list, match: Any) -> dict | None:
    """One side's sums per diff key (`self`, `total`: sum, sq, a) and all ns `a`, a^2
    `b`; None when a key is not one function of each release (by origin): the moments are
    per function by place (format 12), so a key by place reads its own, and a key by name
    (one place a side: `diff.KeyRule`) reads that place's in each release."""
    from ..analysis.diff import NameKey, key_index
    from ..store.tables.view import frame_groups
    from ..trace import no_stack_name

    p = sel.rollup
    pos = {k: i for i, k in enumerate(keys)}
    K = len(keys)
    rows = engine.rollup(p, "rollup_moments", sel.filters)
    ri = np.asarray(rows["ri"], np.int64)
    key = np.asarray(rows["key"], np.int64)
    j = np.full(len(ri), -1, np.int64)
    for code in range(-1, 16):  # a sample with no stack: -2 - its marker
        hit = key == -2 - code
        if hit.any():
            j[hit] = pos.get(NameKey(no_stack_name(code), None), -1)
    for i, rkey in enumerate(p.rkeys):
        mine = (ri == i) & (key >= 0)
        rel = sel.releases.get(rkey)
        if rel is None or not mine.any():
            continue
        st = p.stored[rkey]
        if st.maps:
            return None  # grouped by the stored frames, not by what the maps make of them
        tr = st.trace
        frames = [(fr.name, None if fr.resource_id is None else tr.resources[fr.resource_id],
                   fr.line, fr.column) for fr in tr.frames]
        n = len(frames)
        committed = (p.committed or {}).get(rkey)
        c = n if committed is None else min(committed, n)
        g = np.concatenate([frame_groups(frames[:c]), frame_groups(frames[c:]) + c])
        jf = np.asarray([key_index(pos, k.name, match(k.resource), k.line, k.column)
                         for k in rel.frame_key] or [-1], np.int64)
        # one key per group, and within an origin one group per key
        if n and (jf[:n] != jf[g]).any():
            return None
        reps = np.unique(g)
        for lo, hi in ((0, c), (c, n)):
            rj = jf[reps[(reps >= lo) & (reps < hi)]]
            rj = rj[rj >= 0]
            if len(rj) != len(np.unique(rj)):
                return None
        j[mine] = jf[np.clip(key[mine], 0, max(n - 1, 0))]
    on = j >= 0
    out: dict = {"a": float(sel.uploads.total_ns), "b": float(sel.uploads.a_sq)}
    for metric, c in (("self", "s"), ("total", "t")):
        out[metric] = {
            "sum": np.bincount(j[on], weights=np.asarray(rows[f"{c}_sum"], np.float64)[on],
                               minlength=K),
            "sq": np.bincount(j[on], weights=np.asarray(rows[f"{c}_sq"])[on], minlength=K),
            "a": np.bincount(j[on], weights=np.asarray(rows[f"{c}_a"])[on], minlength=K)}
    return out


# ---- regressions' per-load sums from rollup_perload -------------------------------------------


@dataclass
class PerLoad:
    """One side's self ms per page load of each diff key, as sums over its page loads
    (`rollup_perload`): what Welch's t and Fieller's interval need."""

    loads: int  # page loads (one per route, env and UTC day: tables/perload.py)
    all_ms: float  # their time, all of it
    s: np.ndarray  # per key: the sum of its self ms per page load
    q: np.ndarray  # ... of its square (ms^2)
    plan: Plan  # the rollup_examples parts of the side
    examples_keys: dict[int, list[tuple[int, int]]]  # key -> (plan release, rollup key)


def perload_plan(snap: Snapshot, f: Filters) -> Plan | None:
    """The rollup_perload and rollup_examples parts of `f` (`plan`), or None."""
    return plan(snap, f, ("rollup_perload", "rollup_examples"))


def page_loads_of(engine: Any, p: Plan, f: Filters, rows: dict | None = None) -> int:
    """The page loads of a `perload_plan` (LOAD_KEY's `loads`); `rows`: its rollup_perload
    rows, already read (`Units.perload`)."""
    from ..store.tables.view import LOAD_KEY

    rows = engine.rollup(p, "rollup_perload", f) if rows is None else rows
    return int(np.asarray(rows["loads"])[np.asarray(rows["key"]) == LOAD_KEY].sum())


def perload_side(engine: Any, sel: Any, p: Plan, keys: list, match: Any,
                 rows: dict | None = None, hashes: dict | None = None) -> PerLoad | None:
    """`sel`'s (read from the rollups, no part day) per-load sums per diff key from `p`'s
    rollup_perload rows, or None when a key is not one function hash of each release (a
    page load's value of a key of two hashes would be their sum, whose square no sum of
    squares gives) or a release has source maps (keyed by the stored frames). `rows`:
    those rows already read (`Units.perload`); `hashes`: rkey -> its frames'
    `function_hash`, kept between calls."""
    from ..analysis.diff import NameKey, key_index
    from ..store.tables.view import LOAD_KEY, function_hash
    from ..trace import MARKERS, NONE, no_stack_name

    if sel.rollup is None or (sel.ends is not None and len(sel.ends)):
        return None
    pos = {k: i for i, k in enumerate(keys)}
    K = len(keys)
    rows = engine.rollup(p, "rollup_perload", sel.filters) if rows is None else rows
    hashes = {} if hashes is None else hashes
    matched: dict[str | None, Any] = {}
    ri = np.asarray(rows["ri"], np.int64)
    key = np.asarray(rows["key"], np.int64)
    j = np.full(len(ri), -1, np.int64)
    ex: dict[int, list[tuple[int, int]]] = {}
    for code in range(NONE, len(MARKERS)):  # a sample with no stack: -2 - its marker
        jj = pos.get(NameKey(no_stack_name(code), None))
        if jj is not None:
            j[key == -2 - code] = jj
            ex.setdefault(jj, []).extend((i, -2 - code) for i in range(len(p.rkeys)))
    stored = (sel.rollup.stored or {})
    for i, rkey in enumerate(p.rkeys):
        rel = sel.releases.get(rkey)
        st = stored.get(rkey)
        mine = (ri == i) & (key >= 0)
        if rel is None or st is None:
            if mine.any():
                return None
            continue
        if st.maps:
            return None
        tr = st.trace
        if rkey not in hashes:
            hashes[rkey] = [function_hash(fr.name, None if fr.resource_id is None
                                          else tr.resources[fr.resource_id], fr.line,
                                          fr.column)
                            for fr in tr.frames]
        h2j: dict[int, int] = {}
        for h, k in zip(hashes[rkey], rel.frame_key, strict=False):
            if k.resource not in matched:  # a script per many frames: matched once
                matched[k.resource] = match(k.resource)
            jj = key_index(pos, k.name, matched[k.resource], k.line, k.column)
            if h2j.setdefault(h, jj) != jj:
                return None  # one function of the release two keys
        j2h: dict[int, int] = {}
        for h, jj in h2j.items():
            if jj >= 0 and j2h.setdefault(jj, h) != h:
                return None  # two functions of the release one key
        for jj, h in j2h.items():
            ex.setdefault(jj, []).append((i, h))
        if mine.any():
            j[mine] = [h2j.get(h, -1) for h in key[mine].tolist()]
    on = j >= 0
    load = key == LOAD_KEY
    return PerLoad(
        int(np.asarray(rows["loads"])[load].sum()),
        float(np.asarray(rows["s_sum"], np.float64)[load].sum()) / 1e6,
        np.bincount(j[on], weights=np.asarray(rows["s_sum"], np.float64)[on] / 1e6,
                    minlength=K),
        np.bincount(j[on], weights=np.asarray(rows["s_sq"], np.float64)[on] / 1e12,
                    minlength=K),
        p, ex)


def perload_examples(engine: Any, side: PerLoad, f: Filters, keys: list[int], n: int
                     ) -> dict[int, list[str]]:
    """Per key of `keys`: up to `n` (<= EXAMPLES_KEPT) ids of the side's uploads with the
    most self time in it (then the newest), `regressions.example_ids` from
    rollup_examples, all read in one scan."""
    out: dict[int, list[str]] = {j: [] for j in keys}
    want = [(j, w) for j in keys for w in side.examples_keys.get(j, [])]
    if n <= 0 or not want:
        return out
    got = engine.rollup(side.plan, "rollup_examples", f,
                        (np.asarray([w[1][0] for w in want], np.int64),
                         np.asarray([w[1][1] for w in want], np.int64)))
    of = {w: [] for _, w in want}
    for j, w in want:
        of[w].append(j)
    ns = np.asarray(got["self_ns"], np.int64)
    uk = np.asarray(got["uk"], np.int64)
    ri = np.asarray(got["ri"], np.int64)
    key = np.asarray(got["key"], np.int64)
    hold = np.nonzero(ns > 0)[0]
    for i in hold[np.lexsort((-uk[hold], -ns[hold]))].tolist():
        for j in of.get((int(ri[i]), int(key[i])), ()):
            if len(out[j]) < n and got["id"][i] not in out[j]:
                out[j].append(got["id"][i])
    return out
