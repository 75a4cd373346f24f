"""`jsprof fleet vitals`: what users waited for, per route and release, from the timelines.

Per (route, release): page loads (the client's page-load ids; an upload without one is
a page load of its own), interactions, INP p75, long-frame blocking p75, LCP p75, and per
interaction type the p75 of its duration and of its three parts. INP is per page load as
web-vitals computes it: the slowest interaction, ignoring one for every 50 (the
interaction at index min(n - 1, n // 50) in descending duration); a page load with no
interaction has no INP and is not in its p75. Interactions under the client's 16 ms
Event Timing threshold are not observed, so a page load whose every interaction was
faster has no INP here (web-vitals would give it a small one): the p75 leans slow on
routes where most interactions are that fast. Long-frame blocking: each long animation
frame's blockingDuration. CLS: each page load's (the client's, as web-vitals counts it:
its largest session window of layout shifts without recent input; of its last chunk).
`lcpElements`: the selectors LCP named, the most page loads first. The p75s interpolate
linearly (numpy's default), as every fleet percentile does, between values each kept as
the middle of its bucket of a log scale (within 1 % of it: `store/tables/vitals.py`).

Over whole UTC days the answer comes from the rollups (rollup_vitals: per release,
route, env and day, how many values fell in each bucket), so its cost grows with routes,
days and distinct values, not uploads; a `--since`/`--until` inside a day, `--where`,
and tables not rolled up yet read every upload's timeline. Both paths give the same
numbers, with one difference: the rollups keep each UTC day's page loads apart, so a
page load whose chunks fall on two days is two page loads there (each with its day's
chunks), one here.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ..timeline import inp as inp
from . import timeline as tl
from .engine import Snapshot, Uploads


def _p75(values: list[float]) -> float | None:
    return round(float(np.percentile(values, 75)), 3) if values else None


def _version_key(release: str) -> tuple:
    """1.9.0 < 1.10.0 when both parse as versions; others after, by name."""
    if re.fullmatch(r"v?\d+(\.\d+)*", release):
        return (0, tuple(int(x) for x in release.lstrip("v").split(".")), release)
    return (1, (), release)


def upload_rows(snap: Snapshot, f: Any, up: Uploads) -> dict[int, tuple[str | None, dict]]:
    """Per upload key: (route, meta) from the uploads table."""
    import orjson

    from .engine import read_part

    want = set(up.uk.tolist())
    out: dict[int, tuple[str | None, dict]] = {}
    for p in snap.upload_files(f):
        t = read_part(p, ["uk", "route", "meta"]).to_pydict()
        for uk, route, meta in zip(t["uk"], t["route"], t["meta"], strict=True):
            if uk in want:
                out[uk] = (route, orjson.loads(meta) if meta else {})
    return out


def vitals(engine: Any, snap: Snapshot, f: Any) -> dict:
    """The `fleet vitals --json` document: from the rollups over whole UTC days (`rolled`),
    else from every upload's timeline."""
    got = rolled(engine, snap, f)
    if got is not None:
        return got
    from ..store.tables.view import rollup_vitals as rv

    up = engine.uploads(snap, f)
    rows = upload_rows(snap, f, up)
    groups: dict[tuple[str, str | None], list[tuple[str, dict | None]]] = {}
    for i in np.argsort(up.uk, kind="stable").tolist():  # chunks in upload order
        uk = int(up.uk[i])
        route, meta = rows.get(uk, (None, {}))
        key = up.page_load[i] or f"upload:{up.id[i]}"
        groups.setdefault((up.release[i], route), []).append((key, meta.get("timeline")))
    out = []
    for (release, route), items in sorted(
            groups.items(), key=lambda g: (g[0][1] or "", _version_key(g[0][0]))):
        loads = tl.page_loads(items)
        t = rv.tally(r for pl in loads.values() for r in rv.signed((None, None), pl, 1))
        out.append(_row(f.app, release, route, t["metric"], t["label"], t["bucket"],
                        t["count"]))
    return {"rows": out}


