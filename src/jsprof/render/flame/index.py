"""The viewer's index block (fg-index): the whole call tree as packed columns, over which
the page searches, zooms, transforms and draws its tables."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...analysis.calltree import CallTree
from ...analysis.profile import repeats_an_ancestor, subtree_sums
from ...analysis.transforms import resource_spellings
from ...trace import NO_STACK_NAMES
from ..packed import pack_ints, pack_ms
from .escape import clean
from .layout import node_depths

# The whole call tree for search and zoom: every node's parent, function and total, so a
# search's share is report's (time of the samples with a match on their stack, counted
# once) and a zoom lays out again children too thin to draw at first. Little-endian binary
# columns in base64: one atob, no per-number parsing.
INDEX_NODES = 2_000_000
INDEX_TRACK_CELLS = 4_000_000  # nodes x tracks of per-track totals at most


def tree_index(
    tree: CallTree, fill_of: Callable[[Any], str] | None = None, rep: np.ndarray | None = None,
    texts: tuple[list[str], list[str]] | None = None,
) -> dict | None:
    """The call tree as columns for the page (None above INDEX_NODES nodes: the page then
    searches and zooms over the drawn frames only). With `fill_of` (the Flame view's
    colour rule, `fill_rule`), what the page needs to colour any function as it does:
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
        "fname": [clean(f.label()) for f in tree.functions] if texts is None else texts[0],
        "res": list(res),
        "fres": pack_ints(np.array(fres, np.int64)),
        "fline": pack_ints(np.array([-1 if f.line is None else f.line for f in tree.functions],
                                    np.int64)),
        "fcol": pack_ints(np.array([-1 if f.column is None else f.column for f in tree.functions],
                                   np.int64)),
        # pseudo frames ("(program)") have no location at all
        "nolo": [i for i, f in enumerate(tree.functions) if not f.location()] if texts is None
        else [i for i, loc in enumerate(texts[1]) if not loc],
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
        depth = node_depths(tree)
        tot = [subtree_sums(tree.parent, own, depth) for own in tree.track_self_ms]
        out["tt"] = [pack_ms(t) for t in tot]
    return out
