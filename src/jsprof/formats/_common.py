"""Helpers shared by the stack-list formats (speedscope, pprof, folded, Firefox Profiler).

Samples without JavaScript: those formats have no "sample with no stack", and dropping
such samples would hide idle and GC time. They are written as a one-frame stack of a
pseudo frame named after the sample's marker, the way V8 names its own pseudo nodes, and
read back into no stackId plus that marker. A pseudo frame has no resource, so a real
JavaScript function of the same name (which has a script) is never taken for one.

`build_trace` is the one builder the readers share: unique stacks as frame lists (per
stack work, Python) plus a per-sample index into them (per sample work, numpy).
`build_trace_tree` is the same for a reader that meets its stacks as a tree (speedscope's
evented profiles: frames opened and closed), where a list per stack would cost its depth.

Instrumented calls in the trace-event formats (Chrome trace, Perfetto) are named and found
back by `call_slice`, `call_frame_key` and `FrameFinder`: one rule for both.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .. import trace as model
from ..errors import TraceFormatError
from ..trace import (
    NO_STACK_NAMES,
    NONE,
    FunctionKey,
    ProfilerFrame,
    ProfilerTrace,
    TraceBuilder,
    function_keys,
)

# Index 0: no marker; index m + 1: marker code m. The names every output uses (trace.py).
PSEUDO_NAMES: tuple[str, ...] = NO_STACK_NAMES
PSEUDO_INDEX: dict[str, int] = {n: i for i, n in enumerate(PSEUDO_NAMES)}

# A frame as the stack-list formats carry it: the model's one frame identity (plain
# (name, url, line, column) tuples compare and hash equal to it).
FrameKey = FunctionKey


def check_expansion(total: int, source: str, where: str) -> None:
    """Refuse counts that would make more samples than `trace.MAX_SAMPLES`."""
    if total > model.MAX_SAMPLES:
        raise TraceFormatError(
            f"{source}: {where}: counts add up to {total} samples, more than jsprof reads "
            f"({model.MAX_SAMPLES}); is this file intact?"
        )


def pseudo_index(trace: ProfilerTrace) -> np.ndarray:
    """Per sample: index into PSEUDO_NAMES for samples without a stack, -1 for the others."""
    if trace.sample_marker is None:
        idx = np.zeros(trace.num_samples, np.int64)
    else:
        idx = trace.sample_marker.astype(np.int64) + 1  # NONE (-1) -> 0, "(idle)"
    return np.where(trace.sample_stack == NONE, idx, -1)


def frame_keys(trace: ProfilerTrace) -> list[FrameKey]:
    """Each frame with its resource resolved to the URL."""
    return function_keys(trace)


def stack_lists(trace: ProfilerTrace) -> list[list[int]]:
    """Frame ids of every stack, root first; parents precede children, so one pass."""
    out: list[list[int]] = []
    for p, f in zip(trace.stack_parent.tolist(), trace.stack_frame.tolist(), strict=True):
        out.append([*out[p], f] if p != NONE else [f])
    return out


def build_trace(
    stacks: Sequence[Sequence[FrameKey]],
    sample_key: np.ndarray,
    times: np.ndarray,
    markers: np.ndarray | None = None,
    lines: np.ndarray | None = None,
) -> ProfilerTrace:
    """A trace from unique stacks (frames root first) and, per sample, an index into them.

    A stack that is exactly one pseudo frame becomes "no stackId" with its marker, unless
    `markers` (per sample, int8 codes or NONE) is given, which then wins.
    """
    b = TraceBuilder()
    stack_id = np.full(len(stacks) + 1, NONE, np.int64)  # +1: empty input still indexes
    pseudo_marker = np.full(len(stacks) + 1, NONE, np.int64)
    any_pseudo = False
    frame_ids: dict[FrameKey, int] = {}
    for k, frames in enumerate(stacks):
        if len(frames) == 1 and frames[0][1] is None and frames[0][0] in PSEUDO_INDEX:
            pseudo_marker[k] = PSEUDO_INDEX[frames[0][0]] - 1
            any_pseudo = True
            continue
        ids = []
        for fk in frames:
            # One dict lookup per frame; the builder is asked once per distinct frame.
            fid = frame_ids.get(fk)
            if fid is None:
                name, url, line, col = fk
                rid = b.resource_id(url) if url is not None else None
                fid = frame_ids[fk] = b.frame_id(name, rid, line, col)
            ids.append(fid)
        sid = b.stack_id(ids)
        stack_id[k] = NONE if sid is None else sid
    return _finish(b, stack_id, pseudo_marker if any_pseudo else None, sample_key, times,
                   markers, lines)


def build_trace_tree(
    node_parent: Sequence[int],
    node_frame: Sequence[FrameKey],
    sampled: Sequence[int],
    sample_key: np.ndarray,
    times: np.ndarray,
    markers: np.ndarray | None = None,
    lines: np.ndarray | None = None,
) -> ProfilerTrace:
    """`build_trace` of stacks given as nodes of a tree (each its parent node, -1 for a
    root, and its frame): `sampled[k]` is the node of unique stack k. The same trace
    `build_trace` makes of those stacks' frame lists, numbered the same (each stack's
    callers interned root first, stack by stack in order), at a cost per node, not per
    frame of every stack: a deep recursion's stacks share all but their last frames."""
    b = TraceBuilder()
    stack_id = np.full(len(sampled) + 1, NONE, np.int64)  # +1: empty input still indexes
    pseudo_marker = np.full(len(sampled) + 1, NONE, np.int64)
    any_pseudo = False
    frame_ids: dict[FrameKey, int] = {}
    sid_of = [NONE] * len(node_parent)  # the node's stack id, once interned
    for k, node in enumerate(sampled):
        fk = node_frame[node]
        if node_parent[node] < 0 and fk[1] is None and fk[0] in PSEUDO_INDEX:
            pseudo_marker[k] = PSEUDO_INDEX[fk[0]] - 1
            any_pseudo = True
            continue
        chain = []  # the callers not yet interned, innermost first
        n = node
        while n >= 0 and sid_of[n] == NONE:
            chain.append(n)
            n = node_parent[n]
        parent = NONE if n < 0 else sid_of[n]
        for n in reversed(chain):
            fk = node_frame[n]
            fid = frame_ids.get(fk)
            if fid is None:
                name, url, line, col = fk
                rid = b.resource_id(url) if url is not None else None
                fid = frame_ids[fk] = b.frame_id(name, rid, line, col)
            parent = sid_of[n] = b.stack_id_from(parent, fid)
        stack_id[k] = sid_of[node]
    return _finish(b, stack_id, pseudo_marker if any_pseudo else None, sample_key, times,
                   markers, lines)


