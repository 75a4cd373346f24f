"""Trace loading and analysis speed on a big synthetic trace, against plain orjson.loads.

    .venv/bin/python benchmarks/bench_trace.py [--samples 5000000] [--stacks 100000] [--repeat 3]

Prints jsprof.load / orjson.loads as a ratio (same bytes, same run) and the self/total
analysis throughput in samples per second.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time

import numpy as np
import orjson

from jsprof import tracefile
from jsprof.analysis.calltree import build_call_tree
from jsprof.analysis.profile import summarize
from jsprof.formats import read_any
from jsprof.trace import ProfilerFrame, ProfilerTrace, Recording


def synthetic(n_samples: int, n_stacks: int, n_frames: int = 5000, seed: int = 1) -> Recording:
    """Deep, varied stacks: each new stack extends a random recent one (depth up to ~200)."""
    rng = np.random.default_rng(seed)
    parent = np.empty(n_stacks, np.int64)
    depth = np.empty(n_stacks, np.int64)
    parent[0], depth[0] = -1, 1
    for i in range(1, n_stacks):
        # Mostly extend a recent stack (deep paths), sometimes branch from anywhere (variety).
        p = (
            i - 1 - int(rng.integers(0, min(i, 50)))
            if rng.random() < 0.9
            else int(rng.integers(0, i))
        )
        if depth[p] >= 200:
            p = int(rng.integers(0, i))
        parent[i], depth[i] = p, depth[p] + 1
    frame = rng.integers(0, n_frames, n_stacks)
    frames = [ProfilerFrame(f"fn{i}", i % 50, 1 + i % 900, 1 + i % 40) for i in range(n_frames)]
    resources = [f"https://example.com/bundle{i}.js" for i in range(50)]
    times = np.cumsum(rng.uniform(0.9, 1.1, n_samples))
    stack = rng.integers(0, n_stacks, n_samples)
    stack[rng.random(n_samples) < 0.05] = -1
    trace = ProfilerTrace(resources, frames, parent, frame, times, stack)
    return Recording.of(trace, sample_interval=1.0)


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times), statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=5_000_000)
    ap.add_argument("--stacks", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()

    rec = synthetic(a.samples, a.stacks)
    data = tracefile.dumps(rec)
    print(
        f"synthetic trace: {a.samples:,} samples, {a.stacks:,} stacks, "
        f"max depth {int(rec.tracks[0].trace.stack_depths().max())}, {len(data) / 1e6:.0f} MB JSON"
    )

    # Interleave baseline and ours so machine noise hits both alike.
    base, ours = [], []
    for _ in range(a.repeat):
        base.append(best(lambda: orjson.loads(data), 1)[0])
        ours.append(best(lambda: read_any(data, "bench"), 1)[0])
    b, o = min(base), min(ours)
    print(f"orjson.loads        {b:7.3f} s  ({len(data) / b / 1e6:.0f} MB/s)")
    print(f"jsprof load         {o:7.3f} s  (validated, into numpy columns)")
    print(f"load ratio          {o / b:7.2f} x  (goal <= 1.5)")

    loaded = read_any(data, "bench")
    t, _ = best(lambda: summarize(loaded), a.repeat)
    print(f"self/total summary  {t:7.3f} s  {a.samples / t / 1e6:6.1f} M samples/s (goal >= 10)")
    t, _ = best(lambda: build_call_tree(loaded), a.repeat)
    print(f"call tree           {t:7.3f} s  {a.samples / t / 1e6:6.1f} M samples/s")


if __name__ == "__main__":
    main()
