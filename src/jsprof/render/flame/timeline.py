"""The viewer's Time view block: per track, runs of samples in time order, its markers
and its spans (instrumented calls, the page's long frames and interactions) with their
tooltips."""

from __future__ import annotations

import numpy as np

from ...analysis.calltree import CallTree
from ...analysis.profile import _tracks
from ...trace import (
    MARKERS,
    NONE,
    SPAN_KIND_CODE,
    SPAN_KINDS,
    ProfilerTrace,
    Recording,
    Spans,
    function_keys,
    sample_weights,
)
from .escape import clean

TIME_RUNS = 200_000  # drawn runs per time lane at most: finer ones are merged by time
TIME_SPANS = 50_000  # spans per lane at most (the longest)


def _r(a: np.ndarray) -> list[float]:
    return np.round(a, 4).tolist()


def time_model(rec: Recording, tree: CallTree, index: np.ndarray, track: str | None,
               leaf_fn: np.ndarray | None = None, model_fn: np.ndarray | None = None) -> dict:
    """The time view's lanes: per track, runs of consecutive samples on one model node in
    time order (start, end ms on one clock), its markers (GC, style, layout, paint) and its
    spans (instrumented calls), with the names the spans need.

    `leaf_fn` (per tree node, the model's index of its function, -1: none; `model_fn`: the
    same per model node) gives each run
    its samples' own leaf function (`lf`) where it differs from the drawn node's: a node too
    thin for the model is drawn as its kept ancestor, but a range's table charges its time
    to the function that ran, as `report` does."""
    tracks = _tracks(rec, track)
    origins = [t.time_origin for t in tracks]
    base = min(origins) if origins and all(o is not None for o in origins) else None
    lanes = []
    span_names: dict[str, int] = {}
    for k, t in enumerate(tracks):
        tr = t.trace
        off = float(t.time_origin - base) if base is not None else 0.0  # type: ignore[operator]
        times = tr.sample_time.astype(np.float64) + off
        w = sample_weights(tr, t.sample_interval)
        st = tr.sample_stack
        snode = tree.track_stack_node[k] if k < len(tree.track_stack_node) else None
        has = st != NONE
        node = np.full(len(st), -1, np.int64)
        leaf = np.full(len(st), -1, np.int64)
        if snode is not None and len(snode):
            node[has] = index[snode[st[has]]]
            if leaf_fn is not None:
                leaf[has] = leaf_fn[snode[st[has]]]
        lane: dict = {"name": clean(t.name)}
        order = np.argsort(times, kind="stable")
        times, w, node, leaf = times[order], w[order], node[order], leaf[order]
        ends = times + w
        if len(times):
            # A run ends where the node or the leaf function changes, or where time no
            # sample stands for begins.
            brk = np.r_[True, (node[1:] != node[:-1]) | (leaf[1:] != leaf[:-1])
                        | (times[1:] > ends[:-1] + 1e-6)]
            first = np.nonzero(brk)[0]
            last = np.r_[first[1:] - 1, len(times) - 1]
            r0, r1, rn, rl = times[first], ends[last], node[first], leaf[first]
            ok = rn >= 0
            r0, r1, rn, rl = r0[ok], r1[ok], rn[ok], rl[ok]
            if len(r0) > TIME_RUNS:
                # Far more runs than pixels: one run per time slot, the slot's first node.
                width = (r1.max() - r0.min()) / TIME_RUNS
                slot = np.floor((r0 - r0.min()) / width).astype(np.int64)
                kidx = np.nonzero(np.r_[True, slot[1:] != slot[:-1]])[0]
                r1 = np.minimum(np.maximum.reduceat(r1, kidx), np.r_[r0[kidx[1:]], np.inf])
                r0, rn, rl = r0[kidx], rn[kidx], rl[kidx]
            lane.update(t0=_r(r0), t1=_r(r1), n=rn.tolist())
            if leaf_fn is not None and model_fn is not None:
                # -2 where the leaf is the drawn node's own function (most runs).
                lane["lf"] = np.where(rl == model_fn[rn], -2, rl).tolist()
        else:
            lane.update(t0=[], t1=[], n=[])
        if tr.sample_marker is not None and len(times):
            code = tr.sample_marker[order].astype(np.int64)
            shown = np.isin(code, [MARKERS.index(m) for m in ("gc", "style", "layout", "paint")])
            brk = np.r_[True, (code[1:] != code[:-1]) | (times[1:] > ends[:-1] + 1e-6)]
            first = np.nonzero(brk)[0]
            last = np.r_[first[1:] - 1, len(times) - 1]
            sel = shown[first]
            lane["mk"] = {
                "t0": _r(times[first][sel]),
                "t1": _r(ends[last][sel]),
                "c": [MARKERS[c] for c in code[first][sel].tolist()],
            }
        sp = t.spans
        if sp is not None and len(sp):
            groups = []
            for title, kinds in SPAN_LANES:
                sel = np.nonzero(np.isin(sp.kind, [SPAN_KIND_CODE[k] for k in kinds]))[0]  # type: ignore[arg-type]
                if len(sel):
                    groups.append(_span_lane(sp, sel, title, tr, off, span_names))
            # The calls' lane keeps its place (`sp`); the page's windows come as lanes of
            # their own (`sw`), one per kind of window, so an interaction never hides a frame.
            calls = [g for g in groups if g["title"] == "spans"]
            if calls:
                lane["sp"] = calls[0]
            wins = [g for g in groups if g["title"] != "spans"]
            if wins:
                lane["sw"] = wins
        lanes.append(lane)
    return {"lanes": lanes, "spanNames": list(span_names)}


