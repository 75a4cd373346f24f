"""Flame graphs as one self-contained SVG or HTML file: no external URLs, works offline.

The SVG draws its frames statically (rects, labels and <title> tooltips), so it is a
picture even where scripts do not run (an SVG in an <img>, an image viewer); a small
inline script (flame_svg.js) adds click-to-zoom, search and hover details. The HTML page
is the viewer: its script (flame.js) draws the flame graph on a canvas from binary
columns of the drawn frames and words their tooltips itself (a static SVG of tens of
thousands of elements was most of a big page's open), and lays out the other views from
JSON blocks. Frame names come from the profiled program, so they are untrusted: they
reach the page only as escaped XML/HTML text or as JSON with `<`, `>`, `&` and
U+2028/2029 escaped, and the HTML page's Content-Security-Policy allows only its own
script (by hash), so even a slip in escaping could not run an injected handler.

Layout, colours and pruning are rendering decisions; the numbers come from the CallTree.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import html
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from ..analysis.calltree import CallTree
from ..analysis.diff import TreeChange
from ..analysis.profile import FunctionKey, _tracks, hot_lines, repeats_an_ancestor, subtree_sums
from ..analysis.source import SourceFile
from ..analysis.transforms import resource_spellings
from ..meta import is_aggregated
from ..trace import (
    MARKERS,
    NO_STACK_NAMES,
    NONE,
    SPAN_KIND_CODE,
    SPAN_KINDS,
    ProfilerTrace,
    Recording,
    Spans,
    function_keys,
    sample_weights,
)
from .base import Renderer, flame_kind, visible
from .packed import pack_ints, pack_ms, quantize_ms
from .viewer_samples import sample_columns

ROW = 16  # px per stack level
FONT = 11  # px
CHAR_W = FONT * 0.62  # monospace advance, to fit labels without measuring text
PAD = 10  # px left/right
WIDTH = 1200  # px of the static drawing (the HTML page re-lays out to the window width)

ROOT_FN = -1  # flame node standing for all samples

_BAD_CHARS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff\ufffe\uffff]")


def clean(s: str) -> str:
    """Replace characters XML cannot carry at all (even escaped) with U+FFFD."""
    return _BAD_CHARS.sub("\ufffd", s)


def esc(s: str) -> str:
    """Escape for XML/HTML text and attribute values, bidirectional controls shown as
    escapes (base.visible: a name must not draw reversed)."""
    return html.escape(visible(clean(s)), quote=True)


def script_json(obj: object) -> str:
    """JSON safe inside <script> in HTML and in SVG (XML): no `<`, `>`, `&`, U+2028/9 raw.

    `</script>` cannot close the element early, `<!--` cannot open a comment, `&` cannot
    start an entity in XML, and the two line separators are escaped for old JS parsers.
    """
    data = orjson.dumps(obj).decode()
    return (
        data.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


# The viewer's other views (sandwich, time) read a finer tree than the drawing keeps: every
# node above this share of all time, at most MODEL_NODES of them, so zoom and the callers
# and callees of a function are exact for all but the thinnest paths and files stay bounded.
MODEL_SHARE = 1e-4
MODEL_NODES = 100_000
MODEL_FUNCTIONS = 50_000


def function_table(
    tree: CallTree, rep: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(self ms, total ms, self samples, total samples) per function of `tree`, as
    `report` counts them: a recursive function's total is taken at its outermost call
    (`rep`: `repeats_an_ancestor` of the tree's functions, when the caller has it)."""
    nf = len(tree.functions)
    fn = tree.function
    outer = ~(repeats_an_ancestor(tree.parent, fn) if rep is None else rep)
    self_ms = np.bincount(fn, weights=tree.self_ms, minlength=nf)
    total_ms = np.bincount(fn[outer], weights=tree.total_ms[outer], minlength=nf)
    self_n = np.bincount(fn, weights=tree.self_samples, minlength=nf)
    total_n = np.bincount(fn[outer], weights=tree.total_samples[outer], minlength=nf)
    return self_ms, total_ms, np.rint(self_n).astype(np.int64), np.rint(total_n).astype(np.int64)


def _model_nodes(tree: CallTree) -> tuple[np.ndarray, np.ndarray]:
    """The tree nodes the viewer's model keeps, and each tree node's nearest kept node
    (itself or an ancestor; -1 for none)."""
    total = float(tree.total_time)
    tm = tree.total_ms
    keep = (tm > 0) & (tm >= total * MODEL_SHARE)
    if int(keep.sum()) > MODEL_NODES:
        # A parent is never narrower than its child, so a cut by value keeps every kept
        # node's ancestors.
        cut = np.partition(tm[keep], -MODEL_NODES)[-MODEL_NODES]
        keep &= tm > cut
    nodes = np.nonzero(keep)[0]  # tree nodes are numbered level by level: parents first
    index = np.full(len(tm), -1, np.int64)
    index[nodes] = np.arange(len(nodes))
    # A dropped node stands for its nearest kept ancestor (climbing all dropped nodes at
    # once, one level a step).
    todo = np.nonzero(index < 0)[0]
    anc = tree.parent[todo]
    while len(todo):
        valid = anc >= 0
        got = valid & (index[np.maximum(anc, 0)] >= 0)
        index[todo[got]] = index[anc[got]]
        rest = valid & ~got
        todo, anc = todo[rest], tree.parent[anc[rest]]
    return nodes, index


def viewer_model(tree: CallTree, rep: np.ndarray | None = None) -> dict:
    """The data of the sandwich view: every function with its self and total, and the call
    tree's nodes above MODEL_SHARE (parents before children) to merge callers and callees."""
    total = float(tree.total_time)
    tm = tree.total_ms
    nodes, index = _model_nodes(tree)
    par = tree.parent[nodes]
    mparent = np.where(par < 0, -1, index[np.maximum(par, 0)])
    self_ms, total_ms, self_n, total_n = function_table(tree, rep)
    # Functions: those of the kept nodes and the widest others above MODEL_SHARE (a
    # function spread thinly over many paths is still a row).
    has = np.zeros(len(tree.functions), bool)
    has[tree.function[nodes]] = True
    rest = np.nonzero(~has & (total_n > 0) & (total_ms >= total * MODEL_SHARE))[0]
    rest = rest[np.argsort(-total_ms[rest], kind="stable")[:MODEL_FUNCTIONS]]
    has[rest] = True
    used = np.nonzero(has)[0]
    fmap = np.full(len(tree.functions), -1, np.int64)
    fmap[used] = np.arange(len(used))
    funcs = [tree.functions[i] for i in used.tolist()]
    # Time a dropped child stood for is not the parent's own: kept apart so the views can
    # say "(thinner paths)" instead of painting it as self time.
    return {
        "fname": [clean(f.label()) for f in funcs],
        "floc": [clean(f.location()) for f in funcs],
        "fself": [round(float(v), 6) for v in self_ms[used]],
        "ftotal": [round(float(v), 6) for v in total_ms[used]],
        "fselfN": self_n[used].tolist(),
        "ftotalN": total_n[used].tolist(),
        # the nodes' columns packed (render/packed.py; ms to 1e-6 as always)
        "parent": pack_ints(mparent),
        "fn": pack_ints(fmap[tree.function[nodes]]),
        "self": pack_ms(tree.self_ms[nodes]),
        "tot": pack_ms(tm[nodes]),
        "total": total,
        "nfunctions": int((total_n > 0).sum()),
        # each model node's call-tree node and each model function's tree function: a
        # range's numbers come per tree node (fg-index's numbering)
        "tn": pack_ints(nodes),
        "tf": used.tolist(),
        # For source_model and time_model, popped before the model is written: the
        # functions' keys, the nodes' functions.
        "_keys": funcs,
        "_fn": fmap[tree.function[nodes]],
    }


