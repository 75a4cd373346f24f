"""The browser client's `timeline`: what made users wait, on the trace's clock.

An upload's envelope may carry `timeline` (jsprof-client.js): the long animation frames
(LoAF) and interactions (Event Timing) observed since the chunk before, and the page
load (navigation timing, LCP). `check` is the collector's validation (one error naming
the field, like the trace's); the rest is what fleet queries do with it: the windows a
`--during` query keeps samples in, and the names of the script entry points that samples
the browser lost their stacks in are charged to (analysis/busy.py). Pure: stdlib, numpy
and the model. The local Chromium engine records the same shape (the client's Timeline
class runs in its page helper) and keeps it as spans of the page's track (`to_spans`);
`from_spans` gives it back for `report --during`, `of_track` with an upload's own.

Times are ms of the page's `performance.now()`, the clock of the trace's samples. Every
chunk of one page load shares that clock, so windows are gathered per page load (the
client's `pageLoad` id; an upload without one is a page load of its own): an interaction
reported in the chunk after the one holding its samples still covers them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .trace import SPAN_KIND_CODE, SpanColumns, Spans, Track

# What one upload's timeline may hold (the client's TIMELINE_LIMITS; docs/field.md).
MAX_LONG_FRAMES = 50
MAX_SCRIPTS = 10
MAX_INTERACTIONS = 100
MAX_TEXT = 256
MAX_URL = 2048
MAX_TIME_MS = 1e10  # ~115 days of a page's performance.now(): beyond is not a page's clock
# A page load's left-out count kept at most this (a client's counts are checked below
# 2**53 only: a thousand such summed would pass int64); every query that sums them
# (fleet vitals' rollups, fleet interactions) takes it from `left_out`, so they agree.
LEFT_OUT_MAX = 2**32

DURING = ("interaction", "long-frame", "load")
# --slower-than defaults: an interaction over 200 ms is "poor" INP; a long frame with 50 ms
# of blocking is one that blocked input for as long as a long task does.
DEFAULT_SLOWER_THAN = {"interaction": 200.0, "long-frame": 50.0, "load": 0.0}
NOT_CAPTURED = "(stack not captured)"


class TimelineError(ValueError):
    """A timeline the collector refuses: the message names the field."""


def _kind(v: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}.get(
        type(v), "null" if v is None else "a number")


def _num(obj: dict, key: str, where: str, required: bool = False, lo: float = 0.0,
         ) -> float | None:
    v = obj.get(key)
    if v is None:
        if required:
            raise TimelineError(f"{where}.{key}: missing; expected a number of ms")
        return None
    if type(v) not in (int, float) or not math.isfinite(v) or not lo <= v <= MAX_TIME_MS:
        raise TimelineError(
            f"{where}.{key}: expected a number of ms from {lo:g} to {MAX_TIME_MS:g}, got "
            f"{v if type(v) in (int, float) else _kind(v)}")
    return float(v)


def _text(obj: dict, key: str, where: str, cap: int = MAX_TEXT) -> str | None:
    v = obj.get(key)
    if v is None:
        return None
    if type(v) is not str:
        raise TimelineError(f"{where}.{key}: expected a string or null, got {_kind(v)}")
    if len(v) > cap:
        raise TimelineError(f"{where}.{key}: {len(v)} characters, over the limit of {cap}")
    return v


def _obj(v: Any, where: str, keys: tuple[str, ...]) -> dict:
    if type(v) is not dict:
        raise TimelineError(f"{where}: expected an object, got {_kind(v)}")
    extra = sorted(set(v) - set(keys))
    if extra:
        raise TimelineError(f"{where}.{extra[0]}: unknown key; expected {', '.join(keys)}")
    return v


def _list(v: Any, where: str, cap: int) -> list:
    if v is None:
        return []
    if type(v) is not list:
        raise TimelineError(f"{where}: expected an array, got {_kind(v)}")
    if len(v) > cap:
        raise TimelineError(f"{where}: {len(v)} entries, over the limit of {cap}")
    return v


_FRAME_KEYS = ("start", "duration", "blockingDuration", "renderStart", "styleAndLayoutStart",
               "scripts")
_SCRIPT_KEYS = ("invoker", "invokerType", "sourceURL", "sourceFunctionName",
                "sourceCharPosition", "start", "duration", "forcedStyleAndLayoutDuration")
_INTERACTION_KEYS = ("id", "type", "start", "duration", "processingStart", "processingEnd",
                     "target")
_LOAD_KEYS = ("responseStart", "domContentLoaded", "load", "lcp", "lcpElement", "lcpUrl",
              "cls")
MAX_CLS = 1e6  # a score (the sum of layout-shift fractions), not ms: over 1 is rare already
_TOP_KEYS = ("longFrames", "interactions", "load", "dropped", "unsampled")
# `unsampled`: the piece a page's Profiler was running as the page left (jsprof-client.js
# `unsampledPiece`): its number in the page load, its start, the ms from there to the
# leaving (0 in the upload that brought its samples) and the long frames and interactions
# of the timeline that overlap it
_UNSAMPLED_KEYS = ("piece", "start", "ms", "longFrames", "interactions")
UNSAMPLED_KINDS = ("ms", "longFrames", "interactions")


def _strip(url: str | None) -> str | None:
    if url is None:
        return None
    cut = min((i for i in (url.find("?"), url.find("#")) if i >= 0), default=len(url))
    return url[:cut]


def check(doc: Any, where: str = "body.timeline", keep_query: bool = False) -> dict:
    """The timeline as the store keeps it (only known keys, URLs without their query
    unless `keep_query`), or TimelineError naming the first bad field."""
    t = _obj(doc, where, _TOP_KEYS)
    frames = []
    for i, f in enumerate(_list(t.get("longFrames"), f"{where}.longFrames", MAX_LONG_FRAMES)):
        w = f"{where}.longFrames[{i}]"
        f = _obj(f, w, _FRAME_KEYS)
        scripts = []
        for j, s in enumerate(_list(f.get("scripts"), f"{w}.scripts", MAX_SCRIPTS)):
            ws = f"{w}.scripts[{j}]"
            s = _obj(s, ws, _SCRIPT_KEYS)
            url = _text(s, "sourceURL", ws, MAX_URL)
            scripts.append({
                "invoker": _text(s, "invoker", ws),
                "invokerType": _text(s, "invokerType", ws),
                "sourceURL": url if keep_query else _strip(url),
                "sourceFunctionName": _text(s, "sourceFunctionName", ws),
                "sourceCharPosition": _num(s, "sourceCharPosition", ws, lo=-1),
                "start": _num(s, "start", ws, required=True),
                "duration": _num(s, "duration", ws, required=True),
                "forcedStyleAndLayoutDuration": _num(s, "forcedStyleAndLayoutDuration", ws),
            })
        frames.append({
            "start": _num(f, "start", w, required=True),
            "duration": _num(f, "duration", w, required=True),
            "blockingDuration": _num(f, "blockingDuration", w),
            "renderStart": _num(f, "renderStart", w),
            "styleAndLayoutStart": _num(f, "styleAndLayoutStart", w),
            "scripts": scripts,
        })
    inters = []
    for i, e in enumerate(_list(t.get("interactions"), f"{where}.interactions",
                                MAX_INTERACTIONS)):
        w = f"{where}.interactions[{i}]"
        e = _obj(e, w, _INTERACTION_KEYS)
        iid = e.get("id")
        if iid is not None and (type(iid) is not int or not 0 <= iid < 2**53):
            raise TimelineError(f"{w}.id: expected a whole number (the interactionId), got "
                                f"{iid if type(iid) in (int, float) else _kind(iid)}")
        inters.append({
            "id": iid,
            "type": _text(e, "type", w),
            "start": _num(e, "start", w, required=True),
            "duration": _num(e, "duration", w, required=True),
            "processingStart": _num(e, "processingStart", w),
            "processingEnd": _num(e, "processingEnd", w),
            "target": _text(e, "target", w),
        })
    load = None
    if t.get("load") is not None:
        w = f"{where}.load"
        ld = _obj(t["load"], w, _LOAD_KEYS)
        load = {k: _num(ld, k, w) for k in _LOAD_KEYS[:4]}
        load["lcpElement"] = _text(ld, "lcpElement", w)
        url = _text(ld, "lcpUrl", w, MAX_URL)
        load["lcpUrl"] = url if keep_query else _strip(url)
        cls = ld.get("cls")
        if cls is not None and (type(cls) not in (int, float) or not math.isfinite(cls)
                                or not 0 <= cls <= MAX_CLS):
            got = cls if type(cls) in (int, float) else _kind(cls)
            raise TimelineError(f"{w}.cls: expected a layout-shift score from 0 to "
                                f"{MAX_CLS:g}, got {got}")
        load["cls"] = None if cls is None else float(cls)
    dropped = {}
    if t.get("dropped") is not None:
        w = f"{where}.dropped"
        d = _obj(t["dropped"], w, ("longFrames", "interactions"))
        for k in ("longFrames", "interactions"):
            v = d.get(k, 0)
            if type(v) is not int or not 0 <= v < 2**53:
                raise TimelineError(f"{w}.{k}: expected a whole number, got {_kind(v)}")
            dropped[k] = v
    out = {"longFrames": frames, "interactions": inters, "load": load, "dropped": dropped}
    if t.get("unsampled") is not None:
        out["unsampled"] = _unsampled(t["unsampled"], f"{where}.unsampled")
    return out


def _unsampled(v: Any, where: str) -> dict:
    u = _obj(v, where, _UNSAMPLED_KEYS)
    out: dict = {}
    for k in ("piece", "longFrames", "interactions"):
        n = u.get(k, 0)
        if type(n) is not int or not 0 <= n < 2**53:
            raise TimelineError(f"{where}.{k}: expected a whole number, got "
                                f"{n if type(n) in (int, float) else _kind(n)}")
        out[k] = n
    out["start"] = _num(u, "start", where, required=True)
    out["ms"] = _num(u, "ms", where, required=True)
    # Long frames run one after another on the page's main thread, each 50 ms or more:
    # a piece of `ms` overlaps at most ms / 50 + 2 of them (review14: one upload claimed
    # 2**53 of them in a piece, the fleet's leftOut summed it).
    most = int(out["ms"] // 50) + 2
    if out["longFrames"] > most:
        raise TimelineError(f"{where}.longFrames: {out['longFrames']} long frames in a piece "
                            f"of {out['ms']:g} ms, where at most {most} fit (each is 50 ms "
                            "or more)")
    return out


# ---- per page load ----------------------------------------------------------------------------


@dataclass
class PageLoad:
    """Every chunk's timeline of one page load, merged."""

    long_frames: list[dict]
    interactions: list[dict]  # one per interactionId (the longest report of it)
    load: dict | None
    # What the client counted and did not send (`timeline.dropped`: past a chunk's caps,
    # cut to fit the keepalive budget at pagehide): per kind its largest count over the
    # chunks (a client's counts only grow)
    dropped: dict[str, int] = field(default_factory=dict)
    # The pieces running as the page left, per piece number: its smallest report (the
    # upload sent as the page left counts it; the one that brought its samples says 0)
    unsampled: dict[int, dict] = field(default_factory=dict)

    def unsampled_counts(self) -> dict[str, int]:
        """What the page load's client could not send of its running pieces: `ms` (whole
        ms of wall clock), `longFrames` and `interactions` overlapping them (summed over its
        pieces; {} when none went unsampled)."""
        got = [u for u in self.unsampled.values() if u["ms"] > 0]
        if not got:
            return {}
        return {"ms": round(sum(u["ms"] for u in got)),
                "longFrames": sum(u["longFrames"] for u in got),
                "interactions": sum(u["interactions"] for u in got)}

    def windows(self, during: str, slower_than: float,
                pick: Callable[[dict], bool] | None = None) -> list[tuple[float, float]]:
        """[start, end) of each window a `--during` query keeps samples in; `pick`: only
        the interactions it says yes to (`fleet interactions`: one target and type)."""
        if during == "interaction":
            return [(e["start"], interaction_end(e)) for e in self.interactions
                    if e["duration"] >= slower_than and (pick is None or pick(e))]
        if during == "long-frame":
            return [(f["start"], f["start"] + f["duration"]) for f in self.long_frames
                    if (f.get("blockingDuration") or 0.0) >= slower_than]
        ld = self.load or {}
        end = max((ld.get(k) or 0.0) for k in ("load", "lcp", "domContentLoaded"))
        return [(0.0, end)] if end > 0 and end >= slower_than else []


