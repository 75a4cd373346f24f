"""`fleet top`, `fleet diff`, `fleet vitals` and `fleet regressions` over 30 days of a busy
collector, from the rollup tables (issue 34).

A collector at `--rate` uploads/s for `--days` days is not replayed as 52 M HTTP posts:
the tables its compactor would hold are written directly, the way a closed day's merged
parts hold them (store/tables/rollup.py): per release, UTC day and cell (route, env), the
stacks summed (Zipf-distributed sample counts over each release's stack tree, so more
uploads also reach more of its rare stacks), the frames' uploads per bucket of self time
(log-normal self times drawn per frame, counted into the buckets), the moments `diff`'s
intervals read (per frame, from the same log-normal's mean and spread), the vitals' values
per bucket (log-normal INP, LCP, CLS, long-frame blocking and interaction parts, per page
load, long frame and interaction), regressions' per-load sums and examples per leaf
function (rollup_perload, rollup_examples), the cells' upload counts, and a HyperLogLog sketch per
cell of its page loads (`--chunks` uploads each).
Every store gets its releases' frame and stack dictionaries and a manifest of the current format
whose parts carry sizes and CRC-32s, so the query checks and reads them as any store's.

Then `jsprof fleet top --json` (and `fleet diff --json` of the two releases, `fleet
vitals --json`) runs in a
fresh process per query (as the CLI runs),
`--repeat` times per store, over the whole span and over one release and route; printed:
the median wall time of the query (after the imports, which a collector has done once;
the whole process's too), the child's peak RSS, the rows its rollups hold, and the ratio of
each scale's time to the first's (the goal: 10x the uploads within 1.5x the time).

    .venv/bin/python benchmarks/bench_fleet_rollups.py [--scales 1,10] [--days 30]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROUTES = ["/", "/cart", "/product", "/search"]
ENVS = ["prod", "canary"]
DAY_MS = 86400e3
T0 = 1795651200e3  # 2026-11-26 00:00 UTC


def _tree(rng: np.random.Generator, stacks: int, frames: int) -> tuple[np.ndarray, np.ndarray]:
    """A release's stack tree: each stack's parent among the earlier ones (8 roots)."""
    parent = np.full(stacks, -1, np.int64)
    parent[8:] = (rng.random(stacks - 8) ** 2 * np.arange(8, stacks)).astype(np.int64)
    return parent, rng.integers(0, frames, stacks)


def _write_store(root: Path, scale: float, args: argparse.Namespace) -> dict:
    from jsprof.store.tables import vitals as rv
    from jsprof.store.tables.intern import release_key
    from jsprof.store.tables.manifest import FORMAT_VERSION, write_manifest
    from jsprof.store.tables.parts import new_part, schemas
    from jsprof.store.tables.perload import LOAD_KEY, function_hash
    from jsprof.store.tables.rollup import EXAMPLES_KEPT
    from jsprof.store.tables.rollup import HLL_M, ROLLUP_KINDS, bucket_of

    sch = schemas()
    tdir = root / "tables"
    (root / "segments").mkdir(parents=True)
    rng = np.random.default_rng(7)
    per_day = args.rate * 86400 * scale
    cells = [(r, e) for r in ROUTES for e in ENVS]
    share = np.asarray([1.0 / (i + 1) for i in range(len(cells))])
    share /= share.sum()
    man = {"formatVersion": FORMAT_VERSION, "cursor": None, "hasCursor": False, "nextUk": 0,
           "nextPart": 2, "uploads": [], "releases": {}, "skipped": [], "samplesFromUk": 0,
           "rollups": True}
    rows = dict.fromkeys(ROLLUP_KINDS, 0)
    uploads = 0
    # regressions' per-load values: each leaf frame's self ms per page load log-normal
    # (sigma 0.8) in the page loads that run it, the same in every release but five of
    # them 1.5x slower from release 1.1.0 on
    prng = np.random.default_rng(11)
    p_mu = prng.normal(np.log(args.chunks * 20e6), 1.0, args.frames)
    p_run = np.clip(prng.beta(0.8, 1.5, args.frames), 0.02, 1.0)
    uk_next = 0
    for ri in range(args.releases):
        release = f"1.{ri}.0"
        rkey = release_key("shop", release)
        parent, frame = _tree(rng, args.stacks, args.frames)
        entry = {"app": "shop", "release": release, "frames": args.frames,
                 "stacks": args.stacks, "parts": {k: [] for k in sch if k != "uploads"}}
        res = f"https://shop.example/static/app.{release}.js"
        entry["parts"]["frames"] = [new_part(tdir, f"frames/rkey={rkey}/part-000001.parquet", {
            "frame_id": np.arange(args.frames), "name": [f"fn{i}" for i in range(args.frames)],
            "resource": [res] * args.frames, "line": np.arange(args.frames) * 3 + 1,
            "column": np.full(args.frames, 5)}, sch["frames"], args.frames)]
        entry["parts"]["stacks"] = [new_part(tdir, f"stacks/rkey={rkey}/part-000001.parquet", {
            "stack_id": np.arange(args.stacks), "parent_id": parent, "frame_id": frame},
            sch["stacks"], args.stacks)]
        # Zipf over stacks (sample counts), a few leaf frames with most self time
        p_stack = 1.0 / (1 + rng.permutation(args.stacks)) ** 1.1
        p_stack /= p_stack.sum()
        # the frames of the most sampled stacks have self time (the others 0: callers)
        leaf = set(frame[np.argsort(-p_stack)[: args.frames // 4]].tolist())
        present = np.clip(rng.beta(0.5, 2.0, args.frames), 1e-4, 1.0)
        mu = rng.normal(np.log(20e6), 1.0, args.frames)  # median self time per frame, ns
        fkey = np.asarray([function_hash(f"fn{i}", res, i * 3 + 1, 5)  # as the frames above
                           for i in range(args.frames)], np.int64)
        leaves = np.asarray(sorted(leaf), np.int64)
        slow = np.where(np.isin(np.arange(args.frames), leaves[:5]) & (ri > 0), np.log(1.5), 0.0)
        for d in range(args.days):
            day = time.strftime("%Y-%m-%d", time.gmtime((T0 + d * DAY_MS) / 1000))
            at = [T0 + d * DAY_MS, T0 + (d + 1) * DAY_MS - 1]
            cols = {k: {c: [] for c in sch[k].names} for k in ROLLUP_KINDS}
            for ci, (route, env) in enumerate(cells):
                u = int(rng.poisson(per_day / args.releases * share[ci]))
                uploads += u
                n_samples = u * args.samples
                got = rng.poisson(n_samples * p_stack)
                st = np.nonzero(got)[0]
                idle = rng.poisson(n_samples * 0.2 / 3, 3)
                sid = np.r_[st, [-1, -1, -1]]
                cnt = np.r_[got[st], idle]
                mk = np.r_[np.zeros(len(st), np.int64), [-1, 3, 5]]
                c = cols["rollup_stacks"]
                c["route"] += [route] * len(sid)
                c["env"] += [env] * len(sid)
                c["stack_id"] += sid.tolist()
                c["marker"] += mk.tolist()
                c["samples"] += cnt.tolist()
                c["weight_ns"] += (cnt * 10_000_000 + rng.integers(0, 999_999, len(cnt))).tolist()
                c = cols["rollup_cells"]
                for k, v in (("route", route), ("env", env), ("sample_interval", 10.0),
                             ("uploads", u), ("own_loads", 0), ("samples", int(cnt.sum())),
                             ("total_ns", int(cnt.sum()) * 10_000_000), ("lost_ms", 0.0),
                             ("a_sq", float(u) * (args.samples * 10e6) ** 2)):
                    c[k].append(v)
                # page loads: a sketch of u / chunks distinct ids, drawn register by register
                n_loads = max(1, u // args.chunks)
                lam = n_loads / HLL_M
                reg = np.ceil(-np.log2(1 - rng.random(HLL_M) ** (1 / lam))).clip(0, 53)
                c = cols["rollup_loads"]
                for k, v in (("route", route), ("env", env), ("load_hash", None),
                             ("registers", reg.astype(np.uint8).tobytes())):
                    c[k].append(v)
                # frames: uploads holding each, and their self times' buckets
                with_f = rng.binomial(u, present)
                fr, bk, tr = [], [], []
                for f in np.nonzero(with_f)[0].tolist():
                    n = int(with_f[f])
                    if f in leaf:
                        draw = np.exp(rng.normal(mu[f], 0.8, min(n, 4000)))
                        b, k = np.unique(bucket_of(draw.astype(np.int64)), return_counts=True)
                        k = np.maximum(1, np.rint(k * n / min(n, 4000)).astype(np.int64))
                    else:
                        b, k = np.zeros(1, np.int64), np.asarray([n])
                    fr += [f] * len(b)
                    bk += b.tolist()
                    tr += k.tolist()
                # moments (diff's intervals): per frame (its own name group) over the
                # uploads holding it, log-normal self times (sigma 0.8), total = self plus a
                # log-normal share of its callees'; per no-stack marker likewise
                hold = np.nonzero(with_f)[0]
                n = with_f[hold].astype(np.float64)
                a = args.samples * 10e6  # an upload's all ns
                es = np.where(np.isin(hold, list(leaf)), np.exp(mu[hold] + 0.32), 0.0)
                et = es + np.exp(mu[hold] + 0.5)
                c = cols["rollup_moments"]
                keys = np.r_[hold, [-1, -5, -7]]
                ni = np.r_[n, [float(u)] * 3]
                ms = np.r_[es, idle * 10e6 / max(u, 1)]
                mt = np.r_[et, idle * 10e6 / max(u, 1)]
                c["route"] += [route] * len(keys)
                c["env"] += [env] * len(keys)
                c["key"] += keys.tolist()
                c["uploads"] += ni.astype(np.int64).tolist()
                for col, e in (("s", ms), ("t", mt)):
                    c[f"{col}_sum"] += np.rint(ni * e).astype(np.int64).tolist()
                    c[f"{col}_sq"] += (ni * e * e * np.exp(0.64)).tolist()
                    c[f"{col}_a"] += (ni * e * a).tolist()
                # vitals: per page load its INP (60 % have one), LCP (90 %, 3 elements),
                # CLS; per long frame (2 a load) its blocking; per interaction (1.5 a
                # load, 3 types) its duration and parts: log-normal values, bucketed
                c = cols["rollup_vitals"]

                def vital(metric: int, label: str, n: int, mu_ms: float, sigma: float,
                          c: dict = c, route: str = route, env: str = env) -> None:
                    if n <= 0:
                        return
                    if mu_ms <= 0:
                        b, k = np.zeros(1, np.int64), np.asarray([n])
                    else:
                        draw = np.exp(rng.normal(np.log(mu_ms), sigma, min(n, 4000)))
                        b, k = np.unique(rv.buckets(draw), return_counts=True)
                        k = np.maximum(1, np.rint(k * n / min(n, 4000)).astype(np.int64))
                    c["route"] += [route] * len(b)
                    c["env"] += [env] * len(b)
                    c["metric"] += [metric] * len(b)
                    c["label"] += [label] * len(b)
                    c["bucket"] += b.tolist()
                    c["count"] += k.tolist()

                # rollup_perload: per leaf frame over the page loads, sum and sum of
                # squares of its self ns per load; the page loads themselves (LOAD_KEY);
                # rollup_examples: its EXAMPLES_KEPT uploads with the most self ns
                c = cols["rollup_perload"]
                m = p_mu[leaves] + slow[leaves]
                q = n_loads * p_run[leaves]
                load_ns = args.chunks * args.samples * 10e6
                keys = np.r_[fkey[leaves], [LOAD_KEY, -1, -5, -7]]
                c["route"] += [route] * len(keys)
                c["env"] += [env] * len(keys)
                c["key"] += keys.tolist()
                c["loads"] += [0] * len(leaves) + [n_loads, 0, 0, 0]
                s1 = np.r_[q * np.exp(m + 0.32), [n_loads * load_ns] + [n_loads * 0.2 / 3
                                                                          * load_ns] * 3]
                s2 = np.r_[q * np.exp(2 * m + 1.28), [n_loads * load_ns ** 2 * 1.1]
                           + [n_loads * (0.2 / 3 * load_ns) ** 2 * 1.2] * 3]
                c["s_sum"] += np.rint(s1).astype(np.int64).tolist()
                c["s_sq"] += s2.tolist()
                c = cols["rollup_examples"]
                k = min(EXAMPLES_KEPT, u)
                for key in fkey[leaves].tolist():
                    c["route"] += [route] * k
                    c["env"] += [env] * k
                    c["key"] += [key] * k
                    c["uk"] += list(range(uk_next, uk_next + k))
                    c["id"] += [f"up-{x}" for x in range(uk_next, uk_next + k)]
                    c["self_ns"] += np.rint(np.exp(rng.normal(p_mu[key == fkey][0] + 1.5, 0.3,
                                                              k))).astype(np.int64).tolist()
                uk_next += u
                vital(rv.LOAD, "", n_loads, 0, 0)
                vital(rv.INP, "", int(0.6 * n_loads), 180.0, 0.7)
                for j, el in enumerate(("img.hero", "h1", "div.banner")):
                    n_el = int(0.9 * n_loads) // 3
                    vital(rv.LCP, "", n_el, 1200.0 * (1 + j), 0.5)
                    vital(rv.LCP_ELEMENT, el, n_el, 0, 0)
                vital(rv.CLS, "", int(0.9 * n_loads), 0.05, 1.0)
                vital(rv.LONG_FRAME, "", 2 * n_loads, 0, 0)
                vital(rv.BLOCKING, "", int(1.8 * n_loads), 40.0, 1.0)
                for t in ("click", "keydown", "pointerup"):
                    n_i = n_loads // 2
                    vital(rv.DURATION, t, n_i, 120.0, 0.7)
                    vital(rv.INPUT_DELAY, t, n_i, 8.0, 1.0)
                    vital(rv.PROCESSING, t, n_i, 60.0, 0.8)
                    vital(rv.PRESENTATION, t, n_i, 30.0, 0.6)
                c = cols["rollup_frames"]
                c["route"] += [route] * len(fr)
                c["env"] += [env] * len(fr)
                c["frame_id"] += fr
                c["marker"] += [-1] * len(fr)
                c["bucket"] += bk
                c["grouped"] += [0] * len(fr)  # the frames are distinct functions
                c["traces"] += tr
            for k in ROLLUP_KINDS:
                n = len(cols[k]["route"])
                rows[k] += n
                entry["parts"][k].append(new_part(
                    tdir, f"{k}/rkey={rkey}/{day}/part-000001.parquet", cols[k], sch[k], n,
                    day, at))
        man["releases"][rkey] = entry
    write_manifest(tdir, man)
    return {"uploads": uploads, "rows": rows,
            "bytes": sum(p.stat().st_size for p in tdir.rglob("*.parquet"))}


_QUERY = r"""
import json, resource, sys, time
t0 = time.perf_counter()
from jsprof.cli import main
import jsprof.fleet.api, jsprof.fleet.query, duckdb, pyarrow.parquet  # imports apart
import contextlib, io
ti = time.perf_counter()
out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
with contextlib.redirect_stdout(out):
    code = main(["fleet", sys.argv[2], "--store", sys.argv[1], "--app", "shop", "--json",
                 *sys.argv[3:]])
