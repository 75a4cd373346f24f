"""One Node thread's profile slices to its track's columns without numpy (issue 32): the
inspector's text read in C (`formats._columns.read_profile`), the slices joined, jsprof's
own samples and waits dropped (a worker's wait at its start spliced out), the nodes the
kept samples are at or under interned into the spec's tables, as recorded.py's LightTrack.

It takes what V8's inspector writes: node ids 1..n, each node listed after its parent,
samples in range. Anything else (a slice the C reader leaves to the JSON parser, a step
back in time, malformed positionTicks) gives None, and the caller converts with
`_v8slices` on numpy, which checks and words every problem. The result is the same trace,
column for column (tests/test_node_light.py, and on real programs the summary's numbers:
tests/test_node_light_summary.py): the rules below are `_v8slices`' and
`formats._v8profile.finish`'s, written over lists; a rule changed there changes here.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Callable, Iterable
from itertools import accumulate
from typing import Any

from ..formats import _columns
from ..recorded import LightTrace, LightTrack
from ..traceparts import (
    MAX_BACKWARDS_MS,
    NO_LINE,
    NONE,
    StackTable,
    normalised_tables,
    v8_node_frames,
)
from ._v8text import ProfileText

# What loads a preload (`--require`) in Node 18-22: pre_execution's loadPreloadModules and
# the CommonJS loader's Module._preloadModules.
PRELOAD_FNS = frozenset({"loadPreloadModules", "Module._preloadModules"})
PSEUDO = frozenset({"(program)", "(garbage collector)", "(idle)"})
# What a thread shows while Node waits for jsprof after the program's end: nothing running
# (idle, or V8's own "(program)"), or the native process.exit() it waits in.
WAIT_NAMES = frozenset({"(idle)", "(program)", "reallyExit"})
REALLY_EXIT = "reallyExit"  # process.exit()'s native end: it never returns
GC = "(garbage collector)"
PROGRAM = "(program)"  # V8's name for the thread busy outside JavaScript
MAX_SAMPLES = 100_000_000  # trace.MAX_SAMPLES: the most ticks a node's positionTicks count
_LIMIT = 2**53  # microsecond clocks a double holds exactly


class Joined:
    """A thread's slices in one node index space: per node its name, URL, 0-based line and
    column, positionTicks and parent (NONE for a root; parents come first); the kept
    samples' nodes and CDP microsecond timestamps."""

    __slots__ = (
        "names", "urls", "lines", "cols", "ticks", "parent", "removed", "node", "ts",
        "start_time",
    )

    def __init__(self) -> None:
        self.names: list[str] = []
        self.urls: list[str] = []
        self.lines: list[int] = []
        self.cols: list[int] = []
        self.ticks: list = []
        self.parent: list[int] = []
        self.removed = bytearray()  # spliced out (a worker's pause wrapper): never a frame
        self.node: list[int] = []
        self.ts: list[int] = []
        self.start_time: int = 0


def _ints(b: bytearray) -> list[int]:
    return memoryview(b).cast("q").tolist()


