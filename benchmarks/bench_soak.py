"""Soak of `jsprof serve` on loopback: sustained uploads, latency, memory over time, and
that every acknowledged upload reads back identical, with and without hostile clients.

Runs (each bounded by --seconds):
  16 and 64 clients on --workers 1 and --workers 2;
  then 64 clients on --workers 2 with a slowloris (connections sending a byte at a time:
  silent ones, dribbled headers, dribbled bodies; more than the collector's connection
  cap) and a bomb sender (71 KB gzip bombs that inflate to 70 MiB, and 8 MiB junk bodies)
  alongside.

Per run: uploads/s, p50/p99 latency, errors, the collector's RSS (all its processes)
sampled twice a second (start, quarters, peak), and a check over the store afterwards:
every id answered 202 is stored and its trace bytes are the uploaded JSON, byte for byte.
The load average is printed: the machine is shared, so compare runs of one invocation.

    .venv/bin/python benchmarks/bench_soak.py                 # the full soak (~6 min)
    .venv/bin/python benchmarks/bench_soak.py --seconds 5     # a quick check
"""

from __future__ import annotations

import argparse
import gzip
import http.client
import multiprocessing as mp
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path

from _common import children
from bench_ingest import (
    collector_port,
    field_trace,
    latency_ms,
    post_trace,
    stop_collector,
    warm_up,
)

JSPROF = Path(sys.executable).parent / "jsprof"
THREADS_PER_PROC = 16


def _rss_tree(pid: int) -> int:
    """RSS in bytes of a process and all its descendants: the workers and the background
    compactor, a child with --workers 1 and a grandchild with 2 (counting children only
    took its ~130 MiB of DuckDB and pyarrow into one run's figure and not the other's)."""
    total = 0
    todo, tree = [pid], []
    while todo:
        p = todo.pop()
        tree.append(p)
        todo += children(p)
    for p in tree:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except FileNotFoundError:
            pass
    return total


