"""Filters: pure Recording -> Recording steps shared by report, flame, diff and convert.

Like pyinstrument's processors, each returns a new Recording and leaves its input alone;
they compose in any order. Per-stack work is a Python pass over the stacks table (stacks
are far fewer than samples); per-sample work is numpy.

- `focus(rec, pattern)`: only samples whose stack passes through a matching function.
- `exclude(rec, pattern)`: drop samples whose stack passes through a matching function.
- `hide(rec, predicate, label)`: remove matching frames from stacks; their time goes to
  the nearest visible caller (a sample with no visible frame left keeps its time under
  one pseudo frame named `label`, so totals never shrink).
- `hide_internal(rec)`: hide the runtime's own frames (`is_internal`: Node's `node:`
  modules, built-in natives); samples that were all internal (start-up, module loading)
  are one `(internal)` row.
- `time_range(rec, start, end)`: samples with start <= timestamp < end (ms, the trace's
  own clock: relative to each track's time origin).

Patterns match the function name with shell wildcards (`fnmatch`), e.g. `fib`, `get *`,
`*Loop`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from fnmatch import fnmatchcase

import numpy as np

from ..errors import UsageError
from ..meta import is_aggregated
from ..trace import (
    NONE,
    ProfilerFrame,
    ProfilerTrace,
    Recording,
    TraceBuilder,
    Track,
    anonymous_label,
    sample_weights,
    samples_dropped,
    spans_without_calls,
)
from .profile import as_recording

FramePredicate = Callable[[ProfilerFrame, str | None], bool]  # frame, its resource URL


def _frame_mask(trace: ProfilerTrace, pred: FramePredicate) -> np.ndarray:
    res = trace.resources
    return np.array(
        [pred(f, None if f.resource_id is None else res[f.resource_id]) for f in trace.frames],
        dtype=bool,
    )


def _through(trace: ProfilerTrace, frame_hit: np.ndarray) -> np.ndarray:
    """Per stack: does the path from the root to it pass a matching frame?"""
    hit = frame_hit[trace.stack_frame] if trace.num_stacks else np.zeros(0, bool)
    parent = trace.stack_parent.tolist()
    out = hit.copy()
    for s, p in enumerate(parent):  # parents precede children
        if p != NONE and out[p]:
            out[s] = True
    return out


def _select(trace: ProfilerTrace, keep: np.ndarray, interval: float | None) -> ProfilerTrace:
    # Weights first, from the full recording: a kept sample must not be charged the gap
    # to the next *kept* sample.
    return keep_samples(trace, keep, sample_weights(trace, interval))


def keep_samples(trace: ProfilerTrace, keep: np.ndarray, weights: np.ndarray) -> ProfilerTrace:
    """`trace` with the samples `keep` marks, each weighing what `weights` (one per sample
    of `trace`, computed over the whole recording) gives it."""
    return trace.replace(
        sample_time=trace.sample_time[keep],
        sample_stack=trace.sample_stack[keep],
        sample_marker=None if trace.sample_marker is None else trace.sample_marker[keep],
        sample_line=None if trace.sample_line is None else trace.sample_line[keep],
        sample_weight=weights[keep],
        sample_count=None if trace.sample_count is None else trace.sample_count[keep],
    )


def _map_tracks(
    rec: Recording | ProfilerTrace, fn: Callable[[Track], ProfilerTrace], frames_kept: bool = True,
    selects: bool = False,
) -> Recording:
    """`fn` over the tracks; `selects`: it keeps some samples (`samples_dropped`)."""
    rec = as_recording(rec)
    out = []
    for t in rec.tracks:
        tr = fn(t)
        t = samples_dropped(t, tr) if selects else replace(t, trace=tr)
        # Spans point into the frames table: they survive only filters that keep it as is.
        out.append(replace(t, spans=t.spans if frames_kept else spans_without_calls(t.spans)))
    return Recording(out)


def name_matcher(pattern: str) -> FramePredicate:
    """A frame's name matches `pattern`; an anonymous function matches as the tables name
    it, `(anonymous app.js:8)`, and as `(anonymous)` (every anonymous function)."""

    def match(f: ProfilerFrame, url: str | None) -> bool:
        if f.name:
            return fnmatchcase(f.name, pattern)
        return fnmatchcase("(anonymous)", pattern) or fnmatchcase(
            anonymous_label(url, f.line), pattern
        )

    return match


def focus(rec: Recording, pattern: str) -> Recording:
    def one(track: Track) -> ProfilerTrace:
        tr = track.trace
        through = _through(tr, _frame_mask(tr, name_matcher(pattern)))
        sid = tr.sample_stack
        keep = (sid != NONE) & through[np.maximum(sid, 0)] if len(through) else sid != sid
        return _select(tr, keep, track.sample_interval)

    return _map_tracks(rec, one, selects=True)


def exclude(rec: Recording, pattern: str) -> Recording:
    def one(track: Track) -> ProfilerTrace:
        tr = track.trace
        through = _through(tr, _frame_mask(tr, name_matcher(pattern)))
        sid = tr.sample_stack
        hit = (sid != NONE) & through[np.maximum(sid, 0)] if len(through) else sid != sid
        return _select(tr, ~hit, track.sample_interval)

    return _map_tracks(rec, one, selects=True)


def _hide_trace(tr: ProfilerTrace, pred: FramePredicate, label: str) -> ProfilerTrace:
    hidden = _frame_mask(tr, pred)
    if not hidden.any():
        return tr
    b = TraceBuilder()
    res = tr.resources
    new_frame = [
        b.frame_id(
            f.name,
            None if f.resource_id is None else b.resource_id(res[f.resource_id]),
            f.line,
            f.column,
        )
        if not hidden[i]
        else None
        for i, f in enumerate(tr.frames)
    ]
    new_stack = b.map_stacks(tr, new_frame)
    sid = new_stack[tr.sample_stack]
    lost = (sid == NONE) & (tr.sample_stack != NONE)
    if lost.any():
        sid[lost] = b.stack_id([b.frame_id(label)])
    return tr.with_tables(
        b.build(),
        sample_stack=sid,
        # the executing line belonged to the hidden leaf: keep it only where the leaf stayed
        sample_line=(
            None if tr.sample_line is None
            else np.where(_leaf_kept(tr, hidden), tr.sample_line, 0)
        ),
    )


def _leaf_kept(tr: ProfilerTrace, hidden: np.ndarray) -> np.ndarray:
    sid = tr.sample_stack
    has = sid != NONE
    out = np.zeros(len(sid), bool)
    if tr.num_stacks:
        out[has] = ~hidden[tr.stack_frame[sid[has]]]
    return out


def hide(rec: Recording, pred: FramePredicate, label: str = "(hidden)") -> Recording:
    return _map_tracks(rec, lambda t: _hide_trace(t.trace, pred, label), frames_kept=False)


def is_internal(frame: ProfilerFrame, url: str | None) -> bool:
    """The runtime's own code, not the program's: Node's built-in modules (`node:fs`,
    `node:internal/...`; `internal/...` in older Nodes) and natives, i.e. frames with
    neither a script nor a line (V8's C++ bindings such as `read` or `open`, and
    inspector glue). Code without a URL but with a position (`eval`, `new Function`) is the
    program's and stays."""
    if url:
        return url.startswith(("node:", "internal/"))
    return frame.line is None and not _is_pseudo(frame.name)


