"""The drawn frames: the SVG picture's elements with their tooltips, or the HTML page's
binary columns (the page draws and words them itself), and the legend."""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...analysis.calltree import CallTree
from ...analysis.diff import TreeChange
from ...trace import NO_STACK_NAMES
from ..base import visible
from ..packed import pack_ints, pack_ms, quantize_ms
from .colours import (
    GREY,
    HUES,
    NO_RESOURCE,
    diff_fill,
    fill_rule,
    function_fill,
    resource_fill,
    signed_ms,
)
from .escape import clean, esc, function_texts
from .layout import CHAR_W, PAD, ROOT_FN, ROW, FlameLayout


def _b64(a: np.ndarray, dtype: str) -> str:
    return base64.b64encode(np.ascontiguousarray(a, dtype=dtype).tobytes()).decode("ascii")


def _label(name: str, width_px: float) -> str:
    fit = int((width_px - 6) / CHAR_W)
    if fit < 3:
        return ""
    return name if len(name) <= fit else name[: fit - 1] + "\u2026"


def _fmt_ms(ms: float) -> str:
    return f"{ms:.1f} ms" if ms >= 0.1 or ms == 0 else f"{ms:.3f} ms"


@dataclass
class Frames:
    svg: str  # the <g> of frames
    data: dict  # for the script
    height: int  # px of the frame area
    legend: list[tuple[str, str]]  # (fill, label)
    fill_of: Callable[[Any], str] | None = None  # a function's fill outside diff colouring


def frames(
    tree: CallTree,
    lay: FlameLayout,
    icicle: bool,
    color_by: str,
    change: TreeChange | None,
    width: int,
    svg: bool = True,
    texts: tuple[list[str], list[str]] | None = None,
) -> Frames:
    """The drawn frames: SVG elements (`svg`) or the page's columns, and the legend.
    `texts`: `function_texts(tree.functions)` when the caller has it."""
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
    # (per drawn frame: its node's function, -1 for the root; the columns as Python lists
    # once, not a numpy scalar per frame)
    labels, fn_locs = function_texts(funcs) if texts is None else texts
    node = np.array(lay.node, np.int64)
    real = node >= 0
    fn_at = np.full(len(node), -1, np.int64)
    fn_at[real] = tree.function[node[real]]
    fn_of = fn_at.tolist()
    own = tree.self_ms.tolist()
    res_self: dict[str, float] = {}
    fn_self: dict[str, float] = {}
    unscripted = False
    for n, fi in zip(lay.node, fn_of, strict=True):
        if n >= 0:
            r = funcs[fi].resource
            if r is not None:
                res_self[r] = res_self.get(r, 0.0) + own[n]
            else:
                unscripted = True
            label = labels[fi]
            fn_self[label] = fn_self.get(label, 0.0) + own[n]
    for r in sorted(res_self, key=lambda r: -res_self[r]):
        hue_of[r] = HUES[len(hue_of) % len(HUES)]
        if color_by == "resource":
            legend.append((resource_fill(hue_of[r], ""), clean(r)))
    if color_by == "resource" and unscripted:
        legend.append((NO_RESOURCE, "(no script)"))
    if color_by == "function":
        # The legend says what the colours say: the hottest functions, one colour each.
        hot = sorted(fn_self, key=lambda k: -fn_self[k])[:11]
        legend = [(function_fill(k), k) for k in hot]
    fill_of = fill_rule(color_by, hue_of)
    col_n: list[int] = []
    col_l: list[int] = []
    col_f: list[int] = []
    fill_ix: dict[str, int] = {}
    # A function's name, location and fill, worded once however many frames it has
    # (a diff's fills are per frame)
    worded: dict[int, tuple[str, str, str]] = {}
    q_self = quantize_ms(tree.self_ms).tolist() if svg else []
    samples_of = tree.total_samples.tolist() if svg else []
    parts = []
    for j in range(len(lay)):
        n = lay.node[j]
        self_ms, samples = 0.0, None
        if n == ROOT_FN:
            name, loc, fill = "all", "every sample in the profile", GREY
        else:
            fi = fn_of[j]
            got = worded.get(fi)
            if got is None:
                fn = funcs[fi]
                loc = fn_locs[fi]
                if fn.resource is None and not loc and fn.name in NO_STACK_NAMES:
                    loc = "samples with no JavaScript on the stack"
                got = worded[fi] = (labels[fi], loc, "" if change is not None else fill_of(fn))
            name, loc, fill = got
            if change is not None:
                fill = diff_fill(float(change.colour[n]), d_scale)
            if svg:
                self_ms, samples = q_self[n], int(samples_of[n])
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
        return Frames(
            svg=f'<g id="fg-frames">{"".join(parts)}</g>', data=data, height=height, legend=legend,
            fill_of=fill_of,
        )
    # The page draws on a canvas from binary columns (one atob each, no per-number parse):
    # depth, position and width (ms), name, location and fill ids, self ms and samples, and
    # for a diff the numbers of its tooltip line.

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
    return Frames(svg="", data=data, height=height, legend=legend, fill_of=fill_of)


def _diff_line(change: TreeChange, n: int) -> str:
    """A diff frame's tooltip line: how its self and total moved against the base."""
    dd, dt = float(change.d_self[n]), float(change.d_total[n])
    if change.unit == "ms" and change.d_self_ms is not None:
        assert change.d_total_ms is not None
        ms, mt = float(change.d_self_ms[n]), float(change.d_total_ms[n])
        self_d = f"{signed_ms(ms)} ({dd:+.2f} pp)"
        total_d = f"{signed_ms(mt)} ({dt:+.2f} pp)"
    else:
        self_d, total_d = f"{dd:+.2f} pp", f"{dt:+.2f} pp"
    if change.in_base[n]:
        return f"vs base: self {self_d} \u00b7 total {total_d}"
    return f"new: this call path is not in the base profile ({total_d})"
