"""`report --during interaction|long-frame`: only the samples taken while the user waited,
on a local recording whose tracks hold the page's spans (`record --engine chromium`).

The rules are the fleet's (`fleet --during`, jsprof.timeline): the windows are the long
animation frames with at least `--slower-than` ms of blocking (default 50) or the
interactions at least that slow (INP's number; default 200), and a sample the browser lost
the stack of (no stack, no marker but `script`) inside a long animation frame is charged
to a frame for the script entry point that was running (sourceFunctionName at sourceURL)
with a child `(stack not captured)`, never `(idle)`. Pure: Recording -> Recording.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .. import timeline as tl
from ..trace import (
    MARKER_CODE,
    NONE,
    ProfilerFrame,
    ProfilerTrace,
    Recording,
    sample_weights,
)
from .filters import keep_samples

LOCAL_DURING = ("interaction", "long-frame")


@dataclass
class During:
    """What `during` kept: the recording, its windows and the time charged to entry points."""

    recording: Recording
    windows: int  # windows at least --slower-than
    windows_any: int  # windows of the kind at any length
    attributed_ms: float


def during(rec: Recording, kind: str, slower_than: float | None = None) -> During:
    """Every track's samples inside the `kind` windows of any track's spans (on one clock:
    the tracks' time origins, when known, line them up), lost stacks inside long frames
    charged to their entry points."""
    threshold = tl.DEFAULT_SLOWER_THAN[kind] if slower_than is None else slower_than
    # Windows in one time base: epoch ms when every track's origin is known, else each
    # track's own clock (the tracks of one recording share it then).
    origins = [t.time_origin for t in rec.tracks]
    known = all(o is not None for o in origins)

    def base(i: int) -> float:
        return float(origins[i]) if known else 0.0  # type: ignore[arg-type]

    windows: list[tuple[float, float]] = []
    frames: list[tuple[float, dict]] = []  # (base, long frame) of every track
    n_any = 0
    for i, t in enumerate(rec.tracks):
        pl = tl.from_spans(t.spans)
        n_any += len(pl.windows(kind, -np.inf))
        b = base(i)
        windows += [(s + b, e + b) for s, e in pl.windows(kind, threshold)]
        frames += [(b, f) for f in pl.long_frames]
    tracks = []
    attributed = 0.0
    for i, t in enumerate(rec.tracks):
        tr = t.trace
        b = base(i)
        keep = tl.in_windows(tr.sample_time + b, windows)
        w = sample_weights(tr, t.sample_interval)  # from the whole recording, as filters do
        tr, ms = _attribute(tr, keep, w, [(fb - b, f) for fb, f in frames])
        attributed += ms
        tracks.append(replace(t, trace=keep_samples(tr, keep, w)))
    return During(Recording(tracks), len(windows), n_any, attributed)


def _attribute(
    tr: ProfilerTrace, keep: np.ndarray, w: np.ndarray, frames: list[tuple[float, dict]]
) -> tuple[ProfilerTrace, float]:
    """The trace with its kept stack-less script samples inside long frames put on
    (entry point) -> (stack not captured) stacks, and the ms so charged."""
    if not frames or not keep.any():
        return tr, 0.0
    mk = (
        tr.sample_marker.astype(np.int64)
        if tr.sample_marker is not None
        else np.full(tr.num_samples, NONE, np.int64)
    )
    lost = np.nonzero(
        keep & (tr.sample_stack == NONE) & ((mk == NONE) | (mk == MARKER_CODE["script"]))
    )[0]
    if not len(lost):
        return tr, 0.0
    resources = list(tr.resources)
    fr = list(tr.frames)
    parent = tr.stack_parent.tolist()
    sframe = tr.stack_frame.tolist()
    stack = tr.sample_stack.copy()
    marker = None if tr.sample_marker is None else tr.sample_marker.copy()
    made: dict[tuple[str, str | None], int] = {}  # entry point -> its (stack not captured)
    # A frame of the entry point's name in its script, when the profile has exactly one
    # (LoAF gives a character offset, not a line), as the fleet picks it.
    same: dict[tuple[str, str | None], set[int]] = {}
    for k, f in enumerate(fr):
        if f.line is not None:
            url = None if f.resource_id is None else resources[f.resource_id]
            same.setdefault((f.name, url), set()).add(k)

    def frame_id(name: str, url: str | None) -> int:
        rid = None
        if url is not None:
            if url not in resources:
                resources.append(url)
            rid = resources.index(url)
        fr.append(ProfilerFrame(name, rid, None, None))
        return len(fr) - 1

    charged = 0.0
    for j in lost.tolist():
        t = float(tr.sample_time[j])
        hit = next(
            ((b, f) for b, f in frames if f["start"] + b <= t < f["start"] + f["duration"] + b),
            None,
        )
        if hit is None:
            continue
        b, f = hit
        s = tl.entry_point(f, t - b)
        if s is None:
            continue
        key = tl.entry_name(s)
        sid = made.get(key)
        if sid is None:
            one = same.get(key, set())
            entry = next(iter(one)) if len(one) == 1 else frame_id(*key)
            parent.append(NONE)
            sframe.append(entry)
            parent.append(len(parent) - 1)
            sframe.append(frame_id(tl.NOT_CAPTURED, None))
            sid = made[key] = len(parent) - 1
        stack[j] = sid
        if marker is not None:
            marker[j] = NONE
        charged += float(w[j])
    out = tr.replace(
        resources=resources,
        frames=fr,
        stack_parent=np.array(parent, np.int32),
        stack_frame=np.array(sframe, np.int32),
        sample_stack=stack,
        sample_marker=marker,
    )
    return out, charged