# The source view embeds only what it shows: each function's own lines (or windows around
# its sampled lines when it is long), lines cut at SOURCE_LINE_CHARS, SOURCE_CHARS in all.
SOURCE_CHARS = 2_000_000
SOURCE_LINE_CHARS = 400
SOURCE_FN_LINES = 300
SOURCE_FUNCTIONS = 5_000
SOURCE_WINDOW = 6  # lines either side of a sampled line in a long function


def source_model(
    rec: Recording,
    keys: list[FunctionKey],
    ftotal: list[float],
    track: str | None,
    read: Callable[[str], str | None] | None,
) -> dict:
    """The source view's data: per model function (index into `keys`), its self ms and
    samples per executing line as `report --by line` counts them (`hot_lines`), the line
    range shown, and the text of those lines where `read` (URL -> text or None) has it.
    `why` says why a function has no text: "noscript" (no script: a native or the
    engine's own frame), "nolocal" (its script is not a file here), "outside" (a local file
    the reader may not embed: outside the trace's and the current folder), "cap" (the size
    cap), or the reader's own `missing` word (the fleet's: "nomap", no source map of the
    release carries the text)."""
    lines = hot_lines(rec, track)
    rows: dict[FunctionKey, list[tuple[int, float, int]]] = {}
    total = 0.0
    if lines is not None:
        total = lines.total_ms
        st = lines.stats
        for k, m, n in zip(st.keys, st.self_ms.tolist(), st.self_samples.tolist(), strict=True):
            rows.setdefault(k.function, []).append((int(k.line), m, n))
    texts: dict[str, SourceFile | None] = {}
    kept: dict[str, dict[int, str]] = {}  # per file: line -> text
    # A reader with its own word for a missing text (the fleet's) lists every function of
    # a script, text or not: its traces have no line data, so the list is all there is.
    bare = getattr(read, "missing", None) is not None
    files: dict[str, int] = {}
    budget = SOURCE_CHARS
    out = []
    for f in sorted(range(len(keys)), key=lambda i: -ftotal[i]):
        key = keys[f]
        got = rows.get(key, [])
        if not got and (read is None or key.resource is None or not key.line):
            continue
        known = sorted(r for r in got if r[0] > 0)
        unk_ms = sum(r[1] for r in got if r[0] <= 0)
        unk_n = sum(r[2] for r in got if r[0] <= 0)
        sf = None
        why = ""
        if key.resource is None:
            why = "noscript"
        elif read is not None:
            if key.resource not in texts:
                text = read(key.resource)
                texts[key.resource] = None if text is None else SourceFile(text, key.resource)
            sf = texts[key.resource]
            if sf is None:
                # a local file the reader would not put in the page (outside the folders
                # the command points at)
                why = ("outside" if key.resource in getattr(read, "refused", ())
                       else getattr(read, "missing", "nolocal"))
        else:
            why = "nolocal"
        a = b = 0
        shown: list[int] = []
        if sf is not None and len(out) < SOURCE_FUNCTIONS:
            span = sf.function_lines(key.line, key.column, bool(key.name))
            a, b = span if span is not None else (key.line or known[0][0], key.line or 0)
            if known:
                a, b = min(a, known[0][0]), max(b, known[-1][0])
            if span is None and not known:
                b = a + 9
            b = min(b, len(sf.lines))
            if b - a + 1 <= SOURCE_FN_LINES:
                shown = list(range(a, b + 1))
            else:
                want = set(range(a, min(a + SOURCE_WINDOW, b) + 1))
                for ln, _, _ in known:
                    want.update(range(max(a, ln - SOURCE_WINDOW), min(b, ln + SOURCE_WINDOW) + 1))
                shown = sorted(want)[: SOURCE_FN_LINES * 4]
            have = kept.setdefault(key.resource, {})  # type: ignore[arg-type]
            new = [ln for ln in shown if ln not in have]
            cost = sum(min(len(sf.lines[ln - 1]), SOURCE_LINE_CHARS) + 4 for ln in new)
            if cost > budget:
                why, shown = "cap", []
            else:
                budget -= cost
                for ln in new:
                    t = sf.lines[ln - 1].rstrip("\r")
                    if len(t) > SOURCE_LINE_CHARS:
                        t = t[: SOURCE_LINE_CHARS - 1] + "\u2026"
                    have[ln] = clean(t)
        if not got and not shown and not bare:
            continue
        if shown:
            fi = files.setdefault(key.resource, len(files))  # type: ignore[arg-type]
        else:
            fi = -1
            a = known[0][0] if known else 0
            b = known[-1][0] if known else 0
        out.append([
            f, fi, a, b,
            [r[0] for r in known], [round(r[1], 6) for r in known], [r[2] for r in known],
            round(unk_ms, 6), unk_n, why,
        ])
    chunks = []
    for url, fi in files.items():
        have = kept.get(url, {})
        run: list[str] = []
        first = prev = 0
        for ln in sorted(have):
            if run and ln != prev + 1:
                chunks.append([fi, first, run])
                run = []
            if not run:
                first = ln
            run.append(have[ln])
            prev = ln
        if run:
            chunks.append([fi, first, run])
    return {
        "lineData": lines is not None,
        # a source of traces with no line data at all says why itself (the fleet's uploads)
        **({"noLines": read.no_lines} if getattr(read, "no_lines", None) else {}),
        "total": total,
        "files": [clean(u) for u in files],
        "chunks": chunks,
        "fns": out,
    }


# The whole call tree for search and zoom: every node's parent, function and total, so a
# search's share is report's (time of the samples with a match on their stack, counted
# once) and a zoom lays out again children too thin to draw at first. Little-endian binary
# columns in base64: one atob, no per-number parsing.
INDEX_NODES = 2_000_000
INDEX_TRACK_CELLS = 4_000_000  # nodes x tracks of per-track totals at most


def _b64(a: np.ndarray, dtype: str) -> str:
    return base64.b64encode(np.ascontiguousarray(a, dtype=dtype).tobytes()).decode("ascii")


