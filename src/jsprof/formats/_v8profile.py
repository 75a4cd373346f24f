"""V8's CDP profile shape (`Profiler.Profile`), both ways: the one place that speaks CDP's
units. Shared by the `.cpuprofile` and Chrome trace formats and by the Node engine.

- microsecond timestamps (`startTime` plus `timeDeltas`), 0-based `lineNumber` and
  `columnNumber` with -1 for unknown, and V8's pseudo nodes: `(root)` is not a frame;
  samples in `(program)` have no stackId and the marker `other`, in `(garbage collector)`
  no stackId and the marker `gc`, in `(idle)` neither. Samples in JavaScript get the
  marker `script`.
- Times become milliseconds relative to a time origin: by default the profile's
  `startTime` (a file says nothing about the epoch); the Node engine passes the monotonic
  instant of Node's `performance.timeOrigin` instead. Deltas may be zero or negative
  (V8 does that): sample order is kept, times are not sorted. A step back of more than
  `trace.MAX_BACKWARDS_MS` is refused, as by every reader (`trace.step_back`).
- `positionTicks` (line, 1-based, and tick count per node) fill the per-sample line
  column. They are aggregates, so a node's samples get its lines in positionTicks order.
- PrimJS (Lynx's QuickJS-derived engine) records a sample only when the node changes
  while `hitCount` counts every tick; `changes_only` restores the missing repeats from
  the gaps between samples, so that per-node totals equal `hitCount`.

Per-sample work is vectorised with numpy; per-node work (there are far fewer nodes than
samples) is plain Python over lists.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import trace as model
from ..errors import ErrorAt, TraceFormatError
from ..trace import (
    MARKER_CODE,
    NO_LINE,
    NONE,
    ProfilerTrace,
    TraceBuilder,
    step_back,
    step_back_problem,
)
from ..traceparts import v8_node_frames
from . import _columns
from ._json import type_name


def _int_array(values: list, err: ErrorAt, field: str) -> np.ndarray:
    if not values:
        return np.zeros(0, np.int64)
    try:
        arr = np.array(values)
    except (ValueError, TypeError, OverflowError):
        arr = None
    # numpy takes true for 1: JSON's booleans are not ids or times, so look for them too.
    if arr is None or arr.dtype.kind != "i" or arr.ndim != 1 or _has_bool(values):
        for i, v in enumerate(values):
            if type(v) is not int:
                raise err(f"{field}[{i}]", f"expected an integer, got {type_name(v)}")
        raise err(field, "expected an array of integers")  # pragma: no cover
    return arr.astype(np.int64)


def _has_bool(values: list) -> bool:
    return bool in set(map(type, values))  # one pass in C (any() over a generator: ~3x)


def _check_node(err: ErrorAt, i: int, n: Any) -> None:
    """Slow path: name the first malformed member of node i."""
    where = f"nodes[{i}]"
    if type(n) is not dict:
        raise err(where, f"expected an object, got {type_name(n)}")
    if type(n.get("id")) is not int:
        raise err(f"{where}.id", "missing" if "id" not in n else "expected an integer")
    cf = n.get("callFrame")
    if type(cf) is not dict:
        raise err(f"{where}.callFrame", "missing" if cf is None else "expected an object")
    if type(cf.get("functionName")) is not str:
        raise err(f"{where}.callFrame.functionName", "missing or not a string")
    if type(cf.get("url", "")) is not str:
        raise err(f"{where}.callFrame.url", "expected a string")
    for key in ("lineNumber", "columnNumber"):
        if type(cf.get(key, -1)) is not int:
            raise err(f"{where}.callFrame.{key}", f"expected an integer, got {type_name(cf[key])}")
    ch = n.get("children", [])
    if type(ch) is not list or any(type(c) is not int for c in ch):
        raise err(f"{where}.children", "expected an array of node ids")
    if type(n.get("hitCount", 0)) is not int:
        raise err(f"{where}.hitCount", "expected an integer")
    pt = n.get("positionTicks", [])
    if type(pt) is not list:
        raise err(f"{where}.positionTicks", "expected an array")
    for j, t in enumerate(pt):
        if type(t) is not dict or type(t.get("line")) is not int or type(t.get("ticks")) is not int:
            raise err(f"{where}.positionTicks[{j}]", "expected {line: integer, ticks: integer}")


def _node_columns(err: ErrorAt, nodes: list) -> tuple:
    try:
        ids = [n["id"] for n in nodes]
        cfs = [n["callFrame"] for n in nodes]
        names = [c["functionName"] for c in cfs]
        urls = [c.get("url", "") for c in cfs]
        lines = [c.get("lineNumber", -1) for c in cfs]
        cols = [c.get("columnNumber", -1) for c in cfs]
        children = [n.get("children") or () for n in nodes]
        hits = [n.get("hitCount", 0) for n in nodes]
        ticks = [n.get("positionTicks") for n in nodes]
        ok = (
            all(type(x) is str for x in names)
            and all(type(x) is str for x in urls)
            and all(type(x) is int for x in lines)
            and all(type(x) is int for x in cols)
            and all(type(x) is int for x in ids)
            and all(type(x) is int for x in hits)
            and all(type(c) in (list, tuple) for c in children)
        )
    except (KeyError, TypeError, AttributeError):
        ok = False
    if not ok:
        for i, n in enumerate(nodes):
            _check_node(err, i, n)
        raise err("nodes", "malformed")  # pragma: no cover
    return ids, names, urls, lines, cols, children, hits, ticks


def _topological_order(parent: np.ndarray) -> np.ndarray:
    """Node indices so that each parent comes before its children (V8 already does this)."""
    n = len(parent)
    if n == 0 or bool((parent < np.arange(n)).all()):
        return np.arange(n)
    depth = np.zeros(n, np.int64)
    anc = parent.copy()
    active = np.nonzero(anc != NONE)[0]
    rounds = 0
    while len(active):
        rounds += 1
        if rounds > n:
            raise ValueError("cycle")
        depth[active] += 1
        anc[active] = parent[anc[active]]
        active = active[anc[active] != NONE]
    return np.argsort(depth, kind="stable")


def _ms(ts: np.ndarray, origin_us: float) -> np.ndarray:
    """CDP's microsecond timestamps as ms from the track's time origin (a new array)."""
    times = ts.astype(np.float64)
    times -= origin_us
    times /= 1000.0
    return times


def _expand_changes_only(
    idx: np.ndarray, ts: np.ndarray, hits: np.ndarray, end_time: int | None
) -> tuple[np.ndarray, np.ndarray]:
    """PrimJS lists a sample only when the node changes; restore the repeats hitCount counts.

    Each listed sample stands for itself plus the ticks that fell in the gap before the
    next one. The tick length is the median gap; repeats per sample are the gap in ticks
    less one, then corrected per node so the totals equal hitCount (the gaps are noisy),
    adding to or taking from the node's last listed sample.
    """
    n = len(idx)
    gaps = np.diff(ts)
    positive = gaps[gaps > 0]
    tick = float(np.median(positive)) if len(positive) else 1.0
    last_gap = tick if end_time is None else max(float(end_time - ts[-1]), tick)
    gap = np.append(gaps.astype(np.float64), last_gap)
    reps = np.maximum(np.rint(gap / tick) - 1, 0).astype(np.int64)
    listed = np.bincount(idx, minlength=len(hits))
    want = np.maximum(hits - listed, 0)
    got = np.bincount(idx, weights=reps, minlength=len(hits)).astype(np.int64)
    diff = want - got
    # The last listed sample of each node absorbs the correction.
    last = np.full(len(hits), -1, np.int64)
    last[idx] = np.arange(n)  # later indices overwrite earlier ones
    fix = np.nonzero(diff != 0)[0]
    fix = fix[last[fix] >= 0]
    reps[last[fix]] = np.maximum(reps[last[fix]] + diff[fix], 0)
    # If a node's correction went below zero on its last sample, take the rest from the
    # others in order; rare, and the loop runs over nodes, not samples.
    got = np.bincount(idx, weights=reps, minlength=len(hits)).astype(np.int64)
    for node in np.nonzero(got > want)[0].tolist():
        excess = int(got[node] - want[node])
        for j in np.nonzero(idx == node)[0].tolist():
            take = min(excess, int(reps[j]))
            reps[j] -= take
            excess -= take
            if not excess:
                break
    count = reps + 1
    new_idx = np.repeat(idx, count)
    # Repeats are spread evenly through their gap, so times stay in order.
    start = np.repeat(np.cumsum(count) - count, count)
    k = np.arange(len(new_idx)) - start
    step = np.repeat(gap / count, count)
    new_ts = np.repeat(ts, count) + k * step
    return new_idx, new_ts


def profile_to_trace(
    profile: Any, source: str, origin_us: float | None = None, prefix: str = ""
) -> tuple[ProfilerTrace, float]:
    """Convert one CDP Profile object; returns the trace and the origin used (microseconds)."""
    trace, origin, _added = profile_to_trace_counted(profile, source, origin_us, prefix)
    return trace, origin


def profile_to_trace_counted(
    profile: Any,
    source: str,
    origin_us: float | None = None,
    prefix: str = "",
    changes_only: bool = False,
) -> tuple[ProfilerTrace, float, int]:
    """`changes_only`: the PrimJS dialect, whose samples list only changes of node; the
    repeats its hitCounts imply are restored. Also returns how many were added."""
    err = ErrorAt(source, prefix)
    columns, start_time, end_time, sample_ids, deltas, nodes = read_profile(err, profile)
    return _convert(
        err, columns, start_time, end_time, sample_ids, deltas, origin_us, changes_only, nodes
    )


def read_profile(err: ErrorAt, profile: Any) -> tuple:
    """A CDP Profile object's parts, their types checked: (node columns, startTime,
    endTime, sample ids, time deltas, the node objects) for `read_tree`."""
    if type(profile) is not dict:
        raise err("(top level)", f"expected a Profile object, got {type_name(profile)}")
    nodes = profile.get("nodes")
    if type(nodes) is not list:
        raise err("nodes", "missing" if nodes is None else "expected an array")
    start_time = profile.get("startTime", 0)
    if type(start_time) not in (int, float):
        raise err("startTime", f"expected a number, got {type_name(start_time)}")
    end_time = profile.get("endTime")
    if end_time is not None and type(end_time) not in (int, float):
        raise err("endTime", f"expected a number, got {type_name(end_time)}")
    raw_samples = profile.get("samples", [])
    raw_deltas = profile.get("timeDeltas", [])
    if type(raw_samples) is not list:
        raise err("samples", "expected an array of node ids")
    if type(raw_deltas) is not list:
        raise err("timeDeltas", "expected an array of integers")
    if len(raw_deltas) != len(raw_samples):
        raise err(
            "timeDeltas",
            f"has {len(raw_deltas)} entries but samples has {len(raw_samples)}; "
            "each sample needs its delta",
        )

    columns = _node_columns(err, nodes)
    sample_ids = _int_array(raw_samples, err, "samples")
    deltas = _int_array(raw_deltas, err, "timeDeltas") if raw_deltas else np.zeros(0, np.int64)
    return columns, start_time, end_time, sample_ids, deltas, nodes


class FlatChildren:
    """Every node's children ids as one column (`flat`) and each node's count of them
    (`counts`): how `read_profile_text` gives the children lists."""

    __slots__ = ("counts", "flat")

    def __init__(self, counts: np.ndarray, flat: np.ndarray) -> None:
        self.counts, self.flat = counts, flat


def read_profile_text(text: bytes, start: int) -> tuple[tuple, int] | None:
    """`read_profile`'s parts of the Profile object whose `{` is at `start` in `text` (JSON
    as V8's inspector writes it), read in C with no dict per node, and the offset after
    the object; None for text the C reader leaves to `read_profile` on the parsed object
    (which words any error). The ids, hitCounts and children are numpy columns here."""
    # (an extension built before read_profile existed: the checked path, as before)
    reader = getattr(_columns, "read_profile", None)
    r = None if reader is None else reader(text, start)
    if r is None:
        return None
    ids, names, urls, lines, cols, counts, flat, hits, ticks, t0, t1, samples, deltas, end = r

    def col(b: bytearray) -> np.ndarray:
        return np.frombuffer(b, np.int64)

    children = FlatChildren(col(counts), col(flat))
    columns = (col(ids), names, urls, lines, cols, children, col(hits), ticks)
    if len(samples) != len(deltas):
        return None  # the checked path says which is short
    return (columns, t0, t1, col(samples), col(deltas), None), end


def _int64(err: ErrorAt, values: list, key: str) -> np.ndarray:
    """A per-node integer column; JSON integers beyond 64 bits are refused by name."""
    try:
        return np.array(values, dtype=np.int64) if len(values) else np.zeros(0, np.int64)
    except OverflowError:
        i = next(i for i, v in enumerate(values) if not -(2**63) <= v < 2**63)
        raise err(f"nodes[{i}].{key}", f"{values[i]} is out of range") from None


def _convert(
    err: ErrorAt,
    columns: tuple,
    start_time: float,
    end_time: float | None,
    sample_ids: np.ndarray,
    deltas: np.ndarray,
    origin_us: float | None,
    changes_only: bool,
    nodes: list,
) -> tuple[ProfilerTrace, float, int]:
    """The conversion proper, from checked node columns and sample columns. `nodes` (the
    node objects as read) is only looked at to word an error."""
    parent, idx, ts = read_tree(err, columns, start_time, end_time, sample_ids, deltas, nodes)
    return finish(
        err, columns, parent, idx, ts, start_time, end_time, origin_us, changes_only
    )


def read_tree(
    err: ErrorAt,
    columns: tuple,
    start_time: float,
    end_time: float | None,
    sample_ids: np.ndarray,
    deltas: np.ndarray,
    nodes: list,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The first half of a conversion, every check of the tree and of the samples' ids and
    clock: (each node's parent as a node index, NONE for a root; each sample's node index;
    each sample's timestamp in CDP's microseconds). The Node engine reads each slice of a
    recording with it and joins them as columns (engines/_v8slices.py) before `finish`."""
    ids, names, urls, lines, cols, children, hits, ticks = columns
    nn = len(ids)
    # Microsecond clocks fit a double exactly below 2**53; positions are 32-bit in V8.
    for key, v in (("startTime", start_time), ("endTime", end_time)):
        if v is not None and not abs(v) < 2**53:
            raise err(key, f"{v} is out of range")
    for key, values in (("lineNumber", lines), ("columnNumber", cols)):
        if values and not (-(2**31) <= min(values) and max(values) < 2**31):
            i = next(i for i, v in enumerate(values) if not -(2**31) <= v < 2**31)
            raise err(f"nodes[{i}].callFrame.{key}", f"{values[i]} is out of range")
    id_arr = _int64(err, ids, "id")
    order = np.argsort(id_arr, kind="stable")
    sorted_ids = id_arr[order]
    if nn > 1 and (dup := np.nonzero(sorted_ids[1:] == sorted_ids[:-1])[0]).size:
        i = int(order[dup[0] + 1])
        raise err(f"nodes[{i}].id", f"{ids[i]} is used by two nodes")

    # V8 numbers its nodes 1..n: then a table indexed by id finds each sample's node far
    # faster than a binary search per sample. Sparse ids fall back to the search.
    dense = nn > 0 and 0 <= int(sorted_ids[0]) and int(sorted_ids[-1]) < 4 * nn + 1024
    if dense:
        table = np.full(int(sorted_ids[-1]) + 1, -1, np.int64)
        table[id_arr] = np.arange(nn)

    def lookup(values: np.ndarray, field: str) -> np.ndarray:
        if dense and (not len(values) or (values.min() >= 0 and values.max() < len(table))):
            found = table[values]
            if len(found) and found.min() < 0:
                j = int(np.argmax(found < 0))
                raise err(f"{field}[{j}]", f"node id {int(values[j])} is not in nodes")
            return found
        pos = np.searchsorted(sorted_ids, values)
        pos_c = np.minimum(pos, max(nn - 1, 0))
        ok = (pos < nn) & (sorted_ids[pos_c] == values) if nn else np.zeros(len(values), bool)
        if not ok.all():
            j = int(np.argmin(ok))
            raise err(f"{field}[{j}]", f"node id {int(values[j])} is not in nodes")
        return order[pos_c]

    # Parents from the children lists, flattened in one pass.
    if isinstance(children, FlatChildren):
        n_children, child_ids = children.counts, children.flat
    else:
        n_children = np.fromiter(map(len, children), dtype=np.int64, count=nn)
        flat = [c for ch in children for c in ch]
        if not all(type(c) is int for c in flat):
            for i, n in enumerate(nodes):
                _check_node(err, i, n)
        child_ids = _int_array(flat, err, "nodes[].children") if flat else None
    parent = np.full(nn, NONE, np.int64)
    if child_ids is not None and len(child_ids):
        child_idx = lookup(child_ids, "children (flattened)")
        parent_of = np.repeat(np.arange(nn), n_children)
        seen = np.bincount(child_idx, minlength=nn)
        if (seen > 1).any():
            c = int(np.argmax(seen > 1))
            raise err(f"nodes[{c}]", f"node {ids[c]} is listed as a child twice")
        parent[child_idx] = parent_of
    try:
        _topological_order(parent)
    except ValueError:
        raise err("nodes", "the children lists form a cycle; a profile is a tree") from None

    idx = lookup(sample_ids, "samples")
    # Summed in float64 first: an int64 sum could wrap around silently, and below 2**53
    # (checked) the integer sum is exact.
    within = np.abs(np.cumsum(deltas, dtype=np.float64) + start_time) < 2**53
    if not within.all():
        j = int(np.argmin(within))
        raise err(
            f"timeDeltas[{j}]",
            "startTime plus the deltas up to here is beyond 2**53 us; is this file intact?",
        )
    ts = np.cumsum(deltas) + start_time
    return parent, idx, ts


