"""Peak RSS of one compaction (`compact`, the collector's background compactor's work) of a
batch at the compactor's cap: 500 field uploads of 6,000 samples (bench_ingest's
`field_trace`, 10 ms apart) on 5 routes and 2 envs, one UTC day, all in one batch
(BATCH_SAMPLES, 3 M samples). The store is built once (--store DIR keeps it for the next
tree) and copied for each compaction, which runs in a fresh process: its ru_maxrss, CPU.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_compact_memory.py --store /tmp/cm
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_ingest import field_trace

UPLOADS = 500

CHILD = """
import sys, time, resource
from jsprof.store import Store
from jsprof.store.tables.compact import compact
import jsprof
st = Store(sys.argv[1])
t0 = time.process_time()
stats = compact(st)
st.close()
print(jsprof.__file__, stats, f"CPU {time.process_time() - t0:.2f} s")
"""


def build(path: Path) -> None:
    from jsprof.store import Store

    st = Store(path)
    at = time.time() * 1000.0
    for i in range(UPLOADS):
        st.append(f"u{i:04d}", {"app": "shop", "release": "1.0.0", "route": f"/r{i % 5}",
                                "env": "prod" if i % 2 else "dev", "sampleInterval": 10.0,
                                "receivedAt": at + i},
                  field_trace(i))
    st.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--store", type=Path, help="the built store (built when missing)")
    a = ap.parse_args()
    src = a.store or Path(tempfile.mkdtemp()) / "store"
    if not src.exists():
        t0 = time.monotonic()
        build(src)
        print(f"built {src}: {UPLOADS} uploads in {time.monotonic() - t0:.0f} s")
    with tempfile.TemporaryDirectory() as d:
        run = Path(d) / "store"
        shutil.copytree(src, run)
        t0 = time.monotonic()
        out = subprocess.run([sys.executable, "-c", CHILD, str(run)], env=os.environ,
                             capture_output=True, text=True, check=True).stdout.strip()
        rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss >> 10
    print(f"{out}; peak RSS {rss} MiB; wall {time.monotonic() - t0:.1f} s; "
          f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