def tree_index(
    tree: CallTree, fill_of: Callable[[Any], str] | None = None, rep: np.ndarray | None = None
) -> dict | None:
    """The call tree as columns for the page (None above INDEX_NODES nodes: the page then
    searches and zooms over the drawn frames only). With `fill_of` (the Flame view's
    colour rule, `_fill_rule`), what the page needs to colour any function as it does:
    the page draws a transformed tree itself."""
    n = len(tree.parent)
    if n > INDEX_NODES:
        return None
    # Locations as columns too (resource index, line, column; -1 for none): the page spells
    # them as FunctionKey.location does.
    res: dict[str, int] = {}
    fres = [-1 if f.resource is None else res.setdefault(clean(f.resource), len(res))
            for f in tree.functions]
    out = {
        "parent": pack_ints(tree.parent),
        "fn": pack_ints(tree.function),
        "tot": pack_ms(tree.total_ms),
        "n": pack_ints(np.rint(tree.total_samples)),
        "fname": [clean(f.label()) for f in tree.functions],
        "res": list(res),
        "fres": pack_ints(np.array(fres, np.int64)),
        "fline": pack_ints(np.array([-1 if f.line is None else f.line for f in tree.functions],
                                    np.int64)),
        "fcol": pack_ints(np.array([-1 if f.column is None else f.column for f in tree.functions],
                                   np.int64)),
        # pseudo frames ("(program)") have no location at all
        "nolo": [i for i, f in enumerate(tree.functions) if not f.location()],
        # For the page's transforms (viewer_transforms.js), which match as the command
        # line's do: the functions with no name of their own (they match "(anonymous)" as
        # well as their label), the rows of samples with no stack (no frame to match), and
        # each file: script's other spellings (its path, and the path from the folder the
        # page was written in, as the tables show it).
        "anon": [i for i, f in enumerate(tree.functions) if not f.name],
        "nostack": [i for i, f in enumerate(tree.functions)
                    if f.resource is None and f.line is None and f.name in NO_STACK_NAMES],
        "rsp": [resource_spellings(u)[1:] for u in res],
        # 1 where a node's function is also an ancestor's (recursion): a range's function
        # totals are taken at the outermost calls, as report takes them
        "rep": pack_ints(repeats_an_ancestor(tree.parent, tree.function) if rep is None else rep),
    }
    if fill_of is not None:
        # The Flame view's colour rule, for the page to colour a transformed tree's frames
        # as these (viewer_tree.js: the same hsl() from the same CRC-32 of the name): by
        # name, or by script with each script's hue (every function asked once, so every
        # script has one).
        for f in tree.functions:
            fill_of(f)
        hue_of = fill_of.hue_of  # type: ignore[attr-defined]
        rhue = [-1] * len(res)
        for f, r in zip(tree.functions, fres, strict=True):
            if r >= 0 and f.resource in hue_of:
                rhue[r] = hue_of[f.resource]
        out["colorBy"] = fill_of.color_by  # type: ignore[attr-defined]
        out["rhue"] = rhue
    k = len(tree.track_self_ms)
    if k > 1 and n * k <= INDEX_TRACK_CELLS:
        depth = _depths(tree)
        tot = [subtree_sums(tree.parent, own, depth) for own in tree.track_self_ms]
        out["tt"] = [pack_ms(t) for t in tot]
    return out


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


def _depths(tree: CallTree) -> np.ndarray:
    """Depth of each node (roots 1). Nodes are numbered level by level, so each level is
    one block of ids, and the next block starts at the first node whose parent is in it."""
    n = len(tree.parent)
    depth = np.zeros(n, np.int32)
    if not n:
        return depth
    cm = np.maximum.accumulate(tree.parent)
    start, d = 0, 1
    while start < n:
        # Level d's nodes have parents before `start`; the next level's, at or after it.
        end = max(int(np.searchsorted(cm, start, side="left")), start + 1)
        depth[start:end] = d
        start, d = end, d + 1
    return depth


def track_widths(tree: CallTree, nodes: list[int]) -> list[list[float]]:
    """Each track's total ms at the drawn frames `nodes` (ROOT_FN: the track's all)."""
    if len(tree.track_self_ms) < 2:
        return []
    depth = _depths(tree)
    idx = np.array([max(n, 0) for n in nodes], np.int64)
    out = []
    for own in tree.track_self_ms:
        tot = subtree_sums(tree.parent, own, depth)
        w = tot[idx] if len(tot) else np.zeros(len(idx))
        w[np.array(nodes) == ROOT_FN] = float(own.sum())
        out.append([round(float(v), 6) for v in w])
    return out


@dataclass
class FlameLayout:
    """Visible frames in depth-first pre-order (children widest first)."""

    node: list[int]  # CallTree node, or ROOT_FN
    depth: list[int]  # 0 for the root
    x: list[float]  # ms from the left edge
    w: list[float]  # ms (the node's total)
    total: float

    def __len__(self) -> int:
        return len(self.node)


def layout(tree: CallTree, min_width_px: float = 0.1, width: int = WIDTH) -> FlameLayout:
    """Place the call tree; nodes narrower than `min_width_px` at full width are dropped.

    A node is never wider than its parent, so the kept set is closed under parents and
    one vectorised comparison prunes millions of nodes before any Python loop runs.
    """
    total = float(tree.total_time)
    scale_total = total if total > 0 else 1.0
    min_ms = scale_total * min_width_px / max(width - 2 * PAD, 1)
    keep = np.nonzero((tree.total_ms >= min_ms) & (tree.total_ms > 0))[0]
    # Children of each kept node, widest first (ties by node id, which is stable).
    order = keep[np.lexsort((keep, -tree.total_ms[keep], tree.parent[keep]))]
    kids: dict[int, list[int]] = {}
    for i, p in zip(order.tolist(), tree.parent[order].tolist(), strict=True):
        kids.setdefault(p, []).append(i)

    out = FlameLayout([ROOT_FN], [0], [0.0], [total], total)
    total_ms = tree.total_ms
    # Iterative DFS (real stacks can be thousands of frames deep); each child starts where
    # its wider siblings end, so a parent's self time shows as the gap on its right.
    roots, x = [], 0.0
    for i in kids.get(NONE, []):
        roots.append((i, 1, x))
        x += float(total_ms[i])
    stack = roots[::-1]
    while stack:
        i, d, x0 = stack.pop()
        out.node.append(i)
        out.depth.append(d)
        out.x.append(x0)
        out.w.append(float(total_ms[i]))
        cx = x0
        pushed = []
        for k in kids.get(i, []):
            pushed.append((k, d + 1, cx))
            cx += float(total_ms[k])
        stack.extend(reversed(pushed))
    return out


# ---- colours ---------------------------------------------------------------------------------

# Hues for resources, most time first: distinct, and light enough for dark labels.
_HUES = (28, 205, 140, 275, 340, 50, 175, 0, 235, 100, 310, 75)


def _hash(s: str) -> int:
    return zlib.crc32(s.encode("utf-8", "replace"))


