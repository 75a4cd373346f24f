"""`report --during interaction|long-frame`: only the samples taken while the user waited,
on a local recording whose tracks hold the page's spans (`record --engine chromium`).

The rules are the fleet's (`fleet --during`, jsprof.timeline): the windows are the long
animation frames with at least `--slower-than` ms of blocking (default 50) or the
interactions at least that slow (INP's number; default 200). Samples the browser lost the
stack of are attributed first, by the rule every view uses (analysis/busy.py: inside a
long frame's script entry they are that entry point's `(stack not captured)`, elsewhere
in the frame its own rows, never `(idle)`), so a window charges a handler only for the
time inside its own script entries. Pure: Recording -> Recording.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import timeline as tl
from ..trace import Recording, sample_weights, samples_dropped
from .busy import attribute, charged_mask
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
    the tracks' time origins, when known, line them up), lost stacks attributed first
    (`busy.attribute`: a no-op on a recording already attributed); `attributed_ms` is the
    kept time charged to entry points."""
    rec, _ = attribute(rec)
    threshold = tl.DEFAULT_SLOWER_THAN[kind] if slower_than is None else slower_than
    # Windows in one time base: epoch ms when every track's origin is known, else each
    # track's own clock (the tracks of one recording share it then).
    origins = [t.time_origin for t in rec.tracks]
    known = all(o is not None for o in origins)

    def base(i: int) -> float:
        return float(origins[i]) if known else 0.0  # type: ignore[arg-type]

    windows: list[tuple[float, float]] = []
    n_any = 0
    for i, t in enumerate(rec.tracks):
        pl = tl.of_track(t)
        n_any += len(pl.windows(kind, -np.inf))
        b = base(i)
        windows += [(s + b, e + b) for s, e in pl.windows(kind, threshold)]
    tracks = []
    attributed = 0.0
    for i, t in enumerate(rec.tracks):
        tr = t.trace
        b = base(i)
        keep = tl.in_windows(tr.sample_time + b, windows)
        w = sample_weights(tr, t.sample_interval)  # from the whole recording, as filters do
        attributed += float(w[keep & charged_mask(tr)].sum())
        tracks.append(samples_dropped(t, keep_samples(tr, keep, w)))
    return During(Recording(tracks), len(windows), n_any, attributed)
