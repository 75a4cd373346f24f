"""The model's parts that need no numpy: frame identity (ProfilerFrame, FunctionKey and
the anonymous label), markers and the names of stack-less samples, the gap cap's rule (its
constants, `gap_cap_and_base`, GapCapping) and the median (`middle`), one spelling per
script (`normalise_resource`), a V8 profile node's frame (`v8_node_frames`) and the
interning of a call tree into the spec's tables (`StackTable`). trace.py holds the model's
columns on top of these and re-exports them; `jsprof record --engine node` writes its file
and prints its summary from them without importing numpy (engines/_v8join.py,
recorded.py)."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

# The spec's marker extension: what the agent was doing when a sample was taken.
MARKERS: tuple[str, ...] = ("script", "gc", "style", "layout", "paint", "other")
MARKER_CODE: dict[str, int] = {m: i for i, m in enumerate(MARKERS)}

NONE = -1  # "no value" in an int column (no parent, no stack, no marker)

# What every output calls the samples with no stack (report's table and tree, the flame
# graph, fleet queries, and the pseudo frame the stack-list formats write and read back):
# V8's names for its pseudo nodes, so jsprof says what DevTools and V8's tools say. Index
# 0: no marker; index m + 1: marker code m (`gc` is `(garbage collector)`, `other` is
# `(program)`, the others `(marker)`).
NO_STACK_NAMES: tuple[str, ...] = ("(idle)",) + tuple(
    {"gc": "(garbage collector)", "other": "(program)"}.get(m, f"({m})") for m in MARKERS
)


def no_stack_name(marker: int) -> str:
    """The name of samples with no stack and this marker code (NONE: no marker)."""
    return NO_STACK_NAMES[marker + 1]


NO_LINE = 0  # "unknown line" in the per-sample line column (lines are 1-based)

# The spec's samples are in time order and engines emit them so, but V8 steps back a little
# now and then (a sample's tick is stamped before an earlier one is processed; observed:
# up to 73 µs). A sample more than this earlier than the latest one before it means the
# samples are out of order: the gaps between samples, which are their weights, are then
# meaningless.
MAX_BACKWARDS_MS = 10.0


class ProfilerFrame(NamedTuple):
    """A spec ProfilerFrame; None where the spec's optional member is absent."""

    name: str
    resource_id: int | None = None
    line: int | None = None
    column: int | None = None


class FunctionKey(NamedTuple):
    """The one frame identity outside a trace's own tables: name, resource URL, line,
    column (1-based). Frames that agree on all four are one function, whichever trace or
    frame id they came from; analysis keys by it and the stack-list formats carry it."""

    name: str
    resource: str | None = None
    line: int | None = None
    column: int | None = None

    def label(self) -> str:
        return self.name or anonymous_label(self.resource, self.line)

    def location(self) -> str:
        """`url:line:column`; empty for a profiler's pseudo frame (`(program)`, ...)."""
        if self.resource is None and self.line is None and self.name.startswith("("):
            return ""
        parts = [self.resource or "(unknown)"]
        if self.line is not None:
            parts.append(str(self.line))
            if self.column is not None:
                parts.append(str(self.column))
        return ":".join(parts)


class LineKey(NamedTuple):
    """A line of a function: analysis's key for hot lines."""

    function: FunctionKey
    line: int  # NO_LINE (0): unknown


def anonymous_label(resource: str | None, line: int | None) -> str:
    """What every output calls a function with no name: `(anonymous work.js:8)`, its
    script's file name and its line, as speedscope does, so that the anonymous functions of
    one file (module code, callbacks, arrows) are told apart; `(anonymous line 8)` with no
    script, `(anonymous)` with neither."""
    if not resource:
        return "(anonymous)" if line is None else f"(anonymous line {line})"
    path = resource.split("#", 1)[0].split("?", 1)[0].rstrip("/")
    where = path.rsplit("/", 1)[-1] or resource
    return f"(anonymous {where})" if line is None else f"(anonymous {where}:{line})"



# The longest a sample may stand for, in intervals of its own trace: a gap to the next
# sample beyond it is not time the sample saw but a hole (a laptop suspended mid-chunk, a
# throttled background tab, a broken clock) and is counted as lost time instead. Twenty
# intervals keep every gap a late sampler leaves in the real traces we have (Chromium on a
# loaded machine: up to 15.7 intervals, 157 ms of `fib` at 10 ms), while one upload with a
# 3-hour hole adds at most 20 intervals per hole (200 ms at 10 ms) to the fleet's numbers.
# Never under 100 ms: an operating system's scheduling hiccup is milliseconds whatever the
# interval (Node's V8 at 0.18 ms leaves 6-8 ms gaps, 46 intervals, in tests/data/node).
GAP_CAP_INTERVALS = 20.0
GAP_CAP_MIN_MS = 100.0



