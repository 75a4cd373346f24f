"""Where a merged flame query's time goes, against `top`'s, on a store built as the soak's
collector builds it (issue 34: the flame page was the slowest query of a soak round).

The store: --uploads of bench_ingest's field traces (8 seeds, 6,000 samples, app `soak`),
compacted every --compact-every uploads (the soak's `--compact-every 5` at 10 uploads/s
makes parts of ~50), the last --tail left uncompacted (a collector's tail). Then, in one
process and as a collector worker asks (a kept tail, read once before): `top`, the flame
page (HTML: with its Time view, as `fleet flame -o` writes it), the dashboard's flame page
(its Time view read when the tab opens: `time_view=fetch`), that read (`flame_time`, the
Time tab's own query) and the flame SVG (no Time view), --runs each, process CPU time
(DuckDB's threads included) and wall; the HTML page's Time view once more per
`TIME_UPLOADS` value of --caps (what it reads grows with it); --profile: cProfile of one
HTML page, and each of the Time view's sample scans timed.

    .venv/bin/python benchmarks/bench_flame_query.py [--store DIR] [--profile]
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gzip
import pstats
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench_ingest import field_trace
from jsprof.fleet import api, timecourse
from jsprof.fleet import engine as fleet_engine
from jsprof.fleet.filters import Filters
from jsprof.store import Store
from jsprof.store.tables import parts as table_parts
from jsprof.store.tables.compact import compact
from jsprof.store.tables.merge import merge_parts


def build(path: Path, uploads: int, every: int, tail: int) -> None:
    bodies = [field_trace(seed) for seed in range(8)]
    gz = [gzip.compress(b, 6) for b in bodies]
    st = Store(path)
    t0 = time.perf_counter()
    for i in range(uploads):
        if i and i % every == 0 and i <= uploads - tail:
            compact(st)
        st.append(f"u{i}", {"app": "soak", "receivedAt": time.time() * 1000.0},
                  bodies[i % 8], gzipped=gz[i % 8])
    st.close()
    print(f"store: {uploads} uploads, compacted every {every}, {tail} left in the tail: "
          f"{time.perf_counter() - t0:.0f} s", flush=True)


def cpu(fn: Callable[[], Any]) -> tuple[float, float]:
    c0, w0 = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - c0, time.perf_counter() - w0


@contextlib.contextmanager
def scans_timed() -> Iterator[list[tuple[float, str]]]:
    """Each query of the Time view's sample scans: (CPU s, its SQL's start)."""
    got: list[tuple[float, str]] = []
    orig = fleet_engine.DuckEngine.sample_scan

    @contextlib.contextmanager
    def wrapped(self: Any, snap: Any, up: Any, **cols: Any) -> Iterator[Any]:
        with orig(self, snap, up, **cols) as run:
            def timed(sql: str, *p: Any) -> Any:
                c0 = time.process_time()
                out = run(sql, *p)
                got.append((time.process_time() - c0, " ".join(sql.split())[:50]))
                return out

            yield None if run is None else timed

    fleet_engine.DuckEngine.sample_scan = wrapped  # type: ignore[method-assign]
    try:
        yield got
    finally:
        fleet_engine.DuckEngine.sample_scan = orig  # type: ignore[method-assign]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", type=Path, help="a store this script built before (reused)")
    ap.add_argument("--uploads", type=int, default=3000)
    ap.add_argument("--compact-every", type=int, default=50)
    ap.add_argument("--tail", type=int, default=100)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--caps", default="500,100", help="TIME_UPLOADS values to time")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--merge", action="store_true",
                    help="merge the store's parts first, as a collector's compactor does")
    args = ap.parse_args()
    path = args.store or Path(tempfile.mkdtemp(prefix="jsprof-flameq-")) / "store"
    if not (path / "segments").is_dir():
        build(path, args.uploads, args.compact_every, args.tail)
    if args.merge:
        while merge_parts(path, grace=0).merged:
            pass
    crcs = [0]  # part files checksummed (parts.verify_part: once per process and file)
    real_crc = table_parts._crc32

    def counted_crc(p: Path) -> tuple[int, int]:
        crcs[0] += 1
        return real_crc(p)

    table_parts._crc32 = counted_crc  # type: ignore[assignment]
    st = Store(path)
    f = Filters(app="soak")
    asks = {
        "top": lambda s: api.top(s, f, 20),
        "flame html": lambda s: api.flame(s, f, "html", 2000,
                                          example_url="/v1/traces/{id}/flame"),
        "flame html dashboard": lambda s: api.flame(
            s, f, "html", 2000, example_url="/v1/traces/{id}/flame",
            time_url="/v1/query/flame_time?app=soak"),
        "time tab": lambda s: api.flame_time(s, f, example_url="/v1/traces/{id}/flame"),
        # the tab opened after 10 uploads arrived: pinned below them, so the rollups (which
        # sum them too) step aside and the Time view reads its spread's samples
        "time tab pinned": lambda s: api.flame_time(
            s, f, example_url="/v1/traces/{id}/flame", pin=api.data_pin(s) - 10),
        "flame svg": lambda s: api.flame(s, f, "svg", 2000),
    }
    if not hasattr(api, "flame_time"):  # (a src before the dashboard's page read it later)
        del asks["flame html dashboard"], asks["time tab"]
    if not hasattr(api, "data_pin"):  # (a src before the tab was pinned to the graph's)
        del asks["time tab pinned"]
    with api.session(st, keep_tail=True) as s:  # the tail read once, as a worker has it
        c, w = cpu(lambda s=s: api.top(s, f, 20))
    print(f"first top of the process: {c:.2f} s CPU, {crcs[0]} parts checksummed", flush=True)
    crcs[0] = 0
    with api.session(st, keep_tail=True) as s:
        c, w = cpu(lambda s=s: asks["flame html"](s))
    print(f"first flame html of the process: {c:.2f} s CPU, {crcs[0]} parts checksummed",
          flush=True)
    cpus: dict[str, list[float]] = {name: [] for name in asks}
    for r in range(args.runs):  # the asks alternated, so the machine's load falls on each
        for name, ask in asks.items():
            crcs[0] = 0
            with api.session(st, keep_tail=True) as s:
                c, w = cpu(lambda s=s, ask=ask: ask(s))
            cpus[name].append(c)
            print(f"{name} run {r}: {c:.3f} s CPU, {w:.2f} s wall, {crcs[0]} parts "
                  "checksummed", flush=True)
    med = {name: sorted(v)[len(v) // 2] for name, v in cpus.items()}
    print("median CPU: " + ", ".join(
        f"{name} {v:.3f} s ({v / med['top']:.2f}x top)" for name, v in med.items()), flush=True)
    default = timecourse.TIME_UPLOADS
    for cap in [int(x) for x in args.caps.split(",") if x]:
        timecourse.TIME_UPLOADS = cap
        with api.session(st, keep_tail=True) as s, scans_timed() as scans:
            c, w = cpu(lambda s=s: asks["flame html"](s))
        each = ", ".join(f"{t:.2f} ({sql})" for t, sql in scans)
        print(f"TIME_UPLOADS {cap}: flame html {c:.2f} s CPU, {w:.2f} s wall; the Time "
              f"view's sample scans: {each}", flush=True)
    timecourse.TIME_UPLOADS = default
    if args.profile:
        with api.session(st, keep_tail=True) as s:
            pr = cProfile.Profile()
            pr.enable()
            asks["flame html"](s)
            pr.disable()
        pstats.Stats(pr).sort_stats("cumulative").print_stats(30)
    st.close()
    if args.store is None:  # built here: not kept
        shutil.rmtree(path.parent, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