# Lanes of a track's spans: (lane title after the track's name, the span kinds in it).
SPAN_LANES = (
    ("spans", ("call",)),
    ("long animation frames", ("long-frame", "script")),
    ("interactions", ("interaction",)),
)


def _span_lane(
    sp: Spans, sel: np.ndarray, title: str, tr: ProfilerTrace, off: float, span_names: dict
) -> dict:
    """One lane of spans (the `sel` ones, the longest TIME_SPANS of them): start, end,
    depth among the kept ones, name id; and for the page's windows, a tooltip each."""
    keys = function_keys(tr)
    pick = sel
    if len(sel) > TIME_SPANS:
        dur = sp.end[sel] - sp.start[sel]
        pick = np.sort(sel[np.argsort(-dur, kind="stable")[:TIME_SPANS]])
    pos = {int(i): j for j, i in enumerate(pick.tolist())}
    depth: list[int] = []
    par = sp.parent.tolist()
    for i in pick.tolist():
        # Depth among the kept spans: a dropped parent does not leave a gap.
        d, p = 0, par[i]
        while p >= 0 and d < 1000:
            if p in pos:
                d += 1
            p = par[p] if p < len(par) else -1
        depth.append(d)
    names = []
    tips = []
    for i in pick.tolist():
        own = sp.label(i)
        f = int(sp.frame[i])
        if own is not None:
            label = clean(own)
        else:
            label = clean(keys[f].label()) if 0 <= f < len(keys) else "(unknown)"
        names.append(span_names.setdefault(label, len(span_names)))
        if own is not None:
            tips.append(clean(_span_tip(sp, i, label)))
    out = {
        "title": title,
        "t0": _r(sp.start[pick] + off),
        "t1": _r(sp.end[pick] + off),
        "d": depth,
        "f": names,
    }
    if tips:
        out["tip"] = tips
    return out


def _ms(v: object) -> str:
    return f"{v:.1f} ms" if isinstance(v, (int, float)) else "?"


def _span_tip(sp: Spans, i: int, label: str) -> str:
    """A window's tooltip: what the page reported of it, in words (plain text)."""
    a = sp.arg(i)
    start, end = float(sp.start[i]), float(sp.end[i])
    kind = SPAN_KINDS[int(sp.kind[i])]  # type: ignore[index]
    if kind == "interaction":
        lines = [f"{label} on {a.get('target') or '(no target)'}",
                 f"duration {_ms(a.get('duration', end - start))} (as INP counts it)"]
        ps, pe = a.get("processingStart"), a.get("processingEnd")
        if isinstance(ps, (int, float)) and isinstance(pe, (int, float)):
            lines.append(f"input delay {_ms(ps - start)}, processing {_ms(pe - ps)}, "
                         f"presentation {_ms(max(end - pe, 0.0))}")
        return "\n".join(lines)
    if kind == "long-frame":
        # (its length and place follow on the tooltip's last line, as every box's do)
        lines = [label, f"blocking {_ms(a.get('blockingDuration'))}"]
        rs = a.get("renderStart")
        if isinstance(rs, (int, float)) and rs > 0:
            lines.append(f"rendering from {_ms(rs - start)} into the frame")
        return "\n".join(lines)
    where = a.get("sourceURL") or ""
    pos = a.get("sourceCharPosition")
    if where and isinstance(pos, (int, float)) and pos >= 0:
        where += f" (character {int(pos)})"
    lines = [f"script entry {label}",
             f"{a.get('invokerType') or 'invoker'}: {a.get('invoker') or '?'}"]
    if where:
        lines.append(where)
    forced = a.get("forcedStyleAndLayoutDuration")
    if isinstance(forced, (int, float)) and forced > 0:
        lines.append(f"forced style and layout {_ms(forced)}")
    return "\n".join(lines)
