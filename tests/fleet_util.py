"""Helpers for the fleet tests: synthetic field traces, uploaded to a real store."""

from __future__ import annotations

import numpy as np

from jsprof.formats.jsprof import dumps
from jsprof.trace import ProfilerTrace, Recording, TraceBuilder, Track

# A small app: call paths a page spends its time in, with relative weights.
PATHS = [
    (["main", "render", "layoutTree", "measure"], 30),
    (["main", "render", "layoutTree"], 8),
    (["main", "render", "paintList", "drawText"], 15),
    (["main", "onScroll", "throttle", ""], 6),
    (["main", "fetchData", "JSON.parse"], 9),
    (["main", "fib", "fib", "fib"], 10),
    (["main", "fib", "fib"], 4),
    (["main"], 3),
]
RES = "https://shop.example/static/app.min.js"


def make_trace(rng: np.random.Generator, n: int, interval: float = 10.0,
               hot: str | None = None, hot_share: float = 0.0, idle_share: float = 0.2,
               ) -> ProfilerTrace:
    """n samples ~`interval` ms apart with jitter; some idle (with markers); `hot` gets
    `hot_share` of the JS samples on top of the usual paths."""
    b = TraceBuilder()
    lines = {name: 10 + 7 * i for i, name in enumerate(
        sorted({f for p, _ in PATHS for f in p} | ({hot} if hot else set())))}
    stacks = []
    weights = []
    for path, w in PATHS:
        stacks.append(b.stack_id(
            b.frame_id(f, b.resource_id(RES), lines[f], 3) for f in path))
        weights.append(w)
    if hot:
        total = sum(weights)
        stacks.append(b.stack_id(
            b.frame_id(f, b.resource_id(RES), lines[f], 3) for f in ["main", "render", hot]))
        weights.append(total * hot_share / (1 - hot_share))
    p = np.asarray(weights, float) / sum(weights)
    t = np.cumsum(rng.uniform(0.7, 1.6, n) * interval)
    pick = rng.choice(len(stacks), size=n, p=p)
    idle = rng.random(n) < idle_share
    markers = rng.choice(["gc", "paint", "other"], size=n)
    for i in range(n):
        if idle[i]:
            b.add_sample(float(t[i]), None, marker=str(markers[i]))
        else:
            b.add_sample(float(t[i]), stacks[pick[i]], marker="script")
    return b.build()


def upload(store: object, uid: str, trace: ProfilerTrace, **meta: object) -> None:
    meta.setdefault("sampleInterval", 10.0)
    store.append(uid, dict(meta), dumps(Recording([Track("main", trace)])))


def merged_recording(traces: list[ProfilerTrace], intervals: list[float]) -> Recording:
    """The traces as one recording, a track each, as `jsprof report` would read them."""
    return Recording([
        Track(f"t{i}", tr, sample_interval=iv)
        for i, (tr, iv) in enumerate(zip(traces, intervals, strict=True))
    ])