def _resource_fill(hue: int, name: str) -> str:
    # Hue and lightness vary a little per function, within the resource's family, so
    # neighbouring frames stay distinguishable and one function keeps one colour.
    h = _hash(name)
    return f"hsl({hue - 7 + h % 15},{58 + (h >> 8) % 20}%,{62 + (h >> 16) % 15}%)"


def _function_fill(name: str) -> str:
    # The classic warm palette: red to yellow, stable per name.
    h = _hash(name)
    return f"hsl({8 + h % 44},{70 + (h >> 8) % 20}%,{58 + (h >> 16) % 12}%)"


GREY = "hsl(220,8%,78%)"
NO_RESOURCE = "hsl(210,18%,72%)"


def _fill_rule(color_by: str, hue_of: dict[str | None, int]) -> Callable[[Any], str]:
    """A function's fill in every view of the page (Flame, Time, Sandwich), by its script
    (`hue_of`: a script's hue, the drawn ones hottest first; a script not drawn gets the
    next hue when first asked) or by its name. Diff pages colour the Flame view's frames
    by change instead, and keep this rule in the other views."""

    def fill_of(fn: Any) -> str:
        name = clean(fn.label())
        if color_by == "function":
            return _function_fill(name)
        if fn.resource is None and not fn.location():
            return GREY  # samples without JavaScript, as the report names them
        if fn.resource is None:
            return NO_RESOURCE
        if fn.resource not in hue_of:
            hue_of[fn.resource] = _HUES[len(hue_of) % len(_HUES)]
        return _resource_fill(hue_of[fn.resource], name)

    fill_of.color_by = color_by  # type: ignore[attr-defined]  # (tree_index reads these)
    fill_of.hue_of = hue_of  # type: ignore[attr-defined]
    return fill_of


def _signed_ms(ms: float) -> str:
    return f"{ms:+.1f} ms"


def _diff_fill(d: float, scale: float) -> str:
    """White for no change, towards red for a larger share, blue for a smaller one."""
    t = min(abs(d) / scale, 1.0) if scale > 0 else 0.0
    light = 96 - 44 * t
    hue = 2 if d > 0 else 215
    return f"hsl({hue},{int(20 + 65 * t)}%,{light:.0f}%)"


# ---- the drawing ---------------------------------------------------------------------------


def _label(name: str, width_px: float) -> str:
    fit = int((width_px - 6) / CHAR_W)
    if fit < 3:
        return ""
    return name if len(name) <= fit else name[: fit - 1] + "\u2026"


def _fmt_ms(ms: float) -> str:
    return f"{ms:.1f} ms" if ms >= 0.1 or ms == 0 else f"{ms:.3f} ms"


@dataclass
class _Frames:
    svg: str  # the <g> of frames
    data: dict  # for the script
    height: int  # px of the frame area
    legend: list[tuple[str, str]]  # (fill, label)
    fill_of: Callable[[Any], str] | None = None  # a function's fill outside diff colouring


def _frames(
    tree: CallTree,
    lay: FlameLayout,
    icicle: bool,
    color_by: str,
    change: TreeChange | None,
    width: int,
    svg: bool = True,
) -> _Frames:
    """The drawn frames: SVG elements (`svg`) or the page's columns, and the legend."""
    total = lay.total if lay.total > 0 else 1.0
    max_depth = max(lay.depth) if len(lay) else 0
    height = (max_depth + 1) * ROW
    scale = (width - 2 * PAD) / total
    funcs = tree.functions

    names: list[str] = []
    locs: list[str] = []
    name_ix: dict[str, int] = {}
    loc_ix: dict[str, int] = {}
    hue_of: dict[str | None, int] = {}
    legend: list[tuple[str, str]] = []
    d_scale = 0.0
    if change is not None:
        shown = [n for n in lay.node if n >= 0]
        d_scale = float(np.abs(change.colour[shown]).max()) if shown else 0.0

    # Hues go to resources by their self time, so the hottest code gets the first colour
    # (and the legend lists resources hottest first).
    res_self: dict[str, float] = {}
    fn_self: dict[str, float] = {}
    unscripted = False
    for n in lay.node:
        if n >= 0:
            fn = funcs[int(tree.function[n])]
            r = fn.resource
            if r is not None:
                res_self[r] = res_self.get(r, 0.0) + float(tree.self_ms[n])
            else:
                unscripted = True
            label = clean(fn.label())
            fn_self[label] = fn_self.get(label, 0.0) + float(tree.self_ms[n])
    for r in sorted(res_self, key=lambda r: -res_self[r]):
        hue_of[r] = _HUES[len(hue_of) % len(_HUES)]
        if color_by == "resource":
            legend.append((_resource_fill(hue_of[r], ""), clean(r)))
    if color_by == "resource" and unscripted:
        legend.append((NO_RESOURCE, "(no script)"))
    if color_by == "function":
        # The legend says what the colours say: the hottest functions, one colour each.
        hot = sorted(fn_self, key=lambda k: -fn_self[k])[:11]
        legend = [(_function_fill(k), k) for k in hot]
    fill_of = _fill_rule(color_by, hue_of)
    col_n: list[int] = []
    col_l: list[int] = []
    col_f: list[int] = []
    fill_ix: dict[str, int] = {}
    parts = []
    for j in range(len(lay)):
        n = lay.node[j]
        if n == ROOT_FN:
            name, loc, self_ms, samples = "all", "every sample in the profile", 0.0, None
            fill = GREY
        else:
            fn = funcs[int(tree.function[n])]
            name, loc = clean(fn.label()), clean(fn.location())
            if fn.resource is None and not loc and fn.name in NO_STACK_NAMES:
                loc = "samples with no JavaScript on the stack"
            self_ms = float(quantize_ms(tree.self_ms[n]))
            samples = int(tree.total_samples[n])
            if change is not None:
                fill = _diff_fill(float(change.colour[n]), d_scale)
            else:
                fill = fill_of(fn)
        col_n.append(name_ix.setdefault(name, len(name_ix)))
        if len(name_ix) > len(names):
            names.append(name)
        col_l.append(loc_ix.setdefault(loc, len(loc_ix)))
        if len(loc_ix) > len(locs):
            locs.append(loc)
        col_f.append(fill_ix.setdefault(fill, len(fill_ix)))
        if not svg:
            continue  # the page's script draws from the columns and words the tooltip
        w_ms = lay.w[j]
        tip = [name, loc]
        line = f"total {_fmt_ms(w_ms)} ({100 * w_ms / total:.1f}%)"
        if n >= 0:
            line += f" \u00b7 self {_fmt_ms(self_ms)} ({100 * self_ms / total:.1f}%)"
            line += f" \u00b7 {samples} sample{'s' if samples != 1 else ''}"
        tip.append(line)
        if change is not None and n >= 0:
            tip.append(_diff_line(change, n))
        x = PAD + lay.x[j] * scale
        w = lay.w[j] * scale
        y = lay.depth[j] * ROW if icicle else height - (lay.depth[j] + 1) * ROW
        parts.append(
            f'<g data-i="{j}"><title>{esc(chr(10).join(tip))}</title>'
            f'<rect x="{x:.2f}" y="{y}" width="{max(w - 0.6 if w > 2 else w, 0):.2f}" '
            f'height="{ROW - 1}" rx="2" fill="{fill}"/>'
            f'<text x="{x + 3:.2f}" y="{y + ROW - 4.5:.1f}">'
            f"{esc(_label(visible(name), w))}</text></g>"
        )

    data: dict[str, Any] = {
        "width": width,
        "row": ROW,
        "pad": PAD,
        "charW": CHAR_W,
        "height": height,
        "icicle": icicle,
        "total": lay.total,
        "names": names,
        "locs": locs,
    }
    if svg:
        data.update(
            d=lay.depth, x=[round(v, 6) for v in lay.x], w=[round(v, 6) for v in lay.w],
            n=col_n, l=col_l,
        )
        return _Frames(
            svg=f'<g id="fg-frames">{"".join(parts)}</g>', data=data, height=height, legend=legend,
            fill_of=fill_of,
        )
    # The page draws on a canvas from binary columns (one atob each, no per-number parse):
    # depth, position and width (ms), name, location and fill ids, self ms and samples, and
    # for a diff the numbers of its tooltip line.
    node = np.array(lay.node, np.int64)

    def at(col: np.ndarray, root: float) -> np.ndarray:
        """`col` at each drawn frame's node, `root` at the root (a tree may have no node)."""
        out = np.full(len(node), root, np.float64)
        real = node >= 0
        out[real] = col[node[real]]
        return out

    self_col = at(tree.self_ms, 0.0)
    n_col = np.rint(at(tree.total_samples, 0.0))
    data["fills"] = list(fill_ix)
    data["cols"] = {
        # (packed: a deep recursion's frames repeat themselves, render/packed.py)
        "d": pack_ints(np.array(lay.depth, np.int64)),
        "x": pack_ms(np.array(lay.x, np.float64)),
        "w": pack_ms(np.array(lay.w, np.float64)),
        "n": pack_ints(np.array(col_n, np.int64)),
        "l": pack_ints(np.array(col_l, np.int64)),
        "f": pack_ints(np.array(col_f, np.int64)),
        "s": pack_ms(self_col),
        "c": pack_ints(n_col),
    }
    if change is not None:
        # Per frame: self and total change in points, and in ms when the diff is in ms;
        # whether the call path is in the base (the root's row is never read).
        ms_unit = change.unit == "ms" and change.d_self_ms is not None
        data["diff"] = {
            "ms": ms_unit,
            "ds": _b64(at(change.d_self, 0.0), "<f8"),
            "dt": _b64(at(change.d_total, 0.0), "<f8"),
            "inb": _b64(at(change.in_base, 1.0), "<i4"),
        }
        if ms_unit:
            assert change.d_self_ms is not None and change.d_total_ms is not None
            data["diff"]["dsm"] = _b64(at(change.d_self_ms, 0.0), "<f8")
            data["diff"]["dtm"] = _b64(at(change.d_total_ms, 0.0), "<f8")
    return _Frames(svg="", data=data, height=height, legend=legend, fill_of=fill_of)


