"""Ingest rate of `jsprof serve`: uploads/s and latency of a typical field trace.

A field trace here is what the browser client sends for one 60 s chunk at 10 ms: ~6,000
samples over a realistic stack tree (a few hundred frames, ~1,500 stacks, a third of the
samples idle), gzip-compressed as CompressionStream does. 16 concurrent clients on loopback
(in two client processes, so the clients' own CPU is measured apart from the collector's)
post distinct ids for a fixed time.

Baseline, in the same run: the rate at which one core can just `gunzip` + `orjson.loads` the
same bodies. Goal: one collector process sustains >= 0.5x that rate.

    .venv/bin/python benchmarks/bench_ingest.py [--seconds 10] [--workers 1 2] [--envelope]
"""

from __future__ import annotations

import argparse
import gzip
import http.client
import multiprocessing as mp
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path

import orjson

from _common import CLOCK_TICK, children, proc_stat

CLIENTS = 16
CLIENT_PROCS = 2
JSPROF = Path(sys.executable).parent / "jsprof"


def field_trace(seed: int, n_samples: int = 6000, interval: float = 10.0) -> bytes:
    rng = random.Random(seed)
    resources = [
        "https://shop.example/static/js/main.3f9a1c.js",
        "https://shop.example/static/js/vendor.77b0e2.js",
        "https://shop.example/static/js/checkout.a1d4f0.js",
        "https://cdn.example/analytics/v3/loader.js",
    ]
    frames = []
    for i in range(320):
        f = {
            "name": f"fn{i}_{rng.choice(['render', 'update', 'map', 'get', 'on'])}",
            "resourceId": rng.randrange(len(resources)),
            "line": rng.randrange(1, 40000),
            "column": rng.randrange(1, 200),
        }
        if i % 17 == 0:
            f = {"name": ""}
        frames.append(f)
    stacks: list[dict] = []
    depth = [0]
    for i in range(1500):
        if i == 0 or rng.random() < 0.05:
            stacks.append({"frameId": rng.randrange(len(frames))})
            depth.append(1)
        else:
            p = rng.randrange(max(0, i - 200), i)
            stacks.append({"parentId": p, "frameId": rng.randrange(len(frames))})
            depth.append(depth[p + 1] + 1)
    t = 1000.0 * rng.random() + 250.0
    samples = []
    for _ in range(n_samples):
        t += interval + rng.random() * 0.4
        # Timestamps as performance.now() gives them: binary fractions of a ms.
        ts = round(t * 10) / 10 + 0.00000000001 * rng.randrange(3)
        if rng.random() < 0.33:
            samples.append({"timestamp": ts})
        else:
            samples.append({"stackId": rng.randrange(len(stacks)), "timestamp": ts})
    doc = {"frames": frames, "resources": resources, "samples": samples, "stacks": stacks}
    return orjson.dumps(doc)


def envelope(trace_json: bytes) -> bytes:
    """The body jsprof-client.js posts: `JSON.stringify({trace, meta})`."""
    meta = {"sampleInterval": 10, "timeOrigin": 1764547200000.25, "userAgent": "Mozilla/5.0"}
    return b'{"trace":' + trace_json + b',"meta":' + orjson.dumps(meta) + b"}"


def baseline(bodies: list[bytes], seconds: float) -> tuple[float, float]:
    """Bodies one core can gunzip and parse (no validation, no storage): per wall second
    and per CPU second of this process (the machine is shared: CPU time is the fair unit)."""
    n = 0
    t0 = time.perf_counter()
    c0 = time.process_time()
    while time.perf_counter() - t0 < seconds:
        for b in bodies:
            orjson.loads(zlib.decompress(b, 31))
            n += 1
    return n / (time.perf_counter() - t0), n / (time.process_time() - c0)


