"""fleet queries on a synthetic field store: DuckDB and Dask vs `jsprof report` in memory.

    .venv/bin/python benchmarks/bench_fleet.py [--traces 10000] [--samples 6000] [--sim]

The store: `--traces` uploads of `--samples` samples each (default 10,000 x 6,000 = 60 M
samples) over two releases of one app, with realistic stack shapes: a call graph of ~800
functions, a few thousand distinct stacks per release, depths to ~30, Zipf-like
popularity, each page load using a few hundred of them, ~20 % idle samples with markers,
gaps of ~10 ms with jitter. Ingesting 10,000 traces through the collector and compactor
would take longer than this bench should, so the Parquet tables are built directly in the
compactor's layout (same schemas and manifest, `store.tables.intern.write_release_parts`) from
the per-trace samples; a small sample of uploads is also run through the real compactor to
measure its rate and check the two agree.

Baseline: the same samples as one in-memory Recording (a track per release, 30 M samples
each, weights column set), through `analysis.profile.summarize`, the core of `jsprof
report`. Figures are samples per second (total samples / wall time) and the ratio to that
baseline, taken in one run.
"""

from __future__ import annotations

import argparse
import gzip
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson

from jsprof.analysis.profile import summarize
from jsprof.fleet import api
from jsprof.fleet.engine import DaskEngine, DuckEngine, Snapshot
from jsprof.fleet.filters import Filters
from jsprof.formats.jsprof import trace_to_doc
from jsprof.store import Store
from jsprof.store.tables.compact import compact
from jsprof.store.tables.intern import NS_PER_MS, Release, release_key, write_release_parts
from jsprof.store.tables.manifest import (
    FORMAT_VERSION,
    read_manifest,
    tables_dir,
    write_manifest,
)
from jsprof.store.tables.parts import new_part, schemas
from jsprof.trace import MARKER_CODE, NONE, ProfilerTrace, Recording, Track

APP = "shop"
RELEASES = ("2026.11.1", "2026.11.2")
RES = [f"https://shop.example/static/{n}.js" for n in ("app", "vendor", "react-dom", "chunk-7")]


def call_graph(rng: np.random.Generator, n_funcs: int = 800, n_stacks: int = 4000):
    """Frames (name, resource, line, col) and a stack tree grown by preferential attachment."""
    frames = [(f"fn{i}", RES[i % len(RES)], 10 + i * 3, 5 + i % 40) for i in range(n_funcs)]
    parent = [NONE]
    frame = [0]  # root: "main"
    depth = [1]
    pop = np.ones(1)
    seen = set()
    while len(parent) < n_stacks:
        # children attach to popular, not too deep stacks
        p = int(rng.choice(len(parent), p=pop / pop.sum()))
        f = int(rng.zipf(1.3)) % n_funcs
        if depth[p] >= 30 or (p, f) in seen:
            continue
        seen.add((p, f))
        parent.append(p)
        frame.append(f)
        depth.append(depth[p] + 1)
        pop = np.append(pop, 1.0)
        pop[p] += 0.6
    return frames, np.asarray(parent, np.int64), np.asarray(frame, np.int64)


def stack_popularity(rng: np.random.Generator, n: int, hot: int | None) -> np.ndarray:
    w = 1.0 / np.arange(1, n + 1) ** 0.9
    rng.shuffle(w)
    if hot is not None:
        w[hot] = w.sum() * 0.08  # the regression: one stack of the new release
    return w / w.sum()


def per_trace(rng, n_samples, pop, n_stacks):
    """One page load: its own few hundred stacks, counts, markers, weights in ns."""
    k = int(rng.integers(150, 600))
    used = rng.choice(n_stacks, size=k, replace=False, p=pop)
    p = pop[used] / pop[used].sum()
    idle = rng.random(n_samples) < 0.2
    st = np.where(idle, NONE, used[rng.choice(k, size=n_samples, p=p)])
    mk = np.where(idle, rng.choice([MARKER_CODE["gc"], MARKER_CODE["paint"], NONE],
                                   size=n_samples), MARKER_CODE["script"])
    gaps = rng.uniform(7.0, 14.0, n_samples)  # ms; the last sample weighs the interval
    gaps[-1] = 10.0
    return st.astype(np.int64), mk.astype(np.int64), gaps