def _finish(b: TraceBuilder, stack_id: np.ndarray, pseudo_marker: np.ndarray | None,
            sample_key: np.ndarray, times: np.ndarray, markers: np.ndarray | None,
            lines: np.ndarray | None) -> ProfilerTrace:
    """The trace of `build_trace` and `build_trace_tree` once their stacks are interned:
    each sample's stack by its unique stack's key, and the markers of pseudo-frame stacks
    (`pseudo_marker`, None when there were none) when the file gave no markers."""
    base = b.build()
    sample_key = np.asarray(sample_key, np.int64)
    if markers is None and pseudo_marker is not None:
        m = pseudo_marker[sample_key]
        markers = m if (m != NONE).any() else None
    return ProfilerTrace(
        resources=base.resources,
        frames=base.frames,
        stack_parent=base.stack_parent,
        stack_frame=base.stack_frame,
        sample_time=times,
        sample_stack=stack_id[sample_key],
        sample_marker=markers,
        sample_line=lines,
    )


def canonical(trace: ProfilerTrace) -> ProfilerTrace:
    """The trace numbered as the stack-list readers number what they read: only the stacks
    samples use (and their callers), in order of stack id, frames in order of first use.
    Writers that lose the numbering write this, so write(read(x)) gives x back byte for
    byte."""
    stack = trace.sample_stack
    used = np.unique(stack[stack != NONE])
    keys = frame_keys(trace)
    paths = stack_lists(trace)
    lut = np.full(trace.num_stacks + 1, -1, np.int64)  # the last entry: NONE samples
    lut[used] = np.arange(len(used))
    out = build_trace(
        [[keys[f] for f in paths[s]] for s in used.tolist()],
        lut[stack],
        trace.sample_time,
        markers=trace.sample_marker,
        lines=trace.sample_line,
    )
    out.sample_weight = trace.sample_weight
    out.sample_count = trace.sample_count
    return out