def rolled(engine: Any, snap: Snapshot, f: Any) -> dict | None:
    """`vitals` from the rollup_vitals rows of whole UTC days (`store/tables/vitals.py`),
    or None when the rollups cannot answer `f` (`rollups.plan`; a `--since`/`--until`
    inside a day): their rows grow with routes, days and distinct values, not uploads.

    Pinned below uploads the store holds (`Snapshot.pin`, the dashboard's Time tab): the
    parts wholly below the pin as rolled up, and per upload only the uploads below it of
    the parts the pin cuts (`_cut_rows`), so every number counts the pinned uploads."""
    from . import rollups

    whole, edges = rollups._split_days(f)
    if whole is None or edges:
        return None
    days = rollups.pinned_days(snap, whole) if snap.pinned_out() else None
    p = rollups.plan(snap, whole, ("rollup_vitals",), days)
    if p is None:
        return None
    got = engine.rollup(p, "rollup_vitals", f)
    # per (release, route): (metric, label, bucket) -> count, the cut parts' rows added
    # to the rolled ones (their -1s meet the +1s of the chunks before them)
    groups: dict[tuple[str, str | None], dict[tuple[int, str, int], int]] = {}
    for r, route, m, lab, b, c in zip(
            np.asarray(got["ri"], np.int64).tolist(), list(got["route"]),
            np.asarray(got["metric"]).tolist(), list(got["label"]),
            np.asarray(got["bucket"]).tolist(), np.asarray(got["count"]).tolist(),
            strict=True):
        rel = snap.manifest["releases"][p.rkeys[r]]["release"]
        g = groups.setdefault((rel, None if route is None else str(route)), {})
        g[(int(m), str(lab), int(b))] = g.get((int(m), str(lab), int(b)), 0) + int(c)
    if days:
        for (rel, route), t in _cut_rows(engine, snap, whole, p).items():
            g = groups.setdefault((rel, route), {})
            for m, lab, b, c in zip(t["metric"].tolist(), t["label"], t["bucket"].tolist(),
                                    t["count"].tolist(), strict=True):
                g[(m, str(lab), b)] = g.get((m, str(lab), b), 0) + c
    out = []
    for (release, route), acc in sorted(
            groups.items(), key=lambda g: (g[0][1] or "", _version_key(g[0][0]))):
        rows = [(*k, c) for k, c in sorted(acc.items()) if c]
        if not rows:
            continue
        m, lab, b, c = zip(*rows, strict=True)
        out.append(_row(f.app, release, route, np.asarray(m, np.int64), list(lab),
                        np.asarray(b, np.int64), np.asarray(c, np.int64)))
    doc: dict = {"rows": out}
    # Parts compacted before the left-out counts were rolled up have none: their days'
    # `leftOut` is not counted (said, not passed off as none)
    from ..store.tables.view import rollup_vitals as rv

    old = {e.get("day") or "(unknown day)" for es in (p.entries or {})["rollup_vitals"]
           for e in es if not e.get(rv.LEFT_OUT_MARK)}
    if old:
        doc["leftOutUncountedDays"] = sorted(old)
    return doc


def _cut_rows(engine: Any, snap: Snapshot, f: Any, p: Any
              ) -> dict[tuple[str, str | None], dict]:
    """The rollup_vitals rows, per (release, route), of the uploads below the pin in the
    parts `p` left out for it (`rollups.plan`'s `left`), as a compaction batch of them
    would add them (`tables/vitals.batch_rows`): per page load (route, env, UTC day) its
    values with its chunks in the parts read, less those without these chunks. The parts
    read hold the day's uploads below every one left out (`rollups._apart`), so a page
    load's chunks there are its chunks before these. Only these page loads' timelines are
    read: the work of the uploads the pin cuts, not of the store's history."""
    import orjson

    from ..store.tables.view import day_of
    from ..store.tables.view import rollup_vitals as rv
    from .engine import read_part

    up = engine.uploads(snap, f)  # below the pin (`Snapshot.keep_live`)
    pos = {k: i for i, k in enumerate(p.rkeys)}
    left = p.left["rollup_vitals"]
    days = [day_of(float(t)) for t in up.received_at.tolist()]
    cut = np.zeros(len(up), bool)
    for i, (rk, day, uk) in enumerate(zip(up.rkey, days, up.uk.tolist(), strict=True)):
        spans = left[pos[rk]].get(day) if rk in pos else None
        cut[i] = spans is not None and any(s is None or s[0] <= uk <= s[1] for s in spans)
    if not cut.any():
        return {}
    loads = {(up.rkey[i], days[i], up.page_load[i]) for i in np.nonzero(cut)[0].tolist()
             if up.page_load[i] is not None}
    before = np.asarray([not c and (rk, d, pl) in loads for c, rk, d, pl in zip(
        cut.tolist(), up.rkey, days, up.page_load, strict=True)], bool)
    keys = np.unique(up.uk[cut | before])
    want = set(keys.tolist())
    cells: dict[int, tuple] = {}
    for part in snap.upload_files(f):
        # the metas (the bulk of an uploads part) only of the parts that hold one: most
        # are below the pin, their page loads in the rollups
        if not np.isin(read_part(part, ["uk"]).column("uk").to_numpy(), keys).any():
            continue
        t = read_part(part, ["uk", "route", "env", "meta"]).to_pydict()
        for uk, route, env, meta in zip(t["uk"], t["route"], t["env"], t["meta"],
                                        strict=True):
            if uk in want:
                tl_ = (orjson.loads(meta) if meta else {}).get("timeline")
                cells[uk] = (route, env, tl_ if isinstance(tl_, dict) else None)
    batches: dict[tuple, dict[str, list]] = {}
    prior: dict[tuple, dict[tuple, list]] = {}
    for i in np.argsort(up.uk, kind="stable").tolist():  # chunks in upload order
        if not (cut[i] or before[i]):
            continue
        route, env, tl_ = cells.get(int(up.uk[i]), (None, None, None))
        key = (up.rkey[i], days[i])
        if before[i]:
            prior.setdefault(key, {}).setdefault((route, env, up.page_load[i]), []).append(tl_)
            continue
        b = batches.setdefault(key, {"route": [], "env": [], "page_load": [], "timeline": []})
        for k, v in (("route", route), ("env", env), ("page_load", up.page_load[i]),
                     ("timeline", tl_)):
            b[k].append(v)
    out: dict[tuple[str, str | None], dict] = {}
    for (rk, day), b in batches.items():
        mine = prior.get((rk, day), {})
        t = rv.batch_rows(b, lambda want, mine=mine: {k: mine[k] for k in want if k in mine})
        rel = snap.manifest["releases"][rk]["release"]
        for j, route in enumerate(t["route"]):
            acc = out.setdefault((rel, None if route is None else str(route)), {
                "metric": [], "label": [], "bucket": [], "count": []})
            for k in acc:
                acc[k].append(t[k][j])
    return {k: {"metric": np.asarray(v["metric"], np.int64), "label": v["label"],
                "bucket": np.asarray(v["bucket"], np.int64),
                "count": np.asarray(v["count"], np.int64)} for k, v in out.items()}