def _diff_line(change: TreeChange, n: int) -> str:
    """A diff frame's tooltip line: how its self and total moved against the base."""
    dd, dt = float(change.d_self[n]), float(change.d_total[n])
    if change.unit == "ms" and change.d_self_ms is not None:
        assert change.d_total_ms is not None
        ms, mt = float(change.d_self_ms[n]), float(change.d_total_ms[n])
        self_d = f"{_signed_ms(ms)} ({dd:+.2f} pp)"
        total_d = f"{_signed_ms(mt)} ({dt:+.2f} pp)"
    else:
        self_d, total_d = f"{dd:+.2f} pp", f"{dt:+.2f} pp"
    if change.in_base[n]:
        return f"vs base: self {self_d} \u00b7 total {total_d}"
    return f"new: this call path is not in the base profile ({total_d})"


def render_flame(
    tree: CallTree,
    fmt: str = "html",
    *,
    title: str = "Flame graph",
    subtitle: str = "",
    icicle: bool = False,
    color_by: str = "resource",
    change: TreeChange | None = None,
    width: int = WIDTH,
    min_width_px: float = 0.1,
    rec: Recording | None = None,
    track: str | None = None,
    source: Callable[[str], str | None] | None = None,
    fleet_time: dict | None = None,
    facts: list[tuple[str, str, str]] | None = None,
) -> str:
    """A flame graph of `tree` as a complete SVG or HTML document ("svg" or "html").

    `facts` (HTML): (key, label, value) lines shown under the header in every view, e.g.
    one field upload's vitals; text, escaped like every name.

    The HTML page is the viewer: the flame graph, a sandwich view and, given the
    Recording `tree` was built from (`rec`, `track`), a time view of its tracks and a
    source view (per-line self time; the text of the scripts `source`, URL -> text or
    None, gives: flame.py reads no files).

    `change` (from analysis.diff.tree_changes) makes it a differential flame graph: the
    tree's shape, each frame coloured by how its call path's self share moved.

    A fleet merge (a tree folded from `rec`, whose samples have no common clock) passes
    `fleet_time` (fleet/timecourse.py: time since each page's start, in buckets) for its
    Time view instead of the lanes of real sample times.
    """
    if fmt not in ("svg", "html"):
        raise ValueError(f"unknown flame graph format {fmt!r}")
    if color_by not in ("resource", "function"):
        raise ValueError(f"unknown colouring {color_by!r}")
    lay = layout(tree, min_width_px, width)
    # Widths as the page reads them back (packed to the ns): the SVG's titles and the
    # page's tooltips print the same numbers.
    lay.w = quantize_ms(np.array(lay.w, np.float64)).tolist()
    fr = _frames(tree, lay, icicle, color_by, change, width, svg=fmt == "svg")
    legend = fr.legend
    if change is not None:
        m = (
            float(np.abs(change.colour[[n for n in lay.node if n >= 0]]).max())
            if any(n >= 0 for n in lay.node)
            else 0.0
        )
        if change.unit == "ms":
            more = f"more self time than base (up to {_signed_ms(m)})"
            less = "less self time than base"
        else:
            more = f"larger self share than base (up to +{m:.2f} pp)"
            less = "smaller self share than base"
        legend = [
            (_diff_fill(m, m), more),
            (_diff_fill(-m, m), less),
            (_diff_fill(0.0, m), "unchanged"),
        ]
    fr.data["mode"] = fmt
    if fmt == "html":
        # each drawn frame's tree node (ROOT_FN: the root)
        fr.data["cols"]["tn"] = pack_ints(np.array(lay.node, np.int64))
        tw = track_widths(tree, lay.node)
        if tw:
            fr.data["tracks"] = [clean(n) for n in tree.track_names]
            fr.data["tw"] = [pack_ms(np.array(t, np.float64)) for t in tw]
    data = script_json(fr.data)
    if fmt == "svg":
        return _svg_document(fr, data, title, subtitle, width)
    # (recursion, once: the model's function totals and the index's outermost calls)
    rep_fn = repeats_an_ancestor(tree.parent, tree.function)
    m = viewer_model(tree, rep_fn)
    keys = m.pop("_keys")
    model_fn = m.pop("_fn")
    # One colour rule for every view: each model function's fill as the Flame view fills
    # its frames (by script or by name; a diff's Flame view alone colours by change).
    assert fr.fill_of is not None
    fills: dict[str, int] = {}
    m["ffill"] = [fills.setdefault(fr.fill_of(k), len(fills)) for k in keys]
    m["fills"] = list(fills)
    views: tuple[str, ...] = ("flame", "sandwich")
    src = None
    # A fleet merge's tree is folded (no per-stack nodes) and its samples have no clock.
    fleet = rec is not None and bool(rec.tracks) and all(
        t.engine == "fleet" or is_aggregated(t.meta) for t in rec.tracks)
    if rec is not None and (len(tree.track_stack_node) or fleet):
        if fleet_time is not None:
            m["fleetTime"] = fleet_time
            views = ("flame", "time", "sandwich", "source")
        elif not fleet:
            fpos = {k: j for j, k in enumerate(keys)}
            fn_of = np.asarray([fpos.get(k, -1) for k in tree.functions] or [-1], np.int64)
            m["time"] = time_model(rec, tree, _model_nodes(tree)[1], track,
                                   fn_of[tree.function], model_fn)
            views = ("flame", "time", "sandwich", "source")
        else:
            views = ("flame", "sandwich", "source")  # --during: its samples' times are gone
        src = script_json(source_model(rec, keys, m["ftotal"], track, source))
    ix = tree_index(tree, fr.fill_of, rep_fn)
    if ix is not None:
        # The tables read the whole tree (the index): above INDEX_NODES there is none.
        at = views.index("sandwich") + 1
        views = (*views[:at], "bottomup", "calltree", *views[at:])
    # Every sample (a range counted in every view) where the page has the whole tree and
    # the samples have times; a fleet merge's have none. A diff's frames are coloured by
    # the whole recordings' change, which a range of NEW alone would not redraw: none.
    samples = None
    if ix is not None and rec is not None and "time" in m and change is None:
        sc = sample_columns(rec, tree, track)
        if sc is not None:
            samples = script_json(sc)
            m["start"], m["end"] = sc["start"], sc["end"]
    model = script_json(m)
    return _html_document(
        fr, data, title, subtitle, legend, width, model, views, src,
        None if ix is None else script_json(ix), facts, samples,
    )


