"""Query time with many small table parts vs the same tables merged (`tables.merge.merge_parts`).

A collector that compacts every 5 s writes a few parts per run; queries open, check (CRC-32)
and scan every part they select. This builds two stores of the same uploads compacted in
many small runs (one per `--per-run` uploads): "small" never merged, "levels" merged after
each run as the collector's compactor does (today's steady state); and "merged", a copy of
"small" merged into one part per table and release (what a day becomes once it is over).
The same queries (top, flame, series) run on each, in a fresh process ("cold": a `jsprof
fleet` run, which checks every part once) and repeated in that process ("warm": a
long-lived collector, parts already checked). Alternating runs; medians.

    .venv/bin/python benchmarks/bench_merge.py [--uploads 300] [--per-run 4] [--reps 2]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

_QUERY = r"""
import json, sys, time
from jsprof.fleet import api
from jsprof.fleet.filters import Filters
from jsprof.store import Store
st = Store(sys.argv[1])
out = []
for _ in range(int(sys.argv[2])):
    t0 = time.perf_counter()
    with api.session(st, tail_limit=0) as s:
        api.top(s, Filters(app="shop"), 20)
        api.flame(s, Filters(app="shop"), fmt="svg")
        api.series(s, Filters(app="shop"), "render", by="day")
    out.append(time.perf_counter() - t0)
print(json.dumps(out))
"""


def _parts(man: dict) -> int:
    return len(man["uploads"]) + sum(
        len(v) for r in man["releases"].values() for v in r["parts"].values())


def _build(small: Path, levels: Path, uploads: int, per_run: int) -> float:
    """The same uploads into two stores compacted every `per_run` uploads; `levels` is
    also merged after each run, as the collector's compactor does (its steady state)."""
    import numpy as np

    from fleet_util import make_trace, upload
    from jsprof.store import Store
    from jsprof.store.tables.compact import compact
    from jsprof.store.tables.merge import merge_parts

    stores = [Store(small), Store(levels)]
    rng = np.random.default_rng(1)
    now = time.time() * 1e3
    t0 = time.perf_counter()
    for i in range(uploads):
        rel = ("1.0", "1.1", "1.2")[i % 3]
        tr = make_trace(rng, 300, hot=f"f{i % 40}", hot_share=0.1)
        for st in stores:
            upload(st, f"u{i}", tr, app="shop", release=rel,
                   receivedAt=now - (uploads - i) * 10.0)
        if (i + 1) % per_run == 0 or i == uploads - 1:
            for st in stores:
                compact(st)
            merge_parts(levels)
    for st in stores:
        st.close()
    return time.perf_counter() - t0


def _query(path: Path, reps: int) -> list[float]:
    out = subprocess.run([sys.executable, "-c", _QUERY, str(path), str(reps)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--uploads", type=int, default=300)
    ap.add_argument("--per-run", type=int, default=4)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()

    from jsprof.store.tables.manifest import read_manifest
    from jsprof.store.tables.merge import merge_parts

    root = Path(tempfile.mkdtemp(prefix="jsprof-bench-merge-", dir=args.dir))
    try:
        small, levels, merged = root / "small", root / "levels", root / "merged"
        build_s = _build(small, levels, args.uploads, args.per_run)
        shutil.copytree(small, merged)
        t0 = time.perf_counter()
        # One part per group: what a closed day becomes.
        while merge_parts(merged, now=time.time() + 2 * 86400).written:
            pass
        merge_s = time.perf_counter() - t0
        stores = (("small", small), ("levels", levels), ("merged", merged))
        cold: dict[str, list[float]] = {n: [] for n, _ in stores}
        warm: dict[str, list[float]] = {n: [] for n, _ in stores}
        for _ in range(args.reps):
            for name, p in stores:
                t = _query(p, 3)
                cold[name].append(t[0])
                warm[name].extend(t[1:])
        doc = {
            "uploads": args.uploads, "per_run": args.per_run,
            "runs": -(-args.uploads // args.per_run),
            "build_s": round(build_s, 1), "merge_all_s": round(merge_s, 2),
            **{f"parts_{n}": _parts(read_manifest(p)) for n, p in stores},
            "load": os.getloadavg()[0],
        }
        for kind, d in (("cold", cold), ("warm", warm)):
            a = statistics.median(d["small"])
            doc[f"{kind}_small_s"] = round(a, 3)
            for n in ("levels", "merged"):
                b = statistics.median(d[n])
                doc[f"{kind}_{n}_s"] = round(b, 3)
                doc[f"{kind}_ratio_{n}"] = round(a / b, 2)
        print(json.dumps(doc, indent=1))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