class GapCapping(NamedTuple):
    """What `gap_cap` did to one trace: `gaps` samples whose gap to the next was longer
    than `cap_ms` weigh `cap_ms` each; `lost_ms` is what those gaps had beyond it. `base_ms`
    is the interval the cap counts from (the larger of the declared one and the median
    gap); `floor` says that GAP_CAP_MIN_MS set the cap (20 of those intervals are less)."""

    gaps: int
    lost_ms: float
    cap_ms: float
    base_ms: float
    floor: bool

    @classmethod
    def of(cls, gaps: int, lost_ms: float, cap: tuple[float, float]) -> GapCapping:
        """`gaps` gaps capped at `cap` (gap_cap_and_base's), `lost_ms` beyond it."""
        cap_ms, base_ms = cap
        return cls(gaps, lost_ms, cap_ms, base_ms, GAP_CAP_INTERVALS * base_ms < GAP_CAP_MIN_MS)


# The gap cap's and the median's rules, the scalar parts of what the model computes over
# numpy columns (trace.py, analysis/sampling.py) and recorded.py over lists (the Node
# record path, without numpy): one spelling for both.


def gap_cap_and_base(interval: float | None, median_gap: float | None
                     ) -> tuple[float, float] | None:
    """trace.gap_cap of a trace declaring `interval` whose samples show `median_gap`, and
    the base it counts from (the larger of the two); None when neither is positive."""
    base = max(interval if interval is not None and interval > 0 else 0.0, median_gap or 0.0)
    return (max(GAP_CAP_INTERVALS * base, GAP_CAP_MIN_MS), base) if base > 0 else None


