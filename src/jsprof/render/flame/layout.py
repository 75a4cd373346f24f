"""Where the flame graph's frames go: the drawing's geometry, the call tree placed as
frames (depth-first, children widest first, the too-thin pruned), and the per-track widths
of the drawn frames."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...analysis.calltree import CallTree
from ...analysis.profile import subtree_sums
from ...trace import NONE

ROW = 16  # px per stack level
FONT = 11  # px
CHAR_W = FONT * 0.62  # monospace advance, to fit labels without measuring text
PAD = 10  # px left/right
WIDTH = 1200  # px of the static drawing (the HTML page re-lays out to the window width)

ROOT_FN = -1  # flame node standing for all samples


def node_depths(tree: CallTree) -> np.ndarray:
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
    depth = node_depths(tree)
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
