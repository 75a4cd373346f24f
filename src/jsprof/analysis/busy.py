"""Busy time the browser lost the stacks of: stack-less samples inside long animation frames.

The spec says a sample with no stack (and no marker) was taken while no JavaScript ran,
and every output calls it `(idle)`. Chromium's native Profiler writes
such samples while JavaScript is busy in built-ins (sort, JSON, regular expressions): on
the field's pages most of a click handler's samples have no stack (docs/engines.md). The
page's long animation frames (LoAF) say what ran then: each frame's script entries are
the tasks and callbacks it ran (an event listener, a timer, a promise reaction), with
their start and duration. So a stack-less sample (in a trace with markers, one marked
`script`: there an unmarked one is the producer's word for idle; `lost_mask`)

- inside a LoAF script entry's time is that entry point's: it gets the stack
  `<entry point>` > `(stack not captured)`, the entry point named by the entry's
  `sourceFunctionName`, else its `invoker` (`BUTTON#buy.onclick`), at its `sourceURL`
  (the sampled frame of that name in that script when the trace has exactly one, so its
  total holds both); LoAF gives a character offset (`sourceCharPosition`), not a line: with
  the script's line starts (`lines`: the fleet's, from `sourcemaps upload`) it is the
  sampled frame at that line and column (whatever its name: a minified script's names
  repeat), else a frame of its own there, which a source map then maps to the original
  function as it maps a sampled one; without them the frame has no line;
- inside a LoAF but in no script entry is the frame's own work: `(long frame: rendering)`
  from the frame's `renderStart` on (style, layout, paint, what the browser does to
  present the frame), `(long frame: not in script)` before it (between and around the
  tasks: the browser's own work, or a script the frame did not list: it keeps at most 10);
- outside every long frame stays `(idle)`.

Samples with a stack or another marker (gc, style, layout, paint, other) keep theirs, and
no sample's time or weight changes. Only the track whose page reported the frames is
read (a worker's samples are not the main thread's frames). One step for every door: a
local recording's spans (`record --engine chromium`), an upload's meta (`timeline`, the
collector's `GET /v1/traces/{id}`), and the compactor (store/tables/compact.py), which writes the
attributed stacks so fleet queries only read; `fleet --during` reads the page load's
frames from all its chunks. Pure: Recording -> Recording.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from .. import timeline as tl
from ..script_lines import position
from ..trace import (
    MARKER_CODE,
    NONE,
    FunctionKey,
    ProfilerFrame,
    ProfilerTrace,
    Recording,
    Track,
)

NOT_CAPTURED = tl.NOT_CAPTURED  # "(stack not captured)"
RENDERING = "(long frame: rendering)"
NOT_IN_SCRIPT = "(long frame: not in script)"


@dataclass(frozen=True)
class Busy:
    """What `attribute` charged: samples and ms put under entry points (in script) and on
    the long frames' own rows (outside script)."""

    script_samples: int = 0
    script_ms: float = 0.0
    frame_samples: int = 0
    frame_ms: float = 0.0

    def __add__(self, o: Busy) -> Busy:
        return Busy(self.script_samples + o.script_samples, self.script_ms + o.script_ms,
                    self.frame_samples + o.frame_samples, self.frame_ms + o.frame_ms)

    @property
    def samples(self) -> int:
        return self.script_samples + self.frame_samples


def long_frames(track: Track) -> list[dict]:
    """The long animation frames (the client's shape, on the track's clock) that `track`'s
    page reported (`timeline.of_track`: its spans and its meta's timeline)."""
    return tl.of_track(track).long_frames


def lost_mask(tr: ProfilerTrace) -> np.ndarray:
    """Per sample: a stack the profiler may have lost. In a trace without markers (the
    browser's Profiler) every sample without a stack; in one with markers only those marked
    `script`: a producer that marks its samples (V8's CDP profiles: `script`, `gc`,
    `other`) says by leaving one unmarked that V8 was idle (as analysis/lost_stacks.py
    reads them)."""
    lost = tr.sample_stack == NONE
    if tr.sample_marker is not None:
        lost &= tr.sample_marker == MARKER_CODE["script"]
    return lost


