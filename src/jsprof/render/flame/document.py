"""One call tree as one complete flame document (`render_flame`: the SVG picture or the
HTML viewer page with its views' blocks), and FlameRenderer, the Renderer that holds its
options."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...analysis.calltree import CallTree
from ...analysis.diff import TreeChange
from ...analysis.profile import repeats_an_ancestor
from ...meta import is_aggregated
from ...trace import Recording
from ..base import Renderer, flame_kind
from ..packed import pack_ints, pack_ms, quantize_ms
from ..viewer_samples import sample_columns
from .colours import diff_fill, signed_ms
from .escape import clean, function_texts, script_json
from .frames import frames
from .index import tree_index
from .layout import WIDTH, layout, track_widths
from .model import model_nodes, viewer_model
from .page import html_document
from .source import source_model
from .svg import svg_document
from .timeline import time_model


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
    fetches: bool = False,
) -> str:
    """A flame graph of `tree` as a complete SVG or HTML document ("svg" or "html").

    `facts` (HTML): (key, label, value) lines shown under the header in every view, e.g.
    one field upload's vitals; text, escaped like every name.

    The HTML page is the viewer: the flame graph, a sandwich view and, given the
    Recording `tree` was built from (`rec`, `track`), a time view of its tracks and a
    source view (per-line self time; the text of the scripts `source`, URL -> text or
    None, gives: render/ reads no files).

    `change` (from analysis.diff.tree_changes) makes it a differential flame graph: the
    tree's shape, each frame coloured by how its call path's self share moved.

    A fleet merge (a tree folded from `rec`, whose samples have no common clock) passes
    `fleet_time` (fleet/timecourse.py: time since each page's start, in buckets) for its
    Time view instead of the lanes of real sample times; `{"url": U}` there (with
    `fetches`, which lets the page read its own origin) has the page read that block from U
    when the Time view is first opened (a collector's page: its reads wait for the tab).
    """
    if fmt not in ("svg", "html"):
        raise ValueError(f"unknown flame graph format {fmt!r}")
    if color_by not in ("resource", "function"):
        raise ValueError(f"unknown colouring {color_by!r}")
    lay = layout(tree, min_width_px, width)
    # Widths as the page reads them back (packed to the ns): the SVG's titles and the
    # page's tooltips print the same numbers.
    lay.w = quantize_ms(np.array(lay.w, np.float64)).tolist()
    # every function's label and location, worded once for the frames, model and index
    texts = function_texts(tree.functions)
    fr = frames(tree, lay, icicle, color_by, change, width, svg=fmt == "svg", texts=texts)
    legend = fr.legend
    if change is not None:
        m = (
            float(np.abs(change.colour[[n for n in lay.node if n >= 0]]).max())
            if any(n >= 0 for n in lay.node)
            else 0.0
        )
        if change.unit == "ms":
            more = f"more self time than base (up to {signed_ms(m)})"
            less = "less self time than base"
        else:
            more = f"larger self share than base (up to +{m:.2f} pp)"
            less = "smaller self share than base"
        legend = [
            (diff_fill(m, m), more),
            (diff_fill(-m, m), less),
            (diff_fill(0.0, m), "unchanged"),
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
        return svg_document(fr, data, title, subtitle, width)
    # (recursion, once: the model's function totals and the index's outermost calls)
    rep_fn = repeats_an_ancestor(tree.parent, tree.function)
    m = viewer_model(tree, rep_fn, texts)
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
            m["time"] = time_model(rec, tree, model_nodes(tree)[1], track,
                                   fn_of[tree.function], model_fn)
            views = ("flame", "time", "sandwich", "source")
        else:
            views = ("flame", "sandwich", "source")  # --during: its samples' times are gone
        src = script_json(source_model(rec, keys, m["ftotal"], track, source))
    ix = tree_index(tree, fr.fill_of, rep_fn, texts)
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
    return html_document(
        fr, data, title, subtitle, legend, width, model, views, src,
        None if ix is None else script_json(ix), facts, samples, fetches,
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
