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


def drop_samples_under(profile: dict, urls: set[str], prune: bool = True) -> dict:
    """The profile without the samples taken inside code from `urls` (jsprof's own preload:
    its wait for the profiler to start is not the script's time), and without the nodes
    of that code. Every other sample keeps its timestamp. `prune=False` leaves the nodes
    (now unsampled) for one `prune_unsampled` after all the drops."""
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
    out = dict(profile)
    out["samples"] = samples[keep].tolist()
    out["timeDeltas"] = np.diff(ts[keep], prepend=start).tolist()
    if not prune:
        return out
    for n in nodes:
        is_under(n["id"])
    # The subtrees themselves go too: no sample points into them any more. Only the
    # parents of dropped nodes get a new children list; the others are kept as they are
    # (each slice of a tsc run has thousands of nodes and drops a few).
    cut = {parent[nid] for nid, hit in under.items() if hit and nid in parent}
    out["nodes"] = [
        {**n, "children": [c for c in n["children"] if not under[c]]}
        if n["id"] in cut
        else n
        for n in nodes
        if not under[n["id"]]
    ]
    return out


# What loads a preload (`--require`) in Node 18-22: pre_execution's loadPreloadModules and
# the CommonJS loader's Module._preloadModules.
_PRELOAD_FNS = frozenset({"loadPreloadModules", "Module._preloadModules"})
_PSEUDO = frozenset({"(program)", "(garbage collector)", "(idle)"})


def drop_preload(profile: dict, go_us: float, prune: bool = True) -> dict:
    """The main thread's profile from the instant jsprof's preload let the script go
    (`go_us`, V8's clock): no sample before it (the preload's wait, with the profiler
    already running), and not the loader's return from the preload just after it (the
    leading samples still inside Node's preload loading and in no script of their own; a
    later `--require` of the user's keeps its code's samples). Nodes left without samples
    go too, so no frame of that path stays behind. No kept sample changes its time, and
    none is charged for what was dropped: all of it comes before the first kept one.
    `prune=False` leaves the nodes to one `prune_unsampled` after all the drops."""
    nodes = profile.get("nodes") or []
    start = int(profile.get("startTime", 0))
    samples = np.asarray(profile.get("samples") or [], dtype=np.int64)
    ts = np.cumsum(np.asarray(profile.get("timeDeltas") or [], dtype=np.int64)) + start
    keep = ts >= go_us
    by_id = {n["id"]: n for n in nodes}
    parent = {c: n["id"] for n in nodes for c in n.get("children") or ()}
    kind: dict[int, str] = {}  # node id -> "preload" (loader only), "pseudo", "other"

    def kind_of(nid: int) -> str:
        if nid in kind:
            return kind[nid]
        cf = by_id.get(nid, {}).get("callFrame") or {}
        name = cf.get("functionName", "")
        in_preload = False
        internal = True
        cur: int | None = nid
        while cur is not None:
            c = by_id.get(cur, {}).get("callFrame") or {}
            url = str(c.get("url", ""))
            if url and not url.startswith("node:"):
                internal = False
            if c.get("functionName") in _PRELOAD_FNS:
                in_preload = True
            cur = parent.get(cur)
        if name in _PSEUDO and not cf.get("url"):
            k = "pseudo"
        else:
            k = "preload" if in_preload and internal else "other"
        kind[nid] = k
        return k

    idx = np.flatnonzero(keep)
    last = -1  # the last sample of the loader's return from the preload
    for i in idx.tolist():
        k = kind_of(int(samples[i]))
        if k == "preload":
            last = i
        elif k == "other":
            break
    if last >= 0:
        keep[: last + 1] = False
    kept = samples[keep]
    new_start = max(start, int(go_us)) if keep.any() else start
    out = dict(profile)
    out["startTime"] = new_start
    out["samples"] = kept.tolist()
    out["timeDeltas"] = np.diff(ts[keep], prepend=new_start).tolist()
    if prune:
        out["nodes"] = _prune_unsampled(nodes, parent, out["samples"])
    return out


