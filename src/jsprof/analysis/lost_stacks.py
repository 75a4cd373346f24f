"""Samples whose stack the engine probably lost: a trace's busy time that reads as idle.

The spec says a sample with no stack (and no marker) was taken while no JavaScript ran.
Chromium's native `Profiler` also writes such samples while V8 collects garbage in the
middle of a busy loop (docs/engines.md, "Chromium's own Profiler loses stacks"), so a
report would call that time `(idle)`. They are recognised by where they sit:

    a *suspect* sample has neither stack nor marker, and lies in a run of at most
    `MAX_RUN` such samples whose neighbours on both sides (the samples just before and
    just after the run) have stacks with the same leaf frame: one function was running
    before and after.

Only traces with no marker on any sample are read this way: a producer that marks its
samples (CDP recordings: `script`, `gc`, `other`) says by leaving a sample unmarked that it
was idle. A true idle gap between two samples of one function (a short timer loop) can
look the same, so this is a warning, never a correction of the numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..trace import ProfilerTrace, Recording, sample_weights

# A collection pause is a few ms; at the native 10 ms floor one or two ticks. Longer
# stack-less runs are far more likely a real wait.
MAX_RUN = 3


@dataclass(frozen=True)
class LostStacks:
    samples: int  # suspect samples
    ms: float  # the time they stand for (their weights)
    total_ms: float  # all time of the tracks looked at

    @property
    def percent(self) -> float:
        return 100.0 * self.ms / self.total_ms if self.total_ms > 0 else 0.0

    def as_json(self) -> dict:
        return {
            "samples": self.samples,
            "ms": round(self.ms, 3),
            "percent": round(self.percent, 2),
            "rule": (
                f"samples with neither stack nor marker, in runs of at most {MAX_RUN}, "
                "between two samples whose stacks have the same leaf frame; only in "
                "traces without markers"
            ),
        }


def suspect_mask(trace: ProfilerTrace) -> np.ndarray:
    """Per sample: True for a suspect (see the module's rule)."""
    n = trace.num_samples
    out = np.zeros(n, dtype=bool)
    if n < 3 or trace.sample_marker is not None:
        return out
    stack = trace.sample_stack
    none = stack < 0
    if not none.any():
        return out
    edges = np.diff(np.concatenate(([0], none.astype(np.int8), [0])))
    starts = np.flatnonzero(edges == 1)
    ends = np.flatnonzero(edges == -1)  # exclusive
    inner = (starts > 0) & (ends < n) & (ends - starts <= MAX_RUN)
    starts, ends = starts[inner], ends[inner]
    if not len(starts):
        return out
    # Runs are maximal, so both neighbours have a stack.
    leaf_before = trace.stack_frame[stack[starts - 1]]
    leaf_after = trace.stack_frame[stack[ends]]
    same = leaf_before == leaf_after
    delta = np.zeros(n + 1, dtype=np.int64)
    np.add.at(delta, starts[same], 1)
    np.add.at(delta, ends[same], -1)
    out[:] = np.cumsum(delta[:-1]) > 0
    return out


def lost_stacks(rec: Recording, track: str | None = None) -> LostStacks | None:
    """The suspect samples of one track (or all), or None when there are none."""
    tracks = [rec.track(track)] if track is not None else list(rec.tracks)
    count = 0
    ms = 0.0
    total = 0.0
    for t in tracks:
        w = sample_weights(t.trace, t.sample_interval)
        total += float(w.sum())
        mask = suspect_mask(t.trace)
        if mask.any():
            count += int(mask.sum())
            ms += float(w[mask].sum())
    return LostStacks(count, ms, total) if count else None


def warning(found: LostStacks) -> str:
    """One line for stderr."""
    return (
        f"jsprof: warning: {found.samples} sample{'s' if found.samples != 1 else ''} "
        f"({found.ms:.1f} ms, {found.percent:.1f}% of the time) have no stack but lie between "
        "samples of one function: the engine probably lost their stacks and they count as "
        "(idle) here (Chromium's native Profiler does while V8 collects garbage; "
        "docs/engines.md)"
    )