def _read(p: ProfileText, hide_urls: set[str] | frozenset[str], splice: str | None) -> tuple | None:
    """One slice: (names, urls, lines, cols, ticks, parent, node, ts, startTime, wrap,
    cut), its samples in code from `hide_urls` dropped; None for anything but V8's plain
    shape. `cut`: where the program's samples end, the first of the trailing dropped ones
    (the bridge before Profiler.stop) or else the slice's endTime (None without one)."""
    reader = getattr(_columns, "read_profile", None)
    got = None if reader is None else reader(p.raw, p.start)
    if got is None or p.raw[got[13]:].strip() != b"}}":
        return None
    ids_b, names, urls, lines, cols, counts_b, flat_b, _hits, ticks, t0, t1, smp, dl, _ = got
    nn = len(names)
    if not abs(t0) < _LIMIT or (t1 is not None and not abs(t1) < _LIMIT):
        return None
    for values in (lines, cols):
        if values and not (-(2**31) <= min(values) and max(values) < 2**31):
            return None
    ids = _ints(ids_b)
    counts, flat = _ints(counts_b), _ints(flat_b)
    samples, deltas = _ints(smp), _ints(dl)
    if len(counts) != nn or sum(counts) != len(flat) or len(samples) != len(deltas):
        return None
    if ids == list(range(1, nn + 1)):
        # V8 numbers its nodes 1..n in the order it lists them: an id is its index + 1
        flat = [x - 1 for x in flat]
        node = [x - 1 for x in samples]
        if (flat and not (min(flat) >= 0 and max(flat) < nn)) or (
            node and not (min(node) >= 0 and max(node) < nn)
        ):
            return None
    else:
        if nn and (min(ids) < 0 or max(ids) >= 4 * nn + 1024):
            return None
        table = [-1] * (max(ids) + 1 if nn else 0)
        for i, x in enumerate(ids):
            if table[x] >= 0:
                return None
            table[x] = i
        size = len(table)
        flat = [table[x] if 0 <= x < size else -1 for x in flat]
        node = [table[x] if 0 <= x < size else -1 for x in samples]
        if (flat and min(flat) < 0) or (node and min(node) < 0):
            return None
    # Each node's parent from the children lists: every child listed once, after its parent.
    if len(set(flat)) != len(flat):
        return None
    parent = [NONE] * nn
    of = [i for i, c in enumerate(counts) for _ in range(c)]
    for j, i in zip(flat, of, strict=True):
        if j <= i:
            return None
        parent[j] = i
    ts = list(accumulate(deltas))
    if ts:
        ts = [t + t0 for t in ts]
        if not (-_LIMIT < min(ts) and max(ts) < _LIMIT):
            return None
    cut = t1
    if hide_urls and not hide_urls.isdisjoint(urls):
        inherited = [False] * nn
        for i in range(nn):
            p_ = parent[i]
            inherited[i] = urls[i] in hide_urls or (p_ != NONE and inherited[p_])
        kept = [i for i, n in enumerate(node) if not inherited[n]]
        last_kept = max((ts[i] for i in kept), default=float("-inf"))
        trailing = [t for t, n in zip(ts, node, strict=True) if inherited[n] and t > last_kept]
        if trailing:
            cut = min(trailing)
        node = [node[i] for i in kept]
        ts = [ts[i] for i in kept]
    wrap = bytearray(nn)
    if splice is not None:
        # A worker's pause wrapper (pause.py), as _v8slices.join_slices splices it: its own
        # samples dropped, its children hung from its parent (after the hidden code's
        # samples were found on the tree as V8 wrote it).
        for i, (n, u) in enumerate(zip(names, urls, strict=True)):
            if n == splice and not u:
                wrap[i] = 1
        if any(wrap):
            kept = [i for i, n in enumerate(node) if not wrap[n]]
            node = [node[i] for i in kept]
            ts = [ts[i] for i in kept]
            for i in range(nn):  # parents first: a wrapper's parent is already resolved
                p_ = parent[i]
                if p_ != NONE and wrap[p_]:
                    parent[i] = parent[p_]
    return names, urls, lines, cols, ticks, parent, node, ts, t0, wrap, cut


def _insert_slice_gaps(j: Joined, cuts: list[float]) -> None:
    """A "(program)" sample at each slice's cut (`_read`) that a kept sample follows: from
    there to the next slice's first kept sample the thread ran jsprof's own work (the
    bridge, Profiler.stop serialising the slice, Profiler.start), not the program. Without
    it that time (1-40 ms a slice change on a tsc run at load ~10, 3-5 % of the run at
    0.1 ms) was the self time of whatever function ran before the change."""
    ts = j.ts
    at: list[tuple[int, float]] = []
    for c in cuts:
        k = bisect_right(ts, c)
        if 0 < k < len(ts) and ts[k - 1] < c and (not at or at[-1][0] != k):
            at.append((k, c))
    if not at:
        return
    program = len(j.names)
    j.names.append(PROGRAM)
    j.urls.append("")
    j.lines.append(-1)
    j.cols.append(-1)
    j.ticks.append(None)
    j.parent.append(NONE)
    j.removed.append(0)
    for k, c in reversed(at):
        j.ts.insert(k, c)
        j.node.insert(k, program)


def join(
    slices: list, hide_urls: set[str] | frozenset[str] = frozenset(), splice: str | None = None
) -> Joined | None:
    """_v8slices.join_slices over lists; None where that one is needed (see the module)."""
    j = Joined()
    several = len(slices) > 1
    last = float("-inf")
    starts = []
    cuts: list[float] = []  # each slice's cut (`_read`): where jsprof's work began
    for p in slices:
        if not isinstance(p, ProfileText):
            return None
        got = _read(p, hide_urls, splice)
        if got is None:
            return None
        names, urls, lines, cols, ticks, parent, node, ts, t0, wrap, cut = got
        if several and not names:
            continue  # a slice without nodes has nothing to join
        if several and cut is not None:
            cuts.append(float(cut))
        if several:
            # A slice begins with the ticks V8 took before the previous one ended but
            # processed after: back in time order, and a tick two slices hold kept once.
            order = sorted(range(len(ts)), key=ts.__getitem__)
            order = [i for i in order if ts[i] > last]
            node = [node[i] for i in order]
            ts = [ts[i] for i in order]
            if ts:
                last = ts[-1]
        offset = len(j.names)
        j.parent += [x + offset if x != NONE else NONE for x in parent]
        j.removed += wrap
        j.node += [x + offset for x in node]
        j.ts += ts
        starts.append(t0)
        j.names += names
        j.urls += urls
        j.lines += lines
        j.cols += cols
        j.ticks += ticks
    j.start_time = (min(starts) if several else starts[0]) if starts else 0
    if several:
        _insert_slice_gaps(j, cuts)
    return j


