"""The session layer's share-out of a drained chunk (session.py `_add_chunk`): one 1 ms
session alone (every tick its own), and a 10 ms session beside it (thinned: keep_spans
on the wall clock since qjsthin, keep_indices before), against a baseline tree in the
same run.

    python benchmarks/bench_session_thinning.py --baseline /work/main/src [--ticks 400000]

Engine-free: a fake sampler backend hands out chunks of a 1 ms grid with a stop (a gap
of 20 ticks after a restamped first tick) every 50 ticks. Each tree runs in its own
process, in turn (A B A B ...); the best of the repeats per tree is reported, and this
tree's time over the baseline's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"

CHILD = r"""
import json, sys, time
import numpy as np
from jsprof.session import DEFERRED, Chunk, ProfilerSession, SharedSampler

ticks, chunk_len = int(sys.argv[1]), int(sys.argv[2])
keep = np.ones(ticks, bool)
for start in range(0, ticks, 50):  # a stop: first tick kept, the next 20 dropped
    keep[start + 31:start + 51] = False
times = np.arange(ticks, dtype=np.float64)[keep]
flags = np.zeros(len(times), np.uint32)
flags[np.flatnonzero(np.diff(times) > 1)] = DEFERRED
stack = (np.arange(len(times)) // 7 % 2).astype(np.int32)


class Backend:
    def __init__(self):
        self.chunks = []
    def start(self, interval, capacity, cpu=False): pass
    def cpu_now(self): return 0.0
    def set_interval(self, interval): pass
    def stop(self): pass
    def sample_now(self): pass
    def notify_at(self, n): pass
    def drain(self):
        return self.chunks.pop(0) if self.chunks else make(slice(0, 0))


def make(part):
    t = times[part]
    return Chunk(funcs=[("a", "x.js", 1, 1, 0, False), ("b", "x.js", 2, 1, 0, False)],
                 stack_parent=np.array([-1, -1], np.int32),
                 stack_func=np.array([0, 1], np.int32), time=t, stack=stack[part],
                 line=np.zeros(len(t), np.int32), flags=flags[part], due=t, cap=t + 0.1)


def run(intervals):
    backend = Backend()
    sampler = SharedSampler(backend, min_interval=1.0, capacity=1 << 30)
    sessions = [ProfilerSession(sampler, iv, 1 << 30) for iv in intervals]
    parts = [slice(a, a + chunk_len) for a in range(0, len(times), chunk_len)]
    backend.chunks = [make(p) for p in parts]
    t0 = time.perf_counter()
    for _ in parts:
        sampler.refresh()
    took = time.perf_counter() - t0
    for s in sessions:
        s.stop()
    return took


print(json.dumps({"alone": run([1.0]), "beside": run([1.0, 10.0])}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", required=True, help="the baseline tree's src directory")
    ap.add_argument("--ticks", type=int, default=400_000)
    ap.add_argument("--chunk", type=int, default=20_000, help="ticks per drained chunk")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    best: dict[str, dict[str, float]] = {"baseline": {}, "this": {}}
    for _ in range(args.repeat):
        for name, src in (("baseline", args.baseline), ("this", str(SRC))):
            env = dict(os.environ, PYTHONPATH=src)
            out = subprocess.run(
                [sys.executable, "-c", CHILD, str(args.ticks), str(args.chunk)],
                env=env, check=True, capture_output=True, text=True,
            ).stdout
            for k, v in json.loads(out).items():
                best[name][k] = min(best[name].get(k, float("inf")), v)
    for k in ("alone", "beside"):
        b, t = best["baseline"][k], best["this"][k]
        print(f"{k:7s} baseline {b * 1e3:8.1f} ms  this {t * 1e3:8.1f} ms  ratio {t / b:.2f}")


if __name__ == "__main__":
    main()