def finish(
    err: ErrorAt,
    columns: tuple,
    parent: np.ndarray,
    idx: np.ndarray,
    ts: np.ndarray,
    start_time: float,
    end_time: float | None,
    origin_us: float | None,
    changes_only: bool = False,
    live: np.ndarray | None = None,
) -> tuple[ProfilerTrace, float, int]:
    """The second half of a conversion, from `read_tree`'s columns: the frames, stacks and
    samples of the trace. `live` (a mask over the nodes, closed under parents): only those
    nodes are interned, as if the others were not in the profile (the Node engine's nodes
    that only dropped samples had); the samples must all be at live nodes. `columns`'
    ids and children are not looked at, nor its hitCounts with `live`."""
    ids, names, urls, lines, cols, children, hits, ticks = columns
    nn = len(names)
    topo = _topological_order(parent)
    order = topo.tolist() if live is None else topo[live[topo]].tolist()

    # Frames, resources and stacks, interned in topological order so that the same
    # profile always gives the same ids (and a written profile reads back identically).
    keys, node_marker = v8_node_frames(names, urls, lines, cols, order)
    b = TraceBuilder()
    node_stack = b.intern_tree(parent.tolist(), keys, order)
    base = b.build()

    # Samples: vectorised.
    origin = float(start_time) if origin_us is None else float(origin_us)
    times = _ms(ts, origin)
    # The rule every reader applies, on the times the trace gets (PrimJS's restored
    # repeats fall inside forward gaps, so they never make a step back).
    back = step_back(times)
    if back is not None:
        i, j = back
        problem = step_back_problem(times, i, j, f"sample {j}")
        raise err(f"timeDeltas[{i}]", f"puts sample {i} {problem}")
    added = 0
    # (a joined profile's hitCounts are its slices': not checked, nor used)
    hit_arr = _int64(err, hits, "hitCount") if live is None else None
    if changes_only and hit_arr is not None:
        if len(idx) and int(hit_arr.sum()) > len(idx):
            if int(hit_arr.sum()) > model.MAX_SAMPLES or (hit_arr < 0).any():
                raise err(
                    "nodes", f"hitCounts add up to {int(hit_arr.sum())}; is this file intact?"
                )
            listed = len(idx)
            idx, ts = _expand_changes_only(idx, ts, hit_arr, end_time)
            added = len(idx) - listed
            times = _ms(ts, origin)  # the restored repeats have times of their own
    node_stack_arr = np.array(node_stack, dtype=np.int32) if nn else np.zeros(0, np.int32)
    node_marker_arr = np.array(node_marker, dtype=np.int8) if nn else np.zeros(0, np.int8)
    sample_stack = node_stack_arr[idx]
    sample_marker = node_marker_arr[idx]
    if not (sample_marker != NONE).any():
        sample_marker = None

    sample_line = _position_lines(err, ticks, idx, nn)

    trace = ProfilerTrace(
        resources=base.resources,
        frames=base.frames,
        stack_parent=base.stack_parent,
        stack_frame=base.stack_frame,
        sample_time=times,
        sample_stack=sample_stack,
        sample_marker=sample_marker,
        sample_line=sample_line,
    )
    return trace, origin, added