def _is_pseudo(name: str) -> bool:
    # `(program)`, `(garbage collector)`, `(root)`...: a profiler's own bucket, not code
    return name.startswith("(") and name.endswith(")")


def hide_internal(rec: Recording) -> Recording:
    return hide(rec, is_internal, "(internal)")


_exclude = exclude  # `apply` takes a parameter of that name


def time_range(rec: Recording, start: float | None, end: float | None) -> Recording:
    def one(track: Track) -> ProfilerTrace:
        tr = track.trace
        t = tr.sample_time
        keep = np.ones(len(t), bool)
        if start is not None:
            keep &= t >= start
        if end is not None:
            keep &= t < end
        return _select(tr, keep, track.sample_interval)

    return _map_tracks(rec, one, selects=True)


def parse_time_range(text: str) -> tuple[float | None, float | None]:
    """`START:END` in ms; either side may be empty. Raises ValueError with a reason."""
    if ":" not in text:
        raise ValueError(f"expected START:END in ms, got {text!r}")
    a, b = text.split(":", 1)

    def ms(side: str) -> float | None:
        if not side.strip():
            return None
        try:
            v = float(side)
        except ValueError:
            v = math.nan
        if not math.isfinite(v):
            raise ValueError(f"expected START:END in ms (numbers), got {text!r}")
        return v

    start, end = ms(a), ms(b)
    if start is not None and end is not None and end <= start:
        raise ValueError(f"END must be after START, got {text!r}")
    return start, end


def matches_any(rec: Recording, pattern: str) -> bool:
    """Does any frame of any track have a name that `pattern` matches?"""
    pred = name_matcher(pattern)
    return any(_frame_mask(t.trace, pred).any() for t in rec.tracks)


def no_match_error(option: str, name: str, source: str) -> UsageError:
    return UsageError(
        f"{option} {name!r}: no function in {source} matches; names match whole, with * "
        "and ? as wildcards (e.g. 'fib', 'get *', '*Loop')"
    )


def apply(
    rec: Recording,
    source: str,
    time_range_text: str | None = None,
    focus_on: Sequence[str] = (),
    exclude: Sequence[str] = (),
    hide_runtime: bool = False,
    unmatched: list[str] | None = None,
) -> Recording:
    """The command line's filters, in its order, refusing ones that select nothing.

    A `--focus` or `--exclude` name that matches no function, or a `--time-range` with no
    sample in it, is a UsageError that says so: an empty report (or an unchanged one)
    would look like a result. With `unmatched` given, names that match nothing are
    appended to it instead (`diff` refuses a name only when neither profile has it)."""
    if time_range_text:
        try:
            start, end = parse_time_range(time_range_text)
        except ValueError as e:
            raise UsageError(f"--time-range: {e}") from None
        if any(is_aggregated(t.meta) for t in rec.tracks):
            raise UsageError(
                f"--time-range {time_range_text!r}: {source} is a merged profile (`jsprof "
                "fleet`: one sample per stack, summed over many page loads) with no time "
                "axis; filter the fleet query instead (--since/--until, --during)")
        kept = time_range(rec, start, end)
        if rec.num_samples and not kept.num_samples:
            times = [t.trace.sample_time for t in rec.tracks if t.trace.num_samples]
            lo = min(float(t[0]) for t in times)
            hi = max(float(t[-1]) for t in times)
            raise UsageError(
                f"--time-range {time_range_text!r}: no sample of {source} lies in that range; "
                f"its samples run from {lo:.1f} to {hi:.1f} ms"
            )
        rec = kept
    for option, names, step in (("--focus", focus_on, focus), ("--exclude", exclude, _exclude)):
        for name in names:
            if not matches_any(rec, name):
                if unmatched is None:
                    raise no_match_error(option, name, source)
                unmatched.append(f"{option}\0{name}")
            rec = step(rec, name)
    if hide_runtime:
        rec = hide_internal(rec)
    return rec
