"""The viewer's samples: every sample's time, weight and call-tree node, so that a time
range selected in the page (or given in its URL, `#range=START-END`) is counted by every
view exactly as `report` would count the samples in it.

A sample is in a range [START, END) when its time (ms from the recording's start) is: no
sample is cut in two at an edge. Times and weights are whole microseconds (the page sums
them as integers, so a range's total is exact to the microsecond); columns are zlib'd
little-endian int32 in base64, which the page inflates with the browser's own
DecompressionStream when a range is first asked for (the first view never waits for them):

- `t0`, `t`: the first sample's time (a JSON number), then each sample's time as the gap
  to the one before (the first 0), so the regular gaps of a sampler compress to almost
  nothing (a lane with a gap past int32's 35.8 minutes has no range filter);
- `wd`: its weight minus the gap to the next sample (0 for all but the last and the capped
  ones: `sample_weights`' rule, computed before any filter);
- `node`: its call-tree node (fg-index's numbering; samples without JavaScript are the
  root named as `report` names them, "(idle)", "(gc)"..., as the tree has them);
- `c`: recorded samples each stands for, where a trace merged some (else one each).
"""

from __future__ import annotations

import base64
import zlib

import numpy as np

from ..analysis.calltree import CallTree
from ..analysis.profile import FunctionKey, _tracks
from ..trace import NONE, Recording, no_stack_name, sample_weights

# Samples in the page at most (all tracks): past this the page has no range filter (its
# Time view still draws and its range table still counts the lanes' runs).
RANGE_SAMPLES = 20_000_000
INT32_MAX = 2**31 - 1  # the page's columns are int32: a gap in µs past this (35.8 min)


def _z(a: np.ndarray) -> str:
    raw = np.ascontiguousarray(a, dtype="<i4").tobytes()
    return base64.b64encode(zlib.compress(raw, 1)).decode("ascii")


def recording_start(rec: Recording, track: str | None) -> float | None:
    """The recording's start on the Time view's clock (ms, tracks placed by their time
    origins): its earliest sample or span. None without either."""
    tracks = _tracks(rec, track)
    origins = [t.time_origin for t in tracks]
    base = min(origins) if origins and all(o is not None for o in origins) else None
    first: list[float] = []
    for t in tracks:
        off = float(t.time_origin - base) if base is not None else 0.0  # type: ignore[operator]
        if t.trace.num_samples:
            first.append(float(t.trace.sample_time.min()) + off)
        if t.spans is not None and len(t.spans):
            first.append(float(np.min(t.spans.start)) + off)
    return min(first) if first else None


def sample_columns(rec: Recording, tree: CallTree, track: str | None) -> dict | None:
    """Per track, the columns above; `start`, `end`: the recording's first sample or span
    and the end of its last sample (ms on the Time view's clock). None where there is
    nothing to select (no samples, too many, no per-track tree)."""
    tracks = _tracks(rec, track)
    total = sum(t.trace.num_samples for t in tracks)
    if not total or total > RANGE_SAMPLES or len(tree.track_stack_node) != len(tracks):
        return None
    origins = [t.time_origin for t in tracks]
    base = min(origins) if origins and all(o is not None for o in origins) else None
    start = recording_start(rec, track)
    assert start is not None
    # The roots standing for samples without JavaScript, by the name report gives them.
    pseudo: dict[str, int] = {}
    for r in np.nonzero(tree.parent == NONE)[0].tolist():
        fk: FunctionKey = tree.functions[int(tree.function[r])]
        if fk.resource is None and not fk.location():
            pseudo.setdefault(fk.label(), r)
    lanes = []
    end = start
    for k, t in enumerate(tracks):
        tr = t.trace
        off = float(t.time_origin - base) if base is not None else 0.0  # type: ignore[operator]
        w = sample_weights(tr, t.sample_interval)
        st = tr.sample_stack
        node = np.full(len(st), -1, np.int64)
        has = st != NONE
        snode = tree.track_stack_node[k]
        if len(snode):
            node[has] = snode[st[has]]
        if (~has).any():
            codes = (tr.sample_marker[~has].astype(np.int64) if tr.sample_marker is not None
                     else np.full(int((~has).sum()), NONE, np.int64))
            fill = np.full(len(codes), -1, np.int64)
            for code in np.unique(codes).tolist():
                fill[codes == code] = pseudo.get(no_stack_name(code), -1)
            node[~has] = fill
        us = np.rint((tr.sample_time.astype(np.float64) + off - start) * 1000.0).astype(np.int64)
        order = np.argsort(us, kind="stable")
        us, node, w = us[order], node[order], w[order]
        w_us = np.rint(w * 1000.0).astype(np.int64)
        if len(us):
            end = max(end, start + float((us + w_us).max()) / 1000.0)
        gaps = np.diff(us)
        if len(gaps) and int(gaps.max()) > INT32_MAX:
            return None  # int32 would wrap: no range rather than wrong ranges
        gap_next = np.r_[gaps, 0]
        lane = {
            "n": int(len(us)),
            # the first sample's time whole: a track that starts late (its time origin
            # hours after the first track's) is a gap past int32's 35.8 minutes of µs
            "t0": int(us[0]) if len(us) else 0,
            "t": _z(np.r_[0, gaps]) if len(us) else _z(us),
            "wd": _z(w_us - gap_next),
            "node": _z(node),
        }
        if tr.sample_count is not None:
            lane["c"] = _z(tr.sample_count[order])
        lanes.append(lane)
    return {"start": round(start, 6), "end": round(end, 6), "lanes": lanes}
