"""`jsprof fleet interactions`: what users waited for, per interaction target and type.

The client names each interaction's target by a selector computed in the browser when
the entry is observed (jsprof-client.js `describeTarget`: an id, else tag, classes and
nth-of-type steps; never text). Per (target, type) over the matching page loads:

- `count`, `pageLoads`, `p75Ms` and `maxMs` of the interactions' durations (the INP value
  of each: its longest event), and the p75 of input delay, processing and presentation;
- `inpPageLoads`: of how many page loads this target's interaction was the INP one (the
  web-vitals rule of `fleet vitals`): the rows are ranked by it, then by `p75Ms`, so the
  first row is the target whose slowness most often is the page's INP;
- `longFrames` and `longFrameMs`: the long animation frames overlapping its interactions
  and how many of their ms fell inside the interactions' windows;
- `functions`: for the first `with_functions` rows, the functions that ran during those
  interactions: `fleet top --during interaction --slower-than 0 --exclude-idle` over only
  this target's interactions (one plan: `during.select_during` with a `pick`), self time
  first, with the stack-less samples of long frames charged to their entry points as
  `--during` charges them. `sampledMs` is the sampled time in those windows, over
  `functionsPageLoads` page loads: all of them, or an even spread of MAX_FUNCTION_LOADS.

The groups come from the timelines in the uploads table (no record read); the functions
read the raw records of the page loads that have the target, as `--during` does.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from . import timeline as tl
from .engine import Snapshot
from .vitals import _p75, inp, upload_rows

UNKNOWN = "(unknown)"
# Page loads whose raw records a row's functions read at most (an even spread of them):
# each is a record read per upload (~3 ms), and the dashboard asks on every refresh.
MAX_FUNCTION_LOADS = 100


def key_of(e: dict) -> tuple[str, str]:
    """An interaction's row: (target selector, type); a target the browser did not give
    (the element was gone) is "(unknown)"."""
    return (e.get("target") or UNKNOWN, e.get("type") or UNKNOWN)


def _overlap(a0: float, a1: float, b0: float, b1: float) -> float:
    return max(0.0, min(a1, b1) - max(a0, b0))


def interactions(engine: Any, snap: Snapshot, f: Any, top: int | None = 20,
                 functions: int = 5, with_functions: int = 10) -> dict:
    """The `fleet interactions --json` document (without the store notes)."""
    import numpy as np

    from . import query

    up = engine.uploads(snap, f)
    rows = upload_rows(snap, f, up)
    keyed = []
    pl_key = []
    for i, uk in enumerate(up.uk.tolist()):
        key = up.page_load[i] or f"upload:{up.id[i]}"
        pl_key.append(key)
        keyed.append((key, rows.get(uk, (None, {}))[1].get("timeline")))
    loads = tl.page_loads(keyed)
    first = {}  # page load -> its first upload's place: an order that does not move
    for i, key in enumerate(pl_key):
        first.setdefault(key, i)
    groups: dict[tuple[str, str], dict] = {}
    total = 0
    for lkey, pl in loads.items():
        if not pl.interactions:
            continue
        total += len(pl.interactions)
        durs = [e["duration"] for e in pl.interactions]
        worst = inp(durs)
        inp_entry = next(e for e in pl.interactions if e["duration"] == worst)
        for e in pl.interactions:
            g = groups.setdefault(key_of(e), {
                "d": [], "delay": [], "processing": [], "presentation": [], "loads": set(),
                "inp": 0, "lf": 0, "lfMs": 0.0})
            g["d"].append(e["duration"])
            g["loads"].add(lkey)
            g["inp"] += e is inp_entry
            ps, pe = e.get("processingStart"), e.get("processingEnd")
            if ps is not None and pe is not None:
                g["delay"].append(max(0.0, ps - e["start"]))
                g["processing"].append(max(0.0, pe - ps))
                g["presentation"].append(max(0.0, e["start"] + e["duration"] - pe))
            s0, s1 = e["start"], tl.interaction_end(e)
            for fr in pl.long_frames:
                o = _overlap(s0, s1, fr["start"], fr["start"] + fr["duration"])
                if o > 0:
                    g["lf"] += 1
                    g["lfMs"] += o
    order = sorted(groups, key=lambda k: (-groups[k]["inp"], -(_p75(groups[k]["d"]) or 0.0),
                                          -len(groups[k]["d"]), k))
    shown = order if top is None else order[:top]
    out = []
    for n, k in enumerate(shown):
        g = groups[k]
        row = {
            "target": k[0], "type": k[1], "count": len(g["d"]), "pageLoads": len(g["loads"]),
            "inpPageLoads": g["inp"], "p75Ms": _p75(g["d"]), "maxMs": round(max(g["d"]), 3),
            "inputDelayP75Ms": _p75(g["delay"]), "processingP75Ms": _p75(g["processing"]),
            "presentationP75Ms": _p75(g["presentation"]),
            "longFrames": g["lf"], "longFrameMs": round(g["lfMs"], 3),
        }
        if n < with_functions and functions > 0:
            read = sorted(g["loads"], key=first.__getitem__)
            if len(read) > MAX_FUNCTION_LOADS:
                pick = np.linspace(0, len(read) - 1, MAX_FUNCTION_LOADS).round().astype(int)
                read = [read[j] for j in pick.tolist()]
            wanted = set(read)
            mine = np.asarray([p in wanted for p in pl_key], bool)
            sel = query.select(
                engine, snap,
                replace(f, during="interaction", slower_than=0.0, exclude_idle=True),
                up=up.subset(mine), pick=lambda e, k=k: key_of(e) == k)
            doc = query.top(engine, snap, sel, None)
            fns = sorted(doc["rows"], key=lambda r: -(r["selfMs"] or 0.0))[:functions]
            row["functionsPageLoads"] = len(read)  # of `pageLoads`: the ones read
            row["sampledMs"] = doc["totalMs"]
            row["attributedMs"] = doc.get("attributedMs", 0.0)
            row["functions"] = [
                {x: r[x] for x in ("name", "label", "resource", "line", "column", "selfMs",
                                   "totalMs", "selfPct")} for r in fns if (r["selfMs"] or 0) > 0]
        out.append(row)
    return {"app": f.app, "pageLoads": len(loads), "interactions": total,
            "targets": len(groups), "rows": out, "leftOut": left_out(keyed)}


def left_out(keyed: list[tuple[str, dict | None]]) -> dict[str, int]:
    """What the clients counted and did not send, over the page loads of `keyed` ((page
    load, timeline) per upload): interactions and long frames past a chunk's caps or cut
    to fit the keepalive budget as a page went away (jsprof-client.js `fitTimeline`). Per
    page load its largest count (a client's counts only grow), summed; and the page loads
    whose running piece's samples never came (`timeline.unsampled`), their ms and the
    interactions and long frames in those pieces (`timeline.LEFT_OUT_KINDS`)."""
    from ..timeline import LEFT_OUT_KINDS, page_loads
    from ..timeline import left_out as counts

    per_load = [counts(pl) for pl in page_loads(keyed).values()]
    return {k: sum(m[k] for m in per_load) for k in LEFT_OUT_KINDS}
