"""Joining the slices of one thread's V8 profile (CDP Profiles taken one after another
while recording) into one profile."""

from __future__ import annotations

import collections

import numpy as np


def concat_profiles(profiles: list[dict]) -> dict:
    """Join consecutive CDP Profiles of one thread (e.g. slices taken while recording) into
    one: node ids are shifted apart, samples kept in order, and a tick that two
    overlapping slices both hold (one taken between ending one and starting the next) is
    kept once. Each slice keeps its own (root); hitCount is recounted from the samples."""
    nodes: list[dict] = []
    ids_out: list[np.ndarray] = []
    ts_out: list[np.ndarray] = []
    offset = 0
    last = -np.inf
    for p in profiles:
        p_nodes = p.get("nodes") or []
        if not p_nodes:
            continue
        for n in p_nodes:
            m = dict(n)
            m["id"] = n["id"] + offset
            if n.get("children"):
                m["children"] = [c + offset for c in n["children"]]
            m["hitCount"] = 0
            nodes.append(m)
        s = np.asarray(p.get("samples") or [], dtype=np.int64)
        ts = np.cumsum(np.asarray(p.get("timeDeltas") or [], dtype=np.int64)) + p["startTime"]
        keep = ts > last
        if keep.any():
            ids_out.append(s[keep] + offset)
            ts_out.append(ts[keep])
            last = float(ts[keep][-1])
        offset += max(n["id"] for n in p_nodes)
    if not nodes:
        return {"nodes": [], "startTime": 0, "endTime": 0, "samples": [], "timeDeltas": []}
    samples = np.concatenate(ids_out) if ids_out else np.zeros(0, np.int64)
    ts = np.concatenate(ts_out) if ts_out else np.zeros(0, np.int64)
    start = int(min(p["startTime"] for p in profiles if p.get("nodes")))
    counts = collections.Counter(samples.tolist())
    for m in nodes:
        m["hitCount"] = counts.get(m["id"], 0)
    return {
        "nodes": nodes,
        "startTime": start,
        "endTime": int(ts[-1]) if len(ts) else start,
        "samples": samples.tolist(),
        "timeDeltas": np.diff(ts, prepend=start).tolist(),
    }
