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
linearly (numpy's default), as every fleet percentile does.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from . import timeline as tl
from .engine import Snapshot, Uploads


def _p75(values: list[float]) -> float | None:
    return round(float(np.percentile(values, 75)), 3) if values else None


def inp(durations: list[float]) -> float | None:
    """A page load's INP from its interactions' durations (web-vitals' rule)."""
    if not durations:
        return None
    d = sorted(durations, reverse=True)
    return d[min(len(d) - 1, len(d) // 50)]


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
    """The `fleet vitals --json` document."""
    up = engine.uploads(snap, f)
    rows = upload_rows(snap, f, up)
    groups: dict[tuple[str, str | None], list[tuple[str, dict | None]]] = {}
    for i, uk in enumerate(up.uk.tolist()):
        route, meta = rows.get(uk, (None, {}))
        key = up.page_load[i] or f"upload:{up.id[i]}"
        groups.setdefault((up.release[i], route), []).append((key, meta.get("timeline")))
    out = []
    for (release, route), items in sorted(
            groups.items(), key=lambda g: (g[0][1] or "", _version_key(g[0][0]))):
        loads = tl.page_loads(items)
        inps, lcps, blocking, clss = [], [], [], []
        elements: dict[str, int] = {}
        n_inter = 0
        types: dict[str, dict[str, list[float]]] = {}
        for pl in loads.values():
            n_inter += len(pl.interactions)
            v = inp([e["duration"] for e in pl.interactions])
            if v is not None:
                inps.append(v)
            if pl.load and pl.load.get("lcp") is not None:
                lcps.append(pl.load["lcp"])
                el = pl.load.get("lcpElement") or "(unknown)"
                elements[el] = elements.get(el, 0) + 1
            if pl.load and pl.load.get("cls") is not None:
                clss.append(pl.load["cls"])
            blocking += [fr["blockingDuration"] for fr in pl.long_frames
                         if fr.get("blockingDuration") is not None]
            for e in pl.interactions:
                t = types.setdefault(e.get("type") or "(unknown)", {
                    "d": [], "delay": [], "processing": [], "presentation": []})
                t["d"].append(e["duration"])
                ps, pe = e.get("processingStart"), e.get("processingEnd")
                if ps is not None and pe is not None:
                    t["delay"].append(max(0.0, ps - e["start"]))
                    t["processing"].append(max(0.0, pe - ps))
                    t["presentation"].append(max(0.0, e["start"] + e["duration"] - pe))
        out.append({
            "app": f.app, "release": release, "route": route,
            "pageLoads": len(loads), "interactions": n_inter,
            "inpP75Ms": _p75(inps), "inpPageLoads": len(inps),
            "longFrames": sum(len(pl.long_frames) for pl in loads.values()),
            "longFrameBlockingP75Ms": _p75(blocking),
            "lcpP75Ms": _p75(lcps), "lcpPageLoads": len(lcps),
            # the elements LCP named, the most page loads first (at most 5)
            "lcpElements": [{"element": k, "pageLoads": n} for k, n in sorted(
                elements.items(), key=lambda kv: (-kv[1], kv[0]))[:5]],
            "clsP75": None if not clss else round(float(np.percentile(clss, 75)), 4),
            "clsPageLoads": len(clss),
            "interactionTypes": {
                k: {"count": len(v["d"]), "p75Ms": _p75(v["d"]),
                    "inputDelayP75Ms": _p75(v["delay"]),
                    "processingP75Ms": _p75(v["processing"]),
                    "presentationP75Ms": _p75(v["presentation"])}
                for k, v in sorted(types.items())
            },
        })
    return {"rows": out}


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
    return out
