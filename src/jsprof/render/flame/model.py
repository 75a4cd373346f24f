"""The viewer's model block: every function's self and total as `report` counts them,
and the call tree's nodes above MODEL_SHARE, for the Sandwich view and the others."""

from __future__ import annotations

import numpy as np

from ...analysis.calltree import CallTree
from ...analysis.profile import repeats_an_ancestor
from ..packed import pack_ints, pack_ms
from .escape import function_texts

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


def model_nodes(tree: CallTree) -> tuple[np.ndarray, np.ndarray]:
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


def viewer_model(tree: CallTree, rep: np.ndarray | None = None,
                 texts: tuple[list[str], list[str]] | None = None) -> dict:
    """The data of the sandwich view: every function with its self and total, and the call
    tree's nodes above MODEL_SHARE (parents before children) to merge callers and callees.
    `texts`: `function_texts(tree.functions)` when the caller has it."""
    total = float(tree.total_time)
    tm = tree.total_ms
    nodes, index = model_nodes(tree)
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
    kept = used.tolist()
    funcs = [tree.functions[i] for i in kept]
    labels, locs = function_texts(funcs) if texts is None else (
        [texts[0][i] for i in kept], [texts[1][i] for i in kept])
    # Time a dropped child stood for is not the parent's own: kept apart so the views can
    # say "(thinner paths)" instead of painting it as self time.
    return {
        "fname": labels,
        "floc": locs,
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
