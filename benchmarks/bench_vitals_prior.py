"""What rollup_vitals adds to a compaction batch (issue 34): finding the earlier chunks of the
batch's page loads among the day's committed uploads of their release
(`store/tables/vitals.prior_timelines`), at the end of a busy day.

A day of `--rate` uploads/s of one release (`--chunks` uploads a page load, a timeline of
~1 KB each in `meta`) is written as uploads-table parts of `--part-rows` rows in row
groups of `--group-rows` (100: a batch's part at 20/s every 5 s; a merge writes row
groups of up to 16 MB, ~8,000 such uploads);
then the lookup a batch of `--batch` uploads makes (their page loads' earlier chunks, all
in the newest part, as a live collector's are) runs `--repeat` times. Printed:
the median time of one lookup and the rows it scanned, against the day's uploads.

    .venv/bin/python benchmarks/bench_vitals_prior.py [--rate 20] [--hours 24]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson
import pyarrow.parquet as pq


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=float, default=20.0)
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--chunks", type=int, default=3)
    ap.add_argument("--part-rows", type=int, default=200_000)
    ap.add_argument("--group-rows", type=int, default=100,
                    help="rows a row group: a batch's (a merge keeps them)")
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    from jsprof.store.tables.intern import release_key
    from jsprof.store.tables.parts import new_part, schemas
    from jsprof.store.tables.vitals import prior_timelines

    sch = schemas()["uploads"]
    root = Path(tempfile.mkdtemp(prefix="bench-prior-"))
    try:
        n = int(args.rate * args.hours * 3600)
        rkey = release_key("shop", "1.0.0")
        tl = orjson.dumps({"timeline": {"interactions": [
            {"id": i, "type": "click", "start": 100.0 * i, "duration": 120.0,
             "processingStart": 100.0 * i + 5, "processingEnd": 100.0 * i + 80,
             "target": "button#buy"} for i in range(4)],
            "longFrames": [{"start": 50.0 * i, "duration": 80.0, "blockingDuration": 30.0}
                           for i in range(4)],
            "load": {"lcp": 1200.0, "lcpElement": "img.hero", "cls": 0.02}},
            "app": "shop", "release": "1.0.0"}).decode()
        man: dict = {"uploads": []}
        t = time.perf_counter()
        for lo in range(0, n, args.part_rows):
            hi = min(n, lo + args.part_rows)
            uk = np.arange(lo, hi, dtype=np.int64)
            cols = {f.name: [None] * (hi - lo) for f in sch}
            cols.update({"uk": uk, "id": [f"u{i}" for i in uk.tolist()],
                         "app": ["shop"] * (hi - lo),
                         "release": ["1.0.0"] * (hi - lo), "rkey": [rkey] * (hi - lo),
                         "route": ["/cart"] * (hi - lo), "meta": [tl] * (hi - lo),
                         "samples": np.zeros(hi - lo, np.int64),
                         "total_ms": np.zeros(hi - lo), "lost_ms": np.zeros(hi - lo),
                         "page_load": [f"load-{i // args.chunks:09d}" for i in uk.tolist()]})
            e = new_part(None, f"uploads/{rkey}/2026-11-26/part-{lo:09d}.parquet", cols, sch,
                         hi - lo, "2026-11-26", [0.0, 1.0])
            e["rkey"] = rkey
            path = root / e["path"]
            path.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(e.pop("table"), path, compression="zstd",
                           row_group_size=args.group_rows)
            man["uploads"].append(e)
        print(f"{n:,} uploads in {len(man['uploads'])} parts "
              f"({sum(p.stat().st_size for p in root.rglob('*.parquet')) / 1e6:.0f} MB), "
              f"written in {time.perf_counter() - t:.0f} s", flush=True)
        prior = prior_timelines(root, man, rkey, "2026-11-26")
        # the batch's page loads: the newest ones, whose earlier chunks are committed
        want = {("/cart", None, f"load-{(n - 1 - k) // args.chunks:09d}")
                for k in range(args.batch)}
        times = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            got = prior(want)
            times.append(time.perf_counter() - t)
        found = sum(len(v) for v in got.values())
        print(f"one batch's lookup ({len(want)} page loads, {found} earlier chunks found): "
              f"median {statistics.median(times) * 1e3:.0f} ms (runs "
              f"{', '.join(f'{x * 1e3:.0f}' for x in times)}) over the day's {n:,} uploads")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
