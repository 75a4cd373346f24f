"""The call tree: stacks merged by function (name, resource, line, column) per path.

Built level by level with numpy: at each depth, (tree parent, function) pairs are made
unique, so a trace with many frame ids for one function still gives one node per path.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..trace import NONE, ProfilerTrace, Recording, sample_counts
from .profile import (
    FunctionKey,
    KeyTable,
    _tracks,
    depth_levels,
    frame_function_ids,
    no_js_rows,
    sample_weights,
    subtree_sums,
)


@dataclass
class CallTree:
    """Nodes as columns; node 0.. are real functions, `parent` NONE for roots."""

    functions: list[FunctionKey]
    parent: np.ndarray  # int64
    function: np.ndarray  # int64 index into functions
    self_ms: np.ndarray
    total_ms: np.ndarray
    self_samples: np.ndarray
    total_samples: np.ndarray
    total_time: float  # all samples, with and without JavaScript
    # Per track the tree was built from (for the viewer's time lanes and track selector):
    # its name, the node of each of its stack ids, and its self ms per node.
    track_names: list[str] = field(default_factory=list)
    track_stack_node: list[np.ndarray] = field(default_factory=list)
    track_self_ms: list[np.ndarray] = field(default_factory=list)

    def children(self) -> list[list[int]]:
        kids: list[list[int]] = [[] for _ in range(len(self.parent))]
        for i, p in enumerate(self.parent.tolist()):
            if p != NONE:
                kids[p].append(i)
        return kids

    def roots(self) -> list[int]:
        return np.nonzero(self.parent == NONE)[0].tolist()


def build_call_tree(rec: Recording | ProfilerTrace, track: str | None = None) -> CallTree:
    tracks = _tracks(rec, track)
    table = KeyTable()
    parts = []
    for t in tracks:
        tr = t.trace
        fk = frame_function_ids(tr, table)
        w = sample_weights(tr, t.sample_interval)
        has = tr.sample_stack != NONE
        n_st = tr.num_stacks
        stack_ms = np.bincount(tr.sample_stack[has], weights=w[has], minlength=n_st)
        stack_n = np.rint(np.bincount(tr.sample_stack[has], weights=sample_counts(tr)[has],
                                      minlength=n_st)).astype(np.int64)
        # Samples without JavaScript are roots named as the table names them, so the
        # tree's roots add up to all the time and agree with `report`'s rows.
        pseudo = no_js_rows([t], [w])
        parts.append(
            (
                np.concatenate([tr.stack_parent, np.full(len(pseudo), NONE, np.int32)]),
                np.concatenate(
                    [
                        fk[tr.stack_frame] if n_st else np.zeros(0, np.int64),
                        np.array([table.intern(FunctionKey(r.label)) for r in pseudo], np.int64),
                    ]
                ),
                np.concatenate([tr.stack_depths(), np.ones(len(pseudo), np.int32)]),
                np.concatenate([stack_ms, [r.ms for r in pseudo]]),
                np.concatenate([stack_n, [r.samples for r in pseudo]]).astype(np.int64),
                float(w.sum()),
            )
        )
    # Stack nodes of all tracks as one forest; ids offset per track.
    offs = np.cumsum([0] + [len(p[0]) for p in parts])
    parent = np.concatenate(
        [
            np.where(p[0] == NONE, NONE, p[0].astype(np.int64) + o)
            for p, o in zip(parts, offs, strict=False)
        ]
        or [np.zeros(0, np.int64)]
    ).astype(np.int64)
    fn = np.concatenate([p[1] for p in parts] or [np.zeros(0, np.int64)]).astype(np.int64)
    depth = np.concatenate([p[2] for p in parts] or [np.zeros(0, np.int32)])
    s_ms = np.concatenate([p[3] for p in parts] or [np.zeros(0)])
    s_n = np.concatenate([p[4] for p in parts] or [np.zeros(0, np.int64)])
    total_time = sum(p[5] for p in parts)

    n = len(parent)
    node_of = np.full(n, NONE, dtype=np.int64)
    t_parent: list[np.ndarray] = []
    t_fn: list[np.ndarray] = []
    n_nodes = 0
    n_fn = max(len(table), 1)
    for level in depth_levels(depth):
        tp = np.where(parent[level] == NONE, NONE, node_of[np.maximum(parent[level], 0)])
        key = (tp + 1) * n_fn + fn[level]
        uniq, first, inv = np.unique(key, return_index=True, return_inverse=True)
        node_of[level] = n_nodes + inv
        t_parent.append(tp[first])
        t_fn.append(fn[level][first])
        n_nodes += len(uniq)
    tree_parent = np.concatenate(t_parent) if t_parent else np.zeros(0, np.int64)
    tree_fn = np.concatenate(t_fn) if t_fn else np.zeros(0, np.int64)
    self_ms = np.bincount(node_of, weights=s_ms, minlength=n_nodes) if n else np.zeros(0)
    self_n = np.bincount(node_of, weights=s_n, minlength=n_nodes) if n else np.zeros(0)
    tree_depth = np.zeros(n_nodes, np.int32)
    tree_depth[node_of] = depth
    total_ms = subtree_sums(tree_parent, self_ms, tree_depth)
    total_n = subtree_sums(tree_parent, self_n, tree_depth)
    n_stacks = [t.trace.num_stacks for t in tracks]
    return CallTree(
        track_names=[t.name for t in tracks],
        track_stack_node=[node_of[o : o + k] for o, k in zip(offs, n_stacks, strict=False)],
        track_self_ms=[
            np.bincount(node_of[offs[i] : offs[i + 1]], weights=s_ms[offs[i] : offs[i + 1]],
                        minlength=n_nodes)
            for i in range(len(parts))
        ],
        functions=table.keys,
        parent=tree_parent,
        function=tree_fn,
        self_ms=self_ms,
        total_ms=total_ms,
        self_samples=np.rint(self_n).astype(np.int64),
        total_samples=np.rint(total_n).astype(np.int64),
        total_time=total_time,
    )
