"""Reading a deep recursion's speedscope export (an evented profile: jsprof writes deep
stacks as frames opened and closed) against reading the same recording's .cpuprofile, in
one run. The recording is tests/test_viewer_range.py's: main > rec x `--depth` > leaf,
`--samples` samples walking down the recursion and back up.

    PYTHONPATH=<tree>/src .venv/bin/python benchmarks/bench_speedscope_evented.py

Before the evented reader kept its open frames as a tree, each sample's stack was made
from the whole open stack (a tuple of it per sample, every frame of every distinct stack
interned): time grew with depth x samples.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from jsprof import io
from jsprof.trace import Recording, TraceBuilder


def deep(path: Path, depth: int, n: int) -> None:
    b = TraceBuilder()
    r = b.resource_id("file:///deep.js")
    main_f, rec_f, leaf_f = (b.frame_id(nm, r, k + 1, 1)
                             for k, nm in enumerate(("main", "rec", "leaf")))
    chain = [b.stack_id([main_f])]
    for _ in range(depth):
        chain.append(b.stack_id_from(chain[-1], rec_f))
    for k in range(n):
        d = int(depth * (1 - abs(2 * k / n - 1)))
        b.add_sample(float(k), b.stack_id_from(chain[d], leaf_f))
    io.save(Recording.of(b.build(), sample_interval=1.0), path)


def best(path: Path, repeat: int) -> float:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        io.load(path)
        out.append(time.perf_counter() - t0)
    return min(out)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--depth", type=int, default=30_000)
    ap.add_argument("--samples", type=int, default=3000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    d = Path(tempfile.mkdtemp(prefix="bench-ss-"))
    src, ss = d / "deep.cpuprofile", d / "deep.speedscope.json"
    deep(src, args.depth, args.samples)
    io.save(io.load(src), ss)
    base, ev = best(src, args.repeat), best(ss, args.repeat)
    print(f"depth {args.depth}, {args.samples} samples: .cpuprofile {base:.3f} s, "
          f"speedscope (evented) {ev:.3f} s, ratio {ev / base:.2f}x (best of {args.repeat})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
