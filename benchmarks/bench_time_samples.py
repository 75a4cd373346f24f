"""The merged Time view from the samples (the path that answers when the rollups cannot:
a percentile between two keys, tables of an older format; issue 34): process CPU time
(DuckDB's threads included) of `timecourse.time_course` with the rollups off, on a store
bench_flame_query.py builds (--uploads of bench_ingest's field traces, 6,000 samples
each, compacted every 50, no tail), --runs per filter (all, --exclude-idle) after one
warm-up; prints the median. Compare trees by running it under each one's PYTHONPATH.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_time_samples.py --store DIR [--label L]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from bench_flame_query import build
from jsprof.fleet import api, timecourse
from jsprof.fleet.filters import Filters
from jsprof.fleet.query import select


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", type=Path, required=True, help="built here if not there yet")
    ap.add_argument("--uploads", type=int, default=500)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    if not (args.store / "segments").is_dir():
        build(args.store, args.uploads, 50, 0)
    timecourse._rolled_sums = lambda *a: None  # the samples answer
    st = api.open_store(args.store)
    cpu = []
    with api.session(st) as s:
        for f in (Filters(app="soak"), Filters(app="soak", exclude_idle=True)):
            timecourse.time_course(s.engine, s.snap, select(s.engine, s.snap, f), "soak")
            for _ in range(args.runs):
                c = time.process_time()
                timecourse.time_course(s.engine, s.snap, select(s.engine, s.snap, f), "soak")
                cpu.append(time.process_time() - c)
    st.close()
    print(f"{args.label} Time view from the samples: median {statistics.median(cpu):.3f} s "
          f"CPU of {len(cpu)} ({', '.join(f'{c:.2f}' for c in cpu)})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