def _containing(starts: np.ndarray, ends: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Per time in `t`, the index of the [start, end) interval holding it (intervals
    sorted by start and not overlapping, as a page's frames and scripts are), else -1."""
    if not len(starts):
        return np.full(len(t), -1, np.int64)
    i = np.searchsorted(starts, t, side="right") - 1
    ok = i >= 0
    ok[ok] = t[ok] < ends[i[ok]]
    return np.where(ok, i, -1)


def _classify(times: np.ndarray, frames: list[dict]) -> tuple[np.ndarray, np.ndarray, list[dict]]:
    """Per time: the script entry holding it (index into the returned scripts, else -1),
    and whether it is in a frame's rendering phase (1), elsewhere in a frame (2) or in
    none (0)."""
    fr = sorted((f for f in frames if f["duration"] > 0), key=lambda f: f["start"])
    fs = np.array([f["start"] for f in fr], np.float64)
    fe = fs + np.array([f["duration"] for f in fr], np.float64)
    rs = np.array([f.get("renderStart") or np.inf for f in fr], np.float64)
    scripts = sorted(
        (s for f in fr for s in f.get("scripts") or () if s["duration"] > 0),
        key=lambda s: s["start"])
    ss = np.array([s["start"] for s in scripts], np.float64)
    se = ss + np.array([s["duration"] for s in scripts], np.float64)
    si = _containing(ss, se, times)
    fi = _containing(fs, fe, times)
    phase = np.zeros(len(times), np.int8)
    inf = fi >= 0
    phase[inf] = np.where(times[inf] >= rs[fi[inf]], 1, 2)
    return si, phase, scripts


def attribute_trace(tr: ProfilerTrace, frames: list[dict], weights: np.ndarray | None = None,
                    lines: Callable[[str], Sequence[int] | None] | None = None
                    ) -> tuple[ProfilerTrace, Busy]:
    """`tr` with its stack-less samples inside `frames` put on busy stacks (the module's
    rule), and what was charged (ms by `weights`, the samples' own when given). `lines`:
    a script URL's line starts (`script_lines`), None where not known."""
    if not frames or not tr.num_samples:
        return tr, Busy()
    lost = np.flatnonzero(lost_mask(tr))
    if not len(lost):
        return tr, Busy()
    si, phase, scripts = _classify(tr.sample_time[lost], frames)
    busy = (si >= 0) | (phase > 0)
    if not busy.any():
        return tr, Busy()
    if weights is None:
        from ..trace import sample_weights

        weights = sample_weights(tr)
    resources = list(tr.resources)
    res_id = {r: i for i, r in enumerate(resources)}
    fr = list(tr.frames)
    parent = tr.stack_parent.tolist()
    sframe = tr.stack_frame.tolist()
    # The sampled frame of an entry point's name in its script, when there is exactly one.
    same: dict[tuple[str, str | None], set[int]] = {}
    # Frames without a line (a trace attributed before, then converted): reused, not doubled.
    made_frames: dict[tuple[str, str | None], int] = {}
    for k, f in enumerate(fr):
        url = None if f.resource_id is None else resources[f.resource_id]
        if f.line is not None:
            same.setdefault((f.name, url), set()).add(k)
        elif f.column is None:
            made_frames.setdefault((f.name, url), k)

    def frame_id(name: str, url: str | None) -> int:
        fid = made_frames.get((name, url))
        if fid is None:
            rid = None
            if url is not None:
                rid = res_id.get(url)
                if rid is None:
                    rid = res_id[url] = len(resources)
                    resources.append(url)
            fid = made_frames[(name, url)] = len(fr)
            fr.append(ProfilerFrame(name, rid, None, None))
        return fid

    def stack_of(*frame_ids: int) -> int:
        p = NONE
        for f in frame_ids:
            parent.append(p)
            sframe.append(f)
            p = len(parent) - 1
        return p

    new_stack = np.full(len(lost), NONE, np.int64)
    # In a script entry: one (entry point) > (stack not captured) stack per entry point.
    by_entry: dict[tuple[str, str | None, tuple[int, int] | None], int] = {}
    # (script, line, column) -> frame: the sampled frames, then the entry points placed.
    placed: dict[tuple[int, int, int], int] = {
        (f.resource_id, f.line, f.column): k for k, f in enumerate(fr)
        if f.resource_id is not None and f.line is not None and f.column is not None}
    script_stack = np.full(len(scripts), NONE, np.int64)
    for k in np.unique(si[si >= 0]).tolist():
        key = tl.entry_name(scripts[k])
        at = None
        if key[1] is not None and lines is not None:
            starts = lines(key[1])
            if starts is not None:
                at = position(starts, scripts[k].get("sourceCharPosition"))
        sid = by_entry.get((*key, at))
        if sid is None:
            one = same.get(key, set())
            if at is not None:
                # Its place is known: the sampled frame there (any name: a minified
                # script's names repeat), else a frame of its own there.
                rid = res_id.get(key[1])
                if rid is None:
                    rid = res_id[key[1]] = len(resources)
                    resources.append(key[1])
                entry = placed.get((rid, *at))
                if entry is None:
                    entry = placed[(rid, *at)] = len(fr)
                    fr.append(ProfilerFrame(key[0], rid, at[0], at[1]))
            elif len(one) == 1:
                entry = next(iter(one))
            else:
                entry = frame_id(*key)
            sid = by_entry[(*key, at)] = stack_of(entry, frame_id(NOT_CAPTURED, None))
        script_stack[k] = sid
    in_script = si >= 0
    new_stack[in_script] = script_stack[si[in_script]]
    for code, name in ((1, RENDERING), (2, NOT_IN_SCRIPT)):
        m = ~in_script & (phase == code)
        if m.any():
            new_stack[m] = stack_of(frame_id(name, None))
    idx = lost[busy]
    stack = tr.sample_stack.copy()
    stack[idx] = new_stack[busy]
    marker = None
    if tr.sample_marker is not None:
        marker = tr.sample_marker.copy()
        marker[idx] = NONE
    w = np.asarray(weights)[lost]
    out = tr.replace(
        resources=resources,
        frames=fr,
        stack_parent=np.array(parent, np.int32),
        stack_frame=np.array(sframe, np.int32),
        sample_stack=stack,
        sample_marker=marker,
    )
    frame_only = busy & ~in_script
    return out, Busy(int(in_script.sum()), float(w[in_script].sum()),
                     int(frame_only.sum()), float(w[frame_only].sum()))


def attribute(rec: Recording, frames: list[list[dict]] | None = None,
              lines: Callable[[str], Sequence[int] | None] | None = None
              ) -> tuple[Recording, Busy]:
    """Every track with its busy samples attributed (`attribute_trace`) by its own page's
    long frames (`long_frames`), or by `frames[i]` for track i when given (the fleet's:
    a page load's frames from all its chunks); `lines` as `attribute_trace` takes it."""
    from ..trace import sample_weights

    tracks = []
    total = Busy()
    changed = False
    for i, t in enumerate(rec.tracks):
        fs = long_frames(t) if frames is None else frames[i]
        if not fs:
            tracks.append(t)
            continue
        w = sample_weights(t.trace, t.sample_interval)
        tr, got = attribute_trace(t.trace, fs, w, lines)
        if got.samples:
            changed = True
            total = total + got
            t = replace(t, trace=tr)
        tracks.append(t)
    return (Recording(tracks) if changed else rec), total


def charged_mask(tr: ProfilerTrace) -> np.ndarray:
    """Per sample: is it charged to an entry point (its leaf is `(stack not captured)`)?"""
    hit = np.array([f.name == NOT_CAPTURED and f.line is None for f in tr.frames], bool)
    per_stack = hit[tr.stack_frame] if tr.num_stacks else np.zeros(0, bool)
    out = np.zeros(tr.num_samples, bool)
    has = tr.sample_stack != NONE
    out[has] = per_stack[tr.sample_stack[has]]
    return out


# What each of the rows above means, in the words every table's note uses (fleet top, its
# dashboard table): a row without a location must say why it has none.
WHY = {
    NOT_CAPTURED: "samples the browser's Profiler took without a stack inside a long "
                  "animation frame's script (Chromium keeps few stacks while built-ins "
                  "run: sort, JSON, RegExp); each is charged to its script's entry point, "
                  "whose total includes it",
    NOT_IN_SCRIPT: "samples without a stack inside a long animation frame but in none of "
                   "its scripts, before its rendering: the browser's own work between "
                   "tasks, or a script the frame did not list",
    RENDERING: "samples without a stack inside a long animation frame's rendering (style, "
               "layout, paint)",
}


def charged_entries(rec: Recording) -> list[tuple[FunctionKey, float]]:
    """The entry points the `(stack not captured)` samples of `rec` are charged to, with
    their ms, most first: where the self time of that row was (a stack's leaf is the row,
    its parent the entry point `attribute_trace` put it under)."""
    from ..trace import function_keys, weights_and_lost

    acc: dict[FunctionKey, float] = {}
    for t in rec.tracks:
        tr = t.trace
        if not tr.num_stacks or not tr.num_samples:
            continue
        hit = np.array([f.name == NOT_CAPTURED and f.line is None and f.resource_id is None
                        for f in tr.frames], bool)
        leaf = hit[tr.stack_frame] & (tr.stack_parent != NONE)
        if not leaf.any():
            continue
        w = weights_and_lost(tr, t.sample_interval)[0]
        has = tr.sample_stack != NONE
        per_stack = np.bincount(tr.sample_stack[has], weights=w[has], minlength=tr.num_stacks)
        keys = function_keys(tr)
        for s in np.nonzero(leaf)[0].tolist():
            if per_stack[s] > 0:
                k = keys[int(tr.stack_frame[tr.stack_parent[s]])]
                acc[k] = acc.get(k, 0.0) + float(per_stack[s])
    return sorted(acc.items(), key=lambda kv: (-kv[1], kv[0].label()))
