"""Helpers for the fleet tests: synthetic field traces and an upload source to compact."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import orjson

from jsprof.trace import ProfilerTrace, Recording, TraceBuilder, Track
from jsprof.tracefile import dumps

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


class DirStore:
    """Stand-in for jsprof.store.Store with the agreed interface (append/get/iter_uploads/path),
    kept beside the tests that run the real store."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        (self.path / "raw").mkdir(parents=True, exist_ok=True)

    def _files(self) -> list[Path]:
        return sorted((self.path / "raw").glob("*.json"))

    def append(self, upload_id: str, meta: dict, trace_json: bytes) -> bool:
        if self.get(upload_id) is not None:
            return False
        n = len(self._files())
        tmp = self.path / "raw" / f".{n:08d}.tmp"
        tmp.write_bytes(orjson.dumps({"id": upload_id, "meta": meta}) + b"\n" + trace_json)
        os.replace(tmp, self.path / "raw" / f"{n:08d}.json")
        return True

    def get(self, upload_id: str) -> tuple[dict, bytes] | None:
        for _, uid, meta, body in self.iter_uploads():
            if uid == upload_id:
                return meta, body
        return None

    def iter_uploads(self, after: object = None) -> Iterator[tuple[int, str, dict, bytes]]:
        for i, p in enumerate(self._files()):
            if after is not None and i <= after:
                continue
            head, body = p.read_bytes().split(b"\n", 1)
            d = orjson.loads(head)
            yield i, d["id"], d["meta"], body


def upload(store: object, uid: str, trace: ProfilerTrace, **meta: object) -> None:
    meta.setdefault("sampleInterval", 10.0)
    store.append(uid, dict(meta), dumps(Recording([Track("main", trace)])))


def merged_recording(traces: list[ProfilerTrace], intervals: list[float]) -> Recording:
    """The traces as one recording, a track each, as `jsprof report` would read them."""
    return Recording([
        Track(f"t{i}", tr, sample_interval=iv)
        for i, (tr, iv) in enumerate(zip(traces, intervals, strict=True))
    ])
