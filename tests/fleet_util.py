"""Helpers for the fleet tests: synthetic field traces, uploaded to a real store."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from jsprof.formats.jsprof import dumps
from jsprof.trace import ProfilerTrace, Recording, TraceBuilder, Track

# A small app: call paths a page spends its time in, with relative weights.
PATHS = [
    (["main", "render", "layoutTree", "measure"], 30),
    (["main", "render", "layoutTree"], 8),
    (["main", "render", "paintList", "drawText"], 15),
    (["main", "onScroll", "throttle", ""], 6),
    (["main", "fetchData", "JSON.parse"], 9),
    (["main", "fib", "fib", "fib"], 10),
    (["main", "fib", "fib"], 4),
    (["main"], 3),
]
RES = "https://shop.example/static/app.min.js"


def make_trace(rng: np.random.Generator, n: int, interval: float = 10.0,
               hot: str | None = None, hot_share: float = 0.0, idle_share: float = 0.2,
               column: int = 3) -> ProfilerTrace:
    """n samples ~`interval` ms apart with jitter; some idle (with markers); `hot` gets
    `hot_share` of the JS samples on top of the usual paths; every function at `column`
    of its line (another build of the script: another column)."""
    b = TraceBuilder()
    lines = {name: 10 + 7 * i for i, name in enumerate(
        sorted({f for p, _ in PATHS for f in p} | ({hot} if hot else set())))}
    stacks = []
    weights = []
    for path, w in PATHS:
        stacks.append(b.stack_id(
            b.frame_id(f, b.resource_id(RES), lines[f], column) for f in path))
        weights.append(w)
    if hot:
        total = sum(weights)
        stacks.append(b.stack_id(
            b.frame_id(f, b.resource_id(RES), lines[f], column) for f in ["main", "render", hot]))
        weights.append(total * hot_share / (1 - hot_share))
    p = np.asarray(weights, float) / sum(weights)
    t = np.cumsum(rng.uniform(0.7, 1.6, n) * interval)
    pick = rng.choice(len(stacks), size=n, p=p)
    idle = rng.random(n) < idle_share
    markers = rng.choice(["gc", "paint", "other"], size=n)
    for i in range(n):
        if idle[i]:
            b.add_sample(float(t[i]), None, marker=str(markers[i]))
        else:
            b.add_sample(float(t[i]), stacks[pick[i]], marker="script")
    return b.build()


def upload(store: object, uid: str, trace: ProfilerTrace, **meta: object) -> None:
    meta.setdefault("sampleInterval", 10.0)
    store.append(uid, dict(meta), dumps(Recording([Track("main", trace)])))


def damage_a_body(store: Path, record: int = 2) -> None:
    """Flip one bit in the body of record `record` of the store's one segment: that
    record's checksum fails, every other one still reads."""
    from jsprof.store import segment as seg

    (segment,) = (store / "segments").glob("*.seg")
    fd = os.open(segment, os.O_RDONLY)
    try:
        heads = [h for h in seg.scan(fd) if isinstance(h, seg.RecordHeader)]
    finally:
        os.close(fd)
    data = bytearray(segment.read_bytes())
    data[heads[record].end - 5] ^= 0x04
    segment.write_bytes(bytes(data))


def fill_days(store: object, t0: float, days: int = 4, per_day: int = 3) -> None:
    """Uploads of app "shop", releases 1.0 and 1.1 (1.1 with a hot `slowThing`), `per_day`
    of each on each of `days` UTC days from `t0` (a midnight), at 01:00, 08:00, 15:00..."""
    rng = np.random.default_rng(5)
    for d in range(days):
        for rel, hot in (("1.0", None), ("1.1", "slowThing")):
            for i in range(per_day):
                upload(store, f"{rel}-{d}-{i}", make_trace(rng, 300, hot=hot, hot_share=0.2),
                       app="shop", release=rel, receivedAt=t0 + d * 86400e3
                       + (i * 7 + 1) * 3600e3)


# The start of a child process that a test kills (SIGKILL) at one stage of a store
# operation: `kill_at(stage)` is a hook for compact's `_merge_hook` or `_prune_hook`.
KILL_AT = """
import os, signal, sys
def kill_at(stage):
    def hook(s):
        if s == stage:
            os.kill(os.getpid(), signal.SIGKILL)
    return hook
"""


def vlq(v: int) -> str:
    """One source-map VLQ field (the base64 digits of v)."""
    b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    v = (-v << 1) | 1 if v < 0 else v << 1
    out = ""
    while True:
        d = v & 31
        v >>= 5
        out += b64[d | (32 if v else 0)]
        if not v:
            return out


def merged_recording(traces: list[ProfilerTrace], intervals: list[float]) -> Recording:
    """The traces as one recording, a track each, as `jsprof report` would read them."""
    return Recording([
        Track(f"t{i}", tr, sample_interval=iv)
        for i, (tr, iv) in enumerate(zip(traces, intervals, strict=True))
    ])


# ---- page loads resampled from real Chromium traces ------------------------------------------