def _position_lines(err: ErrorAt, ticks: list, idx: np.ndarray, nn: int) -> np.ndarray | None:
    with_ticks = [i for i, t in enumerate(ticks) if t]
    if not with_ticks or not len(idx):
        return None
    node_lines: list[int] = []
    node_counts: list[int] = []
    per_node = np.zeros(nn, np.int64)
    for i in with_ticks:
        t = ticks[i]
        if type(t) is not list:
            raise err(f"nodes[{i}].positionTicks", "expected an array")
        try:
            ls = [p["line"] for p in t]
            cs = [p["ticks"] for p in t]
        except (KeyError, TypeError):
            ls = cs = None
        if (
            ls is None
            or not all(type(x) is int and -(2**31) <= x < 2**31 for x in ls)
            or not all(type(x) is int and x >= 0 for x in cs)
        ):
            j = next(
                (
                    j
                    for j, p in enumerate(t)
                    if type(p) is not dict
                    or type(p.get("line")) is not int
                    or not -(2**31) <= p["line"] < 2**31
                    or type(p.get("ticks")) is not int
                    or p["ticks"] < 0
                ),
                0,
            )
            raise err(
                f"nodes[{i}].positionTicks[{j}]", "expected {line: 32-bit integer, ticks: >= 0}"
            )
        node_lines.extend(ls)
        node_counts.extend(cs)
        total = sum(cs)
        if total > model.MAX_SAMPLES:
            raise err(f"nodes[{i}].positionTicks", "counts more ticks than jsprof reads")
        per_node[i] = total
    # All lines of all nodes, each repeated by its ticks, grouped by node in node order.
    lines_flat = np.repeat(np.array(node_lines, np.int64), np.array(node_counts, np.int64))
    offset = np.cumsum(per_node) - per_node
    # Rank of each sample among its node's samples, in time (listing) order.
    grouped = np.argsort(idx, kind="stable")
    gidx = idx[grouped]
    first = np.searchsorted(gidx, gidx, side="left")
    rank = np.arange(len(gidx)) - first
    have = rank < per_node[gidx]
    out = np.full(len(idx), NO_LINE, np.int32)
    pos = offset[gidx] + rank
    vals = np.where(have, lines_flat[np.minimum(pos, max(len(lines_flat) - 1, 0))], NO_LINE)
    out[grouped] = np.maximum(vals, NO_LINE)
    return out


