"""Memory of a collector under steady uploads with queries every minute (issue 34: "flat
RSS over a 30-minute soak with queries every minute").

Runs the documented production set-up, `jsprof serve --workers 2 --compact-every 5`, on
loopback: uploads at a steady rate (default 20/s, field traces of 6,000 samples, gzip) from
a client process, and every --query-every seconds a round of queries (top, flame, vitals,
regressions, /v1/status, /metrics), each asked on new connections several times so that both
workers answer some. Every process's RSS (the workers, the background compactor) is sampled
every few seconds.

Printed per process: RSS before the first query, after it (the baseline: a worker loads
DuckDB and pyarrow at its first query), at the quarters of the time after it and at the
end; the end's ratio to the baseline, and the slope (MiB/min, least squares) over the
second half of the run; then RSS per minute. Flat means a ratio near 1 and a slope near 0
however long it runs. The machine is shared: compare processes of one run, not runs.

    .venv/bin/python benchmarks/bench_rss_soak.py                       # 30 min
    .venv/bin/python benchmarks/bench_rss_soak.py --seconds 300 --query-every 30
"""

from __future__ import annotations

import argparse
import gzip
import http.client
import json
import multiprocessing as mp
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from _common import children
from bench_ingest import _is_compactor, collector_port, field_trace, post_trace, stop_collector

JSPROF = Path(sys.executable).parent / "jsprof"
TOKEN = "rss-soak-read-token"
QUERIES = (
    "/v1/query/top?app=soak&top=20",
    "/v1/query/flame?app=soak",
    "/v1/query/vitals?app=soak",
    "/v1/query/regressions?app=soak",
    "/v1/status",
    "/metrics",
)
ASKS = 3  # each query of a round on this many new connections: both workers answer some


def _rss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0


def _processes(root: int) -> dict[int, str]:
    """pid -> role ("worker", "compactor") of the collector's processes."""
    out = {}
    todo = list(children(root))
    while todo:
        p = todo.pop()
        out[p] = "compactor" if _is_compactor(p) else "worker"
        todo += children(p)
    return out


