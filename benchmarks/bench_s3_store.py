"""The store on object storage (`--store s3://...`) against the local directory store, in
one run: a collector's ack latency (POST to 202) and the time from an upload's ack to the
first compaction that lists it, each store with its own collector on the same machine.

The S3 API is moto's server mode on loopback (an emulator, not S3: it has no network
round trip, no replication, so its absolute times say little about a real bucket; the
ratio to the local store and Pyroscope v2's published figures, median ingest < 500 ms and
time to first compaction < 15 s on S3, are the yardsticks).

    .venv/bin/python benchmarks/bench_s3_store.py [--uploads 60] [--concurrency 4] [--rounds 3]
"""

from __future__ import annotations

import argparse
import http.client
import os
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
TRACE = (ROOT / "tests" / "data" / "chromium" / "trace-basic.json").read_bytes()
JSPROF = Path(sys.executable).parent / "jsprof"
ENV = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench-secret",
       "AWS_DEFAULT_REGION": "us-east-1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_moto() -> tuple[subprocess.Popen, dict]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                             str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    env = {**ENV, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"}
    os.environ.update(env)
    import boto3

    while True:
        try:
            boto3.client("s3").list_buckets()
            return proc, env
        except Exception:  # noqa: BLE001 - not up yet
            time.sleep(0.2)


class Collector:
    def __init__(self, store: str, env: dict, compact_every: str = "1") -> None:
        e = {**os.environ, **env, "JSPROF_READ_TOKEN": "bench-token"}
        self.proc = subprocess.Popen(
            [str(JSPROF), "serve", "--store", store, "--port", "0", "--app", "shop:k1",
             "--compact-every", compact_every],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=e)
        line = self.proc.stdout.readline().decode()
        url = line.rsplit(" ", 1)[1].strip()
        host, port = url.split("//")[1].split(":")
        self.host, self.port = host, int(port)

    def post(self, uid: str) -> float:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
        t0 = time.perf_counter()
        conn.request("POST", f"/v1/traces?app=shop&key=k1&id={uid}", TRACE,
                     {"Content-Type": "application/json"})
        r = conn.getresponse()
        r.read()
        dt = time.perf_counter() - t0
        conn.close()
        assert r.status == 202, r.status
        return dt

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


def latencies(c: Collector, n: int, conc: int) -> list[float]:
    out: list[float] = []
    ids = iter(f"{secrets.token_hex(8)}-{i}" for i in range(n))
    lock = threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                uid = next(ids, None)
            if uid is None:
                return
            dt = c.post(uid)
            with lock:
                out.append(dt)

    ts = [threading.Thread(target=worker) for _ in range(conc)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return out


def compacted_s3(url: str) -> bool:
    from jsprof.store.objects import open_objects

    got = open_objects(url).get("tables/_manifest.json")
    return got is not None and orjson.loads(got[0])["nextUk"] >= 1


def compacted_local(path: Path) -> bool:
    try:
        return orjson.loads((path / "tables" / "_manifest.json").read_bytes())["nextUk"] >= 1
    except (FileNotFoundError, orjson.JSONDecodeError):
        return False


def first_compaction(store: str, env: dict, done: object) -> float:
    """Seconds from the ack of the first upload into a new store to the commit that lists
    it (the collector started with --compact-every 1, before the upload)."""
    c = Collector(store, env)
    try:
        time.sleep(1.0)  # the compactor process is up
        c.post("first")
        t0 = time.perf_counter()
        while not done():
            time.sleep(0.05)
        return time.perf_counter() - t0
    finally:
        c.stop()


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--uploads", type=int, default=60)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-s3-"))
    moto, env = start_moto()
    env = {**env, "XDG_CACHE_HOME": str(tmp / "cache")}
    import boto3

    try:
        print(f"load average {os.getloadavg()[0]:.1f}; {args.uploads} uploads of "
              f"{len(TRACE) / 1024:.0f} KB per store and round, {args.concurrency} at a time")
        for r in range(args.rounds):
            bucket = f"bench-{secrets.token_hex(4)}"
            boto3.client("s3").create_bucket(Bucket=bucket)
            res = {}
            for name, store in (("local", str(tmp / f"local-{r}")), ("s3", f"s3://{bucket}/s")):
                c = Collector(store, env, compact_every="0")
                try:
                    lat = latencies(c, args.uploads, args.concurrency)
                finally:
                    c.stop()
                res[name] = (statistics.median(lat), pct(lat, 0.95))
            bucket2 = f"bench-{secrets.token_hex(4)}"
            boto3.client("s3").create_bucket(Bucket=bucket2)
            url2 = f"s3://{bucket2}/s"
            local2 = tmp / f"first-{r}"
            tl = first_compaction(str(local2), env, lambda p=local2: compacted_local(p))
            ts = first_compaction(url2, env, lambda u=url2: compacted_s3(u))
            print(f"round {r + 1}: ack median local {res['local'][0] * 1000:.1f} ms, "
                  f"s3 {res['s3'][0] * 1000:.1f} ms ({res['s3'][0] / res['local'][0]:.2f}x); "
                  f"p95 local {res['local'][1] * 1000:.1f} ms, s3 {res['s3'][1] * 1000:.1f} ms; "
                  f"first compaction local {tl:.2f} s, s3 {ts:.2f} s ({ts / tl:.2f}x)",
                  flush=True)
    finally:
        moto.kill()
        moto.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
