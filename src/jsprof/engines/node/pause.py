"""A worker's wait for jsprof at its start, taken out of its profile."""

from __future__ import annotations

import numpy as np

# Node runs a worker that waits for a debugger inside this inspector builtin: the worker's
# samples while jsprof attaches fall on it (self time), and it wraps the worker's script.
# The main thread has no such frame (its wait is in jsprof's preload, dropped likewise).
PAUSE_WRAPPER = "callAndPauseOnStart"


def _is_wrapper(node: dict) -> bool:
    cf = node.get("callFrame") or {}
    return cf.get("functionName") == PAUSE_WRAPPER and not cf.get("url")


def drop_pause_on_start(profile: dict) -> dict:
    """The profile without the samples taken while the worker waited in the wrapper, and
    without the wrapper's node: its children hang from its parent. Every other sample
    keeps its timestamp."""
    nodes = profile.get("nodes") or []
    wrap = {n["id"] for n in nodes if _is_wrapper(n)}
    if not wrap:
        return profile
    kids = {n["id"]: list(n.get("children") or ()) for n in nodes}

    def spliced(children: list[int]) -> list[int]:
        out: list[int] = []
        for c in children:
            out.extend(spliced(kids.get(c, [])) if c in wrap else [c])
        return out

    samples = np.asarray(profile.get("samples") or [], dtype=np.int64)
    start = int(profile.get("startTime", 0))
    ts = np.cumsum(np.asarray(profile.get("timeDeltas") or [], dtype=np.int64)) + start
    keep = ~np.isin(samples, np.fromiter(wrap, np.int64, len(wrap)))
    out = dict(profile)
    out["nodes"] = [
        {**n, "children": spliced(n["children"])} if n.get("children") else n
        for n in nodes
        if n["id"] not in wrap
    ]
    out["samples"] = samples[keep].tolist()
    out["timeDeltas"] = np.diff(ts[keep], prepend=start).tolist()
    return out