def preload_kinds(names: list[str], urls: list[str], parent: Any) -> Callable[[int], str]:
    """What a node is, for dropping the preload's leading samples (preload_end):
    "preload" (only Node's loader, under a function that loads the preload), "pseudo"
    (idle, GC, "(program)") or "other" (the script's own). `parent`: a list or numpy
    column, NONE at a root."""
    kind: dict[int, str] = {}

    def kind_of(i: int) -> str:
        if i in kind:
            return kind[i]
        in_preload = False
        internal = True
        cur = i
        while cur != NONE:
            url = urls[cur]
            if url and not url.startswith("node:"):
                internal = False
            if names[cur] in PRELOAD_FNS:
                in_preload = True
            cur = int(parent[cur])
        if names[i] in PSEUDO and not urls[i]:
            k = "pseudo"
        else:
            k = "preload" if in_preload and internal else "other"
        kind[i] = k
        return k

    return kind_of


def preload_end(
    names: list[str], urls: list[str], parent: Any, samples: Iterable[tuple[int, int]]
) -> int:
    """The last of the leading samples still in Node's loading of the preload (-1: none),
    of `samples`, (index, node) pairs of the samples from the go on, in time order: the
    walk ends at the first of the script's own, passing over idle, GC and "(program)".
    One walk for this module's drop_preload (lists) and _v8slices' (numpy)."""
    kind_of = preload_kinds(names, urls, parent)
    last = -1
    for i, n in samples:
        k = kind_of(n)
        if k == "preload":
            last = i
        elif k == "other":
            break
    return last


def drop_preload(j: Joined, go_us: float) -> None:
    """_v8slices.drop_preload: the main thread's samples from the instant the preload let
    the script go, without the loader's return from the preload just after it."""
    keep = [t >= go_us for t in j.ts]
    last = preload_end(
        j.names, j.urls, j.parent,
        ((i, n) for i, (n, ok) in enumerate(zip(j.node, keep, strict=True)) if ok),
    )
    if last >= 0:
        keep[: last + 1] = [False] * (last + 1)
    if any(keep):
        j.start_time = max(j.start_time, int(go_us))
    j.node = [n for n, ok in zip(j.node, keep, strict=True) if ok]
    j.ts = [t for t, ok in zip(j.ts, keep, strict=True) if ok]


def exit_wait_start(names: list[str], urls: list[str], node, ts, end_us: float) -> int:
    """Where Node's wait for jsprof after the program's end (`end_us`) starts among the
    samples (`node`, `ts`: lists or numpy columns): len(node) when there is none.

    After process.exit() the wait is everything from the first sample in its native
    reallyExit, which never returns: while Node waits there it runs jsprof's commands
    (each slice's stop and start, its bridge calls), and a sample taken then shows
    process.exit's JS `exit` as the leaf, without reallyExit (seen on Node 20 at load
    10-15: one such sample kept 7 % of a tsc profile in the wait). After a normal end the
    wait is the trailing run of idle and "(program)" samples, with the GC tasks Node ran
    while it waited (they run because it waits): a GC right after the program's last JS is
    its allocation's, and stays."""
    n = len(node)
    after = n  # the first sample at or after the end
    while after and ts[after - 1] >= end_us:
        after -= 1
    for k in range(after, n):
        i = int(node[k])
        if names[i] == REALLY_EXIT and not urls[i]:
            return k
    first = n
    while first > after:
        i = int(node[first - 1])
        if urls[i] or not (names[i] in WAIT_NAMES or names[i] == GC):
            break
        first -= 1
    while first < n and names[int(node[first])] == GC:
        first += 1
    return first


def drop_exit_wait(j: Joined, end_us: float) -> tuple[int, float]:
    """_v8slices.drop_exit_wait over lists: Node's wait for jsprof after the program ended
    (exit_wait_start), dropped from the end; (samples dropped, ms from the last kept sample
    to the last dropped)."""
    node, ts = j.node, j.ts
    first = exit_wait_start(j.names, j.urls, node, ts, end_us)
    n = len(node) - first
    if n == 0:
        return 0, 0.0
    spanned = float(ts[-1] - ts[max(first - 1, 0)]) / 1000.0
    j.node, j.ts = node[:first], ts[:first]
    return n, spanned