def interaction_end(e: dict) -> float:
    """Where an interaction's window ends: its longest event's end, or the end of its
    handlers when later. The client reports the interaction as its first event's start and
    its longest event's duration (the INP value, as web-vitals counts it), so a click whose
    pointerdown came long before it (a press held 150 ms) ends, by those two, before its
    click handler does; the handlers are what users waited for."""
    return max(e["start"] + e["duration"], e.get("processingEnd") or 0.0)


# An interaction's name by rank (jsprof-client.js INTERACTION_RANK): its click, else its
# keydown, else the event seen.
INTERACTION_RANK = {"click": 2, "keydown": 1}
# Events of one interaction whose frames rendered this close are one frame's (web-vitals:
# Event Timing rounds durations to 8 ms). jsprof-client.js SAME_FRAME_MS is the same.
SAME_FRAME_MS = 8.0


def merge_interaction(old: dict, e: dict) -> dict:
    """Two reports of one interaction (same `id`, the client's shape) as one, by the
    client's rule (jsprof-client.js `mergeInteraction`): the longest event's timings (INP
    counts an interaction once, by its longest event), widened by the other's only when
    the two ended in one frame (web-vitals' grouping: render times within SAME_FRAME_MS),
    the higher-ranked type, the first target given. Events of other frames keep out: a key
    held 300 ms is a keydown and a keyup frames apart, and their first start to last
    processing end made processing longer than the interaction (354 against 200 ms)."""
    longer = e if e["duration"] > old["duration"] else old
    other = old if longer is e else e
    out = dict(old)
    for k in ("start", "duration", "processingStart", "processingEnd"):
        out[k] = longer.get(k)
    if abs(_render_end(longer) - _render_end(other)) <= SAME_FRAME_MS:
        out["start"] = min(old["start"], e["start"])
        for k, pick in (("processingStart", min), ("processingEnd", max)):
            got = [v for v in (old.get(k), e.get(k)) if v is not None]
            out[k] = pick(got) if got else None
    rank = INTERACTION_RANK.get
    if rank(e.get("type") or "", 0) > rank(old.get("type") or "", 0):
        out["type"] = e.get("type")
    if not out.get("target"):
        out["target"] = e.get("target")
    return out