# ---- writing -----------------------------------------------------------------------------


def trace_to_profile(trace: ProfilerTrace, start_us: float = 0.0) -> dict:
    """A CDP Profile object; `start_us` is the microsecond value of the track's time 0."""
    nstk = trace.num_stacks
    # Node ids: 1 (root), 2..nstk+1 the stacks, then the pseudo nodes that are used.
    marker = trace.sample_marker
    no_stack = trace.sample_stack == NONE
    if marker is None:
        pseudo_code = np.full(trace.num_samples, NONE, np.int64)
    else:
        pseudo_code = marker.astype(np.int64)
    gc_code, other_code = MARKER_CODE["gc"], MARKER_CODE["other"]
    kind = np.where(pseudo_code == gc_code, 1, np.where(pseudo_code == other_code, 2, 0))
    pseudo_names = ("(idle)", "(garbage collector)", "(program)")
    used_pseudo = [k for k in range(3) if (no_stack & (kind == k)).any()]
    pseudo_id = {k: nstk + 2 + j for j, k in enumerate(used_pseudo)}
    node_of_sample = trace.sample_stack.astype(np.int64) + 2
    if used_pseudo:
        lut = np.zeros(3, np.int64)
        for k, nid in pseudo_id.items():
            lut[k] = nid
        node_of_sample = np.where(no_stack, lut[kind], node_of_sample)

    n_nodes = nstk + 1 + len(used_pseudo)
    hit = np.bincount(node_of_sample - 1, minlength=n_nodes)
    parents = trace.stack_parent.astype(np.int64)
    parent_node = np.where(parents == NONE, 1, parents + 2)
    children: list[list[int]] = [[] for _ in range(n_nodes)]
    for child, p in enumerate(parent_node.tolist()):
        children[p - 1].append(child + 2)
    for nid in pseudo_id.values():
        children[0].append(nid)

    # positionTicks from the per-sample line column.
    ticks: dict[int, list[dict]] = {}
    if trace.sample_line is not None:
        has = (trace.sample_line != NO_LINE) & ~no_stack
        if has.any():
            key = np.stack([node_of_sample[has], trace.sample_line[has].astype(np.int64)], 1)
            uniq, counts = np.unique(key, axis=0, return_counts=True)
            for (nid, line), c in zip(uniq.tolist(), counts.tolist(), strict=True):
                ticks.setdefault(nid, []).append({"line": line, "ticks": c})

    # CDP wants a scriptId per script; one per resource is all a trace can tell.
    script_ids = {r: str(r + 1) for r in range(len(trace.resources))}

    def call_frame(name: str, rid: int | None, line: int | None, col: int | None) -> dict:
        return {
            "functionName": name,
            "scriptId": script_ids[rid] if rid is not None else "0",
            "url": trace.resources[rid] if rid is not None else "",
            "lineNumber": line - 1 if line is not None else -1,
            "columnNumber": col - 1 if col is not None else -1,
        }

    hits = hit.tolist()
    nodes: list[dict] = [
        {"id": 1, "callFrame": call_frame("(root)", None, None, None), "hitCount": hits[0]}
    ]
    frames = trace.frames
    for s, f in enumerate(trace.stack_frame.tolist()):
        fr = frames[f]
        nodes.append({"id": s + 2, "callFrame": call_frame(*fr), "hitCount": hits[s + 1]})
    for k, nid in pseudo_id.items():
        nodes.append(
            {
                "id": nid,
                "callFrame": call_frame(pseudo_names[k], None, None, None),
                "hitCount": hits[nid - 1],
            }
        )
    for nd in nodes:
        ch = children[nd["id"] - 1]
        if ch:
            nd["children"] = ch
        t = ticks.get(nd["id"])
        if t:
            nd["positionTicks"] = t

    us = np.rint(trace.sample_time * 1000.0 + start_us)
    # What the reader takes (`_convert`): microseconds below 2**53, which a double holds.
    beyond = ~(np.abs(np.append(us, np.rint(start_us))) < 2**53)
    if beyond.any():
        i = int(np.argmax(beyond))
        what = f"sample {i} is at" if i < len(us) else "the profile starts at"
        raise TraceFormatError(
            f"cannot write a CDP profile: {what} {np.append(us, start_us)[i]:.6g} µs, and "
            "its clock counts microseconds below 2**53 (285 years); write .jsprof.json"
        )
    ts = us.astype(np.int64)
    start = int(round(start_us))
    deltas = np.diff(ts, prepend=start)
    end = int(max(ts.max(), start)) if len(ts) else start
    return {
        "nodes": nodes,
        "startTime": start,
        "endTime": end,
        "samples": node_of_sample.tolist(),
        "timeDeltas": deltas.tolist(),
    }
