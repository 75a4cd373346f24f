"""What merging costs a `jsprof fleet` query on a store that only fleet compacts (a
collector run with `--compact-every 0`), and what it saves.

Rounds of: `--per-round` new uploads stored, then one query in a fresh process (as the CLI
runs), which compacts, merges (`merge_parts` with the query's budget,
`api.QUERY_MERGE_BYTES`) and answers `top`. Each of the three steps is timed; the same
rounds run on a copy whose queries do not merge ("plain"). Prints per-round medians and
the last round's part counts and query times.

    .venv/bin/python benchmarks/bench_fleet_merge.py [--rounds 40] [--per-round 10]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

_QUERY = r"""
import json, sys, time
from jsprof.fleet import api
from jsprof.fleet.filters import Filters
from jsprof.store import Store
from jsprof.store.tables.compact import compact
from jsprof.store.tables.manifest import read_manifest
from jsprof.store.tables.merge import merge_parts
st = Store(sys.argv[1])
t0 = time.perf_counter()
compact(st)
t1 = time.perf_counter()
if sys.argv[2] == "merge":
    merge_parts(st.path, wait=False, budget=64 << 20)
t2 = time.perf_counter()
with api.session(st, tail_limit=0) as s:
    api.top(s, Filters(app="shop"), 20)
t3 = time.perf_counter()
man = read_manifest(st.path)
parts = len(man["uploads"]) + sum(
    len(v) for r in man["releases"].values() for v in r["parts"].values())
print(json.dumps({"compact": t1 - t0, "merge": t2 - t1, "query": t3 - t2, "parts": parts}))
"""


def main() -> None:
    import numpy as np

    from fleet_util import make_trace, upload
    from jsprof.store import Store

    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--per-round", type=int, default=10)
    ap.add_argument("--samples", type=int, default=3000)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-fleet-merge-"))
    stores = {"merge": Store(tmp / "merge"), "plain": Store(tmp / "plain")}
    rng = np.random.default_rng(1)
    at = 1.7e12
    rows: dict[str, list[dict]] = {k: [] for k in stores}
    k = 0
    for _ in range(args.rounds):
        for _ in range(args.per_round):
            tr = make_trace(rng, args.samples, hot=f"f{k % 37}", hot_share=0.1)
            rel = ("1.0", "1.1")[k % 2]
            for st in stores.values():
                upload(st, f"u{k}", tr, app="shop", release=rel, receivedAt=at + k * 1e3)
            k += 1
        for name, st in stores.items():
            st.rotate()  # what the collector has stored so far: readable by the query
            out = subprocess.run([sys.executable, "-c", _QUERY, str(st.path), name],
                                 capture_output=True, text=True, check=True)
            rows[name].append(json.loads(out.stdout))
    for name, rs in rows.items():
        med = {c: statistics.median(r[c] for r in rs) for c in ("compact", "merge", "query")}
        worst = max(r["merge"] for r in rs)
        print(f"{name}: median compact {med['compact']:.3f} s, merge {med['merge']:.3f} s "
              f"(worst {worst:.3f} s), query {med['query']:.3f} s; last round: "
              f"{rs[-1]['parts']} parts, query {rs[-1]['query']:.3f} s")
    for st in stores.values():
        st.close()


if __name__ == "__main__":
    main()
