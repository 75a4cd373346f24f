"""How well a track was sampled: the interval the samples achieved, the time they stand
for and what the gap cap left out of it, CPU time against wall-clock time.

`jsprof record`'s summary (render/summary.py) formats these; nothing here prints. Imported
after the recording ends: `record` must not import it before the profiled program starts.
numpy and the model are imported by the functions that compute over columns: the classes
here also hold what recorded.py computes without numpy (`record --engine node`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from ..meta import CPU, clock_of
from ..traceparts import middle

if TYPE_CHECKING:
    from collections.abc import Sequence

    from numpy.typing import ArrayLike

    from ..trace import GapCapping, ProfilerTrace, Track

# The sampler fell behind when this share of the time between the first and the last
# sample sat in gaps over BEHIND_GAP intervals; the mean is worth showing beside the
# median when it is this much larger.
BEHIND_SHARE = 0.10
BEHIND_GAP = 5
MEAN_SHOWN = 1.2

# Both results are NamedTuples, not frozen dataclasses: `record`'s summary imports this
# module, and dataclasses' import (inspect, ast, dis, tokenize) cost ~5 ms of CPU, 5 % of a
# short recording's process (issue 32).


class Achieved(NamedTuple):
    """The gaps between distinct sample times, in ms."""

    median: float
    mean: float
    behind: float  # the share of the time in gaps over BEHIND_GAP x the interval

    @property
    def fell_behind(self) -> bool:
        return self.behind >= BEHIND_SHARE

    @property
    def steady(self) -> bool:
        """The median says it all: the sampler kept up and the gaps hardly vary."""
        return not self.fell_behind and self.mean <= MEAN_SHOWN * self.median

    @classmethod
    def of(cls, ordered: Sequence[float], total: float, behind_ms: float) -> Achieved:
        """From the positive gaps `ordered` (sorted, or partitioned as traceparts.middle
        takes them), their sum and the sum of those over BEHIND_GAP intervals: `achieved`
        on numpy and recorded.track_sampling on lists both end here."""
        return cls(median=middle(ordered), mean=total / len(ordered), behind=behind_ms / total)


def achieved(times: ArrayLike, interval: float) -> Achieved | None:
    """The achieved interval of samples taken at `times` (ms) asking for `interval`; None
    with fewer than two distinct times. (recorded.track_sampling: the same over lists.)"""
    import numpy as np

    d = np.diff(np.asarray(times, dtype=np.float64))
    d = d[d > 0]
    if not len(d):
        return None
    n = len(d)
    mid = np.partition(d, [(n - 1) // 2, n // 2])  # np.median would import numpy.ma
    return Achieved.of(mid, float(d.sum()), float(d[d > BEHIND_GAP * interval].sum()))


class TrackSampling(NamedTuple):
    """One track's sampling, as `report` counts its time."""

    samples: int  # recorded samples (markers-only rows left out)
    span_ms: float  # the time the samples stand for (the weights' sum, not last - first)
    lost_ms: float  # what the gap cap left out of it
    capping: GapCapping | None  # which cap applied, when time was lost
    cpu: bool  # sampled on the CPU clock
    achieved: Achieved | None  # None without an interval or two distinct times
    wall_ms: float | None  # CPU-clock tracks: the wall-clock time from first to last sample


def track_sampling(track: Track) -> TrackSampling:
    """The track's sampling, on the model's numpy columns. recorded.track_sampling is this
    over lists (`record --engine node`, without numpy): a rule changed here changes there
    (tests/test_node_light_summary.py compares the two on real recordings)."""
    import numpy as np

    from ..trace import recorded_samples, track_gap_capping, track_weights_and_lost

    tr = track.trace
    weights, lost_ms = track_weights_and_lost(track)
    cpu = clock_of(track.meta) == CPU
    got = None
    if track.sample_interval:
        # on the CPU clock the gaps to judge are CPU time's (the wall's hold the waits)
        got = achieved(np.cumsum(weights) if cpu else tr.sample_time, track.sample_interval)
    wall = None
    if cpu and tr.num_samples:
        wall = float(tr.sample_time[-1] - tr.sample_time[0])
    return TrackSampling(
        samples=recorded_samples(tr),
        span_ms=float(weights.sum()),
        lost_ms=float(lost_ms),
        capping=track_gap_capping(track) if lost_ms > 0 else None,
        cpu=cpu,
        achieved=got,
        wall_ms=wall,
    )


def backward_steps(trace: ProfilerTrace) -> int:
    """How many sample timestamps go back in time (kept in order; counted as 0 ms)."""
    import numpy as np

    return int((np.diff(trace.sample_time) < 0).sum())
