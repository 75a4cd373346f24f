"""Trace loading, saving and analysis speed on big synthetic traces, against plain orjson.

    .venv/bin/python benchmarks/bench_trace.py [--samples 5000000] [--stacks 100000]
        [--repeat 3] [--only 0,2,40,markers] [--before SRC_DIR]

For each variant (0 %, 2 % and 40 % idle samples, i.e. samples without a stackId, and one
with a marker on every sample) it prints, as ratios taken in the same run on the same
bytes (baseline and jsprof interleaved, best of --repeat):

- load: `jsprof.load(path)` (read the file, parse, validate every field, numpy columns)
  over `orjson.loads` of the file's bytes already in memory (goal <= 0.6);
- peak memory while loading, in a fresh process: peak RSS minus RSS before the load, over
  the file's size (goal <= 2); `--before SRC_DIR` measures another checkout's `src` too
  (e.g. the code before a change, extracted with `git archive`);
- save: `jsprof.save(rec, path)` over `orjson.dumps` of the same document already built
  as dicts (goal <= 1.0); also the encoding alone (`tracefile.dumps`, bytes in memory), as
  the file write (page cache, rename over the last output) costs what it costs.

Then the self/total analysis throughput in samples per second (first variant).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import orjson

import jsprof
from _common import best_of, timed
from jsprof.analysis.calltree import build_call_tree
from jsprof.analysis.profile import summarize
from jsprof.formats import jsprof as tracefile
from jsprof.trace import ProfilerFrame, ProfilerTrace, Recording


def synthetic(
    n_samples: int,
    n_stacks: int,
    n_frames: int = 5000,
    seed: int = 1,
    idle: float = 0.05,
    markers: bool = False,
) -> Recording:
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
    stack[rng.random(n_samples) < idle] = -1
    marker = None
    if markers:
        # script on JavaScript samples; gc, other or none on the rest, as Chromium writes.
        marker = np.where(stack >= 0, 0, rng.choice([1, 5, -1], n_samples)).astype(np.int8)
    trace = ProfilerTrace(resources, frames, parent, frame, times, stack, marker)
    return Recording.of(trace, sample_interval=1.0)


_PEAK_CHILD = """
import gc, sys
import jsprof, jsprof.formats
def status(key):
    # VmHWM, not ru_maxrss: Linux carries the parent's peak into ru_maxrss across exec.
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) * 1024
gc.collect()
before = status("VmRSS:")
rec = jsprof.load(sys.argv[1])
print(status("VmHWM:") - before)
"""


def peak_load_bytes(path: str, src: str | None = None) -> int:
    """Peak RSS growth of a fresh process loading `path` (imports done before measuring)."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = src
    out = subprocess.run(
        [sys.executable, "-c", _PEAK_CHILD, path], env=env, capture_output=True, check=True
    )
    return int(out.stdout)


def variant(name: str, rec: Recording, a: argparse.Namespace, tmp: str) -> None:
    data = tracefile.dumps(rec)
    path = os.path.join(tmp, f"{name}.json")
    with open(path, "wb") as f:
        f.write(data)
    size = len(data)
    # Interleave baseline and ours so machine noise hits both alike.
    base, ours = [], []
    for _ in range(a.repeat):
        base.append(timed(lambda: orjson.loads(data)))
        ours.append(timed(lambda: jsprof.load(path)))
    b, o = min(base), min(ours)
    loaded = jsprof.load(path)
    assert loaded.tracks[0].trace == rec.tracks[0].trace, "load changed the trace"
    del loaded
    data = b""
    doc = tracefile.recording_to_doc(rec)
    out = os.path.join(tmp, f"{name}.out.json")
    dumps, encodes, saves = [], [], []
    for _ in range(a.repeat):
        dumps.append(timed(lambda: orjson.dumps(doc)))
        encodes.append(timed(lambda: tracefile.dumps(rec)))
        saves.append(timed(lambda: jsprof.save(rec, out)))
    doc = {}
    d, e, s = min(dumps), min(encodes), min(saves)
    peak = peak_load_bytes(path)
    line = (
        f"{name:>9} {size / 1e6:6.0f} MB | orjson.loads {b:6.2f} s  jsprof.load {o:6.2f} s  "
        f"load {o / b:5.2f}x | peak {peak / size:4.2f}x file"
    )
    if a.before:
        line += f" (before: {peak_load_bytes(path, a.before) / size:4.2f}x)"
    line += (
        f" | orjson.dumps {d:5.2f} s  save {s:5.2f} s  save {s / d:5.2f}x"
        f" (in memory {e / d:4.2f}x, the rest is the file write)"
    )
    print(line, flush=True)
    os.unlink(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=5_000_000)
    ap.add_argument("--stacks", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", default="0,2,40,markers")
    ap.add_argument("--before", help="another checkout's src/ to measure peak memory of")
    a = ap.parse_args()

    variants = {
        "0": dict(idle=0.0),
        "2": dict(idle=0.02),
        "40": dict(idle=0.40),
        "markers": dict(idle=0.02, markers=True),
    }
    print(
        f"{a.samples:,} samples over {a.stacks:,} stacks; goals: load <= 0.6x, "
        "peak <= 2x file, save <= 1.0x"
    )
    first = None
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.only.split(","):
            rec = synthetic(a.samples, a.stacks, **variants[name])
            label = f"{name}% idle" if name != "markers" else "markers"
            variant(label, rec, a, tmp)
            if first is None:
                first = rec
    assert first is not None
    t = best_of(lambda: summarize(first), a.repeat)
    print(f"self/total summary  {t:7.3f} s  {a.samples / t / 1e6:6.1f} M samples/s (goal >= 10)")
    t = best_of(lambda: build_call_tree(first), a.repeat)
    print(f"call tree           {t:7.3f} s  {a.samples / t / 1e6:6.1f} M samples/s")


if __name__ == "__main__":
    main()
