"""Peak memory of one compaction batch's Time view rollups (store/tables/timeroll.py's
time_rows), traced by tracemalloc (numpy's arrays included): a batch at the compactor's cap
(BATCH_SAMPLES, 3 M samples) of 500 uploads of 6,000 samples, 3,000 distinct stacks, ~1 ms
apart. Prints the rows written per table, the peak and what the result holds, in MiB.

    .venv/bin/python benchmarks/bench_time_rows_memory.py
"""

from __future__ import annotations

import time
import tracemalloc

import numpy as np

from jsprof.store.tables import rollup
from jsprof.store.tables.timeroll import time_rows

UPLOADS, PER = 500, 6000


def main() -> None:
    rng = np.random.default_rng(1)
    cells = {"uk": list(range(UPLOADS)), "id": [f"id{i}" for i in range(UPLOADS)],
             "route": [f"/r{i % 5}" for i in range(UPLOADS)], "env": ["prod"] * UPLOADS,
             "page_load": [f"pl{i}" for i in range(UPLOADS)]}
    n = UPLOADS * PER
    samples = {"uk": np.repeat(np.arange(UPLOADS), PER),
               "t": np.tile(np.arange(PER) * 1.0, UPLOADS) + rng.random(n),
               "stack_id": rng.integers(0, 3000, n), "marker": np.full(n, -1),
               "weight_ns": np.full(n, 1_000_000)}
    tracemalloc.start()
    t0 = time.process_time()
    rows = time_rows(cells, samples, rollup.load_hash)
    held, peak = tracemalloc.get_traced_memory()
    count = {k: len(next(iter(v.values()))) for k, v in rows.items()}
    print(f"samples {n:,}; rows {count}; peak {peak >> 20} MiB, held {held >> 20} MiB, "
          f"CPU {time.process_time() - t0:.2f} s")


if __name__ == "__main__":
    main()
