"""What opening a store costs as it grows: time and memory of `Store()`, `get`, a repeated id.

Before issue 21 every `Store()` (each collector worker, each fleet query) scanned every
segment header and kept every upload id in memory: ~257 ms and ~194 B per 20k uploads
measured then, so ~6 minutes and ~5.4 GiB per process at 30 M uploads. Now each id's claim
file holds where its record is, and opening reads nothing.

The store is built with `Store.append` (8 threads, small real traces) in a temporary
directory, by default on /dev/shm so that building 100k uploads takes seconds, not fsyncs;
each measurement runs in a fresh process: RSS before/after, `Store()`, 1,000 `get`s of
random ids, 1,000 appends of ids already stored (answered from their claims).

    .venv/bin/python benchmarks/bench_store_open.py [--sizes 20000 100000] [--dir /dev/shm]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import orjson

_MEASURE = r"""
import os, random, resource, sys, time
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
import orjson
from jsprof.store import Store
n = int(sys.argv[2])
r0 = rss()
t0 = time.perf_counter()
st = Store(sys.argv[1])
t_open = time.perf_counter() - t0
r1 = rss()
rng = random.Random(1)
ids = [f"id{rng.randrange(n)}" for _ in range(1000)]
t0 = time.perf_counter()
for i in ids:
    assert st.get(i) is not None, i
t_get = (time.perf_counter() - t0) / len(ids)
t0 = time.perf_counter()
for i in ids:
    assert st.append(i, {"app": "bench"}, b"{}") is False
t_dup = (time.perf_counter() - t0) / len(ids)
st.close()
print(orjson.dumps({"open_s": t_open, "open_rss": r1 - r0, "get_s": t_get, "dup_s": t_dup,
                    "rss": rss() - r0}).decode())
"""


def _trace(i: int) -> bytes:
    return orjson.dumps(
        {
            "frames": [{"name": f"f{i % 50}"}, {"name": "g", "line": 3}],
            "resources": [],
            "stacks": [{"frameId": 0}, {"frameId": 1, "parentId": 0}],
            "samples": [{"timestamp": 1.0 + k, "stackId": k % 2} for k in range(20)],
        }
    )


def grow(path: Path, start: int, stop: int) -> float:
    from jsprof.store import Store

    st = Store(path)
    t0 = time.perf_counter()

    def work(t: int) -> None:
        for i in range(start + t, stop, 8):
            st.append(f"id{i}", {"app": "bench", "receivedAt": 1.7e12 + i}, _trace(i))

    ts = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    st.close()
    return time.perf_counter() - t0


def measure(path: Path, n: int) -> dict:
    r = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(path), str(n)],
        capture_output=True, text=True, check=True, timeout=300,
    )
    return orjson.loads(r.stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[20_000, 100_000])
    ap.add_argument("--dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-store-", dir=args.dir))
    store = root / "st"
    try:
        have, rows = 0, []
        for n in sorted(args.sizes):
            built = grow(store, have, n)
            have = n
            m = measure(store, n)
            rows.append((n, m))
            print(
                f"{n:>8} uploads (built in {built:5.1f} s): open {m['open_s'] * 1e3:7.2f} ms, "
                f"RSS +{m['open_rss'] / 1024:7.0f} KiB at open, +{m['rss'] / 1024:7.0f} KiB "
                f"after 1,000 gets + 1,000 repeats; get {m['get_s'] * 1e6:6.0f} us, "
                f"repeated id {m['dup_s'] * 1e6:6.0f} us"
            )
            sys.stdout.flush()
        if len(rows) > 1:
            (n0, a), (n1, b) = rows[0], rows[-1]
            print(
                f"ratios {n1}/{n0} uploads ({n1 / n0:.0f}x): open "
                f"{b['open_s'] / a['open_s']:.2f}x, RSS after gets "
                f"{max(b['rss'], 1) / max(a['rss'], 1):.2f}x, get {b['get_s'] / a['get_s']:.2f}x"
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
