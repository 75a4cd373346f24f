"""Peak memory of one compaction batch's Time view rollups (store/tables/timeroll.py),
made and written as the compactor does: a batch at the compactor's cap (BATCH_SAMPLES,
3 M samples) of 500 uploads of 6,000 samples, 3,000 distinct stacks, ~1 ms apart.
Prints the rows written per table, the peak traced by tracemalloc (numpy's arrays and
Python's objects), the peak of Arrow's memory pool (its tables, which tracemalloc does
not see), the process's peak RSS growth, and the CPU, in MiB and s.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_time_rows_memory.py

On a tree before the rollups were written a grid at a time (no `time_parts`), it makes
the same rows the way that tree's compactor did: all at once (`time_rows`), then a part
per kind (`new_part`), so both trees can be measured by the one script.
"""

from __future__ import annotations

import resource
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pyarrow as pa

from jsprof.store.tables import parts, rollup, timeroll

UPLOADS, PER = 500, 6000


def batch() -> tuple[dict, dict]:
    rng = np.random.default_rng(1)
    cells = {"uk": list(range(UPLOADS)), "id": [f"id{i}" for i in range(UPLOADS)],
             "route": [f"/r{i % 5}" for i in range(UPLOADS)], "env": ["prod"] * UPLOADS,
             "page_load": [f"pl{i}" for i in range(UPLOADS)]}
    n = UPLOADS * PER
    samples = {"uk": np.repeat(np.arange(UPLOADS), PER),
               "t": np.tile(np.arange(PER) * 1.0, UPLOADS) + rng.random(n),
               "stack_id": rng.integers(0, 3000, n), "marker": np.full(n, -1, np.int8),
               "weight_ns": np.full(n, 1_000_000)}
    return cells, samples


def write(tdir: Path, cells: dict, samples: dict) -> dict[str, int]:
    sch = parts.schemas()
    rels = {k: f"{k}/part-000001.parquet" for k in timeroll.TIME_KINDS}
    if hasattr(timeroll, "time_parts"):
        _, pieces = timeroll.time_parts(cells, samples, rollup.load_hash)
        got = parts.new_parts_streamed(tdir, rels, pieces, sch)
    else:  # the tree before: every grid's rows at once, then the parts
        rows = timeroll.time_rows(cells, samples, rollup.load_hash)
        got = {k: parts.new_part(tdir, rels[k], rows[k], sch[k], len(rows[k]["route"]))
               for k in timeroll.TIME_KINDS}
        del rows
    return {k: e["rows"] for k, e in got.items()}


def main() -> None:
    cells, samples = batch()
    held_by_batch = sum(v.nbytes for v in samples.values())
    pool = pa.default_memory_pool()
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    arrow0 = pool.max_memory()
    with tempfile.TemporaryDirectory() as d:
        tracemalloc.start()
        t0 = time.process_time()
        count = write(Path(d), cells, samples)
        cpu = time.process_time() - t0
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0
    print(f"samples {UPLOADS * PER:,} ({held_by_batch >> 20} MiB of arrays); rows {count}; "
          f"traced peak {peak >> 20} MiB; Arrow pool peak {(pool.max_memory() - arrow0) >> 20}"
          f" MiB ({pool.backend_name}); peak RSS growth {rss >> 10} MiB; CPU {cpu:.2f} s")


if __name__ == "__main__":
    main()
