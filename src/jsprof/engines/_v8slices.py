"""V8 CPU profiles in CDP's shape, as the Node and Chromium engines take them: joining the
slices of one thread's profile (taken one after another while recording) into one, and
dropping the samples taken inside jsprof's own code.

Chromium joins its slices as CDP profiles (`concat_profiles`) and drops a page thread's
trailing wait from them (`drop_after_last_work`). The Node engine reads each
slice once into columns (`formats/_v8profile.read_tree`, with every check the reader
makes), joins them (`join_slices`), drops samples on masks (jsprof's own code, a worker's
wait at its start, the preload, the wait after the program's end) and interns only the
nodes some kept sample is at or under (`ThreadProfile.to_trace`): a tsc recording's slices
hold ~25,000 nodes, and each pass over them as dicts cost ms of every recording's end
(the earlier drops, one pass each, were ~0.1 s of a 3 s tsc run; issue 32).

Since the record path without numpy (issue 32), the Node engine converts with
`_v8join` (the same rules over lists) and comes here only for what that one does not
take: a slice the C reader leaves to the JSON parser, a profile this module's checks must
word (a worker's pause wrapper is spliced there too, alike: tests/test_node_light.py)."""

from __future__ import annotations

import collections

import numpy as np

from ._v8join import PROGRAM, exit_wait_start, preload_end  # the rules: one copy, there
from ._v8text import ProfileText

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..trace import ProfilerTrace


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


class ThreadProfile:
    """One thread's V8 profile joined from its slices as columns: the nodes of every slice
    in one index space (parents first, as V8 lists them), and the samples kept so far
    (node index and CDP microsecond timestamp, in order)."""

    def __init__(
        self, source: str, columns: tuple, parent: np.ndarray, removed: np.ndarray,
        node: np.ndarray, ts: np.ndarray, start_time: float,
    ) -> None:
        self.source = source
        self.columns = columns  # (None, names, urls, lines, columns, None, None, ticks)
        self.parent = parent
        self.removed = removed  # spliced out (a worker's pause wrapper): never a frame
        self.node = node
        self.ts = ts
        self.start_time = start_time

    @property
    def names(self) -> list[str]:
        return self.columns[1]

    @property
    def urls(self) -> list[str]:
        return self.columns[2]

    def to_trace(self, origin_us: float | None) -> ProfilerTrace:
        """The trace of the kept samples (`origin_us`: V8's clock at the track's time 0; None:
        the profile's start). A node no kept sample is at or under is not a frame of it
        (each slice's root stays): a path only dropped samples took leaves nothing behind."""
        from ..errors import ErrorAt
        from ..formats._v8profile import finish

        parent = self.parent.tolist()
        live = bytearray(len(parent))
        for s in set(self.node.tolist()):
            while s != -1 and not live[s]:
                live[s] = 1
                s = parent[s]
        mask = np.frombuffer(live, np.uint8).astype(bool)
        mask |= (self.parent == -1) & ~self.removed
        trace, _, _ = finish(
            ErrorAt(self.source), self.columns, self.parent, self.node, self.ts,
            self.start_time, None, origin_us, live=mask,
        )
        return trace


def _inherited(parent: np.ndarray, flag: np.ndarray) -> np.ndarray:
    """Per node: whether it or any of its ancestors has `flag` (pointer jumping: log2 of
    the depth rounds over all nodes)."""
    n = len(parent)
    up = np.where(parent < 0, n, parent)
    up = np.append(up, n)  # a sentinel above every root: its own parent, no flag
    f = np.append(flag, False)
    while True:
        f |= f[up]
        nxt = up[up]
        if np.array_equal(nxt, up):
            return f[:n]
        up = nxt