def middle(d: Sequence[Any]) -> float:
    """The median of `d`, sorted (or a numpy array partitioned at (n-1)//2 and n//2; not
    empty): the mean of its two middle items, as numpy's median takes it."""
    n = len(d)
    return float((d[(n - 1) // 2] + d[n // 2]) / 2)



# A URL scheme of two or more letters (`file:`, `node:`, `https:`, `data:`...): one letter
# would be a Windows drive.
URL_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")


def normalise_resource(name: str) -> str:
    """The resource string every engine records for a script.

    A local file, however it was named (`app.js`, `./app.js`, `/abs/app.js`, through a
    symlink), becomes the `file://` URL of its real path, as V8 and Node report scripts.
    URLs (`file:`, `node:`, `https:`...) are kept as they are; a name that is neither a URL
    nor an existing file (`<eval>`, `[eval]`) is kept too, except that an absolute path is
    always a `file://` URL. Relative names resolve against the current directory.
    """
    if not name or URL_SCHEME.match(name):
        return name
    return _local_resource(name, os.getcwd())


@functools.lru_cache(maxsize=4096)
def _local_resource(name: str, cwd: str) -> str:
    path = os.path.join(cwd, name)
    if os.path.isabs(name) or os.path.isfile(path):
        return Path(os.path.realpath(path)).as_uri()
    return name


def normalised_tables(
    resources: list[str], frames: list[ProfilerFrame]
) -> tuple[list[str], list[ProfilerFrame]] | None:
    """The resources spelled by `normalise_resource` and the frames re-pointed at them (two
    spellings of one script become one resource, so the table stays unique); None when
    every resource is spelled so already. trace.normalise_resources and the numpy-free
    record path (engines/_v8join.py) both: one rule."""
    spelled = [normalise_resource(r) for r in resources]
    if spelled == resources:
        return None
    index: dict[str, int] = {}
    remap = [index.setdefault(r, len(index)) for r in spelled]
    return list(index), [
        f if f.resource_id is None else f._replace(resource_id=remap[f.resource_id])
        for f in frames
    ]


# V8's pseudo nodes (a CPU profile's nodes with no URL): "(root)" is not a frame; samples in
# the others have no stack, with the marker given here (None: no marker).
V8_PSEUDO_MARKERS: dict[str, str | None] = {
    "(root)": None,
    "(program)": "other",
    "(garbage collector)": "gc",
    "(idle)": None,
}


def v8_node_frames(
    names: Sequence[str], urls: Sequence[str], lines: Sequence[int], cols: Sequence[int],
    order: Iterable[int],
) -> tuple[list[tuple[str, str | None, int | None, int | None] | None], list[int]]:
    """A V8 CPU profile's nodes as `StackTable.intern_tree` takes them, and each node's
    marker code: a pseudo node (V8_PSEUDO_MARKERS, no URL) is no frame and marks its
    samples; any other is the frame (name, URL or None, 1-based line and column or None:
    V8's are 0-based, -1 for none) and marks its samples "script". Only the nodes in
    `order` are looked at (the others: None, "script"). One rule for the CDP profile
    reader (formats/_v8profile.finish, numpy) and the Node record path (engines/_v8join)."""
    script = MARKER_CODE["script"]
    node_marker = [script] * len(names)
    keys: list[tuple[str, str | None, int | None, int | None] | None] = [None] * len(names)
    for i in order:
        name, url = names[i], urls[i]
        if name in V8_PSEUDO_MARKERS and not url:
            m = V8_PSEUDO_MARKERS[name]
            node_marker[i] = NONE if m is None else MARKER_CODE[m]
        else:
            ln, cn = lines[i], cols[i]
            keys[i] = (name, url or None, ln + 1 if ln >= 0 else None, cn + 1 if cn >= 0 else None)
    return keys, node_marker


class StackTable:
    """The spec's "get an element ID" for resources, frames and stacks: a component-wise
    equal resource, frame or stack gets the index it already has, otherwise it is appended
    (trace.TraceBuilder adds the samples and the columns)."""

    def __init__(self) -> None:
        self._resources: dict[str, int] = {}
        self._frames: dict[ProfilerFrame, int] = {}
        self._stacks: dict[tuple[int, int], int] = {}
        self._stack_parent: list[int] = []
        self._stack_frame: list[int] = []

    def resource_id(self, url: str) -> int:
        rid = self._resources.get(url)
        if rid is None:
            rid = self._resources[url] = len(self._resources)
        return rid

    def frame_id(
        self,
        name: str,
        resource_id: int | None = None,
        line: int | None = None,
        column: int | None = None,
    ) -> int:
        key = ProfilerFrame(name, resource_id, line, column)
        fid = self._frames.get(key)
        if fid is None:
            fid = self._frames[key] = len(self._frames)
        return fid

    def tables(self) -> tuple[list[str], list[ProfilerFrame], list[int], list[int]]:
        """(resources, frames, stack parents, stack frames) as interned so far."""
        frames = [f if type(f) is ProfilerFrame else ProfilerFrame(*f) for f in self._frames]
        return list(self._resources), frames, self._stack_parent, self._stack_frame

    def stack_id(self, frame_ids: Iterable[int | None]) -> int | None:
        parent = NONE
        for fid in frame_ids:
            if fid is not None:
                parent = self.stack_id_from(parent, fid)
        return None if parent == NONE else parent

    def stack_id_from(self, parent: int | None, frame_id: int) -> int:
        """The stack of `frame_id` called from stack `parent` (None or NONE for a root)."""
        key = (NONE if parent is None else parent, frame_id)
        sid = self._stacks.get(key)
        if sid is None:
            sid = self._stacks[key] = len(self._stack_frame)
            self._stack_parent.append(key[0])
            self._stack_frame.append(frame_id)
        return sid

    def intern_tree(
        self,
        parents: Sequence[int],
        frames: Sequence[tuple[str, str | None, int | None, int | None] | None],
        order: Iterable[int],
    ) -> list[int]:
        """The stack id of every node of a call tree (NONE where no frame is left).

        `parents[i]` is node i's parent (NONE for a root), `frames[i]` its frame as (name,
        resource URL, line, column), or None for a node that is not a frame (its children
        take its parent's stack, as the spec skips a frame without an ID). `order` visits
        parents before children. The per-node loop of `stack_id_from`, kept tight: profiles
        have up to millions of nodes.
        """
        resources, frame_ids, stacks = self._resources, self._frames, self._stacks
        stack_parent, stack_frame = self._stack_parent, self._stack_frame
        node_stack = [NONE] * len(parents)
        # Many nodes share a frame (a tsc profile: 25,000 nodes, 1,700 frames): the frame
        # as given finds its id in one look-up, its resource's and its own skipped.
        given: dict[tuple, int] = {}
        for i in order:
            p = parents[i]
            up = node_stack[p] if p != NONE else NONE
            f = frames[i]
            if f is None:
                node_stack[i] = up
                continue
            fid = given.get(f)
            if fid is None:
                name, url, line, column = f
                if url is None:
                    rid = None
                else:
                    rid = resources.get(url)
                    if rid is None:
                        rid = resources[url] = len(resources)
                # A plain tuple hashes and compares as the ProfilerFrame it stands for.
                key = (name, rid, line, column)
                fid = frame_ids.get(key)  # type: ignore[call-overload]
                if fid is None:
                    fid = frame_ids[key] = len(frame_ids)  # type: ignore[index]
                given[f] = fid
            skey = (up, fid)
            sid = stacks.get(skey)
            if sid is None:
                sid = stacks[skey] = len(stack_frame)
                stack_parent.append(up)
                stack_frame.append(fid)
            node_stack[i] = sid
        return node_stack
