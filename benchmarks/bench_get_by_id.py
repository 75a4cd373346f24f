"""`GET /v1/traces/{id}` on a store on object storage (objstore.find_upload): what a lookup
of an id the store never held reads, against a compacted one, on a store of D days of
uploads (one uploads part a day after the compactor's merges, or several).

Built with this jsprof's compactor on the local-directory implementation of the object
store interface (the same code as on S3, without an emulator's round trips), so the store
is written as the `src` on PYTHONPATH writes it: run once with main's `src` and once with
a branch's to compare (each builds its own store). Reported: the id column reads of a
lookup (counted), its CPU and wall time (median of --lookups), and the uploads parts'
bytes per upload.

    cd benchmarks && PYTHONPATH=../src ../.venv/bin/python bench_get_by_id.py \\
        [--days 30] [--per-day 200] [--batch 50] [--lookups 20]
"""

from __future__ import annotations

import argparse
import math
import os
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
TRACE = (ROOT / "tests" / "data" / "chromium" / "trace-basic.json").read_bytes()


def segment(objects: object, at_ms: int, records: list[tuple[str, dict]]) -> None:
    from jsprof.store import segment as seg

    parts: list[bytes] = []
    lo, hi = seg.NO_RANGE
    for i, (uid, meta) in enumerate(records):
        at = meta["receivedAt"]
        parts += seg.make_record(uid, orjson.dumps(meta), TRACE, at, None).parts(i)
        lo, hi = min(lo, at), max(hi, at)
    parts.append(seg.encode_trailer(len(records), (lo, hi)))
    key = (f"segments/t{at_ms:013d}-benchhost-1-abcdef-{at_ms % 1000000:06d}-"
           f"t{math.floor(lo)}-{math.ceil(hi)}-{len(records)}.seg")
    assert objects.put_new(key, b"".join(parts))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--per-day", type=int, default=200)
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--lookups", type=int, default=20)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-get-"))
    os.environ["XDG_CACHE_HOME"] = str(tmp / "cache")
    import pyarrow.parquet as pq

    from jsprof.store.objects import LocalObjects
    from jsprof.store.objstore import MANIFEST_KEY, ObjectCompactor, ObjectSegmentStore

    objects = LocalObjects(tmp / "objects")
    comp = ObjectCompactor(objects, tmp / "compactor", batch=args.batch)
    now = int(time.time() * 1000) - 3600_000
    ids: list[str] = []
    t0 = time.perf_counter()
    for d in range(args.days):
        day0 = now - (args.days - d) * 86400_000
        for b in range(0, args.per_day, args.batch):
            recs = []
            for k in range(b, min(args.per_day, b + args.batch)):
                uid = secrets.token_hex(12)
                ids.append(uid)
                recs.append((uid, {"app": "shop", "release": "r1", "sampleInterval": 10.0,
                                   "receivedAt": day0 + k * 1000.0}))
            segment(objects, day0 + b * 1000 + 60_000, recs)
            comp.run()
    built = time.perf_counter() - t0
    man = orjson.loads(objects.get(MANIFEST_KEY)[0])
    parts = man["uploads"]
    ubytes = sum(e["bytes"] for e in parts)
    print(f"store: {len(ids)} uploads, {len(parts)} uploads parts, "
          f"{ubytes / len(ids):.1f} uploads-part bytes an upload; built in {built:.1f} s")

    reads = [0]
    real = pq.read_table

    def counted(source: object, *a: object, columns: list | None = None, **kw: object) -> object:
        if columns is not None and "id" in columns:
            reads[0] += 1
        return real(source, *a, columns=columns, **kw)

    pq.read_table = counted
    st = ObjectSegmentStore(objects.url, objects)
    st.get("warm-up")
    for label, pick in (("unknown id", lambda i: f"never-{i}"),
                        ("compacted id", lambda i: ids[(i * 7919) % len(ids)])):
        cpu, wall, n = [], [], []
        for i in range(args.lookups):
            reads[0] = 0
            c0, w0 = time.process_time(), time.perf_counter()
            got = st.get(pick(i))
            cpu.append(time.process_time() - c0)
            wall.append(time.perf_counter() - w0)
            n.append(reads[0])
            assert (got is None) == (label == "unknown id")
        print(f"{label}: id column reads {min(n)}-{max(n)} a lookup; CPU "
              f"{statistics.median(cpu) * 1e3:.1f} ms, wall {statistics.median(wall) * 1e3:.1f}"
              f" ms (medians of {args.lookups})")
    sys.stdout.flush()
    shutil.rmtree(tmp, ignore_errors=True)  # the store built here is not kept


if __name__ == "__main__":
    main()