REAL_TRACES = ("trace-basic.json", "trace-builtins.json", "trace-idle.json")


def _real_samples() -> list[tuple[np.ndarray, list, list]]:
    """Per real trace (tests/data/chromium, Chromium's own Profiler): each sample's time
    step from the one before, its stack as frames (name, url, line, column) outermost
    first (None: no stack), and its leaf function's name."""
    from pathlib import Path

    from jsprof import io

    out = []
    for name in REAL_TRACES:
        tr = io.load(Path(__file__).parent / "data" / "chromium" / name).tracks[0].trace
        frames = [(f.name, None if f.resource_id is None else tr.resources[f.resource_id],
                   f.line, f.column) for f in tr.frames]
        memo: dict[int, tuple] = {}

        def path(sid: int, memo: dict = memo, tr: ProfilerTrace = tr,
                 frames: list = frames) -> tuple:
            if sid not in memo:
                out_: list = []
                s = sid
                while s >= 0:
                    out_.append(frames[int(tr.stack_frame[s])])
                    s = int(tr.stack_parent[s])
                memo[sid] = tuple(reversed(out_))
            return memo[sid]

        stacks = [None if s < 0 else path(int(s)) for s in tr.sample_stack.tolist()]
        step = np.diff(tr.sample_time, prepend=tr.sample_time[0] - 10.0)
        out.append((step, stacks, [None if s is None else s[-1][0] for s in stacks]))
    return out


_REAL: list = []


def resampled_page_load(rng: np.random.Generator, plant: str | None = None,
                        repeat: int = 1, only: tuple[int, ...] = (0, 1, 2),
                        block: int = 10, blocks: tuple[int, int] = (30, 31),
                        rename: dict[str, str] | None = None) -> ProfilerTrace:
    """One page load made of the real traces' samples: blocks of `block` consecutive
    samples drawn with replacement from each of the traces `only` (indexes into
    REAL_TRACES), `blocks` (low, high exclusive) blocks each, times rebuilt from the real
    steps. `plant`: every
    sample whose leaf function has that name is taken `repeat` more times (a planted
    slowdown of that real function). `rename`: functions given other names."""
    if not _REAL:
        _REAL.extend(_real_samples())
    b = TraceBuilder()
    t = 0.0
    sid: dict[tuple, int | None] = {}  # a real stack -> its id in this page load
    for k in only:
        step, stacks, leaf = _REAL[k]
        n = len(step)
        for start in rng.integers(0, n - block, size=int(rng.integers(*blocks))).tolist():
            for i in range(start, start + block):
                times = 1 + (repeat if plant is not None and leaf[i] == plant else 0)
                st = stacks[i]
                if st is not None and st not in sid:
                    sid[st] = b.stack_id(
                        b.frame_id((rename or {}).get(nm, nm),
                                   None if u is None else b.resource_id(u), ln, c)
                        for nm, u, ln, c in st)
                for _ in range(times):
                    t += float(step[i])
                    b.add_sample(t, None if st is None else sid[st])
    return b.build()


DAY = 86400e3
T0 = 1795651200e3  # 2026-11-26 00:00 UTC


def split_trace(tr: ProfilerTrace, chunks: int, interval: float = 10.0
                ) -> list[ProfilerTrace]:
    """`tr` cut into `chunks` consecutive pieces, as a client sends one page load in
    several uploads; each sample keeps the weight it had in the whole trace (the last
    sample of a piece stood for the gap to the next piece's first), so the pieces add up
    to the trace exactly."""
    from jsprof.trace import sample_weights

    w = sample_weights(tr, interval)
    cuts = np.linspace(0, tr.num_samples, chunks + 1).astype(int)
    out = []
    for a, b in zip(cuts[:-1], cuts[1:], strict=True):
        out.append(tr.replace(
            sample_time=tr.sample_time[a:b], sample_stack=tr.sample_stack[a:b],
            sample_marker=None if tr.sample_marker is None else tr.sample_marker[a:b],
            sample_line=None if tr.sample_line is None else tr.sample_line[a:b],
            sample_weight=w[a:b]))
    return out


def real_store(path: object, seed: int, plant: object = None, n: int = 48,
               rename: dict[str, str] | None = None, route: object = None,
               chunks: object = None) -> object:
    """A store of `n` page loads resampled from the real Chromium traces: 12 a UTC day from
    2026-11-26, releases 1.9.0, 1.10.0, 1.11.0 in turn. `plant(i, day, release)`: "fib"
    (fib 6x slower in that page load), "none" (a page load without the trace fib runs
    in), or None (as drawn); `route(i)`: the upload's route (default /cart); `chunks(i)`:
    in how many uploads page load i is sent (`split_trace`; ids u{i}.{k} then, one
    `pageLoad` id; default 1, as u{i})."""
    from jsprof.store import Store

    rels = ["1.9.0", "1.10.0", "1.11.0"]
    st = Store(path)
    rng = np.random.default_rng(seed)
    for i in range(n):
        day, rel = i // 12, rels[i % 3]
        how = plant(i, day, rel) if plant else None
        tr = (resampled_page_load(rng, only=(1, 2), rename=rename) if how == "none"
              else resampled_page_load(rng, plant=how, repeat=5, rename=rename))
        k = chunks(i) if chunks else 1
        for j, piece in enumerate(split_trace(tr, k) if k > 1 else [tr]):
            upload(st, f"u{i:02d}" if k == 1 else f"u{i:02d}.{j}", piece, app="shop",
                   release=rel, route=route(i) if route else "/cart",
                   receivedAt=T0 + day * DAY + 3600e3 + i * 60e3 + j, pageLoad=f"load-{i}")
    st.close()
    return path