def stages(raw: list[bytes], bodies: list[bytes]) -> dict[str, float]:
    """CPU ms per upload of each step of the collector's path, in this process."""
    from jsprof.formats import jsprof as tracefile
    from jsprof.serve import ingest
    from jsprof.serve.config import Limits
    from jsprof.store import Store

    limits = Limits()
    params = {"app": "bench", "release": "1.0", "route": "/home", "env": None}
    enveloped = [gzip.compress(envelope(r), 6) for r in raw]
    tmp = Path(tempfile.mkdtemp(prefix="jsprof-bench-stages-"))
    store = Store(tmp / "store")
    n = [0]

    def append(i: int) -> None:
        n[0] += 1
        store.append(f"s{n[0]}", {"app": "bench"}, None, gzipped=bodies[i])

    steps = {
        "gunzip": lambda i: zlib.decompress(bodies[i], 31),
        "orjson.loads": lambda i: orjson.loads(raw[i]),
        "jsprof's reader on dicts (loads + recording_from_doc)": lambda i: ingest.check_trace(
            orjson.loads(raw[i]), "b", limits, False
        ),
        "jsprof's typed reader from bytes (tracefile.read_bytes)": lambda i: tracefile.read_bytes(
            raw[i], "b"
        ),
        "ingest.prepare (gunzip, checks, typed reader, meta)": lambda i: ingest.prepare(
            bodies[i], "gzip", params, "UA", limits, False
        ),
        "ingest.prepare, the browser client's envelope {trace, meta}": lambda i: ingest.prepare(
            enveloped[i], "gzip", params, "UA", limits, False
        ),
        "store.append (one fsync each)": append,
    }
    out = {}
    for name, fn in steps.items():
        for i in range(len(raw)):
            fn(i)
        c0 = time.process_time()
        k = 0
        while time.process_time() - c0 < 1.0:
            fn(k % len(raw))
            k += 1
        out[name] = 1000 * (time.process_time() - c0) / k
    store.close()
    shutil.rmtree(tmp, ignore_errors=True)
    return out