def left_out_words(n: dict, what: str) -> str | None:
    """The words for `leftOut` counts `n` (`timeline.LEFT_OUT_KINDS`) not in `what` (None:
    all 0): what the clients cut, and the page loads whose running piece's samples never
    came (its Profiler.stop() does not resolve as a page is unloaded)."""
    from ..words import plural

    def got(k: str) -> int:
        return int(n.get(k) or 0)

    out = []
    if got("interactions") or got("longFrames"):
        out.append("left out by the clients (past their caps, or cut to fit a page's way "
                   f"out), not in {what}: {plural(got('interactions'), 'interaction')}, "
                   f"{plural(got('longFrames'), 'long frame')}")
    if got("unsampledPageLoads"):
        out.append(f"{plural(got('unsampledPageLoads'), 'page load')} ended with "
                   f"{got('unsampledMs') / 1000:.1f} s unsampled (the piece profiling as the "
                   "page left: its samples never came; "
                   f"{plural(got('unsampledInteractions'), 'interaction')} and "
                   f"{plural(got('unsampledLongFrames'), 'long frame')} in it)")
    return "; ".join(out) or None


def left_out_note(doc: dict) -> str | None:
    """`fleet vitals`' one line on what the clients left out, over its rows (None: none
    and no day uncounted): the p75s are of what was sent, which lost those."""
    from ..timeline import LEFT_OUT_KINDS

    n = {k: sum(int((r.get("leftOut") or {}).get(k) or 0) for r in doc["rows"])
         for k in LEFT_OUT_KINDS}
    days = doc.get("leftOutUncountedDays") or []
    line = left_out_words(n, "these p75s")
    if not line and not days:
        return None
    from ..words import plural

    line = line or "nothing left out by the clients"
    if days:
        line += (f"; not counted on {plural(len(days), 'day')} compacted before they were "
                 f"({days[0]}{' to ' + days[-1] if len(days) > 1 else ''})")
    return line