def fleet_export(tmp_path: object, n: int = 6, seed: int = 3) -> object:
    """`jsprof fleet export` of a real store of `n` page loads (`real_store`): a merged
    profile, one weighted sample per distinct stack with its count (jsprof format)."""
    from pathlib import Path

    from jsprof.cli import main

    root = Path(str(tmp_path))
    store = real_store(root / "store", seed, n=n)
    out = root / "fleet-export.jsprof.json"
    assert main(["fleet", "export", "--store", str(store), "--app", "shop", "-o", str(out)]) == 0
    return out


# ---- page loads of a fixed workload, with a sampler's and the devices' jitter ----------------


def jittered_page_load(rng: np.random.Generator, plant: str | None = None,
                       factor: float = 1.0, speed: float = 1.0) -> ProfilerTrace:
    """One page load running the same code every time: every sample of the three real
    Chromium traces (REAL_TRACES, in order), each taken Poisson(1) times (how a sampling
    profiler's count of code that runs for a fixed time varies from load to load), the
    samples whose leaf function is `plant` Poisson(`factor`) times (that function
    `factor` x slower: the change lives in samples, so in time); every step from one
    sample to the next times `speed` (a slower or busier device)."""
    if not _REAL:
        _REAL.extend(_real_samples())
    b = TraceBuilder()
    t = 0.0
    sid: dict[tuple, int | None] = {}
    for step, stacks, leaf in _REAL:
        lam = np.where(np.asarray([x == plant for x in leaf], bool), factor, 1.0)
        for i, copies in enumerate(rng.poisson(lam).tolist()):
            st = stacks[i]
            if st is not None and st not in sid:
                sid[st] = b.stack_id(
                    b.frame_id(nm, None if u is None else b.resource_id(u), ln, c)
                    for nm, u, ln, c in st)
            for _ in range(copies):
                t += float(step[i]) * speed
                b.add_sample(t, None if st is None else sid[st])
    return b.build()


def jittered_store(path: object, seed: int, factors: dict[str, float], loads: int = 12,
                   plant: str = "jsonWork", speed_sigma: float = 0.1,
                   url: object = None, interactions: bool = False) -> object:
    """A store of `loads` page loads per release of `factors` (release -> how much slower
    `plant` is in it), `jittered_page_load`s with a device speed per page load drawn
    log-normal (sigma `speed_sigma`); the releases' uploads interleaved in time within
    one UTC day (ids {release}-{i}). `url(release, resource)`: the script URL each
    release serves a resource at (default: as recorded). `interactions`: each page load's
    timeline has 1 to 3 interactions of 200 ms or more, the first over the whole load."""
    from jsprof.store import Store

    st = Store(path)
    rng = np.random.default_rng(seed)
    n = 0
    for i in range(loads):
        for rel, factor in factors.items():
            tr = jittered_page_load(rng, plant if factor != 1.0 else None, factor,
                                    float(np.exp(rng.normal(0.0, speed_sigma))))
            if url is not None:
                tr = tr.replace(resources=[url(rel, r) for r in tr.resources])
            n += 1
            extra = {}
            if interactions:
                end = float(tr.sample_time[-1]) + 1.0
                starts = [0.0, *rng.uniform(0.0, end - 300.0, int(rng.integers(0, 3))).tolist()]
                extra["timeline"] = {"interactions": [
                    {"id": k + 1, "type": "click", "start": a,
                     "duration": end if k == 0 else 300.0, "processingStart": a + 5.0,
                     "processingEnd": a + 250.0, "target": "button#buy"}
                    for k, a in enumerate(starts)]}
            upload(st, f"{rel}-{i}", tr, app="shop", release=rel, route="/cart",
                   receivedAt=T0 + 3600e3 + n * 60e3, pageLoad=f"{rel}-load-{i}", **extra)
    st.close()
    return path


def as_tables_format_10(store: Path) -> None:
    """The store's tables as format 10 wrote them: no Time view rollups in the manifest
    (the next compaction rolls them up from the samples tables, `rebuild.py`)."""
    import orjson

    from jsprof.store.tables.view import TIME_KINDS

    mp = store / "tables" / "_manifest.json"
    man = orjson.loads(mp.read_bytes())
    for entry in man["releases"].values():
        for k in TIME_KINDS:
            entry["parts"].pop(k)
    man["formatVersion"] = 10
    mp.write_bytes(orjson.dumps(man))