# The SVG picture's styles (the HTML page draws on a canvas and has its own).
_CSS = """
#fg-frames text { font: FONTpx ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace;
  fill: #1d1d1f; pointer-events: none; }
#fg-frames g { cursor: pointer; }
#fg-frames g:hover rect { stroke: #1d1d1f; stroke-width: 0.8; }
#fg-frames g.fg-anc rect { opacity: 0.45; }
#fg-frames g.fg-hit rect { fill: hsl(300,80%,62%); }
""".replace("FONT", str(FONT))


@functools.cache
def flame_script() -> str:
    """The viewer page's script (`flame.js`, package data), inlined into every page."""
    return (Path(__file__).with_name("flame.js")).read_text(encoding="utf-8")


# The viewer's modules, each its own <script> before flame.js (which uses them): the call
# tree's columns and sums, the transforms, and the Bottom-up and Call tree tables.
VIEWER_MODULES = ("viewer_tree.js", "viewer_transforms.js", "viewer_tables.js")


@functools.cache
def viewer_modules() -> tuple[str, ...]:
    """The texts of VIEWER_MODULES (package data), inlined into every page."""
    return tuple((Path(__file__).with_name(n)).read_text(encoding="utf-8")
                 for n in VIEWER_MODULES)


@functools.cache
def svg_script() -> str:
    """The SVG picture's script (`flame_svg.js`: zoom, search, details over its elements)."""
    return (Path(__file__).with_name("flame_svg.js")).read_text(encoding="utf-8")


def page_csp(kind: str) -> str:
    """The Content-Security-Policy of a flame file of this kind ("html" or "svg"): only its
    own script runs (pinned by hash), no network. The HTML page carries it in a <meta>; an
    SVG cannot, so whoever serves one sends it as a header (`jsprof serve` does)."""
    scripts = (*viewer_modules(), flame_script()) if kind == "html" else (svg_script(),)
    hashes = " ".join(
        f"'sha256-{base64.b64encode(hashlib.sha256(s.encode()).digest()).decode()}'"
        for s in scripts)
    return (
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
        f"script-src {hashes}"
    )


def _svg_document(fr: _Frames, data: str, title: str, subtitle: str, width: int) -> str:
    top = 44
    height = top + fr.height + 26
    return (
        '<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n'
        f'<svg xmlns="http://www.w3.org/2000/svg" id="fg-svg" version="1.1" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}">\n'
        f"<style>{_CSS}\n"
        ".fg-ui { font: 12px system-ui, 'DejaVu Sans', sans-serif; fill: #333; }\n"
        ".fg-btn { cursor: pointer; fill: #0b61c4; }\n</style>\n"
        f'<rect width="100%" height="100%" fill="#fbfbfa"/>\n'
        f'<text class="fg-ui" x="{width / 2}" y="18" text-anchor="middle" '
        f'style="font-size:15px;font-weight:600">{esc(title)}</text>\n'
        f'<text class="fg-ui" x="{PAD}" y="36" style="fill:#777">{esc(subtitle)}</text>\n'
        f'<text class="fg-ui fg-btn" id="fg-reset" x="{PAD}" y="18" '
        'style="visibility:hidden">Reset zoom</text>\n'
        f'<text class="fg-ui fg-btn" id="fg-search-button" x="{width - PAD}" y="18" '
        'text-anchor="end">Search</text>\n'
        f'<text class="fg-ui" id="fg-status" x="{width - PAD}" y="36" '
        'text-anchor="end"></text>\n'
        f'<g transform="translate(0,{top})">{fr.svg}</g>\n'
        f'<text class="fg-ui" id="fg-details" x="{PAD}" y="{height - 9}"></text>\n'
        f'<script type="application/json" id="fg-data">{data}</script>\n'
        # CDATA so the script's own `<` and `&` are plain text in XML.
        f'<script type="text/javascript"><![CDATA[{svg_script()}]]></script>\n'
        "</svg>\n"
    )


