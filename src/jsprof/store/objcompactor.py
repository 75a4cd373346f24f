"""The compactor process of a store on an object store (`python -m jsprof.store.objcompactor
URL`, started by `objstore.CompactorProcess`): compaction runs (`objstore`) and the
retention cut (`objprune`) under the bucket's lease, and its run report. A module of its
own so that objstore, which objprune builds on, does not import objprune back."""

from __future__ import annotations

import os
import time

from .objects import open_objects
from .objprune import Pruner
from .objstore import BucketUse, Lease, ObjectCompactor, RunReport, mirror_dir


def main(argv: list[str] | None = None) -> int:
    """`python -m jsprof.store.objcompactor URL`: the compactor of a store on an object store.
    Started by each `jsprof serve --store s3://...` (its first worker); the lease decides
    which one of them, on any machine, compacts. Runs every `--interval` seconds while it
    holds the lease, tries to take it as often while another holds it."""
    import argparse
    import sys

    from .background import Reporter, become_background

    p = argparse.ArgumentParser(prog="python -m jsprof.store.objcompactor")
    p.add_argument("store")
    p.add_argument("--interval", type=float, default=5.0)
    p.add_argument("--parent", type=int, default=0)
    p.add_argument("--once", action="store_true", help="one run (when the lease is free)")
    p.add_argument("--keep-raw", default="forever",
                   help="seconds a compacted segment object stays (forever: never deleted)")
    p.add_argument("--retention", type=float, default=0.0,
                   help="seconds an upload is kept (0: forever); cut hourly")
    args = p.parse_args(argv)
    become_background(args.parent)
    import fcntl

    objects = open_objects(args.store)
    lease = Lease(objects)
    root = mirror_dir(objects.url, "compactor")
    root.mkdir(parents=True, exist_ok=True)
    # One compactor per mirror: a second collector on this machine waits here, so two
    # never write one mirror (they would still never both commit: the lease, If-Match).
    lock = os.open(root / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if args.once or (args.parent and os.getppid() != args.parent):
                return 1 if args.once else 0
            time.sleep(args.interval)
    keep_raw = None if args.keep_raw == "forever" else float(args.keep_raw)
    comp = ObjectCompactor(objects, root, keep_raw=keep_raw)
    pruner = Pruner(comp, args.retention or None)
    said = Reporter()
    report = RunReport(objects)
    use = BucketUse(objects)
    failures = 0
    while not (args.parent and os.getppid() != args.parent):
        error = None
        held = False
        walked = None
        try:
            if lease.acquire():
                held = True
                stats = comp.run(lease.acquire)
                if stats.uploads:
                    print(f"jsprof serve: compacted {stats.uploads} uploads into "
                          f"{objects.url}", file=sys.stderr, flush=True)
                cut = pruner.run(lease.acquire)
                if cut is not None and (cut.removed or cut.tables_removed):
                    print(f"jsprof serve: pruned {cut.tables_removed} uploads from the "
                          f"tables and {cut.removed} raw records of {objects.url}",
                          file=sys.stderr, flush=True)
        except Exception as e:  # noqa: BLE001 - the loop must outlive one bad run
            error = f"{e}" or type(e).__name__
        failures = failures + 1 if error else 0
        said.run({"consecutiveFailures": failures}, error)
        if held:  # the holder's runs: what `serve check`, /metrics and /v1/status say
            try:  # the folders' figures for /metrics and /v1/status, a step a run (read only)
                walked = use.walk()
            except Exception:  # noqa: BLE001, S110 - the bucket not answering: the run's
                pass  # own error says so, or the next step will
            try:
                report.record(error, use=walked)
            except Exception:  # noqa: BLE001, S110 - a report that cannot be written: the
                pass  # run's own error (if any) is on stderr; the next run tries again
        if args.once:
            lease.release()
            return 1 if error else 0
        time.sleep(args.interval)
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