def join_slices(
    slices: list[dict | ProfileText], source: str,
    hide_urls: set[str] | frozenset[str] = frozenset(),
    splice: str | None = None,
) -> ThreadProfile:
    """The slices of one thread's profile as one ThreadProfile, every other sample keeping
    its timestamp: without the samples taken inside code from `hide_urls` (jsprof's own:
    the preload's wait, the slices' bridge) and without the nodes named `splice` with no
    URL (a worker's wait at its start, pause.py), their samples dropped and their children
    hung from their parents. Joined as `concat_profiles` joins slices (one is taken as it
    is)."""
    from ..errors import ErrorAt
    from ..formats._v8profile import read_profile, read_tree

    err = ErrorAt(source)
    names: list[str] = []
    urls: list[str] = []
    lines: list[int] = []
    cols: list[int] = []
    ticks: list = []
    parents, removed, nodes_out, ts_out = [], [], [], []
    several = len(slices) > 1
    last = -np.inf
    starts = []
    cuts: list[float] = []
    for p in slices:
        got = p.read() if isinstance(p, ProfileText) else None
        if got is None:
            if isinstance(p, ProfileText):
                p = p.as_dict()  # text the C reader leaves to the checked path
            if several and not p.get("nodes"):
                continue  # as concat_profiles: a slice without nodes has nothing to join
            got = read_profile(err, p)
        elif several and not got[0][1]:
            continue
        columns, start, _end, ids, deltas, objs = got
        parent, node, ts = read_tree(err, columns, start, _end, ids, deltas, objs)
        _, p_names, p_urls, p_lines, p_cols, _, _, p_ticks = columns
        keep = np.ones(len(node), bool)
        cut = _end  # _v8join._read's: where the program's samples end
        if hide_urls and not hide_urls.isdisjoint(p_urls):
            own = np.fromiter(map(hide_urls.__contains__, p_urls), bool, len(p_urls))
            keep &= ~_inherited(parent, own)[node]
            last_kept = ts[keep].max() if keep.any() else -np.inf
            trailing = ts[~keep & (ts > last_kept)]
            if len(trailing):
                cut = trailing.min()
        if several and p_names and cut is not None:
            cuts.append(float(cut))
        gone = np.zeros(len(parent), bool)
        if splice is not None:
            wrap = np.fromiter(
                (n == splice and not u for n, u in zip(p_names, p_urls, strict=True)),
                bool, len(p_names),
            )
            if wrap.any():
                keep &= ~wrap[node]
                gone = wrap
                while True:  # the wrappers' children hang from the wrappers' parents
                    below = np.flatnonzero((parent >= 0) & wrap[np.maximum(parent, 0)])
                    if not len(below):
                        break
                    parent[below] = parent[parent[below]]
        node, ts = node[keep], ts[keep]
        if several:
            # A slice begins with the ticks V8 took before the previous one ended but
            # processed after: back in time order, and a tick two slices hold kept once.
            order = np.argsort(ts, kind="stable")
            node, ts = node[order], ts[order]
            later = ts > last
            node, ts = node[later], ts[later]
            if len(ts):
                last = float(ts[-1])
        offset = len(names)
        parents.append(np.where(parent >= 0, parent + offset, -1))
        removed.append(gone)
        nodes_out.append(node + offset)
        ts_out.append(ts)
        starts.append(start)
        names += p_names
        urls += p_urls
        lines += p_lines
        cols += p_cols
        ticks += p_ticks

    def cat(parts: list[np.ndarray], dtype: type) -> np.ndarray:
        return np.concatenate(parts) if parts else np.zeros(0, dtype)

    node_all, ts_all = cat(nodes_out, np.int64), cat(ts_out, np.int64)
    # _v8join._insert_slice_gaps: a "(program)" sample at each slice's cut that a kept
    # sample follows (jsprof's work from there to the next slice's first sample)
    at: list[tuple[int, float]] = []
    for c in cuts if several else []:
        k = int(np.searchsorted(ts_all, c, side="right"))
        if 0 < k < len(ts_all) and ts_all[k - 1] < c and (not at or at[-1][0] != k):
            at.append((k, c))
    if at:
        program = len(names)
        names.append(PROGRAM)
        urls.append("")
        lines.append(-1)
        cols.append(-1)
        ticks.append(None)
        parents.append(np.array([-1], np.int64))
        removed.append(np.zeros(1, bool))
        where = [k for k, _ in at]
        node_all = np.insert(node_all, where, program)
        ts_all = np.insert(ts_all, where, [c for _, c in at])
    return ThreadProfile(
        source,
        (None, names, urls, lines, cols, None, None, ticks),
        cat(parents, np.int64),
        cat(removed, bool),
        node_all,
        ts_all,
        (min(starts) if several else starts[0]) if starts else 0,
    )


def drop_preload(tp: ThreadProfile, go_us: float) -> None:
    """The main thread's samples from the instant jsprof's preload let the script go
    (`go_us`, V8's clock): none before it (the preload's wait, with the profiler already
    running), nor the loader's return from the preload just after it (the leading samples
    still inside Node's preload loading and in no script of their own; a later `--require`
    of the user's keeps its code's samples). No kept sample changes its time, and none is
    charged for what was dropped: all of it comes before the first kept one."""
    keep = tp.ts >= go_us
    idx = np.flatnonzero(keep)
    # The leading samples only: the walk ends at the first of the script's own.
    last = preload_end(
        tp.names, tp.urls, tp.parent, zip(idx.tolist(), tp.node[idx].tolist(), strict=True)
    )
    if last >= 0:
        keep[: last + 1] = False
    if keep.any():
        tp.start_time = max(tp.start_time, int(go_us))
    tp.node, tp.ts = tp.node[keep], tp.ts[keep]


def drop_exit_wait(tp: ThreadProfile, end_us: float) -> tuple[int, float]:
    """The main thread's samples without Node's wait for jsprof after the program ended
    (`end_us`, V8's clock: the hook's 'exit' listener). After its 'exit' event Node waits
    (in process.exit()'s native reallyExit, or idle after a normal end) until jsprof has
    stopped the profiler: on a loaded machine that took 150 ms, 7.5 % of a tsc run. What
    is dropped is _v8join.exit_wait_start's (one rule for both paths): kept, everything
    the program ran up to then (the script's own 'exit' listeners, their GCs). Returns
    (samples dropped, ms from the last kept sample to the last dropped one)."""
    # From the end back: a few samples, not a look at each of the joined slices' ~35,000
    # nodes (tsc-ajv: ~3 ms of every recording's end).
    first = exit_wait_start(tp.names, tp.urls, tp.node, tp.ts, end_us)
    n = len(tp.node) - first
    if n == 0:
        return 0, 0.0
    spanned = float(tp.ts[-1] - tp.ts[max(first - 1, 0)]) / 1000.0
    tp.node, tp.ts = tp.node[:first], tp.ts[:first]
    return n, spanned