_PAGE_CSS = """
:root { color-scheme: light; }
body { margin: 0; background: #fbfbfa; color: #1d1d1f;
  font: 13px system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif; }
.top { position: sticky; top: 0; z-index: 3; background: rgba(251,251,250,0.97);
  border-bottom: 1px solid #e3e3e6; }
header { padding: 10px 16px 4px; display: flex; align-items: baseline; gap: 6px 18px; }
/* One line however long the title: the title and subtitle give way (cut with an ellipsis,
   the whole text in their tooltip), never the tabs and the search box. */
h1 { font-size: 16px; margin: 0; font-weight: 600; flex: 0 10 auto; min-width: 8em;
  white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
.sub { color: #6e6e73; flex: 0 1 auto; min-width: 6em; white-space: nowrap; overflow: hidden;
  text-overflow: ellipsis; }
nav.tabs, .controls { flex: none; }
@media (max-width: 720px) { header { flex-wrap: wrap; } }
nav.tabs { display: flex; gap: 2px; }
nav.tabs a { padding: 3px 10px; border-radius: 6px; color: #0b61c4; text-decoration: none; }
nav.tabs a.on { background: #0b61c4; color: #fff; }
.controls { margin-left: auto; display: flex; gap: 8px; align-items: center; }
#fg-search { font: inherit; padding: 4px 8px; width: 220px; border: 1px solid #c8c8cc;
  border-radius: 6px; background: #fff; }
#fg-reset, #fg-track { font: inherit; padding: 4px 10px; border: 1px solid #c8c8cc;
  border-radius: 6px; background: #fff; cursor: pointer; }
#fg-reset { visibility: hidden; }
#fg-status { color: #8a2be2; height: 1.35em; line-height: 1.35em; padding: 0 16px 4px;
  white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
#fg-range { color: #0b61c4; display: flex; gap: 6px; align-items: center; white-space: nowrap; }
#fg-range[hidden] { display: none; }
#fg-range button { font: inherit; padding: 1px 8px; border: 1px solid #c8c8cc; border-radius: 6px;
  background: #fff; cursor: pointer; }
.facts { padding: 2px 16px 4px; display: flex; flex-wrap: wrap; gap: 4px 18px; color: #333; }
.facts b { font-weight: 600; color: #6e6e73; }
.legend { padding: 2px 16px 4px; color: #444; display: flex; flex-wrap: wrap; gap: 4px 14px; }
.legend span.sw { display: inline-block; width: 10px; height: 10px; border-radius: 2px;
  margin-right: 5px; vertical-align: -1px; box-shadow: inset 0 0 0 1px rgba(0,0,0,0.15); }
#fg-wrap { margin: 6px 6px 12px; position: relative; }
#fg-canvas { position: absolute; left: 0; top: 0; outline: none; }
#fg-canvas:focus-visible { box-shadow: 0 0 0 2px #0b61c4; }
.sr-only { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0);
  white-space: nowrap; }
#fg-tip { position: fixed; display: none; max-width: 560px; white-space: pre-wrap;
  word-break: break-all; background: rgba(29,29,31,0.94); color: #f5f5f7; padding: 7px 9px;
  border-radius: 6px; font-size: 12px; line-height: 1.45; pointer-events: none;
  box-shadow: 0 4px 14px rgba(0,0,0,0.18); z-index: 4; }
footer { color: #8e8e93; padding: 0 16px 14px; font-size: 12px; }
.sw-grid { display: grid; grid-template-columns: minmax(420px, 46%) 1fr; gap: 12px;
  padding: 8px 12px; }
.sw-table { overflow: auto; max-height: calc(100vh - 130px); border: 1px solid #e3e3e6;
  border-radius: 6px; background: #fff; }
table.fn { border-collapse: collapse; width: 100%; font-size: 12px; }
table.fn th { position: sticky; top: 0; background: #f2f2f4; text-align: right;
  padding: 4px 6px; cursor: pointer; user-select: none; white-space: nowrap; }
table.fn th.name { text-align: left; }
table.fn td { padding: 2px 6px; text-align: right; white-space: nowrap;
  font-variant-numeric: tabular-nums; border-top: 1px solid #f0f0f2; }
table.fn td.name { text-align: left; overflow: hidden; text-overflow: ellipsis;
  max-width: 260px; font-family: ui-monospace, "DejaVu Sans Mono", monospace; }
table.fn td.loc { text-align: left; color: #6e6e73; overflow: hidden; text-overflow: ellipsis;
  max-width: 220px; }
table.fn tr { cursor: pointer; }
table.fn tr:hover td { background: #f4f8fd; }
table.fn tr.sel td { background: #dbe9fb; }
.panel h2 { font-size: 13px; margin: 6px 0 4px; font-weight: 600; color: #444; }
.panel svg { display: block; }
.panel .note { color: #6e6e73; font-size: 12px; }
.panel svg text, #v-time svg text { font: FONTpx ui-monospace, "DejaVu Sans Mono", Menlo,
  Consolas, monospace; fill: #1d1d1f; pointer-events: none; }
.panel svg g, #v-time svg g { cursor: pointer; }
.panel svg g:hover rect, #v-time svg g:hover rect { stroke: #1d1d1f; stroke-width: 0.8; }
.empty { color: #6e6e73; padding: 20px 16px; }
#v-time { padding: 6px 12px 16px; }
.tl-bar { display: flex; gap: 10px; align-items: center; padding: 2px 0 6px; }
.tl-bar button { font: inherit; padding: 3px 10px; border: 1px solid #c8c8cc;
  border-radius: 6px; background: #fff; cursor: pointer; }
.tl-bar .note, .note { color: #6e6e73; font-size: 12px; }
canvas { display: block; }
.lane { margin: 4px 0 8px; border-top: 1px solid #e3e3e6; }
.lane-name { font-weight: 600; color: #444; padding: 3px 0; font-size: 12px; }
.lane canvas { cursor: crosshair; }
.flane { display: flex; align-items: stretch; }
.flane .fname { width: 250px; flex: none; padding: 0 8px 0 0; font-size: 12px; overflow: hidden;
  text-overflow: ellipsis; white-space: nowrap; text-align: right; color: #444;
  font-family: ui-monospace, "DejaVu Sans Mono", monospace; line-height: 16px; }
.flane canvas { cursor: crosshair; }
#v-time .panel { margin-top: 10px; }
#v-source { padding: 8px 16px 16px; }
#v-source .panel { max-width: 1400px; }
.panel .links { font-size: 12px; padding: 2px 0; }
.panel .links a { color: #0b61c4; }
table.src td { border-top: none; padding: 0 6px; }
table.src th, table.src td { width: 1%; }
table.src th.name, table.src td.code { width: auto; }
table.src td.ln { color: #8e8e93; }
table.src td.code { text-align: left; white-space: pre; font-family: ui-monospace,
  "DejaVu Sans Mono", Menlo, Consolas, monospace; color: #1d1d1f; }
table.src tr.hot td.code { background: #fff4ef; }
table.src tr.gap td { color: #8e8e93; text-align: left; padding: 2px 6px; }
table.src tr:hover td { background: #f4f8fd; }
.tfbar { padding: 2px 16px 4px; display: flex; flex-wrap: wrap; gap: 4px 6px; align-items: center;
  color: #444; font-size: 12px; }
.tfbar .tf-title { color: #6e6e73; }
.tfbar button { font: inherit; padding: 1px 8px; border: 1px solid #c8c8cc; border-radius: 10px;
  background: #fff; cursor: pointer; max-width: 380px; overflow: hidden; text-overflow: ellipsis;
  white-space: nowrap; }
.tfbar button.on { border-color: #0b61c4; color: #0b61c4; }
.tfbar button.bad { text-decoration: line-through; color: #b3261e; }
.tfbar .tf-sep { color: #8e8e93; }
.tfbar input { font: inherit; padding: 1px 8px; width: 200px; border: 1px solid #c8c8cc;
  border-radius: 10px; margin-left: auto; }
#fg-menu { position: fixed; z-index: 5; background: #fff; border: 1px solid #c8c8cc;
  border-radius: 6px; box-shadow: 0 4px 14px rgba(0,0,0,0.18); padding: 4px 0; min-width: 250px;
  font-size: 12px; }
#fg-menu .menu-head { padding: 3px 12px 5px; color: #6e6e73; max-width: 360px; overflow: hidden;
  text-overflow: ellipsis; white-space: nowrap;
  font-family: ui-monospace, "DejaVu Sans Mono", monospace; }
#fg-menu button { display: flex; width: 100%; justify-content: space-between; gap: 16px;
  font: inherit; padding: 3px 12px; border: none; background: none; text-align: left;
  cursor: pointer; }
#fg-menu button:hover, #fg-menu button:focus { background: #dbe9fb; outline: none; }
#fg-menu button[disabled] { color: #aeaeb2; cursor: default; background: none; }
#fg-menu kbd { font: inherit; color: #6e6e73; }
#v-bottomup, #v-calltree { padding: 6px 12px 16px; }
.tt-box { overflow: auto; max-height: calc(100vh - 150px); border: 1px solid #e3e3e6;
  border-radius: 6px; background: #fff; }
table.tt { outline: none; }
table.tt td.name { max-width: 520px; }
table.tt td.loc { max-width: 360px; }
table.tt .tog { display: inline-block; width: 1.1em; color: #6e6e73; }
table.tt tr.hit td.name { color: #8a2be2; font-weight: 600; }
table.tt tr.more td { color: #0b61c4; text-align: left; }
""".replace("FONT", str(FONT))