# ---- instrumented calls in the trace-event formats ---------------------------------------
# Chrome trace and Perfetto carry a call as a slice named as every output names its
# function; the frame's identity rides beside it (its URL, 1-based line and column, and
# `function: ""` for a function with no name, whose slice shows its anonymous label), so
# reading finds the frame among the ones the samples brought, whatever their numbering.


def call_slice(frame: ProfilerFrame, resources: Sequence[str]) -> tuple[str, dict]:
    """(slice name, identity args) of an instrumented call's frame."""
    url = resources[frame.resource_id] if frame.resource_id is not None else None
    args: dict = {}
    if url is not None:
        args["url"] = url
    if frame.line is not None:
        args["line"] = frame.line
    if frame.column is not None:
        args["column"] = frame.column
    if not frame.name:
        args["function"] = ""
    return FunctionKey(frame.name, url, frame.line, frame.column).label(), args


def call_frame_key(name: object, args: dict) -> tuple[FunctionKey | None, str]:
    """The frame a call slice names (`call_slice` read back), or None and the problem
    (with its key) for a reader to put in its own words."""
    if type(name) is not str:
        return None, "name: expected a string"
    url, line, col = args.get("url"), args.get("line"), args.get("column")
    if url is not None and type(url) is not str:
        return None, "url: expected a string"
    for key, v in (("line", line), ("column", col)):
        # 1-based, 32-bit in every engine and format
        if v is not None and (type(v) is not int or not 0 < v < 2**31):
            return None, f"{key}: expected a 1-based position, got {str(v)[:40]}"
    fn = args.get("function")
    if fn is not None and fn != "":
        return None, "function: expected \"\" (a function with no name) or no such key"
    return FunctionKey("" if fn == "" else name, url, line, col), ""


class FrameFinder:
    """Frame ids of a read trace by identity; a frame no sample used is added to it."""

    def __init__(self, trace: ProfilerTrace) -> None:
        self.trace = trace
        self.ids: dict[FunctionKey, int] = {}
        for i, k in enumerate(function_keys(trace)):
            self.ids.setdefault(k, i)

    def __call__(self, key: FunctionKey) -> int:
        fid = self.ids.get(key)
        if fid is None:
            res = self.trace.resources
            rid = None
            if key.resource is not None:
                if key.resource not in res:
                    res.append(key.resource)
                rid = res.index(key.resource)
            self.trace.frames.append(ProfilerFrame(key.name, rid, key.line, key.column))
            fid = self.ids[key] = len(self.trace.frames) - 1
        return fid


# ---- per-sample weights and counts in the trace-event formats --------------------------
# Chrome trace and Perfetto have no field for them; jsprof writes them beside the samples
# (see each module) and reads them back with the jsprof format's rules.


def weights_problem(values: Sequence) -> tuple[int, str] | None:
    """The first entry of `values` that is not a weight (ms, >= 0, below 2**53), and why."""
    for i, v in enumerate(values):
        if type(v) not in (int, float) or not 0 <= v < model.MAX_MS:
            return i, f"{v!r}"[:40] + " is not a weight (a number of ms >= 0 and below 2**53)"
    return None


def counts_problem(values: Sequence) -> tuple[int, str] | None:
    """The first entry of `values` that is not a sample count (1 to MAX_SAMPLES), and why."""
    for i, v in enumerate(values):
        if type(v) is not int or not 1 <= v <= model.MAX_SAMPLES:
            return i, (f"{v!r}"[:40] + " is not a count (a whole number of samples from 1 to "
                       f"{model.MAX_SAMPLES:,})")
    return None
