"""V8 CPU profiles in CDP's shape, as the Node and Chromium engines take them: joining the
slices of one thread's profile (taken one after another while recording) into one, and
dropping the samples taken inside jsprof's own code."""

from __future__ import annotations

import collections

import numpy as np


def concat_profiles(profiles: list[dict]) -> dict:
    """Join consecutive CDP Profiles of one thread (e.g. slices taken while recording) into
    one: node ids are shifted apart, samples kept in time order, and a tick that two
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
        # A slice begins with the ticks V8 took before the previous one ended but processed
        # after, behind the stack it records at its own start: put them back in time order.
        order = np.argsort(ts, kind="stable")
        s, ts = s[order], ts[order]
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


def drop_samples_under(profile: dict, urls: set[str]) -> dict:
    """The profile without the samples taken inside code from `urls` (jsprof's own preload:
    its wait for the profiler to start is not the script's time), and without the nodes
    of that code. Every other sample keeps its timestamp."""
    nodes = profile.get("nodes") or []
    own = {n["id"] for n in nodes if (n.get("callFrame") or {}).get("url") in urls}
    if not own:
        return profile
    parent = {c: n["id"] for n in nodes for c in n.get("children") or ()}
    under: dict[int, bool] = {}

    def is_under(nid: int) -> bool:
        chain = []
        cur: int | None = nid
        while cur is not None and cur not in under:
            if cur in own:
                under[cur] = True
                break
            chain.append(cur)
            cur = parent.get(cur)
        hit = cur is not None and under[cur]
        for c in chain:
            under[c] = hit
        return hit

    samples = np.asarray(profile.get("samples") or [], dtype=np.int64)
    ts = np.cumsum(np.asarray(profile.get("timeDeltas") or [], dtype=np.int64))
    ts += int(profile.get("startTime", 0))
    keep = np.array([not is_under(int(s)) for s in samples.tolist()], dtype=bool)
    start = int(profile.get("startTime", 0))
    for n in nodes:
        is_under(n["id"])
    out = dict(profile)
    # The subtrees themselves go too: no sample points into them any more.
    out["nodes"] = [
        {**n, "children": [c for c in n.get("children") or () if not under[c]]}
        if n.get("children")
        else n
        for n in nodes
        if not under[n["id"]]
    ]
    out["samples"] = samples[keep].tolist()
    out["timeDeltas"] = np.diff(ts[keep], prepend=start).tolist()
    return out