def prune_unsampled(profile: dict) -> dict:
    """The profile without the nodes no sample is at or under (the roots stay), hitCount
    counted from its samples: the one pass after drops made with `prune=False` (a tsc
    profile joined from its slices has ~25,000 nodes, and each pass over them costs ms of
    every recording's end)."""
    nodes = profile.get("nodes") or []
    parent = {c: n["id"] for n in nodes for c in n.get("children") or ()}
    out = dict(profile)
    out["nodes"] = _prune_unsampled(nodes, parent, list(profile.get("samples") or ()))
    return out


def _prune_unsampled(nodes: list[dict], parent: dict[int, int], samples: list[int]) -> list[dict]:
    """The nodes that some sample is at or under (and the roots): a frame no sample has is
    a path the dropped samples took. Only the parents of dropped nodes get a new children
    list (a tsc profile has thousands of nodes and drops a few)."""
    live = {n["id"] for n in nodes if n["id"] not in parent}
    for s in set(samples):
        cur: int | None = s
        while cur is not None and cur not in live:
            live.add(cur)
            cur = parent.get(cur)
    trimmed = {parent[n["id"]] for n in nodes if n["id"] not in live and n["id"] in parent}
    counts = collections.Counter(samples)
    out = []
    for n in nodes:
        nid = n["id"]
        if nid not in live:
            continue
        hits = counts.get(nid, 0)
        if nid in trimmed or n.get("hitCount") != hits:
            # a new node only where something changed: most keep theirs (shared, not
            # changed: the profiles here are read, never written to)
            n = dict(n)
            n["hitCount"] = hits
            if nid in trimmed:
                n["children"] = [c for c in n["children"] if c in live]
        out.append(n)
    return out


# What a thread shows while Node waits for jsprof after the program's end: nothing running
# (idle, or V8's own "(program)"), or the native process.exit() it waits in.
_WAIT_NAMES = frozenset({"(idle)", "(program)", "reallyExit"})


def _work_end(profile: dict) -> tuple[np.ndarray, np.ndarray, int]:
    """(samples, their times on V8's clock in us, how many to keep): up to the last sample
    with a stack or a GC, and the "(program)" run right after it; 0: no such sample."""
    nodes = profile.get("nodes") or []
    samples = np.asarray(profile.get("samples") or [], dtype=np.int64)
    deltas = np.asarray(profile.get("timeDeltas") or [], dtype=np.int64)
    ts = np.cumsum(deltas) + int(profile.get("startTime", 0))
    if not len(samples):
        return samples, ts, 0

    def ids(name: str) -> np.ndarray:
        return np.asarray([n["id"] for n in nodes
                           if (n.get("callFrame") or {}).get("functionName") == name
                           and not (n.get("callFrame") or {}).get("url")], dtype=np.int64)

    program = np.isin(samples, ids("(program)"))
    # "(root)": a sample of jsprof's own probe, its frames stripped (helper.strip_internal)
    waiting = np.isin(samples, np.concatenate([ids("(idle)"), ids("(root)")])) | program
    work = np.flatnonzero(~waiting)
    if not len(work):
        return samples, ts, 0
    keep = int(work[-1]) + 1
    while keep < len(samples) and program[keep]:
        keep += 1
    return samples, ts, keep


def last_work_us(profile: dict) -> float | None:
    """When a page thread last worked (V8's clock, us): the time of the last sample
    drop_after_last_work keeps of it; None for a thread that never ran."""
    _, ts, keep = _work_end(profile)
    return float(ts[keep - 1]) if keep and len(ts) >= keep else None