def _position_lines(ticks: list, node: list[int]) -> array | bool | None:
    """formats._v8profile's per-sample lines from positionTicks (a node's samples get its
    lines in positionTicks order); None: no line data; False: ticks the checked path must
    word."""
    with_ticks = [i for i, t in enumerate(ticks) if t]
    if not with_ticks or not node:
        return None
    # Checked all at once (what the checked path words is for it to say: False), then
    # expanded only for the nodes a kept sample is at.
    try:
        if not all(type(ticks[i]) is list for i in with_ticks):
            return False
        entries = [p for i in with_ticks for p in ticks[i]]
        ls = [p["line"] for p in entries]
        cs = [p["ticks"] for p in entries]
    except (KeyError, TypeError):
        return False
    if (ls and not (set(map(type, ls)) == {int} and -(2**31) <= min(ls) and max(ls) < 2**31)) or (
        cs and not (set(map(type, cs)) == {int} and min(cs) >= 0 and sum(cs) <= MAX_SAMPLES)
    ):
        return False
    lines: dict[int, list[int]] = {}
    sampled = set(node)
    for i in with_ticks:
        if i in sampled:
            lines[i] = [p["line"] for p in ticks[i] for _ in range(p["ticks"])]
    seen: dict[int, int] = {}
    out = array("i", bytes(4 * len(node)))
    for k, n in enumerate(node):
        have = lines.get(n)
        if have is None:
            continue
        r = seen.get(n, 0)
        seen[n] = r + 1
        if r < len(have):
            out[k] = max(have[r], NO_LINE)
    return out


def to_trace(j: Joined, origin_us: float | None) -> LightTrace | None:
    """_v8slices.ThreadProfile.to_trace over lists: the nodes the kept samples are at or
    under (and each slice's root) interned in node order; None for a step back in time or
    positionTicks the checked path must word."""
    parent, names, urls, lines, cols = j.parent, j.names, j.urls, j.lines, j.cols
    n = len(parent)
    live = bytearray(n)
    for s in set(j.node):
        while s != NONE and not live[s]:
            live[s] = 1
            s = parent[s]
    removed = j.removed
    order = [
        i for i, (x, p) in enumerate(zip(live, parent, strict=True))
        if x or (p == NONE and not removed[i])
    ]
    keys, node_marker = v8_node_frames(names, urls, lines, cols, order)
    table = StackTable()
    node_stack = table.intern_tree(parent, keys, order)
    resources, frames, stack_parent, stack_frame = table.tables()
    origin = float(j.start_time) if origin_us is None else float(origin_us)
    times = [(float(t) - origin) / 1000.0 for t in j.ts]
    latest = float("-inf")
    for t in times:  # trace.step_back: the checked path refuses it, in its words
        if t < latest - MAX_BACKWARDS_MS:
            return None
        latest = max(latest, t)
    line = _position_lines(j.ticks, j.node)
    if line is False:
        return None
    markers = [node_marker[x] for x in j.node]
    # resources spelled one way per script (trace.normalise_resources)
    got = normalised_tables(resources, frames)
    if got is not None:
        resources, frames = got
    return LightTrace(
        resources, frames, array("i", stack_parent), array("i", stack_frame),
        array("d", times), array("i", [node_stack[x] for x in j.node]),
        array("b", markers) if any(m != NONE for m in markers) else None,
        line if isinstance(line, array) else None,
    )


def thread_track(
    slices: list, name: str, engine: str, requested_ms: float, time_origin: float,
    origin_us: float | None, hide_urls: set[str] | frozenset[str] = frozenset(),
    splice: str | None = None, go_us: float | None = None, exit_end: float | None = None,
) -> tuple[LightTrack, tuple[int, float] | None] | None:
    """The thread's track as isolate.track makes it (engines/_v8session.make_track's meta:
    the median gap V8 achieved), and what drop_exit_wait dropped; None: use _v8slices."""
    j = join(slices, hide_urls, splice)
    if j is None:
        return None
    if go_us is not None:
        drop_preload(j, go_us)
    exit_wait = drop_exit_wait(j, exit_end) if exit_end is not None else None
    trace = to_trace(j, origin_us)
    if trace is None:
        return None
    meta = {}
    gap = trace.median_gap()
    if gap is not None:
        meta["medianIntervalMs"] = round(gap, 4)
    return (
        LightTrack(name, trace, time_origin, engine, requested_ms, requested_ms, meta),
        exit_wait,
    )
