"""Is our pre-fork supervisor (`jsprof serve --workers N`, serve/server.py) needed, or would
uvicorn's own (`uvicorn --workers N`, uvicorn.supervisors.Multiprocess) do? Issue 37:
"measure before keeping what a library does".

    .venv/bin/python benchmarks/bench_supervisor.py [--workers 2] [--seconds 8] [--rounds 3]

Two collectors with the same app, store, uvicorn settings and worker count, in turns
(order rotated each round), each on a fresh store on loopback:
  ours     `jsprof serve --workers N`: the parent forks N workers after its imports
  uvicorn  benchmarks/_uvicorn_collector.py: the same parent work, then uvicorn's
           Multiprocess, which spawns N workers that import and build the app anew
Per round and collector: the time from starting it to its first acknowledged upload
(every worker up: the probe repeats until N distinct workers answered), the ingest rate
and ack latency (p50/p99) of 16 clients in two client processes posting the field trace
of benchmarks/bench_ingest.py for --seconds, the serving processes' CPU per upload (the
background compactor apart), their memory (the sum of PSS: shared pages counted once),
and the stop: SIGTERM to the parent while uploads are in flight, its exit status and how
long it took. Printed: each figure's median per collector and the ratio uvicorn / ours.
Last, once per collector: the parent killed (SIGKILL, as the OOM killer or a crash does):
how many of its processes still run 3 s later (orphans serving on, unsupervised).
"""

from __future__ import annotations

import argparse
import gzip
import http.client
import multiprocessing as mp
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from _common import children, rotated
from bench_ingest import (
    CLIENT_PROCS,
    CLIENTS,
    JSPROF,
    _client_proc,
    _is_compactor,
    _proc_cpu,
    field_trace,
    latency_ms,
    post_trace,
)

HERE = Path(__file__).resolve().parent


def command(kind: str, store: Path, workers: int) -> list[str]:
    args = ["--store", str(store), "--port", "0", "--app", "bench:k", "--read-token", "x",
            "--workers", str(workers)]
    if kind == "ours":
        return [str(JSPROF), "serve", *args]
    return [sys.executable, str(HERE / "_uvicorn_collector.py"), *args]