def build_store(root: Path, n_traces: int, n_samples: int, seed: int = 1):
    """Parquet tables in the compactor's layout; returns what the in-memory baseline needs."""
    rng = np.random.default_rng(seed)
    frames, parent, frame = call_graph(rng)
    n_st = len(parent)
    tdir = tables_dir(root)
    tdir.mkdir(parents=True)
    man = {"formatVersion": FORMAT_VERSION, "cursor": None, "hasCursor": False, "nextUk": 0,
           "nextPart": 1, "uploads": [], "releases": {}, "skipped": []}
    uploads = []
    mem = {}
    per_release = n_traces // len(RELEASES)
    uk = 0
    for ri, rel_name in enumerate(RELEASES):
        rkey = release_key(APP, rel_name)
        rel = Release(APP, rel_name)
        for f in frames:
            rel.frame(f)
        for p, f in zip(parent.tolist(), frame.tolist(), strict=True):
            rel.stack(p, f)
        pop = stack_popularity(rng, n_st, hot=123 if ri == 1 else None)
        entry = {"app": APP, "release": rel_name, "frames": len(frames), "stacks": n_st,
                 "parts": {k: [] for k in ("frames", "stacks", "weights", "upload_frames")}}
        man["releases"][rkey] = entry
        all_st, all_mk, all_w = [], [], []
        # ancestors' frames per stack, for the frames present in each upload
        anc = [None] * n_st
        for s in range(n_st):
            p = parent[s]
            anc[s] = (anc[p] if p != NONE else frozenset()) | {int(frame[s])}
        for i in range(per_release):
            st, mk, gaps = per_trace(rng, n_samples, pop, n_st)
            all_st.append(st)
            all_mk.append(mk)
            all_w.append(gaps)
            wns = np.rint(gaps * NS_PER_MS).astype(np.int64)
            key = (st + 1) * 16 + (mk + 1)
            uniq, inv = np.unique(key, return_inverse=True)
            n = np.bincount(inv, minlength=len(uniq)).astype(np.int64)
            ns = np.zeros(len(uniq), np.int64)
            np.add.at(ns, inv, wns)
            stack = uniq // 16 - 1
            marker = uniq % 16 - 1
            rel.weights.append({"uk": uk, "stack_id": stack, "marker": marker, "samples": n,
                                "weight_ns": ns})
            js = stack >= 0
            present = sorted(set().union(*(anc[s] for s in stack[js].tolist())))
            leaf = frame[stack[js]]
            sums: dict[int, list[int]] = {}
            for f, c, w in zip(leaf.tolist(), n[js].tolist(), ns[js].tolist(), strict=True):
                a = sums.setdefault(f, [0, 0])
                a[0] += c
                a[1] += w
            idle_k, idle_n, idle_ns = marker[~js], n[~js], ns[~js]
            rel.upload_frames.append({
                "uk": uk,
                "frame_id": np.asarray(present + [NONE] * len(idle_k), np.int64),
                "marker": np.asarray([NONE] * len(present) + idle_k.tolist(), np.int64),
                "self_samples": np.asarray([sums.get(f, [0, 0])[0] for f in present]
                                           + idle_n.tolist(), np.int64),
                "self_ns": np.asarray([sums.get(f, [0, 0])[1] for f in present]
                                      + idle_ns.tolist(), np.int64),
            })
            uploads.append({
                "uk": uk, "id": f"{rel_name}-{i}", "app": APP, "release": rel_name,
                "rkey": rkey, "route": f"/p/{i % 7}", "env": "prod",
                "received_at": 1.79e12 + uk * 1000.0, "user_agent": "Chrome/142",
                "sample_interval": 10.0, "meta": "{}", "samples": n_samples,
                "total_ms": float(ns.sum()) / NS_PER_MS, "lost_ms": 0.0, "page_load": None,
            })
            uk += 1
            # one part per 1,000 uploads: partitions for Dask, bounded memory here
            if len(rel.weights) == 1000 or i == per_release - 1:
                for kind, parts in write_release_parts(tdir, rkey, rel, man["nextPart"]).items():
                    entry["parts"][kind].extend(parts)
                rel.n_frames_committed = len(rel.frame_ids)
                rel.n_stacks_committed = len(rel.stack_parent)
                rel.new_frames.clear()
                rel.weights.clear()
                rel.upload_frames.clear()
                man["nextPart"] += 1
        mem[rel_name] = (frames, parent, frame, np.concatenate(all_st),
                         np.concatenate(all_mk), np.concatenate(all_w))
    sch = schemas()["uploads"]
    path = f"uploads/part-{man['nextPart']:06d}.parquet"
    new_part(tdir, path, {f.name: [r[f.name] for r in uploads] for f in sch}, sch, len(uploads))
    man["uploads"].append(path)
    man["nextUk"] = uk
    man["nextPart"] += 1
    man["hasCursor"] = True
    write_manifest(tdir, man)
    return mem


def in_memory(mem) -> Recording:
    tracks = []
    for rel_name, (frames, parent, frame, st, mk, w) in mem.items():
        resources = sorted({f[1] for f in frames})
        rid = {r: i for i, r in enumerate(resources)}
        tr = ProfilerTrace(
            resources, [(n, rid[r], ln, c) for n, r, ln, c in frames], parent, frame,
            np.cumsum(w), st, mk.astype(np.int8), None, w,
        )
        tracks.append(Track(rel_name, tr, sample_interval=10.0))
    return Recording(tracks)