def _render_end(e: dict) -> float:
    """When the frame that presented the event's result was rendered (Event Timing:
    startTime + duration, which the browser rounds to 8 ms)."""
    return float(e["start"]) + float(e["duration"])


def inp(durations: list[float]) -> float | None:
    """A page load's INP from its interactions' durations (web-vitals' rule: the slowest,
    ignoring one for every 50 interactions)."""
    if not durations:
        return None
    d = sorted(durations, reverse=True)
    return d[min(len(d) - 1, len(d) // 50)]


def page_loads(timelines: list[tuple[str, dict | None]]) -> dict[str, PageLoad]:
    """(page-load key, timeline) per upload -> each page load's merged timeline."""
    out: dict[str, PageLoad] = {}
    for key, t in timelines:
        pl = out.setdefault(key, PageLoad([], [], None))
        if not t:
            continue
        pl.long_frames.extend(t.get("longFrames") or [])
        for k, v in (t.get("dropped") or {}).items():
            if isinstance(v, int) and v > pl.dropped.get(k, 0):
                pl.dropped[k] = v
        u = t.get("unsampled")
        if u:
            old = pl.unsampled.get(u["piece"])
            if old is None or u["ms"] < old["ms"]:
                pl.unsampled[u["piece"]] = u
        for e in t.get("interactions") or []:
            old = next((k for k, o in enumerate(pl.interactions)
                        if e.get("id") is not None and o.get("id") == e.get("id")), None)
            if old is None:
                pl.interactions.append(e)
            else:
                # One user action reported in two chunks (a keydown in one, its keyup in
                # the next): one interaction, as the client folds its own parts.
                pl.interactions[old] = merge_interaction(pl.interactions[old], e)
        ld = t.get("load")
        if ld:
            # LCP is final only at the first input: later chunks know more; keep any value.
            merged = dict(pl.load or {})
            merged.update({k: v for k, v in ld.items() if v is not None})
            if (pl.load or {}).get("cls") is not None and ld.get("cls") is not None:
                merged["cls"] = max(pl.load["cls"], ld["cls"])  # it only grows: the latest
            pl.load = merged
    return out


# What a page load's client counted and did not send, as `fleet vitals` and `fleet
# interactions` report it (`leftOut`): interactions and long frames past its caps or cut
# to fit the keepalive budget (`timeline.dropped`), and its running pieces whose samples
# never came (`timeline.unsampled`): page loads, ms, and the long frames and interactions
# in them
LEFT_OUT_KINDS = ("interactions", "longFrames", "unsampledPageLoads", "unsampledMs",
                  "unsampledLongFrames", "unsampledInteractions")


def left_out(pl: PageLoad) -> dict[str, int]:
    """One merged page load's `LEFT_OUT_KINDS` counts (every kind, 0 when none)."""
    d = pl.dropped or {}
    u = pl.unsampled_counts()
    out = {k: int(d.get(k) or 0) for k in ("interactions", "longFrames")}
    out["unsampledPageLoads"] = 1 if u else 0
    out["unsampledMs"] = u.get("ms", 0)
    out["unsampledLongFrames"] = u.get("longFrames", 0)
    out["unsampledInteractions"] = u.get("interactions", 0)
    return {k: min(n, LEFT_OUT_MAX) for k, n in out.items()}


def in_windows(times: np.ndarray, windows: list[tuple[float, float]]) -> np.ndarray:
    """Which of `times` lie in any [start, end) window."""
    keep = np.zeros(len(times), bool)
    for s, e in windows:
        keep |= (times >= s) & (times < e)
    return keep


def entry_name(s: dict) -> tuple[str, str | None]:
    """(function name, resource) of a LoAF script entry."""
    name = s.get("sourceFunctionName") or s.get("invoker") or "(anonymous)"
    return name, s.get("sourceURL") or None


# ---- as spans of a Recording (the local Chromium engine, report --during) ---------------------

LONG_FRAME_NAME = "long animation frame"
# Fields of an entry that are times on the page's clock (shifted with the span).
TIME_ARGS = ("renderStart", "styleAndLayoutStart", "processingStart", "processingEnd")
_FRAME_ARGS = ("blockingDuration", "renderStart", "styleAndLayoutStart")
_SCRIPT_ARGS = ("invoker", "invokerType", "sourceURL", "sourceFunctionName",
                "sourceCharPosition", "forcedStyleAndLayoutDuration")
_INTERACTION_ARGS = ("id", "type", "target", "processingStart", "processingEnd")


def check_span_args(kind: str, args: dict, where: str) -> None:
    """TimelineError unless a page window's span args (read back from a file, so any
    program's or person's data) have the types `to_spans` writes and `from_spans`,
    `interaction_end` and the Time view compute with: numbers of ms, strings, an id.
    Other keys are left be (they are shown, never computed with)."""
    if kind == "long-frame":
        keys: tuple[str, ...] = ("duration", *_FRAME_ARGS)
    elif kind == "script":
        keys = _SCRIPT_ARGS
    elif kind == "interaction":
        keys = ("duration", *_INTERACTION_ARGS)
    else:
        return
    for k in keys:
        if k == "id":
            iid = args.get(k)
            if iid is not None and (type(iid) is not int or not 0 <= iid < 2**53):
                raise TimelineError(f"{where}.id: expected a whole number (the interactionId), "
                                    f"got {_kind(iid)}")
        elif k in ("invoker", "invokerType", "sourceURL", "sourceFunctionName", "type",
                   "target"):
            _text(args, k, where, MAX_URL if k == "sourceURL" else MAX_TEXT)
        elif k in TIME_ARGS:
            # on the track's clock (moved by its shift): any finite time a trace can hold
            _num(args, k, where, lo=-MAX_TIME_MS)
        else:
            _num(args, k, where, lo=-1 if k == "sourceCharPosition" else 0.0)


def span_args_problem(kind: str, args: dict) -> tuple[str, str] | None:
    """(key, problem) of the first bad field of a window's args (check_span_args), for a
    trace reader to name in its own words; None when they are fine."""
    try:
        check_span_args(kind, args, "")
    except TimelineError as e:
        key, _, problem = str(e).partition(": ")
        return key.lstrip("."), problem
    return None


def _args(entry: dict, keys: tuple[str, ...], shift: float) -> dict:
    out = {}
    for k in keys:
        v = entry.get(k)
        if v is not None:
            out[k] = v + shift if k in TIME_ARGS else v
    return out


def to_spans(timeline: dict, shift: float = 0.0) -> Spans:
    """A checked timeline (`check`) as spans: each long frame with its script entries as
    children, then each interaction; times moved by `shift` ms (onto the track's clock)."""
    cols = SpanColumns(with_args=True)
    for f in sorted(timeline.get("longFrames") or (), key=lambda f: f["start"]):
        fi = cols.add("long-frame", f["start"] + shift, f["start"] + f["duration"] + shift,
                      label=LONG_FRAME_NAME, args=_args(f, _FRAME_ARGS, shift))
        for s in sorted(f.get("scripts") or (), key=lambda s: s["start"]):
            cols.add("script", s["start"] + shift, s["start"] + s["duration"] + shift,
                     parent=fi, label=entry_name(s)[0], args=_args(s, _SCRIPT_ARGS, shift))
    for e in sorted(timeline.get("interactions") or (), key=lambda e: e["start"]):
        # The span is the interaction's window; its reported duration (INP's) is an arg.
        a = _args(e, _INTERACTION_ARGS, shift)
        a["duration"] = e["duration"]
        cols.add("interaction", e["start"] + shift,
                 e["start"] + (interaction_end(e) - e["start"]) + shift,
                 label=e.get("type") or "interaction", args=a)
    return cols.build()


def of_track(track: Track) -> PageLoad:
    """What `track`'s page reported: its spans (a Chromium recording) and its meta's
    `timeline` (an upload as the collector gives it back, `GET /v1/traces/{id}`), as one
    PageLoad. A meta timeline that fails the collector's check (a hand-edited file) is
    not read: it is data like the rest of the file, never trusted."""
    pl = from_spans(track.spans)
    doc = track.meta.get("timeline") if isinstance(track.meta, dict) else None
    if doc:
        try:
            got = page_loads([("", check(doc, "meta.timeline", keep_query=True))])[""]
        except TimelineError:
            return pl
        pl.long_frames += got.long_frames
        pl.interactions += got.interactions
        pl.load = got.load
    return pl


def from_spans(spans: Spans | None) -> PageLoad:
    """A track's long-frame and interaction spans as the fleet's PageLoad (the client's
    shape), so windows and entry points are found by one set of rules."""
    pl = PageLoad([], [], None)
    if spans is None or not len(spans):
        return pl
    frames: dict[int, dict] = {}
    kinds = spans.kind.tolist()  # type: ignore[union-attr]
    for i, k in enumerate(kinds):
        a = spans.arg(i)
        s, d = float(spans.start[i]), float(spans.end[i] - spans.start[i])
        if k == SPAN_KIND_CODE["long-frame"]:
            frames[i] = {"start": s, "duration": d, **{x: a.get(x) for x in _FRAME_ARGS},
                         "scripts": []}
            pl.long_frames.append(frames[i])
        elif k == SPAN_KIND_CODE["interaction"]:
            pl.interactions.append({"start": s, "duration": a.get("duration", d),
                                    **{x: a.get(x) for x in _INTERACTION_ARGS}})
    for i, k in enumerate(kinds):
        p = int(spans.parent[i])
        if k == SPAN_KIND_CODE["script"] and p in frames:
            a = spans.arg(i)
            frames[p]["scripts"].append({
                "start": float(spans.start[i]), "duration": float(spans.end[i] - spans.start[i]),
                **{x: a.get(x) for x in _SCRIPT_ARGS}})
    return pl