def _clients(
    port: int, bodies: list[bytes], threads: int, tag: str, stop_at: float, out: mp.Queue
) -> None:
    """`threads` keep-alive clients posting distinct ids until `stop_at`."""
    acked: list[str] = []
    lat: list[float] = []
    errors: dict[str, int] = {}
    lock = threading.Lock()

    def run(k: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        n = 0
        mine, mine_lat = [], []
        while time.time() < stop_at:
            uid = f"{tag}-{k}-{n}"
            n += 1
            body = bodies[zlib.crc32(uid.encode()) % len(bodies)]
            t0 = time.perf_counter()
            try:
                query = f"app=soak&key=k&release=1.0&route=/home&id={uid}"
                status = str(post_trace(conn, query, body))
            except OSError as e:
                status = type(e).__name__
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            if status == "202":
                mine.append(uid)
                mine_lat.append(time.perf_counter() - t0)
            else:
                with lock:
                    errors[status] = errors.get(status, 0) + 1
        conn.close()
        with lock:
            acked.extend(mine)
            lat.extend(mine_lat)

    ts = [threading.Thread(target=run, args=(k,)) for k in range(threads)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    out.put((acked, lat, errors))


def _slowloris(port: int, n: int, stop_at: float, out: mp.Queue) -> None:
    """`n` connections sending as little as they can; a closed one is opened again."""

    def open_one(i: int) -> list:
        s = socket.socket()
        s.setblocking(False)
        try:
            s.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        if i % 3 == 0:
            data = b""
        elif i % 3 == 1:
            data = b"POST /v1/traces?app=soak&key=k HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 900
        else:
            data = (
                b"POST /v1/traces?app=soak&key=k HTTP/1.1\r\nHost: x\r\n"
                b"Content-Type: application/json\r\nContent-Length: 1000000\r\n\r\n"
            ) + b" " * 1000
        return [s, data, 0]

    conns = [open_one(i) for i in range(n)]
    closed = 0
    while time.time() < stop_at:
        for i, c in enumerate(conns):
            s, data, sent = c
            step = 1
            if i % 3 == 2 and sent == 0:
                step = data.index(b"\r\n\r\n") + 4
            try:
                if data and sent < len(data):
                    c[2] += s.send(data[sent : sent + step])
                elif s.recv(1 << 16) == b"":
                    raise ConnectionResetError
            except BlockingIOError:
                pass
            except OSError:
                s.close()
                closed += 1
                conns[i] = open_one(i)
        time.sleep(0.5)
    for s, _, _ in conns:
        s.close()
    out.put(("slowloris", closed))


_BOMB: list[bytes] = []  # made once before the runs (compressing 70 MiB takes seconds)


def _bombs(port: int, stop_at: float, out: mp.Queue) -> None:
    bomb = _BOMB[0]
    junk = b"x" * ((8 << 20) - 1)
    sent = {"bomb": 0, "junk": 0}
    codes: dict[int, int] = {}
    while time.time() < stop_at:
        for kind, body, enc in (("bomb", bomb, "gzip"), ("junk", junk, None)):
            h = {"Content-Type": "application/json"}
            if enc:
                h["Content-Encoding"] = enc
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            try:
                conn.request("POST", "/v1/traces?app=soak&key=k", body=body, headers=h)
                r = conn.getresponse()
                r.read()
                codes[r.status] = codes.get(r.status, 0) + 1
            except OSError:
                codes[0] = codes.get(0, 0) + 1
            finally:
                conn.close()
            sent[kind] += 1
    out.put(("bombs", sent, codes))


def run(
    raw: list[bytes],
    bodies: list[bytes],
    workers: int,
    clients: int,
    seconds: float,
    attack: bool,
) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="jsprof-soak-"))
    store = tmp / "store"
    cmd = [str(JSPROF), "serve", "--store", str(store), "--port", "0", "--app", "soak:k"]
    cmd += ["--workers", str(workers)]
    if attack:
        cmd += ["--max-connections", "300"]
    env = {**os.environ, "JSPROF_READ_TOKEN": "soak-read-token"}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    err_lines: list[bytes] = []
    threading.Thread(target=lambda: err_lines.extend(proc.stderr), daemon=True).start()
    try:
        port = collector_port(proc, workers)
        warm_up(port, bodies[0], "soak")  # not counted
        ctx = mp.get_context("fork")
        q: mp.Queue = ctx.Queue()
        load0 = os.getloadavg()[0]
        start = time.time()
        stop_at = start + seconds
        procs = []
        n_procs = max(1, clients // THREADS_PER_PROC)
        for i in range(n_procs):
            args = (port, bodies, clients // n_procs, f"w{workers}c{clients}p{i}", stop_at, q)
            procs.append(ctx.Process(target=_clients, args=args))
        if attack:
            procs.append(ctx.Process(target=_slowloris, args=(port, 900, stop_at, q)))
            procs.append(ctx.Process(target=_bombs, args=(port, stop_at, q)))
        [p.start() for p in procs]
        rss: list[tuple[float, int]] = []
        while time.time() < stop_at:
            rss.append((time.time() - start, _rss_tree(proc.pid)))
            time.sleep(0.5)
        results = [q.get(timeout=seconds + 120) for _ in procs]
        [p.join() for p in procs]
        load1 = os.getloadavg()[0]
        rss.append((time.time() - start, _rss_tree(proc.pid)))
    finally:
        stop_collector(proc, 20)
    acked = [u for r in results if isinstance(r[0], list) for u in r[0]]
    lat = sorted(x for r in results if isinstance(r[0], list) for x in r[1])
    errors: dict[str, int] = {}
    extra = {}
    for r in results:
        if isinstance(r[0], list):
            for k, v in r[2].items():
                errors[k] = errors.get(k, 0) + v
        else:
            extra[r[0]] = r[1:]
    # Every acknowledged id, read back from the store: byte for byte the uploaded JSON.
    from jsprof.store import Store

    st = Store(store)
    missing = differ = 0
    try:
        for uid in acked:
            got = st.get(uid)
            if got is None:
                missing += 1
            elif got[1] != raw[zlib.crc32(uid.encode()) % len(raw)]:
                differ += 1
    finally:
        st.close()
    shutil.rmtree(tmp, ignore_errors=True)
    n = len(lat)
    p50, p99 = latency_ms(lat)
    return {
        "workers": workers,
        "clients": clients,
        "attack": attack,
        "uploads": n,
        "rate": n / seconds,
        "p50_ms": p50,
        "p99_ms": p99,
        "errors": errors,
        "rss": rss,
        "missing": missing,
        "differ": differ,
        "extra": extra,
        "load": (load0, load1),
        "stderr_lines": len(err_lines),
        "tracebacks": sum(b"Traceback" in x for x in err_lines),
    }


def _mib(b: int) -> str:
    return f"{b / (1 << 20):.0f}"


def report(r: dict) -> str:
    rss = [b for _, b in r["rss"]]
    quarters = [rss[min(len(rss) - 1, int(len(rss) * f))] for f in (0, 0.25, 0.5, 0.75)]
    quarters.append(rss[-1])
    head = f"--workers {r['workers']}, {r['clients']} clients" + (
        ", + slowloris 900 conns + bomb/junk sender" if r["attack"] else ""
    )
    lines = [
        f"{head}: {r['rate']:.0f} uploads/s ({r['uploads']} in all), "
        f"p50 {r['p50_ms']:.0f} ms, p99 {r['p99_ms']:.0f} ms, errors {r['errors'] or 0}",
        f"  RSS MiB start/25%/50%/75%/end: {'/'.join(_mib(x) for x in quarters)}, "
        f"peak {_mib(max(rss))}; load {r['load'][0]:.1f} -> {r['load'][1]:.1f}",
        f"  read back: {r['uploads'] - r['missing'] - r['differ']} of {r['uploads']} "
        f"acknowledged identical, {r['missing']} missing, {r['differ']} different; "
        f"stderr {r['stderr_lines']} lines, {r['tracebacks']} tracebacks",
    ]
    for k, v in r["extra"].items():
        lines.append(f"  {k}: {v}")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="per run (default 60)")
    ap.add_argument("--only", choices=["plain", "attack"], help="run only these")
    args = ap.parse_args()
    raw = [field_trace(seed) for seed in range(8)]
    bodies = [gzip.compress(b, 6) for b in raw]
    print(
        f"soak: {args.seconds:.0f} s per run, field traces of 6,000 samples "
        f"({len(bodies[0]) >> 10} KiB gzip); {os.cpu_count()} cores, load "
        f"{os.getloadavg()[0]:.1f}",
        flush=True,
    )
    plan = []
    if args.only != "attack":
        plan += [(w, c, False) for w in (1, 2) for c in (16, 64)]
    if args.only != "plain":
        plan.append((2, 64, True))
        _BOMB.append(gzip.compress(b"{" + b" " * (70 << 20) + b"}", 9))
    bad = 0
    for w, c, attack in plan:
        r = run(raw, bodies, w, c, args.seconds, attack)
        print(report(r), flush=True)
        bad += r["missing"] + r["differ"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