def _uploader(port: int, bodies: list[bytes], rate: float, threads: int, stop_at: float,
              out: mp.Queue) -> None:
    """Uploads at `rate` per second in all (thread k posts at start + (k + threads*n)/rate)."""
    start = time.time()
    counts = {"202": 0}
    lock = threading.Lock()

    def run(k: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        n = 0
        while True:
            at = start + (k + threads * n) / rate
            if at >= stop_at:
                break
            time.sleep(max(0.0, at - time.time()))
            uid = f"s{k}-{n}"
            try:
                status = str(post_trace(
                    conn, f"app=soak&key=k&release=1.0&route=/home&id={uid}",
                    bodies[(k + n) % len(bodies)]))
            except OSError as e:
                status = type(e).__name__
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            with lock:
                counts[status] = counts.get(status, 0) + 1
            n += 1
        conn.close()

    ts = [threading.Thread(target=run, args=(k,)) for k in range(threads)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    out.put(counts)


def _query_round(port: int) -> tuple[dict[str, int], list[float], dict[str, float], int | None,
                                      list[int]]:
    """Codes and times of a round's queries; the slowest time per query path; the
    compactor's backlog (uploads not compacted: the tail each query reads) at the first
    /v1/status; each query's pendingUploads (uploads its worker had not read yet: a query
    reads a bounded number of new ones, `TAIL_NEW_MAX`), where it says."""
    pending: list[int] = []
    codes: dict[str, int] = {}
    took = []
    slowest: dict[str, float] = {}
    backlog = None
    for _ in range(ASKS):
        for q in QUERIES:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
            t0 = time.perf_counter()
            try:
                conn.request("GET", q, headers={"Authorization": f"Bearer {TOKEN}"})
                r = conn.getresponse()
                body = r.read()
                code = str(r.status)
                if q == "/v1/status" and backlog is None and r.status == 200:
                    backlog = json.loads(body)["compactor"]["pending"]
                said = r.getheader("X-Jsprof-Pending-Uploads")
                if said is None and q.startswith("/v1/query/") and body[:1] == b"{":
                    said = json.loads(body).get("pendingUploads")
                if said is not None and r.status == 200:
                    pending.append(int(said))
            except OSError as e:
                code = type(e).__name__
            finally:
                conn.close()
            took.append(time.perf_counter() - t0)
            path = q.split("?")[0]
            slowest[path] = max(slowest.get(path, 0.0), took[-1])
            codes[code] = codes.get(code, 0) + 1
    return codes, took, slowest, backlog, pending


def _slope_mib_per_min(points: list[tuple[float, int]]) -> float:
    if len(points) < 2:
        return float("nan")
    xs = [t / 60 for t, _ in points]
    ys = [b / (1 << 20) for _, b in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=1800.0, help="soak length (default 1800)")
    ap.add_argument("--query-every", type=float, default=60.0, help="seconds (default 60)")
    ap.add_argument("--rate", type=float, default=20.0, help="uploads/s (default 20)")
    ap.add_argument("--sample-every", type=float, default=5.0, help="RSS sampling, seconds")
    args = ap.parse_args()
    bodies = [gzip.compress(field_trace(seed), 6) for seed in range(8)]
    tmp = Path(tempfile.mkdtemp(prefix="jsprof-rss-soak-"))
    cmd = [str(JSPROF), "serve", "--store", str(tmp / "store"), "--port", "0",
           "--app", "soak:k", "--workers", "2", "--compact-every", "5"]
    env = {**os.environ, "JSPROF_READ_TOKEN": TOKEN}
    print(f"rss soak: {args.seconds:.0f} s, {args.rate:g} uploads/s, queries every "
          f"{args.query_every:g} s ({len(QUERIES)} x {ASKS}); {os.cpu_count()} cores, load "
          f"{os.getloadavg()[0]:.1f}", flush=True)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    err: list[bytes] = []
    threading.Thread(target=lambda: err.extend(proc.stderr), daemon=True).start()
    rss: dict[int, list[tuple[float, int]]] = {}
    roles: dict[int, str] = {}
    rounds: list[tuple[float, float, dict[str, int], list[float], dict[str, float],
                       int | None, list[int]]] = []
    try:
        port = collector_port(proc, 2)
        ctx = mp.get_context("fork")
        q: mp.Queue = ctx.Queue()
        start = time.time()
        stop_at = start + args.seconds
        up = ctx.Process(target=_uploader,
                         args=(port, bodies, args.rate, max(4, int(args.rate)), stop_at, q))
        up.start()
        done = threading.Event()

        def querier() -> None:
            # Its own thread: a round slower than the period (a loaded machine) delays the
            # next one, never the RSS samples.
            next_query = start + args.query_every
            while not done.wait(max(0.0, next_query - time.time())):
                if time.time() >= stop_at:
                    return
                t0 = time.time()
                got = _query_round(port)
                rounds.append((t0 - start, time.time() - start, *got))
                next_query = max(next_query + args.query_every, time.time())

        qt = threading.Thread(target=querier, daemon=True)
        qt.start()
        while time.time() < stop_at:
            now = time.time()
            for p, role in _processes(proc.pid).items():
                roles.setdefault(p, role)
                rss.setdefault(p, []).append((now - start, _rss(p)))
            time.sleep(min(args.sample_every, max(0.0, stop_at - time.time())))
        done.set()
        qt.join()
        uploads = q.get(timeout=300)
        up.join()
        load = os.getloadavg()[0]
    finally:
        stop_collector(proc, 20)
        shutil.rmtree(tmp, ignore_errors=True)
    # The baseline: the first sample after the first round has ended.
    first_q = rounds[0][1] if rounds else 0.0
    print(f"uploads: {uploads} ({uploads.get('202', 0) / args.seconds:.1f}/s acknowledged); "
          f"load at the end {load:.1f}")
    print(f"query rounds: {len(rounds)}")
    for i, (t, end, codes, took, slowest, backlog, pending) in enumerate(rounds):
        worst = ", ".join(f"{p.rsplit('/', 1)[-1]} {v:.1f}" for p, v in slowest.items())
        print(f"  round {i + 1} from {t:.0f} s, {end - t:.0f} s: {codes}, median "
              f"{statistics.median(took):.2f} s, max {max(took):.2f} s (slowest: {worst}); "
              f"compactor backlog {backlog} uploads; pendingUploads "
              f"{min(pending, default=0)}-{max(pending, default=0)}")
    bad = 0
    for p in sorted(rss, key=lambda p: (roles[p], p)):
        pts = rss[p]
        before = [b for t, b in pts if t < (rounds[0][0] if rounds else 0.0)]
        after = [(t, b) for t, b in pts if t >= first_q]
        if not after:
            continue
        base = after[0][1]
        span = pts[-1][0] - first_q
        marks = [next((b for t, b in after if t >= first_q + f * span), after[-1][1])
                 for f in (0.25, 0.5, 0.75)]
        half = [(t, b) for t, b in after if t >= first_q + span / 2]
        mib = [f"{b / (1 << 20):.0f}" for b in (before[-1] if before else 0, base, *marks,
                                                after[-1][1])]
        print(f"{roles[p]} {p}: RSS MiB before the first query / after it / 25% / 50% / 75% / "
              f"end: {' / '.join(mib)}; peak {max(b for _, b in pts) / (1 << 20):.0f}; "
              f"end / after the first query {after[-1][1] / base:.2f}; second half "
              f"{_slope_mib_per_min(half):+.2f} MiB/min")
    # RSS per minute (the last sample of each minute), per process
    minutes = int(max((t for pts in rss.values() for t, _ in pts), default=0.0) // 60) + 1
    print("RSS MiB per minute: " + ", ".join(f"{roles[p]} {p}" for p in sorted(
        rss, key=lambda p: (roles[p], p))))
    for m in range(minutes):
        row = []
        for p in sorted(rss, key=lambda p: (roles[p], p)):
            got = [b for t, b in rss[p] if m * 60 <= t < (m + 1) * 60]
            row.append(f"{got[-1] / (1 << 20):.0f}" if got else "-")
        print(f"  minute {m + 1}: {' / '.join(row)}")
    print(f"collector stderr: {len(err)} lines, {sum(b'Traceback' in x for x in err)} "
          "tracebacks")
    seen: dict[bytes, None] = {}
    for line in err:
        seen.setdefault(line.rstrip()[:300], None)
    for line in list(seen)[:40]:  # what went wrong, each once (a traceback whole)
        print(f"  stderr: {line.decode(errors='replace')}")
    bad += sum(n for c, n in uploads.items() if c != "202")
    bad += sum(n for r in rounds for c, n in r[2].items() if c != "200")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