def drop_after_last_work(
    profile: dict, page_end_us: float | None = None
) -> tuple[dict, int, float]:
    """A page thread's profile without its trailing wait: the samples after its last one
    with a stack or a GC, and the "(program)" run right after that (the rendering that
    followed it), are "(idle)", "(program)" or jsprof's probes with idle between them (the
    `--until load` rule's QUIET_MS, the stop). `page_end_us`: the last work of any of the
    page's threads (last_work_us): the rule waits for all of them, so a thread's idle
    while another still worked is the page's time and stays. A thread with no such sample
    is kept whole. Returns (profile, samples dropped, ms the profile got shorter), as
    drop_exit_wait does; no kept sample changes its time."""
    samples, ts, keep = _work_end(profile)
    if not keep or len(ts) != len(samples):
        return profile, 0, 0.0
    if page_end_us is not None:
        # (V8's deltas may step back: the last sample at or before it, not a bisection)
        upto = np.flatnonzero(ts <= page_end_us)
        if len(upto):
            keep = max(keep, int(upto[-1]) + 1)
    n = len(samples) - keep
    if n == 0:
        return profile, 0, 0.0
    deltas = list(profile.get("timeDeltas") or [])
    nodes = profile.get("nodes") or []
    out = dict(profile)
    out["samples"] = samples[:keep].tolist()
    out["timeDeltas"] = deltas[:keep]
    out["endTime"] = int(ts[keep - 1])
    parent = {c: nd["id"] for nd in nodes for c in nd.get("children") or ()}
    out["nodes"] = _prune_unsampled(nodes, parent, out["samples"])
    return out, n, float(ts[-1] - ts[keep - 1]) / 1000.0


def drop_exit_wait(profile: dict, end_us: float, prune: bool = True) -> tuple[dict, int, float]:
    """The main thread's profile without Node's wait for jsprof after the program ended
    (`end_us`, V8's clock: the hook's 'exit' listener). After its 'exit' event Node waits
    (in process.exit()'s native reallyExit, or idle after a normal end) until jsprof has
    stopped the profiler: on a loaded machine that took 150 ms, 7.5 % of a tsc run. Dropped:
    the trailing samples after `end_us` that are idle, "(program)" or in reallyExit; kept:
    everything up to the last other sample (the script's own 'exit' listeners, a GC).
    Returns (profile, samples dropped, ms the profile got shorter: from the last kept
    sample to the last dropped one). No kept sample changes its time. `prune=False` leaves
    the nodes to one `prune_unsampled` after all the drops."""
    nodes = profile.get("nodes") or []
    samples = np.asarray(profile.get("samples") or [], dtype=np.int64)
    if not len(samples):
        return profile, 0, 0.0
    start = int(profile.get("startTime", 0))
    ts = np.cumsum(np.asarray(profile.get("timeDeltas") or [], dtype=np.int64)) + start
    waiting = {
        n["id"]
        for n in nodes
        if (n.get("callFrame") or {}).get("functionName") in _WAIT_NAMES
        and not (n.get("callFrame") or {}).get("url")
    }
    wait = np.isin(samples, np.fromiter(waiting, np.int64, len(waiting))) & (ts >= end_us)
    # the trailing run of waiting samples: from after the last sample that is not one
    other = np.flatnonzero(~wait)
    first = int(other[-1]) + 1 if len(other) else 0
    n = len(samples) - first
    if n == 0:
        return profile, 0, 0.0
    spanned = float(ts[-1] - ts[max(first - 1, 0)]) / 1000.0
    kept = samples[:first]
    out = dict(profile)
    out["samples"] = kept.tolist()
    out["timeDeltas"] = list((profile.get("timeDeltas") or [])[:first])
    # the profile ends where the program did, not where jsprof stopped it
    out["endTime"] = max(int(ts[first - 1]) if first else start, min(int(end_us), int(ts[first])))
    if prune:
        parent = {c: nd["id"] for nd in nodes for c in nd.get("children") or ()}
        out["nodes"] = _prune_unsampled(nodes, parent, out["samples"])
    return out, n, spanned