def _client_proc(
    host: str,
    port: int,
    bodies: list[bytes],
    threads: int,
    tag: str,
    start_at: float,
    stop_at: float,
    out: mp.Queue,
) -> None:
    lat: list[float] = []
    errors = [0]
    lock = threading.Lock()

    def run(k: int) -> None:
        conn = http.client.HTTPConnection(host, port, timeout=60)
        mine: list[float] = []
        n = 0
        while time.time() < start_at:
            time.sleep(0.001)
        while time.time() < stop_at:
            body = bodies[(k + n) % len(bodies)]
            uid = f"{tag}-{k}-{n}"
            n += 1
            t0 = time.perf_counter()
            status = post_trace(conn, f"app=bench&key=k&release=1.0&route=/home&id={uid}", body)
            if status != 202:
                with lock:
                    errors[0] += 1
                continue
            mine.append(time.perf_counter() - t0)
        conn.close()
        with lock:
            lat.extend(mine)

    c0 = os.times()
    ts = [threading.Thread(target=run, args=(k,)) for k in range(threads)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    c1 = os.times()
    out.put((lat, errors[0], (c1.user - c0.user) + (c1.system - c0.system)))


def _is_compactor(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"jsprof.store.background" in f.read()
    except OSError:
        return False


def _proc_cpu(pid: int) -> tuple[float, float]:
    """CPU seconds (user+sys) of a collector's serving processes (the process, its workers
    and children they waited for), and apart, of its background compactor process (a
    child of whichever worker holds the store's lease: building the query tables is not
    ingest, and it runs at a lower priority, on whatever core is idle)."""

    def one(p: int) -> float:
        fields = proc_stat(p)
        return 0.0 if fields is None else (int(fields[11]) + int(fields[12])) / CLOCK_TICK

    serve = compactor = 0.0
    todo = [pid]
    while todo:
        p = todo.pop()
        if _is_compactor(p):
            compactor += one(p)
        else:
            serve += one(p)
        todo += children(p)
    return serve, compactor


def collector_port(proc: subprocess.Popen, workers: int) -> int:
    """The port `jsprof serve --port 0` printed, once its workers have started."""
    port = int(proc.stdout.readline().decode().rsplit(":", 1)[1])
    time.sleep(1.5 if workers > 1 else 0.5)  # workers import and start
    return port


def post_trace(conn: http.client.HTTPConnection, query: str, body: bytes) -> int:
    """POST one gzipped trace to /v1/traces?`query`; the answer's status, its body read so
    the keep-alive connection can carry the next upload."""
    conn.request(
        "POST",
        f"/v1/traces?{query}",
        body=body,
        headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
    )
    r = conn.getresponse()
    r.read()
    return r.status


def warm_up(port: int, body: bytes, app: str) -> None:
    """Ten uploads, so every worker's first-use costs fall outside the timing."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    for i in range(10):
        status = post_trace(conn, f"app={app}&key=k&id=warm-{i}", body)
        assert status == 202, status
    conn.close()


def latency_ms(lat: list[float]) -> tuple[float, float]:
    """p50 and p99 in ms of sorted latencies in seconds (NaN when there are none)."""
    n = len(lat)
    if not n:
        return float("nan"), float("nan")
    return 1000 * lat[n // 2], 1000 * lat[min(n - 1, int(n * 0.99))]


def stop_collector(proc: subprocess.Popen, timeout: float) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def run_collector(bodies: list[bytes], workers: int, seconds: float) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="jsprof-bench-ingest-"))
    proc = subprocess.Popen(
        [
            str(JSPROF),
            "serve",
            "--store",
            str(tmp / "store"),
            "--port",
            "0",
            "--app",
            "bench:k",
            "--read-token",
            "x",
            "--workers",
            str(workers),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        port = collector_port(proc, workers)
        warm_up(port, bodies[0], "bench")
        ctx = mp.get_context("fork")
        q: mp.Queue = ctx.Queue()
        start_at = time.time() + 0.5
        stop_at = start_at + seconds
        cpu0, comp0 = _proc_cpu(proc.pid)
        procs = [
            ctx.Process(
                target=_client_proc,
                args=(
                    "127.0.0.1",
                    port,
                    bodies,
                    CLIENTS // CLIENT_PROCS,
                    f"w{workers}p{i}",
                    start_at,
                    stop_at,
                    q,
                ),
            )
            for i in range(CLIENT_PROCS)
        ]
        [p.start() for p in procs]
        results = [q.get() for _ in procs]
        [p.join() for p in procs]
        cpu1, comp1 = _proc_cpu(proc.pid)
        lat = sorted(x for r, _, _ in results for x in r)
        errors = sum(e for _, e, _ in results)
        client_cpu = sum(c for _, _, c in results)
        store_bytes = sum(f.stat().st_size for f in (tmp / "store" / "segments").glob("*.seg"))
        n = len(lat)
        p50, p99 = latency_ms(lat)
        return {
            "workers": workers,
            "uploads": n,
            "errors": errors,
            "rate": n / seconds,
            "p50_ms": p50,
            "p99_ms": p99,
            "collector_cpu_s": cpu1 - cpu0,
            "compactor_cpu_s": comp1 - comp0,
            "client_cpu_s": client_cpu,
            "store_bytes_per_upload": store_bytes / max(1, n + 10),
        }
    finally:
        stop_collector(proc, 15)
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument(
        "--envelope",
        action="store_true",
        help="post {trace, meta} as the browser client does (default: bare traces)",
    )
    args = ap.parse_args()
    raw = [field_trace(seed) for seed in range(8)]
    bodies = [gzip.compress(envelope(b) if args.envelope else b, 6) for b in raw]
    n_samples = len(orjson.loads(raw[0])["samples"])
    print(
        f"field trace: {n_samples} samples, {statistics.mean(map(len, raw)) / 1024:.0f} KiB "
        f"JSON, {statistics.mean(map(len, bodies)) / 1024:.0f} KiB gzip; "
        f"{CLIENTS} clients in {CLIENT_PROCS} processes; {os.cpu_count()} cores"
    )
    base, base_cpu = baseline(bodies, 3.0)
    print(
        f"baseline (one core, gunzip + orjson.loads only): {base:.0f} bodies/s wall, "
        f"{base_cpu:.0f} per CPU-second"
    )
    for name, ms in stages(raw, [gzip.compress(b, 6) for b in raw]).items():
        print(f"  {name}: {ms:.2f} ms CPU per upload")
    rows = []
    for w in args.workers:
        r = run_collector(bodies, w, args.seconds)
        rows.append(r)
        per_core = r["uploads"] / r["collector_cpu_s"] if r["collector_cpu_s"] else 0
        print(
            f"--workers {w}: {r['rate']:.0f} uploads/s ({r['rate'] / base:.2f}x baseline), "
            f"p50 {r['p50_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms, errors {r['errors']}; "
            f"collector CPU {r['collector_cpu_s']:.1f} s ({per_core:.0f} uploads per "
            f"CPU-second = {per_core / base_cpu:.2f}x baseline; the background compactor "
            f"{r['compactor_cpu_s']:.1f} s more), clients' CPU "
            f"{r['client_cpu_s']:.1f} s over {args.seconds:.0f} s; "
            f"{r['store_bytes_per_upload'] / 1024:.0f} KiB stored per upload"
        )
    one = [r for r in rows if r["workers"] == 1]
    if one:
        r = one[0]
        per_core = r["uploads"] / r["collector_cpu_s"] if r["collector_cpu_s"] else 0
        print(
            "goal (one process >= 0.5x what one core gunzips + parses): "
            f"{per_core / base_cpu:.2f}x per CPU-second, {r['rate'] / base:.2f}x wall rate"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