t1 = time.perf_counter()
out.flush()
doc = json.loads(out.buffer.getvalue())
side = doc["new"] if "new" in doc else doc  # diff: its NEW side
if "regressions" in doc:  # regressions: changes judged and found, as traces/pageLoads
    side = {"traces": doc["tests"], "pageLoads": len(doc["regressions"])}
elif "rows" in side and "traces" not in side:  # vitals: its rows' page loads
    side = {"traces": sum(r["interactions"] for r in side["rows"]),
            "pageLoads": sum(r["pageLoads"] for r in side["rows"])}
print(json.dumps({"s": t1 - t0, "query": t1 - ti, "code": code, "traces": side["traces"],
                  "pageLoads": side["pageLoads"],
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scales", default="1,10")
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--rate", type=float, default=20.0, help="uploads/s at scale 1")
    ap.add_argument("--releases", type=int, default=2)
    ap.add_argument("--stacks", type=int, default=4000, help="per release")
    ap.add_argument("--frames", type=int, default=800, help="per release")
    ap.add_argument("--samples", type=int, default=300, help="per upload")
    ap.add_argument("--chunks", type=int, default=3, help="uploads per page load")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--queries", default=None,
                    help="only the queries whose names hold one of these words (a,b)")
    args = ap.parse_args()
    base = Path(args.dir or tempfile.mkdtemp(prefix="bench-rollups-"))
    queries = {"top all": ["top"],
               "top one release+route": ["top", "--release", "1.0.0", "--route", "/cart"],
               "diff 1.0.0 -> 1.1.0": ["diff", "--base", "release=1.0.0", "--new",
                                       "release=1.1.0"],
               "vitals all": ["vitals"],
               "regressions by release": ["regressions"],
               "regressions by day /cart": ["regressions", "--by", "day", "--route", "/cart"]}
    if args.queries:
        queries = {k: v for k, v in queries.items()
                   if any(w in k for w in args.queries.split(","))}
    scales = [float(x) for x in args.scales.split(",")]
    runs: dict[tuple[float, str], list[dict]] = {}
    try:
        for scale in scales:
            root = base / f"x{scale:g}"
            if (root / "tables" / "_manifest.json").exists():
                print(f"scale {scale:g}: the store in {root}", flush=True)
                continue
            t = time.perf_counter()
            info = _write_store(root, scale, args)
            print(f"scale {scale:g}: {info['uploads']:,} uploads over {args.days} days "
                  f"({info['uploads'] / args.days / 86400:.1f}/s), rollup rows "
                  f"{json.dumps(info['rows'])}, {info['bytes'] / 1e6:.1f} MB; written in "
                  f"{time.perf_counter() - t:.0f} s", flush=True)
        # Interleaved (scales in turn, each round), so the machine's load weighs on all alike
        for rep in range(args.repeat):
            for scale in scales[rep % len(scales):] + scales[:rep % len(scales)]:
                for name, extra in queries.items():
                    p = subprocess.run(
                        [sys.executable, "-c", _QUERY, str(base / f"x{scale:g}"), *extra],
                        capture_output=True, text=True, check=True)
                    runs.setdefault((scale, name), []).append(
                        json.loads(p.stdout.strip().splitlines()[-1]))
        for scale in scales:
            for name in queries:
                got = runs[(scale, name)]
                med = statistics.median(r["query"] for r in got)
                ref = statistics.median(r["query"] for r in runs[(scales[0], name)])
                each = ", ".join(f"{r['query']:.2f}" for r in got)
                proc = statistics.median(r["s"] for r in got)
                print(f"x{scale:g} {name:<22} median {med:6.2f} s (runs {each}; the "
                      f"process with its imports {proc:.2f} s), peak RSS "
                      f"{max(r['rss_mb'] for r in got):.0f} MB, traces {got[0]['traces']:,}, "
                      f"pageLoads {got[0]['pageLoads']:,}; x{med / ref:.2f} of scale "
                      f"{scales[0]:g}", flush=True)
    finally:
        if args.dir is None:
            shutil.rmtree(base, ignore_errors=True)
    print(f"load average {os.getloadavg()[0]:.1f}; this process peak RSS "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