VIEWS = (("flame", "Flame"), ("time", "Time"), ("sandwich", "Sandwich"), ("bottomup", "Bottom-up"),
         ("calltree", "Call tree"), ("source", "Source"))


def _html_document(
    fr: _Frames,
    data: str,
    title: str,
    subtitle: str,
    legend: list,
    width: int,
    model: str,
    views: tuple[str, ...],
    source: str | None = None,
    index: str | None = None,
    facts: list[tuple[str, str, str]] | None = None,
    samples: str | None = None,
) -> str:
    facts_html = "".join(
        f'<span data-fact="{esc(k)}"><b>{esc(label)}</b> {esc(value)}</span>'
        for k, label, value in facts or ()
    )
    if facts_html:
        facts_html = f'<div class="facts" id="fg-facts">{facts_html}</div>\n'
    legend_html = "".join(
        f'<span><span class="sw" style="background:{fill}"></span>{esc(label)}</span>'
        for fill, label in legend[:12]
    )
    # Only this exact script may run: a hash-pinned Content-Security-Policy, no network.
    csp = page_csp("html")
    tabs = "".join(
        f'<a href="#view={v}" data-tab="{v}">{label}</a>' for v, label in VIEWS if v in views
    )
    sections = "".join(
        f'<section id="v-{v}" data-v="{v}" hidden></section>' for v in views if v != "flame"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{esc(title)}</title>\n<style>{_PAGE_CSS}</style>\n</head>\n<body>\n"
        # The header sticks: title, tabs, search and Reset stay on screen while a tall
        # graph scrolls under them.
        f'<div class="top"><header><h1 title="{esc(title)}">{esc(title)}</h1>'
        f'<span class="sub" title="{esc(subtitle)}">{esc(subtitle)}</span>'
        f'<nav class="tabs">{tabs}</nav>'
        '<div class="controls"><select id="fg-track" aria-label="Track" hidden></select>'
        '<button id="fg-reset" type="button">Reset zoom</button>'
        '<input id="fg-search" type="search" placeholder="Search frames ( / )" '
        'aria-label="Search frames by name or location" autocomplete="off"></div></header>\n'
        f'{facts_html}<div class="legend">{legend_html}</div>\n<div id="fg-status"></div></div>\n'
        # Scripts off: no picture (the graph is drawn by the script from columns), a line
        # that says so and where the static picture comes from.
        '<main><section id="v-flame" data-v="flame"><noscript><p class="empty">This viewer '
        "draws with its script, and scripts are off here. Allow them for this file, or write "
        "the static picture with <code>jsprof flame TRACE -o flame.svg</code>.</p></noscript>"
        f'<div id="fg-wrap" style="height:{fr.height}px"><canvas id="fg-canvas" role="img" '
        'tabindex="0" aria-label="Flame graph. Arrow keys move between frames, Enter zooms '
        'into one, Escape resets; the frame\'s details are read out." aria-describedby="fg-live">'
        "</canvas></div>\n"
        '<div id="fg-live" class="sr-only" aria-live="polite"></div>\n'
        "<footer>Click a frame to zoom, Esc to reset; hover for details; with the graph "
        "focused, arrow keys move between frames and Enter zooms.</footer></section>"
        f"{sections}</main>\n"
        '<div id="fg-tip" role="tooltip"></div>\n'
        f'<script type="application/json" id="fg-data">{data}</script>\n'
        + "".join(f"<script>{m}</script>\n" for m in viewer_modules())
        + f"<script>{flame_script()}</script>\n"
        # The views' data after the script: the flame graph is drawn before these are read.
        f'<script type="application/json" id="fg-model">{model}</script>\n'
        + (f'<script type="application/json" id="fg-source">{source}</script>\n' if source else "")
        + (f'<script type="application/json" id="fg-index">{index}</script>\n' if index else "")
        + (f'<script type="application/json" id="fg-samples">{samples}</script>\n'
           if samples else "")
        + "</body>\n</html>\n"
    )


class FlameRenderer(Renderer):
    """A call tree as a flame graph: the HTML viewer page or an SVG picture
    (`render_flame`'s options held; `render(tree)` draws it). `for_path` picks the kind by
    the output's name, refusing any other (`base.flame_kind`)."""

    extension_of = {"html": ".html", "svg": ".svg"}

    def __init__(self, kind: str = "html", **options: Any) -> None:
        if kind not in self.extension_of:
            raise ValueError(f"unknown flame graph format {kind!r}")
        self.kind = kind
        self.extension = self.extension_of[kind]
        self.options = options

    @classmethod
    def for_path(cls, path: str, **options: Any) -> FlameRenderer:
        return cls(flame_kind(path), **options)

    def render(self, tree: CallTree) -> str:
        return render_flame(tree, self.kind, **self.options)