def best(fn, repeat: int, what: str = ""):
    times = []
    out = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    if what:
        print(f"  {what}: {' '.join(f'{t:.3f}' for t in times)} s", file=sys.stderr)
    return min(times), out


def dir_bytes(p: Path) -> int:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def upload_trace(mem, i: int, n_samples: int) -> ProfilerTrace:
    """Page load i of the first release as the browser would send it: only its own
    stacks (with their ancestors), frames and resources; timestamps in ms, 3 decimals."""
    frames, parent, frame, st, mk, w = mem[RELEASES[0]]
    sl = slice(i * n_samples, (i + 1) * n_samples)
    s = st[sl]
    keep: set[int] = set()
    for u in np.unique(s[s >= 0]).tolist():
        while u != NONE and u not in keep:
            keep.add(u)
            u = int(parent[u])
    ids = sorted(keep)  # parents precede children in the generated tree
    remap = {o: k for k, o in enumerate(ids)}
    fids = sorted({int(frame[s_]) for s_ in ids})
    fmap = {o: k for k, o in enumerate(fids)}
    resources = sorted({frames[f][1] for f in fids})
    rid = {r: k for k, r in enumerate(resources)}
    return ProfilerTrace(
        resources, [(frames[f][0], rid[frames[f][1]], frames[f][2], frames[f][3]) for f in fids],
        [remap[int(parent[s_])] if parent[s_] != NONE else NONE for s_ in ids],
        [fmap[int(frame[s_])] for s_ in ids],
        np.round(np.cumsum(w[sl]) + 1234.5, 3),
        [remap[x] if x != NONE else NONE for x in s.tolist()],
    )


def gzipped_upload_bytes(mem, n: int, n_samples: int) -> float:
    """Bytes per sample of gzipped ProfilerTrace uploads (as a browser sends them)."""
    total = 0
    for i in range(n):
        total += len(gzip.compress(orjson.dumps(trace_to_doc(upload_trace(mem, i, n_samples))),
                                   6))
    return total / (n * n_samples)