def _row(app: str, release: str, route: str | None, metric: np.ndarray, label: list,
         bucket: np.ndarray, count: np.ndarray) -> dict:
    """One (release, route)'s row from its rollup_vitals counts: the p75s of bucket
    middles (within 1 % of each value), interpolated as numpy's default percentile."""
    from ..store.tables.view import quantiles
    from ..store.tables.view import rollup_vitals as rv
    from ..timeline import LEFT_OUT_KINDS

    metric = np.asarray(metric, np.int64)
    count = np.asarray(count, np.int64)
    label = [str(x) for x in label]

    def n_of(m: int, lab: str | None = None) -> int:
        on = metric == m
        if lab is not None:
            on &= np.asarray([x == lab for x in label], bool)
        return int(count[on].sum())

    def p75(m: int, lab: str | None = None, digits: int = 3) -> float | None:
        on = metric == m
        if lab is not None:
            on &= np.asarray([x == lab for x in label], bool)
        on &= count != 0
        if not count[on].sum():
            return None
        _, (q,) = quantiles(np.zeros(int(on.sum()), np.int64), bucket[on], count[on], 1,
                            (0.75,))
        return round(float(q[0]), digits)

    elements: dict[str, int] = {}
    types: set[str] = set()
    for m, lab, c in zip(metric.tolist(), label, count.tolist(), strict=True):
        if m == rv.LCP_ELEMENT and c:
            elements[lab] = elements.get(lab, 0) + c
        elif m == rv.DURATION and c:
            types.add(lab)
    return {
        "app": app, "release": release, "route": route,
        "pageLoads": n_of(rv.LOAD), "interactions": n_of(rv.DURATION),
        "inpP75Ms": p75(rv.INP), "inpPageLoads": n_of(rv.INP),
        "longFrames": n_of(rv.LONG_FRAME),
        "longFrameBlockingP75Ms": p75(rv.BLOCKING),
        "lcpP75Ms": p75(rv.LCP), "lcpPageLoads": n_of(rv.LCP),
        # the elements LCP named, the most page loads first (at most 5)
        "lcpElements": [{"element": k, "pageLoads": n} for k, n in sorted(
            elements.items(), key=lambda kv: (-kv[1], kv[0]))[:5] if n],
        "clsP75": p75(rv.CLS, digits=4), "clsPageLoads": n_of(rv.CLS),
        # what the clients counted and did not send (past their caps, or cut to fit a
        # page's way out): not in these p75s, which may lean fast for it
        "leftOut": {k: n_of(rv.LEFT_OUT, k) for k in LEFT_OUT_KINDS},
        "interactionTypes": {
            k: {"count": n_of(rv.DURATION, k), "p75Ms": p75(rv.DURATION, k),
                "inputDelayP75Ms": p75(rv.INPUT_DELAY, k),
                "processingP75Ms": p75(rv.PROCESSING, k),
                "presentationP75Ms": p75(rv.PRESENTATION, k)}
            for k in sorted(types)
        },
    }


def upload_vitals(timeline: dict | None, chunks: int = 1) -> list[tuple[str, str, str]]:
    """An upload's page load's vitals from its timeline (every chunk's of that page load,
    `chunks` uploads, merged), as (key, label, text) lines for the upload's page (`GET
    /v1/traces/{id}/flame`): LCP with its element, INP by web-vitals' rule with its
    target, the long frames' blocking, the load's milestones and CLS."""

    def ms(v: float | None) -> str:
        return "\u2013" if v is None else f"{v:,.0f} ms"

    if not timeline:
        return [("timeline", "Timeline", "none sent with this upload (no vitals)")]
    ld = timeline.get("load") or {}
    out = [("pageLoad", "Page load",
            "this upload" if chunks == 1 else f"{chunks} uploads (its chunks), merged")]
    lcp = ld.get("lcp")
    what = ", ".join(x for x in (ld.get("lcpElement"), ld.get("lcpUrl")) if x)
    out.append(("lcp", "LCP", ms(lcp) + (f" ({what})" if lcp is not None and what else "")))
    inter = timeline.get("interactions") or []
    v = inp([e["duration"] for e in inter])
    if v is None:
        out.append(("inp", "INP", "\u2013 (no interaction of 16 ms or more)"))
    else:
        e = next(x for x in inter if x["duration"] == v)
        out.append(("inp", "INP", f"{ms(v)} ({e.get('type') or 'interaction'} on "
                    f"{e.get('target') or '(unknown)'})"))
    out.append(("interactions", "Interactions", str(len(inter))))
    frames = timeline.get("longFrames") or []
    blocking = [f.get("blockingDuration") or 0.0 for f in frames]
    out.append(("longFrames", "Long frames", f"{len(frames)}" + (
        f" (blocking {ms(sum(blocking))} in all, longest {ms(max(blocking))})"
        if frames else "")))
    for k, label in (("responseStart", "TTFB"), ("domContentLoaded", "DOMContentLoaded"),
                     ("load", "Load")):
        if ld.get(k) is not None:
            out.append((k, label, ms(ld[k])))
    if ld.get("cls") is not None:
        out.append(("cls", "CLS", f"{ld['cls']:.3f}"))
    dropped = timeline.get("dropped") or {}
    if any(dropped.values()):
        out.append(("dropped", "Left out by the client's caps",
                    ", ".join(f"{n} {k}" for k, n in dropped.items() if n)))
    u = timeline.get("unsampledCounts") or {}
    if u:
        out.append(("unsampled", "Not sampled as the page left",
                    f"{ms(u['ms'])} of the piece profiling then (its samples never came; "
                    f"{u['interactions']} interactions, {u['longFrames']} long frames in it)"))
    return out