def serving(pid: int) -> list[int]:
    """The collector's processes that serve (the parent and its workers), not the compactor
    (uvicorn's spawn start method adds a resource tracker process: counted, it is theirs)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        if not _is_compactor(p):
            out.append(p)
            todo += children(p)
    return out


def pss_mib(pids: list[int]) -> float:
    total = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/smaps_rollup") as f:
                total += next(int(x.split()[1]) for x in f if x.startswith("Pss:"))
        except (OSError, StopIteration):
            pass
    return total / 1024


def ready(proc: subprocess.Popen, body: bytes, workers: int, t0: float) -> tuple[int, float]:
    """The port, and the seconds from start until uploads were acknowledged by `workers`
    distinct worker processes (each new connection may land on any)."""
    port = int(proc.stdout.readline().decode().rsplit(":", 1)[1])
    seen: set[int] = set()
    i = 0
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            status = post_trace(conn, f"app=bench&key=k&id=probe-{i}", body)
            conn.close()
        except OSError:
            status = 0
        i += 1
        if status == 202:
            # which worker answered: the one whose CPU time moved is not observable cheaply;
            # count workers alive and serving instead (all have started once each answered)
            seen = {p for p in serving(proc.pid) if p != proc.pid}
            if len(seen) >= workers and i >= 4 * workers:
                return port, time.perf_counter() - t0
        time.sleep(0.02)
    raise SystemExit("the collector did not start")


def one_round(kind: str, bodies: list[bytes], workers: int, seconds: float) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix=f"jsprof-bench-sup-{kind}-"))
    t0 = time.perf_counter()
    proc = subprocess.Popen(command(kind, tmp / "store", workers), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, cwd=HERE)
    try:
        port, up_s = ready(proc, bodies[0], workers, t0)
        ctx = mp.get_context("fork")
        q: mp.Queue = ctx.Queue()
        start_at = time.time() + 0.5
        stop_at = start_at + seconds
        cpu0, _ = _proc_cpu(proc.pid)
        procs = [ctx.Process(target=_client_proc, args=(
            "127.0.0.1", port, bodies, CLIENTS // CLIENT_PROCS, f"{kind}{i}", start_at,
            stop_at, q)) for i in range(CLIENT_PROCS)]
        [p.start() for p in procs]
        results = [q.get() for _ in procs]
        [p.join() for p in procs]
        cpu1, _ = _proc_cpu(proc.pid)
        mem = pss_mib(serving(proc.pid))
        lat = sorted(x for r, _, _ in results for x in r)
        p50, p99 = latency_ms(lat)
        # the stop, with uploads in flight
        stop = threading.Event()
        acked_after = [0, 0]

        def keep_posting(k: int) -> None:
            n = 0
            while not stop.is_set():
                try:
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                    s = post_trace(conn, f"app=bench&key=k&id=stop-{k}-{n}", bodies[n % 8])
                    conn.close()
                except OSError:
                    return
                n += 1
                acked_after[0 if s == 202 else 1] += 1

        posters = [threading.Thread(target=keep_posting, args=(k,)) for k in range(4)]
        [t.start() for t in posters]
        time.sleep(0.5)
        s0 = time.perf_counter()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
        stop_s = time.perf_counter() - s0
        stop.set()
        [t.join() for t in posters]
        return {
            "up_s": up_s, "rate": len(lat) / seconds, "p50_ms": p50, "p99_ms": p99,
            "errors": sum(e for _, e, _ in results),
            "cpu_ms_per_upload": 1000 * (cpu1 - cpu0) / max(1, len(lat)),
            "pss_mib": mem, "stop_s": stop_s, "exit": code,
        }
    finally:
        if proc.poll() is None:
            for p in serving(proc.pid):
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def orphans(kind: str, body: bytes, workers: int) -> tuple[int, int]:
    """(processes left running 3 s after the parent's SIGKILL, processes it had)."""
    tmp = Path(tempfile.mkdtemp(prefix=f"jsprof-bench-sup-{kind}-"))
    proc = subprocess.Popen(command(kind, tmp / "store", workers), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, cwd=HERE)
    try:
        ready(proc, body, workers, time.perf_counter())
        kids = [p for p in serving(proc.pid) if p != proc.pid]
        proc.kill()
        proc.wait()
        time.sleep(3)
        alive = []
        for p in kids:
            try:
                with open(f"/proc/{p}/stat") as f:
                    if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                        alive.append(p)
            except OSError:
                pass
        for p in alive:
            os.kill(p, signal.SIGKILL)
        return len(alive), len(kids)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    bodies = [gzip.compress(field_trace(seed), 6) for seed in range(8)]
    rows: dict[str, list[dict]] = {"ours": [], "uvicorn": []}
    for r in range(a.rounds):
        for kind in rotated(list(rows), r):
            got = one_round(kind, bodies, a.workers, a.seconds)
            rows[kind].append(got)
            print(f"round {r + 1} {kind}: " + ", ".join(
                f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in got.items()),
                flush=True)
    print(f"\n--workers {a.workers}, {CLIENTS} clients, {a.seconds:.0f} s each, "
          f"{a.rounds} rounds, load {os.getloadavg()[0]:.1f}; medians, and uvicorn / ours:")
    for key in ("up_s", "rate", "p50_ms", "p99_ms", "cpu_ms_per_upload", "pss_mib", "stop_s"):
        o = statistics.median(x[key] for x in rows["ours"])
        u = statistics.median(x[key] for x in rows["uvicorn"])
        print(f"  {key:>18}: ours {o:9.3g}  uvicorn {u:9.3g}  ratio {u / o:.2f}x")
    print("  exit statuses on SIGTERM: ours "
          f"{sorted({x['exit'] for x in rows['ours']})}, uvicorn "
          f"{sorted({x['exit'] for x in rows['uvicorn']})}; upload errors: ours "
          f"{sum(x['errors'] for x in rows['ours'])}, uvicorn "
          f"{sum(x['errors'] for x in rows['uvicorn'])}")
    for kind in rows:
        left, had = orphans(kind, bodies[0], a.workers)
        print(f"  {kind}: {left} of its {had} processes still running 3 s after the parent's "
              "SIGKILL")
    return 0


if __name__ == "__main__":
    sys.exit(main())