def compactor_rate(mem, n: int, n_samples: int) -> tuple[float, float]:
    """Uploads/s and samples/s of the real compactor on real uploads in a real store."""
    with tempfile.TemporaryDirectory() as d:
        store = Store(Path(d) / "s")
        for i in range(n):
            store.append(f"u{i}", {"app": APP, "release": "x", "sampleInterval": 10.0},
                         orjson.dumps(trace_to_doc(upload_trace(mem, i, n_samples))))
        t0 = time.perf_counter()
        stats = compact(store)
        dt = time.perf_counter() - t0
        store.close()
    return stats.uploads / dt, stats.samples / dt


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--traces", type=int, default=10_000)
    ap.add_argument("--samples", type=int, default=6_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-dask", action="store_true")
    ap.add_argument("--sim", action="store_true",
                    help="also the scale simulation: the store's weights replicated x1/x2/x4, "
                    "Dask with 1 and 2 workers")
    ap.add_argument("--dir", help="build the store here (default: a temp dir)")
    args = ap.parse_args()
    root = Path(args.dir or tempfile.mkdtemp(prefix="bench-fleet-"))
    n_total = args.traces * args.samples
    print(f"building {args.traces} traces x {args.samples} samples = {n_total / 1e6:.0f} M "
          f"samples in {root} ...", file=sys.stderr)
    t0 = time.perf_counter()
    if args.dir and (root / "tables").exists():
        import shutil

        shutil.rmtree(root / "tables")
    mem = build_store(root, args.traces, args.samples)
    print(f"  built in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    man = read_manifest(root)
    snap = Snapshot(root, man)
    rows = []

    rec = in_memory(mem)
    assert rec.num_samples == n_total
    f_all = Filters(app=APP)
    f_base, f_new = Filters(app=APP, release=RELEASES[0]), Filters(app=APP, release=RELEASES[1])
    duck = DuckEngine()
    s = api.Session(snap, duck)  # the prebuilt snapshot: nothing to compact
    # Interleaved rounds, best of each: the machine is shared, so the baseline and the
    # queries should see the same load.
    runs: dict[str, list[float]] = {}
    out: dict[str, object] = {}
    steps = {
        "mem": lambda: summarize(rec),
        "top": lambda: api.top(s, f_all, 20),
        "diff": lambda: api.diff(s, f_base, f_new, 20, ["fn1:self>+1pp"]),
        "scan": lambda: duck.stacks(snap, duck.uploads(snap, f_all)),
    }
    for r in range(args.repeat):
        for k, fn in steps.items():
            t0 = time.perf_counter()
            out[k] = fn()
            runs.setdefault(k, []).append(time.perf_counter() - t0)
        print(f"  round {r + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in runs.items()),
              file=sys.stderr)
    t_mem = min(runs["mem"])
    base_rate = n_total / t_mem
    summ, doc = out["mem"], out["top"]
    # the store and the in-memory baseline agree on the top function
    k0 = summ.stats.order("self")[0]
    assert abs(doc["rows"][0]["selfMs"] - summ.stats.self_ms[k0]) < 1e-3 * summ.stats.self_ms[k0]
    for k, name in (
        ("mem", "`jsprof report` core in memory (`summarize`, baseline)"),
        ("top", "`fleet top` on DuckDB"),
        ("diff", "`fleet diff` (two releases, 200 resamples) on DuckDB"),
        ("scan", "  of which the DuckDB scan (uploads + stack sums)"),
    ):
        t = min(runs[k])
        rows.append((name, t, n_total / t, n_total / t / base_rate))
    duck.close()

    sim_rows = []
    if not args.no_dask:
        from distributed import Client, LocalCluster

        for workers in (2, 1) if args.sim else (2,):
            cl = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                              dashboard_address="127.0.0.1:0", host="127.0.0.1")
            client = Client(cl)
            dk = api.Session(snap, DaskEngine(client=client))
            if workers == 2:
                t, d2 = best(lambda dk=dk: api.top(dk, f_all, 20), args.repeat, "dask top")
                assert d2 == doc, "Dask and DuckDB disagree"
                rows.append(("`fleet top` on Dask, 2-worker LocalCluster", t, n_total / t,
                             n_total / t / base_rate))
                t, _ = best(lambda dk=dk: api.diff(dk, f_base, f_new, 20), args.repeat, "dask diff")
                rows.append(("`fleet diff` on Dask, 2-worker LocalCluster", t, n_total / t,
                             n_total / t / base_rate))
            if args.sim:
                for rep in (1, 2, 4):
                    m2 = orjson.loads(orjson.dumps(man))
                    for e in m2["releases"].values():
                        e["parts"]["weights"] = e["parts"]["weights"] * rep
                    sn = Snapshot(root, m2)
                    eng = DaskEngine(client=client)
                    t, _ = best(lambda sn=sn, eng=eng: eng.stacks(sn, eng.uploads(sn, f_all)),
                                args.repeat, f"sim {workers} workers x{rep}")
                    sim_rows.append((workers, rep, len(m2["releases"]) * len(
                        next(iter(m2["releases"].values()))["parts"]["weights"]), t,
                        rep * n_total / t))
            client.close()
            cl.close()

    import pyarrow.parquet as pq

    def n_rows(kind: str) -> int:
        return sum(pq.ParquetFile(p).metadata.num_rows for p in snap.files(kind))

    w_rows, f_rows = n_rows("weights"), n_rows("upload_frames")
    print(f"rows per upload: weights {w_rows / args.traces:.0f}, upload_frames "
          f"{f_rows / args.traces:.0f}")
    table_bytes = dir_bytes(tables_dir(root))
    gz = gzipped_upload_bytes(mem, 20, args.samples)
    up_s, smp_s = compactor_rate(mem, 60, args.samples)

    print(f"\nstore: {args.traces} traces, {n_total / 1e6:.0f} M samples, "
          f"{sum(e['stacks'] for e in man['releases'].values())} stacks in "
          f"{len(man['releases'])} releases; other work ran on this machine at the same time")
    print(f"\n| query | time (best of {args.repeat}) | samples/s | vs in-memory |")
    print("| --- | --- | --- | --- |")
    for name, t, rate, ratio in rows:
        print(f"| {name} | {t:.3f} s | {rate / 1e6:,.0f} M/s | {ratio:.1f}x |")
    print(f"\ntables: {table_bytes / 1e6:.1f} MB = {table_bytes / n_total:.3f} bytes/sample; "
          f"gzipped uploads: {gz:.2f} bytes/sample ({gz * n_total / 1e6:,.0f} MB for these "
          f"samples); ratio {table_bytes / n_total / gz:.3f}")
    print(f"compactor (real uploads through jsprof.store.Store): {up_s:.1f} uploads/s, "
          f"{smp_s / 1e6:.2f} M samples/s on one core")
    if sim_rows:
        print("\n| Dask workers | weights replicated | parquet parts | scan time | samples/s |")
        print("| --- | --- | --- | --- | --- |")
        for w_, rep, parts, t, rate in sim_rows:
            print(f"| {w_} | x{rep} | {parts} | {t:.2f} s | {rate / 1e6:,.0f} M/s |")
    if not args.dir:
        import shutil

        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
